"""bayes_gp: Bayesian Gaussian-process modelling on PyMC.

Subpackages
-----------
formula
    ``Model("y ~ x + gp(t) + gp(t, by=site) + (1 | site)", data, family=...)``: the front door.
    A formula with GP terms, group-specific and common effects and any family, on the engine
    that integrates the most out exactly (``FormulaRegression``, ``FormulaLatentGP``,
    ``FormulaMulticlass``).
kernels
    The kernel catalogue (R&W ch. 4, PRML ch. 6): PyMC covariance functions.
eigen
    Eigen-analysis of kernels (R&W §4.3): analytic SE eigenfunctions, Nyström, Mercer.
regression
    ``GPRegression``: the GP regression model, named kernels and default hyperpriors.
    ``StudentTProcessRegression``: the Student-t process (Shah, Wilson & Ghahramani 2014).
    ``marginal_gp`` / ``predict_marginal``: an exact GP term in the user's own PyMC model.
classification
    ``GPClassifier``: latent GP with a sigmoid link; Laplace, EP and NUTS.
    ``MulticlassGPClassifier``: C latent GPs with a softmax likelihood; Laplace, NUTS.
hierarchical
    ``HierarchicalGP``: many related groups, partial pooling of their hyperparameters
    (``HierarchicalLatentGP``: the same for a non-Gaussian likelihood; ``hierarchical_gp`` picks
    the class by ``likelihood``).
deep
    ``DeepKernelRegression``: a GP on the features of a small neural network (deep kernel
    learning); its type-II fit is a ``DKLFit``.
weight_space
    ``BayesianLinearRegression``, ``KernelRidge``: the weight-space view (PRML §3.3, §6.1).
multioutput
    ``MultiOutputGP``: correlated outputs (intrinsic / linear coregionalisation), NaN-missing;
    its predictions are ``MultiOutputPrediction``.
latent
    ``LatentGP``: latent GPs for counts, proportions, binary outcomes and outliers (Bernoulli,
    binomial, Poisson, negative binomial, Student-t), NUTS with the GP integrated out by Laplace;
    type-II fits ``LatentFit`` (Laplace), ``VIFit``, ``EPFit`` (both ``SiteFit``).
inference
    The one vocabulary of fit methods of every model (``inference.methods``: ``nuts``,
    ``nuts_joint``, ``map``, ``vi``, ``ep``); type-II fits (ML-II, MAP) with restarts, NUTS
    backends, the jitter pre-flight.
many
    ``fit_many``: one fit per group in parallel on Dask (a workflow above the models).
predictive
    Closed-form predictive equations and log marginal likelihood (NumPy, Cholesky).
linalg
    Positive semi-definiteness checks, Cholesky with growing jitter.
validate
    ``validate.sbc``: simulation-based calibration of an inference path (Talts et al. 2018).
report
    ``report(fit, path=None, *, model=...)``: a self-contained HTML report (diagnostics, figures,
    LOO comparison). ``bayes_gp.report`` is the package and, called, the function.
"""

from bayes_gp import eigen, inference, kernels, report, validate
from bayes_gp._version import __version__ as __version__
from bayes_gp.classification import (
    ClassifierFit,
    GPClassifier,
    MulticlassFit,
    MulticlassGPClassifier,
)
from bayes_gp.deep import DeepKernelRegression, DKLFit
from bayes_gp.formula import FormulaLatentGP, FormulaMulticlass, FormulaRegression, Model
from bayes_gp.hierarchical import HierarchicalGP, HierarchicalLatentGP, hierarchical_gp
from bayes_gp.inference import MapFit
from bayes_gp.latent import EPFit, LatentFit, LatentGP, SiteFit, VIFit
from bayes_gp.linalg import NotPSDError, NotPSDWarning, PSDCheck, check_psd
from bayes_gp.many import ManyFit, fit_many
from bayes_gp.multioutput import MultiOutputGP, MultiOutputPrediction
from bayes_gp.regression import (
    GPRegression,
    HeteroscedasticGPRegression,
    Prediction,
    StudentTProcessRegression,
)
from bayes_gp.regression.term import MarginalPrediction, MarginalTerm, marginal_gp, predict_marginal
from bayes_gp.report import Report
from bayes_gp.weight_space import BayesianLinearRegression, KernelRidge

__all__ = [
    "Model",
    "FormulaRegression",
    "FormulaLatentGP",
    "FormulaMulticlass",
    "kernels",
    "eigen",
    "validate",
    "inference",
    "GPRegression",
    "HeteroscedasticGPRegression",
    "StudentTProcessRegression",
    "GPClassifier",
    "ClassifierFit",
    "MulticlassGPClassifier",
    "MulticlassFit",
    "LatentGP",
    "MultiOutputGP",
    "HierarchicalGP",
    "HierarchicalLatentGP",
    "hierarchical_gp",
    "LatentFit",
    "SiteFit",
    "VIFit",
    "EPFit",
    "MultiOutputPrediction",
    "Prediction",
    "MapFit",
    "fit_many",
    "ManyFit",
    "check_psd",
    "PSDCheck",
    "NotPSDError",
    "NotPSDWarning",
    "report",
    "Report",
    "BayesianLinearRegression",
    "KernelRidge",
    "DeepKernelRegression",
    "DKLFit",
    "marginal_gp",
    "predict_marginal",
    "MarginalTerm",
    "MarginalPrediction",
]
