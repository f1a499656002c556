r"""Distance metrics for stationary kernels (R&W §4.2.1; PRML §6.4.4).

Every stationary kernel in the catalogue is a function of a scaled distance

.. math::

   r^2(\mathbf{x}, \mathbf{x}') = (\mathbf{x} - \mathbf{x}')^\top M (\mathbf{x} - \mathbf{x}'),

with one of three choices of :math:`M`:

* isotropic, :math:`M = \ell^{-2} I` (a scalar ``ls``);
* ARD, :math:`M = \operatorname{diag}(\ell_1^{-2}, \dots, \ell_D^{-2})` (a vector ``ls``);
* factor analysis, :math:`M = \Lambda\Lambda^\top + \Psi` with :math:`\Lambda` of shape ``(D, k)``
  and :math:`\Psi` diagonal positive (R&W §4.2.1.8).

Distances are computed from exact coordinate differences, not from the expansion
:math:`|x|^2 - 2x^\top x' + |x'|^2`, so a kernel agrees with its formula to rounding error even at
:math:`r \approx 0`. When the inputs are constants, the squared differences are constant-folded by
PyTensor and never recomputed while sampling hyperparameters.

That folded array has shape ``(n, m, D)``: :math:`8nmD` bytes, 8 GB at n = m = 10⁴, D = 10, held
by the compiled function, and the reverse mode builds another. So when the inputs have more than
:data:`FUSED_DISTANCE_MIN_ELEMENTS` coordinate differences, or at least
:data:`FUSED_DISTANCE_MIN_DIMS` dimensions, :class:`LengthScale` computes :math:`r^2` by the Op
:class:`~bayes_gp.kernels.ard_distance.ARDSquareDist` instead: the same exact differences, summed
dimension by dimension into the ``(n, m)`` result, recomputed at each evaluation (:math:`3nmD`
flops, small beside the :math:`n^3/3` of a Cholesky factor), with a gradient in ``ls`` (and in
the inputs) that needs no ``(n, m, D)`` array either. One-dimensional inputs up to that size,
and inputs whose sizes are unknown when the graph is built, keep the folded graph.
"""

from __future__ import annotations

import math

import numpy as np
import pytensor.tensor as pt

from bayes_gp._validation import as_parameter, check_positive, constant_value

__all__ = [
    "Metric",
    "LengthScale",
    "FactorAnalysis",
    "FUSED_DISTANCE_MIN_ELEMENTS",
    "FUSED_DISTANCE_MIN_DIMS",
]

#: :class:`LengthScale` computes :math:`r^2` with the Op
#: :class:`~bayes_gp.kernels.ard_distance.ARDSquareDist` when ``n * m * D`` (the size of the
#: coordinate-difference array a graph would fold) exceeds this: 2**22 differences, 32 MiB, e.g.
#: from about n = m = 650 at D = 10, or n = m = 2049 at D = 1. Below it, for one-dimensional inputs,
#: the folded constant is small and the difference graph is kept (PyTensor fuses it with the
#: kernel's elementwise expression).
FUSED_DISTANCE_MIN_ELEMENTS = 2**22

#: ... and at any size when the inputs have at least this many dimensions: there the Op is the
#: faster one in every backend, since the folded graph streams an ``(n, m, D)`` constant through
#: the kernel's expression and its reverse mode makes ``(n, m, D)`` temporaries (log density and
#: gradient of an ARD SE GP, one thread, 2026-11-27: n = 500, D = 5: 8.1 ms against 10.3 ms in
#: numba, 14.9 against 34.7 ms with the Python linker of type-II fits; n = 200, D = 2: 0.94
#: against 1.20 and 2.4 against 4.8 ms; equal at n = 50, D = 3 in numba). For D = 1 the folded
#: graph is as fast in numba and faster with the Python linker (n = 300: 4.3 against 4.8 ms).
FUSED_DISTANCE_MIN_DIMS = 2


