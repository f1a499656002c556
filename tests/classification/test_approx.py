"""Laplace and EP approximations at fixed hyperparameters (R&W Algorithms 3.1, 3.2, 3.5, 3.6, 5.1,
eq. 5.27), against scikit-learn, closed forms, finite differences and brute-force integrals."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import expit, log_ndtr
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C

from bayes_gp.classification.approx import ep_grad, ep_run, laplace_grad, laplace_mode
from bayes_gp.classification.likelihoods import average_probability, log_lik_derivatives


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
    X, t, y = _problem()
    K, _ = _se(X, X, ls, eta)
    state = laplace_mode(K, y, "logit")
    sk = GaussianProcessClassifier(C(eta**2, "fixed") * RBF(ls, "fixed"), optimizer=None).fit(X, t)
    np.testing.assert_allclose(state.log_evidence, sk.log_marginal_likelihood_value_, rtol=1e-10)
    np.testing.assert_allclose(state.f, sk.base_estimator_.f_cached, atol=1e-8)
    Xs = np.random.default_rng(1).uniform(-4, 4, (25, 2))
    mean, var = state.predict_latent(_se(X, Xs, ls, eta)[0], np.full(25, eta**2))
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


@pytest.mark.parametrize("link", ["logit", "probit"])
def test_likelihood_derivatives_against_finite_differences(link):
    y = np.array([1.0, -1.0, 1.0, -1.0, 1.0])
    f = np.array([-7.0, -0.3, 0.0, 2.2, 9.0])
    h = 1e-5
    vals = [log_lik_derivatives(link, y, f + s * h) for s in (-1, 1)]
    lp, d1, d2, d3 = log_lik_derivatives(link, y, f)
    np.testing.assert_allclose(d1, (vals[1][0] - vals[0][0]) / (2 * h), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(d2, (vals[1][1] - vals[0][1]) / (2 * h), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(d3, (vals[1][2] - vals[0][2]) / (2 * h), rtol=1e-5, atol=1e-9)
    expected = -np.logaddexp(0, -y * f) if link == "logit" else log_ndtr(y * f)
    np.testing.assert_allclose(lp, expected, rtol=1e-14)


def test_probit_average_probability_is_the_closed_form():
    m, v = np.array([-1.0, 0.3, 2.0]), np.array([0.5, 2.0, 0.1])
    expected = [
        integrate.quad(
            lambda f, a=a, b=b: stats.norm.cdf(f) * stats.norm.pdf(f, a, np.sqrt(b)), -30, 30
        )[0]
        for a, b in zip(m, v, strict=True)
    ]
    np.testing.assert_allclose(average_probability("probit", m, v), expected, rtol=1e-9)


@pytest.mark.parametrize("link", ["logit", "probit"])
def test_laplace_gradient_matches_finite_differences(link):
    X, _, y = _problem(seed=2)
    r2 = np.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=-1)

    def log_q(th):
        ls, eta = np.exp(th)
        return laplace_mode(eta**2 * np.exp(-0.5 * r2 / ls**2), y, link).log_evidence

    th = np.log([1.1, 1.6])
    ls, eta = np.exp(th)
    K = eta**2 * np.exp(-0.5 * r2 / ls**2)
    grad = laplace_grad(laplace_mode(K, y, link), K, [K * r2 / ls**2, 2 * K])
    fd = [(log_q(th + 1e-6 * e) - log_q(th - 1e-6 * e)) / 2e-6 for e in np.eye(2)]
    np.testing.assert_allclose(grad, fd, rtol=1e-5)


def test_ep_evidence_gradient_and_direct_formula():
    X, _, y = _problem(seed=3)
    r2 = np.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=-1)
    th = np.log([1.2, 1.5])
    ls, eta = np.exp(th)
    K = eta**2 * np.exp(-0.5 * r2 / ls**2)
    ep = ep_run(K, y)
    # log Z_EP = log N(mu_t | 0, K + Sigma_t) + sum_i log Z_t,i  (R&W eqs. 3.58, 3.65)
    tau_n = 1 / np.diag(ep.Sigma) - ep.tau_t
    nu_n = ep.mu / np.diag(ep.Sigma) - ep.nu_t
    mu_n, s2_n = nu_n / tau_n, 1 / tau_n
    mu_t, s2_t = ep.nu_t / ep.tau_t, 1 / ep.tau_t
    log_zt = (
        log_ndtr(y * mu_n / np.sqrt(1 + s2_n))
        + 0.5 * np.log(2 * np.pi * (s2_n + s2_t))
        + 0.5 * (mu_n - mu_t) ** 2 / (s2_n + s2_t)
    )
    direct = stats.multivariate_normal(np.zeros(len(y)), K + np.diag(s2_t)).logpdf(mu_t)
    np.testing.assert_allclose(ep.log_evidence, direct + log_zt.sum(), rtol=1e-9)

    def log_z(th):
        ls, eta = np.exp(th)
        return ep_run(eta**2 * np.exp(-0.5 * r2 / ls**2), y).log_evidence

    grad = ep_grad(ep, K, [K * r2 / ls**2, 2 * K])
    fd = [(log_z(th + 1e-6 * e) - log_z(th - 1e-6 * e)) / 2e-6 for e in np.eye(2)]
    np.testing.assert_allclose(grad, fd, rtol=1e-4)


def test_ep_is_closer_to_the_true_evidence_than_laplace():
    """Kuss & Rasmussen (2005): Laplace underestimates the evidence; EP is close to it.

    The true evidence p(y|X) = E_{q}[p(y|f) N(f|0,K) / q(f)] is estimated by importance sampling
    with the EP posterior (inflated) as proposal, with enough draws for a standard error far below
    the gaps compared.
    """
    X, _, y = _problem(n=20, seed=4)
    K, _ = _se(X, X, 1.5, 3.0)  # a large latent scale, where the two approximations differ
    K = K + 1e-8 * np.eye(20)
    lap = laplace_mode(K, y, "probit").log_evidence
    ep = ep_run(K, y)
    rng = np.random.default_rng(0)
    cov = 1.5 * ep.Sigma
    q = stats.multivariate_normal(ep.mu, cov, allow_singular=False)
    f = q.rvs(size=200_000, random_state=rng)
    log_w = (
        np.sum(log_ndtr(y * f), axis=1)
        + stats.multivariate_normal(np.zeros(20), K).logpdf(f)
        - q.logpdf(f)
    )
    m = log_w.max()
    log_z = m + np.log(np.mean(np.exp(log_w - m)))
    se = np.std(np.exp(log_w - m)) / np.sqrt(len(log_w)) / np.mean(np.exp(log_w - m))
    assert se < 0.02
    assert lap < log_z - 0.1  # Laplace underestimates
    assert abs(ep.log_evidence - log_z) < abs(lap - log_z) / 3  # EP much closer


def test_normal_hazard_is_finite_and_accurate_everywhere():
    from bayes_gp.classification.likelihoods import normal_hazard

    z = np.array([-30.0, -5.0, -1.0, 0.0, 1.5, 8.0])
    np.testing.assert_allclose(normal_hazard(z), stats.norm.pdf(z) / stats.norm.cdf(z), rtol=1e-12)
    # far tail: N(z)/Phi(z) = -z (1 + 1/z^2 - 2/z^4 + ...) where exp(-z^2/2 - log Phi) is inf-inf
    zt = np.array([-1e3, -1e8, -1e12, -1e200])
    np.testing.assert_allclose(
        normal_hazard(zt), -zt * (1 + (1 / zt) ** 2 - 2 * (1 / zt) ** 4), rtol=1e-14
    )
    assert normal_hazard(np.array([40.0, 1e300]))[1] == 0.0
    _, d1, d2, d3 = log_lik_derivatives("probit", np.ones(4), np.array([-1e12, -1e6, -40.0, 50.0]))
    assert np.all(np.isfinite(d1)) and np.all(np.isfinite(d2)) and np.all(np.isfinite(d3))
    assert np.all((-d2 >= 0) & (-d2 <= 1))  # W of the probit lies in [0, 1]


@pytest.mark.parametrize("sd", [0.0, 0.3, 1.0, 2.9, 3.1, 6.0, 20.0, 50.0, 1e3, 1e5])
def test_logit_average_probability_against_adaptive_quadrature(sd):
    """Accurate for every latent sd, including the large ones where plain Gauss-Hermite fails
    (1e-3 error at sd = 20): what NUTS draws with a large eta produce far from the data."""
    means = np.array([-200.0, -30.0, -4.0, 0.0, 0.7, 2.0, 9.0, 45.0])
    got = average_probability("logit", means, np.full(means.size, sd**2))
    for m, p in zip(means, got, strict=True):
        if sd == 0.0:
            exact = expit(m)
        else:  # sigma(f) is 0 / 1 beyond |f| = 45 to within 3e-20
            exact = (
                stats.norm.sf(45.0, m, sd)
                + integrate.quad(
                    lambda f, m=m: expit(f) * stats.norm.pdf(f, m, sd),
                    -45.0,
                    45.0,
                    points=[np.clip(m, -44.0, 44.0)],
                    limit=2000,
                    epsabs=1e-15,
                    epsrel=1e-13,
                )[0]
            )
        assert abs(p - exact) < 1e-12, (m, sd, p, exact)


def test_average_probability_keeps_shapes_and_blocks():
    """Many draws times many points: evaluated in blocks, same answer, same shape."""
    rng = np.random.default_rng(0)
    m = rng.normal(0, 3, (7, 3000))
    v = rng.uniform(0, 40, (7, 3000))
    p = average_probability("logit", m, v)
    assert p.shape == (7, 3000)
    np.testing.assert_allclose(
        p[3, 100:110], average_probability("logit", m[3, 100:110], v[3, 100:110]), rtol=1e-14
    )
    assert np.all((p > 0) & (p < 1))


def test_laplace_mode_flags_non_convergence():
    X, _, y = _problem()
    K, _ = _se(X, X, 1.0, 2.0)
    assert laplace_mode(K, y, "logit").converged
    assert not laplace_mode(K, y, "logit", max_iter=1).converged
    assert ep_run(K, y).converged and not ep_run(K, y, max_sweeps=1).converged
