"""Observation models of :mod:`bayes_gp.latent.likelihoods` against scipy.stats and finite
differences."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from bayes_gp.latent import (
    Bernoulli,
    Beta,
    Binomial,
    Gamma,
    Gaussian,
    NegativeBinomial,
    Poisson,
    StudentT,
    ZeroInflatedNegativeBinomial,
    ZeroInflatedPoisson,
)

RNG = np.random.default_rng(0)
F = RNG.normal(0.0, 1.5, 12)
YB = (RNG.uniform(size=12) < 0.5) * 1.0
YC = RNG.poisson(4.0, 12) * 1.0
YR = RNG.normal(0.0, 2.0, 12)
E = RNG.uniform(0.5, 3.0, 12)
YP = RNG.beta(2.0, 3.0, 12)  # proportions in (0, 1)
YG = RNG.gamma(2.0, 1.5, 12)  # positive values
MU = 1 / (1 + np.exp(-F))
YZ = np.where(RNG.uniform(size=12) < 0.4, 0.0, YC)  # counts with extra zeros
MC = E * np.exp(F)  # a count component's mean

CASES = [
    ("logit", Bernoulli(YB), [], stats.bernoulli.logpmf(YB, 1 / (1 + np.exp(-F)))),
    ("probit", Bernoulli(YB, link="probit"), [], stats.bernoulli.logpmf(YB, stats.norm.cdf(F))),
    (
        "binomial",
        Binomial(np.minimum(YC, 9), trials=9),
        [],
        stats.binom.logpmf(np.minimum(YC, 9), 9, 1 / (1 + np.exp(-F))),
    ),
    ("poisson", Poisson(YC, exposure=E), [], stats.poisson.logpmf(YC, E * np.exp(F))),
    (
        "negative_binomial",
        NegativeBinomial(YC, exposure=E),
        [2.5],
        stats.nbinom.logpmf(YC, 2.5, 2.5 / (2.5 + E * np.exp(F))),
    ),
    ("student_t", StudentT(YR), [3.5, 0.7], stats.t.logpdf(YR, 3.5, loc=F, scale=0.7)),
    ("gaussian", Gaussian(YR), [0.7], stats.norm.logpdf(YR, F, 0.7)),
    ("beta", Beta(YP), [7.5], stats.beta.logpdf(YP, 7.5 * MU, 7.5 * (1 - MU))),
    ("beta_small_precision", Beta(YP), [0.8], stats.beta.logpdf(YP, 0.8 * MU, 0.8 * (1 - MU))),
    ("gamma", Gamma(YG), [2.3], stats.gamma.logpdf(YG, 2.3, scale=np.exp(F) / 2.3)),
    ("zero_inflated_poisson", ZeroInflatedPoisson(YZ, exposure=E), [0.3],
     np.log(0.3 * (YZ == 0) + 0.7 * stats.poisson.pmf(YZ, MC))),
    ("zero_inflated_negative_binomial", ZeroInflatedNegativeBinomial(YZ, exposure=E), [2.5, 0.3],
     np.log(0.3 * (YZ == 0) + 0.7 * stats.nbinom.pmf(YZ, 2.5, 2.5 / (2.5 + MC)))),
]


@pytest.mark.parametrize("name,lik,phi,ref", CASES, ids=[c[0] for c in CASES])
def test_log_density_against_scipy(name, lik, phi, ref):
    np.testing.assert_allclose(lik.derivatives(F, phi)[0], ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name,lik,phi,ref", CASES, ids=[c[0] for c in CASES])
def test_f_and_phi_derivatives_against_finite_differences(name, lik, phi, ref):
    """d1, d2, d3 and the phi-derivatives of logp, d1, d2 by central differences (h = 1e-5)."""
    h = 1e-5
    _lp, d1, d2, d3 = lik.derivatives(F, phi)
    up, dn = lik.derivatives(F + h, phi), lik.derivatives(F - h, phi)
    for k, an in enumerate((d1, d2, d3)):
        np.testing.assert_allclose(an, (up[k] - dn[k]) / (2 * h), rtol=1e-6, atol=1e-8)
    dl, dd1, dd2 = lik.phi_derivatives(F, phi)
    for j in range(len(phi)):
        p_up, p_dn = np.array(phi, float), np.array(phi, float)
        p_up[j] += h
        p_dn[j] -= h
        up, dn = lik.derivatives(F, p_up), lik.derivatives(F, p_dn)
        for k, an in enumerate((dl[j], dd1[j], dd2[j])):
            np.testing.assert_allclose(an, (up[k] - dn[k]) / (2 * h), rtol=1e-6, atol=1e-8)


def test_probit_tails_stay_finite():
    """erfcx-based hazard: finite log density and derivatives at |f| = 40 and beyond."""
    lik = Bernoulli(np.array([1.0, 0.0, 1.0, 0.0]), link="probit")
    out = lik.derivatives(np.array([-40.0, 40.0, -1e3, 1e3]))
    assert all(np.all(np.isfinite(o)) for o in out)
    assert out[1][0] == pytest.approx(40.0, rel=1e-2)  # d1 ~ -z for very negative z


def test_count_draws_at_any_mean():
    """Prior predictive draws reach log-scale latent values above 43 (means NumPy's Poisson
    sampler refuses): the counts come from the normal approximation there (mean and variance
    mu to its precision), NumPy's own stream below, ``inf`` at an infinite mean."""
    from bayes_gp.latent.likelihoods import POISSON_NORMAL_ABOVE, poisson_draws

    small = np.array([0.0, 0.5, 3.0, 40.0])
    np.testing.assert_array_equal(
        poisson_draws(np.random.default_rng(3), small), np.random.default_rng(3).poisson(small)
    )
    mu = np.full(4000, 1e18)
    mu[:3] = [2.0, 1e13, np.inf]
    d = poisson_draws(np.random.default_rng(0), mu)
    assert d[0] == np.round(d[0]) and d[0] < 60 and abs(d[1] - 1e13) < 10 * np.sqrt(1e13)
    assert np.isinf(d[2])
    big = d[3:]
    assert abs(big.mean() - 1e18) < 4 * 1e9 / np.sqrt(big.size)  # sd sqrt(mu) = 1e9
    assert 0.9e18 < big.var() < 1.1e18
    assert POISSON_NORMAL_ABOVE < 1e18
    f = np.array([0.0, 50.0])
    for lik, phi in ((Poisson(np.array([1.0, 2.0])), ()),
                     (NegativeBinomial(np.array([1.0, 2.0])), (2.0,))):  # fmt: skip
        out = lik.draw(f, phi, np.random.default_rng(1))
        assert np.all(np.isfinite(out)) and out[1] > 1e15


