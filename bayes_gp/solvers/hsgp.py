r"""HSGP for :class:`~bayes_gp.GPRegression` (``approx="hsgp"``): the collapsed likelihood and
the Riutort-Mayol et al. (2022) default rule for the number of basis functions and the boundary
factor. The formulas, defaults and references are in :mod:`bayes_gp.solvers.approx`.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pymc.gp.hsgp_approx import calc_eigenvalues
from pytensor.tensor.linalg import cholesky, solve_triangular
from scipy import linalg as sla
from scipy import optimize as sopt
from scipy import special, stats

from bayes_gp.kernels.base import factors, smoothness
from bayes_gp.linalg import EAGER_MODE
from bayes_gp.solvers.approx_options import ApproxSpec
from bayes_gp.solvers.observed import (
    LOG_2PI,
    ObservedLikelihood,
    broadcast_mean,
    loo_terms,
    with_noise,
)

__all__ = [
    "HSGP_MAX_DEFAULT_BASIS",
    "LS_QUANTILES",
    "hsgp_constants",
    "hsgp_m_c",
    "hsgp_rule",
    "HSGPLikelihood",
]

#: The default HSGP rule refuses to build more basis functions than this (O(m^3) per gradient).
HSGP_MAX_DEFAULT_BASIS = 1000
#: Quantiles of the length-scale prior taken as the range the HSGP basis must resolve.
LS_QUANTILES = (0.025, 0.975)
_LS_DRAWS = 20000  # prior draws for those quantiles (Monte Carlo error ~2%)
#: Spectral densities below this are treated as this (their square root's gradient is finite).
PSD_FLOOR = 1e-250
_CHUNK = 8192  # rows of the basis matrix evaluated at a time


# ------------------------------------------------------------------------ HSGP default rule
#: (a1, a2) of Riutort-Mayol et al. (2022) as in ``pm.gp.hsgp_approx.approx_hsgp_hyperparams``.
_PUBLISHED = {np.inf: (3.2, 1.75), 2.5: (4.1, 2.65), 1.5: (4.5, 3.42)}


def _matern_corr(nu: float, r: float) -> float:
    if np.isinf(nu):
        return float(np.exp(-0.5 * r * r))
    z = np.sqrt(2.0 * nu) * r
    log_k = (1.0 - nu) * np.log(2.0) - special.gammaln(nu) + nu * np.log(z)
    return float(np.exp(log_k + np.log(special.kve(nu, z)) - z))


def _spectral_tail(nu: float, t: float) -> float:
    """Fraction of the 1-D spectral mass at :math:`|\\omega\\ell| > t`."""
    if np.isinf(nu):
        return float(2.0 * stats.norm.sf(t))
    return float(2.0 * stats.t.sf(t, df=2.0 * nu))


@functools.lru_cache(maxsize=64)
def hsgp_constants(nu: float) -> tuple[float, float]:
    r"""Constants :math:`(a_1, a_2)` of the HSGP rule for a Matérn kernel of smoothness ``nu``.

    ``nu = inf`` is the squared exponential. :math:`\nu \in \{3/2, 5/2, \infty\}`: the published
    values (Riutort-Mayol et al. 2022); :math:`3/2 < \nu < 5/2` and :math:`5/2 < \nu < \infty`:
    those of the next rougher published kernel (Matérn 3/2, resp. 5/2), which ask for more basis
    functions and a larger box than needed. :math:`\nu < 3/2` (Matérn 1/2 included): derived from
    the accuracy the published Matérn-3/2 rule reaches, :math:`a_1` solving
    :math:`k_\nu(a_1) = k_{3/2}(4.5) = 0.0036` (Matérn correlation, R&W eq. 4.14) and :math:`a_2`
    solving :math:`P(|T_{2\nu}| > \pi a_2/2) = P(|T_3| > \pi\,3.42/2) = 1.26\%` (the 1-D
    Matérn spectral density of :math:`\omega\ell` is Student-t with :math:`2\nu` degrees of
    freedom, R&W eq. 4.15): Matérn 1/2 gets :math:`(5.62, 32.1)`.
    """
    nu = float(nu)
    if not nu > 0:
        raise ValueError(f"`nu` must be positive, got {nu}")
    if nu in _PUBLISHED:
        return _PUBLISHED[nu]
    if nu > 1.5:  # the published rule of the next rougher kernel: conservative
        return _PUBLISHED[2.5] if nu > 2.5 else _PUBLISHED[1.5]
    a1_ref, a2_ref = _PUBLISHED[1.5]
    corr = _matern_corr(1.5, a1_ref)
    tail = _spectral_tail(1.5, np.pi * a2_ref / 2.0)
    a1 = sopt.brentq(lambda r: _matern_corr(nu, r) - corr, 1e-2, 1e4, xtol=1e-12)
    t = float(stats.t.isf(tail / 2.0, df=2.0 * nu))
    return float(a1), float(2.0 * t / np.pi)


def _ls_range(ls, n_active: int) -> tuple[np.ndarray, np.ndarray]:
    draws = np.asarray(pm.draw(ls, draws=_LS_DRAWS, random_seed=0, mode=EAGER_MODE), dtype=float)
    draws = draws.reshape(_LS_DRAWS, -1)
    lo, hi = np.quantile(draws, LS_QUANTILES, axis=0)
    lo, hi = np.broadcast_to(lo, (n_active,)), np.broadcast_to(hi, (n_active,))
    return lo, np.maximum(hi, lo * (1.0 + 1e-9))


def hsgp_rule(nu: float, S, ls_lo, ls_hi, c=None) -> tuple[np.ndarray, np.ndarray]:
    r"""Riutort-Mayol et al. (2022) rule for one kernel, per input dimension.

    .. math::
       c = \max\!\left(a_1 \frac{\ell_{hi}}{S},\ 1.2\right), \qquad
       m = \left\lfloor a_2 \frac{c}{\ell_{lo}/S} \right\rfloor

    with :math:`(a_1, a_2)` = :func:`hsgp_constants` ``(nu)`` (for :math:`\nu \in \{3/2, 5/2,
    \infty\}` and a single dimension this is ``pm.gp.hsgp_approx.approx_hsgp_hyperparams``).
    A given ``c`` is kept. Returns ``(m, c)`` as arrays over the dimensions.
    """
    a1, a2 = hsgp_constants(nu)
    S, lo, hi = (np.atleast_1d(np.asarray(v, dtype=float)) for v in (S, ls_lo, ls_hi))
    c = np.maximum(a1 * hi / S, 1.2) if c is None else np.broadcast_to(c, S.shape).astype(float)
    m = np.maximum(np.floor(a2 * c / (lo / S)), 1).astype(int)
    return m, c


def _components(cov, X: np.ndarray):
    """``(active dims, half-ranges S, parts, None)`` with one ``(nu, mask, ls_lo, ls_hi)`` per
    stationary component of ``cov``; ``(dims, S, None, component)`` for the first component that
    is not a squared exponential or Matérn kernel with a length-scale."""
    dims = np.asarray(cov.active_dims)
    S = 0.5 * np.ptp(X[:, dims], axis=0)
    parts = []
    for leaf in factors(cov):
        nu = smoothness(leaf)
        ls = getattr(leaf, "ls", None)
        if nu is None or ls is None:
            return dims, S, None, leaf
        mask = np.isin(dims, np.asarray(leaf.active_dims))
        parts.append((nu, mask, *_ls_range(ls, int(mask.sum()))))
    return dims, S, parts, None


def _user_class(leaf) -> str:
    """The class name of the user's kernel ``leaf``, seen through the wrapper that carries its
    priors into a model (:class:`~bayes_gp.kernels.base.Substituted`)."""
    while hasattr(leaf, "base") and isinstance(leaf.base, pm.gp.cov.Covariance):
        leaf = leaf.base
    return type(leaf).__name__


def hsgp_m_c(cov, X: np.ndarray, c=None) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """Default numbers of basis functions and boundary factors for ``cov`` on inputs ``X``.

    :func:`hsgp_rule` for every stationary component of ``cov`` (sums: the largest ``c``, then
    the largest ``m`` at that ``c``), per active input dimension, with the length-scale range
    from the component's prior (:data:`LS_QUANTILES`). A given ``c`` (one per active dimension)
    is kept and only ``m`` is chosen.
    """
    dims, S, parts, other = _components(cov, X)
    if parts is None:
        raise ValueError(
            f"no default HSGP rule for the kernel component {_user_class(other)} (there is one for "
            "the squared exponential and Matérn kernels of any nu with a length-scale metric): "
            "give approx_options={'m': ..., 'c': ...}"
        )
    if c is None:
        c_final = np.full(dims.size, 1.2)
        for nu, mask, lo, hi in parts:
            c_final[mask] = np.maximum(c_final[mask], hsgp_rule(nu, S[mask], lo, hi)[1])
    else:
        c_final = np.asarray(c, dtype=float)
    m = np.ones(dims.size, dtype=int)
    for nu, mask, lo, hi in parts:
        m[mask] = np.maximum(m[mask], hsgp_rule(nu, S[mask], lo, hi, c_final[mask])[0])
    return tuple(int(v) for v in m), tuple(float(v) for v in c_final)


# -------------------------------------------------------------------------------------- HSGP
def _linear_mean(mean_func, X: np.ndarray):
    """``(B, theta)`` with ``mean_func(X) = B @ theta`` for zero, constant and linear means."""
    N = X.shape[0]
    if isinstance(mean_func, pm.gp.mean.Zero):
        return np.zeros((N, 0)), pt.zeros(0)
    if isinstance(mean_func, pm.gp.mean.Constant):
        c = pt.as_tensor_variable(mean_func.c)
        if c.ndim == 0:
            return np.ones((N, 1)), pt.reshape(c, (1,))
    if isinstance(mean_func, pm.gp.mean.Linear):
        A, b = pt.as_tensor_variable(mean_func.A), pt.as_tensor_variable(mean_func.b)
        if A.ndim == 1 and b.ndim == 0:
            return np.hstack([X, np.ones((N, 1))]), pt.concatenate([A, pt.reshape(b, (1,))])
    return None


class HSGPLikelihood(ObservedLikelihood):
    r"""Collapsed HSGP likelihood :math:`N(y \mid m, \Phi\Lambda\Phi^\top + \sigma^2 I)`.

    See the module docstring for the formula and the default ``m``, ``c``.

    Attributes
    ----------
    m : tuple of int
        Basis functions per active input dimension (:attr:`n_basis` in all).
    c : tuple of float
        Boundary factors: the box half-widths are ``L = c * S`` around the data's midpoint.
    L, center : ndarray
    """

    def __init__(self, spec: ApproxSpec, name, X, y, cov, mean_func, sigma, jitter, dims):
        self.X, self.y = X, y
        self.cov, self.mean_func = cov, mean_func
        self.sigma2 = pt.square(pt.as_tensor_variable(sigma))
        self.s2 = self.sigma2 + jitter
        dims_active = np.asarray(cov.active_dims)
        S = 0.5 * np.ptp(X[:, dims_active], axis=0)
        if np.any(S <= 0):
            raise ValueError("approx='hsgp' needs inputs that vary in every active dimension")
        self.check_spectral_density(cov, dims_active.size)
        m_given = None if spec.m is None else np.asarray(spec.m)[dims_active]
        c_given = None if spec.c is None else np.asarray(spec.c)[dims_active]
        if m_given is not None and c_given is not None:
            m, c = m_given, c_given
        else:
            m_rule, c = hsgp_m_c(cov, X, c=c_given)
            m = m_rule if m_given is None else m_given
            if m_given is None and int(np.prod(m)) > HSGP_MAX_DEFAULT_BASIS:
                raise ValueError(
                    f"the default HSGP rule asks for m={np.asarray(m).tolist()} ({int(np.prod(m))} basis "
                    f"functions, c={[round(v, 2) for v in c]}) to resolve the central 95% of "
                    f"the length-scale prior; more than {HSGP_MAX_DEFAULT_BASIS}. Give "
                    "approx_options={'m': ..., 'c': ...} (accepting a coarser approximation "
                    "of short length-scales), narrow the length-scale prior, or use "
                    "approx='vfe'"
                )
        self.m, self.c = tuple(int(v) for v in m), tuple(float(v) for v in c)
        self.n_basis = int(np.prod(self.m))
        self.L = np.asarray(self.c) * S
        self._resolution = self._resolvable(cov, dims_active, S)
        self.gp = pm.gp.HSGP(m=list(self.m), L=list(self.L), cov_func=cov, mean_func=mean_func)
        self.gp.prior_linearized(X)  # fixes the box centre at the data's midpoint
        self.center = np.asarray(self.gp._X_center, dtype=float)[dims_active]
        Xb = pt.dmatrix("X_basis")
        self._phi_fn = pytensor.function(
            [Xb], self.gp.prior_linearized(Xb)[0], mode=EAGER_MODE, on_unused_input="ignore"
        )
        eigvals = calc_eigenvalues(self.L, self.m)
        self.psd = cov.power_spectral_density(pt.as_tensor_variable(np.sqrt(eigvals)))
        self._sufficient_statistics()
        self._register(name, dims)

    def _resolvable(self, cov, dims, S):
        """``[(ls expression, smallest resolved ls per dimension of the component)]``: by the
        rule, ``m`` functions on the box ``c S`` resolve length-scales down to ``a2 c S / m``;
        ``None`` when a component has no rule."""
        out = []
        for leaf in factors(cov):
            nu, ls = smoothness(leaf), getattr(leaf, "ls", None)
            if nu is None or ls is None:
                return None
            mask = np.isin(dims, np.asarray(leaf.active_dims))
            a2 = hsgp_constants(nu)[1]
            c, m = np.asarray(self.c)[mask], np.asarray(self.m)[mask]
            out.append((pt.as_tensor_variable(ls), a2 * c * S[mask] / m))
        return out

    def check(self, draws) -> None:
        """Warn when fitted length-scales are shorter than the basis resolves (the diagnostic of
        Riutort-Mayol et al. 2022: the fitted ls should stay above :math:`a_2 c S / m`).

        ``draws``: a list of hyperparameter value lists (one for a MAP fit, the posterior draws
        for NUTS, judged by their 2.5% quantile).
        """
        if not self._resolution or not draws:
            return
        fn = self._fn("ls", lambda Xn: [ls * pt.ones(()) for ls, _ in self._resolution])
        values = [fn(*v, self.X[:0]) for v in draws]
        for k, (_, resolved) in enumerate(self._resolution):
            ls = np.array([np.broadcast_to(v[k], resolved.shape) for v in values])
            low = np.quantile(ls, 0.025, axis=0) if len(values) > 1 else ls[0]
            if np.any(low < resolved):
                warnings.warn(
                    f"HSGP: fitted length-scale(s) {np.round(low, 4).tolist()} (2.5% posterior "
                    f"quantile for NUTS) below {np.round(resolved, 4).tolist()}, the shortest "
                    f"that m={np.asarray(self.m).tolist()} basis functions with "
                    f"c={np.round(np.asarray(self.c, float), 2).tolist()}"
                    " resolve (Riutort-Mayol et al. 2022): the approximation is poor there; "
                    "rebuild with a larger approx_options['m']",
                    UserWarning,
                    stacklevel=3,
                )
                return

    @staticmethod
    def check_spectral_density(cov, n_active):
        omega = pt.as_tensor_variable(np.ones((2, n_active)))
        try:
            psd = cov.power_spectral_density(omega)
        except (NotImplementedError, AttributeError, ValueError, TypeError) as exc:
            raise ValueError(
                f"approx='hsgp' needs a stationary kernel with a spectral density, and this one "
                f"has none ({exc}); products of kernels, periodic and non-stationary kernels "
                "have none: use approx='vfe' or 'fitc'"
            ) from None
        wrt = list(pm.modelcontext(None).free_RVs)
        if wrt:
            try:
                pytensor.grad(pt.sum(psd), wrt, disconnected_inputs="ignore")
            except Exception as exc:  # NullTypeGradError and friends
                raise ValueError(
                    "approx='hsgp': the kernel's spectral density has no gradient in one of its "
                    f"hyperparameters ({exc}); fix that hyperparameter (e.g. ratquad's alpha) "
                    "or use approx='vfe' or 'fitc'"
                ) from None

    # -- basis -------------------------------------------------------------------------
    def basis(self, Xn: np.ndarray) -> np.ndarray:
        """Eigenfunctions :math:`\\Phi` at ``Xn`` (PyMC's ``calc_eigenvectors``), ``(n, m)``."""
        dims = np.asarray(self.cov.active_dims)
        lo, hi = self.center - self.L, self.center + self.L
        Xa = Xn[:, dims]
        if np.any(Xa < lo) or np.any(Xa > hi):
            raise ValueError(
                f"inputs outside the HSGP box [{lo.round(4).tolist()}, {hi.round(4).tolist()}] "
                "(c times the training data's half-range about its midpoint), where the basis "
                "reflects and is no GP: build the model with a larger approx_options['c']"
            )
        out = np.empty((Xn.shape[0], self.n_basis))
        for s in range(0, Xn.shape[0], _CHUNK):
            out[s : s + _CHUNK] = self._phi_fn(Xn[s : s + _CHUNK])
        return out

    def _chunks(self):
        for s in range(0, self.X.shape[0], _CHUNK):
            yield slice(s, s + _CHUNK), self.basis(self.X[s : s + _CHUNK])

    def _sufficient_statistics(self):
        X, y = self.X, self.y
        lin = _linear_mean(self.mean_func, X)
        m = self.n_basis
        if lin is None:  # a general mean function: keep Phi, form Phi^T r in the graph
            Phi = self.basis(X)
            r = pt.as_tensor_variable(y) - broadcast_mean(self.mean_func, pt.as_tensor_variable(X))
            self.G = Phi.T @ Phi
            self._Phi_r, self._rr = pt.dot(Phi.T, r), pt.dot(r, r)
            return
        B, theta = lin
        ybar = float(np.mean(y))
        yc = y - ybar  # centred, so that r'r is not a difference of large numbers
        B = np.hstack([B, np.ones((X.shape[0], 1))])
        theta = pt.concatenate([theta, pt.as_tensor_variable(np.array([-ybar]))])
        G = np.zeros((m, m))
        Pty = np.zeros(m)
        PtB = np.zeros((m, B.shape[1]))
        for sl, Phi in self._chunks():
            G += Phi.T @ Phi
            Pty += Phi.T @ yc[sl]
            PtB += Phi.T @ B[sl]
        self.G = 0.5 * (G + G.T)
        # r = yc - B theta  (theta's last entry -ybar restores y - m(X))
        self._Phi_r = Pty - pt.dot(PtB, theta)
        self._rr = (
            float(yc @ yc) - 2.0 * pt.dot(theta, B.T @ yc) + pt.dot(theta, pt.dot(B.T @ B, theta))
        )

    # -- likelihood -----------------------------------------------------------------------
    def _loglik(self, value):
        del value  # the observed y is fixed: its sufficient statistics are built in
        N, m = self.X.shape[0], self.n_basis
        d = pt.sqrt(pt.maximum(self.psd, PSD_FLOOR))
        A = pt.eye(m) + (d[:, None] * self.G * d[None, :]) / self.s2
        LA = cholesky(A, lower=True)
        v = solve_triangular(LA, d * self._Phi_r, lower=True)
        quad = (self._rr - pt.dot(v, v) / self.s2) / self.s2
        logdet = 2.0 * pt.sum(pt.log(pt.diag(LA))) + N * pt.log(self.s2)
        return -0.5 * (quad + logdet + N * LOG_2PI)

    def _quantities(self, values, Xn):
        """``psd, sigma^2 + jitter, Phi^T r, sigma^2, m(Xn)`` at hyperparameters ``values``."""

        def build(Xv):
            return [
                self.psd,
                self.s2 * pt.ones(()),
                self._Phi_r * pt.ones(()),
                self.sigma2 * pt.ones(()),
                broadcast_mean(self.mean_func, Xv),
            ]

        return self._fn("quantities", build)(*values, Xn)

    def _posterior(self, psd, s2, Phi_r):
        d = np.sqrt(np.maximum(psd, PSD_FLOOR))
        A = np.eye(self.n_basis) + d[:, None] * self.G * d[None, :] / s2
        LA = sla.cholesky(A, lower=True)
        v = sla.solve_triangular(LA, d * Phi_r, lower=True)
        mu_w = (
            d * sla.solve_triangular(LA.T, v, lower=False) / s2
        )  # R&W eq. 2.8: sigma^-2 A^-1 X^T y
        return d, LA, mu_w

    def predict(self, values, Xn, diag: bool, include_noise: bool, jitters=None):
        r"""Mean, variances and (``diag=False``) covariance of :math:`f_*` (or :math:`t_*`).

        .. math:: \mu_* = m(X_*) + \Phi_* \mu_w, \qquad \Sigma_* = W^\top W, \quad
                  W = L_A^{-1} D \Phi_*^\top
        """
        if jitters is not None:  # no extra jitter: the interface of ExactLikelihood.predict
            jitters.append(0.0)
        psd, s2, Phi_r, sigma2, mean_n = self._quantities(values, Xn)
        d, LA, mu_w = self._posterior(psd, s2, Phi_r)
        Phi_n = self.basis(Xn)
        mean = mean_n + Phi_n @ mu_w
        W = sla.solve_triangular(LA, (Phi_n * d).T, lower=True)
        var = np.sum(W * W, axis=0)
        cov = None if diag else W.T @ W
        return mean, *with_noise(var, cov, sigma2 if include_noise else 0.0)

    def loo(self, values) -> np.ndarray:
        """Exact leave-one-out log densities of the HSGP model (R&W eqs. 5.10–5.12), with
        :math:`\\mathrm{diag}(C^{-1}) = \\sigma^{-2}(1 - \\sigma^{-2}\\|L_A^{-1}D\\phi_i\\|^2)`
        and :math:`C^{-1}r = \\sigma^{-2}(r - \\Phi\\mu_w)`; :math:`O(Nm^2)`."""
        psd, s2, Phi_r, _, mean_x = self._quantities(values, self.X)
        d, LA, mu_w = self._posterior(psd, s2, Phi_r)
        r = self.y - mean_x
        out = np.empty(self.X.shape[0])
        for sl, Phi in self._chunks():
            W = sla.solve_triangular(LA, (Phi * d).T, lower=True)
            cinv = (1.0 - np.sum(W * W, axis=0) / s2) / s2
            alpha = (r[sl] - Phi @ mu_w) / s2
            out[sl] = loo_terms(cinv, alpha)
        return out
