"""Checks on user-supplied parameters and data, shared by every module.

Kernel hyperparameters may be plain numbers, NumPy arrays, PyTensor constants or PyMC random
variables. Only values that are known when the kernel is built (numbers, arrays, constants) can be
checked eagerly; random variables get their support from their priors.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytensor.tensor as pt
from pytensor.graph.basic import Constant, Variable

__all__ = [
    "constant_value",
    "check_positive",
    "check_nonnegative",
    "check_in_interval",
    "check_integer_in",
    "as_parameter",
    "f64",
    "check_per_dim",
    "fixed_scalar",
    "positive_float",
    "noise_sds",
    "check_aligned",
    "check_jitter",
    "hyperparameter_values",
    "as_targets",
    "as_inputs",
    "new_inputs",
    "is_datetime",
    "decimal_years",
    "dates_note",
]


def constant_value(value: Any) -> np.ndarray | None:
    """Return the numeric value of ``value`` if it is known at build time, else ``None``."""
    if isinstance(value, Constant):
        return np.asarray(value.data)
    if isinstance(value, Variable):
        return None
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return None
    return arr


def _finite(name: str, arr: np.ndarray) -> None:
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"`{name}` must be finite, got {arr!r}")


def check_positive(name: str, value: Any) -> None:
    """Raise ``ValueError`` naming ``name`` if a known value is not strictly positive."""
    arr = constant_value(value)
    if arr is None:
        return
    _finite(name, arr)
    if np.any(arr <= 0):
        raise ValueError(f"`{name}` must be strictly positive, got {arr!r}")


def check_nonnegative(name: str, value: Any) -> None:
    """Raise ``ValueError`` naming ``name`` if a known value is negative."""
    arr = constant_value(value)
    if arr is None:
        return
    _finite(name, arr)
    if np.any(arr < 0):
        raise ValueError(f"`{name}` must be non-negative, got {arr!r}")


def check_in_interval(
    name: str, value: Any, low: float, high: float, *, low_open: bool, high_open: bool
) -> None:
    """Raise ``ValueError`` if a known value lies outside the interval ``(low, high]`` etc."""
    arr = constant_value(value)
    if arr is None:
        return
    _finite(name, arr)
    below = arr <= low if low_open else arr < low
    above = arr >= high if high_open else arr > high
    if np.any(below) or np.any(above):
        lb = "(" if low_open else "["
        rb = ")" if high_open else "]"
        raise ValueError(f"`{name}` must lie in {lb}{low}, {high}{rb}, got {arr!r}")


def check_integer_in(name: str, value: Any, allowed: range) -> int:
    """Return ``value`` as an ``int`` if it is an integer in ``allowed``, else raise ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        if isinstance(value, float | np.floating) and float(value).is_integer():
            value = int(value)
        else:
            raise ValueError(
                f"`{name}` must be an integer in {allowed.start}..{allowed.stop - 1}, got {value!r}"
            )
    if int(value) not in allowed:
        raise ValueError(
            f"`{name}` must be an integer in {allowed.start}..{allowed.stop - 1}, got {value!r}"
        )
    return int(value)


def as_parameter(value: Any) -> pt.TensorVariable:
    """Convert a hyperparameter to a float64 PyTensor variable (random variables pass through)."""
    if isinstance(value, Variable):
        return value
    return pt.as_tensor_variable(np.asarray(value, dtype="float64"))


def f64(x) -> np.ndarray:
    """``x`` as a float64 NumPy value.

    PyTensor turns a Python float that float32 represents exactly (``2.0``, ``20.5``) into a
    float32 constant, and an operation whose inputs are all such constants runs in single
    precision: ``pm.Gamma.dist(20.0, 40.0)`` has a log-density wrong in the 7th digit. NumPy
    float64 values keep double precision.
    """
    return np.asarray(x, dtype=np.float64)


def check_per_dim(name: str, value: Any, n_dims: int, what: str = "active dimension(s)") -> None:
    """A known vector parameter must have one entry per dimension (or a single entry)."""
    arr = constant_value(value)
    if arr is not None and arr.ndim == 1 and arr.shape[0] not in (1, n_dims):
        raise ValueError(f"`{name}` has {arr.shape[0]} entries but the kernel has {n_dims} {what}")


def fixed_scalar(name: str, value: Any) -> float:
    """``value`` as a float; it must be a finite number known at build time (not a variable)."""
    arr = constant_value(value)
    if arr is None or arr.ndim != 0 or not np.isfinite(arr):
        raise ValueError(f"`{name}` must be a fixed finite number (not a random variable)")
    return float(arr)


