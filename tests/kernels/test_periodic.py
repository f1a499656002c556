"""Reference values of the periodic kernels (R&W eq. 4.31 and §4.2.1.8, seed 003)."""

from __future__ import annotations

import itertools
from functools import partial

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from sklearn.gaussian_process import kernels as skk

import bayes_gp.kernels as bk
from tests.helpers import ATOL, RTOL, evaluate


# --- NumPy references --------------------------------------------------------------------------
def ref_periodic(X, Xs, period, ls):
    """R&W (4.31) with period p, per dimension: exp(-sum_d 2 sin^2(pi (x_d - x'_d)/p_d) / l_d^2)."""
    s = np.sin(np.pi * (X[:, None, :] - Xs[None, :, :]) / period)
    return np.exp(-np.sum(2.0 * s**2 / np.square(ls), axis=-1))


def ref_rw_431(x, xs, ls):
    """R&W (4.31) literally (period 2 pi, 1-D): exp(-2 sin^2((x - x')/2) / l^2)."""
    return np.exp(-2.0 * np.sin((x[:, None] - xs[None, :]) / 2.0) ** 2 / ls**2)


def ref_expquad(r):  # R&W (4.9)
    return np.exp(-0.5 * r**2)


def ref_matern52(r):  # R&W (4.17b)
    return (1.0 + np.sqrt(5.0) * r + 5.0 * r**2 / 3.0) * np.exp(-np.sqrt(5.0) * r)


def ref_periodized(g, X, Xs, ls, period, n_images):
    """R&W §4.2.1.8: k_T(tau) = sum_{m in Z^D} k(tau + m p), as documented by ``Periodized``:

    tau is wrapped into the central cell [-p/2, p/2]^D (exact, the sum is p-periodic), then the sum
    is truncated to |m_d| <= M.
    """
    D = X.shape[1]
    tau = X[:, None, :] - Xs[None, :, :]
    tau = tau - period * np.round(tau / period)
    total = np.zeros((len(X), len(Xs)))
    for m in itertools.product(range(-n_images, n_images + 1), repeat=D):
        total += g(np.sqrt(np.sum(((tau + np.asarray(m) * period) / ls) ** 2, axis=-1)))
    return total


def ref_periodized_se_fourier(tau, ls, period, n_terms=40):
    """The infinite periodised SE sum in 1-D by Poisson summation (a theta function):

    sum_m exp(-(tau + m p)^2 / 2l^2) = (sqrt(2 pi) l / p) (1 + 2 sum_k exp(-2 pi^2 k^2 l^2 / p^2)
    cos(2 pi k tau / p)).
    """
    k = np.arange(1, n_terms + 1)[:, None, None]
    weight = np.exp(-2.0 * np.pi**2 * k**2 * ls**2 / period**2)
    series = weight * np.cos(2 * np.pi * k * tau / period)
    return np.sqrt(2.0 * np.pi) * ls / period * (1.0 + 2.0 * series.sum(axis=0))


def make_inputs(D: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3.0, 3.0, size=(7, D))
    X[4] = X[1]  # r = 0 off the diagonal
    Xs = rng.uniform(-3.0, 3.0, size=(5, D))
    Xs[0] = X[2]
    return X, Xs


