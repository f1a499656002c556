r"""Sigmoid likelihoods for binary GP classification (seed 001 §5; R&W §3.3, §3.9).

Labels are :math:`y \in \{-1, +1\}` internally; :math:`p(y \mid f) = \sigma(y f)` with
:math:`\sigma` the logistic function (``"logit"``) or the standard normal CDF :math:`\Phi`
(``"probit"``). Each likelihood provides :math:`\log p(y\mid f)` and its first three derivatives
in :math:`f` (R&W eqs. 3.15–3.16 and Table 3.1) for the Laplace approximation, and the averaged
predictive probability :math:`\int \sigma(f_*) N(f_* \mid \mu, s^2) df_*` (R&W eq. 3.25):
closed form for the probit (R&W eq. 3.82), Gauss–Hermite quadrature for the logit.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_ndtr, ndtr

__all__ = ["LINKS", "log_lik_derivatives", "average_probability"]

LINKS = ("logit", "probit")
_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(200)  # probabilists' Hermite: N(0, 1) weights
_GH_W = _GH_W / np.sqrt(2.0 * np.pi)


def _normal_hazard(z: np.ndarray) -> np.ndarray:
    """:math:`N(z)/\\Phi(z)`, stable for very negative ``z``."""
    return np.exp(-0.5 * z * z - 0.5 * np.log(2.0 * np.pi) - log_ndtr(z))


def log_lik_derivatives(link: str, y: np.ndarray, f: np.ndarray):
    r"""``(log p, d1, d2, d3)`` of :math:`\log p(y \mid f)` w.r.t. :math:`f`, elementwise.

    Logit (R&W eq. 3.15): :math:`\log\sigma(yf)`, :math:`d_1 = t - \pi`, :math:`d_2 = -\pi(1-\pi)`,
    :math:`d_3 = -\pi(1-\pi)(1-2\pi)` with :math:`t = (y+1)/2`, :math:`\pi = \sigma(f)`.
    Probit (R&W eq. 3.16): :math:`\log\Phi(z)`, :math:`z = yf`; with the hazard
    :math:`h = N(z)/\Phi(z)`: :math:`d_1 = y h`, :math:`d_2 = -h(z + h)`,
    :math:`d_3 = y\,h\,(z^2 + 3zh + 2h^2 - 1)`.
    """
    if link == "logit":
        pi = expit(f)
        logp = -np.logaddexp(0.0, -y * f)
        t = (y + 1.0) / 2.0
        d1 = t - pi
        d2 = -pi * (1.0 - pi)
        d3 = d2 * (1.0 - 2.0 * pi)
        return logp, d1, d2, d3
    if link == "probit":
        z = y * f
        h = _normal_hazard(z)
        logp = log_ndtr(z)
        d1 = y * h
        d2 = -h * (z + h)
        d3 = y * h * (2.0 * h * h + 3.0 * z * h + z * z - 1.0)
        return logp, d1, d2, d3
    raise ValueError(f"`link` must be one of {LINKS}, got {link!r}")


def average_probability(link: str, mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    r""":math:`\int \sigma(f) N(f \mid \mu, s^2) df`, the averaged predictive probability of class +1.

    Probit: :math:`\Phi(\mu / \sqrt{1 + s^2})` exactly (R&W eq. 3.82). Logit: 200-point
    Gauss–Hermite quadrature, accurate to ~1e-10 for latent sd up to ~5 (not the
    :math:`\sigma(\mu)` plug-in, which ignores the uncertainty).
    """
    mean = np.asarray(mean, float)
    sd = np.sqrt(np.maximum(np.asarray(var, float), 0.0))
    if link == "probit":
        return ndtr(mean / np.sqrt(1.0 + sd**2))
    if link == "logit":
        f = mean[..., None] + sd[..., None] * _GH_X
        return np.sum(expit(f) * _GH_W, axis=-1)
    raise ValueError(f"`link` must be one of {LINKS}, got {link!r}")
