"""End-to-end fits (:mod:`bayes_gp.workflow`) and the ``bayes-gp fit / list / report`` commands."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayes_gp import cli, workflow
from bayes_gp._arguments import ArgumentError
from bayes_gp.latent import LIKELIHOODS
from bayes_gp.workflow import CSVModel


@pytest.fixture(scope="module")
def csv_file(tmp_path_factory) -> Path:
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0, 10, 40))
    df = pd.DataFrame(
        {
            "x": x,
            "z": rng.normal(size=40),
            "y": np.sin(x) + 0.2 * rng.normal(size=40),
            "lab": np.where(np.sin(x) + 0.3 * rng.normal(size=40) > 0, "up", "down"),
            "text": ["1.5"] * 39 + ["b"],
        }
    )
    path = tmp_path_factory.mktemp("data") / "data.csv"
    df.to_csv(path, index=False)
    return path


def _cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


def _one_line_error(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if not ln.startswith("[bayes-gp]")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# -- CSV models --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(x=("x", "w"), y="y"), r"column\(s\) 'w' not in .*columns: x, z, y, lab, text"),
        (dict(x=("text",), y="y"), "column 'text' is not numeric: row 40 holds 'b'"),
        (dict(x=("x",), y="lab"), "column 'lab' is not numeric"),
    ],
)
def test_csv_data_errors(csv_file, kwargs, match):
    with pytest.raises(ValueError, match=match):
        CSVModel(str(csv_file), **kwargs).load_data()


def test_csv_spec_errors(csv_file, tmp_path):
    with pytest.raises(ValueError, match="unknown kernel 'cubic'"):
        CSVModel(str(csv_file), ("x",), "y", kernel="expquad + cubic")
    with pytest.raises(ValueError, match="both an input and the target"):
        CSVModel(str(csv_file), ("x", "y"), "y")
    with pytest.raises(ValueError, match="task"):
        CSVModel(str(csv_file), ("x",), "y", task="survival")
    holes = tmp_path / "holes.csv"
    holes.write_text("x,y\n1,2\n2,\n3,4\n")
    with pytest.raises(ValueError, match="1 row"):
        CSVModel(str(holes), ("x",), "y").load_data()
    with pytest.raises(ValueError, match="no such file"):
        CSVModel(str(tmp_path / "none.csv"), ("x",), "y").load_data()


@pytest.mark.parametrize(
    ("kwargs", "message", "params"),
    [
        (
            dict(likelihood="zip"),
            f"`likelihood` must be one of {', '.join(LIKELIHOODS)}, got 'zip'",
            ("likelihood",),
        ),
        (
            dict(likelihood="gaussian", exposure="z"),
            "`exposure` goes with `likelihood` 'poisson' or 'negative_binomial' or "
            "'zero_inflated_poisson' or 'zero_inflated_negative_binomial' or 'hurdle_poisson' "
            "or 'hurdle_negative_binomial'",
            ("exposure", "likelihood"),
        ),
        (dict(exposure="z"), "`exposure` goes with `likelihood` 'poisson' or 'negative_binomial' or "
            "'zero_inflated_poisson' or 'zero_inflated_negative_binomial' or 'hurdle_poisson' "
            "or 'hurdle_negative_binomial'",
         ("exposure", "likelihood")),
        (
            dict(likelihood="poisson", trials="z"),
            "`trials` goes with `likelihood` 'binomial'",
            ("trials", "likelihood"),
        ),
        (
            dict(likelihood="binomial"),
            "`likelihood` 'binomial' needs `trials` (the trials column)",
            ("likelihood", "trials"),
        ),
    ],
)  # fmt: skip
def test_csv_spec_errors_name_the_parameters(csv_file, kwargs, message, params):
    """The library words its errors for Python callers (parameters in backticks, no options);
    the command line words the same errors as its options (test_fit_csv_latent_bad_input)."""
    with pytest.raises(ArgumentError) as info:
        CSVModel(str(csv_file), ("x",), "y", **kwargs)
    assert str(info.value) == message
    assert info.value.params == params and isinstance(info.value, ValueError)
    assert "--" not in str(info.value)


def test_method_errors_name_the_parameter(csv_file):
    model = CSVModel(str(csv_file), ("x",), "y")
    message = "model 'data' fits by `method` 'nuts', 'map'; not 'laplace'"
    with pytest.raises(ArgumentError, match=re.escape(message)) as info:
        workflow.run(model, "laplace")
    assert str(info.value) == message and info.value.parameter == "method"
    clf = CSVModel(str(csv_file), ("x",), "lab", task="classification")
    with pytest.raises(ArgumentError, match="fits by `method` 'map', 'nuts', 'ep', 'nuts_joint'; not 'vi'"):
        clf.build(clf.load_data(), "vi")
    with pytest.raises(ArgumentError, match="`draws` must be positive, got 0"):
        workflow.run(model, "nuts", draws=0)
    with pytest.raises(ArgumentError, match=r"`target_accept` must be in \[0.5, 1\), got 1.0"):
        workflow.run(model, "nuts", target_accept=1.0)
    with pytest.raises(ArgumentError, match="`x` needs at least one column name"):
        workflow.parse_columns(" , ")


def test_target_accept_reaches_nuts_and_the_provenance(csv_file, monkeypatch):
    """``target_accept`` (``--target-accept``) is a sampling setting: the model's default (0.9)
    unless given, passed to NUTS, listed in the report's provenance when it is not the default."""
    from bayes_gp.inference import nuts

    class Stop(Exception):
        pass

    seen = []

    def run_nuts(model, **kwargs):
        seen.append(kwargs["target_accept"])
        raise Stop

    monkeypatch.setattr(nuts, "run_nuts", run_nuts)
    model = CSVModel(str(csv_file), ("x",), "y")
    for given, used in ((None, 0.9), (0.97, 0.97)):
        with pytest.raises(Stop):
            workflow.run(model, "nuts", draws=5, tune=5, target_accept=given)
        assert seen[-1] == used
    parser = cli.build_parser()
    fit = ["fit", "m", "--out", "o", "--target-accept"]
    assert parser.parse_args([*fit, "0.95"]).target_accept == 0.95
    for bad in ("1", "0.4", "x"):
        with pytest.raises(cli.CLIError, match="--target-accept"):
            parser.parse_args([*fit, bad])
    defaults = workflow.default_settings(model, False)
    assert defaults["target_accept"] == 0.9
    res = workflow.FitResult("data", "regression", "nuts", None, model.load_data(), None,
                             {**defaults, "target_accept": 0.95}, {}, defaults=defaults)  # fmt: skip
    rows = dict(workflow.provenance(res))
    assert rows["setting: target_accept"] == "0.95 (default 0.9)"
    assert rows["non-default settings"] == "--target-accept 0.95"
    assert "setting: n_restarts" not in rows


