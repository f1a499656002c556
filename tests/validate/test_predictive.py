"""Predictive calibration on held-out data (``bayes_gp.validate.predictive``) and each model's
``held_out_predictive``: coverage, PIT and reliability against exact references and Monte Carlo,
the checks failing where the predictive distribution is wrong, and bad input.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import bayes_gp
from bayes_gp.predictive import gaussian_mixture_cdf
from bayes_gp.protocol import HeldOutPredictive
from bayes_gp.validate.predictive import (
    interval_coverage,
    pit_histogram,
    predictive_calibration,
    reliability_table,
)


# ------------------------------------------------------------------ the statistics alone
def test_calibrated_gaussian_covers_nominal_and_wrong_sd_does_not():
    """y ~ N(mu, 1) scored under N(mu, 1), N(mu, 0.5²) and N(mu, 2²): coverage near nominal
    only for the right sd; the PIT test rejects both wrong ones (U shape, hump)."""
    rng = np.random.default_rng(1)
    mu = rng.normal(size=4000)
    y = mu + rng.normal(size=4000)
    right = predictive_calibration(HeldOutPredictive("cdf", *(2 * [stats.norm.cdf(y, mu, 1)])))
    narrow = predictive_calibration(HeldOutPredictive("cdf", *(2 * [stats.norm.cdf(y, mu, .5)])))
    wide = predictive_calibration(HeldOutPredictive("cdf", *(2 * [stats.norm.cdf(y, mu, 2)])))
    # binomial sd of a coverage at n = 4000 is <= 0.008
    assert right.coverage[0.5] == pytest.approx(0.5, abs=0.03)
    assert right.coverage[0.9] == pytest.approx(0.9, abs=0.02)
    assert right.pit_p_value > 0.001
    # exact values for the wrong sds: P(|Z| < 0.674 * s) with s = 0.5 and 2
    assert narrow.coverage[0.5] == pytest.approx(2 * stats.norm.cdf(0.6745 * 0.5) - 1, abs=0.03)
    assert wide.coverage[0.9] == pytest.approx(2 * stats.norm.cdf(1.6449 * 2) - 1, abs=0.02)
    assert narrow.pit_p_value < 1e-10 and wide.pit_p_value < 1e-10
    assert narrow.pit[0] > 1.5 and narrow.pit[-1] > 1.5  # U shape
    assert wide.pit[0] < 0.5 and wide.pit[4] > 1.3  # hump
    assert right.scores() == {"coverage_50": right.coverage[0.5],
                              "coverage_90": right.coverage[0.9],
                              "pit_chi2_p": right.pit_p_value}  # fmt: skip


def test_count_coverage_matches_the_quantile_interval():
    """For Poisson predictive distributions, coverage from (F(y-), F(y)) equals membership of y
    in [ppf((1-q)/2), ppf((1+q)/2)] computed by scipy, observation by observation."""
    rng = np.random.default_rng(2)
    lam = rng.uniform(0.5, 20, 500)
    y = rng.poisson(lam)
    below, at = stats.poisson.cdf(y - 1, lam), stats.poisson.cdf(y, lam)
    for q in (0.5, 0.9):
        lo = stats.poisson.ppf((1 - q) / 2, lam)
        hi = stats.poisson.ppf((1 + q) / 2, lam)
        assert interval_coverage(below, at, q) == np.mean((y >= lo) & (y <= hi))
    with pytest.raises(ValueError, match="level"):
        interval_coverage(below, at, 1.0)


def test_count_pit_histogram_is_the_mean_of_randomised_pits():
    """The non-randomised PIT histogram (Czado et al. 2009) is the expectation of the
    randomised PIT's histogram: compare with 200 randomisations."""
    rng = np.random.default_rng(3)
    lam = rng.uniform(0.5, 5, 300)
    y = rng.poisson(lam * 1.5)  # a biased predictive
    below, at = stats.poisson.cdf(y - 1, lam), stats.poisson.cdf(y, lam)
    heights = pit_histogram(below, at, 10)
    u = below + rng.uniform(size=(200, y.size)) * (at - below)
    mc = np.mean([np.histogram(r, bins=10, range=(0, 1))[0] for r in u], axis=0) * 10 / y.size
    np.testing.assert_allclose(heights, mc, atol=0.03)
    assert heights.mean() == pytest.approx(1.0)
    assert heights[-1] > 2.0  # y larger than predicted: PIT piles up at 1


