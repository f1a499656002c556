"""The ARD squared-distance Op (issue 19): the same r² and gradients as the graph of coordinate
differences, in every backend, without its (n, m, D) array."""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.gradient import verify_grad
from pytensor.graph.traversal import io_toposort

import bayes_gp
import bayes_gp.kernels as K
from bayes_gp import op_backends
from bayes_gp.kernels import ExpQuad, metrics
from bayes_gp.kernels import ard_distance as ad
from bayes_gp.kernels.ard_distance import ARDSquareDist, ARDSquareDistGrad, ard_square_dist
from bayes_gp.kernels.metrics import LengthScale, pairwise_diff
from tests.helpers import PY_MODE


def _data(n=23, m=17, D=4, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D))
    Xs = rng.normal(size=(m, D))
    X[5] = Xs[2]  # r = 0 between a pair
    ls = rng.uniform(0.3, 2.0, D)
    W = rng.normal(size=(n, m))
    return X, Xs, ls, W


def _weights(X, Xs, W, symmetric: bool):
    """The cotangent weights: (n, m), or (n, n) against X itself."""
    return np.random.default_rng(5).normal(size=(len(X), len(X))) if symmetric else W


def _reference_r2(X, Xs, ls):
    """The diff-based graph's formula, R&W §4.2.1 ARD metric, in NumPy."""
    return np.sum((X[:, None, :] - Xs[None, :, :]) ** 2 / ls**2, axis=-1)


def _graphs(symmetric: bool):
    """``(inputs, [op outputs], [reference outputs])``: r² and the gradient of
    sum(W * exp(-r²/2)) in ls, X and Xs, through the Op and through today's graph."""
    x, xs, ls, w = pt.dmatrix("x"), pt.dmatrix("xs"), pt.dvector("ls"), pt.dmatrix("w")
    other = x if symmetric else xs
    outs = []
    for r2 in (
        ard_square_dist(x, other, ls),
        pt.sum(pt.square(pairwise_diff(x, other)) / pt.square(ls), axis=-1),
    ):
        cost = pt.sum(w * pt.exp(-0.5 * r2))
        wrt = [ls, x] if symmetric else [ls, x, xs]
        outs.append([r2, *pt.grad(cost, wrt)])
    return [x, xs, ls, w], outs


def test_values_equal_exact_differences():
    X, Xs, ls, _ = _data()
    f = pytensor.function(
        [], [ard_square_dist(X, Xs, ls), ard_square_dist(X, None, ls)], mode=PY_MODE
    )
    r2, r2_self = f()
    np.testing.assert_allclose(r2, _reference_r2(X, Xs, ls), rtol=1e-12, atol=0)
    np.testing.assert_allclose(r2_self, _reference_r2(X, X, ls), rtol=1e-12, atol=0)
    assert r2[5, 2] == 0.0  # exact differences: no cancellation at r = 0
    np.testing.assert_array_equal(np.diag(r2_self), 0.0)
    np.testing.assert_array_equal(r2_self, r2_self.T)


def test_values_at_close_points_keep_relative_accuracy():
    # |x|^2 - 2 x.x' + |x'|^2 loses every digit here; exact differences keep them
    X = np.array([[1e4, -3e4], [1e4 + 1e-6, -3e4 + 2e-6]])
    ls = np.array([1.0, 2.0])
    r2 = pytensor.function([], ard_square_dist(X, None, ls), mode=PY_MODE)()
    np.testing.assert_allclose(r2[0, 1], _reference_r2(X, X, ls)[0, 1], rtol=1e-12)
    # 2e-12 up to the rounding of the inputs themselves (ulp(3e4) / 2e-6 ~ 2e-6 relative)
    np.testing.assert_allclose(r2[0, 1], 2e-12, rtol=1e-5)
    Xw = X / ls
    expansion = Xw[0] @ Xw[0] - 2 * Xw[0] @ Xw[1] + Xw[1] @ Xw[1]
    assert abs(expansion - 2e-12) > 1e-3 * 2e-12


def test_isotropic_scalar_ls_broadcasts():
    X, Xs, _, _ = _data()
    r2 = pytensor.function([], ard_square_dist(X, Xs, 0.7), mode=PY_MODE)()
    np.testing.assert_allclose(r2, _reference_r2(X, Xs, np.full(4, 0.7)), rtol=1e-12, atol=0)


