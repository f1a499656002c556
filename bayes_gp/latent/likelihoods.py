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

The Student-t, beta and zero-inflated likelihoods are not log-concave in :math:`f`: their
:math:`W = -\ell''` can be negative (the Student-t's for residuals larger than
:math:`\sqrt{\nu}\,\sigma`, the beta's for observations far from a mean near 0 or 1, the
zero-inflated ones' at zero counts, whose two sources pull :math:`f` apart).
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
    gammainc,
    gammaincc,
    gammainccinv,
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
    "Beta",
    "Gamma",
    "ZeroInflatedPoisson",
    "ZeroInflatedNegativeBinomial",
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

    @property
    def n_phi(self) -> int:
        """The length of ``phi``: one value per name of :attr:`param_names` (a likelihood with
        a vector parameter, the ordinal cut-points, has more)."""
        return len(self.param_names)

    #: Whether :math:`W = -\\ell'' \\ge 0` for every ``f`` and ``phi``. It selects the form of
    #: Newton's method in :func:`bayes_gp.latent.laplace.laplace`: the stable
    #: :math:`B = I + W^{1/2} K W^{1/2}` of R&W Algorithm 3.1 when True, the whitened form, which
    #: allows :math:`W < 0`, when False. Subclasses declare it; the default is the general form.
    log_concave = False

    #: Whether the latent value is the location of ``y`` itself (identity link: Student-t,
    #: Gaussian): then the latent prior is on ``y``'s scale, and :meth:`latent_threshold` is
    #: ``y`` plus a shift that does not depend on ``y``. False for a link scale (logit, log).
    identity_link = False

    def derivatives(self, f: np.ndarray, phi=()) -> tuple[np.ndarray, ...]:
        """``(logp, d1, d2, d3)``: :math:`\\ell_i` and its first three ``f``-derivatives."""
        raise NotImplementedError

    def check_training(self) -> None:
        """Refuse, with a ``ValueError`` naming the problem, training data from which the model
        is not identified (a hurdle model's data without zeros). :class:`~bayes_gp.LatentGP`
        calls it on its own data, never on held-out data (:meth:`with_data`); the default
        accepts any data."""

    def phi_derivatives(self, f: np.ndarray, phi=()) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Arrays of shape ``(n_phi, n)``: :math:`\\partial_{\\phi_j}` of ``logp``, ``d1``, ``d2``."""
        z = np.zeros((0, self.n))
        return z, z, z

    def log_density(self, f: np.ndarray, phi=()) -> np.ndarray:
        r""":math:`\ell_i` alone (``derivatives(f, phi)[0]``; a subclass whose derivatives cost
        much more than its density computes it without them)."""
        return self.derivatives(f, phi)[0]

    def log_lik(self, f: np.ndarray, phi=()) -> float:
        """:math:`\\sum_i \\log p(y_i \\mid f_i, \\phi)`."""
        return float(np.sum(self.log_density(np.asarray(f, float), phi)))

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

    def threshold_atom(self, y, phi=()) -> np.ndarray | float:
        r"""The probability :math:`a` of :math:`T = +\infty` (a value of :math:`y` reached below
        whatever :math:`f`: a hurdle model's zero) that :meth:`latent_threshold` leaves out,
        its quantile function then being that of :math:`T` given :math:`T < \infty`; the
        predictive CDF over the threshold is :math:`a + (1 - a)\,E[\Phi((T - \mu)/s) \mid T
        < \infty]`, the quadrature nodes spent on the finite part. Default 0."""
        return 0.0

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
    identity_link = True

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


class _NormalResponse:
    r"""The response of :math:`y = f + \sigma\varepsilon`, :math:`\varepsilon \sim N(0, 1)`
    (``phi = [sigma]``): its moments, draws, CDF, quantiles and latent thresholds, shared by
    :class:`Gaussian` and the uncensored measurement of
    :class:`~bayes_gp.latent.censored.CensoredGaussian`."""

    def response_mean(self, f, phi=(), size=None):
        return np.asarray(f, float)

    def response_variance(self, f, phi=(), size=None):
        (sigma,) = _phi_arrays(self, phi)
        return np.broadcast_to(sigma**2, np.broadcast_shapes(np.shape(f), sigma.shape)).copy()

    def _positive_sigma(self, phi) -> float:
        (sigma,) = _check_phi(self, phi)
        if not sigma > 0:
            raise ValueError(f"{type(self).__name__} sigma must be positive, got {sigma}")
        return float(sigma)

    def draw(self, f, phi, rng, size=None):
        r"""Uncensored measurements :math:`f + \sigma\varepsilon`."""
        sigma = self._positive_sigma(phi)
        return np.asarray(f, float) + sigma * rng.standard_normal(np.shape(f))

    def cdf(self, f, phi=()):
        """The (uncensored) measurement's CDF at the recorded values."""
        F = ndtr((self.y - np.asarray(f, float)) / self._positive_sigma(phi))
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


@dataclass(frozen=True, eq=False)
class Gaussian(_NormalResponse, LatentLikelihood):
    r""":math:`y_i \sim N(f_i, \sigma^2)`, ``phi = [sigma]``: the case where Laplace is exact.

    .. math::
       \ell = -\tfrac12\log(2\pi\sigma^2) - \frac{r^2}{2\sigma^2}, \quad
       \ell' = r/\sigma^2, \; \ell'' = -1/\sigma^2, \; \ell''' = 0, \quad r = y - f.
    """

    log_concave = True  # W = 1 / sigma^2
    identity_link = True

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

    def with_data(self, y, size=None):
        return Gaussian(y)


#: Latent values beyond which :func:`_decreasing_root` stops widening its bracket.
_ROOT_LIMIT = 60.0


def _decreasing_root(fun, t0: np.ndarray, width: np.ndarray, tol: float = 1e-10) -> np.ndarray:
    r"""Roots of decreasing functions, one per entry: ``fun(t, idx)`` evaluates the functions
    ``idx`` at ``t``. From brackets ``t0 -+ width`` widened (doubling) until the sign changes
    (at most to :data:`_ROOT_LIMIT`, whose value is returned where there is no root inside), the
    Illinois variant of regula falsi down to ``tol`` (absolute, plus relative) or
    :math:`|{\rm fun}| < 10^{-14}`."""
    t0 = np.asarray(t0, float)
    n = t0.size
    width = np.minimum(np.broadcast_to(np.asarray(width, float), (n,)), _ROOT_LIMIT)
    t0 = np.clip(t0, -_ROOT_LIMIT, _ROOT_LIMIT)
    lo = np.maximum(t0 - width, -_ROOT_LIMIT)
    hi = np.minimum(t0 + width, _ROOT_LIMIT)
    idx = np.arange(n)
    flo, fhi = fun(lo, idx), fun(hi, idx)
    for _ in range(8):  # widen: fun(lo) >= 0 >= fun(hi)
        bad_lo = (flo < 0) & (lo > -_ROOT_LIMIT)
        bad_hi = (fhi > 0) & (hi < _ROOT_LIMIT)
        if not (bad_lo.any() or bad_hi.any()):
            break
        step = hi - lo
        lo = np.where(bad_lo, np.maximum(lo - 2.0 * step, -_ROOT_LIMIT), lo)
        hi = np.where(bad_hi, np.minimum(hi + 2.0 * step, _ROOT_LIMIT), hi)
        flo = np.where(bad_lo, fun(lo, idx), flo)
        fhi = np.where(bad_hi, fun(hi, idx), fhi)
    out = np.where(flo < 0, lo, np.where(fhi > 0, hi, np.nan))
    todo = np.flatnonzero(np.isnan(out))
    a, b, fa, fb = lo[todo], hi[todo], flo[todo], fhi[todo]
    side = np.zeros(todo.size, int)
    for _ in range(100):
        if todo.size == 0:
            break
        with np.errstate(invalid="ignore", divide="ignore"):
            x = a - fa * (b - a) / (fb - fa)
        x = np.where(np.isfinite(x) & (x > a) & (x < b), x, 0.5 * (a + b))
        fx = fun(x, todo)
        pos = fx > 0  # the root is above x
        a, fa = np.where(pos, x, a), np.where(pos, fx, fa)
        b, fb = np.where(pos, b, x), np.where(pos, fb, fx)
        fb = np.where(pos & (side == 1), 0.5 * fb, fb)  # Illinois: halve the stale end
        fa = np.where(~pos & (side == -1), 0.5 * fa, fa)
        side = np.where(pos, 1, -1)
        done = (b - a <= tol * (1.0 + np.abs(x))) | (np.abs(fx) < 1e-14)
        out[todo[done]] = x[done]
        keep = ~done
        todo, a, b, fa, fb, side = todo[keep], a[keep], b[keep], fa[keep], fb[keep], side[keep]
    out[todo] = 0.5 * (a + b)
    return out


def _check_open_unit(y: np.ndarray) -> None:
    bad = (y <= 0) | (y >= 1)
    if np.any(bad):
        i = int(np.argmax(bad))
        raise ValueError(
            f"the beta likelihood needs proportions strictly between 0 and 1; y[{i}] = {y[i]:g} "
            f"({int(bad.sum())} value(s) at or outside 0 and 1). Exact zeros and ones need a "
            "zero/one-inflated model; or transform y to (y (n - 1) + 0.5) / n (Smithson & "
            "Verkuilen 2006), or use the binomial likelihood for successes out of trials"
        )


@dataclass(frozen=True, eq=False)
class Beta(LatentLikelihood):
    r"""Proportions :math:`y_i \in (0, 1)`, logit link, precision :math:`\phi` (``phi = [precision]``).

    The mean–precision parameterisation of beta regression (Ferrari & Cribari-Neto 2004, eq. 2):
    :math:`\mu = \sigma(f)`, :math:`y \sim \mathrm{Beta}(\mu\phi, (1 - \mu)\phi)`, so that
    :math:`E[y] = \mu` and :math:`\mathrm{Var}[y] = \mu(1 - \mu)/(1 + \phi)`. With
    :math:`a = \mu\phi`, :math:`b = (1 - \mu)\phi`, :math:`v = \mu(1 - \mu)`,
    :math:`y^* = \log\frac{y}{1 - y}`, :math:`\mu^* = \psi(a) - \psi(b)`,
    :math:`T_k = \psi_k(a) + (-1)^{k+1}\psi_k(b)` (:math:`\psi_k` the polygamma functions):

    .. math::
       \ell = \log\Gamma(\phi) - \log\Gamma(a) - \log\Gamma(b) + (a - 1)\log y
              + (b - 1)\log(1 - y),

       \ell' = \phi v (y^* - \mu^*), \qquad
       \ell'' = \phi v (1 - 2\mu)(y^* - \mu^*) - \phi^2 v^2 T_1,

       \ell''' = \phi v\left((1 - 2\mu)^2 - 2v\right)(y^* - \mu^*)
                 - 3\phi^2 v^2 (1 - 2\mu) T_1 - \phi^3 v^3 T_2

    (the score of Ferrari & Cribari-Neto's eq. 5 for one observation, :math:`d\mu/df = v`). In
    :math:`\phi`: :math:`\partial_\phi\ell = \psi(\phi) - \mu\psi(a) - (1 - \mu)\psi(b)
    + \mu y^* + \log(1 - y)`, and with :math:`D_1 = \mu\psi_1(a) - (1 - \mu)\psi_1(b)`,
    :math:`D_2 = \mu\psi_2(a) + (1 - \mu)\psi_2(b)`:
    :math:`\partial_\phi\ell' = v(y^* - \mu^*) - \phi v D_1`,
    :math:`\partial_\phi\ell'' = v(1 - 2\mu)(y^* - \mu^*) - \phi v (1 - 2\mu) D_1
    - 2\phi v^2 T_1 - \phi^2 v^2 D_2`.

    Not log-concave in :math:`f`: :math:`\ell'' > 0` for :math:`y` near 1 while :math:`\mu`
    is small and :math:`\phi` is small (e.g. :math:`\phi = 1`, :math:`\mu = 0.1`,
    :math:`y = 0.999`), so the Laplace mode is found by the general (whitened) Newton form, as
    for the Student-t. ``y`` must lie strictly inside (0, 1): an exact 0 or 1 has zero density
    for every :math:`f` and is refused with the remedies in the message. The CDF is the
    regularised incomplete beta function; its latent threshold
    (:meth:`latent_threshold`, for the predictive quantiles) has no closed form and is a root
    search.
    """

    log_concave = False  # W < 0 possible (docstring)

    def __post_init__(self):
        y = _as_finite_vector("y", self.y)
        _check_open_unit(y)
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "param_names", ("precision",))
        object.__setattr__(self, "_ystar", np.log(y) - np.log1p(-y))
        object.__setattr__(self, "_log1my", np.log1p(-y))

    def _parts(self, f, phi):
        (prec,) = _check_phi(self, phi)
        if not prec > 0:
            raise ValueError(f"beta precision must be positive, got {prec}")
        mu, cmu = expit(f), expit(-f)  # mu and 1 - mu, each accurate in its own tail
        return prec, mu, cmu, prec * mu, prec * cmu, mu * cmu

    def log_density(self, f, phi=()):
        prec, _mu, _cmu, a, b, _v = self._parts(f, phi)
        return (gammaln(prec) - gammaln(a) - gammaln(b)
                + (a - 1.0) * (self._ystar + self._log1my) + (b - 1.0) * self._log1my)  # fmt: skip

    def derivatives(self, f, phi=()):
        prec, mu, _cmu, a, b, v = self._parts(f, phi)
        ys = self._ystar
        logp = self.log_density(f, phi)
        r = ys - (digamma(a) - digamma(b))
        t1 = polygamma(1, a) + polygamma(1, b)
        t2 = polygamma(2, a) - polygamma(2, b)
        s = 1.0 - 2.0 * mu  # = cmu - mu
        d1 = prec * v * r
        d2 = prec * v * s * r - prec**2 * v**2 * t1
        d3 = (prec * v * (s * s - 2.0 * v) * r - 3.0 * prec**2 * v**2 * s * t1
              - prec**3 * v**3 * t2)  # fmt: skip
        return logp, d1, d2, d3

    def phi_derivatives(self, f, phi=()):
        prec, mu, cmu, a, b, v = self._parts(f, phi)
        ys = self._ystar
        r = ys - (digamma(a) - digamma(b))
        t1 = polygamma(1, a) + polygamma(1, b)
        D1 = mu * polygamma(1, a) - cmu * polygamma(1, b)
        D2 = mu * polygamma(2, a) + cmu * polygamma(2, b)
        s = 1.0 - 2.0 * mu
        dl = digamma(prec) - mu * digamma(a) - cmu * digamma(b) + mu * ys + self._log1my
        dd1 = v * r - prec * v * D1
        dd2 = v * s * r - prec * v * s * D1 - 2.0 * prec * v * v * t1 - prec**2 * v * v * D2
        return dl[None], dd1[None], dd2[None]

    def response_mean(self, f, phi=(), size=None):
        return expit(f)

    def response_variance(self, f, phi=(), size=None):
        r""":math:`\mu(1 - \mu)/(1 + \phi)`."""
        (prec,) = _phi_arrays(self, phi)
        return expit(f) * expit(-np.asarray(f, float)) / (1.0 + prec)

    def draw(self, f, phi, rng, size=None):
        (prec,) = _check_phi(self, phi)
        f = np.asarray(f, float)
        return rng.beta(prec * expit(f), prec * expit(-f))

    def cdf(self, f, phi=()):
        _prec, _mu, _cmu, a, b, _v = self._parts(f, phi)
        F = betainc(a, b, self.y)
        return F, F

    def cdf_values(self, y, f, phi=(), size=None):
        r""":math:`I_y(\mu\phi, (1 - \mu)\phi)` (the regularised incomplete beta function);
        0 at and below 0, 1 at and above 1."""
        (prec,) = _phi_arrays(self, phi)
        y = np.asarray(y, float)
        f = np.asarray(f, float)
        F = betainc(prec * expit(f), prec * expit(-f), np.clip(y, 0.0, 1.0))
        return np.where(y <= 0, 0.0, np.where(y >= 1, 1.0, F))

    def ppf_values(self, q, f, phi=()):
        (prec,) = _phi_arrays(self, phi)
        f = np.asarray(f, float)
        return betaincinv(prec * expit(f), prec * expit(-f), q)

    def latent_threshold(self, y, u, phi=(), size=None):
        r"""The root :math:`t` of :math:`I_y(\sigma(t)\phi, \sigma(-t)\phi) = 1 - u`.

        :math:`P(Y \le y \mid f)` decreases in :math:`f`, so the root is unique; it is found by
        :func:`_decreasing_root` from the normal approximation of :math:`\mathrm{logit}\,Y`
        (mean :math:`\approx f`, sd :meth:`threshold_scale`),
        :math:`t_0 = \mathrm{logit}\,y + \Phi^{-1}(u)\,\mathrm{sd}`, to :math:`10^{-10}`.
        :math:`-\infty` at :math:`y \le 0`, :math:`+\infty` at :math:`y \ge 1`."""
        (prec,) = _phi_arrays(self, phi)
        y, u = np.asarray(y, float), np.asarray(u, float)
        shape = np.broadcast_shapes(y.shape, u.shape, prec.shape)
        yb, ub, pb = (np.broadcast_to(a, shape).ravel() for a in (y, u, prec))
        inside = (yb > 0) & (yb < 1)
        yi, ui, pi = yb[inside], ub[inside], pb[inside]
        sd = np.sqrt(polygamma(1, yi * pi) + polygamma(1, (1.0 - yi) * pi))
        t0 = logit(yi) + ndtri(ui) * sd

        def excess(t, idx):  # P(Y <= y | t) - (1 - u), decreasing in t
            return betainc(pi[idx] * expit(t), pi[idx] * expit(-t), yi[idx]) - (1.0 - ui[idx])

        out = np.where(yb >= 1, np.inf, -np.inf)
        out[inside] = _decreasing_root(excess, t0, sd + 0.1)
        return out.reshape(shape)

    def threshold_scale(self, y, phi=(), size=None):
        r""":math:`\sqrt{\psi_1(y\phi) + \psi_1((1 - y)\phi)}`: the sd of
        :math:`\mathrm{logit}\,Y` at :math:`\mu = y`, the width of the CDF's step in
        :math:`f` (:math:`y` clipped into (0, 1))."""
        (prec,) = _phi_arrays(self, phi)
        yc = np.clip(np.asarray(y, float), 1e-12, 1.0 - 1e-12)
        return np.sqrt(polygamma(1, yc * prec) + polygamma(1, (1.0 - yc) * prec))

    def max_value(self, size=None):
        return 1.0

    def with_data(self, y, size=None):
        return Beta(y)


@dataclass(frozen=True, eq=False)
class Gamma(LatentLikelihood):
    r"""Positive continuous outcomes, log link, shape :math:`\alpha` (``phi = [shape]``).

    :math:`\mu = e^{f}`, :math:`y \sim \mathrm{Gamma}(\alpha, \text{rate } \alpha/\mu)`: mean
    :math:`\mu`, variance :math:`\mu^2/\alpha` (constant coefficient of variation
    :math:`\alpha^{-1/2}`; the gamma GLM of McCullagh & Nelder 1989, §8.1, with dispersion
    :math:`1/\alpha`):

    .. math::
       \ell = \alpha\log\alpha - \alpha f - \log\Gamma(\alpha) + (\alpha - 1)\log y
              - \alpha y e^{-f}, \quad
       \ell' = \alpha(y e^{-f} - 1), \quad \ell'' = -\alpha y e^{-f}, \quad
       \ell''' = \alpha y e^{-f};

    in :math:`\alpha`: :math:`\partial_\alpha\ell = \log\alpha + 1 - f - \psi(\alpha) + \log y
    - y e^{-f}`, :math:`\partial_\alpha\ell' = y e^{-f} - 1`,
    :math:`\partial_\alpha\ell'' = -y e^{-f}`. Log-concave: :math:`W = \alpha y e^{-f} > 0`.
    """

    log_concave = True  # W = alpha y e^-f > 0

    def __post_init__(self):
        y = _as_finite_vector("y", self.y)
        if np.any(y <= 0):
            i = int(np.argmax(y <= 0))
            raise ValueError(
                f"the gamma likelihood needs positive y; y[{i}] = {y[i]:g} "
                f"({int(np.sum(y <= 0))} value(s) at or below 0). Zeros need a hurdle or "
                "zero-inflated model, or counts a count likelihood (poisson, negative_binomial)"
            )
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "param_names", ("shape",))
        object.__setattr__(self, "_logy", np.log(y))

    def _shape(self, phi):
        (alpha,) = _check_phi(self, phi)
        if not alpha > 0:
            raise ValueError(f"gamma shape must be positive, got {alpha}")
        return alpha

    def derivatives(self, f, phi=()):
        alpha = self._shape(phi)
        z = self.y * np.exp(-np.asarray(f, float))  # y / mu
        logp = (alpha * np.log(alpha) - alpha * f - gammaln(alpha)
                + (alpha - 1.0) * self._logy - alpha * z)  # fmt: skip
        return logp, alpha * (z - 1.0), -alpha * z, alpha * z

    def phi_derivatives(self, f, phi=()):
        alpha = self._shape(phi)
        z = self.y * np.exp(-np.asarray(f, float))
        dl = np.log(alpha) + 1.0 - f - digamma(alpha) + self._logy - z
        return dl[None], (z - 1.0)[None], (-z)[None]

    def response_mean(self, f, phi=(), size=None):
        return np.exp(np.asarray(f, float))

    def response_variance(self, f, phi=(), size=None):
        r""":math:`\mu^2/\alpha`."""
        (alpha,) = _phi_arrays(self, phi)
        return np.exp(2.0 * np.asarray(f, float)) / alpha

    def draw(self, f, phi, rng, size=None):
        (alpha,) = _check_phi(self, phi)
        return rng.gamma(alpha, np.exp(np.asarray(f, float)) / alpha)

    def cdf(self, f, phi=()):
        alpha = self._shape(phi)
        F = gammainc(alpha, alpha * self.y * np.exp(-np.asarray(f, float)))
        return F, F

    def cdf_values(self, y, f, phi=(), size=None):
        r""":math:`P(\alpha, \alpha y e^{-f})` (the regularised lower incomplete gamma
        function); 0 at and below 0."""
        (alpha,) = _phi_arrays(self, phi)
        y = np.asarray(y, float)
        F = gammainc(alpha, alpha * np.maximum(y, 0.0) * np.exp(-np.asarray(f, float)))
        return np.where(y <= 0, 0.0, F)

    def ppf_values(self, q, f, phi=()):
        (alpha,) = _phi_arrays(self, phi)
        return np.exp(np.asarray(f, float)) / alpha * gammaincinv(alpha, q)

    def latent_threshold(self, y, u, phi=(), size=None):
        r""":math:`\log(\alpha y) - \log Q^{-1}(\alpha, u)`: :math:`P(Y \le y \mid f) =
        P(G \le \alpha y e^{-f})` for :math:`G \sim \mathrm{Gamma}(\alpha, 1)`, i.e.
        :math:`P(T > f)` with :math:`T = \log(\alpha y) - \log G` (:math:`-\infty` at
        :math:`y \le 0`)."""
        (alpha,) = _phi_arrays(self, phi)
        y = np.asarray(y, float)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.log(alpha * np.maximum(y, 0.0)) - np.log(gammainccinv(alpha, u))
        return np.where(y <= 0, -np.inf, t)

    def threshold_scale(self, y, phi=(), size=None):
        r""":math:`\sqrt{\psi_1(\alpha)}`, the sd of :math:`\log G`."""
        (alpha,) = _phi_arrays(self, phi)
        return np.broadcast_to(np.sqrt(polygamma(1, alpha)),
                               np.broadcast_shapes(np.shape(y), alpha.shape))  # fmt: skip

    def with_data(self, y, size=None):
        return Gamma(y)


