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

**In place (issue 19).** The linear algebra allocates no ``n x n`` matrix of its own where
PyTensor lets it overwrite its input: ``potrf`` writes :math:`L` over :math:`C`, ``potri``
writes :math:`C^{-1}` over :math:`L` (both on the Fortran-ordered view of the C-ordered buffer,
so LAPACK copies nothing; the lower triangle of the inverse is mirrored into the upper one block
by block), and the cotangent :math:`\tfrac12(\alpha\alpha^T - C^{-1})` is one elementwise
expression that PyTensor fuses with the kernel's gradient and writes over :math:`C^{-1}`. The
Ops are built copying (``inplace=False``); the rewrite :func:`local_gp_inplace` (PyTensor's
``fast_run`` / ``inplace`` rewrites, position 50.2) switches them to ``inplace=True``
(``destroy_map``) only where the destroy handler validates it: a function input or output, or a
matrix read again after the Op, keeps the copy. Peak memory of the exact GP's gradient:
:mod:`bayes_gp.solvers.exact`.

The Ops run natively in PyTensor's C and Python backends (``perform``), in the numba backend
with LAPACK called from nopython code (:mod:`bayes_gp.solvers._numba_lapack`; not through
``numba.objmode``, which takes the GIL and made nutpie's parallel chains wait for each other),
and in JAX through ``jax.numpy`` (so ``sampler="numpyro"`` works). A matrix that is not
positive definite gives :math:`\log p = -\infty`, which NUTS treats as a rejected (divergent)
step, like PyMC's own multivariate normal.
"""

from __future__ import annotations

import functools

import numpy as np
import pytensor.tensor as pt
from pytensor.compile import optdb
from pytensor.gradient import DisconnectedType
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.graph.rewriting.basic import WalkingGraphRewriter, copy_stack_trace, node_rewriter
from scipy.linalg import lapack

from bayes_gp.op_backends import ensure_available, op_backend

__all__ = ["GPLogp", "CholeskyInverse", "gp_logp", "marginal_normal"]

_LOG_2PI = float(np.log(2.0 * np.pi))


#: rows and columns per block when the lower triangle of :math:`C^{-1}` is mirrored into the upper
#: one (``b x b`` temporaries only, cache-friendly transposes)
_MIRROR_BLOCK = 256


def _c_ordered_work(A: np.ndarray, overwrite: bool) -> np.ndarray:
    """``A`` itself when it may be overwritten and is C-ordered float64, else a C-ordered copy."""
    if overwrite and A.dtype == np.float64 and A.flags.c_contiguous and A.flags.writeable:
        return A
    return np.array(A, dtype=np.float64, order="C", copy=True)


def _logp_numpy(C: np.ndarray, r: np.ndarray, overwrite: bool = False):
    r"""``(log N(r | 0, C), alpha = C^{-1} r, L)`` with :math:`C = LL^T` (R&W eq. 2.30).

    ``L`` is C-ordered, lower triangular, zero above the diagonal. With ``overwrite`` and a
    C-ordered ``C``, ``L`` is written over ``C`` (no ``n x n`` allocation): the F-ordered view
    ``C.T`` holds the same symmetric matrix, LAPACK ``potrf`` factorises it in place as
    :math:`U^TU` with :math:`U = L^T`, and the C-ordered view of that buffer is ``L``.
    Otherwise ``C`` is copied once. Not positive definite: ``(-inf, NaN, NaN)``.
    """
    n = r.shape[0]
    work = _c_ordered_work(C, overwrite)
    U, info = lapack.dpotrf(work.T, lower=0, clean=1, overwrite_a=1)
    if not np.may_share_memory(U, work):  # f2py copied after all: keep the contract
        work.T[...] = U
    L = work
    diag = np.diagonal(L)
    # a NaN or infinite entry of C reaches the diagonal of L (or stops potrf): checking the
    # diagonal is enough, with no n x n temporary
    if info != 0 or not np.all(np.isfinite(diag)):
        L.fill(np.nan)
        return -np.inf, np.full(n, np.nan), L
    alpha, info = lapack.dpotrs(L.T, r, lower=0)
    logp = -0.5 * float(r @ alpha) - float(np.sum(np.log(diag))) - 0.5 * n * _LOG_2PI
    return logp, alpha, L


@functools.lru_cache(maxsize=8)
def _strict_upper(b: int) -> np.ndarray:
    """Boolean mask of the strict upper triangle of a ``b x b`` block (cached, read-only)."""
    mask = np.triu(np.ones((b, b), dtype=bool), 1)
    mask.flags.writeable = False
    return mask


def _mirror_lower(A: np.ndarray) -> np.ndarray:
    """Copy the lower triangle of the square ``A`` into its upper one, in place, block by block
    (``A[I, J] = A[J, I].T``): ``A`` becomes symmetric with no ``n x n`` temporary."""
    n, b = A.shape[0], _MIRROR_BLOCK
    for i0 in range(0, n, b):
        i1 = min(i0 + b, n)
        D = A[i0:i1, i0:i1]
        np.copyto(D, D.T, where=_strict_upper(i1 - i0))  # NumPy buffers the overlapping D.T
        for j0 in range(i1, n, b):
            j1 = min(j0 + b, n)
            A[i0:i1, j0:j1] = A[j0:j1, i0:i1].T
    return A


def _inverse_numpy(L: np.ndarray, overwrite: bool = False) -> np.ndarray:
    r""":math:`C^{-1} = L^{-T}L^{-1}` from the lower factor ``L`` (LAPACK ``potri``), C-ordered.

    With ``overwrite`` and a C-ordered ``L``, the inverse is written over ``L``: ``potri`` works
    in place on the F-ordered view ``L.T`` (upper factor :math:`U = L^T`), leaving the lower
    triangle of :math:`C^{-1}` in the C-ordered view, which :func:`_mirror_lower` completes.
    Otherwise ``L`` is copied once. A non-finite or singular factor gives NaN.
    """
    work = _c_ordered_work(L, overwrite)
    if not np.all(np.isfinite(np.diagonal(work))):
        work.fill(np.nan)
        return work
    inv, info = lapack.dpotri(work.T, lower=0, overwrite_c=1)
    if info != 0:
        work.fill(np.nan)
        return work
    if not np.may_share_memory(inv, work):
        work.T[...] = inv
    return _mirror_lower(work)


def _square_type(A):
    """A float64 matrix type with ``A``'s static size (either dimension, the matrix is square):
    PyTensor writes an elementwise result in place over an input only when the types agree."""
    size = next((s for s in A.type.shape if s is not None), None)
    return pt.tensor(dtype="float64", shape=(size, size))


class CholeskyInverse(Op):
    """:math:`C^{-1}` from the lower Cholesky factor :math:`L` of :math:`C` (LAPACK ``potri``).

    ``inplace=True`` overwrites ``L`` with :math:`C^{-1}` (``destroy_map``); graphs are built with
    ``inplace=False`` and PyTensor's rewrite :func:`local_gp_inplace` switches to the in-place
    Op where nothing else needs ``L`` (it is only the log density's by-product).
    """

    __props__ = ("inplace",)

    def __init__(self, inplace: bool = False):
        self.inplace = bool(inplace)
        if self.inplace:
            self.destroy_map = {0: [0]}

    def make_node(self, L):
        ensure_available()
        L = pt.as_tensor_variable(L).astype("float64")
        if L.type.ndim != 2:
            raise TypeError("CholeskyInverse needs a matrix")
        return Apply(self, [L], [_square_type(L)])

    def perform(self, node, inputs, outputs):
        outputs[0][0] = _inverse_numpy(np.asarray(inputs[0]), overwrite=self.inplace)

    def infer_shape(self, node, shapes):
        return [shapes[0]]


class GPLogp(Op):
    """``(C, r) -> (log N(r | 0, C), alpha = C^{-1} r, L = chol(C))``.

    Only the first output is meant to be differentiated (the others are by-products the
    gradient reuses); ``C`` must be symmetric, and its gradient is the symmetric
    :math:`\\tfrac12(\\alpha\\alpha^T - C^{-1})` of R&W eq. 5.9. ``inplace=True`` factorises ``C``
    in place (``destroy_map``: ``L`` is written over ``C``); graphs are built with
    ``inplace=False`` and :func:`local_gp_inplace` switches where PyTensor allows it.
    """

    __props__ = ("inplace",)

    def __init__(self, inplace: bool = False):
        self.inplace = bool(inplace)
        if self.inplace:
            self.destroy_map = {2: [0]}

    def make_node(self, C, r):
        ensure_available()
        C = pt.as_tensor_variable(C).astype("float64")
        r = pt.as_tensor_variable(r).astype("float64")
        if C.type.ndim != 2 or r.type.ndim != 1:
            raise TypeError("GPLogp needs a covariance matrix C and a residual vector r")
        alpha = pt.tensor(dtype="float64", shape=r.type.shape)
        return Apply(self, [C, r], [pt.dscalar(), alpha, _square_type(C)])

    def perform(self, node, inputs, outputs):
        C, r = inputs
        logp, alpha, L = _logp_numpy(
            np.asarray(C), np.asarray(r, dtype=np.float64), overwrite=self.inplace
        )
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
        # one elementwise expression over C^{-1}: PyTensor fuses it and writes it in place
        half_g = 0.5 * g
        dC = (half_g * alpha)[:, None] * alpha[None, :] - half_g * CholeskyInverse()(L)
        return [dC, -g * alpha]

    def connection_pattern(self, node):
        return [[True, True, True], [True, True, False]]


@node_rewriter([GPLogp, CholeskyInverse], inplace=True)
def local_gp_inplace(fgraph, node):
    """Replace :class:`GPLogp` / :class:`CholeskyInverse` by their in-place versions.

    PyTensor's destroy handler validates the replacement: it is refused (and the copying Op
    kept) when the input is a function input, a function output, or is needed by another node
    after this one.
    """
    if node.op.inplace:
        return False
    new = type(node.op)(inplace=True).make_node(*node.inputs)
    copy_stack_trace(node.outputs, new.outputs)
    return new.outputs


optdb.register(
    "bayes_gp_gp_logp_inplace",
    WalkingGraphRewriter(local_gp_inplace, failure_callback=WalkingGraphRewriter.warn_inplace),
    "fast_run",
    "inplace",
    position=50.2,
)


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
    from pytensor.link.numba.dispatch.basic import numba_njit, register_funcify_and_cache_key

    from bayes_gp.op_backends import numba_cache_key
    from bayes_gp.solvers._numba_lapack import build

    native = build()  # LAPACK from nopython code; None: PyTensor's bindings are not importable
    # cached on disk (PyTensor's numba cache) only the native versions: objmode calls Python
    sources = (__name__, "bayes_gp.solvers._numba_lapack")

    @register_funcify_and_cache_key(GPLogp)
    def _numba_gp_logp(op, node=None, **kwargs):
        overwrite = op.inplace
        key = numba_cache_key(op, *sources, native=native is not None)
        if native is not None:  # no objmode: chains in nutpie's threads do not wait for the GIL
            return native[0](overwrite), key
        f64 = numba.types.float64
        # PyTensor's numba backend passes scalars as 0-d arrays
        ret_sig = numba.types.Tuple(
            [numba.types.Array(f64, 0, "C"), numba.types.Array(f64, 1, "C"), f64[:, ::1]]
        )

        @numba_njit
        def gp_logp_numba(C, r):
            # objmode sees the numba arrays' own buffers: with ``overwrite`` L is C's memory,
            # C-ordered already, and goes back to numba without a copy
            with numba.objmode(ret=ret_sig):
                logp, alpha, L = _logp_numpy(np.asarray(C), np.asarray(r), overwrite)
                ret = (np.asarray(logp, dtype=float), np.ascontiguousarray(alpha), L)
            return ret

        return gp_logp_numba, key

    @register_funcify_and_cache_key(CholeskyInverse)
    def _numba_chol_inverse(op, node=None, **kwargs):
        overwrite = op.inplace
        key = numba_cache_key(op, *sources, native=native is not None)
        if native is not None:
            return native[1](overwrite), key
        ret_sig = numba.types.float64[:, ::1]

        @numba_njit
        def chol_inverse_numba(L):
            with numba.objmode(ret=ret_sig):
                ret = _inverse_numpy(np.asarray(L), overwrite)
            return ret

        return chol_inverse_numba, key


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
