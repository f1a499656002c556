"""Compiled models reused: a second model of the same structure samples without recompiling.

Compiling a model for nutpie (PyTensor's rewrites, then numba compiling the log density, its
gradient and the deterministics) costs seconds: about 7 s for ``GPRegression`` at n = 300
(``benchmarks/first_draw.py``), many times the sampling itself for small data. A second model
that differs only in its *data* — the next group of :func:`bayes_gp.fit_many`, a
cross-validation fold, a new data set of the same size in a notebook — needs the same machine
code with other numbers in it. So:

1. :func:`lift` copies the model, folds what depends on the data alone (distances between
   constant inputs, basis functions), and turns its data into views of one shared vector per
   dtype: every floating-point array constant (inputs, outputs, folded values), every
   floating-point scalar that is a parameter of a random variable (the data-scaled priors) and
   every shared variable that is not a random generator. Everything else (integer constants such
   as index vectors and shapes, the graph's own scalars) stays a constant.
2. It fingerprints the lifted graph: every Op with its parameters, the graph's wiring, the types
   and static shapes of all variables, the constants left, the model's names, dims, transforms
   and coordinates. What cannot be described exactly — an Op without ``__props__`` (it compares
   by identity, e.g. the Laplace Ops that hold their data), a log density closing over
   something other than plain values — makes the model :class:`Unreusable`, and it is compiled
   on its own, outside the cache.
3. :func:`sample_nutpie` keeps nutpie's compiled models by fingerprint (the last
   :data:`MAX_ENTRIES`) and, on a hit, swaps the new data in with nutpie's ``with_data`` (and in
   the initial-point function), which copies arrays into the compiled model's data table.

The compiled model is numba's (:mod:`bayes_gp.inference.nutpie_compile`) unless
:func:`set_nutpie_backend` asks for JAX (:mod:`bayes_gp.inference.nutpie_jax`) or for the choice
of :func:`choose_backend`; the cache keeps each backend's models apart.

The result equals a fresh compilation of the same model (``tests/inference/test_compiled.py``:
identical draws with the same seed). ``BAYES_GP_REUSE_COMPILED=0`` in the environment, or
:func:`set_enabled`, turns reuse off.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import sys
import threading
import time
import types
from collections import OrderedDict
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np
import pymc as pm
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.op import Op
from pytensor.tensor.random.op import RandomVariable
from pytensor.tensor.random.type import RandomType

__all__ = [
    "MAX_DATA_BYTES",
    "MAX_ENTRIES",
    "LiftedModel",
    "Unreusable",
    "cache_info",
    "clear_cache",
    "lift",
    "nutpie_backend",
    "nutpie_backend_setting",
    "sample_nutpie",
    "set_enabled",
    "set_nutpie_backend",
]

#: Compiled models kept (least recently used dropped first).
MAX_ENTRIES = 16
#: Models with more data than this (bytes, after folding) are compiled afresh: each cache
#: entry keeps two copies of its data, and beside their sampling the compilation is cheap.
MAX_DATA_BYTES = 64 * 2**20
_PREFIX = "bayes_gp_data_"


class Unreusable(Exception):
    """The model's graph holds something that cannot be fingerprinted exactly."""


@dataclass(frozen=True)
class LiftedModel:
    """A model with its data as named shared variables (:func:`lift`).

    Attributes
    ----------
    model : pm.Model
        The copy to compile; its data are views into one shared vector per dtype, named
        ``bayes_gp_data_<dtype>``.
    data : dict of str to ndarray
        The values of those vectors, by name (what ``with_data`` swaps in).
    key : str
        The fingerprint (SHA-256): equal keys mean one compiled model serves both.
    shared : dict of str to SharedVariable
        Those vectors themselves, by name (the model's initial-point function reads them).
    """

    model: pm.Model
    data: dict[str, np.ndarray]
    key: str
    shared: dict[str, SharedVariable]


# ----------------------------------------------------------------------------- description
def _importable(obj) -> bool:
    """Whether ``obj`` (a class or function) is what its module exposes under its name."""
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    target = module
    for part in getattr(obj, "__qualname__", "<").split("."):
        target = getattr(target, part, None)
    return target is obj


