"""``lower_inverse``: the blocked triangular inverse called from NumPy code (a ``cfunc``), and
``loo_terms``: the exact leave-one-out terms of a block of draws in one compiled call."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import lapack

from bayes_gp.predictive import factorize, loo_log_density
from bayes_gp.solvers._native_linalg import loo_terms, lower_inverse


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


@pytest.mark.parametrize("n", [1, 7, 40, 210])  # 210: more than one level of trtri's blocks
def test_loo_terms_equal_the_numpy_pass_and_leave_factor_and_weights(n):
    """Each draw's terms as loo_log_density gives them from factorize (R&W 5.10-5.12), its L
    written over C and alpha = C^-1 t over t."""
    rng = np.random.default_rng(n)
    x = rng.uniform(0, 5, n)
    ls = [0.4, 1.0, 2.5]
    C = np.stack([np.exp(-0.5 * (x[:, None] - x) ** 2 / v**2) + 0.05 * np.eye(n) for v in ls])
    t = rng.standard_normal((3, n))
    refs = [factorize(C[j], t[j]) for j in range(3)]
    L, alpha = C.copy(), t.copy()
    out, ok = loo_terms(L, alpha)
    assert ok.all()
    for j, fac in enumerate(refs):
        ref = loo_log_density(fac)
        np.testing.assert_allclose(out[j], ref, rtol=1e-9, atol=1e-11 * np.abs(ref).max())
        np.testing.assert_allclose(L[j], fac.L, rtol=0, atol=1e-13)
        assert (np.triu(L[j], 1) == 0).all()
        np.testing.assert_allclose(alpha[j], fac.alpha, rtol=1e-10, atol=1e-12)


def test_loo_terms_mark_the_draws_they_cannot_answer():
    """A matrix that is not positive definite and one with a NaN: ok is False for those draws
    only (their callers factorise them again with the jitter retry)."""
    C = np.stack([np.ones((3, 3)), np.eye(3), 2.0 * np.eye(3)])
    C[1, 0, 0] = np.nan
    out, ok = loo_terms(C, np.ones((3, 3)))
    assert ok.tolist() == [False, False, True]
    # C = 2I: var_i = 1/(C^-1)_ii = 2 (the other points say nothing), resid = t_i = 1
    np.testing.assert_allclose(out[2], -0.5 * np.log(2 * np.pi * 2.0) - 0.25)


def test_loo_terms_refuse_arrays_they_cannot_write_in_place():
    C = np.stack([np.eye(3)] * 2)
    with pytest.raises(ValueError, match="writable C-ordered float64"):
        loo_terms(np.asfortranarray(C), np.ones((2, 3)))
    with pytest.raises(ValueError, match="alpha must be"):
        loo_terms(C, np.ones((2, 3), dtype=np.float32))
    with pytest.raises(ValueError, match="C must be"):
        loo_terms(C[:1], np.ones((2, 3)))
