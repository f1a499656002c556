r"""Variational inference for a latent GP: a Gaussian :math:`q(f)`, its evidence lower bound and
the bound's exact gradient.

Model: :math:`f \sim N(m, K)`, :math:`y_i \mid f_i \sim p(y_i \mid f_i, \phi)` with a likelihood of
:mod:`bayes_gp.latent.likelihoods`. Both methods return a :class:`VIResult`, whose fields are those
of :class:`bayes_gp.latent.laplace.LaplaceResult` (so that callers treat the two alike) plus the
bound's ``history`` and the ``variational`` parameters. ``log_evidence`` is a *lower bound* on
:math:`\log p(y \mid K, m, \phi)` (up to Gauss–Hermite quadrature error in :func:`gaussian_kl`).

**Jaakkola–Jordan** (:func:`jaakkola_jordan`; Bernoulli likelihood, logit link). With
:math:`s = 2y - 1` and :math:`z = s f`, the logistic sigmoid has the local bound (Jaakkola &
Jordan 2000; Bishop, PRML §10.6, from eq. 10.144)

.. math::
   \sigma(z) \ge \sigma(\xi) \exp\left\{\frac{z - \xi}{2} - \lambda(\xi)(z^2 - \xi^2)\right\},
   \qquad \lambda(\xi) = \frac{\sigma(\xi) - 1/2}{2\xi} = \frac{\tanh(\xi/2)}{4\xi}
   \quad (\lambda(0) = 1/8),

exact at :math:`z = \pm\xi`. It is Gaussian in :math:`f` (:math:`z^2 = f^2`), so given
:math:`\xi` the bound's posterior is Gaussian in closed form (PRML eqs. 10.157–10.158 with the GP
prior as :math:`S_0`, :math:`\Lambda = \mathrm{diag}\,\lambda(\xi)`):

.. math::
   \Sigma = (K^{-1} + 2\Lambda)^{-1}, \qquad \mu = \Sigma\,(K^{-1} m + s/2),

and the EM update of the local parameters is :math:`\xi_i^2 = \Sigma_{ii} + \mu_i^2` (PRML eq.
10.163), which never decreases the bound; we accelerate it by adaptive over-relaxation
(Salakhutdinov & Roweis 2003), keeping an over-relaxed step only where its bound is at least that
of the plain EM step, so that the bound still never decreases. The bound (PRML eq. 10.164 with
prior mean :math:`m` and covariance :math:`K`)

.. math::
   \log p(y) \ge \tfrac12 \log\frac{|\Sigma|}{|K|} - \tfrac12 m^T K^{-1} m
     + \tfrac12 \mu^T \Sigma^{-1} \mu
     + \sum_i \left[\log\sigma(\xi_i) - \frac{\xi_i}{2} + \lambda(\xi_i)\,\xi_i^2\right]

is a Gaussian-regression marginal likelihood in disguise: completing the square in
:math:`s^T f/2 - f^T \Lambda f` gives, with pseudo-observations :math:`t = s / (4\lambda)` of
noise variance :math:`(2\Lambda)^{-1}`,

.. math::
   \mathcal{L}(\xi) = \log N\!\left(t \mid m, K + (2\Lambda)^{-1}\right)
     + \sum_i \left[\tfrac12\log\frac{2\pi}{2\lambda_i} + \frac{1}{16\lambda_i}
     + \log\sigma(\xi_i) - \frac{\xi_i}{2} + \lambda_i \xi_i^2\right].

We evaluate it in that form, through :math:`B = I + 2\Lambda^{1/2} K \Lambda^{1/2}` as in R&W
Algorithm 3.1 (its eigenvalues lie in :math:`[1, 1 + \|K\|/4]`), never forming :math:`K^{-1}`;
then :math:`\alpha = (K + (2\Lambda)^{-1})^{-1}(t - m)`, :math:`\mu = m + K\alpha`. At the EM fixed
point :math:`\partial\mathcal{L}/\partial\xi = 0`, so by the envelope theorem the derivative at
fixed :math:`\xi` is the total one (R&W eq. 5.9 for the pseudo-observations; Gibbs & MacKay 2000
use the same bound for hyperparameter learning):

.. math::
   \frac{\partial\mathcal{L}}{\partial K} = \tfrac12\left(\alpha\alpha^T
      - (K + (2\Lambda)^{-1})^{-1}\right), \qquad
   \frac{\partial\mathcal{L}}{\partial m} = \alpha.

**Gaussian KL** (:func:`gaussian_kl`; any likelihood). :math:`q(f) = N(\mu, \Sigma)` maximises

.. math::
   \mathcal{L}(q) = \sum_i E_{q}[\ell_i(f_i, \phi)] - \mathrm{KL}(q \,\|\, N(m, K)),
   \qquad \ell_i = \log p(y_i \mid f_i, \phi),

.. math::
   \mathrm{KL} = \tfrac12\left[\mathrm{tr}(K^{-1}\Sigma) + (\mu - m)^T K^{-1} (\mu - m) - n
      + \log\frac{|K|}{|\Sigma|}\right].

The stationary conditions :math:`\partial\mathcal{L}/\partial\mu = 0`,
:math:`\partial\mathcal{L}/\partial\Sigma = 0` of the free-form Gaussian give (Opper & Archambeau
2009) :math:`\mu = m + K\nu`, :math:`\Sigma = (K^{-1} + \mathrm{diag}\,\lambda)^{-1}`
with :math:`\nu = E_q[\ell']`, :math:`\lambda = -E_q[\ell''] = -2\,\partial E_q[\ell]/\partial
\Sigma_{ii}`: the optimum lies in this :math:`2n`-parameter family, which we optimise. The
one-dimensional expectations use Gauss–Hermite quadrature with ``n_quad`` nodes,
:math:`E_q[g(f_i)] \approx \sum_k w_k\, g(\mu_i + \sqrt{\Sigma_{ii}}\, x_k)`, and the gradient is
that of the quadrature rule itself (:math:`\partial/\partial\Sigma_{ii} = \sum_k w_k x_k
\ell'(\mu_i + \sqrt{\Sigma_{ii}} x_k)/(2\sqrt{\Sigma_{ii}})`, which is :math:`\tfrac12
E_q[\ell'']` up to quadrature error by Stein's lemma), so that the optimised objective and its
gradient agree to rounding. With :math:`M = I + L_K^T \Lambda L_K` (congruent to :math:`K^{-1} +
\Lambda`, so its Cholesky factor exists exactly when :math:`\Sigma` is positive definite, for any
sign of :math:`\lambda`; the Student-t likelihood can give :math:`\lambda_i < 0`), or :math:`M = B
= I + \Lambda^{1/2} K \Lambda^{1/2}` when :math:`\lambda \ge 0` (same determinant and same
:math:`\mathrm{tr}\,M^{-1}`), and the whitened mean :math:`v = L_K^{-1}(\mu - m) = L_K^T \nu`,

.. math::
   \mathrm{KL} = \tfrac12\left[\mathrm{tr}(M^{-1}) + v^T v - n + \log|M|\right].

The gradient in the variational parameters (chain rule through :math:`d\mu = K\,d\nu`,
:math:`d\Sigma = -\Sigma\, d\Lambda\, \Sigma`) is

.. math::
   \nabla_\nu\mathcal{L} = K\left(E_q[\ell'] - \nu\right), \qquad
   \nabla_\lambda\mathcal{L} = \tfrac12 (\Sigma \circ \Sigma)(\lambda^\star - \lambda), \qquad
   \lambda^\star = -2\,\partial E_q[\ell]/\partial\,\mathrm{diag}\,\Sigma,

(:func:`gaussian_kl_elbo`). The optimiser starts from the Laplace approximation
(:math:`\hat v`, :math:`\lambda = -\ell''(\hat f)`) and takes Newton steps in :math:`(v,
\lambda)`. With :math:`P = \Sigma\circ\Sigma`, :math:`\tilde W = -E_q[\ell'']`, :math:`k_i =
\partial^2 E_q[\ell_i]/\partial\mu_i\partial\Sigma_{ii}` and :math:`D_i = \partial^2 E_q[\ell_i] /
\partial\Sigma_{ii}^2` (all exact for the quadrature rule), the Hessian is, up to a term
proportional to the residual :math:`\lambda^\star - \lambda` (which vanishes at the optimum, so the
convergence stays quadratic),

.. math::
   H = -\begin{pmatrix} I + L_K^T \tilde W L_K & L_K^T k P \\ P k L_K & \tfrac12 P - PDP
       \end{pmatrix}.

Where :math:`H` is not negative definite (far from the optimum, or for the non-log-concave
Student-t likelihood) the step is block-diagonal instead: Newton in :math:`v` at fixed
:math:`\Sigma` with :math:`\tilde W^+ = \max(\tilde W, 0)` as in
:func:`bayes_gp.latent.laplace.laplace`, and :math:`d\lambda = (I - 2\min(D, 0)P)^{-1}
(\lambda^\star - \lambda)`, which is Opper & Archambeau's fixed-point iteration
:math:`\lambda \leftarrow \lambda^\star` where :math:`D \ge 0`. Both blocks are the gradient times
a positive-definite matrix (:math:`P` is positive definite by the Schur product theorem), so the
step is an ascent direction, and a backtracking (Armijo) line search on :math:`\mathcal{L}` makes
every iteration increase the bound. A fixed point is a stationary point of the free-form problem;
for a multimodal posterior (Student-t) it is a local optimum.

The gradient of the optimal bound: since the free-form optimum lies inside the family, the
envelope theorem applies to the free-form :math:`(\mu, \Sigma)` held fixed (not to
:math:`(\nu, \lambda)`, through which :math:`\mu` and :math:`\Sigma` depend on :math:`K`). Only
the KL term depends on :math:`K` and :math:`m`; with :math:`K^{-1}\Sigma K^{-1} - K^{-1} =
\Lambda\Sigma\Lambda - \Lambda`,

.. math::
   \frac{\partial\mathcal{L}}{\partial K} = \tfrac12\left(K^{-1}\Sigma K^{-1}
      + K^{-1}(\mu - m)(\mu - m)^T K^{-1} - K^{-1}\right)
      = \tfrac12\left(\nu\nu^T - \Lambda + \Lambda\Sigma\Lambda\right),

.. math::
   \frac{\partial\mathcal{L}}{\partial m} = \nu, \qquad
   \frac{\partial\mathcal{L}}{\partial\phi_j} = \sum_i E_q[\partial_{\phi_j}\ell_i].

(:math:`\Lambda - \Lambda\Sigma\Lambda = (K + \Lambda^{-1})^{-1}`: the same form as the
Jaakkola–Jordan gradient, with :math:`\alpha = \nu`.) For a kernel matrix :math:`K(\theta)` the
chain rule is :math:`\mathrm{tr}(G\,\partial K/\partial\theta_k)`
(:func:`bayes_gp.latent.laplace.grad_theta`).

References
----------
C. M. Bishop (2006), *Pattern Recognition and Machine Learning*, §10.6, eqs. 10.144–10.164.
M. N. Gibbs and D. J. C. MacKay (2000), "Variational Gaussian process classifiers", IEEE
Transactions on Neural Networks 11(6), 1458–1464.
T. S. Jaakkola and M. I. Jordan (2000), "Bayesian parameter estimation via variational methods",
Statistics and Computing 10, 25–37.
M. Opper and C. Archambeau (2009), "The variational Gaussian approximation revisited", Neural
Computation 21(3), 786–792.
C. E. Rasmussen and C. K. I. Williams (2006), *Gaussian Processes for Machine Learning* (R&W),
Algorithm 3.1, eqs. 2.30 and 5.9.
R. Salakhutdinov and S. Roweis (2003), "Adaptive overrelaxed bound optimization methods", Proc.
20th International Conference on Machine Learning, 664–671.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy.linalg import cho_solve, solve_triangular

from bayes_gp.latent.laplace import _chol, laplace
from bayes_gp.latent.likelihoods import Bernoulli, LatentLikelihood

__all__ = ["site_precision", "VIResult", "gaussian_kl", "gaussian_kl_elbo", "jaakkola_jordan"]

_EMPTY = np.zeros(0)


@dataclass(frozen=True)
class VIResult:
    """A Gaussian variational approximation :math:`q(f) = N(f, \\Sigma)` at fixed
    :math:`(K, m, \\phi)`.

    The first ten fields are those of :class:`bayes_gp.latent.laplace.LaplaceResult`, in the same
    order. ``log_evidence`` is the evidence lower bound, :math:`-\\infty` exactly when
    ``feasible`` is False, with ``reason`` saying why. The gradients (of the bound with respect to
    ``K`` (symmetric), ``m`` and ``phi``) are ``None`` unless requested (and ``feasible``).
    ``history`` holds the bound after every iteration (non-decreasing); ``variational`` the
    local parameters :math:`\\xi` (:func:`jaakkola_jordan`) or :math:`\\lambda`
    (:func:`gaussian_kl`).
    """

    log_evidence: float
    f: np.ndarray  # the mean mu of q(f) (the last iterate when infeasible)
    v: np.ndarray  # whitened mean, f = m + L_K v
    feasible: bool
    reason: str
    n_iter: int
    grad_K: np.ndarray | None = None
    grad_m: np.ndarray | None = None
    grad_phi: np.ndarray | None = None
    cov: np.ndarray | None = None  # Sigma, the covariance of q(f)
    history: np.ndarray = field(default_factory=lambda: _EMPTY.copy())
    variational: np.ndarray = field(default_factory=lambda: _EMPTY.copy())


def _check_inputs(
    K: np.ndarray, m: np.ndarray, likelihood: LatentLikelihood, phi
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    K = np.asarray(K, dtype=float)
    m = np.asarray(m, dtype=float)
    n = likelihood.n
    if K.shape != (n, n) or m.shape != (n,):
        raise ValueError(f"K must be ({n}, {n}) and m ({n},), got {K.shape} and {m.shape}")
    phi = np.asarray(phi, dtype=float).reshape(-1)
    if phi.size != likelihood.n_phi:
        raise ValueError(
            f"{type(likelihood).__name__} takes {likelihood.n_phi} parameter value(s) "
            f"{likelihood.param_names}, got {phi.size}"
        )
    return K, m, phi


# --------------------------------------------------------------------------------------------
# Jaakkola–Jordan
# --------------------------------------------------------------------------------------------


def _jj_lambda(xi: np.ndarray) -> np.ndarray:
    r""":math:`\lambda(\xi) = \tanh(\xi/2)/(4\xi)`, with the series :math:`\tfrac18(1 -
    \xi^2/12)` near 0 (the next term is :math:`O(\xi^4)`)."""
    xi = np.abs(xi)
    small = xi < 1e-4
    safe = np.where(small, 1.0, xi)
    return np.where(small, 0.125 * (1.0 - xi * xi / 12.0), np.tanh(0.5 * safe) / (4.0 * safe))


class _JJState(NamedTuple):
    bound: float
    alpha: np.ndarray  # (K + (2 Lambda)^-1)^-1 (t - m)
    mu: np.ndarray
    sigma_diag: np.ndarray
    sw: np.ndarray  # (2 lambda)^(1/2)
    LB: np.ndarray  # chol(I + sw K sw)
    C: np.ndarray  # L_B^-1 sw K, Sigma = K - C^T C


def _jj_evaluate(K: np.ndarray, m: np.ndarray, s: np.ndarray, xi: np.ndarray) -> _JJState | None:
    """The bound, q(f) and the pieces of the gradient at local parameters ``xi``."""
    n = m.size
    lam = _jj_lambda(xi)
    w = 2.0 * lam  # precision of the pseudo-observations
    sw = np.sqrt(w)
    LB = _chol(np.eye(n) + sw[:, None] * K * sw[None, :])
    if LB is None:
        return None
    t = s / (2.0 * w)  # s / (4 lambda)
    r = t - m
    alpha = sw * cho_solve((LB, True), sw * r)
    log_sig = -np.logaddexp(0.0, -xi)
    bound = (
        -0.5 * float(r @ alpha)
        - float(np.sum(np.log(np.diag(LB))))
        + float(np.sum(1.0 / (16.0 * lam) + log_sig - 0.5 * xi + lam * xi * xi))
    )
    mu = m + K @ alpha
    C = solve_triangular(LB, sw[:, None] * K, lower=True)
    sigma_diag = np.diag(K) - np.sum(C * C, axis=0)
    return _JJState(bound, alpha, mu, sigma_diag, sw, LB, C)


def jaakkola_jordan(
    K: np.ndarray,
    m: np.ndarray,
    likelihood: LatentLikelihood,
    phi=(),
    *,
    xi0: np.ndarray | None = None,
    tol: float = 1e-10,
    max_iter: int = 500,
    gradient: bool = True,
) -> VIResult:
    r"""The Jaakkola–Jordan variational bound for GP classification with the logit link.

    EM on the local parameters :math:`\xi` (PRML §10.6; Gibbs & MacKay 2000): given :math:`\xi`,
    :math:`q(f) = N(\mu, \Sigma)` in closed form; then :math:`\xi_i^2 = \Sigma_{ii} + \mu_i^2`.
    Formulas in the module docstring.

    Parameters
    ----------
    K : (n, n) array
        Prior covariance of the latent values (with any jitter already added); must be
        positive definite.
    m : (n,) array
        Prior mean of the latent values.
    likelihood : Bernoulli
        Binary observations with ``link="logit"`` (the bound is specific to the logistic
        sigmoid; use :func:`gaussian_kl` for any other likelihood).
    phi : sequence of float
        Must be empty (the Bernoulli likelihood has no parameters).
    xi0 : (n,) array, optional
        Starting local parameters (default :math:`\sqrt{K_{ii} + m_i^2}`, the EM update from
        :math:`q = ` prior). Only :math:`|\xi|` matters.
    tol : float
        Convergence when the bound's increase in one EM step is below ``tol`` relative to
        :math:`\max(1, |\mathcal{L}|)` and the largest change of :math:`\xi` below
        :math:`\sqrt{\mathrm{tol}}\,(1 + \max\xi)`, or when :math:`\xi` changes by less than
        ``tol`` :math:`(1 + \max\xi)`.
    max_iter : int
        EM steps before giving up (an infeasible result with that reason: the envelope-theorem
        gradient needs the fixed point).
    gradient : bool
        Also compute :math:`\partial\mathcal{L}/\partial K`, :math:`\partial/\partial m`
        (and an empty :math:`\partial/\partial\phi`).

    Returns
    -------
    VIResult
        ``variational`` holds :math:`\xi`; ``history`` the bound after every EM step.

    Raises
    ------
    ValueError
        For a likelihood other than Bernoulli-logit, a non-empty ``phi`` or mismatched shapes.
    """
    if not (isinstance(likelihood, Bernoulli) and likelihood.link == "logit"):
        desc = type(likelihood).__name__
        if isinstance(likelihood, Bernoulli):
            desc += f" (link={likelihood.link!r})"
        raise ValueError(
            "jaakkola_jordan bounds the logistic sigmoid only (Bernoulli with link='logit'), "
            f"got {desc}; use gaussian_kl for other likelihoods"
        )
    K, m, phi = _check_inputs(K, m, likelihood, phi)
    n = m.size
    s = 2.0 * likelihood.y - 1.0
    LK = _chol(K)
    if xi0 is not None:
        xi = np.abs(np.asarray(xi0, dtype=float))
        if xi.shape != (n,):
            raise ValueError(f"xi0 must be ({n},), got {xi.shape}")
    else:
        xi = np.sqrt(np.abs(np.diag(K)) + m * m)
    if LK is None:
        return VIResult(
            -np.inf, m.copy(), np.zeros(n), False, "K is not positive definite", 0, variational=xi
        )
    if not np.all(np.isfinite(xi)):
        xi = np.sqrt(np.diag(K) + m * m)

    state = _jj_evaluate(K, m, s, xi)
    if state is None or not np.isfinite(state.bound):
        return VIResult(
            -np.inf,
            m.copy(),
            np.zeros(n),
            False,
            "the bound is not finite at the starting point (non-finite K or m)",
            0,
            variational=xi,
        )
    history = []
    converged = False
    n_iter = 0
    dL = dxi = np.nan
    omega = 1.0  # over-relaxation factor (Salakhutdinov & Roweis 2003)
    for n_iter in range(1, max_iter + 1):  # noqa: B007 (n_iter is reported)
        xi_new = np.sqrt(np.maximum(state.sigma_diag, 0.0) + state.mu**2)  # PRML eq. 10.163
        new = _jj_evaluate(K, m, s, xi_new)
        if new is None or not np.isfinite(new.bound):
            break
        if omega > 1.0:
            # over-relaxed step xi + omega (xi_EM - xi), kept only where it beats the EM step
            xi_or = np.abs(xi + omega * (xi_new - xi))
            cand = _jj_evaluate(K, m, s, xi_or)
            if cand is not None and np.isfinite(cand.bound) and cand.bound >= new.bound:
                xi_new, new = xi_or, cand
                omega = min(2.0 * omega, 64.0)
            else:
                omega = 1.0
        else:
            omega = 2.0
        dL = new.bound - state.bound
        dxi = float(np.max(np.abs(xi_new - xi)))
        xi, state = xi_new, new
        history.append(state.bound)
        scale = 1.0 + float(np.max(xi))
        if dxi <= tol * scale or (
            abs(dL) <= tol * max(1.0, abs(state.bound)) and dxi <= np.sqrt(tol) * scale
        ):
            converged = True
            break
    v = LK.T @ state.alpha  # L_K^-1 (mu - m) = L_K^-1 K alpha
    hist = np.asarray(history, dtype=float)
    if not converged:
        return VIResult(
            -np.inf,
            state.mu,
            v,
            False,
            f"EM on the local parameters did not converge after {n_iter} steps "
            f"(max_iter={max_iter}, last bound change {dL:.3g}, largest xi change {dxi:.3g})",
            n_iter,
            history=hist,
            variational=xi,
        )
    Sigma = K - state.C.T @ state.C
    Sigma = 0.5 * (Sigma + Sigma.T)
    if not gradient:
        return VIResult(
            state.bound, state.mu, v, True, "", n_iter, cov=Sigma, history=hist, variational=xi
        )
    Linv = solve_triangular(state.LB, np.diag(state.sw), lower=True)  # L_B^-1 sw
    R = Linv.T @ Linv  # (K + (2 Lambda)^-1)^-1 = sw B^-1 sw
    grad_K = 0.5 * (np.outer(state.alpha, state.alpha) - R)
    grad_K = 0.5 * (grad_K + grad_K.T)
    return VIResult(
        state.bound,
        state.mu,
        v,
        True,
        "",
        n_iter,
        grad_K,
        state.alpha.copy(),
        np.zeros(0),
        Sigma,
        hist,
        xi,
    )


# --------------------------------------------------------------------------------------------
# Gaussian KL (Opper & Archambeau)
# --------------------------------------------------------------------------------------------


class _KLState(NamedTuple):
    elbo: float
    mu: np.ndarray
    nu: np.ndarray  # K^-1 (mu - m)
    Sigma: np.ndarray
    E1: np.ndarray  # E[l'] (the exact mu-gradient of the quadrature rule)
    g_v: np.ndarray  # dL/dv = L_K^T E[l'] - v
    W: np.ndarray  # -E[l''] (exact mu-Hessian of the quadrature rule)
    lam_star: np.ndarray  # -2 dE[l]/dSigma_ii
    E_mS: np.ndarray  # d^2 E[l] / dmu_i dSigma_ii
    E_SS: np.ndarray  # d^2 E[l] / dSigma_ii^2


class _KLProblem:
    """The ELBO of the Opper–Archambeau family at fixed ``(K, m, phi)``."""

    def __init__(self, K, m, LK, likelihood, phi, n_quad):
        if int(n_quad) != n_quad or n_quad < 1:
            raise ValueError(f"n_quad must be a positive integer, got {n_quad}")
        self.K, self.m, self.LK = K, m, LK
        self.lik, self.phi = likelihood, phi
        x, w = hermegauss(int(n_quad))
        self.x = x
        self.w = w / np.sqrt(2.0 * np.pi)
        self.n = m.size

    def q_cov(self, lam: np.ndarray) -> tuple[np.ndarray, float, float] | None:
        r"""(:math:`\Sigma`, :math:`\log|M|`, :math:`\mathrm{tr}\,M^{-1}`) or None when
        :math:`K^{-1} + \mathrm{diag}\,\lambda` is not positive definite."""
        n, K, LK = self.n, self.K, self.LK
        if not np.all(np.isfinite(lam)):
            return None
        if np.all(lam >= 0):
            sw = np.sqrt(lam)
            LB = _chol(np.eye(n) + sw[:, None] * K * sw[None, :])
            if LB is not None:
                C = solve_triangular(LB, sw[:, None] * K, lower=True)
                Sigma = K - C.T @ C
                if np.all(np.diag(Sigma) > 0):
                    Linv = solve_triangular(LB, np.eye(n), lower=True)
                    logdet = 2.0 * float(np.sum(np.log(np.diag(LB))))
                    return 0.5 * (Sigma + Sigma.T), logdet, float(np.sum(Linv * Linv))
        # general sign of lambda (or the subtraction above lost positivity): M = I + L_K^T Λ L_K
        LA = _chol(np.eye(n) + LK.T @ (lam[:, None] * LK))
        if LA is None:
            return None
        C = solve_triangular(LA, LK.T, lower=True)  # A^{-1/2} L_K^T
        Linv = solve_triangular(LA, np.eye(n), lower=True)
        logdet = 2.0 * float(np.sum(np.log(np.diag(LA))))
        return C.T @ C, logdet, float(np.sum(Linv * Linv))

    def quadrature(self, mu: np.ndarray, sd: np.ndarray):
        """Nodes (Q, n) and the likelihood derivatives there."""
        F = mu[None, :] + sd[None, :] * self.x[:, None]
        return F, self.lik.derivatives(F, self.phi)

    def evaluate(self, v: np.ndarray, lam: np.ndarray) -> _KLState | None:
        """The ELBO and its pieces at whitened mean ``v`` and ``lam``; None where infeasible
        (Σ not positive definite) — a non-finite ELBO is returned as such."""
        qc = self.q_cov(lam)
        if qc is None:
            return None
        Sigma, logdet, trinv = qc
        mu = self.m + self.LK @ v
        sd = np.sqrt(np.diag(Sigma))
        with np.errstate(all="ignore"):
            _, (logp, d1, d2, _d3) = self.quadrature(mu, sd)
            E = self.w @ logp
            E1 = self.w @ d1
            E2 = self.w @ d2
            wx = self.w * self.x
            S = sd * sd
            dE_dS = (wx @ d1) / (2.0 * sd)
            E_mS = (wx @ d2) / (2.0 * sd)
            E_SS = ((wx * self.x) @ d2) / (4.0 * S) - dE_dS / (2.0 * S)
            g_v = self.LK.T @ E1 - v
        kl = 0.5 * (trinv + float(v @ v) - self.n + logdet)
        elbo = float(np.sum(E)) - kl
        nu = solve_triangular(self.LK.T, v, lower=False)
        return _KLState(elbo, mu, nu, Sigma, E1, g_v, -E2, -2.0 * dE_dS, E_mS, E_SS)

    def directions(self, st: _KLState, lam: np.ndarray):
        r"""Ascent directions ``(dv, dlam, slope)`` at ``st``, best first.

        The Hessian of :math:`\mathcal{L}` in :math:`(v, \lambda)`, less a term proportional to
        the residual :math:`\lambda^\star - \lambda` (it vanishes at the optimum, so Newton's
        method keeps its quadratic convergence), is, with :math:`P = \Sigma\circ\Sigma`,
        :math:`k = \partial^2 E/\partial\mu\,\partial\Sigma_{ii}` and :math:`D =
        \partial^2 E/\partial\Sigma_{ii}^2`,

        .. math::
           H = -\begin{pmatrix} A_{\tilde W} & L_K^T k P \\ P k L_K & \tfrac12 P - PDP
               \end{pmatrix}, \qquad A_{\tilde W} = I + L_K^T \tilde W L_K.

        It is negative definite iff :math:`A_{\tilde W} \succ 0` and :math:`I - 2P^{1/2} G
        P^{1/2} \succ 0` with :math:`G = D + k L_K A_{\tilde W}^{-1} L_K^T k` (Schur
        complement); then the Newton step solves :math:`H d = -\nabla\mathcal{L}` with the
        :math:`\lambda` rows divided by :math:`-P/2`, so that the ill-conditioned :math:`P` is
        never inverted. Otherwise (and as the fallback) the block-diagonal step: Newton in
        :math:`v` with :math:`\tilde W^+ = \max(\tilde W, 0)` and :math:`d\lambda = (I -
        2\min(D, 0)P)^{-1}(\lambda^\star - \lambda)` (the fixed-point step of Opper &
        Archambeau where :math:`D \ge 0`), both the gradient times a positive-definite matrix.
        """
        n, LK = self.n, self.LK
        eye = np.eye(n)
        P = st.Sigma * st.Sigma
        res = st.lam_star - lam
        k, D = st.E_mS, st.E_SS
        out = []
        AW = eye + LK.T @ (st.W[:, None] * LK)
        LA = _chol(AW)
        if LA is not None and np.all(np.isfinite(k)) and np.all(np.isfinite(D)):
            Z = solve_triangular(LA, LK.T * k[None, :], lower=True)
            G = np.diag(D) + Z.T @ Z
            e, U = np.linalg.eigh(P)
            Ph = (U * np.sqrt(np.maximum(e, 0.0))) @ U.T
            if _chol(eye - 2.0 * Ph @ G @ Ph) is not None:
                N = np.empty((2 * n, 2 * n))
                N[:n, :n] = AW
                N[:n, n:] = LK.T @ (k[:, None] * P)
                N[n:, :n] = 2.0 * k[:, None] * LK
                N[n:, n:] = eye - 2.0 * D[:, None] * P
                try:
                    d = np.linalg.solve(N, np.concatenate([st.g_v, res]))
                except np.linalg.LinAlgError:
                    d = None
                if d is not None and np.all(np.isfinite(d)):
                    out.append((d[:n], d[n:]))
        if LA is None:
            LA = _chol(eye + LK.T @ (np.maximum(st.W, 0.0)[:, None] * LK))
        dlam = np.linalg.solve(eye - 2.0 * np.minimum(D, 0.0)[:, None] * P, res)
        out.append((cho_solve((LA, True), st.g_v), dlam))
        return [(dv, dl, float(st.g_v @ dv) + 0.5 * float(res @ (P @ dl))) for dv, dl in out]


def gaussian_kl_elbo(
    K: np.ndarray,
    m: np.ndarray,
    likelihood: LatentLikelihood,
    phi,
    nu: np.ndarray,
    lam: np.ndarray,
    *,
    n_quad: int = 32,
) -> tuple[float, np.ndarray, np.ndarray]:
    r"""The ELBO of :math:`q = N(m + K\nu, (K^{-1} + \mathrm{diag}\,\lambda)^{-1})` and its
    gradient in :math:`(\nu, \lambda)`.

    .. math::
       \nabla_\nu\mathcal{L} = K(E_q[\ell'] - \nu), \qquad
       \nabla_\lambda\mathcal{L} = -(\Sigma\circ\Sigma)\left(\frac{\partial E_q[\ell]}
          {\partial\,\mathrm{diag}\,\Sigma} + \tfrac12\lambda\right)

    (Opper & Archambeau 2009), with the expectations by ``n_quad``-node Gauss–Hermite quadrature
    and the gradient that of the quadrature rule. The objective :func:`gaussian_kl` maximises;
    useful to check its convergence.

    Parameters
    ----------
    K, m, likelihood, phi
        As in :func:`gaussian_kl`.
    nu, lam : (n,) arrays
        The variational parameters.
    n_quad : int
        Gauss–Hermite nodes.

    Returns
    -------
    elbo : float
        :math:`-\infty` where :math:`K^{-1} + \mathrm{diag}\,\lambda` (or ``K``) is not positive
        definite, with NaN gradients.
    grad_nu, grad_lam : (n,) arrays
    """
    K, m, phi = _check_inputs(K, m, likelihood, phi)
    n = m.size
    nu = np.asarray(nu, dtype=float)
    lam = np.asarray(lam, dtype=float)
    if nu.shape != (n,) or lam.shape != (n,):
        raise ValueError(f"nu and lam must be ({n},), got {nu.shape} and {lam.shape}")
    LK = _chol(K)
    nan = np.full(n, np.nan)
    if LK is None:
        return -np.inf, nan, nan
    prob = _KLProblem(K, m, LK, likelihood, phi, n_quad)
    st = prob.evaluate(LK.T @ nu, lam)
    if st is None:
        return -np.inf, nan, nan
    grad_nu = K @ (st.E1 - nu)
    grad_lam = 0.5 * (st.Sigma * st.Sigma) @ (st.lam_star - lam)
    return st.elbo, grad_nu, grad_lam


def gaussian_kl(
    K: np.ndarray,
    m: np.ndarray,
    likelihood: LatentLikelihood,
    phi=(),
    *,
    lam0: np.ndarray | None = None,
    nu0: np.ndarray | None = None,
    tol: float = 1e-8,
    max_iter: int = 500,
    n_quad: int = 32,
    gradient: bool = True,
) -> VIResult:
    r"""The Gaussian variational approximation minimising :math:`\mathrm{KL}(q\,\|\,p(f\mid y))`
    for any likelihood (Opper & Archambeau 2009), its bound and the bound's gradient.

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
    lam0, nu0 : (n,) arrays, optional
        Warm start (e.g. the previous ``variational`` and :math:`K^{-1}(\mu - m)`; a missing one
        is :math:`\nu = 0` or :math:`\lambda = \max(-\ell''(m), 0)`). Without them the start is
        the Laplace approximation (:func:`bayes_gp.latent.laplace.laplace`: :math:`\hat v`,
        :math:`\lambda = -\ell''(\hat f)`). A start at which :math:`\Sigma` is not positive
        definite or the bound is not finite (or a failed Laplace approximation) falls back to
        :math:`\nu = 0`, :math:`\lambda = \max(-\ell''(m), 0)`.
    tol : float
        Convergence when the largest entry of :math:`\partial\mathcal{L}/\partial v` is below
        ``tol`` :math:`(1 + \max|v|)` and the largest fixed-point residual
        :math:`|\lambda^\star - \lambda|` below ``tol`` :math:`(1 + \max|\lambda|)`.
    max_iter : int
        Iterations before giving up (an infeasible result with that reason).
    n_quad : int
        Gauss–Hermite nodes per one-dimensional expectation.
    gradient : bool
        Also compute :math:`\partial\mathcal{L}/\partial K`, :math:`\partial/\partial m` and
        :math:`\partial/\partial\phi` (the module docstring).

    Returns
    -------
    VIResult
        ``variational`` holds :math:`\lambda`; ``history`` the bound after every step taken
        (``n_iter - 1`` of them: the last iteration only finds the convergence test met).
    """
    K, m, phi = _check_inputs(K, m, likelihood, phi)
    n = m.size
    LK = _chol(K)
    if LK is None:
        return VIResult(-np.inf, m.copy(), np.zeros(n), False, "K is not positive definite", 0)
    prob = _KLProblem(K, m, LK, likelihood, phi, n_quad)

    with np.errstate(all="ignore"):
        d2_prior = likelihood.derivatives(m, phi)[2]
    lam_prior = np.where(np.isfinite(d2_prior), np.maximum(-d2_prior, 0.0), 0.0)
    starts = []  # (v, lam), tried in turn until the bound is finite there
    if lam0 is not None or nu0 is not None:
        v_user = np.zeros(n) if nu0 is None else LK.T @ np.asarray(nu0, float).reshape(n)
        starts.append((v_user, lam_prior if lam0 is None else np.asarray(lam0, float).reshape(n)))
    else:
        # the Laplace approximation: mode and curvature W = -l''(f_hat), K^-1 + W > 0
        try:
            with np.errstate(all="ignore"):
                lap = laplace(K, m, likelihood, phi, gradient=False)
        except (ValueError, np.linalg.LinAlgError):  # non-finite Newton steps in extreme cases
            lap = None
        if lap is not None and lap.feasible:
            with np.errstate(all="ignore"):
                starts.append((lap.v, -likelihood.derivatives(lap.f, phi)[2]))
    starts.append((np.zeros(n), lam_prior))
    st = None
    for v, lam in starts:
        st = prob.evaluate(v, lam)
        if st is not None and np.isfinite(st.elbo):
            break
    if st is None or not np.isfinite(st.elbo):
        return VIResult(
            -np.inf,
            m.copy(),
            v,
            False,
            "the bound is not finite at the starting point (K, m or phi extreme)",
            0,
            variational=lam,
        )

    history = []
    converged = False
    n_iter = 0
    stalled = ""
    for n_iter in range(1, max_iter + 1):  # noqa: B007 (n_iter is reported)
        dlam = st.lam_star - lam
        scale_v = 1.0 + float(np.max(np.abs(v)))
        scale_l = 1.0 + float(np.max(np.abs(lam)))
        if not (np.all(np.isfinite(st.g_v)) and np.all(np.isfinite(dlam))):
            stalled = "the gradient of the bound is not finite"
            break
        if np.max(np.abs(st.g_v)) <= tol * scale_v and np.max(np.abs(dlam)) <= tol * scale_l:
            converged = True
            break
        new = None
        for dv, dl, slope in prob.directions(st, lam):
            if not slope > 0:
                continue
            tiny = slope < 1e-10 * (1.0 + abs(st.elbo))
            t = 1.0
            for _ in range(60):
                cand = prob.evaluate(v + t * dv, lam + t * dl)
                if cand is not None and np.isfinite(cand.elbo):
                    if cand.elbo >= st.elbo + 1e-4 * t * slope:
                        new = cand
                        break
                    if tiny and cand.elbo >= st.elbo - 1e-12 * (1.0 + abs(st.elbo)):
                        # the predicted increase is at the rounding level of the bound, where
                        # the Armijo test only sees noise: take the step
                        new = cand
                        break
                t *= 0.5
            if new is not None:
                break
        if new is None:
            # no increase representable: at the optimum to rounding, or stuck
            converged = (
                np.max(np.abs(st.g_v)) <= max(tol, 1e-6) * scale_v
                and np.max(np.abs(dlam)) <= max(tol, 1e-6) * scale_l
            )
            stalled = "the line search found no increase of the bound"
            break
        v, lam, st = v + t * dv, lam + t * dl, new
        history.append(st.elbo)
    hist = np.asarray(history, dtype=float)
    if not converged:
        gmax = float(np.max(np.abs(st.g_v)))
        rmax = float(np.max(np.abs(st.lam_star - lam)))
        return VIResult(
            -np.inf,
            st.mu,
            v,
            False,
            f"the Gaussian variational optimisation did not converge after {n_iter} steps "
            f"({stalled or f'max_iter={max_iter} reached'}; largest mean-gradient entry "
            f"{gmax:.3g}, largest lambda residual {rmax:.3g})",
            n_iter,
            history=hist,
            variational=lam,
        )
    if not gradient:
        return VIResult(
            st.elbo, st.mu, v, True, "", n_iter, cov=st.Sigma, history=hist, variational=lam
        )
    nu = st.nu
    LSL = lam[:, None] * st.Sigma * lam[None, :]
    grad_K = 0.5 * (np.outer(nu, nu) - np.diag(lam) + LSL)
    grad_K = 0.5 * (grad_K + grad_K.T)
    if phi.size:
        sd = np.sqrt(np.diag(st.Sigma))
        F = st.mu[None, :] + sd[None, :] * prob.x[:, None]
        dphi = np.asarray(likelihood.phi_derivatives(F, phi)[0]).reshape(phi.size, -1, n)
        grad_phi = np.einsum("q,jqi->j", prob.w, dphi)
    else:
        grad_phi = np.zeros(0)
    return VIResult(
        st.elbo, st.mu, v, True, "", n_iter, grad_K, nu.copy(), grad_phi, st.Sigma, hist, lam
    )


def site_precision(method: str, variational: np.ndarray) -> np.ndarray:
    r"""The Gaussian site precisions :math:`W` of a variational posterior,
    :math:`\Sigma = (K^{-1} + \mathrm{diag}\,W)^{-1}`: :math:`2\lambda(\xi)` for
    ``"jj"`` (:func:`jaakkola_jordan`), :math:`\lambda` itself for ``"kl"`` (:func:`gaussian_kl`)."""
    variational = np.asarray(variational, float)
    if method == "jj":
        return 2.0 * _jj_lambda(variational)
    if method == "kl":
        return variational
    raise ValueError(f"`method` must be 'jj' or 'kl', got {method!r}")
