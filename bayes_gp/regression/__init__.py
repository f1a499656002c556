"""GP regression: the model, its named kernels and default hyperpriors."""

from bayes_gp.regression.catalogue import KERNELS, DataScale, kernel_spec
from bayes_gp.regression.gpr import GPRegression, Prediction

__all__ = ["GPRegression", "Prediction", "KERNELS", "DataScale", "kernel_spec"]
