r"""The grouped (block-diagonal plus shared low-rank) Gaussian log density as one PyTensor Op with
its closed-form gradient.

For :math:`r \sim N(0, C)` with :math:`C = \operatorname{blockdiag}_g(A_g) + Z K_0 Z^\top`
(the hierarchical GP and the grouped formula engine, :mod:`bayes_gp.hierarchical.woodbury`),
the Woodbury identity and the determinant lemma (R&W eqs. A.9, A.10) give, with
:math:`A_g = L_g L_g^\top`, :math:`S = Z^\top A^{-1} Z = L_S L_S^\top`,
:math:`b = Z^\top A^{-1} r`, :math:`B = I + L_S^\top K_0 L_S` and
:math:`H = (K_0^{-1} + S)^{-1} = L_S^{-\top}(I - B^{-1})L_S^{-1}`,

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
   \frac{\partial \log p}{\partial K_0} = \tfrac12\left(a a^\top - L_S B^{-1} L_S^\top\right),
   \qquad \frac{\partial \log p}{\partial r} = -\alpha,

where :math:`E_g = A_g^{-1} Z_g`, :math:`a = Z^\top \alpha` and
:math:`L_S B^{-1} L_S^\top = Z^\top C^{-1} Z`. :math:`K_0` itself is never factorised (only
:math:`S`, positive definite when every distinct shared input has a row, and :math:`B`, the
identity plus a positive semi-definite matrix): a shared covariance of low rank and large
scale, the common effects under wide priors, is exact here. The groups come padded to the
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
nopython code, :mod:`bayes_gp.solvers._numba_lapack`) and in JAX. A block that is not positive
definite, or a :math:`B` that is not (then neither is :math:`C`), or a non-finite entry gives
:math:`\log p = -\infty` (a rejected NUTS step).
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
        LS = np.linalg.cholesky(S)
        LB = np.linalg.cholesky(np.eye(m) + LS.T @ K0 @ LS)
    except np.linalg.LinAlgError:
        return fail
    LSinv = np.linalg.solve(LS, np.eye(m))
    Binv = np.linalg.solve(LB.T, np.linalg.solve(LB, np.eye(m)))
    D = np.eye(m) - Binv
    H = LSinv.T @ D @ LSinv
    c = LSinv @ b
    quad -= float(c @ D @ c)
    logdet += 2.0 * float(np.sum(np.log(np.diag(LB))))
    alpha = beta - E @ (H @ b)
    dA = 0.5 * (alpha[:, :, None] * alpha[:, None, :] - Ainv + (E @ H) @ np.swapaxes(E, 1, 2))
    a = np.einsum("gim,gi->m", Z, alpha)
    dK0 = 0.5 * (np.outer(a, a) - LS @ Binv @ LS.T)
    return np.asarray(-0.5 * quad - 0.5 * logdet), alpha, dA, dK0


class GroupedGPLogp(Op):
    """``(R, A[, u, K0]) -> (log p + N/2 log 2 pi, alpha, dlogp/dA[, dlogp/dK0])``.

    ``R`` (G, n_max) the padded residuals (0 in padding), ``A`` (G, n_max, n_max) the padded
    blocks (identity in padding), ``u`` (G, n_max) each entry's shared input (``m`` in padding)
    and ``K0`` (m, m) the shared covariance (positive semi-definite: it is never factorised),
    when ``shared``. Only output 0 is
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
            ok, half = cholesky_lower(work)
            if not ok:
                return False, 0.0, 0.0, Ainv, beta
            logdet += 2.0 * half
            if not cholesky_inverse(work):
                return False, 0.0, 0.0, Ainv, beta
            for i in range(n):  # (a loop: _native_linalg._copy)
                for j in range(n):
                    Ainv[g, i, j] = work[i, j]
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

    @numba_njit
    def mm(X, Y, tx, ty):
        """X Y with X (or Y) transposed first where ``tx`` (``ty``): small square products."""
        k = X.shape[0]
        out = np.zeros((k, k))
        for i in range(k):
            for j in range(k):
                s = 0.0
                for q in range(k):
                    s += (X[q, i] if tx else X[i, q]) * (Y[j, q] if ty else Y[q, j])
                out[i, j] = s
        return out

    # (explicit loops: numba compiles them faster than its matrix products, and the matrices
    # are m x m or n_max x m)
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
        LS = np.copy(S)
        if not cholesky_lower(LS)[0]:
            return failed(G, n, m)
        LB = mm(LS, mm(K0, LS, False, False), True, False)  # I + LS^T K0 LS
        for i in range(m):
            LB[i, i] += 1.0
        ok, half = cholesky_lower(LB)
        if not ok:
            return failed(G, n, m)
        logdet += 2.0 * half
        Binv = np.copy(LB)
        if not cholesky_inverse(Binv):
            return failed(G, n, m)
        # LS^{-1} by forward substitution; H = LS^{-T} (I - B^{-1}) LS^{-1}
        LSinv = np.zeros((m, m))
        for c in range(m):
            for i in range(c, m):
                s = 1.0 if i == c else 0.0
                for k in range(c, i):
                    s -= LS[i, k] * LSinv[k, c]
                LSinv[i, c] = s / LS[i, i]
        D = -Binv
        for i in range(m):
            D[i, i] += 1.0
        H = mm(LSinv, mm(D, LSinv, False, False), True, False)
        Hb = np.zeros(m)
        for i in range(m):
            for j in range(m):
                Hb[i] += H[i, j] * b[j]
            quad -= b[i] * Hb[i]
        alpha = np.empty((G, n))
        dA = np.empty((G, n, n))
        EH = np.empty((n, m))
        for g in range(G):
            for i in range(n):
                s = beta[g, i]
                for k in range(m):
                    s -= E[g, i, k] * Hb[k]
                alpha[g, i] = s
                for c in range(m):
                    s = 0.0
                    for k in range(m):
                        s += E[g, i, k] * H[k, c]
                    EH[i, c] = s
            for i in range(n):
                for j in range(n):
                    q = 0.0
                    for c in range(m):
                        q += EH[i, c] * E[g, j, c]
                    dA[g, i, j] = 0.5 * (alpha[g, i] * alpha[g, j] - Ainv[g, i, j] + q)
        a = np.zeros(m)
        for g in range(G):
            for i in range(n):
                k = u[g, i]
                if k < m:
                    a[k] += alpha[g, i]
        W = mm(LS, mm(Binv, LS, False, True), False, False)  # Z^T C^{-1} Z = LS B^{-1} LS^T
        dK0 = np.empty((m, m))
        for i in range(m):
            for j in range(m):
                dK0[i, j] = 0.5 * (a[i] * a[j] - W[i, j])
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
            eye = jnp.eye(m, dtype=A.dtype)
            Z = (u[..., None] == jnp.arange(m)).astype(A.dtype)
            E = Ainv @ Z
            S = jnp.einsum("gim,gik->mk", Z, E)
            b = jnp.einsum("gim,gi->m", Z, beta)
            LS = jnp.linalg.cholesky(S)
            LB = jnp.linalg.cholesky(eye + LS.T @ K0 @ LS)
            LSinv = solve_triangular(LS, eye, lower=True)
            LBinv = solve_triangular(LB, eye, lower=True)
            Binv = LBinv.T @ LBinv
            D = eye - Binv
            H = LSinv.T @ D @ LSinv
            c = LSinv @ b
            alpha = beta - E @ (H @ b)
            dA = 0.5 * (alpha[:, :, None] * alpha[:, None, :] - Ainv
                        + (E @ H) @ jnp.swapaxes(E, 1, 2))  # fmt: skip
            a = jnp.einsum("gim,gi->m", Z, alpha)
            dK0 = 0.5 * (jnp.outer(a, a) - LS @ Binv @ LS.T)
            logdet = logdet + 2.0 * jnp.sum(jnp.log(jnp.diag(LB)))
            return finite(-0.5 * (quad - c @ D @ c) - 0.5 * logdet), alpha, dA, dK0

        return grouped_logp
