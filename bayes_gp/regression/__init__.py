"""GP regression: the model, its named kernels and default hyperpriors."""

from bayes_gp.regression.catalogue import KERNELS, DataScale, kernel_spec
from bayes_gp.regression.gpr import GPRegression, Prediction
from bayes_gp.regression.hetero import HeteroscedasticGPRegression
from bayes_gp.regression.term import MarginalPrediction, MarginalTerm, marginal_gp, predict_marginal

__all__ = [
    "GPRegression",
    "HeteroscedasticGPRegression",
    "Prediction",
    "KERNELS",
    "DataScale",
    "kernel_spec",
    "marginal_gp",
    "predict_marginal",
    "MarginalTerm",
    "MarginalPrediction",
]
