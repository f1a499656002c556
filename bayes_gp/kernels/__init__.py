r"""The kernel catalogue (R&W ch. 4, PRML §6.2): every covariance function is a PyMC kernel.

=====================  ===========================================  ==========================
kernel                 formula                                      source
=====================  ===========================================  ==========================
``ExpQuad``            :math:`\exp(-r^2/2)`                         R&W (4.9), PRML (6.23)
``Matern``             :math:`\frac{2^{1-\nu}}{\Gamma(\nu)}(\sqrt{2\nu}r)^\nu K_\nu(\sqrt{2\nu}r)`  R&W (4.14)
``Matern12/32/52``     closed forms                                 R&W (4.16), (4.17)
``Exponential``        :math:`\exp(-r)`                             R&W §4.2.1
``GammaExponential``   :math:`\exp(-r^\gamma)`                      R&W (4.18)
``RatQuad``            :math:`(1 + r^2/2\alpha)^{-\alpha}`          R&W (4.19)
``PiecewisePolynomial``:math:`k_{ppD,q}`                            R&W (4.21)
``BesselOscillatory``  :math:`\Gamma(\nu+1)(2/r)^\nu J_\nu(r)`      R&W §4.2.1
``Periodic``           :math:`\exp(-2\sin^2(\pi r/p)/\ell^2)`       R&W (4.31)
``Periodized``         :math:`\sum_m k(\tau + mp)`                  R&W §4.2.1
``DotProduct``         :math:`\sigma_0^2 + x^\top\Sigma_p x'`       R&W §4.2.2, §2.1.2
``Polynomial``         :math:`(\sigma_0^2 + x^\top\Sigma_p x')^p`   R&W (4.23), PRML (6.11)
``Sigmoid``            :math:`\tanh(a x^\top x' + b)` (not PSD)     PRML (6.37)
``PRMLKernel``         :math:`\theta_0 e^{-\theta_1\|x-x'\|^2/2} + \theta_2 + \theta_3 x^\top x'`  PRML (6.63)
``BasisFunction``      :math:`\phi(x)^\top\Sigma_p\phi(x')`         R&W §2.1.2, PRML (6.53)
``NeuralNetwork``      arcsine, :math:`\tilde x = (1, x)`           R&W (4.29)
``GaussianBasis``      Gaussian basis functions (envelope × SE)     R&W (4.30)
``Gibbs``              variable length-scales :math:`\ell_d(x)`     R&W (4.32)
``PaciorekSchervish``  :math:`\Sigma(x)`, :math:`k_S(\sqrt{Q_{ij}})`  R&W (4.33), (4.34)
``OHagan``             :math:`\phi(x)^\top W_0\phi(x')k_w(x, x')`    R&W §4.2.3
``Wiener``             :math:`\min(x, x')`, :math:`x \ge 0`          R&W §4.2.3
``SpectralMixture``    :math:`\sum_q w_q\prod_d e^{-2\pi^2\tau_d^2v_{qd}}\cos(2\pi\tau_d\mu_{qd})`  W&A (2013) (12)
``MaternSpectralMixture`` :math:`\sum_q w_q\cos(2\pi\mu_q\tau)k_\nu(\tau/\ell_q)`  state-space form
=====================  ===========================================  ==========================

State-space forms of 1-D stationary kernels (``statespace``: ``MaternTerm``, ``CosineTerm``,
``SHOTerm``, ``ConstantTerm``, their sums and products, ``StateSpaceKernel``), which the O(n)
exact GP (:mod:`bayes_gp.solvers.quasisep`) factorises. The catalogue by name, with the data
scales and default hyperpriors every model family uses: :mod:`bayes_gp.kernels.catalogue`.
In the models' compiled log densities the kernels' matrix exponentials run in a vectorised
loop (:mod:`bayes_gp.kernels.vector_exp`).

Constructions (R&W §4.2.4): ``Normalized``, ``VerticalScale``, ``Warped``, ``Power``, ``Additive``;
sums and products with ``+`` / ``*``; sigmoid switches between kernels along one input,
``ChangePoint`` / ``ChangePoints`` (Garnett et al. 2009, GPflow's form) and ``ChangeWindow``
(Lloyd et al. 2014). ``spectral_mixture_init`` starts a spectral mixture at the periodogram's
peaks. Categorical inputs (integer level codes): ``Exchangeable`` (one correlation between
levels) and ``Coregion`` (:math:`B = WW^\top + \mathrm{diag}(\kappa)`), to multiply with a kernel of
the continuous inputs. Metrics for stationary kernels: ``ls`` scalar (isotropic),
``ls`` vector (ARD), or ``metric=FactorAnalysis(Lambda, psi)``.
"""

