"""The kernels compile in PyTensor's JAX backend (numba is covered in test_in_models.py).

JAX has no modified Bessel function K_nu of real order and no J_nu, so the general-nu ``Matern``
(non-half-integer nu) and ``BesselOscillatory`` need the numba, C or Python backends; their
half-integer and closed-form relatives do work in JAX.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import bayes_gp.kernels as K
from tests.helpers import PY_MODE

jax = pytest.importorskip("jax", reason="jax is a test dependency (pyproject [test])")


def _model():
    rng = np.random.default_rng(7)
    X = rng.uniform(-2, 2, size=(15, 2))
    y = np.cos(X[:, 0]) + 0.1 * rng.normal(size=15)
    with pm.Model() as model:
        ls = pm.LogNormal("ls", 0.0, 0.3, shape=2)
        cov = (
            K.ExpQuad(2, ls=ls)
            + K.Matern(2, nu=2.5, ls=ls)  # closed form (R&W 4.16)
            + K.Matern12(2, ls=ls) * K.Periodic(2, period=2.0, ls=ls)
            + K.GammaExponential(2, gamma=1.3, ls=ls)
            + K.RatQuad(2, alpha=2.0, ls=ls)
            + K.PiecewisePolynomial(2, ls=ls * 3, q=2)
            + K.Periodized(K.Matern32(2, ls=ls), period=3.0, n_images=1)
            + K.ExpQuad(2, metric=K.FactorAnalysis(pt.reshape(ls, (2, 1)), ls))
            + K.PRMLKernel(2, 1.0, ls, 0.1, 0.2)
            + K.Additive(
                [K.ExpQuad(2, ls=1.0, active_dims=[0]), K.ExpQuad(2, ls=ls[1], active_dims=[1])], 2
            )
        )
        pm.gp.Marginal(cov_func=cov).marginal_likelihood("y", X=X, y=y, sigma=0.2)
    return model


@pytest.mark.slow
def test_kernels_compile_and_differentiate_in_jax():
    model = _model()
    point = model.initial_point()
    outputs = [model.logp(), model.dlogp()]
    jax_logp, jax_grad = model.compile_fn(outputs, mode="JAX")(point)
    py_logp, py_grad = model.compile_fn(outputs, mode=PY_MODE)(point)
    np.testing.assert_allclose(jax_logp, py_logp, rtol=1e-10)
    np.testing.assert_allclose(jax_grad, py_grad, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize(
    "kernel",
    [K.Matern(1, nu=0.8, ls=1.0), K.BesselOscillatory(1, nu=1.0, ls=1.0)],
    ids=["Matern_general_nu", "BesselOscillatory"],
)
def test_bessel_kernels_are_not_available_in_jax(kernel):
    import pytensor

    x = pt.dmatrix("x")
    with pytest.raises((NotImplementedError, AttributeError), match=r"kve|jv"):
        pytensor.function([x], kernel(x), mode="JAX")
