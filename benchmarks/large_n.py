"""Large-N GP regression: ``GPRegression(..., approx="hsgp"|"vfe"|"fitc")`` against the exact GP.

Four parts, on 1-D synthetic data (fixed seeds):

* ``accuracy`` (N = ``--exact-n``, default 1000, where the exact GP still samples in minutes):
  MAP fits (``fit_map(prior=True)``) and NUTS of the exact model and of each approximation with
  its default settings; reported: the predictive mean and sd errors on a grid, relative to the
  exact predictive sd (at each model's own MAP, and from the NUTS mixtures), and the shift of the
  hyperparameter posterior means in exact posterior sds.
* ``scale`` (N = 10^4 and 10^5 by default): model construction, MAP fit and a short NUTS run for
  ``hsgp`` and ``vfe`` (nutpie; ``log_likelihood=False``: no LOO terms), with ESS and
  divergences, the time of one draw's LOO terms and, at 10^4, the predictive error against the
  exact GP at the approximation's MAP (one dense solve). VFE's NUTS at 10^5 is only estimated
  from its gradient time by default (``--skip-nuts``).
* ``pymc_hsgp`` (N = 10^4): PyMC's own ``pm.gp.HSGP`` with the m weights sampled (non-centred
  and centred) beside the hyperparameters, same priors, m and c: the parametrisation the
  collapsed likelihood replaces.
* ``sklearn``: scikit-learn's exact ``GaussianProcessRegressor`` (ConstantKernel * RBF +
  WhiteKernel) fitted at ``--sk-fit-n`` (default 2000) against bayes_gp's exact ML-II and HSGP
  ML-II; at 10^4 one log-marginal-likelihood-and-gradient evaluation (a fit needs tens of
  them); at 10^5 not attempted (the Gram matrix alone is 80 GB).

Data: x uniform on [0, 10]; f a draw from a squared-exponential GP (ls = 0.8, eta = 1) by
2000 random Fourier features (Rahimi & Recht 2007), so every N sees the same function;
y = f + N(0, 0.3^2). BLAS is pinned to one thread.

Run ``python benchmarks/large_n.py --help``; ``--quick`` is a smoke run (small N, few draws).
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import time
import warnings
from datetime import date

import arviz as az
import numpy as np
import pymc as pm
import pytensor
import scipy.linalg  # noqa: F401  (loads SciPy's BLAS before pinning it)
import sklearn
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
from threadpoolctl import threadpool_limits

from bayes_gp import GPRegression

PARAMS = ("ls", "eta", "sigma")
TRUE = {"ls": 0.8, "eta": 1.0, "sigma": 0.3}
XS = np.linspace(0.0, 10.0, 201)


def simulate(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` observations of one fixed SE-GP draw (random Fourier features, seed ``seed``)."""
    feat = np.random.default_rng([seed, 0])
    J = 2000
    omega = feat.standard_normal(J) / TRUE["ls"]
    phase = feat.uniform(0.0, 2.0 * np.pi, J)
    weight = feat.standard_normal(J)
    rng = np.random.default_rng([seed, n])
    x = np.sort(rng.uniform(0.0, 10.0, n))
    f = np.empty(n)
    for s in range(0, n, 10_000):  # chunks: (n, J) would be 1.6 GB at n = 10^5
        f[s : s + 10_000] = np.cos(np.outer(x[s : s + 10_000], omega) + phase) @ weight
    f *= TRUE["eta"] * np.sqrt(2.0 / J)
    return x, f + TRUE["sigma"] * rng.standard_normal(n)


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def errors(pred, ref) -> tuple[float, float]:
    """max |mean - mean_ref| / sd_ref and max |sd - sd_ref| / sd_ref on the grid."""
    return (
        float(np.max(np.abs(pred.mean - ref.mean) / ref.sd)),
        float(np.max(np.abs(pred.sd - ref.sd) / ref.sd)),
    )


def describe(model: GPRegression) -> str:
    ap = model.approximation
    if ap is None:
        return "exact"
    if model.approx.name == "hsgp":
        return f"hsgp m={ap.m[0]} c={ap.c[0]:.2f}"
    return f"{model.approx.name} M={ap.Xu.shape[0]}"


