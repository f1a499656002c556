"""Data and observation models shared by the latent-GP tests (Laplace and variational)."""

from __future__ import annotations

import numpy as np

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


def _data(n=15, seed=0):
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(0, 6, n))
    f = np.sin(X) + 0.3
    return rng, X, f


def _likelihoods(n=15, seed=0):
    """(name, likelihood, phi) for every observation model, with data drawn around sin(x)."""
    rng, X, f = _data(n, seed)
    return X, [
        ("bernoulli_logit", Bernoulli((rng.uniform(size=n) < 1 / (1 + np.exp(-2 * f))) * 1.0), []),
        (
            "bernoulli_probit",
            Bernoulli((rng.uniform(size=n) < 1 / (1 + np.exp(-2 * f))) * 1.0, link="probit"),
            [],
        ),
        ("binomial", Binomial(rng.binomial(12, 1 / (1 + np.exp(-f))) * 1.0, trials=12), []),
        ("poisson", Poisson(rng.poisson(4 * np.exp(f)) * 1.0, exposure=np.full(n, 4.0)), []),
        ("negative_binomial", NegativeBinomial(rng.poisson(3 * np.exp(f)) * 1.0), [3.0]),
        ("student_t", StudentT(f + 0.3 * rng.standard_t(4, n)), [4.0, 0.3]),
        ("gaussian", Gaussian(f + 0.2 * rng.standard_normal(n)), [0.2]),
        ("beta", Beta(rng.beta(12 / (1 + np.exp(-f)), 12 / (1 + np.exp(f)))), [12.0]),
        ("gamma", Gamma(rng.gamma(3.0, np.exp(f) / 3.0)), [3.0]),
        ("zero_inflated_poisson",
         ZeroInflatedPoisson(np.where(rng.uniform(size=n) < 0.3, 0, rng.poisson(3 * np.exp(f)))
                             * 1.0), [0.3]),
        ("zero_inflated_negative_binomial",
         ZeroInflatedNegativeBinomial(
             np.where(rng.uniform(size=n) < 0.3, 0, rng.negative_binomial(3, 3 / (3 + 3 * np.exp(f))))
             * 1.0), [3.0, 0.3]),
    ]  # fmt: skip
