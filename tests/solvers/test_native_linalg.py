"""``lower_inverse``: the blocked triangular inverse called from NumPy code (a ``cfunc``)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import lapack

from bayes_gp.solvers._native_linalg import lower_inverse


@pytest.mark.parametrize("n", [1, 5, 16, 45, 130])
def test_lower_inverse_equals_dtrtri_and_leaves_zeros_above(n):
    A = np.random.default_rng(n).standard_normal((n, n))
    L = np.linalg.cholesky(A @ A.T / n + np.eye(n))
    before = L.copy()
    Linv = lower_inverse(L)
    np.testing.assert_array_equal(L, before)  # the argument is not overwritten
    ref = lapack.dtrtri(L, lower=1)[0]
    np.testing.assert_allclose(Linv, ref, rtol=0, atol=1e-14 * np.abs(ref).max())
    assert (np.triu(Linv, 1) == 0).all()
    np.testing.assert_allclose(Linv @ L, np.eye(n), atol=1e-13)


def test_lower_inverse_refuses_a_singular_factor_and_a_non_square_one():
    L = np.tril(np.ones((20, 20)))
    L[7, 7] = 0.0
    with pytest.raises(np.linalg.LinAlgError, match="zero on its diagonal"):
        lower_inverse(L)
    with pytest.raises(ValueError, match="square"):
        lower_inverse(np.ones((3, 4)))
