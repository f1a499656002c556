"""HierarchicalGP with a non-Gaussian likelihood (the latent hierarchical model, Laplace):
equal to LatentGP with one group; its latent covariance equal to the Gaussian model's C without
the noise diagonal and to a NumPy transcription; its evidence gradient equal to finite
differences; MAP recovery of simulated Poisson groups and partial-pooling shrinkage; a short
NUTS run; predictions for known and new groups; the model protocol; bad input named."""

import cloudpickle
import numpy as np
import pandas as pd
import pymc as pm
import pytest

from bayes_gp import HierarchicalGP, LatentGP
from bayes_gp.hierarchical import HierarchicalLatentGP, hierarchical_gp
from bayes_gp.hierarchical.latent import MAX_LATENT_ROWS
from bayes_gp.latent.model import LatentFit


def _se(a, b, ls, eta):
    return eta**2 * np.exp(-0.5 * (a[:, None] - b[None, :]) ** 2 / ls**2)


def _m32(a, b, ls, eta):
    r = np.sqrt(3.0) * np.abs(a[:, None] - b[None, :]) / ls
    return eta**2 * (1.0 + r) * np.exp(-r)


def _frame(seed=0, sizes=(6, 4, 7)):
    """Groups at subsets of 8 common times (shared inputs), counts, 0/1 outcomes, trials,
    exposure and a covariate; rows interleaved."""
    rng = np.random.default_rng(seed)
    times = np.linspace(0.0, 7.0, 8)
    rows = []
    for g, n in enumerate(sizes):
        for t in np.sort(rng.choice(times, n, replace=False)):
            f = np.sin(t) + 0.3 * g
            e = rng.uniform(0.5, 2.0)
            rows.append((t, f"s{g}", rng.poisson(e * np.exp(f)), int(rng.random() < 1 / (1 + np.exp(-f))),
                         e, 5, rng.normal()))  # fmt: skip
    df = pd.DataFrame(rows, columns=["t", "subject", "count", "hit", "E", "n", "c"])
    return df.sample(frac=1.0, random_state=1).reset_index(drop=True)


# ------------------------------------------------------------------ one group = LatentGP
@pytest.mark.parametrize("likelihood,y", [("poisson", "count"), ("bernoulli", "hit")])
def test_one_group_without_pooling_equals_latentgp(likelihood, y):
    df = _frame(sizes=(8,))
    hgp = hierarchical_gp(df, "t", y, "subject", shared=False, pooling="none", likelihood=likelihood)
    assert isinstance(hgp, HierarchicalLatentGP) and isinstance(hgp, HierarchicalGP)
    assert hgp.hyperparameters == ["ls_group", "eta_group"]  # no sigma
    lgp = LatentGP(df[["t"]].to_numpy(), df[y].to_numpy(), "expquad", likelihood)
    vals = {"ls": 0.9, "eta": 1.2}
    a, ga = hgp.log_marginal_likelihood({f"{k}_group": np.array([v]) for k, v in vals.items()},
                                        eval_gradient=True)  # fmt: skip
    b, gb = lgp.log_marginal_likelihood(vals, eval_gradient=True)
    assert abs(a - b) < 1e-10
    assert abs(hgp.log_marginal_likelihood({f"{k}_group": [v] for k, v in vals.items()}) - b) < 1e-10
    for k in vals:
        np.testing.assert_allclose(ga[f"{k}_group"][0], gb[k], rtol=1e-9)


# --------------------------------------------------------- covariance: Gaussian model, NumPy
def _params(gp, rng):
    """Random values of every hyperparameter of ``gp`` (positive ones positive)."""
    out = {}
    for name in gp.hyperparameters:
        shape = np.shape(pm.draw(gp.model[name], random_seed=0))
        v = rng.uniform(0.4, 1.4, size=shape)
        out[name] = v - 0.5 if name.endswith(("_z", "_mu", "beta")) else v
    return out


