"""Censored observation models (:mod:`bayes_gp.latent.censored`): against scipy.stats, finite
differences, importance sampling, PyMC's ``Censored`` and simulated censored data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.integrate import quad
from scipy.special import logsumexp
from scipy.stats import multivariate_t

from bayes_gp.latent import LatentGP, laplace
from bayes_gp.latent.censored import CensoredGaussian, LogNormal, Weibull
from tests.latent.cases import _data
from tests.latent.test_laplace import _assert_forms_agree, _graph, _kern

RNG = np.random.default_rng(3)
N = 12
F = RNG.normal(0.0, 1.5, N)
T = RNG.gamma(2.0, 1.5, N)  # positive times
C = (np.arange(N) % 3 == 1) * 1.0  # every third time right-censored
Y = RNG.normal(0.0, 2.0, N)
G = np.array([0, -1, 1, 2, 0, 2, -1, 1, 0, 2, 1, -1], float)  # every Gaussian code
U = Y + RNG.uniform(0.1, 3.0, N)  # interval upper limits
K_SHAPE, SIGMA = 1.7, 0.8

WEIBULL = stats.weibull_min(K_SHAPE, scale=np.exp(F))
LOGNORMAL = stats.lognorm(SIGMA, scale=np.exp(F))
NORMAL = stats.norm(F, SIGMA)

#: (name, likelihood, phi, the censored log-likelihood by SciPy)
CASES = [
    ("weibull", Weibull(T, censored=C), [K_SHAPE],
     np.where(C == 0, WEIBULL.logpdf(T), WEIBULL.logsf(T))),
    ("lognormal", LogNormal(T, censored=C), [SIGMA],
     np.where(C == 0, LOGNORMAL.logpdf(T), LOGNORMAL.logsf(T))),
    ("censored_gaussian", CensoredGaussian(Y, censored=G, upper=U), [SIGMA],
     np.select([G == 0, G == -1, G == 1, G == 2],
               [NORMAL.logpdf(Y), NORMAL.logcdf(Y), NORMAL.logsf(Y),
                np.log(NORMAL.cdf(U) - NORMAL.cdf(Y))])),
]  # fmt: skip
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("name,lik,phi,ref", CASES, ids=IDS)
def test_log_density_against_scipy(name, lik, phi, ref):
    """Events: logpdf; right-censored: logsf; left-censored: logcdf; interval: the log of the
    CDF difference (weibull_min, lognorm, norm), to 1e-12."""
    np.testing.assert_allclose(lik.derivatives(F, phi)[0], ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lik.log_density(F, phi), ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name,lik,phi,ref", CASES, ids=IDS)
def test_f_and_phi_derivatives_against_finite_differences(name, lik, phi, ref):
    """d1, d2, d3 in f and d/dphi of logp, d1, d2 by central differences (h = 1e-5)."""
    h = 1e-5
    _lp, d1, d2, d3 = lik.derivatives(F, phi)
    up, dn = lik.derivatives(F + h, phi), lik.derivatives(F - h, phi)
    for k, an in enumerate((d1, d2, d3)):
        np.testing.assert_allclose(an, (up[k] - dn[k]) / (2 * h), rtol=1e-6, atol=1e-8)
    dl, dd1, dd2 = lik.phi_derivatives(F, phi)
    up, dn = lik.derivatives(F, [phi[0] + h]), lik.derivatives(F, [phi[0] - h])
    for k, an in enumerate((dl[0], dd1[0], dd2[0])):
        np.testing.assert_allclose(an, (up[k] - dn[k]) / (2 * h), rtol=1e-6, atol=1e-8)


def test_log_concave_and_finite_in_the_tails():
    """W = -l'' >= 0 everywhere (log-concave: the stable Newton form), and log density and
    derivatives finite far in the tails (standardised limits of +-40 and beyond), the
    right-censored normal's l' tending to the hazard ~ (f - z)/sigma^2."""
    f = np.array([-60.0, -30.0, 0.0, 30.0, 60.0])
    for lik, phi in ((Weibull(np.full(5, 2.0), censored=np.array([0, 1, 0, 1, 1.0])), [1.5]),
                     (LogNormal(np.full(5, 2.0), censored=np.ones(5)), [0.5]),
                     (CensoredGaussian(np.zeros(5), censored=np.array([-1, 1, 2, 1, -1.0]),
                                       upper=np.ones(5)), [0.7])):  # fmt: skip
        assert lik.log_concave
        with np.errstate(over="ignore"):
            out = lik.derivatives(f, phi)
        assert all(np.all(np.isfinite(o)) for o in out), type(lik).__name__
        assert np.all(out[2] <= 0)
    lik = LogNormal(np.full(2, 1.0), censored=np.ones(2))
    d1 = lik.derivatives(np.array([-30.0, -300.0]), [1.0])[1]
    np.testing.assert_allclose(d1, [30.0, 300.0], rtol=2e-3)
    # an interval 40 to 41 sd above f (and its mirror image): log P against quadrature of
    # exp(-40 t - t^2/2) (1e-13; measured 1.4e-16), where Phi(b) - Phi(a) underflows to 0
    lik = CensoredGaussian(np.array([40.0, -41.0]), censored=np.array([2.0, 2.0]),
                           upper=np.array([41.0, -40.0]))  # fmt: skip
    integral = quad(lambda t: np.exp(-40.0 * t - 0.5 * t * t), 0.0, 1.0, epsabs=0,
                    epsrel=1e-13)[0]  # fmt: skip
    ref = -800.0 - 0.5 * np.log(2 * np.pi) + np.log(integral)
    np.testing.assert_allclose(lik.log_density(np.zeros(2), [1.0]), ref, rtol=1e-13)


# ------------------------------------------------------------- response scale, predictive
def test_response_moments_cdf_ppf_and_thresholds_against_scipy():
    """E[y | f], Var[y | f], the uncensored CDF at any values, its quantiles (1e-10 to 1e-12),
    and the latent threshold t: P(Y <= y | f = t) = 1 - u, increasing in u."""
    for lik, phi, ref in ((Weibull(T), [K_SHAPE], WEIBULL), (LogNormal(T), [SIGMA], LOGNORMAL),
                          (CensoredGaussian(Y), [SIGMA], NORMAL)):  # fmt: skip
        arr = [np.asarray(p) for p in phi]
        np.testing.assert_allclose(lik.response_mean(F, arr), ref.mean(), rtol=1e-12)
        np.testing.assert_allclose(lik.response_variance(F, arr), ref.var(), rtol=1e-12)
        below, at = lik.cdf(F, phi)
        np.testing.assert_allclose(at, ref.cdf(lik.y), rtol=1e-10)
        np.testing.assert_array_equal(below, at)
        y = np.linspace(0.2, 6.0, N)
        np.testing.assert_allclose(lik.cdf_values(y, F, arr), ref.cdf(y), rtol=1e-10, atol=1e-300)
        for q in (0.03, 0.5, 0.97):
            np.testing.assert_allclose(lik.ppf_values(q, F, arr), ref.ppf(q), rtol=1e-10)
        u = np.array([1e-6, 0.03, 0.4, 0.9, 1 - 1e-6])[None, :]
        yy = np.array([1e-3, 0.5, 2.0, 40.0])[:, None]
        for p in (0.3, phi[0], 5.0):
            t = lik.latent_threshold(yy, u, [np.asarray(p)])
            assert np.all(np.isfinite(t)) and np.all(np.diff(t, axis=1) > 0)
            np.testing.assert_allclose(lik.cdf_values(yy, t, [np.asarray(p)]),
                                       np.broadcast_to(1 - u, t.shape), atol=1e-9)  # fmt: skip
            assert np.all(lik.threshold_scale(yy, [np.asarray(p)]) > 0)
    for lik in (Weibull(T), LogNormal(T)):  # no time at or below 0
        np.testing.assert_array_equal(lik.cdf_values(np.array([-1.0, 0.0]), F[:2], [1.0]), 0.0)
        np.testing.assert_array_equal(
            lik.latent_threshold(np.array([0.0, -1.0]), 0.5, [np.asarray(2.0)]), -np.inf)


def test_draws_are_the_uncensored_model():
    """200 000 draws at f = F[:3]: the uncensored times' (values') mean and variance within
    1.5% and 4% of SciPy's, whatever the training rows' censoring."""
    f = np.broadcast_to(F[:3], (200_000, 3))
    for lik, phi, ref in ((Weibull(T, censored=C), [K_SHAPE], WEIBULL),
                          (LogNormal(T, censored=C), [SIGMA], LOGNORMAL),
                          (CensoredGaussian(Y, censored=G, upper=U), [SIGMA], NORMAL)):  # fmt: skip
        d = lik.draw(f, phi, np.random.default_rng(5))
        np.testing.assert_allclose(d.mean(axis=0), ref.mean()[:3], rtol=1.5e-2, atol=1e-2)
        np.testing.assert_allclose(d.var(axis=0), ref.var()[:3], rtol=4e-2)


# -------------------------------------------------------------------------- Laplace
def _cases(n=8, seed=2):
    """(name, likelihood, phi): data drawn around sin(x), a third of the survival times
    right-censored, every Gaussian code."""
    rng, X, f = _data(n, seed)
    c = (np.arange(n) % 3 == 1) * 1.0
    y = f + 0.4 * rng.standard_normal(n)
    g = np.resize([0, -1, 0, 1, 2, 0, 2, -1], n).astype(float)
    return X, [
        ("weibull", Weibull(np.exp(f) * rng.weibull(2.0, n), censored=c), [2.0]),
        ("lognormal", LogNormal(np.exp(f + 0.5 * rng.standard_normal(n)), censored=c), [0.5]),
        ("censored_gaussian", CensoredGaussian(y, censored=g, upper=y + 0.8), [0.4]),
    ]


# log q - log p(y) by importance sampling (n = 8, 400k draws, proposal seeds 0 and 1, ESS >
# 1.8e5): weibull -0.066/-0.066, lognormal -0.010/-0.008, censored_gaussian -0.018/-0.016
# (Laplace underestimates, as for the other likelihoods of test_laplace.py).
IS_TOL = {"weibull": 0.08, "lognormal": 0.02, "censored_gaussian": 0.025}


@pytest.mark.parametrize("name", list(IS_TOL))
def test_evidence_against_importance_sampling(name):
    """log q (Laplace) against importance sampling of log p(y | theta) from a multivariate-t(4)
    at the Laplace mode and covariance (test_laplace.py's check)."""
    X, liks = _cases()
    lik, phi = next((li, p) for nm, li, p in liks if nm == name)
    K = _kern(X, 1.2, 1.0)
    m = np.full(8, 0.1)
    res = laplace(K, m, lik, phi)
    prop = multivariate_t(res.f, 1.5 * res.cov, df=4, seed=0)
    Fs = prop.rvs(400_000)
    LK = np.linalg.cholesky(K)
    Z = np.linalg.solve(LK, (Fs - m).T)
    log_prior = -0.5 * np.sum(Z * Z, 0) - np.sum(np.log(np.diag(LK))) - 4 * np.log(2 * np.pi)
    lw = np.sum(lik.log_density(Fs, phi), axis=1) + log_prior - prop.logpdf(Fs)
    log_is = logsumexp(lw) - np.log(lw.size)
    assert abs(res.log_evidence - log_is) < IS_TOL[name], (res.log_evidence, log_is)


@pytest.mark.parametrize("name", list(IS_TOL))
def test_evidence_gradient_and_newton_forms(name):
    """d log q / d(ls, eta, c, phi) through the Op against central differences (1e-6), and
    the stable and whitened Newton forms agree (1e-9)."""
    X, liks = _cases(n=15, seed=0)
    lik, phi = next((li, p) for nm, li, p in liks if nm == name)
    fn = _graph(lik, X, len(phi))
    x0 = np.array([1.1, 1.2, 0.2, *phi])
    out = fn(x0[0], x0[1], x0[2], x0[3:])
    analytic = np.concatenate([np.atleast_1d(g) for g in out[1:]])
    h = 1e-5
    fd = np.array([(float(fn(*(x0 + h * e)[:3], (x0 + h * e)[3:])[0])
                    - float(fn(*(x0 - h * e)[:3], (x0 - h * e)[3:])[0])) / (2 * h)
                   for e in np.eye(x0.size)])  # fmt: skip
    np.testing.assert_allclose(analytic, fd, rtol=1e-6, atol=1e-7)
    K, m = _kern(X, 0.9, 1.3), np.full(15, -0.2)
    _assert_forms_agree(laplace(K, m, lik, phi, _form="stable"),
                        laplace(K, m, lik, phi, _form="whitened"))  # fmt: skip


# ------------------------------------------------------------------------ the model
def _survival_data(n=150, seed=4, shape=2.0):
    """Weibull times around f(x) = 1 + 0.7 sin(x), right-censored by exponential times (about
    40% censored)."""
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(0.0, 6.0, n))
    f = 1.0 + 0.7 * np.sin(X)
    times = np.exp(f) * rng.weibull(shape, n)
    cens = rng.exponential(5.0, n)
    return X, f, np.minimum(times, cens), (cens < times) * 1.0


