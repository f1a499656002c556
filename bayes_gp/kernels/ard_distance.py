r"""Scaled squared distances of an ARD metric as one PyTensor Op, without an ``(n, m, D)`` array.

The stationary kernels of :mod:`bayes_gp.kernels.metrics` need

.. math::
   r^2_{ij} = \sum_{d=1}^{D} \frac{(x_{id} - x'_{jd})^2}{\ell_d^2}

(R&W eq. 4.9 with the ARD metric of R&W §4.2.1, :math:`M = \operatorname{diag}(\ell)^{-2}`;
PRML eq. 6.63 with a vector :math:`\theta_1`) from *exact* coordinate differences, never from the
expansion :math:`|x|^2 - 2x^\top x' + |x'|^2`, which cancels at :math:`r \approx 0`. Written as a
PyTensor graph, ``X[:, None, :] - Xs[None, :, :]`` is an ``(n, m, D)`` array: :math:`8nmD` bytes
(8 GB at n = m = 10⁴, D = 10), constant-folded and held for the life of the compiled function when
``X`` is data, and the reverse mode makes another one. :class:`ARDSquareDist` computes the same
sums dimension by dimension, in the same order (:math:`d = 1, \dots, D`), into the ``(n, m)``
output alone; its pullback :class:`ARDSquareDistGrad` gives, for a cotangent :math:`G`
(:math:`\bar r^2`),

.. math::
   \frac{\partial}{\partial \ell_d} \sum_{ij} G_{ij} r^2_{ij}
       = -\frac{2}{\ell_d^3} \sum_{ij} G_{ij} (x_{id} - x'_{jd})^2, \qquad
   \frac{\partial}{\partial x_{id}} = \frac{2}{\ell_d^2} \sum_j G_{ij} (x_{id} - x'_{jd}), \qquad
   \frac{\partial}{\partial x'_{jd}} = -\frac{2}{\ell_d^2} \sum_i G_{ij} (x_{id} - x'_{jd}),

also from exact differences and with no ``(n, m, D)`` temporary; the input gradients are computed
only when ``X`` or ``Xs`` is not a constant (deep kernels, inducing points).

Backends, registered in :mod:`bayes_gp.op_backends` like the likelihood's Ops: numba (what nutpie
runs) as compiled loops with no temporary beyond the outputs; PyTensor's C/Python backends
through ``perform`` in NumPy, over blocks of at most :data:`BLOCK_ELEMENTS` pairs so that the
temporaries stay a few MB (where both inputs are constants, their squared differences are kept
on the node and only weighted per call: :data:`TERMS_BYTES`); JAX (numpyro) as a loop over
dimensions that XLA fuses.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Apply, Constant
from pytensor.graph.op import Op
from pytensor.graph.traversal import graph_inputs

from bayes_gp.op_backends import ensure_available, op_backend

__all__ = ["ARDSquareDist", "ARDSquareDistGrad", "ard_square_dist", "BLOCK_ELEMENTS"]

#: pairs ``(i, j)`` per block of rows in the NumPy implementations (``perform``): their
#: temporaries are a few arrays of this many float64 (8 MiB each)
BLOCK_ELEMENTS = 2**20

#: the most bytes of squared coordinate differences :class:`ARDSquareDist` keeps for a node
#: whose inputs are both constants (:func:`square_terms`)
TERMS_BYTES = 2**25


def _row_blocks(n: int, m: int):
    step = max(1, BLOCK_ELEMENTS // max(m, 1))
    for start in range(0, n, step):
        yield slice(start, min(start + step, n))


def _check_inputs(X: np.ndarray, Xs: np.ndarray, ls: np.ndarray) -> None:
    if X.shape[1] != Xs.shape[1] or ls.shape != (X.shape[1],):
        raise ValueError(
            f"ARDSquareDist: `X` {X.shape}, `Xs` {Xs.shape} and `ls` {ls.shape} must share the "
            "number of dimensions D: (n, D), (m, D) and (D,)"
        )


def square_dist_numpy(X: np.ndarray, Xs: np.ndarray, ls: np.ndarray) -> np.ndarray:
    r""":math:`r^2_{ij} = \sum_d w_d (x_{id} - x'_{jd})^2`, :math:`w_d = \ell_d^{-2}`, blockwise."""
    _check_inputs(X, Xs, ls)
    n, m = X.shape[0], Xs.shape[0]
    w = 1.0 / (ls * ls)
    out = np.zeros((n, m))
    for rows in _row_blocks(n, m):
        block = out[rows]
        for d in range(X.shape[1]):
            t = X[rows, d, None] - Xs[None, :, d]
            t *= t
            t *= w[d]
            block += t
    return out


def square_terms(X: np.ndarray, Xs: np.ndarray) -> np.ndarray:
    r"""The squared coordinate differences :math:`t_{dij} = (x_{id} - x'_{jd})^2`, ``(D, n, m)``:
    what :func:`square_dist_numpy` weights and sums, for inputs that do not change."""
    return np.stack([np.square(X[:, d, None] - Xs[None, :, d]) for d in range(X.shape[1])])


def weighted_terms(terms: np.ndarray, ls: np.ndarray) -> np.ndarray:
    r""":math:`r^2_{ij} = \sum_d w_d t_{dij}` from :func:`square_terms`, in the order and with
    the roundings of :func:`square_dist_numpy` (each :math:`t_{dij} w_d` rounded, then added for
    :math:`d = 1, \dots, D`): the same numbers, bit for bit, in a third of its time (Pima's
    200 x 200 over 7 inputs: 0.16 against 0.53 ms)."""
    w = 1.0 / (ls * ls)
    out = np.zeros(terms.shape[1:])
    t = np.empty_like(out)
    for d in range(terms.shape[0]):
        np.multiply(terms[d], w[d], out=t)
        out += t
    return out


def square_dist_grad_numpy(
    X: np.ndarray, Xs: np.ndarray, ls: np.ndarray, G: np.ndarray, wrt_inputs: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(d/d ls, d/d X, d/d Xs)`` of :math:`\\sum_{ij} G_{ij} r^2_{ij}` (module docstring)."""
    _check_inputs(X, Xs, ls)
    n, D = X.shape
    m = Xs.shape[0]
    if G.shape != (n, m):
        raise ValueError(f"ARDSquareDistGrad: cotangent of shape {G.shape}, expected {(n, m)}")
    w = 1.0 / (ls * ls)
    s = np.zeros(D)  # sum_ij G_ij t_ijd^2
    gX = np.zeros((n, D))
    gXs = np.zeros((m, D))
    for rows in _row_blocks(n, m):
        Gb = G[rows]
        for d in range(D):
            t = X[rows, d, None] - Xs[None, :, d]
            gt = Gb * t
            if wrt_inputs:
                gX[rows, d] += gt.sum(axis=1)
                gXs[:, d] -= gt.sum(axis=0)
            gt *= t
            s[d] += gt.sum()
    return -2.0 * s / (ls * ls * ls), 2.0 * w * gX, 2.0 * w * gXs


