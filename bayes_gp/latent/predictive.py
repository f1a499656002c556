r"""Predictions of a latent GP from a Laplace mode, leave-one-out densities and predictive
densities of :math:`y` under a Gaussian latent distribution.

From the mode :math:`\hat f` at hyperparameters :math:`(\theta, \phi)` (:func:`laplace`), the
Laplace approximation of the latent posterior at new inputs is Gaussian (R&W eqs. 3.21, 3.24
generalised to any likelihood):

.. math::
   E_q[f_*] = m_* + k_*^T \nabla\log p(y \mid \hat f), \qquad
   V_q[f_*] = k_{**} - k_*^T (K + W^{-1})^{-1} k_*,

evaluated through the whitened factors: with :math:`K = L_K L_K^T`,
:math:`A = I + L_K^T W L_K = L_A L_A^T` and :math:`u = L_K^{-1} k_*`,
:math:`k_*^T (K + W^{-1})^{-1} k_* = u^T u - \lVert L_A^{-1} u \rVert^2`, which holds for any sign
of :math:`W` (a Student-t likelihood) as long as :math:`A` is positive definite, i.e. at a mode.

The leave-one-out predictive densities of a Laplace fit are the LA-LOO of Vehtari et al. (2016,
"Bayesian leave-one-out cross-validation approximations for Gaussian latent variable models",
JMLR 17, §4.1): remove observation :math:`i`'s Gaussian site (precision :math:`W_{ii}`, location
such that it reproduces the gradient at the mode) from the Laplace marginal
:math:`N(\hat f_i, \Sigma_{ii})` and integrate the likelihood over the resulting cavity,

.. math::
   \tau_{-i} = \Sigma_{ii}^{-1} - W_{ii}, \quad
   \tau_{-i}\mu_{-i} = \hat f_i \Sigma_{ii}^{-1} - (W_{ii} \hat f_i + \ell_i'(\hat f_i)), \quad
   \log p(y_i \mid y_{-i}) \approx \log \int p(y_i \mid f)\, N(f \mid \mu_{-i}, \tau_{-i}^{-1})\, df.

The one-dimensional integrals :math:`\int p(y \mid f) N(f \mid \mu, s^2) df` are computed by
Gauss–Hermite quadrature (:data:`GH_NODES` nodes) in log space.
"""

from __future__ import annotations

import numpy as np
from numpy.polynomial.hermite import hermgauss
from scipy.linalg import cho_solve, solve_triangular
from scipy.special import logsumexp

from bayes_gp.latent.laplace import LaplaceResult, _chol
from bayes_gp.latent.likelihoods import LatentLikelihood
from bayes_gp.linalg import NotPSDError, jittered_cholesky

__all__ = [
    "response_moments",
    "GH_NODES",
    "SiteFactor",
    "ModeFactor",
    "expected_response",
    "log_predictive_density",
    "predictive_cdf",
    "predict_latent",
    "joint_conditional",
    "la_loo",
]

#: Gauss–Hermite nodes for the predictive integrals.
GH_NODES = 64
_X, _W = hermgauss(GH_NODES)
_LOG_W = np.log(_W) - 0.5 * np.log(np.pi)


def log_predictive_density(
    likelihood: LatentLikelihood, phi, mean: np.ndarray, var: np.ndarray
) -> np.ndarray:
    r""":math:`\log \int p(y_i \mid f, \phi)\, N(f \mid \mu_i, s_i^2)\, df` for every observation
    ``i`` of ``likelihood`` (Gauss–Hermite quadrature, :data:`GH_NODES` nodes)."""
    mean = np.asarray(mean, float)
    sd = np.sqrt(np.maximum(np.asarray(var, float), 0.0))
    f = mean[None, :] + np.sqrt(2.0) * sd[None, :] * _X[:, None]
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        logp = likelihood.derivatives(f, phi)[0]
    return logsumexp(logp + _LOG_W[:, None], axis=0)


