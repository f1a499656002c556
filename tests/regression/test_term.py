"""A GP marginal likelihood as a term of the user's own PyMC model (bayes_gp.regression.term).

References: ``pm.gp.Marginal.marginal_likelihood`` for the log density and its gradient (R&W eq.
2.30, 5.9), a NumPy transcription of R&W eqs. 2.25-2.26 (2.38 with a mean function) for the
per-draw predictions, the law of total variance and the mixture CDF for the mixed predictions,
a real ``pm.sample`` for the whole workflow. Fixed seeds throughout.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pymc as pm
import pytest
import xarray as xr
from scipy.stats import norm

import bayes_gp
from bayes_gp import kernels
from bayes_gp.linalg import EAGER_MODE, NotPSDError
from bayes_gp.predictive import JitterWarning
from bayes_gp.regression.term import (
    PROB,
    MarginalPrediction,
    MarginalTerm,
    marginal_gp,
    predict_marginal,
)

N = 25
RNG = np.random.default_rng(20261122)
X2 = RNG.uniform(0, 5, (N, 2))
Y2 = np.sin(X2[:, 0]) + 0.5 * np.cos(X2[:, 1]) + 0.2 * RNG.standard_normal(N)
GROUP = np.repeat(np.arange(3), 4)
Z_OBS = RNG.normal(1.0, 0.7, GROUP.size)  # the user's second likelihood term
REL_JITTER = 1e-8


def _user_model(gp: str, X=X2, y=Y2, abs_jitter: float | None = None, fixed_noise=False):
    """The user's model: a hierarchical intercept with its own likelihood, an ARD Matérn-5/2 GP
    whose mean is the hierarchical mean ``mu_a``, and either bayes_gp's term (``gp="term"``) or
    ``pm.gp.Marginal`` (``gp="pymc"``, given the term's absolute jitter)."""
    with pm.Model(coords={"group": ["a", "b", "c"]}) as model:
        mu_a = pm.Normal("mu_a", 0.0, 1.0)
        tau = pm.HalfNormal("tau", 1.0)
        a = pm.Normal("a", mu_a, tau, dims="group")
        pm.Normal("z", a[GROUP], 0.5, observed=Z_OBS)
        ls = pm.InverseGamma("ls", 4.0, 6.0, shape=2)
        eta = pm.HalfNormal("eta", 1.0)
        sigma = 0.3 if fixed_noise else pm.HalfNormal("sigma", 0.5)
        pm.Deterministic("snr", eta / sigma)
        cov = eta**2 * kernels.Matern52(2, ls=ls)
        mean = pm.gp.mean.Constant(mu_a)
        if gp == "term":
            term = marginal_gp(
                "y", X, y, cov_func=cov, mean_func=mean, sigma=sigma, jitter=REL_JITTER
            )
        else:
            # exact by construction: pm.gp.Marginal's C = K + sigma^2 I + jitter I with
            # jitter = the term's absolute jitter, which is what the term adds
            term = None
            pm.gp.Marginal(mean_func=mean, cov_func=cov).marginal_likelihood(
                "y", X, y, sigma=sigma, jitter=abs_jitter
            )
    return model, term


def _random_points(model, n: int, seed: int) -> list[dict]:
    """``n`` points of the model's value variables (unconstrained), standard normal."""
    rng = np.random.default_rng(seed)
    init = model.initial_point()
    return [{k: rng.normal(0.0, 0.8, np.shape(v)) for k, v in init.items()} for _ in range(n)]


# ------------------------------------------------------------------ 1, 2: log density and gradient
@pytest.mark.parametrize("fixed_noise", [False, True])
def test_logp_and_gradient_equal_pymc_marginal(fixed_noise):
    """The whole model's log density (priors, the second likelihood, the GP term) and its
    gradient equal those of the same model with ``pm.gp.Marginal`` at 6 random points:
    log density to 1e-10 relative, gradient to 1e-8 relative (+1e-9 absolute)."""
    ours, term = _user_model("term", fixed_noise=fixed_noise)
    assert term.jitter == pytest.approx(REL_JITTER * np.var(Y2), rel=1e-12)
    ref, _ = _user_model("pymc", abs_jitter=term.jitter, fixed_noise=fixed_noise)
    assert [v.name for v in ours.value_vars] == [v.name for v in ref.value_vars]
    logp_ours = ours.compile_logp(mode=EAGER_MODE)
    logp_ref = ref.compile_logp(mode=EAGER_MODE)
    dlogp_ours = ours.compile_dlogp(mode=EAGER_MODE)
    dlogp_ref = ref.compile_dlogp(mode=EAGER_MODE)
    for point in _random_points(ours, 6, seed=3):
        lo, lr = float(logp_ours(point)), float(logp_ref(point))
        assert np.isfinite(lo)
        np.testing.assert_allclose(lo, lr, rtol=1e-10)
        np.testing.assert_allclose(dlogp_ours(point), dlogp_ref(point), rtol=1e-8, atol=1e-9)
    # the term depends on exactly the variables of its kernel, mean and noise
    expected = ["mu_a", "ls", "eta"] + ([] if fixed_noise else ["sigma"])
    assert term.hyperparameters == expected


def test_gradient_equals_finite_differences():
    """dlogp of the model with the term against central differences (step 1e-6) at 3 random
    points: agreement to 1e-6 relative."""
    model, _ = _user_model("term")
    logp = model.compile_logp(mode=EAGER_MODE)
    dlogp = model.compile_dlogp(mode=EAGER_MODE)
    names = [v.name for v in model.value_vars]
    for point in _random_points(model, 3, seed=5):
        grad = dlogp(point)
        fd, h = [], 1e-6
        for name in names:
            for i in range(np.size(point[name])):
                up = {k: np.array(v, float) for k, v in point.items()}
                dn = {k: np.array(v, float) for k, v in point.items()}
                up[name].flat[i] += h
                dn[name].flat[i] -= h
                fd.append((float(logp(up)) - float(logp(dn))) / (2 * h))
        np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-5)


