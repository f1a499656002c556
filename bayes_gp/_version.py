"""The package version, in a module of its own so that the report and the workflow can name it
without importing the whole package (:mod:`bayes_gp` imports them)."""

__version__ = "0.1.0"
