r"""The ICM log marginal likelihood on complete data, through two small eigendecompositions.

With every output observed at every input, the covariance of the stacked outputs
:math:`\operatorname{vec}(Y)` (output-major: all :math:`n` values of output 1, then output 2, ...)
is (Bonilla, Chai & Williams 2008, eq. 2; Álvarez, Rosasco & Lawrence 2012, §4.2)

.. math::
   C = B \otimes K + \operatorname{diag}(s^2) \otimes I_n,
   \qquad s_p^2 = \sigma_p^2 + \epsilon_\text{jitter}.

Whitening by the noise, :math:`S = \operatorname{diag}(s) \otimes I_n`,
:math:`C = S(\tilde B \otimes K + I)S` with :math:`\tilde B = \operatorname{diag}(1/s)\, B\,
\operatorname{diag}(1/s)`. With :math:`\tilde B = U \Lambda U^T` and :math:`K = V D V^T`,

.. math::
   C^{-1} = S^{-1} (U \otimes V)\,(\Lambda \otimes D + I)^{-1} (U \otimes V)^T S^{-1},
   \qquad
   \log|C| = 2n \sum_p \log s_p + \sum_{a,k} \log(\lambda_a d_k + 1).

Writing the residuals as a :math:`P \times n` matrix :math:`R` (row :math:`p` = output :math:`p`),
:math:`(U \otimes V)^T \operatorname{vec}(S^{-1} R) = \operatorname{vec}(U^T \tilde R V)` with
:math:`\tilde R = \operatorname{diag}(1/s) R`, so the quadratic form and
:math:`\alpha = C^{-1} r` cost :math:`O(n^2 P + n P^2)` after the :math:`O(n^3 + P^3)`
factorisations (Saatçi 2011, ch. 5; R&W eq. 2.30 for the density).

Gradient
--------
PyTensor 3.3 has a differentiable ``pt.linalg.eigh``, but its reverse mode divides by
:math:`\lambda_i - \lambda_j`: the quadratic form depends on the eigenvectors, so near-repeated
eigenvalues of :math:`\tilde B` or :math:`K` (two outputs with equal loadings; inputs on a regular
grid) give a badly conditioned or NaN gradient of a function that is perfectly smooth. This module
therefore computes the density in one Op, :class:`KroneckerICMLogp`, and gives its gradient in
closed form, contracting :math:`G = \partial \log p / \partial C = \tfrac12(\alpha\alpha^T -
C^{-1})` (R&W eq. 5.9) with :math:`\partial C/\partial B`, :math:`\partial C/\partial K` and
:math:`\partial C / \partial s^2` through the Kronecker structure. With :math:`A` the
:math:`P \times n` matrix of :math:`\alpha` and :math:`w_{ak} = 1/(\lambda_a d_k + 1)`:

.. math::
   \frac{\partial \log p}{\partial B} &= \tfrac12\left(A K A^T
       - S_P^{-1} U \operatorname{diag}\Big(\textstyle\sum_k w_{ak} d_k\Big) U^T S_P^{-1}\right),\\
   \frac{\partial \log p}{\partial K} &= \tfrac12\left(A^T B A
       - V \operatorname{diag}\Big(\textstyle\sum_a w_{ak} \lambda_a\Big) V^T\right),\\
   \frac{\partial \log p}{\partial s_p^2} &= \tfrac12\left(\textstyle\sum_i A_{pi}^2
       - s_p^{-2} \sum_a U_{pa}^2 \sum_k w_{ak}\right),
   \qquad
   \frac{\partial \log p}{\partial R} = -A,

(:math:`S_P = \operatorname{diag}(s)`), using :math:`V^T K V = D` and
:math:`U^T \tilde B U = \Lambda`. Only matrix functions of :math:`\tilde B` and :math:`K` appear
(:math:`U f(\Lambda) U^T`), which are smooth at repeated eigenvalues, and the cost is
:math:`O(n^3 + P^3)` with :math:`C` never formed.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

from bayes_gp.op_backends import ensure_available, op_backend

__all__ = ["KroneckerICMLogp", "kronecker_factors", "kronecker_icm_logp"]

_LOG_2PI = float(np.log(2.0 * np.pi))


def kronecker_factors(B: np.ndarray, K: np.ndarray, s2: np.ndarray):
    r"""Eigendecompositions of :math:`\tilde B = \operatorname{diag}(s)^{-1} B
    \operatorname{diag}(s)^{-1}` and :math:`K` (NumPy).

    Returns
    -------
    s : ndarray (P,)
        Noise standard deviations :math:`s_p` (including jitter).
    lam, U : ndarray (P,), (P, P)
        Eigenvalues and eigenvectors of :math:`\tilde B`.
    d, V : ndarray (n,), (n, n)
        Eigenvalues and eigenvectors of :math:`K`.
    w : ndarray (P, n)
        :math:`w_{ak} = 1 / (\lambda_a d_k + 1)`, the eigenvalues of the whitened
        :math:`C^{-1}`; ``NaN`` where :math:`\lambda_a d_k + 1 \le 0` (not a covariance).
    """
    s = np.sqrt(np.asarray(s2, dtype=float))
    Bt = np.asarray(B, dtype=float) / np.outer(s, s)
    lam, U = np.linalg.eigh(0.5 * (Bt + Bt.T))
    K = np.asarray(K, dtype=float)
    d, V = np.linalg.eigh(0.5 * (K + K.T))
    denom = np.outer(lam, d) + 1.0
    w = np.where(denom > 0, 1.0 / np.where(denom > 0, denom, 1.0), np.nan)
    return s, lam, U, d, V, w


def _logp_numpy(B, K, s2, R):
    P, n = R.shape
    bad = (
        -np.inf,
        np.full((P, n), np.nan),
        np.full((P, P), np.nan),
        np.full(P, np.nan),
        np.full((n, n), np.nan),
        np.full(n, np.nan),
    )
    if not (np.all(np.isfinite(B)) and np.all(np.isfinite(K)) and np.all(np.isfinite(R))):
        return bad
    if not np.all(np.asarray(s2) > 0):
        return bad
    s, lam, U, d, V, w = kronecker_factors(B, K, s2)
    if not np.all(np.isfinite(w)):
        return bad
    Z = U.T @ (R / s[:, None]) @ V  # rotated whitened residuals, vec(U^T R~ V)
    quad = float(np.sum(Z * Z * w))
    logdet = 2.0 * n * float(np.sum(np.log(s))) - float(np.sum(np.log(w)))
    logp = -0.5 * quad - 0.5 * logdet - 0.5 * n * P * _LOG_2PI
    A = (U @ (Z * w) @ V.T) / s[:, None]  # alpha = C^{-1} r as a P x n matrix
    return logp, A, U, lam, V, d


class KroneckerICMLogp(Op):
    r"""``(B, K, s2, R) -> (log p, A, U, lam, V, d)``: the density of :math:`\operatorname{vec}(R)`
    (output-major) under :math:`N(0, B \otimes K + \operatorname{diag}(s^2) \otimes I)`.

    ``B`` is :math:`P \times P`, ``K`` :math:`n \times n` (both symmetric), ``s2`` the :math:`P`
    noise variances and ``R`` the :math:`P \times n` residuals. Only ``log p`` may be
    differentiated; the other outputs (``A`` = :math:`C^{-1} r` as a matrix, the eigenvectors
    ``U`` of :math:`\tilde B` with eigenvalues ``lam``, those of ``K``, ``V`` and ``d``) are
    by-products the closed-form gradient (module docstring) reuses. A matrix that is not
    positive definite gives :math:`-\infty`.
    """

    #: Its numba implementation calls Python in object mode (the GIL held): nutpie's chains,
    #: threads of one process, would wait for each other (bayes_gp.inference.nuts.gil_ops).
    holds_gil = True

    __props__ = ()

    def make_node(self, B, K, s2, R):
        ensure_available()
        B, K, s2, R = (pt.as_tensor_variable(v).astype("float64") for v in (B, K, s2, R))
        if B.type.ndim != 2 or K.type.ndim != 2 or s2.type.ndim != 1 or R.type.ndim != 2:
            raise TypeError("KroneckerICMLogp needs B (P, P), K (n, n), s2 (P,) and R (P, n)")
        outs = [pt.dscalar(), pt.dmatrix(), pt.dmatrix(), pt.dvector(), pt.dmatrix(), pt.dvector()]
        return Apply(self, [B, K, s2, R], outs)

    def perform(self, node, inputs, outputs):
        B, K, s2, R = (np.asarray(v, dtype=float) for v in inputs)
        logp, A, U, lam, V, d = _logp_numpy(B, K, s2, R)
        outputs[0][0] = np.asarray(logp, dtype=float)
        for i, v in enumerate((A, U, lam, V, d), start=1):
            outputs[i][0] = np.ascontiguousarray(v)

    def infer_shape(self, node, shapes):
        sB, sK, _, sR = shapes
        return [(), sR, sB, (sB[0],), sK, (sK[0],)]

    def pullback(self, inputs, outputs, cotangents):
        g, *extra = cotangents
        for e in extra:
            if not isinstance(e.type, DisconnectedType):
                raise NotImplementedError(
                    "KroneckerICMLogp: only the log density (output 0) can be differentiated"
                )
        B, K, s2, _ = inputs
        _, A, U, lam, V, d = outputs
        w = 1.0 / (pt.outer(lam, d) + 1.0)  # (P, n)
        inv_s = 1.0 / pt.sqrt(s2)
        Ui = U * inv_s[:, None]  # S_P^{-1} U
        gB = pt.dot(pt.dot(A, K), A.T) - pt.dot(Ui * pt.dot(w, d)[None, :], Ui.T)
        gK = pt.dot(pt.dot(A.T, B), A) - pt.dot(V * pt.dot(lam, w)[None, :], V.T)
        gs2 = pt.sum(A * A, axis=1) - (inv_s**2) * pt.dot(U * U, pt.sum(w, axis=1))
        half = 0.5 * g
        return [half * gB, half * gK, half * gs2, -g * A]

    def connection_pattern(self, node):
        return [[True] * 6 for _ in range(4)]


def kronecker_icm_logp(B, K, s2, R):
    r""":math:`\log N(\operatorname{vec}(R) \mid 0, B \otimes K + \operatorname{diag}(s^2)
    \otimes I_n)` as a PyTensor scalar (``R`` is :math:`P \times n`, row :math:`p` = output
    :math:`p`), with the :math:`O(n^3 + P^3)` closed-form gradient of :class:`KroneckerICMLogp`."""
    return KroneckerICMLogp()(B, K, s2, R)[0]


# ------------------------------------------------------------------------ backends
@op_backend("numba")
def _register_numba() -> None:
    import numba
    from pytensor.link.numba.dispatch.basic import numba_funcify, numba_njit

    @numba_funcify.register(KroneckerICMLogp)
    def _numba_kron_icm(op, node=None, **kwargs):
        f64 = numba.types.float64
        ret_sig = numba.types.Tuple(
            [
                numba.types.Array(f64, 0, "C"),  # PyTensor's numba backend: scalars are 0-d
                f64[:, ::1],
                f64[:, ::1],
                f64[::1],
                f64[:, ::1],
                f64[::1],
            ]
        )

        @numba_njit
        def kron_icm_numba(B, K, s2, R):
            with numba.objmode(ret=ret_sig):
                logp, A, U, lam, V, d = _logp_numpy(
                    np.asarray(B), np.asarray(K), np.asarray(s2), np.asarray(R)
                )
                ret = (
                    np.asarray(logp, dtype=float),
                    np.ascontiguousarray(A),
                    np.ascontiguousarray(U),
                    np.ascontiguousarray(lam),
                    np.ascontiguousarray(V),
                    np.ascontiguousarray(d),
                )
            return ret

        return kron_icm_numba


@op_backend("jax")
def _register_jax() -> None:
    from pytensor.link.jax.dispatch import jax_funcify

    @jax_funcify.register(KroneckerICMLogp)
    def _jax_kron_icm(op, **kwargs):
        import jax.numpy as jnp

        def kron_icm_jax(B, K, s2, R):
            P, n = R.shape
            s = jnp.sqrt(s2)
            Bt = B / jnp.outer(s, s)
            lam, U = jnp.linalg.eigh(0.5 * (Bt + Bt.T))
            d, V = jnp.linalg.eigh(0.5 * (K + K.T))
            denom = jnp.outer(lam, d) + 1.0
            w = 1.0 / denom
            Z = U.T @ (R / s[:, None]) @ V
            logp = (
                -0.5 * jnp.sum(Z * Z * w)
                - n * jnp.sum(jnp.log(s))
                - 0.5 * jnp.sum(jnp.log(denom))
                - 0.5 * n * P * _LOG_2PI
            )
            logp = jnp.where(jnp.all(denom > 0) & jnp.isfinite(logp), logp, -jnp.inf)
            A = (U @ (Z * w) @ V.T) / s[:, None]
            return logp, A, U, lam, V, d

        return kron_icm_jax
