"""GP classification. Binary, with a sigmoid link: Laplace, EP and NUTS (PRML §6.4.5, R&W ch. 3),
as the Bernoulli :class:`~bayes_gp.latent.LatentGP` with a label mapping
(:class:`GPClassifier`); more than two classes, with C latent GPs and the softmax likelihood:
Laplace (R&W §3.5, Algorithms 3.3 and 3.4), joint latent NUTS and NUTS with the latent GPs
integrated out by Laplace (:class:`MulticlassGPClassifier`)."""

from bayes_gp.classification.gpc import ClassifierFit, GPClassifier
from bayes_gp.classification.likelihoods import LINKS, average_probability
from bayes_gp.classification.multiclass_model import MulticlassFit, MulticlassGPClassifier

__all__ = [
    "GPClassifier",
    "ClassifierFit",
    "MulticlassGPClassifier",
    "MulticlassFit",
    "average_probability",
    "LINKS",
]
