"""The native softmax Laplace solver (:mod:`bayes_gp.classification.native`) against the NumPy
one (:func:`~bayes_gp.classification.multiclass.softmax_laplace`), and the
``SoftmaxLaplaceLogp`` Op on it: the same log evidence, gradient and iteration count, the same
infeasible points, no GIL held, parallel nutpie chains."""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from bayes_gp.classification import native
from bayes_gp.classification.multiclass import (
    SoftmaxLaplaceLogp,
    one_hot,
    softmax_laplace,
    softmax_laplace_native,
)
from bayes_gp.linalg import EAGER_MODE

N = 24
_rng = np.random.default_rng(11)
X = _rng.normal(size=(N, 2))
T3 = (X[:, 0] > 0.3).astype(int) + (X[:, 1] > 0.0).astype(int)  # 3 classes, overlapping
T4 = _rng.integers(0, 4, N)  # 4 classes, no structure: a flat posterior


def _se(ls: float, eta: float) -> np.ndarray:
    d = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    return eta**2 * np.exp(-0.5 * d / ls**2) + 1e-8 * np.eye(N)


#: (labels, per-class (ls, eta)): shared covariances (the first iteration reuses one
#: factorisation), per-class ones, a near-separable large amplitude, a short length-scale
CASES = [
    (T3, [(1.0, 2.0)] * 3),
    (T3, [(1.0, 2.0), (0.6, 1.2), (1.8, 3.0)]),
    (T3, [(2.0, 12.0)] * 3),
    (T4, [(0.3, 1.5)] * 4),
]


def _check_equal(K, Y, **kw):
    ref = softmax_laplace(K, Y, gradient=True, **kw)
    r = native.solve_arrays(K, Y, **kw)
    assert r.status == native.OK and ref.feasible
    assert (r.n_iter, r.converged) == (ref.n_iter, ref.converged)
    assert r.log_q == pytest.approx(ref.log_evidence, rel=1e-11, abs=0.0)
    assert np.max(np.abs(r.grad_K - ref.grad_K)) <= 1e-10 * np.max(np.abs(ref.grad_K))
    np.testing.assert_array_equal(r.grad_K, np.swapaxes(r.grad_K, 1, 2))
    # the mode's state, as SoftmaxLaplace holds it (softmax_laplace_native's fields)
    scale = np.max(np.abs(ref.a))
    np.testing.assert_allclose(r.a, ref.a, rtol=0, atol=1e-9 * scale)
    np.testing.assert_allclose(r.E, ref.E, rtol=0, atol=1e-10 * np.max(np.abs(ref.E)))
    np.testing.assert_allclose(r.M, ref.M, rtol=0, atol=1e-10 * np.max(np.abs(ref.M)))
    fast = softmax_laplace_native(K, Y, **kw)
    assert fast.log_evidence == r.log_q and fast.grad_K is None
    np.testing.assert_allclose(fast.f, ref.f, rtol=0, atol=1e-9 * np.max(np.abs(ref.f)))
    np.testing.assert_allclose(fast.pi, ref.pi, rtol=0, atol=1e-10)


@pytest.mark.parametrize("case", range(len(CASES)))
def test_log_evidence_and_gradient_equal_the_numpy_solver(case):
    """log q to 1e-11 relative and dlogq/dK to 1e-10, the same Newton iterations, from the
    NumPy solver started as the native one is (a = 0). Measured: 1e-15 and 1e-14, except with
    the large amplitude (K's condition number about 1e10), 1.6e-12 and 9e-12, where the NumPy
    solver itself moves by 2e-13 and 3e-12 when K is scaled by 1 + 1e-15."""
    t, hyper = CASES[case]
    C = len(hyper)
    K = np.stack([_se(ls, eta) for ls, eta in hyper])
    _check_equal(K, one_hot(t, C))


def test_not_converged_is_still_evaluated_as_in_numpy():
    """Too few Newton steps: the NumPy solver reports ``converged`` False and still gives the
    evidence and gradient at the last iterate; so does the native one."""
    K = np.stack([_se(1.0, 2.0)] * 3)
    _check_equal(K, one_hot(T3, 3), max_iter=2)
    assert not softmax_laplace(K, one_hot(T3, 3), max_iter=2).converged


def test_infeasible_points_are_infeasible_in_both():
    """NaN in K, one class's K not positive definite: -inf from both solvers, the native status
    saying which; mismatched shapes a ValueError."""
    Y = one_hot(T3, 3)
    K = np.stack([_se(1.0, 2.0)] * 3)
    nan = K.copy()
    nan[1, 3, 3] = np.nan
    not_pd = K.copy()
    not_pd[2] -= 0.5 * np.eye(N)
    for K_, expected in ((nan, native.K_NOT_FINITE), (not_pd, native.K_NOT_PD)):
        ref = softmax_laplace(K_, Y, gradient=True)
        r = native.solve_arrays(K_, Y)
        assert (r.status, r.log_q, r.grad_K) == (expected, -np.inf, None)
        assert not ref.feasible and ref.log_evidence == -np.inf
        fast = softmax_laplace_native(K_, Y)
        assert not fast.feasible and fast.reason == native.REASONS[expected]
    with pytest.raises(ValueError, match="K must be"):
        native.solve_arrays(K[:, :-1, :-1], Y)


