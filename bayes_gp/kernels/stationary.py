r"""Stationary covariance functions (R&W §4.2.1; PRML §6.2, §6.4).

All kernels here are normalised so that :math:`k(0) = 1`; multiply by :math:`\eta^2` for a process
variance. :math:`r` is the *scaled* distance of :mod:`bayes_gp.kernels.metrics`, so the formulas are
written with :math:`\ell = 1`; an isotropic metric gives :math:`r = |x - x'| / \ell`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from scipy.special import gammaln as _np_gammaln

from bayes_gp._validation import (
    as_parameter,
    check_in_interval,
    check_integer_in,
    check_positive,
    constant_value,
    fixed_scalar,
)
from bayes_gp.kernels.base import Stationary, safe_sqrt
from bayes_gp.kernels.metrics import Metric

__all__ = [
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
]


def _matern_unit_psd(nu: float, w, D: int):
    r"""Matérn spectral density with :math:`\ell = 1` in angular frequency (R&W eq. 4.15).

    .. math::
       S(\omega) = \frac{2^D \pi^{D/2}\Gamma(\nu + D/2)(2\nu)^\nu}{\Gamma(\nu)}
                   \left(2\nu + \omega^2\right)^{-(\nu + D/2)}
    """
    log_c = (
        D * np.log(2.0)
        + 0.5 * D * np.log(np.pi)
        + _np_gammaln(nu + D / 2.0)
        + nu * np.log(2.0 * nu)
        - _np_gammaln(nu)
    )
    return np.exp(log_c) * pt.power(2.0 * nu + pt.square(w), -(nu + D / 2.0))


def _refuse_infinite_nu(nu) -> None:
    """``nu = inf`` is the squared exponential, R&W eq. (4.14): say so instead of a generic
    'must be finite'."""
    value = constant_value(nu)
    if value is not None and value.ndim == 0 and np.isposinf(value):
        raise ValueError(
            "`nu` = inf: as nu -> infinity the Matérn kernel tends to the squared exponential "
            "(R&W eq. 4.14), which has its own class: use ExpQuad(input_dim, ls=...) (the "
            "catalogue name 'expquad' in a model) instead"
        )


class ExpQuad(Stationary, pm.gp.cov.ExpQuad):
    r"""Squared exponential (Gaussian, RBF) kernel, R&W eq. (4.9), PRML eq. (6.23).

    .. math:: k(r) = \exp\left(-\frac{r^2}{2}\right), \qquad r = |x - x'|/\ell

    Spectral density (R&W §4.2.1): :math:`S(\omega) = (2\pi)^{D/2}\ell^D e^{-\ell^2\omega^2/2}`.
    Reuses PyMC's ``ExpQuad`` formula; distances are exact and any metric is allowed.
    """

    smoothness = np.inf

    def _unit_spectral_density(self, w, D):
        return (2.0 * np.pi) ** (D / 2.0) * pt.exp(-0.5 * pt.square(w))


class Matern52(Stationary, pm.gp.cov.Matern52):
    r"""Matérn kernel with :math:`\nu = 5/2`, R&W eq. (4.17b).

    .. math:: k(r) = \left(1 + \sqrt{5}r + \tfrac{5}{3}r^2\right)\exp(-\sqrt{5}r)
    """

    smoothness = 2.5

    def _unit_spectral_density(self, w, D):
        return _matern_unit_psd(2.5, w, D)


class Matern32(Stationary, pm.gp.cov.Matern32):
    r"""Matérn kernel with :math:`\nu = 3/2`, R&W eq. (4.17a).

    .. math:: k(r) = \left(1 + \sqrt{3}r\right)\exp(-\sqrt{3}r)
    """

    smoothness = 1.5

    def _unit_spectral_density(self, w, D):
        return _matern_unit_psd(1.5, w, D)


class Matern12(Stationary, pm.gp.cov.Matern12):
    r"""Matérn kernel with :math:`\nu = 1/2`: the exponential / Ornstein–Uhlenbeck kernel (R&W §4.2.1).

    .. math:: k(r) = \exp(-r)

    Unlike PyMC's ``Matern12`` this one has a spectral density, so it works with ``pm.gp.HSGP``.
    """

    smoothness = 0.5

    def _unit_spectral_density(self, w, D):
        return _matern_unit_psd(0.5, w, D)


class Exponential(Matern12):
    r"""Exponential kernel of R&W §4.2.1, :math:`k(r) = \exp(-r)` with :math:`r = |x - x'|/\ell`.

    Identical to :class:`Matern12`. Note that PyMC's ``pm.gp.cov.Exponential`` is
    :math:`\exp(-r/2)`: its length-scale is half of this one's (``pm Exponential(ls=l)`` equals
    ``bayes_gp Exponential(ls=2*l)``).
    """


class Matern(Stationary):
    r"""Matérn kernel for any :math:`\nu > 0`, R&W eq. (4.14).

    .. math::
       k(r) = \frac{2^{1-\nu}}{\Gamma(\nu)}\left(\sqrt{2\nu}\,r\right)^\nu
              K_\nu\!\left(\sqrt{2\nu}\,r\right), \qquad k(0) = 1

    For half-integer :math:`\nu = p + 1/2` the closed form R&W eq. (4.16) is used
    (``method="auto"``), a product of :math:`\exp(-\sqrt{2\nu} r)` and a polynomial of degree
    :math:`p`:

    .. math::
       k(r) = e^{-\sqrt{2\nu}r}\frac{\Gamma(p+1)}{\Gamma(2p+1)}
              \sum_{i=0}^{p}\frac{(p+i)!}{i!(p-i)!}\left(\sqrt{8\nu}\,r\right)^{p-i}

    Spectral density: R&W eq. (4.15).

    Parameters
    ----------
    nu : float
        Smoothness, a fixed positive number (PyTensor's Bessel function has no derivative in its
        order, so :math:`\nu` cannot be a random variable).
    method : {"auto", "bessel", "closed"}
        ``"bessel"`` forces the general path through :math:`K_\nu`; ``"closed"`` requires a
        half-integer :math:`\nu`.

    Notes
    -----
    The Bessel path compiles in PyTensor's numba, C and Python backends but not in JAX, which has
    no :math:`K_\nu` of real order; half-integer :math:`\nu` (closed form) works everywhere.
    """

    def __init__(
        self,
        input_dim: int,
        nu: float,
        ls=None,
        ls_inv=None,
        active_dims: Sequence[int] | None = None,
        *,
        metric: Metric | None = None,
        method: str = "auto",
    ):
        _refuse_infinite_nu(nu)
        known = fixed_scalar("nu", nu)
        check_positive("nu", known)
        if method not in ("auto", "bessel", "closed"):
            raise ValueError(f"`method` must be 'auto', 'bessel' or 'closed', got {method!r}")
        half_integer = (known - 0.5).is_integer()
        if method == "closed" and not half_integer:
            raise ValueError(f"`method='closed'` needs a half-integer `nu`, got {known}")
        super().__init__(input_dim, ls, ls_inv, active_dims, metric=metric)
        self.nu = known
        self.method = "closed" if (method == "auto" and half_integer) else method
        if method == "auto" and not half_integer:
            self.method = "bessel"

    @property
    def smoothness(self) -> float:  # type: ignore[override]
        """:math:`\nu`."""
        return self.nu

    def full_from_distance(self, dist, squared=False):
        r = safe_sqrt(dist) if squared else dist
        nu = self.nu
        z = np.sqrt(2.0 * nu) * r
        if self.method == "closed":
            p = round(nu - 0.5)
            poly = 0.0
            for i in range(p + 1):
                coef = np.exp(_np_gammaln(p + i + 1) - _np_gammaln(i + 1) - _np_gammaln(p - i + 1))
                poly = poly + coef * pt.power(np.sqrt(8.0 * nu) * r, p - i)
            pref = np.exp(_np_gammaln(p + 1) - _np_gammaln(2 * p + 1))
            return pref * poly * pt.exp(-z)
        positive = pt.gt(z, 0.0)
        zs = pt.switch(positive, z, 1.0)
        log_k = (
            (1.0 - nu) * np.log(2.0)
            - _np_gammaln(nu)
            + nu * pt.log(zs)
            + pt.log(pt.kve(nu, zs))
            - zs
        )
        return pt.switch(positive, pt.exp(log_k), 1.0)

    def _unit_spectral_density(self, w, D):
        return _matern_unit_psd(self.nu, w, D)


class GammaExponential(Stationary):
    r"""γ-exponential kernel, R&W eq. (4.18).

    .. math:: k(r) = \exp\left(-r^\gamma\right), \qquad 0 < \gamma \le 2

    :math:`\gamma = 2` is the squared exponential with length-scale :math:`\ell/\sqrt{2}`;
    :math:`\gamma = 1` the exponential kernel. Valid (positive semi-definite) only for
    :math:`\gamma \in (0, 2]`. No closed-form spectral density for general :math:`\gamma`.
    """

    def __init__(
        self,
        input_dim: int,
        gamma,
        ls=None,
        ls_inv=None,
        active_dims: Sequence[int] | None = None,
        *,
        metric: Metric | None = None,
    ):
        check_in_interval("gamma", gamma, 0.0, 2.0, low_open=True, high_open=False)
        super().__init__(input_dim, ls, ls_inv, active_dims, metric=metric)
        self.gamma = as_parameter(gamma)

    def full_from_distance(self, dist, squared=False):
        r2 = dist if squared else pt.square(dist)
        positive = pt.gt(r2, 0.0)
        r_gamma = pt.switch(positive, pt.power(pt.switch(positive, r2, 1.0), 0.5 * self.gamma), 0.0)
        return pt.exp(-r_gamma)


class RatQuad(Stationary, pm.gp.cov.RatQuad):
    r"""Rational quadratic kernel, R&W eq. (4.19).

    .. math:: k(r) = \left(1 + \frac{r^2}{2\alpha}\right)^{-\alpha}, \qquad \alpha > 0

    A scale mixture of squared exponentials; :math:`\alpha\to\infty` gives the SE kernel.
    Spectral density (Gamma mixture of SE densities):

    .. math::
       S(\omega) = \frac{2(2\pi\alpha)^{D/2}}{\Gamma(\alpha)}
                   \left(\frac{z}{2}\right)^{\alpha - D/2} K_{\alpha - D/2}(z),
       \qquad z = \sqrt{2\alpha}\,\omega

    (the spectral density needs a fixed ``alpha`` for gradients, as :math:`K_\nu` has no derivative
    in :math:`\nu`).

    Evaluated as :math:`\exp(-\alpha\,\mathrm{log1p}(r^2/2\alpha))`, not as PyMC's
    ``(1 + r^2/2α)**(-α)``: the power form rounds :math:`1 + r^2/2\alpha` first, an error that
    the exponent multiplies by :math:`\alpha`. Type-II fits drive :math:`\alpha` towards the SE
    limit (the Mauna Loa ML-II fit ends near :math:`\alpha = 10^{10}`), where the power form's
    log marginal likelihood jumps by :math:`10^{-4}` nats between neighbouring points: an
    optimiser then settles on a rounding spike, and whether the end point is certified depended
    on the CPU's and the compiled code's rounding (issue 35). The log1p form is smooth there and
    equals the SE kernel to rounding as :math:`\alpha \to \infty`.
    """

    def __init__(
        self,
        input_dim: int,
        alpha,
        ls=None,
        ls_inv=None,
        active_dims: Sequence[int] | None = None,
        *,
        metric: Metric | None = None,
    ):
        check_positive("alpha", alpha)
        Stationary.__init__(self, input_dim, ls, ls_inv, active_dims, metric=metric)
        self.alpha = as_parameter(alpha)

    def full_from_distance(self, dist, squared=False):
        r2 = dist if squared else pt.square(dist)
        return pt.exp(-self.alpha * pt.log1p(0.5 * r2 / self.alpha))

    def _unit_spectral_density(self, w, D):
        alpha = self.alpha
        nu = alpha - D / 2.0
        z = pt.sqrt(2.0 * alpha) * w
        coeff = 2.0 * pt.power(2.0 * np.pi * alpha, D / 2.0) / pt.gamma(alpha)
        zs = pt.switch(pt.gt(z, 0.0), z, 1.0)
        term = pt.exp(nu * pt.log(zs / 2.0) + pt.log(pt.kve(nu, zs)) - zs)
        return coeff * pt.switch(pt.gt(z, 0.0), term, pt.gamma(nu) / 2.0)


class PiecewisePolynomial(Stationary):
    r"""Compactly supported piecewise-polynomial kernel :math:`k_{pp D,q}`, R&W eq. (4.21).

    With :math:`j = \lfloor D/2\rfloor + q + 1` and :math:`(\cdot)_+ = \max(\cdot, 0)`:

    .. math::
       k_{ppD,0}(r) &= (1-r)_+^{j} \\
       k_{ppD,1}(r) &= (1-r)_+^{j+1}\left((j+1)r + 1\right) \\
       k_{ppD,2}(r) &= (1-r)_+^{j+2}\left((j^2+4j+3)r^2 + (3j+6)r + 3\right)/3 \\
       k_{ppD,3}(r) &= (1-r)_+^{j+3}\left((j^3+9j^2+23j+15)r^3 + (6j^2+36j+45)r^2
                       + (15j+45)r + 15\right)/15

    :math:`k` is exactly 0 for :math:`r \ge 1` (distance beyond :math:`\ell`), so Gram matrices are
    sparse; it is :math:`2q` times continuously differentiable and positive definite in
    :math:`\mathbb{R}^{D'}` for every :math:`D' \le D`.

    Parameters
    ----------
    q : int
        Smoothness, 0..3.
    D : int, optional
        Dimension the kernel is built for (default: the number of active dimensions). Using it on
        more active dimensions than ``D`` raises ``ValueError``: it would not be positive definite.
    """

    def __init__(
        self,
        input_dim: int,
        ls=None,
        q: int = 2,
        ls_inv=None,
        active_dims: Sequence[int] | None = None,
        *,
        D: int | None = None,
        metric: Metric | None = None,
    ):
        q = check_integer_in("q", q, range(0, 4))
        super().__init__(input_dim, ls, ls_inv, active_dims, metric=metric)
        D = self.n_dims if D is None else check_integer_in("D", D, range(1, 1 << 31))
        if D < self.n_dims:
            raise ValueError(
                f"`D`={D}: k_pp{D},{q} is only positive definite in up to {D} dimension(s), but the "
                f"kernel has {self.n_dims} active dimension(s); build it with D={self.n_dims}"
            )
        self.q = q
        self.D = D
        self.j = D // 2 + q + 1

    def full_from_distance(self, dist, squared=False):
        r = safe_sqrt(dist) if squared else dist
        j, q = self.j, self.q
        t = pt.maximum(1.0 - r, 0.0)
        if q == 0:
            poly = 1.0
        elif q == 1:
            poly = (j + 1) * r + 1.0
        elif q == 2:
            poly = ((j**2 + 4 * j + 3) * r**2 + (3 * j + 6) * r + 3.0) / 3.0
        else:
            poly = (
                (j**3 + 9 * j**2 + 23 * j + 15) * r**3
                + (6 * j**2 + 36 * j + 45) * r**2
                + (15 * j + 45) * r
                + 15.0
            ) / 15.0
        return pt.power(t, j + q) * poly


class BesselOscillatory(Stationary):
    r"""Oscillatory Bessel kernel of Yaglom (R&W §4.2.1), normalised to :math:`k(0) = 1`.

    .. math::
       k(r) = c\,r^{-\nu} J_\nu(r) = \Gamma(\nu+1)\left(\frac{2}{r}\right)^{\nu} J_\nu(r),
       \qquad \nu \ge \frac{D-2}{2}

    where :math:`r = \alpha|x - x'|` with :math:`\alpha = 1/\ell`. A damped oscillation; valid in
    :math:`D` dimensions only for :math:`\nu \ge (D-2)/2`. Its spectral density is band-limited:
    :math:`S(\omega) \propto (1 - \omega^2)_+^{\nu - D/2}`.

    Parameters
    ----------
    nu : float
        Bessel order, fixed (no derivative in the order is available).

    Notes
    -----
    Not available in PyTensor's JAX backend (JAX has no :math:`J_\nu`); numba, C and Python work.
    """

    def __init__(
        self,
        input_dim: int,
        nu: float,
        ls=None,
        ls_inv=None,
        active_dims: Sequence[int] | None = None,
        *,
        metric: Metric | None = None,
    ):
        _refuse_infinite_nu(nu)
        known = fixed_scalar("nu", nu)
        super().__init__(input_dim, ls, ls_inv, active_dims, metric=metric)
        if known < (self.n_dims - 2) / 2.0 or known < 0:
            raise ValueError(
                f"`nu`={known}: the Bessel kernel is valid in {self.n_dims} dimension(s) only "
                f"for nu >= {max((self.n_dims - 2) / 2.0, 0.0)}"
            )
        self.nu = known

    def full_from_distance(self, dist, squared=False):
        r2 = dist if squared else pt.square(dist)
        r = safe_sqrt(r2)
        nu = self.nu
        small = pt.lt(r, 1e-3)
        # Series of Gamma(nu+1) (2/r)^nu J_nu(r) about 0 (A&S 9.1.10), exact to rounding for r < 1e-3.
        series = 1.0 - r2 / (4.0 * (nu + 1.0)) + pt.square(r2) / (32.0 * (nu + 1.0) * (nu + 2.0))
        rs = pt.switch(small, 1.0, r)
        direct = pt.exp(_np_gammaln(nu + 1.0) + nu * pt.log(2.0 / rs)) * pt.jv(nu, rs)
        return pt.switch(small, series, direct)

    def _unit_spectral_density(self, w, D):
        a = self.nu - D / 2.0
        if a <= -1.0:
            raise NotImplementedError(
                "at nu = (D-2)/2 the spectral measure of the Bessel kernel is concentrated on a "
                "sphere and has no density"
            )
        log_c = (
            D * np.log(2.0 * np.pi)
            + _np_gammaln(self.nu + 1.0)
            - 0.5 * D * np.log(np.pi)
            - _np_gammaln(a + 1.0)
        )
        inside = pt.lt(w, 1.0)
        base = pt.switch(inside, 1.0 - pt.square(w), 1.0)
        return pt.switch(inside, np.exp(log_c) * pt.power(base, a), 0.0)
