r"""Gram matrices of translation-invariant kernels on a grid, from a table of lags.

A translation-invariant kernel on one input dimension is a function of the lag alone,
:math:`k(x, x') = k(x - x', 0)` (R&W §4.2: stationary; symmetric in the lag for every stationary
kernel of the catalogue). When the inputs lie on a grid :math:`x_i = x_0 + s\,k_i` with integer
:math:`k_i` — monthly or yearly series, with or without gaps, in any order — the
:math:`n^2` entries of :math:`K` take only the :math:`J + 1` values

.. math:: K_{ij} = k(s\,|k_i - k_j|,\ 0), \qquad |k_i - k_j| \in \{0, \dots, J\},
          \quad J = \max_i k_i - \min_i k_i,

so the kernel (every transcendental function in it, and every term of a sum or product) is
evaluated at :math:`J + 1` lags, and :math:`K` is gathered from that table: for a regular series
of :math:`n` points, :math:`n` kernel evaluations instead of :math:`n^2`. Reverse-mode
differentiation runs the same way: the cotangent of :math:`K` is summed into its lags (one
scatter-add over :math:`n^2` numbers) and only the table is differentiated with respect to the
hyperparameters. It is the same matrix: the lags :math:`s\,|k_i - k_j|` differ from the computed
differences :math:`x_i - x_j` only by their rounding (the grid is accepted when every input lies
within :data:`GRID_RTOL` of a step of it).

:func:`lag_gram` builds :math:`K` this way where it applies (one input column, a kernel that
:func:`translation_invariant` accepts, a grid with at most :data:`MAX_LAG_FRACTION` of the
:math:`n^2` entries as distinct lags, :math:`n` between :data:`MIN_N` and :data:`MAX_N`) and
returns ``None`` otherwise, so that the caller evaluates the kernel on all pairs.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt

from bayes_gp.kernels.base import Stationary, Substituted
from bayes_gp.kernels.periodic import Periodized

__all__ = [
    "GRID_RTOL",
    "MAX_LAG_FRACTION",
    "MAX_N",
    "MIN_N",
    "gram",
    "grid_lags",
    "grid_positions",
    "lag_gram",
    "translation_invariant",
]

#: Largest distance of an input from its grid point, relative to the step.
GRID_RTOL = 1e-9
#: The lag table is used when its length is at most this fraction of :math:`n^2`.
MAX_LAG_FRACTION = 1 / 8
#: Below this many inputs the kernel is cheap on all pairs (no table).
MIN_N = 16
#: Above this many inputs the table is no faster (``benchmarks/lags.py``, Mauna Loa kernel: 5.5x
#: faster than all pairs at n = 144, 6.4x at 500, but 0.9x at 700 and 0.8x at 1000, where the
#: gather and scatter-add over the :math:`n^2` int32 indices cost more than the kernel saves).
MAX_N = 512


def translation_invariant(kernel) -> bool:
    """Whether ``kernel`` is a function of :math:`x - x'` alone, symmetric in it: the
    catalogue's stationary kernels (any metric), their periodisation, PyMC's stationary and
    constant kernels, and sums and products of those (with constant factors)."""
    if isinstance(kernel, Substituted):
        return translation_invariant(kernel.base)
    if isinstance(kernel, Stationary | Periodized | pm.gp.cov.Stationary | pm.gp.cov.Constant):
        return True
    if type(kernel) in (pm.gp.cov.Add, pm.gp.cov.Prod):
        for f in kernel._factor_list:  # with the constants, which kernels.base.factors skips
            if isinstance(f, pm.gp.cov.Covariance):
                if not translation_invariant(f):
                    return False
            elif np.ndim(f) != 0:  # a constant factor is a scalar (number or tensor)
                return False
        return True
    return False


def grid_positions(x: np.ndarray) -> tuple[float, np.ndarray] | None:
    """``(s, k)`` with ``x ≈ x.min() + s * k`` for integers ``k`` (within :data:`GRID_RTOL`
    of ``s``), ``s`` the smallest gap between distinct values; ``None`` when ``x`` is not on
    such a grid (or has fewer than two distinct values)."""
    x = np.asarray(x, dtype=float)
    values = np.unique(x)
    if values.size < 2:
        return None
    s = float(np.min(np.diff(values)))
    if not s > 0:
        return None
    t = (x - values[0]) / s
    k = np.rint(t)
    if np.max(np.abs(t - k)) > GRID_RTOL:
        return None
    return s, k.astype(np.int64)


def grid_lags(X: np.ndarray, max_n: int | None = MAX_N) -> tuple[float, np.ndarray, int] | None:
    """``(s, k, J + 1)`` where a table of lags applies to the inputs ``X`` (n, D): one column,
    ``n`` between :data:`MIN_N` and ``max_n`` (``None``: no upper bound), on a grid ``x_0 + s
    k`` (:func:`grid_positions`, ``k`` from 0) whose ``J + 1`` lags are at most
    :data:`MAX_LAG_FRACTION` of the :math:`n^2` pairs; else ``None``."""
    if X.ndim != 2 or X.shape[1] != 1:
        return None
    n = X.shape[0]
    if n < MIN_N or (max_n is not None and n > max_n):
        return None
    grid = grid_positions(X[:, 0])
    if grid is None:
        return None
    s, k = grid
    n_lags = int(k.max()) + 1
    return None if n_lags > MAX_LAG_FRACTION * n * n else (s, k, n_lags)


def lag_gram(kernel, X) -> pt.TensorVariable | None:
    """:math:`K(X, X)` gathered from the kernel's values at the grid's lags (module docstring),
    or ``None`` where that does not apply; ``X`` must be a NumPy array for it to apply."""
    if not isinstance(X, np.ndarray) or not translation_invariant(kernel):
        return None
    found = grid_lags(X)
    if found is None:
        return None
    s, k, n_lags = found
    n = X.shape[0]
    # The table is padded to a power of two and the lag indices are data (a shared variable,
    # not a constant): models of one size whose grids differ (groups with different gaps, the
    # next cross-validation fold) then have one compiled structure, which
    # bayes_gp.inference.compiled reuses with their data.
    size = 1 << (n_lags - 1).bit_length()
    lags = (s * np.arange(size, dtype=float))[:, None]
    table = kernel(lags, np.zeros((1, 1)))[:, 0]
    index = np.abs(k[:, None] - k[None, :]).astype(np.int32).ravel()
    index = pytensor.shared(index, name="lag_index", shape=index.shape)
    return table[index].reshape((n, n))


def gram(kernel, X) -> pt.TensorVariable:
    """:math:`K(X, X)`: from the lag table where :func:`lag_gram` applies, else on all pairs."""
    K = lag_gram(kernel, X)
    return kernel(pt.as_tensor_variable(X)) if K is None else K
