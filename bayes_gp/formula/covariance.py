r"""The covariance of each kind of formula term, over the columns of the model's design matrix.

Every term of a formula model is a zero-mean Gaussian process (or has a Gaussian prior whose
covariance is one), so the sum of the terms is a GP whose covariance is the sum of theirs
(R&W §2.7, eq. 2.39; PRML eq. 6.17):

* a GP term: its kernel on its own columns, times :math:`[g = g']` with ``by=g``; with a
  factor input ``c`` (``gp(t, region)``), times the levels' correlation :math:`B_{cc'}`
  (:class:`OpenExchangeable`, or :class:`~bayes_gp.kernels.categorical.Coregion` with
  ``cat="coregion"``) on the factor's code column;
* a group-specific effect ``(z | g)`` with :math:`b_g \sim N(0, \sigma_g^2)`:
  :math:`\sigma_g^2\, z z'\,[g = g']` (:math:`z = 1` for ``(1 | g)``);
* the common effects :math:`h^\top \beta` with :math:`\beta \sim N(b, B)`, :math:`B` diagonal:
  :math:`h^\top B h'` and the mean :math:`h^\top b` (R&W eq. 2.39).

Groups are integer codes in one column; a level that the training data did not have gets a code
of its own (negative), so a new group is independent of every training group and has the prior
variance of the term: predictions for new groups carry the group-level uncertainty.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.gp.hsgp_approx import calc_eigenvalues, calc_eigenvectors
from pytensor.graph.replace import vectorize_graph

from bayes_gp.kernels.base import Kernel
from bayes_gp.kernels.categorical import Exchangeable

__all__ = [
    "OnColumns",
    "SameGroup",
    "LinearBasis",
    "FixedMean",
    "HSGPTerm",
    "InducingTerm",
    "LevelKernel",
    "OpenExchangeable",
]


class OnColumns(Kernel):
    """``base`` (a covariance of ``len(columns)`` inputs) evaluated on some columns of a wider
    design matrix of ``input_dim`` columns."""

    def __init__(self, base: pm.gp.cov.Covariance, input_dim: int, columns: Sequence[int]):
        super().__init__(input_dim, columns)
        self.base = base

    def full(self, X, Xs=None):
        X, Xs = self._slice(X, Xs)
        return self.base(X, Xs)

    def diag(self, X):
        X, _ = self._slice(X)
        return self.base(X, diag=True)


class HSGPTerm(Kernel):
    r"""The Hilbert-space reduced-rank approximation of a stationary ``base`` kernel on some
    columns (Solin & Särkkä 2020; Riutort-Mayol et al. 2022):

    .. math::
       \tilde k(x, x') = \sum_j S(\sqrt{\lambda_j})\, \phi_j(x) \phi_j(x'),

    with the Laplacian's eigenfunctions :math:`\phi_j` on the box :math:`[c - L, c + L]` around
    the training data's midpoint (``center``), :math:`L` = ``c`` times its half-range,
    :math:`m` functions per input, and the kernel's spectral density :math:`S`. Its
    :meth:`features` :math:`F = \Phi\, \operatorname{diag}(S)^{1/2}` give
    :math:`\tilde K = F F^\top`."""

    def __init__(self, base, input_dim: int, columns: Sequence[int], m, L, center):
        super().__init__(input_dim, columns)
        self.base = base
        self.m = tuple(int(v) for v in m)
        self.L = np.asarray(L, dtype=float)
        self.center = np.asarray(center, dtype=float)
        self.eigvals = calc_eigenvalues(self.L, self.m)

    def features(self, X):
        r""":math:`\Phi(X)\, \operatorname{diag}(S)^{1/2}`, ``(n, prod(m))``."""
        X, _ = self._slice(X)
        phi = calc_eigenvectors(X - self.center, self.L, self.eigvals, self.m)
        psd = self.base.power_spectral_density(pt.as_tensor_variable(np.sqrt(self.eigvals)))
        return phi * pt.sqrt(pt.maximum(psd, 1e-250))[None, :]

    def full(self, X, Xs=None):
        F = self.features(X)
        Fs = F if Xs is None else self.features(Xs)
        return pt.dot(F, Fs.T)

    def diag(self, X):
        return pt.sum(pt.square(self.features(X)), axis=1)


class InducingTerm(Kernel):
    r"""The inducing-input approximation of a ``base`` kernel on some columns
    (``gp(..., approx="vfe" | "fitc")``): with inducing inputs :math:`Z` (``m`` k-means centres
    of the term's training inputs) and :math:`K_{ZZ} + \epsilon I = L L^	op`,

    .. math::
       q(x, x') = k(x, Z)\, (K_{ZZ} + \epsilon I)^{-1} k(Z, x') = f(x)^	op f(x'), \qquad
       f(x) = L^{-1} k(Z, x),

    the Nyström covariance that VFE (Titsias 2009, eq. 9) and FITC (Snelson & Ghahramani
    2006; Quiñonero-Candela & Rasmussen 2005, eq. 21) put between the training rows and between
    training and new rows; :meth:`features` :math:`F = [f(x_i)^	op]_i` give :math:`Q = F F^	op`
    and :meth:`residual` the diagonal :math:`k(x_i, x_i) - q(x_i, x_i)` that FITC adds to the
    noise and VFE's trace term penalises (:mod:`bayes_gp.formula.lowrank`). The prior at new
    rows is the exact kernel's (:meth:`full` without a second argument, :meth:`diag`), so the
    predictive distribution of a term is theirs (Quiñonero-Candela & Rasmussen 2005, eqs.
    20b and 24b): :math:`K_{**} - Q_{*n} C^{-1} Q_{n*}`.

    ``jitter`` :math:`\epsilon` is a number or a scalar tensor (GPRegression's rule for its own
    VFE/FITC: :math:`10^{-6}` of the data's variance, or the model's jitter when larger)."""

    def __init__(self, base, input_dim: int, columns: Sequence[int], Z, jitter, kind: str):
        super().__init__(input_dim, columns)
        self.base = base
        self.Z = np.asarray(Z, dtype=float)
        self.jitter = jitter
        self.kind = kind

    def _chol(self):
        Kzz = self.base(pt.as_tensor_variable(self.Z))
        return pt.linalg.cholesky(Kzz + self.jitter * pt.eye(self.Z.shape[0]))

    def features(self, X):
        r""":math:`F = (L^{-1} K_{ZX})^\top`, ``(n, m)``."""
        X, _ = self._slice(X)
        Kzx = self.base(pt.as_tensor_variable(self.Z), X)
        return pt.linalg.solve_triangular(self._chol(), Kzx, lower=True).T

    def residual(self, X):
        r""":math:`k(x_i, x_i) - q(x_i, x_i) \ge 0` (clipped at zero against rounding)."""
        F = self.features(X)
        Xs, _ = self._slice(X)
        return pt.maximum(self.base(Xs, diag=True) - pt.sum(pt.square(F), axis=1), 0.0)

    def full(self, X, Xs=None):
        if Xs is None:  # the prior of a set of rows: the exact kernel's
            X, _ = self._slice(X)
            return self.base(X)
        return pt.dot(self.features(X), self.features(Xs).T)

    def diag(self, X):
        X, _ = self._slice(X)
        return self.base(X, diag=True)


class LevelKernel(Kernel):
    r"""One GP per level of a factor, each with its own hyperparameters
    (``gp(t, by=g, pooling="partial" | "none")``):

    .. math::
       k\big((x, g), (x', g')\big) = k_{\theta_g}(x, x')\,[g = g'],

    ``template`` the term's kernel built with scalar (or, for ARD length-scales, vector)
    ``placeholders`` for the levels' hyperparameters, ``values`` their per-level values
    (tensors ``(L,)`` or ``(L, D)``) and ``new_values`` those of a level the training data
    lacked (a negative code: the population's median under partial pooling, the prior's
    otherwise). Row :math:`i` of the covariance is the template at row :math:`i`'s own
    level's values — the template's graph vectorised over the rows
    (``pytensor.graph.replace.vectorize_graph``), :math:`O(nm)` evaluations like one shared
    kernel — and the level indicator keeps only pairs of one level, where the two rows' values
    are the same, so the matrix is symmetric (and each block positive semi-definite)."""

    def __init__(self, template, input_dim: int, group: int, placeholders, values, new_values):
        super().__init__(input_dim, list(range(input_dim)))
        self.template = template
        self.group = int(group)
        self.placeholders = list(placeholders)
        self.values = [pt.as_tensor_variable(v) for v in values]
        self.new_values = [pt.as_tensor_variable(v) for v in new_values]

    def _row_values(self, codes):
        """Each row's values of the placeholders: its level's, or a new level's."""
        idx = pt.cast(codes, "int64")
        known = pt.ge(idx, 0)
        safe = pt.maximum(idx, 0)
        out = []
        for v, new in zip(self.values, self.new_values, strict=True):
            per_row = v[safe]
            mask = known if per_row.ndim == 1 else known[:, None]
            out.append(pt.switch(mask, per_row, new))
        return out

    def _by_row(self, graph_of_row, X):
        x1 = pt.dmatrix("x_row")
        out = graph_of_row(x1)
        X = pt.as_tensor_variable(X)
        repl = {x1: X[:, None, :]}
        repl.update(zip(self.placeholders, self._row_values(X[:, self.group]), strict=True))
        return vectorize_graph(out, repl)

    def full(self, X, Xs=None):
        X = pt.as_tensor_variable(X)
        Xs = X if Xs is None else pt.as_tensor_variable(Xs)
        K = self._by_row(lambda x1: self.template(x1, Xs), X)[:, 0, :]
        same = pt.eq(X[:, self.group][:, None], Xs[:, self.group][None, :])
        return K * same.astype("float64")

    def diag(self, X):
        return self._by_row(lambda x1: self.template(x1, diag=True), X)[:, 0]


class SameGroup(Kernel):
    r"""The group indicator :math:`[g = g']\, z z'` of a group code column (and, for a varying
    coefficient, the column :math:`z` it multiplies)."""

    def __init__(self, input_dim: int, group: int, z: int | None = None):
        super().__init__(input_dim, [group] if z is None else [group, z])
        self.has_z = z is not None

    def full(self, X, Xs=None):
        X, Xs = self._slice(X, Xs)
        Xs = X if Xs is None else Xs
        same = pt.eq(X[:, 0][:, None], Xs[:, 0][None, :]).astype("float64")
        if self.has_z:
            same = same * X[:, 1][:, None] * Xs[:, 1][None, :]
        return same

    def diag(self, X):
        X, _ = self._slice(X)
        return pt.square(X[:, 1]) if self.has_z else pt.ones(X.shape[0], dtype="float64")


class LinearBasis(Kernel):
    r""":math:`h^\top B h'` for basis columns :math:`h` and a diagonal prior covariance
    :math:`B = \operatorname{diag}(v)` of their coefficients (R&W eq. 2.39)."""

    def __init__(self, input_dim: int, columns: Sequence[int], variances: np.ndarray):
        super().__init__(input_dim, columns)
        self.variances = np.asarray(variances, dtype=float)

    def full(self, X, Xs=None):
        X, Xs = self._slice(X, Xs)
        Xs = X if Xs is None else Xs
        return pt.dot(X * self.variances, Xs.T)

    def diag(self, X):
        X, _ = self._slice(X)
        return pt.sum(pt.square(X) * self.variances, axis=1)


class FixedMean(pm.gp.mean.Mean):
    r"""The prior mean of a formula model: the intercept's prior mean :math:`b_0`, plus
    :math:`h^\top b` of its common effects, plus its offset column."""

    def __init__(
        self, columns: Sequence[int], b: np.ndarray, offset: int | None = None, b0: float = 0.0
    ):
        super().__init__()
        self.columns = list(columns)
        self.b = np.asarray(b, dtype=float)
        self.offset = offset
        self.b0 = float(b0)

    def __call__(self, X):
        X = pt.as_tensor_variable(X)
        out = pt.zeros(X.shape[0], dtype="float64") + self.b0
        if self.columns:
            out = out + pt.dot(X[:, self.columns], self.b)
        if self.offset is not None:
            out = out + X[:, self.offset]
        return out


class OpenExchangeable(Exchangeable):
    r"""The exchangeable correlation of the levels of a factor (:class:`~bayes_gp.kernels.
    categorical.Exchangeable`), open to levels the training data lacked:

    .. math::
       k(c, c') = \rho + (1 - \rho)\,[c = c'],

    which is :math:`B_{cc'} = (1 - \rho)\,\delta_{cc'} + \rho` on the known levels' codes
    :math:`0, \dots, L-1` and gives a new level (a negative code of the design, one per unseen
    label) correlation 1 with itself and :math:`\rho` with every other level: the levels are
    exchangeable, so a new one is one more draw of the same kind (the covariance of the
    :math:`L + 1` levels is the same matrix one size larger, positive semi-definite for
    :math:`\rho \in [-1/L, 1]`, so for the default prior's :math:`[0, 1]`)."""

    def full(self, X, Xs=None):
        X, Xs = self._slice(X, Xs)
        Xs = X if Xs is None else Xs
        same = pt.eq(X[:, 0][:, None], Xs[:, 0][None, :]).astype("float64")
        return self.rho + (1.0 - self.rho) * same

    def diag(self, X):
        X, _ = self._slice(X)
        return pt.ones(X.shape[0], dtype="float64")

    def _check_input(self, X, name: str):
        if isinstance(X, np.ndarray | list | tuple):
            codes = np.asarray(X, dtype=float)[:, self.active_dims[0]]
            bad = (codes != np.round(codes)) | (codes >= self.n_levels)
            if np.any(bad):
                raise ValueError(
                    f"`{name}` column {int(self.active_dims[0])} must hold level codes (0.."
                    f"{self.n_levels - 1}, negative for new levels), got {codes[bad][:5].tolist()}"
                )
        return Kernel._check_input(self, X, name)
