r"""The ICM likelihood on complete data: Kronecker eigendecompositions against the dense path,
and NUTS on a ``MultiOutputGP``.

Part 1, one evaluation of :math:`\log p(\operatorname{vec} Y \mid \theta)` and its gradient with
respect to :math:`\theta = (\ell, W, \kappa, \sigma)` (what NUTS calls per leapfrog step, up to
the change of variables) of the intrinsic coregionalisation model

.. math::
   \operatorname{vec}(Y) \sim N\big(m \otimes 1_n,\ B \otimes K + \operatorname{diag}(s^2)
   \otimes I_n\big), \qquad B = W W^T + \operatorname{diag}(\kappa)

(Bonilla, Chai & Williams 2008, eq. 2; Álvarez, Rosasco & Lawrence 2012, eq. 4.3; R&W eq. 2.30
for the density), squared-exponential :math:`K` (R&W eq. 4.9), rank-1 :math:`W`, on an
:math:`(n, P)` grid, by

* ``kron``: :func:`bayes_gp.multioutput.icm_logp` on complete data, i.e.
  :class:`bayes_gp.multioutput.kronecker.KroneckerICMLogp` (eigendecompositions of the
  :math:`P \times P` and :math:`n \times n` factors, closed-form gradient, :math:`O(n^3 + P^3)`);
* ``dense``: the branch ``icm_logp`` takes on heterotopic data (``NaN`` entries), forced here on
  the same complete data: the :math:`nP \times nP` covariance of the observed entries built by
  ``bayes_gp.multioutput.icm._dense_C_terms`` and the fused Gaussian density
  :func:`bayes_gp.solvers.likelihood.gp_logp` (``potrf`` / ``potri``, R&W eq. 5.9 gradient,
  :math:`O(n^3 P^3)`);
* ``floor``: SciPy LAPACK ``dpotrf`` + ``dpotrs`` + ``dpotri`` on the precomputed
  :math:`nP \times nP` matrix: the dense path's linear algebra alone (what any dense
  implementation must pay).

Both graphs share every node above the likelihood (kernel, :math:`B`, noise with the package's
relative jitter) and are compiled in the same PyTensor mode (``--mode``, default ``FAST_RUN``:
the C backend; ``NUMBA`` is the backend nutpie runs). Each time is the minimum over repeats after
a warm-up call, with one BLAS thread. Printed: milliseconds per call, the ratios dense / kron and
floor / kron, and the largest relative difference between the two paths' log densities and
gradients (every component).

Part 2: NUTS on ``MultiOutputGP(X, Y, "expquad")`` with :math:`n = 50`, :math:`P = 3`
(simulated ICM data, strongly correlated outputs): PyMC's sampler with the C backend, 2 chains,
once on complete data (Kronecker likelihood) and once with one entry of ``Y`` removed (the dense
likelihood on the other 149); wall time of ``sample()`` (pre-flight check, compilation, sampling
and the pointwise LOO terms), PyMC's sampling time, the wall time per leapfrog step, the
smallest bulk ESS over the hyperparameters and min-ESS/s.

The machine's load average is printed at the start and the end: the machine is shared and
times vary with the load; the ratios are more stable than the times.

Run from the repository root::

    python benchmarks/multioutput.py                        # n = 50 ... 400, P = 2, 3, 5; NUTS
    python benchmarks/multioutput.py --sizes 50 100 --outputs 2 3 --no-nuts
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import time
import warnings
from datetime import date

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from _timing import best_time
from scipy.linalg import lapack
from threadpoolctl import threadpool_limits

import bayes_gp
from bayes_gp.kernels import ExpQuad
from bayes_gp.multioutput import MultiOutputGP, icm_logp
from bayes_gp.multioutput.icm import DEFAULT_JITTER, _dense_C_terms, _logp_pieces
from bayes_gp.solvers.likelihood import gp_logp

#: True hyperparameters of the simulated data and the point of evaluation.
LS = 1.5
NOISE = 0.2


def loadings(P: int) -> np.ndarray:
    """A rank-1 :math:`W` (P, 1) with loadings of both signs: strongly correlated outputs."""
    return np.linspace(1.0, -0.8, P)[:, None] + 0.05


def simulate(n: int, P: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(X (n,), Y (n, P))`` drawn from the ICM with :math:`B = WW^T + 0.05 I`, the SE kernel
    (:math:`\\ell` = ``LS``) and noise sd ``NOISE``; inputs uniform on [0, n / 5]."""
    rng = np.random.default_rng(seed + 1000 * n + P)
    X = np.sort(rng.uniform(0.0, n / 5.0, n))
    W = loadings(P)
    B = W @ W.T + 0.05 * np.eye(P)
    K = np.exp(-0.5 * (X[:, None] - X[None, :]) ** 2 / LS**2)
    L = np.linalg.cholesky(np.kron(B, K) + 1e-8 * np.eye(n * P))
    F = (L @ rng.standard_normal(n * P)).reshape(P, n).T
    return X, F + NOISE * rng.standard_normal((n, P))


