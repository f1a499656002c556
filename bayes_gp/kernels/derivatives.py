r"""Derivatives of covariance functions along one input dimension, for derivative GPs (R&W §9.4).

Differentiation is a linear operator, so the derivative of a GP is a GP (R&W §9.4, eq. 9.1 ff.):

.. math::
   \operatorname{cov}\left(\frac{\partial^p f(x)}{\partial x_d^p},
                           \frac{\partial^q f(x')}{\partial x_d'^q}\right)
   = \frac{\partial^{p+q} k(x, x')}{\partial x_d^p\,\partial x_d'^q}.

:func:`derivative_table` builds these graphs for :math:`0 \le p, q \le 2` for any kernel object by
PyTensor's automatic differentiation (forward mode, :func:`pytensor.gradient.pushforward`, of
:math:`k(A + t e_d, B + u e_d)` in the scalar shifts :math:`t, u`, which gives every pair's
derivative at once), through sums (term by term) and products (Leibniz's rule,
:math:`\partial_a^p\partial_b^q (fg) = \sum_{i \le p, j \le q}\binom pi \binom qj
\partial_a^i\partial_b^j f\,\partial_a^{p-i}\partial_b^{q-j} g`).

**Coincident inputs.** A stationary kernel written through the distance
:math:`r = \sqrt{\tau^\top M \tau}` (Matérn, piecewise polynomial) has no derivative of
:math:`\sqrt{\cdot}` at :math:`\tau = 0`, where automatic differentiation gives a wrong number
(PyTensor's ``switch`` in :func:`~bayes_gp.kernels.base.safe_sqrt` makes it 0). There the
derivatives of :math:`\kappa(\tau) = k(x + \tau, x)` along :math:`e_d` are those of the radial
profile :math:`g(r)` at :math:`0^+` with :math:`r = |t|\sqrt{M_{dd}}`:

.. math::
   \partial_a^p \partial_b^q k\big|_{a=b} = (-1)^q \kappa^{(p+q)}(0), \qquad
   \kappa''(0) = g''(0^+) M_{dd}, \qquad \kappa''''(0) = g''''(0^+) M_{dd}^2,

0 for odd :math:`p + q`. For the Matérn class (:math:`\nu`, R&W eq. 4.14; the squared
exponential is :math:`\nu = \infty`) the spectral moments give :math:`g''(0) = -\nu/(\nu - 1)` and
:math:`g''''(0) = 3\nu^2/((\nu-1)(\nu-2))` (:math:`-1` and 3 at :math:`\nu=\infty`; for
:math:`\nu = 5/2`: :math:`-5/3` and :math:`25`, the Taylor coefficients of eq. 4.17b); for other
radial profiles (piecewise polynomial, Bessel) :math:`g^{(n)}(0^+)` by automatic
differentiation of the profile in :math:`r`, at :data:`PROFILE_STEP` (the gradient graph of
:math:`r^2` is :math:`0 \cdot r^{-1}` at 0).

Derivatives along two different dimensions :math:`d \ne e` (``dim_b``: the covariances of a
gradient's components, for derivative observations, :mod:`bayes_gp.regression.derivative_obs`)
follow from the Taylor series of :math:`\kappa` in :math:`s = \tau^\top M \tau`,
:math:`\kappa = g(0) + g''(0)\,s/2 + g''''(0)\,s^2/24 + \dots`:
:math:`\partial_i\partial_j\kappa(0) = g''(0) M_{ij}` and
:math:`\partial_i\partial_j\partial_k\partial_l\kappa(0) = \tfrac13 g''''(0)(M_{ij}M_{kl} +
M_{ik}M_{jl} + M_{il}M_{jk})` (:func:`_zero_lag`; 0 off the diagonal of an ARD metric).

Near, but not at, zero lag the chain rule through :math:`r` cancels: the fourth derivatives of
a Matérn 5/2 kernel at a lag of :math:`10^{-4}\ell` carry a relative error of about
:math:`10^{-5}`, more on the Bessel path of a general :math:`\nu`; first and second
derivatives are accurate to rounding there.

**Which derivatives exist.** :math:`f` is :math:`m` times mean-square differentiable iff
:math:`\kappa^{(2m)}(0)` exists (R&W §4.1.1): a Matérn kernel needs :math:`\nu > m` (so not the
exponential / Matérn 1/2, and Matérn 3/2 not for :math:`m = 2`), a γ-exponential :math:`\gamma = 2`,
:math:`k_{ppD,q}` (:math:`2q` times differentiable in :math:`r`, R&W eq. 4.21) :math:`q \ge m`
(its odd Taylor coefficients up to :math:`r^{2m-1}` vanish). :func:`check_differentiable` refuses
the others with that reason.
"""

