"""Reference values of the constructions "making new kernels from old" (R&W §4.2.4, seed 003;
PRML §6.2, seed 000), on bayes_gp kernels and on PyMC's own kernels, sums and products."""

from __future__ import annotations

import itertools
import math
from functools import partial, reduce

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy.special import gamma as gamma_fn
from scipy.special import kv

import bayes_gp.kernels as bk
from tests.helpers import ATOL, RTOL, assert_matches, evaluate, evaluate_all


# --- NumPy references of the base kernels ------------------------------------------------------
def _r(X, Xs, ls, dims=None):
    if dims is not None:
        X, Xs = X[:, dims], Xs[:, dims]
    return np.sqrt(np.sum(((X[:, None, :] - Xs[None, :, :]) / ls) ** 2, axis=-1))


def ref_expquad(X, Xs, ls, dims=None):  # R&W (4.9)
    return np.exp(-0.5 * _r(X, Xs, ls, dims) ** 2)


def ref_matern52(X, Xs, ls, dims=None):  # R&W (4.17b)
    r = _r(X, Xs, ls, dims)
    return (1.0 + np.sqrt(5.0) * r + 5.0 * r**2 / 3.0) * np.exp(-np.sqrt(5.0) * r)


def ref_matern(X, Xs, ls, nu, dims=None):  # R&W (4.14), 1 at r = 0
    z = np.sqrt(2.0 * nu) * _r(X, Xs, ls, dims)
    zs = np.where(z > 0, z, 1.0)
    return np.where(z > 0, 2.0 ** (1.0 - nu) / gamma_fn(nu) * zs**nu * kv(nu, zs), 1.0)


def ref_dot(X, Xs, sigma0=0.0):  # R&W §4.2.2: sigma0^2 + x.x'
    return sigma0**2 + X @ Xs.T


def ref_prml(X, Xs, t0, t1, t2, t3):  # seed 000 (24)
    return t0 * np.exp(-0.5 * t1 * _r(X, Xs, 1.0) ** 2) + t2 + t3 * X @ Xs.T


def ref_pm_linear(X, Xs, c):  # PyMC's Linear kernel: (x - c).(x' - c)
    return (X - c) @ (Xs - c).T


def ref_periodic(X, Xs, period, ls, dims):  # R&W (4.31), period p
    d = X[:, None, dims] - Xs[None, :, dims]
    return np.exp(-np.sum(2.0 * np.sin(np.pi * d / period) ** 2 / ls**2, axis=-1))


def make_inputs(D: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(7, D))
    X[4] = X[1]
    Xs = rng.normal(size=(5, D))
    Xs[0] = X[2]
    return X, Xs


def assert_same(k1, k2, X, Xs, rtol=RTOL, atol=ATOL):
    """Two kernels agree on full, cross and diagonal values."""
    for a, b in zip(evaluate_all(k1, X, Xs), evaluate_all(k2, X, Xs), strict=True):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


# Bases with a non-constant variance k(x, x), so normalising and scaling do something; they include
# a PyMC sum and a PyMC product of kernels.
BASES = {
    "Polynomial": (bk.Polynomial(2, p=2, sigma0=1.0), lambda A, B: ref_dot(A, B, 1.0) ** 2),
    "PRMLKernel": (
        bk.PRMLKernel(2, 1.0, 0.7, 0.3, 0.5),
        partial(ref_prml, t0=1.0, t1=0.7, t2=0.3, t3=0.5),
    ),
    "ExpQuad+DotProduct": (
        bk.ExpQuad(2, ls=[0.8, 1.5]) + bk.DotProduct(2, sigma0=0.4),
        lambda A, B: ref_expquad(A, B, np.array([0.8, 1.5])) + ref_dot(A, B, 0.4),
    ),
    "pm.Linear*Matern52": (
        pm.gp.cov.Linear(2, c=[-3.0, 3.0]) * bk.Matern52(2, ls=1.1),
        lambda A, B: ref_pm_linear(A, B, np.array([-3.0, 3.0])) * ref_matern52(A, B, 1.1),
    ),
}


# --- Normalized (R&W eq. 4.35) -----------------------------------------------------------------
@pytest.mark.parametrize("name", list(BASES))
def test_normalized_matches_reference(name):
    """k(x, x') / sqrt(k(x, x) k(x', x')): unit diagonal."""
    base, ref = BASES[name]
    X, Xs = make_inputs(2, seed=1)

    def ref_normalized(A, B):
        return ref(A, B) / np.sqrt(np.outer(np.diag(ref(A, A)), np.diag(ref(B, B))))

    K, _, Kd = assert_matches(bk.Normalized(base), ref_normalized, X, Xs)
    np.testing.assert_allclose(np.diag(K), 1.0, rtol=0, atol=1e-14)
    np.testing.assert_array_equal(Kd, 1.0)


