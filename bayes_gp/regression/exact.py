r"""The exact dense GP marginal likelihood as a strategy object of :class:`~bayes_gp.GPRegression`.

:class:`ExactLikelihood` declares

.. math::
   y \sim N(m(X), C), \qquad C = K(X, X) + (\sigma^2 + \epsilon) I

(R&W eq. 2.30, PRML eq. 6.69) as the model's observed variable with the fused log density and
its R&W eq. 5.9 gradient (:func:`~bayes_gp.regression.likelihood.marginal_normal`), and answers
what the model asks of every marginal likelihood, exact or approximate — the same interface as
the compact-support likelihood (:mod:`bayes_gp.regression.compact`), HSGP
(:mod:`bayes_gp.regression.hsgp`) and VFE/FITC (:mod:`bayes_gp.regression.inducing`):

* ``exact``: whether the model's likelihood is the exact GP's; ``dense``: whether :meth:`train`
  gives the dense :math:`C` that the jitter pre-flight factorises;
* ``log_marginal_likelihood(values)``, ``loo(values)`` (R&W eqs. 5.10–5.12),
  ``predict(values, Xn, diag, include_noise, jitters=None)`` (R&W eqs. 2.25–2.26, with a mean
  function eq. 2.38; PRML eqs. 6.66–6.67) and ``check(draws)`` (nothing to check here) at the
  hyperparameter values ``values`` (in the order of the model's free random variables).

**Conditioned once.** Every answer starts from the factorisation :math:`C = LL^\top`,
:math:`\alpha = C^{-1}(y - m)` at ``values``: an :math:`O(n^3)` Cholesky that a NUTS fit's
predictions would otherwise repeat for every draw at every call (the workflow's scores, the
report's bands, its predictive checks and the saved predictions ask for the same draws). The
factorisations are kept, least recently used first out, within :data:`FACTOR_CACHE_BYTES` per
model, keyed by the hyperparameter values and the jitter in use.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from bayes_gp.inference.typeii import function_of_values
from bayes_gp.predictive import (
    GaussianFactor,
    factorize,
    log_marginal_likelihood,
    loo_log_density,
    predict,
)
from bayes_gp.regression.likelihood import marginal_normal

__all__ = ["ExactLikelihood", "FACTOR_CACHE_BYTES"]

#: Memory for the cached factorisations of one model (the Cholesky factors dominate:
#: :math:`8n^2` bytes each); at least one is kept whatever ``n``.
FACTOR_CACHE_BYTES = 256 * 2**20


class ExactLikelihood:
    """The exact GP marginal likelihood, registered as the observed variable ``name`` of the
    current PyMC model (module docstring)."""

    exact = True
    dense = True

    def __init__(self, name: str, X, y, cov, mean_func, sigma, jitter, dims):
        self.X, self.y = X, y
        self.cov, self.mean_func = cov, mean_func
        self.sigma, self.jitter = pt.as_tensor_variable(sigma), jitter
        Xt = pt.as_tensor_variable(X)
        marginal_normal(name, self._mean(Xt), self._C(Xt), observed=y, dims=dims)
        self.rvs = list(pm.modelcontext(None).free_RVs)
        self._fns: dict = {}
        self._factors: OrderedDict[bytes, tuple[np.ndarray, GaussianFactor]] = OrderedDict()
        self._max_factors = max(1, FACTOR_CACHE_BYTES // (8 * self.X.shape[0] ** 2))

    def _mean(self, X):
        return pt.as_tensor_variable(self.mean_func(X)) * pt.ones(X.shape[0])

    def _C(self, X):
        n = self.X.shape[0]
        return self.cov(X) + (pt.square(self.sigma) + self.jitter) * pt.eye(n)

    def _fn(self, key: str, build):
        if key not in self._fns:
            self._fns[key] = function_of_values(self.rvs, build)
        return self._fns[key]

    def train(self, values) -> tuple[np.ndarray, np.ndarray]:
        """Prior mean ``m`` and observation covariance ``C = K + (sigma^2 + jitter) I``."""
        X = pt.as_tensor_variable(self.X)
        fn = self._fn("train", lambda _: [self._mean(X), self._C(X)])
        return tuple(fn(*values, np.zeros((0, self.X.shape[1]))))

    def factor(self, values) -> tuple[np.ndarray, GaussianFactor]:
        """``(m, factorisation of C with alpha = C^{-1}(y - m))`` at ``values``, computed once
        and then read from the cache (module docstring)."""
        parts = [np.ascontiguousarray(v, dtype=float).tobytes() for v in values]
        jitter = self.jitter.get_value() if hasattr(self.jitter, "get_value") else self.jitter
        key = b"|".join([*parts, np.float64(jitter).tobytes()])
        hit = self._factors.get(key)
        if hit is not None:
            self._factors.move_to_end(key)
            return hit
        m, C = self.train(values)
        hit = (m, factorize(C, self.y - m))
        self._factors[key] = hit
        while len(self._factors) > self._max_factors:
            self._factors.popitem(last=False)
        return hit

    def _cross(self, values, Xn):
        """``(K(X, Xn), diag K(Xn), m(Xn), sigma^2)``."""
        X = pt.as_tensor_variable(self.X)

        def build(Xv):
            s2 = pt.square(self.sigma) * pt.ones(())
            return [self.cov(X, Xv), self.cov(Xv, diag=True), self._mean(Xv), s2]

        return self._fn("cross", build)(*values, Xn)

    def log_marginal_likelihood(self, values) -> float:
        """:math:`\\log p(y \\mid \\theta)` (R&W eq. 2.30)."""
        return log_marginal_likelihood(self.factor(values)[1])

    def loo(self, values) -> np.ndarray:
        """Exact leave-one-out log predictive densities (R&W eqs. 5.10–5.12)."""
        return loo_log_density(self.factor(values)[1])

    def check(self, draws) -> None:
        """Nothing to check: the likelihood is exact."""

    def predict(self, values, Xn, diag: bool, include_noise: bool, jitters=None):
        """``(mean, var, cov)`` of :math:`f_*` (of :math:`y_*` with ``include_noise``) at
        ``Xn``; ``cov`` is ``None`` when ``diag``. The extra jitter the factorisation of
        :math:`C` needed (0: none) is appended to ``jitters``."""
        _, fac = self.factor(values)
        Ks, kss_diag, ms, s2 = self._cross(values, Xn)
        if jitters is not None:
            jitters.append(fac.jitter)
        if diag:
            mean, var = predict(fac, Ks, kss_diag)
            cov = None
        else:
            kss = self._fn("new_full", lambda Xv: self.cov(Xv))(*values, Xn)
            mean, cov = predict(fac, Ks, kss)
            var = np.diag(cov).copy()
        if include_noise:
            var = var + s2
            if cov is not None:
                cov = cov + s2 * np.eye(cov.shape[0])
        return ms + mean, var, cov
