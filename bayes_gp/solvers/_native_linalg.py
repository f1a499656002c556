"""The nopython linear algebra of the native Laplace solvers (:mod:`bayes_gp.latent.native`,
:mod:`bayes_gp.classification.native`): triangular products and solves on small matrices, a
Cholesky factor in place and the inverse from a factor as :mod:`bayes_gp.solvers._numba_lapack`
builds them for GPLogp (function pointers from SciPy's ``cython_lapack``, no GIL). Below the
model families, so that neither solver reaches into the other's module; each solver's cache key
(:func:`cfunc_key`) hashes :data:`SOURCES` with its own module. Also
:func:`lower_inverse`, the blocked triangular inverse for NumPy code (the exact GPs'
leave-one-out pass, :func:`bayes_gp.predictive.inverse_diagonal`) and :func:`loo_terms`, that
whole pass for a block of draws in one compiled call.
"""

from __future__ import annotations

from pathlib import Path

import numba
import numpy as np

from bayes_gp.solvers import _numba_lapack
from bayes_gp.solvers._numba_lapack import factor_kernels, potri_kernel, trtri_kernel

__all__ = ["LOO_KEY", "SOURCES", "cfunc_key", "loo_cfunc", "loo_terms", "lower_inverse"]

#: The files whose source the native solvers' compiled code depends on beyond their own: this
#: module and the LAPACK bindings it takes from :mod:`bayes_gp.solvers._numba_lapack` (each
#: solver's cache key hashes them with its own module).
SOURCES = (Path(__file__), Path(_numba_lapack.__file__))


def cfunc_key(name: str, *own: Path) -> str:
    """The on-disk cache key of a ``cfunc`` built on this module: ``name`` and a hash of the
    files ``own`` (the solver's module), of :data:`SOURCES` and of numba's and PyTensor's
    versions, so that an edit of any of them compiles it afresh."""
    import hashlib

    import pytensor

    h = hashlib.sha256()
    for path in (*own, *SOURCES):
        h.update(path.read_bytes())
    h.update(f"numba {numba.__version__} pytensor {pytensor.__version__}".encode())
    return f"{name}.{h.hexdigest()[:32]}"

_njit = numba.njit(cache=False, error_model="numpy", fastmath=False)
#: The dot-product loops below (row times vector) may be summed in any order, so that LLVM
#: vectorises them ("reassoc" alone: no assumption about NaN or infinities). At n = 200 this
#: made L x and L^-1 b 6-8x faster (2.2 and 3.3 us instead of 19 and 26); the order is fixed
#: by the compiled code, so the results are the same from one run to the next.
_njit_dot = numba.njit(cache=False, error_model="numpy", fastmath={"reassoc"})


@_njit
def _copy(dst, src):
    """``dst[:] = src`` for vectors, as a loop: numba compiles a slice assignment from an array
    with the string formatting of its shape-mismatch error, seconds once per process
    (:mod:`bayes_gp.solvers._numba_lapack`); these helpers keep that out of the solvers."""
    for i in range(dst.shape[0]):
        dst[i] = src[i]


@_njit
def _sub_into(out, x, y):
    """``out[:] = x - y`` for vectors (``out`` may be ``x`` or ``y``), as a loop (:func:`_copy`)."""
    for i in range(out.shape[0]):
        out[i] = x[i] - y[i]


@_njit
def _axpy_into(out, x, a, y):
    """``out[:] = x + a * y`` for vectors, as a loop (:func:`_copy`)."""
    for i in range(out.shape[0]):
        out[i] = x[i] + a * y[i]


@_njit_dot
def _lower_mv(L, x, out):
    """``out = L x`` for the lower triangle of ``L``."""
    n = x.shape[0]
    for i in range(n):
        s = 0.0
        for j in range(i + 1):
            s += L[i, j] * x[j]
        out[i] = s


@_njit
def _lower_t_mv(L, x, out):
    """``out = L^T x`` for the lower triangle of ``L``."""
    n = x.shape[0]
    out[:] = 0.0
    for j in range(n):
        xj = x[j]
        for i in range(j + 1):
            out[i] += L[j, i] * xj


