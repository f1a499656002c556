r"""The Laplace approximation of a latent GP for any likelihood, its evidence and exact gradient.

Model: :math:`f \sim N(m, K)`, :math:`y_i \mid f_i \sim p(y_i \mid f_i, \phi)` with a likelihood
of :mod:`bayes_gp.latent.likelihoods`. The mode :math:`\hat f` of

.. math::
   \Psi(f) = \log p(y \mid f, \phi) - \tfrac12 (f - m)^T K^{-1} (f - m)

is found by a damped Newton's method (R&W Algorithm 3.1 generalised) with
:math:`W = -\mathrm{diag}\,\nabla\nabla \log p(y \mid f)`, in the whitened coordinates
:math:`f = m + L_K v`, :math:`K = L_K L_K^T`, where the gradient and the negative Hessian of
:math:`\Psi` are

.. math::
   g = L_K^T \nabla\log p(y \mid f) - v, \qquad A = I + L_K^T W L_K,

:math:`A` congruent to :math:`K^{-1} + W`. The Newton step :math:`A^{-1} g` is computed in one of
two forms, chosen by the likelihood's ``log_concave`` attribute; both then apply the same
backtracking (Armijo) line search on :math:`\Psi` and the same convergence test (below), so they
take the same steps and reach the same mode, and differ only in cost and in the signs of
:math:`W` they allow. :math:`K` is factorised once in either, which also checks that it is
positive definite (else the result is *infeasible*, below).

*Stable form* (log-concave likelihoods, :math:`W \ge 0`: Bernoulli, binomial, Poisson, negative
binomial, Gaussian), R&W Algorithm 3.1's

.. math::
   B = I + W^{1/2} K W^{1/2} = L_B L_B^T, \qquad
   A^{-1} g = g - L_K^T W^{1/2} B^{-1} W^{1/2} L_K\, g

(R&W §3.4.3 and Algorithm 3.1; the step by Woodbury from :math:`A = I + UU^T`,
:math:`U = L_K^T W^{1/2}`, :math:`I + U^T U = B`). :math:`B` is formed elementwise in
:math:`O(n^2)`, and :math:`B \succeq I` for any :math:`W \ge 0` (entries of :math:`W` that are 0,
as for a probit far in its tail, are allowed), so a Newton step costs one Cholesky factorisation,
:math:`n^3/3` flops, and triangular matrix-vector products. The step is computed from :math:`g`
rather than as R&W's target :math:`a_{\mathrm{new}} = b - W^{1/2} B^{-1} W^{1/2} K b` minus the
current iterate: its rounding error then shrinks with :math:`g`, where the target's stays at
:math:`\epsilon\,\kappa(B)\,\lVert b \rVert` (large counts can keep the gradient above ``tol``
for ever). Should a likelihood declared log-concave produce :math:`W < 0`, the whitened form
takes over.

*Whitened form* (any likelihood, in particular the Student-t, whose :math:`W` can be negative;
Vanhatalo, Jylänki & Vehtari 2009): the Cholesky factor of :math:`A` itself, which exists exactly
when the Hessian of :math:`-\Psi` is positive definite, for any sign of :math:`W`; each step
costs a matrix product (:math:`2n^3`) and a Cholesky factorisation. Where :math:`A` is not
positive definite along the way the Newton direction uses :math:`W^+ = \max(W, 0)` (still an
ascent direction). A stationary point at which :math:`A` is not positive definite (a saddle of a
multimodal posterior) is reported as *infeasible*: the log evidence is :math:`-\infty` with a
reason, never a silently wrong value.

Convergence (both forms): the Newton decrement :math:`g^T A^{-1} g` (twice the predicted
increase of :math:`\Psi`) below ``tol**2`` and :math:`\max_i |g_i|` below
``tol`` :math:`(1 + \max_i |v_i|)`. Then the pending Newton step is taken (quadratic convergence
to machine precision); the stable form skips it when it is at the rounding level of :math:`v`
(:math:`\max_i |\Delta v_i| \le 32\,\epsilon\,(1 + \max_i |v_i|)`), which saves the
factorisation of :math:`B` at a new point.

The approximate log evidence (R&W eq. 3.32, with :math:`|B| = |I + KW| = |A|`):

.. math::
   \log q(y \mid \theta, \phi) = \log p(y \mid \hat f, \phi) - \tfrac12 \hat a^T (\hat f - m)
      - \tfrac12 \log |B|, \qquad \hat a^T (\hat f - m) = \hat v^T \hat v.

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
(:func:`grad_theta`).

In the stable form the gradient needs no :math:`n \times n` matrix product:
:math:`R = W^{1/2} B^{-1} W^{1/2}` (as in R&W Algorithm 5.1) from the inverse of :math:`L_B`
(LAPACK ``dpotri``, :math:`2n^3/3` flops), and, since :math:`\Sigma W^{1/2} = K W^{1/2} B^{-1}`,

.. math::
   \Sigma_{ii} = \frac{(K W^{1/2} B^{-1})_{ii}}{W_i^{1/2}} = \frac{1}{W_i}\sum_j K_{ij} R_{ij},
   \qquad \Sigma s = K s - K R K s,

the first in :math:`O(n^2)` where R&W Algorithm 5.1 solves :math:`L_B^{-1} W^{1/2} K`
(:math:`n^3` flops) for it (where :math:`W_i` is 0 or below :data:`_W_DIRECT`,
:math:`\Sigma_{ii} = K_{ii} - k_i^T R k_i` instead), the second by matrix-vector products. The
matrix :math:`\Sigma` itself (``LaplaceResult.cov``) is then formed only when it is read. The
whitened form computes :math:`\Sigma = C^T C`, :math:`C = L_A^{-1} L_K^T`, as part of its gradient.

Cost per evaluation with the gradient (``k`` Newton steps, the last one the convergence
check): stable form :math:`(k + 1)\,n^3/3` flops for the Cholesky factorisations of :math:`K` and
of :math:`B` (one more when the pending step is taken) and :math:`2n^3/3` for ``dpotri``, plus
:math:`O(n^2)` work; whitened form about :math:`n^3/3 + (k + 1)\,7n^3/3 + 3n^3`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.linalg import blas, cho_solve, lapack, solve_triangular

from bayes_gp.latent.likelihoods import LatentLikelihood

__all__ = ["LaplaceResult", "laplace", "grad_theta"]

#: Below this :math:`W_i` the stable form computes :math:`\Sigma_{ii}` as
#: :math:`K_{ii} - k_i^T R k_i` rather than by dividing by :math:`W_i` (module docstring).
_W_DIRECT = 1e-150

_EPS = float(np.finfo(float).eps)


class _Deferred:
    """A value computed on first use, ``fn(*args)``, then kept; ``diag`` its diagonal where
    that is known beforehand."""

    def __init__(self, fn, *args, diag=None):
        self.fn, self.args, self.value, self.diag = fn, args, None, diag

    def get(self):
        if self.fn is not None:
            self.value = self.fn(*self.args)
            self.fn, self.args = None, ()
        return self.value


class _DeferredField:
    """A dataclass field that may be given as a :class:`_Deferred` and is evaluated when read.

    ``dataclasses`` passes the constructor's value to ``__set__`` (also for frozen classes,
    whose ``__init__`` sets fields with ``object.__setattr__``); reading returns the value,
    evaluating a deferred one once. The field's default is ``None``.
    """

    def __set_name__(self, owner, name):
        self.slot = "_deferred_" + name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return None  # the default
        val = obj.__dict__[self.slot]
        return val.get() if isinstance(val, _Deferred) else val

    def __set__(self, obj, value):
        obj.__dict__[self.slot] = value


@dataclass(frozen=True)
class LaplaceResult:
    """The Laplace approximation at fixed :math:`(K, m, \\phi)`.

    ``log_evidence`` is :math:`-\\infty` exactly when ``feasible`` is False, with ``reason``
    saying why. The gradients and ``cov`` are ``None`` unless requested (and ``feasible``).
    ``cov``, the Laplace posterior covariance :math:`\\Sigma = (K^{-1} + W)^{-1}`, is computed
    when first read (:math:`O(n^3)`) where the solve did not need it; :meth:`cov_diag` gives its
    diagonal without forming it.
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
    cov: np.ndarray | None = _DeferredField()  # type: ignore[assignment]  # Sigma, lazily

    def cov_diag(self) -> np.ndarray | None:
        """:math:`\\mathrm{diag}(\\Sigma)` (``None`` where ``cov`` is), without forming
        :math:`\\Sigma` when the gradient computation already has it."""
        raw = self.__dict__["_deferred_cov"]
        if isinstance(raw, _Deferred) and raw.diag is not None:
            return raw.diag
        cov = self.cov
        return None if cov is None else np.diag(cov)


