"""Predictive quantiles of a latent GP's y by quadrature (issue 37, "Predictions a statistician
can report"): against 10^6-draw Monte Carlo references, integers for counts, deterministic, the
probability band of binary and binomial models, and bands() along a chosen input."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from bayes_gp import LatentGP
from bayes_gp.latent.likelihoods import (
    Beta,
    Binomial,
    Gamma,
    NegativeBinomial,
    Poisson,
    StudentT,
    ZeroInflatedNegativeBinomial,
    ZeroInflatedPoisson,
)
from bayes_gp.latent.predictive import predictive_quantiles
from bayes_gp.predictive import CI_QUANTILES, Z_CI

#: latent means and variances at four inputs (rows: posterior draws; three draws mix)
MEANS = np.array([[0.5, 2.0, 3.5, -0.5], [0.8, 1.7, 3.0, 0.0], [0.2, 2.4, 3.8, -1.0]])
VARS = np.array([[0.09, 0.5, 1.0, 2.25], [0.2, 0.3, 0.6, 1.0], [0.05, 0.8, 0.4, 3.0]])
SIZE = np.array([1.0, 2.0, 0.5, 3.0])
N_REF = 10**6
#: four standard errors of an empirical CDF at the 3% / 97% points from N_REF draws
TOL = 4 * np.sqrt(0.03 * 0.97 / N_REF)

CASES = [
    ("poisson", Poisson(np.zeros(1)), [(), (), ()], SIZE),
    ("negative_binomial", NegativeBinomial(np.zeros(1)), [(3.0,), (8.0,), (30.0,)], SIZE),
    ("binomial", Binomial(np.zeros(1), trials=1), [(), (), ()], np.array([20.0, 5, 50, 12])),
    ("student_t", StudentT(np.zeros(1)), [(3.0, 0.1), (5.0, 0.5), (2.5, 0.2)], None),
    # precision 20 or more: at precision 5 and latent mean 3.5, 7% of y lies within 1e-16 of 1
    # (NumPy's draws equal 1.0), and the 97% quantile is 1 to float precision
    ("beta", Beta(np.full(1, 0.5)), [(20.0,), (30.0,), (200.0,)], None),
    ("gamma", Gamma(np.ones(1)), [(2.0,), (10.0,), (50.0,)], None),
    ("zero_inflated_poisson", ZeroInflatedPoisson(np.zeros(1)), [(0.2,), (0.05,), (0.5,)], SIZE),
    ("zero_inflated_negative_binomial", ZeroInflatedNegativeBinomial(np.zeros(1)),
     [(3.0, 0.2), (8.0, 0.02), (30.0, 0.4)], SIZE),
]


@pytest.mark.parametrize("draws", [1, 3], ids=["point", "mixture"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_quadrature_quantiles_match_a_million_draws(case, draws):
    """The 3% and 97% quantiles by quadrature are those of 10^6 draws of f then y (the mixture
    over three 'posterior draws' too): for counts the smallest integer k with F(k) >= q, so
    the empirical CDF at k is >= q and at k - 1 < q, within four Monte Carlo standard errors;
    for the Student-t the empirical CDF at the quantile is q within the same."""
    _, lik, phis, size = case
    means, variances, phis = MEANS[:draws], VARS[:draws], phis[:draws]
    quantiles = predictive_quantiles(lik, phis, means, variances, CI_QUANTILES, size)
    rng = np.random.default_rng(11)
    per = N_REF // draws
    y = np.concatenate([
        lik.draw(mu + np.sqrt(v) * rng.standard_normal((per, mu.size)), phi, rng,
                 None if size is None else np.broadcast_to(size, (per, mu.size)))
        for mu, v, phi in zip(means, variances, phis, strict=True)
    ])  # fmt: skip
    for q, k in zip(CI_QUANTILES, quantiles, strict=True):
        if lik.outcome == "count":
            np.testing.assert_array_equal(k, np.round(k))
            assert np.all(np.mean(y <= k, axis=0) >= q - TOL)
            assert np.all(np.mean(y <= k - 1, axis=0) < q + TOL)
        else:
            np.testing.assert_allclose(np.mean(y <= k, axis=0), q, atol=TOL)


def test_quantiles_do_not_depend_on_the_number_of_nodes():
    """Where the latent sd dominates the count noise (a Poisson near 200 at latent sd 1) the
    quantile comes from the integral over the threshold: the same integer at 16 to 96 nodes
    (over f alone it was 183-239)."""
    from numpy.polynomial.hermite import hermgauss
    from scipy.special import ndtr

    import bayes_gp.latent.predictive as P

    saved = P._KX, P._KW, P._KU
    out = []
    try:
        for J in (16, 32, 96):
            x, w = hermgauss(J)
            w = w / np.sqrt(np.pi)
            keep = w >= P._MIN_WEIGHT
            P._KX, P._KW = x[keep], w[keep] / w[keep].sum()
            P._KU = ndtr(np.sqrt(2.0) * P._KX)
            out.append(predictive_quantiles(Poisson(np.zeros(1)), [()], [[3.5]], [[1.0]]))
    finally:
        P._KX, P._KW, P._KU = saved
    assert all(np.array_equal(o, out[0]) for o in out)
    assert out[0][1][0] == 218.0  # 10^6 draws: 218


RNG = np.random.default_rng(5)
N = 40
X = np.sort(RNG.uniform(0, 10, N))
F_TRUE = np.sin(X)


def test_count_intervals_are_integers_and_identical_rows_agree():
    """A negative-binomial fit's 94% interval of y: integer bounds, five identical rows give the
    same bounds (no random numbers), and calling twice gives the same answer."""
    y = RNG.negative_binomial(3.0, 3.0 / (3.0 + 20 * np.exp(F_TRUE))).astype(float)
    gp = LatentGP(X, y, "expquad", "negative_binomial", mean="constant")
    fit = gp.fit_laplace(params={"ls": 1.2, "eta": 0.7, "dispersion": 3.0, "c": 3.0})
    Xn = np.r_[np.full(5, 4.0), np.linspace(0, 10, 7)]
    pred = gp.predict(Xn, fit)
    for bound in (pred.lower, pred.upper):
        np.testing.assert_array_equal(bound, np.round(bound))
        assert np.all(bound[:5] == bound[0])
    np.testing.assert_array_equal(gp.predict(Xn, fit, random_seed=3).upper, pred.upper)
    assert np.all(pred.lower <= pred.mean) and np.all(pred.mean <= pred.upper)
    assert pred.prob_mean is None  # counts have no probability band


def test_probability_band_is_the_link_of_the_latent_quantiles():
    """Bernoulli: prob_lower / prob_upper are sigmoid of the latent 3% / 97% quantiles (exact
    quantiles of sigmoid(f) under the Gaussian latent), prob_mean = E[sigmoid(f)] = mean, and
    10^6 draws of sigmoid(f) put 3% / 97% below them."""
    y = (RNG.uniform(size=N) < expit(2 * F_TRUE)).astype(float)
    gp = LatentGP(X, y, "expquad", "bernoulli")
    fit = gp.fit_laplace(params={"ls": 1.3, "eta": 1.7})
    pred = gp.predict(np.linspace(0, 10, 9), fit)
    m, s = pred.latent_mean, pred.latent_sd
    np.testing.assert_allclose(pred.prob_lower, expit(m - Z_CI * s), rtol=1e-12)
    np.testing.assert_allclose(pred.prob_upper, expit(m + Z_CI * s), rtol=1e-12)
    np.testing.assert_allclose(pred.prob_mean, pred.mean)
    p = expit(m + s * np.random.default_rng(0).standard_normal((N_REF, m.size)))
    np.testing.assert_allclose(np.mean(p <= pred.prob_lower, axis=0), 0.03, atol=TOL)
    np.testing.assert_allclose(np.mean(p <= pred.prob_upper, axis=0), 0.97, atol=TOL)
    np.testing.assert_array_equal(pred.lower, 0.0)
    np.testing.assert_array_equal(pred.upper, 1.0)


def test_probability_band_covers_the_true_probability():
    """One MAP fit on 300 simulated Bernoulli labels with a known latent f: the 94% band of
    the probability covers the true sigmoid(f) at most of 200 inputs (measured 0.99; one data
    set's band errs together across inputs, so the bar is 0.8, not 0.94 exactly). Binomial:
    the band is of the success probability per trial, whatever the trials."""
    rng = np.random.default_rng(21)
    x = np.sort(rng.uniform(0, 10, 300))
    truth = lambda t: 1.5 * np.sin(t) + 0.3 * t - 1.5  # noqa: E731
    y = (rng.uniform(size=x.size) < expit(truth(x))).astype(float)
    gp = LatentGP(x, y, "expquad", "bernoulli", mean="constant")
    fit = gp.fit_laplace(random_seed=0)
    grid = np.linspace(0.2, 9.8, 200)
    pred = gp.predict(grid, fit)
    covered = (pred.prob_lower <= expit(truth(grid))) & (expit(truth(grid)) <= pred.prob_upper)
    assert covered.mean() >= 0.8

    trials = rng.integers(5, 15, x.size).astype(float)
    yb = rng.binomial(trials.astype(int), expit(truth(x))).astype(float)
    gb = LatentGP(x, yb, "expquad", "binomial", trials=trials, mean="constant")
    fb = gb.fit_laplace(params={"ls": 1.5, "eta": 1.0, "c": 0.0})
    p1, p10 = gb.predict(grid[:5], fb, size=1), gb.predict(grid[:5], fb, size=10)
    np.testing.assert_allclose(p10.prob_upper, p1.prob_upper)
    np.testing.assert_allclose(p10.mean, 10 * p1.prob_mean)
    assert np.all(p10.upper <= 10) and np.all(p10.upper == np.round(p10.upper))


def test_bands_along_a_chosen_input_with_two_inputs():
    """bands() with D = 2: along an index or a name, the other input at its median; a
    Bernoulli model gives the probability band (kind 'probability'), a Poisson model the
    response-mean band and the integer interval of y; a wrong input is refused."""
    X2 = np.c_[X, RNG.uniform(-1, 1, N)]
    yb = (RNG.uniform(size=N) < expit(2 * F_TRUE)).astype(float)
    gp = LatentGP(X2, yb, "expquad", "bernoulli")
    fit = gp.fit_laplace(params={"ls": 1.3, "eta": 1.7})
    grid = np.linspace(-1, 1, 11)
    b = gp.bands(grid, fit, along=1)
    assert b.kind == "probability" and b.mean.shape == grid.shape
    np.testing.assert_array_equal(b.x, X2[:, 1])
    Xn = np.c_[np.full(grid.size, np.median(X2[:, 0])), grid]
    pred = gp.predict(Xn, fit)
    np.testing.assert_allclose(b.mean, pred.prob_mean)
    np.testing.assert_allclose(b.lower, pred.prob_lower)
    np.testing.assert_allclose(b.upper, pred.prob_upper)
    by_name = gp.bands(grid, fit, along=gp.feature_names[1])
    np.testing.assert_array_equal(by_name.mean, b.mean)
    with pytest.raises(ValueError, match="along"):
        gp.bands(grid, fit, along=2)

    yc = RNG.poisson(4 * np.exp(F_TRUE)).astype(float)
    gc = LatentGP(X2, yc, "expquad", "poisson", mean="constant")
    fc = gc.fit_laplace(params={"ls": 1.3, "eta": 0.8, "c": 1.4})
    bc = gc.bands(np.linspace(0, 10, 21), fc, along=0)
    assert bc.kind == "regression"
    assert np.all(bc.lower <= bc.mean) and np.all(bc.mean <= bc.upper)
    np.testing.assert_array_equal(bc.y_upper, np.round(bc.y_upper))
    assert "medians" in bc.band_label