class _CountWithZeroProbability(_LogLink):
    r"""A count component (:attr:`component`) with a zero probability :math:`\pi` as the last
    parameter (:attr:`probability_name`): the zero-inflated likelihoods here and the hurdle
    likelihoods (:mod:`bayes_gp.latent.hurdle`) share the set-up and the split of the
    parameters."""

    #: The component's class.
    component: type = LatentLikelihood
    #: The name of :math:`\pi` among the parameters.
    probability_name: str = "zero_probability"

    def __post_init__(self):
        _set_counts_and_exposure(self)
        base = self.component(self.y, exposure=self.exposure)
        object.__setattr__(self, "_base", base)
        object.__setattr__(self, "param_names", (*base.param_names, self.probability_name))
        object.__setattr__(self, "_zero", self.y == 0)

    def _split(self, phi):
        """``(component parameters, pi)``, pi checked to lie in (0, 1)."""
        p = _check_phi(self, phi)
        pi = p[-1]
        if not 0 < pi < 1:
            raise ValueError(f"{self.probability_name} must be in (0, 1), got {pi}")
        return list(p[:-1]), pi

    def _split_arrays(self, phi):
        """``(component parameters, pi)`` as arrays (per-draw values allowed)."""
        p = _phi_arrays(self, phi)
        return p[:-1], p[-1]


