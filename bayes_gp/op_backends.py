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

__all__ = ["BACKENDS", "op_backend", "ensure", "ensure_available", "numba_cache_key",
           "numba_disk_cache", "cached_cfunc"]

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


def cached_cfunc(fn: Callable, signature, key: str):
    """``fn`` compiled as a numba ``cfunc`` of ``signature`` (C signature over raw pointers),
    once per process and ``key``, and cached on disk under ``key`` in PyTensor's numba cache
    (unless ``BAYES_GP_NUMBA_CACHE=0``): the native Laplace solvers
    (:mod:`bayes_gp.latent.native`, :mod:`bayes_gp.classification.native`), which each model's
    small compiled function calls through the returned object's ``address``."""
    with _CFUNC_LOCK:
        if key in _CFUNCS:
            return _CFUNCS[key]
    import numba
    from pytensor.link.numba.cache import CACHED_SRC_FUNCTIONS

    cache = numba_disk_cache()
    if cache:
        CACHED_SRC_FUNCTIONS[fn] = key  # PyTensor's cache locator finds it under this key
    cf = numba.cfunc(signature, cache=cache, error_model="numpy")(fn)
    with _CFUNC_LOCK:
        return _CFUNCS.setdefault(key, cf)
