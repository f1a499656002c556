"""``fit_many(..., store=)``: results written as they arrive, resumed after a crash, nothing lost.

On a real local cluster of processes: a worker killed (SIGKILL, by its PID) in the middle of a
task, and a client process killed mid-run and rerun; every group's result must be present once,
equal to an uninterrupted run, with no partial file left (issue 37).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bayes_gp
from bayes_gp import GPRegression
from bayes_gp._io import stale_temporaries, write_atomic_with
from bayes_gp.many_store import ManyStore, data_digest, describe, group_stem

ROOT = Path(__file__).parents[1]
GROUPS = ("g0", "g1", "g2", "g3")


def _data() -> pd.DataFrame:
    rng = np.random.default_rng(20261129)
    parts = []
    for k, g in enumerate(GROUPS):
        x = np.sort(rng.uniform(0.0, 10.0, 15 + k))
        y = np.sin(x / (1.0 + k)) + 0.1 * rng.standard_normal(x.size)
        parts.append(pd.DataFrame({"site": g, "t": x, "y": y}))
    return pd.concat(parts, ignore_index=True)


def _marker_dir(client_pid: int) -> Path:
    """Where the test models below find their instructions: a LocalCluster's worker processes
    are children of the client process, so a worker finds it by its parent's PID."""
    return Path(tempfile.gettempdir()) / f"bayes_gp_test_many_store_{client_pid}"


class SlowGP(GPRegression):
    """GPRegression whose fits take at least 0.4 s, so that a run can be killed in the middle."""

    def fit(self, method, **kwargs):
        time.sleep(0.4)
        return super().fit(method, **kwargs)


class StallingGP(GPRegression):
    """GPRegression whose *first* fit of group ``g0`` (the first attempt of its task) writes its
    worker's PID and waits to be killed; every later attempt fits normally."""

    def fit(self, method, **kwargs):
        marker = _marker_dir(os.getppid())
        if self.X.shape[0] == 15 and marker.is_dir():  # group g0 has 15 rows
            try:
                fd = os.open(marker / "attempt", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass  # the retried task
            else:
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)
                time.sleep(120)  # killed long before
        return super().fit(method, **kwargs)


def start_killer(attempt: Path) -> tuple[threading.Thread, list[int]]:
    """A thread that SIGKILLs the process whose PID appears in the file ``attempt`` (written by
    a stalling fit), and the list that receives the killed PID."""
    killed: list[int] = []

    def kill_when_stalled() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                pid = int(attempt.read_text())
            except (OSError, ValueError):
                time.sleep(0.05)
                continue
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            return

    killer = threading.Thread(target=kill_when_stalled, daemon=True)
    killer.start()
    return killer, killed


def _params(res, g) -> dict:
    return {k: np.asarray(v) for k, v in res.fits[g].params.items()}


def _assert_same_map(res, ref) -> None:
    assert res.ok == ref.ok
    for g in ref.ok:
        got, want = _params(res, g), _params(ref, g)
        assert got.keys() == want.keys()
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-12, err_msg=f"{g}.{k}")
    cols = ["ls", "eta", "sigma", "log_marginal_likelihood", "seed", "n_obs"]
    pd.testing.assert_frame_equal(res.table[cols], ref.table[cols])


def _files(store: Path) -> list[str]:
    return sorted(p.name for p in (store / "groups").iterdir())


# ----------------------------------------------------------------------------- the store
def test_arguments_are_described_without_memory_addresses():
    class Thing:
        pass

    a, b = Thing(), Thing()
    assert describe(a) == describe(b) and "0x" not in describe(a)
    assert describe(SlowGP) == "tests.test_many_store.SlowGP"
    assert describe({"b": 1, "a": np.float64(2.0)}) == {"a": 2.0, "b": 1}
    assert describe(np.arange(3.0)) != describe(np.arange(3.0) + 1)


def test_group_files_and_data_digests_are_distinct():
    assert group_stem(1) != group_stem("1") and group_stem(1).startswith("1-")
    assert group_stem("a/b c").startswith("a_b_c-")
    assert group_stem(np.int64(7)) == group_stem(7)
    X = pd.DataFrame({"t": [1.0, 2.0]})
    assert data_digest(X, [1.0, 2.0]) == data_digest(X.copy(), np.array([1.0, 2.0]))
    assert data_digest(X, [1.0, 2.0]) != data_digest(X, [1.0, 2.5])
    assert data_digest(X, [1.0, 2.0]) != data_digest(X.rename(columns={"t": "u"}), [1.0, 2.0])


