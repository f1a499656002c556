"""The sections of one fit's report: model, inference, summary, diagnostics, LOO, figures,
prior and posterior predictive checks, held-out calibration, bands and predictions;
:func:`nuts_part` and :func:`point_part` assemble them
for a NUTS fit and a type-II fit.
"""

from __future__ import annotations

import inspect
import os
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bayes_gp.predictive import CI_PROB
from bayes_gp.report import describe, diagnostics, figures
from bayes_gp.report import html as H
from bayes_gp.report.entries import Entry
from bayes_gp.report.loo import LooScore, point_loo, psis_loo
from bayes_gp.report.model_checks import (
    PPC_DRAWS,
    PRIOR_DRAWS,
    PRIOR_TAIL_DRAWS,
    BandLine,
    band_grid,
    ppc_tree,
    prior_draws,
    prior_predictive_check,
    prior_tree,
)
from bayes_gp.report.outcome_checks import outcome_check
from bayes_gp.validate.predictive import predictive_calibration

__all__ = ["CI_PROB", "MAX_PREDICTION_ROWS", "Part", "nuts_part", "point_part"]

#: Rows shown of the predictions at ``X_new``.
MAX_PREDICTION_ROWS = 50

_NO_MCMC = (
    "This is a point estimate: there are no chains, so r̂, ESS, divergences, E-BFMI and "
    "tree-depth saturation do not apply. The checks below are on the optimiser instead; "
    "hyperparameter uncertainty is not reflected in the predictive bands (sample with NUTS "
    "for that)."
)


@dataclass
class Part:
    """One fit's share of the report: its HTML sections (:attr:`body`), verdicts, summary table,
    LOO score, the parts that failed (:attr:`problems`) and the seconds spent per part."""

    entry: Entry
    body: list = field(default_factory=list)
    verdicts: list = field(default_factory=list)
    summary: pd.DataFrame | None = None
    loo: LooScore | None = None
    problems: list = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    with_figures: bool = True
    #: The model's post-fit approximation checks
    #: (:meth:`~bayes_gp.protocol.GPModel.approximation_checks`); ``None`` where they raised
    checks: list | None = None
    #: Calibration on held-out data (:class:`~bayes_gp.validate.predictive.PredictiveCalibration`)
    calibration: object | None = None
    #: The prior predictive check (:class:`~bayes_gp.report.model_checks.PriorPredictiveCheck`)
    prior_predictive: object | None = None

    def figure(self, key: str, caption: str, make) -> str:
        """Run ``make() -> data URI`` and return the embedded figure; a failure is recorded in
        :attr:`problems`, becomes a ``"warn"`` verdict in the diagnostics table (with the error
        message) and is shown as a note in the figure's place instead of raised."""
        t0 = time.perf_counter()
        try:
            uri = make()
        except Exception as exc:  # a broken figure must not lose the rest of the report
            error = f"{type(exc).__name__}: {exc}"
            msg = f"{self.entry.name}: {key} figure failed: {error}"
            self.problems.append(msg)
            self.verdicts.append(diagnostics.figure_verdict(key, caption, error))
            if os.environ.get("BAYES_GP_REPORT_DEBUG"):
                traceback.print_exc()
            return H.paragraph(msg, note=True)
        finally:
            self.timings[key] = time.perf_counter() - t0
        return H.figure(uri, caption)

    def diagnostics_section(self, intro: str = "") -> None:
        """Reserve the place of the diagnostics table; :meth:`finish` fills it in once every
        figure has been drawn (a figure that fails adds a verdict)."""
        self._diagnostics_at = len(self.body)
        self._diagnostics_intro = intro
        self.body.append("")

    def finish(self) -> None:
        """Render the diagnostics table reserved by :meth:`diagnostics_section`."""
        at = getattr(self, "_diagnostics_at", None)
        if at is not None:
            table = self._diagnostics_intro + H.verdict_table(self.verdicts)
            self.body[at] = H.section("Diagnostics", table, level=3)

    def add_figures(self, heading: str, *figs: tuple[str, str, object]) -> None:
        """A level-3 section with the figures ``(key, caption, make)`` (none without figures)."""
        if not self.with_figures:
            return
        self.body.append(H.section(heading, "".join(self.figure(*f) for f in figs), level=3))


