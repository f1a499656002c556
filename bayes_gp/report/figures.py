"""Report figures as ``data:image/png;base64`` URIs.

MCMC figures are ArviZ 1.x plots (``arviz_plots`` with the matplotlib backend):
``az.plot_trace_dist``, ``az.plot_rank``, ``az.plot_pair``, ``az.plot_energy``,
``az.plot_prior_posterior``, ``az.plot_ppc_dist`` (regression), ``az.plot_ppc_pava``
(calibration of binary outcomes) and ``az.plot_compare``. Only the predictive bands are drawn
here with matplotlib directly. Every figure is closed after it is encoded, so nothing is left in
pyplot's state (and nothing is displayed twice in Jupyter).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence

import numpy as np

from bayes_gp.report.html import DATA_URI_PREFIX

__all__ = [
    "DPI",
    "BANDS_DPI",
    "MAX_PAIR_COMPONENTS",
    "MAX_TRACE_COMPONENTS",
    "to_data_uri",
    "trace_figure",
    "rank_figure",
    "pair_figure",
    "energy_figure",
    "prior_posterior_figure",
    "ppc_figure",
    "compare_figure",
    "regression_bands_figure",
    "noise_bands_figure",
    "classifier_bands_figure",
    "n_components",
]

#: Resolution of the embedded PNGs (a trace plot of three parameters is ~60 kB).
DPI = 72
#: Resolution of the predictive-band figures, the report's main result: drawn at 11 x 4.4 inches,
#: they are about 1100 pixels wide, readable at full width in a browser window.
BANDS_DPI = 100
#: The pair plot shows at most this many scalar components (it grows quadratically).
MAX_PAIR_COMPONENTS = 6
#: Most scalar components in the trace and rank figures (ArviZ refuses more than 40 panels):
#: the first variables that fit are drawn, and the caption says so.
MAX_TRACE_COMPONENTS = 40


def _close(fig) -> None:
    import matplotlib.pyplot as plt

    plt.close(fig)


def to_data_uri(fig, dpi: int = DPI) -> str:
    """Encode a matplotlib figure as a PNG data URI and close it."""
    try:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    finally:
        _close(fig)
    return DATA_URI_PREFIX + base64.b64encode(buf.getvalue()).decode("ascii")


def _arviz_uri(plot) -> str:
    """The figure of an ArviZ ``PlotCollection``/``PlotMatrix`` as a data URI (closed after).

    A figure without a layout engine gets the constrained one: with more variables than fit in
    one row, ArviZ's grid otherwise overlaps a panel's title with the tick labels above it."""
    fig = plot.viz["figure"].item()
    if fig.get_layout_engine() is None:
        fig.set_layout_engine("constrained")
    return to_data_uri(fig)


def n_components(idata, var_names: Sequence[str]) -> int:
    """Number of scalar components of the posterior variables ``var_names``."""
    post = idata["posterior"]
    sample = {"chain", "draw"}
    return int(
        sum(
            np.prod([s for d, s in post[v].sizes.items() if d not in sample], dtype=int)
            for v in var_names
        )
    )


def trace_figure(idata, var_names: Sequence[str]) -> str:
    """Marginal densities per chain and traces (``az.plot_trace_dist``)."""
    import arviz as az

    return _arviz_uri(az.plot_trace_dist(idata, var_names=list(var_names), backend="matplotlib"))


def rank_figure(idata, var_names: Sequence[str]) -> str:
    """Fractional-rank Δ-ECDF per chain (``az.plot_rank``): flat within the band if the chains
    sample the same distribution."""
    import arviz as az

    return _arviz_uri(az.plot_rank(idata, var_names=list(var_names), backend="matplotlib"))


def pair_figure(idata, var_names: Sequence[str]) -> str:
    """Pairwise scatter of the hyperparameters with divergences marked (``az.plot_pair``)."""
    import arviz as az

    return _arviz_uri(
        az.plot_pair(idata, var_names=list(var_names), triangle="lower", backend="matplotlib")
    )


def energy_figure(idata) -> str:
    """Marginal energy vs energy transition distributions and E-BFMI per chain
    (``az.plot_energy``)."""
    import arviz as az

    return _arviz_uri(az.plot_energy(idata, backend="matplotlib"))


def prior_posterior_figure(tree, var_names: Sequence[str]) -> str:
    """Prior and posterior marginals overlaid (``az.plot_prior_posterior``); ``tree`` has
    ``prior`` and ``posterior`` groups."""
    import arviz as az

    return _arviz_uri(
        az.plot_prior_posterior(tree, var_names=list(var_names), backend="matplotlib")
    )


def ppc_figure(tree, binary: bool) -> str:
    """Posterior predictive check: ``az.plot_ppc_dist`` (distribution of replicated vs observed
    data) or, for binary outcomes, ``az.plot_ppc_pava`` (PAV-adjusted calibration curve)."""
    import arviz as az

    if binary:
        return _arviz_uri(az.plot_ppc_pava(tree, backend="matplotlib"))
    return _arviz_uri(az.plot_ppc_dist(tree, backend="matplotlib"))


def compare_figure(comparison) -> str:
    """ELPD differences with standard errors (``az.plot_compare``)."""
    import arviz as az

    return _arviz_uri(az.plot_compare(comparison, backend="matplotlib"))


def _bands_axes():
    from matplotlib.figure import Figure  # no pyplot: the figure is never shown

    fig = Figure(figsize=(11, 4.4), layout="constrained")
    return fig, fig.subplots()


def _regression_bands(ax, x, y, grid, pred_f, pred_y, labels=None) -> None:
    f_label, y_label = labels or ("94% band of f*", "94% band of y* (with noise)")
    ax.fill_between(grid, pred_y.lower, pred_y.upper, color="C0", alpha=0.15, lw=0,
                    label=y_label)  # fmt: skip
    ax.fill_between(grid, pred_f.lower, pred_f.upper, color="C0", alpha=0.35, lw=0,
                    label=f_label)  # fmt: skip
    ax.plot(grid, pred_f.mean, color="C0", lw=1.5, label="predictive mean")
    ax.plot(x, y, "k.", ms=4, label="data")
    ax.set_ylabel("y")
    ax.legend(fontsize=8, loc="best")


def regression_bands_figure(
    x: np.ndarray,
    y: np.ndarray,
    grid: np.ndarray,
    pred_f,
    pred_y,
    title: str,
    xlabel: str = "x",
    labels: tuple[str, str] | None = None,
) -> str:
    """Data, predictive mean and 94% bands of :math:`f_*` and of :math:`y_*` (with noise);
    ``labels``: the legends of the two bands, when they are of other quantities."""
    fig, ax = _bands_axes()
    _regression_bands(ax, x, y, grid, pred_f, pred_y, labels)
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    return to_data_uri(fig, BANDS_DPI)


def noise_bands_figure(
    x: np.ndarray,
    y: np.ndarray,
    grid: np.ndarray,
    pred_f,
    pred_y,
    noise: tuple[np.ndarray, np.ndarray, np.ndarray],
    title: str,
    xlabel: str = "x",
    abs_residuals: np.ndarray | None = None,
) -> str:
    """The bands of :func:`regression_bands_figure` above a panel of the input-dependent noise
    standard deviation: ``noise = (mean, lower, upper)`` on ``grid``, and optionally the absolute
    residuals of the data at ``x``."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 6.8), layout="constrained")
    ax, ax_noise = fig.subplots(2, 1, sharex=True, height_ratios=[3, 2])
    _regression_bands(ax, x, y, grid, pred_f, pred_y)
    ax.set_title(title, fontsize=10)
    mean, lower, upper = noise
    ax_noise.fill_between(grid, lower, upper, color="C2", alpha=0.3, lw=0,
                          label="94% band of the noise sd")  # fmt: skip
    ax_noise.plot(grid, mean, color="C2", lw=1.5, label="posterior mean of the noise sd")
    if abs_residuals is not None:
        ax_noise.plot(x, abs_residuals, ".", color="0.4", ms=4, label="|y − E[f(x)]|")
    ax_noise.set_ylim(bottom=0.0)
    ax_noise.set_xlabel(xlabel)
    ax_noise.set_ylabel("noise sd exp(g)")
    ax_noise.legend(fontsize=8, loc="best")
    return to_data_uri(fig, BANDS_DPI)


def classifier_bands_figure(
    x: np.ndarray,
    t: np.ndarray,
    grid: np.ndarray,
    proba: np.ndarray,
    band: tuple[np.ndarray, np.ndarray] | None,
    title: str,
    xlabel: str = "x",
    positive: str = "1",
) -> str:
    """Predictive probability of the positive class, a 94% band over posterior draws (NUTS),
    and the labels at 0 and 1."""
    fig, ax = _bands_axes()
    if band is not None:
        ax.fill_between(grid, band[0], band[1], color="C1", alpha=0.25, lw=0,
                        label="94% band over posterior draws")  # fmt: skip
    ax.plot(grid, proba, color="C1", lw=1.5, label="predictive probability")
    jitter = np.random.default_rng(0).uniform(-0.02, 0.02, size=np.shape(t))
    ax.plot(x, np.asarray(t, float) + jitter, "k|", ms=8, label="labels (0/1)")
    ax.set_ylim(-0.08, 1.08)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"P(y = {positive})")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="best")
    return to_data_uri(fig, BANDS_DPI)
