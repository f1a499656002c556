"""The report tells the whole truth (issue 24): a report rebuilt by ``bayes-gp report`` from a
saved fit is the report written right after the fit; it states the data and the settings, names
the inputs by their columns with their precision, gives advice with concrete values, repeats no
word in a label, and turns a figure that fails to draw into a verdict.

The three rebuild tests run the command line end to end (MAP and NUTS on a 40-point CSV file,
Laplace on the breast_cancer declared model in fast mode, 2 restarts; NUTS 2 x 60 draws): about
a minute together on two cores.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayes_gp import GPRegression, cli, workflow
from bayes_gp.declared import load_model
from bayes_gp.report import describe, diagnostics, figures, report
from bayes_gp.report import html as H
from tests.report.synthetic import ar1, datatree

#: The only part of a report allowed to differ between two writings (none does today: the
#: "fitted" time is the fit's, saved with it).
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}")
#: ``name=`` with no value after it: advice that forgot to say how much.
EMPTY_VALUE = re.compile(r"\b\w+=\s*[,);]")


def _cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def csv_file(tmp_path_factory) -> Path:
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0, 10, 40))
    df = pd.DataFrame({"x": x, "y": np.sin(x) + 0.2 * rng.normal(size=40)})
    path = tmp_path_factory.mktemp("data") / "sine.csv"
    df.to_csv(path, index=False)
    return path


def _fit_then_rebuild(tmp_path: Path, *args) -> tuple[str, str, Path]:
    out = tmp_path / "out"
    rc, _, err = _cli("fit", *args, "--out", out)
    assert rc == 0, err
    fresh = (out / workflow.REPORT).read_text()
    (out / workflow.REPORT).unlink()
    rc, _, err = _cli("report", out)
    assert rc == 0, err
    return fresh, (out / workflow.REPORT).read_text(), out


def _same_but_timestamp(fresh: str, rebuilt: str) -> None:
    a, b = TIMESTAMP.sub("<time>", fresh), TIMESTAMP.sub("<time>", rebuilt)
    if a != b:  # show the first difference, not two megabytes of HTML
        i = next(i for i, (p, q) in enumerate(zip(a, b, strict=False)) if p != q)
        raise AssertionError(f"reports differ at {i}:\n{a[i - 200 : i + 200]}\n---\n"
                             f"{b[i - 200 : i + 200]}")  # fmt: skip


def test_map_report_rebuilt_from_saved_fit_is_the_same(csv_file, tmp_path):
    """Defect: the rebuilt MAP report lost its restarts table and said "hyperparameters given,
    not optimised"."""
    fresh, rebuilt, _ = _fit_then_rebuild(
        tmp_path, csv_file, "--x", "x", "--y", "y", "--method", "map", "--restarts", "2",
        "--fast",
    )  # fmt: skip
    assert "Restarts (best first)" in rebuilt
    assert "not optimised" not in rebuilt
    assert "restarts reaching the best optimum" in rebuilt
    _same_but_timestamp(fresh, rebuilt)


def test_report_of_a_relative_csv_path_rebuilds_identically(csv_file, tmp_path, monkeypatch):
    """Defect (issue 37): `bayes-gp fit data.csv` from the file's directory wrote "data source
    data.csv", `bayes-gp report` rebuilt it as the absolute path. The rebuilt report is now the
    written one byte for byte (its one time stamp is the fit's, saved with it), from another
    working directory too; fit.json keeps the path as given and the absolute one to reload."""
    import json
    import shutil

    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(csv_file, work / "sine.csv")
    monkeypatch.chdir(work)
    rc, _, err = _cli("fit", "sine.csv", "--x", "x", "--y", "y", "--method", "map",
                      "--restarts", "1", "--out", "out")  # fmt: skip
    assert rc == 0, err
    written = (work / "out" / workflow.REPORT).read_text()
    assert '<td class="text">sine.csv</td>' in written
    record = json.loads((work / "out" / "fit.json").read_text())
    assert record["source"] == "sine.csv"
    assert record["spec"]["csv"] == str(work / "sine.csv")
    monkeypatch.chdir(tmp_path)  # rebuilt from elsewhere, by the directory's path
    rc, _, err = _cli("report", "work/out")
    assert rc == 0, err
    assert (work / "out" / workflow.REPORT).read_text() == written


def test_laplace_report_rebuilt_from_saved_fit_is_the_same(tmp_path):
    fresh, rebuilt, _ = _fit_then_rebuild(
        tmp_path, "breast_cancer", "--fast", "--method", "map", "--restarts", "2"
    )
    assert "Restarts (best first)" in rebuilt and "not optimised" not in rebuilt
    assert ">time (s)<" in rebuilt  # the fit's wall time survives the reload
    _same_but_timestamp(fresh, rebuilt)