def _keeps_terms(node, X: np.ndarray, Xs: np.ndarray) -> bool:
    """Whether ``node``'s squared differences are worth keeping: both inputs constants, at most
    :data:`TERMS_BYTES` of them."""
    constant = all(isinstance(v, Constant) for v in node.inputs[:2])
    return constant and 8 * X.shape[0] * Xs.shape[0] * X.shape[1] <= TERMS_BYTES


class ARDSquareDist(Op):
    r"""``(X (n, D), Xs (m, D), ls (D,)) -> r2 (n, m)``, :math:`r^2_{ij} = \sum_d
    (x_{id} - x'_{jd})^2 / \ell_d^2` from exact differences (module docstring)."""

    __props__ = ()

    def make_node(self, X, Xs, ls):
        ensure_available()
        X, Xs, ls = (pt.as_tensor_variable(v).astype("float64") for v in (X, Xs, ls))
        if X.type.ndim != 2 or Xs.type.ndim != 2 or ls.type.ndim != 1:
            raise TypeError("ARDSquareDist needs matrices X (n, D), Xs (m, D) and a vector ls (D,)")
        out = pt.tensor(dtype="float64", shape=(X.type.shape[0], Xs.type.shape[0]))
        return Apply(self, [X, Xs, ls], [out])

    def perform(self, node, inputs, outputs):
        """:func:`square_dist_numpy`; where ``X`` and ``Xs`` are both constants of at most
        :data:`TERMS_BYTES` of squared differences, those are computed once and kept on the node
        (:func:`square_terms`), and each call only weights them (:func:`weighted_terms`: the same
        numbers): the NumPy backends' kernel matrices at many hyperparameter values (the
        per-draw passes after NUTS)."""
        X, Xs, ls = (np.asarray(v, dtype=float) for v in inputs)
        terms = getattr(node.tag, "square_terms", None)
        if terms is None and _keeps_terms(node, X, Xs):
            _check_inputs(X, Xs, ls)
            node.tag.square_terms = terms = square_terms(X, Xs)
        if terms is not None and ls.shape == (terms.shape[0],):
            outputs[0][0] = weighted_terms(terms, ls)
        else:
            outputs[0][0] = square_dist_numpy(X, Xs, ls)

    def infer_shape(self, node, shapes):
        return [(shapes[0][0], shapes[1][0])]

    def pullback(self, inputs, outputs, cotangents):
        X, Xs, ls = inputs
        # inputs built from constants only (data, sliced to the active dimensions) need no gradient
        wrt_inputs = not all(isinstance(v, Constant) for v in graph_inputs([X, Xs]))
        gls, gX, gXs = ARDSquareDistGrad(wrt_inputs)(X, Xs, ls, cotangents[0])
        return [gX, gXs, gls]