def pairwise_diff(X: pt.TensorVariable, Xs: pt.TensorVariable | None) -> pt.TensorVariable:
    """Coordinate differences :math:`x_i - x'_j`, shape ``(n, m, D)``."""
    Xs = X if Xs is None else Xs
    return X[:, None, :] - Xs[None, :, :]


class Metric:
    """A quadratic form :math:`r^2 = (x - x')^\\top M (x - x')` on the active input dimensions."""

    n_dims: int

    def square_dist(self, X, Xs=None) -> pt.TensorVariable:
        """Matrix of squared scaled distances between the rows of ``X`` and ``Xs``."""
        return self.square_dist_from_diff(pairwise_diff(X, Xs))

    def square_dist_from_diff(self, diff) -> pt.TensorVariable:
        """Squared scaled distances from coordinate differences of shape ``(n, m, D)``."""
        raise NotImplementedError

    def spectral_transform(self, omega) -> tuple[pt.TensorVariable, pt.TensorVariable]:
        r"""Return ``(jacobian, norm)`` such that :math:`S(\omega) = J\,S_1(\|\omega\|_{M^{-1}})`.

        For :math:`k(\tau) = g(\sqrt{\tau^\top M\tau})`, the Fourier transform gives
        :math:`S(\omega) = |M|^{-1/2}\,S_g(\sqrt{\omega^\top M^{-1}\omega})`, where :math:`S_g` is the
        spectral density of the isotropic unit-length-scale kernel.
        """
        raise NotImplementedError


class LengthScale(Metric):
    r"""Isotropic (scalar ``ls``) or ARD (one ``ls`` per active dimension) metric.

    .. math:: r^2 = \sum_{d=1}^{D} \frac{(x_d - x'_d)^2}{\ell_d^2}
    """

    def __init__(self, ls, n_dims: int):
        check_positive("ls", ls)
        known = constant_value(ls)
        if known is not None and known.ndim > 1:
            raise ValueError(
                f"`ls` must be a scalar or a vector, got an array of shape {known.shape}"
            )
        if known is not None and known.ndim == 1 and known.shape[0] not in (1, n_dims):
            raise ValueError(
                f"`ls` has {known.shape[0]} entries but the kernel has {n_dims} active "
                "dimension(s): give one length-scale per active dimension (ARD) or a scalar"
            )
        self.ls = as_parameter(ls)
        self.n_dims = n_dims

    @property
    def is_ard(self) -> bool:
        return self.ls.ndim == 1

    def square_dist(self, X, Xs=None) -> pt.TensorVariable:
        """:math:`r^2` by :class:`~bayes_gp.kernels.ard_distance.ARDSquareDist` when the inputs'
        sizes are known and they have more than :data:`FUSED_DISTANCE_MIN_ELEMENTS` coordinate
        differences or at least :data:`FUSED_DISTANCE_MIN_DIMS` dimensions (module docstring),
        else from the ``(n, m, D)`` differences."""
        X = pt.as_tensor_variable(X)
        Xs_t = X if Xs is None else pt.as_tensor_variable(Xs)
        sizes = (X.type.shape[0], Xs_t.type.shape[0], X.type.shape[1])
        if all(s is not None for s in sizes) and (
            math.prod(sizes) > FUSED_DISTANCE_MIN_ELEMENTS or sizes[2] >= FUSED_DISTANCE_MIN_DIMS
        ):
            from bayes_gp.kernels.ard_distance import ard_square_dist

            return ard_square_dist(X, Xs_t, self.ls)
        return super().square_dist(X, Xs)

    def square_dist_from_diff(self, diff):
        return pt.sum(pt.square(diff) / pt.square(self.ls), axis=-1)

    def spectral_transform(self, omega):
        ls = pt.ones(self.n_dims) * self.ls
        return pt.prod(ls), pt.sqrt(pt.dot(pt.square(omega), pt.square(ls)))


