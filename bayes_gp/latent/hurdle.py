r"""Hurdle count models of latent GPs: zeros from one process, positive counts from a
zero-truncated Poisson or negative binomial (Mullahy 1986; Cragg 1971 for the two-part idea;
Zeileis, Kleiber & Jackman 2008, §2.3).

With :math:`\pi` the probability of a zero (``zero_probability``, the last parameter; a learned
constant) and :math:`p_c` the count component of mean :math:`\mu = E e^{f}` (log link,
exposure :math:`E`),

.. math::
   p(0) = \pi, \qquad
   p(y) = (1 - \pi)\,\frac{p_c(y \mid \mu)}{1 - p_c(0 \mid \mu)} \quad (y = 1, 2, \dots),

so :math:`f` enters the positive counts only, through the zero-truncated component. Write
:math:`u = -\log p_c(0)` (:math:`\mu` for the Poisson, :math:`r\log(1 + \mu/r)` for the negative
binomial of dispersion :math:`r`) and :math:`s = -u`. At a zero :math:`\ell = \log\pi` and its
:math:`f`-derivatives vanish; at :math:`y > 0`

.. math::
   \ell = \log(1 - \pi) + \ell_c - \log(1 - e^{-u}), \qquad
   \ell^{(k)} = \ell_c^{(k)} + T^{(k)}, \quad T = -\log(1 - e^{s}),

with :math:`T' = a s'`, :math:`T'' = a(1 + a) s'^2 + a s''`,
:math:`T''' = a(1 + a)(1 + 2a) s'^3 + 3a(1 + a) s' s'' + a s'''`, :math:`a = 1/(e^{u} - 1)`.
For the negative binomial, with :math:`p = \mu/(r + \mu)`, :math:`s' = -rp`,
:math:`s'' = -rp(1 - p)`, :math:`s''' = -rp(1 - p)(1 - 2p)`; the Poisson is its limit
:math:`r \to \infty` (:math:`p \to 0`, :math:`rp \to \mu`). Evaluated without the cancellations
of :math:`a \to \infty` at small :math:`\mu` through :math:`b = u/(e^u - 1)`,
:math:`c = 1 - b` (a series below :math:`u = 0.05`), :math:`g = rp/u`,
:math:`B = a\,rp = bg = 1 - d`, :math:`d = c + b(1 - g)`:

.. math::
   T' = -B, \qquad T'' = B(rp + p - d), \qquad
   T''' = B\left(d + (rp - d)(2d - rp - 3p) - 2p^2\right).

For the Poisson (:math:`g = 1`, :math:`d = c`) this is :math:`\ell' = y - \mu - b`
(:math:`y` less the truncated mean :math:`\mu/(1 - e^{-\mu})`) and
:math:`\ell'' = -(\mu + b)(1 - b)`, minus the variance of the zero-truncated Poisson:
log-concave in :math:`f`, as every truncated exponential family in its natural parameter. The
truncated negative binomial is not: at :math:`y = 1`, :math:`r = 0.5`, :math:`f = 3.48`,
:math:`\ell'' = +0.0154` (found positive for every :math:`r < 1` tried: :math:`1.5 \times
10^{-5}` at :math:`r = 0.9`, :math:`f = 9.5`; :math:`7.5 \times 10^{-9}` at :math:`r = 0.95`,
:math:`f = 16.4`; for integer :math:`r \ge 1`
:math:`\ell = (y - 1)f - y\log(r + \mu) - \log Q(\mu)` with :math:`Q` a polynomial of positive
coefficients is concave), and the dispersion is learned, so its Laplace mode takes the general
(whitened) Newton form, as the Student-t's and the zero-inflated likelihoods'.

In a component parameter :math:`\theta` (the dispersion :math:`r`) with
:math:`\sigma_k = \partial_\theta s^{(k)} / (rp)`: :math:`\partial_\theta T = B\sigma_0`,
:math:`\partial_\theta T' = -B\sigma_0(rp + B) + B\sigma_1`,
:math:`\partial_\theta T'' = B\sigma_0(rp + B)(rp + 2B) - 2B\sigma_1(rp + B)
- B\sigma_0(rp + B)(1 - p) + B\sigma_2`; for :math:`r`, :math:`\partial_r s = \log(1 - p) + p
= -S(\mu/r)`, :math:`S(x) = \log(1 + x) - x/(1 + x)` (a series below :math:`x = 0.05`),
:math:`\partial_r s' = -p^2`, :math:`\partial_r s'' = -2p^2(1 - p)`. In :math:`\pi`:
:math:`\partial_\pi\ell = 1/\pi` at a zero and :math:`-1/(1 - \pi)` above; :math:`\ell'` and
:math:`\ell''` do not depend on :math:`\pi`.

The zeros identify :math:`\pi` and the positive counts :math:`f`: training data without zeros
or without positive counts are refused (:meth:`_Hurdle.check_training`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.polynomial import polynomial as P
from scipy import stats
from scipy.special import betainc, expit, gammainc

from bayes_gp.latent.likelihoods import (
    LatentLikelihood,
    NegativeBinomial,
    Poisson,
    _CountWithZeroProbability,
    _decreasing_root,
    _size,
    poisson_draws,
)

__all__ = ["HurdlePoisson", "HurdleNegativeBinomial", "HURDLES", "log1mexp"]

_LOG2 = float(np.log(2.0))
#: Below this :math:`u`, :func:`_one_minus_ratio` sums its series.
_C_SERIES = 0.05
#: :math:`1 - u/(e^u - 1) = u/2 - u^2/12 + u^4/720 - u^6/30240 + u^8/1209600 - \dots`
#: (Bernoulli numbers); truncation error below 1e-15 relative for u < 0.05.
_C_COEFS = (0.0, 0.5, -1.0 / 12.0, 0.0, 1.0 / 720.0, 0.0, -1.0 / 30240.0, 0.0, 1.0 / 1209600.0)
#: Below this :math:`x`, :func:`_s_function` sums its series.
_S_SERIES = 0.05
#: :math:`\log(1 + x) - x/(1 + x) = \sum_{k \ge 2} (-1)^k (k - 1) x^k / k`, to k = 16
#: (truncation error below 1e-17 relative for x < 0.05).
_S_COEFS = (0.0, 0.0, *[(-1.0) ** k * (k - 1) / k for k in range(2, 17)])
#: Rounds of redrawing zeros before the inverse survival function
#: (:meth:`_Hurdle._positive_draws`).
_REDRAWS = 12


def log1mexp(x) -> np.ndarray:
    r""":math:`\log(1 - e^{x})` for :math:`x \le 0`, accurate everywhere: :math:`\log(-\mathrm{expm1}(x))`
    above :math:`-\log 2`, :math:`\mathrm{log1p}(-e^x)` below (Mächler 2012, *Accurately
    computing* :math:`\log(1 - \exp(-|a|))`, the Rmpfr package's note)."""
    x = np.asarray(x, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > -_LOG2, np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def _one_minus_ratio(u: np.ndarray) -> np.ndarray:
    r""":math:`c(u) = 1 - u/(e^u - 1) \in [0, 1)` for :math:`u \ge 0`, without the cancellation
    at small :math:`u` (series below :data:`_C_SERIES`)."""
    u = np.asarray(u, float)
    small = u < _C_SERIES
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        direct = 1.0 - u / np.expm1(u)
    return np.where(small, P.polyval(np.where(small, u, 0.0), _C_COEFS),
                    np.where(u > 700.0, 1.0, direct))  # fmt: skip


def _s_function(xlog: np.ndarray) -> np.ndarray:
    r""":math:`S(x) = \log(1 + x) - x/(1 + x) \ge 0` at :math:`x = e^{\text{xlog}}`, without the
    cancellation at small :math:`x` (series below :data:`_S_SERIES`)."""
    xlog = np.asarray(xlog, float)
    small = xlog < np.log(_S_SERIES)
    x = np.exp(np.where(small, xlog, -np.inf))
    return np.where(small, P.polyval(x, _S_COEFS), np.logaddexp(0.0, xlog) - expit(xlog))


@dataclass(frozen=True)
class _ZeroMass:
    r"""The component's zero probability at latent values: :math:`u = -\log p_c(0)`,
    :math:`\log u`, :math:`rp = -\partial_f s`, :math:`p` (:math:`s'' = -rp(1 - p)`) and
    :math:`1 - g = 1 - rp/u`."""

    u: np.ndarray
    log_u: np.ndarray
    rp: np.ndarray
    p: np.ndarray
    h: np.ndarray


class _Hurdle(_CountWithZeroProbability):
    r"""A zero-truncated count component (:attr:`component`: Poisson, negative binomial) for
    the positive counts and a zero of probability :math:`\pi` (``zero_probability``, the last
    parameter); the model, its derivatives and their evaluation in the module docstring."""

    log_concave = False  # the truncated negative binomial's W < 0 (module docstring)

    probability_name = "zero_probability"

    @property
    def family(self) -> str:
        """The likelihood's name in :data:`~bayes_gp.latent.model.LIKELIHOODS`."""
        return next(name for name, cls in HURDLES.items() if isinstance(self, cls))

    def check_training(self) -> None:
        r"""Refuse training data without zeros or without positive counts: the zeros alone
        inform :math:`\pi` (without them its maximum is at 0, its posterior the prior's shape
        pushed to the boundary) and the positive counts alone inform :math:`f`."""
        zeros = int(np.sum(self._zero))
        if zeros == 0:
            raise ValueError(
                f"the {self.family} likelihood needs zeros in `y` (it has none, {self.n} "
                "positive counts): the zero probability `zero_probability` is estimated from "
                "the zeros alone and is not identified without them (its maximum lies at 0). "
                f"Use likelihood={self.family.removeprefix('hurdle_')!r} for counts without "
                "zeros"
            )
        if zeros == self.n:
            raise ValueError(
                f"the {self.family} likelihood needs positive counts in `y` (all {self.n} are "
                "0): the latent f enters the positive counts alone and is not identified "
                "without them"
            )

    # ---------------------------------------------------------------- component pieces
    def _zero_mass(self, eta: np.ndarray, cphi) -> _ZeroMass:
        """:class:`_ZeroMass` at the log means ``eta`` (log exposure included)."""
        raise NotImplementedError

    def _zero_mass_phi(self, eta: np.ndarray, cphi, z: _ZeroMass) -> list[tuple]:
        r"""Per component parameter, :math:`(\sigma_0, \sigma_1, \sigma_2)`."""
        return []

    def _u(self, mu: np.ndarray, cphi) -> np.ndarray:
        r""":math:`u = -\log p_c(0)` at means ``mu`` (parameters may be per-draw arrays)."""
        raise NotImplementedError

    def _excess(self, mu: np.ndarray, cphi) -> np.ndarray:
        r"""The component's :math:`\mathrm{Var}_c/\mu - 1` (:math:`\mu/r`, or 0)."""
        raise NotImplementedError

    def _sf(self, k: np.ndarray, mu: np.ndarray, cphi) -> np.ndarray:
        r"""The component's :math:`P_c(Y > k)` at means ``mu``."""
        raise NotImplementedError

    # ---------------------------------------------------------------- parameters
    def _truncation(self, f, cphi):
        """``(z, c, B, d, log(1 - e^{-u}))`` at latent values ``f``."""
        z = self._zero_mass(np.asarray(f, float) + self._offset, cphi)
        c = _one_minus_ratio(z.u)
        b = 1.0 - c
        d = c + b * z.h
        with np.errstate(divide="ignore", invalid="ignore"):
            log_pos = np.where(z.u < _LOG2, z.log_u - z.u - np.log1p(-c), log1mexp(-z.u))
        return z, c, 1.0 - d, d, log_pos

    # ---------------------------------------------------------------- density
    def log_density(self, f, phi=()):
        cphi, pi = self._split(phi)
        l0 = self._base.log_density(f, cphi)
        _z, _c, _B, _d, log_pos = self._truncation(f, cphi)
        return np.where(self._zero, np.log(pi), np.log1p(-pi) + l0 - log_pos)

    def derivatives(self, f, phi=()):
        cphi, pi = self._split(phi)
        l0, a1, a2, a3 = self._base.derivatives(f, cphi)
        z, _c, B, d, log_pos = self._truncation(f, cphi)
        rp, p = z.rp, z.p
        zero = self._zero
        with np.errstate(over="ignore", invalid="ignore"):  # B = 0 (mu huge): T'' = T''' = 0
            t2 = np.where(B > 0, B * (rp + p - d), 0.0)
            t3 = np.where(B > 0, B * (d + (rp - d) * (2.0 * d - rp - 3.0 * p) - 2.0 * p * p), 0.0)
        logp = np.where(zero, np.log(pi), np.log1p(-pi) + l0 - log_pos)
        d1, d2, d3 = (np.where(zero, 0.0, a + t) for a, t in ((a1, -B), (a2, t2), (a3, t3)))
        return logp, d1, d2, d3

    def phi_derivatives(self, f, phi=()):
        cphi, pi = self._split(phi)
        b0, b1, b2 = self._base.phi_derivatives(f, cphi)
        z, _c, B, _d, _log_pos = self._truncation(f, cphi)
        rp, p = z.rp, z.p
        zero = self._zero
        rows0, rows1, rows2 = [], [], []
        for j, (s0, s1, s2) in enumerate(self._zero_mass_phi(np.asarray(f, float) + self._offset,
                                                             cphi, z)):  # fmt: skip
            q = rp + B
            rows0.append(np.where(zero, 0.0, b0[j] + B * s0))
            rows1.append(np.where(zero, 0.0, b1[j] - B * s0 * q + B * s1))
            rows2.append(np.where(zero, 0.0, b2[j] + B * s0 * q * (rp + 2.0 * B)
                                  - 2.0 * B * s1 * q - B * s0 * q * (1.0 - p) + B * s2))  # fmt: skip
        shape = np.broadcast_shapes(np.shape(f), zero.shape)
        rows0.append(np.broadcast_to(np.where(zero, 1.0 / pi, -1.0 / (1.0 - pi)), shape))
        rows1.append(np.zeros(shape))
        rows2.append(np.zeros(shape))
        return np.stack(rows0), np.stack(rows1), np.stack(rows2)

    # ---------------------------------------------------------------- response
    def _truncated_moments(self, f, cphi, size):
        r"""The zero-truncated component's mean :math:`m_t = \mu/(1 - e^{-u})` and variance
        :math:`V_t = m_t(1 - \mu/u + (\mu/u)c + \mathrm{Var}_c/\mu - 1)` (from
        :math:`E_c[y^2]/(1 - e^{-u}) - m_t^2`, written without cancellation for the Poisson)."""
        mu = _size(size) * np.exp(np.asarray(f, float))
        u = self._u(mu, cphi)
        c = _one_minus_ratio(u)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(u > 0, mu / u, 1.0)  # mu / u -> 1 as mu -> 0
        m_t = mu + ratio * (1.0 - c)
        v_t = m_t * ((1.0 - ratio) + ratio * c + self._excess(mu, cphi))
        return m_t, v_t

    def response_mean(self, f, phi=(), size=None):
        r""":math:`(1 - \pi)\,\mu/(1 - p_c(0))`, :math:`\mu = E e^f`."""
        cphi, pi = self._split_arrays(phi)
        return (1.0 - pi) * self._truncated_moments(f, cphi, size)[0]

    def response_variance(self, f, phi=(), size=None):
        r""":math:`(1 - \pi)V_t + \pi(1 - \pi)m_t^2` (the law of total variance over the hurdle;
        :math:`m_t`, :math:`V_t` the truncated component's mean and variance)."""
        cphi, pi = self._split_arrays(phi)
        m_t, v_t = self._truncated_moments(f, cphi, size)
        return (1.0 - pi) * v_t + pi * (1.0 - pi) * m_t * m_t

    def draw(self, f, phi, rng, size=None):
        r"""Zeros with probability :math:`\pi`, else the zero-truncated component's draws
        (:meth:`_positive_draws`)."""
        cphi, pi = self._split(phi)
        f = np.asarray(f, float)
        mu = np.broadcast_to(_size(size) * np.exp(f), f.shape)
        y = self._positive_draws(mu, cphi, rng)
        return np.where(rng.uniform(size=f.shape) < pi, 0.0, y)

    def _positive_draws(self, mu: np.ndarray, cphi, rng: np.random.Generator) -> np.ndarray:
        r"""Zero-truncated component draws: component draws with the zeros drawn again
        (:data:`_REDRAWS` rounds), the rest (means where a zero is likely) by the inverse
        survival function at :math:`V \sim U(0, 1 - p_c(0))`."""
        with np.errstate(divide="ignore"):
            f = np.log(mu)
        y = self._base.draw(f, cphi, rng)
        for _ in range(_REDRAWS):
            zero = y == 0
            if not zero.any():
                return y
            y[zero] = self._base.draw(f[zero], cphi, rng)
        zero = y == 0
        if zero.any():
            v = rng.uniform(size=int(zero.sum())) * -np.expm1(-self._u(mu[zero], cphi))
            y[zero] = np.maximum(self._isf(v, mu[zero], cphi), 1.0)
        return y

    def _isf(self, v: np.ndarray, mu: np.ndarray, cphi) -> np.ndarray:
        """The component's inverse survival function."""
        raise NotImplementedError

    def _positive_cdf(self, k, f, cphi, size):
        r""":math:`P(Y \le k \mid Y > 0) = 1 - P_c(Y > k)/(1 - p_c(0))` for :math:`k \ge 1`."""
        mu = _size(size) * np.exp(np.asarray(f, float))
        one_minus_p0 = -np.expm1(-self._u(mu, cphi))
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(one_minus_p0 > 0, self._sf(np.maximum(k, 1.0), mu, cphi)
                             / one_minus_p0, 0.0)  # fmt: skip
        return 1.0 - np.minimum(ratio, 1.0)

    def cdf(self, f, phi=()):
        return (self.cdf_values(self.y - 1.0, f, phi, self.exposure),
                self.cdf_values(self.y, f, phi, self.exposure))  # fmt: skip

    def cdf_values(self, y, f, phi=(), size=None):
        r""":math:`0` below 0, :math:`\pi` on :math:`[0, 1)`, then
        :math:`\pi + (1 - \pi)(1 - P_c(Y > k)/(1 - p_c(0)))`, :math:`k = \lfloor y \rfloor`
        (:math:`P_c(Y > k)` the regularised incomplete gamma :math:`P(k + 1, \mu)` or beta
        :math:`I_p(k + 1, r)` function)."""
        cphi, pi = self._split_arrays(phi)
        k = np.floor(np.asarray(y, float))
        G = self._positive_cdf(k, f, cphi, size)
        return np.where(k < 0, 0.0, np.where(k < 1, pi, pi + (1.0 - pi) * G))

    def latent_threshold(self, y, u, phi=(), size=None):
        r"""The threshold :math:`T` with :math:`P(Y \le y \mid f) = P(T > f)`, given
        :math:`T < \infty`: :math:`T = +\infty` with probability :math:`\pi` from
        :math:`y \ge 0` (:meth:`threshold_atom`: a zero whatever :math:`f`), and otherwise

        * at :math:`y \in [0, 1)`, :math:`-\infty` (:math:`P(Y \le y \mid f) = \pi` for
          every :math:`f`; :meth:`threshold_scale` is infinite there, so the predictive CDF is
          taken over :math:`f`, where it is exactly :math:`\pi`);
        * from :math:`y \ge 1`, the root :math:`t` of :math:`P(Y \le k \mid Y > 0, f = t) =
          1 - u` (decreasing in :math:`t`: the truncated component is stochastically increasing
          in :math:`\mu`), by :func:`~bayes_gp.latent.likelihoods._decreasing_root` from the
          component's own threshold, to :math:`10^{-10}`.

        The atom is left to :meth:`threshold_atom` so that every quadrature node of the
        predictive CDF lies on the finite part (with the atom inside the quantile function, as
        the zero-inflated likelihoods have it, a zero probability of 0.96 leaves the positive
        counts the nodes below :math:`u = 0.04`, and 94% bounds came out one count off against
        :math:`10^6` draws)."""
        cphi, _pi = self._split_arrays(phi)
        y, u = np.asarray(y, float), np.asarray(u, float)
        sz = np.asarray(_size(size), float)
        shape = np.broadcast_shapes(y.shape, u.shape, sz.shape, *(np.shape(c) for c in cphi))
        yb, ub, szb = (np.broadcast_to(a, shape).ravel() for a in (y, u, sz))
        cb = [np.broadcast_to(c, shape).ravel() for c in cphi]
        k = np.floor(yb)
        out = np.full(k.shape, -np.inf)
        todo = np.flatnonzero(k >= 1)
        if todo.size:
            kt, ut, st = k[todo], ub[todo], szb[todo]
            ct = [c[todo] for c in cb]
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                t0 = self._base.latent_threshold(kt, ut, ct, st)
                width = self._base.threshold_scale(kt, ct, st) + 0.5
            t0 = np.where(np.isfinite(t0), t0, 0.0)

            def excess(t, idx):  # P(Y <= k | Y > 0, t) - (1 - u), decreasing in t
                return (self._positive_cdf(kt[idx], t, [c[idx] for c in ct], st[idx])
                        - (1.0 - ut[idx]))  # fmt: skip

            out[todo] = _decreasing_root(excess, t0, width)
        return out.reshape(shape)

    def threshold_atom(self, y, phi=()):
        r""":math:`\pi` from :math:`y \ge 0` (a zero, below every :math:`y \ge 0`, whatever
        :math:`f`), 0 below."""
        _cphi, pi = self._split_arrays(phi)
        return np.where(np.floor(np.asarray(y, float)) >= 0, pi, 0.0)

    def threshold_scale(self, y, phi=(), size=None):
        """The component's from :math:`y \\ge 1`; infinite below (module docstring of
        :meth:`latent_threshold`)."""
        cphi, _pi = self._split_arrays(phi)
        k = np.floor(np.asarray(y, float))
        with np.errstate(invalid="ignore"):
            scale = self._base.threshold_scale(np.maximum(k, 1.0), cphi, size)
        return np.where(k < 1, np.inf, scale)


@dataclass(frozen=True, eq=False)
class HurdlePoisson(_Hurdle, LatentLikelihood):
    r"""Hurdle Poisson counts (Mullahy 1986), log link, exposure :math:`E_i`,
    ``phi = [zero_probability]``:

    .. math::
       p(0) = \pi, \qquad
       p(y) = (1 - \pi)\,\frac{\mu^y e^{-\mu}}{y!\,(1 - e^{-\mu})} \;\; (y > 0), \qquad
       \mu = E e^{f},

    :math:`E[y] = (1 - \pi)\mu/(1 - e^{-\mu})`. At :math:`y > 0`, with
    :math:`b = \mu/(e^\mu - 1)`: :math:`\ell' = y - \mu - b`,
    :math:`\ell'' = -(\mu + b)(1 - b)` (minus the zero-truncated Poisson's variance: log-concave,
    so the Laplace mode takes the stable Newton form), :math:`\ell''' = -\mu(1 - b)
    - b(1 - \mu - b)(1 - \mu - 2b)`; :math:`\log(1 - e^{-\mu})` by :func:`log1mexp` and
    :math:`1 - b` by its series at small :math:`\mu` (module docstring). Zeros identify
    :math:`\pi`, the positive counts :math:`f` (Zeileis, Kleiber & Jackman 2008, §2.3).
    """

    log_concave = True  # W = (mu + b)(1 - b) >= 0: the truncated Poisson's variance

    exposure: np.ndarray | None = None
    component = Poisson

    def _zero_mass(self, eta, cphi):
        mu = np.exp(eta)
        zero = np.zeros_like(mu)
        return _ZeroMass(mu, eta, mu, zero, zero)

    def _u(self, mu, cphi):
        return mu

    def _excess(self, mu, cphi):
        return 0.0

    def _sf(self, k, mu, cphi):
        return gammainc(k + 1.0, mu)

    def _isf(self, v, mu, cphi):
        return stats.poisson.isf(v, mu)

    def _positive_draws(self, mu, cphi, rng):
        r"""Exact zero-truncated Poisson draws by the first arrival of a Poisson process of
        rate :math:`\mu` on :math:`[0, 1]` given one arrival at least:
        :math:`t_1 = -\log(1 - U(1 - e^{-\mu}))/\mu`, then :math:`y = 1 +
        \mathrm{Poisson}(\mu(1 - t_1))`."""
        mu = np.asarray(mu, float)
        with np.errstate(divide="ignore", invalid="ignore"):
            t1 = -np.log1p(rng.uniform(size=mu.shape) * np.expm1(-mu)) / mu
        rest = np.where(mu > 0, mu * (1.0 - np.clip(np.nan_to_num(t1, nan=1.0), 0.0, 1.0)), 0.0)
        return 1.0 + poisson_draws(rng, rest)

    def with_data(self, y, size=None):
        return HurdlePoisson(y, exposure=size)


@dataclass(frozen=True, eq=False)
class HurdleNegativeBinomial(_Hurdle, LatentLikelihood):
    r"""Hurdle negative-binomial counts (Mullahy 1986), log link, exposure :math:`E_i`,
    ``phi = [dispersion, zero_probability]``: :math:`p(0) = \pi`, and for :math:`y > 0`

    .. math::
       p(y) = (1 - \pi)\,\frac{\mathrm{NB}(y \mid \mu, r)}{1 - (r/(r + \mu))^r}, \qquad
       \mu = E e^{f}

    (:class:`~bayes_gp.latent.likelihoods.NegativeBinomial`, variance :math:`\mu + \mu^2/r`;
    Zeileis, Kleiber & Jackman 2008, §2.3, with the negative binomial count part).
    :math:`E[y] = (1 - \pi)\mu/(1 - (r/(r + \mu))^r)`. Not log-concave in :math:`f` for
    :math:`r < 1` (module docstring), so the Laplace mode takes the general Newton form.
    """

    exposure: np.ndarray | None = None
    component = NegativeBinomial

    def _zero_mass(self, eta, cphi):
        (r,) = cphi
        xl = eta - np.log(r)  # log(mu / r)
        sp = np.logaddexp(0.0, xl)  # log(1 + mu / r)
        p = expit(xl)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_sp = np.where(xl < -30.0, xl - 0.5 * np.exp(xl), np.log(sp))
            h = np.where(sp > 0, _s_function(xl) / sp, 0.0)  # (u - rp) / u = S(x) / log(1 + x)
        return _ZeroMass(r * sp, np.log(r) + log_sp, r * p, p, h)

    def _zero_mass_phi(self, eta, cphi, z):
        (r,) = cphi
        with np.errstate(divide="ignore", invalid="ignore"):
            s0 = np.where(z.rp > 0, -_s_function(eta - np.log(r)) / z.rp, 0.0)
        p = z.p
        return [(s0, -p / r, -2.0 * p * (1.0 - p) / r)]

    def _u(self, mu, cphi):
        (r,) = cphi
        with np.errstate(divide="ignore"):
            return r * np.logaddexp(0.0, np.log(mu) - np.log(r))

    def _excess(self, mu, cphi):
        (r,) = cphi
        return mu / r

    def _sf(self, k, mu, cphi):
        (r,) = cphi
        with np.errstate(divide="ignore"):
            p = expit(np.log(mu) - np.log(r))
        return betainc(k + 1.0, r, p)

    def _isf(self, v, mu, cphi):
        (r,) = cphi
        return stats.nbinom.isf(v, r, r / (r + mu))

    def with_data(self, y, size=None):
        return HurdleNegativeBinomial(y, exposure=size)


#: The hurdle likelihoods by their names in :data:`~bayes_gp.latent.model.LIKELIHOODS`.
HURDLES = {"hurdle_poisson": HurdlePoisson, "hurdle_negative_binomial": HurdleNegativeBinomial}