@pytest.mark.parametrize("symmetric", [False, True], ids=["cross", "symmetric"])
def test_gradients_equal_the_difference_graph(symmetric):
    X, Xs, ls, W = _data()
    W = _weights(X, Xs, W, symmetric)
    inputs, (op, ref) = _graphs(symmetric)
    f_op = pytensor.function(inputs, op, mode=PY_MODE, on_unused_input="ignore")
    f_ref = pytensor.function(inputs, ref, mode=PY_MODE, on_unused_input="ignore")
    for a, b in zip(f_op(X, Xs, ls, W), f_ref(X, Xs, ls, W), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13 * np.abs(b).max())


def test_gradients_against_finite_differences():
    X, Xs, ls, W = _data(n=7, m=5, D=3)
    rng = np.random.default_rng(0)

    def cost(ls, X, Xs):
        return pt.sum(W * pt.exp(-0.5 * ARDSquareDist()(X, Xs, ls)))

    verify_grad(cost, [ls, X, Xs], rng=rng, mode=PY_MODE)
    W2 = rng.normal(size=(7, 7))

    def cost_self(ls, X):
        return pt.sum(W2 * pt.exp(-0.5 * ARDSquareDist()(X, X, ls)))

    verify_grad(cost_self, [ls, X], rng=rng, mode=PY_MODE)


def test_constant_inputs_skip_the_input_gradient():
    X, Xs, ls, W = _data()
    lsv = pt.dvector("ls")
    g = pt.grad(pt.sum(W * ard_square_dist(X, Xs, lsv)), lsv)
    ops = [node.op for node in io_toposort([lsv], [g])]
    assert ARDSquareDistGrad(False) in ops
    sliced = pt.as_tensor(X)[:, [0, 1, 3]]  # constant data sliced to active dimensions
    g_sliced = pt.grad(pt.sum(ard_square_dist(sliced, None, lsv[:3])), lsv)
    assert ARDSquareDistGrad(False) in [node.op for node in io_toposort([lsv], [g_sliced])]
    xv = pt.dmatrix("x")
    g_var = pt.grad(pt.sum(ard_square_dist(xv, Xs, lsv)), lsv)
    assert ARDSquareDistGrad(True) in [node.op for node in io_toposort([lsv, xv], [g_var])]
    # d/d ls_d = -2 sum_ij W_ij (x_id - x'_jd)^2 / ls_d^3
    expected = -2.0 * np.einsum("ij,ijd->d", W, (X[:, None] - Xs[None]) ** 2) / ls**3
    np.testing.assert_allclose(pytensor.function([lsv], g, mode=PY_MODE)(ls), expected, rtol=1e-12)


def test_blocks_of_rows_give_the_same_values(monkeypatch):
    X, Xs, ls, W = _data(n=40, m=30, D=3)
    whole = ad.square_dist_numpy(X, Xs, ls), ad.square_dist_grad_numpy(X, Xs, ls, W, True)
    monkeypatch.setattr(ad, "BLOCK_ELEMENTS", 64)  # blocks of 2 rows
    assert len(list(ad._row_blocks(40, 30))) == 20
    blocked = ad.square_dist_numpy(X, Xs, ls), ad.square_dist_grad_numpy(X, Xs, ls, W, True)
    np.testing.assert_array_equal(blocked[0], whole[0])
    for a, b in zip(blocked[1], whole[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14)


def test_constant_inputs_keep_their_squared_differences(monkeypatch):
    X, Xs, ls, _ = _data()
    lsv = pt.dvector("ls")
    f = pytensor.function([lsv], ARDSquareDist()(X, Xs, lsv), mode=PY_MODE)
    (node,) = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, ARDSquareDist)]
    calls, square_terms = [], ad.square_terms
    monkeypatch.setattr(ad, "square_terms", lambda *a: calls.append(1) or square_terms(*a))
    for scale in (1.0, 0.3, 2.5):  # computed once, then weighted: the same numbers, bit for bit
        np.testing.assert_array_equal(f(ls * scale), ad.square_dist_numpy(X, Xs, ls * scale))
    assert len(calls) == 1 and node.tag.square_terms.shape == (4, 23, 17)
    np.testing.assert_array_equal(ad.weighted_terms(node.tag.square_terms, ls),
                                  ad.square_dist_numpy(X, Xs, ls))  # fmt: skip
    with pytest.raises(ValueError, match=r"`ls` \(3,\)"):  # a wrong ls is still refused
        f(ls[:3])
    # an input that can change, or more than TERMS_BYTES of differences: computed each call
    xv = pt.dmatrix("x")
    g = pytensor.function([xv, lsv], ard_square_dist(xv, Xs, lsv), mode=PY_MODE)
    np.testing.assert_array_equal(g(X, ls), ad.square_dist_numpy(X, Xs, ls))
    monkeypatch.setattr(ad, "TERMS_BYTES", 8 * 23 * 17 * 4 - 1)
    h = pytensor.function([lsv], ard_square_dist(X, Xs, lsv), mode=PY_MODE)
    np.testing.assert_array_equal(h(ls), ad.square_dist_numpy(X, Xs, ls))
    assert len(calls) == 1


