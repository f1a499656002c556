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
from scipy.special import ndtr, ndtri

from bayes_gp.latent.laplace import LaplaceResult, _chol
from bayes_gp.latent.likelihoods import LatentLikelihood
from bayes_gp.linalg import NotPSDError, jittered_cholesky
from bayes_gp.predictive import CI_QUANTILES

__all__ = [
    "response_moments",
    "GH_NODES",
    "SiteFactor",
    "ModeFactor",
    "expected_response",
    "log_predictive_density",
    "predictive_cdf",
    "predictive_quantiles",
    "QUANTILE_NODES",
    "predict_latent",
    "joint_conditional",
    "la_loo",
    "la_loo_terms",
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
        logp = likelihood.log_density(f, phi)
        return _logsumexp0(logp + _LOG_W[:, None])


def _logsumexp0(a: np.ndarray) -> np.ndarray:
    r""":math:`\log\sum_j e^{a_j}` over the first axis, shifted by its largest finite value
    (plain NumPy: thread-safe, where ``scipy.special.logsumexp``'s array-API dispatch is not,
    and without its per-call overhead); :math:`-\infty` where every term is."""
    top = np.max(a, axis=0)
    top = np.where(np.isfinite(top), top, 0.0)
    return np.log(np.sum(np.exp(a - top), axis=0)) + top


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


#: Gauss–Hermite nodes of the predictive quantiles (:func:`predictive_quantiles`). The 94%
#: bounds of a negative-binomial mixture (latent sd 0.3–1.5) are the same integers from 24 nodes
#: up to 96; of a Student-t mixture they agree to 1e-6 of the scale from 32 nodes.
QUANTILE_NODES = 48
_QX, _QW = hermgauss(QUANTILE_NODES)
_QW = _QW / np.sqrt(np.pi)
#: Nodes whose weight is below this are left out of the quantile search (total < 1e-13).
_MIN_WEIGHT = 1e-15
#: Latent values per block of the quantile search (draws x nodes x inputs).
_BLOCK = 1 << 20


def predictive_quantiles(
    likelihood: LatentLikelihood,
    phis,
    means: np.ndarray,
    variances: np.ndarray,
    probs=CI_QUANTILES,
    size=None,
) -> list[np.ndarray]:
    r"""Quantiles of the predictive distribution of :math:`y_*`, deterministic and accurate.

    The predictive distribution of :math:`y_{*i}` is the mixture, over the Gaussian latent
    :math:`f \sim N(\mu_{si}, s_{si}^2)` of each posterior draw :math:`s = 1 \dots S` (one row
    for a type-II fit), of the observation model :math:`p(y \mid f, \phi_s)`; its CDF is

    .. math::
       F_i(y) = \frac1S \sum_{s=1}^S \int G(y \mid f, \phi_s)\, N(f \mid \mu_{si}, s_{si}^2)\, df,
       \qquad G(y \mid f, \phi) = P(Y \le y \mid f, \phi)

    (:meth:`~bayes_gp.latent.likelihoods.LatentLikelihood.cdf_values`, with the exposure or
    trials). Each draw's integral is taken by Gauss–Hermite quadrature (:data:`QUANTILE_NODES`
    nodes :math:`x_j`, weights :math:`w_j/\sqrt\pi`) in whichever variable it is smooth in:
    over :math:`f`, :math:`\sum_j w_j G(y \mid \mu + \sqrt2 s x_j)/\sqrt\pi`, where the
    latent sd :math:`s` is at most the spread of :math:`G`'s step in :math:`f`; else (the
    latent uncertainty dominates: large counts, a narrow Student-t) over the threshold
    :math:`T` at which :math:`G` steps (:meth:`~bayes_gp.latent.likelihoods.LatentLikelihood.
    latent_threshold`, :math:`G(y \mid f) = P(T > f)`), by parts
    :math:`\int G\, dN = E_T[\Phi((T - \mu)/s)] = \sum_j w_j
    \Phi((t(\Phi(\sqrt2 x_j)) - \mu)/s)/\sqrt\pi`, whose integrand is smooth on the scale of
    :math:`s`. (Quadrature over :math:`f` alone fails there: at latent sd 1 a Poisson's 97%
    quantile near 200 came out 183–239 from 16 to 96 nodes.)

    The :math:`q`-quantile is :math:`\min\{y : F_i(y) \ge q\}`: for counts (Poisson, negative
    binomial, binomial, Bernoulli) the smallest integer :math:`k` with :math:`F_i(k) \ge q`,
    found by doubling and integer bisection; for a continuous outcome (Student-t, Gaussian) the
    root of :math:`F_i(y) = q`, by bisection between the smallest and largest component
    quantile to :math:`10^{-9}` of that bracket. No random numbers: identical inputs give
    identical quantiles.

    Parameters
    ----------
    likelihood : LatentLikelihood
    phis : sequence of S parameter vectors
        The likelihood's parameters per draw.
    means, variances : ndarray (S, m)
        The latent :math:`f_*` of each draw at each input.
    probs : sequence of float
        The probabilities (default: the bounds of the central 94% interval).
    size : ndarray (m,) or None
        Exposure or trials at each input (default 1), as the likelihood takes them.

    Returns
    -------
    list of ndarray (m,)
        One array per probability in ``probs``.
    """
    means = np.atleast_2d(np.asarray(means, float))
    sds = np.sqrt(np.maximum(np.atleast_2d(np.asarray(variances, float)), 0.0))
    S, m = means.shape
    phi = [np.asarray([p[k] for p in phis], float)[:, None]
           for k in range(likelihood.n_phi)]  # fmt: skip
    size = None if size is None else np.broadcast_to(np.asarray(size, float), (m,))
    out = [np.empty(m) for _ in probs]
    step = max(1, _BLOCK // (S * _KX.size))
    for start in range(0, m, step):
        cols = slice(start, min(m, start + step))
        mix = _Mixture(likelihood, phi, means[:, cols], sds[:, cols],
                       None if size is None else size[cols])  # fmt: skip
        for q, arr in zip(probs, out, strict=True):
            arr[cols] = mix.continuous_quantile(q) if mix.continuous else mix.count_quantile(q)
    return out


_KX, _KW = _QX[_QW >= _MIN_WEIGHT], _QW[_QW >= _MIN_WEIGHT] / _QW[_QW >= _MIN_WEIGHT].sum()
_KU = ndtr(np.sqrt(2.0) * _KX)  # the threshold's probabilities at the nodes


class _Mixture:
    """The predictive CDF of :func:`predictive_quantiles` at a block of inputs, and the search
    for its quantiles."""

    def __init__(self, likelihood, phi, means, sds, size):
        self.lik, self.phi, self.means, self.sds, self.size = likelihood, phi, means, sds, size
        self.continuous = likelihood.outcome == "continuous"

    def cdf(self, y: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """:math:`F(y)` at the inputs ``idx`` of the block (``y`` of their length)."""
        lik, phi = self.lik, self.phi
        mu, sd = self.means[:, idx], self.sds[:, idx]
        size = None if self.size is None else self.size[idx]
        F = np.zeros(mu.shape)
        if self.continuous:
            inside = np.ones(idx.size, bool)
        else:
            top = np.broadcast_to(np.asarray(lik.max_value(size), float), (idx.size,))
            inside = (y >= 0) & (y < top)
            F[:, y >= top] = 1.0
        if not inside.any():
            return F.mean(axis=0)
        y_in, size_in = y[inside], None if size is None else size[inside]
        mu, sd = mu[:, inside], sd[:, inside]
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            swap = sd > lik.threshold_scale(y_in[None, :], phi, size_in)
            Fin = np.empty(mu.shape)
            s_i, m_i = np.nonzero(~swap)
            if s_i.size:  # over f
                f = mu[s_i, m_i][:, None] + np.sqrt(2.0) * sd[s_i, m_i][:, None] * _KX[None, :]
                n_i = None if size_in is None else size_in[m_i][:, None]
                G = lik.cdf_values(y_in[m_i][:, None], f, [p[s_i] for p in phi], n_i)
                Fin[s_i, m_i] = G @ _KW
            s_i, m_i = np.nonzero(swap)
            if s_i.size:  # over the threshold T (its finite part, beside an atom at +inf)
                atom = lik.threshold_atom(y_in[m_i], [p[s_i, 0] for p in phi])
                Fin[s_i, m_i] = atom + (1.0 - atom) * (
                    ndtr((self._thresholds(y_in, size_in, s_i, m_i) - mu[s_i, m_i][:, None])
                         / sd[s_i, m_i][:, None]) @ _KW)  # fmt: skip
        F[:, inside] = Fin
        return F.mean(axis=0)

    def _thresholds(self, y, size, s_i, m_i) -> np.ndarray:
        """The threshold quantiles :math:`t(\\Phi(\\sqrt2 x_j))` of draws ``s_i`` at inputs
        ``m_i`` (values ``y``, sizes ``size`` of the inputs): computed once per input when the
        likelihood has no parameters, once per draw for a location family (an identity link:
        :math:`t = y + t_0`), else per pair."""
        lik, phi = self.lik, self.phi
        if not phi:
            n = None if size is None else size[:, None]
            t = lik.latent_threshold(y[:, None], _KU[None, :], [], n)
            return np.broadcast_to(t, (y.size, _KU.size))[m_i]
        if lik.identity_link:
            if getattr(self, "_t0", None) is None:
                self._t0 = lik.latent_threshold(0.0, _KU[None, :], phi)
            return y[m_i][:, None] + self._t0[s_i]
        n = None if size is None else size[m_i][:, None]
        return lik.latent_threshold(y[m_i][:, None], _KU[None, :], [p[s_i] for p in phi], n)

    def count_quantile(self, q: float) -> np.ndarray:
        """The smallest integer ``k`` with :math:`F(k) \\ge q` per input: from a guess (the
        response mean at the latent quantile), halve or double to a bracket ``lo < k <= hi``
        with :math:`F(lo) < q \\le F(hi)`, then :func:`_bracketed`'s interpolation search on
        the integers."""
        m = self.means.shape[1]
        top = np.broadcast_to(np.asarray(self.lik.max_value(self.size), float), (m,))
        mean = self.means.mean(axis=0)
        sd = np.sqrt(np.mean(self.sds**2, axis=0) + self.means.var(axis=0))
        phi0 = [p[0, 0] for p in self.phi]
        with np.errstate(over="ignore", invalid="ignore"):
            guess = self.lik.response_mean(mean + ndtri(q) * sd, phi0, self.size)
        guess = np.clip(np.ceil(np.nan_to_num(guess, nan=1.0, posinf=2.0**60)), 0.0, top)
        lo, hi = np.full(m, -1.0), guess.copy()
        Flo, Fhi = np.zeros(m), self.cdf(hi, np.arange(m))
        down = Fhi >= q  # halve hi towards 0 while F(hi) >= q
        todo = np.flatnonzero(down & (hi > 0))
        while todo.size:
            mid = np.floor(0.5 * hi[todo])
            Fm = self.cdf(mid, todo)
            ok = Fm >= q
            hi[todo[ok]], Fhi[todo[ok]] = mid[ok], Fm[ok]
            lo[todo[~ok]], Flo[todo[~ok]] = mid[~ok], Fm[~ok]
            todo = todo[ok & (mid > 0)]
        todo = np.flatnonzero(~down)  # double hi (capped at the top, where F = 1)
        for _ in range(64):
            if todo.size == 0:
                break
            lo[todo], Flo[todo] = hi[todo], Fhi[todo]
            hi[todo] = np.minimum(2.0 * hi[todo] + 1.0, top[todo])
            Fhi[todo] = self.cdf(hi[todo], todo)
            todo = todo[Fhi[todo] < q]
        hi[todo] = np.inf  # the mean ran away: no finite quantile
        ok = np.isfinite(hi)
        return _bracketed(self.cdf, q, lo, hi, Flo, Fhi, ok, integer=True)

    def continuous_quantile(self, q: float) -> np.ndarray:
        """The root of :math:`F(y) = q` per input, between the smallest and the largest
        component quantile (every component CDF is below, above :math:`q` there), by
        :func:`_bracketed`."""
        f = self.means[:, None, :] + np.sqrt(2.0) * self.sds[:, None, :] * _KX[None, :, None]
        with np.errstate(over="ignore", invalid="ignore"):
            comp = self.lik.ppf_values(q, f, [p[:, :, None] for p in self.phi])
        lo, hi = comp.min(axis=(0, 1)), comp.max(axis=(0, 1))
        m = lo.size
        Flo, Fhi = self.cdf(lo, np.arange(m)), self.cdf(hi, np.arange(m))
        return _bracketed(self.cdf, q, lo, hi, Flo, Fhi, np.ones(m, bool), integer=False)


def _bracketed(cdf, q, lo, hi, Flo, Fhi, todo_mask, integer: bool) -> np.ndarray:
    """Shrink brackets ``lo < x <= hi`` with ``F(lo) < q <= F(hi)`` to the quantile: the
    Illinois variant of regula falsi (interpolate; a step that did not halve the bracket is
    followed by a bisection), on the integers (down to ``hi - lo = 1``; the answer ``hi``) or
    the reals (down to ``1e-9`` of the bracket, or :math:`|F - q| < 10^{-12}`)."""
    tol = 1e-9 * (hi - lo) + 4 * np.finfo(float).eps * np.maximum(np.abs(lo), np.abs(hi))
    width = hi - lo
    done = np.zeros(lo.size, bool)
    todo = np.flatnonzero(todo_mask & ((hi - lo > 1) if integer else (hi - lo > tol)))
    bisect = np.zeros(lo.size, bool)
    for _ in range(200):
        if todo.size == 0:
            break
        a, b, fa, fb = lo[todo], hi[todo], Flo[todo], Fhi[todo]
        with np.errstate(invalid="ignore", divide="ignore"):
            x = a + (q - fa) / (fb - fa) * (b - a)
        x = np.where(bisect[todo] | ~np.isfinite(x), 0.5 * (a + b), x)
        if integer:
            x = np.clip(np.round(x), a + 1, b - 1)
        else:
            x = np.clip(x, a + 0.01 * (b - a), b - 0.01 * (b - a))
        Fx = cdf(x, todo)
        below = Fx < q
        lo[todo[below]], Flo[todo[below]] = x[below], Fx[below]
        hi[todo[~below]], Fhi[todo[~below]] = x[~below], Fx[~below]
        new_width = hi[todo] - lo[todo]
        bisect[todo] = new_width > 0.5 * width[todo]
        width[todo] = new_width
        if integer:
            left = new_width > 1
        else:
            left = (new_width > tol[todo]) & (np.abs(Fx - q) > 1e-12)
            done[todo[~left]] = True
            lo[todo[~left & ~below]] = x[~left & ~below]  # converged at x
            hi[todo[~left & below]] = x[~left & below]
        todo = todo[left]
    return hi if integer else 0.5 * (lo + hi)


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
    return la_loo_terms(likelihood, phi, result.f, s2)


def la_loo_terms(
    likelihood: LatentLikelihood, phi, f: np.ndarray, cov_diag: np.ndarray
) -> np.ndarray:
    r"""LA-LOO log predictive densities (module docstring; Vehtari et al. 2016, §4.1) from the
    Laplace mode :math:`\hat f` and :math:`\mathrm{diag}(\Sigma)` alone (``cov_diag``), e.g.
    from the native solver (:func:`bayes_gp.latent.native.laplace_mode`): the sites'
    precisions :math:`W_{ii} = -\ell''_i(\hat f_i)` and the gradient
    :math:`\ell'_i(\hat f_i)` are the likelihood's at the mode."""
    _, d1, d2, _ = likelihood.derivatives(f, phi)
    return _cavity_loo(likelihood, phi, f, cov_diag, -d2, d1)


def _cavity_loo(likelihood, phi, f, s2, W, a) -> np.ndarray:
    """Remove each site (precision ``W``, natural location ``W f + a``) from the marginals
    :math:`N(f_i, s^2_i)` and integrate the likelihood over the cavity (module docstring)."""
    tau = 1.0 / s2 - W
    nu = f / s2 - (W * f + a)
    return log_predictive_density(likelihood, phi, nu / tau, 1.0 / tau)
