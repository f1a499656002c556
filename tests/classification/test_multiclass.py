"""The softmax Laplace numerics (bayes_gp.classification.multiclass) against dense and generic
references: the mode against L-BFGS on the same objective, the evidence against a dense
evaluation of R&W eq. 3.32, its gradient against finite differences, the predictive moments
against the dense Gaussian conditional, and the Op's pullback through a kernel graph."""

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from scipy.optimize import minimize
from scipy.special import logsumexp, softmax

from bayes_gp.classification.multiclass import (
    SoftmaxLaplaceLogp,
    la_loo,
    latent_predictive,
    one_hot,
    softmax_average,
    softmax_laplace,
    softmax_objective,
)
from bayes_gp.linalg import EAGER_MODE

N, C = 30, 3
JITTER = 1e-8


def _se(X, Z, ls, eta):
    d = ((X[:, None, :] - Z[None, :, :]) ** 2).sum(-1)
    return eta**2 * np.exp(-0.5 * d / ls**2)


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, 2))
    t = rng.integers(0, C, N)
    hyper = [(1.0, 2.0), (0.7, 1.5), (1.5, 3.0)]
    K = np.stack([_se(X, X, ls, eta) + JITTER * np.eye(N) for ls, eta in hyper])
    return X, t, one_hot(t, C), K, hyper


def _dense(K):
    Kf = np.zeros((C * N, C * N))
    for c in range(C):
        Kf[c * N:(c + 1) * N, c * N:(c + 1) * N] = K[c]
    return Kf


def _W(f):
    pi = softmax(f, axis=0)
    Pi = np.vstack([np.diag(pi[c]) for c in range(C)])
    return np.diag(pi.ravel()) - Pi @ Pi.T  # R&W eq. 3.38


def test_mode_matches_generic_optimiser(problem):
    _, _, Y, K, _ = problem
    res = softmax_laplace(K, Y)
    assert res.converged and res.feasible
    Ls = [np.linalg.cholesky(k) for k in K]

    def neg(v):  # -Psi in whitened coordinates f_c = L_c v_c
        v = v.reshape(C, N)
        f = np.stack([Ls[c] @ v[c] for c in range(C)])
        val = -0.5 * np.sum(v * v) + np.sum(Y * f) - np.sum(logsumexp(f, axis=0))
        g = Y - softmax(f, axis=0)
        gv = np.stack([Ls[c].T @ g[c] for c in range(C)]) - v
        return -val, -gv.ravel()

    opt = minimize(neg, np.zeros(C * N), jac=True, method="L-BFGS-B",
                   options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 10000})  # fmt: skip
    f_opt = np.stack([Ls[c] @ opt.x.reshape(C, N)[c] for c in range(C)])
    assert np.max(np.abs(f_opt - res.f)) < 1e-6  # measured 4.6e-8 (L-BFGS's own precision)
    # the Newton mode is at least as good as L-BFGS's, and a is y - pi there (stationarity)
    assert softmax_objective(res.f, K, Y) >= softmax_objective(f_opt, K, Y) - 1e-12
    np.testing.assert_allclose(res.a, Y - res.pi, atol=1e-9)


def test_mode_is_independent_of_the_start(problem):
    _, _, Y, K, _ = problem
    cold = softmax_laplace(K, Y)
    warm = softmax_laplace(K, Y, a0=np.random.default_rng(1).normal(size=(C, N)))
    np.testing.assert_allclose(warm.f, cold.f, atol=1e-8)
    assert warm.log_evidence == pytest.approx(cold.log_evidence, abs=1e-10)


def test_evidence_matches_dense_eq_3_32(problem):
    _, _, Y, K, _ = problem
    res = softmax_laplace(K, Y)
    f = res.f.ravel()
    Kf = _dense(K)
    W = _W(res.f)
    dense = (-0.5 * f @ np.linalg.solve(Kf, f) + np.sum(Y * res.f)
             - np.sum(logsumexp(res.f, axis=0))
             - 0.5 * np.linalg.slogdet(np.eye(C * N) + Kf @ W)[1])  # fmt: skip
    assert res.log_evidence == pytest.approx(dense, abs=1e-9)
    # R&W Algorithm 3.3's last line (without log|M|) is the evidence with W replaced by D: a
    # different number, which this implementation does not return
    D = np.diag(softmax(res.f, axis=0).ravel())
    with_D = dense + 0.5 * np.linalg.slogdet(np.eye(C * N) + Kf @ W)[1] \
        - 0.5 * np.linalg.slogdet(np.eye(C * N) + Kf @ D)[1]
    assert abs(with_D - res.log_evidence) > 1e-3


