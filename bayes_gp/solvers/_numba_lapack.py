"""Native numba implementations of :class:`~bayes_gp.solvers.likelihood.GPLogp` and
:class:`~bayes_gp.solvers.likelihood.CholeskyInverse` (LAPACK ``dpotrf``, ``dpotrs``,
``dpotri`` called from compiled code).

Their first numba implementations called the NumPy versions through ``numba.objmode``, which
takes the GIL: nutpie runs its chains in threads, so two chains' gradients ran one after the
other, and each cost about twice its standalone time with two chains on two cores (issue 19,
``benchmarks/gradient.py --in-nutpie``). Here LAPACK is called from nopython code through
SciPy's ``cython_lapack`` function pointers, as PyTensor's own numba linear algebra does
(``potrf`` and ``potrs`` are PyTensor's bindings, ``potri`` is bound the same way), so no chain
waits for another. The results and the in-place contract are those of the NumPy versions
(``_logp_numpy``, ``_inverse_numpy``): ``L`` (C-ordered, lower, zero above the diagonal) written
over ``C`` when ``overwrite``; a matrix that is not positive definite gives ``(-inf, NaN, NaN)``.

:func:`factor_kernels` (a Cholesky factor and the inverse from it, in place) serves these Ops and
the grouped Woodbury density (:mod:`bayes_gp.solvers.grouped`). :func:`build` returns ``None``
when PyTensor's internal LAPACK bindings are not importable (they are not public API); the caller
then keeps the ``objmode`` versions.
"""

from __future__ import annotations

import functools

import numpy as np

_LOG_2PI = float(np.log(2.0 * np.pi))


@functools.lru_cache(maxsize=1)
def bindings():
    """``(potrf, potrs, potri, val_to_int_ptr, int_ptr_to_val)`` callable from nopython code
    (float64; PyTensor's bindings of ``dpotrf`` / ``dpotrs``, ``dpotri`` bound the same way),
    or ``None`` when PyTensor's internal LAPACK bindings are not importable."""
    try:
        import numba
        from numba.core import types
        from pytensor.link.numba.cache import _call_cached_ptr
        from pytensor.link.numba.dispatch.basic import numba_njit
        from pytensor.link.numba.dispatch.linalg._LAPACK import (
            _LAPACK,
            get_lapack_ptr,
            int_ptr_to_val,
            nb_f64p,
            nb_i32p,
            val_to_int_ptr,
        )
    except ImportError:  # pragma: no cover - depends on PyTensor's internals
        return None

    f64 = types.float64
    potrf = _LAPACK().numba_xpotrf(f64)
    potrs = _LAPACK().numba_xpotrs(f64)

    @numba_njit
    def _potri_pointer():
        with numba.objmode(ptr=types.intp):
            ptr = get_lapack_ptr(f64, "potri")
        return ptr

    potri_type = types.FunctionType(types.void(nb_i32p, nb_i32p, nb_f64p, nb_i32p, nb_i32p))

    @numba_njit
    def potri(UPLO, N, A, LDA, INFO):
        fn = _call_cached_ptr(
            get_ptr_func=_potri_pointer,
            func_type_ref=potri_type,
            unique_func_name_lit="bayes_gp.dpotri",
        )
        fn(UPLO, N, A, LDA, INFO)

    return potrf, potrs, potri, val_to_int_ptr, int_ptr_to_val


