r"""Gaussian-process regression with fully Bayesian hyperparameters (PRML §6.4.1–6.4.4;
R&W §2.1–2.2, §5.4).

The model (PRML eqs. 6.58–6.62):

.. math::
   f \sim GP(m, k_\theta), \qquad t_n = f(x_n) + \epsilon_n,\ \epsilon_n \sim N(0, \sigma^2),
   \qquad p(t \mid \theta) = N(t \mid m, C), \quad C = K_\theta + \sigma^2 I,

with :math:`f` integrated out; with known per-observation measurement errors :math:`s_n`
(``noise=`` an array) :math:`\epsilon_n \sim N(0, s_n^2)` and
:math:`C = K_\theta + \operatorname{diag}(s^2)`, plus :math:`\sigma^2 I` with
``learn_noise=True``. :meth:`GPRegression.sample` draws the hyperparameters
:math:`(\theta, \sigma)` by NUTS; :meth:`GPRegression.fit_map` maximises the log marginal
likelihood (type-II ML, ``prior=False``) or the log posterior (MAP, ``prior=True``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from bayes_gp._arguments import renamed_argument
from bayes_gp._validation import (
    as_inputs,
    as_targets,
    check_aligned,
    check_jitter,
    hyperparameter_values,
    new_inputs,
    noise_sds,
    positive_float,
    refuse_constant,
)
from bayes_gp.inference import native_gp, native_model
from bayes_gp.inference.degenerate import model_spacing
from bayes_gp.inference.jitter import (
    DEFAULT_JITTER,
    N_PRIOR_DRAWS,
    JitterChoice,
    PreflightJitter,
    advice,
    check_points,
)
from bayes_gp.inference.sampling import NutsOrMapFits, NutsRun, NUTSSampling
from bayes_gp.inference.typeii import (
    MapFit,
    function_of_values,
    observed_logp_and_grad,
    optimize,
)
from bayes_gp.kernels import derivatives
from bayes_gp.kernels.catalogue import (
    DataScale,
    check_kernel_ard,
    default_prior,
    kernel_formula,
    kernel_spec,
    mean_function,
)
from bayes_gp.linalg import single_blas_thread
from bayes_gp.predictive import (
    CI_PROB,
    CI_QUANTILES,
    PRIOR_PREDICTIVE_MAX_N,
    Z_CI,
    GaussianPredictions,
    Prediction,
    factorize,
    mixture_prediction,
)
from bayes_gp.predictive import predict as gaussian_predict
from bayes_gp.priors import resolve_prior
from bayes_gp.protocol import GPModel, is_nuts
from bayes_gp.regression.derivative_obs import (
    GradientLikelihood,
    derivative_observations,
    sigma_d_prior,
)
from bayes_gp.solvers.approx import approx_spec, build_likelihood
from bayes_gp.solvers.compact import PP_KERNELS, CompactLikelihood
from bayes_gp.solvers.exact import ExactLikelihood, check_dense_memory
from bayes_gp.solvers.quasisep import QuasisepLikelihood
from bayes_gp.solvers.structured import check_structure, choose_structure

__all__ = ["GPRegression", "Prediction"]  # Prediction: re-exported from bayes_gp.predictive


def _check_fit(fit) -> None:
    """``fit`` must be a MapFit or ArviZ data with a ``posterior`` group."""
    if isinstance(fit, MapFit):
        return
    try:
        fit["posterior"]
    except (KeyError, TypeError, AttributeError):
        raise TypeError(
            "`fit` must be a MapFit (from fit_map) or the ArviZ DataTree from sample(), got "
            f"{type(fit).__name__}"
        ) from None


class GPRegression(PreflightJitter, NUTSSampling, NutsOrMapFits, GaussianPredictions, GPModel):
    """A GP regression model declared as a PyMC model.

    Parameters
    ----------
    X : array_like (n,) or (n, D), or DataFrame
        Inputs. DataFrame column names become the ``feature`` coordinate.
    y : array_like (n,)
        Observations.
    kernel : str, kernel object or callable
        A catalogue name (``"expquad"``, ``"matern12"``, ``"matern32"``, ``"matern52"``,
        ``"exponential"``, ``"ratquad"``, ``"periodic"``, ``"prml"``, the compactly supported
        ``"pp0"`` … ``"pp3"``), a sum of products of
        them (``"expquad + expquad * periodic"``; see :func:`~bayes_gp.regression.kernel_spec`
        for the hyperparameter names); a kernel object (``bayes_gp.kernels`` or PyMC's, with
        ``+``, ``*`` and scale factors) whose numbers are fixed and whose unnamed priors
        ``pm.X.dist(...)`` are the hyperparameters, e.g. ``Matern(1, nu=1.5,
        ls=pm.Gamma.dist(2, 2)) * Periodic(1, period=5.0, ls=1.0)``; or a callable
        ``kernel(input_dim)`` that, called inside the model, creates its own random variables and
        returns a PyMC covariance function. Kernel objects and callables carry their own
        amplitude.
    ard : bool
        One length-scale per input dimension (PRML §6.4.4, R&W §5.1) for catalogue kernels.
    mean : None, "zero", "constant", "linear", or a ``pm.gp.mean.Mean``
        ``None``: the sample mean of ``y`` (the zero mean of standardised data, R&W §2.7);
        ``"constant"``: :math:`c \\sim N(\\bar y, (2 s_y)^2)`; ``"linear"``: intercept and slopes
        with priors scaled to the data (e.g. :math:`\\mu = 2x`).
    priors : dict, optional
        Overrides of the default hyperpriors, by name: a callable ``f(name)``, an unnamed
        ``pm.X.dist(...)``, or a number that fixes the hyperparameter (the forms of
        :mod:`bayes_gp.priors`).
    noise : float or array_like (n,), optional
        A fixed noise standard deviation :math:`\\sigma`; by default :math:`\\sigma` is learned.
        An array: ``n`` known per-observation standard deviations :math:`s_i` (measurement
        errors; scikit-learn's ``alpha`` array holds their squares), finite and non-negative,
        in the order of ``y``; the likelihood is then

        .. math::
           y \\sim N\\left(m(X),\\ K + \\operatorname{diag}(s_1^2, \\dots, s_n^2)\\right)

        (plus the jitter), and the leave-one-out terms (R&W eqs. 5.10–5.12) use each row's own
        :math:`s_i^2`. With ``approx=`` an array is refused (``ValueError``); a compactly
        supported kernel's sparse likelihood (``sparse``) puts the :math:`s_i^2` on its band
        factor's diagonal.
    learn_noise : bool
        With an array (or number) ``noise``: also learn a noise :math:`\\sigma` shared by every
        observation, with its default prior (or ``priors["sigma"]``),
        :math:`C = K + \\operatorname{diag}(s^2) + \\sigma^2 I`. Without ``noise`` the noise is
        learned anyway.
    jitter : float
        Added to the diagonal of :math:`C` (numerical safety), relative to the model's prior
        scale :math:`s^2 = \\operatorname{var}(y)`: the absolute jitter is
        ``jitter * var(y)`` (default ``1e-10``; ``model.jitter`` is the absolute value in use,
        :mod:`bayes_gp.inference.jitter`). :meth:`fit_map` and :meth:`sample` first factorise
        :math:`C` at the initial point and at a few prior draws and raise the jitter tenfold
        until that succeeds; the jitter used is recorded in the fit. Approximations
        (``approx=``, ``sparse=``) add the same jitter to :math:`\\sigma^2`.
    approx : None, "hsgp", "vfe" or "fitc"
        An approximation of the marginal likelihood for large N
        (:mod:`bayes_gp.solvers.approx`): ``"hsgp"``, the Hilbert-space reduced-rank GP with
        the weights integrated out (stationary kernels with a spectral density: squared
        exponential, Matérn of any :math:`\nu`, their sums), :math:`O(m^3)` per gradient after
        an :math:`O(Nm^2)` set-up; ``"vfe"`` (Titsias' bound) or ``"fitc"`` with inducing inputs,
        :math:`O(NM^2)`. ``None``: the exact GP. The marginal likelihood in use, exact or not, is the object
        :attr:`marginal` (:mod:`bayes_gp.solvers.exact`); :attr:`approximation` is it when it
        approximates.
    approx_options : dict, optional
        ``"hsgp"``: ``m`` (basis functions per input dimension) and ``c`` (boundary factor);
        ``"vfe"``/``"fitc"``: ``n_inducing`` or the inducing inputs ``Xu``. Omitted ones get
        data-based defaults (Riutort-Mayol et al. 2022 for ``m``, ``c``; ``min(N, 200)``
        k-means centres for the inducing inputs).
    sparse : bool, optional
        For the compactly supported kernels ``"pp0"`` … ``"pp3"`` (R&W eq. 4.21): evaluate the
        exact likelihood, its gradient, predictions and leave-one-out terms on the sparse Gram
        matrix (band Cholesky factor and selected inverse, :mod:`bayes_gp.solvers.compact`):
        :math:`O(nb^2)` time and :math:`O(nb)` memory for bandwidth :math:`b` instead of
        :math:`O(n^3)` and :math:`O(n^2)`. ``None`` (default): on for those kernels (the same
        exact GP; a wide band is factorised densely); ``False``: the generic dense likelihood,
        which JAX (``sampler="numpyro"``) can run. The band is narrow when the length-scale (the
        support radius) is small against the input range; the default length-scale prior is
        centred on a third of the range, where the matrix is dense, so for large :math:`n` give
        a prior on the local scale you expect (``priors={"ls": ...}``): sampling starts at the
        prior's centre.
    structure : None, "quasiseparable" or "dense"
        How the exact likelihood is computed (:mod:`bayes_gp.solvers.structured`).
        ``"quasiseparable"``: for 1-D inputs and kernels with a state-space form (Matérn
        :math:`\\nu = 1/2, 3/2, 5/2` and any half-integer :math:`\\nu`, exponential, cosine,
        constants, and their sums and products), the same exact GP in :math:`O(n)` per log
        density and gradient instead of :math:`O(n^3)` (:mod:`bayes_gp.solvers.quasisep`);
        LOO and predictions in :math:`O(n)` too. ``"dense"``: the dense Cholesky. ``None``
        (default): quasiseparable for 1-D inputs and a representable kernel with at least
        :data:`~bayes_gp.solvers.structured.QUASISEP_MIN_N` observations, when neither
        ``approx`` nor ``sparse`` applies; :attr:`quasiseparable` says which is in use.
        ``"quasiseparable"`` raises a ``ValueError`` for other kernels, for several input
        columns, and with ``approx`` or ``sparse``.
    dX : array_like (m,) or (m, D), or DataFrame, optional
        Inputs of derivative observations (gradient-enhanced GP, R&W §9.4;
        :mod:`bayes_gp.regression.derivative_obs`), at their own inputs.
    dy : array_like (m,) or (m, D), optional
        Observed derivatives :math:`g_j = \\partial f(\\tilde x_j)/\\partial x_{e_j} +
        \\delta_j`: ``(m,)``, one per row of ``dX``, along the input dimensions ``d_dims``; or
        ``(m, D)``, the full gradient at each row of dX (``d_dims`` left out). The likelihood
        is then the joint Gaussian of :math:`[y; g]`,

        .. math::
           C = \\begin{bmatrix} K + \\sigma^2 I & \\partial_{x'} K \\\\
           \\partial_{x} K & \\partial_x\\partial_{x'} K + \\sigma_\\partial^2 I\\end{bmatrix}

        (R&W eq. 9.1; Solak et al. 2003), with the kernel's derivatives from
        :mod:`bayes_gp.kernels.derivatives`; :meth:`predict`, :meth:`predict_derivative`, LOO
        (of the ``n`` values, given everything else) and the fits condition on both. Dense
        exact GP only: ``approx``, ``sparse=True`` and ``structure="quasiseparable"`` are
        refused, and a kernel whose GP is not differentiable (Matérn 1/2, exponential,
        :math:`\\gamma`-exponential with :math:`\\gamma < 2`, ``pp0``) raises ``ValueError``.
    d_dims : int, str or array_like (m,), optional
        The input column (index or feature name) each derivative in a 1-D ``dy`` is along,
        one for all or one per derivative; may be left out for one input column.
    d_noise : float or array_like, optional
        The derivatives' noise: ``None`` (default) a learned :math:`\\sigma_\\partial`
        (``sigma_d``, prior :math:`\\operatorname{HalfNormal}` with the root mean square of
        ``dy`` as scale; ``priors={"sigma_d": ...}``); a number, a fixed standard deviation
        (0: exact derivatives, jitter only); an array of ``dy``'s shape, known standard
        deviations per derivative.
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
        approx_options: Mapping[str, Any] | None = None,
        sparse: bool | None = None,
        structure: str | None = None,
        dX=None,
        dy=None,
        d_dims=None,
        d_noise=None,
    ):
        check_aligned(X, y)
        X, names = as_inputs(X)
        # A constant y is a fine template for prior draws; fitting it is refused (_check_fittable).
        y = as_targets(y, X.shape[0], learned_noise=False)
        self.spec = kernel_spec(kernel)
        check_kernel_ard(self.spec, ard)
        if learn_noise not in (True, False):
            raise TypeError(f"`learn_noise` must be True or False, got {learn_noise!r}")
        #: known per-observation noise variances s_i^2 ((n,) array), or None (see `noise`)
        self.known_noise_var = None
        #: a shared noise sigma is learned (no `noise`, or `learn_noise=True`)
        self.learn_noise = noise is None or bool(learn_noise)
        if noise is not None and (np.ndim(noise) > 0 or learn_noise):
            noise = noise_sds("noise", noise, X.shape[0])
            self.known_noise_var = noise**2
        elif noise is not None:
            noise = positive_float("noise", noise)
        check_jitter(jitter)
        #: derivative observations (:class:`~bayes_gp.regression.derivative_obs.DerivativeObservations`) or None
        scale = DataScale.of(X, y)  # all-zero dy: the prior scale of sigma_d is sd(y) / range
        self.derivative_obs = derivative_observations(
            dX, dy, d_dims, d_noise, X.shape[1], names, scale.y_sd / float(np.mean(scale.x_range))
        )
        if self.derivative_obs is not None:
            self._refuse_with_derivatives(approx, sparse, structure)
        priors = dict(priors or {})
        d_names = {"sigma_d"} if self.derivative_obs is not None else set()
        unknown = set(priors) - {*self.spec.params, "sigma", "c", "intercept", "slope", *d_names}
        if unknown:
            raise ValueError(
                f"`priors` has unknown names {sorted(unknown)}; this model's hyperparameters "
                f"are {[*self.spec.params, 'sigma']} (and a mean's c, intercept, slope)"
            )
        self.X, self.y, self.feature_names = X, y, names
        self.ard = bool(ard)
        self.kernel = kernel
        self.mean = mean
        self.priors = priors
        self.noise = noise
        self.scale = DataScale.of(X, y)
        self._init_jitter(jitter, self.scale.y_sd**2, DEFAULT_JITTER)  # absolute: jitter * var(y)
        self.approx = approx_spec(approx, approx_options, X)
        pp_q = PP_KERNELS.get(self.spec.name) if self.spec.catalogue else None
        if sparse not in (None, True, False):
            raise TypeError(f"`sparse` must be None, True or False, got {sparse!r}")
        if sparse and pp_q is None:
            raise ValueError(
                "`sparse=True` needs a compactly supported kernel: one of "
                f"{sorted(PP_KERNELS)} (R&W eq. 4.21)"
            )
        if sparse and self.approx is not None:
            raise ValueError("`sparse=True` is the exact GP: it cannot be combined with `approx`")
        if self.known_noise_var is not None and self.approx is not None:
            raise ValueError(
                "known per-observation noise (an array `noise`, or `learn_noise=True`) is "
                "supported by the exact likelihoods (dense, quasiseparable, sparse compact "
                "support) only, not with `approx`: leave `approx` out"
            )
        self._structure = check_structure(structure, self.approx, sparse)
        #: the compact-support kernel's sparse exact likelihood is used (see `sparse`)
        self.sparse = (
            pp_q is not None
            and self.derivative_obs is None
            and self.approx is None
            and sparse is not False
            and self._structure is None
        )
        self._pp_q = pp_q
        self.model = self._build()
        self._fns: dict = {}

    @single_blas_thread
    def check_jitter(self, random_seed: int | None = None) -> JitterChoice:
        """Pre-flight Cholesky check (:func:`bayes_gp.inference.jitter.preflight`): factorise
        :math:`C = K + \\sigma^2 I` at the initial point and at prior draws, raise the jitter
        until all succeed and set the model's jitter to it (:meth:`set_jitter`).

        Raises
        ------
        NotPSDError
            When even a jitter of 1e-4 times the mean diagonal fails, with advice.
        """
        what = "observation noise" if self.learn_noise else "a larger noise level"
        if self.quasiseparable:  # the O(n) factorisation's own check, at every prior draw
            points = check_points(self.model, self.model.free_RVs, random_seed=random_seed)
            choice = self.marginal.preflight(
                points, self.default_jitter, self.jitter, advice(self.X, what)
            )
            self.set_jitter(choice.jitter)
            return choice
        if not self.marginal.dense:  # approximate or sparse: no dense C to factorise
            return self.jitter_info.choice()
        return self._preflight(
            self.model.free_RVs,
            lambda values: self.marginal.train(values)[1],
            what,
            random_seed,
            # each point costs one dense Cholesky: above n = 3000 only the initial point
            n_draws=N_PRIOR_DRAWS if self.X.shape[0] <= 3000 else 0,
        )

    @staticmethod
    def _refuse_with_derivatives(approx, sparse, structure) -> None:
        """Derivative observations take the dense exact likelihood only (``dX``)."""
        if approx is not None:
            raise ValueError(
                "derivative observations (`dX`, `dy`) need the exact GP's joint covariance of "
                "values and derivatives; the approximations (`approx`) have no derivative "
                "cross-covariances: leave `approx` out (fit a subset if n is large)"
            )
        if sparse:
            raise ValueError(
                "derivative observations (`dX`, `dy`) use the dense joint covariance: the sparse "
                "compact-support likelihood (`sparse=True`) does not hold derivative rows"
            )
        if isinstance(structure, str) and structure.lower() == "quasiseparable":
            raise ValueError(
                "derivative observations (`dX`, `dy`) use the dense joint covariance: the "
                "quasiseparable state-space likelihood does not take derivative rows (leave "
                "`structure` at None or 'dense')"
            )

    # ------------------------------------------------------------------ model
    def _prior(self, name: str, ard: bool = False, default: Callable | None = None):
        """The user's prior for ``name`` (any form of :mod:`bayes_gp.priors`), else
        ``default(name)`` or the catalogue's."""
        fallback = default or (lambda n: default_prior(n, self.scale, ard))
        return resolve_prior(self.spec.priors_with(self.priors), name, fallback, ard=ard)

    def _declare_gp(self):
        """Declare the kernel's hyperparameters, the mean function and the noise in the current
        model: ``(hyper, cov, mean_func, sigma, known)``, ``known`` the known noise variances as
        the likelihoods' keyword (empty without ``noise=`` as an array)."""
        D = self.X.shape[1]
        hyper = {p: self._prior(p, self.ard and p in self.spec.ard_params) for p in self.spec.params}
        cov = self.spec.build(D, hyper)
        mean_func = self._mean_function(D)
        if self.known_noise_var is not None:  # K + diag(s^2) [+ sigma^2 I]
            sigma = self._prior("sigma") if self.learn_noise else np.float64(0.0)
        else:
            sigma = self.noise if self.noise is not None else self._prior("sigma")
        known = {} if self.known_noise_var is None else {"known_var": self.known_noise_var}
        return hyper, cov, mean_func, sigma, known

    def _build(self) -> pm.Model:
        coords = {"feature": self.feature_names, "obs": np.arange(self.X.shape[0])}
        obs = self.derivative_obs
        if obs is not None:  # the stacked [y; dy]
            coords["obs_and_derivatives"] = np.arange(self.X.shape[0] + obs.m)
        with pm.Model(coords=coords) as model:
            hyper, cov, mean_func, sigma, known = self._declare_gp()
            #: the exact likelihood is the O(n) quasiseparable one (see `structure`)
            self.quasiseparable = choose_structure(
                self._structure,
                cov,
                self.X,
                other=self.sparse or self.approx is not None or obs is not None,
                label=self.spec.name,
            )
            # the marginal likelihood, chosen once: exact dense, exact compact-support, exact
            # quasiseparable, or an approximation; every later question goes to it
            # (bayes_gp.solvers.exact)
            if obs is not None:  # values and derivatives: bayes_gp.regression.derivative_obs
                if obs.learned:
                    sigma_d = self._prior("sigma_d", default=lambda n: sigma_d_prior(n, obs))
                else:
                    sigma_d = np.float64(obs.fixed_sd or 0.0)
                self.marginal = GradientLikelihood(
                    "y", self.X, self.y, obs, cov, mean_func, sigma, sigma_d, self.jitter_tensor,
                    "obs_and_derivatives", **known,
                )  # fmt: skip
            elif self.quasiseparable:  # 1-D state-space kernel: bayes_gp.solvers.structured
                self.marginal = QuasisepLikelihood(
                    "y", self.X, self.y, cov, mean_func, sigma, self.jitter_tensor, "obs",
                    absolute_jitter=True, **known,
                )
            elif self.sparse:  # compact support: bayes_gp.solvers.compact
                self.marginal = CompactLikelihood(
                    "y", self.X, self.y, hyper["ls"], hyper["eta"], self._pp_q, mean_func,
                    sigma, self.jitter_tensor, "obs", **known,
                )  # fmt: skip
            elif self.approx is not None:  # large N: bayes_gp.solvers.approx
                self.marginal = build_likelihood(
                    self.approx, "y", self.X, self.y, cov, mean_func, sigma, self.jitter_tensor,
                    "obs",
                )
            else:  # y ~ N(m(X), K + (sigma^2 + jitter) I), as pm.gp.Marginal declares it
                self.marginal = ExactLikelihood(
                    "y", self.X, self.y, cov, mean_func, sigma, self.jitter_tensor, "obs", **known
                )
        self._cov, self._mean_func, self._sigma = cov, mean_func, pt.as_tensor_variable(sigma)
        self._hyper = hyper
        native_gp.register(model, self._native_description)
        return model

    def _native_description(self):
        """The model as :mod:`bayes_gp.inference.native_gp`'s C log density computes it, or
        ``None`` where it does not (nutpie compiles it with numba then): the dense exact
        likelihood of a catalogue kernel or a sum of products of them
        (:func:`~bayes_gp.inference.native_model.kernel_of`) with a fixed mean (the C code's
        own checks follow: which parameters, which priors)."""
        if (
            type(self) is not GPRegression
            or type(self.marginal) is not ExactLikelihood
            or self.derivative_obs is not None
            or self.approx is not None
            or self.quasiseparable
            or self.sparse
            or self.known_noise_var is not None
        ):
            return None
        kernel = native_model.kernel_of(self.spec, self._hyper)
        if kernel is None:
            return None
        mean = self._mean_func
        if type(mean) is pm.gp.mean.Zero:
            offset = 0.0
        elif type(mean) is pm.gp.mean.Constant and isinstance(mean.c, float | np.ndarray):
            if np.ndim(mean.c) != 0:
                return None
            offset = float(mean.c)
        else:
            return None
        return native_gp.NativeGP(
            kernel=kernel,
            X=self.X,
            y=self.y - offset,
            jitter=float(self.jitter_tensor.get_value()),
            sigma=self._sigma,
        )

    def _mean_function(self, D: int):
        return mean_function(self.mean, self.scale, self._prior)

    @property
    def approximation(self):
        """The approximate marginal likelihood (HSGP, VFE, FITC), or ``None`` when the model's
        likelihood is exact (dense, or sparse for a compact kernel): :attr:`marginal` is the one
        in use either way."""
        return None if self.marginal.exact else self.marginal

    @property
    def hyperparameters(self) -> list[str]:
        """Names of the model's free random variables."""
        return [rv.name for rv in self.model.free_RVs]

    # --------------------------------------------------------- numeric graphs
    def _compiled(self, key: str, build: Callable):
        """Compile ``build(Xn) -> outputs`` as a NumPy function of ``(params..., Xn)``.

        The model's free random variables are replaced by plain inputs, so the same kernel and
        mean graphs as in the PyMC model are evaluated at given hyperparameter values.
        """
        if key not in self._fns:
            self._fns[key] = function_of_values(self.model.free_RVs, build)
        return self._fns[key]

    def _mean(self, X):
        return pt.as_tensor_variable(self._mean_func(X)) * pt.ones(X.shape[0])

    def _cov_new(self, values, Xn):
        """Prior covariance ``K(Xn, Xn)``."""
        return self._compiled("new_full", lambda Xv: self._cov(Xv))(*values, Xn)

    def _values(self, params: Mapping[str, Any]) -> list[np.ndarray]:
        return hyperparameter_values(self.model, self.model.free_RVs, params, self._fns)

    @single_blas_thread
    def log_marginal_likelihood(self, params: Mapping[str, Any], *, eval_gradient: bool = False):
        r"""Exact log marginal likelihood :math:`\log p(y \mid \theta)` (PRML eq. 6.69).

        For an approximate model (``approx=``), the approximation's own objective: the exact
        marginal of the reduced-rank HSGP model, FITC's marginal, or VFE's lower bound.

        Parameters
        ----------
        params : dict
            Hyperparameter values on the data's scale, by name (see :attr:`hyperparameters`).
        eval_gradient : bool
            Also return the gradient, as scikit-learn's ``log_marginal_likelihood(theta,
            eval_gradient=True)`` does: ``(value, grad)`` with ``grad`` a dict name → array of
            :math:`\partial \log p(y \mid \theta) / \partial \theta` on the hyperparameter's own
            scale (R&W eq. 5.9 for the exact GP; scikit-learn differentiates with respect to
            :math:`\log\theta`, which is :math:`\theta` times this).
        """
        if eval_gradient:
            if "lml_grad" not in self._fns:
                self._fns["lml_grad"] = observed_logp_and_grad(self.model)
            out = self._fns["lml_grad"](*self._values(params))
            grads = {
                n: np.asarray(g, float) for n, g in zip(self.hyperparameters, out[1:], strict=True)
            }
            return float(out[0]), grads
        return self.marginal.log_marginal_likelihood(self._values(params))

    # ---------------------------------------------------------------- fitting
    @single_blas_thread
    def fit_map(
        self,
        n_restarts: int = 5,
        prior: bool = True,
        random_seed: int | None = None,
        *,
        maxiter: int = 1000,
    ) -> MapFit:
        """Type-II fit: maximum marginal likelihood (``prior=False``) or MAP (``prior=True``).

        The objective is non-convex (R&W §5.4.1), so the optimiser (L-BFGS-B with PyTensor
        gradients, in the unconstrained space) starts from the prior's support point and from
        ``n_restarts - 1`` draws from the priors; the best optimum wins. The jitter is chosen
        first by :meth:`check_jitter` and recorded in ``MapFit.jitter``.
        """
        self._check_fittable()
        choice = self.check_jitter(random_seed)
        fit = optimize(
            self.model,
            n_restarts=n_restarts,
            prior=prior,
            random_seed=random_seed,
            maxiter=maxiter,
            spacing=model_spacing(self),
        )
        lml = self.log_marginal_likelihood(fit.params)
        # HSGP: warns if ls is below what the basis resolves
        self.marginal.check([self._values(fit.params)])
        return dataclasses.replace(
            fit.with_log_marginal_likelihood(lml),
            jitter=choice.jitter,
            jitter_default=choice.default,
        )

    sample_options: ClassVar[dict[str, Any]] = {"log_likelihood": True}

    def _nuts_run(self, sampler, random_seed, *, log_likelihood: bool) -> NutsRun:
        """:meth:`sample` (NUTS over all hyperparameters with the marginal likelihood, f
        integrated out) starts with the jitter pre-flight (:meth:`check_jitter`), recorded in the
        posterior's ``bayes_gp_jitter`` attribute; the leave-one-out pass that follows is
        prepared beside the model's compilation and the chains (the marginal's
        ``prepare_loo_draws``, where it has one). A model on the C path
        (:mod:`bayes_gp.inference.native_gp`) starts the C compiler instead where this machine
        lacks the library: its log density and leave-one-out pass are both there."""
        self._check_fittable()
        native = native_gp.covers(self.model)
        if native:  # the C log density and LOO pass, where this machine lacks them
            native_gp.start_compiling()
        prepare = None if native else getattr(self.marginal, "prepare_loo_draws", None)
        during = prepare() if prepare is not None and log_likelihood else None
        return NutsRun(self.model, attrs=self.check_jitter(random_seed).attrs(), during=during)

    def _nuts_result(self, idata, run: NutsRun, random_seed):
        r"""The ``log_likelihood`` group holds, per draw, the exact leave-one-out log predictive
        densities :math:`\log p(y_i \mid y_{-i}, \theta)` (R&W eq. 5.10–5.12) for PSIS-LOO of
        this non-factorising model.

        For an approximate model the leave-one-out terms are those of the approximate Gaussian
        model (:meth:`bayes_gp.solvers.approx.HSGPLikelihood.loo`,
        :meth:`~bayes_gp.solvers.approx.SparseLikelihood.loo`). They cost :math:`O(Nm^2)` and
        N numbers per draw: ``sample(log_likelihood=False)`` leaves the group out (no LOO then).
        """
        from bayes_gp.inference.nuts import add_log_likelihood

        self.marginal.check(self._draws(idata))
        if not run.options["log_likelihood"]:
            return idata
        threads = getattr(self.marginal, "loo_threads", 1)
        batch = getattr(self.marginal, "loo_draws", None)
        if native_gp.covers(self.model):
            batch = self._native_loo
        return add_log_likelihood(idata, self.hyperparameters, self._pointwise_loo,
                                  threads=threads, batch=batch)  # fmt: skip

    def _native_loo(self, arrays: list[np.ndarray]) -> np.ndarray | None:
        """The leave-one-out pass over the draws in C (:func:`bayes_gp.inference.native_gp.
        loo_draws`; ``None``: the marginal's own pass), the draws it could not answer (C not
        numerically positive definite) repeated by :meth:`_pointwise_loo` (its jitter retry)."""
        out = native_gp.loo_draws(self.model, arrays)
        if out is None:
            return self.marginal.loo_draws(arrays)
        for k in np.flatnonzero(~np.isfinite(out).all(axis=1)):
            out[k] = self._pointwise_loo([a[k] for a in arrays])
        return out

    def _check_fittable(self) -> None:
        """A constant ``y`` cannot be fitted with a learned noise (:func:`refuse_constant`)."""
        if self.learn_noise:
            refuse_constant(self.y)

    def _pointwise_loo(self, values: list[np.ndarray]) -> np.ndarray:
        return self.marginal.loo(values)

    # ------------------------------------------------------------- prediction
    def _check_new(self, X_new) -> np.ndarray:
        return new_inputs(X_new, self.X.shape[1], self.feature_names)

    def _predict_at(self, values, Xn, diag: bool, include_noise: bool, jitters=None,
                    noise_var=None):  # fmt: skip
        """The marginal's ``(mean, var, cov)`` at ``Xn``, plus the known noise variances
        ``noise_var`` of the new rows (``(m,)`` or None) on the diagonal."""
        mean, var, cov = self.marginal.predict(values, Xn, diag, include_noise, jitters)
        if noise_var is not None:
            var = var + noise_var
            if cov is not None:
                cov = cov + np.diag(noise_var)
        return mean, var, cov

    def _noise_at(self, Xn, include_noise: bool, noise_new=None):
        """The known noise variances of :math:`y_*` at the rows of ``Xn`` to add to the
        marginal's (which adds the shared :math:`\\sigma^2` only), or None (:meth:`predict`)."""
        if noise_new is not None:
            if not include_noise:
                raise ValueError(
                    "`noise_new` is the measurement error of new observations y_*: it needs "
                    "`include_noise=True` (the latent f_* has no noise)"
                )
            return noise_sds("noise_new", noise_new, Xn.shape[0]) ** 2
        if not include_noise or self.known_noise_var is None:
            return None
        if Xn.shape == self.X.shape and np.array_equal(Xn, self.X):
            return self.known_noise_var  # the training rows: their own known errors
        if self.learn_noise:
            return None  # sigma^2 only: the new rows' own errors taken as 0
        raise ValueError(
            "this model's noise is known per observation (an array `noise`) and no noise is "
            "learned, so the noise of new observations is unknown: pass their standard "
            "deviations as `noise_new=` (one per row of X_new), or predict f_* "
            "(include_noise=False)"
        )

    @single_blas_thread
    def predict(
        self, X_new, fit, diag: bool = True, include_noise: bool = False, *, noise_new=None
    ) -> Prediction:
        r"""Predictive distribution of :math:`f_*` (or :math:`t_*` with ``include_noise``).

        With known per-observation noise (an array ``noise``), R&W eqs. 2.25–2.26 with the
        training diagonal:

        .. math::
           \bar f_* = m_* + K_*^\top (K + \operatorname{diag}(s^2) + \sigma^2 I)^{-1}(y - m),
           \qquad
           \mathbb V[f_*] = k_{**} - K_*^\top (K + \operatorname{diag}(s^2) +
           \sigma^2 I)^{-1} K_*,

        and :math:`\mathbb V[y_*] = \mathbb V[f_*] + \sigma^2 + s_*^2` with ``include_noise``,
        where :math:`s_*` is ``noise_new`` (an array of one standard deviation per row of
        ``X_new``, or a number for all). Without ``noise_new``: at the training inputs
        themselves (``X_new`` equal to ``X``, same rows in the same order) :math:`s_*` is the
        training rows' ``noise``; elsewhere it is taken as 0 when a shared :math:`\sigma` is
        learned (``learn_noise=True``), and ``include_noise=True`` raises ``ValueError`` when
        none is (the noise of a new observation is then unknown). ``noise_new`` without
        ``include_noise`` raises ``ValueError``.

        For a :class:`MapFit`: the closed form of PRML eqs. (6.66)–(6.67) at the fitted
        hyperparameters. For NUTS output (a DataTree with a ``posterior`` group): the mixture over
        posterior draws — mean by the law of total expectation, variance by the law of total
        variance — so hyperparameter uncertainty widens the bands; intervals from
        posterior-predictive draws.

        ``extra["jitter"]`` is the largest jitter that had to be added to :math:`C` beyond the
        model's own (0 normally; a :class:`~bayes_gp.predictive.JitterWarning` says when not).
        """
        Xn = self._check_new(X_new)
        _check_fit(fit)
        noise_var = self._noise_at(Xn, include_noise, noise_new)
        if isinstance(fit, MapFit):
            jitters: list[float] = []
            values = self._values(fit.params)
            mean, var, cov = self._predict_at(values, Xn, diag, include_noise, jitters, noise_var)
            sd = np.sqrt(var)
            lo, hi = mean - Z_CI * sd, mean + Z_CI * sd
            return Prediction(mean, var, cov, lo, hi, {"jitter": jitters[0]})
        if not diag:
            raise ValueError("`diag=False` is only available for MAP fits")
        return self._predict_mixture(Xn, fit, include_noise, noise_var=noise_var)

    def _components(self, Xn, fit, include_noise, jitters, max_draws: int = 500, seed: int = 0,
                    noise_var=None):  # fmt: skip
        """Per posterior draw (or at the point estimate: one row), the predictive means and
        variances at ``Xn``, ``(S, m)`` each."""
        draws = [self._values(fit.params)] if isinstance(fit, MapFit) else None
        many = getattr(self.marginal, "predict_draws", None)
        if type(self)._predict_at is not GPRegression._predict_at:
            many = None  # a subclass's own predictions go draw by draw
        if draws is None and many is not None:  # a block of draws per kernel evaluation
            values_list = list(self._draws(fit, max_draws, seed))
            out = many(values_list, Xn, include_noise, jitters)
            if out is not None:
                means, variances = out
                return means, variances if noise_var is None else variances + noise_var
            draws = values_list
        means, variances = [], []
        for values in draws or self._draws(fit, max_draws, seed):
            mu, var, _ = self._predict_at(values, Xn, True, include_noise, jitters, noise_var)
            means.append(mu)
            variances.append(var)
        return np.array(means), np.array(variances)

    @single_blas_thread
    def _predictive_components(self, Xn, fit):
        """Means and variances of :math:`y_*` (with noise) per draw, for the predictive CDF."""
        _check_fit(fit)
        return self._components(Xn, fit, True, [], noise_var=self._noise_at(Xn, True))

    def _predict_mixture(self, Xn, idata, include_noise, max_draws: int = 500, seed: int = 0,
                         noise_var=None):  # fmt: skip
        rng = np.random.default_rng(seed)
        jitters: list[float] = []
        means, variances = self._components(Xn, idata, include_noise, jitters, max_draws, seed,
                                            noise_var)  # fmt: skip
        samples = [
            mu + np.sqrt(var) * rng.standard_normal((4, mu.shape[0]))
            for mu, var in zip(means, variances, strict=True)
        ]
        mean = means.mean(axis=0)
        var = variances.mean(axis=0) + means.var(axis=0)  # law of total variance
        draws = np.concatenate(samples, axis=0)
        lower, upper = np.quantile(draws, CI_QUANTILES, axis=0)
        extra = {"n_draws": len(means), "jitter": float(max(jitters, default=0.0))}
        return Prediction(mean, var, None, lower, upper, extra)

    # ------------------------------------------------------- derivative GPs
    #: rows of ``X_new`` per block when the prior variances of a non-stationary kernel's
    #: derivative are evaluated (their graph is ``b x b`` before its diagonal is taken)
    DERIVATIVE_BLOCK = 32

    @single_blas_thread
    def predict_derivative(
        self, X_new, fit, order: int = 1, dim: int | str = 0, diag: bool = True, *,
        max_draws: int = 500, random_seed: int = 0,
    ) -> Prediction:  # fmt: skip
        r"""Posterior of the derivative :math:`\partial f / \partial x_d` (``order=1``) or
        :math:`\partial^2 f / \partial x_d^2` (``order=2``) at ``X_new`` (R&W §9.4): where the
        trend rises or falls, and how sure the model is.

        A derivative of a GP is a GP whose covariances are derivatives of :math:`k` (R&W §9.4),
        so the predictive equations 2.25–2.26 hold with the cross-covariances differentiated:
        with :math:`\alpha = C^{-1}(y - m(X))`, :math:`C = K + \sigma^2 I` (plus the known
        noise and the jitter) and :math:`\partial^{(o)}` the ``order``-th derivative in
        :math:`x_{*d}`,

        .. math::
           \mathbb E\left[\partial^{(o)} f_*\right] = \partial^{(o)} m(x_*)
               + \partial^{(o)}_{x_*} k(x_*, X)\,\alpha,

           \mathbb V\left[\partial^{(o)} f_*\right] =
               \partial^{(o)}_{x_*}\partial^{(o)}_{x_*'} k(x_*, x_*')\big|_{x_*' = x_*}
               - \partial^{(o)}_{x_*} k(x_*, X)\, C^{-1}\, \partial^{(o)}_{x_*} k(X, x_*),

        the fourth derivative of :math:`k` at zero lag for ``order=2``; a linear mean adds its
        slope :math:`w_d` to the first derivative. The kernel's derivatives come from PyTensor's
        automatic differentiation of the kernel (any catalogue kernel or kernel object, sums and
        products; :mod:`bayes_gp.kernels.derivatives`, which also gives the zero-lag limits of
        kernels written through :math:`|x - x'|`).

        For a :class:`MapFit` the Gaussian at the point estimate; for NUTS output the mixture
        over posterior draws (at most ``max_draws``, chosen with ``random_seed``) -- mean by the
        law of total expectation, variance by the law of total variance, the 94% band by the
        mixture's quantiles (:func:`~bayes_gp.predictive.mixture_prediction`), as for
        :meth:`predict`.

        Parameters
        ----------
        X_new : array_like (m,) or (m, D), or DataFrame
            Where to predict the derivative.
        fit : MapFit or DataTree
            From :meth:`fit_map` or :meth:`sample`.
        order : {1, 2}
            First or second derivative.
        dim : int or str
            The input dimension (a column index or a feature name) to differentiate along.
        diag : bool
            ``False``: also the full covariance of the derivative between the rows of
            ``X_new`` (MAP fits), from the mixed derivative
            :math:`\partial^{(o)}_{x_*}\partial^{(o)}_{x_*'} k(x_*, x_*')`.

        Returns
        -------
        Prediction
            ``mean``, ``var`` (``sd``), ``lower``/``upper`` (central 94%), ``cov`` with
            ``diag=False``; ``extra`` holds ``order``, ``dim`` (its index), ``jitter`` and, for
            NUTS, ``n_draws``.

        Raises
        ------
        ValueError
            ``order`` not 1 or 2, ``dim`` out of range, or a kernel whose GP has no such
            derivative, with the reason: the exponential / Matérn 1/2 kernel, a γ-exponential
            with :math:`\gamma < 2`, ``pp0`` (and ``pp1`` for ``order=2``), Matérn 3/2 for
            ``order=2`` (a Matérn GP is :math:`m` times mean-square differentiable iff
            :math:`\nu > m`, R&W §4.2.1).
        NotImplementedError
            For the approximations (``approx=``): their predictive equations are not the exact
            GP's.
        """
        order = self._check_order(order)
        d = self._check_dim(dim)
        if self.approx is not None:
            raise NotImplementedError(
                f"derivative predictions are implemented for the exact GP only, not for "
                f"approx={self.approx.name!r}: fit the exact GP (on a subset of the data if N is "
                "large), whose derivative posterior follows from the same kernel"
            )
        derivatives.check_differentiable(self._cov, order)
        Xn = self._check_new(X_new)
        _check_fit(fit)
        if isinstance(fit, MapFit):
            jitters: list[float] = []
            mean, var, cov = self._derivative_at(self._values(fit.params), Xn, order, d, diag,
                                                 jitters)  # fmt: skip
            sd = np.sqrt(var)
            extra = {"order": order, "dim": d, "jitter": jitters[0]}
            return Prediction(mean, var, cov, mean - Z_CI * sd, mean + Z_CI * sd, extra)
        if not diag:
            raise ValueError("`diag=False` is only available for MAP fits")
        jitters = []
        means, variances = [], []
        for values in self._draws(fit, max_draws, random_seed):
            mu, v, _ = self._derivative_at(values, Xn, order, d, True, jitters)
            means.append(mu)
            variances.append(v)
        extra = {"order": order, "dim": d, "n_draws": len(means),
                 "jitter": float(max(jitters, default=0.0))}  # fmt: skip
        return mixture_prediction(np.array(means), np.array(variances), extra)

    @staticmethod
    def _check_order(order) -> int:
        if isinstance(order, bool) or not isinstance(order, int | np.integer) or order not in (1, 2):
            raise ValueError(
                f"`order` must be 1 (df/dx) or 2 (d2f/dx2), got {order!r}: higher derivatives "
                "need kernel derivatives of order 6 and more, which are not provided"
            )
        return int(order)

    def _check_dim(self, dim) -> int:
        D = self.X.shape[1]
        if isinstance(dim, str):
            if dim not in self.feature_names:
                raise ValueError(
                    f"`dim`={dim!r} is not an input of this model; its inputs are "
                    f"{list(self.feature_names)}"
                )
            return list(self.feature_names).index(dim)
        if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or not 0 <= dim < D:
            raise ValueError(
                f"`dim` must be an input column index in 0..{D - 1} (or a feature name), "
                f"got {dim!r}"
            )
        return int(dim)

    def _derivative_factor(self, values):
        """``(m(X), factorisation of C)`` at ``values``: the exact likelihood's cached one, or
        (quasiseparable and compact-support exact GPs) a dense factorisation of the same
        :math:`C = K + \\operatorname{diag}(s^2) + (\\sigma^2 + \\epsilon) I`."""
        if isinstance(self.marginal, ExactLikelihood):
            return self.marginal.factor(values)
        n = self.X.shape[0]
        check_dense_memory(n)
        X = pt.as_tensor_variable(self.X)
        fn = self._compiled("derivative_train", lambda _: [self._mean(X), self._cov(X),
                                                           pt.square(self._sigma) * pt.ones(())])  # fmt: skip
        m, K, s2 = fn(*values, np.zeros((0, self.X.shape[1])))
        C = K + (float(s2) + float(self.jitter)) * np.eye(n)
        if self.known_noise_var is not None:
            C += np.diag(self.known_noise_var)
        return m, factorize(C, self.y - m)

    def _derivative_fn(self, key: str, build: Callable):
        """:meth:`_compiled` in :data:`~bayes_gp.kernels.derivatives.DERIVATIVE_MODE`."""
        if key not in self._fns:
            self._fns[key] = function_of_values(self.model.free_RVs, build,
                                                mode=derivatives.DERIVATIVE_MODE)  # fmt: skip
        return self._fns[key]

    def _derivative_at(self, values, Xn, order: int, d: int, diag: bool, jitters):
        """Mean, variance and (``diag=False``) covariance of the ``order``-th derivative along
        input ``d`` at ``Xn`` given hyperparameter ``values`` (:meth:`predict_derivative`)."""
        D = self.X.shape[1]
        X = pt.as_tensor_variable(self.X)

        def cross(Xv):
            tab = derivatives.derivative_table(self._cov, Xv, X, d, order, D, order_b=0)
            mean = derivatives.mean_derivative(self._mean_func, Xv, d, order, D)
            if self.derivative_obs is not None:  # and with the derivative observations
                extra = self.marginal.cross_derivative(Xv, d, order)
                return [pt.concatenate([tab[(order, 0)], extra], axis=1), mean]
            return [tab[(order, 0)], mean]

        def prior(Xv):
            return derivatives.derivative_table(self._cov, Xv, Xv, d, order, D)[(order, order)]

        Ks, dm = self._derivative_fn(f"derivative_cross_{order}_{d}", cross)(*values, Xn)
        prior_fn = self._derivative_fn(f"derivative_prior_{order}_{d}", prior)
        if diag and derivatives.is_stationary(self._cov):  # the same variance everywhere
            kss = np.full(Xn.shape[0], float(prior_fn(*values, Xn[:1])[0, 0]))
        elif diag:
            b = self.DERIVATIVE_BLOCK
            kss = np.concatenate(
                [np.diag(prior_fn(*values, Xn[i : i + b])) for i in range(0, Xn.shape[0], b)]
            )
        else:
            kss = prior_fn(*values, Xn)
        _, fac = self._derivative_factor(values)
        jitters.append(fac.jitter)
        mean, cov = gaussian_predict(fac, np.asarray(Ks).T, kss)
        if diag:
            return dm + mean, cov, None
        return dm + mean, np.maximum(np.diag(cov).copy(), 0.0), cov

    # ---------------------------------------------------------- function draws
    @single_blas_thread
    @renamed_argument("seed", "random_seed")
    def prior_predictive(self, n_draws: int, random_seed: int = 0) -> np.ndarray:
        """Data sets from the prior predictive distribution at the training inputs,
        ``(n_draws, n)``: hyperparameters from their priors, then
        :math:`y \\sim N(m(X), K(X, X) + \\sigma^2 I)` of the exact GP (for ``approx=`` models,
        the prior predictive of the GP they approximate). Up to
        :data:`PRIOR_PREDICTIVE_MAX_N` inputs (one Cholesky factor per data set)."""
        n = self.X.shape[0]
        if n > PRIOR_PREDICTIVE_MAX_N:
            raise NotImplementedError(
                f"the prior predictive draws joint data sets at up to {PRIOR_PREDICTIVE_MAX_N} "
                f"inputs (one Cholesky factor each); this model has n = {n}"
            )
        from bayes_gp.linalg import EAGER_MODE, jittered_cholesky

        rng = np.random.default_rng(random_seed)
        draws = pm.draw(self.model.free_RVs, draws=n_draws, random_seed=rng, mode=EAGER_MODE)
        if n_draws == 1:
            draws = [np.asarray(d)[None] for d in draws]
        fn = self._compiled("prior_predictive", lambda Xv: [self._mean(Xv), self._cov(Xv),
                                                            self._sigma])  # fmt: skip
        out = np.empty((n_draws, n))
        for i in range(n_draws):
            m, K, sigma = fn(*[np.asarray(d[i], float) for d in draws], self.X)
            C = K + float(sigma) ** 2 * np.eye(n)
            if self.known_noise_var is not None:
                C += np.diag(self.known_noise_var)
            L, _ = jittered_cholesky(C)
            out[i] = m + L @ rng.standard_normal(n)
        return out

    @single_blas_thread
    def sample_prior(
        self, X, n: int = 5, random_seed: int | None = None, params=None
    ) -> np.ndarray:
        """Draws of :math:`f` at ``X`` from the GP prior (hyperparameters from their priors, or
        fixed at ``params``), shape ``(n, m)``."""
        Xn = self._check_new(X)
        rng = np.random.default_rng(random_seed)
        from bayes_gp.linalg import jittered_cholesky

        out = []
        for _ in range(n):
            if params is None:
                draw = pm.draw(self.model.free_RVs, random_seed=rng)
                values = [np.asarray(v, float) for v in draw]
            else:
                values = self._values(params)
            K = self._cov_new(values, Xn)
            ms = self._compiled("new_mean", self._mean)(*values, Xn)
            L, _ = jittered_cholesky(K)
            out.append(ms + L @ rng.standard_normal(Xn.shape[0]))
        return np.array(out)

    @single_blas_thread
    def sample_posterior(self, X, fit, n: int = 5, random_seed: int | None = None) -> np.ndarray:
        """Draws of :math:`f` at ``X`` from the posterior (a MAP fit, or NUTS draws), ``(n, m)``."""
        Xn = self._check_new(X)
        rng = np.random.default_rng(random_seed)
        from bayes_gp.linalg import jittered_cholesky

        if isinstance(fit, MapFit):
            values_list = [self._values(fit.params)] * n
        else:
            all_draws = self._draws(fit)
            values_list = [all_draws[i] for i in rng.choice(len(all_draws), n)]
        out = []
        for values in values_list:
            mean, _, cov = self._predict_at(values, Xn, False, False)
            L, _ = jittered_cholesky(cov)
            out.append(mean + L @ rng.standard_normal(Xn.shape[0]))
        return np.array(out)

    # --------------------------------------------------------------- relevance
    def relevance(self, fit, prob: float = CI_PROB):
        """ARD relevance: per-input inverse length-scale :math:`1/\\ell_d` (PRML §6.4.4, R&W §5.1).

        Returns a ``pandas.DataFrame`` indexed by feature with the point estimate (MAP) or the
        posterior mean and a central ``prob`` credible interval (NUTS).
        """
        import pandas as pd

        name = "theta1" if self.spec.name == "prml" else "ls"
        if not self.ard or name not in self.hyperparameters:
            raise ValueError("relevance needs an ARD model (ard=True) with per-input length-scales")

        def inv(v):
            v = np.asarray(v, float)
            return np.sqrt(v) if name == "theta1" else 1.0 / v

        if isinstance(fit, MapFit):
            r = inv(fit.params[name])
            return pd.DataFrame({"relevance": r}, index=self.feature_names)
        post = np.asarray(fit["posterior"][name])
        r = inv(post.reshape(-1, post.shape[-1]))
        lo, hi = np.quantile(r, [(1 - prob) / 2, (1 + prob) / 2], axis=0)
        return pd.DataFrame(
            {"relevance": r.mean(axis=0), "lower": lo, "upper": hi}, index=self.feature_names
        )

    # ------------------------------------------------------------ model protocol
    fit_methods = ("nuts", "map")

    @property
    def label(self) -> str:
        """The kernel's catalogue name (a kernel object's classes, a callable's name)."""
        return self.spec.name

    def describe(self) -> list[tuple[str, object]]:
        """Kernel, its formula and equation, likelihood, mean, noise and data size."""
        rows: list[tuple[str, object]] = [
            ("model", repr(self)),
            ("kernel", self.label + (" (ARD)" if self.ard else "")),
        ]
        rows += [("kernel formula", kernel_formula(self.spec)),
                 ("equation", self.spec.equation or "–")]  # fmt: skip
        mean = self.mean if self.mean is not None else "constant at the sample mean"
        if self.known_noise_var is not None:
            s = np.sqrt(self.known_noise_var)
            noise = f"known per observation (s_i from {s.min():g} to {s.max():g})" + (
                " plus a learned σ" if self.learn_noise else ""
            )
        else:
            noise = f"fixed σ = {self.noise:g}" if self.noise is not None else "learned (σ)"
        rows += [
            (
                "likelihood",
                "Gaussian, f integrated out: y ~ N(m, K + "
                + ("diag(s²)" if self.known_noise_var is not None else "")
                + (" + " if self.known_noise_var is not None and self.learn_noise else "")
                + ("σ²I" if self.learn_noise or self.known_noise_var is None else "")
                + ")"
                + (" (quasiseparable: O(n) state-space recursion)" if self.quasiseparable else "")
                + (
                    ", jointly with the derivatives dy (covariances ∂k/∂x', ∂²k/∂x∂x'; R&W §9.4)"
                    if self.derivative_obs is not None
                    else ""
                ),
            ),
            ("mean function", str(mean)),
            ("noise", noise),
            ("observations n", self.X.shape[0]),
            *self._describe_derivatives(),
            ("input dimensions D", self.X.shape[1]),
            ("inputs", ", ".join(self.feature_names)),
        ]
        return rows


    def _describe_derivatives(self) -> list[tuple[str, object]]:
        obs = self.derivative_obs
        if obs is None:
            return []
        if obs.learned:
            noise = "learned (sigma_d)"
        elif obs.known_sd is not None:
            noise = f"known per derivative ({obs.known_sd.min():g} to {obs.known_sd.max():g})"
        else:
            noise = f"fixed {obs.fixed_sd:g}"
        along = ", ".join(self.feature_names[e] for e in np.unique(obs.dims))
        return [("derivative observations m", f"{obs.m} (along {along}; noise {noise})")]

    def ppc_caption(self, n_draws: int) -> str:
        return (
            f"Observed data vs {n_draws} replicated data sets y_rep = f + ε, f from its "
            "conditional posterior"
        )

    #: Largest n for which replicated data are drawn jointly (n x n predictive covariance).
    PPC_JOINT_MAX = 3000

    @single_blas_thread
    @renamed_argument("seed", "random_seed")
    def replicate(self, fit, n_draws: int, random_seed: int = 0) -> np.ndarray:
        """Replicated data :math:`y^{rep} = f + \\epsilon` at the training inputs, ``(n_draws, n)``:
        :math:`f` from its conditional posterior given :math:`y` and each of ``n_draws``
        hyperparameter draws (NUTS) or the point estimate (type-II). Above
        :attr:`PPC_JOINT_MAX` observations each :math:`y^{rep}_i` is drawn from its marginal
        (the same per-point distribution without the n x n covariance, which large-N
        approximate models never form)."""
        from bayes_gp.linalg import jittered_cholesky

        self.check_fit(fit)
        rng = np.random.default_rng(random_seed)
        nuts = is_nuts(fit)
        values_list = self._draws(fit, n_draws, seed=random_seed) if nuts else [self._values(fit.params)]
        reps = []
        joint = self.X.shape[0] <= self.PPC_JOINT_MAX
        for values in values_list:
            k = 1 if nuts else n_draws
            mean, var, cov = self._predict_at(values, self.X, not joint, True,
                                              noise_var=self.known_noise_var)  # fmt: skip
            if joint:
                L, _ = jittered_cholesky(cov)
                reps.append(mean + (L @ rng.standard_normal((mean.shape[0], k))).T)
            else:
                sd = np.sqrt(np.maximum(var, 0.0))
                reps.append(mean + sd * rng.standard_normal((k, mean.shape[0])))
        return np.concatenate(reps, axis=0)

    def restore_fit(self, method: str, params: dict, attrs: dict) -> MapFit:
        if method != "map":
            raise ValueError(f"GPRegression's type-II fit is 'map', not {method!r}")
        return MapFit(
            params,
            float(attrs["objective"]),
            bool(attrs["prior"]),
            grad_norm=float(attrs["grad_norm"]),
            log_marginal_likelihood=float(attrs["log_marginal_likelihood"]),
            jitter=float(attrs.get("jitter", np.nan)),
            jitter_default=float(attrs.get("jitter_default", np.nan)),
        )

    def point_loo(self, fit) -> tuple[str, np.ndarray]:
        """Exact LOO at the point estimate, R&W eqs. (5.10)–(5.12)."""
        if not isinstance(fit, MapFit):
            raise TypeError(f"point_loo needs a MapFit of this model, got {type(fit).__name__}")
        method = f"exact LOO at {fit.method_label} (R&W 5.10-5.12)"
        return method, self._pointwise_loo(self._values(fit.params))

    @single_blas_thread
    def approximation_checks(self, fit) -> list:
        """Post-fit checks of the approximation (``approx="hsgp"|"vfe"|"fitc"``) at ``fit``
        (:mod:`bayes_gp.solvers.approx_checks`): HSGP resolution, boundary and error against
        the exact GP; VFE/FITC evidence gap and inducing-input coverage; for all three the exact
        GP's evidence on a subsample at the fit vs at its optimum. None for the exact GP."""
        from bayes_gp.solvers import approx_checks

        return approx_checks.for_regression(self, fit)

    def __repr__(self) -> str:
        k = self.spec.name
        approx = "" if self.approx is None else f", approx={self.approx.name!r}"
        approx += ", sparse=True" if self.sparse else ""
        approx += ", structure='quasiseparable'" if self.quasiseparable else ""
        if self.derivative_obs is not None:
            approx += f", m={self.derivative_obs.m} derivative observations"
        return (
            f"GPRegression(n={self.X.shape[0]}, D={self.X.shape[1]}, kernel={k!r}, ard={self.ard}"
            f"{approx})"
        )
