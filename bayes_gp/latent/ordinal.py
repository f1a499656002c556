r"""Ordinal outcomes: the cumulative (logit or probit) likelihood of a latent GP.

:math:`K \ge 3` ordered categories coded :math:`0, \dots, K-1`, a latent value :math:`f_i` per
observation and :math:`K - 1` ordered cut-points :math:`c_0 < \dots < c_{K-2}`:

.. math::
   P(y_i \le k \mid f_i, c) = F(c_k - f_i), \qquad
   p(y_i = k \mid f_i, c) = F(c_k - f_i) - F(c_{k-1} - f_i),

with :math:`c_{-1} = -\infty`, :math:`c_{K-1} = +\infty` and :math:`F` the logistic CDF
(``link="logit"``, the proportional-odds model of McCullagh 1980, eq. 2.4) or the standard
normal CDF (``link="probit"``; for a GP latent function Chu & Ghahramani 2005, JMLR 6,
eqs. 1–4, whose noise :math:`\sigma` is absorbed here into the scale of :math:`f` and :math:`c`).
This is PyMC's ``OrderedLogistic`` / ``OrderedProbit`` with ``eta = f``.

Identification: adding a constant to :math:`f` and to every cut-point leaves the likelihood
unchanged, so a GP mean with an intercept (a constant or a linear mean with intercept) is not
identified together with the cut-points. The latent GP of an ordinal model has the zero mean
(``mean=None``); ``mean="constant"`` and ``mean="linear"`` are refused with that reason
(:func:`check_ordinal_mean`); a ``pm.gp.mean.Mean`` object is the user's responsibility.

Derivatives. With :math:`a = c_{y} - f`, :math:`b = c_{y-1} - f`, :math:`Z = F(a) - F(b)`,
:math:`\ell = \log Z` and the density ratios :math:`p_a = F'(a)/Z`, :math:`p_b = F'(b)/Z`,
:math:`\kappa = F''/F'`, :math:`\lambda = F'''/F'` (logit: :math:`\kappa = 1 - 2\sigma`,
:math:`\lambda = 1 - 6\sigma(1-\sigma)`; probit: :math:`\kappa = -x`, :math:`\lambda = x^2 - 1`),
and :math:`\partial_f = -(\partial_a + \partial_b)`:

.. math::
   \ell' = \delta = p_b - p_a, \qquad
   \ell'' = -w, \; w = \delta^2 + \kappa_b p_b - \kappa_a p_a, \qquad
   \ell''' = 2\delta w + p_b(\lambda_b + \kappa_b\delta) - p_a(\lambda_a + \kappa_a\delta),

from :math:`\partial_a p_a = \kappa_a p_a - p_a^2`, :math:`\partial_b p_a = p_a p_b`,
:math:`\partial_b p_b = \kappa_b p_b + p_b^2`, :math:`\partial_a p_b = -p_a p_b`. In the
cut-points, :math:`\ell` depends on :math:`c_y` (through :math:`a`) and on :math:`c_{y-1}`
(through :math:`b`):

.. math::
   \partial_{c_y}(\ell, \ell', \ell'') &= \bigl(p_a,\; -p_a(\delta + \kappa_a),\;
       p_a(2\delta(\delta + \kappa_a) + \kappa_b p_b + \lambda_a - \kappa_a p_a)\bigr), \\
   \partial_{c_{y-1}}(\ell, \ell', \ell'') &= \bigl(-p_b,\; p_b(\delta + \kappa_b),\;
       -p_b(2\delta(\delta + \kappa_b) + \lambda_b + \kappa_b p_b - \kappa_a p_a)\bigr).

For the logit link these reduce to the closed forms used in the code
(:math:`\ell = \log\sigma(a) + \log\sigma(-b) + \log(1 - e^{b-a})`,
:math:`\ell' = \sigma(b) - \sigma(-a)`, :math:`\ell'' = -\sigma(a)\sigma(-a) - \sigma(b)\sigma(-b)`,
:math:`p_a = \sigma(-a) + 1/(e^{a-b} - 1)`, :math:`p_b = \sigma(b) + 1/(e^{a-b} - 1)`), which are
exact in the tails. For the probit link :math:`Z` is evaluated on the side of 0 where it does
not cancel (reflecting :math:`(a, b) \to (-b, -a)` when :math:`b > 0`) as
:math:`Z = \Phi(a)(1 - \rho)`, :math:`\rho = \Phi(b)/\Phi(a) = \exp(\log\Phi(b) - \log\Phi(a))`,
with :math:`p_a = h(a)/(1 - \rho)`, :math:`p_b = h(b)\rho/(1 - \rho)` and :math:`h` the inverse
Mills ratio of :func:`~bayes_gp.latent.likelihoods.normal_hazard`: finite far into the tails.

Log-concave in :math:`f` for both links: :math:`F` has a log-concave density, so :math:`\log
(F(a) - F(b))` is concave in the shift (Pratt 1981; Prékopa's theorem), and
:math:`0 < w < 1` (probit: :math:`w = 1 - \mathrm{Var}` of a standard normal truncated to
:math:`[b, a]`) or :math:`< 1/2` (logit: :math:`w = \sigma(a)\sigma(-a) + \sigma(b)\sigma(-b)`).

References
----------
McCullagh, P. (1980). Regression models for ordinal data. JRSS B 42(2), 109–142.
Chu, W., Ghahramani, Z. (2005). Gaussian processes for ordinal regression. JMLR 6, 1019–1041.
Pratt, J. W. (1981). Concavity of the log likelihood. JASA 76, 103–106.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.polynomial.hermite import hermgauss
from scipy.special import expit, log_ndtr, logit, ndtr, ndtri

from bayes_gp.latent.likelihoods import LatentLikelihood, _as_finite_vector, normal_hazard

__all__ = ["Ordinal", "ordinal_codes", "check_ordinal_mean", "check_cutpoint_prior",
           "CUTPOINT_SD"]  # fmt: skip

#: The prior sd of each cut-point around its data-based centre (:meth:`Ordinal.cutpoint_centres`);
#: brms's default scale for thresholds of cumulative models (``student_t(3, 0, 2.5)``).
CUTPOINT_SD = 2.5


def ordinal_codes(y) -> tuple[np.ndarray, tuple[str, ...] | None]:
    """The ordinal response as float codes ``0..K-1`` and the category labels (``None`` for
    integer codes): an ordered pandas ``Categorical`` (or a Series of that dtype) gives its
    codes and its categories in order; anything else is returned as floats for
    :class:`Ordinal` to check. A ``ValueError`` for an unordered categorical, a missing value or
    a declared category that no observation has."""
    dtype = getattr(y, "dtype", None)
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        pd = None
    if pd is not None and isinstance(dtype, pd.CategoricalDtype):
        cat = pd.Categorical(y)
        if not cat.ordered:
            raise ValueError(
                "the ordinal likelihood needs ordered categories: `y` is an unordered "
                "Categorical; make it ordered (pd.Categorical(y, categories=[...], "
                "ordered=True)) or code it 0..K-1"
            )
        codes = np.asarray(cat.codes)
        if np.any(codes < 0):
            i = int(np.argmax(codes < 0))
            raise ValueError(f"the ordinal `y` has a missing value at index {i}")
        labels = tuple(str(c) for c in cat.categories)
        unused = [labels[k] for k in range(len(labels)) if not np.any(codes == k)]
        if unused:
            raise ValueError(
                f"the ordinal `y` has categories with no observation: {unused}; their "
                "cut-points would be identified by the prior alone. Remove them "
                "(y.cat.remove_unused_categories()) or merge them with a neighbour"
            )
        return codes.astype(float), labels
    try:
        a = np.asarray(getattr(y, "to_numpy", lambda: y)(), dtype=float)
    except (TypeError, ValueError):
        raise ValueError(
            "the ordinal `y` must be integer category codes 0..K-1 or an ordered pandas "
            f"Categorical, got {np.asarray(y).dtype} values"
        ) from None
    return (a[:, 0] if a.ndim == 2 and a.shape[1] == 1 else a), None


def check_ordinal_mean(mean) -> None:
    """A ``ValueError`` for a GP mean with an intercept (``"constant"``, ``"linear"``): it is not
    identified together with the cut-points (module docstring)."""
    if isinstance(mean, str) and mean in ("constant", "linear"):
        raise ValueError(
            f"mean={mean!r} is not available with the ordinal likelihood: the mean's intercept "
            "and the cut-points are not identified together (adding a constant to f and to "
            "every cut-point leaves the likelihood unchanged). The cut-points carry the "
            "location; use mean=None or 'zero' (the default, zero), or a pm.gp.mean.Mean "
            "without an intercept"
        )


def check_cutpoint_prior(rv, n_cut: int) -> None:
    """A ``ValueError`` unless the cut-points' variable ``rv`` (in the current PyMC model) has
    ``n_cut`` values and PyMC's ``ordered`` transform, which keeps them increasing under NUTS
    and the type-II fit (a user's prior: ``priors={"cutpoints": lambda n: pm.Normal(n, 0, 3,
    shape=K - 1, transform=pm.distributions.transforms.ordered, initval=...)}``)."""
    import pymc as pm

    model = pm.modelcontext(None)
    name = getattr(rv, "name", None) or "cutpoints"
    ordered = type(pm.distributions.transforms.ordered)
    if rv not in model.rvs_to_values or not isinstance(model.rvs_to_transforms.get(rv), ordered):
        raise ValueError(
            f"the prior of {name!r} must be a random variable with PyMC's ordered transform "
            "(transform=pm.distributions.transforms.ordered) so that the cut-points stay "
            "increasing; fixed cut-points are not supported"
        )
    shape = rv.type.shape
    if None in shape:
        shape = tuple(int(d) for d in rv.shape.eval())
    if tuple(shape) != (n_cut,):
        raise ValueError(f"the prior of {name!r} must have shape ({n_cut},) (K - 1 cut-points), "
                         f"got {tuple(shape)}")  # fmt: skip


def _log1mexp(x: np.ndarray) -> np.ndarray:
    r""":math:`\log(1 - e^{x})` for :math:`x \le 0`, accurate for every :math:`x` (Mächler 2012):
    ``log(-expm1(x))`` near 0, ``log1p(-exp(x))`` below :math:`-\log 2`."""
    x = np.asarray(x, float)
    with np.errstate(divide="ignore"):
        return np.where(x > -np.log(2.0), np.log(-np.expm1(np.minimum(x, 0.0))),
                        np.log1p(-np.exp(np.minimum(x, -np.log(2.0)))))  # fmt: skip


@dataclass(frozen=True, eq=False)
class Ordinal(LatentLikelihood):
    r"""Ordinal categories :math:`y_i \in \{0, \dots, K-1\}` with cumulative link ``link``
    (``"logit"`` or ``"probit"``) and the :math:`K - 1` cut-points as its parameter
    ``cutpoints`` (module docstring for the model, its derivatives and its identification).

    ``phi`` is the vector :math:`(c_0, \dots, c_{K-2})`, strictly increasing: one parameter
    name, ``cutpoints``, of :attr:`n_phi` :math:`= K - 1` values. ``n_categories``: :math:`K`
    (default: ``max(y) + 1``, and then every category must be observed: a category without
    observations has cut-points that only the prior identifies). ``labels``: the categories'
    names, for output.
    """

    log_concave = True  # 0 < W < 1 (module docstring)

    link: str = "logit"
    n_categories: int | None = None
    labels: tuple[str, ...] | None = None

    def __post_init__(self):
        try:
            y = _as_finite_vector("y", self.y)
        except ValueError as err:
            raise ValueError(f"the ordinal {err}; categories are codes 0..K-1") from None
        if self.link not in ("logit", "probit"):
            raise ValueError(f"`link` must be 'logit' or 'probit', got {self.link!r}")
        frac = y != np.round(y)
        if np.any(frac):
            i = int(np.argmax(frac))
            raise ValueError(
                f"the ordinal `y` must be integer category codes 0..K-1; y[{i}] = {y[i]:g} is "
                "not an integer"
            )
        if np.any(y < 0):
            i = int(np.argmax(y < 0))
            raise ValueError(
                f"the ordinal `y` must be category codes 0..K-1; y[{i}] = {y[i]:g} is negative"
            )
        infer = self.n_categories is None
        K = int(y.max()) + 1 if infer else int(self.n_categories)
        if K < 3:
            raise ValueError(
                f"the ordinal likelihood needs at least 3 categories, got {K}: for two "
                "categories use likelihood='bernoulli' (the same model with one cut-point)"
            )
        if np.any(y > K - 1):
            i = int(np.argmax(y > K - 1))
            raise ValueError(f"y[{i}] = {y[i]:g} is above the last category {K - 1}")
        if infer:
            counts = np.bincount(y.astype(np.int64), minlength=K)
            unused = np.flatnonzero(counts == 0)
            if unused.size:
                raise ValueError(
                    f"the ordinal `y` has categories with no observation: {unused.tolist()} "
                    f"(of 0..{K - 1}); their cut-points would be identified by the prior alone. "
                    "Recode the categories consecutively, or merge an empty one with a neighbour"
                )
        if self.labels is not None and len(self.labels) != K:
            raise ValueError(f"`labels` has {len(self.labels)} names for {K} categories")
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "n_categories", K)
        object.__setattr__(self, "param_names", ("cutpoints",))
        object.__setattr__(self, "_k", y.astype(np.int64))

    # ------------------------------------------------------------------ parameters
    @property
    def n_phi(self) -> int:
        """The length of ``phi``: :math:`K - 1` cut-points."""
        return self.n_categories - 1

    def _cutpoints(self, phi) -> np.ndarray:
        """``phi`` as the vector of :math:`K - 1` finite, strictly increasing cut-points."""
        c = np.asarray(phi, dtype=float).reshape(-1)
        if c.size != self.n_phi:
            raise ValueError(
                f"Ordinal with {self.n_categories} categories takes {self.n_phi} cut-points "
                f"(`cutpoints`), got {c.size}"
            )
        if not (np.all(np.isfinite(c)) and np.all(np.diff(c) > 0)):
            raise ValueError(f"the cut-points must be finite and strictly increasing, got {c}")
        return c

    def _cut_arrays(self, phi) -> list[np.ndarray]:
        """``phi`` as :math:`K - 1` arrays (one value, or one per posterior draw, broadcasting
        against the latent values)."""
        if len(phi) != self.n_phi:
            raise ValueError(
                f"Ordinal with {self.n_categories} categories takes {self.n_phi} cut-points, "
                f"got {len(phi)}"
            )
        return [np.asarray(p, float) for p in phi]

    def cutpoint_centres(self) -> np.ndarray:
        r"""The cut-points that reproduce the observed cumulative proportions at :math:`f = 0`,
        :math:`F^{-1}((n_{\le k} + 1/2)/(n + 1))`: the centres of the default prior."""
        counts = np.bincount(self._k, minlength=self.n_categories)
        cum = (np.cumsum(counts)[:-1] + 0.5) / (self.n + 1.0)
        return logit(cum) if self.link == "logit" else ndtri(cum)

    # ------------------------------------------------------------------ the CDF
    def _F(self, x):
        return expit(x) if self.link == "logit" else ndtr(x)

    def _Finv(self, u):
        return logit(u) if self.link == "logit" else ndtri(u)

    def _bounds(self, f, c) -> tuple[np.ndarray, np.ndarray]:
        """:math:`a = c_y - f` and :math:`b = c_{y-1} - f` (infinite at the ends)."""
        ext = np.concatenate([[-np.inf], c, [np.inf]])
        f = np.asarray(f, float)
        return ext[self._k + 1] - f, ext[self._k] - f

    # ------------------------------------------------------------------ log density
    def log_density(self, f, phi=()):
        c = self._cutpoints(phi)
        a, b = self._bounds(f, c)
        if self.link == "logit":
            return self._logit_parts(a, b)[0]
        return self._probit_parts(a, b)[0]

    def _logit_parts(self, a, b):
        r""":math:`\ell = \log\sigma(a) + \log\sigma(-b) + \log(1 - e^{b - a})` and
        :math:`p_a`, :math:`p_b` (module docstring)."""
        with np.errstate(over="ignore", invalid="ignore"):
            gap = a - b  # > 0, f-independent; inf at the end categories
            logp = -np.logaddexp(0.0, -a) - np.logaddexp(0.0, b) + _log1mexp(-gap)
            inv = 1.0 / np.expm1(gap)  # 0 at the end categories
        return logp, expit(-a) + inv, expit(b) + inv

    def _probit_parts(self, a, b):
        r""":math:`\ell = \log(\Phi(a) - \Phi(b))`, :math:`p_a`, :math:`p_b` on the side of 0
        where :math:`Z` does not cancel (module docstring)."""
        flip = b > 0  # both bounds above 0: Z = Phi(-b) - Phi(-a)
        hi = np.where(flip, -b, a)
        lo = np.where(flip, -a, b)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            lhi, llo = log_ndtr(hi), log_ndtr(lo)
            lrho = llo - lhi  # log Phi(lo) / Phi(hi) < 0
            logp = lhi + _log1mexp(lrho)
            one_minus = -np.expm1(lrho)
            rho = np.exp(lrho)
            p_hi = normal_hazard(hi) / one_minus
            p_lo = np.where(np.isneginf(lo), 0.0, normal_hazard(lo) * rho / one_minus)
        p_a = np.where(flip, p_lo, p_hi)  # phi(a)/Z: a is -lo when flipped
        p_b = np.where(flip, p_hi, p_lo)
        return logp, p_a, p_b

    def _ratios(self, a, b):
        r"""``(logp, p_a, p_b, kp_a, kp_b, lp_a, lp_b)``: :math:`\ell`, the density ratios and
        :math:`\kappa p`, :math:`\lambda p` at both bounds, 0 where a bound is infinite."""
        if self.link == "logit":
            logp, p_a, p_b = self._logit_parts(a, b)
            sa, sb = expit(a), expit(b)
            kp_a, kp_b = (1.0 - 2.0 * sa) * p_a, (1.0 - 2.0 * sb) * p_b
            lp_a = (1.0 - 6.0 * sa * (1.0 - sa)) * p_a
            lp_b = (1.0 - 6.0 * sb * (1.0 - sb)) * p_b
            return logp, p_a, p_b, kp_a, kp_b, lp_a, lp_b
        logp, p_a, p_b = self._probit_parts(a, b)
        with np.errstate(invalid="ignore"):
            fa, fb = np.isfinite(a), np.isfinite(b)
            kp_a = np.where(fa, -a * p_a, 0.0)
            kp_b = np.where(fb, -b * p_b, 0.0)
            lp_a = np.where(fa, (a * a - 1.0) * p_a, 0.0)
            lp_b = np.where(fb, (b * b - 1.0) * p_b, 0.0)
        return logp, p_a, p_b, kp_a, kp_b, lp_a, lp_b

    def derivatives(self, f, phi=()):
        c = self._cutpoints(phi)
        a, b = self._bounds(f, c)
        if self.link == "logit":  # closed forms (module docstring)
            logp, _pa, _pb = self._logit_parts(a, b)
            sa, sb = expit(a), expit(b)
            va, vb = sa * (1.0 - sa), sb * (1.0 - sb)
            d1 = sb - expit(-a)
            return logp, d1, -(va + vb), va * (1.0 - 2.0 * sa) - vb * (1.0 - 2.0 * (1.0 - sb))
        logp, p_a, p_b, kp_a, kp_b, lp_a, lp_b = self._ratios(a, b)
        delta = p_b - p_a
        w = np.clip(delta * delta + kp_b - kp_a, 0.0, 1.0)
        d3 = 2.0 * delta * w + lp_b + kp_b * delta - lp_a - kp_a * delta
        return logp, delta, -w, d3

    def phi_derivatives(self, f, phi=()):
        r"""Rows :math:`j = 0..K-2`, each of ``f``'s shape (``(..., n)``: the variational
        quadrature passes several latent values per observation): the derivatives in
        :math:`c_j`, non-zero at the observations in categories :math:`j` (:math:`c_j` their
        upper cut-point) and :math:`j + 1` (their lower one); module docstring."""
        c = self._cutpoints(phi)
        a, b = self._bounds(f, c)
        _logp, p_a, p_b, kp_a, kp_b, lp_a, lp_b = self._ratios(a, b)
        delta = p_b - p_a
        up = (p_a, -(p_a * delta + kp_a),
              2.0 * delta * (p_a * delta + kp_a) + p_a * kp_b + lp_a - kp_a * p_a)  # fmt: skip
        low = (-p_b, p_b * delta + kp_b,
               -(2.0 * delta * (p_b * delta + kp_b) + lp_b + kp_b * p_b - p_b * kp_a))  # fmt: skip
        K1 = self.n_phi
        out = [np.zeros((K1, *a.shape)) for _ in range(3)]  # f of shape (..., n)
        k = self._k
        for j in range(K1):
            is_up, is_low = k == j, k == j + 1
            for o, u, lo in zip(out, up, low, strict=True):
                o[j] = np.where(is_up, u, 0.0) + np.where(is_low, lo, 0.0)
        return out[0], out[1], out[2]

    # ------------------------------------------------------------------ the response
    outcome = "ordinal"

    def max_value(self, size=None):
        return float(self.n_categories - 1)

    def probabilities(self, f, phi=()) -> np.ndarray:
        r""":math:`P(y = k \mid f, c)` for :math:`k = 0..K-1`, shape ``(*f.shape, K)`` (each
        cut-point may be an array broadcasting against ``f``)."""
        cum = self._cumulative(f, phi)
        shape = cum[0].shape
        F = np.stack([np.zeros(shape), *cum, np.ones(shape)], axis=-1)
        return np.diff(F, axis=-1)

    def predictive_probabilities(self, phi, mean, var, n_nodes: int = 64) -> np.ndarray:
        r""":math:`P(y_* = k) = \int P(y = k \mid f, c)\, N(f \mid \mu_i, s_i^2)\, df` per
        input, ``(m, K)``, by Gauss–Hermite quadrature (``n_nodes`` nodes, as
        :mod:`bayes_gp.latent.predictive`)."""
        x, w = hermgauss(n_nodes)
        sd = np.sqrt(np.maximum(np.asarray(var, float), 0.0))
        f = np.asarray(mean, float)[None, :] + np.sqrt(2.0) * sd[None, :] * x[:, None]
        return np.einsum("j,jmk->mk", w / np.sqrt(np.pi), self.probabilities(f, phi))

    def _cumulative(self, f, phi) -> list[np.ndarray]:
        r""":math:`F(c_k - f)`, :math:`k = 0..K-2`, broadcast to a common shape."""
        f = np.asarray(f, float)
        cum = [self._F(ck - f) for ck in self._cut_arrays(phi)]
        return list(np.broadcast_arrays(*cum))

    def response_mean(self, f, phi=(), size=None):
        r""":math:`E[y \mid f] = \sum_{k=0}^{K-2} P(y > k) = \sum_k (1 - F(c_k - f))`: the
        expected category index, increasing in :math:`f`."""
        return sum(1.0 - F for F in self._cumulative(f, phi))

    def response_variance(self, f, phi=(), size=None):
        r""":math:`E[y^2] - E[y]^2`, :math:`E[y^2] = \sum_k (2k + 1) P(y > k)`."""
        surv = [1.0 - F for F in self._cumulative(f, phi)]
        m = sum(surv)
        second = sum((2.0 * k + 1.0) * s for k, s in enumerate(surv))
        return np.maximum(second - m * m, 0.0)

    def draw(self, f, phi, rng, size=None):
        r"""One category per entry of ``f``: :math:`y = \#\{k : F(c_k - f) < u\}`,
        :math:`u \sim U(0, 1)` (the inverse CDF)."""
        cum = self._cumulative(f, phi)
        u = rng.uniform(size=cum[0].shape)
        return sum((F < u).astype(float) for F in cum)

    def cdf(self, f, phi=()):
        c = self._cutpoints(phi)
        a, b = self._bounds(f, c)
        return self._F(b), self._F(a)  # F(-inf) = 0, F(inf) = 1 at the ends

    def cdf_values(self, y, f, phi=(), size=None):
        r""":math:`F(c_k - f)` for :math:`k = \lfloor y \rfloor` in :math:`0..K-2`, 0 below 0,
        1 from :math:`K - 1`."""
        k = np.floor(np.asarray(y, float))
        cum = self._cumulative(f, phi)
        shape = np.broadcast_shapes(k.shape, cum[0].shape)
        out = np.where(k >= self.n_categories - 1, 1.0, 0.0) * np.ones(shape)
        for j, F in enumerate(cum):
            out = np.where(k == j, F, out)
        return out

    def latent_threshold(self, y, u, phi=(), size=None):
        r""":math:`c_k - F^{-1}(1 - u)`, :math:`k = \lfloor y \rfloor`: :math:`P(Y \le k \mid f)
        = F(c_k - f) = P(T > f)` for :math:`T = c_k - \varepsilon`, :math:`\varepsilon \sim F`;
        :math:`-\infty` below 0, :math:`+\infty` from :math:`K - 1`."""
        k = np.floor(np.asarray(y, float))
        cuts = self._cut_arrays(phi)
        e = self._Finv(1.0 - np.asarray(u, float))
        shape = np.broadcast_shapes(k.shape, e.shape, *(c.shape for c in cuts))
        out = np.where(k < 0, -np.inf, np.inf) * np.ones(shape)
        with np.errstate(invalid="ignore"):
            for j, cj in enumerate(cuts):
                out = np.where(k == j, cj - e, out)
        return out

    def threshold_scale(self, y, phi=(), size=None):
        r"""The sd of :math:`\varepsilon`: :math:`\pi/\sqrt3` (logistic) or 1 (probit)."""
        return np.full(np.shape(y), np.pi / np.sqrt(3.0) if self.link == "logit" else 1.0)

    def with_data(self, y, size=None):
        """Held-out categories (codes, or labels of :attr:`labels`) under the same model: the
        same :math:`K`; categories need not all occur."""
        if self.labels is not None and np.asarray(y).dtype.kind in "OUS":
            index = {lab: k for k, lab in enumerate(self.labels)}
            y = [index[str(v)] for v in np.asarray(y)]
        return Ordinal(np.asarray(y, float), link=self.link, n_categories=self.n_categories,
                       labels=self.labels)  # fmt: skip
