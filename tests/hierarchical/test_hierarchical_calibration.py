"""HierarchicalGP's predictive distribution of held-out data and its prior predictive draws.

``held_out_predictive``: for a MAP fit the Gaussian CDF of ``predict``'s mean and sd (with the
noise); for a NUTS fit the mixture over posterior draws, a new group's hyperparameters drawn
from the population distribution as ``predict`` draws them; calibrated on data simulated from
the model. ``prior_predictive``: data sets whose mean and covariance are those the priors
imply, with fixed and with random (partially pooled) group hyperparameters. Bad input named.
"""

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy.special import ndtr

from bayes_gp.hierarchical import HierarchicalGP
from bayes_gp.inference.typeii import MapFit
from bayes_gp.validate.predictive import predictive_calibration
from tests.hierarchical.test_model import _frame  # groups at subsets of 8 common times

JIT = 1e-10  # the models' default relative jitter
#: The partial pooling of the kernel's hyperparameters that groups of fewer than 6 distinct
#: inputs no longer get by default (HierarchicalGP.small_groups).
PARTIAL = {"ls": "partial", "eta": "partial"}


def _se(a, b, ls, eta):
    return eta**2 * np.exp(-0.5 * (a[:, None] - b[None, :]) ** 2 / ls**2)


def _fit(params):
    return MapFit(params=params, objective=0.0, prior=True)


def _posterior(draws: list[dict]) -> xr.DataTree:
    """A NUTS-like fit: one chain whose draws are the given hyperparameter dicts."""
    names = list(draws[0])
    data = {}
    for n in names:
        a = np.array([np.asarray(d[n], float) for d in draws])[None]  # (chain, draw, ...)
        dims = ["chain", "draw"] + [f"{n}_dim_{i}" for i in range(a.ndim - 2)]
        data[n] = (dims, a)
    return xr.DataTree.from_dict({"posterior": xr.Dataset(data)})


PARAMS = {"ls_mu": 0.2, "ls_tau": 0.5, "ls_z": np.array([0.3, -1.0, 0.8]), "eta_mu": -0.5,
          "eta_tau": 0.2, "eta_z": np.array([1.0, 0.0, -0.5]), "sigma": 0.3, "f0_ls": 1.2,
          "f0_eta": 1.1, "intercept_sd": 0.4, "beta": np.array([0.25])}  # fmt: skip
NEW = pd.DataFrame({"t": [0.5, 3.3, 9.0, 3.3, 6.1], "subject": ["s1", "s1", "s2", "new", "new"],
                    "c": [0.1, -0.4, 1.2, 0.0, 0.7]})  # fmt: skip


@pytest.fixture(scope="module")
def model():
    return HierarchicalGP(_frame(2), "t", "y", "subject", covariates=["c"], random_intercept=True)


# ------------------------------------------------------------------- held-out predictive CDF
def test_map_cdf_is_the_gaussian_cdf_of_predict_with_noise(model):
    y = np.array([0.2, 1.9, 0.4, 2.5, -1.0])
    fit = _fit(PARAMS)
    pred = model.held_out_predictive(NEW, y, fit)
    py = model.predict(NEW, fit, include_noise=True)
    ref = ndtr((y - py.mean) / py.sd)
    assert pred.kind == "cdf" and pred.n == 5
    np.testing.assert_allclose(pred.cdf_at, ref, rtol=0, atol=1e-10)
    np.testing.assert_array_equal(pred.cdf_below, pred.cdf_at)  # a continuous outcome
    # the noise is in it: the CDF of f* alone (no noise) is steeper, so it differs
    pf = model.predict(NEW, fit)
    assert np.max(np.abs(ndtr((y - pf.mean) / pf.sd) - pred.cdf_at)) > 0.01
    # at predict's own 94% interval of y*, 0.03 and 0.97
    lo = model.held_out_predictive(NEW, py.lower, fit).cdf_at
    np.testing.assert_allclose(lo, 0.03, atol=1e-10)


