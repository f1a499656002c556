"""Binary GP classification with a sigmoid link: Laplace, EP and NUTS (PRML §6.4.5, R&W ch. 3)."""

from bayes_gp.classification.approx import EPState, LaplaceState, ep_run, laplace_mode
from bayes_gp.classification.gpc import ClassifierFit, GPClassifier
from bayes_gp.classification.likelihoods import LINKS, average_probability

__all__ = [
    "GPClassifier",
    "ClassifierFit",
    "LaplaceState",
    "EPState",
    "laplace_mode",
    "ep_run",
    "average_probability",
    "LINKS",
]
