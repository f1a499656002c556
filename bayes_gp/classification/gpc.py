r"""Binary GP classification with a latent GP and a sigmoid link (PRML §6.4.5, R&W ch. 3).

.. math::
   f \sim GP(0, k_\theta), \qquad p(y = +1 \mid f) = \sigma(f),

with :math:`\sigma` the logistic or the probit function. The predictive probability
:math:`\int \sigma(f_*) p(f_* \mid X, y, x_*) df_*` is intractable (R&W §3.3, PRML §6.4.5): it is computed by
Monte Carlo over NUTS draws (:meth:`GPClassifier.sample`), or from a Gaussian approximation of the
latent posterior, Laplace (:meth:`GPClassifier.fit_laplace`) or EP (:meth:`GPClassifier.fit_ep`),
whose hyperparameters are fitted by type-II maximisation of the approximate evidence.

``sample(method="laplace")`` runs NUTS over the hyperparameters with the latent GP integrated out
by the Laplace approximation at every step: that is :class:`~bayes_gp.latent.LatentGP` with the
Bernoulli likelihood, the same kernel, link, priors and jitter, which this class builds and
delegates to (its draws, predictions and LA-LOO terms are the latent model's).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pytensor.graph.replace import graph_replace
from scipy.linalg import cho_solve, solve_triangular
from scipy.special import expit, log_ndtr, ndtr

from bayes_gp._validation import (
    as_inputs,
    check_aligned,
    check_jitter,
    f64,
    hyperparameter_values,
    new_inputs,
)
from bayes_gp.classification.approx import ep_grad, ep_run, laplace_grad, laplace_mode
from bayes_gp.classification.likelihoods import LINKS, average_probability, log_lik_derivatives
from bayes_gp.inference.jitter import JitterChoice, PreflightJitter
from bayes_gp.inference.typeii import (
    function_of_values,
    multistart,
    prior_starts,
    raveler,
    restarts_table,
    warn_unconverged,
)
from bayes_gp.latent.model import LatentGP
from bayes_gp.linalg import EAGER_MODE, jittered_cholesky, single_blas_thread
from bayes_gp.predictive import JitterWarning, binary_scores
from bayes_gp.priors import resolve_prior
from bayes_gp.protocol import Bands, GPModel, PointFit, is_nuts
from bayes_gp.regression.catalogue import DataScale, default_prior, kernel_formula, kernel_spec

__all__ = ["GPClassifier", "ClassifierFit"]

#: A type-II latent amplitude above this warns: separable data drive it to infinity.
ETA_WARN = 100.0


def _component_derivatives(K, variables, shapes) -> list:
    r""":math:`\partial K / \partial v_j` for every scalar component ``j`` of each variable
    (forward-mode, one pushforward per component), in order."""
    dKs = []
    for v, shape in zip(variables, shapes, strict=True):
        size = int(np.prod(shape, dtype=int))
        for j in range(size):
            e = np.zeros(size)
            e[j] = 1.0
            dKs.append(pytensor.gradient.pushforward(K, v, pt.constant(e.reshape(shape))))
    return dKs


@dataclass(frozen=True)
class ClassifierFit(PointFit):
    """A Laplace or EP approximation with type-II hyperparameters.

    Attributes
    ----------
    method : {"laplace", "ep"}
    params : dict
        Kernel hyperparameters by name.
    log_marginal_likelihood : float
        Approximate log evidence: :math:`\\log q(y \\mid X, \\theta)` (Laplace, R&W eq. 3.32) or
        :math:`\\log Z_{EP}` (R&W eq. 3.65).
    objective : float
        Maximised objective (the approximate evidence, plus the log prior when ``prior=True``).
    restarts : list of Restart
    grad_norm : float
    state : LaplaceState or EPState
    jitter : float
        The latent-GP jitter on the diagonal of :math:`K` during the fit (NaN: not recorded).
    """

    method: str
    params: dict
    log_marginal_likelihood: float
    objective: float
    prior: bool
    state: Any
    restarts: list = field(default_factory=list)
    grad_norm: float = float("nan")
    seconds: float = float("nan")
    jitter: float = float("nan")

    evidence_name = "approximate log evidence"

    @property
    def converged(self) -> bool:
        """The approximation converged at the reported hyperparameters and, for a type-II fit,
        the best restart's optimiser did (:func:`~bayes_gp.inference.typeii.multistart`)."""
        inner = bool(getattr(self.state, "converged", True))
        return inner and (bool(self.restarts[0].converged) if self.restarts else True)

    @property
    def method_label(self) -> str:
        return ("EP" if self.method == "ep" else "Laplace") + (" MAP" if self.prior else "")

    @property
    def method_description(self) -> str:
        what = f"{'EP' if self.method == 'ep' else 'Laplace'} approximation, type-II"
        return what + (" with priors" if self.prior else "")


