"""Long version of the NUTS agreement in tests/latent/test_model.py (issue 35: CI keeps a short
version, ``test_nuts_laplace_and_joint_latent_nuts_agree_with_quadrature`` against a quadrature
reference, and checks the Gaussian case exactly by the sampled log density,
``test_gaussian_laplace_model_is_gpregressions_model``). Here the four NUTS runs of 400 + 400
draws: Poisson Laplace against joint latent NUTS, Gaussian LatentGP against GPRegression."""

from __future__ import annotations

import numpy as np
import pytest

from bayes_gp import GPRegression, LatentGP
from tests.latent.test_model import Y_COUNTS, Y_REAL, N, X


def test_nuts_laplace_agrees_with_joint_latent_nuts_and_the_exact_gp():
    """Poisson counts: the hyperparameter posterior of NUTS with the Laplace-integrated GP
    against joint NUTS over latent values (posterior means within 4 Monte Carlo standard
    errors plus the Laplace bias allowance of 10% of a posterior sd); each Laplace draw carries
    its mode and LA-LOO terms. Gaussian: NUTS with Laplace against GPRegression's NUTS."""
    import arviz as az

    m = LatentGP(X, Y_COUNTS, "expquad", "poisson")
    kw = dict(draws=400, tune=400, chains=2, random_seed=5)
    la = m.sample(method="nuts", **kw)
    lat = m.sample(method="nuts_joint", **kw)
    assert la["posterior"]["f_mode"].shape == (2, 400, N)
    assert la["log_likelihood"]["y"].shape == (2, 400, N)
    for p in m.hyperparameters:
        a, b = az.summary(la, var_names=[p]), az.summary(lat, var_names=[p])
        mcse = np.hypot(float(a["mcse_mean"].iloc[0]), float(b["mcse_mean"].iloc[0]))
        sd = float(b["sd"].iloc[0])
        assert abs(float(a["mean"].iloc[0]) - float(b["mean"].iloc[0])) < 4 * mcse + 0.1 * sd, p
    assert float(az.loo(la).elpd) == pytest.approx(float(az.loo(lat).elpd), abs=2.0)

    e = GPRegression(X, Y_REAL, "expquad")
    g = LatentGP(X, Y_REAL, "expquad", "gaussian", jitter=e.jitter_info.relative)
    ga, ge = g.sample(**kw), e.sample(**kw)
    for p in g.hyperparameters:
        a, b = az.summary(ga, var_names=[p]), az.summary(ge, var_names=[p])
        mcse = np.hypot(float(a["mcse_mean"].iloc[0]), float(b["mcse_mean"].iloc[0]))
        assert abs(float(a["mean"].iloc[0]) - float(b["mean"].iloc[0])) < 4 * mcse, p
