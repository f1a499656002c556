"""LatentGP(..., zero_gp=True): the zero probability of the zero-inflated and hurdle likelihoods
as a second latent GP, logit pi(x) = g(x) (bayes_gp.latent.zero_gp)."""

import numpy as np
import pytensor
import pytest
from scipy import stats
from scipy.special import expit

from bayes_gp import LatentGP
from bayes_gp.inference.compiled import nutpie_backend
from bayes_gp.latent.zero_gp import ZERO_GP_LIKELIHOODS, ZeroGP
from bayes_gp.linalg import EAGER_MODE

N_SMALL = 12


def _counts(n: int, seed: int = 0):
    """Inputs on [0, 10], logit pi(x) from -2 to 2, f = log 4 + sin(x / 2) / 2, Poisson counts."""
    rng = np.random.default_rng(seed)
    x = np.linspace(0.0, 10.0, n)
    pi = expit(-2.0 + 0.4 * x)
    mu = np.exp(np.log(4.0) + 0.5 * np.sin(x / 2.0))
    y = np.where(rng.uniform(size=n) < pi, 0, rng.poisson(mu))
    return x, y.astype(float), pi, mu


def _expquad_chol(x, ls, eta, jitter):
    """The Cholesky factor of eta^2 exp(-(x - x')^2 / (2 ls^2)) + jitter I (R&W eq. 4.9)."""
    r2 = (x[:, None] - x[None, :]) ** 2
    return np.linalg.cholesky(eta**2 * np.exp(-r2 / (2.0 * ls**2)) + jitter * np.eye(x.size))


def _reference_logp(name, y, f, g, exposure, r=None):
    """log p(y_i | f_i, g_i) transcribed with SciPy: pi = sigmoid(g), mu = E exp(f); the
    zero-inflated mixture (Lambert 1992, eq. 1) or the hurdle (Mullahy 1986)."""
    pi, mu = expit(g), exposure * np.exp(f)
    comp = (stats.poisson(mu) if r is None else stats.nbinom(r, r / (r + mu)))
    if name.startswith("zero_inflated"):
        return np.where(y == 0, np.log(pi + (1.0 - pi) * comp.pmf(0)),
                        np.log1p(-pi) + comp.logpmf(y))
    return np.where(y == 0, np.log(pi), np.log1p(-pi) + comp.logpmf(y) - np.log(comp.sf(0)))


@pytest.mark.parametrize("name", ZERO_GP_LIKELIHOODS)
def test_log_density_matches_scipy(name):
    """The joint model's log density of y and of both whitened latents at a point equals the
    NumPy/SciPy transcription (f = m + L_f v_f, g = zero_mean + L_g v_g, psi = 1 - pi in PyMC's
    convention), and so do the pointwise log_likelihood terms (ZeroGP.log_density)."""
    x, y, _, _ = _counts(N_SMALL, seed=3)
    exposure = np.linspace(0.5, 2.0, N_SMALL)
    gp = LatentGP(x, y, likelihood=name, zero_gp=True, exposure=exposure)
    assert isinstance(gp, ZeroGP)
    model = gp.model
    rng = np.random.default_rng(7)
    point = {k: v + 0.3 * rng.standard_normal(np.shape(v))
             for k, v in model.initial_point().items()}  # fmt: skip
    nb = "negative_binomial" in name
    hyper = {"ls": np.exp(point["ls_log__"]), "eta": np.exp(point["eta_log__"]),
             "zls": np.exp(point["zero_ls_log__"]), "zeta": np.exp(point["zero_eta_log__"]),
             "zmean": point["zero_mean"]}  # fmt: skip
    r = float(np.exp(point["dispersion_log__"])) if nb else None
    f = gp.scale.y_mean + _expquad_chol(x, hyper["ls"], hyper["eta"], gp.jitter) @ point["f_rotated_"]
    g = hyper["zmean"] + _expquad_chol(x, hyper["zls"], hyper["zeta"], gp.jitter) @ point["g_rotated_"]
    terms = model.logp(vars=[model["y"], model["f_rotated_"], model["g_rotated_"]], sum=False)
    outs = [*model.replace_rvs_by_values([model["f"], model["g"]]), *terms]
    fn = pytensor.function(model.value_vars, outs, mode=EAGER_MODE, on_unused_input="ignore")
    *fg, ly, lf, lg = fn(*[point[v.name] for v in model.value_vars])
    # the Cholesky factors of K + 1e-6 I (condition number ~1e6) agree to ~1e-11
    np.testing.assert_allclose(fg[0], f, rtol=0, atol=1e-9)
    np.testing.assert_allclose(fg[1], g, rtol=0, atol=1e-9)
    f, g = fg
    ref = _reference_logp(name, y, f, g, exposure, r)
    np.testing.assert_allclose(ly, ref, rtol=0, atol=1e-10)
    np.testing.assert_allclose(lf, stats.norm.logpdf(point["f_rotated_"]), rtol=0, atol=1e-12)
    np.testing.assert_allclose(lg, stats.norm.logpdf(point["g_rotated_"]), rtol=0, atol=1e-12)
    phi = [r] if nb else []
    np.testing.assert_allclose(gp.log_density(f, g, phi), ref, rtol=0, atol=1e-10)