def _chol(A: np.ndarray) -> np.ndarray | None:
    L, info = lapack.dpotrf(A, lower=1, clean=1)
    if info != 0 or not np.all(np.isfinite(L)):
        return None
    return L


def _chol_K(K: np.ndarray) -> np.ndarray | None:
    """The upper Cholesky factor :math:`U = L_K^T` of ``K`` as a Fortran-ordered array (from
    the lower triangle of ``K``, which a C-ordered ``K`` holds as its transpose's upper one, so
    that LAPACK copies it once and transposes nothing), or ``None``. Its strictly lower
    triangle is not cleared (BLAS's triangular routines do not read it)."""
    U, info = lapack.dpotrf(K.T, lower=0, clean=0)
    if info != 0 or not np.all(np.isfinite(np.diagonal(U))):
        return None
    return U


def _infeasible(f, v, reason, n_iter) -> LaplaceResult:
    return LaplaceResult(-np.inf, f, v, False, reason, n_iter)


def _not_converged(f, v, gmax, n_iter, max_iter) -> LaplaceResult:
    return _infeasible(
        f,
        v,
        f"Newton's method did not converge after {n_iter} steps (largest gradient entry "
        f"{gmax:.3g}; the line search stalled or max_iter={max_iter} was reached)",
        n_iter,
    )


