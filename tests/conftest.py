from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture
def rng():
    return np.random.default_rng(20261122)


def pytest_terminal_summary(terminalreporter):
    """Print how many cases each hypothesis property tried (tests/fuzz.py), also under -q."""
    from tests.fuzz import summary_lines

    lines = summary_lines()
    if lines:
        terminalreporter.write_sep("-", "fuzzed cases (hypothesis)")
        for line in lines:
            terminalreporter.write_line(line)