@pytest.mark.parametrize("kernel", ["expquad", "matern32 + expquad"])
def test_latent_covariance_is_the_gaussian_models_without_noise(kernel):
    """K(latent) - jitter I == Z (K0 - eps I) Z^T + blockdiag(A_g - (sigma_g^2 + eps) I) of the
    Gaussian HierarchicalGP at the same values, and the latent mean is m0 + beta (c - c_bar)."""
    df = _frame(2)
    kw = dict(random_intercept=True, covariates=["c"], pooling={"ls": "partial", "eta": "none"}
              if kernel == "expquad" else None)  # fmt: skip
    lat = HierarchicalLatentGP(df, "t", "count", "subject", kernel, likelihood="poisson", **kw)
    gau = HierarchicalGP(df, "t", "count", "subject", kernel, **kw)
    rng = np.random.default_rng(3)
    params = _params(gau, rng)
    assert set(gau.hyperparameters) - set(lat.hyperparameters) == {"sigma"}
    values = lat._values({k: v for k, v in params.items() if k != "sigma"})
    K, m, _ = lat._train(values)
    K = K - lat.jitter * np.eye(len(df))
    _, tg, _, blocks, K0 = gau.marginal.numeric_blocks(gau._values(params))
    C = (K0 - gau.jitter * np.eye(K0.shape[0]))[np.ix_(gau.u_index, gau.u_index)]
    for g, idx in enumerate(gau.rows):
        C[np.ix_(idx, idx)] += blocks[g] - (tg[g, -1] ** 2 + gau.jitter) * np.eye(idx.size)
    np.testing.assert_allclose(K, C, rtol=0, atol=1e-10)
    beta = np.atleast_1d(params["beta"])
    c = df["c"].to_numpy()
    np.testing.assert_allclose(m, lat.scale.y_mean + (c - c.mean()) * beta[0], rtol=0, atol=1e-12)
    if kernel != "expquad":
        return
    # NumPy transcription: k0(x, x') + [g = g'] (eta_g^2 exp(-r^2/2) + tau_b^2), r = |x-x'|/ls_g
    t, codes = df["t"].to_numpy(), lat.codes
    ls = np.exp(params["ls_mu"] + params["ls_tau"] * params["ls_z"])
    eta = params["eta_group"]
    same = codes[:, None] == codes[None, :]
    ref = _se(t, t, params["f0_ls"], params["f0_eta"]) + same * (
        eta[codes][:, None] ** 2 * np.exp(-0.5 * (t[:, None] - t[None, :]) ** 2 / ls[codes][:, None] ** 2)
        + params["intercept_sd"] ** 2
    )  # fmt: skip
    np.testing.assert_allclose(K, ref, rtol=0, atol=1e-12)


def test_matern_sum_covariance_equals_numpy():
    """The per-group (unbatched) path of a sum kernel, without f0, against NumPy."""
    df = _frame(5)
    gp = HierarchicalLatentGP(df, "t", "hit", "subject", "matern32 + expquad", shared=False,
                        likelihood="bernoulli", pooling="none")  # fmt: skip
    rng = np.random.default_rng(1)
    params = _params(gp, rng)
    K = gp._train(gp._values(params))[0] - gp.jitter * np.eye(len(df))
    t, codes = df["t"].to_numpy(), gp.codes
    ref = np.zeros_like(K)
    for g in range(3):
        i = codes == g
        p = {k: v[g] for k, v in params.items()}
        ref[np.ix_(i, i)] = (_m32(t[i], t[i], p["matern32_ls_group"], p["matern32_eta_group"])
                             + _se(t[i], t[i], p["expquad_ls_group"], p["expquad_eta_group"]))  # fmt: skip
    np.testing.assert_allclose(K, ref, rtol=0, atol=1e-12)


