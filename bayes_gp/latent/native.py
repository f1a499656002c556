r"""The Laplace step of :class:`~bayes_gp.latent.op.LaplaceLogp` in nopython code, off the GIL.

The NumPy Newton solver (:func:`bayes_gp.latent.laplace.laplace`) runs in Python; the numba
backend reached it through ``numba.objmode``, which holds the GIL, so nutpie's chains (threads
of one process) waited for each other and :func:`bayes_gp.inference.nuts.run_nuts` ran them one
after another. Here the *stable form* of that solver (R&W Algorithm 3.1, :math:`B = I +
W^{1/2} K W^{1/2} = L_B L_B^T`), its log evidence (R&W eq. 3.32)

.. math::
   \log q(y \mid \theta) = \log p(y \mid \hat f) - \tfrac12 \hat v^T \hat v
      - \textstyle\sum_i \log (L_B)_{ii}

and its exact gradients with respect to :math:`K` and :math:`m` (R&W Algorithm 5.1 / eqs.
5.22–5.24 generalised; the formulas of :mod:`bayes_gp.latent.laplace`'s module docstring:
:math:`\partial\log q/\partial K = \tfrac12 aa^T - \tfrac12 R + \tfrac12(u\ell'^T +
\ell'u^T)`, :math:`\partial\log q/\partial m = a + u`, with :math:`R = W^{1/2}B^{-1}W^{1/2}`
from :math:`L_B` as ``dpotri`` gives it) are written in nopython numba, calling LAPACK and BLAS
(``dpotrf``; ``dtrtri``, ``dtrmm`` and ``dlauum`` for ``dpotri``'s result,
:func:`bayes_gp.solvers._numba_lapack.potri_kernel`) through SciPy's ``cython_lapack`` /
``cython_blas`` pointers (:mod:`bayes_gp.solvers._native_linalg`, shared with the softmax
solver). The iteration is the NumPy stable form's step for step: whitened iterates :math:`f = m + L_K v`, the
Newton step :math:`A^{-1}g = g - L_K^T W^{1/2} B^{-1} W^{1/2} L_K g` (Woodbury), the same
Armijo line search, convergence test and pending Newton step, so the two agree to rounding
(``tests/latent/test_native.py``: log evidence and gradients to :math:`10^{-10}` relative).

Likelihoods (:func:`likelihood_code`): Bernoulli with the logit link, binomial (logit) and
Poisson (log link, exposure): log-concave, without likelihood parameters, with derivatives that
are a few lines each. Every other likelihood, a custom one, the variational and EP Ops, and
PyTensor's C and Python backends keep the NumPy solver.

Where the model around the Op is one :mod:`bayes_gp.inference.native_laplace` describes (a
catalogue kernel or a sum of products of them, a zero or constant mean, nothing added; it also
takes the negative binomial and the Gaussian likelihoods), nutpie does not run this solver at
all: :file:`bayes_gp/solvers/c/laplace.c` transcribes it step for
step into C with the kernel, its gradient and the priors, and nothing is compiled per model.
This solver serves the models that path does not cover (another kernel or mean function, a
variable the user added).

Compiled once per process, shared by all models: the solver is one numba ``cfunc``
(:func:`solver_address`) with a C signature over raw pointers, the likelihood chosen by an
integer code. A model's numba function (:func:`numba_function`) holds the data as constants and
calls the solver through its address (PyTensor's ``_call_cached_ptr``, as for LAPACK), so numba
does not link, and LLVM does not optimise again, the solver into every model: the per-model
function is a few dozen instructions. The ``cfunc`` is cached on disk in PyTensor's numba cache
directory under a key holding a hash of this module's source and numba's and PyTensor's versions
(:data:`SOLVER_KEY`; not with ``BAYES_GP_NUMBA_CACHE=0``), so a second process loads it; the
model's function is registered with PyTensor's ``register_funcify_and_cache_key`` under a key
holding that one and a hash of the data, so that PyTensor caches the whole compiled log density.

Differences from the NumPy Op, by design:

* No warm start. The NumPy Op starts Newton's method from the last mode it found; a mode shared
  by chains running in parallel threads would make each chain's arithmetic depend on the other
  chains' timing (draws no longer reproducible from the seed), and per-chain state is not
  available to the compiled log density. Each evaluation starts from :math:`f = m`, or from the
  Op's fixed ``start`` (a constant of the compiled function: the mode at the model's initial
  point, which ``LatentGP.sample`` sets; 4.9 Newton steps on Pima's posterior instead of
  6.4, and at most one more far from it); the answer
  is the same to the solver's tolerance (Newton's method converges to the unique mode of a
  log-concave posterior from any start), at the cost of a few more Newton steps
  (``benchmarks/README.md``). The pointwise pass over the draws after sampling
  (:func:`laplace_mode`, one thread per chain) does warm-start each draw from the previous
  draw's mode of the same chain (the solver's ``f0``; 4.5 Newton steps on Pima instead of
  6.5), which keeps every value a function of that chain's draws alone.
* Where the stable form cannot proceed (:math:`W` not finite, e.g. a Poisson mean that
  overflows, or :math:`B` not factorisable) the point is infeasible (:math:`-\infty`, NaN
  gradients) instead of handing over to the whitened form: for these likelihoods :math:`W \ge
  0`, so that happens only where :math:`W` overflows, where the whitened form fails as well.
* An infeasible point's reason is not written to the Op's ``last_reason`` (no Python object is
  touched without the GIL); :meth:`~bayes_gp.latent.op.LaplaceLogp.compute` gives it.
* No exception is raised inside the solver (``error_model="numpy"``, every failure a status
  code), so nothing can cross the ``cfunc`` boundary.
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

from bayes_gp.latent.likelihoods import (
    Bernoulli,
    Binomial,
    Gaussian,
    LatentLikelihood,
    NegativeBinomial,
    Poisson,
)
from bayes_gp.op_backends import cached_cfunc, compile_elsewhere, numba_disk_cache
from bayes_gp.solvers import _native_linalg
from bayes_gp.solvers._native_linalg import (
    _axpy_into,
    _cholesky_lower,
    _copy,
    _lower_mv,
    _lower_solve,
    _lower_t_mv,
    _lower_t_solve,
    _potri_lower,
    _sub_into,
    _sym_mv,
)

__all__ = [
    "BERNOULLI_LOGIT", "BINOMIAL", "COLD", "GAUSSIAN", "NEGATIVE_BINOMIAL", "POISSON",
    "SOLVER_KEY", "WARM", "NativeMode", "laplace_mode", "likelihood_code", "likelihood_spec",
    "numba_function", "solve", "solve_arrays", "solver_address", "start_compiling",
]  # fmt: skip

#: Likelihood codes of the compiled solver.
BERNOULLI_LOGIT, BINOMIAL, POISSON = 0, 1, 2

#: Starts of :func:`solve`'s Newton method: :math:`f = m`; ``f0`` (where :math:`\\Psi` is
#: finite there, else :math:`f = m`).
COLD, WARM = 0, 1

#: Status codes of :func:`solve`: the mode and gradients were found, ``K`` is not positive
#: definite, Newton's method did not converge, the stable form could not proceed.
OK, K_NOT_PD, NOT_CONVERGED, B_NOT_PD = 0, 1, 2, 3

#: Why a status made the point infeasible (the NumPy solver's wording where it has one).
REASONS = {
    K_NOT_PD: "K is not positive definite",
    NOT_CONVERGED: "Newton's method did not converge (native solver)",
    B_NOT_PD: "the likelihood's curvature is not finite at the latent values reached "
    "(native solver)",
}

# the same constants as bayes_gp.latent.laplace (a test checks that they agree)
_W_DIRECT = 1e-150
_EPS = float(np.finfo(float).eps)


#: The solver's cache key: this module's source, numba's and PyTensor's versions.
SOLVER_KEY = _native_linalg.cfunc_key("bayes_gp.latent.native", Path(__file__))


def likelihood_code(lik: LatentLikelihood) -> tuple[int, np.ndarray, np.ndarray] | None:
    r"""``(code, a1, a2)`` for the compiled solver, or ``None`` when it does not cover ``lik``.

    The log density of observation :math:`i` from ``y`` and the two data vectors:

    * Bernoulli (logit), ``a1 = 1``: :math:`\ell_i = -\log(1 + e^{-s_i f_i})`,
      :math:`s_i = 2y_i - 1` (R&W eq. 3.15);
    * binomial, ``a1`` the trials :math:`N_i`, ``a2`` :math:`\log\binom{N_i}{y_i}`:
      :math:`\ell_i = a_{2,i} + y_i f_i - N_i\log(1 + e^{f_i})`;
    * Poisson, ``a1`` the log exposure, ``a2`` :math:`-\log y_i!`:
      :math:`\ell_i = a_{2,i} + y_i\eta_i - e^{\eta_i}`, :math:`\eta_i = f_i + a_{1,i}`.

    Only these exact classes (a subclass may change the density).
    """
    kind = type(lik)
    if kind is Bernoulli and lik.link == "logit":
        one = np.ones(lik.n)
        return BERNOULLI_LOGIT, one, np.zeros(lik.n)
    if kind is Binomial:
        return BINOMIAL, np.array(lik.trials, dtype=float), np.array(lik._const, dtype=float)
    if kind is Poisson:
        return POISSON, np.array(lik._offset, dtype=float), np.array(lik._const, dtype=float)
    return None


#: The C code's (bayes_gp/solvers/c/laplace.c) likelihood codes beyond this solver's three
NEGATIVE_BINOMIAL, GAUSSIAN = 3, 4


def likelihood_spec(lik) -> tuple[int, np.ndarray, np.ndarray] | None:
    r"""``(code, a1, a2)`` of laplace.c for the likelihood ``lik``, or ``None`` where it has
    none (:mod:`bayes_gp.inference.native_laplace`): the three of :func:`likelihood_code`
    (Bernoulli-logit, binomial, Poisson), and (exactly these classes) the negative binomial (``a1`` the log
    exposure, ``a2`` :math:`-\log y_i!`; the dispersion its parameter) and the Gaussian (the
    noise sd its parameter)."""
    from scipy.special import gammaln

    found = likelihood_code(lik)
    if found is not None:
        return found
    if type(lik) is NegativeBinomial:
        y = np.asarray(lik.y, dtype=np.float64)
        return NEGATIVE_BINOMIAL, np.array(lik._offset, dtype=np.float64), -gammaln(y + 1.0)
    if type(lik) is Gaussian:
        return GAUSSIAN, np.zeros(lik.n), np.zeros(lik.n)
    return None


# ------------------------------------------------------------------------ nopython code
_njit = numba.njit(cache=False, error_model="numpy", fastmath=False)


@_njit
def _expit(x):
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@_njit
def _log1pexp(x):
    """:math:`\\log(1 + e^x)` as ``np.logaddexp(0, x)``."""
    if x > 0.0:
        return x + math.log1p(math.exp(-x))
    return math.log1p(math.exp(x))


@_njit
def _derivatives(code, f, y, a1, a2, d1, d2, d3):
    """:math:`\\sum_i \\ell_i`, with :math:`\\ell'`, :math:`\\ell''`, :math:`\\ell'''` written
    into ``d1``, ``d2``, ``d3`` (the formulas of :func:`likelihood_code`)."""
    total = 0.0
    for i in range(f.shape[0]):
        if code == POISSON:
            eta = f[i] + a1[i]
            mu = math.exp(eta)
            total += a2[i] + y[i] * eta - mu
            d1[i] = y[i] - mu
            d2[i] = -mu
            d3[i] = -mu
        else:
            pi = _expit(f[i])
            if code == BERNOULLI_LOGIT:
                total += -_log1pexp(-(2.0 * y[i] - 1.0) * f[i])
            else:
                total += a2[i] + y[i] * f[i] - a1[i] * _log1pexp(f[i])
            w = a1[i] * pi * (1.0 - pi)
            d1[i] = y[i] - a1[i] * pi
            d2[i] = -w
            d3[i] = -w * (1.0 - 2.0 * pi)
    return total


@_njit
def _factor_B(K, W, sW, buf):
    """:math:`W^{1/2}` into ``sW`` and :math:`L_B` into ``buf``; ``False`` where :math:`W`
    has a negative or non-finite entry or :math:`B` is not positive definite."""
    n = W.shape[0]
    for i in range(n):
        if not (W[i] >= 0.0 and np.isfinite(W[i])):
            return False
        sW[i] = math.sqrt(W[i])
    for i in range(n):  # B from the lower triangle of K, into the upper one of buf, which
        for j in range(i + 1):  # _cholesky_lower reads
            buf[j, i] = sW[i] * K[i, j] * sW[j]
        buf[i, i] += 1.0
    return _cholesky_lower(buf)


@_njit
def solve(K, m, y, a1, a2, code, tol, max_iter, f0, warm, gK, gm, f_out, dS_out, info):
    """``(status, log q)`` at ``(K, m)`` for the likelihood ``code`` with data ``y, a1, a2``
    (:func:`likelihood_code`); :math:`\\partial\\log q/\\partial K` and
    :math:`\\partial\\log q/\\partial m` written into ``gK`` and ``gm``, the mode
    :math:`\\hat f` into ``f_out`` and :math:`\\mathrm{diag}(\\Sigma)` into ``dS_out`` when
    ``status`` is :data:`OK` (the module docstring; the NumPy stable form's steps). Newton's
    method starts (``warm``: :data:`COLD`, :data:`WARM`) from :math:`f = m`, or from a finite
    ``f0`` (the NumPy solver's ``f0``: whitened as :math:`v_0 = L_K^{-1}(f_0 - m)`, dropped
    where :math:`\\Psi(v_0)` is not finite); ``info[0]`` is the number of Newton steps."""
    n = m.shape[0]
    LK = np.empty((n, n))
    for i in range(n):  # the lower triangle of K (the NumPy solver's _chol_K reads it) in
        for j in range(i + 1):  # the upper one, which _cholesky_lower reads
            LK[j, i] = K[i, j]
    if not _cholesky_lower(LK):  # (zeros above the diagonal)
        return K_NOT_PD, -np.inf
    buf = np.empty((n, n))
    v = np.zeros(n)
    f = np.empty(n)
    d1, d2, d3 = np.empty(n), np.empty(n), np.empty(n)
    v_t, f_t = np.empty(n), np.empty(n)
    d1_t, d2_t, d3_t = np.empty(n), np.empty(n), np.empty(n)
    W, sW, Ld1, g, t1, dv = (np.empty(n), np.empty(n), np.empty(n), np.empty(n),
                             np.empty(n), np.empty(n))  # fmt: skip

    # f = m + L_K v, Psi = sum(logp) - v.v / 2
    if warm and np.all(np.isfinite(f0)):
        _sub_into(v, f0, m)
        _lower_solve(LK, v)  # v0 = L_K^-1 (f0 - m)
    _lower_mv(LK, v, f)
    f += m
    psi = _derivatives(code, f, y, a1, a2, d1, d2, d3) - 0.5 * np.dot(v, v)
    if not np.isfinite(psi):  # a start where the likelihood overflows: start at f = m
        v[:] = 0.0
        _lower_mv(LK, v, f)
        f += m
        psi = _derivatives(code, f, y, a1, a2, d1, d2, d3) - 0.5 * np.dot(v, v)
    converged = False
    factored = False
    n_iter = 0
    for _ in range(max_iter):
        n_iter += 1
        for i in range(n):
            W[i] = -d2[i]
        if not _factor_B(K, W, sW, buf):
            return B_NOT_PD, -np.inf
        factored = True
        _lower_t_mv(LK, d1, Ld1)
        _sub_into(g, Ld1, v)
        # the Newton step A^-1 g = g - L_K^T W^1/2 B^-1 W^1/2 L_K g (Woodbury)
        _lower_mv(LK, g, t1)
        t1 *= sW
        _lower_solve(buf, t1)
        _lower_t_solve(buf, t1)
        t1 *= sW
        _lower_t_mv(LK, t1, dv)
        _sub_into(dv, g, dv)
        dec = np.dot(g, dv)
        scale = 1.0 + np.max(np.abs(v))
        gmax = np.max(np.abs(g))
        if dec < tol * tol and gmax < tol * scale:
            converged = True
            if np.max(np.abs(dv)) > 32.0 * _EPS * scale:  # the pending Newton step
                _axpy_into(v_t, v, 1.0, dv)
                _lower_mv(LK, v_t, f_t)
                f_t += m
                psi_t = _derivatives(code, f_t, y, a1, a2, d1_t, d2_t, d3_t) - 0.5 * np.dot(
                    v_t, v_t
                )
                if np.isfinite(psi_t):
                    _copy(v, v_t)
                    _copy(f, f_t)
                    _copy(d1, d1_t)
                    _copy(d2, d2_t)
                    _copy(d3, d3_t)
                    psi = psi_t
                    factored = False
            break
        if dec < 1e-9 * (1.0 + abs(psi)):  # full step in the quadratic-convergence region
            v += dv
            _lower_mv(LK, v, f)
            f += m
            psi = _derivatives(code, f, y, a1, a2, d1, d2, d3) - 0.5 * np.dot(v, v)
            continue
        t = 1.0  # backtracking line search with the Armijo condition
        accepted = False
        for _ls in range(60):
            _axpy_into(v_t, v, t, dv)
            _lower_mv(LK, v_t, f_t)
            f_t += m
            psi_t = _derivatives(code, f_t, y, a1, a2, d1_t, d2_t, d3_t) - 0.5 * np.dot(v_t, v_t)
            if np.isfinite(psi_t) and psi_t >= psi + 1e-4 * t * dec:
                accepted = True
                break
            t *= 0.5
        if not accepted:  # no increase representable: at the mode to machine precision
            converged = gmax < max(tol, 1e-6) * (1.0 + np.max(np.abs(Ld1)))
            break
        _copy(v, v_t)
        _copy(f, f_t)
        _copy(d1, d1_t)
        _copy(d2, d2_t)
        _copy(d3, d3_t)
        psi = psi_t
    info[0] = n_iter
    if not converged:
        return NOT_CONVERGED, -np.inf
    if not factored:
        for i in range(n):
            W[i] = -d2[i]
        if not _factor_B(K, W, sW, buf):
            return B_NOT_PD, -np.inf
    logq = psi
    for i in range(n):
        logq -= math.log(buf[i, i])

    # a = K^-1 (f - m) = L_K^-T v
    a = v.copy()
    _lower_t_solve(LK, a)
    # R = W^1/2 B^-1 W^1/2: B^-1 in the lower triangle of the C-ordered buf (dpotri's result)
    if not _potri_lower(buf):
        return B_NOT_PD, -np.inf
    for i in range(n):
        for j in range(i + 1):
            r = sW[i] * buf[i, j] * sW[j]
            buf[i, j] = r
            buf[j, i] = r
    R = buf
    # diag(Sigma): sum_j K_ij R_ij / W_i, or K_ii - k_i^T R k_i where W_i is (nearly) 0
    dS = np.empty(n)
    col = np.empty(n)
    Rcol = np.empty(n)
    for i in range(n):
        if W[i] >= _W_DIRECT:
            s = 0.0
            for j in range(n):
                s += K[i, j] * R[i, j]
            dS[i] = s / W[i]
        else:
            for j in range(n):
                col[j] = K[j, i]
            _sym_mv(R, col, Rcol)
            dS[i] = K[i, i] - np.dot(col, Rcol)
    s2 = 0.5 * dS * d3
    Ks2 = np.empty(n)
    _sym_mv(K, s2, Ks2)
    _sym_mv(R, Ks2, col)
    _sym_mv(K, col, Rcol)
    u = s2 - W * (Ks2 - Rcol)  # u = s2 - W Sigma s2, Sigma s2 = K s2 - K R K s2
    for i in range(n):
        for j in range(i + 1):  # exactly symmetric
            gK[i, j] = 0.5 * (a[i] * a[j] - R[i, j] + u[i] * d1[j] + d1[i] * u[j])
            gK[j, i] = gK[i, j]
        gm[i] = a[i] + u[i]
    _copy(f_out, f)
    _copy(dS_out, dS)
    return OK, logq


_F64P = types.CPointer(types.float64)
#: ``status(n, K, m, y, a1, a2, code, tol, max_iter, f0, warm, log q, dlogq/dK, dlogq/dm,
#: mode, diag(Sigma), info)`` (:func:`solve`).
SOLVER_SIGNATURE = types.int64(
    types.int64, _F64P, _F64P, _F64P, _F64P, _F64P, types.int64, types.float64, types.int64,
    _F64P, types.int64, _F64P, _F64P, _F64P, _F64P, _F64P, _F64P,
)  # fmt: skip


def laplace_stable_c(n, K, m, y, a1, a2, code, tol, max_iter, f0, warm, logq, gK, gm, f_out,
                     dS_out, info):  # fmt: skip
    """:func:`solve` over raw pointers (:data:`SOLVER_SIGNATURE`), for the ``cfunc``."""
    status, value = solve(
        numba.carray(K, (n, n)), numba.carray(m, n), numba.carray(y, n),
        numba.carray(a1, n), numba.carray(a2, n), code, tol, max_iter, numba.carray(f0, n),
        warm, numba.carray(gK, (n, n)), numba.carray(gm, n), numba.carray(f_out, n),
        numba.carray(dS_out, n), numba.carray(info, 1),
    )  # fmt: skip
    logq[0] = value
    return status


def start_compiling() -> bool:
    """Start compiling the solver in a child process where it is in neither this process nor
    the disk cache (:func:`bayes_gp.op_backends.compile_elsewhere`; whether a child is at it):
    called as a fit begins, so that the child compiles it while this process builds and compiles
    the model (a new machine's first ``sample``: Pima 29.7 -> 14.6 s, the object-mode Op's
    14.6-16.4 s)."""
    return compile_elsewhere(__name__, "solver_address", SOLVER_KEY)


def solver_address() -> int:
    """The address of the solver ``cfunc`` (:data:`SOLVER_SIGNATURE`), compiled once per
    process, or loaded from PyTensor's numba cache (:data:`SOLVER_KEY`;
    :func:`bayes_gp.op_backends.cached_cfunc`)."""
    return cached_cfunc(laplace_stable_c, SOLVER_SIGNATURE, SOLVER_KEY).address


_SOLVER_TYPE = types.FunctionType(SOLVER_SIGNATURE)


@_njit
def _solver_pointer():
    with numba.objmode(ptr=types.intp):  # once per process and compiled function
        ptr = solver_address()
    return ptr


@_njit
def call_solver(K, m, y, a1, a2, code, tol, max_iter, start, warm):
    """``(log q, dlogq/dK, dlogq/dm, dlogq/dphi)`` as :class:`~bayes_gp.latent.op.LaplaceLogp`
    returns them (``-inf`` and NaN gradients at an infeasible point), the solver called through
    its address (module docstring), Newton's method started from ``start`` as ``warm`` says
    (:func:`solve`)."""
    n = y.shape[0]
    if K.shape[0] != n or K.shape[1] != n or m.shape[0] != n:
        raise ValueError("LaplaceLogp: K must be (n, n) and m (n,) for the n observations")
    Kc = np.ascontiguousarray(K)
    mc = np.ascontiguousarray(m)
    logq = np.empty((), dtype=np.float64)
    gK = np.empty((n, n))
    gm = np.empty(n)
    f_out, dS_out, info = np.empty(n), np.empty(n), np.empty(1)  # not used here
    fn = _call_cached_ptr(
        get_ptr_func=_solver_pointer,
        func_type_ref=_SOLVER_TYPE,
        unique_func_name_lit="bayes_gp.latent.native.laplace_stable",
    )
    status = fn(n, Kc.ctypes, mc.ctypes, y.ctypes, a1.ctypes, a2.ctypes, code, tol, max_iter,
                start.ctypes, warm, logq.ctypes, gK.ctypes, gm.ctypes, f_out.ctypes,
                dS_out.ctypes, info.ctypes)  # fmt: skip
    if status != OK:
        gK[:, :] = np.nan
        gm[:] = np.nan
    return logq, gK, gm, np.empty(0)


def numba_function(op):
    """``(numba function, PyTensor cache key)`` for the Op ``op`` (a
    :class:`~bayes_gp.latent.op.LaplaceLogp`), or ``None`` when the native solver does not cover
    its likelihood. The function holds the data and the Op's fixed starting point
    ``start`` (:data:`WARM`; none: :math:`f = m`) as constants; the key is
    :data:`SOLVER_KEY` with a hash of the likelihood code, the data, the start, ``tol`` and
    ``max_iter`` (``None``, not cached, with ``BAYES_GP_NUMBA_CACHE=0``). The solver is loaded
    from the disk cache here; where it is not there, a child process compiles it while this one
    compiles the model (:func:`bayes_gp.op_backends.compile_elsewhere`), and the model's first
    call waits for it (compiled here where the disk cache is off)."""
    spec = likelihood_code(op.likelihood)
    if spec is None:
        return None
    from pytensor.link.numba.dispatch.basic import numba_njit

    code, a1, a2 = spec
    y = np.ascontiguousarray(op.likelihood.y, dtype=np.float64)
    a1 = np.ascontiguousarray(a1, dtype=np.float64)
    a2 = np.ascontiguousarray(a2, dtype=np.float64)
    tol, max_iter = float(op.tol), int(op.max_iter)
    given = getattr(op, "start", None)  # (old pickles)
    warm = COLD if given is None else WARM
    start = np.ascontiguousarray(y if given is None else given, dtype=np.float64)
    if start.shape != y.shape:
        raise ValueError(f"LaplaceLogp.start must have shape {y.shape}, got {start.shape}")
    if not start_compiling():
        solver_address()
    h = hashlib.sha256(f"{code} {tol!r} {max_iter} {y.size} {warm}".encode())
    for arr in (y, a1, a2, start):
        h.update(arr.tobytes())

    def laplace_logp_native(K, m, phi):
        return call_solver(K, m, y, a1, a2, code, tol, max_iter, start, warm)

    key = f"{SOLVER_KEY}.op.{h.hexdigest()[:32]}" if numba_disk_cache() else None
    return numba_njit(laplace_logp_native), key


@dataclass(frozen=True)
class NativeMode:
    """What :func:`laplace_mode` returns: the solver's ``status`` (:data:`OK` or a key of
    :data:`REASONS`), ``log_q`` (:math:`-\\infty` unless :data:`OK`), ``n_iter`` (Newton
    steps), and at :data:`OK` the mode ``f`` and ``cov_diag``, :math:`\\mathrm{diag}(\\Sigma)`
    of the Laplace posterior :math:`\\Sigma = (K^{-1} + W)^{-1}` (``None`` otherwise)."""

    status: int
    log_q: float
    n_iter: int
    f: np.ndarray | None = None
    cov_diag: np.ndarray | None = None


def _call(K, m, likelihood, f0, tol, max_iter):
    """The compiled solver called through ``ctypes`` (which releases the GIL for the call):
    ``(status, log q, dlogq/dK, dlogq/dm, mode, diag(Sigma), Newton steps)``."""
    import ctypes

    spec = likelihood_code(likelihood)
    if spec is None:
        raise ValueError(f"the native solver does not cover {type(likelihood).__name__}")
    code, a1, a2 = spec
    n = likelihood.n
    K = np.ascontiguousarray(K, dtype=np.float64)
    m = np.ascontiguousarray(m, dtype=np.float64)
    if K.shape != (n, n) or m.shape != (n,):
        raise ValueError(f"K must be ({n}, {n}) and m ({n},), got {K.shape} and {m.shape}")
    warm = COLD if f0 is None else WARM
    f0 = m if f0 is None else np.ascontiguousarray(f0, dtype=np.float64)
    if f0.shape != (n,):
        raise ValueError(f"f0 must be ({n},), got {f0.shape}")
    y = np.ascontiguousarray(likelihood.y, dtype=np.float64)
    cf = cached_cfunc(laplace_stable_c, SOLVER_SIGNATURE, SOLVER_KEY)
    logq, gK, gm = np.empty(1), np.empty((n, n)), np.empty(n)
    f, dS, info = np.empty(n), np.empty(n), np.zeros(1)

    def ptr(a):
        return a.ctypes.data_as(ctypes.POINTER(ctypes.c_double))

    status = cf.ctypes(n, ptr(K), ptr(m), ptr(y), ptr(a1), ptr(a2), code, float(tol),
                       int(max_iter), ptr(f0), int(warm), ptr(logq), ptr(gK), ptr(gm), ptr(f),
                       ptr(dS), ptr(info))  # fmt: skip
    return int(status), float(logq[0]), gK, gm, f, dS, int(info[0])


def solve_arrays(
    K: np.ndarray,
    m: np.ndarray,
    likelihood: LatentLikelihood,
    *,
    tol: float = 1e-10,
    max_iter: int = 100,
) -> tuple[int, float, np.ndarray, np.ndarray]:
    """``(status, log q, dlogq/dK, dlogq/dm)`` from the compiled solver called from Python
    (through ``ctypes``; for tests and benchmarks: no compilation beyond the solver's own),
    started at :math:`f = m` as inside the Op. Raises ``ValueError`` for a likelihood it does
    not cover or mismatched shapes."""
    return _call(K, m, likelihood, None, tol, max_iter)[:4]


def laplace_mode(
    K: np.ndarray,
    m: np.ndarray,
    likelihood: LatentLikelihood,
    *,
    f0: np.ndarray | None = None,
    tol: float = 1e-10,
    max_iter: int = 100,
) -> NativeMode:
    r"""The Laplace mode :math:`\hat f`, :math:`\mathrm{diag}(\Sigma)` and the log evidence
    from the compiled solver, started from ``f0`` (a warm start, as
    :func:`bayes_gp.latent.laplace.laplace`'s) or from :math:`f = m`: what the LA-LOO terms
    (:func:`bayes_gp.latent.predictive.la_loo_terms`) of a posterior draw need, computed
    without the GIL (the pointwise pass over NUTS draws, one thread per chain). Raises
    ``ValueError`` for a likelihood it does not cover or mismatched shapes."""
    status, logq, _, _, f, dS, n_iter = _call(K, m, likelihood, f0, tol, max_iter)
    if status != OK:
        return NativeMode(status, logq, n_iter)
    return NativeMode(status, logq, n_iter, f, dS)
