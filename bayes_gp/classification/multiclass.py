r"""Multi-class GP classification with a softmax likelihood: the Laplace approximation, its
evidence and exact gradient, and predictions (R&W §3.5, Algorithms 3.3 and 3.4).

Model: :math:`C` independent latent GPs :math:`f^c \sim GP(0, k_c)` and

.. math::
   p(y_i = c \mid f_i) = \pi_i^c = \frac{\exp f_i^c}{\sum_{c'} \exp f_i^{c'}}
   \qquad \text{(R\&W eq. 3.34)}.

Arrays are *class-major*: ``f[c, i]`` is :math:`f_i^c` (R&W's vector
:math:`f = (f_1^1, \dots, f_n^1, f_1^2, \dots, f_n^C)`), ``K[c]`` is :math:`K_c` (the prior
covariance is block-diagonal), ``Y[c, i]`` the one-hot labels.

**Mode** (R&W Algorithm 3.3). :math:`\Psi(f) = -\tfrac12 f^T K^{-1} f + y^T f - \sum_i \log
\sum_c \exp f_i^c` (R&W eq. 3.40) is concave; Newton's method with :math:`W = D - \Pi\Pi^T`,
:math:`D = \mathrm{diag}(\pi)`, :math:`\Pi` the :math:`Cn \times n` stack of
:math:`\mathrm{diag}(\pi^c)` (R&W eq. 3.38), and the structured solve

.. math::
   E_c = D_c^{1/2} (I + D_c^{1/2} K_c D_c^{1/2})^{-1} D_c^{1/2}, \quad
   M M^T = \textstyle\sum_c E_c, \quad
   b = W f + y - \pi, \quad c = E K b, \quad
   a = b - c + E R\, M^{-T} M^{-1} R^T c, \quad f = K a,

(:math:`R` the stack of :math:`C` identities) costs :math:`C+1` Cholesky factorisations of
:math:`n \times n` matrices per step. A step that does not increase :math:`\Psi` is halved
(backtracking on :math:`a`; :math:`f = Ka` is linear in it).

**Evidence** (R&W eq. 3.44 with the determinant exact). With :math:`A = I + KD` and the
determinant lemma, :math:`|I + KW| = |A|\,|I - \Pi^T A^{-1} K \Pi| = |A|\,|\sum_c E_c|` (because
:math:`\Pi^T A^{-1} K \Pi = \sum_c (D_c - E_c) = I - \sum_c E_c`), so

.. math::
   \log q(y \mid X, \theta) = -\tfrac12 \hat a^T \hat f + y^T \hat f
   - \sum_i \log \sum_c \exp \hat f_i^c
   - \sum_c \sum_i \log (L_c)_{ii} - \sum_i \log M_{ii},

:math:`L_c L_c^T = I + D_c^{1/2} K_c D_c^{1/2}`. (R&W Algorithm 3.3 as printed ends with
:math:`\sum_c z_c` alone, :math:`\tfrac12\log|I + KD|`, the determinant with :math:`W` replaced
by :math:`D`; here the :math:`\Pi\Pi^T` part, :math:`\log|M|`, is included, and the tests check
the result against a dense evaluation of R&W eq. 3.32.)

**Gradient** (R&W §5.5.1 and Algorithm 5.1 carried to the softmax; Williams & Barber 1998). With
:math:`R_{cc'} = \delta_{cc'} E_c - E_c (\sum E)^{-1} E_{c'}` (the blocks of
:math:`W(I + KW)^{-1}`), :math:`\Sigma = (K^{-1} + W)^{-1} = K - K R K`, its :math:`C \times C`
block :math:`\Sigma_i` at each training input, :math:`J_i = \mathrm{diag}(\pi_i) - \pi_i\pi_i^T`
(:math:`\partial \pi_i / \partial f_i`), the implicit term
:math:`s_{2,i} = -\tfrac12 \partial \log|I + KW| / \partial f_i
= -\tfrac12 J_i (\mathrm{diag}\,\Sigma_i - 2 \Sigma_i \pi_i)` and
:math:`u = (I + WK)^{-1} s_2 = s_2 - R K s_2` (the mode moves by
:math:`d\hat f = (I + KW)^{-1} dK\, \hat a`):

.. math::
   \frac{\partial \log q}{\partial K_c} = \tfrac12 a_c a_c^T - \tfrac12 R_{cc}
   + \tfrac12 (u_c a_c^T + a_c u_c^T).

**Prediction** (R&W Algorithm 3.4): at a test input the latent :math:`f_*` is approximately
Gaussian with :math:`\mu_*^c = k_c(x_*)^T (y^c - \hat\pi^c)` (R&W eq. 3.42) and
:math:`\Sigma_{*,cc'} = \delta_{cc'} k_c(x_*, x_*) - k_c(x_*)^T R_{cc'} k_{c'}(x_*)`
(eq. 3.43); the predictive probabilities :math:`E[\mathrm{softmax}(f_*)]` are Monte Carlo
averages (a fixed seed), so each row sums to one.

:class:`SoftmaxLaplaceLogp` is the evidence as a PyTensor Op of the stacked :math:`K`, with the
gradient above as its pullback, so that PyTensor differentiates the kernel graphs around it (the
type-II fit, and NUTS with the latent GPs integrated out).
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from scipy.linalg import cho_solve, solve_triangular
from scipy.special import logsumexp, softmax

from bayes_gp.op_backends import ensure_available, op_backend

__all__ = [
    "SoftmaxLaplace",
    "softmax_laplace",
    "softmax_laplace_native",
    "softmax_objective",
    "latent_predictive",
    "softmax_average",
    "la_loo",
    "SoftmaxLaplaceLogp",
    "one_hot",
]


def one_hot(t: np.ndarray, n_classes: int) -> np.ndarray:
    """Class-major one-hot labels ``Y[c, i] = [t_i = c]`` of the label indices ``t``."""
    t = np.asarray(t)
    Y = np.zeros((n_classes, t.size))
    Y[t, np.arange(t.size)] = 1.0
    return Y


def softmax_objective(f: np.ndarray, K: np.ndarray, Y: np.ndarray) -> float:
    r""":math:`\Psi(f) = -\tfrac12 f^T K^{-1} f + y^T f - \sum_i \log\sum_c \exp f_i^c`
    (R&W eq. 3.40), by a Cholesky solve per class: the objective the mode maximises."""
    quad = 0.0
    for c in range(Y.shape[0]):
        L = np.linalg.cholesky(K[c])
        v = solve_triangular(L, f[c], lower=True)
        quad += float(v @ v)
    return -0.5 * quad + float(np.sum(Y * f)) - float(np.sum(logsumexp(f, axis=0)))


@dataclass(frozen=True)
class SoftmaxLaplace:
    """The Laplace approximation of the softmax latent posterior at one set of covariances.

    Attributes
    ----------
    f : ndarray (C, n)
        The mode :math:`\\hat f`.
    a : ndarray (C, n)
        :math:`\\hat a = K^{-1}\\hat f = y - \\hat\\pi`.
    pi : ndarray (C, n)
        :math:`\\hat\\pi`, the softmax at the mode.
    E : ndarray (C, n, n)
        :math:`E_c` of the module docstring.
    M : ndarray (n, n)
        Lower Cholesky factor of :math:`\\sum_c E_c`.
    log_evidence : float
        :math:`\\log q(y \\mid X, \\theta)` (:math:`-\\infty` when infeasible).
    feasible, converged : bool
    n_iter : int
    reason : str
        Why the approximation is infeasible ("" when it is not).
    grad_K : ndarray (C, n, n) or None
        :math:`\\partial \\log q / \\partial K_c` (with ``gradient=True``).
    """

    f: np.ndarray
    a: np.ndarray
    pi: np.ndarray
    E: np.ndarray
    M: np.ndarray
    log_evidence: float
    feasible: bool
    converged: bool
    n_iter: int
    reason: str = ""
    grad_K: np.ndarray | None = None

    def apply_R(self, v: np.ndarray) -> np.ndarray:
        """:math:`R v`, :math:`R = W(I + KW)^{-1}` with blocks
        :math:`R_{cc'} = \\delta_{cc'}E_c - E_c(\\sum E)^{-1}E_{c'}`; ``v`` (C, n) or (C, n, m)."""
        Ev = np.einsum("cij,cj...->ci...", self.E, v)
        w = cho_solve((self.M, True), Ev.sum(axis=0))
        return Ev - np.einsum("cij,j...->ci...", self.E, w)

    def latent_blocks(self, K: np.ndarray) -> np.ndarray:
        """The :math:`C \\times C` blocks :math:`\\Sigma_i` of :math:`\\Sigma = (K^{-1} + W)^{-1}`
        at the training inputs, ``(n, C, C)``."""
        EK = np.einsum("cij,cjk->cik", self.E, K)
        Q = np.stack([solve_triangular(self.M, EK[c], lower=True) for c in range(K.shape[0])])
        diag_k = np.einsum("cii->ci", K) - np.einsum("cki,cki->ci", K, EK)
        blocks = np.einsum("cki,dki->icd", Q, Q)
        idx = np.arange(K.shape[0])
        blocks[:, idx, idx] += diag_k.T
        return blocks

    def covariance(self, K: np.ndarray) -> np.ndarray:
        """The full :math:`Cn \\times Cn` :math:`\\Sigma = K - KRK` (class-major), for
        replicated data."""
        C, n, _ = K.shape
        RK = np.zeros((C, n, C * n))
        for c in range(C):
            block = np.zeros((C, n, n))
            block[c] = K[c]
            RK[:, :, c * n:(c + 1) * n] = self.apply_R(block)
        KRK = np.einsum("cij,cjk->cik", K, RK).reshape(C * n, C * n)
        Kfull = np.zeros((C * n, C * n))
        for c in range(C):
            Kfull[c * n:(c + 1) * n, c * n:(c + 1) * n] = K[c]
        S = Kfull - KRK
        return 0.5 * (S + S.T)


def _factor(K: np.ndarray, pi: np.ndarray):
    """:math:`E_c`, :math:`\\sum_c \\sum_i \\log (L_c)_{ii}` and :math:`M` at :math:`\\pi`
    (R&W Algorithm 3.3 lines 5-8)."""
    C, n = pi.shape
    E = np.empty((C, n, n))
    z = 0.0
    eye = np.eye(n)
    for c in range(C):
        s = np.sqrt(pi[c])
        L = np.linalg.cholesky(eye + s[:, None] * K[c] * s[None, :])
        V = solve_triangular(L, np.diag(s), lower=True)
        E[c] = V.T @ V
        z += float(np.sum(np.log(np.diag(L))))
    M = np.linalg.cholesky(E.sum(axis=0))
    return E, z, M


def _psi(a: np.ndarray, f: np.ndarray, Y: np.ndarray) -> float:
    return float(-0.5 * np.sum(a * f) + np.sum(Y * f) - np.sum(logsumexp(f, axis=0)))


def softmax_laplace(
    K: np.ndarray,
    Y: np.ndarray,
    *,
    a0: np.ndarray | None = None,
    tol: float = 1e-10,
    max_iter: int = 100,
    gradient: bool = False,
) -> SoftmaxLaplace:
    """The Laplace approximation of the softmax GP classifier (module docstring).

    Parameters
    ----------
    K : ndarray (C, n, n)
        The classes' prior covariances (jitter included), positive definite.
    Y : ndarray (C, n)
        One-hot labels (:func:`one_hot`).
    a0 : ndarray (C, n), optional
        Starting :math:`a` (:math:`f = K a`), e.g. the last mode's (a warm start); default 0.
    tol : float
        Converged when a full Newton step increases :math:`\\Psi` by less than ``tol`` and moves
        no :math:`f_i^c` by more than ``sqrt(tol)``.
    max_iter : int
    gradient : bool
        Also compute :math:`\\partial \\log q / \\partial K_c`.

    Returns
    -------
    SoftmaxLaplace
    """
    K = np.asarray(K, float)
    Y = np.asarray(Y, float)
    if K.ndim != 3 or K.shape[1] != K.shape[2]:
        raise ValueError(f"`K` must have shape (C, n, n), got {K.shape}")
    if Y.shape != K.shape[:2]:
        raise ValueError(f"`Y` must have shape {K.shape[:2]} (C, n), got {Y.shape}")
    C, n = Y.shape
    if not np.all(np.isfinite(K)):
        return _infeasible(C, n, "the covariance contains NaN or infinite values")
    for c in range(C):  # the factorisations below need K_c positive definite, not just I + DKD
        try:
            np.linalg.cholesky(K[c])
        except np.linalg.LinAlgError:
            return _infeasible(C, n, f"a Cholesky factorisation of K[{c}] failed (K not positive "
                                     "definite)")  # fmt: skip
    a = np.zeros((C, n)) if a0 is None else np.array(a0, float)
    f = np.einsum("cij,cj->ci", K, a)
    psi = _psi(a, f, Y)
    if not np.isfinite(psi):
        a, f = np.zeros((C, n)), np.zeros((C, n))
        psi = _psi(a, f, Y)
    converged, it = False, 0
    try:
        for it in range(1, max_iter + 1):  # noqa: B007
            pi = softmax(f, axis=0)
            E, _, M = _factor(K, pi)
            # R&W Algorithm 3.3 lines 9-13: b = W f + y - pi, c = E K b, a = b - c + E R M^-T M^-1 R^T c
            b = pi * f - pi * np.sum(pi * f, axis=0) + Y - pi
            cc = np.einsum("cij,cj->ci", E, np.einsum("cij,cj->ci", K, b))
            a_new = b - cc + np.einsum("cij,j->ci", E, cho_solve((M, True), cc.sum(axis=0)))
            step = a_new - a
            t = 1.0
            for _ in range(50):  # backtracking on a (f = K a is linear in a)
                a_try = a + t * step
                f_try = np.einsum("cij,cj->ci", K, a_try)
                psi_try = _psi(a_try, f_try, Y)
                if np.isfinite(psi_try) and psi_try >= psi - 1e-12 * max(1.0, abs(psi)):
                    break
                t *= 0.5
            else:
                break
            df = float(np.max(np.abs(f_try - f)))
            gain = psi_try - psi
            a, f, psi = a_try, f_try, psi_try
            if t == 1.0 and gain < tol and df < np.sqrt(tol) * (1.0 + float(np.max(np.abs(f)))):
                converged = True
                break
        pi = softmax(f, axis=0)
        E, z, M = _factor(K, pi)
    except np.linalg.LinAlgError:
        return _infeasible(C, n, "a Cholesky factorisation failed (K not positive definite)")
    # at the mode a = y - pi exactly; the Newton iterate's a agrees to the convergence tolerance
    log_q = psi - z - float(np.sum(np.log(np.diag(M))))
    res = SoftmaxLaplace(f, a, pi, E, M, float(log_q), bool(np.isfinite(log_q)), converged, it)
    if not res.feasible:
        return _infeasible(C, n, "the log evidence is not finite")
    if gradient:
        res = _with_gradient(res, K)
    return res


def softmax_laplace_native(
    K: np.ndarray, Y: np.ndarray, *, tol: float = 1e-10, max_iter: int = 100
) -> SoftmaxLaplace:
    """:func:`softmax_laplace` from :math:`a = 0`, without the gradient, by the native solver
    (:mod:`bayes_gp.classification.native`: the same iterations, compiled; 2-3 times faster
    at n = 75, and it releases the GIL), or by :func:`softmax_laplace` where the native solver
    cannot be imported. :math:`\\hat f = K\\hat a` and :math:`\\hat\\pi` are recomputed here from
    the solver's :math:`\\hat a`; :math:`E`, :math:`M` and the evidence are the solver's."""
    try:
        from bayes_gp.classification import native
    except ImportError:  # pragma: no cover - PyTensor's numba internals moved
        return softmax_laplace(K, Y, tol=tol, max_iter=max_iter)
    K = np.asarray(K, float)
    Y = np.asarray(Y, float)
    if K.ndim != 3 or K.shape[1] != K.shape[2]:
        raise ValueError(f"`K` must have shape (C, n, n), got {K.shape}")
    if Y.shape != K.shape[:2]:
        raise ValueError(f"`Y` must have shape {K.shape[:2]} (C, n), got {Y.shape}")
    r = native.solve_arrays(K, Y, tol=tol, max_iter=max_iter, gradient=False)
    if r.status != native.OK:
        return _infeasible(*Y.shape, native.REASONS[r.status])
    f = np.einsum("cij,cj->ci", K, r.a)
    return SoftmaxLaplace(f, r.a, softmax(f, axis=0), r.E, r.M, r.log_q, True, r.converged,
                          r.n_iter)  # fmt: skip


def _infeasible(C: int, n: int, reason: str) -> SoftmaxLaplace:
    nan = np.full((C, n), np.nan)
    return SoftmaxLaplace(nan, nan, nan, np.full((C, n, n), np.nan), np.full((n, n), np.nan),
                          -np.inf, False, False, 0, reason)  # fmt: skip


def _with_gradient(res: SoftmaxLaplace, K: np.ndarray) -> SoftmaxLaplace:
    """:math:`\\partial \\log q / \\partial K_c` (module docstring, "Gradient")."""
    C = res.pi.shape[0]
    a, pi = res.a, res.pi
    Sig = res.latent_blocks(K)  # (n, C, C)
    P = pi.T  # (n, C)
    J = np.einsum("ic,cd->icd", P, np.eye(C)) - P[:, :, None] * P[:, None, :]
    v = np.einsum("icc->ic", Sig) - 2.0 * np.einsum("icd,id->ic", Sig, P)
    s2 = -0.5 * np.einsum("icd,ic->di", J, v)  # J symmetric: J_i v_i, class-major
    u = s2 - res.apply_R(np.einsum("cij,cj->ci", K, s2))
    MinvE = np.stack([solve_triangular(res.M, res.E[c], lower=True) for c in range(C)])
    R_diag = res.E - np.einsum("cki,ckj->cij", MinvE, MinvE)
    G = 0.5 * np.einsum("ci,cj->cij", a, a) - 0.5 * R_diag
    ua = np.einsum("ci,cj->cij", u, a)
    G += 0.5 * (ua + np.swapaxes(ua, 1, 2))
    return SoftmaxLaplace(**{**res.__dict__, "grad_K": G})


def latent_predictive(
    res: SoftmaxLaplace, Ks: np.ndarray, kss: np.ndarray, Y: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Mean ``(m, C)`` and covariance ``(m, C, C)`` of the latent :math:`f_*` at ``m`` test
    inputs (R&W Algorithm 3.4 lines 5-9, eqs. 3.42-3.43).

    ``Ks``: ``(C, n, m)`` cross-covariances :math:`k_c(X, x_*)`; ``kss``: ``(C, m)`` prior
    variances :math:`k_c(x_*, x_*)`; ``Y``: the training one-hot labels.
    """
    C = Ks.shape[0]
    mean = np.einsum("cnm,cn->mc", Ks, Y - res.pi)
    EKs = np.einsum("cij,cjm->cim", res.E, Ks)
    V = np.stack([solve_triangular(res.M, EKs[c], lower=True) for c in range(C)])
    cov = np.einsum("cnm,dnm->mcd", V, V)
    idx = np.arange(C)
    cov[:, idx, idx] += (kss - np.einsum("cnm,cnm->cm", Ks, EKs)).T
    return mean, 0.5 * (cov + np.swapaxes(cov, 1, 2))


