r"""Symmetric positive-definite band matrices: Cholesky factor, solves and the selected inverse.

A symmetric :math:`n \times n` matrix :math:`C` with bandwidth :math:`b` (:math:`C_{ij} = 0` for
:math:`|i - j| > b`) is stored in LAPACK's lower band format, ``ab[d, i] = C[i + d, i]`` for
:math:`d = 0..b`. Its Cholesky factor :math:`C = LL^\top` has the same bandwidth (no fill-in
outside the band), computed by LAPACK ``pbtrf`` in :math:`O(nb^2)` flops instead of the dense
:math:`n^3/3`; solves (``pbtrs``, ``tbtrs``) cost :math:`O(nb)`.

The gradient of a Gaussian log density needs :math:`\mathrm{tr}(C^{-1}\,\partial C)` (R&W eq. 5.9),
and :math:`\partial C` has the band structure of :math:`C`, so only the entries of
:math:`Z = C^{-1}` inside the band are needed: the *selected inverse*. From
:math:`L^\top Z = L^{-1}`, whose right-hand side is lower triangular with diagonal
:math:`1/L_{ii}`, the entries :math:`i \le j` satisfy (Takahashi, Fagan & Chen 1973)

.. math::
   Z_{ij} = \frac{1}{L_{ii}}\left(\frac{\delta_{ij}}{L_{ii}}
            - \sum_{k=i+1}^{\min(i+b,\,n-1)} L_{ki}\, Z_{kj}\right),

and every :math:`Z_{kj}` on the right lies inside the band and in a later row, so a sweep from
:math:`i = n - 1` down to 0 computes the band of :math:`Z` in :math:`O(nb^2)` flops without ever
forming the dense inverse.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.linalg import lapack

__all__ = [
    "band_cholesky",
    "band_solve",
    "band_lower_solve",
    "band_selected_inverse",
    "band_logdet",
    "dense_to_band",
    "band_to_dense",
]


def dense_to_band(C: np.ndarray, b: int) -> np.ndarray:
    """Lower band storage ``ab[d, i] = C[i + d, i]``, ``d = 0..b`` (entries beyond ``b`` dropped)."""
    n = C.shape[0]
    ab = np.zeros((b + 1, n), order="F")
    for d in range(min(b, n - 1) + 1):
        ab[d, : n - d] = np.diagonal(C, -d)
    return ab


def band_to_dense(ab: np.ndarray) -> np.ndarray:
    """The symmetric dense matrix of lower band storage ``ab``."""
    n = ab.shape[1]
    C = np.zeros((n, n))
    for d in range(min(ab.shape[0] - 1, n - 1) + 1):
        idx = np.arange(n - d)
        C[idx + d, idx] = ab[d, : n - d]
        C[idx, idx + d] = ab[d, : n - d]
    return C


def band_cholesky(ab: np.ndarray) -> np.ndarray | None:
    """Lower Cholesky factor of the band matrix ``ab`` in the same storage (LAPACK ``pbtrf``);
    ``None`` when the matrix is not numerically positive definite."""
    L, info = lapack.dpbtrf(ab, lower=1)
    if info != 0 or not np.all(np.isfinite(L[0])):
        return None
    return L


def band_logdet(L: np.ndarray) -> float:
    r""":math:`\log\det C = 2\sum_i \log L_{ii}` from the band factor."""
    return 2.0 * float(np.sum(np.log(L[0])))


def band_solve(L: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """:math:`C^{-1}` ``rhs`` from the band Cholesky factor (LAPACK ``pbtrs``); ``rhs`` (n,) or
    (n, k)."""
    rhs = np.asarray(rhs, dtype=float)
    x, info = lapack.dpbtrs(L, rhs.reshape(rhs.shape[0], -1), lower=1)
    if info != 0:  # pragma: no cover - only for malformed arguments
        raise ValueError(f"LAPACK dpbtrs failed (info={info})")
    return x.reshape(rhs.shape)


def band_lower_solve(L: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """:math:`L^{-1}` ``rhs`` for the band Cholesky factor (LAPACK ``tbtrs``); ``rhs`` (n,) or
    (n, k)."""
    rhs = np.asarray(rhs, dtype=float)
    x, info = lapack.dtbtrs(L, rhs.reshape(rhs.shape[0], -1), uplo="L", trans="N", diag="N")
    if info != 0:  # pragma: no cover - a zero pivot cannot come out of pbtrf
        raise ValueError(f"LAPACK dtbtrs failed (info={info})")
    return x.reshape(rhs.shape)


@functools.cache
def _selinv_kernel():
    """The numba-compiled Takahashi sweep (compiled on first use: importing numba takes
    seconds that ``import bayes_gp`` should not pay)."""
    import numba

    @numba.njit(nogil=True, cache=False)
    def selinv(Lt):  # Lt[i, d] = L[i + d, i]; rows contiguous
        n, b1 = Lt.shape
        b = b1 - 1
        Zt = np.zeros((n, b1))  # Zt[k, d] = Z[k + d, k]: row k of Z to the right of the diagonal
        Ut = np.zeros((n, b1))  # Ut[k, d] = Z[k - d, k]: row k of Z to the left (the same band)
        s = np.zeros(b1)
        for i in range(n - 1, -1, -1):
            m = min(b, n - 1 - i)
            lii = Lt[i, 0]
            s[: m + 1] = 0.0
            # s[d2] = sum_k L[k, i] Z[k, i + d2] over k = i + d1, row by row of Z (contiguous)
            for d1 in range(1, m + 1):
                lk = Lt[i, d1]
                k = i + d1
                for d2 in range(1, d1):  # j = i + d2 < k: Z[k, j] = Ut[k, d1 - d2]
                    s[d2] += lk * Ut[k, d1 - d2]
                for d2 in range(d1, m + 1):  # j >= k: Z[k, j] = Zt[k, d2 - d1]
                    s[d2] += lk * Zt[k, d2 - d1]
            acc = 0.0
            for d2 in range(1, m + 1):
                z = -s[d2] / lii
                Zt[i, d2] = z
                Ut[i + d2, d2] = z
                acc += Lt[i, d2] * z
            Zt[i, 0] = (1.0 / lii - acc) / lii
            Ut[i, 0] = Zt[i, 0]
        return Zt

    return selinv


def band_selected_inverse(L: np.ndarray) -> np.ndarray:
    r"""The band of :math:`Z = C^{-1}` (same storage as ``L``) from the band Cholesky factor,
    by the Takahashi recurrence of the module docstring, :math:`O(nb^2)`."""
    Lt = np.ascontiguousarray(np.asarray(L, dtype=float).T)
    return np.asfortranarray(_selinv_kernel()(Lt).T)
