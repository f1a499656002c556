"""Hierarchical GPs for grouped curves: a population function shared by all groups and a
deviation per group, with pooled group hyperparameters (:class:`HierarchicalGP`), and the exact
structured marginal likelihood that integrates the functions out
(:mod:`bayes_gp.hierarchical.woodbury`); with a non-Gaussian likelihood the latent model
:class:`HierarchicalLatentGP` (:mod:`bayes_gp.hierarchical.latent`, Laplace);
:func:`hierarchical_gp` chooses between them by ``likelihood``.

Modules: ``model`` the Gaussian model class and :class:`~bayes_gp.hierarchical.model.GroupedSpec`
(the declaration of the hierarchy both classes share); ``strategy`` its likelihood strategies
(exact, HSGP); ``woodbury`` the exact structured factorisation; ``hsgp`` the basis
approximation's numerics; ``latent`` the latent model; ``factory`` :func:`hierarchical_gp`."""

from bayes_gp.hierarchical.factory import hierarchical_gp
from bayes_gp.hierarchical.latent import HierarchicalLatentGP
from bayes_gp.hierarchical.model import HierarchicalGP
from bayes_gp.hierarchical.woodbury import StructuredFactor as StructuredFactor
from bayes_gp.hierarchical.woodbury import structured_logp

#: What users use (``structured_logp``: the likelihood for a user's own PyMC model); the solver's
#: factor ``StructuredFactor`` stays importable (the "as" import), not exported.
__all__ = ["HierarchicalGP", "HierarchicalLatentGP", "hierarchical_gp", "structured_logp"]