def _registered(cls: type) -> tuple:
    """The log density, log CDF and support point functions PyMC dispatches on ``cls`` itself
    (dynamically created distribution classes, e.g. ``pm.CustomDist``, keep them there)."""
    from pymc.distributions.distribution import _support_point
    from pymc.logprob.abstract import _logcdf, _logprob

    return tuple(
        _describe(d.registry[cls]) if cls in d.registry else None
        for d in (_logprob, _logcdf, _support_point)
    )


def _describe_class(cls: type) -> tuple:
    if _importable(cls):
        return ("class", cls.__module__, cls.__qualname__)
    attrs = {
        k: v
        for k, v in vars(cls).items()
        if not (k.startswith("__") and k.endswith("__")) and k != "_abc_impl"
    }
    return (
        "dynamic class",
        cls.__qualname__,
        tuple(_describe_class(b) for b in cls.__bases__),
        _describe(attrs),
        _registered(cls),
    )


def _describe_code(code: types.CodeType) -> tuple:
    return (
        "code",
        code.co_code,
        tuple(_describe(c) for c in code.co_consts),
        code.co_names,
        code.co_varnames,
        code.co_freevars,
    )


def _describe_function(fn: types.FunctionType) -> tuple:
    if _importable(fn) and fn.__closure__ is None:
        return ("function", fn.__module__, fn.__qualname__)
    cells = tuple(_describe(c.cell_contents) for c in fn.__closure__ or ())
    return (
        "closure",
        fn.__module__,
        _describe_code(fn.__code__),
        cells,
        _describe(fn.__defaults__),
        _describe(fn.__kwdefaults__),
    )


def _describe(obj: Any) -> Any:
    """A hashable, exact description of ``obj`` that does not depend on object identity."""
    if obj is None or isinstance(obj, bool | int | str | bytes):
        return obj
    if isinstance(obj, float):
        return ("float", obj.hex())
    if isinstance(obj, np.ndarray | np.generic):
        arr = np.ascontiguousarray(obj)
        digest = hashlib.sha256(arr.tobytes()).hexdigest() if arr.dtype != object else None
        if digest is None:
            raise Unreusable("an object array")
        return ("ndarray", arr.dtype.str, arr.shape, digest)
    if isinstance(obj, np.dtype):
        return ("dtype", obj.str)
    if isinstance(obj, tuple | list):
        return (type(obj).__name__, tuple(_describe(o) for o in obj))
    if isinstance(obj, dict):
        return ("dict", tuple(sorted((_describe(k), _describe(v)) for k, v in obj.items())))
    if isinstance(obj, frozenset | set):
        return ("set", tuple(sorted(_describe(o) for o in obj)))
    if isinstance(obj, slice):
        return ("slice", _describe(obj.start), _describe(obj.stop), _describe(obj.step))
    if isinstance(obj, Enum):
        return ("enum", _describe_class(type(obj)), obj.name)
    if isinstance(obj, type):
        return _describe_class(obj)
    if isinstance(obj, types.FunctionType):
        return _describe_function(obj)
    if isinstance(obj, types.BuiltinFunctionType | np.ufunc):
        return ("builtin", getattr(obj, "__module__", None), obj.__name__)
    if isinstance(obj, types.CodeType):
        return _describe_code(obj)
    if isinstance(obj, Variable):
        raise Unreusable(f"a graph variable held outside the graph ({obj})")
    props = getattr(type(obj), "__props__", None)
    if props is not None:  # Ops, scalar Ops and other objects that compare by their props
        values = tuple(_describe(getattr(obj, p)) for p in props)
        return ("props", _describe_class(type(obj)), values)
    from pytensor.scalar.basic import ScalarOp

    if isinstance(obj, Op) and not isinstance(obj, ScalarOp):
        raise Unreusable(f"the Op {type(obj).__name__} compares by identity (no __props__)")
    # Scalar Ops without props (they compare by class and output type rule), transforms and
    # other plain objects: their class's code and their attributes.
    if hasattr(obj, "__dict__") and _importable(type(obj)):
        return ("object", _describe_class(type(obj)), _describe(vars(obj)))
    raise Unreusable(f"cannot describe a {type(obj).__module__}.{type(obj).__qualname__}")