def test_weibull_map_recovers_shape_and_latent_function_only_with_censoring():
    """MAP on 150 simulated times, 40% censored: the shape (2) and f(x) are recovered with the
    censoring (measured: shape 1.95, latent RMSE 0.075); ignoring it (every time an event)
    biases both (shape 1.36, f too low by 0.30 on average: RMSE 0.35), which the bounds
    refuse."""
    X, f, y, c = _survival_data()
    assert 0.3 < c.mean() < 0.5
    m = LatentGP(pd.DataFrame({"x": X, "status": c}), y, likelihood="weibull",
                 censored="status", mean="constant")  # fmt: skip
    fit = m.fit_laplace(n_restarts=2, random_seed=0)
    rmse = np.sqrt(np.mean((fit.f_mode - f) ** 2))
    assert 1.6 < fit.params["shape"] < 2.4 and rmse < 0.15, (fit.params, rmse)
    naive = LatentGP(X, y, likelihood="weibull", mean="constant").fit_laplace(
        n_restarts=2, random_seed=0)
    naive_rmse = np.sqrt(np.mean((naive.f_mode - f) ** 2))
    assert not (1.6 < naive.params["shape"] < 2.4 or naive_rmse < 0.15), (naive.params,
                                                                          naive_rmse)
    # predictions: a DataFrame X_new may carry the status column; the mean time E[T] and the
    # 94% interval bracket the median time, all increasing with f
    Xn = pd.DataFrame({"x": [1.5, 4.7], "status": [0.0, 1.0]})
    pred = m.predict(Xn, fit)
    assert np.all(pred.lower < np.exp(pred.latent_mean)) and np.all(
        np.exp(pred.latent_mean) < pred.upper)
    assert pred.mean[0] > pred.mean[1] and pred.latent_mean[0] > pred.latent_mean[1]
    label, loo = m.point_loo(fit)
    assert loo.shape == (150,) and np.all(np.isfinite(loo)) and "LA-LOO" in label


