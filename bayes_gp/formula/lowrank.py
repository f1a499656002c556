r"""The low-rank engine of a gaussian formula model: every term a finite basis, the Woodbury
identity over all of them.

When no term is an exact GP — every ``gp()`` term has ``approx="hsgp"`` (its Hilbert-space
basis :math:`\Phi\,\operatorname{diag}(S)^{1/2}`, per level with ``by=``), the group effects
are their indicator columns times :math:`\sigma_g`, the common effects their columns times
:math:`B^{1/2}`, the intercept a constant column — the covariance is

.. math::
   C = d\, I + F F^\top, \qquad F = [F_1, \dots, F_J] \in \mathbb{R}^{n \times r},
   \quad d = \sigma^2 + \epsilon,

and with :math:`A = d I_r + F^\top F = L L^\top` (R&W eqs. A.9–A.10)

.. math::
   r^\top C^{-1} r = \frac{r^\top r - \lVert L^{-1} F^\top r \rVert^2}{d}, \qquad
   \log|C| = (n - r) \log d + \log|A|,

:math:`O(n r^2 + r^3)` per log density and gradient instead of :math:`O(n^3)`: the basis weights
that Bambi's ``hsgp()`` and its group offsets make NUTS sample are integrated out here.
:math:`C^{-1} R = (R - F A^{-1} F^\top R) / d` serves predictions and
:math:`\operatorname{diag} C^{-1} = (1 - \operatorname{rowsum}(F \circ F A^{-1})) / d` the
exact leave-one-out terms (R&W eqs. 5.10–5.12).

With known per-observation noise standard deviations :math:`s_i` (``noise=``) the diagonal is
the vector :math:`D = \operatorname{diag}(s^2) + (\sigma^2 + \epsilon) I`, and with
:math:`A = I_r + F^\top D^{-1} F = L L^\top`

.. math::
   r^\top C^{-1} r = r^\top D^{-1} r - \lVert L^{-1} F^\top D^{-1} r \rVert^2, \qquad
   \log|C| = \textstyle\sum_i \log D_i + \log|A|,

:math:`C^{-1} R = D^{-1} R - D^{-1} F A^{-1} F^\top D^{-1} R` and
:math:`\operatorname{diag} C^{-1} = 1/D - \operatorname{rowsum}(D^{-1} F \circ D^{-1} F
A^{-1})`.

Inducing-input terms (``gp(..., approx="vfe" | "fitc")``,
:class:`~bayes_gp.formula.covariance.InducingTerm`) are bases too,
:math:`F_j = (L_Z^{-1} K_{Z X})^\top`, with the residual
:math:`r = \operatorname{diag}(K_j - F_j F_j^\top)`. FITC's model puts it on the diagonal,
:math:`D \leftarrow D + r` (Snelson & Ghahramani 2006; Quiñonero-Candela & Rasmussen 2005,
eq. 21); VFE keeps the Nyström covariance and subtracts Titsias's (2009, eq. 9) trace term

.. math::
   -\tfrac12 \textstyle\sum_i r_i / D_i,

the variational bound with every other term's finite basis among the inducing variables (their
weights are exact, so only the VFE terms leave a residual: the bound of Titsias's derivation
with the noise :math:`D` and the augmented inducing set). Predictions and leave-one-out terms
use :math:`C = D + F F^\top` (FITC's model; for VFE the Nyström model whose predictive the
bound's optimum gives, as GPRegression's VFE does).
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from scipy.linalg import cho_factor, cho_solve

from bayes_gp.formula.factored import FactoredLikelihood
from bayes_gp.solvers.observed import LOG_2PI, broadcast_mean

__all__ = ["LowRankLikelihood", "lowrank_cost"]


def lowrank_cost(n: int, r: int) -> float:
    """Flops of one low-rank evaluation: :math:`F^\\top F` and the :math:`r \\times r`
    factor."""
    return n * r * r + r**3 / 3.0


class _Factor:
    """:math:`C = d I + F F^\\top` in NumPy: solves and the diagonal of the inverse."""

    def __init__(self, F: np.ndarray, d: float):
        self.F, self.d = F, float(d)
        A = self.d * np.eye(F.shape[1]) + F.T @ F
        self.cho = cho_factor(A, lower=True)
        self.jitter = 0.0

    def solve(self, R: np.ndarray) -> np.ndarray:
        return (R - self.F @ cho_solve(self.cho, self.F.T @ R)) / self.d

    def inverse_diagonal(self) -> np.ndarray:
        G = cho_solve(self.cho, self.F.T).T  # F A^{-1}
        return (1.0 - np.sum(self.F * G, axis=1)) / self.d


class _VectorFactor:
    """:math:`C = \\operatorname{diag}(D) + F F^\\top` in NumPy (``D`` a vector)."""

    def __init__(self, F: np.ndarray, D: np.ndarray):
        self.F, self.D = F, np.asarray(D, float)
        self.G = F / self.D[:, None]  # D^{-1} F
        A = np.eye(F.shape[1]) + F.T @ self.G
        self.cho = cho_factor(A, lower=True)
        self.jitter = 0.0

    def solve(self, R: np.ndarray) -> np.ndarray:
        DR = R / (self.D[:, None] if R.ndim == 2 else self.D)
        return DR - self.G @ cho_solve(self.cho, self.F.T @ DR)

    def inverse_diagonal(self) -> np.ndarray:
        H = cho_solve(self.cho, self.G.T).T  # D^{-1} F A^{-1}
        return 1.0 / self.D - np.sum(self.G * H, axis=1)


class LowRankLikelihood(FactoredLikelihood):
    """The exact marginal likelihood of the model whose terms are all finite bases (module
    docstring), registered as the observed variable ``name``, with the interface of
    :class:`~bayes_gp.formula.grouped.GroupedLikelihood` (predictions, per-term solver and
    LOO from :class:`~bayes_gp.formula.factored.FactoredLikelihood`)."""

    def __init__(self, name, X, y, F, cov, mean_func, sigma, jitter, dims, *, known_var=None,
                 fitc_residual=None, vfe_residual=None):  # fmt: skip
        self.X, self.y = np.asarray(X, float), np.asarray(y, float)
        self.F, self.cov, self.mean_func = F, cov, mean_func
        self.sigma2 = pt.square(pt.as_tensor_variable(sigma))
        self.d = self.sigma2 + jitter
        #: known per-observation noise variances s_i^2 ((n,)) or None (module docstring)
        self.known_var = None if known_var is None else np.asarray(known_var, dtype=np.float64)
        #: the FITC terms' diag(K - Q) (a tensor (n,), on D) and the VFE terms' (the trace term)
        self.fitc_residual, self.vfe_residual = fitc_residual, vfe_residual
        self._register(name, dims)

    def _diagonal(self):
        """``D`` as a tensor vector, or ``None`` when it is the scalar ``d``."""
        if self.known_var is None and self.fitc_residual is None:
            return None
        D = self.d * pt.ones(self.y.shape[0])
        if self.known_var is not None:  # D = diag(s^2) + (sigma^2 + eps) I
            D = D + pt.as_tensor_variable(self.known_var)
        if self.fitc_residual is not None:
            D = D + self.fitc_residual
        return D

    def _loglik(self, value):
        n = self.y.shape[0]
        r = value - broadcast_mean(self.mean_func, pt.as_tensor_variable(self.X))
        F = self.F
        D = self._diagonal()
        if D is not None:  # a vector diagonal
            G = F / D[:, None]
            A = pt.eye(F.shape[1]) + pt.dot(F.T, G)
            L = pt.linalg.cholesky(A)
            v = pt.linalg.solve_triangular(L, pt.dot(G.T, r), lower=True)
            quad = pt.sum(r * r / D) - pt.dot(v, v)
            logdet = pt.sum(pt.log(D)) + 2.0 * pt.sum(pt.log(pt.diagonal(L)))
        else:
            A = self.d * pt.eye(F.shape[1]) + pt.dot(F.T, F)
            L = pt.linalg.cholesky(A)
            v = pt.linalg.solve_triangular(L, pt.dot(F.T, r), lower=True)
            quad = (pt.dot(r, r) - pt.dot(v, v)) / self.d
            logdet = (n - F.shape[1]) * pt.log(self.d) + 2.0 * pt.sum(pt.log(pt.diagonal(L)))
        logp = -0.5 * quad - 0.5 * logdet - 0.5 * n * LOG_2PI
        if self.vfe_residual is not None:  # Titsias's trace term
            logp = logp - 0.5 * pt.sum(self.vfe_residual / (self.d if D is None else D))
        return pt.switch(pt.isnan(logp), -np.inf, logp)

    def factor(self, values):
        """``(mean, factor of C)`` at hyperparameter ``values``."""

        def build(_):
            Xt = pt.as_tensor_variable(self.X)
            D = self._diagonal()
            return [self.F, self.d * pt.ones(()), broadcast_mean(self.mean_func, Xt),
                    *([] if D is None else [D])]  # fmt: skip

        F, d, mu, *D = self._fn("parts", build)(*values, np.zeros((0, self.X.shape[1])))
        if D:
            return mu, _VectorFactor(F, D[0])
        return mu, _Factor(F, float(d))
