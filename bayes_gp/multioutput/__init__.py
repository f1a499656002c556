r"""Multi-output Gaussian processes.

``MultiOutputGP``: the model class (:mod:`bayes_gp.multioutput.model`), the intrinsic
coregionalisation model (one kernel) or the linear model of coregionalisation (a list of
kernels), fitted by NUTS or type-II, on complete or heterotopic data (``NaN`` = not observed).

``icm_marginal`` / ``icm_logp`` / ``icm_predict``: the intrinsic coregionalisation model
(Bonilla, Chai & Williams 2008; Álvarez, Rosasco & Lawrence 2012, §4.2),
:math:`\operatorname{cov}(f_p(x), f_q(x')) = B_{pq} k(x, x')` with
:math:`B = W W^T + \operatorname{diag}(\kappa)`; on complete data its likelihood goes through the
Kronecker eigendecomposition (:mod:`bayes_gp.multioutput.kronecker`). ``lmc_marginal`` and
``predict_terms``: the same for a sum of such terms, with given matrices. ``linear_mean``: the
linear mean :math:`m_p(x) = c_p + x^T \beta_p` of every output (``mean="linear"``).
"""

from bayes_gp.multioutput.icm import (
    ICMData,
    ICMPrediction,
    coregionalisation,
    icm_data,
    icm_logp,
    icm_marginal,
    icm_predict,
    linear_mean,
    lmc_marginal,
    predict_terms,
)
from bayes_gp.multioutput.kronecker import KroneckerICMLogp as KroneckerICMLogp
from bayes_gp.multioutput.kronecker import kronecker_icm_logp
from bayes_gp.multioutput.model import MultiOutputGP, MultiOutputPrediction

#: What users use; the Op ``KroneckerICMLogp`` stays importable (the "as" import), not exported.
__all__ = [
    "ICMData",
    "ICMPrediction",
    "MultiOutputGP",
    "MultiOutputPrediction",
    "coregionalisation",
    "icm_data",
    "icm_logp",
    "icm_marginal",
    "icm_predict",
    "kronecker_icm_logp",
    "linear_mean",
    "lmc_marginal",
    "predict_terms",
]
