"""What conditioning each posterior draw once saves in a ``bayes-gp fit`` run.

One process fits the README's main job (``mauna_loa``, fast data, NUTS) once, then times what
the run does after sampling — the workflow's held-out scores and predictions, and the result
directory with its report (``workflow.save``) — twice on the same draws: with the exact
likelihood's factorisation cache off (``FACTOR_CACHE_BYTES = 0``: each prediction refactorises
C for every draw, as before the cache) and on. The sampling itself is the same in both and is
reported once. Run from the repository root: ``python benchmarks/conditioned.py [draws]``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

import bayes_gp.solvers.exact as exact
from bayes_gp import workflow
from bayes_gp.workflow.scoring import predict


def main(draws: int = 500) -> None:
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    run = workflow.run("mauna_loa", "nuts", fast=True, draws=draws, tune=500, random_seed=0)
    sampled = time.perf_counter() - t0
    print(f"load average {load:.2f}; mauna_loa fast, NUTS 2 x ({draws} + 500): run {sampled:.1f} s")
    rows = []
    for label, budget in (("cache off", 0), ("cache on", 256 * 2**20)):
        exact.FACTOR_CACHE_BYTES = budget
        model = run.model
        # the model's likelihood as a fresh object would find it: an empty cache of this size
        model.marginal._factors.clear()
        model.marginal._max_factors = max(1, budget // (8 * model.X.shape[0] ** 2))
        t = time.perf_counter()
        run.predictions, run.scores = predict(model, run.data, run.fit)
        with tempfile.TemporaryDirectory() as tmp:
            workflow.save(run, os.path.join(tmp, "out"))
        rows.append((label, time.perf_counter() - t))
    for label, seconds in rows:
        print(f"  after sampling ({label}): scores, predictions, report: {seconds:.1f} s")
    print(f"  ratio off/on: {rows[0][1] / rows[1][1]:.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
