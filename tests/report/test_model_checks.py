"""The prior predictive check (``bayes_gp.report.model_checks``) and the report's prior
predictive and held-out calibration sections: draws from the prior (not the posterior) with the
moments the priors imply, verdicts that warn on a prior on the wrong scale, and the sections in
the HTML.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

import bayes_gp
from bayes_gp.report import report
from bayes_gp.report.model_checks import prior_predictive_check

X = np.linspace(0.0, 10.0, 30)


def _fixed_priors():
    return {"ls": pm.LogNormal.dist(np.log(2.0), 0.3), "eta": pm.LogNormal.dist(0.0, 0.3),
            "sigma": pm.LogNormal.dist(np.log(0.5), 0.2)}  # fmt: skip


def test_gpr_prior_predictive_has_the_prior_variance():
    """Zero mean, SE kernel: Var(y_i) = E[η²] + E[σ²] = exp(2·0.3²) + 0.25·exp(2·0.2²),
    whatever the data are (shifting y by 100 changes nothing: the draws ignore the data)."""
    expected = np.exp(2 * 0.09) + 0.25 * np.exp(2 * 0.04)
    for shift in (0.0, 100.0):
        gp = bayes_gp.GPRegression(X, np.sin(X) + shift, mean="zero", priors=_fixed_priors())
        draws = gp.prior_predictive(3000, random_seed=1)
        assert draws.shape == (3000, 30)
        assert np.mean(draws.var(axis=0)) == pytest.approx(expected, rel=0.06)
        assert abs(draws.mean()) < 0.1


def test_prior_on_the_wrong_scale_warns():
    """Data in the thousands with unit-scale fixed priors and a zero mean: both verdicts warn;
    the same data with bayes_gp's data-scaled default priors pass."""
    rng = np.random.default_rng(2)
    y = 5000.0 + 800.0 * np.sin(X) + 50.0 * rng.normal(size=X.size)
    bad = prior_predictive_check(bayes_gp.GPRegression(X, y, mean="zero", priors=_fixed_priors()))
    status = {v.check: v.status for v in bad.verdicts()}
    assert status == {"prior predictive: mean of y": "warn", "prior predictive: sd of y": "warn"}
    assert bad.mean_rank == 1.0 and bad.sd_ratio < 0.01 and bad.inside_range == 0.0
    good = prior_predictive_check(bayes_gp.GPRegression(X, y))
    assert {v.status for v in good.verdicts()} == {"ok"}
    assert 0.1 < good.sd_ratio < 10


def test_latent_poisson_prior_predictive_mean():
    """Poisson counts, zero mean: E[y_i] = E[exp(η² / 2)] over the prior of η."""
    rng = np.random.default_rng(3)
    eta = pm.LogNormal.dist(np.log(0.6), 0.1)
    gp = bayes_gp.LatentGP(X, rng.poisson(1.0, X.size), likelihood="poisson", mean="zero",
                           priors={"eta": eta, "ls": pm.LogNormal.dist(np.log(2.0), 0.3)})  # fmt: skip
    draws = gp.prior_predictive(3000, random_seed=4)
    etas = pm.draw(eta, draws=200000, random_seed=5)
    assert np.all(draws == np.round(draws)) and draws.min() >= 0
    assert draws.mean() == pytest.approx(np.mean(np.exp(etas**2 / 2)), rel=0.04)


def test_classifier_prior_predictive_is_binary_and_categorical_is_refused():
    labels = np.where(np.sin(X) > 0, "a", "b")
    gc = bayes_gp.GPClassifier(X, labels)
    check = prior_predictive_check(gc)
    assert check.binary and set(np.unique(check.draws)) <= {0.0, 1.0}
    assert [v.check for v in check.verdicts()] == ["prior predictive: mean of y"]
    mc = bayes_gp.MulticlassGPClassifier(X, np.array(["a", "b", "c"] * 10))
    with pytest.raises(NotImplementedError, match="class labels"):
        prior_predictive_check(mc)


def test_report_sections_with_held_out_data():
    rng = np.random.default_rng(6)
    y = np.sin(X) + 0.3 * rng.normal(size=X.size)
    Xt = np.linspace(0.2, 9.8, 40)
    yt = np.sin(Xt) + 0.3 * rng.normal(size=Xt.size)
    gp = bayes_gp.GPRegression(X, y)
    fit = gp.fit("map", random_seed=0)
    rep = report(fit, model=gp, held_out=(Xt, yt))
    assert rep.problems == []
    html = rep.html
    assert "Prior predictive check" in html and "Predictive calibration on held-out data" in html
    assert "coverage of the central 50% predictive interval" in html
    assert "PIT histogram and interval coverage of the held-out data" in html
    assert "Observed data vs 50 data sets from the prior predictive distribution" in html
    without = report(fit, model=gp, figures=False)
    assert "Predictive calibration on held-out data" not in without.html
    with pytest.raises(ValueError, match="pair"):
        report(fit, model=gp, held_out=(Xt,))
    # wrong lengths are the model's error, shown as a problem of that section
    broken = report(fit, model=gp, held_out=(Xt, yt[:-1]), figures=False)
    assert broken.problems and "40 rows but held-out `y` has 39" in broken.problems[0]


def test_bands_of_a_latent_gp_with_two_inputs_along_the_first():
    """A model whose bands() takes ``along`` gets its bands figure for D = 2 (along the first
    input, the other at its median, said in the caption); a Bernoulli model's legend is the
    credible band of the probability, not a band over posterior draws of a MAP fit."""
    rng = np.random.default_rng(7)
    X2 = np.column_stack([np.linspace(0.0, 10.0, 30), rng.uniform(0.0, 1.0, 30)])
    counts = rng.poisson(np.exp(0.5 + 0.5 * np.sin(X2[:, 0])))
    gp = bayes_gp.LatentGP(X2, counts, likelihood="poisson")
    fit = gp.fit("map", random_seed=0)
    html = report(fit, model=gp).html
    assert "along x0, the other inputs at their training medians" in html
    assert "drawn for one input dimension" not in html
    labels = (np.sin(X) > 0).astype(int)
    binary = bayes_gp.LatentGP(X, labels, likelihood="bernoulli")
    b = binary.bands(np.linspace(0.0, 10.0, 5), binary.fit("map", random_seed=0))
    assert b.kind == "probability" and b.band_label.startswith("94% credible band of P(y = 1)")
