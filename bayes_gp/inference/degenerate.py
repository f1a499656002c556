r"""Degenerate type-II fits: a scale on its boundary at zero, a length-scale below the data's grain.

A MAP fit maximises the log posterior density of the hyperparameters on their own scale
(:mod:`bayes_gp.inference.typeii`: no Jacobian of the log transform). Under a prior whose density
is largest at zero — the half-normal the package gives amplitudes, noise levels and group
standard deviations — the mode sits *on* the boundary whenever the likelihood is flat enough
there: the amplitude of a GP the data do not need, the noise of a model whose other terms
already interpolate, the spread of group effects that the data cannot separate from the noise
(Chung, Rabe-Hesketh, Dorie, Gelman & Liu 2013, *A nondegenerate penalized likelihood estimator
for variance parameters in multilevel models*). ML-II has the same end points whenever the
likelihood itself rises towards the boundary. The optimiser then stops close to zero (on the log
scale the boundary is at :math:`-\infty`, and the gradient there vanishes), with a small gradient
and a converged flag, and the fit predicts with no uncertainty from that term at all.

:func:`degenerate` names two kinds of such end points, each by a rule:

* **a scale at zero** (an amplitude ``eta``, a noise ``sigma``, a group spread ``*_tau`` or
  ``*_sd``): its value is below :data:`SCALE_TOL` = 1e-4 times its prior's scale (the prior's
  support point, PyMC's typical value of the prior: ``sigma`` of a half-normal, the mean of a
  gamma or an exponential, which the package's default priors take from the data: ``y``'s
  standard deviation, or 2 on a latent GP's link scale). Such a scale contributes less than
  ``1e-8`` of its prior's variance: a noise model that claims the data to four significant
  digits more than the data's spread, an amplitude whose GP is a constant to eight digits. No
  scale a prior calls plausible ends there except by running onto the boundary; anything
  between the rule and zero is where the optimiser happened to stop.
* **a length-scale below the data's grain**: a length-scale (``ls``, ``*_ls``, in the input's
  units) below :data:`SPACING_FRACTION` = 1/10 of the smallest spacing between distinct values
  of its input column (the smallest over the columns a shared length-scale acts on, which bounds
  the distance between distinct input rows from below). There the kernel correlates no two
  distinct inputs (at a tenth of the spacing: :math:`e^{-50} = 2\cdot 10^{-22}` for the squared
  exponential, :math:`4\cdot 10^{-8}` for Matérn 5/2, :math:`5\cdot 10^{-5}` for Matérn 1/2):
  the GP is white noise at the data, one free value per distinct input, which interpolates the
  data (a Bernoulli model separating every point) and reverts to its mean between them.
  Length-scales between a tenth of the spacing and the spacing are rough but can be real, so
  the rule leaves them alone.

A fit with either is not ``converged`` (the end point is a degenerate optimum, not an estimate
a statistician can report); :func:`bayes_gp.inference.typeii.warn_degenerate` says what to do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "SCALE_TOL",
    "SPACING_FRACTION",
    "SCALE_KINDS",
    "kind_of",
    "degenerate",
    "smallest_spacing",
    "kernel_spacing",
    "model_spacing",
]

#: A scale parameter below this fraction of its prior's scale is at its boundary (module docstring).
SCALE_TOL = 1e-4
#: A length-scale below this fraction of the smallest spacing of its input is below the data's grain.
SPACING_FRACTION = 0.1
#: The kinds (last part of a hyperparameter's name) of scale parameters: standard deviations,
#: whose boundary at zero removes a term from the model. Variances (``theta0``, ``kappa``) and
#: shapes (``alpha``, ``nu``, ``dispersion``) are not among them.
SCALE_KINDS = ("eta", "sigma", "tau", "sd")


def kind_of(label: str) -> str:
    """The kind of a hyperparameter from its name or coordinate label: the last part after
    ``::`` (a class of a multi-class model), ``.`` (a formula term) and ``_``, without an index
    and without a trailing ``_group`` (one value per group). ``"class_mid::eta"`` -> ``"eta"``,
    ``"ls_tau"`` -> ``"tau"``, ``"sigma_group[3]"`` -> ``"sigma"``, ``"expquad1_ls[0]"`` ->
    ``"ls"``."""
    name = label.split("[", 1)[0].rsplit("::", 1)[-1].rsplit(".", 1)[-1]
    if name.endswith("_group"):
        name = name[: -len("_group")]
    return name.rsplit("_", 1)[-1]


def _rv_name(label: str) -> str:
    return label.split("[", 1)[0]


def _index(label: str) -> int | None:
    return int(label[label.index("[") + 1 : -1]) if "[" in label else None


def _spacing_at(spacing: Mapping[str, Any], label: str) -> float:
    """The input spacing of the coordinate ``label`` (a vector's entry for an ARD label, the
    last axis of a per-group matrix ``ls_group`` (G, D) raveled in C order); a per-class name
    ``"class_a::ls"`` takes the plain name's spacing."""
    name = _rv_name(label)
    value = spacing.get(name, spacing.get(name.rsplit("::", 1)[-1]))
    if value is None:
        return float("nan")
    arr = np.atleast_1d(np.asarray(value, float))
    i = _index(label)
    if arr.size == 1 or i is None:  # a shared length-scale: the smallest over its columns
        return float(np.min(arr))
    return float(arr[i % arr.size])


