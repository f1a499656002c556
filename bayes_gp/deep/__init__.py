"""Deep kernel learning (Wilson et al. 2016) and the "GP neural network" feature extractor
(per-unit mixtures of activation functions; docs/sources.md).

``DeepKernelRegression``
    A multilayer perceptron in PyTensor feeding a catalogue kernel; network weights and kernel
    hyperparameters fitted jointly on the exact GP marginal likelihood; NUTS over the GP
    hyperparameters with the network fixed.
``FeatureExtractor``
    The network: dense layers with ReLU/GELU/sigmoid/tanh, or a learned mixture of them per unit.

Modules: ``dkl`` the model class; ``network`` the feature extractor; ``fit`` the type-II fit
record (``DKLFit``); ``packing`` the flat parameter vector the optimiser sees; ``training`` the
loss and the optimiser loop; ``last_layer`` the GP layer on a fitted network as a PyMC model, for
NUTS, and predictions from its draws; ``serialisation`` the network a saved fit carries.
"""

from bayes_gp.deep.dkl import DeepKernelRegression
from bayes_gp.deep.fit import DKLFit
from bayes_gp.deep.network import ACTIVATIONS, MIXTURE_ACTIVATIONS, FeatureExtractor

__all__ = [
    "DeepKernelRegression",
    "DKLFit",
    "FeatureExtractor",
    "ACTIVATIONS",
    "MIXTURE_ACTIVATIONS",
]
