"""The weight-space / function-space trade-off, and kernel ridge regression against scikit-learn.

Two parts:

* ``crossover``: :class:`bayes_gp.BayesianLinearRegression` on random features (``basis=None``,
  the inputs are the design matrix Φ, N × M) with ``method="weight"`` (factorise the M × M matrix
  ``I + σ⁻²Φ̃ᵀΦ̃``: O(NM² + M³)) and ``method="function"`` (factorise the N × N matrix
  ``Φ̃Φ̃ᵀ + σ²I``: O(N²M + N³)), PRML §6.4.2. Timed: ``log_marginal_likelihood`` (the
  work of one hyperparameter evaluation) and ``predict`` at 200 new points (fit + predictions),
  without the ~2 ms that the public methods spend entering threadpoolctl's one-BLAS-thread limit.
  For each M the N at which the two are equally fast is located by interpolating log-time ratios
  on a grid of N/M; the agreement of the two forms is reported too (max relative difference of
  the predictive means and variances, and of the log marginal likelihoods).
* ``ridge``: :class:`bayes_gp.KernelRidge` with the ``ExpQuad`` kernel against
  ``sklearn.kernel_ridge.KernelRidge(kernel="rbf", gamma=1/(2ℓ²))`` — fit + predict at 500 points,
  each also with a precomputed Gram matrix (``kernel="precomputed"`` for both) to separate the
  kernel evaluation from the solve — and the max difference of the predictions.

Timings are medians of ``--repeats`` runs after a warm-up run; BLAS is pinned to one thread.

    /work/venv/bin/python benchmarks/weight_space.py            # full run (~2 min)
    /work/venv/bin/python benchmarks/weight_space.py --quick    # smoke run
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from datetime import date
from functools import partial

import numpy as np
import scipy.linalg  # noqa: F401  (loads SciPy's BLAS before pinning it)
import sklearn
from sklearn.kernel_ridge import KernelRidge as SkKernelRidge
from threadpoolctl import threadpool_limits

from bayes_gp import BayesianLinearRegression, KernelRidge
from bayes_gp.kernels import ExpQuad


def median_time(fn, repeats: int) -> float:
    fn()  # warm-up (and compilation, for PyTensor kernels)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


LML = BayesianLinearRegression.log_marginal_likelihood.__wrapped__
PREDICT = BayesianLinearRegression.predict.__wrapped__


def fit_predict(model, A, t, B):
    return model.fit(A, t).predict(B)


def crossover(ms, ratios, repeats: int, seed: int) -> list[dict]:
    rows = []
    for M in ms:
        for r in ratios:
            N = max(2, round(r * M))
            rng = np.random.default_rng((seed, M, N))
            Phi = rng.standard_normal((N, M)) / np.sqrt(M)
            y = Phi @ rng.standard_normal(M) + 0.1 * rng.standard_normal(N)
            Xn = rng.standard_normal((200, M)) / np.sqrt(M)
            blr = BayesianLinearRegression(Phi, y, Sigma_p=1.0, sigma=0.3)
            row = {"M": M, "N": N, "ratio": N / M}
            for method in ("weight", "function"):
                # the undecorated methods: the public ones also enter threadpoolctl's BLAS limit
                # (~2 ms per call here), which would hide the algorithms at small sizes
                lml = partial(LML, blr, method=method)
                pred = partial(PREDICT, blr, Xn, method=method)
                row[f"lml_{method}"] = median_time(lml, repeats)
                row[f"pred_{method}"] = median_time(pred, repeats)
            pw, pf = blr.predict(Xn, method="weight"), blr.predict(Xn, method="function")
            lw = blr.log_marginal_likelihood(method="weight")
            lf = blr.log_marginal_likelihood(method="function")
            row["err_mean"] = float(np.max(np.abs(pw.mean - pf.mean)) / np.max(np.abs(pf.mean)))
            row["err_var"] = float(np.max(np.abs(pw.var - pf.var) / pf.var))
            row["err_lml"] = abs(lw - lf) / abs(lf)
            row["auto"] = blr.resolved_method()
            rows.append(row)
    return rows


def crossing_ratio(rows, M, key) -> float:
    """N/M where log(t_function / t_weight) crosses zero (log-log interpolation)."""
    sel = [r for r in rows if r["M"] == M]
    x = np.log([r["ratio"] for r in sel])
    d = np.log([r[f"{key}_function"] / r[f"{key}_weight"] for r in sel])
    for i in range(len(d) - 1):
        if d[i] <= 0 < d[i + 1] or d[i] < 0 <= d[i + 1]:
            t = -d[i] / (d[i + 1] - d[i])
            return float(np.exp(x[i] + t * (x[i + 1] - x[i])))
    return float("nan")


def ridge(ns, repeats: int, seed: int, D: int = 3, ls: float = 1.2, lam: float = 0.1):
    rows = []
    for n in ns:
        rng = np.random.default_rng((seed, n))
        X = rng.uniform(0, 5, (n, D))
        t = np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.standard_normal(n)
        Xs = rng.uniform(0, 5, (500, D))
        ours = KernelRidge(ExpQuad(D, ls=ls), lam)
        sk = SkKernelRidge(alpha=lam, kernel="rbf", gamma=1 / (2 * ls**2))
        t_ours = median_time(partial(fit_predict, ours, X, t, Xs), repeats)
        t_sk = median_time(partial(fit_predict, sk, X, t, Xs), repeats)
        K, Ks = ours.gram(X), ours.gram(Xs, X)
        pre = KernelRidge("precomputed", lam)
        skp = SkKernelRidge(alpha=lam, kernel="precomputed")
        t_pre = median_time(partial(fit_predict, pre, K, t, Ks), repeats)
        t_skp = median_time(partial(fit_predict, skp, K, t, Ks), repeats)
        p_ours = ours.fit(X, t).predict(Xs)
        p_sk = sk.fit(X, t).predict(Xs)
        p_pre = pre.fit(K, t).predict(Ks)
        p_skp = skp.fit(K, t).predict(Ks)
        rows.append(
            {
                "n": n,
                "ours": t_ours,
                "sk": t_sk,
                "ours_pre": t_pre,
                "sk_pre": t_skp,
                "err": float(np.max(np.abs(p_ours - p_sk))),
                "err_pre": float(np.max(np.abs(p_pre - p_skp))),
                "scale": float(np.max(np.abs(p_sk))),
            }
        )
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: small sizes, 3 repeats")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    repeats = args.repeats or (3 if args.quick else 9)
    ms = (20, 50) if args.quick else (25, 50, 100, 200, 400)
    ratios = (0.5, 1.0, 2.0) if args.quick else (0.25, 0.5, 0.7, 1.0, 1.4, 2.0, 4.0)
    ns = (100, 300) if args.quick else (100, 300, 1000, 2000)
    t_start = time.perf_counter()
    print(f"weight_space  {date.today()}  {platform.platform()}")
    print(
        f"CPU: {platform.machine()}, {os.cpu_count()} logical CPUs; BLAS threads: 1; numpy "
        f"{np.__version__}, scikit-learn {sklearn.__version__}; repeats={repeats} (median)"
    )
    with threadpool_limits(limits=1, user_api="blas"):
        rows = crossover(ms, ratios, repeats, args.seed)
        print("\nBayesian linear regression: weight space (M x M) vs function space (N x N)")
        print(
            f"{'M':>5} {'N':>5} {'N/M':>5} | {'LML ms':>16} {'f/w':>6} | {'predict ms':>16} "
            f"{'f/w':>6} | {'auto':>8} | {'rel.err mean':>12} {'var':>8} {'LML':>8}"
        )
        print(f"{'':>17} | {'weight':>8}{'function':>8} {'':>6} | {'weight':>8}{'function':>8}")
        print("-" * 112)
        for r in rows:
            print(
                f"{r['M']:>5} {r['N']:>5} {r['ratio']:>5.2f} | {1e3 * r['lml_weight']:>8.3f}"
                f"{1e3 * r['lml_function']:>8.3f} {r['lml_function'] / r['lml_weight']:>6.2f} | "
                f"{1e3 * r['pred_weight']:>8.3f}{1e3 * r['pred_function']:>8.3f} "
                f"{r['pred_function'] / r['pred_weight']:>6.2f} | {r['auto']:>8} | "
                f"{r['err_mean']:>12.1e} {r['err_var']:>8.1e} {r['err_lml']:>8.1e}"
            )
        print(
            "\ncrossover N/M (function space as fast as weight space; below it, function is faster):"
        )
        for M in ms:
            print(
                f"  M = {M:>4}: LML {crossing_ratio(rows, M, 'lml'):.2f}, "
                f"fit + predict(200) {crossing_ratio(rows, M, 'pred'):.2f}"
            )
        rrows = ridge(ns, repeats, args.seed)
        print(
            "\nKernel ridge regression (ExpQuad ls=1.2, lam=0.1, D=3) vs scikit-learn, fit + predict(500)"
        )
        print(
            f"{'n':>5} | {'bayes_gp ms':>11} {'sklearn ms':>11} {'ratio':>6} | {'precomp. bg':>11} "
            f"{'sk':>8} {'ratio':>6} | {'max|diff|':>9} {'precomp.':>9} {'max|pred|':>9}"
        )
        print("-" * 100)
        for r in rrows:
            print(
                f"{r['n']:>5} | {1e3 * r['ours']:>11.2f} {1e3 * r['sk']:>11.2f} "
                f"{r['ours'] / r['sk']:>6.2f} | {1e3 * r['ours_pre']:>11.2f} {1e3 * r['sk_pre']:>8.2f} "
                f"{r['ours_pre'] / r['sk_pre']:>6.2f} | {r['err']:>9.1e} {r['err_pre']:>9.1e} "
                f"{r['scale']:>9.2f}"
            )
    print(
        f"\ntotal wall time {time.perf_counter() - t_start:.0f} s, "
        f"load average at end {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
