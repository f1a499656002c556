"""Binary GP classification with a sigmoid link: Laplace, EP and NUTS (PRML §6.4.5, R&W ch. 3),
as the Bernoulli :class:`~bayes_gp.latent.LatentGP` with a label mapping."""

from bayes_gp.classification.gpc import ClassifierFit, GPClassifier
from bayes_gp.classification.likelihoods import LINKS, average_probability

__all__ = ["GPClassifier", "ClassifierFit", "average_probability", "LINKS"]
