"""Native numba implementations of :class:`~bayes_gp.solvers.likelihood.GPLogp` and
:class:`~bayes_gp.solvers.likelihood.CholeskyInverse` (LAPACK ``dpotrf``, ``dpotrs``, and
``dpotri``'s result from ``dtrtri``, ``dtrmm`` and ``dlauum``, called from compiled code).

Their first numba implementations called the NumPy versions through ``numba.objmode``, which
takes the GIL: nutpie runs its chains in threads, so two chains' gradients ran one after the
other, and each cost about twice its standalone time with two chains on two cores (issue 19,
``benchmarks/gradient.py --in-nutpie``). Here LAPACK is called from nopython code through
SciPy's ``cython_lapack`` function pointers, as PyTensor's own numba linear algebra does
(``potrf`` and ``potrs`` are PyTensor's bindings, the others are bound the same way by
:func:`_bind`), so no chain waits for another. The results and the in-place contract are those
of the NumPy versions (``_logp_numpy``, ``_inverse_numpy``): ``L`` (C-ordered, lower, zero above
the diagonal) written over ``C`` when ``overwrite``; a matrix that is not positive definite gives
``(-inf, NaN, NaN)``.

:func:`factor_kernels` (a Cholesky factor and the inverse from it, in place) serves these Ops and
the grouped Woodbury density (:mod:`bayes_gp.solvers.grouped`). :func:`build` returns ``None``
when PyTensor's internal LAPACK bindings are not importable (they are not public API); the caller
then keeps the ``objmode`` versions.

No array is assigned to a slice here (``a[:] = b``), nor in the native Laplace solvers that use
these kernels: numba compiles, once per process, the error message of a slice assignment whose
shapes differ (``raise_with_shape_context``, with its string formatting), 2.3 s of the 17 s that
an exact GP's cold first compile took (n = 100, loaded machine). The copies are loops.
"""

from __future__ import annotations

import functools

import numpy as np

_LOG_2PI = float(np.log(2.0 * np.pi))


@functools.lru_cache(maxsize=1)
def bindings():
    """``(potrf, potrs, val_to_int_ptr, int_ptr_to_val)`` callable from nopython code
    (float64; PyTensor's bindings of ``dpotrf`` / ``dpotrs``), or ``None`` when PyTensor's
    internal LAPACK bindings are not importable."""
    try:
        from numba.core import types
        from pytensor.link.numba.dispatch.linalg._BLAS import get_blas_ptr  # noqa: F401 (_bind)
        from pytensor.link.numba.dispatch.linalg._LAPACK import (
            _LAPACK,
            int_ptr_to_val,
            val_to_int_ptr,
        )
    except ImportError:  # pragma: no cover - depends on PyTensor's internals
        return None

    f64 = types.float64
    return _LAPACK().numba_xpotrf(f64), _LAPACK().numba_xpotrs(f64), val_to_int_ptr, int_ptr_to_val


def _bind(kind: str, name: str, signature, unique: str):
    """A nopython caller of SciPy's ``cython_blas`` / ``cython_lapack`` function ``name``
    (``kind`` ``"blas"`` or ``"lapack"``) through its address, as PyTensor binds ``dpotrf``
    (the address looked up once per process, so that the caller can be cached); only after
    :func:`bindings` found PyTensor's internals."""
    import numba
    from numba.core import types
    from pytensor.link.numba.cache import _call_cached_ptr
    from pytensor.link.numba.dispatch.basic import numba_njit
    from pytensor.link.numba.dispatch.linalg._BLAS import get_blas_ptr
    from pytensor.link.numba.dispatch.linalg._LAPACK import get_lapack_ptr

    lookup = get_blas_ptr if kind == "blas" else get_lapack_ptr
    f64 = types.float64

    @numba_njit
    def pointer():
        with numba.objmode(ptr=types.intp):
            ptr = lookup(f64, name)
        return ptr

    fn_type = types.FunctionType(signature)

    @numba_njit
    def get():
        return _call_cached_ptr(
            get_ptr_func=pointer, func_type_ref=fn_type, unique_func_name_lit=unique
        )

    return get


#: Order of the diagonal blocks that LAPACK ``dtrtri`` inverts in :func:`trtri_kernel`; the
#: blocks are then joined pairwise by ``dtrmm`` (16 was the quickest of 16 / 32 / 64 at n = 100
#: to 500).
TRI_LEAF = 16


