"""Band Cholesky, solves and the Takahashi selected inverse against dense NumPy/SciPy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import linalg as sla

from bayes_gp.banded import (
    band_cholesky,
    band_logdet,
    band_lower_solve,
    band_selected_inverse,
    band_solve,
    band_to_dense,
    dense_to_band,
)


def _band_spd(n: int, b: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    C = band_to_dense(dense_to_band(A @ A.T, b))  # symmetric, bandwidth b
    return C + (np.abs(C).sum(axis=1).max() + 1.0) * np.eye(n)  # diagonally dominant: SPD


@pytest.mark.parametrize("n,b", [(1, 0), (6, 0), (6, 1), (9, 8), (9, 20), (40, 3), (250, 17)])
def test_factor_solves_and_selected_inverse_match_dense(n, b):
    C = _band_spd(n, b, seed=n + b)
    bw = min(b, n - 1)
    ab = dense_to_band(C, bw)
    np.testing.assert_array_equal(band_to_dense(ab), C)
    L = band_cholesky(ab)
    Ld = np.linalg.cholesky(C)
    np.testing.assert_allclose(band_to_dense(L), np.tril(Ld) + np.tril(Ld, -1).T, atol=1e-12)
    np.testing.assert_allclose(band_logdet(L), np.linalg.slogdet(C)[1], rtol=1e-13, atol=1e-12)
    rhs = np.random.default_rng(1).standard_normal((n, 3))
    np.testing.assert_allclose(band_solve(L, rhs), np.linalg.solve(C, rhs), rtol=1e-10)
    np.testing.assert_allclose(band_solve(L, rhs[:, 0]), np.linalg.solve(C, rhs[:, 0]), rtol=1e-10)
    np.testing.assert_allclose(
        band_lower_solve(L, rhs), sla.solve_triangular(Ld, rhs, lower=True), rtol=1e-10
    )
    Z = band_selected_inverse(L)
    Zd = np.linalg.inv(C)
    # every entry inside the band, and nothing else is claimed
    np.testing.assert_allclose(band_to_dense(Z), band_to_dense(dense_to_band(Zd, bw)), atol=1e-14)


def test_selected_inverse_is_not_the_band_of_a_band_inverse():
    # the inverse of a band matrix is dense: the sweep must use the exact recurrence, not
    # invert the band alone (which would give a different answer)
    n = 30
    C = 2.0 * np.eye(n) - 0.99 * (np.eye(n, k=1) + np.eye(n, k=-1))  # tridiagonal, SPD
    Z = band_selected_inverse(band_cholesky(dense_to_band(C, 1)))
    Zd = np.linalg.inv(C)
    assert np.abs(np.diagonal(Zd, -10)).min() > 0.1  # the inverse is dense
    np.testing.assert_allclose(Z[0], np.diag(Zd), rtol=1e-12)
    np.testing.assert_allclose(Z[1, :-1], np.diagonal(Zd, -1), rtol=1e-12)


def test_indefinite_matrix_gives_none():
    C = np.diag([1.0, -1.0, 2.0])
    assert band_cholesky(dense_to_band(C, 0)) is None
    C = np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.5], [0.0, 0.5, 1.0]])
    assert band_cholesky(dense_to_band(C, 1)) is None