from __future__ import annotations

from math import comb

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pytensor.compile.mode import Mode
from pytensor.gradient import pushforward
from pytensor.graph.replace import graph_replace

from bayes_gp._validation import constant_value
from bayes_gp.kernels.base import Stationary, Substituted, smoothness
from bayes_gp.kernels.nonstationary import Wiener
from bayes_gp.kernels.periodic import Periodic
from bayes_gp.kernels.stationary import ExpQuad, GammaExponential, PiecewisePolynomial, RatQuad

__all__ = [
    "DERIVATIVE_MODE",
    "MAX_ORDER",
    "PROFILE_STEP",
    "check_differentiable",
    "derivative_table",
    "is_stationary",
    "mean_derivative",
]

#: How the derivative graphs are compiled: PyTensor's Python linker with only the merge of
#: common subexpressions. The nested forward-mode graphs have thousands of nodes (a sum of two
#: kernels' fourth derivatives: about 2,200), which the ``fast_compile`` rewrites took 12 s to
#: process and the merge alone 0.8 s, for the same run time.
DERIVATIVE_MODE = Mode(linker="py", optimizer="merge")

#: Where the derivatives of a radial profile g(r) stand in for their limits at 0+ (r is in units of
#: the length-scale): the error is about the next derivative times this step.
PROFILE_STEP = 1e-9

#: Highest derivative order available (f' and f'', their covariances up to 4th derivatives of k).
MAX_ORDER = 2

#: Stationary kernels whose PyTensor graph is smooth in the inputs at zero lag (no square root of
#: the distance): automatic differentiation is exact there too.
_SMOOTH_AT_ZERO = (Periodic, RatQuad, pm.gp.cov.Periodic, pm.gp.cov.RatQuad)


def _name(kernel) -> str:
    return type(kernel.base if isinstance(kernel, Substituted) else kernel).__name__


def _children(kernel):
    """``(kind, items)``: ``"add"``/``"prod"`` with the factor list, ``"sub"`` with the base, or
    ``"leaf"``."""
    if isinstance(kernel, Substituted):
        return "sub", kernel.base
    if isinstance(kernel, pm.gp.cov.Add):
        return "add", kernel._factor_list
    if isinstance(kernel, pm.gp.cov.Prod):
        return "prod", kernel._factor_list
    return "leaf", None


def _matern_moments(kernel):
    """``(g''(0), g''''(0))`` of a Matérn-class radial profile (module docstring), or None when the
    kernel is not of that class; ``nu`` for the refusal."""
    nu = smoothness(kernel)
    if nu is not None:
        nu = float(nu)
        if np.isinf(nu):
            return nu, -1.0, 3.0
        g2 = -nu / (nu - 1.0) if nu > 1 else np.nan
        g4 = 3.0 * nu**2 / ((nu - 1.0) * (nu - 2.0)) if nu > 2 else np.nan
        return nu, g2, g4
    base = kernel.base if isinstance(kernel, Substituted) else kernel
    if isinstance(base, GammaExponential):
        gamma = constant_value(base.gamma)
        if gamma is not None and gamma.ndim == 0 and float(gamma) == 2.0:
            return np.inf, -2.0, 12.0  # exp(-r^2): the SE kernel with l / sqrt(2)
    return None


def _leaf_kind(kernel) -> str:
    """How a leaf's derivatives at zero lag are obtained: ``"matern"`` (closed moments),
    ``"profile"`` (its radial profile's derivatives in r), ``"autodiff"`` (its graph is smooth)."""
    base = kernel.base if isinstance(kernel, Substituted) else kernel
    if _matern_moments(kernel) is not None:
        return "matern"
    if isinstance(base, _SMOOTH_AT_ZERO) or not isinstance(base, pm.gp.cov.Stationary):
        return "autodiff"
    if isinstance(base, Stationary | pm.gp.cov.Stationary) and hasattr(base, "full_from_distance"):
        return "profile"
    return "autodiff"


