"""Expectation propagation for the Bernoulli-probit latent GP (R&W Algorithms 3.5, 3.6, eqs.
3.65, 5.27), and the Laplace approximation of the same classifier against scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import expit, log_ndtr
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from bayes_gp.classification.likelihoods import average_probability
from bayes_gp.latent import Bernoulli, ep_run, expectation_propagation, grad_theta, laplace
from bayes_gp.latent.likelihoods import normal_hazard
from bayes_gp.latent.predictive import predict_latent


def _problem(n=50, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, (n, 2))
    t = (np.sin(X[:, 0]) + 0.3 * X[:, 1] + 0.5 * rng.normal(size=n) > 0).astype(int)
    return X, t, 2.0 * t - 1.0


def _se(X, Z, ls, eta):
    r2 = np.sum((X[:, None, :] - Z[None, :, :]) ** 2, axis=-1)
    return eta**2 * np.exp(-0.5 * r2 / ls**2), r2


@pytest.mark.parametrize(("ls", "eta"), [(1.3, 1.7), (0.5, 3.0), (2.5, 0.8)])
def test_laplace_equals_sklearn(ls, eta):
    """The latent GP's Laplace approximation with the Bernoulli-logit likelihood is
    scikit-learn's GaussianProcessClassifier at fixed hyperparameters: evidence, mode and
    predictive probabilities (R&W Algorithms 3.1, 3.2)."""
    X, t, _ = _problem()
    K, _ = _se(X, X, ls, eta)
    lik = Bernoulli(t * 1.0)
    res = laplace(K, np.zeros(len(t)), lik)
    sk = GaussianProcessClassifier(C(eta**2, "fixed") * RBF(ls, "fixed"), optimizer=None).fit(X, t)
    np.testing.assert_allclose(res.log_evidence, sk.log_marginal_likelihood_value_, rtol=1e-10)
    np.testing.assert_allclose(res.f, sk.base_estimator_.f_cached, atol=1e-8)
    Xs = np.random.default_rng(1).uniform(-4, 4, (25, 2))
    mean, var = predict_latent(K, res.f, lik, (), _se(X, Xs, ls, eta)[0], np.full(25, eta**2),
                               np.zeros(25))  # fmt: skip
    p = average_probability("logit", mean, var)
    # scikit-learn integrates the logistic by an erf-mixture approximation (error ~1e-4);
    # ours is quadrature, checked against adaptive integration below.
    np.testing.assert_allclose(p, sk.predict_proba(Xs)[:, 1], atol=3e-4)
    for m, v, pi in zip(mean[:5], var[:5], p[:5], strict=True):
        exact = integrate.quad(
            lambda f, m=m, v=v: expit(f) * stats.norm.pdf(f, m, np.sqrt(v)),
            m - 12 * np.sqrt(v),
            m + 12 * np.sqrt(v),
            epsabs=1e-13,
        )[0]
        assert abs(pi - exact) < 1e-10


def test_ep_evidence_gradient_and_direct_formula():
    X, t, y = _problem(seed=3)
    r2 = np.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=-1)
    th = np.log([1.2, 1.5])
    ls, eta = np.exp(th)
    K = eta**2 * np.exp(-0.5 * r2 / ls**2)
    state = ep_run(K, y)
    # log Z_EP = log N(mu_t | 0, K + Sigma_t) + sum_i log Z_t,i  (R&W eqs. 3.58, 3.65)
    tau_n = 1 / np.diag(state.Sigma) - state.tau_t
    nu_n = state.mu / np.diag(state.Sigma) - state.nu_t
    mu_n, s2_n = nu_n / tau_n, 1 / tau_n
    mu_t, s2_t = state.nu_t / state.tau_t, 1 / state.tau_t
    log_zt = (
        log_ndtr(y * mu_n / np.sqrt(1 + s2_n))
        + 0.5 * np.log(2 * np.pi * (s2_n + s2_t))
        + 0.5 * (mu_n - mu_t) ** 2 / (s2_n + s2_t)
    )
    direct = stats.multivariate_normal(np.zeros(len(y)), K + np.diag(s2_t)).logpdf(mu_t)
    np.testing.assert_allclose(state.log_evidence, direct + log_zt.sum(), rtol=1e-9)

    def log_z(th):
        ls, eta = np.exp(th)
        return ep_run(eta**2 * np.exp(-0.5 * r2 / ls**2), y).log_evidence

    res = expectation_propagation(K, np.zeros(len(y)), Bernoulli(t * 1.0, link="probit"))
    assert res.log_evidence == state.log_evidence
    grad = grad_theta(res.grad_K, [K * r2 / ls**2, 2 * K])
    fd = [(log_z(th + 1e-6 * e) - log_z(th - 1e-6 * e)) / 2e-6 for e in np.eye(2)]
    np.testing.assert_allclose(grad, fd, rtol=1e-4)


def test_ep_with_a_prior_mean():
    """A prior mean m enters EP through the tilted moments only (in g = f - m): log Z_EP equals
    the direct formula log N(mu_t | 0, K + S_t^-1) + sum_i log Z_t,i with the probit of the
    shifted cavity, the posterior mean includes m, and d log Z_EP / dm = b (module docstring)
    against central differences."""
    X, t, y = _problem(n=30, seed=5)
    K, _ = _se(X, X, 1.1, 1.4)
    lik = Bernoulli(t * 1.0, link="probit")
    m = np.random.default_rng(2).normal(0, 0.5, len(t))
    res = expectation_propagation(K, m, lik, tol=1e-12)
    assert res.converged and res.feasible
    st = res.state
    mu_g = st.mu - m
    tau_n = 1 / np.diag(st.Sigma) - st.tau_t
    nu_n = mu_g / np.diag(st.Sigma) - st.nu_t
    mu_n, s2_n = nu_n / tau_n, 1 / tau_n
    mu_t, s2_t = st.nu_t / st.tau_t, 1 / st.tau_t
    log_zt = (
        log_ndtr(y * (mu_n + m) / np.sqrt(1 + s2_n))
        + 0.5 * np.log(2 * np.pi * (s2_n + s2_t))
        + 0.5 * (mu_n - mu_t) ** 2 / (s2_n + s2_t)
    )
    direct = stats.multivariate_normal(np.zeros(len(y)), K + np.diag(s2_t)).logpdf(mu_t)
    np.testing.assert_allclose(res.log_evidence, direct + log_zt.sum(), rtol=1e-9)
    zero = expectation_propagation(K, np.zeros(len(t)), lik, tol=1e-12)
    assert np.max(np.abs(res.f - zero.f)) > 0.1
    h = 1e-6
    for i in (0, 7, 19):
        e = np.zeros(len(t))
        e[i] = h
        up = expectation_propagation(K, m + e, lik, tol=1e-13, gradient=False).log_evidence
        down = expectation_propagation(K, m - e, lik, tol=1e-13, gradient=False).log_evidence
        assert res.grad_m[i] == pytest.approx((up - down) / (2 * h), rel=1e-4, abs=1e-8)


def test_ep_refuses_other_likelihoods():
    K = np.eye(3)
    with pytest.raises(ValueError, match="probit link only"):
        expectation_propagation(K, np.zeros(3), Bernoulli(np.array([0.0, 1.0, 1.0])))


def test_ep_is_closer_to_the_true_evidence_than_laplace():
    """Kuss & Rasmussen (2005): Laplace underestimates the evidence; EP is close to it.

    The true evidence p(y|X) = E_{q}[p(y|f) N(f|0,K) / q(f)] is estimated by importance sampling
    with the EP posterior (inflated) as proposal, with enough draws for a standard error far below
    the gaps compared.
    """
    X, t, y = _problem(n=20, seed=4)
    K, _ = _se(X, X, 1.5, 3.0)  # a large latent scale, where the two approximations differ
    K = K + 1e-8 * np.eye(20)
    lap = laplace(K, np.zeros(20), Bernoulli(t * 1.0, link="probit")).log_evidence
    state = ep_run(K, y)
    rng = np.random.default_rng(0)
    cov = 1.5 * state.Sigma
    q = stats.multivariate_normal(state.mu, cov, allow_singular=False)
    f = q.rvs(size=200_000, random_state=rng)
    log_w = (
        np.sum(log_ndtr(y * f), axis=1)
        + stats.multivariate_normal(np.zeros(20), K).logpdf(f)
        - q.logpdf(f)
    )
    mx = log_w.max()
    log_z = mx + np.log(np.mean(np.exp(log_w - mx)))
    se = np.std(np.exp(log_w - mx)) / np.sqrt(len(log_w)) / np.mean(np.exp(log_w - mx))
    assert se < 0.02
    assert lap < log_z - 0.1  # Laplace underestimates
    assert abs(state.log_evidence - log_z) < abs(lap - log_z) / 3  # EP much closer


def test_normal_hazard_is_finite_and_accurate_everywhere():
    z = np.array([-30.0, -5.0, -1.0, 0.0, 1.5, 8.0])
    np.testing.assert_allclose(normal_hazard(z), stats.norm.pdf(z) / stats.norm.cdf(z), rtol=1e-12)
    # far tail: N(z)/Phi(z) = -z (1 + 1/z^2 - 2/z^4 + ...) where exp(-z^2/2 - log Phi) is inf-inf
    zt = np.array([-1e3, -1e8, -1e12, -1e200])
    np.testing.assert_allclose(
        normal_hazard(zt), -zt * (1 + (1 / zt) ** 2 - 2 * (1 / zt) ** 4), rtol=1e-14
    )
    assert normal_hazard(np.array([40.0, 1e300]))[1] == 0.0
    lik = Bernoulli(np.ones(4), link="probit")
    _, d1, d2, d3 = lik.derivatives(np.array([-1e12, -1e6, -40.0, 50.0]))
    assert np.all(np.isfinite(d1)) and np.all(np.isfinite(d2)) and np.all(np.isfinite(d3))
    assert np.all((-d2 >= 0) & (-d2 <= 1))  # W of the probit lies in [0, 1]


def test_non_convergence_is_flagged():
    X, t, y = _problem()
    K, _ = _se(X, X, 1.0, 2.0)
    lik = Bernoulli(t * 1.0)
    assert laplace(K, np.zeros(len(t)), lik).feasible
    short = laplace(K, np.zeros(len(t)), lik, max_iter=1)
    assert not short.feasible and "did not converge" in short.reason
    assert ep_run(K, y).converged and not ep_run(K, y, max_sweeps=1).converged


def test_latent_gp_fit_ep_with_a_constant_mean():
    """``LatentGP.fit_ep`` (Bernoulli-probit) with a learned constant mean: the EP evidence's
    gradient with respect to every hyperparameter, the mean's included, against central
    differences; a type-II fit that converges and beats its starting point; predictions from
    the EP sites; the cavity LOO; and the fit recomputed from its saved hyperparameters."""
    from bayes_gp.latent import EPFit, LatentGP

    rng = np.random.default_rng(7)
    x = np.sort(rng.uniform(-3, 3, 40))
    t = (rng.uniform(size=40) < 1 / (1 + np.exp(-(1.5 * np.sin(x) + 1.0)))).astype(int)
    gp = LatentGP(x, t, "expquad", "bernoulli", link="probit", mean="constant")
    assert gp.hyperparameters == ["ls", "eta", "c"]
    p = {"ls": 1.1, "eta": 1.3, "c": 0.6}
    value, grad = gp.log_marginal_likelihood(p, eval_gradient=True, method="ep")
    for name in p:
        h = 1e-6
        up = gp.log_marginal_likelihood({**p, name: p[name] + h}, method="ep")
        down = gp.log_marginal_likelihood({**p, name: p[name] - h}, method="ep")
        assert grad[name] == pytest.approx((up - down) / (2 * h), rel=1e-4), name
    fit = gp.fit_ep(n_restarts=2, prior=False, random_seed=0)
    assert isinstance(fit, EPFit) and fit.converged and fit.method == "ep"
    assert fit.log_marginal_likelihood > value  # the ML-II optimum beats the point p
    pred = gp.predict(np.array([-2.0, 0.0, 2.0]), fit)
    assert np.all((pred.mean > 0) & (pred.mean < 1))
    label, loo = gp.point_loo(fit)
    assert label.startswith("cavity LOO of q(f) at EP") and loo.shape == (40,)
    assert np.all(loo < 0)
    again = gp.restore_fit("ep", fit.params, {"objective": fit.objective, "prior": fit.prior,
                                              "grad_norm": fit.grad_norm})  # fmt: skip
    np.testing.assert_allclose(again.f_mode, fit.f_mode, rtol=1e-12)
    np.testing.assert_allclose(gp.predict(np.array([0.5]), again).latent_mean,
                               gp.predict(np.array([0.5]), fit).latent_mean, rtol=1e-12)  # fmt: skip