def test_nuts_report_rebuilt_from_saved_fit_is_the_same(csv_file, tmp_path):
    fresh, rebuilt, _ = _fit_then_rebuild(
        tmp_path, csv_file, "--x", "x", "--y", "y", "--method", "nuts", "--draws", "60",
        "--tune", "60", "--chains", "2", "--sampler", "pymc",
    )  # fmt: skip
    assert "Trace and rank plots" in rebuilt
    _same_but_timestamp(fresh, rebuilt)
    # every key-value and table label, NUTS settings included: no word twice in a row
    labels = re.findall(r"<tr><td class=\"text\">([^<]*)</td>", rebuilt)
    labels += re.findall(r"<th class=\"text\">([^<]*)</th>", rebuilt)
    assert "mean step size" in labels
    for label in labels:
        words = label.lower().split()
        assert all(a != b for a, b in itertools.pairwise(words)), label


# -- the main job's report: data, settings, inputs -------------------------------------------


def test_mauna_loa_inputs_are_named_by_their_column():
    decl = load_model("mauna_loa")
    data = decl.load_data(fast=True)
    gp = decl.build(data, "nuts")
    assert list(gp.feature_names) == ["year"] == list(data.feature_names)


def test_report_states_the_data_and_every_non_default_setting():
    """The main job (`./run main`): mauna_loa, --fast, NUTS, --draws 2000 --tune 700."""
    decl = load_model("mauna_loa")
    data = decl.load_data(fast=True)
    defaults = workflow._default_settings(decl, True)
    settings = {**defaults, "draws": 2000, "tune": 700}
    res = workflow.FitResult(
        "mauna_loa", "regression", "nuts", None, data, None, settings, {"model": "mauna_loa"},
        seconds={"build": 1.0, "fit": 60.0}, defaults=defaults, created="2026-11-25T02:00:00+0000",
    )  # fmt: skip
    rows = dict(workflow.provenance(res))
    assert rows["data source"] == data.source and "statsmodels" in rows["data source"]
    assert rows["training rows"] == np.shape(data.X_train)[0] == 144
    assert rows["data: subset"] == "months from 1990 on"
    assert rows["fast mode"].startswith("yes")
    assert rows["setting: draws"] == "2000 (default 200)"
    assert rows["setting: tune"] == "700 (default 200)"
    assert rows["setting: chains"] == "2"
    assert rows["non-default settings"] == "--draws 2000 --tune 700"
    assert "setting: n_restarts" not in rows  # not a NUTS setting
    assert rows["inputs"] == "year"
    html = report(
        datatree(chains=2, draws=100), title="t", figures=False, provenance=list(rows.items())
    ).html
    assert "Data and settings" in html and "--draws 2000 --tune 700" in html


def test_predictions_table_keeps_the_inputs_precision():
    x = np.linspace(1990.0 + 1 / 24, 1995.0, 30)
    gp = GPRegression(pd.DataFrame({"year": x}), np.sin(x), "expquad")
    fit = gp.fit_map(n_restarts=1, random_seed=0)
    x_new = np.array([[1990.0416666666667], [2001.9583333333333]])
    html = report(fit, model=gp, X_new=x_new, figures=False).html
    table = html[html.index("Predictions at X_new") :]
    assert '<th class="text">year</th>' in table
    assert ">1990.04166667<" in table and ">2001.95833333<" in table
    assert H.fmt_input(1990.0) == "1990" and H.fmt_input(0.001234) == "0.001234"


# -- advice, labels, failed figures ----------------------------------------------------------


def test_advice_names_concrete_values():
    """Defect: the ESS advice printed "(draws=, chains=)" with the values missing."""
    rng = np.random.default_rng(3)
    sticky = {n: ar1(rng, 0.97, 2, 300) for n in ("ls", "eta")}
    stuck = dict(sticky, ls=sticky["ls"] + np.array([[0.0], [3.0]]))
    stats = {
        "diverging": np.zeros((2, 300), bool),
        "energy": rng.standard_normal((2, 300)),
        "tree_depth": np.full((2, 300), 10),
        "reached_max_treedepth": np.ones((2, 300), bool),
    }
    dt = datatree(chains=2, draws=300, params=stuck, stats=stats)
    dt["posterior"].attrs["tuning_steps"] = 500
    verdicts = {v.check: v for v in diagnostics.mcmc_verdicts(dt)}
    ess = verdicts["bulk ESS"]
    assert ess.status in ("warn", "fail")
    m = re.search(r"draws=(\d+), chains=(\d+)", ess.advice)
    assert m, ess.advice
    draws, chains = int(m[1]), int(m[2])
    assert chains == 4 and draws > 300
    # ESS grows in proportion to the draws: the suggested run reaches ESS_MIN with a margin
    assert ess.value * (draws * chains) / (300 * 2) >= diagnostics.ESS_MIN
    assert f"--draws {draws} --chains 4" in ess.advice
    assert "draws=600, tune=1000, chains=4" in verdicts["r̂"].advice
    assert "from 10 to 12" in verdicts["tree-depth saturation"].advice
    for v in verdicts.values():
        assert not EMPTY_VALUE.search(v.advice), v.advice


