r"""Censored observation models of latent GPs: survival times (Weibull, log-normal) and
Gaussian measurements with detection limits.

Each observation carries a censoring code (``censored=``, one per row):

* survival times :math:`t_i > 0` (:class:`Weibull`, :class:`LogNormal`): ``0`` the event was
  observed at :math:`t_i` (density :math:`p(t_i \mid f_i)`), ``1`` right-censored (the event is
  later than :math:`t_i`: survival :math:`S(t_i \mid f_i) = P(T > t_i \mid f_i)`);
* measurements (:class:`CensoredGaussian`): ``0`` observed, ``-1`` left-censored (the value is
  below :math:`y_i`, a detection limit: :math:`\Phi((y_i - f_i)/\sigma)`), ``1``
  right-censored (above :math:`y_i`), ``2`` interval-censored (between :math:`y_i` and
  ``upper[i]``: :math:`\Phi(b_i) - \Phi(a_i)`).

The censored log-likelihood is the sum of log densities of the events and log probabilities of
the censored rows (Klein & Moeschberger 2003, *Survival Analysis*, eq. 3.5.1), for
non-informative censoring. All three are log-concave in :math:`f` (the Weibull's
:math:`\ell'' = -k^2 (t e^{-f})^k`; the normal's :math:`\log(\Phi(b) - \Phi(a))` is the log of a
log-concave function's integral over an interval, Prékopa 1973), so the Laplace mode is found by
the stable Newton form.

The normal pieces, one formula for every code: with standardised limits
:math:`a = (l - f)/\sigma`, :math:`b = (u - f)/\sigma` (:math:`l = -\infty` left-censored,
:math:`u = +\infty` right-censored), :math:`P = \Phi(b) - \Phi(a)`,
:math:`r_a = \varphi(a)/P`, :math:`r_b = \varphi(b)/P` and
:math:`M_k = He_{k-1}(a) r_a - He_{k-1}(b) r_b` (:math:`He` the probabilists' Hermite
polynomials: :math:`M_1 = r_a - r_b`, :math:`M_2 = a r_a - b r_b`,
:math:`M_3 = (a^2 - 1) r_a - (b^2 - 1) r_b`, :math:`M_4 = (a^3 - 3a) r_a - (b^3 - 3b) r_b`),
:math:`\sigma^k \partial_f^k P / P = M_k`, so

.. math::
   \ell = \log P, \quad \ell' = \frac{M_1}{\sigma}, \quad
   \ell'' = \frac{M_2 - M_1^2}{\sigma^2}, \quad
   \ell''' = \frac{M_3 - 3 M_1 M_2 + 2 M_1^3}{\sigma^3},

and, since :math:`P` solves the heat equation :math:`\partial_\sigma P = \sigma\,\partial_f^2 P`,

.. math::
   \partial_\sigma\ell = \frac{M_2}{\sigma}, \quad
   \partial_\sigma\ell' = \frac{M_3 - M_1 M_2}{\sigma^2}, \quad
   \partial_\sigma\ell'' = \frac{M_4 - 2 M_1 M_3 - M_2^2 + 2 M_1^2 M_2}{\sigma^3}.

:math:`\log P` is computed in the tail where it is small (:math:`\log\Phi(-a) +
\log(1 - e^{\log\Phi(-b) - \log\Phi(-a)})` for :math:`a \ge 0`, the mirror image for
:math:`b \le 0`) and the one-sided ratios by the erfcx-based hazard
(:func:`~bayes_gp.latent.likelihoods.normal_hazard`), so they stay finite in the tails.
:math:`\ell''` is clipped to :math:`[-1/\sigma^2, 0]` (the truncated normal's variance
:math:`1 + M_2 - M_1^2` lies in :math:`[0, 1]`), as the probit's is; far in a tail
(:math:`|a| \gtrsim 10^3`) the differences lose digits, :math:`O(\epsilon a^2)` relative.

Draws (:meth:`draw`) are of the uncensored times or values the model implies; the predictive
machinery (:meth:`cdf_values`, :meth:`latent_threshold`, the response mean) describes them
too, and held-out data (:meth:`with_data`) are taken as observed events.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expm1, gammaln, log_ndtr, ndtr, ndtri

from bayes_gp.latent.likelihoods import (
    LatentLikelihood,
    _as_finite_vector,
    _check_phi,
    _NormalResponse,
    _phi_arrays,
    normal_hazard,
)

__all__ = ["Weibull", "LogNormal", "CensoredGaussian", "SURVIVAL_CODES", "GAUSSIAN_CODES"]

_LOG_2PI = float(np.log(2.0 * np.pi))

#: The censoring codes of the survival likelihoods and what they mean.
SURVIVAL_CODES = {0: "event", 1: "right-censored"}
#: The censoring codes of :class:`CensoredGaussian` and what they mean.
GAUSSIAN_CODES = {-1: "left-censored", 0: "observed", 1: "right-censored",
                  2: "interval-censored"}  # fmt: skip


def censoring_codes(censored, n: int, codes: dict[int, str], what: str) -> np.ndarray:
    """The censoring indicator as ``n`` floats (zeros when ``None``), or a ``ValueError`` naming
    a wrong length, a NaN or a code outside ``codes``."""
    if censored is None:
        return np.zeros(n)
    c = _as_finite_vector("censored", np.asarray(censored, dtype=float))
    if c.shape != (n,):
        raise ValueError(f"`censored` has {c.size} values for {n} observations (one per row)")
    bad = ~np.isin(c, list(codes))
    if np.any(bad):
        i = int(np.argmax(bad))
        allowed = ", ".join(f"{k} ({v})" for k, v in codes.items())
        raise ValueError(
            f"`censored` of the {what} likelihood must be one of {allowed}; censored[{i}] = "
            f"{c[i]:g} ({int(bad.sum())} value(s) outside these codes)"
        )
    return c


def _positive_times(y: np.ndarray, what: str) -> None:
    bad = y <= 0
    if np.any(bad):
        i = int(np.argmax(bad))
        raise ValueError(
            f"the {what} likelihood needs positive survival times; y[{i}] = {y[i]:g} "
            f"({int(bad.sum())} value(s) at or below 0): a time of 0 has no density under a "
            "continuous survival model (shift the time origin, or drop the row)"
        )


def _normal_moments(a, b):
    r""":math:`(\log P, M_1, M_2, M_3, M_4)` of the module docstring for standardised limits
    ``a < b`` (either may be infinite)."""
    a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
    low_inf, up_inf = np.isneginf(a), np.isposinf(b)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        la, lb = log_ndtr(a), log_ndtr(b)
        lma, lmb = log_ndtr(-a), log_ndtr(-b)
        upper_tail = lma + np.log(-expm1(lmb - lma))  # a >= 0: Phi(-a) - Phi(-b)
        lower_tail = lb + np.log(-expm1(la - lb))  # b <= 0: Phi(b) - Phi(a)
        middle = np.log(ndtr(b) - ndtr(a))
        logP = np.where(a >= 0, upper_tail, np.where(b <= 0, lower_tail, middle))
        logP = np.where(up_inf, lma, np.where(low_inf, lb, logP))
        logP = np.where(low_inf & up_inf, 0.0, logP)
        ra = np.where(up_inf, normal_hazard(-a), np.exp(-0.5 * a * a - 0.5 * _LOG_2PI - logP))
        rb = np.where(low_inf, normal_hazard(b), np.exp(-0.5 * b * b - 0.5 * _LOG_2PI - logP))
    ra = np.where(np.isfinite(a), ra, 0.0)
    rb = np.where(np.isfinite(b), rb, 0.0)
    A = np.where(np.isfinite(a), a, 0.0)
    B = np.where(np.isfinite(b), b, 0.0)
    M1 = ra - rb
    M2 = A * ra - B * rb
    M3 = (A * A - 1.0) * ra - (B * B - 1.0) * rb
    M4 = (A**3 - 3.0 * A) * ra - (B**3 - 3.0 * B) * rb
    return logP, M1, M2, M3, M4


class _CensoredNormal:
    r"""The shared normal algebra of :class:`LogNormal` and :class:`CensoredGaussian`: a
    normal observation :math:`z \sim N(f, \sigma^2)` (``self._z``: ``y`` or :math:`\log y`),
    observed or censored by ``self.censored``'s codes (``self._zu`` the interval's upper
    limits), plus the Jacobian constant ``self._jac`` at the observed rows (module
    docstring)."""

    def _sigma(self, phi) -> float:
        (sigma,) = _check_phi(self, phi)
        if not sigma > 0:
            raise ValueError(f"{type(self).__name__} sigma must be positive, got {sigma}")
        return float(sigma)

    def _limits(self, f, sigma):
        """Standardised limits (a, b) at every row (the observed rows get (-inf, inf), whose
        pieces are 0) and the observed rows' residual (z - f)/sigma."""
        c = self.censored
        r = (self._z - np.asarray(f, float)) / sigma
        ru = (self._zu - np.asarray(f, float)) / sigma
        a = np.where((c == 1) | (c == 2), r, -np.inf)
        b = np.where(c == -1, r, np.where(c == 2, ru, np.inf))
        return r, a, b

    def log_density(self, f, phi=()):
        sigma = self._sigma(phi)
        r, a, b = self._limits(f, sigma)
        logP = _normal_moments(a, b)[0]
        event = -0.5 * _LOG_2PI - np.log(sigma) - 0.5 * r * r - self._jac
        return np.where(self.censored == 0, event, logP)

    def derivatives(self, f, phi=()):
        sigma = self._sigma(phi)
        r, a, b = self._limits(f, sigma)
        logP, M1, M2, M3, _M4 = _normal_moments(a, b)
        obs = self.censored == 0
        s2 = sigma * sigma
        logp = np.where(obs, -0.5 * _LOG_2PI - np.log(sigma) - 0.5 * r * r - self._jac, logP)
        d1 = np.where(obs, r / sigma, M1 / sigma)
        d2 = np.where(obs, -1.0 / s2, np.clip(M2 - M1 * M1, -1.0, 0.0) / s2)
        d3 = np.where(obs, 0.0, (M3 - 3.0 * M1 * M2 + 2.0 * M1**3) / (s2 * sigma))
        return logp, d1, d2, d3

    def phi_derivatives(self, f, phi=()):
        sigma = self._sigma(phi)
        r, a, b = self._limits(f, sigma)
        _logP, M1, M2, M3, M4 = _normal_moments(a, b)
        obs = self.censored == 0
        s2 = sigma * sigma
        dl = np.where(obs, (r * r - 1.0) / sigma, M2 / sigma)
        dd1 = np.where(obs, -2.0 * r / s2, (M3 - M1 * M2) / s2)
        dd2 = np.where(obs, 2.0 / (s2 * sigma),
                       (M4 - 2.0 * M1 * M3 - M2 * M2 + 2.0 * M1 * M1 * M2) / (s2 * sigma))  # fmt: skip
        return dl[None], dd1[None], dd2[None]