def positive_float(name: str, value: Any) -> float:
    """``value`` as a float; it must be a positive finite number."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be a positive finite number, got {value!r}") from None
    if not (np.isfinite(v) and v > 0):
        raise ValueError(f"`{name}` must be a positive finite number, got {value!r}")
    return v


def noise_sds(name: str, value: Any, n: int) -> np.ndarray:
    """``value`` as ``n`` known noise standard deviations (float64): a number (the same for
    every row) or an array of ``n`` finite, non-negative numbers; else ``ValueError`` naming
    ``name``."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(
            f"`{name}` must be a number or an array of {n} standard deviations, got {value!r}"
        ) from None
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(
            f"`{name}` must have one standard deviation per row ({n}), got shape {arr.shape}"
        )
    bad = ~np.isfinite(arr) | (arr < 0)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"`{name}` must hold finite, non-negative standard deviations; entry {i} is "
            f"{arr[i]!r} ({int(bad.sum())} bad entries)"
        )
    return arr


def check_aligned(X: Any, y: Any, names: tuple[str, str] = ("X", "y")) -> None:
    """Raise ``ValueError`` when ``X`` and ``y`` are both pandas objects with different indexes.

    The models use rows by position; pandas users expect rows matched by label, so two objects
    whose labels disagree would silently pair the wrong rows.
    """
    ix, iy = getattr(X, "index", None), getattr(y, "index", None)
    if ix is None or iy is None or not hasattr(ix, "equals"):
        return
    if len(ix) == len(iy) and not ix.equals(iy):
        raise ValueError(
            f"`{names[0]}` and `{names[1]}` are pandas objects with different indexes: rows are "
            f"used by position, so align them first (e.g. `{names[1]}.loc[{names[0]}.index]`) "
            "or pass arrays"
        )