def _smooth_graph(kernel) -> bool:
    """Whether automatic differentiation of ``kernel``'s graph is exact at coincident inputs
    too: no square root of the distance and no ``switch`` at zero distance in it (the squared
    exponential, RQ, periodic, non-stationary leaves; sums and products of these)."""
    kind, items = _children(kernel)
    if kind == "sub":
        return _smooth_graph(items)
    if kind in ("add", "prod"):
        return all(_smooth_graph(f) for f in items if isinstance(f, pm.gp.cov.BaseCovariance))
    base = kernel
    if isinstance(base, (ExpQuad, pm.gp.cov.ExpQuad, *_SMOOTH_AT_ZERO)):
        return True
    return not isinstance(base, pm.gp.cov.Stationary) and all(
        _smooth_graph(inner) for inner in _inner_kernels(base)
    )


def _inner_kernels(kernel):
    """Covariance objects held by a non-stationary construction (warped, normalised, switched
    kernels), one level down."""
    for value in vars(kernel).values():
        items = value if isinstance(value, list | tuple) else [value]
        for item in items:
            if isinstance(item, pm.gp.cov.BaseCovariance):
                yield item


def _profile_derivatives(kernel, n: int):
    """:math:`g^{(k)}(0^+)`, ``k = 1..n``, of a stationary kernel's radial profile
    ``full_from_distance(r, squared=False)`` as graphs (in the kernel's hyperparameters)."""
    base = kernel.base if isinstance(kernel, Substituted) else kernel
    r = pt.dscalar("r")
    g = base.full_from_distance(pt.reshape(r, (1, 1)), squared=False)[0, 0]
    out = []
    for _ in range(n):
        g = pytensor.grad(g, r)
        out.append(g)
    # at r = 0 exactly the gradient graph of a power such as r**2 holds 0 * r**(-1) = nan: one
    # step (in units of the length-scale) to the right, within 1e-9 of the limit at 0+
    out = graph_replace(out, {r: pt.constant(PROFILE_STEP, dtype="float64")}, strict=False)
    if isinstance(kernel, Substituted):
        out = [kernel._sub(v) for v in out]
    return out


