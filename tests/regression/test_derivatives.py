"""Derivative GPs (R&W §9.4): kernel derivatives by automatic differentiation against finite
differences and closed forms, GPRegression.predict_derivative against finite differences of
predict, the NUTS mixture, refusals, and an end-to-end check on sin(x). The suite runs one
kernel of each kind (:data:`SUITE_KERNELS`, :data:`SUITE_MODELS`);
``validation/tests/test_derivatives_long.py`` runs every kernel and model, the closed forms of the
zero-lag derivatives and the structured likelihoods."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
import xarray as xr

from bayes_gp import GPRegression
from bayes_gp import kernels as K
from bayes_gp.inference import MapFit
from bayes_gp.kernels.derivatives import DERIVATIVE_MODE, derivative_table, mean_derivative

# ------------------------------------------------------------------ kernel derivatives
KERNELS = {
    "expquad": lambda: 1.3 * K.ExpQuad(1, ls=0.7),
    "matern32": lambda: K.Matern32(1, ls=0.7),
    "matern52": lambda: K.Matern52(1, ls=0.7),
    "ratquad": lambda: K.RatQuad(1, alpha=1.3, ls=0.7),
    "periodic": lambda: K.Periodic(1, period=2.0, ls=0.9),
    "sum": lambda: 2.0 * K.ExpQuad(1, ls=0.5) + K.Matern52(1, ls=1.1),
    "product": lambda: K.ExpQuad(1, ls=1.5) * K.Periodic(1, period=2.0, ls=0.9),
    "pp2": lambda: K.PiecewisePolynomial(1, ls=2.3, q=2),  # no lag on the support edge
    "matern_bessel": lambda: K.Matern(1, nu=2.7, ls=0.8),
}
ORDER = {"matern32": 1}
#: The cases the suite runs (each kind of kernel once: stationary smooth, Matérn with one
#: derivative, periodic, a product); validation/tests/test_derivatives_long.py runs them all,
#: and the tests marked ``long`` here, with ``./run validate``.
SUITE_KERNELS = ("expquad", "matern32", "periodic", "product")

A_PTS = np.array([[0.3], [1.1], [2.0]])
B_PTS = np.array([[0.0], [0.8], [1.7], [2.5]])  # every lag at least 0.2 from A_PTS


def _table_fn(kernel, order, D=1, dim=0):
    A, B = pt.dmatrix("A"), pt.dmatrix("B")
    tab = derivative_table(kernel, A, B, dim, order, D)
    keys = list(tab)
    fn = pytensor.function([A, B], [tab[k] for k in keys], mode=DERIVATIVE_MODE)
    return lambda a, b: dict(zip(keys, fn(a, b), strict=True))


def _close(actual, expected, rtol):
    scale = np.max(np.abs(expected))
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * scale)


@pytest.mark.parametrize("name", SUITE_KERNELS)
def test_kernel_derivatives_equal_finite_differences(name):
    """Each derivative table entry equals the central difference (step 1e-5, error ~1e-10) of
    the entry one order lower, in a or in b, to 1e-6 relative; the lags stay away from 0, where
    a Matérn kernel is not smooth."""
    order = ORDER.get(name, 2)
    table = _table_fn(KERNELS[name](), order)
    h = 1e-5
    at = table(A_PTS, B_PTS)
    plus_a, minus_a = table(A_PTS + h, B_PTS), table(A_PTS - h, B_PTS)
    plus_b, minus_b = table(A_PTS, B_PTS + h), table(A_PTS, B_PTS - h)
    for (p, q), value in at.items():
        if p > 0:
            fd = (plus_a[(p - 1, q)] - minus_a[(p - 1, q)]) / (2 * h)
        elif q > 0:
            fd = (plus_b[(p, q - 1)] - minus_b[(p, q - 1)]) / (2 * h)
        else:
            continue
        _close(value, fd, 1e-6)


def _richardson(table, key, delta=1e-3):
    """The limit at zero lag of entry ``key`` from lags delta, 2 delta and 4 delta (Richardson
    extrapolation cancelling the delta and delta^2 terms of the expansion in |lag|, which a
    Matérn kernel has): error O(delta^3)."""
    a = np.array([[0.5]])
    v1, v2, v4 = (table(a + s * delta, a)[key] for s in (1, 2, 4))
    return (8 * v1 - 6 * v2 + v4) / 3


#: the Bessel path of a general-nu Matérn kernel loses digits at lags near 0 (K_nu of a small
#: argument): its zero-lag values are checked against the closed forms instead
LIMIT_KERNELS = [k for k in KERNELS if k != "matern_bessel"]


@pytest.mark.parametrize("name", ("expquad", "matern32"))
def test_zero_lag_is_the_limit(name):
    """At coincident inputs (where sqrt(r^2) has no derivative) the table holds the limit of the
    derivatives at small lags: to 1e-6 for the even ones, exactly 0 for the odd ones."""
    order = ORDER.get(name, 2)
    table = _table_fn(KERNELS[name](), order)
    a = np.array([[0.5]])
    at = table(a, a)
    for key in [(1, 0), (0, 1), (1, 1), (2, 0), (2, 2)]:
        if max(key) > order:
            continue
        if sum(key) % 2:  # 0 at zero lag; the extrapolation leaves a delta^3 term (~1e-9 x 100)
            np.testing.assert_allclose(_richardson(table, key), 0.0, atol=1e-5)
            np.testing.assert_array_equal(at[key], 0.0)
        else:
            np.testing.assert_allclose(at[key], _richardson(table, key), rtol=1e-6)


def test_ard_and_other_dimension():
    """Two inputs with ARD length-scales: the derivative along input 1 equals finite
    differences along it, and at zero lag is eta^2 / l_1^2 (SE); a kernel on input 0 only
    (active_dims) has zero derivative along input 1."""
    k = K.ExpQuad(2, ls=[0.5, 2.0])
    a = np.array([[0.1, 0.2], [1.0, -0.5]])
    b = np.array([[0.3, 1.0], [1.0, -0.5]])
    table = _table_fn(k, 1, D=2, dim=1)
    h = 1e-5
    e = np.array([[0.0, h]])
    fd = (table(a + e, b)[(0, 0)] - table(a - e, b)[(0, 0)]) / (2 * h)
    _close(table(a, b)[(1, 0)], fd, 1e-6)
    np.testing.assert_allclose(table(a, a)[(1, 1)].diagonal(), 1 / 2.0**2, rtol=1e-12)
    only0 = _table_fn(K.Matern52(2, ls=0.5, active_dims=[0]), 1, D=2, dim=1)(a, b)
    np.testing.assert_array_equal(only0[(1, 0)], 0.0)
    np.testing.assert_array_equal(only0[(1, 1)], 0.0)


def test_mean_derivative_of_a_linear_mean():
    A = pt.dmatrix("A")
    mean = pm.gp.mean.Linear(coeffs=np.array([2.0, -3.0]), intercept=1.0)
    d1 = pytensor.function([A], mean_derivative(mean, A, 1, 1, 2), mode=DERIVATIVE_MODE)
    d2 = pytensor.function([A], mean_derivative(mean, A, 1, 2, 2), mode=DERIVATIVE_MODE)
    x = np.array([[0.0, 1.0], [2.0, 5.0]])
    np.testing.assert_allclose(d1(x), [-3.0, -3.0])
    np.testing.assert_allclose(d2(x), [0.0, 0.0])


# ------------------------------------------------------------------ predictions
def _data(n=30, seed=0):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 6, n))
    return x, np.sin(x) + 0.1 * rng.standard_normal(n)


def _values_for(model):
    """Fixed hyperparameters by their names' endings."""
    base = {"ls": 1.1, "eta": 0.9, "sigma": 0.15, "alpha": 1.5, "period": 3.0,
            "slope": np.array([0.4]), "intercept": 0.1}  # fmt: skip
    return {n: base[n.rsplit("_", 1)[-1]] for n in model.hyperparameters}