def test_predictive_quantiles_against_monte_carlo():
    """The 94% interval of a new time under a MAP fit (quadrature over the latent Gaussian)
    and its median (``extra["median"]``, the median survival time) equal the 3%, 97% and 50%
    quantiles of 400 000 draws f ~ N(latent mean, sd^2), T | f ~ the model (2%), for the
    Weibull and the log-normal; describe() counts the events and censored times."""
    X, _f, y, c = _survival_data(n=60, seed=6)
    rng = np.random.default_rng(0)
    for name in ("weibull", "lognormal"):
        m = LatentGP(X, y, likelihood=name, censored=c)
        fit = m.fit_laplace(n_restarts=1, random_seed=0)
        pred = m.predict(np.array([[1.0], [5.0]]), fit)
        phi = [fit.params[p] for p in m.likelihood.param_names]
        fs = pred.latent_mean + pred.latent_sd * rng.standard_normal((400_000, 2))
        draws = m.likelihood.draw(fs, phi, rng)
        lo, med, hi = np.quantile(draws, [0.03, 0.5, 0.97], axis=0)
        np.testing.assert_allclose(pred.lower, lo, rtol=2e-2)
        np.testing.assert_allclose(pred.upper, hi, rtol=2e-2)
        np.testing.assert_allclose(pred.extra["median"], med, rtol=2e-2)
        np.testing.assert_allclose(pred.mean, draws.mean(axis=0), rtol=2e-2)
    events, censored = int(60 - c.sum()), int(c.sum())
    assert dict(m.describe())["censoring"] == f"{events} event, {censored} right-censored"