def expected_response(
    likelihood: LatentLikelihood, phi, mean: np.ndarray, var: np.ndarray, size=None
) -> np.ndarray:
    r""":math:`\int E[y \mid f, \phi]\, N(f \mid \mu_i, s_i^2)\, df` (the expected count,
    probability, …, with exposure or trials ``size``) by Gauss–Hermite quadrature."""
    sd = np.sqrt(np.maximum(np.asarray(var, float), 0.0))
    f = np.asarray(mean, float)[None, :] + np.sqrt(2.0) * sd[None, :] * _X[:, None]
    return (_W / np.sqrt(np.pi)) @ likelihood.response_mean(f, phi, size)


def response_moments(
    likelihood: LatentLikelihood, phi, mean: np.ndarray, var: np.ndarray, size=None
) -> tuple[np.ndarray, np.ndarray]:
    r"""The predictive mean and variance of :math:`y_*` under :math:`f_* \sim N(\mu_i, s_i^2)`:
    :math:`E[y] = \int E[y \mid f]\, N(f)\, df` and, by the law of total variance,
    :math:`\mathrm{Var}[y] = \int (\mathrm{Var}[y \mid f] + E[y \mid f]^2)\, N(f)\, df - E[y]^2`
    (Gauss–Hermite quadrature, :data:`GH_NODES` nodes; exposure or trials ``size``)."""
    sd = np.sqrt(np.maximum(np.asarray(var, float), 0.0))
    f = np.asarray(mean, float)[None, :] + np.sqrt(2.0) * sd[None, :] * _X[:, None]
    w = _W / np.sqrt(np.pi)
    m = likelihood.response_mean(f, phi, size)
    first = w @ m
    second = w @ (likelihood.response_variance(f, phi, size) + m * m)
    return first, np.maximum(second - first * first, 0.0)


