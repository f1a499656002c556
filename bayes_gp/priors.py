"""The prior forms every model takes in ``priors={name: ...}``, resolved by one function.

For each hyperparameter name a model accepts (its kernel's, ``sigma``, a mean's ``c``,
``intercept``, ``slope``, a noise GP's ``noise_*``), ``priors[name]`` may be

* a callable ``f(name)`` that creates the random variable in the current model, e.g.
  ``lambda name: pm.Gamma(name, alpha=2, beta=1)`` (initial values, transforms and dims are
  the user's to set there);
* an unnamed distribution ``pm.X.dist(...)``, e.g. ``pm.LogNormal.dist(0, 1)``: registered under
  ``name`` (with the ``feature`` dimension for an ARD hyperparameter);
* a number or an array: the hyperparameter is **fixed** at that value, not a random variable.
  It is then not among the model's ``hyperparameters``, not sampled and not optimised, like
  scikit-learn's ``"fixed"`` bounds. The value must be finite, and positive for a positive
  hyperparameter (a length-scale, an amplitude, a noise level, a period).

Names a model does not know are refused by the model, with the names it does know.
"""

from __future__ import annotations

from collections.abc import Callable
from numbers import Number
from typing import Any

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pytensor.tensor.random.type import RandomType

__all__ = ["resolve_prior", "register_copy", "POSITIVE_SUFFIXES"]

#: Hyperparameters whose values must be positive, by the last part of their name.
POSITIVE_SUFFIXES = ("ls", "eta", "sigma", "period", "alpha", "theta0", "theta1", "theta2",
                     "theta3", "sigma0", "kappa", "nu", "dispersion", "precision",
                     "shape")  # fmt: skip


def _fixed(name: str, value: Any, ard: bool) -> pt.TensorConstant:
    arr = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"`priors[{name!r}]`: a fixed value must be finite, got {value!r}")
    if name.rsplit("_", 1)[-1] in POSITIVE_SUFFIXES and np.any(arr <= 0):
        raise ValueError(f"`priors[{name!r}]`: a fixed {name} must be positive, got {value!r}")
    if arr.ndim > 1 or (arr.ndim == 1 and not ard):
        what = "a number or one value per input (ARD)" if ard else "a number"
        raise ValueError(f"`priors[{name!r}]`: a fixed value must be {what}, got shape {arr.shape}")
    return pt.constant(arr, name=name)


def register_copy(dist: pt.TensorVariable, name: str, dims=None) -> pt.TensorVariable:
    """Register a copy of the unnamed prior ``dist`` (``pm.X.dist(...)``) as the variable
    ``name`` (over ``dims``) in the current model, with its own random generator.

    The user's variable stays unnamed, so the same prior can build the model again or another
    model (LatentGP builds the evidence model and the joint latent model from one ``priors``),
    and serve several variables of one model (a kernel object's prior of ``ls`` is also that of
    a hierarchical model's ``f0_ls``): copies sharing the generator would be identical nodes,
    which PyTensor's rewrites merge into one.
    """
    inputs = [pytensor.shared(np.random.default_rng()) if isinstance(i.type, RandomType) else i
              for i in dist.owner.inputs]  # fmt: skip
    node = dist.owner.clone_with_new_inputs(inputs)
    rv = node.outputs[dist.owner.outputs.index(dist)]
    return pm.modelcontext(None).register_rv(rv, name, dims=dims)


def resolve_prior(
    priors: dict, name: str, default: Callable[[str], Any], *, ard: bool = False
) -> Any:
    """The hyperparameter ``name`` in the current PyMC model, from ``priors[name]`` in one of the
    forms of the module docstring, or ``default(name)`` when the user gave none.

    Returns a random variable, or a constant tensor for a fixed value.
    """
    if name not in priors:
        return default(name)
    p = priors[name]
    if isinstance(p, pt.TensorVariable) and not isinstance(p, pt.TensorConstant):
        if p.name is not None or p.owner is None:
            raise TypeError(
                f"`priors[{name!r}]` must be an unnamed pm.X.dist(...), a callable f(name) or a "
                f"fixed number, got the variable {p.name or p}"
            )
        # dims as a tuple: PyMC 6 reads a plain string as a sequence of one-letter dimensions
        return register_copy(p, name, dims=("feature",) if ard else None)
    if isinstance(p, Number | np.ndarray | list | tuple) and not isinstance(p, bool):
        return _fixed(name, p, ard)
    if callable(p):
        return p(name)
    raise TypeError(
        f"`priors[{name!r}]` must be a callable f(name), an unnamed pm.X.dist(...) or a fixed "
        f"number, got {type(p).__name__}"
    )
