r"""The Laplace approximation of a latent GP for any likelihood, its evidence and exact gradient.

Model: :math:`f \sim N(m, K)`, :math:`y_i \mid f_i \sim p(y_i \mid f_i, \phi)` with a likelihood
of :mod:`bayes_gp.latent.likelihoods`. The mode :math:`\hat f` of

.. math::
   \Psi(f) = \log p(y \mid f, \phi) - \tfrac12 (f - m)^T K^{-1} (f - m)

is found by Newton's method (R&W Algorithm 3.1 generalised) in the whitened coordinates
:math:`f = m + L_K v`, :math:`K = L_K L_K^T`, where the negative Hessian is

.. math::
   A = I + L_K^T W L_K, \qquad W = -\mathrm{diag}\,\nabla\nabla \log p(y \mid f),

congruent to :math:`K^{-1} + W`, so that its Cholesky factor exists exactly when the Hessian
of :math:`-\Psi` is positive definite, for any sign of :math:`W`. For log-concave likelihoods
:math:`A \succeq I`; for the Student-t likelihood :math:`W` can be negative (Vanhatalo, Jylänki &
Vehtari 2009), and where :math:`A` is not positive definite along the way the Newton direction
uses :math:`W^+ = \max(W, 0)` (still an ascent direction) with a backtracking (Armijo) line
search on :math:`\Psi`. A stationary point at which :math:`A` is not positive definite (a saddle of
a multimodal posterior) is reported as *infeasible*: the log evidence is :math:`-\infty` with a
reason, never a silently wrong value.

The approximate log evidence (R&W eq. 3.32, with :math:`|B| = |I + KW| = |A|`):

.. math::
   \log q(y \mid \theta, \phi) = \log p(y \mid \hat f, \phi) - \tfrac12 \hat v^T \hat v
      - \tfrac12 \log |A|.

Its gradient (R&W Algorithm 5.1 / eqs. 5.22–5.24 generalised; Rue, Martino & Chopin 2009 §3 for
the same approximation inside hyperparameter inference). With :math:`\Sigma = (K^{-1} + W)^{-1}
= L_K A^{-1} L_K^T`, :math:`a = K^{-1}(\hat f - m)` (:math:`= \nabla\log p(y\mid\hat f)` at the
mode), :math:`R = (K + W^{-1})^{-1} = W - W\Sigma W` (Woodbury; valid for any sign of
:math:`W`), :math:`s_2 = \tfrac12 \mathrm{diag}(\Sigma)\,\ell'''` (the derivative of
:math:`-\tfrac12\log|A|` with respect to :math:`\hat f`) and :math:`u = (I + WK)^{-1} s_2 =
s_2 - W\Sigma s_2`:

.. math::
   \frac{\partial \log q}{\partial K} = \tfrac12 a a^T - \tfrac12 R
       + \tfrac12\left(u\,\ell'^T + \ell' u^T\right), \qquad
   \frac{\partial \log q}{\partial m} = a + u,

.. math::
   \frac{\partial \log q}{\partial \phi_j} = \sum_i \partial_{\phi_j}\ell_i
      + \tfrac12 \sum_i \Sigma_{ii}\, \partial_{\phi_j}\ell_i''
      + s_2^T \Sigma\, \partial_{\phi_j}\ell'.

The first terms are explicit (:math:`\hat f` fixed; the :math:`\tfrac12 aa^T - \tfrac12 R` of R&W
eq. 5.22), the last ones the implicit dependence through the mode,
:math:`d\hat f = (I + KW)^{-1}(dK\,\ell' + dm) + \Sigma\,d_\phi\ell'` (R&W eq. 5.24). The matrix
gradient is symmetric; for a kernel matrix :math:`K(\theta)` the chain rule is
:math:`\partial \log q/\partial\theta_k = \mathrm{tr}(G\,\partial K/\partial\theta_k)`
(:func:`grad_theta`). Cost: one Cholesky of :math:`K`, one of :math:`A` per Newton step, and
:math:`O(n^3)` for :math:`\Sigma` in the gradient.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_solve, lapack, solve_triangular

from bayes_gp.latent.likelihoods import LatentLikelihood

__all__ = ["LaplaceResult", "laplace", "grad_theta"]


@dataclass(frozen=True)
class LaplaceResult:
    """The Laplace approximation at fixed :math:`(K, m, \\phi)`.

    ``log_evidence`` is :math:`-\\infty` exactly when ``feasible`` is False, with ``reason``
    saying why. The gradients are ``None`` unless requested (and ``feasible``).
    """

    log_evidence: float
    f: np.ndarray  # the mode \hat f (the last iterate when infeasible)
    v: np.ndarray  # whitened mode, f = m + L_K v
    feasible: bool
    reason: str
    n_iter: int
    grad_K: np.ndarray | None = None
    grad_m: np.ndarray | None = None
    grad_phi: np.ndarray | None = None
    cov: np.ndarray | None = None  # Sigma = (K^{-1} + W)^{-1}, the Laplace posterior covariance


def _chol(A: np.ndarray) -> np.ndarray | None:
    L, info = lapack.dpotrf(A, lower=1, clean=1)
    if info != 0 or not np.all(np.isfinite(L)):
        return None
    return L


def _infeasible(f, v, reason, n_iter) -> LaplaceResult:
    return LaplaceResult(-np.inf, f, v, False, reason, n_iter)


def laplace(
    K: np.ndarray,
    m: np.ndarray,
    likelihood: LatentLikelihood,
    phi=(),
    *,
    f0: np.ndarray | None = None,
    tol: float = 1e-10,
    max_iter: int = 100,
    gradient: bool = True,
) -> LaplaceResult:
    r"""Mode, log evidence and (optionally) gradient of the Laplace approximation.

    Parameters
    ----------
    K : (n, n) array
        Prior covariance of the latent values (with any jitter already added); must be
        positive definite.
    m : (n,) array
        Prior mean of the latent values.
    likelihood : LatentLikelihood
        The observation model holding ``y``.
    phi : sequence of float
        The likelihood's own parameters, in ``likelihood.param_names`` order.
    f0 : (n,) array, optional
        Warm start for Newton's method (e.g. the previous mode); the answer does not depend on
        it beyond ``tol`` when the posterior is unimodal.
    tol : float
        Convergence when the Newton decrement :math:`g^T A^{-1} g` (twice the predicted increase
        of :math:`\Psi`) is below ``tol**2`` and the largest gradient entry below ``tol``.
    max_iter : int
        Newton steps before giving up (an infeasible result with that reason).
    gradient : bool
        Also compute :math:`\partial\log q/\partial K`, :math:`\partial/\partial m` and
        :math:`\partial/\partial\phi` (the formulas in the module docstring).
    """
    K = np.asarray(K, dtype=float)
    m = np.asarray(m, dtype=float)
    n = likelihood.n
    if K.shape != (n, n) or m.shape != (n,):
        raise ValueError(f"K must be ({n}, {n}) and m ({n},), got {K.shape} and {m.shape}")
    phi = np.asarray(phi, dtype=float).reshape(-1)
    LK = _chol(K)
    if LK is None:
        return _infeasible(m.copy(), np.zeros(n), "K is not positive definite", 0)
    if f0 is not None and np.all(np.isfinite(f0)):
        v = solve_triangular(LK, np.asarray(f0, float) - m, lower=True)
    else:
        v = np.zeros(n)

    def evaluate(v):
        f = m + LK @ v
        logp, d1, d2, d3 = likelihood.derivatives(f, phi)
        return f, float(np.sum(logp)) - 0.5 * float(v @ v), d1, d2, d3

    f, psi, d1, d2, d3 = evaluate(v)
    if not np.isfinite(psi):
        v = np.zeros(n)
        f, psi, d1, d2, d3 = evaluate(v)
    converged = False
    n_iter = 0
    for n_iter in range(1, max_iter + 1):  # noqa: B007 (n_iter is reported)
        g = LK.T @ d1 - v  # gradient of Psi in v
        W = -d2
        LA = _chol(np.eye(n) + LK.T @ (W[:, None] * LK))
        concave = LA is not None
        if not concave:  # not concave here: Newton direction with W+ = max(W, 0)
            LA = _chol(np.eye(n) + LK.T @ (np.maximum(W, 0.0)[:, None] * LK))
        dv = cho_solve((LA, True), g)
        dec = float(g @ dv)
        scale = 1.0 + float(np.max(np.abs(v)))
        if dec < tol**2 and np.max(np.abs(g)) < tol * scale:
            converged = True
            if concave:  # the pending Newton step: quadratic convergence to machine precision
                f_t, psi_t, d1_t, d2_t, d3_t = evaluate(v + dv)
                if np.isfinite(psi_t):
                    v = v + dv
                    f, psi, d1, d2, d3 = f_t, psi_t, d1_t, d2_t, d3_t
            break
        if concave and dec < 1e-9 * (1.0 + abs(psi)):
            # quadratic-convergence region: the predicted increase of Psi is at its rounding
            # level, where a line search would only see noise; take the full Newton step
            v = v + dv
            f, psi, d1, d2, d3 = evaluate(v)
            continue
        # backtracking line search with the Armijo condition
        t = 1.0
        for _ in range(60):
            f_t, psi_t, d1_t, d2_t, d3_t = evaluate(v + t * dv)
            if np.isfinite(psi_t) and psi_t >= psi + 1e-4 * t * dec:
                break
            t *= 0.5
        else:
            # no increase representable: we are at the mode to machine precision
            converged = np.max(np.abs(g)) < max(tol, 1e-6) * (1.0 + np.max(np.abs(LK.T @ d1)))
            break
        v = v + t * dv
        f, psi, d1, d2, d3 = f_t, psi_t, d1_t, d2_t, d3_t
    if not converged:
        gmax = float(np.max(np.abs(LK.T @ d1 - v)))
        return _infeasible(
            f,
            v,
            f"Newton's method did not converge after {n_iter} steps (largest gradient entry "
            f"{gmax:.3g}; the line search stalled or max_iter={max_iter} was reached)",
            n_iter,
        )

    W = -d2
    LA = _chol(np.eye(n) + LK.T @ (W[:, None] * LK))
    if LA is None:
        return _infeasible(
            f,
            v,
            "the stationary point of the latent posterior is not a maximum: its Hessian "
            "K^-1 + W is not positive definite (a multimodal posterior, e.g. a Student-t "
            "likelihood with conflicting outliers)",
            n_iter,
        )
    logq = psi - float(np.sum(np.log(np.diag(LA))))
    if not gradient:
        return LaplaceResult(logq, f, v, True, "", n_iter)

    C = solve_triangular(LA, LK.T, lower=True)  # A^{-1/2} L_K^T
    Sigma = C.T @ C  # (K^-1 + W)^-1
    a = solve_triangular(LK.T, v, lower=False)  # K^-1 (f - m)
    dS = np.diag(Sigma)
    s2 = 0.5 * dS * d3
    u = s2 - W * (Sigma @ s2)
    R = np.diag(W) - W[:, None] * Sigma * W[None, :]
    grad_K = 0.5 * np.outer(a, a) - 0.5 * R + 0.5 * (np.outer(u, d1) + np.outer(d1, u))
    grad_K = 0.5 * (grad_K + grad_K.T)  # exactly symmetric (the products round differently)
    grad_m = a + u
    dl, dd1, dd2 = likelihood.phi_derivatives(f, phi)
    grad_phi = dl.sum(axis=1) + 0.5 * dd2 @ dS + dd1 @ (Sigma @ s2)
    return LaplaceResult(logq, f, v, True, "", n_iter, grad_K, grad_m, grad_phi, Sigma)


def grad_theta(grad_K: np.ndarray, dK: list[np.ndarray]) -> np.ndarray:
    r""":math:`\partial\log q/\partial\theta_k = \mathrm{tr}(G\,\partial K/\partial\theta_k)`
    (R&W eq. 5.23 with :math:`G = \partial \log q/\partial K` symmetric)."""
    return np.array([float(np.sum(grad_K * D)) for D in dK])
