"""BayesianLinearRegression: the weight-space view equals the function-space view (seed 004).

The reference for the function-space view is :class:`bayes_gp.GPRegression` with the
``BasisFunction`` kernel :math:`k(x, x') = \\phi(x)^\\top\\Sigma_p\\phi(x')` (seed 004 eq. 11); the
reference for the weight-space posterior is seed 004 eq. (1) transcribed with explicit inverses.
"""

from __future__ import annotations

import arviz as az
import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import stats

import bayes_gp
from bayes_gp import BayesianLinearRegression, GPRegression
from bayes_gp.inference import MapFit
from bayes_gp.kernels import BasisFunction
from bayes_gp.linalg import EAGER_MODE
from bayes_gp.weight_space import CROSSOVER_N_OVER_M, choose_method

CENTRES = np.linspace(-3.0, 3.0, 12)  # M = 12 Gaussian basis functions
WIDTH = 0.7
SIGMA = 0.3


def phi(X):
    """Gaussian bumps plus a constant; NumPy in, NumPy out; PyTensor in, PyTensor out."""
    lib = np if isinstance(X, np.ndarray) else pt
    bumps = lib.exp(-0.5 * (X - CENTRES[None, :]) ** 2 / WIDTH**2)
    return lib.concatenate([lib.ones_like(X[:, :1]), bumps], axis=1)


M = CENTRES.size + 1


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 1))
    y = np.sin(1.3 * X[:, 0]) + 0.5 + SIGMA * rng.standard_normal(n)
    return X, y


def _sigma_p(kind, seed=1):
    rng = np.random.default_rng(seed)
    if kind == "scalar":
        return 1.7
    if kind == "diag":
        return rng.uniform(0.3, 2.0, M)
    B = rng.standard_normal((M, M))
    return B @ B.T / M + 0.1 * np.eye(M)


def _gp(X, y, Sigma_p):
    """The function-space model: a GP with the basis-function kernel, zero mean, fixed noise."""
    return GPRegression(
        X, y, kernel=lambda D: BasisFunction(D, phi, Sigma_p=Sigma_p),
        mean="zero", noise=SIGMA, jitter=0.0,
    )  # fmt: skip


NO_HYPER = MapFit(params={}, objective=0.0, prior=False)
X_NEW = np.linspace(-4.0, 4.0, 17)[:, None]


