"""Report figures as ``data:image/png;base64`` URIs.

MCMC figures are ArviZ 1.x plots (``arviz_plots`` with the matplotlib backend):
``az.plot_trace_dist``, ``az.plot_rank``, ``az.plot_pair``, ``az.plot_energy``,
``az.plot_prior_posterior``, ``az.plot_ppc_dist`` (regression), ``az.plot_ppc_pava``
(calibration of binary outcomes) and ``az.plot_compare``. Only the predictive bands are drawn
here with matplotlib directly, with the held-out calibration (PIT histogram, reliability
diagram) and the prior predictive check. Every figure is closed after it is encoded, so nothing is left in
pyplot's state (and nothing is displayed twice in Jupyter).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence

import numpy as np

from bayes_gp.predictive import CI_QUANTILES
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
    "pit_figure",
    "reliability_figure",
    "prior_predictive_figure",
    "outcome_figure",
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
    band_label: str = "94% band over posterior draws",
) -> str:
    """Predictive probability of the positive class, its 94% band (``band_label`` says which:
    over posterior draws for a classifier's NUTS fit, the credible band of the probability for
    a latent GP's), and the labels at 0 and 1."""
    fig, ax = _bands_axes()
    if band is not None:
        ax.fill_between(grid, band[0], band[1], color="C1", alpha=0.25, lw=0,
                        label=band_label)  # fmt: skip
    ax.plot(grid, proba, color="C1", lw=1.5, label="predictive probability")
    jitter = np.random.default_rng(0).uniform(-0.02, 0.02, size=np.shape(t))
    ax.plot(x, np.asarray(t, float) + jitter, "k|", ms=8, label="labels (0/1)")
    ax.set_ylim(-0.08, 1.08)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"P(y = {positive})")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="best")
    return to_data_uri(fig, BANDS_DPI)


def _small_axes(ncols: int = 1, width: float = 5.5):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols, 3.6), layout="constrained")
    return fig, fig.subplots(1, ncols, squeeze=False)[0]


def pit_figure(heights: np.ndarray, n: int, coverage: dict) -> str:
    """The PIT histogram of held-out data (heights with mean 1) against the uniform line and
    its pointwise 95% band for ``n`` observations (binomial bin counts), beside the interval
    coverage at each nominal level."""
    from scipy import stats

    bins = len(heights)
    fig, (ax, ax_cov) = _small_axes(2)
    edges = np.linspace(0.0, 1.0, bins + 1)
    ax.bar(edges[:-1], heights, width=1.0 / bins, align="edge", color="C0", alpha=0.6,
           edgecolor="white", label="PIT histogram")  # fmt: skip
    lo, hi = stats.binom.ppf([0.025, 0.975], n, 1.0 / bins) * bins / n
    ax.axhspan(lo, hi, color="0.5", alpha=0.2, lw=0, label="95% band if calibrated")
    ax.axhline(1.0, color="k", lw=1)
    ax.set_xlabel("PIT  F(y)")
    ax.set_ylabel("density")
    ax.set_xlim(0, 1)
    ax.set_title(f"PIT of {n} held-out observations", fontsize=10)
    ax.legend(fontsize=8, loc="best")
    levels = sorted(coverage)
    ax_cov.plot([0, 1], [0, 1], color="k", lw=1, label="ideal")
    ax_cov.plot(levels, [coverage[q] for q in levels], "o", color="C1", ms=7,
                label="observed coverage")  # fmt: skip
    for q in levels:
        lo_q, hi_q = stats.binom.ppf([0.025, 0.975], n, q) / n
        ax_cov.plot([q, q], [lo_q, hi_q], color="0.5", lw=3, alpha=0.5)
    ax_cov.set_xlim(0, 1)
    ax_cov.set_ylim(0, 1.02)
    ax_cov.set_xlabel("nominal probability of the central interval")
    ax_cov.set_ylabel("fraction of held-out y inside")
    ax_cov.set_title("Interval coverage (grey: 95% binomial range)", fontsize=10)
    ax_cov.legend(fontsize=8, loc="upper left")
    return to_data_uri(fig)


