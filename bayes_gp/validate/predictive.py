r"""Predictive calibration on held-out data: interval coverage, the PIT histogram and the
reliability diagram.

A model's predictive distribution of held-out observations
(:meth:`~bayes_gp.protocol.GPModel.held_out_predictive`) is *calibrated* when events it gives
probability :math:`q` happen a fraction :math:`q` of the time (Gneiting, Balabdaoui & Raftery
2007, "Probabilistic forecasts, calibration and sharpness", JRSS B 69).

Continuous and count outcomes (``kind="cdf"``: the predictive CDF :math:`F_i` at each
observation from below, :math:`F_i(y_i^-)`, and at it, :math:`F_i(y_i)`):

* **coverage** of the central :math:`q` predictive interval. For a continuous outcome
  :math:`y_i` lies in it exactly when :math:`|F_i(y_i) - \tfrac12| \le q/2`; for an integer
  outcome the interval :math:`[l, u]` runs from the :math:`(1-q)/2` to the :math:`(1+q)/2`
  quantile, and :math:`y_i \in [l, u] \iff F_i(y_i) \ge (1-q)/2 \text{ and }
  F_i(y_i^-) < (1+q)/2`. Coverage near :math:`q` at :math:`q = 0.5` and :math:`0.9` says the
  interval widths are right; a discrete outcome's intervals cover at least :math:`q` by
  construction.
* the **PIT histogram**: for a continuous outcome the histogram of :math:`u_i = F_i(y_i)`,
  uniform under calibration (Dawid 1984); for counts the non-randomised PIT of Czado, Gneiting &
  Held (2009, "Predictive model assessment for count data", Biometrics 65, eq. 2), whose
  histogram is that of the mean of the per-observation CDFs

  .. math::
     \bar F(u) = \frac1m \sum_i F_i(u \mid y_i), \quad
     F_i(u \mid y) = \begin{cases} 0 & u \le F_i(y^-) \\
     \frac{u - F_i(y^-)}{F_i(y) - F_i(y^-)} & F_i(y^-) < u < F_i(y) \\
     1 & u \ge F_i(y), \end{cases}

  bin :math:`j` of :math:`J` having height :math:`J\,[\bar F(j/J) - \bar F((j-1)/J)]`
  (uniform: all 1). The same formula gives the ordinary PIT histogram when
  :math:`F_i(y^-) = F_i(y)`. A U shape means intervals too narrow (over-confident), a hump too
  wide, a slope a biased mean. The :math:`\chi^2` test of equal bin counts (:math:`J - 1`
  degrees of freedom) measures the departure (from :math:`5J` observations on: with fewer the
  :math:`\chi^2` approximation fails and the p-value is NaN).

Binary outcomes (``kind="probability"``): the **reliability diagram** (observed frequency of
1s against the mean predicted probability, in :math:`J` equal-width bins of the probability;
DeGroot & Fienberg 1983) and the expected calibration error
:math:`\mathrm{ECE} = \sum_j (m_j/m)\,|\bar y_j - \bar p_j|`. Interval coverage is not defined
for a 0/1 outcome.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from bayes_gp.protocol import HeldOutPredictive

__all__ = [
    "COVERAGE_LEVELS",
    "N_BINS",
    "PredictiveCalibration",
    "interval_coverage",
    "pit_histogram",
    "reliability_table",
    "predictive_calibration",
]

#: Nominal probabilities of the central predictive intervals whose coverage is reported.
COVERAGE_LEVELS = (0.5, 0.9)
#: Bins of the PIT histogram and of the reliability diagram.
N_BINS = 10


def interval_coverage(cdf_below: np.ndarray, cdf_at: np.ndarray, level: float) -> float:
    """Fraction of held-out observations inside their central ``level`` predictive interval,
    from the predictive CDF below and at each (see the module docstring).

    Parameters
    ----------
    cdf_below, cdf_at : ndarray (m,)
        :math:`F_i(y_i^-)` and :math:`F_i(y_i)`.
    level : float
        Nominal probability of the interval, in (0, 1).

    Returns
    -------
    float
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"`level` must be in (0, 1), got {level}")
    lo, hi = 0.5 * (1.0 - level), 0.5 * (1.0 + level)
    below, at = np.asarray(cdf_below, float), np.asarray(cdf_at, float)
    return float(np.mean((at >= lo) & (below < hi)))


def pit_histogram(cdf_below: np.ndarray, cdf_at: np.ndarray, bins: int = N_BINS) -> np.ndarray:
    r"""Heights of the (non-randomised) PIT histogram, ``bins`` equal bins on [0, 1], mean 1
    (Czado, Gneiting & Held 2009, eq. 2; the ordinary PIT histogram for a continuous outcome).

    Parameters
    ----------
    cdf_below, cdf_at : ndarray (m,)
    bins : int

    Returns
    -------
    ndarray (bins,)
    """
    below = np.asarray(cdf_below, float)[:, None]
    at = np.asarray(cdf_at, float)[:, None]
    u = np.linspace(0.0, 1.0, bins + 1)[None, :]
    width = at - below
    with np.errstate(divide="ignore", invalid="ignore"):
        ramp = np.where(width > 0, (u - below) / np.where(width > 0, width, 1.0), 0.0)
    Fi = np.where(u >= at, 1.0, np.where(u <= below, 0.0, np.clip(ramp, 0.0, 1.0)))
    Fbar = Fi.mean(axis=0)
    return bins * np.diff(Fbar)