# ----------------------------------------------------------------------------------- lift
def _is_float(var: Variable) -> bool:
    return getattr(var.type, "dtype", "").startswith("float")


def _lifted_value(var: Variable, node) -> np.ndarray | None:
    """The value ``var`` (a graph input) contributes as data, or ``None`` to keep it."""
    if isinstance(var, SharedVariable):
        if isinstance(var.type, RandomType):
            return None
        return np.asarray(var.get_value(borrow=True))
    if isinstance(var, Constant) and _is_float(var):
        if var.type.ndim > 0 or isinstance(node.op, RandomVariable):
            return np.asarray(var.data)
    return None


def lift(model: pm.Model) -> LiftedModel:
    """``model`` with its data as named shared variables, and its fingerprint (module docstring).

    Raises
    ------
    Unreusable
        If the graph holds something that cannot be described exactly.
    """
    from pymc.model.fgraph import fgraph_from_model, model_from_fgraph
    from pytensor.tensor.rewriting.basic import topo_constant_folding

    try:
        fgraph, _ = fgraph_from_model(model, inlined_views=True)
    except (NotImplementedError, ValueError) as exc:  # custom initial values, sub-models
        raise Unreusable(str(exc)) from exc
    # Fold what depends on the data alone first (distances of constant inputs, HSGP basis
    # functions, data-scaled prior parameters), as compiling the model itself would: the
    # folded values become the lifted data, and the sampler does not recompute them.
    topo_constant_folding.rewrite(fgraph)
    ids: dict[Variable, int] = {}
    lifted_vars: list[tuple[Variable, np.ndarray]] = []
    rows: list = []

    def ref(var: Variable, node) -> int:
        if var not in ids:
            ids[var] = len(ids)
            if var.owner is None:
                value = _lifted_value(var, node)
                if value is not None:
                    lifted_vars.append((var, value))
                    rows.append(("data", str(var.type), value.dtype.str, value.shape))
                elif isinstance(var, Constant):
                    rows.append(("constant", str(var.type), _describe(var.data)))
                elif isinstance(var, SharedVariable):  # random generators
                    rows.append(("rng", str(var.type)))
                else:  # value variables
                    rows.append(("input", str(var.type), var.name))
        return ids[var]

    for node in fgraph.toposort():
        inputs = tuple(ref(v, node) for v in node.inputs)
        rows.append(("node", _describe(node.op), inputs))
        for out in node.outputs:
            ids[out] = len(ids)
            rows.append(("out", str(out.type), out.name))
    size = sum(v.nbytes for _, v in lifted_vars)
    if size > MAX_DATA_BYTES:
        raise Unreusable(f"{size / 2**20:.0f} MiB of data is more than the cache keeps")
    rows.append(("outputs", tuple(ids[v] for v in fgraph.outputs)))
    rows.append(("coords", _describe({k: v for k, v in (fgraph._coords or {}).items()})))
    rows.append(("dims", _describe({k: _dim_length(v) for k, v in fgraph._dim_lengths.items()})))
    key = hashlib.sha256(repr(rows).encode()).hexdigest()
    data, shared = _pack(fgraph, lifted_vars)
    lifted = model_from_fgraph(fgraph, mutate_fgraph=True)
    # The graph's order is not the model's: keep the user's order of variables (it is the order
    # of the sampler's parameter vector and of the posterior's variables).
    for attr in ("free_RVs", "observed_RVs", "deterministics", "potentials"):
        rank = {v.name: i for i, v in enumerate(getattr(model, attr))}
        getattr(lifted, attr).sort(key=lambda v: rank.get(v.name, len(rank)))
    return LiftedModel(lifted, data, key, shared)


