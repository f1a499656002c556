"""KernelRidge: the dual solution a = (K + lam I)^-1 t (seed 000 eqs. 7–8) against scikit-learn,
against the GP posterior mean with noise variance lam, and against the primal solution (eq. 3)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.kernel_ridge import KernelRidge as SkKernelRidge

import bayes_gp
from bayes_gp import BayesianLinearRegression, GPRegression, KernelRidge
from bayes_gp.inference import MapFit
from bayes_gp.kernels import DotProduct, ExpQuad, Matern52

NO_HYPER = MapFit(params={}, objective=0.0, prior=False)


def _data(n=60, D=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 5, size=(n, D))
    t = np.sin(X[:, 0]) * np.cos(X[:, -1]) + 0.1 * rng.standard_normal(n)
    Xs = rng.uniform(-0.5, 5.5, size=(25, D))
    return X, t, Xs


@pytest.mark.parametrize("lam", [1e-3, 0.1, 3.0])
def test_equals_sklearn_rbf(lam):
    X, t, Xs = _data()
    ls = 0.9
    ours = KernelRidge(ExpQuad(2, ls=ls), lam).fit(X, t)
    sk = SkKernelRidge(alpha=lam, kernel="rbf", gamma=1.0 / (2 * ls**2)).fit(X, t)
    scale = np.max(np.abs(sk.dual_coef_))
    np.testing.assert_allclose(ours.dual_coef_, sk.dual_coef_, rtol=0, atol=1e-10 * scale)
    np.testing.assert_allclose(ours.predict(Xs), sk.predict(Xs), rtol=0, atol=1e-10)


def test_equals_sklearn_precomputed_for_any_kernel():
    """A kernel scikit-learn does not have (Matern-5/2 + linear): both get the same Gram matrix."""
    X, t, Xs = _data(D=3)
    kern = 0.8 * Matern52(3, ls=[1.0, 2.0, 0.7]) + DotProduct(3, sigma0=0.5, Sigma_p=0.1)
    ours = KernelRidge(kern, 0.05).fit(X, t)
    K, Ks = ours.gram(X), ours.gram(Xs, X)
    sk = SkKernelRidge(alpha=0.05, kernel="precomputed").fit(K, t)
    np.testing.assert_allclose(ours.predict(Xs), sk.predict(Ks), rtol=0, atol=1e-10)
    pre = KernelRidge("precomputed", 0.05).fit(K, t)
    np.testing.assert_allclose(pre.predict(Ks), sk.predict(Ks), rtol=0, atol=1e-12)
    np.testing.assert_allclose(pre.dual_coef_, ours.dual_coef_, rtol=0, atol=1e-12)


@pytest.mark.parametrize("lam", [0.01, 0.25])
def test_equals_gp_posterior_mean_with_noise_variance_lam(lam):
    """seed 000 eq. (8) = eq. (27) with C_N = K + lam I (noise variance beta^-1 = lam)."""
    X, t, Xs = _data()
    kern = ExpQuad(2, ls=1.1)
    ours = KernelRidge(kern, lam).fit(X, t)
    gp = GPRegression(
        X, t, kernel=lambda D: ExpQuad(D, ls=1.1), mean="zero", noise=np.sqrt(lam), jitter=0.0
    )
    np.testing.assert_allclose(ours.predict(Xs), gp.predict(Xs, NO_HYPER).mean, rtol=0, atol=1e-10)


def test_dual_equals_primal_and_bayesian_linear_regression():
    """With k = phi^T phi: w = Phi^T a (eq. 3) = (Phi^T Phi + lam I)^-1 Phi^T t, the minimiser of
    eq. (2), which is the posterior mean of Bayesian linear regression with Sigma_p = I and
    sigma^2 = lam."""
    rng = np.random.default_rng(2)
    Phi = rng.standard_normal((30, 6))
    t = Phi @ rng.standard_normal(6) + 0.2 * rng.standard_normal(30)
    lam = 0.3
    kr = KernelRidge(lambda A, B: A @ B.T, lam).fit(Phi, t)
    w = kr.primal_weights(Phi)
    w_primal = np.linalg.solve(Phi.T @ Phi + lam * np.eye(6), Phi.T @ t)
    np.testing.assert_allclose(w, w_primal, rtol=1e-11)
    grad = Phi.T @ (Phi @ w - t) + lam * w  # gradient of E(w), seed 000 eq. (2)
    assert np.max(np.abs(grad)) < 1e-10 * np.max(np.abs(Phi.T @ t))
    blr = BayesianLinearRegression(Phi, t, Sigma_p=1.0, sigma=np.sqrt(lam))
    np.testing.assert_allclose(blr.posterior().mean, w, rtol=1e-11)
    Xn = rng.standard_normal((5, 6))
    np.testing.assert_allclose(kr.predict(Xn), Xn @ w, rtol=1e-11)


def test_exported():
    assert bayes_gp.KernelRidge is KernelRidge
    assert "KernelRidge" in bayes_gp.__all__


def test_bad_inputs():
    X, t, Xs = _data()
    k = ExpQuad(2, ls=1.0)
    for lam in (0.0, -1.0, np.nan, "a"):
        with pytest.raises(ValueError, match="`lam` must be a positive number"):
            KernelRidge(k, lam)
    with pytest.raises(ValueError, match="`kernel` must be"):
        KernelRidge("rbf", 1.0)
    with pytest.raises(ValueError, match="`kernel` must be"):
        KernelRidge(3.0, 1.0)
    kr = KernelRidge(k, 0.1)
    with pytest.raises(ValueError, match="call `fit` before"):
        kr.predict(Xs)
    with pytest.raises(ValueError, match="rows but `t` has"):
        kr.fit(X, t[:10])
    with pytest.raises(ValueError, match="NaN"):
        kr.fit(X, np.full_like(t, np.nan))
    kr.fit(X, t)
    with pytest.raises(ValueError, match="column"):
        kr.predict(np.ones((3, 5)))
    pre = KernelRidge("precomputed", 0.1)
    with pytest.raises(ValueError, match="must be square"):
        pre.fit(np.ones((4, 3)), np.ones(4))
    pre.fit(np.eye(4), np.ones(4))
    with pytest.raises(ValueError, match=r"shape \(m, 4\)"):
        pre.predict(np.ones((2, 3)))
    with pytest.raises(ValueError, match="no kernel to evaluate"):
        pre.gram(X)
    with pytest.raises(ValueError, match="kernel returned shape"):
        KernelRidge(lambda A, B: np.ones((2, 2)), 0.1).fit(X, t)
