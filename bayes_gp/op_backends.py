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

import sys
from collections.abc import Callable

__all__ = ["BACKENDS", "op_backend", "ensure", "ensure_available"]

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


def ensure_available() -> None:
    """Register the Ops with numba, and with JAX when JAX is already imported."""
    for backend, module in _LOADED_WHEN.items():
        if module is None or module in sys.modules:
            ensure(backend)
