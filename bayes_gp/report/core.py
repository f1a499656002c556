"""``bayes_gp.report(...)``: one self-contained HTML report of a fit or of several fits.

The report is built in parts: :mod:`~bayes_gp.report.entries` normalises ``result`` into one
entry per fit, :mod:`~bayes_gp.report.sections` writes each fit's sections (with the model maths
of :mod:`~bayes_gp.report.model_checks`), :mod:`~bayes_gp.report.comparison` compares several
fits; :func:`report` puts them together into a :class:`Report`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from bayes_gp._io import write_atomic
from bayes_gp._version import __version__
from bayes_gp.linalg import single_blas_thread
from bayes_gp.report import diagnostics
from bayes_gp.report import html as H
from bayes_gp.report.comparison import compare_parts, overview_table, shown_comparison
from bayes_gp.report.entries import to_entries
from bayes_gp.report.model_checks import GRID_POINTS, PPC_DRAWS, PRIOR_DRAWS
from bayes_gp.report.model_checks import PRIOR_TAIL_DRAWS as PRIOR_TAIL_DRAWS
from bayes_gp.report.sections import CI_PROB, nuts_part, point_part
from bayes_gp.report.sections import MAX_PREDICTION_ROWS as MAX_PREDICTION_ROWS

__all__ = ["Report", "report", "CI_PROB", "PRIOR_DRAWS", "PPC_DRAWS", "GRID_POINTS"]
# PRIOR_TAIL_DRAWS and MAX_PREDICTION_ROWS (the "as" imports) stay importable from
# here, as before the split.


@dataclass
class Report:
    """A rendered report.

    Attributes
    ----------
    html : str
        The standalone HTML document (figures embedded, no external resources).
    fragment : str
        The same content as one ``<div>`` with a scoped style, for Jupyter (``_repr_html_``).
    verdicts : list of Verdict
        Every diagnostic verdict (``Verdict.subject`` names the fit in multi-fit reports).
    summary : pandas.DataFrame
        The posterior summary (``az.summary``: mean, sd, HDI, ESS, r̂, MCSE) of the
        hyperparameters, or the point estimates of a type-II fit; indexed by (fit, parameter)
        when the report covers several fits.
    title : str
    comparison : pandas.DataFrame or None
        The comparison of the fits that the report shows, whenever it compares two or more
        fits with a LOO score (``None`` otherwise): ``az.compare`` (:attr:`arviz_comparison`)
        when it covers every such fit (all of them NUTS), else the LOO-score table of every fit
        (:attr:`loo_table`, which puts type-II fits beside NUTS ones). Both are indexed by fit
        and have ``elpd``, ``se``, ``elpd_diff`` and ``dse`` columns.
    loo_table : pandas.DataFrame or None
        The MAP-vs-NUTS table of LOO scores (two or more fits).
    problems : list of str
        Parts that could not be produced (a figure that failed, with the error).
    timings : dict
        Seconds spent per part.
    approximation_checks : dict
        Fit name → the model's post-fit approximation checks
        (:class:`~bayes_gp.protocol.ApproximationCheck`; an empty list for an exact model,
        ``None`` where they raised), each also a row of :attr:`verdicts`.
    arviz_comparison : pandas.DataFrame or None
        ``az.compare`` of the NUTS fits (two or more), whether or not other fits are compared.
    """

    html: str
    fragment: str
    verdicts: list
    summary: pd.DataFrame
    title: str = ""
    comparison: pd.DataFrame | None = None
    loo_table: pd.DataFrame | None = None
    problems: list = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    approximation_checks: dict = field(default_factory=dict)
    arviz_comparison: pd.DataFrame | None = None

    def _repr_html_(self) -> str:
        return self.fragment

    @property
    def status(self) -> str:
        """The worst verdict status (``"ok"``, ``"n/a"``, ``"warn"`` or ``"fail"``)."""
        return diagnostics.worst_status(self.verdicts)

    def save(self, path: str | os.PathLike) -> Path:
        """Write :attr:`html` to ``path`` atomically (temporary file, fsync, ``os.replace``).

        Returns
        -------
        Path
            The path written.
        """
        path = Path(path)
        if not path.parent.is_dir():
            raise FileNotFoundError(f"cannot write {path}: directory {path.parent} does not exist")
        write_atomic({path: self.html.encode("utf-8")})
        return path

    def __repr__(self) -> str:
        counts = {s: sum(v.status == s for v in self.verdicts) for s in diagnostics.STATUSES}
        text = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        return f"Report({self.title!r}: {text or 'no verdicts'})"


@single_blas_thread
def report(
    result,
    path: str | os.PathLike | None = None,
    *,
    model=None,
    X_new=None,
    title: str | None = None,
    figures: bool = True,
    provenance: Sequence[tuple[str, object]] | None = None,
    held_out=None,
) -> Report:
    """A self-contained HTML report of one fit or a comparison of several.

    Parameters
    ----------
    result : DataTree, MapFit, ClassifierFit, (model, fit), or a list or dict of them
        A DataTree from ``GPRegression.sample`` / ``GPClassifier.sample`` /
        ``HeteroscedasticGPRegression.sample`` (MCMC diagnostics,
        summary, trace/rank/pair/energy plots, prior vs posterior, posterior predictive check,
        predictive bands); a type-II fit (point estimate, log marginal likelihood, restarts,
        optimiser checks, predictive check and bands; MCMC diagnostics do not apply); or several
        of them, which adds the LOO comparison (``az.compare`` of the NUTS fits, and a
        MAP-vs-NUTS table of LOO predictive scores). Dict keys name the fits.
    path : str or PathLike, optional
        Write the HTML there, atomically.
    model : GPRegression, GPClassifier or HeteroscedasticGPRegression, optional
        The model the fit(s) came from (required for type-II fits; for a DataTree without it
        the report has the diagnostics only). A ``(model, fit)`` pair overrides it.
    X_new : array_like, optional
        New inputs: the 1-D bands cover them too, and a table lists the predictions there.
    title : str, optional
    figures : bool
        Embed the figures (default); ``False`` gives the tables and verdicts only, in a fraction
        of the time.
    provenance : sequence of (str, object), optional
        Rows ``(name, value)`` stating what data the fit used and with which settings (source,
        rows, subset, fast mode, settings that differ from the defaults), shown first as "Data
        and settings" (:func:`bayes_gp.workflow.make_report` fills them in).
    held_out : (X_test, y_test), optional
        Held-out data: a "Predictive calibration on held-out data" section (coverage of the 50%
        and 90% predictive intervals and the PIT histogram, or the reliability diagram of a
        classifier; :mod:`bayes_gp.validate.predictive`).

    Returns
    -------
    Report
        ``.html``, ``.verdicts``, ``.summary``, ``.save(path)``; shown inline in Jupyter.
    """
    import arviz as az

    t_start = time.perf_counter()
    entries, multi = to_entries(result, model)
    with_figures = bool(figures)
    if held_out is not None and (len(held_out) != 2 or held_out[0] is None):
        raise ValueError("`held_out` must be a pair (X_test, y_test)")
    parts = [
        (nuts_part if e.nuts else point_part)(e, X_new, with_figures, held_out) for e in entries
    ]
    title = title if title is not None else "bayes_gp report: " + ", ".join(e.name for e in entries)
    body = [f"<h1>{H.esc(title)}</h1>"]
    body.append(
        H.paragraph(
            f"bayes_gp {__version__}, ArviZ {az.__version__}. Thresholds: r̂ ≤ "
            f"{diagnostics.RHAT_MAX}, bulk/tail ESS ≥ {diagnostics.ESS_MIN}, no divergences, "
            f"E-BFMI ≥ {diagnostics.BFMI_MIN}, no tree-depth saturation.",
            note=True,
        )
    )
    if provenance:
        body.append(H.section("Data and settings", H.key_value_table(provenance)))
    verdicts, problems, timings = [], [], {}
    if multi:
        body.append(H.section("Overview", overview_table(parts)))
    for p in parts:
        if multi:
            body.append(H.section(p.entry.name, "".join(p.body)))
        else:
            body.append("".join(p.body))
        verdicts += [
            diagnostics.Verdict(**{**v.__dict__, "subject": p.entry.name}) for v in p.verdicts
        ]
        problems += p.problems
        timings.update({f"{p.entry.name}: {k}" if multi else k: t for k, t in p.timings.items()})
    comparison = loo_table = arviz_comparison = None
    if multi:
        t0 = time.perf_counter()
        cmp_html, arviz_comparison, loo_table, cmp_problems = compare_parts(parts, with_figures)
        comparison = shown_comparison(arviz_comparison, loo_table)
        problems += cmp_problems
        if cmp_html:
            body.append(H.section("Model comparison", cmp_html))
        timings["comparison"] = time.perf_counter() - t0
    summaries = [p.summary for p in parts]
    if multi:
        summary = pd.concat(summaries, keys=[p.entry.name for p in parts], names=["fit", None])
    else:
        summary = summaries[0]
    content = "\n".join(body)
    timings["total"] = time.perf_counter() - t_start
    rep = Report(
        html=H.document(title, content),
        fragment=H.fragment(content),
        verdicts=verdicts,
        summary=summary,
        title=title,
        comparison=comparison,
        loo_table=loo_table,
        arviz_comparison=arviz_comparison,
        problems=problems,
        timings=timings,
        approximation_checks={p.entry.name: p.checks for p in parts},
    )
    if path is not None:
        rep.save(path)
    return rep
