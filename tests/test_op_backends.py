"""The registry of backend implementations of bayes_gp's Ops (:mod:`bayes_gp.op_backends`)."""

from __future__ import annotations

import numpy as np
import pytest

from bayes_gp import GPRegression, op_backends


@pytest.fixture
def registry(monkeypatch):
    """An empty registry for the test (the package's own registrars are put back after)."""
    monkeypatch.setattr(op_backends, "_registrars", {b: [] for b in op_backends.BACKENDS})
    monkeypatch.setattr(op_backends, "_done", set())
    return op_backends


def test_registrar_runs_once_on_demand(registry):
    calls = []

    @registry.op_backend("numba")
    def register():
        calls.append(1)

    assert calls == []  # declaring does not run it
    registry.ensure("numba")
    registry.ensure("numba")
    registry.ensure_available()
    assert calls == [1]


def test_registrar_of_a_missing_backend_is_tried_again(registry):
    calls = []

    @registry.op_backend("jax")
    def register():
        calls.append(1)
        if len(calls) == 1:
            raise ImportError("no jax")

    registry.ensure("jax")
    registry.ensure("jax")
    registry.ensure("jax")
    assert calls == [1, 1]


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="unknown Op backend 'cuda'"):
        op_backends.op_backend("cuda")
    with pytest.raises(ValueError, match="known: \\('numba', 'jax'\\)"):
        op_backends.ensure("cuda")


def test_numpyro_reaches_the_compact_likelihoods_own_jax_refusal():
    """run_nuts asks the registry for every Op module's JAX implementation (it used to name the
    dense likelihood's alone), so the sparse compact-support model stops with its own message
    naming ``sparse=False``."""
    pytest.importorskip("numpyro")
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0, 20, 40))
    gp = GPRegression(x, np.sin(x) + 0.1 * rng.standard_normal(40), "pp2")
    assert gp.sparse
    with pytest.raises(NotImplementedError, match="sparse=False"):
        gp.sample(draws=5, tune=5, chains=1, sampler="numpyro", random_seed=0)
