"""``kernel=`` takes a kernel object (numbers fixed, unnamed priors its hyperparameters) or a
callable in every model, and means the same kernel as the catalogue expression or the
hand-written callable (regression.catalogue.kernel_spec)."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

from bayes_gp import (
    DeepKernelRegression,
    GPClassifier,
    GPRegression,
    HeteroscedasticGPRegression,
    LatentGP,
)
from bayes_gp.kernels import ExpQuad, Matern, Matern52, Periodic

rng = np.random.default_rng(3)
X = np.linspace(0.0, 8.0, 25)
Y = np.sin(X) + 0.2 * rng.standard_normal(X.size)
COUNTS = rng.poisson(np.exp(1.0 + 0.5 * np.sin(X)))
P = {"ls": 1.3, "eta": 0.8, "sigma": 0.25}


def _object_kernel():
    return pm.HalfNormal.dist(1.0) ** 2 * Matern52(1, ls=pm.Gamma.dist(2.0, 1.0))


def _point_logp(model, values):
    """The model's log density at natural-scale values of its free variables."""
    point = model.initial_point()
    for rv in model.free_RVs:
        value = model.rvs_to_values[rv]
        transform = model.rvs_to_transforms.get(rv)
        v = np.asarray(values[rv.name], float)
        point[value.name] = transform.forward(v, *rv.owner.inputs).eval() if transform else v
    return float(model.compile_logp()(point))


def test_regression_object_equals_the_catalogue_and_the_callable():
    obj = GPRegression(X, Y, _object_kernel())
    cat = GPRegression(X, Y, "matern52")
    assert sorted(obj.hyperparameters) == sorted(cat.hyperparameters) == ["eta", "ls", "sigma"]
    # the likelihood does not depend on the priors: equal to rounding
    for p in (P, {"ls": 0.4, "eta": 2.0, "sigma": 0.05}):
        a, ga = obj.log_marginal_likelihood(p, eval_gradient=True)
        b, gb = cat.log_marginal_likelihood(p, eval_gradient=True)
        assert a == pytest.approx(b, rel=1e-12)
        for name in P:
            assert float(ga[name]) == pytest.approx(float(gb[name]), rel=1e-9)

    # the priors are the kernel's: the whole log density equals the callable that declares
    # the same priors by hand in the model
    def by_hand(D):
        eta = pm.HalfNormal("eta", 1.0)
        return eta**2 * Matern52(D, ls=pm.Gamma("ls", 2.0, 1.0))

    hand = GPRegression(X, Y, by_hand, priors={"sigma": pm.HalfNormal.dist(0.5)})
    obj2 = GPRegression(X, Y, _object_kernel(), priors={"sigma": pm.HalfNormal.dist(0.5)})
    assert _point_logp(obj2.model, P) == pytest.approx(_point_logp(hand.model, P), rel=1e-12)
    # and MAP fits (with the priors) agree
    fo = obj2.fit_map(n_restarts=2, random_seed=0)
    fh = hand.fit_map(n_restarts=2, random_seed=0)
    assert fo.objective == pytest.approx(fh.objective, abs=1e-6)


def test_one_kernel_object_builds_many_models_and_stays_the_users():
    ls = pm.Gamma.dist(2.0, 1.0)
    k = Matern(1, nu=1.5, ls=ls) * Periodic(1, period=6.0, ls=1.0)
    a, b = GPRegression(X, Y, k), GPRegression(X, Y, k)
    assert a.hyperparameters == b.hyperparameters == ["ls", "sigma"]
    assert a.model["ls"] is not b.model["ls"] and ls.name is None
    assert a.log_marginal_likelihood({"ls": 2.0, "sigma": 0.3}) == pytest.approx(
        b.log_marginal_likelihood({"ls": 2.0, "sigma": 0.3}), rel=1e-14
    )