class _ZeroInflated(_CountWithZeroProbability):
    r"""A count likelihood (the *component*: Poisson, negative binomial) mixed with structural
    zeros of probability :math:`\pi` (``zero_inflation``, the last parameter):
    :math:`p(0) = \pi + (1 - \pi) p_c(0)`, :math:`p(y) = (1 - \pi) p_c(y)` for :math:`y > 0`
    (Lambert 1992, eq. 1).

    With :math:`\ell_c` the component's log density and its derivatives :math:`\ell_c^{(k)}`,
    at :math:`y > 0` :math:`\ell = \log(1 - \pi) + \ell_c` (the component's derivatives); at
    :math:`y = 0`, with :math:`q = \sigma(\ell_c - \mathrm{logit}\,\pi)` the probability that
    the zero came from the component,

    .. math::
       \ell = \log\pi + \log(1 + e^{\ell_c - \mathrm{logit}\,\pi}), \quad
       \ell' = q\ell_c', \quad \ell'' = q\ell_c'' + q(1 - q)\ell_c'^2, \quad
       \ell''' = q\ell_c''' + 3q(1 - q)\ell_c'\ell_c'' + q(1 - q)(1 - 2q)\ell_c'^3

    (the derivatives of :math:`\log(\pi + (1 - \pi)e^{x})` are :math:`q`, :math:`q(1-q)`,
    :math:`q(1-q)(1-2q)`). In :math:`\pi`: :math:`\partial_\pi q = -q(1-q)/(\pi(1-\pi))`,
    :math:`\partial_\pi\ell = (1 - q)/\pi - q/(1 - \pi)` at 0 and :math:`-1/(1 - \pi)` above;
    in a component parameter :math:`r` (its derivatives :math:`\partial_r\ell_c^{(k)}`):
    :math:`\partial_r q = q(1-q)\partial_r\ell_c`, :math:`\partial_r\ell = q\,\partial_r\ell_c`,
    :math:`\partial_r\ell' = \partial_r q\,\ell_c' + q\,\partial_r\ell_c'`,
    :math:`\partial_r\ell'' = \partial_r q\,(\ell_c'' + (1 - 2q)\ell_c'^2)
    + q\,\partial_r\ell_c'' + 2q(1-q)\ell_c'\partial_r\ell_c'`.

    Not log-concave in :math:`f`: at a zero :math:`\ell'' = q\ell_c'' + q(1-q)\ell_c'^2` is
    positive for a Poisson component once :math:`(1 - q)\mu > 1` (a zero that may be
    structural pulls :math:`f` both ways), so the Laplace mode uses the general Newton form.
    """

    log_concave = False  # W < 0 at zeros (docstring)

    probability_name = "zero_inflation"

    def derivatives(self, f, phi=()):
        cphi, pi = self._split(phi)
        l0, a1, a2, a3 = self._base.derivatives(f, cphi)
        L = l0 - np.log(pi) + np.log1p(-pi)  # l_c - logit(pi)
        q, w = expit(L), expit(L) * expit(-L)  # q and q (1 - q)
        z = self._zero
        logp = np.where(z, np.log(pi) + np.logaddexp(0.0, L), np.log1p(-pi) + l0)
        d1 = np.where(z, q * a1, a1)
        d2 = np.where(z, q * a2 + w * a1 * a1, a2)
        d3 = np.where(z, q * a3 + 3.0 * w * a1 * a2 + w * (1.0 - 2.0 * q) * a1**3, a3)
        return logp, d1, d2, d3

    def phi_derivatives(self, f, phi=()):
        cphi, pi = self._split(phi)
        l0, a1, a2, _a3 = self._base.derivatives(f, cphi)
        b0, b1, b2 = self._base.phi_derivatives(f, cphi)
        L = l0 - np.log(pi) + np.log1p(-pi)
        q, w = expit(L), expit(L) * expit(-L)
        z = self._zero
        rows0, rows1, rows2 = [], [], []
        for j in range(len(cphi)):  # the component's parameters
            dq = w * b0[j]
            rows0.append(np.where(z, q * b0[j], b0[j]))
            rows1.append(np.where(z, dq * a1 + q * b1[j], b1[j]))
            rows2.append(np.where(z, dq * (a2 + (1.0 - 2.0 * q) * a1 * a1) + q * b2[j]
                                  + 2.0 * w * a1 * b1[j], b2[j]))  # fmt: skip
        dq = -w / (pi * (1.0 - pi))
        rows0.append(np.where(z, (1.0 - q) / pi - q / (1.0 - pi), -1.0 / (1.0 - pi)))
        rows1.append(np.where(z, dq * a1, 0.0))
        rows2.append(np.where(z, dq * (a2 + (1.0 - 2.0 * q) * a1 * a1), 0.0))
        return np.stack(rows0), np.stack(rows1), np.stack(rows2)

    def response_mean(self, f, phi=(), size=None):
        r""":math:`(1 - \pi) E e^f`."""
        _c, pi = self._split_arrays(phi)
        return (1.0 - pi) * super().response_mean(f, phi, size)

    def response_variance(self, f, phi=(), size=None):
        r""":math:`(1 - \pi)(V_c + \pi m_c^2)`, :math:`m_c = E e^f` and :math:`V_c` the
        component's mean and variance (the law of total variance over the zero's source)."""
        cphi, pi = self._split_arrays(phi)
        m = super().response_mean(f, phi, size)
        return (1.0 - pi) * (self._base.response_variance(f, cphi, size) + pi * m * m)

    def draw(self, f, phi, rng, size=None):
        cphi, pi = self._split(phi)
        y = self._base.draw(f, cphi, rng, size)
        return np.where(rng.uniform(size=np.shape(y)) < pi, 0.0, y)

    def cdf(self, f, phi=()):
        cphi, pi = self._split(phi)
        below, at = self._base.cdf(f, cphi)
        return np.where(self._zero, 0.0, pi + (1.0 - pi) * below), pi + (1.0 - pi) * at

    def cdf_values(self, y, f, phi=(), size=None):
        r""":math:`\pi + (1 - \pi) P_c(Y \le y)` from 0 on, 0 below."""
        cphi, pi = self._split_arrays(phi)
        F = pi + (1.0 - pi) * self._base.cdf_values(y, f, cphi, size)
        return np.where(np.floor(np.asarray(y, float)) < 0, 0.0, F)

    def latent_threshold(self, y, u, phi=(), size=None):
        r"""The component's threshold at :math:`u/(1 - \pi)`, :math:`+\infty` from
        :math:`u \ge 1 - \pi` (:math:`P(Y \le y \mid f) \ge \pi` for every :math:`f`: the
        threshold has an atom of mass :math:`\pi` at infinity)."""
        cphi, pi = self._split_arrays(phi)
        uc = np.asarray(u, float) / (1.0 - pi)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            t = self._base.latent_threshold(y, np.minimum(uc, 1.0), cphi, size)
        return np.where(uc < 1.0, t, np.inf)

    def threshold_scale(self, y, phi=(), size=None):
        """The component's."""
        cphi, _pi = self._split_arrays(phi)
        return self._base.threshold_scale(y, cphi, size)


