r"""Observation models of latent GPs, with the derivatives the Laplace approximation needs.

Each likelihood is a small immutable object holding the data (``y`` and, where they apply,
``trials`` or ``exposure``) and evaluating, per observation,

.. math::
   \ell_i(f_i, \phi) = \log p(y_i \mid f_i, \phi), \quad
   \ell_i', \; \ell_i'', \; \ell_i''' \;\; (\text{derivatives in } f_i)

(R&W §3.4, eqs. 3.15–3.16 and Table 3.1 for the binary models), and for each of its own
parameters :math:`\phi_j` (dispersion, degrees of freedom, scale):
:math:`\partial \ell_i / \partial\phi_j`, :math:`\partial \ell_i' / \partial\phi_j` and
:math:`\partial \ell_i'' / \partial\phi_j`, which the gradient of the Laplace evidence with respect
to :math:`\phi` uses (:mod:`bayes_gp.latent.laplace`; Vanhatalo, Jylänki & Vehtari 2009, §3;
Rue, Martino & Chopin 2009). Parameters are on their natural (positive) scale; transforms belong
to the model.

Only the Student-t likelihood is not log-concave: its :math:`W = -\ell''` is negative for
residuals larger than :math:`\sqrt{\nu}\,\sigma`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import stats
from scipy.special import (
    betainc,
    betaincinv,
    digamma,
    erfcx,
    expit,
    gammaincc,
    gammaincinv,
    gammaln,
    log_ndtr,
    logit,
    ndtr,
    ndtri,
    polygamma,
    stdtr,
    stdtrit,
)

__all__ = [
    "LatentLikelihood",
    "Bernoulli",
    "Binomial",
    "Poisson",
    "NegativeBinomial",
    "StudentT",
    "Gaussian",
]

_LOG_2PI = float(np.log(2.0 * np.pi))


def normal_hazard(z: np.ndarray) -> np.ndarray:
    r"""The inverse Mills ratio :math:`N(z)/\Phi(z) = \sqrt{2/\pi}\,/\,\mathrm{erfcx}(-z/\sqrt2)`.

    Finite and accurate for every ``z``: the Gaussian factors cancel analytically, so it stays
    exact where :math:`\exp(-z^2/2 - \log\Phi(z))` cancels catastrophically (``inf - inf`` for
    :math:`z \lesssim -10^{154}`), and tends to 0 for large positive ``z``.
    """
    with np.errstate(over="ignore"):  # erfcx -> inf for very negative z gives h = 0, the limit
        return np.sqrt(2.0 / np.pi) / erfcx(-np.asarray(z, float) / np.sqrt(2.0))


#: Poisson means above which :func:`poisson_draws` draws from the normal approximation.
POISSON_NORMAL_ABOVE = 1e12


def poisson_draws(rng: np.random.Generator, mu) -> np.ndarray:
    r"""Poisson draws of means ``mu`` (floats), for any mean.

    NumPy's sampler refuses means above about :math:`9 \times 10^{18}` (``lam value too
    large``), which a latent GP's prior reaches on the log scale (:math:`f > 43`) in prior
    predictive checks; above :data:`POISSON_NORMAL_ABOVE` the draw is
    :math:`\operatorname{round}(N(\mu, \mu))`, whose distribution differs from the Poisson's by
    :math:`O(\mu^{-1/2}) \le 10^{-6}` in total variation; an infinite mean gives ``inf``.
    Below it (every realistic count) the draws are NumPy's, the same stream as ``rng.poisson``.
    """
    mu = np.asarray(mu, dtype=float)
    big = mu > POISSON_NORMAL_ABOVE
    if not big.any():
        return rng.poisson(mu).astype(float)
    out = rng.poisson(np.where(big, 0.0, mu)).astype(float)
    with np.errstate(invalid="ignore"):
        out[big] = np.round(rng.normal(mu[big], np.sqrt(mu[big])))
    out[np.isinf(mu)] = np.inf
    return out


def _as_finite_vector(name: str, x) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.ndim != 1:
        raise ValueError(f"`{name}` must be one-dimensional, got shape {a.shape}")
    if a.size == 0:
        raise ValueError(f"`{name}` is empty")
    bad = ~np.isfinite(a)
    if np.any(bad):
        raise ValueError(
            f"`{name}` has {int(bad.sum())} NaN or infinite value(s), first at index "
            f"{int(np.argmax(bad))}"
        )
    return a


def _check_counts(name: str, y: np.ndarray) -> None:
    if np.any(y < 0):
        i = int(np.argmax(y < 0))
        raise ValueError(f"`{name}` must be non-negative counts; y[{i}] = {y[i]:g}")
    frac = y != np.round(y)
    if np.any(frac):
        i = int(np.argmax(frac))
        raise ValueError(f"`{name}` must be integer counts; y[{i}] = {y[i]:g} is not an integer")


def _check_positive(name: str, x: np.ndarray) -> None:
    if np.any(x <= 0):
        i = int(np.argmax(x <= 0))
        raise ValueError(f"`{name}` must be positive; {name}[{i}] = {x[i]:g}")


def _phi_arrays(lik: LatentLikelihood, phi) -> list[np.ndarray]:
    """The parameters ``phi`` as float arrays (one value, or one per posterior draw, each
    broadcasting against the latent values)."""
    if len(phi) != len(lik.param_names):
        raise ValueError(
            f"{type(lik).__name__} takes {len(lik.param_names)} parameter(s) "
            f"{lik.param_names}, got {len(phi)}"
        )
    return [np.asarray(p, float) for p in phi]


def _size(size) -> np.ndarray | float:
    return 1.0 if size is None else np.asarray(size, float)


def _check_phi(lik: LatentLikelihood, phi) -> np.ndarray:
    p = np.asarray(phi, dtype=float).reshape(-1)
    if p.size != len(lik.param_names):
        raise ValueError(
            f"{type(lik).__name__} takes {len(lik.param_names)} parameter(s) "
            f"{lik.param_names}, got {p.size}"
        )
    return p


@dataclass(frozen=True, eq=False)
class LatentLikelihood:
    """Base class: data ``y`` and the interface used by :mod:`bayes_gp.latent.laplace`.

    Subclasses implement :meth:`derivatives` and, when they have parameters, :meth:`phi_derivatives`.
    Instances compare by identity (they hold data arrays).
    """

    y: np.ndarray
    param_names: tuple[str, ...] = field(default=(), init=False)

    @property
    def n(self) -> int:
        return int(self.y.shape[0])

    #: Whether :math:`W = -\\ell'' \\ge 0` for every ``f`` and ``phi``. It selects the form of
    #: Newton's method in :func:`bayes_gp.latent.laplace.laplace`: the stable
    #: :math:`B = I + W^{1/2} K W^{1/2}` of R&W Algorithm 3.1 when True, the whitened form, which
    #: allows :math:`W < 0`, when False. Subclasses declare it; the default is the general form.
    log_concave = False

    def derivatives(self, f: np.ndarray, phi=()) -> tuple[np.ndarray, ...]:
        """``(logp, d1, d2, d3)``: :math:`\\ell_i` and its first three ``f``-derivatives."""
        raise NotImplementedError

    def phi_derivatives(self, f: np.ndarray, phi=()) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Arrays of shape ``(n_phi, n)``: :math:`\\partial_{\\phi_j}` of ``logp``, ``d1``, ``d2``."""
        z = np.zeros((0, self.n))
        return z, z, z

    def log_lik(self, f: np.ndarray, phi=()) -> float:
        """:math:`\\sum_i \\log p(y_i \\mid f_i, \\phi)`."""
        return float(np.sum(self.derivatives(np.asarray(f, float), phi)[0]))

    #: ``"binary"``, ``"count"`` or ``"continuous"``: what ``y`` holds.
    outcome = "continuous"
    #: The data-size argument of :meth:`response_mean` and :meth:`draw` (``"exposure"``,
    #: ``"trials"``) or ``""`` when there is none.
    size_name = ""

    def sizes(self) -> np.ndarray | None:
        """The training data's exposure or trials (``None`` when the likelihood has none)."""
        return None

    def response_mean(self, f: np.ndarray, phi=(), size=None) -> np.ndarray:
        """:math:`E[y \\mid f, \\phi]` (the expected count, probability, …) at latent values
        ``f`` with exposure or trials ``size`` (default 1)."""
        raise NotImplementedError

    def response_variance(self, f: np.ndarray, phi=(), size=None) -> np.ndarray:
        r""":math:`\mathrm{Var}[y \mid f, \phi]` at latent values ``f`` with exposure or trials
        ``size`` (default 1); infinite where the distribution has no variance."""
        raise NotImplementedError

    def draw(self, f: np.ndarray, phi, rng: np.random.Generator, size=None) -> np.ndarray:
        """One draw of :math:`y \\mid f, \\phi` per entry of ``f`` (any shape)."""
        raise NotImplementedError

    def cdf(self, f: np.ndarray, phi=()) -> tuple[np.ndarray, np.ndarray]:
        """``(below, at)``: :math:`P(Y_i < y_i \\mid f_i, \\phi)` and
        :math:`P(Y_i \\le y_i \\mid f_i, \\phi)` at the likelihood's own data ``y`` (and
        exposure or trials), for latent values ``f`` of shape ``(..., n)``; equal for a
        continuous outcome. The predictive CDF of held-out data integrates them over
        :math:`f` (:func:`bayes_gp.latent.predictive.predictive_cdf`)."""
        raise NotImplementedError

    def with_data(self, y, size=None) -> LatentLikelihood:
        """The same observation model for other data ``y`` (held-out points), with their exposure
        or trials ``size``."""
        raise NotImplementedError

    def cdf_values(self, y, f, phi=(), size=None) -> np.ndarray:
        r""":math:`P(Y \le y \mid f, \phi)` at any values ``y`` (broadcast against the latent
        values ``f``), exposure or trials ``size`` (default 1): the observation model's CDF that
        :func:`bayes_gp.latent.predictive.predictive_quantiles` integrates over :math:`f`.
        Each parameter in ``phi`` may be an array broadcasting against ``f`` (one value per
        posterior draw)."""
        raise NotImplementedError

    def ppf_values(self, q: float, f, phi=()) -> np.ndarray:
        r"""The ``q``-quantile of :math:`y \mid f, \phi` (continuous outcomes only: the bracket
        of the predictive quantile's root search)."""
        raise NotImplementedError

    def latent_threshold(self, y, u, phi=(), size=None) -> np.ndarray:
        r"""The latent value :math:`t` with :math:`P(Y \le y \mid f = t, \phi) = 1 - u`.

        :math:`P(Y \le y \mid f)` decreases in :math:`f` from 1 to 0 (every likelihood here is
        stochastically increasing in :math:`f`): it is :math:`P(T > f)` for a random threshold
        :math:`T` whose quantile function this is, so that under :math:`f \sim N(\mu, s^2)`,
        :math:`P(Y \le y) = E_T[\Phi((T - \mu)/s)]` (the integral
        :func:`bayes_gp.latent.predictive.predictive_quantiles` takes over :math:`T` where
        :math:`s` is wider than :math:`T`'s spread, :meth:`threshold_scale`). ``y`` inside the
        support (``0 <= y < max_value``)."""
        raise NotImplementedError

    def threshold_scale(self, y, phi=(), size=None) -> np.ndarray:
        """The spread (standard deviation, or scale) of :meth:`latent_threshold`'s :math:`T`."""
        raise NotImplementedError

    def max_value(self, size=None) -> np.ndarray | float:
        """The largest value :math:`y` can take: the trials ``size`` of a binomial, 1 for a
        binary outcome, ``inf`` otherwise."""
        return np.inf


