"""The base of the string kernels: :class:`StringKernel` (the Gram-matrix interface and the
normalisation of R&W eq. 4.35), the feature-count kernels' common base, and input checks."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Sequence

import numpy as np
import scipy.sparse as sp

from bayes_gp.linalg import NotPSDError, check_psd

__all__ = ["StringKernel"]


def _as_strings(name: str, strings) -> list[str]:
    """Validate a list of strings (a single ``str`` is refused: it would be read as characters)."""
    if isinstance(strings, str | bytes):
        raise ValueError(f"`{name}` must be a list of str, got a single {type(strings).__name__}")
    if isinstance(strings, np.ndarray) and strings.ndim != 1:
        raise ValueError(
            f"`{name}` must be a 1-D list of str, got an array of shape {strings.shape}"
        )
    try:
        out = list(strings)
    except TypeError:
        raise ValueError(f"`{name}` must be a list of str, got {type(strings).__name__}") from None
    for i, s in enumerate(out):
        if not isinstance(s, str):
            raise ValueError(f"`{name}` must be a list of str; item {i} is {type(s).__name__}")
    return [str(s) for s in out]


def _positive_int(name: str, value, *, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"`{name}` must be an integer >= 1, got {value!r}")
    if int(value) < 1:
        raise ValueError(f"`{name}` must be an integer >= 1, got {value!r}")
    return int(value)


def _normalise(K: np.ndarray, da: np.ndarray, db: np.ndarray) -> np.ndarray:
    """R&W eq. (4.35): :math:`K_{ij} / \\sqrt{d_a[i] d_b[j]}`; zero where a self-similarity is 0."""
    sa = np.sqrt(np.maximum(da, 0.0))
    sb = np.sqrt(np.maximum(db, 0.0))
    inv_a = np.divide(1.0, sa, out=np.zeros_like(sa), where=sa > 0)
    inv_b = np.divide(1.0, sb, out=np.zeros_like(sb), where=sb > 0)
    return K * inv_a[:, None] * inv_b[None, :]


def _checked(K: np.ndarray, what: str) -> np.ndarray:
    res = check_psd(K)
    if not res.is_psd:
        raise NotPSDError(
            f"the {what} Gram matrix is not positive semi-definite: smallest eigenvalue "
            f"{res.min_eigenvalue:.4g} < -{res.tolerance:.2g} (n={res.n}, asymmetry "
            f"{res.asymmetry:.3g}); this kernel is PSD by construction, so this is a bug"
        )
    return K


class StringKernel:
    r"""Base class: a kernel on strings with a Gram-matrix interface.

    Subclasses implement :meth:`_gram` (unnormalised cross Gram matrix) and :meth:`_self_similarity`
    (the values :math:`k(x, x)`); the base class validates inputs, normalises (R&W eq. 4.35),
    symmetrises the square case and checks it is positive semi-definite.
    """

    def gram(
        self,
        strings_a: Sequence[str],
        strings_b: Sequence[str] | None = None,
        *,
        normalize: bool = False,
        check: bool = True,
    ) -> np.ndarray:
        r"""Gram matrix :math:`K_{ij} = k(a_i, b_j)`.

        Parameters
        ----------
        strings_a : list of str
        strings_b : list of str, optional
            Default ``strings_a`` (a square, symmetric Gram matrix).
        normalize : bool, default False
            Return :math:`\tilde k(x, x') = k(x, x')/\sqrt{k(x, x)k(x', x')}` (R&W eq. 4.35).
        check : bool, default True
            For a square Gram matrix, check it is positive semi-definite (an eigen-decomposition,
            :math:`O(n^3)`) and raise :class:`~bayes_gp.NotPSDError` if it is not.

        Returns
        -------
        ndarray, shape ``(len(strings_a), len(strings_b))``
        """
        a = _as_strings("strings_a", strings_a)
        square = strings_b is None
        b = a if square else _as_strings("strings_b", strings_b)
        K = np.asarray(self._gram(a, None if square else b), dtype=float)
        if normalize:
            da = self._self_similarity(a) if not square else np.diag(K).copy()
            db = da if square else self._self_similarity(b)
            K = _normalise(K, da, db)
        if square:
            K = 0.5 * (K + K.T)
            if check and K.size:
                _checked(K, type(self).__name__)
        return K

    def __call__(self, strings_a, strings_b=None, *, normalize: bool = False) -> np.ndarray:
        """Same as :meth:`gram`."""
        return self.gram(strings_a, strings_b, normalize=normalize)

    def diag(self, strings: Sequence[str], *, normalize: bool = False) -> np.ndarray:
        """The self-similarities :math:`k(x, x)` (all 1, or 0 for a featureless string, if normalised)."""
        s = _as_strings("strings", strings)
        d = np.asarray(self._self_similarity(s), dtype=float)
        return (d > 0).astype(float) if normalize else d

    # -- to implement ----------------------------------------------------------------------------
    def _gram(self, a: list[str], b: list[str] | None) -> np.ndarray:
        raise NotImplementedError

    def _self_similarity(self, strings: list[str]) -> np.ndarray:
        raise NotImplementedError


class _FeatureCountKernel(StringKernel):
    r"""A kernel :math:`\sum_s w_s \phi_s(x)\phi_s(x')` with an explicit sparse feature map.

    :meth:`features` returns, per string, a ``Counter`` ``{symbol s: φ_s(x)}``; :meth:`weight`
    gives :math:`w_s \ge 0`. The Gram matrix is :math:`\Phi_a W \Phi_b^\top` with sparse
    :math:`\Phi`, so the cost is linear in the total number of symbol occurrences, never a loop over
    pairs of substrings.
    """

    def features(self, strings: Sequence[str]) -> list[Counter]:
        """Per string, the counts :math:`\\phi_s(x)` of every symbol ``s`` with non-zero weight."""
        return [self._count(s) for s in _as_strings("strings", strings)]

    def _count(self, x: str) -> Counter:
        raise NotImplementedError

    def weight(self, symbol: Hashable) -> float:
        """The weight :math:`w_s` (default 1)."""
        return 1.0

    def _matrices(self, feats_list: Iterable[list[Counter]]):
        vocab: dict[Hashable, int] = {}
        mats = []
        for feats in feats_list:
            rows, cols, vals = [], [], []
            for i, f in enumerate(feats):
                for s, c in f.items():
                    j = vocab.setdefault(s, len(vocab))
                    rows.append(i)
                    cols.append(j)
                    vals.append(float(c))
            mats.append((len(feats), rows, cols, vals))
        w = np.empty(len(vocab))
        for s, j in vocab.items():
            w[j] = self.weight(s)
        out = [
            sp.csr_matrix((vals, (rows, cols)), shape=(n, len(vocab)))
            for n, rows, cols, vals in mats
        ]
        return out, sp.diags(w)

    def _gram(self, a, b):
        fa = [self._count(x) for x in a]
        if b is None:
            (Pa,), W = self._matrices([fa])
            Pb = Pa
        else:
            (Pa, Pb), W = self._matrices([fa, [self._count(x) for x in b]])
        return np.asarray((Pa @ W @ Pb.T).todense())

    def _self_similarity(self, strings):
        return np.array(
            [sum(self.weight(s) * c * c for s, c in self._count(x).items()) for x in strings],
            dtype=float,
        )
