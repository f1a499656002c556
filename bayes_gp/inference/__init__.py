"""Inference: type-II fits (ML-II / MAP with restarts) and NUTS backends."""

from bayes_gp.inference.typeii import MapFit, Restart, optimize

__all__ = ["MapFit", "Restart", "optimize"]