def reliability_figure(table, n: int) -> str:
    """Reliability diagram of held-out binary outcomes: observed frequency of 1s against the
    mean predicted probability per bin (marker area ∝ cases), with 95% binomial ranges."""
    from scipy import stats

    fig, (ax,) = _small_axes(1, 6.0)
    ax.plot([0, 1], [0, 1], color="k", lw=1, label="perfect calibration")
    p = table["mean_predicted"].to_numpy()
    counts = table["n"].to_numpy()
    lo = stats.binom.ppf(0.025, counts, p) / counts
    hi = stats.binom.ppf(0.975, counts, p) / counts
    ax.vlines(p, lo, hi, color="0.5", lw=3, alpha=0.5, label="95% range if calibrated")
    ax.scatter(p, table["observed"], s=20 + 200 * counts / counts.max(), color="C1",
               zorder=3, label="observed frequency")  # fmt: skip
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("mean predicted probability (bin)")
    ax.set_ylabel("observed frequency of 1s")
    ax.set_title(f"Reliability of {n} held-out predictions", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    return to_data_uri(fig)


def prior_predictive_figure(draws: np.ndarray, observed: np.ndarray, binary: bool) -> str:
    """Prior predictive check: for a continuous or count outcome, the observed data's
    distribution (histogram) against prior predictive data sets (thin lines: the sorted draws'
    empirical quantiles) and the range they span; for a binary outcome the prior predictive
    distribution of the fraction of 1s against the observed fraction."""
    fig, (ax,) = _small_axes(1, 9.0)
    obs = np.asarray(observed, float)
    if binary:
        frac = draws.mean(axis=1)
        ax.hist(frac, bins=20, range=(0, 1), color="C0", alpha=0.6, label="prior predictive")
        ax.axvline(obs.mean(), color="k", lw=2, label="observed")
        ax.set_xlabel("fraction of 1s")
        ax.set_ylabel("data sets")
    else:
        probs = (np.arange(obs.size) + 0.5) / obs.size
        for i, d in enumerate(draws):
            ax.plot(np.sort(d), probs, color="C0", alpha=0.25, lw=0.8,
                    label="prior predictive data sets" if i == 0 else None)  # fmt: skip
        ax.plot(np.sort(obs), probs, color="k", lw=2, label="observed")
        lo, hi = np.quantile(draws, [0.005, 0.995])
        ax.axvspan(obs.min(), obs.max(), color="C1", alpha=0.15, lw=0, label="observed range")
        ax.set_xlim(min(lo, obs.min()), max(hi, obs.max()))
        ax.set_xlabel("y (x-axis: 99% range of the prior predictive draws)")
        ax.set_ylabel("empirical CDF")
    ax.set_title(f"Prior predictive check: {len(draws)} data sets from the prior", fontsize=10)
    ax.legend(fontsize=8, loc="best")
    return to_data_uri(fig)


def outcome_figure(fig_data: dict, title: str) -> str:
    """The outcome-specific posterior predictive check
    (:mod:`bayes_gp.report.outcome_checks`): category counts observed against the replicated
    data sets' means and 94% intervals (``"bars"``), a statistic's replicated distribution
    against its observed value (``"hist"``), or the observed Kaplan–Meier curve against the
    replicated curves' median and pointwise 94% band (``"km"``)."""
    fig, (ax,) = _small_axes(1, 7.0)
    kind = fig_data["kind"]
    if kind == "bars":
        rep = fig_data["replicated"]
        k = np.arange(rep.shape[1])
        lo, hi = np.quantile(rep, CI_QUANTILES, axis=0)
        ax.bar(k, fig_data["observed"], color="0.75", label="observed")
        ax.errorbar(k, rep.mean(axis=0), yerr=[rep.mean(axis=0) - lo, hi - rep.mean(axis=0)],
                    fmt="o", color="C0", capsize=4, label="replicated: mean, 94%")  # fmt: skip
        ax.set_xticks(k, fig_data["labels"])
        ax.set_xlabel("category")
        ax.set_ylabel("count")
    elif kind == "hist":
        ax.hist(fig_data["replicated"], bins=30, color="C0", alpha=0.6, label="replicated")
        ax.axvline(fig_data["observed"], color="k", lw=2, label="observed")
        ax.set_xlabel(fig_data["label"])
        ax.set_ylabel("data sets")
    else:
        grid = fig_data["grid"]
        ax.fill_between(grid, fig_data["lower"], fig_data["upper"], step="post", color="C0",
                        alpha=0.25, lw=0, label="replicated: 94% band")  # fmt: skip
        ax.step(grid, fig_data["median"], where="post", color="C0", lw=1, label="replicated: median")
        ax.step(grid, fig_data["observed"], where="post", color="k", lw=2, label="observed")
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("time")
        ax.set_ylabel("survival S(t)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="best")
    return to_data_uri(fig)
