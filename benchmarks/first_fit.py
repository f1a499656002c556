"""The first NUTS fit as a user sees it: bayes_gp with cold and warm compilation caches against a
hand-written numpyro model of the same GP, each in a fresh Python process (issue 41).

What is timed, per process: ``import`` (the library), then ``fit`` (building the model,
compiling it, NUTS with 2 chains x (``--tune`` + ``--draws``), and for bayes_gp the per-draw
leave-one-out ``log_likelihood`` group that ``sample`` always adds), and the minimum bulk ESS
over ``(ls, eta, sigma)``. Rows:

* ``bayes_gp cold``: an empty PyTensor compile directory (``PYTENSOR_FLAGS=base_compiledir=...``,
  so PyTensor's on-disk numba cache is empty too): a new machine's first fit;
* ``bayes_gp warm``: a second process with that directory, on new data of the same size (the
  user's next notebook);
* ``bayes_gp 2nd fit``: the same process as ``warm``, a third data set (the compiled model is
  reused: ``bayes_gp.inference.compiled``);
* ``numpyro hand``: the model of ``benchmarks/regression.py`` (``hand_model``), fresh process;
  JAX's persistent compilation cache is off (its default), so every run compiles.

Equal conditions: the chains in parallel on both sides with one thread each (nutpie's two chain
threads with one BLAS thread; two XLA host devices with one XLA thread each), the same priors,
jitter and data. Ratios are min-ESS per second of ``fit`` (and of ``import + fit``) against the
hand-written model's. The 1-min load average after each run is printed: compare within a run.

    python benchmarks/first_fit.py                      # N = 100 300
    python benchmarks/first_fit.py --sizes 1000 --tune 300 --draws 300 --no-hand
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from datetime import date

import numpy as np

_DATA = r"""
import numpy as np
def data(n, seed):
    rng = np.random.default_rng([seed, n])
    x = np.sort(rng.uniform(0.0, 10.0, n))
    d2 = (x[:, None] - x[None, :]) ** 2
    f = np.linalg.cholesky(np.exp(-0.5 * d2 / 1.2**2) + 1e-8 * np.eye(n)) @ rng.standard_normal(n)
    return x, f + 0.3 * rng.standard_normal(n)
"""

BAYES_GP = _DATA + r"""
import json, sys, time, warnings
n, tune, draws, fits = (int(a) for a in sys.argv[1:5])
t0 = time.perf_counter()
import arviz as az
from bayes_gp import GPRegression
t_import = time.perf_counter() - t0
# phases: compile (nutpie's model, cached or not), sampling (nutpie.sample), loo (the per-draw
# leave-one-out group); the rest of fit is building the model, its jitter check and lazy imports
# (nutpie's import, which the wrappers need now, is counted in the first fit, where it happens)
t_wrap = time.perf_counter()
import nutpie
import bayes_gp.inference.compiled as _compiled
import bayes_gp.inference.native_gp as _native
from bayes_gp.regression.gpr import GPRegression as _G
phases = {}
def _timed(owner, name, key):
    fn = getattr(owner, name)
    def wrapper(*a, **kw):
        t = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            phases[key] = phases.get(key, 0.0) + time.perf_counter() - t
    setattr(owner, name, wrapper)
_timed(_compiled, "_compiled_for", "compile")
_timed(_native, "compile_native", "compile")  # the C path: the library loaded or compiled
_timed(nutpie, "sample", "sampling")
_timed(_G, "_nuts_result", "loo")
t_wrap = time.perf_counter() - t_wrap
rows = []
for k in range(fits):
    phases.clear()
    x, y = data(n, 1000 + 17 * k + int(sys.argv[5]))
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gp = GPRegression(x, y, "expquad", mean="zero")
        idata = gp.sample(draws=draws, tune=tune, chains=2, random_seed=k, progressbar=False)
    fit = time.perf_counter() - t + (t_wrap if k == 0 else 0.0)
    ess = az.ess(idata["posterior"].to_dataset()[["ls", "eta", "sigma"]], method="bulk")
    rows.append({"import": t_import if k == 0 else 0.0, "fit": fit,
                 "ess": float(min(float(ess[v]) for v in ("ls", "eta", "sigma"))),
                 "backend": idata["posterior"].attrs.get("bayes_gp_nutpie_backend", ""),
                 **{f"t_{k}": v for k, v in phases.items()}})
print(json.dumps(rows))
"""

HAND = _DATA + r"""
import json, os, sys, time
n, tune, draws = (int(a) for a in sys.argv[1:4])
mu_ls, sd_y, jitter = (float(a) for a in sys.argv[4:7])
seed = int(sys.argv[7])
t0 = time.perf_counter()
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS
import arviz as az
t_import = time.perf_counter() - t0

def hand_model(d2, y):
    ls = numpyro.sample("ls", dist.LogNormal(mu_ls, 1.0))
    eta = numpyro.sample("eta", dist.HalfNormal(sd_y))
    sigma = numpyro.sample("sigma", dist.HalfNormal(sd_y))
    K = eta**2 * jnp.exp(-0.5 * d2 / ls**2) + (sigma**2 + jitter) * jnp.eye(y.shape[0])
    numpyro.sample("y", dist.MultivariateNormal(jnp.zeros(y.shape[0]), K), obs=y)