def predictive_cdf(
    likelihood: LatentLikelihood, phi, mean: np.ndarray, var: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    r"""The predictive CDF of each observation of ``likelihood`` from below and at it,
    :math:`\int P(Y_i < y_i \mid f, \phi)\, N(f \mid \mu_i, s_i^2)\, df` and the same with
    :math:`\le` (:meth:`~bayes_gp.latent.likelihoods.LatentLikelihood.cdf`, Gauss–Hermite
    quadrature, :data:`GH_NODES` nodes)."""
    sd = np.sqrt(np.maximum(np.asarray(var, float), 0.0))
    f = np.asarray(mean, float)[None, :] + np.sqrt(2.0) * sd[None, :] * _X[:, None]
    below, at = likelihood.cdf(f, phi)
    w = _W / np.sqrt(np.pi)
    return w @ below, w @ at


class SiteFactor:
    r"""A Gaussian latent posterior :math:`N(\mu, \Sigma)`, :math:`\Sigma = (K^{-1} + W)^{-1}`,
    :math:`\mu = m + K a`, written as the prior times Gaussian sites of precision :math:`W` (a
    Laplace mode, or a variational posterior of :mod:`bayes_gp.latent.vi`): the factors that
    predictions and leave-one-out densities need (one :math:`O(n^3)` set-up)."""

    def __init__(self, K: np.ndarray, a: np.ndarray, W: np.ndarray):
        self.LK = _chol(K)
        if self.LK is None:
            # the fit's absolute jitter can be rounding-level relative to K (a latent amplitude
            # that ran away, eta ~ 1e11): factorise with jitter relative to K's own diagonal
            try:
                self.LK = jittered_cholesky(K)[0]
            except NotPSDError as err:
                raise np.linalg.LinAlgError(
                    f"K is not positive definite at these hyperparameters: {err}"
                ) from err
        W = np.asarray(W, float)
        self.LA = _chol(np.eye(K.shape[0]) + self.LK.T @ (W[:, None] * self.LK))
        if self.LA is None:
            raise np.linalg.LinAlgError(
                "the latent posterior's precision K^-1 + W is not positive definite at this "
                "point: it is not a mode (a multimodal Student-t posterior); no prediction"
            )
        self.a, self.W = np.asarray(a, float), W

    def predict(self, Ks: np.ndarray, kss: np.ndarray, m_new: np.ndarray):
        """Mean and variance of :math:`f_*` (module docstring) from the cross-covariances
        ``Ks`` (n, m), the prior variances ``kss`` (m,) and prior mean ``m_new`` (m,)."""
        mean = m_new + Ks.T @ self.a
        U = solve_triangular(self.LK, Ks, lower=True)
        V = solve_triangular(self.LA, U, lower=True)
        var = kss - np.sum(U * U, axis=0) + np.sum(V * V, axis=0)
        return mean, np.maximum(var, 0.0)

    def cov(self) -> np.ndarray:
        r""":math:`\Sigma = L_K A^{-1} L_K^T`."""
        C = solve_triangular(self.LA, self.LK.T, lower=True)
        return C.T @ C

    def loo(self, likelihood: LatentLikelihood, phi, f: np.ndarray) -> np.ndarray:
        r"""Leave-one-out log predictive densities: observation ``i``'s site removed from the
        marginal :math:`N(f_i, \Sigma_{ii})` (``f`` the posterior mean), the likelihood
        integrated over the cavity (module docstring; for a Laplace mode this is LA-LOO)."""
        return _cavity_loo(likelihood, phi, f, np.diag(self.cov()), self.W, self.a)


class ModeFactor(SiteFactor):
    r"""The factors of a Laplace mode :math:`\hat f`: sites of precision
    :math:`W = -\ell''(\hat f)`, and :math:`a = \ell'(\hat f) = K^{-1}(\hat f - m)`."""

    def __init__(self, K: np.ndarray, f_hat: np.ndarray, likelihood: LatentLikelihood, phi):
        _, d1, d2, _ = likelihood.derivatives(np.asarray(f_hat, float), phi)
        super().__init__(K, d1, -d2)
        self.d1 = d1


def joint_conditional(K: np.ndarray, r: np.ndarray):
    r"""Given latent values :math:`f` at the training inputs (a joint NUTS draw, ``r = f - m``),
    ``at(Ks, kss) -> (mean, var)`` of :math:`f_* - m_*` for any cross- and prior covariances:
    :math:`K_*^\top K^{-1} r` and :math:`k_{**} - K_*^\top K^{-1} K_*` (R&W eq. 2.19 without
    noise), from one Cholesky factor of ``K``."""
    L, _ = jittered_cholesky(K)
    alpha = cho_solve((L, True), r)

    def at(Ks, kss):
        V = solve_triangular(L, Ks, lower=True)
        return Ks.T @ alpha, kss - np.sum(V * V, axis=0)

    return at


def predict_latent(K, f_hat, likelihood, phi, Ks, kss, m_new):
    """:class:`ModeFactor` ``(K, f_hat, …).predict(Ks, kss, m_new)`` in one call."""
    return ModeFactor(K, f_hat, likelihood, phi).predict(Ks, kss, m_new)


def la_loo(result: LaplaceResult, likelihood: LatentLikelihood, phi) -> np.ndarray:
    """LA-LOO log predictive densities (module docstring) of a feasible Laplace result computed
    with ``gradient=True`` (which carries :math:`\\Sigma`; only its diagonal is used, which
    :meth:`LaplaceResult.cov_diag` gives without forming :math:`\\Sigma`)."""
    if isinstance(result, LaplaceResult):
        s2 = result.cov_diag()
    else:  # another Gaussian approximation with the same fields
        s2 = None if result.cov is None else np.diag(result.cov)
    if not result.feasible or s2 is None:
        raise ValueError("la_loo needs a feasible Laplace result computed with gradient=True")
    _, d1, d2, _ = likelihood.derivatives(result.f, phi)
    return _cavity_loo(likelihood, phi, result.f, s2, -d2, d1)


def _cavity_loo(likelihood, phi, f, s2, W, a) -> np.ndarray:
    """Remove each site (precision ``W``, natural location ``W f + a``) from the marginals
    :math:`N(f_i, s^2_i)` and integrate the likelihood over the cavity (module docstring)."""
    tau = 1.0 / s2 - W
    nu = f / s2 - (W * f + a)
    return log_predictive_density(likelihood, phi, nu / tau, 1.0 / tau)