def _upper_limits(y: np.ndarray, censored: np.ndarray, upper) -> np.ndarray:
    """The interval-censored rows' upper limits (``inf`` elsewhere): finite and above ``y``
    where ``censored == 2``; ``upper`` is ignored at the other rows (NaN allowed there)."""
    n = y.shape[0]
    interval = censored == 2
    if upper is None:
        if np.any(interval):
            i = int(np.argmax(interval))
            raise ValueError(
                f"censored[{i}] = 2 (interval-censored) needs `upper`, the interval's upper "
                "limit (y holds its lower limit)"
            )
        return np.full(n, np.inf)
    u = np.asarray(upper, dtype=float)
    if u.ndim != 1 or u.shape != (n,):
        raise ValueError(f"`upper` has {u.size} values for {n} observations (one per row)")
    bad = interval & ~np.isfinite(u)
    if np.any(bad):
        i = int(np.argmax(bad))
        raise ValueError(f"`upper` must be finite at the interval-censored rows; upper[{i}] = "
                         f"{u[i]:g}")  # fmt: skip
    bad = interval & (u <= y)
    if np.any(bad):
        i = int(np.argmax(bad))
        raise ValueError(
            f"an interval-censored row needs upper > y (y is the lower limit); upper[{i}] = "
            f"{u[i]:g} <= y[{i}] = {y[i]:g}"
        )
    return np.where(interval, u, np.inf)


