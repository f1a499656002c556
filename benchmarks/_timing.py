"""Timing helpers shared by the benchmark scripts (run them from the repository root as
``python benchmarks/<name>.py``: this directory is then on ``sys.path``)."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt


def call_times(fn: Callable[[], object], repeats: int) -> np.ndarray:
    """Milliseconds of each of ``repeats`` calls of ``fn`` after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return np.array(times) * 1e3


def best_time(fn: Callable[[], object], repeats: int) -> float:
    """Milliseconds of the fastest of ``repeats`` calls of ``fn`` after one warm-up call."""
    return float(call_times(fn, repeats).min())


def logp_dlogp(model: pm.Model, theta: Mapping[str, float], mode: str) -> Callable[[], list]:
    """``f() -> [logp, *grad]`` of the observed term (the marginal likelihood) with respect to the
    unconstrained hyperparameters (each through its model's transform: log, or another such as
    a scaled log), compiled in PyTensor ``mode``, at the values ``theta`` (by variable name)."""
    lp = model.logp(vars=model.observed_RVs, jacobian=False)
    wrt = model.value_vars
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = pytensor.function(wrt, [lp, *pt.grad(lp, wrt)], mode=mode, trust_input=True)
    values = []
    for rv in model.free_RVs:
        value = pt.constant(np.float64(theta[rv.name]))
        transform = model.rvs_to_transforms.get(rv)
        if transform is not None:
            value = transform.forward(value, *rv.owner.inputs)
        values.append(np.asarray(value.eval()))
    return lambda: f(*values)
