r"""Change-point and change-window kernels: a sigmoid switch between kernels along one input.

A switch :math:`a(x)` turns a kernel on and off smoothly; :math:`a(x)\,k(x, x')\,a(x')` is a
vertical rescaling (R&W §4.2.4), the covariance of :math:`a(x) f(x)`, and a sum of such terms
is a sum of independent processes, so every kernel here is positive semi-definite when its
parts are.

* :class:`ChangePoints` / :class:`ChangePoint`: kernel :math:`k_i` is active between change
  points :math:`i - 1` and :math:`i` (Garnett, Osborne & Roberts 2009; the form of GPflow's
  ``gpflow.kernels.ChangePoints``, Lloyd et al. 2014's change-point operator for one change);
* :class:`ChangeWindow`: one kernel inside a window :math:`[x_s, x_e]` with soft edges, another
  outside it (Lloyd, Duvenaud, Grosse, Tenenbaum & Ghahramani 2014, the change-window operator
  of the Automatic Statistician).

The switch acts on one input column (``column``); the kernels it switches between may act on
any columns of the same input matrix.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from bayes_gp._validation import as_parameter, check_positive, constant_value
from bayes_gp.kernels.base import Kernel

__all__ = ["ChangePoints", "ChangePoint", "ChangeWindow"]


def _kernels(name: str, kernels) -> tuple[pm.gp.cov.Covariance, ...]:
    """The kernels to switch between: covariance functions of one ``input_dim``."""
    out = tuple(kernels)
    for i, k in enumerate(out):
        if not isinstance(k, pm.gp.cov.Covariance):
            raise TypeError(
                f"`{name}[{i}]` must be a covariance function (pm.gp.cov.Covariance), got "
                f"{type(k).__name__}"
            )
    dims = [int(k.input_dim) for k in out]
    if len(set(dims)) > 1:
        raise ValueError(
            f"the kernels of `{name}` have different input_dim {dims}: they must all be built "
            "for the same input matrix (select their columns with active_dims)"
        )
    return out


def _column(column, input_dim: int) -> int:
    if isinstance(column, bool) or not isinstance(column, int | np.integer):
        raise ValueError(f"`column` must be an integer input column, got {column!r}")
    if not 0 <= int(column) < input_dim:
        raise ValueError(
            f"`column`={column} must lie in 0..{input_dim - 1} for kernels with input_dim="
            f"{input_dim}"
        )
    return int(column)


def _vector(name: str, value, size: int, what: str) -> pt.TensorVariable:
    """A hyperparameter of ``size`` entries (a scalar is broadcast): known lengths are checked."""
    v = as_parameter(value)
    if v.ndim > 1:
        raise ValueError(f"`{name}` must be a scalar or a vector, got {v.ndim} dimensions")
    n = v.type.shape[0] if v.ndim == 1 else None
    if n is not None and n not in (1, size):
        raise ValueError(f"`{name}` has {n} entries but there are {size} {what}")
    return v


class _Switched(Kernel):
    r""":math:`\sum_i a_i(x)\,k_i(x, x')\,a_i(x')` for switches :math:`a_i` of one column."""

    kernels: tuple[pm.gp.cov.Covariance, ...]

    def _init_switch(self, kernels, column: int) -> None:
        input_dim = int(kernels[0].input_dim)
        column = _column(column, input_dim)
        active = sorted({column} | {int(d) for k in kernels for d in k.active_dims})
        Kernel.__init__(self, input_dim, active)
        self.column = column

    def _switches(self, x: pt.TensorVariable) -> list[pt.TensorVariable]:
        """The weights :math:`a_i(x)`, one ``(n,)`` vector per kernel."""
        raise NotImplementedError

    def full(self, X, Xs=None):
        X = self._check_input(X, "X")
        Xs = None if Xs is None else self._check_input(Xs, "Xs")
        a = self._switches(X[:, self.column])
        b = a if Xs is None else self._switches(Xs[:, self.column])
        terms = [
            ai[:, None] * k(X, Xs) * bi[None, :]
            for ai, bi, k in zip(a, b, self.kernels, strict=True)
        ]
        return sum(terms[1:], terms[0])

    def diag(self, X):
        X = self._check_input(X, "X")
        a = self._switches(X[:, self.column])
        terms = [pt.square(ai) * k(X, diag=True) for ai, k in zip(a, self.kernels, strict=True)]
        return sum(terms[1:], terms[0])


class ChangePoints(_Switched):
    r"""Change points between kernels (Garnett, Osborne & Roberts 2009; GPflow's ``ChangePoints``).

    With :math:`K` change points at locations :math:`l_1 < \dots < l_K` (sorted, as GPflow does)
    and steepness :math:`s_j > 0`, :math:`\sigma_j(x) = \mathrm{sigmoid}(s_j(x - l_j))` on the
    input column ``column``, and :math:`K + 1` kernels:

    .. math::
       k(x, x') = \sum_{i=0}^{K} a_i(x)\,k_i(x, x')\,a_i(x'), \qquad
       a_i(x) = \sigma_i(x)\,\bigl(1 - \sigma_{i+1}(x)\bigr)

    with :math:`\sigma_0 \equiv 1` and :math:`1 - \sigma_{K+1} \equiv 1`: kernel :math:`k_0`
    before the first change point, :math:`k_i` between change points :math:`i` and :math:`i+1`,
    :math:`k_K` after the last. One change point (:class:`ChangePoint`) is

    .. math::
       k(x, x') = (1 - \sigma(x))\,k_1(x, x')\,(1 - \sigma(x')) + \sigma(x)\,k_2(x, x')\,\sigma(x').

    Each term is the covariance of :math:`a_i(x) f_i(x)` with independent :math:`f_i \sim
    GP(0, k_i)` (vertical rescaling, R&W §4.2.4), so the kernel is positive semi-definite.

    Parameters
    ----------
    kernels : sequence of covariance functions
        :math:`k_0, \dots, k_K`, at least two, all with the same ``input_dim``; each with its
        own amplitude (``eta**2 * ExpQuad(...)``).
    locations : array_like or tensor, shape ``(K,)``
        Change-point locations :math:`l_j` on ``column`` (numbers, or an unnamed prior such as
        ``pm.Normal.dist(5, 2, shape=K)``). Sorted inside the kernel, as in GPflow.
    steepness : float or array_like, shape ``()`` or ``(K,)``
        :math:`s_j > 0` (inverse width of each switch, in units of ``1/x``). A vector is
        reordered with the sorted locations (GPflow sorts the locations only, which pairs a
        steepness vector with the wrong change points when the locations are given unsorted).
    column : int
        The input column the switches act on (default 0).

    Notes
    -----
    GPflow's formula (``gpflow/kernels/changepoints.py``, ``ChangePoints.K``): the products of
    sigmoids ``starters`` and ``stoppers`` over pairs of inputs, with ones prepended to
    ``starters`` and appended to ``stoppers``, summed against the stacked Gram matrices; the tests
    transcribe it and compare.
    """

    def __init__(
        self,
        kernels: Sequence[pm.gp.cov.Covariance],
        locations,
        steepness,
        *,
        column: int = 0,
    ):
        kernels = _kernels("kernels", kernels)
        if len(kernels) < 2:
            raise ValueError(
                f"`kernels` must hold at least two kernels (one more than the change points), "
                f"got {len(kernels)}"
            )
        n_cp = len(kernels) - 1
        locations = pt.atleast_1d(as_parameter(locations))
        if locations.ndim != 1:
            raise ValueError(f"`locations` must be a vector of {n_cp} location(s)")
        if locations.type.shape[0] not in (None, n_cp):
            raise ValueError(
                f"`locations` has {locations.type.shape[0]} entries but {len(kernels)} kernels "
                f"need {n_cp} change point(s)"
            )
        known = constant_value(locations)
        if known is not None and not np.all(np.isfinite(known)):
            raise ValueError(f"`locations` must be finite, got {known!r}")
        check_positive("steepness", steepness)
        steepness = _vector("steepness", steepness, n_cp, "change points")
        self._init_switch(kernels, column)
        self.kernels = kernels
        self.locations = locations
        self.steepness = steepness

    def _switches(self, x):
        n_cp = len(self.kernels) - 1
        order = pt.argsort(self.locations)
        loc = self.locations[order]
        s = self.steepness[order] if self.steepness.ndim == 1 else self.steepness
        s = pt.ones(n_cp) * s
        z = [s[j] * (x - loc[j]) for j in range(n_cp)]
        up = [pt.sigmoid(zj) for zj in z]  # sigma_j(x)
        down = [pt.sigmoid(-zj) for zj in z]  # 1 - sigma_j(x), without cancellation
        out = []
        for i in range(n_cp + 1):
            a = up[i - 1] if i > 0 else None
            if i < n_cp:
                a = down[i] if a is None else a * down[i]
            out.append(a)
        return out

    def __repr__(self) -> str:
        inner = ", ".join(repr(k) for k in self.kernels)
        return f"{type(self).__name__}([{inner}], column={self.column})"


class ChangePoint(ChangePoints):
    r"""One change point between two kernels (Garnett et al. 2009; Lloyd et al. 2014's CP).

    .. math::
       k(x, x') = (1 - \sigma(x))\,k_1(x, x')\,(1 - \sigma(x')) + \sigma(x)\,k_2(x, x')\,\sigma(x'),
       \qquad \sigma(x) = \mathrm{sigmoid}\bigl(s\,(x - l)\bigr)

    :class:`ChangePoints` with ``kernels=[k1, k2]``, ``locations=[location]``.

    Parameters
    ----------
    k1, k2 : covariance functions
        Before and after the change (same ``input_dim``).
    location : float or scalar tensor
        :math:`l`, on the input column ``column``.
    steepness : float or scalar tensor
        :math:`s > 0`; the switch goes from 12% to 88% over :math:`4/s`.
    column : int
        The input column of the switch (default 0).
    """

    def __init__(self, k1, k2, location, steepness, *, column: int = 0):
        location = as_parameter(location)
        if location.ndim != 0:
            raise ValueError(
                f"`location` must be a scalar, got {location.ndim} dimension(s); for several "
                "change points use ChangePoints"
            )
        steepness = as_parameter(steepness)
        if steepness.ndim != 0:
            raise ValueError(f"`steepness` must be a scalar, got {steepness.ndim} dimension(s)")
        # set first: the model names the priors after these attributes (kernel_parameters)
        object.__setattr__(self, "location", location)
        super().__init__([k1, k2], location, steepness, column=column)

    def __repr__(self) -> str:
        k1, k2 = self.kernels
        return f"ChangePoint({k1!r}, {k2!r}, column={self.column})"


class ChangeWindow(_Switched):
    r"""A kernel inside a window with soft edges, another outside it (Lloyd et al. 2014).

    .. math::
       w(x) &= \mathrm{sigmoid}\bigl(s_1 (x - x_s)\bigr)\,
               \mathrm{sigmoid}\bigl(s_2 (x_e - x)\bigr), \\
       k(x, x') &= w(x)\,k_{in}(x, x')\,w(x') + (1 - w(x))\,k_{out}(x, x')\,(1 - w(x'))

    the change-window operator of the Automatic Statistician (Lloyd, Duvenaud, Grosse,
    Tenenbaum & Ghahramani 2014, §3): one process :math:`k_{in}` in :math:`[x_s, x_e]`, one
    process :math:`k_{out}` before *and* after the window (the same function continues across
    it, unlike :class:`ChangePoints` with :math:`[k_{out}, k_{in}, k_{out}]`, whose two outer
    pieces are independent). Positive semi-definite as a sum of vertical rescalings.

    Parameters
    ----------
    inside : covariance function
        :math:`k_{in}`.
    outside : covariance function or None
        :math:`k_{out}`; ``None``: zero outside the window.
    start, end : float or scalar tensor
        :math:`x_s < x_e` on the input column ``column`` (checked when both are numbers).
    steepness : float or array_like of 2
        :math:`s > 0` of both edges, or :math:`(s_1, s_2)` for the start and the end.
    column : int
        The input column of the window (default 0).
    """

    def __init__(self, inside, outside, start, end, steepness, *, column: int = 0):
        kernels = _kernels("kernels", [inside] if outside is None else [inside, outside])
        start, end = as_parameter(start), as_parameter(end)
        for name, v in (("start", start), ("end", end)):
            if v.ndim != 0:
                raise ValueError(f"`{name}` must be a scalar, got {v.ndim} dimension(s)")
            known = constant_value(v)
            if known is not None and not np.isfinite(known):
                raise ValueError(f"`{name}` must be finite, got {known!r}")
        s0, e0 = constant_value(start), constant_value(end)
        if s0 is not None and e0 is not None and not s0 < e0:
            raise ValueError(f"the window needs `start` < `end`, got start={s0}, end={e0}")
        check_positive("steepness", steepness)
        steepness = _vector("steepness", steepness, 2, "window edges")
        self._init_switch(kernels, column)
        self.inside = inside
        self.outside = outside
        self.kernels = kernels
        self.start = start
        self.end = end
        self.steepness = steepness

    def _switches(self, x):
        s = pt.ones(2) * self.steepness
        w = pt.sigmoid(s[0] * (x - self.start)) * pt.sigmoid(s[1] * (self.end - x))
        return [w] if self.outside is None else [w, 1.0 - w]

    def __repr__(self) -> str:
        return f"ChangeWindow({self.inside!r}, {self.outside!r}, column={self.column})"