def _pack(
    fgraph, lifted_vars: list[tuple[Variable, np.ndarray]]
) -> tuple[dict[str, np.ndarray], dict[str, SharedVariable]]:
    """Replace the lifted variables in ``fgraph`` by views into one shared vector per dtype and
    return those vectors' values and the vectors themselves, by name.

    One shared variable per dtype rather than one per datum: nutpie compiles code that reads
    each shared variable's pointer and shape at every evaluation, and with a dozen of them (the
    priors' scalars) its first compilation took 60% longer (measured at n = 300). The views
    (a slice and a reshape with constant bounds) keep every static shape and cost nothing.
    """
    import pytensor

    by_dtype: dict[str, list[tuple[Variable, np.ndarray]]] = {}
    for var, value in lifted_vars:
        by_dtype.setdefault(value.dtype.str, []).append((var, value))
    data: dict[str, np.ndarray] = {}
    shared_vars: dict[str, SharedVariable] = {}
    replacements = []
    for dtype, items in by_dtype.items():
        name = f"{_PREFIX}{np.dtype(dtype).name}"
        flat = np.concatenate([np.ravel(v) for _, v in items])
        data[name] = flat
        shared = shared_vars[name] = pytensor.shared(flat, name=name, shape=flat.shape)
        start = 0
        for var, value in items:
            view = shared[start : start + value.size].reshape(value.shape)
            replacements.append((var, view))
            start += value.size
    if replacements:
        fgraph.replace_all(replacements, import_missing=True)
    return data, shared_vars


def _dim_length(length) -> Any:
    if isinstance(length, SharedVariable):
        return ("shared", int(length.get_value()))
    if isinstance(length, Constant):
        return ("constant", int(length.data))
    raise Unreusable("a dimension whose length is computed in the graph")


# --------------------------------------------------------------------------------- cache
@dataclass
class _Entry:
    compiled: Any
    shared: dict[str, SharedVariable]
    #: the JAX model's cost (``nutpie_jax.JaxModel``) for a ``"jax"`` entry, else ``None``
    jax: Any = None
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)


#: Compiled models by (fingerprint, nutpie backend)
_CACHE: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_STATS = {"hits": 0, "misses": 0, "unreusable": 0}
_ENABLED = os.environ.get("BAYES_GP_REUSE_COMPILED", "1").strip().lower() not in ("0", "false")

#: nutpie's backends: ``"numba"`` (the default), ``"jax"``, ``"auto"`` (:func:`choose_backend`;
#: opt-in: its estimate misjudges posteriors with deep trees, README "nutpie's backend")
NUTPIE_BACKENDS = ("numba", "jax", "auto")
_BACKEND = os.environ.get("BAYES_GP_NUTPIE_BACKEND", "numba").strip().lower() or "numba"
#: ``"auto"`` takes JAX when its whole run is estimated at most this long (seconds): what
#: numba's compilation of one more model costs (8-10 s measured, 16-32 s for a process's first;
#: :mod:`bayes_gp.inference.nutpie_jax`).
JAX_MAX_SECONDS = 8.0


def set_enabled(enabled: bool) -> None:
    """Turn the reuse of compiled models on or off (off: every model compiles afresh)."""
    global _ENABLED
    _ENABLED = bool(enabled)


def set_nutpie_backend(backend: str) -> None:
    """Which backend compiles a model for nutpie: ``"numba"`` (the default), ``"jax"`` or
    ``"auto"`` (:func:`choose_backend`). The environment variable ``BAYES_GP_NUTPIE_BACKEND``
    sets the same at import."""
    global _BACKEND
    _BACKEND = _checked_backend(backend)


def _checked_backend(backend: str) -> str:
    """``backend`` if it is one of :data:`NUTPIE_BACKENDS`, else a ``ValueError``."""
    if backend not in NUTPIE_BACKENDS:
        raise ValueError(f"nutpie backend must be one of {NUTPIE_BACKENDS}, got {backend!r}")
    return backend


def nutpie_backend_setting() -> str:
    """The current setting of :func:`set_nutpie_backend`: ``"numba"``, ``"jax"`` or ``"auto"``."""
    return _BACKEND


