"""The explicit choice between the Gaussian and the latent hierarchical GP.

:func:`hierarchical_gp` builds :class:`~bayes_gp.hierarchical.model.HierarchicalGP` for
``likelihood="gaussian"`` (the functions integrated out exactly) and
:class:`~bayes_gp.hierarchical.latent.HierarchicalLatentGP` for the others (Laplace): the one
place that knows both classes, above the two modules (the latent model builds on the Gaussian
one's declaration of the hierarchy).
"""

from __future__ import annotations

from typing import Any

from bayes_gp.hierarchical.latent import HierarchicalLatentGP
from bayes_gp.hierarchical.model import HierarchicalGP, check_likelihood

__all__ = ["hierarchical_gp"]


def hierarchical_gp(
    data, x, y, group, kernel: Any = "expquad", *, likelihood: str = "gaussian", **options
) -> HierarchicalGP | HierarchicalLatentGP:
    """A hierarchical GP of ``likelihood``: :class:`~bayes_gp.HierarchicalGP` for
    ``"gaussian"``, else :class:`~bayes_gp.HierarchicalLatentGP` (``"poisson"``,
    ``"negative_binomial"``, ``"binomial"``, ``"bernoulli"``, ``"student_t"``).

    Parameters
    ----------
    data, x, y, group, kernel
        As :class:`~bayes_gp.HierarchicalGP`'s.
    likelihood : str
        The observation model.
    **options
        The chosen class's other arguments (``shared``, ``pooling``, ``covariates``,
        ``random_intercept``, ``priors``, ``jitter``; ``approx`` for the Gaussian;
        ``exposure``, ``trials``, ``link`` for the latent model).

    Returns
    -------
    HierarchicalGP or HierarchicalLatentGP
    """
    check_likelihood(likelihood)
    if likelihood == "gaussian":
        return HierarchicalGP(data, x, y, group, kernel, **options)
    return HierarchicalLatentGP(data, x, y, group, kernel, likelihood=likelihood, **options)
