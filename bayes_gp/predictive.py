r"""Closed-form Gaussian-process predictive equations, in NumPy (float64, Cholesky, no inverses).

* Predictive mean and variance: PRML eqs. (6.66)–(6.67),
  R&W eqs. (2.25)–(2.26): :math:`m = k^\top C^{-1} t`, :math:`\sigma^2 = c - k^\top C^{-1} k`.
* Log marginal likelihood: PRML eq. (6.69), §6.4.3, R&W eq. (2.30),
  :math:`\log p(t) = -\tfrac12 t^\top C^{-1} t - \sum_i \log L_{ii} - \tfrac n2 \log 2\pi`.
* Leave-one-out predictive densities: R&W eqs. (5.10)–(5.12),
  :math:`\mu_i = t_i - [C^{-1}t]_i/[C^{-1}]_{ii}`, :math:`\sigma_i^2 = 1/[C^{-1}]_{ii}`.

All functions take ``C`` = the covariance of the observations (kernel Gram matrix plus noise) and
``t`` = observations minus the prior mean.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import cho_solve, lapack, solve_triangular
from scipy.special import ndtr, ndtri

from bayes_gp.linalg import jittered_cholesky
from bayes_gp.protocol import Bands, HeldOutPredictive

__all__ = [
    "GaussianFactor",
    "JitterWarning",
    "factorize",
    "log_marginal_likelihood",
    "predict",
    "loo_log_density",
    "inverse_diagonal",
    "gaussian_columns",
    "gaussian_scores",
    "binary_scores",
    "held_out_vector",
    "gaussian_mixture_cdf",
    "gaussian_mixture_quantiles",
    "PRIOR_PREDICTIVE_MAX_N",
    "TRTRI_BLOCKED_MIN_N",
    "mixture_prediction",
    "CI_PROB",
    "CI_QUANTILES",
    "Z_CI",
    "Prediction",
    "GaussianPredictions",
]

LOG_2PI = float(np.log(2.0 * np.pi))
#: Probability of every central interval the package reports: the ``lower``/``upper`` of every
#: prediction, the predictive bands and the report's HDIs (ArviZ's default, 94%).
CI_PROB = 0.94
#: The quantiles that bound the central ``CI_PROB`` interval, :math:`((1 - p)/2, (1 + p)/2)`.
CI_QUANTILES = (0.03, 0.97)
#: :math:`\Phi^{-1}(0.97)`: a Gaussian's central 94% interval is mean ± ``Z_CI`` sd.
Z_CI = 1.880793608151251
#: Most training inputs at which a model's ``prior_predictive`` draws joint data sets (one
#: Cholesky factor of that size per data set).
PRIOR_PREDICTIVE_MAX_N = 2000
#: From this many rows :func:`inverse_diagonal` inverts the factor with the blocked ``trtri``
#: (:func:`bayes_gp.solvers._native_linalg.lower_inverse`) instead of LAPACK's: at n = 200 it
#: saves 0.25 ms per draw, 0.5 s over 2000 draws, against 1.4 s to compile it once per machine.
TRTRI_BLOCKED_MIN_N = 200


@dataclass(frozen=True)
class GaussianFactor:
    """Cholesky factor of the observation covariance and the weights :math:`\\alpha = C^{-1}t`."""

    L: np.ndarray
    alpha: np.ndarray
    t: np.ndarray
    jitter: float


class JitterWarning(UserWarning):
    """Jitter had to be added to a covariance matrix to factorise it."""


def factorize(C: np.ndarray, t: np.ndarray) -> GaussianFactor:
    """Factor :math:`C = LL^\\top` and solve :math:`\\alpha = C^{-1}t`.

    If the Cholesky factorisation fails, jitter is added to the diagonal and grown tenfold until
    it succeeds (:func:`bayes_gp.linalg.jittered_cholesky`), with a :class:`JitterWarning` that
    says how much; a matrix that cannot be factorised even then raises
    :class:`bayes_gp.NotPSDError` with advice.
    """
    L, jitter = jittered_cholesky(C)
    if jitter > 0:
        warnings.warn(
            f"the covariance matrix was not numerically positive definite; added jitter "
            f"{jitter:.3g} to its diagonal (consider more noise or removing duplicate inputs)",
            JitterWarning,
            stacklevel=2,
        )
    alpha = cho_solve((L, True), t, check_finite=False)
    return GaussianFactor(L, alpha, np.asarray(t, float), jitter)


def log_marginal_likelihood(fac: GaussianFactor) -> float:
    r"""Log marginal likelihood, PRML eq. (6.69), R&W eq. (2.30)."""
    n = fac.t.shape[0]
    return float(-0.5 * fac.t @ fac.alpha - np.sum(np.log(np.diag(fac.L))) - 0.5 * n * LOG_2PI)


def predict(
    fac: GaussianFactor, K_star: np.ndarray, k_star_star: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    r"""Predictive mean and covariance of the latent function.

    Parameters
    ----------
    fac : GaussianFactor
        From :func:`factorize` on the training data.
    K_star : ndarray, shape (n, m)
        Cross-covariance :math:`k(X, X_*)` (the columns are the :math:`k` of eq. 27).
    k_star_star : ndarray, shape (m,) or (m, m)
        Prior variances (a vector) or covariance (a matrix) at the new points: :math:`c`.

    Returns
    -------
    mean : ndarray, shape (m,)
        :math:`k^\top C^{-1} t` (PRML eq. 6.66, R&W eq. 2.25).
    cov : ndarray, shape (m,) or (m, m)
        :math:`c - k^\top C^{-1} k` (PRML eq. 6.67, R&W eq. 2.26), same shape as ``k_star_star``.
    """
    mean = K_star.T @ fac.alpha
    V = solve_triangular(fac.L, K_star, lower=True, check_finite=False)
    if np.ndim(k_star_star) == 1:
        var = k_star_star - np.sum(V * V, axis=0)
        return mean, np.maximum(var, 0.0)
    return mean, k_star_star - V.T @ V


def inverse_diagonal(L: np.ndarray) -> np.ndarray:
    r"""The diagonal of :math:`C^{-1}` from the lower Cholesky factor :math:`L` of :math:`C`:
    :math:`(C^{-1})_{ii} = \lVert L^{-1} e_i \rVert^2`, the squared column norms of
    :math:`L^{-1}`.

    :math:`L^{-1}` by LAPACK ``trtri`` (:math:`n^3/3` flops; a triangular solve against the
    identity takes :math:`n^3`, ``potri``'s whole :math:`C^{-1}` :math:`2n^3/3`), from
    :data:`TRTRI_BLOCKED_MIN_N` rows by the blocked ``trtri`` of
    :func:`bayes_gp.solvers._native_linalg.lower_inverse` (one thread: 0.27 against 1.12 ms at
    n = 300, 6.4 against 14.8 ms at n = 1000; compiled once per machine, 1.4 s, so not for
    the small matrices where it saves less). It runs once per posterior draw in the exact
    GPs' leave-one-out pass.
    """
    if L.shape[0] >= TRTRI_BLOCKED_MIN_N:
        from bayes_gp.solvers._native_linalg import lower_inverse

        Linv = lower_inverse(L)
    else:
        Linv, info = lapack.dtrtri(L, lower=1)
        if info != 0:  # pragma: no cover - a factor with a zero pivot is refused by factorize
            raise np.linalg.LinAlgError(f"LAPACK dtrtri failed (info={info})")
    return np.einsum("ij,ij->j", Linv, Linv)


def loo_log_density(fac: GaussianFactor) -> np.ndarray:
    r"""Exact leave-one-out log predictive densities :math:`\log p(t_i \mid t_{-i})`, R&W (5.10)–(5.12).

    These are the pointwise terms for PSIS-LOO of a non-factorising Gaussian model (Bürkner,
    Gabry & Vehtari 2021).
    """
    cinv_diag = inverse_diagonal(fac.L)
    var = 1.0 / cinv_diag
    resid = fac.alpha / cinv_diag  # t_i - mu_i
    return -0.5 * np.log(var) - 0.5 * resid**2 / var - 0.5 * LOG_2PI


# ------------------------------------------------------------- prediction tables and scores
def gaussian_columns(pred_f, pred_y) -> dict[str, np.ndarray]:
    """Columns of a predictions table from the predictive distributions of :math:`f_*` and of
    :math:`y_*` (``Prediction``-like: ``mean``, ``sd``, ``lower``, ``upper``): the mean, both
    standard deviations and the central 94% interval of :math:`y_*`."""
    return {"mean": pred_f.mean, "sd_f": pred_f.sd, "sd_y": pred_y.sd,
            "lower_94": pred_y.lower, "upper_94": pred_y.upper}  # fmt: skip


def gaussian_scores(y: np.ndarray, columns: dict) -> dict[str, float]:
    """Held-out scores of :func:`gaussian_columns`: RMSE, the mean log predictive density of
    the Gaussian with that mean and ``sd_y`` (exact for a type-II fit, moment-matched for a NUTS
    mixture) and the coverage of the 94% interval."""
    y = np.asarray(y, float)
    var = np.asarray(columns["sd_y"], float) ** 2
    resid = y - np.asarray(columns["mean"], float)
    lpd = -0.5 * (np.log(2 * np.pi * var) + resid**2 / var)
    inside = (y >= columns["lower_94"]) & (y <= columns["upper_94"])
    return {
        "rmse": float(np.sqrt(np.mean(resid**2))),
        "mean_log_predictive_density": float(np.mean(lpd)),
        "coverage_94": float(np.mean(inside)),
    }


def binary_scores(t: np.ndarray, p: np.ndarray) -> dict[str, float]:
    """Held-out scores of predicted probabilities ``p`` of the 0/1 labels ``t``: accuracy at
    0.5, log loss and Brier score."""
    t = np.asarray(t, float)
    p = np.asarray(p, float)
    pc = np.clip(p, 1e-15, 1 - 1e-15)
    return {
        "accuracy": float(np.mean((p > 0.5) == (t == 1))),
        "log_loss": float(-np.mean(t * np.log(pc) + (1 - t) * np.log1p(-pc))),
        "brier": float(np.mean((p - t) ** 2)),
    }


def held_out_vector(y, m: int) -> np.ndarray:
    """Held-out observations as a finite float vector of length ``m`` (the rows of ``X_new``),
    or a ``ValueError`` naming what is wrong."""
    try:
        y = np.asarray(getattr(y, "to_numpy", lambda: y)(), dtype=float).ravel()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"held-out `y` must be numeric: {exc}") from None
    if y.shape[0] != m:
        raise ValueError(f"`X_new` has {m} rows but held-out `y` has {y.shape[0]}")
    if not np.all(np.isfinite(y)):
        raise ValueError(f"held-out `y` has non-finite values at {np.flatnonzero(~np.isfinite(y))}")
    return y


def gaussian_mixture_cdf(y: np.ndarray, means: np.ndarray, variances: np.ndarray) -> np.ndarray:
    r"""The CDF at ``y`` of the equal-weight mixture of Gaussians :math:`N(\mu_s, v_s)` (rows
    ``s`` of ``means`` and ``variances``, shape ``(S, m)``): the predictive CDF of a NUTS fit,
    whose predictive distribution is the mixture over posterior draws,

    .. math:: F(y_i) = \frac1S \sum_{s=1}^S \Phi\left(\frac{y_i - \mu_{si}}{\sqrt{v_{si}}}\right).
    """
    means = np.atleast_2d(np.asarray(means, float))
    sd = np.sqrt(np.atleast_2d(np.asarray(variances, float)))
    return ndtr((np.asarray(y, float)[None, :] - means) / sd).mean(axis=0)


def gaussian_mixture_quantiles(
    means: np.ndarray, sds: np.ndarray, probs: Sequence[float] = CI_QUANTILES
) -> list[np.ndarray]:
    r"""Quantiles of the equal-weight mixtures :math:`\frac1S \sum_s N(\mu_s, s_s^2)`, one per
    column of ``means``/``sds`` ``(S, m)``, by bisection on the mixture CDF
    (:func:`gaussian_mixture_cdf`): one array ``(m,)`` per probability in ``probs`` (default:
    the bounds of the central :data:`CI_PROB` interval).

    The quantile lies between the smallest and the largest component quantile: there every
    component CDF is at most (at least) the probability.
    """
    tiny = np.finfo(float).tiny
    safe = np.maximum(sds, tiny)
    out = []
    for p in probs:
        q = means + sds * ndtri(p)
        lo, hi = q.min(axis=0), q.max(axis=0)
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            with np.errstate(over="ignore", invalid="ignore"):
                cdf = ndtr((mid - means) / safe).mean(axis=0)
            below = cdf < p
            lo = np.where(below, mid, lo)
            hi = np.where(below, hi, mid)
            if np.all(hi - lo <= 4 * np.finfo(float).eps * np.maximum(np.abs(lo), np.abs(hi))):
                break
        out.append(0.5 * (lo + hi))
    return out


#: The dict keys of the previous release's ``LatentGP.predict`` -> the :class:`Prediction`
#: attribute that holds the same numbers.
_OLD_KEYS = {"mean": "mean", "lower_94": "lower", "upper_94": "upper",
             "latent_mean": "latent_mean", "latent_sd": "latent_sd"}  # fmt: skip


@dataclass(frozen=True)
class Prediction:
    r"""Predictive distribution at new inputs: what every model's ``predict`` returns (the
    Gaussian-likelihood models, :class:`~bayes_gp.LatentGP` and its subclasses, the
    hierarchical models).

    Attributes
    ----------
    mean : ndarray (m,)
        The predictive mean (of :math:`f_*`, or of :math:`y_*` with ``include_noise``; for a
        latent GP the predictive mean of :math:`y_*`: expected count, probability, …).
    var : ndarray (m,)
        Marginal predictive variances (of :math:`f_*`, or of :math:`t_*` with ``include_noise``;
        for a latent GP of :math:`y_*`, by quadrature:
        :func:`bayes_gp.latent.predictive.response_moments`).
    cov : ndarray (m, m) or None
        Full predictive covariance when ``diag=False`` (MAP fits).
    lower, upper : ndarray (m,) or None
        Central 94% interval (of :math:`f_*`, or of :math:`y_*` with ``include_noise``: Gaussian
        for a point estimate, the mixture's quantiles over the draws for NUTS; for a latent GP
        the 3% and 97% quantiles of :math:`y_*`'s predictive distribution by quadrature,
        integers for counts: :func:`bayes_gp.latent.predictive.predictive_quantiles`).
    extra : dict
        What the model adds (the jitter it needed, the number of posterior draws mixed, …).
    latent_mean, latent_sd : ndarray (m,) or None
        A latent GP's :math:`f_*` (its mean and sd; mixed over the draws for NUTS); ``None``
        for a Gaussian-likelihood model, whose ``mean`` and ``sd`` are those of :math:`f_*`.
    prob_mean, prob_lower, prob_upper : ndarray (m,) or None
        A Bernoulli or binomial latent GP's probability :math:`\pi_* = \sigma(f_*)` (of a 1;
        of a success per trial): its mean :math:`E[\sigma(f_*)]` (``mean`` divided by the
        trials) and its central 94% credible band, :math:`\sigma` of the 3% and 97% quantiles
        of :math:`f_*` (the link is monotone, so these are the quantiles of :math:`\pi_*`
        exactly) -- the band users plot, where ``lower``/``upper`` of :math:`y_*` are 0 and 1
        (or 0 and the trials). ``None`` for other models.

    ``pred["lower_94"]``-style access (the dict the previous release's ``LatentGP.predict``
    returned) still works for one release, with a ``FutureWarning`` naming the attribute.
    """

    mean: np.ndarray
    var: np.ndarray
    cov: np.ndarray | None = None
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    extra: dict = field(default_factory=dict)
    latent_mean: np.ndarray | None = None
    latent_sd: np.ndarray | None = None
    prob_mean: np.ndarray | None = None
    prob_lower: np.ndarray | None = None
    prob_upper: np.ndarray | None = None

    @property
    def sd(self) -> np.ndarray:
        return np.sqrt(self.var)

    def __getitem__(self, key: str) -> np.ndarray:
        name = _OLD_KEYS.get(key) if isinstance(key, str) else None
        if name is None or getattr(self, name) is None:
            raise KeyError(key)
        warnings.warn(
            f"Prediction[{key!r}] is Prediction.{name} (predict returns a Prediction, no longer "
            "a dict); the dict-style access will stop working in the next release",
            FutureWarning,
            stacklevel=2,
        )
        return getattr(self, name)


class GaussianPredictions:
    """The model-protocol methods of a regression model whose predictive distributions are
    Gaussian (:class:`~bayes_gp.GPRegression`, :class:`~bayes_gp.DeepKernelRegression`): it
    needs ``X``, ``y``, ``predict(X_new, fit, include_noise=...)`` returning a
    :class:`Prediction`, ``_check_new(X_new)`` and ``_predictive_components(Xn, fit)`` returning
    the means and variances ``(S, m)`` of :math:`y_*` per posterior draw (one row for a point
    estimate). Put it before :class:`~bayes_gp.protocol.GPModel` in the bases."""

    @property
    def observed(self) -> np.ndarray:
        return self.y

    def bands(self, grid, fit) -> Bands:
        grid = np.asarray(grid, float).ravel()
        pred_f = self.predict(grid[:, None], fit)
        pred_y = self.predict(grid[:, None], fit, include_noise=True)
        return Bands("regression", self.X[:, 0], self.y, grid, pred_f.mean, pred_f.lower,
                     pred_f.upper, pred_y.lower, pred_y.upper)  # fmt: skip

    def prediction_columns(self, X_new, fit) -> dict[str, np.ndarray]:
        """Mean, sd of :math:`f_*` and of :math:`y_*`, 94% interval of :math:`y_*`."""
        return gaussian_columns(
            self.predict(X_new, fit), self.predict(X_new, fit, include_noise=True)
        )

    def scores(self, y, columns) -> dict[str, float]:
        return gaussian_scores(y, columns)

    def held_out_predictive(self, X_new, y, fit) -> HeldOutPredictive:
        """The predictive CDF of each held-out :math:`y_i` (with noise): Gaussian at a point
        estimate, the mixture over posterior draws for NUTS (:func:`gaussian_mixture_cdf`)."""
        Xn = self._check_new(X_new)
        y = held_out_vector(y, Xn.shape[0])
        means, variances = self._predictive_components(Xn, fit)
        F = gaussian_mixture_cdf(y, means, variances)
        return HeldOutPredictive("cdf", F, F)


def mixture_prediction(means: np.ndarray, variances: np.ndarray, extra: dict) -> Prediction:
    r"""The :class:`Prediction` of per-draw Gaussian predictive means and variances ``(S, m)``:
    one row (a point estimate) gives its Gaussian 94% band; several (posterior draws) their
    equal-weight mixture -- mean by the law of total expectation, variance by the law of total
    variance, band by the mixture's quantiles (:func:`gaussian_mixture_quantiles`).
    ``extra`` becomes the prediction's ``extra``."""
    means, variances = np.asarray(means, float), np.asarray(variances, float)
    if means.shape[0] == 1:
        mean, var = means[0], variances[0]
        sd = np.sqrt(var)
        return Prediction(mean, var, None, mean - Z_CI * sd, mean + Z_CI * sd, extra)
    mean = means.mean(axis=0)
    var = variances.mean(axis=0) + means.var(axis=0)  # law of total variance
    lower, upper = gaussian_mixture_quantiles(means, np.sqrt(variances), CI_QUANTILES)
    return Prediction(mean, var, None, lower, upper, extra)
