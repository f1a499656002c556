"""Compact-support kernels on sparse Gram matrices: one NUTS gradient, sparse against dense.

The exact GP with the piecewise-polynomial kernel ``pp2`` (R&W eq. 4.21, ``ls``, ``eta``,
``sigma``): one evaluation of ``log p(y | theta)`` and its gradient with respect to the log
hyperparameters (what NUTS calls per leapfrog step), for

* ``sparse``: ``GPRegression(X, y, "pp2")``'s PyMC model, whose likelihood is
  :class:`bayes_gp.solvers.compact.CompactGPLogp` (band Cholesky ``pbtrf``, Takahashi selected
  inverse, O(n b^2)), compiled with PyTensor's numba backend (what nutpie runs);
* ``dense``: ``GPRegression(X, y, "pp2", sparse=False)``, the fused dense likelihood
  (:class:`bayes_gp.solvers.likelihood.GPLogp`: ``potrf``/``potri`` on the n x n matrix that the
  PyTensor kernel graph builds), same backend; skipped above ``--dense-max`` points (memory and
  time grow as n^2 and n^3);
* ``floor``: SciPy LAPACK ``dpotrf`` + ``dpotrs`` + ``dpotri`` on the precomputed dense matrix
  (the dense path's linear algebra alone).

Inputs: 1-D, uniform with 10 points per unit length, ``ls = 2``, so each point has ~40 neighbours
within the support whatever n (bandwidth b ~ 40); and 2-D, uniform on a square with 4 points per
unit area, ``ls = 1.5`` (reverse Cuthill-McKee ordering; b grows like sqrt(n)). One BLAS thread;
each time is the minimum over repeats after a warm-up call. Prints milliseconds, the bandwidth and
the ratios dense/sparse and floor/sparse, and the largest relative difference between the sparse
and dense log densities and gradients.

    python benchmarks/compact.py                      # 1-D n = 1000 ... 100000, 2-D n = 1000 ... 20000
    python benchmarks/compact.py --sizes 1000 2000 --sizes-2d 1000
"""

from __future__ import annotations

import argparse
import os
import platform
from datetime import date

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import pymc as pm
import pytensor
from _timing import best_time, logp_dlogp
from scipy.linalg import lapack
from threadpoolctl import threadpool_limits

import bayes_gp
from bayes_gp.solvers.compact import CompactFactor, pp_profile

THETA = {"ls": 2.0, "eta": 1.0, "sigma": 0.3}


def data(n: int, D: int, seed: int = 0):
    rng = np.random.default_rng(seed + n + D)
    if D == 1:
        X = rng.uniform(0, n / 10, (n, 1))
        ls = 2.0
    else:
        side = np.sqrt(n / 4)
        X = rng.uniform(0, side, (n, 2))
        ls = 1.5
    y = np.sin(X[:, 0]) + 0.3 * rng.normal(size=n)
    return (X[:, 0] if D == 1 else X), y, ls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 5000, 10_000, 100_000])
    ap.add_argument("--sizes-2d", type=int, nargs="+", default=[1000, 5000, 20_000])
    ap.add_argument("--dense-max", type=int, default=5000)
    args = ap.parse_args()
    threadpool_limits(limits=1, user_api="blas")
    print(f"compact-support GP gradient  {date.today()}  {platform.platform()}")
    print(
        f"numpy {np.__version__}, pytensor {pytensor.__version__}, pymc {pm.__version__}, "
        f"bayes_gp {bayes_gp.__version__}; BLAS threads 1; kernel pp2\n"
    )
    head = (
        f"{'D':>2} {'n':>7} {'b':>5} | {'sparse ms':>10} {'dense ms':>10} {'floor ms':>10} |"
        f" {'dense/sp':>8} {'floor/sp':>8} | {'max rel diff':>12}"
    )
    print(head)
    print("-" * len(head))
    for D, sizes in ((1, args.sizes), (2, args.sizes_2d)):
        for n in sizes:
            X, y, ls = data(n, D)
            sp = bayes_gp.GPRegression(X, y, "pp2", mean="zero")
            f_sp = logp_dlogp(sp.model, {**THETA, "ls": ls}, "NUMBA")
            Xm = np.asarray(X, dtype=float).reshape(n, -1)
            fac = CompactFactor(Xm, [ls], THETA["eta"], THETA["sigma"] ** 2, 2, D // 2 + 3)
            repeats = max(3, int(20_000 / n))
            t_sp = best_time(f_sp, repeats)
            t_de = t_fl = np.nan
            diff = np.nan
            if n <= args.dense_max:
                de = bayes_gp.GPRegression(X, y, "pp2", mean="zero", sparse=False)
                f_de = logp_dlogp(de.model, {**THETA, "ls": ls}, "NUMBA")
                t_de = best_time(f_de, max(2, repeats // 4))
                a, b = f_sp(), f_de()
                diff = max(
                    abs(float(x) - float(z)) / max(abs(float(z)), 1e-300)
                    for x, z in zip(a, b, strict=True)
                )
                d = np.sqrt(((Xm[:, None, :] - Xm[None, :, :]) ** 2).sum(-1)) / ls
                C = THETA["eta"] ** 2 * pp_profile(d, D // 2 + 3, 2)[0]
                C += (THETA["sigma"] ** 2 + sp.jitter) * np.eye(n)
                del d

                def floor(C=C, y=y):
                    L, _ = lapack.dpotrf(C, lower=1)
                    lapack.dpotrs(L, y, lower=1)
                    lapack.dpotri(L, lower=1)

                t_fl = best_time(floor, max(2, repeats // 4))
                del C
            print(
                f"{D:2d} {n:7d} {fac.pairs.b:5d} | {t_sp:10.2f} {t_de:10.2f} {t_fl:10.2f} |"
                f" {t_de / t_sp:8.1f} {t_fl / t_sp:8.1f} | {diff:12.1e}",
                flush=True,
            )
    print(
        "\nms per log density + gradient (minimum over repeats, numba backend); b = bandwidth of the"
        "\nsparse path's ordering; dense/sp > 1: the sparse path is faster; max rel diff between the"
        "\ntwo paths' log density and gradient (NaN: dense skipped above --dense-max)."
    )


if __name__ == "__main__":
    main()
