r"""Eigenfunction analysis of kernels (R&W §4.3).

An eigenfunction :math:`\phi` of a kernel with eigenvalue :math:`\lambda` with respect to a measure
:math:`\mu` satisfies (R&W eq. 4.36)

.. math:: \int k(x, x')\,\phi(x)\,d\mu(x) = \lambda\,\phi(x'),

and Mercer's theorem (4.37) expands the kernel as
:math:`k(x, x') = \sum_i \lambda_i \phi_i(x)\phi_i^*(x')` with eigenfunctions orthonormal under
:math:`\mu`. This module provides

* the analytic eigenvalues and eigenfunctions of the squared exponential kernel under a Gaussian
  measure (4.39)–(4.41): :func:`se_eigenvalues`, :func:`se_eigenfunctions`, :func:`se_parameters`;
* the Nyström approximation from a sample :math:`x_l \sim p` (4.42)–(4.44): :func:`nystrom_eigen`;
* the truncated Mercer sum: :func:`mercer_reconstruction`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
import scipy.sparse.linalg as spl
from scipy.special import eval_hermite

from bayes_gp._validation import positive_float

__all__ = [
    "se_parameters",
    "se_eigenvalues",
    "se_eigenfunctions",
    "nystrom_eigen",
    "NystromEigen",
    "mercer_reconstruction",
]


def _orders(k) -> np.ndarray:
    arr = np.asarray(k)
    if arr.dtype == bool or not (
        np.issubdtype(arr.dtype, np.integer)
        or (np.issubdtype(arr.dtype, np.floating) and np.all(arr == np.round(arr)))
    ):
        raise ValueError(f"`k` must be a non-negative integer or array of them, got {k!r}")
    if np.any(arr < 0):
        raise ValueError(f"`k` must be non-negative, got {k!r}")
    return arr.astype(np.int64)


def _abc(a, b):
    a = positive_float("a", a)
    b = positive_float("b", b)
    c = math.sqrt(a * a + 2.0 * a * b)
    A = a + b + c
    return a, b, c, A, b / A


def se_parameters(sigma: float, ell: float) -> tuple[float, float]:
    r"""``(a, b)`` of R&W §4.3.2 for :math:`p(x) = \mathcal N(0, \sigma^2)` and the SE kernel
    :math:`\exp(-(x - x')^2 / 2\ell^2)`: :math:`a^{-1} = 4\sigma^2`, :math:`b^{-1} = 2\ell^2`."""
    sigma = positive_float("sigma", sigma)
    ell = positive_float("ell", ell)
    return 1.0 / (4.0 * sigma**2), 1.0 / (2.0 * ell**2)


def se_eigenvalues(k, a: float, b: float) -> np.ndarray:
    r"""Eigenvalues of the SE kernel under a Gaussian measure, R&W eqs. (4.39), (4.41).

    .. math::
       \lambda_k = \sqrt{\frac{2a}{A}}\, B^k, \qquad
       c = \sqrt{a^2 + 2ab}, \quad A = a + b + c, \quad B = b / A, \qquad k = 0, 1, \dots

    for the kernel :math:`k(x, x') = \exp(-b (x - x')^2)` (:math:`b^{-1} = 2\ell^2`) and the
    measure :math:`p(x) = \mathcal N(0, \sigma^2)` with :math:`a^{-1} = 4\sigma^2`
    (see :func:`se_parameters`).

    Parameters
    ----------
    k : int or array of int
        Indices :math:`k \ge 0`.
    a, b : float
        Positive.

    Returns
    -------
    ndarray
        Same shape as ``k``.
    """
    kk = _orders(k)
    a, _, _, A, B = _abc(a, b)
    return math.sqrt(2.0 * a / A) * B ** kk.astype(float)


def se_eigenfunctions(x, k, a: float, b: float, *, normalized: bool = True) -> np.ndarray:
    r"""Eigenfunctions of the SE kernel under a Gaussian measure, R&W eqs. (4.40)–(4.41).

    With ``normalized=False``, exactly eq. (4.40):

    .. math:: \phi_k(x) = \exp\!\left(-(c - a)x^2\right) H_k\!\left(\sqrt{2c}\,x\right)

    with :math:`H_k` the (physicists') Hermite polynomial
    :math:`H_k(x) = (-1)^k e^{x^2} \frac{d^k}{dx^k} e^{-x^2}`. These are orthogonal but not
    normalised under :math:`p(x) = \mathcal N(0, 1/4a)`: substituting :math:`u = \sqrt{2c}\,x` in
    :math:`\int \phi_k^2 p\,dx` gives :math:`\|\phi_k\|_p^2 = \sqrt{a/c}\;2^k k!`. The default
    ``normalized=True`` divides by that norm, so that
    :math:`\int \phi_j \phi_k\, p\, dx = \delta_{jk}` and Mercer's sum (4.37)
    :math:`\sum_k \lambda_k \phi_k(x)\phi_k(x') = \exp(-b(x - x')^2)` holds with the eigenvalues
    of :func:`se_eigenvalues`:

    .. math:: \phi_k(x) = \left(\frac{c}{a}\right)^{1/4} \frac{1}{\sqrt{2^k k!}}
              \exp\!\left(-(c - a)x^2\right) H_k\!\left(\sqrt{2c}\,x\right)

    The normalised functions are evaluated through the three-term recurrence of the Hermite
    functions :math:`\psi_k(u) = (2^k k! \sqrt\pi)^{-1/2} e^{-u^2/2} H_k(u)` (bounded, so no
    overflow for large :math:`k`): :math:`\phi_k(x) = (c/a)^{1/4}\pi^{1/4}\psi_k(u)\, e^{a x^2}`.

    Parameters
    ----------
    x : array_like, shape ``(n,)``
        Points (1-D inputs).
    k : int or 1-D array of int
        Indices :math:`k \ge 0`.
    a, b : float
        As in :func:`se_eigenvalues`.
    normalized : bool, default True

    Returns
    -------
    ndarray
        Shape ``(n,)`` for a scalar ``k``, ``(n, len(k))`` for an array.
    """
    x = np.asarray(x, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"`x` must be a 1-D array of points, got shape {x.shape}")
    kk = _orders(k)
    if kk.ndim > 1:
        raise ValueError("`k` must be an integer or a 1-D array of integers")
    a, _, c, _, _ = _abc(a, b)
    ks = np.atleast_1d(kk)
    u = math.sqrt(2.0 * c) * x
    if not normalized:
        out = np.exp(-(c - a) * x[:, None] ** 2) * eval_hermite(ks[None, :], u[:, None])
    else:
        kmax = int(ks.max()) if ks.size else 0
        psi = np.empty((kmax + 1, x.size))
        psi[0] = math.pi**-0.25 * np.exp(-0.5 * u**2)
        if kmax >= 1:
            psi[1] = math.sqrt(2.0) * u * psi[0]
        for j in range(1, kmax):
            psi[j + 1] = math.sqrt(2.0 / (j + 1)) * u * psi[j] - math.sqrt(j / (j + 1)) * psi[j - 1]
        scale = (c / a) ** 0.25 * math.pi**0.25 * np.exp(a * x**2)
        out = (psi[ks] * scale[None, :]).T
    return out[:, 0] if kk.ndim == 0 else out


@dataclass(frozen=True)
class NystromEigen:
    r"""Nyström estimates from a sample :math:`x_1, \dots, x_n \sim p` (R&W §4.3.3).

    Attributes
    ----------
    eigenvalues : ndarray, shape ``(n_eig,)``
        :math:`\hat\lambda_i = \lambda_i^{mat} / n` (4.43), in decreasing order.
    matrix_eigenvalues : ndarray, shape ``(n_eig,)``
        :math:`\lambda_i^{mat}`, eigenvalues of the Gram matrix :math:`K` of the sample.
    eigenvectors : ndarray, shape ``(n, n_eig)``
        Unit eigenvectors :math:`u_i` of :math:`K` (sign fixed so that the entry of largest
        magnitude is positive).
    X : ndarray, shape ``(n, D)``
        The sample.
    kernel_fn : callable
        ``(A, B) -> ndarray``, the kernel used.
    """

    eigenvalues: np.ndarray
    matrix_eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    X: np.ndarray
    kernel_fn: Callable[[np.ndarray, np.ndarray], np.ndarray]

    @property
    def n(self) -> int:
        return self.X.shape[0]

    def eigenfunctions(self, x) -> np.ndarray:
        r"""Nyström eigenfunctions, R&W eq. (4.44), at points ``x`` (shape ``(m,)`` or ``(m, D)``):

        .. math:: \hat\phi_i(x') = \frac{\sqrt n}{\lambda_i^{mat}}\,\mathbf k(x')^\top u_i

        Returns shape ``(m, n_eig)``; at the sample points themselves this is
        :math:`\sqrt n\, u_i`, normalised so that :math:`\frac1n\sum_l \hat\phi_i(x_l)^2 = 1`.
        """
        xs = _as_inputs(x, "x", self.X.shape[1])
        Kxs = np.asarray(self.kernel_fn(xs, self.X), dtype=float)
        return math.sqrt(self.n) * (Kxs @ self.eigenvectors) / self.matrix_eigenvalues[None, :]

    def eigenfunctions_at_sample(self) -> np.ndarray:
        r""":math:`\hat\phi_i(x_l) = \sqrt n\, u_{il}`, shape ``(n, n_eig)``."""
        return math.sqrt(self.n) * self.eigenvectors


def _as_inputs(X, name: str, D: int | None = None) -> np.ndarray:
    arr = np.asarray(X, dtype=float)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise ValueError(
            f"`{name}` must be a non-empty array of shape (n,) or (n, D), got {arr.shape}"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"`{name}` contains NaN or infinite values")
    if D is not None and arr.shape[1] != D:
        raise ValueError(f"`{name}` has {arr.shape[1]} column(s), expected {D}")
    return arr


def _numpy_kernel(kernel_fn) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """A NumPy ``(A, B) -> K`` from a NumPy function or a PyMC / bayes_gp covariance function."""
    import pymc as pm

    if isinstance(kernel_fn, pm.gp.cov.BaseCovariance):
        import pytensor

        from bayes_gp.linalg import EAGER_MODE

        cov = kernel_fn

        def fn(A, B):
            return np.asarray(pytensor.function([], cov(A, B), mode=EAGER_MODE)(), dtype=float)

        return fn
    if not callable(kernel_fn):
        raise ValueError(
            f"`kernel_fn` must be a function (A, B) -> ndarray or a covariance function, got "
            f"{kernel_fn!r}"
        )
    return kernel_fn


def _leading_eigh(K: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``m`` largest eigenpairs of a symmetric ``K``, in decreasing order.

    A dense ``eigh`` costs :math:`O(n^3)` whatever ``m`` is; for a few eigenpairs of a large
    matrix, Lanczos iteration (ARPACK, :math:`O(n^2)` per iteration) is used instead, from a fixed
    starting vector so that results are reproducible.
    """
    n = K.shape[0]
    if n > 200 and m <= n // 8:
        v0 = np.random.default_rng(0).standard_normal(n)
        try:
            w, U = spl.eigsh(K, k=m, which="LA", tol=0.0, v0=v0)
        except spl.ArpackNoConvergence:
            pass
        else:
            order = np.argsort(w)[::-1]
            return w[order], U[:, order]
    w, U = sla.eigh(K, subset_by_index=[n - m, n - 1])
    return w[::-1].copy(), U[:, ::-1].copy()


def nystrom_eigen(kernel_fn, X, n_eig: int) -> NystromEigen:
    r"""Nyström approximation of a kernel's eigenvalues and eigenfunctions, R&W eqs. (4.42)–(4.44).

    With a sample :math:`x_1, \dots, x_n` from the measure :math:`p`, the integral in (4.36) is
    replaced by the sample mean (4.42),
    :math:`\lambda_i\phi_i(x') \approx \frac1n\sum_l k(x_l, x')\phi_i(x_l)`; at
    :math:`x' = x_l` this is the matrix eigenproblem :math:`K u_i = \lambda_i^{mat} u_i` (4.43),
    whence

    .. math::
       \lambda_i \approx \frac{\lambda_i^{mat}}{n}, \qquad
       \phi_i(x') \approx \frac{\sqrt n}{\lambda_i^{mat}}\,\mathbf k(x')^\top u_i \quad (4.44).

    Parameters
    ----------
    kernel_fn : callable or covariance function
        A NumPy function ``kernel_fn(A, B) -> ndarray`` of shape ``(len(A), len(B))`` for inputs of
        shape ``(n, D)``; or a PyMC / bayes_gp kernel with fixed hyperparameters, evaluated with
        PyTensor's fast-compiling Python linker.
    X : array_like, shape ``(n,)`` or ``(n, D)``
        A sample from :math:`p`.
    n_eig : int
        Number of leading eigenpairs, :math:`1 \le` ``n_eig`` :math:`\le n`.

    Returns
    -------
    NystromEigen
        ``.eigenvalues`` and ``.eigenfunctions(x)``.
    """
    X = _as_inputs(X, "X")
    n = X.shape[0]
    if isinstance(n_eig, bool) or not isinstance(n_eig, int | np.integer) or not 1 <= n_eig <= n:
        raise ValueError(f"`n_eig` must be an integer in 1..{n} (the sample size), got {n_eig!r}")
    fn = _numpy_kernel(kernel_fn)
    K = np.asarray(fn(X, X), dtype=float)
    if K.shape != (n, n):
        raise ValueError(f"`kernel_fn(X, X)` must have shape ({n}, {n}), got {K.shape}")
    K = 0.5 * (K + K.T)
    w, U = _leading_eigh(K, int(n_eig))
    if np.any(w <= 0):
        raise ValueError(
            "the Gram matrix has non-positive leading eigenvalues: ask for fewer eigenpairs "
            f"(n_eig={n_eig}) or check the kernel; eigenvalues {w[w <= 0]}"
        )
    pivot = np.argmax(np.abs(U), axis=0)
    U *= np.sign(U[pivot, np.arange(U.shape[1])])[None, :]
    return NystromEigen(eigenvalues=w / n, matrix_eigenvalues=w, eigenvectors=U, X=X, kernel_fn=fn)


def mercer_reconstruction(eigenvalues, eigenfunctions_at_x, eigenfunctions_at_xp) -> np.ndarray:
    r"""Truncated Mercer expansion, R&W eq. (4.37):
    :math:`k(x, x') \approx \sum_{i=1}^{M} \lambda_i\,\phi_i(x)\,\phi_i(x')`.

    Parameters
    ----------
    eigenvalues : array_like, shape ``(M,)``
    eigenfunctions_at_x : array_like, shape ``(m, M)``
        :math:`\phi_i(x_j)` (one column per eigenfunction); a 1-D array is one point.
    eigenfunctions_at_xp : array_like, shape ``(m', M)``

    Returns
    -------
    ndarray, shape ``(m, m')``
    """
    lam = np.asarray(eigenvalues, dtype=float)
    P = np.asarray(eigenfunctions_at_x, dtype=float)
    Q = np.asarray(eigenfunctions_at_xp, dtype=float)
    P = P[None, :] if P.ndim == 1 else P  # one point
    Q = Q[None, :] if Q.ndim == 1 else Q
    if lam.ndim != 1 or P.ndim != 2 or Q.ndim != 2:
        raise ValueError("`eigenvalues` must be 1-D and the eigenfunction values 2-D (points, M)")
    if P.shape[1] != lam.size or Q.shape[1] != lam.size:
        raise ValueError(
            f"{lam.size} eigenvalues but eigenfunction values with {P.shape[1]} and {Q.shape[1]} "
            "columns"
        )
    return (P * lam[None, :]) @ Q.T