def nuts(model: GPRegression, args, log_likelihood: bool):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata, wall = timed(
            model.sample,
            draws=args.draws,
            tune=args.tune,
            chains=args.chains,
            sampler="nutpie",
            random_seed=args.seed,
            log_likelihood=log_likelihood,
        )
    post = idata["posterior"].to_dataset()
    ess = az.ess(post[list(PARAMS)], method="bulk")
    stats = idata["sample_stats"]
    steps = stats["n_steps"] if "n_steps" in stats else stats["tree_size"]
    return idata, {
        "wall": wall,
        "ess": min(float(ess[p]) for p in PARAMS),
        "div": int(np.asarray(stats["diverging"]).sum()),
        "steps": float(np.asarray(steps).mean()),
    }


# ---------------------------------------------------------------------------------- accuracy
def accuracy(args) -> None:
    n = args.exact_n
    x, y = simulate(n, args.seed)
    print(f"\n== accuracy against the exact GP, N = {n} (1-D SE kernel, default priors) ==")
    models = {"exact": GPRegression(x, y, "expquad")}
    for kind in ("hsgp", "vfe", "fitc"):
        models[kind] = GPRegression(x, y, "expquad", approx=kind)
    fits, secs = {}, {}
    for name, model in models.items():
        fits[name], secs[name] = timed(model.fit_map, n_restarts=3, prior=True, random_seed=0)
    ref_fit = fits["exact"]
    ref_pred = models["exact"].predict(XS, ref_fit)
    print(
        "\nMAP (fit_map(prior=True, n_restarts=3)); errors on 201 grid points in [0, 10], relative"
        " to the exact predictive sd\n"
    )
    print(
        f"{'model':<22} {'MAP s':>7} | {'ls':>7} {'eta':>7} {'sigma':>7} | "
        f"{'own MAP: mean':>13} {'sd':>8} | {'exact MAP: mean':>15} {'sd':>8} | {'lml - exact':>11}"
    )
    print("-" * 118)
    for name, model in models.items():
        fit = fits[name]
        own = errors(model.predict(XS, fit), ref_pred)
        same = errors(model.predict(XS, ref_fit), ref_pred)
        dl = model.log_marginal_likelihood(ref_fit.params) - models[
            "exact"
        ].log_marginal_likelihood(ref_fit.params)
        p = fit.params
        print(
            f"{describe(model):<22} {secs[name]:7.1f} | {float(p['ls']):7.4f} "
            f"{float(p['eta']):7.4f} {float(p['sigma']):7.4f} | {own[0]:13.2e} {own[1]:8.2e} | "
            f"{same[0]:15.2e} {same[1]:8.2e} | {dl:11.2e}"
        )
    if args.skip_exact_nuts:
        return
    print(
        f"\nNUTS (nutpie, {args.chains} chains x {args.acc_tune} tune + {args.acc_draws} draws); "
        "shift = (posterior mean - exact posterior mean) / exact posterior sd\n"
    )
    acc = argparse.Namespace(**{**vars(args), "tune": args.acc_tune, "draws": args.acc_draws})
    runs = {}
    for name, model in models.items():
        runs[name] = nuts(model, acc, log_likelihood=False)
    post_ref = runs["exact"][0]["posterior"]
    mix_ref = models["exact"].predict(XS, runs["exact"][0])
    print(
        f"{'model':<22} {'wall s':>7} {'minESS':>7} {'div':>4} {'steps':>6} | "
        + " ".join(f"{'shift ' + p:>11}" for p in PARAMS)
        + f" | {'mixture mean':>12} {'sd':>8}"
    )
    print("-" * 112)
    for name, (idata, r) in runs.items():
        post = idata["posterior"]
        shifts = [
            (float(post[p].mean()) - float(post_ref[p].mean())) / float(post_ref[p].std())
            for p in PARAMS
        ]
        mix = errors(models[name].predict(XS, idata), mix_ref)
        print(
            f"{describe(models[name]):<22} {r['wall']:7.1f} {r['ess']:7.0f} {r['div']:4d} "
            f"{r['steps']:6.1f} | "
            + " ".join(f"{s:11.3f}" for s in shifts)
            + f" | {mix[0]:12.2e} {mix[1]:8.2e}"
        )
    print(
        "\n(exact row: 0 by definition. Monte Carlo noise of a shift is about "
        "sqrt(1/ESS_approx + 1/ESS_exact) posterior sds.)"
    )


