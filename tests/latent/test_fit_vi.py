"""LatentGP.fit_vi: variational inference with type-II hyperparameters on the bound.

The numerical core is tested in ``test_vi.py``; here the model: the bound is the exact evidence
for a Gaussian likelihood and a lower bound of an importance-sampling estimate otherwise, its
gradient through the kernel is right, the Gaussian-KL prediction sits between Laplace and EP,
and the fit goes through the protocol (report, LOO, restore)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logsumexp
from sklearn.datasets import load_breast_cancer

from bayes_gp import GPClassifier, GPRegression, LatentGP
from bayes_gp.inference import MapFit
from bayes_gp.inference.typeii import observed_logp_and_grad
from bayes_gp.latent.model import VIFit
from bayes_gp.report import report


def _classes(n=60, seed=3):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(-3, 3, n))
    return x, (np.sin(1.3 * x) + 0.4 * rng.normal(size=n) > 0).astype(float)


def _counts(n=40, seed=5):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 10, n))
    return x, rng.poisson(np.exp(1.0 + np.sin(x))).astype(float)


def test_gaussian_bound_is_the_exact_evidence():
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0, 6, 30))
    y = np.sin(x) + 0.3 * rng.standard_normal(30)
    params = {"ls": 1.1, "eta": 0.8, "sigma": 0.35}
    lg = LatentGP(x, y, "expquad", "gaussian", mean="zero")
    fit = lg.fit_vi(params=params)
    assert isinstance(fit, VIFit) and fit.variational == "kl"
    gp = GPRegression(x, y, "expquad", mean="zero", jitter=lg.jitter / np.var(y))
    exact = gp.log_marginal_likelihood(params)
    assert fit.log_marginal_likelihood == pytest.approx(exact, abs=1e-7)
    xs = np.linspace(-1, 7, 9)
    ours = lg.predict(xs, fit)
    ref = gp.predict(xs, MapFit(params, 0.0, False))
    np.testing.assert_allclose(ours.latent_mean, ref.mean, atol=1e-7)
    np.testing.assert_allclose(ours.latent_sd, ref.sd, atol=1e-7)


def _is_log_evidence(lg, fit, draws=40000, seed=0):
    """log p(y | θ) by importance sampling from q(f) with a 1.2-inflated covariance."""
    K, m, phi = lg._train(lg._values(fit.params))
    factor = lg._factor(K, m, phi, fit, fit.f_mode)
    S = 1.2 * factor.cov()
    L = np.linalg.cholesky(S)
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((draws, K.shape[0]))
    f = fit.f_mode + z @ L.T
    LK = np.linalg.cholesky(K)
    u = np.linalg.solve(LK, (f - m).T)
    log_prior = -0.5 * np.sum(u * u, axis=0) - np.sum(np.log(np.diag(LK)))
    log_q = -0.5 * np.sum(z * z, axis=1) - np.sum(np.log(np.diag(L)))
    log_lik = np.array([lg.likelihood.log_lik(fi, phi) for fi in f])
    w = log_lik + log_prior - log_q
    return float(logsumexp(w) - np.log(draws))


@pytest.mark.parametrize(
    ("likelihood", "method"),
    [("bernoulli", "jj"), ("bernoulli", "kl"), ("poisson", "kl"), ("negative_binomial", "kl")],
)
def test_the_bound_is_below_the_true_evidence_and_jj_below_kl(likelihood, method):
    """Measured (IS − bound, the IS estimate varying by ~0.012 between seeds): bernoulli JJ
    0.84 (the local bound on 60 sigmoids is loose; the Laplace evidence is 0.07 below IS), KL
    0.021; poisson 0.051; negative binomial 0.017 nats."""
    x, y = _classes() if likelihood == "bernoulli" else _counts()
    lg = LatentGP(x, y, "expquad", likelihood)
    params = {"ls": 1.0, "eta": 1.5}
    if likelihood == "negative_binomial":
        params["dispersion"] = 8.0
    fit = lg.fit_vi(params=params, method=method)
    truth = _is_log_evidence(lg, fit)
    assert fit.log_marginal_likelihood <= truth + 0.01
    assert truth - fit.log_marginal_likelihood < (1.2 if method == "jj" else 0.1)
    if method == "jj":  # the Gaussian-KL family contains the Jaakkola-Jordan posterior
        kl = lg.fit_vi(params=params, method="kl")
        assert kl.log_marginal_likelihood >= fit.log_marginal_likelihood


@pytest.mark.parametrize("likelihood", ["bernoulli", "poisson"])
def test_gradient_of_the_bound_through_the_kernel(likelihood):
    x, y = _classes(40) if likelihood == "bernoulli" else _counts(30)
    lg = LatentGP(x, y, "matern52", likelihood)
    method = "jj" if likelihood == "bernoulli" else "kl"
    fn = observed_logp_and_grad(lg._bound_model(method))
    at = {"ls": 1.3, "eta": 1.2}
    value, *grad = fn(*lg._values(at))
    assert value == pytest.approx(lg.fit_vi(params=at, method=method).log_marginal_likelihood)
    for i, name in enumerate(lg.hyperparameters):
        h = 1e-5 * at[name]
        up = lg.fit_vi(params={**at, name: at[name] + h}, method=method).log_marginal_likelihood
        dn = lg.fit_vi(params={**at, name: at[name] - h}, method=method).log_marginal_likelihood
        assert float(grad[i]) == pytest.approx((up - dn) / (2 * h), rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("data", ["sine", "breast_cancer"])
def test_prediction_sits_between_laplace_and_ep(data):
    """Probit link at the EP type-II hyperparameters. Measured: every one of 40 grid points
    between Laplace and EP (within 1e-3) on the sine data; 58 of 60 on two breast-cancer inputs,
    the other two outside by at most 0.0023."""
    rng = np.random.default_rng(3)
    if data == "sine":
        X, t = _classes()
        grid = np.linspace(-3.5, 3.5, 40)[:, None]
    else:
        d = load_breast_cancer()
        idx = rng.choice(569, 120, replace=False)
        X = d.data[idx][:, [0, 1]]
        X = (X - X.mean(0)) / X.std(0)
        t = d.target[idx].astype(float)
        grid = rng.normal(size=(60, 2))
    clf = GPClassifier(X, t, "expquad", link="probit")
    ep = clf.fit_ep(n_restarts=2, random_seed=0)
    params = {k: float(v) for k, v in ep.params.items()}
    p_ep = clf.predict_proba(grid, ep)
    p_la = clf.predict_proba(grid, clf.fit_laplace(params=params))
    lg = LatentGP(X, t, "expquad", "bernoulli", link="probit")
    p_vi = lg.predict(grid, lg.fit_vi(params=params)).mean
    lo, hi = np.minimum(p_ep, p_la), np.maximum(p_ep, p_la)
    between = (p_vi >= lo - 1e-3) & (p_vi <= hi + 1e-3)
    assert between.mean() >= 0.95
    assert np.max(np.maximum(lo - p_vi, p_vi - hi)) < 0.005


@pytest.mark.slow
def test_fit_vi_through_the_protocol():
    x, y = _counts()
    lg = LatentGP(x, y, "expquad", "poisson")
    fit = lg.fit("vi", n_restarts=2, random_seed=0)
    assert isinstance(fit, VIFit) and fit.converged and fit.method_label == "VI (Gaussian KL) MAP"
    laplace = lg.fit("map", n_restarts=2, random_seed=0)
    # the bound is below the Laplace evidence here, and the optima are close
    assert fit.log_marginal_likelihood < laplace.log_marginal_likelihood + 0.05
    np.testing.assert_allclose(float(fit.params["ls"]), float(laplace.params["ls"]), rtol=0.2)
    method, loo = lg.point_loo(fit)
    assert method.startswith("cavity LOO") and loo.shape == (40,) and np.all(np.isfinite(loo))
    again = lg.restore_fit("vi", fit.params, {"objective": fit.objective, "prior": 1,
                                               "grad_norm": fit.grad_norm})  # fmt: skip
    np.testing.assert_allclose(again.f_mode, fit.f_mode, rtol=1e-8)
    rep = report({"VI": fit, "Laplace": laplace}, model=lg, X_new=np.array([[11.0]]))
    assert rep.problems == []
    assert "variational lower bound (ELBO)" in rep.html and "cavity LOO" in rep.html
    bands = lg.bands(np.linspace(0, 10, 5), fit)  # the legend names what the bands are of
    assert bands.band_label == "94% band of the response mean E[y* | f*] per unit exposure"
    assert bands.y_band_label == "94% predictive interval of y* per unit exposure"
    reps = lg.replicate(fit, 200, random_seed=1)
    assert abs(reps.mean() - y.mean()) < 0.15 * y.mean()


def test_method_errors():
    x, y = _counts(10)
    lg = LatentGP(x, y, "expquad", "poisson")
    with pytest.raises(ValueError, match="method='kl'"):
        lg.fit_vi(method="jj")
    with pytest.raises(ValueError, match="'jj' or 'kl'"):
        lg.fit_vi(method="ep")


def _robust(n=40, seed=8):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 10, n))
    return x, np.sin(x) + 0.3 * rng.standard_t(3, n)


#: likelihood -> (data, model options, likelihood parameters, largest |IS − Laplace| allowed).
#: Measured IS − Laplace (the IS estimate varies by ~0.012 between seeds): bernoulli 0.077,
#: binomial 0.094, poisson 0.041, negative binomial 0.062, student-t 0.61 (its latent posterior
#: is far from Gaussian near the outliers), gaussian −0.001 (exact).
LAPLACE_CASES = {
    "bernoulli": (_classes, {}, {}, 0.15),
    "binomial": (lambda: (_counts()[0], np.minimum(_counts()[1], 6.0)), {"trials": 6}, {}, 0.15),
    "poisson": (_counts, {}, {}, 0.1),
    "negative_binomial": (_counts, {}, {"dispersion": 8.0}, 0.1),
    "student_t": (_robust, {}, {"nu": 4.0, "sigma": 0.3}, 1.0),
    "gaussian": (_robust, {}, {"sigma": 0.4}, 0.03),
}


@pytest.mark.parametrize("likelihood", sorted(LAPLACE_CASES))
def test_laplace_evidence_against_importance_sampling(likelihood):
    """The model-level Laplace evidence log q(y | θ) against an importance-sampling estimate of
    log p(y | θ) with the Laplace posterior (inflated) as proposal: how close, per likelihood."""
    data, options, extra, tol = LAPLACE_CASES[likelihood]
    x, y = data()
    lg = LatentGP(x, y, "expquad", likelihood, **options)
    fit = lg.fit_laplace(params={"ls": 1.0, "eta": 1.5, **extra})
    gap = _is_log_evidence(lg, fit) - fit.log_marginal_likelihood
    assert abs(gap) < tol, gap
    if likelihood == "student_t":  # Laplace underestimates the evidence here, and visibly
        assert gap > 0.3
