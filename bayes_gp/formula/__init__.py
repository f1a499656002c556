"""Formula models: a GP model written as ``y ~ x + gp(t) + gp(t, by=site) + (1 | site)`` with
any family, the engine chosen for it (:func:`Model`).

Modules: :mod:`~bayes_gp.formula.parse` (the formula's terms, with `formulae`),
:mod:`~bayes_gp.formula.design` (data to design matrix, with the errors that name a term),
:mod:`~bayes_gp.formula.covariance` (each term's covariance), :mod:`~bayes_gp.formula.model`
(the models and :func:`Model`).
"""

from bayes_gp.formula.model import (
    FAMILIES,
    FormulaLatentGP,
    FormulaMulticlass,
    FormulaRegression,
    Model,
    formula_class,
)
from bayes_gp.formula.parse import parse_formula

__all__ = [
    "Model",
    "FormulaRegression",
    "FormulaLatentGP",
    "FormulaMulticlass",
    "FAMILIES",
    "parse_formula",
    "formula_class",
]
