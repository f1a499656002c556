"""NUTS with the latent GP integrated out by Laplace against joint latent NUTS (LatentGP).

For each data set, the same ``LatentGP`` (same kernel, likelihood, priors and jitter) is sampled by

* ``laplace``: ``sample(method="nuts")`` — NUTS over the hyperparameters only, the Laplace
  evidence and its exact gradient (nutpie; for these three data sets since 2026-12-01 on the C
  log density of :mod:`bayes_gp.inference.native_laplace`, nothing compiled per model);
* ``laplace-numba``: the same with bayes_gp's C path off (``native_gp.native(False)``): the
  Laplace Op in nutpie's numba backend, on the native solver of :mod:`bayes_gp.latent.native`;
* ``latent``: ``sample(method="nuts_joint")`` — joint NUTS over the whitened latent values and the
  hyperparameters (what bayes_gp's ``"auto"`` picks: nutpie on the C log density of
  :mod:`bayes_gp.inference.native_latent` for these three data sets since 2026-12-01, PyMC's
  sampler before);

with the same draws, tuning steps and chains, the chains run one after another on both sides
(``cores=1``), BLAS pinned to one thread. Reported per run: wall time of
``sample`` (compilation, sampling and the per-draw post-processing: Laplace modes and LA-LOO
terms for ``laplace``, the pointwise log-likelihood for ``latent``), the minimum bulk ESS over the
hyperparameters, min-ESS per second, divergences, the posterior means of the hyperparameters, and
the held-out mean log predictive density (Gauss–Hermite, mixing over 200 posterior draws) on the
test split where there is one, else PSIS-LOO elpd per observation. The ratio rows divide
``laplace`` (and ``laplace-numba``) by ``latent`` min-ESS/s.

Data: ``coal`` (the declared coal-mining model: 112 yearly counts, Poisson, Matérn 3/2);
``pima`` (Ripley's split: 200 training, 332 test; Bernoulli-logit, isotropic SE on the 7
standardised inputs); ``breast-cancer`` (scikit-learn, 10 features, a stratified 200-case training
split, the rest held out; Bernoulli-logit, isotropic SE).

Run ``python benchmarks/latent_laplace.py --help``; ``--quick`` is a smoke run. ``--phases``
splits the ``laplace`` wall time into nutpie's compilation, its sampling (and within it the
Laplace Op's evaluations: count, ms each, Cholesky factorisations per evaluation, where the Op
runs the NumPy solver; the native one, :mod:`bayes_gp.latent.native`, is not seen from Python),
the post-processing and the rest; ``--cores`` runs the chains in parallel.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import platform
import threading
import time
import warnings
from datetime import date

import arviz as az
import numpy as np
import pandas as pd

from bayes_gp import LatentGP
from bayes_gp.datasets import rdataset
from bayes_gp.inference import native_gp
from bayes_gp.inference.methods import LATENT_RENAMED
from bayes_gp.latent.predictive import log_predictive_density

#: This script's names of the two NUTS paths -> ``sample(method=...)``'s ("nuts", "nuts_joint").
SAMPLE_METHOD = {**LATENT_RENAMED, "laplace-numba": LATENT_RENAMED["laplace"]}


def _data(name: str, seed: int):
    if name == "coal":
        from bayes_gp.declared import load_model

        d = load_model("coal_mining").load_data()
        return d.X_train, d.y_train, None, None, "poisson", "matern32"
    if name == "pima":
        tr, te = rdataset("Pima.tr"), rdataset("Pima.te")
        feats = ["npreg", "glu", "bp", "skin", "bmi", "ped", "age"]
        Xtr, Xte = tr[feats].to_numpy(float), te[feats].to_numpy(float)
        mu, sd = Xtr.mean(0), Xtr.std(0)
        ytr, yte = (tr["type"] == "Yes").to_numpy(float), (te["type"] == "Yes").to_numpy(float)
        return (Xtr - mu) / sd, ytr, (Xte - mu) / sd, yte, "bernoulli", "expquad"
    if name == "breast-cancer":
        from sklearn.datasets import load_breast_cancer
        from sklearn.model_selection import train_test_split

        X, y = load_breast_cancer(return_X_y=True)
        X = X[:, :10]
        Xtr, Xte, ytr, yte = train_test_split(X, y, train_size=200, stratify=y, random_state=seed)
        mu, sd = Xtr.mean(0), Xtr.std(0)
        return (Xtr - mu) / sd, ytr * 1.0, (Xte - mu) / sd, yte * 1.0, "bernoulli", "expquad"
    raise ValueError(name)


def _held_out(gp: LatentGP, idata, X_test, y_test) -> float:
    if X_test is None:
        return float(az.loo(idata).elpd) / gp.X.shape[0]
    means, variances, phis = gp._latent_moments(np.asarray(X_test), idata, 200)
    held = gp.likelihood.with_data(y_test)
    dens = np.array([
        log_predictive_density(held, phi, m, v) for m, v, phi in zip(means, variances, phis,
                                                                    strict=True)
    ])  # fmt: skip
    return float(np.mean(np.log(np.mean(np.exp(dens), axis=0))))


@contextlib.contextmanager
def _phases(out: dict):
    """Time the phases of ``sample(method="nuts")``: nutpie's compilation, the Laplace Op's
    evaluations (count, seconds, Cholesky factorisations of B) and the per-draw post-processing
    (modes and LA-LOO terms), by wrapping the functions that do them."""
    import importlib

    import nutpie

    la = importlib.import_module("bayes_gp.latent.laplace")  # the package exports `laplace` too
    lm = importlib.import_module("bayes_gp.latent.model")
    lop = importlib.import_module("bayes_gp.latent.op")

    out.update(compile_s=0.0, sampling_s=0.0, op_calls=0, op_s=0.0, post_s=0.0, potrf=0)
    saved = (nutpie.compile_pymc_model, lop.LaplaceLogp.compute, lm.LatentGP._nuts_result,
             nutpie.sample, lapack_potrf := la.lapack.dpotrf)  # fmt: skip
    counts = threading.local()  # factorisations per thread: chains in threads interleave

    def timed(key, fn, count=None):
        def wrapper(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                out[key] += time.perf_counter() - t
                if count:
                    out[count] += 1

        return wrapper

    def potrf(*a, **k):
        counts.n = getattr(counts, "n", 0) + 1
        return lapack_potrf(*a, **k)

    timed_compute = timed("op_s", saved[1], "op_calls")

    def compute(*a, **k):  # the Op's evaluations, and the factorisations made in them
        before = getattr(counts, "n", 0)
        try:
            return timed_compute(*a, **k)
        finally:
            out["potrf"] += getattr(counts, "n", 0) - before

    nutpie.compile_pymc_model = timed("compile_s", saved[0])
    lop.LaplaceLogp.compute = compute
    lm.LatentGP._nuts_result = timed("post_s", saved[2])
    nutpie.sample = timed("sampling_s", saved[3])
    la.lapack.dpotrf = potrf
    try:
        yield
    finally:
        (nutpie.compile_pymc_model, lop.LaplaceLogp.compute, lm.LatentGP._nuts_result,
         nutpie.sample) = saved[:4]  # fmt: skip
        la.lapack.dpotrf = lapack_potrf
        out["potrf_per_call"] = out["potrf"] / max(out["op_calls"], 1)


def run(
    name: str, draws: int, tune: int, chains: int, seed: int, phases=False,
    methods=("laplace", "latent"), cores=1,
) -> list[dict]:  # fmt: skip
    Xtr, ytr, Xte, yte, lik, kernel = _data(name, seed)
    rows = []
    for method in methods:
        gp = LatentGP(Xtr, ytr, kernel, lik)
        timing: dict = {}
        t0 = time.perf_counter()
        with (
            warnings.catch_warnings(),
            _phases(timing) if phases and method != "latent" else contextlib.nullcontext(),
            native_gp.native(False) if method == "laplace-numba" else contextlib.nullcontext(),
        ):
            warnings.simplefilter("ignore")
            idata = gp.sample(draws=draws, tune=tune, chains=chains, random_seed=seed,
                              method=SAMPLE_METHOD[method], cores=cores)  # fmt: skip
        seconds = time.perf_counter() - t0
        if timing:
            n_steps = int(idata["sample_stats"]["n_steps"].sum())
            calls = timing["op_calls"]
            op = (f" (of which the Laplace Op's evaluations {timing['op_s']:.1f}: {calls} calls, "
                  f"{1e3 * timing['op_s'] / max(calls, 1):.2f} ms each (with chains in parallel "
                  "threads: including waits for the GIL), "
                  f"{timing['potrf_per_call']:.2f} Cholesky factorisations per call)")  # fmt: skip
            if calls == 0:  # C, or numba's native solver: not seen from Python
                op = " (the Laplace evidence in C or on the native solver: not timed)"
            rest = seconds - timing["compile_s"] - timing["sampling_s"] - timing["post_s"]
            print(f"  {name} {method} phases: wall {seconds:.1f} s = compile "
                  f"{timing['compile_s']:.1f} + sampling {timing['sampling_s']:.1f}{op} + "
                  f"post-processing {timing['post_s']:.1f} + rest {rest:.1f}; {n_steps} leapfrog "
                  "steps in the kept draws", flush=True)  # fmt: skip
        s = az.summary(idata, var_names=gp.hyperparameters)
        ess = float(s["ess_bulk"].min())
        row = {
            "data": name,
            "n": Xtr.shape[0],
            "method": method,
            "sampler": idata["posterior"].attrs.get("bayes_gp_sampler"),
            "seconds": round(seconds, 1),
            "min_ess_bulk": round(ess),
            "min_ess_per_s": round(ess / seconds, 2),
            "divergences": int(idata["sample_stats"]["diverging"].sum()),
            "held_out_lpd" if Xte is not None else "loo_elpd_per_obs": round(
                _held_out(gp, idata, Xte, yte), 4
            ),
        }
        for p in gp.hyperparameters:
            row[f"mean_{p}"] = round(float(s.loc[p, "mean"]), 3)
        rows.append(row)
        print(row, flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", nargs="+", default=["coal", "pima", "breast-cancer"])
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--tune", type=int, default=1000)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="smoke run: coal, 100 draws")
    ap.add_argument("--phases", action="store_true",
                    help="time compilation, the Laplace Op and the post-processing (laplace)")
    ap.add_argument("--cores", type=int, default=1, help="chains in parallel (nutpie: threads)")
    ap.add_argument("--methods", nargs="+", default=["laplace", "latent"],
                    choices=["laplace", "laplace-numba", "latent"])  # fmt: skip
    args = ap.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    logging.getLogger("pymc").setLevel(logging.ERROR)
    if args.quick:
        args.data, args.draws, args.tune = ["coal"], 100, 100
    print(f"# {date.today()} {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()}")  # fmt: skip
    rows = []
    for name in args.data:
        rows += run(name, args.draws, args.tune, args.chains, args.seed, args.phases, args.methods,
                    args.cores)  # fmt: skip
    df = pd.DataFrame(rows)
    print(df.to_string(index=False))
    for name, g in df.groupby("data", sort=False):
        ratio = g.set_index("method")["min_ess_per_s"]
        for method in ("laplace", "laplace-numba"):
            if method in ratio and "latent" in ratio:
                print(f"{name}: {method} / latent min-ESS/s = "
                      f"{ratio[method] / ratio['latent']:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
