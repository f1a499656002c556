r"""Multi-output Gaussian processes.

``icm_marginal`` / ``icm_logp`` / ``icm_predict``: the intrinsic coregionalisation model
(Bonilla, Chai & Williams 2008; Álvarez, Rosasco & Lawrence 2012, §4.2),
:math:`\operatorname{cov}(f_p(x), f_q(x')) = B_{pq} k(x, x')` with
:math:`B = W W^T + \operatorname{diag}(\kappa)`; on complete data its likelihood goes through the
Kronecker eigendecomposition (:mod:`bayes_gp.multioutput.kronecker`).
"""

from bayes_gp.multioutput.icm import (
    ICMData,
    ICMPrediction,
    coregionalisation,
    icm_data,
    icm_logp,
    icm_marginal,
    icm_predict,
)
from bayes_gp.multioutput.kronecker import KroneckerICMLogp, kronecker_icm_logp

__all__ = [
    "ICMData",
    "ICMPrediction",
    "KroneckerICMLogp",
    "coregionalisation",
    "icm_data",
    "icm_logp",
    "icm_marginal",
    "icm_predict",
    "kronecker_icm_logp",
]
