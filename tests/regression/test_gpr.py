"""GPRegression: closed-form quantities against scikit-learn, type-II fits, input validation.

NUTS tests are in test_nuts.py.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pymc as pm
import pytest
from scipy import stats
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process import kernels as skk

import bayes_gp
from bayes_gp import GPRegression
from bayes_gp.kernels import DotProduct, ExpQuad


def _data(n=40, D=1, seed=0, noise=0.2):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 6, size=(n, D))
    y = np.sin(X[:, 0]) + (0.5 * X[:, 1] if D > 1 else 0.0) + noise * rng.normal(size=n)
    return X, y


def _sum_kernel(D):
    ls = pm.LogNormal("ls", 0.0, 1.0)
    s0 = pm.HalfNormal("s0", 1.0)
    return ExpQuad(D, ls=ls) + DotProduct(D, sigma0=s0)


# (model kwargs, hyperparameters, equivalent scikit-learn kernel without noise)
CASES = {
    "expquad": (
        {"kernel": "expquad"},
        {"ls": 1.3, "eta": 0.9, "sigma": 0.25},
        lambda: skk.ConstantKernel(0.81) * skk.RBF(1.3),
    ),
    "matern52": (
        {"kernel": "matern52"},
        {"ls": 0.8, "eta": 1.2, "sigma": 0.3},
        lambda: skk.ConstantKernel(1.44) * skk.Matern(0.8, nu=2.5),
    ),
    "matern32": (
        {"kernel": "matern32"},
        {"ls": 0.8, "eta": 1.2, "sigma": 0.3},
        lambda: skk.ConstantKernel(1.44) * skk.Matern(0.8, nu=1.5),
    ),
    "matern12": (
        {"kernel": "matern12"},
        {"ls": 2.0, "eta": 0.7, "sigma": 0.1},
        lambda: skk.ConstantKernel(0.49) * skk.Matern(2.0, nu=0.5),
    ),
    "ratquad": (
        {"kernel": "ratquad"},
        {"ls": 1.1, "eta": 1.0, "sigma": 0.2, "alpha": 0.7},
        lambda: skk.RationalQuadratic(1.1, alpha=0.7),
    ),
    "periodic": (
        {"kernel": "periodic"},
        {"ls": 0.9, "eta": 1.1, "sigma": 0.2, "period": 3.1},
        lambda: skk.ConstantKernel(1.21) * skk.ExpSineSquared(0.9, periodicity=3.1),
    ),
    "expquad_ard_3d": (
        {"kernel": "expquad", "ard": True},
        {"ls": np.array([1.3, 0.4, 5.0]), "eta": 0.9, "sigma": 0.25},
        lambda: skk.ConstantKernel(0.81) * skk.RBF([1.3, 0.4, 5.0]),
    ),
    "sum_callable": (
        {"kernel": _sum_kernel},
        {"ls": 1.3, "s0": 0.6, "sigma": 0.25},
        lambda: skk.RBF(1.3) + skk.DotProduct(sigma_0=0.6),
    ),
}


def _case_data(name):
    D = 3 if "3d" in name else 1
    return _data(n=35, D=D, seed=3)


@pytest.mark.parametrize("name", list(CASES))
def test_log_marginal_likelihood_and_predictive_equal_sklearn(name):
    _check_against_sklearn(name, *_case_data(name))


@pytest.mark.parametrize("name", ["expquad", "matern12", "ratquad", "periodic", "sum_callable"])
def test_inputs_on_a_grid_equal_sklearn(name):
    """Inputs on a grid (every 0.25, gaps, shuffled): the Gram matrix comes from the kernel's
    values at the lags (bayes_gp.kernels.lags; not for the dot product of ``sum_callable``,
    which is no function of the lag) and the answers are still scikit-learn's."""
    X = np.delete(np.arange(48) * 0.25, [3, 10, 30])[np.random.default_rng(5).permutation(45)]
    X = X[:, None]
    y = np.sin(X[:, 0]) + 0.2 * np.random.default_rng(6).normal(size=X.shape[0])
    _check_against_sklearn(name, X, y)


