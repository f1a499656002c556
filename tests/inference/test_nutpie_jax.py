"""nutpie's JAX model (``bayes_gp.inference.nutpie_jax``) and the automatic choice between it and
numba (``bayes_gp.inference.compiled.choose_backend``, opt-in with ``set_nutpie_backend("auto")``):
the JAX model is the same log density and gradient, its estimated cost grows with the data and the
run, and the choice is JAX for short runs on small data, numba for long ones and for models with
Ops JAX cannot run."""

from __future__ import annotations

import numpy as np
import pytest

from bayes_gp import GPRegression, LatentGP
from bayes_gp.inference import compiled, native_gp, nutpie_jax
from bayes_gp.linalg import EAGER_MODE

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _auto():
    """The "auto" backend with the exact GP's C path off (bayes_gp.inference.native_gp, which
    "auto" takes first where it applies): these tests are about JAX against numba."""
    compiled.clear_cache()
    compiled.set_nutpie_backend("auto")
    with native_gp.native(False):
        yield
    compiled.clear_cache()
    compiled.set_nutpie_backend("numba")


def _gp(n: int = 30, seed: int = 0) -> GPRegression:
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 10, n))
    return GPRegression(x, np.sin(x) + 0.3 * rng.normal(size=n), "matern52", mean="zero")


@pytest.fixture(scope="module")
def jax_model():
    gp = _gp()  # the model as the cache compiles it: its data one shared vector
    return gp, nutpie_jax.compile_pymc_model(compiled.lift(gp.model).model)


def test_log_density_and_gradient_equal_pymcs(jax_model):
    """At random points of the unconstrained space, the JAX model's log density and gradient
    equal PyMC's (Python linker: no compilation) to 1e-10. The same JAX model given other data
    (``with_data``'s values, shifted by 0.5) is off by far more: checked too."""
    gp, jm = jax_model
    model = gp.model
    names = [model.rvs_to_values[v].name for v in model.free_RVs]
    logp = model.compile_logp(mode=EAGER_MODE)
    dlogp = model.compile_dlogp(mode=EAGER_MODE)
    f = jm.compiled._make_logp_func()
    rng = np.random.default_rng(1)
    for _ in range(3):
        x = rng.normal(scale=0.7, size=jm.compiled.n_dim)
        point = dict(zip(names, x, strict=True))
        value, grad = f(x, **jm.compiled._shared_data)
        assert value == pytest.approx(float(logp(point)), rel=1e-10, abs=1e-10)
        np.testing.assert_allclose(grad, dlogp(point), rtol=1e-9, atol=1e-10)
    shifted = jm.compiled.with_data(
        bayes_gp_data_float64=np.asarray(jm.compiled._shared_data["bayes_gp_data_float64"]) + 0.5
    )
    assert abs(f(x, **shifted._shared_data)[0] - float(logp(point))) > 1e-3


def test_the_estimate_grows_with_the_data_and_the_run(jax_model):
    """XLA's bytes per gradient grow with n (the n x n covariance: about 4x from 30 to 60 points),
    the estimate is linear in the iterations and the same for a second compilation (one seed,
    one choice)."""
    _, jm = jax_model
    bigger = nutpie_jax.compile_pymc_model(compiled.lift(_gp(60).model).model)
    assert 3.0 < bigger.bytes_per_eval / jm.bytes_per_eval < 5.0
    again = nutpie_jax.compile_pymc_model(compiled.lift(_gp(30, seed=5).model).model)
    assert again.bytes_per_eval == jm.bytes_per_eval
    one = nutpie_jax.estimate_seconds(jm, 1000)
    assert nutpie_jax.estimate_seconds(jm, 4000) == pytest.approx(4 * one)
    assert one == pytest.approx(1000 * nutpie_jax.LEAPFROGS * jm.seconds_per_eval())


def test_short_runs_take_jax_long_runs_numba():
    model = _gp().model
    backend, reason, entry = compiled.choose_backend(model, 800)
    assert backend == "jax" and "under the 8 s" in reason and entry.jax is not None
    backend, reason, _ = compiled.choose_backend(model, 10**6)
    assert backend == "numba" and "over the 8 s" in reason


def test_a_model_whose_op_has_no_jax_version_takes_numba():
    x = np.linspace(0, 5, 20)
    lat = LatentGP(x, (np.sin(x) > 0) * 1, "expquad", "bernoulli")
    backend, reason, entry = compiled.choose_backend(lat.model, 100)
    assert backend == "numba" and "LaplaceLogp has no JAX implementation" in reason
    assert entry is None
    compiled.set_nutpie_backend("jax")
    with pytest.raises(ValueError, match="LaplaceLogp has no JAX version"):
        compiled.choose_backend(lat.model, 100)


def test_the_setting_is_checked_and_honoured():
    with pytest.raises(ValueError, match="nutpie backend must be one of"):
        compiled.set_nutpie_backend("xla")
    with compiled.nutpie_backend("numba"):
        assert compiled._BACKEND == "numba"
    assert compiled._BACKEND == "auto"  # restored
    compiled.set_nutpie_backend("numba")
    assert compiled.choose_backend(_gp().model, 10)[0] == "numba"
    compiled.set_nutpie_backend("jax")
    backend, reason, _ = compiled.choose_backend(_gp().model, 10**7)
    assert backend == "jax" and reason.startswith("the nutpie backend is set to jax")


def test_a_sample_says_what_it_chose_and_matches_numbas_posterior():
    """The same seed on both backends: nuts-rs takes the same steps while the two log densities
    agree to rounding, so the short runs' posterior means agree closely (measured 1e-9); a wrong
    JAX density (another data set) would move them by far more than the 1e-4 allowed."""
    gp = _gp()
    options = dict(draws=100, tune=100, chains=2, random_seed=3)
    by_jax = gp.sample(**options)
    attrs = by_jax["posterior"].attrs
    assert attrs["bayes_gp_nutpie_backend"] == "jax"
    assert "iterations" in attrs["bayes_gp_nutpie_backend_reason"]
    compiled.set_nutpie_backend("numba")
    by_numba = gp.sample(**options)
    assert by_numba["posterior"].attrs["bayes_gp_nutpie_backend"] == "numba"
    for name in ("ls", "eta", "sigma"):
        a = float(by_jax["posterior"][name].mean())
        b = float(by_numba["posterior"][name].mean())
        assert a == pytest.approx(b, rel=1e-4), name
