"""nutpie's compiled model with bayes_gp's cached C entry points
(``bayes_gp.inference.nutpie_compile``) computes what nutpie's own does, and is loaded from the
disk cache the second time a structure compiles."""

from __future__ import annotations

import ctypes

import numpy as np
import nutpie
import pymc as pm
import pytensor
import pytest

from bayes_gp.inference.nutpie_compile import compile_pymc_model

_P = ctypes.POINTER(ctypes.c_double)
_LOGP = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_uint64, _P, _P, _P, ctypes.c_void_p)
_EXPAND = ctypes.CFUNCTYPE(
    ctypes.c_int64, ctypes.c_uint64, ctypes.c_uint64, _P, _P, ctypes.c_void_p
)


def _logp(compiled, x, n_dim=None):
    """``(status, logp, gradient)`` from ``compiled``'s C log-density entry point at ``x``."""
    x = np.ascontiguousarray(x, dtype=float)
    out, logp = np.zeros(compiled.n_dim), np.zeros(1)
    fn = _LOGP(compiled.compiled_logp_func.address)
    status = fn(
        compiled.n_dim if n_dim is None else n_dim,
        x.ctypes.data_as(_P),
        out.ctypes.data_as(_P),
        logp.ctypes.data_as(_P),
        compiled.user_data.ctypes.data,
    )
    return status, logp[0], out


def _expand(compiled, x):
    x = np.ascontiguousarray(x, dtype=float)
    out = np.zeros(compiled.n_expanded)
    fn = _EXPAND(compiled.compiled_expand_func.address)
    status = fn(
        compiled.n_dim,
        compiled.n_expanded,
        x.ctypes.data_as(_P),
        out.ctypes.data_as(_P),
        compiled.user_data.ctypes.data,
    )
    return status, out


def _model(y, x):
    """A GP-free model with data of three ranks and dtypes in shared variables, a transformed
    variable and a deterministic (the expand function's extra output)."""
    with pm.Model() as m:
        xs = pytensor.shared(np.asarray(x, dtype=float), name="x")
        counts = pytensor.shared(np.arange(len(y), dtype=np.int64) % 3, name="counts")
        scale = pytensor.shared(np.float64(2.0), name="scale")
        mu = pm.Normal("mu", 0.0, scale)
        beta = pm.Normal("beta", 0.0, 1.0, shape=2)
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.Deterministic("twice_mu", 2 * mu)
        pm.Normal(
            "y",
            mu + xs @ beta + 0.1 * counts,
            sigma,
            observed=pytensor.shared(np.asarray(y, dtype=float), name="y_data"),
        )
    return m


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 2))
    return x, x @ [0.5, -1.0] + 0.3 * rng.normal(size=12)


@pytest.fixture(scope="module")
def both(data):
    x, y = data
    return compile_pymc_model(_model(y, x)), nutpie.compile_pymc_model(_model(y, x))


def test_logp_gradient_and_expansion_equal_nutpies_own(both):
    ours, theirs = both
    assert ours.n_dim == theirs.n_dim == 4 and ours.n_expanded == theirs.n_expanded
    rng = np.random.default_rng(1)
    for x in rng.normal(size=(3, ours.n_dim)):
        s1, lp1, g1 = _logp(ours, x)
        s2, lp2, g2 = _logp(theirs, x)
        assert s1 == s2 == 0
        np.testing.assert_allclose(lp1, lp2, rtol=1e-13)
        np.testing.assert_allclose(g1, g2, rtol=1e-12, atol=1e-12)
        e1, v1 = _expand(ours, x)
        e2, v2 = _expand(theirs, x)
        assert e1 == e2 == 0
        np.testing.assert_allclose(v1, v2, rtol=1e-13)
    for seed in (3, 4):
        np.testing.assert_array_equal(
            ours.initial_point_func(seed), theirs.initial_point_func(seed)
        )
    assert ours.dims == theirs.dims and ours.shapes == theirs.shapes


def test_status_codes_are_nutpies(both):
    ours, _ = both
    assert _logp(ours, np.zeros(ours.n_dim), n_dim=ours.n_dim + 1)[0] == -1
    x = np.zeros(ours.n_dim)
    x[0] = np.inf  # mu = inf: a non-finite gradient
    assert _logp(ours, x)[0] == 3


def test_new_data_equal_a_fresh_compilation(data):
    x, y = data
    ours = compile_pymc_model(_model(y, x))
    y2, x2 = y[:8] + 1.0, x[:8] * 2.0  # other values and another length
    swapped = ours.with_data(y_data=y2, x=x2, counts=np.arange(8) % 3)
    fresh = nutpie.compile_pymc_model(_model(y2, x2))
    point = np.array([0.3, -0.2, 0.5, 0.1])
    s1, lp1, g1 = _logp(swapped, point)
    s2, lp2, g2 = _logp(fresh, point)
    assert s1 == s2 == 0
    np.testing.assert_allclose(lp1, lp2, rtol=1e-13)
    np.testing.assert_allclose(g1, g2, rtol=1e-12)
    # the original keeps its own data
    np.testing.assert_allclose(
        _logp(ours, point)[1], _logp(compile_pymc_model(_model(y, x)), point)[1]
    )
    # lengths that do not match raise inside the compiled graph: status 1, as nutpie's
    assert _logp(ours.with_data(y_data=y2, x=x2), point)[0] == 1
    with pytest.raises(ValueError, match="rank"):
        ours.with_data(x=x2[:, 0])
    with pytest.raises(KeyError, match="nope"):
        ours.with_data(nope=1.0)


def test_a_structure_compiled_again_is_loaded_from_the_disk_cache(data):
    x, y = data
    first = compile_pymc_model(_model(y, x))
    again = compile_pymc_model(_model(y + 1.0, x))  # new Python objects, the same structure
    assert again.compiled_logp_func.cache_hits == 1
    assert again.compiled_expand_func.cache_hits == 1
    point = np.array([0.1, 0.2, 0.3, 0.4])
    assert _logp(first, point)[1] != _logp(again, point)[1]  # each reads its own data


def test_samples_equal_nutpies_own_compilation(data):
    x, y = data
    kw = dict(draws=30, tune=30, chains=2, seed=3, progress_bar=False)
    a = nutpie.sample(compile_pymc_model(_model(y, x)), **kw)
    b = nutpie.sample(nutpie.compile_pymc_model(_model(y, x)), **kw)
    for name in ("mu", "beta", "sigma", "twice_mu"):
        np.testing.assert_allclose(a.posterior[name], b.posterior[name], rtol=1e-9)
