"""The Fisher kernel of a Markov chain fitted to the strings, R&W §4.4.2 (eqs. 4.46-4.47)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

import numpy as np
import scipy.linalg as sla

from bayes_gp._validation import positive_float
from bayes_gp.kernels.strings.base import StringKernel, _as_strings, _positive_int

__all__ = ["FisherKernel"]


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
