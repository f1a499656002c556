"""The exact GP's log density factorises C in place and turns its factor into C^{-1} in place
(issue 19), where PyTensor allows it, and gives the same values as before to 1e-10; where C or L
is needed elsewhere (a function input or output, a later use), the copying Ops are kept."""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import stats

from bayes_gp import op_backends
from bayes_gp.solvers import likelihood as lk
from bayes_gp.solvers.likelihood import CholeskyInverse, GPLogp, gp_logp

rng = np.random.default_rng(11)
N = 30
X = np.sort(rng.uniform(0, 8, N))
Y = np.sin(X) + 0.3 * rng.normal(size=N)
THETA = (1.2, 0.8, 0.3)  # ls, eta, sigma
MODES = ["FAST_RUN", "CVM", "JAX"]


def _numpy_C(ls, eta, sigma):
    d = X[:, None] - X[None, :]
    return eta**2 * np.exp(-0.5 * d**2 / ls**2) + (sigma**2 + 1e-10) * np.eye(N)


def _reference(ls, eta, sigma, h=1e-6):
    """log N(Y | 0, C) by SciPy and R&W eq. 5.9's gradient, tr((aa^T - C^-1) dC/dtheta) / 2,
    with dC/dtheta in closed form."""
    C = _numpy_C(ls, eta, sigma)
    Ci = np.linalg.inv(C)
    a = Ci @ Y
    W = 0.5 * (np.outer(a, a) - Ci)
    d2 = (X[:, None] - X[None, :]) ** 2
    K = eta**2 * np.exp(-0.5 * d2 / ls**2)
    grads = [np.sum(W * K * d2 / ls**3), np.sum(W * 2 * K / eta), np.sum(np.diag(W)) * 2 * sigma]
    return stats.multivariate_normal(np.zeros(N), C).logpdf(Y), np.array(grads)


def _graph():
    ls, eta, sigma = pt.dscalars("ls", "eta", "sigma")
    d = pt.as_tensor_variable(X[:, None] - X[None, :])
    i = pt.arange(N)
    K = eta**2 * pt.exp(-0.5 * d**2 / ls**2)
    C = pt.inc_subtensor(K[i, i], sigma**2 + 1e-10)  # the exact model's diagonal increment
    return [ls, eta, sigma], C


def _ops(f):
    return [node.op for node in f.maker.fgraph.toposort()]


def _mode(mode):
    if mode == "JAX":
        pytest.importorskip("jax")
        op_backends.ensure("jax")
    return mode


@pytest.mark.parametrize("mode", MODES)
def test_in_place_ops_give_the_closed_forms(mode):
    params, C = _graph()
    lp = gp_logp(C, pt.as_tensor_variable(Y))
    f = pytensor.function(params, [lp, *pt.grad(lp, params)], mode=_mode(mode))
    ops = _ops(f)
    if mode != "JAX":  # JAX arrays are immutable: its implementation ignores destroy_map
        assert GPLogp(inplace=True) in ops and CholeskyInverse(inplace=True) in ops
        assert GPLogp() not in ops and CholeskyInverse() not in ops
    value, grads = _reference(*THETA)
    out = [float(v) for v in f(*THETA)]
    np.testing.assert_allclose(out[0], value, rtol=1e-12)
    np.testing.assert_allclose(out[1:], grads, rtol=1e-9)
    again = [float(v) for v in f(*THETA)]  # the buffers it overwrote are rebuilt each call
    np.testing.assert_allclose(again, out, rtol=0, atol=0)


@pytest.mark.parametrize("mode", MODES)
def test_c_as_output_is_not_overwritten(mode):
    params, C = _graph()
    lp = gp_logp(C, pt.as_tensor_variable(Y))
    f = pytensor.function(params, [lp, pt.grad(lp, params[0]), C], mode=_mode(mode))
    if mode != "JAX":
        assert GPLogp() in _ops(f)  # C is protected: the copying Op is kept
    value, grads = _reference(*THETA)
    lp_v, g_ls, C_v = f(*THETA)
    np.testing.assert_allclose(C_v, _numpy_C(*THETA), rtol=1e-14)
    np.testing.assert_allclose(float(lp_v), value, rtol=1e-12)
    np.testing.assert_allclose(float(g_ls), grads[0], rtol=1e-9)


