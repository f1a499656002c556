"""Marginal-likelihood strategies ("solvers"): how a GP model's Gaussian marginal likelihood
:math:`\\mathcal N(y \\mid m, K + \\sigma^2 I)` (R&W eq. 2.30) and its predictive equations
(R&W eq. 2.25-2.26) are computed, exactly or approximately. The model classes choose one
(``GPRegression(approx=..., structure=...)``); none of these modules knows a model class.

======================  ==========================================================================
module                  strategy
======================  ==========================================================================
``likelihood``          the dense exact Gaussian log density: a Cholesky Op with its gradient
``exact``               the exact GP (dense, or from a table of lags on a grid)
``compact``             compact-support kernels: a sparse / banded Cholesky (R&W eq. 4.21)
``quasisep``            the O(n) exact GP of a 1-D state-space kernel (Foreman-Mackey et al. 2017)
``structured``          the choice between dense and quasiseparable (``structure=``)
``hsgp``                Hilbert-space approximate GP (Solin & Särkkä 2020; Riutort-Mayol 2023)
``inducing``            inducing points, VFE and FITC (Titsias 2009; Quiñonero-Candela 2005)
``approx``              the choice among the approximations (``approx=``)
``approx_options``      the approximations' options and their defaults
``observed``            what every observed-data strategy shares (noise, LOO terms)
``approx_checks``       post-fit checks of an approximation against the exact GP
======================  ==========================================================================
"""

from bayes_gp.solvers.likelihood import marginal_normal
from bayes_gp.solvers.quasisep import quasisep_marginal

#: What users use: the exact GP likelihood for a user's own PyMC model, dense (R&W eq. 2.30, its
#: gradient eq. 5.9, one fused Cholesky Op) or O(n) for a state-space kernel. The strategy classes
#: (``exact.ExactLikelihood``, ``quasisep.QuasisepLikelihood``, ...) are the models' machinery,
#: importable from their modules.
__all__ = ["marginal_normal", "quasisep_marginal"]
