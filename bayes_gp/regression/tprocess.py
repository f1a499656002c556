r"""Student-t process regression (Shah, Wilson & Ghahramani 2014, AISTATS).

The model (Shah et al. Def. 1, eqs. 2–6), with the noise inside the kernel:

.. math::
   y \sim \mathrm{MVT}_n\big(\nu,\ m(X),\ K_\theta(X, X) + \sigma^2 I\big), \qquad
   \nu - 2 \sim \mathrm{Gamma}(2, 0.1),

a multivariate Student-t with :math:`\nu` degrees of freedom parameterised by its covariance
(:math:`\operatorname{cov}(y) = K + \sigma^2 I` for every :math:`\nu`). As
:math:`\nu \to \infty` it is the GP of :class:`~bayes_gp.GPRegression`; a small :math:`\nu`
lets the whole data set's scale differ from the prior's (the predictive covariance grows with the
data's Mahalanobis distance :math:`\beta`, Lemma 3): one scale for the whole series, which is
what a series at a scale other than the expected one needs. (A *segment* of inflated scale
within one series is heteroscedastic noise, :class:`~bayes_gp.HeteroscedasticGPRegression`'s
model: on such data the Student-t process's MAP fit measured no better than the GP's.) Its
likelihood, leave-one-out and predictive
formulas are those of :mod:`bayes_gp.solvers.student_t`.

Why a subclass of :class:`~bayes_gp.GPRegression` and not ``GPRegression(process="student_t")``:
the kernel, mean, prior and noise front end, the jitter pre-flight, the type-II optimiser and
NUTS are the GP's unchanged, but every predictive answer differs (Student-t quantiles with
:math:`\nu + n` degrees of freedom, scaled covariances, Student-t leave-one-out, held-out
densities and replicated data), and the GP's large-N structures (quasiseparable, compact
support, HSGP, inducing points) are Gaussian-only. A class states that in its name, keeps
``gpr.py`` free of branches on the process, and refuses the options it cannot honour.

Prior of :math:`\nu`: :math:`\nu - 2 \sim \mathrm{Gamma}(2, 0.1)` (shape 2, rate 0.1), the
Gamma(2, 0.1) prior of Juárez & Steel (2010, J. Business & Economic Statistics 28, 52–66) for
Student-t degrees of freedom, shifted to the support :math:`\nu > 2` that the covariance
parameterisation needs: mean 22, mode 12, median 18.8, 19% of its mass below :math:`\nu = 10`
(heavy tails), 11% above 40 (nearly Gaussian) and 4% below 5, with a density that vanishes
at :math:`\nu = 2` (an infinite-variance boundary a point estimate should not reach).

**What the data can say about** :math:`\nu`. With the kernel's amplitude and the noise learned,
one series hardly informs :math:`\nu`: scaling :math:`C = sC_0` and maximising over :math:`s`
leaves a profile :math:`\log\Gamma(\frac{\nu+n}2) - \log\Gamma(\frac\nu2) - \frac n2\log\nu
- \frac{\nu+n}2\log(1 + \frac n\nu)` + const that does not depend on the data and rises to
the GP's as :math:`\nu \to \infty`; the posterior of :math:`\nu` is then close to its prior
and ML-II drifts to large :math:`\nu`. The data select a small :math:`\nu` against a scale that
the priors (or fixed ``eta`` and ``sigma``) pin down: a series at a scale unlike the one
expected (``tests/regression/test_tprocess.py``).

``priors={"nu": ...}`` replaces the prior (any form of :mod:`bayes_gp.priors`; its support must
lie above 2) or fixes :math:`\nu` (a number above 2).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.transforms import Interval
from scipy import stats

from bayes_gp.inference.jitter import DEFAULT_JITTER
from bayes_gp.inference.typeii import MapFit
from bayes_gp.linalg import EAGER_MODE, jittered_cholesky, single_blas_thread
from bayes_gp.predictive import CI_QUANTILES, HeldOutPredictive, Prediction, held_out_vector
from bayes_gp.priors import resolve_prior
from bayes_gp.protocol import GPModel, is_nuts
from bayes_gp.regression.gpr import GPRegression, _check_fit
from bayes_gp.solvers.student_t import (
    NU_MIN,
    StudentTLikelihood,
    conditional_scale,
    t_logpdf,
    t_mixture_cdf,
    t_mixture_quantiles,
    t_scale,
)

__all__ = ["StudentTProcessRegression", "default_nu_prior", "NU_PRIOR"]

#: The default prior of :math:`\nu`: :math:`\nu - 2 \sim \mathrm{Gamma}(\alpha, \beta)` with
#: shape and rate (module docstring).
NU_PRIOR = {"alpha": 2.0, "beta": 0.1}


def default_nu_prior(name: str = "nu"):
    r""":math:`\nu = 2 + G`, :math:`G \sim \mathrm{Gamma}(2, 0.1)` (module docstring), as the
    random variable ``name`` of the current model with a log transform of :math:`\nu - 2`."""
    return pm.CustomDist(
        name, NU_PRIOR["alpha"], NU_PRIOR["beta"],
        dist=lambda a, b, size: NU_MIN + pm.Gamma.dist(a, b, size=size),
        transform=Interval(NU_MIN, None),
    )  # fmt: skip


def _check_nu(nu) -> None:
    """A fixed :math:`\\nu` above 2; a prior whose density is zero at and below 2."""
    if isinstance(nu, pt.TensorConstant) or isinstance(nu, np.ndarray | float | int):
        value = float(np.asarray(getattr(nu, "data", nu)))
        if not value > NU_MIN:
            raise ValueError(
                f"`priors['nu']`: a fixed nu must be greater than 2 (the Student-t process is "
                f"parameterised by its covariance, which needs nu > 2), got {value:g}"
            )
        return
    if nu.ndim != 0:
        raise ValueError(f"`priors['nu']` must be a scalar prior, got {nu.ndim} dimensions")
    at = [float(pm.logp(nu, v).eval(mode=EAGER_MODE)) for v in (NU_MIN, 1.5, 1.99)]
    if any(np.isfinite(a) for a in at):
        raise ValueError(
            "`priors['nu']`: the prior of nu must put no mass at or below 2 (the covariance "
            "parameterisation needs nu > 2): shift it, e.g. priors={'nu': lambda name: "
            "pm.CustomDist(name, 2, 0.1, dist=lambda a, b, size: 2 + pm.Gamma.dist(a, b, "
            "size=size), transform=pm.distributions.transforms.Interval(2, None))}, or fix "
            "nu at a number above 2"
        )


class StudentTProcessRegression(GPRegression):
    r"""Student-t process regression: :math:`y \sim \mathrm{MVT}_n(\nu, m, K + \sigma^2 I)`
    (Shah, Wilson & Ghahramani 2014, eqs. 2–6; :mod:`bayes_gp.regression.tprocess`).

    The arguments are :class:`~bayes_gp.GPRegression`'s (any kernel name, kernel object or
    callable it accepts, ``ard``, ``mean``, ``priors``, ``noise``, ``learn_noise``,
    ``jitter``) with the exact dense likelihood only: ``approx``, ``sparse=True`` and
    ``structure="quasiseparable"`` are refused (they are Gaussian-only). ``priors`` also takes
    ``"nu"``: its prior (support above 2) or a fixed value above 2; by default
    :math:`\nu - 2 \sim \mathrm{Gamma}(2, 0.1)`.

    Fits: ``fit("nuts")`` (:meth:`sample`, over :math:`\theta, \sigma, \nu`) and ``fit("map")``
    (:meth:`fit_map`); :meth:`predict` gives Lemma 3's Student-t predictive distribution
    (:meth:`predict`); the NUTS fit's ``log_likelihood`` group holds the exact leave-one-out
    densities :math:`\log p(y_i \mid y_{-i}, \theta, \nu)`, Student-t with :math:`\nu + n - 1`
    degrees of freedom (:mod:`bayes_gp.solvers.student_t`).
    """

    def __init__(
        self,
        X,
        y,
        kernel: str | Callable = "expquad",
        *,
        ard: bool = False,
        mean=None,
        priors: Mapping[str, Any] | None = None,
        noise=None,
        learn_noise: bool = False,
        jitter: float = DEFAULT_JITTER,
        approx: str | None = None,
        sparse: bool | None = None,
        structure: str | None = None,
    ):
        if approx is not None:
            raise ValueError(
                f"StudentTProcessRegression has the exact likelihood only, not approx={approx!r} "
                "(the approximations are those of a Gaussian process)"
            )
        if sparse:
            raise ValueError(
                "StudentTProcessRegression has the dense exact likelihood only: `sparse=True` "
                "(the compact-support band solver) is a Gaussian-process solver"
            )
        if structure not in (None, "dense"):
            raise ValueError(
                f"StudentTProcessRegression has the dense exact likelihood only, not "
                f"structure={structure!r}"
            )
        priors = dict(priors or {})
        #: the user's prior (or fixed value) of nu, else None (the default prior)
        self.nu_prior = priors.pop("nu", None)
        if isinstance(self.nu_prior, int | float | np.number) and not isinstance(self.nu_prior, bool):
            _check_nu(float(self.nu_prior))
        super().__init__(
            X, y, kernel, ard=ard, mean=mean, priors=priors, noise=noise,
            learn_noise=learn_noise, jitter=jitter, sparse=False, structure="dense",
        )  # fmt: skip

    # ------------------------------------------------------------------ model
    def _build(self) -> pm.Model:
        coords = {"feature": self.feature_names, "obs": np.arange(self.X.shape[0])}
        with pm.Model(coords=coords) as model:
            _, cov, mean_func, sigma, known = self._declare_gp()
            nu_priors = {} if self.nu_prior is None else {"nu": self.nu_prior}
            nu = resolve_prior(nu_priors, "nu", default_nu_prior)
            _check_nu(nu)
            self.quasiseparable = False
            self.marginal = StudentTLikelihood(
                "y", self.X, self.y, cov, mean_func, sigma, self.jitter_tensor, "obs", nu, **known
            )
        self._cov, self._mean_func, self._sigma = cov, mean_func, pt.as_tensor_variable(sigma)
        self._nu = self.marginal.nu
        return model

    # ------------------------------------------------------------- prediction
    def _predict_at(self, values, Xn, diag: bool, include_noise: bool, jitters=None,
                    noise_var=None):  # fmt: skip
        """Lemma 3 at ``values``: the GP's ``(mean, var, cov)`` (with the known noise variances
        ``noise_var`` of the new rows on the diagonal: they are inside the process's kernel)
        with the covariance scaled by :math:`(\\nu + \\beta - 2)/(\\nu + n - 2)`."""
        mean, var, cov = self.marginal.gp_predict(values, Xn, diag, include_noise, jitters)
        if noise_var is not None:
            var = var + noise_var
            if cov is not None:
                cov = cov + np.diag(noise_var)
        factor = float(conditional_scale(self.marginal.nu_value(values),
                                         self.marginal.beta(values), self.X.shape[0]))  # fmt: skip
        return mean, var * factor, None if cov is None else cov * factor

    def _t_components(self, Xn, fit, include_noise, jitters, max_draws: int = 500,
                      seed: int = 0, noise_var=None):  # fmt: skip
        """Per posterior draw (or the point estimate: one row) the predictive means, variances
        ``(S, m)`` and degrees of freedom :math:`\\nu_s + n` ``(S,)``."""
        draws = [self._values(fit.params)] if isinstance(fit, MapFit) else self._draws(
            fit, max_draws, seed
        )
        means, variances, dfs = [], [], []
        for values in draws:
            mu, var, _ = self._predict_at(values, Xn, True, include_noise, jitters, noise_var)
            means.append(mu)
            variances.append(var)
            dfs.append(self.marginal.predictive_df(values))
        return np.array(means), np.array(variances), np.array(dfs)

    @single_blas_thread
    def predict(
        self, X_new, fit, diag: bool = True, include_noise: bool = False, *, noise_new=None
    ) -> Prediction:
        r"""Predictive distribution of :math:`f_*` (of :math:`y_*` with ``include_noise``),
        Shah et al. Lemma 3 (eqs. 8–10):

        .. math::
           f_* \mid y \sim \mathrm{MVT}\!\left(\nu + n,\ \bar f_*,\
           \frac{\nu + \beta - 2}{\nu + n - 2}\,\big(k_{**} - K_*^\top C^{-1} K_*\big)\right),
           \qquad \bar f_* = m_* + K_*^\top C^{-1}(y - m),

        :math:`C = K + \sigma^2 I` (plus known noise variances, as :class:`~bayes_gp.GPRegression`
        takes them; ``noise_new`` as there), :math:`\beta = (y - m)^\top C^{-1} (y - m)`.
        ``var`` (and ``cov`` with ``diag=False``) are the predictive covariances (the GP's
        times the factor); ``lower``/``upper`` the central 94% interval of the Student-t with
        :math:`\nu + n` degrees of freedom, :math:`\bar f_* \pm t^{-1}_{\nu+n}(0.97)
        \sqrt{v(\nu + n - 2)/(\nu + n)}`. For NUTS output: the equal-weight mixture over
        posterior draws of those Student-t distributions, mean and variance by the laws of
        total expectation and variance, interval by the mixture's quantiles
        (:func:`~bayes_gp.solvers.student_t.t_mixture_quantiles`). ``extra["df"]``: the
        predictive degrees of freedom :math:`\nu + n` (their posterior mean for NUTS).
        """
        Xn = self._check_new(X_new)
        _check_fit(fit)
        noise_var = self._noise_at(Xn, include_noise, noise_new)
        jitters: list[float] = []
        if isinstance(fit, MapFit):
            values = self._values(fit.params)
            mean, var, cov = self._predict_at(values, Xn, diag, include_noise, jitters, noise_var)
            df = self.marginal.predictive_df(values)
            half = stats.t.ppf(CI_QUANTILES[1], df) * t_scale(var, df)
            return Prediction(mean, var, cov, mean - half, mean + half,
                              {"jitter": jitters[0], "df": df})  # fmt: skip
        if not diag:
            raise ValueError("`diag=False` is only available for MAP fits")
        means, variances, dfs = self._t_components(Xn, fit, include_noise, jitters,
                                                   noise_var=noise_var)  # fmt: skip
        mean = means.mean(axis=0)
        var = variances.mean(axis=0) + means.var(axis=0)  # law of total variance
        lower, upper = t_mixture_quantiles(means, variances, dfs, CI_QUANTILES)
        extra = {"n_draws": len(means), "jitter": float(max(jitters, default=0.0)),
                 "df": float(dfs.mean())}  # fmt: skip
        return Prediction(mean, var, None, lower, upper, extra)

    @single_blas_thread
    def _predictive_components(self, Xn, fit):
        """Means and variances of :math:`y_*` per draw (the Student-t components' moments)."""
        _check_fit(fit)
        return self._t_components(Xn, fit, True, [], noise_var=self._noise_at(Xn, True))[:2]

    @single_blas_thread
    def held_out_predictive(self, X_new, y, fit) -> HeldOutPredictive:
        """The predictive CDF of each held-out :math:`y_i`: Student-t (:math:`\\nu + n` degrees
        of freedom) at a point estimate, their mixture over posterior draws for NUTS."""
        Xn = self._check_new(X_new)
        y = held_out_vector(y, Xn.shape[0])
        _check_fit(fit)
        means, variances, dfs = self._t_components(Xn, fit, True, [],
                                                   noise_var=self._noise_at(Xn, True))  # fmt: skip
        F = t_mixture_cdf(y, means, variances, dfs)
        return HeldOutPredictive("cdf", F, F)

    def prediction_columns(self, X_new, fit) -> dict[str, np.ndarray]:
        """:class:`~bayes_gp.GPRegression`'s columns (mean, ``sd_f``, ``sd_y``, 94% interval of
        :math:`y_*`) and ``df_y``, the predictive degrees of freedom :math:`\\nu + n` (the
        posterior mean for NUTS), which :meth:`scores` uses."""
        pred_f = self.predict(X_new, fit)
        pred_y = self.predict(X_new, fit, include_noise=True)
        return {"mean": pred_f.mean, "sd_f": pred_f.sd, "sd_y": pred_y.sd,
                "lower_94": pred_y.lower, "upper_94": pred_y.upper,
                "df_y": np.full(pred_y.mean.shape[0], pred_y.extra["df"])}  # fmt: skip

    def scores(self, y, columns) -> dict[str, float]:
        """RMSE, coverage of the 94% interval and the mean log predictive density of ``y``
        under the Student-t with mean, sd ``sd_y`` and ``df_y`` degrees of freedom (exact for a
        type-II fit; for a NUTS mixture the Student-t with its moments and the mean
        :math:`\\nu + n`)."""
        y = np.asarray(y, float)
        resid = y - np.asarray(columns["mean"], float)
        var = np.asarray(columns["sd_y"], float) ** 2
        lpd = t_logpdf(y, np.asarray(columns["mean"], float), var, np.asarray(columns["df_y"]))
        inside = (y >= columns["lower_94"]) & (y <= columns["upper_94"])
        return {
            "rmse": float(np.sqrt(np.mean(resid**2))),
            "mean_log_predictive_density": float(np.mean(lpd)),
            "coverage_94": float(np.mean(inside)),
        }

    def log_predictive_density(self, X_new, y, fit) -> np.ndarray:
        """:math:`\\log p(y_i \\mid \\mathcal D)` of each held-out :math:`y_i` (marginally, with
        noise): the Student-t of :meth:`predict` (``include_noise=True``) at a point estimate,
        the log of the mixture density over posterior draws for NUTS."""
        Xn = self._check_new(X_new)
        y = held_out_vector(y, Xn.shape[0])
        _check_fit(fit)
        means, variances, dfs = self._t_components(Xn, fit, True, [],
                                                   noise_var=self._noise_at(Xn, True))  # fmt: skip
        logs = t_logpdf(y[None, :], means, variances, dfs[:, None])
        top = logs.max(axis=0)
        return top + np.log(np.mean(np.exp(logs - top), axis=0))

    # ------------------------------------------------------------- draws
    @staticmethod
    def _mvt_draws(rng, mean, cov, df: float, k: int) -> np.ndarray:
        """``k`` draws ``(k, m)`` of :math:`\\mathrm{MVT}(\\nu', \\mu, \\Sigma)` with covariance
        :math:`\\Sigma`: :math:`\\mu + \\sqrt{(\\nu'-2)/w}\\, L z`, :math:`w \\sim \\chi^2_{\\nu'}`."""
        L, _ = jittered_cholesky(cov)
        z = (L @ rng.standard_normal((mean.shape[0], k))).T
        w = rng.chisquare(df, size=(k, 1))
        return mean + np.sqrt((df - 2.0) / w) * z

    @single_blas_thread
    def replicate(self, fit, n_draws: int, random_seed: int = 0) -> np.ndarray:
        """Replicated data :math:`y^{rep}` at the training inputs, ``(n_draws, n)``, from the
        posterior predictive of :math:`y_*` at :math:`X` (Lemma 3: Student-t with
        :math:`\\nu + n` degrees of freedom, the scaled GP covariance plus noise), per NUTS draw
        or at the point estimate. Above :attr:`PPC_JOINT_MAX` observations each
        :math:`y^{rep}_i` is drawn from its Student-t marginal."""
        self.check_fit(fit)
        rng = np.random.default_rng(random_seed)
        nuts = is_nuts(fit)
        values_list = (self._draws(fit, n_draws, seed=random_seed) if nuts
                       else [self._values(fit.params)])  # fmt: skip
        joint = self.X.shape[0] <= self.PPC_JOINT_MAX
        reps = []
        for values in values_list:
            k = 1 if nuts else n_draws
            df = self.marginal.predictive_df(values)
            mean, var, cov = self._predict_at(values, self.X, not joint, True,
                                              noise_var=self.known_noise_var)  # fmt: skip
            if joint:
                reps.append(self._mvt_draws(rng, mean, cov, df, k))
            else:
                reps.append(mean + t_scale(var, df) * rng.standard_t(df, (k, mean.shape[0])))
        return np.concatenate(reps, axis=0)

    def prior_predictive(self, n_draws: int, random_seed: int = 0) -> np.ndarray:
        """Data sets from the prior predictive, ``(n_draws, n)``: hyperparameters and
        :math:`\\nu` from their priors, then :math:`y \\sim \\mathrm{MVT}_n(\\nu, m, K +
        \\sigma^2 I)` (``pm.draw`` of the model's observed variable)."""
        return GPModel.prior_predictive(self, n_draws, random_seed=random_seed)

    @single_blas_thread
    def sample_prior(self, X, n: int = 5, random_seed: int | None = None, params=None):
        """Draws of :math:`f` at ``X`` from the Student-t process prior
        :math:`\\mathrm{MVT}(\\nu, m, K)` (hyperparameters and :math:`\\nu` from their priors, or
        fixed at ``params``), shape ``(n, m)``."""
        Xn = self._check_new(X)
        rng = np.random.default_rng(random_seed)
        out = []
        for _ in range(n):
            if params is None:
                draw = pm.draw(self.model.free_RVs, random_seed=rng)
                values = [np.asarray(v, float) for v in draw]
            else:
                values = self._values(params)
            K = self._cov_new(values, Xn)
            ms = self._compiled("new_mean", self._mean)(*values, Xn)
            out.append(self._mvt_draws(rng, ms, K, self.marginal.nu_value(values), 1)[0])
        return np.array(out)

    @single_blas_thread
    def sample_posterior(self, X, fit, n: int = 5, random_seed: int | None = None):
        """Draws of :math:`f` at ``X`` from the posterior Student-t process (Lemma 3), per MAP
        fit or NUTS draw, shape ``(n, m)``."""
        Xn = self._check_new(X)
        rng = np.random.default_rng(random_seed)
        if isinstance(fit, MapFit):
            values_list = [self._values(fit.params)] * n
        else:
            all_draws = self._draws(fit)
            values_list = [all_draws[i] for i in rng.choice(len(all_draws), n)]
        out = []
        for values in values_list:
            mean, _, cov = self._predict_at(values, Xn, False, False)
            out.append(self._mvt_draws(rng, mean, cov, self.marginal.predictive_df(values), 1)[0])
        return np.array(out)

    # ------------------------------------------------------------ model protocol
    def describe(self) -> list[tuple[str, object]]:
        """:class:`~bayes_gp.GPRegression`'s rows with the Student-t process likelihood and the
        degrees of freedom's prior."""
        rows = [r for r in super().describe() if r[0] not in ("likelihood", "model")]
        noise = "K + " + ("diag(s²) + " if self.known_noise_var is not None else "") + "σ²I"
        if self.nu_prior is None:
            nu = "ν − 2 ~ Gamma(2, 0.1) (Juárez & Steel 2010), learned"
        elif isinstance(self.nu_prior, int | float | np.number):
            nu = f"fixed ν = {float(self.nu_prior):g}"
        else:
            nu = "the user's prior, learned"
        rows = [("model", repr(self)), *rows[:3],
                ("likelihood", f"Student-t process, f integrated out: y ~ MVT_n(ν, m, {noise}) "
                 "(Shah, Wilson & Ghahramani 2014, eqs. 2-6)"),
                ("degrees of freedom ν", nu), *rows[3:]]  # fmt: skip
        return rows

    def ppc_caption(self, n_draws: int) -> str:
        return (
            f"Observed data vs {n_draws} replicated data sets y_rep from the Student-t "
            "posterior predictive (ν + n degrees of freedom, Shah et al. Lemma 3)"
        )

    def point_loo(self, fit) -> tuple[str, np.ndarray]:
        """Exact LOO at the point estimate: Student-t :math:`y_i \\mid y_{-i}` with
        :math:`\\nu + n - 1` degrees of freedom (:mod:`bayes_gp.solvers.student_t`)."""
        if not isinstance(fit, MapFit):
            raise TypeError(f"point_loo needs a MapFit of this model, got {type(fit).__name__}")
        method = f"exact Student-t LOO at {fit.method_label} (Shah et al. Lemma 3)"
        return method, self._pointwise_loo(self._values(fit.params))

    def restore_fit(self, method: str, params: dict, attrs: dict) -> MapFit:
        if method != "map":
            raise ValueError(f"StudentTProcessRegression's type-II fit is 'map', not {method!r}")
        return super().restore_fit(method, params, attrs)

    def __repr__(self) -> str:
        return (
            f"StudentTProcessRegression(n={self.X.shape[0]}, D={self.X.shape[1]}, "
            f"kernel={self.spec.name!r}, ard={self.ard})"
        )