@dataclass(frozen=True, eq=False)
class Bernoulli(LatentLikelihood):
    r"""Binary outcomes :math:`y_i \in \{0, 1\}` with :math:`p(y_i = 1 \mid f_i) = \sigma(f_i)`.

    ``link="logit"``: :math:`\sigma` the logistic function (R&W eq. 3.15);
    ``link="probit"``: :math:`\sigma = \Phi` (R&W eq. 3.16), evaluated with the erfcx-based hazard
    of :func:`normal_hazard` so that it stays finite in the tails. With :math:`s = 2y - 1`,
    :math:`\ell = \log\sigma(s f)`.
    """

    log_concave = True  # W = sigma(f)(1 - sigma(f)) (logit), h (z + h) in [0, 1] (probit)

    link: str = "logit"

    def __post_init__(self):
        y = _as_finite_vector("y", self.y)
        if not np.all((y == 0) | (y == 1)):
            i = int(np.argmax((y != 0) & (y != 1)))
            raise ValueError(f"Bernoulli `y` must be 0 or 1; y[{i}] = {y[i]:g}")
        if self.link not in ("logit", "probit"):
            raise ValueError(f"`link` must be 'logit' or 'probit', got {self.link!r}")
        object.__setattr__(self, "y", y)

    def derivatives(self, f, phi=()):
        s = 2.0 * self.y - 1.0
        if self.link == "logit":
            pi = expit(f)
            logp = -np.logaddexp(0.0, -s * f)
            d2 = -pi * (1.0 - pi)
            return logp, self.y - pi, d2, d2 * (1.0 - 2.0 * pi)
        z = s * f
        h = normal_hazard(z)
        d2 = -np.clip(h * (z + h), 0.0, 1.0)
        d3 = s * h * (2.0 * h * h + 3.0 * z * h + z * z - 1.0)
        return log_ndtr(z), s * h, d2, d3

    outcome = "binary"

    def response_mean(self, f, phi=(), size=None):
        return expit(f) if self.link == "logit" else ndtr(f)

    def response_variance(self, f, phi=(), size=None):
        p = self.response_mean(f)
        return p * (1.0 - p)

    def draw(self, f, phi, rng, size=None):
        return (rng.uniform(size=np.shape(f)) < self.response_mean(f)).astype(float)

    def cdf(self, f, phi=()):
        q0 = 1.0 - self.response_mean(f)  # P(Y = 0)
        at = np.where(self.y == 1, 1.0, q0)
        return np.where(self.y == 1, q0, 0.0), at

    def cdf_values(self, y, f, phi=(), size=None):
        r""":math:`0` below 0, :math:`1 - \sigma(f)` on :math:`[0, 1)`, 1 from 1."""
        y = np.asarray(y, float)
        return np.where(y < 0, 0.0, np.where(y >= 1, 1.0, 1.0 - self.response_mean(f)))

    def max_value(self, size=None):
        return 1.0

    def latent_threshold(self, y, u, phi=(), size=None):
        r""":math:`\sigma^{-1}(u)` (``logit`` or probit)."""
        return logit(u) if self.link == "logit" else ndtri(u)

    def threshold_scale(self, y, phi=(), size=None):
        r"""The logistic distribution's sd :math:`\pi/\sqrt3`, or 1 (probit)."""
        return np.full(np.shape(y), np.pi / np.sqrt(3.0) if self.link == "logit" else 1.0)

    def with_data(self, y, size=None):
        return Bernoulli(y, link=self.link)


