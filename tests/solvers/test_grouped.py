"""The grouped Woodbury log density as one Op (:mod:`bayes_gp.solvers.grouped`): value and
closed-form gradients against the dense multivariate normal (SciPy, R&W eq. 5.9), in every
PyTensor backend, with groups of unequal sizes (padding), and the failures a sampler must see
as -inf."""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import stats

from bayes_gp import op_backends
from bayes_gp.hierarchical.woodbury import PaddedLayout, dense_covariance
from bayes_gp.linalg import EAGER_MODE
from bayes_gp.solvers.grouped import grouped_gp_logp, grouped_numpy

MODES = {"PY": EAGER_MODE, "NUMBA": "NUMBA", "JAX": "JAX"}
LOG_2PI = np.log(2.0 * np.pi)


def _spd(rng, k):
    X = rng.normal(size=(k, k + 2))
    return X @ X.T / k + 0.5 * np.eye(k)


def _problem(seed=0, sizes=(3, 5, 4, 1), m=4):
    """Blocks of unequal sizes (padded to 5), a shared covariance over m distinct inputs that
    rows of several groups share, residuals; with the dense C they define."""
    rng = np.random.default_rng(seed)
    rows, start = [], 0
    for k in sizes:
        rows.append(np.arange(start, start + k))
        start += k
    N = start
    u_index = rng.integers(0, m, N)
    u_index[:m] = np.arange(m)
    layout = PaddedLayout.of(rows, u_index)
    G, n = layout.mask.shape
    blocks = [_spd(rng, k) for k in sizes]
    A = np.broadcast_to(np.eye(n), (G, n, n)).copy()
    for g, b in enumerate(blocks):
        A[g, : sizes[g], : sizes[g]] = b
    K0 = _spd(rng, m)
    r = rng.normal(size=N)
    R = np.where(layout.mask, r[layout.index], 0.0)
    return dict(rows=rows, u_index=u_index, layout=layout, blocks=blocks, A=A, K0=K0, r=r, R=R,
                N=N, sizes=sizes)  # fmt: skip


def _dense_reference(p, shared=True):
    """``(log p, alpha, dlogp/dC)`` of the dense C (SciPy and R&W eq. 5.9)."""
    C = dense_covariance(p["blocks"], p["rows"], p["K0"] if shared else None,
                         p["u_index"] if shared else None)  # fmt: skip
    Ci = np.linalg.inv(C)
    alpha = Ci @ p["r"]
    logp = stats.multivariate_normal(np.zeros(p["N"]), C).logpdf(p["r"])
    return logp, alpha, 0.5 * (np.outer(alpha, alpha) - Ci)


@pytest.mark.parametrize("shared", [True, False])
def test_numpy_version_is_the_dense_density_and_its_gradient(shared):
    p = _problem()
    logp, alpha, W = _dense_reference(p, shared)
    lay = p["layout"]
    out = grouped_numpy(p["R"], p["A"], lay.u if shared else None, p["K0"] if shared else None)
    np.testing.assert_allclose(float(out[0]) - 0.5 * p["N"] * LOG_2PI, logp, rtol=1e-13)
    np.testing.assert_allclose(out[1][lay.mask], alpha[lay.index[lay.mask]], atol=1e-13)
    np.testing.assert_array_equal(out[1][~lay.mask], 0.0)  # padding: no residual, no alpha
    for g, (idx, k) in enumerate(zip(p["rows"], p["sizes"], strict=True)):
        np.testing.assert_allclose(out[2][g, :k, :k], W[np.ix_(idx, idx)], atol=1e-13)
    if shared:  # dC/dK0 = Z^T (.) Z
        Z = np.eye(p["K0"].shape[0])[p["u_index"]]
        np.testing.assert_allclose(out[3], Z.T @ W @ Z, atol=1e-13)


def _function(shared, mode, N):
    R, A, K0, u = pt.dmatrix("R"), pt.tensor3("A"), pt.dmatrix("K0"), pt.lmatrix("u")
    if shared:
        out = grouped_gp_logp(R, A, N, u, K0)
        return pytensor.function([R, A, u, K0], [out, *pt.grad(out, [R, A, K0])], mode=mode)
    out = grouped_gp_logp(R, A, N)
    return pytensor.function([R, A], [out, *pt.grad(out, [R, A])], mode=mode)


