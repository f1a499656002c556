"""The parts of a report on several fits: the overview table of their verdicts and the model
comparison (``az.compare`` of the NUTS fits, the MAP-vs-NUTS table of LOO scores).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from bayes_gp.report import diagnostics, figures
from bayes_gp.report import html as H
from bayes_gp.report.loo import score_table
from bayes_gp.report.sections import Part

__all__ = ["compare_parts", "overview_table", "shown_comparison"]


def compare_parts(parts: Sequence[Part], with_figures: bool):
    """The model comparison of several fits.

    Parameters
    ----------
    parts : sequence of Part
        One per fit (:mod:`bayes_gp.report.sections`).
    with_figures : bool
        Draw the ``az.plot_compare`` figure.

    Returns
    -------
    html : str
    comparison : DataFrame or None
        ``az.compare`` of the NUTS fits with a LOO score (two or more).
    loo_table : DataFrame or None
        The LOO scores of every fit that has one (two or more).
    problems : list of str
        What failed (``az.compare``, its figure).
    """
    import warnings

    import arviz as az

    body, problems = [], []
    nuts = {p.entry.name: p.entry.fit for p in parts if p.entry.nuts and p.loo is not None}
    cmp = None
    if len(nuts) >= 2:
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*Pareto.*", category=UserWarning)
                cmp = pd.DataFrame(az.compare(nuts, round_to="none"))
        except Exception as exc:
            problems.append(f"az.compare failed: {type(exc).__name__}: {exc}")
    if cmp is not None:
        body.append(
            H.section(
                "PSIS-LOO comparison of the NUTS fits (az.compare)",
                H.dataframe_table(cmp, "fit"),
                level=3,
            )
        )
        try:
            if with_figures:
                uri = figures.compare_figure(cmp)
                body.append(H.figure(uri, "ELPD differences (az.plot_compare)"))
        except Exception as exc:
            problems.append(f"compare figure failed: {type(exc).__name__}: {exc}")
    elif len(nuts) == 1:
        body.append(H.paragraph("az.compare needs two or more NUTS fits; there is one.", True))
    scores = [p.loo for p in parts if p.loo is not None]
    table = score_table(scores) if len(scores) >= 2 else None
    if table is not None:
        text = (
            "Leave-one-out log predictive densities of every fit: PSIS-LOO over the posterior "
            "draws for NUTS fits; for type-II fits exact LOO at the point estimate (regression, "
            "R&W eqs. 5.10-5.12) or the cavity LOO of the Laplace / EP approximation "
            "(classification). Point-estimate scores condition on hyperparameters fitted to "
            "all the data, so they are slightly optimistic. elpd_diff and dse are relative to "
            "the best fit, from paired pointwise differences; mlpd = elpd / n."
        )
        body.append(
            H.section(
                "MAP vs NUTS: LOO predictive scores",
                H.paragraph(text) + H.dataframe_table(table, "fit"),
                level=3,
            )
        )
    for msg in problems:
        body.append(H.paragraph(msg, note=True))
    return "".join(body), cmp, table, problems


def shown_comparison(
    arviz_comparison: pd.DataFrame | None, loo_table: pd.DataFrame | None
) -> pd.DataFrame | None:
    """The comparison a report of several fits stands on (its ``Report.comparison``):
    ``az.compare`` of the NUTS fits when it covers every fit with a LOO score, else the LOO-score
    table of all of them (type-II fits beside NUTS ones); ``None`` when fewer than two fits have
    a LOO score (nothing is compared)."""
    if arviz_comparison is not None and (
        loo_table is None or set(loo_table.index) <= set(arviz_comparison.index)
    ):
        return arviz_comparison
    return loo_table


def overview_table(parts: Sequence[Part]) -> str:
    """The HTML table of the fits' overall status and their fail / warn / ok counts."""
    rows = []
    for p in parts:
        counts = {s: sum(v.status == s for v in p.verdicts) for s in diagnostics.STATUSES}
        rows.append([p.entry.name, diagnostics.worst_status(p.verdicts),
                     counts["fail"], counts["warn"], counts["ok"]])  # fmt: skip
    classes = [{"n/a": "na"}.get(r[1], r[1]) for r in rows]
    return H.table(["fit", "overall", "fail", "warn", "ok"], rows, formats={0: str},
                   row_classes=classes)  # fmt: skip
