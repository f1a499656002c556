r"""Non-stationary covariance functions (R&W §4.2.3).

* ``NeuralNetwork``: the arcsine kernel of Williams (1998), eq. (4.29);
* ``GaussianBasis``: infinitely many Gaussian basis functions, eq. (4.30);
* ``Gibbs``: input-dependent length-scales :math:`\ell_d(x)`, eq. (4.32);
* ``PaciorekSchervish``: matrix-valued :math:`\Sigma(x)` with any isotropic :math:`k_S`,
  eqs. (4.33)–(4.34);
* ``OHagan``: input-varying weights, :math:`\phi(x)^\top W_0\phi(x')\,k_w(x, x')`;
* ``Wiener``: :math:`\min(x, x')` for :math:`x \ge 0`.

Hyperparameters may be numbers, arrays or PyMC random variables; the user functions of ``Gibbs``,
``PaciorekSchervish`` and ``OHagan`` must be built from PyTensor operations (they may close over
random variables) and receive the *active* columns of ``X``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.graph.basic import Constant
from pytensor.raise_op import CheckAndRaise

from bayes_gp._validation import as_parameter, check_positive, constant_value
from bayes_gp.kernels.base import Kernel
from bayes_gp.kernels.dot_product import _weighted_inner, _weighted_sq_norm
from bayes_gp.kernels.metrics import LengthScale, pairwise_diff
from bayes_gp.kernels.stationary import (
    ExpQuad,
    GammaExponential,
    Matern,
    Matern12,
    Matern32,
    Matern52,
    RatQuad,
)

__all__ = ["NeuralNetwork", "GaussianBasis", "Gibbs", "PaciorekSchervish", "OHagan", "Wiener"]


# --- helpers -----------------------------------------------------------------------------------
def _check_weight_matrix(name: str, value, n: int | None, what: str) -> pt.TensorVariable:
    """Validate a known scalar / diagonal (vector) / full symmetric PSD matrix parameter.

    ``n`` is the required size (``None``: any size).
    """
    known = constant_value(value)
    if known is not None:
        if not np.all(np.isfinite(known)):
            raise ValueError(f"`{name}` must be finite, got {known!r}")
        if known.ndim in (0, 1):
            if np.any(known < 0):
                raise ValueError(f"`{name}` must be non-negative, got {known!r}")
            if known.ndim == 1 and n is not None and known.shape[0] not in (1, n):
                raise ValueError(f"`{name}` has {known.shape[0]} entries for {n} {what}")
        elif known.ndim == 2:
            m = known.shape[0] if n is None else n
            if known.shape != (m, m):
                raise ValueError(f"`{name}` has shape {known.shape}, expected ({m}, {m})")
            if not np.allclose(known, known.T, rtol=1e-12, atol=0):
                raise ValueError(f"`{name}` must be symmetric")
            eig = np.linalg.eigvalsh(known)
            if eig.min() < -1e-10 * max(abs(eig.max()), 1.0):
                raise ValueError(
                    f"`{name}` must be positive semi-definite (smallest eigenvalue {eig.min():.3g})"
                )
        else:
            raise ValueError(
                f"`{name}` must be a scalar, vector or matrix, got shape {known.shape}"
            )
    param = as_parameter(value)
    if param.ndim > 2:
        raise ValueError(
            f"`{name}` must be a scalar, vector or matrix, got {param.ndim} dimensions"
        )
    return param


def _cholesky_entries(A, D: int) -> list[list]:
    """Cholesky factor of a batch of ``D x D`` SPD matrices ``A`` (shape ``(..., D, D)``).

    Unrolled into element-wise operations on the batch (``D`` is known when the kernel is built),
    so it differentiates and compiles on every backend. ``L[i][j]`` (``j <= i``) has the batch shape.
    """
    L: list[list] = [[None] * D for _ in range(D)]
    for j in range(D):
        s = A[..., j, j]
        for k in range(j):
            s = s - pt.square(L[j][k])
        L[j][j] = pt.sqrt(s)
        for i in range(j + 1, D):
            s = A[..., i, j]
            for k in range(j):
                s = s - L[i][k] * L[j][k]
            L[i][j] = s / L[j][j]
    return L


def _logdet_from_cholesky(L) -> pt.TensorVariable:
    return 2.0 * sum(pt.log(L[d][d]) for d in range(len(L)))


def _is_known(X) -> np.ndarray | None:
    """The value of ``X`` if it is a NumPy array, list or PyTensor constant; else ``None``."""
    if isinstance(X, np.ndarray | list | tuple):
        return np.asarray(X, dtype=float)
    if isinstance(X, Constant):
        return np.asarray(X.data, dtype=float)
    return None


# --- kernels ------------------------------------------------------------------------------------
class NeuralNetwork(Kernel):
    r"""Neural-network (arcsine) kernel of Williams (1998), R&W eq. (4.29).

    .. math::
       k_{NN}(x, x') = \frac{2}{\pi}\sin^{-1}\left(
           \frac{2\tilde x^\top\Sigma\tilde x'}
                {\sqrt{(1 + 2\tilde x^\top\Sigma\tilde x)(1 + 2\tilde x'^\top\Sigma\tilde x')}}\right),
       \qquad \tilde x = (1, x_1, \dots, x_D)^\top

    the covariance of a network with infinitely many hidden units :math:`\operatorname{erf}(u_0 +
    u^\top x)`, :math:`(u_0, u) \sim N(0, \Sigma)`. With :math:`\Sigma = \operatorname{diag}
    (\sigma_0^2, \sigma^2)` (R&W fig. 4.5), :math:`\sigma_0` sets the offset of the sigmoids and
    :math:`\sigma` their steepness; draws tend to constants for large :math:`|x|`, and
    :math:`k \to \pm 2/\pi\cdot\pi/2 = \pm 1` for inputs far out on the same / opposite sides.

    Parameters
    ----------
    Sigma : scalar, vector of length D+1, or (D+1, D+1) matrix
        Covariance of the augmented input weights :math:`(u_0, u)`: :math:`\Sigma = sI`,
        a diagonal, or a full symmetric positive semi-definite matrix (D = active dimensions).
    """

    def __init__(self, input_dim: int, Sigma=1.0, active_dims: Sequence[int] | None = None):
        super().__init__(input_dim, active_dims)
        self.Sigma = _check_weight_matrix(
            "Sigma", Sigma, self.n_dims + 1, "augmented inputs (1, x) = active dimensions + 1"
        )

    def _augment(self, X):
        return pt.concatenate([pt.ones_like(X[:, :1]), X], axis=1)

    def full(self, X, Xs=None):
        X, Xs = self._slice(X, Xs)
        At = self._augment(X)
        Bt = At if Xs is None else self._augment(Xs)
        a = 1.0 + 2.0 * _weighted_sq_norm(At, self.Sigma)
        b = a if Xs is None else 1.0 + 2.0 * _weighted_sq_norm(Bt, self.Sigma)
        z = 2.0 * _weighted_inner(At, Bt, self.Sigma) / pt.sqrt(a[:, None] * b[None, :])
        # |z| < 1 by Cauchy-Schwarz; the clip only guards against rounding for huge inputs.
        return (2.0 / np.pi) * pt.arcsin(pt.clip(z, -1.0, 1.0))

    def diag(self, X):
        X, _ = self._slice(X)
        q = 2.0 * _weighted_sq_norm(self._augment(X), self.Sigma)
        return (2.0 / np.pi) * pt.arcsin(q / (1.0 + q))


class GaussianBasis(Kernel):
    r"""Covariance of infinitely many Gaussian basis functions, R&W eq. (4.30).

    With :math:`h(x; u) = \exp(-|x - u|^2/2\sigma_g^2)` and centres
    :math:`u \sim N(0, \sigma_u^2 I)`:

    .. math::
       k_G(x, x') &= \frac{1}{(2\pi\sigma_u^2)^{d/2}}\int \exp\left(
           -\frac{|x - u|^2}{2\sigma_g^2} - \frac{|x' - u|^2}{2\sigma_g^2}
           - \frac{u^\top u}{2\sigma_u^2}\right) du \\
       &= \left(\frac{\sigma_e}{\sigma_u}\right)^d \exp\left(-\frac{x^\top x}{2\sigma_m^2}\right)
          \exp\left(-\frac{|x - x'|^2}{2\sigma_s^2}\right)
          \exp\left(-\frac{x'^\top x'}{2\sigma_m^2}\right)

    where :math:`1/\sigma_e^2 = 2/\sigma_g^2 + 1/\sigma_u^2`,
    :math:`\sigma_s^2 = 2\sigma_g^2 + \sigma_g^4/\sigma_u^2` and
    :math:`\sigma_m^2 = 2\sigma_u^2 + \sigma_g^2` (d = active dimensions). A squared exponential
    modulated by a Gaussian envelope; as :math:`\sigma_u \to \infty` (after rescaling) it becomes the
    SE kernel :math:`\exp(-|x - x'|^2/4\sigma_g^2)`.

    Parameters
    ----------
    sigma_g : positive scalar
        Width of the basis functions.
    sigma_u : positive scalar
        Standard deviation of the basis-function centres.
    """

    def __init__(
        self, input_dim: int, sigma_g=1.0, sigma_u=1.0, active_dims: Sequence[int] | None = None
    ):
        for name, v in (("sigma_g", sigma_g), ("sigma_u", sigma_u)):
            check_positive(name, v)
            known = constant_value(v)
            if known is not None and known.ndim != 0:
                raise ValueError(f"`{name}` must be a scalar, got shape {known.shape}")
        super().__init__(input_dim, active_dims)
        self.sigma_g = as_parameter(sigma_g)
        self.sigma_u = as_parameter(sigma_u)

    @property
    def sigma_e2(self) -> pt.TensorVariable:
        r""":math:`\sigma_e^2 = 1 / (2/\sigma_g^2 + 1/\sigma_u^2)`."""
        return 1.0 / (2.0 / pt.square(self.sigma_g) + 1.0 / pt.square(self.sigma_u))

    @property
    def sigma_s2(self) -> pt.TensorVariable:
        r""":math:`\sigma_s^2 = 2\sigma_g^2 + \sigma_g^4/\sigma_u^2`."""
        g2 = pt.square(self.sigma_g)
        return 2.0 * g2 + pt.square(g2) / pt.square(self.sigma_u)

    @property
    def sigma_m2(self) -> pt.TensorVariable:
        r""":math:`\sigma_m^2 = 2\sigma_u^2 + \sigma_g^2`."""
        return 2.0 * pt.square(self.sigma_u) + pt.square(self.sigma_g)

    def _scale(self):
        return pt.power(self.sigma_e2 / pt.square(self.sigma_u), 0.5 * self.n_dims)

    def full(self, X, Xs=None):
        X, Xs = self._slice(X, Xs)
        sm2 = self.sigma_m2
        ex = pt.exp(-pt.sum(pt.square(X), axis=1) / (2.0 * sm2))
        exs = ex if Xs is None else pt.exp(-pt.sum(pt.square(Xs), axis=1) / (2.0 * sm2))
        r2 = pt.sum(pt.square(pairwise_diff(X, Xs)), axis=-1)
        return self._scale() * ex[:, None] * pt.exp(-r2 / (2.0 * self.sigma_s2)) * exs[None, :]

    def diag(self, X):
        X, _ = self._slice(X)
        return self._scale() * pt.exp(-pt.sum(pt.square(X), axis=1) / self.sigma_m2)


class Gibbs(Kernel):
    r"""Gibbs' kernel with input-dependent length-scales, R&W eq. (4.32), in any dimension.

    .. math::
       k(x, x') = \prod_{d=1}^{D}\left(\frac{2\ell_d(x)\ell_d(x')}{\ell_d^2(x) + \ell_d^2(x')}
                  \right)^{1/2}
                  \exp\left(-\sum_{d=1}^{D}\frac{(x_d - x'_d)^2}{\ell_d^2(x) + \ell_d^2(x')}\right)

    :math:`k(x, x) = 1`; with constant :math:`\ell_d` it is the (ARD) squared exponential.
    PyMC's ``pm.gp.cov.Gibbs`` is one-dimensional; this one is not.

    Parameters
    ----------
    lengthscale_func : callable
        Maps the active inputs (a PyTensor matrix ``(n, D)``) to *positive* length-scales of shape
        ``(n, D)`` (one per dimension) or ``(n,)`` / ``(n, 1)`` (the same in every dimension). It
        must use PyTensor operations and may close over random variables. Positivity is not
        checked (a non-positive length-scale gives ``nan``): use ``exp`` / ``softplus``.
    """

    def __init__(
        self,
        input_dim: int,
        lengthscale_func: Callable,
        active_dims: Sequence[int] | None = None,
    ):
        if not callable(lengthscale_func):
            raise TypeError(
                "`lengthscale_func` must be a callable mapping an (n, D) tensor to (n, D) "
                "positive length-scales"
            )
        super().__init__(input_dim, active_dims)
        self.lengthscale_func = lengthscale_func

    def lengthscales(self, X) -> pt.TensorVariable:
        """Length-scales at the (already sliced) inputs ``X``, shape ``(n, D)`` or ``(n, 1)``."""
        ell = pt.as_tensor_variable(self.lengthscale_func(X))
        if ell.ndim == 1:
            ell = ell[:, None]
        if ell.ndim != 2:
            raise ValueError(
                f"`lengthscale_func` must return an (n, D) matrix, got {ell.ndim} dimension(s)"
            )
        m = ell.type.shape[1]
        if m is not None and m not in (1, self.n_dims):
            raise ValueError(
                f"`lengthscale_func` returns {m} length-scales per input but the kernel has "
                f"{self.n_dims} active dimension(s)"
            )
        return ell

    def full(self, X, Xs=None):
        X, Xs = self._slice(X, Xs)
        la = self.lengthscales(X)
        lb = la if Xs is None else self.lengthscales(Xs)
        la, lb = la[:, None, :], lb[None, :, :]
        s2 = pt.square(la) + pt.square(lb)
        diff2 = pt.square(pairwise_diff(X, Xs))
        if la.type.shape[-1] == 1 and lb.type.shape[-1] == 1:
            # isotropic length-scale: the prefactor is the same in every dimension
            pref = pt.power(2.0 * la * lb / s2, 0.5 * self.n_dims)[..., 0]
        else:
            pref = pt.prod(pt.sqrt(pt.broadcast_to(2.0 * la * lb / s2, diff2.shape)), axis=-1)
        return pref * pt.exp(-pt.sum(diff2 / s2, axis=-1))

    def diag(self, X):
        X, _ = self._slice(X)
        return pt.ones_like(X[:, 0])


_ISOTROPIC_BASES = (ExpQuad, Matern, Matern12, Matern32, Matern52, RatQuad, GammaExponential)


class PaciorekSchervish(Kernel):
    r"""Paciorek & Schervish (2004) non-stationary kernel, R&W eqs. (4.33)–(4.34).

    .. math::
       Q_{ij} &= (x_i - x_j)^\top\left(\frac{\Sigma_i + \Sigma_j}{2}\right)^{-1}(x_i - x_j)
       \qquad (4.33) \\
       k_{NS}(x_i, x_j) &= 2^{D/2}|\Sigma_i|^{1/4}|\Sigma_j|^{1/4}|\Sigma_i + \Sigma_j|^{-1/2}
       \,k_S\!\left(\sqrt{Q_{ij}}\right) \qquad (4.34)

    with :math:`\Sigma_i = \Sigma(x_i)` positive definite and :math:`k_S` a stationary isotropic
    kernel valid in every :math:`\mathbb{R}^D`. A diagonal :math:`\Sigma(x) =
    \operatorname{diag}(\ell_d^2(x))` with the SE base gives :class:`Gibbs`; a constant
    :math:`\Sigma = \ell^2 I` gives the stationary base with length-scale :math:`\ell`.

    Parameters
    ----------
    base : bayes_gp kernel
        :math:`k_S`: an isotropic :class:`~bayes_gp.kernels.ExpQuad`, ``Matern`` (any
        :math:`\nu`), ``Matern12/32/52``, ``Exponential``, ``RatQuad`` or ``GammaExponential``
        (all positive definite in every dimension: scale mixtures of Gaussians) with ``ls=1``; the
        length-scales come from :math:`\Sigma(x)`. Only its ``full_from_distance`` is used.
    Sigma_func : callable
        Maps the active inputs (a PyTensor matrix ``(n, D)``) to positive definite matrices
        ``(n, D, D)``, e.g. :math:`L(x)L(x)^\top` plus a diagonal. Built from PyTensor operations;
        it may close over random variables.

    Notes
    -----
    The determinants and the solve in (4.33) use a Cholesky factorisation unrolled into
    element-wise operations over all pairs (cost :math:`O(nmD^3)`), which every PyTensor backend
    compiles and differentiates; it suits the small :math:`D` of typical GP inputs.
    """

    def __init__(
        self,
        input_dim: int,
        base,
        Sigma_func: Callable,
        active_dims: Sequence[int] | None = None,
    ):
        if not isinstance(base, _ISOTROPIC_BASES):
            raise TypeError(
                "`base` must be an isotropic bayes_gp kernel valid in every dimension (ExpQuad, "
                f"Matern, Matern12/32/52, Exponential, RatQuad, GammaExponential), got "
                f"{type(base).__name__}"
            )
        metric = base.metric
        ls = constant_value(metric.ls) if isinstance(metric, LengthScale) else None
        if ls is None or ls.size != 1 or not np.allclose(ls, 1.0, rtol=0, atol=0):
            raise TypeError(
                "`base` must be isotropic with ls=1 (a fixed scalar): the length-scales of the "
                "Paciorek-Schervish kernel come from `Sigma_func`"
            )
        if not callable(Sigma_func):
            raise TypeError("`Sigma_func` must be a callable mapping (n, D) inputs to (n, D, D)")
        super().__init__(input_dim, active_dims)
        self.base = base
        self.Sigma_func = Sigma_func

    def sigmas(self, X) -> pt.TensorVariable:
        """:math:`\\Sigma(x)` at the (already sliced) inputs ``X``, shape ``(n, D, D)``."""
        S = pt.as_tensor_variable(self.Sigma_func(X))
        D = self.n_dims
        if S.ndim != 3:
            raise ValueError(
                f"`Sigma_func` must return an (n, {D}, {D}) array, got {S.ndim} dimension(s)"
            )
        if any(s is not None and s != D for s in S.type.shape[1:]):
            raise ValueError(
                f"`Sigma_func` returns matrices of shape {S.type.shape[1:]} but the kernel has "
                f"{D} active dimension(s)"
            )
        return S

    def full(self, X, Xs=None):
        X, Xs = self._slice(X, Xs)
        D = self.n_dims
        Sa = self.sigmas(X)
        Sb = Sa if Xs is None else self.sigmas(Xs)
        lda = _logdet_from_cholesky(_cholesky_entries(Sa, D))
        ldb = lda if Xs is None else _logdet_from_cholesky(_cholesky_entries(Sb, D))
        M = 0.5 * (Sa[:, None, :, :] + Sb[None, :, :, :])
        L = _cholesky_entries(M, D)
        diff = pairwise_diff(X, Xs)
        # Q = |L^{-1} diff|^2 by forward substitution (4.33)
        y: list = []
        Q = 0.0
        for i in range(D):
            s = diff[..., i]
            for k in range(i):
                s = s - L[i][k] * y[k]
            y.append(s / L[i][i])
            Q = Q + pt.square(y[i])
        # 2^{D/2}|S_i|^{1/4}|S_j|^{1/4}|S_i + S_j|^{-1/2} = exp(ld_i/4 + ld_j/4 - log|M_ij|/2)
        log_pref = 0.25 * lda[:, None] + 0.25 * ldb[None, :] - 0.5 * _logdet_from_cholesky(L)
        return pt.exp(log_pref) * self.base.full_from_distance(Q, squared=True)

    def diag(self, X):
        X, _ = self._slice(X)
        k0 = self.base.full_from_distance(pt.zeros((1, 1)), squared=True)[0, 0]
        return pt.ones_like(X[:, 0]) * k0


class OHagan(Kernel):
    r"""O'Hagan's (1978) kernel of a linear model with input-varying weights, R&W §4.2.3.

    With :math:`f(x) = \phi(x)^\top w(x)` and a GP prior
    :math:`\operatorname{cov}(w(x), w(x')) = W_0\,k_w(x, x')`:

    .. math:: k_f(x, x') = \phi(x)^\top W_0\,\phi(x')\;k_w(x, x')

    (a product of the basis-function kernel and :math:`k_w`, hence valid).

    Parameters
    ----------
    phi : callable
        Maps the active inputs (a PyTensor matrix ``(n, D)``) to features ``(n, M)``.
    W0 : scalar, vector of length M, or (M, M) matrix
        Prior covariance of the weights (symmetric positive semi-definite).
    base : covariance function
        :math:`k_w`, any PyMC / bayes_gp kernel with the same ``input_dim``; it is applied to the
        full ``X`` (with its own ``active_dims``).
    """

    def __init__(
        self,
        input_dim: int,
        phi: Callable,
        W0,
        base: pm.gp.cov.Covariance,
        active_dims: Sequence[int] | None = None,
    ):
        if not callable(phi):
            raise TypeError("`phi` must be a callable mapping an (n, D) tensor to (n, M) features")
        if not isinstance(base, pm.gp.cov.Covariance):
            raise TypeError(f"`base` must be a covariance function, got {type(base).__name__}")
        super().__init__(input_dim, active_dims)
        if base.input_dim != self.input_dim:
            raise ValueError(
                f"`base` has input_dim={base.input_dim} but the kernel has input_dim={input_dim}"
            )
        self.phi = phi
        self.W0 = _check_weight_matrix("W0", W0, None, "basis functions")
        self.base = base

    def features(self, X) -> pt.TensorVariable:
        """The feature matrix :math:`\\Phi` of the active columns of ``X``, shape ``(n, M)``."""
        X, _ = self._slice(X)
        Phi = pt.as_tensor_variable(self.phi(X))
        if Phi.ndim != 2:
            raise ValueError(f"`phi` must return a 2-D (n, M) matrix, got {Phi.ndim} dimension(s)")
        m, w = Phi.type.shape[1], self.W0
        if m is not None and w.ndim >= 1 and w.type.shape[0] not in (None, 1, m):
            raise ValueError(f"`phi` returns {m} features but `W0` is for {w.type.shape[0]}")
        return Phi

    def full(self, X, Xs=None):
        Phi = self.features(X)
        Phis = Phi if Xs is None else self.features(Xs)
        return _weighted_inner(Phi, Phis, self.W0) * self.base(X, Xs)

    def diag(self, X):
        return _weighted_sq_norm(self.features(X), self.W0) * self.base(X, diag=True)


class Wiener(Kernel):
    r"""Wiener process (Brownian motion started at 0), R&W §4.2.3 and §B.2.1.

    .. math:: k(x, x') = \min(x, x'), \qquad x, x' \ge 0

    One-dimensional: with ``input_dim > 1``, ``active_dims`` must pick one column. ``Var f(x) = x``.

    Inputs must be non-negative. Arrays known when the kernel is called (NumPy arrays, lists,
    PyTensor constants) are checked at once and raise ``ValueError``; symbolic inputs (e.g. a
    warping :math:`u(x)` inside :class:`~bayes_gp.kernels.Warped`) get a run-time check that raises
    ``ValueError`` when the graph is evaluated (PyTensor's JAX backend drops run-time checks).
    """

    _MSG = "the Wiener kernel min(x, x') needs inputs x >= 0 (a Wiener process starts at x = 0)"

    def __init__(self, input_dim: int = 1, active_dims: Sequence[int] | None = None):
        super().__init__(input_dim, active_dims)
        if self.n_dims != 1:
            raise ValueError(
                f"`active_dims`: the Wiener kernel is one-dimensional, got {self.n_dims} active "
                "dimensions; pick one column with active_dims=[j]"
            )

    def _column(self, X, name: str) -> pt.TensorVariable:
        known = _is_known(X)
        if known is not None and known.ndim == 2 and known.shape[1:] == (self.input_dim,):
            col = known[:, self.active_dims]
            if np.any(col < 0):
                raise ValueError(f"`{name}`: {self._MSG}; got min {np.nanmin(col):.6g}")
        Xa = self._slice(X)[0]
        if known is None:
            Xa = CheckAndRaise(ValueError, f"`{name}`: {self._MSG}")(Xa, pt.all(pt.ge(Xa, 0.0)))
        return Xa[:, 0]

    def full(self, X, Xs=None):
        x = self._column(X, "X")
        xs = x if Xs is None else self._column(Xs, "Xs")
        return pt.minimum(x[:, None], xs[None, :])

    def diag(self, X):
        return self._column(X, "X")