MODELS = {
    "expquad": {"kernel": "expquad"},
    "matern32": {"kernel": "matern32"},
    "matern52": {"kernel": "matern52"},
    "ratquad": {"kernel": "ratquad"},
    "periodic": {"kernel": "periodic"},
    "sum": {"kernel": "expquad + matern52"},
    "product": {"kernel": "expquad * periodic"},
    "linear_mean": {"kernel": "matern52", "mean": "linear"},
    "object": {"kernel": 1.2 * K.Matern52(1, ls=pm.Gamma.dist(2.0, 2.0))},
    # non-stationary leaves, differentiated by automatic differentiation alone
    "nonstationary": {
        "kernel": K.NeuralNetwork(1, Sigma=1.0)
        + K.Gibbs(1, lambda X: 0.5 + 0.1 * X[:, 0])
        + K.Warped(K.ExpQuad(1, ls=1.0), lambda X: X**1.5, 1)
        + K.DotProduct(1, sigma0=1.0)
    },
}

GRID = np.array([0.25, 1.0, 2.2, 3.7, 5.9, 6.6])
#: The models the suite runs (validation: all of :data:`MODELS`).
SUITE_MODELS = ("expquad", "matern32", "object")


def _fd_cov(model, fit, x, h):
    """Covariance of (f(x+h) - f(x-h)) / 2h from the full predictive covariance at x +- h."""
    both = np.concatenate([x + h, x - h])
    cov = model.predict(both, fit, diag=False).cov
    m = x.shape[0]
    pp, pm_, mm = cov[:m, :m], cov[:m, m:], cov[m:, m:]
    return (pp - pm_ - pm_.T + mm) / (4 * h * h)