def check_jitter(value: Any) -> float:
    """``value`` as a float; the jitter must be a finite number >= 0."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"`jitter` must be a non-negative number, got {value!r}") from None
    if not (np.isfinite(v) and v >= 0):
        raise ValueError(f"`jitter` must be a non-negative number, got {value!r}")
    return v


def hyperparameter_values(model, rvs, params, cache: dict | None = None) -> list[np.ndarray]:
    """The values of the random variables ``rvs`` of a PyMC ``model`` in ``params`` (by name),
    checked: every name present, numeric, finite, of the variable's shape, and positive where the
    variable is (a log-transformed prior). ``cache`` (a dict owned by the caller and cleared when
    the model changes) keeps the shapes between calls.

    Raises
    ------
    ValueError
        Naming the hyperparameter and what is wrong with its value.
    """
    from pymc.logprob.transforms import LogTransform

    names = [rv.name for rv in rvs]
    if not hasattr(params, "keys"):
        raise TypeError(f"`params` must be a dict of hyperparameter values by name {names}")
    missing = [n for n in names if n not in params]
    if missing:
        raise ValueError(f"`params` is missing {missing}; expected {names}")
    cache = {} if cache is None else cache
    if "hyperparameter_shapes" not in cache:
        init = model.initial_point()
        cache["hyperparameter_shapes"] = {
            rv.name: np.shape(init[model.rvs_to_values[rv].name]) for rv in rvs
        }
    shapes = cache["hyperparameter_shapes"]
    out = []
    for rv in rvs:
        name = rv.name
        try:
            v = np.asarray(params[name], dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"`params[{name!r}]` must be numeric, got {params[name]!r}") from None
        shape = shapes[name]
        if v.shape != shape:
            raise ValueError(f"`params[{name!r}]` has shape {v.shape}, expected {shape}")
        if not np.all(np.isfinite(v)):
            raise ValueError(f"`params[{name!r}]` must be finite, got {v!r}")
        if isinstance(model.rvs_to_transforms.get(rv), LogTransform) and np.any(v <= 0):
            raise ValueError(f"`params[{name!r}]` must be positive, got {v!r}")
        out.append(v)
    return out


def refuse_constant(y: np.ndarray, what: str = "GP regression") -> None:
    """Refuse to fit a constant ``y`` with a learned noise (see :func:`as_targets`)."""
    if np.ptp(y) == 0.0:
        raise ValueError(
            f"`y` is constant (every value is {y[0]:g}): there is no variation for {what} to "
            "model, and with a learned noise the likelihood grows without bound as the noise "
            "sigma goes to 0. Check that `y` is the intended column; to fit a constant with a "
            "known noise level, give it (GPRegression's `noise=`)"
        )


def as_targets(
    y, n: int, *, what: str = "GP regression", learned_noise: bool = True, min_n: int = 2
) -> np.ndarray:
    """``y`` as a finite 1-D float array with ``n`` values (one per row of ``X``).

    A constant ``y`` is refused when the noise is learned: there is no variation to model, and
    the likelihood grows without bound as the noise :math:`\\sigma \\to 0` (the fit would
    report "converged" at :math:`\\sigma \\approx 10^{-13}`, a degenerate answer).
    """
    try:
        y = np.asarray(getattr(y, "to_numpy", lambda: y)(), dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`y` must be numeric: {exc}") from None
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"`y` must be 1-D, got shape {y.shape}")
    if not np.all(np.isfinite(y)):
        raise ValueError("`y` contains NaN or infinite values")
    if n != y.shape[0]:
        raise ValueError(f"`X` has {n} rows but `y` has {y.shape[0]} values")
    if y.shape[0] < min_n:
        raise ValueError(f"{what} needs at least {min_n} observation{'s' if min_n > 1 else ''}")
    if learned_noise:
        refuse_constant(y, what)
    return y


def is_datetime(values) -> bool:
    """Whether ``values`` (a pandas column or a NumPy array) hold dates (``datetime64``)."""
    dtype = getattr(values, "dtype", None)
    return dtype is not None and pd.api.types.is_datetime64_any_dtype(dtype)


def decimal_years(s) -> np.ndarray:
    """A datetime column as fractional years (2020-07-02 00:00 is 2020.5: 2020 has 366 days),
    the unit in which a GP input's length-scale reads naturally, instead of NumPy's
    nanoseconds."""
    t = pd.DatetimeIndex(s)
    start = pd.to_datetime(t.year.astype(str) + "-01-01")
    end = pd.to_datetime((t.year + 1).astype(str) + "-01-01")
    if t.tz is not None:
        start, end = start.tz_localize(t.tz), end.tz_localize(t.tz)
    frac = (t - start) / (end - start)
    return t.year.to_numpy(float) + np.asarray(frac, float)


def dates_note(name: str, columns: list[str]) -> str:
    """What a model says, once, when it reads date columns as fractional years."""
    return (
        f"`{name}`: {', '.join(repr(c) for c in columns)} hold dates, used as fractional years "
        "(2020-07-02 is 2020.5): length-scales and periods on them are in years"
    )


def as_inputs(X, name: str = "X", *, say: bool = True) -> tuple[np.ndarray, list[str]]:
    """``X`` (array, DataFrame or Series) as a finite 2-D float array ``(n, D)`` and its column
    names (the DataFrame's, the Series' name, or ``x0``, ``x1``, …).

    Date columns (``datetime64``) become fractional years (:func:`decimal_years`), with a
    ``UserWarning`` that says so when ``say`` (a model's training inputs; not again for the
    inputs of its predictions)."""
    names = None
    if hasattr(X, "columns") and hasattr(X, "to_numpy"):  # pandas DataFrame
        names = [str(c) for c in X.columns]
        dates = [str(c) for c in X.columns if is_datetime(X[c])]
        if dates:
            X = np.column_stack([decimal_years(X[c]) if is_datetime(X[c]) else X[c].to_numpy()
                                 for c in X.columns])  # fmt: skip
        else:
            X = X.to_numpy()
    elif hasattr(X, "to_numpy"):  # pandas Series
        names = [str(getattr(X, "name", None) or "x0")]
        dates = names if is_datetime(X) else []
        X = decimal_years(X) if dates else X.to_numpy()
    else:
        dates = ["X"] if is_datetime(np.asarray(X)) else []
        if dates:
            flat = np.asarray(X)
            X = decimal_years(flat.ravel()).reshape(flat.shape)
    if dates and say:
        warnings.warn(dates_note(name, dates), UserWarning, stacklevel=3)
    try:
        X = np.asarray(X, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`{name}` must be numeric: {exc}") from None
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2:
        raise ValueError(f"`{name}` must be 1-D or 2-D (n, D), got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"`{name}` contains NaN or infinite values")
    if names is None:
        names = [f"x{d}" for d in range(X.shape[1])]
    return X, names


def new_inputs(X_new, n_columns: int, names: list[str] | None = None) -> np.ndarray:
    """``X_new`` as :func:`as_inputs` makes it, with the number of columns the model was fitted
    on.

    A DataFrame is read **by column name** when the model was fitted on named columns
    (``names``, the model's ``feature_names``): in the model's order, extra columns ignored, a
    missing one a ``ValueError`` naming it. Arrays, and DataFrames for a model fitted on an
    array, are read by position."""
    if names is not None and hasattr(X_new, "columns") and hasattr(X_new, "to_numpy"):
        names = [str(c) for c in names]
        by_text = {str(c): c for c in X_new.columns}
        if names != [f"x{d}" for d in range(len(names))] or set(names) <= set(by_text):
            missing = [c for c in names if c not in by_text]
            if missing:
                raise ValueError(
                    f"`X_new` lacks the column(s) {missing} the model was fitted on (columns "
                    f"are matched by name; `X_new` has {list(by_text)})"
                )
            X_new = X_new[[by_text[c] for c in names]]
    Xn, _ = as_inputs(X_new, "X_new", say=False)
    if Xn.shape[1] != n_columns:
        raise ValueError(
            f"`X_new` has {Xn.shape[1]} column(s) but the model was fitted on {n_columns}"
        )
    return Xn