@dataclass(frozen=True, eq=False)
class Binomial(LatentLikelihood):
    r"""Successes :math:`y_i` out of :math:`N_i` trials, logit link.

    .. math::
       \ell_i = \log\binom{N_i}{y_i} + y_i f_i - N_i \log(1 + e^{f_i}), \quad
       \ell' = y - N\pi, \; \ell'' = -N\pi(1-\pi), \; \ell''' = -N\pi(1-\pi)(1-2\pi),

    with :math:`\pi = \sigma(f)`.
    """

    log_concave = True  # W = N pi (1 - pi) >= 0

    trials: np.ndarray = None  # type: ignore[assignment]

    def __post_init__(self):
        y = _as_finite_vector("y", self.y)
        if self.trials is None:
            raise ValueError("Binomial needs `trials` (the number of trials per observation)")
        N = _as_finite_vector("trials", np.broadcast_to(np.asarray(self.trials, float), y.shape))
        _check_counts("y", y)
        _check_counts("trials", N)
        if np.any(y > N):
            i = int(np.argmax(y > N))
            raise ValueError(f"successes above trials: y[{i}] = {y[i]:g} > trials[{i}] = {N[i]:g}")
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "trials", N.copy())
        const = gammaln(N + 1) - gammaln(y + 1) - gammaln(N - y + 1)
        object.__setattr__(self, "_const", const)

    def derivatives(self, f, phi=()):
        y, N = self.y, self.trials
        pi = expit(f)
        logp = self._const + y * f - N * np.logaddexp(0.0, f)
        d2 = -N * pi * (1.0 - pi)
        return logp, y - N * pi, d2, d2 * (1.0 - 2.0 * pi)

    outcome = "count"
    size_name = "trials"

    def sizes(self):
        return self.trials

    def response_mean(self, f, phi=(), size=None):
        return (1.0 if size is None else np.asarray(size, float)) * expit(f)

    def response_variance(self, f, phi=(), size=None):
        r""":math:`N \pi (1 - \pi)`, :math:`\pi = \sigma(f)`."""
        pi = expit(f)
        return (1.0 if size is None else np.asarray(size, float)) * pi * (1.0 - pi)

    def draw(self, f, phi, rng, size=None):
        N = np.broadcast_to(1 if size is None else np.asarray(size), np.shape(f))
        return rng.binomial(N.astype(np.int64), expit(f)).astype(float)

    def cdf(self, f, phi=()):
        pi = expit(f)
        return (stats.binom.cdf(self.y - 1, self.trials, pi),
                stats.binom.cdf(self.y, self.trials, pi))  # fmt: skip

    def cdf_values(self, y, f, phi=(), size=None):
        r""":math:`P(Y \le k) = I_{1-\pi}(N - k, k + 1)` (the regularised incomplete beta
        function) for :math:`0 \le k < N`, :math:`k = \lfloor y \rfloor`, :math:`\pi = \sigma(f)`;
        0 below 0 and 1 from :math:`N`."""
        k = np.floor(np.asarray(y, float))
        N = _size(size)
        inside = (k >= 0) & (k < N)
        with np.errstate(invalid="ignore"):
            F = betainc(np.where(inside, N - k, 1.0), np.where(inside, k + 1, 1.0), expit(-f))
        return np.where(k < 0, 0.0, np.where(k >= N, 1.0, F))

    def max_value(self, size=None):
        return _size(size)

    def latent_threshold(self, y, u, phi=(), size=None):
        r""":math:`\mathrm{logit}\, I^{-1}_u(k + 1, N - k)` (the logit of a
        :math:`\mathrm{Beta}(k + 1, N - k)` quantile)."""
        k = np.floor(np.asarray(y, float))
        return logit(betaincinv(k + 1.0, _size(size) - k, u))

    def threshold_scale(self, y, phi=(), size=None):
        r""":math:`\sqrt{\psi'(k + 1) + \psi'(N - k)}`, the sd of the logit of a Beta."""
        k = np.floor(np.asarray(y, float))
        return np.sqrt(polygamma(1, k + 1.0) + polygamma(1, np.maximum(_size(size) - k, 1.0)))

    def with_data(self, y, size=None):
        return Binomial(y, trials=1.0 if size is None else size)


