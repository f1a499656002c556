r"""The SBC figure: ECDF differences of the fractional ranks with their simultaneous band.

Each panel shows, for one parameter, :math:`F_N(z_k) - z_k` at the evaluation points
:math:`z_k` (:mod:`bayes_gp.validate.uniformity`) and the simultaneous :math:`1 - \alpha` band
of Säilynoja et al. (2022) minus :math:`z_k`. A calibrated model's curve stays inside the band.
Reading the shape (as in Talts et al. 2018 and Säilynoja et al. 2022): a curve above zero
throughout means ranks too low, i.e. posteriors above the true values (below zero: posteriors
below them); a curve falling through zero, above on the left and below on the right (ranks
piled at both ends), means posteriors too narrow; the reverse, rising through zero (ranks in
the middle), posteriors too wide.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["plot_ecdf_difference"]


def plot_ecdf_difference(tests: Mapping, *, title: str | None = None, ncols: int = 3):
    """One panel per parameter of ``tests`` (name → :class:`~bayes_gp.validate.uniformity.
    EcdfTest`): the ECDF difference, its simultaneous band and the test's p-value.

    Returns the matplotlib ``Figure``.
    """
    import matplotlib.pyplot as plt

    if not tests:
        raise ValueError("nothing to plot: no parameters")
    n = len(tests)
    ncols = max(1, min(ncols, n))
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(3.6 * ncols, 2.9 * nrows), squeeze=False, sharey=True
    )
    for ax, (name, t) in zip(axes.ravel(), tests.items(), strict=False):
        b = t.band
        z = np.concatenate([[0.0], b.z, [1.0]])
        diff = np.concatenate([[0.0], t.ecdf - b.z, [0.0]])
        lo = np.concatenate([[0.0], b.lower - b.z, [0.0]])
        hi = np.concatenate([[0.0], b.upper - b.z, [0.0]])
        ax.fill_between(z, lo, hi, color="C0", alpha=0.2, lw=0, label=f"{1 - b.alpha:.0%} band")
        ax.plot(z, diff, color="C3" if not t.inside else "C0", lw=1.5, label="ECDF − z")
        ax.axhline(0.0, color="0.4", lw=0.7)
        ax.set_xlim(0.0, 1.0)
        ax.set_title(f"{name}  (p = {t.pvalue:.2g})", fontsize=10)
        ax.set_xlabel("fractional rank z")
    for ax in axes[:, 0]:
        ax.set_ylabel("ECDF difference")
    for ax in axes.ravel()[n:]:
        ax.set_visible(False)
    axes[0, 0].legend(fontsize=8, loc="lower left")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