@functools.lru_cache(maxsize=1)
def factor_kernels():
    """``(cholesky_lower, cholesky_inverse)``: nopython functions on a C-ordered square buffer,
    in place, each returning whether it succeeded (``None`` without :func:`bindings`).

    ``cholesky_lower(work)`` writes the lower factor :math:`L` of the symmetric ``work`` over it
    (zeros above the diagonal) and returns ``(ok, sum_i log L_ii)``, ``ok`` ``False`` when
    ``work`` is not positive definite or a diagonal entry of :math:`L` is not finite (the sum
    is accumulated in the loop that clears the upper triangle, as GPLogp always did: its
    rounding is part of the log density's value); ``cholesky_inverse(work)`` writes
    :math:`(LL^\top)^{-1}`, both triangles, over the factor :math:`L`."""
    lapack = bindings()
    if lapack is None:  # pragma: no cover - depends on PyTensor's internals
        return None
    from pytensor.link.numba.dispatch.basic import numba_njit

    potrf, _, potri, val_to_int_ptr, int_ptr_to_val = lapack

    @numba_njit
    def cholesky_lower(work):
        # A C-ordered buffer read by LAPACK as F-ordered is C^T = C; 'U' factorises it as
        # U^T U with U = L^T, which the C-ordered view reads as the lower factor L.
        n = work.shape[0]
        N = val_to_int_ptr(np.int32(n))
        INFO = val_to_int_ptr(np.int32(0))
        potrf(val_to_int_ptr(np.int32(ord("U"))), N, work.ctypes, N, INFO)
        ok = int_ptr_to_val(INFO) == 0
        half_logdet = 0.0  # sum log L_ii, in the loop that clears the upper triangle
        for i in range(n):
            d = work[i, i]
            if not np.isfinite(d):
                ok = False
            for j in range(i + 1, n):
                work[i, j] = 0.0
            if ok:
                half_logdet += np.log(d)
        return ok, half_logdet

    @numba_njit
    def cholesky_inverse(work):
        # the F-ordered view is U = L^T: 'U' leaves the inverse's upper triangle there, the
        # lower triangle of the C-ordered view; mirror it
        n = work.shape[0]
        N = val_to_int_ptr(np.int32(n))
        INFO = val_to_int_ptr(np.int32(0))
        potri(val_to_int_ptr(np.int32(ord("U"))), N, work.ctypes, N, INFO)
        if int_ptr_to_val(INFO) != 0:
            return False
        for i in range(n):
            for j in range(i):
                work[j, i] = work[i, j]
        return True

    return cholesky_lower, cholesky_inverse


def build():
    """``(gp_logp(overwrite) -> njit fn, chol_inverse(overwrite) -> njit fn)`` or ``None``."""
    lapack = bindings()
    if lapack is None:  # pragma: no cover - depends on PyTensor's internals
        return None
    from pytensor.link.numba.dispatch.basic import numba_njit

    _, potrs, _, val_to_int_ptr, _ = lapack
    cholesky_lower, cholesky_inverse = factor_kernels()

    def gp_logp(overwrite: bool):
        @numba_njit
        def gp_logp_numba(C, r):
            n = r.shape[0]
            work = np.ascontiguousarray(C) if overwrite else np.copy(C)
            ok, logdet = cholesky_lower(work)
            logp = np.empty((), dtype=np.float64)
            alpha = np.empty(n, dtype=np.float64)
            if not ok:
                work[:, :] = np.nan
                alpha[:] = np.nan
                logp[()] = -np.inf
                return logp, alpha, work
            alpha[:] = r
            N = val_to_int_ptr(np.int32(n))
            INFO = val_to_int_ptr(np.int32(0))
            potrs(
                val_to_int_ptr(np.int32(ord("U"))), N, val_to_int_ptr(np.int32(1)),
                work.ctypes, N, alpha.ctypes, N, INFO,
            )  # fmt: skip
            logp[()] = -0.5 * np.dot(r, alpha) - logdet - 0.5 * n * _LOG_2PI
            return logp, alpha, work

        return gp_logp_numba

    def chol_inverse(overwrite: bool):
        @numba_njit
        def chol_inverse_numba(L):
            n = L.shape[0]
            work = np.ascontiguousarray(L) if overwrite else np.copy(L)
            for i in range(n):
                if not np.isfinite(work[i, i]):
                    work[:, :] = np.nan
                    return work
            if not cholesky_inverse(work):
                work[:, :] = np.nan
            return work

        return chol_inverse_numba

    return gp_logp, chol_inverse
