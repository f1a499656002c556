"""Per-evaluation cost of the native Laplace solver against the NumPy one, in one and two threads.

For ``coal`` (n = 112, Poisson, Matérn 3/2) and ``pima`` (n = 200, Bernoulli-logit, SE), ten
kernel matrices with length-scales 0.8–1.25 times the posterior mean's (``latent_laplace.py``'s
posterior means) are each evaluated, with the gradient, by

* the native solver (:mod:`bayes_gp.latent.native`, called through ``ctypes``, which releases
  the GIL, as nutpie's threads call it without Python);
* the NumPy solver :func:`bayes_gp.latent.laplace.laplace` from a cold start (as the native one
  starts) and warm-started from the previous mode (as the object-mode Op does);

then the same work twice over in two threads at once (wall time per pair of evaluations: one
evaluation's time when the two run side by side, two when they serialise on the GIL).

Run ``python benchmarks/laplace_native.py`` (one BLAS thread).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import threading
import time

import numpy as np
from latent_laplace import _data

from bayes_gp import LatentGP
from bayes_gp.latent import laplace, native

#: (data, posterior-mean length-scale, amplitude) from latent_laplace.py's runs
POINTS = (("coal", 38.9, 1.11), ("pima", 5.13, 2.56))
REPS = 20


def _kernels(gp: LatentGP, kernel: str, ls: float, eta: float) -> list[np.ndarray]:
    X = np.asarray(gp._kernel_inputs, float)
    X = X.reshape(X.shape[0], -1)
    d = np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    out = []
    for s in np.linspace(0.8, 1.25, 10):
        r = d / (ls * s)
        if kernel == "matern32":
            K = eta**2 * (1 + np.sqrt(3) * r) * np.exp(-np.sqrt(3) * r)
        else:
            K = eta**2 * np.exp(-0.5 * r**2)
        out.append(K + 1e-6 * np.eye(X.shape[0]))
    return out


def _per_eval(fn, Ks, threads: int = 1) -> float:
    def work():
        for _ in range(REPS):
            for K in Ks:
                fn(K)

    ts = [threading.Thread(target=work) for _ in range(threads)]
    t = time.perf_counter()
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    return (time.perf_counter() - t) / (REPS * len(Ks))


def _measure(lik, Ks: list[np.ndarray]) -> tuple[dict, float, float]:
    """Seconds per evaluation of each way, and the mean Newton steps cold and warm."""
    m = np.zeros(lik.n)
    native.solve_arrays(Ks[0], m, lik)  # compiled or loaded from the cache
    steps = [laplace(K, m, lik, ()).n_iter for K in Ks]
    state = {"f0": laplace(Ks[0], m, lik, ()).f, "steps": []}

    def warm(K):
        r = laplace(K, m, lik, (), f0=state["f0"])
        state["f0"] = r.f
        state["steps"].append(r.n_iter)

    def nat(K):
        return native.solve_arrays(K, m, lik)

    def cold(K):
        return laplace(K, m, lik, ())

    rows = {
        "native": _per_eval(nat, Ks),
        "numpy_cold": _per_eval(cold, Ks),
        "numpy_warm": _per_eval(warm, Ks),
        "native_2_threads": _per_eval(nat, Ks, 2),
        "numpy_cold_2_threads": _per_eval(cold, Ks, 2),
    }
    return rows, float(np.mean(steps)), float(np.mean(state["steps"]))


def main() -> None:
    for name, ls, eta in POINTS:
        Xtr, ytr, _, _, lik_name, kernel = _data(name, 0)
        gp = LatentGP(Xtr, ytr, kernel, lik_name)
        rows, cold, warm = _measure(gp.likelihood, _kernels(gp, kernel, ls, eta))
        ms = ", ".join(f"{k} {1e3 * v:.2f} ms" for k, v in rows.items())
        print(f"{name} n={gp.likelihood.n}: {ms}; Newton steps cold {cold:.1f}, warm {warm:.1f}; "
              f"load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
