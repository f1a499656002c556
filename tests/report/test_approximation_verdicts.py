"""The models' post-fit approximation checks in the report (verdict rows) and in the
workflow's ``fit.json``."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from bayes_gp import GPRegression
from bayes_gp.declared import Dataset
from bayes_gp.latent import LatentGP
from bayes_gp.protocol import ApproximationCheck
from bayes_gp.report import report
from bayes_gp.solvers import approx_checks
from bayes_gp.workflow import store
from bayes_gp.workflow.fitting import FitResult


@pytest.fixture
def regression_checks(monkeypatch):
    """GPRegression.approximation_checks as the coordinator wires it (a thin delegation)."""
    monkeypatch.setattr(
        GPRegression, "approximation_checks",
        lambda self, fit: approx_checks.for_regression(self, fit),
    )  # fmt: skip


@pytest.fixture(scope="module")
def wiggly():
    rng = np.random.default_rng(1)
    X = np.sort(rng.uniform(0, 10, 120))
    return X, np.sin(3 * X) + 0.5 * np.sin(7 * X) + 0.1 * rng.normal(size=120)


@pytest.fixture(scope="module")
def vfe3(wiggly):
    gp = GPRegression(*wiggly, approx="vfe", approx_options={"n_inducing": 3})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gp, gp.fit_map(n_restarts=1, random_seed=1)


def test_report_shows_the_approximation_rows(regression_checks, vfe3):
    gp, fit = vfe3
    rep = report(fit, model=gp, figures=False)
    (name,) = rep.approximation_checks
    checks = rep.approximation_checks[name]
    assert [c.name for c in checks] == [
        "VFE evidence gap", "VFE inducing-input coverage", "VFE fit vs exact GP",
    ]  # fmt: skip
    rows = {v.check: v for v in rep.verdicts}
    for c in checks:
        v = rows[c.name]
        assert (v.status, v.value, v.threshold, v.advice, v.detail) == (
            c.status, c.value, c.threshold, c.advice, c.detail,
        )  # fmt: skip
        assert c.name in rep.html
    assert rows["VFE fit vs exact GP"].status == "fail"
    assert rep.status == "fail"  # the worst verdict is the approximation's
    assert "n_inducing" in rep.html


def test_exact_model_adds_no_rows(regression_checks, wiggly):
    X, y = wiggly
    gp = GPRegression(X[:30], y[:30])
    fit = gp.fit_map(n_restarts=1, random_seed=1)
    rep = report(fit, model=gp, figures=False)
    assert list(rep.approximation_checks.values()) == [[]]
    assert not any(v.check.startswith(("HSGP", "VFE", "FITC", "Laplace")) for v in rep.verdicts)


def test_a_failing_check_is_a_warn_row_not_a_lost_report(monkeypatch, vfe3):
    gp, fit = vfe3

    def broken(self, fit):
        raise RuntimeError("no can do")

    monkeypatch.setattr(GPRegression, "approximation_checks", broken)
    rep = report(fit, model=gp, figures=False)
    row = next(v for v in rep.verdicts if v.check == "approximation checks")
    assert row.status == "warn" and "RuntimeError: no can do" in row.detail
    assert any("approximation checks failed" in p for p in rep.problems)
    assert list(rep.approximation_checks.values()) == [None]


@pytest.fixture(scope="module")
def latent_result():
    rng = np.random.default_rng(0)
    X = np.sort(rng.uniform(0, 10, 40))
    labels = (X > 5).astype(float)  # separated classes: the Laplace check fails
    gp = LatentGP(X, labels, likelihood="bernoulli")
    fit = gp.fit_laplace(params={"ls": 2.0, "eta": 10.0})
    data = Dataset(X[:, None], labels, ["x"], "y", "synthetic")
    settings = {"n_restarts": 1, "seed": 1, "fast": False}
    return FitResult("sep", "classification", "map", gp, data, fit, settings, {"model": "sep"},
                     predictions=pd.DataFrame({"x": X}))  # fmt: skip


def test_fit_json_holds_the_checks(tmp_path, latent_result, monkeypatch):
    calls = []
    original = LatentGP.approximation_checks

    def counted(self, fit):
        calls.append(1)
        return original(self, fit)

    monkeypatch.setattr(LatentGP, "approximation_checks", counted)
    store.save(latent_result, tmp_path / "a", with_report=True)
    assert len(calls) == 1  # computed once, for the report and fit.json
    saved = json.loads((tmp_path / "a" / store.FIT_JSON).read_text())["approximation_checks"]
    assert [c["name"] for c in saved] == [
        "Laplace evidence gap (IS)", "Laplace importance sampling Pareto k̂",
    ]  # fmt: skip
    assert set(saved[0]) == {"name", "status", "value", "threshold", "advice", "detail"}
    assert saved[1]["status"] == "fail" and saved[1]["value"] > 0.7
    html = (tmp_path / "a" / store.REPORT).read_text()
    assert "Laplace importance sampling Pareto k̂" in html
    # without a report they are computed for fit.json, with the same values (fixed seeds)
    store.save(latent_result, tmp_path / "b", with_report=False)
    again = json.loads((tmp_path / "b" / store.FIT_JSON).read_text())["approximation_checks"]
    assert again == saved


def test_fit_json_records_a_failing_check(tmp_path, latent_result, monkeypatch):
    def broken(self, fit):
        raise ValueError("bad")

    monkeypatch.setattr(LatentGP, "approximation_checks", broken)
    store.save(latent_result, tmp_path / "c", with_report=False)
    saved = json.loads((tmp_path / "c" / store.FIT_JSON).read_text())["approximation_checks"]
    assert saved == [
        {
            "name": "approximation checks", "status": "warn", "value": None, "threshold": "–",
            "advice": "the approximation could not be checked: treat it as unverified",
            "detail": "ValueError: bad",
        }
    ]  # fmt: skip


def test_records_are_plain_json():
    c = ApproximationCheck("x", "warn", np.float64(0.5), "< 1", "do y", "how")
    assert json.loads(json.dumps(c.to_dict())) == {
        "name": "x", "status": "warn", "value": 0.5, "threshold": "< 1", "advice": "do y",
        "detail": "how",
    }  # fmt: skip
