"""Time to first result: ``import bayes_gp`` -> first MAP fit -> first NUTS draw, per sampler.

A user's first fit pays for imports and for compiling the model (numba for nutpie, PyTensor's C
backend for PyMC's sampler, XLA for numpyro). Each measurement runs in a fresh Python process on a
data set it has never seen (a 1-D GP of ``--n`` points drawn with a new seed), so no in-process
cache helps: what a user sees in a new notebook. Reports the three stages and their total, the
median over ``--repeats`` processes per sampler.

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
print(json.dumps({"import": t_import, "map": t_map, "nuts": t_nuts}))
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
    print(f"{'sampler':8} | {'import s':>8} {'1st MAP s':>9} {'1st draw s':>10} {'total s':>8}")
    rng = np.random.default_rng()
    for sampler in args.samplers:
        rows = []
        for _ in range(args.repeats):
            seed = int(rng.integers(2**31))
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(args.n), str(seed), sampler],
                capture_output=True,
                text=True,
                env=env,
                check=True,
            )
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        med = {k: float(np.median([r[k] for r in rows])) for k in rows[0]}
        total = sum(med.values())
        print(
            f"{sampler:8} | {med['import']:8.1f} {med['map']:9.1f} {med['nuts']:10.1f} "
            f"{total:8.1f}",
            flush=True,
        )
    print(
        f"\nmedian over {args.repeats} fresh processes, each on new data; load average at end "
        f"{os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