def test_one_method_table():
    """declared.METHOD_TABLE is the one list of methods: --method offers exactly its names, and
    every CSV model's methods are among them."""
    from bayes_gp import declared
    from bayes_gp.latent import LatentGP
    from bayes_gp.workflow.spec import CSV_METHODS

    assert declared.METHODS == tuple(declared.METHOD_TABLE)
    parser = cli.build_parser()
    for name in declared.METHOD_TABLE:
        assert parser.parse_args(["fit", "m", "--out", "o", "--method", name]).method == name
    with pytest.raises(cli.CLIError, match="invalid choice"):
        parser.parse_args(["fit", "m", "--out", "o", "--method", "hmc"])
    for methods in (*CSV_METHODS.values(), LatentGP.fit_methods):
        assert set(methods) <= set(declared.METHODS)


def test_fit_reads_the_csv_once(csv_file, tmp_path, monkeypatch):
    """`bayes-gp fit data.csv` checks the data before fitting and fits the data it checked: one
    read of the file."""
    reads = []
    read_csv = pd.read_csv

    def counting(path, *args, **kwargs):
        reads.append(str(path))
        return read_csv(path, *args, **kwargs)

    monkeypatch.setattr(pd, "read_csv", counting)
    rc, _, err = _cli("fit", csv_file, "--x", "x", "--y", "y", "--method", "map", "--restarts",
                      "1", "--no-report", "--out", tmp_path / "o")  # fmt: skip
    assert rc == 0, err
    assert reads == [str(csv_file)]


