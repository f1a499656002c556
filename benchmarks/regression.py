"""GP regression end to end: bayes_gp's NUTS backends and type-II fits against baselines.

Two parts, on the same simulated data (fixed seed):

* ``nuts``: :meth:`bayes_gp.GPRegression.sample` (squared-exponential kernel, ``mean="zero"``)
  with ``sampler="nutpie"``, ``"pymc"`` and ``"numpyro"`` against a hand-written numpyro model of
  the same GP (plain JAX Gram matrix, ``MultivariateNormal`` likelihood, the same priors and
  jitter, ``MCMC(NUTS)``). Equal conditions on every side: chains in parallel, one thread per
  chain (nutpie's threads with one BLAS thread; one XLA host device per chain with one XLA
  thread: ``--hand-chains`` and ``--xla-threads`` change that). Reported: wall time (model
  construction, compilation, sampling and, for bayes_gp, the per-draw leave-one-out
  ``log_likelihood`` group that ``sample`` always adds) and the minimum bulk ESS over
  ``(ls, eta, sigma)`` per second of wall time.
* ``map``: :meth:`bayes_gp.GPRegression.fit_map` (ML-II, ``prior=False``, 5 starts) against
  scikit-learn's ``GaussianProcessRegressor(ConstantKernel * RBF + WhiteKernel)`` with 4 restarts,
  both zero-mean: wall time and the log marginal likelihood reached.

Data: 1-D inputs uniform on [0, 10], outputs from a GP with a squared-exponential kernel
(``ls=1.2, eta=1``) plus N(0, 0.3²) noise; and a 5-D problem (inputs uniform on [0, 10]^5) where
only the first two inputs matter (ARD length-scales 1.5 and 2.5). BLAS is pinned to one thread.

Run ``python benchmarks/regression.py --help`` for the options; ``--quick`` is a smoke run.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import sys
import time
import traceback
import warnings
from datetime import date


# Equal conditions (issue 19): one thread per chain on every side, chains in parallel on every
# side. nutpie runs its chains in threads with BLAS pinned to one thread; XLA gets one thread
# per computation and one host device per chain, so numpyro's chains run in parallel (pmap).
# ``--xla-threads default`` (read here, before JAX starts) keeps XLA's own thread pool.
def _xla_flags(argv: list[str]) -> str:
    threads = "1"
    for i, arg in enumerate(argv):
        if arg == "--xla-threads" and i + 1 < len(argv):
            threads = argv[i + 1]
        elif arg.startswith("--xla-threads="):
            threads = arg.split("=", 1)[1]
    flags = "--xla_force_host_platform_device_count=2"
    if threads == "1":
        flags += " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    return flags


os.environ.setdefault("XLA_FLAGS", _xla_flags(sys.argv[1:]))

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)  # before any JAX array exists; PyMC's path needs it too

import arviz as az  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import numpyro  # noqa: E402
import numpyro.distributions as dist  # noqa: E402
import nutpie  # noqa: E402
import pymc as pm  # noqa: E402
import pytensor  # noqa: E402
import scipy.linalg  # noqa: E402, F401  (loads SciPy's BLAS before pinning it)
import sklearn  # noqa: E402
import xarray as xr  # noqa: E402
from numpyro.infer import MCMC, NUTS  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.gaussian_process import GaussianProcessRegressor  # noqa: E402
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel  # noqa: E402
from threadpoolctl import threadpool_info, threadpool_limits  # noqa: E402

from bayes_gp import GPRegression  # noqa: E402

PARAMS = ("ls", "eta", "sigma")
BACKENDS = ("nutpie", "pymc", "numpyro", "hand")  # "hand": the hand-written numpyro model
TRUE_1D = {"ls": 1.2, "eta": 1.0, "sigma": 0.3}
TRUE_ARD_LS = (1.5, 2.5)  # of the two relevant inputs; the other three are ignored
ARD_DIM = 5
CHAIN_METHOD = ["parallel"]  # the hand-written model's chains (``--hand-chains``)


# ---------------------------------------------------------------------------------------- data
def _gp_draw(X: np.ndarray, ls: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw of a zero-mean SE GP with ``eta = 1`` and noise ``sigma = 0.3`` at ``X``."""
    d2 = np.sum(((X[:, None, :] - X[None, :, :]) / ls) ** 2, axis=-1)
    K = TRUE_1D["eta"] ** 2 * np.exp(-0.5 * d2) + 1e-8 * np.eye(len(X))
    f = np.linalg.cholesky(K) @ rng.standard_normal(len(X))
    return f + TRUE_1D["sigma"] * rng.standard_normal(len(X))