def test_optimizer_advice_names_concrete_values():
    from bayes_gp.inference.typeii import MapFit, Restart

    restarts = [
        Restart({}, {"ls": 1.0}, -5.0, False, 37, "ABNORMAL"),
        Restart({}, {"ls": 2.0}, -7.0, True, 12, "CONVERGENCE"),
    ]
    fit = MapFit({"ls": 1.0}, -5.0, True, restarts, grad_norm=0.3)
    verdicts = diagnostics.optimizer_verdicts(fit)
    assert "maxiter=1000" in verdicts[0].advice and "37 iterations" in verdicts[0].advice
    assert "n_restarts=4" in verdicts[1].advice and "--restarts 4" in verdicts[1].advice
    for v in verdicts:
        assert not EMPTY_VALUE.search(v.advice), v.advice


def test_nuts_settings_label_does_not_repeat_mean():
    """Defect: nutpie's ``mean_tree_accept`` was labelled "mean mean tree accept"."""
    dt = datatree(chains=2, draws=50)
    dt["sample_stats"]["mean_tree_accept"] = dt["sample_stats"]["energy"] * 0 + 0.8
    dt["sample_stats"]["step_size"] = dt["sample_stats"]["energy"] * 0 + 0.1
    labels = [k for k, _ in describe.nuts_settings(dt)]
    assert "mean tree accept" in labels and "mean step size" in labels
    assert not any("mean mean" in k for k in labels)


def test_failed_figure_becomes_a_verdict(monkeypatch):
    """Defect: a figure that failed to draw (the rank plot) left a gap, not a verdict."""

    def broken(idata, params):
        raise ValueError("no ranks for you")

    monkeypatch.setattr(figures, "rank_figure", broken)
    rep = report(datatree(chains=2, draws=200), title="t")
    v = next(v for v in rep.verdicts if v.check == "rank figure drawn")
    assert v.status == "warn" and "ValueError: no ranks for you" in v.detail
    diag = rep.html[rep.html.index("<h3>Diagnostics</h3>") :]
    diag = diag[: diag.index("</section>")]
    assert "rank figure drawn" in diag and "no ranks for you" in diag
    assert rep.status == "warn" and len(rep.problems) == 1


def test_optimiser_record_is_saved_with_the_fit_and_checked_on_load(csv_file, tmp_path):
    import json

    model = workflow.CSVModel(str(csv_file), ("x",), "y")
    res = workflow.run(model, "map", fast=True, n_restarts=2, random_seed=1)
    out = tmp_path / "out"
    workflow.save(res, out, with_report=False)
    record = json.loads((out / workflow.FIT_JSON).read_text())
    saved = record["fit"]
    assert len(saved["restarts"]) == 2 and saved["grad_norm"] == res.fit.grad_norm
    assert saved["seconds"] == res.fit.seconds and saved["jitter"] == res.fit.jitter
    assert record["defaults"]["n_restarts"] == 3 and record["settings"]["n_restarts"] == 2
    back = workflow.load(out)
    for a, b in zip(back.fit.restarts, res.fit.restarts, strict=True):
        assert (a.objective, a.converged, a.n_iter, a.message) == (
            b.objective, b.converged, b.n_iter, b.message,
        )  # fmt: skip
        for name in b.params:
            np.testing.assert_array_equal(a.params[name], b.params[name])
            np.testing.assert_array_equal(a.start[name], b.start[name])
    assert back.fit.seconds == res.fit.seconds and back.created == res.created
    assert workflow.provenance(back) == workflow.provenance(res)
    record["fit"]["restarts"][0].pop("objective")
    (out / workflow.FIT_JSON).write_text(json.dumps(record))
    with pytest.raises(ValueError, match="damaged optimiser record"):
        workflow.load(out)
