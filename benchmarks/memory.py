"""Peak memory of one log-density-and-gradient evaluation of an exact ARD GP (issue 19).

For each n (default 1000, 2000, 4000; D = 10 inputs), a fresh subprocess builds
``GPRegression(X, y, kernel="expquad", ard=True)``, compiles its PyMC model's log density and
gradient with respect to the unconstrained values (the function NUTS calls: every term, priors
included) in PyTensor ``--mode`` (``NUMBA``, what nutpie runs and PyTensor 3's ``FAST_RUN``, or
``CVM``, the C backend with the Ops' NumPy ``perform``),
and evaluates it once at the initial point. The resident-set high-water mark (``VmHWM`` of
``/proc/self/status``) is read

* ``base``: after the imports and the data (a few MB);
* ``build``: the peak while ``GPRegression`` builds its model;
* ``compile``: the peak while compiling (PyTensor constant-folds graphs of constant inputs, such
  as coordinate differences of fixed ``X``, here), then the peak is reset
  (``/proc/self/clear_refs``) and ``held`` is the resident set after compiling;
* ``eval``: the peak during the first evaluation (``--repeats`` more are made, the peak is the
  largest), measured from that reset.

Reported in MB and in units of one ``n x n`` float64 matrix, :math:`8n^2` bytes, above ``base``
(``compile - base``, ``held - base``, ``eval - base``: what the model costs beyond the
interpreter); the last column extrapolates ``eval - base`` to ``--extrapolate`` (default
n = 10^4) as that many :math:`8n^2` matrices, i.e. ``units * 8 * N^2`` bytes: an upper bound,
since the units include fixed costs (compiled code, ~150 MB) that do not grow with n. With two
sizes or more, a least-squares fit ``eval - base = a + b * 8n^2`` separates them: ``b`` is the
number of ``n x n`` matrices an evaluation needs at large n, and ``a + b * 8N^2`` the estimate at
``N``.

Never run n > 4000 on a shared 24 GB machine (``--n`` refuses it unless ``--allow-large``).

    python benchmarks/memory.py                  # n in 1000 2000 4000, numba
    python benchmarks/memory.py --n 1000 --mode CVM
    python benchmarks/memory.py --folded         # the graph before issue 19, for comparison
    python benchmarks/memory.py --n 10000 --allow-large --repeats 0   # one evaluation, ~2.2 GB

Results (before and after the in-place likelihood Ops): ``benchmarks/README.md``, "Memory";
what is held at the peak: :mod:`bayes_gp.solvers.exact`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from datetime import date

#: inputs per point (issue 19: D = 10)
D = 10
#: largest n this script runs without ``--allow-large`` (the machine is shared)
MAX_SAFE_N = 4000


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> None:
    """Reset VmHWM to the current RSS (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def child(n: int, mode: str, repeats: int, seed: int, folded: bool) -> dict:
    """Run in the subprocess: build, compile, evaluate; return the memory readings in bytes."""
    import warnings

    import numpy as np
    import pytensor
    import pytensor.tensor as pt

    import bayes_gp
    from bayes_gp.kernels import metrics

    if folded:  # the graph of coordinate differences at every size (before issue 19)
        metrics.FUSED_DISTANCE_MIN_ELEMENTS = float("inf")
        metrics.FUSED_DISTANCE_MIN_DIMS = float("inf")

    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 1.0, (n, D))
    w = rng.normal(size=D) / np.arange(1, D + 1)
    y = np.sin(3.0 * X @ w) + 0.1 * rng.normal(size=n)
    base = _status_kb("VmRSS") * 1024
    _reset_peak()
    gpr = bayes_gp.GPRegression(X, y, kernel="expquad", ard=True)
    model = gpr.model
    lp = model.logp()
    wrt = model.value_vars
    build_peak = _status_kb("VmHWM") * 1024
    _reset_peak()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = pytensor.function(wrt, [lp, *pt.grad(lp, wrt)], mode=mode, trust_input=True)
    compile_peak = _status_kb("VmHWM") * 1024
    ip = model.initial_point()
    values = [np.asarray(ip[v.name], dtype=float) for v in wrt]
    held = _status_kb("VmRSS") * 1024
    _reset_peak()
    out = f(*values)
    first = _status_kb("VmHWM") * 1024
    for _ in range(repeats):
        out = f(*values)
    eval_peak = _status_kb("VmHWM") * 1024
    return {
        "n": n,
        "mode": mode,
        "folded": folded,
        "base": base,
        "build": build_peak,
        "compile": compile_peak,
        "held": held,
        "eval_first": first,
        "eval": eval_peak,
        "logp": float(out[0]),
        "grad_norm": float(np.sqrt(sum(np.sum(np.square(g)) for g in out[1:]))),
    }


