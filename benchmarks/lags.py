"""Kernels on a grid: the Gram matrix from a table of lags against all pairs, and scikit-learn.

Times one evaluation of the exact GP log marginal likelihood and its gradient (what NUTS and
L-BFGS call at every step) for the Mauna Loa kernel of R&W §5.4.3 (``expquad + expquad *
periodic + ratquad + expquad`` + noise, 12 hyperparameters) on monthly series:

* ``lags``: :class:`bayes_gp.GPRegression`'s model as it is built for inputs on a grid (the
  kernel at the J + 1 lags, K gathered from the table; :mod:`bayes_gp.kernels.lags`);
* ``all pairs``: the same model on the same inputs moved off the grid by at most 1e-7 years
  (the kernel on all n^2 pairs, as before the tables: the lag table no longer applies);
* ``sklearn``: scikit-learn's ``GaussianProcessRegressor.log_marginal_likelihood(theta,
  eval_gradient=True)`` with the same kernel (C * RBF + C * RBF * ExpSineSquared + C *
  RationalQuadratic + C * RBF + WhiteKernel), on the same data.

The PyTensor functions are compiled with numba (what nutpie runs) and called with
``trust_input=True``; times are the fastest of ``--repeats`` calls after a warm-up call, with one
BLAS thread. Data: the monthly CO2 means from 1990 on (n = 144, the main job's data), and
synthetic monthly series of ``--sizes`` months.

    python benchmarks/lags.py                    # n in 144 (CO2), 500, 1000 (lags.MAX_N lifted)
    python benchmarks/lags.py --sizes 300 --repeats 50
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from datetime import date
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
from _timing import best_time, logp_dlogp
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process import kernels as skk

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bayes_gp import GPRegression
from bayes_gp.kernels import lags
from models import mauna_loa

#: Hyperparameters (R&W Table 5.1's optimum, in the model's names).
THETA = {
    "expquad1_eta": 66.0,
    "expquad1_ls": 67.0,
    "expquad2_eta": 2.4,
    "expquad2_ls": 90.0,
    "periodic_ls": 1.3,
    "periodic_period": 1.0,
    "ratquad_eta": 0.66,
    "ratquad_ls": 1.2,
    "ratquad_alpha": 0.78,
    "expquad3_eta": 0.18,
    "expquad3_ls": 0.134,
    "sigma": 0.19,
}


def sklearn_kernel(t: dict):
    """The same kernel in scikit-learn's terms (its ExpSineSquared length-scale is R&W's, as
    bayes_gp's ``Periodic``)."""
    return (
        skk.ConstantKernel(t["expquad1_eta"] ** 2) * skk.RBF(t["expquad1_ls"])
        + skk.ConstantKernel(t["expquad2_eta"] ** 2)
        * skk.RBF(t["expquad2_ls"])
        * skk.ExpSineSquared(t["periodic_ls"], t["periodic_period"])
        + skk.ConstantKernel(t["ratquad_eta"] ** 2)
        * skk.RationalQuadratic(t["ratquad_ls"], t["ratquad_alpha"])
        + skk.ConstantKernel(t["expquad3_eta"] ** 2) * skk.RBF(t["expquad3_ls"])
        + skk.WhiteKernel(t["sigma"] ** 2)
    )


def series(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` months from 1990 (mid-month decimal years) and a CO2-like series on them."""
    x = 1990.0 + (np.arange(n) + 0.5) / 12.0
    rng = np.random.default_rng(seed)
    y = 350 + 1.5 * (x - 1990) + 3 * np.sin(2 * np.pi * x) + 0.3 * rng.normal(size=n)
    return x, y


def timings(x: np.ndarray, y: np.ndarray, repeats: int) -> dict[str, float]:
    X = x[:, None]
    off = X + 1e-7 * np.random.default_rng(1).uniform(-1, 1, size=X.shape)
    out = {}
    for label, inputs in (("lags", X), ("all pairs", off)):
        gp = GPRegression(inputs, y, mauna_loa.KERNEL, mean=None, priors=mauna_loa.PRIORS)
        out[label] = best_time(logp_dlogp(gp.model, THETA, "NUMBA"), repeats)
    sk = GaussianProcessRegressor(sklearn_kernel(THETA), optimizer=None, normalize_y=False)
    sk.fit(X, y - y.mean())
    theta = sk.kernel_.theta
    out["sklearn"] = best_time(
        lambda: sk.log_marginal_likelihood(theta, eval_gradient=True), repeats
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 1000])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    # measure the tables at every size, also above the limit they are used up to in models
    lags.MAX_N = max(lags.MAX_N, *args.sizes)
    print(
        f"# {date.today()} {platform.machine()} {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.2f}; one BLAS thread; ms per log density + gradient"
    )
    cases = [("CO2 from 1990", *mauna_loa.monthly_co2())]
    x, y = cases[0][1:]
    cases[0] = ("CO2 from 1990", x[x >= mauna_loa.FAST_FROM], y[x >= mauna_loa.FAST_FROM])
    cases += [(f"synthetic, {n} months", *series(n)) for n in args.sizes]
    print("| data | n | lags | all pairs | sklearn | all pairs / lags | sklearn / lags |")
    print("|---|---|---|---|---|---|---|")
    for label, x, y in cases:
        t = timings(x, y, args.repeats)
        print(
            f"| {label} | {x.size} | {t['lags']:.2f} | {t['all pairs']:.2f} | "
            f"{t['sklearn']:.2f} | {t['all pairs'] / t['lags']:.1f}x | "
            f"{t['sklearn'] / t['lags']:.1f}x |"
        )
    print(f"# load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
