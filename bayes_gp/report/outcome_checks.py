r"""Posterior predictive checks suited to the outcome: the statistic a reader of that kind of data
looks at first, in the observed data and in data sets replicated from the fit.

The generic check (``az.plot_ppc_dist``) compares densities, which says little for an ordinal
rating, a count with many zeros or a censored survival time. Here, by the latent GP's
likelihood (``model.likelihood``; Gelman et al., *Bayesian Data Analysis*, 3rd ed., §6.3 for
test quantities and posterior predictive p-values):

* **ordinal** categories: each category's observed frequency against the replicated data
  sets' (mean and central 94% interval), and its posterior predictive p-value
  :math:`p_k = P(n_k^{rep} \ge n_k)` (with half the ties);
* **counts**: the fraction of zeros (too many zeros for a Poisson or negative binomial is what
  a zero-inflated model is for, Lambert 1992, and too many or too few a hurdle model, Mullahy
  1986) and the variance-to-mean ratio;
* **survival times**: the Kaplan–Meier curve of the data against those of the replicated data
  sets (Kaplan & Meier 1958), each replicate censored where the data were (a right-censored
  row's replicated time beyond its censoring time is censored there; events are uncensored):
  the fraction of the observed curve's steps inside the replicates' pointwise 94% band.

A p-value below :data:`P_TAIL` or above :math:`1 -` :data:`P_TAIL` (a statistic the model
rarely reproduces), or a Kaplan–Meier curve inside the band at fewer than
:data:`KM_INSIDE` of its steps, is a *warn* verdict with the remedy the outcome suggests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bayes_gp.predictive import CI_QUANTILES
from bayes_gp.report.diagnostics import Verdict

__all__ = ["OutcomeCheck", "outcome_check", "kaplan_meier", "P_TAIL", "KM_INSIDE"]

#: A posterior predictive p-value this close to 0 or 1 is a warning.
P_TAIL = 0.01
#: The least fraction of the observed Kaplan–Meier steps inside the replicates' 94% band.
KM_INSIDE = 0.8
#: Replicated data sets drawn for the checks.
DRAWS = 400


def predictive_p_value(rep: np.ndarray, obs: float) -> float:
    """:math:`P(T^{rep} > T) + \\tfrac12 P(T^{rep} = T)`, the posterior predictive p-value
    (Gelman, Meng & Stern 1996; ties split evenly, as for a discrete statistic)."""
    rep = np.asarray(rep, float)
    return float(np.mean(rep > obs) + 0.5 * np.mean(rep == obs))


def kaplan_meier(times: np.ndarray, events: np.ndarray, grid: np.ndarray) -> np.ndarray:
    r"""The Kaplan–Meier estimate :math:`\hat S(t) = \prod_{t_j \le t} (1 - d_j / n_j)` of the
    survival function at ``grid`` (``events`` 1 for an event, 0 for a right-censored time;
    Kaplan & Meier 1958): :math:`d_j` events at the distinct event time :math:`t_j`,
    :math:`n_j` times at or after it."""
    times = np.asarray(times, float)
    events = np.asarray(events, bool)
    at = np.unique(times[events])
    n_risk = np.array([np.sum(times >= t) for t in at], float)
    d = np.array([np.sum((times == t) & events) for t in at], float)
    surv = np.cumprod(1.0 - d / n_risk)
    idx = np.searchsorted(at, np.asarray(grid, float), side="right")
    return np.concatenate([[1.0], surv])[idx]


@dataclass(frozen=True)
class OutcomeCheck:
    """An outcome-specific posterior predictive check: a table of statistics (``rows``: name,
    observed, replicated mean, 94% interval, p-value), its verdicts, and what the figure draws
    (``figure``: a kind and its arrays)."""

    title: str
    rows: list[tuple[str, float, float, float, float, float | None]]
    verdicts: list[Verdict]
    note: str
    figure: dict = field(default_factory=dict)


def _interval(rep: np.ndarray) -> tuple[float, float]:
    lo, hi = np.quantile(rep, CI_QUANTILES)
    return float(lo), float(hi)


def _ordinal(lik, reps: np.ndarray) -> OutcomeCheck:
    K = int(lik.n_categories)
    labels = list(lik.labels) if lik.labels else [str(k) for k in range(K)]
    obs = np.bincount(np.asarray(lik.y, int), minlength=K).astype(float)
    rep = np.stack([np.bincount(r.astype(int), minlength=K) for r in reps]).astype(float)
    rows, bad = [], []
    for k in range(K):
        p = predictive_p_value(rep[:, k], obs[k])
        rows.append((f"n(y = {labels[k]})", obs[k], float(rep[:, k].mean()), *_interval(rep[:, k]), p))
        if not P_TAIL <= p <= 1 - P_TAIL:
            bad.append(f"{labels[k]} (observed {obs[k]:g}, replicated {rep[:, k].mean():.1f})")
    worst = min(min(r[-1], 1 - r[-1]) for r in rows)
    verdict = Verdict(
        "posterior predictive: category frequencies", worst, f"≥ {P_TAIL:g} (two-sided)",
        "ok" if not bad else "warn",
        "" if not bad else "the fit does not reproduce the frequency of categories "
        f"{', '.join(bad)}: check the link (logit/probit), the kernel, or a missing covariate",
        f"smallest two-sided posterior predictive p-value of the {K} category counts "
        f"({len(reps)} replicated data sets)",
    )  # fmt: skip
    note = ("How often each category occurs, in the data and in data sets replicated from the "
            "fit: an ordinal model that misplaces its cut-points misses a category's share.")  # fmt: skip
    return OutcomeCheck("Category frequencies", rows, [verdict], note,
                        {"kind": "bars", "labels": labels, "observed": obs, "replicated": rep})  # fmt: skip


def _counts(lik, reps: np.ndarray) -> OutcomeCheck:
    y = np.asarray(lik.y, float)
    zeros_obs, zeros_rep = float(np.mean(y == 0)), np.mean(reps == 0, axis=1)
    m_rep = np.maximum(reps.mean(axis=1), 1e-12)
    ratio_obs = float(y.var() / max(y.mean(), 1e-12))
    ratio_rep = reps.var(axis=1) / m_rep
    p0, pr = predictive_p_value(zeros_rep, zeros_obs), predictive_p_value(ratio_rep, ratio_obs)
    rows = [("fraction of zeros", zeros_obs, float(zeros_rep.mean()), *_interval(zeros_rep), p0),
            ("variance / mean", ratio_obs, float(ratio_rep.mean()), *_interval(ratio_rep), pr)]  # fmt: skip
    verdicts = []
    ok0 = P_TAIL <= p0 <= 1 - P_TAIL
    more = zeros_obs > zeros_rep.mean()
    verdicts.append(Verdict(
        "posterior predictive: zeros", p0, f"{P_TAIL:g} ≤ p ≤ {1 - P_TAIL:g}",
        "ok" if ok0 else "warn",
        "" if ok0 else (f"the data have {'more' if more else 'fewer'} zeros than the fit "
                        "replicates: " + ("a zero-inflated likelihood (zero_inflated_poisson, "
                                          "zero_inflated_negative_binomial) or a hurdle one "
                                          "(hurdle_poisson, hurdle_negative_binomial) models "
                                          "the extra zeros" if more else
                                          "check the exposure and kernel, or a hurdle "
                                          "likelihood (hurdle_poisson, hurdle_negative_binomial),"
                                          " whose zeros have their own probability")),
        f"P(zeros in a replicated data set ≥ observed), {len(reps)} data sets",
    ))  # fmt: skip
    okr = P_TAIL <= pr <= 1 - P_TAIL
    verdicts.append(Verdict(
        "posterior predictive: dispersion", pr, f"{P_TAIL:g} ≤ p ≤ {1 - P_TAIL:g}",
        "ok" if okr else "warn",
        "" if okr else ("the data are more dispersed than the fit replicates: a negative "
                        "binomial (or zero-inflated) likelihood" if ratio_obs > ratio_rep.mean()
                        else "the data are less dispersed than the fit replicates"),
        f"P(variance/mean of a replicated data set ≥ observed), {len(reps)} data sets",
    ))  # fmt: skip
    note = ("Zeros and dispersion of the counts, in the data and in data sets replicated from "
            "the fit: the two features a Poisson model most often misses.")  # fmt: skip
    return OutcomeCheck("Zeros and dispersion", rows, verdicts, note,
                        {"kind": "hist", "observed": zeros_obs, "replicated": zeros_rep,
                         "label": "fraction of zeros"})  # fmt: skip


def _survival(lik, reps: np.ndarray) -> OutcomeCheck:
    t = np.asarray(lik.y, float)
    censored = np.asarray(lik.censored) == 1
    events = ~censored
    grid = np.unique(t)
    km_obs = kaplan_meier(t, events, grid)
    curves = []
    for r in reps:  # each replicate censored where the data were
        late = censored & (r > t)
        curves.append(kaplan_meier(np.where(late, t, r), ~late, grid))
    curves = np.array(curves)
    lo, hi = np.quantile(curves, CI_QUANTILES, axis=0)
    steps = np.unique(t[events])
    at = np.searchsorted(grid, steps)
    inside = float(np.mean((km_obs[at] >= lo[at] - 1e-12) & (km_obs[at] <= hi[at] + 1e-12)))
    med_obs = float(grid[np.argmax(km_obs <= 0.5)]) if np.any(km_obs <= 0.5) else np.nan
    rows = [("events / censored", float(events.sum()), float(censored.sum()), np.nan, np.nan,
             None)]  # fmt: skip
    if np.isfinite(med_obs):
        meds = np.array([grid[np.argmax(c <= 0.5)] if np.any(c <= 0.5) else np.inf
                         for c in curves])  # fmt: skip
        finite = meds[np.isfinite(meds)]
        if finite.size:
            rows.append(("Kaplan–Meier median", med_obs, float(np.median(finite)),
                         *_interval(finite), predictive_p_value(meds, med_obs)))  # fmt: skip
    ok = inside >= KM_INSIDE
    verdict = Verdict(
        "posterior predictive: Kaplan–Meier curve", inside, f"≥ {KM_INSIDE:g}",
        "ok" if ok else "warn",
        "" if ok else "the observed survival curve leaves the replicated data's band: compare "
        "the other survival likelihood (weibull / lognormal) by LOO, or the kernel",
        f"fraction of the {steps.size} event times at which the observed Kaplan–Meier curve "
        f"lies in the pointwise 94% band of {len(reps)} replicated curves (censored as the data)",
    )  # fmt: skip
    note = ("The Kaplan–Meier curve of the data (censored times counted as at risk until they "
            "leave) and the band of the curves of data sets replicated from the fit, each "
            "replicate censored where the data were.")  # fmt: skip
    return OutcomeCheck("Kaplan–Meier curve", rows, [verdict], note,
                        {"kind": "km", "grid": grid, "observed": km_obs, "lower": lo,
                         "upper": hi, "median": np.median(curves, axis=0)})  # fmt: skip


def outcome_check(model, fit, draws: int = DRAWS, random_seed: int = 0) -> OutcomeCheck | None:
    """The outcome-specific posterior predictive check of ``model`` at ``fit`` (module
    docstring), or ``None`` for an outcome without one (continuous, binary, class labels)."""
    from bayes_gp.latent.censored import LogNormal, Weibull

    lik = getattr(model, "likelihood", None)
    outcome = getattr(lik, "outcome", None)
    survival = isinstance(lik, Weibull | LogNormal)
    if outcome not in ("ordinal", "count") and not survival:
        return None
    reps = np.asarray(model.replicate(fit, draws, random_seed=random_seed), float)
    if outcome == "ordinal":
        return _ordinal(lik, reps)
    if survival:
        return _survival(lik, reps)
    if getattr(lik, "size_name", "") == "trials":
        return None  # binomial: successes out of trials (the generic check)
    return _counts(lik, reps)