def _bands(part: Part, model, fit, nuts: bool, X_new) -> None:
    name = part.entry.name
    along = "along" in inspect.signature(model.bands).parameters
    if model.X.shape[1] != 1 and not along:
        if X_new is None:
            part.body.append(
                H.paragraph(
                    f"Predictive bands are drawn for one input dimension; this model has "
                    f"D = {model.X.shape[1]}. Pass X_new for a table of predictions.",
                    note=True,
                )
            )
        return
    grid = band_grid(model, X_new)
    xlabel = model.feature_names[0]

    def make():
        b = model.bands(grid, fit, along=0) if along else model.bands(grid, fit)
        if b.kind == "probability":
            band = None if b.lower is None else (b.lower, b.upper)
            return figures.classifier_bands_figure(
                b.x, b.y, b.grid, b.mean, band, f"{name}: predictive probability", xlabel,
                b.positive, b.band_label,
            )  # fmt: skip
        pred_f = BandLine(b.mean, b.lower, b.upper)
        pred_y = BandLine(b.mean, b.y_lower, b.y_upper)
        if b.noise is not None:
            return figures.noise_bands_figure(
                b.x, b.y, b.grid, pred_f, pred_y, b.noise, f"{name}: predictive bands", xlabel,
                b.residuals,
            )  # fmt: skip
        return figures.regression_bands_figure(
            b.x, b.y, b.grid, pred_f, pred_y, f"{name}: predictive bands", xlabel,
            (b.band_label, b.y_band_label),
        )  # fmt: skip

    caption = "Predictive mean and 94% bands" + (
        " (mixture over posterior draws)" if nuts else " (at the point estimate)"
    )
    # the inputs a prediction takes (a model whose X holds more, e.g. an offset column, says so)
    if getattr(model, "n_inputs", model.X.shape[1]) != 1:
        caption += f"; along {xlabel}, the other inputs at their training medians"
    if model.bands_note:
        caption += "; " + model.bands_note
    part.add_figures("Predictive bands", ("bands", caption, make))


def _predictions_table(part: Part, model, fit, X_new) -> None:
    Xn = np.asarray(X_new, float)
    if Xn.ndim == 1:
        Xn = Xn[:, None]
    Xn = Xn[:MAX_PREDICTION_ROWS]
    cols = {f: Xn[:, j] for j, f in enumerate(model.feature_names)}
    cols.update(model.prediction_columns(Xn, fit))
    df = pd.DataFrame(cols)
    note = f" (first {MAX_PREDICTION_ROWS} of {len(X_new)})" if len(X_new) > len(Xn) else ""
    inputs = {f: H.fmt_input for f in model.feature_names}  # the inputs as given, not rounded
    part.body.append(
        H.section(f"Predictions at X_new{note}", H.dataframe_table(df, formats=inputs), level=3)
    )


def _model_section(part: Part, model) -> None:
    if model is None:
        part.body.append(
            H.paragraph(
                "No model was given (model=): the model description, prior-vs-posterior plot, "
                "posterior predictive check and predictive bands need it.",
                note=True,
            )
        )
        return
    priors = "\n".join(describe.prior_rows(model))
    body = H.key_value_table(describe.describe_model(model))
    body += f"<h4>Priors</h4><pre>{H.esc(priors)}</pre>"
    body += H.paragraph(
        "Parameters are positional, as PyMC prints its models (those of the PyTensor random "
        "variable: HalfNormal(loc, scale), LogNormal(mu, sigma), Gamma(shape, scale = 1/beta)).",
        note=True,
    )
    part.body.append(H.section("Model", body, level=3))


def _approximation_checks(part: Part, model, fit) -> None:
    """The model's post-fit approximation checks as verdict rows (none for an exact model); a
    check that raises becomes a ``"warn"`` row and a problem, not a lost report."""
    if model is None:
        part.checks = []
        return
    advice = "the approximation could not be checked: treat it as unverified"
    part.checks = _guarded(part, "approximation checks",
                           lambda: list(model.approximation_checks(fit)), advice, section=False)  # fmt: skip
    if part.checks is not None:
        part.verdicts += [diagnostics.approximation_verdict(c) for c in part.checks]