def test_normalized_undoes_a_scale_factor():
    X, Xs = make_inputs(2, seed=2)
    se = bk.ExpQuad(2, ls=[0.6, 1.4])
    assert_same(bk.Normalized(3.7 * se), se, X, Xs)


# --- VerticalScale (R&W §4.2.4) ----------------------------------------------------------------
@pytest.mark.parametrize("name", list(BASES))
def test_vertical_scale_matches_reference(name):
    """a(x) k(x, x') a(x')."""
    base, ref = BASES[name]
    X, Xs = make_inputs(2, seed=3)
    k = bk.VerticalScale(base, lambda X: pt.exp(0.5 * X[:, 0]) + X[:, 1] ** 2)

    def a(A):
        return np.exp(0.5 * A[:, 0]) + A[:, 1] ** 2

    assert_matches(k, lambda A, B: a(A)[:, None] * ref(A, B) * a(B)[None, :], X, Xs)


# --- Warped (R&W §4.2.4) -----------------------------------------------------------------------
def _warp(X):  # a nonlinear map R^2 -> R^3 of the active columns
    return pt.stack([pt.sinh(X[:, 0]), X[:, 1] ** 3, X[:, 0] * X[:, 1]], axis=1)


def _warp_np(X):
    return np.stack([np.sinh(X[:, 0]), X[:, 1] ** 3, X[:, 0] * X[:, 1]], axis=1)


@pytest.mark.parametrize(
    ("base", "ref"),
    [
        (bk.ExpQuad(3, ls=[0.7, 1.2, 2.0]), partial(ref_expquad, ls=np.array([0.7, 1.2, 2.0]))),
        (bk.Matern(3, nu=0.7, ls=1.5), partial(ref_matern, ls=1.5, nu=0.7)),
        (bk.DotProduct(3, sigma0=0.5), partial(ref_dot, sigma0=0.5)),
    ],
    ids=["ExpQuad", "Matern0.7", "DotProduct"],
)
def test_warped_matches_reference_and_pymc_warped_input(base, ref):
    """k(u(x), u(x')) on the active columns [0, 2] of a 3-column input."""
    X, Xs = make_inputs(3, seed=4)
    k = bk.Warped(base, _warp, input_dim=3, active_dims=[0, 2])
    cols = [0, 2]
    assert_matches(k, lambda A, B: ref(_warp_np(A[:, cols]), _warp_np(B[:, cols])), X, Xs)
    theirs = pm.gp.cov.WarpedInput(3, cov_func=base, warp_func=_warp, active_dims=cols)
    assert_same(k, theirs, X, Xs)


def test_warped_pymc_base_equals_pymc_warped_input():
    X, Xs = make_inputs(2, seed=5)
    base = pm.gp.cov.Matern32(3, ls=[0.7, 1.2, 2.0])
    ours = bk.Warped(base, _warp, input_dim=2)
    theirs = pm.gp.cov.WarpedInput(2, cov_func=base, warp_func=_warp)
    assert_same(ours, theirs, X, Xs)


# --- Power (R&W §4.2.4) ------------------------------------------------------------------------
@pytest.mark.parametrize("p", [1, 3])
@pytest.mark.parametrize("name", list(BASES))
def test_power_matches_reference(name, p):
    base, ref = BASES[name]
    X, Xs = make_inputs(2, seed=6)
    assert_matches(bk.Power(base, p), lambda A, B: ref(A, B) ** p, X, Xs, rtol=1e-9)


@pytest.mark.parametrize("p", [2, 3])
def test_power_identities(p):
    """SE^p = SE(l / sqrt(p)); (sigma0^2 + x.x')^p is the polynomial kernel (R&W 4.23)."""
    X, Xs = make_inputs(2, seed=7)
    ls = np.array([0.9, 1.6])
    assert_same(bk.Power(bk.ExpQuad(2, ls=ls), p), bk.ExpQuad(2, ls=ls / np.sqrt(p)), X, Xs)
    assert_same(bk.Power(bk.DotProduct(2, sigma0=0.7), p), bk.Polynomial(2, p=p, sigma0=0.7), X, Xs)


