r"""The grouped engine of a gaussian formula model: per-group factors and the Woodbury identity
instead of one dense :math:`N \times N` Cholesky factor.

When every term that couples rows only within a group — ``gp(t, by=g)``, ``(1 | g)``,
``(x | g)`` — uses the same factor :math:`g`, the summed covariance splits as

.. math::
   C = \operatorname{blockdiag}_g(A_g) + Z K_0 Z^\top, \qquad
   A_g = \sum_{j\ \text{grouped}} K_j(X_g, X_g) + (\sigma^2 + \epsilon) I
   \;[+ \operatorname{diag}(s_g^2)],

where :math:`K_0 = \sum_{j\ \text{global}} K_j(U, U)` is the covariance of the other
terms (shared GP terms, common effects, the intercept) at the :math:`m` distinct rows
:math:`U` of the columns they use and :math:`Z` the :math:`N \times m` incidence matrix. This is
the hierarchical GP's likelihood (:mod:`bayes_gp.hierarchical.woodbury`, R&W eqs. A.9–A.10):
:math:`O(G n_{\max}^3 + N m^2 + m^3)` per log density and gradient. The blocks are the grouped
terms' own covariance graphs vectorised over the padded groups
(:class:`~bayes_gp.hierarchical.woodbury.PaddedLayout`), so any kernel of the catalogue works.
The jitter :math:`\epsilon` joins the blocks' diagonal, that is :math:`C`'s, as in the dense
engine; :math:`K_0` needs none (:mod:`bayes_gp.solvers.grouped` never factorises it), so the
grouped and dense log densities are the same function.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.replace import vectorize_graph

from bayes_gp.formula.factored import FactoredLikelihood
from bayes_gp.hierarchical.woodbury import PaddedLayout, StructuredFactor, padded_structured_logp
from bayes_gp.solvers.observed import broadcast_mean

__all__ = ["GroupedLikelihood", "grouped_cost", "dense_cost"]


def dense_cost(n: int) -> float:
    """Flops of one dense Cholesky factor of the :math:`n \\times n` covariance."""
    return n**3 / 3.0


def grouped_cost(sizes, m: int) -> float:
    """Flops of the grouped factorisation: the padded blocks, the Woodbury solve with
    :math:`m` distinct global rows, and :math:`K_0` (module docstring)."""
    G, n_max, n = len(sizes), max(sizes), sum(sizes)
    return G * n_max**3 / 3.0 + n * m * m + m**3 / 3.0 * (2 if m else 0)


def distinct_rows(X: np.ndarray, columns: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """``(first, u_index)``: the first row of each distinct value of ``X[:, columns]`` and each
    row's distinct value (one value when ``columns`` is empty: the intercept alone)."""
    if not columns:
        return np.zeros(1, dtype=np.int64), np.zeros(X.shape[0], dtype=np.int64)
    _, first, u_index = np.unique(X[:, columns], axis=0, return_index=True, return_inverse=True)
    return first.astype(np.int64), u_index.ravel().astype(np.int64)


class GroupedLikelihood(FactoredLikelihood):
    """The exact marginal likelihood of a gaussian formula model in the grouped form (module
    docstring), registered as the observed variable ``name``, with the interface
    :class:`~bayes_gp.GPRegression` asks of its likelihood (``log_marginal_likelihood``,
    ``loo``, ``predict``) and the factor per-term predictions need (:meth:`solver`, from
    :class:`~bayes_gp.formula.factored.FactoredLikelihood`)."""

    def __init__(self, name, X, y, block_cov, global_cov, cov, mean_func, sigma, jitter, dims,
                 *, group_column: int, global_columns: list[int], known_var=None):  # fmt: skip
        self.X, self.y = np.asarray(X, float), np.asarray(y, float)
        #: known per-observation noise variances s_i^2 ((n,)), joining each block's diagonal
        self.known_var = None if known_var is None else np.asarray(known_var, dtype=np.float64)
        self.block_cov, self.global_cov, self.cov = block_cov, global_cov, cov
        self.mean_func = mean_func
        self.sigma2 = pt.square(pt.as_tensor_variable(sigma))
        self.jitter = jitter
        codes = self.X[:, group_column]
        self.rows = [np.flatnonzero(codes == c) for c in np.unique(codes)]
        self.sizes = [r.size for r in self.rows]
        if global_cov is not None:
            first, self.u_index = distinct_rows(self.X, global_columns)
            self.XU = self.X[first]
        else:
            self.u_index, self.XU = None, None
        self.layout = PaddedLayout.of(self.rows, self.u_index)
        self.m = 0 if self.XU is None else self.XU.shape[0]
        self._register(name, dims)

    # ------------------------------------------------------------------ graphs
    def _parts(self):
        """The padded blocks (G, n_max, n_max), :math:`K_0` (or ``None``) and the mean."""
        x = pt.dmatrix("x_group")
        Xpad = self.X[self.layout.index]  # (G, n_max, D); padding repeats row 0, masked
        K = vectorize_graph(self.block_cov(x), {x: pt.as_tensor_variable(Xpad)})
        noise = (self.sigma2 + self.jitter) * pt.ones(self.layout.mask.shape)
        if self.known_var is not None:  # each row's own s_i^2 (padding: masked)
            noise = noise + pt.as_tensor_variable(self.known_var[self.layout.index])
        A = self.layout.pad_blocks(K, noise)
        K0 = None
        if self.global_cov is not None:
            K0 = self.global_cov(pt.as_tensor_variable(self.XU))
        return A, K0, broadcast_mean(self.mean_func, pt.as_tensor_variable(self.X))

    def _loglik(self, value):
        A, K0, mu = self._parts()
        return padded_structured_logp(value - mu, A, self.layout, K0)

    # ------------------------------------------------------------------ NumPy side
    def factor(self, values) -> tuple[np.ndarray, StructuredFactor]:
        """``(mean, StructuredFactor of C)`` at hyperparameter ``values``."""

        def build(_):
            A, K0, mu = self._parts()
            return [A, mu] + ([K0] if K0 is not None else [])

        out = self._fn("parts", build)(*values, np.zeros((0, self.X.shape[1])))
        A, mu = out[0], out[1]
        blocks = [A[g, :s, :s] for g, s in enumerate(self.sizes)]
        K0 = out[2] if len(out) > 2 else None
        return mu, StructuredFactor.of(blocks, self.rows, K0, self.u_index)
