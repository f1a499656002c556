"""``fit_many(..., recycle_after=N)``: each worker fits in a child process replaced after N fits,
so that a long run's workers do not grow with the finished groups (issue 37); a child killed
mid-fit is replaced and the fit run again."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

import bayes_gp
from bayes_gp import GPRegression
from bayes_gp.many import RECYCLE_AFTER, _recycle_after
from bayes_gp.many_processes import ChildDied, in_child, shutdown
from tests.test_many_store import _assert_same_map, _data, start_killer

#: Environment variable naming the directory where StallingChildGP writes its PID.
MARKER = "BAYES_GP_TEST_MANY_PROCESSES"


class StallingChildGP(GPRegression):
    """GPRegression whose first fit of group ``g0`` (15 rows) writes its process's PID to the
    directory ``$BAYES_GP_TEST_MANY_PROCESSES`` and waits to be killed; later fits run."""

    def fit(self, method, **kwargs):
        marker = os.environ.get(MARKER)
        if marker and self.X.shape[0] == 15:
            try:
                fd = os.open(Path(marker) / "attempt", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass  # the second attempt
            else:
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)
                time.sleep(120)  # killed long before
        return super().fit(method, **kwargs)


@pytest.mark.slow
def test_children_are_replaced_and_a_killed_child_is_refitted(client, tmp_path, monkeypatch):
    df = _data()
    kw = {"x": "t", "y": "y", "group": "site", "kernel": "matern52", "method": "map",
          "random_seed": 6, "fit_kwargs": {"n_restarts": 1}}  # fmt: skip
    # in the worker itself, with the same model class (the marker not set: it fits normally)
    ref = bayes_gp.fit_many(df, client=client, model=StallingChildGP, **kw)
    monkeypatch.setenv(MARKER, str(tmp_path))  # inherited by the new cluster's processes
    killer, killed = start_killer(tmp_path / "attempt")  # the child, mid-fit
    try:
        # fit_many's own cluster of one worker, whose children fit 2 groups each
        res = bayes_gp.fit_many(df, model=StallingChildGP, n_workers=1, recycle_after=2, **kw)
    finally:
        killer.join(timeout=5)
    assert killed, "the stalling fit never started"
    assert not res.errors, res.errors
    _assert_same_map(res, ref)  # the same fits as in the worker
    children = res.table["worker"]
    assert f"pid {killed[0]}" not in set(children)  # g0 was fitted again in a fresh child
    assert children.nunique() >= 2  # 4 groups, 2 fits per child
    assert (children.value_counts() <= 2).all()
    assert set(children).isdisjoint(ref.table["worker"])


def test_a_cluster_of_daemonic_workers_is_refused(client):
    with pytest.raises(ValueError, match="daemonic"):
        bayes_gp.fit_many(_data(), x="t", y="y", group="site", method="map", client=client,
                          recycle_after=2)  # fmt: skip


def test_auto_recycles_only_a_worker_with_more_fits_than_the_limit():
    nuts, point = RECYCLE_AFTER["nuts"], RECYCLE_AFTER["map"]
    assert _recycle_after("auto", None, 2, 2 * nuts, True) is None  # each worker: nuts fits
    assert _recycle_after("auto", None, 2, 2 * nuts + 1, True) == nuts
    assert _recycle_after("auto", None, 2, 2 * point + 1, False) == point
    assert _recycle_after("auto", None, 2, 2 * nuts + 1, False) is None
    assert _recycle_after("auto", object(), 2, 10**6, True) is None  # the user's client
    assert _recycle_after(None, None, 1, 10**6, True) is None
    assert _recycle_after(7, object(), 1, 3, True) == 7
    with pytest.raises(ValueError, match="at least 1"):
        _recycle_after(0, None, 1, 3, True)
    with pytest.raises(TypeError, match="'auto', None or an int"):
        _recycle_after(2.5, None, 1, 3, True)
    with pytest.raises(ValueError, match="'auto', None or an int"):
        _recycle_after("always", None, 1, 3, True)


@pytest.mark.slow
def test_a_child_that_dies_twice_is_reported():
    try:
        assert in_child(abs, -3, 5) == 3
        with pytest.raises(ChildDied, match="died twice"):
            in_child(os._exit, 1, 5)  # the child exits in the middle of its task
        assert in_child(np.negative, 2, 5) == -2  # a fresh child after the deaths
    finally:
        shutdown()
