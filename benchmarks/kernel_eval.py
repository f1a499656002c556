"""Time one Gram matrix + length-scale gradient: bayes_gp vs PyMC vs scikit-learn.

For each kernel (squared exponential, Matérn 5/2; ARD length-scales), input size ``n`` and input
dimension ``D`` the script builds the same inputs (fixed seed) and measures the work that one
NUTS step does for a kernel: the Gram matrix :math:`K(\\ell)`, a scalar
:math:`v = \\sum_{ij} w_{ij} K_{ij}` for a fixed random weight matrix :math:`w` (a stand-in for
the upstream gradient of the marginal likelihood) and :math:`\\partial v / \\partial \\ell`.

* ``bayes_gp``: :class:`bayes_gp.kernels.ExpQuad` / :class:`~bayes_gp.kernels.Matern52`, which
  compute distances from exact coordinate differences (constant-folded when ``X`` is constant);
* ``pymc``: ``pm.gp.cov.ExpQuad`` / ``Matern52``, which use
  :math:`|x|^2 - 2x^\\top x' + |x'|^2` and ``sqrt(r2 + 1e-12)``;
* ``sklearn``: ``RBF`` / ``Matern(nu=2.5)`` with ``eval_gradient=True`` (gradient with respect to
  the log length-scales, contracted with :math:`w` and divided by :math:`\\ell` so that all three
  return the same numbers).

Both PyTensor functions are ``f(ls, w) -> (K, v, dv/dls)`` with ``X`` a NumPy constant, compiled
once with PyTensor's default backend (numba) and called with ``trust_input=True`` as PyMC's
samplers do. ``w`` is an input, not a constant, as the upstream gradient is in a model. Compile
times are cold (numba's on-disk cache is off unless ``--numba-cache``): the cache key includes the
constants, so a new data set compiles from scratch; a constant over 1 MB (bayes_gp's folded
``(n, n, D)`` differences for larger ``n``) makes the graph uncacheable anyway.

Run ``python benchmarks/kernel_eval.py --help`` for the options; ``--quick`` is a smoke run.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import platform
import statistics
import time
from collections.abc import Callable
from datetime import date

# BLAS is pinned to one thread. threadpoolctl does it after the imports (it only sees loaded
# libraries); without it the environment variables must be set before NumPy is imported.
HAVE_THREADPOOLCTL = importlib.util.find_spec("threadpoolctl") is not None
if not HAVE_THREADPOOLCTL:
    for _var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ[_var] = "1"

import numpy as np  # noqa: E402
import pymc as pm  # noqa: E402
import pytensor  # noqa: E402
import pytensor.tensor as pt  # noqa: E402
import scipy.linalg  # noqa: E402, F401  (loads SciPy's BLAS, used by numba, before pinning)
import sklearn  # noqa: E402
from sklearn.gaussian_process import kernels as skk  # noqa: E402

import bayes_gp.kernels as bgk  # noqa: E402

KERNELS = {
    # name: (bayes_gp class, PyMC class, scikit-learn factory)
    "ExpQuad": (bgk.ExpQuad, pm.gp.cov.ExpQuad, lambda ls: skk.RBF(length_scale=ls)),
    "Matern52": (
        bgk.Matern52,
        pm.gp.cov.Matern52,
        lambda ls: skk.Matern(length_scale=ls, nu=2.5),
    ),
}


def pin_blas_threads() -> str:
    """Limit BLAS / OpenMP to one thread and describe how it was done.

    Returns
    -------
    str
        A line for the report.
    """
    if not HAVE_THREADPOOLCTL:
        return "BLAS threads: 1 (OPENBLAS/MKL/OMP_NUM_THREADS=1; threadpoolctl not installed)"
    from threadpoolctl import threadpool_info, threadpool_limits

    threadpool_limits(limits=1)
    libs = sorted({f"{i['prefix']}={i['num_threads']}" for i in threadpool_info()})
    return "BLAS threads: 1 (threadpoolctl: " + ", ".join(libs) + ")"


def make_inputs(n: int, D: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inputs of one case, identical for every implementation and every run.

    Parameters
    ----------
    n, D : int
        Number of points and input dimension.
    seed : int
        Base seed; the generator is seeded with ``(seed, n, D)``.

    Returns
    -------
    X : ndarray, shape (n, D)
        Uniform on ``[0, 10]^D``.
    ls : ndarray, shape (D,)
        ARD length-scales, uniform on ``[1, 3]``.
    w : ndarray, shape (n, n)
        Standard normal weights.
    """
    rng = np.random.default_rng([seed, n, D])
    X = rng.uniform(0.0, 10.0, size=(n, D))
    ls = rng.uniform(1.0, 3.0, size=D)
    w = rng.standard_normal((n, n))
    return X, ls, w


