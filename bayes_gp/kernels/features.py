r"""Explicit feature maps of kernels (R&W eq. 4.24; PRML eq. 6.12)."""

from __future__ import annotations

import itertools
import math

import numpy as np

from bayes_gp._validation import check_integer_in, check_nonnegative

__all__ = ["polynomial_features", "multi_indices"]


def multi_indices(D: int, p: int) -> list[tuple[int, ...]]:
    """All :math:`m \\in \\mathbb{N}^D` with :math:`\\sum_d m_d = p`, in lexicographic order."""
    out = []
    for combo in itertools.combinations_with_replacement(range(D), p):
        m = [0] * D
        for d in combo:
            m[d] += 1
        out.append(tuple(m))
    return sorted(set(out), reverse=True)


def polynomial_features(X, p: int, sigma0: float = 0.0) -> np.ndarray:
    r"""Feature map :math:`\phi` with :math:`\phi(x)^\top\phi(x') = (\sigma_0^2 + x^\top x')^p`.

    R&W eq. (4.24): for the homogeneous kernel :math:`(x^\top x')^p`,

    .. math:: \phi_m(x) = \sqrt{\frac{p!}{m_1!\cdots m_D!}}\; x_1^{m_1}\cdots x_D^{m_D},
              \qquad \textstyle\sum_d m_d = p,

    one feature per multi-index (:math:`\binom{D+p-1}{p}` of them, not :math:`D^p`). The
    inhomogeneous kernel is the homogeneous one on :math:`\tilde x = (\sigma_0, x)`. For
    :math:`D = p = 2`, :math:`\sigma_0 = 0` this is :math:`(x_1^2, \sqrt2 x_1x_2, x_2^2)`, PRML
    eq. (6.12).

    Parameters
    ----------
    X : array_like, shape (n, D)
    p : int, positive degree
    sigma0 : float, non-negative offset

    Returns
    -------
    ndarray, shape (n, M)
    """
    p = check_integer_in("p", p, range(1, 64))
    check_nonnegative("sigma0", sigma0)
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"`X` must be 2-D (n, D), got shape {X.shape}")
    if sigma0 != 0.0:
        X = np.hstack([np.full((X.shape[0], 1), float(sigma0)), X])
    feats = []
    for m in multi_indices(X.shape[1], p):
        coef = math.factorial(p) / math.prod(math.factorial(k) for k in m)
        feats.append(np.sqrt(coef) * np.prod(X ** np.asarray(m), axis=1))
    return np.stack(feats, axis=1)
