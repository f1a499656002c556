r"""The random hyperparameters of a kernel object, by name.

A kernel object may carry *unnamed* priors, ``pm.X.dist(...)``, where a number would fix a
hyperparameter::

    k = Matern(1, nu=1.5, ls=pm.Gamma.dist(2, 2)) * Periodic(1, period=pm.Normal.dist(5, 0.1))

A model that is given such a kernel (``GPRegression(X, y, kernel=k)``) needs a name for each of
them, to register a copy in its PyMC model (:func:`bayes_gp.priors.resolve_prior`) and to report
and save it. :func:`kernel_parameters` finds them and names them after the attribute that holds
them (``ls``, ``period``, ``eta`` for the scale factor of a product), prefixed by the kernel's
class where two kernels use the same attribute name (``matern_ls``, ``periodic_ls``) and
numbered where that is still ambiguous. Priors reached only through a function (a
:class:`~bayes_gp.kernels.Gibbs` length-scale function's closure) are named ``theta``,
``theta1``, ... A variable that already has a name belongs to some PyMC model and is refused:
a kernel object is built outside any model.
"""

from __future__ import annotations

from collections import Counter

import pymc as pm
import pytensor.tensor as pt
from pytensor.graph.traversal import ancestors
from pytensor.tensor.random.op import RandomVariable

__all__ = ["kernel_parameters", "describe_kernel", "random_variables"]


def random_variables(value) -> list[pt.TensorVariable]:
    """The random variables among the ancestors of a tensor, in graph order."""
    if not isinstance(value, pt.TensorVariable):
        return []
    return [
        v
        for v in ancestors([value])
        if v.owner is not None
        and isinstance(v.owner.op, RandomVariable)
        and v is v.owner.default_output()
    ]


def _attributes(kernel, out: list[tuple[str, str, pt.TensorVariable]]) -> None:
    """``(attribute, kernel class, random variable)`` for every tensor attribute, recursively
    through sums and products (a product's tensor factor is its scale, named ``eta``)."""
    if isinstance(kernel, pm.gp.cov.Combination):
        for f in kernel._factor_list:
            if isinstance(f, pm.gp.cov.Covariance):
                _attributes(f, out)
            else:
                for rv in random_variables(f):
                    out.append(("eta", "scale", rv))
        return
    for attr, value in vars(kernel).items():
        if attr.startswith("__"):
            continue
        if isinstance(value, pm.gp.cov.Covariance):  # a construction's base kernel
            _attributes(value, out)
            continue
        if isinstance(value, tuple | list):  # a construction's kernels (ChangePoints, Additive)
            for item in value:
                if isinstance(item, pm.gp.cov.Covariance):
                    _attributes(item, out)
                else:
                    for rv in random_variables(item):
                        out.append((attr.lstrip("_"), type(kernel).__name__.lower(), rv))
            continue
        for rv in random_variables(value):
            out.append((attr.lstrip("_"), type(kernel).__name__.lower(), rv))


def kernel_parameters(kernel: pm.gp.cov.Covariance) -> dict[str, pt.TensorVariable]:
    """The unnamed random variables (``pm.X.dist(...)``) of a kernel object, by name (module
    docstring), in the order they appear in the kernel.

    Raises
    ------
    TypeError
        If the kernel contains a named random variable (one of some PyMC model).
    """
    if not isinstance(kernel, pm.gp.cov.BaseCovariance):
        raise TypeError(f"expected a PyMC covariance function, got {type(kernel).__name__}")
    found: list[tuple[str, str, pt.TensorVariable]] = []
    _attributes(kernel, found)
    try:
        graph = kernel(pt.dmatrix("X"))
    except (TypeError, ValueError, NotImplementedError):  # a kernel on other inputs (strings)
        graph = None
    for rv in random_variables(graph):  # reached only through a function, e.g. a closure
        found.append(("theta", "", rv))
    seen: dict[pt.TensorVariable, tuple[str, str]] = {}
    for attr, cls, rv in found:
        if rv.name is not None:
            raise TypeError(
                f"the kernel's hyperparameter {attr!r} is the random variable {rv.name!r} of a "
                "PyMC model. Build the kernel object with numbers (fixed hyperparameters) or "
                "unnamed priors, e.g. ls=pm.Gamma.dist(2, 2), which the model registers under "
                "names of its own; or pass a callable kernel(D) that creates its variables in the "
                "model"
            )
        seen.setdefault(rv, (attr, cls))
    # name by attribute; class-prefixed where attributes collide; numbered where that collides
    by_attr = Counter(attr for attr, _ in seen.values())
    names = [attr if by_attr[attr] == 1 or not cls else f"{cls}_{attr}" for attr, cls in seen.values()]
    counts, used = Counter(names), Counter()
    out = {}
    for name, rv in zip(names, seen, strict=True):
        if counts[name] > 1:
            used[name] += 1
            name = f"{name}{used[name]}"
        out[name] = rv
    return out


def describe_kernel(kernel) -> str:
    """A short description of a kernel object: class names joined by ``+`` and ``*``, ``c`` for
    a constant or random scale factor, e.g. ``"c * Matern * Periodic + ExpQuad"``."""
    if isinstance(kernel, pm.gp.cov.Add):
        return " + ".join(describe_kernel(f) for f in kernel._factor_list)
    if isinstance(kernel, pm.gp.cov.Prod):
        parts = []
        for f in kernel._factor_list:
            text = describe_kernel(f) if isinstance(f, pm.gp.cov.Covariance) else "c"
            parts.append(f"({text})" if " + " in text else text)
        return " * ".join(parts)
    return type(kernel).__name__
