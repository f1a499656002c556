r"""Bayesian linear regression in fixed basis functions: the weight-space view of GP regression
(R&W §2.1; PRML §6.4.1, eqs. 6.49–6.54).

The model (R&W §2.1.1–2.1.2):

.. math::
   f(x) = \phi(x)^\top w, \qquad w \sim N(0, \Sigma_p), \qquad
   y_n = f(x_n) + \epsilon_n,\ \epsilon_n \sim N(0, \sigma^2).

**Weight space** (R&W eqs. 2.8–2.11). With the design matrix :math:`\Phi` (rows
:math:`\phi(x_n)^\top`, R&W §2.1.2, PRML eq. 6.51) the posterior of the weights is
:math:`N(\mu_w, A^{-1})` with

.. math::
   A = \sigma^{-2}\Phi^\top\Phi + \Sigma_p^{-1}, \qquad \mu_w = \sigma^{-2}A^{-1}\Phi^\top y,

and the predictive distribution of :math:`f_* = f(x_*)` is
:math:`N(\phi_*^\top\mu_w,\ \phi_*^\top A^{-1}\phi_*)` (R&W eqs. 2.9, 2.11), plus :math:`\sigma^2` for
:math:`y_*` (R&W §2.1.1). Costs: :math:`O(NM^2 + M^3)` to fit,
:math:`O(M^2)` per prediction.

**Function space** (R&W eq. 2.12, by Woodbury, R&W eq. A.9): with :math:`K = \Phi\Sigma_p\Phi^\top`
(PRML eq. 6.53; the Gram matrix of the kernel :math:`k(x, x') = \phi(x)^\top\Sigma_p\phi(x')`,
R&W §2.1.2, :class:`bayes_gp.kernels.BasisFunction`),

.. math::
   \mathbb E[f_*] = \phi_*^\top\Sigma_p\Phi^\top(K + \sigma^2 I)^{-1}y, \qquad
   \mathbb V[f_*] = \phi_*^\top\Sigma_p\phi_* -
       \phi_*^\top\Sigma_p\Phi^\top(K + \sigma^2 I)^{-1}\Phi\Sigma_p\phi_*,

which costs :math:`O(N^2M + N^3)` to fit and :math:`O(NM + N^2)` per prediction (PRML
§6.4.2). Both forms give the same numbers; :class:`BayesianLinearRegression` uses the cheaper one
(``method="auto"``).

Numerically both forms work with whitened features :math:`\tilde\Phi = \Phi L_p`,
:math:`\Sigma_p = L_pL_p^\top` (R&W §2.1.2: :math:`k(x, x') = \langle\tilde\phi(x),
\tilde\phi(x')\rangle` with :math:`\tilde\phi(x) = \Sigma_p^{1/2}\phi(x)`). Then :math:`w = L_p v` with
:math:`v \sim N(0, I)` and the weight-space precision of :math:`v` is
:math:`\tilde A = I + \sigma^{-2}\tilde\Phi^\top\tilde\Phi`, whose eigenvalues are all
:math:`\ge 1`: no inverse of :math:`\Sigma_p` is formed, and a singular :math:`\Sigma_p` works.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor
from pytensor.graph.basic import Variable
from scipy.linalg import cho_solve, solve_triangular

from bayes_gp._validation import as_inputs, as_targets, check_aligned, f64
from bayes_gp.inference.sampling import NutsRun, NUTSSampling
from bayes_gp.linalg import EAGER_MODE, single_blas_thread
from bayes_gp.predictive import (
    CI_QUANTILES,
    LOG_2PI,
    Z_CI,
    Prediction,
    factorize,
    log_marginal_likelihood,
    predict,
)

__all__ = [
    "BayesianLinearRegression",
    "WeightPosterior",
    "CROSSOVER_N_OVER_M",
    "choose_method",
]

#: The ratio N/M below which the function-space form (O(N^2 M + N^3)) is faster than the
#: weight-space form (O(N M^2 + M^3)). ``benchmarks/weight_space.py`` (results in
#: ``benchmarks/README.md``) measured the log marginal likelihood, the work of one hyperparameter
#: evaluation, to cross at N/M = 0.98-1.02 for M = 50 ... 400 (0.6 at M = 25, where both take
#: ~40 us); fit + prediction at 200 points crosses earlier, at N/M = 0.5-0.8, because a
#: function-space prediction costs O(NM + N^2) per point against O(M^2).
CROSSOVER_N_OVER_M = 1.0



def choose_method(n: int, m: int, ratio: float = CROSSOVER_N_OVER_M) -> str:
    """``"function"`` when ``n < ratio * m`` observations, else ``"weight"`` (PRML §6.4.2)."""
    return "function" if n < ratio * m else "weight"


@dataclass(frozen=True)
class WeightPosterior:
    r"""Posterior of the weights, :math:`N(\mu_w, A^{-1})` (R&W eq. 2.8).

    Attributes
    ----------
    mean : ndarray (M,)
        :math:`\mu_w = \sigma^{-2}A^{-1}\Phi^\top y`.
    cov : ndarray (M, M)
        :math:`\Sigma_w = A^{-1}`.
    method : str
        ``"weight"`` or ``"function"``: which form computed it.
    """

    mean: np.ndarray
    cov: np.ndarray
    method: str

    @property
    def precision(self) -> np.ndarray:
        r""":math:`A = \sigma^{-2}\Phi^\top\Phi + \Sigma_p^{-1}` (needs an invertible :math:`\Sigma_p`)."""
        return np.linalg.inv(self.cov)


def _sqrt_psd(S: np.ndarray) -> np.ndarray:
    """A factor ``L`` with ``L @ L.T == S`` for a symmetric PSD ``S`` (Cholesky, else eigh)."""
    try:
        return np.linalg.cholesky(S)
    except np.linalg.LinAlgError:
        e, U = np.linalg.eigh(S)
        return U * np.sqrt(np.clip(e, 0.0, None))


class BayesianLinearRegression(NUTSSampling):
    r"""Bayesian linear regression :math:`y = \phi(x)^\top w + \epsilon` with a Gaussian weight prior.

    Parameters
    ----------
    X : array_like (n,) or (n, D)
        Inputs; with ``basis=None`` these are the features themselves (pass :math:`\Phi`).
    y : array_like (n,)
        Observations (the prior mean of :math:`f` is zero: add a constant basis function for an
        intercept, or centre ``y``).
    basis : callable, optional
        :math:`\phi`: maps an ``(n, D)`` input matrix to ``(n, M)`` features. It may use NumPy or
        PyTensor operations (a PyTensor result is evaluated), so the same function can define a
        :class:`bayes_gp.kernels.BasisFunction` kernel. Default: :math:`\phi(x) = x`.
    Sigma_p : float, (M,) or (M, M)
        Prior covariance of the weights: a scalar (:math:`sI`), a diagonal or a symmetric PSD
        matrix.
    sigma : float, optional
        Noise standard deviation for the closed-form methods. ``None``: only the PyMC model
        (where :math:`\sigma` is learned) and explicit ``params`` can be used.
    method : {"auto", "weight", "function"}
        Which form computes the closed-form quantities: ``"auto"`` picks the cheaper one
        (:func:`choose_method`).
    scale_prior : callable or float, optional
        In :attr:`model`, the prior of the scale :math:`s` of the weight prior
        (:math:`w \sim N(0, s^2\Sigma_p)`): ``f(name)`` creating a random variable, or a positive
        number that fixes :math:`s`. Default :math:`s \sim \mathrm{LogNormal}(0, 1)` (median 1:
        the given :math:`\Sigma_p`).
    sigma_prior : callable, optional
        In :attr:`model`, ``f(name)`` creating the prior of :math:`\sigma` when ``sigma`` is not
        given (a given ``sigma`` is fixed there too). Default
        :math:`\sigma \sim \mathrm{HalfNormal}(s_y)`.
    """

    def __init__(
        self,
        X,
        y,
        basis: Callable | None = None,
        Sigma_p=1.0,
        sigma: float | None = None,
        *,
        method: str = "auto",
        scale_prior: Callable | None = None,
        sigma_prior: Callable | None = None,
    ):
        check_aligned(X, y)
        X, _ = as_inputs(X)
        # a constant y is a legitimate target of a linear model (an intercept), so it is allowed
        y = as_targets(y, X.shape[0], what="Bayesian linear regression", learned_noise=False,
                       min_n=1)  # fmt: skip
        if basis is not None and not callable(basis):
            raise ValueError("`basis` must be a callable mapping (n, D) inputs to (n, M) features")
        if method not in ("auto", "weight", "function"):
            raise ValueError(f"`method` must be 'auto', 'weight' or 'function', got {method!r}")
        if sigma is not None:
            sigma = float(sigma)
            if not (np.isfinite(sigma) and sigma > 0):
                raise ValueError(f"`sigma` must be a positive number, got {sigma!r}")
        if sigma_prior is not None and not callable(sigma_prior):
            raise ValueError("`sigma_prior` must be a callable f(name) creating a random variable")
        if scale_prior is not None and not callable(scale_prior):
            try:
                fixed = float(scale_prior)
            except (TypeError, ValueError):
                fixed = float("nan")
            if not (np.isfinite(fixed) and fixed > 0):
                raise ValueError(
                    "`scale_prior` must be a callable f(name) creating a random variable or a "
                    f"positive number, got {scale_prior!r}"
                )
            scale_prior = fixed
        self.X, self.y, self.basis = X, y, basis
        self.input_dim = X.shape[1]
        self.Phi = self.features(X, name="X")
        M = self.Phi.shape[1]
        self.Sigma_p = self._check_sigma_p(Sigma_p, M)
        self.L_p = self._factor(self.Sigma_p, M)
        self.sigma = sigma
        self.method = method
        self._scale_prior, self._sigma_prior = scale_prior, sigma_prior
        self._model: pm.Model | None = None

    # ------------------------------------------------------------------ inputs
    def features(self, X, name: str = "X_new") -> np.ndarray:
        r"""The design matrix :math:`\Phi` of ``X`` (R&W §2.1.2), shape ``(n, M)``."""
        X, _ = as_inputs(X, name)
        if hasattr(self, "input_dim") and X.shape[1] != self.input_dim:
            raise ValueError(
                f"`{name}` has {X.shape[1]} column(s) but the model has {self.input_dim}"
            )
        if self.basis is None:
            return X
        Phi = self.basis(X)
        if isinstance(Phi, Variable):
            Phi = pytensor.function([], Phi, mode=EAGER_MODE)()
        Phi = np.asarray(Phi, dtype=float)
        if Phi.ndim != 2 or Phi.shape[0] != X.shape[0]:
            raise ValueError(
                f"`basis` must return an (n, M) = ({X.shape[0]}, M) matrix, got shape {Phi.shape}"
            )
        if hasattr(self, "Phi") and Phi.shape[1] != self.Phi.shape[1]:
            raise ValueError(
                f"`basis` returned {Phi.shape[1]} features, expected {self.Phi.shape[1]}"
            )
        if not np.all(np.isfinite(Phi)):
            raise ValueError(f"`basis` returned NaN or infinite features for `{name}`")
        return Phi

    @staticmethod
    def _check_sigma_p(Sigma_p, M: int) -> np.ndarray:
        try:
            S = np.asarray(Sigma_p, dtype=float)
        except (TypeError, ValueError):
            raise ValueError("`Sigma_p` must be a number, a vector or a matrix") from None
        if not np.all(np.isfinite(S)):
            raise ValueError("`Sigma_p` contains NaN or infinite values")
        if S.ndim == 0 or (S.ndim == 1 and S.shape[0] in (1, M)):
            if np.any(S < 0):
                raise ValueError(f"`Sigma_p` must be non-negative, got {S!r}")
            return S
        if S.ndim == 1:
            raise ValueError(f"`Sigma_p` has {S.shape[0]} entries for {M} basis functions")
        if S.ndim != 2 or S.shape != (M, M):
            raise ValueError(f"`Sigma_p` has shape {S.shape}, expected ({M}, {M})")
        if not np.allclose(S, S.T, rtol=1e-12, atol=0):
            raise ValueError("`Sigma_p` must be symmetric")
        e = np.linalg.eigvalsh(S)
        if e.min() < -1e-10 * max(abs(e.max()), 1.0):
            raise ValueError(
                f"`Sigma_p` must be positive semi-definite (smallest eigenvalue {e.min():.3g})"
            )
        return S

    @staticmethod
    def _factor(S: np.ndarray, M: int) -> np.ndarray:
        if S.ndim < 2:
            return np.sqrt(S) * np.ones(M) if S.ndim == 0 or S.shape[0] == 1 else np.sqrt(S)
        return _sqrt_psd(S)

    def _whiten(self, Phi: np.ndarray, scale: float = 1.0) -> np.ndarray:
        r""":math:`\tilde\Phi = s\,\Phi L_p` (R&W §2.1.2)."""
        if self.L_p.ndim == 1:
            return scale * Phi * self.L_p
        return scale * (Phi @ self.L_p)

    def _unwhiten(self, v: np.ndarray, scale: float = 1.0) -> np.ndarray:
        """``w = s L_p v`` for vectors or the columns of a matrix."""
        if self.L_p.ndim == 1:
            return scale * (self.L_p[:, None] * v if v.ndim == 2 else self.L_p * v)
        return scale * (self.L_p @ v)

    def _hyper(self, params: Mapping | None) -> tuple[float, float]:
        default_scale = self._scale_prior if isinstance(self._scale_prior, float) else 1.0
        if params is None:
            if self.sigma is None:
                raise ValueError(
                    "no noise level: give `sigma` to the constructor or `params={'sigma': ...}`"
                )
            return default_scale, self.sigma
        unknown = set(params) - {"scale", "sigma"}
        if unknown:
            raise ValueError(f"`params` has unknown names {sorted(unknown)}; use 'scale', 'sigma'")
        scale = float(params.get("scale", default_scale))
        sigma = params.get("sigma", self.sigma)
        if sigma is None:
            raise ValueError("`params` must contain 'sigma' (the model has no fixed noise level)")
        sigma = float(sigma)
        if not (np.isfinite(scale) and scale > 0 and np.isfinite(sigma) and sigma > 0):
            raise ValueError(f"'scale' and 'sigma' must be positive, got {scale!r}, {sigma!r}")
        return scale, sigma

    @property
    def n_features(self) -> int:
        """M, the number of basis functions."""
        return int(self.Phi.shape[1])

    def resolved_method(self) -> str:
        """The form ``method`` stands for at this N and M."""
        if self.method != "auto":
            return self.method
        return choose_method(self.X.shape[0], self.n_features)

    # ------------------------------------------------------------ closed forms
    def _weight_factor(self, scale: float, sigma: float):
        r"""Cholesky of :math:`\tilde A = I + \sigma^{-2}\tilde\Phi^\top\tilde\Phi` and
        :math:`\tilde\mu = \sigma^{-2}\tilde A^{-1}\tilde\Phi^\top y` (R&W eq. 2.8, whitened)."""
        Pt = self._whiten(self.Phi, scale)
        A = np.eye(Pt.shape[1]) + (Pt.T @ Pt) / sigma**2
        R = np.linalg.cholesky(A)
        b = Pt.T @ self.y / sigma**2
        return R, cho_solve((R, True), b, check_finite=False), b

    def _function_factor(self, scale: float, sigma: float):
        r"""Factor of :math:`C = \tilde\Phi\tilde\Phi^\top + \sigma^2 I` (R&W eq. 2.12)."""
        Pt = self._whiten(self.Phi, scale)
        C = Pt @ Pt.T + sigma**2 * np.eye(Pt.shape[0])
        return Pt, factorize(C, self.y)

    @single_blas_thread
    def posterior(
        self, params: Mapping | None = None, method: str | None = None
    ) -> WeightPosterior:
        r"""The posterior of the weights :math:`N(\mu_w, A^{-1})` (R&W eq. 2.8).

        In function space (R&W §2.1.2): :math:`\mu_w = \Sigma_p\Phi^\top(K +
        \sigma^2I)^{-1}y`, :math:`A^{-1} = \Sigma_p - \Sigma_p\Phi^\top(K + \sigma^2I)^{-1}
        \Phi\Sigma_p`.

        Parameters
        ----------
        params : dict, optional
            ``{"scale": s, "sigma": sigma}`` (prior :math:`N(0, s^2\Sigma_p)`); default: the
            constructor's ``Sigma_p`` and ``sigma``.
        method : {"weight", "function"}, optional
            Override :attr:`method`.
        """
        scale, sigma = self._hyper(params)
        method = self._method(method)
        M = self.n_features
        if method == "weight":
            R, mu_v, _ = self._weight_factor(scale, sigma)
            Rinv = solve_triangular(R, np.eye(M), lower=True, check_finite=False)
            cov_v = Rinv.T @ Rinv
        else:
            Pt, fac = self._function_factor(scale, sigma)
            mu_v = Pt.T @ fac.alpha
            V = solve_triangular(fac.L, Pt, lower=True, check_finite=False)
            cov_v = np.eye(M) - V.T @ V
        mean = self._unwhiten(mu_v, scale)
        cov = self._unwhiten(self._unwhiten(cov_v, scale).T, scale)
        return WeightPosterior(mean, 0.5 * (cov + cov.T), method)

    def _method(self, method: str | None) -> str:
        if method is None:
            return self.resolved_method()
        if method not in ("weight", "function"):
            raise ValueError(f"`method` must be 'weight' or 'function', got {method!r}")
        return method

    def _predict_at(self, Phi_new, scale, sigma, method, include_noise):
        Pn = self._whiten(Phi_new, scale)
        if method == "weight":
            R, mu_v, _ = self._weight_factor(scale, sigma)
            mean = Pn @ mu_v  # R&W eq. (2.11)
            V = solve_triangular(R, Pn.T, lower=True, check_finite=False)
            var = np.sum(V * V, axis=0)
        else:
            Pt, fac = self._function_factor(scale, sigma)
            mean, var = predict(fac, Pt @ Pn.T, np.sum(Pn * Pn, axis=1))  # R&W eq. (2.12)
        if include_noise:
            var = var + sigma**2  # R&W §2.1.1
        return mean, var

    @single_blas_thread
    def predict(
        self,
        X_new,
        fit=None,
        include_noise: bool = False,
        method: str | None = None,
    ) -> Prediction:
        r"""Predictive distribution of :math:`f_*` (or :math:`y_*` with ``include_noise``).

        Parameters
        ----------
        X_new : array_like (m,) or (m, D)
        fit : None, dict or DataTree
            ``None``: the constructor's ``Sigma_p`` and ``sigma`` (times a fixed ``scale_prior``);
            a dict ``{"scale", "sigma"}``;
            or the output of :meth:`sample`, in which case the closed form is averaged over the
            posterior draws of :math:`(s, \sigma)` (law of total variance).
        include_noise : bool
            Add :math:`\sigma^2` (R&W §2.1.1).
        method : {"weight", "function"}, optional
            Override :attr:`method`.
        """
        method = self._method(method)
        Pn = self.features(X_new)
        if fit is None or (isinstance(fit, Mapping) and "posterior" not in fit):
            scale, sigma = self._hyper(fit)
            mean, var = self._predict_at(Pn, scale, sigma, method, include_noise)
            sd = np.sqrt(var)
            return Prediction(mean, var, None, mean - Z_CI * sd, mean + Z_CI * sd)
        return self._predict_mixture(Pn, fit, method, include_noise)

    def _predict_mixture(self, Pn, idata, method, include_noise, max_draws: int = 400):
        post = idata["posterior"]
        if "v" not in post:
            raise ValueError("`fit` must be the output of `sample` (a posterior with `v`)")
        n_total = np.asarray(post["v"]).shape[0] * np.asarray(post["v"]).shape[1]
        fixed_scale = self._scale_prior if isinstance(self._scale_prior, float) else 1.0
        scales = (
            np.asarray(post["scale"]).ravel() if "scale" in post else np.full(n_total, fixed_scale)
        )
        sigmas = (
            np.asarray(post["sigma"]).ravel() if "sigma" in post else np.full(n_total, self.sigma)
        )
        idx = np.arange(scales.size)
        if idx.size > max_draws:
            idx = np.sort(np.random.default_rng(0).choice(idx.size, max_draws, replace=False))
        rng = np.random.default_rng(1)
        means, variances, draws = [], [], []
        for i in idx:
            mu, var = self._predict_at(Pn, scales[i], sigmas[i], method, include_noise)
            means.append(mu)
            variances.append(var)
            draws.append(mu + np.sqrt(var) * rng.standard_normal((4, mu.size)))
        means, variances = np.array(means), np.array(variances)
        mean = means.mean(axis=0)
        var = variances.mean(axis=0) + means.var(axis=0)
        lower, upper = np.quantile(np.concatenate(draws), CI_QUANTILES, axis=0)
        return Prediction(mean, var, None, lower, upper, {"n_draws": len(idx)})

    @single_blas_thread
    def log_marginal_likelihood(
        self, params: Mapping | None = None, method: str | None = None
    ) -> float:
        r""":math:`\log N(y \mid 0, K + \sigma^2 I)` (PRML eqs. 6.61–6.62 with :math:`K` of eq. 6.53).

        In weight space by the matrix determinant lemma and Woodbury (R&W eqs. A.9–A.10), with
        :math:`\tilde b = \sigma^{-2}\tilde\Phi^\top y` and :math:`\tilde\mu = \tilde A^{-1}\tilde b`:

        .. math::
           \log|K + \sigma^2 I| = \log|\tilde A| + N\log\sigma^2, \qquad
           y^\top(K + \sigma^2I)^{-1}y = \sigma^{-2}y^\top y - \tilde b^\top\tilde\mu.
        """
        scale, sigma = self._hyper(params)
        method = self._method(method)
        n = self.y.shape[0]
        if method == "function":
            return log_marginal_likelihood(self._function_factor(scale, sigma)[1])
        R, mu_v, b = self._weight_factor(scale, sigma)
        quad = self.y @ self.y / sigma**2 - b @ mu_v
        logdet = 2.0 * np.sum(np.log(np.diag(R))) + n * np.log(sigma**2)
        return float(-0.5 * quad - 0.5 * logdet - 0.5 * n * LOG_2PI)

    # ---------------------------------------------------------------- PyMC model
    @property
    def model(self) -> pm.Model:
        r"""The model as PyMC model, with the weights explicit (non-centred):

        .. math::
           s \sim p(s), \quad \sigma \sim p(\sigma), \quad v \sim N(0, I_M), \quad
           w = s\,L_p v \sim N(0, s^2\Sigma_p), \quad y \sim N(\Phi w, \sigma^2 I).

        ``w`` is a deterministic; the free variables are ``scale`` (unless ``scale_prior`` fixes
        it), ``sigma`` (unless ``sigma`` was given to the constructor) and ``v``.
        """
        if self._model is None:
            self._model = self._build()
        return self._model

    def _build(self) -> pm.Model:
        n, M = self.Phi.shape
        y_sd = float(self.y.std()) or 1.0
        coords = {"basis": np.arange(M), "obs": np.arange(n)}
        Pt = self._whiten(self.Phi)
        with pm.Model(coords=coords) as model:
            if isinstance(self._scale_prior, float):
                scale = f64(self._scale_prior)
            elif self._scale_prior is not None:
                scale = self._scale_prior("scale")
            else:
                scale = pm.LogNormal("scale", mu=f64(0.0), sigma=f64(1.0))
            if self.sigma is not None:
                sigma = f64(self.sigma)
            elif self._sigma_prior is not None:
                sigma = self._sigma_prior("sigma")
            else:
                sigma = pm.HalfNormal("sigma", sigma=f64(y_sd))
            v = pm.Normal("v", mu=f64(0.0), sigma=f64(1.0), dims="basis")
            if self.L_p.ndim == 1:
                pm.Deterministic("w", scale * self.L_p * v, dims="basis")
            else:
                pm.Deterministic("w", scale * pytensor.tensor.dot(self.L_p, v), dims="basis")
            mu = scale * pytensor.tensor.dot(Pt, v)
            pm.Normal("y", mu=mu, sigma=sigma, observed=self.y, dims="obs")
        return model

    def _nuts_run(self, sampler, random_seed) -> NutsRun:
        """:meth:`sample` runs NUTS over the weights and the hyperparameters of :attr:`model`."""
        return NutsRun(self.model, extra={"t0": time.perf_counter()})

    def _nuts_result(self, idata, run: NutsRun, random_seed):
        """The pointwise ``log_likelihood`` group (the observations are independent given the
        weights) and the run's time in the posterior's ``bayes_gp_seconds``."""
        with self.model:
            pm.compute_log_likelihood(idata, progressbar=False)
        idata["posterior"].attrs["bayes_gp_seconds"] = time.perf_counter() - run.extra["t0"]
        return idata

    def __repr__(self) -> str:
        return (
            f"BayesianLinearRegression(n={self.X.shape[0]}, M={self.n_features}, "
            f"method={self.method!r} -> {self.resolved_method()!r})"
        )