def test_names_and_description():
    x, y, _, _ = _counts(N_SMALL)
    gp = LatentGP(x, y, likelihood="hurdle_negative_binomial", zero_gp=True,
                  zero_kernel="matern52")  # fmt: skip
    assert gp.hyperparameters == ["ls", "eta", "dispersion", "zero_ls", "zero_eta", "zero_mean"]
    assert gp.fit_methods == ("nuts_joint",)
    rows = dict(gp.describe())
    assert "sigmoid(g(x))" in rows["likelihood"] and "dispersion" in rows["likelihood"]
    assert rows["zero GP kernel"] == "matern52"
    # the scalar model is unchanged
    assert "zero_probability" in LatentGP(x, y, likelihood="hurdle_poisson").hyperparameters


def test_bad_input_refused():
    x, y, _, _ = _counts(N_SMALL)
    with pytest.raises(ValueError, match="needs zeros and positive counts"):
        LatentGP(x, y + 1.0, likelihood="zero_inflated_poisson", zero_gp=True)
    with pytest.raises(ValueError, match=r"zero_gp=True. applies to the likelihoods"):
        LatentGP(x, y, likelihood="poisson", zero_gp=True)
    with pytest.raises(ValueError, match="constant zero probability"):
        LatentGP(x, y, likelihood="zero_inflated_poisson", zero_gp=True,
                 priors={"zero_inflation": 0.3})  # fmt: skip
    with pytest.raises(ValueError, match="unknown names"):
        LatentGP(x, y, likelihood="zero_inflated_poisson", zero_gp=True, priors={"zero_x": 1.0})
    with pytest.raises(ValueError, match="needs zero_gp=True"):
        LatentGP(x, y, likelihood="zero_inflated_poisson", zero_kernel="matern32")


def test_other_fits_refused():
    """Laplace inside NUTS, type-II MAP, VI and EP are refused, with the reason, at once."""
    x, y, _, _ = _counts(N_SMALL)
    gp = LatentGP(x, y, likelihood="zero_inflated_negative_binomial", zero_gp=True)
    for method in ("nuts", "map", "vi"):
        with pytest.raises(ValueError, match="second latent GP g coupled to f"):
            gp.fit(method)
    with pytest.raises(ValueError, match="second latent GP g coupled to f"):
        gp.sample(method="nuts")
    for call in (gp.fit_laplace, gp.fit_vi, gp.fit_ep):
        with pytest.raises(ValueError, match="nuts_joint"):
            call()
    with pytest.raises(ValueError, match="nuts_joint"):
        gp.log_marginal_likelihood({})
    with pytest.raises(TypeError, match="nuts_joint"):
        gp.predict(x, object())


@pytest.fixture(scope="module")
def recovery():
    """n = 45, logit pi(x) from -2 to 2: joint NUTS of the zero-GP model, 2 x 150 draws after
    150 tuning steps, nutpie on its JAX backend (7-10 s from a cold cache; PyMC's NUTS took
    30 s in CI, most of it compiling; RMSE of pi-hat 0.063-0.069 and coverage 45 of 45 on
    seeds 4-6)."""
    x, y, pi, mu = _counts(45, seed=1)
    gp = LatentGP(x, y, likelihood="zero_inflated_poisson", zero_gp=True)
    with nutpie_backend("jax"):
        idata = gp.fit("nuts_joint", draws=150, tune=150, chains=2, random_seed=4,
                       sampler="nutpie")  # fmt: skip
    return x, y, pi, mu, gp, idata


