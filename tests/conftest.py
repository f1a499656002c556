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


def unit_of(nodeid: str) -> str:
    """The unit of work that one xdist worker runs whole, from a test's node id: its test file
    (its module fixtures are computed once), except for the notebooks, each of which is a unit
    of its own (``tests/test_notebooks.py::<notebook>``)."""
    path, _, rest = nodeid.partition("::")
    if rest.startswith("test_notebook_runs[") and rest.endswith("]"):
        return f"{path}::{rest[len('test_notebook_runs[') : -1]}"
    return path


def work_unit(item: pytest.Item) -> str:
    """:func:`unit_of` the item's node id."""
    return unit_of(item.nodeid)


def _loadgroup(config: pytest.Config) -> bool:
    """Whether this run distributes with ``--dist loadgroup``: the controller sees the option,
    an xdist worker runs with dist "no" and its own flag ``loadgroup`` (``xdist.remote``)."""
    return config.getoption("dist", "no") == "loadgroup" or bool(
        getattr(config.option, "loadgroup", False)
    )


def pytest_xdist_make_scheduler(config, log):
    """Under ``--dist loadgroup``: xdist's scope scheduler with :func:`unit_of` as the scope.

    xdist's own loadgroup turns ``xdist_group`` marks into a node-id suffix, which pytest 9
    ignores (node ids are no longer the attribute xdist writes): every test was a unit of its
    own, a file's tests ran on both workers with their module fixtures computed twice, and the
    units ran in file order, the notebooks last."""
    if config.getoption("dist", "no") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class WorkUnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return WorkUnitScheduling(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under ``--dist loadgroup`` (``./run test``): the units in order of their measured
    duration, longest first, so that the two workers finish together instead of one running
    the longest file while the other idles (the longest processing time rule; run with
    ``--no-loadscope-reorder``, which keeps this order). This runs in each worker, whose
    collection order is the one the controller hands out."""
    if not _loadgroup(config):
        return
    try:
        seconds = json.loads(DURATIONS_FILE.read_text())
    except (OSError, ValueError):
        seconds = {}
    # a stable sort: the tests of a unit stay together and in their order
    items.sort(key=lambda item: -float(seconds.get(work_unit(item), DEFAULT_UNIT_SECONDS)))


@pytest.fixture(scope="module")
def client():
    """A Dask ``LocalCluster`` of one worker process with its client, per test module (``fit_many``
    and its output store). One worker: each worker process compiles every model on a cold cache,
    and a second one compiled the same graphs again (issue 35); the tests still check that a
    group's result on the worker equals a direct fit in this process."""
    from dask.distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


@pytest.fixture
def nutpie_jax():
    """nutpie compiles the test's models with JAX (``compiled.nutpie_backend("jax")``): in
    seconds, where numba takes 10-35 s per model on a fresh HOME. In the short runs of small
    models that use this fixture nutpie's draws agree with numba's to 1e-9
    (tests/inference/test_nutpie_jax.py); the two compilers round differently, so long runs with
    deep trees drift apart (README "The test suite's budget"): a test moved here was run on JAX
    and its checks hold there. The numba path keeps its own tests
    (tests/inference/test_compiled.py, test_nutpie_compile.py, the main job)."""
    from bayes_gp.inference.compiled import nutpie_backend

    with nutpie_backend("jax"):
        yield


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