@dataclass(frozen=True, eq=False)
class ZeroInflatedPoisson(_ZeroInflated, LatentLikelihood):
    r"""Zero-inflated Poisson counts (Lambert 1992), log link, exposure :math:`E_i`,
    ``phi = [zero_inflation]``: :math:`y = 0` with probability :math:`\pi`, else
    :math:`y \sim \mathrm{Poisson}(E e^{f})`.

    :math:`E[y] = (1 - \pi)\mu`, :math:`\mathrm{Var}[y] = (1 - \pi)\mu(1 + \pi\mu)`; the
    log density and its derivatives are :class:`_ZeroInflated`'s with the Poisson component
    (:math:`\ell_c' = y - \mu`, :math:`\ell_c'' = \ell_c''' = -\mu`).
    """

    exposure: np.ndarray | None = None
    component = Poisson

    def with_data(self, y, size=None):
        return ZeroInflatedPoisson(y, exposure=size)


@dataclass(frozen=True, eq=False)
class ZeroInflatedNegativeBinomial(_ZeroInflated, LatentLikelihood):
    r"""Zero-inflated negative-binomial counts, log link, exposure :math:`E_i`,
    ``phi = [dispersion, zero_inflation]``: :math:`y = 0` with probability :math:`\pi`, else
    :math:`y \sim \mathrm{NB}(\text{mean } E e^{f}, \text{dispersion } r)`
    (:class:`NegativeBinomial`; Lambert 1992's mixture with the negative binomial of Greene 1994).

    :math:`E[y] = (1 - \pi)\mu`, :math:`\mathrm{Var}[y] = (1 - \pi)\mu(1 + \mu/r + \pi\mu)`.
    """

    exposure: np.ndarray | None = None
    component = NegativeBinomial

    def with_data(self, y, size=None):
        return ZeroInflatedNegativeBinomial(y, exposure=size)