def test_recovers_varying_zero_probability(recovery):
    """pi(x) varies from 0.12 to 0.88 (sd 0.25 over the inputs): the scalar-pi model, whatever
    its estimate, has an RMSE of at least that sd (the best constant is the mean of pi(x)); the
    zero-GP posterior mean of pi(x) must come within 0.6 of it (measured RMSE 0.064 and 0.078
    in two runs; 0.06 to 0.13 over three data seeds), and its 94% band cover the truth at most
    inputs (measured 45 of 45). A swapped psi convention (psi = pi) would estimate 1 - pi(x),
    an RMSE of sqrt(mean((1 - 2 pi)^2)) = 0.50."""
    x, _, pi, mu, gp, idata = recovery
    pred = gp.predict(x, idata)
    rmse = np.sqrt(np.mean((pred.extra["zero_mean"] - pi) ** 2))
    best_constant = np.std(pi)
    assert rmse < 0.6 * best_constant, (rmse, best_constant)
    cover = np.mean((pred.extra["zero_lower"] <= pi) & (pi <= pred.extra["zero_upper"]))
    assert cover >= 0.85, cover
    # the response mean (1 - pi) mu, its band around it, and y*'s interval around that
    truth = (1.0 - pi) * mu
    assert np.mean(np.abs(pred.mean - truth)) < 0.5, np.abs(pred.mean - truth)
    assert np.all(pred.extra["mean_lower"] <= pred.mean) and np.all(pred.mean <= pred.extra["mean_upper"])
    assert np.all(pred.lower <= pred.extra["mean_lower"]) and np.all(pred.upper >= pred.extra["mean_upper"])
    assert np.all(pred.lower == 0.0)  # a zero is always within 94% where pi >= 0.12


def test_log_likelihood_and_loo(recovery):
    import arviz as az

    x, y, _, _, gp, idata = recovery
    ll = np.asarray(idata["log_likelihood"]["y"])
    assert ll.shape == (2, 150, x.size)
    post = idata["posterior"]
    c, d = 1, 17
    values = [np.asarray(post[h])[c, d] for h in gp.hyperparameters]
    f, g = np.asarray(post["f"])[c, d], np.asarray(post["g"])[c, d]
    np.testing.assert_allclose(ll[c, d], _reference_logp("zero_inflated_poisson", y, f, g, 1.0),
                               rtol=0, atol=1e-10)  # fmt: skip
    assert values  # hyperparameters recorded per draw
    assert np.isfinite(float(az.loo(idata).elpd))


def test_replicate_and_bands(recovery):
    x, y, _, _, gp, idata = recovery
    rep = gp.replicate(idata, 50, random_seed=1)
    assert rep.shape == (50, x.size) and np.all(rep >= 0) and np.all(rep == np.round(rep))
    # the replicated zero fraction brackets the observed one
    frac = np.mean(rep == 0, axis=1)
    assert np.quantile(frac, 0.02) <= np.mean(y == 0) <= np.quantile(frac, 0.98)
    bands = gp.bands(np.linspace(0, 10, 7), idata)
    assert bands.kind == "regression" and bands.mean.shape == (7,)
    cols = gp.prediction_columns(x[:5], idata)
    assert {"zero_probability", "zero_lower_94", "zero_upper_94", "mean"} <= set(cols)


def test_report(recovery):
    """bayes_gp.report((gp, idata)) renders every part: no approximation to check (both GPs
    sampled exactly), the posterior predictive check of the zeros from replicate()."""
    import bayes_gp

    _, _, _, _, gp, idata = recovery
    rep = bayes_gp.report((gp, idata))
    assert rep.problems == []
    assert list(rep.approximation_checks.values()) == [[]]
    checks = {v.check: v for v in rep.verdicts}
    assert checks["posterior predictive: zeros"].status == "ok"
    assert "zero GP" in rep.title


def test_held_out_predictive(recovery):
    """The predictive CDF of held-out counts: P(y* = 0 | x) against the truth
    pi + (1 - pi) exp(-mu) (measured mean absolute error 0.04), 0 below zero, increasing, and
    near 1 far in the tail."""
    x, _, pi, mu, gp, idata = recovery
    zeros = gp.held_out_predictive(x, np.zeros(x.size), idata)
    assert np.all(zeros.cdf_below == 0.0)
    truth = pi + (1.0 - pi) * np.exp(-mu)
    assert np.mean(np.abs(zeros.cdf_at - truth)) < 0.1, np.abs(zeros.cdf_at - truth)
    threes = gp.held_out_predictive(x, np.full(x.size, 3.0), idata)
    assert np.all(threes.cdf_below >= zeros.cdf_at) and np.all(threes.cdf_at > threes.cdf_below)
    assert np.all(gp.held_out_predictive(x, np.full(x.size, 60.0), idata).cdf_at > 0.999)