#: (name, likelihood, phi, size, SciPy's distribution of y | f with that size)
MOMENT_CASES = [
    ("logit", Bernoulli(YB), [], None, stats.bernoulli(1 / (1 + np.exp(-F)))),
    ("probit", Bernoulli(YB, link="probit"), [], None, stats.bernoulli(stats.norm.cdf(F))),
    ("binomial", Binomial(YC, trials=9), [], 7.0, stats.binom(7, 1 / (1 + np.exp(-F)))),
    ("poisson", Poisson(YC), [], E, stats.poisson(E * np.exp(F))),
    ("negative_binomial", NegativeBinomial(YC), [2.5], E,
     stats.nbinom(2.5, 2.5 / (2.5 + E * np.exp(F)))),
    ("student_t", StudentT(YR), [3.5, 0.7], None, stats.t(3.5, loc=F, scale=0.7)),
    ("gaussian", Gaussian(YR), [0.7], None, stats.norm(F, 0.7)),
    ("beta", Beta(YP), [7.5], None, stats.beta(7.5 * MU, 7.5 * (1 - MU))),
    ("gamma", Gamma(YG), [2.3], None, stats.gamma(2.3, scale=np.exp(F) / 2.3)),
]  # fmt: skip


@pytest.mark.parametrize("name,lik,phi,size,ref", MOMENT_CASES, ids=[c[0] for c in MOMENT_CASES])
def test_response_mean_and_variance_against_scipy(name, lik, phi, size, ref):
    """E[y | f] and Var[y | f] (with exposure or trials ``size``) as SciPy's distribution."""
    np.testing.assert_allclose(lik.response_mean(F, phi, size), ref.mean(), rtol=1e-12)
    np.testing.assert_allclose(lik.response_variance(F, phi, size), ref.var(), rtol=1e-12)