@dataclass(frozen=True, eq=False)
class CensoredGaussian(_NormalResponse, _CensoredNormal, LatentLikelihood):
    r"""Gaussian measurements with detection limits: :math:`y_i^* \sim N(f_i, \sigma^2)`,
    ``phi = [sigma]``, recorded as observed, left-, right- or interval-censored (Tobin 1958 for
    the one-sided case; the codes of :data:`GAUSSIAN_CODES`):

    .. math::
       \ell_i = \begin{cases}
         \log\varphi(r_i) - \log\sigma & c_i = 0, \\
         \log\Phi(r_i) & c_i = -1 \;(y_i^* \le y_i), \\
         \log\Phi(-r_i) & c_i = 1 \;(y_i^* \ge y_i), \\
         \log(\Phi((u_i - f_i)/\sigma) - \Phi(r_i)) & c_i = 2 \;(y_i \le y_i^* \le u_i),
       \end{cases} \qquad r_i = (y_i - f_i)/\sigma,

    with :math:`u_i` = ``upper[i]``; derivatives by the module docstring's :math:`M_k`.
    Identity link: ``f`` is the mean of the uncensored measurement, on ``y``'s scale.
    """

    log_concave = True  # Phi(b) - Phi(a) is log-concave in f (module docstring)
    identity_link = True

    censored: np.ndarray | None = None
    upper: np.ndarray | None = None

    #: The codes of ``censored``.
    censoring = GAUSSIAN_CODES

    def __post_init__(self):
        y = _as_finite_vector("y", self.y)
        c = censoring_codes(self.censored, y.size, GAUSSIAN_CODES, "censored_gaussian")
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "censored", c)
        object.__setattr__(self, "upper", _upper_limits(y, c, self.upper))
        object.__setattr__(self, "param_names", ("sigma",))
        object.__setattr__(self, "_z", y)
        object.__setattr__(self, "_zu", self.upper)
        object.__setattr__(self, "_jac", 0.0)

    def with_data(self, y, size=None):
        return CensoredGaussian(y)


