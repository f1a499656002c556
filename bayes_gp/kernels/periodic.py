r"""Periodic kernels (R&W §4.2.1 and eq. 4.31).

Two constructions of a periodic covariance from a stationary one:

* :class:`Periodic`: MacKay's warping :math:`u(x) = (\cos(2\pi x/p), \sin(2\pi x/p))` fed to the
  squared exponential, R&W eq. (4.31);
* :class:`Periodized`: the periodisation :math:`k_{\mathbb T}(\tau) = \sum_{m\in\mathbb Z} k(\tau + m p)`
  of any stationary kernel (R&W §4.2.1), truncated to :math:`|m| \le` ``n_images``.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence

import numpy as np
import pytensor.tensor as pt

from bayes_gp._validation import (
    as_parameter,
    check_integer_in,
    check_per_dim,
    check_positive,
    constant_value,
)
from bayes_gp.kernels.base import Kernel, Stationary
from bayes_gp.kernels.metrics import LengthScale, Metric, pairwise_diff

__all__ = ["Periodic", "Periodized", "TruncationWarning", "TRUNCATION_TOL"]

#: Relative size :math:`k(r_M)/k(0)` of the first omitted image above which a
#: :class:`Periodized` kernel with known hyperparameters warns.
TRUNCATION_TOL = 1e-6


class TruncationWarning(UserWarning):
    """A truncated periodisation omits images that are not negligible: its values are off by
    about the reported amount, and its Gram matrices need not be positive semi-definite."""


class Periodic(Stationary):
    r"""Periodic kernel, R&W eq. (4.31) (MacKay 1998).

    .. math::
       k(x, x') = \exp\left(-\sum_{d=1}^{D}\frac{2\sin^2\!\left(\pi (x_d - x'_d)/p_d\right)}
                  {\ell_d^2}\right)

    In one dimension this is :math:`\exp(-2\sin^2(\pi r/p)/\ell^2)`, the SE kernel applied to the
    warped input :math:`u(x) = (\cos(2\pi x/p), \sin(2\pi x/p))`, since
    :math:`|u(x) - u(x')|^2 = 4\sin^2(\pi r/p)`.

    Notes
    -----
    PyMC's ``pm.gp.cov.Periodic`` uses :math:`-\tfrac12` in the exponent where R&W (4.31) uses
    :math:`-2`: ``pm.gp.cov.Periodic(ls=l)`` equals ``bayes_gp.Periodic(ls=2*l)``. This class uses
    the book's scaling, so :math:`\ell` is comparable with the length-scale of the SE kernel.
    Only isotropic and ARD length-scales are allowed: a factor-analysis metric on the warped
    coordinates would not give a stationary kernel. ``period`` may be a scalar or one value per
    active dimension. The spectrum of a periodic kernel is discrete, so there is no spectral
    density (use ``pm.gp.HSGPPeriodic`` with PyMC's own kernel, or :class:`Periodized`).
    """

    def __init__(
        self,
        input_dim: int,
        period,
        ls=None,
        ls_inv=None,
        active_dims: Sequence[int] | None = None,
        *,
        metric: Metric | None = None,
    ):
        check_positive("period", period)
        super().__init__(input_dim, ls, ls_inv, active_dims, metric=metric)
        if not isinstance(self.metric, LengthScale):
            raise ValueError(
                "`metric`: Periodic accepts only isotropic or ARD length-scales (`ls`), not a "
                "factor-analysis metric"
            )
        check_per_dim("period", period, self.n_dims)
        self.period = as_parameter(period)

    def square_dist(self, X, Xs=None):
        s = pt.sin(np.pi * pairwise_diff(X, Xs) / self.period)
        return pt.sum(4.0 * pt.square(s) / pt.square(self.metric.ls), axis=-1)

    def full_from_distance(self, dist, squared=False):
        r2 = dist if squared else pt.square(dist)
        return pt.exp(-0.5 * r2)

    def power_spectral_density(self, omega):
        raise NotImplementedError(
            "a periodic kernel has a discrete spectrum (a Fourier series, R&W §4.2.1) and no "
            "spectral density, so the Hilbert-space approximation (approx='hsgp') cannot use "
            "it: for large N use approx='vfe' or approx='fitc' (inducing points work with any "
            "kernel), or the exact GP"
        )


class Periodized(Kernel):
    r"""Periodisation of a stationary kernel (R&W §4.2.1, Schölkopf & Smola eq. 4.42).

    .. math:: k_{\mathbb T}(\tau) = \sum_{m \in \mathbb{Z}^D} k(\tau + m \odot p)
              \approx \sum_{|m_d| \le M} k(\tau + m \odot p)

    The sum is periodic in :math:`\tau`, so :math:`\tau` is first wrapped into the central cell
    :math:`[-p/2, p/2]^D` (exact); the sum is then truncated to ``n_images`` = :math:`M` shifts on
    each side in every active dimension (:math:`(2M+1)^D` terms). Wrapping first keeps the
    truncation symmetric, so the truncation error is the tail mass of :math:`k` beyond
    :math:`(M + 1/2) p` at any separation (without it, a truncated sum is not even positive
    semi-definite once inputs span several periods).

    Parameters
    ----------
    base : Stationary
        Stationary kernel to periodise (its ``input_dim`` and ``active_dims`` are used).
    period : float or array_like
        Period :math:`p` (scalar, or one per active dimension of ``base``).
    n_images : int
        :math:`M`, number of shifted copies on each side (default 5).
    """

    def __init__(self, base: Stationary, period, n_images: int = 5):
        if not isinstance(base, Stationary) or isinstance(base, Periodic):
            raise TypeError(
                f"`base` must be a non-periodic bayes_gp stationary kernel, got {type(base).__name__}"
            )
        check_positive("period", period)
        n_images = check_integer_in("n_images", n_images, range(0, 1001))
        super().__init__(base.input_dim, base.active_dims)
        check_per_dim("period", period, self.n_dims)
        if (self.n_dims > 1) and (2 * n_images + 1) ** self.n_dims > 100_000:
            raise ValueError(
                f"`n_images`={n_images} in {self.n_dims} dimensions needs "
                f"{(2 * n_images + 1) ** self.n_dims} kernel evaluations; reduce it"
            )
        self.base = base
        self.period = as_parameter(period)
        self.n_images = n_images
        self._warn_if_truncation_is_coarse(period)

    def _first_omitted(self, period: np.ndarray, n_images: np.ndarray) -> np.ndarray | None:
        r""":math:`k(r_M)/k(0)` with :math:`r_M = \min_d (M + \tfrac12) p_d/\ell_d`, the
        largest omitted image after wrapping (for kernels that decay with :math:`r`), for each
        :math:`M` in ``n_images``; ``None`` when the length-scales are not known numbers."""
        from bayes_gp.linalg import EAGER_MODE

        metric = self.base.metric
        ls = constant_value(metric.ls) if isinstance(metric, LengthScale) else None
        if ls is None:
            return None
        ratio = np.broadcast_to(period, (self.n_dims,)) / np.broadcast_to(ls, (self.n_dims,))
        r2 = np.concatenate([[0.0], ((np.asarray(n_images) + 0.5) * np.min(ratio)) ** 2])
        g = self.base.full_from_distance(pt.as_tensor_variable(r2[None, :]), squared=True)
        k = np.asarray(g.eval(mode=EAGER_MODE), float)[0]
        return np.abs(k[1:]) / k[0] if k[0] > 0 else None

    def _warn_if_truncation_is_coarse(self, period) -> None:
        period = constant_value(period)
        if period is None:
            return
        candidates = np.arange(self.n_images, 1001)
        err = self._first_omitted(period, candidates)
        if err is None or err[0] <= TRUNCATION_TOL:
            return
        ok = np.flatnonzero(err <= TRUNCATION_TOL)
        need = f">= {candidates[ok[0]]}" if ok.size else "> 1000"
        warnings.warn(
            f"Periodized: the first omitted image is {err[0]:.2g} x k(0) with n_images="
            f"{self.n_images} (period small against the length-scale): the kernel values are "
            f"off by at least that and its Gram matrices need not be positive semi-definite; "
            f"use n_images {need}, or the Periodic kernel",
            TruncationWarning,
            stacklevel=4,
        )

    def _sum_over_images(self, diff):
        r""":math:`\sum_m k(\tau + m p)` for differences ``diff`` of shape ``(n, m, D)``."""
        period = pt.ones(self.n_dims) * self.period
        wrapped = diff - period * pt.round(diff / period)
        rng = range(-self.n_images, self.n_images + 1)
        images = np.asarray(list(itertools.product(rng, repeat=self.n_dims)), dtype=float)
        shifted = wrapped[None, :, :, :] + (images * period)[:, None, None, :]
        r2 = self.base.metric.square_dist_from_diff(shifted)
        return pt.sum(self.base.full_from_distance(r2, squared=True), axis=0)

    def full(self, X, Xs=None):
        X, Xs = self._slice(X, Xs)
        return self._sum_over_images(pairwise_diff(X, Xs))

    def diag(self, X):
        X, _ = self._slice(X)
        k0 = self._sum_over_images(pt.zeros((1, 1, self.n_dims)))
        return pt.ones_like(X[:, 0]) * k0[0, 0]
