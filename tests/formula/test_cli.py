"""``bayes-gp fit --formula ... --data file.csv --family ...``: the formula path of the command
line and the workflow (fit, save, reload from fit.json, report)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import bayes_gp
from bayes_gp import cli, workflow
from bayes_gp.formula import FAMILIES
from tests.formula.test_model import DATA


@pytest.fixture(scope="module")
def csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("formula") / "sites.csv"
    DATA.to_csv(path, index=False)
    return path


def test_the_command_line_lists_every_family():
    fit = cli.build_parser()._subparsers._group_actions[0].choices["fit"]
    family = next(a for a in fit._actions if a.dest == "family")
    assert tuple(family.choices) == FAMILIES


def test_fit_a_poisson_formula_save_reload_and_report(csv, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["fit", "--formula", "counts ~ gp(t) + (1|site)", "--data", str(csv),
            "--family", "poisson", "--method", "map", "--out", str(out)]  # fmt: skip
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "gp(t).ls" in printed and "1|site.sigma" in printed
    record = json.loads((out / workflow.FIT_JSON).read_text())
    assert record["spec"]["formula"] == "counts ~ gp(t) + (1|site)"
    assert record["spec"]["family"] == "poisson"
    res = workflow.load(out)  # the model rebuilt from fit.json's specification
    assert type(res.model).__name__ == "FormulaLatentGP"
    assert res.model.formula == "counts ~ gp(t) + (1|site)"
    assert cli.main(["report", str(out)]) == 0
    html = (out / workflow.REPORT).read_text()
    assert "counts ~ gp(t) + (1|site)" in html


def test_fit_with_known_measurement_errors(tmp_path):
    """``--noise err --learn-noise``: the column's standard deviations on the diagonal beside a
    learned sigma, kept in fit.json and rebuilt on reload; the fit equals the formula model's."""
    data = DATA.assign(err=np.linspace(0.1, 0.3, len(DATA)))
    path = tmp_path / "err.csv"
    data.to_csv(path, index=False)
    out = tmp_path / "out"
    argv = ["fit", "--formula", "y ~ gp(t)", "--data", str(path), "--noise", "err",
            "--learn-noise", "--method", "map", "--out", str(out), "--no-report"]  # fmt: skip
    assert cli.main(argv) == 0
    spec = json.loads((out / workflow.FIT_JSON).read_text())["spec"]
    assert spec["noise"] == "err" and spec["learn_noise"] is True
    res = workflow.load(out)
    np.testing.assert_allclose(res.model.known_noise_var, data["err"].to_numpy() ** 2)
    assert res.model.learn_noise and "sigma" in res.fit.params
    direct = bayes_gp.Model("y ~ gp(t)", data, noise="err", learn_noise=True)
    assert direct.log_marginal_likelihood(res.fit.params) == pytest.approx(
        res.fit.log_marginal_likelihood, rel=1e-10
    )


@pytest.mark.parametrize(
    "argv,fragment",
    [
        (["--formula", "y ~ gp(t)"], "--formula needs --data"),
        (["--formula", "y ~ gp(t)", "--data", "{csv}", "--x", "t"], "--x is for a CSV model"),
        (["--formula", "y ~ gp(t)", "--data", "{csv}", "--family", "skew_normal"], "invalid choice"),
        (["--formula", "y ~ gp(tt)", "--data", "{csv}"], "no column 'tt' (used by gp(tt))"),
        (["--formula", "y gp(t)", "--data", "{csv}"], "response on the left of '~'"),
        (["sleepstudy", "--family", "poisson"], "--family goes with --formula"),
        (["sleepstudy", "--data", "{csv}"], "--data goes with --formula"),
        (["--formula", "counts ~ gp(t)", "--data", "{csv}", "--family", "poisson", "--noise",
          "t"], "--noise (known measurement errors) goes with --family gaussian"),
        (["--formula", "y ~ gp(t)", "--data", "{csv}", "--learn-noise"],
         "--learn-noise adds a learned sigma"),
        (["--formula", "y ~ gp(t)", "--data", "{csv}", "--noise", "nope"], "'nope'"),
        (["{csv}", "--x", "t", "--y", "y", "--noise", "t"], "--noise/--learn-noise are for"),
        ([], "give MODEL"),
    ],
)
def test_formula_argument_errors_are_one_line(argv, fragment, csv, tmp_path, capsys):
    argv = ["fit", *[a.format(csv=csv) for a in argv], "--out", str(tmp_path / "o")]
    assert cli.main(argv) != 0
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("bayes-gp"), err
    assert fragment in err, err
    assert not (tmp_path / "o").exists()
