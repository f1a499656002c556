"""The structured hierarchical-GP likelihood equals the dense multivariate normal of the stacked
groups (value to 1e-10, gradient against the dense one and against finite differences), and
its NumPy factorisation solves, inverts and gives LOO terms as the dense matrix does."""

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from scipy.stats import multivariate_normal

from bayes_gp.hierarchical import woodbury
from bayes_gp.hierarchical.woodbury import (
    PaddedLayout,
    StructuredFactor,
    dense_covariance,
    padded_structured_logp,
    structured_logp,
)
from bayes_gp.linalg import EAGER_MODE
from bayes_gp.predictive import factorize, loo_log_density
from bayes_gp.solvers.likelihood import gp_logp

JITTER = 1e-8


def _layout(seed=0):
    """Four groups of different sizes at inputs drawn from 7 common times, rows interleaved."""
    rng = np.random.default_rng(seed)
    U = np.linspace(0.0, 6.0, 7)
    sizes = [5, 3, 7, 1]
    labels = np.repeat(np.arange(4), sizes)
    u_index = np.concatenate([np.sort(rng.choice(7, s, replace=False)) for s in sizes])
    perm = rng.permutation(labels.size)  # rows not sorted by group
    labels, u_index = labels[perm], u_index[perm]
    rows = [np.flatnonzero(labels == g) for g in range(4)]
    x = U[u_index]
    r = rng.normal(size=labels.size)
    return U, x, rows, u_index, r


def _se(a, b, ls, eta):
    return eta**2 * np.exp(-0.5 * (a[:, None] - b[None, :]) ** 2 / ls**2)


def _se_t(a, b, ls, eta):
    return eta**2 * pt.exp(-0.5 * (a[:, None] - b[None, :]) ** 2 / ls**2)


def _graphs(shared: bool):
    """(theta, structured logp, dense logp) as PyTensor graphs of one parameter vector theta =
    (log ls_g x4, log eta, log sigma, log ls0, log eta0)."""
    U, x, rows, u_index, r = _layout()
    theta = pt.dvector("theta")
    ls = pt.exp(theta[:4])
    eta, sigma = pt.exp(theta[4]), pt.exp(theta[5])
    ls0, eta0 = pt.exp(theta[6]), pt.exp(theta[7])
    blocks = []
    for g, idx in enumerate(rows):
        xg = pt.as_tensor_variable(x[idx])
        blocks.append(_se_t(xg, xg, ls[g], eta) + (sigma**2 + JITTER) * pt.eye(idx.size))
    K0 = _se_t(pt.as_tensor_variable(U), pt.as_tensor_variable(U), ls0, eta0) + JITTER * pt.eye(7)
    structured = structured_logp(r, blocks, rows, K0 if shared else None, u_index)
    # dense reference: C assembled from the same blocks, through the package's dense likelihood
    n = r.size
    C = pt.zeros((n, n))
    for A, idx in zip(blocks, rows, strict=True):
        C = pt.set_subtensor(C[idx[:, None], idx[None, :]], A)
    if shared:
        C = C + K0[u_index[:, None], u_index[None, :]]
    dense = gp_logp(C, r)
    return theta, structured, dense, (U, x, rows, u_index, r)


def _padded_graph(shared: bool):
    """The padded, batched form of the same likelihood (PaddedLayout)."""
    U, x, rows, u_index, r = _layout()
    lay = PaddedLayout.of(rows, u_index)
    theta = pt.dvector("theta")
    ls = pt.exp(theta[:4])
    eta, sigma = pt.exp(theta[4]), pt.exp(theta[5])
    ls0, eta0 = pt.exp(theta[6]), pt.exp(theta[7])
    Xp = x[lay.index]  # (G, n_max), padding holds row 0's input
    d2 = (Xp[:, :, None] - Xp[:, None, :]) ** 2
    K = pt.square(eta) * pt.exp(-0.5 * d2 / pt.square(ls)[:, None, None])
    A = lay.pad_blocks(K, (sigma**2 + JITTER) * pt.ones(lay.mask.shape))
    K0 = _se_t(pt.as_tensor_variable(U), pt.as_tensor_variable(U), ls0, eta0) + JITTER * pt.eye(7)
    return theta, padded_structured_logp(r, A, lay, K0 if shared else None)


THETA = np.log([0.7, 1.3, 2.0, 0.9, 0.8, 0.3, 1.5, 1.1])


@pytest.mark.parametrize("shared", [True, False])
def test_structured_equals_dense_mvn_value_and_gradient(shared):
    theta, s, d, (U, x, rows, u_index, r) = _graphs(shared)
    f = pytensor.function(
        [theta], [s, d, *pytensor.grad(s, [theta]), *pytensor.grad(d, [theta])], mode=EAGER_MODE
    )
    vs, vd, gs, gd = f(THETA)
    # against SciPy's dense MVN of the stacked groups, built independently in NumPy
    p = np.exp(THETA)
    blocks = [_se(x[i], x[i], p[g], p[4]) + (p[5] ** 2 + JITTER) * np.eye(i.size)
              for g, i in enumerate(rows)]  # fmt: skip
    K0 = _se(U, U, p[6], p[7]) + JITTER * np.eye(U.size) if shared else None
    C = dense_covariance(blocks, rows, K0, u_index)
    ref = multivariate_normal(np.zeros(r.size), C).logpdf(r)
    assert abs(vs - ref) < 1e-10
    assert abs(vs - vd) < 1e-10
    np.testing.assert_allclose(gs, gd, rtol=1e-9, atol=1e-10)
    if not shared:  # without f0 the population parameters do not enter
        assert gs[6] == 0.0 and gs[7] == 0.0


