r"""Kernels on the levels of a factor (a categorical input coded 0, 1, ..., L-1).

A categorical input :math:`c \in \{0, \dots, L-1\}` enters a GP through an :math:`L \times L`
correlation (or covariance) matrix :math:`B` of the levels, :math:`k(c, c') = B_{cc'}`; its
product with a kernel of the continuous inputs, :math:`k_t(t, t')\,B_{cc'}`, is the intrinsic
coregionalisation model (Bonilla, Chai & Williams 2008; Álvarez, Rosasco & Lawrence 2012) read
as a GP on (continuous, categorical) inputs (Qian, Wu & Wu 2008):

* :class:`Exchangeable`: every pair of different levels has the same correlation :math:`\rho`
  (compound symmetry; Qian et al. 2008's "exchangeable correlation"), one parameter;
* :class:`Coregion`: :math:`B = WW^\top + \mathrm{diag}(\kappa)`, a rank-:math:`R` factor
  plus independent level variances (PyMC's ``pm.gp.cov.Coregion``, reused, with the levels
  and parameters checked).

The input column holds the integer codes; known inputs (NumPy arrays) must be integers in
``0..L-1`` (a ``ValueError`` otherwise: PyMC's kernel would truncate 1.7 to level 1 and index
out of range with a code ``L``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from bayes_gp._validation import (
    as_parameter,
    check_in_interval,
    check_integer_in,
    check_nonnegative,
    constant_value,
)
from bayes_gp.kernels.base import Kernel

__all__ = ["Coregion", "Exchangeable"]


class Coregion(Kernel, pm.gp.cov.Coregion):
    r"""Low-rank coregionalisation over the levels of a factor (Bonilla et al. 2008; PyMC's
    ``Coregion``).

    .. math::
       k(c, c') = B_{cc'}, \qquad B = WW^\top + \mathrm{diag}(\kappa)

    :math:`W` is :math:`L \times R` (the levels' loadings on :math:`R` shared latent factors),
    :math:`\kappa \ge 0` the levels' own variances; :math:`B` is positive semi-definite by
    construction. Or give ``B`` itself (checked to be symmetric PSD when known).

    Parameters
    ----------
    input_dim : int
    W : array_like or tensor, shape ``(L, R)``
    kappa : array_like or tensor, shape ``(L,)``
        Non-negative.
    B : array_like or tensor, shape ``(L, L)``, optional
        Instead of ``W`` and ``kappa``.
    active_dims : sequence of one int
        The column of the level codes (required when ``input_dim > 1``).
    """

    def __init__(
        self,
        input_dim: int,
        W=None,
        kappa=None,
        B=None,
        active_dims: Sequence[int] | None = None,
    ):
        Kernel.__init__(self, input_dim, active_dims)
        if self.n_dims != 1:
            raise ValueError(
                f"Coregion acts on one column of level codes, got active_dims="
                f"{self.active_dims.tolist()}"
            )
        if B is not None:
            if W is not None or kappa is not None:
                raise ValueError("give either `W` and `kappa` or `B`, not both")
            B = as_parameter(B)
            if B.ndim != 2 or (None not in B.type.shape and B.type.shape[0] != B.type.shape[1]):
                raise ValueError(f"`B` must be a square (L, L) matrix, got shape {B.type.shape}")
            known = constant_value(B)
            if known is not None:
                if not np.allclose(known, known.T, rtol=1e-12, atol=1e-14):
                    raise ValueError("`B` must be symmetric")
                low = np.linalg.eigvalsh(known).min()
                if low < -1e-10 * max(np.abs(known).max(), 1.0):
                    raise ValueError(
                        f"`B` is not positive semi-definite (smallest eigenvalue {low:.3g})"
                    )
            self.B = B
            self.n_levels = B.type.shape[0]
            return
        if W is None or kappa is None:
            raise ValueError("Coregion needs `W` and `kappa` (or `B`)")
        W = as_parameter(W)
        if W.ndim != 2:
            raise ValueError(f"`W` must be an (L, R) matrix, got {W.ndim} dimension(s)")
        check_nonnegative("kappa", kappa)
        kappa = as_parameter(kappa)
        if kappa.ndim != 1:
            raise ValueError(f"`kappa` must be a vector (L,), got {kappa.ndim} dimension(s)")
        lw, lk = W.type.shape[0], kappa.type.shape[0]
        if lw is not None and lk is not None and lw != lk:
            raise ValueError(f"`W` has {lw} rows (levels) but `kappa` has {lk} entries")
        self.W = W
        self.kappa = kappa
        self.B = pt.dot(W, W.T) + pt.diag(kappa)
        self.n_levels = lw if lw is not None else lk

    def _check_input(self, X, name: str):
        known = isinstance(X, np.ndarray | list | tuple)
        out = super()._check_input(X, name)
        if known and self.n_levels is not None:
            codes = np.asarray(X, dtype=float)[:, self.active_dims[0]]
            bad = (codes != np.round(codes)) | (codes < 0) | (codes >= self.n_levels)
            if np.any(bad):
                raise ValueError(
                    f"`{name}` column {int(self.active_dims[0])} must hold level codes 0.."
                    f"{self.n_levels - 1}, got {codes[bad][:5].tolist()}"
                )
        return out

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(input_dim={self.input_dim}, levels={self.n_levels}, "
            f"column={int(self.active_dims[0])})"
        )


class Exchangeable(Coregion):
    r"""Exchangeable (compound-symmetry) correlation of the levels of a factor (Qian, Wu & Wu
    2008).

    .. math::
       k(c, c') = \begin{cases} 1 & c = c' \\ \rho & c \ne c' \end{cases},
       \qquad B = (1 - \rho) I_L + \rho\,\mathbf{1}\mathbf{1}^\top

    :math:`B` has eigenvalues :math:`1 - \rho` (:math:`L - 1` times) and :math:`1 + (L-1)\rho`,
    so it is a correlation matrix exactly for :math:`-1/(L-1) \le \rho \le 1`. Multiply by
    :math:`\eta^2` and a kernel of the continuous inputs: every level shares the same smooth
    shape, correlated by :math:`\rho` across levels (:math:`\rho = 1`: one function;
    :math:`\rho = 0`: independent functions with a common kernel).

    Parameters
    ----------
    input_dim : int
    n_levels : int
        :math:`L \ge 2`.
    rho : float or scalar tensor
        :math:`\rho \in [-1/(L-1), 1]` (checked when known; a prior such as
        ``pm.Uniform.dist(-1/(L-1), 1)`` or ``pm.Beta.dist(2, 2)`` keeps it there).
    active_dims : sequence of one int
        The column of the level codes.
    """

    def __init__(
        self,
        input_dim: int,
        n_levels: int,
        rho,
        active_dims: Sequence[int] | None = None,
    ):
        n_levels = check_integer_in("n_levels", n_levels, range(2, 1 << 20))
        check_in_interval(
            "rho", rho, -1.0 / (n_levels - 1), 1.0, low_open=False, high_open=False
        )
        rho = as_parameter(rho)
        if rho.ndim != 0:
            raise ValueError(f"`rho` must be a scalar, got {rho.ndim} dimension(s)")
        object.__setattr__(self, "rho", rho)  # first: the model names its prior `rho`
        eye = np.eye(n_levels)
        B = (1.0 - rho) * eye + rho * np.ones((n_levels, n_levels))
        # B is PSD by the range of rho; Coregion's eigenvalue check needs known values only
        Kernel.__init__(self, input_dim, active_dims)
        if self.n_dims != 1:
            raise ValueError(
                f"Exchangeable acts on one column of level codes, got active_dims="
                f"{self.active_dims.tolist()}"
            )
        self.B = B
        self.n_levels = n_levels
