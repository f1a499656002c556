"""Hierarchical GPs for grouped curves: a population function shared by all groups and a
deviation per group, with pooled group hyperparameters (:class:`HierarchicalGP`), and the exact
structured marginal likelihood that integrates the functions out
(:mod:`bayes_gp.hierarchical.structured`)."""

from bayes_gp.hierarchical.model import HierarchicalGP
from bayes_gp.hierarchical.structured import StructuredFactor, structured_logp

__all__ = ["HierarchicalGP", "StructuredFactor", "structured_logp"]
