r"""Kernels on strings (R&W §4.4, seed 003): substring kernels (4.45) and the Fisher kernel (4.46).

Strings are not PyTensor tensors, so these kernels do not build graphs: ``.gram(strings_a,
strings_b)`` returns a NumPy Gram matrix. A square Gram matrix (``strings_b=None``) is checked to be
positive semi-definite with :func:`bayes_gp.linalg.check_psd` (:class:`~bayes_gp.NotPSDError`
otherwise; it cannot happen for these kernels short of a bug). To use one in a PyMC model, build the
Gram matrix over *all* strings of interest (training and test) once and wrap it with
:func:`bayes_gp.kernels.precomputed.precomputed_covariance`, whose inputs are integer indices into
that matrix; amplitude and noise remain random variables with NUTS posteriors::

    K = SpectrumKernel(3).gram(train + test, normalize=True)
    with pm.Model():
        eta = pm.HalfNormal("eta", 1.0)
        sigma = pm.HalfNormal("sigma", 1.0)
        gp = pm.gp.Marginal(cov_func=eta**2 * precomputed_covariance(K))
        idx = np.arange(len(train))[:, None]
        gp.marginal_likelihood("y", X=idx, y=y, sigma=sigma)

Every kernel has ``.gram(strings_a, strings_b=None, *, normalize=False)``; ``normalize=True``
returns :math:`k(x, x') / \sqrt{k(x, x)\,k(x', x')}` (R&W eq. 4.35), with the convention that a row
or column of a string whose self-similarity :math:`k(x, x)` is zero (no features, e.g. a string
shorter than ``k`` for the ``k``-spectrum kernel) is zero.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from itertools import product

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from bayes_gp._validation import positive_float
from bayes_gp.linalg import NotPSDError, check_psd

__all__ = [
    "StringKernel",
    "SubstringKernel",
    "SpectrumKernel",
    "BagOfCharacters",
    "BagOfWords",
    "FisherKernel",
]


# --- helpers -------------------------------------------------------------------------------------
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


# --- Fisher kernel (R&W §4.4.2) -----------------------------------------------------------------
class FisherKernel(StringKernel):
    r"""Fisher kernel of a Markov chain over an alphabet, R&W eqs. (4.46)–(4.47).

    .. math::
       k(x, x') = \phi_\theta(x)^\top M^{-1} \phi_\theta(x'), \qquad
       \phi_\theta(x) = \nabla_\theta \log p(x \mid \theta), \qquad
       F = \mathbb{E}_x\!\left[\phi_\theta(x)\phi_\theta(x)^\top\right]

    **Generative model.** A Markov chain of order :math:`m` (``order``) over the alphabet
    :math:`\mathcal{A}` (:math:`V = |\mathcal{A}|` symbols), conditional on the string's length:

    .. math:: p(x \mid \theta) = \prod_{t=1}^{|x|} P(x_t \mid c_t)

    where the context :math:`c_t` is the previous :math:`m` symbols, padded on the left with a
    start marker ``^``. For :math:`m = 1` the context ``^`` gives the initial distribution
    :math:`P(x_1)` and the other :math:`V` contexts the rows of the transition matrix. There are
    :math:`C = \sum_{j=0}^{m} V^j` contexts.

    **Parametrisation.** Each row :math:`P(\cdot \mid c)` is a softmax of free logits with the last
    alphabet symbol as reference (additive log-ratio coordinates):
    :math:`\theta_{c,a} = \log P(a \mid c) - \log P(\mathcal{A}_V \mid c)` for the first
    :math:`V - 1` symbols :math:`a`, so :math:`\theta \in \mathbb{R}^{C(V-1)}` is unconstrained and
    the score is well defined:

    .. math:: \phi_{c,a}(x) = \frac{\partial \log p(x\mid\theta)}{\partial \theta_{c,a}}
              = n_{c,a}(x) - n_c(x)\,P(a \mid c)

    with :math:`n_{c,a}(x)` the number of times :math:`a` follows context :math:`c` in :math:`x`
    and :math:`n_c = \sum_a n_{c,a}`. :meth:`fit` sets :math:`\theta` to the maximum-likelihood
    estimate with add-:math:`\alpha` smoothing,
    :math:`P(a \mid c) = (N_{c,a} + \alpha)/(N_c + V\alpha)`, :math:`N` the counts summed over
    the training strings.

    **Metric** :math:`M`. ``"fisher"``: the Fisher information (4.47) estimated by the uncentred
    empirical second moment of the training scores,
    :math:`\hat F = \frac1N\sum_n \phi(x_n)\phi(x_n)^\top` (at the unsmoothed MLE the mean score
    is exactly zero, so this is also the empirical covariance), regularised as
    :math:`\hat F + \epsilon\,\overline{\operatorname{diag}\hat F}\, I` with
    :math:`\epsilon` = ``fisher_reg`` (contexts never seen in training have zero score there and
    would otherwise make :math:`\hat F` singular). ``"identity"``: :math:`M = I` (R&W's fallback).
    A symmetric positive-definite array of shape ``(C(V-1), C(V-1))`` is used as given.

    **SE on scores.** With ``se_lengthscale`` :math:`\ell`,
    :math:`k(x, x') = \exp\!\left(-\|\phi(x) - \phi(x')\|_{M^{-1}}^2 / 2\ell^2\right)`, the squared
    exponential on the score vectors in the same metric
    (:math:`\|v\|_{M^{-1}}^2 = v^\top M^{-1} v`; plain Euclidean when ``M="identity"``).

    Parameters
    ----------
    alphabet : str or sequence of str
        The :math:`V \ge 2` distinct symbols (single characters). Strings with other characters
        are refused.
    order : int, default 1
        Markov order :math:`m \ge 1`.
    M : {"fisher", "identity"} or ndarray
    se_lengthscale : float, optional
        Positive; switches to the SE-on-scores kernel.
    alpha : float, default 1.0
        Add-:math:`\alpha` smoothing, :math:`\alpha > 0` (keeps every probability positive, so
        every logit is finite).
    fisher_reg : float, default 1e-3
        Relative ridge :math:`\epsilon > 0` added to :math:`\hat F`.
    """

    def __init__(
        self,
        alphabet: str | Sequence[str],
        order: int = 1,
        M: str | np.ndarray = "fisher",
        se_lengthscale: float | None = None,
        *,
        alpha: float = 1.0,
        fisher_reg: float = 1e-3,
    ):
        try:
            symbols = list(alphabet)
        except TypeError:
            raise ValueError(
                f"`alphabet` must be a str or a sequence of str, got {alphabet!r}"
            ) from None
        if not all(isinstance(a, str) and len(a) == 1 for a in symbols):
            raise ValueError(f"`alphabet` must consist of single characters, got {alphabet!r}")
        if len(set(symbols)) != len(symbols):
            raise ValueError(f"`alphabet` has repeated symbols: {alphabet!r}")
        if len(symbols) < 2:
            raise ValueError(f"`alphabet` needs at least 2 symbols, got {alphabet!r}")
        self.alphabet = tuple(symbols)
        self.order = _positive_int("order", order)
        if isinstance(M, str):
            if M not in ("fisher", "identity"):
                raise ValueError(f"`M` must be 'fisher', 'identity' or a matrix, got {M!r}")
            self.M = M
        else:
            self.M = np.asarray(M, dtype=float)
        self.se_lengthscale = (
            None if se_lengthscale is None else positive_float("se_lengthscale", se_lengthscale)
        )
        self.alpha = positive_float("alpha", alpha)
        self.fisher_reg = positive_float("fisher_reg", fisher_reg)
        self._index = {a: i for i, a in enumerate(self.alphabet)}
        V, m = len(self.alphabet), self.order
        # Contexts: tuples of m codes, -1 = start marker (only as a prefix).
        contexts = [
            (-1,) * j + w for j in range(m, -1, -1) for w in product(range(V), repeat=m - j)
        ]
        self.contexts = tuple(contexts)
        self._ctx_index = {c: i for i, c in enumerate(contexts)}
        if not isinstance(self.M, str):
            D = self.n_params
            if self.M.shape != (D, D):
                raise ValueError(f"`M` must have shape ({D}, {D}), got {self.M.shape}")
        self.theta_: np.ndarray | None = None
        self._L: np.ndarray | None = None

    def __repr__(self) -> str:
        return (
            f"FisherKernel(alphabet={''.join(self.alphabet)!r}, order={self.order}, "
            f"M={self.M if isinstance(self.M, str) else 'matrix'}, "
            f"se_lengthscale={self.se_lengthscale})"
        )

    @property
    def n_params(self) -> int:
        """Number of free parameters :math:`C(V - 1)` (the length of a score vector)."""
        return len(self.contexts) * (len(self.alphabet) - 1)

    # -- the generative model ----------------------------------------------------------------------
    def counts(self, x: str) -> np.ndarray:
        """Transition counts :math:`n_{c,a}(x)`, shape ``(C, V)``."""
        if not isinstance(x, str):
            raise ValueError(f"a string is required, got {type(x).__name__}")
        V = len(self.alphabet)
        n = np.zeros((len(self.contexts), V))
        ctx = (-1,) * self.order
        for ch in x:
            a = self._index.get(ch)
            if a is None:
                raise ValueError(
                    f"character {ch!r} is not in the alphabet {''.join(self.alphabet)!r}"
                )
            n[self._ctx_index[ctx], a] += 1
            ctx = (*ctx[1:], a)
        return n

    @staticmethod
    def _probs_from_theta(theta: np.ndarray) -> np.ndarray:
        logits = np.concatenate([theta, np.zeros((theta.shape[0], 1))], axis=1)
        logits -= logits.max(axis=1, keepdims=True)
        P = np.exp(logits)
        return P / P.sum(axis=1, keepdims=True)

    def _theta(self, theta) -> np.ndarray:
        if theta is None:
            self._require_fit()
            return self.theta_
        theta = np.asarray(theta, dtype=float).reshape(len(self.contexts), len(self.alphabet) - 1)
        return theta

    def probabilities(self, theta=None) -> np.ndarray:
        """Rows :math:`P(\\cdot \\mid c)`, shape ``(C, V)``, at ``theta`` (default: fitted)."""
        return self._probs_from_theta(self._theta(theta))

    def log_prob(self, x: str, theta=None) -> float:
        """:math:`\\log p(x \\mid \\theta) = \\sum_{c,a} n_{c,a}(x) \\log P(a \\mid c)`.

        ``theta``: flat or ``(C, V-1)`` logits; default the fitted ones.
        """
        P = self.probabilities(theta)
        return float(np.sum(self.counts(x) * np.log(P)))

    def score(self, strings: Sequence[str], theta=None) -> np.ndarray:
        """Score vectors :math:`\\phi_\\theta(x) = \\nabla_\\theta \\log p(x\\mid\\theta)`, shape
        ``(n, C(V-1))`` (flattened context-major, matching ``theta_.ravel()``)."""
        strings = _as_strings("strings", strings)
        P = self.probabilities(theta)
        out = np.empty((len(strings), self.n_params))
        for i, x in enumerate(strings):
            n = self.counts(x)
            out[i] = (n[:, :-1] - n.sum(axis=1, keepdims=True) * P[:, :-1]).ravel()
        return out

    def fit(self, strings: Sequence[str]) -> FisherKernel:
        """Fit :math:`\\theta` by smoothed maximum likelihood and, for ``M="fisher"``, estimate
        :math:`\\hat F` from the training scores. Returns ``self``."""
        strings = _as_strings("strings", strings)
        if not strings:
            raise ValueError("`strings` must contain at least one string to fit the Fisher kernel")
        N = sum(self.counts(x) for x in strings)
        P = (N + self.alpha) / (N.sum(axis=1, keepdims=True) + len(self.alphabet) * self.alpha)
        self.theta_ = np.log(P[:, :-1]) - np.log(P[:, -1:])
        D = self.n_params
        if isinstance(self.M, str) and self.M == "identity":
            Mmat = np.eye(D)
        elif isinstance(self.M, str):
            S = self.score(strings)
            F = S.T @ S / len(strings)
            scale = float(np.mean(np.diag(F)))
            scale = scale if scale > 0 else 1.0
            Mmat = F + self.fisher_reg * scale * np.eye(D)
        else:
            Mmat = 0.5 * (self.M + self.M.T)
        self.fisher_ = Mmat
        try:
            self._L = np.linalg.cholesky(Mmat)
        except np.linalg.LinAlgError:
            raise ValueError("`M` must be symmetric positive definite") from None
        return self

    def _require_fit(self):
        if self.theta_ is None:
            raise RuntimeError(
                "the FisherKernel is not fitted: call `.fit(training_strings)` first"
            )

    def whitened_scores(self, strings: Sequence[str]) -> np.ndarray:
        """:math:`L^{-1}\\phi(x)` with :math:`M = LL^\\top`, so that
        :math:`k(x, x') = z(x)^\\top z(x')`. Shape ``(n, C(V-1))``."""
        self._require_fit()
        S = self.score(strings)
        return sla.solve_triangular(self._L, S.T, lower=True).T

    def _gram(self, a, b):
        Za = self.whitened_scores(a)
        Zb = Za if b is None else self.whitened_scores(b)
        if self.se_lengthscale is None:
            return Za @ Zb.T
        sq = np.sum(Za**2, axis=1)[:, None] + np.sum(Zb**2, axis=1)[None, :] - 2.0 * Za @ Zb.T
        return np.exp(-np.maximum(sq, 0.0) / (2.0 * self.se_lengthscale**2))

    def _self_similarity(self, strings):
        if self.se_lengthscale is not None:
            self._require_fit()
            return np.ones(len(strings))
        Z = self.whitened_scores(strings)
        return np.sum(Z**2, axis=1)
