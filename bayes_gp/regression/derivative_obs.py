r"""Derivative observations: gradient-enhanced GP regression (R&W §9.4, eq. 9.1; Solak et al. 2003).

Differentiation is linear, so values of :math:`f` and of its partial derivatives are jointly
Gaussian under a GP prior, with the covariances

.. math::
   \operatorname{cov}\left(f(x), \frac{\partial f(x')}{\partial x'_e}\right)
       = \frac{\partial k(x, x')}{\partial x'_e}, \qquad
   \operatorname{cov}\left(\frac{\partial f(x)}{\partial x_d},
                           \frac{\partial f(x')}{\partial x'_e}\right)
       = \frac{\partial^2 k(x, x')}{\partial x_d\,\partial x'_e}

(R&W eq. 9.1; Solak, Murray-Smith, Leithead, Leith & Rasmussen 2003, "Derivative observations
in Gaussian process models of dynamic systems"), and the mean of :math:`\partial f/\partial x_e`
is :math:`\partial m / \partial x_e`. With :math:`n` noisy values :math:`y = f(X) + \epsilon` and
:math:`m` noisy derivatives :math:`g_j = \partial f(\tilde x_j)/\partial x_{e_j} + \delta_j` at
their own inputs :math:`\tilde X` (``dX``), the stacked vector :math:`z = [y; g]` is

.. math::
   z \sim N\left(\begin{bmatrix} m(X) \\ \partial m(\tilde X) \end{bmatrix},\
   \begin{bmatrix} K + \sigma^2 I & K_{f\partial} \\ K_{f\partial}^\top &
   K_{\partial\partial} + \sigma_\partial^2 I \end{bmatrix}\right),

:math:`\sigma_\partial` the derivatives' own noise (learned, fixed, or known per observation).
:class:`GradientLikelihood` declares this joint density as the model's observed variable (the
dense Cholesky of :math:`C`, :math:`(n + m)^3`) and answers the exact likelihood's questions
from it: the predictions of :math:`f` (R&W eqs. 2.25–2.26 with the joint covariance: the
cross-covariances of :math:`f_*` with :math:`z` are :math:`[k(X, x_*);\ \partial_{e_j}
k(\tilde x_j, x_*)]`), and, through
:meth:`~bayes_gp.regression.gpr.GPRegression.predict_derivative`, those of its derivatives.
The kernel's derivatives are :func:`bayes_gp.kernels.derivatives.derivative_table`'s.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from bayes_gp._validation import as_inputs, noise_sds
from bayes_gp.inference.typeii import function_of_values
from bayes_gp.kernels import derivatives
from bayes_gp.predictive import loo_log_density
from bayes_gp.solvers.exact import FACTOR_CACHE_BYTES, ExactLikelihood, check_dense_memory
from bayes_gp.solvers.likelihood import marginal_normal

__all__ = ["DerivativeObservations", "GradientLikelihood", "derivative_observations"]


@dataclasses.dataclass(frozen=True)
class DerivativeObservations:
    """Validated derivative observations, ordered by the input dimension they differentiate
    along (stable: the given order within a dimension).

    Attributes
    ----------
    X : ndarray (m, D)
        Their inputs :math:`\\tilde x_j`.
    values : ndarray (m,)
        The observed derivatives :math:`g_j`.
    dims : ndarray (m,) of int
        The input dimension :math:`e_j` of each.
    order : ndarray (m,) of int
        ``values[i]`` is the ``order[i]``-th derivative observation as given (after full
        gradients are flattened row by row).
    known_sd : ndarray (m,) or None
        Known noise standard deviations (``d_noise`` an array).
    fixed_sd : float or None
        One fixed noise standard deviation (``d_noise`` a number); both None: learned
        (``sigma_d``).
    scale : float
        Their root mean square (the scale of the default prior of ``sigma_d``).
    """

    X: np.ndarray
    values: np.ndarray
    dims: np.ndarray
    order: np.ndarray
    known_sd: np.ndarray | None
    fixed_sd: float | None
    scale: float

    @property
    def m(self) -> int:
        """Number of derivative observations."""
        return int(self.values.shape[0])

    @property
    def learned(self) -> bool:
        """Whether their noise standard deviation ``sigma_d`` is learned."""
        return self.known_sd is None and self.fixed_sd is None

    def groups(self) -> list[tuple[int, slice]]:
        """``(dimension, rows)`` for each input dimension observed, in order."""
        out = []
        for e in np.unique(self.dims):
            rows = np.flatnonzero(self.dims == e)
            out.append((int(e), slice(int(rows[0]), int(rows[-1]) + 1)))
        return out


def _dims(d_dims, m: int, D: int, names: list[str]) -> np.ndarray:
    """``d_dims`` as ``m`` column indices (ints or feature names)."""
    if d_dims is None:
        if D != 1:
            raise ValueError(
                f"the inputs have {D} columns: say which one each derivative in `dy` is along, "
                "`d_dims=` (a column index or feature name, or one per derivative), or pass full "
                f"gradients `dy` of shape (m, {D})"
            )
        return np.zeros(m, dtype=int)
    raw = np.atleast_1d(np.asarray(d_dims, dtype=object))
    if raw.ndim != 1 or raw.shape[0] not in (1, m):
        raise ValueError(
            f"`d_dims` must be one column (index or name) or one per derivative ({m}), got "
            f"shape {raw.shape}"
        )
    out = []
    for v in raw:
        if isinstance(v, str):
            if v not in names:
                raise ValueError(f"`d_dims` names {v!r}, not an input; the inputs are {names}")
            out.append(names.index(v))
        elif isinstance(v, bool) or not isinstance(v, int | np.integer) or not 0 <= v < D:
            raise ValueError(f"`d_dims` must hold column indices in 0..{D - 1}, got {v!r}")
        else:
            out.append(int(v))
    dims = np.asarray(out, dtype=int)
    return np.full(m, dims[0]) if dims.shape[0] == 1 else dims


def derivative_observations(
    dX, dy, d_dims, d_noise, D: int, names: list[str], fallback_scale: float
) -> DerivativeObservations | None:
    """Validate ``GPRegression``'s ``dX``, ``dy``, ``d_dims``, ``d_noise`` (its docstring);
    ``None`` when there are none. ``ValueError`` for missing halves, shape mismatches, values
    that are not finite and negative noise, before any graph is built."""
    if dX is None and dy is None:
        if d_dims is not None or d_noise is not None:
            raise ValueError("`d_dims` and `d_noise` describe derivative observations: give `dX` "
                             "and `dy` too")  # fmt: skip
        return None
    if dX is None or dy is None:
        raise ValueError("derivative observations need both `dX` (their inputs) and `dy` "
                         "(the observed derivatives)")  # fmt: skip
    Xd, _ = as_inputs(dX, "dX")
    if Xd.shape[1] != D:
        raise ValueError(f"`dX` has {Xd.shape[1]} column(s) but `X` has {D}")
    try:
        g = np.asarray(getattr(dy, "to_numpy", lambda: dy)(), dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`dy` must be numeric: {exc}") from None
    if not np.all(np.isfinite(g)):
        bad = np.flatnonzero(~np.isfinite(g.ravel()))
        raise ValueError(
            f"`dy` contains NaN or infinite values ({bad.shape[0]}, the first at flat index "
            f"{int(bad[0])}): leave those derivatives out"
        )
    if g.ndim == 2 and D == 1 and g.shape[1] == 1:
        g = g[:, 0]
    if g.ndim == 1:
        if g.shape[0] != Xd.shape[0]:
            raise ValueError(
                f"`dX` has {Xd.shape[0]} rows but `dy` has {g.shape[0]} derivatives: one input "
                "row per derivative (or full gradients, `dy` of shape (m, D))"
            )
        dims = _dims(d_dims, g.shape[0], D, names)
        X_all, values = Xd, g
    elif g.ndim == 2:
        if g.shape != (Xd.shape[0], D):
            raise ValueError(
                f"full gradients `dy` must have shape (rows of dX, D) = {(Xd.shape[0], D)}, got "
                f"{g.shape}"
            )
        if d_dims is not None:
            raise ValueError("`dy` of shape (m, D) holds full gradients: leave `d_dims` out")
        X_all, values = np.repeat(Xd, D, axis=0), g.ravel()
        dims = np.tile(np.arange(D), Xd.shape[0])
    else:
        raise ValueError(f"`dy` must be 1-D (m,) or full gradients (m, D), got shape {g.shape}")
    m = values.shape[0]
    if m == 0:
        raise ValueError("`dy` is empty: leave `dX` and `dy` out for no derivative observations")
    known, fixed = None, None
    if d_noise is not None and np.ndim(d_noise) == 0:
        fixed = float(noise_sds("d_noise", d_noise, 1)[0])
    elif d_noise is not None:
        sd = np.asarray(d_noise, dtype=float) if not isinstance(d_noise, str) else d_noise
        if np.ndim(sd) == 2 and np.shape(sd) != g.shape:
            raise ValueError(f"`d_noise` must have the shape of `dy` {g.shape}, got {np.shape(sd)}")
        known = noise_sds("d_noise", np.ravel(sd), m)
    order = np.argsort(dims, kind="stable")
    rms = float(np.sqrt(np.mean(values**2)))
    return DerivativeObservations(
        X=np.ascontiguousarray(X_all[order]),
        values=values[order],
        dims=dims[order],
        order=order,
        known_sd=None if known is None else known[order],
        fixed_sd=fixed,
        scale=rms if rms > 0 else float(fallback_scale),
    )


class GradientLikelihood(ExactLikelihood):
    """The joint Gaussian of values and derivatives (module docstring), registered as the
    observed variable ``name`` (the stacked vector :math:`[y; g]`, dims ``dims``): the
    exact likelihood's interface with :math:`C` the joint covariance.

    Parameters
    ----------
    obs : DerivativeObservations
        The derivatives, their inputs and noise.
    sigma_d : scalar or TensorVariable
        Their shared noise standard deviation (0 with known ``obs.known_sd``).
    Others as :class:`~bayes_gp.solvers.exact.ExactLikelihood`; the absolute ``jitter`` is
    added to the whole diagonal of the joint covariance.
    """

    _loo_threadsafe = False  # its own compiled functions are not locked

    def __init__(self, name: str, X, y, obs: DerivativeObservations, cov, mean_func, sigma,
                 sigma_d, jitter, dims, *, known_var=None):  # fmt: skip
        self.X, self.values = X, np.asarray(y, dtype=np.float64)
        self.obs = obs
        self.y = np.concatenate([self.values, obs.values])  # the stacked [y; g]
        self.cov, self.mean_func = cov, mean_func
        self.sigma, self.jitter = pt.as_tensor_variable(sigma), jitter
        self.sigma_d = pt.as_tensor_variable(sigma_d)
        self.known_var = None if known_var is None else np.asarray(known_var, dtype=np.float64)
        self.n, self.D = X.shape
        N = self.n + obs.m
        check_dense_memory(N)
        derivatives.check_differentiable(cov, 1)  # the reason, before any derivative graph
        #: the joint prior mean and covariance (with the noise and jitter) as graphs in the
        #: model's random variables
        self.joint_mean, self.joint_C = self._joint_mean(), self._joint_C()
        marginal_normal(name, self.joint_mean, self.joint_C, observed=self.y, dims=dims)
        self.rvs = list(pm.modelcontext(None).free_RVs)
        self._fns: dict = {}
        self._factors: OrderedDict = OrderedDict()
        self._max_factors = max(1, FACTOR_CACHE_BYTES // (8 * N**2))

    # --------------------------------------------------------------- graphs
    def _groups(self):
        return [(e, pt.as_tensor_variable(self.obs.X[rows])) for e, rows in self.obs.groups()]

    def _d_mean(self):
        """:math:`\\partial m / \\partial x_{e_j}` at the derivative inputs, ``(m,)``."""
        parts = [derivatives.mean_derivative(self.mean_func, Xe, e, 1, self.D)
                 for e, Xe in self._groups()]  # fmt: skip
        return pt.concatenate(parts)

    def _joint_mean(self):
        return pt.concatenate([self._mean(pt.as_tensor_variable(self.X)), self._d_mean()])

    def cross_f(self, A):
        """:math:`\\operatorname{cov}(f(A), g) = \\partial k(A, \\tilde x_j)/\\partial
        \\tilde x_{j, e_j}`, ``(len(A), m)``."""
        parts = [derivatives.derivative_table(self.cov, A, Xe, e, 0, self.D, order_b=1)[(0, 1)]
                 for e, Xe in self._groups()]  # fmt: skip
        return pt.concatenate(parts, axis=1)

    def cross_derivative(self, A, dim: int, order: int):
        """:math:`\\operatorname{cov}(\\partial^{o} f(A)/\\partial a_d^{o}, g) =
        \\partial^{o}_{a_d}\\partial_{b_{e_j}} k(A, \\tilde x_j)`, ``(len(A), m)``."""
        parts = [
            derivatives.derivative_table(self.cov, A, Xe, dim, order, self.D, 1, e)[(order, 1)]
            for e, Xe in self._groups()
        ]
        return pt.concatenate(parts, axis=1)

    def _K_dd(self):
        """:math:`\\partial^2 k(\\tilde x_i, \\tilde x_j) / \\partial x_{e_i} \\partial
        x'_{e_j}`, ``(m, m)``: one block per pair of dimensions, the lower ones transposed."""
        groups = self._groups()
        blocks: dict = {}
        for a, (e, Xe) in enumerate(groups):
            for b, (f, Xf) in enumerate(groups):
                if b < a:
                    blocks[(a, b)] = blocks[(b, a)].T
                    continue
                tab = derivatives.derivative_table(self.cov, Xe, Xf, e, 1, self.D, order_b=1,
                                                   dim_b=f)  # fmt: skip
                blocks[(a, b)] = tab[(1, 1)]
        rows = [pt.concatenate([blocks[(a, b)] for b in range(len(groups))], axis=1)
                for a in range(len(groups))]  # fmt: skip
        return pt.concatenate(rows, axis=0)

    def _joint_C(self):
        """The joint covariance (module docstring) plus the jitters."""
        Cff = self._C(self.X)
        Kfd = self.cross_f(pt.as_tensor_variable(self.X))
        d = pt.square(self.sigma_d) + self.jitter
        if self.obs.known_sd is not None:
            d = d + pt.as_tensor_variable(self.obs.known_sd**2)
        Kdd = self._K_dd() + pt.diag(d * pt.ones(self.obs.m))
        top = pt.concatenate([Cff, Kfd], axis=1)
        return pt.concatenate([top, pt.concatenate([Kfd.T, Kdd], axis=1)], axis=0)

    # ------------------------------------------------------------ numbers
    def _fn(self, key: str, build):
        """Compiled in :data:`~bayes_gp.kernels.derivatives.DERIVATIVE_MODE`, as the derivative
        predictions are: the graphs of the kernel's derivatives are large, and PyTensor's full
        rewrites took seconds on them for no faster evaluation."""
        if key not in self._fns:
            self._fns[key] = function_of_values(self.rvs, build, mode=derivatives.DERIVATIVE_MODE)
        return self._fns[key]

    def train(self, values) -> tuple[np.ndarray, np.ndarray]:
        """Joint prior mean ``(n + m,)`` and covariance of :math:`[y; g]`."""
        fn = self._fn("train", lambda _: [self.joint_mean, self.joint_C])
        return tuple(fn(*values, np.zeros((0, self.D))))

    def _cross(self, values, Xn):
        """``(cov([y; g], f(Xn)) (n + m, p), diag K(Xn), m(Xn), sigma^2)``."""
        X = pt.as_tensor_variable(self.X)

        def build(Xv):
            s2 = pt.square(self.sigma) * pt.ones(())
            Ks = pt.concatenate([self.cov(X, Xv), self.cross_f(Xv).T], axis=0)
            return [Ks, self.cov(Xv, diag=True), self._mean(Xv), s2]

        return self._fn("cross", build)(*values, Xn)

    def loo(self, values) -> np.ndarray:
        """Leave-one-out log predictive densities of the ``n`` values
        :math:`\\log p(y_i \\mid y_{-i}, g)` (R&W eqs. 5.10–5.12 on the joint covariance)."""
        return loo_log_density(self.factor(values)[1])[: self.n]


def sigma_d_prior(name: str, obs: DerivativeObservations):
    """The default prior of the derivatives' noise, :math:`\\sigma_\\partial \\sim
    \\operatorname{HalfNormal}(s_\\partial)`, :math:`s_\\partial` their root mean square (as
    :math:`\\sigma \\sim \\operatorname{HalfNormal}(s_y)` for the values)."""
    return pm.HalfNormal(name, sigma=np.float64(obs.scale))
