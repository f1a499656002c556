r"""Approximate GP regression for large N: HSGP (collapsed), VFE and FITC.

:class:`~bayes_gp.GPRegression` with ``approx="hsgp"|"vfe"|"fitc"`` replaces the exact marginal
likelihood :math:`N(y \mid m, K + \sigma^2 I)` (PRML eqs. 6.61–6.62), which costs :math:`O(N^3)`, by
one of three approximations. Each is registered as the observed variable ``y`` of the PyMC model,
so ML-II, MAP, NUTS, prediction and leave-one-out terms work as for the exact model.

**HSGP** (Solin & Särkkä 2020; Riutort-Mayol et al. 2022), built with PyMC's
``pm.gp.HSGP.prior_linearized``: on the box :math:`[c_x - L, c_x + L]` the kernel is expanded in the
Laplacian's eigenfunctions,

.. math::
   f(x) \approx \sum_{j=1}^{m} \phi_j(x)\, w_j, \qquad w_j \sim N\!\left(0, S(\sqrt{\lambda_j})\right),

with :math:`S` the kernel's spectral density (R&W eq. 4.6; every stationary catalogue kernel with a
closed form has one, Matérn of any :math:`\nu` included, R&W eq. 4.15). That is Bayesian linear
regression with :math:`\Sigma_p = \Lambda = \mathrm{diag}(S(\sqrt{\lambda_j}))` (R&W §2.1), and
with Gaussian noise the weights integrate out exactly:

.. math::
   y \sim N\!\left(m,\ \Phi \Lambda \Phi^\top + \sigma^2 I\right).

With :math:`D = \Lambda^{1/2}` and :math:`A = I_m + \sigma^{-2} D \Phi^\top\Phi D`, the matrix
inversion and determinant lemmas (R&W eqs. A.9, A.10) give

.. math::
   \log p(y) = -\tfrac{1}{2\sigma^2}\left(r^\top r - \sigma^{-2}\|L_A^{-1} D \Phi^\top r\|^2\right)
               - \sum_i \log (L_A)_{ii} - \tfrac N2 \log \sigma^2 - \tfrac N2 \log 2\pi,

:math:`r = y - m(X)`, :math:`A = L_A L_A^\top`. :math:`\Phi^\top\Phi`, :math:`\Phi^\top y` and
:math:`y^\top y` (and the same products with the mean function's regressors when the mean is zero,
constant or linear) are computed once, so one log-density and gradient costs :math:`O(m^3)`
whatever :math:`N`: NUTS sees only the hyperparameters. Sampling the weights instead is what
PyMC's ``HSGP.prior`` does, and its geometry is poor (``benchmarks/README.md``, N = 10^4,
m = 280: 508 leapfrog steps per draw non-centred, every draw divergent centred; collapsed: 7).

**VFE** (Titsias 2009, eq. 9) and **FITC** (Snelson & Ghahramani 2006) with inducing inputs
:math:`Z`, :math:`Q = K_{fu}K_{uu}^{-1}K_{uf}`, through PyMC's ``pm.gp.MarginalApprox``:

.. math::
   \text{FITC: } y \sim N\!\left(m, Q + \mathrm{diag}(K - Q) + \sigma^2 I\right), \qquad
   \text{VFE: } \log N(y \mid m, Q + \sigma^2 I) - \tfrac{1}{2\sigma^2}\mathrm{tr}(K - Q)
   \ \le \log p(y).

PyMC adds that term as a ``Potential`` (no observed variable); here the same graph
(``MarginalApprox._build_marginal_likelihood_loglik``) is the log-density of an observed
``pm.CustomDist`` ``y``, so type-II ML (which maximises the observed variables' log-density) and
the model's structure are as for the exact GP. Cost :math:`O(N M^2)` per evaluation.

Defaults chosen from the data
-----------------------------
*HSGP* (Riutort-Mayol et al. 2022, §4; the constants are those of PyMC's
``pm.gp.hsgp_approx.approx_hsgp_hyperparams``, which a test checks): for each input dimension
with half-range :math:`S` and a length-scale range :math:`[\ell_{lo}, \ell_{hi}]`,

.. math::
   c = \max\!\left(a_1 \frac{\ell_{hi}}{S},\ 1.2\right), \qquad
   m = \left\lfloor a_2 \frac{c}{\ell_{lo}/S} \right\rfloor,

:math:`(a_1, a_2) = (3.2, 1.75)` for the squared exponential, :math:`(4.1, 2.65)` for Matérn 5/2,
:math:`(4.5, 3.42)` for Matérn 3/2. Other Matérn :math:`\nu` between those take the constants of
the next rougher published kernel; below 3/2 (Matérn 1/2 included) they are derived
(:func:`hsgp_constants`) from the two accuracy levels the published Matérn-3/2 rule reaches: the
correlation at the box edge :math:`k(a_1) = 0.0036` and the prior variance left at unresolved
frequencies, :math:`P(|\omega\ell| > \pi a_2/2) = 1.26\%` (in 1-D the Matérn spectral density of
:math:`\omega\ell` is Student-t with :math:`2\nu` degrees of freedom). The length-scale
range is the central 95% of the length-scale prior (2.5% and 97.5% quantiles of 20000 prior draws,
fixed seed), per input dimension for ARD; the rules are 1-D rules applied dimension by dimension.
Sums of kernels take the largest :math:`c` and :math:`m`. A default with more than
:data:`HSGP_MAX_DEFAULT_BASIS` basis functions raises (give ``m`` and ``c``, narrow the
length-scale prior, or use ``"vfe"``).

*VFE/FITC*: :math:`M = \min(N, 500, \prod_d \lceil 4 a_2 S_d/\ell_{lo,d}\rceil)` inducing inputs
(:func:`default_n_inducing`: four per period of the highest frequency the HSGP rule resolves;
:math:`\min(N, 200)` for kernels without a rule), the k-means centres of the standardised inputs
(``scipy.cluster.vq.kmeans2``, k-means++ start, seed 0).

References
----------
Solin, A., Särkkä, S. (2020). Hilbert space methods for reduced-rank Gaussian process regression.
Statistics and Computing 30, 419–446.
Riutort-Mayol, G., Bürkner, P.-C., Andersen, M. R., Solin, A., Vehtari, A. (2022). Practical
Hilbert space approximate Bayesian Gaussian processes for probabilistic programming. Statistics and
Computing 33, 17.
Titsias, M. (2009). Variational learning of inducing variables in sparse Gaussian processes.
AISTATS.
Snelson, E., Ghahramani, Z. (2006). Sparse Gaussian processes using pseudo-inputs. NeurIPS.
Quiñonero-Candela, J., Rasmussen, C. E. (2005). A unifying view of sparse approximate Gaussian
process regression. JMLR 6.
"""

from __future__ import annotations

from bayes_gp.solvers.approx_options import APPROXIMATIONS, ApproxSpec, approx_spec
from bayes_gp.solvers.hsgp import (
    HSGP_MAX_DEFAULT_BASIS,
    HSGPLikelihood,
    hsgp_constants,
    hsgp_m_c,
    hsgp_rule,
)
from bayes_gp.solvers.inducing import SparseLikelihood, default_n_inducing, inducing_points

__all__ = [
    "APPROXIMATIONS",
    "ApproxSpec",
    "HSGP_MAX_DEFAULT_BASIS",
    "approx_spec",
    "build_likelihood",
    "default_n_inducing",
    "hsgp_constants",
    "hsgp_m_c",
    "hsgp_rule",
    "inducing_points",
    "HSGPLikelihood",
    "SparseLikelihood",
]


def build_likelihood(spec: ApproxSpec, name: str, X, y, cov, mean_func, sigma, jitter, dims):
    """Register the approximate likelihood of ``y`` in the current model; return its object."""
    if spec.name == "hsgp":
        return HSGPLikelihood(spec, name, X, y, cov, mean_func, sigma, jitter, dims)
    return SparseLikelihood(spec, name, X, y, cov, mean_func, sigma, jitter, dims)
