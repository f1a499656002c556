"""The package's one definition of its central intervals, and the Gaussian-mixture quantiles that
every NUTS prediction's ``lower``/``upper`` comes from."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from scipy.special import ndtri

import bayes_gp
from bayes_gp.predictive import (
    CI_PROB,
    CI_QUANTILES,
    Z_CI,
    gaussian_mixture_cdf,
    gaussian_mixture_quantiles,
)

ROOT = Path(bayes_gp.__file__).parent


def test_the_interval_constants_agree_with_each_other():
    assert CI_PROB == 0.94
    np.testing.assert_allclose(CI_QUANTILES, ((1 - CI_PROB) / 2, (1 + CI_PROB) / 2), rtol=1e-15)
    np.testing.assert_allclose(Z_CI, ndtri(CI_QUANTILES[1]), rtol=1e-15)
    np.testing.assert_allclose(-Z_CI, ndtri(CI_QUANTILES[0]), rtol=1e-15)


def test_no_module_defines_its_own_interval():
    """The 94% interval is written once, in ``bayes_gp.predictive``: a module that writes the
    probability, the quantiles or the normal quantile itself would drift from it."""
    literal = re.compile(r"0\.03,\s*0\.97|1\.8807936|=\s*0\.94\b")
    offenders = [
        f"{path.relative_to(ROOT)}:{i}"
        for path in ROOT.rglob("*.py")
        if path.name != "predictive.py" or path.parent != ROOT
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if literal.search(line)
    ]
    assert offenders == []


def test_mixture_quantiles_invert_the_mixture_cdf():
    rng = np.random.default_rng(3)
    means = rng.normal(0.0, 2.0, size=(40, 7))
    sds = rng.uniform(0.1, 1.5, size=(40, 7))
    probs = (0.01, *CI_QUANTILES, 0.5, 0.999)
    for p, q in zip(probs, gaussian_mixture_quantiles(means, sds, probs), strict=True):
        np.testing.assert_allclose(gaussian_mixture_cdf(q, means, sds**2), p, rtol=1e-12)
    # the default probabilities are the central 94% interval's
    lower, upper = gaussian_mixture_quantiles(means, sds)
    np.testing.assert_array_equal(lower, gaussian_mixture_quantiles(means, sds, CI_QUANTILES)[0])
    assert np.all(lower < upper)


@pytest.mark.parametrize("mu, sd", [(0.0, 1.0), (-3.5, 0.2), (1e4, 30.0)])
def test_one_component_gives_the_gaussian_interval(mu, sd):
    lower, upper = gaussian_mixture_quantiles(np.array([[mu]]), np.array([[sd]]))
    np.testing.assert_allclose(
        [lower[0], upper[0]], stats.norm(mu, sd).ppf(CI_QUANTILES), rtol=1e-12
    )
    np.testing.assert_allclose([lower[0], upper[0]], [mu - Z_CI * sd, mu + Z_CI * sd], rtol=1e-12)


def test_mixture_quantiles_match_a_large_sample():
    """An independent check: the empirical quantiles of a million draws from the mixture."""
    rng = np.random.default_rng(11)
    means = np.array([[-2.0], [0.5], [3.0]])
    sds = np.array([[0.5], [1.0], [0.3]])
    comp = rng.integers(0, 3, size=1_000_000)
    draws = rng.normal(means[comp, 0], sds[comp, 0])
    lower, upper = gaussian_mixture_quantiles(means, sds)
    np.testing.assert_allclose([lower[0], upper[0]], np.quantile(draws, CI_QUANTILES), atol=0.01)


def test_latent_gp_predict_returns_the_one_prediction_type():
    """LatentGP.predict returns a Prediction (the type every model's predict returns): the
    interval in ``lower``/``upper`` like HierarchicalGP's, the latent moments beside it, the
    previous release's dict keys still readable for one release (with a FutureWarning), and
    prediction_columns' table columns unchanged."""
    from bayes_gp import LatentGP
    from bayes_gp.predictive import Prediction

    x = np.linspace(0.0, 10.0, 25)
    y = np.random.default_rng(0).poisson(np.exp(1 + np.sin(x)))
    gp = LatentGP(x, y, "expquad", "poisson")
    fit = gp.fit_laplace(params={"ls": 1.5, "eta": 0.8})
    xn = np.array([2.0, 5.0, 12.0])
    pred = gp.predict(xn, fit, random_seed=3)
    assert isinstance(pred, Prediction) and pred.extra == {"n_draws": 1}
    assert np.all(pred.lower <= pred.mean) and np.all(pred.mean <= pred.upper)
    assert pred.latent_sd[2] > pred.latent_sd[0]  # beyond the data
    # the variance of y*: Poisson over a log-normal rate, E[y] + Var[exp f] in closed form
    np.testing.assert_allclose(pred.mean, np.exp(pred.latent_mean + pred.latent_sd**2 / 2),
                               rtol=1e-10)  # fmt: skip
    rate_var = (np.exp(pred.latent_sd**2) - 1) * pred.mean**2
    np.testing.assert_allclose(pred.var, pred.mean + rate_var, rtol=1e-8)
    nb = LatentGP(x, y, "expquad", "negative_binomial", priors={"dispersion": 4.0})
    nbp = nb.predict(xn, nb.fit_laplace(params={"ls": 1.5, "eta": 0.8}))
    np.testing.assert_allclose(  # mu + mu^2 / r over the log-normal mean: E[mu] + E[mu^2](1 + 1/r)
        nbp.var, nbp.mean + np.exp(2 * nbp.latent_mean + 2 * nbp.latent_sd**2) * (1 + 1 / 4.0)
        - nbp.mean**2, rtol=1e-8)  # fmt: skip
    with pytest.warns(FutureWarning, match=r"Prediction\['lower_94'\] is Prediction.lower"):
        np.testing.assert_array_equal(pred["lower_94"], pred.lower)
    with pytest.raises(KeyError):
        pred["sd_f"]
    cols = gp.prediction_columns(xn, fit)
    assert set(cols) == {"latent_mean", "latent_sd", "mean", "lower_94", "upper_94"}
    np.testing.assert_array_equal(cols["latent_mean"], pred.latent_mean)
    gaussian = bayes_gp.GPRegression(x, np.sin(x), "expquad").predict(xn, bayes_gp.MapFit(
        {"ls": np.array(1.0), "eta": np.array(1.0), "sigma": np.array(0.1)}, 0.0, False))
    assert type(gaussian) is Prediction and gaussian.latent_mean is None
    with pytest.raises(KeyError):
        gaussian["latent_mean"]  # a Gaussian model's f_* is mean and sd themselves


def test_loo_log_density_is_the_brute_force_leave_one_out():
    """R&W eqs. 5.10-5.12 from one factor equal the n conditional Gaussians p(t_i | t_-i),
    each from its own (n - 1) x (n - 1) solve."""
    from bayes_gp.predictive import factorize, loo_log_density

    rng = np.random.default_rng(3)
    n = 40
    A = rng.standard_normal((n, n))
    C = A @ A.T / n + 0.5 * np.eye(n)
    t = rng.standard_normal(n)
    brute = np.empty(n)
    for i in range(n):
        rest = np.delete(np.arange(n), i)
        w = np.linalg.solve(C[np.ix_(rest, rest)], C[rest, i])
        brute[i] = stats.norm.logpdf(t[i], w @ t[rest], np.sqrt(C[i, i] - w @ C[rest, i]))
    np.testing.assert_allclose(loo_log_density(factorize(C, t)), brute, rtol=1e-10)


def test_inverse_diagonal_by_the_blocked_trtri_equals_lapack():
    """From TRTRI_BLOCKED_MIN_N rows the factor is inverted by the blocked trtri
    (_native_linalg.lower_inverse): the same diagonal of C^-1 as LAPACK's dtrtri, to rounding."""
    from scipy.linalg import lapack

    from bayes_gp.predictive import TRTRI_BLOCKED_MIN_N, inverse_diagonal

    n = TRTRI_BLOCKED_MIN_N + 37
    A = np.random.default_rng(4).standard_normal((n, n))
    C = A @ A.T / n + 0.5 * np.eye(n)
    L = np.linalg.cholesky(C)
    Linv = lapack.dtrtri(L, lower=1)[0]
    np.testing.assert_allclose(inverse_diagonal(L), np.sum(Linv**2, axis=0), rtol=1e-13)
    np.testing.assert_allclose(inverse_diagonal(L), np.diag(np.linalg.inv(C)), rtol=1e-10)
