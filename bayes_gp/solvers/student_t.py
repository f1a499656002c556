r"""The Student-t process marginal likelihood (Shah, Wilson & Ghahramani 2014) as a strategy
object of :class:`~bayes_gp.StudentTProcessRegression`, and the Student-t predictive numbers.

Shah et al. (2014, AISTATS), Def. 1 and eqs. (2)–(6): with the noise inside the kernel,
:math:`C = K(X, X) + (\sigma^2 + \epsilon) I`, the observations of a Student-t process are

.. math::
   y \sim \mathrm{MVT}_n(\nu, m, C), \qquad
   \log p(y) = \log\Gamma\!\left(\tfrac{\nu+n}{2}\right) - \log\Gamma\!\left(\tfrac{\nu}{2}\right)
   - \tfrac n2 \log\big((\nu-2)\pi\big) - \tfrac12 \log|C|
   - \tfrac{\nu+n}{2} \log\!\left(1 + \frac{\beta}{\nu-2}\right),
   \qquad \beta = (y - m)^\top C^{-1} (y - m),

parameterised by its **covariance** :math:`C` (:math:`\operatorname{cov}(y) = C` for every
:math:`\nu > 2`, eq. 2). PyMC's :class:`pymc.MvStudentT` takes the *scale* matrix :math:`S`
(:math:`\operatorname{cov} = \nu S / (\nu - 2)`), so the model declares
``pm.MvStudentT(nu, mu=m, scale=(nu - 2) / nu * C)``: the same density term by term
(:math:`\tfrac n2\log(\nu\pi) + \tfrac12\log|S| = \tfrac n2 \log((\nu-2)\pi) + \tfrac12\log|C|`
and :math:`(y-m)^\top S^{-1}(y-m)/\nu = \beta/(\nu-2)`), one Cholesky factor of :math:`S`, the
gradient by PyTensor, and an observed variable that ``pm.draw`` can draw from. The noise must be
inside the kernel: a Student-t *latent* process plus independent Gaussian noise is not a
Student-t process and has no closed-form marginal (Shah et al. §3).

Conditioning (Shah et al. Lemma 3, eqs. 8–10): for :math:`y_1` (:math:`n_1` values) and
:math:`y_2` jointly MVT with covariance blocks :math:`C_{ij}`,

.. math::
   y_2 \mid y_1 \sim \mathrm{MVT}_{n_2}\!\left(\nu + n_1,\ \tilde m_2,\
   \frac{\nu + \beta_1 - 2}{\nu + n_1 - 2}\, \tilde C_{22}\right), \quad
   \tilde m_2 = m_2 + C_{21} C_{11}^{-1} (y_1 - m_1), \quad
   \tilde C_{22} = C_{22} - C_{21} C_{11}^{-1} C_{12},

the GP's conditional mean and covariance (R&W eqs. 2.25–2.26) with the covariance scaled by the
data's Mahalanobis distance :math:`\beta_1`, and :math:`\nu + n_1` degrees of freedom. So the
central 94% interval is :math:`\tilde m \pm t^{-1}_{\nu'}(0.97)\, \sqrt{v (\nu' - 2)/\nu'}` with
:math:`\nu' = \nu + n_1` and :math:`v` the (scaled) predictive variance: Student-t quantiles
of the *scale* :math:`\sqrt{v(\nu'-2)/\nu'}`, not Gaussian ones of :math:`\sqrt v`.

Leave-one-out (Lemma 3 with :math:`y_1 = y_{-i}`, :math:`n_1 = n - 1`; the Gaussian case is
R&W eqs. 5.10–5.12): :math:`y_i \mid y_{-i}` is a univariate Student-t with
:math:`\nu + n - 1` degrees of freedom, location and (unscaled) variance those of the GP,

.. math::
   \mu_i = y_i - \frac{[C^{-1}r]_i}{[C^{-1}]_{ii}}, \qquad
   \tilde\sigma_i^2 = \frac{1}{[C^{-1}]_{ii}}, \qquad r = y - m,

and :math:`\beta_{-i} = r_{-i}^\top C_{-i,-i}^{-1} r_{-i} = \beta - [C^{-1}r]_i^2 / [C^{-1}]_{ii}`
(the partitioned inverse: :math:`\beta = \beta_{-i} + (r_i - \tilde\mu_i)^2/\tilde\sigma_i^2`).
Its variance is :math:`\frac{\nu + \beta_{-i} - 2}{\nu + n - 3}\tilde\sigma_i^2` and its squared
scale :math:`s_i^2 = \frac{\nu + \beta_{-i} - 2}{\nu + n - 1}\tilde\sigma_i^2`, so

.. math::
   \log p(y_i \mid y_{-i}) = \log t_{\nu + n - 1}\!\left(\frac{y_i - \mu_i}{s_i}\right) - \log s_i,

which is :math:`\log p(y) - \log p(y_{-i})` exactly (the marginal of an MVT is the MVT of the
sub-vector with the same :math:`\nu`; ``tests/regression/test_tprocess.py`` checks it).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from scipy import stats
from scipy.special import gammaln

from bayes_gp.predictive import CI_QUANTILES, GaussianFactor, inverse_diagonal
from bayes_gp.solvers.exact import FACTOR_CACHE_BYTES, ExactLikelihood, check_dense_memory

__all__ = [
    "StudentTLikelihood",
    "NU_MIN",
    "mvt_logpdf",
    "conditional_scale",
    "t_scale",
    "t_mixture_cdf",
    "t_mixture_quantiles",
    "t_logpdf",
]

#: The degrees of freedom must exceed 2: the covariance parameterisation (eq. 2) needs a finite
#: covariance.
NU_MIN = 2.0


def mvt_logpdf(fac: GaussianFactor, nu: float) -> float:
    r"""Shah et al. eq. (6) from the Cholesky factor of :math:`C` and :math:`\alpha = C^{-1}r`
    (module docstring), in NumPy."""
    n = fac.t.shape[0]
    beta = float(fac.t @ fac.alpha)
    logdet = 2.0 * float(np.sum(np.log(np.diag(fac.L))))
    return float(
        gammaln(0.5 * (nu + n)) - gammaln(0.5 * nu) - 0.5 * n * np.log((nu - 2.0) * np.pi)
        - 0.5 * logdet - 0.5 * (nu + n) * np.log1p(beta / (nu - 2.0))
    )  # fmt: skip


def conditional_scale(nu, beta, n) -> np.ndarray:
    r"""The factor :math:`(\nu + \beta - 2)/(\nu + n - 2)` of Lemma 3 (eq. 10) that scales the
    GP's conditional covariance, given the training data's :math:`\beta` and size :math:`n`."""
    nu = np.asarray(nu, float)
    return (nu + np.asarray(beta, float) - 2.0) / (nu + n - 2.0)


def t_scale(var, df) -> np.ndarray:
    r"""The scale :math:`\sqrt{v(\nu'-2)/\nu'}` of a Student-t with ``df`` :math:`=\nu'`
    degrees of freedom and variance ``var`` :math:`= v`."""
    df = np.asarray(df, float)
    return np.sqrt(np.asarray(var, float) * (df - 2.0) / df)


def t_logpdf(y, mean, var, df) -> np.ndarray:
    """Log density at ``y`` of the Student-t with ``df`` degrees of freedom, location ``mean``
    and *variance* ``var`` (covariance parameterisation)."""
    s = t_scale(var, df)
    return stats.t.logpdf((np.asarray(y, float) - mean) / s, df) - np.log(s)


def t_mixture_cdf(y, means, variances, dfs) -> np.ndarray:
    r"""The CDF at ``y`` (``(m,)``) of the equal-weight mixture over rows ``s`` of Student-t
    components with location ``means``, variance ``variances`` (``(S, m)`` each) and ``dfs``
    (``(S,)`` or ``(S, m)``) degrees of freedom: the predictive CDF of a NUTS fit,

    .. math:: F(y_i) = \frac1S \sum_s T_{\nu'_s}\!\left(\frac{y_i - \mu_{si}}{s_{si}}\right).
    """
    means = np.atleast_2d(np.asarray(means, float))
    dfs = np.broadcast_to(np.asarray(dfs, float).reshape(means.shape[0], -1), means.shape)
    s = t_scale(np.atleast_2d(variances), dfs)
    return stats.t.cdf((np.asarray(y, float)[None, :] - means) / s, dfs).mean(axis=0)


def t_mixture_quantiles(
    means, variances, dfs, probs: Sequence[float] = CI_QUANTILES
) -> list[np.ndarray]:
    """Quantiles of the mixtures of :func:`t_mixture_cdf`, one array ``(m,)`` per probability,
    by bisection on the mixture CDF between the smallest and the largest component quantile
    (there every component's CDF is below, resp. above, the probability)."""
    means = np.atleast_2d(np.asarray(means, float))
    dfs = np.broadcast_to(np.asarray(dfs, float).reshape(means.shape[0], -1), means.shape)
    s = np.maximum(t_scale(np.atleast_2d(variances), dfs), np.finfo(float).tiny)
    out = []
    for p in probs:
        q = means + s * stats.t.ppf(p, dfs)
        lo, hi = q.min(axis=0), q.max(axis=0)
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            below = stats.t.cdf((mid - means) / s, dfs).mean(axis=0) < p
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
            if np.all(hi - lo <= 4 * np.finfo(float).eps * np.maximum(np.abs(lo), np.abs(hi))):
                break
        out.append(0.5 * (lo + hi))
    return out


class StudentTLikelihood(ExactLikelihood):
    r"""The Student-t process marginal likelihood :math:`y \sim \mathrm{MVT}_n(\nu, m, C)`,
    registered as the observed variable ``name`` of the current PyMC model (module docstring).

    Answers what :class:`~bayes_gp.solvers.exact.ExactLikelihood` answers (``train``,
    ``factor``: the same :math:`C` and its cached Cholesky factor), with the Student-t process's
    :meth:`log_marginal_likelihood` (eq. 6), :meth:`loo` (Lemma 3 with :math:`n_1 = n - 1`) and
    :meth:`predict` (Lemma 3, eqs. 8–10); :meth:`predictive_df` gives :math:`\nu + n`.

    ``nu``: the degrees-of-freedom variable (a random variable with support
    :math:`(2, \infty)`, or a constant above 2), created in the model before this object.
    """

    _loo_threadsafe = False  # its own compiled functions are not locked

    def __init__(self, name: str, X, y, cov, mean_func, sigma, jitter, dims, nu, *,
                 known_var=None):  # fmt: skip
        self.X, self.y = X, y
        self.cov, self.mean_func = cov, mean_func
        self.sigma, self.jitter = pt.as_tensor_variable(sigma), jitter
        self.known_var = None if known_var is None else np.asarray(known_var, dtype=np.float64)
        self.nu = pt.as_tensor_variable(nu)
        check_dense_memory(X.shape[0])
        Xt = pt.as_tensor_variable(X)
        # covariance C <=> scale (nu - 2) / nu * C (module docstring)
        pm.MvStudentT(
            name, nu=self.nu, mu=self._mean(Xt), scale=(self.nu - 2.0) / self.nu * self._C(X),
            observed=y, dims=dims,
        )  # fmt: skip
        self.rvs = list(pm.modelcontext(None).free_RVs)
        self._fns: dict = {}
        self._factors: OrderedDict = OrderedDict()
        self._max_factors = max(1, FACTOR_CACHE_BYTES // (8 * self.X.shape[0] ** 2))

    def nu_value(self, values) -> float:
        """:math:`\\nu` at the hyperparameter values ``values``."""
        return float(self._fn("nu", lambda _: self.nu * pt.ones(()))(*values, np.zeros((0, 1))))

    def beta(self, values) -> float:
        """:math:`\\beta = (y - m)^\\top C^{-1} (y - m)` at ``values``."""
        fac = self.factor(values)[1]
        return float(fac.t @ fac.alpha)

    def predictive_df(self, values) -> float:
        """Degrees of freedom of the predictive distribution, :math:`\\nu + n` (Lemma 3)."""
        return self.nu_value(values) + self.X.shape[0]

    def log_marginal_likelihood(self, values) -> float:
        """:math:`\\log p(y \\mid \\theta, \\nu)`, Shah et al. eq. (6) (module docstring)."""
        return mvt_logpdf(self.factor(values)[1], self.nu_value(values))

    def loo(self, values) -> np.ndarray:
        """Exact leave-one-out log predictive densities :math:`\\log p(y_i \\mid y_{-i})`:
        Student-t with :math:`\\nu + n - 1` degrees of freedom (module docstring)."""
        fac = self.factor(values)[1]
        nu, n = self.nu_value(values), fac.t.shape[0]
        cinv_diag = inverse_diagonal(fac.L)
        resid = fac.alpha / cinv_diag  # y_i - mu_i (R&W eq. 5.12)
        beta_rest = float(fac.t @ fac.alpha) - fac.alpha**2 / cinv_diag
        df = nu + n - 1.0
        scale2 = (nu + beta_rest - 2.0) / df / cinv_diag
        return stats.t.logpdf(resid / np.sqrt(scale2), df) - 0.5 * np.log(scale2)

    def predict(self, values, Xn, diag: bool, include_noise: bool, jitters=None):
        """``(mean, var, cov)`` of :math:`f_*` (of :math:`y_*` with ``include_noise``) at ``Xn``:
        the GP's mean and the GP's covariance times :math:`(\\nu + \\beta - 2)/(\\nu + n - 2)`
        (Lemma 3, eq. 10). ``var`` and ``cov`` are covariances (not squared scales); the
        distribution is Student-t with :meth:`predictive_df` degrees of freedom."""
        mean, var, cov = super().predict(values, Xn, diag, include_noise, jitters)
        factor = float(conditional_scale(self.nu_value(values), self.beta(values), len(self.y)))
        return mean, var * factor, None if cov is None else cov * factor

    def gp_predict(self, values, Xn, diag: bool, include_noise: bool, jitters=None):
        """The GP's ``(mean, var, cov)`` at the same hyperparameters (no Student-t scaling)."""
        return super().predict(values, Xn, diag, include_noise, jitters)