class GPClassifier(PreflightJitter, GPModel):
    """Binary classifier with a latent GP, declared as a PyMC model.

    Parameters
    ----------
    X : array_like (n,) or (n, D), or DataFrame
    y : array_like (n,)
        Two distinct labels (0/1, bool, strings, …); the larger (sorted) one is the positive class.
    kernel : str
        Catalogue name (``"expquad"``, ``"matern52"``, …; see ``bayes_gp.regression.KERNELS``)
        or a sum of products of them (:func:`~bayes_gp.regression.kernel_spec`).
    link : {"logit", "probit"}
    ard : bool
        One length-scale per input.
    priors : dict, optional
        Overrides of the default hyperpriors, by name: a callable ``f(name)``, an unnamed
        ``pm.X.dist(...)``, or a number that fixes the hyperparameter (the forms of
        :mod:`bayes_gp.priors`). The default amplitude prior is
        :math:`\\eta \\sim \\mathrm{HalfNormal}(2)` (latent scale of a sigmoid).
    jitter : float
        The latent-GP jitter :math:`\\nu` added to the diagonal of :math:`K` (PRML §6.4.5).
        :meth:`sample` first factorises :math:`K + \\nu I` at the initial point and at prior
        draws and raises :math:`\\nu` tenfold until that succeeds
        (:mod:`bayes_gp.inference.jitter`); the value used is recorded in the posterior.
    """

    def __init__(
        self,
        X,
        y,
        kernel: str = "expquad",
        *,
        link: str = "logit",
        ard: bool = False,
        priors: Mapping[str, Any] | None = None,
        jitter: float = 1e-6,
    ):
        check_aligned(X, y)
        X, names = as_inputs(X)
        labels = np.asarray(getattr(y, "to_numpy", lambda: y)())
        if labels.ndim != 1:
            raise ValueError(f"`y` must be 1-D, got shape {labels.shape}")
        if labels.shape[0] != X.shape[0]:
            raise ValueError(f"`X` has {X.shape[0]} rows but `y` has {labels.shape[0]} labels")
        if labels.dtype.kind == "f" and not np.all(np.isfinite(labels)):
            raise ValueError("`y` contains NaN or infinite values")
        if labels.dtype.kind == "O" and any(v is None for v in labels):
            raise ValueError("`y` contains missing labels (None)")
        classes = np.unique(labels)
        if classes.size != 2:
            what = "only one class" if classes.size == 1 else f"{classes.size} distinct labels"
            raise ValueError(f"`y` must contain exactly two classes, got {what}")
        if link not in LINKS:
            raise ValueError(f"`link` must be one of {LINKS}, got {link!r}")
        self.spec = kernel_spec(kernel, exclude=("prml",))
        self.kernel = kernel
        self.X, self.feature_names = X, names
        self.classes_ = classes
        self.t = (labels == classes[1]).astype(int)
        self.y_pm = 2.0 * self.t - 1.0
        self.link = link
        self.ard = bool(ard)
        self.priors = dict(priors or {})
        unknown = set(self.priors) - set(self.spec.params)
        if unknown:
            raise ValueError(f"`priors` has unknown names {sorted(unknown)}")
        self.jitter = check_jitter(jitter)
        #: the jitter before any pre-flight increase
        self.default_jitter = self.jitter
        self.scale = DataScale.of(X, self.y_pm)
        self.model = self._build()
        self._fns: dict = {}
        self._bernoulli_gp: LatentGP | None = None

    @property
    def latent_gp(self) -> LatentGP:
        """The same model as a :class:`~bayes_gp.latent.LatentGP` (Bernoulli likelihood, zero
        mean, this kernel, link, priors and jitter): the Laplace-inside-NUTS path runs on it."""
        if self._bernoulli_gp is None:
            import pandas as pd

            X = pd.DataFrame(self.X, columns=self.feature_names)
            self._bernoulli_gp = LatentGP(
                X, self.t, self.kernel, "bernoulli", link=self.link, ard=self.ard,
                priors=self.priors, jitter=self.jitter,
            )  # fmt: skip
        return self._bernoulli_gp

    def set_jitter(self, jitter: float) -> None:
        """Use the absolute latent jitter of a saved fit, in this model and in :attr:`latent_gp`."""
        super().set_jitter(jitter)
        if self._bernoulli_gp is not None:
            self._bernoulli_gp.set_jitter(jitter)

    @staticmethod
    def _is_laplace_draws(fit) -> bool:
        """NUTS draws of :meth:`sample` with ``method="laplace"`` (no latent ``f``)."""
        return is_nuts(fit) and fit["posterior"].attrs.get("bayes_gp_method") == "laplace"

    @single_blas_thread
    def check_jitter(self, random_seed: int | None = None) -> JitterChoice:
        """Pre-flight Cholesky check (:func:`bayes_gp.inference.jitter.preflight`): factorise
        :math:`K + \\nu I` at the initial point and at prior draws of the hyperparameters, raise
        :math:`\\nu` until all succeed and rebuild the model with it.

        Raises
        ------
        NotPSDError
            When even a jitter of 1e-4 times the mean diagonal fails, with advice.
        """
        empty = np.zeros((0, self.X.shape[1]))
        return self._preflight(
            self._hyper_rvs,
            lambda values: self._grams(values, empty)[0],
            self.default_jitter,
            "latent jitter",
            random_seed,
        )

    # ------------------------------------------------------------------ model
    def _build(self) -> pm.Model:
        D = self.X.shape[1]
        coords = {"feature": self.feature_names, "obs": np.arange(self.X.shape[0])}
        with pm.Model(coords=coords) as model:
            hyper = {}
            for p in self.spec.params:
                ard = self.ard and p in self.spec.ard_params
                hyper[p] = resolve_prior(self.priors, p, self._default_prior(ard), ard=ard)
            cov = self.spec.build(D, hyper)
            f = pm.gp.Latent(cov_func=cov).prior(
                "f", X=self.X, reparameterize=True, jitter=self.jitter, dims="obs"
            )
            if self.link == "logit":
                pm.Bernoulli("y", logit_p=f, observed=self.t, dims="obs")
            else:
                pm.Bernoulli("y", p=pm.math.invprobit(f), observed=self.t, dims="obs")
        self._cov = cov
        # a hyperparameter fixed by a number in `priors` is a constant, not a variable
        self._hyper_rvs = [model[p] for p in self.spec.params if p in model.named_vars]
        return model

    def _default_prior(self, ard: bool):
        """The latent amplitude's prior is HalfNormal(2) (the scale of a sigmoid's argument);
        the others are the catalogue's, scaled to the inputs."""

        def default(p):
            if p.rsplit("_", 1)[-1] == "eta":
                return pm.HalfNormal(p, sigma=f64(2.0))
            return default_prior(p, self.scale, ard)

        return default

    @property
    def hyperparameters(self) -> list[str]:
        return [rv.name for rv in self._hyper_rvs]

    def _at_values(self, key: str, build):
        """Compile ``build(Xn)`` as a function of ``(hyperparameter values..., Xn)`` (cached)."""
        if key not in self._fns:
            self._fns[key] = function_of_values(self._hyper_rvs, build)
        return self._fns[key]

    def _grams(self, values, Xn):
        X = pt.as_tensor_variable(self.X)
        n = self.X.shape[0]

        def build(Xv):
            return [
                self._cov(X) + self.jitter * pt.eye(n),
                self._cov(X, Xv),
                self._cov(Xv, diag=True),
            ]

        return self._at_values("grams", build)(*values, Xn)

    def _values(self, params: Mapping[str, Any]) -> list[np.ndarray]:
        return hyperparameter_values(self.model, self._hyper_rvs, params, self._fns)

    # ------------------------------------------------------------ type-II fits
    def _objective_fn(self, prior: bool):
        """Compiled ``v -> (K, dK/dv_j ..., log prior, d log prior/dv)`` in unconstrained space."""
        key = ("objective", prior)
        if key in self._fns:
            return self._fns[key]
        model = self.model
        vv = [model.rvs_to_values[rv] for rv in self._hyper_rvs]
        n = self.X.shape[0]
        (K,) = model.replace_rvs_by_values([self._cov(pt.as_tensor_variable(self.X))])
        K = K + self.jitter * pt.eye(n)
        point = model.initial_point()
        dKs = _component_derivatives(K, vv, [np.shape(point[v.name]) for v in vv])
        lp = model.logp(vars=self._hyper_rvs, jacobian=False) if prior else pt.zeros(())
        dlp = pytensor.grad(lp, vv, disconnected_inputs="ignore")
        fn = pytensor.function(vv, [K, *dKs, lp, *dlp], mode=EAGER_MODE)
        constrained = pytensor.function(
            vv, model.replace_rvs_by_values(self._hyper_rvs), mode=EAGER_MODE
        )
        self._fns[key] = (vv, fn, constrained, len(dKs))
        return self._fns[key]

    def _approximate(self, method: str, K: np.ndarray, warm=None):
        if method == "laplace":
            return laplace_mode(K, self.y_pm, self.link, f0=warm)
        return ep_run(K, self.y_pm)

    def _warn_unconverged(self, method: str, state) -> None:
        if not state.converged:
            what = (
                f"Newton iterations for the Laplace mode stopped after {state.n_iter}"
                if method == "laplace"
                else f"EP stopped after {state.n_sweeps} sweeps"
            )
            warnings.warn(
                f"{what} without converging; the approximation, its log evidence and the "
                "predictions are unreliable. This happens at extreme hyperparameters (a huge "
                "latent amplitude eta, nearly separable classes): use prior=True, fixed params=, "
                "or NUTS (sample)",
                RuntimeWarning,
                stacklevel=4,
            )

    def _fit(self, method, n_restarts, prior, random_seed, params, maxiter) -> ClassifierFit:
        t0 = time.perf_counter()
        if method == "ep" and self.link != "probit":
            raise ValueError(
                "EP is implemented for the probit link only (its tilted moments are closed-form); "
                "use link='probit', or the Laplace approximation / NUTS for the logit link"
            )
        if params is None and not self._hyper_rvs:  # every hyperparameter fixed in `priors`
            params = {}
        if params is not None:
            values = self._values(params)
            K, _, _ = self._grams(values, np.zeros((0, self.X.shape[1])))
            state = self._approximate(method, K)
            self._warn_unconverged(method, state)
            return ClassifierFit(
                method,
                dict(zip(self.hyperparameters, values, strict=True)),
                state.log_evidence,
                state.log_evidence,
                False,
                state,
                seconds=time.perf_counter() - t0,
                jitter=self.jitter,
            )
        vv, fn, constrained, n_grad = self._objective_fn(prior)
        names = [v.name for v in vv]
        _, unravel = raveler(self.model, names)

        cache: dict = {}

        def neg(x):
            out = fn(*unravel(x))
            K, dK, lp, dlp = out[0], out[1 : 1 + n_grad], out[1 + n_grad], out[2 + n_grad :]
            if not np.all(np.isfinite(K)):  # an optimiser step overflowed the kernel
                return np.inf, np.zeros_like(x)
            try:
                with np.errstate(all="ignore"):
                    state = self._approximate(
                        method, K, cache.get("f") if method == "laplace" else None
                    )
            except (np.linalg.LinAlgError, ValueError):
                # a non-PD B or non-finite values (scipy's check_finite raises ValueError) at
                # an extreme optimiser step: infeasible, so L-BFGS-B backtracks
                return np.inf, np.zeros_like(x)
            if not (
                state.converged
                and np.all(np.isfinite(state.f if method == "laplace" else state.mu))
            ):
                return np.inf, np.zeros_like(x)
            grad = laplace_grad(state, K, dK) if method == "laplace" else ep_grad(state, K, dK)
            grad = grad + np.concatenate([np.ravel(g) for g in dlp])
            if method == "laplace":
                cache["f"] = state.f
            cache["state"] = state
            obj = state.log_evidence + float(lp)
            if not np.isfinite(obj):
                return np.inf, np.zeros_like(x)
            return -obj, -grad

        def to_params(x):
            return {
                n: np.asarray(v).copy()
                for n, v in zip(self.hyperparameters, constrained(*unravel(x)), strict=True)
            }

        rng = np.random.default_rng(random_seed)
        starts = prior_starts(self.model, names, n_restarts, rng)
        results = []
        for x0 in starts:  # each restart starts its Newton iterations from f = 0
            cache.clear()
            results += multistart(neg, [x0], maxiter=maxiter, gtol=1e-6)
        results.sort(key=lambda r: r[0].fun)
        best = results[0][0]
        warn_unconverged(best, f"type-II {method} fit", stacklevel=4)
        cache.clear()
        _, g = neg(best.x)
        if "state" not in cache:  # every restart ended infeasible
            raise RuntimeError(
                f"type-II {method} fit failed: the approximation broke down at every restart's "
                "end point (non-finite values or no convergence). Rescale the inputs, use "
                "prior=True, or fix the hyperparameters with params="
            )
        state = cache["state"]
        restarts = restarts_table(results, to_params)
        params = to_params(best.x)
        eta = [np.max(v) for k, v in params.items() if k.rsplit("_", 1)[-1] == "eta"]
        if eta and max(eta) > ETA_WARN:
            warnings.warn(
                f"type-II {method} fit: latent amplitude eta = {max(eta):.3g}. The approximate "
                "evidence keeps growing with the latent scale, as it does for (nearly) separable "
                "classes, and the optimum may be at infinity: use prior=True (MAP), NUTS "
                "(sample), or fixed hyperparameters (params=...)",
                RuntimeWarning,
                stacklevel=3,
            )
        return ClassifierFit(
            method,
            params,
            state.log_evidence,
            -float(best.fun),
            bool(prior),
            state,
            restarts,
            float(np.linalg.norm(g)),
            time.perf_counter() - t0,
            jitter=self.jitter,
        )

    def _gram_and_derivatives(self):
        """Compiled ``θ values (natural scale)... -> (K + jitter I, ∂K/∂θ_j for every scalar
        component j)``."""
        if "gram_grad" in self._fns:
            return self._fns["gram_grad"]
        holders = [rv.type() for rv in self._hyper_rvs]
        n = self.X.shape[0]
        K = self._cov(pt.as_tensor_variable(self.X)) + self.jitter * pt.eye(n)
        K = graph_replace(K, dict(zip(self._hyper_rvs, holders, strict=True)), strict=False)
        point = self.model.initial_point()
        shapes = [np.shape(point[self.model.rvs_to_values[rv].name]) for rv in self._hyper_rvs]
        dKs = _component_derivatives(K, holders, shapes)
        fn = pytensor.function(holders, [K, *dKs], mode=EAGER_MODE, on_unused_input="ignore")
        self._fns["gram_grad"] = fn
        return fn

    @single_blas_thread
    def log_marginal_likelihood(
        self, params: Mapping[str, Any], *, eval_gradient: bool = False, method: str = "laplace"
    ):
        r"""The approximate log evidence at given hyperparameters: :math:`\log q(y \mid \theta)`
        of the Laplace approximation (R&W eq. 3.32) or :math:`\log Z_{EP}` (R&W eq. 3.65, probit
        link), as scikit-learn's ``GaussianProcessClassifier.log_marginal_likelihood``.

        With ``eval_gradient=True``: ``(value, grad)``, ``grad`` a dict name → array of the
        derivatives with respect to each hyperparameter on its own scale (R&W Algorithm 5.1 /
        eq. 5.27; scikit-learn differentiates with respect to :math:`\log\theta`, which is
        :math:`\theta` times this).
        """
        if method not in ("laplace", "ep"):
            raise ValueError(f"`method` must be 'laplace' or 'ep', got {method!r}")
        if method == "ep" and self.link != "probit":
            raise ValueError("EP is implemented for the probit link only: use link='probit'")
        values = self._values(params)
        K, *dK = self._gram_and_derivatives()(*values)
        state = self._approximate(method, K)
        self._warn_unconverged(method, state)
        value = float(state.log_evidence)
        if not eval_gradient:
            return value
        flat = laplace_grad(state, K, dK) if method == "laplace" else ep_grad(state, K, dK)
        grads, at = {}, 0
        for name, v in zip(self.hyperparameters, values, strict=True):
            size = int(np.size(v))
            grads[name] = np.asarray(flat[at : at + size], float).reshape(np.shape(v))
            at += size
        return value, grads

    @single_blas_thread
    def fit_laplace(
        self,
        n_restarts: int = 3,
        prior: bool = False,
        random_seed: int | None = None,
        *,
        params: Mapping | None = None,
        maxiter: int = 500,
    ) -> ClassifierFit:
        """Laplace approximation (R&W Algorithms 3.1, 3.2) with type-II hyperparameters.

        Maximises :math:`\\log q(y \\mid X, \\theta)` (R&W eq. 3.32; plus the log prior with
        ``prior=True``) with the gradients of R&W Algorithm 5.1, from ``n_restarts`` starting
        points (the priors' support point and draws from the priors). With ``params`` given, no
        optimisation: the approximation at exactly those hyperparameters.
        """
        return self._fit("laplace", n_restarts, prior, random_seed, params, maxiter)

    @single_blas_thread
    def fit_ep(
        self,
        n_restarts: int = 3,
        prior: bool = False,
        random_seed: int | None = None,
        *,
        params: Mapping | None = None,
        maxiter: int = 500,
    ) -> ClassifierFit:
        """Expectation propagation (R&W Algorithms 3.5, 3.6), probit link only, with type-II
        hyperparameters maximising :math:`\\log Z_{EP}` (gradient R&W eq. 5.27)."""
        return self._fit("ep", n_restarts, prior, random_seed, params, maxiter)

    def sample(
        self,
        draws: int = 1000,
        tune: int = 1000,
        chains: int = 2,
        sampler: str = "auto",
        random_seed: int | None = None,
        *,
        method: str = "latent",
        target_accept: float = 0.9,
        progressbar: bool = False,
        **kwargs,
    ):
        """NUTS, fully Bayesian over the kernel hyperparameters.

        ``method="latent"`` (default): jointly over the latent values and the hyperparameters;
        the latent GP is whitened (:math:`f = L z`, ``pm.gp.Latent(reparameterize=True)``) so
        NUTS mixes. Returns ArviZ data with a pointwise ``log_likelihood`` group (Bernoulli
        terms). The latent jitter is chosen first by :meth:`check_jitter` and recorded in the
        posterior's ``bayes_gp_jitter`` attribute.

        ``method="laplace"``: over the hyperparameters only, the latent GP integrated out by the
        Laplace approximation at every step (:meth:`bayes_gp.latent.LatentGP.sample` on
        :attr:`latent_gp`); each draw keeps its latent mode ``f_mode``, and the
        ``log_likelihood`` group holds the LA-LOO terms (Vehtari et al. 2016).
        """
        from bayes_gp.inference.nuts import add_log_likelihood, check_nuts_settings, run_nuts

        if method not in ("latent", "laplace"):
            raise ValueError(f"`method` must be 'latent' or 'laplace', got {method!r}")
        check_nuts_settings(draws, tune, chains)
        if method == "laplace":
            return self.latent_gp.sample(
                draws, tune, chains, sampler, random_seed, method="laplace",
                target_accept=target_accept, progressbar=progressbar, **kwargs,
            )  # fmt: skip

        choice = self.check_jitter(random_seed)
        idata = run_nuts(
            self.model,
            draws=draws,
            tune=tune,
            chains=chains,
            sampler=sampler,
            random_seed=random_seed,
            target_accept=target_accept,
            progressbar=progressbar,
            latent=True,
            **kwargs,
        )
        idata["posterior"].attrs.update(choice.attrs())
        return add_log_likelihood(
            idata, ["f"], lambda values: log_lik_derivatives(self.link, self.y_pm, values[0])[0]
        )

    # -------------------------------------------------------------- prediction
    @single_blas_thread
    def latent(self, X_new, fit, max_draws: int = 500) -> tuple[np.ndarray, np.ndarray]:
        """Mean and sd of the latent :math:`f_*` at ``X_new`` (for NUTS: over posterior draws)."""
        _, means, variances = self._latent_draws(X_new, fit, max_draws)
        mean = means.mean(axis=0)
        return mean, np.sqrt(variances.mean(axis=0) + means.var(axis=0))

    def _latent_draws(self, X_new, fit, max_draws):
        Xn = new_inputs(X_new, self.X.shape[1])
        if self._is_laplace_draws(fit):
            means, variances, _ = self.latent_gp._latent_moments(Xn, fit, max_draws)
            return Xn, means, variances
        if isinstance(fit, ClassifierFit):
            K, Ks, kss = self._grams(self._values(fit.params), Xn)
            if fit.method == "laplace":
                m, v = fit.state.predict_latent(Ks, kss)
            else:
                m, v = fit.state.predict_latent(K, Ks, kss)
            return Xn, m[None, :], v[None, :]
        try:
            post = fit["posterior"]
        except (KeyError, TypeError, AttributeError):
            raise TypeError(
                "`fit` must be a ClassifierFit (fit_laplace / fit_ep) or the ArviZ DataTree from "
                f"sample(), got {type(fit).__name__}"
            ) from None
        arrays = [np.asarray(post[n]) for n in self.hyperparameters]
        f = np.asarray(post["f"])
        flat = [a.reshape((-1, *a.shape[2:])) for a in arrays]
        f = f.reshape(-1, f.shape[-1])
        idx = np.arange(f.shape[0])
        if idx.size > max_draws:
            idx = np.sort(np.random.default_rng(0).choice(idx.size, max_draws, replace=False))
        means, variances, extra = [], [], 0.0
        for i in idx:
            K, Ks, kss = self._grams([a[i] for a in flat], Xn)
            L, jitter = jittered_cholesky(K)
            extra = max(extra, jitter)
            means.append(Ks.T @ cho_solve((L, True), f[i]))  # E[f* | f, theta]
            V = solve_triangular(L, Ks, lower=True)
            variances.append(np.maximum(kss - np.sum(V * V, axis=0), 0.0))
        if extra > 0:
            warnings.warn(
                f"K + jitter I was not numerically positive definite at some posterior draws; "
                f"added up to {extra:.3g} more to its diagonal for the predictions",
                JitterWarning,
                stacklevel=3,
            )
        return Xn, np.array(means), np.array(variances)

    @single_blas_thread
    def predict_proba(self, X_new, fit, max_draws: int = 500) -> np.ndarray:
        """:math:`P(y_* = \\text{positive class})`: the averaged predictive probability.

        Laplace/EP: :math:`\\int\\sigma(f_*)q(f_*)df_*` (probit closed form, logit quadrature);
        NUTS: the Monte Carlo average over posterior draws of the same integral given each draw's
        latent values and hyperparameters.
        """
        _, means, variances = self._latent_draws(X_new, fit, max_draws)
        return average_probability(self.link, means, variances).mean(axis=0)

    def predict(self, X_new, fit) -> np.ndarray:
        """Predicted labels (in the original label set)."""
        return np.where(self.predict_proba(X_new, fit) > 0.5, self.classes_[1], self.classes_[0])

    # ------------------------------------------------------------ model protocol
    fit_methods = ("laplace", "nuts", "ep", "nuts_laplace")
    sampling_methods = ("nuts", "nuts_laplace")
    outcome = "binary"

    @property
    def label(self) -> str:
        return self.spec.name

    @property
    def observed(self) -> np.ndarray:
        """The 0/1 labels (1: the positive class, ``classes_[1]``)."""
        return self.t

    def describe(self) -> list[tuple[str, object]]:
        """Kernel, its formula and equation, likelihood and link, latent GP, data size."""
        classes = ", ".join(str(c) for c in self.classes_)
        return [
            ("model", "GPClassifier"),
            ("kernel", self.spec.name + (" (ARD)" if self.ard else "")),
            ("kernel formula", kernel_formula(self.spec)),
            ("equation", self.spec.equation or "–"),
            ("likelihood", f"Bernoulli, {self.link} link; classes {classes} (positive: last)"),
            ("latent GP", f"f ~ GP(0, k), whitened (f = L z); jitter {self.jitter:g}"),
            ("positive fraction", float(np.mean(self.t))),
            ("observations n", self.X.shape[0]),
            ("input dimensions D", self.X.shape[1]),
            ("inputs", ", ".join(self.feature_names)),
        ]

    def fit(self, method: str = "laplace", **options):
        """``"laplace"`` (:meth:`fit_laplace`), ``"ep"`` (:meth:`fit_ep`, probit link),
        ``"nuts"`` (:meth:`sample`, joint over the latent values) or ``"nuts_laplace"``
        (:meth:`sample` with ``method="laplace"``: the latent GP integrated out by Laplace)."""
        methods = {"laplace": self.fit_laplace, "ep": self.fit_ep, "nuts": self.sample}
        if method == "nuts_laplace":
            return self.sample(method="laplace", **options)
        if method not in methods:
            raise ValueError(f"GPClassifier fits by {list(self.fit_methods)}, not {method!r}")
        return methods[method](**options)

    def fit_label(self, fit) -> str:
        if self._is_laplace_draws(fit):
            return self.latent_gp.fit_label(fit)  # "NUTS (Laplace-integrated GP)"
        return super().fit_label(fit)

    def check_fit(self, fit) -> None:
        if not (is_nuts(fit) or isinstance(fit, ClassifierFit)):
            raise TypeError(
                "a GPClassifier fit is a ClassifierFit (fit_laplace / fit_ep) or the ArviZ "
                f"DataTree from sample(), got {type(fit).__name__}"
            )

    def replicate(self, fit, n_draws: int, seed: int = 0) -> np.ndarray:
        """Replicated labels, ``(n_draws, n)``: Bernoulli draws with the posterior's latent
        probabilities (NUTS: per draw of ``f``; Laplace/EP: the averaged predictive probability
        at the training inputs)."""
        self.check_fit(fit)
        if self._is_laplace_draws(fit):
            return self.latent_gp.replicate(fit, n_draws, seed)
        rng = np.random.default_rng(seed)
        n = self.X.shape[0]
        if is_nuts(fit):
            f = np.asarray(fit["posterior"]["f"], float).reshape(-1, n)
            idx = np.sort(rng.choice(f.shape[0], min(n_draws, f.shape[0]), replace=False))
            p = expit(f[idx]) if self.link == "logit" else ndtr(f[idx])
        else:
            p = np.broadcast_to(self.predict_proba(self.X, fit), (n_draws, n))
        return (rng.uniform(size=p.shape) < p).astype(int)

    def bands(self, grid, fit) -> Bands:
        grid = np.asarray(grid, float).ravel()
        _, means, variances = self._latent_draws(grid[:, None], fit, 200)
        per_draw = average_probability(self.link, means, variances)
        lower = upper = None
        if is_nuts(fit):
            lower, upper = np.quantile(per_draw, [0.03, 0.97], axis=0)
        return Bands("probability", self.X[:, 0], self.t, grid, per_draw.mean(axis=0), lower,
                     upper, positive=str(self.classes_[1]))  # fmt: skip

    def prediction_columns(self, X_new, fit) -> dict[str, np.ndarray]:
        """The probability of the positive class ``classes_[1]``, the latent mean and sd, and
        the predicted label."""
        p = self.predict_proba(X_new, fit)
        mean, sd = self.latent(X_new, fit)
        predicted = np.where(p > 0.5, self.classes_[1], self.classes_[0])
        return {"p_positive": p, "latent_mean": mean, "latent_sd": sd, "predicted": predicted}

    def scores(self, y, columns) -> dict[str, float]:
        """Accuracy, log loss and Brier score of ``p_positive`` for the labels ``y``."""
        t = (np.asarray(y) == self.classes_[1]).astype(float)
        return binary_scores(t, columns["p_positive"])

    def restore_fit(self, method: str, params: dict, attrs: dict) -> ClassifierFit:
        """The Laplace or EP approximation recomputed at the saved hyperparameters."""
        if method not in ("laplace", "ep"):
            raise ValueError(f"GPClassifier's type-II fits are 'laplace' and 'ep', not {method!r}")
        fit = self.fit_laplace(params=params) if method == "laplace" else self.fit_ep(params=params)
        return ClassifierFit(
            method,
            params,
            fit.log_marginal_likelihood,
            float(attrs["objective"]),
            bool(attrs["prior"]),
            fit.state,
            grad_norm=float(attrs["grad_norm"]),
            jitter=fit.jitter,
        )

    def point_loo(self, fit) -> tuple[str, np.ndarray]:
        r"""LOO log predictive densities at the point estimate.

        EP: from the cavity distributions :math:`N(f_i \mid \nu_{-i}/\tau_{-i}, 1/\tau_{-i})`
        (R&W eqs. 3.56, 3.58), whose probit predictive is
        :math:`\Phi(y_i \mu_{-i} / \sqrt{1 + \sigma_{-i}^2})` (R&W eq. 3.82). Laplace: the LA-LOO
        of Vehtari et al. (2016, JMLR 17, §4.1): remove the Gaussian site
        :math:`(W_{ii},\ W_{ii}\hat f_i + \nabla_i \log p(y\mid\hat f))` of observation
        :math:`i` from the Laplace marginal :math:`N(\hat f_i, \Sigma_{ii})`,
        :math:`\Sigma = (K^{-1} + W)^{-1}`, and average the likelihood over the cavity.
        """
        if not isinstance(fit, ClassifierFit):
            raise TypeError(
                f"point_loo needs a ClassifierFit of this model, got {type(fit).__name__}"
            )
        at = f"{'MAP' if fit.prior else 'ML-II'}"
        y, state = self.y_pm, fit.state
        if fit.method == "ep":
            d = np.diag(state.Sigma)
            tau = 1.0 / d - state.tau_t  # cavity precision, R&W eq. 3.56
            nu = state.mu / d - state.nu_t
            var = 1.0 / tau
            pointwise = log_ndtr(y * nu * var / np.sqrt(1.0 + var))  # R&W eq. 3.82, cavity
            return f"EP cavity LOO at EP ({at})", pointwise
        K, _, _ = self._grams(self._values(fit.params), np.zeros((0, self.X.shape[1])))
        W = state.sW**2
        V = solve_triangular(state.L, state.sW[:, None] * K, lower=True, check_finite=False)
        sigma2 = np.diag(K) - np.sum(V * V, axis=0)  # diag (K^-1 + W)^-1, R&W Alg. 3.2 line 6
        tau = 1.0 / sigma2 - W  # remove the Gaussian site of observation i
        nu = state.f / sigma2 - (W * state.f + state.d1)
        p = average_probability(self.link, y * nu / tau, 1.0 / tau)  # σ(-f) = 1 - σ(f)
        return f"Laplace LA-LOO at Laplace ({at})", np.log(p)