@pytest.mark.parametrize("name", SUITE_MODELS)
def test_derivative_prediction_equals_finite_differences(name):
    """Mean of f' against the central difference (h = 1e-5) of predict's mean to 1e-6; mean of
    f'' against that of f'; variances against the covariance of the difference quotient from
    predict's full covariance (h = 1e-4: rounding ~1e-14/h^2 and, for Matérn 3/2, an O(h)
    term of the |lag|^3 in its kernel, so 1e-3); f'''s variance likewise from f''s covariance."""
    x, y = _data()
    model = GPRegression(x, y, **MODELS[name])
    fit = MapFit(_values_for(model), 0.0, True)
    d1 = model.predict_derivative(GRID, fit, diag=False)
    h = 1e-5
    fd_mean = (model.predict(GRID + h, fit).mean - model.predict(GRID - h, fit).mean) / (2 * h)
    _close(d1.mean, fd_mean, 1e-6)
    _close(d1.var, np.diag(_fd_cov(model, fit, GRID, 1e-4)), 1e-3)
    _close(np.diag(d1.cov), d1.var, 1e-12)
    np.testing.assert_allclose(d1.lower, d1.mean - 1.880793608151251 * d1.sd)
    if name == "matern32":
        return
    d2 = model.predict_derivative(GRID, fit, order=2)
    plus = model.predict_derivative(GRID + h, fit, diag=False)
    minus = model.predict_derivative(GRID - h, fit, diag=False)
    _close(d2.mean, (plus.mean - minus.mean) / (2 * h), 1e-6)
    hv = 1e-4
    both = model.predict_derivative(np.concatenate([GRID + hv, GRID - hv]), fit, diag=False).cov
    m = GRID.shape[0]
    fd_var = np.diag(both[:m, :m] - both[:m, m:] - both[m:, :m] + both[m:, m:]) / (4 * hv * hv)
    _close(d2.var, fd_var, 1e-3)