# --- Additive / functional ANOVA (R&W §4.2.4) --------------------------------------------------
def ref_additive(Z, max_order, variances):
    """sum_{n <= R} sigma_n^2 e_n(z_1..z_D), e_n by brute force over index subsets."""
    total = 0.0
    for n in range(1, max_order + 1):
        e_n = sum(reduce(np.multiply, c) for c in itertools.combinations(Z, n))
        total = total + variances[n - 1] * e_n
    return total


LS_1D = [0.6, 1.3, 0.9, 2.0]


def _one_dimensional_kernels(D):
    """One kernel per input dimension, mixing bayes_gp and PyMC kernels."""
    makers = [bk.ExpQuad, pm.gp.cov.Matern52, partial(bk.Matern, nu=0.7), pm.gp.cov.ExpQuad]
    refs = [ref_expquad, ref_matern52, partial(ref_matern, nu=0.7), ref_expquad]
    kernels = [makers[i](D, ls=LS_1D[i], active_dims=[i]) for i in range(D)]
    return kernels, [partial(refs[i], ls=LS_1D[i], dims=[i]) for i in range(D)]


@pytest.mark.parametrize(
    ("D", "max_order", "variances"),
    [
        (3, 1, None),
        (3, 2, [0.5, 2.0]),
        (3, 3, [0.3, 1.5, 2.5]),
        (4, 4, [1.0, 0.5, 0.25, 2.0]),
    ],
)
def test_additive_matches_brute_force(D, max_order, variances):
    X, Xs = make_inputs(D, seed=8)
    kernels, refs = _one_dimensional_kernels(D)
    k = bk.Additive(kernels, max_order=max_order, variances=variances)
    v = [1.0] * max_order if variances is None else variances

    def ref(A, B):
        return ref_additive([g(A, B) for g in refs], max_order, v)

    # PyMC's Matern52 and ExpQuad use |x|^2 - 2x.x' + |x'|^2 and sqrt(r^2 + 1e-12): ~1e-6 off.
    assert_matches(k, ref, X, Xs, rtol=0, atol=1e-5)


def test_additive_extreme_orders_are_sum_and_product():
    """max_order=1 is k_1 + ... + k_D; sigma^2 = (0, .., 0, 1) at max_order=D is k_1 * ... * k_D."""
    X, Xs = make_inputs(3, seed=9)
    kernels, _ = _one_dimensional_kernels(3)
    assert_same(bk.Additive(kernels, max_order=1), reduce(lambda a, b: a + b, kernels), X, Xs)
    product = bk.Additive(kernels, max_order=3, variances=[0.0, 0.0, 1.0])
    assert_same(product, reduce(lambda a, b: a * b, kernels), X, Xs)


# --- sums and products with PyMC's kernels (R&W §4.2.4, PRML 6.17-6.18) ------------------------
LS = np.array([0.8, 1.4])
COMBINATIONS = {
    "SE(x0)+pm.SE(x1)": (
        bk.ExpQuad(2, ls=0.8, active_dims=[0]) + pm.gp.cov.ExpQuad(2, ls=1.4, active_dims=[1]),
        lambda A, B: ref_expquad(A, B, 0.8, [0]) + ref_expquad(A, B, 1.4, [1]),
    ),
    "2.5*Matern0.7*pm.Linear": (
        2.5 * bk.Matern(2, nu=0.7, ls=LS) * pm.gp.cov.Linear(2, c=0.3),
        lambda A, B: 2.5 * ref_matern(A, B, LS, 0.7) * ref_pm_linear(A, B, 0.3),
    ),
    "Periodic(x0)*SE+1": (
        bk.Periodic(2, period=1.3, ls=0.9, active_dims=[0]) * bk.ExpQuad(2, ls=LS) + 1.0,
        lambda A, B: ref_periodic(A, B, 1.3, 0.9, [0]) * ref_expquad(A, B, LS) + 1.0,
    ),
    "eta^2*(PRML+pm.Constant)": (
        pt.constant(1.7) ** 2 * (bk.PRMLKernel(2, 1.0, 2.0, 0.0, 0.5) + pm.gp.cov.Constant(0.3)),
        lambda A, B: 1.7**2 * (ref_prml(A, B, 1.0, 2.0, 0.0, 0.5) + 0.3),
    ),
    "Power(DotProduct)+pm.Polynomial": (
        bk.Power(bk.DotProduct(2, sigma0=1.0), 2) + pm.gp.cov.Polynomial(2, c=0.5, d=3, offset=0.2),
        lambda A, B: ref_dot(A, B, 1.0) ** 2 + (ref_pm_linear(A, B, 0.5) + 0.2) ** 3,
    ),
}