def test_pandas_inputs_and_dims():
    """A 1-D pandas Series ``X``, a fixed noise and no mean: the density equals pm.gp.Marginal's
    (zero mean) to 1e-10; the observed variable carries the user's dims."""
    x = pd.Series(np.linspace(0, 4, 12), name="time")
    y = pd.Series(np.cos(x.to_numpy()), index=x.index)
    with pm.Model(coords={"obs": np.arange(12)}) as ours:
        ls = pm.Gamma("ls", 4.0, 4.0)
        term = marginal_gp("y", x, y, cov_func=kernels.ExpQuad(1, ls=ls), sigma=0.1, dims="obs")
    with pm.Model() as ref:
        ls = pm.Gamma("ls", 4.0, 4.0)
        pm.gp.Marginal(cov_func=kernels.ExpQuad(1, ls=ls)).marginal_likelihood(
            "y", x.to_numpy()[:, None], y.to_numpy(), sigma=0.1, jitter=term.jitter
        )
    assert term.feature_names == ["time"]
    assert ours.named_vars_to_dims["y"] == ("obs",)
    point = {"ls_log__": np.array(0.3)}
    np.testing.assert_allclose(
        ours.compile_logp(mode=EAGER_MODE)(point),
        ref.compile_logp(mode=EAGER_MODE)(point),
        rtol=1e-10,
    )


# ------------------------------------------------------------------ 3: predictions, closed form
def _matern52(A, B, ls, eta):
    """R&W eq. 4.17b with ARD distances r = |(x - x') / ls|."""
    r = np.sqrt((((A[:, None, :] - B[None, :, :]) / ls) ** 2).sum(-1))
    return eta**2 * (1 + np.sqrt(5) * r + 5.0 / 3.0 * r**2) * np.exp(-np.sqrt(5) * r)


def _reference(term, ls, eta, sigma, c, Xn):
    """R&W eqs. 2.25-2.26 with the constant mean c (eq. 2.38), by NumPy's dense solve."""
    X, y = term.X, term.y
    C = _matern52(X, X, ls, eta) + (sigma**2 + term.jitter) * np.eye(X.shape[0])
    Ks = _matern52(X, Xn, ls, eta)
    mean = c + Ks.T @ np.linalg.solve(C, y - c)
    var = eta**2 - np.sum(Ks * np.linalg.solve(C, Ks), axis=0)
    return mean, var