def test_a_store_of_another_run_is_refused(tmp_path):
    args = {"method": "map", "model": GPRegression, "kernel": "expquad", "model_kwargs": {},
            "fit_kwargs": {"n_restarts": 1}}  # fmt: skip
    store = ManyStore.open(tmp_path / "s", args, 123, True)
    assert store.entropy == 123 and (tmp_path / "s" / "groups").is_dir()
    assert ManyStore.open(tmp_path / "s", args, 999, False).entropy == 123  # seed=None resumes
    with pytest.raises(ValueError, match=r"random_seed=123, this call has random_seed=999"):
        ManyStore.open(tmp_path / "s", args, 999, True)
    with pytest.raises(ValueError, match=r"other arguments:\n  kernel: the store has 'expquad'"):
        ManyStore.open(tmp_path / "s", {**args, "kernel": "matern52"}, 123, True)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not a fit_many store"):
        ManyStore.open(tmp_path / "other", args, 1, True)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is not a directory"):
        ManyStore.open(tmp_path / "file", args, 1, True)


def test_a_failed_write_leaves_nothing_and_stale_temporaries_are_found(tmp_path):
    target = tmp_path / "a.nc"

    def failing(path: Path) -> None:
        path.write_bytes(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomic_with(target, failing)
    assert list(tmp_path.iterdir()) == []
    (tmp_path / ".a.nc.0123456789ab.tmp").write_bytes(b"left by a killed process")
    assert [p.name for p in stale_temporaries(tmp_path)] == [".a.nc.0123456789ab.tmp"]


# --------------------------------------------------------------------------- on a cluster
@pytest.mark.slow
def test_map_results_are_written_read_back_and_resumed(client, tmp_path):
    df = _data()
    kw = {"x": "t", "y": "y", "group": "site", "kernel": "matern52", "method": "map",
          "random_seed": 4, "client": client, "fit_kwargs": {"n_restarts": 1}}  # fmt: skip
    ref = bayes_gp.fit_many(df, **kw)
    store = tmp_path / "store"
    res = bayes_gp.fit_many(df, store=store, **kw)
    assert res.store == store and not res.table["resumed"].any()
    assert _files(store) == sorted(f"{group_stem(g)}.nc" for g in GROUPS)
    manifest = json.loads((store / "manifest.json").read_text())
    assert manifest["random_seed"] == 4 and manifest["fit_kwargs"] == {"n_restarts": 1}
    _assert_same_map(res, ref)
    # a fit read from the store is the fit: its optimiser record, and it predicts
    fit, want = res.fits["g2"], ref.fits["g2"]
    assert fit.converged == want.converged and len(fit.restarts) == len(want.restarts)
    np.testing.assert_allclose(
        res.model("g2").predict(np.array([5.0]), fit).mean,
        ref.model("g2").predict(np.array([5.0]), want).mean,
        rtol=1e-12,
    )

    # rerun: nothing refitted; a group whose file was deleted is fitted again, as before
    (store / "groups" / f"{group_stem('g1')}.nc").unlink()
    again = bayes_gp.fit_many(df, store=store, **{**kw, "random_seed": None})
    assert again.table["resumed"].to_dict() == {g: g != "g1" for g in GROUPS}
    _assert_same_map(again, ref)
    assert len(_files(store)) == len(GROUPS)

    # the data of a group changed: its stored result is not used silently
    changed = df.copy()
    changed.loc[changed.index[changed["site"] == "g3"][0], "y"] += 1.0
    with pytest.raises(ValueError, match=r"'g3'.*fitted to other data"):
        bayes_gp.fit_many(changed, store=store, **kw)


@pytest.mark.slow
def test_nuts_results_are_netcdf_that_arviz_reads(client, tmp_path):
    import arviz as az

    df = _data()
    df = df[df["site"] == "g1"]
    # nutpie on the exact GP's C log density (nothing compiled in the worker: PyMC's sampler
    # compiled the model with numba there, 12 s on a fresh HOME)
    kw = {"x": "t", "y": "y", "group": "site", "kernel": "matern52", "draws": 20, "tune": 20,
          "chains": 2, "sampler": "nutpie", "random_seed": 8, "client": client}  # fmt: skip
    store = tmp_path / "nuts"
    res = bayes_gp.fit_many(df, store=store, **kw)
    assert not res.errors and res.idata["posterior"].sizes["group"] == 1
    on_disk = az.from_netcdf(store / "groups" / f"{group_stem('g1')}.nc")
    np.testing.assert_array_equal(
        on_disk["posterior"]["ls"].values, res.idata["posterior"]["ls"].sel(group="g1").values
    )
    X = df[df["site"] == "g1"][["t"]]
    direct = GPRegression(X, df[df["site"] == "g1"]["y"].to_numpy(), kernel="matern52").sample(
        draws=20, tune=20, chains=2, sampler="nutpie", random_seed=res.seeds["g1"]
    )
    np.testing.assert_allclose(
        on_disk["posterior"]["ls"].values, direct["posterior"]["ls"].values, rtol=1e-12
    )
    again = bayes_gp.fit_many(df, store=store, **kw)
    assert again.table["resumed"].all()
    np.testing.assert_array_equal(
        again.idata["posterior"]["ls"].values, res.idata["posterior"]["ls"].values
    )
    np.testing.assert_array_equal(
        again.table["max_rhat"].values, res.table["max_rhat"].values
    )


@pytest.mark.slow
def test_a_failed_group_is_recorded_and_not_retried_unless_asked(client, tmp_path):
    df = _data()
    df = df[df["site"].isin(["g0", "g1"])].copy()
    df.loc[df.index[df["site"] == "g1"][2], "y"] = np.nan
    kw = {"x": "t", "y": "y", "group": "site", "kernel": "matern52", "method": "map",
          "random_seed": 1, "client": client, "store": tmp_path / "s",
          "fit_kwargs": {"n_restarts": 1}}  # fmt: skip
    res = bayes_gp.fit_many(df, **kw)
    assert res.ok == ("g0",) and "NaN" in res.errors["g1"]
    assert f"{group_stem('g1')}.error.json" in _files(tmp_path / "s")
    again = bayes_gp.fit_many(df, **kw)
    assert again.errors == res.errors and again.table.loc["g1", "resumed"]
    retried = bayes_gp.fit_many(df, retry_failed=True, **kw)
    assert retried.errors == res.errors and not retried.table.loc["g1", "resumed"]
    assert retried.table.loc["g0", "resumed"]


@pytest.mark.slow
def test_a_worker_killed_mid_task_is_retried_and_nothing_is_lost(client, tmp_path):
    df = _data()
    kw = {"x": "t", "y": "y", "group": "site", "kernel": "matern52", "method": "map",
          "random_seed": 6, "client": client, "fit_kwargs": {"n_restarts": 1}}  # fmt: skip
    # the reference with the same model class (no marker yet: it fits normally): a subclass
    # is not on the C path of native_gp, whose optimum differs from PyTensor's in the 12th digit
    ref = bayes_gp.fit_many(df, model=StallingGP, **kw)
    marker = _marker_dir(os.getpid())
    marker.mkdir(exist_ok=True)
    killer, killed = start_killer(marker / "attempt")  # the worker, mid-task
    try:
        res = bayes_gp.fit_many(df, model=StallingGP, store=tmp_path / "s", **kw)
    finally:
        killer.join(timeout=5)
        for p in marker.iterdir():
            p.unlink()
        marker.rmdir()
    assert killed, "the stalling task never started"
    assert not res.errors, res.errors
    assert res.table.loc["g0", "worker"] != f"pid {killed[0]}"  # retried on the new worker
    _assert_same_map(res, ref)
    assert len(_files(tmp_path / "s")) == len(GROUPS)
    assert not stale_temporaries(tmp_path / "s" / "groups")


@pytest.mark.slow
def test_a_killed_client_is_resumed_by_a_rerun(client, tmp_path):
    df = _data()
    df.to_csv(tmp_path / "data.csv", index=False)
    store = tmp_path / "s"
    script = textwrap.dedent(
        f"""
        import pandas as pd
        import bayes_gp
        from tests.test_many_store import SlowGP

        if __name__ == "__main__":
            df = pd.read_csv({str(tmp_path / "data.csv")!r})
            bayes_gp.fit_many(
                df, x="t", y="y", group="site", kernel="matern52", method="map",
                random_seed=9, n_workers=1, fit_kwargs={{"n_restarts": 1}}, model=SlowGP,
                store={str(store)!r},
            )
        """
    )
    (tmp_path / "run.py").write_text(script)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, str(tmp_path / "run.py")], cwd=ROOT, env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and proc.poll() is None:
            done = [p for p in (store / "groups").glob("*.nc")] if store.exists() else []
            if len(done) >= 2:
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
        os.killpg(proc.pid, signal.SIGKILL)  # the client and its cluster, mid-run
    finally:
        proc.wait(timeout=30)
        proc.stderr.close()
    finished = len(list((store / "groups").glob("*.nc")))
    assert 2 <= finished < len(GROUPS)

    kw = {"x": "t", "y": "y", "group": "site", "kernel": "matern52", "method": "map",
          "random_seed": 9, "client": client, "fit_kwargs": {"n_restarts": 1}}  # fmt: skip
    res = bayes_gp.fit_many(df, model=SlowGP, store=store, **kw)
    assert int(res.table["resumed"].sum()) == finished and not res.errors
    ref = bayes_gp.fit_many(df, model=SlowGP, **kw)  # uninterrupted, no store, the same class
    _assert_same_map(res, ref)
    assert _files(store) == sorted(f"{group_stem(g)}.nc" for g in GROUPS)
    assert not stale_temporaries(store / "groups") and not stale_temporaries(store)