@_njit_dot
def _lower_solve(L, b):
    """``L^-1 b`` in place."""
    n = b.shape[0]
    for i in range(n):
        s = b[i]
        for j in range(i):
            s -= L[i, j] * b[j]
        b[i] = s / L[i, i]


@_njit
def _lower_t_solve(L, b):
    """``L^-T b`` in place, by rows of ``L`` (contiguous in C order: 3x faster at n = 200
    than by its columns)."""
    n = b.shape[0]
    for i in range(n - 1, -1, -1):
        bi = b[i] / L[i, i]
        b[i] = bi
        for j in range(i):
            b[j] -= L[i, j] * bi


@_njit_dot
def _sym_mv(S, x, out):
    """``out = S x`` for a full (symmetric) ``S``."""
    n = x.shape[0]
    for i in range(n):
        s = 0.0
        for j in range(n):
            s += S[i, j] * x[j]
        out[i] = s


# GPLogp's Cholesky factor and inverse from a lower factor (both triangles), dpotri's result
# in the lower triangle (potri_kernel), and the blocked triangular inverse
_cholesky_factor, _inverse_from_factor = factor_kernels()
_potri_lower = potri_kernel()
_trtri_lower = trtri_kernel()


@_njit
def _cholesky_lower(A):
    """The lower Cholesky factor :math:`L` of the symmetric matrix whose **upper** triangle
    ``A`` (C order) holds, written over ``A`` with zeros above the diagonal; ``False`` if it
    is not positive definite (GPLogp's factorisation:
    :func:`~bayes_gp.solvers._numba_lapack.factor_kernels`, ``dpotrf`` with ``'L'``)."""
    return _cholesky_factor(A)[0]


def _trtri_c(n, ptr):
    """``_trtri_lower`` (:func:`~bayes_gp.solvers._numba_lapack.trtri_kernel`) over a raw
    pointer to an ``n x n`` C-ordered buffer: ``1`` on success, else ``0``."""
    return 1 if _trtri_lower(numba.carray(ptr, (n, n))) else 0


_TRTRI_SIGNATURE = numba.types.int64(numba.types.int64, numba.types.CPointer(numba.types.float64))
_TRTRI_KEY = cfunc_key("bayes_gp.solvers._native_linalg.trtri")


def lower_inverse(L: np.ndarray) -> np.ndarray:
    """:math:`L^{-1}` of the lower-triangular ``L`` (zeros above the diagonal: the result has
    them too) by :func:`~bayes_gp.solvers._numba_lapack.trtri_kernel` (a quarter of LAPACK
    ``dtrtri``'s time at n = 300, under half at n = 1000), for NumPy code: called through a
    ``cfunc`` (compiled once per machine and cached in PyTensor's numba cache,
    :func:`bayes_gp.op_backends.cached_cfunc`) by ``ctypes``, which releases the GIL. Raises
    ``numpy.linalg.LinAlgError`` where a diagonal entry of ``L`` is zero."""
    import ctypes

    from bayes_gp.op_backends import cached_cfunc

    out = np.array(L, dtype=np.float64, order="C")
    if out.ndim != 2 or out.shape[0] != out.shape[1]:
        raise ValueError(f"L must be a square matrix, got shape {out.shape}")
    cf = cached_cfunc(_trtri_c, _TRTRI_SIGNATURE, _TRTRI_KEY)
    if not cf.ctypes(out.shape[0], out.ctypes.data_as(ctypes.POINTER(ctypes.c_double))):
        raise np.linalg.LinAlgError("the triangular factor has a zero on its diagonal")
    return out


_HALF_LOG_2PI = 0.5 * float(np.log(2.0 * np.pi))