@pytest.mark.parametrize("name", list(COMBINATIONS))
def test_sums_and_products_with_pymc_kernels(name):
    kernel, ref = COMBINATIONS[name]
    X, Xs = make_inputs(2, seed=10)
    assert_matches(kernel, ref, X, Xs)


# --- validation --------------------------------------------------------------------------------
SE1 = [bk.ExpQuad(3, ls=1.0, active_dims=[i]) for i in range(3)]


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        pytest.param(partial(bk.Power, SE1[0], 2.5), ValueError, "`p`", id="power-2.5"),
        pytest.param(partial(bk.Power, SE1[0], 0), ValueError, "`p`", id="power-0"),
        pytest.param(partial(bk.Power, SE1[0], -1), ValueError, "`p`", id="power-negative"),
        pytest.param(partial(bk.Additive, SE1, 4), ValueError, "max_order", id="order>D"),
        pytest.param(partial(bk.Additive, SE1, 0), ValueError, "max_order", id="order=0"),
        pytest.param(partial(bk.Additive, SE1, 1.5), ValueError, "max_order", id="order=1.5"),
        pytest.param(
            partial(bk.Additive, SE1, 2, [1.0]), ValueError, "variances", id="variances-length"
        ),
        pytest.param(
            partial(bk.Additive, SE1, 2, [1.0, -1.0]), ValueError, "variances", id="variances<0"
        ),
        pytest.param(partial(bk.Additive, [], 1), ValueError, "kernels", id="no-kernels"),
        pytest.param(
            partial(bk.Additive, [*SE1, bk.ExpQuad(2, ls=1.0)], 2),
            ValueError,
            "input_dim",
            id="mixed-input_dim",
        ),
        pytest.param(partial(bk.Additive, [SE1[0], "k"], 1), TypeError, "kernels", id="not-kernel"),
        pytest.param(partial(bk.Normalized, np.eye(3)), TypeError, "base", id="normalized-array"),
        pytest.param(partial(bk.Power, 2.0, 2), TypeError, "base", id="power-number"),
        pytest.param(partial(bk.VerticalScale, SE1[0], 2.0), TypeError, "`a`", id="a-not-callable"),
        pytest.param(partial(bk.Warped, SE1[0], None, 3), TypeError, "`u`", id="u-not-callable"),
    ],
)
def test_invalid_parameters_raise(build, error, match):
    with pytest.raises(error, match=match):
        build()


@pytest.mark.parametrize(
    ("kernel", "match"),
    [
        (bk.VerticalScale(SE1[0], lambda X: X), "`a`"),  # returns a matrix, not a vector
        (bk.Warped(bk.ExpQuad(1, ls=1.0), lambda X: X[:, 0], 3), "`u`"),  # returns a vector
        (bk.Normalized(bk.DotProduct(3)), "input_dim"),
        (bk.Additive(SE1, 2), "input_dim"),
    ],
    ids=["VerticalScale", "Warped", "Normalized", "Additive"],
)
def test_bad_callables_and_inputs_raise_on_call(kernel, match):
    X = np.zeros((4, 3)) if match != "input_dim" else np.zeros((4, 2))
    with pytest.raises(ValueError, match=match):
        kernel(X)


@pytest.mark.parametrize(
    ("kernel", "attr"),
    [
        (bk.Normalized(SE1[0]), "base"),
        (bk.VerticalScale(SE1[0], lambda X: X[:, 0]), "a"),
        (bk.Warped(SE1[0], lambda X: X, 3), "u"),
        (bk.Power(SE1[0], 2), "p"),
        (bk.Additive(SE1, 2), "max_order"),
    ],
    ids=lambda v: v if isinstance(v, str) else type(v).__name__,
)
def test_kernels_are_immutable(kernel, attr):
    with pytest.raises(AttributeError, match=attr):
        setattr(kernel, attr, 2)


def test_power_is_exact_integer_power():
    """Power(k, p) is k^p, not exp(p log k): exact for negative kernel values too."""
    X = np.array([[1.0, -2.0], [-0.5, 3.0]])
    K = evaluate(bk.Power(bk.DotProduct(2), 3)(X))
    np.testing.assert_array_equal(K, (X @ X.T) ** 3)
    assert K[0, 1] < 0
    assert math.isclose(K[0, 1], (-0.5 - 6.0) ** 3)