def simulate_1d(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """1-D data set of size ``n`` (generator seeded with ``(seed, n)``).

    Returns
    -------
    x : ndarray, shape (n,)
        Sorted inputs, uniform on [0, 10].
    y : ndarray, shape (n,)
    """
    rng = np.random.default_rng([seed, n])
    x = np.sort(rng.uniform(0.0, 10.0, n))
    return x, _gp_draw(x[:, None], np.array([TRUE_1D["ls"]]), rng)


def simulate_ard(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """5-D data set of size ``n`` where only inputs 0 and 1 matter.

    Returns
    -------
    X : ndarray, shape (n, 5)
        Inputs uniform on [0, 10]^5.
    y : ndarray, shape (n,)
    """
    rng = np.random.default_rng([seed, n, ARD_DIM])
    X = rng.uniform(0.0, 10.0, (n, ARD_DIM))
    return X, _gp_draw(X[:, :2], np.array(TRUE_ARD_LS), rng)


# ---------------------------------------------------------------------------------------- NUTS
def _error(exc: BaseException) -> str:
    """One line describing an exception, for the tables."""
    traceback.print_exc()
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:70]


def min_bulk_ess(posterior: xr.Dataset) -> float:
    """Minimum bulk ESS over ``PARAMS`` (ArviZ, dims ``chain`` and ``draw``)."""
    ess = az.ess(posterior[list(PARAMS)], method="bulk")
    return float(min(float(ess[name]) for name in PARAMS))


def hand_model(d2: jnp.ndarray, y: jnp.ndarray, mu_ls: float, sd_y: float, jitter: float):
    """The hand-written numpyro model: the GP of ``GPRegression(..., "expquad", mean="zero")``.

    Parameters
    ----------
    d2 : array, shape (n, n)
        Squared distances between the inputs.
    y : array, shape (n,)
    mu_ls, sd_y : float
        Prior parameters: ``ls ~ LogNormal(mu_ls, 1)``, ``eta, sigma ~ HalfNormal(sd_y)``.
    jitter : float
        Added to the diagonal (``GPRegression.jitter``).
    """
    ls = numpyro.sample("ls", dist.LogNormal(mu_ls, 1.0))
    eta = numpyro.sample("eta", dist.HalfNormal(sd_y))
    sigma = numpyro.sample("sigma", dist.HalfNormal(sd_y))
    K = eta**2 * jnp.exp(-0.5 * d2 / ls**2) + (sigma**2 + jitter) * jnp.eye(y.shape[0])
    numpyro.sample("y", dist.MultivariateNormal(jnp.zeros(y.shape[0]), K), obs=y)


def run_hand(x, y, tune: int, draws: int, chains: int, seed: int) -> dict:
    """NUTS on :func:`hand_model` with ``GPRegression``'s priors and jitter.

    Returns
    -------
    dict
        ``wall`` (s), ``ess`` (min bulk ESS), ``div`` (divergences), ``steps`` (mean leapfrog
        steps per draw).
    """
    t0 = time.perf_counter()
    gp = GPRegression(x, y, "expquad", mean="zero")  # only for the priors' scale and the jitter
    mu_ls = float(np.log(np.mean(gp.scale.x_range) / 3.0))
    d2 = jnp.asarray((x[:, None] - x[None, :]) ** 2)
    kernel = NUTS(hand_model, target_accept_prob=0.9)  # bayes_gp's default target_accept
    mcmc = MCMC(
        kernel,
        num_warmup=tune,
        num_samples=draws,
        num_chains=chains,
        chain_method=CHAIN_METHOD[0],
        progress_bar=False,
    )
    mcmc.run(
        jax.random.PRNGKey(seed),
        d2,
        jnp.asarray(y),
        mu_ls,
        gp.scale.y_sd,
        gp.jitter,
        extra_fields=("diverging", "num_steps"),
    )
    samples = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
    extra = mcmc.get_extra_fields(group_by_chain=True)
    wall = time.perf_counter() - t0
    post = xr.Dataset({k: (("chain", "draw"), samples[k]) for k in PARAMS})
    return {
        "wall": wall,
        "ess": min_bulk_ess(post),
        "div": int(np.sum(extra["diverging"])),
        "steps": float(np.mean(extra["num_steps"])),
    }


def run_bayes_gp(x, y, sampler: str, tune: int, draws: int, chains: int, seed: int) -> dict:
    """``GPRegression(x, y, "expquad", mean="zero").sample(...)`` with one backend.

    Returns
    -------
    dict
        As :func:`run_hand`, plus ``loglik``: seconds spent in the per-draw leave-one-out
        log-likelihood that ``sample`` adds after NUTS (part of ``wall``).
    """
    t0 = time.perf_counter()
    gp = GPRegression(x, y, "expquad", mean="zero")
    # Time the post-processing that the hand-written model does not do: ``sample`` passes
    # ``self._pointwise_loo`` to ``add_log_likelihood``, so an instance attribute shadows it.
    inner, spent = gp._pointwise_loo, [0.0]

    def timed(values):
        t = time.perf_counter()
        out = inner(values)
        spent[0] += time.perf_counter() - t
        return out

    gp._pointwise_loo = timed
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpyro: "not enough devices to run parallel chains"
        idata = gp.sample(draws=draws, tune=tune, chains=chains, sampler=sampler, random_seed=seed)
    wall = time.perf_counter() - t0
    stats = idata["sample_stats"]
    steps = stats["n_steps"] if "n_steps" in stats else None
    return {
        "wall": wall,
        "loglik": spent[0],
        "ess": min_bulk_ess(idata["posterior"].to_dataset()),
        "div": int(np.asarray(stats["diverging"]).sum()),
        "steps": float(np.mean(steps)) if steps is not None else float("nan"),
    }


def run_nuts_case(backend: str, x, y, tune: int, draws: int, chains: int, seed: int) -> dict:
    """One (backend, N) run; a failure is recorded in ``error`` instead of raised."""
    row = {"backend": backend, "n": len(x), "tune": tune, "draws": draws}
    try:
        if backend == "hand":
            row.update(run_hand(x, y, tune, draws, chains, seed))
        else:
            row.update(run_bayes_gp(x, y, backend, tune, draws, chains, seed))
        row["ess_s"] = row["ess"] / row["wall"]
    except Exception as exc:  # a failing backend goes into the table
        row["error"] = _error(exc)
    row["load"] = os.getloadavg()[0]
    return row


def format_nuts(rows: list[dict]) -> str:
    """Table of the NUTS runs with ESS/s ratios against the hand-written model at the same N."""
    head = (
        f"{'N':>5} {'backend':<8}{'tune/draws':>11} | {'wall s':>7}{'loglik s':>9} | "
        f"{'minESS':>7}{'ESS/s':>8}{'div':>5}{'steps':>6} | {'ratio':>6}{'ratio*':>7} | {'load':>5}"
    )
    lines = [head, "-" * len(head)]
    hand = {r["n"]: r for r in rows if r["backend"] == "hand" and "error" not in r}
    for r in rows:
        lead = f"{r['n']:>5} {r['backend']:<8}{str(r['tune']) + '/' + str(r['draws']):>11} | "
        if "error" in r:
            lines.append(lead + f"FAILED {r['error']}")
            continue
        loglik = r.get("loglik", 0.0)
        h = hand.get(r["n"])
        ratio = r["ess_s"] / h["ess_s"] if h else float("nan")
        ratio_nuts = r["ess"] / (r["wall"] - loglik) / h["ess_s"] if h else float("nan")
        lines.append(
            lead + f"{r['wall']:>7.1f}{loglik:>9.1f} | {r['ess']:>7.0f}{r['ess_s']:>8.2f}"
            f"{r['div']:>5d}{r['steps']:>6.1f} | {ratio:>6.2f}{ratio_nuts:>7.2f} | {r['load']:>5.1f}"
        )
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------- MAP
def run_map_case(name: str, X, y, seed: int) -> dict:
    """bayes_gp ML-II (``fit_map(5, prior=False)``) against scikit-learn on one data set.

    Returns
    -------
    dict
        Wall times (``t_bg``, ``t_sk``, s), log marginal likelihoods (``lml_bg``, ``lml_sk``) and
        the fitted hyperparameters (``p_bg``, ``p_sk``: ls, eta, sigma); ``err_*`` on failure.
    """
    ard = X.ndim == 2 and X.shape[1] > 1
    row = {"case": name, "n": len(y)}
    try:
        t0 = time.perf_counter()
        gp = GPRegression(X, y, "expquad", ard=ard, mean="zero")
        fit = gp.fit_map(n_restarts=5, prior=False, random_seed=seed)
        row["t_bg"] = time.perf_counter() - t0
        row["lml_bg"] = fit.log_marginal_likelihood
        row["p_bg"] = tuple(np.atleast_1d(fit.params[k]) for k in PARAMS)
        jitter = gp.jitter
    except Exception as exc:
        row["err_bg"] = _error(exc)
        jitter = 1e-10 * float(np.var(y))
    try:
        X2 = X.reshape(len(y), -1)
        kernel = ConstantKernel(1.0) * RBF(np.ones(X2.shape[1]) if ard else 1.0) + WhiteKernel(1.0)
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sk = GaussianProcessRegressor(
                kernel, alpha=jitter, n_restarts_optimizer=4, normalize_y=False, random_state=seed
            ).fit(X2, y)
        row["t_sk"] = time.perf_counter() - t0
        row["warn_sk"] = sum(issubclass(w.category, ConvergenceWarning) for w in caught)
        row["lml_sk"] = float(sk.log_marginal_likelihood_value_)
        k = sk.kernel_
        row["p_sk"] = (
            np.atleast_1d(k.k1.k2.length_scale),
            np.sqrt([k.k1.k1.constant_value]),
            np.sqrt([k.k2.noise_level]),
        )
    except Exception as exc:
        row["err_sk"] = _error(exc)
    return row


def format_map(rows: list[dict]) -> str:
    """Table of the type-II fits, then the fitted hyperparameters."""
    head = (
        f"{'case':<7}{'N':>6} | {'bayes_gp s':>10}{'sklearn s':>10}{'bg/sk':>7} | "
        f"{'LML bayes_gp':>13}{'LML sklearn':>13}{'bg - sk':>10} | {'sk conv. warnings':>17}"
    )
    lines = [head, "-" * len(head)]
    nan = float("nan")
    for r in rows:
        t_bg, t_sk = r.get("t_bg", nan), r.get("t_sk", nan)
        l_bg, l_sk = r.get("lml_bg", nan), r.get("lml_sk", nan)
        lines.append(
            f"{r['case']:<7}{r['n']:>6} | {t_bg:>10.2f}{t_sk:>10.2f}{t_bg / t_sk:>7.2f} | "
            f"{l_bg:>13.3f}{l_sk:>13.3f}{l_bg - l_sk:>10.2e} | {r.get('warn_sk', '-'):>17}"
        )
        for key in ("err_bg", "err_sk"):
            if key in r:
                lines.append(f"{'':<13} FAILED ({key[4:]}): {r[key]}")
    lines.append("\nfitted (ls; eta; sigma):")
    for r in rows:
        for key, who in (("p_bg", "bayes_gp"), ("p_sk", "sklearn")):
            if key in r:
                ls, eta, sigma = (np.array2string(v, precision=3) for v in r[key])
                lines.append(f"  {r['case']:<6}{r['n']:>5} {who:<9} {ls}; {eta}; {sigma}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", choices=("nuts", "map", "all"), default="all")
    p.add_argument("--sizes", type=int, nargs="+", default=[100, 300, 1000], help="NUTS sizes N")
    p.add_argument("--map-sizes", type=int, nargs="+", default=[300, 1000, 2000])
    p.add_argument("--ard-n", type=int, default=500, help="size of the 5-D ARD problem (map)")
    p.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    p.add_argument("--chains", type=int, default=2)
    p.add_argument("--tune", type=int, default=500)
    p.add_argument("--draws", type=int, default=500)
    p.add_argument(
        "--large-n",
        type=int,
        default=1000,
        help="from this N on, NUTS runs --large-iters tuning and --large-iters kept draws",
    )
    p.add_argument("--large-iters", type=int, default=50)
    p.add_argument(
        "--hand-chains",
        choices=("parallel", "sequential"),
        default="parallel",
        help="the hand-written numpyro model's chain_method (parallel: one host device each)",
    )
    p.add_argument(
        "--xla-threads",
        choices=("1", "default"),
        default="1",
        help="XLA's threads per computation (read before JAX starts; default: its own pool)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="smoke run with tiny sizes and chains")
    p.add_argument(
        "--numba-cache",
        action="store_true",
        help="keep PyTensor's on-disk numba cache on (default: off, so compile times are cold)",
    )
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.map_sizes, args.ard_n = [30, 60], [50, 100], 60
        args.tune = args.draws = 60
        args.large_n, args.large_iters = 60, 40
    return args


def main(argv: list[str] | None = None) -> None:
    """Run the selected parts and print the header and tables."""
    args = parse_args(argv)
    CHAIN_METHOD[0] = args.hand_chains
    pytensor.config.numba__cache = args.numba_cache
    logging.getLogger("pymc").setLevel(logging.WARNING)  # no per-run "Sampling ..." lines
    numpyro.set_platform("cpu")
    threadpool_limits(limits=1, user_api="blas")
    libs = ", ".join(
        sorted(
            {
                f"{i['prefix']}={i['num_threads']}"
                for i in threadpool_info()
                if i["user_api"] == "blas"
            }
        )
    )
    t_start = time.perf_counter()
    print(f"regression benchmark  {date.today().isoformat()}  {platform.platform()}")
    print(
        f"CPU: {os.cpu_count()} logical CPUs; BLAS pinned to 1 thread ({libs}); "
        f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}; JAX devices {len(jax.devices())}; "
        f"hand-written chains {args.hand_chains}"
    )
    print(
        f"numpy {np.__version__}, pymc {pm.__version__}, pytensor {pytensor.__version__} "
        f"(numba cache {pytensor.config.numba__cache}), nutpie {nutpie.__version__}, "
        f"numpyro {numpyro.__version__}, jax {jax.__version__}, arviz {az.__version__}, "
        f"scikit-learn {sklearn.__version__}"
    )
    print(f"seed={args.seed}, load average at start {os.getloadavg()[0]:.1f}\n", flush=True)

    if args.part in ("nuts", "all"):
        # One-off process costs (imports, JAX backend start, numba's first JIT) are paid here.
        xw, yw = simulate_1d(20, args.seed + 1)
        for backend in args.backends:
            run_nuts_case(backend, xw, yw, 20, 20, 1, args.seed)
        rows = []
        for n in args.sizes:
            x, y = simulate_1d(n, args.seed)
            tune, draws = (
                (args.large_iters, args.large_iters)
                if n >= args.large_n
                else (args.tune, args.draws)
            )
            for backend in args.backends:
                rows.append(run_nuts_case(backend, x, y, tune, draws, args.chains, args.seed))
                r = rows[-1]
                status = r.get("error") or f"{r['wall']:.1f} s, min ESS {r['ess']:.0f}"
                print(f"  done NUTS N={n} {backend}: {status}", flush=True)
            # Each size's rows as soon as they exist: a run stopped later still leaves them.
            print(format_nuts([r for r in rows if r["n"] == n]) + "\n", flush=True)
        print(f"\nNUTS, 1-D SE kernel, zero mean, {args.chains} chains\n")
        print(format_nuts(rows))
        print(
            "\nwall = construction + compilation + sampling (+ bayes_gp's per-draw LOO "
            "log_likelihood, the 'loglik' column).\nminESS = min bulk ESS over (ls, eta, sigma); "
            "ESS/s = minESS / wall; div = divergences; steps = mean leapfrog steps per draw.\n"
            "ratio = ESS/s / ESS/s of the hand-written model; ratio* = the same with bayes_gp's "
            "loglik time left out.\nload = 1-min load average after the run (2 = both cores busy).",
            flush=True,
        )

    if args.part in ("map", "all"):
        xw, yw = simulate_1d(20, args.seed + 1)
        run_map_case("warmup", xw, yw, args.seed)
        rows = []
        for n in args.map_sizes:
            rows.append(run_map_case("1-D", *simulate_1d(n, args.seed), args.seed))
            print(f"  done ML-II 1-D N={n}", flush=True)
        rows.append(run_map_case("5-D ARD", *simulate_ard(args.ard_n, args.seed), args.seed))
        print(f"  done ML-II 5-D ARD N={args.ard_n}", flush=True)
        print("\nML-II (type-II maximum likelihood), SE kernel, zero mean\n")
        print(format_map(rows))
        print(
            "\nbayes_gp: fit_map(n_restarts=5, prior=False) incl. model construction; sklearn: "
            "ConstantKernel*RBF + WhiteKernel,\nn_restarts_optimizer=4, alpha = GPRegression.jitter, "
            "normalize_y=False. bg - sk > 0: bayes_gp found the higher LML."
        )
    print(
        f"\ntotal wall time {time.perf_counter() - t_start:.0f} s, "
        f"load average at end {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