# --- Periodic ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("D", "period", "ls"),
    [
        (1, 1.0, 0.5),
        (1, 2.7, 1.3),
        (1, 0.4, [2.0]),
        (2, 1.5, 0.8),
        (2, [1.5, 0.6], [0.8, 1.9]),
        (3, [2.0, 1.1, 0.7], 1.2),
    ],
)
def test_periodic_matches_reference(D, period, ls):
    X, Xs = make_inputs(D, seed=D)
    k = bk.Periodic(D, period=period, ls=ls)
    K, Ks, Kd = evaluate(k(X), k(X, Xs), k(X, diag=True))
    np.testing.assert_allclose(K, ref_periodic(X, X, period, ls), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(Ks, ref_periodic(X, Xs, period, ls), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(Kd, np.ones(len(X)), rtol=RTOL, atol=ATOL)
    # Periodic in every active dimension: shifting x' by one period changes nothing.
    shifted = evaluate(k(X, Xs + np.asarray(period) * np.ones(D)))
    np.testing.assert_allclose(shifted, Ks, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("ls", [0.3, 1.0, 2.5])
def test_periodic_is_rw_431_with_period_2pi(ls):
    """R&W writes (4.31) for u(x) = (cos x, sin x), i.e. period 2 pi."""
    X, Xs = make_inputs(1, seed=11)
    k = bk.Periodic(1, period=2 * np.pi, ls=ls)
    K, Ks = evaluate(k(X), k(X, Xs))
    np.testing.assert_allclose(K, ref_rw_431(X[:, 0], X[:, 0], ls), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(Ks, ref_rw_431(X[:, 0], Xs[:, 0], ls), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(("period", "ls"), [(1.0, 0.5), (2.3, 1.7)])
def test_periodic_is_expquad_on_mackay_warping(period, ls):
    """R&W §4.2.4: SE on u(x) = (cos(2 pi x/p), sin(2 pi x/p)), since |u - u'|^2 = 4 sin^2."""
    X, Xs = make_inputs(1, seed=12)

    def u(x):
        return pt.concatenate([pt.cos(2 * np.pi * x / period), pt.sin(2 * np.pi * x / period)], 1)

    warped = bk.Warped(bk.ExpQuad(2, ls=ls), u, input_dim=1)
    k = bk.Periodic(1, period=period, ls=ls)
    a, b, c, d = evaluate(k(X), warped(X), k(X, Xs), warped(X, Xs))
    np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(c, d, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(("period", "ls"), [(1.0, 0.5), (2.5, 1.3), (0.6, 3.0)])
def test_periodic_matches_sklearn_exp_sine_squared(period, ls):
    """scikit-learn's ExpSineSquared is exp(-2 sin^2(pi d/p) / l^2) = R&W (4.31) in 1-D."""
    X, Xs = make_inputs(1, seed=13)
    k = bk.Periodic(1, period=period, ls=ls)
    sk = skk.ExpSineSquared(length_scale=ls, periodicity=period)
    K, Ks, Kd = evaluate(k(X), k(X, Xs), k(X, diag=True))
    np.testing.assert_allclose(K, sk(X), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(Ks, sk(X, Xs), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(Kd, sk.diag(X), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("D", "period", "ls"), [(1, 1.3, 0.6), (2, 0.9, [0.4, 1.5])])
def test_periodic_matches_pymc_with_half_length_scale(D, period, ls):
    """PyMC's Periodic has -1/2 in the exponent where (4.31) has -2.

    So ``pm.gp.cov.Periodic(ls=l)`` equals ``bayes_gp.Periodic(ls=2l)``.
    """
    X, Xs = make_inputs(D, seed=14)
    ours = bk.Periodic(D, period=period, ls=2.0 * np.asarray(ls))
    theirs = pm.gp.cov.Periodic(D, period=period, ls=ls)
    a, b, c, d = evaluate(ours(X), theirs(X), ours(X, Xs), theirs(X, Xs))
    np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(c, d, rtol=RTOL, atol=ATOL)


# --- Periodized --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("base", "g", "D", "ls", "period", "n_images"),
    [
        (bk.ExpQuad, ref_expquad, 1, 0.7, 2.0, 0),
        (bk.ExpQuad, ref_expquad, 1, 0.7, 2.0, 3),
        (bk.ExpQuad, ref_expquad, 1, 1.5, 1.2, 8),
        (bk.Matern52, ref_matern52, 1, 0.9, 3.0, 4),
        (bk.ExpQuad, ref_expquad, 2, [0.5, 1.1], [2.0, 1.5], 2),
        (bk.Matern52, ref_matern52, 2, 0.6, 1.7, 1),
    ],
)
def test_periodized_matches_direct_sum(base, g, D, ls, period, n_images):
    X, Xs = make_inputs(D, seed=20 + n_images)
    k = bk.Periodized(base(D, ls=ls), period=period, n_images=n_images)
    K, Ks, Kd = evaluate(k(X), k(X, Xs), k(X, diag=True))
    args = (np.asarray(ls), np.asarray(period), n_images)
    np.testing.assert_allclose(K, ref_periodized(g, X, X, *args), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(Ks, ref_periodized(g, X, Xs, *args), rtol=RTOL, atol=ATOL)
    zero = np.zeros((1, D))
    np.testing.assert_allclose(Kd, ref_periodized(g, zero, zero, *args)[0, 0], rtol=RTOL)
    shifted = evaluate(k(X, Xs - 2.0 * np.asarray(period) * np.ones(D)))
    np.testing.assert_allclose(shifted, Ks, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(("ls", "period"), [(0.5, 2.0), (0.9, 1.5)])
def test_periodized_expquad_converges_to_poisson_sum(ls, period):
    """With many images the truncated sum equals the infinite periodisation (theta function)."""
    X, Xs = make_inputs(1, seed=30)
    k = bk.Periodized(bk.ExpQuad(1, ls=ls), period=period, n_images=12)
    K, Ks, Kd = evaluate(k(X), k(X, Xs), k(X, diag=True))
    tau = X[:, 0][:, None] - Xs[:, 0][None, :]
    np.testing.assert_allclose(Ks, ref_periodized_se_fourier(tau, ls, period), rtol=1e-10)
    tau = X[:, 0][:, None] - X[:, 0][None, :]
    np.testing.assert_allclose(K, ref_periodized_se_fourier(tau, ls, period), rtol=1e-10)
    np.testing.assert_allclose(Kd, ref_periodized_se_fourier(0.0, ls, period)[0, 0], rtol=1e-10)


def test_periodized_acts_on_active_dims_only():
    base = bk.ExpQuad(3, ls=[0.6, 1.4], active_dims=[0, 2])
    k = bk.Periodized(base, period=[1.5, 2.5], n_images=2)
    X, Xs = make_inputs(3, seed=31)
    K, Ks = evaluate(k(X), k(X, Xs))
    args = (np.array([0.6, 1.4]), np.array([1.5, 2.5]), 2)
    np.testing.assert_allclose(K, ref_periodized(ref_expquad, X[:, [0, 2]], X[:, [0, 2]], *args))
    np.testing.assert_allclose(Ks, ref_periodized(ref_expquad, X[:, [0, 2]], Xs[:, [0, 2]], *args))


# --- validation --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("build", "match"),
    [
        pytest.param(
            lambda: bk.Periodic(2, period=1.0, metric=bk.FactorAnalysis(np.ones((2, 1)), [1, 1])),
            "metric",
            id="factor-analysis",
        ),
        pytest.param(partial(bk.Periodic, 1, period=0.0, ls=1.0), "period", id="period=0"),
        pytest.param(partial(bk.Periodic, 1, period=-2.0, ls=1.0), "period", id="period<0"),
        pytest.param(partial(bk.Periodic, 2, period=[1, 2, 3], ls=1.0), "period", id="p-len"),
        pytest.param(partial(bk.Periodic, 1, period=1.0, ls=-1.0), "`ls`", id="ls<0"),
        pytest.param(partial(bk.Periodic, 2, period=1.0, ls=[1, 2, 3]), "`ls`", id="ls-len"),
        pytest.param(
            lambda: bk.Periodized(bk.ExpQuad(1, ls=1.0), period=-1.0), "period", id="pz-period"
        ),
        pytest.param(
            lambda: bk.Periodized(bk.ExpQuad(2, ls=1.0), period=[1.0, 2.0, 3.0]),
            "period",
            id="pz-period-len",
        ),
        pytest.param(
            lambda: bk.Periodized(bk.ExpQuad(1, ls=1.0), period=1.0, n_images=-1),
            "n_images",
            id="n_images<0",
        ),
        pytest.param(
            lambda: bk.Periodized(bk.ExpQuad(1, ls=1.0), period=1.0, n_images=1.5),
            "n_images",
            id="n_images-float",
        ),
        pytest.param(
            lambda: bk.Periodized(bk.ExpQuad(3, ls=1.0), period=1.0, n_images=30),
            "n_images",
            id="lattice-too-big",
        ),
    ],
)
def test_invalid_parameters_raise(build, match):
    with pytest.raises(ValueError, match=match):
        build()


@pytest.mark.parametrize(
    "base", [bk.DotProduct(1), bk.Periodic(1, period=1.0, ls=1.0)], ids=["DotProduct", "Periodic"]
)
def test_periodized_needs_a_non_periodic_stationary_base(base):
    with pytest.raises(TypeError, match="base"):
        bk.Periodized(base, period=1.0)


def test_wrong_number_of_columns_raises():
    for k in (bk.Periodic(2, period=1.0, ls=1.0), bk.Periodized(bk.ExpQuad(2, ls=1.0), 1.0)):
        with pytest.raises(ValueError, match="input_dim"):
            k(np.zeros((3, 1)))


@pytest.mark.parametrize(
    ("kernel", "attr"),
    [
        (bk.Periodic(1, period=1.0, ls=1.0), "period"),
        (bk.Periodized(bk.ExpQuad(1, ls=1.0), period=1.0), "n_images"),
    ],
    ids=["Periodic", "Periodized"],
)
def test_kernels_are_immutable(kernel, attr):
    with pytest.raises(AttributeError, match=attr):
        setattr(kernel, attr, 2.0)


def test_periodic_spectral_density_names_what_works():
    """The defect: the message pointed to pm.gp.HSGPPeriodic, which then rejects this kernel.
    It now names the approximations that do take a periodic kernel, and the advice works."""
    import pymc as pm

    from bayes_gp import GPRegression

    with pytest.raises(NotImplementedError, match=r"approx='vfe' or approx='fitc'") as err:
        bk.Periodic(1, period=1.0, ls=1.0).power_spectral_density(pt.ones((3, 1)))
    assert "HSGPPeriodic" not in str(err.value)
    x = np.linspace(0, 10, 300)
    y = np.sin(2 * np.pi * x) + 0.1 * np.random.default_rng(0).standard_normal(300)
    gp = GPRegression(x, y, "periodic", approx="vfe", approx_options={"n_inducing": 30})
    assert isinstance(gp.model, pm.Model)
    fit = gp.fit_map(n_restarts=1, random_seed=0)
    assert np.isfinite(fit.log_marginal_likelihood)
    assert abs(float(fit.params["period"]) - 1.0) < 0.01
