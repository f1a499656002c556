r"""Derivatives of the terms of a gaussian formula model: where a smooth component rises or falls.

The derivative of a GP term is a GP whose covariances are derivatives of the term's kernel (R&W
§9.4), so the per-term predictive equations (R&W eqs. 2.25–2.26 with the term's
cross-covariance, as :meth:`~bayes_gp.formula.terms.FormulaTerms.predict_terms` uses them) hold
with the cross-covariance differentiated in the new input :math:`x_{*d}`:

.. math::
   \mathbb E\big[\partial^{(o)} f_{j*}\big] = \partial^{(o)} m_j(x_*)
       + \partial^{(o)}_{x_*} k_j(x_*, X)\, C^{-1} (y - m(X)),

   \mathbb V\big[\partial^{(o)} f_{j*}\big] =
       \partial^{(o)}_{x_*}\partial^{(o)}_{x_*'} k_j(x_*, x_*')\big|_{x_*' = x_*}
       - \partial^{(o)}_{x_*} k_j(x_*, X)\, C^{-1}\, \partial^{(o)}_{x_*} k_j(X, x_*),

with :math:`C` the model's whole covariance (applied by the engine's own factor: dense, grouped
or low-rank) and a sum of terms differentiated as the sum of their kernels. The kernels'
derivatives are :mod:`bayes_gp.kernels.derivatives`' (automatic differentiation, the zero-lag
limits of stationary kernels), taken of the term's own kernel on its own columns (a kernel on
some columns of the design, :class:`~bayes_gp.formula.covariance.OnColumns`, is differentiated
as its base kernel on those columns, so a Matérn term of a model with other columns gets the
exact zero-lag limits); products with factors that do not involve the column (``by=``, a factor
input's levels) by Leibniz's rule with those factors' derivatives zero; a term that does not
involve the column has derivative zero. An inducing-input term's cross-covariance is the
derivative of its Nyström covariance and its prior the exact kernel's, as for its predictions
(:class:`~bayes_gp.formula.covariance.InducingTerm`).
"""

from __future__ import annotations

from math import comb

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from bayes_gp.formula.covariance import HSGPTerm, InducingTerm, OnColumns
from bayes_gp.kernels import derivatives
from bayes_gp.predictive import Prediction, mixture_prediction

__all__ = ["predict_term_derivatives"]

#: Rows of new inputs per evaluation of a non-stationary prior derivative variance.
BLOCK = 64


def _term_mean(model, term: str):
    """The prior mean function of one term (the intercept's and common effects' :math:`h^\\top
    b`; zero for the others), as a function of the design rows."""
    fixed_cols = model.design.fixed_columns()

    def mean(Xv):
        if term == "Intercept":
            return pt.zeros(Xv.shape[0], dtype="float64") + model._intercept[0]
        if term in model._fixed_terms:
            idx = model._fixed_terms[term]
            cols = [fixed_cols[i] for i in idx]
            return pt.dot(Xv[:, cols], model._fixed_b[idx])
        return pt.zeros(Xv.shape[0], dtype="float64")

    return mean


def _columns(cov) -> list[int]:
    return [int(c) for c in np.atleast_1d(cov.active_dims)]


def _zero_table(value, order: int, order_b: int) -> dict:
    """The table of a kernel that does not depend on the column: its value, zero derivatives."""
    value = pt.as_tensor_variable(value)
    return {(p, q): (value if p == q == 0 else pt.zeros_like(value))
            for p in range(order + 1) for q in range(order_b + 1)}  # fmt: skip


def _sliced_table(cov, A, B, d: int, order: int, order_b: int) -> dict:
    """The table of ``cov.base`` on ``cov``'s own columns (the derivative along ``d``)."""
    cols = _columns(cov)
    Ac, Bc = A[:, cols], B[:, cols]
    return derivatives.derivative_table(cov.base, Ac, Bc, cols.index(d), order, len(cols),
                                        order_b=order_b)  # fmt: skip