@lru_cache(maxsize=64)
def _tril(k: int) -> tuple[np.ndarray, np.ndarray]:
    return np.tril_indices(k, -1)


def _zero_lower(M: np.ndarray, block: int = 32) -> np.ndarray:
    """Set the strictly lower triangle of the C-ordered square ``M`` to zero, in place."""
    n = M.shape[0]
    for i in range(0, n, block):
        e = min(i + block, n)
        M[e:, i:e] = 0.0
        M[i:e, i:e][_tril(e - i)] = 0.0
    return M


def _fill_lower(M: np.ndarray, block: int = 32) -> np.ndarray:
    """Copy the upper triangle of the C-ordered square ``M`` onto its lower one, in place, by
    panels of ``block`` columns (a plain transposed copy is several times slower)."""
    n = M.shape[0]
    for i in range(0, n, block):
        e = min(i + block, n)
        M[e:, i:e] = M[i:e, e:].T
        D = M[i:e, i:e]
        low = _tril(e - i)
        D[low] = D.T[low]
    return M


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
    _form: str = "auto",
) -> LaplaceResult:
    r"""Mode, log evidence and (optionally) gradient of the Laplace approximation.

    Parameters
    ----------
    K : (n, n) array
        Prior covariance of the latent values (with any jitter already added); must be
        positive definite. Only its lower triangle is used to check that (the Cholesky
        factorisation); the stable form reads all of it.
    m : (n,) array
        Prior mean of the latent values.
    likelihood : LatentLikelihood
        The observation model holding ``y``. ``likelihood.log_concave`` selects the stable
        (:math:`B = I + W^{1/2} K W^{1/2}`, R&W Algorithm 3.1) or the whitened form of Newton's
        method (module docstring).
    phi : sequence of float
        The likelihood's own parameters, in ``likelihood.param_names`` order.
    f0 : (n,) array, optional
        Warm start for Newton's method (e.g. the previous mode); the answer does not depend on
        it beyond ``tol`` when the posterior is unimodal.
    tol : float
        Convergence when the Newton decrement :math:`g^T A^{-1} g` (twice the predicted increase
        of :math:`\Psi`) is below ``tol**2`` and the largest entry of the whitened gradient
        :math:`g` below ``tol`` :math:`(1 + \max_i|v_i|)`.
    max_iter : int
        Newton steps before giving up (an infeasible result with that reason).
    gradient : bool
        Also compute :math:`\partial\log q/\partial K`, :math:`\partial/\partial m` and
        :math:`\partial/\partial\phi` (the formulas in the module docstring).
    _form : {"auto", "stable", "whitened"}
        For tests and benchmarks: force one form of Newton's method (``"stable"`` requires
        :math:`W \ge 0` and hands over to the whitened form otherwise).
    """
    K = np.asarray(K, dtype=float)
    m = np.asarray(m, dtype=float)
    n = likelihood.n
    if K.shape != (n, n) or m.shape != (n,):
        raise ValueError(f"K must be ({n}, {n}) and m ({n},), got {K.shape} and {m.shape}")
    if _form not in ("auto", "stable", "whitened"):
        raise ValueError(f"_form must be 'auto', 'stable' or 'whitened', got {_form!r}")
    phi = np.asarray(phi, dtype=float).reshape(-1)
    U = _chol_K(K)
    if U is None:
        return _infeasible(m.copy(), np.zeros(n), "K is not positive definite", 0)
    if f0 is not None:
        f0 = np.asarray(f0, dtype=float)
        if not np.all(np.isfinite(f0)):
            f0 = None
    stable = _form == "stable" or (_form == "auto" and bool(likelihood.log_concave))
    args = (K, m, U, likelihood, phi, f0, tol, max_iter, gradient)
    if stable:
        res = _laplace_stable(*args)
        if res is not None:
            return res
    return _laplace_whitened(*args)


