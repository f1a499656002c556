r"""Positive semi-definiteness: checks on Gram matrices (R&W §4.1).

A function :math:`k` is a covariance function only if every Gram matrix
:math:`K_{ij} = k(x_i, x_j)` is positive semi-definite, i.e. all eigenvalues are
:math:`\ge 0`. Floating-point Gram matrices of valid kernels can have eigenvalues slightly below zero
(of order :math:`n\,\epsilon\,\lambda_{\max}`), so the checks allow a tolerance of that size.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.compile.mode import Mode
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

#: Compile mode for one-off evaluations of small graphs: PyTensor's pure-Python linker compiles in
#: milliseconds and never invokes a C compiler or numba (which take seconds to minutes per graph).
EAGER_MODE = Mode(linker="py", optimizer="fast_compile")

__all__ = [
    "PSDCheck",
    "check_psd",
    "NotPSDError",
    "NotPSDWarning",
    "assert_psd",
    "default_psd_tol",
    "jittered_cholesky",
    "plus_diagonal",
    "single_blas_thread",
]


class NotPSDError(ValueError):
    """A matrix that must be a covariance (positive semi-definite) is not."""


class NotPSDWarning(UserWarning):
    """A kernel that is not positive semi-definite in general was built."""


@dataclass(frozen=True)
class PSDCheck:
    """Result of :func:`check_psd`.

    Attributes
    ----------
    is_psd : bool
        ``min_eigenvalue >= -tolerance``.
    min_eigenvalue, max_eigenvalue : float
        Extreme eigenvalues of the symmetric part of the matrix.
    tolerance : float
        Allowance for rounding error used in the decision.
    asymmetry : float
        :math:`\\max_{ij}|K_{ij} - K_{ji}|` (a covariance matrix is symmetric).
    n : int
        Size of the matrix.
    """

    is_psd: bool
    min_eigenvalue: float
    max_eigenvalue: float
    tolerance: float
    asymmetry: float
    n: int

    def __bool__(self) -> bool:
        return self.is_psd


def default_psd_tol(n: int, max_abs_eig: float) -> float:
    """Rounding allowance :math:`100\\,n\\,\\epsilon\\,\\max(|\\lambda_{\\max}|, \\text{tiny})`."""
    return float(100.0 * max(n, 1) * np.finfo(float).eps * max(max_abs_eig, np.finfo(float).tiny))


def _eig_check(K: np.ndarray, tol: float | None) -> PSDCheck:
    K = np.asarray(K, dtype=float)
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"a Gram matrix must be square, got shape {K.shape}")
    if not np.all(np.isfinite(K)):
        raise ValueError("the Gram matrix contains NaN or infinite values")
    n = K.shape[0]
    if n == 0:
        return PSDCheck(True, 0.0, 0.0, 0.0, 0.0, 0)
    asym = float(np.max(np.abs(K - K.T)))
    eig = np.linalg.eigvalsh(0.5 * (K + K.T))
    lo, hi = float(eig[0]), float(eig[-1])
    tol = default_psd_tol(n, max(abs(lo), abs(hi))) if tol is None else float(tol)
    scale = max(float(np.max(np.abs(K))), np.finfo(float).tiny)
    symmetric = asym <= 1e-10 * scale
    return PSDCheck(bool(symmetric and lo >= -tol), lo, hi, tol, asym, n)


def check_psd(K_or_kernel, X=None, *, tol: float | None = None) -> PSDCheck:
    """Check that a Gram matrix, or a kernel's Gram matrix on inputs ``X``, is positive semi-definite.

    Parameters
    ----------
    K_or_kernel : array_like or kernel
        A square matrix, or a kernel (any ``pm.gp.cov.Covariance``) whose hyperparameters are
        fixed numbers.
    X : array_like, optional
        Inputs, shape ``(n, input_dim)``; required when a kernel is given.
    tol : float, optional
        Eigenvalues down to ``-tol`` count as zero. Default :func:`default_psd_tol`.

    Returns
    -------
    PSDCheck
        With ``is_psd`` and ``min_eigenvalue``; truthy when PSD.
    """
    import pymc as pm

    if isinstance(K_or_kernel, pm.gp.cov.BaseCovariance):
        if X is None:
            raise ValueError("`X` is required to check a kernel")
        X = np.asarray(X, dtype=float)
        if X.ndim == 1:
            X = X[:, None]
        graph = pt.as_tensor_variable(K_or_kernel(X))
        from pymc.pytensorf import rvs_in_graph

        if rvs_in_graph(graph):
            raise ValueError(
                "the kernel depends on random variables: give fixed hyperparameter values, or "
                "evaluate the Gram matrix yourself and pass it"
            )
        graph = _without_psd_guards(graph)
        K = pytensor.function([], graph, mode=EAGER_MODE)()
    else:
        if X is not None:
            raise ValueError("`X` is only used when a kernel is given")
        K = K_or_kernel
    return _eig_check(K, tol)


def _without_psd_guards(graph):
    """``graph`` with every :class:`AssertPSD` guard replaced by its input: a kernel that is not
    PSD in general (``Sigmoid``) guards its Gram matrices, and :func:`check_psd`, whose job is
    to answer whether the matrix is PSD, must see the matrix rather than the guard's error."""
    from pytensor.graph.replace import graph_replace
    from pytensor.graph.traversal import ancestors

    guarded = {
        v: v.owner.inputs[0]
        for v in ancestors([graph])
        if v.owner is not None and isinstance(v.owner.op, AssertPSD)
    }
    return graph_replace(graph, guarded, strict=False) if guarded else graph