x, y = data(n, seed)
t = time.perf_counter()
mcmc = MCMC(NUTS(hand_model, target_accept_prob=0.9), num_warmup=tune, num_samples=draws,
            num_chains=2, chain_method="parallel", progress_bar=False)
mcmc.run(jax.random.PRNGKey(0), jnp.asarray((x[:, None] - x[None, :]) ** 2), jnp.asarray(y))
# np.asarray waits for the draws: JAX dispatches asynchronously, so get_samples alone returns
# before the chains have run
samples = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
fit = time.perf_counter() - t
ess = az.ess({k: samples[k] for k in ("ls", "eta", "sigma")}, method="bulk")
print(json.dumps([{"import": t_import, "fit": fit,
                   "ess": float(min(float(ess[v]) for v in ("ls", "eta", "sigma"))),
                   "backend": "xla"}]))
"""

XLA_FLAGS = (
    "--xla_force_host_platform_device_count=2 --xla_cpu_multi_thread_eigen=false "
    "intra_op_parallelism_threads=1"
)


def _run(code: str, args: list, env: dict) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    rows = json.loads(out.stdout.strip().splitlines()[-1])
    for r in rows:
        r["load"] = os.getloadavg()[0]
    return rows


def _hand_priors(n: int, seed: int) -> tuple[float, float, float]:
    """``GPRegression``'s prior parameters and jitter for the data (as regression.py's
    ``run_hand``): ``ls ~ LogNormal(mu_ls, 1)``, ``eta, sigma ~ HalfNormal(sd_y)``."""
    from bayes_gp import GPRegression

    ns: dict = {}
    exec(_DATA, ns)
    x, y = ns["data"](n, seed)
    gp = GPRegression(x, y, "expquad", mean="zero")
    return float(np.log(np.mean(gp.scale.x_range) / 3.0)), float(gp.scale.y_sd), gp.jitter


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 300])
    ap.add_argument("--tune", type=int, default=1000)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-hand", action="store_true", help="leave the numpyro model out")
    args = ap.parse_args()
    base = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "XLA_FLAGS": XLA_FLAGS}
    print(f"first_fit  {date.today()}  {platform.platform()}  {os.cpu_count()} CPUs")
    print(f"2 chains in parallel, tune {args.tune}, draws {args.draws}; "
          f"load average at start {os.getloadavg()[0]:.1f}\n")  # fmt: skip
    header = (f"{'N':>5} {'run':17} | {'import s':>8} {'fit s':>7} | {'minESS':>6} "
              f"{'ESS/s':>7} | {'ratio':>6} {'ratio+imp':>9} | {'load':>4} | "
              f"{'compile':>7} {'sampling':>8} {'loo':>5} {'rest':>5}")  # fmt: skip
    print(header)
    print("-" * len(header), flush=True)
    for n in args.sizes:
        rows: list[tuple[str, dict]] = []
        if not args.no_hand:
            priors = _hand_priors(n, 1000 + args.seed)
            rows += [("numpyro hand", r) for r in
                     _run(HAND, [n, args.tune, args.draws, *priors, 1000 + args.seed], base)]  # fmt: skip
        with tempfile.TemporaryDirectory(prefix="bayes_gp_first_fit_") as cache:
            env = {**base, "PYTENSOR_FLAGS": f"base_compiledir={cache}"}
            rows.append(("bayes_gp cold", _run(BAYES_GP, [n, args.tune, args.draws, 1, args.seed],
                                               env)[0]))  # fmt: skip
            warm = _run(BAYES_GP, [n, args.tune, args.draws, 2, args.seed + 1], env)
            rows += [("bayes_gp warm", warm[0]), ("bayes_gp 2nd fit", warm[1])]
        hand = next((r for name, r in rows if name == "numpyro hand"), None)
        for name, r in rows:
            rate = r["ess"] / r["fit"]
            if hand is not None:
                ratio = rate / (hand["ess"] / hand["fit"])
                total = (r["ess"] / (r["fit"] + r["import"])) / (
                    hand["ess"] / (hand["fit"] + hand["import"])
                )
                ratios = f"{ratio:6.2f} {total:9.2f}"
            else:
                ratios = f"{'-':>6} {'-':>9}"
            split = ""
            if "t_sampling" in r:
                r.setdefault("t_loo", 0.0)
                rest = r["fit"] - r["t_compile"] - r["t_sampling"] - r["t_loo"]
                split = (f" | {r['t_compile']:7.1f} {r['t_sampling']:8.1f} {r['t_loo']:5.1f} "
                         f"{rest:5.1f}")  # fmt: skip
            print(f"{n:5d} {name:17} | {r['import']:8.1f} {r['fit']:7.1f} | {r['ess']:6.0f} "
                  f"{rate:7.1f} | {ratios} | {r['load']:4.1f}{split}", flush=True)  # fmt: skip
    print("\nfit = model construction + compilation + NUTS (+ bayes_gp's per-draw LOO), split "
          "for bayes_gp into compile (nutpie's model), sampling, loo and the rest (building the "
          "model, the jitter check, lazy imports); "
          "ratio = ESS/s of fit against the hand-written model's; ratio+imp = the same with "
          "each side's imports counted.")  # fmt: skip


if __name__ == "__main__":
    main()
