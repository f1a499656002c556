r"""GP regression with input-dependent (heteroscedastic) noise (Goldberg, Williams & Bishop 1998).

The homoscedastic model of :class:`~bayes_gp.GPRegression` (PRML eqs. 6.58–6.62, R&W §2.2)
gives every observation the same noise variance :math:`\sigma^2`. Here the log noise standard
deviation is itself a GP (Goldberg, Williams & Bishop, "Regression with input-dependent noise: a
Gaussian process treatment", NIPS 10, 1998, who also sample it by MCMC; PRML and R&W treat only the
homoscedastic model):

.. math::
   f \sim GP(m, k_f), \qquad g \sim GP(\mu_g, k_g), \qquad
   y_i \mid f, g \sim N\!\left(f(x_i),\ e^{2 g(x_i)}\right)\ \text{independently}.

Given :math:`g`, the model is a GP regression with known noise variances, so :math:`f` is
integrated out exactly, as in :class:`~bayes_gp.GPRegression`:

.. math::
   y \mid g, \theta \sim N\!\left(m,\ K_f + \operatorname{diag}(e^{2g}) + \text{jitter}\,I\right),

and NUTS runs over the hyperparameters and the latent :math:`g` only, whitened
(``pm.gp.Latent(reparameterize=True)``: :math:`g = \mu_g + L_g z_g`, :math:`L_g L_g^\top = K_g +
\text{jitter}\,I`, :math:`z_g \sim N(0, I)`). Sampling :math:`f` as a second whitened latent
instead mixes badly: where the noise is small the data pin :math:`f` down, and its whitened
coordinates are strongly coupled to its length-scale and amplitude (measured on ``mcycle``, 2
chains × 200 draws after 300 tuning steps: bulk ESS 21 and 17 for ``ls`` and ``eta``, R-hat
1.11 and 1.09, against 426 and 405, R-hat 1.00, with :math:`f` integrated out). After
sampling, each draw gets an exact draw of :math:`f` from the Gaussian :math:`p(f \mid y, g,
\theta)` (R&W eqs. 2.23–2.24 with noise covariance :math:`\operatorname{diag}(e^{2g})`), so the
posterior holds both latent processes. nutpie samples it on a log density and gradient in C
(:mod:`bayes_gp.inference.native_latent`: nothing compiled per model) where the kernels and
priors are ones that code knows, and on numba's compilation of this PyMC model otherwise.

The pointwise ``log_likelihood`` terms are :math:`\log p(y_i \mid y_{-i}, g, \theta)` (R&W eqs.
5.10–5.12 with covariance :math:`K_f + \operatorname{diag}(e^{2g})`), the PSIS-LOO terms of a
non-factorising Gaussian model (Bürkner, Gabry & Vehtari 2021), as for
:class:`~bayes_gp.GPRegression`, so the two models' ``elpd_loo`` are comparable. The factorised
terms :math:`\log N(y_i \mid f_i, e^{2 g_i})` estimate the same ``elpd_loo`` with a noisier
importance sampler (``mcycle``, 2 × 1000 draws: −560.1 against −561.4, four Pareto
:math:`\hat k > 0.7` against two).

Default hyperpriors: those of the catalogue (:mod:`bayes_gp.kernels.catalogue`) for
:math:`k_f`, and the mean :math:`m` fixed at the sample mean of :math:`y` (as ``GPRegression``'s
default); for the log-noise GP, the catalogue's priors for an output of unit scale
(length-scale ``noise_ls`` :math:`\sim \mathrm{LogNormal}(\log(R/3), 1)`, amplitude
``noise_eta`` :math:`\sim \mathrm{HalfNormal}(1)`) and its mean ``noise_mean``
:math:`\mu_g \sim N(\log(s_y/3), 1)`: a noise sd around a third of the outputs' standard
deviation, within a factor of about :math:`e^{\pm 2}`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import xarray as xr
from scipy.linalg import solve_triangular

from bayes_gp._arguments import renamed_argument
from bayes_gp._validation import (
    as_inputs,
    as_targets,
    check_aligned,
    check_jitter,
    f64,
    new_inputs,
)
from bayes_gp.inference import native_gp
from bayes_gp.inference.jitter import DEFAULT_LATENT_JITTER, Jitter, JitterChoice, PreflightJitter
from bayes_gp.inference.native_latent import NativeHetero
from bayes_gp.inference.native_model import kernel_of
from bayes_gp.inference.sampling import NutsRun, NUTSSampling
from bayes_gp.inference.typeii import function_of_values
from bayes_gp.kernels.catalogue import (
    DataScale,
    check_kernel_ard,
    default_prior,
    kernel_formula,
    kernel_spec,
)
from bayes_gp.kernels.lags import gram
from bayes_gp.linalg import jittered_cholesky, plus_diagonal, single_blas_thread
from bayes_gp.predictive import (
    CI_QUANTILES,
    Prediction,
    factorize,
    gaussian_columns,
    gaussian_scores,
    loo_log_density,
    predict,
)
from bayes_gp.priors import resolve_prior
from bayes_gp.protocol import Bands, GPModel, is_nuts
from bayes_gp.solvers.likelihood import marginal_normal

__all__ = ["HeteroscedasticGPRegression"]



class HeteroscedasticGPRegression(PreflightJitter, NUTSSampling, GPModel):
    r"""GP regression whose noise standard deviation is :math:`\exp(g(x))`, ``g`` a latent GP.

    Parameters
    ----------
    X : array_like (n,) or (n, D), or DataFrame
        Inputs. DataFrame column names become the ``feature`` coordinate.
    y : array_like (n,)
        Observations.
    kernel : str, kernel object or callable
        Kernel of :math:`f`: a catalogue name or a sum of products of them, a kernel object or a
        callable (:func:`~bayes_gp.regression.kernel_spec`), hyperparameters named as there
        (``ls``, ``eta``, …).
    noise_kernel : str, kernel object or callable
        Kernel of the log-noise GP :math:`g`, in the same forms; its hyperparameters are
        prefixed ``noise_`` (``noise_ls``, ``noise_eta``, …). Its constant mean is ``noise_mean``.
    ard : bool
        One length-scale per input dimension, for both GPs.
    priors : dict, optional
        Overrides of the default hyperpriors by name (any of :attr:`hyperparameters`): a
        callable ``f(name)``, an unnamed ``pm.X.dist(...)``, or a number that fixes the
        hyperparameter (the forms of :mod:`bayes_gp.priors`).
    jitter : float
        Added to the diagonal of the kernel matrices for numerical safety, relative to each
        GP's prior scale :math:`s^2` (:mod:`bayes_gp.inference.jitter`): :math:`s^2 =
        \operatorname{var}(y)` for :math:`K_f` (absolute ``jitter * var(y)``, as
        :class:`~bayes_gp.GPRegression`), :math:`s^2 = 1` for the log-noise GP's :math:`K_g`
        (its amplitude is O(1) on the log scale: absolute ``jitter``). Default ``1e-6``. The
        pre-flight check (:meth:`check_jitter`) raises the :math:`K_g` jitter where needed:
        ``jitter_g`` (= ``model.jitter``) is its absolute value in use, ``jitter_f`` the
        :math:`K_f` one.

    Attributes
    ----------
    model : pm.Model
        The PyMC model: the hyperparameters, the whitened log-noise latent ``g_rotated_`` and
        ``g`` (a deterministic), and ``y`` with :math:`f` integrated out.
    spec, noise_spec : KernelSpec
        The kernels of :math:`f` and :math:`g`.
    """

    def __init__(
        self,
        X,
        y,
        kernel: Any = "expquad",
        noise_kernel: Any = "expquad",
        *,
        ard: bool = False,
        priors: Mapping[str, Any] | None = None,
        jitter: float = DEFAULT_LATENT_JITTER,
    ):
        check_aligned(X, y)
        X, names = as_inputs(X)
        y = as_targets(y, X.shape[0])
        check_jitter(jitter)
        self.spec = kernel_spec(kernel)
        self.noise_spec = kernel_spec(noise_kernel, arg="noise_kernel")
        check_kernel_ard(self.spec, ard)
        check_kernel_ard(self.noise_spec, ard)
        self.X, self.y, self.feature_names = X, y, names
        self.kernel, self.noise_kernel = kernel, noise_kernel
        self.ard = bool(ard)
        self.mean = None  # constant at the sample mean, as GPRegression's default
        self.noise = None  # learned: exp(g(x))
        self.scale = DataScale.of(X, y)
        # The log-noise GP lives on the log scale: its priors are the catalogue's for unit outputs.
        self.noise_scale = dataclasses.replace(self.scale, y_mean=0.0, y_sd=1.0)
        # one relative jitter: K_f's at scale var(y) (fixed), K_g's at scale 1 (the model's
        # PreflightJitter jitter: checked, raised and saved)
        self._jitter_f = Jitter.of(jitter, self.scale.y_sd**2, DEFAULT_LATENT_JITTER)
        self._init_jitter(jitter, 1.0, DEFAULT_LATENT_JITTER)
        self.priors = dict(priors or {})
        known = {*self.spec.params, *self._noise_names, "noise_mean"}
        unknown = set(self.priors) - known
        if unknown:
            raise ValueError(
                f"`priors` has unknown names {sorted(unknown)}; this model's hyperparameters are "
                f"{[*self.spec.params, *self._noise_names, 'noise_mean']}"
            )
        self.model = self._build()
        self._fns: dict = {}

    # ------------------------------------------------------------------ model
    @property
    def jitter_f(self) -> float:
        """The absolute jitter on :math:`K_f` (``jitter * var(y)``; never raised)."""
        return self._jitter_f.value

    @property
    def jitter_g(self) -> float:
        """The absolute jitter on the log-noise GP's :math:`K_g` in use (:attr:`jitter`)."""
        return self.jitter

    @property
    def default_jitter_g(self) -> float:
        """The log-noise GP's jitter before any pre-flight increase (:attr:`default_jitter`)."""
        return self.default_jitter

    @property
    def _noise_names(self) -> list[str]:
        return [f"noise_{p}" for p in self.noise_spec.params]

    def _prior(self, name: str, scale: DataScale, ard: bool, default=None):
        """The user's prior for ``name`` (any form of :mod:`bayes_gp.priors`), else
        ``default(name)`` or the catalogue's at ``scale``."""
        fallback = default or (lambda n: default_prior(n, scale, ard))
        noise = {f"noise_{p}": v for p, v in self.noise_spec.priors.items()}
        priors = self.spec.priors_with({**noise, **self.priors})
        return resolve_prior(priors, name, fallback, ard=ard)

    def _build(self) -> pm.Model:
        D = self.X.shape[1]
        n = self.X.shape[0]
        s = self.scale
        coords = {"feature": self.feature_names, "obs": np.arange(n)}
        with pm.Model(coords=coords) as model:
            hyper_f = {
                p: self._prior(p, s, self.ard and p in self.spec.ard_params)
                for p in self.spec.params
            }
            hyper_g = {
                p: self._prior(
                    f"noise_{p}", self.noise_scale, self.ard and p in self.noise_spec.ard_params
                )
                for p in self.noise_spec.params
            }
            noise_mean = self._prior(
                "noise_mean",
                s,
                False,
                default=lambda name: pm.Normal(name, mu=f64(np.log(s.y_sd / 3.0)), sigma=f64(1.0)),
            )
            cov_f = self.spec.build(D, hyper_f)
            cov_g = self.noise_spec.build(D, hyper_g)
            mean_f = pm.gp.mean.Constant(f64(s.y_mean))
            mean_g = pm.gp.mean.Constant(noise_mean)
            X = pt.as_tensor_variable(self.X)
            g = pm.gp.Latent(mean_func=mean_g, cov_func=cov_g).prior(
                "g", X=self.X, reparameterize=True, jitter=self.jitter_tensor, dims="obs"
            )
            C = plus_diagonal(gram(cov_f, self.X), self.jitter_f + pt.exp(2.0 * g))
            marginal_normal("y", mean_f(X), C, observed=self.y, dims="obs")  # R&W eq. 5.9 gradient
        self._cov_f, self._cov_g = cov_f, cov_g
        self._native_hyper = {**hyper_f, **{f"noise_{p}": v for p, v in hyper_g.items()},
                              "noise_mean": noise_mean}  # fmt: skip
        native_gp.register(model, self._native_description)
        self._mean_f, self._mean_g = mean_f, mean_g
        names = [*self.spec.params, *self._noise_names, "noise_mean"]
        # a hyperparameter fixed by a number in `priors` is a constant, not a variable
        self._hyper_rvs = [model[name] for name in names if name in model.named_vars]
        return model

    def _native_description(self) -> NativeHetero | None:
        """The model as the C log density of :mod:`bayes_gp.inference.native_latent` computes
        it, or ``None`` where it does not (nutpie compiles it with numba then): catalogue
        kernels or sums of products of them (``native_model.kernel_of``; the C code's own
        checks follow: which parameters, which priors, nothing added to the model)."""
        if type(self) is not HeteroscedasticGPRegression:
            return None
        hyper = self._native_hyper
        kernel = kernel_of(self.spec, hyper)
        noise = kernel_of(self.noise_spec, {p: hyper[f"noise_{p}"] for p in self.noise_spec.params})
        if kernel is None or noise is None:
            return None
        return NativeHetero(
            kernel=kernel,
            noise_kernel=noise,
            X=self.X,
            y=self.y - self.scale.y_mean,
            jitter_f=float(self.jitter_f),
            jitter_g=float(self.jitter_tensor.get_value()),
            noise_mean=hyper["noise_mean"],
            z=self.model["g_rotated_"],
            g=self.model["g"],
        )

    @property
    def hyperparameters(self) -> list[str]:
        """Names of the hyperparameters (kernel of ``f``, then the log-noise GP's)."""
        return [rv.name for rv in self._hyper_rvs]

    @single_blas_thread
    def check_jitter(self, random_seed: int | None = None) -> JitterChoice:
        """Pre-flight Cholesky check (:func:`bayes_gp.inference.jitter.preflight`) of the
        log-noise GP: factorise :math:`K_g + \\nu I` (which the whitened latent ``g`` needs at
        every step) at the initial point and at prior draws, raise :math:`\\nu` until all succeed
        and set the model's shared jitter to it (the model stays the same object).
        (:math:`K_f + \\operatorname{diag}(e^{2g})` has the positive noise variances on its
        diagonal.)

        Raises
        ------
        NotPSDError
            When even a jitter of 1e-4 times the mean diagonal fails, with advice.
        """
        empty = np.zeros((0, self.X.shape[1]))
        return self._preflight(
            self._hyper_rvs,
            lambda values: self._grams(values, empty)[5],
            "a smoother noise kernel (larger length-scale prior)",
            random_seed,
        )

    # --------------------------------------------------------------- sampling
    def _nuts_run(self, sampler, random_seed) -> NutsRun:
        """:meth:`sample` runs NUTS over the hyperparameters and the whitened log-noise latent
        ``g``, after the jitter pre-flight of :math:`K_g` (:meth:`check_jitter`)."""
        return NutsRun(self.model, attrs=self.check_jitter(random_seed).attrs())

    def _nuts_result(self, idata, run: NutsRun, random_seed):
        r"""The posterior gains ``f`` drawn from :math:`p(f \mid y, g, \theta)` for each draw,
        and a pointwise ``log_likelihood`` group holds :math:`\log p(y_i \mid y_{-i}, g,
        \theta)` per draw (PSIS-LOO terms), :meth:`_add_latent_f`."""
        return self._add_latent_f(idata, np.random.default_rng(random_seed))

    @single_blas_thread
    def _add_latent_f(self, idata, rng):
        """Add the draws of ``f`` and the ``log_likelihood`` group to the sampler's output."""
        post = idata["posterior"]
        arrays = [np.asarray(post[name]) for name in self.hyperparameters]
        g_all = np.asarray(post["g"])
        n_chain, n_draw, n = g_all.shape
        f_all = np.empty_like(g_all)
        ll = np.empty_like(g_all)
        empty = np.zeros((0, self.X.shape[1]))
        for c in range(n_chain):
            for d in range(n_draw):
                g = g_all[c, d]
                Kf, _, _, m, _, *_ = self._grams([a[c, d] for a in arrays], empty)
                fac = factorize(Kf + np.diag(np.exp(2.0 * g)), self.y - m)
                ll[c, d] = loo_log_density(fac)
                # f | y, g, theta ~ N(m + K a, K - K C^-1 K) (R&W eqs. 2.23-2.24)
                V = solve_triangular(fac.L, Kf, lower=True, check_finite=False)
                L, _ = jittered_cholesky(Kf - V.T @ V)
                f_all[c, d] = m + Kf @ fac.alpha + L @ rng.standard_normal(n)
        dims = ("chain", "draw", "obs")
        idata["posterior"] = post.to_dataset().assign(f=(dims, f_all))
        idata["log_likelihood"] = xr.Dataset(
            {"y": (dims, ll)},
            coords={
                "chain": post["chain"].values,
                "draw": post["draw"].values,
                "obs": np.arange(n),
            },
        )
        return idata

    # ------------------------------------------------------------- prediction
    def _check_new(self, X_new) -> np.ndarray:
        return new_inputs(X_new, self.X.shape[1], self.feature_names)

    def _grams(self, values, Xn):
        """``(K_f + j I, K_f(X, Xn), diag K_f(Xn), m_f(X), m_f(Xn))`` and the same for ``g``, at
        the hyperparameter ``values`` (the model's own kernel graphs)."""
        if "grams" not in self._fns:
            X = pt.as_tensor_variable(self.X)
            n = self.X.shape[0]

            def build(Xv):
                out = []
                for cov, mean, jit in (
                    (self._cov_f, self._mean_f, self.jitter_f),
                    (self._cov_g, self._mean_g, self.jitter_tensor),
                ):
                    out += [
                        plus_diagonal(cov(X), jit),
                        cov(X, Xv),
                        cov(Xv, diag=True),
                        pt.as_tensor_variable(mean(X)) * pt.ones(n),
                        pt.as_tensor_variable(mean(Xv)) * pt.ones(Xv.shape[0]),
                    ]
                return out

            self._fns["grams"] = function_of_values(self._hyper_rvs, build)
        return self._fns["grams"](*values, Xn)

    def _draws(self, idata, max_draws: int | None, seed: int):
        """Per posterior draw ``(hyperparameter values, g)``, at most ``max_draws`` of them."""
        try:
            post = idata["posterior"]
        except (KeyError, TypeError):
            raise ValueError(
                "`idata` must be the ArviZ data returned by `.sample()` (with a posterior group)"
            ) from None
        names = [*self.hyperparameters, "g"]
        missing = [name for name in names if name not in post]
        if missing:
            raise ValueError(f"`idata` has no posterior draws of {missing}")
        stacked = {}
        for name in names:
            a = np.asarray(post[name])
            stacked[name] = a.reshape((-1, *a.shape[2:]))
        total = stacked["g"].shape[0]
        idx = np.arange(total)
        if max_draws is not None and total > max_draws:
            idx = np.sort(np.random.default_rng(seed).choice(total, max_draws, replace=False))
        return [([stacked[h][i] for h in self.hyperparameters], stacked["g"][i]) for i in idx]

    def _latent_at(self, Xn, idata, max_draws: int, seed: int):
        """Per draw, mean and variance of :math:`f_* \\mid y, g, \\theta` and of
        :math:`g_* \\mid g, \\theta` (arrays ``(S, m)``)."""
        mf, vf, mg, vg = [], [], [], []
        for values, g in self._draws(idata, max_draws, seed):
            Kf, Ksf, kssf, m_f, ms_f, Kg, Ksg, kssg, m_g, ms_g = self._grams(values, Xn)
            # f*: GP regression with noise covariance diag(exp(2g)) (R&W eqs. 2.25-2.26)
            a, b = predict(factorize(Kf + np.diag(np.exp(2.0 * g)), self.y - m_f), Ksf, kssf)
            mf.append(ms_f + a)
            vf.append(b)
            # g*: noise-free conditional of the log-noise GP given its values at X
            a, b = predict(factorize(Kg, g - m_g), Ksg, kssg)
            mg.append(ms_g + a)
            vg.append(b)
        return np.array(mf), np.array(vf), np.array(mg), np.array(vg)

    @single_blas_thread
    @renamed_argument("seed", "random_seed")
    def predict(
        self,
        X_new,
        idata,
        include_noise: bool = False,
        *,
        max_draws: int = 500,
        n_per_draw: int = 4,
        random_seed: int = 0,
    ) -> Prediction:
        r"""Predictive distribution of :math:`f_*` (or of :math:`y_*` with ``include_noise``).

        Given a posterior draw :math:`(\theta, g)`, :math:`f_*` is Gaussian with the GP-regression
        mean and variance for noise covariance :math:`\operatorname{diag}(e^{2g})` (R&W eqs.
        2.25–2.26), :math:`g_* \mid g` is the noise-free Gaussian conditional of the log-noise
        GP, and :math:`y_* = f_* + e^{g_*}\varepsilon`, so

        .. math::
           E[y_* \mid \text{draw}] = \bar f_*, \qquad
           V[y_* \mid \text{draw}] = V[f_*] + \exp(2\bar g_* + 2 V[g_*]).

        The draws are mixed by the laws of total expectation and variance; the 94% interval
        comes from ``n_per_draw`` predictive draws per posterior draw.

        Parameters
        ----------
        X_new : array_like (m,) or (m, D)
        idata : DataTree
            The output of :meth:`sample`.
        include_noise : bool
            Predict the observations :math:`y_*` rather than the latent :math:`f_*`.
        max_draws : int
            At most this many posterior draws (a fixed random subset).
        n_per_draw : int
            Predictive draws per posterior draw, for the interval.
        random_seed : int
            Seed of the subset of draws and of the predictive draws.
        """
        Xn = self._check_new(X_new)
        latent = self._latent_at(Xn, idata, max_draws, random_seed)
        return self._mixture(*latent, include_noise, n_per_draw, random_seed)

    @staticmethod
    def _mixture(mf, vf, mg, vg, include_noise: bool, n_per_draw: int, seed: int) -> Prediction:
        """:meth:`predict` from the per-draw moments of :meth:`_latent_at`."""
        rng = np.random.default_rng(seed)
        S, m = mf.shape
        ys = mf[:, None] + np.sqrt(vf)[:, None] * rng.standard_normal((S, n_per_draw, m))
        if include_noise:
            var_d = vf + np.exp(2.0 * mg + 2.0 * vg)
            gs = mg[:, None] + np.sqrt(vg)[:, None] * rng.standard_normal((S, n_per_draw, m))
            ys = ys + np.exp(gs) * rng.standard_normal((S, n_per_draw, m))
        else:
            var_d = vf
        mean = mf.mean(axis=0)
        var = var_d.mean(axis=0) + mf.var(axis=0)  # law of total variance
        lower, upper = np.quantile(ys.reshape(-1, m), CI_QUANTILES, axis=0)
        return Prediction(mean, var, None, lower, upper, {"n_draws": S})

    @single_blas_thread
    @renamed_argument("seed", "random_seed")
    def noise_sd(
        self, X_new, idata, *, max_draws: int = 500, n_per_draw: int = 4, random_seed: int = 0
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r"""Posterior of the noise standard deviation :math:`e^{g(x_*)}` at ``X_new``.

        Returns
        -------
        mean : ndarray (m,)
            :math:`E[e^{g_*}]`, with :math:`E[e^{g_*} \mid \text{draw}] = \exp(\bar g_* + V[g_*]/2)`
            averaged over the draws.
        lower, upper : ndarray (m,)
            Central 94% interval from draws of :math:`g_* \mid g`.
        """
        Xn = self._check_new(X_new)
        _, _, mg, vg = self._latent_at(Xn, idata, max_draws, random_seed)
        return self._noise_from(mg, vg, n_per_draw, random_seed)

    @staticmethod
    def _noise_from(mg, vg, n_per_draw: int, seed: int):
        """:meth:`noise_sd` from the per-draw moments of :math:`g_*`."""
        rng = np.random.default_rng(seed)
        S, m = mg.shape
        gs = mg[:, None] + np.sqrt(vg)[:, None] * rng.standard_normal((S, n_per_draw, m))
        lower, upper = np.quantile(np.exp(gs).reshape(-1, m), CI_QUANTILES, axis=0)
        return np.exp(mg + vg / 2.0).mean(axis=0), lower, upper

    @single_blas_thread
    @renamed_argument("seed", "random_seed")
    def predictive_bands(
        self, X_new, idata, *, max_draws: int = 500, n_per_draw: int = 4, random_seed: int = 0
    ) -> tuple[Prediction, Prediction, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """``(predict(X_new, idata), predict(X_new, idata, include_noise=True),
        noise_sd(X_new, idata))`` with the same arguments, from one pass over the posterior
        draws: the same numbers in a third of the time.
        """
        Xn = self._check_new(X_new)
        mf, vf, mg, vg = self._latent_at(Xn, idata, max_draws, random_seed)
        return (
            self._mixture(mf, vf, mg, vg, False, n_per_draw, random_seed),
            self._mixture(mf, vf, mg, vg, True, n_per_draw, random_seed),
            self._noise_from(mg, vg, n_per_draw, random_seed),
        )

    @renamed_argument("seed", "random_seed")
    def posterior_predictive(
        self, idata, n_draws: int | None = None, *, random_seed: int = 0
    ) -> np.ndarray:
        r"""Replicated data sets at the training inputs, :math:`y^{rep} = f + e^{g}\varepsilon`.

        One replicate per posterior draw of :math:`(f, g)`, with :math:`f` the exact draw from
        :math:`p(f \mid y, g, \theta)` that :meth:`sample` stored and :math:`\varepsilon \sim
        N(0, I)` (the posterior predictive of the observations, as in a posterior predictive
        check).

        Parameters
        ----------
        idata : DataTree
            The output of :meth:`sample` (posterior ``f`` and ``g``).
        n_draws : int, optional
            At most this many posterior draws (a fixed random subset); all of them by default.
        random_seed : int
            Seed of the subset and of :math:`\varepsilon`.

        Returns
        -------
        ndarray (S, n)
            One replicated data set per row.
        """
        try:
            post = idata["posterior"]
        except (KeyError, TypeError):
            raise ValueError(
                "`idata` must be the ArviZ data returned by `.sample()` (with a posterior group)"
            ) from None
        missing = [name for name in ("f", "g") if name not in post]
        if missing:
            raise ValueError(f"`idata` has no posterior draws of {missing}")
        if n_draws is not None and int(n_draws) < 1:
            raise ValueError(f"`n_draws` must be a positive integer or None, got {n_draws!r}")
        n = self.X.shape[0]
        f = np.asarray(post["f"], float).reshape(-1, n)
        g = np.asarray(post["g"], float).reshape(-1, n)
        rng = np.random.default_rng(random_seed)
        idx = np.arange(f.shape[0])
        if n_draws is not None and f.shape[0] > n_draws:
            idx = np.sort(rng.choice(f.shape[0], n_draws, replace=False))
        return f[idx] + np.exp(g[idx]) * rng.standard_normal((idx.size, n))

    # ------------------------------------------------------------ model protocol
    fit_methods = ("nuts",)
    bands_note = (
        "below, the noise standard deviation exp(g(x)) with its 94% band, and the absolute "
        "residuals |y − E[f(x)]| of the data (for Gaussian noise about 68% of them lie below the "
        "noise sd, 95% below twice it)"
    )

    @property
    def label(self) -> str:
        return f"{self.spec.name}, noise GP {self.noise_spec.name}"

    @property
    def observed(self) -> np.ndarray:
        return self.y

    def describe(self) -> list[tuple[str, object]]:
        """Kernel of f, likelihood, the log-noise GP and its kernel, and the data size."""
        spec, noise = self.spec, self.noise_spec
        names = ", ".join(f"noise_{p}" for p in noise.params)
        ard = " (ARD)" if self.ard else ""
        return [
            ("model", repr(self)),
            ("kernel of f", spec.name + ard),
            ("kernel formula", kernel_formula(spec)),
            ("equation", spec.equation or "–"),
            (
                "likelihood",
                "Gaussian with input-dependent noise: y_i ~ N(f(x_i), exp(g(x_i))²) "
                "independently; f integrated out given g: y ~ N(m, K_f + diag(exp(2g)))",
            ),
            ("mean function", "constant at the sample mean"),
            ("noise", "learned: sd exp(g(x)), g a latent GP (log noise sd)"),
            (
                "noise GP",
                "g ~ GP(noise_mean, k_g), whitened (g = noise_mean + L_g z_g); "
                f"jitter {self.jitter_g:g}",
            ),
            ("noise GP kernel", noise.name + ard),
            ("noise GP kernel formula", f"{kernel_formula(noise)}  (hyperparameters {names})"),
            ("noise GP equation", noise.equation or "–"),
            (
                "posterior latents",
                "g sampled by NUTS; f drawn exactly from p(f | y, g, θ) for each draw",
            ),
            ("observations n", self.X.shape[0]),
            ("input dimensions D", self.X.shape[1]),
            ("inputs", ", ".join(self.feature_names)),
        ]

    def fit(self, method: str = "nuts", **options):
        """``"nuts"`` (:meth:`sample`): the latent log-noise GP has no type-II fit here."""
        if method != "nuts":
            raise ValueError(
                f"HeteroscedasticGPRegression fits by NUTS only ('nuts'), not {method!r}: its "
                "latent log-noise GP is sampled"
            )
        return self.sample(**options)

    def check_fit(self, fit) -> None:
        if not is_nuts(fit):
            raise TypeError(
                "a HeteroscedasticGPRegression fit is the ArviZ DataTree from sample(), got "
                f"{type(fit).__name__}"
            )

    def ppc_caption(self, n_draws: int) -> str:
        return (
            f"Observed data vs {n_draws} replicated data sets y_rep = f + exp(g) ε, (f, g) "
            "from the posterior draws"
        )

    @renamed_argument("seed", "random_seed")
    def replicate(self, fit, n_draws: int, random_seed: int = 0) -> np.ndarray:
        return self.posterior_predictive(fit, n_draws, random_seed=random_seed)

    def bands(self, grid, fit) -> Bands:
        grid = np.asarray(grid, float).ravel()
        pred_f, pred_y, noise = self.predictive_bands(grid[:, None], fit)
        f = np.asarray(fit["posterior"]["f"], float).reshape(-1, self.X.shape[0])
        return Bands("regression", self.X[:, 0], self.y, grid, pred_f.mean, pred_f.lower,
                     pred_f.upper, pred_y.lower, pred_y.upper, noise=noise,
                     residuals=np.abs(self.y - f.mean(axis=0)))  # fmt: skip

    def prediction_columns(self, X_new, fit) -> dict[str, np.ndarray]:
        """Those of :class:`GPRegression` and the posterior mean of the noise sd."""
        pred_f, pred_y, noise = self.predictive_bands(X_new, fit)
        return {**gaussian_columns(pred_f, pred_y), "noise_sd": noise[0]}

    def scores(self, y, columns) -> dict[str, float]:
        return gaussian_scores(y, columns)

    def restore_fit(self, method: str, params: dict, attrs: dict):
        raise TypeError("HeteroscedasticGPRegression has NUTS fits only: no type-II fit to restore")

    def point_loo(self, fit) -> tuple[str, np.ndarray]:
        raise TypeError(
            "HeteroscedasticGPRegression has NUTS fits only; their PSIS-LOO comes from the "
            "log_likelihood group"
        )

    def __repr__(self) -> str:
        return (
            f"HeteroscedasticGPRegression(n={self.X.shape[0]}, D={self.X.shape[1]}, "
            f"kernel={self.spec.name!r}, noise_kernel={self.noise_spec.name!r}, ard={self.ard})"
        )