def _check_against_sklearn(name, X, y):
    kwargs, params, sk_kernel = CASES[name]
    model = GPRegression(X, y, mean="zero", **kwargs)
    noise_var = params["sigma"] ** 2 + model.jitter
    params = {k: v for k, v in params.items() if k in model.hyperparameters}
    sk = GaussianProcessRegressor(sk_kernel(), alpha=noise_var, optimizer=None).fit(X, y)
    lml = model.log_marginal_likelihood(params)
    np.testing.assert_allclose(lml, sk.log_marginal_likelihood_value_, rtol=1e-10, atol=1e-8)

    fit = bayes_gp.inference.MapFit(params=params, objective=lml, prior=False)
    Xn = np.random.default_rng(9).uniform(-1, 8, size=(12, X.shape[1]))
    pred = model.predict(Xn, fit)
    mu, sd = sk.predict(Xn, return_std=True)
    np.testing.assert_allclose(pred.mean, mu, rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(pred.sd, sd, rtol=1e-7, atol=1e-9)
    full = model.predict(Xn, fit, diag=False)
    _, cov = sk.predict(Xn, return_cov=True)
    np.testing.assert_allclose(full.cov, cov, rtol=1e-7, atol=1e-9)
    noisy = model.predict(Xn, fit, include_noise=True)
    np.testing.assert_allclose(noisy.var, pred.var + params["sigma"] ** 2, rtol=1e-12)


def test_log_marginal_likelihood_is_of_the_data_as_given():
    """With the default mean (the sample mean), the density is that of y itself, not of a copy."""
    X, y = _data(n=25, seed=4)
    y = 1000.0 + 50.0 * y
    model = GPRegression(X, y, "expquad")
    params = {"ls": 1.0, "eta": 40.0, "sigma": 9.0}
    K = 40.0**2 * np.exp(-0.5 * (X - X.T) ** 2)
    C = K + (81.0 + model.jitter) * np.eye(25)
    expected = stats.multivariate_normal(np.full(25, y.mean()), C).logpdf(y)
    np.testing.assert_allclose(model.log_marginal_likelihood(params), expected, rtol=1e-12)


@pytest.mark.parametrize(("D", "ard"), [(1, False), (2, True)])
def test_ml2_reaches_sklearn_optimum_with_zero_gradient(D, ard):
    X, y = _data(n=50, D=D, seed=11)
    model = GPRegression(X, y, "expquad", ard=ard, mean="zero")
    fit = model.fit_map(n_restarts=5, prior=False, random_seed=0)
    sk_kernel = skk.ConstantKernel(1.0) * skk.RBF([1.0] * D if ard else 1.0) + skk.WhiteKernel(0.1)
    sk = GaussianProcessRegressor(
        sk_kernel, alpha=model.jitter, n_restarts_optimizer=4, random_state=0
    ).fit(X, y)
    assert fit.log_marginal_likelihood >= sk.log_marginal_likelihood_value_ - 1e-3
    assert fit.grad_norm < 1e-3
    assert fit.converged
    assert len(fit.restarts) == 5
    assert fit.restarts[0].objective == pytest.approx(fit.objective)
    assert all(r.objective <= fit.objective + 1e-9 for r in fit.restarts)
    # ML-II: the reported objective is the log marginal likelihood itself
    np.testing.assert_allclose(fit.objective, fit.log_marginal_likelihood, rtol=1e-9)
    assert set(fit.params) == {"ls", "eta", "sigma"}
    assert np.shape(fit.params["ls"]) == ((D,) if ard else ())


def test_map_differs_from_ml2_and_maximises_the_posterior():
    X, y = _data(n=12, seed=5)
    # NumPy floats: PyTensor evaluates a prior with Python-float parameters such as 20.0 in float32
    alpha, beta = np.float64(20.0), np.float64(40.0)
    model = GPRegression(X, y, "matern52", priors={"ls": lambda n: pm.Gamma(n, alpha, beta)})
    ml = model.fit_map(n_restarts=3, prior=False, random_seed=1)
    mp = model.fit_map(n_restarts=3, prior=True, random_seed=1)
    # the strong Gamma(20, 40) prior (mean 0.5) pulls the length-scale towards 0.5
    assert abs(mp.params["ls"] - 0.5) < abs(ml.params["ls"] - 0.5)
    assert mp.log_marginal_likelihood <= ml.log_marginal_likelihood + 1e-9

    # The MAP objective is log p(y|theta) + log p(theta) on the original scale (no Jacobian).
    s_y = model.scale.y_sd

    def log_post(p):
        return (
            model.log_marginal_likelihood(p)
            + stats.gamma(a=20.0, scale=1 / 40.0).logpdf(p["ls"])
            + stats.halfnorm(scale=s_y).logpdf(p["eta"])
            + stats.halfnorm(scale=s_y).logpdf(p["sigma"])
        )

    np.testing.assert_allclose(mp.objective, log_post(mp.params), rtol=1e-9)
    assert mp.objective >= log_post(ml.params) - 1e-9
    assert mp.grad_norm < 1e-3


def test_ard_relevance_is_small_for_irrelevant_inputs():
    rng = np.random.default_rng(2)
    X = rng.uniform(-2, 2, size=(80, 3))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=80)  # only the first input matters
    df = pd.DataFrame(X, columns=["signal", "junk1", "junk2"])
    model = GPRegression(df, y, "expquad", ard=True)
    fit = model.fit_map(n_restarts=3, prior=False, random_seed=0)
    rel = model.relevance(fit)
    assert list(rel.index) == ["signal", "junk1", "junk2"]
    assert rel.loc["signal", "relevance"] > 5 * rel.loc[["junk1", "junk2"], "relevance"].max()