class AssertPSD(Op):
    """Identity on a square matrix that raises :class:`NotPSDError` if it is not PSD.

    Gradients pass straight through. Used by kernels that are not valid covariances in general, so
    that a model built on them fails with a message instead of a ``nan`` log-probability.
    """

    __props__ = ("what",)

    def __init__(self, what: str = "the Gram matrix"):
        self.what = what

    def make_node(self, K):
        K = pt.as_tensor_variable(K)
        return Apply(self, [K], [K.type()])

    def perform(self, node, inputs, outputs):
        (K,) = inputs
        res = _eig_check(K, None)
        if not res.is_psd:
            raise NotPSDError(
                f"{self.what} is not positive semi-definite: smallest eigenvalue "
                f"{res.min_eigenvalue:.4g} < -{res.tolerance:.2g} (n={res.n}). It is not a valid "
                "covariance at these inputs and hyperparameters; choose a valid kernel, or change "
                "the hyperparameters (for tanh(a x.x' + b): a > 0 and b well below 0 help)"
            )
        outputs[0][0] = K

    def pullback(self, inputs, outputs, cotangents):
        return [cotangents[0]]

    def do_constant_folding(self, fgraph, node):
        # Never evaluate at compile time: the error belongs to evaluation, not to graph rewriting.
        return False

    def infer_shape(self, node, shapes):
        return [shapes[0]]


def assert_psd(K, what: str = "the Gram matrix") -> pt.TensorVariable:
    """Wrap ``K`` so that evaluating it raises :class:`NotPSDError` when it is not PSD."""
    return AssertPSD(what)(K)


def plus_diagonal(A: pt.TensorVariable, d) -> pt.TensorVariable:
    r""":math:`A + \operatorname{diag}(d)` for a square symbolic ``A`` and a scalar or vector
    ``d``, as an increment of the diagonal.

    ``A + d * pt.eye(n)`` (or ``+ pt.diag(d)``) builds an ``n x n`` matrix more, and for a
    constant ``d`` the compiled function holds that identity between evaluations; the increment
    touches the ``n`` diagonal entries only, and PyTensor does it in place where ``A`` is dead
    afterwards (the memory count of :mod:`bayes_gp.solvers.exact`).
    """
    i = pt.arange(A.shape[0])
    return pt.inc_subtensor(A[i, i], d)


def jittered_cholesky(
    K: np.ndarray, *, start: float = 1e-10, maximum: float = 1e-4
) -> tuple[np.ndarray, float]:
    r"""Lower Cholesky factor of :math:`K + \epsilon I`, growing :math:`\epsilon` until it succeeds.

    :math:`\epsilon` starts at ``start`` times the mean diagonal of ``K`` and grows tenfold per
    failed factorisation up to ``maximum`` times it (rank-deficient kernels such as the
    dot-product kernel need a little jitter; a matrix that needs more is not a covariance).

    Returns
    -------
    L : ndarray
        Lower-triangular factor.
    jitter : float
        The absolute :math:`\epsilon` used (0 if none was needed).

    Raises
    ------
    NotPSDError
        If the factorisation fails even with the largest jitter, with advice.
    """
    K = np.asarray(K, dtype=float)
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"a Gram matrix must be square, got shape {K.shape}")
    if not np.all(np.isfinite(K)):
        raise ValueError("the Gram matrix contains NaN or infinite values")
    try:
        return np.linalg.cholesky(K), 0.0
    except np.linalg.LinAlgError:
        pass
    scale = max(float(np.mean(np.diag(K))), np.finfo(float).tiny)
    rel = start
    while rel <= maximum * (1 + 1e-9):
        jitter = rel * scale
        try:
            return np.linalg.cholesky(K + jitter * np.eye(K.shape[0])), jitter
        except np.linalg.LinAlgError:
            rel *= 10.0
    res = _eig_check(K, None)
    raise NotPSDError(
        f"Cholesky factorisation failed even with jitter {maximum:g} x mean variance "
        f"(smallest eigenvalue {res.min_eigenvalue:.3g}, n={res.n}): add observation noise, "
        "remove duplicate inputs, rescale the inputs, or check that the kernel is valid"
    )


def single_blas_thread(fn):
    """Run ``fn`` with one BLAS thread.

    On this class of machine (2 cores) two OpenBLAS threads are slower than one for the dense
    factorisations of GPs up to n ~ 2000, and much slower when another process competes for the
    cores (measured: a 200 x 200 Cholesky took 0.36 s with two threads on a loaded machine,
    0.2 ms with one).
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            return fn(*args, **kwargs)

    return wrapper
