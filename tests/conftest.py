from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MPLBACKEND", "Agg")

#: Seconds each work unit took in a measured run (``python -m tests.durations JUNIT.xml``
#: writes it): ``./run test`` hands the longest units to the two workers first.
DURATIONS_FILE = Path(__file__).with_name("durations.json")
#: A unit not in the file yet (a new test file) is scheduled as if it took this long.
DEFAULT_UNIT_SECONDS = 10.0


def work_unit(item: pytest.Item) -> str:
    """The unit of work that one xdist worker runs whole: the test file (its module fixtures are
    computed once), except for the notebooks, each of which is a unit of its own."""
    path = item.nodeid.split("::", 1)[0]
    if item.originalname == "test_notebook_runs":
        return f"{path}::{item.callspec.id}"
    return path


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under ``--dist loadgroup`` (``./run test``): one xdist group per :func:`work_unit`, and
    the units in order of their measured duration, longest first, so that the two workers
    finish together instead of one running the longest file while the other idles (the longest
    processing time rule; run with ``--no-loadscope-reorder``, which keeps this order)."""
    if config.getoption("dist", "no") != "loadgroup":
        return
    try:
        seconds = json.loads(DURATIONS_FILE.read_text())
    except (OSError, ValueError):
        seconds = {}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(work_unit(item)))
    # a stable sort: the tests of a unit stay together and in their order
    items.sort(key=lambda item: -float(seconds.get(work_unit(item), DEFAULT_UNIT_SECONDS)))


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