def _loo_c(size, n, c_ptr, a_ptr, o_ptr, s_ptr):
    """:func:`loo_terms` over raw pointers to ``size`` draws: ``C`` ``(size, n, n)``, ``alpha``
    ``(size, n)`` (in: :math:`t`), ``out`` ``(size, n)`` and ``ok`` ``(size,)``."""
    C = numba.carray(c_ptr, (size, n, n))
    A = numba.carray(a_ptr, (size, n))
    O = numba.carray(o_ptr, (size, n))
    S = numba.carray(s_ptr, (size,))
    Linv = np.empty((n, n))
    d = np.empty(n)
    for j in range(size):
        S[j] = 0
        L = C[j]
        if not _cholesky_lower(L):
            continue
        a = A[j]
        _lower_solve(L, a)
        _lower_t_solve(L, a)
        for i in range(n):
            for k in range(n):
                Linv[i, k] = L[i, k]
        if not _trtri_lower(Linv):
            continue
        _column_norms(Linv, d)
        ok = 1
        for k in range(n):
            v = 0.5 * np.log(d[k]) - 0.5 * a[k] * a[k] / d[k] - _HALF_LOG_2PI
            O[j, k] = v
            if not np.isfinite(v):
                ok = 0
        S[j] = ok
    return 0


@_njit_dot
def _column_norms(Linv, d):
    """``d[k] = sum_i Linv[i, k]^2`` for the lower-triangular ``Linv``, row by row (contiguous)."""
    n = d.shape[0]
    for k in range(n):
        d[k] = 0.0
    for i in range(n):
        for k in range(i + 1):
            d[k] += Linv[i, k] * Linv[i, k]


_F64P = numba.types.CPointer(numba.types.float64)
_I64 = numba.types.int64
_LOO_SIGNATURE = _I64(_I64, _I64, _F64P, _F64P, _F64P, numba.types.CPointer(_I64))
#: the disk cache key of :func:`loo_cfunc`
LOO_KEY = cfunc_key("bayes_gp.solvers._native_linalg.loo")


def loo_cfunc():
    """The compiled pass of :func:`loo_terms`: compiled once per machine (about 4 s on 2
    cores), cached on disk (:func:`bayes_gp.op_backends.cached_cfunc`), loaded once per
    process."""
    from bayes_gp.op_backends import cached_cfunc

    return cached_cfunc(_loo_c, _LOO_SIGNATURE, LOO_KEY)


def loo_terms(C: np.ndarray, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""The exact leave-one-out log predictive densities of a block of draws (R&W eqs.
    5.10-5.12, as :func:`bayes_gp.predictive.loo_log_density` computes them from one
    factorisation) in one compiled call, without the GIL.

    Parameters
    ----------
    C : ndarray, shape (draws, n, n), float64, C order
        Each draw's observation covariance (symmetric; its upper triangle is read). Overwritten:
        ``C[j]`` becomes the lower Cholesky factor :math:`L_j` (zeros above the diagonal).
    alpha : ndarray, shape (draws, n), float64, C order
        Each draw's residual :math:`t_j = y - m_j`, overwritten by
        :math:`\alpha_j = C_j^{-1} t_j`.

    Returns
    -------
    out : ndarray, shape (draws, n)
        :math:`\tfrac12\log[C_j^{-1}]_{ii} - \tfrac12\alpha_{ji}^2/[C_j^{-1}]_{ii} -
        \tfrac12\log 2\pi`.
    ok : ndarray of bool, shape (draws,)
        ``False`` for a draw whose :math:`C_j` is not numerically positive definite or whose
        terms are not finite (its ``out`` row and ``C[j]`` are then meaningless: the caller
        factorises it again with the jitter retry of :func:`bayes_gp.predictive.factorize`).
    """
    import ctypes

    size, n = alpha.shape
    for name, a, shape in (("C", C, (size, n, n)), ("alpha", alpha, (size, n))):
        flags = a.flags
        if a.shape != shape or a.dtype != np.float64 or not (flags.c_contiguous and flags.writeable):
            raise ValueError(f"{name} must be a writable C-ordered float64 array of shape {shape}")
    out = np.empty((size, n))
    ok = np.zeros(size, dtype=np.int64)
    fn = loo_cfunc().ctypes
    dp = ctypes.POINTER(ctypes.c_double)

    fn(size, n, C.ctypes.data_as(dp), alpha.ctypes.data_as(dp), out.ctypes.data_as(dp),
       ok.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)))  # fmt: skip
    return out, ok.astype(bool)