from bayes_gp.kernels.base import Kernel, Stationary
from bayes_gp.kernels.categorical import Coregion, Exchangeable
from bayes_gp.kernels.changepoint import ChangePoint, ChangePoints, ChangeWindow
from bayes_gp.kernels.constructions import Additive, Normalized, Power, VerticalScale, Warped
from bayes_gp.kernels.dot_product import BasisFunction, DotProduct, Polynomial, PRMLKernel, Sigmoid
from bayes_gp.kernels.features import multi_indices, polynomial_features
from bayes_gp.kernels.metrics import FactorAnalysis, LengthScale, Metric
from bayes_gp.kernels.nonstationary import (
    GaussianBasis,
    Gibbs,
    NeuralNetwork,
    OHagan,
    PaciorekSchervish,
    Wiener,
)
from bayes_gp.kernels.periodic import Periodic, Periodized, TruncationWarning
from bayes_gp.kernels.precomputed import precomputed_covariance
from bayes_gp.kernels.spectral_mixture import (
    MaternSpectralMixture,
    SpectralMixture,
    spectral_mixture_init,
)
from bayes_gp.kernels.statespace import (
    ConstantTerm,
    CosineTerm,
    MaternTerm,
    SHOTerm,
    StateSpaceKernel,
)
from bayes_gp.kernels.stationary import (
    BesselOscillatory,
    Exponential,
    ExpQuad,
    GammaExponential,
    Matern,
    Matern12,
    Matern32,
    Matern52,
    PiecewisePolynomial,
    RatQuad,
)
from bayes_gp.kernels.strings import (
    BagOfCharacters,
    BagOfWords,
    FisherKernel,
    SpectrumKernel,
    StringKernel,
    SubstringKernel,
)

__all__ = [
    "Kernel",
    "Stationary",
    "Metric",
    "LengthScale",
    "FactorAnalysis",
    "ExpQuad",
    "Matern",
    "Matern12",
    "Matern32",
    "Matern52",
    "Exponential",
    "GammaExponential",
    "RatQuad",
    "PiecewisePolynomial",
    "BesselOscillatory",
    "Periodic",
    "Periodized",
    "TruncationWarning",
    "DotProduct",
    "Polynomial",
    "Sigmoid",
    "PRMLKernel",
    "BasisFunction",
    "NeuralNetwork",
    "GaussianBasis",
    "Gibbs",
    "PaciorekSchervish",
    "OHagan",
    "Wiener",
    "Normalized",
    "VerticalScale",
    "Warped",
    "Power",
    "Additive",
    # change points and windows (Garnett et al. 2009; Lloyd et al. 2014)
    "ChangePoint",
    "ChangePoints",
    "ChangeWindow",
    # spectral mixtures (Wilson & Adams 2013)
    "SpectralMixture",
    "MaternSpectralMixture",
    "spectral_mixture_init",
    # kernels on the levels of a factor (Qian, Wu & Wu 2008; Bonilla et al. 2008)
    "Exchangeable",
    "Coregion",
    "polynomial_features",
    "multi_indices",
    # kernels on strings (R&W §4.4): NumPy Gram matrices, used through precomputed_covariance
    "StringKernel",
    "SubstringKernel",
    "SpectrumKernel",
    "BagOfCharacters",
    "BagOfWords",
    "FisherKernel",
    "precomputed_covariance",
    # state-space terms of the O(n) exact GP
    "MaternTerm",
    "CosineTerm",
    "SHOTerm",
    "ConstantTerm",
    "StateSpaceKernel",
]
