"""Latent GPs with non-Gaussian likelihoods: observation models, the Laplace approximation and its
PyTensor Op, variational bounds (Jaakkola–Jordan, Gaussian KL), expectation propagation
(Bernoulli-probit), and the :class:`LatentGP` model built on them."""

from bayes_gp.latent.censored import CensoredGaussian, LogNormal, Weibull
from bayes_gp.latent.custom import CustomLikelihood, LogDensity
from bayes_gp.latent.ep import EPEvidence as EPEvidence
from bayes_gp.latent.ep import EPResult as EPResult
from bayes_gp.latent.ep import EPState as EPState
from bayes_gp.latent.ep import ep_run, expectation_propagation
from bayes_gp.latent.hurdle import HurdleNegativeBinomial, HurdlePoisson
from bayes_gp.latent.laplace import LaplaceResult as LaplaceResult
from bayes_gp.latent.laplace import grad_theta as grad_theta
from bayes_gp.latent.laplace import laplace
from bayes_gp.latent.likelihoods import (
    Bernoulli,
    Beta,
    Binomial,
    Gamma,
    Gaussian,
    LatentLikelihood,
    NegativeBinomial,
    Poisson,
    StudentT,
    ZeroInflatedNegativeBinomial,
    ZeroInflatedPoisson,
)
from bayes_gp.latent.model import LIKELIHOODS, EPFit, LatentFit, LatentGP, SiteFit, VIFit
from bayes_gp.latent.op import LaplaceLogp as LaplaceLogp
from bayes_gp.latent.op import VariationalBound as VariationalBound
from bayes_gp.latent.op import laplace_logp
from bayes_gp.latent.ordinal import Ordinal
from bayes_gp.latent.vi import VIResult as VIResult
from bayes_gp.latent.vi import gaussian_kl, jaakkola_jordan
from bayes_gp.latent.zero_gp import ZeroGP as ZeroGP  # registers LatentGP(zero_gp=True)

#: What users use: the model, its fit types, the observation models and the algorithms (the
#: Laplace mode, EP, the variational bounds, ``laplace_logp`` for a user's own PyMC model). The
#: Ops and the solvers' state and result records stay importable from here and from their modules
#: (``LaplaceLogp``, ``VariationalBound``, ``LaplaceResult``, ``EPState``, ``EPResult``,
#: ``EPEvidence``, ``VIResult``, ``grad_theta``: the "as" imports) but are not the package's face.
__all__ = [
    "LatentGP",
    "LatentFit",
    "VIFit",
    "EPFit",
    "SiteFit",
    "LIKELIHOODS",
    "Bernoulli",
    "Beta",
    "Binomial",
    "Gamma",
    "Gaussian",
    "HurdleNegativeBinomial",
    "HurdlePoisson",
    "CensoredGaussian",
    "LogNormal",
    "Weibull",
    "LatentLikelihood",
    "LogDensity",
    "CustomLikelihood",
    "NegativeBinomial",
    "Ordinal",
    "Poisson",
    "StudentT",
    "ZeroInflatedNegativeBinomial",
    "ZeroInflatedPoisson",
    "laplace",
    "laplace_logp",
    "expectation_propagation",
    "ep_run",
    "gaussian_kl",
    "jaakkola_jordan",
]
