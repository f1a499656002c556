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

``--nuts``: fully Bayesian fits of the shared-hyperparameter softmax model, ``sample(method=
"nuts_joint")`` (labelled ``latent``: joint NUTS over the whitened latent GPs and ``(ls, eta)``; PyMC's sampler, as
``sampler="auto"`` picks for a latent model) and ``sample(method="nuts")`` (``laplace``: NUTS over
``(ls, eta)``, the latent GPs integrated out by the softmax Laplace approximation; nutpie), next
to scikit-learn on the same split. Equal conditions: ``--cores`` the same on both NUTS sides
(default 1, chains one after another; ``--cores 2``: in parallel, PyMC's chains in processes,
nutpie's in threads, which the native softmax Laplace solver allows), one BLAS thread everywhere
(scikit-learn's fit is single-threaded too). Reported: wall time of ``sample`` (model
construction, compilation, sampling and the per-draw post-processing) and of the sampling alone
(the posterior's ``sampling_time`` attribute where the sampler records it; ``nan`` where not),
minimum bulk ESS over the hyperparameters, min-ESS per second of the whole, divergences,
test accuracy and log-loss of the posterior predictive (200 posterior draws), and scikit-learn's
fit time and scores. scikit-learn has no sampler: its row is the time to a usable point fit, and
the comparison is time against predictive scores, not ESS.

``--agreement``: the statistical agreement of the two samplers on the seeded 3-class problem of
``tests/classification/test_multiclass_model.py`` (``_three_classes(n=45)``, one input, shared
``(ls, eta)``), against a deterministic reference: the posterior of ``(log ls, log eta)`` on a
grid, once under the Laplace evidence :math:`q(y \\mid \\theta)` (what ``method="nuts"``
samples) and once under the exact evidence :math:`p(y \\mid \\theta) = q(y \\mid \\theta)\\,
E_{\\tilde q}[p(y, f \\mid \\theta) / (q(y \\mid \\theta)\\tilde q(f))]` by importance sampling from
the Laplace Gaussian :math:`\\tilde q(f) = N(\\hat f, \\Sigma)` (R&W eq. 3.32); the predictive
probabilities at five test inputs under each (Laplace: R&W Algorithm 3.4; exact: the importance
weights on :math:`f_* \\mid f`, R&W eq. 2.19 per class). The difference of the two references is
the Laplace approximation's error; each sampler is compared with its own reference and with the
other, in units of their Monte Carlo standard errors (ArviZ).

Run from the repository root: ``python benchmarks/multiclass.py`` (``--quick``: iris only,
one start; ``--nuts``; ``--agreement``).
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import arviz as az
import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.special import log_softmax, logsumexp, softmax
from sklearn.datasets import load_digits, load_iris, load_wine
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process.kernels import RBF, ConstantKernel
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import train_test_split
from threadpoolctl import threadpool_limits

from bayes_gp.classification.multiclass import latent_predictive, softmax_average, softmax_laplace
from bayes_gp.classification.multiclass_model import MulticlassGPClassifier
from bayes_gp.inference.methods import LATENT_RENAMED

#: This script's names of the two NUTS paths -> ``sample(method=...)``'s ("nuts", "nuts_joint").
SAMPLE_METHOD = LATENT_RENAMED


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


def run_nuts_methods(name: str, seed: int, draws: int, tune: int, chains: int,
                     cores: int = 1) -> None:
    """NUTS (both methods) against scikit-learn on one split (module docstring, ``--nuts``)."""
    Xtr, Xte, ytr, yte = split(name, seed)
    rows = []
    sk = run_sklearn(Xtr, Xte, ytr, 3, seed)
    rows.append(("sklearn-ovr (3 starts)", sk["fit"], float("nan"), 0, sk["P"], sk["classes"]))
    for method, sampler in (("laplace", "nutpie"), ("latent", "pymc")):
        t0 = time.perf_counter()
        model = MulticlassGPClassifier(Xtr, ytr, "expquad")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = model.sample(draws=draws, tune=tune, chains=chains, sampler=sampler,
                                 random_seed=seed, method=SAMPLE_METHOD[method],
                                 cores=cores)  # fmt: skip
        seconds = time.perf_counter() - t0
        sampling = float(idata["posterior"].attrs.get("sampling_time", float("nan")))
        ess = min(float(az.ess(np.asarray(idata["posterior"][p]))) for p in
                  model.hyperparameters)  # fmt: skip
        div = int(idata["sample_stats"]["diverging"].sum())
        rows.append((f"NUTS {method} ({sampler})", seconds, ess, div,
                     model.predict_proba(Xte, idata), model.classes_))  # fmt: skip
        means = {p: round(float(idata["posterior"][p].mean()), 3) for p in model.hyperparameters}
        print(f"  {name} {method}: posterior means {means}; sampling alone {sampling:.1f} s, "
              f"min ESS / s of it {ess / sampling:.2f}", flush=True)  # fmt: skip
    for label, seconds, ess, div, P, classes in rows:
        P = np.clip(P, 1e-15, 1.0)
        acc = accuracy_score(yte, classes[np.argmax(P, axis=1)])
        ll = log_loss(yte, P, labels=classes)
        print(f"{name:6s} {label:24s} {seconds:8.1f} {ess:8.0f} {ess / seconds:8.2f} {div:4d} "
              f"{acc:6.3f} {ll:8.4f}", flush=True)  # fmt: skip


#: Test inputs of the ``--agreement`` check (the test's).
AGREEMENT_X = np.array([[-2.0], [-1.0], [0.0], [1.0], [2.0]])


def grid_reference(model: MulticlassGPClassifier, Xs: np.ndarray, n_grid: int = 25,
                   n_is: int = 4000, seed: int = 0,
                   bounds=((-1.5, 3.5), (-1.5, 3.0))) -> dict:  # fmt: skip
    r"""The hyperparameter posterior and predictive probabilities on a grid in
    :math:`u = (\log \ell, \log \eta)` (module docstring, ``--agreement``).

    Each grid point has the log density :math:`\log p(u) + \log q(y \mid \theta)` (the
    prior with its log-transform Jacobian, from the model) for the Laplace posterior, plus the
    importance-sampling correction :math:`\log \frac1S \sum_s w_s`,
    :math:`\log w_s = \Psi(f_s) - \Psi(\hat f) + \tfrac12 \lVert z_s \rVert^2`,
    :math:`f_s = \hat f + L_\Sigma z_s`, :math:`\Psi(f) = \log p(y \mid f) - \tfrac12 f^\top
    K^{-1} f`, for the exact one (R&W eqs. 3.32, 3.44). Points more than 12 nats below the
    Laplace maximum are dropped. Returns, for ``"laplace"`` and ``"exact"``, the posterior
    means and sds of ``ls`` and ``eta`` and the predictive probabilities ``P`` (m, C), and the
    smallest importance-sampling ESS over points holding posterior mass > 1e-3."""
    C, n = model.n_classes, model.X.shape[0]
    logp = model.model.compile_logp(vars=model.model.free_RVs, jacobian=True)
    names = [v.name for v in model.model.value_vars]
    rng = np.random.default_rng(seed)
    idx = np.arange(n)
    laplace_rows = []
    for u1 in np.linspace(*bounds[0], n_grid):
        for u2 in np.linspace(*bounds[1], n_grid):
            values = [np.array(np.exp(u1)), np.array(np.exp(u2))]
            K = model._train(values)
            res = softmax_laplace(K, model.Y)
            prior = float(logp(dict(zip(names, (u1, u2), strict=True))))
            laplace_rows.append((u1, u2, prior + res.log_evidence, K, res, values))
    top = max(r[2] for r in laplace_rows)
    pts = []
    for u1, u2, lq, K, res, values in laplace_rows:
        if lq < top - 12:
            continue
        Ks, kss = model._new(values, Xs)
        p_laplace = softmax_average(*latent_predictive(res, Ks, kss, model.Y), 4000, 0)
        L = np.linalg.cholesky(res.covariance(K))
        z = rng.standard_normal((n_is, C * n))
        f = res.f[None] + (z @ L.T).reshape(n_is, C, n)
        fac = [cho_factor(K[c], lower=True) for c in range(C)]

        def psi(f, fac=fac):  # (S, C, n) -> (S,)
            kinv = np.stack([cho_solve(fac[c], f[:, c].T).T for c in range(C)], axis=1)
            return (-0.5 * np.sum(f * kinv, axis=(1, 2))
                    + np.sum(log_softmax(f, axis=1)[:, model.t, idx], axis=1))  # fmt: skip

        log_w = psi(f) - psi(res.f[None])[0] + 0.5 * np.sum(z * z, axis=1)
        w = np.exp(log_w - logsumexp(log_w))
        A = np.stack([cho_solve(fac[c], Ks[c]) for c in range(C)])  # K_c^-1 k_c(X, x_*)
        mu = np.einsum("scn,cnm->smc", f, A)
        var = np.maximum(kss.T - np.einsum("cnm,cnm->mc", Ks, A), 0.0)[None]
        fs = mu + np.sqrt(var) * rng.standard_normal(mu.shape)
        p_exact = np.einsum("s,smc->mc", w, softmax(fs, axis=2))
        pts.append((u1, u2, lq, lq + logsumexp(log_w) - np.log(n_is), p_laplace, p_exact,
                    1.0 / np.sum(w * w)))  # fmt: skip
    ls, eta = np.exp([p[0] for p in pts]), np.exp([p[1] for p in pts])
    out = {}
    for key, j, k in (("laplace", 2, 4), ("exact", 3, 5)):
        lp = np.array([p[j] for p in pts])
        wg = np.exp(lp - logsumexp(lp))
        out[key] = {"ls": (wg @ ls, np.sqrt(wg @ ls**2 - (wg @ ls) ** 2)),
                    "eta": (wg @ eta, np.sqrt(wg @ eta**2 - (wg @ eta) ** 2)),
                    "P": np.einsum("g,gmc->mc", wg, np.array([p[k] for p in pts]))}  # fmt: skip
        if key == "exact":
            out["is_ess_min"] = float(min(p[6] for p, m in zip(pts, wg, strict=True)
                                          if m > 1e-3))  # fmt: skip
    out["n_points"] = len(pts)
    return out


def draw_probabilities(model: MulticlassGPClassifier, idata, Xs: np.ndarray,
                       n_samples: int = 400) -> np.ndarray:  # fmt: skip
    """The predictive probabilities of every posterior draw, ``(chain, draw, m, C)``: the
    per-draw terms whose mean is ``predict_proba`` (for the Monte Carlo standard error)."""
    post = idata["posterior"]
    shape = (post.sizes["chain"], post.sizes["draw"])
    moments = model._latent_moments(Xs, idata, shape[0] * shape[1])
    P = np.array([softmax_average(m, c, n_samples, k) for k, (m, c) in enumerate(moments)])
    return P.reshape(*shape, *P.shape[1:])


def run_agreement(draws: int, tune: int, chains: int, seed: int, n_grid: int) -> None:
    """Both samplers against the grid references (module docstring, ``--agreement``)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "classification"))
    from test_multiclass_model import _three_classes

    X, y = _three_classes(n=45)
    model = MulticlassGPClassifier(X, y, "expquad")
    t0 = time.perf_counter()
    ref = grid_reference(model, AGREEMENT_X, n_grid=n_grid)
    print(f"grid reference: {ref['n_points']} points, {time.perf_counter() - t0:.1f} s, "
          f"smallest importance-sampling ESS {ref['is_ess_min']:.0f}")  # fmt: skip
    for key in ("laplace", "exact"):
        r = ref[key]
        print(f"  {key:8s} ls {r['ls'][0]:.4f} (sd {r['ls'][1]:.4f})  eta {r['eta'][0]:.4f} "
              f"(sd {r['eta'][1]:.4f})")  # fmt: skip
    err = ref["laplace"]["P"] - ref["exact"]["P"]
    print(f"Laplace error of P (laplace - exact reference) at x = {AGREEMENT_X.ravel()}, "
          f"classes {list(model.classes_)}:\n{np.round(err, 4)}")  # fmt: skip
    runs = {}
    for method in ("laplace", "latent"):
        m = MulticlassGPClassifier(X, y, "expquad")
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kw = {"sampler": "nutpie"} if method == "laplace" else \
                {"sampler": "pymc", "compile_kwargs": {"mode": "FAST_RUN"}}
            idata = m.sample(draws=draws, tune=tune, chains=chains, random_seed=seed,
                             method=SAMPLE_METHOD[method], cores=1, **kw)  # fmt: skip
        P = draw_probabilities(m, idata, AGREEMENT_X)
        runs[method] = (idata, P)
        print(f"{method}: {time.perf_counter() - t0:.1f} s, divergences "
              f"{int(idata['sample_stats']['diverging'].sum())}")  # fmt: skip
        own = ref["laplace" if method == "laplace" else "exact"]
        for p in ("ls", "eta"):
            d = np.asarray(idata["posterior"][p])
            print(f"  {p:4s} mean {d.mean():.4f} mcse {float(az.mcse(d)):.4f} "
                  f"ess {float(az.ess(d)):.0f}  reference {own[p][0]:.4f}: "
                  f"z = {(d.mean() - own[p][0]) / float(az.mcse(d)):+.2f}")  # fmt: skip
        mc = np.array([[float(az.mcse(P[:, :, i, c])) for c in range(P.shape[3])]
                       for i in range(P.shape[2])])  # fmt: skip
        z = (P.mean(axis=(0, 1)) - own["P"]) / mc
        print(f"  P mcse max {mc.max():.4f}; P - reference, in mcse units: max |z| = "
              f"{np.abs(z).max():.2f}\n{np.round(z, 2)}")  # fmt: skip
    (ia, Pa), (ib, Pb) = runs["laplace"], runs["latent"]
    for p in ("ls", "eta"):
        a, b = np.asarray(ia["posterior"][p]), np.asarray(ib["posterior"][p])
        mc = np.hypot(float(az.mcse(a)), float(az.mcse(b)))
        shift = ref["laplace"][p][0] - ref["exact"][p][0]
        print(f"laplace - latent {p}: {a.mean() - b.mean():+.4f}; reference shift "
              f"{shift:+.4f}; (diff - shift) / mcse = {(a.mean() - b.mean() - shift) / mc:+.2f}")
    mc = np.hypot(*[np.array([[float(az.mcse(P[:, :, i, c])) for c in range(P.shape[3])]
                              for i in range(P.shape[2])]) for P in (Pa, Pb)])  # fmt: skip
    d = Pa.mean(axis=(0, 1)) - Pb.mean(axis=(0, 1))
    print(f"laplace - latent P:\n{np.round(d, 4)}\n(diff - Laplace error) / mcse: max |z| = "
          f"{np.abs((d - err) / mc).max():.2f}; without subtracting the error: "
          f"{np.abs(d / mc).max():.2f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                        help="one split (and optimiser seed) per value")
    parser.add_argument("--starts", type=int, default=3, help="optimiser runs per fit")
    parser.add_argument("--datasets", nargs="+", default=["iris", "wine", "digits"])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--nuts", action="store_true",
                        help="NUTS (both methods) against scikit-learn on --datasets")
    parser.add_argument("--agreement", action="store_true",
                        help="the two samplers against the grid references")
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--tune", type=int, default=500)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1,
                        help="--nuts: chains in parallel (both samplers)")
    parser.add_argument("--grid", type=int, default=25, help="grid points per axis")
    args = parser.parse_args()
    if args.agreement or args.nuts:
        print(f"load average at start: {os.getloadavg()}", flush=True)
        if args.agreement:
            run_agreement(args.draws, args.tune, args.chains, args.seeds[0], args.grid)
        if args.nuts:
            print(f"{'data':6s} {'method':24s} {'seconds':>8s} {'min ESS':>8s} {'ESS/s':>8s} "
                  f"{'div':>4s} {'acc':>6s} {'logloss':>8s}")  # fmt: skip
            with threadpool_limits(limits=1, user_api="blas"):
                for name in args.datasets:
                    run_nuts_methods(name, args.seeds[0], args.draws, args.tune, args.chains,
                                     args.cores)
        print(f"load average at end: {os.getloadavg()}")
        return
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
