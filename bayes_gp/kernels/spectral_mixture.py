r"""Spectral mixture kernels (Wilson & Adams 2013) and their initialisation from the data.

Bochner's theorem (R&W §4.2.1, eq. 4.5) makes every stationary kernel the Fourier transform of
a positive spectral measure; a Gaussian mixture (symmetrised, so that the kernel is real) is
dense among spectral densities, and its transform is a sum of Gaussian-damped cosines:

* :class:`SpectralMixture`: Wilson & Adams (2013) eq. (12), any number of inputs;
* :class:`MaternSpectralMixture`: the same with Matérn envelopes on one input, a sum of cosine
  :math:`\times` Matérn terms. For half-integer :math:`\nu` it has a finite state-space form
  (:func:`bayes_gp.kernels.statespace.to_term`: ``MaternTerm * CosineTerm`` per component),
  so a GP with it runs in :math:`O(n)` (``structure="quasiseparable"``). The Gaussian envelope
  has no such form (its spectral density is not rational).
* :func:`spectral_mixture_init`: initial weights, means and variances from the peaks of the
  Lomb–Scargle periodogram of 1-D data.

Frequencies are in cycles per unit of :math:`x` (:math:`\mu_q = 1/\text{period}`). Spectral
densities are returned in PyMC's convention (angular frequency :math:`\omega`,
:math:`k(\tau) = (2\pi)^{-D}\int S(\omega)e^{i\omega^\top\tau}d\omega`, the one
``pm.gp.HSGP`` calls), which is the density over cycles evaluated at :math:`\omega/2\pi`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytensor.tensor as pt

from bayes_gp._validation import (
    as_parameter,
    check_integer_in,
    check_nonnegative,
    check_positive,
    constant_value,
    fixed_scalar,
)
from bayes_gp.kernels.base import Kernel
from bayes_gp.kernels.metrics import pairwise_diff
from bayes_gp.kernels.stationary import Matern, _matern_unit_psd

__all__ = ["SpectralMixture", "MaternSpectralMixture", "spectral_mixture_init"]


def _weights_and_count(weights, means):
    """The weights as a tensor and the number of components ``Q`` they give; ``means``, when
    constant, must be finite."""
    w = _weights(weights)
    known = constant_value(means)
    if known is not None and not np.all(np.isfinite(known)):
        raise ValueError(f"`means` must be finite, got {known!r}")
    return w, w.type.shape[0]


def _weights(weights) -> pt.TensorVariable:
    check_nonnegative("weights", weights)
    w = pt.atleast_1d(as_parameter(weights))
    if w.ndim != 1:
        raise ValueError(f"`weights` must be a vector (Q,), got {w.ndim} dimensions")
    if w.type.shape[0] == 0:
        raise ValueError("`weights` is empty: a spectral mixture needs Q >= 1 components")
    return w


def _per_component(name: str, value, Q: int | None, D: int) -> pt.TensorVariable:
    """A ``(Q, D)`` parameter; ``(Q,)`` is accepted when ``D == 1``."""
    v = as_parameter(value)
    if v.ndim == 0 or (v.ndim == 1 and D == 1):
        v = pt.reshape(v, (-1, 1)) if v.ndim == 1 else pt.reshape(v, (1, 1))
    if v.ndim != 2:
        raise ValueError(
            f"`{name}` must have shape (Q, D) = ({Q if Q is not None else 'Q'}, {D}), got "
            f"{v.ndim} dimension(s)"
        )
    q, d = v.type.shape
    if d is not None and d != D:
        raise ValueError(f"`{name}` has {d} column(s) but the kernel has {D} active dimension(s)")
    if q is not None and Q is not None and q not in (1, Q):
        raise ValueError(f"`{name}` has {q} row(s) but `weights` has {Q} components")
    return v


def _component_vector(name: str, value, Q: int | None) -> pt.TensorVariable:
    """A ``(Q,)`` parameter (a scalar is broadcast to every component)."""
    v = pt.atleast_1d(as_parameter(value))
    if v.ndim != 1:
        raise ValueError(f"`{name}` must be a vector (Q,), got {v.ndim} dimensions")
    q = v.type.shape[0]
    if q is not None and Q is not None and q not in (1, Q):
        raise ValueError(f"`{name}` has {q} entries but `weights` has {Q} components")
    return v


class SpectralMixture(Kernel):
    r"""Spectral mixture kernel, Wilson & Adams (2013) eq. (12).

    .. math::
       k(\tau) = \sum_{q=1}^{Q} w_q \prod_{d=1}^{D}
                 \exp\!\left(-2\pi^2\tau_d^2 v_{qd}\right)\cos\!\left(2\pi\tau_d\mu_{qd}\right),
       \qquad \tau = x - x'

    the transform of the spectral density (over frequencies :math:`s` in cycles per unit)

    .. math::
       S(s) = \sum_{q=1}^{Q} w_q \prod_{d=1}^{D}
              \tfrac12\left[\mathcal N(s_d; \mu_{qd}, v_{qd}) + \mathcal N(s_d; -\mu_{qd}, v_{qd})
              \right].

    :math:`w_q` is the variance of component :math:`q` (:math:`k(0) = \sum_q w_q`),
    :math:`\mu_{qd}` its frequency (1/period), :math:`v_{qd}` its spectral variance: the
    envelope's length-scale is :math:`\ell_{qd} = 1/(2\pi\sqrt{v_{qd}})`. This product-of-cosines
    form is the paper's eq. (12) and GPyTorch's ``SpectralMixtureKernel``; in one dimension it is
    the paper's eq. (11).

    Parameters
    ----------
    input_dim : int
    weights : array_like or tensor, shape ``(Q,)``
        :math:`w_q \ge 0`.
    means : array_like or tensor, shape ``(Q, D)`` (``(Q,)`` when ``D = 1``)
        :math:`\mu_{qd}`, any sign (the kernel is even in each).
    variances : array_like or tensor, shape ``(Q, D)`` (``(Q,)`` when ``D = 1``)
        :math:`v_{qd} > 0`.
    active_dims : sequence of int, optional

    Notes
    -----
    :meth:`power_spectral_density` serves ``pm.gp.HSGP`` (``approx="hsgp"`` with
    ``approx_options={"m": ..., "c": ...}``: the default basis rule is for Matérn-class kernels
    and does not apply); the basis must resolve the highest frequency
    :math:`\max_q \mu_q + 3\sqrt{v_q}`. :func:`spectral_mixture_init` gives starting values.
    """

    def __init__(
        self,
        input_dim: int,
        weights,
        means,
        variances,
        active_dims: Sequence[int] | None = None,
    ):
        super().__init__(input_dim, active_dims)
        w, Q = _weights_and_count(weights, means)
        check_positive("variances", variances)
        self.weights = w
        self.means = _per_component("means", means, Q, self.n_dims)
        self.variances = _per_component("variances", variances, Q, self.n_dims)

    @property
    def n_components(self) -> int | None:
        """:math:`Q` (``None`` when not known before the graph runs)."""
        return self.weights.type.shape[0]

    def _value(self, tau):
        """:math:`k` at differences ``tau`` of shape ``(n, m, D)``."""
        t = tau[None, :, :, :]
        mu = self.means[:, None, None, :]
        v = self.variances[:, None, None, :]
        per_dim = pt.exp(-2.0 * np.pi**2 * pt.square(t) * v) * pt.cos(2.0 * np.pi * t * mu)
        comp = pt.prod(per_dim, axis=-1)  # (Q, n, m)
        return pt.tensordot(self.weights, comp, axes=[[0], [0]])

    def full(self, X, Xs=None):
        X, Xs = self._slice(X, Xs)
        return self._value(pairwise_diff(X, Xs))

    def diag(self, X):
        X, _ = self._slice(X, None)
        return pt.ones_like(X[:, 0]) * pt.sum(self.weights)

    def power_spectral_density(self, omega):
        r""":math:`S(\omega) = S_s(\omega/2\pi)` at angular frequencies ``omega`` ``(m, D)``."""
        s = pt.as_tensor_variable(omega)[None, :, :] / (2.0 * np.pi)
        mu = self.means[:, None, :]
        v = self.variances[:, None, :]
        norm = 1.0 / pt.sqrt(2.0 * np.pi * v)
        sym = 0.5 * norm * (
            pt.exp(-0.5 * pt.square(s - mu) / v) + pt.exp(-0.5 * pt.square(s + mu) / v)
        )
        return pt.tensordot(self.weights, pt.prod(sym, axis=-1), axes=[[0], [0]])

    def __repr__(self) -> str:
        return f"SpectralMixture(input_dim={self.input_dim}, Q={self.n_components})"


class MaternSpectralMixture(Kernel):
    r"""Spectral mixture with Matérn envelopes, on one input.

    .. math::
       k(\tau) = \sum_{q=1}^{Q} w_q \cos(2\pi\mu_q\tau)\,
                 k_\nu\!\left(\frac{|\tau|}{\ell_q}\right)

    with :math:`k_\nu` the unit Matérn correlation of R&W eq. (4.14) (closed forms eq. 4.16 for
    half-integer :math:`\nu`). Its spectral density (angular frequency) is the Matérn density
    R&W eq. (4.15) shifted to :math:`\pm 2\pi\mu_q`:

    .. math::
       S(\omega) = \sum_q \frac{w_q}{2}\left[S_{\nu,\ell_q}(\omega - 2\pi\mu_q)
                   + S_{\nu,\ell_q}(\omega + 2\pi\mu_q)\right].

    It is a sum of products of a cosine kernel and a Matérn kernel, so for
    :math:`\nu = p + \tfrac12` it is exactly the state-space sum
    :math:`\sum_q \mathrm{MaternTerm}(\nu, \sqrt{w_q}, \ell_q) \times \mathrm{CosineTerm}(1/\mu_q)`
    (:func:`bayes_gp.kernels.statespace.to_term`): the quasiseparable, :math:`O(n)` form of the
    spectral mixture (celerite's and tinygp's quasiseparable SM kernels use the same
    construction with SHO terms). :class:`SpectralMixture`'s Gaussian envelope has no such form.

    Parameters
    ----------
    weights : array_like or tensor, shape ``(Q,)``
        :math:`w_q \ge 0`.
    means : array_like or tensor, shape ``(Q,)``
        :math:`\mu_q` (cycles per unit); the state-space form needs them non-zero.
    ls : array_like or tensor, shape ``(Q,)``
        Envelope length-scales :math:`\ell_q > 0`.
    nu : float
        Matérn smoothness, a fixed number (default 3/2).
    input_dim : int
        Columns of ``X`` (default 1); the kernel acts on one of them (``active_dims``).
    active_dims : sequence of one int, optional
    """

    def __init__(
        self,
        weights,
        means,
        ls,
        nu: float = 1.5,
        input_dim: int = 1,
        active_dims: Sequence[int] | None = None,
    ):
        nu = fixed_scalar("nu", nu)
        check_positive("nu", nu)
        super().__init__(input_dim, active_dims)
        if self.n_dims != 1:
            raise ValueError(
                f"MaternSpectralMixture acts on one input column, got active_dims="
                f"{self.active_dims.tolist()}; use SpectralMixture for several inputs"
            )
        w, Q = _weights_and_count(weights, means)
        check_positive("ls", ls)
        self.weights = w
        self.means = _component_vector("means", means, Q)
        self.ls = _component_vector("ls", ls, Q)
        # not `smoothness`: the HSGP basis rule for a Matérn kernel does not hold for a
        # spectrum shifted to +-mu_q (give approx_options={"m", "c"})
        self.nu = nu
        self._unit = Matern(1, nu=nu, ls=1.0)

    def full(self, X, Xs=None):
        X, Xs = self._slice(X, Xs)
        tau = pairwise_diff(X, Xs)[None, :, :, 0]  # (1, n, m)
        ls = self.ls[:, None, None]
        envelope = self._unit.full_from_distance(pt.square(tau / ls), squared=True)
        comp = pt.cos(2.0 * np.pi * self.means[:, None, None] * tau) * envelope
        return pt.tensordot(self.weights, comp, axes=[[0], [0]])

    def diag(self, X):
        X, _ = self._slice(X, None)
        return pt.ones_like(X[:, 0]) * pt.sum(self.weights)

    def power_spectral_density(self, omega):
        r""":math:`S(\omega)` at angular frequencies ``omega`` of shape ``(m, 1)``."""
        w = pt.as_tensor_variable(omega)[None, :, 0]  # (1, m)
        ls = self.ls[:, None]
        shift = 2.0 * np.pi * self.means[:, None]

        def matern(x):
            return ls * _matern_unit_psd(self.nu, ls * x, 1)

        comp = 0.5 * (matern(w - shift) + matern(w + shift))
        return pt.tensordot(self.weights, comp, axes=[[0], [0]])

    def __repr__(self) -> str:
        Q = self.weights.type.shape[0]
        return f"MaternSpectralMixture(nu={self.nu}, Q={Q})"


def _lomb_scargle(t: np.ndarray, y: np.ndarray, freqs: np.ndarray) -> np.ndarray:
    r"""Lomb–Scargle periodogram at frequencies ``freqs`` (cycles per unit), Scargle (1982)
    eq. (10) on centred data:

    .. math::
       P(f) = \frac12\left[\frac{(\sum_j y_j\cos\omega(t_j-\tau))^2}{\sum_j\cos^2\omega(t_j-\tau)}
              + \frac{(\sum_j y_j\sin\omega(t_j-\tau))^2}{\sum_j\sin^2\omega(t_j-\tau)}\right],
       \quad \tan 2\omega\tau = \frac{\sum_j\sin 2\omega t_j}{\sum_j\cos 2\omega t_j}
    """
    y = y - y.mean()
    w = 2.0 * np.pi * freqs[:, None]
    tau = np.arctan2(np.sin(2 * w * t).sum(1), np.cos(2 * w * t).sum(1))[:, None] / (2 * w)
    c, s = np.cos(w * (t - tau)), np.sin(w * (t - tau))
    cc, ss = (c**2).sum(1), (s**2).sum(1)
    tiny = np.finfo(float).tiny
    return 0.5 * ((c @ y) ** 2 / np.maximum(cc, tiny) + (s @ y) ** 2 / np.maximum(ss, tiny))


def spectral_mixture_init(X, y, Q: int, *, oversample: int = 10) -> dict[str, np.ndarray]:
    r"""Initial weights, means and variances of a :math:`Q`-component spectral mixture from the
    :math:`Q` highest peaks of the Lomb–Scargle periodogram of 1-D data.

    Wilson & Adams (2013, §4) start the means at the periodogram's peaks; GPyTorch's
    ``initialize_from_data_empspect`` fits a Gaussian mixture to samples of the empirical
    spectrum (random, and on a regular grid). This is deterministic and works on irregular
    inputs: the periodogram (Scargle 1982, :func:`_lomb_scargle`) on frequencies from
    :math:`1/(2R)` to the pseudo-Nyquist frequency :math:`1/(2\,\mathrm{median}\,\Delta x)`
    (:math:`R` the input range) spaced :math:`1/(\text{oversample}\cdot R)`; each of the
    :math:`Q` highest local maxima gives a component with

    * mean :math:`\mu_q` the peak's frequency;
    * variance :math:`v_q = (\mathrm{HWHM}_q/\sqrt{2\ln 2})^2`, the Gaussian of the peak's half
      width at half maximum (at least the grid spacing);
    * weight :math:`w_q \propto` the peak's height, scaled so that :math:`\sum_q w_q` is the
      sample variance of ``y`` (:math:`k(0)`).

    With fewer than :math:`Q` peaks, the remaining components are slow trends
    (:math:`\mu = 0`, :math:`\sqrt v = 1/R`) sharing a tenth of the variance.

    Parameters
    ----------
    X : array_like, shape ``(n,)`` or ``(n, 1)``
    y : array_like, shape ``(n,)``
    Q : int
        Number of components, at least 1.
    oversample : int
        Frequency grid points per :math:`1/R` (default 10).

    Returns
    -------
    dict
        ``weights`` ``(Q,)``, ``means`` ``(Q, 1)``, ``variances`` ``(Q, 1)``: the keyword
        arguments of :class:`SpectralMixture` (``SpectralMixture(1, **init)``). For
        :class:`MaternSpectralMixture` use ``means[:, 0]`` and
        ``ls = 1 / (2 pi sqrt(variances[:, 0]))``.
    """
    Q = check_integer_in("Q", Q, range(1, 1 << 16))
    oversample = check_integer_in("oversample", oversample, range(1, 1001))
    x = np.asarray(X, dtype=float)
    if x.ndim == 2 and x.shape[1] == 1:
        x = x[:, 0]
    if x.ndim != 1:
        raise ValueError(
            f"spectral_mixture_init takes 1-D inputs (n,) or (n, 1), got shape {x.shape}; for "
            "several inputs choose the means and variances per dimension yourself"
        )
    y = np.asarray(y, dtype=float)
    if y.shape != x.shape:
        raise ValueError(f"`y` has shape {y.shape} but `X` has {x.shape[0]} rows")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("`X` and `y` must be finite")
    gaps = np.diff(np.unique(x))
    if gaps.size < 2:
        raise ValueError("spectral_mixture_init needs at least 3 distinct input values")
    R = float(x.max() - x.min())
    f_max = 0.5 / float(np.median(gaps))
    df = 1.0 / (oversample * R)
    freqs = np.arange(0.5 / R, f_max + df, df)[:20000]
    P = _lomb_scargle(x, y, freqs)
    var = float(y.var()) if y.var() > 0 else 1.0
    inner = np.flatnonzero((P[1:-1] > P[:-2]) & (P[1:-1] >= P[2:])) + 1
    peaks = inner[np.argsort(P[inner])[::-1]][:Q]
    means, sds, heights = [], [], []
    for i in peaks:
        half = 0.5 * P[i]
        lo = i
        while lo > 0 and P[lo] > half:
            lo -= 1
        hi = i
        while hi < P.size - 1 and P[hi] > half:
            hi += 1
        hwhm = 0.5 * (freqs[hi] - freqs[lo])
        means.append(freqs[i])
        sds.append(max(hwhm / np.sqrt(2.0 * np.log(2.0)), df))
        heights.append(P[i])
    n_fill = Q - len(means)
    heights = np.asarray(heights, float)
    share = 0.9 if n_fill and heights.size else 1.0
    weights = list(share * var * heights / heights.sum()) if heights.size else []
    weights += [(1.0 - share if heights.size else 1.0) * var / n_fill] * n_fill if n_fill else []
    means += [0.0] * n_fill
    sds += [1.0 / R] * n_fill
    return {
        "weights": np.asarray(weights, float),
        "means": np.asarray(means, float)[:, None],
        "variances": np.square(np.asarray(sds, float))[:, None],
    }
