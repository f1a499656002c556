"""Newton's method against a chord iteration for the Laplace mode inside NUTS (issue 41).

Each evaluation of the Laplace-integrated log density starts Newton's method from the previous
point's mode (``bayes_gp.latent.native`` / ``bayes_gp/solvers/c/laplace.c``): a Cholesky
factorisation of B = I + W^1/2 K W^1/2 per step (R&W Algorithm 3.1, in the whitened coordinates
f = m + L_K v), with the pending step that brings the mode to machine precision. A chord
iteration keeps the factor of B at the start and steps with it while W drifts: each step costs
a few O(n^2) triangular solves and products instead of an O(n^3) factorisation, at a linear
instead of quadratic rate. Both need B factored once more at the mode (log |B| and the
gradient). This script counts, on Pima (Ripley's 200 training cases, Bernoulli-logit, isotropic
squared exponential: ``latent_laplace.py``'s data), along a path through a short NUTS run's
posterior draws (``--substeps`` points between consecutive draws, on the log scale, standing in
for the leapfrog steps between them), per evaluation:

* ``newton``: factorisations (the steps until ``max |dv| < tol``, then the one at the mode);
* ``chord``: one factorisation at the start, chord steps until ``max |dv| < tol``, one at the mode;
* ``hybrid``: the chord step, refactorising where a step shrank by less than ``--refactor``;

and converts the counts into time with one ``dpotrf`` and one chord step timed here (NumPy and
SciPy, one thread). It counts work; it does not change bayes_gp's solver.

    python benchmarks/laplace_chord.py [--draws 100] [--substeps 6]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.linalg import cholesky, solve_triangular

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bayes_gp import LatentGP
from benchmarks.latent_laplace import _data

TOL = 320 * np.finfo(float).eps  # max |dv| relative to 1 + max |v|: the mode to round-off


def _derivatives(f: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """l' and l'' of the Bernoulli-logit likelihood (R&W eq. 3.15)."""
    p = 1.0 / (1.0 + np.exp(-f))
    return y - p, -p * (1.0 - p)


def mode(K, m, f0, y, how: str, refactor: float) -> tuple[np.ndarray, int, int]:
    """The mode from ``f0`` by ``how``: ``(f, factorisations of B, chord steps)``."""
    n = y.size
    LK = cholesky(K, lower=True)
    v = solve_triangular(LK, f0 - m, lower=True)
    n_fac = n_chord = 0
    LB = sW = None
    prev, ratio = np.inf, 1.0
    for _ in range(500):
        d1, d2 = _derivatives(m + LK @ v, y)
        if how == "newton" or LB is None or (how == "hybrid" and ratio > refactor):
            sW = np.sqrt(-d2)
            LB = cholesky(np.eye(n) + sW[:, None] * K * sW[None, :], lower=True)
            n_fac += 1
        else:
            n_chord += 1
        g = LK.T @ d1 - v
        t = solve_triangular(LB, sW * (LK @ g), lower=True)
        dv = g - LK.T @ (sW * solve_triangular(LB.T, t, lower=False))
        step = float(np.max(np.abs(dv)))
        ratio, prev = (step / prev if np.isfinite(prev) else 1.0), step
        v = v + dv
        if step < TOL * (1.0 + np.max(np.abs(v))):
            break
    return m + LK @ v, n_fac + 1, n_chord  # + the factorisation at the mode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--draws", type=int, default=100)
    ap.add_argument("--substeps", type=int, default=6)
    ap.add_argument("--refactor", type=float, default=0.3)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    print(f"# {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, load {os.getloadavg()}")
    X, y, *_ = _data("pima", 0)
    gp = LatentGP(X, y, "expquad", "bernoulli")
    post = gp.sample(method="nuts", draws=args.draws, tune=200, chains=1, random_seed=1)[
        "posterior"
    ]
    ls, eta = (np.asarray(post[k]).ravel() for k in ("ls", "eta"))
    mean = np.asarray(post["mean"]).ravel() if "mean" in post else np.zeros_like(ls)
    sq = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    path = []
    for i in range(ls.size - 1):
        for s in np.linspace(0.0, 1.0, args.substeps, endpoint=False):
            lo = (1 - s) * np.log([ls[i], eta[i]]) + s * np.log([ls[i + 1], eta[i + 1]])
            path.append((*np.exp(lo), (1 - s) * mean[i] + s * mean[i + 1]))
    counts = {how: [] for how in ("newton", "chord", "hybrid")}
    last = dict.fromkeys(counts)
    for ell, e, m in path:
        K = e**2 * np.exp(-0.5 * sq / ell**2) + gp.jitter * np.eye(y.size)
        for how in counts:
            f0 = last[how] if last[how] is not None else np.full(y.size, m)
            last[how], n_fac, n_chord = mode(K, m, f0, y, how, args.refactor)
            counts[how].append((n_fac, n_chord))
    B = np.eye(y.size) + K
    t0 = time.perf_counter()
    for _ in range(200):
        LB = cholesky(B, lower=True)
    t_fac = (time.perf_counter() - t0) / 200
    g = np.ones(y.size)
    t0 = time.perf_counter()
    for _ in range(1000):
        t = solve_triangular(LB, LB @ g, lower=True)
        _ = LB.T @ solve_triangular(LB.T, t, lower=False) + LB @ g
    t_chord = (time.perf_counter() - t0) / 1000
    print(f"{len(path)} evaluations; one dpotrf {t_fac * 1e3:.3f} ms, one chord step "
          f"{t_chord * 1e3:.3f} ms (n = {y.size}, one thread)")  # fmt: skip
    for how, c in counts.items():
        c = np.array(c)
        cost = c[:, 0].mean() * t_fac + c[:, 1].mean() * t_chord
        print(f"{how:7s} factorisations {c[:, 0].mean():.2f} (max {c[:, 0].max()}), chord steps "
              f"{c[:, 1].mean():.2f} (max {c[:, 1].max()}): {cost * 1e3:.3f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