def compile_pytensor(cov_cls: type, X: np.ndarray) -> Callable:
    """Compile ``f(ls, w) -> (K, sum(w * K), d sum(w * K) / d ls)`` with ``X`` a constant.

    Parameters
    ----------
    cov_cls : type
        A PyMC-style covariance class taking ``(input_dim, ls=...)``.
    X : ndarray, shape (n, D)
        Inputs, embedded in the graph as a constant.

    Returns
    -------
    callable
        The compiled PyTensor function (default mode, ``trust_input=True``).
    """
    ls = pt.dvector("ls")
    w = pt.dmatrix("w")
    K = cov_cls(X.shape[1], ls=ls)(X)
    value = pt.sum(w * K)
    fn = pytensor.function([ls, w], [K, value, pytensor.grad(value, ls)])
    fn.trust_input = True
    return fn


def sklearn_eval(kernel, X: np.ndarray, ls: np.ndarray, w: np.ndarray):
    """Same outputs as the PyTensor functions, from ``kernel(X, eval_gradient=True)``.

    Returns
    -------
    K : ndarray, shape (n, n)
    value : float
    grad : ndarray, shape (D,)
        Gradient with respect to ``ls`` (scikit-learn's is with respect to ``log(ls)``).
    """
    K, dK = kernel(X, eval_gradient=True)
    w_flat = w.reshape(1, -1)
    grad_log = (w_flat @ dK.reshape(-1, dK.shape[-1]))[0]
    return K, float(np.sum(w * K)), grad_log / ls


def time_calls(fn: Callable, repeats: int) -> float:
    """Median wall time of ``fn()`` over ``repeats`` calls, after one warm-up call.

    Returns
    -------
    float
        Seconds.
    """
    fn()
    times = []
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    finally:
        gc.enable()
    return statistics.median(times)


def run_case(kernel: str, n: int, D: int, repeats: int, seed: int) -> dict:
    """Benchmark one (kernel, n, D) case for the three implementations.

    Returns
    -------
    dict
        Compile times (s, ``pytensor.function`` plus the first call, where numba compiles),
        per-call medians (s), max abs Gram differences against scikit-learn and max relative
        gradient differences against scikit-learn.
    """
    X, ls, w = make_inputs(n, D, seed)
    bg_cls, pm_cls, sk_factory = KERNELS[kernel]
    row = {"kernel": kernel, "n": n, "D": D}
    outputs = {}
    for name, cls in (("bg", bg_cls), ("pm", pm_cls)):
        t0 = time.perf_counter()
        fn = compile_pytensor(cls, X)
        K, _, g = fn(ls, w)
        row[f"compile_{name}"] = time.perf_counter() - t0
        outputs[name] = (np.array(K), np.array(g))
        row[f"call_{name}"] = time_calls(lambda fn=fn: fn(ls, w), repeats)
        del fn
    sk_kernel = sk_factory(ls)
    outputs["sk"] = sklearn_eval(sk_kernel, X, ls, w)[::2]
    row["call_sk"] = time_calls(lambda: sklearn_eval(sk_kernel, X, ls, w), repeats)
    K_sk, g_sk = outputs["sk"]
    for name in ("bg", "pm"):
        K, g = outputs[name]
        row[f"dK_{name}"] = float(np.max(np.abs(K - K_sk)))
        row[f"dg_{name}"] = float(np.max(np.abs(g - g_sk)) / np.max(np.abs(g_sk)))
    return row


