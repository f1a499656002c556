"""Long version of tests/regression/test_derivatives.py (``./run validate``): every kernel and
model of that file (the suite runs one of each kind), the closed forms of the zero-lag
derivatives, and the structured exact likelihoods' derivative predictions against the dense
ones."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

from bayes_gp import GPRegression
from bayes_gp import kernels as K
from bayes_gp.inference import MapFit
from tests.regression import test_derivatives as T


@pytest.mark.parametrize("name", list(T.KERNELS))
def test_kernel_derivatives_equal_finite_differences_long(name):
    T.test_kernel_derivatives_equal_finite_differences(name)


@pytest.mark.parametrize("name", T.LIMIT_KERNELS)
def test_zero_lag_is_the_limit_long(name):
    T.test_zero_lag_is_the_limit(name)


@pytest.mark.parametrize("name", list(T.MODELS))
def test_derivative_prediction_equals_finite_differences_long(name):
    T.test_derivative_prediction_equals_finite_differences(name)


def test_zero_lag_closed_forms():
    r"""Closed forms of :math:`-\kappa''(0)` and :math:`\kappa''''(0)`: SE :math:`\eta^2/\ell^2`,
    :math:`3\eta^2/\ell^4`; Matérn 3/2 :math:`3/\ell^2`; Matérn 5/2 :math:`5/(3\ell^2)`,
    :math:`25/\ell^4` (Taylor coefficients of R&W eq. 4.17); RQ :math:`1/\ell^2`,
    :math:`3(\alpha+1)/(\alpha\ell^4)` (eq. 4.19); a general :math:`\nu`, the spectral moments."""
    a = np.array([[0.4], [2.0]])
    ls, alpha = 0.7, 1.3
    cases = [
        (1.3 * K.ExpQuad(1, ls=ls), 2, 1.3 / ls**2, 3 * 1.3 / ls**4),
        (K.Matern32(1, ls=ls), 1, 3 / ls**2, None),
        (K.Matern52(1, ls=ls), 2, 5 / (3 * ls**2), 25 / ls**4),
        (K.RatQuad(1, alpha=alpha, ls=ls), 2, 1 / ls**2, 3 * (alpha + 1) / (alpha * ls**4)),
        (pm.gp.cov.Matern52(1, ls=ls), 2, 5 / (3 * ls**2), 25 / ls**4),
        # general nu (R&W eq. 4.14): nu / ((nu - 1) l^2), 3 nu^2 / ((nu - 1)(nu - 2) l^4)
        (K.Matern(1, nu=2.7, ls=ls), 2, 2.7 / (1.7 * ls**2), 3 * 2.7**2 / (1.7 * 0.7 * ls**4)),
    ]
    for kernel, order, v11, v22 in cases:
        at = T._table_fn(kernel, order)(a, a)
        np.testing.assert_allclose(np.diag(at[(1, 1)]), v11, rtol=1e-12)
        np.testing.assert_allclose(np.diag(at[(1, 0)]), 0.0, atol=1e-12)
        if v22 is not None:
            np.testing.assert_allclose(np.diag(at[(2, 2)]), v22, rtol=1e-12)
            np.testing.assert_allclose(np.diag(at[(2, 0)]), -v11, rtol=1e-12)


def test_structured_likelihoods_give_the_dense_answer():
    """The quasiseparable and compact-support exact GPs predict the derivative from a dense
    factorisation of the same C: equal to the dense model's."""
    x, y = T._data(40)
    for kernel, kw in [("matern52", {"structure": "quasiseparable"}), ("pp2", {})]:
        dense = GPRegression(x, y, kernel, structure="dense", sparse=False)
        other = GPRegression(x, y, kernel, **kw)
        assert other.quasiseparable or other.sparse
        fit = MapFit({"ls": 1.5, "eta": 0.9, "sigma": 0.15}, 0.0, True)
        a, b = dense.predict_derivative(T.GRID, fit), other.predict_derivative(T.GRID, fit)
        np.testing.assert_allclose(b.mean, a.mean, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(b.var, a.var, rtol=1e-8, atol=1e-12)
