r"""``MultiOutputGP(mean="linear")``: :math:`m_p(x) = c_p + x^T \beta_p` in every path.

References transcribed from the module docstrings: the stacked outputs
:math:`\operatorname{vec}(Y) \sim N(\operatorname{vec}(M), \sum_q B_q \otimes K_q +
\operatorname{diag}(\sigma^2) \otimes I_n)` (output-major) with :math:`M_{ip} = c_p + x_i^T
\beta_p`, restricted to the observed entries; the normal log density (R&W eq. 2.30) by a NumPy
Cholesky; predictions by R&W eqs. 2.25–2.26 on the stacked system with the mean added back at
the new inputs.
"""

from __future__ import annotations

import numpy as np
import pytensor
import pytest
from scipy import stats

from bayes_gp import GPRegression
from bayes_gp.inference.compiled import nutpie_backend
from bayes_gp.inference.typeii import MapFit
from bayes_gp.kernels import ExpQuad
from bayes_gp.linalg import EAGER_MODE
from bayes_gp.multioutput import icm_logp, icm_predict
from bayes_gp.multioutput.model import MultiOutputGP
from bayes_gp.report.describe import point_estimates

LOG_2PI = np.log(2.0 * np.pi)


# ------------------------------------------------------------------ NumPy references
def expquad(X, ls, Xs=None):
    """R&W eq. 4.9 with unit amplitude, any input dimension."""
    Xs = X if Xs is None else Xs
    d2 = np.sum((X[:, None, :] - Xs[None, :, :]) ** 2, axis=-1)
    return np.exp(-0.5 * d2 / ls**2)


def mvn_logp(y, C):
    L = np.linalg.cholesky(C)
    a = np.linalg.solve(L, y)
    return -0.5 * a @ a - np.sum(np.log(np.diag(L))) - 0.5 * y.size * LOG_2PI


def linear(X, c, beta):
    """M_ip = c_p + x_i^T beta_p, (n, P)."""
    return c[None, :] + X @ beta.T


def data_2d(rng, n=12, P=3, missing=False):
    """Two input dimensions, outputs with strong linear trends (and a few NaNs if asked)."""
    X = rng.uniform(0.0, 4.0, (n, 2))
    beta = np.array([[1.5, -0.5], [-2.0, 0.8], [0.3, 1.2]])[:P]
    Y = linear(X, np.array([1.0, -3.0, 0.5])[:P], beta) + rng.normal(size=(n, P))
    if missing:
        Y[[1, 4], 0] = np.nan
        Y[[0, 5, 7], 2] = np.nan
    return X, Y


def map_fit(gp, theta):
    """A MapFit at given hyperparameters (the equations are tested, not the optimiser)."""
    return MapFit(gp._canonical(theta), 0.0, False)


THETA = {
    "ls": 1.4,
    "W": np.array([[1.0, 0.0], [0.6, -0.8], [-0.4, 0.5]]),
    "kappa": np.array([0.05, 0.3, 0.1]),
    "sigma": np.array([0.25, 0.3, 0.2]),
    "intercept": np.array([0.8, -2.5, 0.4]),
    "slope": np.array([[1.4, -0.6], [-1.9, 0.7], [0.2, 1.1]]),
}


def reference_pieces(gp, X, Y, theta):
    """Stacked C (jitter included), observed mask, residuals vec(Y - M) on the observed."""
    n = Y.shape[0]
    W = theta["W"]
    B = W @ W.T + np.diag(theta["kappa"])
    s2 = theta["sigma"] ** 2 + gp.jitter * np.nanvar(Y, axis=0)
    C = np.kron(B, expquad(X, theta["ls"])) + np.kron(np.diag(s2), np.eye(n))
    mask = ~np.isnan(Y.T.ravel())
    r = (Y - linear(X, theta["intercept"], theta["slope"])).T.ravel()[mask]
    return B, C[np.ix_(mask, mask)], mask, r


def check_gradient(gp, params, h=1e-6):
    """``log_marginal_likelihood(eval_gradient=True)`` against central differences, every
    component of every hyperparameter (``intercept`` and ``slope`` included)."""
    _, grad = gp.log_marginal_likelihood(params, eval_gradient=True)
    assert {"intercept", "slope"} <= set(grad)
    for name in gp.hyperparameters:
        value = np.asarray(params[name], float)
        for idx in np.ndindex(value.shape):
            up, dn = value.copy(), value.copy()
            up[idx] += h
            dn[idx] -= h
            fd = (
                gp.log_marginal_likelihood({**params, name: up})
                - gp.log_marginal_likelihood({**params, name: dn})
            ) / (2 * h)
            assert np.asarray(grad[name])[idx] == pytest.approx(fd, rel=1e-5, abs=1e-6), (name, idx)