def test_nuts_cdf_is_the_mixture_over_draws(model):
    """Known groups: the mean over draws of the Gaussian CDFs that MAP fits at each draw give.
    New groups (a fresh group hyperparameter per draw): the mixture whose quantiles are
    ``predict``'s band, so the CDF at that band is 0.03 and 0.97."""
    rng = np.random.default_rng(3)
    draws = []
    for _ in range(6):
        d = {k: np.asarray(v, float) for k, v in PARAMS.items()}
        for k in ("ls_z", "eta_z", "beta"):
            d[k] = d[k] + 0.4 * rng.normal(size=d[k].shape)
        for k in ("ls_mu", "eta_mu"):
            d[k] = d[k] + 0.3 * rng.normal()
        d["sigma"] = d["sigma"] * np.exp(0.3 * rng.normal())
        draws.append(d)
    idata = _posterior(draws)
    y = np.array([0.2, 1.9, 0.4, 2.5, -1.0])
    pred = model.held_out_predictive(NEW, y, idata)
    known = NEW["subject"] != "new"
    per_draw = []
    for d in draws:
        p = model.predict(NEW[known], _fit(d), include_noise=True)
        per_draw.append(ndtr((y[known] - p.mean) / p.sd))
    np.testing.assert_allclose(pred.cdf_at[known], np.mean(per_draw, axis=0), rtol=0, atol=1e-12)
    # the mixture is not the CDF at the mean draw
    assert np.max(np.abs(pred.cdf_at[known] - per_draw[0])) > 0.01
    py = model.predict(NEW, idata, include_noise=True, random_seed=7)
    at_lower = model.held_out_predictive(NEW, py.lower, idata, random_seed=7).cdf_at
    at_upper = model.held_out_predictive(NEW, py.upper, idata, random_seed=7).cdf_at
    np.testing.assert_allclose(at_lower, 0.03, atol=1e-9)
    np.testing.assert_allclose(at_upper, 0.97, atol=1e-9)


# population of the simulation: log ls_g ~ N(0.3, 0.3^2), log eta_g ~ N(0, 0.4^2)
SIM = {"ls_mu": 0.3, "ls_tau": 0.3, "eta_mu": 0.0, "eta_tau": 0.4, "sigma": 0.6,
       "f0_ls": 1.5, "f0_eta": 1.0}  # fmt: skip


def _simulate(rng, n_groups=30, n_times=8):
    """Long data from the model: f0, a deviation per group with hyperparameters from the
    population, noise; the first ``n_groups - 6`` groups are known, the last 6 new."""
    t = np.linspace(0.0, 6.0, n_times)
    f0 = np.linalg.cholesky(_se(t, t, SIM["f0_ls"], SIM["f0_eta"]) + 1e-10 * np.eye(n_times))
    f0 = f0 @ rng.standard_normal(n_times)
    rows, z = [], rng.standard_normal((2, n_groups))
    for g in range(n_groups):
        ls = np.exp(SIM["ls_mu"] + SIM["ls_tau"] * z[0, g])
        eta = np.exp(SIM["eta_mu"] + SIM["eta_tau"] * z[1, g])
        fg = np.linalg.cholesky(_se(t, t, ls, eta) + 1e-10 * np.eye(n_times))
        y = 10.0 + f0 + fg @ rng.standard_normal(n_times) + SIM["sigma"] * rng.normal(size=n_times)
        rows += [(ti, f"g{g}", yi) for ti, yi in zip(t, y, strict=True)]
    return pd.DataFrame(rows, columns=["t", "g", "y"]), z