@pytest.mark.parametrize("shared", [True, False])
def test_padded_batched_form_equals_the_loop_and_dense(shared):
    theta, s, _, (_, _, rows, u_index, r) = _graphs(shared)
    tp, sp = _padded_graph(shared)
    f = pytensor.function([theta], [s, *pytensor.grad(s, [theta])], mode=EAGER_MODE)
    fp = pytensor.function([tp], [sp, *pytensor.grad(sp, [tp])], mode=EAGER_MODE)
    for th in (THETA, THETA + 0.3):
        (v, g), (vp, gp) = f(th), fp(th)
        assert abs(v - vp) < 1e-10
        np.testing.assert_allclose(gp, g, rtol=1e-9, atol=1e-10)
    lay = PaddedLayout.of(rows, u_index)
    assert lay.mask.sum() == r.size and lay.mask.shape == (4, 7)
    assert np.all(lay.u[~lay.mask] == 7) and np.array_equal(
        lay.u[lay.mask], u_index[lay.index[lay.mask]]
    )


def test_structured_gradient_matches_finite_differences():
    theta, s, _, _ = _graphs(True)
    f = pytensor.function([theta], s, mode=EAGER_MODE)
    g = pytensor.function([theta], pytensor.grad(s, theta), mode=EAGER_MODE)(THETA)
    h = 1e-6
    fd = np.array([(f(THETA + h * e) - f(THETA - h * e)) / (2 * h) for e in np.eye(THETA.size)])
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-7)
    # every parameter enters, except the length-scale of the group with one point (index 3)
    assert np.all(np.abs(np.delete(g, 3)) > 1e-3) and g[3] == 0.0


def test_not_positive_definite_gives_minus_infinity():
    r = np.array([0.1, -0.2])
    A = pt.dmatrix("A")
    f = pytensor.function([A], structured_logp(r, [A], [np.array([0, 1])]), mode=EAGER_MODE)
    assert f(np.array([[1.0, 2.0], [2.0, 1.0]])) == -np.inf
    assert np.isfinite(f(np.eye(2)))


def test_numpy_factor_solves_inverts_and_gives_loo():
    U, x, rows, u_index, r = _layout(1)
    p = np.exp(THETA)
    blocks = [_se(x[i], x[i], p[g], p[4]) + (p[5] ** 2 + JITTER) * np.eye(i.size)
              for g, i in enumerate(rows)]  # fmt: skip
    K0 = _se(U, U, p[6], p[7]) + JITTER * np.eye(U.size)
    C = dense_covariance(blocks, rows, K0, u_index)
    fac = StructuredFactor.of(blocks, rows, K0, u_index)
    R = np.random.default_rng(2).normal(size=(r.size, 3))
    np.testing.assert_allclose(fac.solve(R), np.linalg.solve(C, R), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(fac.solve(r), np.linalg.solve(C, r), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(fac.inverse_diagonal(), np.diag(np.linalg.inv(C)), rtol=1e-9)
    assert abs(fac.logdet() - np.linalg.slogdet(C)[1]) < 1e-10
    ref = multivariate_normal(np.zeros(r.size), C).logpdf(r)
    assert abs(fac.log_density(r) - ref) < 1e-10
    np.testing.assert_allclose(fac.loo(r), loo_log_density(factorize(C, r)), rtol=1e-9)


def test_numpy_factor_batched_solve_equals_group_by_group(monkeypatch):
    """The padded batched solves (groups of 5, 3, 7 and 1 rows) give the group-by-group Cholesky
    solves' numbers, with and without the shared function; a NaN in one group stays there."""
    U, x, rows, u_index, r = _layout(3)
    p = np.exp(THETA)
    blocks = [_se(x[i], x[i], p[g], p[4]) + (p[5] ** 2 + JITTER) * np.eye(i.size)
              for g, i in enumerate(rows)]  # fmt: skip
    K0 = _se(U, U, p[6], p[7]) + JITTER * np.eye(U.size)
    R = np.random.default_rng(4).normal(size=(r.size, 2))
    batched = [StructuredFactor.of(blocks, rows), StructuredFactor.of(blocks, rows, K0, u_index)]
    monkeypatch.setattr(woodbury, "MAX_PADDED_ENTRIES", 0)  # group by group
    looped = [StructuredFactor.of(blocks, rows), StructuredFactor.of(blocks, rows, K0, u_index)]
    for fac, loop in zip(batched, looped, strict=True):
        assert fac.padded is not None and fac.padded[0].shape == (4, 7, 7)
        assert loop.padded is None
        if fac.LB is not None:
            np.testing.assert_allclose(fac.LB, loop.LB, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(fac.solve(R), loop.solve(R), rtol=1e-12, atol=1e-13)
    fac = StructuredFactor.of(blocks, rows)
    bad = R[:, 0].copy()
    bad[rows[1][0]] = np.nan
    out = fac.solve(bad)
    assert np.all(np.isnan(out[rows[1]])) and np.all(np.isfinite(np.delete(out, rows[1])))


def test_layout_errors_name_the_problem():
    A = np.eye(2)
    with pytest.raises(ValueError, match="every row index"):
        structured_logp(np.zeros(3), [A], [np.array([0, 1])])
    with pytest.raises(ValueError, match="blocks for"):
        structured_logp(np.zeros(2), [A, A], [np.array([0, 1])])
    with pytest.raises(ValueError, match="u_index"):
        structured_logp(np.zeros(2), [A], [np.array([0, 1])], K0=np.eye(1))
