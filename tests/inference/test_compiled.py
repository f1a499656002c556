"""Compiled models reused (``bayes_gp.inference.compiled``): the fingerprint tells structures
apart exactly, and a cached compiled model with new data equals a fresh compilation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

from bayes_gp import GPRegression
from bayes_gp.inference import compiled, native_gp, nutpie_compile, nutpie_jax
from tests.helpers import PY_MODE


@pytest.fixture(autouse=True)
def _fresh_cache():
    """An empty cache of compiled models, numba's backend, and the exact GP's C path
    (bayes_gp.inference.native_gp) off: these tests are about the compiled models."""
    compiled.clear_cache()
    compiled.set_enabled(True)
    compiled.set_nutpie_backend("numba")
    with native_gp.native(False):
        yield
    compiled.clear_cache()
    compiled.set_enabled(True)
    compiled.set_nutpie_backend("numba")


def _data(seed: int, n: int = 30, scale: float = 1.0):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 10, n))
    return x, scale * (np.sin(x) + 0.3 * rng.normal(size=n))


def _gp(seed: int, n: int = 30, kernel: str = "expquad", scale: float = 1.0, mean="zero", **kw):
    return GPRegression(*_data(seed, n, scale), kernel, mean=mean, **kw)


def test_the_fingerprint_sees_structure_not_data():
    key = compiled.lift(_gp(0).model).key
    assert compiled.lift(_gp(1).model).key == key  # other data, same size
    assert compiled.lift(_gp(2, scale=50.0).model).key == key  # other data-scaled priors too
    assert compiled.lift(_gp(0, n=31).model).key != key  # another size
    assert compiled.lift(_gp(0, kernel="matern32").model).key != key  # another kernel
    assert compiled.lift(_gp(0, mean="constant").model).key != key  # another mean


def test_lifted_model_has_the_same_density_and_variable_order():
    gp = _gp(0)
    lifted = compiled.lift(gp.model)
    assert [v.name for v in lifted.model.free_RVs] == [v.name for v in gp.model.free_RVs]
    point = {"ls_log__": 0.3, "eta_log__": -0.2, "sigma_log__": -1.1}
    a = gp.model.compile_logp(mode=PY_MODE)(point)
    b = lifted.model.compile_logp(mode=PY_MODE)(point)
    assert a == pytest.approx(b, abs=1e-12)
    # the data are the lifted values, one vector per dtype: the outputs are a segment of it
    flat = lifted.data["bayes_gp_data_float64"]
    n = gp.y.size
    assert any(np.array_equal(flat[i : i + n], gp.y) for i in np.flatnonzero(flat == gp.y[0]))


def test_a_closure_over_values_is_part_of_the_fingerprint():
    def model(c: float):
        with pm.Model() as m:
            mu = pm.Normal("mu")
            pm.CustomDist(
                "y", mu, logp=lambda v, mu: -c * pt.sum((v - mu) ** 2), observed=np.zeros(3)
            )
        return m

    assert compiled.lift(model(1.0)).key == compiled.lift(model(1.0)).key
    assert compiled.lift(model(1.0)).key != compiled.lift(model(2.0)).key


def test_a_closure_over_a_graph_is_not_reusable():
    hidden = pt.as_tensor_variable(np.arange(3.0))
    with pm.Model() as m:
        mu = pm.Normal("mu")
        pm.CustomDist(
            "y", mu, logp=lambda v, mu: -pt.sum((v - mu - hidden) ** 2), observed=np.zeros(3)
        )
    with pytest.raises(compiled.Unreusable, match="graph variable"):
        compiled.lift(m)


@pytest.mark.parametrize("backend", ["numba", "jax"])
def test_a_cached_model_with_new_data_equals_a_fresh_compilation(monkeypatch, backend):
    compiled.set_nutpie_backend(backend)
    first, second = _gp(0), _gp(1, scale=3.0)
    calls = []
    module = nutpie_compile if backend == "numba" else nutpie_jax
    compile_model = module.compile_pymc_model
    monkeypatch.setattr(
        module, "compile_pymc_model", lambda *a, **k: calls.append(1) or compile_model(*a, **k)
    )
    options = dict(draws=30, tune=30, chains=2, random_seed=5)
    first.sample(**options)
    cached = second.sample(**options)
    assert len(calls) == 1  # the second model was not compiled
    assert compiled.cache_info() == {"hits": 1, "misses": 1, "unreusable": 0, "size": 1}
    compiled.clear_cache()
    fresh = second.sample(**options)
    assert len(calls) == 2
    for name in ("ls", "eta", "sigma"):
        np.testing.assert_array_equal(cached["posterior"][name], fresh["posterior"][name])
    np.testing.assert_array_equal(cached["log_likelihood"]["y"], fresh["log_likelihood"]["y"])
    assert cached["posterior"].attrs["bayes_gp_sampler"] == "nutpie"
    assert cached["posterior"].attrs["bayes_gp_nutpie_backend"] == backend
    np.testing.assert_array_equal(cached["observed_data"]["y"], second.y)


def test_the_initial_point_follows_the_new_priors():
    """On JAX, which compiles in seconds (numba took 30-40 s on a fresh HOME here): the shared
    variables are swapped by the same code for either backend (``_compiled_for``), and numba's
    draws of a reused model equal a fresh compilation's, initial points included (above)."""
    compiled.set_nutpie_backend("jax")
    # scale 7: the data-scaled priors' parameters differ from the cached model's
    first, second = _gp(0), _gp(1, scale=7.0)
    compiled._compiled_for(first.model)
    reused, chosen, _ = compiled._compiled_for(second.model)
    assert chosen == "jax"
    direct = nutpie_jax.compile_pymc_model(second.model).compiled
    start, start_direct = compiled._initial_point_func(reused), compiled._initial_point_func(direct)
    for seed in (3, 4):
        np.testing.assert_allclose(start(seed), start_direct(seed), rtol=0, atol=1e-12)
    back, _, _ = compiled._compiled_for(first.model)  # a hit: the first model's priors again
    assert not np.allclose(start(3), compiled._initial_point_func(back)(3))


