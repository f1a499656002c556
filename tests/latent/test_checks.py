"""Post-fit checks of the latent GP's Gaussian approximations (:mod:`bayes_gp.latent.checks`):
importance-sampling evidence gap and Pareto k̂, and the Laplace-EP gap for the probit link."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from bayes_gp.latent import LatentGP
from bayes_gp.latent import checks as lc
from bayes_gp.latent.ep import expectation_propagation
from bayes_gp.protocol import ApproximationCheck


def _by_name(checks) -> dict[str, ApproximationCheck]:
    return {c.name: c for c in checks}


@pytest.fixture
def inputs():
    """60 inputs on [0, 10] and a generator for the outcomes (fresh for every test)."""
    rng = np.random.default_rng(0)
    return np.sort(rng.uniform(0, 10, 60)), rng


def _laplace(X, y, **kwargs):
    gp = LatentGP(X, y, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = gp.fit_laplace(n_restarts=1, random_seed=1)
    return gp, fit


def test_gaussian_likelihood_laplace_is_exact_and_is_confirms_it(inputs):
    """With a Gaussian likelihood the Laplace approximation is the exact posterior: every
    importance weight equals the exact evidence, so the gap is rounding and k̂ is ok."""
    X, rng = inputs
    y = np.sin(X) + 0.3 * rng.normal(size=X.size)
    gp = LatentGP(X, y, likelihood="gaussian")
    params = {"ls": 1.0, "eta": 1.0, "sigma": 0.3}
    fit = gp.fit_laplace(params=params)
    rows = _by_name(gp.approximation_checks(fit))
    assert rows["Laplace evidence gap (IS)"].value < 1e-9
    assert rows["Laplace importance sampling Pareto k̂"].status == "ok"
    # and the evidence is the exact Gaussian one (R&W eq. 2.30)
    K, m, _ = gp._train(gp._values(params))
    C = K + 0.09 * np.eye(X.size)
    _, logdet = np.linalg.slogdet(C)
    r = y - m
    exact = -0.5 * r @ np.linalg.solve(C, r) - 0.5 * logdet - 0.5 * X.size * np.log(2 * np.pi)
    assert fit.log_marginal_likelihood == pytest.approx(exact, abs=1e-8)


def test_poisson_large_counts_ok_and_separated_bernoulli_worse(inputs):
    X, rng = inputs
    counts = rng.poisson(np.exp(4 + np.sin(X)))
    gp_p, fit_p = _laplace(X, counts, likelihood="poisson")
    pois = _by_name(gp_p.approximation_checks(fit_p))
    assert [c.status for c in pois.values()] == ["ok", "ok"], pois
    assert pois["Laplace evidence gap (IS)"].value < 0.02  # measured 0.003
    labels = (X > 5).astype(float)  # perfectly separated classes, a large latent amplitude
    gp_b = LatentGP(X, labels, likelihood="bernoulli")
    bern = _by_name(gp_b.approximation_checks(gp_b.fit_laplace(params={"ls": 2.0, "eta": 10.0})))
    k = bern["Laplace importance sampling Pareto k̂"]
    assert k.status == "fail" and k.value > 0.75  # measured 0.83 (Poisson above: 0.12)
    assert "sample(method='nuts_joint')" in k.advice
    # the evidence gap is measurably larger (measured 0.48 vs 0.003 nats)
    assert bern["Laplace evidence gap (IS)"].value > 0.2
    assert bern["Laplace evidence gap (IS)"].value > 30 * pois["Laplace evidence gap (IS)"].value


def test_probit_gap_to_ep_is_the_difference_of_the_two_evidences(inputs):
    X, rng = inputs
    labels = (np.sin(X) + 0.5 * rng.normal(size=X.size) > 0).astype(float)
    gp = LatentGP(X, labels, likelihood="bernoulli", link="probit")
    params = {"ls": 1.0, "eta": 3.0}
    fit = gp.fit_laplace(params=params)
    rows = _by_name(gp.approximation_checks(fit))
    ep = rows["Laplace evidence gap to EP"]
    K, m, phi = gp._train(gp._values(params))
    log_z_ep = expectation_propagation(K, m, gp.likelihood, phi, gradient=False).log_evidence
    assert ep.value == pytest.approx(abs(log_z_ep - fit.log_marginal_likelihood), rel=1e-9)
    assert ep.value > 0.05  # Laplace and EP differ at eta = 3 (Kuss & Rasmussen 2005): 0.152
    # two independent estimates of the exact evidence agree: IS (0.155) and EP (0.152)
    assert rows["Laplace evidence gap (IS)"].value == pytest.approx(ep.value, abs=0.03)


def test_ep_fit_is_checked_with_its_own_gaussian(inputs):
    X, rng = inputs
    labels = (np.sin(X) + 0.5 * rng.normal(size=X.size) > 0).astype(float)
    gp = LatentGP(X, labels, likelihood="bernoulli", link="probit")
    params = {"ls": 1.0, "eta": 1.0}
    rows = _by_name(gp.approximation_checks(gp.fit_ep(params=params)))
    assert set(rows) == {"EP evidence gap (IS)", "EP importance sampling Pareto k̂"}
    # EP's evidence is accurate for the probit (Kuss & Rasmussen 2005): measured 0.0009 nats
    assert rows["EP evidence gap (IS)"].value < 0.02
    assert rows["EP importance sampling Pareto k̂"].status == "ok"


def test_large_n_is_checked_on_a_subsample(inputs, monkeypatch):
    X, rng = inputs
    y = np.sin(X) + 0.3 * rng.normal(size=X.size)
    gp = LatentGP(X, y, likelihood="gaussian")
    fit = gp.fit_laplace(params={"ls": 1.0, "eta": 1.0, "sigma": 0.3})
    monkeypatch.setattr(lc, "MAX_N", 25)
    rows = _by_name(gp.approximation_checks(fit))
    gap = rows["Laplace evidence gap (IS)"]
    assert "on 25 random observations of 60" in gap.detail
    assert gap.value < 1e-9  # the restricted model is Gaussian too: exact


def test_importance_sampling_estimate_agrees_with_quadrature_in_one_dimension():
    """One observation: log p(y) by IS equals the 1-D integral (Poisson, f ~ N(1, 0.8))."""
    from scipy import integrate, stats

    from bayes_gp.latent.likelihoods import Poisson
    from bayes_gp.latent.predictive import ModeFactor

    lik = Poisson(np.array([0.0]))  # a zero count: a skewed posterior
    K, m = np.array([[0.8]]), np.array([1.0])
    st = lc._laplace_state(K, m, lik, np.zeros(0))
    assert isinstance(st.factor, ModeFactor)
    res = lc.importance_sampling(st.factor, st.mu, m, lik, np.zeros(0), n_draws=20000)

    def integrand(f):
        return stats.poisson.pmf(0, np.exp(f)) * stats.norm.pdf(f, 1.0, np.sqrt(0.8))

    exact = np.log(integrate.quad(integrand, -15, 15)[0])
    assert res.log_evidence == pytest.approx(exact, abs=4 * res.se + 1e-4)
    assert abs(st.log_evidence - exact) > 0.003  # the Laplace evidence is off: measured 0.005


def test_nuts_latent_fit_has_nothing_to_check(inputs):
    """A NUTS fit with method="nuts_joint" samples f exactly: no rows (no f_mode in the draws)."""
    import xarray as xr

    X, _ = inputs
    gp = LatentGP(X[:10], np.arange(10) % 3, likelihood="poisson")
    post = xr.Dataset(
        {
            "ls": (("chain", "draw"), np.ones((1, 4))),
            "eta": (("chain", "draw"), np.ones((1, 4))),
            "f": (("chain", "draw", "obs"), np.zeros((1, 4, 10))),
        }
    )
    idata = xr.DataTree.from_dict({"posterior": post})
    assert gp.approximation_checks(idata) == []


@pytest.mark.slow
def test_nuts_laplace_fit_is_checked_at_posterior_draws():
    """NUTS with the Laplace-integrated GP: the check recomputes the Laplace approximation at
    N_DRAWS posterior draws (from their recorded modes) and reports the worst."""
    rng = np.random.default_rng(0)
    X = np.sort(rng.uniform(0, 10, 30))
    gp = LatentGP(X, rng.poisson(np.exp(2 + np.sin(X))), likelihood="poisson")
    idata = gp.sample(method="nuts", draws=100, tune=100, chains=1, random_seed=1)
    rows = _by_name(gp.approximation_checks(idata))
    gap = rows["Laplace evidence gap (IS)"]
    assert f"at {lc.N_DRAWS} posterior draws" in gap.detail
    assert gap.status == "ok" and gap.value < 0.1  # measured 0.015
    assert rows["Laplace importance sampling Pareto k̂"].status == "ok"
    # the worst over the draws: at least the gap at each draw taken alone
    draws, _ = gp._draw_values(idata, lc.N_DRAWS)
    for values, _ in draws:
        params = dict(zip(gp.hyperparameters, values, strict=True))
        alone = _by_name(gp.approximation_checks(gp.fit_laplace(params=params)))
        assert alone["Laplace evidence gap (IS)"].value <= gap.value + 1e-12


def test_pareto_khat_reads_heavy_right_tails_of_the_weights():
    """The k̂ is that of the weights' right tail (arviz_stats' psislw takes -log w): a proposal
    with lighter tails than the target fails, one with heavier tails is ok."""
    from bayes_gp.latent.likelihoods import Gaussian
    from bayes_gp.latent.predictive import SiteFactor

    # exact posterior N(0, 1/(1 + 1)) for y = 0, sigma = 1, prior N(0, 1); proposal precision 1 + W
    lik, K, m, mu = Gaussian(np.array([0.0])), np.eye(1), np.zeros(1), np.zeros(1)
    light = lc.importance_sampling(SiteFactor(K, np.zeros(1), np.array([8.0])), mu, m, lik, [1.0])
    heavy = lc.importance_sampling(SiteFactor(K, np.zeros(1), np.array([0.2])), mu, m, lik, [1.0])
    assert light.khat > lc.KHAT_FAIL and heavy.khat < lc.KHAT_WARN
    # both estimate the evidence N(0 | 0, 2) without bias; the heavy-tailed one precisely
    exact = -0.5 * np.log(2 * np.pi * 2.0)
    assert heavy.log_evidence == pytest.approx(exact, abs=4 * heavy.se)