def _fake_posterior(seed: int, chains: int = 2, draws: int = 3, drop=()):
    rng = np.random.default_rng(seed)
    shape = (chains, draws)
    data = {
        "ls": (("chain", "draw", "ls_dim_0"), rng.uniform(0.8, 2.5, (*shape, 2))),
        "eta": (("chain", "draw"), rng.uniform(0.5, 1.5, shape)),
        "sigma": (("chain", "draw"), rng.uniform(0.1, 0.4, shape)),
        "mu_a": (("chain", "draw"), rng.normal(0.0, 0.5, shape)),
        "tau": (("chain", "draw"), rng.uniform(0.1, 1.0, shape)),
        "snr": (("chain", "draw"), np.full(shape, np.nan)),  # a deterministic: must not matter
    }
    coords = {"chain": np.arange(chains), "draw": np.arange(draws)}
    ds = xr.Dataset({k: v for k, v in data.items() if k not in drop}, coords=coords)
    return xr.DataTree.from_dict({"posterior": ds})


X_NEW = np.random.default_rng(9).uniform(-1, 6, (17, 2))


def test_predictions_equal_closed_form_per_draw():
    """Each draw's mean and variance equal the NumPy transcription of R&W 2.25-2.26 (to 1e-10);
    with ``include_noise`` each variance grows by exactly that draw's sigma^2; the mixture mean
    and variance are the law of total variance over the draws; the 94% band is where the
    mixture CDF is 0.03 and 0.97 (to 1e-9); the posterior's variables the term does not use
    (``tau``, the NaN deterministic ``snr``) do not matter."""
    _, term = _user_model("term")
    idata = _fake_posterior(11)
    pred = predict_marginal(idata, term, X_NEW)
    noisy = predict_marginal(idata, term, X_NEW, include_noise=True)
    assert isinstance(pred, MarginalPrediction)
    assert pred.means.shape == pred.variances.shape == (6, 17)
    post = idata["posterior"]
    for j, (c, d) in enumerate(zip(pred.chain, pred.draw, strict=True)):
        p = {k: np.asarray(post[k].sel(chain=c, draw=d)) for k in ("ls", "eta", "sigma", "mu_a")}
        mean, var = _reference(term, p["ls"], p["eta"], p["sigma"], p["mu_a"], X_NEW)
        np.testing.assert_allclose(pred.means[j], mean, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(pred.variances[j], var, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(noisy.variances[j] - pred.variances[j], p["sigma"] ** 2, 1e-12)
        np.testing.assert_array_equal(noisy.means[j], pred.means[j])
    for pr in (pred, noisy):
        np.testing.assert_allclose(pr.mean, pr.means.mean(0), rtol=1e-14)
        total = pr.variances.mean(0) + ((pr.means - pr.means.mean(0)) ** 2).mean(0)
        np.testing.assert_allclose(pr.var, total, rtol=1e-12)
        np.testing.assert_allclose(pr.sd, np.sqrt(total), rtol=1e-12)
        sds = np.sqrt(pr.variances)
        for band, prob in ((pr.lower, (1 - PROB) / 2), (pr.upper, (1 + PROB) / 2)):
            cdf = norm.cdf((band - pr.means) / sds).mean(0)
            np.testing.assert_allclose(cdf, prob, atol=1e-9)
    assert pred.prob == PROB == bayes_gp.report.core.CI_PROB == 0.94
    assert pred.include_noise is False and noisy.include_noise is True
    assert pred.jitter == 0.0


def test_blocks_thinning_and_samples():
    """Blocks of 1, 5 and all rows give the same predictions and draws (to 1e-13); ``draws=4``
    of 6 picks the evenly spaced stacked draws 0, 2, 3, 5; the same seed gives the same draws;
    with one posterior draw, 20000 predictive draws have the predicted mean and variance."""
    _, term = _user_model("term")
    idata = _fake_posterior(12)
    preds = [
        predict_marginal(idata, term, X_NEW, block=b, n_samples=7, random_seed=4)
        for b in (1, 5, 1000)
    ]
    for p in preds[1:]:
        for field in ("means", "variances", "mean", "var", "lower", "upper", "samples"):
            np.testing.assert_allclose(getattr(p, field), getattr(preds[0], field), rtol=1e-13)
    assert preds[0].samples.shape == (7, 17)
    thin = predict_marginal(idata, term, X_NEW, draws=4)
    assert list(zip(thin.chain, thin.draw, strict=True)) == [(0, 0), (0, 2), (1, 0), (1, 2)]
    np.testing.assert_allclose(thin.means, preds[0].means[[0, 2, 3, 5]], rtol=1e-13)

    one = _fake_posterior(13, chains=1, draws=1)
    p = predict_marginal(one, term, X_NEW, include_noise=True, n_samples=20000, random_seed=1)
    z = (p.samples.mean(0) - p.mean) / np.sqrt(p.var / 20000)
    assert np.max(np.abs(z)) < 4.5  # 17 standard normals
    np.testing.assert_allclose(p.samples.var(0) / p.var, 1.0, atol=0.06)  # sd of ratio 0.01
    np.testing.assert_allclose(p.lower, p.mean - norm.ppf(0.97) * p.sd, rtol=1e-10)


# ------------------------------------------------------------------ 4: a real fit
def test_sample_then_predict_tracks_the_function_and_covers():
    """PyMC's NUTS (2 chains x 200 draws, numba) on n=30 noisy values (sd 0.3) of sin x on
    [0, 10] with the user's InverseGamma prior on the length-scale. At 300 held-out inputs the
    posterior mean is within RMSE 0.13 of sin x; for these data the best plug-in GP mean
    (true noise, best length-scale on a grid) is at 0.098, the noise-free interpolant at 0.18
    (ls 1.5) and 0.38 (ls 0.5), the prior mean 0 at 0.69. The 94% bands of y cover 88-99% of
    the 300 held-out noisy values (binomial sd 1.4 points at 94%); the bands of f alone cover
    about 61% of them, so forgetting sigma^2 fails."""
    rng = np.random.default_rng(1)
    x = (np.arange(30) + rng.uniform(0, 1, 30)) / 3.0  # one input in each third of a unit
    y = np.sin(x) + 0.3 * rng.standard_normal(30)
    x_out = rng.uniform(0, 10, 300)
    y_out = np.sin(x_out) + 0.3 * rng.standard_normal(300)
    with pm.Model():
        ls = pm.InverseGamma("ls", 5.0, 5.0)  # the user's own prior
        eta = pm.HalfNormal("eta", 1.0)
        sigma = pm.HalfNormal("sigma", 0.5)
        term = marginal_gp("y", x, y, cov_func=eta**2 * kernels.ExpQuad(1, ls=ls), sigma=sigma)
        term.check_jitter(random_seed=1)
        idata = pm.sample(
            draws=200, tune=200, chains=2, cores=1, nuts_sampler="pymc", random_seed=3,
            progressbar=False, compile_kwargs={"mode": "FAST_RUN"},
        )  # fmt: skip
    pred_f = predict_marginal(idata, term, x_out)
    pred_y = predict_marginal(idata, term, x_out, include_noise=True)
    assert pred_f.n_draws == 400
    rmse = np.sqrt(np.mean((pred_f.mean - np.sin(x_out)) ** 2))
    assert rmse < 0.13, rmse
    inside = np.mean((y_out >= pred_y.lower) & (y_out <= pred_y.upper))
    assert 0.88 <= inside <= 0.99, inside
    assert np.all(pred_y.upper - pred_y.lower > pred_f.upper - pred_f.lower)


# ------------------------------------------------------------------ 5: jitter pre-flight
def _duplicated_model(sigma, jitter):
    rng = np.random.default_rng(8)
    x = np.sort(rng.uniform(0, 10, 15))
    X = np.concatenate([x, x])  # every input twice
    y = np.sin(X) + 0.1 * rng.standard_normal(30)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        z = pm.Normal("z", mu, 1.0, shape=3)
        pm.Normal("other", z, 1.0, observed=[0.1, 0.2, 0.3])
        ls = pm.LogNormal("ls", np.log(2.0), 0.3)
        eta = pm.HalfNormal("eta", 1.0)
        term = marginal_gp("y", X, y, cov_func=eta**2 * kernels.ExpQuad(1, ls=ls), sigma=sigma,
                           jitter=jitter)  # fmt: skip
    return model, term


def test_preflight_raises_the_jitter_and_keeps_the_users_model():
    """Duplicated inputs, no noise (sigma 0, jitter 0): C is singular, the model's log density at
    its initial point is -inf; the pre-flight check raises the jitter (from 0 to > 0), sets the
    shared value and records the choice; the same model object then has a finite log density,
    and the user's other variables and likelihood term are unchanged (their logp identical)."""
    model, term = _duplicated_model(sigma=0.0, jitter=0.0)
    ip = model.initial_point()
    logp = model.compile_logp(mode=EAGER_MODE)
    other = model.compile_logp(vars=[model["other"], model["z"], model["mu"]], mode=EAGER_MODE)
    before_other = float(other(ip))
    assert float(logp(ip)) == -np.inf
    choice = term.check_jitter(random_seed=0)
    assert choice.raised and choice.default == 0.0 and choice.jitter > 0
    assert choice.n_points == 9
    assert term.jitter == choice.jitter == term.jitter_tensor.get_value()
    assert term.jitter_choice == choice and term.default_jitter == 0.0
    assert term.model is model
    assert [v.name for v in model.free_RVs] == ["mu", "z", "ls", "eta"]
    assert np.isfinite(float(logp(ip)))  # the already compiled function reads the new jitter
    assert float(other(ip)) == before_other


def test_preflight_keeps_a_sufficient_jitter_and_refuses_a_non_covariance():
    """With the default jitter (1e-10 var(y)) the duplicated inputs factorise: nothing is raised.
    A negative 'covariance' cannot be factorised with any jitter: NotPSDError with advice."""
    _, term = _duplicated_model(sigma=0.0, jitter=None)
    choice = term.check_jitter(random_seed=0)
    assert not choice.raised and term.jitter == pytest.approx(1e-10 * np.var(term.y), rel=1e-12)
    with pm.Model():
        ls = pm.LogNormal("ls", 0.0, 0.3)
        bad = marginal_gp("y", X2, Y2, cov_func=-1.0 * kernels.ExpQuad(2, ls=ls), sigma=0.0)
    with pytest.raises(NotPSDError, match=r"not positive definite.*duplicate"):
        bad.check_jitter(random_seed=0)


def test_prediction_adds_jitter_where_c_is_singular():
    """Predicting from draws at which C is singular (duplicated inputs, no noise, jitter 0)
    factorises with the package's growing jitter, says so once (JitterWarning) and records
    it; the posterior needs only the term's variables (no ``mu`` or ``z``)."""
    _, term = _duplicated_model(sigma=0.0, jitter=0.0)
    ds = xr.Dataset(
        {"ls": (("chain", "draw"), [[1.5, 2.0]]), "eta": (("chain", "draw"), [[1.0, 0.7]])},
        coords={"chain": [0], "draw": [0, 1]},
    )
    idata = xr.DataTree.from_dict({"posterior": ds})
    with pytest.warns(JitterWarning, match="at 2 of 2 posterior draws") as record:
        pred = predict_marginal(idata, term, np.linspace(0, 10, 5))
    assert len(record) == 1
    assert 0 < pred.jitter <= 1e-4 * 1.0  # at most 1e-4 x the mean diagonal eta^2 <= 1
    assert np.all(np.isfinite(pred.mean)) and np.all(pred.var >= 0)


# ------------------------------------------------------------------ 6: errors
def _small_term():
    with pm.Model() as model:
        ls = pm.Gamma("ls", 2.0, 1.0, shape=2)
        sigma = pm.HalfNormal("sigma", 0.5)
        term = marginal_gp("y", X2, Y2, cov_func=kernels.ExpQuad(2, ls=ls), sigma=sigma)
    return model, term


def test_bad_data_and_arguments():
    bad_y = Y2.copy()
    bad_y[3] = np.nan
    cov = kernels.ExpQuad(2, ls=1.0)
    cases = [
        (dict(X=X2, y=bad_y), ValueError, "`y` contains NaN"),
        (dict(X=X2, y=Y2[:-1]), ValueError, "`X` has 25 rows but `y` has 24 values"),
        (dict(X=X2[:, :1], y=Y2), ValueError, "input_dim=2 but `X` has 1 column"),
        (dict(X=X2, y=Y2, sigma=-0.1), ValueError, "`sigma` must be non-negative"),
        (dict(X=X2, y=Y2, sigma=np.ones(2)), ValueError, "`sigma` must be a scalar"),
        (dict(X=X2, y=Y2, jitter=-1.0), ValueError, "`jitter` must be a non-negative"),
        (dict(X=X2, y=Y2, cov_func="expquad"), TypeError, "`cov_func` must be a PyMC"),
        (dict(X=X2, y=Y2, mean_func=3.0), TypeError, "`mean_func` must be"),
        (
            dict(X=pd.DataFrame(X2), y=pd.Series(Y2, index=np.arange(N) + 1)),
            ValueError,
            "different indexes",
        ),
    ]
    for kwargs, error, message in cases:
        args = {"cov_func": cov, "sigma": 0.2, **kwargs}
        with pm.Model(), pytest.raises(error, match=message):
            marginal_gp("y", **args)
    with pytest.raises(TypeError, match=r"inside `with pm\.Model"):
        marginal_gp("y", X2, Y2, cov_func=cov, sigma=0.2)
    with pm.Model(), pytest.raises(ValueError, match="not free variables of the model"):
        marginal_gp("y", X2, Y2, cov_func=kernels.ExpQuad(2, ls=pm.Gamma.dist(2, 1)), sigma=0.2)


def test_bad_prediction_inputs():
    _, term = _small_term()
    rng = np.random.default_rng(0)
    ds = xr.Dataset(
        {
            "ls": (("chain", "draw", "d"), rng.uniform(1, 2, (1, 2, 2))),
            "sigma": (("chain", "draw"), [[0.2, 0.3]]),
        },
        coords={"chain": [0], "draw": [0, 1]},
    )
    idata = xr.DataTree.from_dict({"posterior": ds})
    assert predict_marginal(idata, term, X_NEW).n_draws == 2
    with pytest.raises(ValueError, match=r"`X_new` has 3 column.*fitted on 2"):
        predict_marginal(idata, term, np.zeros((4, 3)))
    bad = X_NEW.copy()
    bad[0, 1] = np.nan
    with pytest.raises(ValueError, match="`X_new` contains NaN"):
        predict_marginal(idata, term, bad)
    missing = xr.DataTree.from_dict({"posterior": ds.drop_vars("sigma")})
    with pytest.raises(KeyError, match=r"no variable\(s\) \['sigma'\].*'y' depends on"):
        predict_marginal(missing, term, X_NEW)
    with pytest.raises(ValueError, match="no `posterior` group"):
        predict_marginal(xr.DataTree.from_dict({"prior": ds}), term, X_NEW)
    nan = xr.DataTree.from_dict({"posterior": ds.assign(sigma=ds["sigma"] * np.nan)})
    with pytest.raises(ValueError, match="'sigma' contains NaN"):
        predict_marginal(nan, term, X_NEW)
    short = ds.drop_vars("ls").assign(ls=(("chain", "draw", "e"), np.ones((1, 2, 1))))
    wrong = xr.DataTree.from_dict({"posterior": short})
    with pytest.raises(ValueError, match=r"'ls' has shape \(1,\) per draw.*\(2,\)"):
        predict_marginal(wrong, term, X_NEW)
    with pytest.raises(ValueError, match="`block` must be"):
        predict_marginal(idata, term, X_NEW, block=0)
    with pytest.raises(TypeError, match="must be a MarginalTerm"):
        predict_marginal(idata, "y", X_NEW)
    assert isinstance(term, MarginalTerm)
    with pytest.raises(AttributeError, match="cannot be reassigned"):
        term.sigma = 1.0
