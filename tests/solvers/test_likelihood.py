"""The fused exact-GP log density (R&W eq. 2.30) and its closed-form gradient (R&W eq. 5.9),
against SciPy, PyMC's MvNormal, finite differences, in every PyTensor backend."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import stats

from bayes_gp import op_backends
from bayes_gp.linalg import EAGER_MODE
from bayes_gp.solvers.likelihood import gp_logp, marginal_normal

rng = np.random.default_rng(7)
N = 40
X = np.sort(rng.uniform(0, 10, N))
Y = np.sin(X) + 0.3 * rng.normal(size=N)
THETA = (1.3, 0.9, 0.25, 0.4)  # ls, eta, sigma, mean offset c


def _graph():
    ls, eta, sigma, c = pt.dscalars("ls", "eta", "sigma", "c")
    d = pt.as_tensor_variable(X[:, None] - X[None, :])
    C = eta**2 * pt.exp(-0.5 * d**2 / ls**2) + (sigma**2 + 1e-10) * pt.eye(N)
    mu = c * pt.ones(N)
    return (ls, eta, sigma, c), C, mu


def _numpy_C(ls, eta, sigma):
    d = X[:, None] - X[None, :]
    return eta**2 * np.exp(-0.5 * d**2 / ls**2) + (sigma**2 + 1e-10) * np.eye(N)


#: The backends: PyTensor's Python linker (the Ops' ``perform``), numba (``FAST_RUN`` is numba
#: in this PyTensor, nutpie's backend) and JAX (numpyro's).
MODES = {"PY": EAGER_MODE, "NUMBA": "NUMBA", "JAX": "JAX"}


@pytest.mark.parametrize("mode", list(MODES))
def test_value_and_gradient_in_every_backend(mode):
    if mode == "JAX":
        pytest.importorskip("jax")
        op_backends.ensure("jax")
    params, C, mu = _graph()
    ours = gp_logp(C, pt.as_tensor_variable(Y) - mu)
    ref = pm.logp(pm.MvNormal.dist(mu=mu, cov=C), Y)  # differentiated through its Cholesky
    f = pytensor.function(list(params), [ours, *pt.grad(ours, list(params))], mode=MODES[mode])
    g = pytensor.function(list(params), [ref, *pt.grad(ref, list(params))], mode=EAGER_MODE)
    out, expected = f(*THETA), g(*THETA)
    ls, eta, sigma, c = THETA
    scipy_value = stats.multivariate_normal(np.full(N, c), _numpy_C(ls, eta, sigma)).logpdf(Y)
    np.testing.assert_allclose(float(out[0]), scipy_value, rtol=1e-12)
    np.testing.assert_allclose([float(v) for v in out], [float(v) for v in expected], rtol=1e-9)


def test_gradient_against_finite_differences():
    params, C, mu = _graph()
    ours = gp_logp(C, pt.as_tensor_variable(Y) - mu)
    # (Python linker: the numba gradient equals MvNormal's above to 1e-9)
    f = pytensor.function(list(params), ours, mode=EAGER_MODE)
    grad = pytensor.function(list(params), pt.grad(ours, list(params)), mode=EAGER_MODE)
    g = np.array([float(v) for v in grad(*THETA)])
    h = 1e-6
    fd = []
    for i in range(4):
        up, dn = list(THETA), list(THETA)
        up[i] += h
        dn[i] -= h
        fd.append((float(f(*up)) - float(f(*dn))) / (2 * h))
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)


def test_not_positive_definite_is_minus_infinity_in_every_backend():
    C = pt.dmatrix("C")
    r = pt.dvector("r")
    bad = np.array([[1.0, 2.0], [2.0, 1.0]])  # eigenvalues 3 and -1
    for mode in (EAGER_MODE, "NUMBA"):
        f = pytensor.function([C, r], gp_logp(C, r), mode=mode)
        assert float(f(bad, np.ones(2))) == -np.inf
        assert np.isfinite(float(f(np.eye(2), np.ones(2))))


def test_only_the_density_is_differentiable():
    from bayes_gp.solvers.likelihood import GPLogp

    C = pt.dmatrix("C")
    r = pt.dvector("r")
    _, alpha, _ = GPLogp()(C, r)
    with pytest.raises(NotImplementedError, match="only the log density"):
        pt.grad(alpha.sum(), C)


def test_marginal_normal_draws_have_the_declared_covariance():
    C3 = np.array([[1.0, 0.6, 0.2], [0.6, 2.0, -0.3], [0.2, -0.3, 0.5]])
    mu3 = np.array([1.0, -2.0, 0.5])
    with pm.Model() as model:
        marginal_normal("y", mu3, C3)
    draws = pm.draw(model["y"], draws=20_000, random_seed=3, mode=EAGER_MODE)
    assert draws.shape == (20_000, 3)
    np.testing.assert_allclose(draws.mean(axis=0), mu3, atol=0.05)
    np.testing.assert_allclose(np.cov(draws.T), C3, atol=0.05)
    # and its log density is the normal's
    value = pm.logp(model["y"], np.zeros(3)).eval(mode=EAGER_MODE)
    np.testing.assert_allclose(value, stats.multivariate_normal(mu3, C3).logpdf(np.zeros(3)))


def test_native_numba_ops_equal_numpy_and_hold_no_gil():
    """The numba implementations call LAPACK from nopython code (no ``objmode``, which takes the
    GIL and made nutpie's parallel chains wait for each other): same results as the NumPy
    versions to rounding, in place and not, and the not-positive-definite contract."""
    from bayes_gp.solvers import _numba_lapack
    from bayes_gp.solvers.likelihood import CholeskyInverse, GPLogp, _inverse_numpy, _logp_numpy

    assert _numba_lapack.build() is not None  # PyTensor's bindings importable: native path used
    C, r = pt.dmatrix("C"), pt.dvector("r")
    lp, alpha, L = GPLogp()(C, r)
    f = pytensor.function([C, r], [lp, alpha, L, CholeskyInverse()(L), pytensor.grad(lp, C)],
                          mode="NUMBA")  # fmt: skip
    rng = np.random.default_rng(3)
    for n in (1, 7, 120):
        A = rng.normal(size=(n, n))
        Cv, rv = A @ A.T + n * np.eye(n), rng.normal(size=n)
        out = f(Cv, rv)
        ref = _logp_numpy(Cv, rv)
        # the numba kernels factorise with dpotrf 'L' and invert with potri_kernel's blocked
        # dtrtri, the NumPy ones with dpotrf 'U' and dpotri: the same flops in other orders
        assert float(out[0]) == pytest.approx(ref[0], rel=1e-13)
        for got, want in ((out[1], ref[1]), (out[2], ref[2]), (out[3], _inverse_numpy(ref[2]))):
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-13 * np.abs(want).max())
        assert (np.triu(out[2], 1) == 0).all()
        np.testing.assert_allclose(out[3], np.linalg.inv(Cv), atol=1e-12)
    out = f(-np.eye(3), np.ones(3))
    assert float(out[0]) == -np.inf and np.isnan(out[1]).all() and np.isnan(out[2]).all()
    bad = np.eye(3)
    bad[1, 1] = np.nan
    assert float(f(bad, np.ones(3))[0]) == -np.inf
