r"""Gaussian approximations to the latent posterior of GP classification (R&W ch. 3, PRML §6.4.5–6.4.6).

* Laplace: R&W Algorithm 3.1 (mode by Newton's method in the stable :math:`B = I + W^{1/2}KW^{1/2}`
  form), the approximate log evidence :math:`\log q(y \mid X, \theta)` (eq. 3.32), its gradient
  (Algorithm 5.1) and predictions (Algorithm 3.2).
* Expectation propagation for the probit likelihood: R&W Algorithm 3.5 (sequential site updates
  with rank-one updates of :math:`\Sigma`, recomputed from a Cholesky factor after each sweep),
  :math:`\log Z_{EP}` (eq. 3.65), its gradient (eq. 5.27) and predictions (Algorithm 3.6).

Labels are :math:`y \in \{-1, +1\}`. Everything is NumPy float64 with Cholesky solves; comments
cite the algorithm line they implement.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_solve, solve_triangular
from scipy.special import log_ndtr

from bayes_gp.classification.likelihoods import log_lik_derivatives, normal_hazard

__all__ = ["LaplaceState", "EPState", "laplace_mode", "laplace_grad", "ep_run", "ep_grad"]


def _chol(A: np.ndarray) -> np.ndarray:
    return np.linalg.cholesky(A)


@dataclass(frozen=True)
class LaplaceState:
    """Converged Laplace approximation at fixed hyperparameters."""

    f: np.ndarray  # posterior mode \hat f
    a: np.ndarray  # K^{-1} \hat f
    sW: np.ndarray  # W^{1/2}
    L: np.ndarray  # chol(I + W^{1/2} K W^{1/2})
    d1: np.ndarray  # grad log p(y | \hat f)
    d3: np.ndarray  # third derivatives
    log_evidence: float  # log q(y | X, theta), R&W eq. 3.32
    n_iter: int
    converged: bool = True  # False: max_iter Newton steps without meeting tol

    def predict_latent(self, K_star: np.ndarray, k_star_star: np.ndarray):
        """Latent predictive mean and variance, R&W Algorithm 3.2 lines 4–6."""
        mean = K_star.T @ self.d1  # line 4: f*_bar = k*^T grad log p(y|f)
        v = solve_triangular(self.L, self.sW[:, None] * K_star, lower=True)  # line 5
        var = k_star_star - np.sum(v * v, axis=0)  # line 6
        return mean, np.maximum(var, 0.0)


def laplace_mode(
    K: np.ndarray, y: np.ndarray, link: str, *, tol: float = 1e-10, max_iter: int = 200, f0=None
) -> LaplaceState:
    """R&W Algorithm 3.1: the mode of :math:`p(f \\mid X, y)` and :math:`\\log q(y \\mid X)`."""
    n = y.shape[0]
    f = np.zeros(n) if f0 is None else np.asarray(f0, float).copy()
    a = np.zeros(n) if f0 is None else np.linalg.lstsq(K, f, rcond=None)[0]

    def psi(a, f):
        return -0.5 * a @ f + np.sum(log_lik_derivatives(link, y, f)[0])

    obj = psi(a, f)
    n_iter = 0
    converged = False
    for _ in range(max_iter):
        n_iter += 1
        _, d1, d2, _ = log_lik_derivatives(link, y, f)
        W = -d2  # line 4
        sW = np.sqrt(W)
        L = _chol(np.eye(n) + sW[:, None] * K * sW[None, :])  # line 5: B = I + W½KW½
        b = W * f + d1  # line 6
        c = solve_triangular(L, sW * (K @ b), lower=True)
        a_new = b - sW * solve_triangular(L.T, c, lower=False)  # line 7
        # Newton step with step halving: log-concave likelihoods converge without it, but a
        # damped step protects against overshoot far from the mode.
        step = 1.0
        while True:
            a_try = a + step * (a_new - a)
            f_try = K @ a_try  # line 8
            obj_try = psi(a_try, f_try)
            if obj_try >= obj - 1e-12 or step < 1e-8:
                break
            step *= 0.5
        converged = abs(obj_try - obj) < tol * max(1.0, abs(obj))  # relative for huge eta
        a, f, obj = a_try, f_try, obj_try
        if converged:
            break
    logp, d1, d2, d3 = log_lik_derivatives(link, y, f)
    sW = np.sqrt(-d2)
    L = _chol(np.eye(n) + sW[:, None] * K * sW[None, :])
    log_q = -0.5 * a @ f + np.sum(logp) - np.sum(np.log(np.diag(L)))  # line 10, eq. 3.32
    return LaplaceState(f, a, sW, L, d1, d3, float(log_q), n_iter, bool(converged))


def laplace_grad(state: LaplaceState, K: np.ndarray, dK: list[np.ndarray]) -> np.ndarray:
    """R&W Algorithm 5.1: gradient of :math:`\\log q(y \\mid X, \\theta)` w.r.t. each parameter."""
    sW, L, a = state.sW, state.L, state.a
    # line 5: R = W½ Lᵀ\(L\W½) = W½ B⁻¹ W½ ; C = L\(W½K)
    R = sW[:, None] * cho_solve((L, True), np.diag(sW))
    C = solve_triangular(L, sW[:, None] * K, lower=True)
    # line 7: s2 = ∂ log q / ∂ f̂ = ½ diag((K⁻¹ + W)⁻¹) ∇³log p(y|f̂). Differentiating
    # -½ log|I + KW| with ∂W/∂f̂ = -∇³log p gives the + sign used here (checked against finite
    # differences in the tests; the book prints -½ with ∇³ of the negative log-likelihood).
    s2 = 0.5 * (np.diag(K) - np.sum(C * C, axis=0)) * state.d3
    grads = np.empty(len(dK))
    for j, Cj in enumerate(dK):
        s1 = 0.5 * a @ Cj @ a - 0.5 * np.sum(R * Cj)  # line 9 (tr(R Cj), R and Cj symmetric)
        b = Cj @ state.d1  # line 10
        s3 = b - K @ (R @ b)  # line 11
        grads[j] = s1 + s2 @ s3  # line 12
    return grads


@dataclass(frozen=True)
class EPState:
    """Converged EP approximation at fixed hyperparameters (probit likelihood)."""

    nu_t: np.ndarray  # site natural mean parameters \tilde\nu
    tau_t: np.ndarray  # site precisions \tilde\tau
    L: np.ndarray  # chol(I + S½KS½)
    sS: np.ndarray  # \tilde S^{1/2}
    mu: np.ndarray
    Sigma: np.ndarray
    log_evidence: float  # log Z_EP, R&W eq. 3.65
    n_sweeps: int
    converged: bool = True  # False: max_sweeps sweeps without meeting tol

    def predict_latent(self, K: np.ndarray, K_star: np.ndarray, k_star_star: np.ndarray):
        """Latent predictive mean and variance, R&W Algorithm 3.6 lines 2–6."""
        sS = self.sS
        z = sS * cho_solve((self.L, True), sS * (K @ self.nu_t))  # line 3
        mean = K_star.T @ (self.nu_t - z)  # line 4
        v = solve_triangular(self.L, sS[:, None] * K_star, lower=True)  # line 5
        var = k_star_star - np.sum(v * v, axis=0)  # line 6
        return mean, np.maximum(var, 0.0)


def _ep_log_z(K, y, nu_t, tau_t, L, Sigma, mu) -> float:
    """:math:`\\log Z_{EP}` (R&W eq. 3.65; the numerically stable arrangement of GPML)."""
    tau_n = 1.0 / np.diag(Sigma) - tau_t  # cavity precisions
    nu_n = mu / np.diag(Sigma) - nu_t
    var_n = 1.0 / tau_n
    lZ = log_ndtr(y * nu_n * var_n / np.sqrt(1.0 + var_n))
    return float(
        -np.sum(np.log(np.diag(L)))
        + np.sum(lZ)
        + 0.5 * nu_t @ Sigma @ nu_t
        + 0.5 * nu_n @ ((tau_t / tau_n * nu_n - 2.0 * nu_t) / (tau_t + tau_n))
        - 0.5 * np.sum(nu_t**2 / (tau_n + tau_t))
        + 0.5 * np.sum(np.log1p(tau_t / tau_n))
    )


def _ep_refresh(K, nu_t, tau_t):
    """Lines 11–13 of Algorithm 3.5: recompute the approximate posterior from the sites."""
    n = K.shape[0]
    sS = np.sqrt(tau_t)
    L = _chol(np.eye(n) + sS[:, None] * K * sS[None, :])
    V = solve_triangular(L, sS[:, None] * K, lower=True)
    Sigma = K - V.T @ V
    return L, sS, Sigma, Sigma @ nu_t


def ep_run(K: np.ndarray, y: np.ndarray, *, tol: float = 1e-8, max_sweeps: int = 200) -> EPState:
    """R&W Algorithm 3.5: expectation propagation for the probit likelihood."""
    n = y.shape[0]
    nu_t = np.zeros(n)
    tau_t = np.zeros(n)
    Sigma = K.copy()
    mu = np.zeros(n)
    log_z_old = -np.inf
    n_sweeps = 0
    converged = False
    for _ in range(max_sweeps):
        n_sweeps += 1
        for i in range(n):
            tau_c = 1.0 / Sigma[i, i] - tau_t[i]  # line 6: cavity
            nu_c = mu[i] / Sigma[i, i] - nu_t[i]
            var_c, mu_c = 1.0 / tau_c, nu_c / tau_c
            # line 7: moments of the tilted distribution (R&W eqs. 3.58)
            denom = np.sqrt(1.0 + var_c)
            z = y[i] * mu_c / denom
            h = normal_hazard(z)  # N(z)/Phi(z)
            mu_hat = mu_c + y[i] * var_c * h / denom
            var_hat = var_c - var_c**2 * h / (1.0 + var_c) * (z + h)
            # line 8: site updates
            # (probit sites have tau >= 0; clip rounding errors below 0)
            tau_new = max(1.0 / var_hat - tau_c, 0.0)
            d_tau = tau_new - tau_t[i]
            tau_t[i] = tau_new
            nu_t[i] = mu_hat / var_hat - nu_c
            # line 9: rank-one update of Sigma
            s = Sigma[:, i].copy()
            Sigma -= (d_tau / (1.0 + d_tau * s[i])) * np.outer(s, s)
            mu = Sigma @ nu_t  # line 10
        L, sS, Sigma, mu = _ep_refresh(K, nu_t, tau_t)  # lines 11-13
        log_z = _ep_log_z(K, y, nu_t, tau_t, L, Sigma, mu)
        if abs(log_z - log_z_old) < tol:
            converged = True
            break
        log_z_old = log_z
    return EPState(nu_t, tau_t, L, sS, mu, Sigma, log_z, n_sweeps, converged)


def ep_grad(state: EPState, K: np.ndarray, dK: list[np.ndarray]) -> np.ndarray:
    """R&W eq. 5.27: gradient of :math:`\\log Z_{EP}` w.r.t. each parameter."""
    sS, L, nu_t = state.sS, state.L, state.nu_t
    b = nu_t - sS * cho_solve((L, True), sS * (K @ nu_t))
    R = sS[:, None] * cho_solve((L, True), np.diag(sS))  # S½ B⁻¹ S½
    M = np.outer(b, b) - R
    return np.array([0.5 * np.sum(M * Cj) for Cj in dK])