# ------------------------------------------------------------------- evidence gradient
def test_evidence_gradient_equals_finite_differences():
    """Negative binomial with exposure, f0, intercepts and a covariate: the analytic gradient
    (Laplace Op, R&W Alg. 5.1 generalised) against central differences of the evidence
    computed by the NumPy Laplace solver."""
    df = _frame(7)
    gp = HierarchicalLatentGP(df, "t", "count", "subject", likelihood="negative_binomial",
                        exposure="E", random_intercept=True, covariates="c")  # fmt: skip
    assert "dispersion" in gp.hyperparameters and "sigma" not in gp.hyperparameters
    params = _params(gp, np.random.default_rng(2))
    params["dispersion"] = 3.0
    value, grad = gp.log_marginal_likelihood(params, eval_gradient=True)
    assert abs(value - gp.log_marginal_likelihood(params)) < 1e-9
    h = 1e-5
    for name, i in [("ls_mu", None), ("ls_z", 1), ("eta_tau", None), ("f0_ls", None),
                    ("intercept_sd", None), ("beta", 0), ("dispersion", None)]:  # fmt: skip
        up, down = dict(params), dict(params)
        base = np.array(params[name], float)
        e = np.zeros_like(base)
        e[() if i is None else i] = h
        up[name], down[name] = base + e, base - e
        fd = (gp.log_marginal_likelihood(up) - gp.log_marginal_likelihood(down)) / (2 * h)
        an = np.asarray(grad[name]).ravel()[0 if i is None else i]
        assert an == pytest.approx(fd, rel=1e-5, abs=1e-7), name


# ------------------------------------------------------------ MAP recovery, shrinkage
TRUE_LS = 1.0
TRUE_ETA = 0.8


def _simulate(seed=4):
    """Six Poisson groups of 15 points on [0, 8] with log rates 1.5 + f_g(x), f_g ~ GP(0,
    SE(ls_g, 0.8)), log ls_g ~ N(0, 0.1^2); one group of 3 points 12 apart (which say nothing
    about its length-scale)."""
    rng = np.random.default_rng(seed)
    true_ls = TRUE_LS * np.exp(0.1 * rng.normal(size=7))
    rows = []
    for g in range(7):
        x = np.linspace(0, 8, 15) if g < 6 else np.array([0.0, 12.0, 24.0])
        K = _se(x, x, true_ls[g], TRUE_ETA) + 1e-9 * np.eye(x.size)
        f = 1.5 + np.linalg.cholesky(K) @ rng.normal(size=x.size)
        rows += [(xi, f"g{g}", rng.poisson(np.exp(fi))) for xi, fi in zip(x, f, strict=True)]
    return pd.DataFrame(rows, columns=["x", "g", "y"])


@pytest.fixture(scope="module")
def simulated():
    df = _simulate()
    gp = HierarchicalLatentGP(df, "x", "y", "g", shared=False, likelihood="poisson")
    return df, gp, gp.fit_map(n_restarts=2, random_seed=0)


def test_map_recovers_the_population_and_shrinks_a_small_group(simulated):
    df, _, fit = simulated
    assert isinstance(fit, LatentFit) and fit.converged
    p = fit.params
    # population length-scale and amplitude within 35% of the truth (prior centres: ls 8,
    # eta 1.35; measured 1.09 and 0.79)
    assert abs(float(p["ls_mu"]) - np.log(TRUE_LS)) < 0.3
    assert abs(float(p["eta_mu"]) - np.log(TRUE_ETA)) < 0.3
    mu = float(p["ls_mu"])
    small_partial = float(p["ls_mu"] + p["ls_tau"] * p["ls_z"][6])
    none = HierarchicalLatentGP(df, "x", "y", "g", shared=False, likelihood="poisson",
                          pooling={"ls": "none"})  # fmt: skip
    small_none = float(np.log(none.fit_map(n_restarts=2, random_seed=0).params["ls_group"][6]))
    # unpooled, the 3-point group's length-scale follows its own prior (centred on log 8;
    # measured log ls 1.08 against the population's 0.09); partially pooled, it sits at the
    # population location
    assert abs(small_none - mu) > 0.5
    assert abs(small_partial - mu) < 0.25 * abs(small_none - mu)


