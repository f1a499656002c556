r"""Kernel ridge regression: the dual representation of regularised least squares
(PRML §6.1, eqs. 6.2–6.9).

Minimising :math:`E(w) = \tfrac12\sum_n (w^\top\phi(x_n) - t_n)^2 + \tfrac\lambda2 w^\top w`
(PRML eq. 6.2) gives :math:`w = \Phi^\top a` (eq. 6.3) with the dual variables

.. math:: a = (K + \lambda I_N)^{-1} t \qquad\text{(PRML eq. 6.8)},

and the prediction :math:`y(x) = k(x)^\top (K + \lambda I_N)^{-1} t` (eq. 6.9), with
:math:`K_{nm} = k(x_n, x_m)` and :math:`k_n(x) = k(x_n, x)`. This is the GP posterior mean
:math:`k^\top C_N^{-1} t` (PRML eq. 6.66) with :math:`C_N = K + \beta^{-1}I` and noise variance
:math:`\beta^{-1} = \lambda` (eq. 6.62): the two coincide number for number.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from scipy.linalg import cho_solve

from bayes_gp._validation import as_inputs, new_inputs
from bayes_gp.linalg import EAGER_MODE, jittered_cholesky, single_blas_thread

__all__ = ["KernelRidge"]


class KernelRidge:
    r"""Kernel ridge regression, PRML eqs. (6.8)–(6.9).

    .. math:: a = (K + \lambda I)^{-1} t, \qquad y(x) = k(x)^\top a

    Parameters
    ----------
    kernel : PyMC covariance, callable or ``"precomputed"``
        A covariance function with fixed hyperparameters (any ``pm.gp.cov.Covariance``, e.g. from
        :mod:`bayes_gp.kernels`); a callable ``kernel(X1, X2) -> ndarray (n1, n2)``; or
        ``"precomputed"``: :meth:`fit` takes the Gram matrix :math:`K` and :meth:`predict` the
        cross matrix :math:`k(X_{new}, X)` of shape ``(m, n)`` (as scikit-learn's).
    lam : float
        The regularisation :math:`\lambda > 0` (scikit-learn's ``alpha``).

    Attributes
    ----------
    dual_coef_ : ndarray (n,)
        :math:`a` after :meth:`fit`.
    """

    def __init__(self, kernel, lam: float = 1.0):
        if not (
            isinstance(kernel, pm.gp.cov.BaseCovariance)
            or (isinstance(kernel, str) and kernel == "precomputed")
            or (callable(kernel) and not isinstance(kernel, str))
        ):
            raise ValueError(
                "`kernel` must be a PyMC covariance function, a callable kernel(X1, X2) or "
                f"'precomputed', got {kernel!r}"
            )
        try:
            lam = float(lam)
        except (TypeError, ValueError):
            raise ValueError(f"`lam` must be a positive number, got {lam!r}") from None
        if not (np.isfinite(lam) and lam > 0):
            raise ValueError(f"`lam` must be a positive number, got {lam!r}")
        self.kernel = kernel
        self.lam = lam
        self._fn = None

    @property
    def precomputed(self) -> bool:
        return isinstance(self.kernel, str)

    def gram(self, X1, X2=None) -> np.ndarray:
        """:math:`k(X_1, X_2)` as a NumPy array (``X2=None``: :math:`k(X_1, X_1)`)."""
        if self.precomputed:
            raise ValueError("a 'precomputed' KernelRidge has no kernel to evaluate")
        X1 = as_inputs(X1, "X")[0]
        X2 = X1 if X2 is None else as_inputs(X2, "X_new")[0]
        if isinstance(self.kernel, pm.gp.cov.BaseCovariance):
            if self._fn is None:
                A, B = pt.dmatrix("A"), pt.dmatrix("B")
                self._fn = pytensor.function([A, B], self.kernel(A, B), mode=EAGER_MODE)
            K = self._fn(X1, X2)
        else:
            K = self.kernel(X1, X2)
        K = np.asarray(K, dtype=float)
        if K.shape != (X1.shape[0], X2.shape[0]):
            raise ValueError(
                f"the kernel returned shape {K.shape}, expected {(X1.shape[0], X2.shape[0])}"
            )
        return K

    @single_blas_thread
    def fit(self, X, t) -> KernelRidge:
        """Solve PRML eq. (6.8) by a Cholesky factorisation of :math:`K + \\lambda I`."""
        t = np.asarray(t, dtype=float)
        if t.ndim != 1:
            raise ValueError(f"`t` must be 1-D, got shape {t.shape}")
        if not np.all(np.isfinite(t)):
            raise ValueError("`t` contains NaN or infinite values")
        if self.precomputed:
            K = np.asarray(X, dtype=float)
            if K.ndim != 2 or K.shape[0] != K.shape[1]:
                raise ValueError(f"a precomputed Gram matrix must be square, got shape {K.shape}")
            self.X_ = None
        else:
            self.X_ = as_inputs(X, "X")[0]
            K = self.gram(self.X_)
        if K.shape[0] != t.shape[0]:
            raise ValueError(f"`X` has {K.shape[0]} rows but `t` has {t.shape[0]} values")
        L, _ = jittered_cholesky(K + self.lam * np.eye(K.shape[0]))
        self.L_ = L
        self.dual_coef_ = cho_solve((L, True), t, check_finite=False)
        return self

    def _check_fitted(self):
        if not hasattr(self, "dual_coef_"):
            raise ValueError("call `fit` before `predict`")

    def predict(self, X_new) -> np.ndarray:
        """:math:`y(x) = k(x)^\\top a` (PRML eq. 6.9)."""
        self._check_fitted()
        if self.precomputed:
            Ks = np.asarray(X_new, dtype=float)
            if Ks.ndim != 2 or Ks.shape[1] != self.dual_coef_.shape[0]:
                raise ValueError(
                    f"a precomputed cross-kernel must have shape (m, {self.dual_coef_.shape[0]}), "
                    f"got {Ks.shape}"
                )
        else:
            Ks = self.gram(new_inputs(X_new, self.X_.shape[1]), self.X_)
        return Ks @ self.dual_coef_

    def primal_weights(self, Phi) -> np.ndarray:
        r""":math:`w = \Phi^\top a` (PRML eq. 6.3) for the design matrix :math:`\Phi` of the
        training inputs, when :math:`k(x, x') = \phi(x)^\top\phi(x')`."""
        self._check_fitted()
        Phi = np.asarray(Phi, dtype=float)
        if Phi.ndim != 2 or Phi.shape[0] != self.dual_coef_.shape[0]:
            raise ValueError(
                f"`Phi` must have shape ({self.dual_coef_.shape[0]}, M), got {Phi.shape}"
            )
        return Phi.T @ self.dual_coef_

    def __repr__(self) -> str:
        k = "precomputed" if self.precomputed else type(self.kernel).__name__
        return f"KernelRidge(kernel={k}, lam={self.lam:g})"
