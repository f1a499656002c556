"""Substring kernels, R&W §4.4.1 (eq. 4.45): all substrings, k-spectrum, bag of characters,
bag of words."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Iterable

import numpy as np

from bayes_gp.kernels.strings.base import _FeatureCountKernel, _positive_int

__all__ = ["SubstringKernel", "SpectrumKernel", "BagOfCharacters", "BagOfWords"]


# --- substring kernels (R&W §4.4.1) -----------------------------------------------------------
def _diagonal_runs(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    r"""Lengths of the maximal runs of matches :math:`x_i = y_j` along the diagonals
    :math:`(i, j), (i+1, j+1), \dots` of the match matrix; :math:`O(|x||y|)`, vectorised.

    The match matrix is padded with a zero row and column; in its row-major flattening (row length
    :math:`n + 1`) a diagonal step is a stride of :math:`n + 2`, so the residue classes modulo
    :math:`n + 2` list every diagonal in order, each terminated by a padding zero.
    """
    m, n = len(x), len(y)
    if m == 0 or n == 0:
        return np.zeros(0, dtype=np.int64)
    w = n + 2
    size = (m + 1) * (n + 1)
    F = np.zeros((-(-size // w) + 1) * w, dtype=np.int8)  # + one zero row: column separators
    F[:size].reshape(m + 1, n + 1)[:m, :n] = x[:, None] == y[None, :]
    d = np.diff(F.reshape(-1, w).T.ravel(), prepend=np.int8(0))
    return np.flatnonzero(d == -1) - np.flatnonzero(d == 1)


def _codes(x: str) -> np.ndarray:
    return np.frombuffer(x.encode("utf-32-le"), dtype=np.uint32)


class SubstringKernel(_FeatureCountKernel):
    r"""Weighted substring kernel, R&W eq. (4.45) with :math:`w_s = \lambda^{|s|}`.

    .. math::
       k(x, x') = \sum_{s \in \mathcal{A}^*,\ 1 \le |s| \le L} \lambda^{|s|}\,\phi_s(x)\,\phi_s(x')
                = \sum_{i, j}\ \sum_{l = 1}^{\min(L_{ij},\, L)} \lambda^{l}

    :math:`\phi_s(x)` is the number of occurrences of the substring :math:`s` in :math:`x`
    (overlapping occurrences count), :math:`L` is ``max_len`` (default: no limit) and
    :math:`L_{ij}` is the length of the longest common substring starting at :math:`x_i` and
    :math:`x'_j` (the second form counts every matching pair of occurrences once).

    Parameters
    ----------
    lam : float
        Decay :math:`\lambda \in (0, 1]`. R&W suggest :math:`0 < \lambda < 1` so that short
        substrings weigh more; :math:`\lambda = 1` (all substrings equally weighted) is allowed.
        Any :math:`\lambda > 0` gives non-negative weights and hence a PSD kernel, but
        :math:`\lambda > 1` (long matches dominate) is refused.
    max_len : int, optional
        Only substrings of length :math:`\le` ``max_len`` (:math:`\ge 1`). ``max_len=1`` is
        :math:`\lambda` times :class:`BagOfCharacters`.
    method : {"auto", "features", "dp"}
        ``"features"`` counts all substrings of each string up to the effective maximum length in a
        ``Counter`` and multiplies sparse count matrices: :math:`O(|x| L)` substrings per string
        (hashing each costs its length). ``"dp"`` evaluates the second form per pair in
        :math:`O(|x||x'|)`, better for long strings with no ``max_len``: the longest common
        extensions obey :math:`L_{ij} = [x_i = x'_j](1 + L_{i+1,j+1})`, so along a maximal run of
        :math:`r` matches on a diagonal of the match matrix they are :math:`r, r-1, \dots, 1`, and
        the run contributes :math:`G(r) = \sum_{t=1}^{r} g(\min(t, L))` with
        :math:`g(t) = \sum_{l=1}^{t}\lambda^l`; the runs are found with vectorised NumPy.
        ``"auto"`` picks ``"features"`` unless that would hash more than about :math:`10^6`
        characters for the longest string.
    """

    def __init__(self, lam: float = 0.5, max_len: int | None = None, *, method: str = "auto"):
        try:
            lam_f = float(lam)
        except (TypeError, ValueError):
            raise ValueError(f"`lam` must be a number in (0, 1], got {lam!r}") from None
        if not (math.isfinite(lam_f) and 0.0 < lam_f <= 1.0):
            raise ValueError(f"`lam` must lie in (0, 1], got {lam!r}")
        if method not in ("auto", "features", "dp"):
            raise ValueError(f"`method` must be 'auto', 'features' or 'dp', got {method!r}")
        self.lam = lam_f
        self.max_len = _positive_int("max_len", max_len, allow_none=True)
        self.method = method

    def __repr__(self) -> str:
        return f"SubstringKernel(lam={self.lam}, max_len={self.max_len})"

    def _run_weights(self, upto: int) -> np.ndarray:
        """``G[r] = sum_{t=1}^r g[min(t, max_len)]``, ``g[t] = sum_{l=1}^t lam^l``, r = 0..upto."""
        t = np.arange(1, upto + 1)
        if self.max_len is not None:
            t = np.minimum(t, self.max_len)
        lam_pow = self.lam ** np.arange(1, upto + 1)
        g = np.concatenate(([0.0], np.cumsum(lam_pow)))
        return np.concatenate(([0.0], np.cumsum(g[t])))

    def _eff_len(self, n: int) -> int:
        return n if self.max_len is None else min(n, self.max_len)

    def _hash_cost(self, n: int) -> int:
        L = self._eff_len(n)
        return sum((n - l + 1) * l for l in range(1, L + 1))

    def _use_dp(self, strings: list[str]) -> bool:
        if self.method != "auto":
            return self.method == "dp"
        longest = max((len(s) for s in strings), default=0)
        return self._hash_cost(longest) > 1_000_000

    def weight(self, symbol: str) -> float:
        return self.lam ** len(symbol)

    def _count(self, x: str) -> Counter:
        n = len(x)
        return Counter(
            x[i : i + l] for l in range(1, self._eff_len(n) + 1) for i in range(n - l + 1)
        )

    @staticmethod
    def _pair_dp(cx: np.ndarray, cy: np.ndarray, G: np.ndarray) -> float:
        return float(G[_diagonal_runs(cx, cy)].sum())

    def _gram(self, a, b):
        both = a if b is None else a + b
        if not self._use_dp(both):
            return super()._gram(a, b)
        g = self._run_weights(max((len(s) for s in both), default=0))
        ca = [_codes(x) for x in a]
        if b is None:
            K = np.zeros((len(a), len(a)))
            for i in range(len(a)):
                for j in range(i, len(a)):
                    K[i, j] = K[j, i] = self._pair_dp(ca[i], ca[j], g)
            return K
        cb = [_codes(x) for x in b]
        return np.array([[self._pair_dp(x, y, g) for y in cb] for x in ca]).reshape(len(a), len(b))

    def _self_similarity(self, strings):
        if not self._use_dp(strings):
            return super()._self_similarity(strings)
        g = self._run_weights(max((len(s) for s in strings), default=0))
        return np.array([self._pair_dp(_codes(x), _codes(x), g) for x in strings], dtype=float)


class SpectrumKernel(_FeatureCountKernel):
    r"""The :math:`k`-spectrum kernel (Leslie et al. 2003; R&W §4.4.1): eq. (4.45) with
    :math:`w_s = 1` for :math:`|s| = k` and 0 otherwise.

    .. math:: k(x, x') = \sum_{s \in \mathcal{A}^k} \phi_s(x)\,\phi_s(x')

    Parameters
    ----------
    k : int
        Substring length, :math:`k \ge 1`. A string shorter than :math:`k` has no features.
    """

    def __init__(self, k: int):
        self.k = _positive_int("k", k)

    def __repr__(self) -> str:
        return f"SpectrumKernel(k={self.k})"

    def _count(self, x: str) -> Counter:
        k = self.k
        return Counter(x[i : i + k] for i in range(len(x) - k + 1))


class BagOfCharacters(_FeatureCountKernel):
    r"""Bag-of-characters kernel (R&W §4.4.1): eq. (4.45) with :math:`w_s = 0` for :math:`|s| > 1`.

    .. math:: k(x, x') = \sum_{a \in \mathcal{A}} \phi_a(x)\,\phi_a(x')

    :math:`\phi_a(x)` is the number of times the character :math:`a` occurs in :math:`x`.
    """

    def __repr__(self) -> str:
        return "BagOfCharacters()"

    def _count(self, x: str) -> Counter:
        return Counter(x)


class BagOfWords(_FeatureCountKernel):
    r"""Bag-of-words kernel (R&W §4.4.1): eq. (4.45) over words (substrings bounded by whitespace),
    :math:`w_s = 1`.

    .. math:: k(x, x') = \sum_{\text{words } s} \phi_s(x)\,\phi_s(x')

    Parameters
    ----------
    tokenizer : callable, default ``str.split``
        Maps a string to its list of words (any hashable tokens). Case folding, stemming and the
        like are the tokenizer's job, e.g. ``lambda s: s.lower().split()``.
    """

    def __init__(self, tokenizer: Callable[[str], Iterable[Hashable]] = str.split):
        if not callable(tokenizer):
            raise ValueError(f"`tokenizer` must be callable, got {tokenizer!r}")
        self.tokenizer = tokenizer

    def __repr__(self) -> str:
        return f"BagOfWords(tokenizer={getattr(self.tokenizer, '__qualname__', self.tokenizer)})"

    def _count(self, x: str) -> Counter:
        return Counter(self.tokenizer(x))
