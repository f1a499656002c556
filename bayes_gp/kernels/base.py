r"""Base classes of the kernel catalogue.

Every kernel is a PyMC covariance function (a subclass of :class:`pymc.gp.cov.Covariance`), so it
works inside ``pm.gp.Marginal`` / ``pm.gp.Latent``, combines with ``+`` and ``*`` (also with PyMC's
own kernels and with random variables), honours ``active_dims`` and builds PyTensor graphs that every
backend (C, numba, JAX) can compile and differentiate.

Kernels are immutable: their attributes cannot be reassigned after construction; build a new kernel
instead. Invalid parameters that are known when the kernel is built raise ``ValueError`` naming the
parameter.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.graph.replace import graph_replace

from bayes_gp._validation import check_integer_in
from bayes_gp.kernels.metrics import FactorAnalysis, LengthScale, Metric, make_metric

__all__ = [
    "Kernel",
    "Stationary",
    "Substituted",
    "safe_sqrt",
    "KernelMeta",
    "factors",
    "smoothness",
]


class KernelMeta(type):
    """Metaclass that freezes a kernel once its outermost ``__init__`` has run."""

    def __call__(cls, *args, **kwargs):
        obj = super().__call__(*args, **kwargs)
        object.__setattr__(obj, "_frozen", True)
        return obj


def safe_sqrt(r2: pt.TensorVariable) -> pt.TensorVariable:
    r"""Square root with a finite (zero) gradient at 0.

    ``sqrt`` has an infinite derivative at 0, so ``grad`` of a kernel through ``sqrt(r2)`` would be
    ``nan`` on the diagonal of a Gram matrix. The double ``switch`` keeps the value exact
    (no ``+1e-12`` offset as in PyMC's ``Stationary._sqrt``) and the gradient finite.
    """
    positive = pt.gt(r2, 0.0)
    return pt.switch(positive, pt.sqrt(pt.switch(positive, r2, 1.0)), 0.0)


#: The smoothness of PyMC's own Matérn-class kernels, which cannot declare it themselves.
_PYMC_SMOOTHNESS: tuple[tuple[type, float], ...] = (
    (pm.gp.cov.ExpQuad, np.inf),
    (pm.gp.cov.Matern52, 2.5),
    (pm.gp.cov.Matern32, 1.5),
    (pm.gp.cov.Matern12, 0.5),
)


def smoothness(kernel) -> float | None:
    """The Matérn smoothness :math:`\nu` a kernel declares (:attr:`Kernel.smoothness`), or that
    of a PyMC squared-exponential / Matérn kernel; ``None`` for any other kernel."""
    declared = getattr(kernel, "smoothness", None)
    if declared is not None:
        return float(declared)
    for cls, nu in _PYMC_SMOOTHNESS:
        if isinstance(kernel, cls):
            return nu
    return None


def factors(kernel):
    """The terms and factors of a sum or product of kernels, recursively (the kernel itself when
    it is neither). PyMC keeps them in the private ``_factor_list`` of its ``Add`` / ``Prod``:
    this reads it, and so does :func:`bayes_gp.kernels.lags.translation_invariant`, which also
    needs the constant (non-kernel) factors that this skips. The factors of a
    :class:`Substituted` kernel are its base's, with the same substitution."""
    if isinstance(kernel, Substituted):
        for f in factors(kernel.base):
            yield Substituted(f, kernel.mapping)
    elif isinstance(kernel, pm.gp.cov.Combination):
        for f in kernel._factor_list:
            if isinstance(f, pm.gp.cov.Covariance):
                yield from factors(f)
    else:
        yield kernel


class Substituted(pm.gp.cov.Covariance):
    """A kernel whose graphs have some variables replaced: ``base``'s covariance, spectral density
    and tensor attributes with every key of ``mapping`` replaced by its value.

    This is how a kernel object built with unnamed priors (``Matern32(1, ls=pm.Gamma.dist(2,
    1))``) enters a model: the model registers a copy of each prior under a name and evaluates
    the kernel with the copies, so the user's kernel object stays unchanged and can build any
    number of models (:func:`bayes_gp.kernels.catalogue.kernel_spec`).
    """

    def __init__(self, base: pm.gp.cov.Covariance, mapping):
        # `base` slices its own inputs: this wrapper passes them on whole, and only reports the
        # base's active dimensions (the Hilbert-space approximation reads them)
        pm.gp.cov.Covariance.__init__(self, base.input_dim, base.active_dims)
        self.base = base
        # each replacement in its variable's dtype (PyTensor makes 0.5 a float32 constant)
        self.mapping = {k: pt.as_tensor_variable(v).astype(k.dtype) for k, v in mapping.items()}

    def _sub(self, value):
        if isinstance(value, pt.TensorVariable) and self.mapping:
            return graph_replace(value, self.mapping, strict=False)
        return value

    def full(self, X, Xs=None):
        return self._sub(self.base(X, Xs))

    def diag(self, X):
        return self._sub(self.base(X, diag=True))

    def power_spectral_density(self, omega):
        return self._sub(self.base.power_spectral_density(omega))

    @property
    def smoothness(self) -> float | None:
        """The base kernel's Matérn smoothness (:func:`smoothness`)."""
        return smoothness(self.base)

    def __getattr__(self, name):
        # hyperparameters read by name (``ls``, ``period``) come substituted; only called for
        # names the wrapper itself does not have
        if name in ("base", "mapping") or name.startswith("__"):
            raise AttributeError(name)
        return self._sub(getattr(self.base, name))

    def __repr__(self) -> str:
        return f"Substituted({self.base!r}, {len(self.mapping)} variable(s))"


def _normalise_active_dims(input_dim: int, active_dims: Sequence[int] | None) -> np.ndarray:
    input_dim = check_integer_in("input_dim", input_dim, range(1, 1 << 31))
    if active_dims is None:
        return np.arange(input_dim)
    dims = np.atleast_1d(np.asarray(active_dims))
    if dims.ndim != 1 or dims.size == 0 or not np.issubdtype(dims.dtype, np.integer):
        raise ValueError(
            f"`active_dims` must be a non-empty sequence of integers, got {active_dims!r}"
        )
    if dims.min() < 0 or dims.max() >= input_dim:
        raise ValueError(
            f"`active_dims` {dims.tolist()} must lie in 0..{input_dim - 1} for input_dim={input_dim}"
        )
    if len(set(dims.tolist())) != dims.size:
        raise ValueError(
            f"`active_dims` has repeated entries: {dims.tolist()}. Each input dimension may "
            "appear once: a repeated dimension would enter the distance twice, which is the "
            "same kernel with that dimension's length-scale divided by the square root of its "
            "count; give it once and scale `ls` instead"
        )
    return dims.astype(int)


class Kernel(pm.gp.cov.Covariance, metaclass=KernelMeta):
    """Base class of every bayes_gp kernel.

    Parameters
    ----------
    input_dim : int
        Number of columns of the input matrix ``X``.
    active_dims : sequence of int, optional
        Columns of ``X`` the kernel acts on (default: all), each at most once: a repeated
        column would enter the distance twice, which is the same kernel with that column's
        length-scale divided by the square root of its count, so a repeat is refused with that
        advice (``ValueError``).
    """

    #: Mean-square smoothness :math:`\nu` of a Matérn-class stationary kernel (:math:`\infty` for
    #: the squared exponential), which sets the Hilbert-space approximation's default basis size
    #: and boundary (Riutort-Mayol et al. 2022); ``None``: not of that class (no default rule).
    smoothness: float | None = None

    def __init__(self, input_dim: int, active_dims: Sequence[int] | None = None):
        dims = _normalise_active_dims(input_dim, active_dims)
        # Called explicitly: in subclasses that also derive from a PyMC kernel, `super()` here would
        # be that kernel's `__init__`, with a different signature.
        pm.gp.cov.Covariance.__init__(self, int(input_dim), dims)

    def __setattr__(self, name, value):
        if getattr(self, "_frozen", False):
            raise AttributeError(
                f"{type(self).__name__} kernels are immutable: cannot set `{name}`; build a new kernel"
            )
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(input_dim={self.input_dim}, active_dims={self.active_dims.tolist()})"

    def _check_input(self, X, name: str) -> pt.TensorVariable:
        if isinstance(X, np.ndarray | list | tuple):
            arr = np.asarray(X, dtype=float)
            if arr.ndim != 2:
                raise ValueError(
                    f"`{name}` must be a 2-D array (n, input_dim), got shape {arr.shape}"
                )
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"`{name}` contains NaN or infinite values")
            X = arr
        X = pt.as_tensor_variable(X)
        if X.ndim != 2:
            raise ValueError(
                f"`{name}` must be a 2-D array (n, input_dim), got {X.ndim} dimension(s)"
            )
        ncol = X.type.shape[1]
        if ncol is not None and ncol != self.input_dim:
            raise ValueError(
                f"`{name}` has {ncol} column(s) but the kernel was built with input_dim={self.input_dim}"
            )
        return X

    def _slice(self, X, Xs=None):
        X = self._check_input(X, "X")[:, self.active_dims]
        if Xs is not None:
            Xs = self._check_input(Xs, "Xs")[:, self.active_dims]
        return X, Xs