def test_mismatched_shapes_raise():
    X, Xs, ls, W = _data()
    with pytest.raises(ValueError, match=r"`ls` \(3,\)"):
        ad.square_dist_numpy(X, Xs, ls[:3])
    with pytest.raises(ValueError, match="cotangent of shape"):
        ad.square_dist_grad_numpy(X, Xs, ls, W[:, :3], True)
    with pytest.raises(TypeError, match="vector ls"):
        ARDSquareDist()(X, Xs, pt.dmatrix())


@pytest.mark.parametrize("symmetric", [False, True], ids=["cross", "symmetric"])
def test_numba_c_and_jax_backends_agree(symmetric):
    # The Ops' JAX conversions are registered at graph building only where JAX is already
    # imported: alone in a process (no earlier test imported JAX) this test would build its
    # graphs before that, and JAX mode would find no conversion for ARDSquareDist.
    op_backends.ensure("jax")
    X, Xs, ls, W = _data()
    W = _weights(X, Xs, W, symmetric)
    inputs, (op, ref) = _graphs(symmetric)
    expected = pytensor.function(inputs, ref, mode=PY_MODE, on_unused_input="ignore")(X, Xs, ls, W)
    for mode in ("NUMBA", "CVM", "JAX"):  # FAST_RUN is numba in PyTensor 3; CVM is C + perform
        f = pytensor.function(inputs, op, mode=mode, on_unused_input="ignore")
        kinds = {type(node.op) for node in f.maker.fgraph.apply_nodes}
        assert ARDSquareDist in kinds and ARDSquareDistGrad in kinds, mode
        for a, b in zip(f(X, Xs, ls, W), expected, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13 * np.abs(b).max(), err_msg=mode)


def _ops_of(expr) -> set[type]:
    return {type(node.op) for node in io_toposort([], [expr])}


def test_length_scale_uses_the_op_above_the_threshold(monkeypatch):
    X, Xs, ls, _ = _data()
    metric = LengthScale(ls, 4)
    # multi-dimensional inputs use the Op at any size, one-dimensional ones above the threshold
    assert ARDSquareDist in _ops_of(metric.square_dist(pt.as_tensor(X), pt.as_tensor(Xs)))
    one = LengthScale(0.7, 1)
    assert ARDSquareDist not in _ops_of(one.square_dist(pt.as_tensor(X[:, :1])))
    monkeypatch.setattr(metrics, "FUSED_DISTANCE_MIN_DIMS", 5)
    assert ARDSquareDist not in _ops_of(metric.square_dist(pt.as_tensor(X), pt.as_tensor(Xs)))
    monkeypatch.setattr(metrics, "FUSED_DISTANCE_MIN_ELEMENTS", X.shape[0] * Xs.shape[0] * 4 - 1)
    r2 = metric.square_dist(pt.as_tensor(X), pt.as_tensor(Xs))
    assert ARDSquareDist in _ops_of(r2)
    np.testing.assert_allclose(r2.eval(mode=PY_MODE), _reference_r2(X, Xs, ls), rtol=1e-12)
    # isotropic too, and a kernel's active dimensions are sliced before
    k = ExpQuad(4, ls=0.9, active_dims=[0, 2, 3])
    monkeypatch.setattr(metrics, "FUSED_DISTANCE_MIN_ELEMENTS", 0)
    K = k(pt.as_tensor(X), pt.as_tensor(Xs))
    assert ARDSquareDist in _ops_of(K)
    ref = np.exp(-0.5 * _reference_r2(X[:, [0, 2, 3]], Xs[:, [0, 2, 3]], np.full(3, 0.9)))
    np.testing.assert_allclose(K.eval(mode=PY_MODE), ref, rtol=1e-12)
    # sizes unknown when the graph is built: the difference graph
    assert ARDSquareDist not in _ops_of(metric.square_dist(pt.dmatrix(), pt.dmatrix()))


