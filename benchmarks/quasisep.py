"""O(n) quasiseparable exact GP on long 1-D series: one gradient, an ML-II fit, NUTS.

0. **GPRegression, dense vs quasiseparable** (``structure="dense"`` / ``"quasiseparable"``,
   :mod:`bayes_gp.solvers.structured`): one log density + gradient of the model's observed
   term with respect to the log hyperparameters, Matérn-3/2 and ``"matern32 + matern12"``, in
   PyTensor's numba backend (what nutpie runs) and in the Python-linker mode ``fit_map`` uses
   (``EAGER``), at ``--gpr-sizes`` (dense up to ``--gpr-dense-max``). The crossover (the
   smallest listed n from which the quasiseparable model is faster at every larger listed n) is
   what ``QUASISEP_MIN_N`` is set from.

   **First fit** at ``--first-n`` (default 500): a fresh process builds
   ``GPRegression(x, y, "matern32", structure=...)`` and runs ``fit_map(n_restarts=5,
   prior=False)``, a prediction at 100 inputs and ``point_loo``; wall time after the imports,
   for the dense model and for the quasiseparable one with a cold numba cache (an empty
   ``NUMBA_CACHE_DIR``: the kernels compile) and then a warm one. This, with the table, is
   what ``QUASISEP_MIN_N`` is set from (its comment in ``bayes_gp/solvers/structured.py``).

Data: ``x ~ U[0, n/10]`` (unsorted, 10 points per unit length), ``y = sin(x/3) + 0.3 e``;
hyperparameters ``eta = 1, ell = 2, sigma = 0.3``.

1. **One log density + gradient** with respect to the log hyperparameters (what NUTS calls per
   leapfrog step), Matérn-3/2 and Matérn-5/2, at each ``--sizes`` n:

   * ``qs``: :func:`bayes_gp.solvers.quasisep.quasisep_marginal` in a PyMC model, compiled by
     PyTensor's numba backend (what nutpie runs);
   * ``dense``: the same model with the fused dense likelihood
     (:func:`bayes_gp.solvers.likelihood.marginal_normal`), n <= ``--dense-max``;
   * ``celerite2``: ``celerite2.pymc.GaussianProcess`` with ``Matern32Term(eps=1e-6)`` (it has no
     Matérn-5/2), numba backend;
   * ``tinygp``: ``tinygp.kernels.quasisep.Matern32/52`` with ``jax.jit(jax.value_and_grad)``
     (when tinygp imports; it is not a dependency: install it elsewhere and put it on
     ``PYTHONPATH``), XLA on one thread.

   Each time is the minimum over repeats after a warm-up call; ``rel`` is the relative difference
   of the log density from ``qs``.
2. **ML-II** (type-II maximum likelihood) at ``--fit-n`` (default 10^6), Matérn-5/2: L-BFGS-B on
   the log hyperparameters, the ``qs`` log density and gradient; wall time including compilation;
   then predictions at 1000 new inputs (:func:`~bayes_gp.solvers.quasisep.quasisep_predict`).
3. **NUTS** at ``--nuts-n`` (default 10^5), Matérn-3/2 with weakly informative priors: nutpie,
   2 chains x (500 tune + 500 draws), wall time of ``pm.sample`` including compilation.

One BLAS thread; nutpie runs one thread per chain. The load average (``os.getloadavg()``, other
users' jobs included) is printed with each section: on a shared 2-core machine it inflates times.

    python benchmarks/quasisep.py
    python benchmarks/quasisep.py --sizes 1000 10000 --skip-fit --skip-nuts
    python benchmarks/quasisep.py --skip-gradient --skip-fit --skip-nuts   # section 0 only
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from datetime import date

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault(
    "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
)

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from _timing import best_time, logp_dlogp
from scipy.optimize import minimize
from threadpoolctl import threadpool_limits

import bayes_gp
from bayes_gp import kernels as K
from bayes_gp.kernels.statespace import MaternTerm
from bayes_gp.solvers.likelihood import marginal_normal
from bayes_gp.solvers.quasisep import quasisep_marginal, quasisep_predict
from bayes_gp.solvers.structured import QUASISEP_MIN_N

THETA = {"eta": 1.0, "ell": 2.0, "sigma": 0.3}
KERNELS = {1.5: K.Matern32, 2.5: K.Matern52}


def data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed + n)
    x = rng.uniform(0.0, n / 10.0, n)
    return x, np.sin(x / 3.0) + 0.3 * rng.normal(size=n)


def load() -> str:
    return "load average " + " ".join(f"{v:.2f}" for v in os.getloadavg())


def priors():
    return (
        pm.HalfNormal("eta", 2.0),
        pm.InverseGamma("ell", 3.0, 6.0),
        pm.HalfNormal("sigma", 1.0),
    )


def model_qs(x, y, nu):
    with pm.Model() as model:
        eta, ell, sigma = priors()
        quasisep_marginal("y", x, y, eta**2 * KERNELS[nu](1, ls=ell), sigma=sigma)
    return model


def model_dense(x, y, nu):
    with pm.Model() as model:
        eta, ell, sigma = priors()
        X = x[:, None]
        C = eta**2 * KERNELS[nu](1, ls=ell)(X) + sigma**2 * pt.eye(x.size)
        marginal_normal("y", pt.zeros(x.size), C, observed=y)
    return model


def model_celerite(x, y, nu):
    if nu != 1.5:
        return None
    try:
        from celerite2.pymc import GaussianProcess, terms
    except ImportError:
        return None

    order = np.argsort(x)
    with pm.Model() as model:
        eta, ell, sigma = priors()
        gp = GaussianProcess(terms.Matern32Term(sigma=eta, rho=ell, eps=1e-6), mean=0.0)
        gp.compute(x[order], diag=sigma**2 * pt.ones(x.size), quiet=True)
        gp.marginal("y", observed=y[order])
    return model


def tinygp_fn(x, y, nu):
    try:
        import jax

        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
        from tinygp import GaussianProcess
        from tinygp.kernels import quasisep
    except ImportError:
        return None
    order = np.argsort(x)
    xs, ys = jnp.asarray(x[order]), jnp.asarray(y[order])
    kern = {1.5: quasisep.Matern32, 2.5: quasisep.Matern52}[nu]

    def loss(logp):
        eta, ell, sigma = jnp.exp(logp)
        gp = GaussianProcess(kern(scale=ell, sigma=eta), xs, diag=sigma**2)
        return gp.log_probability(ys)

    f = jax.jit(jax.value_and_grad(loss))
    theta = jnp.log(jnp.array([THETA["eta"], THETA["ell"], THETA["sigma"]]))

    def call():
        v, g = f(theta)
        g.block_until_ready()
        return [v, *g]

    return call


def _cell(row: dict, key: str, width: int = 9) -> str:
    return f"{row[key][0]:{width}.2f}" if key in row else f"{'-':>{width}}"


def _rel(row: dict, key: str, ref: float, width: int = 9) -> str:
    if key not in row:
        return f"{'-':>{width}}"
    return f"{abs(row[key][1] - ref) / abs(ref):{width}.1e}"


def gradient_table(sizes, dense_max):
    print(f"\n1. one log density + gradient (ms)   [{load()}]")
    head = (
        f"{'nu':>4} {'n':>7} | {'qs':>9} {'dense':>9} {'celerite2':>10} {'tinygp':>9} |"
        f" {'rel dense':>9} {'rel c2':>9} {'rel tinygp':>10}"
    )
    print(head)
    print("-" * len(head))
    for nu in (1.5, 2.5):
        for n in sizes:
            x, y = data(n)
            repeats = max(3, int(3e5 / n))
            f_qs = logp_dlogp(model_qs(x, y, nu), THETA, "NUMBA")
            t_qs = best_time(f_qs, repeats)
            ref = float(f_qs()[0])
            row = {}
            for name, build in (("dense", model_dense), ("celerite2", model_celerite)):
                if name == "dense" and n > dense_max:
                    continue
                m = build(x, y, nu)
                if m is None:
                    continue
                f = logp_dlogp(m, THETA, "NUMBA")
                row[name] = (best_time(f, max(2, repeats // 3)), float(f()[0]))
            f_tg = tinygp_fn(x, y, nu)
            if f_tg is not None:
                row["tinygp"] = (best_time(f_tg, repeats), float(f_tg()[0]))

            print(
                f"{nu:4.1f} {n:7d} | {t_qs:9.2f} {_cell(row, 'dense')} "
                f"{_cell(row, 'celerite2', 10)} {_cell(row, 'tinygp')} | {_rel(row, 'dense', ref)} "
                f"{_rel(row, 'celerite2', ref)} {_rel(row, 'tinygp', ref, 10)}",
                flush=True,
            )
    print(
        "  '-': not run (dense above --dense-max; celerite2 has no Matérn-5/2; celerite2 or tinygp "
        "not importable)"
    )


def _gpr_fn(n: int, kernel: str, structure: str, mode):
    x, y = data(n)
    gp = bayes_gp.GPRegression(x, y, kernel, structure=structure)
    assert gp.quasiseparable == (structure == "quasiseparable")
    theta = {name: 1.0 for name in gp.hyperparameters}
    return logp_dlogp(gp.model, theta, mode)


def gpr_table(sizes, dense_max):
    from bayes_gp.linalg import EAGER_MODE

    print(f"\n0. GPRegression: one log density + gradient (ms), dense vs quasiseparable [{load()}]")
    head = f"{'kernel':>20} {'mode':>6} {'n':>6} | {'quasisep':>9} {'dense':>10} | {'rel':>8}"
    print(head)
    print("-" * len(head))
    for kernel in ("matern32", "matern32 + matern12"):
        for mode_name, mode in (("NUMBA", "NUMBA"), ("EAGER", EAGER_MODE)):
            faster = []
            for n in sizes:
                repeats = max(3, int(3e4 / n))
                f_qs = _gpr_fn(n, kernel, "quasiseparable", mode)
                t_qs = best_time(f_qs, repeats)
                ref = float(f_qs()[0])
                if n <= dense_max:
                    f_de = _gpr_fn(n, kernel, "dense", mode)
                    reps = max(1, min(repeats, int(2e3 / max(n / 100.0, 1.0) ** 3)))
                    t_de = best_time(f_de, reps)
                    rel = abs(float(f_de()[0]) - ref) / abs(ref)
                    faster.append((n, t_qs < t_de))
                    dense, rel_s = f"{t_de:10.3f}", f"{rel:8.1e}"
                else:
                    dense, rel_s = f"{'-':>10}", f"{'-':>8}"
                print(
                    f"{kernel:>20} {mode_name:>6} {n:6d} | {t_qs:9.3f} {dense} | {rel_s}",
                    flush=True,
                )
            cross = next(
                (n for i, (n, _) in enumerate(faster) if all(f for _, f in faster[i:])), None
            )
            print(f"{'':>20} {mode_name:>6} crossover (quasiseparable faster from n =) {cross}")
    print(f"  QUASISEP_MIN_N = {QUASISEP_MIN_N} (structure=None switches from there)")


_FIRST = """
import time, numpy as np, bayes_gp
t0 = time.perf_counter()
rng = np.random.default_rng({n})
x = rng.uniform(0.0, {n} / 10.0, {n}); y = np.sin(x / 3.0) + 0.3 * rng.normal(size={n})
gp = bayes_gp.GPRegression(x, y, "matern32", structure="{structure}")
fit = gp.fit_map(n_restarts=5, prior=False, random_seed=1)
gp.predict(np.linspace(0.0, {n} / 10.0, 100), fit)
gp.point_loo(fit)
print(time.perf_counter() - t0, fit.log_marginal_likelihood)
"""


def first_fit(n: int):
    print(f"\n0b. first fit, prediction and LOO in a fresh process, n = {n}   [{load()}]")
    with tempfile.TemporaryDirectory() as cache:
        runs = (
            ("dense", "dense", None),
            ("quasiseparable, cold numba cache", "quasiseparable", cache),
            ("quasiseparable, warm numba cache", "quasiseparable", cache),
        )
        for label, structure, numba_cache in runs:
            env = dict(os.environ)
            if numba_cache is not None:
                env["NUMBA_CACHE_DIR"] = numba_cache
            out = subprocess.run(
                [sys.executable, "-c", _FIRST.format(n=n, structure=structure)],
                env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            secs, lml = out.stdout.split()[-2:]
            print(f"  {label:>34}: {float(secs):6.1f} s   (log marginal likelihood {lml})")


def fit(n: int):
    print(f"\n2. ML-II fit, Matérn-5/2, n = {n}   [{load()}]")
    x, y = data(n, seed=1)
    t0 = time.perf_counter()
    model = model_qs(x, y, 2.5)
    lp = model.logp(vars=model.observed_RVs, jacobian=False)
    wrt = model.value_vars  # log eta, log ell, log sigma
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = pytensor.function(wrt, [lp, *pt.grad(lp, wrt)], trust_input=True)
    names = [v.name for v in wrt]
    calls = [0]

    def objective(theta):
        calls[0] += 1
        out = f(*[np.asarray(t) for t in theta])
        return -float(out[0]), -np.array([float(g) for g in out[1:]])

    start = np.log([1.0, 1.0, 1.0])
    objective(start)
    t_compile = time.perf_counter() - t0
    t1 = time.perf_counter()
    res = minimize(
        objective, start, jac=True, method="L-BFGS-B", options={"ftol": 1e-15, "gtol": 1e-3}
    )
    t_opt = time.perf_counter() - t1
    est = {
        k.removesuffix("_log__"): round(float(v), 4)
        for k, v in zip(names, np.exp(res.x), strict=True)
    }
    print(
        f"  build + compile + first call {t_compile:.1f} s; L-BFGS-B {t_opt:.1f} s, "
        f"{calls[0] - 1} evaluations ({t_opt / max(calls[0] - 1, 1) * 1e3:.0f} ms each)"
    )
    print(
        f"  total {t_compile + t_opt:.1f} s; converged={res.success}; log p = {-res.fun:.2f}; "
        f"|grad| = {np.max(np.abs(res.jac)):.1e}; estimate {est}"
    )
    x_new = np.linspace(0.0, n / 10.0, 1000)
    term = MaternTerm(2.5, eta=est["eta"], ls=est["ell"])
    t2 = time.perf_counter()
    quasisep_predict(x, y, x_new, term, est["sigma"] ** 2)
    print(
        f"  predictive mean and variance at 1000 new inputs (RTS smoother): "
        f"{time.perf_counter() - t2:.1f} s"
    )


def nuts(n: int):
    print(f"\n3. NUTS (nutpie), Matérn-3/2, n = {n}, 2 chains x (500 + 500)   [{load()}]")
    x, y = data(n, seed=2)
    model = model_qs(x, y, 1.5)
    t0 = time.perf_counter()
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pm.sample(
            draws=500, tune=500, chains=2, nuts_sampler="nutpie", progressbar=False, random_seed=3
        )
    wall = time.perf_counter() - t0
    st = idata.sample_stats
    steps = int(st["n_steps"].sum())
    post = {v: float(idata.posterior[v].mean()) for v in ("eta", "ell", "sigma")}
    print(
        f"  wall {wall:.1f} s (compile included); {steps} leapfrog steps after tuning "
        f"({float(st['n_steps'].mean()):.1f} per draw); divergences {int(st['diverging'].sum())}"
    )
    print(f"  posterior means {post}   [{load()}]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    ap.add_argument("--dense-max", type=int, default=1000)
    ap.add_argument("--fit-n", type=int, default=1_000_000)
    ap.add_argument("--nuts-n", type=int, default=100_000)
    ap.add_argument("--skip-fit", action="store_true")
    ap.add_argument("--skip-nuts", action="store_true")
    ap.add_argument(
        "--gpr-sizes",
        type=int,
        nargs="+",
        default=[8, 16, 24, 32, 48, 64, 128, 500, 1000, 2000, 5000, 20_000],
    )
    ap.add_argument("--gpr-dense-max", type=int, default=5000)
    ap.add_argument("--skip-gpr", action="store_true")
    ap.add_argument("--first-n", type=int, default=500)
    ap.add_argument("--skip-first", action="store_true")
    ap.add_argument("--skip-gradient", action="store_true")
    args = ap.parse_args()
    threadpool_limits(limits=1, user_api="blas")
    versions = [
        f"numpy {np.__version__}",
        f"pytensor {pytensor.__version__}",
        f"pymc {pm.__version__}",
    ]
    for mod in ("celerite2", "tinygp", "jax", "nutpie", "numba"):
        try:
            versions.append(f"{mod} {__import__(mod).__version__}")
        except ImportError:
            versions.append(f"{mod} not installed")
    print(f"quasiseparable GP  {date.today()}  {platform.platform()}  {os.cpu_count()} CPUs")
    print(", ".join(versions) + f", bayes_gp {bayes_gp.__version__}")
    print("threads: BLAS 1, XLA 1, numba kernels 1 (sequential recursion); nutpie 1 per chain")
    t0 = time.perf_counter()
    if not args.skip_gpr:
        gpr_table(args.gpr_sizes, args.gpr_dense_max)
    if not args.skip_first:
        first_fit(args.first_n)
    if not args.skip_gradient:
        gradient_table(args.sizes, args.dense_max)
    if not args.skip_fit:
        fit(args.fit_n)
    if not args.skip_nuts:
        nuts(args.nuts_n)
    print(f"\nwhole run {time.perf_counter() - t0:.0f} s   [{load()}]")


if __name__ == "__main__":
    main()