class Stationary(Kernel, pm.gp.cov.Stationary):
    r"""Base class of stationary kernels :math:`k(\mathbf{x}, \mathbf{x}') = g(r)`.

    :math:`r` is the scaled distance of :mod:`bayes_gp.kernels.metrics`: isotropic (scalar ``ls``),
    ARD (vector ``ls``), or factor analysis (``metric=FactorAnalysis(Lambda, psi)``).
    Subclasses implement ``full_from_distance(r2, squared=True)`` and, where the spectral density
    has a closed form, ``_unit_spectral_density(w, D)`` for the isotropic kernel with
    :math:`\ell = 1` in PyMC's angular-frequency convention
    :math:`k(\tau) = (2\pi)^{-D}\int S(\omega) e^{i\omega^\top\tau} d\omega`.
    """

    def __init__(
        self,
        input_dim: int,
        ls=None,
        ls_inv=None,
        active_dims: Sequence[int] | None = None,
        *,
        metric: Metric | None = None,
    ):
        Kernel.__init__(self, input_dim, active_dims)
        self.metric = make_metric(ls, ls_inv, metric, self.n_dims)
        # PyMC's HSGP helpers and user code read `.ls`; under a factor-analysis metric there is no
        # single length-scale.
        self.ls = self.metric.ls if isinstance(self.metric, LengthScale) else None

    def __repr__(self) -> str:
        if isinstance(self.metric, FactorAnalysis):
            m = "metric=FactorAnalysis"
        else:
            m = "ls=" + ("ARD" if self.metric.is_ard else "scalar")
        return f"{type(self).__name__}(input_dim={self.input_dim}, {m})"

    # -- distances -------------------------------------------------------------------------
    def square_dist(self, X, Xs=None):
        return self.metric.square_dist(X, Xs)

    def euclidean_dist(self, X, Xs=None):
        return safe_sqrt(self.square_dist(X, Xs))

    def _sqrt(self, r2):
        return safe_sqrt(r2)

    def full(self, X, Xs=None):
        X, Xs = self._slice(X, Xs)
        return self.full_from_distance(self.square_dist(X, Xs), squared=True)

    def diag(self, X):
        X, _ = self._slice(X, None)
        return pt.ones_like(X[:, 0]) * self.full_from_distance(pt.zeros((1, 1)), squared=True)[0, 0]

    # -- spectral density (R&W eq. 4.6) ---------------------------------------------------
    def _unit_spectral_density(self, w, D: int):
        raise NotImplementedError(
            f"{type(self).__name__} has no closed-form spectral density; it cannot be used with "
            "pm.gp.HSGP"
        )

    def power_spectral_density(self, omega):
        r"""Spectral density :math:`S(\omega)` at angular frequencies ``omega`` (shape ``(m, D)``).

        .. math:: S(\omega) = |M|^{-1/2}\, S_1\!\left(\sqrt{\omega^\top M^{-1}\omega}\right)

        with :math:`S_1` the density of the unit-length-scale isotropic kernel (R&W eq. 4.6).
        """
        omega = pt.as_tensor_variable(omega)
        jac, w = self.metric.spectral_transform(omega)
        return jac * self._unit_spectral_density(w, self.n_dims)