class _LogLink:
    """Counts with a log link and exposure: :math:`E[y \\mid f] = E e^f`."""

    outcome = "count"
    size_name = "exposure"

    def sizes(self):
        return self.exposure

    def response_mean(self, f, phi=(), size=None):
        return (1.0 if size is None else np.asarray(size, float)) * np.exp(f)


def _set_counts_and_exposure(lik) -> None:
    """Validate a count likelihood's ``y`` (non-negative integers) and ``exposure`` (positive,
    default 1) and store them with the log-exposure offset of the log link."""
    y = _as_finite_vector("y", lik.y)
    _check_counts("y", y)
    E = np.ones_like(y) if lik.exposure is None else np.asarray(lik.exposure, float)
    E = _as_finite_vector("exposure", np.broadcast_to(E, y.shape))
    _check_positive("exposure", E)
    object.__setattr__(lik, "y", y)
    object.__setattr__(lik, "exposure", E.copy())
    object.__setattr__(lik, "_offset", np.log(E))


@dataclass(frozen=True, eq=False)
class Poisson(_LogLink, LatentLikelihood):
    r"""Counts with log link and exposure :math:`E_i`: :math:`y_i \sim \mathrm{Poisson}(E_i e^{f_i})`.

    .. math::
       \ell_i = y_i\eta_i - e^{\eta_i} - \log y_i!, \quad \eta_i = f_i + \log E_i, \quad
       \ell' = y - \mu, \; \ell'' = \ell''' = -\mu, \; \mu = e^{\eta}.
    """

    log_concave = True  # W = mu > 0

    exposure: np.ndarray | None = None

    def __post_init__(self):
        _set_counts_and_exposure(self)
        object.__setattr__(self, "_const", -gammaln(self.y + 1))

    def derivatives(self, f, phi=()):
        eta = f + self._offset
        mu = np.exp(eta)
        return self._const + self.y * eta - mu, self.y - mu, -mu, -mu

    def response_variance(self, f, phi=(), size=None):
        """The Poisson variance, its mean :math:`E e^f`."""
        return self.response_mean(f, phi, size)

    def draw(self, f, phi, rng, size=None):
        return poisson_draws(rng, self.response_mean(f, phi, size))

    def cdf(self, f, phi=()):
        mu = self.response_mean(f, phi, self.exposure)
        return stats.poisson.cdf(self.y - 1, mu), stats.poisson.cdf(self.y, mu)

    def cdf_values(self, y, f, phi=(), size=None):
        r""":math:`P(Y \le k) = Q(k + 1, \mu)` (the regularised upper incomplete gamma
        function), :math:`k = \lfloor y \rfloor \ge 0`, :math:`\mu = E e^f`; 0 below 0."""
        k = np.floor(np.asarray(y, float))
        F = gammaincc(np.maximum(k, 0.0) + 1.0, self.response_mean(f, phi, size))
        return np.where(k < 0, 0.0, F)

    def latent_threshold(self, y, u, phi=(), size=None):
        r""":math:`\log P^{-1}(k + 1, u) - \log E` (the log of a :math:`\mathrm{Gamma}(k + 1)`
        quantile, less the log exposure)."""
        k = np.floor(np.asarray(y, float))
        return np.log(gammaincinv(k + 1.0, u)) - np.log(_size(size))

    def threshold_scale(self, y, phi=(), size=None):
        r""":math:`\sqrt{\psi'(k + 1)}`, the sd of the log of a Gamma."""
        return np.sqrt(polygamma(1, np.floor(np.asarray(y, float)) + 1.0))

    def with_data(self, y, size=None):
        return Poisson(y, exposure=size)