@functools.lru_cache(maxsize=1)
def trtri_kernel():
    r"""``trtri_lower(work) -> ok``: the inverse of the lower-triangular :math:`L` that the
    lower triangle of ``work`` (C-ordered, square) holds, written over that triangle (the
    upper one is not touched), as LAPACK ``dtrtri`` with ``'U'`` on the Fortran view
    (:math:`U = L^\top`) writes it; ``False`` where a diagonal entry of :math:`L` is zero
    (``None`` without :func:`bindings`).

    OpenBLAS's ``dtrtri`` runs these sizes at a fifth of its matrix-product rate (n = 300, one
    thread: 0.74-0.96 ms against 0.45 ms for ``dpotrf``, which does as many flops). Here
    :math:`U^{-1}` is built bottom-up from the inverses of its :data:`TRI_LEAF` diagonal
    blocks (``dtrtri``), each pair of adjacent inverted blocks joined by

    .. math::
       \begin{pmatrix} U_{11} & U_{12} \\ 0 & U_{22} \end{pmatrix}^{-1} =
       \begin{pmatrix} U_{11}^{-1} & -U_{11}^{-1} U_{12} U_{22}^{-1} \\
       0 & U_{22}^{-1} \end{pmatrix}

    (two ``dtrmm``): the same :math:`n^3/3` flops, mostly in ``dtrmm``."""
    lapack = bindings()
    if lapack is None:  # pragma: no cover - depends on PyTensor's internals
        return None
    from numba.core import types
    from pytensor.link.numba.dispatch.basic import numba_njit
    from pytensor.link.numba.dispatch.linalg._LAPACK import nb_f64p, nb_i32p

    _, _, val_to_int_ptr, int_ptr_to_val = lapack
    i32p, f64p = nb_i32p, nb_f64p
    get_trmm = _bind(
        "blas", "trmm",
        types.void(i32p, i32p, i32p, i32p, i32p, i32p, f64p, f64p, i32p, f64p, i32p),
        "bayes_gp.dtrmm",
    )  # fmt: skip
    get_trtri = _bind("lapack", "trtri", types.void(i32p, i32p, i32p, f64p, i32p, i32p),
                      "bayes_gp.dtrtri")  # fmt: skip
    leaf = TRI_LEAF

    @numba_njit
    def trtri_lower(work):
        n = work.shape[0]
        # the Fortran view of the C-ordered buffer: element (i, j) at flat offset i + j n
        flat = work.reshape(n * n)
        trmm, trtri = get_trmm(), get_trtri()
        UP = val_to_int_ptr(np.int32(ord("U")))
        NO = val_to_int_ptr(np.int32(ord("N")))
        LEFT = val_to_int_ptr(np.int32(ord("L")))
        RIGHT = val_to_int_ptr(np.int32(ord("R")))
        LD = val_to_int_ptr(np.int32(n))
        one = np.ones(1)
        minus_one = -one
        INFO = val_to_int_ptr(np.int32(0))
        for s in range(0, n, leaf):  # the diagonal blocks
            m = min(leaf, n - s)
            trtri(UP, NO, val_to_int_ptr(np.int32(m)), flat[s + s * n :].ctypes, LD, INFO)
            if int_ptr_to_val(INFO) != 0:
                return False
        size = leaf
        while size < n:  # join adjacent inverted blocks: U12 <- -U11^-1 U12 U22^-1
            for s in range(0, n - size, 2 * size):
                t = s + size
                M = val_to_int_ptr(np.int32(size))
                N2 = val_to_int_ptr(np.int32(min(size, n - t)))
                u12 = flat[s + t * n :].ctypes
                trmm(LEFT, UP, NO, NO, M, N2, minus_one.ctypes, flat[s + s * n :].ctypes, LD,
                     u12, LD)  # fmt: skip
                trmm(RIGHT, UP, NO, NO, M, N2, one.ctypes, flat[t + t * n :].ctypes, LD, u12,
                     LD)  # fmt: skip
            size *= 2
        return True

    return trtri_lower


