r"""Approximate GP regression for large N: HSGP (collapsed), VFE and FITC.

:class:`~bayes_gp.GPRegression` with ``approx="hsgp"|"vfe"|"fitc"`` replaces the exact marginal
likelihood :math:`N(y \mid m, K + \sigma^2 I)` (seed 000 eq. 23), which costs :math:`O(N^3)`, by
one of three approximations. Each is registered as the observed variable ``y`` of the PyMC model,
so ML-II, MAP, NUTS, prediction and leave-one-out terms work as for the exact model.

**HSGP** (Solin & Särkkä 2020; Riutort-Mayol et al. 2022), built with PyMC's
``pm.gp.HSGP.prior_linearized``: on the box :math:`[c_x - L, c_x + L]` the kernel is expanded in the
Laplacian's eigenfunctions,

.. math::
   f(x) \approx \sum_{j=1}^{m} \phi_j(x)\, w_j, \qquad w_j \sim N\!\left(0, S(\sqrt{\lambda_j})\right),

with :math:`S` the kernel's spectral density (R&W eq. 4.6; every stationary catalogue kernel with a
closed form has one, Matérn of any :math:`\nu` included, R&W eq. 4.15). That is Bayesian linear
regression with :math:`\Sigma_p = \Lambda = \mathrm{diag}(S(\sqrt{\lambda_j}))` (seed 004 §1), and
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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from bayes_gp.regression.hsgp import (
    HSGP_MAX_DEFAULT_BASIS,
    HSGPLikelihood,
    hsgp_constants,
    hsgp_m_c,
    hsgp_rule,
)
from bayes_gp.regression.inducing import SparseLikelihood, default_n_inducing, inducing_points

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

APPROXIMATIONS = ("hsgp", "vfe", "fitc")
_OPTIONS = {"hsgp": ("m", "c"), "vfe": ("n_inducing", "Xu"), "fitc": ("n_inducing", "Xu")}


# ---------------------------------------------------------------------------- specification
@dataclass(frozen=True)
class ApproxSpec:
    """A validated approximation request (see :func:`approx_spec`)."""

    name: str
    m: tuple[int, ...] | None = None
    c: tuple[float, ...] | None = None
    n_inducing: int | None = None
    Xu: np.ndarray | None = None


def _positive_ints(name: str, value, D: int) -> tuple[int, ...]:
    arr = np.atleast_1d(np.asarray(value))
    if arr.ndim != 1 or arr.size not in (1, D) or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(
            f"`approx_options[{name!r}]` must be a positive integer or one per input dimension "
            f"({D}), got {value!r}"
        )
    if np.any(arr < 1):
        raise ValueError(f"`approx_options[{name!r}]` must be positive, got {value!r}")
    return tuple(int(v) for v in np.broadcast_to(arr, (D,)))


def approx_spec(approx: str | None, options: Mapping[str, Any] | None, X: np.ndarray):
    """Validate ``approx`` and ``approx_options`` for inputs ``X``; ``None`` for the exact GP.

    Options: ``"hsgp"``: ``m`` (basis functions per input dimension: an int or one per dimension)
    and ``c`` (boundary factor > 1: the box is ``c`` times the data's half-range; a number or one
    per dimension); ``"vfe"``/``"fitc"``: ``n_inducing`` (number of k-means inducing inputs) or
    ``Xu`` (the inducing inputs, shape ``(M, D)``). Omitted options get the data-based defaults
    of the module docstring.
    """
    if approx is None:
        if options:
            raise ValueError("`approx_options` given without `approx`")
        return None
    if not isinstance(approx, str) or approx.lower() not in APPROXIMATIONS:
        raise ValueError(f"`approx` must be None or one of {APPROXIMATIONS}, got {approx!r}")
    name = approx.lower()
    if options is not None and not isinstance(options, Mapping):
        raise TypeError(f"`approx_options` must be a dict, got {type(options).__name__}")
    options = dict(options or {})
    unknown = set(options) - set(_OPTIONS[name])
    if unknown:
        raise ValueError(
            f"unknown `approx_options` {sorted(unknown)} for approx={name!r}; "
            f"known: {list(_OPTIONS[name])}"
        )
    N, D = X.shape
    if name == "hsgp":
        m = options.get("m")
        c = options.get("c")
        m = None if m is None else _positive_ints("m", m, D)
        if c is not None:
            try:
                arr = np.atleast_1d(np.asarray(c, dtype=float))
            except (TypeError, ValueError):
                arr = np.array([np.nan])
            if arr.ndim != 1 or arr.size not in (1, D) or not np.all(np.isfinite(arr)):
                raise ValueError(
                    f"`approx_options['c']` must be a number or one per input dimension ({D}), "
                    f"got {c!r}"
                )
            if np.any(arr <= 1.0):
                raise ValueError(
                    f"`approx_options['c']` must be > 1 (the box must contain the data with a "
                    f"margin; Riutort-Mayol et al. recommend c >= 1.2), got {c!r}"
                )
            c = tuple(float(v) for v in np.broadcast_to(arr, (D,)))
        return ApproxSpec(name, m=m, c=c)
    if "n_inducing" in options and "Xu" in options:
        raise ValueError("give either `approx_options['n_inducing']` or `['Xu']`, not both")
    Xu = options.get("Xu")
    if Xu is not None:
        try:
            Xu = np.asarray(Xu, dtype=float)
        except (TypeError, ValueError):
            raise ValueError("`approx_options['Xu']` must be a numeric array") from None
        if Xu.ndim == 1 and D == 1:
            Xu = Xu[:, None]
        if Xu.ndim != 2 or Xu.shape[1] != D or Xu.shape[0] < 1:
            raise ValueError(
                f"`approx_options['Xu']` must have shape (M, {D}) with M >= 1, got {Xu.shape}"
            )
        if not np.all(np.isfinite(Xu)):
            raise ValueError("`approx_options['Xu']` contains NaN or infinite values")
        return ApproxSpec(name, Xu=Xu.copy())
    n = options.get("n_inducing")
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
            raise ValueError(f"`approx_options['n_inducing']` must be a positive int, got {n!r}")
        if n > N:
            raise ValueError(
                f"`approx_options['n_inducing']`={n} exceeds the number of observations ({N})"
            )
        n = int(n)
    return ApproxSpec(name, n_inducing=n)


def build_likelihood(spec: ApproxSpec, name: str, X, y, cov, mean_func, sigma, jitter, dims):
    """Register the approximate likelihood of ``y`` in the current model; return its object."""
    if spec.name == "hsgp":
        return HSGPLikelihood(spec, name, X, y, cov, mean_func, sigma, jitter, dims)
    return SparseLikelihood(spec, name, X, y, cov, mean_func, sigma, jitter, dims)