def run_one(n: int, mode: str, repeats: int, seed: int, folded: bool) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    cmd = [
        sys.executable,
        __file__,
        "--child",
        str(n),
        "--mode",
        mode,
        "--repeats",
        str(repeats),
        "--seed",
        str(seed),
    ] + (["--folded"] if folded else [])
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"n = {n} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[1000, 2000, 4000])
    ap.add_argument("--mode", default="NUMBA", help="PyTensor mode: NUMBA (nutpie) or CVM (C)")
    ap.add_argument("--repeats", type=int, default=2, help="evaluations after the first")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--extrapolate", type=int, default=10_000)
    ap.add_argument("--allow-large", action="store_true", help=f"allow n > {MAX_SAFE_N}")
    ap.add_argument(
        "--folded",
        action="store_true",
        help="force the (n, n, D) coordinate-difference graph at every n (the state before "
        "issue 19) instead of the ARDSquareDist Op",
    )
    ap.add_argument("--json", help="also write the readings to this file")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.mode, args.repeats, args.seed, args.folded)))
        return
    too_large = [n for n in args.n if n > MAX_SAFE_N]
    if too_large and not args.allow_large:
        raise SystemExit(
            f"--n {too_large}: above {MAX_SAFE_N} this needs tens of GB on a shared machine; "
            "pass --allow-large on a machine of your own"
        )
    N = args.extrapolate
    graph = "folded (n, n, D) differences" if args.folded else "default (ARDSquareDist at large n)"
    print(f"memory  {date.today()}  {platform.platform()}  D = {D}  mode = {args.mode}  {graph}")
    print("MB above base (after imports and data); units: 8n^2 bytes (one n x n float64)")
    head = (
        f"{'n':>6} {'base MB':>8} {'build':>15} {'compile':>15} {'held':>15} {'eval peak':>15} "
        f"{'eval @ ' + str(N):>14}"
    )
    print(head)
    rows = []
    for n in args.n:
        r = run_one(n, args.mode, args.repeats, args.seed, args.folded)
        rows.append(r)
        unit = 8.0 * n * n

        def cell(key: str, r=r, unit=unit) -> str:
            extra = r[key] - r["base"]
            return f"{extra / 1e6:7.0f} ({extra / unit:5.2f})"

        units = (r["eval"] - r["base"]) / unit
        print(
            f"{n:>6} {r['base'] / 1e6:8.0f} {cell('build'):>15} {cell('compile'):>15} {cell('held'):>15} "
            f"{cell('eval'):>15} {units * 8.0 * N * N / 1e9:11.1f} GB",
            flush=True,
        )
    if len(rows) >= 2:
        import numpy as np

        unit = np.array([8.0 * r["n"] ** 2 for r in rows])
        extra = np.array([r["eval"] - r["base"] for r in rows], dtype=float)
        b, a = np.polyfit(unit, extra, 1)
        print(
            f"fit: eval - base = {a / 1e6:.0f} MB + {b:.2f} x 8n^2; "
            f"at n = {N}: {(a + b * 8.0 * N * N) / 1e9:.1f} GB"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
