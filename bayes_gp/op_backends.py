"""One registry of the backend implementations of bayes_gp's own PyTensor Ops.

The fused exact-GP log density (:mod:`bayes_gp.solvers.likelihood`) and the sparse
compact-support one (:mod:`bayes_gp.solvers.compact`) run in PyTensor's C/Python backend
through their ``perform`` methods; for numba (what nutpie runs) and JAX (numpyro) each module
declares a *registrar*, a function that registers its Ops with that backend's dispatcher:

.. code-block:: python

   @op_backend("numba")
   def _register_numba():
       from pytensor.link.numba.dispatch.basic import numba_funcify
       ...

Registrars run lazily, once each: importing PyTensor's numba dispatch imports numba and its JAX
dispatch imports JAX (seconds each), which ``import bayes_gp`` should not pay for.
:func:`ensure_available` (called when an Op builds a node) runs the numba registrars, and the JAX
ones when JAX is already loaded; :func:`ensure` runs one backend's registrars on demand
(:func:`bayes_gp.inference.nuts.run_nuts` before numpyro samples), so the samplers need not know
which modules define Ops.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["BACKENDS", "op_backend", "ensure", "ensure_available", "numba_cache_key",
           "numba_disk_cache", "cached_cfunc", "compile_elsewhere"]

#: Backends with registrars.
BACKENDS = ("numba", "jax")
#: Which import makes a backend worth registering eagerly (numba ships with PyTensor 3).
_LOADED_WHEN = {"numba": None, "jax": "jax"}

_registrars: dict[str, list[Callable[[], None]]] = {b: [] for b in BACKENDS}
_done: set[Callable[[], None]] = set()


def _check(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"unknown Op backend {backend!r}; known: {BACKENDS}")


def op_backend(backend: str) -> Callable[[Callable[[], None]], Callable[[], None]]:
    """Decorator: declare ``registrar`` as the function that registers a module's Ops with
    ``backend`` (``"numba"`` or ``"jax"``). It runs at most once, from :func:`ensure`."""
    _check(backend)

    def decorate(registrar: Callable[[], None]) -> Callable[[], None]:
        _registrars[backend].append(registrar)
        return registrar

    return decorate


def ensure(backend: str) -> None:
    """Run every registrar of ``backend`` declared so far that has not run yet.

    A registrar whose backend is not installed (``ImportError`` from its dispatch module) is
    left to be tried again later."""
    _check(backend)
    for registrar in _registrars[backend]:
        if registrar in _done:
            continue
        try:
            registrar()
        except ImportError:
            continue
        _done.add(registrar)


def _loaded(name: str) -> bool:
    """Whether module ``name`` has been imported for real: not a lazy placeholder
    (``importlib.util.LazyLoader``; ArviZ's ``io_numpyro`` puts a lazy ``jax`` in
    ``sys.modules``, and touching it would import JAX, ~1.6 s of an exact GP's warm first fit)."""
    module = sys.modules.get(name)
    return module is not None and type(module).__name__ != "_LazyModule"


def ensure_available() -> None:
    """Register the Ops with numba, and with JAX when JAX is already imported (for real)."""
    for backend, module in _LOADED_WHEN.items():
        if module is None or _loaded(module):
            ensure(backend)


def numba_disk_cache() -> bool:
    """Whether bayes_gp's compiled code goes to PyTensor's on-disk numba cache: not with
    ``BAYES_GP_NUMBA_CACHE=0`` (:func:`numba_cache_key`, :mod:`bayes_gp.latent.native`)."""
    return os.environ.get("BAYES_GP_NUMBA_CACHE", "1").strip() != "0"


def numba_cache_key(op, *modules: str, native: bool = True) -> str | None:
    """The key under which PyTensor's on-disk numba cache keeps ``op``'s numba implementation
    (``None``: not cacheable), for ``register_funcify_and_cache_key``.

    PyTensor caches a compiled graph only when every node has a key (``numba_funcify_and_cache_key``
    in ``pytensor.link.numba.dispatch.basic``): one Op without a key makes it compile the whole
    log density again in every process (7.4 s of an exact GP's first fit at n = 100 with a warm
    cache, issue 41). The key names the Op's class and props and hashes the source of the
    ``modules`` that define its implementation, so that an edit of the code is a new key (numba's
    own key covers only the argument types). An implementation that calls Python
    (``numba.objmode``, ``native=False``) refers to objects of this process and is not cached.

    Parameters
    ----------
    op : Op
    *modules : str
        Names of the modules whose source the compiled function depends on.
    native : bool
        Whether the implementation is nopython code throughout.
    """
    if not native or not numba_disk_cache():
        return None
    import hashlib
    import importlib

    import numba

    digest = hashlib.sha256()
    digest.update(repr((type(op).__module__, type(op).__qualname__, op._props_dict())).encode())
    digest.update(numba.__version__.encode())
    for name in modules:
        module = importlib.import_module(name)
        with open(module.__file__, "rb") as fh:
            digest.update(fh.read())
    return f"bayes_gp:{digest.hexdigest()}"


_CFUNCS: dict[str, object] = {}
_CFUNC_LOCK = threading.Lock()
#: one lock per key, held while its cfunc is compiled or loaded (:func:`cached_cfunc`)
_CFUNC_KEY_LOCKS: dict[str, threading.Lock] = {}
#: child processes compiling a ``cfunc`` into the disk cache (:func:`compile_elsewhere`), by key
_CHILDREN: dict[str, Any] = {}
#: seconds :func:`cached_cfunc` waits for such a child before it compiles the ``cfunc`` itself
CHILD_TIMEOUT = 600.0


def cached_cfunc(fn: Callable, signature, key: str):
    """``fn`` compiled as a numba ``cfunc`` of ``signature`` (C signature over raw pointers),
    once per process and ``key``, and cached on disk under ``key`` in PyTensor's numba cache
    (unless ``BAYES_GP_NUMBA_CACHE=0``): the native Laplace solvers
    (:mod:`bayes_gp.latent.native`, :mod:`bayes_gp.classification.native`), which each model's
    small compiled function calls through the returned object's ``address``, and the exact
    GPs' compiled leave-one-out pass. A second thread asking for a ``key`` being compiled
    waits for it (a compilation started during sampling, :class:`bayes_gp.inference.sampling.
    NutsRun`'s ``during``, is not repeated)."""
    with _CFUNC_LOCK:
        if key in _CFUNCS:
            return _CFUNCS[key]
        key_lock = _CFUNC_KEY_LOCKS.setdefault(key, threading.Lock())
    with key_lock:
        with _CFUNC_LOCK:
            if key in _CFUNCS:
                return _CFUNCS[key]
            child = _CHILDREN.pop(key, None)
        if child is not None:  # it writes the cfunc to the disk cache, which numba loads below
            import subprocess

            try:
                child.wait(timeout=CHILD_TIMEOUT)
            except subprocess.TimeoutExpired:  # then compiled here
                child.kill()
        import numba
        from pytensor.link.numba.cache import CACHED_SRC_FUNCTIONS

        cache = numba_disk_cache()
        if cache:
            CACHED_SRC_FUNCTIONS[fn] = key  # PyTensor's cache locator finds it under this key
        cf = numba.cfunc(signature, cache=cache, error_model="numpy")(fn)
        with _CFUNC_LOCK:
            return _CFUNCS.setdefault(key, cf)


def _on_disk(key: str) -> bool:
    """Whether PyTensor's numba cache directory holds an index for the ``cfunc`` ``key``
    (numba names it ``<function>-<key>.py<version>.nbi``)."""
    import glob

    from pytensor.link.numba.cache import NUMBA_CACHE_PATH

    return any(NUMBA_CACHE_PATH.glob(f"*-{glob.escape(key)}.py*.nbi"))


def compile_elsewhere(module: str, function: str, key: str) -> bool:
    """Start compiling, in a child process, the ``cfunc`` that ``module.function()`` builds with
    :func:`cached_cfunc` under ``key``, unless this process has it, the disk cache has it, a
    child is already at it, or the disk cache is off (``BAYES_GP_NUMBA_CACHE=0``). Returns
    whether a child is at it (started now or before).

    Compiling is single-threaded (numba holds one lock for it in a process), so a new machine's
    first fit that needs such a ``cfunc`` besides its model (the native Laplace solvers, seconds
    each; the exact GPs' compiled leave-one-out pass) compiles it on the other core while this
    process compiles the model, instead of one after the other. :func:`cached_cfunc` waits for
    the child (at most :data:`CHILD_TIMEOUT` seconds) and loads the result from the disk cache;
    where the child failed, it compiles the ``cfunc`` itself, as it would have without one. The
    child imports ``module`` without running its parent packages' ``__init__`` (bayes_gp's
    would import PyMC: 4-5 s against 1-2 s), and compiles into this process's PyTensor cache
    directory (``base_compiledir``)."""
    if not numba_disk_cache():
        return False
    import importlib.util
    import subprocess

    from pytensor import config

    with _CFUNC_LOCK:
        if key in _CHILDREN:
            return True
        if key in _CFUNCS or _on_disk(key):
            return False
        parts = module.split(".")
        packages = {}
        for k in range(1, len(parts)):
            name = ".".join(parts[:k])
            spec = importlib.util.find_spec(name)
            if spec is None or not spec.submodule_search_locations:
                return False
            packages[name] = list(spec.submodule_search_locations)
        code = (
            "import importlib, sys, types\n"
            f"for name, path in {packages!r}.items():\n"
            "    m = types.ModuleType(name)\n"
            "    m.__path__ = path\n"
            "    sys.modules[name] = m\n"
            f"getattr(importlib.import_module({module!r}), {function!r})()\n"
        )
        flags = os.environ.get("PYTENSOR_FLAGS", "")
        env = {**os.environ, "PYTENSOR_FLAGS": ",".join(
            f for f in (flags, f"base_compiledir={config.base_compiledir}") if f)}  # fmt: skip
        try:
            _CHILDREN[key] = subprocess.Popen(
                [sys.executable, "-c", code], env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        except OSError:  # no child: cached_cfunc compiles it here
            return False
    return True
