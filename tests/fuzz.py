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

from hypothesis import HealthCheck, settings

__all__ = ["COUNTS", "fuzz", "expect_ok", "expect_error", "check", "summary_lines"]

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
