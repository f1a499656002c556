r"""The rank statistic of simulation-based calibration (Talts et al. 2018).

Draw :math:`\tilde\theta \sim \pi(\theta)`, then :math:`\tilde y \sim \pi(y \mid \tilde\theta)`,
and :math:`L` draws :math:`\theta_1, \dots, \theta_L` from the posterior
:math:`\pi(\theta \mid \tilde y)`. The rank of the true value among the draws,

.. math::
   r = \sum_{l=1}^{L} \mathbb{1}[\theta_l < \tilde\theta] \in \{0, 1, \dots, L\},

is discrete uniform on :math:`\{0, \dots, L\}` for every scalar parameter when the
:math:`\theta_l` are independent draws from the exact posterior (Talts et al. 2018,
Theorem 1). MCMC draws are autocorrelated, which piles ranks up in the middle or at the ends
even for a correct sampler, so Talts et al. thin the chains to about as many draws
as their effective sample size: :func:`thin` keeps :math:`L` equally spaced draws, and the
caller checks that the effective sample size (:func:`effective_sample_size`) is at least
:math:`L`.

References
----------
Talts, S., Betancourt, M., Simpson, D., Vehtari, A. & Gelman, A. (2018). Validating Bayesian
inference algorithms with simulation-based calibration. arXiv:1804.06788.
"""

from __future__ import annotations

import numpy as np

__all__ = ["thin_positions", "thin", "rank_statistic", "effective_sample_size", "max_rhat"]


def thin_positions(n_total: int, n_keep: int) -> np.ndarray:
    """``n_keep`` equally spaced positions in ``range(n_total)``: position :math:`k` is
    :math:`\\lfloor (k + \\tfrac12)\\, n_{total} / n_{keep} \\rfloor`, so consecutive kept draws
    are :math:`n_{total} / n_{keep}` apart."""
    n_total, n_keep = int(n_total), int(n_keep)
    if n_keep < 1:
        raise ValueError(f"`n_keep` must be at least 1, got {n_keep}")
    if n_keep > n_total:
        raise ValueError(f"cannot keep {n_keep} of {n_total} draws")
    return np.floor((np.arange(n_keep) + 0.5) * n_total / n_keep).astype(int)


def thin(draws: np.ndarray, n_keep: int) -> np.ndarray:
    """Keep ``n_keep`` equally spaced draws of ``draws`` ``(chain, draw, ...)``.

    The chains are laid end to end (chain-major), so the kept draws are equally spaced within
    each chain. Returns ``(n_keep, ...)``.
    """
    draws = np.asarray(draws)
    if draws.ndim < 2:
        raise ValueError("`draws` must have the dimensions (chain, draw, ...)")
    flat = draws.reshape((draws.shape[0] * draws.shape[1], *draws.shape[2:]))
    return flat[thin_positions(flat.shape[0], n_keep)]


def rank_statistic(truth, draws: np.ndarray) -> np.ndarray:
    """:math:`r = \\sum_l \\mathbb{1}[\\theta_l < \\tilde\\theta]`: the number of ``draws``
    ``(L, ...)`` strictly below ``truth`` (broadcast over the trailing dimensions).

    Ties (impossible for continuous parameters) count as not below, so :math:`r \\le L`.
    """
    draws = np.asarray(draws)
    truth = np.asarray(truth)
    if np.isnan(truth).any() or np.isnan(draws).any():
        raise ValueError("the true value or the posterior draws contain NaN")
    return np.sum(draws < truth, axis=0)


def effective_sample_size(draws: np.ndarray) -> np.ndarray:
    """Per-parameter effective sample size of ``draws`` ``(chain, draw, P)``: the smaller of
    the bulk and tail ESS (Vehtari et al. 2021, rank-normalised), from ArviZ."""
    from arviz_stats.base import array_stats

    draws = np.asarray(draws, dtype=float)
    bulk = array_stats.ess(draws, chain_axis=0, draw_axis=1, method="bulk")
    # tail ESS: the smaller ESS of the 5% and 95% quantiles (Vehtari et al. 2021)
    tail = array_stats.ess(draws, chain_axis=0, draw_axis=1, method="tail", prob=0.05)
    return np.minimum(np.asarray(bulk, float), np.asarray(tail, float))


def max_rhat(draws: np.ndarray) -> float:
    """The largest rank-normalised split :math:`\\hat R` over the parameters of ``draws``
    ``(chain, draw, P)`` (NaN with one chain of one draw)."""
    from arviz_stats.base import array_stats

    draws = np.asarray(draws, dtype=float)
    rhat = np.asarray(array_stats.rhat(draws, chain_axis=0, draw_axis=1, method="rank"), float)
    return float(np.nanmax(rhat)) if np.isfinite(rhat).any() else float("nan")