class ARDSquareDistGrad(Op):
    """``(X, Xs, ls, G) -> (d/d ls, d/d X, d/d Xs)`` of :math:`\\sum_{ij} G_{ij} r^2_{ij}`.

    ``wrt_inputs=False`` (both inputs constant) leaves the input gradients zero and skips
    their work. Not differentiable again (no Hessians through it).
    """

    __props__ = ("wrt_inputs",)

    def __init__(self, wrt_inputs: bool = True):
        self.wrt_inputs = bool(wrt_inputs)

    def make_node(self, X, Xs, ls, G):
        ensure_available()
        X, Xs, ls, G = (pt.as_tensor_variable(v).astype("float64") for v in (X, Xs, ls, G))
        return Apply(self, [X, Xs, ls, G], [ls.type(), X.type(), Xs.type()])

    def perform(self, node, inputs, outputs):
        X, Xs, ls, G = (np.asarray(v, dtype=float) for v in inputs)
        for out, value in zip(
            outputs, square_dist_grad_numpy(X, Xs, ls, G, self.wrt_inputs), strict=True
        ):
            out[0] = value

    def infer_shape(self, node, shapes):
        return [shapes[2], shapes[0], shapes[1]]


def ard_square_dist(X, Xs, ls) -> pt.TensorVariable:
    r"""Squared scaled distances :math:`r^2_{ij} = \sum_d (x_{id} - x'_{jd})^2 / \ell_d^2` by
    :class:`ARDSquareDist`.

    Parameters
    ----------
    X : array_like or TensorVariable, shape ``(n, D)``
    Xs : array_like, TensorVariable or None, shape ``(m, D)``
        ``None``: ``X`` itself (then :math:`r^2` is exactly symmetric with a zero diagonal).
    ls : scalar or vector of length ``D`` (or 1)
        Length-scales, broadcast to the ``D`` columns (isotropic or ARD).

    Returns
    -------
    TensorVariable, shape ``(n, m)``
    """
    X = pt.as_tensor_variable(X)
    Xs = X if Xs is None else pt.as_tensor_variable(Xs)
    D = X.type.shape[1] if X.type.shape[1] is not None else X.shape[1]
    ls_vec = pt.ones((D,), dtype="float64") * pt.as_tensor_variable(ls)
    return ARDSquareDist()(X, Xs, ls_vec)