@dataclass(frozen=True, eq=False)
class NegativeBinomial(_LogLink, LatentLikelihood):
    r"""Overdispersed counts, log link, dispersion :math:`r` (``phi = [r]``), exposure :math:`E_i`.

    Mean :math:`\mu = E e^{f}`, variance :math:`\mu + \mu^2/r`:

    .. math::
       \ell = \log\Gamma(y + r) - \log\Gamma(r) - \log y! + r\log(1 - p) + y \log p,
       \qquad p = \frac{\mu}{r + \mu},

    :math:`\ell' = y - (y + r)p`, :math:`\ell'' = -(y + r)p(1-p)`,
    :math:`\ell''' = \ell''(1 - 2p)`; in :math:`r`:
    :math:`\partial_r\ell = \psi(y+r) - \psi(r) + \log(1-p) + (\mu - y)/(r + \mu)`,
    :math:`\partial_r\ell' = p(y - \mu)/(r+\mu)`,
    :math:`\partial_r\ell'' = -p(1-p) + (y + r)(1 - 2p)p/(r + \mu)`.
    """

    log_concave = True  # W = (y + r) p (1 - p) >= 0 (in f, at any r)

    exposure: np.ndarray | None = None

    def __post_init__(self):
        _set_counts_and_exposure(self)
        object.__setattr__(self, "param_names", ("dispersion",))

    def _parts(self, f, phi):
        (r,) = _check_phi(self, phi)
        if not r > 0:
            raise ValueError(f"dispersion must be positive, got {r}")
        eta = f + self._offset
        mu = np.exp(eta)
        p = expit(eta - np.log(r))  # mu / (r + mu)
        return r, mu, p

    def derivatives(self, f, phi=()):
        y = self.y
        r, _mu, p = self._parts(f, phi)
        log1mp = -np.logaddexp(0.0, f + self._offset - np.log(r))  # log(r / (r + mu))
        logp = (
            gammaln(y + r)
            - gammaln(r)
            - gammaln(y + 1)
            + r * log1mp
            + y * (f + self._offset - np.log(r) + log1mp)
        )
        d2 = -(y + r) * p * (1.0 - p)
        return logp, y - (y + r) * p, d2, d2 * (1.0 - 2.0 * p)

    def phi_derivatives(self, f, phi=()):
        y = self.y
        r, mu, p = self._parts(f, phi)
        log1mp = -np.logaddexp(0.0, f + self._offset - np.log(r))
        rm = r + mu
        dl = digamma(y + r) - digamma(r) + log1mp + (mu - y) / rm
        dd1 = p * (y - mu) / rm
        dd2 = -p * (1.0 - p) + (y + r) * (1.0 - 2.0 * p) * p / rm
        return dl[None], dd1[None], dd2[None]

    def response_variance(self, f, phi=(), size=None):
        r""":math:`\mu + \mu^2 / r` (the gamma-Poisson mixture of mean :math:`\mu` and
        dispersion :math:`r`)."""
        (r,) = _check_phi(self, phi)
        mu = self.response_mean(f, phi, size)
        return mu + mu * mu / r

    def draw(self, f, phi, rng, size=None):
        (r,) = _check_phi(self, phi)
        mu = self.response_mean(f, phi, size)
        if np.all(mu <= POISSON_NORMAL_ABOVE):
            return rng.negative_binomial(r, r / (r + mu)).astype(float)
        # the gamma-Poisson mixture, NB(r, mean mu) exactly, for means NumPy's sampler refuses
        return poisson_draws(rng, rng.gamma(r, mu / r))

    def cdf(self, f, phi=()):
        r, _mu, p = self._parts(f, phi)  # failures before r successes of probability 1 - p
        return stats.nbinom.cdf(self.y - 1, r, 1.0 - p), stats.nbinom.cdf(self.y, r, 1.0 - p)

    def cdf_values(self, y, f, phi=(), size=None):
        r""":math:`P(Y \le k) = I_{r/(r+\mu)}(r, k + 1)` (the regularised incomplete beta
        function), :math:`k = \lfloor y \rfloor \ge 0`, :math:`\mu = E e^f`; 0 below 0."""
        (r,) = _phi_arrays(self, phi)
        k = np.floor(np.asarray(y, float))
        success = expit(np.log(r) - np.log(_size(size)) - f)  # r / (r + mu)
        F = betainc(r, np.maximum(k, 0.0) + 1.0, success)
        return np.where(k < 0, 0.0, F)

    def latent_threshold(self, y, u, phi=(), size=None):
        r""":math:`\mathrm{logit}\, I^{-1}_u(k + 1, r) + \log r - \log E` (the logit of a
        :math:`\mathrm{Beta}(k + 1, r)` quantile is :math:`\log(\mu/r)`)."""
        (r,) = _phi_arrays(self, phi)
        k = np.floor(np.asarray(y, float))
        return logit(betaincinv(k + 1.0, r, u)) + np.log(r) - np.log(_size(size))

    def threshold_scale(self, y, phi=(), size=None):
        r""":math:`\sqrt{\psi'(k + 1) + \psi'(r)}`."""
        (r,) = _phi_arrays(self, phi)
        return np.sqrt(polygamma(1, np.floor(np.asarray(y, float)) + 1.0) + polygamma(1, r))

    def with_data(self, y, size=None):
        return NegativeBinomial(y, exposure=size)


