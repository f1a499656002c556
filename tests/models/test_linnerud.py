"""The Linnerud multi-output declared model (``models/linnerud.py``): data, split, and fits through
the workflow and the ``bayes-gp`` command with (n, P) targets."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bayes_gp import MultiOutputGP, cli, workflow

MODEL = "linnerud"

FEATURES = ["Chins", "Situps", "Jumps"]
OUTPUTS = ("Weight", "Waist", "Pulse")
TEST_ROWS = [6, 10, 15, 17]  # default_rng(1998).permutation(20)[:4], sorted
SUFFIXES = ("mean", "sd_f", "sd_y", "lower_94", "upper_94")


def _raw() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_linnerud

    raw = load_linnerud()
    return np.asarray(raw.data, float), np.asarray(raw.target, float)


def _cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


def test_data_shape_and_split(decl, data):
    X, Y = _raw()
    assert X.shape == Y.shape == (20, 3)
    full = decl.load_data(fast=False)
    for d in (data, full):
        assert d.feature_names == FEATURES
        assert d.target_name == OUTPUTS and d.target_names == list(OUTPUTS)
        assert d.X_train.shape == d.y_train.shape == (16, 3)
        assert d.X_test.shape == d.y_test.shape == (4, 3)
        np.testing.assert_array_equal(d.y_test, Y[TEST_ROWS])
        train = np.setdiff1d(np.arange(20), TEST_ROWS)
        np.testing.assert_array_equal(d.y_train, Y[train])
        # inputs standardised with the training mean and sd; test men scaled the same way
        mu, sd = X[train].mean(axis=0), X[train].std(axis=0)
        np.testing.assert_allclose(d.X_train.mean(axis=0), 0.0, atol=1e-12)
        np.testing.assert_allclose(d.X_train.std(axis=0), 1.0, rtol=1e-12)
        np.testing.assert_allclose(d.X_test, (X[TEST_ROWS] - mu) / sd, rtol=1e-12)
    np.testing.assert_array_equal(data.X_train, full.X_train)  # fast mode: same data


def test_builds_the_rank_one_ard_icm(decl, data):
    for method in decl.methods:
        gp = decl.build(data, method)
        assert isinstance(gp, MultiOutputGP) and gp.ard and gp.kronecker
        assert gp.outputs == list(OUTPUTS) and gp.feature_names == FEATURES
        assert sorted(gp.hyperparameters) == ["W_diag", "W_offdiag", "kappa", "ls", "sigma"]
    sizes = {v.name: int(np.prod(v.shape.eval())) for v in gp.model.free_RVs}
    assert sizes == {"ls": 3, "W_diag": 1, "W_offdiag": 2, "kappa": 3, "sigma": 3}
    with pytest.raises(ValueError, match="fits by `method` 'nuts', 'map'"):
        decl.build(data, "laplace")


def test_default_noise_prior_puts_the_waist_noise_on_the_boundary(data):
    """Why the model has its own noise prior (module docstring): with the default
    HalfNormal(s_p) the MAP fit interpolates Waist (sigma ~ 1e-5 in) at nearly the same
    marginal likelihood, and predicts the held-out men worse."""
    X = pd.DataFrame(data.X_train, columns=FEATURES)
    Y = pd.DataFrame(data.y_train, columns=list(OUTPUTS))
    gp = MultiOutputGP(X, Y, "expquad", rank=1, ard=True)
    fit = gp.fit_map(n_restarts=3, random_seed=1)
    # a noise on its boundary: a degenerate fit, not converged (issue 37, part 2)
    assert not fit.converged and [d.split()[0] for d in fit.degenerate] == ["sigma[1]"]
    assert float(fit.params["sigma"][1]) < 1e-3
    assert fit.log_marginal_likelihood == pytest.approx(-156.37, abs=0.01)
    scores = gp.scores(data.y_test, gp.prediction_columns(data.X_test, fit))
    assert scores["mean_log_predictive_density"] == pytest.approx(-4.51, abs=0.01)


@pytest.fixture(scope="module")
def map_run(tmp_path_factory):
    """``bayes-gp fit linnerud --fast --method map``: the exit status, output and directory."""
    out = tmp_path_factory.mktemp("linnerud") / "map"
    rc, stdout, err = _cli("fit", MODEL, "--fast", "--method", "map", "--seed", "1", "--out", out)
    return rc, stdout, err, out


def test_map_fit_through_the_command_line(map_run, data):
    rc, stdout, err, out = map_run
    assert rc == 0, err
    assert sorted(p.name for p in out.iterdir()) == [
        "fit.json", "posterior.nc", "predictions.csv", "report.html",
    ]  # fmt: skip
    record = json.loads((out / "fit.json").read_text())
    assert record["name"] == MODEL and record["method"] == "map"
    assert record["target"] == list(OUTPUTS) and record["n_train"] == 16
    assert record["fit"]["restarts"][0]["converged"] and record["fit"]["grad_norm"] < 1e-2
    # per-output columns: the inputs, P target columns, 5 prediction columns per output
    preds = pd.read_csv(out / "predictions.csv")
    expected = ["split", *FEATURES] + [f"{o}_{s}" for o in OUTPUTS for s in SUFFIXES]
    assert list(preds.columns) == expected + list(OUTPUTS)
    assert list(preds["split"]) == ["test"] * 4
    np.testing.assert_array_equal(preds[list(OUTPUTS)].to_numpy(), data.y_test)
    for o in OUTPUTS:
        assert np.all(preds[f"{o}_sd_y"] > preds[f"{o}_sd_f"])
        assert np.all(preds[f"{o}_lower_94"] < preds[f"{o}_mean"])
        assert np.all(preds[f"{o}_mean"] < preds[f"{o}_upper_94"])
    # held-out scores: over the 12 entries and per output, recomputed from the predictions
    scores = record["scores"]
    assert scores["n_test"] == 4
    assert all(np.isfinite(v) for v in scores.values())
    resid = preds[list(OUTPUTS)].to_numpy() - preds[[f"{o}_mean" for o in OUTPUTS]].to_numpy()
    assert scores["rmse"] == pytest.approx(np.sqrt(np.mean(resid**2)), rel=1e-12)
    for p, o in enumerate(OUTPUTS):
        assert scores[f"{o}_rmse"] == pytest.approx(np.sqrt(np.mean(resid[:, p] ** 2)), rel=1e-12)
        assert np.isfinite(scores[f"{o}_mean_log_predictive_density"])
    assert 0.0 <= scores["coverage_94"] <= 1.0
    # the calibration of the 12 held-out entries (too few for the PIT histogram's test)
    assert 0.0 <= scores["coverage_50"] <= scores["coverage_90"] <= 1.0
    assert "pit_chi2_p" not in scores
    # the numbers of the module docstring: the Waist noise off the boundary, the held-out fit
    sigma = dict(zip(OUTPUTS, record["params"]["sigma"], strict=True))
    assert sigma["Waist"] == pytest.approx(0.76, abs=0.01)
    assert record["log_marginal_likelihood"] == pytest.approx(-156.53, abs=0.01)
    assert scores["mean_log_predictive_density"] == pytest.approx(-3.71, abs=0.01)
    assert scores["rmse"] == pytest.approx(15.36, abs=0.01)
    assert "test rmse" in stdout
    html = (out / "report.html").read_text()
    assert "linnerud: map" in html and "Weight, Waist, Pulse" in html


def test_map_fit_reloads_and_predicts_the_saved_numbers(map_run, data):
    _, _, _, out = map_run
    again = workflow.load(out)
    record = json.loads((out / "fit.json").read_text())
    assert again.method == "map" and again.data.target_name == OUTPUTS
    for name, value in record["params"].items():
        np.testing.assert_array_equal(np.asarray(again.fit.params[name]), np.asarray(value))
    assert again.fit.log_marginal_likelihood == record["log_marginal_likelihood"]
    cols = again.model.prediction_columns(data.X_test, again.fit)
    for name, column in cols.items():
        np.testing.assert_allclose(column, again.predictions[name], rtol=1e-13, atol=1e-13)
    recomputed = again.model.scores(data.y_test, cols)
    assert {k: record["scores"][k] for k in recomputed} == pytest.approx(recomputed, rel=1e-12)
    # the per-output hyperparameters are saved on the model's output axis, ls on the features
    post = xr.load_dataset(out / "posterior.nc")
    assert post["sigma"].dims == ("output",) and list(post["output"].values) == list(OUTPUTS)
    assert post["kappa"].dims == ("output",)
    assert post["ls"].dims == ("feature",) and list(post["feature"].values) == FEATURES
    # and `bayes-gp report` rebuilds the report from the directory alone, byte for byte
    before = (out / "report.html").read_bytes()
    (out / "report.html").unlink()
    rc, _, err = _cli("report", out)
    assert rc == 0, err
    assert (out / "report.html").read_bytes() == before


@pytest.mark.slow
@pytest.mark.usefixtures("nutpie_jax")
def test_fast_nuts_run_through_the_command_line(tmp_path, data):
    """``bayes-gp fit linnerud --fast --method nuts`` (short chains): posterior shapes, r-hat,
    per-output predictions and held-out scores, and a reload that predicts the saved numbers.
    nutpie compiles with JAX here (the same steps as numba: 26 s against 69 s on a fresh HOME)."""
    from arviz_stats import rhat

    out = tmp_path / "nuts"
    rc, stdout, err = _cli(
        "fit", MODEL, "--fast", "--method", "nuts", "--draws", "150", "--tune", "150",
        "--seed", "2", "--no-report", "--out", out,
    )  # fmt: skip
    assert rc == 0, err
    assert "divergences:" in stdout
    again = workflow.load(out)
    post = again.fit["posterior"]
    assert post["sigma"].shape == (2, 150, 3) and post["W_offdiag"].shape == (2, 150, 2)
    assert again.fit["log_likelihood"]["y"].shape == (2, 150, 48)
    for name in ("ls", "W_diag", "W_offdiag", "kappa", "sigma"):
        r = np.asarray(rhat(post[name]))
        assert np.all(r < 1.1), (name, r)
    record = json.loads((out / "fit.json").read_text())
    assert all(np.isfinite(v) for v in record["scores"].values())
    preds = pd.read_csv(out / "predictions.csv")
    cols = again.model.prediction_columns(data.X_test, again.fit)
    for name, column in cols.items():
        np.testing.assert_allclose(column, preds[name], rtol=1e-12, atol=1e-12)
