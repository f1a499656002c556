"""Sums of products of catalogue kernels on the C path (issue 41): one gradient of the exact
GP's log density in C (``bayes_gp.inference.native_gp``) against PyMC's numba graph of the same
model, and the Mauna Loa main job's first fit on each.

Per gradient: the two log density functions nutpie calls (C: ``gp_logp``; numba: the ``cfunc``
``nutpie.compile_pymc_model`` builds) at the same 200 points around the initial point, the
runs interleaved (12 rounds) and the fastest round of each kept, one thread, compile time not
included. Models, n = 144:

* ``mauna loa``: the declared model (R&W §5.4.3, ``expquad + expquad * periodic + ratquad +
  expquad``) on its monthly grid, where both evaluate the kernel at the grid's lags only
  (``bayes_gp.kernels.lags``; the C code gathers C from that table the same way);
* ``mauna loa, scattered``: the same kernel at the months moved by up to 0.01 yr, so that
  neither can use a lag table (all pairs);
* ``expquad, scattered``: one factor.

``--first-fit`` adds the main job's NUTS (``./run main``'s settings: 2 chains in parallel x
(700 + 2000), target acceptance 0.95, seed 1), each in a fresh process with an empty PyTensor
compile directory (a new machine): C, and with ``BAYES_GP_NATIVE=0`` numba (its compilation
included). The 1-min load average is printed with each run.

    python benchmarks/native_kernels.py [--first-fit]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNEL = "expquad + expquad * periodic + ratquad + expquad"


def _models():
    from bayes_gp import GPRegression
    from bayes_gp.declared import load_model

    decl = load_model("mauna_loa")
    data = decl.load_data(fast=True)
    moved = data.X_train + np.random.default_rng(5).uniform(-0.01, 0.01, data.X_train.shape)
    return {
        "mauna loa": decl.build(data, "nuts").model,
        "mauna loa, scattered": GPRegression(moved, data.y_train, KERNEL).model,
        "expquad, scattered": GPRegression(moved, data.y_train, "expquad").model,
    }


def _caller(cm):
    fn = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_uint64, *[ctypes.c_void_p] * 4)(
        cm.compiled_logp_func.address
    )
    return fn, cm.user_data.ctypes.data


def per_gradient() -> None:
    import nutpie

    from bayes_gp.inference import native_gp

    print("ms per gradient (fastest of 12 interleaved rounds of 200 points), one thread")
    print(f"{'model':24s} {'C':>8s} {'numba':>8s} {'C/numba':>8s}")
    for name, model in _models().items():
        c_model, reason = native_gp.compile_native(model)
        assert c_model is not None, reason
        numba_model = nutpie.compile_pymc_model(model, backend="numba")  # (kept alive: its
        fns = {"C": _caller(c_model), "numba": _caller(numba_model)}  # user_data points in)
        rng = np.random.default_rng(0)
        x0 = c_model.initial_point_func(1)
        points = [x0 + 0.05 * rng.standard_normal(x0.size) for _ in range(200)]
        grad, logp = np.zeros(x0.size), np.zeros(1)
        best = dict.fromkeys(fns, np.inf)
        for _ in range(12):
            for label, (fn, data) in fns.items():
                start = time.perf_counter()
                for p in points:
                    fn(p.size, p.ctypes.data, grad.ctypes.data, logp.ctypes.data, data)
                best[label] = min(best[label], (time.perf_counter() - start) / len(points))
        print(f"{name:24s} {best['C'] * 1e3:8.3f} {best['numba'] * 1e3:8.3f} "
              f"{best['C'] / best['numba']:8.2f}   load {os.getloadavg()[0]:.2f}")  # fmt: skip


_FIT = r"""
import json, time
t0 = time.perf_counter()
from bayes_gp.declared import load_model
decl = load_model("mauna_loa"); gp = decl.build(decl.load_data(fast=True), "nuts")
idata = gp.sample(draws=2000, tune=700, chains=2, target_accept=0.95, random_seed=1)
a = idata["posterior"].attrs
steps = int(idata["sample_stats"]["n_steps"].sum())
print(json.dumps({"seconds": time.perf_counter() - t0, "sampling": float(a["sampling_time"]),
                  "backend": a["bayes_gp_nutpie_backend"], "steps": steps}))
"""


def first_fit() -> None:
    print("\nthe main job's NUTS in a fresh process, empty compile directory "
          "(2 chains in parallel x (700 + 2000))")  # fmt: skip
    for native in ("1", "0"):
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "BAYES_GP_NATIVE": native, "OPENBLAS_NUM_THREADS": "1",
                   "PYTENSOR_FLAGS": f"base_compiledir={tmp}", "PYTHONPATH": ROOT}  # fmt: skip
            out = subprocess.run([sys.executable, "-c", _FIT], env=env, capture_output=True,
                                 text=True, check=True).stdout.strip().splitlines()[-1]  # fmt: skip
        r = json.loads(out)
        print(f"{r['backend']:8s} import+build+compile+NUTS {r['seconds']:6.1f} s, sampling "
              f"{r['sampling']:5.1f} s, {r['steps']} leapfrog steps after tuning   "
              f"load {os.getloadavg()[0]:.2f}")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--first-fit", action="store_true", help="also time the main job's NUTS")
    args = parser.parse_args()
    per_gradient()
    if args.first_fit:
        first_fit()