def check_differentiable(kernel, order: int) -> None:
    """Raise ``ValueError`` with the reason when a GP with covariance ``kernel`` has no
    mean-square derivative of ``order`` (module docstring), ``NotImplementedError`` for a kernel
    whose derivatives are not available."""
    kind, items = _children(kernel)
    if kind == "sub":
        check_differentiable(items, order)
        return
    if kind in ("add", "prod"):
        for f in items:
            if isinstance(f, pm.gp.cov.BaseCovariance):
                check_differentiable(f, order)
        return
    base = kernel
    name = _name(kernel)
    if isinstance(base, Wiener):
        raise ValueError(
            "the Wiener process (min(x, x')) has no derivative: its sample paths are nowhere "
            "differentiable (R&W §4.2.3)"
        )
    if isinstance(base, pm.gp.cov.WhiteNoise):
        raise ValueError("white noise is not differentiable: leave it out of the kernel of f")
    moments = _matern_moments(kernel)
    if moments is not None:
        nu = moments[0]
        if not nu > order:
            what = "f'" if order == 1 else "f''"
            raise ValueError(
                f"kernel {name} (Matérn smoothness nu = {nu:g}) has no {what}: a Matérn GP is "
                f"m times mean-square differentiable only for nu > m (R&W §4.2.1), so "
                f"order={order} needs nu > {order} (Matérn 5/2 or the squared exponential"
                + (", or Matérn 3/2 for order 1" if order == 2 else "")
                + ")"
            )
        return
    if isinstance(base, GammaExponential) or (
        isinstance(base, Substituted) and isinstance(base.base, GammaExponential)
    ):
        raise ValueError(
            "the gamma-exponential kernel exp(-r^gamma) with gamma < 2 is not mean-square "
            "differentiable (R&W §4.2.1: its sample paths are not differentiable); with "
            "gamma = 2 (a fixed number) it is the squared exponential"
        )
    if isinstance(base, PiecewisePolynomial):
        if base.q < order:
            raise ValueError(
                f"the piecewise-polynomial kernel pp{base.q} (R&W eq. 4.21, 2q = {2 * base.q} "
                f"times differentiable in r) has no mean-square derivative of order {order}: "
                f"that needs q >= {order} (pp{order} ... pp3)"
            )
        return
    kind = _leaf_kind(kernel)
    if kind == "profile":  # an odd Taylor coefficient up to r^(2m-1) means no derivative
        derivs = _profile_derivatives(kernel, 2 * order - 1)
        try:
            odd = [float(pytensor.function([], d, mode=DERIVATIVE_MODE)()) for d in derivs[::2]]
        except Exception:  # hyperparameters are random variables: cannot check numerically
            return
        if any(abs(v) > 1e-4 for v in odd):  # nonzero ones are O(1) in units of the scale
            raise ValueError(
                f"kernel {name} has a non-zero odd Taylor coefficient at zero distance (a "
                f"|x - x'| term), so the GP has no mean-square derivative of order {order} "
                "(R&W §4.1.1)"
            )
        return
    if kind == "autodiff" and not isinstance(base, pm.gp.cov.Stationary):
        for inner in _inner_kernels(base):
            if not _smooth_graph(inner):
                raise NotImplementedError(
                    f"derivatives of {name} around an inner {type(inner).__name__} kernel are not "
                    "available (automatic differentiation of its distance is not exact at "
                    "coincident inputs); wrap a squared-exponential, rational-quadratic or "
                    "periodic kernel, or build the kernel from sums and products"
                )
            check_differentiable(inner, order)


def is_stationary(kernel) -> bool:
    """Whether every term and factor of ``kernel`` is stationary (then so are the derivative
    process's variances: one evaluation serves every input)."""
    kind, items = _children(kernel)
    if kind == "sub":
        return is_stationary(items)
    if kind in ("add", "prod"):
        return all(is_stationary(f) for f in items if isinstance(f, pm.gp.cov.BaseCovariance))
    return isinstance(kernel, pm.gp.cov.Stationary)


def _shifted(X, t, dim: int, input_dim: int):
    e = np.zeros((1, input_dim))
    e[0, dim] = 1.0
    return X + t * pt.as_tensor_variable(e)


def _autodiff_table(
    kernel, A, B, dim: int, order: int, input_dim: int, order_b: int, dim_b: int | None = None
):
    """``{(p, q): d^p/da_d^p d^q/db_e^q k(A, B)}`` (``p <= order``, ``q <= order_b``,
    ``e = dim_b``, default ``dim``) by forward-mode differentiation in scalar shifts of the
    inputs."""
    dim_b = dim if dim_b is None else dim_b
    t, u = pt.dscalar("t"), pt.dscalar("u")
    one = pt.constant(1.0, dtype="float64")
    # the kernel is built on inputs of unknown size, then given A and B: with sizes known a
    # stationary kernel may take the fused ARD distance Op (bayes_gp.kernels.metrics), which
    # has a pullback but none of its own pullback, so no second derivative
    A, B = pt.as_tensor_variable(A), pt.as_tensor_variable(B)
    Av, Bv = pt.matrix("A", dtype=A.dtype), pt.matrix("B", dtype=B.dtype)
    K = kernel(_shifted(Av, t, dim, input_dim), _shifted(Bv, u, dim_b, input_dim))
    table = {}
    row = K
    for p in range(order + 1):
        if p:
            row = pushforward(row, t, one, disconnected_outputs="ignore")
        col = row
        for q in range(order_b + 1):
            if q:
                col = pushforward(col, u, one, disconnected_outputs="ignore")
            table[(p, q)] = col
    zero = pt.constant(0.0, dtype="float64")
    keys = list(table)
    *values, K0 = graph_replace(
        [*(table[k] for k in keys), K], {t: zero, u: zero, Av: A, Bv: B}, strict=False
    )
    return {k: v * pt.ones_like(K0) for k, v in zip(keys, values, strict=True)}


