"""nutpie's compiled model with leaner C entry points, cached on disk where PyTensor caches the graph.

nuts-rs (nutpie's sampler core) calls a model through two C function pointers, the log density
with its gradient and the "expand" function that computes the stored variables, each given a
pointer to the model's data. ``nutpie.compile_pymc_model`` builds both as ``numba.cfunc``
closures: numba compiles them afresh for every model in every process, about 4-5 s each time
for a small GP (their data are read through a record type and ``reshape``, the gradient copied
by a broadcasting assignment, code that numba types and lowers anew each time).

Here the two entry points are generated as source (PyTensor's ``compile_numba_function_src``):
the data arrays are read from a flat array of addresses and shapes, the gradient is copied in a
loop. What nuts-rs receives is the same: the same PyTensor functions (nutpie's own
``_make_functions``), the same status codes (0 ok, 1 an exception, 3 a non-finite gradient,
4 a non-finite log density, -1 a dimension mismatch), the same initial points, dims and coords.
When PyTensor caches the compiled graph on disk as a whole (every Op in it has a cache key), the
entry points are cached with it, keyed by its key; graphs with bayes_gp's own Ops are not cached
(README, "Compiled models reused": writing those entries costs more on a cold cache than a
second process gains).

:func:`compile_pymc_model` uses nutpie's internals (``_make_functions``,
``_prepare_dims_and_coords``, ``CompiledPyMCModel``; not public API), checked against nutpie
0.16 (:data:`NUTPIE_TESTED`); with another nutpie, or when they are not importable, it calls
``nutpie.compile_pymc_model`` itself.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import numpy as np

__all__ = ["NUTPIE_TESTED", "compile_pymc_model"]

#: nutpie's ``major.minor`` versions whose internals this module was checked against.
NUTPIE_TESTED = ("0.16",)

#: Bumped when the generated source changes meaning (part of the cache key).
_SOURCE_VERSION = 1

_LOGP_SRC = """
def {name}(dim, x_, out_, logp_, ud_):
    if dim != {n_dim}:
        return -1
    try:
        ud = numba.carray(ud_, ({n_ud},), np.uint64)
        x = numba.carray(x_, ({n_dim},))
{unpack}
        logp_val, grad = inner(x{args})
        out = numba.carray(out_, ({n_dim},))
        finite = True
        for i in range({n_dim}):
            g = grad[i]
            out[i] = g
            if not np.isfinite(g):
                finite = False
        value = np.float64(logp_val[()])
        logp = numba.carray(logp_, (1,))
        logp[0] = value
        if not finite:
            return 3
        if not np.isfinite(value):
            return 4
    except Exception:
        return 1
    return 0
"""

_EXPAND_SRC = """
def {name}(dim, expanded, x_, out_, ud_):
    if dim != {n_dim}:
        return -1
    if expanded != {n_expanded}:
        return -1
    try:
        ud = numba.carray(ud_, ({n_ud},), np.uint64)
        x = numba.carray(x_, ({n_dim},))
{unpack}
        (values,) = inner(x{args})
        out = numba.carray(out_, ({n_expanded},))
        for i in range({n_expanded}):
            out[i] = values[i]
    except Exception:
        return -2
    return 0
"""


def _user_data(order: list[str], data: dict[str, np.ndarray]) -> np.ndarray:
    """The flat user data nuts-rs hands both entry points: per array (in ``order``) its address,
    then its shape."""
    flat: list[int] = []
    for key in order:
        flat.append(data[key].ctypes.data)
        flat.extend(int(s) for s in data[key].shape)
    return np.array(flat or [0], dtype=np.uint64)


def _offsets(order: list[str], data: dict[str, np.ndarray]) -> dict[str, int]:
    offsets, at = {}, 0
    for key in order:
        offsets[key] = at
        at += 1 + data[key].ndim
    return offsets


def _cfunc(template: str, name: str, inner, sig, keys, order, data, **fmt):
    """Compile ``template`` calling ``inner`` with the arrays ``keys`` as a C callback; cached
    on disk when PyTensor has a cache key for ``inner``'s graph."""
    import numba
    from nutpie.compile_pymc import address_as_void_pointer
    from pytensor.link.numba.cache import CACHED_SRC_FUNCTIONS, compile_numba_function_src

    offsets = _offsets(order, data)
    lines, args = [], []
    for k, key in enumerate(keys):
        off, ndim = offsets[key], data[key].ndim
        shape = "".join(f"np.intp(ud[{off + 1 + d}]), " for d in range(ndim))
        lines.append(f"        s{k} = numba.carray(as_pointer(ud[{off}]), ({shape}), dtype{k})")
        args.append(f", s{k}")
    n_ud = max(1, sum(1 + data[key].ndim for key in order))  # the length of _user_data's array
    src = template.format(name=name, unpack="\n".join(lines), args="".join(args), n_ud=n_ud, **fmt)
    env: dict[str, Any] = {
        "__name__": __name__,  # numba rebuilds a cached function's environment from its module
        "numba": numba,
        "np": np,
        "inner": inner,
        "as_pointer": address_as_void_pointer,
        **{f"dtype{k}": data[key].dtype for k, key in enumerate(keys)},
    }
    inner_key = CACHED_SRC_FUNCTIONS.get(getattr(inner, "py_func", None))
    key = None
    if inner_key is not None:
        dtypes = tuple(data[k].dtype.str for k in keys)
        key = hashlib.sha256(
            repr((_SOURCE_VERSION, src, inner_key, dtypes, numba.__version__)).encode()
        ).hexdigest()
    fn = compile_numba_function_src(src, name, global_env=env, cache_key=key)
    return numba.cfunc(sig, cache=key is not None)(fn)


