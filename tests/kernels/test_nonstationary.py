"""Reference values and the book's behaviour of the non-stationary kernels of R&W §4.2.3 (seed 003):
neural network (4.29), Gaussian basis functions (4.30), Gibbs (4.32), Paciorek-Schervish
(4.33)-(4.34), O'Hagan's varying weights and the Wiener process."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import integrate
from scipy.special import gamma as gamma_fn
from scipy.special import kv

import bayes_gp
import bayes_gp.kernels as bk
from tests.helpers import ATOL, PY_MODE, RTOL, assert_matches, evaluate


# --- NumPy references, transcribed from the equations ------------------------------------------
def ref_nn(X, Xs, Sigma):
    """R&W (4.29): 2/pi asin(2 xt^T S xt' / sqrt((1 + 2 xt^T S xt)(1 + 2 xt'^T S xt'))),
    xt = (1, x)."""
    S = np.asarray(Sigma, float)
    S = np.diag(np.broadcast_to(S, X.shape[1] + 1)) if S.ndim < 2 else S
    K = np.empty((len(X), len(Xs)))
    for i, x in enumerate(X):
        xt = np.r_[1.0, x]
        for j, y in enumerate(Xs):
            yt = np.r_[1.0, y]
            z = 2 * xt @ S @ yt / np.sqrt((1 + 2 * xt @ S @ xt) * (1 + 2 * yt @ S @ yt))
            K[i, j] = 2 / np.pi * np.arcsin(z)
    return K


def ref_gaussian_basis(X, Xs, sigma_g, sigma_u):
    """R&W (4.30): (s_e/s_u)^d exp(-x^T x/2 s_m^2) exp(-|x - x'|^2/2 s_s^2) exp(-x'^T x'/2 s_m^2),
    1/s_e^2 = 2/s_g^2 + 1/s_u^2, s_s^2 = 2 s_g^2 + s_g^4/s_u^2, s_m^2 = 2 s_u^2 + s_g^2."""
    d = X.shape[1]
    se = np.sqrt(1 / (2 / sigma_g**2 + 1 / sigma_u**2))
    ss2 = 2 * sigma_g**2 + sigma_g**4 / sigma_u**2
    sm2 = 2 * sigma_u**2 + sigma_g**2
    K = np.empty((len(X), len(Xs)))
    for i, x in enumerate(X):
        for j, y in enumerate(Xs):
            K[i, j] = (
                (se / sigma_u) ** d
                * np.exp(-x @ x / (2 * sm2))
                * np.exp(-np.sum((x - y) ** 2) / (2 * ss2))
                * np.exp(-y @ y / (2 * sm2))
            )
    return K


def gaussian_basis_integral_1d(x, y, sigma_g, sigma_u):
    """First line of R&W (4.30) for d = 1, by quadrature:
    (2 pi s_u^2)^{-1/2} int exp(-|x-u|^2/2s_g^2 - |x'-u|^2/2s_g^2 - u^2/2s_u^2) du."""

    def f(u):
        return np.exp(
            -((x - u) ** 2) / (2 * sigma_g**2)
            - (y - u) ** 2 / (2 * sigma_g**2)
            - u**2 / (2 * sigma_u**2)
        )

    val, _ = integrate.quad(f, -np.inf, np.inf, epsabs=0, epsrel=1e-13, limit=200)
    return val / np.sqrt(2 * np.pi * sigma_u**2)


def ref_gibbs(X, Xs, ell):
    """R&W (4.32): prod_d (2 l_d(x) l_d(x') / (l_d^2(x) + l_d^2(x')))^{1/2}
    * exp(-sum_d (x_d - x'_d)^2 / (l_d^2(x) + l_d^2(x')))."""
    K = np.empty((len(X), len(Xs)))
    for i, x in enumerate(X):
        for j, y in enumerate(Xs):
            lx, ly = ell(x), ell(y)
            s2 = lx**2 + ly**2
            K[i, j] = np.prod(np.sqrt(2 * lx * ly / s2)) * np.exp(-np.sum((x - y) ** 2 / s2))
    return K


def ref_paciorek(X, Xs, Sigma, k_S):
    """R&W (4.33) Q_ij = (x_i - x_j)^T ((S_i + S_j)/2)^{-1} (x_i - x_j) and (4.34)
    k_NS = 2^{D/2} |S_i|^{1/4} |S_j|^{1/4} |S_i + S_j|^{-1/2} k_S(sqrt(Q_ij))."""
    D = X.shape[1]
    K = np.empty((len(X), len(Xs)))
    for i, x in enumerate(X):
        for j, y in enumerate(Xs):
            Si, Sj = Sigma(x), Sigma(y)
            Q = (x - y) @ np.linalg.inv((Si + Sj) / 2) @ (x - y)
            K[i, j] = (
                2 ** (D / 2)
                * np.linalg.det(Si) ** 0.25
                * np.linalg.det(Sj) ** 0.25
                * np.linalg.det(Si + Sj) ** -0.5
                * k_S(np.sqrt(Q))
            )
    return K


def ref_ohagan(X, Xs, phi, W0, k_w):
    """R&W §4.2.3: k_f(x, x') = phi(x)^T W0 phi(x') k_w(x, x')."""
    W = np.asarray(W0, float)
    P, Ps = phi(X), phi(Xs)
    W = np.diag(np.broadcast_to(W, P.shape[1])) if W.ndim < 2 else W
    return (P @ W @ Ps.T) * k_w(X, Xs)


def ref_wiener(X, Xs):  # R&W §4.2.3: k(x, x') = min(x, x')
    return np.minimum.outer(X[:, 0], Xs[:, 0])


# isotropic k_S(r) with unit length-scale (R&W (4.9), (4.17), §4.2.1, (4.19), (4.18), (4.14))
def k_matern(r, nu):
    z = np.sqrt(2 * nu) * np.asarray(r, float)
    out = np.ones_like(z)
    pos = z > 0
    out[pos] = 2 ** (1 - nu) / gamma_fn(nu) * z[pos] ** nu * kv(nu, z[pos])
    return out


K_S = {
    "ExpQuad": (lambda: bk.ExpQuad(2, ls=1.0), lambda r: np.exp(-(r**2) / 2)),
    "Matern52": (
        lambda: bk.Matern52(2, ls=1.0),
        lambda r: (1 + np.sqrt(5) * r + 5 * r**2 / 3) * np.exp(-np.sqrt(5) * r),
    ),
    "Matern32": (
        lambda: bk.Matern32(2, ls=1.0),
        lambda r: (1 + np.sqrt(3) * r) * np.exp(-np.sqrt(3) * r),
    ),
    "Exponential": (lambda: bk.Exponential(1, ls=1.0), lambda r: np.exp(-r)),
    "Matern_nu0.8": (lambda: bk.Matern(2, nu=0.8, ls=1.0), partial(k_matern, nu=0.8)),
    "RatQuad": (lambda: bk.RatQuad(2, alpha=1.7, ls=1.0), lambda r: (1 + r**2 / 3.4) ** -1.7),
    "GammaExponential": (
        lambda: bk.GammaExponential(2, gamma=1.3, ls=1.0),
        lambda r: np.exp(-(r**1.3)),
    ),
}


def make_inputs(D: int, seed: int, n: int = 7, m: int = 5, scale: float = 1.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(scale=scale, size=(n, D))
    Xs = rng.normal(scale=scale, size=(m, D))
    Xs[1] = X[2]  # a shared input: r = 0 between the two sets
    return X, Xs


# --- neural network (4.29) ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("D", "Sigma"),
    [
        (1, 1.0),
        (1, [4.0, 100.0]),  # R&W fig. 4.5: Sigma = diag(sigma0^2, sigma^2), sigma0 = 2, sigma = 10
        (2, [0.5, 2.0, 0.3]),
        (2, [[1.0, 0.3, -0.2], [0.3, 0.8, 0.1], [-0.2, 0.1, 0.5]]),
    ],
)
def test_neural_network_matches_reference(D, Sigma):
    X, Xs = make_inputs(D, seed=0, scale=2.0)
    assert_matches(bk.NeuralNetwork(D, Sigma=Sigma), partial(ref_nn, Sigma=Sigma), X, Xs)


def test_neural_network_active_dims():
    X, Xs = make_inputs(3, seed=1)
    k = bk.NeuralNetwork(3, Sigma=[1.0, 0.5, 2.0], active_dims=[0, 2])
    assert_matches(k, lambda A, B: ref_nn(A[:, [0, 2]], B[:, [0, 2]], [1.0, 0.5, 2.0]), X, Xs)


def test_neural_network_saturates_for_large_inputs():
    """R&W fig. 4.5: draws are superpositions of erf(u0 + u x); they tend to constants for large |x|,
    so the correlation tends to +1 on the same side of the origin and to -1 on opposite sides."""
    k = bk.NeuralNetwork(1, Sigma=[4.0, 100.0])  # sigma0 = 2, sigma = 10
    far = np.array([[1e3], [5e3], [-5e3]])
    K = evaluate(k(far))
    np.testing.assert_allclose(K[0, 1], 1.0, atol=1e-3)
    np.testing.assert_allclose(K[0, 2], -1.0, atol=1e-3)
    np.testing.assert_allclose(np.diag(K), 1.0, atol=1e-3)

    # Prior draws on [-4, 4]: nearly flat far out, varying near the origin.
    x = np.linspace(-4, 4, 81)[:, None]
    Kx = evaluate(k(x)) + 1e-10 * np.eye(81)
    f = np.linalg.cholesky(Kx) @ np.random.default_rng(0).normal(size=(81, 2000))
    tail = x[:, 0] >= 2.0
    middle = np.abs(x[:, 0]) <= 0.5
    spread_tail = np.var(f[tail] - f[tail].mean(axis=0), axis=0).mean()
    spread_middle = np.var(f[middle] - f[middle].mean(axis=0), axis=0).mean()
    assert spread_tail < 0.01 * spread_middle
    # larger sigma: faster variation near the origin (fig. 4.5(b)): Var(f(0.3) - f(0)) grows
    pair = np.array([[0.0], [0.3]])
    var_step = []
    for s in (1.0, 3.0, 10.0):
        K2 = evaluate(bk.NeuralNetwork(1, Sigma=[4.0, s**2])(pair))
        var_step.append(K2[0, 0] + K2[1, 1] - 2 * K2[0, 1])
    assert var_step[0] < var_step[1] < var_step[2]


# --- Gaussian basis functions (4.30) -----------------------------------------------------------
@pytest.mark.parametrize(("D", "sigma_g", "sigma_u"), [(1, 1.0, 1.0), (2, 0.5, 2.0), (3, 1.3, 0.7)])
def test_gaussian_basis_matches_reference(D, sigma_g, sigma_u):
    X, Xs = make_inputs(D, seed=2, scale=1.5)
    k = bk.GaussianBasis(D, sigma_g=sigma_g, sigma_u=sigma_u)
    assert_matches(k, partial(ref_gaussian_basis, sigma_g=sigma_g, sigma_u=sigma_u), X, Xs)


@pytest.mark.parametrize(("sigma_g", "sigma_u"), [(1.0, 1.0), (0.4, 2.5)])
def test_gaussian_basis_is_the_integral_over_basis_centres(sigma_g, sigma_u):
    """The closed form equals the defining integral (first line of 4.30); in d = 2 the integral is
    a product of 1-D integrals."""
    X = np.array([[-1.2, 0.3], [0.0, 0.0], [0.7, 1.9]])
    K2 = evaluate(bk.GaussianBasis(2, sigma_g=sigma_g, sigma_u=sigma_u)(X))
    K1 = evaluate(bk.GaussianBasis(1, sigma_g=sigma_g, sigma_u=sigma_u)(X[:, :1]))
    for i in range(3):
        for j in range(3):
            I = [gaussian_basis_integral_1d(X[i, d], X[j, d], sigma_g, sigma_u) for d in (0, 1)]
            np.testing.assert_allclose(K1[i, j], I[0], rtol=1e-9)
            np.testing.assert_allclose(K2[i, j], I[0] * I[1], rtol=1e-9)


def test_gaussian_basis_tends_to_squared_exponential():
    """sigma_u -> infinity: k_G / k_G(0, 0) -> exp(-|x - x'|^2 / 4 sigma_g^2) (R&W after 4.30)."""
    X, Xs = make_inputs(2, seed=3)
    k = bk.GaussianBasis(2, sigma_g=0.6, sigma_u=1e5)
    K, k00 = evaluate(k(X, Xs), k(np.zeros((1, 2)), diag=True))
    se = evaluate(bk.ExpQuad(2, ls=np.sqrt(2) * 0.6)(X, Xs))
    np.testing.assert_allclose(K / k00[0], se, rtol=1e-8)


# --- Gibbs (4.32) ------------------------------------------------------------------------------
def _ell_pt(X):  # positive, smoothly varying length-scales, one per dimension
    return 0.3 + pt.exp(-pt.square(X)) + 0.1 * pt.arange(X.shape[1])


def _ell_np(x):
    return 0.3 + np.exp(-(x**2)) + 0.1 * np.arange(x.shape[0])


@pytest.mark.parametrize("D", [1, 2, 3])
def test_gibbs_matches_reference(D):
    X, Xs = make_inputs(D, seed=4, scale=1.5)
    assert_matches(bk.Gibbs(D, _ell_pt), partial(ref_gibbs, ell=_ell_np), X, Xs)


def test_gibbs_isotropic_lengthscale_vector():
    """A length-scale function returning (n,) uses the same l(x) in every dimension."""
    X, Xs = make_inputs(2, seed=5)
    k = bk.Gibbs(2, lambda X: 0.5 + pt.sum(pt.square(X), axis=1))

    def ell(x):
        return np.full(2, 0.5 + np.sum(x**2))

    assert_matches(k, partial(ref_gibbs, ell=ell), X, Xs)


def test_gibbs_with_constant_lengthscale_is_squared_exponential():
    X, Xs = make_inputs(1, seed=6, scale=2.0)
    k = bk.Gibbs(1, lambda X: 0.7 * pt.ones_like(X))
    np.testing.assert_allclose(
        evaluate(k(X, Xs)), evaluate(bk.ExpQuad(1, ls=0.7)(X, Xs)), rtol=RTOL, atol=ATOL
    )
    # D = 2 with per-dimension constants: the ARD squared exponential
    X, Xs = make_inputs(2, seed=7, scale=2.0)
    k = bk.Gibbs(2, lambda X: pt.ones_like(X) * np.array([0.6, 1.9]))
    np.testing.assert_allclose(
        evaluate(k(X, Xs)), evaluate(bk.ExpQuad(2, ls=[0.6, 1.9])(X, Xs)), rtol=RTOL, atol=ATOL
    )


# --- Paciorek-Schervish (4.33)-(4.34) ----------------------------------------------------------
def _sigma_field_pt(X):
    """Sigma(x) = A(x) A(x)^T + 0.2 I with A(x) = [[1 + x_0^2, 0.5 sin x_1, ...], ...], (n, D, D)."""
    D = X.type.shape[1]  # static: the kernel slices its active columns with a fixed index
    base = np.arange(1, D * D + 1, dtype=float).reshape(D, D) / (D * D)
    A = base[None] + 0.5 * pt.sin(X[:, :, None] + X[:, None, :])
    return pt.matmul(A, pt.swapaxes(A, 1, 2)) + 0.2 * np.eye(D)


def _sigma_field_np(x):
    D = x.shape[0]
    base = np.arange(1, D * D + 1, dtype=float).reshape(D, D) / (D * D)
    A = base + 0.5 * np.sin(x[:, None] + x[None, :])
    return A @ A.T + 0.2 * np.eye(D)


@pytest.mark.parametrize("base", list(K_S))
def test_paciorek_schervish_matches_reference_d2(base):
    make, k_S = K_S[base]
    X, Xs = make_inputs(2, seed=8, scale=1.5)
    k = bk.PaciorekSchervish(2, make(), _sigma_field_pt)
    assert_matches(k, partial(ref_paciorek, Sigma=_sigma_field_np, k_S=k_S), X, Xs)


@pytest.mark.parametrize("D", [1, 3])
def test_paciorek_schervish_matches_reference_other_dims(D):
    make, k_S = K_S["Matern52"]
    X, Xs = make_inputs(D, seed=9, scale=1.5)
    k = bk.PaciorekSchervish(D, make(), _sigma_field_pt)
    assert_matches(k, partial(ref_paciorek, Sigma=_sigma_field_np, k_S=k_S), X, Xs)


@pytest.mark.parametrize("base", ["ExpQuad", "Matern52", "Exponential", "RatQuad"])
@pytest.mark.parametrize("D", [1, 2])
def test_paciorek_schervish_with_constant_sigma_is_its_base(base, D):
    """Sigma(x) = l^2 I: Q_ij = |x_i - x_j|^2 / l^2 and the prefactor is 1."""
    ell = 0.8
    X, Xs = make_inputs(D, seed=10, scale=1.5)
    k = bk.PaciorekSchervish(
        D, K_S[base][0](), lambda X: pt.ones_like(X[:, :1, None]) * (ell**2 * np.eye(D))
    )
    stationary = {
        "ExpQuad": bk.ExpQuad(D, ls=ell),
        "Matern52": bk.Matern52(D, ls=ell),
        "Exponential": bk.Exponential(D, ls=ell),
        "RatQuad": bk.RatQuad(D, alpha=1.7, ls=ell),
    }[base]
    A, B = evaluate(k(X, Xs), stationary(X, Xs))
    np.testing.assert_allclose(A, B, rtol=RTOL, atol=ATOL)


def test_paciorek_schervish_with_diagonal_sigma_and_se_base_is_gibbs():
    """R&W: Gibbs' l_d(x) define a diagonal Sigma(x) = diag(l_d^2(x))."""
    X, Xs = make_inputs(2, seed=11, scale=1.5)

    def sigma(X):
        return pt.square(_ell_pt(X))[:, :, None] * np.eye(2)

    ps = bk.PaciorekSchervish(2, bk.ExpQuad(2, ls=1.0), sigma)
    A, B = evaluate(ps(X, Xs), bk.Gibbs(2, _ell_pt)(X, Xs))
    np.testing.assert_allclose(A, B, rtol=RTOL, atol=ATOL)


# --- O'Hagan (§4.2.3) --------------------------------------------------------------------------
def _phi_pt(X):
    return pt.concatenate([pt.ones_like(X[:, :1]), X, pt.cos(X)], axis=1)


def _phi_np(X):
    return np.concatenate([np.ones_like(X[:, :1]), X, np.cos(X)], axis=1)


@pytest.mark.parametrize(
    "W0",
    [
        0.7,
        np.array([1.0, 0.5, 2.0, 0.3, 0.8]),
        np.array(
            [
                [1.0, 0.2, 0.0, 0.1, 0.0],
                [0.2, 0.9, 0.1, 0.0, 0.0],
                [0.0, 0.1, 0.6, 0.0, 0.2],
                [0.1, 0.0, 0.0, 0.5, 0.0],
                [0.0, 0.0, 0.2, 0.0, 1.1],
            ]
        ),
    ],
    ids=["scalar", "diagonal", "full"],
)
def test_ohagan_matches_reference(W0):
    X, Xs = make_inputs(2, seed=12)
    ls = np.array([0.7, 1.4])

    def k_w(A, B):  # ARD squared exponential, R&W (4.9)
        return np.exp(-0.5 * np.sum(((A[:, None, :] - B[None, :, :]) / ls) ** 2, axis=-1))

    k = bk.OHagan(2, _phi_pt, W0, bk.ExpQuad(2, ls=ls))
    assert_matches(k, partial(ref_ohagan, phi=_phi_np, W0=W0, k_w=k_w), X, Xs)


def test_ohagan_with_unit_features_is_its_base():
    X, Xs = make_inputs(2, seed=13)
    base = bk.Matern32(2, ls=[0.8, 1.3])
    k = bk.OHagan(2, lambda X: pt.ones_like(X[:, :1]), 1.0, base)
    A, B, d = evaluate(k(X, Xs), base(X, Xs), k(X, diag=True))
    np.testing.assert_allclose(A, B, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(d, 1.0, rtol=RTOL)


# --- Wiener ------------------------------------------------------------------------------------
def test_wiener_is_min_and_its_draws_have_variance_x():
    rng = np.random.default_rng(14)
    X, Xs = rng.uniform(0, 3, size=(7, 1)), rng.uniform(0, 3, size=(5, 1))
    X[0] = 0.0
    assert_matches(bk.Wiener(), ref_wiener, X, Xs)
    # a 1-D Wiener kernel on one column of a wider input
    Z = np.concatenate([-X, X, -X], axis=1)
    np.testing.assert_array_equal(evaluate(bk.Wiener(3, active_dims=[1])(Z)), ref_wiener(X, X))

    x = np.array([[0.1], [0.5], [1.0], [2.0], [4.0]])
    f = np.linalg.cholesky(evaluate(bk.Wiener()(x))) @ rng.normal(size=(5, 40_000))
    np.testing.assert_allclose(f.var(axis=1), x[:, 0], rtol=0.05)
    # independent increments: cov(f(1) - f(0.5), f(0.5)) = 0
    np.testing.assert_allclose(np.cov(f[2] - f[1], f[1])[0, 1], 0.0, atol=0.02)


def test_wiener_rejects_negative_inputs():
    k = bk.Wiener()
    with pytest.raises(ValueError, match=r"`X`.*x >= 0"):
        k(np.array([[0.5], [-0.1]]))
    with pytest.raises(ValueError, match=r"`Xs`.*x >= 0"):
        k(np.array([[0.5]]), [[-1.0]])
    with pytest.raises(ValueError, match=r"x >= 0"):
        k(np.array([[-0.5]]), diag=True)
    with pytest.raises(ValueError, match=r"x >= 0"):
        k(pt.as_tensor_variable(np.array([[-0.5]])))
    # negative entries in a column the kernel does not use are fine
    bk.Wiener(2, active_dims=[1])(np.array([[-1.0, 1.0]]))
    # symbolic inputs: a run-time check
    Xv = pt.dmatrix("X")
    fn = pytensor.function([Xv], k(Xv), mode=PY_MODE)
    np.testing.assert_array_equal(fn(np.array([[1.0], [2.0]])), [[1.0, 1.0], [1.0, 2.0]])
    with pytest.raises(ValueError, match=r"x >= 0"):
        fn(np.array([[1.0], [-2.0]]))
    with pytest.raises(ValueError, match="active_dims"):
        bk.Wiener(2)


# --- validation --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: bk.NeuralNetwork(2, Sigma=-1.0), "`Sigma` must be non-negative"),
        (lambda: bk.NeuralNetwork(2, Sigma=[1.0, 2.0]), "`Sigma` has 2 entries"),
        (lambda: bk.NeuralNetwork(1, Sigma=[[1.0, 0.5], [0.0, 1.0]]), "`Sigma` must be symmetric"),
        (lambda: bk.NeuralNetwork(1, Sigma=[[1.0, 2.0], [2.0, 1.0]]), "`Sigma` must be positive"),
        (lambda: bk.NeuralNetwork(1, Sigma=np.eye(3)), r"`Sigma` has shape \(3, 3\)"),
        (lambda: bk.NeuralNetwork(1, Sigma=np.nan), "`Sigma` must be finite"),
        (lambda: bk.GaussianBasis(2, sigma_g=0.0), "`sigma_g` must be strictly positive"),
        (lambda: bk.GaussianBasis(2, sigma_u=-1.0), "`sigma_u` must be strictly positive"),
        (lambda: bk.GaussianBasis(2, sigma_u=[1.0, 2.0]), "`sigma_u` must be a scalar"),
        (lambda: bk.OHagan(2, _phi_pt, -1.0, bk.ExpQuad(2, ls=1.0)), "`W0` must be non-negative"),
        (
            lambda: bk.OHagan(2, _phi_pt, [[1.0, 3.0], [3.0, 1.0]], bk.ExpQuad(2, ls=1.0)),
            "`W0` must be positive semi-definite",
        ),
        (lambda: bk.OHagan(2, _phi_pt, 1.0, bk.ExpQuad(3, ls=1.0)), "`base` has input_dim=3"),
        (lambda: bk.Gibbs(0, _ell_pt), "`input_dim`"),
        (lambda: bk.Wiener(1, active_dims=[1]), "`active_dims`"),
    ],
)
def test_invalid_parameters_raise_value_error_naming_them(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_invalid_user_functions_and_bases():
    X = np.zeros((3, 2))
    with pytest.raises(TypeError, match="lengthscale_func"):
        bk.Gibbs(2, 1.0)
    with pytest.raises(ValueError, match="`lengthscale_func` returns 3 length-scales"):
        bk.Gibbs(2, lambda X: pt.concatenate([X, X[:, :1]], axis=1) ** 2 + 1)(X)
    with pytest.raises(ValueError, match="`lengthscale_func` must return"):
        bk.Gibbs(2, lambda X: pt.ones((3, 2, 1)))(X)
    with pytest.raises(TypeError, match="Sigma_func"):
        bk.PaciorekSchervish(2, bk.ExpQuad(2, ls=1.0), np.eye(2))
    with pytest.raises(ValueError, match="`Sigma_func` returns matrices of shape"):
        bk.PaciorekSchervish(2, bk.ExpQuad(2, ls=1.0), lambda X: pt.ones((3, 3, 3)))(X)
    with pytest.raises(ValueError, match="`Sigma_func` must return"):
        bk.PaciorekSchervish(2, bk.ExpQuad(2, ls=1.0), lambda X: pt.ones((3, 2)))(X)
    for base in (
        bk.Periodic(2, period=1.0, ls=1.0),  # not isotropic
        bk.PiecewisePolynomial(2, ls=1.0),  # not valid in every dimension
        bk.BesselOscillatory(2, nu=1.0, ls=1.0),
        bk.ExpQuad(2, ls=2.0),  # ls != 1: the length-scales come from Sigma(x)
        bk.ExpQuad(2, ls=[1.0, 1.0]),
        bk.ExpQuad(2, metric=bk.FactorAnalysis([[1.0], [0.0]], [1.0, 1.0])),
    ):
        with pytest.raises(TypeError, match="`base`"):
            bk.PaciorekSchervish(2, base, _sigma_field_pt)
    with pytest.raises(TypeError, match="phi"):
        bk.OHagan(2, None, 1.0, bk.ExpQuad(2, ls=1.0))
    with pytest.raises(ValueError, match="`phi` returns 5 features but `W0` is for 2"):
        bk.OHagan(2, _phi_pt, [1.0, 2.0], bk.ExpQuad(2, ls=1.0))(X)


# --- positive semi-definiteness ----------------------------------------------------------------
PSD_KERNELS = {
    "NN_full_Sigma": (
        2,
        lambda: bk.NeuralNetwork(2, Sigma=[[1.0, 0.3, -0.2], [0.3, 0.8, 0.1], [-0.2, 0.1, 0.5]]),
    ),
    "NN_fig4.5": (1, lambda: bk.NeuralNetwork(1, Sigma=[4.0, 100.0])),
    "GaussianBasis": (3, lambda: bk.GaussianBasis(3, sigma_g=0.5, sigma_u=2.0)),
    "Gibbs": (2, lambda: bk.Gibbs(2, _ell_pt)),
    "PaciorekSchervish_D3": (
        3,
        lambda: bk.PaciorekSchervish(3, bk.Matern32(3, ls=1.0), _sigma_field_pt),
    ),
    "OHagan": (2, lambda: bk.OHagan(2, _phi_pt, [1.0, 0.5, 2.0, 0.3, 0.8], bk.ExpQuad(2, ls=1.0))),
}


@pytest.mark.parametrize("name", list(PSD_KERNELS))
def test_psd_on_random_inputs(name):
    D, make = PSD_KERNELS[name]
    rng = np.random.default_rng(15)
    for scale in (0.3, 3.0):
        res = bayes_gp.check_psd(make(), rng.normal(scale=scale, size=(25, D)))
        assert res.is_psd, (name, res)
    res = bayes_gp.check_psd(bk.Wiener(), rng.uniform(0, 5, size=(25, 1)))
    assert res.is_psd, res
