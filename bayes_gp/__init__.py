"""bayes_gp: Bayesian Gaussian-process modelling on PyMC.

Subpackages
-----------
kernels
    The kernel catalogue (R&W ch. 4, PRML ch. 6): PyMC covariance functions.
linalg
    Positive semi-definiteness checks of Gram matrices.
"""

from bayes_gp import kernels
from bayes_gp.linalg import NotPSDError, NotPSDWarning, PSDCheck, check_psd

__all__ = ["kernels", "check_psd", "PSDCheck", "NotPSDError", "NotPSDWarning"]
__version__ = "0.1.0"