def _laplace_stable(K, m, U, likelihood, phi, f0, tol, max_iter, gradient):
    """Newton's method in the stable form (module docstring), or ``None`` where :math:`W` has
    a negative or non-finite entry or :math:`B` cannot be factorised (the caller then uses the
    whitened form, which handles any sign of :math:`W`).

    The iterates are kept in the whitened coordinates :math:`v` as in the whitened form, and
    the Newton step is computed from the gradient :math:`g = L_K^T \\nabla\\log p - v` by
    Woodbury, :math:`A^{-1} g = g - L_K^T W^{1/2} B^{-1} W^{1/2} L_K g`, not as the difference
    between R&W's target :math:`a_{\\mathrm{new}} = (I + WK)^{-1} b` and the current iterate:
    its rounding error then shrinks with :math:`g`, where that of the target stays at
    :math:`\\epsilon\\,\\kappa(B)\\,\\lVert b \\rVert` and can keep Newton's method above
    ``tol`` (large counts), and a warm start far from the range of an ill-conditioned :math:`K`
    stays accurate, where :math:`a = K^{-1}(f_0 - m)` would not.
    """
    n = m.size

    def whiten(x):  # L_K^T x
        return blas.dtrmv(U, x)

    buf = np.empty((n, n))  # B, L_B, then B^-1, R and the gradient wrt K (C order)

    def factor(W):
        """(W^1/2, L_B) with L_B in buf (as its transpose's lower triangle), or None."""
        if not (np.all(W >= 0.0) and np.all(np.isfinite(W))):
            return None
        sW = np.sqrt(W)
        np.multiply(np.multiply.outer(sW, sW, out=buf), K, out=buf)
        buf.flat[:: n + 1] += 1.0
        L, info = lapack.dpotrf(buf.T, lower=1, clean=0, overwrite_a=1)
        if info != 0 or not np.all(np.isfinite(np.diagonal(L))):
            return None
        return sW, L

    def evaluate(v):
        f = m + blas.dtrmv(U, v, trans=1)  # f = m + L_K v
        logp, d1, d2, d3 = likelihood.derivatives(f, phi)
        return f, float(np.sum(logp)) - 0.5 * float(v @ v), d1, d2, d3

    v = np.zeros(n) if f0 is None else blas.dtrsv(U, f0 - m, trans=1)
    f, psi, d1, d2, d3 = evaluate(v)
    if not np.isfinite(psi):
        v = np.zeros(n)
        f, psi, d1, d2, d3 = evaluate(v)
    converged = False
    factored = None  # (W, W^1/2, L_B) at the current iterate
    n_iter = 0
    for n_iter in range(1, max_iter + 1):  # noqa: B007 (n_iter is reported)
        W = -d2
        fac = factor(W)
        if fac is None:
            return None
        factored = (W, *fac)
        sW, L = fac
        Ld1 = whiten(d1)
        g = Ld1 - v  # gradient of Psi in v
        # the Newton step A^-1 g = g - L_K^T W^1/2 B^-1 W^1/2 L_K g (Woodbury)
        h = sW * lapack.dpotrs(L, sW * blas.dtrmv(U, g, trans=1), lower=1)[0]
        dv = g - whiten(h)
        dec = float(g @ dv)
        scale = 1.0 + float(np.max(np.abs(v)))
        if dec < tol**2 and np.max(np.abs(g)) < tol * scale:
            converged = True
            # the pending Newton step: quadratic convergence to machine precision (skipped when
            # it is below the rounding level of v)
            if np.max(np.abs(dv)) > 32 * _EPS * scale:
                f_t, psi_t, d1_t, d2_t, d3_t = evaluate(v + dv)
                if np.isfinite(psi_t):
                    v = v + dv
                    f, psi, d1, d2, d3 = f_t, psi_t, d1_t, d2_t, d3_t
                    factored = None
            break
        if dec < 1e-9 * (1.0 + abs(psi)):
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
            converged = np.max(np.abs(g)) < max(tol, 1e-6) * (1.0 + np.max(np.abs(Ld1)))
            break
        v = v + t * dv
        f, psi, d1, d2, d3 = f_t, psi_t, d1_t, d2_t, d3_t
    if not converged:
        return _not_converged(f, v, float(np.max(np.abs(whiten(d1) - v))), n_iter, max_iter)
    if factored is None:
        W = -d2
        fac = factor(W)
        if fac is None:
            return None
        factored = (W, *fac)
    W, sW, L = factored
    logq = psi - float(np.sum(np.log(np.diagonal(L))))
    if not gradient:
        return LaplaceResult(logq, f, v, True, "", n_iter)

    a = blas.dtrsv(U, v)  # K^-1 (f - m) = L_K^-T v

    # R = W^1/2 B^-1 W^1/2, kept as -R/2 in the upper triangle of buf (the lower triangle of
    # its transpose, where LAPACK and BLAS see it), the strictly lower triangle zero
    _zero_lower(buf)
    lapack.dpotri(L, lower=1, overwrite_c=1)
    np.multiply(buf, sW[:, None], out=buf)
    np.multiply(buf, -0.5 * sW, out=buf)
    # sum_j K_ij R_ij over the full symmetric R from its upper triangle (K symmetric)
    kr = -2.0 * (
        np.einsum("ij,ij->i", K, buf)
        + np.einsum("ij,ij->j", K, buf)
        - np.diagonal(K) * np.diagonal(buf)
    )
    Rh = buf.T  # -R/2 as a lower triangle (Fortran order)
    direct = W < _W_DIRECT
    dS = np.empty(n)
    dS[~direct] = kr[~direct] / W[~direct]
    if np.any(direct):
        Kc = np.asfortranarray(K[:, direct])
        RKc = blas.dsymm(-2.0, Rh, Kc, lower=1)
        dS[direct] = np.diagonal(K)[direct] - np.sum(Kc * RKc, axis=0)
    s2 = 0.5 * dS * d3
    Ks2 = K @ s2
    Ss2 = Ks2 - K @ blas.dsymv(-2.0, Rh, Ks2, lower=1)  # Sigma s2 = K s2 - K R K s2
    u = s2 - W * Ss2
    # grad_K = a a^T/2 - R/2 + (u d1^T + d1 u^T)/2: rank updates of the triangle, then mirrored
    blas.dsyr(0.5, a, a=Rh, lower=1, overwrite_a=1)
    blas.dsyr2(0.5, u, d1, a=Rh, lower=1, overwrite_a=1)
    grad_K = _fill_lower(buf)
    grad_m = a + u
    dl, dd1, dd2 = likelihood.phi_derivatives(f, phi)
    grad_phi = dl.sum(axis=1) + 0.5 * dd2 @ dS + dd1 @ Ss2
    cov = _Deferred(_cov_whitened, U, W, diag=dS)
    return LaplaceResult(logq, f, v, True, "", n_iter, grad_K, grad_m, grad_phi, cov)


