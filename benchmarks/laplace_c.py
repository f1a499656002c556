"""The Laplace-integrated latent GP in C (issue 41, ``bayes_gp.inference.native_laplace``)
against the same model on nutpie's numba backend (the Laplace Op on the native solver of
``bayes_gp.latent.native``): one evaluation of the log density with its gradient, and the
first fit in a fresh process.

Per evaluation: the two functions nutpie calls (C: ``lap_logp``; numba: the ``cfunc`` that
``nutpie.compile_pymc_model`` builds) at the same 100 points around the initial point (0.3
sd on the log scale), interleaved over 8 rounds, the fastest round of each kept, one thread,
compile time not included; both start Newton's method from f = m (the Op's ``start`` unset).
Data: Pima (Ripley's 200 training cases, 7 standardised inputs, Bernoulli-logit, isotropic
squared exponential) and the coal-mining series (112 yearly counts, Poisson, Matérn 3/2: the
declared model's kernel and data).

``--first-fit`` adds, per data set, ``sample(method="nuts")`` with 2 chains in parallel x
(300 + 300) (notebook 03's fast mode) in a fresh process with an empty PyTensor compile
directory (a new machine), C, then numba (``BAYES_GP_NATIVE=0``, its compilation included),
then C again with the compile directory kept from the first C run (a second process). The
1-min load average is printed with each row.

    python benchmarks/laplace_c.py [--first-fit]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_DATA = r"""
import numpy as np
from bayes_gp import LatentGP

def data(name):
    if name == "pima":
        from bayes_gp.datasets import rdataset
        tr = rdataset("Pima.tr")
        cols = [c for c in tr.columns if c != "type"]
        X = ((tr[cols] - tr[cols].mean()) / tr[cols].std()).to_numpy()
        return LatentGP(X, (tr["type"] == "Yes").to_numpy(int), "expquad", "bernoulli")
    from bayes_gp.declared import load_model
    d = load_model("coal_mining").load_data()
    return LatentGP(d.X_train, d.y_train, "matern32", "poisson")
"""


def _model(name: str):
    scope: dict = {}
    exec(_DATA, scope)
    return scope["data"](name)


def per_evaluation() -> None:
    import nutpie
    from native_kernels import _caller  # (this directory)

    from bayes_gp.inference import native_gp

    print("ms per log density + gradient (fastest of 8 interleaved rounds of 100 points), "
          "one thread")  # fmt: skip
    print(f"{'data':8s} {'n':>4s} {'C':>8s} {'numba':>8s} {'C/numba':>8s}")
    for name in ("pima", "coal"):
        gp = _model(name)
        c_model, reason = native_gp.compile_native(gp.model)
        assert c_model is not None, reason
        numba_model = nutpie.compile_pymc_model(gp.model, backend="numba")  # (kept alive)
        fns = {"C": _caller(c_model), "numba": _caller(numba_model)}
        rng = np.random.default_rng(0)
        x0 = c_model.initial_point_func(1)
        points = [x0 + 0.3 * rng.standard_normal(x0.size) for _ in range(100)]
        grad, logp = np.zeros(x0.size), np.zeros(1)
        values = {}
        best = dict.fromkeys(fns, np.inf)
        for _ in range(8):
            for label, (fn, data) in fns.items():
                start = time.perf_counter()
                for k, p in enumerate(points):
                    fn(p.size, p.ctypes.data, grad.ctypes.data, logp.ctypes.data, data)
                    values.setdefault(label, {})[k] = float(logp[0])
                best[label] = min(best[label], (time.perf_counter() - start) / len(points))
        diff = max(abs(values["C"][k] - values["numba"][k]) / abs(values["numba"][k])
                   for k in values["C"])  # fmt: skip
        print(f"{name:8s} {gp.X.shape[0]:4d} {best['C'] * 1e3:8.3f} {best['numba'] * 1e3:8.3f} "
              f"{best['C'] / best['numba']:8.2f}   (log densities agree to {diff:.1e}; "
              f"load {os.getloadavg()[0]:.2f})")  # fmt: skip


_FIT = _DATA + r"""
import json, sys, time
t0 = time.perf_counter()
gp = data(sys.argv[1])
idata = gp.sample(method="nuts", draws=300, tune=300, chains=2, random_seed=5, sampler="nutpie")
a = idata["posterior"].attrs
import arviz as az
ess = min(float(az.ess(idata, var_names=[p])[p].min()) for p in gp.hyperparameters)
print(json.dumps({"seconds": time.perf_counter() - t0, "sampling": float(a["sampling_time"]),
                  "backend": a["bayes_gp_nutpie_backend"], "ess": ess}))
"""


def first_fit() -> None:
    print("\nsample(method='nuts') in a fresh process (2 chains in parallel x (300 + 300))")
    for name in ("pima", "coal"):
        with tempfile.TemporaryDirectory() as kept:
            for label, native, compiledir in (("cold", "1", None), ("cold", "0", None),
                                              ("second process", "1", kept)):  # fmt: skip
                with tempfile.TemporaryDirectory() as tmp:
                    env = {**os.environ, "BAYES_GP_NATIVE": native, "OPENBLAS_NUM_THREADS": "1",
                           "PYTENSOR_FLAGS": f"base_compiledir={compiledir or tmp}",
                           "PYTHONPATH": ROOT}  # fmt: skip
                    if compiledir and not os.listdir(kept):  # fill it first
                        subprocess.run([sys.executable, "-c", _FIT, name], env=env, check=True,
                                       capture_output=True)  # fmt: skip
                    out = subprocess.run([sys.executable, "-c", _FIT, name], env=env,
                                         capture_output=True, text=True)  # fmt: skip
                    if out.returncode != 0:
                        raise RuntimeError(out.stderr[-3000:])
                r = json.loads(out.stdout.strip().splitlines()[-1])
                print(f"{name:6s} {r['backend']:7s} {label:15s} import+build+compile+NUTS "
                      f"{r['seconds']:6.1f} s, sampling {r['sampling']:5.1f} s, min ESS "
                      f"{r['ess']:.0f}   load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--first-fit", action="store_true", help="also time the first fits")
    args = parser.parse_args()
    per_evaluation()
    if args.first_fit:
        first_fit()
