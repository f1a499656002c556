"""Load test of ``bayes_gp.fit_many`` with an output store: throughput and memory.

``--map-groups`` small groups (n drawn from 20-50) fitted by MAP and ``--nuts-groups`` by NUTS on
a ``LocalCluster`` of ``--workers`` processes (one thread each), every result streamed to a store
(``fit_many(..., store=)``). While it runs, a thread samples every ``--every`` seconds the
resident memory of the client process and of each worker process and the number of results
written so far. Reported: fits per second, peak memory of the client and of each worker, and the
client's memory when a quarter, half, three quarters and all of the groups had finished (it must
not grow with the number of finished groups: the results are in the store, not in the client).
Then a rerun with the same store, which reads every group back instead of fitting (its time).

Run from the repository root: ``python benchmarks/many_load.py`` (defaults: 2000 MAP groups, 200
NUTS groups of 2 chains x (100 + 100), 2 workers); ``--quick`` is a smoke run.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import tempfile
import threading
import time
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd

SEED = 2026


def simulate(k: int, seed: int) -> pd.DataFrame:
    """``k`` groups of 20-50 points from a sine of group-specific period plus noise."""
    rng = np.random.default_rng(seed)
    parts = []
    for g in range(k):
        n = int(rng.integers(20, 51))
        x = np.sort(rng.uniform(0.0, 10.0, n))
        y = np.sin(x / rng.uniform(0.5, 3.0)) + 0.1 * rng.standard_normal(n)
        parts.append(pd.DataFrame({"site": f"s{g:05d}", "t": x, "y": y}))
    return pd.concat(parts, ignore_index=True)


class Sampler(threading.Thread):
    """Samples the client's and the workers' resident memory and the results written."""

    def __init__(self, client, store: Path, every: float):
        super().__init__(daemon=True)
        self.client, self.store, self.every = client, store, every
        self.rows: list[dict] = []
        self.stop = threading.Event()

    def run(self) -> None:
        import psutil

        me = psutil.Process()
        t0 = time.perf_counter()
        while True:  # one last sample after the stop, when every group has finished
            stopped = self.stop.is_set()
            try:
                workers = self.client.run(_rss_with_children)
            except Exception:  # a worker restarting
                workers = {}
            groups = self.store / "groups"
            done = sum(1 for _ in groups.glob("*.nc")) if groups.exists() else 0
            self.rows.append(
                {
                    "t": time.perf_counter() - t0,
                    "done": done,
                    "client_mb": me.memory_info().rss / 2**20,
                    **{f"worker{i}_mb": v / 2**20 for i, v in enumerate(workers.values())},
                }
            )
            if stopped:
                return
            self.stop.wait(self.every)


def _rss_with_children() -> int:
    """Resident memory of this process and its children (``fit_many(..., recycle_after=)``
    fits in a child of each worker, forked from a server process; both count)."""
    import psutil

    me = psutil.Process()
    total = me.memory_info().rss
    for child in me.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.Error:  # a child that just ended
            pass
    return total


def run(df, method: str, store: Path, client, every: float, **kw) -> tuple[float, pd.DataFrame]:
    import bayes_gp

    sampler = Sampler(client, store, every)
    sampler.start()
    t0 = time.perf_counter()
    res = bayes_gp.fit_many(
        df, x="t", y="y", group="site", kernel="matern52", method=method, random_seed=SEED,
        client=client, store=store, **kw,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    sampler.stop.set()
    sampler.join()
    assert not res.errors, list(res.errors.items())[:3]
    return wall, pd.DataFrame(sampler.rows)


def summary(name: str, n: int, wall: float, mem: pd.DataFrame) -> None:
    workers = [c for c in mem.columns if c.startswith("worker")]
    print(f"\n{name}: {n} groups in {wall:.1f} s = {n / wall:.2f} fits/s")
    print(f"  peak client {mem['client_mb'].max():.0f} MiB; peak per worker "
          + ", ".join(f"{mem[c].max():.0f}" for c in workers) + " MiB")  # fmt: skip
    marks = []
    for q in (0.25, 0.5, 0.75, 1.0):
        at = mem[mem["done"] >= q * n]
        if len(at):
            r = at.iloc[0]
            marks.append(
                f"{int(q * 100)}% ({int(r['done'])}): client {r['client_mb']:.0f}, workers "
                + "/".join(f"{r[c]:.0f}" for c in workers)
            )
    print("  memory (MiB) as groups finish: " + "; ".join(marks))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--map-groups", type=int, default=2000)
    p.add_argument("--nuts-groups", type=int, default=200)
    p.add_argument("--draws", type=int, default=100)
    p.add_argument("--tune", type=int, default=100)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--every", type=float, default=1.0, help="seconds between memory samples")
    p.add_argument("--quick", action="store_true", help="100 MAP and 10 NUTS groups")
    p.add_argument("--recycle-after", type=int, default=None,
                   help="fit_many's recycle_after: fits per child process of a worker")  # fmt: skip
    a = p.parse_args()
    if a.quick:
        a.map_groups, a.nuts_groups = 100, 10
    import dask
    from dask.distributed import Client, LocalCluster

    print(f"{date.today()} {platform.node()} {os.cpu_count()} CPUs; load {os.getloadavg()}")
    print(f"{a.workers} workers x 1 thread; MAP {a.map_groups} groups, NUTS {a.nuts_groups} "
          f"groups (2 chains x ({a.tune} + {a.draws}), PyMC's sampler)")  # fmt: skip
    recycle = {} if a.recycle_after is None else {"recycle_after": a.recycle_after}
    if recycle:
        print(f"each worker fits in a child process replaced after {a.recycle_after} fits; "
              "worker memory includes its children")  # fmt: skip
    with (
        dask.config.set({"distributed.worker.daemon": a.recycle_after is None}),
        LocalCluster(
            n_workers=a.workers, threads_per_worker=1, processes=True, dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
        tempfile.TemporaryDirectory() as tmp,
    ):  # fmt: skip
        client.run(lambda: __import__("bayes_gp"))  # the workers' imports before the clock
        for method, n, kw in (
            ("map", a.map_groups, {"fit_kwargs": {"n_restarts": 1}, **recycle}),
            ("nuts", a.nuts_groups,
             {"draws": a.draws, "tune": a.tune, "chains": 2, "sampler": "pymc", **recycle}),
        ):  # fmt: skip
            if n <= 0:
                continue
            df = simulate(n, SEED)
            store = Path(tmp) / method
            wall, mem = run(df, method, store, client, a.every, **kw)
            summary(method.upper(), n, wall, mem)
            t0 = time.perf_counter()
            import bayes_gp

            again = bayes_gp.fit_many(
                df, x="t", y="y", group="site", kernel="matern52", method=method,
                random_seed=SEED, client=client, store=store, **kw,
            )  # fmt: skip
            assert again.table["resumed"].all()
            size = sum(f.stat().st_size for f in (store / "groups").iterdir()) / 2**20
            print(f"  rerun on the store: {time.perf_counter() - t0:.1f} s (all {n} read back); "
                  f"store {size:.0f} MiB")  # fmt: skip
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
