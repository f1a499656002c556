"""NUTS over a deep kernel's GP hyperparameters, last layer or mixture coefficients with the
longer runs and larger data sets that ``tests/deep/test_dkl.py`` used before issue 35 (its short
versions stay there)."""

from __future__ import annotations

import arviz as az
import numpy as np
import pytest

from bayes_gp import DeepKernelRegression
from tests.deep.test_dkl import _lpd, _step


def test_nuts_over_gp_hyperparameters_with_fixed_features_long():
    """80 points, 2 x (300 + 300) draws: r-hat < 1.05, the MAP noise inside the central 99 %
    of its posterior, and the predictive mixture's held-out density within 0.1 nats of the
    plug-in fit's."""
    x, y = _step(80, seed=2)
    xt, yt = _step(300, seed=1002)
    dkl = DeepKernelRegression(x, y, hidden=(8,), features=1)
    fit = dkl.fit_map(maxiter=300, random_seed=0)
    idata = dkl.sample(draws=300, tune=300, chains=2, sampler="pymc", random_seed=1, network=fit)
    post = idata["posterior"]
    assert set(post.data_vars) >= {"ls", "eta", "sigma"}
    rhat = az.rhat(idata, var_names=["ls", "eta", "sigma"])
    assert max(float(rhat[v]) for v in ("ls", "eta", "sigma")) < 1.05
    sig = np.asarray(post["sigma"]).ravel()
    assert np.quantile(sig, 0.005) < fit.params["sigma"] < np.quantile(sig, 0.995)
    mix = dkl.predict(xt, idata, include_noise=True)
    plug = dkl.predict(xt, fit, include_noise=True)
    assert mix.extra["n_draws"] == 300  # predict thins to 300 draws
    lpd_mix = dkl.log_predictive_density(xt, yt, idata).mean()
    assert lpd_mix > _lpd(plug, yt).mean() - 0.1, lpd_mix


@pytest.mark.parametrize("what", ["last_layer", "mixture"])
def test_nuts_over_last_layer_or_mixture_coefficients_long(what: str):
    """60 points, 2 x (300 + 200) draws with a dense mass matrix: every sampled coefficient
    moves, and the held-out density is within 0.3 nats of the plug-in fit's."""
    x, y = _step(60, seed=3)
    xt, yt = _step(300, seed=1003)
    activation = "mixture" if what == "mixture" else "tanh"
    dkl = DeepKernelRegression(x, y, hidden=(4,), features=1, activation=activation)
    fit = dkl.fit_map(maxiter=300, random_seed=0)
    idata = dkl.sample(
        draws=200, tune=300, chains=2, sampler="pymc", random_seed=2, network=fit,
        sample_last_layer=what == "last_layer", sample_mixture=what == "mixture",
    )  # fmt: skip
    name = "W_out" if what == "last_layer" else "lam0"
    draws = np.asarray(idata["posterior"][name])
    assert draws.shape[:2] == (2, 200) and np.all(np.std(draws, axis=(0, 1)) > 0)
    lpd = dkl.log_predictive_density(xt, yt, idata).mean()
    lpd_plug = _lpd(dkl.predict(xt, fit, include_noise=True), yt).mean()
    assert np.isfinite(lpd) and lpd > lpd_plug - 0.3, (lpd, lpd_plug)