@functools.lru_cache(maxsize=1)
def potri_kernel():
    r"""``potri_lower(work) -> ok``: LAPACK ``dpotri``'s result without ``dpotri`` (``None``
    without :func:`bindings`).

    ``work`` (C-ordered, square) holds a lower Cholesky factor :math:`L` in its lower triangle;
    :math:`(LL^\top)^{-1}` is written over that triangle (the upper one is not touched), as
    ``dpotri`` with ``'U'`` on the Fortran view writes it, and ``False`` is returned where a
    diagonal entry of :math:`L` is zero. ``dpotri`` is ``dtrtri`` (:math:`U^{-1}`, :math:`U =
    L^\top`) then ``dlauum`` (:math:`U^{-1}U^{-\top}`); here the ``dtrtri`` is
    :func:`trtri_kernel`'s. One thread: n = 100 69 -> 39 us, 200 393 -> 177 us, 300 1132 ->
    456 us, 500 3522 -> 1889 us against ``dpotri``; the results agree to rounding (relative
    2e-16)."""
    trtri_lower = trtri_kernel()
    if trtri_lower is None:  # pragma: no cover - depends on PyTensor's internals
        return None
    from numba.core import types
    from pytensor.link.numba.dispatch.basic import numba_njit
    from pytensor.link.numba.dispatch.linalg._LAPACK import nb_f64p, nb_i32p

    _, _, val_to_int_ptr, int_ptr_to_val = bindings()
    get_lauum = _bind("lapack", "lauum", types.void(nb_i32p, nb_i32p, nb_f64p, nb_i32p, nb_i32p),
                      "bayes_gp.dlauum")  # fmt: skip

    @numba_njit
    def potri_lower(work):
        n = work.shape[0]
        if n == 0:
            return True
        if not trtri_lower(work):
            return False
        INFO = val_to_int_ptr(np.int32(0))
        N = val_to_int_ptr(np.int32(n))
        get_lauum()(val_to_int_ptr(np.int32(ord("U"))), N, work.ctypes, N, INFO)
        return int_ptr_to_val(INFO) == 0

    return potri_lower


@functools.lru_cache(maxsize=1)
def factor_kernels():
    r"""``(cholesky_lower, cholesky_inverse)``: nopython functions on a C-ordered square buffer,
    in place, each returning whether it succeeded (``None`` without :func:`bindings`).

    ``cholesky_lower(work)`` writes the lower factor :math:`L` of the symmetric ``work`` (its
    upper triangle is read) over it (zeros above the diagonal) and returns ``(ok, sum_i log
    L_ii)``, ``ok`` ``False`` when ``work`` is not positive definite or a diagonal entry of
    :math:`L` is not finite (the sum is accumulated in the loop that clears the upper
    triangle, as GPLogp always did: its rounding is part of the log density's value);
    ``cholesky_inverse(work)`` writes :math:`(LL^\top)^{-1}`, both triangles, over the factor
    :math:`L` (:func:`potri_kernel`)."""
    lapack = bindings()
    if lapack is None:  # pragma: no cover - depends on PyTensor's internals
        return None
    from pytensor.link.numba.dispatch.basic import numba_njit

    potrf, _, val_to_int_ptr, int_ptr_to_val = lapack
    potri_lower = potri_kernel()

    @numba_njit
    def cholesky_lower(work):
        # A C-ordered buffer read by LAPACK as F-ordered is C^T = C; 'L' factorises its lower
        # triangle (the C-ordered upper one) as L L^T and leaves L there, L^T in the C-ordered
        # view, moved below into the lower triangle: OpenBLAS's dpotrf is quicker with 'L'
        # than with 'U' (one thread, with the move: n = 100 69 -> 60 us, 200 348 -> 268, 300
        # 688 -> 486)
        n = work.shape[0]
        N = val_to_int_ptr(np.int32(n))
        INFO = val_to_int_ptr(np.int32(0))
        potrf(val_to_int_ptr(np.int32(ord("L"))), N, work.ctypes, N, INFO)
        ok = int_ptr_to_val(INFO) == 0
        half_logdet = 0.0  # sum log L_ii, in the loop that moves L into the lower triangle
        for i in range(n):
            d = work[i, i]
            if not np.isfinite(d):
                ok = False
            for j in range(i):
                work[i, j] = work[j, i]
                work[j, i] = 0.0
            if ok:
                half_logdet += np.log(d)
        return ok, half_logdet

    @numba_njit
    def cholesky_inverse(work):
        # the F-ordered view is U = L^T: the inverse is left in its upper triangle, the
        # lower triangle of the C-ordered view; mirror it
        n = work.shape[0]
        if not potri_lower(work):
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

    _, potrs, val_to_int_ptr, _ = lapack
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
            for i in range(n):  # not alpha[:] = r: see the module docstring
                alpha[i] = r[i]
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