@pytest.fixture
def rng():
    return np.random.default_rng(11)


# --------------------------------------------------------------- likelihood values
@pytest.mark.parametrize("missing", [False, True], ids=["kronecker", "dense"])
def test_linear_mean_equals_stacked_mvn_and_gradient(rng, missing):
    """Rank 2, D = 2: the Kronecker path (complete data) and the dense heterotopic path both
    equal the stacked normal density of vec(Y - M) to 1e-10, and the gradient (intercept
    and slope included) matches central differences."""
    X, Y = data_2d(rng, missing=missing)
    gp = MultiOutputGP(X, Y, "expquad", rank=2, mean="linear")
    assert gp.kronecker is (not missing)
    assert gp.hyperparameters == ["ls", "W_diag", "W_offdiag", "kappa", "sigma", "intercept",
                                  "slope"]  # fmt: skip
    assert gp.model.initial_point()["slope"].shape == (3, 2)
    _, C, _, r = reference_pieces(gp, X, Y, THETA)
    assert gp.log_marginal_likelihood(THETA) == pytest.approx(mvn_logp(r, C), abs=1e-10, rel=0)
    # the slope matters: ignoring it gives a much lower density
    flat = {**THETA, "slope": np.zeros((3, 2))}
    assert gp.log_marginal_likelihood(flat) < gp.log_marginal_likelihood(THETA) - 10.0
    free = {k: v for k, v in gp._canonical(THETA).items() if k != "W"}  # W_diag, W_offdiag
    check_gradient(gp, free)


def test_icm_logp_and_predict_take_a_slope(rng):
    """The functional API: ``icm_logp(..., slope=)`` is the stacked density of vec(Y - M)
    (Kronecker path) and ``icm_predict(..., slope=)`` adds m(x_*) to the mean; a slope of the
    wrong shape is refused."""
    X, Y = data_2d(rng)
    th = THETA
    lp = icm_logp(X, Y, ExpQuad(2, ls=th["ls"]), th["W"], th["kappa"], th["sigma"],
                  th["intercept"], slope=th["slope"], jitter=0.0)  # fmt: skip
    B = th["W"] @ th["W"].T + np.diag(th["kappa"])
    C = np.kron(B, expquad(X, th["ls"])) + np.kron(np.diag(th["sigma"] ** 2), np.eye(len(X)))
    r = (Y - linear(X, th["intercept"], th["slope"])).T.ravel()
    value = float(pytensor.function([], lp, mode=EAGER_MODE)())
    assert value == pytest.approx(mvn_logp(r, C), abs=1e-10, rel=0)
    Xn = np.array([[0.5, 3.0], [6.0, -1.0]])
    pred = icm_predict(X, Y, Xn, ExpQuad(2, ls=th["ls"]), th["W"], th["kappa"], th["sigma"],
                       th["intercept"], slope=th["slope"], jitter=0.0)  # fmt: skip
    Cs = np.kron(B, expquad(X, th["ls"], Xn))
    mean_ref = (
        linear(Xn, th["intercept"], th["slope"]) + (Cs.T @ np.linalg.solve(C, r)).reshape(3, 2).T
    )
    np.testing.assert_allclose(pred.mean, mean_ref, rtol=0, atol=1e-10)
    with pytest.raises(ValueError, match=r"`slope` must have shape \(3, 2\)"):
        icm_logp(X, Y, ExpQuad(2, ls=1.0), th["W"], th["kappa"], th["sigma"], slope=np.ones(3))
    with pytest.raises(ValueError, match=r"`slope` must have shape \(3, 2\)"):
        icm_predict(X, Y, Xn, ExpQuad(2, ls=1.0), th["W"], th["kappa"], th["sigma"],
                    slope=np.ones((2, 3)))  # fmt: skip