@pytest.mark.parametrize("name", list(IS_TOL))
def test_joint_latent_model_density_is_the_likelihood(name):
    """The joint latent NUTS model's ``y`` (PyMC's Censored, plus the interval rows' Potential)
    has the log density of the likelihood object at its f and parameter: the Weibull's to
    1e-12, the normal ones' to 1e-7 (PyMC's erfc-based normal CDFs differ by about 2e-8 here)."""
    X, liks = _cases(n=8, seed=1)
    lik, _phi = next((li, p) for nm, li, p in liks if nm == name)
    kw = {"upper": lik.upper} if name == "censored_gaussian" else {}
    m = LatentGP(X, lik.y, likelihood=name, censored=lik.censored, **kw)
    model = m._latent_model()
    terms = model.logp(vars=model.observed_RVs, sum=True)
    for pot in model.potentials:
        terms = terms + pot
    outs = model.replace_rvs_by_values([terms, model["f"]])
    fn = model.compile_fn(outs, inputs=model.value_vars, on_unused_input="ignore", point_fn=True)
    point = model.initial_point(random_seed=0)
    point["f_rotated_"] = np.random.default_rng(0).normal(size=8)
    value, f = fn(point)
    param = np.exp(point[f"{m.likelihood.param_names[0]}_log__"])
    rel = 1e-12 if name == "weibull" else 1e-7
    assert float(value) == pytest.approx(m.likelihood.log_lik(f, [param]), rel=rel)
    assert m.prior_predictive(2, random_seed=0).shape == (2, 8)