@dataclass(frozen=True, eq=False)
class LogNormal(_CensoredNormal, LatentLikelihood):
    r"""Right-censored log-normal survival times, ``phi = [sigma]``: :math:`\log T_i \sim
    N(f_i, \sigma^2)` (the log-normal accelerated failure time model; Klein & Moeschberger 2003,
    ch. 12), the median time :math:`e^{f}`:

    .. math::
       \ell_i = \begin{cases}
         -\log t_i - \log\sigma - \tfrac12\log 2\pi - \tfrac12 r_i^2 & \text{event}, \\
         \log(1 - \Phi(r_i)) = \log\Phi(-r_i) & \text{right-censored},
       \end{cases} \qquad r_i = (\log t_i - f_i)/\sigma,

    the censored term by ``log_ndtr`` and the erfcx-based hazard (module docstring).
    :math:`E[T] = e^{f + \sigma^2/2}`, :math:`\mathrm{Var}[T] = (e^{\sigma^2} - 1)
    e^{2f + \sigma^2}`.
    """

    log_concave = True  # the normal pieces are log-concave in f

    censored: np.ndarray | None = None

    #: The codes of ``censored``.
    censoring = SURVIVAL_CODES

    def __post_init__(self):
        y = _as_finite_vector("y", self.y)
        _positive_times(y, "lognormal")
        c = censoring_codes(self.censored, y.size, SURVIVAL_CODES, "lognormal")
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "censored", c)
        object.__setattr__(self, "param_names", ("sigma",))
        object.__setattr__(self, "_z", np.log(y))
        object.__setattr__(self, "_zu", np.full(y.size, np.inf))
        object.__setattr__(self, "_jac", np.log(y))

    def response_mean(self, f, phi=(), size=None):
        r""":math:`e^{f + \sigma^2/2}`."""
        (sigma,) = _phi_arrays(self, phi)
        return np.exp(np.asarray(f, float) + 0.5 * sigma**2)

    def response_variance(self, f, phi=(), size=None):
        r""":math:`(e^{\sigma^2} - 1) e^{2f + \sigma^2}`."""
        (sigma,) = _phi_arrays(self, phi)
        return expm1(sigma**2) * np.exp(2.0 * np.asarray(f, float) + sigma**2)

    def draw(self, f, phi, rng, size=None):
        """Uncensored times :math:`e^{f + \\sigma\\varepsilon}`."""
        sigma = self._sigma(phi)
        return np.exp(np.asarray(f, float) + sigma * rng.standard_normal(np.shape(f)))

    def cdf(self, f, phi=()):
        """The event time's CDF at the recorded times."""
        F = ndtr((self._z - np.asarray(f, float)) / self._sigma(phi))
        return F, F

    def cdf_values(self, y, f, phi=(), size=None):
        r""":math:`\Phi((\log y - f)/\sigma)`; 0 at and below 0."""
        (sigma,) = _phi_arrays(self, phi)
        y = np.asarray(y, float)
        with np.errstate(divide="ignore"):
            F = ndtr((np.log(np.maximum(y, 0.0)) - f) / sigma)
        return np.where(y <= 0, 0.0, F)

    def ppf_values(self, q, f, phi=()):
        (sigma,) = _phi_arrays(self, phi)
        return np.exp(f + sigma * ndtri(q))

    def latent_threshold(self, y, u, phi=(), size=None):
        r""":math:`\log y + \sigma\Phi^{-1}(u)` (:math:`-\infty` at :math:`y \le 0`)."""
        (sigma,) = _phi_arrays(self, phi)
        y = np.asarray(y, float)
        with np.errstate(divide="ignore"):
            t = np.log(np.maximum(y, 0.0)) + sigma * ndtri(u)
        return np.where(y <= 0, -np.inf, t)

    def threshold_scale(self, y, phi=(), size=None):
        r""":math:`\sigma`."""
        (sigma,) = _phi_arrays(self, phi)
        return np.broadcast_to(sigma, np.broadcast_shapes(np.shape(y), sigma.shape))

    def with_data(self, y, size=None):
        return LogNormal(y)