def _guarded(part: Part, what: str, compute, advice: str, section: bool = True):
    """``compute()``, or ``None``: a model that does not offer it (``NotImplementedError``)
    gets a note with the reason in a section ``what``; any other error becomes a problem and a
    ``"warn"`` verdict with ``advice`` (and a note, with ``section``), not a lost report."""
    t0 = time.perf_counter()
    try:
        return compute()
    except Exception as exc:  # a failed check must not lose the rest of the report
        if section and isinstance(exc, NotImplementedError):
            part.body.append(H.section(what, H.paragraph(f"Not available: {exc}.", note=True), 3))
            return None
        error = f"{type(exc).__name__}: {exc}"
        part.problems.append(f"{part.entry.name}: {what} failed: {error}")
        part.verdicts.append(diagnostics.Verdict(what, None, "–", "warn", advice, error))
        if section:
            part.body.append(H.section(what, H.paragraph(f"Failed: {error}", note=True), 3))
        if os.environ.get("BAYES_GP_REPORT_DEBUG"):
            traceback.print_exc()
    finally:
        part.timings[what] = time.perf_counter() - t0
    return None


def _prior_predictive_section(part: Part, model) -> None:
    """Data sets from the prior against the observed data: a table, verdict rows and the
    figure (:class:`~bayes_gp.report.model_checks.PriorPredictiveCheck`)."""
    what = "Prior predictive check"
    check = _guarded(part, what, lambda: prior_predictive_check(model),
                     "the prior predictive check could not be drawn")  # fmt: skip
    if check is None:
        return
    part.prior_predictive = check
    part.verdicts += check.verdicts()
    body = H.key_value_table(check.rows()) + H.paragraph(
        "Data sets drawn from the prior (hyperparameters from their priors, then the data "
        "given them), before seeing the data: a prior whose data sets sit far from the observed "
        "ones in level or scale is a poor default for these data.",
        note=True,
    )
    if part.with_figures:
        reps = check.draws[:50]
        body += part.figure(
            "prior_predictive",
            f"Observed data vs {len(reps)} data sets from the prior predictive distribution",
            lambda: figures.prior_predictive_figure(reps, check.observed, check.binary),
        )
    part.body.append(H.section(what, body, level=3))


def _held_out_section(part: Part, model, fit, held_out) -> None:
    """Calibration of the predictive distribution on held-out data: interval coverage and the
    PIT histogram, or the reliability diagram (:mod:`bayes_gp.validate.predictive`)."""
    if held_out is None:
        return
    what = "Predictive calibration on held-out data"
    X_test, y_test = held_out
    cal = _guarded(
        part, what, lambda: predictive_calibration(model.held_out_predictive(X_test, y_test, fit)),
        "the held-out data could not be scored: check their shape and values",
    )
    if cal is None:
        return
    part.calibration = cal
    if cal.kind == "cdf":
        intro = (
            "Coverage: the fraction of held-out observations inside their central predictive "
            "interval (calibrated: the nominal probability). PIT: the predictive CDF at each "
            "held-out observation (non-randomised for counts, Czado, Gneiting & Held 2009), "
            "uniform when calibrated; a U shape means over-confident intervals, a hump too wide "
            "ones, a slope a biased mean."
        )
        make = lambda: figures.pit_figure(cal.pit, cal.n, cal.coverage)  # noqa: E731
        caption = "PIT histogram and interval coverage of the held-out data"
    else:
        intro = (
            "Reliability: in bins of the predicted probability, the observed frequency of the "
            "positive class (calibrated: on the diagonal); ECE, the case-weighted mean distance "
            "from the diagonal."
        )
        make = lambda: figures.reliability_figure(cal.reliability, cal.n)  # noqa: E731
        caption = "Reliability diagram of the held-out predictions"
    body = H.key_value_table(cal.rows()) + H.paragraph(intro, note=True)
    if cal.reliability is not None:
        body += H.dataframe_table(cal.reliability.set_index("bin_lower"), "bin from")
    if part.with_figures:
        body += part.figure("calibration", caption, make)
    part.body.append(H.section(what, body, level=3))


def _latent_note(idata, latent: Sequence[str]) -> str:
    import arviz as az

    if not latent:
        return ""
    r = diagnostics._values(az.rhat(idata, var_names=list(latent)))
    eb = diagnostics._values(az.ess(idata, var_names=list(latent), method="bulk"))
    et = diagnostics._values(az.ess(idata, var_names=list(latent), method="tail"))
    parts = []
    for v in latent:
        parts.append(
            f"{v} ({r[v].size} values): worst r̂ {H.fmt_number(np.nanmax(r[v]), 'rhat')}, "
            f"smallest bulk ESS {H.fmt_number(np.nanmin(eb[v]), 'int')}, "
            f"smallest tail ESS {H.fmt_number(np.nanmin(et[v]), 'int')}"
        )
    return H.paragraph("Latent values, in aggregate: " + "; ".join(parts) + ".")