class FactorAnalysis(Metric):
    r"""Factor-analysis metric :math:`M = \Lambda\Lambda^\top + \Psi` (R&W §4.2.1.8).

    Parameters
    ----------
    Lambda : array_like or TensorVariable, shape ``(D, k)``
        Columns are the :math:`k` directions along which the function varies fastest.
    psi : array_like or TensorVariable, shape ``(D,)``
        Diagonal of :math:`\Psi`, strictly positive (axis-aligned inverse squared length-scales).

    Notes
    -----
    Computed as :math:`r^2 = \|\Lambda^\top(x - x')\|^2 + \sum_d \psi_d (x_d - x'_d)^2`, which
    needs no factorisation of :math:`M`.
    """

    def __init__(self, Lambda, psi):
        check_positive("psi", psi)
        lam_known = constant_value(Lambda)
        psi_known = constant_value(psi)
        if lam_known is not None and lam_known.ndim != 2:
            raise ValueError(f"`Lambda` must be a (D, k) matrix, got shape {lam_known.shape}")
        if psi_known is not None and psi_known.ndim != 1:
            raise ValueError(f"`psi` must be a vector of length D, got shape {psi_known.shape}")
        self.Lambda = as_parameter(Lambda)
        self.psi = as_parameter(psi)
        if self.Lambda.ndim != 2:
            raise ValueError("`Lambda` must be a (D, k) matrix")
        if self.psi.ndim != 1:
            raise ValueError("`psi` must be a vector of length D")
        dims = {
            int(s) for s in (self.Lambda.type.shape[0], self.psi.type.shape[0]) if s is not None
        }
        if len(dims) > 1:
            raise ValueError(
                f"`Lambda` has {self.Lambda.type.shape[0]} rows but `psi` has "
                f"{self.psi.type.shape[0]} entries: both must equal the number of active dimensions"
            )
        self.n_dims = dims.pop() if dims else -1

    def bind(self, n_dims: int) -> FactorAnalysis:
        if self.n_dims not in (-1, n_dims):
            raise ValueError(
                f"the factor-analysis metric is {self.n_dims}-dimensional but the kernel has "
                f"{n_dims} active dimension(s)"
            )
        self.n_dims = n_dims
        return self

    @property
    def M(self) -> pt.TensorVariable:
        return pt.dot(self.Lambda, self.Lambda.T) + pt.diag(self.psi)

    def square_dist_from_diff(self, diff):
        return pt.sum(pt.square(pt.matmul(diff, self.Lambda)), axis=-1) + pt.sum(
            pt.square(diff) * self.psi, axis=-1
        )

    def spectral_transform(self, omega):
        M = self.M
        # omega^T M^{-1} omega for each row of omega, by a Cholesky solve (no explicit inverse).
        L = pt.linalg.cholesky(M)
        v = pt.linalg.solve_triangular(L, pt.transpose(omega), lower=True)
        norm = pt.sqrt(pt.sum(pt.square(v), axis=0))
        jac = 1.0 / pt.prod(pt.diag(L))
        return jac, norm


def make_metric(ls, ls_inv, metric: Metric | None, n_dims: int) -> Metric:
    """Build the metric of a stationary kernel from PyMC-style ``ls`` / ``ls_inv`` or ``metric``."""
    given = sum(v is not None for v in (ls, ls_inv, metric))
    if given != 1:
        raise ValueError("give exactly one of `ls`, `ls_inv` or `metric`")
    if metric is not None:
        if isinstance(metric, FactorAnalysis):
            return metric.bind(n_dims)
        if isinstance(metric, LengthScale):
            if metric.n_dims != n_dims:
                raise ValueError(
                    f"`metric` is {metric.n_dims}-dimensional but the kernel has {n_dims} "
                    "active dimension(s)"
                )
            return metric
        raise TypeError(f"`metric` must be a LengthScale or FactorAnalysis, got {metric!r}")
    if ls_inv is not None:
        check_positive("ls_inv", ls_inv)
        ls = 1.0 / np.asarray(ls_inv, float) if constant_value(ls_inv) is not None else 1.0 / ls_inv
    return LengthScale(ls, n_dims)
