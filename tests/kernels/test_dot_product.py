"""Reference values of the dot-product and basis-function kernels (R&W §4.2.2, seed 003; PRML
notes, seed 000; weight-space view, seed 004) and of the polynomial feature map."""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pytensor.tensor as pt
import pytest
from sklearn.gaussian_process import kernels as skk

import bayes_gp
import bayes_gp.kernels as bk
from tests.helpers import ATOL, RTOL, assert_matches, evaluate

SIGMA_P = {  # weight-prior covariances for D = 3: scalar, diagonal, full (symmetric PD)
    "scalar": 0.7,
    "diagonal": np.array([0.5, 1.5, 2.0]),
    "full": np.array([[1.0, 0.3, -0.2], [0.3, 0.8, 0.1], [-0.2, 0.1, 0.5]]),
}


# --- NumPy references --------------------------------------------------------------------------
def weighted_inner(A, B, Sigma_p):
    """A Sigma_p B^T for a scalar, diagonal (vector) or full Sigma_p."""
    S = np.asarray(Sigma_p, float)
    S = np.diag(np.broadcast_to(S, A.shape[1])) if S.ndim < 2 else S
    return A @ S @ B.T


def ref_dot_product(X, Xs, sigma0, Sigma_p):  # R&W §4.2.2, seed 004 (11): s0^2 + x^T Sigma_p x'
    return sigma0**2 + weighted_inner(X, Xs, Sigma_p)


def ref_polynomial(X, Xs, p, sigma0, Sigma_p):  # R&W (4.23) with sigma0, Sigma_p; seed 000 (9)
    return (sigma0**2 + weighted_inner(X, Xs, Sigma_p)) ** p


def ref_sigmoid(X, Xs, a, b):  # seed 000 (13): tanh(a x^T x' + b)
    return np.tanh(a * X @ Xs.T + b)


def ref_prml(X, Xs, theta0, theta1, theta2, theta3):
    """Seed 000 (24): theta0 exp(-theta1/2 |x - x'|^2) + theta2 + theta3 x^T x'; with a vector
    theta1 = (eta_1..eta_D) the ARD form of seed 001 §4: exp(-1/2 sum_i eta_i (x_i - x'_i)^2)."""
    sq = np.sum(np.asarray(theta1) * (X[:, None, :] - Xs[None, :, :]) ** 2, axis=-1)
    return theta0 * np.exp(-0.5 * sq) + theta2 + theta3 * X @ Xs.T


def ref_features(X, p):  # R&W (4.24): phi_m(x) = sqrt(p!/(m_1!...m_D!)) x_1^m_1 ... x_D^m_D
    D = X.shape[1]
    feats = []
    for m in np.ndindex(*(p + 1,) * D):  # every multi-index with entries 0..p ...
        if sum(m) != p:  # ... of total degree p
            continue
        coef = math.factorial(p) / math.prod(math.factorial(k) for k in m)
        feats.append(np.sqrt(coef) * np.prod(X ** np.asarray(m), axis=1))
    return np.stack(feats, axis=1)


def make_inputs(D: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(7, D))
    X[3] = 0.0  # the origin: only the bias term remains
    Xs = rng.normal(size=(5, D))
    Xs[1] = X[2]
    return X, Xs


# --- values ------------------------------------------------------------------------------------
@pytest.mark.parametrize("sigma_p", list(SIGMA_P), ids=str)
@pytest.mark.parametrize("sigma0", [0.0, 1.3])
def test_dot_product_matches_reference(sigma0, sigma_p):
    X, Xs = make_inputs(3, seed=0)
    S = SIGMA_P[sigma_p]
    k = bk.DotProduct(3, sigma0=sigma0, Sigma_p=S)
    assert_matches(k, partial(ref_dot_product, sigma0=sigma0, Sigma_p=S), X, Xs)


def test_dot_product_default_and_active_dims():
    X, Xs = make_inputs(4, seed=1)
    k = bk.DotProduct(4, sigma0=0.5, active_dims=[1, 3])
    cols = [1, 3]
    ref = partial(ref_dot_product, sigma0=0.5, Sigma_p=1.0)
    assert_matches(k, lambda A, B: ref(A[:, cols], B[:, cols]), X, Xs)