def test_prml_kernel_ard_relevance():
    rng = np.random.default_rng(7)
    X = rng.uniform(-2, 2, size=(60, 2))
    y = np.cos(2 * X[:, 1]) + 0.1 * rng.normal(size=60)
    model = GPRegression(X, y, "prml", ard=True)
    fit = model.fit_map(n_restarts=3, prior=True, random_seed=0)
    rel = model.relevance(fit)
    assert rel["relevance"].iloc[1] > 5 * rel["relevance"].iloc[0]


def test_mean_functions():
    rng = np.random.default_rng(8)
    X = np.linspace(0, 5, 30)
    y = 2.0 * X + 0.05 * rng.normal(size=30)  # mu = 2x (seed 002 §3.3.1)
    lin = GPRegression(X, y, "expquad", mean="linear")
    fit = lin.fit_map(n_restarts=2, prior=True, random_seed=0)
    assert fit.params["slope"] == pytest.approx([2.0], abs=0.1)
    const = GPRegression(X, y, "expquad", mean="constant")
    assert "c" in const.hyperparameters
    zero = GPRegression(X, y, "expquad", mean="zero")
    assert zero.hyperparameters == ["ls", "eta", "sigma"]
    # far from the data the predictive mean reverts to the mean function
    p = lin.predict(np.array([50.0]), fit)
    assert p.mean[0] == pytest.approx(
        fit.params["intercept"] + 50 * fit.params["slope"][0], rel=1e-6
    )


def test_function_draws_have_the_right_shape_and_spread():
    X, y = _data(n=20, seed=1)
    model = GPRegression(X, y, "expquad")
    fit = model.fit_map(n_restarts=1, prior=True, random_seed=0)
    Xn = np.linspace(0, 6, 15)
    post = model.sample_posterior(Xn, fit, n=400, random_seed=1)
    prior = model.sample_prior(Xn, n=5, random_seed=1, params=fit.params)
    assert post.shape == (400, 15) and prior.shape == (5, 15)
    pred = model.predict(Xn, fit)
    np.testing.assert_allclose(post.mean(axis=0), pred.mean, atol=4 * pred.sd.max() / 20)
    np.testing.assert_allclose(post.std(axis=0), pred.sd, rtol=0.15)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"X": [[0.0], [np.nan]], "y": [1.0, 2.0]}, "NaN"),
        ({"X": [[0.0], [1.0]], "y": [1.0, np.inf]}, "NaN or infinite"),
        ({"X": [[0.0], [1.0], [2.0]], "y": [1.0, 2.0]}, "3 rows but `y` has 2"),
        ({"X": [[0.0]], "y": [1.0]}, "at least 2"),
        ({"X": [[0.0], [1.0]], "y": [1.0, 2.0], "kernel": "nope"}, "unknown kernel 'nope'"),
        ({"X": [[0.0], [1.0]], "y": [[1.0, 2.0]]}, "`y` must be 1-D"),
        ({"X": [[0.0], [1.0]], "y": [1.0, 2.0], "noise": -1.0}, "noise"),
        ({"X": [[0.0], [1.0]], "y": [1.0, 2.0], "priors": {"lengthscale": 1}}, "unknown names"),
        ({"X": [["a"], ["b"]], "y": [1.0, 2.0]}, "numeric"),
    ],
)
def test_bad_input_raises_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GPRegression(**kwargs)


