"""The nopython inverse from a Cholesky factor (``potri_kernel``: ``dtrtri`` on diagonal blocks
joined by ``dtrmm``, then ``dlauum``) against LAPACK ``dpotri`` and ``np.linalg.inv``."""

from __future__ import annotations

import numba
import numpy as np
import pytest
from scipy.linalg import lapack

from bayes_gp.solvers._numba_lapack import TRI_LEAF, factor_kernels, potri_kernel

potri_lower = potri_kernel()
_, cholesky_inverse = factor_kernels()


@numba.njit
def _potri(work):
    return potri_lower(work)


@numba.njit
def _inverse(work):
    return cholesky_inverse(work)


def _spd(n, seed=0):
    A = np.random.default_rng(seed).standard_normal((n, n))
    return A @ A.T / n + np.eye(n)


# sizes below, at and above a leaf, an odd number of leaves, a partial last block at each level
@pytest.mark.parametrize("n", [1, 2, TRI_LEAF - 1, TRI_LEAF, TRI_LEAF + 1, 3 * TRI_LEAF + 5, 100, 257])
def test_equals_dpotri_and_leaves_the_upper_triangle(n):
    B = _spd(n, seed=n)
    L = np.linalg.cholesky(B)
    work = L.copy()
    upper = np.triu_indices(n, 1)
    work[upper] = 7.0  # not read, not written
    assert _potri(work)
    assert (work[upper] == 7.0).all()
    ref, info = lapack.dpotri(L, lower=1)  # LAPACK's own, on the same factor
    assert info == 0
    lower = np.tril_indices(n)
    np.testing.assert_allclose(work[lower], ref[lower], rtol=0, atol=1e-14 * np.abs(ref).max())
    np.testing.assert_allclose(work[lower], np.linalg.inv(B)[lower], rtol=1e-12, atol=1e-13)


def test_cholesky_inverse_gives_both_triangles():
    B = _spd(70)
    work = np.linalg.cholesky(B)
    assert _inverse(work)
    np.testing.assert_array_equal(work, work.T)
    np.testing.assert_allclose(work @ B, np.eye(70), atol=1e-12)


@pytest.mark.parametrize("at", [0, TRI_LEAF - 1, TRI_LEAF, 45])
def test_a_zero_on_the_diagonal_is_refused(at):
    L = np.linalg.cholesky(_spd(50))
    L[at, at] = 0.0
    assert not _potri(L.copy())