def _loo_section(part: Part) -> None:
    s = part.loo
    rows: list[tuple[str, object]] = [
        ("method", s.method),
        ("elpd", s.elpd),
        ("se", s.se),
        ("mean log predictive density (elpd / n)", s.elpd / s.pointwise.size),
    ]
    if s.p_loo is not None:
        rows.append(("p_loo (effective number of parameters)", s.p_loo))
    part.body.append(H.section("Leave-one-out predictive score", H.key_value_table(rows), level=3))


def nuts_part(entry: Entry, X_new, with_figures: bool, held_out=None) -> Part:
    """The sections of a NUTS fit: model, inference settings, posterior summary, MCMC
    diagnostics and the model's approximation checks, PSIS-LOO, trace/rank/pair/energy figures
    and, with a model, prior vs posterior, prior and posterior predictive checks, calibration
    on ``held_out`` data, bands and predictions at ``X_new``.

    Parameters
    ----------
    entry : Entry
        A NUTS fit (:func:`~bayes_gp.report.entries.to_entries`).
    X_new : array_like or None
    with_figures : bool
    held_out : (X_test, y_test) or None

    Returns
    -------
    Part
    """
    import arviz as az

    part = Part(entry, with_figures=with_figures)
    idata, model = entry.fit, entry.model
    t0 = time.perf_counter()
    params, latent = diagnostics.split_variables(
        idata, model.hyperparameters if model is not None else None
    )
    _model_section(part, model)
    part.body.append(H.section("Inference", H.key_value_table(describe.nuts_settings(idata)), 3))
    derived = [d for d in (model.derived if model is not None else []) if d in idata["posterior"]]
    summary = az.summary(
        idata, var_names=[*params, *derived], round_to="none", ci_kind="hdi", ci_prob=CI_PROB
    )
    part.summary = pd.DataFrame(summary)
    part.body.append(
        H.section(
            "Posterior summary",
            H.dataframe_table(part.summary, "parameter") + _latent_note(idata, latent),
            level=3,
        )
    )
    part.verdicts = diagnostics.mcmc_verdicts(idata, params, latent)
    if "log_likelihood" in idata.children:
        part.loo, loo = psis_loo(idata, entry.name)
        part.verdicts.append(diagnostics.pareto_k_verdict(loo, idata))
    _approximation_checks(part, model, idata)
    part.diagnostics_section()
    if part.loo is not None:
        _loo_section(part)
    part.timings["tables"] = time.perf_counter() - t0

    traced = _leading_variables(idata, params, figures.MAX_TRACE_COMPONENTS) or list(params)
    first = "" if traced == params else f" (first {len(traced)} of {len(params)} variables)"
    part.add_figures(
        "Trace and rank plots",
        ("trace", f"Marginal densities and traces per chain{first} (az.plot_trace_dist)",
         lambda: figures.trace_figure(idata, traced)),
        ("rank", f"Rank plots: fractional-rank Δ-ECDF per chain{first} (az.plot_rank)",
         lambda: figures.rank_figure(idata, traced)),
    )  # fmt: skip
    shown = _leading_variables(idata, params, figures.MAX_PAIR_COMPONENTS)
    if len(shown) and figures.n_components(idata, shown) >= 2:
        cut = "" if shown == params else f" (first {len(shown)} of {len(params)} variables)"
        part.add_figures("Pair plot", ("pair", f"Hyperparameters pairwise{cut} (az.plot_pair)",
                                       lambda: figures.pair_figure(idata, shown)))  # fmt: skip
    if "sample_stats" in idata.children and "energy" in idata["sample_stats"]:
        part.add_figures("Energy", ("energy", "Energy distributions and E-BFMI (az.plot_energy)",
                                    lambda: figures.energy_figure(idata)))  # fmt: skip
    if model is not None:
        part.add_figures(
            "Prior vs posterior",
            (
                "prior_posterior",
                f"Prior ({PRIOR_DRAWS} draws) and posterior marginals{first} "
                "(az.plot_prior_posterior)",
                lambda: figures.prior_posterior_figure(prior_tree(model, idata, traced), traced),
            ),
        )
        _prior_predictive_section(part, model)
        _ppc_section(part, model, idata, True)
        _held_out_section(part, model, idata, held_out)
        _bands(part, model, idata, True, X_new)
        if X_new is not None:
            _predictions_table(part, model, idata, X_new)
    part.finish()
    return part


