"""``bayes_gp.report(...)``: one self-contained HTML report of a fit or of several fits."""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from bayes_gp._io import write_atomic
from bayes_gp._version import __version__
from bayes_gp.linalg import single_blas_thread
from bayes_gp.protocol import GPModel, PointFit, is_nuts
from bayes_gp.report import describe, diagnostics, figures
from bayes_gp.report import html as H
from bayes_gp.report.loo import LooScore, point_loo, psis_loo, score_table

__all__ = ["Report", "report", "CI_PROB", "PRIOR_DRAWS", "PPC_DRAWS", "GRID_POINTS"]

#: Probability of the credible intervals in the summary table (as the predictive bands).
CI_PROB = 0.94
#: Prior draws for the prior-vs-posterior plot.
PRIOR_DRAWS = 500
#: Prior draws for locating a point estimate in its prior.
PRIOR_TAIL_DRAWS = 4000
#: Replicated data sets in the posterior predictive check.
PPC_DRAWS = 50
#: Grid size of the 1-D predictive bands.
GRID_POINTS = 200
#: Rows shown of the predictions at ``X_new``.
MAX_PREDICTION_ROWS = 50

_NO_MCMC = (
    "This is a point estimate: there are no chains, so r̂, ESS, divergences, E-BFMI and "
    "tree-depth saturation do not apply. The checks below are on the optimiser instead; "
    "hyperparameter uncertainty is not reflected in the predictive bands (sample with NUTS "
    "for that)."
)


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
        ``az.compare`` of the NUTS fits (two or more).
    loo_table : pandas.DataFrame or None
        The MAP-vs-NUTS table of LOO scores (two or more fits).
    problems : list of str
        Parts that could not be produced (a figure that failed, with the error).
    timings : dict
        Seconds spent per part.
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


# ------------------------------------------------------------------------------ input handling


@dataclass
class _Entry:
    name: str
    model: object
    fit: object
    nuts: bool


def _is_model(obj) -> bool:
    return isinstance(obj, GPModel)


def _default_name(model, fit) -> str:
    if model is not None:
        return f"{model.label} {model.fit_label(fit)}".strip()
    if is_nuts(fit):
        sampler = fit["posterior"].attrs.get("bayes_gp_sampler")
        return f"NUTS ({sampler})" if sampler else "NUTS"
    return fit.method_label


def _entry(name, item, model) -> _Entry:
    if isinstance(item, tuple):
        if len(item) != 2 or not _is_model(item[0]):
            raise TypeError("a tuple in `result` must be (model, fit)")
        model, item = item
    if model is not None and not _is_model(model):
        raise TypeError(
            "`model` must implement the model protocol (bayes_gp.protocol.GPModel: "
            f"GPRegression, GPClassifier or HeteroscedasticGPRegression, …), got "
            f"{type(model).__name__}"
        )
    if isinstance(item, xr.DataTree):
        if "posterior" not in item.children:
            raise ValueError("the DataTree has no `posterior` group (is it from .sample()?)")
        if model is not None:
            try:
                model.check_fit(item)
            except TypeError as exc:
                raise ValueError(f"`model` does not match the fit: {exc}") from None
        return _Entry(name or _default_name(model, item), model, item, True)
    if not isinstance(item, PointFit):
        raise TypeError(
            "`result` must be a DataTree from .sample(), a type-II fit (MapFit, ClassifierFit), "
            f"a (model, fit) pair, or a list or dict of them; got {type(item).__name__}"
        )
    if model is None:
        raise ValueError(f"a {type(item).__name__} needs `model=`, the model it was fitted with")
    try:
        model.check_fit(item)
    except TypeError as exc:
        raise ValueError(f"`model` does not match the fit: {exc}") from None
    return _Entry(name or _default_name(model, item), model, item, False)


def _entries(result, model) -> tuple[list[_Entry], bool]:
    if isinstance(result, Mapping) and not isinstance(result, xr.DataTree):  # a DataTree is one
        items = [(str(k), v) for k, v in result.items()]
        multi = True
    elif isinstance(result, list):
        items = [("", v) for v in result]
        multi = True
    else:
        items = [("", result)]
        multi = False
    if not items:
        raise ValueError("`result` is empty")
    entries = [_entry(name, item, model) for name, item in items]
    seen: dict[str, int] = {}
    for e in entries:  # unique names
        seen[e.name] = seen.get(e.name, 0) + 1
        if seen[e.name] > 1:
            e.name = f"{e.name} #{seen[e.name]}"
    return entries, multi


# ----------------------------------------------------------------------------------- parts