def compiled_pair(X: np.ndarray, Y: np.ndarray, mode: str):
    """``(kron, dense)``: functions ``(ls, W, kappa, sigma) -> [log p, d/dls, d/dW, d/dkappa,
    d/dsigma]`` by the two paths (module docstring)."""
    ls, W = pt.dscalar("ls"), pt.dmatrix("W")
    kappa, sigma = pt.dvector("kappa"), pt.dvector("sigma")
    kernel = ExpQuad(1, ls=ls)
    wrt = [ls, W, kappa, sigma]
    kron = icm_logp(X, Y, kernel, W, kappa, sigma, jitter=DEFAULT_JITTER)
    data, B, K, s2, m = _logp_pieces(X, Y, kernel, W, kappa, sigma, None, DEFAULT_JITTER)
    C, mu = _dense_C_terms(data, [B], [K], s2, m)
    dense = gp_logp(C, pt.as_tensor_variable(data.y_obs) - mu)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tuple(
            pytensor.function(wrt, [lp, *pt.grad(lp, wrt)], mode=mode) for lp in (kron, dense)
        )


def lapack_floor(X: np.ndarray, P: int):
    """``f()``: Cholesky factor, solve and inverse of the stacked covariance at the evaluation
    point (the dense path's linear algebra alone)."""
    n = X.size
    W = loadings(P)
    B = W @ W.T + 0.05 * np.eye(P)
    K = np.exp(-0.5 * (X[:, None] - X[None, :]) ** 2 / LS**2)
    C = np.kron(B, K) + NOISE**2 * np.eye(n * P)
    r = np.ones(n * P)

    def floor():
        L, _ = lapack.dpotrf(C, lower=1)
        lapack.dpotrs(L, r, lower=1)
        lapack.dpotri(L, lower=1)

    return floor


def max_rel_diff(a: list, b: list) -> float:
    """Largest relative difference between two lists of arrays, component by component."""
    x = np.concatenate([np.ravel(v) for v in a])
    z = np.concatenate([np.ravel(v) for v in b])
    return float(np.max(np.abs(x - z) / np.maximum(np.abs(z), 1e-300)))


def gradient_table(sizes: list[int], outputs: list[int], mode: str) -> list[tuple]:
    head = (
        f"{'n':>5} {'P':>3} {'nP':>6} | {'kron ms':>9} {'dense ms':>10} {'floor ms':>9} |"
        f" {'dense/kron':>10} {'floor/kron':>10} | {'max rel diff':>12}"
    )
    print(head)
    print("-" * len(head))
    rows = []
    for n in sizes:
        for P in outputs:
            X, Y = simulate(n, P)
            f_kron, f_dense = compiled_pair(X, Y, mode)
            theta = (np.asarray(LS), loadings(P), np.full(P, 0.05), np.full(P, NOISE))
            diff = max_rel_diff(f_kron(*theta), f_dense(*theta))
            repeats = max(3, int(3000 / (n * P)))
            t_k = best_time(lambda f=f_kron, t=theta: f(*t), 4 * repeats)
            t_d = best_time(lambda f=f_dense, t=theta: f(*t), repeats)
            t_f = best_time(lapack_floor(X, P), repeats)
            rows.append((n, P, t_k, t_d, t_f, diff))
            print(
                f"{n:5d} {P:3d} {n * P:6d} | {t_k:9.3f} {t_d:10.3f} {t_f:9.3f} |"
                f" {t_d / t_k:10.1f} {t_f / t_k:10.1f} | {diff:12.1e}",
                flush=True,
            )
    return rows