def test_predictions_of_known_and_new_groups_and_the_protocol(simulated):
    df, gp, fit = simulated
    new = pd.DataFrame({"x": [2.0, 2.0, 4.0], "g": ["g0", "unseen", "unseen"]})
    pred = gp.predict(new, fit)
    for k in ("latent_mean", "latent_sd", "mean", "var", "lower", "upper"):
        value = getattr(pred, k)
        assert value.shape == (3,) and np.all(np.isfinite(value)), k
    assert pred.latent_sd[1] > 1.5 * pred.latent_sd[0]
    assert pred.upper[1] - pred.lower[1] > pred.upper[0] - pred.lower[0]
    # without f0 a new group's latent mean is the prior mean, its variance eta^2 at the
    # population location exp(eta_mu)
    np.testing.assert_allclose(pred.latent_mean[1:], gp.scale.y_mean, atol=1e-12)
    np.testing.assert_allclose(pred.latent_sd[1:], np.exp(fit.params["eta_mu"]), rtol=1e-6)
    # the protocol: describe, LOO at the fit, replicates, restore
    rows = dict(gp.describe())
    assert rows["groups"] == 7 and "poisson" in rows["likelihood"] and "partial" in rows["pooling"]
    assert gp.label == "hierarchical expquad, poisson"
    method, loo = gp.point_loo(fit)
    assert loo.shape == (len(df),) and np.all(np.isfinite(loo)) and "LA-LOO" in method
    assert gp.replicate(fit, 3, random_seed=0).shape == (3, len(df))
    attrs = {"objective": fit.objective, "prior": True, "grad_norm": fit.grad_norm}
    again = gp.restore_fit("map", fit.params, attrs)
    np.testing.assert_allclose(gp.predict(new, again).latent_mean, pred.latent_mean,
                               rtol=1e-8)  # fmt: skip
    # fit_many ships models to Dask workers with cloudpickle: the copy is the same model
    copy = cloudpickle.loads(cloudpickle.dumps(gp))
    assert isinstance(copy, HierarchicalGP)
    assert copy.log_marginal_likelihood(fit.params) == gp.log_marginal_likelihood(fit.params)
    cols = gp.prediction_columns(new, fit)
    assert set(gp.scores(np.array([3.0, 5.0, 4.0]), cols)) == {
        "rmse", "mean_log_predictive_density", "coverage_94"}


def test_short_nuts_run_and_its_predictions():
    import arviz as az

    df = _frame(1, sizes=(8, 8, 8))
    gp = HierarchicalLatentGP(df, "t", "count", "subject", shared=False, likelihood="poisson",
                        pooling="shared", exposure="E")  # fmt: skip
    idata = gp.sample(draws=150, tune=150, chains=2, sampler="pymc", random_seed=1)
    rhat = az.rhat(idata["posterior"].to_dataset()[["ls", "eta"]])
    assert max(float(rhat[v]) for v in ("ls", "eta")) < 1.1
    assert idata["posterior"]["f_mode"].shape == (2, 150, len(df))
    new = pd.DataFrame({"t": [3.0, 3.0], "subject": ["s1", "s9"], "E": [1.0, 1.0]})
    pred = gp.predict(new, idata, max_draws=50)
    assert np.all(np.isfinite(pred.latent_mean)) and pred.latent_sd[1] > pred.latent_sd[0]


def test_exposure_as_values_or_as_a_column():
    """``exposure=`` takes LatentGP's form too, one value per row: the same model as the
    column name (the same evidence); predictions then take ``size=`` (default 1)."""
    df = _frame(1, sizes=(8, 8, 8))
    by_name = HierarchicalLatentGP(df, "t", "count", "subject", likelihood="poisson", exposure="E")
    by_value = HierarchicalLatentGP(df.drop(columns="E"), "t", "count", "subject",
                              likelihood="poisson", exposure=df["E"].to_numpy())  # fmt: skip
    ip = by_name.model.initial_point()
    p = {k.removesuffix("_log__"): np.exp(v) if k.endswith("_log__") else v
         for k, v in ip.items()}  # fmt: skip
    assert by_value.log_marginal_likelihood(p) == pytest.approx(
        by_name.log_marginal_likelihood(p), rel=1e-12)
    with pytest.raises(ValueError, match="`exposure` has 3 values for 24 rows"):
        HierarchicalLatentGP(df, "t", "count", "subject", likelihood="poisson", exposure=[1.0, 2, 3])


