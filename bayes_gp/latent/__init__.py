"""Latent GPs with non-Gaussian likelihoods: observation models, the Laplace approximation and its
PyTensor Op, variational bounds (Jaakkola–Jordan, Gaussian KL), expectation propagation
(Bernoulli-probit), and the :class:`LatentGP` model built on them."""

from bayes_gp.latent.ep import EPEvidence, EPResult, EPState, ep_run, expectation_propagation
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
from bayes_gp.latent.model import LIKELIHOODS, EPFit, LatentFit, LatentGP, SiteFit, VIFit
from bayes_gp.latent.op import LaplaceLogp, VariationalBound, laplace_logp
from bayes_gp.latent.vi import VIResult, gaussian_kl, jaakkola_jordan

__all__ = [
    "LatentGP",
    "LatentFit",
    "VIFit",
    "EPFit",
    "SiteFit",
    "EPState",
    "EPResult",
    "EPEvidence",
    "expectation_propagation",
    "ep_run",
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
    "VariationalBound",
    "VIResult",
    "gaussian_kl",
    "jaakkola_jordan",
]
