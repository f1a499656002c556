r"""Dot-product and basis-function kernels (R&W §4.2.2; PRML §6.2 and §6.4;
weight-space view, R&W §2.1).

These kernels depend on the inputs through :math:`x^\top\Sigma_p x'`, with :math:`\Sigma_p` the prior
covariance of the weights of a linear model (R&W §2.1.2). ``Sigma_p`` may be a scalar
(:math:`\Sigma_p = s I`), a vector (diagonal) or a full symmetric positive semi-definite matrix.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np
import pytensor.tensor as pt

from bayes_gp._validation import (
    as_parameter,
    check_integer_in,
    check_nonnegative,
    check_per_dim,
    constant_value,
)
from bayes_gp.kernels.base import Kernel
from bayes_gp.linalg import NotPSDWarning, assert_psd

__all__ = ["DotProduct", "Polynomial", "Sigmoid", "PRMLKernel", "BasisFunction"]


def _check_sigma_p(Sigma_p, n: int, what: str = "active dimensions") -> pt.TensorVariable:
    """Validate a weight-prior covariance ``Sigma_p`` for ``n`` features."""
    if Sigma_p is None:
        Sigma_p = 1.0
    known = constant_value(Sigma_p)
    if known is not None:
        if known.ndim == 0 or known.ndim == 1:
            check_nonnegative("Sigma_p", known)
            if known.ndim == 1 and known.shape[0] not in (1, n):
                raise ValueError(f"`Sigma_p` has {known.shape[0]} entries for {n} {what}")
        elif known.ndim == 2:
            if known.shape != (n, n):
                raise ValueError(f"`Sigma_p` has shape {known.shape}, expected ({n}, {n})")
            if not np.allclose(known, known.T, rtol=1e-12, atol=0):
                raise ValueError("`Sigma_p` must be symmetric")
            eig = np.linalg.eigvalsh(known)
            if eig.min() < -1e-10 * max(abs(eig.max()), 1.0):
                raise ValueError(
                    f"`Sigma_p` must be positive semi-definite (smallest eigenvalue {eig.min():.3g})"
                )
        else:
            raise ValueError(
                f"`Sigma_p` must be a scalar, vector or matrix, got shape {known.shape}"
            )
    return as_parameter(Sigma_p)


def _weighted_inner(A, B, Sigma_p) -> pt.TensorVariable:
    r""":math:`A\,\Sigma_p B^\top` for a scalar, diagonal or full :math:`\Sigma_p`."""
    if Sigma_p.ndim == 2:
        return pt.dot(pt.dot(A, Sigma_p), B.T)
    return pt.dot(A * Sigma_p, B.T)


def _weighted_sq_norm(A, Sigma_p) -> pt.TensorVariable:
    r"""Diagonal of :math:`A\Sigma_p A^\top` without forming the matrix."""
    if Sigma_p.ndim == 2:
        return pt.sum(pt.dot(A, Sigma_p) * A, axis=1)
    return pt.sum(pt.square(A) * Sigma_p, axis=1)


class DotProduct(Kernel):
    r"""Linear (dot-product) kernel, R&W §4.2.2 and §2.1.2, PRML §6.2.

    .. math:: k(x, x') = \sigma_0^2 + x^\top \Sigma_p x'

    Homogeneous for :math:`\sigma_0 = 0`, inhomogeneous otherwise. It is the covariance of
    :math:`f(x) = w_0 + w^\top x` with :math:`w_0 \sim N(0, \sigma_0^2)`,
    :math:`w \sim N(0, \Sigma_p)`.
    """

    def __init__(
        self,
        input_dim: int,
        sigma0=0.0,
        Sigma_p=None,
        active_dims: Sequence[int] | None = None,
    ):
        check_nonnegative("sigma0", sigma0)
        super().__init__(input_dim, active_dims)
        self.sigma0 = as_parameter(sigma0)
        self.Sigma_p = _check_sigma_p(Sigma_p, self.n_dims)

    def full(self, X, Xs=None):
        X, Xs = self._slice(X, Xs)
        Xs = X if Xs is None else Xs
        return pt.square(self.sigma0) + _weighted_inner(X, Xs, self.Sigma_p)

    def diag(self, X):
        X, _ = self._slice(X)
        return pt.square(self.sigma0) + _weighted_sq_norm(X, self.Sigma_p)


class Polynomial(DotProduct):
    r"""Polynomial kernel, R&W eq. (4.22)–(4.23), PRML eq. (6.11) and §6.2.

    .. math:: k(x, x') = \left(\sigma_0^2 + x^\top\Sigma_p x'\right)^p, \qquad p \in \{1, 2, \dots\}

    Its explicit feature map (R&W eq. 4.24, PRML eq. 6.12) is
    :func:`bayes_gp.kernels.polynomial_features`.
    """

    def __init__(
        self,
        input_dim: int,
        p: int,
        sigma0=0.0,
        Sigma_p=None,
        active_dims: Sequence[int] | None = None,
    ):
        p = check_integer_in("p", p, range(1, 1 << 16))
        super().__init__(input_dim, sigma0, Sigma_p, active_dims)
        self.p = p

    def full(self, X, Xs=None):
        return pt.power(super().full(X, Xs), self.p)

    def diag(self, X):
        return pt.power(super().diag(X), self.p)


class Sigmoid(Kernel):
    r"""Sigmoid (hyperbolic tangent) kernel, PRML eq. (6.37), R&W §4.2.3.

    .. math:: k(x, x') = \tanh\left(a\,x^\top x' + b\right)

    **Not a valid covariance function in general**: its Gram matrix can have negative eigenvalues
    (Schölkopf & Smola 2002). A warning is issued when it is built. With ``check="raise"``
    (default), every square Gram matrix ``K(X)`` it produces is checked when evaluated, and a
    :class:`bayes_gp.NotPSDError` names the offending eigenvalue instead of letting a model
    return ``nan`` or a wrong answer; ``check="none"`` disables the check (e.g. for SVM-style use).
    """

    def __init__(
        self,
        input_dim: int,
        a=1.0,
        b=0.0,
        active_dims: Sequence[int] | None = None,
        *,
        check: str = "raise",
    ):
        if check not in ("raise", "none"):
            raise ValueError(f"`check` must be 'raise' or 'none', got {check!r}")
        for name, v in (("a", a), ("b", b)):
            known = constant_value(v)
            if known is not None and not np.all(np.isfinite(known)):
                raise ValueError(f"`{name}` must be finite, got {v!r}")
        super().__init__(input_dim, active_dims)
        warnings.warn(
            "the sigmoid kernel tanh(a x.x' + b) is not positive semi-definite in general; "
            "check Gram matrices with bayes_gp.check_psd",
            NotPSDWarning,
            stacklevel=3,
        )
        self.a = as_parameter(a)
        self.b = as_parameter(b)
        self.check = check

    def full(self, X, Xs=None):
        X, Xs = self._slice(X, Xs)
        square = Xs is None
        Xs = X if Xs is None else Xs
        K = pt.tanh(self.a * pt.dot(X, Xs.T) + self.b)
        if square and self.check == "raise":
            K = assert_psd(K, what="the Sigmoid kernel's Gram matrix")
        return K

    def diag(self, X):
        X, _ = self._slice(X)
        return pt.tanh(self.a * pt.sum(pt.square(X), axis=1) + self.b)


class PRMLKernel(Kernel):
    r"""Bishop's regression kernel, PRML eq. (6.63), §6.4.2 and §6.4.4.

    .. math::
       k(x, x') = \theta_0 \exp\left(-\frac{1}{2}\sum_{d=1}^{D}\theta_{1,d}(x_d - x'_d)^2\right)
                  + \theta_2 + \theta_3\,x^\top x'

    A scalar ``theta1`` gives the isotropic form :math:`\theta_0 e^{-\theta_1\|x - x'\|^2/2}`;
    a vector ``theta1`` (one :math:`\eta_d` per dimension) gives the ARD form of PRML eq. 6.72,
    where a small :math:`\eta_d` marks input :math:`d` as irrelevant. All :math:`\theta \ge 0`.
    """

    def __init__(
        self,
        input_dim: int,
        theta0=1.0,
        theta1=1.0,
        theta2=0.0,
        theta3=0.0,
        active_dims: Sequence[int] | None = None,
    ):
        for name, v in (
            ("theta0", theta0),
            ("theta1", theta1),
            ("theta2", theta2),
            ("theta3", theta3),
        ):
            check_nonnegative(name, v)
        for name, v in (("theta0", theta0), ("theta2", theta2), ("theta3", theta3)):
            known = constant_value(v)
            if known is not None and known.ndim != 0:
                raise ValueError(f"`{name}` must be a scalar, got shape {known.shape}")
        super().__init__(input_dim, active_dims)
        check_per_dim("theta1", theta1, self.n_dims)
        self.theta0 = as_parameter(theta0)
        self.theta1 = as_parameter(theta1)
        self.theta2 = as_parameter(theta2)
        self.theta3 = as_parameter(theta3)

    def full(self, X, Xs=None):
        X, Xs = self._slice(X, Xs)
        Xs = X if Xs is None else Xs
        sq = pt.sum(pt.square(X[:, None, :] - Xs[None, :, :]) * self.theta1, axis=-1)
        return self.theta0 * pt.exp(-0.5 * sq) + self.theta2 + self.theta3 * pt.dot(X, Xs.T)

    def diag(self, X):
        X, _ = self._slice(X)
        return self.theta0 + self.theta2 + self.theta3 * pt.sum(pt.square(X), axis=1)


class BasisFunction(Kernel):
    r"""Kernel of a linear model in fixed basis functions: R&W §2.1.2, PRML eq. (6.53).

    .. math:: k(x, x') = \phi(x)^\top \Sigma_p\, \phi(x')

    the covariance of :math:`f(x) = \phi(x)^\top w` with :math:`w \sim N(0, \Sigma_p)`
    (the weight-space view of GP regression).

    Parameters
    ----------
    phi : callable
        Maps a PyTensor matrix of active inputs, shape ``(n, D)``, to features ``(n, M)``. It must
        use PyTensor operations (``pytensor.tensor``) so gradients flow.
    Sigma_p : scalar, vector of length M, or (M, M) matrix
        Prior covariance of the weights. A vector or matrix fixes ``n_features`` = M.
    """

    def __init__(
        self,
        input_dim: int,
        phi: Callable,
        Sigma_p=None,
        active_dims: Sequence[int] | None = None,
    ):
        if not callable(phi):
            raise TypeError("`phi` must be a callable mapping an (n, D) tensor to (n, M) features")
        super().__init__(input_dim, active_dims)
        known = constant_value(Sigma_p) if Sigma_p is not None else None
        n_features = known.shape[0] if known is not None and known.ndim >= 1 else None
        self.phi = phi
        if n_features is not None:
            self.Sigma_p = _check_sigma_p(Sigma_p, n_features, what="basis functions")
        else:
            self.Sigma_p = _check_sigma_p(Sigma_p, 1)

    def features(self, X) -> pt.TensorVariable:
        """The feature matrix :math:`\\Phi` of the active columns of ``X``, shape ``(n, M)``."""
        X, _ = self._slice(X)
        Phi = pt.as_tensor_variable(self.phi(X))
        if Phi.ndim != 2:
            raise ValueError(f"`phi` must return a 2-D (n, M) matrix, got {Phi.ndim} dimension(s)")
        m = Phi.type.shape[1]
        s = self.Sigma_p
        if (
            m is not None
            and s.ndim >= 1
            and s.type.shape[0] is not None
            and s.type.shape[0] not in (1, m)
        ):
            raise ValueError(f"`phi` returns {m} features but `Sigma_p` is for {s.type.shape[0]}")
        return Phi

    def full(self, X, Xs=None):
        Phi = self.features(X)
        Phis = Phi if Xs is None else self.features(Xs)
        return _weighted_inner(Phi, Phis, self.Sigma_p)

    def diag(self, X):
        return _weighted_sq_norm(self.features(X), self.Sigma_p)
