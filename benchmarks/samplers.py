"""Which NUTS backend ``sampler="auto"`` should pick, per kind of model: min bulk ESS per second.

Runs each model's ``.sample()`` with every backend it supports, on the same data with the same
seed, 2 chains x (``--tune`` + ``--draws``), and prints wall time (construction, compilation,
sampling, the pointwise log-likelihood group), min bulk ESS over the hyperparameters, ESS per
second, leapfrog steps per draw and divergences, with the ratio to the best backend:

* ``hetero``: :class:`bayes_gp.HeteroscedasticGPRegression` on ``mcycle`` (n = 133; latent
  log-noise GP values sampled with the hyperparameters);
* ``classifier``: :class:`bayes_gp.GPClassifier` (logit) on 120 points of a 2-D problem with
  labels from a GP draw (latent GP values sampled);
* ``sparse``: :class:`bayes_gp.GPRegression` with the compact-support kernel ``pp2`` on
  n = 2000 1-D points on [0, 200] (the sparse exact likelihood; the GP integrated out), with
  ``ls ~ LogNormal(log 4, 0.75)``. The JAX backend
  does not run this likelihood (a clear error), so numpyro is not in this row.

The exact squared-exponential GP regression (GP integrated out) is measured against a
hand-written numpyro model by ``regression.py``. BLAS is pinned to one thread.

    python benchmarks/samplers.py                       # all three models
    python benchmarks/samplers.py --models hetero --tune 300 --draws 300
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings
from datetime import date

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import arviz as az
import numpy as np
import pymc as pm
from threadpoolctl import threadpool_limits

import bayes_gp
from bayes_gp import GPClassifier, GPRegression, HeteroscedasticGPRegression
from bayes_gp.datasets import rdataset

MODELS = ("hetero", "classifier", "sparse")


def hetero():
    df = rdataset("mcycle")
    x, y = df["times"].to_numpy(float), df["accel"].to_numpy(float)
    model = HeteroscedasticGPRegression(x, y, "expquad", "expquad")
    return model, ("pymc", "nutpie", "numpyro")


def classifier():
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, (120, 2))
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2 / np.array([1.0, 2.0]) ** 2).sum(-1)
    K = 4.0 * np.exp(-0.5 * d2) + 1e-8 * np.eye(120)
    f = np.linalg.cholesky(K) @ rng.standard_normal(120)
    y = (rng.uniform(size=120) < 1 / (1 + np.exp(-f))).astype(int)
    return GPClassifier(X, y, "expquad"), ("pymc", "nutpie", "numpyro")


def sparse():
    rng = np.random.default_rng(1)
    x = np.sort(rng.uniform(0, 200, 2000))
    y = np.sin(x) + 0.5 * np.sin(x / 7) + 0.3 * rng.normal(size=x.size)
    # a length-scale prior on the local scale where the support is short (the default, centred on
    # a third of the input range, would make the first steps dense: see the README)
    priors = {"ls": lambda name: pm.LogNormal(name, mu=np.log(4.0), sigma=0.75)}
    return GPRegression(x, y, "pp2", priors=priors), ("pymc", "nutpie")


def hyper_names(model) -> list[str]:
    names = getattr(model, "hyperparameters", None) or [rv.name for rv in model.model.free_RVs]
    return [n for n in names if n not in ("f_rotated_", "g_rotated_", "g", "f")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    ap.add_argument("--tune", type=int, default=500)
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    threadpool_limits(limits=1, user_api="blas")
    print(f"sampler choice  {date.today()}  {platform.platform()}")
    print(
        f"pymc {pm.__version__}, arviz {az.__version__}, bayes_gp {bayes_gp.__version__}; "
        f"2 chains x ({args.tune} + {args.draws}); seed {args.seed}; BLAS threads 1\n"
    )
    head = (
        f"{'model':10} {'backend':8} | {'wall s':>7} {'minESS':>7} {'ESS/s':>7} {'steps':>6}"
        f" {'div':>4} | {'vs best':>7} | {'load':>5}"
    )
    print(head)
    print("-" * len(head))
    total = time.perf_counter()
    for name in args.models:
        rows = []
        _, backends = globals()[name]()
        for backend in backends:
            t = time.perf_counter()
            model, _ = globals()[name]()  # a fresh model: compilation is part of the cost
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                idata = model.sample(
                    draws=args.draws,
                    tune=args.tune,
                    chains=2,
                    sampler=backend,
                    random_seed=args.seed,
                )
            wall = time.perf_counter() - t
            names = [n for n in hyper_names(model) if n in idata["posterior"]]
            ess = az.ess(idata, var_names=names, method="bulk")
            min_ess = min(float(np.min(np.asarray(ess[n]))) for n in names)
            stats = idata["sample_stats"]
            steps = float(np.mean(stats["n_steps"])) if "n_steps" in stats else np.nan
            div = int(np.asarray(stats["diverging"]).sum())
            rows.append((backend, wall, min_ess, min_ess / wall, steps, div, os.getloadavg()[0]))
        best = max(r[3] for r in rows)
        for backend, wall, min_ess, rate, steps, div, load in rows:
            print(
                f"{name:10} {backend:8} | {wall:7.1f} {min_ess:7.0f} {rate:7.2f} {steps:6.1f}"
                f" {div:4d} | {rate / best:7.2f} | {load:5.1f}",
                flush=True,
            )
    print(
        "\nwall = construction + compilation + sampling + pointwise log-likelihood; minESS = min bulk"
        "\nESS over the hyperparameters; steps = mean leapfrog steps per draw; vs best = ESS/s over"
        "\nthe best backend's for the model; load = 1-min load average after the run."
        f"\ntotal wall time {time.perf_counter() - total:.0f} s"
    )


if __name__ == "__main__":
    main()