@pytest.mark.parametrize("missing", [False, True], ids=["kronecker", "dense"])
def test_diagonal_B_equals_independent_linear_gpregressions(rng, missing):
    """With B diagonal the outputs are independent: the log marginal likelihood is the sum of P
    ``GPRegression(mean="linear")`` ones at the same values (eta_p^2 = B_pp, intercept c_p,
    slope beta_p, the same relative jitter)."""
    X, Y = data_2d(rng, n=14, missing=missing)
    gp = MultiOutputGP(X, Y, "expquad", mean="linear")
    w, kappa, sigma = 0.9, np.array([0.3, 0.5, 0.7]), np.array([0.3, 0.4, 0.5])
    c, beta = THETA["intercept"], THETA["slope"]
    B = np.diag([w**2 + kappa[0], kappa[1], kappa[2]])
    params = {"ls": 1.2, "W_diag": [w], "W_offdiag": [0.0, 0.0], "kappa": kappa, "sigma": sigma,
              "intercept": c, "slope": beta}  # fmt: skip
    total = 0.0
    for p in range(3):
        seen = ~np.isnan(Y[:, p])
        single = GPRegression(X[seen], Y[seen, p], "expquad", mean="linear")
        total += single.log_marginal_likelihood({"ls": 1.2, "eta": np.sqrt(B[p, p]),
                                                 "sigma": sigma[p], "intercept": c[p],
                                                 "slope": beta[p]})  # fmt: skip
    assert gp.log_marginal_likelihood(params) == pytest.approx(total, abs=1e-10, rel=0)


# --------------------------------------------------------------- predictions
@pytest.mark.parametrize("missing", [False, True], ids=["kronecker", "dense"])
def test_predict_replicate_and_held_out_follow_the_linear_mean(rng, missing):
    """At a point estimate: the predictive mean and P x P cross-covariance of f_* equal the
    stacked closed form with m(x_*) added (R&W 2.25–2.26), the held-out CDF is that Gaussian's,
    and replicated data average to M + C_f C^{-1} (y - M) on the observed entries."""
    X, Y = data_2d(rng, n=10, missing=missing)
    gp = MultiOutputGP(X, Y, "expquad", rank=2, mean="linear")
    fit = map_fit(gp, THETA)
    B, Co, mask, r = reference_pieces(gp, X, Y, THETA)
    Xn = np.array([[0.5, 3.0], [2.0, 2.0], [7.0, -2.0]])
    m, P = len(Xn), 3
    Cs = np.kron(B, expquad(X, THETA["ls"], Xn))[mask]
    Css = np.kron(B, expquad(Xn, THETA["ls"]))
    mean_ref = (
        linear(Xn, THETA["intercept"], THETA["slope"])
        + (Cs.T @ np.linalg.solve(Co, r)).reshape(P, m).T
    )
    cov_ref = Css - Cs.T @ np.linalg.solve(Co, Cs)
    idx = np.arange(P) * m
    cross = np.stack([cov_ref[np.ix_(idx + j, idx + j)] for j in range(m)])
    pred = gp.predict(Xn, fit)
    np.testing.assert_allclose(pred.mean, mean_ref, rtol=0, atol=1e-10)
    np.testing.assert_allclose(pred.cov, cross, rtol=0, atol=1e-10)

    held = np.array([[1.0, np.nan, 2.0], [np.nan, -4.0, 3.0], [9.0, -16.0, np.nan]])
    noisy = gp.predict(Xn, fit, include_noise=True)
    seen = ~np.isnan(held.T)
    expected = stats.norm.cdf(held.T[seen], noisy.mean.T[seen], noisy.sd.T[seen])
    np.testing.assert_allclose(gp.held_out_predictive(Xn, held, fit).cdf_at, expected, rtol=1e-10)

    n_rep = 4000
    reps = gp.replicate(fit, n_rep, random_seed=2)
    y_obs = Y.T.ravel()[mask]
    Cf = Co - np.diag(np.repeat(THETA["sigma"] ** 2 + gp.jitter * np.nanvar(Y, axis=0), 10)[mask])
    rep_mean = y_obs - r + Cf @ np.linalg.solve(Co, r)
    se = reps.std(axis=0) / np.sqrt(n_rep)
    assert np.all(np.abs(reps.mean(axis=0) - rep_mean) < 5 * se)


def test_prior_predictive_draws_follow_a_fixed_slope():
    """Fixed intercept 0 and slope 3 (``priors=`` numbers): the prior predictive draws (from the
    PyMC model's observed variable) average to 3 x at every input, for every output."""
    rng = np.random.default_rng(5)
    X = np.linspace(0.0, 5.0, 8)
    Y = rng.normal(size=(8, 2)) + 3.0 * X[:, None]
    gp = MultiOutputGP(X, Y, "expquad", mean="linear", priors={"intercept": 0.0, "slope": 3.0})
    assert "slope" not in gp.hyperparameters and "intercept" not in gp.hyperparameters
    draws = gp.prior_predictive(2000, random_seed=1)  # (draws, P n), output-major
    mean = draws.mean(axis=0).reshape(2, 8)
    se = draws.std(axis=0).reshape(2, 8) / np.sqrt(2000)
    assert np.all(np.abs(mean - 3.0 * X[None, :]) < 5 * se)
    assert np.max(se) < 0.5  # precise enough to tell a slope of 3 from 0 over x in [0, 5]


