r"""Tests of the discrete uniformity of SBC ranks: binned :math:`\chi^2` and the simultaneous
ECDF band of Säilynoja, Bürkner & Vehtari (2022).

Ranks :math:`r_1, \dots, r_N \in \{0, \dots, L\}` (:mod:`bayes_gp.validate.ranks`) are discrete
uniform under the null hypothesis that the inference is calibrated.

**Binned** :math:`\chi^2` (Talts et al. 2018; Stan User's Guide, "Testing uniformity"). The
:math:`L + 1` possible ranks are split into :math:`J` bins of (nearly) equal width
:math:`w_j`; with :math:`b_j` ranks in bin :math:`j` and :math:`e_j = N w_j / (L + 1)` expected,

.. math::
   X^2 = \sum_{j=1}^{J} \frac{(b_j - e_j)^2}{e_j} \;\dot\sim\; \chi^2_{J - 1}.

**ECDF band** (Säilynoja et al. 2022). The fractional ranks :math:`u_i = (r_i + 1)/(L + 1)` have
the empirical CDF :math:`F_N`. At evaluation points :math:`z_k = c_k / (L + 1)`
(:math:`0 < c_1 < \dots < c_{K-1} \le L` integers, so :math:`N F_N(z_k) = \#\{i : r_i < c_k\}`),
uniformity gives :math:`N F_N(z_k) \sim \operatorname{Bin}(N, z_k)` exactly, as for continuous
uniform values (their treatment of discrete uniformity: evaluate the ECDF only where the
discrete CDF equals the continuous one). The two-sided pointwise tail probability of a count
:math:`c` at :math:`z_k` is

.. math::
   \tau_k(c) = \min\{1,\; 2 \min(P[B_k \le c],\; P[B_k \ge c])\}, \qquad
   B_k \sim \operatorname{Bin}(N, z_k),

and the pointwise band of level :math:`\gamma` holds the counts with
:math:`\tau_k(c) \ge \gamma` (the binomial :math:`\gamma/2` and :math:`1 - \gamma/2` quantiles).
The *simultaneous* :math:`1 - \alpha` band uses the largest :math:`\gamma` such that, under
uniformity, the whole ECDF stays inside with probability at least :math:`1 - \alpha`. The test
statistic is :math:`T = \min_k \tau_k(N F_N(z_k))`: the ECDF leaves the band exactly when
:math:`T < \gamma`, and :math:`p = P_0(T \le T_{obs})` is below :math:`\alpha` exactly then.

Säilynoja et al. find :math:`\gamma` by simulation or by an optimisation that evaluates the
coverage of a candidate :math:`\gamma` exactly. Here (``method="exact"``) the coverage
:math:`P_0(\text{all } \tau_k(N F_N(z_k)) \ge \gamma)` is computed by the forward recursion over
the evaluation points that the conditional distribution

.. math::
   N F_N(z_k) - N F_N(z_{k-1}) \mid N F_N(z_{k-1}) = j \;\sim\;
   \operatorname{Bin}\!\left(N - j,\; \frac{z_k - z_{k-1}}{1 - z_{k-1}}\right)

allows, and :math:`\gamma` by bisection over the finitely many attainable values of
:math:`\tau`; the same recursion gives the exact :math:`p`-value. It costs
:math:`O(K N^2)` per evaluation; beyond :data:`EXACT_LIMIT` (:math:`K (N+1)^2` numbers) the
simulation method is used instead (``method="simulate"``: :math:`T` from ``n_sims`` multinomial
draws of the counts). :math:`K = \min(L + 1, N)` intervals, as Säilynoja et al. recommend for
many possible ranks.

References
----------
Säilynoja, T., Bürkner, P.-C. & Vehtari, A. (2022). Graphical test for discrete uniformity and
its applications in goodness-of-fit evaluation and multiple sample comparison. *Statistics and
Computing* 32, 32. https://doi.org/10.1007/s11222-022-10090-6

Talts, S., Betancourt, M., Simpson, D., Vehtari, A. & Gelman, A. (2018). Validating Bayesian
inference algorithms with simulation-based calibration. arXiv:1804.06788.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats

from bayes_gp._arguments import renamed_argument

__all__ = [
    "ChiSquareTest",
    "EcdfBand",
    "EcdfTest",
    "EXACT_LIMIT",
    "chi_square_test",
    "default_bins",
    "ecdf_band",
    "ecdf_test",
    "evaluation_points",
]

#: Largest :math:`K (N+1)^2` for which the band and p-value are computed exactly (the stored
#: transition matrices then take at most 64 MB); above it the simulation method is used.
EXACT_LIMIT = 8_000_000


def _check_ranks(ranks, max_rank: int) -> np.ndarray:
    max_rank = int(max_rank)
    if max_rank < 1:
        raise ValueError(f"`max_rank` (L) must be at least 1, got {max_rank}")
    r = np.asarray(ranks)
    if r.ndim != 1 or r.size == 0:
        raise ValueError("`ranks` must be a non-empty 1-D array")
    if not np.all(np.isfinite(r)) or np.any(r != np.round(r)):
        raise ValueError("`ranks` must be whole numbers")
    r = r.astype(int)
    if r.min() < 0 or r.max() > max_rank:
        raise ValueError(f"ranks must lie in 0..{max_rank}, got {r.min()}..{r.max()}")
    return r


# ------------------------------------------------------------------------------- chi-square
@dataclass(frozen=True)
class ChiSquareTest:
    """Binned :math:`\\chi^2` test of uniform ranks (module docstring).

    ``edges``: bin :math:`j` holds the ranks ``edges[j] <= r < edges[j + 1]``.
    """

    statistic: float
    df: int
    pvalue: float
    edges: np.ndarray
    observed: np.ndarray
    expected: np.ndarray


def default_bins(n: int, max_rank: int) -> int:
    """Bins for the :math:`\\chi^2` test: about five expected ranks per bin, between 2 and 20
    bins (Talts et al. 2018 use 20), and no more bins than possible ranks."""
    return int(min(max_rank + 1, max(2, min(20, n // 5))))


def chi_square_test(ranks, max_rank: int, n_bins: int | None = None) -> ChiSquareTest:
    """:math:`X^2 = \\sum_j (b_j - e_j)^2 / e_j` on ``n_bins`` bins of the ranks
    ``0..max_rank``, with :math:`e_j` proportional to the bin's width (bins need not divide
    :math:`L + 1`) and :math:`J - 1` degrees of freedom."""
    r = _check_ranks(ranks, max_rank)
    L1 = int(max_rank) + 1
    J = default_bins(r.size, max_rank) if n_bins is None else int(n_bins)
    if not 2 <= J <= L1:
        raise ValueError(f"`n_bins` must be between 2 and L + 1 = {L1}, got {J}")
    edges = np.round(np.arange(J + 1) * L1 / J).astype(int)
    observed = np.histogram(r, bins=edges)[0].astype(float)
    # np.histogram closes the last bin on the right; the last edge is L + 1, above every rank
    expected = r.size * np.diff(edges) / L1
    statistic = float(np.sum((observed - expected) ** 2 / expected))
    pvalue = float(stats.chi2.sf(statistic, J - 1))
    return ChiSquareTest(statistic, J - 1, pvalue, edges, observed, expected)


# ------------------------------------------------------------------------------ ECDF band
def evaluation_points(n: int, max_rank: int) -> tuple[np.ndarray, np.ndarray]:
    """``(cuts, z)``: the integer cut points :math:`c_k` and :math:`z_k = c_k/(L+1)`, splitting
    the :math:`L + 1` possible ranks into :math:`K = \\min(L + 1, N)` nearly equal intervals
    (``K - 1`` interior points)."""
    L1 = int(max_rank) + 1
    K = max(2, min(L1, int(n)))
    cuts = np.unique(np.round(np.arange(1, K) * L1 / K).astype(int))
    cuts = cuts[(cuts > 0) & (cuts < L1)]
    return cuts, cuts / L1


@lru_cache(maxsize=16)
def _tails(n: int, max_rank: int) -> np.ndarray:
    """:math:`\\tau_k(c)` for every evaluation point and count ``c = 0..n``: ``(K-1, n+1)``."""
    _, z = evaluation_points(n, max_rank)
    c = np.arange(n + 1)[None, :]
    lower = stats.binom.cdf(c, n, z[:, None])
    upper = stats.binom.sf(c - 1, n, z[:, None])
    tau = np.minimum(1.0, 2.0 * np.minimum(lower, upper))
    tau.flags.writeable = False
    return tau


@lru_cache(maxsize=4)
def _transitions(n: int, max_rank: int) -> np.ndarray:
    """``M[k, j, c]`` = :math:`P(N F_N(z_k) = c \\mid N F_N(z_{k-1}) = j)` (module docstring)."""
    _, z = evaluation_points(n, max_rank)
    j = np.arange(n + 1)[:, None]
    c = np.arange(n + 1)[None, :]
    out = np.empty((z.size, n + 1, n + 1))
    prev = 0.0
    for k, zk in enumerate(z):
        q = (zk - prev) / (1.0 - prev)
        out[k] = stats.binom.pmf(c - j, n - j, q)  # zero for c < j
        prev = zk
    out.flags.writeable = False
    return out


def _exit_probability(n: int, max_rank: int, allowed: np.ndarray) -> float:
    """:math:`P_0` (the counts leave ``allowed`` ``(K-1, n+1)`` at some evaluation point),
    summed over the first exit so that tiny probabilities keep their precision."""
    M = _transitions(n, max_rank)
    p = np.zeros(n + 1)
    p[0] = 1.0  # N F_N(0) = 0
    out = 0.0
    for Mk, ok in zip(M, allowed, strict=True):
        p = p @ Mk
        out += float(p[~ok].sum())
        p = np.where(ok, p, 0.0)
    return min(1.0, out)


def _use_exact(n: int, max_rank: int, method: str) -> bool:
    if method not in ("auto", "exact", "simulate"):
        raise ValueError(f"`method` must be 'auto', 'exact' or 'simulate', got {method!r}")
    if method == "auto":
        k = evaluation_points(n, max_rank)[0].size
        return k * (n + 1) ** 2 <= EXACT_LIMIT
    return method == "exact"


def _simulated_statistics(n: int, max_rank: int, n_sims: int, seed: int) -> np.ndarray:
    """:math:`T` for ``n_sims`` uniform rank samples (counts drawn as multinomials)."""
    cuts, _ = evaluation_points(n, max_rank)
    edges = np.concatenate([[0], cuts, [max_rank + 1]])
    probs = np.diff(edges) / (max_rank + 1)
    counts = np.random.default_rng(seed).multinomial(n, probs, size=n_sims)
    C = np.cumsum(counts, axis=1)[:, :-1]
    tau = _tails(n, max_rank)
    return tau[np.arange(cuts.size)[None, :], C].min(axis=1)


@dataclass(frozen=True)
class EcdfBand:
    """The simultaneous :math:`1 - \\alpha` band of the ECDF of :math:`N` uniform ranks.

    ``lower``/``upper`` bound :math:`F_N(z_k)` at the evaluation points ``z``; ``gamma`` is the
    pointwise level that gives the simultaneous coverage ``coverage`` (at least
    :math:`1 - \\alpha`; exact for ``method="exact"``, estimated for ``"simulate"``).
    """

    z: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    gamma: float
    alpha: float
    coverage: float
    n: int
    max_rank: int
    method: str


@lru_cache(maxsize=64)
def _band(n: int, max_rank: int, alpha: float, method: str, n_sims: int, seed: int) -> EcdfBand:
    tau = _tails(n, max_rank)
    _, z = evaluation_points(n, max_rank)
    if _use_exact(n, max_rank, method):
        # the largest attainable gamma with P0(all tau >= gamma) >= 1 - alpha; the coverage
        # falls as gamma grows
        values = np.unique(tau)
        lo, hi = 0, values.size - 1  # values[0] (the smallest tau) has coverage 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if 1.0 - _exit_probability(n, max_rank, tau >= values[mid]) >= 1.0 - alpha:
                lo = mid
            else:
                hi = mid - 1
        gamma = float(values[lo])
        coverage = 1.0 - _exit_probability(n, max_rank, tau >= gamma)
        used = "exact"
    else:
        T = np.sort(_simulated_statistics(n, max_rank, n_sims, seed))
        gamma = float(T[int(np.floor(alpha * n_sims))])
        coverage = float(np.mean(T >= gamma))
        used = "simulate"
    inside = tau >= gamma
    counts = np.arange(n + 1)
    lower = np.array([counts[row].min() for row in inside]) / n
    upper = np.array([counts[row].max() for row in inside]) / n
    return EcdfBand(z, lower, upper, gamma, alpha, coverage, n, max_rank, used)


@renamed_argument("seed", "random_seed")
def ecdf_band(
    n: int,
    max_rank: int,
    alpha: float = 0.05,
    *,
    method: str = "auto",
    n_sims: int = 20_000,
    random_seed: int = 0,
) -> EcdfBand:
    """The simultaneous :math:`1 - \\alpha` band for the ECDF of ``n`` ranks on
    ``0..max_rank`` (module docstring; ``method="simulate"`` uses ``n_sims`` draws seeded by
    ``random_seed``)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"`alpha` must be in (0, 1), got {alpha}")
    if int(n) < 1:
        raise ValueError(f"`n` must be at least 1, got {n}")
    return _band(int(n), int(max_rank), float(alpha), method, int(n_sims), int(random_seed))