def _coverage_data(seed=11, n_sets=4):
    """``n_sets`` simulated data sets: (model, held-out rows of known groups, rows of new
    groups, the true z of the known groups)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_sets):
        df, z = _simulate(rng)
        known = df["g"].isin([f"g{g}" for g in range(24)])
        held = known & df["t"].isin(np.linspace(0.0, 6.0, 8)[[1, 4, 6]])
        gp = HierarchicalGP(df[known & ~held], "t", "y", "g", priors=SIM, pooling=PARTIAL)
        truth = {"ls_z": z[0, :24], "eta_z": z[1, :24]}
        out.append((gp, df[held], df[~known], truth))
    return out


def test_coverage_on_data_simulated_from_the_model():
    """At the true hyperparameters the predictive distribution is the exact conditional one:
    held-out rows of known groups (a MAP fit at the truth) and every row of new groups (a
    NUTS-like fit of 200 draws at the truth, so that a new group's hyperparameters are mixed
    over the population distribution) fall inside the central intervals at the nominal rate.
    Measured over these 4 data sets (480 held-out rows): coverage 0.49 / 0.875 of the 50% / 90%
    intervals (1440 rows of 12 other data sets: 0.50 / 0.89); leaving out the noise gives
    0.39 / 0.75. The standard error of a coverage here is about 0.02 (rows of a data set share
    f0, those of a new group its hyperparameters)."""
    cdfs = []
    for gp, held, new, truth in _coverage_data():
        assert gp.hyperparameters == ["ls_z", "eta_z"]
        cdfs.append(gp.held_out_predictive(held, held["y"], _fit(truth)).cdf_at)
        idata = _posterior([truth] * 200)
        cdfs.append(gp.held_out_predictive(new, new["y"], idata, random_seed=1).cdf_at)
    F = np.concatenate(cdfs)
    assert F.size == 4 * (24 * 3 + 6 * 8)
    cover50 = np.mean(np.abs(F - 0.5) <= 0.25)
    cover90 = np.mean(np.abs(F - 0.5) <= 0.45)
    assert abs(cover50 - 0.5) < 0.06, cover50
    assert abs(cover90 - 0.9) < 0.05, cover90
    # the report's summary of the same distribution
    cal = predictive_calibration(gp.held_out_predictive(new, new["y"], idata, random_seed=1))
    assert cal.n == 48 and set(cal.coverage) >= {0.5, 0.9}


# --------------------------------------------------------------------- prior predictive
def test_prior_predictive_with_fixed_hyperparameters_has_the_model_covariance():
    """Every hyperparameter fixed by ``priors=``: the draws are N(m, C) with C built here from
    the formulas; whitened by C's Cholesky factor their mean is 0 and covariance I."""
    df = _frame(5)
    fixed = {"ls": 0.9, "eta": 0.7, "sigma": 0.3, "f0_ls": 2.0, "f0_eta": 1.2,
             "intercept_sd": 0.5, "beta": 0.8}  # fmt: skip
    gp = HierarchicalGP(df, "t", "y", "subject", pooling="shared", covariates=["c"],
                        random_intercept=True, priors=fixed)  # fmt: skip
    assert gp.hyperparameters == []
    draws = gp.prior_predictive(20000, random_seed=2)
    assert draws.shape == (20000, len(df))
    t, y, c = df["t"].to_numpy(), df["y"].to_numpy(), df["c"].to_numpy()
    same = df["subject"].to_numpy()[:, None] == df["subject"].to_numpy()[None, :]
    eps = JIT * y.var()
    C = _se(t, t, 2.0, 1.2) + eps * (t[:, None] == t[None, :])
    C += same * (_se(t, t, 0.9, 0.7) + 0.25) + (0.09 + eps) * np.eye(t.size)
    mean = y.mean() + 0.8 * (c - c.mean())
    W = np.linalg.solve(np.linalg.cholesky(C), (draws - mean).T).T
    assert np.max(np.abs(W.mean(axis=0))) < 0.04  # standard error 0.007
    assert np.max(np.abs(np.cov(W.T) - np.eye(t.size))) < 0.05
    # the same seed gives the same draws; one draw has the shape of one
    np.testing.assert_array_equal(gp.prior_predictive(3, random_seed=4), gp.prior_predictive(3, random_seed=4))
    assert gp.prior_predictive(1, random_seed=0).shape == (1, len(df))


def test_prior_predictive_draws_the_partially_pooled_group_hyperparameters():
    """Population locations and spreads fixed, the standardised group effects z_g from their
    N(0, 1) priors: within a group cov(y_i, y_j) = E[eta_g^2] E[k(r; ls_g)] + k_0(r), the
    expectations over z by Gauss-Hermite quadrature; between groups only f0's covariance."""
    times = np.array([0.0, 1.0, 2.5])
    df = pd.DataFrame({"t": np.tile(times, 4), "g": np.repeat(["a", "b", "c", "d"], 3),
                       "y": np.arange(12.0) % 5})  # fmt: skip
    pri = {"ls_mu": 0.0, "ls_tau": 0.5, "eta_mu": 0.2, "eta_tau": 0.5, "sigma": 0.3,
           "f0_ls": 1.5, "f0_eta": 0.6}  # fmt: skip
    gp = HierarchicalGP(df, "t", "y", "g", priors=pri, pooling=PARTIAL)  # 3 inputs per group
    assert gp.hyperparameters == ["ls_z", "eta_z"]
    draws = gp.prior_predictive(20000, random_seed=3)
    S = np.cov(draws.T)
    x, w = np.polynomial.hermite_e.hermegauss(60)
    w = w / w.sum()  # expectations over z ~ N(0, 1)
    eta2 = np.sum(w * np.exp(2 * (pri["eta_mu"] + pri["eta_tau"] * x)))
    ls = np.exp(pri["ls_mu"] + pri["ls_tau"] * x)
    r = times[:, None] - times[None, :]
    kg = np.sum(w * np.exp(-0.5 * r[..., None] ** 2 / ls**2), axis=-1)
    k0 = _se(times, times, pri["f0_ls"], pri["f0_eta"])
    within = eta2 * kg + k0 + pri["sigma"] ** 2 * np.eye(3)
    # standard errors about 0.025 on the diagonal, 0.01 off it (the mean of 4 groups' blocks)
    blocks = np.mean([S[3 * g : 3 * g + 3, 3 * g : 3 * g + 3] for g in range(4)], axis=0)
    np.testing.assert_allclose(blocks, within, atol=0.08)
    # with z fixed at 0 the within-group variance would be exp(0.4) + 0.36 + 0.09 = 1.94,
    # not 2.91: the group hyperparameters are drawn
    assert abs(within[0, 0] - (np.exp(0.4) + 0.36 + 0.09)) > 0.9
    between = np.mean([S[3 * g : 3 * g + 3, 3 * h : 3 * h + 3]
                       for g in range(4) for h in range(4) if g != h], axis=0)  # fmt: skip
    np.testing.assert_allclose(between, k0, atol=0.03)
    np.testing.assert_allclose(draws.mean(axis=0), df["y"].mean(), atol=0.05)


