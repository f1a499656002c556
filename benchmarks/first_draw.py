"""Time to first result: ``import bayes_gp`` -> first MAP fit -> first NUTS draw, per sampler;
then the same for a second model of the same structure on new data (the compiled-model cache).

A user's first fit pays for imports and for compiling the model (numba for nutpie, PyTensor's C
backend for PyMC's sampler, XLA for numpyro). Each measurement runs in a fresh Python process on a
data set it has never seen (a 1-D GP of ``--n`` points drawn with a new seed), so no in-process
cache helps: what a user sees in a new notebook. Reports the three stages and their total, the
median over ``--repeats`` processes per sampler. Then, in the same process, a second model on
another data set of the same size (the next group of ``fit_many``, a cross-validation fold): its
MAP fit and its first draw, which ``bayes_gp.inference.compiled`` serves without compiling; the
row ``nutpie/off`` runs with that cache turned off (``BAYES_GP_REUSE_COMPILED=0``).

    python benchmarks/first_draw.py                  # n = 300, samplers pymc nutpie numpyro
    python benchmarks/first_draw.py --n 1000 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from datetime import date

import numpy as np

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import bayes_gp
t_import = time.perf_counter() - t0
n, seed, sampler = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(seed)
X = np.sort(rng.uniform(0, 10, n))
y = np.sin(X) + 0.3 * rng.normal(size=n)
t1 = time.perf_counter()
gp = bayes_gp.GPRegression(X, y, "expquad")
gp.fit_map(n_restarts=1, prior=True, random_seed=0)
t_map = time.perf_counter() - t1
t2 = time.perf_counter()
gp.sample(draws=1, tune=1, chains=1, sampler=sampler, random_seed=0)
t_nuts = time.perf_counter() - t2
y2 = np.cos(X) + 0.3 * rng.normal(size=n)  # a second data set of the same size
t3 = time.perf_counter()
gp2 = bayes_gp.GPRegression(X + rng.uniform(0, 0.01, n), y2, "expquad")
gp2.fit_map(n_restarts=1, prior=True, random_seed=0)
t_map2 = time.perf_counter() - t3
t4 = time.perf_counter()
gp2.sample(draws=1, tune=1, chains=1, sampler=sampler, random_seed=0)
t_nuts2 = time.perf_counter() - t4
print(json.dumps({"import": t_import, "map": t_map, "nuts": t_nuts, "map2": t_map2,
                  "nuts2": t_nuts2}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--samplers", nargs="+", default=["pymc", "nutpie", "numpyro"])
    args = ap.parse_args()
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    print(f"first_draw  {date.today()}  {platform.platform()}  n = {args.n}")
    print(f"load average at start {os.getloadavg()[0]:.1f}\n")
    print(
        f"{'sampler':11} | {'import s':>8} {'1st MAP s':>9} {'1st draw s':>10} {'total s':>8} | "
        f"{'2nd MAP s':>9} {'2nd draw s':>10}"
    )
    rng = np.random.default_rng()
    runs = [(s, "1") for s in args.samplers]
    if "nutpie" in args.samplers:
        runs.append(("nutpie", "0"))
    for sampler, reuse in runs:
        rows = []
        for _ in range(args.repeats):
            seed = int(rng.integers(2**31))
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(args.n), str(seed), sampler],
                capture_output=True,
                text=True,
                env={**env, "BAYES_GP_REUSE_COMPILED": reuse},
                check=True,
            )
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        med = {k: float(np.median([r[k] for r in rows])) for k in rows[0]}
        total = med["import"] + med["map"] + med["nuts"]
        label = sampler if reuse == "1" else f"{sampler}/off"
        print(
            f"{label:11} | {med['import']:8.1f} {med['map']:9.1f} {med['nuts']:10.1f} "
            f"{total:8.1f} | {med['map2']:9.2f} {med['nuts2']:10.2f}",
            flush=True,
        )
    print(
        f"\nmedian over {args.repeats} fresh processes, each on new data; load average at end "
        f"{os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