def degenerate(
    labels: Sequence[str],
    values: np.ndarray,
    reference: np.ndarray,
    spacing: Mapping[str, Any] | None = None,
) -> tuple[str, ...]:
    """The coordinates of a type-II end point that are degenerate (module docstring).

    Parameters
    ----------
    labels : sequence of str
        Coordinate labels (``"eta"``, ``"ls[1]"``), as :func:`bayes_gp.inference.typeii.runaway`
        takes them.
    values : ndarray
        The end point's value of each coordinate, on the hyperparameters' own scale.
    reference : ndarray
        The prior's scale of each coordinate (the model's initial point: the priors' support
        points), on the same scale.
    spacing : mapping, optional
        Hyperparameter name -> the smallest spacing between distinct inputs of the column(s) its
        length-scale acts on (a number, or one per coordinate for an ARD vector). Length-scales
        not named are not judged.

    Returns
    -------
    tuple of str
        ``"sigma -> 0 (4.1e-09 < 1e-4 x its prior scale 0.76)"``, ``"ls = 0.0002 < 1/10 of the
        smallest input spacing 1"``; empty when none is degenerate.
    """
    spacing = spacing or {}
    out = []
    for label, value, ref in zip(labels, np.asarray(values, float), np.asarray(reference, float),
                                 strict=True):  # fmt: skip
        kind = kind_of(label)
        if kind in SCALE_KINDS and np.isfinite(ref) and ref > 0 and 0 <= value < SCALE_TOL * ref:
            out.append(f"{label} -> 0 ({value:.2g} < {SCALE_TOL:g} x its prior scale {ref:.3g})")
        elif kind == "ls":
            step = _spacing_at(spacing, label)
            if np.isfinite(step) and step > 0 and value < SPACING_FRACTION * step:
                out.append(
                    f"{label} = {value:.2g} < 1/{1 / SPACING_FRACTION:.0f} of the smallest input "
                    f"spacing {step:.3g}"
                )
    return tuple(out)


def smallest_spacing(column: np.ndarray) -> float:
    """The smallest difference between distinct values of ``column`` (``inf`` when it has fewer
    than two distinct finite values)."""
    u = np.unique(np.asarray(column, float))
    u = u[np.isfinite(u)]
    return float(np.min(np.diff(u))) if u.size > 1 else float("inf")


def _column_spacings(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X)
    if X.ndim != 2 or not np.issubdtype(X.dtype, np.number):
        return np.zeros(0)
    return np.array([smallest_spacing(X[:, j]) for j in range(X.shape[1])])


