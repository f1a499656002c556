"""The monthly sunspots declared model (``models/sunspots.py``): data and the square-root
transform, the O(n) quasiseparable likelihood against the dense one and the docstring's kernel
formula, and a MAP fit that finds the ~11-year cycle and forecasts 1974-1983 better than a
constant."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from bayes_gp import GPRegression
from bayes_gp.declared import Dataset
from bayes_gp.kernels.statespace import to_term
from bayes_gp.predictive import gaussian_scores
from bayes_gp.solvers.exact import ExactLikelihood
from bayes_gp.solvers.quasisep import QuasisepLikelihood

MODEL = "sunspots"

#: A hyperparameter point near the MAP fit (years; square-root scale).
POINT = {
    "cycle_period": 10.6,
    "cycle_ls": 13.0,
    "cycle_eta": 2.2,
    "cycle_harmonic": 0.3,
    "trend_eta": 1.4,
    "trend_ls": 17.0,
    "short_eta": 0.9,
    "short_ls": 0.14,
    "sigma": 0.6,
}


def kernel_matrix(t: np.ndarray, p: dict) -> np.ndarray:
    """The module docstring's k(t, t') transcribed in NumPy (R&W eq. 4.17 Matérn-3/2, cosines,
    Matérn-1/2), without the noise."""
    tau = np.abs(t[:, None] - t[None, :])

    def m32(ell):
        u = np.sqrt(3.0) * tau / ell
        return (1.0 + u) * np.exp(-u)

    w = 2.0 * np.pi * tau / p["cycle_period"]
    cycle = p["cycle_eta"] ** 2 * m32(p["cycle_ls"])
    cycle = cycle * (np.cos(w) + p["cycle_harmonic"] ** 2 * np.cos(2.0 * w))
    trend = p["trend_eta"] ** 2 * m32(p["trend_ls"])
    short = p["short_eta"] ** 2 * np.exp(-tau / p["short_ls"])
    return cycle + trend + short


@pytest.fixture(scope="module")
def gp(decl, data):
    return decl.build(data, "map")


@pytest.fixture(scope="module")
def map_fit(gp):
    return gp.fit_map(n_restarts=1, random_seed=0)


def test_data_months_split_and_square_root(decl, data):
    t, counts = decl.module.monthly_series()
    assert t.shape == counts.shape == (2820,)
    assert t[0] == 1749.0 and t[-1] == pytest.approx(1983 + 11 / 12)
    assert np.allclose(np.diff(t), 1 / 12, atol=1e-9)
    assert counts.min() == 0.0 and counts.max() == pytest.approx(253.8)
    assert data.X_train.shape == (2700, 1) and data.X_test.shape == (120, 1)
    assert data.X_test[0, 0] == pytest.approx(1974.0)
    assert np.array_equal(data.y_train, np.sqrt(counts[:2700]))
    assert np.array_equal(data.y_test, np.sqrt(counts[2700:]))
    assert decl.load_data(fast=False).X_train.shape == (2700, 1)  # fast mode: same data


def test_square_root_stabilises_the_monthly_scatter(decl):
    """The docstring's reason for the transform: within a calendar year the scatter of the
    month-to-month differences grows with the year's level like sqrt(mean) on the raw scale
    (log-log slope 0.47), and not at all after the square root (-0.09)."""
    _, counts = decl.module.monthly_series()
    slopes = {}
    for name, z in (("raw", counts), ("sqrt", np.sqrt(counts))):
        years = z.reshape(-1, 12)
        level, scatter = years.mean(axis=1), np.diff(years, axis=1).std(axis=1)
        keep = level > 0.5  # log of the level
        slopes[name] = np.polyfit(np.log(level[keep]), np.log(scatter[keep]), 1)[0]
    assert slopes["raw"] == pytest.approx(0.47, abs=0.01)
    assert slopes["sqrt"] == pytest.approx(-0.09, abs=0.01)


def test_builds_the_quasiseparable_exact_gp(decl, data, gp):
    assert isinstance(gp, GPRegression)
    assert gp.quasiseparable and isinstance(gp.marginal, QuasisepLikelihood)
    assert gp.marginal.exact and gp.approximation is None
    assert tuple(gp.hyperparameters) == decl.module.HYPERPARAMETERS
    assert to_term(gp._cov).dim == 2 * (2 + 2) + 2 + 1  # the docstring's state dimension
    assert "quasiseparable" in dict(gp.describe())["likelihood"]
    with pytest.raises(ValueError, match="fits by `method` 'map', 'nuts'"):
        decl.build(data, "laplace")
    with pytest.raises(ValueError, match="`y_sd` must be positive"):
        decl.module.kernel(0.0)


@pytest.mark.slow
def test_log_marginal_likelihood_equals_dense_path_and_formula(decl, data):
    """On the first 400 months: the O(n) recursion equals the dense Cholesky likelihood, which
    equals N(y | mean, K + (sigma^2 + jitter) I) with K from the docstring's formula (scipy).
    (Gradients of the two paths are compared in tests/regression/test_gpr_quasisep.py.)"""
    n = 400
    sub = Dataset(data.X_train[:n], data.y_train[:n], ["year"], "sqrt_sunspots", "first 400")
    qs = decl.module.build(sub, "map", structure="quasiseparable")
    dense = decl.module.build(sub, "map", structure="dense")
    assert qs.quasiseparable and isinstance(dense.marginal, ExactLikelihood)
    got = qs.log_marginal_likelihood(POINT)
    want = dense.log_marginal_likelihood(POINT)
    assert got == pytest.approx(want, abs=1e-8)  # measured: 2e-13
    t, y = sub.X_train[:, 0], sub.y_train
    C = kernel_matrix(t, POINT) + (POINT["sigma"] ** 2 + dense.jitter) * np.eye(n)
    ref = stats.multivariate_normal(np.full(n, y.mean()), C).logpdf(y)
    assert want == pytest.approx(ref, abs=1e-8)  # measured: 0 (both 2e-13 off long double)
    # a different point gives a different value: the check is not vacuous
    assert abs(qs.log_marginal_likelihood({**POINT, "cycle_period": 11.5}) - got) > 1.0


@pytest.mark.slow
def test_map_fit_finds_the_cycle_and_beats_a_constant_forecast(gp, map_fit, data):
    fit = map_fit
    p = {k: float(v) for k, v in fit.params.items()}
    assert fit.converged and fit.grad_norm < 1e-3
    assert fit.log_marginal_likelihood == pytest.approx(gp.log_marginal_likelihood(fit.params))
    assert 10.0 < p["cycle_period"] < 12.5  # the Schwabe cycle
    assert p["cycle_ls"] > p["cycle_period"]  # correlated over more than one cycle
    assert p["trend_ls"] > p["cycle_period"]  # the trend is slower than the cycle
    assert p["short_ls"] < 1.0 and 0.3 < p["sigma"] < 1.0
    # held out 1974-1983: the package's scores against a constant mean with the training sd
    model = gp.scores(data.y_test, gp.prediction_columns(data.X_test, fit))
    m, s = data.y_train.mean(), data.y_train.std()
    ones = np.ones_like(data.y_test)
    z = stats.norm.ppf(0.97)
    const = gaussian_scores(
        data.y_test,
        {"mean": m * ones, "sd_y": s * ones, "lower_94": (m - z * s) * ones,
         "upper_94": (m + z * s) * ones},
    )  # fmt: skip
    assert model["rmse"] < 0.8 * const["rmse"]
    assert model["mean_log_predictive_density"] > const["mean_log_predictive_density"] + 0.2
    assert model["coverage_94"] > 0.8