def test_map_fit_saves_and_reloads(csv_file, tmp_path):
    model = CSVModel(str(csv_file), ("x",), "y", kernel="matern52")
    res = workflow.run(model, "map", n_restarts=2, random_seed=1)
    assert res.fit.grad_norm < 1e-3
    out = tmp_path / "result"
    files = workflow.save(res, out, with_report=False)
    assert {f.name for f in files} == {"fit.json", "posterior.nc", "predictions.csv"}
    record = json.loads((out / "fit.json").read_text())
    assert record["method"] == "map" and record["spec"]["kernel"] == "matern52"
    assert record["report"] is None and record["verdicts"] is None  # no report, no verdicts
    assert record["log_marginal_likelihood"] == pytest.approx(res.fit.log_marginal_likelihood)
    again = workflow.load(out)
    for k, v in res.fit.params.items():
        np.testing.assert_array_equal(again.fit.params[k], v)
    x_new = np.linspace(-1, 11, 7)
    a, b = res.model.predict(x_new, res.fit), again.model.predict(x_new, again.fit)
    np.testing.assert_allclose(b.mean, a.mean, rtol=1e-12)
    np.testing.assert_allclose(b.var, a.var, rtol=1e-12)
    pd.testing.assert_frame_equal(again.predictions, pd.read_csv(out / "predictions.csv"))


def test_failed_save_keeps_previous_result(csv_file, tmp_path, monkeypatch):
    model = CSVModel(str(csv_file), ("x", "z"), "lab", task="classification")
    res = workflow.run(model, "map", n_restarts=1)
    assert res.predictions["p_positive"].between(0, 1).all()
    out = tmp_path / "result"
    workflow.save(res, out, with_report=False)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def boom(*args, **kwargs):
        raise KeyboardInterrupt  # interrupted while writing the predictions

    monkeypatch.setattr(pd.DataFrame, "to_csv", boom)
    with pytest.raises(KeyboardInterrupt):
        workflow.save(res, out, with_report=False)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result"]  # no staging left
    monkeypatch.undo()
    with pytest.raises(KeyboardInterrupt):
        monkeypatch.setattr(pd.DataFrame, "to_csv", boom)
        workflow.save(res, tmp_path / "fresh", with_report=False)
    assert not (tmp_path / "fresh").exists()


def test_load_rejects_foreign_and_corrupted_directories(tmp_path):
    with pytest.raises(ValueError, match="not a bayes_gp result directory"):
        workflow.load(tmp_path)
    (tmp_path / "fit.json").write_text("{not json")
    with pytest.raises(ValueError, match="corrupted"):
        workflow.load(tmp_path)
    (tmp_path / "fit.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a bayes_gp fit record"):
        workflow.load(tmp_path)


def test_laplace_fit_reloads_and_predicts_the_same_numbers(csv_file, tmp_path):
    model = CSVModel(str(csv_file), ("x", "z"), "lab", task="classification")
    res = workflow.run(model, "map", n_restarts=1, random_seed=2)
    out = tmp_path / "laplace"
    workflow.save(res, out, with_report=False)
    again = workflow.load(out)
    assert again.fit.method == "map" and again.model.jitter == res.model.jitter
    x_new = np.random.default_rng(1).normal(size=(6, 2))
    np.testing.assert_array_equal(
        again.model.predict_proba(x_new, again.fit), res.model.predict_proba(x_new, res.fit)
    )
    cols_a, cols_b = (r.model.prediction_columns(x_new, r.fit) for r in (again, res))
    assert list(cols_a) == ["p_positive", "latent_mean", "latent_sd", "predicted"]
    for name, column in cols_a.items():  # the latent mean and sd, the labels
        np.testing.assert_array_equal(column, cols_b[name])