def test_map_recovers_a_strong_linear_trend_and_extrapolates_it():
    """Simulated ICM data on x in [0, 10] with trends beta = (2, -1.5) and a small GP wiggle
    (B ~ 0.3^2): the MAP fit with ``mean="linear"`` recovers beta within 0.15 (measured 0.03; a
    constant mean has beta = 0, off by >= 1.5), and predictions at x = 12, 14 follow the trend
    within 0.75 (measured 0.33) where the constant-mean fit reverts towards its constant
    (measured: off by 9.8)."""
    rng = np.random.default_rng(21)
    n = 40
    X = np.sort(rng.uniform(0.0, 10.0, n))
    B = 0.09 * np.array([[1.0, 0.7], [0.7, 1.0]])
    C = np.kron(B, expquad(X[:, None], 1.5)) + 1e-9 * np.eye(2 * n)
    f = (np.linalg.cholesky(C) @ rng.standard_normal(2 * n)).reshape(2, n).T
    c, beta = np.array([1.0, 4.0]), np.array([2.0, -1.5])
    Y = c + X[:, None] * beta + f + 0.1 * rng.standard_normal((n, 2))
    gp = MultiOutputGP(X, Y, "expquad", mean="linear")
    fit = gp.fit_map(n_restarts=1, random_seed=0)
    assert fit.converged
    np.testing.assert_allclose(np.asarray(fit.params["slope"])[:, 0], beta, atol=0.15)
    np.testing.assert_allclose(fit.params["intercept"], c, atol=0.3)
    Xn = np.array([12.0, 14.0])
    trend = c + Xn[:, None] * beta
    assert np.max(np.abs(gp.predict(Xn, fit).mean - trend)) < 0.75
    const = MultiOutputGP(X, Y, "expquad", mean="constant")
    cfit = const.fit_map(n_restarts=1, random_seed=0)
    assert np.max(np.abs(const.predict(Xn, cfit).mean - trend)) > 3.0
    # the report's point-estimate table names the mean's parameters
    rows = list(point_estimates(fit, gp.feature_names).index)
    assert {"intercept[0]", "intercept[1]", "slope[0]", "slope[1]"} <= set(rows), rows
    assert dict(gp.describe())["mean function"].startswith("learned linear per output")


@pytest.mark.slow
def test_nuts_samples_the_linear_mean():
    """NUTS (nutpie's JAX backend, a short run) over the linear mean with the Kronecker
    likelihood: the slope posterior (dims output x feature) sits on the simulated trend, and
    the NUTS predictive mixture follows it beyond the data (measured 12.41 and -16.89 at x = 8,
    sd 0.29 and 0.26, against the trend's 12.5 and -17). Planted perturbation: the same data
    without the trend give slope means (-0.02, 0.05), and the test fails. 5 s on a fresh HOME
    (35 s with PyMC's sampler and numba's compilation)."""
    rng = np.random.default_rng(4)
    n = 20
    X = np.sort(rng.uniform(0.0, 6.0, n))
    Y = np.array([0.5, -1.0]) + X[:, None] * np.array([1.5, -2.0]) + 0.2 * rng.normal(size=(n, 2))
    gp = MultiOutputGP(X, Y, "expquad", mean="linear")
    with nutpie_backend("jax"):
        idata = gp.sample(draws=60, tune=60, chains=1, random_seed=1, sampler="nutpie",
                          log_likelihood=False)  # fmt: skip
    slope = idata["posterior"]["slope"]
    assert slope.dims[2:] == ("output", "feature")
    # a 60-draw chain: measured posterior means (1.49, -1.94); beta = 0 is 1.5 and 2 off
    np.testing.assert_allclose(slope.values.mean(axis=(0, 1))[:, 0], [1.5, -2.0], atol=0.5)
    pred = gp.predict(np.array([8.0]), idata)
    np.testing.assert_allclose(pred.mean[0], [0.5 + 12.0, -1.0 - 16.0], atol=1.5)