# ------------------------------------------------------------------------------------- scale
def grad_seconds(model: GPRegression, repeats: int = 5) -> float:
    """Median time of one log density + gradient (PyTensor C backend) at the initial point."""
    m = model.model
    logp = m.logp()
    fn = pytensor.function(m.value_vars, [logp, *pytensor.grad(logp, m.value_vars)])
    point = m.initial_point()
    args = [point[v.name] for v in m.value_vars]
    fn(*args)
    times = [timed(fn, *args)[1] for _ in range(repeats)]
    return float(np.median(times))


def scale(args) -> None:
    print(
        f"\n== time at large N: construction, MAP (fit_map(prior=True, n_restarts=3)), NUTS "
        f"(nutpie, {args.chains} chains x {args.tune} tune + {args.draws} draws, no LOO terms) =="
    )
    print(
        f"\n{'N':>7} {'model':<19} {'build s':>7} {'grad ms':>8} {'MAP s':>6} | {'ls':>6} "
        f"{'eta':>6} {'sigma':>7} | {'NUTS s':>7} {'minESS':>6} {'ESS/s':>6} {'div':>3} "
        f"{'steps':>5} | {'LOO/draw s':>10} | {'vs exact: mean':>14} {'sd':>8}"
    )
    print("-" * 144)
    exact_s, ref_err = {}, {}
    for n in args.sizes:
        x, y = simulate(n, args.seed)
        for kind in args.approx:
            model, build = timed(GPRegression, x, y, "expquad", approx=kind)
            t_grad = grad_seconds(model)
            fit, t_map = timed(model.fit_map, n_restarts=3, prior=True, random_seed=0)
            if kind in args.nuts_approx and (kind, n) not in args.skip_nuts:
                _, r = nuts(model, args, log_likelihood=False)
                nuts_cols = (
                    f"{r['wall']:7.1f} {r['ess']:6.0f} {r['ess'] / r['wall']:6.2f} "
                    f"{r['div']:3d} {r['steps']:5.1f}"
                )
            else:
                steps = 10.0
                est = args.chains * (args.tune + args.draws) * steps * t_grad / 60
                nuts_cols = f"{f'not run (~{est:.0f} min at {steps:.0f} steps)':>31}"
            _, t_loo = timed(model._pointwise_loo, model._values(fit.params))
            if n <= args.exact_pred_max:
                # the exact predictive at the approximation's MAP: one dense N x N solve
                exact = GPRegression(x, y, "expquad")
                ref, t_ex = timed(exact.predict, XS, fit)
                exact_s[n] = t_ex
                err = errors(model.predict(XS, fit), ref)
                exact_cols = f"{err[0]:14.2e} {err[1]:8.2e}"
                if kind == "hsgp":  # how close the reference used at larger N is to exact
                    opts = {"m": args.reference_m, "c": args.reference_c}
                    big = GPRegression(x, y, "expquad", approx="hsgp", approx_options=opts)
                    ref_err[n] = errors(big.predict(XS, fit), ref)
                del exact
            else:
                # no exact GP: against an HSGP with m = 600, c = 22 (2e-7 from the exact GP at
                # N = 10^4 in the same units), marked *
                opts = {"m": args.reference_m, "c": args.reference_c}
                big = GPRegression(x, y, "expquad", approx="hsgp", approx_options=opts)
                err = errors(model.predict(XS, fit), big.predict(XS, fit))
                exact_cols = f"{err[0]:13.2e}* {err[1]:8.2e}"
            p = fit.params
            print(
                f"{n:7d} {describe(model):<19} {build:7.1f} {1e3 * t_grad:8.2f} {t_map:6.1f} | "
                f"{float(p['ls']):6.3f} {float(p['eta']):6.3f} {float(p['sigma']):7.4f} | "
                f"{nuts_cols} | {t_loo:10.2f} | {exact_cols}",
                flush=True,
            )
    print(
        "\ngrad ms: one log density + gradient (PyTensor C backend, initial point); LOO/draw: the "
        "leave-one-out terms of one draw (what sample() adds per draw unless log_likelihood=False)"
        "; vs exact: the approximation's predictive at its MAP against the exact GP's at the same "
        "hyperparameters, relative to the exact sd (one dense solve: "
        + ", ".join(f"{t:.0f} s at N = {n}" for n, t in exact_s.items())
        + f"); *: against HSGP m = {args.reference_m}, c = {args.reference_c} instead, which is "
        + ", ".join(
            f"{e[0]:.1e} / {e[1]:.1e} from the exact GP at N = {n}" for n, e in ref_err.items()
        )
    )


