"""Eigenfunction analysis of kernels (R&W §4.3, seed 003: eqs. 4.36–4.44).

The analytic eigenpairs of the SE kernel under a Gaussian measure (4.39)–(4.41) are checked
against the eigen-equation (4.36) and for orthonormality by Gauss–Hermite quadrature, and their
Mercer sum (4.37) against the kernel; the Nyström estimates (4.42)–(4.44) from samples of growing
size against the analytic values; and the slower eigenvalue decay of a rougher (Matérn) kernel.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import eval_hermite

import bayes_gp.kernels as bk
from bayes_gp.eigen import (
    NystromEigen,
    mercer_reconstruction,
    nystrom_eigen,
    se_eigenfunctions,
    se_eigenvalues,
    se_parameters,
)

# (a, b): R&W figure 4.7 (a = 1, b = 3), and sigma = ell = 1
PARAMS = [(1.0, 3.0), se_parameters(1.0, 1.0), se_parameters(0.5, 1.5)]


def gauss_measure_quadrature(a, n=160):
    """Nodes and weights of Gauss–Hermite quadrature for p(x) = N(0, 1/(4a))."""
    t, w = np.polynomial.hermite_e.hermegauss(n)  # weight exp(-t^2/2)
    return t / math.sqrt(4.0 * a), w / math.sqrt(2.0 * math.pi)


def se(b):
    return lambda A, B: np.exp(-b * (A[:, None, 0] - B[None, :, 0]) ** 2)


# --- analytic eigenpairs (4.39)-(4.41) ---------------------------------------------------------
def test_se_parameters_and_eigenvalues_formula():
    a, b = se_parameters(0.5, 2.0)
    assert (a, b) == (pytest.approx(1.0), pytest.approx(1 / 8))
    a, b = 1.0, 3.0
    c = math.sqrt(a**2 + 2 * a * b)
    A = a + b + c
    B = b / A
    lam = se_eigenvalues(np.arange(5), a, b)
    np.testing.assert_allclose(lam, [math.sqrt(2 * a / A) * B**k for k in range(5)], rtol=1e-14)
    assert se_eigenvalues(2, a, b) == pytest.approx(lam[2])
    assert np.all(np.diff(lam) < 0)
    # the eigenvalues sum to the trace of the kernel under p: int k(x, x) p(x) dx = 1
    assert se_eigenvalues(np.arange(200), a, b).sum() == pytest.approx(1.0, rel=1e-12)


def test_unnormalised_eigenfunctions_are_eq_4_40():
    a, b = 1.0, 3.0
    c = math.sqrt(a**2 + 2 * a * b)
    x = np.linspace(-2, 2, 9)
    for k in range(6):
        expected = np.exp(-(c - a) * x**2) * eval_hermite(k, math.sqrt(2 * c) * x)
        np.testing.assert_allclose(
            se_eigenfunctions(x, k, a, b, normalized=False), expected, rtol=1e-13
        )
    # H_2(u) = 4u^2 - 2 written out
    u = math.sqrt(2 * c) * x
    np.testing.assert_allclose(
        se_eigenfunctions(x, 2, a, b, normalized=False),
        np.exp(-(c - a) * x**2) * (4 * u**2 - 2),
        rtol=1e-13,
    )
    # normalised = unnormalised / sqrt(a/c) 2^k k! (the norm under p)
    ks = np.arange(15)
    norm = np.sqrt(np.sqrt(a / c) * 2.0**ks * np.array([math.factorial(k) for k in ks]))
    np.testing.assert_allclose(
        se_eigenfunctions(x, ks, a, b),
        se_eigenfunctions(x, ks, a, b, normalized=False) / norm,
        rtol=1e-10,
        atol=1e-14,
    )
    assert se_eigenfunctions(x, ks, a, b).shape == (9, 15)
    assert se_eigenfunctions(x, 3, a, b).shape == (9,)


@pytest.mark.parametrize(("a", "b"), PARAMS)
def test_eigenfunctions_are_orthonormal_under_p(a, b):
    x, w = gauss_measure_quadrature(a)
    Phi = se_eigenfunctions(x, np.arange(30), a, b)
    gram = (Phi * w[:, None]).T @ Phi  # int phi_j phi_k p dx
    np.testing.assert_allclose(gram, np.eye(30), atol=1e-10)


@pytest.mark.parametrize(("a", "b"), PARAMS)
def test_eigen_equation_4_36(a, b):
    """int k(x, x') phi_k(x) p(x) dx = lambda_k phi_k(x'), by quadrature."""
    x, w = gauss_measure_quadrature(a)
    xp = np.linspace(-1.5, 1.5, 7) / math.sqrt(4 * a)
    ks = np.arange(8)
    lhs = se(b)(xp[:, None], x[:, None]) @ (w[:, None] * se_eigenfunctions(x, ks, a, b))
    rhs = se_eigenvalues(ks, a, b)[None, :] * se_eigenfunctions(xp, ks, a, b)
    np.testing.assert_allclose(lhs, rhs, atol=1e-12)


@pytest.mark.parametrize(("a", "b"), PARAMS)
def test_mercer_sum_of_30_terms_reconstructs_se(a, b):
    sd = 1 / math.sqrt(4 * a)
    x = np.linspace(-2 * sd, 2 * sd, 41)  # within two standard deviations of p
    ks = np.arange(30)
    Phi = se_eigenfunctions(x, ks, a, b)
    K = mercer_reconstruction(se_eigenvalues(ks, a, b), Phi, Phi)
    np.testing.assert_allclose(K, se(b)(x[:, None], x[:, None]), atol=1e-8)
    # truncation matters: five terms are much further off
    K5 = mercer_reconstruction(se_eigenvalues(ks[:5], a, b), Phi[:, :5], Phi[:, :5])
    err5 = np.max(np.abs(K5 - se(b)(x[:, None], x[:, None])))
    assert err5 > 1e3 * np.max(np.abs(K - se(b)(x[:, None], x[:, None])))


# --- Nyström (4.42)-(4.44) ---------------------------------------------------------------------
def nystrom_error(n, reps, n_eig=4, sigma=1.0, ell=1.0):
    """RMS relative error of the first ``n_eig`` Nyström eigenvalue estimates (4.43) from iid
    samples of size ``n``, averaged over ``reps`` independent samples."""
    a, b = se_parameters(sigma, ell)
    exact = se_eigenvalues(np.arange(n_eig), a, b)
    errs = []
    for r in range(reps):
        X = np.random.default_rng([2026, n, r]).normal(0.0, sigma, size=n)
        est = nystrom_eigen(se(b), X, n_eig).eigenvalues
        errs.append(np.sqrt(np.mean((est / exact - 1.0) ** 2)))
    return float(np.mean(errs))


def test_nystrom_eigenvalues_converge_to_analytic():
    # The error of one sample is noisy (its standard deviation is about half its mean), so it is
    # averaged over independent samples: more of them where they are cheap. Expected errors
    # (from 200+ samples each): 0.103, 0.051, 0.025 -- halving as n quadruples, O(n^-1/2).
    reps = {100: 24, 400: 24, 1600: 6}
    errors = {n: nystrom_error(n, r) for n, r in reps.items()}
    print("Nyström RMS relative error of the first 4 SE eigenvalues:", errors)
    e = list(errors.values())
    assert e[0] > e[1] > e[2]
    assert e[2] < 0.05


def test_nystrom_eigenfunctions_approach_analytic():
    a, b = se_parameters(1.0, 1.0)
    X = np.random.default_rng(5).normal(size=1600)
    ny = nystrom_eigen(se(b), X, 3)
    x, w = gauss_measure_quadrature(a, 80)
    exact = se_eigenfunctions(x, np.arange(3), a, b)
    approx = ny.eigenfunctions(x)
    for i in range(3):
        sign = np.sign(np.sum(w * exact[:, i] * approx[:, i]))
        err = math.sqrt(np.sum(w * (sign * approx[:, i] - exact[:, i]) ** 2))  # L2(p) distance
        assert err < 0.15, (i, err)


def test_nystrom_consistency_at_the_sample():
    X = np.random.default_rng(1).uniform(-2, 2, size=(60, 2))
    k = bk.Matern32(2, ls=0.8)
    ny = nystrom_eigen(k, X, 60)
    assert isinstance(ny, NystromEigen) and ny.n == 60
    np.testing.assert_allclose(ny.eigenvalues, ny.matrix_eigenvalues / 60)
    assert np.all(np.diff(ny.eigenvalues) <= 0)
    # (4.44) at x' = x_l reproduces sqrt(n) u_i, because K u_i = lambda_i^mat u_i (4.43)
    top = nystrom_eigen(k, X, 5)
    np.testing.assert_allclose(top.eigenfunctions(X), top.eigenfunctions_at_sample(), atol=1e-9)
    np.testing.assert_allclose(
        np.mean(top.eigenfunctions_at_sample() ** 2, axis=0), 1.0, rtol=1e-12
    )
    # with all n eigenpairs the Mercer sum of the Nyström estimates is the Gram matrix
    Phi = ny.eigenfunctions_at_sample()
    K = ny.kernel_fn(X, X)
    np.testing.assert_allclose(mercer_reconstruction(ny.eigenvalues, Phi, Phi), K, atol=1e-10)


def test_nystrom_accepts_bayes_gp_kernels():
    """A bayes_gp kernel (evaluated with PyTensor) gives the same spectrum as a NumPy function;
    large n uses Lanczos iteration, small n a dense eigensolver: both agree."""
    X = np.random.default_rng(4).normal(size=500)
    _, b = se_parameters(1.0, 1.0)
    via_pt = nystrom_eigen(bk.ExpQuad(1, ls=1.0), X, 6)
    via_np = nystrom_eigen(se(b), X, 6)
    np.testing.assert_allclose(via_pt.eigenvalues, via_np.eigenvalues, rtol=1e-10)
    dense = nystrom_eigen(se(b), X, 100)  # n_eig > n / 8: dense eigh
    np.testing.assert_allclose(dense.eigenvalues[:6], via_np.eigenvalues, rtol=1e-10)
    np.testing.assert_allclose(
        np.abs(dense.eigenvectors[:, :6]), np.abs(via_np.eigenvectors), atol=1e-7
    )


def test_matern_spectrum_decays_slower_than_se():
    """R&W §4.3.1: rougher processes have more power at high frequencies, so slower eigenvalue
    decay. Nyström spectra normalised by their first eigenvalue, same sample, same length-scale."""
    X = np.random.default_rng(3).normal(size=400)
    se_spec = nystrom_eigen(bk.ExpQuad(1, ls=1.0), X, 15).eigenvalues
    m32_spec = nystrom_eigen(bk.Matern32(1, ls=1.0), X, 15).eigenvalues
    m12_spec = nystrom_eigen(bk.Matern12(1, ls=1.0), X, 15).eigenvalues
    r_se, r_32, r_12 = se_spec / se_spec[0], m32_spec / m32_spec[0], m12_spec / m12_spec[0]
    print(
        "lambda_i/lambda_0 at i = 5, 10, 14:",
        r_se[[5, 10, 14]],
        r_32[[5, 10, 14]],
        r_12[[5, 10, 14]],
    )
    assert np.all(r_32[4:] > r_se[4:])
    assert np.all(r_12[4:] > r_32[4:])
    assert r_32[14] > 100 * r_se[14]
    # SE: geometric decay with ratio B (4.39); Matérn: polynomial
    a, b = se_parameters(1.0, 1.0)
    B = b / (a + b + math.sqrt(a * a + 2 * a * b))
    assert se_spec[4] / se_spec[3] == pytest.approx(B, rel=0.15)


# --- validation --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: se_eigenvalues(-1, 1.0, 1.0), "`k`"),
        (lambda: se_eigenvalues(1.5, 1.0, 1.0), "`k`"),
        (lambda: se_eigenvalues(1, 0.0, 1.0), "`a`"),
        (lambda: se_eigenvalues(1, 1.0, -2.0), "`b`"),
        (lambda: se_eigenfunctions(np.zeros((2, 2)), 1, 1.0, 1.0), "`x`"),
        (lambda: se_eigenfunctions(np.zeros(2), [[1]], 1.0, 1.0), "`k`"),
        (lambda: se_parameters(0.0, 1.0), "`sigma`"),
        (lambda: se_parameters(1.0, float("inf")), "`ell`"),
        (lambda: nystrom_eigen(se(1.0), np.zeros(5), 0), "`n_eig`"),
        (lambda: nystrom_eigen(se(1.0), np.zeros(5), 6), "`n_eig`"),
        (lambda: nystrom_eigen("se", np.zeros(5), 2), "`kernel_fn`"),
        (lambda: nystrom_eigen(se(1.0), np.array([0.0, np.nan]), 1), "`X`"),
        (lambda: mercer_reconstruction([1.0, 2.0], np.ones((3, 2)), np.ones((3, 3))), "3 columns"),
    ],
)
def test_invalid_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()