@pytest.mark.parametrize("n", [5, 40], ids=["N<M", "N>M"])
@pytest.mark.parametrize("kind", ["scalar", "diag", "full"])
@pytest.mark.parametrize("method", ["weight", "function"])
def test_predictive_equals_gp_with_basis_function_kernel(n, kind, method):
    X, y = _data(n)
    S = _sigma_p(kind)
    blr = BayesianLinearRegression(X, y, phi, Sigma_p=S, sigma=SIGMA, method=method)
    gp = _gp(X, y, S)
    for noise in (False, True):
        ours = blr.predict(X_NEW, include_noise=noise)
        ref = gp.predict(X_NEW, NO_HYPER, include_noise=noise)
        np.testing.assert_allclose(ours.mean, ref.mean, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(ours.var, ref.var, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(
        blr.log_marginal_likelihood(), gp.log_marginal_likelihood({}), rtol=1e-12
    )


@pytest.mark.parametrize("n", [5, 40], ids=["N<M", "N>M"])
def test_weight_posterior_matches_seed_004_eq1(n):
    """mu_w = sigma^-2 A^-1 Phi^T y, Sigma_w = A^-1, A = sigma^-2 Phi^T Phi + Sigma_p^-1."""
    X, y = _data(n)
    S = _sigma_p("full")
    Phi = phi(X)
    A = Phi.T @ Phi / SIGMA**2 + np.linalg.inv(S)
    cov_ref = np.linalg.inv(A)
    mean_ref = cov_ref @ Phi.T @ y / SIGMA**2
    blr = BayesianLinearRegression(X, y, phi, Sigma_p=S, sigma=SIGMA)
    for method in ("weight", "function"):
        post = blr.posterior(method=method)
        assert post.method == method
        np.testing.assert_allclose(post.mean, mean_ref, rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(post.cov, cov_ref, rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(post.precision, A, rtol=1e-8, atol=1e-8)
    # the predictive of seed 004 eq. (4) from this posterior
    Pn = phi(X_NEW)
    pred = blr.predict(X_NEW)
    np.testing.assert_allclose(pred.mean, Pn @ mean_ref, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(pred.var, np.einsum("ij,jk,ik->i", Pn, cov_ref, Pn), rtol=1e-8)


def test_log_marginal_likelihood_is_a_gaussian_density():
    X, y = _data(25)
    S = _sigma_p("diag")
    Phi = phi(X)
    C = Phi @ np.diag(S) @ Phi.T + SIGMA**2 * np.eye(25)
    ref = stats.multivariate_normal(np.zeros(25), C).logpdf(y)
    blr = BayesianLinearRegression(X, y, phi, Sigma_p=S, sigma=SIGMA)
    for method in ("weight", "function"):
        np.testing.assert_allclose(blr.log_marginal_likelihood(method=method), ref, rtol=1e-11)
    # params: prior N(0, s^2 Sigma_p) and another noise level
    C2 = 4.0 * Phi @ np.diag(S) @ Phi.T + 0.5**2 * np.eye(25)
    ref2 = stats.multivariate_normal(np.zeros(25), C2).logpdf(y)
    for method in ("weight", "function"):
        got = blr.log_marginal_likelihood({"scale": 2.0, "sigma": 0.5}, method=method)
        np.testing.assert_allclose(got, ref2, rtol=1e-11)


def test_singular_prior_covariance():
    """A rank-deficient Sigma_p (weights confined to a subspace): both forms still agree."""
    X, y = _data(30)
    rng = np.random.default_rng(3)
    B = rng.standard_normal((M, 4))
    S = B @ B.T  # rank 4
    blr = BayesianLinearRegression(X, y, phi, Sigma_p=S, sigma=SIGMA)
    pw = blr.predict(X_NEW, method="weight")
    pf = blr.predict(X_NEW, method="function")
    np.testing.assert_allclose(pw.mean, pf.mean, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(pw.var, pf.var, rtol=1e-8, atol=1e-12)
    # the posterior mean lies in the column space of Sigma_p
    w = blr.posterior(method="weight").mean
    resid = w - B @ np.linalg.lstsq(B, w, rcond=None)[0]
    assert np.max(np.abs(resid)) < 1e-10 * np.max(np.abs(w))


def test_plain_linear_regression_without_basis():
    """basis=None: the inputs are the features (seed 004 §1, f(x) = x^T w)."""
    rng = np.random.default_rng(4)
    X = rng.standard_normal((20, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.standard_normal(20)
    blr = BayesianLinearRegression(X, y, Sigma_p=10.0, sigma=0.1)
    A = X.T @ X / 0.01 + np.eye(3) / 10.0
    np.testing.assert_allclose(blr.posterior().mean, np.linalg.solve(A, X.T @ y / 0.01), rtol=1e-12)
    assert blr.n_features == 3


def test_auto_picks_the_cheaper_form():
    assert choose_method(10, 100) == "function"
    assert choose_method(1000, 100) == "weight"
    for n in (5, 40):
        X, y = _data(n)
        blr = BayesianLinearRegression(X, y, phi, sigma=SIGMA)
        expected = "function" if n < CROSSOVER_N_OVER_M * M else "weight"
        assert blr.resolved_method() == expected
        assert blr.posterior().method == expected


def test_pymc_model_log_density():
    """The PyMC model is y ~ N(Phi w, sigma^2), w = s L_p v, v ~ N(0, I), s ~ LogNormal(0, 1)."""
    X, y = _data(15)
    S = _sigma_p("full")
    blr = BayesianLinearRegression(X, y, phi, Sigma_p=S)
    model = blr.model
    assert sorted(rv.name for rv in model.free_RVs) == ["scale", "sigma", "v"]
    assert "w" in model.named_vars
    rng = np.random.default_rng(5)
    v = rng.standard_normal(M)
    s, sig = 1.3, 0.4
    point = {"scale_log__": np.log(s), "sigma_log__": np.log(sig), "v": v}
    logp = pytensor.function(
        model.value_vars, model.logp(jacobian=False), mode=EAGER_MODE, on_unused_input="ignore"
    )
    got = logp(*[point[v_.name] for v_ in model.value_vars])
    w = s * np.linalg.cholesky(S) @ v
    ref = (
        stats.lognorm(1.0).logpdf(s)
        + stats.halfnorm(scale=y.std()).logpdf(sig)
        + stats.norm.logpdf(v).sum()
        + stats.norm(phi(X) @ w, sig).logpdf(y).sum()
    )
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    w_fn = pytensor.function(
        model.value_vars, model.replace_rvs_by_values([model["w"]])[0], mode=EAGER_MODE,
        on_unused_input="ignore",
    )  # fmt: skip
    np.testing.assert_allclose(w_fn(*[point[v_.name] for v_ in model.value_vars]), w, rtol=1e-12)


def test_fixed_hyperparameters_in_the_model():
    X, y = _data(15)
    blr = BayesianLinearRegression(X, y, phi, sigma=SIGMA, scale_prior=2.0)
    assert [rv.name for rv in blr.model.free_RVs] == ["v"]
    # the closed form uses the fixed scale: prior N(0, 4 Sigma_p)
    np.testing.assert_allclose(
        blr.log_marginal_likelihood(),
        BayesianLinearRegression(X, y, phi, Sigma_p=4.0, sigma=SIGMA).log_marginal_likelihood(),
        rtol=1e-12,
    )


def test_exported():
    assert bayes_gp.BayesianLinearRegression is BayesianLinearRegression
    assert "BayesianLinearRegression" in bayes_gp.__all__


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"Sigma_p": -1.0}, "non-negative"),
        ({"Sigma_p": np.ones(5)}, "5 entries for 13"),
        ({"Sigma_p": np.ones((3, 3))}, r"shape \(3, 3\), expected \(13, 13\)"),
        ({"Sigma_p": np.triu(np.ones((M, M)))}, "symmetric"),
        ({"Sigma_p": -np.eye(M)}, "positive semi-definite"),
        ({"sigma": 0.0}, "`sigma` must be a positive"),
        ({"method": "dual"}, "`method` must be"),
        ({"basis": 3}, "`basis` must be a callable"),
        ({"scale_prior": -1.0}, "`scale_prior`"),
        ({"sigma_prior": 2.0}, "`sigma_prior`"),
    ],
)
def test_bad_arguments(kwargs, match):
    X, y = _data(10)
    kw = {"basis": phi, "sigma": SIGMA, **kwargs}
    with pytest.raises(ValueError, match=match):
        BayesianLinearRegression(X, y, **kw)


def test_bad_data_and_calls():
    X, y = _data(10)
    with pytest.raises(ValueError, match="rows but `y` has"):
        BayesianLinearRegression(X, y[:5], phi, sigma=SIGMA)
    with pytest.raises(ValueError, match="NaN"):
        BayesianLinearRegression(X, np.where(np.arange(10) == 3, np.nan, y), phi, sigma=SIGMA)
    with pytest.raises(ValueError, match=r"must return an \(n, M\)"):
        BayesianLinearRegression(X, y, lambda Z: np.ones(len(Z)), sigma=SIGMA)
    blr = BayesianLinearRegression(X, y, phi)
    with pytest.raises(ValueError, match="no noise level"):
        blr.predict(X_NEW)
    with pytest.raises(ValueError, match="unknown names"):
        blr.predict(X_NEW, {"sigma": 0.1, "ls": 1.0})
    with pytest.raises(ValueError, match="must be positive"):
        blr.log_marginal_likelihood({"sigma": -0.1})
    with pytest.raises(ValueError, match="column"):
        blr.predict(np.ones((3, 2)), {"sigma": 0.1})
    with pytest.raises(ValueError, match="`method` must be"):
        blr.posterior({"sigma": 0.1}, method="auto")


@pytest.mark.slow
def test_nuts_weights_match_the_closed_form_posterior():
    """With s and sigma fixed, NUTS on the weights must reproduce N(mu_w, A^-1) (seed 004 eq. 1);
    with both learned, the predictive averages the closed form over their posterior."""
    X, y = _data(40)
    blr = BayesianLinearRegression(X, y, phi, sigma=SIGMA, scale_prior=1.0)
    idata = blr.sample(draws=500, tune=500, chains=2, sampler="pymc", random_seed=1)
    w = np.asarray(idata["posterior"]["w"]).reshape(-1, M)
    post = blr.posterior()
    sd = np.sqrt(np.diag(post.cov))
    # posterior means within 4 Monte-Carlo standard errors (ESS >= 300 assumed, checked below)
    ess = _ess(idata, "w")
    assert ess.min() > 300, ess
    np.testing.assert_array_less(np.abs(w.mean(axis=0) - post.mean), 4 * sd / np.sqrt(ess))
    np.testing.assert_allclose(w.std(axis=0), sd, rtol=0.15)
    assert "y" in idata["log_likelihood"]

    learn = BayesianLinearRegression(X, y, phi)
    idata2 = learn.sample(draws=400, tune=400, chains=2, sampler="pymc", random_seed=2)
    sig = np.asarray(idata2["posterior"]["sigma"]).ravel()
    lo, hi = np.quantile(sig, [0.005, 0.995])
    assert lo < SIGMA < hi, (lo, hi)
    mix = learn.predict(X_NEW, idata2)
    assert mix.extra["n_draws"] == 400
    # the truth lies within 3 predictive sd where there are data
    inside = np.abs(X_NEW[:, 0]) <= 3.0
    f_true = np.sin(1.3 * X_NEW[inside, 0]) + 0.5
    np.testing.assert_array_less(np.abs(mix.mean[inside] - f_true), 3 * mix.sd[inside])
    # and the mixture is close to the plug-in at the posterior medians of (s, sigma)
    med = {k: float(np.median(np.asarray(idata2["posterior"][k]))) for k in ("scale", "sigma")}
    plug = learn.predict(X_NEW, med)
    assert np.max(np.abs(mix.mean - plug.mean)) < 0.1 * np.ptp(plug.mean)


def _ess(idata, name):
    return np.asarray(az.ess(idata, var_names=[name])[name]).ravel()