@dataclass
class _Part:
    entry: _Entry
    body: list = field(default_factory=list)
    verdicts: list = field(default_factory=list)
    summary: pd.DataFrame | None = None
    loo: LooScore | None = None
    problems: list = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    with_figures: bool = True

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


def _prior_draws(model, params: Sequence[str], draws: int = PRIOR_DRAWS) -> dict:
    """Prior draws of the hyperparameters, name → (draws, ...), by ``pm.draw`` with the
    fast-compiling Python linker (~0.05 s, against ~0.5 s for ``pm.sample_prior_predictive``)."""
    import pymc as pm

    from bayes_gp.linalg import EAGER_MODE

    pm_model = model.model
    out = pm.draw([pm_model[n] for n in params], draws=draws, random_seed=0, mode=EAGER_MODE)
    return {n: np.asarray(a, float) for n, a in zip(params, out, strict=True)}


def _prior_tree(model, idata, params: Sequence[str]):
    """Prior draws next to the posterior, for ``az.plot_prior_posterior``."""
    pm_model = model.model
    coords = {"chain": [0], "draw": np.arange(PRIOR_DRAWS)}
    data = {}
    for name, arr in _prior_draws(model, params).items():
        dims = list(pm_model.named_vars_to_dims.get(name) or [])
        for d in dims:
            coords[d] = list(pm_model.coords[d])
        data[name] = (["chain", "draw", *dims], arr[None])
    prior = xr.Dataset(data, coords=coords)
    return xr.DataTree.from_dict(
        {"posterior": idata["posterior"].to_dataset()[list(params)], "prior": prior}
    )


def _ppc_tree(model, fit):
    """Replicated data from the model (:meth:`~bayes_gp.protocol.GPModel.replicate`) beside the
    observed data, as ArviZ wants them; and whether the outcome is binary."""
    reps = np.asarray(model.replicate(fit, PPC_DRAWS, seed=0))
    observed = np.asarray(model.observed)
    obs = np.arange(observed.shape[0])
    pp = xr.Dataset(
        {"y": (("chain", "draw", "obs"), reps[None])},
        coords={"chain": [0], "draw": np.arange(reps.shape[0]), "obs": obs},
    )
    od = xr.Dataset({"y": (("obs",), observed)}, coords={"obs": obs})
    tree = xr.DataTree.from_dict({"posterior_predictive": pp, "observed_data": od})
    return tree, model.outcome == "binary"


def _grid(model, X_new) -> np.ndarray:
    x = model.X[:, 0]
    lo, hi = float(x.min()), float(x.max())
    if X_new is not None:
        xn = np.asarray(X_new, float).ravel()
        lo, hi = min(lo, float(xn.min())), max(hi, float(xn.max()))
    pad = 0.05 * (hi - lo if hi > lo else 1.0)
    return np.linspace(lo - pad, hi + pad, GRID_POINTS)


def _bands(part: _Part, model, fit, nuts: bool, X_new) -> None:
    name = part.entry.name
    if model.X.shape[1] != 1:
        if X_new is None:
            part.body.append(
                H.paragraph(
                    f"Predictive bands are drawn for one input dimension; this model has "
                    f"D = {model.X.shape[1]}. Pass X_new for a table of predictions.",
                    note=True,
                )
            )
        return
    grid = _grid(model, X_new)
    xlabel = model.feature_names[0]

    def make():
        b = model.bands(grid, fit)
        if b.kind == "probability":
            band = None if b.lower is None else (b.lower, b.upper)
            return figures.classifier_bands_figure(
                b.x, b.y, b.grid, b.mean, band, f"{name}: predictive probability", xlabel,
                b.positive,
            )  # fmt: skip
        pred_f = Prediction(b.mean, b.lower, b.upper)
        pred_y = Prediction(b.mean, b.y_lower, b.y_upper)
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
    if model.bands_note:
        caption += "; " + model.bands_note
    part.add_figures("Predictive bands", ("bands", caption, make))


@dataclass(frozen=True)
class Prediction:
    """Mean and interval of a band, as the figure functions read them."""

    mean: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


def _predictions_table(part: _Part, model, fit, X_new) -> None:
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


def _model_section(part: _Part, model) -> None:
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


def _loo_section(part: _Part) -> None:
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