def _object_spacing(kernel, cols: np.ndarray) -> dict[str, Any]:
    """Spacings of the length-scales of a kernel object (its stationary, non-periodic factors,
    over their ``active_dims``), by the names the model gives their priors."""
    import pymc as pm

    from bayes_gp.kernels.parameters import kernel_parameters, random_variables

    try:
        names = {rv: n for n, rv in kernel_parameters(kernel).items()}
    except TypeError:
        return {}
    out: dict[str, Any] = {}

    def visit(k) -> None:
        if isinstance(k, pm.gp.cov.Combination):
            for f in k._factor_list:
                if isinstance(f, pm.gp.cov.Covariance):
                    visit(f)
            return
        if not isinstance(k, pm.gp.cov.Stationary) or "periodic" in type(k).__name__.lower():
            return  # a periodic length-scale is not in the input's units; constructions warp it
        ls = getattr(k, "ls", None)
        dims = np.atleast_1d(np.asarray(getattr(k, "active_dims", ()), int))
        if ls is None or dims.size == 0 or dims.max(initial=-1) >= cols.size:
            return
        for rv in random_variables(ls):
            name = names.get(rv)
            if name is None:
                continue
            step = cols[dims] if getattr(rv, "ndim", 0) == 1 else float(np.min(cols[dims]))
            out[name] = step if name not in out else np.minimum(out[name], step)

    visit(kernel)
    return out


def kernel_spacing(X: np.ndarray, kernel: Any, params: Sequence[str], ard: bool = False):
    """Hyperparameter name -> the smallest input spacing its length-scale is judged against by
    :func:`degenerate`, for a model's kernel on inputs ``X`` (n, D).

    ``kernel`` is the model's ``kernel=`` argument: a catalogue name or expression (every
    ``*ls`` of ``params`` except a periodic factor's acts on all D columns: one spacing per
    column under ARD, else the smallest over the columns) or a kernel object (each stationary
    factor over its ``active_dims``). A callable kernel, non-numeric inputs: nothing."""
    import pymc as pm

    cols = _column_spacings(X)
    if cols.size == 0:
        return {}
    if isinstance(kernel, pm.gp.cov.BaseCovariance):
        return _object_spacing(kernel, cols)
    if not isinstance(kernel, str):
        return {}
    return {
        p: (cols.copy() if ard else float(np.min(cols)))
        for p in params
        if kind_of(p) == "ls" and not p.startswith("periodic")
    }


def model_spacing(gp: Any) -> dict[str, Any]:
    """:func:`kernel_spacing` of a model object from its ``X``, ``kernel``, ``spec`` (or the
    coregionalisation ``terms`` of a multi-output model) and ``ard``, under every name its
    length-scales take in the PyMC model: the kernel's own (``ls``; per class,
    ``class_a::ls``, by the plain name), a hierarchical model's group values (``ls_group``) and
    population curve's (``f0_ls``), a multi-output term's prefixed name. Empty where the model
    has no such attributes."""
    X = getattr(gp, "X", None)
    if X is None:
        return {}
    ard = bool(getattr(gp, "ard", False))
    terms = getattr(gp, "terms", None)
    out: dict[str, Any] = {}
    if terms:  # MultiOutputGP: catalogue terms, names prefixed by the term's label
        for t in terms:
            if t.spec.catalogue:
                found = kernel_spacing(X, t.spec.name, t.params, ard)
                out.update({t.name(p): v for p, v in found.items()})
        return out
    spec = getattr(gp, "spec", None)
    if spec is None:
        return {}
    kernel = getattr(gp, "kernel", None)
    kernel = spec.name if spec.catalogue else kernel
    for p, v in kernel_spacing(X, kernel, spec.params, ard).items():
        out.update({p: v, f"{p}_group": v, f"f0_{p}": v})
    return out