@pytest.mark.parametrize("kernel", ["expquad * periodic", "ratquad"])
def test_prior_blocks_vectorised_over_draws_equal_the_blocks_of_each_draw(kernel):
    """The prior predictive evaluates the likelihood's blocks for many draws in one call (the
    graph vectorised over draws): the same matrices as the model's blocks at each draw, for a
    kernel expression (one kernel graph per group) and a batched catalogue kernel."""
    import pymc as pm

    df = _frame(5)
    gp = HierarchicalGP(df, "t", "y", "subject", kernel=kernel, covariates=["c"],
                        random_intercept=True)  # fmt: skip
    values = pm.draw(gp.model.free_RVs, draws=3, random_seed=2)
    mu, A, K0 = gp._batched_blocks()(*values)
    for i in range(3):
        mu_i, _, _, blocks, K0_i = gp.marginal.numeric_blocks([v[i] for v in values])
        np.testing.assert_allclose(mu[i], mu_i, rtol=1e-14)
        np.testing.assert_allclose(K0[i], K0_i, rtol=1e-14)  # to rounding
        for g, B in enumerate(blocks):
            np.testing.assert_allclose(A[i, g, : len(B), : len(B)], B, rtol=1e-14)
        assert not np.array_equal(A[i], A[(i + 1) % 3])  # each draw its own hyperparameters


# ---------------------------------------------------------------------------- bad input
def test_bad_input_is_named(model, monkeypatch):
    fit = _fit(PARAMS)
    with pytest.raises(ValueError, match=r"one value per row of `new_data` \(5\)"):
        model.held_out_predictive(NEW, np.zeros(4), fit)
    with pytest.raises(ValueError, match=r"one value per row of `new_data`"):
        model.held_out_predictive(NEW, np.zeros((5, 2)), fit)
    with pytest.raises(ValueError, match="non-finite values at \\[2\\]"):
        model.held_out_predictive(NEW, np.array([0.0, 1.0, np.nan, 0.0, 0.0]), fit)
    with pytest.raises(ValueError, match="must be numeric"):
        model.held_out_predictive(NEW, np.array(["a"] * 5), fit)
    with pytest.raises(ValueError, match="`new_data` must be a DataFrame"):
        model.held_out_predictive(np.ones((5, 1)), np.zeros(5), fit)
    with pytest.raises(ValueError, match="'c' is not in the data"):
        model.held_out_predictive(NEW.drop(columns="c"), np.zeros(5), fit)
    with pytest.raises(TypeError, match="MapFit"):
        model.held_out_predictive(NEW, np.zeros(5), {"params": PARAMS})
    for bad in (0, -2, 2.5, True):
        with pytest.raises(ValueError, match="`n_draws` must be a positive integer"):
            model.prior_predictive(bad)
    import bayes_gp.hierarchical.model as hm

    monkeypatch.setattr(hm, "PRIOR_PREDICTIVE_MAX_N", 6)  # the largest group has 7 rows
    with pytest.raises(NotImplementedError, match="a group of 7 rows and 8 distinct inputs"):
        model.prior_predictive(2)