# ------------------------------------------------------------------------ backends
@op_backend("numba")
def _register_numba() -> None:
    from pytensor.link.numba.dispatch.basic import numba_njit, register_funcify_and_cache_key

    from bayes_gp.op_backends import numba_cache_key

    @numba_njit
    def square_dist_numba(X, Xs, ls):
        n, D = X.shape
        m = Xs.shape[0]
        XsT = np.ascontiguousarray(Xs.T)
        w = 1.0 / (ls * ls)
        out = np.zeros((n, m))
        for i in range(n):  # row i of the output stays in cache while d runs
            for d in range(D):
                xi = X[i, d]
                wd = w[d]
                for j in range(m):
                    t = xi - XsT[d, j]
                    out[i, j] += t * t * wd
        return out

    @register_funcify_and_cache_key(ARDSquareDist)
    def _numba_square_dist(op, node=None, **kwargs):
        return square_dist_numba, numba_cache_key(op, __name__)

    @register_funcify_and_cache_key(ARDSquareDistGrad)
    def _numba_square_dist_grad(op, node=None, **kwargs):
        wrt_inputs = op.wrt_inputs

        @numba_njit
        def square_dist_grad_numba(X, Xs, ls, G):
            n, D = X.shape
            m = Xs.shape[0]
            XsT = np.ascontiguousarray(Xs.T)
            s = np.zeros(D)
            gX = np.zeros((n, D))
            gXsT = np.zeros((D, m))
            for i in range(n):
                for d in range(D):
                    xi = X[i, d]
                    acc_t = 0.0
                    acc_t2 = 0.0
                    for j in range(m):
                        t = xi - XsT[d, j]
                        gt = G[i, j] * t
                        acc_t += gt
                        acc_t2 += gt * t
                        if wrt_inputs:
                            gXsT[d, j] -= gt
                    s[d] += acc_t2
                    gX[i, d] += acc_t
            gls = np.empty(D)
            for d in range(D):
                wd = 1.0 / (ls[d] * ls[d])
                gls[d] = -2.0 * s[d] / (ls[d] * ls[d] * ls[d])
                for i in range(n):
                    gX[i, d] *= 2.0 * wd
            gXs = np.empty((m, D))
            for j in range(m):
                for d in range(D):
                    gXs[j, d] = 2.0 * gXsT[d, j] / (ls[d] * ls[d])
            if not wrt_inputs:
                gX[:, :] = 0.0
            return gls, gX, gXs

        return square_dist_grad_numba, numba_cache_key(op, __name__)


@op_backend("jax")
def _register_jax() -> None:
    from pytensor.link.jax.dispatch import jax_funcify

    @jax_funcify.register(ARDSquareDist)
    def _jax_square_dist(op, **kwargs):
        def square_dist_jax(X, Xs, ls):
            w = 1.0 / (ls * ls)
            out = 0.0
            for d in range(X.shape[1]):  # D is static under jit: unrolled, fused by XLA
                t = X[:, d, None] - Xs[None, :, d]
                out = out + t * t * w[d]
            return out

        return square_dist_jax

    @jax_funcify.register(ARDSquareDistGrad)
    def _jax_square_dist_grad(op, **kwargs):
        import jax.numpy as jnp

        def square_dist_grad_jax(X, Xs, ls, G):
            w = 1.0 / (ls * ls)
            s, gX, gXs = [], [], []
            for d in range(X.shape[1]):
                t = X[:, d, None] - Xs[None, :, d]
                gt = G * t
                s.append(jnp.sum(gt * t))
                gX.append(2.0 * w[d] * jnp.sum(gt, axis=1))
                gXs.append(-2.0 * w[d] * jnp.sum(gt, axis=0))
            return -2.0 * jnp.stack(s) / (ls * ls * ls), jnp.stack(gX, 1), jnp.stack(gXs, 1)

        return square_dist_grad_jax
