"""``bayes_gp.report`` end to end: a real short NUTS run, a MAP fit, a list of fits, classifier
fits, synthetic data for escaping, and atomic saving.

The NUTS fit (PyMC's sampler, 2 x 100 draws on 30 points) compiles for ~15 s; it is shared by
the module. The whole file runs in about a minute.
"""

from __future__ import annotations

import re
import warnings

import arviz as az
import numpy as np
import pytest

import bayes_gp
from bayes_gp import GPClassifier, GPRegression, _io
from bayes_gp.report import Report, report
from bayes_gp.report import html as H
from bayes_gp.report.loo import point_loo
from tests.report.synthetic import datatree

pytestmark = pytest.mark.slow
SUMMARY_COLUMNS = [
    "mean", "sd", "hdi94_lb", "hdi94_ub", "ess_bulk", "ess_tail", "r_hat", "mcse_mean", "mcse_sd",
]  # fmt: skip
IMG = re.compile(r'<img src="([^"]*)"')


@pytest.fixture(scope="module")
def gpr():
    rng = np.random.default_rng(11)
    x = np.sort(rng.uniform(0, 10, 30))
    y = np.sin(x) + 0.2 * rng.standard_normal(30)
    return GPRegression(x, y, "expquad")


@pytest.fixture(scope="module")
def nuts(gpr):
    return gpr.sample(draws=100, tune=100, chains=2, sampler="pymc", random_seed=1)


@pytest.fixture(scope="module")
def map_fit(gpr):
    return gpr.fit_map(n_restarts=3, random_seed=1)


@pytest.fixture(scope="module")
def nuts_report(gpr, nuts):
    return report(nuts, model=gpr, X_new=np.array([10.5, 11.0]))


def _images(html: str) -> list[str]:
    return IMG.findall(html)


def test_nuts_report_summary_and_verdicts(nuts_report, nuts):
    rep = nuts_report
    assert isinstance(rep, Report) and rep.problems == []
    expected = az.summary(nuts, round_to="none", ci_kind="hdi", ci_prob=0.94)
    assert list(rep.summary.columns) == SUMMARY_COLUMNS
    assert list(rep.summary.index) == ["ls", "eta", "sigma"]
    np.testing.assert_allclose(rep.summary.to_numpy(float), expected.to_numpy(float))
    for name in rep.summary.index:  # the table shows the values
        assert f"<td>{H.fmt_number(rep.summary.loc[name, 'mean'])}</td>" in rep.html
        assert f"<td>{H.fmt_number(rep.summary.loc[name, 'r_hat'], 'rhat')}</td>" in rep.html
    v = {x.check: x for x in rep.verdicts}
    assert set(v) == {
        "r̂", "bulk ESS", "tail ESS", "divergences", "E-BFMI", "tree-depth saturation",
        "Pareto k̂ (PSIS-LOO)", "jitter (Cholesky pre-flight)",
        "prior predictive: mean of y", "prior predictive: sd of y",
    }  # fmt: skip
    assert v["jitter (Cholesky pre-flight)"].status == "ok"  # the default jitter sufficed
    assert v["r̂"].value == pytest.approx(rep.summary["r_hat"].max())
    assert v["bulk ESS"].value == pytest.approx(rep.summary["ess_bulk"].min())
    assert v["tail ESS"].value == pytest.approx(rep.summary["ess_tail"].min())
    assert v["bulk ESS"].status != "ok"  # 200 draws cannot give ESS >= 400
    assert v["divergences"].value == int(nuts["sample_stats"]["diverging"].sum())
    assert "reached_max_treedepth" in v["tree-depth saturation"].detail
    assert rep.status in ("warn", "fail")
    for x in rep.verdicts:
        assert x.status == "ok" or x.advice, x


def test_nuts_report_describes_model_and_inference(nuts_report, nuts):
    html = nuts_report.html
    for text in (
        "GPRegression(n=30, D=1, kernel=&#x27;expquad&#x27;, ard=False)",
        "k(x, x&#x27;) = η² exp(−r²/2)",
        "R&amp;W (4.9)",
        "ls ~ LogNormal(",
        "sigma ~ HalfNormal(0, ",
        'sampler</td><td class="text">pymc</td>',
        "draws per chain</td><td>100</td>",
        "tuning steps per chain</td><td>100</td>",
        "sampling time (s)",
        "elpd",
        "Predictions at X_new",
    ):
        assert text in html, text
    assert f"<td>{H.fmt_number(az.loo(nuts).elpd)}</td>" in html


def test_nuts_report_embeds_every_figure(nuts_report):
    import matplotlib.pyplot as plt

    images = _images(nuts_report.html)
    # trace, rank, pair, energy, prior vs posterior, prior predictive, predictive check, bands
    assert len(images) == 8
    assert all(src.startswith(H.DATA_URI_PREFIX) and len(src) > 2000 for src in images)
    assert not re.search(r'(src|href)="(?!data:)', nuts_report.html)
    assert "http" not in nuts_report.html
    assert plt.get_fignums() == []  # every figure was closed
    assert nuts_report._repr_html_() == nuts_report.fragment
    assert _images(nuts_report.fragment) == images


