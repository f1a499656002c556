"""nutpie's JAX model: compiled in about a second, evaluated through Python at every step.

nutpie samples a PyMC model compiled either by numba (C entry points that nuts-rs calls with no
Python in between; :mod:`bayes_gp.inference.nutpie_compile`) or by JAX (a jitted log density and
gradient that nuts-rs calls through Python, holding the GIL). They trade compilation for speed
per step. Measured on the 2-core machine (``GPRegression`` with Matérn and ExpQuad kernels, one
process; first-model compile times from a fresh and a warm cache):

====================  ==============  ===============  ================================
                      numba           JAX              JAX per gradient (one thread)
====================  ==============  ===============  ================================
compile, first model  16-32 s         4-8 s            n = 30: 0.28 ms, 0.56 MB accessed
compile, each next    8-10 s          0.4-1.2 s        n = 100: 0.46 ms, 6.0 MB
2 x (1000 + 1000)     3.5 s (n=100)   11.7 s (n=100)   n = 300: 6.3 ms, 53 MB
                      27.7 s (n=300)  95.8 s (n=300)
====================  ==============  ===============  ================================

So JAX wins whenever its whole run is shorter than numba's compilation, which is every short run
on small data (the 200-draw fits of a notebook's fast mode, a cross-validation fold, a test) and
loses on long runs. :func:`estimate_seconds` predicts the run from XLA's own cost analysis of the
gradient (the bytes it accesses, deterministic for a given graph and data size, so the choice
made from it is the same in every run with the same seed); the choice is made by
:func:`bayes_gp.inference.compiled.choose_backend` when the nutpie backend is set to ``"auto"``.
That is opt-in: the estimate assumes :data:`LEAPFROGS` gradients per iteration, and a posterior
with deep trees (the Mauna Loa notebook's composite kernel) took JAX there although numba was
faster (notebook 57 s against 40 s for the NUTS cell); a test file whose models share one
structure gains nothing either (tests/regression/test_nuts.py 75 s against 71 s).

:func:`compile_pymc_model` is nutpie's ``compile_pymc_model(model, backend="jax",
gradient_backend="pytensor")`` built from the same nutpie internals (``_make_functions``,
``from_pyfunc``; checked against :data:`~bayes_gp.inference.nutpie_compile.NUTPIE_TESTED`) so
that the jitted gradient is at hand for the cost analysis, and with the model's shared variables
left as arguments (not frozen into constants, nutpie's default for JAX): a cached compiled model
then takes another model's data through ``with_data``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

__all__ = ["JaxModel", "compile_pymc_model", "estimate_seconds", "jax_available", "refuses_jax"]

#: Seconds of Python and dispatch per gradient evaluation (measured 0.15-0.28 ms at n = 30).
EVAL_OVERHEAD_S = 2.5e-4
#: Bytes per second XLA's CPU code moves through the gradient (measured: 53 MB in 6.3 ms at
#: n = 300, 8.4 GB/s; at n = 100 the estimate is twice the measurement: it errs towards numba).
BYTES_PER_S = 8e9
#: Gradient evaluations per NUTS iteration assumed by the estimate (tree depth 3: GP
#: hyperparameter posteriors take 3-7 leapfrog steps per draw).
LEAPFROGS = 8


@dataclasses.dataclass(frozen=True)
class JaxModel:
    """A nutpie model compiled by JAX and what one gradient evaluation costs.

    Attributes
    ----------
    compiled : nutpie CompiledModel
        What ``nutpie.sample`` takes (``with_data`` swaps the data arrays, by shared name).
    bytes_per_eval : float
        Bytes XLA's cost analysis counts for one log density and gradient evaluation.
    """

    compiled: Any
    bytes_per_eval: float

    def seconds_per_eval(self) -> float:
        """The estimated wall time of one gradient evaluation."""
        return EVAL_OVERHEAD_S + self.bytes_per_eval / BYTES_PER_S


def estimate_seconds(model: JaxModel, iterations: int) -> float:
    r"""Estimated wall time of ``iterations`` NUTS iterations (all chains together: the GIL
    serialises them) with the JAX model:

    .. math:: t \approx \text{iterations} \times L \times (t_0 + B / b)

    with :data:`LEAPFROGS` :math:`L`, :data:`EVAL_OVERHEAD_S` :math:`t_0`, the gradient's bytes
    accessed :math:`B` and :data:`BYTES_PER_S` :math:`b`.
    """
    return float(iterations) * LEAPFROGS * model.seconds_per_eval()


def jax_available() -> bool:
    """Whether JAX is installed (it is optional: ``pip install bayes_gp[jax]``)."""
    import importlib.util

    return importlib.util.find_spec("jax") is not None


def refuses_jax(model) -> str | None:
    """The name of an Op in ``model``'s log density that has no JAX implementation (bayes_gp's
    Laplace and sparse Ops refuse with ``NotImplementedError``), or ``None``. Only bayes_gp's own
    Ops are asked; PyTensor's are taken to have one (a compile that fails anyway falls back)."""
    from pytensor.graph.traversal import applys_between
    from pytensor.link.jax.dispatch import jax_funcify

    from bayes_gp import op_backends

    op_backends.ensure("jax")
    logp = model.logp()
    inputs = list(model.value_vars)
    seen: set[type] = set()
    for node in applys_between(inputs, [logp]):
        cls = type(node.op)
        if cls in seen or not cls.__module__.startswith("bayes_gp"):
            continue
        seen.add(cls)
        try:
            jax_funcify(node.op, node=node)
        except NotImplementedError:
            return cls.__name__
    return None