def test_bad_prediction_input():
    X, y = _data(n=10, D=2)
    model = GPRegression(X, y, "expquad")
    fit = bayes_gp.inference.MapFit(
        params={"ls": 1.0, "eta": 1.0, "sigma": 0.1}, objective=0, prior=True
    )
    with pytest.raises(ValueError, match="1 column"):
        model.predict(np.zeros((3, 1)), fit)
    with pytest.raises(ValueError, match="missing"):
        model.log_marginal_likelihood({"ls": 1.0})
    with pytest.raises(ValueError, match="NaN"):
        model.predict(np.full((2, 2), np.nan), fit)


def test_prior_overrides_by_callable_or_distribution():
    X, y = _data(n=15, seed=6)
    model = GPRegression(
        X,
        y,
        "ratquad",
        priors={
            "ls": pm.Gamma.dist(np.float64(2.0), np.float64(2.0)),
            "alpha": lambda n: pm.Exponential(n, 1.0),
        },
    )
    assert model.hyperparameters == ["ls", "eta", "alpha", "sigma"]
    assert isinstance(model.model["ls"].owner.op, type(pm.Gamma.dist(1.0, 1.0).owner.op))
    assert isinstance(model.model["alpha"].owner.op, type(pm.Exponential.dist(1.0).owner.op))
    with pytest.raises(TypeError, match="callable"):
        GPRegression(X, y, "expquad", priors={"ls": "3.0"})
    # a number fixes the hyperparameter (bayes_gp.priors): not a random variable any more
    assert GPRegression(X, y, "expquad", priors={"ls": 3.0}).hyperparameters == ["eta", "sigma"]


def test_constant_y_is_refused_with_a_learned_noise():
    """The defect: a constant y ended "converged" at sigma ~ 1e-13. With the noise learned it is
    now refused, saying why; with a known noise the fit is well defined and allowed. The
    heteroscedastic GP and DKL learn their noise, so they refuse it too."""
    from bayes_gp import DeepKernelRegression, HeteroscedasticGPRegression

    x = np.linspace(0, 1, 10)
    y = np.full(10, 3.2)
    template = GPRegression(x, y)  # a template for prior draws is fine; fitting it is not
    assert template.sample_prior(x, 2, random_seed=0).shape == (2, 10)
    with pytest.raises(ValueError, match=r"`y` is constant \(every value is 3.2\).*noise="):
        template.fit_map(n_restarts=1)
    with pytest.raises(ValueError, match=r"`y` is constant"):
        template.sample(draws=10, tune=10, chains=1)
    fit = GPRegression(x, y, noise=0.1).fit_map(n_restarts=1, random_seed=0)
    assert np.isfinite(fit.log_marginal_likelihood)
    with pytest.raises(ValueError, match="`y` is constant"):
        HeteroscedasticGPRegression(x, y)
    with pytest.raises(ValueError, match="deep kernel regression to model"):
        DeepKernelRegression(x, y)


def test_fit_map_with_no_free_hyperparameter():
    """The defect: with every hyperparameter fixed, fit_map crashed ('need at least one array
    to concatenate'). It returns the fit at the given values with its log marginal likelihood,
    as scikit-learn does with optimizer=None (same kernel, noise and jitter on the diagonal)."""
    import pymc as pm
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF

    rng = np.random.default_rng(0)
    X = np.linspace(0, 5, 20)
    y = np.sin(X) + 0.1 * rng.standard_normal(20)
    gp = GPRegression(X, y, kernel=lambda D: pm.gp.cov.ExpQuad(D, ls=1.0), mean="zero", noise=0.1)
    assert gp.hyperparameters == []
    for prior in (False, True):
        fit = gp.fit_map(n_restarts=3, prior=prior)
        assert fit.params == {} and fit.converged and fit.grad_norm == 0.0
        assert len(fit.restarts) == 1 and "no free hyperparameter" in fit.restarts[0].message
        sk = GaussianProcessRegressor(RBF(1.0), alpha=0.1**2 + gp.jitter, optimizer=None).fit(
            X[:, None], y
        )
        assert fit.log_marginal_likelihood == pytest.approx(sk.log_marginal_likelihood_value_, rel=1e-10)
        assert fit.objective == pytest.approx(fit.log_marginal_likelihood, rel=1e-10)
    pred = gp.predict(np.array([2.5]), fit)
    np.testing.assert_allclose(pred.mean, sk.predict(np.array([[2.5]])), rtol=1e-9)