def format_table(rows: list[dict]) -> str:
    """Fixed-width table of the results (times in ms, compile in s)."""
    head = (
        f"{'kernel':<9}{'n':>5}{'D':>3} | {'compile s':^11} | {'one call ms':^26} | "
        f"{'bg/pm':>6}{'bg/sk':>6} | {'max|K-K_sk|':^19} | {'grad rel. err':^19}"
    )
    sub = (
        f"{'':<17} | {'bg':>5}{'pm':>6} | {'bg':>8}{'pm':>9}{'sk':>9} | {'':>12} | "
        f"{'bg':>9}{'pm':>10} | {'bg':>9}{'pm':>10}"
    )
    lines = [head, sub, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['kernel']:<9}{r['n']:>5}{r['D']:>3} | "
            f"{r['compile_bg']:>5.1f}{r['compile_pm']:>6.1f} | "
            f"{1e3 * r['call_bg']:>8.2f}{1e3 * r['call_pm']:>9.2f}{1e3 * r['call_sk']:>9.2f} | "
            f"{r['call_bg'] / r['call_pm']:>6.2f}{r['call_bg'] / r['call_sk']:>6.2f} | "
            f"{r['dK_bg']:>9.1e}{r['dK_pm']:>10.1e} | {r['dg_bg']:>9.1e}{r['dg_pm']:>10.1e}"
        )
    return "\n".join(line.rstrip() for line in lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[100, 300, 1000, 2000])
    p.add_argument("--dims", type=int, nargs="+", default=[1, 5])
    p.add_argument("--kernels", nargs="+", choices=sorted(KERNELS), default=list(KERNELS))
    p.add_argument("--repeats", type=int, default=15, help="timed calls per case (median)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="smoke run: n in (50, 100), D in (1, 2)")
    p.add_argument(
        "--numba-cache",
        action="store_true",
        help="keep PyTensor's on-disk numba cache on (default: off, so compile times are cold)",
    )
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.dims, args.repeats = [50, 100], [1, 2], 3
    if args.repeats < 1 or min(args.sizes) < 2 or min(args.dims) < 1:
        p.error("need --repeats >= 1, sizes >= 2 and dims >= 1")
    return args


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print the header and the table."""
    args = parse_args(argv)
    # The cache key of a compiled graph includes its constants (X, and bayes_gp's folded
    # differences), so a new data set always compiles cold; with the cache on, a second run of
    # this script would time cache hits for some cases and not others.
    pytensor.config.numba__cache = args.numba_cache
    threads = pin_blas_threads()
    mode = pytensor.compile.mode.get_default_mode()
    print(f"kernel_eval  {date.today().isoformat()}  {platform.platform()}")
    print(
        f"CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs; {threads}"
    )
    print(
        f"numpy {np.__version__}, pytensor {pytensor.__version__} "
        f"(linker {type(mode.linker).__name__}, numba cache {pytensor.config.numba__cache}), "
        f"pymc {pm.__version__}, scikit-learn {sklearn.__version__}"
    )
    print(f"repeats={args.repeats} (median after one warm-up call), seed={args.seed}, float64\n")
    # Numba's own start-up (imports, first JIT) is paid once here, not by the first case.
    for kernel in args.kernels:
        run_case(kernel, 8, 1, 1, args.seed)
    rows = []
    for kernel in args.kernels:
        for D in args.dims:
            for n in args.sizes:
                rows.append(run_case(kernel, n, D, args.repeats, args.seed))
                r = rows[-1]
                print(
                    f"  done {kernel} n={n} D={D}: bg {1e3 * r['call_bg']:.2f} ms, "
                    f"pm {1e3 * r['call_pm']:.2f} ms, sk {1e3 * r['call_sk']:.2f} ms",
                    flush=True,
                )
    print()
    print(format_table(rows))
    print(
        "\nbg = bayes_gp, pm = PyMC, sk = scikit-learn. compile = pytensor.function + first call "
        "(numba JITs lazily);\none call = K, sum(w*K) and its gradient wrt the ARD length-scales. "
        "Errors are against scikit-learn\n(exact differences via scipy.spatial.distance); grad rel. "
        "err = max|g - g_sk| / max|g_sk|."
    )


if __name__ == "__main__":
    main()