def _metric(base, input_dim: int, i: int, j: int):
    r""":math:`M_{ij}` of a stationary kernel's distance :math:`r^2 = \tau^\top M \tau`, from
    its squared distances between unit vectors: :math:`M_{ii} = r^2(e_i, 0)`,
    :math:`M_{ij} = (M_{ii} + M_{jj} - r^2(e_i, e_j)) / 2`."""

    def unit(k):
        e = np.zeros((1, input_dim))
        if k is not None:
            e[0, k] = 1.0
        return pt.as_tensor_variable(e)

    def sq(a, b):
        sa, sb = base._slice(unit(a), unit(b))
        return base.square_dist(sa, sb)[0, 0]

    if i == j:
        return sq(i, None)
    return 0.5 * (sq(i, None) + sq(j, None) - sq(i, j))


def _zero_lag(g: dict, metric, dims: list[int]):
    r""":math:`\partial_{i_1}\cdots\partial_{i_n}\kappa(0)` of
    :math:`\kappa(\tau) = g(\sqrt{\tau^\top M\tau})` along the input dimensions ``dims``
    (``n`` = 2 or 4), from the Taylor series
    :math:`\kappa = g(0) + g''(0)\,s/2 + g''''(0)\,s^2/24 + \dots`, :math:`s = \tau^\top M\tau`:

    .. math::
       \partial_i\partial_j\kappa(0) = g''(0) M_{ij}, \qquad
       \partial_i\partial_j\partial_k\partial_l\kappa(0) = \tfrac13 g''''(0)
       (M_{ij}M_{kl} + M_{ik}M_{jl} + M_{il}M_{jk}),

    :math:`g''(0) M_{dd}` and :math:`g''''(0) M_{dd}^2` along one dimension (module
    docstring)."""
    if len(dims) == 2:
        return g[2] * metric(dims[0], dims[1])
    i, j, k, m = dims
    pairs = metric(i, j) * metric(k, m) + metric(i, k) * metric(j, m) + metric(i, m) * metric(j, k)
    return g[4] / 3.0 * pairs


def _leaf_table(
    kernel, A, B, dim: int, order: int, input_dim: int, order_b: int, dim_b: int | None = None
):
    dim_b = dim if dim_b is None else dim_b
    table = _autodiff_table(kernel, A, B, dim, order, input_dim, order_b, dim_b)
    kind = _leaf_kind(kernel)
    if kind == "autodiff":
        return table
    base = kernel.base if isinstance(kernel, Substituted) else kernel
    sa, sb = base._slice(A, B)
    r2 = base.square_dist(sa, sb)
    if isinstance(kernel, Substituted):
        r2 = kernel._sub(r2)
    metrics: dict = {}

    def metric(i: int, j: int):
        key = (min(i, j), max(i, j))
        if key not in metrics:
            value = _metric(base, input_dim, *key)
            metrics[key] = kernel._sub(value) if isinstance(kernel, Substituted) else value
        return metrics[key]

    if kind == "matern":
        _, g2, g4 = _matern_moments(kernel)
        # g2/g4 NaN where the moment does not exist: check_differentiable refuses those orders
        g = {2: g2, 4: g4}
    else:
        top = order + order_b
        derivs = _profile_derivatives(kernel, top) if top >= 2 else []
        g = {n: derivs[n - 1] for n in range(2, top + 1, 2)}
    coincident = pt.eq(r2, 0.0)
    out = {}
    for (p, q), value in table.items():
        n = p + q
        if n == 0:
            out[(p, q)] = value
            continue
        if n % 2:
            at_zero = 0.0  # odd derivatives of an even function vanish at zero lag
        elif isinstance(g[n], float) and not np.isfinite(g[n]):
            out[(p, q)] = value  # the moment does not exist (refused by check_differentiable)
            continue
        else:
            at_zero = (-1.0) ** q * _zero_lag(g, metric, [dim] * p + [dim_b] * q)
        out[(p, q)] = pt.switch(coincident, at_zero, value)
    return out