# ------------------------------------------------------------------------------- PyMC's HSGP
def pymc_hsgp(args) -> None:
    """PyMC's own HSGP (``gp.prior``: the m weights sampled with the hyperparameters, Normal
    likelihood) with the same priors, m and c as ``GPRegression(approx="hsgp")``."""
    n = args.pymc_hsgp_n
    x, y = simulate(n, args.seed)
    ref = GPRegression(x, y, "expquad", approx="hsgp")
    ap, sc = ref.approximation, ref.scale
    print(
        f"\n== PyMC's pm.gp.HSGP with sampled weights, N = {n}, m = {ap.m[0]}, c = {ap.c[0]:.2f}, "
        f"same priors (nutpie, {args.chains} chains x {args.tune} tune + {args.draws} draws) ==\n"
    )
    print(
        f"{'parametrization':<16} {'wall s':>7} {'minESS':>7} {'ESS/s':>6} {'div':>5} {'steps':>6}"
    )
    print("-" * 52)
    for param in ("noncentered", "centered"):
        with pm.Model() as model:
            ls = pm.LogNormal("ls", mu=float(np.log(np.mean(sc.x_range) / 3.0)), sigma=1.0)
            eta = pm.HalfNormal("eta", sigma=sc.y_sd)
            sigma = pm.HalfNormal("sigma", sigma=sc.y_sd)
            gp = pm.gp.HSGP(
                m=list(ap.m),
                L=list(ap.L),
                cov_func=eta**2 * pm.gp.cov.ExpQuad(1, ls=ls),
                parametrization=param,
            )
            f = gp.prior("f", X=x[:, None])
            pm.Normal("y", mu=sc.y_mean + f, sigma=sigma, observed=y)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = pm.sample(
                draws=args.draws,
                tune=args.tune,
                chains=args.chains,
                nuts_sampler="nutpie",
                random_seed=args.seed,
                progressbar=False,
                model=model,
                var_names=list(PARAMS),
            )
        wall = time.perf_counter() - t0
        post = idata["posterior"].to_dataset()
        ess = min(float(az.ess(post[list(PARAMS)], method="bulk")[p]) for p in PARAMS)
        stats = idata["sample_stats"]
        div = int(np.asarray(stats["diverging"]).sum())
        steps = float(np.asarray(stats["n_steps"]).mean())
        print(
            f"{param:<16} {wall:7.1f} {ess:7.0f} {ess / wall:6.2f} {div:5d} {steps:6.1f}",
            flush=True,
        )