@dataclass(frozen=True, eq=False)
class StudentT(LatentLikelihood):
    r"""Robust regression: :math:`y_i = f_i + \varepsilon_i`, :math:`\varepsilon_i \sim t_\nu(0, \sigma)`,
    ``phi = [nu, sigma]``.

    With :math:`r = y - f` and :math:`s = \nu\sigma^2`:

    .. math::
       \ell = \log\Gamma\tfrac{\nu+1}{2} - \log\Gamma\tfrac{\nu}{2} - \tfrac12\log(\pi s)
              - \tfrac{\nu+1}{2}\log\left(1 + \frac{r^2}{s}\right), \quad
       \ell' = \frac{(\nu+1) r}{s + r^2}, \quad
       \ell'' = \frac{(\nu+1)(r^2 - s)}{(s + r^2)^2}, \quad
       \ell''' = \frac{2(\nu+1) r (r^2 - 3s)}{(s + r^2)^3}

    (Vanhatalo, Jylänki & Vehtari 2009, §2). :math:`W = -\ell''` is negative where
    :math:`r^2 > s`: the likelihood is not log-concave and the Laplace posterior can be
    multimodal.
    """

    def __post_init__(self):
        object.__setattr__(self, "y", _as_finite_vector("y", self.y))
        object.__setattr__(self, "param_names", ("nu", "sigma"))

    log_concave = False  # W < 0 where r^2 > nu sigma^2

    def _parts(self, f, phi):
        nu, sigma = _check_phi(self, phi)
        if not (nu > 0 and sigma > 0):
            raise ValueError(f"Student-t needs nu > 0 and sigma > 0, got nu={nu}, sigma={sigma}")
        r = self.y - f
        return nu, sigma, r, nu * sigma**2, r * r

    def derivatives(self, f, phi=()):
        nu, _sigma, r, s, r2 = self._parts(f, phi)
        q = s + r2
        logp = (
            gammaln(0.5 * (nu + 1))
            - gammaln(0.5 * nu)
            - 0.5 * np.log(np.pi * s)
            - 0.5 * (nu + 1) * np.log1p(r2 / s)
        )
        d1 = (nu + 1) * r / q
        d2 = (nu + 1) * (r2 - s) / q**2
        d3 = 2.0 * (nu + 1) * r * (r2 - 3.0 * s) / q**3
        return logp, d1, d2, d3

    def phi_derivatives(self, f, phi=()):
        nu, sigma, r, s, r2 = self._parts(f, phi)
        q = s + r2
        # partial derivatives at fixed s, then the chain rule through s = nu sigma^2
        l_nu = 0.5 * digamma(0.5 * (nu + 1)) - 0.5 * digamma(0.5 * nu) - 0.5 * np.log1p(r2 / s)
        l_s = -0.5 / s + 0.5 * (nu + 1) * r2 / (s * q)
        d1_nu, d1_s = r / q, -(nu + 1) * r / q**2
        d2_nu, d2_s = (r2 - s) / q**2, (nu + 1) * (s - 3.0 * r2) / q**3
        ds_nu, ds_sigma = sigma**2, 2.0 * nu * sigma
        dl = np.stack([l_nu + l_s * ds_nu, l_s * ds_sigma])
        dd1 = np.stack([d1_nu + d1_s * ds_nu, d1_s * ds_sigma])
        dd2 = np.stack([d2_nu + d2_s * ds_nu, d2_s * ds_sigma])
        return dl, dd1, dd2

    def response_mean(self, f, phi=(), size=None):
        return np.asarray(f, float)

    def response_variance(self, f, phi=(), size=None):
        r""":math:`\sigma^2 \nu / (\nu - 2)` for :math:`\nu > 2`, else infinite."""
        nu, sigma = _check_phi(self, phi)
        value = sigma**2 * nu / (nu - 2.0) if nu > 2 else np.inf
        return np.full(np.shape(f), value)

    def draw(self, f, phi, rng, size=None):
        nu, sigma = _check_phi(self, phi)
        return np.asarray(f, float) + sigma * rng.standard_t(nu, size=np.shape(f))

    def cdf(self, f, phi=()):
        nu, sigma, r, _s, _r2 = self._parts(f, phi)
        F = stats.t.cdf(r / sigma, nu)
        return F, F

    def cdf_values(self, y, f, phi=(), size=None):
        r""":math:`T_\nu((y - f)/\sigma)`."""
        nu, sigma = _phi_arrays(self, phi)
        return stdtr(nu, (np.asarray(y, float) - f) / sigma)

    def ppf_values(self, q, f, phi=()):
        nu, sigma = _phi_arrays(self, phi)
        return f + sigma * stdtrit(nu, q)

    def latent_threshold(self, y, u, phi=(), size=None):
        r""":math:`y + \sigma T_\nu^{-1}(u)`."""
        nu, sigma = _phi_arrays(self, phi)
        return np.asarray(y, float) + sigma * stdtrit(nu, u)

    def threshold_scale(self, y, phi=(), size=None):
        r"""The scale :math:`\sigma`."""
        _nu, sigma = _phi_arrays(self, phi)
        return np.broadcast_to(sigma, np.broadcast_shapes(np.shape(y), sigma.shape))

    def with_data(self, y, size=None):
        return StudentT(y)