def test_laplace_nuts_short_run():
    """NUTS with the Laplace-integrated GP on 30 censored Weibull times (2 chains x 100 draws):
    finite LA-LOO terms per draw and a shape posterior that covers the simulated 2."""
    X, _f, y, c = _survival_data(n=30, seed=8)
    m = LatentGP(X, y, likelihood="weibull", censored=c, mean="constant")
    idata = m.sample(draws=100, tune=100, chains=2, random_seed=1)
    shape = np.asarray(idata["posterior"]["shape"]).ravel()
    lo, hi = np.quantile(shape, [0.02, 0.98])
    assert lo < 2.0 < hi and hi - lo < 3.0, (lo, hi)
    assert np.all(np.isfinite(np.asarray(idata["log_likelihood"]["y"])))


# ------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "make,match",
    [
        (lambda: Weibull(np.array([1.0, 2.0]), censored=np.array([0, 2.0])),
         r"0 \(event\), 1 \(right-censored\); censored\[1\] = 2"),
        (lambda: LogNormal(np.array([1.0, 2.0]), censored=np.array([0, -1.0])),
         r"censored\[1\] = -1"),
        (lambda: Weibull(np.array([1.0, 0.0])), r"positive survival times; y\[1\] = 0"),
        (lambda: LogNormal(np.array([-1.0, 2.0])), r"y\[0\] = -1"),
        (lambda: Weibull(np.array([1.0, np.nan])), r"`y` has 1 NaN"),
        (lambda: Weibull(np.array([1.0, 2.0]), censored=np.array([0, np.nan])),
         r"`censored` has 1 NaN"),
        (lambda: Weibull(np.array([1.0, 2.0]), censored=np.array([0, 1, 0.0])),
         r"`censored` has 3 values for 2"),
        (lambda: CensoredGaussian(np.zeros(2), censored=np.array([0, 3.0])),
         r"-1 \(left-censored\).*censored\[1\] = 3"),
        (lambda: CensoredGaussian(np.zeros(2), censored=np.array([0, 2.0])), "needs `upper`"),
        (lambda: CensoredGaussian(np.zeros(2), censored=np.array([0, 2.0]),
                                  upper=np.array([np.nan, -1.0])),
         r"upper > y.*upper\[1\] = -1 <= y\[1\] = 0"),
        (lambda: CensoredGaussian(np.zeros(2), censored=np.array([2, 0.0]),
                                  upper=np.array([np.nan, 1.0])), r"finite.*upper\[0\] = nan"),
        (lambda: CensoredGaussian(np.zeros(2), censored=np.array([0, 2.0]),
                                  upper=np.ones(3)), r"`upper` has 3 values for 2"),
    ],
)  # fmt: skip
def test_bad_data_refused(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(likelihood="poisson", censored=np.zeros(4)), "`censored` applies to the weibull"),
        (dict(likelihood="weibull", upper=np.ones(4)), "`upper`.*censored_gaussian"),
        (dict(likelihood="weibull", censored="status"), "not a DataFrame"),
        (dict(likelihood="weibull", censored=np.array([0, 1, 1, 5.0])), r"censored\[3\] = 5"),
    ],
)  # fmt: skip
def test_model_refuses_bad_censoring_before_compiling(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LatentGP(np.arange(4.0), np.array([1.0, 2.0, 3.0, 4.0]), **kwargs)


def test_censoring_column_of_a_data_frame():
    """``censored="status"`` reads the column and drops it from the inputs; a missing column
    is named."""
    df = pd.DataFrame({"x": np.arange(4.0), "status": [0, 1, 0, 1]})
    m = LatentGP(df, np.array([1.0, 2.0, 3.0, 4.0]), likelihood="lognormal", censored="status")
    assert m.feature_names == ["x"] and list(m.likelihood.censored) == [0, 1, 0, 1]
    with pytest.raises(ValueError, match="'event' is not a column"):
        LatentGP(df, np.ones(4), likelihood="weibull", censored="event")
