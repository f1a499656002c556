r"""The latent-GP model for counts, proportions, binary outcomes and outliers.

.. math::
   f \sim GP(m_\beta, k_\theta), \qquad y_i \mid f_i \sim p(y_i \mid f_i, \phi)

with a likelihood of :mod:`bayes_gp.latent.likelihoods` (Bernoulli, binomial, Poisson, negative
binomial, Student-t, Gaussian, beta, gamma, zero-inflated and hurdle Poisson and negative
binomial;
:mod:`bayes_gp.latent.ordinal` for ordered categories). The
ways to fit it, by their names in
:mod:`bayes_gp.inference.methods`:

* ``"nuts"`` (``sample()``, ``sample(method="nuts")``) — NUTS over
  :math:`(\theta, \beta, \phi)` alone, the latent GP integrated out by the Laplace
  approximation at every step: the potential :math:`\log q(y \mid \theta, \beta, \phi)`
  (R&W eq. 3.32 generalised) and its exact gradient (R&W Algorithm 5.1 generalised), one
  PyTensor Op (:class:`~bayes_gp.latent.op.LaplaceLogp`), the "embedded Laplace approximation"
  (Rue, Martino & Chopin 2009 for INLA's hyperparameters). Each draw's latent mode is recorded
  (``f_mode`` in the posterior), so predictions need no refitting.
* ``"nuts_joint"`` (``sample(method="nuts_joint")``) — joint NUTS over the whitened latent
  values and the hyperparameters (``pm.gp.Latent(reparameterize=True)``), exact up to Monte
  Carlo error.
* ``"map"`` (:meth:`LatentGP.fit_laplace`) — type-II: the Laplace evidence maximised (ML-II, or
  MAP with the priors), the same restarts and polishing as every type-II fit
  (:func:`bayes_gp.inference.typeii.optimize`); ``"vi"`` (:meth:`LatentGP.fit_vi`) and
  :meth:`LatentGP.fit_ep` the variational and EP type-II fits.

The names of the previous release, ``"laplace"`` (now ``"nuts"``) and ``"latent"`` (now
``"nuts_joint"``), still work with a ``FutureWarning``.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from scipy.linalg import cho_solve
from scipy.special import gammaln, logit

from bayes_gp._arguments import renamed_argument
from bayes_gp._validation import (
    as_inputs,
    as_targets,
    check_aligned,
    check_jitter,
    f64,
    hyperparameter_values,
    new_inputs,
)
from bayes_gp.inference import native_gp
from bayes_gp.inference.degenerate import model_spacing
from bayes_gp.inference.jitter import (
    DEFAULT_LATENT_JITTER,
    JitterChoice,
    PreflightJitter,
    check_points,
)
from bayes_gp.inference.methods import (
    LATENT_RENAMED,
    MAP,
    NUTS,
    NUTS_JOINT,
    VI,
    canonical_method,
    is_joint,
)
from bayes_gp.inference.nuts import resolve_sampler
from bayes_gp.inference.sampling import NutsRun, NUTSSampling
from bayes_gp.inference.typeii import function_of_values, observed_logp_and_grad, optimize
from bayes_gp.kernels.catalogue import (
    DataScale,
    check_kernel_ard,
    default_prior,
    kernel_formula,
    kernel_spec,
    mean_function,
)
from bayes_gp.kernels.lags import gram
from bayes_gp.latent.censored import CensoredGaussian, LogNormal, Weibull
from bayes_gp.latent.custom import CustomLikelihood, custom_likelihood
from bayes_gp.latent.custom import prior_predictive as custom_prior_predictive
from bayes_gp.latent.ep import EPEvidence, EPState, expectation_propagation
from bayes_gp.latent.hurdle import HurdleNegativeBinomial, HurdlePoisson
from bayes_gp.latent.laplace import laplace
from bayes_gp.latent.likelihoods import (
    Bernoulli,
    Beta,
    Binomial,
    Gamma,
    Gaussian,
    LatentLikelihood,
    NegativeBinomial,
    Poisson,
    StudentT,
    ZeroInflatedNegativeBinomial,
    ZeroInflatedPoisson,
)
from bayes_gp.latent.op import LaplaceLogp, VariationalBound
from bayes_gp.latent.ordinal import (
    CUTPOINT_SD,
    Ordinal,
    check_cutpoint_prior,
    check_ordinal_mean,
    ordinal_codes,
)
from bayes_gp.latent.predictive import (
    ModeFactor,
    SiteFactor,
    expected_response,
    joint_conditional,
    la_loo,
    la_loo_terms,
    log_predictive_density,
    predictive_cdf,
    predictive_quantiles,
    response_moments,
)
from bayes_gp.latent.vi import gaussian_kl, jaakkola_jordan, site_precision
from bayes_gp.linalg import jittered_cholesky, plus_diagonal, single_blas_thread
from bayes_gp.predictive import (
    CI_QUANTILES,
    Z_CI,
    Prediction,
    gaussian_mixture_quantiles,
    held_out_vector,
)
from bayes_gp.priors import resolve_prior
from bayes_gp.protocol import Bands, GPModel, HeldOutPredictive, PointFit, is_nuts

__all__ = ["LatentGP", "LatentFit", "SiteFit", "VIFit", "EPFit", "LIKELIHOODS"]

#: Likelihood names, their classes and links.
LIKELIHOODS: dict[str, tuple[type[LatentLikelihood], tuple[str, ...]]] = {
    "bernoulli": (Bernoulli, ("logit", "probit")),
    "binomial": (Binomial, ("logit",)),
    "poisson": (Poisson, ("log",)),
    "negative_binomial": (NegativeBinomial, ("log",)),
    "student_t": (StudentT, ("identity",)),
    "gaussian": (Gaussian, ("identity",)),
    "beta": (Beta, ("logit",)),
    "gamma": (Gamma, ("log",)),
    "zero_inflated_poisson": (ZeroInflatedPoisson, ("log",)),
    "zero_inflated_negative_binomial": (ZeroInflatedNegativeBinomial, ("log",)),
    "hurdle_poisson": (HurdlePoisson, ("log",)),
    "hurdle_negative_binomial": (HurdleNegativeBinomial, ("log",)),
    "weibull": (Weibull, ("log",)),
    "lognormal": (LogNormal, ("log",)),
    "censored_gaussian": (CensoredGaussian, ("identity",)),
    "ordinal": (Ordinal, ("logit", "probit")),
}

#: Prior sd of the latent amplitude eta (and of a constant mean) on a link scale (logit, log):
#: the scale of a sigmoid's argument, and a factor e^2 in a rate.
LINK_SCALE = 2.0

#: The default absolute latent jitter (``jitter=None``), the package's
#: :data:`~bayes_gp.inference.jitter.DEFAULT_LATENT_JITTER`: relative ``1e-6 / s**2`` to the
#: latent scale, ``2.5e-7`` on a link scale.
DEFAULT_ABSOLUTE_JITTER = DEFAULT_LATENT_JITTER

#: Warnings point at the first caller outside the package (however many of its frames lie between).
_PACKAGE = (str(Path(__file__).resolve().parents[1]),)

#: A type-II latent amplitude above this warns for binary outcomes: separable classes drive it to
#: infinity.
ETA_WARN = 100.0


@dataclass(frozen=True)
class LatentFit(PointFit):
    """A type-II Laplace fit of a :class:`LatentGP`: hyperparameters and the latent mode there.

    Attributes
    ----------
    params : dict
        Hyperparameters (kernel, mean and likelihood) by name.
    log_marginal_likelihood : float
        The Laplace evidence :math:`\\log q(y \\mid \\hat\\theta)` (R&W eq. 3.32 generalised).
    objective : float
        The maximised objective (the evidence, plus the log prior when ``prior=True``).
    f_mode : ndarray (n,)
        The latent mode :math:`\\hat f` at ``params``.
    """

    params: dict
    log_marginal_likelihood: float
    objective: float
    prior: bool
    f_mode: np.ndarray
    restarts: list = field(default_factory=list)
    grad_norm: float = float("nan")
    seconds: float = float("nan")
    jitter: float = float("nan")
    jitter_default: float = float("nan")
    method: str = "map"

    evidence_name = "approximate log evidence"

    @property
    def converged(self) -> bool:
        return bool(self.restarts[0].converged) if self.restarts else True

    @property
    def method_label(self) -> str:
        return "Laplace " + ("MAP" if self.prior else "ML-II")

    @property
    def method_description(self) -> str:
        return "Laplace approximation, type-II" + (" with priors" if self.prior else "")


@dataclass(frozen=True)
class SiteFit(LatentFit):
    """A type-II fit whose latent posterior is the prior times Gaussian sites:
    :math:`q(f) = N(\\mu, \\Sigma)`, :math:`\\Sigma = (K^{-1} + \\mathrm{diag}\\,W)^{-1}`
    (variational or EP). ``f_mode`` holds the mean :math:`\\mu`, ``site_precision`` :math:`W`."""

    site_precision: np.ndarray = field(default_factory=lambda: np.zeros(0))


@dataclass(frozen=True)
class VIFit(SiteFit):
    """A type-II variational fit of a :class:`LatentGP` (:meth:`LatentGP.fit_vi`): the
    hyperparameters maximise the variational lower bound, and the latent posterior there is
    :math:`q(f) = N(\\mu, \\Sigma)`, :math:`\\Sigma = (K^{-1} + \\mathrm{diag}\\,W)^{-1}`.

    ``f_mode`` holds the mean :math:`\\mu`, ``site_precision`` :math:`W`, ``variational`` the
    method (``"jj"`` Jaakkola–Jordan, ``"kl"`` Gaussian KL) and ``log_marginal_likelihood`` the
    bound.
    """

    variational: str = "kl"

    evidence_name = "variational lower bound (ELBO)"

    @property
    def method_label(self) -> str:
        what = "VI (Jaakkola-Jordan)" if self.variational == "jj" else "VI (Gaussian KL)"
        return f"{what} " + ("MAP" if self.prior else "ML-II")

    @property
    def method_description(self) -> str:
        what = (
            "Jaakkola-Jordan local bound (PRML §10.6)" if self.variational == "jj"
            else "Gaussian KL approximation (Opper & Archambeau 2009)"
        )  # fmt: skip
        return f"variational, {what}, type-II" + (" with priors" if self.prior else "")



@dataclass(frozen=True)
class EPFit(SiteFit):
    """A type-II expectation-propagation fit (:meth:`LatentGP.fit_ep`, Bernoulli-probit): the
    hyperparameters maximise :math:`\\log Z_{EP}` (R&W eq. 3.65), and the latent posterior there
    is the EP approximation :math:`N(\\mu, (K^{-1} + \\tilde S)^{-1})` (``f_mode`` :math:`\\mu`,
    ``site_precision`` :math:`\\tilde\\tau`, ``state`` the
    :class:`~bayes_gp.latent.ep.EPState` with the site parameters and :math:`\\Sigma`)."""

    state: EPState | None = None
    method: str = "ep"

    evidence_name = "EP approximate log evidence"

    @property
    def converged(self) -> bool:
        """The EP sweeps converged at the reported hyperparameters and the best restart's
        optimiser did."""
        return bool(getattr(self.state, "converged", True)) and super().converged

    @property
    def method_label(self) -> str:
        return "EP " + ("MAP" if self.prior else "ML-II")

    @property
    def method_description(self) -> str:
        return "expectation propagation (probit), type-II" + (" with priors" if self.prior else "")

class LatentGP(PreflightJitter, NUTSSampling, GPModel):
    r"""A latent GP with a non-Gaussian (or Gaussian) likelihood, declared as a PyMC model.

    Parameters
    ----------
    X : array_like (n,) or (n, D), or DataFrame
    y : array_like (n,)
        Outcomes: 0/1 (``"bernoulli"``), successes (``"binomial"``), counts (``"poisson"``,
        ``"negative_binomial"``, ``"zero_inflated_poisson"``,
        ``"zero_inflated_negative_binomial"``, ``"hurdle_poisson"``,
        ``"hurdle_negative_binomial"``: zeros and positive counts both needed), real values
        (``"student_t"``, ``"gaussian"``), proportions strictly inside (0, 1) (``"beta"``) or
        positive values (``"gamma"``); survival times
        (``"weibull"``, ``"lognormal"``) or measurements with detection limits
        (``"censored_gaussian"``), each with its code in ``censored``; ordered categories
        (``"ordinal"``): codes 0..K-1 (K >= 3, every category observed) or an ordered pandas
        ``Categorical`` (its codes; its categories kept as ``likelihood.labels``).
    kernel : str, kernel object or callable
        Catalogue name or a sum of products of them, a kernel object with fixed numbers and
        unnamed priors, or a callable ``kernel(D)`` (:func:`~bayes_gp.regression.kernel_spec`;
        as :class:`~bayes_gp.GPRegression`).
    likelihood : str, callable or LogDensity
        One of :data:`LIKELIHOODS`, or the user's own: a function ``fn(y, f, **params)``
        returning the PyTensor log density of each observation, or a
        :class:`~bayes_gp.latent.custom.LogDensity` with its options (its derivatives by
        automatic differentiation; its parameters' priors by name in ``priors``;
        :mod:`bayes_gp.latent.custom` says what it requires and refuses).
    link : str, optional
        ``"logit"`` (default) or ``"probit"`` for ``"bernoulli"`` and ``"ordinal"`` (the
        cumulative logit and probit, :mod:`bayes_gp.latent.ordinal`); the others have one link
        (logit for the binomial and the beta, log for the counts and the gamma, identity for
        the real-valued ones).
    ard : bool
        One length-scale per input.
    mean : None, "zero", "constant", "linear" or a ``pm.gp.mean.Mean``
        As :class:`~bayes_gp.GPRegression`, on the latent scale: ``None`` is the data's location
        there, fixed (:math:`\log(\sum y / \sum E)` for counts, the logit of the pooled success
        fraction for the binomial, :math:`\mathrm{logit}\,\bar y` for the beta,
        :math:`\log\bar y` for the gamma, :math:`\bar y` for ``"student_t"`` and
        ``"gaussian"``) except for ``"bernoulli"``, whose ``None`` is the zero mean of R&W ch. 3
        (as :class:`~bayes_gp.GPClassifier`), and ``"ordinal"``, whose mean is zero: its
        cut-points carry the location, and ``"constant"`` / ``"linear"`` (an intercept not
        identified together with them) are refused.
    priors : dict, optional
        Overrides by name (the forms of :mod:`bayes_gp.priors`). Defaults: the catalogue's for the
        kernel, with the amplitude :math:`\eta \sim \mathrm{HalfNormal}(2)` on a link scale
        (:data:`LINK_SCALE`) or :math:`\mathrm{HalfNormal}(\mathrm{sd}(y))` with the identity link;
        ``dispersion`` :math:`r \sim \mathrm{LogNormal}(\log 5, 1.5)` (from near-geometric to
        near-Poisson counts); ``nu`` :math:`\nu \sim \mathrm{Gamma}(2, 0.1)` (Juárez & Steel
        2010); ``sigma`` :math:`\sim \mathrm{HalfNormal}(\mathrm{sd}(y))`; the beta's
        ``precision`` :math:`\phi \sim \mathrm{LogNormal}(\log 10, 1.5)` (the prior sample
        size :math:`a + b` of the beta, 0.5 to 190 at 95%: from U-shaped to tightly
        concentrated proportions); the gamma's ``shape`` :math:`\alpha \sim
        \mathrm{LogNormal}(\log 5, 1.5)` (the dispersion's prior: the negative binomial's
        :math:`r` is the shape of its gamma mixing distribution; coefficient of variation
        :math:`\alpha^{-1/2}` from 2 to 0.1). Both are free of the data's units: the beta's
        and the gamma's parameter have none (:math:`\mu` carries the scale). The zero-inflated
        counts' ``zero_inflation`` :math:`\pi \sim \mathrm{Beta}(1, 1)` (uniform: brms's
        default for its ``zi``), their ``dispersion`` as the negative binomial's; the hurdle
        counts' ``zero_probability`` :math:`\pi = P(y = 0) \sim \mathrm{Beta}(1, 1)` (the
        same form; brms's default for its ``hu``) and ``dispersion`` likewise. The ordinal
        ``cutpoints`` (one vector of K - 1): independent :math:`N(0, 2.5^2)` restricted to
        increasing values by PyMC's ``ordered`` transform (:meth:`_cutpoint_prior`); a user's
        prior must carry that transform.
    exposure : array_like (n,) or str, optional
        Exposure :math:`E_i` of the count likelihoods (Poisson, negative binomial and their
        zero-inflated and hurdle versions; rate times exposure), default 1: ``n``
        values, or the name of a column of the DataFrame ``X`` (then not an input; ``predict``
        and ``held_out_predictive`` read it from a DataFrame ``X_new`` holding that column),
        as :class:`~bayes_gp.HierarchicalGP` takes it.
    trials : array_like (n,), int or str
        Binomial trials :math:`N_i` (required for ``"binomial"``), in the same forms.
    censored : array_like (n,) or str, optional
        The censoring code of each row (:mod:`bayes_gp.latent.censored`), in the same forms
        (a column name leaves the inputs): for ``"weibull"`` and ``"lognormal"`` 0 an event at
        ``y``, 1 right-censored at ``y`` (the event later); for ``"censored_gaussian"`` 0
        observed, -1 left-censored (below the detection limit ``y``), 1 right-censored (above
        ``y``), 2 interval-censored (between ``y`` and ``upper``). Default: every row observed.
        Priors: the Weibull ``shape`` :math:`k \sim \mathrm{LogNormal}(0, 1)` (median 1, the
        exponential), the log-normal's ``sigma`` :math:`\sim \mathrm{HalfNormal}(\mathrm{sd}
        (\log y))`, the censored Gaussian's as the Gaussian's.
    upper : array_like (n,) or str, optional
        ``"censored_gaussian"``: the upper limits of the interval-censored rows (code 2; other
        rows' values are ignored and may be NaN).
    jitter : float, optional
        Added to the diagonal of :math:`K`, relative to the model's latent prior scale
        :math:`s^2` (``scale.y_sd**2``: :math:`2^2 = 4`, :data:`LINK_SCALE` squared, for the
        link-scale likelihoods, :math:`\operatorname{var}(y)` for ``"student_t"`` and
        ``"gaussian"``): the absolute jitter is ``jitter * s**2``
        (:mod:`bayes_gp.inference.jitter`). ``None`` (default): an absolute jitter of
        :data:`DEFAULT_ABSOLUTE_JITTER` (``1e-6``), i.e. ``jitter = 2.5e-7`` on a link scale and
        ``1e-6 / var(y)`` for real outcomes. Raised by :meth:`check_jitter` where needed;
        ``model.jitter`` is the absolute value in use.
    zero_gp : bool
        For the zero-inflated and hurdle likelihoods: the zero probability a second latent GP,
        :math:`\mathrm{logit}\,\pi(x) = g(x)`, instead of one constant; the model is then a
        :class:`~bayes_gp.latent.zero_gp.ZeroGP` (joint NUTS only; its docstring).
    zero_kernel : str, kernel object or callable, optional
        With ``zero_gp=True``: the kernel of :math:`g` (default ``"expquad"``; hyperparameters
        ``zero_ls``, ``zero_eta``, ..., its constant mean ``zero_mean``).
    """

    #: Catalogue kernels this model refuses (see :func:`~bayes_gp.regression.kernel_spec`).
    _kernel_exclude: tuple[str, ...] = ()

    def __new__(cls, *args, zero_gp: bool = False, **kwargs):
        """``LatentGP(..., zero_gp=True)`` is a :class:`~bayes_gp.latent.zero_gp.ZeroGP`."""
        if zero_gp is not False and cls is LatentGP:
            return super().__new__(_ZERO_GP[0])
        return super().__new__(cls)

    def __init__(
        self,
        X,
        y,
        kernel: Any = "expquad",
        likelihood: Any = "poisson",
        *,
        link: str | None = None,
        ard: bool = False,
        mean=None,
        priors: Mapping[str, Any] | None = None,
        exposure=None,
        trials=None,
        jitter: float | None = None,
        censored=None,
        upper=None,
        zero_gp: bool = False,
        zero_kernel: Any = None,
    ):
        if zero_gp is not False or zero_kernel is not None:  # ZeroGP handles zero_gp=True
            raise ValueError(
                "`zero_kernel` (the kernel of the zero probability's GP) needs zero_gp=True"
                if type(self) is LatentGP else
                f"`zero_gp` / `zero_kernel` are LatentGP's (with one of the likelihoods "
                f"{[k for k in LIKELIHOODS if k.startswith(('zero_', 'hurdle_'))]}), not "
                f"{type(self).__name__}'s"
            )  # fmt: skip
        check_aligned(X, y)
        X, exposure, trials, self.size_column = _size_columns(X, exposure, trials)
        X, censored, upper, self.censoring_columns = _censoring_columns(X, censored, upper)
        X, names = as_inputs(X)
        lik, link = make_likelihood(likelihood, link, y, X.shape[0], exposure, trials,
                                    censored=censored, upper=upper)  # fmt: skip
        self.likelihood_name, self.link, self.likelihood = likelihood, link, lik
        if isinstance(lik, CustomLikelihood):  # a user's log density, named by its function
            self.likelihood_name = lik.name
        if isinstance(lik, Ordinal):
            check_ordinal_mean(mean)
        self.spec = kernel_spec(kernel, exclude=self._kernel_exclude)
        check_kernel_ard(self.spec, ard)
        self.kernel = kernel
        self.X, self.feature_names, self.y = X, names, lik.y
        self.ard, self.mean = bool(ard), mean
        self.priors = dict(priors or {})
        known = {*self.spec.params, *lik.param_names, "c", "intercept", "slope"}
        unknown = set(self.priors) - known
        if unknown:
            raise ValueError(
                f"`priors` has unknown names {sorted(unknown)}; this model's hyperparameters "
                f"are {[*self.spec.params, *lik.param_names]} (and a mean's c, intercept, slope)"
            )
        if isinstance(lik, CustomLikelihood):
            lik.check_priors(self.priors, [*self.spec.params, "c", "intercept", "slope"])
        if jitter is not None:
            check_jitter(jitter)
        self.scale = self._latent_scale()
        s2 = self.scale.y_sd**2  # absolute jitter = jitter * s2; default DEFAULT_ABSOLUTE_JITTER
        self._init_jitter(jitter, s2, DEFAULT_ABSOLUTE_JITTER / s2)
        self._fns: dict = {}
        self._latent_pm: pm.Model | None = None
        self.model = self._build()
        if isinstance(lik, CustomLikelihood):  # shape, finiteness, no coupling, at the prior
            lik.verify(*self._train(check_points(self.model, self.model.free_RVs, 0)[0])[1:])

    # ------------------------------------------------------------------ model
    def _latent_scale(self) -> DataScale:
        """The data's location and spread on the latent scale, for the default priors."""
        lik, y = self.likelihood, self.y
        base = DataScale.of(self.X, y)
        if lik.identity_link:
            return base
        if isinstance(lik, CustomLikelihood):  # a user's link scale: no location known
            return dataclasses.replace(base, y_mean=0.0, y_sd=LINK_SCALE)
        return dataclasses.replace(base, y_mean=latent_location(lik, y), y_sd=LINK_SCALE)

    def _prior(self, name: str, ard: bool = False, default=None):
        fallback = default or (lambda n: default_prior(n, self.scale, ard))
        return resolve_prior(self.spec.priors_with(self.priors), name, fallback, ard=ard)

    def _declare(self):
        """Hyperpriors, covariance, mean and likelihood parameters in the current model."""
        D = self.X.shape[1]
        hyper = {}
        for p in self.spec.params:
            ard = self.ard and p in self.spec.ard_params
            default = None
            if p.rsplit("_", 1)[-1] == "eta" and not self.likelihood.identity_link:

                def default(n):
                    return pm.HalfNormal(n, sigma=f64(LINK_SCALE))

            hyper[p] = self._prior(p, ard, default)
        cov = self.spec.build(D, hyper)
        if self.mean is None and isinstance(self.likelihood, (Bernoulli, Ordinal)):
            mean_func = pm.gp.mean.Zero()
        else:
            mean_func = mean_function(self.mean, self.scale, self._prior)
        return cov, mean_func, self._likelihood_priors()

    def _likelihood_priors(self) -> list:
        """The likelihood parameters' variables (``dispersion``, ``nu``, ``sigma``,
        ``precision``, ``shape``, ``zero_inflation``, ``zero_probability``; their defaults in the
        class docstring) in the current model."""
        lik = self.likelihood
        sd = float(np.std(np.log(self.y) if isinstance(lik, LogNormal) else self.y)) or 1.0
        defaults = {
            "dispersion": lambda n: pm.LogNormal(n, mu=f64(np.log(5.0)), sigma=f64(1.5)),
            "nu": lambda n: pm.Gamma(n, alpha=f64(2.0), beta=f64(0.1)),
            "sigma": lambda n: pm.HalfNormal(n, sigma=f64(sd)),
            "precision": lambda n: pm.LogNormal(n, mu=f64(np.log(10.0)), sigma=f64(1.5)),
            "shape": lambda n: pm.LogNormal(n, mu=f64(np.log(5.0)), sigma=f64(1.5)),
            "zero_inflation": lambda n: pm.Beta(n, alpha=f64(1.0), beta=f64(1.0)),
            "zero_probability": lambda n: pm.Beta(n, alpha=f64(1.0), beta=f64(1.0)),
            "cutpoints": self._cutpoint_prior,
        }
        if isinstance(lik, Weibull):  # median 1 (exponential times), 0.14 to 7.1 at 95%
            defaults["shape"] = lambda n: pm.LogNormal(n, mu=f64(0.0), sigma=f64(1.0))
        phi = [self._prior(p, default=defaults.get(p)) for p in self.likelihood.param_names]
        if isinstance(lik, Ordinal):
            check_cutpoint_prior(phi[0], lik.n_phi)
        return phi

    def _cutpoint_prior(self, name: str):
        r"""The ordinal cut-points' default prior: :math:`c_k \sim N(0, 2.5^2)` independently
        (:data:`~bayes_gp.latent.ordinal.CUTPOINT_SD`, brms's threshold scale) restricted to
        :math:`c_0 < \dots < c_{K-2}` by PyMC's ``ordered`` transform: the order statistics of
        :math:`K - 1` such normals (density :math:`(K-1)!\prod_k N(c_k \mid 0, 2.5^2)` on the
        ordered set), so a forward draw is the sorted independent draws and the prior
        predictive (:meth:`prior_predictive`) is exact. Sampling and the type-II fit start at the
        cut-points that reproduce the observed cumulative proportions at :math:`f = 0`
        (:meth:`~bayes_gp.latent.ordinal.Ordinal.cutpoint_centres`)."""
        centres = self.likelihood.cutpoint_centres()
        return pm.Normal(name, mu=f64(0.0), sigma=f64(CUTPOINT_SD), shape=centres.size,
                         transform=pm.distributions.transforms.ordered, initval=centres)  # fmt: skip

    def _evidence_model(self, name: str, op: LaplaceLogp):
        """A model of the hyperparameters whose likelihood term is ``op(K, m, phi)``: the
        Laplace evidence, or a variational bound. Returns it with its covariance function, mean
        function and likelihood-parameter vector."""
        n = self.X.shape[0]
        coords = {"feature": self.feature_names, "obs": np.arange(n)}
        with pm.Model(coords=coords) as model:
            cov, mean_func, phi = self._declare()
            Xt = pt.as_tensor_variable(self._kernel_inputs)
            K = plus_diagonal(gram(cov, self._kernel_inputs), self.jitter_tensor)
            m = pt.as_tensor_variable(mean_func(Xt)) * pt.ones(n)
            phi_t = (pt.concatenate([pt.as_tensor_variable(p).reshape((-1,)) for p in phi])
                     if phi else pt.zeros(0))  # a vector parameter (cut-points) flattened in
            pm.Potential(name, op(K, m, phi_t)[0])
        return model, cov, mean_func, phi_t

    def _build(self) -> pm.Model:
        self._op = LaplaceLogp(self.likelihood)
        model, self._cov, self._mean_func, self._phi = self._evidence_model("log_q", self._op)
        self._latent_pm = None
        native_gp.register(model, self._laplace_description)
        return model

    def _laplace_description(self):
        """The Laplace-integrated model (``method="nuts"``) as the C log density of
        :mod:`bayes_gp.inference.native_laplace` computes it, or ``None`` where it does not
        (numba compiles it then): the Op's likelihood one of those the C code covers
        (:func:`bayes_gp.latent.native.likelihood_spec`, with its parameter, if any,
        a free variable or a number), a catalogue kernel or a sum of products of them at the
        training inputs, and a zero or constant mean (the C code's own checks follow: which
        kernel, which priors, nothing added)."""
        from bayes_gp.inference.native_laplace import NativeLaplace
        from bayes_gp.inference.native_model import kernel_of
        from bayes_gp.latent.native import likelihood_spec

        op, model, spec = self._op, self.model, self.spec
        if (not type(self).__dict__.get("_laplace_in_c", False) or type(op) is not LaplaceLogp
                or not getattr(op, "native", True)):  # native=False: the NumPy solver's Op
            return None
        found = likelihood_spec(op.likelihood)
        names = op.likelihood.param_names
        if found is None or len(names) > 1:
            return None
        hyper = {p: model[p] if p in model.named_vars else self.priors.get(p) for p in spec.params}
        kernel = kernel_of(spec, hyper)
        centre = self._constant_mean(self._mean_func)
        if kernel is None or centre is None:
            return None
        phi = None
        if names:  # the likelihood's one parameter: its variable, or the number fixing it
            phi = model[names[0]] if names[0] in model.named_vars else self.priors.get(names[0])
        code, a1, a2 = found
        return NativeLaplace(
            kernel=kernel, X=self.X, code=code, y=np.asarray(op.likelihood.y, dtype=np.float64),
            a1=a1, a2=a2, jitter=float(self.jitter_tensor.get_value()), mean=centre,
            potential=model["log_q"], tol=op.tol, max_iter=op.max_iter, start=op.start, phi=phi,
        )  # fmt: skip

    @staticmethod
    def _constant_mean(mean):
        """A zero or constant mean function's value (a number or the model's variable), or
        ``None`` for any other mean."""
        if type(mean) is pm.gp.mean.Zero:
            return 0.0
        if type(mean) is pm.gp.mean.Constant and getattr(mean.c, "ndim", np.ndim(mean.c)) == 0:
            return mean.c
        return None

    def _latent_model(self) -> pm.Model:
        """Joint model over the whitened latent values and the hyperparameters."""
        if self._latent_pm is not None:
            return self._latent_pm
        lik = self.likelihood
        n = self.X.shape[0]
        with pm.Model(coords={"feature": self.feature_names, "obs": np.arange(n)}) as model:
            cov, mean_func, phi = self._declare()
            gp = pm.gp.Latent(mean_func=mean_func, cov_func=cov)
            f = gp.prior("f", X=self._kernel_inputs, reparameterize=True,
                         jitter=self.jitter_tensor, dims="obs")  # fmt: skip
            if isinstance(lik, Bernoulli) and self.link == "logit":
                pm.Bernoulli("y", logit_p=f, observed=lik.y, dims="obs")
            elif isinstance(lik, Bernoulli):
                pm.Bernoulli("y", p=pm.math.invprobit(f), observed=lik.y, dims="obs")
            elif isinstance(lik, Binomial):
                pm.Binomial("y", n=lik.trials.astype("int64"), logit_p=f, observed=lik.y,
                            dims="obs")  # fmt: skip
            elif isinstance(lik, ZeroInflatedPoisson):  # PyMC's psi: P(from the Poisson)
                pm.ZeroInflatedPoisson("y", psi=1.0 - phi[0], mu=lik.exposure * pt.exp(f),
                                       observed=lik.y, dims="obs")  # fmt: skip
            elif isinstance(lik, ZeroInflatedNegativeBinomial):
                pm.ZeroInflatedNegativeBinomial("y", psi=1.0 - phi[1],
                                                mu=lik.exposure * pt.exp(f), alpha=phi[0],
                                                observed=lik.y, dims="obs")  # fmt: skip
            elif isinstance(lik, HurdlePoisson):  # PyMC's psi: P(y > 0) = 1 - pi
                pm.HurdlePoisson("y", psi=1.0 - phi[0], mu=lik.exposure * pt.exp(f),
                                 observed=lik.y, dims="obs")  # fmt: skip
            elif isinstance(lik, HurdleNegativeBinomial):
                pm.HurdleNegativeBinomial("y", psi=1.0 - phi[1], mu=lik.exposure * pt.exp(f),
                                          alpha=phi[0], observed=lik.y, dims="obs")  # fmt: skip
            elif isinstance(lik, Poisson):
                pm.Poisson("y", mu=lik.exposure * pt.exp(f), observed=lik.y, dims="obs")
            elif isinstance(lik, NegativeBinomial):
                pm.NegativeBinomial("y", mu=lik.exposure * pt.exp(f), alpha=phi[0],
                                    observed=lik.y, dims="obs")  # fmt: skip
            elif isinstance(lik, StudentT):
                pm.StudentT("y", nu=phi[0], mu=f, sigma=phi[1], observed=lik.y, dims="obs")
            elif isinstance(lik, Beta):  # mean-precision: alpha = mu phi, beta = (1 - mu) phi
                pm.Beta("y", alpha=phi[0] * pm.math.sigmoid(f),
                        beta=phi[0] * pm.math.sigmoid(-f), observed=lik.y, dims="obs")  # fmt: skip
            elif isinstance(lik, Ordinal):  # P(y <= k) = F(c_k - f), as Ordinal
                dist = pm.OrderedLogistic if lik.link == "logit" else pm.OrderedProbit
                # sorted: the identity under the ordered transform (NUTS), and the order
                # statistics that the default prior is for forward (prior predictive) draws
                dist("y", eta=f, cutpoints=pt.sort(phi[0]), compute_p=False,
                     observed=lik.y.astype("int64"), dims="obs")  # fmt: skip
            elif isinstance(lik, CustomLikelihood):  # the user's log density of the data
                pm.Potential("log_likelihood", lik.expression(f, phi).sum())
            elif isinstance(lik, Gamma):  # rate alpha / mu
                pm.Gamma("y", alpha=phi[0], beta=phi[0] * pt.exp(-f), observed=lik.y, dims="obs")
            elif isinstance(lik, (Weibull, LogNormal, CensoredGaussian)):
                _censored_observation(lik, f, phi[0])
            else:
                pm.Normal("y", mu=f, sigma=phi[0], observed=lik.y, dims="obs")
        self._latent_pm = model
        self._joint_mean = mean_func
        native_gp.register(model, self._joint_description)
        return model

    def _joint_description(self):
        """The joint model as the C log density of :mod:`bayes_gp.inference.native_latent`
        computes it, or ``None`` where it does not (nutpie compiles it with numba then): a
        catalogue kernel or a sum of products of them at the training inputs, a zero or
        constant mean, and the Bernoulli or binomial likelihood with the logit link or the
        Poisson likelihood (the C code's own checks follow: which kernel, which priors,
        nothing added to the model)."""
        from bayes_gp.inference.native_latent import NativeJointLatent
        from bayes_gp.inference.native_model import kernel_of

        lik, model, spec = self.likelihood, self._latent_pm, self.spec
        if not type(self).__dict__.get("_joint_in_c", False):  # the class's own say
            return None
        hyper = {p: model[p] if p in model.named_vars else self.priors.get(p) for p in spec.params}
        kernel = kernel_of(spec, hyper)
        if kernel is None:
            return None
        y = np.asarray(lik.y, dtype=np.float64)
        if type(lik) is Bernoulli and self.link == "logit":
            link, m, c = "logit", np.ones_like(y), np.zeros_like(y)
        elif type(lik) is Binomial:  # log C(m, y)
            m = np.asarray(lik.trials, dtype=np.float64)
            c = gammaln(m + 1) - gammaln(y + 1) - gammaln(m - y + 1)
            link = "logit"
        elif type(lik) is Poisson:  # y log E - log y!
            m = np.asarray(lik.exposure, dtype=np.float64)
            link, c = "log", y * np.log(m) - gammaln(y + 1)
        else:
            return None
        centre = self._constant_mean(self._joint_mean)
        if centre is None:
            return None
        return NativeJointLatent(
            kernel=kernel, X=self.X, link=link, y=y, m=m, c=c,
            jitter=float(self.jitter_tensor.get_value()), mean=centre, z=model["f_rotated_"],
            f=model["f"],
        )  # fmt: skip

    @property
    def _kernel_inputs(self) -> np.ndarray:
        """The matrix the covariance and mean functions see at the training rows: ``X`` (a
        subclass may augment it, e.g. with a group code)."""
        return self.X

    @property
    def hyperparameters(self) -> list[str]:
        return [rv.name for rv in self.model.free_RVs]

    def _compiled(self, key: str, build):
        if key not in self._fns:
            self._fns[key] = function_of_values(self.model.free_RVs, build)
        return self._fns[key]

    def _train(self, values) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(K + jitter I, m, phi)`` at hyperparameter values."""
        n = self.X.shape[0]

        def build(_Xn):  # called once, when the function is compiled
            Xt = pt.as_tensor_variable(self._kernel_inputs)
            K = plus_diagonal(gram(self._cov, self._kernel_inputs), self.jitter_tensor)
            return [K, pt.as_tensor_variable(self._mean_func(Xt)) * pt.ones(n), self._phi]

        K, m, phi = self._compiled("train", build)(*values, np.zeros((0, self.X.shape[1])))
        return K, m, np.atleast_1d(phi)

    def _new(self, values, Xn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(K(X, X_new), diag K(X_new), m(X_new))``."""

        def build(Xv):  # called once, when the function is compiled
            Xt = pt.as_tensor_variable(self._kernel_inputs)
            mean = pt.as_tensor_variable(self._mean_func(Xv)) * pt.ones(Xv.shape[0])
            return [self._cov(Xt, Xv), self._cov(Xv, diag=True), mean]

        return self._compiled("new", build)(*values, Xn)

    def _values(self, params: Mapping[str, Any]) -> list[np.ndarray]:
        return hyperparameter_values(self.model, self.model.free_RVs, params, self._fns)

    @single_blas_thread
    def check_jitter(self, random_seed: int | None = None) -> JitterChoice:
        """Pre-flight Cholesky check of :math:`K + \\nu I` at the initial point and at prior
        draws (:func:`bayes_gp.inference.jitter.preflight`); the jitter that works is adopted."""
        return self._preflight(
            self.model.free_RVs,
            lambda values: self._train(values)[0],
            "latent jitter",
            random_seed,
        )

    # ------------------------------------------------------------- evidence
    def _mode(self, values, f0=None, gradient: bool = False):
        K, m, phi = self._train(values)
        res = laplace(K, m, self.likelihood, phi, f0=f0, gradient=gradient)
        return res, K, m, phi

    @single_blas_thread
    def log_marginal_likelihood(
        self, params: Mapping[str, Any], *, eval_gradient: bool = False, method: str = "laplace"
    ):
        r"""The approximate log evidence at given hyperparameters: the Laplace evidence
        :math:`\log q(y \mid \theta, \phi)` (R&W eq. 3.32 generalised), or with
        ``method="ep"`` (Bernoulli-probit) :math:`\log Z_{EP}` (R&W eq. 3.65); :math:`-\infty`
        where the approximation is infeasible.

        With ``eval_gradient=True``: ``(value, grad)``, ``grad`` a dict name → derivative with
        respect to each hyperparameter on its own scale (R&W Algorithm 5.1 generalised, or R&W
        eq. 5.27 for EP, through the kernel and mean graphs by PyTensor; scikit-learn
        differentiates with respect to :math:`\log\theta`, which is :math:`\theta` times this).
        """
        if method not in ("laplace", "ep"):
            raise ValueError(f"`method` must be 'laplace' or 'ep', got {method!r}")
        if method == "ep":
            self._check_ep()
        values = self._values(params)
        if not eval_gradient:
            res = self._mode(values)[0] if method == "laplace" else self._ep(values)
            if method == "ep":
                self._warn_ep(res)
            return float(res.log_evidence)
        key = ("lml_grad", method)
        if key not in self._fns:
            model = self.model if method == "laplace" else self._ep_model()
            self._fns[key] = observed_logp_and_grad(model)
        value, *grads = self._fns[key](*values)
        names = self.hyperparameters
        return float(value), {k: np.asarray(g, float) for k, g in zip(names, grads, strict=True)}

    # ------------------------------------------------------------------ fits
    def _type2(self, model_of, solve, what: str, n_restarts, prior, random_seed, params, maxiter):
        """The type-II fit shared by :meth:`fit_laplace` and :meth:`fit_vi`: maximise the
        objective of ``model_of()`` (after the jitter check, which may raise the shared jitter),
        or take ``params``; then ``solve(values)``, the approximation there. Returns it and the
        :class:`LatentFit` fields."""
        t0 = time.perf_counter()
        choice = self.check_jitter(random_seed)
        if params is None:
            fit = optimize(
                model_of(), n_restarts=n_restarts, prior=prior, random_seed=random_seed,
                maxiter=maxiter, spacing=model_spacing(self),
            )  # fmt: skip
            params, objective = fit.params, fit.objective
            restarts, grad_norm = fit.restarts, fit.grad_norm
            self._warn_separable(params, what)
        else:
            objective, restarts, grad_norm, prior = float("nan"), [], float("nan"), False
        values = self._values(params)
        res = solve(values)
        if not res.feasible:
            raise RuntimeError(f"the {what} approximation is infeasible at {params}: {res.reason}")
        if not np.isfinite(objective):
            objective = res.log_evidence
        return res, {
            "params": dict(zip(self.hyperparameters, values, strict=True)),
            "log_marginal_likelihood": float(res.log_evidence),
            "objective": float(objective),
            "prior": bool(prior),
            "f_mode": res.f,
            "restarts": restarts,
            "grad_norm": grad_norm,
            "seconds": time.perf_counter() - t0,
            "jitter": choice.jitter,
            "jitter_default": choice.default,
        }

    def _warn_separable(self, params: Mapping[str, Any], what: str) -> None:
        """Binary outcomes: warn when a type-II latent amplitude ran away (separable classes)."""
        if self.likelihood.outcome != "binary":
            return
        eta = [np.max(v) for k, v in params.items() if k.rsplit("_", 1)[-1] == "eta"]
        if eta and max(eta) > ETA_WARN:
            warnings.warn(
                f"type-II {what} fit: latent amplitude eta = {max(eta):.3g}. The approximate "
                "evidence keeps growing with the latent scale, as it does for (nearly) separable "
                "classes, and the optimum may be at infinity: use prior=True (MAP), NUTS "
                "(sample), or fixed hyperparameters (params=...)",
                RuntimeWarning,
                skip_file_prefixes=_PACKAGE,
            )

    @single_blas_thread
    def fit_laplace(
        self,
        n_restarts: int = 5,
        prior: bool = True,
        random_seed: int | None = None,
        *,
        params: Mapping[str, Any] | None = None,
        maxiter: int = 1000,
    ) -> LatentFit:
        """Type-II fit of the Laplace evidence: MAP (``prior=True``) or ML-II; or, with
        ``params``, the Laplace approximation at exactly those hyperparameters."""
        _, fields = self._type2(
            lambda: self.model, lambda values: self._mode(values)[0], "Laplace", n_restarts,
            prior, random_seed, params, maxiter,
        )  # fmt: skip
        return LatentFit(**fields)

    def _vi_method(self, method: str | None) -> str:
        lik = self.likelihood
        jj_ok = isinstance(lik, Bernoulli) and self.link == "logit"
        if method is None:
            return "jj" if jj_ok else "kl"
        if method not in ("jj", "kl"):
            raise ValueError(f"`method` must be 'jj' or 'kl', got {method!r}")
        if method == "jj" and not jj_ok:
            raise ValueError(
                "the Jaakkola-Jordan bound is for the bernoulli likelihood with the logit link; "
                "use method='kl' (the Gaussian KL approximation) for this model"
            )
        return method

    def _bound_model(self, method: str) -> pm.Model:
        """The model with the variational bound in place of the Laplace evidence."""
        key = ("bound_model", method)
        if key not in self._fns:
            op = VariationalBound(self.likelihood, method=method)
            self._fns[key] = self._evidence_model("elbo", op)[0]
        return self._fns[key]

    def _variational(self, values, method: str):
        """The converged variational posterior at hyperparameter values, and its sites."""
        K, m, phi = self._train(values)
        if method == "jj":
            res = jaakkola_jordan(K, m, self.likelihood, phi)
        else:
            res = gaussian_kl(K, m, self.likelihood, phi)
        return res, K, m, phi

    @single_blas_thread
    def fit_vi(
        self,
        n_restarts: int = 5,
        prior: bool = True,
        random_seed: int | None = None,
        *,
        method: str | None = None,
        params: Mapping[str, Any] | None = None,
        maxiter: int = 1000,
    ) -> VIFit:
        r"""Variational inference for the latent GP with type-II hyperparameters.

        ``method="jj"`` (the default for the bernoulli likelihood with the logit link): the
        Jaakkola–Jordan local bound on every sigmoid (PRML §10.6 applied to the latent GP; Gibbs
        & MacKay 2000), whose variational parameters :math:`\xi` have closed-form updates and
        make :math:`q(f)` Gaussian in closed form. ``method="kl"`` (every likelihood): the
        Gaussian :math:`q(f)` closest in KL divergence (Opper & Archambeau 2009), expectations
        by Gauss–Hermite. :mod:`bayes_gp.latent.vi` has the equations. The hyperparameters
        maximise the bound (plus the log prior when ``prior=True``) with the package's
        multistart L-BFGS (:func:`bayes_gp.inference.typeii.optimize`) and the bound's exact
        gradient; with ``params``, the variational posterior at exactly those hyperparameters.
        """
        method = self._vi_method(method)
        res, fields = self._type2(
            lambda: self._bound_model(method), lambda values: self._variational(values, method)[0],
            "variational", n_restarts, prior, random_seed, params, maxiter,
        )  # fmt: skip
        return VIFit(
            **fields, method="vi", site_precision=site_precision(method, res.variational),
            variational=method,
        )  # fmt: skip

    def _check_ep(self) -> None:
        lik = self.likelihood
        if not (isinstance(lik, Bernoulli) and self.link == "probit"):
            raise ValueError(
                "EP is implemented for the probit link only (its tilted moments are closed-form): "
                "use link='probit', or the Laplace approximation / NUTS for the logit link"
            )

    def _ep_model(self) -> pm.Model:
        """The model with :math:`\\log Z_{EP}` in place of the Laplace evidence."""
        if "ep_model" not in self._fns:
            self._fns["ep_model"] = self._evidence_model("log_z_ep", EPEvidence(self.likelihood))[0]
        return self._fns["ep_model"]

    def _ep(self, values):
        """EP at hyperparameter values (:func:`bayes_gp.latent.ep.expectation_propagation`)."""
        K, m, phi = self._train(values)
        return expectation_propagation(K, m, self.likelihood, phi)

    def _warn_ep(self, res) -> None:
        if res.feasible and not res.converged:
            warnings.warn(
                f"EP stopped after {res.n_iter} sweeps without converging; the approximation, its "
                "log evidence and the predictions are unreliable. This happens at extreme "
                "hyperparameters (a huge latent amplitude eta, nearly separable classes): use "
                "prior=True, fixed params=, or NUTS (sample)",
                RuntimeWarning,
                skip_file_prefixes=_PACKAGE,
            )

    @single_blas_thread
    def fit_ep(
        self,
        n_restarts: int = 5,
        prior: bool = True,
        random_seed: int | None = None,
        *,
        params: Mapping[str, Any] | None = None,
        maxiter: int = 1000,
    ) -> EPFit:
        """Expectation propagation (R&W Algorithms 3.5, 3.6; :mod:`bayes_gp.latent.ep`), for the
        bernoulli likelihood with the probit link, with type-II hyperparameters maximising
        :math:`\\log Z_{EP}` (plus the log prior with ``prior=True``; gradient R&W eq. 5.27) by
        the package's multistart L-BFGS; or, with ``params``, EP at exactly those
        hyperparameters."""
        self._check_ep()
        res, fields = self._type2(
            self._ep_model, self._ep, "EP", n_restarts, prior, random_seed, params, maxiter,
        )  # fmt: skip
        self._warn_ep(res)
        return EPFit(**fields, site_precision=res.state.tau_t, state=res.state)

    def _factor(self, K, m, phi, fit, f) -> SiteFactor:
        """The Gaussian latent posterior at one set of hyperparameters: the Gaussian sites of a
        :class:`SiteFit` (variational or EP), else the Laplace approximation at the mode ``f``."""
        if isinstance(fit, SiteFit):
            LK, _ = jittered_cholesky(K)
            a = cho_solve((LK, True), f - m)  # K^-1 (mu - m)
            return SiteFactor(K, a, fit.site_precision)
        return ModeFactor(K, f, self.likelihood, phi)

    sample_options: ClassVar[dict[str, Any]] = {"method": NUTS}
    #: whether the joint model (``method="nuts_joint"``) is the one
    #: :mod:`bayes_gp.inference.native_latent` computes: declared by each class for itself, as
    #: a subclass may build another model (:meth:`_joint_description`)
    _joint_in_c: ClassVar[bool] = True
    #: whether the Laplace-integrated model (``method="nuts"``) is the one
    #: :mod:`bayes_gp.inference.native_laplace` computes (as :attr:`_joint_in_c`)
    _laplace_in_c: ClassVar[bool] = True

    def _nuts_run(self, sampler, random_seed, *, method: str) -> NutsRun:
        """:meth:`sample` runs NUTS with ``method="nuts"`` over the hyperparameters, the
        latent GP integrated out by Laplace (module docstring), or with ``method="nuts_joint"``
        jointly over the whitened latent values; the jitter pre-flight first (and, on a new
        machine, the C library's compilation started beside it where
        :mod:`bayes_gp.inference.native_laplace` covers the model, else the numba solver's:
        :func:`bayes_gp.latent.native.start_compiling`)."""
        method = canonical_method(f"{type(self).__name__}.sample", method, LATENT_RENAMED)
        if method not in (NUTS, NUTS_JOINT):
            raise ValueError(f"`method` must be 'nuts' or 'nuts_joint', got {method!r}")
        if method == NUTS and resolve_sampler(sampler) == "nutpie":
            if native_gp.covers(self.model):  # C (bayes_gp.inference.native_laplace)
                native_gp.start_compiling()
            elif self._op.uses_native:  # numba's solver, on a new machine compiled beside
                from bayes_gp.latent.native import start_compiling

                start_compiling()
        attrs = {**self.check_jitter(random_seed).attrs(), "bayes_gp_method": method}
        latent = method == NUTS_JOINT
        model = self._latent_model() if latent else self.model
        native = self._op.uses_native or native_gp.covers(self.model)
        if not latent and native and getattr(self._op, "start", None) is None:
            self._op.start = self._initial_mode()
        return NutsRun(model, attrs=attrs, latent=latent)

    def _initial_mode(self) -> np.ndarray | None:
        """The Laplace mode at the model's initial point (``None`` where it is infeasible): the
        native solver's fixed starting point (:attr:`~bayes_gp.latent.op.LaplaceLogp.start`),
        deterministic, so that the draws stay reproducible from the seed with chains in
        parallel threads."""
        from bayes_gp.inference import native_laplace
        from bayes_gp.inference.jitter import check_points

        point = check_points(self.model, self.model.free_RVs, 0)[0]
        found = native_laplace.modes(self.model, [np.asarray(v)[None, None] for v in point],
                                     cold=True)  # fmt: skip
        if found is not None:  # in C, where it covers the model: nothing compiled
            return found.f[0, 0] if found.status[0, 0] == 0 else None
        res = self._mode(point)[0]
        return res.f if res.feasible else None

    def _nuts_result(self, idata, run: NutsRun, random_seed):
        r"""A pointwise ``log_likelihood`` group: the LA-LOO terms of each draw's Laplace
        approximation (:func:`bayes_gp.latent.predictive.la_loo`) for ``"nuts"``, which also
        stores each draw's latent mode as ``f_mode`` (on the native solver, one thread per
        chain, where the model's Op uses it: :meth:`_native_draws`; else the NumPy solver, draw
        after draw, each warm-started from the previous mode);
        :math:`\log p(y_i \mid f_i, \phi)` for ``"nuts_joint"``."""
        from bayes_gp.inference.nuts import add_log_likelihood

        latent = run.latent
        post = idata["posterior"]
        names = self.hyperparameters
        lik = self.likelihood
        if latent:

            def pointwise(values):  # log p(y_i | f_i, phi) of the joint draw
                return lik.log_density(values[-1], self._train(values[:-1])[2])

            return add_log_likelihood(idata, [*names, "f"], pointwise)
        op = getattr(self, "_op", None)
        if op is not None and (op.uses_native or native_gp.covers(self.model)):
            f_mode, ll = self._native_draws(post)
            return self._with_modes(idata, f_mode, ll)
        modes: list[np.ndarray] = []

        def pointwise(values):  # each draw's Laplace mode (warm-started) and its LA-LOO terms
            res, _, _, phi = self._mode(values, modes[-1] if modes else None, gradient=True)
            if not res.feasible:
                raise RuntimeError(
                    f"the Laplace approximation is infeasible at posterior draw {len(modes)}: "
                    f"{res.reason}"
                )
            modes.append(res.f)
            return la_loo(res, lik, phi)

        add_log_likelihood(idata, names, pointwise)
        f_mode = np.reshape(modes, (post.sizes["chain"], post.sizes["draw"], -1))
        return self._with_modes(idata, f_mode)

    @staticmethod
    def _with_modes(idata, f_mode: np.ndarray, ll: np.ndarray | None = None):
        """``f_mode`` ``(chain, draw, obs)`` into the posterior group, and the LA-LOO terms
        ``ll`` of the same shape as the ``log_likelihood`` group when given."""
        from bayes_gp.inference.nuts import set_log_likelihood

        if ll is not None:
            set_log_likelihood(idata, ll, "y")
        ds = idata["posterior"].to_dataset().assign(f_mode=(("chain", "draw", "obs"), f_mode))
        idata["posterior"] = ds.assign_coords(obs=np.arange(f_mode.shape[-1]))
        return idata

    @single_blas_thread  # two solver threads on two cores: one BLAS thread each
    def _native_draws(self, post) -> tuple[np.ndarray, np.ndarray]:
        r"""Each draw's Laplace mode and LA-LOO terms (:func:`la_loo_terms`), ``(chain, draw,
        obs)`` each, from the native solver (:func:`bayes_gp.latent.native.laplace_mode`),
        which runs without the GIL: one thread per chain (two at a time), each draw's Newton
        method warm-started from the mode of the previous draw of the same chain, so that
        every value is a function of that chain's draws alone, whatever the threads' timing.
        Where :mod:`bayes_gp.inference.native_laplace` covers the model, all of it in C
        (:func:`~bayes_gp.inference.native_laplace.modes`: nothing compiled); else the kernel
        matrices come from the model's compiled function, one call at a time."""
        import threading
        from concurrent.futures import ThreadPoolExecutor

        from bayes_gp.inference import native_laplace
        from bayes_gp.latent.native import REASONS, laplace_mode

        lik = self.likelihood
        arrays = [np.asarray(post[n]) for n in self.hyperparameters]
        n_chain, n_draw = arrays[0].shape[:2]
        n = lik.n
        f_mode, ll = np.empty((n_chain, n_draw, n)), np.empty((n_chain, n_draw, n))
        found = native_laplace.modes(self.model, arrays)
        if found is not None:  # in C, where it covers the model (no kernel function compiled)
            bad = np.argwhere(found.status != 0)
            if bad.size:
                c, d = bad[0]
                raise RuntimeError(
                    f"the Laplace approximation is infeasible at posterior draw {d} of chain "
                    f"{c}: {REASONS[int(found.status[c, d])]}"
                )
            # the likelihood parameter of each draw (sampled, or the number fixing it)
            phis = [np.asarray(post[p]) if p in post else np.full((n_chain, n_draw),
                    float(np.asarray(self.priors[p]))) for p in lik.param_names]  # fmt: skip
            for c in range(n_chain):
                for d in range(n_draw):
                    phi = np.array([v[c, d] for v in phis])
                    ll[c, d] = la_loo_terms(lik, phi, found.f[c, d], found.cov_diag[c, d])
            return found.f, ll
        lock = threading.Lock()  # the compiled kernel function keeps its own buffers

        def chain(c: int) -> None:
            f0 = None
            for d in range(n_draw):
                with lock:
                    K, m, phi = self._train([a[c, d] for a in arrays])
                    K, m = np.array(K), np.array(m)
                res = laplace_mode(K, m, lik, f0=f0)
                if res.f is None:
                    raise RuntimeError(
                        f"the Laplace approximation is infeasible at posterior draw {d} of chain "
                        f"{c}: {REASONS[res.status]}"
                    )
                f_mode[c, d] = f0 = res.f
                ll[c, d] = la_loo_terms(lik, phi, res.f, res.cov_diag)

        with ThreadPoolExecutor(min(n_chain, 2)) as pool:
            for fut in [pool.submit(chain, c) for c in range(n_chain)]:
                fut.result()
        return f_mode, ll

    # ------------------------------------------------------------ prediction
    def _check_new(self, X_new) -> np.ndarray:
        return new_inputs(self._without_size(X_new), self.X.shape[1], self.feature_names)

    def _without_size(self, X_new):
        """``X_new`` without the exposure / trials column named at construction, if it has it."""
        names = [getattr(self, "size_column", None), *getattr(self, "censoring_columns", ())]
        if hasattr(X_new, "columns"):
            drop = [c for c in names if c is not None and c in X_new.columns]
            return X_new.drop(columns=drop) if drop else X_new
        return X_new

    def _size_at(self, X_new, size):
        """``size`` as given, else the named exposure / trials column of a DataFrame ``X_new``
        (``None``: exposure or trials 1)."""
        name = getattr(self, "size_column", None)
        if size is None and name is not None and hasattr(X_new, "columns"):
            if name in X_new.columns:
                return _column(name, X_new[name])
        return size

    def _draw_values(self, fit, max_draws: int):
        """``[(values, f)]`` for a point fit (its mode) or for up to ``max_draws`` NUTS draws
        (``f`` the Laplace mode or the latent draw), and whether ``f`` is a mode."""
        self.check_fit(fit)
        if not is_nuts(fit):
            return [(self._values(fit.params), np.asarray(fit.f_mode, float))], True
        post = fit["posterior"]
        mode = "f_mode" in post
        f = np.asarray(post["f_mode" if mode else "f"], float).reshape(-1, self.X.shape[0])
        flat = [np.asarray(post[n]) for n in self.hyperparameters]
        flat = [a.reshape((-1, *a.shape[2:])) for a in flat]
        idx = np.arange(f.shape[0])
        if idx.size > max_draws:
            idx = np.sort(np.random.default_rng(0).choice(idx.size, max_draws, replace=False))
        return [([a[i] for a in flat], f[i]) for i in idx], mode

    def _latent_moments(self, Xn: np.ndarray, fit, max_draws: int):
        """Per draw: mean and variance of :math:`f_*` and the likelihood parameters."""
        draws, mode = self._draw_values(fit, max_draws)
        means, variances, phis = [], [], []
        for values, f in draws:
            K, m, phi = self._train(values)
            Ks, kss, m_new = self._new(values, Xn)
            if mode:
                mu, var = self._factor(K, m, phi, fit, f).predict(Ks, kss, m_new)
            else:  # E[f_* | f, theta] and its variance given f (R&W eq. 2.19 noise-free)
                mu, var = joint_conditional(K, f - m)(Ks, kss)
                mu, var = m_new + mu, np.maximum(var, 0.0)
            means.append(mu)
            variances.append(var)
            phis.append(phi)
        return np.array(means), np.array(variances), phis

    @single_blas_thread
    def predict(self, X_new, fit, *, size=None, max_draws: int = 200, random_seed: int = 0):
        r"""Predictions at ``X_new`` for a type-II fit or NUTS draws (mixed over the draws).

        Returns a :class:`~bayes_gp.predictive.Prediction`:

        * ``latent_mean``, ``latent_sd``: of :math:`f_*` (mixed over the draws by the law of
          total variance);
        * ``mean``, ``var``: the predictive mean and variance of :math:`y_*` (expected count,
          probability, …, with exposure or trials ``size``, default 1), by Gauss–Hermite
          quadrature (:func:`~bayes_gp.latent.predictive.response_moments`), mixed over the
          draws;
        * ``lower``, ``upper``: the central 94% predictive interval of :math:`y_*`, the 3% and
          97% quantiles of the predictive distribution
          :math:`F(y) = \frac1S\sum_s \int P(Y \le y \mid f, \phi_s) N(f \mid \mu_s, s_s^2) df`
          by quadrature (:func:`~bayes_gp.latent.predictive.predictive_quantiles`), not Monte
          Carlo: deterministic (identical rows give identical bounds) and integers for counts;
        * for a Bernoulli or binomial likelihood ``prob_mean``, ``prob_lower``, ``prob_upper``:
          the mean of the probability :math:`\pi_* = \sigma(f_*)` (of a 1, of a success per
          trial) and its 94% credible band, the link applied to the 3% and 97% quantiles of
          :math:`f_*` (a monotone map, exact; the mixture's quantiles for NUTS);
        * ``extra["n_draws"]``: the posterior draws mixed (1 for a type-II fit);
          ``extra["median"]`` for the censored likelihoods (``"weibull"``, ``"lognormal"``,
          ``"censored_gaussian"``): the predictive median of :math:`y_*` (the median survival
          time), by the same quadrature.

        ``max_draws`` caps the NUTS draws mixed (an evenly spread subset, the same every call).
        ``random_seed`` is not used: nothing in the prediction is random any more (the interval
        of :math:`y_*` was Monte Carlo before); it is kept so that calls that pass it still work.
        """
        Xn = self._check_new(X_new)
        size = self._size_at(X_new, size)
        size = None if size is None else _sizes(size, Xn.shape[0])
        moments = self._latent_moments(Xn, fit, max_draws)
        return self._predictive(*moments, size)

    @single_blas_thread
    def predict_proba(self, X_new, fit, *, max_draws: int = 200) -> np.ndarray:
        r"""The ordinal likelihood's category probabilities at ``X_new``, ``(m, K)``:
        :math:`P(y_* = k) = \int P(y = k \mid f_*, c)\, q(f_*)\, df_*` for the Gaussian
        latent distribution of a type-II fit, or averaged over up to ``max_draws`` NUTS draws
        (:meth:`~bayes_gp.latent.ordinal.Ordinal.predictive_probabilities`); column ``k`` is
        category ``k`` (``likelihood.labels[k]`` for an ordered Categorical ``y``)."""
        if not isinstance(self.likelihood, Ordinal):
            raise ValueError(
                f"predict_proba gives category probabilities of the ordinal likelihood; this "
                f"model's is {self.likelihood_name!r}: predict() gives its response mean (and "
                "prob_mean for a binary outcome)"
            )
        means, variances, phis = self._latent_moments(self._check_new(X_new), fit, max_draws)
        return np.mean([self.likelihood.predictive_probabilities(phi, mu, var)
                        for mu, var, phi in zip(means, variances, phis, strict=True)], axis=0)  # fmt: skip

    @single_blas_thread
    def predict_latent(self, X_new, fit, *, max_draws: int = 200) -> Prediction:
        r"""The latent :math:`f_*` at ``X_new``: its mean and variance (mixed over up to
        ``max_draws`` draws of a NUTS fit by the law of total variance) and central 94%
        interval (Gaussian for a type-II fit, the mixture's quantiles for NUTS:
        :func:`~bayes_gp.predictive.gaussian_mixture_quantiles`) as ``mean``, ``var``,
        ``lower``, ``upper`` (and ``latent_mean``, ``latent_sd``). It needs nothing of the
        likelihood but its log density: the predictions of a user likelihood given without
        ``mean=`` (:mod:`bayes_gp.latent.custom`)."""
        means, variances, _ = self._latent_moments(self._check_new(X_new), fit, max_draws)
        mean = means.mean(axis=0)
        var = variances.mean(axis=0) + means.var(axis=0)
        sds = np.sqrt(variances)
        if means.shape[0] == 1:
            lower, upper = means[0] - Z_CI * sds[0], means[0] + Z_CI * sds[0]
        else:
            lower, upper = gaussian_mixture_quantiles(means, sds, CI_QUANTILES)
        return Prediction(mean, var, None, lower, upper, {"n_draws": len(means)},
                          latent_mean=mean, latent_sd=np.sqrt(var))  # fmt: skip

    @property
    def _probability_outcome(self) -> bool:
        r"""Whether :math:`E[y \mid f]` per trial is a probability (Bernoulli, binomial)."""
        return self.likelihood.outcome == "binary" or self.likelihood.size_name == "trials"

    def _mean_band(self, means, variances, phis):
        r"""The response mean per unit exposure or trial, :math:`E[g^{-1}(f_*)]`, averaged over
        the draws, and its central 94% band :math:`g^{-1}(q_{0.03}(f_*))`,
        :math:`g^{-1}(q_{0.97}(f_*))`: the inverse link :math:`g^{-1}` is increasing, so it maps
        the quantiles of :math:`f_*` (Gaussian, or the mixture's for several draws:
        :func:`~bayes_gp.predictive.gaussian_mixture_quantiles`) onto those of the mean."""
        sds = np.sqrt(variances)
        if means.shape[0] == 1:
            qs = [means[0] - Z_CI * sds[0], means[0] + Z_CI * sds[0]]
        else:
            qs = gaussian_mixture_quantiles(means, sds, CI_QUANTILES)
        lik, phi = self.likelihood, phis[0]
        mean = np.mean([expected_response(lik, p, mu, var)
                        for mu, var, p in zip(means, variances, phis, strict=True)], axis=0)  # fmt: skip
        return mean, lik.response_mean(qs[0], phi), lik.response_mean(qs[1], phi)

    def _predictive(self, means, variances, phis, size) -> Prediction:
        """:meth:`predict`'s result from the per-draw latent moments of :meth:`_latent_moments`."""
        resp, second = [], []
        for mu, var, phi in zip(means, variances, phis, strict=True):
            m_s, v_s = response_moments(self.likelihood, phi, mu, var, size)
            resp.append(m_s)
            second.append(v_s + m_s * m_s)
        if isinstance(self.likelihood, CustomLikelihood):  # no CDF: no interval of y*
            lower = upper = None
        else:
            lower, upper = predictive_quantiles(self.likelihood, phis, means, variances,
                                                CI_QUANTILES, size)  # fmt: skip
        y_mean = np.mean(resp, axis=0)
        # law of total variance over the draws (each draw's by quadrature: response_moments)
        y_var = np.maximum(np.mean(second, axis=0) - y_mean * y_mean, 0.0)
        mean = means.mean(axis=0)
        sd = np.sqrt(variances.mean(axis=0) + means.var(axis=0))
        prob = (None, None, None)
        if self._probability_outcome:
            prob = self._mean_band(means, variances, phis)
        extra = {"n_draws": len(means)}
        if getattr(self.likelihood, "censoring", None):  # survival times: the median too
            extra["median"] = predictive_quantiles(self.likelihood, phis, means, variances,
                                                   (0.5,), size)[0]  # fmt: skip
        return Prediction(y_mean, y_var, None, lower, upper, extra,
                          latent_mean=mean, latent_sd=sd, prob_mean=prob[0], prob_lower=prob[1],
                          prob_upper=prob[2])  # fmt: skip

    # ------------------------------------------------------------ model protocol
    #: ``fit(method)``: the method that runs it and the options it fixes.
    _FITS: ClassVar[dict[str, tuple[str, dict]]] = {
        NUTS: ("sample", {"method": NUTS}),
        NUTS_JOINT: ("sample", {"method": NUTS_JOINT}),
        MAP: ("fit_laplace", {}),
        VI: ("fit_vi", {}),
    }
    fit_methods = tuple(_FITS)
    sampling_methods = (NUTS, NUTS_JOINT)
    renamed_methods: ClassVar[Mapping[str, str]] = LATENT_RENAMED
    #: ``restore_fit(method)``: the type-II fit that recomputes a saved point estimate.
    _RESTORE: ClassVar[dict[str, str]] = {"map": "fit_laplace", "vi": "fit_vi", "ep": "fit_ep"}

    @property
    def outcome(self) -> str:  # type: ignore[override]
        return "binary" if self.likelihood.outcome == "binary" else "continuous"

    @property
    def label(self) -> str:
        return f"{self.spec.name}, {self.likelihood_name}"

    @property
    def observed(self) -> np.ndarray:
        return self.y

    def describe(self) -> list[tuple[str, object]]:
        lik = self.likelihood
        params = ", ".join(lik.param_names) or "none"
        size = lik.sizes()
        rows = [
            ("model", "LatentGP"),
            ("kernel", self.spec.name + (" (ARD)" if self.ard else "")),
            ("kernel formula", kernel_formula(self.spec)),
            ("equation", self.spec.equation or "–"),
            ("likelihood", f"{self.likelihood_name}, {self.link} link; parameters: {params}"),
            ("latent GP", f"f ~ GP(m, k); jitter {self.jitter:g}"),
            ("mean", self._mean_description()),
            ("observations n", self.X.shape[0]),
            ("input dimensions D", self.X.shape[1]),
            ("inputs", ", ".join(self.feature_names)),
        ]
        if size is not None:
            rows.append((lik.size_name, f"{size.min():g} … {size.max():g} (total {size.sum():g})"))
        codes = getattr(lik, "censoring", None)
        if codes:
            counts = {v: int(np.sum(lik.censored == k)) for k, v in codes.items()}
            rows.append(("censoring", ", ".join(f"{c} {v}" for v, c in counts.items() if c)))
        return rows

    def _mean_description(self) -> str:
        if isinstance(self._mean_func, pm.gp.mean.Zero):
            return "zero (R&W ch. 3)"
        if self.mean is None:
            return (f"constant {self.scale.y_mean:.4g}, fixed: the data's location on the "
                    f"{self.link} scale")  # fmt: skip
        return str(self.mean)

    def fit(self, method: str | None = None, **options):
        """Fit by ``method`` (:mod:`bayes_gp.inference.methods`; default: the first of
        :attr:`fit_methods`): for a LatentGP ``"nuts"`` (NUTS with the Laplace-integrated GP),
        ``"nuts_joint"`` (joint NUTS), ``"map"`` (:meth:`fit_laplace`) or ``"vi"``
        (:meth:`fit_vi`); ``options`` go to the method that runs it."""
        method = self.fit_methods[0] if method is None else method
        method = canonical_method(f"{type(self).__name__}.fit", method, self.renamed_methods)
        if method not in self._FITS:
            raise ValueError(
                f"{type(self).__name__} fits by {list(self.fit_methods)}, not {method!r}"
            )
        name, fixed = self._FITS[method]
        return getattr(self, name)(**fixed, **options)

    def fit_label(self, fit) -> str:
        if is_nuts(fit):
            how = fit["posterior"].attrs.get("bayes_gp_method", NUTS)
            return f"NUTS ({'joint latent' if is_joint(how) else 'Laplace-integrated GP'})"
        return fit.method_label

    def check_fit(self, fit) -> None:
        if not (is_nuts(fit) or isinstance(fit, LatentFit)):
            raise TypeError(
                f"`fit` must be a {self._fit_type_name} or the ArviZ DataTree from sample(), got "
                f"{type(fit).__name__}"
            )

    #: How error messages name this model's type-II fits.
    _fit_type_name = "LatentFit (fit_laplace, fit_vi, fit_ep)"

    @renamed_argument("seed", "random_seed")
    def replicate(self, fit, n_draws: int, random_seed: int = 0) -> np.ndarray:
        """Replicated data at the training inputs: latent values from the posterior (the joint
        draws, or the Laplace approximation :math:`N(\\hat f, \\Sigma)` of each draw or of the
        point fit), then :math:`y` from the likelihood with the training exposure or trials."""
        rng = np.random.default_rng(random_seed)
        draws, mode = self._draw_values(fit, n_draws)
        size = self.likelihood.sizes()
        # a draw used more than once (a point fit is one draw): its Gaussian approximation,
        # the mode and the Cholesky factor of its covariance, is computed once
        reused = len(draws) < n_draws
        gaussians: dict[int, tuple] = {}

        def gaussian(j: int) -> tuple:
            if j in gaussians:
                return gaussians[j]
            values, f = draws[j]
            phi = self._train(values)[2]
            L = None
            if isinstance(fit, SiteFit):
                K, m, _ = self._train(values)
                L, _ = jittered_cholesky(self._factor(K, m, phi, fit, f).cov())
            elif mode:
                res, *_ = self._mode(values, f0=f, gradient=True)
                L, _ = jittered_cholesky(res.cov)
                f = res.f
            if reused:
                gaussians[j] = (f, L, phi)
            return f, L, phi

        out = []
        for k in range(n_draws):
            f, L, phi = gaussian(k % len(draws))
            if L is not None:
                f = f + L @ rng.standard_normal(f.size)
            out.append(self.likelihood.draw(f, phi, rng, size))
        return np.array(out)

    def bands(self, grid, fit, *, along: int | str = 0) -> Bands:
        """Bands along input ``along`` (its index or name) over ``grid``, the other inputs held
        at their training medians (any number of inputs; with one, the usual bands).

        For a Bernoulli or binomial likelihood a ``"probability"`` band: the mean probability
        (of a 1, of a success per trial) and its 94% credible band (:meth:`predict`'s
        ``prob_mean``, ``prob_lower``, ``prob_upper``) over the observed 0/1 labels or
        proportions. Otherwise the predictive mean of :math:`y_*` per unit exposure (or as it
        is), the 94% band of that mean (the inverse link of the latent quantiles) and the 94%
        predictive interval of :math:`y_*` (quadrature quantiles, exposure 1)."""
        grid = np.asarray(grid, float).ravel()
        j = self._input_index(along)
        Xn = np.tile(np.median(self.X, axis=0), (grid.size, 1))
        Xn[:, j] = grid
        means, variances, phis = self._latent_moments(self._check_new(Xn), fit, 200)
        size = self.likelihood.sizes()
        y = self.y if size is None else self.y / size
        held = "" if self.X.shape[1] == 1 else " (other inputs at their medians)"
        if self._probability_outcome:
            mean, lower, upper = self._mean_band(means, variances, phis)
            what = "P(y = 1)" if self.likelihood.outcome == "binary" else "the success probability"
            return Bands("probability", self.X[:, j], y, grid, mean, lower, upper,
                         band_label=f"94% credible band of {what}{held}")  # fmt: skip
        pred = self._predictive(means, variances, phis, None)
        _, lower, upper = self._mean_band(means, variances, phis)
        per = {"exposure": " per unit exposure", "trials": " per trial"}.get(
            self.likelihood.size_name, ""
        )
        return Bands("regression", self.X[:, j], y, grid, pred.mean, lower, upper,
                     pred.lower, pred.upper,
                     band_label=f"94% band of the response mean E[y* | f*]{per}{held}",
                     y_band_label=f"94% predictive interval of y*{per}{held}")  # fmt: skip

    def _input_index(self, along: int | str) -> int:
        """The column of input ``along`` (an index or one of :attr:`feature_names`)."""
        D = self.X.shape[1]
        if isinstance(along, str):
            names = list(self.feature_names)
            if along not in names:
                raise ValueError(f"`along` must be one of the inputs {names}, got {along!r}")
            return names.index(along)
        if isinstance(along, bool) or not isinstance(along, (int, np.integer)) or not 0 <= along < D:
            raise ValueError(f"`along` must be an input index in 0..{D - 1} or a name, got {along!r}")
        return int(along)

    @property
    def bands_note(self) -> str:  # type: ignore[override]
        what = {"exposure": "per unit exposure", "trials": "per trial"}.get(
            self.likelihood.size_name, ""
        )
        return f"{self.likelihood_name} likelihood: the response mean {what}".rstrip()

    def prediction_columns(self, X_new, fit) -> dict[str, np.ndarray]:
        """:meth:`predict`'s numbers as columns (``latent_mean``, ``latent_sd``, ``mean``,
        ``lower_94``, ``upper_94``) and, for the held-out scores, the likelihood parameters at
        the fit (posterior means for NUTS)."""
        pred = self.predict(X_new, fit)
        cols = {"latent_mean": pred.latent_mean, "latent_sd": pred.latent_sd, "mean": pred.mean,
                "lower_94": pred.lower, "upper_94": pred.upper}  # fmt: skip
        n_new = pred.mean.shape[0]
        for name, value in self._phi_summary(fit).items():
            cols[name] = np.full(n_new, value)
        return cols

    def _phi_summary(self, fit) -> dict[str, float]:
        names = self.likelihood.param_names
        if not names:
            return {}
        if is_nuts(fit):
            post = fit["posterior"]
            phi = np.concatenate([
                np.asarray(post[p]).mean(axis=(0, 1)).reshape(-1) if p in post
                else np.asarray(self.priors[p], float).reshape(-1) for p in names
            ])  # fmt: skip
        else:
            phi = self._train(self._values(fit.params))[2]
        return dict(zip(self._phi_labels(), map(float, phi), strict=True))

    def _phi_labels(self) -> list[str]:
        """The entries of ``phi`` by name: the parameter names, or ``cutpoints[k]`` for the
        ordinal likelihood's one vector parameter."""
        names, size = self.likelihood.param_names, self.likelihood.n_phi
        if size == len(names):
            return list(names)
        return [f"{names[0]}[{k}]" for k in range(size)]

    def scores(self, y, columns) -> dict[str, float]:
        """RMSE of the predictive mean, coverage of the 94% interval and the mean log predictive
        density of ``y`` under the latent Gaussian :math:`N(\\mathrm{latent\\_mean},
        \\mathrm{latent\\_sd}^2)` (moment-matched for NUTS mixtures) with the likelihood
        parameters of the columns (exposure and trials 1)."""
        y = np.asarray(y, float)
        phi = [float(columns[p][0]) for p in self._phi_labels()]
        held = self.likelihood.with_data(y)
        lpd = log_predictive_density(held, phi, columns["latent_mean"], columns["latent_sd"] ** 2)
        inside = (y >= columns["lower_94"]) & (y <= columns["upper_94"])
        return {
            "rmse": float(np.sqrt(np.mean((y - columns["mean"]) ** 2))),
            "mean_log_predictive_density": float(np.mean(lpd)),
            "coverage_94": float(np.mean(inside)),
        }

    @single_blas_thread
    def held_out_predictive(self, X_new, y, fit, *, size=None) -> HeldOutPredictive:
        """The predictive distribution of held-out ``y`` at ``X_new`` (exposure or trials
        ``size``, default 1): for a binary outcome the probability of a 1, otherwise the
        predictive CDF from below and at each observation
        (:func:`~bayes_gp.latent.predictive.predictive_cdf`), both averaged over the posterior
        draws of a NUTS fit (up to 200) given the Gaussian latent distribution of each (the
        Laplace / variational / EP approximation of a point fit, the exact conditional given the
        sampled latent values for joint NUTS)."""
        Xn = self._check_new(X_new)
        y = held_out_vector(y, Xn.shape[0])
        size = self._size_at(X_new, size)
        size = None if size is None else _sizes(size, y.shape[0])
        held = self.likelihood.with_data(y, size)
        means, variances, phis = self._latent_moments(Xn, fit, 200)
        if held.outcome == "binary":
            p = np.mean([expected_response(held, phi, mu, var)
                         for mu, var, phi in zip(means, variances, phis, strict=True)], axis=0)  # fmt: skip
            return HeldOutPredictive("probability", probability=np.clip(p, 0.0, 1.0), outcome=y)
        cdfs = np.array([predictive_cdf(held, phi, mu, var)
                         for mu, var, phi in zip(means, variances, phis, strict=True)])  # fmt: skip
        below, at = cdfs.mean(axis=0)
        return HeldOutPredictive("cdf", below, at)

    @renamed_argument("seed", "random_seed")
    def prior_predictive(self, n_draws: int, random_seed: int = 0) -> np.ndarray:
        """Data sets from the prior predictive distribution at the training inputs (with their
        exposure or trials): ancestral draws of the joint latent model (hyperparameters, then
        :math:`f`, then :math:`y \\mid f`), ``(n_draws, n)``."""
        from bayes_gp.linalg import EAGER_MODE

        if isinstance(self.likelihood, CustomLikelihood):  # y by the user's draw=
            return custom_prior_predictive(self.likelihood, self._latent_model(), self.priors,
                                           n_draws, random_seed)  # fmt: skip
        y = self._latent_model()["y"]
        draws = pm.draw(y, draws=n_draws, random_seed=random_seed, mode=EAGER_MODE)
        return np.asarray(draws, float).reshape(n_draws, -1)

    def point_loo(self, fit) -> tuple[str, np.ndarray]:
        """LA-LOO (Vehtari et al. 2016) at the type-II fit."""
        if not isinstance(fit, LatentFit):
            raise TypeError(
                f"point_loo needs a {self._fit_type_name.split()[0]} of this model, got "
                f"{type(fit).__name__}"
            )
        if isinstance(fit, SiteFit):
            K, m, phi = self._train(self._values(fit.params))
            loo = self._factor(K, m, phi, fit, fit.f_mode).loo(self.likelihood, phi, fit.f_mode)
            return f"cavity LOO of q(f) at {fit.method_label}", loo
        res, _, _, phi = self._mode(self._values(fit.params), fit.f_mode, gradient=True)
        return f"Laplace LA-LOO at {fit.method_label}", la_loo(res, self.likelihood, phi)

    @single_blas_thread
    def approximation_checks(self, fit) -> list:
        """Post-fit checks of the Gaussian approximation of the latent posterior
        (:mod:`bayes_gp.latent.checks`): importance sampling of the exact posterior of
        :math:`f` from the Laplace (or variational, EP) Gaussian at the fitted hyperparameters,
        or at a few posterior draws of a NUTS-with-Laplace fit: the evidence gap and the
        Pareto k̂, and for the probit link the gap to EP. None for ``"nuts_joint"``,
        which samples :math:`f` exactly."""
        from bayes_gp.latent.checks import for_latent

        return for_latent(self, fit)

    def restore_fit(self, method: str, params: dict, attrs: dict) -> LatentFit:
        """The Laplace mode (``"map"``), the variational posterior (``"vi"``) or EP (``"ep"``)
        recomputed at the saved hyperparameters (a result saved under the previous release's
        name of the method is read by its new name, silently)."""
        method = self.renamed_methods.get(method, method)
        if method not in self._RESTORE:
            raise ValueError(
                f"{type(self).__name__}'s type-II fits are {list(self._RESTORE)}, not {method!r}"
            )
        fit = getattr(self, self._RESTORE[method])(params=params)
        return dataclasses.replace(
            fit,
            objective=float(attrs["objective"]),
            prior=bool(attrs["prior"]),
            grad_norm=float(attrs["grad_norm"]),
        )


def _column(name: str, values) -> np.ndarray:
    try:
        a = np.asarray(getattr(values, "to_numpy", lambda: values)(), dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be numbers (exposures or trials per row), got "
                         f"{values!r:.60}") from None  # fmt: skip
    return a[:, 0] if a.ndim == 2 and a.shape[1] == 1 else a


def _sizes(size, m: int) -> np.ndarray:
    """``size`` (one number, or ``m`` of them) as ``m`` exposures or trials; a ``ValueError``
    names a wrong length."""
    a = _column("size", size)
    if a.ndim == 0:
        return np.full(m, float(a))
    if a.shape != (m,):
        raise ValueError(f"`size` has {a.size} values for {m} rows of X_new (one per row, or "
                         "one number for all)")  # fmt: skip
    return a


def _named_columns(X, **values) -> tuple[Any, list, list[str]]:
    """``(X, values, names)``: each of ``values`` given as the name of a column of the
    DataFrame ``X`` is that column's values, and the columns named leave ``X``'s inputs."""
    names, out = [], []
    for what, value in values.items():
        if isinstance(value, str):
            if not hasattr(X, "columns"):
                raise ValueError(
                    f"`{what}`={value!r} names a column, but `X` is not a DataFrame: pass "
                    f"`{what}` as n numbers, or `X` as a DataFrame with that column"
                )
            if value not in X.columns:
                raise ValueError(f"`{what}`={value!r} is not a column of `X` (columns: "
                                 f"{[str(c) for c in X.columns]})")  # fmt: skip
            names.append(value)
            value = X[value]
        out.append(value)
    if names:
        X = X.drop(columns=names)
    return X, out, names


def _size_columns(X, exposure, trials):
    """``(X, exposure, trials, name)``: an ``exposure`` / ``trials`` given as the name of a
    column of the DataFrame ``X`` is that column's values, and the column leaves ``X``'s inputs
    (``name`` is it, ``None`` when both came as values)."""
    X, (exposure, trials), names = _named_columns(X, exposure=exposure, trials=trials)
    return X, exposure, trials, (names[-1] if names else None)


def latent_location(lik: LatentLikelihood, y) -> float:
    r"""The data's location on the link scale of a likelihood with a link (not the identity, not
    a user's log density): the centre of :class:`LatentGP`'s default constant mean and priors.

    .. math::
       0\;(\text{bernoulli; ordinal: its cut-points carry it}),\quad
       \operatorname{logit}\bar y\;(\text{beta}),\quad
       \log\bar y\;(\text{gamma, weibull, lognormal}),\quad
       \operatorname{logit}\frac{\sum y + 1/2}{\sum t + 1}\;(\text{binomial}),\quad
       \log\frac{\sum y + 1/2}{\sum e}\;(\text{counts, exposure } e;
       \text{ hurdles: over the positive counts})
    """
    y = np.asarray(y, float)
    if isinstance(lik, (Bernoulli, Ordinal)):
        return 0.0
    if isinstance(lik, Beta):
        return float(logit(np.mean(y)))
    if isinstance(lik, (Gamma, Weibull, LogNormal)):
        return float(np.log(np.mean(y)))
    if isinstance(lik, Binomial):
        return float(logit((y.sum() + 0.5) / (lik.trials.sum() + 1.0)))
    if isinstance(lik, (HurdlePoisson, HurdleNegativeBinomial)):  # f: the positive counts
        return float(np.log((y.sum() + 0.5) / lik.exposure[y > 0].sum()))
    return float(np.log((y.sum() + 0.5) / lik.exposure.sum()))


def make_likelihood(
    likelihood: str, link: str | None, y, n: int, exposure=None, trials=None, *,
    censored=None, upper=None,
) -> tuple[LatentLikelihood, str]:
    """The likelihood object of :class:`LatentGP`'s ``likelihood=``, ``link=``, ``exposure=``,
    ``trials=``, ``censored=`` and ``upper=`` arguments for outcomes ``y`` (``n`` rows), and the
    link in use; a ``ValueError`` names a bad one, or training data that do not identify the
    model (:meth:`~bayes_gp.latent.likelihoods.LatentLikelihood.check_training`)."""
    lik, link = _likelihood_object(likelihood, link, y, n, exposure, trials, censored=censored,
                                   upper=upper)  # fmt: skip
    lik.check_training()
    return lik, link


def _likelihood_object(
    likelihood: str, link: str | None, y, n: int, exposure=None, trials=None, *,
    censored=None, upper=None,
) -> tuple[LatentLikelihood, str]:
    """:func:`make_likelihood` before its identification check."""
    if not isinstance(likelihood, str):  # a user's log density (bayes_gp.latent.custom)
        return custom_likelihood(likelihood, link, y, n, exposure, trials,
                                 censored=censored, upper=upper)  # fmt: skip
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"`likelihood` must be one of {list(LIKELIHOODS)}, got {likelihood!r}")
    cls, links = LIKELIHOODS[likelihood]
    link = links[0] if link is None else link
    if link not in links:
        raise ValueError(f"the {likelihood} likelihood takes link {list(links)}, not {link!r}")
    counts = [name for name, (c, _) in LIKELIHOODS.items() if c.size_name == "exposure"]
    if exposure is not None and cls.size_name != "exposure":
        raise ValueError(f"`exposure` applies to the {', '.join(counts)} likelihoods")
    if trials is not None and cls is not Binomial:
        raise ValueError("`trials` applies to the binomial likelihood")
    censoring = [name for name, (c, _) in LIKELIHOODS.items() if getattr(c, "censoring", None)]
    if censored is not None and not getattr(cls, "censoring", None):
        raise ValueError(f"`censored` applies to the {', '.join(censoring)} likelihoods")
    if upper is not None and cls is not CensoredGaussian:
        raise ValueError("`upper` (an interval's upper limit) applies to the censored_gaussian "
                         "likelihood")  # fmt: skip
    labels = None
    if cls is Ordinal:  # an ordered Categorical as its codes, the labels kept
        y, labels = ordinal_codes(y)
    y = as_targets(y, n, what="a latent GP", learned_noise=False)
    for name, value in (("exposure", exposure), ("trials", trials)):
        a = None if value is None else _column(name, value)
        if a is not None and a.ndim > 0 and a.shape != (n,):
            raise ValueError(f"`{name}` has {a.size} values for {n} rows (one per row of X)")
    size = _column("exposure", exposure) if exposure is not None else None
    if cls is Bernoulli:
        return Bernoulli(y, link=link), link
    if cls is Ordinal:
        return Ordinal(y, link=link, labels=labels), link
    if cls is Binomial:
        return Binomial(y, trials=_column("trials", trials) if trials is not None else None), link
    if cls.size_name == "exposure":
        return cls(y, exposure=size), link
    if getattr(cls, "censoring", None):
        c = None if censored is None else _column("censored", censored)
        extra = {"upper": _column("upper", upper)} if upper is not None else {}
        return cls(y, censored=c, **extra), link
    return cls(y), link


def _censoring_columns(X, censored, upper):
    """``(X, censored, upper, names)``: a ``censored`` / ``upper`` given as the name of a column
    of the DataFrame ``X`` is that column's values, and the column leaves ``X``'s inputs
    (``names`` the columns taken; ``predict`` drops them from a DataFrame ``X_new``)."""
    X, (censored, upper), names = _named_columns(X, censored=censored, upper=upper)
    return X, censored, upper, tuple(names)


def _censored_observation(lik, f, param) -> None:
    r"""The censored observations of the joint latent model as ``y``: PyMC's ``Censored``
    around the Weibull (:math:`\alpha = k`, :math:`\beta = e^f`), the log-normal or the
    normal, with each row's censoring point as its bound (``inf`` for an event). PyMC has no
    interval censoring: the censored Gaussian's interval rows enter ``y`` uncensored at their
    lower limit (so that prior predictive draws exist for every row) and the Potential
    ``y_interval`` replaces their density by :math:`\log(\Phi(b) - \Phi(a))`."""
    from pymc.distributions.dist_math import log_diff_normal_cdf

    c = lik.censored
    if isinstance(lik, Weibull):
        dist = pm.Weibull.dist(alpha=param, beta=pt.exp(f))
    elif isinstance(lik, LogNormal):
        dist = pm.LogNormal.dist(mu=f, sigma=param)
    else:
        dist = pm.Normal.dist(mu=f, sigma=param)
    lower = np.where(c == -1, lik.y, -np.inf)
    upper = np.where(c == 1, lik.y, np.inf)
    pm.Censored("y", dist, lower=lower, upper=upper, observed=lik.y, dims="obs")
    interval = np.flatnonzero(c == 2)
    if interval.size:
        fi, y, u = f[interval], lik.y[interval], lik.upper[interval]
        density = pm.logp(pm.Normal.dist(mu=fi, sigma=param), y)
        pm.Potential("y_interval", pt.sum(log_diff_normal_cdf(fi, param, u, y) - density))


#: The class of ``LatentGP(..., zero_gp=True)`` (:func:`register_zero_gp`).
_ZERO_GP: list[type] = []


def register_zero_gp(cls: type) -> type:
    """Class decorator: ``cls`` is what ``LatentGP(..., zero_gp=True)`` builds.
    :mod:`bayes_gp.latent.zero_gp` registers :class:`~bayes_gp.latent.zero_gp.ZeroGP` on import
    (the package imports it), so that this module, which it builds on, does not import it."""
    _ZERO_GP[:] = [cls]
    return cls
