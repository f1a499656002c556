"""bayes_gp.check_psd and the PSD assertion used by non-PSD kernels."""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
import pytest

import bayes_gp
from bayes_gp.kernels import ExpQuad, PiecewisePolynomial
from bayes_gp.linalg import EAGER_MODE, assert_psd
from tests.helpers import evaluate


def test_check_psd_on_matrices():
    A = np.random.default_rng(0).normal(size=(6, 3))
    res = bayes_gp.check_psd(A @ A.T)  # rank 3: three zero eigenvalues up to rounding
    assert res.is_psd and bool(res) and res.n == 6
    assert abs(res.min_eigenvalue) < res.tolerance
    bad = np.diag([1.0, 2.0, -0.5])
    res = bayes_gp.check_psd(bad)
    assert not res.is_psd and res.min_eigenvalue == pytest.approx(-0.5)
    assert res.max_eigenvalue == pytest.approx(2.0)


def test_check_psd_rejects_asymmetric_and_bad_input():
    assert not bayes_gp.check_psd(np.array([[1.0, 0.5], [0.0, 1.0]])).is_psd
    with pytest.raises(ValueError, match="square"):
        bayes_gp.check_psd(np.ones((2, 3)))
    with pytest.raises(ValueError, match="NaN"):
        bayes_gp.check_psd(np.array([[1.0, np.nan], [np.nan, 1.0]]))
    with pytest.raises(ValueError, match="`X` is required"):
        bayes_gp.check_psd(ExpQuad(1, ls=1.0))


def test_check_psd_on_kernels():
    X = np.linspace(0, 3, 25)[:, None]
    assert bayes_gp.check_psd(ExpQuad(1, ls=0.5), X).is_psd
    assert bayes_gp.check_psd(PiecewisePolynomial(1, ls=0.5, q=2), X.ravel()).is_psd


def test_check_psd_refuses_kernels_with_random_variables():
    import pymc as pm

    with pm.Model():
        ls = pm.LogNormal("ls", 0.0, 1.0)
        with pytest.raises(ValueError, match="random variables"):
            bayes_gp.check_psd(ExpQuad(1, ls=ls), np.ones((3, 1)))


def test_assert_psd_passes_psd_matrices_and_their_gradients():
    K = np.array([[2.0, 0.5], [0.5, 1.0]])
    x = pt.dmatrix("K")
    out = assert_psd(x)
    import pytensor

    f = pytensor.function([x], [out, pytensor.grad(pt.sum(out * 3.0), x)], mode=EAGER_MODE)
    val, grad = f(K)
    np.testing.assert_array_equal(val, K)
    np.testing.assert_array_equal(grad, np.full((2, 2), 3.0))
    with pytest.raises(bayes_gp.NotPSDError, match="smallest eigenvalue -1"):
        evaluate(assert_psd(pt.as_tensor(np.diag([1.0, -1.0]))))


def test_jittered_cholesky_adds_only_the_jitter_it_needs():
    from bayes_gp.linalg import jittered_cholesky

    A = np.random.default_rng(1).normal(size=(5, 5))
    K = A @ A.T + np.eye(5)
    L, jitter = jittered_cholesky(K)
    assert jitter == 0.0
    np.testing.assert_allclose(L @ L.T, K, rtol=1e-13)
    x = np.linspace(0, 1, 40)
    K = np.outer(x, x)  # rank one: needs jitter
    L, jitter = jittered_cholesky(K)
    assert 0 < jitter <= 1e-4 * np.mean(np.diag(K))
    np.testing.assert_allclose(L @ L.T, K + jitter * np.eye(40), atol=1e-13)
    with pytest.raises(bayes_gp.NotPSDError, match="add observation noise"):
        jittered_cholesky(np.diag([1.0, -1.0]))


def test_factorize_warns_when_it_adds_jitter():
    from bayes_gp.predictive import JitterWarning, factorize

    x = np.linspace(0, 1, 30)
    with pytest.warns(JitterWarning, match="added jitter"):
        fac = factorize(np.outer(x, x), x)
    assert fac.jitter > 0


def test_check_psd_answers_for_the_sigmoid_kernel():
    """The defect: check_psd(Sigmoid(...), X) raised the kernel's own NotPSDError instead of
    answering. It now returns is_psd=False with the smallest eigenvalue, the same as for the
    Gram matrix computed by hand (tanh(a x x' + b), R&W §4.2.3); the kernel's guard still raises
    where the matrix is used."""
    import warnings

    from bayes_gp.kernels import Sigmoid

    X = np.linspace(-3.0, 3.0, 20)[:, None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = Sigmoid(1, a=2.0, b=-1.0)
    res = bayes_gp.check_psd(k, X)
    by_hand = np.tanh(2.0 * X @ X.T - 1.0)
    assert not res.is_psd
    assert res.min_eigenvalue == pytest.approx(np.linalg.eigvalsh(by_hand).min(), rel=1e-10)
    assert res.min_eigenvalue < -1.0
    with pytest.raises(bayes_gp.NotPSDError):
        evaluate(k(X))


def test_plus_diagonal_is_a_diagonal_increment():
    """``plus_diagonal(A, d)`` = ``A + diag(d)`` for a scalar or a vector ``d``, values and
    gradients, with no ``n x n`` identity in the compiled graph."""
    import pytensor
    from pytensor.tensor.basic import Eye

    from bayes_gp.linalg import plus_diagonal

    rng = np.random.default_rng(0)
    A0, d0 = rng.normal(size=(5, 5)), rng.normal(size=5)
    A, d, s = pt.matrix("A"), pt.vector("d"), pt.scalar("s")
    out = pytensor.function([A, d, s], [plus_diagonal(A, d), plus_diagonal(A, s)])
    vec, sca = out(A0, d0, 0.7)
    np.testing.assert_allclose(vec, A0 + np.diag(d0), rtol=0, atol=0)
    np.testing.assert_allclose(sca, A0 + 0.7 * np.eye(5), rtol=0, atol=0)
    assert not any(isinstance(node.op, Eye) for node in out.maker.fgraph.apply_nodes)
    W = rng.normal(size=(5, 5))
    cost = pt.sum(pt.as_tensor_variable(W) * plus_diagonal(A, d) ** 2)
    gA, gd = pytensor.function([A, d], pt.grad(cost, [A, d]))(A0, d0)
    C = A0 + np.diag(d0)
    np.testing.assert_allclose(gA, 2 * W * C, rtol=1e-12)
    np.testing.assert_allclose(gd, np.diagonal(2 * W * C), rtol=1e-12)