def _nuts_part(entry: _Entry, X_new, with_figures: bool) -> _Part:
    import arviz as az

    part = _Part(entry, with_figures=with_figures)
    idata, model = entry.fit, entry.model
    t0 = time.perf_counter()
    params, latent = diagnostics.split_variables(
        idata, model.hyperparameters if model is not None else None
    )
    _model_section(part, model)
    part.body.append(H.section("Inference", H.key_value_table(describe.nuts_settings(idata)), 3))
    summary = az.summary(idata, var_names=params, round_to="none", ci_kind="hdi", ci_prob=CI_PROB)
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
    part.diagnostics_section()
    if part.loo is not None:
        _loo_section(part)
    part.timings["tables"] = time.perf_counter() - t0

    part.add_figures(
        "Trace and rank plots",
        ("trace", "Marginal densities and traces per chain (az.plot_trace_dist)",
         lambda: figures.trace_figure(idata, params)),
        ("rank", "Rank plots: fractional-rank Δ-ECDF per chain (az.plot_rank)",
         lambda: figures.rank_figure(idata, params)),
    )  # fmt: skip
    shown = _pair_variables(idata, params)
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
                f"Prior ({PRIOR_DRAWS} draws) and posterior marginals (az.plot_prior_posterior)",
                lambda: figures.prior_posterior_figure(_prior_tree(model, idata, params), params),
            ),
        )
        _ppc_section(part, model, idata, True)
        _bands(part, model, idata, True, X_new)
        if X_new is not None:
            _predictions_table(part, model, idata, X_new)
    part.finish()
    return part


def _pair_variables(idata, params: Sequence[str]) -> list[str]:
    shown: list[str] = []
    for p in params:
        if figures.n_components(idata, [*shown, p]) > figures.MAX_PAIR_COMPONENTS:
            break
        shown.append(p)
    return shown


def _ppc_section(part: _Part, model, fit, nuts: bool) -> None:
    def make():
        tree, binary = _ppc_tree(model, fit)
        return figures.ppc_figure(tree, binary)

    if model.outcome == "binary":
        caption = "Calibration of replicated labels: PAV-adjusted reliability (az.plot_ppc_pava)"
    else:
        caption = f"{model.ppc_caption(PPC_DRAWS)} (az.plot_ppc_dist)"
    part.add_figures("Posterior predictive check", ("ppc", caption, make))


def _point_part(entry: _Entry, X_new, with_figures: bool) -> _Part:
    part = _Part(entry, with_figures=with_figures)
    model, fit = entry.model, entry.fit
    t0 = time.perf_counter()
    _model_section(part, model)
    part.body.append(H.section("Inference", H.key_value_table(describe.point_fit_settings(fit)), 3))
    part.summary = describe.point_estimates(fit, model.feature_names)
    part.body.append(
        H.section("Point estimate", H.dataframe_table(part.summary, "parameter"), level=3)
    )
    restarts = describe.restarts_frame(fit, model.feature_names)
    if restarts is not None:
        part.body.append(
            H.section("Restarts (best first)", H.dataframe_table(restarts, "restart"), level=3)
        )
    part.verdicts = diagnostics.optimizer_verdicts(fit)
    names = list(model.hyperparameters)
    part.verdicts.append(
        diagnostics.prior_tail_verdict(fit.params, _prior_draws(model, names, PRIOR_TAIL_DRAWS))
    )
    part.diagnostics_section(H.paragraph(_NO_MCMC))
    part.loo = point_loo(model, fit, entry.name)
    _loo_section(part)
    part.timings["tables"] = time.perf_counter() - t0
    _ppc_section(part, model, fit, False)
    _bands(part, model, fit, False, X_new)
    if X_new is not None:
        _predictions_table(part, model, fit, X_new)
    part.finish()
    return part


def _comparison(parts: Sequence[_Part], with_figures: bool):
    """``(html, az.compare frame or None, LOO table or None, problems)``."""
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


def _overview(parts: Sequence[_Part]) -> str:
    rows = []
    for p in parts:
        counts = {s: sum(v.status == s for v in p.verdicts) for s in diagnostics.STATUSES}
        rows.append([p.entry.name, diagnostics.worst_status(p.verdicts),
                     counts["fail"], counts["warn"], counts["ok"]])  # fmt: skip
    classes = [{"n/a": "na"}.get(r[1], r[1]) for r in rows]
    return H.table(["fit", "overall", "fail", "warn", "ok"], rows, formats={0: str},
                   row_classes=classes)  # fmt: skip


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

    Returns
    -------
    Report
        ``.html``, ``.verdicts``, ``.summary``, ``.save(path)``; shown inline in Jupyter.
    """
    import arviz as az

    t_start = time.perf_counter()
    entries, multi = _entries(result, model)
    with_figures = bool(figures)
    parts = [(_nuts_part if e.nuts else _point_part)(e, X_new, with_figures) for e in entries]
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
        body.append(H.section("Overview", _overview(parts)))
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
    comparison = loo_table = None
    if multi:
        t0 = time.perf_counter()
        cmp_html, comparison, loo_table, cmp_problems = _comparison(parts, with_figures)
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
        problems=problems,
        timings=timings,
    )
    if path is not None:
        rep.save(path)
    return rep
