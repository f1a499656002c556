"""Latent GPs with non-Gaussian likelihoods: observation models, the Laplace approximation and its
PyTensor Op, and the :class:`LatentGP` model built on them."""

from bayes_gp.latent.laplace import LaplaceResult, grad_theta, laplace
from bayes_gp.latent.likelihoods import (
    Bernoulli,
    Binomial,
    Gaussian,
    LatentLikelihood,
    NegativeBinomial,
    Poisson,
    StudentT,
)
from bayes_gp.latent.model import LIKELIHOODS, LatentFit, LatentGP
from bayes_gp.latent.op import LaplaceLogp, laplace_logp

__all__ = [
    "LatentGP",
    "LatentFit",
    "LIKELIHOODS",
    "Bernoulli",
    "Binomial",
    "Gaussian",
    "LatentLikelihood",
    "NegativeBinomial",
    "Poisson",
    "StudentT",
    "LaplaceResult",
    "grad_theta",
    "laplace",
    "LaplaceLogp",
    "laplace_logp",
]