def test_reliability_table_and_ece():
    rng = np.random.default_rng(4)
    p = rng.uniform(size=20000)
    t = (rng.uniform(size=p.size) < p).astype(float)
    good = predictive_calibration(HeldOutPredictive("probability", probability=p, outcome=t))
    assert good.ece < 0.02 and good.coverage == {} and good.pit is None
    table = good.reliability
    assert table["n"].sum() == p.size and len(table) == 10
    np.testing.assert_allclose(table["observed"], table["mean_predicted"], atol=0.03)
    # over-confident probabilities (pushed towards 0 and 1) have a large ECE
    sharp = np.clip(0.5 + 1.8 * (p - 0.5), 0, 1)
    bad = predictive_calibration(HeldOutPredictive("probability", probability=sharp, outcome=t))
    assert bad.ece > 0.08  # 0.11 here; the calibrated one < 0.02
    assert bad.scores() == {"ece": bad.ece}
    small = reliability_table(np.array([0.05, 0.95, 0.97]), np.array([0.0, 1.0, 0.0]), bins=10)
    assert list(small["n"]) == [1, 2] and small["observed"].tolist() == [0.0, 0.5]


def test_held_out_predictive_rejects_bad_values():
    with pytest.raises(ValueError, match="kind"):
        HeldOutPredictive("quantile")
    with pytest.raises(ValueError, match="cdf_below"):
        HeldOutPredictive("cdf", cdf_at=np.ones(3))
    with pytest.raises(ValueError, match="not finite"):
        HeldOutPredictive("cdf", np.zeros(2), np.array([0.5, np.nan]))
    with pytest.raises(ValueError, match="differ"):
        HeldOutPredictive("cdf", np.zeros(2), np.zeros(3))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        HeldOutPredictive("probability", probability=np.array([1.2]), outcome=np.array([1.0]))
    with pytest.raises(ValueError, match="0 or 1"):
        HeldOutPredictive("probability", probability=np.array([0.2]), outcome=np.array([2.0]))
    with pytest.raises(TypeError, match="HeldOutPredictive"):
        predictive_calibration({"cdf": 1})


# ------------------------------------------------------------------ the models
@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(5)
    X = np.linspace(0, 10, 40)
    Xt = np.linspace(0.1, 9.9, 30)
    f, ft = np.sin(X), np.sin(Xt)
    return X, f + 0.3 * rng.normal(size=40), Xt, ft + 0.3 * rng.normal(size=30), rng


def test_gpr_map_cdf_is_the_gaussian_predictive(data):
    X, y, Xt, yt, _ = data
    gp = bayes_gp.GPRegression(X, y)
    fit = gp.fit("map", random_seed=0)
    pred = gp.held_out_predictive(Xt, yt, fit)
    p = gp.predict(Xt, fit, include_noise=True)
    np.testing.assert_allclose(pred.cdf_at, stats.norm.cdf(yt, p.mean, p.sd), rtol=1e-12)
    np.testing.assert_array_equal(pred.cdf_below, pred.cdf_at)
    with pytest.raises(ValueError, match="30 rows but held-out `y` has 29"):
        gp.held_out_predictive(Xt, yt[:-1], fit)
    with pytest.raises(ValueError, match="non-finite"):
        gp.held_out_predictive(Xt, np.where(np.arange(30) == 3, np.nan, yt), fit)


def test_gaussian_mixture_cdf_is_the_mixture():
    means = np.array([[0.0, 1.0], [2.0, -1.0]])
    variances = np.array([[1.0, 4.0], [0.25, 1.0]])
    y = np.array([0.5, 0.0])
    expected = [0.5 * (stats.norm.cdf(0.5, 0, 1) + stats.norm.cdf(0.5, 2, 0.5)),
                0.5 * (stats.norm.cdf(0.0, 1, 2) + stats.norm.cdf(0.0, -1, 1))]  # fmt: skip
    np.testing.assert_allclose(gaussian_mixture_cdf(y, means, variances), expected, rtol=1e-14)


def test_latent_poisson_cdf_against_monte_carlo(data):
    """The Poisson LatentGP's predictive CDF (Gauss-Hermite over the Laplace latent Gaussian)
    against the frequency in 20000 draws y* ~ Poisson(exp(f*)), f* ~ its latent Gaussian."""
    X, _, Xt, _, rng = data
    y = rng.poisson(np.exp(1 + np.sin(X)))
    yt = rng.poisson(np.exp(1 + np.sin(Xt)))
    gp = bayes_gp.LatentGP(X, y, likelihood="poisson", mean="constant")
    fit = gp.fit("map", random_seed=0)
    pred = gp.held_out_predictive(Xt, yt, fit)
    cols = gp.predict(Xt, fit)
    f = cols.latent_mean + cols.latent_sd * rng.standard_normal((20000, Xt.size))
    ys = rng.poisson(np.exp(f))
    np.testing.assert_allclose(pred.cdf_at, np.mean(ys <= yt, axis=0), atol=0.012)
    np.testing.assert_allclose(pred.cdf_below, np.mean(ys < yt, axis=0), atol=0.012)
    assert np.all(pred.cdf_below < pred.cdf_at)
    with pytest.raises(ValueError, match=r"non-negative integers|counts"):
        gp.held_out_predictive(Xt, yt + 0.5, fit)


