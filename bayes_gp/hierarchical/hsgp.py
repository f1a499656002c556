r"""The Hilbert-space (HSGP) option of :class:`~bayes_gp.HierarchicalGP` (``approx="hsgp"``):
every group deviation :math:`f_g` and the population function :math:`f_0` as :math:`m` basis
functions on one common box, with the basis weights integrated out in closed form.

**Basis** (Solin & Särkkä 2020; Riutort-Mayol et al. 2022, eqs. 8–14). On the box
:math:`[x_c - L, x_c + L]` (:math:`x_c` the midpoint of all training inputs, :math:`L = c S`,
:math:`S` the half-range, per input dimension) a stationary kernel is expanded in the Dirichlet
Laplacian's eigenfunctions,

.. math::
   k(x, x') \approx \sum_{j=1}^{m} S_\theta(\sqrt{\lambda_j})\,\phi_j(x)\phi_j(x'), \qquad
   \phi_j(x) = \prod_d L_d^{-1/2} \sin\!\big(\sqrt{\lambda_{jd}}\,(x_d - x_{c,d} + L_d)\big),
   \quad \lambda_{jd} = \Big(\frac{\pi j_d}{2 L_d}\Big)^2,

with :math:`S_\theta` the kernel's spectral density (R&W eq. 4.6). For an isotropic kernel
:math:`S_{\ell,\eta}(\omega) = \eta^2 \ell^D S_1(\ell\|\omega\|)` with :math:`S_1` that of the
unit kernel, so every group's densities (its own pooled :math:`\ell_g`, :math:`\eta_g`) come from
one batched evaluation. The eigenvalues and the basis are PyMC's (``calc_eigenvalues``; the
eigenfunctions transcribe ``calc_eigenvectors`` and are tested against it).

**Model.** With :math:`f_g = \Phi_g \beta_g`, :math:`\beta_g \sim N(0, \operatorname{diag}
S_{\theta_g})`, :math:`f_0 = \Phi \beta_0`, :math:`\beta_0 \sim N(0, \operatorname{diag}
S_{\theta_0})`, and the random intercept :math:`b_g` as one more basis column of ones with
prior variance :math:`\tau_b^2` (:math:`\Psi_g = [\Phi_g, 1]`, :math:`p = m + 1`; without
intercepts :math:`\Psi_g = \Phi_g`, :math:`p = m`),

.. math::
   y \sim N(\mu, C), \qquad C = \Sigma + \Phi S_0 \Phi^\top
   + \operatorname{blockdiag}_g(\Psi_g \tilde S_g \Psi_g^\top), \qquad
   \Sigma = \operatorname{diag}(s_{g(i)}), \quad s_g = \sigma_g^2 + \epsilon,

i.e. :math:`C = \Sigma + W \Lambda W^\top` with :math:`W = [\Phi,\ \operatorname{blockdiag}_g
\Psi_g]` and the augmented weights :math:`\beta = (\beta_0, \beta_1, \dots, \beta_G)`,
:math:`\Lambda = \operatorname{diag}(S_0, \tilde S_1, \dots, \tilde S_G) = D^2`.

**Evaluation.** Woodbury and the determinant lemma (R&W eqs. A.9, A.10) on the whitened
weights: with :math:`P = I + D W^\top \Sigma^{-1} W D` and :math:`b = D W^\top \Sigma^{-1} r`
(:math:`r = y - \mu`),

.. math::
   r^\top C^{-1} r = r^\top \Sigma^{-1} r - b^\top P^{-1} b, \qquad
   \log|C| = \sum_g n_g \log s_g + \log|P|.

:math:`P` is an *arrow* matrix: the group blocks :math:`M_g = I_p + D_g \Psi_g^\top\Psi_g D_g /
s_g` are coupled only through the population block :math:`P_{00} = I_m + D_0 (\sum_g
\Phi_g^\top\Phi_g / s_g) D_0` by :math:`P_{g0} = D_g \Psi_g^\top \Phi_g D_0 / s_g`. Its block
Cholesky factor, groups first,

.. math::
   M_g = L_g L_g^\top, \quad V_g = L_g^{-1} P_{g0}, \quad
   B = P_{00} - \textstyle\sum_g V_g^\top V_g = L_B L_B^\top,

gives :math:`\log|P| = \sum_g \log|M_g| + \log|B|` and, with :math:`v_g = L_g^{-1} b_g`,
:math:`z_0 = L_B^{-1}(b_0 - \sum_g V_g^\top v_g)`, :math:`b^\top P^{-1} b = \sum_g \|v_g\|^2 +
\|z_0\|^2`. This is the same computation as the exact path's two-level one (each group's
:math:`A_g^{-1}` by Woodbury, then Woodbury again for :math:`f_0`, whose :math:`B` is this
Schur complement), and the cheapest exact evaluation of this low-rank-plus-diagonal :math:`C`:
the full augmented :math:`P` (size :math:`m + Gp`) would cost :math:`O((Gm)^3)`, the arrow
factorisation :math:`O(G(p^3 + p^2 m + p m^2) + m^3)`. Everything data-dependent enters
through the Gram matrices :math:`\Psi_g^\top\Psi_g` (computed once, :math:`O(N p^2)`) and the
projections :math:`\Psi_g^\top r_g` (:math:`O(Np)` per evaluation, a segment sum), so one log
density and gradient costs :math:`O(Np + G p^3 + m^3)`: no :math:`n_g \times n_g` matrix, and
the groups are batched (one batched Cholesky of the :math:`G` blocks), so the graph does not
grow with :math:`G`. Without :math:`f_0` only the group blocks remain.

:class:`HSGPFactor` is the same factorisation in NumPy for predictions and leave-one-out terms;
:func:`dense_hsgp_covariance` the dense :math:`C` the tests check both against.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pytensor.tensor as pt
from pymc.gp.hsgp_approx import calc_eigenvalues
from scipy.linalg import solve_triangular

from bayes_gp import kernels as K
from bayes_gp.solvers.hsgp import PSD_FLOOR

__all__ = [
    "HSGPBasis",
    "HSGPStats",
    "HSGPFactor",
    "HSGP_KERNELS",
    "hsgp_terms",
    "sqrt_spectral_densities",
    "hsgp_structured_logp",
    "dense_hsgp_covariance",
]

_LOG_2PI = float(np.log(2.0 * np.pi))
#: Catalogue kernels the HSGP option accepts (stationary, isotropic, with a spectral density),
#: as their unit-length-scale classes. Sums of them are accepted; products are not (the density
#: of a product is a convolution with no closed form).
HSGP_KERNELS = {"expquad": K.ExpQuad, "matern12": K.Matern12, "exponential": K.Exponential,
                "matern32": K.Matern32, "matern52": K.Matern52, "ratquad": K.RatQuad}  # fmt: skip
#: Input dimensions the HSGP option accepts (the basis has prod(m) functions).
MAX_DIMS = 2
_CHUNK = 8192  # rows of the basis evaluated at a time


@dataclass(frozen=True)
class HSGPBasis:
    r"""The common basis: ``m`` functions per input dimension on the box ``center ± L``.

    Attributes
    ----------
    m : tuple of int
    c : tuple of float
        Boundary factors, :math:`L = c S`.
    center, L : ndarray (D,)
    sqrt_eig : ndarray (M, D)
        :math:`\sqrt{\lambda_j}` per dimension, :math:`M = \prod_d m_d` (PyMC's
        ``calc_eigenvalues``).
    """

    m: tuple
    c: tuple
    center: np.ndarray
    L: np.ndarray
    sqrt_eig: np.ndarray

    @classmethod
    def of(cls, X: np.ndarray, m, c) -> HSGPBasis:
        """The basis of ``m`` functions per dimension on ``c`` times the half-range of ``X``
        about its midpoint."""
        X = np.asarray(X, float)
        lo, hi = X.min(axis=0), X.max(axis=0)
        S = 0.5 * (hi - lo)
        if np.any(S <= 0):
            raise ValueError("approx='hsgp' needs inputs that vary in every input dimension")
        m = tuple(int(v) for v in np.broadcast_to(m, S.shape))
        c = tuple(float(v) for v in np.broadcast_to(c, S.shape))
        L = np.asarray(c) * S
        eig = np.asarray(calc_eigenvalues(L, list(m)), float)
        return cls(m, c, 0.5 * (lo + hi), L, np.sqrt(eig))

    @property
    def size(self) -> int:
        """:math:`M = \\prod_d m_d`."""
        return int(np.prod(self.m))

    def phi(self, Xn: np.ndarray) -> np.ndarray:
        r""":math:`\Phi` at ``Xn`` (n, M): :math:`\prod_d L_d^{-1/2}\sin(\sqrt{\lambda_{jd}}
        (x_d - x_{c,d} + L_d))` (PyMC's Dirichlet ``calc_eigenvectors``). Inputs outside the box
        raise a ``ValueError`` (the basis vanishes at the walls and reflects beyond)."""
        Xn = np.atleast_2d(np.asarray(Xn, float))
        lo, hi = self.center - self.L, self.center + self.L
        if np.any(Xn < lo) or np.any(Xn > hi):
            raise ValueError(
                f"inputs outside the HSGP box [{lo.round(4).tolist()}, {hi.round(4).tolist()}] "
                "(c times the training inputs' half-range about their midpoint), where the basis "
                "is no GP: build the model with a larger approx_options['c']"
            )
        out = np.ones((Xn.shape[0], self.size))
        for d in range(Xn.shape[1]):
            arg = (Xn[:, d, None] - self.center[d] + self.L[d]) * self.sqrt_eig[None, :, d]
            out *= np.sin(arg) / np.sqrt(self.L[d])
        return out


@dataclass(frozen=True)
class HSGPStats:
    r"""The data's fixed part of the HSGP likelihood: each row's basis row :math:`\psi_i` and
    group, and the groups' Gram matrices.

    Attributes
    ----------
    Psi : ndarray (N, p)
        :math:`\Psi` rows (:math:`[\phi(x_i), 1]` with intercepts).
    codes : int array (N,)
        Each row's group.
    gram : ndarray (G, p, p)
        :math:`\Psi_g^\top \Psi_g`.
    counts : ndarray (G,)
        :math:`n_g`.
    m : int
        Basis functions :math:`M` (the first ``m`` columns of :math:`\Psi`, those :math:`f_0`
        uses).
    index, mask : ndarray (G, n_max)
        Each group's rows padded to the largest group (as
        :class:`~bayes_gp.hierarchical.woodbury.PaddedLayout`).
    PsiT_pad : ndarray (G, p, n_max)
        :math:`\Psi_g^\top` with zero columns in padding: :math:`\Psi_g^\top r_g` for all
        groups is one batched matrix-vector product (a BLAS call, where a scattered sum over the
        rows costs 25 times more at N = 24000).
    """

    Psi: np.ndarray
    codes: np.ndarray
    gram: np.ndarray
    counts: np.ndarray
    m: int
    index: np.ndarray
    mask: np.ndarray
    PsiT_pad: np.ndarray

    @classmethod
    def of(cls, basis: HSGPBasis, X: np.ndarray, codes: np.ndarray, n_groups: int,
           intercept: bool) -> HSGPStats:  # fmt: skip
        """Evaluate the basis at the training rows and accumulate the Gram matrices."""
        codes = np.asarray(codes, dtype=np.int64)
        N, M = X.shape[0], basis.size
        p = M + int(intercept)
        Psi = np.ones((N, p))
        gram = np.zeros((n_groups, p, p))
        for s in range(0, N, _CHUNK):
            sl = slice(s, s + _CHUNK)
            Psi[sl, :M] = basis.phi(X[sl])
        for g in range(n_groups):
            P = Psi[codes == g]
            gram[g] = P.T @ P
        counts = np.bincount(codes, minlength=n_groups).astype(float)
        n_max = int(counts.max())
        index = np.zeros((n_groups, n_max), dtype=np.int64)
        mask = np.zeros((n_groups, n_max), dtype=bool)
        for g in range(n_groups):
            rows = np.flatnonzero(codes == g)
            index[g, : rows.size], mask[g, : rows.size] = rows, True
        PsiT_pad = np.ascontiguousarray((Psi[index] * mask[..., None]).transpose(0, 2, 1))
        return cls(Psi, codes, 0.5 * (gram + gram.transpose(0, 2, 1)), counts, M, index, mask,
                   PsiT_pad)  # fmt: skip

    def project(self, r: np.ndarray) -> np.ndarray:
        r""":math:`\Psi_g^\top r_g` for every group, (G, p)."""
        return (self.PsiT_pad @ (r[self.index] * self.mask)[..., None])[..., 0]


def hsgp_terms(spec) -> list[tuple[str, type]]:
    """``[(label, unit kernel class)]`` of a catalogue kernel spec that the HSGP option accepts:
    one catalogue kernel of :data:`HSGP_KERNELS` or a sum of them; a ``ValueError`` naming what
    is supported otherwise."""
    supported = (
        f"supported: {sorted(HSGP_KERNELS)} and sums of them (e.g. 'matern32 + expquad'); "
        "products, periodic and compactly supported kernels have no closed-form spectral density"
    )
    if not getattr(spec, "catalogue", False):
        raise ValueError(f"approx='hsgp' needs a catalogue kernel name; {supported}")
    out = []
    for label in (t.strip() for t in spec.name.split("+")):
        if "*" in label:
            raise ValueError(f"approx='hsgp': the product {label!r} is not supported; {supported}")
        # a label is a kernel name, numbered when it repeats ('matern121': the first of two
        # 'matern12' terms): the longest name it extends by digits
        names = [k for k in HSGP_KERNELS if label.startswith(k) and
                 (label == k or label[len(k):].isdigit())]  # fmt: skip
        if not names:
            raise ValueError(f"approx='hsgp': the kernel {label!r} is not supported; {supported}")
        names = sorted(names, key=len)[-1:]
        out.append((label, HSGP_KERNELS[names[0]]))
    return out


def sqrt_spectral_densities(terms, params: list[str], theta, sqrt_eig: np.ndarray, D: int,
                            fixed: dict | None = None):  # fmt: skip
    r""":math:`\sqrt{S_\theta(\sqrt{\lambda_j})}` for rows of hyperparameters.

    .. math::
       S_\theta(\omega) = \sum_t \eta_t^2\, \ell_t^D\, S_{1,t}(\ell_t \|\omega\|)

    over the additive terms ``terms`` (:func:`hsgp_terms`), :math:`S_1` the unit kernel's
    density (R&W eq. 4.6, PyMC's angular-frequency convention), floored at
    :data:`~bayes_gp.solvers.hsgp.PSD_FLOOR` before the square root as the regression HSGP.

    Parameters
    ----------
    terms : list
        ``(label, unit class)`` pairs.
    params : list of str or dict
        The kernel's hyperparameter names, in the columns' order of ``theta``, or a map from
        each name to its column (an int) or columns (a slice of ``D``: an ARD length-scale,
        :math:`S_\theta(\omega) = \eta^2 \prod_d \ell_d\, S_1(\|\ell \odot \omega\|)`).
    theta : tensor (G, P)
        One row of hyperparameters per group (``P >= len(params)``).
    sqrt_eig : ndarray (M, D)
    D : int
    fixed : dict, optional
        Shared hyperparameters given as numbers (a ``ratquad`` ``alpha``), used instead of their
        column of ``theta``: the density of a learned ``alpha`` has no gradient (no derivative
        of the Bessel function in its order), and a column of ``theta`` cannot be told constant.

    Returns
    -------
    tensor (G, M)
    """
    theta = pt.as_tensor_variable(theta)
    col = dict(params) if isinstance(params, Mapping) else {p: i for i, p in enumerate(params)}
    total = 0.0
    G = theta.shape[0]
    for label, cls in terms:
        prefixed = f"{label}_ls" in col  # a sum's terms: 'expquad_ls'; one kernel: 'ls'
        key = (lambda p, lab=label: f"{lab}_{p}") if prefixed else (lambda p: p)
        ls = theta[:, col[key("ls")]]
        eta = theta[:, col[key("eta")]]
        fixed = fixed or {}
        extra = {}
        if key("alpha") in col:
            extra["alpha"] = fixed.get(key("alpha"), theta[0, col[key("alpha")]])
        unit = cls(D, ls=1.0, **extra)
        if ls.ndim == 2:  # ARD: S(w) = eta^2 prod_d l_d S_1(|l * w|)
            w = ls[:, None, :] * pt.as_tensor_variable(sqrt_eig)[None]  # (G, M, D)
            volume = pt.prod(ls, axis=1)
        else:
            w = ls[:, None, None] * pt.as_tensor_variable(sqrt_eig)[None]  # (G, M, D): l * omega
            volume = pt.power(ls, D)
        s1 = unit.power_spectral_density(pt.reshape(w, (-1, D)))
        s1 = pt.reshape(s1, (G, sqrt_eig.shape[0]))
        total = total + (pt.square(eta) * volume)[:, None] * s1
    return pt.sqrt(pt.maximum(total, PSD_FLOOR))


def hsgp_structured_logp(r, stats: HSGPStats, Dg, s, D0=None):
    r""":math:`\log N(r \mid 0, C)` of the module docstring as a PyTensor scalar.

    Parameters
    ----------
    r : tensor (N,)
        Residuals :math:`y - \mu`.
    stats : HSGPStats
    Dg : tensor (G, p)
        :math:`D_g`: square roots of the group weights' prior variances (the spectral
        densities, then :math:`\tau_b` with intercepts).
    s : tensor (G,)
        :math:`s_g = \sigma_g^2 + \epsilon`.
    D0 : tensor (m,), optional
        :math:`D_0` of the population function; ``None``: no :math:`f_0`.

    Returns
    -------
    tensor ()
        The log density; :math:`-\infty` where a factorisation fails.
    """
    r = pt.as_tensor_variable(r)
    Dg, s = pt.as_tensor_variable(Dg), pt.as_tensor_variable(s)
    p = stats.gram.shape[1]
    m = stats.m
    gram = pt.as_tensor_variable(stats.gram)
    # h_g = Psi_g^T r_g for all groups: one batched product with the padded Psi_g^T
    R = r[stats.index] * stats.mask.astype(float)
    h = pt.matmul(pt.as_tensor_variable(stats.PsiT_pad), R[..., None])[..., 0]
    s_rows = s[stats.codes]
    quad = pt.sum(pt.square(r) / s_rows)  # r^T Sigma^-1 r
    logdet = pt.sum(pt.as_tensor_variable(stats.counts) * pt.log(s))
    b = Dg * h / s[:, None]  # b_g = D_g Psi_g^T r_g / s_g
    Mg = pt.eye(p)[None] + Dg[:, :, None] * gram * Dg[:, None, :] / s[:, None, None]
    Lg = pt.linalg.cholesky(Mg)  # M_g = L_g L_g^T, batched over groups
    v = pt.linalg.solve_triangular(Lg, b[..., None], lower=True)[..., 0]
    quad = quad - pt.sum(pt.square(v))
    logdet = logdet + 2.0 * pt.sum(pt.log(pt.diagonal(Lg, axis1=-2, axis2=-1)))
    if D0 is not None:
        D0 = pt.as_tensor_variable(D0)
        ws = 1.0 / s
        P00 = pt.eye(m) + D0[:, None] * pt.tensordot(ws, gram[:, :m, :m], axes=1) * D0[None, :]
        Pg0 = Dg[:, :, None] * gram[:, :, :m] * (D0[None, None, :] * ws[:, None, None])
        V = pt.linalg.solve_triangular(Lg, Pg0, lower=True)  # (G, p, m)
        B = P00 - pt.tensordot(V, V, axes=[[0, 1], [0, 1]])  # Schur complement of the arrow
        b0 = D0 * pt.tensordot(ws, h[:, :m], axes=1)
        LB = pt.linalg.cholesky(B)
        z0 = pt.linalg.solve_triangular(LB, b0 - pt.tensordot(V, v, axes=[[0, 1], [0, 1]]),
                                        lower=True)  # fmt: skip
        quad = quad - pt.sum(pt.square(z0))
        logdet = logdet + 2.0 * pt.sum(pt.log(pt.diagonal(LB)))
    n = stats.Psi.shape[0]
    logp = -0.5 * quad - 0.5 * logdet - 0.5 * n * _LOG_2PI
    return pt.switch(pt.isnan(logp), -np.inf, logp)


def dense_hsgp_covariance(stats: HSGPStats, Dg: np.ndarray, s: np.ndarray,
                          D0: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    r"""The dense :math:`C = \Sigma + \Phi D_0^2 \Phi^\top + \operatorname{blockdiag}_g(\Psi_g
    D_g^2 \Psi_g^\top)` (NumPy, :math:`O(N^2)`): the reference of the tests."""
    Psi, codes = stats.Psi, stats.codes
    Dg, s = np.asarray(Dg, float), np.asarray(s, float)
    F = Psi * Dg[codes]
    same = codes[:, None] == codes[None, :]
    C = np.where(same, F @ F.T, 0.0) + np.diag(s[codes])
    if D0 is not None:
        F0 = Psi[:, : stats.m] * np.asarray(D0, float)
        C += F0 @ F0.T
    return C


@dataclass(frozen=True)
class HSGPFactor:
    r"""The arrow factorisation of the module docstring in NumPy, at one hyperparameter value,
    with the posterior of the whitened weights given the residuals ``r``.

    Attributes
    ----------
    stats : HSGPStats
    Dg, s, D0
        As :func:`hsgp_structured_logp` (``D0`` ``None`` without :math:`f_0`).
    Lg : ndarray (G, p, p)
    V : ndarray (G, p, m) or None
    LB : ndarray (m, m) or None
    u_g, u_0 : ndarray
        :math:`u = P^{-1} b`, the posterior mean of the whitened weights
        :math:`D^{-1}\beta` (groups (G, p), population (m,) or ``None``).
    logp : float
        :math:`\log N(r \mid 0, C)`.
    """

    stats: HSGPStats
    Dg: np.ndarray
    s: np.ndarray
    D0: np.ndarray | None
    Lg: np.ndarray
    V: np.ndarray | None
    LB: np.ndarray | None
    u_g: np.ndarray
    u_0: np.ndarray | None
    logp: float

    @classmethod
    def of(cls, stats: HSGPStats, Dg, s, D0, r) -> HSGPFactor:
        """Factorise at ``(Dg, s, D0)`` and solve for the residuals ``r``."""
        Dg, s, r = np.asarray(Dg, float), np.asarray(s, float), np.asarray(r, float)
        p = stats.gram.shape[1]
        m = stats.m
        h = stats.project(r)
        b = Dg * h / s[:, None]
        Mg = np.eye(p)[None] + Dg[:, :, None] * stats.gram * Dg[:, None, :] / s[:, None, None]
        Lg = np.linalg.cholesky(Mg)  # I + PSD: positive definite
        v = np.linalg.solve(Lg, b[..., None])[..., 0]  # triangular systems (batched)
        quad = float(np.sum(r**2 / s[stats.codes]) - np.sum(v**2))
        logdet = float(np.sum(stats.counts * np.log(s)) + 2 * np.sum(np.log(
            np.diagonal(Lg, axis1=1, axis2=2))))  # fmt: skip
        V = LB = u0 = None
        if D0 is not None:
            D0 = np.asarray(D0, float)
            ws = 1.0 / s
            P00 = np.eye(m) + D0[:, None] * np.tensordot(ws, stats.gram[:, :m, :m], 1) * D0
            Pg0 = Dg[:, :, None] * stats.gram[:, :, :m] * (D0[None, None, :] * ws[:, None, None])
            V = np.linalg.solve(Lg, Pg0)
            B = P00 - np.tensordot(V, V, axes=([0, 1], [0, 1]))
            LB = np.linalg.cholesky(0.5 * (B + B.T))
            b0 = D0 * (ws @ h[:, :m])
            z0 = solve_triangular(LB, b0 - np.tensordot(V, v, axes=([0, 1], [0, 1])), lower=True)
            quad -= float(z0 @ z0)
            logdet += 2.0 * float(np.sum(np.log(np.diag(LB))))
            u0 = solve_triangular(LB.T, z0, lower=False)
            v = v - np.einsum("gpm,m->gp", V, u0)
        ug = np.linalg.solve(Lg.transpose(0, 2, 1), v[..., None])[..., 0]
        logp = -0.5 * quad - 0.5 * logdet - 0.5 * r.size * _LOG_2PI
        return cls(stats, Dg, s, None if D0 is None else D0, Lg, V, LB, ug, u0, float(logp))

    def forward(self, g: int | None, a_g: np.ndarray | None, a_0: np.ndarray | None):
        r""":math:`z = L^{-1} a` for whitened functionals ``a`` (columns) that are nonzero only in
        group ``g``'s block (``a_g`` (p, k)) and the population block (``a_0`` (m, k));
        :math:`a^\top P^{-1} a = \|z\|^2`. Returns the squared norms (k,)."""
        out = 0.0
        zg = None
        if g is not None:
            zg = solve_triangular(self.Lg[g], a_g, lower=True)
            out = out + np.sum(zg * zg, axis=0)
        if self.LB is not None:
            rhs = a_0 if zg is None else a_0 - self.V[g].T @ zg  # a_0 given with f0
            z0 = solve_triangular(self.LB, rhs, lower=True)
            out = out + np.sum(z0 * z0, axis=0)
        return out

    def predict(self, g: int | None, Psi_s: np.ndarray):
        r"""Posterior mean and variance (without the prior mean and the noise) of
        :math:`f_* = \psi_*^\top \beta_g + \phi_*^\top \beta_0` at rows ``Psi_s`` (k, p) of a
        known group ``g`` (``g=None``: only :math:`f_0`'s part; a new group's own deviation is
        added by the caller from its prior): :math:`a^\top u` and :math:`\|L^{-1} a\|^2` with the
        whitened functional :math:`a = (D_g \psi_*, D_0 \phi_*)` (R&W eqs. 2.11-2.12 for the
        weights)."""
        k = Psi_s.shape[0]
        mean = np.zeros(k)
        a_g = a_0 = None
        if g is not None:
            a_g = (Psi_s * self.Dg[g]).T
            mean += a_g.T @ self.u_g[g]
        if self.D0 is not None:
            a_0 = (Psi_s[:, : self.stats.m] * self.D0).T
            mean += a_0.T @ self.u_0
        return mean, np.zeros(k) + self.forward(g, a_g, a_0)

    def loo(self, r: np.ndarray) -> np.ndarray:
        r"""Exact leave-one-out log predictive densities of the HSGP model (R&W eqs.
        5.10–5.12): :math:`[C^{-1}]_{ii} = s_i^{-1}(1 - s_i^{-1}\|L^{-1} D w_i\|^2)` and
        :math:`C^{-1} r = \Sigma^{-1}(r - W D u)`, :math:`O(N(p^2 + m^2))` in all."""
        st = self.stats
        r = np.asarray(r, float)
        out = np.empty(r.size)
        for g in range(st.gram.shape[0]):
            idx = np.flatnonzero(st.codes == g)
            for k in range(0, idx.size, _CHUNK):
                rows = idx[k : k + _CHUNK]
                Psi = st.Psi[rows]
                a_g = (Psi * self.Dg[g]).T
                fit = a_g.T @ self.u_g[g]
                a_0 = None
                if self.D0 is not None:
                    a_0 = (Psi[:, : st.m] * self.D0).T
                    fit = fit + a_0.T @ self.u_0
                sg = self.s[g]
                cinv = (1.0 - self.forward(g, a_g, a_0) / sg) / sg
                alpha = (r[rows] - fit) / sg
                var = 1.0 / cinv
                out[rows] = -0.5 * np.log(var) - 0.5 * (alpha / cinv) ** 2 / var - 0.5 * _LOG_2PI
        return out