@contextlib.contextmanager
def nutpie_backend(backend: str):
    """:func:`set_nutpie_backend` for the ``with`` block only (the setting before is restored):
    ``with nutpie_backend("jax"): gp.sample(draws=150, tune=150)``."""
    before = _BACKEND
    set_nutpie_backend(backend)
    try:
        yield
    finally:
        set_nutpie_backend(before)


def clear_cache() -> None:
    """Forget every compiled model and reset :func:`cache_info`'s counts."""
    with _CACHE_LOCK:
        _CACHE.clear()
        _STATS.update(hits=0, misses=0, unreusable=0)


def cache_info() -> dict[str, int]:
    """``hits``, ``misses``, ``unreusable`` (models compiled without the cache) and ``size``."""
    with _CACHE_LOCK:
        return {**_STATS, "size": len(_CACHE)}


def _cached(key: str | None, backend: str) -> _Entry | None:
    """The cached model of fingerprint ``key`` compiled by ``backend`` (``None`` for no key)."""
    if key is None:
        return None
    with _CACHE_LOCK:
        entry = _CACHE.get((key, backend))
        if entry is not None:
            _CACHE.move_to_end((key, backend))
        return entry


def _store(key: str | None, backend: str, entry: _Entry) -> None:
    """Keep ``entry`` as the model of fingerprint ``key`` compiled by ``backend`` (not without a
    key: an unreusable model, or reuse off)."""
    if key is None:
        return
    with _CACHE_LOCK:
        _CACHE[(key, backend)] = entry
        while len(_CACHE) > MAX_ENTRIES:
            _CACHE.popitem(last=False)


def choose_backend(
    model: pm.Model,
    iterations: int,
    key: str | None = None,
    shared=None,
    setting: str | None = None,
):
    """The nutpie backend for ``iterations`` NUTS iterations (all chains) of ``model``, the
    reason, and the entry compiled on the way (``None`` if none was):

    * ``setting`` (default: :func:`set_nutpie_backend`'s) when it is not ``"auto"``;
    * ``"numba"`` when a numba-compiled model of this structure is cached (no compilation left),
      when JAX is not installed, or when an Op of the model has no JAX implementation;
    * otherwise the JAX model is compiled (about a second) and taken when its whole run is
      estimated at most :data:`JAX_MAX_SECONDS` (:func:`~bayes_gp.inference.nutpie_jax.
      estimate_seconds`, from XLA's cost analysis of the gradient: deterministic, so one seed
      gives one choice and the same draws); longer runs compile with numba, whose gradient is
      3-6x cheaper and runs off the GIL.
    """
    from bayes_gp.inference import nutpie_jax

    setting = _BACKEND if setting is None else _checked_backend(setting)
    if setting == "numba":
        return "numba", "the nutpie backend is set to numba", None
    if setting == "auto" and _cached(key, "numba") is not None:
        return "numba", "a model of this structure was compiled with numba before", None
    # a JAX model of this structure compiled before: JAX is installed and no Op refused it
    entry = _cached(key, "jax")
    if entry is None:
        if not nutpie_jax.jax_available():
            if setting == "jax":
                raise ValueError("the nutpie backend is set to jax, but JAX is not installed")
            return "numba", "JAX is not installed", None
        refused = nutpie_jax.refuses_jax(model)
        if refused is not None:
            if setting == "jax":
                raise ValueError(
                    f"the nutpie backend is set to jax, but {refused} has no JAX version"
                )
            return "numba", f"{refused} has no JAX implementation", None
        try:
            jm = nutpie_jax.compile_pymc_model(model)
        except Exception as err:  # any JAX failure: numba compiles it instead
            if setting == "jax":
                raise
            return "numba", f"JAX could not compile the model ({type(err).__name__}: {err})", None
        entry = _Entry(jm.compiled, dict(shared or {}), jax=jm)
    seconds = nutpie_jax.estimate_seconds(entry.jax, iterations)
    estimate = (
        f"{iterations} iterations x {nutpie_jax.LEAPFROGS} gradients x "
        f"{1e3 * entry.jax.seconds_per_eval():.2f} ms = {seconds:.1f} s in JAX"
    )
    if setting == "jax":
        return "jax", f"the nutpie backend is set to jax ({estimate})", entry
    if seconds <= JAX_MAX_SECONDS:
        return "jax", f"{estimate}, under the {JAX_MAX_SECONDS:g} s numba compiles for", entry
    return "numba", f"{estimate}, over the {JAX_MAX_SECONDS:g} s numba compiles for", entry