def reliability_table(probability: np.ndarray, outcome: np.ndarray, bins: int = N_BINS):
    """The reliability diagram's table: per non-empty bin of the predicted probability
    (``bins`` equal-width bins on [0, 1]), its range, the number of cases, the mean predicted
    probability and the observed frequency of 1s.

    Returns
    -------
    DataFrame
        Columns ``bin_lower``, ``bin_upper``, ``n``, ``mean_predicted``, ``observed``.
    """
    p = np.asarray(probability, float)
    t = np.asarray(outcome, float)
    edges = np.linspace(0.0, 1.0, bins + 1)
    idx = np.clip(np.digitize(p, edges[1:-1]), 0, bins - 1)
    rows = []
    for j in range(bins):
        sel = idx == j
        if sel.any():
            rows.append((edges[j], edges[j + 1], int(sel.sum()), float(p[sel].mean()),
                         float(t[sel].mean())))  # fmt: skip
    return pd.DataFrame(rows, columns=["bin_lower", "bin_upper", "n", "mean_predicted", "observed"])


@dataclass(frozen=True)
class PredictiveCalibration:
    """Calibration of a held-out predictive distribution (:func:`predictive_calibration`).

    Attributes
    ----------
    kind : {"cdf", "probability"}
    n : int
        Held-out observations.
    coverage : dict
        Nominal level → observed coverage (``kind="cdf"``; empty otherwise).
    pit : ndarray or None
        PIT histogram heights (``kind="cdf"``).
    pit_p_value : float or None
        :math:`\\chi^2` test of a uniform PIT histogram (``kind="cdf"``; NaN below 5 expected
        observations per bin).
    reliability : DataFrame or None
        :func:`reliability_table` (``kind="probability"``).
    ece : float or None
        Expected calibration error (``kind="probability"``).
    """

    kind: str
    n: int
    coverage: dict
    pit: np.ndarray | None = None
    pit_p_value: float | None = None
    reliability: pd.DataFrame | None = None
    ece: float | None = None

    def scores(self) -> dict[str, float]:
        """Plain numbers for ``fit.json``: ``coverage_50``, ``coverage_90``, ``pit_chi2_p`` or
        ``ece``."""
        out = {f"coverage_{round(100 * q)}": v for q, v in self.coverage.items()}
        if self.pit_p_value is not None and np.isfinite(self.pit_p_value):
            out["pit_chi2_p"] = float(self.pit_p_value)
        if self.ece is not None:
            out["ece"] = float(self.ece)
        return out

    def rows(self) -> list[tuple[str, object]]:
        """Rows ``(name, value)`` for the report's table."""
        rows: list[tuple[str, object]] = [("held-out observations", self.n)]
        for q, v in self.coverage.items():
            rows.append((f"coverage of the central {round(100 * q)}% predictive interval", v))
        if self.pit is not None and np.isfinite(self.pit_p_value):
            rows.append((f"PIT histogram χ² test p ({len(self.pit)} bins)", self.pit_p_value))
        elif self.pit is not None:
            rows.append(("PIT histogram χ² test", f"needs ≥ {5 * len(self.pit)} observations"))
        if self.ece is not None:
            rows.append(("expected calibration error (ECE)", self.ece))
            rows.append(("reliability bins (non-empty)", len(self.reliability)))
        return rows


def predictive_calibration(pred: HeldOutPredictive, bins: int = N_BINS) -> PredictiveCalibration:
    """Coverage and PIT histogram (``kind="cdf"``), or reliability table and ECE
    (``kind="probability"``), of a held-out predictive distribution.

    Parameters
    ----------
    pred : HeldOutPredictive
        From :meth:`~bayes_gp.protocol.GPModel.held_out_predictive`.
    bins : int

    Returns
    -------
    PredictiveCalibration
    """
    if not isinstance(pred, HeldOutPredictive):
        raise TypeError(f"`pred` must be a HeldOutPredictive, got {type(pred).__name__}")
    if pred.n == 0:
        raise ValueError("no held-out observations to calibrate against")
    if pred.kind == "probability":
        table = reliability_table(pred.probability, pred.outcome, bins)
        ece = float(np.sum(table["n"] * np.abs(table["observed"] - table["mean_predicted"])))
        return PredictiveCalibration("probability", pred.n, {}, reliability=table,
                                     ece=ece / pred.n)  # fmt: skip
    coverage = {q: interval_coverage(pred.cdf_below, pred.cdf_at, q) for q in COVERAGE_LEVELS}
    heights = pit_histogram(pred.cdf_below, pred.cdf_at, bins)
    counts = heights * pred.n / bins
    # the chi-squared approximation wants about 5 expected counts per bin
    p_value = float(stats.chisquare(counts).pvalue) if pred.n >= 5 * bins else float("nan")
    return PredictiveCalibration("cdf", pred.n, coverage, heights, p_value)