@dataclass(frozen=True, eq=False)
class Gaussian(LatentLikelihood):
    r""":math:`y_i \sim N(f_i, \sigma^2)`, ``phi = [sigma]``: the case where Laplace is exact.

    .. math::
       \ell = -\tfrac12\log(2\pi\sigma^2) - \frac{r^2}{2\sigma^2}, \quad
       \ell' = r/\sigma^2, \; \ell'' = -1/\sigma^2, \; \ell''' = 0, \quad r = y - f.
    """

    log_concave = True  # W = 1 / sigma^2

    def __post_init__(self):
        object.__setattr__(self, "y", _as_finite_vector("y", self.y))
        object.__setattr__(self, "param_names", ("sigma",))

    def _parts(self, phi):
        (sigma,) = _check_phi(self, phi)
        if not sigma > 0:
            raise ValueError(f"Gaussian sigma must be positive, got {sigma}")
        return sigma

    def derivatives(self, f, phi=()):
        sigma = self._parts(phi)
        r = self.y - f
        logp = -0.5 * _LOG_2PI - np.log(sigma) - 0.5 * r * r / sigma**2
        return logp, r / sigma**2, np.full_like(r, -1.0 / sigma**2), np.zeros_like(r)

    def phi_derivatives(self, f, phi=()):
        sigma = self._parts(phi)
        r = self.y - f
        return (
            (-1.0 / sigma + r * r / sigma**3)[None],
            (-2.0 * r / sigma**3)[None],
            np.full((1, r.size), 2.0 / sigma**3),
        )

    def response_mean(self, f, phi=(), size=None):
        return np.asarray(f, float)

    def response_variance(self, f, phi=(), size=None):
        return np.full(np.shape(f), self._parts(phi) ** 2)

    def draw(self, f, phi, rng, size=None):
        (sigma,) = _check_phi(self, phi)
        return np.asarray(f, float) + sigma * rng.standard_normal(np.shape(f))

    def cdf(self, f, phi=()):
        F = ndtr((self.y - np.asarray(f, float)) / self._parts(phi))
        return F, F

    def cdf_values(self, y, f, phi=(), size=None):
        r""":math:`\Phi((y - f)/\sigma)`."""
        (sigma,) = _phi_arrays(self, phi)
        return ndtr((np.asarray(y, float) - f) / sigma)

    def ppf_values(self, q, f, phi=()):
        (sigma,) = _phi_arrays(self, phi)
        return f + sigma * ndtri(q)

    def latent_threshold(self, y, u, phi=(), size=None):
        r""":math:`y + \sigma \Phi^{-1}(u)`."""
        (sigma,) = _phi_arrays(self, phi)
        return np.asarray(y, float) + sigma * ndtri(u)

    def threshold_scale(self, y, phi=(), size=None):
        r""":math:`\sigma`."""
        (sigma,) = _phi_arrays(self, phi)
        return np.broadcast_to(sigma, np.broadcast_shapes(np.shape(y), sigma.shape))

    def with_data(self, y, size=None):
        return Gaussian(y)