@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("mode", list(MODES))
def test_every_backend_gives_the_same_value_and_gradients(mode, shared):
    if mode == "JAX":
        pytest.importorskip("jax")
        op_backends.ensure("jax")
    p = _problem(seed=1)
    lay = p["layout"]
    args = (p["R"], p["A"], lay.u, p["K0"]) if shared else (p["R"], p["A"])
    got = _function(shared, MODES[mode], p["N"])(*args)
    ref = grouped_numpy(p["R"], p["A"], *((lay.u, p["K0"]) if shared else (None, None)))
    np.testing.assert_allclose(float(got[0]), float(ref[0]) - 0.5 * p["N"] * LOG_2PI, rtol=1e-13)
    np.testing.assert_allclose(got[1], -ref[1], atol=1e-12)  # d/dR = -alpha
    np.testing.assert_allclose(got[2], ref[2], atol=1e-12)
    if shared:
        np.testing.assert_allclose(got[3], ref[3], atol=1e-12)


def test_gradient_along_a_symmetric_direction_matches_finite_differences():
    """The pullback through a covariance built from hyperparameters: d/dt log p(C(t)) for
    blocks scaled by t and K0 by t^2, against central differences of the dense density."""
    p = _problem(seed=2)
    lay = p["layout"]
    t = pt.dscalar("t")
    mask = lay.mask.astype(float)
    A = pt.as_tensor_variable(p["A"]) * (t * mask[:, :, None] * mask[:, None, :]
                                         + (1 - mask[:, :, None] * mask[:, None, :]))  # fmt: skip
    out = grouped_gp_logp(p["R"], A, p["N"], lay.u, t**2 * pt.as_tensor_variable(p["K0"]))
    f = pytensor.function([t], [out, pt.grad(out, t)], mode="NUMBA")

    def dense(s):
        C = dense_covariance([s * b for b in p["blocks"]], p["rows"], s**2 * p["K0"],
                             p["u_index"])  # fmt: skip
        return stats.multivariate_normal(np.zeros(p["N"]), C).logpdf(p["r"])

    h = 1e-5
    fd = (dense(1.3 + h) - dense(1.3 - h)) / (2 * h)
    value, grad = f(1.3)
    np.testing.assert_allclose(float(value), dense(1.3), rtol=1e-12)
    np.testing.assert_allclose(float(grad), fd, rtol=1e-7)


@pytest.mark.parametrize("mode", list(MODES))
def test_a_matrix_that_is_not_positive_definite_is_minus_infinity(mode):
    if mode == "JAX":
        pytest.importorskip("jax")
        op_backends.ensure("jax")
    p = _problem(seed=3)
    lay = p["layout"]
    f = _function(True, MODES[mode], p["N"])
    bad_block = p["A"].copy()
    bad_block[1, 0, 0] = -1.0
    nan_block = p["A"].copy()
    nan_block[0, 1, 1] = np.nan
    negative = -100.0 * p["K0"]  # C = A + Z K0 Z^T indefinite:
    assert np.linalg.eigvalsh(dense_covariance(p["blocks"], p["rows"], negative,
                                               p["u_index"]))[0] < 0  # fmt: skip
    for A, K0 in ((bad_block, p["K0"]), (nan_block, p["K0"]), (p["A"], negative)):
        assert float(f(p["R"], A, lay.u, K0)[0]) == -np.inf
    g = _function(False, MODES[mode], p["N"])
    assert float(g(p["R"], bad_block)[0]) == -np.inf


@pytest.mark.parametrize("mode", ["PY", "NUMBA"])
def test_a_shared_covariance_of_low_rank_and_large_scale_is_exact(mode):
    """Common effects under wide priors: K0 = 1e6 (1 + d d^T) at m = 4 distinct inputs has
    rank 2 and no jitter; K0 is never factorised, so the density is the dense one."""
    p = _problem(seed=4)
    d = np.arange(4.0)
    p["K0"] = 1e6 * (1.0 + np.outer(d, d))
    logp, alpha, W = _dense_reference(p)
    lay = p["layout"]
    got = _function(True, MODES[mode], p["N"])(p["R"], p["A"], lay.u, p["K0"])
    np.testing.assert_allclose(float(got[0]), logp, rtol=1e-10)
    np.testing.assert_allclose(-got[1][lay.mask], alpha[lay.index[lay.mask]], rtol=1e-7,
                               atol=1e-9)  # fmt: skip
    Z = np.eye(4)[p["u_index"]]
    np.testing.assert_allclose(got[3], Z.T @ W @ Z, atol=1e-10)


def test_the_op_refuses_inputs_of_the_wrong_shape():
    from bayes_gp.solvers.grouped import GroupedGPLogp

    with pytest.raises(TypeError, match="residuals R"):
        GroupedGPLogp(False)(pt.dvector(), pt.tensor3())
    with pytest.raises(TypeError, match="needs u"):
        GroupedGPLogp(True)(pt.dmatrix(), pt.tensor3())