@pytest.mark.parametrize("mode", ["FAST_RUN", "CVM"])
def test_c_needed_after_the_factorisation_is_copied(mode):
    """``sum(C * logp)`` reads C after GPLogp (it depends on its output): PyTensor must keep
    C, so the factorisation may not overwrite it."""
    params, C = _graph()
    lp = gp_logp(C, pt.as_tensor_variable(Y))
    both = pt.sum(C * lp) + gp_logp(C, pt.as_tensor_variable(-Y))  # C read three times
    f = pytensor.function(params, [both, *pt.grad(both, params)], mode=mode)
    C_np = _numpy_C(*THETA)
    value, grads = _reference(*THETA)
    expected = C_np.sum() * value + value  # log N(-Y | 0, C) = log N(Y | 0, C)
    out = [float(v) for v in f(*THETA)]
    np.testing.assert_allclose(out[0], expected, rtol=1e-12)
    # d/dtheta [lp * sum(C) + lp] = (sum(C) + 1) dlp + lp dsum(C)
    h = 1e-6
    dsum = []
    for k in range(3):
        up, dn = list(THETA), list(THETA)
        up[k] += h
        dn[k] -= h
        dsum.append((_numpy_C(*up).sum() - _numpy_C(*dn).sum()) / (2 * h))
    np.testing.assert_allclose(
        out[1:], (C_np.sum() + 1) * grads + value * np.array(dsum), rtol=1e-6
    )


@pytest.mark.parametrize("mode", ["FAST_RUN", "CVM"])
def test_input_c_and_output_l_are_left_intact(mode):
    Cv, rv = pt.dmatrix("C"), pt.dvector("r")
    lp, _, L = GPLogp()(Cv, rv)
    g = pt.grad(lp, Cv)  # C^{-1} from L, while L is also an output
    f = pytensor.function([Cv, rv], [lp, L, g], mode=mode)
    ops = _ops(f)
    assert GPLogp() in ops and CholeskyInverse() in ops  # neither may destroy its input
    C_np = _numpy_C(*THETA)
    C_in = C_np.copy()
    lp_v, L_v, g_v = f(C_in, Y)
    np.testing.assert_array_equal(C_in, C_np)  # the caller's array is untouched
    np.testing.assert_allclose(L_v, np.linalg.cholesky(C_np), rtol=1e-12, atol=1e-14)
    Ci = np.linalg.inv(C_np)
    a = Ci @ Y
    np.testing.assert_allclose(g_v, 0.5 * (np.outer(a, a) - Ci), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(float(lp_v), stats.multivariate_normal(cov=C_np).logpdf(Y))


def test_numpy_kernels_overwrite_only_when_allowed():
    C = _numpy_C(*THETA)
    work = C.copy()
    logp, alpha, L = lk._logp_numpy(work, Y, overwrite=True)
    assert np.shares_memory(L, work) and L.flags.c_contiguous
    np.testing.assert_allclose(L, np.linalg.cholesky(C), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(alpha, np.linalg.solve(C, Y), rtol=1e-10)
    np.testing.assert_allclose(logp, stats.multivariate_normal(cov=C).logpdf(Y), rtol=1e-12)
    Ci = lk._inverse_numpy(L, overwrite=True)
    assert np.shares_memory(Ci, work)
    np.testing.assert_allclose(Ci, np.linalg.inv(C), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(Ci, Ci.T)
    # without overwrite, or for an F-ordered matrix, the input is copied and left as it was
    for A, overwrite in ((C.copy(), False), (np.asfortranarray(C), True)):
        before = A.copy()
        logp2, _, L2 = lk._logp_numpy(A, Y, overwrite=overwrite)
        assert not np.shares_memory(L2, A)
        np.testing.assert_array_equal(A, before)
        assert logp2 == logp
    # not positive definite: -inf and NaN, in place too
    bad = np.array([[1.0, 2.0], [2.0, 1.0]])
    logp3, alpha3, L3 = lk._logp_numpy(bad, np.ones(2), overwrite=True)
    assert logp3 == -np.inf and np.isnan(alpha3).all() and np.isnan(L3).all()
    nan_C = C.copy()
    nan_C[5, 2] = nan_C[2, 5] = np.nan
    assert lk._logp_numpy(nan_C, Y, overwrite=True)[0] == -np.inf


def test_mirror_lower_in_blocks(monkeypatch):
    monkeypatch.setattr(lk, "_MIRROR_BLOCK", 7)  # 30 = 4 blocks of 7 and one of 2
    A = rng.normal(size=(N, N))
    expected = np.tril(A) + np.tril(A, -1).T
    out = lk._mirror_lower(A)
    assert out is A
    np.testing.assert_array_equal(A, expected)
