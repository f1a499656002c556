"""Multi-class GP classification: bayes_gp's softmax Laplace (R&W Algorithms 3.3/3.4) against
scikit-learn's one-vs-rest ``GaussianProcessClassifier``.

For each data set, on the same stratified train/test split, the methods are

* ``sklearn-ovr``: ``GaussianProcessClassifier(ConstantKernel * RBF, n_restarts_optimizer =
  starts - 1)`` (one binary Laplace classifier per class, each with its own amplitude and
  length-scale; probabilities renormalised);
* ``softmax-shared``: ``MulticlassGPClassifier(..., "expquad").fit_laplace(n_restarts=starts)``,
  ML-II, one amplitude and length-scale for all classes;
* ``softmax-per-class``: the same with ``shared=False`` (one amplitude and length-scale per
  class, as scikit-learn's);
* ``softmax-shared-MAP``: ``shared=True`` with ``prior=True`` (the default hyperpriors:
  :math:`\\eta \\sim \\mathrm{HalfNormal}(2)`, a log-normal length-scale around a third of the
  input range).

All on the same inputs: standardised with the training statistics (iris, wine) or the pixel
intensities divided by 16 (digits). Reported: test accuracy, test log-loss (mean negative log
predictive probability of the observed label, probabilities clipped to [1e-15, 1]), the wall
time of the fit (model construction, compilation and optimisation) and of the predictions, the
approximate log evidence of the type-II fits, and the machine's load average (the machine is
shared: times vary with the load).

Data (scikit-learn's bundled sets, no download): ``iris`` (150 x 4, 3 classes), ``wine``
(178 x 13, 3 classes), ``digits`` (``load_digits``, the digits 0-3, 300 images drawn with the
seed, 64 pixels). Half of each set trains (``train_test_split(stratify=y,
random_state=seed)``).

Run from the repository root: ``python benchmarks/multiclass.py`` (``--quick``: iris only,
one start).
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits, load_iris, load_wine
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process.kernels import RBF, ConstantKernel
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import train_test_split
from threadpoolctl import threadpool_limits

from bayes_gp.classification.multiclass_model import MulticlassGPClassifier


def split(name: str, seed: int):
    """``(X_train, X_test, y_train, y_test, note)`` of a data set (module docstring)."""
    if name == "digits":
        X, y = load_digits(return_X_y=True)
        keep = np.flatnonzero(y < 4)
        keep = np.sort(np.random.default_rng(seed).choice(keep, 300, replace=False))
        X, y = X[keep] / 16.0, y[keep]
    else:
        X, y = (load_iris if name == "iris" else load_wine)(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.5, stratify=y, random_state=seed)
    if name != "digits":
        mu, sd = Xtr.mean(axis=0), Xtr.std(axis=0)
        Xtr, Xte = (Xtr - mu) / sd, (Xte - mu) / sd
    return Xtr, Xte, ytr, yte


def run_sklearn(Xtr, Xte, ytr, starts: int, seed: int) -> dict:
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sk = GaussianProcessClassifier(ConstantKernel() * RBF(), n_restarts_optimizer=starts - 1,
                                       random_state=seed).fit(Xtr, ytr)  # fmt: skip
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    P = sk.predict_proba(Xte)
    return {"fit": fit_s, "pred": time.perf_counter() - t0, "P": P, "classes": sk.classes_,
            "lml": float(sk.log_marginal_likelihood_value_)}  # fmt: skip


def run_softmax(Xtr, Xte, ytr, starts: int, seed: int, shared: bool, prior: bool) -> dict:
    t0 = time.perf_counter()
    model = MulticlassGPClassifier(Xtr, ytr, "expquad", shared=shared)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = model.fit_laplace(n_restarts=starts, prior=prior, random_seed=seed)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    P = model.predict_proba(Xte, fit)
    return {"fit": fit_s, "pred": time.perf_counter() - t0, "P": P, "classes": model.classes_,
            "lml": float(fit.log_marginal_likelihood), "converged": fit.converged}  # fmt: skip


METHODS = {
    "sklearn-ovr": lambda *a: run_sklearn(*a),
    "softmax-shared": lambda *a: run_softmax(*a, shared=True, prior=False),
    "softmax-per-class": lambda *a: run_softmax(*a, shared=False, prior=False),
    "softmax-shared-MAP": lambda *a: run_softmax(*a, shared=True, prior=True),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                        help="one split (and optimiser seed) per value")
    parser.add_argument("--starts", type=int, default=3, help="optimiser runs per fit")
    parser.add_argument("--datasets", nargs="+", default=["iris", "wine", "digits"])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    datasets = ["iris"] if args.quick else args.datasets
    starts = 1 if args.quick else args.starts
    print(f"load average at start: {os.getloadavg()}")
    header = f"{'data':8s} {'method':20s} {'acc':>6s} {'logloss':>8s} {'fit s':>7s} " \
             f"{'pred s':>7s} {'log evid':>9s}"  # fmt: skip
    print(header)
    print("-" * len(header))
    seeds = args.seeds[:1] if args.quick else args.seeds
    rows: dict[tuple[str, str], list] = {}
    with threadpool_limits(limits=1, user_api="blas"):
        for seed in seeds:
            for name in datasets:
                Xtr, Xte, ytr, yte = split(name, seed)
                for method, run in METHODS.items():
                    r = run(Xtr, Xte, ytr, starts, seed)
                    P = np.clip(r["P"], 1e-15, 1.0)
                    acc = accuracy_score(yte, r["classes"][np.argmax(P, axis=1)])
                    ll = log_loss(yte, P, labels=r["classes"])
                    rows.setdefault((name, method), []).append((acc, ll, r["fit"]))
                    flag = "" if r.get("converged", True) else " (not converged)"
                    print(f"{name:8s} {method:20s} {acc:6.3f} {ll:8.4f} {r['fit']:7.2f} "
                          f"{r['pred']:7.2f} {r['lml']:9.3f}  seed {seed}{flag}")  # fmt: skip
    print(f"load average at end: {os.getloadavg()}")
    print(f"\nmeans over seeds {seeds}:")
    print(f"{'data':8s} {'method':20s} {'acc':>6s} {'logloss':>8s} {'fit s':>7s}")
    for (name, method), vals in rows.items():
        acc, ll, fit_s = np.mean(vals, axis=0)
        print(f"{name:8s} {method:20s} {acc:6.3f} {ll:8.4f} {fit_s:7.2f}")
    print("sklearn's log evidence is the mean of its one-vs-rest binary evidences; the softmax "
          "rows' is the softmax Laplace evidence: not comparable across the two")


if __name__ == "__main__":
    main()