def _cov_whitened(U: np.ndarray, W: np.ndarray) -> np.ndarray:
    r""":math:`\Sigma = L_K A^{-1} L_K^T = C^T C`, :math:`C = L_A^{-1} L_K^T` (as the whitened
    form computes it), positive semi-definite by construction; ``U`` from :func:`_chol_K`."""
    LK = np.tril(U.T)
    LA = _chol(np.eye(W.size) + LK.T @ (W[:, None] * LK))
    C = solve_triangular(LA, LK.T, lower=True)
    return C.T @ C


def _laplace_whitened(K, m, U, likelihood, phi, f0, tol, max_iter, gradient):
    """Newton's method in the whitened form (module docstring)."""
    n = m.size
    LK = np.tril(U.T)
    if f0 is not None:
        v = solve_triangular(LK, f0 - m, lower=True)
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
    for n_iter in range(1, max_iter + 1):
        g = LK.T @ d1 - v  # gradient of Psi in v
        W = -d2
        LA = _chol(np.eye(n) + LK.T @ (W[:, None] * LK))
        concave = LA is not None
        if not concave:  # not concave here: Newton direction with W+ = max(W, 0)
            LA = _chol(np.eye(n) + LK.T @ (np.maximum(W, 0.0)[:, None] * LK))
        if LA is None:  # W (or the gradient) not finite: the likelihood overflowed here
            return _infeasible(f, v, "the likelihood's curvature is not finite at the latent "
                               "values reached (a parameter at an extreme value)", n_iter)  # fmt: skip
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
        return _not_converged(f, v, float(np.max(np.abs(LK.T @ d1 - v))), n_iter, max_iter)

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