@dataclass(frozen=True, eq=False)
class Weibull(LatentLikelihood):
    r"""Right-censored Weibull survival times, log link, shape :math:`k` (``phi = [shape]``):
    scale :math:`\lambda = e^{f}`, :math:`S(t) = \exp(-(t/\lambda)^k)` (the Weibull
    proportional-hazards / accelerated-failure-time model; Klein & Moeschberger 2003, ch. 12).

    With :math:`u = \log t - f`, :math:`z = (t e^{-f})^k = e^{k u}` and :math:`\delta = 1` for
    an event, 0 for a right-censored time:

    .. math::
       \ell = \delta(\log k - f + (k - 1)u) - z, \quad
       \ell' = k(z - \delta), \quad \ell'' = -k^2 z, \quad \ell''' = k^3 z;

    in :math:`k`: :math:`\partial_k\ell = \delta(1/k + u) - u z`,
    :math:`\partial_k\ell' = z - \delta + k u z`, :math:`\partial_k\ell'' = -2kz - k^2 u z`.
    Log-concave in :math:`f` for events and censored times: :math:`W = k^2 z > 0`.
    :math:`E[T] = \lambda\Gamma(1 + 1/k)`, :math:`\mathrm{Var}[T] = \lambda^2(\Gamma(1 + 2/k)
    - \Gamma(1 + 1/k)^2)`.
    """

    log_concave = True  # W = k^2 z > 0

    censored: np.ndarray | None = None

    #: The codes of ``censored``.
    censoring = SURVIVAL_CODES

    def __post_init__(self):
        y = _as_finite_vector("y", self.y)
        _positive_times(y, "weibull")
        c = censoring_codes(self.censored, y.size, SURVIVAL_CODES, "weibull")
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "censored", c)
        object.__setattr__(self, "param_names", ("shape",))
        object.__setattr__(self, "_logy", np.log(y))
        object.__setattr__(self, "_event", 1.0 - c)

    def _shape(self, phi) -> float:
        (k,) = _check_phi(self, phi)
        if not k > 0:
            raise ValueError(f"weibull shape must be positive, got {k}")
        return np.float64(k)  # (a NumPy float: an overflow is inf, not an OverflowError)

    def _parts(self, f, phi):
        k = self._shape(phi)
        u = self._logy - np.asarray(f, float)
        with np.errstate(over="ignore"):
            z = np.exp(k * u)
        return k, u, z

    def log_density(self, f, phi=()):
        k, u, z = self._parts(f, phi)
        d = self._event
        return d * (np.log(k) - self._logy + k * u) - z  # -f + (k - 1)u = k u - log t

    def derivatives(self, f, phi=()):
        k, _u, z = self._parts(f, phi)
        return self.log_density(f, phi), k * (z - self._event), -k * k * z, k**3 * z

    def phi_derivatives(self, f, phi=()):
        k, u, z = self._parts(f, phi)
        d = self._event
        dl = d * (1.0 / k + u) - u * z
        return dl[None], (z - d + k * u * z)[None], (-2.0 * k * z - k * k * u * z)[None]

    def _gamma_moment(self, k, j: float):
        return np.exp(gammaln(1.0 + j / k))

    def response_mean(self, f, phi=(), size=None):
        r""":math:`e^{f}\Gamma(1 + 1/k)`."""
        (k,) = _phi_arrays(self, phi)
        return np.exp(np.asarray(f, float)) * self._gamma_moment(k, 1.0)

    def response_variance(self, f, phi=(), size=None):
        r""":math:`e^{2f}(\Gamma(1 + 2/k) - \Gamma(1 + 1/k)^2)`."""
        (k,) = _phi_arrays(self, phi)
        g1, g2 = self._gamma_moment(k, 1.0), self._gamma_moment(k, 2.0)
        return np.exp(2.0 * np.asarray(f, float)) * (g2 - g1 * g1)

    def draw(self, f, phi, rng, size=None):
        """Uncensored times :math:`e^{f} W`, :math:`W` a standard Weibull(:math:`k`) draw."""
        k = self._shape(phi)
        return np.exp(np.asarray(f, float)) * rng.weibull(k, size=np.shape(f))

    def cdf(self, f, phi=()):
        """The event time's CDF :math:`1 - e^{-z}` at the recorded times."""
        _k, _u, z = self._parts(f, phi)
        F = -expm1(-z)
        return F, F

    def cdf_values(self, y, f, phi=(), size=None):
        r""":math:`1 - \exp(-(y e^{-f})^k)`; 0 at and below 0."""
        (k,) = _phi_arrays(self, phi)
        y = np.asarray(y, float)
        with np.errstate(over="ignore", divide="ignore"):
            F = -expm1(-np.exp(k * (np.log(np.maximum(y, 0.0)) - f)))
        return np.where(y <= 0, 0.0, F)

    def ppf_values(self, q, f, phi=()):
        (k,) = _phi_arrays(self, phi)
        return np.exp(f) * (-np.log1p(-q)) ** (1.0 / k)

    def latent_threshold(self, y, u, phi=(), size=None):
        r""":math:`\log y - \log(-\log u)/k`: :math:`P(Y \le y \mid f) = 1 - e^{-z} = 1 - u`
        at :math:`z = -\log u` (:math:`-\infty` at :math:`y \le 0`)."""
        (k,) = _phi_arrays(self, phi)
        y = np.asarray(y, float)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.log(np.maximum(y, 0.0)) - np.log(-np.log(u)) / k
        return np.where(y <= 0, -np.inf, t)

    def threshold_scale(self, y, phi=(), size=None):
        r""":math:`\pi/(\sqrt6\,k)`, the sd of :math:`\log E/k` for :math:`E \sim
        \mathrm{Exp}(1)` (a Gumbel's)."""
        (k,) = _phi_arrays(self, phi)
        return np.broadcast_to(np.pi / (np.sqrt(6.0) * k),
                               np.broadcast_shapes(np.shape(y), k.shape))  # fmt: skip

    def with_data(self, y, size=None):
        return Weibull(y)