@pytest.mark.parametrize("sigma_p", list(SIGMA_P), ids=str)
@pytest.mark.parametrize(("p", "sigma0"), [(1, 0.0), (2, 0.0), (2, 1.0), (3, 0.6), (5, 1.2)])
def test_polynomial_matches_reference(p, sigma0, sigma_p):
    X, Xs = make_inputs(3, seed=2)
    S = SIGMA_P[sigma_p]
    k = bk.Polynomial(3, p=p, sigma0=sigma0, Sigma_p=S)
    assert_matches(k, partial(ref_polynomial, p=p, sigma0=sigma0, Sigma_p=S), X, Xs)


@pytest.mark.parametrize(("a", "b"), [(1.0, 0.0), (0.3, -1.5), (2.0, 0.7)])
def test_sigmoid_warns_and_matches_reference(a, b):
    with pytest.warns(bayes_gp.NotPSDWarning, match="not positive semi-definite"):
        k = bk.Sigmoid(2, a=a, b=b, check="none")
    X, Xs = make_inputs(2, seed=3)
    assert_matches(k, partial(ref_sigmoid, a=a, b=b), X, Xs)


@pytest.mark.parametrize(
    ("theta", "D"),
    [
        ((1.0, 1.0, 0.0, 0.0), 2),
        ((2.0, 0.5, 0.3, 0.0), 2),
        ((0.7, 3.0, 0.0, 1.2), 1),
        ((1.5, [0.2, 4.0, 1.0], 0.4, 0.6), 3),  # ARD: eta_i per dimension (seed 001 §4)
        ((0.0, 1.0, 1.0, 1.0), 2),  # theta0 = 0: the linear part alone
    ],
)
def test_prml_kernel_matches_reference(theta, D):
    X, Xs = make_inputs(D, seed=4)
    k = bk.PRMLKernel(D, *theta)
    assert_matches(
        k,
        partial(ref_prml, theta0=theta[0], theta1=theta[1], theta2=theta[2], theta3=theta[3]),
        X,
        Xs,
    )


def _phi_pt(X):  # user basis functions: bias, the inputs and a sine of each
    return pt.concatenate([pt.ones_like(X[:, :1]), X, pt.sin(2.0 * X)], axis=1)


def _phi_np(X):
    return np.concatenate([np.ones_like(X[:, :1]), X, np.sin(2.0 * X)], axis=1)


@pytest.mark.parametrize(
    "Sigma_p",
    [
        None,
        0.25,  # seed 000 (19): K = Phi Phi^T / alpha
        np.array([1.0, 0.5, 2.0, 0.3, 0.8]),
        np.array(
            [
                [1.0, 0.2, 0.0, 0.1, 0.0],
                [0.2, 0.9, 0.1, 0.0, 0.0],
                [0.0, 0.1, 1.1, 0.0, 0.3],
                [0.1, 0.0, 0.0, 0.6, 0.0],
                [0.0, 0.0, 0.3, 0.0, 0.7],
            ]
        ),
    ],
    ids=["default", "scalar", "diagonal", "full"],
)
def test_basis_function_matches_reference(Sigma_p):
    """Seed 004 (11): k(x, x') = phi(x)^T Sigma_p phi(x')."""
    X, Xs = make_inputs(2, seed=5)
    k = bk.BasisFunction(2, _phi_pt, Sigma_p=Sigma_p)
    S = 1.0 if Sigma_p is None else Sigma_p
    assert_matches(k, lambda A, B: weighted_inner(_phi_np(A), _phi_np(B), S), X, Xs)


@pytest.mark.parametrize("sigma_p", list(SIGMA_P), ids=str)
def test_basis_function_identity_features_is_dot_product(sigma_p):
    X, Xs = make_inputs(3, seed=6)
    S = SIGMA_P[sigma_p]
    basis = bk.BasisFunction(3, lambda X: X, Sigma_p=S)
    linear = bk.DotProduct(3, sigma0=0.0, Sigma_p=S)
    a, b, c, d, e, f = evaluate(
        basis(X), linear(X), basis(X, Xs), linear(X, Xs), basis(X, diag=True), linear(X, diag=True)
    )
    for ours, theirs in ((a, b), (c, d), (e, f)):
        np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL)


