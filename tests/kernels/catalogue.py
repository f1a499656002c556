"""Every kernel of the catalogue as a test case, for the property suite and the model tests.

Each case builds its kernel from a dict of hyperparameters that may be NumPy values or PyTensor
variables, so the same case serves value checks, gradient checks and PyMC models.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pymc as pm
import pytensor.tensor as pt

import bayes_gp.kernels as K
from bayes_gp.linalg import NotPSDWarning


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[dict], object]
    params: dict = field(default_factory=dict)
    input_dim: int = 2
    stationary: bool = True
    psd: bool = True
    #: hyperparameters that must stay positive (sampled as LogNormal in models)
    positive: tuple[str, ...] = ("ls",)

    def kernel(self, **overrides):
        p = {k: np.asarray(v, float) for k, v in self.params.items()}
        p.update(overrides)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NotPSDWarning)
            return self.build(p)

    def __repr__(self) -> str:  # readable pytest ids
        return self.name


def _sin_feats(X):
    return pt.concatenate([pt.sin(X), pt.cos(2.0 * X), X], axis=1)


def _ps_sigma(ls, c):
    """Sigma(x) = L(x) L(x)^T with a lower-triangular L(x): a smooth PD matrix field, (n, 2, 2)."""

    def sigma(X):
        l11 = ls[0] * pt.exp(0.3 * pt.tanh(X[:, 0]))
        l21 = c * pt.tanh(X[:, 1])
        l22 = ls[1] * pt.exp(0.2 * pt.sin(X[:, 1]))
        s00, s01, s11 = pt.square(l11), l11 * l21, pt.square(l21) + pt.square(l22)
        return pt.stack([pt.stack([s00, s01], axis=-1), pt.stack([s01, s11], axis=-1)], axis=1)

    return sigma


CASES: list[Case] = [
    Case("ExpQuad", lambda p: K.ExpQuad(2, ls=p["ls"]), {"ls": [0.8, 1.7]}),
    Case("Matern12", lambda p: K.Matern12(2, ls=p["ls"]), {"ls": [0.8, 1.7]}),
    Case("Matern32", lambda p: K.Matern32(2, ls=p["ls"]), {"ls": [0.8, 1.7]}),
    Case("Matern52", lambda p: K.Matern52(2, ls=p["ls"]), {"ls": [0.8, 1.7]}),
    Case("Matern_nu0.7", lambda p: K.Matern(2, nu=0.7, ls=p["ls"]), {"ls": [0.8, 1.7]}),
    Case("Matern_nu3.5", lambda p: K.Matern(2, nu=3.5, ls=p["ls"]), {"ls": [0.8, 1.7]}),
    Case("Exponential", lambda p: K.Exponential(2, ls=p["ls"]), {"ls": 1.3}),
    Case(
        "GammaExponential",
        lambda p: K.GammaExponential(2, gamma=p["gamma"], ls=p["ls"]),
        {"ls": [0.8, 1.7], "gamma": 1.4},
        positive=("ls", "gamma"),
    ),
    Case(
        "RatQuad",
        lambda p: K.RatQuad(2, alpha=p["alpha"], ls=p["ls"]),
        {"ls": [0.8, 1.7], "alpha": 1.5},
        positive=("ls", "alpha"),
    ),
    *[
        Case(
            f"PiecewisePolynomial_q{q}",
            lambda p, q=q: K.PiecewisePolynomial(2, ls=p["ls"], q=q),
            {"ls": [2.5, 3.0]},
        )
        for q in range(4)
    ],
    Case("BesselOscillatory", lambda p: K.BesselOscillatory(2, nu=1.5, ls=p["ls"]), {"ls": 0.6}),
    Case(
        "Periodic",
        lambda p: K.Periodic(2, period=p["period"], ls=p["ls"]),
        {"ls": [0.9, 1.2], "period": [1.3, 2.1]},
        positive=("ls", "period"),
    ),
    Case(
        "Periodized",
        lambda p: K.Periodized(K.Matern52(2, ls=p["ls"]), period=p["period"], n_images=2),
        {"ls": [0.4, 0.5], "period": 1.7},
        positive=("ls", "period"),
    ),
    Case(
        "FactorAnalysis_ExpQuad",
        lambda p: K.ExpQuad(2, metric=K.FactorAnalysis(p["Lambda"], p["psi"])),
        {"Lambda": [[0.7], [-0.4]], "psi": [0.5, 1.2]},
        positive=("psi",),
    ),
    Case(
        "DotProduct",
        lambda p: K.DotProduct(2, sigma0=p["sigma0"], Sigma_p=p["Sigma_p"]),
        {"sigma0": 0.7, "Sigma_p": [1.5, 0.5]},
        stationary=False,
        positive=("sigma0", "Sigma_p"),
    ),
    Case(
        "Polynomial",
        lambda p: K.Polynomial(2, p=3, sigma0=p["sigma0"]),
        {"sigma0": 0.9},
        stationary=False,
        positive=("sigma0",),
    ),
    Case(
        "Sigmoid",
        lambda p: K.Sigmoid(2, a=p["a"], b=p["b"], check="none"),
        {"a": 0.1, "b": 0.1},  # PSD enough at these inputs for K + sigma^2 I
        stationary=False,
        psd=False,
        positive=(),
    ),
    Case(
        "PRMLKernel",
        lambda p: K.PRMLKernel(2, p["theta0"], p["theta1"], p["theta2"], p["theta3"]),
        {"theta0": 1.2, "theta1": [2.0, 0.5], "theta2": 0.3, "theta3": 0.4},
        stationary=False,
        positive=("theta0", "theta1", "theta2", "theta3"),
    ),
    Case(
        "BasisFunction",
        lambda p: K.BasisFunction(2, _sin_feats, Sigma_p=p["Sigma_p"]),
        {"Sigma_p": [1.0, 0.5, 2.0, 0.7, 1.1, 0.3]},
        stationary=False,
        positive=("Sigma_p",),
    ),
    Case(
        "Normalized",
        lambda p: K.Normalized(K.Polynomial(2, p=2, sigma0=p["sigma0"])),
        {"sigma0": 1.1},
        stationary=False,
        positive=("sigma0",),
    ),
    Case(
        "VerticalScale",
        lambda p: K.VerticalScale(K.ExpQuad(2, ls=p["ls"]), lambda X: pt.exp(0.3 * X[:, 0])),
        {"ls": [0.8, 1.7]},
        stationary=False,
    ),
    Case(
        "Warped",
        lambda p: K.Warped(K.ExpQuad(2, ls=p["ls"]), lambda X: pt.sinh(X), input_dim=2),
        {"ls": [0.8, 1.7]},
        stationary=False,
    ),
    Case("Power", lambda p: K.Power(K.Matern32(2, ls=p["ls"]), 3), {"ls": [0.8, 1.7]}),
    Case(
        "Additive",
        lambda p: K.Additive(
            [
                K.ExpQuad(2, ls=p["ls"][0], active_dims=[0]),
                K.Matern52(2, ls=p["ls"][1], active_dims=[1]),
            ],
            max_order=2,
            variances=[p["s1"], p["s2"]],
        ),
        {"ls": [0.8, 1.7], "s1": 0.6, "s2": 1.4},
        positive=("ls", "s1", "s2"),
    ),
    Case(
        "Sum_with_pymc",
        lambda p: (
            K.ExpQuad(2, ls=p["ls"]) * 2.0 * K.Periodic(2, period=3.0, ls=2.0)
            + pm.gp.cov.Linear(2, c=[0.1, -0.2])
        ),
        {"ls": [0.8, 1.7]},
        stationary=False,
    ),
    # --- non-stationary kernels, R&W §4.2.3 -----------------------------------------------------
    Case(
        "NeuralNetwork",
        lambda p: K.NeuralNetwork(2, Sigma=p["Sigma"]),
        {"Sigma": [1.0, 2.0, 0.5]},
        stationary=False,
        positive=("Sigma",),
    ),
    Case(
        "GaussianBasis",
        lambda p: K.GaussianBasis(2, sigma_g=p["sigma_g"], sigma_u=p["sigma_u"]),
        {"sigma_g": 0.8, "sigma_u": 1.5},
        stationary=False,
        positive=("sigma_g", "sigma_u"),
    ),
    Case(
        "Gibbs",
        lambda p: K.Gibbs(2, lambda X: p["ls"] * pt.exp(0.4 * pt.tanh(X))),
        {"ls": [0.8, 1.7]},
        stationary=False,
    ),
    Case(
        "PaciorekSchervish",
        lambda p: K.PaciorekSchervish(2, K.Matern52(2, ls=1.0), _ps_sigma(p["ls"], p["c"])),
        {"ls": [0.8, 1.2], "c": 0.5},
        stationary=False,
    ),
    Case(
        "OHagan",
        lambda p: K.OHagan(
            2,
            lambda X: pt.concatenate([pt.ones_like(X[:, :1]), X], axis=1),
            W0=p["W0"],
            base=K.ExpQuad(2, ls=p["ls"]),
        ),
        {"W0": [1.0, 0.5, 0.8], "ls": [0.8, 1.7]},
        stationary=False,
        positive=("W0", "ls"),
    ),
    Case(
        # min(x, x') needs x >= 0: the property inputs lie in [-2, 2], so warp x0 -> exp(a x0) > 0
        "Wiener",
        lambda p: K.Warped(K.Wiener(1), lambda X: pt.exp(p["a"] * X), input_dim=2, active_dims=[0]),
        {"a": 0.7},
        stationary=False,
        positive=("a",),
    ),
]

# --- change points and windows (Garnett et al. 2009; Lloyd et al. 2014), spectral mixtures ------
CASES += [
    Case(
        "ChangePoints",
        lambda p: K.ChangePoints(
            [K.ExpQuad(2, ls=p["ls"]), K.Matern32(2, ls=1.3, active_dims=[1]), K.Matern52(2, ls=0.6)],
            p["locations"],
            p["steepness"],
        ),
        {"ls": [0.8, 1.7], "locations": [-0.5, 0.7], "steepness": [2.0, 4.0]},
        stationary=False,
        positive=("ls", "steepness"),
    ),
    Case(
        "ChangeWindow",
        lambda p: K.ChangeWindow(
            K.Matern52(2, ls=p["ls"]), K.ExpQuad(2, ls=1.1), p["start"], p["end"], p["steepness"],
            column=1,
        ),
        {"ls": [0.8, 1.7], "start": -0.6, "end": 0.9, "steepness": 3.0},
        stationary=False,
        positive=("ls", "steepness"),
    ),
    Case(
        "SpectralMixture",
        lambda p: K.SpectralMixture(2, p["weights"], p["means"], p["variances"]),
        {
            "weights": [0.7, 0.4],
            "means": [[0.3, 0.1], [0.8, 0.5]],
            "variances": [[0.05, 0.2], [0.1, 0.03]],
        },
        positive=("weights", "means", "variances"),
    ),
    Case(
        # the envelope length-scales are not called "ls": they are per component, not ARD
        "MaternSpectralMixture",
        lambda p: K.MaternSpectralMixture(
            p["weights"], p["means"], p["envelope_ls"], nu=2.5, input_dim=2, active_dims=[1]
        ),
        {"weights": [0.7, 0.4], "means": [0.3, 0.8], "envelope_ls": [0.9, 1.6]},
        positive=("weights", "means", "envelope_ls"),
    ),
]

STATIONARY = [c for c in CASES if c.stationary]
PSD_CASES = [c for c in CASES if c.psd]