def test_posterior_covariance_matches_dense(problem):
    _, _, Y, K, _ = problem
    res = softmax_laplace(K, Y)
    dense = np.linalg.inv(np.linalg.inv(_dense(K)) + _W(res.f))
    np.testing.assert_allclose(res.covariance(K), dense, atol=1e-6, rtol=1e-6)
    blocks = res.latent_blocks(K)
    for i in (0, 7, N - 1):
        idx = [c * N + i for c in range(C)]
        np.testing.assert_allclose(blocks[i], dense[np.ix_(idx, idx)], atol=1e-6)


@pytest.mark.parametrize("cls", [0, 1, 2])
def test_gradient_matches_finite_differences(problem, cls):
    """d log q / d K_c along the kernel's own derivatives (length-scale and amplitude of class
    ``cls``): the analytic gradient against central differences."""
    X, _, Y, K, hyper = problem
    res = softmax_laplace(K, Y, gradient=True)
    ls, eta = hyper[cls]

    def log_q(ls_, eta_):
        KK = K.copy()
        KK[cls] = _se(X, X, ls_, eta_) + JITTER * np.eye(N)
        return softmax_laplace(KK, Y, tol=1e-14).log_evidence

    base = _se(X, X, ls, eta)
    d = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    dK_deta = 2.0 * base / eta
    dK_dls = base * d / ls**3
    h = 1e-5
    fd_eta = (log_q(ls, eta + h) - log_q(ls, eta - h)) / (2 * h)
    fd_ls = (log_q(ls + h, eta) - log_q(ls - h, eta)) / (2 * h)
    assert np.sum(res.grad_K[cls] * dK_deta) == pytest.approx(fd_eta, rel=1e-6, abs=1e-8)
    assert np.sum(res.grad_K[cls] * dK_dls) == pytest.approx(fd_ls, rel=1e-6, abs=1e-8)
    np.testing.assert_allclose(res.grad_K[cls], res.grad_K[cls].T, atol=1e-12)


def test_op_pullback_through_a_kernel_graph(problem):
    """The Op's gradient chained by PyTensor through a shared SE kernel, against finite
    differences of the compiled value."""
    X, _, Y, _, _ = problem
    ls, eta = pt.dscalar("ls"), pt.dscalar("eta")
    d = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    Kc = eta**2 * pt.exp(-0.5 * d / ls**2) + JITTER * pt.eye(N)
    lq = SoftmaxLaplaceLogp(Y, tol=1e-14)(pt.stack([Kc] * C))[0]
    fn = pytensor.function([ls, eta], [lq, *pytensor.grad(lq, [ls, eta])], mode=EAGER_MODE)
    value, g_ls, g_eta = fn(0.9, 1.7)
    h = 1e-5
    fd_ls = (fn(0.9 + h, 1.7)[0] - fn(0.9 - h, 1.7)[0]) / (2 * h)
    fd_eta = (fn(0.9, 1.7 + h)[0] - fn(0.9, 1.7 - h)[0]) / (2 * h)
    K3 = np.stack([_se(X, X, 0.9, 1.7) + JITTER * np.eye(N)] * C)
    assert value == pytest.approx(softmax_laplace(K3, Y).log_evidence, abs=1e-9)
    assert g_ls == pytest.approx(fd_ls, rel=1e-6)
    assert g_eta == pytest.approx(fd_eta, rel=1e-6)


