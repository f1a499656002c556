r"""Zero-inflated and hurdle counts whose zero probability is a second latent GP.

:class:`~bayes_gp.LatentGP` with a zero-inflated or hurdle likelihood learns the zero
probability :math:`\pi` as one constant. With ``zero_gp=True`` it varies with the inputs, on
the logit scale a GP of its own (the zero-inflated Poisson with covariates in :math:`\pi` of
Lambert 1992, eq. 2, :math:`\mathrm{logit}\,\pi = G\gamma`, with the linear predictor replaced
by a GP; two latent GPs chained through one likelihood as in Saul, Hensman, Vehtari & Lawrence
2016, "Chained Gaussian processes", AISTATS, §2):

.. math::
   f \sim GP(m_\beta, k_\theta), \qquad g \sim GP(\mu_g, k_{\theta_g}), \qquad
   \pi(x) = \sigma(g(x)), \qquad \mu(x) = E\,e^{f(x)},

   \text{zero-inflated:}\quad p(0) = \pi + (1 - \pi)\,p_c(0 \mid \mu), \quad
   p(y) = (1 - \pi)\,p_c(y \mid \mu) \ (y > 0) \qquad \text{(Lambert 1992, eq. 1)},

   \text{hurdle:}\quad p(0) = \pi, \quad
   p(y) = (1 - \pi)\,\frac{p_c(y \mid \mu)}{1 - p_c(0 \mid \mu)} \ (y > 0)
   \qquad \text{(Mullahy 1986)},

with :math:`p_c` the Poisson or the negative binomial of dispersion :math:`r`. The response
mean is :math:`E[y \mid f, g] = (1 - \pi)\mu` (zero-inflated) or
:math:`(1 - \pi)\mu/(1 - p_c(0 \mid \mu))` (hurdle).

The two latent functions meet in every observation's density, so the one-function Laplace
approximation of :class:`~bayes_gp.LatentGP` (and its variational and EP fits) does not apply.
The model is sampled by joint NUTS over both whitened latents and the hyperparameters
(``pm.gp.Latent(reparameterize=True)``: :math:`f = m + L_f v_f`, :math:`g = \mu_g + L_g v_g`,
:math:`L L^\top = K + \text{jitter}\,I`, :math:`v \sim N(0, I)`), with PyMC's
``ZeroInflatedPoisson`` / ``ZeroInflatedNegativeBinomial`` / ``HurdlePoisson`` /
``HurdleNegativeBinomial`` given :math:`\psi_i = 1 - \pi(x_i) = \sigma(-g_i)` (PyMC's
:math:`\psi` is the probability of the count component, or of a positive count for the hurdle).

Default priors of :math:`g`: the catalogue's for its kernel's length-scales (``zero_ls``, ...),
the amplitude ``zero_eta`` :math:`\sim \mathrm{HalfNormal}(2)` on the logit scale (as
:math:`f`'s), and its constant mean ``zero_mean`` :math:`\mu_g \sim N(\mathrm{logit}\,\hat p_0,
2^2)`, :math:`\hat p_0` the fraction of zeros in the data (clipped to [0.02, 0.98]): the
hurdle's :math:`\pi` is that fraction, the zero-inflated :math:`\pi` at most it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from scipy.special import expit, log_expit
from scipy.special import logit as np_logit

from bayes_gp._validation import f64, hyperparameter_values
from bayes_gp.inference.jitter import JitterChoice
from bayes_gp.inference.methods import NUTS_JOINT, canonical_method
from bayes_gp.inference.sampling import NutsRun
from bayes_gp.inference.typeii import function_of_values
from bayes_gp.kernels.catalogue import check_kernel_ard, default_prior, kernel_formula, kernel_spec
from bayes_gp.kernels.lags import gram
from bayes_gp.latent.hurdle import HurdleNegativeBinomial, HurdlePoisson
from bayes_gp.latent.likelihoods import ZeroInflatedNegativeBinomial, ZeroInflatedPoisson
from bayes_gp.latent.model import LINK_SCALE, LatentGP, _sizes, register_zero_gp
from bayes_gp.latent.predictive import joint_conditional
from bayes_gp.linalg import plus_diagonal, single_blas_thread
from bayes_gp.predictive import CI_QUANTILES, Z_CI, Prediction, gaussian_mixture_quantiles
from bayes_gp.priors import resolve_prior
from bayes_gp.protocol import Bands, is_nuts

__all__ = ["ZeroGP", "ZERO_GP_LIKELIHOODS"]

#: The likelihoods that take ``zero_gp=True``.
ZERO_GP_LIKELIHOODS = (
    "zero_inflated_poisson",
    "zero_inflated_negative_binomial",
    "hurdle_poisson",
    "hurdle_negative_binomial",
)

#: Predictive draws per posterior draw for the Monte Carlo bands of :meth:`ZeroGP.predict`.
N_PER_DRAW = 20

_REFUSAL = (
    "with zero_gp=True the zero probability is a second latent GP g coupled to f in every "
    "observation, so the one-function Laplace approximation (method 'nuts', 'map'), the "
    "variational and the EP fits do not apply: use fit('nuts_joint') or "
    "sample(method='nuts_joint') (joint NUTS over both whitened latent GPs)"
)


@register_zero_gp
class ZeroGP(LatentGP):
    r"""A :class:`~bayes_gp.LatentGP` with a zero-inflated or hurdle count likelihood whose
    zero probability is a second latent GP, :math:`\mathrm{logit}\,\pi(x) = g(x)` (module
    docstring). Made by ``LatentGP(X, y, likelihood=..., zero_gp=True)``.

    Parameters
    ----------
    X, y, kernel, likelihood, link, ard, mean, exposure, jitter
        As :class:`~bayes_gp.LatentGP` (``likelihood`` one of :data:`ZERO_GP_LIKELIHOODS`;
        ``y`` counts with zeros and positive counts). ``kernel`` and ``mean`` are :math:`f`'s.
    zero_kernel : str, kernel object or callable
        The kernel of :math:`g` in the forms of ``kernel``; its hyperparameters are prefixed
        ``zero_`` (``zero_ls``, ``zero_eta``, ...). Its constant mean is ``zero_mean``.
    priors : dict, optional
        Overrides by name: :math:`f`'s as :class:`~bayes_gp.LatentGP`'s (``dispersion`` for the
        negative binomial; no ``zero_inflation`` / ``zero_probability``: :math:`\pi` is
        :math:`\sigma(g)`), and ``zero_*`` and ``zero_mean`` for :math:`g`. One jitter serves
        both GPs (both on a link scale, :math:`s = 2`).

    Fits: ``fit("nuts_joint")`` / ``sample(method="nuts_joint")`` only (joint NUTS); the
    posterior holds ``f`` and ``g``, and the pointwise ``log_likelihood`` is
    :math:`\log p(y_i \mid f_i, g_i, r)`.
    """

    sample_options: ClassVar[dict[str, Any]] = {"method": NUTS_JOINT}
    _FITS: ClassVar[dict[str, tuple[str, dict]]] = {NUTS_JOINT: ("sample", {"method": NUTS_JOINT})}
    fit_methods = (NUTS_JOINT,)
    sampling_methods = (NUTS_JOINT,)
    _RESTORE: ClassVar[dict[str, str]] = {}

    def __init__(
        self,
        X,
        y,
        kernel: Any = "expquad",
        likelihood: Any = "zero_inflated_poisson",
        *,
        zero_gp: bool = True,
        zero_kernel: Any = "expquad",
        priors: Mapping[str, Any] | None = None,
        **options,
    ):
        if likelihood not in ZERO_GP_LIKELIHOODS:
            raise ValueError(
                f"`zero_gp=True` applies to the likelihoods {list(ZERO_GP_LIKELIHOODS)}, not "
                f"{likelihood!r}"
            )
        if zero_gp is not True:
            raise ValueError(f"`zero_gp` must be True or False, got {zero_gp!r}")
        zero_kernel = "expquad" if zero_kernel is None else zero_kernel
        self.zero_spec = kernel_spec(zero_kernel, arg="zero_kernel")
        check_kernel_ard(self.zero_spec, bool(options.get("ard", False)))
        self.zero_kernel = zero_kernel
        priors = dict(priors or {})
        scalar = {"zero_inflation", "zero_probability"} & set(priors)
        if scalar:
            raise ValueError(
                f"`priors` names {sorted(scalar)}, the constant zero probability; with "
                "zero_gp=True it is sigma(g(x)): give priors for zero_mean and the zero kernel's "
                f"{self._zero_names} instead"
            )
        zero_names = {*self._zero_names, "zero_mean"}
        self._zero_priors = {k: v for k, v in priors.items() if k in zero_names}
        rest = {k: v for k, v in priors.items() if k not in zero_names}
        super().__init__(X, y, kernel, likelihood, priors=rest, **options)
        self.priors = priors
        zeros = int(np.sum(self.y == 0))
        if zeros == 0 or zeros == self.y.size:
            raise ValueError(
                f"zero_gp=True needs zeros and positive counts in `y` ({zeros} zeros of "
                f"{self.y.size}): the zeros inform g (the zero probability) and the positive "
                "counts f"
            )

    # ------------------------------------------------------------------ model
    @property
    def _zero_names(self) -> list[str]:
        return [f"zero_{p}" for p in self.zero_spec.params]

    @property
    def _zero_fraction(self) -> float:
        return float(np.clip(np.mean(self.y == 0), 0.02, 0.98))

    def _likelihood_priors(self) -> list:
        """The count component's parameters only (``dispersion``, its prior as
        :class:`~bayes_gp.LatentGP`'s: :math:`r \\sim \\mathrm{LogNormal}(\\log 5, 1.5)`):
        :math:`\\pi` is :math:`\\sigma(g)`."""

        def dispersion(name):
            return pm.LogNormal(name, mu=f64(np.log(5.0)), sigma=f64(1.5))

        return [self._prior(p, default=dispersion) for p in self.likelihood.param_names[:-1]]

    def _zero_prior(self, name: str, ard: bool = False, default=None):
        fallback = default or (lambda n: default_prior(n, self.scale, ard))
        own = {f"zero_{p}": v for p, v in self.zero_spec.priors.items()}
        return resolve_prior({**own, **self._zero_priors}, name, fallback, ard=ard)

    def _build(self) -> pm.Model:
        """The joint model: hyperparameters of both GPs, the whitened ``f`` and ``g``, ``y``."""
        lik = self.likelihood
        n, D = self.X.shape
        with pm.Model(coords={"feature": self.feature_names, "obs": np.arange(n)}) as model:
            cov, mean_func, phi = self._declare()
            hyper_g = {}
            for p in self.zero_spec.params:
                ard = self.ard and p in self.zero_spec.ard_params
                default = None
                if p.rsplit("_", 1)[-1] == "eta":

                    def default(name):
                        return pm.HalfNormal(name, sigma=f64(LINK_SCALE))

                hyper_g[p] = self._zero_prior(f"zero_{p}", ard, default)
            centre = float(np_logit(self._zero_fraction))
            zero_mean = self._zero_prior(
                "zero_mean",
                default=lambda name: pm.Normal(name, mu=f64(centre), sigma=f64(LINK_SCALE)),
            )
            cov_g = self.zero_spec.build(D, hyper_g)
            mean_g = pm.gp.mean.Constant(zero_mean)
            f = pm.gp.Latent(mean_func=mean_func, cov_func=cov).prior(
                "f", X=self._kernel_inputs, reparameterize=True, jitter=self.jitter_tensor,
                dims="obs",
            )  # fmt: skip
            g = pm.gp.Latent(mean_func=mean_g, cov_func=cov_g).prior(
                "g", X=self._kernel_inputs, reparameterize=True, jitter=self.jitter_tensor,
                dims="obs",
            )  # fmt: skip
            psi = pm.math.sigmoid(-g)  # PyMC's psi: P(count component), P(y > 0) for hurdles
            mu = lik.exposure * pt.exp(f)
            if isinstance(lik, ZeroInflatedPoisson):
                pm.ZeroInflatedPoisson("y", psi=psi, mu=mu, observed=lik.y, dims="obs")
            elif isinstance(lik, ZeroInflatedNegativeBinomial):
                pm.ZeroInflatedNegativeBinomial("y", psi=psi, mu=mu, alpha=phi[0],
                                                observed=lik.y, dims="obs")  # fmt: skip
            elif isinstance(lik, HurdlePoisson):
                pm.HurdlePoisson("y", psi=psi, mu=mu, observed=lik.y, dims="obs")
            else:
                pm.HurdleNegativeBinomial("y", psi=psi, mu=mu, alpha=phi[0], observed=lik.y,
                                          dims="obs")  # fmt: skip
        self._cov, self._mean_func, self._cov_g, self._mean_g = cov, mean_func, cov_g, mean_g
        self._phi = (pt.concatenate([pt.as_tensor_variable(p).reshape((-1,)) for p in phi])
                     if phi else pt.zeros(0))  # fmt: skip
        latents = {"f_rotated_", "g_rotated_"}
        self._hyper_rvs = [rv for rv in model.free_RVs if rv.name not in latents]
        self._latent_pm = model
        return model

    def _latent_model(self) -> pm.Model:
        return self.model

    @property
    def hyperparameters(self) -> list[str]:
        """The hyperparameters of both GPs and the component's (not the whitened latents)."""
        return [rv.name for rv in self._hyper_rvs]

    def _compiled(self, key: str, build):
        if key not in self._fns:
            self._fns[key] = function_of_values(self._hyper_rvs, build)
        return self._fns[key]

    def _values(self, params: Mapping[str, Any]) -> list[np.ndarray]:
        return hyperparameter_values(self.model, self._hyper_rvs, params, self._fns)

    def _train_g(self, values) -> tuple[np.ndarray, np.ndarray]:
        """``(K_g + jitter I, m_g)`` at hyperparameter values."""
        n = self.X.shape[0]

        def build(_Xn):
            Xt = pt.as_tensor_variable(self._kernel_inputs)
            K = plus_diagonal(gram(self._cov_g, self._kernel_inputs), self.jitter_tensor)
            return [K, pt.as_tensor_variable(self._mean_g(Xt)) * pt.ones(n)]

        return self._compiled("train_g", build)(*values, np.zeros((0, self.X.shape[1])))

    def _new_g(self, values, Xn):
        """``(K_g(X, X_new), diag K_g(X_new), m_g(X_new))``."""

        def build(Xv):
            Xt = pt.as_tensor_variable(self._kernel_inputs)
            mean = pt.as_tensor_variable(self._mean_g(Xv)) * pt.ones(Xv.shape[0])
            return [self._cov_g(Xt, Xv), self._cov_g(Xv, diag=True), mean]

        return self._compiled("new_g", build)(*values, Xn)

    @single_blas_thread
    def check_jitter(self, random_seed: int | None = None) -> JitterChoice:
        """The pre-flight Cholesky check of both :math:`K_f + \\nu I` and :math:`K_g + \\nu I`
        (one block-diagonal matrix) at the initial point and at prior draws."""
        from scipy.linalg import block_diag

        return self._preflight(
            self._hyper_rvs,
            lambda values: block_diag(self._train(values)[0], self._train_g(values)[0]),
            "latent jitter",
            random_seed,
        )

    # ------------------------------------------------------------- density
    def log_density(self, f, g, phi=()) -> np.ndarray:
        r""":math:`\log p(y_i \mid f_i, g_i, r)` of each training observation (module
        docstring), with :math:`\log\pi = \log\sigma(g)`, :math:`\log(1 - \pi) =
        \log\sigma(-g)`."""
        lik = self.likelihood
        f, g = np.asarray(f, float), np.asarray(g, float)
        cphi = list(np.atleast_1d(np.asarray(phi, float)))
        log_pi, log_1m = log_expit(g), log_expit(-g)
        lc = lik._base.log_density(f, cphi)
        zero = self.y == 0
        if isinstance(lik, (HurdlePoisson, HurdleNegativeBinomial)):
            log_pos = lik._truncation(f, cphi)[-1]  # log(1 - p_c(0 | mu))
            return np.where(zero, log_pi, log_1m + lc - log_pos)
        return np.where(zero, np.logaddexp(log_pi, log_1m + lc), log_1m + lc)

    def _refuse(self, *_args, **_kwargs):
        raise ValueError(_REFUSAL)

    fit_laplace = fit_vi = fit_ep = log_marginal_likelihood = point_loo = _refuse

    def approximation_checks(self, fit) -> list:
        """None to make: joint NUTS samples both latent GPs exactly (an empty list)."""
        self.check_fit(fit)
        return []

    def restore_fit(self, method: str, params: dict, attrs: dict):
        raise ValueError(_REFUSAL)

    def _nuts_run(self, sampler, random_seed, *, method: str) -> NutsRun:
        """Joint NUTS over both whitened latents and the hyperparameters, after the jitter
        pre-flight; ``"nuts"`` (Laplace inside NUTS) is refused."""
        method = canonical_method(f"{type(self).__name__}.sample", method, self.renamed_methods)
        if method != NUTS_JOINT:
            raise ValueError(f"`method` {method!r}: {_REFUSAL}")
        attrs = {**self.check_jitter(random_seed).attrs(), "bayes_gp_method": NUTS_JOINT}
        return NutsRun(self.model, attrs=attrs, latent=True)

    def fit(self, method: str | None = None, **options):
        """``"nuts_joint"`` (the default): :meth:`sample`; the others are refused (module
        docstring)."""
        method = NUTS_JOINT if method is None else method
        method = canonical_method(f"{type(self).__name__}.fit", method, self.renamed_methods)
        if method != NUTS_JOINT:
            raise ValueError(f"`method` {method!r}: {_REFUSAL}")
        return self.sample(method=NUTS_JOINT, **options)

    def _nuts_result(self, idata, run: NutsRun, random_seed):
        """The pointwise ``log_likelihood`` group, :math:`\\log p(y_i \\mid f_i, g_i, r)`."""
        from bayes_gp.inference.nuts import add_log_likelihood

        def pointwise(values):
            *hyper, f, g = values
            return self.log_density(f, g, self._train(hyper)[2])

        return add_log_likelihood(idata, [*self.hyperparameters, "f", "g"], pointwise)

    def check_fit(self, fit) -> None:
        if not is_nuts(fit) or "g" not in fit["posterior"]:
            raise TypeError(
                "a zero_gp=True LatentGP fit is the ArviZ DataTree from sample(method="
                f"'nuts_joint') (posterior f and g), got {type(fit).__name__}"
            )

    # ------------------------------------------------------------- prediction
    def _joint_draws(self, fit, max_draws: int):
        """``[(values, f, g)]`` for up to ``max_draws`` posterior draws (an even subset)."""
        self.check_fit(fit)
        post = fit["posterior"]
        n = self.X.shape[0]
        f = np.asarray(post["f"], float).reshape(-1, n)
        g = np.asarray(post["g"], float).reshape(-1, n)
        flat = [np.asarray(post[name]) for name in self.hyperparameters]
        flat = [a.reshape((-1, *a.shape[2:])) for a in flat]
        idx = np.arange(f.shape[0])
        if idx.size > max_draws:
            idx = np.sort(np.random.default_rng(0).choice(idx.size, max_draws, replace=False))
        return [([a[i] for a in flat], f[i], g[i]) for i in idx]

    def _latent_moments_fg(self, Xn: np.ndarray, fit, max_draws: int):
        r"""Per draw the mean and variance of :math:`f_* \mid f, \theta` and of
        :math:`g_* \mid g, \theta_g` (R&W eq. 2.19 noise-free, each GP given its own sampled
        values) and the component parameters."""
        out = {k: [] for k in ("mf", "vf", "mg", "vg", "phi")}
        for values, f, g in self._joint_draws(fit, max_draws):
            K, m, phi = self._train(values)
            Ks, kss, m_new = self._new(values, Xn)
            mu, var = joint_conditional(K, f - m)(Ks, kss)
            Kg, mg = self._train_g(values)
            Ksg, kssg, mg_new = self._new_g(values, Xn)
            mug, varg = joint_conditional(Kg, g - mg)(Ksg, kssg)
            out["mf"].append(m_new + mu)
            out["vf"].append(np.maximum(var, 0.0))
            out["mg"].append(mg_new + mug)
            out["vg"].append(np.maximum(varg, 0.0))
            out["phi"].append(phi)
        return ({k: np.array(v) for k, v in out.items() if k != "phi"}, out["phi"])

    def _samples(self, Xn, fit, max_draws: int, random_seed: int):
        """The per-draw moments of :meth:`_latent_moments_fg` and ``N_PER_DRAW`` draws of
        :math:`(f_*, g_*)` per posterior draw, ``(S, N_PER_DRAW, m)`` each, and the generator."""
        mom, phis = self._latent_moments_fg(Xn, fit, max_draws)
        rng = np.random.default_rng(random_seed)
        eps = rng.standard_normal((2, *mom["mf"].shape[:1], N_PER_DRAW, Xn.shape[0]))
        fs = mom["mf"][:, None] + np.sqrt(mom["vf"])[:, None] * eps[0]
        gs = mom["mg"][:, None] + np.sqrt(mom["vg"])[:, None] * eps[1]
        return mom, phis, fs, gs, rng

    def _count_mean(self, f, cphi, size) -> np.ndarray:
        r"""The count part's mean given :math:`f`: :math:`\mu` (zero-inflated) or the
        zero-truncated :math:`\mu/(1 - p_c(0 \mid \mu))` (hurdle)."""
        lik = self.likelihood
        if isinstance(lik, (HurdlePoisson, HurdleNegativeBinomial)):
            return lik._truncated_moments(f, cphi, size)[0]
        return (1.0 if size is None else size) * np.exp(f)

    def _draw_y(self, f, pi, cphi, rng, size) -> np.ndarray:
        """Counts given latent values ``f`` and zero probabilities ``pi`` (same shape)."""
        lik = self.likelihood
        if isinstance(lik, (HurdlePoisson, HurdleNegativeBinomial)):
            mu = (1.0 if size is None else size) * np.exp(f)
            y = lik._positive_draws(np.array(mu, float), cphi, rng)
        else:
            y = lik._base.draw(f, cphi, rng, size)
        return np.where(rng.uniform(size=np.shape(f)) < pi, 0.0, y)

    def _zero_predictive(self, Xn, fit, size, max_draws: int, random_seed: int) -> Prediction:
        """:meth:`predict` at checked inputs."""
        mom, phis, fs, gs, rng = self._samples(Xn, fit, max_draws, random_seed)
        mf, vf, mg, vg = mom["mf"], mom["vf"], mom["mg"], mom["vg"]
        S, m = mf.shape
        pis = expit(gs)
        resp = np.empty_like(fs)
        ys = np.empty_like(fs)
        for s in range(S):
            cphi = list(np.atleast_1d(phis[s]))
            resp[s] = (1.0 - pis[s]) * self._count_mean(fs[s], cphi, size)
            ys[s] = self._draw_y(fs[s], pis[s], cphi, rng, size)
        flat_r, flat_y = resp.reshape(-1, m), ys.reshape(-1, m)
        mean_lo, mean_hi = np.quantile(flat_r, CI_QUANTILES, axis=0)
        lower, upper = np.quantile(flat_y, CI_QUANTILES, axis=0)
        if S == 1:
            g_lo, g_hi = mg[0] - Z_CI * np.sqrt(vg[0]), mg[0] + Z_CI * np.sqrt(vg[0])
        else:
            g_lo, g_hi = gaussian_mixture_quantiles(mg, np.sqrt(vg), CI_QUANTILES)
        f_mean = mf.mean(axis=0)
        f_sd = np.sqrt(vf.mean(axis=0) + mf.var(axis=0))
        extra = {
            "n_draws": S,
            "zero_mean": pis.reshape(-1, m).mean(axis=0),
            "zero_lower": expit(g_lo),
            "zero_upper": expit(g_hi),
            "mean_lower": mean_lo,
            "mean_upper": mean_hi,
            "zero_latent_mean": mg.mean(axis=0),
            "zero_latent_sd": np.sqrt(vg.mean(axis=0) + mg.var(axis=0)),
        }
        return Prediction(flat_r.mean(axis=0), flat_y.var(axis=0), None, lower, upper, extra,
                          latent_mean=f_mean, latent_sd=f_sd)  # fmt: skip

    @single_blas_thread
    def predict(self, X_new, fit, *, size=None, max_draws: int = 200, random_seed: int = 0):
        r"""Predictions at ``X_new`` from joint NUTS draws: both GPs conditioned on each draw's
        latent values at the training inputs (:math:`f_* \mid f` and :math:`g_* \mid g`,
        Gaussian, R&W eq. 2.19 noise-free), then ``N_PER_DRAW`` (20) Monte Carlo draws of
        :math:`(f_*, g_*)` per posterior draw (seeded by ``random_seed``).

        Returns a :class:`~bayes_gp.predictive.Prediction`: ``mean`` the response mean
        :math:`E[(1 - \pi_*)\mu_*]` (zero-inflated; :math:`(1 - \pi_*)\mu_*/(1 - p_c(0))` for
        the hurdle; exposure ``size``, default 1), ``var``, ``lower``, ``upper`` the variance
        and central 94% interval of :math:`y_*`; ``latent_mean``, ``latent_sd`` of
        :math:`f_*`; in ``extra``: ``mean_lower``, ``mean_upper`` the 94% band of the response
        mean, ``zero_mean``, ``zero_lower``, ``zero_upper`` the posterior mean of
        :math:`\pi_* = \sigma(g_*)` and its 94% band (:math:`\sigma` of the mixture quantiles
        of :math:`g_*`, exact: :math:`\sigma` is increasing), ``zero_latent_mean``,
        ``zero_latent_sd`` of :math:`g_*`, ``n_draws``.
        """
        Xn = self._check_new(X_new)
        size = self._size_at(X_new, size)
        size = None if size is None else _sizes(size, Xn.shape[0])
        return self._zero_predictive(Xn, fit, size, max_draws, random_seed)

    def zero_probability(self, X_new, fit, *, max_draws: int = 200):
        r"""The zero probability :math:`\pi(x_*) = \sigma(g(x_*))`: ``(mean, lower, upper)``,
        its posterior mean and central 94% band (:meth:`predict`'s ``zero_*``)."""
        pred = self.predict(X_new, fit, max_draws=max_draws)
        return pred.extra["zero_mean"], pred.extra["zero_lower"], pred.extra["zero_upper"]

    def predict_latent(self, X_new, fit, *, max_draws: int = 200) -> Prediction:
        """:math:`f_*`'s mean, variance and 94% band (mixed over the draws)."""
        mom, _ = self._latent_moments_fg(self._check_new(X_new), fit, max_draws)
        mf, vf = mom["mf"], mom["vf"]
        mean, var = mf.mean(axis=0), vf.mean(axis=0) + mf.var(axis=0)
        lower, upper = gaussian_mixture_quantiles(mf, np.sqrt(vf), CI_QUANTILES)
        return Prediction(mean, var, None, lower, upper, {"n_draws": len(mf)},
                          latent_mean=mean, latent_sd=np.sqrt(var))  # fmt: skip

    @single_blas_thread
    def held_out_predictive(self, X_new, y, fit, *, size=None, max_draws: int = 200):
        r"""The predictive CDF of held-out counts ``y`` at ``X_new`` (exposure ``size``,
        default 1), from below and at each: :math:`P(Y_* \le k) = \pi_* + (1 - \pi_*)F_c(k)`
        (zero-inflated) or :math:`\pi_* + (1 - \pi_*)(1 - P_c(Y > k)/(1 - p_c(0)))` for
        :math:`k \ge 1` (hurdle), averaged over the Monte Carlo draws of :math:`(f_*, g_*)`
        of :meth:`predict` (``N_PER_DRAW`` per posterior draw, fixed seed)."""
        from bayes_gp.predictive import held_out_vector
        from bayes_gp.protocol import HeldOutPredictive

        Xn = self._check_new(X_new)
        y = held_out_vector(y, Xn.shape[0])
        size = self._size_at(X_new, size)
        size = None if size is None else _sizes(size, Xn.shape[0])
        _, phis, fs, gs, _ = self._samples(Xn, fit, max_draws, 0)
        held = self.likelihood.with_data(y, size)
        below, at = np.zeros(y.shape), np.zeros(y.shape)
        for s_, cphi in enumerate(phis):
            phi = [*np.atleast_1d(cphi), expit(gs[s_])]
            below += held.cdf_values(y - 1.0, fs[s_], phi, size).mean(axis=0)
            at += held.cdf_values(y, fs[s_], phi, size).mean(axis=0)
        return HeldOutPredictive("cdf", below / len(phis), at / len(phis))

    def predict_proba(self, X_new, fit, *, max_draws: int = 200):
        raise ValueError("predict_proba is for the ordinal likelihood")

    def replicate(self, fit, n_draws: int, random_seed: int = 0) -> np.ndarray:
        """Replicated counts at the training inputs (training exposure), one per posterior draw
        of :math:`(f, g, r)`: :math:`y^{rep} \\sim p(y \\mid f, \\sigma(g), r)`."""
        rng = np.random.default_rng(random_seed)
        draws = self._joint_draws(fit, n_draws)
        size = self.likelihood.sizes()
        out = []
        for k in range(n_draws):
            values, f, g = draws[k % len(draws)]
            cphi = list(np.atleast_1d(self._train(values)[2]))
            out.append(self._draw_y(f, expit(g), cphi, rng, size))
        return np.array(out)

    def prior_predictive(self, n_draws: int, random_seed: int = 0) -> np.ndarray:
        """Data sets from the prior predictive (ancestral draws of the joint model)."""
        from bayes_gp.linalg import EAGER_MODE

        draws = pm.draw(self.model["y"], draws=n_draws, random_seed=random_seed, mode=EAGER_MODE)
        return np.asarray(draws, float).reshape(n_draws, -1)

    def bands(self, grid, fit, *, along: int | str = 0) -> Bands:
        """The response mean per unit exposure along input ``along`` (others at their
        medians), its 94% band and the 94% predictive interval of :math:`y_*`."""
        grid = np.asarray(grid, float).ravel()
        j = self._input_index(along)
        Xn = np.tile(np.median(self.X, axis=0), (grid.size, 1))
        Xn[:, j] = grid
        pred = self._zero_predictive(self._check_new(Xn), fit, None, 200, 0)
        size = self.likelihood.sizes()
        y = self.y if size is None else self.y / size
        held = "" if self.X.shape[1] == 1 else " (other inputs at their medians)"
        return Bands("regression", self.X[:, j], y, grid, pred.mean, pred.extra["mean_lower"],
                     pred.extra["mean_upper"], pred.lower, pred.upper,
                     band_label=f"94% band of the response mean (1 - pi) mu per unit exposure{held}",
                     y_band_label=f"94% predictive interval of y* per unit exposure{held}")  # fmt: skip

    def prediction_columns(self, X_new, fit) -> dict[str, np.ndarray]:
        """``latent_mean``, ``latent_sd``, ``mean``, ``lower_94``, ``upper_94`` and the zero
        probability's ``zero_probability``, ``zero_lower_94``, ``zero_upper_94``."""
        pred = self.predict(X_new, fit)
        return {"latent_mean": pred.latent_mean, "latent_sd": pred.latent_sd, "mean": pred.mean,
                "lower_94": pred.lower, "upper_94": pred.upper,
                "zero_probability": pred.extra["zero_mean"],
                "zero_lower_94": pred.extra["zero_lower"],
                "zero_upper_94": pred.extra["zero_upper"]}  # fmt: skip

    def scores(self, y, columns) -> dict[str, float]:
        """RMSE of the predictive mean and coverage of the 94% interval of ``y``."""
        y = np.asarray(y, float)
        inside = (y >= columns["lower_94"]) & (y <= columns["upper_94"])
        return {"rmse": float(np.sqrt(np.mean((y - columns["mean"]) ** 2))),
                "coverage_94": float(np.mean(inside))}  # fmt: skip

    def describe(self) -> list[tuple[str, object]]:
        rows = super().describe()
        names = ", ".join(self._zero_names)
        zero = "P(structural zero)" if "zero_inflated" in self.likelihood_name else "P(y = 0)"
        pname = self.likelihood.param_names[:-1]
        out = []
        for key, value in rows:
            if key == "likelihood":
                value = (f"{self.likelihood_name}, log link; zero probability pi(x) = "
                         f"sigmoid(g(x)) = {zero}; parameters: {', '.join(pname) or 'none'}")  # fmt: skip
            out.append((key, value))
            if key == "latent GP":
                out += [
                    ("zero-probability GP", "g ~ GP(zero_mean, k_g), logit pi = g; f and g "
                     "whitened, sampled jointly by NUTS"),
                    ("zero GP kernel", self.zero_spec.name + (" (ARD)" if self.ard else "")),
                    ("zero GP kernel formula", f"{kernel_formula(self.zero_spec)}  "
                     f"(hyperparameters {names})"),
                ]
        return out

    @property
    def label(self) -> str:
        return f"{self.spec.name}, {self.likelihood_name}, zero GP {self.zero_spec.name}"

    def _phi_summary(self, fit) -> dict[str, float]:
        return {}