def nuts_rows(draws: int, tune: int, seed: int) -> None:
    X, Y = simulate(50, 3, seed)
    missing = Y.copy()
    missing[10, 1] = np.nan
    head = (
        f"{'path':>6} {'N obs':>6} | {'seconds':>8} {'sampling':>9} {'ms/step':>8} |"
        f" {'min ESS':>8} {'ESS/s':>7} {'div':>4} {'r-hat':>6}"
    )
    print(head)
    print("-" * len(head))
    for label, data in (("kron", Y), ("dense", missing)):
        gp = MultiOutputGP(X, data, "expquad")
        assert gp.kronecker is (label == "kron")
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = gp.sample(draws=draws, tune=tune, chains=2, random_seed=seed,
                              sampler="pymc", compile_kwargs={"mode": "FAST_RUN"})  # fmt: skip
        seconds = time.perf_counter() - t0
        summ = bayes_gp.report(idata, model=gp, figures=False).summary
        hyper = [r for r in summ.index if str(r).split("[")[0] in gp.hyperparameters]
        ess = float(summ.loc[hyper, "ess_bulk"].min())
        rhat = float(summ.loc[hyper, "r_hat"].max())
        stats = idata["sample_stats"]
        div = int(stats["diverging"].sum())
        sampling = float(stats.attrs["sampling_time"])
        per_step = 1e3 * float(stats["perf_counter_diff"].sum()) / float(stats["n_steps"].sum())
        print(f"{label:>6} {gp.observed.size:6d} | {seconds:8.1f} {sampling:9.1f} {per_step:8.2f} |"
              f" {ess:8.0f} {ess / seconds:7.1f} {div:4d} {rhat:6.3f}", flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[50, 100, 200, 400])
    ap.add_argument("--outputs", type=int, nargs="+", default=[2, 3, 5])
    ap.add_argument("--mode", default="FAST_RUN", help="PyTensor mode (FAST_RUN, NUMBA)")
    ap.add_argument("--no-nuts", action="store_true", help="skip the NUTS rows")
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--tune", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    threadpool_limits(limits=1, user_api="blas")
    logging.getLogger("pymc").setLevel(logging.ERROR)
    print(f"ICM likelihood: Kronecker vs dense  {date.today()}  {platform.platform()}")
    print(
        f"numpy {np.__version__}, pytensor {pytensor.__version__}, pymc {pm.__version__}, "
        f"bayes_gp {bayes_gp.__version__}; BLAS threads 1; mode {args.mode}; kernel expquad, "
        "rank 1"
    )
    print(f"load average at start: {os.getloadavg()}\n")
    gradient_table(args.sizes, args.outputs, args.mode)
    print(
        "\nms per log density + gradient (minimum over repeats); dense/kron > 1: the Kronecker "
        "path is faster;\nfloor: LAPACK potrf + potrs + potri on the nP x nP matrix alone;\n"
        "max rel diff: largest relative difference between the two paths' log density and "
        "gradient components."
    )
    if not args.no_nuts:
        print(f"\nNUTS, MultiOutputGP n = 50, P = 3, PyMC sampler (C backend), 2 chains x "
              f"({args.tune} tune + {args.draws} draws), seed {args.seed}")  # fmt: skip
        nuts_rows(args.draws, args.tune, args.seed)
        print("seconds: the whole sample() call (pre-flight, compilation, sampling, LOO terms); "
              "sampling: PyMC's sampling time (tuning and draws);\nms/step: wall time per leapfrog "
              "step over the kept draws; min ESS: smallest bulk ESS over the hyperparameters; "
              "ESS/s = min ESS / seconds;\nr-hat: the largest. One run per path: ESS varies "
              "between seeds, the time per step much less.")  # fmt: skip
    print(f"\nload average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