def test_log_marginal_likelihood_with_gradient_matches_scikit_learn():
    """A public log marginal likelihood and its gradient at given hyperparameters, as
    scikit-learn's log_marginal_likelihood(theta, eval_gradient=True): the same value, and the
    same gradient after the chain rule from scikit-learn's log-parameters (C = eta^2,
    noise_level = sigma^2 + jitter); also against central differences, with a fixed ls."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as Const

    rng = np.random.default_rng(0)
    X = np.sort(rng.uniform(0, 5, 25))
    y = np.sin(X) + 0.1 * rng.standard_normal(25)
    gp = GPRegression(X, y, "expquad", mean="zero")
    p = {"ls": 0.8, "eta": 1.3, "sigma": 0.2}
    value, grad = gp.log_marginal_likelihood(p, eval_gradient=True)
    assert value == pytest.approx(gp.log_marginal_likelihood(p), rel=1e-12)
    k = Const(1.3**2) * RBF(0.8) + WhiteKernel(0.2**2 + gp.jitter)
    sk = GaussianProcessRegressor(k, optimizer=None, alpha=0.0).fit(X[:, None], y)
    sk_value, sk_grad = sk.log_marginal_likelihood(k.theta, eval_gradient=True)
    assert value == pytest.approx(sk_value, rel=1e-10)
    ours = [grad["eta"] * 1.3 / 2, grad["ls"] * 0.8, grad["sigma"] * 0.2 / 2]
    np.testing.assert_allclose(ours, sk_grad, rtol=1e-8)
    fixed = GPRegression(X, y, "expquad", mean="zero", priors={"ls": 0.8})
    value, grad = fixed.log_marginal_likelihood({"eta": 1.3, "sigma": 0.2}, eval_gradient=True)
    assert set(grad) == {"eta", "sigma"}
    for name, at in (("eta", 1.3), ("sigma", 0.2)):
        h = 1e-6
        up = fixed.log_marginal_likelihood({"eta": 1.3, "sigma": 0.2, name: at + h})
        down = fixed.log_marginal_likelihood({"eta": 1.3, "sigma": 0.2, name: at - h})
        assert grad[name] == pytest.approx((up - down) / (2 * h), rel=1e-6)


def test_duplicate_input_and_inputs_1e15_apart_predict_the_same():
    """scikit-learn's test_duplicate_input, ported: two observations at the same input, or at
    inputs 1e-15 apart, give the same predictions to 7 decimals (kernel C * RBF + C, noise sd
    0.1). The defect: the two type-II fits stopped at different points and their predictive
    sds differed by 3e-6; a final Newton step in the stiff directions now takes both to the
    optimum."""
    import pymc as pm

    X = np.atleast_2d([1.0, 3.0, 5.0, 6.0, 7.0, 8.0]).T
    y = (X * np.sin(X)).ravel()

    def kernel(D):
        eta, ls, c = pm.HalfNormal("eta", 5.0), pm.LogNormal("ls", 0.0, 1.0), pm.HalfNormal("c", 5.0)
        return eta**2 * pm.gp.cov.ExpQuad(D, ls=ls) + pm.gp.cov.Constant(c**2)

    X_test = np.linspace(0, 10, 100)[:, None]
    preds = []
    for X_ in (np.vstack((X, X[0])), np.vstack((X, X[0] + 1e-15))):
        gp = GPRegression(X_, np.hstack((y, y[0] + 1)), kernel=kernel, mean="zero", noise=0.1)
        preds.append(gp.predict(X_test, gp.fit_map(n_restarts=3, prior=False, random_seed=0)))
    np.testing.assert_almost_equal(preds[0].mean, preds[1].mean, decimal=7)
    np.testing.assert_almost_equal(preds[0].sd, preds[1].sd, decimal=7)


def test_prediction_columns_give_the_noisy_interval_of_y():
    """The defect: ``prediction_columns`` passed ``True`` positionally, which is ``diag``, not
    ``include_noise``, so ``sd_y`` and the 94% interval (and the workflow's held-out log density
    and coverage) were those of f*, without the noise."""
    from bayes_gp.inference import MapFit

    rng = np.random.default_rng(0)
    x = np.linspace(0, 5, 20)
    gp = GPRegression(x, np.sin(x) + 0.3 * rng.standard_normal(20))
    fit = MapFit({"ls": 1.0, "eta": 1.0, "sigma": 0.3}, 0.0, False)
    cols = gp.prediction_columns(np.array([[1.0], [2.0], [7.0]]), fit)
    np.testing.assert_allclose(cols["sd_y"] ** 2, cols["sd_f"] ** 2 + 0.3**2, rtol=1e-10)
    half = 1.880793608151251 * cols["sd_y"]
    np.testing.assert_allclose(cols["upper_94"] - cols["mean"], half, rtol=1e-10)