def _sqrt_psd(cov: np.ndarray) -> np.ndarray:
    """Symmetric square roots of a stack of PSD matrices (negative rounding clipped)."""
    lam, V = np.linalg.eigh(cov)
    return V * np.sqrt(np.maximum(lam, 0.0))[..., None, :]


def softmax_average(
    mean: np.ndarray, cov: np.ndarray, n_samples: int = 4000, random_seed: int = 0
) -> np.ndarray:
    """:math:`E[\\mathrm{softmax}(f_*)]` for :math:`f_* \\sim N(\\mu, \\Sigma)` at each of ``m``
    inputs by Monte Carlo with ``n_samples`` draws (antithetic pairs, common random numbers,
    seed ``random_seed``; R&W Algorithm 3.4 lines 10-15). ``(m, C)``; rows sum to one."""
    mean = np.asarray(mean, float)
    C = mean.shape[1]
    rng = np.random.default_rng(random_seed)
    half = max(1, int(n_samples) // 2)
    z = rng.standard_normal((half, C))
    z = np.concatenate([z, -z])  # antithetic: exact mean, smaller variance
    A = _sqrt_psd(cov)  # (m, C, C)
    # class-major draws (C, s, m): the softmax over the classes as elementwise arithmetic
    # between C contiguous arrays (NumPy's reductions over a short axis were 3/4 of the time)
    g = mean.T[:, None, :] + np.einsum("mcd,sd->csm", A, z, optimize=True)
    top = functools.reduce(np.maximum, g)
    g -= top
    np.exp(g, out=g)
    g /= functools.reduce(np.add, g)
    return g.mean(axis=1).T


def la_loo(
    res: SoftmaxLaplace, K: np.ndarray, t: np.ndarray, n_samples: int = 4000, random_seed: int = 0
) -> np.ndarray:
    r"""LA-LOO (Vehtari et al. 2016) for the softmax: the cavity of each training point,
    :math:`N(\mu_{-i}, \Lambda_i^{-1})` with :math:`\Lambda_i = \Sigma_i^{-1} - W_i` and
    :math:`\mu_{-i} = \hat f_i - \Lambda_i^{-1}(y_i - \hat\pi_i)` (the Laplace marginal divided
    by the second-order expansion of the likelihood term at the mode), and
    :math:`\log E[\pi^{t_i}(f_i)]` under it by Monte Carlo. ``(n,)``."""
    C, n = res.pi.shape
    Sig = res.latent_blocks(K)
    P = res.pi.T
    W = np.einsum("ic,cd->icd", P, np.eye(C)) - P[:, :, None] * P[:, None, :]
    Lam = np.linalg.inv(Sig) - W
    cav = np.linalg.inv(Lam)
    g = one_hot(t, C).T - P
    mu = res.f.T - np.einsum("icd,id->ic", cav, g)
    p = softmax_average(mu, 0.5 * (cav + np.swapaxes(cav, 1, 2)), n_samples, random_seed)
    return np.log(np.maximum(p[np.arange(n), np.asarray(t)], np.finfo(float).tiny))


# ------------------------------------------------------------------------ the Op
#: Live Ops by id, for the numba objmode callback; weak, so an Op is freed with its graph.
_OPS: weakref.WeakValueDictionary[int, SoftmaxLaplaceLogp] = weakref.WeakValueDictionary()


class SoftmaxLaplaceLogp(Op):
    """``K (C, n, n) -> (log q, dlogq/dK)``: the softmax Laplace evidence for fixed labels.

    Only output 0 is meant to be differentiated; its pullback is the cotangent times the exact
    gradient (module docstring). In PyTensor's numba backend the evaluation is the native
    solver of :mod:`bayes_gp.classification.native` (nopython code, no GIL held, each
    evaluation started from :math:`a = 0`) unless ``native=False``; elsewhere, and with
    ``native=False`` through ``numba.objmode``, it is :func:`softmax_laplace`, and each instance
    keeps the last mode's :math:`a` as its warm start (a cache only: Newton's method on the
    concave :math:`\\Psi` reaches the same mode from any start). Instances compare by identity.
    """

    def __init__(
        self, Y: np.ndarray, *, tol: float = 1e-10, max_iter: int = 100, native: bool = True
    ):
        self.Y = np.asarray(Y, float)
        if self.Y.ndim != 2:
            raise ValueError(f"`Y` must be one-hot labels of shape (C, n), got {self.Y.shape}")
        self.tol, self.max_iter = float(tol), int(max_iter)
        #: Whether the numba backend runs the native solver
        #: (:mod:`bayes_gp.classification.native`); ``False`` keeps the NumPy solver in object
        #: mode.
        self.native = bool(native)
        self.last_a: np.ndarray | None = None
        self.last_reason = ""
        #: The last exception an evaluation through the numba backend raised (it cannot cross
        #: numba's object-mode boundary: ``bayes_gp.latent.op``); ``None`` if none did.
        self.last_error: BaseException | None = None
        _OPS[id(self)] = self

    @property
    def uses_native(self) -> bool:
        """Whether the numba backend runs the native solver for this Op: ``native`` set and the
        Op a plain :class:`SoftmaxLaplaceLogp` (a subclass may change the evaluation)."""
        if not getattr(self, "native", True) or type(self) is not SoftmaxLaplaceLogp:
            return False  # (getattr: an Op pickled before the attribute existed)
        try:
            from bayes_gp.classification import native  # noqa: F401
        except ImportError:  # pragma: no cover - PyTensor's numba internals moved
            return False
        return True

    @property
    def holds_gil(self) -> bool:
        """Whether its numba implementation calls Python in object mode (the GIL held), so that
        nutpie's chains, threads of one process, would wait for each other
        (:func:`bayes_gp.inference.nuts.gil_ops`): not with the native solver."""
        return not self.uses_native

    def __getstate__(self):
        state = self.__dict__.copy()
        state["last_a"] = None
        state["last_error"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        _OPS[id(self)] = self

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)

    def __str__(self):
        return "SoftmaxLaplaceLogp"

    def make_node(self, K):
        ensure_available()
        K = pt.as_tensor_variable(K).astype("float64")
        if K.type.ndim != 3:
            raise TypeError("SoftmaxLaplaceLogp needs a stack of matrices K (C, n, n)")
        return Apply(self, [K], [pt.dscalar(), pt.dtensor3()])

    def compute(self, K: np.ndarray):
        """NumPy evaluation with the warm start; NaN gradient where infeasible."""
        res = softmax_laplace(K, self.Y, a0=self.last_a, tol=self.tol, max_iter=self.max_iter,
                              gradient=True)  # fmt: skip
        if not res.feasible:
            self.last_reason = res.reason
            return np.asarray(-np.inf), np.full(K.shape, np.nan)
        self.last_reason = ""
        self.last_a = res.a
        return np.asarray(res.log_evidence), np.ascontiguousarray(res.grad_K)

    def perform(self, node, inputs, outputs):
        for out, val in zip(outputs, self.compute(np.asarray(inputs[0], float)), strict=True):
            out[0] = val

    def infer_shape(self, node, shapes):
        return [(), shapes[0]]

    def pullback(self, inputs, outputs, cotangents):
        if not isinstance(cotangents[1].type, DisconnectedType):
            raise NotImplementedError(
                "SoftmaxLaplaceLogp: only the log evidence (output 0) can be differentiated"
            )
        return [cotangents[0] * outputs[1]]

    def connection_pattern(self, node):
        return [[True, True]]


#: The nopython code's own exception when the object-mode callback caught one.
_CALLBACK_FAILED = (
    "SoftmaxLaplaceLogp raised an exception in its object-mode callback (numba backend); the "
    "exception is the Op's `last_error` and its message the Op's `last_reason`"
)


def _compute_by_id(key: int, K):
    """``(ok, log q, dK)`` of the live Op ``key``. Never raises: an exception in a
    ``numba.objmode`` block is not caught by a ``try``/``except`` of the nopython code around
    it, which goes on with null outputs (nutpie's C entry point then segfaulted;
    ``bayes_gp.latent.op``). On an exception ``ok`` is ``False``, the outputs are NaN and the
    exception is the Op's ``last_error``."""
    K = np.asarray(K)
    op = _OPS.get(key)
    try:
        if op is None:
            raise RuntimeError(f"the SoftmaxLaplaceLogp {key} this function was compiled for is gone")
        return (True, *op.compute(K))
    except Exception as exc:  # it cannot propagate through numba: kept on the Op
        if op is not None:
            op.last_error = exc
            op.last_reason = f"{type(exc).__name__}: {exc}"
        return False, np.asarray(np.nan), np.full(K.shape, np.nan)


@op_backend("numba")
def _register_numba() -> None:
    import numba
    from pytensor.link.numba.dispatch.basic import numba_njit, register_funcify_and_cache_key

    @register_funcify_and_cache_key(SoftmaxLaplaceLogp)
    def _numba_softmax_laplace(op, node=None, **kwargs):
        """The native solver's function with its cache key
        (:mod:`bayes_gp.classification.native`) unless ``native=False``, else the object-mode
        callback (not cacheable: it names the Op)."""
        if op.uses_native:
            from bayes_gp.classification.native import numba_function

            return numba_function(op)
        f64 = numba.types.float64
        ret_sig = numba.types.Tuple(
            [numba.types.boolean, numba.types.Array(f64, 0, "C"), f64[:, :, ::1]]
        )
        key = id(op)

        @numba_njit
        def softmax_laplace_numba(K):
            with numba.objmode(ret=ret_sig):
                ret = _compute_by_id(key, K)
            if not ret[0]:  # raised here, in nopython code, a try/except around catches it
                raise RuntimeError(_CALLBACK_FAILED)
            return ret[1], ret[2]

        return softmax_laplace_numba, None


@op_backend("jax")
def _register_jax() -> None:
    from pytensor.link.jax.dispatch import jax_funcify

    @jax_funcify.register(SoftmaxLaplaceLogp)
    def _jax_softmax_laplace(op, **kwargs):
        raise NotImplementedError(
            "SoftmaxLaplaceLogp (the softmax Laplace evidence) has no JAX implementation: "
            'sample with sampler="nutpie" (numba) or sampler="pymc"'
        )
