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
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from bayes_gp.inference.typeii import function_of_values
from bayes_gp.predictive import factorize, log_marginal_likelihood, loo_log_density, predict
from bayes_gp.regression.likelihood import marginal_normal

__all__ = ["ExactLikelihood"]


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

    def _new(self, values, Xn):
        """``(m, C, K(X, Xn), diag K(Xn), m(Xn), sigma^2)``."""
        X = pt.as_tensor_variable(self.X)

        def build(Xv):
            s2 = pt.square(self.sigma) * pt.ones(())
            return [self._mean(X), self._C(X), self.cov(X, Xv), self.cov(Xv, diag=True),
                    self._mean(Xv), s2]  # fmt: skip

        return self._fn("new", build)(*values, Xn)

    def log_marginal_likelihood(self, values) -> float:
        """:math:`\\log p(y \\mid \\theta)` (R&W eq. 2.30)."""
        m, C = self.train(values)
        return log_marginal_likelihood(factorize(C, self.y - m))

    def loo(self, values) -> np.ndarray:
        """Exact leave-one-out log predictive densities (R&W eqs. 5.10–5.12)."""
        m, C = self.train(values)
        return loo_log_density(factorize(C, self.y - m))

    def check(self, draws) -> None:
        """Nothing to check: the likelihood is exact."""

    def predict(self, values, Xn, diag: bool, include_noise: bool, jitters=None):
        """``(mean, var, cov)`` of :math:`f_*` (of :math:`y_*` with ``include_noise``) at
        ``Xn``; ``cov`` is ``None`` when ``diag``. The extra jitter the factorisation of
        :math:`C` needed (0: none) is appended to ``jitters``."""
        m, C, Ks, kss_diag, ms, s2 = self._new(values, Xn)
        fac = factorize(C, self.y - m)
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