def _constant_table(c, order: int, order_b: int):
    c = pt.as_tensor_variable(c)
    if c.ndim > 1:
        raise NotImplementedError(
            "derivatives of a kernel combined with a matrix are not available; combine kernels "
            "with scalars and other kernels"
        )
    return {(p, q): (c if p == q == 0 else 0.0)
            for p in range(order + 1) for q in range(order_b + 1)}  # fmt: skip


#: Graph building without PyTensor's per-node stack traces (``traceback__limit=0``): the nested
#: forward-mode graphs create tens of thousands of nodes, and extracting a Python stack for each
#: took 3 of the 7 s to build the joint covariance of values and derivatives of a sum of kernels.
_NO_TRACES = pytensor.config.change_flags(traceback__limit=0)


@_NO_TRACES
def derivative_table(
    kernel,
    A,
    B,
    dim: int,
    order: int,
    input_dim: int,
    order_b: int | None = None,
    dim_b: int | None = None,
) -> dict:
    r"""The graphs :math:`\partial^p_{a_d}\partial^q_{b_e} k(A, B)` for :math:`0 \le p \le`
    ``order``, :math:`0 \le q \le` ``order_b`` (default ``order``), each ``(m, n)``, as a
    dict ``{(p, q): graph}`` (module docstring); :math:`d` is ``dim`` and :math:`e` is
    ``dim_b`` (default ``dim``): with :math:`d \ne e` the mixed derivatives
    :math:`\partial^2 k / \partial a_d \partial b_e` are the covariances between the
    gradient's components (R&W §9.4, Solak et al. 2003).

    Parameters
    ----------
    kernel : pm.gp.cov.Covariance
        Any kernel: sums and products are differentiated term by term and by Leibniz's rule,
        their factors by automatic differentiation (with the zero-lag limits of stationary
        kernels written through :math:`r`).
    A, B : TensorVariable (m, D), (n, D)
        The inputs: derivatives are taken with respect to the rows of ``A`` (p times) and of
        ``B`` (q times) in column ``dim``.
    order : int
        Highest order in each argument, at most :data:`MAX_ORDER`.
    input_dim : int
        ``D``.
    order_b : int, optional
        Highest order in ``B``: 0 for the cross-covariances of a derivative with :math:`f`.
    dim_b : int, optional
        The input dimension of the derivatives in ``B`` (default ``dim``).
    """
    order_b = order if order_b is None else order_b
    dim_b = dim if dim_b is None else dim_b
    kind, items = _children(kernel)
    if kind == "sub":
        inner = derivative_table(items, A, B, dim, order, input_dim, order_b, dim_b)
        return {k: kernel._sub(v) if isinstance(v, pt.TensorVariable) else v
                for k, v in inner.items()}  # fmt: skip
    if kind == "leaf":
        return _leaf_table(kernel, A, B, dim, order, input_dim, order_b, dim_b)
    tables = [
        derivative_table(f, A, B, dim, order, input_dim, order_b, dim_b)
        if isinstance(f, pm.gp.cov.BaseCovariance)
        else _constant_table(f, order, order_b)
        for f in items
    ]
    total = tables[0]
    for nxt in tables[1:]:
        if kind == "add":
            total = {k: total[k] + nxt[k] for k in total}
        else:
            total = {
                (p, q): sum(
                    comb(p, i) * comb(q, j) * total[(i, j)] * nxt[(p - i, q - j)]
                    for i in range(p + 1)
                    for j in range(q + 1)
                )
                for (p, q) in total
            }
    return total


@_NO_TRACES
def mean_derivative(mean_func, A, dim: int, order: int, input_dim: int):
    r""":math:`\partial^{order} m(A) / \partial a_d^{order}` of a mean function, ``(m,)``: the
    slope :math:`w_d` of a linear mean for order 1, 0 for a constant one."""
    t = pt.dscalar("t")
    one = pt.constant(1.0, dtype="float64")
    out = pt.as_tensor_variable(mean_func(_shifted(A, t, dim, input_dim))) * pt.ones(A.shape[0])
    for _ in range(order):
        out = pushforward(out, t, one, disconnected_outputs="ignore")
    return graph_replace(out, {t: pt.constant(0.0, dtype="float64")}, strict=False) * pt.ones(
        A.shape[0]
    )
