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


def test_a_lazily_loaded_jax_is_not_registered(registry, monkeypatch):
    """A ``LazyLoader`` placeholder for ``jax`` in ``sys.modules`` (ArviZ's ``io_numpyro`` puts
    one there) is not JAX imported: registering would import JAX (seconds of a first fit)."""
    import importlib.util
    import sys
    import types

    calls = []

    @registry.op_backend("jax")
    def register():
        calls.append(1)

    lazy = types.ModuleType("jax")
    lazy.__class__ = importlib.util._LazyModule
    monkeypatch.setitem(sys.modules, "jax", lazy)
    registry.ensure_available()
    assert calls == []
    monkeypatch.setitem(sys.modules, "jax", types.ModuleType("jax"))  # imported for real
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


def _numba_key(op):
    from pytensor.link.numba.dispatch.basic import numba_funcify_and_cache_key

    op_backends.ensure("numba")
    return numba_funcify_and_cache_key(op)[1]


def test_native_ops_have_numba_cache_keys():
    """Every nopython Op of the exact and quasiseparable GPs has a key for PyTensor's on-disk
    numba cache, one per set of props: a graph holding an Op without a key is compiled again
    in every process (7.4 s of an n = 100 first fit, issue 41)."""
    from bayes_gp.kernels.ard_distance import ARDSquareDist, ARDSquareDistGrad
    from bayes_gp.solvers.likelihood import CholeskyInverse, GPLogp
    from bayes_gp.solvers.quasisep import QuasisepLogp

    ops = [GPLogp(), GPLogp(inplace=True), CholeskyInverse(), CholeskyInverse(inplace=True),
           ARDSquareDist(), ARDSquareDistGrad(True), ARDSquareDistGrad(False),
           QuasisepLogp(2, 1), QuasisepLogp(3, 1)]  # fmt: skip
    keys = [_numba_key(op) for op in ops]
    assert all(isinstance(k, str) and k.startswith("bayes_gp:") for k in keys)
    assert len(set(keys)) == len(keys)
    assert _numba_key(GPLogp()) == keys[0]  # the same Op, the same key


def test_numba_cache_key_follows_the_source(tmp_path, monkeypatch):
    """An edit of an implementing module is a new key; an objmode implementation has none."""
    import sys
    import types

    from bayes_gp.solvers.likelihood import GPLogp

    path = tmp_path / "impl.py"
    module = types.ModuleType("bayes_gp_test_impl")
    module.__file__ = str(path)
    monkeypatch.setitem(sys.modules, "bayes_gp_test_impl", module)
    path.write_text("x = 1\n")
    first = op_backends.numba_cache_key(GPLogp(), "bayes_gp_test_impl")
    path.write_text("x = 2\n")
    assert op_backends.numba_cache_key(GPLogp(), "bayes_gp_test_impl") != first
    assert op_backends.numba_cache_key(GPLogp(), "bayes_gp_test_impl", native=False) is None


def test_exact_gp_log_density_is_cached_on_disk(monkeypatch):
    """nutpie's log density of a GPRegression gets a graph-wide key, so the numba cache serves it
    to the next process (its C entry point is then cached too: nutpie_compile._cfunc)."""
    import pytensor
    from pytensor.link.numba.cache import CACHED_SRC_FUNCTIONS

    from bayes_gp.inference.nutpie_compile import make_functions

    monkeypatch.setattr(pytensor.config, "numba__cache", True)
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 5, (12, 2))
    for kernel, ard in (("expquad", False), ("matern32", True)):
        gp = GPRegression(X, rng.standard_normal(12), kernel, ard=ard)
        logp_pt = make_functions(gp.model, "NUMBA")[2]
        assert CACHED_SRC_FUNCTIONS.get(logp_pt.vm.jit_fn.py_func) is not None, kernel


_CHILD_SCRIPT = r"""
import json, sys
from bayes_gp import op_backends
from bayes_gp.solvers import _native_linalg as nl
key = nl.LOO_KEY
out = {"before": op_backends._on_disk(key)}
out["started"] = op_backends.compile_elsewhere(nl.__name__, "loo_cfunc", key)
child = op_backends._CHILDREN[key]
out["twice"] = op_backends.compile_elsewhere(nl.__name__, "loo_cfunc", key)  # a child at it
out["one child"] = op_backends._CHILDREN[key] is child
cf = nl.loo_cfunc()  # waits for the child, then loads what it wrote
out["returncode"] = child.returncode
out["on_disk"] = op_backends._on_disk(key)
out["cache_hits"] = cf.cache_hits
out["after"] = op_backends.compile_elsewhere(nl.__name__, "loo_cfunc", key)  # in this process
print(json.dumps(out))
"""


def test_a_child_process_compiles_a_cfunc_into_the_disk_cache_for_this_one(tmp_path):
    """compile_elsewhere starts a child that compiles the cfunc into this process's PyTensor
    cache directory (an empty one here); cached_cfunc waits for it and loads the child's code
    from the disk (a cache hit, no compilation here); no second child while one is at it (the
    answer: one is at it), none once this process has the cfunc, none where the disk cache is
    off."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTENSOR_FLAGS": f"base_compiledir={tmp_path}"}
    res = subprocess.run([sys.executable, "-c", _CHILD_SCRIPT], env=env, capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out == {"before": False, "started": True, "twice": True, "one child": True,
                   "returncode": 0, "on_disk": True, "cache_hits": 1, "after": False}  # fmt: skip


def test_no_child_compiles_where_the_disk_cache_is_off(monkeypatch):
    from bayes_gp.solvers import _native_linalg as nl

    monkeypatch.setenv("BAYES_GP_NUMBA_CACHE", "0")
    assert op_backends.compile_elsewhere(nl.__name__, "loo_cfunc", "bayes_gp.test.no-cache") is False
    assert "bayes_gp.test.no-cache" not in op_backends._CHILDREN