# --- the polynomial feature map ----------------------------------------------------------------
def test_polynomial_features_seed_000_example():
    """Seed 000 (10): for D = p = 2, phi(x) = (x1^2, sqrt(2) x1 x2, x2^2)."""
    X = np.array([[1.5, -2.0], [0.3, 0.7], [0.0, 1.0]])
    x1, x2 = X[:, 0], X[:, 1]
    expected = np.stack([x1**2, np.sqrt(2.0) * x1 * x2, x2**2], axis=1)
    np.testing.assert_allclose(bk.polynomial_features(X, 2), expected, rtol=1e-15, atol=0)


@pytest.mark.parametrize(("D", "p"), [(1, 3), (2, 2), (2, 4), (3, 1), (3, 3), (4, 2)])
def test_polynomial_features_match_reference_and_count(D, p):
    X, _ = make_inputs(D, seed=7)
    Phi = bk.polynomial_features(X, p)
    assert Phi.shape == (len(X), math.comb(D + p - 1, p))  # not D^p
    # The same features as R&W (4.24), in some order: compare the (order-free) Gram matrices, and
    # the sorted feature columns at one point.
    ref = ref_features(X, p)
    np.testing.assert_allclose(Phi @ Phi.T, ref @ ref.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.sort(Phi[0]), np.sort(ref[0]), rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("sigma0", [0.0, 0.8])
@pytest.mark.parametrize(("D", "p"), [(1, 2), (2, 2), (2, 3), (3, 4)])
def test_polynomial_kernel_is_inner_product_of_features(D, p, sigma0):
    """R&W (4.23)-(4.24): (sigma0^2 + x.x')^p = phi(x).phi(x'), with x~ = (sigma0, x)."""
    X, Xs = make_inputs(D, seed=8)
    k = bk.Polynomial(D, p=p, sigma0=sigma0)
    Phi, Phis = bk.polynomial_features(X, p, sigma0), bk.polynomial_features(Xs, p, sigma0)
    assert Phi.shape[1] == math.comb(D + int(sigma0 > 0) + p - 1, p)
    K, Ks = evaluate(k(X), k(X, Xs))
    np.testing.assert_allclose(K, Phi @ Phi.T, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(Ks, Phi @ Phis.T, rtol=1e-10, atol=1e-12)


# --- peer library ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (partial(bk.DotProduct, sigma0=0.0), skk.DotProduct(sigma_0=0.0)),
        (partial(bk.DotProduct, sigma0=1.7), skk.DotProduct(sigma_0=1.7)),
        # pairwise polynomial: (gamma x.x' + coef0)^degree
        (
            partial(bk.Polynomial, p=3, sigma0=np.sqrt(0.5), Sigma_p=0.4),
            skk.PairwiseKernel(
                metric="polynomial", gamma=0.4, pairwise_kernels_kwargs={"degree": 3, "coef0": 0.5}
            ),
        ),
        (partial(bk.DotProduct, Sigma_p=2.0), skk.PairwiseKernel(metric="linear", gamma=1.0) * 2),
    ],
    ids=["DotProduct", "DotProduct-sigma0", "PairwiseKernel-polynomial", "PairwiseKernel-linear"],
)
def test_matches_sklearn(ours, theirs):
    X, Xs = make_inputs(3, seed=9)
    k = ours(3)
    K, Ks, Kd = evaluate(k(X), k(X, Xs), k(X, diag=True))
    np.testing.assert_allclose(K, theirs(X), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(Ks, theirs(X, Xs), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(Kd, theirs.diag(X), rtol=1e-10, atol=1e-12)


def test_sigmoid_matches_sklearn_pairwise():
    with pytest.warns(bayes_gp.NotPSDWarning):
        k = bk.Sigmoid(3, a=0.3, b=-0.4, check="none")
    sk = skk.PairwiseKernel(metric="sigmoid", gamma=0.3, pairwise_kernels_kwargs={"coef0": -0.4})
    X, Xs = make_inputs(3, seed=10)
    K, Ks = evaluate(k(X), k(X, Xs))
    np.testing.assert_allclose(K, sk(X), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(Ks, sk(X, Xs), rtol=1e-10, atol=1e-12)


# --- validation --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("build", "match"),
    [
        pytest.param(partial(bk.Polynomial, 2, p=0), "`p`", id="p=0"),
        pytest.param(partial(bk.Polynomial, 2, p=2.5), "`p`", id="p=2.5"),
        pytest.param(partial(bk.Polynomial, 2, p=-1), "`p`", id="p<0"),
        pytest.param(partial(bk.DotProduct, 2, sigma0=-1.0), "sigma0", id="sigma0<0"),
        pytest.param(
            partial(bk.DotProduct, 2, Sigma_p=np.array([[1.0, 2.0], [2.0, 1.0]])),
            "Sigma_p",
            id="Sigma_p-not-psd",
        ),
        pytest.param(
            partial(bk.Polynomial, 2, p=2, Sigma_p=np.array([[1.0, 0.5], [0.0, 1.0]])),
            "Sigma_p",
            id="Sigma_p-asymmetric",
        ),
        pytest.param(partial(bk.DotProduct, 2, Sigma_p=np.eye(3)), "Sigma_p", id="Sigma_p-shape"),
        pytest.param(partial(bk.DotProduct, 2, Sigma_p=[1.0, -1.0]), "Sigma_p", id="Sigma_p<0"),
        pytest.param(partial(bk.DotProduct, 2, Sigma_p=[1.0, 2.0, 3.0]), "Sigma_p", id="len"),
        pytest.param(partial(bk.PRMLKernel, 2, theta0=-1.0), "theta0", id="theta0<0"),
        pytest.param(partial(bk.PRMLKernel, 2, theta1=[1.0, 2.0, 3.0]), "theta1", id="theta1"),
        pytest.param(partial(bk.PRMLKernel, 2, theta3=-0.1), "theta3", id="theta3<0"),
        pytest.param(partial(bk.PRMLKernel, 2, theta2=[1.0, 1.0]), "theta2", id="theta2-vec"),
        pytest.param(partial(bk.DotProduct, 2, active_dims=[2]), "active_dims", id="active_dims"),
        pytest.param(partial(bk.Sigmoid, 2, a=np.nan), "`a`", id="sigmoid-a"),
        pytest.param(partial(bk.Sigmoid, 2, check="warn"), "check", id="sigmoid-check"),
        pytest.param(partial(bk.polynomial_features, np.ones((2, 2)), 0), "`p`", id="feat-p"),
        pytest.param(
            partial(bk.polynomial_features, np.ones((2, 2)), 2, -1.0), "sigma0", id="feat-sigma0"
        ),
    ],
)
def test_invalid_parameters_raise(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_basis_function_feature_count_mismatch_raises():
    k = bk.BasisFunction(2, _phi_pt, Sigma_p=np.ones(3))  # phi gives 5 features
    with pytest.raises(ValueError, match="phi"):
        k(np.zeros((4, 2)))


@pytest.mark.parametrize(
    "kernel",
    [bk.DotProduct(2), bk.Polynomial(2, p=2), bk.PRMLKernel(2), bk.BasisFunction(2, _phi_pt)],
    ids=type,
)
def test_wrong_number_of_columns_raises(kernel):
    with pytest.raises(ValueError, match="input_dim"):
        kernel(np.zeros((3, 3)))


@pytest.mark.parametrize(
    ("kernel", "attr"),
    [
        (bk.DotProduct(2), "sigma0"),
        (bk.Polynomial(2, p=2), "p"),
        (bk.PRMLKernel(2), "theta1"),
        (bk.BasisFunction(2, _phi_pt), "Sigma_p"),
    ],
    ids=lambda v: v if isinstance(v, str) else type(v).__name__,
)
def test_kernels_are_immutable(kernel, attr):
    with pytest.raises(AttributeError, match=attr):
        setattr(kernel, attr, 2.0)
