r"""Expectation propagation for a latent GP with the Bernoulli-probit likelihood (R&W §3.6).

Model: :math:`f \sim N(m, K)`, :math:`p(y_i \mid f_i) = \Phi(s_i f_i)`, :math:`s_i = 2y_i - 1`.
EP replaces each likelihood term by an unnormalised Gaussian site
:math:`\tilde t_i(f_i) \propto N(f_i \mid \tilde\mu_i, \tilde\tau_i^{-1})` chosen so that the
site's cavity times the true term and the cavity times the site have the same first two moments
(R&W Algorithm 3.5: sequential site updates with rank-one updates of :math:`\Sigma`, recomputed
from a Cholesky factor of :math:`B = I + \tilde S^{1/2} K \tilde S^{1/2}` after each sweep). The
tilted moments of the probit are closed-form (R&W eq. 3.58). The algorithm runs in the
coordinates :math:`g = f - m` (prior :math:`N(0, K)`), with the likelihood
:math:`\Phi(s_i (m_i + g_i))`: a prior mean only shifts the tilted moments.

The EP approximation of the log evidence is :math:`\log Z_{EP}` (R&W eq. 3.65, in the numerically
stable arrangement of GPML). At a fixed point its derivative with respect to the site parameters
vanishes, so its gradient with respect to the prior is that of the Gaussian
:math:`\log N(\tilde\mu \mid m, K + \tilde S^{-1})` (R&W eq. 5.27):

.. math::
   \frac{\partial \log Z_{EP}}{\partial K} = \tfrac12\left(b b^T - R\right), \qquad
   \frac{\partial \log Z_{EP}}{\partial m} = b,

with :math:`R = (K + \tilde S^{-1})^{-1} = \tilde S^{1/2} B^{-1} \tilde S^{1/2}` and
:math:`b = R(\tilde\mu - m) = (I - \tilde S^{1/2} B^{-1} \tilde S^{1/2} K)\tilde\nu` (with
:math:`\tilde\nu = \tilde S \tilde\mu` in the :math:`g` coordinates). The approximate posterior is
:math:`N(\mu, \Sigma)`, :math:`\Sigma = (K^{-1} + \tilde S)^{-1}`: prior times Gaussian sites of
precision :math:`\tilde\tau`, which is how predictions and the cavity leave-one-out use it
(:class:`bayes_gp.latent.predictive.SiteFactor`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_solve, lapack, solve_triangular
from scipy.special import log_ndtr

from bayes_gp.latent.likelihoods import Bernoulli, LatentLikelihood, normal_hazard
from bayes_gp.latent.op import LaplaceLogp

__all__ = ["EPState", "EPResult", "EPEvidence", "expectation_propagation", "ep_run"]


@dataclass(frozen=True)
class EPState:
    """Converged EP approximation at fixed :math:`(K, m)` (in the coordinates :math:`g = f - m`).

    ``mu`` is the posterior mean of :math:`f` (the prior mean included), ``Sigma`` its
    covariance; ``nu_t``, ``tau_t`` the site parameters :math:`\\tilde\\nu = \\tilde\\tau
    \\tilde\\mu` (of :math:`g`) and :math:`\\tilde\\tau`; ``L`` the Cholesky factor of
    :math:`I + \\tilde S^{1/2} K \\tilde S^{1/2}`, ``sS`` :math:`\\tilde S^{1/2}`.
    """

    nu_t: np.ndarray
    tau_t: np.ndarray
    L: np.ndarray
    sS: np.ndarray
    mu: np.ndarray
    Sigma: np.ndarray
    log_evidence: float  # log Z_EP, R&W eq. 3.65
    n_sweeps: int
    converged: bool = True  # False: max_sweeps sweeps without meeting tol


@dataclass(frozen=True)
class EPResult:
    """EP at fixed :math:`(K, m)` with the interface of
    :class:`~bayes_gp.latent.laplace.LaplaceResult`: ``f`` the posterior mean, the log evidence
    :math:`\\log Z_{EP}` and its gradients (module docstring). ``feasible`` is False only where
    :math:`B` cannot be factorised or the evidence is not finite; ``converged`` says whether the
    sweeps met the tolerance."""

    log_evidence: float
    f: np.ndarray
    feasible: bool
    reason: str
    n_iter: int
    converged: bool
    state: EPState | None = None
    grad_K: np.ndarray | None = None
    grad_m: np.ndarray | None = None
    grad_phi: np.ndarray | None = None

    @property
    def variational(self) -> np.ndarray:
        """The site precisions :math:`\\tilde\\tau` (the Gaussian sites of the posterior)."""
        return self.state.tau_t


def _chol(A: np.ndarray) -> np.ndarray:
    L, info = lapack.dpotrf(A, lower=1, clean=1)
    if info != 0 or not np.all(np.isfinite(L)):
        raise np.linalg.LinAlgError("I + S^1/2 K S^1/2 is not numerically positive definite")
    return L


def _log_z(s, m, nu_t, tau_t, L, Sigma, mu_g) -> float:
    """:math:`\\log Z_{EP}` (R&W eq. 3.65; GPML's stable arrangement), :math:`g` coordinates."""
    tau_n = 1.0 / np.diag(Sigma) - tau_t  # cavity precisions
    nu_n = mu_g / np.diag(Sigma) - nu_t
    var_n = 1.0 / tau_n
    lZ = log_ndtr(s * (nu_n * var_n + m) / np.sqrt(1.0 + var_n))
    return float(
        -np.sum(np.log(np.diag(L)))
        + np.sum(lZ)
        + 0.5 * nu_t @ Sigma @ nu_t
        + 0.5 * nu_n @ ((tau_t / tau_n * nu_n - 2.0 * nu_t) / (tau_t + tau_n))
        - 0.5 * np.sum(nu_t**2 / (tau_n + tau_t))
        + 0.5 * np.sum(np.log1p(tau_t / tau_n))
    )


def _refresh(K, nu_t, tau_t):
    """R&W Algorithm 3.5 lines 11–13: the approximate posterior recomputed from the sites."""
    n = K.shape[0]
    sS = np.sqrt(tau_t)
    L = _chol(np.eye(n) + sS[:, None] * K * sS[None, :])
    V = solve_triangular(L, sS[:, None] * K, lower=True)
    Sigma = K - V.T @ V
    return L, sS, Sigma, Sigma @ nu_t


def ep_run(
    K: np.ndarray, s: np.ndarray, m: np.ndarray | None = None, *, tol: float = 1e-8,
    max_sweeps: int = 200,
) -> EPState:  # fmt: skip
    """R&W Algorithm 3.5 for labels ``s`` in :math:`\\{-1, +1\\}`, prior :math:`N(m, K)`.

    Raises ``numpy.linalg.LinAlgError`` where :math:`B` cannot be factorised.
    """
    n = s.shape[0]
    m = np.zeros(n) if m is None else np.asarray(m, float)
    nu_t = np.zeros(n)
    tau_t = np.zeros(n)
    Sigma = K.copy()
    mu = np.zeros(n)
    log_z_old = -np.inf
    n_sweeps = 0
    converged = False
    L, sS = np.eye(n), np.zeros(n)
    log_z = -np.inf
    for _ in range(max_sweeps):
        n_sweeps += 1
        for i in range(n):
            tau_c = 1.0 / Sigma[i, i] - tau_t[i]  # line 6: cavity
            nu_c = mu[i] / Sigma[i, i] - nu_t[i]
            var_c, mu_c = 1.0 / tau_c, nu_c / tau_c
            # line 7: moments of the tilted distribution (R&W eq. 3.58), shifted by m_i
            denom = np.sqrt(1.0 + var_c)
            z = s[i] * (mu_c + m[i]) / denom
            h = normal_hazard(z)  # N(z)/Phi(z)
            mu_hat = mu_c + s[i] * var_c * h / denom
            var_hat = var_c - var_c**2 * h / (1.0 + var_c) * (z + h)
            # line 8: site updates (probit sites have tau >= 0; clip rounding below 0)
            tau_new = max(1.0 / var_hat - tau_c, 0.0)
            d_tau = tau_new - tau_t[i]
            tau_t[i] = tau_new
            nu_t[i] = mu_hat / var_hat - nu_c
            # line 9: rank-one update of Sigma
            col = Sigma[:, i].copy()
            Sigma -= (d_tau / (1.0 + d_tau * col[i])) * np.outer(col, col)
            mu = Sigma @ nu_t  # line 10
        L, sS, Sigma, mu = _refresh(K, nu_t, tau_t)  # lines 11-13
        log_z = _log_z(s, m, nu_t, tau_t, L, Sigma, mu)
        if abs(log_z - log_z_old) < tol:
            converged = True
            break
        log_z_old = log_z
    return EPState(nu_t, tau_t, L, sS, m + mu, Sigma, log_z, n_sweeps, converged)


def expectation_propagation(
    K: np.ndarray, m: np.ndarray, likelihood: LatentLikelihood, phi=(), *, gradient: bool = True,
    tol: float = 1e-8, max_sweeps: int = 200,
) -> EPResult:  # fmt: skip
    """EP for a :class:`~bayes_gp.latent.likelihoods.Bernoulli` likelihood with the probit link:
    the posterior, :math:`\\log Z_{EP}` and (``gradient=True``) its gradients (module
    docstring). ``phi`` is empty (the likelihood has no parameters)."""
    if not (isinstance(likelihood, Bernoulli) and likelihood.link == "probit"):
        raise ValueError(
            "EP is implemented for the bernoulli likelihood with the probit link only (its tilted "
            "moments are closed-form); use the Laplace approximation or NUTS otherwise"
        )
    K = np.asarray(K, float)
    m = np.asarray(m, float)
    s = 2.0 * likelihood.y - 1.0
    try:
        with np.errstate(all="ignore"):
            state = ep_run(K, s, m, tol=tol, max_sweeps=max_sweeps)
    except (np.linalg.LinAlgError, ValueError) as err:
        # B not factorisable, or non-finite values (scipy's finiteness checks raise ValueError)
        return EPResult(-np.inf, m.copy(), False, f"EP broke down: {err}", 0, False)
    if not (np.isfinite(state.log_evidence) and np.all(np.isfinite(state.mu))):
        return EPResult(-np.inf, state.mu, False, "EP produced non-finite values", state.n_sweeps,
                        False, state)  # fmt: skip
    if not gradient:
        return EPResult(state.log_evidence, state.mu, True, "", state.n_sweeps, state.converged,
                        state)  # fmt: skip
    sS, L = state.sS, state.L
    b = state.nu_t - sS * cho_solve((L, True), sS * (K @ state.nu_t))
    R = sS[:, None] * cho_solve((L, True), np.diag(sS))  # S^1/2 B^-1 S^1/2
    grad_K = 0.5 * (np.outer(b, b) - R)
    grad_K = 0.5 * (grad_K + grad_K.T)
    return EPResult(state.log_evidence, state.mu, True, "", state.n_sweeps, state.converged, state,
                    grad_K, b, np.zeros(0))  # fmt: skip


class EPEvidence(LaplaceLogp):
    r"""``(K, m, phi) -> (log Z_EP, d/dK, d/dm, d/dphi)``: the EP approximation of the log
    evidence (Bernoulli-probit) in place of the Laplace evidence, with the same interface and
    backends as :class:`~bayes_gp.latent.op.LaplaceLogp`. An EP run that does not converge is an
    infeasible point (:math:`-\infty`) for the optimiser, with the reason recorded."""

    def __init__(self, likelihood: LatentLikelihood, *, tol: float = 1e-8, max_sweeps: int = 200):
        super().__init__(likelihood, tol=tol)
        self.max_sweeps = int(max_sweeps)
        expectation_propagation(np.eye(likelihood.n), np.zeros(likelihood.n), likelihood, gradient=False,
           max_sweeps=1)  # fmt: skip  (refuses a likelihood EP does not implement)

    def __str__(self):
        return "EPEvidence(Bernoulli, probit)"

    def _solve(self, K, m, phi):
        res = expectation_propagation(K, m, self.likelihood, phi, tol=self.tol, max_sweeps=self.max_sweeps)
        if res.feasible and not res.converged:
            return EPResult(-np.inf, res.f, False,
                            f"EP did not converge in {res.n_iter} sweeps", res.n_iter, False)  # fmt: skip
        return res
