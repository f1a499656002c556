r"""A fixed, precomputed Gram matrix as a PyMC covariance function (for non-vector inputs, R&W §4.4).

Kernels on strings, graphs or other structured objects (:mod:`bayes_gp.kernels.strings`) produce a
NumPy Gram matrix :math:`K` over a fixed collection of objects. :func:`precomputed_covariance` turns
it into a ``pm.gp.cov.Covariance`` whose inputs are *integer indices* into that collection:

.. math:: k(i, j) = K_{ij}

so that ``eta**2 * precomputed_covariance(K)`` in ``pm.gp.Marginal`` or ``pm.gp.Latent`` has a
learned amplitude (and noise), with NUTS posteriors for them. Include the test objects in
:math:`K` when it is built: then predictions at test objects are ``gp.conditional`` /
``gp.predict`` at their indices.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytensor.tensor as pt

from bayes_gp.kernels.base import Kernel
from bayes_gp.linalg import NotPSDError, check_psd

__all__ = ["PrecomputedCovariance", "precomputed_covariance"]


class PrecomputedCovariance(Kernel):
    r"""Covariance :math:`k(i, j) = K_{ij}` looked up in a fixed Gram matrix.

    Inputs are column vectors of integer indices (as floats or integers; shape ``(n, 1)``, or more
    columns with ``active_dims`` selecting the index column). ``full(X, Xs)`` gathers
    :math:`K[\mathrm{idx}(X), \mathrm{idx}(X_s)]` by PyTensor advanced indexing and ``diag(X)``
    gathers :math:`\operatorname{diag}(K)[\mathrm{idx}(X)]`. Use :func:`precomputed_covariance`
    to build one.

    Attributes
    ----------
    gram : ndarray
        The (symmetrised, read-only) matrix :math:`K`.
    """

    def __init__(
        self,
        gram: np.ndarray,
        input_dim: int = 1,
        active_dims: Sequence[int] | None = None,
        *,
        check: bool = True,
    ):
        super().__init__(input_dim, active_dims)
        if self.n_dims != 1:
            raise ValueError(
                f"`active_dims` must select exactly one (index) column, got {self.active_dims.tolist()}"
            )
        K = np.array(gram, dtype=float)
        if K.ndim != 2 or K.shape[0] != K.shape[1] or K.shape[0] == 0:
            raise ValueError(f"`gram` must be a non-empty square matrix, got shape {K.shape}")
        if not np.all(np.isfinite(K)):
            raise ValueError("`gram` contains NaN or infinite values")
        if check:
            res = check_psd(K)
            if not res.is_psd:
                raise NotPSDError(
                    f"`gram` is not a covariance matrix: smallest eigenvalue "
                    f"{res.min_eigenvalue:.4g} < -{res.tolerance:.2g}, asymmetry "
                    f"{res.asymmetry:.3g} (n={res.n})"
                )
        K = 0.5 * (K + K.T)
        K.setflags(write=False)
        self.gram = K
        self.size = K.shape[0]
        self._K = pt.constant(K, name="precomputed_gram")
        self._Kdiag = pt.constant(np.ascontiguousarray(np.diag(K)), name="precomputed_gram_diag")

    def __repr__(self) -> str:
        return f"PrecomputedCovariance(n={self.size}, active_dims={self.active_dims.tolist()})"

    def _check_indices(self, X, name: str) -> None:
        if isinstance(X, np.ndarray | list | tuple):
            arr = np.asarray(X, dtype=float)
            if arr.ndim != 2:
                raise ValueError(
                    f"`{name}` must be a 2-D array (n, input_dim), got shape {arr.shape}"
                )
            col = arr[:, self.active_dims]
            if not np.all(np.isfinite(col)) or np.any(col != np.round(col)):
                raise ValueError(f"`{name}` must hold integer indices into the Gram matrix")
            if col.size and (col.min() < 0 or col.max() >= self.size):
                raise ValueError(
                    f"`{name}` has indices outside 0..{self.size - 1} (the Gram matrix is "
                    f"{self.size} x {self.size})"
                )

    @staticmethod
    def _as_index(X) -> pt.TensorVariable:
        col = X[:, 0]
        if col.dtype.startswith("int") or col.dtype.startswith("uint"):
            return pt.cast(col, "int64")
        return pt.cast(pt.round(col), "int64")

    def full(self, X, Xs=None):
        self._check_indices(X, "X")
        if Xs is not None:
            self._check_indices(Xs, "Xs")
        X, Xs = self._slice(X, Xs)
        ia = self._as_index(X)
        ib = ia if Xs is None else self._as_index(Xs)
        return self._K[ia][:, ib]

    def diag(self, X):
        self._check_indices(X, "X")
        X, _ = self._slice(X, None)
        return self._Kdiag[self._as_index(X)]


def precomputed_covariance(
    K_train: np.ndarray,
    *,
    input_dim: int = 1,
    active_dims: Sequence[int] | None = None,
    check: bool = True,
) -> PrecomputedCovariance:
    r"""A PyMC covariance function for a fixed Gram matrix indexed by integer inputs.

    .. math:: k(i, j) = K_{ij}, \qquad i, j \in \{0, \dots, n - 1\}

    Parameters
    ----------
    K_train : array_like, shape ``(n, n)``
        The Gram matrix of a valid kernel over ``n`` objects (e.g. from
        :meth:`bayes_gp.kernels.strings.StringKernel.gram`). It should cover every object the
        model will see, training and test.
    input_dim : int, default 1
        Number of columns of the model's inputs; with more than one, ``active_dims`` names the
        single index column.
    active_dims : sequence of int, optional
    check : bool, default True
        Check that ``K_train`` is positive semi-definite (:class:`~bayes_gp.NotPSDError` if not).

    Returns
    -------
    PrecomputedCovariance
        Inputs ``X`` are column vectors of indices: ``np.arange(n)[:, None]`` for all objects.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> K = np.array([[2.0, 1.0], [1.0, 2.0]])
    >>> with pm.Model():
    ...     eta = pm.HalfNormal("eta", 1.0)
    ...     gp = pm.gp.Marginal(cov_func=eta**2 * precomputed_covariance(K))
    ...     y = gp.marginal_likelihood("y", X=np.arange(2.0)[:, None], y=np.zeros(2), sigma=0.1)
    """
    return PrecomputedCovariance(K_train, input_dim, active_dims, check=check)