@dataclass(frozen=True)
class EcdfTest:
    """The ECDF uniformity test of one set of ranks: ``statistic`` :math:`T`, ``pvalue``
    :math:`P_0(T \\le T_{obs})`, the ECDF ``ecdf`` at ``band.z``, and the band."""

    statistic: float
    pvalue: float
    ecdf: np.ndarray
    band: EcdfBand

    @property
    def inside(self) -> bool:
        """Whether the ECDF stays inside the simultaneous band."""
        return bool(np.all((self.ecdf >= self.band.lower) & (self.ecdf <= self.band.upper)))


@renamed_argument("seed", "random_seed")
def ecdf_test(
    ranks,
    max_rank: int,
    alpha: float = 0.05,
    *,
    method: str = "auto",
    n_sims: int = 20_000,
    random_seed: int = 0,
) -> EcdfTest:
    """Test uniformity of ``ranks`` on ``0..max_rank`` with the ECDF band (module docstring).

    Returns the statistic :math:`T = \\min_k \\tau_k(N F_N(z_k))`, its p-value (exact, or
    :math:`(1 + \\#\\{T_s \\le T_{obs}\\}) / (1 + n_{sims})` by simulation) and the
    simultaneous :math:`1 - \\alpha` band; ``pvalue <= alpha`` exactly when the ECDF leaves
    the exact band.
    """
    r = _check_ranks(ranks, max_rank)
    n = r.size
    cuts, _ = evaluation_points(n, max_rank)
    counts = np.searchsorted(np.sort(r), cuts, side="left")  # #{i : r_i < c_k}
    tau = _tails(n, int(max_rank))
    T = float(tau[np.arange(cuts.size), counts].min())
    band = ecdf_band(n, max_rank, alpha, method=method, n_sims=n_sims, random_seed=random_seed)
    if band.method == "exact":
        p = _exit_probability(n, int(max_rank), tau > T)
    else:
        Ts = _simulated_statistics(n, int(max_rank), int(n_sims), int(random_seed))
        p = (1.0 + float(np.sum(Ts <= T))) / (1.0 + n_sims)
    return EcdfTest(T, p, counts / n, band)
