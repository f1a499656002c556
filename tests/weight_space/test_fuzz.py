"""Fuzzing the weight-space entry points with hypothesis (rules in ``tests/fuzz.py``).

* ``BayesianLinearRegression``: random designs (duplicates, constant and collinear columns),
  scalar / diagonal / full weight priors, noise levels 1e-3..10 and both forms: the posterior
  mean and covariance of seed 004 eqs. (6)–(7) recomputed in NumPy, predictions
  :math:`\\phi_*^\\top\\mu_w` and :math:`\\phi_*^\\top A^{-1}\\phi_*`, and the log marginal
  likelihood of :math:`N(0, \\Phi\\Sigma_p\\Phi^\\top + \\sigma^2 I)`; or a clear error for
  invalid priors, noise levels and data.
* ``KernelRidge``: random inputs with duplicates, length-scales 1e-3..1e3 and regularisation
  1e-6..1e3: equal to scikit-learn's ``KernelRidge`` on the same Gram matrix (seed 000 eq. 7),
  or a clear error.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import multivariate_normal
from sklearn.kernel_ridge import KernelRidge as SkKernelRidge

import bayes_gp.kernels as K
from bayes_gp import BayesianLinearRegression, KernelRidge
from tests.fuzz import check, fuzz

VALID_PRIORS = ["scalar", "vector", "matrix", "zero-entry"]
PRIOR_KINDS = [*VALID_PRIORS, *VALID_PRIORS, "negative", "asymmetric", "indefinite",
               "wrong-length", "nan"]  # fmt: skip
VALID_DATA = ["plain", "duplicates", "constant", "collinear", "pandas"]
DATA_KINDS = [*VALID_DATA, *VALID_DATA, "misaligned", "nan-y", "text-y", "short-y", "bad-sigma"]


def rtol_for(C: np.ndarray) -> float:
    """Agreement expected between two stable solvers: rounding times the condition number."""
    return max(1e-9, 50 * np.linalg.cond(C) * np.finfo(float).eps)


@fuzz(60)
@given(
    n=st.integers(1, 8),
    D=st.integers(1, 3),
    seed=st.integers(0, 2**16),
    prior=st.sampled_from(PRIOR_KINDS),
    data=st.sampled_from(DATA_KINDS),
    u_sigma=st.floats(-3, 1),
    method=st.sampled_from(["weight", "function"]),
)
def test_bayesian_linear_regression_fuzz(n, D, seed, prior, data, u_sigma, method):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D))
    y = rng.normal(size=n)
    sigma = 10.0**u_sigma
    problem = None
    if prior == "scalar":
        S = 1.7
    elif prior == "vector":
        S = rng.uniform(0.1, 3.0, D)
    elif prior == "zero-entry":  # a weight fixed at 0: valid, PSD but singular
        S = np.r_[0.0, rng.uniform(0.1, 3.0, D - 1)]
    elif prior == "matrix":
        A = rng.normal(size=(D, D))
        S = A @ A.T + 0.1 * np.eye(D)
    elif prior == "negative":
        S = -np.ones(D)
        problem = "`Sigma_p` must be non-negative"
    elif prior == "asymmetric":
        S = np.eye(D) + np.triu(np.ones((D, D)), 1)
        problem = "`Sigma_p` must be symmetric" if D > 1 else None
    elif prior == "indefinite":
        S = np.diag(np.r_[-1.0, np.ones(D - 1)]) if D > 1 else -np.ones((1, 1))
        problem = "`Sigma_p` must be positive semi-definite"
    elif prior == "wrong-length":
        S = np.ones(D + 1)
        problem = f"`Sigma_p` has {D + 1} entries for {D} basis functions"
    else:
        S = np.full(D, np.nan)
        problem = "`Sigma_p` contains NaN"
    Xa, ya, kwargs = X, y, {}
    if problem is None:
        if data == "duplicates" and n > 1:
            X[-1] = X[0]
        elif data == "constant":
            X[:, 0] = 1.0  # an intercept column
        elif data == "collinear" and D > 1:
            X[:, 1] = 2.0 * X[:, 0]
        elif data == "pandas":
            idx = np.arange(n) * 2 + 7
            Xa, ya = pd.DataFrame(X, index=idx), pd.Series(y, index=idx)
        elif data == "misaligned":
            Xa, ya = pd.DataFrame(X), pd.Series(y, index=np.arange(n) + 1)
            problem = "different indexes"
        elif data == "nan-y":
            ya = y.copy()
            ya[0] = np.nan
            problem = "`y` contains NaN"
        elif data == "text-y":
            ya = y.astype(object)
            ya[0] = "n/a"
            problem = "`y` must be numeric"
        elif data == "short-y":
            ya = y[:-1]
            problem = f"{n} rows but `y` has {n - 1}"
        elif data == "bad-sigma":
            sigma = float(rng.choice([0.0, -1.0, np.nan]))
            problem = "`sigma` must be a positive number"
    blr = check(
        "BayesianLinearRegression",
        lambda: BayesianLinearRegression(Xa, ya, Sigma_p=S, sigma=sigma, method=method, **kwargs),
        problem,
    )
    if problem is not None:
        return
    Sp = np.diag(np.broadcast_to(S, (D,))) if np.ndim(S) < 2 else S
    C = X @ Sp @ X.T + sigma**2 * np.eye(n)  # seed 004 eq. (8)
    Ci = np.linalg.solve(C, np.c_[y, X @ Sp])
    mean_w = Sp @ X.T @ Ci[:, 0]  # seed 004 eq. (6)
    cov_w = Sp - Sp @ X.T @ Ci[:, 1:]  # seed 004 eq. (7)
    post = blr.posterior()
    rtol = rtol_for(C)
    scale = max(1.0, np.max(np.abs(mean_w)))
    np.testing.assert_allclose(post.mean, mean_w, rtol=rtol, atol=rtol * scale)
    np.testing.assert_allclose(post.cov, cov_w, rtol=rtol, atol=rtol * np.max(np.abs(Sp)))
    Xn = rng.normal(size=(3, D))
    pred = blr.predict(Xn)
    np.testing.assert_allclose(pred.mean, Xn @ mean_w, rtol=rtol, atol=rtol * scale)
    var = np.einsum("ij,jk,ik->i", Xn, cov_w, Xn)
    np.testing.assert_allclose(
        pred.var, np.maximum(var, 0), rtol=rtol, atol=rtol * np.max(np.abs(Sp))
    )
    lml = multivariate_normal(np.zeros(n), C, allow_singular=False).logpdf(y)
    np.testing.assert_allclose(blr.log_marginal_likelihood(), lml, rtol=rtol, atol=rtol)


@fuzz(60)
@given(
    n=st.integers(1, 9),
    D=st.integers(1, 3),
    seed=st.integers(0, 2**16),
    u_ls=st.floats(-3, 3),
    u_lam=st.floats(-6, 3),
    lam_case=st.integers(0, 9),  # 7, 8, 9: invalid
    duplicate=st.booleans(),
    t_case=st.integers(0, 8),  # 6, 7, 8: invalid targets
)
def test_kernel_ridge_fuzz(n, D, seed, u_ls, u_lam, lam_case, duplicate, t_case):
    bad_t = [None] * 6 + ["nan", "2d", "short"]
    bad_t = bad_t[t_case]
    lam = 10.0**u_lam if lam_case < 7 else [0.0, -1.0, np.nan][lam_case - 7]
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, D))
    if duplicate and n > 1:
        X[-1] = X[0]
    t = rng.normal(size=n)
    kern = K.ExpQuad(D, ls=10.0**u_ls)
    if not (np.isfinite(lam) and lam > 0):
        check("KernelRidge", lambda: KernelRidge(kern, lam=lam), "`lam` must be a positive")
        return
    problem = None
    if bad_t == "nan":
        t[0] = np.nan
        problem = "`t` contains NaN"
    elif bad_t == "2d":
        t = np.c_[t, t]
        problem = "`t` must be 1-D"
    elif bad_t == "short":
        t = t[:-1]
        problem = f"{n} rows but `t` has {n - 1}"
    kr = KernelRidge(kern, lam=lam)
    check("KernelRidge.fit", lambda: kr.fit(X, t), problem)
    if problem is not None:
        return
    Xn = rng.uniform(-2, 2, (4, D))
    Kx = kr.gram(X)
    Ks = kr.gram(Xn, X)
    ref = SkKernelRidge(alpha=lam, kernel="precomputed").fit(Kx, t).predict(Ks)
    rtol = rtol_for(Kx + lam * np.eye(n))
    np.testing.assert_allclose(
        kr.predict(Xn), ref, rtol=rtol, atol=rtol * max(1.0, np.abs(t).max())
    )