def term_table(cov, A, B, d: int, order: int, order_b: int, D: int, prior: bool = False) -> dict:
    r"""``{(p, q): \partial^p_{a_d} \partial^q_{b_d} k(A, B)}`` of a formula term's covariance
    (module docstring); ``prior``: ``A`` and ``B`` are the same rows (an inducing-input term's
    prior is the exact kernel's)."""
    if isinstance(cov, pm.gp.cov.Combination):
        tables = [term_table(f, A, B, d, order, order_b, D, prior)
                  if isinstance(f, pm.gp.cov.BaseCovariance)
                  else _zero_table(pt.as_tensor_variable(f), order, order_b)
                  for f in cov._factor_list]  # fmt: skip
        total = tables[0]
        for nxt in tables[1:]:
            if isinstance(cov, pm.gp.cov.Add):
                total = {k: total[k] + nxt[k] for k in total}
            else:  # Leibniz's rule in both arguments
                total = {(p, q): sum(comb(p, i) * comb(q, j) * total[(i, j)] * nxt[(p - i, q - j)]
                                     for i in range(p + 1) for j in range(q + 1))
                         for (p, q) in total}  # fmt: skip
        return total
    if isinstance(cov, OnColumns | HSGPTerm | InducingTerm) and d not in _columns(cov):
        return _zero_table(cov(A, B), order, order_b)
    if isinstance(cov, OnColumns) or (isinstance(cov, InducingTerm) and prior):
        return _sliced_table(cov, A, B, d, order, order_b)
    return derivatives.derivative_table(cov, A, B, d, order, D, order_b=order_b)


def check_term(cov, order: int, d: int) -> None:
    """:func:`~bayes_gp.kernels.derivatives.check_differentiable` of the kernels of a term that
    involve column ``d`` (an approximated or column-restricted term: its base kernel)."""
    if isinstance(cov, pm.gp.cov.Combination):
        for f in cov._factor_list:
            if isinstance(f, pm.gp.cov.BaseCovariance):
                check_term(f, order, d)
        return
    if isinstance(cov, OnColumns | HSGPTerm | InducingTerm):
        if d in _columns(cov):
            derivatives.check_differentiable(cov.base, order)
        return
    if d in _columns(cov):
        derivatives.check_differentiable(cov, order)


def predict_term_derivatives(model, Xn: np.ndarray, fit, groups: dict[str, tuple[str, ...]],
                             d: int, order: int, max_draws: int) -> dict[str, Prediction]:  # fmt: skip
    """The posterior of the ``order``-th derivative along design column ``d`` of each term (or
    sum of terms) of ``groups`` (:meth:`~bayes_gp.formula.terms.FormulaTerms._check_terms`) at
    the design rows ``Xn`` (module docstring)."""
    covs = model._term_covs[id(model.model)]
    D = model.X.shape[1]
    for names in groups.values():
        for n in names:
            check_term(covs[n], order, d)
    per: dict[str, tuple[list, list]] = {label: ([], []) for label in groups}
    for values, factor in model._term_factors(fit, max_draws):
        for label, names in groups.items():
            key = f"term_derivative:{label}:{order}:{d}"
            cov = _total([covs[n] for n in names])

            def cross(Xv, cov=cov, names=names):
                Xt = pt.as_tensor_variable(model._train_inputs)
                tab = term_table(cov, Xv, Xt, d, order, 0, D)
                mean = sum(derivatives.mean_derivative(_term_mean(model, n), Xv, d, order, D)
                           for n in names)  # fmt: skip
                return [tab[(order, 0)].T, mean * pt.ones(Xv.shape[0])]

            def prior(Xv, cov=cov):
                return term_table(cov, Xv, Xv, d, order, order, D, prior=True)[(order, order)]

            Ks, dm = model._derivative_fn(f"{key}:cross", cross)(*values, Xn)
            prior_fn = model._derivative_fn(f"{key}:prior", prior)
            if derivatives.is_stationary(cov) and not isinstance(cov, OnColumns):
                kss = np.full(Xn.shape[0], float(prior_fn(*values, Xn[:1])[0, 0]))
            else:
                kss = np.concatenate([np.diag(prior_fn(*values, Xn[i : i + BLOCK]))
                                      for i in range(0, Xn.shape[0], BLOCK)])  # fmt: skip
            mu, var = factor(np.asarray(Ks), kss)
            per[label][0].append(dm + mu)
            per[label][1].append(np.maximum(var, 0.0))
    extra = {"order": order, "dim": d}
    return {
        label: mixture_prediction(means, variances, {"n_draws": len(means), **extra})
        for label, (means, variances) in per.items()
    }


def _total(covs: list):
    total = covs[0]
    for c in covs[1:]:
        total = total + c
    return total
