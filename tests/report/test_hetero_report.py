"""``bayes_gp.report`` of a :class:`~bayes_gp.HeteroscedasticGPRegression` fit: the model
description with its noise GP, the summary of the hyperparameters with the latents ``f`` and
``g`` aggregated, every figure (the bands with the noise-sd panel), replicated data drawn with
the model's noise, and the PSIS-LOO comparison with a homoscedastic GP.

One real short NUTS run per model (nutpie, the heteroscedastic model on its C log density
(bayes_gp.inference.native_latent); 2 x 100 draws after 100 tuning steps, 30
points with a noise sd growing from 0.05 to 1.05), shared by the module.
"""

from __future__ import annotations

import re
import warnings

import arviz as az
import numpy as np
import pytest
import xarray as xr

from bayes_gp import GPRegression, HeteroscedasticGPRegression
from bayes_gp.report import describe, report
from bayes_gp.report import html as H
from bayes_gp.report.core import PPC_DRAWS

IMG = re.compile(r'<img src="([^"]*)"')
HYPER = ["ls", "eta", "noise_ls", "noise_eta", "noise_mean"]
X_NEW = np.array([10.5, 11.0])


def _data():
    rng = np.random.default_rng(11)
    x = np.sort(rng.uniform(0, 10, 30))
    y = np.sin(x) + (0.05 + 0.1 * x) * rng.standard_normal(30)
    return x, y


@pytest.fixture(scope="module")
def hetero():
    return HeteroscedasticGPRegression(*_data())


@pytest.fixture(scope="module")
def idata_h(hetero):
    return hetero.sample(draws=100, tune=100, chains=2, sampler="nutpie", random_seed=1)


@pytest.fixture(scope="module")
def rep_h(hetero, idata_h):
    return report(idata_h, model=hetero, X_new=X_NEW)


def test_describe_model_rows():
    x, y = _data()
    model = HeteroscedasticGPRegression(x, y, "matern32", "expquad")
    rows = dict(model.describe())
    assert rows["kernel of f"] == "matern32"
    assert rows["kernel formula"] == "k(x, x') = η² (1 + √3 r) exp(−√3 r)"
    assert rows["likelihood"].startswith("Gaussian with input-dependent noise: ")
    assert "y_i ~ N(f(x_i), exp(g(x_i))²)" in rows["likelihood"]
    assert "σ²I" not in rows["likelihood"]
    assert rows["noise GP kernel"] == "expquad"
    assert rows["noise GP kernel formula"] == (
        "k(x, x') = η² exp(−r²/2)  (hyperparameters noise_ls, noise_eta)"
    )
    assert rows["noise GP equation"] == "R&W (4.9)"
    assert rows["observations n"] == 30
    assert [line.split(" ~ ")[0] for line in describe.prior_rows(model)] == HYPER
    assert model.bands_note and not GPRegression(x, y).bands_note  # the noise panel


@pytest.mark.slow
def test_posterior_predictive_draws_the_model_noise(hetero, idata_h):
    post = idata_h["posterior"]
    f = np.asarray(post["f"]).reshape(-1, 30)
    g = np.asarray(post["g"]).reshape(-1, 30)
    reps = hetero.posterior_predictive(idata_h, random_seed=3)  # every draw, in order
    assert reps.shape == (200, 30)
    z = (reps - f) / np.exp(g)  # N(0, 1) if the noise is exp(g) per draw and observation
    assert abs(z.mean()) < 4 / np.sqrt(z.size)
    assert abs(z.std() - 1.0) < 4 / np.sqrt(2 * z.size)
    sub = hetero.posterior_predictive(idata_h, PPC_DRAWS, random_seed=0)
    assert sub.shape == (PPC_DRAWS, 30)
    np.testing.assert_array_equal(sub, hetero.posterior_predictive(idata_h, PPC_DRAWS, random_seed=0))
    with pytest.raises(ValueError, match="n_draws"):
        hetero.posterior_predictive(idata_h, 0)
    with pytest.raises(ValueError, match=r"no posterior draws of \['f'\]"):
        no_f = xr.DataTree.from_dict({"posterior": post.to_dataset().drop_vars("f")})
        hetero.posterior_predictive(no_f)


