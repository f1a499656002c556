r"""The grouped (block-diagonal plus shared low-rank) Gaussian log density as one PyTensor Op with
its closed-form gradient.

For :math:`r \sim N(0, C)` with :math:`C = \operatorname{blockdiag}_g(A_g) + Z K_0 Z^\top`
(the hierarchical GP and the grouped formula engine, :mod:`bayes_gp.hierarchical.woodbury`),
the Woodbury identity and the determinant lemma (R&W eqs. A.9, A.10) give, with
:math:`A_g = L_g L_g^\top`, :math:`K_0 = L_0 L_0^\top`,
:math:`S = Z^\top A^{-1} Z`, :math:`b = Z^\top A^{-1} r`,
:math:`B = I + L_0^\top S L_0` and :math:`H = L_0 B^{-1} L_0^\top`,

.. math::
   \log p(r) = -\tfrac12\left(r^\top A^{-1} r - b^\top H b\right)
   - \tfrac12\left(\textstyle\sum_g \log|A_g| + \log|B|\right) - \tfrac N2 \log 2\pi,

and, since :math:`C^{-1} = A^{-1} - A^{-1} Z H Z^\top A^{-1}`, the gradient of R&W eq. 5.9,
:math:`\partial \log p / \partial C = \tfrac12(\alpha\alpha^\top - C^{-1})` with
:math:`\alpha = C^{-1} r = A^{-1}(r - Z H b)`, taken through the two places :math:`C` is
built from:

.. math::
   \frac{\partial \log p}{\partial A_g} = \tfrac12\left(\alpha_g\alpha_g^\top - A_g^{-1}
   + E_g H E_g^\top\right), \qquad
   \frac{\partial \log p}{\partial K_0} = \tfrac12\left(a a^\top - S + S H S\right),
   \qquad \frac{\partial \log p}{\partial r} = -\alpha,

where :math:`E_g = A_g^{-1} Z_g` and :math:`a = Z^\top \alpha`. The groups come padded to the
largest one (:class:`~bayes_gp.hierarchical.woodbury.PaddedLayout`: identity blocks, zero
residuals and no shared input in the padding, which add exactly nothing), so one Op serves any
number of groups.

Why one Op: the same density written as a PyTensor graph (batched Cholesky factors and
triangular solves, differentiated by PyTensor) costs 133 µs per gradient on the sleepstudy
formula model (18 groups of 10 rows, 10 distinct days) and its numba compilation took 74 s on
a fresh machine (the batched linear algebra's gradient graph); this Op computes the value and
every gradient in one pass of :math:`O(G n_{\max}^3 + G n_{\max}^2 m + m^3)` and compiles once
per machine (PyTensor's numba disk cache, :func:`bayes_gp.op_backends.numba_cache_key`). It runs
in PyTensor's C/Python backend (``perform``, NumPy), in numba without the GIL (LAPACK from
nopython code, :mod:`bayes_gp.solvers._numba_lapack`) and in JAX. A block, :math:`K_0` or
:math:`B` that is not positive definite gives :math:`\log p = -\infty` (a rejected NUTS step).
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

from bayes_gp.op_backends import ensure_available, op_backend

__all__ = ["GroupedGPLogp", "grouped_gp_logp"]

_LOG_2PI = float(np.log(2.0 * np.pi))


def _incidence(u: np.ndarray, m: int) -> np.ndarray:
    """:math:`Z` per group, (G, n_max, m): one-hot rows of ``u`` (padding, ``u == m``: zeros)."""
    return (u[..., None] == np.arange(m)).astype(np.float64)


def grouped_numpy(R: np.ndarray, A: np.ndarray, u: np.ndarray | None, K0: np.ndarray | None):
    """``(log p without the constant, alpha (G, n), dA (G, n, n), dK0 (m, m) or None)`` in
    NumPy (module docstring); ``(-inf, NaN...)`` where a factorisation fails."""
    G, n = R.shape
    m = 0 if K0 is None else K0.shape[0]
    fail = (np.asarray(-np.inf), np.full((G, n), np.nan), np.full((G, n, n), np.nan),
            None if K0 is None else np.full((m, m), np.nan))  # fmt: skip
    if not (np.all(np.isfinite(A)) and np.all(np.isfinite(R))):
        return fail
    try:
        L = np.linalg.cholesky(A)
    except np.linalg.LinAlgError:
        return fail
    Linv = np.linalg.solve(L, np.broadcast_to(np.eye(n), A.shape))
    Ainv = np.swapaxes(Linv, 1, 2) @ Linv
    beta = np.einsum("gij,gj->gi", Ainv, R)
    quad = float(np.sum(R * beta))
    logdet = 2.0 * float(np.sum(np.log(np.diagonal(L, axis1=1, axis2=2))))
    if K0 is None:
        dA = 0.5 * (beta[:, :, None] * beta[:, None, :] - Ainv)
        return np.asarray(-0.5 * quad - 0.5 * logdet), beta, dA, None
    Z = _incidence(u, m)
    E = Ainv @ Z  # (G, n, m)
    S = np.einsum("gim,gik->mk", Z, E)
    b = np.einsum("gim,gi->m", Z, beta)
    try:
        L0 = np.linalg.cholesky(K0)
        LB = np.linalg.cholesky(np.eye(m) + L0.T @ S @ L0)
    except np.linalg.LinAlgError:
        return fail
    P = np.linalg.solve(LB, L0.T)  # LB^{-1} L0^T: H = P^T P
    H = P.T @ P
    Hb = H @ b
    alpha = beta - np.einsum("gim,m->gi", E, Hb)
    logdet += 2.0 * float(np.sum(np.log(np.diag(LB))))
    EP = E @ P.T  # E_g L0 LB^{-T}
    dA = 0.5 * (alpha[:, :, None] * alpha[:, None, :] - Ainv + EP @ np.swapaxes(EP, 1, 2))
    a = np.einsum("gim,gi->m", Z, alpha)
    dK0 = 0.5 * (np.outer(a, a) - S + S @ H @ S)
    return np.asarray(-0.5 * (quad - b @ Hb) - 0.5 * logdet), alpha, dA, dK0


class GroupedGPLogp(Op):
    """``(R, A[, u, K0]) -> (log p + N/2 log 2 pi, alpha, dlogp/dA[, dlogp/dK0])``.

    ``R`` (G, n_max) the padded residuals (0 in padding), ``A`` (G, n_max, n_max) the padded
    blocks (identity in padding), ``u`` (G, n_max) each entry's shared input (``m`` in padding)
    and ``K0`` (m, m) the shared covariance with its jitter, when ``shared``. Only output 0 is
    meant to be differentiated; its pullback is the cotangent times the gradients, which the
    other outputs are (module docstring). The constant :math:`-\\tfrac N2 \\log 2\\pi` is left to
    :func:`grouped_gp_logp`, which knows :math:`N`.
    """

    __props__ = ("shared",)

    def __init__(self, shared: bool):
        self.shared = bool(shared)

    def make_node(self, R, A, u=None, K0=None):
        ensure_available()
        R = pt.as_tensor_variable(R).astype("float64")
        A = pt.as_tensor_variable(A).astype("float64")
        if R.type.ndim != 2 or A.type.ndim != 3:
            raise TypeError("GroupedGPLogp needs residuals R (G, n) and blocks A (G, n, n)")
        inputs = [R, A]
        outputs = [pt.dscalar(), pt.dmatrix(), pt.tensor(dtype="float64", shape=(None,) * 3)]
        if self.shared:
            if u is None or K0 is None:
                raise TypeError("GroupedGPLogp(shared=True) needs u (G, n) and K0 (m, m)")
            u = pt.as_tensor_variable(u).astype("int64")
            K0 = pt.as_tensor_variable(K0).astype("float64")
            if u.type.ndim != 2 or K0.type.ndim != 2:
                raise TypeError("GroupedGPLogp needs u (G, n) and K0 (m, m)")
            inputs += [u, K0]
            outputs.append(pt.dmatrix())
        return Apply(self, inputs, outputs)

    def perform(self, node, inputs, outputs):
        R, A = (np.asarray(x, dtype=np.float64) for x in inputs[:2])
        u, K0 = (np.asarray(inputs[2]), np.asarray(inputs[3], float)) if self.shared else (None, None)
        out = grouped_numpy(R, A, u, K0)
        for k, value in enumerate(out[: len(outputs)]):
            outputs[k][0] = np.asarray(value, dtype=np.float64)

    def infer_shape(self, node, shapes):
        out = [(), shapes[0], shapes[1]]
        return out + ([shapes[3]] if self.shared else [])

    def pullback(self, inputs, outputs, cotangents):
        g = cotangents[0]
        for extra in cotangents[1:]:
            if not isinstance(extra.type, DisconnectedType):
                raise NotImplementedError(
                    "GroupedGPLogp: only the log density (output 0) can be differentiated"
                )
        grads = [-g * outputs[1], g * outputs[2]]
        if self.shared:
            grads += [DisconnectedType()(), g * outputs[3]]
        return grads

    def connection_pattern(self, node):
        rows = [[True] * len(node.outputs) for _ in node.inputs]
        if self.shared:
            rows[2] = [False] * len(node.outputs)
        return rows


def grouped_gp_logp(R, A, n_rows: int, u=None, K0=None):
    """:math:`\\log N(r \\mid 0, C)` (a PyTensor scalar) of the padded residuals ``R`` under
    :math:`C = \\operatorname{blockdiag}(A) + Z K_0 Z^\\top` (module docstring); ``n_rows`` is
    :math:`N`, the rows that are not padding; ``u`` and ``K0`` both or neither."""
    shared = K0 is not None
    out = GroupedGPLogp(shared)(R, A, *((u, K0) if shared else ()))
    return out[0] - 0.5 * n_rows * _LOG_2PI


# ------------------------------------------------------------------------ backends
@op_backend("numba")
def _register_numba() -> None:
    from pytensor.link.numba.dispatch.basic import numba_njit, register_funcify_and_cache_key

    from bayes_gp.op_backends import numba_cache_key
    from bayes_gp.solvers._numba_lapack import factor_kernels

    kernels = factor_kernels()
    if kernels is None:  # pragma: no cover - PyTensor's LAPACK bindings not importable
        return
    cholesky_lower, cholesky_inverse = kernels
    sources = (__name__, "bayes_gp.solvers._numba_lapack")

    @numba_njit
    def blocks(R, A):
        """``(ok, quad, logdet, Ainv, beta)`` of the padded blocks."""
        G, n = R.shape
        Ainv = np.empty((G, n, n))
        beta = np.zeros((G, n))
        quad, logdet = 0.0, 0.0
        for g in range(G):
            work = np.copy(A[g])
            if not cholesky_lower(work):
                return False, 0.0, 0.0, Ainv, beta
            for i in range(n):
                logdet += 2.0 * np.log(work[i, i])
            if not cholesky_inverse(work):
                return False, 0.0, 0.0, Ainv, beta
            Ainv[g] = work
            for i in range(n):
                s = 0.0
                for j in range(n):
                    s += work[i, j] * R[g, j]
                beta[g, i] = s
                quad += R[g, i] * s
        return True, quad, logdet, Ainv, beta

    @numba_njit
    def failed(G, n, m):
        logp = np.empty((), dtype=np.float64)
        logp[()] = -np.inf
        alpha = np.empty((G, n))
        alpha[:] = np.nan
        dA = np.empty((G, n, n))
        dA[:] = np.nan
        dK0 = np.empty((m, m))
        dK0[:] = np.nan
        return logp, alpha, dA, dK0

    @numba_njit
    def grouped_independent(R, A):
        G, n = R.shape
        ok, quad, logdet, Ainv, beta = blocks(R, A)
        if not ok or not np.isfinite(quad):
            out = failed(G, n, 0)
            return out[0], out[1], out[2]
        dA = np.empty((G, n, n))
        for g in range(G):
            for i in range(n):
                for j in range(n):
                    dA[g, i, j] = 0.5 * (beta[g, i] * beta[g, j] - Ainv[g, i, j])
        logp = np.empty((), dtype=np.float64)
        logp[()] = -0.5 * quad - 0.5 * logdet
        return logp, beta, dA

    # (explicit loops throughout: numba compiles them in a fraction of the time its matrix
    # products take, and the matrices are m x m or n_max x m)
    @numba_njit
    def grouped_shared(R, A, u, K0):
        G, n = R.shape
        m = K0.shape[0]
        ok, quad, logdet, Ainv, beta = blocks(R, A)
        if not ok or not np.isfinite(quad):
            return failed(G, n, m)
        # E_g = A_g^{-1} Z_g, S = Z^T A^{-1} Z, b = Z^T A^{-1} r
        E = np.zeros((G, n, m))
        S = np.zeros((m, m))
        b = np.zeros(m)
        for g in range(G):
            for j in range(n):
                k = u[g, j]
                if k < m:
                    b[k] += beta[g, j]
                    for i in range(n):
                        E[g, i, k] += Ainv[g, i, j]
            for i in range(n):
                k = u[g, i]
                if k < m:
                    for c in range(m):
                        S[k, c] += E[g, i, c]
        L0 = np.copy(K0)
        if not cholesky_lower(L0):
            return failed(G, n, m)
        # B = I + L0^T S L0 (L0 lower: sums from the diagonal down)
        SL = np.zeros((m, m))
        for i in range(m):
            for j in range(m):
                s = 0.0
                for k in range(j, m):
                    s += S[i, k] * L0[k, j]
                SL[i, j] = s
        B = np.zeros((m, m))
        for i in range(m):
            for j in range(m):
                s = 1.0 if i == j else 0.0
                for k in range(i, m):
                    s += L0[k, i] * SL[k, j]
                B[i, j] = s
        if not cholesky_lower(B):
            return failed(G, n, m)
        for i in range(m):
            logdet += 2.0 * np.log(B[i, i])
        # P = LB^{-1} L0^T (forward substitution, column by column); H = P^T P
        P = np.zeros((m, m))
        for c in range(m):
            for i in range(m):
                s = L0[c, i]
                for k in range(i):
                    s -= B[i, k] * P[k, c]
                P[i, c] = s / B[i, i]
        H = np.zeros((m, m))
        for i in range(m):
            for j in range(m):
                s = 0.0
                for k in range(m):
                    s += P[k, i] * P[k, j]
                H[i, j] = s
        Hb = np.zeros(m)
        for i in range(m):
            for j in range(m):
                Hb[i] += H[i, j] * b[j]
            quad -= b[i] * Hb[i]
        alpha = np.empty((G, n))
        dA = np.empty((G, n, n))
        EP = np.empty((n, m))
        for g in range(G):
            for i in range(n):
                s = beta[g, i]
                for k in range(m):
                    s -= E[g, i, k] * Hb[k]
                alpha[g, i] = s
                for c in range(m):  # (E_g P^T)[i, c]
                    s = 0.0
                    for k in range(m):
                        s += E[g, i, k] * P[c, k]
                    EP[i, c] = s
            for i in range(n):
                for j in range(n):
                    q = 0.0
                    for c in range(m):
                        q += EP[i, c] * EP[j, c]
                    dA[g, i, j] = 0.5 * (alpha[g, i] * alpha[g, j] - Ainv[g, i, j] + q)
        a = np.zeros(m)
        for g in range(G):
            for i in range(n):
                k = u[g, i]
                if k < m:
                    a[k] += alpha[g, i]
        HS = np.zeros((m, m))
        for i in range(m):
            for j in range(m):
                s = 0.0
                for k in range(m):
                    s += H[i, k] * S[k, j]
                HS[i, j] = s
        dK0 = np.empty((m, m))
        for i in range(m):
            for j in range(m):
                s = 0.0
                for k in range(m):
                    s += S[i, k] * HS[k, j]
                dK0[i, j] = 0.5 * (a[i] * a[j] - S[i, j] + s)
        logp = np.empty((), dtype=np.float64)
        logp[()] = -0.5 * quad - 0.5 * logdet
        if not np.isfinite(logp[()]):
            return failed(G, n, m)
        return logp, alpha, dA, dK0

    @register_funcify_and_cache_key(GroupedGPLogp)
    def _numba_grouped(op, node=None, **kwargs):
        key = numba_cache_key(op, *sources)
        # writable C-ordered copies (the blocks are copied for their factors anyway): one
        # compiled solver whatever the inputs' layouts, read-only constants included
        if op.shared:

            @numba_njit
            def grouped_logp(R, A, u, K0):
                return grouped_shared(np.copy(R), np.copy(A), np.copy(u), np.copy(K0))

        else:

            @numba_njit
            def grouped_logp(R, A):
                return grouped_independent(np.copy(R), np.copy(A))

        return grouped_logp, key


@op_backend("jax")
def _register_jax() -> None:
    """The Op in ``jax.numpy`` (for ``sampler="numpyro"`` or ``mode="JAX"``)."""
    from pytensor.link.jax.dispatch import jax_funcify

    @jax_funcify.register(GroupedGPLogp)
    def _jax_grouped(op, **kwargs):
        import jax.numpy as jnp
        from jax.scipy.linalg import solve_triangular

        def blocks(R, A):
            L = jnp.linalg.cholesky(A)  # NaN where a block is not positive definite
            n = A.shape[-1]
            Linv = solve_triangular(L, jnp.broadcast_to(jnp.eye(n), A.shape), lower=True)
            Ainv = jnp.swapaxes(Linv, 1, 2) @ Linv
            beta = jnp.einsum("gij,gj->gi", Ainv, R)
            logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(L, axis1=1, axis2=2)))
            return jnp.sum(R * beta), logdet, Ainv, beta

        def finite(logp):
            return jnp.where(jnp.isfinite(logp), logp, -jnp.inf)

        if not op.shared:

            def grouped_logp(R, A):
                quad, logdet, Ainv, beta = blocks(R, A)
                dA = 0.5 * (beta[:, :, None] * beta[:, None, :] - Ainv)
                return finite(-0.5 * quad - 0.5 * logdet), beta, dA

            return grouped_logp

        def grouped_logp(R, A, u, K0):
            quad, logdet, Ainv, beta = blocks(R, A)
            m = K0.shape[0]
            Z = (u[..., None] == jnp.arange(m)).astype(A.dtype)
            E = Ainv @ Z
            S = jnp.einsum("gim,gik->mk", Z, E)
            b = jnp.einsum("gim,gi->m", Z, beta)
            L0 = jnp.linalg.cholesky(K0)
            LB = jnp.linalg.cholesky(jnp.eye(m) + L0.T @ S @ L0)
            P = solve_triangular(LB, L0.T, lower=True)
            H = P.T @ P
            Hb = H @ b
            alpha = beta - jnp.einsum("gim,m->gi", E, Hb)
            EP = E @ P.T
            dA = 0.5 * (alpha[:, :, None] * alpha[:, None, :] - Ainv + EP @ jnp.swapaxes(EP, 1, 2))
            a = jnp.einsum("gim,gi->m", Z, alpha)
            dK0 = 0.5 * (jnp.outer(a, a) - S + S @ H @ S)
            logdet = logdet + 2.0 * jnp.sum(jnp.log(jnp.diag(LB)))
            return finite(-0.5 * (quad - b @ Hb) - 0.5 * logdet), alpha, dA, dK0

        return grouped_logp