def test_the_previous_dispatch_warns_and_builds_the_latent_model():
    """``HierarchicalGP(..., likelihood="poisson")`` (the previous release's form) still builds
    the latent model, with a FutureWarning naming the explicit forms; the factory picks the
    class by likelihood."""
    df = _frame(sizes=(8,))
    with pytest.warns(FutureWarning, match=r"HierarchicalLatentGP\(\.\.\.\) or bayes_gp\.hierarchical_gp"):
        old = HierarchicalGP(df, "t", "count", "subject", likelihood="poisson")
    assert type(old) is HierarchicalLatentGP
    new = hierarchical_gp(df, "t", "count", "subject", likelihood="poisson")
    assert type(new) is HierarchicalLatentGP and old.hyperparameters == new.hyperparameters
    assert type(hierarchical_gp(df, "t", "count", "subject")) is HierarchicalGP
    with pytest.raises(ValueError, match="'skew_normal' is not implemented"):
        hierarchical_gp(df, "t", "count", "subject", likelihood="skew_normal")
    # every LatentGP likelihood has its hierarchical model; the zero-inflated counts take exposure
    assert type(hierarchical_gp(df.assign(pos=df["E"]), "t", "pos", "subject",
                                likelihood="gamma")) is HierarchicalLatentGP  # fmt: skip
    zip_ = hierarchical_gp(df, "t", "count", "subject", likelihood="zero_inflated_poisson",
                           exposure="E")  # fmt: skip
    assert "zero_inflation" in zip_.hyperparameters


# --------------------------------------------------------------------------- bad input
def test_bad_input_is_named():
    df = _frame()
    with pytest.raises(ValueError, match="'skew_normal' is not implemented"):
        HierarchicalLatentGP(df, "t", "count", "subject", likelihood="skew_normal")
    with pytest.raises(ValueError, match="`exposure`: column 'expo' is not in the data"):
        HierarchicalLatentGP(df, "t", "count", "subject", likelihood="poisson", exposure="expo")
    with pytest.raises(ValueError, match="`trials` applies to the binomial"):
        HierarchicalLatentGP(df, "t", "count", "subject", likelihood="poisson", trials="n")
    with pytest.raises(ValueError, match="`exposure` applies to a non-Gaussian"):
        HierarchicalGP(df, "t", "count", "subject", exposure="E")
    with pytest.raises(ValueError, match=r"approx.*'hsgp'.*dense latent covariance"):
        HierarchicalLatentGP(df, "t", "count", "subject", likelihood="poisson", approx="hsgp")
    big = pd.concat([df] * (MAX_LATENT_ROWS // len(df) + 1), ignore_index=True)
    with pytest.raises(ValueError, match=f"{len(big)} rows.*at most {MAX_LATENT_ROWS}"):
        HierarchicalLatentGP(big, "t", "count", "subject", likelihood="poisson")
    with pytest.raises(ValueError, match=r"`priors` has unknown names \['sigma'\]"):
        HierarchicalLatentGP(df, "t", "count", "subject", likelihood="poisson", priors={"sigma": 1.0})
    with pytest.raises(ValueError, match="`pooling` has unknown names"):
        HierarchicalLatentGP(df, "t", "count", "subject", likelihood="poisson", pooling={"sigma": "none"})
    binom = HierarchicalLatentGP(df, "t", "hit", "subject", likelihood="binomial", trials="n")
    assert dict(binom.describe())["trials"].startswith("5")
