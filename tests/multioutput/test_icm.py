"""The intrinsic coregionalisation model against NumPy references on the stacked outputs.

References transcribed from the module docstrings: :math:`C = B \\otimes K +
\\operatorname{diag}(\\sigma^2) \\otimes I_n` (output-major), the normal log density (R&W eq.
2.30) by a NumPy Cholesky, predictions by R&W eqs. 2.25–2.26 on the stacked system.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

from bayes_gp.inference.jitter import DEFAULT_JITTER
from bayes_gp.kernels import Matern52
from bayes_gp.linalg import EAGER_MODE
from bayes_gp.multioutput import icm_data, icm_logp, icm_marginal, icm_predict

LOG_2PI = np.log(2.0 * np.pi)


# ------------------------------------------------------------------ NumPy references
def gram(X, ls, Xs=None):
    """Matérn-5/2 with unit amplitude (R&W eq. 4.17b), transcribed."""
    Xs = X if Xs is None else Xs
    r = np.abs(X[:, None, 0] - Xs[None, :, 0]) / ls
    return (1.0 + np.sqrt(5.0) * r + 5.0 / 3.0 * r**2) * np.exp(-np.sqrt(5.0) * r)


def mvn_logp(y, C):
    L = np.linalg.cholesky(C)
    a = np.linalg.solve(L, y)
    return -0.5 * a @ a - np.sum(np.log(np.diag(L))) - 0.5 * y.size * LOG_2PI


def stacked(B, K, sigma):
    n = K.shape[0]
    return np.kron(B, K) + np.kron(np.diag(sigma**2), np.eye(n))


def evaluate(graph):
    return float(pytensor.function([], graph, mode=EAGER_MODE)())


def data(rng, n=14, P=3):
    X = np.sort(rng.uniform(0.0, 6.0, n))[:, None]
    Y = rng.normal(size=(n, P))
    return X, Y


# parameter sets: rank 1, rank 2, and equal loadings/noise (B~ with a repeated eigenvalue)
CASES = {
    "rank1": dict(W=[[1.0], [0.6], [-0.4]], kappa=[0.2, 0.5, 0.1], sigma=[0.3, 0.2, 0.4]),
    "rank2": dict(
        W=[[1.0, 0.3], [0.6, -0.8], [-0.4, 0.5]], kappa=[0.05, 0.3, 0.1], sigma=[0.25, 0.3, 0.2]
    ),
    "repeated": dict(W=[[0.7], [0.7], [0.7 + 1e-9]], kappa=[0.3, 0.3, 0.3], sigma=[0.2, 0.2, 0.2]),
}


def params(case):
    return {k: np.asarray(v, dtype=float) for k, v in CASES[case].items()}


# ------------------------------------------------------------------ likelihood
def test_diagonal_B_is_independent_gps(rng):
    """W = 0, kappa = eta^2: P independent exact GPs, each N(m_p, eta_p^2 K + sigma_p^2 I)."""
    X, Y = data(rng)
    eta, sigma, mean, ls = np.array([0.8, 1.5, 0.4]), np.array([0.2, 0.5, 0.1]), [0.3, -1, 2], 1.1
    lp = icm_logp(X, Y, Matern52(1, ls=ls), np.zeros((3, 1)), eta**2, sigma, mean, jitter=0.0)
    K = gram(X, ls)
    ref = sum(
        mvn_logp(Y[:, p] - mean[p], eta[p] ** 2 * K + sigma[p] ** 2 * np.eye(len(X)))
        for p in range(3)
    )
    assert abs(evaluate(lp) - ref) < 1e-10


@pytest.mark.parametrize("case", list(CASES))
def test_kronecker_equals_dense_stacked_mvn(rng, case):
    X, Y = data(rng)
    p, ls, mean = params(case), 0.9, np.array([0.5, -0.2, 0.0])
    lp = icm_logp(X, Y, Matern52(1, ls=ls), p["W"], p["kappa"], p["sigma"], mean, jitter=0.0)
    assert icm_data(X, Y).complete
    B = p["W"] @ p["W"].T + np.diag(p["kappa"])
    ref = mvn_logp((Y - mean).T.ravel(), stacked(B, gram(X, ls), p["sigma"]))
    assert abs(evaluate(lp) - ref) < 1e-10


def test_kronecker_gradient_matches_finite_differences(rng):
    """Closed-form gradient (W, kappa, sigma, ls) vs central differences, incl. a repeated
    eigenvalue of B~ and a regular input grid (near-repeated eigenvalues of K)."""
    X = np.linspace(0.0, 5.0, 12)[:, None]
    Y = rng.normal(size=(12, 3))
    W, kappa, sigma, ls = pt.dmatrix("W"), pt.dvector("kappa"), pt.dvector("sigma"), pt.dscalar()
    lp = icm_logp(X, Y, Matern52(1, ls=ls), W, kappa, sigma, jitter=1e-8)
    f = pytensor.function(
        [W, kappa, sigma, ls], [lp, *pt.grad(lp, [W, kappa, sigma, ls])], mode=EAGER_MODE
    )
    h = 1e-6
    for case in CASES:
        x0 = [*params(case).values(), np.array(1.3)]
        _, *grads = f(*x0)
        for i, g in enumerate(grads):
            fd = np.zeros_like(g)
            for idx in np.ndindex(g.shape):
                up = [v.copy() for v in x0]
                dn = [v.copy() for v in x0]
                up[i][idx] += h
                dn[i][idx] -= h
                fd[idx] = (f(*up)[0] - f(*dn)[0]) / (2 * h)
            np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6 * np.max(np.abs(g)))


def test_heterotopic_dense_path_equals_restricted_mvn(rng):
    X, Y = data(rng, n=16)
    Y[2:7, 0] = np.nan  # a stretch of output 0 missing
    Y[[1, 9, 12], 2] = np.nan
    p, ls, mean = params("rank2"), 0.7, np.array([0.1, 0.2, -0.3])
    d = icm_data(X, Y)
    assert not d.complete and d.y_obs.size == 16 * 3 - 8
    lp = icm_logp(X, Y, Matern52(1, ls=ls), p["W"], p["kappa"], p["sigma"], mean, jitter=0.0)
    B = p["W"] @ p["W"].T + np.diag(p["kappa"])
    keep = ~np.isnan(Y.T.ravel())
    C = stacked(B, gram(X, ls), p["sigma"])[np.ix_(keep, keep)]
    ref = mvn_logp((Y - mean).T.ravel()[keep], C)
    assert abs(evaluate(lp) - ref) < 1e-10


@pytest.mark.parametrize("missing", [False, True])
def test_pymc_model_logp_equals_reference(rng, missing):
    """icm_marginal with PyMC random variables: the model's log-likelihood term is the reference
    density at the point (PyTensor's default backend, numba)."""
    X, Y = data(rng, n=10)
    if missing:
        Y[3:6, 1] = np.nan
    with pm.Model() as model:
        W = pm.Normal("W", 0.0, 1.0, shape=(3, 2))
        kappa = pm.HalfNormal("kappa", 1.0, shape=3)
        sigma = pm.HalfNormal("sigma", 1.0, shape=3)
        ls = pm.Gamma("ls", 4.0, 4.0)
        icm_marginal("y", X, Y, Matern52(1, ls=ls), W, kappa, sigma, jitter=0.0)
    point = model.initial_point()
    point["W"] = params("rank2")["W"]
    logp = model.compile_logp(vars=model.observed_RVs, mode="FAST_RUN")(point)
    Wv, kap = point["W"], np.exp(point["kappa_log__"])
    sig, lsv = np.exp(point["sigma_log__"]), np.exp(point["ls_log__"])
    keep = ~np.isnan(Y.T.ravel())
    C = stacked(Wv @ Wv.T + np.diag(kap), gram(X, lsv), sig)[np.ix_(keep, keep)]
    assert abs(logp - mvn_logp(Y.T.ravel()[keep], C)) < 1e-10


def test_numba_backend_and_prior_draws(rng):
    """The Op's numba registration gives the values and gradients of its ``perform`` (the
    Python linker; the reference was ``FAST_RUN``, which is numba itself in PyTensor 3); the
    Kronecker observed variable draws from its prior (stacked vec(Y), output-major)."""
    X, Y = data(rng, n=9, P=2)
    W, kappa, sigma = pt.dmatrix("W"), pt.dvector("kappa"), pt.dvector("sigma")
    lp = icm_logp(X, Y, Matern52(1, ls=0.8), W, kappa, sigma)
    outs = [lp, *pt.grad(lp, [W, kappa, sigma])]
    x0 = (np.array([[1.0], [0.5]]), np.array([0.2, 0.1]), np.array([0.3, 0.4]))
    a = pytensor.function([W, kappa, sigma], outs, mode="NUMBA")(*x0)
    b = pytensor.function([W, kappa, sigma], outs, mode=EAGER_MODE)(*x0)
    for u, v in zip(a, b, strict=True):
        np.testing.assert_allclose(u, v, rtol=1e-12, atol=1e-12)
    with pm.Model() as model:
        icm_marginal("y", X, Y, Matern52(1, ls=0.8), *x0)
    draws = pm.draw(model["y"], draws=4000, random_seed=3)
    assert draws.shape == (4000, 18)
    # output 0 and output 1 at the same input: covariance B_01 k(x, x) = 0.5
    assert abs(np.cov(draws[:, 2], draws[:, 9 + 2])[0, 1] - 0.5) < 0.1


# ------------------------------------------------------------------ predictions
@pytest.mark.parametrize("missing", [False, True])
def test_predictions_equal_stacked_closed_form(rng, missing):
    X, Y = data(rng, n=13)
    if missing:
        Y[4:8, 2] = np.nan
        Y[0, 0] = np.nan
    Xn = np.array([[-0.5], [1.7], [3.3], [7.0]])
    p, ls, mean = params("rank2"), 1.2, np.array([0.5, -0.5, 1.0])
    pred = icm_predict(X, Y, Xn, Matern52(1, ls=ls), p["W"], p["kappa"], p["sigma"], mean)
    B = p["W"] @ p["W"].T + np.diag(p["kappa"])
    keep = ~np.isnan(Y.T.ravel())
    # the default jitter (1e-10) is relative to each output's variance (observed entries)
    var = np.array([np.nanvar(Y[:, q]) for q in range(Y.shape[1])])
    C = stacked(B, gram(X, ls), np.sqrt(p["sigma"] ** 2 + DEFAULT_JITTER * var))
    C = C[np.ix_(keep, keep)]
    Ks = np.kron(B, gram(X, ls, Xn))[keep]  # (N_obs, P m), output-major columns
    r = (Y - mean).T.ravel()[keep]
    mean_ref = (np.repeat(mean, len(Xn)) + Ks.T @ np.linalg.solve(C, r)).reshape(3, -1).T
    cov_ref = np.kron(B, gram(Xn, ls)) - Ks.T @ np.linalg.solve(C, Ks)  # R&W eq. 2.26
    m = len(Xn)
    cross = np.stack([cov_ref[j::m, j::m] for j in range(m)])  # (m, P, P)
    np.testing.assert_allclose(pred.mean, mean_ref, rtol=0, atol=1e-9)
    np.testing.assert_allclose(pred.cov, cross, rtol=0, atol=1e-9)
    np.testing.assert_allclose(pred.sd**2, np.einsum("jpp->jp", cross), rtol=0, atol=1e-9)
    noisy = icm_predict(
        X, Y, Xn, Matern52(1, ls=ls), p["W"], p["kappa"], p["sigma"], mean, include_noise=True
    )
    np.testing.assert_allclose(
        noisy.cov - pred.cov, np.broadcast_to(np.diag(p["sigma"] ** 2), (m, 3, 3)), atol=1e-12
    )


def _gp_predict(X, y, Xn, ls, amp2, sigma):
    """A single-output exact GP (R&W Algorithm 2.1), the independent-GP baseline."""
    C = amp2 * gram(X, ls) + sigma**2 * np.eye(len(X))
    Ks = amp2 * gram(X, ls, Xn)
    L = np.linalg.cholesky(C)
    a = np.linalg.solve(L.T, np.linalg.solve(L, y))
    v = np.linalg.solve(L, Ks)
    return Ks.T @ a, amp2 - np.sum(v * v, axis=0)


def test_correlated_output_predicts_held_out_stretch_better():
    """Output 1 hidden on [4, 6]: the ICM borrows it from output 0 (correlation ~0.99); the
    independent GP on output 1 alone can only interpolate. Mean log predictive density of the
    held-out noisy values, fixed true hyperparameters."""
    rng = np.random.default_rng(7)
    n, ls, sigma = 60, 0.8, np.array([0.1, 0.1])
    W, kappa = np.array([[1.0], [0.95]]), np.array([0.01, 0.01])
    X = np.linspace(0.0, 10.0, n)[:, None]
    B = W @ W.T + np.diag(kappa)
    C = stacked(B, gram(X, ls), sigma) + 1e-10 * np.eye(2 * n)
    Y = (np.linalg.cholesky(C) @ rng.standard_normal(2 * n)).reshape(2, n).T
    held = (X[:, 0] > 4.0) & (X[:, 0] < 6.0)
    Ytrain = Y.copy()
    Ytrain[held, 1] = np.nan

    pred = icm_predict(X, Ytrain, X[held], Matern52(1, ls=ls), W, kappa, sigma, include_noise=True)

    def mlpd(mu, var):
        return np.mean(-0.5 * np.log(2 * np.pi * var) - 0.5 * (Y[held, 1] - mu) ** 2 / var)

    icm = mlpd(pred.mean[:, 1], pred.sd[:, 1] ** 2)
    mu, var = _gp_predict(X[~held], Y[~held, 1], X[held], ls, B[1, 1], sigma[1])
    independent = mlpd(mu, var + sigma[1] ** 2)
    assert icm > independent + 0.5, (icm, independent)


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda X, Y: (X, Y[:, 0]), r"`Y` must be 2-D"),
        (lambda X, Y: (X, Y[:-1]), r"`X` has 8 rows but `Y` has 7 rows"),
        (lambda X, Y: (X, np.where(np.arange(3) == 1, np.nan, Y)), r"output\(s\) \[1\].*no obs"),
        (lambda X, Y: (X, np.where(np.arange(8)[:, None] == 4, np.nan, Y)), r"row\(s\) \[4\]"),
        (lambda X, Y: (np.where(np.arange(8)[:, None] == 2, np.inf, X), Y), r"`X` contains NaN"),
        (lambda X, Y: (X, np.where(np.eye(8, 3) > 0, np.inf, Y)), r"`Y` contains infinite"),
    ],
)
def test_bad_data_raise(rng, change, match):
    X, Y = change(*data(rng, n=8))
    with pytest.raises(ValueError, match=match):
        icm_logp(X, Y, Matern52(1, ls=1.0), np.ones((3, 1)), 0.1, 0.2)
    with pytest.raises(ValueError, match=match):
        icm_predict(X, Y, X[:2], Matern52(1, ls=1.0), np.ones((3, 1)), 0.1, 0.2)


def test_bad_parameters_raise(rng):
    X, Y = data(rng, n=8)
    k = Matern52(1, ls=1.0)
    with pytest.raises(ValueError, match=r"`W` must have shape \(3, 'r'\)"):
        icm_logp(X, Y, k, np.ones((2, 1)), 0.1, 0.2)
    with pytest.raises(ValueError, match=r"`sigma` must have shape \(3,\)"):
        icm_logp(X, Y, k, np.ones((3, 1)), 0.1, [0.2, 0.2])
    with pytest.raises(ValueError, match=r"`sigma` must be strictly positive"):
        icm_logp(X, Y, k, np.ones((3, 1)), 0.1, [0.2, -0.2, 0.1])
    with pytest.raises(ValueError, match=r"`kappa` must be non-negative"):
        icm_predict(X, Y, X, k, np.ones((3, 1)), -0.1, 0.2)
    with pytest.raises(ValueError, match=r"`X_new` has 2 column"):
        icm_predict(X, Y, np.ones((2, 2)), k, np.ones((3, 1)), 0.1, 0.2)
    with pytest.raises(ValueError, match=r"`W` must be a number or array for icm_predict"):
        icm_predict(X, Y, X, k, pt.dmatrix("W"), 0.1, 0.2)