def _leading_variables(idata, params: Sequence[str], most: int) -> list[str]:
    """The first variables of ``params`` with at most ``most`` scalar components in all."""
    shown: list[str] = []
    for p in params:
        if figures.n_components(idata, [*shown, p]) > most:
            break
        shown.append(p)
    return shown


def _ppc_section(part: Part, model, fit, nuts: bool) -> None:
    def make():
        tree, binary = ppc_tree(model, fit)
        return figures.ppc_figure(tree, binary)

    if model.outcome == "binary":
        caption = "Calibration of replicated labels: PAV-adjusted reliability (az.plot_ppc_pava)"
    else:
        caption = f"{model.ppc_caption(PPC_DRAWS)} (az.plot_ppc_dist)"
    part.add_figures("Posterior predictive check", ("ppc", caption, make))
    _outcome_section(part, model, fit)


def _outcome_section(part: Part, model, fit) -> None:
    """The posterior predictive check suited to the outcome (category frequencies, zeros and
    dispersion, the Kaplan–Meier curve; :mod:`bayes_gp.report.outcome_checks`): a table,
    verdict rows and the figure."""
    what = "Posterior predictive check of the outcome"
    check = _guarded(part, what, lambda: outcome_check(model, fit),
                     "the outcome's posterior predictive check could not be drawn")  # fmt: skip
    if check is None:
        return
    part.verdicts += check.verdicts
    frame = pd.DataFrame(
        [r[1:] for r in check.rows], index=[r[0] for r in check.rows],
        columns=["observed", "replicated mean", "replicated 3%", "replicated 97%", "p-value"],
    )  # fmt: skip
    body = H.dataframe_table(frame, "statistic") + H.paragraph(check.note, note=True)
    if part.with_figures:
        body += part.figure("outcome_ppc", f"{check.title}: observed and replicated",
                            lambda: figures.outcome_figure(check.figure, check.title))  # fmt: skip
    part.body.append(H.section(f"{what}: {check.title.lower()}", body, level=3))


def point_part(entry: Entry, X_new, with_figures: bool, held_out=None) -> Part:
    """The sections of a type-II fit: model, inference settings, point estimate, restarts,
    optimiser, prior-tail and the model's approximation checks, exact / cavity LOO, prior and
    posterior predictive checks, calibration on ``held_out`` data, bands and predictions at
    ``X_new``.

    Parameters
    ----------
    entry : Entry
        A type-II fit with its model (:func:`~bayes_gp.report.entries.to_entries`).
    X_new : array_like or None
    with_figures : bool
    held_out : (X_test, y_test) or None

    Returns
    -------
    Part
    """
    part = Part(entry, with_figures=with_figures)
    model, fit = entry.model, entry.fit
    t0 = time.perf_counter()
    _model_section(part, model)
    part.body.append(H.section("Inference", H.key_value_table(describe.point_fit_settings(fit)), 3))
    part.summary = describe.point_estimates(fit, model.feature_names, model)
    part.body.append(
        H.section("Point estimate", H.dataframe_table(part.summary, "parameter"), level=3)
    )
    restarts = describe.restarts_frame(fit, model.feature_names, model)
    if restarts is not None:
        part.body.append(
            H.section("Restarts (best first)", H.dataframe_table(restarts, "restart"), level=3)
        )
    part.verdicts = diagnostics.optimizer_verdicts(fit)
    names = list(model.hyperparameters)
    part.verdicts.append(
        diagnostics.prior_tail_verdict(fit.params, prior_draws(model, names, PRIOR_TAIL_DRAWS))
    )
    _approximation_checks(part, model, fit)
    part.diagnostics_section(H.paragraph(_NO_MCMC))
    part.loo = point_loo(model, fit, entry.name)
    _loo_section(part)
    part.timings["tables"] = time.perf_counter() - t0
    _prior_predictive_section(part, model)
    _ppc_section(part, model, fit, False)
    _held_out_section(part, model, fit, held_out)
    _bands(part, model, fit, False, X_new)
    if X_new is not None:
        _predictions_table(part, model, fit, X_new)
    part.finish()
    return part
