"""Gram matrices from a table of lags (bayes_gp.kernels.lags): the same matrix and the same
gradient as the kernel on all pairs, and used only where it is the same."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

import bayes_gp.kernels as bk
from bayes_gp.kernels.lags import gram, grid_positions, lag_gram, translation_invariant
from bayes_gp.linalg import EAGER_MODE


def _monthly(n=60, seed=0, gaps=(5, 17, 40)):
    """Decimal years of a monthly series with gaps, shuffled: a grid with step 1/12."""
    gaps = [g for g in gaps if g < n]
    x = np.delete(1990.0 + np.arange(n + len(gaps)) / 12.0, gaps)
    np.random.default_rng(seed).shuffle(x)
    return x[:, None]


def ref_expquad_periodic(x, ls, eta, period, ls_p):
    """eta^2 exp(-r^2 / 2 ls^2) (R&W 4.9) times exp(-2 sin^2(pi r / p) / ls_p^2) (R&W 4.31), on
    the differences of the inputs as given."""
    r = x[:, None] - x[None, :]
    return (
        eta**2
        * np.exp(-0.5 * (r / ls) ** 2)
        * np.exp(-2 * np.sin(np.pi * r / period) ** 2 / ls_p**2)
    )


KERNELS = {
    "expquad": lambda: 2.0 * bk.ExpQuad(1, ls=1.3),
    "composite": lambda: (
        3.0 * bk.ExpQuad(1, ls=50.0)
        + 2.0 * bk.ExpQuad(1, ls=8.0) * bk.Periodic(1, period=1.0, ls=1.5)
        + bk.RatQuad(1, ls=1.2, alpha=0.8)
        + 0.1 * bk.Matern32(1, ls=0.2)
    ),
    "matern12": lambda: bk.Matern12(1, ls=0.4),
    "periodized": lambda: bk.Periodized(bk.Matern32(1, ls=0.3), period=2.0),
    "pymc": lambda: (
        pm.gp.cov.Matern52(1, ls=0.7) * pm.gp.cov.Cosine(1, ls=3.0) + pm.gp.cov.Constant(0.5)
    ),
}


@pytest.mark.parametrize("name", list(KERNELS))
def test_lag_gram_is_the_kernel_on_all_pairs(name):
    X = _monthly()
    k = KERNELS[name]()
    G = lag_gram(k, X)
    assert G is not None
    A, B = pytensor.function([], [G, k(X)], mode=EAGER_MODE)()
    # PyMC's kernels form r^2 as x^2 + x'^2 - 2xx', which loses digits at x ~ 2000 (their
    # error, not the table's): against them the tolerance is that loss
    rtol = 1e-7 if name == "pymc" else 1e-10
    np.testing.assert_allclose(A, B, rtol=rtol, atol=rtol * np.abs(B).max())
    assert np.array_equal(A, A.T)


def test_lag_gram_against_the_numpy_reference():
    X = _monthly(n=50, seed=3)
    k = 1.7**2 * bk.ExpQuad(1, ls=0.8) * bk.Periodic(1, period=1.0, ls=0.9)
    (A,) = pytensor.function([], [lag_gram(k, X)], mode=EAGER_MODE)()
    np.testing.assert_allclose(A, ref_expquad_periodic(X[:, 0], 0.8, 1.7, 1.0, 0.9), rtol=1e-10)


def test_gradient_is_the_kernel_gradient():
    """d/dtheta sum(W * K) through the table (scatter-add of W into the lags) equals the
    gradient through the kernel on all pairs, for every hyperparameter of a sum of products."""
    X = _monthly(n=40, seed=1)
    ls, eta, period, ls_p, alpha = (pt.dscalar(n) for n in ("ls", "eta", "period", "ls_p", "a"))
    k = eta**2 * bk.ExpQuad(1, ls=ls) * bk.Periodic(1, period=period, ls=ls_p) + bk.RatQuad(
        1, ls=2 * ls, alpha=alpha
    )
    W = np.random.default_rng(2).normal(size=(X.shape[0], X.shape[0]))
    params = [ls, eta, period, ls_p, alpha]
    outs = []
    for K in (lag_gram(k, X), k(X)):
        outs += pt.grad(pt.sum(W * K), params)
    f = pytensor.function(params, outs, mode=EAGER_MODE)
    g = np.array(f(1.1, 0.7, 1.0, 1.3, 0.6))
    np.testing.assert_allclose(g[:5], g[5:], rtol=1e-9)
    assert np.all(np.abs(g[:5]) > 1e-3)  # every hyperparameter has a gradient to compare


def test_grid_positions():
    X = _monthly(n=30, seed=4)
    s, k = grid_positions(X[:, 0])
    np.testing.assert_allclose(s, 1 / 12, rtol=1e-12)
    np.testing.assert_allclose(X[:, 0], X.min() + s * k, rtol=0, atol=1e-9)
    assert grid_positions(np.array([0.0, 0.4, 1.0])) is None  # 1.0 is no multiple of 0.4
    assert grid_positions(np.array([2.0, 2.0])) is None
    assert grid_positions(np.array([0.0, 1.0, 2.0 + 1e-6])) is None  # off the grid
    s, k = grid_positions(np.array([3.0, 1.0, 1.0, 7.0]))  # repeats and gaps
    assert s == 2.0 and k.tolist() == [1, 0, 0, 3]


def test_where_it_does_not_apply_the_kernel_runs_on_all_pairs():
    k = bk.ExpQuad(1, ls=1.0)
    rng = np.random.default_rng(0)
    assert lag_gram(k, rng.uniform(size=(50, 1))) is None  # no grid
    assert lag_gram(k, _monthly(n=8)) is None  # too few points to gain
    assert lag_gram(bk.ExpQuad(2, ls=1.0), np.c_[_monthly(), _monthly()]) is None  # 2 columns
    assert lag_gram(k, pt.as_tensor_variable(_monthly())) is None  # a graph, not data
    spread = np.r_[0.0, 1e4, np.arange(1, 30)][:, None]  # 10^4 lags for 31 points
    assert lag_gram(k, spread) is None
    for nonstationary in (bk.DotProduct(1), bk.ExpQuad(1, ls=1.0) * bk.Wiener(1)):
        assert not translation_invariant(nonstationary)
        assert lag_gram(nonstationary, _monthly()) is None
    X = _monthly()
    (A,) = pytensor.function([], [gram(bk.DotProduct(1), X)], mode=EAGER_MODE)()
    np.testing.assert_allclose(A, X @ X.T, rtol=1e-12)


def test_models_on_different_grids_of_one_size_share_a_compiled_structure():
    """The lag indices are data and the table is padded to a power of two: two series of 40
    months with different gaps (40 and 46 lags: both padded to 64) have one fingerprint, so the
    second reuses the first's compiled model (bayes_gp.inference.compiled) with its own
    data; a series of another length has another."""
    from bayes_gp import GPRegression
    from bayes_gp.inference.compiled import lift

    def model(X):
        y = np.sin(X[:, 0]) + 0.1 * np.random.default_rng(0).normal(size=X.shape[0])
        return GPRegression(X, y, "matern32 + periodic").model

    a = lift(model(_monthly(n=40, gaps=())))
    b = lift(model(_monthly(n=40, gaps=(3, 10, 20, 25, 31, 33))))
    c = lift(model(_monthly(n=41, gaps=())))
    assert a.key == b.key != c.key
    assert not all(np.array_equal(a.data[k], b.data[k]) for k in a.data)
