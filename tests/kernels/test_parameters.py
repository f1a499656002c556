"""Kernel objects with unnamed priors: their hyperparameters by name, and the substituted kernel
through which a model evaluates them (bayes_gp.kernels.parameters, kernels.base.Substituted)."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

from bayes_gp.kernels import ExpQuad, Gibbs, Matern, Matern52, Periodic
from bayes_gp.kernels.base import Substituted, factors, smoothness
from bayes_gp.kernels.parameters import describe_kernel, kernel_parameters

X = np.linspace(0.0, 3.0, 7)[:, None]


def _gram(kernel, X=X):
    return pytensor.function([], kernel(pt.as_tensor_variable(X)))()


def test_names_follow_the_attributes():
    ls, period, eta = pm.Gamma.dist(2, 1), pm.Normal.dist(5, 0.1), pm.HalfNormal.dist(1)
    k = eta**2 * Matern(1, nu=1.5, ls=ls) * Periodic(1, period=period, ls=1.0)
    found = kernel_parameters(k)
    assert found == {"ls": ls, "eta": eta, "period": period}
    assert describe_kernel(k) == "Matern * c * Periodic"


def test_colliding_names_get_the_kernel_class_then_a_number():
    a, b, c = pm.Gamma.dist(2, 1), pm.Gamma.dist(3, 1), pm.Gamma.dist(4, 1)
    k = Matern52(1, ls=a) + Periodic(1, period=2.0, ls=b)
    assert kernel_parameters(k) == {"matern52_ls": a, "periodic_ls": b}
    k2 = ExpQuad(1, ls=a) + ExpQuad(1, ls=b) * ExpQuad(1, ls=c)
    assert kernel_parameters(k2) == {"expquad_ls1": a, "expquad_ls2": b, "expquad_ls3": c}
    assert describe_kernel(k2) == "ExpQuad + ExpQuad * ExpQuad"


def test_a_prior_reached_only_through_a_function_is_theta():
    s = pm.LogNormal.dist(0.0, 0.5)
    k = Gibbs(1, lengthscale_func=lambda x: s * pt.exp(0.1 * x[:, 0]))
    assert kernel_parameters(k) == {"theta": s}


def test_numbers_are_no_parameters_and_a_named_variable_is_refused():
    assert kernel_parameters(Matern52(1, ls=2.0) * Periodic(1, period=3.0, ls=1.0)) == {}
    with pm.Model():
        ls = pm.Gamma("ls", 2, 1)
    with pytest.raises(TypeError, match="random variable 'ls' of a PyMC model"):
        kernel_parameters(ExpQuad(1, ls=ls))
    with pytest.raises(TypeError, match="covariance function"):
        kernel_parameters("expquad")


def test_substituted_kernel_equals_the_kernel_built_with_the_values():
    ls, eta = pm.Gamma.dist(2, 1), pm.HalfNormal.dist(1)
    k = eta**2 * Matern52(1, ls=ls)
    sub = Substituted(k, {ls: pt.constant(0.7), eta: pt.constant(1.3)})
    ref = 1.3**2 * Matern52(1, ls=0.7)
    np.testing.assert_allclose(_gram(sub), _gram(ref), rtol=1e-14, atol=0)
    Xs = np.array([[0.25], [5.0]])
    got = pytensor.function([], sub(X, Xs))()
    np.testing.assert_allclose(got, pytensor.function([], ref(X, Xs))(), rtol=1e-14)
    d = pytensor.function([], sub(X, diag=True))()
    np.testing.assert_allclose(d, np.full(7, 1.3**2), rtol=1e-14)
    w = pt.as_tensor_variable(np.array([[0.5]]))
    np.testing.assert_allclose(
        sub.power_spectral_density(w).eval(), ref.power_spectral_density(w).eval(), rtol=1e-14
    )
    # the user's kernel object is untouched: its prior is still there, unnamed
    assert ls.name is None and kernel_parameters(k) == {"ls": ls, "eta": eta}


def test_factors_smoothness_and_attributes_see_through_the_substitution():
    ls = pm.Gamma.dist(2, 1)
    k = Matern52(1, ls=ls) + ExpQuad(1, ls=2.0)
    sub = Substituted(k, {ls: pt.constant(0.4)})
    leaves = list(factors(sub))
    assert [smoothness(f) for f in leaves] == [2.5, np.inf]
    assert float(leaves[0].ls.eval()) == pytest.approx(0.4)
    assert float(leaves[1].ls.eval()) == pytest.approx(2.0)


def test_substitution_keeps_the_active_dimensions():
    ls = pm.Gamma.dist(2, 1)
    k = Matern52(2, ls=ls, active_dims=[1])
    sub = Substituted(k, {ls: pt.constant(0.5)})
    assert sub.active_dims.tolist() == [1]
    X2 = np.c_[np.linspace(0, 1, 5), np.linspace(0, 3, 5)]
    np.testing.assert_allclose(
        _gram(sub, X2), _gram(Matern52(2, ls=0.5, active_dims=[1]), X2), rtol=1e-14
    )