def test_predictive_moments_match_dense_conditional(problem):
    """R&W Algorithm 3.4's mean and covariance equal the Gaussian conditional of f_* given
    f ~ N(f_hat, Sigma): mean Q*^T K^-1 f_hat, cov kss - Q*^T K^-1 Q* + Q*^T K^-1 Sigma K^-1 Q*."""
    X, _, Y, K, hyper = problem
    res = softmax_laplace(K, Y)
    Xs = np.random.default_rng(2).normal(size=(5, 2))
    Ks = np.stack([_se(X, Xs, ls, eta) for ls, eta in hyper])
    kss = np.stack([np.full(5, eta**2) for _, eta in hyper])
    mean, cov = latent_predictive(res, Ks, kss, Y)
    Kf = _dense(K)
    Sigma = np.linalg.inv(np.linalg.inv(Kf) + _W(res.f))
    for j in range(5):
        Q = np.zeros((C * N, C))
        for c in range(C):
            Q[c * N:(c + 1) * N, c] = Ks[c][:, j]
        A = np.linalg.solve(Kf, Q)
        np.testing.assert_allclose(mean[j], A.T @ res.f.ravel(), atol=1e-7)
        dense = np.diag(kss[:, j]) - Q.T @ A + A.T @ Sigma @ A
        np.testing.assert_allclose(cov[j], dense, atol=1e-6)


def test_softmax_average():
    mean = np.array([[0.0, 1.0, -1.0], [2.0, 0.0, 0.0]])
    # no uncertainty: the softmax of the mean exactly
    np.testing.assert_allclose(softmax_average(mean, np.zeros((2, 3, 3))),
                               softmax(mean, axis=1), atol=1e-15)  # fmt: skip
    cov = np.stack([np.eye(3) * 4.0, np.eye(3)])
    p = softmax_average(mean, cov, 20000, random_seed=3)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    # uncertainty pulls the probabilities towards uniform (and the same seed repeats exactly)
    assert p[0, 1] < softmax(mean[0])[1]
    np.testing.assert_array_equal(p, softmax_average(mean, cov, 20000, random_seed=3))
    # against a brute-force Monte Carlo with another generator: within 4 standard errors
    rng = np.random.default_rng(99)
    fs = mean[0] + 2.0 * rng.standard_normal((400000, 3))
    ref = softmax(fs, axis=1).mean(axis=0)
    np.testing.assert_allclose(p[0], ref, atol=4 * 0.5 / np.sqrt(20000))


def test_la_loo_close_to_refitted_loo(problem):
    """LA-LOO against the Laplace approximation refitted without each point (5 points)."""
    _, t, Y, K, _ = problem
    res = softmax_laplace(K, Y)
    loo = la_loo(res, K, t, n_samples=20000)
    for i in (0, 5, 11, 17, 23):
        keep = np.arange(N) != i
        r = softmax_laplace(K[:, keep][:, :, keep], Y[:, keep])
        Ks = K[:, keep, i][:, :, None]
        kss = K[:, i, i][:, None]
        mean, cov = latent_predictive(r, Ks, kss, Y[:, keep])
        p = softmax_average(mean, cov, 20000)[0, t[i]]
        assert loo[i] == pytest.approx(np.log(p), abs=0.05)


def test_infeasible_and_bad_shapes(problem):
    _, _, Y, K, _ = problem
    bad = K.copy()
    bad[1] = -np.eye(N)
    res = softmax_laplace(bad, Y)
    assert not res.feasible and res.log_evidence == -np.inf and "Cholesky" in res.reason
    with pytest.raises(ValueError, match=r"`Y` must have shape"):
        softmax_laplace(K, Y[:, :-1])
    with pytest.raises(ValueError, match=r"`K` must have shape"):
        softmax_laplace(K[0], Y)


def test_numba_callback_exception_is_kept_and_raised_in_nopython_code(problem):
    """An exception in the numba backend's object-mode callback stays there (numba's
    try/except cannot catch one that leaves it, and nutpie's entry point then read a null
    pointer: ``bayes_gp.latent.op``): kept as ``last_error``, its message in ``last_reason``,
    a ``RuntimeError`` from the nopython code; the next evaluation works again. (The NumPy
    solver in object mode: ``native=False``.)"""
    _, _, Y, K, _ = problem
    Kv = pt.dtensor3("K")
    op = SoftmaxLaplaceLogp(Y, native=False)
    fn = pytensor.function([Kv], op(Kv)[0], mode="NUMBA")
    compute = op.compute

    def failing(K):
        raise ValueError("a numerical failure inside the Laplace step")

    op.compute = failing
    with pytest.raises(RuntimeError, match=r"object-mode callback.*last_error"):
        fn(K)
    assert isinstance(op.last_error, ValueError)
    assert op.last_reason == "ValueError: a numerical failure inside the Laplace step"
    op.compute = compute
    assert float(fn(K)) == pytest.approx(softmax_laplace(K, Y).log_evidence, abs=1e-9)