def make_functions(model, mode: str) -> tuple:
    """nutpie's ``_make_functions(model, mode=mode, ...)`` as ``nutpie.compile_pymc_model`` calls
    it: the log density with PyTensor's gradient, the expand function (joined into one vector
    for numba, separate for JAX) and the initial points (support points, jittered). ``"NUMBA"``
    compiles with :data:`bayes_gp.kernels.vector_exp.NUMBA_MODE` (the kernels' matrix
    exponentials in a vectorised loop)."""
    from nutpie.compile_pymc import _make_functions, _wrap_with_lock
    from pymc.initial_point import make_initial_point_fn

    from bayes_gp.kernels.vector_exp import NUMBA_MODE

    initial = _wrap_with_lock(
        make_initial_point_fn(
            model=model,
            default_strategy="support_point",
            jitter_rvs=set(model.free_RVs),
            return_transformed=True,
        )
    )
    return _make_functions(
        model,
        mode=NUMBA_MODE if mode == "NUMBA" else mode,
        compute_grad=True,
        join_expanded=mode == "NUMBA",
        pymc_initial_point_fn=initial,
        var_names=None,
    )


def tested_nutpie() -> bool:
    """Whether the installed nutpie is one whose internals this module was checked against."""
    import nutpie

    return ".".join(nutpie.__version__.split(".")[:2]) in NUTPIE_TESTED


def compile_pymc_model(model) -> Any:
    """``nutpie.compile_pymc_model(model, backend="numba")``, with cached C entry points."""
    import nutpie

    try:
        from nutpie.compile_pymc import (  # noqa: F401  (probed: make_functions, _cfunc's source)
            _make_functions,
            _prepare_dims_and_coords,
            _wrap_with_lock,
            address_as_void_pointer,
        )
        from pytensor.link.numba.cache import compile_numba_function_src  # noqa: F401  (probed)
    except ImportError:  # pragma: no cover - depends on nutpie's and PyTensor's internals
        return nutpie.compile_pymc_model(model, backend="numba")
    if not tested_nutpie():
        return nutpie.compile_pymc_model(model, backend="numba")
    import numba

    n_dim, n_expanded, logp_pt, expand_pt, initial_point_fn, shape_info, reparam = make_functions(
        model, "NUMBA"
    )
    shared_vars = list(dict.fromkeys([*logp_pt.get_shared(), *expand_pt.get_shared()]))
    var_keys = {var: f"s{i}" for i, var in enumerate(shared_vars)}
    order = list(var_keys.values())
    data = {var_keys[var]: _frozen(var.get_value()) for var in shared_vars}
    u64, f64p = numba.types.uint64, numba.types.CPointer(numba.types.double)
    logp_c = _cfunc(
        _LOGP_SRC,
        "bayes_gp_nutpie_logp",
        logp_pt.vm.jit_fn,
        numba.types.int64(u64, f64p, f64p, f64p, numba.types.voidptr),
        [var_keys[v] for v in logp_pt.get_shared()],
        order,
        data,
        n_dim=n_dim,
    )
    expand_c = _cfunc(
        _EXPAND_SRC,
        "bayes_gp_nutpie_expand",
        expand_pt.vm.jit_fn,
        numba.types.int64(u64, u64, f64p, f64p, numba.types.voidptr),
        [var_keys[v] for v in expand_pt.get_shared()],
        order,
        data,
        n_dim=n_dim,
        n_expanded=n_expanded,
    )
    dims, coords = _prepare_dims_and_coords(model, shape_info, reparam)
    return _compiled_model_class()(
        _n_dim=n_dim,
        dims=dims,
        _coords=coords,
        _shapes={name: tuple(shape) for name, _, shape in zip(*shape_info, strict=True)},
        compiled_logp_func=logp_c,
        compiled_expand_func=expand_c,
        initial_point_func=initial_point_fn,
        shared_data=data,
        shared_var_keys=var_keys,
        user_data=_user_data(order, data),
        n_expanded=n_expanded,
        shape_info=shape_info,
        logp_func=logp_pt,
        expand_func=expand_pt,
        reparameterized_names=reparam,
    )


def _frozen(value) -> np.ndarray:
    arr = np.array(value, order="C", copy=True)
    arr.flags.writeable = False
    return arr


_CLASS = None


def _compiled_model_class():
    """nutpie's ``CompiledPyMCModel`` whose user data is the flat array of :func:`_user_data`
    (``with_data`` rebuilds it; nutpie's own builds its record type)."""
    global _CLASS
    if _CLASS is None:
        from nutpie.compile_pymc import CompiledPyMCModel

        class FlatDataCompiledModel(CompiledPyMCModel):
            def with_data(self, **updates):
                data = dict(self.shared_data)
                by_name = {var.name: key for var, key in self.shared_var_keys.items()}
                for name, value in updates.items():
                    if name not in by_name:
                        raise KeyError(f"Unknown shared variable: {name}")
                    old = data[by_name[name]]
                    new = _frozen(np.asarray(value, dtype=old.dtype))
                    if new.ndim != old.ndim:
                        raise ValueError(f"Shared variable {name} must have rank {old.ndim}")
                    data[by_name[name]] = new
                order = list(self.shared_var_keys.values())
                return dataclasses.replace(
                    self, shared_data=data, user_data=_user_data(order, data)
                )

        _CLASS = FlatDataCompiledModel
    return _CLASS
