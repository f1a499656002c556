"""Many independent GP fits: a sequential loop against ``bayes_gp.fit_many`` on a local cluster.

K groups (default 8) of N points (default 100), each from a GP with its own Matérn-5/2
length-scale, are fitted with the same model (``kernel="matern52"``) in two ways:

* ``sequential``: a Python loop ``GPRegression(X_g, y_g).fit_map(...)`` / ``.sample(...)`` in
  this process, with the seeds ``fit_many`` derives (so both do the same work);
* ``fit_many``: ``bayes_gp.fit_many`` on a ``LocalCluster`` of ``--workers`` processes (one
  thread each), started before the clock starts. The first call on a fresh cluster pays the
  workers' imports (``cold``); later calls do not (``warm``).

Reported: wall times (minimum over ``--repeats``), the ratio sequential / fit_many, and per group
the task's wall time split into sampling (``sampling_time`` of PyMC) and the rest (model build,
compilation, the ``log_likelihood`` group, transfer). The MAP and NUTS results of both ways are
checked to be identical. BLAS is pinned to one thread in both.

Run ``python benchmarks/many.py --help`` for the options; ``--quick`` is a smoke run.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import time
from datetime import date

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

# bayes_gp is imported inside the functions: the worker processes (spawned) re-import this module,
# and should start bare, as from a notebook, so that the first fit_many call pays their imports.

KERNEL = "matern52"
SEED = 2026


def matern52(x: np.ndarray, ls: float) -> np.ndarray:
    """R&W eq. 4.17 with nu = 5/2, unit variance."""
    s5 = np.sqrt(5.0) * np.abs(x[:, None] - x[None, :]) / ls
    return (1.0 + s5 + s5**2 / 3.0) * np.exp(-s5)


def simulate(k: int, n: int) -> pd.DataFrame:
    rng = np.random.default_rng(SEED)
    parts = []
    for g, ls in enumerate(np.geomspace(0.5, 4.0, k)):
        x = np.sort(rng.uniform(0.0, 10.0, n))
        f = np.linalg.cholesky(matern52(x, ls) + 1e-9 * np.eye(n)) @ rng.standard_normal(n)
        y = f + 0.1 * rng.standard_normal(n)
        parts.append(pd.DataFrame({"site": f"s{g}", "t": x, "y": y}))
    return pd.concat(parts, ignore_index=True)


def sequential(df: pd.DataFrame, method: str, nuts: dict) -> tuple[float, dict, pd.DataFrame]:
    from bayes_gp import GPRegression
    from bayes_gp.many import group_seed

    t0 = time.perf_counter()
    fits, rows = {}, []
    with threadpool_limits(limits=1, user_api="blas"):
        for g, d in df.groupby("site", sort=False):
            t = time.perf_counter()
            gp = GPRegression(d[["t"]], d["y"].to_numpy(), kernel=KERNEL)
            seed = group_seed(SEED, g)
            if method == "map":
                fits[g] = gp.fit_map(n_restarts=3, random_seed=seed)
                rows.append({"group": g, "seconds": time.perf_counter() - t})
            else:
                fits[g] = gp.sample(random_seed=seed, quiet=True, **nuts)
                rows.append(
                    {
                        "group": g,
                        "seconds": time.perf_counter() - t,
                        "sampling_seconds": fits[g]["posterior"].attrs["sampling_time"],
                    }
                )
    return time.perf_counter() - t0, fits, pd.DataFrame(rows).set_index("group")


def parallel(df, method, nuts, client):
    import bayes_gp

    t0 = time.perf_counter()
    kw = {"fit_kwargs": {"n_restarts": 3}} if method == "map" else nuts
    res = bayes_gp.fit_many(
        df, x="t", y="y", group="site", kernel=KERNEL, method=method, random_seed=SEED,
        client=client, **kw,
    )  # fmt: skip
    return time.perf_counter() - t0, res


def same_results(method: str, seq: dict, res) -> float:
    """Largest relative difference between the two ways' estimates (0 when identical)."""
    worst = 0.0
    for g, fit in seq.items():
        other = res.fits[g]
        for name in ("ls", "eta", "sigma"):
            a = np.asarray(fit.params[name] if method == "map" else fit["posterior"][name])
            b = np.asarray(other.params[name] if method == "map" else other["posterior"][name])
            worst = max(worst, float(np.max(np.abs(a - b) / np.abs(a))))
    return worst


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--groups", type=int, default=8)
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--draws", type=int, default=300)
    p.add_argument("--tune", type=int, default=300)
    p.add_argument("--chains", type=int, default=2)
    p.add_argument("--samplers", default="pymc,nutpie")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="3 groups of 30, 50 draws, 1 repeat")
    a = p.parse_args()
    if a.quick:
        a.groups, a.n, a.draws, a.tune, a.repeats, a.samplers = 3, 30, 50, 50, 1, "pymc"

    from dask.distributed import Client, LocalCluster

    df = simulate(a.groups, a.n)
    print(
        f"# many.py {date.today()}  {platform.machine()}  cpus={os.cpu_count()}  "
        f"K={a.groups} groups x N={a.n}, kernel={KERNEL}, workers={a.workers}, "
        f"NUTS {a.chains} chains x ({a.tune} tune + {a.draws} draws)"
    )
    t = time.perf_counter()
    cluster = LocalCluster(
        n_workers=a.workers, threads_per_worker=1, processes=True, dashboard_address=":0",
        silence_logs=logging.CRITICAL,
    )  # fmt: skip
    client = Client(cluster)
    print(f"cluster start: {time.perf_counter() - t:.1f} s (bare workers)")
    cases = [("map", None)] + [(s, s) for s in a.samplers.split(",") if s]
    try:
        for label, sampler in cases:
            method = "map" if sampler is None else "nuts"
            nuts = {"draws": a.draws, "tune": a.tune, "chains": a.chains, "sampler": sampler}
            seq_times, par_times, cold = [], [], None
            for _ in range(a.repeats):
                ts, seq, seq_table = sequential(df, method, nuts)
                tp, res = parallel(df, method, nuts, client)
                if res.errors:
                    raise RuntimeError(f"fit_many failed: {res.errors}")
                if cold is None and label == cases[0][0]:
                    cold = tp  # the first call on the fresh cluster: workers import bayes_gp
                    tp = parallel(df, method, nuts, client)[0]
                seq_times.append(ts)
                par_times.append(tp)
            ts, tp = min(seq_times), min(par_times)
            diff = same_results(method, seq, res)
            print(f"\n## {label}: {a.groups} groups")
            print(f"sequential     {ts:8.1f} s   ({ts / a.groups:.2f} s per group)")
            print(f"fit_many warm  {tp:8.1f} s   ratio sequential/fit_many = {ts / tp:.2f}")
            if cold is not None and label == cases[0][0]:
                print(f"fit_many cold  {cold:8.1f} s   (first call on the cluster: workers import)")
            print(f"largest relative difference of the estimates: {diff:.1e}")
            tab = res.table
            if method == "nuts":
                over_s = seq_table["seconds"] - seq_table["sampling_seconds"]
                over_p = tab["seconds"] - tab["sampling_seconds"]
                print(
                    "per group, sequential: sampling "
                    f"{seq_table['sampling_seconds'].median():.2f} s, other (build, compile, "
                    f"log-lik) {over_s.median():.2f} s (median; first group {over_s.iloc[0]:.2f})"
                )
                print(
                    "per group, in workers: sampling "
                    f"{tab['sampling_seconds'].median():.2f} s, other {over_p.median():.2f} s "
                    f"(median; max {over_p.max():.2f})"
                )
            else:
                print(
                    f"per group: sequential {seq_table['seconds'].median():.2f} s, in workers "
                    f"{tab['seconds'].median():.2f} s (median)"
                )
    finally:
        client.close()
        cluster.close()


if __name__ == "__main__":
    main()