def test_only_native_ops_release_the_gil():
    Y = one_hot(T3, 3)
    assert not SoftmaxLaplaceLogp(Y).holds_gil and SoftmaxLaplaceLogp(Y).uses_native
    assert SoftmaxLaplaceLogp(Y, native=False).holds_gil


def test_cache_key_holds_the_solver_source_and_the_labels(monkeypatch):
    """The PyTensor cache key: the solver's key and a hash of the labels (equal labels share a
    compiled function, others do not); none with ``BAYES_GP_NUMBA_CACHE=0``."""
    Y = one_hot(T3, 3)
    _, key = native.numba_function(SoftmaxLaplaceLogp(Y))
    _, same = native.numba_function(SoftmaxLaplaceLogp(Y.copy()))
    _, other = native.numba_function(SoftmaxLaplaceLogp(one_hot(np.roll(T3, 1), 3)))
    assert key.startswith(native.SOLVER_KEY) and key == same != other
    monkeypatch.setenv("BAYES_GP_NUMBA_CACHE", "0")
    fn, key = native.numba_function(SoftmaxLaplaceLogp(Y))
    assert key is None and fn is not None


def test_op_in_numba_equals_the_op_in_python():
    """The compiled log evidence (numba: the native solver) and its gradient with respect to
    the length-scale and amplitude (PyTensor's chain rule around the Op) equal the Python
    backend's (the NumPy solver, cold-started) to 1e-10 relative; a covariance that is not
    positive definite gives -inf in both, and a K of the wrong size a ValueError."""
    Y = one_hot(T3, 3)
    theta = pt.dvector("theta")  # (lengthscale, amplitude, diagonal shift)
    d = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    Kt = theta[1] ** 2 * pt.exp(-0.5 * d / theta[0] ** 2) + theta[2] * pt.eye(N)
    op = SoftmaxLaplaceLogp(Y)
    logq = op(pt.stack([Kt] * 3))[0]
    outs = [logq, pytensor.grad(logq, theta)]
    fast = pytensor.function([theta], outs, mode="NUMBA")
    slow = pytensor.function([theta], outs, mode=EAGER_MODE)
    for point in ([1.0, 2.0, 1e-8], [0.4, 3.0, 1e-6], [2.5, 0.8, 1e-4]):
        a, ga = fast(np.array(point))
        assert op.last_a is None  # (numba: the native solver, which keeps no mode)
        b, gb = slow(np.array(point))
        assert op.last_a is not None  # (Python: the NumPy solver, warm-started from here)
        op.last_a = None
        assert float(a) == pytest.approx(float(b), rel=1e-10)
        np.testing.assert_allclose(ga, gb, rtol=1e-10, atol=1e-10 * np.max(np.abs(gb)))
    bad = np.array([1.0, 1.0, -0.5])
    assert float(fast(bad)[0]) == float(slow(bad)[0]) == -np.inf
    Kv = pt.dtensor3("K")
    wrong = pytensor.function([Kv], op(Kv)[0], mode="NUMBA")
    with pytest.raises(ValueError, match="K must be"):
        wrong(np.stack([np.eye(N + 1)] * 3))


_NUTPIE_PARALLEL = """
import numpy as np
from bayes_gp import MulticlassGPClassifier

rng = np.random.default_rng(3)
X = rng.normal(size=(24, 1))
y = (X[:, 0] > -0.4).astype(int) + (X[:, 0] > 0.5).astype(int)
m = MulticlassGPClassifier(X, y)
assert not m._op.holds_gil
idata = m.sample(method="nuts", sampler="nutpie", draws=40, tune=40, chains=2, random_seed=4,
                 progressbar=False)
post = idata["posterior"]
print("cores", post.attrs["bayes_gp_cores"])
print("finite", bool(np.isfinite(np.asarray(post["f_mode"])).all()))
print("draws", post.sizes["chain"] * post.sizes["draw"])
"""


def test_nutpie_runs_parallel_chains_on_the_native_solver():
    """``sample(method="nuts")`` with nutpie: ``run_nuts`` runs the two chains in parallel
    threads (no Op holds the GIL; it says so in ``bayes_gp_cores``), and the run ends normally
    (a subprocess, so that a crash fails the test) with a finite mode at every draw."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", _NUTPIE_PARALLEL],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, f"exit status {proc.returncode}\n{proc.stderr[-3000:]}"
    lines = {ln.split(" ", 1)[0]: ln.split(" ", 1)[1] for ln in proc.stdout.splitlines()}
    assert lines["cores"].startswith("chains in parallel: SoftmaxLaplaceLogp runs nopython")
    assert lines["finite"] == "True" and int(lines["draws"]) == 80
