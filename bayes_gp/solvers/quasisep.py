r"""Exact GP regression in O(n) for 1-D inputs with state-space (quasiseparable) kernels.

For the terms of :mod:`bayes_gp.kernels.statespace` (half-integer Matérn kernels, cosines,
damped oscillators, constants, and their sums and products) the covariance of sorted inputs
:math:`t_1 \le \dots \le t_n` plus noise,

.. math::
   C_{ij} = p_i^\top \Phi_i\Phi_{i-1}\cdots\Phi_{j+1}\, q_j \quad (i > j), \qquad
   C_{ii} = d_i = h^\top P_\infty h + \sigma_i^2, \qquad
   p_i = h,\ q_j = P_\infty h,\ \Phi_i = e^{F(t_i - t_{i-1})},

is quasiseparable of rank :math:`J` (the state dimension), and so is its factor
:math:`C = LDL^\top`, :math:`L_{ij} = p_i^\top\Phi_i\cdots\Phi_{j+1}w_j` (Foreman-Mackey et al.
2017 for the special case of diagonal :math:`\Phi`, celerite; tinygp's ``quasisep`` for the
general one; Hartikainen & Särkkä 2010 for the equivalent Kalman filter). Matching
:math:`C_{ii}` and :math:`C_{ij}` gives the recursion, with
:math:`S_1 = 0`, :math:`f_1 = 0`:

.. math::
   :label: qs-factor

   S_i &= \Phi_i\left(S_{i-1} + u_{i-1}u_{i-1}^\top / D_{i-1}\right)\Phi_i^\top, &
   f_i &= \Phi_i\left(f_{i-1} + u_{i-1} z_{i-1}/D_{i-1}\right), \\
   D_i &= d_i - p_i^\top S_i p_i, &
   u_i &= q_i - S_i p_i \quad (w_i = u_i / D_i), \\
   z_i &= r_i - p_i^\top f_i &&\text{(the solve } Lz = r\text{)},

and the exact log marginal likelihood (R&W eq. 2.30, PRML eq. 6.69) of the residual
:math:`r = y - m(t)` is

.. math::
   \log p(y\mid\theta) = -\tfrac12\sum_i \left(\frac{z_i^2}{D_i} + \log D_i\right)
   - \tfrac n2\log 2\pi .

(:math:`S_i = P_\infty - P_i^-` is the prior minus the Kalman-filter predicted covariance, and
:math:`z_i, D_i` are the innovations and their variances.) The same factor gives
:math:`C^{-1} = L^{-\top}D^{-1}L^{-1}`, whose unit lower triangle is quasiseparable too: the
forward solve reads
:math:`(L^{-1})_{ij} = -p_i^\top \Phi_i A_{i-1}\Phi_{i-1}\cdots A_{j+1}\Phi_{j+1} w_j` with
:math:`A_k = I - w_k p_k^\top`, so one backward sweep from :math:`Q_n = 0`,
:math:`\lambda_n = 0` gives :math:`\alpha = C^{-1}r` and
:math:`\operatorname{diag}(C^{-1})` (the Bryson–Frazier form of the smoother):

.. math::
   :label: qs-inverse

   [C^{-1}]_{jj} &= 1/D_j + w_j^\top Q_j w_j, &
   \alpha_j &= z_j/D_j - w_j^\top\lambda_j, \\
   Q_{j-1} &= \Phi_j^\top\left(A_j^\top Q_j A_j + p_j p_j^\top/D_j\right)\Phi_j, &
   \lambda_{j-1} &= \Phi_j^\top\left(\lambda_j + p_j\,\alpha_j\right),

:math:`O(nJ^3)` (:func:`quasisep_inverse`; the leave-one-out terms of R&W eqs. 5.10–5.12).

Each transition is given as :math:`\Phi_i = \sum_k c_{ik}B_k` (per-gap coefficients times a few matrices, see
:class:`~bayes_gp.kernels.statespace.StateSpaceTerm`). The gradient with respect to every
input of the recursion (:math:`c, B, p, q, d, r`) is its reverse-mode adjoint, one backward sweep
written out by hand (``_adjoint`` in the source), so a log density and its full gradient cost
:math:`O(nJ^3)` time and :math:`O(nJ^2)` memory; PyTensor differentiates the closed-form
coefficients, :math:`B`, :math:`P_\infty` and :math:`h` of the terms with respect to the
hyperparameters. One Op, :class:`QuasisepLogp`, returns the log density and the gradient
together (NUTS needs both at every step); its kernel is numba-compiled once per
:math:`(J, K)` (cached on disk) and runs natively (no object mode) in PyTensor's numba backend
(nutpie), from ``perform`` in the C/Python backends, and as a ``jax.lax.scan`` in JAX.

Unsorted inputs are sorted once (the data are constants) and the residual permuted inside the
graph, so gradients reach the original order. Repeated inputs give :math:`\Phi = I`; with noise,
:math:`D_i = \operatorname{var}(y_i \mid y_{<i}) \ge \sigma_i^2 > 0` stays positive (tested with
30 copies of one input). Predictions (R&W eqs. 2.25–2.26) come from a Kalman filter and
Rauch–Tung–Striebel smoother on the merged training and test inputs (Särkkä 2013, ch. 4 and 8):
:math:`O((n + m)J^3)`, no :math:`n\times n` matrix.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numba
import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

from bayes_gp._validation import as_inputs, as_targets, check_aligned, check_jitter
from bayes_gp.inference.jitter import MAX_RELATIVE_JITTER, JitterChoice, finite_at_points
from bayes_gp.kernels.statespace import (
    NP,
    PT,
    kernel_column,
    representable,
    term_leaves,
    to_term,
    with_leaves,
)
from bayes_gp.linalg import NotPSDError
from bayes_gp.op_backends import ensure_available, op_backend
from bayes_gp.solvers.observed import (
    ObservedLikelihood,
    broadcast_mean,
    loo_terms,
    with_noise,
)

__all__ = [
    "QuasisepLogp",
    "quasisep_logp_grad",
    "quasisep_logp",
    "quasisep_inverse",
    "QuasisepLikelihood",
    "quasisep_marginal",
    "quasisep_predict",
    "sorted_gaps",
    "representable",
    "to_term",
]

_LOG_2PI = math.log(2.0 * math.pi)
_FASTMATH = {"contract"}  # fused multiply-add only: no change to NaN/inf semantics
_jit = numba.njit(cache=True, nogil=True, fastmath=_FASTMATH)
_inline = numba.njit(cache=True, nogil=True, fastmath=_FASTMATH, inline="always")


# ----------------------------------------------------------------------- numba kernels
@_inline
def _phi(c, B, i, Phi, J, K):
    """``Phi = sum_k c[i, k] B[k]``."""
    for a in range(J):
        for b in range(J):
            acc = 0.0
            for k in range(K):
                acc += c[i, k] * B[k, a, b]
            Phi[a, b] = acc


@_inline
def _previous(S, f, U, D, z, i, M, g, J):
    """``M_i = S_{i-1} + u u^T / D``, ``g_i = f_{i-1} + u z / D`` (from step ``i - 1``)."""
    iD = 1.0 / D[i - 1]
    am = z[i - 1] * iD
    for a in range(J):
        g[a] = f[i - 1, a] + U[i - 1, a] * am
        wa = U[i - 1, a] * iD
        for b in range(J):
            M[a, b] = S[i - 1, a, b] + wa * U[i - 1, b]


@_inline
def _forward(c, B, p, q, d, r, S, f, U, D, z, J, K):
    """Recursion :eq:`qs-factor`; fills ``S, f, U, D, z``. Returns ``(logp, ok)``."""
    n = d.shape[0]
    Phi = np.empty((J, J))
    M = np.empty((J, J))
    T = np.empty((J, J))
    g = np.empty(J)
    logp = -0.5 * n * _LOG_2PI
    for i in range(n):
        if i > 0:
            _phi(c, B, i, Phi, J, K)
            _previous(S, f, U, D, z, i, M, g, J)
            for a in range(J):  # T = Phi M, f_i = Phi g
                acc = 0.0
                for e in range(J):
                    acc += Phi[a, e] * g[e]
                f[i, a] = acc
                for b in range(J):
                    acc = 0.0
                    for e in range(J):
                        acc += Phi[a, e] * M[e, b]
                    T[a, b] = acc
            for a in range(J):  # S_i = T Phi^T (symmetric: upper triangle, mirrored)
                for b in range(a, J):
                    acc = 0.0
                    for e in range(J):
                        acc += T[a, e] * Phi[b, e]
                    S[i, a, b] = acc
                    S[i, b, a] = acc
        pSp = 0.0
        zi = r[i]
        for a in range(J):
            sp = 0.0
            for b in range(J):
                sp += S[i, a, b] * p[b]
            U[i, a] = q[a] - sp
            pSp += p[a] * sp
            zi -= p[a] * f[i, a]
        Di = d[i] - pSp
        if not (Di > 0.0 and np.isfinite(Di) and np.isfinite(zi)):
            return -np.inf, False
        D[i] = Di
        z[i] = zi
        logp -= 0.5 * (zi * zi / Di + math.log(Di))
    return logp, True


@_inline
def _adjoint(c, B, p, S, f, U, D, z, gc, gB, gp, gq, gd, gr, J, K):
    r"""Reverse sweep of :eq:`qs-factor`: the gradient of ``logp`` with respect to
    ``c, B, p, q, d, r``. ``St`` carries :math:`\bar M + \bar M^\top` of the next step (only
    symmetric parts matter, since :math:`S` and :math:`M` are symmetric)."""
    n = D.shape[0]
    St = np.zeros((J, J))
    gb = np.zeros(J)
    Sg = np.empty((J, J))
    ub = np.empty(J)
    fb = np.empty(J)
    M = np.empty((J, J))
    g = np.empty(J)
    Phi = np.empty((J, J))
    W = np.empty((J, J))
    gPhi = np.empty((J, J))
    gp[:] = 0.0
    gq[:] = 0.0
    gB[:] = 0.0
    for k in range(K):
        gc[0, k] = 0.0
    for i in range(n - 1, -1, -1):
        iD = 1.0 / D[i]
        ai = z[i] * iD
        uMu = 0.0
        ab = 0.0
        for a in range(J):  # from M_{i+1} = S_i + u u^T / D and g_{i+1} = f_i + u a
            acc = 0.0
            for b in range(J):
                acc += St[a, b] * U[i, b]
            uMu += 0.5 * U[i, a] * acc
            ub[a] = acc * iD + gb[a] * ai
            fb[a] = gb[a]
            ab += gb[a] * U[i, a]
        # a_i = z_i / D_i and the term -(z_i^2 / D_i + log D_i) / 2
        Db = 0.5 * ai * ai - (ab * ai + uMu * iD + 0.5) * iD
        zb = ab * iD - ai
        gr[i] = zb  # z_i = r_i - p^T f_i
        gd[i] = Db  # D_i = d_i - p^T S_i p, u_i = q - S_i p
        for a in range(J):
            fb[a] -= zb * p[a]
            gq[a] += ub[a]
            acc = 0.0
            for b in range(J):
                acc += S[i, a, b] * (ub[b] + 2.0 * Db * p[b])
                Sg[a, b] = St[a, b] - ub[a] * p[b] - p[a] * ub[b] - 2.0 * Db * p[a] * p[b]
            gp[a] -= zb * f[i, a] + acc
        if i == 0:
            break
        # S_i = Phi M_i Phi^T, f_i = Phi g_i
        _phi(c, B, i, Phi, J, K)
        _previous(S, f, U, D, z, i, M, g, J)
        for a in range(J):  # W = Sg Phi
            for b in range(J):
                acc = 0.0
                for e in range(J):
                    acc += Sg[a, e] * Phi[e, b]
                W[a, b] = acc
        for a in range(J):  # gPhi = fb g^T + W M ; gb = Phi^T fb
            acc = 0.0
            for e in range(J):
                acc += Phi[e, a] * fb[e]
            gb[a] = acc
            for b in range(J):
                acc = fb[a] * g[b]
                for e in range(J):
                    acc += W[a, e] * M[e, b]
                gPhi[a, b] = acc
        for a in range(J):  # St = Phi^T W (symmetric)
            for b in range(a, J):
                acc = 0.0
                for e in range(J):
                    acc += Phi[e, a] * W[e, b]
                St[a, b] = acc
                St[b, a] = acc
        for k in range(K):  # Phi = sum_k c_k B_k
            acc = 0.0
            cik = c[i, k]
            for a in range(J):
                for b in range(J):
                    acc += gPhi[a, b] * B[k, a, b]
                    gB[k, a, b] += cik * gPhi[a, b]
            gc[i, k] = acc


@_inline
def _logp_grad_impl(c, B, p, q, d, r, J, K):
    n = d.shape[0]
    S = np.empty((n, J, J))
    f = np.empty((n, J))
    S[0] = 0.0
    f[0] = 0.0
    U = np.empty((n, J))
    D = np.empty(n)
    z = np.empty(n)
    gc = np.empty((n, K))
    gB = np.empty((K, J, J))
    gp = np.empty(J)
    gq = np.empty(J)
    gd = np.empty(n)
    gr = np.empty(n)
    logp, ok = _forward(c, B, p, q, d, r, S, f, U, D, z, J, K)
    if ok:
        _adjoint(c, B, p, S, f, U, D, z, gc, gB, gp, gq, gd, gr, J, K)
    else:
        gc[:] = np.nan
        gB[:] = np.nan
        gp[:] = np.nan
        gq[:] = np.nan
        gd[:] = np.nan
        gr[:] = np.nan
    return np.asarray(logp), gc, gB, gp, gq, gd, gr


@functools.cache
def _logp_grad_core(J: int, K: int) -> Callable:
    """The log density and gradient kernel compiled for state dimension ``J`` and basis size
    ``K`` as constants: the small loops are unrolled, twice as fast as with run-time sizes
    (numba caches each specialisation on disk)."""

    @_jit
    def core(c, B, p, q, d, r):
        return _logp_grad_impl(c, B, p, q, d, r, J, K)

    return core


def quasisep_logp_grad(c, B, p, q, d, r) -> tuple:
    r"""Log density :math:`\log N(r\mid 0, C)` of the quasiseparable :math:`C` of
    :eq:`qs-factor` and its gradients ``(logp, dc, dB, dp, dq, dd, dr)``.

    Parameters
    ----------
    c : (n, K) array
        Transition coefficients: :math:`\Phi_i = \sum_k c_{ik} B_k` (row 0 is not used).
    B : (K, J, J) array
        Transition basis.
    p, q : (J,) arrays
        Generators of the strictly lower triangle (:math:`h` and :math:`P_\infty h`).
    d : (n,) array
        Diagonal of :math:`C`.
    r : (n,) array
        Residual, in the sorted order.

    A :math:`C` that is not numerically positive definite gives :math:`-\infty` and NaN
    gradients.
    """
    args = [np.ascontiguousarray(np.asarray(v, dtype=float)) for v in (c, B, p, q, d, r)]
    K, J = args[1].shape[:2]
    if args[0].shape[1] != K or args[2].shape[0] != J or args[3].shape[0] != J:
        raise ValueError("QuasisepLogp: inconsistent shapes of c (n,K), B (K,J,J), p, q (J,)")
    return _logp_grad_core(int(J), int(K))(*args)


@_inline
def _inverse_impl(c, B, p, q, d, r, J, K):
    r"""Recursion :eq:`qs-factor`, then the backward sweep of :eq:`qs-inverse`: ``(logp,
    alpha, zdiag)`` with :math:`\alpha = C^{-1}r` and :math:`\operatorname{diag}(C^{-1})`
    (NaN when :math:`C` is not numerically positive definite)."""
    n = d.shape[0]
    S = np.empty((n, J, J))
    f = np.empty((n, J))
    if n > 0:
        S[0] = 0.0
        f[0] = 0.0
    U = np.empty((n, J))
    D = np.empty(n)
    z = np.empty(n)
    alpha = np.empty(n)
    zdiag = np.empty(n)
    logp, ok = _forward(c, B, p, q, d, r, S, f, U, D, z, J, K)
    if not ok:
        alpha[:] = np.nan
        zdiag[:] = np.nan
        return np.asarray(logp), alpha, zdiag
    Q = np.zeros((J, J))
    lam = np.zeros(J)
    w = np.empty(J)
    Qw = np.empty(J)
    M = np.empty((J, J))
    T = np.empty((J, J))
    Phi = np.empty((J, J))
    v = np.empty(J)
    for j in range(n - 1, -1, -1):  # here Q = Q_j, lam = lambda_j (sums over i > j)
        iD = 1.0 / D[j]
        s = 0.0
        wl = 0.0
        for a in range(J):
            w[a] = U[j, a] * iD
        for a in range(J):
            acc = 0.0
            for b in range(J):
                acc += Q[a, b] * w[b]
            Qw[a] = acc
            s += w[a] * acc
            wl += w[a] * lam[a]
        zdiag[j] = iD + s
        alpha[j] = z[j] * iD - wl
        if j == 0:
            break
        # M = A_j^T Q A_j + p p^T / D_j, A_j = I - w_j p^T; v = A_j^T lam + p z_j / D_j
        for a in range(J):
            v[a] = lam[a] + p[a] * alpha[j]
            for b in range(J):
                M[a, b] = Q[a, b] - p[a] * Qw[b] - Qw[a] * p[b] + zdiag[j] * p[a] * p[b]
        _phi(c, B, j, Phi, J, K)
        for a in range(J):  # T = M Phi; lam = Phi^T v
            acc = 0.0
            for e in range(J):
                acc += Phi[e, a] * v[e]
            lam[a] = acc
            for b in range(J):
                acc = 0.0
                for e in range(J):
                    acc += M[a, e] * Phi[e, b]
                T[a, b] = acc
        for a in range(J):  # Q = Phi^T T (symmetric)
            for b in range(a, J):
                acc = 0.0
                for e in range(J):
                    acc += Phi[e, a] * T[e, b]
                Q[a, b] = acc
                Q[b, a] = acc
    return np.asarray(logp), alpha, zdiag


@functools.cache
def _inverse_core(J: int, K: int) -> Callable:
    """:func:`_inverse_impl` compiled for ``(J, K)`` as constants (as :func:`_logp_grad_core`)."""

    @_jit
    def core(c, B, p, q, d, r):
        return _inverse_impl(c, B, p, q, d, r, J, K)

    return core


def quasisep_inverse(c, B, p, q, d, r) -> tuple[float, np.ndarray, np.ndarray]:
    r"""``(logp, alpha, zdiag)``: the log density of :func:`quasisep_logp_grad`,
    :math:`\alpha = C^{-1}r` and :math:`\operatorname{diag}(C^{-1})` of the quasiseparable
    :math:`C` (same arguments, sorted order), in :math:`O(nJ^3)` by :eq:`qs-inverse`.

    These give the exact leave-one-out predictive distributions (R&W eqs. 5.10–5.12):
    :math:`\mu_{-i} = y_i - \alpha_i / [C^{-1}]_{ii}`, :math:`\sigma^2_{-i} = 1/[C^{-1}]_{ii}`.
    A :math:`C` that is not numerically positive definite gives :math:`-\infty` and NaN.
    """
    args = [np.ascontiguousarray(np.asarray(v, dtype=float)) for v in (c, B, p, q, d, r)]
    K, J = args[1].shape[:2]
    if args[0].shape[1] != K or args[2].shape[0] != J or args[3].shape[0] != J:
        raise ValueError("quasisep_inverse: inconsistent shapes of c (n,K), B (K,J,J), p, q (J,)")
    logp, alpha, zdiag = _inverse_core(int(J), int(K))(*args)
    return float(logp), alpha, zdiag


class QuasisepLogp(Op):
    """``(c, B, p, q, d, r) -> (logp, dlogp/dc, dlogp/dB, dlogp/dp, dlogp/dq, dlogp/dd,
    dlogp/dr)``.

    Only output 0 is meant to be differentiated; its gradient is the other outputs (computed in
    the same call, the reverse sweep of :func:`quasisep_logp_grad`)."""

    __props__ = ("J", "K")
    _NDIMS = (2, 3, 1, 1, 1, 1)

    def __init__(self, J: int, K: int):
        self.J, self.K = int(J), int(K)

    def make_node(self, c, B, p, q, d, r):
        ensure_available()
        ins = [pt.as_tensor_variable(v).astype("float64") for v in (c, B, p, q, d, r)]
        if tuple(v.ndim for v in ins) != self._NDIMS:
            raise TypeError("QuasisepLogp needs c (n,K), B (K,J,J), p (J,), q (J,), d (n,), r (n,)")
        outs = [pt.dscalar(), *[v.type() for v in ins]]
        return Apply(self, ins, outs)

    def perform(self, node, inputs, outputs):
        res = quasisep_logp_grad(*inputs)
        for out, v in zip(outputs, res, strict=True):
            out[0] = np.asarray(v, dtype=float)

    def infer_shape(self, node, shapes):
        return [(), *shapes]

    def pullback(self, inputs, outputs, cotangents):
        g = cotangents[0]
        for extra in cotangents[1:]:
            if not isinstance(extra.type, DisconnectedType):
                raise NotImplementedError(
                    "QuasisepLogp: only the log density (output 0) can be differentiated"
                )
        return [g * o for o in outputs[1:]]

    def connection_pattern(self, node):
        return [[True] * 7 for _ in range(6)]


# ------------------------------------------------------------------ graph construction
def sorted_gaps(x) -> tuple[np.ndarray, np.ndarray]:
    """``(perm, dt)``: the stable sorting permutation of the 1-D inputs ``x`` and the gaps
    :math:`\\Delta_i = t_i - t_{i-1}` of the sorted inputs (``dt[0] = 0``)."""
    x = np.asarray(x, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"the inputs must be 1-D, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("the inputs contain NaN or infinite values")
    perm = np.argsort(x, kind="stable")
    xs = x[perm]
    return perm, np.diff(xs, prepend=xs[:1])


def quasisep_logp(x, r, kernel, noise) -> pt.TensorVariable:
    r""":math:`\log N(r\mid 0, K + \operatorname{diag}(\text{noise}))` as a PyTensor scalar, in
    :math:`O(nJ^3)` (module docstring).

    Parameters
    ----------
    x : (n,) array
        Inputs (any order, repeats allowed); data, not differentiated.
    r : (n,) tensor
        Residual :math:`y - m(x)` in the order of ``x``.
    kernel : StateSpaceTerm or kernel expression
        Converted by :func:`~bayes_gp.kernels.statespace.to_term`.
    noise : scalar or (n,) tensor
        Noise variance added to the diagonal (e.g. :math:`\sigma^2` + jitter).
    """
    term = to_term(kernel)
    perm, dt = sorted_gaps(x)
    n = dt.shape[0]
    c = term.transition_coefficients(dt, PT)
    B = term.transition_basis(PT)
    P = term.stationary_covariance(PT)
    h = term.observation(PT)
    Ph = pt.dot(P, h)
    noise = pt.as_tensor_variable(noise)
    if noise.ndim == 1:
        noise = noise[perm]
    d = pt.broadcast_to(pt.dot(h, Ph) + noise, (n,))
    r_s = pt.as_tensor_variable(r)[perm]
    return QuasisepLogp(term.dim, term.n_basis)(c, B, h, Ph, d, r_s)[0]


# ------------------------------------------------------------------------- predictions
@_jit
def _mm(A, B, out, transpose_b):
    """``out = A B`` (or ``A B^T``) for small square matrices."""
    J = A.shape[0]
    for a in range(J):
        for b in range(J):
            acc = 0.0
            for e in range(J):
                acc += A[a, e] * (B[b, e] if transpose_b else B[e, b])
            out[a, b] = acc


@_jit
def _cholesky_solve(P, R, L, X):
    """``X = P^{-1} R`` for a small symmetric positive-definite ``P`` (``L``: workspace).
    A non-positive pivot gives NaN (a singular predicted covariance: zero noise)."""
    J = P.shape[0]
    for a in range(J):
        for b in range(a + 1):
            acc = P[a, b]
            for e in range(b):
                acc -= L[a, e] * L[b, e]
            if a == b:
                L[a, a] = math.sqrt(acc) if acc > 0.0 else np.nan
            else:
                L[a, b] = acc / L[b, b]
    for col in range(J):
        for a in range(J):  # forward: L y = R[:, col]
            acc = R[a, col]
            for e in range(a):
                acc -= L[a, e] * X[e, col]
            X[a, col] = acc / L[a, a]
        for a in range(J - 1, -1, -1):  # backward: L^T x = y
            acc = X[a, col]
            for e in range(a + 1, J):
                acc -= L[e, a] * X[e, col]
            X[a, col] = acc / L[a, a]


@_jit
def _smooth(A, P0, h, s2, r, obs, want_gain):
    r"""Kalman filter and RTS smoother (Särkkä 2013, ch. 4 and 8) over merged points:
    ``obs[k]`` marks point ``k`` observed with residual ``r[k]`` and noise ``s2[k]``. The
    process noise of a step is :math:`P_\infty - A P_\infty A^\top` (stationary prior). Returns
    the smoothed means and variances of :math:`h^\top s` and, when ``want_gain``, the gains
    and smoothed covariances (for full predictive covariances)."""
    N, J = A.shape[0], h.shape[0]
    mf = np.empty((N, J))
    Pf = np.empty((N, J, J))
    mp = np.empty((N, J))
    Pp = np.empty((N, J, J))
    m = np.zeros(J)
    P = P0.copy()
    E = np.empty((J, J))
    T = np.empty((J, J))
    T2 = np.empty((J, J))
    L = np.empty((J, J))
    Gk = np.empty((J, J))
    v = np.empty(J)
    Ph = np.empty(J)
    for k in range(N):
        if k > 0:  # predict: m = A m, P = P_inf + A (P - P_inf) A^T
            for a in range(J):
                acc = 0.0
                for e in range(J):
                    acc += A[k, a, e] * m[e]
                v[a] = acc
            for a in range(J):  # (loops, not slice assignments: _native_linalg._copy)
                m[a] = v[a]
                for e in range(J):
                    E[a, e] = P[a, e] - P0[a, e]
            _mm(A[k], E, T, False)
            _mm(T, A[k], E, True)
            for a in range(J):
                for b in range(J):
                    P[a, b] = P0[a, b] + 0.5 * (E[a, b] + E[b, a])
        mp[k] = m
        Pp[k] = P
        if obs[k]:  # update with y_k = h^T s_k + noise
            hm = 0.0
            s = s2[k]
            for a in range(J):
                acc = 0.0
                for e in range(J):
                    acc += P[a, e] * h[e]
                Ph[a] = acc
                hm += h[a] * m[a]
            for a in range(J):
                s += h[a] * Ph[a]
            for a in range(J):
                m[a] += Ph[a] * (r[k] - hm) / s
                for b in range(J):
                    P[a, b] -= Ph[a] * Ph[b] / s
        mf[k] = m
        Pf[k] = P
    mean = np.empty(N)
    var = np.empty(N)
    G = np.zeros((N, J, J)) if want_gain else np.zeros((0, J, J))
    Ps = np.empty((N, J, J)) if want_gain else np.empty((0, J, J))
    ms = mf[N - 1].copy()
    PS = Pf[N - 1].copy()
    for k in range(N - 1, -1, -1):
        if k < N - 1:
            # G_k = Pf_k A_{k+1}^T Pp_{k+1}^{-1}: solve Pp X = A Pf_k, G = X^T
            _mm(A[k + 1], Pf[k], T, False)
            _cholesky_solve(Pp[k + 1], T, L, T2)
            for a in range(J):
                for b in range(J):
                    Gk[a, b] = T2[b, a]
            for a in range(J):
                v[a] = ms[a] - mp[k + 1, a]
            for a in range(J):
                acc = mf[k, a]
                for e in range(J):
                    acc += Gk[a, e] * v[e]
                ms[a] = acc
            for a in range(J):
                for e in range(J):
                    E[a, e] = PS[a, e] - Pp[k + 1, a, e]
            _mm(Gk, E, T, False)
            _mm(T, Gk, E, True)
            for a in range(J):
                for b in range(J):
                    PS[a, b] = Pf[k, a, b] + 0.5 * (E[a, b] + E[b, a])
            if want_gain:
                G[k] = Gk
        if want_gain:
            Ps[k] = PS
        mu = 0.0
        vv = 0.0
        for a in range(J):
            mu += h[a] * ms[a]
            for b in range(J):
                vv += h[a] * PS[a, b] * h[b]
        mean[k] = mu
        var[k] = vv
    return mean, var, G, Ps


@_jit
def _smoothed_cov(G, Ps, h, sp):
    r"""Smoothed covariances of :math:`h^\top s` at the sorted merged positions ``sp``:
    :math:`\operatorname{cov}(f_k, f_l) = h^\top G_k\cdots G_{l-1} P^s_l h` for
    :math:`k \le l` (Särkkä 2013, ch. 8)."""
    m, J = sp.shape[0], h.shape[0]
    cov = np.empty((m, m))
    v = np.empty(J)
    w = np.empty(J)
    for b in range(m):
        for a in range(J):
            acc = 0.0
            for e in range(J):
                acc += Ps[sp[b], a, e] * h[e]
            v[a] = acc
        k = sp[b]
        for a in range(b, -1, -1):
            while k > sp[a]:
                k -= 1
                for i in range(J):
                    acc = 0.0
                    for e in range(J):
                        acc += G[k, i, e] * v[e]
                    w[i] = acc
                for i in range(J):
                    v[i] = w[i]
            acc = 0.0
            for e in range(J):
                acc += h[e] * v[e]
            cov[a, b] = acc
            cov[b, a] = acc
    return cov


def _as_mean(mean, x: np.ndarray) -> np.ndarray:
    if mean is None:
        return np.zeros(x.shape[0])
    if callable(mean):
        return np.broadcast_to(np.asarray(mean(x), dtype=float), x.shape).copy()
    return np.broadcast_to(np.asarray(mean, dtype=float), x.shape).copy()


def quasisep_predict(
    x,
    y,
    x_new,
    kernel,
    noise,
    *,
    mean: float | Callable[[np.ndarray], np.ndarray] | None = None,
    diag: bool = True,
    include_noise: float | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    r"""Posterior predictive mean and variance of the GP at ``x_new`` (R&W eqs. 2.25–2.26),

    .. math::
       \bar f_* = m(x_*) + k_*^\top C^{-1}(y - m(x)), \qquad
       \mathbb{V}[f_*] = k(x_*, x_*) - k_*^\top C^{-1} k_*,

    from a Kalman filter and RTS smoother on the merged, sorted training and test inputs
    (Särkkä 2013, ch. 4 and 8): :math:`O((n + m)J^3)` time, no :math:`n \times n` matrix.
    Inputs may be unsorted and repeated; outputs are in the order of ``x_new``.

    Parameters
    ----------
    x, y : (n,) arrays
        Training inputs and targets.
    x_new : (m,) array
        Test inputs.
    kernel : StateSpaceTerm or kernel expression
        With numeric hyperparameters.
    noise : float or (n,) array
        Noise variance of the training targets (:math:`\sigma^2` + jitter), as in the likelihood.
    mean : float, callable or None
        Prior mean function :math:`m` (of a 1-D array); ``None``: zero.
    diag : bool
        ``False`` also returns the full :math:`m\times m` predictive covariance (``O(m(n+m))``).
    include_noise : float or None
        Noise variance to add to the predictive variance (of :math:`y_*`); ``None``: of
        :math:`f_*`.

    Returns
    -------
    mean : (m,) array
    var : (m,) array
    cov : (m, m) array or None
    """
    term = to_term(kernel)
    x = np.asarray(x, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    x_new = np.asarray(x_new, dtype=float).ravel()
    n, m = x.shape[0], x_new.shape[0]
    if y.shape[0] != n:
        raise ValueError(f"x has {n} entries but y has {y.shape[0]}")
    s2 = np.broadcast_to(np.asarray(noise, dtype=float), (n,))
    allx = np.concatenate([x, x_new])
    perm, dt = sorted_gaps(allx)
    obs = perm < n
    r_all = np.zeros(n + m)
    r_all[:n] = y - _as_mean(mean, x)
    s2_all = np.zeros(n + m)
    s2_all[:n] = s2
    A = np.ascontiguousarray(term.transition(dt, NP))
    P0 = np.ascontiguousarray(term.stationary_covariance(NP))
    h = np.ascontiguousarray(term.observation(NP))
    mu, var, G, Ps = _smooth(A, P0, h, s2_all[perm], r_all[perm], obs, not diag)
    where = np.empty(n + m, dtype=np.intp)
    where[perm] = np.arange(n + m)
    pos = where[n:]  # merged positions of the test points
    mu_new = mu[pos] + _as_mean(mean, x_new)
    var_new = np.maximum(var[pos], 0.0)
    cov = None
    if not diag:
        order = np.argsort(pos, kind="stable")
        cov = np.empty((m, m))
        cov[np.ix_(order, order)] = _smoothed_cov(G, Ps, h, pos[order])
    var_new, cov = with_noise(var_new, cov, include_noise or 0.0)
    return mu_new, var_new, cov


# ------------------------------------------------------------------- the PyMC variable
class QuasisepLikelihood(ObservedLikelihood):
    r"""The exact GP likelihood :math:`N(y\mid m(x), K + (\sigma^2 + \epsilon)I)` of a 1-D
    state-space kernel in :math:`O(n)`, registered as the observed variable ``name`` of the
    current PyMC model (module docstring). Built by :func:`quasisep_marginal` for a user's own
    model, and by :class:`~bayes_gp.GPRegression` as its marginal likelihood (the strategy
    interface of :class:`~bayes_gp.solvers.exact.ExactLikelihood`: ``predict``, ``loo``,
    ``preflight``; :mod:`bayes_gp.solvers.structured` chooses it), one class for both.

    ``jitter`` is relative to :math:`\operatorname{var}(y)` (the package's convention,
    :mod:`bayes_gp.inference.jitter`), or with ``absolute_jitter=True`` the absolute value (a
    model's shared jitter, which its pre-flight raises).

    ``known_var``, optional: known per-observation noise variances :math:`s_i^2` (``(n,)``),
    added to the diagonal, :math:`d_i = h^\top P_\infty h + s_i^2 + \sigma^2 + \epsilon`;
    ``predict(include_noise=True)`` adds :math:`\sigma^2` only (the new rows' own errors are
    the caller's)."""

    exact = True  # the exact GP, in structured form
    dense = False  # no dense C: the jitter pre-flight is :meth:`preflight`

    def __init__(self, name, x, y, kernel, mean_func, sigma, jitter: float, dims, *,
                 absolute_jitter: bool = False, known_var=None):  # fmt: skip
        self._jitter_is_absolute = bool(absolute_jitter)
        self.term = to_term(kernel)
        self.column = kernel_column(kernel)
        check_aligned(x, y, ("x", "y"))
        X, _ = as_inputs(x, "x")
        self.X, self.x = X, X[:, self.column]
        self.y = as_targets(y, X.shape[0], what="a quasiseparable GP", learned_noise=False)
        self.mean_func = mean_func if mean_func is not None else _zero_mean
        self.sigma2 = pt.square(pt.as_tensor_variable(sigma))
        self.s2 = self.sigma2 + self._absolute_jitter(jitter)
        if known_var is not None:  # known per-observation variances: the diagonal d_i grows
            known_var = np.asarray(known_var, dtype=np.float64)
            if known_var.shape != (X.shape[0],):
                raise ValueError(
                    f"`known_var` must have one entry per observation ({X.shape[0]}), got shape "
                    f"{known_var.shape}"
                )
            self.s2 = self.s2 + pt.as_tensor_variable(known_var)
        self._register(name, dims)

    def _absolute_jitter(self, jitter):
        """The jitter added to :math:`\\sigma^2`: the package's relative jitter times
        :math:`\\operatorname{var}(y)` (:mod:`bayes_gp.inference.jitter`), or ``jitter`` itself
        with ``absolute_jitter=True``."""
        if self._jitter_is_absolute:
            return pt.as_tensor_variable(jitter)
        return check_jitter(jitter) * (float(np.var(self.y)) or 1.0)

    def _loglik(self, value):
        r = value - broadcast_mean(self.mean_func, pt.as_tensor_variable(self.X))
        return quasisep_logp(self.x, r, self.term, self.s2)

    def check(self, draws) -> None:
        """Nothing to check: the likelihood is exact."""

    def _numbers(self, values, Xn):
        leaves = term_leaves(self.term)

        def build(Xv):
            one = pt.ones(())
            return [
                *[pt.as_tensor_variable(v) * one for v in leaves],
                self.s2 * pt.ones(self.x.shape[0]),
                self.sigma2 * pt.ones(()),
                broadcast_mean(self.mean_func, pt.as_tensor_variable(self.X)),
                broadcast_mean(self.mean_func, Xv),
            ]

        out = self._fn("numbers", build)(*values, Xn)
        k = len(leaves)
        term = with_leaves(self.term, [float(v) for v in out[:k]])
        return term, *out[k:]

    def predict(self, values, Xn, diag: bool = True, include_noise: bool = False, jitters=None):
        """Predictive mean and variance (and covariance unless ``diag``) at the rows of ``Xn``
        for hyperparameters ``values`` (in the order of the model's free random variables), R&W
        eqs. (2.25)–(2.26) by the RTS smoother; no extra jitter (0 is appended to ``jitters``,
        the strategy interface's record of the jitter a factorisation needed)."""
        if jitters is not None:
            jitters.append(0.0)
        Xn = np.asarray(Xn, dtype=float)
        Xn = Xn[:, None] if Xn.ndim == 1 else Xn
        term, s2, sigma2, mean_x, mean_n = self._numbers(values, Xn)
        xn = Xn[:, self.column]
        mu, var, cov = quasisep_predict(
            self.x,
            self.y - mean_x,
            xn,
            term,
            s2,
            diag=diag,
            include_noise=float(sigma2) if include_noise else None,
        )
        return mu + mean_n, var, cov

    def _sorted(self, values):
        r"""The recursion's arrays in the sorted order at ``values``: ``(c, B, p, q, kdiag,
        s2, r, perm)`` with ``kdiag`` the kernel's variance and ``s2`` the noise variances
        (:math:`\sigma^2` + jitter)."""
        term, s2, _, mean_x, _ = self._numbers(values, self.X[:0])
        perm, dt = sorted_gaps(self.x)
        P = term.stationary_covariance(NP)
        h = term.observation(NP)
        q = P @ h
        c = term.transition_coefficients(dt, NP)
        B = term.transition_basis(NP)
        r = (self.y - mean_x)[perm]
        return c, B, h, q, float(h @ q), np.asarray(s2, float)[perm], r, perm

    def loo(self, values) -> np.ndarray:
        r"""Exact leave-one-out log predictive densities (R&W eqs. 5.10–5.12) from
        :math:`C^{-1}r` and :math:`\operatorname{diag}(C^{-1})`, :math:`O(n)`."""
        c, B, h, q, kdiag, s2, r, perm = self._sorted(values)
        logp, alpha_s, zdiag_s = quasisep_inverse(c, B, h, q, kdiag + s2, r)
        if not np.isfinite(logp):
            raise NotPSDError(
                "the quasiseparable factorisation of K + (sigma^2 + jitter) I failed (an "
                "innovation variance is not positive): raise the noise level or the jitter"
            )
        alpha, zdiag = np.empty_like(alpha_s), np.empty_like(zdiag_s)
        alpha[perm], zdiag[perm] = alpha_s, zdiag_s
        return loo_terms(zdiag, alpha)

    def preflight(self, points, start: float, current: float, advice: str) -> JitterChoice:
        """The jitter ladder of :func:`bayes_gp.inference.jitter.choose_jitter` on the O(n)
        factorisation (module docstring): the smallest jitter in ``start, 10 start, ...`` with
        which the recursion succeeds at every point of ``points`` (hyperparameter values, the
        initial point first); ``current`` is the jitter the model's graphs hold now.

        Raises
        ------
        NotPSDError
            When even ``MAX_RELATIVE_JITTER`` times the mean diagonal fails, with ``advice``.
        ValueError
            When the kernel is not finite at the initial point.
        """
        # a term's parameter that is not finite and positive raises ValueError: skipped
        found, skipped = finite_at_points(points, lambda v: self._sorted(v)[:7],
                                          errors=(ValueError,))  # fmt: skip
        arrays = [(c, B, h, q, kdiag + s2 - current, r) for c, B, h, q, kdiag, s2, r in found]
        scale = max((float(np.mean(a[4])) for a in arrays), default=1.0)
        limit = MAX_RELATIVE_JITTER * max(scale, np.finfo(float).tiny) * (1 + 1e-9)
        jitter, pending = float(start), arrays
        while True:
            pending = [a for a in pending if not self._factorises(a, jitter)]
            if not pending:
                return JitterChoice(jitter, float(start), len(arrays), skipped)
            step = 10.0 * jitter if jitter > 0 else 1e-12 * scale
            if step > limit:
                break
            jitter = step
        raise NotPSDError(
            f"the quasiseparable factorisation of the covariance fails even with jitter "
            f"{jitter:.3g} ({MAX_RELATIVE_JITTER:g} x its mean diagonal {scale:.3g}) at "
            f"{len(pending)} of {len(arrays)} checked hyperparameter values. {advice}".rstrip()
        )

    @staticmethod
    def _factorises(arrays, jitter: float) -> bool:
        c, B, h, q, d, r = arrays
        with np.errstate(all="ignore"):
            # the kernel NUTS and the optimiser run anyway (no other one compiled for a fit)
            return bool(np.isfinite(quasisep_logp_grad(c, B, h, q, d + jitter, r)[0]))


def _zero_mean(X):
    """The zero mean function."""
    return pt.zeros(X.shape[0])


def quasisep_marginal(
    name: str,
    x,
    y,
    kernel,
    *,
    sigma,
    mean: Callable | None = None,
    jitter: float = 0.0,
    dims=None,
) -> QuasisepLikelihood:
    r"""Add ``y ~ N(m(x), K + (\sigma^2 + \text{jitter}) I)`` to the current PyMC model as the
    observed variable ``name``, with the O(n) quasiseparable log density and gradient.

    Parameters
    ----------
    name : str
        Name of the observed variable.
    x : (n,) or (n, D) array
        Inputs; a kernel expression picks its one column (``active_dims``), a bare term uses
        column 0. Any order, repeats allowed.
    y : (n,) array
        Targets.
    kernel : StateSpaceTerm or kernel expression
        E.g. ``eta**2 * Matern52(1, ls=ell) + Matern12(1, ls=l2) * pm.gp.cov.Cosine(1, ls=T)``;
        an unrepresentable factor raises ``ValueError`` naming it (:func:`representable`).
    sigma : scalar or (n,) tensor
        Noise standard deviation(s).
    mean : callable, optional
        PyMC mean function of the ``(n, D)`` inputs; default zero.
    jitter : float
        Added to the noise variance, relative to :math:`\operatorname{var}(y)` as in every
        bayes_gp model (:mod:`bayes_gp.inference.jitter`): ``jitter * var(y)``.
    dims : optional
        PyMC dims of the observed variable.

    Returns
    -------
    QuasisepLikelihood
        With ``predict(values, Xn, diag, include_noise)`` and ``log_marginal_likelihood(values)``.
    """
    return QuasisepLikelihood(name, x, y, kernel, mean, sigma, jitter, dims)


# ----------------------------------------------------------------------------- backends
@op_backend("numba")
def _register_numba() -> None:
    from pytensor.link.numba.dispatch.basic import numba_njit, register_funcify_and_cache_key

    from bayes_gp.op_backends import numba_cache_key

    @register_funcify_and_cache_key(QuasisepLogp)
    def _numba_quasisep(op, node=None, **kwargs):
        core = _logp_grad_core(op.J, op.K)

        @numba_njit
        def quasisep_numba(c, B, p, q, d, r):
            return core(
                np.ascontiguousarray(c),
                np.ascontiguousarray(B),
                np.ascontiguousarray(p),
                np.ascontiguousarray(q),
                np.ascontiguousarray(d),
                np.ascontiguousarray(r),
            )

        return quasisep_numba, numba_cache_key(op, __name__)


@op_backend("jax")
def _register_jax() -> None:
    """The same recursion with ``jax.lax.scan`` and JAX's reverse mode (for numpyro)."""
    from pytensor.link.jax.dispatch import jax_funcify

    @jax_funcify.register(QuasisepLogp)
    def _jax_quasisep(op, **kwargs):
        import jax
        import jax.numpy as jnp

        def logp_fn(c, B, p, q, d, r):
            J = p.shape[0]

            def step(carry, inp):
                S, f = carry
                c_i, d_i, r_i = inp
                Phi = jnp.tensordot(c_i, B, axes=1)
                S = Phi @ S @ Phi.T
                f = Phi @ f
                Sp = S @ p
                D = d_i - p @ Sp
                u = q - Sp
                z = r_i - p @ f
                return (S + jnp.outer(u, u) / D, f + u * (z / D)), -0.5 * (z * z / D + jnp.log(D))

            init = (jnp.zeros((J, J), B.dtype), jnp.zeros(J, B.dtype))
            _, terms = jax.lax.scan(step, init, (c, d, r))
            logp = jnp.sum(terms) - 0.5 * r.shape[0] * _LOG_2PI
            return jnp.where(jnp.isfinite(logp), logp, -jnp.inf)

        vg = jax.value_and_grad(logp_fn, argnums=(0, 1, 2, 3, 4, 5))

        def quasisep_jax(c, B, p, q, d, r):
            logp, grads = vg(c, B, p, q, d, r)
            return (logp, *grads)

        return quasisep_jax