def test_map_report(gpr, map_fit):
    rep = report(map_fit, model=gpr, title="MAP <fit>")
    assert rep.problems == []
    assert "<h1>MAP &lt;fit&gt;</h1>" in rep.html
    assert "there are no chains, so r̂, ESS, divergences, E-BFMI" in rep.html
    assert f"<td>{H.fmt_number(map_fit.log_marginal_likelihood)}</td>" in rep.html
    assert "Restarts (best first)" in rep.html
    assert [v.check for v in rep.verdicts] == [
        "best restart converged",
        "restarts reaching the best optimum",
        "jitter (Cholesky pre-flight)",
        "point estimate inside its prior",
        "prior predictive: mean of y",
        "prior predictive: sd of y",
    ]
    assert "jitter on the diagonal" in rep.html
    assert list(rep.summary.index) == ["ls", "eta", "sigma"]
    assert rep.summary.loc["ls", "estimate"] == pytest.approx(float(map_fit.params["ls"]))
    elpd = point_loo(gpr, map_fit).elpd
    assert f"<td>{H.fmt_number(elpd)}</td>" in rep.html
    assert len(_images(rep.html)) == 3  # prior and posterior predictive checks, bands


def test_list_of_fits_compares_map_and_nuts(gpr, nuts, map_fit, tmp_path):
    path = tmp_path / "cmp.html"
    rep = report([nuts, map_fit], path, model=gpr)
    assert path.read_text(encoding="utf-8") == rep.html
    assert rep.problems == []
    names = ["expquad NUTS (pymc)", "expquad MAP"]
    assert set(rep.loo_table.index) == set(names)
    psis = az.loo(nuts)
    assert rep.loo_table.loc[names[0], "elpd"] == pytest.approx(psis.elpd)
    assert rep.loo_table.loc[names[0], "p_loo"] == pytest.approx(psis.p)
    assert rep.loo_table.loc[names[1], "elpd"] == pytest.approx(point_loo(gpr, map_fit).elpd)
    assert rep.loo_table["elpd_diff"].max() == 0.0
    # the comparison the report shows: az.compare needs two NUTS fits, so the LOO table of both
    assert rep.arviz_comparison is None
    assert rep.comparison is rep.loo_table
    assert list(rep.comparison.index) == list(rep.loo_table.index)
    assert "az.compare needs two or more NUTS fits" in rep.html
    assert "MAP vs NUTS: LOO predictive scores" in rep.html
    assert list(rep.summary.index.get_level_values("fit").unique()) == names
    assert {v.subject for v in rep.verdicts} == set(names)


def test_two_nuts_fits_are_compared_by_arviz(gpr, nuts):
    halves = {
        "first half": nuts.isel(draw=slice(0, 50), missing_dims="ignore"),
        "second half": nuts.isel(draw=slice(50, None), missing_dims="ignore"),
    }
    rep = report(halves, model=gpr, figures=False)
    with warnings.catch_warnings():  # Pareto k̂ of 50-draw halves; reported as a verdict
        warnings.simplefilter("ignore", UserWarning)
        expected = az.compare(halves, round_to="none")
    assert list(rep.comparison.index) == list(expected.index)
    np.testing.assert_allclose(rep.comparison["elpd"], expected["elpd"])
    assert rep.comparison is rep.arviz_comparison  # it covers every fit compared
    assert "PSIS-LOO comparison of the NUTS fits (az.compare)" in rep.html
    assert _images(rep.html) == []


def test_synthetic_tree_without_model_escapes_names():
    rng = np.random.default_rng(0)
    params = {"<ls>": rng.standard_normal((2, 200)), "eta&": rng.standard_normal((2, 200))}
    dt = datatree(chains=2, draws=200, params=params, latent=rng.standard_normal((2, 200, 5)))
    rep = report(dt, title="<script>alert(1)</script>")
    assert "<script>" not in rep.html and "<ls>" not in rep.html
    assert "&lt;ls&gt;" in rep.html and "eta&amp;" in rep.html
    assert list(rep.summary.index) == ["<ls>", "eta&"]  # f is aggregated, not tabulated
    assert "Latent values, in aggregate: f (5 values)" in rep.html
    assert "No model was given" in rep.html
    assert len(_images(rep.html)) == 4 and rep.problems == []  # trace, rank, pair, energy


def test_save_is_atomic(tmp_path, monkeypatch):
    rep = report(datatree(chains=2, draws=100), figures=False)
    target = tmp_path / "report.html"
    target.write_text("old")

    def failing_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(_io.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        rep.save(target)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]  # no temporary file left
    monkeypatch.undo()
    assert rep.save(target) == target and target.read_text(encoding="utf-8") == rep.html
    with pytest.raises(FileNotFoundError, match="does not exist"):
        rep.save(tmp_path / "missing" / "r.html")