def test_raised_jitter_survives_save_and_load(csv_file, tmp_path):
    """A fit whose pre-flight check raised the jitter reloads into a model with that jitter, so
    the reloaded fit predicts the same numbers."""
    import dataclasses

    res = workflow.run(CSVModel(str(csv_file), ("x",), "y"), "map", n_restarts=1, random_seed=1)
    raised = 1e-3
    res.model.set_jitter(raised)
    res.fit = dataclasses.replace(res.fit, jitter=raised, jitter_default=res.model.default_jitter)
    out = tmp_path / "jitter"
    workflow.save(res, out, with_report=False)
    again = workflow.load(out)
    assert again.model.jitter == raised and again.fit.jitter == raised
    assert again.fit.jitter_default == res.model.default_jitter
    x_new = np.linspace(-1, 11, 5)
    a, b = res.model.predict(x_new, res.fit), again.model.predict(x_new, again.fit)
    np.testing.assert_array_equal(b.mean, a.mean)
    np.testing.assert_array_equal(b.var, a.var)


def test_interrupted_posterior_write_keeps_previous_result(csv_file, tmp_path, monkeypatch):
    """A crash half-way through writing posterior.nc (a partial file, then an error) leaves the
    previous result directory as it was, and no staging directory behind."""
    import xarray as xr

    res = workflow.run(CSVModel(str(csv_file), ("x",), "y"), "map", n_restarts=1, random_seed=1)
    out = tmp_path / "result"
    workflow.save(res, out, with_report=False)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def crash(self, path, *args, **kwargs):
        Path(path).write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 100)  # a torn write
        raise OSError("disk full")

    monkeypatch.setattr(xr.Dataset, "to_netcdf", crash)
    with pytest.raises(OSError, match="disk full"):
        workflow.save(res, out, with_report=False)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result"]


@pytest.mark.parametrize("damage", ["truncated", "empty", "foreign", "foreign-as-nuts"])
def test_load_rejects_a_damaged_or_foreign_posterior(csv_file, tmp_path, damage):
    import xarray as xr

    res = workflow.run(CSVModel(str(csv_file), ("x",), "y"), "map", n_restarts=1, random_seed=1)
    out = tmp_path / "result"
    workflow.save(res, out, with_report=False)
    post = out / "posterior.nc"
    match = "cannot read .*posterior.nc"
    if damage == "truncated":
        data = post.read_bytes()
        post.write_bytes(data[: len(data) // 2])
    elif damage == "empty":
        post.write_bytes(b"")
    else:  # a valid netCDF file from elsewhere
        post.unlink()
        xr.Dataset({"temperature": ("time", np.arange(3.0))}).to_netcdf(post)
        # a CSV regression is the formula model y ~ gp(x): its hyperparameters' names
        match += ".*" + re.escape("lacks ['gp(x).eta', 'gp(x).ls', 'sigma']")
        if damage == "foreign-as-nuts":
            record = json.loads((out / "fit.json").read_text())
            record["method"] = "nuts"
            (out / "fit.json").write_text(json.dumps(record))
            match = "cannot read .*posterior.nc.*no posterior group"
    with pytest.raises(ValueError, match=match):
        workflow.load(out)


# -- the command line --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--x", "x,w", "--y", "y"], "'w' not in"),
        (["--x", "x", "--y", "y", "--kernel", "matern52 + cubic"], "unknown kernel 'cubic'"),
        (["--x", "text", "--y", "y"], "not numeric"),
        (["--x", "x"], "needs --x COLUMNS and --y COLUMN"),
        (
            ["--x", "x", "--y", "y", "--method", "laplace"],
            "model 'data' fits by --method nuts, map; not 'laplace'",
        ),
        (["--x", ",", "--y", "y"], "--x needs at least one column name"),
    ],
)
def test_fit_bad_csv_input_is_one_line(csv_file, tmp_path, args, match):
    rc, _, err = _cli("fit", csv_file, "--out", tmp_path / "o", *args)
    assert rc != 0
    assert match in _one_line_error(err)
    assert not (tmp_path / "o").exists()