# ----------------------------------------------------------------------------------- sklearn
def sklearn_part(args) -> None:
    print("\n== scikit-learn's exact GaussianProcessRegressor ==\n")
    n = args.sk_fit_n
    x, y = simulate(n, args.seed)
    kernel = ConstantKernel(1.0) * RBF(1.0) + WhiteKernel(0.1)
    sk = GaussianProcessRegressor(kernel, n_restarts_optimizer=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, t_sk = timed(sk.fit, x[:, None], y - y.mean())
    k = sk.kernel_
    ls, eta, sigma = (
        k.k1.k2.length_scale,
        np.sqrt(k.k1.k1.constant_value),
        np.sqrt(k.k2.noise_level),
    )
    rows = [("sklearn exact", t_sk, ls, eta, sigma, sk.log_marginal_likelihood_value_)]
    for kind in (None, "hsgp"):
        model = GPRegression(x, y, "expquad", approx=kind)
        fit, t = timed(model.fit_map, n_restarts=3, prior=False, random_seed=0)
        exact = GPRegression(x, y, "expquad") if kind else model
        p = fit.params
        lml = exact.log_marginal_likelihood(p)
        rows.append((f"bayes_gp {describe(model)}", t, *(float(p[q]) for q in PARAMS), lml))
    print(f"ML-II at N = {n} (sklearn: n_restarts_optimizer=2; bayes_gp: n_restarts=3)\n")
    print(f"{'':<26} {'fit s':>7} | {'ls':>7} {'eta':>7} {'sigma':>7} | {'exact LML':>12}")
    print("-" * 76)
    for name, t, ls_, eta_, s_, lml in rows:
        print(f"{name:<26} {t:7.1f} | {ls_:7.4f} {eta_:7.4f} {s_:7.4f} | {lml:12.3f}")
    print(
        "\n(exact LML: bayes_gp's exact log marginal likelihood at each fit's hyperparameters; "
        "sklearn fits y - mean(y) with a zero mean, which is bayes_gp's default mean)"
    )
    if args.sk_one_eval_n:
        n1 = args.sk_one_eval_n
        x1, y1 = simulate(n1, args.seed)
        sk1 = GaussianProcessRegressor(kernel, optimizer=None)
        sk1.fit(x1[:, None], y1 - y1.mean())
        _, t1 = timed(sk1.log_marginal_likelihood, sk1.kernel_.theta, eval_gradient=True)
        print(
            f"\nsklearn exact at N = {n1}: one log marginal likelihood + gradient took {t1:.1f} s "
            "(an ML-II fit needs tens of them per restart)"
        )
    print("sklearn exact at N = 100000: not run (the 1e5 x 1e5 Gram matrix alone is 80 GB).")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: small N, few draws")
    ap.add_argument("--parts", nargs="+", default=["accuracy", "scale", "pymc_hsgp", "sklearn"])
    ap.add_argument("--pymc-hsgp-n", type=int, default=10_000)
    ap.add_argument("--sizes", nargs="+", type=int, default=[10_000, 100_000])
    ap.add_argument("--approx", nargs="+", default=["hsgp", "vfe"])
    ap.add_argument("--nuts-approx", nargs="+", default=["hsgp", "vfe"])
    ap.add_argument(
        "--skip-nuts",
        nargs="*",
        default=["vfe:100000"],
        help="kind:N pairs whose NUTS run is only estimated from the gradient time",
    )
    ap.add_argument("--exact-pred-max", type=int, default=10_000)
    ap.add_argument("--reference-m", type=int, default=600)
    ap.add_argument("--reference-c", type=float, default=22.0)
    ap.add_argument("--exact-n", type=int, default=1000)
    ap.add_argument("--skip-exact-nuts", action="store_true")
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--tune", type=int, default=200)
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--acc-tune", type=int, default=300)
    ap.add_argument("--acc-draws", type=int, default=300)
    ap.add_argument("--sk-fit-n", type=int, default=2000)
    ap.add_argument("--sk-one-eval-n", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    args.skip_nuts = {(k, int(n)) for k, n in (item.split(":") for item in args.skip_nuts)}
    if args.quick:
        args.sizes, args.exact_n, args.sk_fit_n, args.sk_one_eval_n = [2000], 200, 300, 0
        args.pymc_hsgp_n = 2000
        args.tune = args.draws = args.acc_tune = args.acc_draws = 50
    logging.getLogger("pymc").setLevel(logging.ERROR)
    print(
        f"{date.today()} | Python {platform.python_version()} | PyMC {pm.__version__} | PyTensor "
        f"{pytensor.__version__} | NumPy {np.__version__} | scikit-learn {sklearn.__version__} | "
        f"{os.cpu_count()} CPUs | BLAS pinned to 1 thread"
    )
    t0 = time.perf_counter()
    with threadpool_limits(limits=1, user_api="blas"):
        if "accuracy" in args.parts:
            accuracy(args)
        if "scale" in args.parts:
            scale(args)
        if "pymc_hsgp" in args.parts:
            pymc_hsgp(args)
        if "sklearn" in args.parts:
            sklearn_part(args)
    print(
        f"\ntotal wall time {time.perf_counter() - t0:.0f} s, load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
