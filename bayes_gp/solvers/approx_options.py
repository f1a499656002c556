"""The validated request for an approximate likelihood (:class:`ApproxSpec`, :func:`approx_spec`).

It lives below :mod:`~bayes_gp.solvers.hsgp` and :mod:`~bayes_gp.solvers.inducing`, which
both take it, and below :mod:`~bayes_gp.solvers.approx`, which chooses between them: no module
of the three imports another's caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["APPROXIMATIONS", "ApproxSpec", "approx_spec"]

APPROXIMATIONS = ("hsgp", "vfe", "fitc")
_OPTIONS = {"hsgp": ("m", "c"), "vfe": ("n_inducing", "Xu"), "fitc": ("n_inducing", "Xu")}


@dataclass(frozen=True)
class ApproxSpec:
    """A validated approximation request (see :func:`approx_spec`)."""

    name: str
    m: tuple[int, ...] | None = None
    c: tuple[float, ...] | None = None
    n_inducing: int | None = None
    Xu: np.ndarray | None = None


def _positive_ints(name: str, value, D: int) -> tuple[int, ...]:
    arr = np.atleast_1d(np.asarray(value))
    if arr.ndim != 1 or arr.size not in (1, D) or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(
            f"`approx_options[{name!r}]` must be a positive integer or one per input dimension "
            f"({D}), got {value!r}"
        )
    if np.any(arr < 1):
        raise ValueError(f"`approx_options[{name!r}]` must be positive, got {value!r}")
    return tuple(int(v) for v in np.broadcast_to(arr, (D,)))


def approx_spec(approx: str | None, options: Mapping[str, Any] | None, X: np.ndarray):
    """Validate ``approx`` and ``approx_options`` for inputs ``X``; ``None`` for the exact GP.

    Options: ``"hsgp"``: ``m`` (basis functions per input dimension: an int or one per dimension)
    and ``c`` (boundary factor > 1: the box is ``c`` times the data's half-range; a number or one
    per dimension); ``"vfe"``/``"fitc"``: ``n_inducing`` (number of k-means inducing inputs) or
    ``Xu`` (the inducing inputs, shape ``(M, D)``). Omitted options get the data-based defaults
    of the module docstring.
    """
    if approx is None:
        if options:
            raise ValueError("`approx_options` given without `approx`")
        return None
    if not isinstance(approx, str) or approx.lower() not in APPROXIMATIONS:
        raise ValueError(f"`approx` must be None or one of {APPROXIMATIONS}, got {approx!r}")
    name = approx.lower()
    if options is not None and not isinstance(options, Mapping):
        raise TypeError(f"`approx_options` must be a dict, got {type(options).__name__}")
    options = dict(options or {})
    unknown = set(options) - set(_OPTIONS[name])
    if unknown:
        raise ValueError(
            f"unknown `approx_options` {sorted(unknown)} for approx={name!r}; "
            f"known: {list(_OPTIONS[name])}"
        )
    N, D = X.shape
    if name == "hsgp":
        m = options.get("m")
        c = options.get("c")
        m = None if m is None else _positive_ints("m", m, D)
        if c is not None:
            try:
                arr = np.atleast_1d(np.asarray(c, dtype=float))
            except (TypeError, ValueError):
                arr = np.array([np.nan])
            if arr.ndim != 1 or arr.size not in (1, D) or not np.all(np.isfinite(arr)):
                raise ValueError(
                    f"`approx_options['c']` must be a number or one per input dimension ({D}), "
                    f"got {c!r}"
                )
            if np.any(arr <= 1.0):
                raise ValueError(
                    f"`approx_options['c']` must be > 1 (the box must contain the data with a "
                    f"margin; Riutort-Mayol et al. recommend c >= 1.2), got {c!r}"
                )
            c = tuple(float(v) for v in np.broadcast_to(arr, (D,)))
        return ApproxSpec(name, m=m, c=c)
    if "n_inducing" in options and "Xu" in options:
        raise ValueError("give either `approx_options['n_inducing']` or `['Xu']`, not both")
    Xu = options.get("Xu")
    if Xu is not None:
        try:
            Xu = np.asarray(Xu, dtype=float)
        except (TypeError, ValueError):
            raise ValueError("`approx_options['Xu']` must be a numeric array") from None
        if Xu.ndim == 1 and D == 1:
            Xu = Xu[:, None]
        if Xu.ndim != 2 or Xu.shape[1] != D or Xu.shape[0] < 1:
            raise ValueError(
                f"`approx_options['Xu']` must have shape (M, {D}) with M >= 1, got {Xu.shape}"
            )
        if not np.all(np.isfinite(Xu)):
            raise ValueError("`approx_options['Xu']` contains NaN or infinite values")
        return ApproxSpec(name, Xu=Xu.copy())
    n = options.get("n_inducing")
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
            raise ValueError(f"`approx_options['n_inducing']` must be a positive int, got {n!r}")
        if n > N:
            raise ValueError(
                f"`approx_options['n_inducing']`={n} exceeds the number of observations ({N})"
            )
        n = int(n)
    return ApproxSpec(name, n_inducing=n)
