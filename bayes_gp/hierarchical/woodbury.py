r"""The exact marginal likelihood of a hierarchical GP, from per-group factors and the Woodbury
identity instead of one dense :math:`N \times N` matrix.

Observations :math:`y_i` of groups :math:`g = 1 \dots G` (group :math:`g` has the rows
:math:`I_g`, :math:`n_g` of them) follow

.. math::
   y_{gi} = m(x_{gi}) + f_0(x_{gi}) + f_g(x_{gi}) + \epsilon_{gi}, \qquad
   f_0 \sim GP(0, k_0), \quad f_g \sim GP(0, k_g), \quad \epsilon_{gi} \sim N(0, \sigma_g^2),

the hierarchical GP of Hensman, Lawrence & Rattray (2013, eq. 2): a population function
:math:`f_0` shared by every group and an independent deviation :math:`f_g` per group. With
:math:`f_0` and the :math:`f_g` integrated out, :math:`y \sim N(m, C)` with

.. math::
   C = A + Z K_0 Z^\top, \qquad A = \operatorname{blockdiag}_g(A_g), \quad
   A_g = K_g(X_g, X_g) + (\sigma_g^2 + \epsilon) I,

where :math:`K_0 = k_0(U, U)` is the population kernel at the :math:`m` distinct inputs
:math:`U` and :math:`Z` the :math:`N \times m` incidence matrix (:math:`Z_{ij} = 1` when
:math:`x_i = u_j`), so that groups observed at the same inputs share :math:`f_0`'s values there.
Given :math:`f_0` the groups are independent.

With :math:`A_g = L_g L_g^\top`, :math:`K_0 + \epsilon I = L_0 L_0^\top`,
:math:`w_g = L_g^{-1} r_g` (:math:`r = y - m`) and :math:`V_g = L_g^{-1} Z_g L_0`
(:math:`Z_g L_0` is rows of :math:`L_0`, no product with :math:`Z` is formed), the Woodbury
identity and the matrix determinant lemma (Rasmussen & Williams 2006, eqs. A.9 and A.10) give

.. math::
   r^\top C^{-1} r = \sum_g w_g^\top w_g - c^\top B^{-1} c, \qquad
   \log|C| = \sum_g \log|A_g| + \log|B|,

.. math::
   B = I_m + \sum_g V_g^\top V_g = I_m + L_0^\top Z^\top A^{-1} Z L_0, \qquad
   c = \sum_g V_g^\top w_g,

and :math:`\log p(y) = -\tfrac12 r^\top C^{-1} r - \tfrac12 \log|C| - \tfrac N2 \log 2\pi`
(R&W eq. 2.30). Cost: :math:`O(\sum_g n_g^3 + N m^2 + m^3)` time and
:math:`O(\sum_g n_g^2 + N m)` memory, against :math:`O(N^3)` and :math:`O(N^2)` for the dense
matrix; it pays when groups share inputs (:math:`m \ll N`: repeated measurements at common
times). Without :math:`f_0` the likelihood is the sum of the independent groups' ones,
:math:`O(\sum_g n_g^3)`.

:func:`structured_logp` is that log density as a PyTensor graph (a Python loop over the groups
builds it: groups of any sizes, but one factorisation node per group, so the compiled graph,
and numba's compile time, grow with the number of groups), usable in any PyMC model; PyTensor
differentiates it. :func:`padded_structured_logp` is the same value from the groups padded to
the largest one (:class:`PaddedLayout`, exact) and factorised as one batch: a graph of fixed
size whatever the number of groups, which :class:`~bayes_gp.hierarchical.HierarchicalGP`
uses. :class:`StructuredFactor` is the same factorisation in NumPy for predictions and
leave-one-out terms (:math:`C^{-1}` applied to vectors and its diagonal, without forming
:math:`C`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pytensor.tensor as pt
from scipy.linalg import cho_solve, solve_triangular

from bayes_gp.linalg import jittered_cholesky

__all__ = [
    "structured_logp",
    "padded_structured_logp",
    "PaddedLayout",
    "StructuredFactor",
    "dense_covariance",
]

_LOG_2PI = float(np.log(2.0 * np.pi))


def _check_layout(rows: Sequence[np.ndarray], u_index: np.ndarray | None, n: int | None):
    """Every row index once; ``u_index`` has one entry per row."""
    rows = [np.asarray(r, dtype=np.int64) for r in rows]
    if not rows or any(r.ndim != 1 or r.size == 0 for r in rows):
        raise ValueError("`rows` must be a non-empty list of non-empty 1-D index arrays")
    allrows = np.sort(np.concatenate(rows))
    total = allrows.size if n is None else n
    if allrows.size != total or not np.array_equal(allrows, np.arange(total)):
        raise ValueError(f"`rows` must hold every row index 0..{total - 1} exactly once")
    if u_index is not None:
        u_index = np.asarray(u_index, dtype=np.int64)
        if u_index.shape != (total,) or np.any(u_index < 0):
            raise ValueError(f"`u_index` must hold one non-negative index per row ({total})")
    return rows, u_index, total


def structured_logp(
    r,
    A_blocks: Sequence,
    rows: Sequence[np.ndarray],
    K0=None,
    u_index: np.ndarray | None = None,
):
    r""":math:`\log N(r \mid 0, C)`, :math:`C = \operatorname{blockdiag}_g(A_g) + Z K_0 Z^\top`,
    as a PyTensor scalar (module docstring for the formulas and the cost).

    Parameters
    ----------
    r : tensor (N,)
        Residuals :math:`y - m`.
    A_blocks : sequence of tensors (n_g, n_g)
        The groups' covariance blocks :math:`A_g = K_g + (\sigma_g^2 + \epsilon) I`
        (symmetric positive definite, the jitter included).
    rows : sequence of int arrays
        The rows of ``r`` in each group; together every row exactly once.
    K0 : tensor (m, m), optional
        The population covariance at the distinct inputs, jitter included; ``None``: no shared
        function, the sum of independent group likelihoods.
    u_index : int array (N,), optional
        Row :math:`i`'s distinct input: :math:`Z_{i, u_i} = 1` (needed with ``K0``).

    Returns
    -------
    tensor ()
        The log density; :math:`-\infty` where a factorisation fails (not positive definite),
        which NUTS treats as a rejected step, as the package's dense likelihood does.
    """
    if len(A_blocks) != len(rows):
        raise ValueError(f"{len(A_blocks)} covariance blocks for {len(rows)} groups")
    if K0 is not None and u_index is None:
        raise ValueError("`K0` needs `u_index` (each row's distinct input)")
    r = pt.as_tensor_variable(r)
    rows, u_index, n = _check_layout(rows, u_index if K0 is not None else None, r.type.shape[0])
    quad = pt.as_tensor_variable(np.float64(0.0))
    logdet = pt.as_tensor_variable(np.float64(0.0))
    L0 = None
    if K0 is not None:
        L0 = pt.linalg.cholesky(pt.as_tensor_variable(K0))
        m = int(u_index.max()) + 1
        B = pt.eye(m, dtype="float64")
        c = pt.zeros((m,), dtype="float64")
    for A, idx in zip(A_blocks, rows, strict=True):
        L = pt.linalg.cholesky(pt.as_tensor_variable(A))  # A_g = L_g L_g^T
        w = pt.linalg.solve_triangular(L, r[idx], lower=True)  # w_g = L_g^{-1} r_g
        quad = quad + pt.dot(w, w)
        logdet = logdet + 2.0 * pt.sum(pt.log(pt.diagonal(L)))
        if L0 is not None:
            V = pt.linalg.solve_triangular(L, L0[u_index[idx]], lower=True)  # L_g^{-1} Z_g L_0
            B = B + pt.dot(V.T, V)
            c = c + pt.dot(V.T, w)
    if L0 is not None:
        LB = pt.linalg.cholesky(B)  # B = I + L_0^T Z^T A^{-1} Z L_0 (determinant lemma)
        v = pt.linalg.solve_triangular(LB, c, lower=True)
        quad = quad - pt.dot(v, v)  # Woodbury: r^T C^{-1} r
        logdet = logdet + 2.0 * pt.sum(pt.log(pt.diagonal(LB)))
    logp = -0.5 * quad - 0.5 * logdet - 0.5 * n * _LOG_2PI
    return pt.switch(pt.isnan(logp), -np.inf, logp)


@dataclass(frozen=True)
class PaddedLayout:
    r"""The groups' rows padded to the largest group, so that one batched Cholesky
    factorisation (and one solve) serves every group: a graph whose size does not grow with the
    number of groups (compiles in seconds for hundreds of groups, where the loop of
    :func:`structured_logp` builds one factorisation per group).

    Padding is exact: a padded entry has residual 0, a unit diagonal and zero covariances in
    its block (so :math:`L_g` is the identity there, :math:`\log 1 = 0` adds nothing to the
    determinant and 0 to the quadratic form) and a zero row of :math:`Z L_0`. The price is
    :math:`O(G n_{\max}^3)` for the blocks instead of :math:`O(\sum_g n_g^3)`: it stays low
    while groups have similar sizes.

    Attributes
    ----------
    index : int array (G, n_max)
        Row of each entry (0 in padding).
    mask : bool array (G, n_max)
        Whether an entry is a row (not padding).
    u : int array (G, n_max) or None
        Each entry's distinct input for the shared function; padding points to row ``m`` of
        :math:`[L_0; 0]`, a zero row.
    m : int
        Number of distinct inputs (0 without a shared function).
    """

    index: np.ndarray
    mask: np.ndarray
    u: np.ndarray | None
    m: int

    @classmethod
    def of(cls, rows: Sequence[np.ndarray], u_index: np.ndarray | None = None) -> PaddedLayout:
        rows, u_index, _ = _check_layout(rows, u_index, None)
        G, n_max = len(rows), max(r.size for r in rows)
        index = np.zeros((G, n_max), dtype=np.int64)
        mask = np.zeros((G, n_max), dtype=bool)
        for g, r in enumerate(rows):
            index[g, : r.size] = r
            mask[g, : r.size] = True
        u, m = None, 0
        if u_index is not None:
            m = int(u_index.max()) + 1
            u = np.where(mask, u_index[index], m)
        return cls(index, mask, u, m)

    def pad_blocks(self, K, diagonal):
        r"""The padded blocks :math:`A = M \odot (K + \operatorname{diag}(d)) + (1 - M)
        \odot I` from kernel blocks ``K`` (G, n_max, n_max) evaluated at padded inputs (any
        values in padding) and the diagonal additions ``d`` (G, n_max) (noise, jitter); ``M``
        masks the entries that are rows."""
        n = self.mask.shape[1]
        mask = self.mask.astype(float)
        outer = pt.as_tensor_variable(mask[:, :, None] * mask[:, None, :])
        eye = pt.as_tensor_variable(np.eye(n)[None])
        pad = pt.as_tensor_variable((1.0 - mask)[:, :, None] * np.eye(n)[None])
        diagonal = pt.as_tensor_variable(diagonal)
        return outer * (pt.as_tensor_variable(K) + eye * diagonal[:, :, None]) + pad


def padded_structured_logp(r, A, layout: PaddedLayout, K0=None):
    r""":func:`structured_logp` with the groups padded (:class:`PaddedLayout`): ``A`` is the
    batch (G, n_max, n_max) of padded blocks (:meth:`PaddedLayout.pad_blocks`), ``K0`` the
    population covariance at the distinct inputs or ``None``. The same value (the padding adds
    exactly nothing) from one Op that factorises the blocks and returns the closed-form gradient
    with the value (:class:`~bayes_gp.solvers.grouped.GroupedGPLogp`; :math:`K_0` is never
    factorised)."""
    from bayes_gp.solvers.grouped import grouped_gp_logp

    r = pt.as_tensor_variable(r)
    A = pt.as_tensor_variable(A)
    if K0 is not None and layout.u is None:
        raise ValueError("`K0` needs a layout with each row's distinct input (u_index)")
    R = r[layout.index] * layout.mask.astype(float)  # (G, n_max), 0 in padding
    n = int(layout.mask.sum())
    if K0 is None:
        return grouped_gp_logp(R, A, n)
    return grouped_gp_logp(R, A, n, layout.u, pt.as_tensor_variable(K0))


def dense_covariance(
    A_blocks: Sequence[np.ndarray],
    rows: Sequence[np.ndarray],
    K0: np.ndarray | None = None,
    u_index: np.ndarray | None = None,
) -> np.ndarray:
    """The dense :math:`C = \\operatorname{blockdiag}_g(A_g) + Z K_0 Z^\\top` (NumPy): the
    reference the structured computations are tested against, and the matrix of small checks."""
    rows, u_index, n = _check_layout(rows, u_index if K0 is not None else None, None)
    C = np.zeros((n, n))
    for A, idx in zip(A_blocks, rows, strict=True):
        C[np.ix_(idx, idx)] += np.asarray(A, float)
    if K0 is not None:
        C += np.asarray(K0, float)[np.ix_(u_index, u_index)]
    return C


#: Most entries (G x n_max x n_max) of the padded stack of group factors that
#: :class:`StructuredFactor` builds for its batched solves; above it (groups of very unequal
#: sizes) it solves group by group.
MAX_PADDED_ENTRIES = 4_000_000


def _pad(Ls: Sequence[np.ndarray], rows: Sequence[np.ndarray]) -> tuple | None:
    """``(L_pad, index, mask)`` of :class:`StructuredFactor` (its ``padded``), or ``None``."""
    G = len(Ls)
    n_max = max((len(idx) for idx in rows), default=0)
    if G < 2 or n_max == 0 or G * n_max * n_max > MAX_PADDED_ENTRIES:
        return None
    L_pad = np.broadcast_to(np.eye(n_max), (G, n_max, n_max)).copy()
    index = np.zeros((G, n_max), dtype=np.int64)
    mask = np.zeros((G, n_max), dtype=bool)
    for g, (L, idx) in enumerate(zip(Ls, rows, strict=True)):
        k = len(idx)
        L_pad[g, :k, :k] = L
        index[g, :k] = idx
        mask[g, :k] = True
    return L_pad, index, mask


def _group_choleskys(blocks: Sequence[np.ndarray]) -> tuple[list, float]:
    """``(factors, largest jitter)``: the blocks of each size factorised as one batch
    (``np.linalg.cholesky`` on the stack); a batch with a non-finite entry or a block that is not
    positive definite goes block by block through :func:`~bayes_gp.linalg.jittered_cholesky`
    (its jitter, or its error)."""
    Ls: list = [None] * len(blocks)
    jit = 0.0
    by_size: dict[int, list[int]] = {}
    for g, A in enumerate(blocks):
        by_size.setdefault(A.shape[0], []).append(g)
    for members in by_size.values():
        stack = np.stack([blocks[g] for g in members])
        try:
            if not np.all(np.isfinite(stack)):
                raise np.linalg.LinAlgError("non-finite block")
            factors = np.linalg.cholesky(stack)
            jitters = [0.0] * len(members)
        except np.linalg.LinAlgError:
            pairs = [jittered_cholesky(blocks[g]) for g in members]
            factors, jitters = [L for L, _ in pairs], [j for _, j in pairs]
        for g, L, j in zip(members, factors, jitters, strict=True):
            Ls[g] = L
            jit = max(jit, j)
    return Ls, jit


@dataclass(frozen=True)
class StructuredFactor:
    r"""The factorisation of :math:`C = \operatorname{blockdiag}_g(A_g) + Z K_0 Z^\top` in NumPy
    (module docstring): per-group factors :math:`L_g` and, with a shared function, the form of
    :mod:`bayes_gp.solvers.grouped` that never factorises :math:`K_0` (exact for a shared
    covariance of low rank, the common effects): :math:`P = A^{-1} Z`,
    :math:`S = Z^\top A^{-1} Z = L_S L_S^\top`, :math:`B = I + L_S^\top K_0 L_S = L_B L_B^\top`
    and :math:`H = (K_0^{-1} + S)^{-1} = L_S^{-\top}(I - B^{-1}) L_S^{-1}`, so that
    :math:`C^{-1} = A^{-1} - P H P^\top` and :math:`|C| = |A|\,|B|`. Build it with :meth:`of`.

    Attributes
    ----------
    rows : list of int arrays
        Each group's rows.
    L : list of ndarray
        :math:`L_g`.
    P, H, LB : ndarray or None
        :math:`P` (N, m), :math:`H` and :math:`L_B` (``None`` without a shared function).
    u_index : int array or None
    n : int
    jitter : float
        The largest jitter a factorisation needed beyond the matrices' own (0: none;
        :func:`bayes_gp.linalg.jittered_cholesky`).
    padded : tuple or None
        ``(L_pad, index, mask)``: the :math:`L_g` stacked into one (G, n_max, n_max) array
        (identity where a group has fewer rows), each group's rows (G, n_max) and which of them
        are real, so that :math:`A^{-1} R` is two batched triangular solves instead of a Python
        loop over the groups (``None`` when padding would waste memory: groups of very unequal
        sizes, :data:`MAX_PADDED_ENTRIES`).
    """

    rows: list
    L: list
    P: np.ndarray | None
    H: np.ndarray | None
    LB: np.ndarray | None
    u_index: np.ndarray | None
    n: int
    jitter: float
    padded: tuple | None = None

    @classmethod
    def of(cls, A_blocks, rows, K0=None, u_index=None) -> StructuredFactor:
        """Factorise the blocks (and :math:`S`, :math:`B`)."""
        rows, u_index, n = _check_layout(rows, u_index if K0 is not None else None, None)
        Ls, jit = _group_choleskys([np.asarray(A, float) for A in A_blocks])
        fac = cls(rows, Ls, None, None, None, u_index, n, float(jit), _pad(Ls, rows))
        if K0 is None:
            return fac
        K0 = np.asarray(K0, float)
        m = K0.shape[0]
        P = fac._Ainv(np.eye(m)[u_index])  # A^{-1} Z
        S = np.zeros((m, m))
        np.add.at(S, u_index, P)  # Z^T A^{-1} Z
        LS, j = jittered_cholesky(0.5 * (S + S.T))
        LB, j2 = jittered_cholesky(np.eye(m) + LS.T @ K0 @ LS)  # I + PSD: jitter-free in practice
        LSinv = solve_triangular(LS, np.eye(m), lower=True, check_finite=False)
        Binv = cho_solve((LB, True), np.eye(m), check_finite=False)
        H = LSinv.T @ (np.eye(m) - Binv) @ LSinv
        return replace(fac, P=P, H=0.5 * (H + H.T), LB=LB, jitter=max(fac.jitter, j, j2))

    def _Ainv(self, R: np.ndarray) -> np.ndarray:
        r""":math:`A^{-1} R` for ``R`` (N, k): per group :math:`L_g^{-\top} L_g^{-1} R_g`."""
        if self.padded is None:
            out = np.empty_like(R)
            for L, idx in zip(self.L, self.rows, strict=True):
                out[idx] = cho_solve((L, True), R[idx], check_finite=False)
            return out
        L, index, mask = self.padded
        Rp = np.where(mask[..., None], R[index], 0.0)  # (G, n_max, k): zeros in the padding
        W = np.linalg.solve(L, Rp)  # L_g^{-1} R_g, batched over the groups
        W = np.linalg.solve(np.swapaxes(L, 1, 2), W)
        out = np.empty_like(R)
        out[index[mask]] = W[mask]
        return out

    def solve(self, R: np.ndarray) -> np.ndarray:
        r""":math:`C^{-1} R` for ``R`` (N,) or (N, k), by the Woodbury identity:
        :math:`C^{-1} = A^{-1} - P H P^\top`."""
        R = np.asarray(R, float)
        vec = R.ndim == 1
        R2 = R[:, None] if vec else R
        out = self._Ainv(R2)
        if self.P is not None:
            out = out - self.P @ (self.H @ (self.P.T @ R2))
        return out[:, 0] if vec else out

    def logdet(self) -> float:
        r""":math:`\log|C|`."""
        total = sum(2.0 * np.sum(np.log(np.diag(L))) for L in self.L)
        if self.LB is not None:
            total += 2.0 * np.sum(np.log(np.diag(self.LB)))
        return float(total)

    def log_density(self, r: np.ndarray) -> float:
        r""":math:`\log N(r \mid 0, C)` (R&W eq. 2.30)."""
        r = np.asarray(r, float)
        return float(-0.5 * r @ self.solve(r) - 0.5 * self.logdet() - 0.5 * self.n * _LOG_2PI)

    def inverse_diagonal(self) -> np.ndarray:
        r""":math:`\operatorname{diag}(C^{-1})`: :math:`\operatorname{diag}(A^{-1})` minus
        :math:`\operatorname{diag}(P H P^\top)`."""
        d = np.empty(self.n)
        for L, idx in zip(self.L, self.rows, strict=True):
            Li = solve_triangular(L, np.eye(L.shape[0]), lower=True, check_finite=False)
            d[idx] = np.sum(Li * Li, axis=0)
        if self.P is not None:
            d = d - np.einsum("ik,kj,ij->i", self.P, self.H, self.P)
        return d

    def loo(self, r: np.ndarray) -> np.ndarray:
        r"""Exact leave-one-out log predictive densities :math:`\log p(y_i \mid y_{-i})`
        (R&W eqs. 5.10–5.12) from :math:`C^{-1} r` and :math:`\operatorname{diag}(C^{-1})`."""
        alpha = self.solve(np.asarray(r, float))
        cinv = self.inverse_diagonal()
        var = 1.0 / cinv
        resid = alpha / cinv
        return -0.5 * np.log(var) - 0.5 * resid**2 / var - 0.5 * _LOG_2PI