def _compiled_for(model: pm.Model, iterations: int = 0):
    """nutpie's compiled model for ``model`` and its backend and the reason for it
    (:func:`choose_backend`; ``iterations``: NUTS iterations of all chains together), from the
    cache when one of the same structure was compiled before; a model that is
    :class:`Unreusable`, or any model while reuse is off, compiles as it is, outside the cache."""
    from bayes_gp.inference.nutpie_compile import compile_pymc_model

    lifted = None
    if _ENABLED:
        try:
            lifted = lift(model)
        except Unreusable:
            with _CACHE_LOCK:
                _STATS["unreusable"] += 1
    target = model if lifted is None else lifted.model
    key = None if lifted is None else lifted.key
    backend, reason, jax_entry = choose_backend(
        target, iterations, key, None if lifted is None else lifted.shared
    )
    entry = _cached(key, backend)
    if key is not None:
        with _CACHE_LOCK:
            _STATS["hits" if entry is not None else "misses"] += 1
    if jax_entry is not None and _cached(key, "jax") is None:
        _store(key, "jax", jax_entry)  # compiled for the choice: kept for a shorter run
    if entry is None:
        entry = jax_entry if backend == "jax" else None
    if entry is None:
        entry = _Entry(compile_pymc_model(target), {} if lifted is None else lifted.shared)
        _store(key, backend, entry)
    if lifted is None:
        return entry.compiled, backend, reason
    if backend == "jax":
        in_logp = set(entry.compiled._shared_data)
    else:
        in_logp = {v.name for v in entry.compiled.shared_var_keys}
    compiled = entry.compiled.with_data(**{k: v for k, v in lifted.data.items() if k in in_logp})
    initial = _initial_point_func(entry.compiled)

    def initial_point(seed, _data=lifted.data, _entry=entry):
        # The initial-point function reads the cached model's shared variables: set them to
        # this model's data for the call (under the entry's lock: chains start in threads).
        with _entry.lock:
            for name, var in _entry.shared.items():
                var.set_value(_data[name])
            return initial(seed)

    return _with_initial_point_func(compiled, initial_point), backend, reason


def _initial_point_func(compiled):
    """The initial-point function of a nutpie model (numba: ``initial_point_func``; JAX:
    ``_make_initial_points``)."""
    if hasattr(compiled, "initial_point_func"):
        return compiled.initial_point_func
    return compiled._make_initial_points


def _with_initial_point_func(compiled, func):
    """``compiled`` with ``func`` as its initial-point function (either kind, as above)."""
    numba = hasattr(compiled, "initial_point_func")
    field = "initial_point_func" if numba else "_make_initial_points"
    return dataclasses.replace(compiled, **{field: func})


