"""Predictive calibration of the declared models that have held-out data (issue 20).

For each declared model with a held-out split and each method listed below, fit it through the
workflow (``bayes_gp.workflow.run``: the model's own data, priors and settings) and score the
held-out data's predictive distribution (``GPModel.held_out_predictive``,
``bayes_gp.validate.predictive``): coverage of the central 50% and 90% predictive intervals and
the PIT histogram's χ² test (regression and counts), the expected calibration error and the
reliability bins (classification). Writes ``<out>/predictive_calibration.csv`` and
``.json`` and prints the Markdown table of ``validation/README.md``.

Usage::

    .venv/bin/python validation/predictive_calibration.py            # full settings, 2 chains
    .venv/bin/python validation/predictive_calibration.py --fast     # smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_gp.validate.predictive import predictive_calibration
from bayes_gp.workflow import run

#: (declared model, method): every declared model with held-out data, its default method first.
RUNS = [
    ("diabetes_ard", "nuts"),
    ("diabetes_ard", "map"),
    ("pima", "map"),
    ("pima", "nuts"),
    ("breast_cancer", "map"),
    ("breast_cancer", "ep"),
    ("uk_driver_deaths", "nuts"),
    ("uk_driver_deaths", "map"),
    ("linnerud", "nuts"),
    ("linnerud", "map"),
]


def score(name: str, method: str, fast: bool, chains: int, seed: int) -> dict:
    t0 = time.perf_counter()
    res = run(name, method, fast=fast, chains=chains, random_seed=seed)
    data = res.data
    cal = predictive_calibration(res.model.held_out_predictive(data.X_test, data.y_test, res.fit))
    row = {"model": name, "method": method, "fit": res.model.fit_label(res.fit),
           "n_train": int(np.shape(data.X_train)[0]), "n_test": cal.n, **cal.scores(),
           "seconds": round(time.perf_counter() - t0, 1)}  # fmt: skip
    if cal.pit is not None:
        row["pit"] = [round(float(h), 3) for h in cal.pit]
    if cal.reliability is not None:
        row["reliability"] = cal.reliability.round(4).to_dict(orient="records")
    for key in ("rmse", "mean_log_predictive_density", "log_loss", "accuracy", "brier"):
        if key in res.scores:
            row[key] = float(res.scores[key])
    print(json.dumps({k: v for k, v in row.items() if k not in ("pit", "reliability")}))
    return row


def markdown(rows: list[dict]) -> str:
    head = ("| model | fit | n train / test | coverage 50% | coverage 90% | PIT χ² p | ECE | "
            "held-out score | time (s) |")  # fmt: skip
    lines = [head, "|---|---|---|---|---|---|---|---|---|"]

    def fmt(v, spec=".2f"):
        return "–" if v is None or (isinstance(v, float) and np.isnan(v)) else format(v, spec)

    for r in rows:
        if "mean_log_predictive_density" in r:
            held = f"lpd {r['mean_log_predictive_density']:.3f}"
        else:
            held = f"log-loss {r.get('log_loss', np.nan):.3f}"
        lines.append(
            f"| `{r['model']}` | {r['fit']} | {r['n_train']} / {r['n_test']} | "
            f"{fmt(r.get('coverage_50'))} | {fmt(r.get('coverage_90'))} | "
            f"{fmt(r.get('pit_chi2_p'), '.2g')} | {fmt(r.get('ece'), '.3f')} | {held} | "
            f"{r['seconds']:.0f} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fast", action="store_true", help="the models' fast settings (smoke run)")
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", nargs="*",
                    help="model names to run (default: all); the other models' rows of the "
                         "last run are kept")  # fmt: skip
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    a = ap.parse_args(argv)
    rows = [score(m, k, a.fast, a.chains, a.seed) for m, k in RUNS if not a.only or m in a.only]
    a.out.mkdir(parents=True, exist_ok=True)
    previous = a.out / "predictive_calibration.json"
    if a.only and previous.exists():  # keep the other models' rows of the last run
        kept = [r for r in json.loads(previous.read_text())["runs"] if r["model"] not in a.only]
        order = {run: i for i, run in enumerate(RUNS)}
        rows = sorted(kept + rows, key=lambda r: order.get((r["model"], r["method"]), len(RUNS)))
    meta = {"fast": a.fast, "chains": a.chains, "seed": a.seed, "load_average": os.getloadavg()}
    flat = [{k: v for k, v in r.items() if k not in ("pit", "reliability")} for r in rows]
    for suffix, text in (
        ("json", json.dumps({"settings": meta, "runs": rows}, indent=1)),
        ("csv", pd.DataFrame(flat).to_csv(index=False)),
    ):
        tmp = a.out / f"predictive_calibration.{suffix}.tmp"
        tmp.write_text(text)
        os.replace(tmp, a.out / f"predictive_calibration.{suffix}")
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
