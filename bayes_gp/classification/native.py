r"""The softmax Laplace step of :class:`~bayes_gp.classification.multiclass.SoftmaxLaplaceLogp`
in nopython code, off the GIL.

The NumPy solver (:func:`bayes_gp.classification.multiclass.softmax_laplace`) runs in Python; the
numba backend reached it through ``numba.objmode``, which holds the GIL, so nutpie's chains
(threads of one process) waited for each other and :func:`bayes_gp.inference.nuts.run_nuts` ran
them one after another. Here the same Newton iteration (R&W Algorithm 3.3), evidence (R&W eq.
3.44 with the exact determinant)

.. math::
   \log q(y \mid X, \theta) = -\tfrac12 \hat a^T \hat f + y^T \hat f
   - \sum_i \log \sum_c \exp \hat f_i^c
   - \sum_c \sum_i \log (L_c)_{ii} - \sum_i \log M_{ii}

and exact gradient (R&W §5.5.1 / Algorithm 5.1 carried to the softmax, the formulas of
:mod:`bayes_gp.classification.multiclass`'s module docstring)

.. math::
   \frac{\partial \log q}{\partial K_c} = \tfrac12 a_c a_c^T - \tfrac12 R_{cc}
   + \tfrac12 (u_c a_c^T + a_c u_c^T),
   \qquad R_{cc} = E_c - E_c \Big(\textstyle\sum_{c'} E_{c'}\Big)^{-1} E_c,

are written in nopython numba, with LAPACK (``dpotrf``; ``dpotri``'s result by
:func:`bayes_gp.solvers._numba_lapack.potri_kernel`) called through
:mod:`bayes_gp.solvers._native_linalg` (as :mod:`bayes_gp.latent.native` does) and BLAS
``dgemm`` through numba's ``np.dot``. The iteration is the NumPy solver's step for step from
:math:`a = 0` (the same Newton step, backtracking line search and convergence test), so the
two agree to rounding (``tests/classification/test_native.py``). Two differences in the arithmetic, both exact
identities: :math:`E_c = D_c^{1/2} B_c^{-1} D_c^{1/2}` from ``dpotri`` of :math:`L_c` (NumPy:
:math:`V^T V`, :math:`V = L_c^{-1} D_c^{1/2}`), and :math:`(\sum E)^{-1}` from ``dpotri`` of
:math:`M` in the gradient's :math:`R_{cc}` and :math:`\Sigma_i` (NumPy: triangular solves with
:math:`M`), which turns the gradient's :math:`O(Cn^3)` work into matrix products.

Compiled once per process (:func:`solver_address`): one ``cfunc`` over raw pointers, cached on
disk in PyTensor's numba cache under :data:`SOLVER_KEY` (a hash of this module's and
:mod:`bayes_gp.solvers._native_linalg`'s sources, whose LAPACK helpers it calls, and numba's and
PyTensor's versions; not with ``BAYES_GP_NUMBA_CACHE=0``). A model's numba function
(:func:`numba_function`) holds the labels as constants and calls the solver through its
address, as :mod:`bayes_gp.latent.native` does.

Differences from the NumPy Op, by design:

* No warm start: the NumPy Op starts from the last mode it found; shared by chains in parallel
  threads it would make each chain's arithmetic depend on the others' timing. Each evaluation
  starts from :math:`a = 0` (Newton's method on the concave :math:`\Psi` reaches the same mode).
* An infeasible point's reason is not written to the Op's ``last_reason`` (no Python object is
  touched without the GIL); :data:`REASONS` has it by status.
* No exception is raised inside the solver (every failure a status code).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np
from numba.core import types
from pytensor.link.numba.cache import _call_cached_ptr

from bayes_gp.op_backends import cached_cfunc, compile_elsewhere, numba_disk_cache
from bayes_gp.solvers import _native_linalg
from bayes_gp.solvers._native_linalg import (
    _cholesky_lower,
    _copy,
    _inverse_from_factor,
    _lower_solve,
    _lower_t_solve,
    _sym_mv,
)

__all__ = [
    "SOLVER_KEY", "NativeResult", "numba_function", "solve", "solve_arrays", "solver_address",
    "start_compiling",
]  # fmt: skip

#: Status codes of :func:`solve`: the evidence and gradient were computed, ``K`` holds NaN or
#: infinite values, some ``K[c]`` is not positive definite, a factorisation inside the
#: iteration failed, the log evidence is not finite.
OK, K_NOT_FINITE, K_NOT_PD, FACTOR_FAILED, NOT_FINITE = 0, 1, 2, 3, 4

#: Why a status made the point infeasible (the NumPy solver's wording).
REASONS = {
    K_NOT_FINITE: "the covariance contains NaN or infinite values",
    K_NOT_PD: "a Cholesky factorisation of K failed (K not positive definite)",
    FACTOR_FAILED: "a Cholesky factorisation failed (K not positive definite)",
    NOT_FINITE: "the log evidence is not finite",
}


#: The solver's cache key: the sources of this module and of the LAPACK helpers, the versions.
SOLVER_KEY = _native_linalg.cfunc_key("bayes_gp.classification.native", Path(__file__))

# ------------------------------------------------------------------------ nopython code
_njit = numba.njit(cache=False, error_model="numpy", fastmath=False)


@_njit
def _softmax(f, pi):
    """``pi = softmax(f, axis=0)`` as SciPy computes it (the column maximum subtracted)."""
    C, n = f.shape
    for i in range(n):
        mx = f[0, i]
        for c in range(1, C):
            mx = max(mx, f[c, i])
        s = 0.0
        for c in range(C):
            pi[c, i] = math.exp(f[c, i] - mx)
            s += pi[c, i]
        for c in range(C):
            pi[c, i] /= s


@_njit
def _psi(a, f, Y):
    r""":math:`\Psi = -\tfrac12 a^T f + y^T f - \sum_i \log\sum_c \exp f_i^c` (R&W eq. 3.40
    with :math:`f = Ka`)."""
    C, n = f.shape
    quad = 0.0
    lin = 0.0
    lse = 0.0
    for i in range(n):
        mx = f[0, i]
        for c in range(1, C):
            mx = max(mx, f[c, i])
        s = 0.0
        for c in range(C):
            quad += a[c, i] * f[c, i]
            lin += Y[c, i] * f[c, i]
            s += math.exp(f[c, i] - mx)
        lse += mx + math.log(s)
    return -0.5 * quad + lin - lse


@_njit
def _K_times(K, a, out):
    """``out[c] = K[c] @ a[c]``."""
    C, n = a.shape
    for c in range(C):
        for i in range(n):
            s = 0.0
            for j in range(n):
                s += K[c, i, j] * a[c, j]
            out[c, i] = s


@_njit
def _same_class(same_K, pi, c):
    r"""The first class before ``c`` with the same covariance (``same_K``) and the same
    :math:`\pi` as class ``c`` (whose :math:`E` and :math:`\log|B|` are then class ``c``'s),
    or -1."""
    n = pi.shape[1]
    for d in range(c):
        if same_K[c] != same_K[d]:
            continue
        equal = True
        for i in range(n):
            if pi[c, i] != pi[d, i]:
                equal = False
                break
        if equal:
            return d
    return -1


@_njit
def _factor(K, same_K, pi, buf, E, M):
    r""":math:`E_c = D_c^{1/2} B_c^{-1} D_c^{1/2}`, :math:`B_c = I + D_c^{1/2} K_c D_c^{1/2}`,
    into ``E``, the lower Cholesky factor :math:`M` of :math:`\sum_c E_c` into ``M`` (upper
    triangle zero), and ``(ok, z)``, :math:`z = \sum_c\sum_i \log (L_c)_{ii}` (R&W Algorithm 3.3
    lines 5-8); ``ok`` False where a factorisation fails. ``same_K[c]``: the first class with
    ``K_c``'s covariance (shared hyperparameters: all 0), so that a class with an earlier one's
    covariance and :math:`\pi` (every class at :math:`f = 0`) reuses its factorisation."""
    C, n = pi.shape
    z = 0.0
    s = np.empty(n)
    zc = np.empty(C)
    M[:, :] = 0.0
    for c in range(C):
        d = _same_class(same_K, pi, c)
        if d >= 0:
            for i in range(n):  # (loops, not slice assignments: _native_linalg._copy)
                for j in range(n):
                    E[c, i, j] = E[d, i, j]
            zc[c] = zc[d]
        else:
            for i in range(n):
                s[i] = math.sqrt(pi[c, i])
            for i in range(n):  # the lower triangle of K_c, as np.linalg.cholesky reads it,
                for j in range(i + 1):  # into the upper one of buf (_cholesky_lower reads it)
                    buf[j, i] = s[i] * K[c, i, j] * s[j]
                buf[i, i] += 1.0
            if not _cholesky_lower(buf):
                return False, 0.0
            zc[c] = 0.0
            for i in range(n):
                zc[c] += math.log(buf[i, i])
            if not _inverse_from_factor(buf):
                return False, 0.0
            for i in range(n):
                for j in range(n):
                    E[c, i, j] = s[i] * buf[i, j] * s[j]
        z += zc[c]
        for i in range(n):
            for j in range(n):
                M[i, j] += E[c, i, j]
    if not _cholesky_lower(M):  # (its upper triangle read; zeros above the diagonal after)
        return False, 0.0
    return True, z


@_njit
def _apply_R(E, M, x, out, Ev, w):
    r"""``out = R x``, :math:`R_{cc'} = \delta_{cc'}E_c - E_c(\sum E)^{-1}E_{c'}` (``x``, ``out``
    (C, n); ``Ev`` (C, n), ``w`` (n,) work)."""
    C, n = x.shape
    w[:] = 0.0
    for c in range(C):
        _sym_mv(E[c], x[c], Ev[c])
        w += Ev[c]
    _lower_solve(M, w)
    _lower_t_solve(M, w)
    for c in range(C):
        _sym_mv(E[c], w, out[c])
        for i in range(n):
            out[c, i] = Ev[c, i] - out[c, i]


@_njit
def solve(K, Y, tol, max_iter, gK, info, a, E, M, gradient):
    """``(status, log q)`` of the softmax Laplace approximation at ``K`` (C, n, n) for the one-hot
    labels ``Y`` (C, n). When ``status`` is :data:`OK`: ``(n_iter, converged)`` in ``info``,
    the mode's :math:`a` (C, n), :math:`E_c` (C, n, n) and :math:`M` (n, n, lower) in ``a``,
    ``E``, ``M`` (:class:`~bayes_gp.classification.multiclass.SoftmaxLaplace`'s fields), and
    with ``gradient`` :math:`\\partial \\log q / \\partial K_c` in ``gK`` (module docstring;
    the NumPy solver's steps from :math:`a = 0`)."""
    C, n = Y.shape
    for c in range(C):
        for i in range(n):
            for j in range(n):
                if not np.isfinite(K[c, i, j]):
                    return K_NOT_FINITE, -np.inf
    buf = np.empty((n, n))
    same_K = np.arange(C)  # the first class with the same covariance (compared bitwise)
    for c in range(C):
        for d in range(c):
            if same_K[d] == d and np.array_equal(K[c], K[d]):
                same_K[c] = d
                break
    for c in range(C):  # the factorisations below need each K_c positive definite
        if same_K[c] != c:
            continue
        for i in range(n):  # (the lower triangle, as np.linalg.cholesky reads it, into the
            for j in range(i + 1):  # upper one of buf, which _cholesky_lower reads)
                buf[j, i] = K[c, i, j]
        if not _cholesky_lower(buf):
            return K_NOT_PD, -np.inf
    a[:, :] = 0.0
    f = np.zeros((C, n))
    pi = np.empty((C, n))
    b = np.empty((C, n))
    Kb = np.empty((C, n))
    cc = np.empty((C, n))
    step = np.empty((C, n))
    a_try = np.empty((C, n))
    f_try = np.empty((C, n))
    w = np.empty(n)
    tmp = np.empty(n)
    psi = _psi(a, f, Y)
    converged = False
    it = 0
    sqrt_tol = math.sqrt(tol)
    for it in range(1, max_iter + 1):  # noqa: B007
        _softmax(f, pi)
        ok, _ = _factor(K, same_K, pi, buf, E, M)
        if not ok:
            return FACTOR_FAILED, -np.inf
        # R&W Algorithm 3.3 lines 9-13: b = W f + y - pi, c = E K b,
        # a = b - c + E R M^-T M^-1 R^T c
        for i in range(n):
            pf = 0.0
            for c in range(C):
                pf += pi[c, i] * f[c, i]
            for c in range(C):
                b[c, i] = pi[c, i] * f[c, i] - pi[c, i] * pf + Y[c, i] - pi[c, i]
        _K_times(K, b, Kb)
        w[:] = 0.0
        for c in range(C):
            _sym_mv(E[c], Kb[c], cc[c])
            w += cc[c]
        _lower_solve(M, w)
        _lower_t_solve(M, w)
        for c in range(C):
            _sym_mv(E[c], w, tmp)
            for i in range(n):
                step[c, i] = (b[c, i] - cc[c, i] + tmp[i]) - a[c, i]
        t = 1.0
        accepted = False
        psi_try = psi
        for _ls in range(50):  # backtracking on a (f = K a is linear in a)
            for c in range(C):
                for i in range(n):
                    a_try[c, i] = a[c, i] + t * step[c, i]
            _K_times(K, a_try, f_try)
            psi_try = _psi(a_try, f_try, Y)
            if np.isfinite(psi_try) and psi_try >= psi - 1e-12 * max(1.0, abs(psi)):
                accepted = True
                break
            t *= 0.5
        if not accepted:
            break
        df = 0.0
        fmax = 0.0
        for c in range(C):
            for i in range(n):
                df = max(df, abs(f_try[c, i] - f[c, i]))
                fmax = max(fmax, abs(f_try[c, i]))
        gain = psi_try - psi
        for c in range(C):
            _copy(a[c], a_try[c])
            _copy(f[c], f_try[c])
        psi = psi_try
        if t == 1.0 and gain < tol and df < sqrt_tol * (1.0 + fmax):
            converged = True
            break
    _softmax(f, pi)
    ok, z = _factor(K, same_K, pi, buf, E, M)
    if not ok:
        return FACTOR_FAILED, -np.inf
    logq = psi - z
    for i in range(n):
        logq -= math.log(M[i, i])
    if not np.isfinite(logq):
        return NOT_FINITE, -np.inf
    info[0] = it
    info[1] = 1.0 if converged else 0.0
    if not gradient:
        return OK, logq

    # ---- the gradient (module docstring): (sum E)^-1 from M, then matrix products
    Sinv = M.copy()
    if not _inverse_from_factor(Sinv):
        return FACTOR_FAILED, -np.inf
    EK = np.empty((C, n, n))
    G = np.empty((C, n, n))
    dk = np.empty((C, n))
    for c in range(C):
        EK[c] = np.dot(E[c], K[c])
        G[c] = np.dot(Sinv, EK[c])
        for i in range(n):
            dk[c, i] = K[c, i, i]
        for k in range(n):
            for i in range(n):
                dk[c, i] -= K[c, k, i] * EK[c, k, i]
    # Sigma_i[c, d] = delta_cd dk[c, i] + (EK_c^T (sum E)^-1 EK_d)_ii, then
    # s2_i = -1/2 J_i (diag Sigma_i - 2 Sigma_i pi_i), J_i = diag(pi_i) - pi_i pi_i^T
    Sig = np.empty((n, C, C))
    acc = np.empty(n)
    for c in range(C):
        for d in range(C):
            acc[:] = 0.0
            for k in range(n):  # (rows of EK_c and G_d: contiguous)
                for i in range(n):
                    acc[i] += EK[c, k, i] * G[d, k, i]
            for i in range(n):
                Sig[i, c, d] = acc[i]
    v = np.empty(C)
    s2 = np.empty((C, n))
    for i in range(n):
        for c in range(C):
            Sig[i, c, c] += dk[c, i]
        pv = 0.0
        for c in range(C):
            s = Sig[i, c, c]
            for d in range(C):
                s -= 2.0 * Sig[i, c, d] * pi[d, i]
            v[c] = s
            pv += pi[c, i] * v[c]
        for c in range(C):
            s2[c, i] = -0.5 * (pi[c, i] * v[c] - pi[c, i] * pv)
    # u = s2 - R K s2
    Ks2 = np.empty((C, n))
    _K_times(K, s2, Ks2)
    RKs2 = np.empty((C, n))
    _apply_R(E, M, Ks2, RKs2, cc, w)
    u = s2 - RKs2
    for c in range(C):
        T = np.dot(Sinv, E[c])
        ET = np.dot(E[c], T)  # E_c (sum E)^-1 E_c
        for i in range(n):
            for j in range(i + 1):
                r = 0.5 * ((E[c, i, j] - ET[i, j]) + (E[c, j, i] - ET[j, i]))
                g = 0.5 * (a[c, i] * a[c, j] - r + u[c, i] * a[c, j] + a[c, i] * u[c, j])
                gK[c, i, j] = g
                gK[c, j, i] = g
    return OK, logq


_F64P = types.CPointer(types.float64)
#: ``status(C, n, K, Y, tol, max_iter, log q, dlogq/dK, info, a, E, M, gradient)``.
SOLVER_SIGNATURE = types.int64(
    types.int64, types.int64, _F64P, _F64P, types.float64, types.int64, _F64P, _F64P, _F64P,
    _F64P, _F64P, _F64P, types.int64,
)  # fmt: skip


def softmax_laplace_c(C, n, K, Y, tol, max_iter, logq, gK, info, a, E, M, gradient):
    """:func:`solve` over raw pointers (:data:`SOLVER_SIGNATURE`), for the ``cfunc``."""
    status, value = solve(
        numba.carray(K, (C, n, n)), numba.carray(Y, (C, n)), tol, max_iter,
        numba.carray(gK, (C, n, n)), numba.carray(info, 2), numba.carray(a, (C, n)),
        numba.carray(E, (C, n, n)), numba.carray(M, (n, n)), gradient != 0,
    )  # fmt: skip
    logq[0] = value
    return status


def start_compiling() -> bool:
    """Start compiling the solver in a child process where it is in neither this process nor
    the disk cache (:func:`bayes_gp.op_backends.compile_elsewhere`; whether a child is at it):
    called as a fit begins, so that the child compiles it while this process builds and compiles
    the model (as :func:`bayes_gp.latent.native.start_compiling`)."""
    return compile_elsewhere(__name__, "solver_address", SOLVER_KEY)


def solver_address() -> int:
    """The address of the solver ``cfunc`` (:data:`SOLVER_SIGNATURE`), compiled once per
    process, or loaded from PyTensor's numba cache (:data:`SOLVER_KEY`;
    :func:`bayes_gp.op_backends.cached_cfunc`)."""
    return cached_cfunc(softmax_laplace_c, SOLVER_SIGNATURE, SOLVER_KEY).address


_SOLVER_TYPE = types.FunctionType(SOLVER_SIGNATURE)


@_njit
def _solver_pointer():
    with numba.objmode(ptr=types.intp):  # once per process and compiled function
        ptr = solver_address()
    return ptr


@_njit
def call_solver(K, Y, tol, max_iter):
    """``(log q, dlogq/dK)`` as :class:`~bayes_gp.classification.multiclass.SoftmaxLaplaceLogp`
    returns them (``-inf`` and NaN gradients at an infeasible point), the solver called through
    its address."""
    C, n = Y.shape
    if K.shape[0] != C or K.shape[1] != n or K.shape[2] != n:
        raise ValueError("SoftmaxLaplaceLogp: K must be (C, n, n) for the C classes and n labels")
    Kc = np.ascontiguousarray(K)
    logq = np.empty((), dtype=np.float64)
    gK = np.empty((C, n, n))
    info = np.empty(2)
    a = np.empty((C, n))
    E = np.empty((C, n, n))
    M = np.empty((n, n))
    fn = _call_cached_ptr(
        get_ptr_func=_solver_pointer,
        func_type_ref=_SOLVER_TYPE,
        unique_func_name_lit="bayes_gp.classification.native.softmax_laplace",
    )
    status = fn(C, n, Kc.ctypes, Y.ctypes, tol, max_iter, logq.ctypes, gK.ctypes, info.ctypes,
                a.ctypes, E.ctypes, M.ctypes, 1)  # fmt: skip
    if status != OK:
        gK[:, :, :] = np.nan
    return logq, gK


def numba_function(op):
    """``(numba function, PyTensor cache key)`` for the Op ``op`` (a
    :class:`~bayes_gp.classification.multiclass.SoftmaxLaplaceLogp`). The function holds the
    labels as constants; the key is :data:`SOLVER_KEY` with a hash of the labels, ``tol`` and
    ``max_iter`` (``None``, not cached, with ``BAYES_GP_NUMBA_CACHE=0``). The solver is loaded
    from the disk cache here; where it is not there, a child process compiles it while this one
    compiles the model (:func:`bayes_gp.op_backends.compile_elsewhere`), and the model's first
    call waits for it (compiled here where the disk cache is off)."""
    from pytensor.link.numba.dispatch.basic import numba_njit

    Y = np.ascontiguousarray(op.Y, dtype=np.float64)
    tol, max_iter = float(op.tol), int(op.max_iter)
    if not start_compiling():
        solver_address()
    h = hashlib.sha256(f"{tol!r} {max_iter} {Y.shape}".encode())
    h.update(Y.tobytes())

    def softmax_laplace_native(K):
        return call_solver(K, Y, tol, max_iter)

    key = f"{SOLVER_KEY}.op.{h.hexdigest()[:32]}" if numba_disk_cache() else None
    return numba_njit(softmax_laplace_native), key


@dataclass(frozen=True)
class NativeResult:
    """What :func:`solve_arrays` returns: the solver's ``status`` (:data:`OK` or a key of
    :data:`REASONS`), ``log_q`` (:math:`-\\infty` unless :data:`OK`), ``n_iter`` and
    ``converged``, and at :data:`OK` the mode's ``a``, ``E``, ``M`` and, when asked for,
    ``grad_K`` (``None`` otherwise)."""

    status: int
    log_q: float
    n_iter: int = 0
    converged: bool = False
    a: np.ndarray | None = None
    E: np.ndarray | None = None
    M: np.ndarray | None = None
    grad_K: np.ndarray | None = None


def solve_arrays(
    K: np.ndarray, Y: np.ndarray, *, tol: float = 1e-10, max_iter: int = 100, gradient: bool = True
) -> NativeResult:
    """The compiled solver called from Python (through ``ctypes``, which releases the GIL for
    the call): for the pointwise pass over posterior draws, tests and benchmarks. Raises
    ``ValueError`` for mismatched shapes."""
    import ctypes

    K = np.ascontiguousarray(K, dtype=np.float64)
    Y = np.ascontiguousarray(Y, dtype=np.float64)
    if Y.ndim != 2 or K.shape != (Y.shape[0], Y.shape[1], Y.shape[1]):
        raise ValueError(f"K must be (C, n, n) and Y (C, n), got {K.shape} and {Y.shape}")
    C, n = Y.shape
    cf = cached_cfunc(softmax_laplace_c, SOLVER_SIGNATURE, SOLVER_KEY)
    logq, info = np.empty(1), np.zeros(2)
    gK = np.empty((C, n, n)) if gradient else np.empty(1)
    a, E, M = np.empty((C, n)), np.empty((C, n, n)), np.empty((n, n))

    def ptr(arr):
        return arr.ctypes.data_as(ctypes.POINTER(ctypes.c_double))

    status = cf.ctypes(C, n, ptr(K), ptr(Y), float(tol), int(max_iter), ptr(logq), ptr(gK),
                       ptr(info), ptr(a), ptr(E), ptr(M), int(gradient))  # fmt: skip
    if status != OK:
        return NativeResult(int(status), float(logq[0]))
    return NativeResult(int(status), float(logq[0]), int(info[0]), bool(info[1]), a, E, M,
                        gK if gradient else None)  # fmt: skip