def test_student_t_without_a_variance():
    assert np.all(np.isinf(StudentT(YR).response_variance(F, [1.5, 0.7])))


def test_predictive_moments_by_quadrature_against_monte_carlo():
    """response_moments: E[y*] and Var[y*] under f* ~ N(mu, s^2) against 1e6 joint draws (within
    2%: dropping the negative binomial's mu^2 / r moves its variance by a third or more here)."""
    from bayes_gp.latent.predictive import response_moments

    rng = np.random.default_rng(1)
    mu, s = np.array([-0.5, 1.0, 2.0]), np.array([0.3, 0.8, 0.5])
    f = mu + s * rng.standard_normal((1_000_000, 3))
    for lik, phi in ((NegativeBinomial(YC[:3]), [2.5]), (Binomial(YC[:3], trials=9), [])):
        y = lik.draw(f, phi, rng, size=3.0)
        m, v = response_moments(lik, phi, mu, s**2, size=3.0)
        np.testing.assert_allclose(m, y.mean(axis=0), rtol=6e-3)
        np.testing.assert_allclose(v, y.var(axis=0), rtol=2e-2)


#: (name, likelihood, phi, SciPy's distribution of y | f) for the continuous outcomes with a link
CONTINUOUS_LINK = [
    ("beta", Beta(YP), [7.5], stats.beta(7.5 * MU, 7.5 * (1 - MU))),
    ("gamma", Gamma(YG), [2.3], stats.gamma(2.3, scale=np.exp(F) / 2.3)),
]


@pytest.mark.parametrize("name,lik,phi,ref", CONTINUOUS_LINK, ids=[c[0] for c in CONTINUOUS_LINK])
def test_cdf_quantile_and_threshold_against_scipy(name, lik, phi, ref):
    """cdf at the data, cdf_values at other values (0 below the support, 1 above), ppf_values as
    SciPy's; the latent threshold t solves P(Y <= y | f = t) = 1 - u and increases in u."""
    below, at = lik.cdf(F, phi)
    np.testing.assert_allclose(at, ref.cdf(lik.y), rtol=1e-10)
    np.testing.assert_array_equal(below, at)
    y = np.linspace(0.05, 0.95, 12) if name == "beta" else np.linspace(0.1, 6.0, 12)
    np.testing.assert_allclose(lik.cdf_values(y, F, phi), ref.cdf(y), rtol=1e-10)
    np.testing.assert_array_equal(lik.cdf_values(np.array([-1.0, 0.0]), F[:2], phi), [0.0, 0.0])
    if name == "beta":
        np.testing.assert_array_equal(lik.cdf_values(np.array([1.0, 2.0]), F[:2], phi), 1.0)
        assert lik.max_value() == 1.0
    for q in (0.03, 0.5, 0.97):
        np.testing.assert_allclose(lik.ppf_values(q, F, [np.asarray(p) for p in phi]),
                                   ref.ppf(q), rtol=1e-9)  # fmt: skip
    # thresholds: closed form (gamma), a root search (beta), also near the support's ends
    u = np.array([1e-6, 0.03, 0.4, 0.9, 1 - 1e-6])[None, :]
    y = np.array([1e-9, 0.3, 0.97, 1 - 1e-9])[:, None] if name == "beta" else np.array(
        [1e-9, 0.5, 2.0, 40.0])[:, None]  # fmt: skip
    for p in (0.5, 7.5, 300.0):
        t = lik.latent_threshold(y, u, [np.asarray(p)])
        assert np.all(np.isfinite(t)) and np.all(np.diff(t, axis=1) > 0)  # T's quantiles
        G = lik.cdf_values(y, t, [np.asarray(p)])
        np.testing.assert_allclose(G, np.broadcast_to(1 - u, t.shape), atol=1e-9)
        assert np.all(lik.threshold_scale(y, [np.asarray(p)]) > 0)
    below = lik.latent_threshold(np.array([0.0, -1.0]), 0.5, [np.asarray(2.0)])
    np.testing.assert_array_equal(below, -np.inf)


