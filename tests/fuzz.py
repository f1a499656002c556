"""Property-based fuzzing with hypothesis: shared settings, the outcome rule, and case counts.

The rule every fuzzed entry point must obey: on valid input it returns a correct, finite answer
(each test checks the answer against a reference or an exact property); on invalid input it
raises ``ValueError`` or ``TypeError`` whose message names the problem. Any other exception, a
silent non-finite value or a wrong number fails the test, and hypothesis prints the input.

Every call of a property body is counted by name and outcome; ``tests/conftest.py`` prints the
counts in the terminal summary (``pytest -q`` shows them), so the number of cases tried is in
the test output.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, settings

__all__ = [
    "COUNTS",
    "INPUT_KINDS",
    "fuzz",
    "expect_ok",
    "expect_error",
    "check",
    "input_case",
    "new_input_case",
    "summary_lines",
]

#: property name -> Counter of outcomes ("answer", "ValueError", "TypeError")
COUNTS: dict[str, Counter] = defaultdict(Counter)


def fuzz(max_examples: int) -> settings:
    """Hypothesis settings for the fuzz suite: derandomised (the same cases on every run, so CI
    is reproducible), no example database, no deadline (the first call of a compiled graph is
    slow), ``max_examples`` chosen per property to keep the suite fast."""
    return settings(
        max_examples=max_examples,
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=False,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
            HealthCheck.function_scoped_fixture,
        ],
    )


def expect_ok(prop: str, fn: Callable[[], Any]) -> Any:
    """Valid input: ``fn()`` must return (the caller checks the value); counted as an answer."""
    out = fn()
    COUNTS[prop]["answer"] += 1
    return out


def expect_error(prop: str, fn: Callable[[], Any], match: str) -> Exception:
    """Invalid input: ``fn()`` must raise ``ValueError`` or ``TypeError`` whose message matches
    the regular expression ``match`` (case-insensitive), i.e. names the problem."""
    try:
        out = fn()
    except (ValueError, TypeError) as exc:
        msg = str(exc)
        assert re.search(match, msg, flags=re.IGNORECASE | re.DOTALL), (
            f"{type(exc).__name__} does not name the problem /{match}/: {msg!r}"
        )
        COUNTS[prop][type(exc).__name__] += 1
        return exc
    raise AssertionError(f"invalid input was accepted (expected an error /{match}/): {out!r}")


def check(prop: str, fn: Callable[[], Any], problem: str | None) -> Any:
    """``expect_ok`` when ``problem`` is None, else ``expect_error(match=problem)``."""
    if problem is None:
        return expect_ok(prop, fn)
    return expect_error(prop, fn, problem)


#: the ways :func:`input_case` presents a regression data set ``(X, y)`` to a constructor
INPUT_KINDS = (
    "float64", "int", "float32", "list", "pandas", "pandas-misaligned", "nan-x", "inf-y",
    "short-y", "y-2d", "x-3d", "strings-x", "strings-y", "empty", "single", "constant-column",
    "duplicates",
)  # fmt: skip


def input_case(X: np.ndarray, y: np.ndarray, kind: str):
    """A regression data set presented as ``kind`` (one of :data:`INPUT_KINDS`).

    Returns ``(X, y, Xa, ya, problem)``: ``Xa, ya`` go to the constructor; ``X, y`` are the
    float64 numbers a reference computation must use (``int`` rescales the inputs, ``float32``
    rounds them, ``constant-column`` and ``duplicates`` change the data); ``problem`` is the
    regular expression the error must match, or None for valid input.
    """
    if kind not in INPUT_KINDS:
        raise KeyError(f"unknown input kind {kind!r}")
    n, D = X.shape
    Xa, ya, problem = X, y, None
    if kind == "int":
        Xa = (X * 10).astype(np.int64)  # a rescaled copy: the reference uses the same numbers
        X = Xa.astype(float)
    elif kind == "float32":
        Xa, ya = X.astype(np.float32), y.astype(np.float32)
        X, y = Xa.astype(float), ya.astype(float)
    elif kind == "list":
        Xa, ya = X.tolist(), y.tolist()
    elif kind == "pandas":
        idx = pd.Index(np.arange(n)[::-1] * 3 + 100)
        Xa = pd.DataFrame(X, index=idx, columns=[f"c{d}" for d in range(D)])
        ya = pd.Series(y, index=idx)
    elif kind == "pandas-misaligned":
        Xa = pd.DataFrame(X, index=np.arange(n) + 10)
        ya = pd.Series(y, index=np.arange(n)[::-1] + 10)
        problem = "different indexes"
    elif kind == "nan-x":
        Xa = X.copy()
        Xa[0, -1] = np.nan
        problem = "`X` contains NaN or infinite"
    elif kind == "inf-y":
        ya = y.copy()
        ya[-1] = -np.inf
        problem = "`y` contains NaN or infinite"
    elif kind == "short-y":
        ya = y[:-1]
        problem = f"{n} rows but `y` has {n - 1}"
    elif kind == "y-2d":
        ya = np.c_[y, y]
        problem = "`y` must be 1-D"
    elif kind == "x-3d":
        Xa = X[:, :, None]
        problem = "`X` must be 1-D or 2-D"
    elif kind == "strings-x":
        Xa = X.astype(str).astype(object)
        Xa[0, 0] = "a"
        problem = "`X` must be numeric"
    elif kind == "strings-y":
        ya = y.astype(str)
        ya[1] = "b"
        problem = "`y` must be numeric"
    elif kind in ("empty", "single"):
        Xa, ya = (X[:0], y[:0]) if kind == "empty" else (X[:1], y[:1])
        problem = "at least 2 observations"
    elif kind == "constant-column":
        X = X.copy()
        X[:, 0] = 2.5
        Xa = X
    elif kind == "duplicates":
        X = np.vstack([X, X[:2]])
        y = np.r_[y, y[:2] + 0.01]
        Xa, ya = X, y
    return X, y, Xa, ya, problem


def new_input_case(Xn: np.ndarray, kind: str):
    """New inputs ``Xn`` (m, D) presented to ``predict`` as ``kind``, for the kinds every model
    shares: ``float64``, ``int``, ``float32``, ``pandas``, ``list``, ``empty``, ``single``,
    ``nan``, ``inf``, ``3d``, ``strings``.

    Returns ``(Xn, arg, problem)`` (``Xn`` the float64 inputs a reference must use, ``arg`` what
    ``predict`` gets, ``problem`` the error's regular expression or None), or None for another
    kind, which the caller builds itself.
    """
    m = Xn.shape[0]
    arg, problem = Xn, None
    if kind == "int":
        arg = np.round(Xn).astype(int)
        Xn = arg.astype(float)
    elif kind == "float32":
        arg = Xn.astype(np.float32)
        Xn = arg.astype(float)
    elif kind == "pandas":
        arg = pd.DataFrame(Xn, index=np.arange(m) * 7 + 3)
    elif kind == "list":
        arg = Xn.tolist()
    elif kind == "empty":
        arg = Xn = Xn[:0]
    elif kind == "single":
        arg = Xn = Xn[:1]
    elif kind in ("nan", "inf"):
        arg = Xn.copy()
        arg[-1, 0] = np.nan if kind == "nan" else np.inf
        problem = "`X_new` contains NaN or infinite"
    elif kind == "3d":
        arg = Xn[None]
        problem = "`X_new` must be 1-D or 2-D"
    elif kind == "strings":
        arg = Xn.astype(str)
        arg[0, 0] = "x"
        problem = "`X_new` must be numeric"
    elif kind != "float64":
        return None
    return Xn, arg, problem


def summary_lines() -> list[str]:
    """One line per property: cases tried, split by outcome; then the total."""
    lines, total = [], 0
    for name in sorted(COUNTS):
        c = COUNTS[name]
        n = sum(c.values())
        total += n
        parts = ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
        lines.append(f"{name}: {n} cases ({parts})")
    if lines:
        lines.append(f"total: {total} fuzzed cases in {len(COUNTS)} properties")
    return lines
