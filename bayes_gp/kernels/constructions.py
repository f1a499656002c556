r"""Making new kernels from old (R&W §4.2.4; PRML §6.2).

Sums and products need no class: ``k1 + k2`` and ``k1 * k2`` build PyMC's ``Add`` / ``Prod``
(R&W §4.2.4, PRML eqs. 6.17–6.18), and ``eta**2 * k`` scales by a random variable. The
constructions here are those that PyMC does not provide with the book's semantics.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pymc as pm
import pytensor.tensor as pt

from bayes_gp._validation import as_parameter, check_integer_in, check_nonnegative
from bayes_gp.kernels.base import Kernel

__all__ = ["Normalized", "VerticalScale", "Warped", "Power", "Additive"]


def _require_kernel(name: str, k) -> pm.gp.cov.Covariance:
    if not isinstance(k, pm.gp.cov.Covariance):
        raise TypeError(f"`{name}` must be a covariance function, got {type(k).__name__}")
    return k


class Normalized(Kernel):
    r"""Normalised kernel, R&W eq. (4.35).

    .. math:: \tilde k(x, x') = \frac{k(x, x')}{\sqrt{k(x, x)\,k(x', x')}}

    The result has unit variance everywhere (a correlation function); it requires
    :math:`k(x, x) > 0` at every input.
    """

    def __init__(self, base: pm.gp.cov.Covariance):
        _require_kernel("base", base)
        super().__init__(base.input_dim, base.active_dims)
        self.base = base

    def full(self, X, Xs=None):
        X = self._check_input(X, "X")
        d = pt.sqrt(self.base(X, diag=True))
        if Xs is None:
            return self.base(X) / (d[:, None] * d[None, :])
        Xs = self._check_input(Xs, "Xs")
        ds = pt.sqrt(self.base(Xs, diag=True))
        return self.base(X, Xs) / (d[:, None] * ds[None, :])

    def diag(self, X):
        X = self._check_input(X, "X")
        return pt.ones_like(X[:, 0])


class VerticalScale(Kernel):
    r"""Vertical rescaling, R&W §4.2.4.

    .. math:: \tilde k(x, x') = a(x)\,k(x, x')\,a(x')

    the covariance of :math:`a(x) f(x)` for :math:`f \sim GP(0, k)`.

    Parameters
    ----------
    base : covariance function
    a : callable
        Maps the full input matrix ``(n, input_dim)`` (a PyTensor tensor) to a vector ``(n,)``.
    """

    def __init__(self, base: pm.gp.cov.Covariance, a: Callable):
        _require_kernel("base", base)
        if not callable(a):
            raise TypeError("`a` must be a callable mapping an (n, input_dim) tensor to (n,)")
        super().__init__(base.input_dim, base.active_dims)
        self.base = base
        self.a = a

    def _scale(self, X):
        s = pt.as_tensor_variable(self.a(X))
        if s.ndim != 1:
            raise ValueError(f"`a` must return a vector (n,), got {s.ndim} dimension(s)")
        return s

    def full(self, X, Xs=None):
        X = self._check_input(X, "X")
        aX = self._scale(X)
        if Xs is None:
            return aX[:, None] * self.base(X) * aX[None, :]
        Xs = self._check_input(Xs, "Xs")
        return aX[:, None] * self.base(X, Xs) * self._scale(Xs)[None, :]

    def diag(self, X):
        X = self._check_input(X, "X")
        return pt.square(self._scale(X)) * self.base(X, diag=True)


class Warped(Kernel):
    r"""Input warping, R&W §4.2.4 (e.g. MacKay's periodic construction, eq. 4.31).

    .. math:: \tilde k(x, x') = k(u(x), u(x'))

    Parameters
    ----------
    base : covariance function
        Kernel on the warped space; its ``input_dim`` is the output dimension of ``u``.
    u : callable
        Maps the active inputs ``(n, D)`` (a PyTensor tensor) to ``(n, base.input_dim)``.
    input_dim : int
        Number of columns of the (unwarped) ``X``.
    active_dims : sequence of int, optional
        Columns of ``X`` passed to ``u``.

    Notes
    -----
    Equivalent to PyMC's ``pm.gp.cov.WarpedInput`` (tested), with ``u`` applied to the active
    columns only.
    """

    def __init__(
        self,
        base: pm.gp.cov.Covariance,
        u: Callable,
        input_dim: int,
        active_dims: Sequence[int] | None = None,
    ):
        _require_kernel("base", base)
        if not callable(u):
            raise TypeError("`u` must be a callable mapping (n, D) inputs to (n, D') warped inputs")
        super().__init__(input_dim, active_dims)
        self.base = base
        self.u = u

    def _warp(self, X):
        U = pt.as_tensor_variable(self.u(X))
        if U.ndim != 2:
            raise ValueError(f"`u` must return a 2-D (n, D') matrix, got {U.ndim} dimension(s)")
        return U

    def full(self, X, Xs=None):
        X, Xs = self._slice(X, Xs)
        U = self._warp(X)
        return self.base(U) if Xs is None else self.base(U, self._warp(Xs))

    def diag(self, X):
        X, _ = self._slice(X)
        return self.base(self._warp(X), diag=True)


class Power(Kernel):
    r"""Positive integer power of a kernel, R&W §4.2.4.

    .. math:: \tilde k(x, x') = k(x, x')^p, \qquad p \in \{1, 2, \dots\}

    A product of valid kernels is valid, so every positive integer power is; a non-integer power is
    not in general (PyMC's ``k ** p`` accepts any real ``p``; this class refuses it).
    """

    def __init__(self, base: pm.gp.cov.Covariance, p: int):
        _require_kernel("base", base)
        p = check_integer_in("p", p, range(1, 1 << 16))
        super().__init__(base.input_dim, base.active_dims)
        self.base = base
        self.p = p

    def full(self, X, Xs=None):
        return pt.power(self.base(X, Xs), self.p)

    def diag(self, X):
        return pt.power(self.base(X, diag=True), self.p)


class Additive(Kernel):
    r"""Additive / functional-ANOVA kernel truncated at interaction order :math:`R` (R&W §4.2.4;
    Duvenaud, Nickisch & Rasmussen 2011).

    .. math::
       k(x, x') = \sum_{n=1}^{R} \sigma_n^2\, e_n\big(k_1(x, x'), \dots, k_D(x, x')\big),
       \qquad e_n(z) = \sum_{i_1 < \dots < i_n} z_{i_1}\cdots z_{i_n}

    :math:`e_1 = \sum_i k_i` is the additive kernel, :math:`e_2` adds all pairwise interactions
    :math:`k_i k_j`, and :math:`e_D = \prod_i k_i` is the full product. The elementary symmetric
    polynomials are computed by the recursion
    :math:`e_n^{(i)} = e_n^{(i-1)} + z_i\,e_{n-1}^{(i-1)}` (no cancellation, unlike the
    Newton–Girard identities).

    Parameters
    ----------
    kernels : sequence of covariance functions
        The base kernels :math:`k_i`, usually each on one input dimension (``active_dims=[i]``).
    max_order : int
        :math:`R`, between 1 and ``len(kernels)``.
    variances : sequence, optional
        :math:`\sigma_n^2` for :math:`n = 1..R` (numbers or random variables); default all 1.
    """

    def __init__(
        self,
        kernels: Sequence[pm.gp.cov.Covariance],
        max_order: int,
        variances: Sequence | None = None,
    ):
        kernels = list(kernels)
        if not kernels:
            raise ValueError("`kernels` must contain at least one kernel")
        for i, k in enumerate(kernels):
            _require_kernel(f"kernels[{i}]", k)
        dims = {k.input_dim for k in kernels}
        if len(dims) != 1:
            raise ValueError(f"all `kernels` must have the same input_dim, got {sorted(dims)}")
        max_order = check_integer_in("max_order", max_order, range(1, len(kernels) + 1))
        if variances is None:
            variances = [1.0] * max_order
        variances = list(variances)
        if len(variances) != max_order:
            raise ValueError(
                f"`variances` has {len(variances)} entries but max_order={max_order} needs one per order"
            )
        for v in variances:
            check_nonnegative("variances", v)
        input_dim = dims.pop()
        active = sorted({int(d) for k in kernels for d in k.active_dims})
        super().__init__(input_dim, active)
        self.kernels = tuple(kernels)
        self.max_order = max_order
        self.variances = tuple(as_parameter(v) for v in variances)

    def _combine(self, Z):
        e = [1.0] + [0.0] * self.max_order
        for z in Z:
            for n in range(self.max_order, 0, -1):
                e[n] = e[n] + z * e[n - 1]
        return sum(v * e[n + 1] for n, v in enumerate(self.variances))

    def full(self, X, Xs=None):
        X = self._check_input(X, "X")
        Xs = None if Xs is None else self._check_input(Xs, "Xs")
        return self._combine([k(X, Xs) for k in self.kernels])

    def diag(self, X):
        X = self._check_input(X, "X")
        return self._combine([k(X, diag=True) for k in self.kernels])
