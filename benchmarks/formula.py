r"""Formula models against Bambi on the same formula (issue 38).

Data: lme4's ``sleepstudy`` (18 subjects x 10 days, n = 180, ``bayes_gp.datasets``). Model: a
smooth mean curve over days and an uncorrelated random intercept and slope per subject,

* bayes_gp: ``bayes_gp.Model("Reaction ~ gp(Days) + (Days | Subject)", sleep)`` -- the exact
  GP term, the group effects and the intercept all integrated out in closed form, NUTS over
  the 5 hyperparameters;
* Bambi: ``bmb.Model("Reaction ~ 1 + hsgp(Days, m=M, c=C) + (Days | Subject)", sleep)`` -- its
  HSGP term (M basis weights), the intercept and the 36 subject effects sampled by NUTS (the
  only GP term Bambi has).

The priors are the same on both sides (bayes_gp's defaults, written as Bambi priors):
intercept :math:`N(\bar y, (2 s_y)^2)`; subject sds, the GP amplitude and the noise sd
:math:`\text{HalfNormal}(s_y)`; the length-scale :math:`\text{LogNormal}(\log(9/3), 1)`
(:math:`s_y` the sd of the reaction times, 9 the range of the days). The posterior of the
length-scale reaches past the data's range (mean about 8 days for a half-range S = 4.5), where
an HSGP needs a wide box: Riutort-Mayol et al. (2022) ask :math:`c \ge 3.2\,\ell / S` for the
squared exponential, and :math:`m \ge 1.75\,c S / \ell` for the shortest length-scale held
(about 2). The defaults M = 20, C = 5 meet both; with them the two posteriors of the shared
parameters (noise sd, subject sds, GP length-scale and amplitude) must agree within Monte Carlo
error: the script prints each posterior mean with its MCSE on both sides and
:math:`z = \Delta / \sqrt{\text{mcse}_a^2 + \text{mcse}_b^2}`. (With m = 10, c = 2 Bambi's
length-scale posterior is biased low, 4.2 against 8.3 days: the approximation, not Monte Carlo
error.)

Speed: each side's whole ``sample``/``fit`` call as the user waits for it (model building,
compilation, sampling), 2 chains in parallel on both sides (nutpie's threads; PyMC's
processes), ``--draws`` + ``--tune`` per chain, BLAS pinned to one thread; the figure of merit
is the smallest bulk ESS of the shared parameters per wall second, and the ratio bayes_gp /
Bambi. Bambi runs with its default sampler (PyMC's NUTS) and with nutpie (``--bambi-samplers``).
A second bayes_gp fit of the same model in the same process shows the run without compilation
(compiled-model reuse). A peer run that fails is printed as such (Bambi 0.21 with nutpie fails on
an ``hsgp()`` term: its ``weights_raw`` dims do not match the draws nutpie returns). The load
average is printed at the start and the end.

Run from the repository root (Bambi is a benchmark-only dependency: ``pip install bambi``)::

    python benchmarks/formula.py             # 2 x (1000 + 1000), both Bambi samplers (~5 min)
    python benchmarks/formula.py --quick     # smoke run: 2 x (200 + 200), PyMC only
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import arviz as az
import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

import bayes_gp
from bayes_gp.datasets import rdataset

#: bayes_gp's name of each shared parameter -> Bambi's.
SHARED = {
    "sigma": "sigma",
    "1|Subject.sigma": "1|Subject_sigma",
    "Days|Subject.sigma": "Days|Subject_sigma",
    "gp(Days).ls": "{hsgp}_ell",
    "gp(Days).eta": "{hsgp}_sigma",
}


def bambi_model(sleep: pd.DataFrame, m: int, c: float):
    import bambi as bmb

    y = sleep["Reaction"].to_numpy(float)
    s = float(y.std())
    hsgp = f"hsgp(Days, m={m}, c={c})"
    priors = {
        "Intercept": bmb.Prior("Normal", mu=float(y.mean()), sigma=2 * s),
        "sigma": bmb.Prior("HalfNormal", sigma=s),
        "1|Subject": bmb.Prior("Normal", mu=0.0, sigma=bmb.Prior("HalfNormal", sigma=s)),
        "Days|Subject": bmb.Prior("Normal", mu=0.0, sigma=bmb.Prior("HalfNormal", sigma=s)),
        hsgp: {
            "sigma": bmb.Prior("HalfNormal", sigma=s),
            "ell": bmb.Prior("LogNormal", mu=float(np.log(9.0 / 3.0)), sigma=1.0),
        },
    }
    return bmb.Model(f"Reaction ~ 1 + {hsgp} + (Days | Subject)", sleep, priors=priors), hsgp


def summarise(idata, names: dict[str, str]) -> pd.DataFrame:
    s = az.summary(idata, var_names=list(names.values()), round_to="none")
    s.index = list(names)
    return s[["mean", "sd", "mcse_mean", "ess_bulk", "r_hat"]]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--draws", type=int, default=1000)
    p.add_argument("--tune", type=int, default=1000)
    p.add_argument("--chains", type=int, default=2)
    p.add_argument("--m", type=int, default=20, help="Bambi's HSGP basis size")
    p.add_argument("--c", type=float, default=5.0, help="Bambi's HSGP boundary factor")
    p.add_argument("--bambi-samplers", nargs="+", default=["pymc", "nutpie"])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    if args.quick:
        args.draws, args.tune, args.bambi_samplers = 200, 200, ["pymc"]
    threadpool_limits(1, user_api="blas")
    warnings.filterwarnings("ignore")
    print(f"load average at start {os.getloadavg()[0]:.2f}; {args.chains} chains x "
          f"({args.draws} + {args.tune}), in parallel on both sides", flush=True)  # fmt: skip
    sleep = rdataset("sleepstudy")
    rows, posts = {}, {}

    t0 = time.perf_counter()
    model = bayes_gp.Model("Reaction ~ gp(Days) + (Days | Subject)", sleep)
    idata = model.sample(draws=args.draws, tune=args.tune, chains=args.chains,
                         random_seed=args.seed)  # fmt: skip
    wall = time.perf_counter() - t0
    names = {k: k for k in SHARED}
    posts["bayes_gp"] = summarise(idata, names)
    rows["bayes_gp (first fit)"] = {"wall s": wall, "sampler": "auto",
                                    "parameters sampled": len(model.hyperparameters)}  # fmt: skip
    t0 = time.perf_counter()
    again = bayes_gp.Model("Reaction ~ gp(Days) + (Days | Subject)", sleep)
    idata2 = again.sample(draws=args.draws, tune=args.tune, chains=args.chains,
                          random_seed=args.seed + 1)  # fmt: skip
    rows["bayes_gp (second fit, compiled model reused)"] = {
        "wall s": time.perf_counter() - t0, "sampler": "auto",
        "parameters sampled": len(again.hyperparameters)}  # fmt: skip
    posts["bayes_gp (second fit, compiled model reused)"] = summarise(idata2, names)

    for sampler in args.bambi_samplers:
        bm, hsgp = bambi_model(sleep, args.m, args.c)
        t0 = time.perf_counter()
        method = {"pymc": "pymc", "nutpie": "nutpie"}[sampler]
        label = f"Bambi hsgp(m={args.m}) + {sampler}"
        try:
            fit = bm.fit(draws=args.draws, tune=args.tune, chains=args.chains,
                         cores=args.chains, inference_method=method, random_seed=args.seed,
                         progressbar=False)  # fmt: skip
        except Exception as exc:  # a peer's own failure is a result too
            print(f"{label}: failed ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})")
            continue
        wall = time.perf_counter() - t0
        bnames = {k: v.format(hsgp=hsgp) for k, v in SHARED.items()}
        posts[label] = summarise(fit, bnames)
        n_free = sum(int(np.prod(v.shape.eval())) for v in bm.backend.model.free_RVs)
        rows[label] = {"wall s": wall, "sampler": sampler, "parameters sampled": n_free}

    table = pd.DataFrame(rows).T
    for label in table.index:
        post = posts["bayes_gp"] if label == "bayes_gp (first fit)" else posts[label]
        table.loc[label, "min bulk ESS"] = post["ess_bulk"].min()
        table.loc[label, "max r_hat"] = post["r_hat"].max()
    table["min ESS / s"] = table["min bulk ESS"] / table["wall s"].astype(float)
    first = table.loc["bayes_gp (first fit)", "min ESS / s"]
    table["bayes_gp first fit / this"] = first / table["min ESS / s"]
    pd.set_option("display.width", 160)
    print("\n" + table.round(3).to_string())

    ref = posts["bayes_gp"]
    print("\nposterior means (MCSE) of the shared parameters, and z of each side against "
          "bayes_gp's first fit:")  # fmt: skip
    agree = pd.DataFrame({"bayes_gp": ref["mean"].map("{:.3f}".format)
                          + " (" + ref["mcse_mean"].map("{:.3f}".format) + ")"})  # fmt: skip
    for label, post in posts.items():
        if label == "bayes_gp":
            continue
        z = (post["mean"] - ref["mean"]) / np.sqrt(post["mcse_mean"] ** 2 + ref["mcse_mean"] ** 2)
        agree[label] = post["mean"].map("{:.3f}".format) + " z=" + z.map("{:+.1f}".format)
    print(agree.to_string())
    print(f"\nload average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
