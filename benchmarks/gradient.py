"""One NUTS gradient of the exact GP log marginal likelihood, against the LAPACK floor.

For N = 100 ... 2000 (1-D inputs, squared-exponential kernel, three hyperparameters ``ls``,
``eta``, ``sigma``), times one evaluation of ``log p(y | theta)`` and its gradient:

* ``bayes_gp``: the log density of :class:`bayes_gp.GPRegression`'s PyMC model (the fused
  :class:`bayes_gp.solvers.likelihood.GPLogp` Op: one ``potrf``/``potrs``, ``potri`` for the
  gradient, R&W eq. 5.9), compiled with PyTensor's numba backend as bayes_gp compiles it for
  nutpie (with the kernel's vectorised exponential, :mod:`bayes_gp.kernels.vector_exp`) and
  with its C backend;
* ``pm.gp``: the same model written with ``pm.gp.Marginal`` (a ``pm.MvNormal`` differentiated
  through its Cholesky factor), same backends;
* ``jax``: a hand-written JAX function of the same GP (``jax.value_and_grad`` of
  ``MultivariateNormal.log_prob`` built from ``jnp.linalg.cholesky``, as a numpyro user writes it),
  jitted;
* ``floor``: SciPy LAPACK ``dpotrf`` + ``dpotrs`` + ``dpotri`` on a precomputed matrix, the linear
  algebra any exact gradient needs (``N^3`` flops), without the kernel.

All with one BLAS thread. Each time is the minimum over repeated calls after a warm-up call.
Prints milliseconds and ratios to the floor, and the largest difference between the gradients.

``--in-nutpie`` (issue 19) then times the same gradient where NUTS runs it: nutpie's compiled
model of ``GPRegression`` in a real run (``--nutpie-iters`` tuning + kept draws; sampling wall
time divided by the leapfrog steps of the longer chain, tuning included), one chain alone and
two chains in parallel on 2 cores, against the standalone numba figure.

    python benchmarks/gradient.py                 # N in 100 300 1000 2000
    python benchmarks/gradient.py --sizes 100 300 # a subset
    python benchmarks/gradient.py --sizes 300 1000 --in-nutpie
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from datetime import date

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pymc as pm  # noqa: E402
import pytensor  # noqa: E402
from _timing import best_time, logp_dlogp  # noqa: E402
from scipy.linalg import lapack  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

import bayes_gp  # noqa: E402
from bayes_gp.kernels.vector_exp import NUMBA_MODE  # noqa: E402

THETA = {"ls": 1.2, "eta": 1.0, "sigma": 0.3}


def data(n: int, seed: int = 0):
    rng = np.random.default_rng(seed + n)
    X = np.sort(rng.uniform(0, 10, n))
    return X, np.sin(X) + 0.3 * rng.normal(size=n)


def jax_value_and_grad(X, y, jitter):
    d2 = jnp.asarray((X[:, None] - X[None, :]) ** 2)
    yj = jnp.asarray(y)
    n = X.size

    def logp(log_theta):
        ls, eta, sigma = jnp.exp(log_theta)
        C = eta**2 * jnp.exp(-0.5 * d2 / ls**2) + (sigma**2 + jitter) * jnp.eye(n)
        L = jnp.linalg.cholesky(C)
        a = jax.scipy.linalg.cho_solve((L, True), yj)
        return -0.5 * yj @ a - jnp.sum(jnp.log(jnp.diag(L))) - 0.5 * n * jnp.log(2 * jnp.pi)

    vg = jax.jit(jax.value_and_grad(logp))
    x = jnp.log(jnp.array([THETA["ls"], THETA["eta"], THETA["sigma"]]))
    return lambda: jax.block_until_ready(vg(x))


def _run_ms_per_gradient(compiled, chains: int, iters: int) -> tuple[float, int, float]:
    """``(ms per gradient, leapfrog steps of the longer chain, wall s)`` of one nutpie run."""
    import nutpie

    t0 = time.perf_counter()
    idata = nutpie.sample(
        compiled, draws=iters, tune=iters, chains=chains, cores=chains, seed=1,
        save_warmup=True, progress_bar=False,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    steps = np.asarray(idata["sample_stats"]["n_steps"]).sum(axis=1) + np.asarray(
        idata["warmup_sample_stats"]["n_steps"]
    ).sum(axis=1)
    return 1e3 * wall / float(steps.max()), int(steps.max()), wall


def in_nutpie(n: int, standalone: float, iters: int) -> str:
    """One row of the ``--in-nutpie`` table (module docstring); ``standalone`` in ms."""
    import nutpie

    X, y = data(n)
    compiled = nutpie.compile_pymc_model(
        bayes_gp.GPRegression(X, y, "expquad", mean="zero").model
    )
    one, _, _ = _run_ms_per_gradient(compiled, 1, iters)
    two, steps, wall = _run_ms_per_gradient(compiled, 2, iters)
    return (
        f"{n:5d} | {standalone:10.3f} {one:10.3f} {two:10.3f} | "
        f"{one / standalone:6.2f} {two / standalone:6.2f} | {steps:6d} {wall:7.1f}"
    )


def native_logp_dlogp(model, theta):
    """The C log density and gradient of ``model`` (bayes_gp.inference.native_gp) at
    ``theta`` (ls, eta, sigma), called through ctypes as nutpie calls it."""
    import ctypes

    from bayes_gp.inference import native_gp

    cm, reason = native_gp.compile_native(model)
    if cm is None:
        raise RuntimeError(reason)
    fn = cm.native_library.gp_logp
    fn.restype = ctypes.c_int64
    fn.argtypes = [ctypes.c_uint64] + [ctypes.c_void_p] * 4
    x = np.log([theta["ls"], theta["eta"], theta["sigma"]])
    grad, logp = np.zeros(3), np.zeros(1)
    args = (3, x.ctypes.data, grad.ctypes.data, logp.ctypes.data, cm.user_data.ctypes.data)

    def call(_keep=(cm, x, grad, logp)):  # the arrays the addresses point into, kept alive
        return fn(*args)

    return call


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 300, 1000, 2000])
    ap.add_argument("--modes", nargs="+", default=["NUMBA", "FAST_RUN"])
    ap.add_argument("--in-nutpie", action="store_true", help="also time it inside nutpie")
    ap.add_argument("--native", action="store_true",
                    help="also time the C log density (bayes_gp.inference.native_gp)")  # fmt: skip
    ap.add_argument("--nutpie-iters", type=int, default=300, help="tuning = kept draws per chain")
    args = ap.parse_args()
    threadpool_limits(limits=1, user_api="blas")
    print(f"gradient  {date.today()}  {platform.platform()}")
    print(
        f"numpy {np.__version__}, pytensor {pytensor.__version__}, pymc {pm.__version__}, "
        f"jax {jax.__version__}, bayes_gp {bayes_gp.__version__}; BLAS threads 1\n"
    )
    cols = [f"bg {m}" for m in args.modes] + [f"pm {m}" for m in args.modes] + ["jax", "floor"]
    cols += ["bg C"] if args.native else []
    print(
        f"{'N':>5} |"
        + "".join(f" {c:>12}" for c in cols)
        + " | bg/floor  pm/bg  jax/bg | grad diff"
    )
    standalone: dict[int, float] = {}
    for n in args.sizes:
        X, y = data(n)
        ours = bayes_gp.GPRegression(X, y, "expquad", mean="zero")
        with pm.Model() as ref:
            ls = pm.LogNormal("ls", 0.0, 1.0)
            eta = pm.LogNormal("eta", 0.0, 1.0)
            sigma = pm.LogNormal("sigma", 0.0, 1.0)
            gp = pm.gp.Marginal(cov_func=eta**2 * pm.gp.cov.ExpQuad(1, ls=ls))
            gp.marginal_likelihood("y", X=X[:, None], y=y, sigma=sigma, jitter=ours.jitter)
        repeats = max(5, int(3000 / n))
        times: dict[str, float] = {}
        grads = []
        for mode in args.modes:
            # bayes_gp's model in the mode it is compiled with for nutpie (for "NUMBA": with
            # its vectorised exp, bayes_gp.kernels.vector_exp); pm.gp's in PyTensor's own
            ours_mode = NUMBA_MODE if mode == "NUMBA" else mode
            fb, fr = logp_dlogp(ours.model, THETA, ours_mode), logp_dlogp(ref, THETA, mode)
            grads += [np.asarray(fb()[1:]), np.asarray(fr()[1:])]
            times[f"bg {mode}"] = best_time(fb, repeats)
            times[f"pm {mode}"] = best_time(fr, repeats)
        times["jax"] = best_time(jax_value_and_grad(X, y, ours.jitter), repeats)
        C = THETA["eta"] ** 2 * np.exp(-0.5 * (X[:, None] - X[None, :]) ** 2 / THETA["ls"] ** 2)
        C += (THETA["sigma"] ** 2 + ours.jitter) * np.eye(n)

        def floor(C=C, y=y):
            L, _ = lapack.dpotrf(C, lower=1)
            lapack.dpotrs(L, y, lower=1)
            lapack.dpotri(L, lower=1)

        times["floor"] = best_time(floor, repeats)
        if args.native:
            times["bg C"] = best_time(native_logp_dlogp(ours.model, THETA), repeats)
        # the value variables are (ls, eta, sigma) in this order in both models
        gdiff = max(float(np.max(np.abs(g - grads[1]))) for g in grads)
        bg = times[f"bg {args.modes[0]}"]
        standalone[n] = times["bg NUMBA"] if "bg NUMBA" in times else bg
        print(
            f"{n:5d} |"
            + "".join(f" {times[c]:12.3f}" for c in cols)
            + f" | {bg / times['floor']:8.2f} {times[f'pm {args.modes[0]}'] / bg:6.2f}"
            + f" {times['jax'] / bg:7.2f} | {gdiff:.1e}",
            flush=True,
        )
    print(
        "\nms per log density + gradient (minimum over repeats); bg = bayes_gp.GPRegression's model,"
        "\npm = the same model through pm.gp.Marginal; ratios use the first mode; > 1 in pm/bg and"
        "\njax/bg: bayes_gp faster. floor = dpotrf + dpotrs + dpotri alone (no kernel evaluation);"
        "\nbg C = the same model's log density in C (--native, bayes_gp.inference.native_gp)."
    )
    if args.in_nutpie:
        print(f"\nIn nutpie (load average {os.getloadavg()[0]:.1f}):\n")
        print(
            f"{'N':>5} | {'alone ms':>10} {'1 chain':>10} {'2 chains':>10} | "
            f"{'1/alone':>6} {'2/alone':>6} | {'steps':>6} {'wall s':>7}"
        )
        for n in args.sizes:
            print(in_nutpie(n, standalone[n], args.nutpie_iters), flush=True)
        print(
            "\nalone = bg NUMBA above (PyTensor function, minimum); 1 chain / 2 chains = nutpie's"
            " sampling wall time\n(compiled beforehand) / leapfrog steps of the longer chain,"
            f" {args.nutpie_iters} tuning + {args.nutpie_iters} draws per chain, one chain alone /"
            " two in parallel\non 2 cores; steps and wall s of the two-chain run."
            f"\nload average at end {os.getloadavg()[0]:.1f}"
        )


if __name__ == "__main__":
    main()
