"""Reference values of stationary kernels under each metric (R&W §4.2.1.8, seed 003; PRML ARD,
seed 001 §4): r^2 = (x - x')^T M (x - x') with M = l^-2 I (isotropic), diag(l_d^-2) (ARD) or
Lambda Lambda^T + Psi (factor analysis)."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from scipy.special import gamma as gamma_fn
from scipy.special import jv, kv

import bayes_gp.kernels as bk
from tests.helpers import ATOL, RTOL, evaluate, evaluate_all


# --- NumPy references, functions of the scaled distance r --------------------------------------
def ref_expquad(r):  # R&W (4.9)
    return np.exp(-0.5 * r**2)


def ref_matern52(r):  # R&W (4.17b)
    return (1.0 + np.sqrt(5.0) * r + 5.0 * r**2 / 3.0) * np.exp(-np.sqrt(5.0) * r)


def ref_matern(r, nu):  # R&W (4.14), 1 at r = 0
    z = np.sqrt(2.0 * nu) * r
    zs = np.where(z > 0, z, 1.0)
    return np.where(z > 0, 2.0 ** (1.0 - nu) / gamma_fn(nu) * zs**nu * kv(nu, zs), 1.0)


def ref_ratquad(r, alpha):  # R&W (4.19)
    return (1.0 + r**2 / (2.0 * alpha)) ** (-alpha)


def ref_gamma_exp(r, gamma):  # R&W (4.18)
    return np.exp(-(r**gamma))


def ref_pp2(r, D):  # R&W (4.21), q = 2, j = floor(D/2) + 3
    j = D // 2 + 3
    return (
        np.maximum(1.0 - r, 0.0) ** (j + 2) * ((j**2 + 4 * j + 3) * r**2 + (3 * j + 6) * r + 3) / 3
    )


def ref_bessel(r, nu):  # R&W §4.2.1.8: c r^-nu J_nu(r), c = 2^nu Gamma(nu + 1)
    rs = np.where(r > 0, r, 1.0)
    return np.where(r > 0, 2.0**nu * gamma_fn(nu + 1.0) * rs ** (-nu) * jv(nu, rs), 1.0)


D = 3
KERNELS = {
    "ExpQuad": (bk.ExpQuad, ref_expquad),
    "Matern52": (bk.Matern52, ref_matern52),
    "Matern0.7": (partial(bk.Matern, nu=0.7), partial(ref_matern, nu=0.7)),
    "RatQuad": (partial(bk.RatQuad, alpha=1.5), partial(ref_ratquad, alpha=1.5)),
    "GammaExponential": (
        partial(bk.GammaExponential, gamma=1.3),
        partial(ref_gamma_exp, gamma=1.3),
    ),
    "PiecewisePolynomial": (partial(bk.PiecewisePolynomial, q=2), partial(ref_pp2, D=D)),
    "BesselOscillatory": (partial(bk.BesselOscillatory, nu=1.0), partial(ref_bessel, nu=1.0)),
}

LS_ARD = np.array([0.6, 1.4, 2.3])
LAMBDA = np.array([[0.9, -0.2], [0.5, 0.7], [-0.3, 0.4]])  # D x k, k = 2
PSI = np.array([0.4, 1.1, 0.2])
METRICS = {  # keyword arguments of the kernel, and M of r^2 = d^T M d
    "isotropic": ({"ls": 0.8}, np.eye(D) / 0.8**2),
    "ARD": ({"ls": LS_ARD}, np.diag(LS_ARD**-2)),
    "ls_inv": ({"ls_inv": 1.0 / LS_ARD}, np.diag(LS_ARD**-2)),
    "LengthScale": ({"metric": bk.LengthScale(LS_ARD, D)}, np.diag(LS_ARD**-2)),
    "FactorAnalysis": (
        {"metric": bk.FactorAnalysis(LAMBDA, PSI)},
        LAMBDA @ LAMBDA.T + np.diag(PSI),  # R&W §4.2.1.8: M = Lambda Lambda^T + Psi
    ),
}


def ref_dist(X, Xs, M):
    d = X[:, None, :] - Xs[None, :, :]
    return np.sqrt(np.einsum("ijk,kl,ijl->ij", d, M, d))


def make_inputs(n_cols: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.normal(scale=0.7, size=(7, n_cols))
    X[5] = X[2]  # r = 0 off the diagonal
    Xs = rng.normal(scale=0.7, size=(6, n_cols))
    Xs[1] = X[0]
    return X, Xs


def assert_all_close(values, expected, rtol=RTOL, atol=ATOL):
    for a, b in zip(values, expected, strict=True):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


@pytest.mark.parametrize("metric", list(METRICS))
@pytest.mark.parametrize("kernel", list(KERNELS))
def test_matches_reference_under_metric(kernel, metric):
    make, g = KERNELS[kernel]
    kwargs, M = METRICS[metric]
    X, Xs = make_inputs(D, seed=1)
    expected = (g(ref_dist(X, X, M)), g(ref_dist(X, Xs, M)), np.full(len(X), g(np.zeros(1))[0]))
    assert_all_close(evaluate_all(make(D, **kwargs), X, Xs), expected)


@pytest.mark.parametrize("kernel", list(KERNELS))
def test_metric_on_active_dims(kernel):
    """The metric acts on the active columns only (here 3 of 5)."""
    make, g = KERNELS[kernel]
    cols = [0, 2, 3]
    X, Xs = make_inputs(5, seed=2)
    kwargs, M = METRICS["FactorAnalysis"]
    k_fa = make(5, active_dims=cols, **kwargs)
    k_ard = make(5, active_dims=cols, ls=LS_ARD)
    A, B = X[:, cols], Xs[:, cols]
    values = evaluate(k_fa(X), k_fa(X, Xs), k_ard(X), k_ard(X, Xs))
    M_ard = np.diag(LS_ARD**-2)
    expected = [g(ref_dist(A, A, M)), g(ref_dist(A, B, M))]
    expected += [g(ref_dist(A, A, M_ard)), g(ref_dist(A, B, M_ard))]
    assert_all_close(values, expected)


@pytest.mark.parametrize("kernel", list(KERNELS))
def test_ard_equals_rescaled_inputs_and_fa_without_factors(kernel):
    """k_ARD(x, x') = k_1(x / l, x' / l); FactorAnalysis(Lambda=0, psi) = ARD with l = psi^-1/2."""
    make, _ = KERNELS[kernel]
    X, Xs = make_inputs(D, seed=3)
    ard = make(D, ls=LS_ARD)
    unit = make(D, ls=1.0)
    psi = LS_ARD**-2
    fa = make(D, metric=bk.FactorAnalysis(np.zeros((D, 2)), psi))
    values = evaluate(
        ard(X), ard(X, Xs), unit(X / LS_ARD), unit(X / LS_ARD, Xs / LS_ARD), fa(X), fa(X, Xs)
    )
    assert_all_close(values[2:4], values[:2])
    assert_all_close(values[4:6], values[:2])


def test_fa_metric_is_a_linear_map_of_the_inputs():
    """With Psi -> 0, r^2 = |Lambda^T (x - x')|^2: ExpQuad of the projections z = Lambda^T x."""
    X, Xs = make_inputs(D, seed=4)
    psi = np.full(D, 1e-300)  # positive, numerically zero
    fa = bk.ExpQuad(D, metric=bk.FactorAnalysis(LAMBDA, psi))
    proj = bk.ExpQuad(2, ls=1.0)
    values = evaluate(fa(X), fa(X, Xs), proj(X @ LAMBDA), proj(X @ LAMBDA, Xs @ LAMBDA))
    assert_all_close(values[:2], values[2:])


# --- validation --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("build", "match"),
    [
        pytest.param(lambda: bk.FactorAnalysis(LAMBDA, -PSI), "psi", id="psi<0"),
        pytest.param(lambda: bk.FactorAnalysis(LAMBDA, np.zeros(D)), "psi", id="psi=0"),
        pytest.param(lambda: bk.FactorAnalysis(LAMBDA, np.diag(PSI)), "psi", id="psi-matrix"),
        pytest.param(lambda: bk.FactorAnalysis(LAMBDA[:, 0], PSI), "Lambda", id="Lambda-vector"),
        pytest.param(lambda: bk.FactorAnalysis(LAMBDA, PSI[:2]), "Lambda", id="Lambda-rows"),
        pytest.param(
            lambda: bk.ExpQuad(2, metric=bk.FactorAnalysis(LAMBDA, PSI)),
            "factor-analysis",
            id="fa-dims",
        ),
        pytest.param(
            lambda: bk.ExpQuad(2, metric=bk.LengthScale(LS_ARD, D)), "metric", id="ls-metric-dims"
        ),
        pytest.param(
            lambda: bk.ExpQuad(D, ls=1.0, metric=bk.FactorAnalysis(LAMBDA, PSI)),
            "exactly one",
            id="ls-and-metric",
        ),
        pytest.param(lambda: bk.ExpQuad(D, ls=1.0, ls_inv=1.0), "exactly one", id="ls-and-ls_inv"),
        pytest.param(lambda: bk.ExpQuad(D), "exactly one", id="no-metric"),
        pytest.param(lambda: bk.ExpQuad(D, ls=[1.0, 2.0]), "`ls`", id="ls-length"),
        pytest.param(lambda: bk.ExpQuad(D, ls_inv=[1.0, -2.0, 1.0]), "ls_inv", id="ls_inv<0"),
        pytest.param(lambda: bk.ExpQuad(D, ls=[1.0, np.nan, 1.0]), "`ls`", id="ls-nan"),
    ],
)
def test_invalid_metrics_raise(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_metric_of_the_wrong_type_raises():
    with pytest.raises(TypeError, match="metric"):
        bk.ExpQuad(D, metric=np.eye(D))