def test_unreusable_models_still_sample(monkeypatch):
    """A model the cache cannot key (here: more data than it keeps) is compiled as it is. The
    model is test_reuse_can_be_turned_off's: one of the two compiles its graph, the other finds
    it in numba's disk cache."""
    monkeypatch.setattr(compiled, "MAX_DATA_BYTES", 0)
    idata = _gp(0).sample(draws=10, tune=10, chains=1, random_seed=1)
    assert compiled.cache_info()["unreusable"] == 1
    assert idata["posterior"]["ls"].shape == (1, 10)
    assert idata["posterior"].attrs["bayes_gp_sampler"] == "nutpie"


def test_reuse_can_be_turned_off():
    compiled.set_enabled(False)
    _gp(0).sample(draws=5, tune=5, chains=1, random_seed=1)
    assert compiled.cache_info() == {"hits": 0, "misses": 0, "unreusable": 0, "size": 0}


@dataclasses.dataclass(frozen=True)
class _FakeCompiled:
    """Stands in for nutpie's compiled model where only the cache's bookkeeping is tested."""

    shared_var_keys: dict = dataclasses.field(default_factory=dict)
    initial_point_func: object = None

    def with_data(self, **updates):
        return self


def test_the_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(nutpie_compile, "compile_pymc_model", lambda *a, **k: _FakeCompiled())
    monkeypatch.setattr(compiled, "MAX_ENTRIES", 2)
    for n in (20, 21, 22):
        compiled._compiled_for(_gp(0, n=n).model)
    assert compiled.cache_info()["size"] == 2
    monkeypatch.setattr(compiled, "MAX_DATA_BYTES", 100)
    with pytest.raises(compiled.Unreusable, match="MiB of data"):
        compiled.lift(_gp(0).model)


def test_work_during_sampling_runs_in_a_thread_and_is_waited_for():
    """run_in_background runs ``during`` in another thread while the block runs, waits for it
    at the block's end, and drops its error (the call that needs the work repeats it)."""
    import threading

    from bayes_gp.inference.compiled import run_in_background

    seen, started = [], threading.Event()

    def work():
        started.wait(5)
        seen.append(threading.current_thread().name)

    with run_in_background(work):
        started.set()  # the work waits for the block: it runs beside it
    assert seen == ["bayes_gp-during-sampling"]

    def fail():
        raise RuntimeError("compiler missing")

    with run_in_background(fail):
        pass
    with run_in_background(None):
        pass
