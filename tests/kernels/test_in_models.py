"""Every kernel inside a PyMC model with hyperpriors: compiled, log-probability and gradient checked.

The log-likelihood term of ``pm.gp.Marginal`` is compared with SciPy's multivariate normal at the
same hyperparameters, and the gradient of the whole model's log-density with central finite
differences. Most graphs are compiled with PyTensor's Python linker (fast to build); one test
compiles a composite model with the default (numba) backend.
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest
from pytensor.link.numba.linker import NumbaLinker
from scipy import stats

import bayes_gp
from bayes_gp.kernels import BesselOscillatory, ExpQuad, Matern, Periodized, Sigmoid
from tests.helpers import PY_MODE, evaluate
from tests.kernels.catalogue import CASES, Case

N = 12


def _data(seed=5):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.5, 1.5, size=(N, 2))
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.1 * rng.normal(size=N)
    return X, y


def _model(case: Case, X, y):
    with pm.Model() as model:
        hyper = {}
        for name, value in case.params.items():
            value = np.asarray(value, float)
            if name in case.positive:
                hyper[name] = pm.LogNormal(name, mu=np.log(value), sigma=0.3, shape=value.shape)
            else:
                hyper[name] = pm.Normal(name, mu=value, sigma=0.3, shape=value.shape)
        eta = pm.HalfNormal("eta", sigma=1.0)
        sigma = pm.HalfNormal("sigma", sigma=0.5)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", bayes_gp.NotPSDWarning)
            cov = eta**2 * case.build(hyper)
        gp = pm.gp.Marginal(cov_func=cov)
        gp.marginal_likelihood("y", X=X, y=y, sigma=sigma, jitter=0.0)
    return model


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_kernel_in_marginal_gp_model(case: Case):
    X, y = _data()
    model = _model(case, X, y)
    point = model.initial_point()

    # Log-likelihood of y equals the multivariate normal density at the same hyperparameters.
    values = {  # every positive hyperparameter here is log-transformed
        name.removesuffix("_log__"): np.exp(v) if name.endswith("_log__") else v
        for name, v in point.items()
    }
    hyper = {name: values[name] for name in case.params}
    K = values["eta"] ** 2 * evaluate(case.kernel(**hyper)(X))
    expected = stats.multivariate_normal(np.zeros(N), K + values["sigma"] ** 2 * np.eye(N)).logpdf(
        y
    )
    loglik = model.compile_fn(model.logp(vars=[model["y"]]), mode=PY_MODE)(point)
    np.testing.assert_allclose(loglik, expected, rtol=1e-10)

    # Gradient of the model's log-density against central finite differences.
    logp = model.compile_logp(mode=PY_MODE)
    dlogp = model.compile_dlogp(mode=PY_MODE)
    assert np.isfinite(logp(point))
    grad = dlogp(point)
    assert np.all(np.isfinite(grad))
    flat = pm.blocking.DictToArrayBijection.map(point)
    h = 1e-6
    fd = np.empty_like(flat.data)
    for i in range(flat.data.size):
        up, dn = flat.data.copy(), flat.data.copy()
        up[i] += h
        dn[i] -= h
        f = [logp(pm.blocking.DictToArrayBijection.rmap(flat._replace(data=v))) for v in (up, dn)]
        fd[i] = (f[0] - f[1]) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-5)


def test_non_psd_sigmoid_model_fails_with_a_clear_message():
    X = np.random.default_rng(3).normal(scale=2.0, size=(15, 2))
    with pm.Model() as model:
        a = pm.LogNormal("a", 0.0, 0.1)
        with pytest.warns(bayes_gp.NotPSDWarning):
            cov = Sigmoid(2, a=a, b=-1.0)
        pm.gp.Marginal(cov_func=cov).marginal_likelihood("y", X=X, y=np.zeros(15), sigma=0.1)
    logp = model.compile_logp(mode=PY_MODE)
    with pytest.raises(
        bayes_gp.NotPSDError, match="not positive semi-definite: smallest eigenvalue"
    ):
        logp(model.initial_point())


@pytest.mark.slow
def test_composite_kernel_compiles_with_numba():
    """The default backend (numba) compiles Bessel K/J, rounding and switches, with gradients:
    the kernel matrix of the composite kernel, weighted by a fixed matrix into one number, and
    its gradient in the hyperparameters, against the Python linker. (Only the kernel: the
    exact GP's Cholesky and solves around it, which numba compiles in every exact-GP NUTS test,
    took 60-80 s more to compile on a fresh HOME.)"""
    X, _ = _data()
    weights = np.random.default_rng(3).normal(size=(X.shape[0], X.shape[0]))
    with pm.Model() as model:
        ls = pm.LogNormal("ls", 0.0, 0.3, shape=2)
        period = pm.LogNormal("period", np.log(2.0), 0.1)
        cov = (
            Matern(2, nu=0.8, ls=ls)
            + BesselOscillatory(2, nu=1.0, ls=ls)
            + Periodized(ExpQuad(2, ls=ls), period=period, n_images=1)
        )
        pm.Potential("weighted", (cov(X) * weights).sum())
    point = model.initial_point()
    outputs = [model.logp(), model.dlogp()]
    numba_fn = model.compile_fn(outputs, mode="NUMBA")
    assert isinstance(numba_fn.f.maker.linker, NumbaLinker)
    (logp_numba, grad_numba), (logp_py, grad_py) = (
        numba_fn(point),
        model.compile_fn(outputs, mode=PY_MODE)(point),
    )
    np.testing.assert_allclose(logp_numba, logp_py, rtol=1e-10)
    np.testing.assert_allclose(grad_numba, grad_py, rtol=1e-8)