def test_fit_unknown_model_is_one_line(tmp_path):
    rc, _, err = _cli("fit", "no_such_model", "--out", tmp_path / "o")
    assert rc == 1 and "unknown model 'no_such_model'" in _one_line_error(err)
    rc, _, err = _cli("report", tmp_path)
    assert rc == 1 and "not a bayes_gp result directory" in _one_line_error(err)


def test_fit_csv_classification_end_to_end(csv_file, tmp_path):
    out = tmp_path / "clf"
    rc, stdout, err = _cli(
        "fit", csv_file, "--x", "x,z", "--y", "lab", "--task", "classification",
        "--method", "ep", "--restarts", "1", "--out", out, "--no-report",
    )  # fmt: skip
    assert rc == 0, err
    assert "[bayes-gp] fitting" in err or "fitting by ep" in err
    assert "log marginal likelihood" in stdout
    preds = pd.read_csv(out / "predictions.csv")
    assert set(preds["predicted"]) <= {"up", "down"}
    again = workflow.load(out)
    assert again.model.link == "probit"
    np.testing.assert_allclose(
        again.model.predict_proba(again.data.X_train, again.fit), preds["p_positive"], rtol=1e-9
    )


@pytest.mark.slow
def test_fit_csv_nuts_end_to_end_with_report(csv_file, tmp_path):
    """NUTS through the command line: netCDF posterior that reloads, predictions, an HTML report
    with the summary table, and `bayes-gp report` rebuilding it from the directory alone."""
    import arviz as az

    out = tmp_path / "nuts"
    rc, stdout, err = _cli(
        "fit", csv_file, "--x", "x", "--y", "y", "--method", "nuts", "--sampler", "pymc",
        "--draws", "100", "--tune", "150", "--chains", "2", "--seed", "3", "--out", out,
    )  # fmt: skip
    assert rc == 0, err
    assert "divergences:" in stdout and "r_hat" in stdout
    idata = az.from_netcdf(out / "posterior.nc")
    assert idata["posterior"]["gp(x).ls"].shape == (2, 100)  # the formula y ~ gp(x)
    assert idata["log_likelihood"]["y"].shape == (2, 100, 40)
    html = (out / "report.html").read_text()
    mean_ls = float(idata["posterior"]["gp(x).ls"].mean())
    assert f"{mean_ls:.3g}"[:3] in html  # the summary table holds the posterior mean
    assert "r̂" in html or "r_hat" in html
    assert "http://" not in html and "https://" not in html.replace("https://www.w3.org", "")
    again = workflow.load(out)  # the reloaded fit predicts the saved numbers
    # fit.json holds the report's verdicts, row for row (what scripts read instead of the HTML)
    record = json.loads((out / "fit.json").read_text())
    rebuilt = workflow.make_report(again).verdicts
    assert [(v["check"], v["status"]) for v in record["verdicts"]] == [
        (v.check, v.status) for v in rebuilt
    ]
    assert {"r̂", "bulk ESS", "divergences"} <= {v["check"] for v in record["verdicts"]}
    for saved, v in zip(record["verdicts"], rebuilt, strict=True):
        if v.value is not None and np.isfinite(v.value):
            assert saved["value"] == pytest.approx(v.value, rel=1e-12), v.check
        assert saved["threshold"] == v.threshold and saved["advice"] == v.advice
    preds = pd.read_csv(out / "predictions.csv")
    pred = again.model.predict(preds[["x"]].to_numpy(), again.fit)
    np.testing.assert_allclose(pred.mean, preds["mean"], rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(pred.sd, preds["sd_f"], rtol=1e-13, atol=1e-15)
    assert again.fit["posterior"].attrs["bayes_gp_jitter"] == again.model.jitter
    (out / "report.html").unlink()
    rc, _, err = _cli("report", out)
    assert rc == 0, err
    assert (out / "report.html").read_text().count("data:image/png") >= 3


@pytest.fixture(scope="module")
def counts_csv(tmp_path_factory):
    rng = np.random.default_rng(0)
    t = np.linspace(0, 20, 60)
    pop = rng.uniform(1, 3, 60)
    cases = rng.poisson(pop * np.exp(0.5 + np.sin(t / 3)))
    path = tmp_path_factory.mktemp("counts") / "counts.csv"
    path.write_text("t,cases,pop,trials\n" + "\n".join(
        f"{a},{b},{c},{b + 3}" for a, b, c in zip(t, cases, pop, strict=True)
    ))  # fmt: skip
    return path


@pytest.mark.parametrize(
    "args,match",
    [
        (["--likelihood", "binomial"], "--likelihood binomial needs --trials \\(the trials column"),
        (
            ["--likelihood", "gaussian", "--exposure", "pop"],
            "--exposure goes with --likelihood poisson or negative_binomial or "
            "zero_inflated_poisson or zero_inflated_negative_binomial or hurdle_poisson or "
            "hurdle_negative_binomial$",
        ),
        (
            ["--likelihood", "poisson", "--trials", "trials"],
            "--trials goes with --likelihood binomial$",
        ),
        (["--likelihood", "poisson", "--exposure", "nope"], "'nope' not in"),
        (["--likelihood", "poisson", "--exposure", "t", "--x", "pop"], "non-negative|positive"),
        (
            ["--likelihood", "poisson", "--method", "ep"],
            "fits by --method nuts, nuts_joint, map, vi; not 'ep'",
        ),
    ],
)
def test_fit_csv_latent_bad_input_writes_nothing(counts_csv, tmp_path, args, match):
    base = ["--x", "t", "--y", "cases"]
    if "--x" in args:
        base = ["--y", "cases"]
    rc, _, err = _cli("fit", counts_csv, "--out", tmp_path / "o", *base, *args)
    assert rc != 0
    assert re.search(match, _one_line_error(err))
    assert not (tmp_path / "o").exists()


def test_fit_csv_counts_with_exposure_saves_and_reloads(counts_csv, tmp_path):
    """``bayes-gp fit counts.csv --likelihood poisson --exposure pop``: a Poisson latent GP with
    the exposure column, fitted by type-II Laplace; the reloaded fit predicts the same numbers."""
    out = tmp_path / "counts"
    rc, _, err = _cli("fit", counts_csv, "--x", "t", "--y", "cases", "--likelihood", "poisson",
                      "--exposure", "pop", "--method", "map", "--out", out)  # fmt: skip
    assert rc == 0, err
    again = workflow.load(out)
    gp = again.model
    assert gp.likelihood_name == "poisson" and again.task == "counts"
    assert gp.formula.endswith("+ offset(log(pop))")  # the exposure of the formula model
    np.testing.assert_allclose(gp.exposure[:3], np.loadtxt(
        counts_csv, delimiter=",", skiprows=1, usecols=2)[:3])  # fmt: skip
    preds = pd.read_csv(out / "predictions.csv")
    np.testing.assert_allclose(  # the rate per unit exposure, in a column that says so
        gp.prediction_columns(preds[["t"]].to_numpy(), again.fit)["mean"],
        preds["mean_per_unit_exposure"], rtol=1e-9,
    )  # fmt: skip


@pytest.fixture(scope="module")
def counts_fit(counts_csv):
    """A Poisson latent GP with exposure ``pop``, fitted by MAP (one restart)."""
    model = CSVModel(str(counts_csv), ("t",), "cases", likelihood="poisson", exposure="pop")
    return workflow.run(model, "map", n_restarts=1)


def test_count_predictions_are_on_the_scale_of_the_observed_counts(counts_fit):
    """Defect (issue 37): predictions.csv put the mean per unit exposure beside the observed
    count. Now mean, sd and the 94% interval are those of the count at the row's exposure (the
    expected count beside the observed one), the rate has its own column, and fit.json says
    which scale each column is on."""
    res, gp = counts_fit, counts_fit.model
    preds = res.predictions
    assert list(preds.columns) == ["split", "t", "pop", "mean", "sd", "lower_94", "upper_94",
                                   "mean_per_unit_exposure", "latent_mean", "latent_sd",
                                   "cases"]  # fmt: skip
    np.testing.assert_array_equal(preds["pop"], res.data.size_train)
    X, pop = preds[["t"]].to_numpy(), preds["pop"].to_numpy()
    at_pop = gp.predict(X, res.fit, size=pop)
    np.testing.assert_allclose(preds["mean"], at_pop.mean, rtol=1e-12)
    np.testing.assert_allclose(preds["sd"], np.sqrt(at_pop.var), rtol=1e-12)
    np.testing.assert_array_equal(preds["lower_94"], at_pop.lower)
    np.testing.assert_array_equal(preds["upper_94"], at_pop.upper)
    np.testing.assert_allclose(preds["mean"], pop * preds["mean_per_unit_exposure"], rtol=1e-9)
    assert (preds["lower_94"] <= preds["mean"]).all() and (preds["mean"] <= preds["upper_94"]).all()
    # the observed counts fall in their intervals at their own exposure (not at exposure 1)
    inside = (preds["cases"] >= preds["lower_94"]) & (preds["cases"] <= preds["upper_94"])
    assert inside.mean() > 0.85
    from bayes_gp.workflow.scoring import column_scales

    scales = column_scales(preds, gp, res.data)
    assert "at the row's pop" in scales["mean"] and "per unit exposure" in scales[
        "mean_per_unit_exposure"]  # fmt: skip
    assert "link scale" in scales["latent_mean"] and scales["pop"].startswith("the row's exposure")
    assert None not in scales.values()


def test_predict_at_new_rows_from_python(counts_fit):
    """``FitResult.predict(frame)``: the frame's own columns, then the prediction columns at each
    row's exposure; clear errors for missing columns, text, holes, no rows, a clashing name."""
    res = counts_fit
    new = pd.DataFrame({"id": ["a", "b", "c"], "t": [1.0, 1.0, 25.0], "pop": [1.0, 2.0, 10.0]})
    out = res.predict(new)
    assert list(out.columns[:3]) == ["id", "t", "pop"] and list(out["id"]) == ["a", "b", "c"]
    at = res.model.predict(new[["t"]].to_numpy(), res.fit, size=new["pop"].to_numpy())
    np.testing.assert_allclose(out["mean"], at.mean, rtol=1e-12)
    rate = out["mean_per_unit_exposure"]
    assert rate[0] == pytest.approx(rate[1]) and out["mean"][1] == pytest.approx(2 * out["mean"][0])
    bad = [
        (new.drop(columns="pop"), r"the new data lacks column\(s\) 'pop' \(the model's input "
         r"column\(s\) t and its exposure column pop; it has id, t\)"),
        (new.drop(columns=["t", "pop"]), r"lacks column\(s\) 't', 'pop'"),
        (new.assign(t=["1", "x", "2"]), "column 't' of the new data is not numeric: row 2 holds 'x'"),
        (new.assign(pop=[1.0, np.nan, 2.0]), r"1 row\(s\) of the new data have missing values "
         r"in the columns used \(rows 2\)"),
        (new.iloc[:0], "the new data has no rows"),
        (new.assign(mean=1.0), "column\\(s\\) 'mean', the names of prediction columns"),
    ]  # fmt: skip
    for frame, match in bad:
        with pytest.raises(ValueError, match=match):
            res.predict(frame)


def test_fit_predict_option_writes_predictions_new(counts_csv, tmp_path):
    """``bayes-gp fit ... --predict new.csv``: predictions_new.csv (the file's rows and columns,
    then the predictions at each row's exposure) written with the other files; fit.json says
    what each column holds; the reloaded result has them."""
    new = tmp_path / "new.csv"
    new.write_text("site,t,pop\nx,2.5,1.5\ny,30,4\n")
    out = tmp_path / "o"
    rc, stdout, err = _cli("fit", counts_csv, "--x", "t", "--y", "cases", "--likelihood",
                           "poisson", "--exposure", "pop", "--method", "map", "--restarts", "1",
                           "--no-report", "--predict", new, "--out", out)  # fmt: skip
    assert rc == 0, err
    assert "predictions_new.csv" in stdout
    got = pd.read_csv(out / workflow.PREDICTIONS_NEW)
    assert list(got.columns) == ["site", "t", "pop", "mean", "sd", "lower_94", "upper_94",
                                 "mean_per_unit_exposure", "latent_mean", "latent_sd"]  # fmt: skip
    again = workflow.load(out)
    pd.testing.assert_frame_equal(again.new_predictions, got)
    expected = again.predict(pd.read_csv(new))
    pd.testing.assert_frame_equal(got, expected, check_exact=False, rtol=1e-12)
    record = json.loads((out / "fit.json").read_text())
    scales = record["prediction_columns"]
    assert set(scales) == {"predictions.csv", "predictions_new.csv"}
    assert scales["predictions_new.csv"]["site"] == "from the new data (as given)"
    assert "at the row's pop" in scales["predictions.csv"]["upper_94"]


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("t\n1\n", r"--predict .*new.csv lacks column\(s\) 'pop' \(the model's input column\(s\) t "
         r"and its exposure column pop; it has t\)"),
        ("t,pop\n1,2\nx,3\n", r"column 't' of --predict .*new.csv is not numeric: row 2 holds 'x'"),
        (None, "no such file"),
    ],
)  # fmt: skip
def test_fit_predict_option_bad_file_fails_before_the_fit(counts_csv, tmp_path, monkeypatch,
                                                          content, match):  # fmt: skip
    """A --predict file the model cannot read is one line, before anything is fitted, and
    nothing is written."""
    from bayes_gp.workflow import fitting

    def no_fit(*args, **kwargs):
        raise AssertionError("fitted before the --predict file was checked")

    monkeypatch.setattr(fitting.FitResult, "__init__", no_fit)
    new = tmp_path / "new.csv"
    if content is not None:
        new.write_text(content)
    rc, _, err = _cli("fit", counts_csv, "--x", "t", "--y", "cases", "--likelihood", "poisson",
                      "--exposure", "pop", "--method", "map", "--predict", new,
                      "--out", tmp_path / "o")  # fmt: skip
    assert rc == 1
    assert re.search(match, _one_line_error(err))
    assert not (tmp_path / "o").exists()


def test_fit_predict_option_for_a_gaussian_csv_model(csv_file, tmp_path):
    """--predict with a regression CSV model: the model's usual columns at the new rows."""
    new = tmp_path / "grid.csv"
    new.write_text("x\n-1\n5\n11\n")
    out = tmp_path / "o"
    rc, _, err = _cli("fit", csv_file, "--x", "x", "--y", "y", "--method", "map", "--restarts",
                      "1", "--no-report", "--predict", new, "--out", out)  # fmt: skip
    assert rc == 0, err
    got = pd.read_csv(out / workflow.PREDICTIONS_NEW)
    assert list(got.columns) == ["x", "mean", "sd_f", "sd_y", "lower_94", "upper_94"]
    again = workflow.load(out)
    pred = again.model.predict(got[["x"]].to_numpy(), again.fit)
    np.testing.assert_allclose(got["mean"], pred.mean, rtol=1e-10)
