"""Inference: the vocabulary of fit methods (:mod:`bayes_gp.inference.methods`: ``nuts``,
``nuts_joint``, ``map``, ``vi``, ``ep``), type-II fits (ML-II / MAP with restarts) and NUTS
backends."""

from bayes_gp.inference.typeii import MapFit, Restart, optimize

__all__ = ["MapFit", "Restart", "optimize"]
