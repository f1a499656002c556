"""Known per-observation noise in GPRegression (issue 40): ``noise=`` an array of n standard
deviations s_i, alone (C = K + diag(s^2)) or with a learned sigma (``learn_noise=True``:
C = K + diag(s^2) + sigma^2 I).

References: the dense multivariate normal with that covariance (scipy.stats), its gradient by
central differences, R&W eqs. 2.25-2.26 and 5.10-5.12 written out with NumPy, scikit-learn's
GaussianProcessRegressor(alpha=s**2) with the same fixed kernel, and the quasiseparable path
against the dense one.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import multivariate_normal, norm

from bayes_gp import GPRegression
from bayes_gp.inference.typeii import MapFit

N = 40
RNG = np.random.default_rng(3)
X = np.sort(RNG.uniform(0.0, 10.0, N))
S = RNG.uniform(0.05, 0.6, N)  # known measurement errors (sd)
Y = np.sin(X) + S * RNG.normal(size=N)
XN = np.linspace(-0.5, 10.5, 7)
PARAMS = {"ls": 1.4, "eta": 0.8}
PARAMS_SIGMA = {**PARAMS, "sigma": 0.3}


def model(learn: bool = False, structure: str = "dense", **kw) -> GPRegression:
    return GPRegression(X, Y, "matern32", mean="zero", noise=S, learn_noise=learn,
                        structure=structure, jitter=0.0, **kw)  # fmt: skip


def dense_parts(m: GPRegression, params):
    """K(X, X), K(X, Xn), diag K(Xn) and the full covariance C of the reference."""
    values = m._values(params)
    K = m._cov_new(values, X[:, None])
    Ks = m._compiled("cross_ref", lambda Xv: m._cov(X[:, None], Xv))(*values, XN[:, None])
    kss = np.diag(m._cov_new(values, XN[:, None]))
    C = K + np.diag(S**2) + params.get("sigma", 0.0) ** 2 * np.eye(N)
    return K, Ks, kss, C


@pytest.mark.parametrize("learn", [False, True])
def test_log_marginal_likelihood_and_gradient_match_dense_mvn(learn):
    m = model(learn)
    params = PARAMS_SIGMA if learn else PARAMS
    assert sorted(m.hyperparameters) == sorted(params)
    _, _, _, C = dense_parts(m, params)
    ref = multivariate_normal(np.zeros(N), C).logpdf(Y)
    lml, grad = m.log_marginal_likelihood(params, eval_gradient=True)
    assert lml == pytest.approx(ref, rel=1e-10)
    assert m.log_marginal_likelihood(params) == pytest.approx(ref, rel=1e-10)
    for name, value in params.items():
        h = 1e-6 * value

        def at(v, name=name):
            p = {**params, name: v}
            return multivariate_normal(np.zeros(N), dense_parts(m, p)[3]).logpdf(Y)

        fd = (at(value + h) - at(value - h)) / (2 * h)
        assert float(grad[name]) == pytest.approx(fd, rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("learn", [False, True])
def test_quasiseparable_equals_dense(learn):
    dense, qs = model(learn, "dense"), model(learn, "quasiseparable")
    assert qs.quasiseparable and not dense.quasiseparable
    params = PARAMS_SIGMA if learn else PARAMS
    ld, gd = dense.log_marginal_likelihood(params, eval_gradient=True)
    lq, gq = qs.log_marginal_likelihood(params, eval_gradient=True)
    assert lq == pytest.approx(ld, rel=1e-9)
    for name in params:
        assert float(gq[name]) == pytest.approx(float(gd[name]), rel=1e-9, abs=1e-12)
    fit = MapFit(params, 0.0, False)
    pd, pq = dense.predict(XN, fit, noise_new=0.2 * np.ones(7), include_noise=True), qs.predict(
        XN, fit, noise_new=0.2 * np.ones(7), include_noise=True
    )
    np.testing.assert_allclose(pq.mean, pd.mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(pq.var, pd.var, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(qs.point_loo(fit)[1], dense.point_loo(fit)[1], rtol=1e-9)


@pytest.mark.parametrize("learn", [False, True])
def test_predictions_and_loo_match_rw(learn):
    m = model(learn)
    params = PARAMS_SIGMA if learn else PARAMS
    fit = MapFit(params, 0.0, False)
    _, Ks, kss, C = dense_parts(m, params)
    Ci = np.linalg.inv(C)
    mean = Ks.T @ Ci @ Y  # R&W eq. 2.25
    var = kss - np.einsum("ij,ik,kj->j", Ks, Ci, Ks)  # R&W eq. 2.26
    p = m.predict(XN, fit)
    np.testing.assert_allclose(p.mean, mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(p.var, var, rtol=1e-9, atol=1e-12)
    s_new = np.linspace(0.1, 0.4, 7)
    s2 = params.get("sigma", 0.0) ** 2
    py = m.predict(XN, fit, include_noise=True, noise_new=s_new)
    np.testing.assert_allclose(py.var, var + s2 + s_new**2, rtol=1e-9)
    full = m.predict(XN, fit, diag=False, include_noise=True, noise_new=s_new)
    np.testing.assert_allclose(np.diag(full.cov), var + s2 + s_new**2, rtol=1e-9)
    # at the training inputs y_* has the training rows' own errors
    at_x = m.predict(X, fit, include_noise=True)
    fx = m.predict(X, fit)
    np.testing.assert_allclose(at_x.var, fx.var + s2 + S**2, rtol=1e-9)
    # LOO, R&W eqs. 5.10-5.12, with the per-observation diagonal
    alpha = Ci @ Y
    mu_loo = Y - alpha / np.diag(Ci)
    sd_loo = np.sqrt(1.0 / np.diag(Ci))
    ref = norm(mu_loo, sd_loo).logpdf(Y)
    np.testing.assert_allclose(m.point_loo(fit)[1], ref, rtol=1e-9)


def test_matches_scikit_learn_alpha():
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern

    m = model()
    fit = MapFit(PARAMS, 0.0, False)
    kernel = ConstantKernel(PARAMS["eta"] ** 2) * Matern(length_scale=PARAMS["ls"], nu=1.5)
    np.testing.assert_allclose(kernel(X[:, None]), dense_parts(m, PARAMS)[0], rtol=1e-10)
    sk = GaussianProcessRegressor(kernel, alpha=S**2, optimizer=None).fit(X[:, None], Y)
    mean, sd = sk.predict(XN[:, None], return_std=True)
    p = m.predict(XN, fit)
    np.testing.assert_allclose(p.mean, mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(np.sqrt(p.var), sd, rtol=1e-6, atol=1e-8)
    assert sk.log_marginal_likelihood_value_ == pytest.approx(
        m.log_marginal_likelihood(PARAMS), rel=1e-9
    )


def test_refusals():
    for bad, what in [(S[:-1], "one standard deviation per row"), (np.r_[S[:-1], -0.1], "entry"),
                      (np.r_[np.nan, S[1:]], "finite"), (np.ones((N, 2)), "shape")]:  # fmt: skip
        with pytest.raises(ValueError, match=what):
            GPRegression(X, Y, "matern32", noise=bad)
    with pytest.raises(ValueError, match="approx"):
        GPRegression(X, Y, "matern32", noise=S, approx="vfe")
    assert GPRegression(X, Y, "pp2", noise=S).sparse  # the sparse path takes it (test_compact)
    m = model()
    fit = MapFit(PARAMS, 0.0, False)
    with pytest.raises(ValueError, match="noise_new"):
        m.predict(XN, fit, include_noise=True)
    with pytest.raises(ValueError, match="include_noise=True"):
        m.predict(XN, fit, noise_new=np.ones(7))
    with pytest.raises(ValueError, match="noise_new"):
        m.predict(XN, fit, include_noise=True, noise_new=np.ones(3))
    # with a learned sigma the new rows get sigma^2 only
    ml = model(True)
    fl = MapFit(PARAMS_SIGMA, 0.0, False)
    np.testing.assert_allclose(ml.predict(XN, fl, include_noise=True).var,
                               ml.predict(XN, fl).var + 0.09, rtol=1e-9)  # fmt: skip
    # a scalar noise keeps the old meaning (a fixed sigma, no known array)
    assert GPRegression(X, Y, "matern32", noise=0.2).known_noise_var is None


def test_fit_map_and_describe():
    m = GPRegression(X, Y, "matern32", noise=S)
    fit = m.fit_map(n_restarts=2, random_seed=0)
    assert np.isfinite(fit.log_marginal_likelihood)
    assert "sigma" not in fit.params
    rows = dict(m.describe())
    assert "known per observation" in rows["noise"] and "diag(s²)" in rows["likelihood"]
    ml = GPRegression(X, Y, "matern32", noise=S, learn_noise=True)
    assert "sigma" in ml.hyperparameters
    assert "plus a learned σ" in dict(ml.describe())["noise"]
    reps = m.replicate(fit, 3, random_seed=0)
    assert reps.shape == (3, N)


def test_nuts_log_likelihood_is_the_per_observation_loo():
    """sample()'s log_likelihood group (PSIS-LOO's input) holds R&W eqs. 5.10-5.12 with the
    known diagonal, per draw; the mixture prediction takes noise_new."""
    m = model()
    idata = m.sample(draws=60, tune=100, chains=1, random_seed=1, progressbar=False)
    post, ll = idata["posterior"], np.asarray(idata["log_likelihood"]["y"])
    for i in (0, 59):
        params = {k: float(post[k][0, i]) for k in PARAMS}
        Ci = np.linalg.inv(dense_parts(m, params)[3])
        mu, sd = Y - (Ci @ Y) / np.diag(Ci), np.sqrt(1.0 / np.diag(Ci))
        np.testing.assert_allclose(ll[0, i], norm(mu, sd).logpdf(Y), rtol=1e-8)
    f, y = m.predict(XN, idata), m.predict(XN, idata, include_noise=True, noise_new=0.2)
    np.testing.assert_allclose(y.var, f.var + 0.04, rtol=1e-9)
