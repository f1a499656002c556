r"""State-space representations of 1-D stationary kernels: the terms of the O(n) exact GP.

A stationary kernel on the line is a *state-space term* when it is the covariance of
:math:`f(t) = h^\top s(t)` for a :math:`J`-dimensional stationary linear SDE
:math:`\mathrm{d}s = F s\,\mathrm{d}t + L\,\mathrm{d}\beta` (Hartikainen & Särkkä 2010; the
closed forms for Matérn and SHO kernels also in Jordán, Eyheramendy & Buchner 2021):

.. math::
   k(\tau) = h^\top e^{F\tau} P_\infty h \quad (\tau \ge 0), \qquad
   \operatorname{cov}(s(t)) = P_\infty,

so every term is given by three things: the observation vector :math:`h`, the stationary state
covariance :math:`P_\infty` and the transition matrix :math:`A(\Delta) = e^{F\Delta}` over a gap
:math:`\Delta \ge 0`, each in closed form here (no matrix exponential at run time). The Gram
matrix of sorted inputs is then *quasiseparable* (semiseparable of rank :math:`J`):

.. math::
   K_{ij} = h^\top A(t_i - t_{i-1}) \cdots A(t_{j+1} - t_j)\, P_\infty h, \qquad i > j,

which :mod:`bayes_gp.solvers.quasisep` factorises in :math:`O(nJ^3)`.

The terms (state dimension :math:`J`, number of transition basis matrices :math:`K`):

* :class:`MaternTerm`, :math:`\nu = p + \tfrac12` (R&W eq. 4.16; :math:`\nu = 1/2, 3/2, 5/2`
  are eq. 4.17): :math:`J = K = p + 1`;
* :class:`CosineTerm`, :math:`\cos(2\pi\tau/T)`: :math:`J = K = 2`;
* :class:`SHOTerm`, the damped driven oscillator (Foreman-Mackey et al. 2017): :math:`J = K = 2`;
* :class:`ConstantTerm`, :math:`c`: :math:`J = K = 1`;
* :class:`TermSum` (``a + b``): block-diagonal states, :math:`J = J_a + J_b`;
* :class:`TermProduct` (``a * b``): Kronecker-product states, :math:`J = J_aJ_b`.

A sum of covariances is the covariance of the sum of independent processes (stack the states); a
product is that of the product of independent processes, whose state is the Kronecker product:
:math:`k_1k_2 = (h_1\otimes h_2)^\top (A_1\otimes A_2)(P_1\otimes P_2)(h_1\otimes h_2)` by the
mixed-product rule, and :math:`e^{(F_1\oplus F_2)\tau} = e^{F_1\tau}\otimes e^{F_2\tau}`
(Solin 2016; tinygp's ``quasisep`` kernels). Hyperparameters are numbers or PyTensor
variables (PyMC random variables); every method takes the array namespace ``xp`` (:data:`NP` or
:data:`PT`) so the same formulas build NumPy arrays (predictions) and PyTensor graphs (the
likelihood and its gradient).

:func:`to_term` maps bayes_gp / PyMC kernel objects (``eta**2 * Matern52(1, ls=ell)``, sums and
products, ``pm.gp.cov.Cosine``, constants, the spectral mixture with Matérn envelopes
:class:`~bayes_gp.kernels.spectral_mixture.MaternSpectralMixture` as
:math:`\sum_q` ``MaternTerm * CosineTerm``) onto terms; :func:`representable` says whether it can.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import warnings
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.graph.basic import Constant as _PTConstant
from pytensor.graph.basic import Variable

from bayes_gp.kernels.base import Kernel, Substituted

__all__ = [
    "NP",
    "PT",
    "StateSpaceTerm",
    "MaternTerm",
    "CosineTerm",
    "SHOTerm",
    "ConstantTerm",
    "TermSum",
    "TermProduct",
    "StateSpaceKernel",
    "to_term",
    "representable",
    "kernel_column",
    "term_leaves",
    "with_leaves",
]

#: NumPy namespace for the term formulas (predictions).
NP = SimpleNamespace(
    name="numpy",
    exp=np.exp,
    expm1=np.expm1,
    cos=np.cos,
    sin=np.sin,
    sqrt=np.sqrt,
    abs=np.abs,
    where=np.where,
    stack=np.stack,
    concatenate=np.concatenate,
    zeros=np.zeros,
    asarray=lambda v: np.asarray(v, dtype=float),
)
#: PyTensor namespace for the term formulas (the likelihood graph).
PT = SimpleNamespace(
    name="pytensor",
    exp=pt.exp,
    expm1=pt.expm1,
    cos=pt.cos,
    sin=pt.sin,
    sqrt=pt.sqrt,
    abs=pt.abs,
    where=lambda cond, a, b: pt.switch(
        np.asarray(cond) if isinstance(cond, bool | np.bool_) else cond, a, b
    ),
    stack=pt.stack,
    concatenate=pt.concatenate,
    zeros=pt.zeros,
    asarray=lambda v: pt.as_tensor_variable(v).astype("float64"),
)


def _param(name: str, value: Any, *, positive: bool = True) -> Any:
    """A hyperparameter: a float when known at build time (checked), else the PyTensor scalar."""
    if isinstance(value, _PTConstant):
        value = np.asarray(value.data)
    if isinstance(value, Variable):
        if value.ndim == 1 and value.type.shape == (1,):
            value = value[0]
        if value.ndim != 0:
            raise ValueError(f"`{name}` must be a scalar, got a {value.ndim}-d tensor")
        return value
    arr = np.asarray(value, dtype=float)
    if arr.size != 1:
        raise ValueError(f"`{name}` must be a scalar, got shape {arr.shape}")
    v = float(arr.reshape(()))
    if not np.isfinite(v) or (positive and v <= 0):
        raise ValueError(
            f"`{name}` must be {'strictly positive and ' if positive else ''}finite, got {v}"
        )
    return v


def _check_numeric(term: StateSpaceTerm, xp) -> None:
    if xp is NP:
        for leaf in term_leaves(term):
            if isinstance(leaf, Variable):
                raise TypeError(
                    f"{type(term).__name__} has a PyTensor hyperparameter ({leaf}); evaluate it "
                    "first (with_leaves) to use the NumPy formulas"
                )


def _bmat(blocks: list[list[Any]], xp) -> Any:
    """Assemble a (possibly batched, leading axes) block matrix from a nested list."""
    return xp.concatenate([xp.concatenate(row, axis=-1) for row in blocks], axis=-2)


class StateSpaceTerm:
    r"""Base class: a stationary 1-D kernel with a :math:`J`-dimensional state-space form.

    Subclasses give :attr:`dim` (:math:`J`), :meth:`stationary_covariance`
    (:math:`P_\infty`), :meth:`observation` (:math:`h`), the transition
    :math:`A(\Delta) = e^{F\Delta} = \sum_{k<K} c_k(\Delta) B_k` as per-gap scalar coefficients
    (:meth:`transition_coefficients`, shape ``(n, K)``) times :math:`K` matrices
    (:meth:`transition_basis`, shape ``(K, J, J)``, which may depend on the hyperparameters but
    not on :math:`\Delta`), and :meth:`value` (the closed-form :math:`k(\tau)`, for dense
    references). The split keeps the per-gap arrays the likelihood differentiates at
    :math:`nK` numbers instead of :math:`nJ^2`. ``+`` and ``*`` build :class:`TermSum` and
    :class:`TermProduct`; numbers and PyTensor scalars become :class:`ConstantTerm`.
    """

    _leaf_fields: tuple[str, ...] = ()

    @property
    def dim(self) -> int:
        raise NotImplementedError

    @property
    def n_basis(self) -> int:
        """:math:`K`, the number of transition basis matrices."""
        raise NotImplementedError

    def stationary_covariance(self, xp=NP):
        raise NotImplementedError

    def observation(self, xp=NP):
        raise NotImplementedError

    def transition_coefficients(self, dt, xp=NP):
        raise NotImplementedError

    def transition_basis(self, xp=NP):
        raise NotImplementedError

    def transition(self, dt, xp=NP):
        r""":math:`A(\Delta_i) = \sum_k c_k(\Delta_i) B_k`, shape ``(n, J, J)``."""
        c = self.transition_coefficients(dt, xp)
        B = self.transition_basis(xp)
        return (c[:, :, None, None] * B[None, :, :, :]).sum(axis=1)

    def value(self, tau, xp=NP):
        raise NotImplementedError

    def __add__(self, other) -> TermSum:
        return TermSum(self, _as_term(other))

    def __radd__(self, other) -> TermSum:
        return TermSum(_as_term(other), self)

    def __mul__(self, other) -> TermProduct:
        return TermProduct(self, _as_term(other))

    def __rmul__(self, other) -> TermProduct:
        return TermProduct(_as_term(other), self)


def _as_term(value) -> StateSpaceTerm:
    if isinstance(value, StateSpaceTerm):
        return value
    return ConstantTerm(value)


# --------------------------------------------------------------------------------- Matérn
@functools.cache
def _matern_constants(p: int) -> tuple[list[np.ndarray], np.ndarray, list[Fraction]]:
    r"""``(N^k for k < J, P, q)`` of the unit Matérn-:math:`(p+\tfrac12)` state space.

    With :math:`u = \lambda\tau` the kernel is :math:`\kappa(u) = e^{-u}Q(u)`,
    :math:`Q(u) = \sum_m q_m u^m`, :math:`q_m = \frac{p!}{(2p)!}\frac{(2p-m)!}{m!(p-m)!}2^m`
    (R&W eq. 4.16 with :math:`\sqrt{2\nu}r = u`). The state is
    :math:`(g, g', \dots, g^{(p)})` of :math:`g(u)`, whose SDE has the characteristic polynomial
    :math:`(s+1)^J` (its spectral density is :math:`\propto (1+\omega^2)^{-J}`): companion :math:`F` with last row
    :math:`-\binom{J}{k}`, :math:`N = F + I` nilpotent, so
    :math:`e^{Fu} = e^{-u}\sum_{k<J} u^k N^k/k!`. The stationary covariance of the derivatives is
    :math:`P_{ab} = (-1)^b\kappa^{(a+b)}(0)` (zero for odd :math:`a+b`).
    """
    J = p + 1
    q = [
        Fraction(math.factorial(p) * math.factorial(2 * p - m) * 2**m)
        / (math.factorial(2 * p) * math.factorial(m) * math.factorial(p - m))
        for m in range(J)
    ]

    def kappa_derivative(j: int) -> Fraction:  # Leibniz on e^{-u} Q(u) at u = 0
        return sum(
            (
                Fraction(math.comb(j, k)) * math.factorial(k) * q[k] * (-1) ** (j - k)
                for k in range(min(j, p) + 1)
            ),
            Fraction(0),
        )

    P = np.zeros((J, J))
    for a in range(J):
        for b in range(J):
            v = kappa_derivative(a + b)
            if (a + b) % 2:
                assert v == 0, "odd derivatives of a Matérn kernel vanish at 0"
            P[a, b] = float((-1) ** b * v)
    F = np.zeros((J, J))
    F[np.arange(J - 1), np.arange(1, J)] = 1.0
    F[J - 1] = [-math.comb(J, k) for k in range(J)]
    N = F + np.eye(J)
    powers = [np.eye(J)]
    for _ in range(1, J):
        powers.append(powers[-1] @ N)
    return powers, P, q


@dataclasses.dataclass(frozen=True, eq=False)
class MaternTerm(StateSpaceTerm):
    r"""Matérn kernel of half-integer smoothness :math:`\nu = p + \tfrac12` (R&W eq. 4.16).

    .. math::
       k(\tau) = \eta^2 e^{-u}\frac{p!}{(2p)!}\sum_{i=0}^{p}\frac{(p+i)!}{i!(p-i)!}(2u)^{p-i},
       \qquad u = \frac{\sqrt{2\nu}\,|\tau|}{\ell}

    (:math:`\nu = 1/2`: :math:`\eta^2 e^{-u}`; :math:`3/2`: :math:`\eta^2(1+u)e^{-u}`;
    :math:`5/2`: :math:`\eta^2(1+u+u^2/3)e^{-u}`, R&W eq. 4.17). State: the scaled derivatives
    :math:`f^{(a)}/\lambda^a`, :math:`\lambda = \sqrt{2\nu}/\ell`, :math:`a = 0..p`
    (Hartikainen & Särkkä 2010), so :math:`J = p + 1`, :math:`h = e_0`,
    :math:`P_\infty = \eta^2 P` and :math:`A(\Delta) = e^{-\lambda\Delta}\sum_{k<J}
    (\lambda\Delta)^k N^k/k!` with constant matrices (:func:`_matern_constants`): exact for every
    :math:`\nu = p + 1/2`, not a limit.

    Parameters
    ----------
    nu : float
        Smoothness, a half-integer ``0.5, 1.5, 2.5, ...``.
    eta : float or PyTensor scalar
        Amplitude :math:`\eta` (process standard deviation).
    ls : float or PyTensor scalar
        Length-scale :math:`\ell`.
    """

    nu: float = 1.5
    eta: Any = 1.0
    ls: Any = 1.0
    _leaf_fields = ("eta", "ls")

    def __post_init__(self):
        nu = float(self.nu)
        if not (nu > 0 and (nu - 0.5).is_integer()):
            raise ValueError(
                f"`nu`={self.nu}: only half-integer Matérn kernels (nu = 0.5, 1.5, 2.5, ...) "
                "have a finite-dimensional state-space form"
            )
        object.__setattr__(self, "nu", nu)
        object.__setattr__(self, "eta", _param("eta", self.eta))
        object.__setattr__(self, "ls", _param("ls", self.ls))

    @property
    def p(self) -> int:
        return round(self.nu - 0.5)

    @property
    def dim(self) -> int:
        return self.p + 1

    @property
    def n_basis(self) -> int:
        return self.p + 1

    def _lam(self):
        return math.sqrt(2.0 * self.nu) / self.ls

    def stationary_covariance(self, xp=NP):
        _check_numeric(self, xp)
        return xp.asarray(_matern_constants(self.p)[1]) * self.eta**2

    def observation(self, xp=NP):
        h = np.zeros(self.dim)
        h[0] = 1.0
        return xp.asarray(h)

    def transition_coefficients(self, dt, xp=NP):
        _check_numeric(self, xp)
        u = self._lam() * xp.asarray(dt)
        coef = [xp.exp(-u)]
        for k in range(1, self.dim):
            coef.append(coef[-1] * u / k)
        return xp.stack(coef, axis=-1)

    def transition_basis(self, xp=NP):
        return xp.asarray(np.stack(_matern_constants(self.p)[0]))

    def value(self, tau, xp=NP):
        _check_numeric(self, xp)
        q = _matern_constants(self.p)[2]
        u = self._lam() * xp.abs(xp.asarray(tau))
        poly = 0.0
        for m in reversed(range(self.dim)):
            poly = poly * u + float(q[m])
        return self.eta**2 * poly * xp.exp(-u)


# ------------------------------------------------------------------------------ cosine
@dataclasses.dataclass(frozen=True, eq=False)
class CosineTerm(StateSpaceTerm):
    r"""Cosine kernel :math:`k(\tau) = \cos(\omega\tau)`, :math:`\omega = 2\pi/T`.

    PyMC's ``pm.gp.cov.Cosine(1, ls=T)`` (its code: :math:`\cos(2\pi|\tau|/\ell)`). State: a
    rotating 2-vector, :math:`F = \begin{pmatrix}0 & -\omega\\ \omega & 0\end{pmatrix}`,
    :math:`P_\infty = I`, :math:`h = e_0`, :math:`A(\Delta)` the rotation by
    :math:`\omega\Delta`. Unit variance:
    scale it with a product (``MaternTerm(...) * CosineTerm(T)`` or ``c * CosineTerm(T)``).

    Parameters
    ----------
    period : float or PyTensor scalar
        Period :math:`T`.
    """

    period: Any = 1.0
    _leaf_fields = ("period",)

    def __post_init__(self):
        object.__setattr__(self, "period", _param("period", self.period))

    @property
    def dim(self) -> int:
        return 2

    @property
    def n_basis(self) -> int:
        return 2

    def stationary_covariance(self, xp=NP):
        return xp.asarray(np.eye(2))

    def observation(self, xp=NP):
        return xp.asarray(np.array([1.0, 0.0]))

    def transition_coefficients(self, dt, xp=NP):
        _check_numeric(self, xp)
        w = 2.0 * math.pi / self.period * xp.asarray(dt)
        return xp.stack([xp.cos(w), xp.sin(w)], axis=-1)

    def transition_basis(self, xp=NP):
        return xp.asarray(np.array([np.eye(2), [[0.0, -1.0], [1.0, 0.0]]]))

    def value(self, tau, xp=NP):
        _check_numeric(self, xp)
        return xp.cos(2.0 * math.pi / self.period * xp.asarray(tau))


# --------------------------------------------------------------------------------- SHOTerm
_SERIES_Z = 1e-3  # |eta^2 tau^2| below which the power series is used (error < 3e-17)


def _sho_cs(dt, w0, Q, xp):
    r""":math:`(e^{-\alpha\Delta}C, e^{-\alpha\Delta}S)` with :math:`C = \cos(\eta\Delta)`,
    :math:`S = \sin(\eta\Delta)/\eta`, :math:`\alpha = \omega_0/2Q`,
    :math:`\eta^2 = \omega_0^2 - \alpha^2`; :math:`\cosh`/:math:`\sinh` when :math:`\eta^2 < 0`
    (over-damped), the power series in :math:`z = \eta^2\Delta^2` near :math:`z = 0`. Each branch
    sees only safe arguments, so its gradient is finite where it is not selected."""
    dt = xp.asarray(dt)
    alpha = w0 / (2.0 * Q)
    eta2 = w0**2 - alpha**2
    z = eta2 * dt**2
    ed = xp.exp(-alpha * dt)
    small = xp.abs(z) < _SERIES_Z
    zs = xp.where(small, z, 0.0)
    c_ser = ed * (1.0 - zs / 2.0 + zs**2 / 24.0 - zs**3 / 720.0)
    s_ser = ed * dt * (1.0 - zs / 6.0 + zs**2 / 120.0 - zs**3 / 5040.0)
    e = xp.sqrt(xp.where(eta2 > 0, eta2, w0**2))
    c_trig = ed * xp.cos(e * dt)
    s_trig = ed * xp.sin(e * dt) / e
    g = xp.sqrt(xp.where(eta2 < 0, -eta2, alpha**2 / 4.0))  # 0 < g < alpha
    e1 = xp.exp(-(alpha - g) * dt)
    c_hyp = 0.5 * (e1 + xp.exp(-(alpha + g) * dt))
    s_hyp = e1 * (-xp.expm1(-2.0 * g * dt)) / (2.0 * g)
    pos = z > 0
    c = xp.where(small, c_ser, xp.where(pos, c_trig, c_hyp))
    s = xp.where(small, s_ser, xp.where(pos, s_trig, s_hyp))
    return c, s, alpha


@dataclasses.dataclass(frozen=True, eq=False)
class SHOTerm(StateSpaceTerm):
    r"""Stochastically driven damped simple harmonic oscillator (Foreman-Mackey et al. 2017;
    celerite2's ``SHOTerm`` and tinygp's ``quasisep.SHO`` with :math:`\sigma^2 = S_0\omega_0 Q`).

    .. math::
       k(\tau) = \sigma^2 e^{-\alpha\tau}\left(\cos(\eta\tau) + \frac{\alpha}{\eta}
       \sin(\eta\tau)\right), \qquad \alpha = \frac{\omega_0}{2Q},\quad
       \eta = \sqrt{\omega_0^2 - \alpha^2}

    for :math:`Q > 1/2`; :math:`\cosh`/:math:`\sinh` of :math:`\sqrt{\alpha^2-\omega_0^2}\,\tau`
    for :math:`Q < 1/2` and :math:`\sigma^2(1+\alpha\tau)e^{-\alpha\tau}` at :math:`Q = 1/2`,
    all exact (no ``eps``). State :math:`(f, f')`:
    :math:`F = \begin{pmatrix}0 & 1\\ -\omega_0^2 & -2\alpha\end{pmatrix}`,
    :math:`P_\infty = \sigma^2\operatorname{diag}(1, \omega_0^2)`,
    :math:`e^{F\Delta} = e^{-\alpha\Delta}\left(\cos(\eta\Delta) I + \frac{\sin(\eta\Delta)}{\eta}
    (F + \alpha I)\right)` since :math:`(F + \alpha I)^2 = -\eta^2 I`.

    Parameters
    ----------
    sigma : float or PyTensor scalar
        Process standard deviation :math:`\sigma`.
    w0 : float or PyTensor scalar
        Undamped angular frequency :math:`\omega_0`.
    Q : float or PyTensor scalar
        Quality factor.
    """

    sigma: Any = 1.0
    w0: Any = 1.0
    Q: Any = 1.0
    _leaf_fields = ("sigma", "w0", "Q")

    def __post_init__(self):
        for name in self._leaf_fields:
            object.__setattr__(self, name, _param(name, getattr(self, name)))

    @property
    def dim(self) -> int:
        return 2

    @property
    def n_basis(self) -> int:
        return 2

    def stationary_covariance(self, xp=NP):
        _check_numeric(self, xp)
        s2 = self.sigma**2
        zero = 0.0 * s2
        return xp.stack([xp.stack([s2, zero]), xp.stack([zero, s2 * self.w0**2])])

    def observation(self, xp=NP):
        return xp.asarray(np.array([1.0, 0.0]))

    def transition_coefficients(self, dt, xp=NP):
        _check_numeric(self, xp)
        c, s, _ = _sho_cs(dt, self.w0, self.Q, xp)
        return xp.stack([c, s], axis=-1)

    def transition_basis(self, xp=NP):
        _check_numeric(self, xp)
        alpha = self.w0 / (2.0 * self.Q)
        one, zero = 1.0 + 0.0 * alpha, 0.0 * alpha
        eye = xp.stack([xp.stack([one, zero]), xp.stack([zero, one])])
        G = xp.stack([xp.stack([alpha, one]), xp.stack([-(self.w0**2), -alpha])])
        return xp.stack([eye, G])

    def value(self, tau, xp=NP):
        _check_numeric(self, xp)
        c, s, alpha = _sho_cs(xp.abs(xp.asarray(tau)), self.w0, self.Q, xp)
        return self.sigma**2 * (c + alpha * s)


# ----------------------------------------------------------------------------- constant
@dataclasses.dataclass(frozen=True, eq=False)
class ConstantTerm(StateSpaceTerm):
    r"""Constant kernel :math:`k(\tau) = c` (a random offset; in a product, a scale):
    :math:`J = 1`, :math:`F = 0`, :math:`P_\infty = c`, :math:`A = 1`."""

    c: Any = 1.0
    _leaf_fields = ("c",)

    def __post_init__(self):
        object.__setattr__(self, "c", _param("c", self.c))

    @property
    def dim(self) -> int:
        return 1

    @property
    def n_basis(self) -> int:
        return 1

    def stationary_covariance(self, xp=NP):
        _check_numeric(self, xp)
        return xp.stack([xp.stack([self.c * 1.0])])

    def observation(self, xp=NP):
        return xp.asarray(np.ones(1))

    def transition_coefficients(self, dt, xp=NP):
        return (0.0 * xp.asarray(dt) + 1.0)[:, None]

    def transition_basis(self, xp=NP):
        return xp.asarray(np.ones((1, 1, 1)))

    def value(self, tau, xp=NP):
        _check_numeric(self, xp)
        return self.c + 0.0 * xp.asarray(tau)


# ------------------------------------------------------------------------ combinations
@dataclasses.dataclass(frozen=True, eq=False, init=False)
class TermSum(StateSpaceTerm):
    r""":math:`k = \sum_i k_i`: the states stacked, block-diagonal :math:`P_\infty` and
    :math:`A`, concatenated :math:`h` (independent processes add)."""

    terms: tuple[StateSpaceTerm, ...]

    def __init__(self, *terms):
        flat: list[StateSpaceTerm] = []
        for t in map(_as_term, terms):
            flat.extend(t.terms if isinstance(t, TermSum) else (t,))
        if not flat:
            raise ValueError("TermSum needs at least one term")
        object.__setattr__(self, "terms", tuple(flat))

    @property
    def dim(self) -> int:
        return sum(t.dim for t in self.terms)

    @property
    def n_basis(self) -> int:
        return sum(t.n_basis for t in self.terms)

    def _blockdiag(self, mats, lead, xp):
        dims = [t.dim for t in self.terms]
        return _bmat(
            [
                [m if k == j else xp.zeros((*lead, dims[k], dims[j])) for j in range(len(dims))]
                for k, m in enumerate(mats)
            ],
            xp,
        )

    def stationary_covariance(self, xp=NP):
        return self._blockdiag([t.stationary_covariance(xp) for t in self.terms], (), xp)

    def observation(self, xp=NP):
        return xp.concatenate([t.observation(xp) for t in self.terms])

    def transition_coefficients(self, dt, xp=NP):
        return xp.concatenate([t.transition_coefficients(dt, xp) for t in self.terms], axis=-1)

    def transition_basis(self, xp=NP):
        dims, L = [t.dim for t in self.terms], len(self.terms)
        blocks = []
        for k, t in enumerate(self.terms):  # the basis of term k in its diagonal block
            B = t.transition_basis(xp)
            K = B.shape[0]
            rows = [
                [B if r == c == k else xp.zeros((K, dims[r], dims[c])) for c in range(L)]
                for r in range(L)
            ]
            blocks.append(_bmat(rows, xp))
        return xp.concatenate(blocks, axis=0)

    def value(self, tau, xp=NP):
        out = 0.0
        for t in self.terms:
            out = out + t.value(tau, xp)
        return out


def _kron(a, b, m: int, k: int, lead: tuple):
    """Kronecker product of (batched over ``lead``) matrices ``a`` (m, m) and ``b`` (k, k)."""
    prod = a[..., :, None, :, None] * b[..., None, :, None, :]
    return prod.reshape((*lead, m * k, m * k))


@dataclasses.dataclass(frozen=True, eq=False, init=False)
class TermProduct(StateSpaceTerm):
    r""":math:`k = \prod_i k_i`: the Kronecker product of the states,
    :math:`h = \otimes_i h_i`, :math:`P_\infty = \otimes_i P_i`,
    :math:`A(\Delta) = \otimes_i A_i(\Delta)` (mixed-product rule)."""

    terms: tuple[StateSpaceTerm, ...]

    def __init__(self, *terms):
        flat: list[StateSpaceTerm] = []
        for t in map(_as_term, terms):
            flat.extend(t.terms if isinstance(t, TermProduct) else (t,))
        if not flat:
            raise ValueError("TermProduct needs at least one term")
        object.__setattr__(self, "terms", tuple(flat))

    @property
    def dim(self) -> int:
        return math.prod(t.dim for t in self.terms)

    @property
    def n_basis(self) -> int:
        return math.prod(t.n_basis for t in self.terms)

    def stationary_covariance(self, xp=NP):
        out, m = self.terms[0].stationary_covariance(xp), self.terms[0].dim
        for t in self.terms[1:]:
            out, m = _kron(out, t.stationary_covariance(xp), m, t.dim, ()), m * t.dim
        return out

    def observation(self, xp=NP):
        out, m = self.terms[0].observation(xp), self.terms[0].dim
        for t in self.terms[1:]:
            out, m = (out[:, None] * t.observation(xp)[None, :]).reshape((m * t.dim,)), m * t.dim
        return out

    def transition_coefficients(self, dt, xp=NP):
        dt = xp.asarray(dt)
        out = self.terms[0].transition_coefficients(dt, xp)
        for t in self.terms[1:]:
            c = t.transition_coefficients(dt, xp)
            out = (out[:, :, None] * c[:, None, :]).reshape((dt.shape[0], -1))
        return out

    def transition_basis(self, xp=NP):
        out, m = self.terms[0].transition_basis(xp), self.terms[0].dim
        for t in self.terms[1:]:
            B, j = t.transition_basis(xp), t.dim
            prod = out[:, None, :, None, :, None] * B[None, :, None, :, None, :]
            out, m = prod.reshape((-1, m * j, m * j)), m * j
        return out

    def value(self, tau, xp=NP):
        out = 1.0
        for t in self.terms:
            out = out * t.value(tau, xp)
        return out


# ----------------------------------------------------------------------- leaves (params)
def term_leaves(term: StateSpaceTerm) -> list[Any]:
    """The hyperparameters of ``term`` in a fixed depth-first order."""
    if isinstance(term, TermSum | TermProduct):
        return [leaf for t in term.terms for leaf in term_leaves(t)]
    return [getattr(term, f) for f in term._leaf_fields]


def with_leaves(term: StateSpaceTerm, values: list[Any]) -> StateSpaceTerm:
    """A copy of ``term`` with its hyperparameters (in :func:`term_leaves` order) replaced."""
    it = iter(values)

    def rebuild(t):
        if isinstance(t, TermSum | TermProduct):
            return type(t)(*[rebuild(c) for c in t.terms])
        return dataclasses.replace(t, **{f: next(it) for f in t._leaf_fields})

    out = rebuild(term)
    if next(it, None) is not None:
        raise ValueError("more values than hyperparameters")
    return out


# ------------------------------------------------------------------ kernels <-> terms
class StateSpaceKernel(Kernel):
    r"""A state-space term as a PyMC covariance function of one input column (for the dense
    path and for models that mix both): :math:`K_{ij} = k(x_i - x_j)` from :meth:`value`.

    :func:`to_term` maps it back to its term, so ``SHOTerm`` (which has no catalogue kernel) can be
    used in kernel expressions: ``StateSpaceKernel(SHOTerm(sigma=s, w0=w, Q=q)) + Matern32(1, ls=l)``.
    """

    def __init__(self, term: StateSpaceTerm, input_dim: int = 1, active_dims=None):
        super().__init__(input_dim, active_dims)
        if len(self.active_dims) != 1:
            raise ValueError("a state-space kernel acts on exactly one input column")
        self.term = term

    def full(self, X, Xs=None):
        X, Xs = self._slice(X, Xs)
        Xs = X if Xs is None else Xs
        return self.term.value(X[:, 0][:, None] - Xs[:, 0][None, :], PT)

    def diag(self, X):
        X, _ = self._slice(X, None)
        return self.term.value(pt.zeros_like(X[:, 0]), PT)


def _length_scale(kernel) -> Any:
    metric = getattr(kernel, "metric", None)
    if metric is not None and not hasattr(metric, "ls"):
        raise ValueError(
            f"{kernel!r} uses a {type(metric).__name__} metric: only a scalar length-scale on one "
            "input column has a state-space form"
        )
    ls = kernel.ls
    if isinstance(ls, Variable) and not isinstance(ls, _PTConstant):
        return ls
    arr = np.asarray(ls.data if isinstance(ls, _PTConstant) else ls, dtype=float)
    if arr.size != 1:
        raise ValueError(
            f"{kernel!r} has ARD length-scales {arr}: only one input column is allowed"
        )
    return float(arr.reshape(()))


def _not_representable(factor, why: str) -> ValueError:
    name = type(factor).__name__
    return ValueError(
        f"kernel factor {name} ({factor!r}) is not representable as a state-space (quasiseparable) "
        f"term: {why}. Representable: half-integer Matérn kernels (Matern12/Exponential, "
        "Matern32, Matern52, Matern(nu=p+1/2)), pm.gp.cov.Cosine, constants, "
        "MaternSpectralMixture(nu=p+1/2), "
        "StateSpaceKernel(...), and their sums and products, on one input column"
    )


def _scalar_factor(factor) -> Any:
    if isinstance(factor, pm.gp.cov.Constant):
        factor = factor.c
    if isinstance(factor, numbers.Real | np.ndarray | Variable):
        if np.ndim(factor) == 2 or (isinstance(factor, Variable) and factor.ndim == 2):
            raise _not_representable(factor, "a matrix factor is not a stationary kernel")
        return factor
    return None


def _convert(kernel) -> StateSpaceTerm:
    from bayes_gp.kernels import stationary as bs

    scalar = _scalar_factor(kernel)
    if scalar is not None:
        return ConstantTerm(scalar)
    if isinstance(kernel, pm.gp.cov.Add):
        return TermSum(*[_convert(f) for f in kernel._factor_list])
    if isinstance(kernel, pm.gp.cov.Prod):
        return TermProduct(*[_convert(f) for f in kernel._factor_list])
    if isinstance(kernel, StateSpaceKernel):
        return kernel.term
    if isinstance(kernel, Substituted):  # a kernel object whose priors a model registered
        term = _convert(kernel.base)
        return with_leaves(term, [kernel._sub(leaf) for leaf in term_leaves(term)])
    if not isinstance(kernel, pm.gp.cov.Covariance):
        raise _not_representable(kernel, "not a covariance function")
    from bayes_gp.kernels.spectral_mixture import MaternSpectralMixture

    if isinstance(kernel, MaternSpectralMixture):
        return _spectral_mixture_term(kernel)
    if len(kernel.active_dims) != 1:
        raise _not_representable(kernel, "it acts on more than one input column")
    nu = None
    if isinstance(kernel, bs.Matern):
        if not (kernel.nu - 0.5).is_integer():
            raise _not_representable(
                kernel, f"nu = {kernel.nu} is not a half-integer (rational spectral density)"
            )
        nu = kernel.nu
    elif isinstance(kernel, bs.Matern12 | pm.gp.cov.Matern12):
        nu = 0.5
    elif isinstance(kernel, bs.Matern32 | pm.gp.cov.Matern32):
        nu = 1.5
    elif isinstance(kernel, bs.Matern52 | pm.gp.cov.Matern52):
        nu = 2.5
    if nu is not None:
        return MaternTerm(nu, eta=1.0, ls=_length_scale(kernel))
    if isinstance(kernel, pm.gp.cov.Exponential):  # PyMC's exp(-r/2): the term's ls = 2 ls
        return MaternTerm(0.5, eta=1.0, ls=2.0 * _length_scale(kernel))
    if isinstance(kernel, pm.gp.cov.Cosine):
        return CosineTerm(period=_length_scale(kernel))
    raise _not_representable(
        kernel,
        "its spectral density is not rational (e.g. the squared exponential, rational "
        "quadratic, periodic kernels need an infinite state) or it is not stationary",
    )


def _component(value, q: int) -> Any:
    """Entry ``q`` of a per-component vector (one entry: shared by all components): a float
    when known, else the tensor entry."""
    if value.type.shape[0] == 1:
        q = 0
    if isinstance(value, _PTConstant):
        return float(np.asarray(value.data, dtype=float).reshape(-1)[q])
    return value[q]


def _spectral_mixture_term(kernel) -> StateSpaceTerm:
    r""":math:`\sum_q \mathrm{MaternTerm}(\nu, \sqrt{w_q}, \ell_q)\,\mathrm{CosineTerm}(1/\mu_q)`
    of a :class:`~bayes_gp.kernels.spectral_mixture.MaternSpectralMixture`."""
    if not (kernel.nu - 0.5).is_integer():
        raise _not_representable(
            kernel, f"nu = {kernel.nu} is not a half-integer (rational spectral density)"
        )
    Q = kernel.weights.type.shape[0]
    if Q is None:
        raise _not_representable(kernel, "its number of components is not known in advance")
    terms = []
    for q in range(Q):
        w, mu = _component(kernel.weights, q), _component(kernel.means, q)
        ls = _component(kernel.ls, q)
        eta = math.sqrt(w) if isinstance(w, float) else pt.sqrt(w)
        if isinstance(eta, float) and eta == 0.0:
            continue
        matern = MaternTerm(kernel.nu, eta=eta, ls=ls)
        if isinstance(mu, float) and mu == 0.0:
            terms.append(matern)
        else:
            terms.append(matern * CosineTerm(period=1.0 / mu))
    if not terms:
        raise _not_representable(kernel, "all its weights are zero (the zero kernel)")
    return terms[0] if len(terms) == 1 else TermSum(*terms)


def _columns(kernel) -> set[int]:
    if isinstance(kernel, pm.gp.cov.Combination):
        return set().union(*(_columns(f) for f in kernel._factor_list))
    if isinstance(kernel, Substituted):
        return _columns(kernel.base)
    if isinstance(kernel, pm.gp.cov.Covariance) and not isinstance(kernel, pm.gp.cov.Constant):
        return {int(c) for c in kernel.active_dims}
    return set()


def kernel_column(kernel) -> int:
    """The one input column a representable kernel acts on (0 for a bare term)."""
    if isinstance(kernel, StateSpaceTerm):
        return 0
    cols = _columns(kernel)
    if len(cols) > 1:
        raise ValueError(
            f"the kernel acts on input columns {sorted(cols)}: a state-space (quasiseparable) GP "
            "needs all of its factors on one column"
        )
    return cols.pop() if cols else 0


def to_term(kernel) -> StateSpaceTerm:
    """The state-space term of a kernel expression (a term is returned unchanged).

    Raises
    ------
    ValueError
        Naming the first factor that has no finite-dimensional state-space form, or when the
        factors act on different input columns.
    """
    if isinstance(kernel, StateSpaceTerm):
        return kernel
    kernel_column(kernel)
    return _convert(kernel)


def representable(kernel) -> bool:
    """Whether :func:`to_term` can convert ``kernel`` (an exact O(n) GP exists for it)."""
    try:
        to_term(kernel)
    except ValueError:
        return False
    return True


#: The terms' names before issue 36 (they shadowed the catalogue's ``Matern``, PyMC's ``Cosine``
#: and ``Constant``): they work for one release, with a ``FutureWarning``.
_OLD_NAMES = {
    "Matern": "MaternTerm",
    "Cosine": "CosineTerm",
    "SHO": "SHOTerm",
    "Constant": "ConstantTerm",
    "Sum": "TermSum",
    "Product": "TermProduct",
}


def _old_matern(nu: float = 1.5, eta: Any = 1.0, ell: Any = 1.0) -> MaternTerm:
    """``Matern(nu, eta, ell)`` of the previous release: its length-scale is now ``ls``."""
    return MaternTerm(nu, eta=eta, ls=ell)


def __getattr__(name: str) -> Any:
    if name in _OLD_NAMES:
        new = _OLD_NAMES[name]
        warnings.warn(
            f"`{name}` is now `{new}` (bayes_gp.kernels.statespace)"
            + (" and its `ell` is `ls`" if name == "Matern" else ""),
            FutureWarning,
            stacklevel=2,
        )
        return _old_matern if name == "Matern" else globals()[new]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