def compile_pymc_model(model) -> JaxModel:
    """nutpie's JAX model of ``model`` (module docstring): its log density and PyTensor's
    gradient compiled by JAX, the model's shared variables kept as arguments."""
    # PyMC's JAX sampling module sets XLA's host device count (its numpyro chains run in
    # parallel, one device each) when it is imported before JAX starts its backend (importing
    # jax does not start it; this model's first call does): import it here, or a numpyro run
    # after this model would draw its chains one after another.
    import jax
    import nutpie
    import pymc.sampling.jax  # noqa: F401
    from nutpie.compile_pymc import _prepare_dims_and_coords
    from nutpie.compiled_pyfunc import from_pyfunc

    from bayes_gp import op_backends
    from bayes_gp.inference.nutpie_compile import make_functions, tested_nutpie

    op_backends.ensure("jax")
    if not tested_nutpie():  # nutpie's own (no cost analysis: "auto" then takes numba)
        compiled = nutpie.compile_pymc_model(
            model, backend="jax", gradient_backend="pytensor", freeze_model=False
        )
        return JaxModel(compiled, np.inf)
    n_dim, _, logp_pt, expand_pt, initial_point_fn, shape_info, reparam = make_functions(
        model, "JAX"
    )
    logp_fn = logp_pt.vm.jit_fn
    expand_fn = expand_pt.vm.jit_fn
    logp_names = [var.name for var in logp_pt.get_shared()]
    expand_names = [var.name for var in expand_pt.get_shared()]
    shared: dict[str, Any] = {}
    for var in [*logp_pt.get_shared(), *expand_pt.get_shared()]:
        if var.name in shared and shared[var.name] is not var:
            raise ValueError(f"shared variables must have unique names: {var.name}")
        shared[var.name] = var
    data = {name: jax.numpy.asarray(var.get_value()) for name, var in shared.items()}

    def make_logp_func():
        def logp(x, **values):
            value, grad = logp_fn(x, *[values[name] for name in logp_names])
            return float(value), np.asarray(grad, dtype="float64", order="C")

        return logp

    names, _, shapes = shape_info
    dtypes = [np.dtype("float64")] * len(names)

    def make_expand_func(seed1, seed2, chain):
        def expand(x, **values):
            out = expand_fn(x, *[values[name] for name in expand_names])
            return {
                name: np.asarray(val, order="C", dtype=dtype).reshape(shape)
                for name, val, dtype, shape in zip(names, out, dtypes, shapes, strict=True)
            }

        return expand

    # XLA's cost analysis of the gradient (lowering only: compilation happens at the first call)
    lowered = logp_fn.lower(np.zeros(n_dim), *[data[name] for name in logp_names])
    cost = lowered.cost_analysis() or {}
    if isinstance(cost, list | tuple):
        cost = cost[0] if cost else {}
    dims, coords = _prepare_dims_and_coords(model, shape_info, reparam)
    compiled = from_pyfunc(
        ndim=n_dim,
        make_logp_fn=make_logp_func,
        make_expand_fn=make_expand_func,
        make_initial_point_fn=initial_point_fn,
        expanded_dtypes=dtypes,
        expanded_shapes=shapes,
        expanded_names=names,
        shared_data=data,
        dims=dims,
        coords=coords,
        reparameterized_names=reparam,
    )
    # without a cost analysis the run cannot be estimated: infinitely costly, numba is chosen
    return JaxModel(compiled, float(cost.get("bytes accessed", np.inf)))