@pytest.mark.parametrize(
    ("name", "lik", "phi", "draw"),
    [
        ("binomial", bayes_gp.latent.likelihoods.Binomial, (),
         lambda f, rng: rng.binomial(7, 1 / (1 + np.exp(-f)))),
        ("negative_binomial", bayes_gp.latent.likelihoods.NegativeBinomial, (3.0,),
         lambda f, rng: rng.negative_binomial(3.0, 3.0 / (3.0 + np.exp(f)))),
        ("student_t", bayes_gp.latent.likelihoods.StudentT, (4.0, 0.7),
         lambda f, rng: f + 0.7 * rng.standard_t(4.0, size=f.shape)),
        ("gaussian", bayes_gp.latent.likelihoods.Gaussian, (0.7,),
         lambda f, rng: f + 0.7 * rng.standard_normal(f.shape)),
        ("bernoulli", bayes_gp.latent.likelihoods.Bernoulli, (),
         lambda f, rng: (rng.uniform(size=f.shape) < 1 / (1 + np.exp(-f))).astype(float)),
    ],
)  # fmt: skip
def test_likelihood_cdf_against_sampling(name, lik, phi, draw):
    """Each likelihood's (P(Y < y | f), P(Y <= y | f)) against 40000 draws at 6 latent values."""
    rng = np.random.default_rng(6)
    f = np.linspace(-1.5, 1.5, 6)
    ys = draw(np.broadcast_to(f, (40000, 6)), rng).astype(float)
    y = ys[0]
    kw = {"trials": np.full(6, 7.0)} if name == "binomial" else {}
    below, at = lik(y, **kw).cdf(f, phi)
    np.testing.assert_allclose(at, np.mean(ys <= y, axis=0), atol=0.01)
    np.testing.assert_allclose(below, np.mean(ys < y, axis=0), atol=0.01)


def test_classifier_probability_is_predict_proba(data):
    X, _, Xt, _, rng = data
    labels = np.where(np.sin(X) + 0.3 * rng.normal(size=40) > 0, "up", "down")
    test = np.where(np.sin(Xt) > 0, "up", "down")
    gc = bayes_gp.GPClassifier(X, labels)
    fit = gc.fit("map", random_seed=0)
    pred = gc.held_out_predictive(Xt, test, fit)
    np.testing.assert_allclose(pred.probability, gc.predict_proba(Xt, fit), rtol=1e-12)
    np.testing.assert_array_equal(pred.outcome, (test == gc.classes_[1]).astype(float))
    with pytest.raises(ValueError, match="not among the training classes"):
        gc.held_out_predictive(Xt, np.where(test == "up", "sideways", test), fit)


def test_nuts_mixture_cdf_for_gpr(data):
    """For a NUTS fit the CDF is the mixture over draws: with 2 draws, the average of the two
    point-estimate CDFs at those draws."""
    import xarray as xr

    X, y, Xt, yt, _ = data
    gp = bayes_gp.GPRegression(X, y)
    draws = [{"ls": 1.2, "eta": 0.9, "sigma": 0.3}, {"ls": 2.0, "eta": 1.5, "sigma": 0.25}]
    post = xr.Dataset({k: (("chain", "draw"), [[d[k] for d in draws]]) for k in draws[0]})
    idata = xr.DataTree.from_dict({"posterior": post})
    pred = gp.held_out_predictive(Xt, yt, idata)
    attrs = {"objective": 0.0, "prior": True, "grad_norm": 0.0, "log_marginal_likelihood": 0.0}
    points = [gp.predict(Xt, gp.restore_fit("map", d, attrs), include_noise=True) for d in draws]
    expected = np.mean([stats.norm.cdf(yt, p.mean, p.sd) for p in points], axis=0)
    np.testing.assert_allclose(pred.cdf_at, expected, rtol=1e-10)


def test_pit_test_needs_five_observations_per_bin():
    F = np.linspace(0.04, 0.94, 12)
    cal = predictive_calibration(HeldOutPredictive("cdf", F, F))
    assert np.isnan(cal.pit_p_value) and "pit_chi2_p" not in cal.scores()
    assert ("PIT histogram χ² test", "needs ≥ 50 observations") in cal.rows()
    # F in [0.25, 0.75): 6 of the 12 values; in [0.05, 0.95): all but 0.04
    assert cal.coverage == {0.5: 6 / 12, 0.9: 11 / 12}
