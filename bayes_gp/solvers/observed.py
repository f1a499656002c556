"""The base of the likelihoods that :class:`~bayes_gp.GPRegression` registers in place of the
generic dense one (approximations, :mod:`bayes_gp.solvers.approx`; compact support,
:mod:`bayes_gp.solvers.compact`; the formula models' grouped and low-rank engines,
:mod:`bayes_gp.formula`): an observed ``pm.CustomDist`` whose log density is a PyTensor graph
of the model's hyperparameters, and helpers their predictions share.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.graph.replace import graph_replace

from bayes_gp.inference.typeii import function_of_values

__all__ = ["ObservedLikelihood", "broadcast_mean", "loo_terms", "with_noise", "LOG_2PI"]

LOG_2PI = float(np.log(2.0 * np.pi))


def broadcast_mean(mean_func, X):
    return pt.as_tensor_variable(mean_func(X)) * pt.ones(X.shape[0])


class ObservedLikelihood:
    """An approximate log marginal likelihood registered as the observed variable ``name``
    (the interface of :class:`~bayes_gp.solvers.exact.ExactLikelihood`)."""

    #: the model's likelihood is the exact GP's (the compact-support one is, sparse)
    exact = False
    #: :meth:`train` gives a dense observation covariance (for the jitter pre-flight)
    dense = False

    def _register(self, name: str, dims) -> None:
        model = pm.modelcontext(None)
        self.rvs = list(model.free_RVs)
        value = pt.dvector(f"{name}_value")
        expr = self._loglik(value)
        rvs = self.rvs

        def logp(v, _support, *params):
            replace = {value: v, **dict(zip(rvs, params, strict=True))}
            return graph_replace(expr, replace, strict=False)

        core = ["(n)"] + [
            "(" + ",".join(f"p{i}_{k}" for k in range(rv.ndim)) + ")" for i, rv in enumerate(rvs)
        ]
        self.lml_graph = graph_replace(expr, {value: pt.as_tensor_variable(self.y)}, strict=False)
        pm.CustomDist(
            name,
            pt.zeros(self.y.shape[0]),
            *rvs,
            logp=logp,
            observed=self.y,
            signature=",".join(core) + "->(n)",
            dims=dims,
        )
        self._fns: dict = {}

    def _fn(self, key: str, build):
        if key not in self._fns:
            self._fns[key] = function_of_values(self.rvs, build)
        return self._fns[key]

    def log_marginal_likelihood(self, values) -> float:
        """The approximation's log marginal likelihood (its objective) at hyperparameters
        ``values`` (in the order of the model's free random variables)."""
        fn = self._fn("lml", lambda Xn: [self.lml_graph])
        return float(fn(*values, np.zeros((0, self.X.shape[1])))[0])


def with_noise(var: np.ndarray, cov: np.ndarray | None, sigma2: float):
    r"""``(var, cov)`` of :math:`y_*` from those of :math:`f_*`: plus :math:`\sigma^2` on the
    diagonal (``sigma2 = 0``: unchanged)."""
    if sigma2:
        var = var + sigma2
        if cov is not None:
            cov = cov + sigma2 * np.eye(cov.shape[0])
    return var, cov


def loo_terms(cinv_diag: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """R&W eqs. (5.10)-(5.12) from :math:`\\mathrm{diag}(C^{-1})` and :math:`C^{-1}r`."""
    var = 1.0 / cinv_diag
    resid = alpha / cinv_diag
    return -0.5 * np.log(var) - 0.5 * resid**2 / var - 0.5 * LOG_2PI
