r"""The exact GP log marginal likelihood as one PyTensor Op with its closed-form gradient.

For :math:`y \sim N(m, C)`, :math:`C = K_\theta + \sigma^2 I`, with :math:`C = LL^T` and
:math:`\alpha = C^{-1}(y - m)` (R&W eq. 2.30, PRML eq. 6.69):

.. math::
   \log p(y \mid \theta) = -\tfrac12 (y - m)^T \alpha - \sum_i \log L_{ii} - \tfrac n2 \log 2\pi,
   \qquad
   \frac{\partial \log p}{\partial C} = \tfrac12 \left(\alpha\alpha^T - C^{-1}\right),
   \qquad
   \frac{\partial \log p}{\partial m} = \alpha

(R&W eq. 5.9). PyTensor differentiates only the kernel and mean graphs; the linear algebra is one
Cholesky factorisation (LAPACK ``potrf``), one solve (``potrs``) and, for the gradient, the inverse
from the factor (``potri``): :math:`n^3` flops in all, the floor for this gradient. Differentiating
a generic multivariate normal through its Cholesky factor instead costs several times that
(``benchmarks/gradient.py``: 2.5x slower at n = 1000).

The Ops run natively in PyTensor's C and Python backends (``perform``), in the numba backend
through ``numba.objmode`` (LAPACK dominates: the call overhead is microseconds), and in JAX through
``jax.numpy`` (so ``sampler="numpyro"`` works). A matrix that is not positive definite gives
:math:`\log p = -\infty`, which NUTS treats as a rejected (divergent) step, like PyMC's own
multivariate normal.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from scipy.linalg import lapack

from bayes_gp.op_backends import ensure_available, op_backend

__all__ = ["GPLogp", "CholeskyInverse", "gp_logp", "marginal_normal"]

_LOG_2PI = float(np.log(2.0 * np.pi))


def _logp_numpy(C: np.ndarray, r: np.ndarray):
    n = r.shape[0]
    L, info = lapack.dpotrf(C, lower=1, clean=1)
    if info != 0 or not np.all(np.isfinite(L)):
        return -np.inf, np.full(n, np.nan), np.full((n, n), np.nan)
    alpha, info = lapack.dpotrs(L, r, lower=1)
    logp = -0.5 * float(r @ alpha) - float(np.sum(np.log(np.diag(L)))) - 0.5 * n * _LOG_2PI
    return logp, alpha, L


def _inverse_numpy(L: np.ndarray) -> np.ndarray:
    if not np.all(np.isfinite(L)):
        return np.full_like(L, np.nan)
    Ci, info = lapack.dpotri(L, lower=1)
    if info != 0:
        return np.full_like(L, np.nan)
    return np.tril(Ci) + np.tril(Ci, -1).T


class CholeskyInverse(Op):
    """:math:`C^{-1}` from the lower Cholesky factor :math:`L` of :math:`C` (LAPACK ``potri``)."""

    __props__ = ()

    def make_node(self, L):
        ensure_available()
        L = pt.as_tensor_variable(L).astype("float64")
        if L.type.ndim != 2:
            raise TypeError("CholeskyInverse needs a matrix")
        return Apply(self, [L], [pt.dmatrix()])

    def perform(self, node, inputs, outputs):
        outputs[0][0] = _inverse_numpy(np.asarray(inputs[0], dtype=float))

    def infer_shape(self, node, shapes):
        return [shapes[0]]


class GPLogp(Op):
    """``(C, r) -> (log N(r | 0, C), alpha = C^{-1} r, L = chol(C))``.

    Only the first output is meant to be differentiated (the others are by-products the
    gradient reuses); ``C`` must be symmetric, and its gradient is the symmetric
    :math:`\\tfrac12(\\alpha\\alpha^T - C^{-1})` of R&W eq. 5.9.
    """

    __props__ = ()

    def make_node(self, C, r):
        ensure_available()
        C = pt.as_tensor_variable(C).astype("float64")
        r = pt.as_tensor_variable(r).astype("float64")
        if C.type.ndim != 2 or r.type.ndim != 1:
            raise TypeError("GPLogp needs a covariance matrix C and a residual vector r")
        return Apply(self, [C, r], [pt.dscalar(), pt.dvector(), pt.dmatrix()])

    def perform(self, node, inputs, outputs):
        C, r = (np.asarray(v, dtype=float) for v in inputs)
        logp, alpha, L = _logp_numpy(C, r)
        outputs[0][0] = np.asarray(logp)
        outputs[1][0] = alpha
        outputs[2][0] = L

    def infer_shape(self, node, shapes):
        return [(), shapes[1], shapes[0]]

    def pullback(self, inputs, outputs, cotangents):
        g, g_alpha, g_L = cotangents
        for extra in (g_alpha, g_L):
            if not isinstance(extra.type, DisconnectedType):
                raise NotImplementedError(
                    "GPLogp: only the log density (output 0) can be differentiated"
                )
        _, alpha, L = outputs
        dC = (0.5 * g) * (pt.outer(alpha, alpha) - CholeskyInverse()(L))
        return [dC, -g * alpha]

    def connection_pattern(self, node):
        return [[True, True, True], [True, True, False]]


def gp_logp(C, r):
    """:math:`\\log N(r \\mid 0, C)` of a symmetric positive-definite ``C`` (a PyTensor scalar)."""
    return GPLogp()(C, r)[0]


def _random(mu, C, rng=None, size=None):
    L = np.linalg.cholesky(C)
    shape = (*(size or np.broadcast_shapes(mu.shape[:-1], C.shape[:-2])), mu.shape[-1])
    z = rng.standard_normal(shape)
    return mu + np.einsum("...ij,...j->...i", L, z)


def marginal_normal(name: str, mu, C, **kwargs):
    """``y ~ N(mu, C)`` as a PyMC variable whose log density is :class:`GPLogp`.

    The drop-in for ``pm.gp.Marginal.marginal_likelihood`` (which builds a ``pm.MvNormal``):
    the same density, the same prior/posterior predictive draws, a cheaper gradient.
    ``kwargs`` go to ``pm.CustomDist`` (``observed``, ``dims``, ...).
    """
    import pymc as pm

    return pm.CustomDist(
        name,
        mu,
        C,
        logp=lambda value, mu, C: gp_logp(C, value - mu),
        random=_random,
        signature="(n),(n,n)->(n)",
        **kwargs,
    )


# ------------------------------------------------------------------------ backends
@op_backend("numba")
def _register_numba() -> None:
    import numba
    from pytensor.link.numba.dispatch.basic import numba_funcify, numba_njit

    @numba_funcify.register(GPLogp)
    def _numba_gp_logp(op, node=None, **kwargs):
        f64 = numba.types.float64
        # PyTensor's numba backend passes scalars as 0-d arrays
        ret_sig = numba.types.Tuple(
            [numba.types.Array(f64, 0, "C"), numba.types.Array(f64, 1, "C"), f64[:, ::1]]
        )

        @numba_njit
        def gp_logp_numba(C, r):
            with numba.objmode(ret=ret_sig):
                logp, alpha, L = _logp_numpy(np.asarray(C), np.asarray(r))
                ret = (np.asarray(logp, dtype=float), np.ascontiguousarray(alpha), L.copy("C"))
            return ret

        return gp_logp_numba

    @numba_funcify.register(CholeskyInverse)
    def _numba_chol_inverse(op, node=None, **kwargs):
        ret_sig = numba.types.float64[:, ::1]

        @numba_njit
        def chol_inverse_numba(L):
            with numba.objmode(ret=ret_sig):
                ret = np.ascontiguousarray(_inverse_numpy(np.asarray(L)))
            return ret

        return chol_inverse_numba


@op_backend("jax")
def _register_jax() -> None:
    """Give the Ops their JAX implementations (for ``sampler="numpyro"`` or ``mode="JAX"``)."""
    from pytensor.link.jax.dispatch import jax_funcify

    @jax_funcify.register(GPLogp)
    def _jax_gp_logp(op, **kwargs):
        import jax.numpy as jnp
        from jax.scipy.linalg import cho_solve

        def gp_logp_jax(C, r):
            L = jnp.linalg.cholesky(C)  # NaN when C is not positive definite
            alpha = cho_solve((L, True), r)
            logp = -0.5 * r @ alpha - jnp.sum(jnp.log(jnp.diag(L))) - 0.5 * r.shape[0] * _LOG_2PI
            logp = jnp.where(jnp.isfinite(logp), logp, -jnp.inf)
            return logp, alpha, L

        return gp_logp_jax

    @jax_funcify.register(CholeskyInverse)
    def _jax_chol_inverse(op, **kwargs):
        import jax.numpy as jnp
        from jax.scipy.linalg import cho_solve

        def chol_inverse_jax(L):
            return cho_solve((L, True), jnp.eye(L.shape[0], dtype=L.dtype))

        return chol_inverse_jax
