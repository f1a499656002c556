"""GP regression: the model, its named kernels and default hyperpriors."""

from bayes_gp.regression.catalogue import KERNELS, DataScale
from bayes_gp.regression.gpr import GPRegression, Prediction

__all__ = ["GPRegression", "Prediction", "KERNELS", "DataScale"]