@pytest.mark.slow
def test_predictive_bands_equal_predict_and_noise_sd(hetero, idata_h):
    grid = np.linspace(-1.0, 12.0, 23)
    pred_f, pred_y, noise = hetero.predictive_bands(grid, idata_h, max_draws=60, random_seed=2)
    kw = {"max_draws": 60, "random_seed": 2}
    for got, want in ((pred_f, hetero.predict(grid, idata_h, **kw)),
                      (pred_y, hetero.predict(grid, idata_h, include_noise=True, **kw))):  # fmt: skip
        for name in ("mean", "var", "lower", "upper"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
        assert got.extra == want.extra == {"n_draws": 60}
    for got, want in zip(noise, hetero.noise_sd(grid, idata_h, **kw), strict=True):
        np.testing.assert_array_equal(got, want)
    assert np.all(pred_y.var > pred_f.var) and np.all(noise[1] < noise[0])
    assert np.all(noise[0] < noise[2])


@pytest.mark.slow
def test_report_describes_the_noise_gp(rep_h):
    html = rep_h.html
    for text in (
        "HeteroscedasticGPRegression(n=30, D=1, kernel=&#x27;expquad&#x27;, "
        "noise_kernel=&#x27;expquad&#x27;, ard=False)",
        "y_i ~ N(f(x_i), exp(g(x_i))²)",
        "noise GP kernel formula",
        "(hyperparameters noise_ls, noise_eta)",
        "g ~ GP(noise_mean, k_g)",
        "noise_ls ~ LogNormal(",
        "noise_eta ~ HalfNormal(0, 1)",
        "noise_mean ~ Normal(",
        "y_rep = f + exp(g) ε",
        "noise standard deviation exp(g(x))",
    ):
        assert text in html, text
    assert "K + σ²I" not in html
    assert rep_h.title == "bayes_gp report: expquad, noise GP expquad NUTS (nutpie)"


@pytest.mark.slow
def test_report_summary_and_latent_verdicts(rep_h, idata_h):
    assert rep_h.problems == []
    assert list(rep_h.summary.index) == HYPER
    expected = az.summary(idata_h, var_names=HYPER, round_to="none", ci_kind="hdi", ci_prob=0.94)
    np.testing.assert_allclose(rep_h.summary.to_numpy(float), expected.to_numpy(float))
    checks = {v.check: v for v in rep_h.verdicts}
    latent = checks["r̂ (latent g_rotated_, g, f: worst of all values)"]
    worst = max(float(np.nanmax(az.rhat(idata_h, var_names=[v])[v])) for v in ("g", "f"))
    assert latent.value >= worst
    assert "g (30 values): worst r̂" in rep_h.html and "f (30 values): worst r̂" in rep_h.html
    assert "Pareto k̂ (PSIS-LOO)" in checks
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Pareto k̂ warnings of the short run
        elpd = az.loo(idata_h).elpd
    assert f"<td>{H.fmt_number(elpd)}</td>" in rep_h.html


@pytest.mark.slow
def test_report_embeds_every_figure_and_noise_predictions(rep_h, hetero, idata_h):
    import matplotlib.pyplot as plt

    images = IMG.findall(rep_h.html)
    # trace, rank, pair (5 hyperparameters), energy, prior vs posterior, prior and posterior
    # predictive checks, bands
    assert len(images) == 8
    assert all(src.startswith(H.DATA_URI_PREFIX) and len(src) > 2000 for src in images)
    assert set(rep_h.timings) >= {"trace", "rank", "pair", "energy", "prior_posterior", "ppc",
                                  "bands"}  # fmt: skip
    assert plt.get_fignums() == []
    # the predictions table: mean, sd and interval of y*, and the noise sd
    pred = hetero.predict(X_NEW, idata_h, include_noise=True)
    noise = hetero.noise_sd(X_NEW, idata_h)[0]
    for value in (*pred.mean, *pred.sd, *noise):
        assert f"<td>{H.fmt_number(value)}</td>" in rep_h.html, value
    assert ">noise_sd</th>" in rep_h.html and ">sd_f</th>" in rep_h.html


@pytest.mark.slow
def test_comparison_with_the_homoscedastic_gp(hetero, idata_h):
    homo = GPRegression(hetero.X, hetero.y, "expquad")
    idata_g = homo.sample(draws=100, tune=100, chains=2, sampler="nutpie", random_seed=1)
    rep = report({"hetero": (hetero, idata_h), "homo": (homo, idata_g)}, figures=False)
    assert rep.problems == []
    assert set(rep.comparison.index) == {"hetero", "homo"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Pareto k̂ warnings of the short runs
        elpd = {"hetero": az.loo(idata_h).elpd, "homo": az.loo(idata_g).elpd}
    for name, value in elpd.items():
        assert rep.comparison.loc[name, "elpd"] == pytest.approx(value)
        assert rep.loo_table.loc[name, "elpd"] == pytest.approx(value)
    assert "PSIS-LOO comparison of the NUTS fits (az.compare)" in rep.html
    assert "MAP vs NUTS: LOO predictive scores" in rep.html
    assert list(rep.summary.loc["hetero"].index) == HYPER
    assert list(rep.summary.loc["homo"].index) == ["ls", "eta", "sigma"]
    assert "y_i ~ N(f(x_i), exp(g(x_i))²)" in rep.html and "K + σ²I" in rep.html


@pytest.mark.slow
def test_without_model_the_latents_are_found_by_their_obs_dimension(idata_h):
    rep = report(idata_h, figures=False)
    assert rep.problems == []
    assert sorted(rep.summary.index) == sorted(HYPER)  # in the posterior's order
    assert "r̂ (latent g_rotated_, g, f: worst of all values)" in {v.check for v in rep.verdicts}
    assert "No model was given" in rep.html
