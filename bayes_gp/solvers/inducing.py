r"""VFE and FITC for :class:`~bayes_gp.GPRegression` (``approx="vfe"|"fitc"``), through PyMC's
``pm.gp.MarginalApprox``, and the default inducing inputs. The formulas, defaults and references
are in :mod:`bayes_gp.solvers.approx`.
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from scipy import linalg as sla

from bayes_gp._arguments import renamed_argument
from bayes_gp.inference.jitter import DEFAULT_LATENT_JITTER
from bayes_gp.solvers.approx_options import ApproxSpec
from bayes_gp.solvers.hsgp import _components, hsgp_constants
from bayes_gp.solvers.observed import (
    ObservedLikelihood,
    broadcast_mean,
    loo_terms,
    with_noise,
)

__all__ = [
    "DEFAULT_INDUCING",
    "MAX_INDUCING",
    "default_n_inducing",
    "inducing_points",
    "SparseLikelihood",
]

#: Number of inducing inputs for VFE/FITC with a kernel the default rule does not cover: min(N, this).
DEFAULT_INDUCING = 200
#: The default rule's largest number of inducing inputs.
MAX_INDUCING = 500


# ------------------------------------------------------------------------------- VFE / FITC
def default_n_inducing(cov, X: np.ndarray) -> int:
    r"""Default number of inducing inputs, :math:`\min(N, 500, \prod_d \lceil 4 a_2 S_d /
    \ell_{lo,d} \rceil)`: four inducing inputs per period of the highest frequency that the
    HSGP rule resolves (:func:`hsgp_rule`: :math:`\omega_{max} = \pi a_2 / (2\ell_{lo})`, so
    :math:`2S\,\omega_{max}/\pi = a_2 S/\ell_{lo}` periods over the data), and the largest over
    the kernel's components. Kernels without a rule (periodic, products, non-stationary):
    :math:`\min(N, 200)`. Not below :math:`\min(N, 10)`."""
    N = X.shape[0]
    dims, S, parts, _ = _components(cov, X)
    if parts is None or int(np.unique(X, axis=0).shape[0]) < 2 or np.any(S <= 0):
        return min(N, DEFAULT_INDUCING)
    per_dim = np.ones(dims.size)
    for nu, mask, lo, _ in parts:
        a2 = hsgp_constants(nu)[1]
        per_dim[mask] = np.maximum(per_dim[mask], np.ceil(4.0 * a2 * S[mask] / lo))
    return int(min(N, MAX_INDUCING, max(10, np.prod(per_dim))))


@renamed_argument("seed", "random_seed")
def inducing_points(X: np.ndarray, n: int, random_seed: int = 0) -> np.ndarray:
    """``n`` inducing inputs: k-means centres of the standardised inputs (k-means++ start).

    With ``n`` at least the number of distinct inputs, the distinct inputs themselves.
    """
    from scipy.cluster.vq import kmeans2

    uniq = np.unique(X, axis=0)
    if n >= uniq.shape[0]:
        return uniq
    sd = X.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    mu = X.mean(axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an empty cluster is dropped below
        centres, _ = kmeans2((X - mu) / sd, n, seed=random_seed, minit="++")
    return np.unique(centres * sd + mu, axis=0)


class SparseLikelihood(ObservedLikelihood):
    r"""VFE or FITC through ``pm.gp.MarginalApprox`` (see the module docstring).

    Attributes
    ----------
    Xu : ndarray (M, D)
        Inducing inputs.
    """

    def __init__(self, spec: ApproxSpec, name, X, y, cov, mean_func, sigma, jitter, dims):
        self.X, self.y, self.kind = X, y, spec.name
        if spec.Xu is not None:
            self.Xu = spec.Xu
        else:
            n = spec.n_inducing or default_n_inducing(cov, X)
            self.Xu = inducing_points(X, n)
        self.cov, self.mean_func = cov, mean_func
        self.sigma2 = pt.square(pt.as_tensor_variable(sigma))
        self.s2 = self.sigma2 + jitter
        #: the model's jitter: a number, or the model's shared value (its current value is read
        #: where a number is needed)
        self._jitter = jitter
        #: jitter on K_uu, which has no noise on its diagonal (as a latent GP's covariance):
        #: DEFAULT_LATENT_JITTER (1e-6) of the prior variance scale (PyMC's default is 1e-6
        #: absolute), or the model's jitter when larger
        self._jitter_u_floor = DEFAULT_LATENT_JITTER * float(np.var(y))
        self._jitter_u = pt.maximum(np.float64(self._jitter_u_floor), jitter)
        self.gp = pm.gp.MarginalApprox(approx=spec.name.upper(), mean_func=mean_func, cov_func=cov)
        self._register(name, dims)

    @property
    def jitter_u(self) -> float:
        """The jitter on :math:`K_{uu}` in use (a number)."""
        j = self._jitter
        return max(self._jitter_u_floor, float(j.get_value() if hasattr(j, "get_value") else j))

    def _loglik(self, value):
        return self.gp._build_marginal_likelihood_loglik(
            value, self.X, self.Xu, pt.sqrt(self.s2), self._jitter_u
        )

    def check(self, draws) -> None:
        """No diagnostic for inducing-point approximations (the interface of
        :meth:`HSGPLikelihood.check`)."""

    def predict(self, values, Xn, diag: bool, include_noise: bool, jitters=None):
        """PyMC's ``MarginalApprox`` conditional (Quiñonero-Candela & Rasmussen 2005)."""
        if jitters is not None:  # no extra jitter: the interface of ExactLikelihood.predict
            jitters.append(0.0)

        def build(Xv):
            mu, cov = self.gp._build_conditional(
                Xv,
                False,
                diag,
                self.X,
                self.Xu,
                self.y,
                pt.sqrt(self.s2),
                self.cov,
                self.mean_func,
                self._jitter_u,
            )
            return [mu * pt.ones(()), cov, self.sigma2 * pt.ones(())]

        mean, c, sigma2 = self._fn(f"predict_{diag}", build)(*values, Xn)
        if diag:
            var, cov = np.maximum(c, 0.0), None
        else:
            cov, var = c, np.diag(c).copy()
        return mean, *with_noise(var, cov, sigma2 if include_noise else 0.0)

    def loo(self, values) -> np.ndarray:
        r"""Leave-one-out log densities of the Gaussian :math:`N(m, Q + \Lambda)` (R&W eqs.
        5.10–5.12): FITC's own model (:math:`\Lambda = \mathrm{diag}(K - Q) + \sigma^2 I`); for VFE
        the Nyström model :math:`\Lambda = \sigma^2 I` whose predictive VFE uses (the trace
        penalty of the bound is not a density of :math:`y`). :math:`O(NM^2)` per draw."""

        def build(Xv):
            Xu = pt.as_tensor_variable(self.Xu)
            X = pt.as_tensor_variable(self.X)
            return [
                self.cov(Xu),
                self.cov(Xu, X),
                self.cov(X, diag=True),
                self.s2 * pt.ones(()),
                broadcast_mean(self.mean_func, X),
            ]

        Kuu, Kuf, Kffd, s2, mean_x = self._fn("loo", build)(*values, self.X[:0])
        Luu = sla.cholesky(Kuu + self.jitter_u * np.eye(Kuu.shape[0]), lower=True)
        A = sla.solve_triangular(Luu, Kuf, lower=True)
        if self.kind == "fitc":
            lam = np.clip(Kffd - np.sum(A * A, axis=0), 0.0, np.inf) + s2
        else:
            lam = np.full(A.shape[1], s2)
        Al = A / lam
        LB = sla.cholesky(np.eye(A.shape[0]) + Al @ A.T, lower=True)
        r = self.y - mean_x
        c = sla.solve_triangular(LB, A @ (r / lam), lower=True)
        alpha = r / lam - (A.T @ sla.solve_triangular(LB.T, c, lower=False)) / lam
        V = sla.solve_triangular(LB, Al, lower=True)
        cinv = 1.0 / lam - np.sum(V * V, axis=0)
        return loo_terms(cinv, alpha)