def test_priors_override_the_kernels_own_and_numbers_fix():
    k = _object_kernel()
    fixed = GPRegression(X, Y, k, priors={"ls": 1.3})
    assert fixed.hyperparameters == ["eta", "sigma"]
    other = GPRegression(X, Y, k, priors={"ls": pm.LogNormal.dist(0.0, 0.1)})
    assert other.model["ls"].owner.op.name == "lognormal"
    with pytest.raises(ValueError, match=r"unknown names \['period'\]"):
        GPRegression(X, Y, k, priors={"period": 2.0})


def test_refusals_name_the_problem():
    with pytest.raises(ValueError, match="`ard=True` applies to catalogue kernels"):
        GPRegression(X, Y, _object_kernel(), ard=True)
    with pytest.raises(ValueError, match="input_dim=2 but the model's inputs have 1"):
        GPRegression(X, Y, ExpQuad(2, ls=1.0))
    with pytest.raises(TypeError, match="must return a PyMC covariance function"):
        GPRegression(X, Y, lambda D: 3.0)
    with pytest.raises(TypeError, match="kernel object"):
        GPRegression(X, Y, 3.0)


def test_hsgp_reads_the_substituted_kernel():
    """The Hilbert-space approximation takes its spectral density and its default basis (from
    the smoothness and the length-scale prior) from the kernel object as from the catalogue
    kernel with the same priors."""
    obj = GPRegression(X, Y, _object_kernel(), approx="hsgp")
    same = {"ls": pm.Gamma.dist(2.0, 1.0), "eta": pm.HalfNormal.dist(1.0)}
    cat = GPRegression(X, Y, "matern52", priors=same, approx="hsgp")
    assert obj.approximation.m == cat.approximation.m
    assert obj.log_marginal_likelihood(P) == pytest.approx(cat.log_marginal_likelihood(P), rel=1e-12)
    other = GPRegression(X, Y, "matern52", approx="hsgp")  # the catalogue's ls prior: other basis
    assert other.log_marginal_likelihood(P) != pytest.approx(obj.log_marginal_likelihood(P), rel=1e-6)


def test_latent_and_classifier_take_kernel_objects():
    lat = LatentGP(X, COUNTS, _object_kernel(), "poisson")
    cat = LatentGP(X, COUNTS, "matern52", "poisson")
    p = {"ls": 1.3, "eta": 0.8, "c": 1.0}
    assert lat.log_marginal_likelihood(p) == pytest.approx(cat.log_marginal_likelihood(p), rel=1e-10)
    t = (Y > 0).astype(int)
    clf = GPClassifier(X, t, _object_kernel(), link="probit")
    ref = GPClassifier(X, t, "matern52", link="probit")
    q = {"ls": 1.3, "eta": 1.5}
    for method in ("laplace", "ep"):
        assert clf.log_marginal_likelihood(q, method=method) == pytest.approx(
            ref.log_marginal_likelihood(q, method=method), rel=1e-10
        )
    np.testing.assert_allclose(
        clf.predict_proba(X[:5], clf.fit_laplace(params=q)),
        ref.predict_proba(X[:5], ref.fit_laplace(params=q)),
        rtol=1e-10,
    )


def test_heteroscedastic_and_dkl_take_kernel_objects():
    het = HeteroscedasticGPRegression(X, Y, _object_kernel(), noise_kernel=ExpQuad(1, ls=3.0))
    assert het.hyperparameters == ["ls", "eta", "noise_mean"]
    het2 = HeteroscedasticGPRegression(
        X, Y, "matern52", noise_kernel=ExpQuad(1, ls=pm.Gamma.dist(3.0, 1.0))
    )
    assert het2.hyperparameters == ["ls", "eta", "noise_ls", "noise_mean"]
    Xd = np.c_[X, X**2 / 8.0]
    dkl = DeepKernelRegression(Xd, Y, hidden=(4,), features=2, kernel=ExpQuad(2, ls=1.0))
    assert dkl.hyper_names == ["sigma"]
    fit = dkl.fit_map(n_restarts=1, random_seed=0, maxiter=50)
    assert np.isfinite(fit.loss)
    with pytest.raises(ValueError, match="prior on positive values"):
        DeepKernelRegression(Xd, Y, hidden=(4,), features=2, kernel=ExpQuad(2, ls=pm.Normal.dist()))
