r"""What the gaussian formula engines that never form :math:`C` share: predictions, the
per-term solver and the leave-one-out terms from a factor object with ``solve(R)``
(:math:`C^{-1} R`) and ``inverse_diagonal()`` (:math:`\operatorname{diag} C^{-1}`), R&W eqs.
2.25–2.26 and 5.10–5.12. The grouped engine (:mod:`bayes_gp.formula.grouped`) and the
low-rank one (:mod:`bayes_gp.formula.lowrank`) build on it."""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt

from bayes_gp.solvers.observed import (
    ObservedLikelihood,
    broadcast_mean,
    loo_terms,
    with_noise,
)

__all__ = ["FactoredLikelihood"]


class FactoredLikelihood(ObservedLikelihood):
    """An exact likelihood registered as an observed variable whose :meth:`factor` gives the
    prior mean at the training rows and a factor of :math:`C`; subclasses set ``X``, ``y``,
    ``cov`` (the summed covariance), ``mean_func``, ``sigma2`` and implement ``_loglik`` and
    ``factor``."""

    exact = True
    dense = False

    def factor(self, values):  # pragma: no cover - abstract
        raise NotImplementedError

    def check(self, draws) -> None:
        """Nothing to check: the likelihood is exact (an HSGP term's own approximation is the
        model's)."""

    def solver(self, values):
        """``f(Ks, kss) -> (mean, var)`` of the latent part at new points from the cross- and
        prior covariances of any term (or sum of terms) at ``values``."""
        mu, fac = self.factor(values)
        alpha = fac.solve(self.y - mu)

        def at(Ks, kss):
            return Ks.T @ alpha, kss - np.sum(Ks * fac.solve(Ks), axis=0)

        return at

    def loo(self, values) -> np.ndarray:
        """Exact leave-one-out log predictive densities (R&W eqs. 5.10-5.12)."""
        mu, fac = self.factor(values)
        return loo_terms(fac.inverse_diagonal(), fac.solve(self.y - mu))

    def predict(self, values, Xn, diag: bool = True, include_noise: bool = False, jitters=None):
        """``(mean, var, cov)`` of :math:`f_*` (of :math:`y_*` with ``include_noise``) at the
        design rows ``Xn``; the cross-covariance :math:`K(X, X_*)` is evaluated densely
        (:math:`N \\times m_*`), :math:`C^{-1}` applied by the factor."""
        mu, fac = self.factor(values)
        if jitters is not None:
            jitters.append(fac.jitter)

        def build(Xv):
            Xt = pt.as_tensor_variable(self.X)
            extra = [self.cov(Xv)] if not diag else []
            return [self.cov(Xt, Xv), self.cov(Xv, diag=True), broadcast_mean(self.mean_func, Xv),
                    self.sigma2 * pt.ones(()), *extra]  # fmt: skip

        out = self._fn("cross_full" if not diag else "cross", build)(*values, np.asarray(Xn, float))
        Ks, kss, mean_n, s2 = out[:4]
        CiKs = fac.solve(Ks)
        mean = mean_n + Ks.T @ fac.solve(self.y - mu)
        if diag:
            var, cov = kss - np.sum(Ks * CiKs, axis=0), None
        else:
            cov = out[4] - Ks.T @ CiKs
            var = np.diag(cov).copy()
        var, cov = with_noise(var, cov, float(s2) if include_noise else 0.0)
        return mean, np.maximum(var, 0.0), cov
