"""The prior forms of bayes_gp.priors, the same in every model class."""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest

from bayes_gp import GPClassifier, GPRegression, HeteroscedasticGPRegression
from bayes_gp.priors import resolve_prior

X = np.linspace(0, 10, 30)
Y = np.sin(X) + 0.1 * np.random.default_rng(0).standard_normal(30)
T = np.sin(X) > 0
MODELS = {
    "GPRegression": lambda priors: GPRegression(X, Y, priors=priors),
    "GPClassifier": lambda priors: GPClassifier(X, T, priors=priors),
    "HeteroscedasticGPRegression": lambda priors: HeteroscedasticGPRegression(X, Y, priors=priors),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_form_in_every_model(name):
    """The defect: GPClassifier took callables only (pm.LogNormal.dist gave a TypeError)."""
    make = MODELS[name]
    as_dist = make({"ls": pm.LogNormal.dist(0.0, 1.0)})
    as_callable = make({"ls": lambda n: pm.LogNormal(n, 0.0, 1.0)})
    for m in (as_dist, as_callable):
        rv = m.model["ls"]
        assert "ls" in m.hyperparameters
        assert m.model.logp(vars=[rv]).eval({m.model.rvs_to_values[rv]: 0.0}) == pytest.approx(
            -0.5 * np.log(2 * np.pi)  # LogNormal(0, 1) at ls = 1, on the log scale
        )
    fixed = make({"ls": 1.7})
    assert "ls" not in fixed.hyperparameters and "ls" not in fixed.model.named_vars


@pytest.mark.parametrize("name", sorted(MODELS))
def test_one_priors_dict_builds_many_models(name):
    """The defect: registering the user's ``pm.X.dist`` named it in place, so the same
    ``priors`` could build one model only (a second model, or the jitter pre-flight's rebuild,
    raised "got the variable ls")."""
    priors = {"ls": pm.Gamma.dist(2.0, 1.0)}
    first, second = MODELS[name](priors), MODELS[name](priors)
    first.set_jitter(1e-3)  # sets the shared jitter: the model is not rebuilt
    assert priors["ls"].name is None
    for m in (first, second):
        value = m.model.rvs_to_values[m.model["ls"]]
        assert m.model.logp(vars=[m.model["ls"]]).eval({value: 0.0}) == pytest.approx(
            float(pm.logp(pm.Gamma.dist(2.0, 1.0), 1.0).eval())  # Gamma(2, 1) at ls = 1
        )


def test_fixed_values_are_fixed_in_the_fit():
    gp = GPRegression(X, Y, priors={"ls": 1.2})
    fit = gp.fit_map(n_restarts=2, prior=False, random_seed=0)
    assert set(fit.params) == {"eta", "sigma"}
    at = gp.log_marginal_likelihood(fit.params)
    assert at == pytest.approx(fit.log_marginal_likelihood)
    free = GPRegression(X, Y)
    assert free.log_marginal_likelihood({**fit.params, "ls": 1.2}) == pytest.approx(at, rel=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfit = GPClassifier(X, T, priors={"eta": 1.0}).fit_laplace(n_restarts=2, random_seed=0)
    assert set(cfit.params) == {"ls"}


def test_all_fixed_classifier_is_the_approximation_at_those_values():
    from sklearn.gaussian_process import GaussianProcessClassifier
    from sklearn.gaussian_process.kernels import RBF

    fit = GPClassifier(X, T, priors={"eta": 1.0, "ls": 1.5}).fit_laplace()
    sk = GaussianProcessClassifier(RBF(1.5), optimizer=None).fit(X[:, None], T)
    assert fit.params == {} and fit.converged
    # bayes_gp adds a latent jitter of 1e-6 to K; scikit-learn none
    assert fit.log_marginal_likelihood == pytest.approx(sk.log_marginal_likelihood_value_, abs=1e-5)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (-1.0, "a fixed ls must be positive"),
        (np.nan, "must be finite"),
        ("wide", "must be a callable f\\(name\\), an unnamed pm.X.dist"),
        (np.ones((2, 2)), "a fixed value must be a number"),
    ],
)
def test_bad_prior_values_are_refused(value, message):
    with pytest.raises((ValueError, TypeError), match=message):
        GPRegression(X, Y, priors={"ls": value})


def test_a_named_model_variable_is_refused():
    with pm.Model():
        named = pm.LogNormal("other", 0.0, 1.0)
    with pm.Model(), pytest.raises(TypeError, match=r"unnamed pm\.X\.dist"):
        resolve_prior({"ls": named}, "ls", lambda n: None)


def test_an_ard_distribution_prior_has_the_feature_dimension_only():
    """The defect: an ARD hyperparameter with a pm.X.dist prior was registered with
    dims="feature", which PyMC 6 reads as the one-letter dimensions f, e, a, t, u, r: the model
    gained six bogus coordinates and nutpie's sampling raised IndexError."""
    X2 = np.c_[X, np.cos(X)]
    m = GPRegression(X2, Y, ard=True, priors={"ls": pm.LogNormal.dist(0.0, 1.0, shape=2)})
    assert set(m.model.coords) == {"feature", "obs"}
    assert m.model.named_vars_to_dims["ls"] == ("feature",)
    prior = pm.sample_prior_predictive(draws=3, model=m.model, random_seed=0)
    assert prior["prior"]["ls"].dims == ("chain", "draw", "feature")