@pytest.mark.parametrize("name,lik,phi,ref", CONTINUOUS_LINK, ids=[c[0] for c in CONTINUOUS_LINK])
def test_draws_have_the_scipy_moments(name, lik, phi, ref):
    """200 000 draws at f = F[:3]: mean and variance within 1% of SciPy's, inside the support."""
    f = np.broadcast_to(F[:3], (200_000, 3))
    d = lik.draw(f, phi, np.random.default_rng(5))
    assert np.all(d > 0) and (name != "beta" or np.all(d < 1))
    np.testing.assert_allclose(d.mean(axis=0), ref.mean()[:3], rtol=1e-2)
    np.testing.assert_allclose(d.var(axis=0), ref.var()[:3], rtol=3e-2)


@pytest.mark.parametrize(
    "make,match",
    [
        (lambda: Beta(np.array([0.2, 0.0, 0.5])), r"strictly between 0 and 1; y\[1\] = 0.*"
         "zero/one-inflated model"),
        (lambda: Beta(np.array([0.2, 1.0])), r"y\[1\] = 1 .*transform y"),
        (lambda: Beta(np.array([0.2, 1.3])), r"y\[1\] = 1.3"),
        (lambda: Gamma(np.array([1.0, 2.0, -0.5])), r"positive y; y\[2\] = -0.5"),
        (lambda: Gamma(np.array([0.0, 2.0])), r"y\[0\] = 0 .*hurdle or zero-inflated"),
    ],
)  # fmt: skip
def test_out_of_support_data_refused(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_beta_is_not_log_concave_and_gamma_is():
    """The beta's W = -l'' is negative at the docstring's example (precision 1, mu = 0.1,
    y = 0.999), hence the general Newton form; the gamma's W = alpha y / mu is positive."""
    lik = Beta(np.array([0.999]))
    assert lik.derivatives(np.log(0.1 / 0.9) * np.ones(1), [1.0])[2][0] > 0
    assert not Beta.log_concave and Gamma.log_concave
    assert np.all(Gamma(YG).derivatives(F, [0.4])[2] < 0)


#: (name, likelihood, phi, SciPy's distribution of the count component at f with exposure E)
ZERO_INFLATED = [
    ("zero_inflated_poisson", ZeroInflatedPoisson(YZ, exposure=E), [0.3], stats.poisson(MC)),
    ("zero_inflated_negative_binomial", ZeroInflatedNegativeBinomial(YZ, exposure=E), [2.5, 0.3],
     stats.nbinom(2.5, 2.5 / (2.5 + MC))),
]  # fmt: skip


@pytest.mark.parametrize("name,lik,phi,comp", ZERO_INFLATED, ids=[c[0] for c in ZERO_INFLATED])
def test_zero_inflated_moments_cdf_thresholds_and_draws(name, lik, phi, comp):
    """E[y] = (1 - pi) m and Var[y] = (1 - pi)(V + m^2) - E[y]^2 from SciPy's component
    moments (1e-12); P(Y < y), P(Y <= y) = pi + (1 - pi) F_c (1e-12); the latent threshold
    solves P(Y <= y | t) = 1 - u below u = 1 - pi and is +inf above; 2e5 draws' zero fraction,
    mean and variance."""
    pi = phi[-1]
    m, V = comp.mean(), comp.var()
    np.testing.assert_allclose(lik.response_mean(F, phi, E), (1 - pi) * m, rtol=1e-12)
    np.testing.assert_allclose(lik.response_variance(F, phi, E),
                               (1 - pi) * (V + m * m) - ((1 - pi) * m) ** 2, rtol=1e-12)  # fmt: skip
    below, at = lik.cdf(F, phi)
    np.testing.assert_allclose(at, pi + (1 - pi) * comp.cdf(YZ), rtol=1e-12)
    np.testing.assert_allclose(below, np.where(YZ == 0, 0, pi + (1 - pi) * comp.cdf(YZ - 1)),
                               rtol=1e-12, atol=1e-300)  # fmt: skip
    arrays = [np.asarray(p) for p in phi]
    np.testing.assert_allclose(lik.cdf_values(3.0, F, arrays, E), pi + (1 - pi) * comp.cdf(3),
                               rtol=1e-12)  # fmt: skip
    np.testing.assert_array_equal(lik.cdf_values(-1.0, F, arrays, E), 0.0)
    u = np.array([0.01, 0.3, 0.6, 0.69])
    t = lik.latent_threshold(3.0, u, arrays, 2.0)
    np.testing.assert_allclose(lik.cdf_values(3.0, t, arrays, 2.0), 1 - u, rtol=1e-9)
    assert np.all(np.isinf(lik.latent_threshold(3.0, np.array([0.7, 0.9]), arrays, 2.0)))
    f = np.broadcast_to(F[:3], (200_000, 3))
    d = lik.draw(f, phi, np.random.default_rng(2), np.broadcast_to(E[:3], f.shape))
    np.testing.assert_array_equal(d, np.round(d))
    p0 = pi + (1 - pi) * comp.pmf(0)[:3]
    np.testing.assert_allclose(np.mean(d == 0, axis=0), p0, atol=4e-3)
    np.testing.assert_allclose(d.mean(axis=0), lik.response_mean(F, phi, E)[:3], rtol=2e-2)
    np.testing.assert_allclose(d.var(axis=0), lik.response_variance(F, phi, E)[:3], rtol=5e-2)


@pytest.mark.parametrize(
    "make,match",
    [
        (lambda: ZeroInflatedPoisson(np.array([1.0, -2.0])), r"non-negative counts; y\[1\] = -2"),
        (lambda: ZeroInflatedPoisson(np.array([1.0, 2.5])), r"integer counts; y\[1\] = 2.5"),
        (lambda: ZeroInflatedNegativeBinomial(np.array([0.0, -1.0])), "non-negative counts"),
        (lambda: ZeroInflatedNegativeBinomial(np.array([0.0, 1.0]), exposure=np.array([1, 0.0])),
         "exposure.*positive"),
    ],
)  # fmt: skip
def test_zero_inflated_counts_refused(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_zero_inflated_parameters_checked_and_not_log_concave():
    """pi outside (0, 1) is refused; at a zero W = -l'' is negative once (1 - q) mu > 1."""
    lik = ZeroInflatedPoisson(np.array([0.0, 2.0]))
    with pytest.raises(ValueError, match=r"zero_inflation must be in \(0, 1\)"):
        lik.derivatives(np.zeros(2), [1.0])
    assert lik.derivatives(np.array([1.0, 1.0]), [0.5])[2][0] > 0
    assert not ZeroInflatedPoisson.log_concave and not ZeroInflatedNegativeBinomial.log_concave
    assert ZeroInflatedNegativeBinomial(np.zeros(2)).param_names == ("dispersion",
                                                                      "zero_inflation")