def test_classifier_point_fits():
    rng = np.random.default_rng(3)
    x = rng.uniform(-3, 3, 40)
    t = np.where(rng.uniform(size=40) < 1 / (1 + np.exp(-2.5 * np.sin(x))), "yes", "no")
    model = GPClassifier(x, t, "expquad", link="probit")
    fits = {"Laplace": model.fit_laplace(2, random_seed=0), "EP": model.fit_ep(2, random_seed=0)}
    rep = report(fits, model=model)
    assert rep.problems == []
    assert "Bernoulli, probit link; classes no, yes" in rep.html
    assert "az.plot_ppc_pava" in rep.html
    assert "Predictive mean and 94% bands (at the point estimate)" in rep.html
    # prior predictive check, calibration and probability curve, per fit
    assert len(_images(rep.html)) == 6
    methods = rep.loo_table["method"].to_dict()
    assert methods["Laplace"].startswith("Laplace LA-LOO") and methods["EP"].startswith("cavity LOO of q(f) at EP")


def test_classifier_nuts_shaped_tree():
    """The NUTS path of a classifier (latent f aggregated, calibration of replicated labels,
    probability band over draws) on draws of f from the Laplace approximation."""
    rng = np.random.default_rng(4)
    x = rng.uniform(-3, 3, 30)
    t = (x + 0.5 * rng.standard_normal(30) > 0).astype(int)
    model = GPClassifier(x, t, "matern32")
    fit = model.fit_laplace(1, random_seed=0)
    K = model._train(model._values(fit.params))[0]
    W = -model.likelihood.derivatives(fit.f_mode)[2]
    cov = np.linalg.inv(np.linalg.inv(K) + np.diag(W))
    f = rng.multivariate_normal(fit.f_mode, cov, size=(2, 100))
    hyper = {
        n: float(v) * np.exp(0.05 * rng.standard_normal((2, 100))) for n, v in fit.params.items()
    }
    rep = report(datatree(chains=2, draws=100, params=hyper, latent=f), model=model)
    assert rep.problems == []
    assert "r̂ (latent f: worst of all values)" in {v.check for v in rep.verdicts}
    assert list(rep.summary.index) == ["ls", "eta"]
    assert "94% band" in rep.html and "az.plot_ppc_pava" in rep.html


def test_invalid_inputs(gpr, map_fit):
    with pytest.raises(ValueError, match="MapFit needs `model=`"):
        report(map_fit)
    with pytest.raises(TypeError, match="must be a DataTree"):
        report({"a": 1.0}, model=gpr)
    with pytest.raises(TypeError, match="GPRegression, GPClassifier or HeteroscedasticGPR"):
        report(map_fit, model="gpr")
    with pytest.raises(TypeError, match=r"\(model, fit\)"):
        report([(map_fit, gpr)])
    with pytest.raises(ValueError, match="empty"):
        report([])
    tree = datatree()
    with pytest.raises(ValueError, match="no `posterior` group"):
        report(tree["sample_stats"].to_dataset().pipe(lambda ds: type(tree).from_dict({"x": ds})))


def test_package_is_callable_as_the_function():
    import inspect
    import sys

    import bayes_gp.report.diagnostics as D

    assert bayes_gp.report is sys.modules["bayes_gp.report"]
    assert bayes_gp.report.diagnostics is D
    assert inspect.signature(bayes_gp.report) == inspect.signature(report)
    rep = bayes_gp.report(datatree(chains=2, draws=100), figures=False)
    assert isinstance(rep, Report) and rep.summary.index.tolist() == ["ls", "eta"]


def test_regression_ppc_draws_marginals_above_the_joint_limit(monkeypatch):
    """Above PPC_JOINT_MAX observations the replicated data come from the per-point marginals
    (no n x n covariance): same shapes, and per-point means / sds match the predictive."""
    from bayes_gp import GPRegression

    rng = np.random.default_rng(0)
    X = np.linspace(0, 5, 30)
    gp = GPRegression(X, np.sin(X) + 0.1 * rng.normal(size=30))
    fit = gp.fit_map(n_restarts=1, prior=False, random_seed=0)
    joint = gp.replicate(fit, 50)
    monkeypatch.setattr(GPRegression, "PPC_JOINT_MAX", 10)
    marginal = gp.replicate(fit, 4000)
    assert joint.shape == (50, 30) and marginal.shape == (4000, 30)
    pred = gp.predict(X, fit, include_noise=True)
    np.testing.assert_allclose(marginal.mean(axis=0), pred.mean, atol=4 * pred.sd.max() / 60)
    np.testing.assert_allclose(marginal.std(axis=0), pred.sd, rtol=0.06)
