"""HeteroscedasticGPRegression: the model's density against a NumPy/SciPy transcription, the
predictive equations and LOO terms against direct computations, recovery of a noise trend by
NUTS, and input validation."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
import xarray as xr
from scipy import stats
from scipy.linalg import cholesky

from bayes_gp import HeteroscedasticGPRegression, MapFit, Prediction
from bayes_gp.linalg import EAGER_MODE


def _se(X1, X2, ls, eta):
    """Squared exponential, R&W (4.9): eta^2 exp(-|x - x'|^2 / (2 ls^2)), ARD ls per column."""
    d = (X1[:, None, :] - X2[None, :, :]) / np.asarray(ls, float)
    return eta**2 * np.exp(-0.5 * np.sum(d * d, axis=-1))


def _data(n=12, D=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 10.0, size=(n, D))
    y = np.sin(X[:, 0]) + 0.1 * (1 + X[:, 0]) * rng.standard_normal(n)
    return X, y


@pytest.mark.parametrize("D, ard", [(1, False), (2, True)])
def test_logp_equals_numpy_transcription(D, ard):
    """log p(theta, z_g, y) in the unconstrained space: priors with the log-transform Jacobians,
    N(z_g | 0, I), g = mu_g + chol(K_g + j I) z_g, and y ~ N(ybar, K_f + j s_y^2 I + diag e^{2g})."""
    X, y = _data(12, D)
    gp = HeteroscedasticGPRegression(X, y, ard=ard)
    assert gp.hyperparameters == ["ls", "eta", "noise_ls", "noise_eta", "noise_mean"]
    rng = np.random.default_rng(1)
    shape_ls = (D,) if ard else ()
    point = {
        "ls_log__": rng.normal(0.5, 0.3, shape_ls),
        "eta_log__": np.asarray(rng.normal(0.0, 0.3)),
        "noise_ls_log__": rng.normal(1.0, 0.3, shape_ls),
        "noise_eta_log__": np.asarray(rng.normal(-0.3, 0.3)),
        "noise_mean": np.asarray(rng.normal(-1.0, 0.5)),
        "g_rotated_": rng.standard_normal(12),
    }
    got = gp.model.compile_logp(mode=EAGER_MODE)(point)

    n = y.size
    s_y, y_bar = y.std(), y.mean()
    R = np.ptp(X, axis=0)
    mu_ls = np.log(R / 3.0) if ard else np.log(np.mean(R) / 3.0)
    ls, eta = np.exp(point["ls_log__"]), np.exp(point["eta_log__"])
    nls, neta = np.exp(point["noise_ls_log__"]), np.exp(point["noise_eta_log__"])
    mu_g, z = point["noise_mean"], point["g_rotated_"]
    lp = np.sum(stats.lognorm.logpdf(ls, s=1.0, scale=np.exp(mu_ls)) + point["ls_log__"])
    lp += stats.halfnorm.logpdf(eta, scale=s_y) + point["eta_log__"]
    lp += np.sum(stats.lognorm.logpdf(nls, s=1.0, scale=np.exp(mu_ls)) + point["noise_ls_log__"])
    lp += stats.halfnorm.logpdf(neta, scale=1.0) + point["noise_eta_log__"]
    lp += stats.norm.logpdf(mu_g, loc=np.log(s_y / 3.0), scale=1.0)
    lp += np.sum(stats.norm.logpdf(z))
    Lg = cholesky(_se(X, X, nls, neta) + 1e-6 * np.eye(n), lower=True)
    g = mu_g + Lg @ z
    C = _se(X, X, ls, eta) + 1e-6 * s_y**2 * np.eye(n) + np.diag(np.exp(2 * g))
    lp += stats.multivariate_normal.logpdf(y, mean=np.full(n, y_bar), cov=C)
    np.testing.assert_allclose(got, lp, rtol=1e-10)


def test_names_priors_and_composite_kernels():
    X, y = _data(10)
    gp = HeteroscedasticGPRegression(
        X,
        y,
        "matern52",
        "expquad + periodic",
        priors={"noise_mean": pm.Normal.dist(0.0, 0.5), "ls": lambda n: pm.LogNormal(n, 0.0, 1.0)},
    )
    assert gp.hyperparameters == [
        "ls",
        "eta",
        "noise_expquad_ls",
        "noise_expquad_eta",
        "noise_periodic_ls",
        "noise_periodic_eta",
        "noise_periodic_period",
        "noise_mean",
    ]
    # the log-noise GP's amplitude gets the unit-scale catalogue prior HalfNormal(1)
    rv = gp.model["noise_expquad_eta"]
    assert float(np.asarray(rv.owner.inputs[-1].data)) == 1.0
    assert "HeteroscedasticGPRegression(n=10" in repr(gp)


def _fake_posterior(gp, values: dict, g: np.ndarray):
    """A one-chain DataTree holding the given draws (leading axis = draw)."""
    ds = {}
    for name, v in {**values, "g": g}.items():
        v = np.asarray(v, float)[None]
        dims = ("chain", "draw", *[f"{name}_dim_{i}" for i in range(v.ndim - 2)])
        ds[name] = (dims, v)
    n_draw = np.asarray(g).shape[0]
    coords = {"chain": [0], "draw": np.arange(n_draw)}
    return xr.DataTree.from_dict({"posterior": xr.Dataset(ds, coords=coords)})


def test_predict_and_noise_sd_equal_direct_computation():
    """One posterior draw: f* | y, g, theta is GP regression with noise covariance diag(e^{2g})
    (R&W 2.25-2.26), g* | g the noise-free conditional; y* adds E[e^{2 g*}]."""
    X, y = _data(12)
    gp = HeteroscedasticGPRegression(X, y)
    vals = {"ls": [1.7], "eta": [0.9], "noise_ls": [3.0], "noise_eta": [0.8], "noise_mean": [-1.5]}
    g = -1.5 + 0.4 * np.sin(X[:, 0])[None]
    idata = _fake_posterior(gp, vals, g)
    Xn = np.concatenate([X[:4], [[2.5], [11.0]]])

    n, jf, jg = y.size, 1e-6 * y.std() ** 2, 1e-6
    C = _se(X, X, 1.7, 0.9) + jf * np.eye(n) + np.diag(np.exp(2 * g[0]))
    Ks, kss = _se(X, Xn, 1.7, 0.9), np.full(len(Xn), 0.9**2)
    mf = y.mean() + Ks.T @ np.linalg.solve(C, y - y.mean())
    vf = kss - np.sum(Ks * np.linalg.solve(C, Ks), axis=0)
    Kg, Ksg = _se(X, X, 3.0, 0.8) + jg * np.eye(n), _se(X, Xn, 3.0, 0.8)
    mg = -1.5 + Ksg.T @ np.linalg.solve(Kg, g[0] + 1.5)
    vg = 0.8**2 - np.sum(Ksg * np.linalg.solve(Kg, Ksg), axis=0)

    pf = gp.predict(Xn, idata, n_per_draw=20000)
    assert isinstance(pf, Prediction)
    np.testing.assert_allclose(pf.mean, mf, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(pf.var, vf, rtol=1e-7, atol=1e-12)
    # one draw: f* is Gaussian, so the interval is mean -/+ 1.88 sd (Monte Carlo quantiles)
    z = stats.norm.ppf(0.97)
    np.testing.assert_allclose(pf.lower, mf - z * np.sqrt(vf), atol=0.05 * np.sqrt(vf).max())
    np.testing.assert_allclose(pf.upper, mf + z * np.sqrt(vf), atol=0.05 * np.sqrt(vf).max())
    py = gp.predict(Xn, idata, include_noise=True, n_per_draw=20000)
    np.testing.assert_allclose(py.mean, mf, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(py.var, vf + np.exp(2 * mg + 2 * vg), rtol=1e-7)
    assert np.all(py.upper - py.lower > pf.upper - pf.lower)
    # at the training inputs g* is g up to the jitter
    np.testing.assert_allclose(mg[:4], g[0, :4], atol=2e-3)
    mean, lo, hi = gp.noise_sd(Xn, idata, n_per_draw=20000)
    np.testing.assert_allclose(mean, np.exp(mg + vg / 2), rtol=1e-7)
    # log-normal given one draw: quantiles exp(mg -/+ 1.88 sqrt(vg))
    np.testing.assert_allclose(np.log(lo), mg - z * np.sqrt(vg), atol=0.05 * np.sqrt(vg).max())
    np.testing.assert_allclose(np.log(hi), mg + z * np.sqrt(vg), atol=0.05 * np.sqrt(vg).max())


def test_log_likelihood_terms_and_latent_f_draws():
    """The log_likelihood terms are log p(y_i | y_-i, g, theta), checked by deleting row i; the
    added draws of f follow p(f | y, g, theta) (mean and covariance by Monte Carlo)."""
    X, y = _data(8)
    gp = HeteroscedasticGPRegression(X, y)
    S = 4000
    vals = {
        "ls": np.full(S, 1.3),
        "eta": np.full(S, 1.1),
        "noise_ls": np.full(S, 2.0),
        "noise_eta": np.full(S, 0.5),
        "noise_mean": np.full(S, -1.0),
    }
    g = np.tile(-1.0 + 0.3 * np.cos(X[:, 0]), (S, 1))
    idata = gp._add_latent_f(_fake_posterior(gp, vals, g), np.random.default_rng(3))
    n = y.size
    K = _se(X, X, 1.3, 1.1) + 1e-6 * y.std() ** 2 * np.eye(n)
    C = K + np.diag(np.exp(2 * g[0]))
    r = y - y.mean()
    ll = np.asarray(idata["log_likelihood"]["y"])
    assert ll.shape == (1, S, n)
    for i in range(n):
        keep = np.arange(n) != i
        w = np.linalg.solve(C[np.ix_(keep, keep)], C[keep, i])
        mu = y.mean() + w @ r[keep]
        var = C[i, i] - C[i, keep] @ w
        assert ll[0, 0, i] == pytest.approx(stats.norm.logpdf(y[i], mu, np.sqrt(var)), rel=1e-9)
    f = np.asarray(idata["posterior"]["f"])[0]
    mean = y.mean() + K @ np.linalg.solve(C, r)
    cov = K - K @ np.linalg.solve(C, K)
    sd = np.sqrt(np.diag(cov))
    assert np.all(np.abs(f.mean(0) - mean) < 4 * sd / np.sqrt(S))
    np.testing.assert_allclose(np.cov(f.T), cov, atol=0.1 * sd.max() ** 2)


def test_bad_inputs():
    X, y = _data(6)
    with pytest.raises(ValueError, match="rows"):
        HeteroscedasticGPRegression(X, y[:-1])
    with pytest.raises(ValueError, match="NaN"):
        HeteroscedasticGPRegression(np.where(X > 5, np.nan, X), y)
    with pytest.raises(ValueError, match="NaN"):
        HeteroscedasticGPRegression(X, np.where(y > 0, np.inf, y))
    with pytest.raises(ValueError, match="1-D"):
        HeteroscedasticGPRegression(X, np.ones((6, 2)))
    with pytest.raises(ValueError, match="at least 2"):
        HeteroscedasticGPRegression([[1.0]], [1.0])
    with pytest.raises(ValueError, match="unknown kernel"):
        HeteroscedasticGPRegression(X, y, noise_kernel="gaussian")
    with pytest.raises(ValueError, match="unknown kernel"):
        HeteroscedasticGPRegression(X, y, kernel="rbf")
    with pytest.raises(TypeError, match="noise_kernel"):
        HeteroscedasticGPRegression(X, y, noise_kernel=None)
    with pytest.raises(ValueError, match="jitter"):
        HeteroscedasticGPRegression(X, y, jitter=-1.0)
    with pytest.raises(ValueError, match="unknown names"):
        HeteroscedasticGPRegression(X, y, priors={"sigma": pm.HalfNormal.dist(1.0)})
    gp = HeteroscedasticGPRegression(X, y)
    with pytest.raises(ValueError, match="column"):
        gp.predict(np.ones((3, 2)), None)
    with pytest.raises(ValueError, match="sample"):
        gp.predict(X, object())
    with pytest.raises(ValueError, match="posterior"):
        gp.noise_sd(X, MapFit(params={"ls": 1.0}, objective=0.0, prior=False))
    empty = xr.DataTree.from_dict({"posterior": xr.Dataset({"ls": (("chain", "draw"), [[1.0]])})})
    with pytest.raises(ValueError, match="no posterior draws"):
        gp.predict(X, empty)


@pytest.mark.slow
def test_nuts_recovers_an_increasing_noise_sd():
    """Simulated data with noise sd 0.1 e^{0.25 x} (0.1 at x = 0, 1.2 at x = 10): the posterior
    of the noise sd covers the truth at both ends and separates them."""
    rng = np.random.default_rng(2026)
    n = 60
    x = np.sort(rng.uniform(0.0, 10.0, n))
    sd_true = lambda t: 0.1 * np.exp(0.25 * t)  # noqa: E731
    y = np.sin(x) + sd_true(x) * rng.standard_normal(n)
    gp = HeteroscedasticGPRegression(x, y)
    idata = gp.sample(draws=300, tune=300, chains=2, random_seed=4)
    assert np.asarray(idata["log_likelihood"]["y"]).shape == (2, 300, n)
    assert np.asarray(idata["posterior"]["f"]).shape == (2, 300, n)
    assert int(np.asarray(idata["sample_stats"]["diverging"]).sum()) <= 3
    ends = np.array([0.5, 9.5])
    mean, lo, hi = gp.noise_sd(ends, idata)
    assert np.all((lo < sd_true(ends)) & (sd_true(ends) < hi)), (lo, mean, hi)
    assert hi[0] < lo[1], (lo, mean, hi)
    assert mean[1] > 4 * mean[0]
    pred = gp.predict(x, idata, include_noise=True)
    inside = np.mean((y >= pred.lower) & (y <= pred.upper))
    assert 0.85 <= inside <= 1.0


def test_preflight_raises_the_log_noise_jitter_when_its_cholesky_fails():
    """Triplicated inputs make K_g singular: with a jitter of 1e-16 its Cholesky fails at the
    initial point, so the pre-flight check raises the jitter (tenfold steps) until every checked
    matrix factorises, sets the model's shared jitter (the PyMC model stays the same object) and
    records the choice."""
    rng = np.random.default_rng(0)
    X = np.repeat(np.linspace(0, 1, 10), 3)
    y = np.sin(3 * X) + 0.1 * rng.normal(size=X.size)
    m = HeteroscedasticGPRegression(X, y, jitter=1e-16)
    old_model = m.model
    from bayes_gp.inference.jitter import check_points

    points = check_points(m.model, m._hyper_rvs, random_seed=0)  # the points check_jitter uses
    failing = [p for p in points if not _factorises(m._grams(p, np.zeros((0, 1)))[5])]
    assert failing
    choice = m.check_jitter(random_seed=0)
    assert choice.default == 1e-16 and choice.jitter > choice.default
    assert m.jitter_g == m.jitter == choice.jitter and m.model is old_model
    assert all(_factorises(m._grams(p, np.zeros((0, 1)))[5]) for p in points)
    # a well-posed model keeps its jitter
    ok = HeteroscedasticGPRegression(np.linspace(0, 1, 12), y[:12])
    assert ok.check_jitter(random_seed=0).jitter == ok.default_jitter_g


def _factorises(A):
    try:
        cholesky(A, lower=True)
    except np.linalg.LinAlgError:
        return False
    return True