def _posterior(model, draws: list[dict]):
    ds = {}
    for name in model.hyperparameters:
        v = np.asarray([d[name] for d in draws], float)[None]
        dims = ("chain", "draw", *[f"{name}_dim_{i}" for i in range(v.ndim - 2)])
        ds[name] = (dims, v)
    coords = {"chain": [0], "draw": np.arange(len(draws))}
    return xr.DataTree.from_dict({"posterior": xr.Dataset(ds, coords=coords)})


def test_nuts_mixture():
    """Two identical draws give the point prediction (band to 1e-10: the mixture's quantiles
    by bisection); two different draws give the equal-weight mixture: mean by total
    expectation, variance by total variance."""
    x, y = _data()
    model = GPRegression(x, y, "expquad")
    p1 = {"ls": 1.1, "eta": 0.9, "sigma": 0.15}
    p2 = {"ls": 0.8, "eta": 1.3, "sigma": 0.2}
    for order in (1, 2):
        point = model.predict_derivative(GRID, MapFit(p1, 0.0, True), order=order)
        same = model.predict_derivative(GRID, _posterior(model, [p1, p1]), order=order)
        np.testing.assert_allclose(same.mean, point.mean, rtol=1e-12)
        np.testing.assert_allclose(same.var, point.var, rtol=1e-12)
        np.testing.assert_allclose(same.lower, point.lower, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(same.upper, point.upper, rtol=1e-10, atol=1e-10)
        assert same.extra["n_draws"] == 2 and same.extra["order"] == order
    a = model.predict_derivative(GRID, MapFit(p1, 0.0, True))
    b = model.predict_derivative(GRID, MapFit(p2, 0.0, True))
    mix = model.predict_derivative(GRID, _posterior(model, [p1, p2]))
    np.testing.assert_allclose(mix.mean, (a.mean + b.mean) / 2, rtol=1e-12)
    total = (a.var + b.var) / 2 + ((a.mean - b.mean) / 2) ** 2
    np.testing.assert_allclose(mix.var, total, rtol=1e-12)
    assert np.all(mix.lower >= np.minimum(a.lower, b.lower) - 1e-12)
    assert np.all(mix.upper <= np.maximum(a.upper, b.upper) + 1e-12)
    with pytest.raises(ValueError, match="only available for MAP"):
        model.predict_derivative(GRID, _posterior(model, [p1, p2]), diag=False)


def test_dimension_by_name_and_linear_trend():
    """Two inputs named by a DataFrame: the derivative along "b" of y = sin(a) + 0.5 b is about
    0.5, chosen by name or index alike."""
    import pandas as pd

    rng = np.random.default_rng(2)
    X = pd.DataFrame({"a": rng.uniform(0, 6, 60), "b": rng.uniform(0, 6, 60)})
    y = np.sin(X["a"]) + 0.5 * X["b"] + 0.05 * rng.standard_normal(60)
    model = GPRegression(X, y, "expquad", ard=True)
    fit = MapFit({"ls": np.array([1.0, 8.0]), "eta": 1.5, "sigma": 0.05}, 0.0, True)
    Xn = pd.DataFrame({"a": [1.0, 3.0, 5.0], "b": [2.0, 3.0, 4.0]})
    by_name = model.predict_derivative(Xn, fit, dim="b")
    by_index = model.predict_derivative(Xn, fit, dim=1)
    np.testing.assert_array_equal(by_name.mean, by_index.mean)
    np.testing.assert_allclose(by_name.mean, 0.5, atol=0.1)
    assert by_name.extra["dim"] == 1


@pytest.mark.parametrize(
    ("kernel", "order", "match"),
    [
        ("matern12", 1, "nu > 1"),
        ("exponential", 1, "nu > 1"),
        ("matern32", 2, "nu > 2"),
        ("pp0", 1, "q >= 1"),
        ("pp1", 2, "q >= 2"),
        ("expquad + matern32", 2, "nu > 2"),
        (K.GammaExponential(1, gamma=1.5, ls=1.0), 1, "gamma < 2"),
        (K.Wiener(1), 1, "nowhere differentiable"),
    ],
)
def test_refuses_where_sample_paths_are_not_differentiable(kernel, order, match):
    x, y = _data()
    x = x + 0.1  # the Wiener process lives on x >= 0
    model = GPRegression(x, y, kernel, noise=0.1)
    fit = MapFit({n: 1.0 for n in model.hyperparameters}, 0.0, True)
    with pytest.raises(ValueError, match=match):
        model.predict_derivative(GRID, fit, order=order)


def test_refuses_a_construction_around_a_matern_kernel():
    """Warped(Matern52): autodiff through the inner kernel's sqrt(r^2) is not exact at
    coincident inputs, and the zero-lag limits are only known for the kernel itself."""
    x, y = _data()
    model = GPRegression(x + 0.1, y, K.Warped(K.Matern52(1, ls=1.0), lambda X: X**1.5, 1))
    fit = MapFit({"sigma": 0.1}, 0.0, True)
    with pytest.raises(NotImplementedError, match="inner Matern52"):
        model.predict_derivative(GRID, fit)


def test_pp1_has_a_first_derivative():
    x, y = _data()
    model = GPRegression(x, y, "pp1")
    fit = MapFit({"ls": 2.0, "eta": 1.0, "sigma": 0.1}, 0.0, True)
    d = model.predict_derivative(GRID, fit)
    h = 1e-5
    fd = (model.predict(GRID + h, fit).mean - model.predict(GRID - h, fit).mean) / (2 * h)
    _close(d.mean, fd, 1e-6)


def test_argument_errors():
    x, y = _data()
    model = GPRegression(x, y, "expquad")
    fit = MapFit({"ls": 1.0, "eta": 1.0, "sigma": 0.1}, 0.0, True)
    for order in (0, 3, 1.0, True, "1"):
        with pytest.raises(ValueError, match="`order` must be 1"):
            model.predict_derivative(GRID, fit, order=order)
    for dim in (1, -1, 0.0, "z"):
        with pytest.raises(ValueError, match="`dim`"):
            model.predict_derivative(GRID, fit, dim=dim)
    with pytest.raises(TypeError, match="MapFit"):
        model.predict_derivative(GRID, {"ls": 1.0})
    hsgp = GPRegression(x, y, "expquad", approx="hsgp", approx_options={"m": 20, "c": 1.5})
    with pytest.raises(NotImplementedError, match=r"exact GP only.*'hsgp'"):
        hsgp.predict_derivative(GRID, fit)


def test_sin_end_to_end():
    """Data from sin(x) + noise (sd 0.1, 40 points on [0, 2 pi]): the 94% band of f' covers
    cos(x) on at least 90% of a grid inside the data (that of f''
    covers -sin(x) likewise)."""
    rng = np.random.default_rng(1)
    x = np.sort(rng.uniform(0, 2 * np.pi, 40))
    y = np.sin(x) + 0.1 * rng.standard_normal(40)
    model = GPRegression(x, y, "expquad")
    fit = model.fit_map(random_seed=0)
    grid = np.linspace(0.3, 2 * np.pi - 0.3, 60)
    d1 = model.predict_derivative(grid, fit)
    assert np.mean((d1.lower <= np.cos(grid)) & (np.cos(grid) <= d1.upper)) >= 0.9
    d2 = model.predict_derivative(grid, fit, order=2)
    assert np.mean((d2.lower <= -np.sin(grid)) & (-np.sin(grid) <= d2.upper)) >= 0.9
    # where the trend rises: the band of f' excludes 0 around x = 0.3 and 2 pi - 0.3
    assert d1.lower[0] > 0 and d1.lower[-1] > 0 and d1.upper[30] < 0
