r"""Kernels on strings (R&W §4.4): substring kernels (4.45) and the Fisher kernel (4.46).

Strings are not PyTensor tensors, so these kernels do not build graphs: ``.gram(strings_a,
strings_b)`` returns a NumPy Gram matrix. A square Gram matrix (``strings_b=None``) is checked to be
positive semi-definite with :func:`bayes_gp.linalg.check_psd` (:class:`~bayes_gp.NotPSDError`
otherwise; it cannot happen for these kernels short of a bug). To use one in a PyMC model, build the
Gram matrix over *all* strings of interest (training and test) once and wrap it with
:func:`bayes_gp.kernels.precomputed.precomputed_covariance`, whose inputs are integer indices into
that matrix; amplitude and noise remain random variables with NUTS posteriors::

    K = SpectrumKernel(3).gram(train + test, normalize=True)
    with pm.Model():
        eta = pm.HalfNormal("eta", 1.0)
        sigma = pm.HalfNormal("sigma", 1.0)
        gp = pm.gp.Marginal(cov_func=eta**2 * precomputed_covariance(K))
        idx = np.arange(len(train))[:, None]
        gp.marginal_likelihood("y", X=idx, y=y, sigma=sigma)

Every kernel has ``.gram(strings_a, strings_b=None, *, normalize=False)``; ``normalize=True``
returns :math:`k(x, x') / \sqrt{k(x, x)\,k(x', x')}` (R&W eq. 4.35), with the convention that a row
or column of a string whose self-similarity :math:`k(x, x)` is zero (no features, e.g. a string
shorter than ``k`` for the ``k``-spectrum kernel) is zero.
"""

from bayes_gp.kernels.strings.base import StringKernel
from bayes_gp.kernels.strings.fisher import FisherKernel
from bayes_gp.kernels.strings.substring import (
    BagOfCharacters,
    BagOfWords,
    SpectrumKernel,
    SubstringKernel,
)

__all__ = [
    "StringKernel",
    "SubstringKernel",
    "SpectrumKernel",
    "BagOfCharacters",
    "BagOfWords",
    "FisherKernel",
]