@contextlib.contextmanager
def run_in_background(during):
    """Run ``during()`` (``None``: nothing) in a thread for the duration of the ``with`` block
    and wait for it at its end. For work the model's result will need after sampling, such
    as compiling the exact GPs' leave-one-out pass (:class:`~bayes_gp.inference.sampling.
    NutsRun`'s ``during``): nutpie's chains run without the GIL, so a compilation overlaps
    them instead of following them. A failure there is dropped: the call that needs the work
    repeats it and reports its error."""
    if during is None:
        yield
        return

    def work() -> None:
        try:
            during()
        except Exception:  # repeated, and reported, by the call that needs the work
            return

    thread = threading.Thread(target=work, name="bayes_gp-during-sampling", daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()


def native_applies(model: pm.Model) -> bool:
    """Whether :func:`sample_nutpie` samples ``model`` on the C path of
    :mod:`bayes_gp.inference.native_gp` (covered, and the nutpie backend not set to JAX)."""
    from bayes_gp.inference import native_gp

    return _BACKEND != "jax" and native_gp.covers(model)


def _duck_array_probes() -> None:
    """The probes xarray makes when a process builds its first ``DataArray`` (nutpie's draws
    into ArviZ): whether dask and other duck-array modules are importable, which imports
    ``dask.array`` (0.5-0.7 s of a warm first fit, profiled). Made while the chains run
    instead, where the result is cached for the conversion that follows."""
    from xarray.namedarray.pycompat import array_type

    for module in ("dask", "sparse", "cupy", "pint"):
        array_type(module)


def _in_turn(*tasks):
    """One callable running ``tasks`` (``None`` skipped) one after another, each one's error
    dropped as :func:`run_in_background` drops them."""
    tasks = [t for t in tasks if t is not None]

    def run() -> None:
        for task in tasks:
            with contextlib.suppress(Exception):
                task()

    return run


def sample_nutpie(
    model: pm.Model,
    *,
    draws: int,
    tune: int,
    chains: int,
    random_seed,
    progressbar: bool,
    nuts: dict,
    cores: int | None = None,
    discard_tuned_samples: bool = True,
    quiet: bool = False,
    during=None,
):
    """NUTS with nutpie on ``model`` through the cache of compiled models, as ``pm.sample(...,
    nuts_sampler="nutpie")`` runs it (the same seeds per chain, cores, tuning and ArviZ groups).
    ``during``: a callable run in a background thread while the chains run (after the model is
    compiled: :func:`run_in_background`); ``quiet``: no progress bar (as ``pm.sample``'s, which
    for nutpie also drops one log line).

    An exact GP regression that :mod:`bayes_gp.inference.native_gp` computes in C is sampled
    with that log density (backend ``"native"``: nothing compiled per model) unless the
    backend is set to JAX (:func:`native_applies`); any other model is compiled by numba, or
    by JAX when :func:`set_nutpie_backend` says so (:func:`choose_backend`); the posterior's
    attributes ``bayes_gp_nutpie_backend`` and ``bayes_gp_nutpie_backend_reason`` say which
    and why.
    """
    import nutpie
    from pymc.backends.arviz import patch_nutpie_idata
    from pymc.util import get_random_generator

    from bayes_gp.inference import native_gp

    if _BACKEND == "jax":  # asked for by name: JAX it is
        compiled, native_reason = None, "the nutpie backend is set to jax"
    else:
        compiled, native_reason = native_gp.compile_native(model)
    if compiled is not None:
        backend, reason = "native", native_reason
    else:
        compiled, backend, reason = _compiled_for(model, chains * (max(tune, 1) + draws))
        if native_gp.describe(model) is not None:  # a GP the C path describes but did not take
            reason = f"{reason}; {native_reason}"
    nuts = dict(nuts)
    if "max_treedepth" in nuts:
        nuts["maxdepth"] = nuts.pop("max_treedepth")
    rngs = get_random_generator(random_seed).spawn(chains)
    seed = int(rngs[0].integers(2**30))  # pm.sample's seed for nutpie
    if cores is None:
        cores = min(4, os.cpu_count() or 1)
    t0 = time.time()
    with run_in_background(_in_turn(_duck_array_probes, during)):
        idata = nutpie.sample(
            compiled,
            draws=draws,
            tune=max(tune, 1),  # nuts-rs needs a tuning step (as pm.sample)
            chains=chains,
            cores=min(cores, chains),
            seed=seed,
            save_warmup=not discard_tuned_samples,
            progress_bar=bool(progressbar) and not quiet,
            **nuts,
        )
    patch_nutpie_idata(idata, model, sampling_time=time.time() - t0)
    idata["posterior"].attrs["bayes_gp_nutpie_backend"] = backend
    idata["posterior"].attrs["bayes_gp_nutpie_backend_reason"] = reason
    return idata