def _gpr_logp_and_grad(threshold, monkeypatch):
    monkeypatch.setattr(metrics, "FUSED_DISTANCE_MIN_ELEMENTS", threshold)
    monkeypatch.setattr(metrics, "FUSED_DISTANCE_MIN_DIMS", threshold)
    rng = np.random.default_rng(11)
    X = rng.uniform(0, 3, (40, 3))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=40)
    gpr = bayes_gp.GPRegression(X, y, kernel="expquad", ard=True)
    model = gpr.model
    point = model.initial_point()
    point["ls_log__"] = np.log([0.7, 1.3, 2.9])
    fn = model.compile_fn([model.logp(), model.dlogp()], mode=PY_MODE)
    ops = {type(node.op) for node in fn.f.maker.fgraph.apply_nodes}
    return fn(point), ops


def test_gpr_log_density_and_gradient_unchanged(monkeypatch):
    (lp_op, g_op), ops = _gpr_logp_and_grad(0, monkeypatch)
    assert ARDSquareDist in ops and ARDSquareDistGrad in ops
    (lp_ref, g_ref), ops = _gpr_logp_and_grad(float("inf"), monkeypatch)
    assert ARDSquareDist not in ops
    np.testing.assert_allclose(lp_op, lp_ref, rtol=1e-10)
    np.testing.assert_allclose(g_op, g_ref, rtol=1e-10, atol=1e-10 * np.abs(g_ref).max())
    assert np.all(g_ref != 0.0)


@pytest.mark.parametrize(
    "make",
    [
        lambda ls: K.ExpQuad(3, ls=ls),
        lambda ls: K.Matern52(3, ls=ls),
        lambda ls: K.Matern32(3, ls=ls),
        lambda ls: K.Matern12(3, ls=ls),
        lambda ls: K.RatQuad(3, alpha=1.5, ls=ls),
        lambda ls: K.GammaExponential(3, gamma=1.4, ls=ls),
        lambda ls: K.PiecewisePolynomial(3, ls=ls * 4, q=2),
    ],
    ids=["ExpQuad", "Matern52", "Matern32", "Matern12", "RatQuad", "GammaExp", "PP2"],
)
def test_kernels_through_the_op_equal_the_difference_graph(make, monkeypatch):
    """Every stationary kernel gives the same Gram matrix and ls-gradient (finite at r = 0,
    where X repeats a row) through the Op as through the folded differences."""
    X, _, ls, W = _data(n=12, m=12, D=3)
    X[7] = X[2]
    lsv = pt.dvector("ls")
    results = []
    for threshold in (float("inf"), 0):
        monkeypatch.setattr(metrics, "FUSED_DISTANCE_MIN_ELEMENTS", threshold)
        monkeypatch.setattr(metrics, "FUSED_DISTANCE_MIN_DIMS", threshold)
        Kx = make(lsv)(pt.as_tensor(X))
        assert (ARDSquareDist in _ops_of(Kx)) == (threshold == 0)
        grad = pt.grad(pt.sum(W * Kx), lsv)
        results.append(pytensor.function([lsv], [Kx, grad], mode=PY_MODE)(ls))
    (K_ref, g_ref), (K_op, g_op) = results
    assert np.all(np.isfinite(g_op))
    np.testing.assert_allclose(K_op, K_ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(g_op, g_ref, rtol=1e-10, atol=1e-12 * np.abs(g_ref).max())
