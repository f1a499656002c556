"""Kernels on the levels of a factor (bayes_gp.kernels.categorical): values against the
equations (exchangeable correlation, Qian, Wu & Wu 2008; B = W W^T + diag(kappa), Bonilla et al.
2008) and PyMC's Coregion, PSD at the edge of the valid range, gradients, refusals, and a MAP
fit that tells correlated levels from independent ones."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from pytensor.gradient import verify_grad

import bayes_gp.kernels as K
from bayes_gp import GPRegression
from bayes_gp.kernels.parameters import kernel_parameters
from tests.helpers import PY_MODE, assert_matches, evaluate

RNG = np.random.default_rng(3)
L = 4
X = np.column_stack([RNG.uniform(0, 5, 11), RNG.integers(0, L, 11)]).astype(float)
XS = np.column_stack([RNG.uniform(0, 5, 6), RNG.integers(0, L, 6)]).astype(float)
W = np.array([[1.0, 0.2], [0.5, -0.4], [-0.3, 0.9], [0.0, 0.1]])
KAPPA = np.array([0.1, 0.2, 0.3, 0.05])


def _se(a, b, ls):
    return np.exp(-0.5 * (a[:, None] - b[None, :]) ** 2 / ls**2)


def exchangeable_ref(A, B, rho):
    """1 for equal levels, rho otherwise."""
    same = A[:, 1][:, None] == B[:, 1][None, :]
    return np.where(same, 1.0, rho)


def coregion_ref(A, B):
    Bm = W @ W.T + np.diag(KAPPA)
    return Bm[A[:, 1].astype(int)[:, None], B[:, 1].astype(int)[None, :]]


@pytest.mark.parametrize("rho", [0.7, -1 / 3, 0.0, 1.0])
def test_exchangeable_equals_its_definition(rho):
    k = K.Exchangeable(2, L, rho, active_dims=[1])
    assert_matches(k, lambda A, B: exchangeable_ref(A, B, rho), X, XS)
    # B's eigenvalues are 1 - rho (L - 1 times) and 1 + (L - 1) rho: PSD on the whole range
    Kx = evaluate(k(np.column_stack([np.zeros(L), np.arange(L)])))
    np.testing.assert_allclose(
        np.sort(np.linalg.eigvalsh(Kx)), np.sort([1 - rho] * (L - 1) + [1 + (L - 1) * rho]),
        atol=1e-12,
    )  # fmt: skip


def test_product_with_a_continuous_kernel():
    """k_t(t, t') B[c, c'] (the ICM as one GP on (t, c))."""
    k = K.ExpQuad(2, ls=0.8, active_dims=[0]) * K.Exchangeable(2, L, 0.6, active_dims=[1])
    assert_matches(k, lambda A, B: _se(A[:, 0], B[:, 0], 0.8) * exchangeable_ref(A, B, 0.6), X, XS)


def test_coregion_equals_its_definition_and_pymcs():
    k = K.Coregion(2, W=W, kappa=KAPPA, active_dims=[1])
    assert_matches(k, coregion_ref, X, XS)
    pymc = pm.gp.cov.Coregion(2, W=W, kappa=KAPPA, active_dims=[1])
    np.testing.assert_allclose(*evaluate(k(X, XS), pymc(X, XS)), rtol=1e-15)
    byB = K.Coregion(2, B=W @ W.T + np.diag(KAPPA), active_dims=[1])
    np.testing.assert_allclose(*evaluate(k(X, XS), byB(X, XS)), rtol=1e-14)


def test_gradients_match_finite_differences():
    def fun(rho, w, kappa):
        e = K.Exchangeable(2, L, rho, active_dims=[1])
        c = K.Coregion(2, W=w, kappa=kappa, active_dims=[1])
        return e(X).sum() + c(X, XS).sum()

    verify_grad(fun, [np.array(0.4), W, KAPPA], rng=np.random.default_rng(0), mode=PY_MODE)


def test_priors_are_named_after_the_attributes():
    e = K.Exchangeable(2, L, pm.Uniform.dist(-1 / 3, 1.0), active_dims=[1])
    assert list(kernel_parameters(e)) == ["rho"]
    c = K.Coregion(
        2, W=pm.Normal.dist(0, 1, shape=(L, 1)), kappa=pm.HalfNormal.dist(1, shape=L),
        active_dims=[1],
    )  # fmt: skip
    assert list(kernel_parameters(c)) == ["W", "kappa"]


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: K.Exchangeable(2, L, -0.5, active_dims=[1]), r"`rho` must lie in \[-0.333"),
        (lambda: K.Exchangeable(2, L, 1.2, active_dims=[1]), r"`rho` must lie in"),
        (lambda: K.Exchangeable(2, 1, 0.5, active_dims=[1]), r"`n_levels` must be an integer in 2"),
        (lambda: K.Exchangeable(2, L, 0.5), "one column of level codes"),
        (lambda: K.Coregion(2, W=W, kappa=-KAPPA, active_dims=[1]), "`kappa` must be non-negative"),
        (lambda: K.Coregion(2, W=W, kappa=KAPPA[:3], active_dims=[1]),
         "`W` has 4 rows .* but `kappa` has 3"),
        (lambda: K.Coregion(2, W=W[:, 0], kappa=KAPPA, active_dims=[1]), r"`W` must be an \(L, R\)"),
        (lambda: K.Coregion(2, W=W, active_dims=[1]), "needs `W` and `kappa`"),
        (lambda: K.Coregion(2, B=-np.eye(3), active_dims=[1]), "not positive semi-definite"),
        (lambda: K.Coregion(2, B=np.ones((2, 3)), active_dims=[1]), "square"),
        (lambda: K.Coregion(2, B=np.eye(2), W=W, active_dims=[1]), "not both"),
    ],
)  # fmt: skip
def test_bad_parameters_are_refused_by_name(build, match):
    with pytest.raises(ValueError, match=match):
        build()


@pytest.mark.parametrize("code", [4.0, -1.0, 1.5])
def test_codes_outside_the_levels_are_refused(code):
    k = K.Exchangeable(2, L, 0.5, active_dims=[1])
    bad = X.copy()
    bad[3, 1] = code
    with pytest.raises(ValueError, match=r"column 1 must hold level codes 0..3"):
        k(bad)
    with pytest.raises(ValueError, match="level codes"):
        k(X, bad)


@pytest.mark.parametrize(("rho", "low", "high"), [(0.9, 0.7, 1.0), (0.0, -0.2, 0.25)])
def test_map_fit_tells_correlated_levels_from_independent_ones(rho, low, high):
    """Six levels drawn from the ICM with rho = 0.9 (nearly one shared curve) or rho = 0
    (independent curves): the MAP rho lands in the right region."""
    n_levels = 6
    t = np.tile(np.linspace(0, 6, 8), n_levels)
    Xd = np.column_stack([t, np.repeat(np.arange(n_levels), 8)]).astype(float)
    truth = K.ExpQuad(2, ls=1.0, active_dims=[0]) * K.Exchangeable(
        2, n_levels, rho, active_dims=[1]
    )
    cov = evaluate(truth(Xd)) + 0.01 * np.eye(t.size)
    y = np.random.default_rng(0).multivariate_normal(np.zeros(t.size), cov)
    kernel = (
        pm.HalfNormal.dist(1.0) ** 2
        * K.ExpQuad(2, ls=1.0, active_dims=[0])
        * K.Exchangeable(2, n_levels, pm.Uniform.dist(-1 / 5, 1.0), active_dims=[1])
    )
    fit = GPRegression(Xd, y, kernel, mean="zero", priors={"sigma": 0.1}).fit_map(
        n_restarts=1, random_seed=0
    )
    assert low < fit.params["rho"] < high
