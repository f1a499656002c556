"""The weight-space view of GP regression and the dual representation (R&W §2.1; PRML §6.1, §6.4.1).

``BayesianLinearRegression``
    Bayesian linear regression in fixed basis functions: weight posterior, predictive, PyMC model;
    weight-space or function-space form, whichever is cheaper.
``KernelRidge``
    Kernel ridge regression in its dual form, :math:`a = (K + \\lambda I)^{-1} t`.
"""

from bayes_gp.weight_space.linear import (
    CROSSOVER_N_OVER_M,
    BayesianLinearRegression,
    WeightPosterior,
    choose_method,
)
from bayes_gp.weight_space.ridge import KernelRidge

__all__ = [
    "BayesianLinearRegression",
    "WeightPosterior",
    "KernelRidge",
    "CROSSOVER_N_OVER_M",
    "choose_method",
]
