"""Result directories: :func:`save` writes one atomically, :func:`load` reads it back.

:func:`save` stages every file (``fit.json``, ``posterior.nc``, ``predictions.csv``,
``predictions_new.csv`` where there are predictions at new rows, ``report.html``) in a
temporary sibling directory, flushes them to disk and swaps the directory into place
(:func:`_swap_into_place`); :func:`load` rebuilds the model from the saved specification
and data options and restores the fit into it, with its jitter, so that the
reloaded result predicts and reports as the saved one did. ``fit.json`` also records the
provenance of the fit: versions, settings and their defaults, timings, and the report's
verdicts (:func:`verdict_records`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import secrets
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bayes_gp._version import __version__
from bayes_gp.protocol import declared_axes
from bayes_gp.workflow.fitting import FitResult, default_settings, fit_kind
from bayes_gp.workflow.reporting import make_report
from bayes_gp.workflow.spec import from_spec

if TYPE_CHECKING:
    import xarray as xr

__all__ = [
    "save", "load", "approximation_records", "verdict_records", "point_dataset", "point_fit",
    "fit_details", "FIT_JSON", "POSTERIOR", "PREDICTIONS", "PREDICTIONS_NEW", "REPORT",
]  # fmt: skip

FIT_JSON, POSTERIOR, PREDICTIONS, REPORT = (
    "fit.json",
    "posterior.nc",
    "predictions.csv",
    "report.html",
)
#: Predictions at new rows (``bayes-gp fit --predict FILE``, :attr:`FitResult.new_predictions`).
PREDICTIONS_NEW = "predictions_new.csv"


def _point_dataset(res: FitResult):
    """:func:`point_dataset` of a result's type-II fit."""
    return point_dataset(res.fit, res.model, res.method, res.data.feature_names)


def point_dataset(fit, gp, method: str, feature_names) -> xr.Dataset:
    """A type-II fit of ``gp`` as an xarray Dataset: its hyperparameters (per-feature ones on a
    ``feature`` axis; others on the axes the PyMC model declares for them, such as a
    multi-output model's ``output``), the model's saved arrays and the fit's scalars as
    attributes. :func:`point_fit` reads it back."""
    import xarray as xr

    ds = xr.Dataset()
    feature_names = list(feature_names)
    n_features = len(feature_names)
    for name, value in fit.params.items():
        v = np.asarray(value, float)
        declared = _declared_axes(gp, name, v)
        if declared is not None:
            ds[name] = xr.DataArray(v, dims=tuple(declared), coords=declared)
            continue
        dims = ("feature",) if v.ndim == 1 and v.size == n_features else _own_dims(name, v)
        ds[name] = xr.DataArray(v, dims=dims)
    if "feature" in ds.dims:
        ds = ds.assign_coords(feature=feature_names)
    for name, value in gp.saved_arrays(fit).items():
        v = np.asarray(value, float)
        ds[_ARRAY + name] = xr.DataArray(v, dims=_own_dims(_ARRAY + name, v))
    ds.attrs.update(
        method=method,
        log_marginal_likelihood=float(fit.log_marginal_likelihood),
        objective=float(fit.objective),
        prior=int(bool(fit.prior)),
        grad_norm=float(fit.grad_norm),
    )
    for key in ("jitter", "jitter_default"):
        value = float(getattr(fit, key, np.nan))
        if np.isfinite(value):
            ds.attrs[key] = value
    return ds


#: Prefix of the :meth:`~bayes_gp.protocol.GPModel.saved_arrays` in a saved point estimate.
_ARRAY = "array__"


def _declared_axes(gp, name: str, v: np.ndarray) -> dict[str, list] | None:
    """The axes ``gp``'s PyMC model declares for the hyperparameter ``name``
    (:func:`bayes_gp.protocol.declared_axes`) unless one is ``feature`` (which keeps the data's
    feature names); else ``None``."""
    axes = declared_axes(gp, name, v.shape)
    return None if axes is None or "feature" in axes else axes


def _own_dims(name: str, v: np.ndarray) -> tuple[str, ...]:
    """Dimension names of an array that has no named axis: ``name_0``, ``name_1``, …"""
    return tuple(f"{name}_{i}" for i in range(v.ndim))


def approximation_records(res: FitResult, checks=None) -> list[dict]:
    """The model's post-fit approximation checks of the fit
    (:meth:`~bayes_gp.protocol.GPModel.approximation_checks`) as ``fit.json`` records: ``name``,
    ``status``, ``value``, ``threshold``, ``advice``, ``detail``. ``checks``: those the report
    already computed (else they are computed here). A check that raises is recorded as a
    ``"warn"`` with the error, as the report shows it."""
    if checks is None:
        try:
            checks = res.model.approximation_checks(res.fit)
        except Exception as exc:  # the fit is saved whatever its checks do
            return [
                {
                    "name": "approximation checks", "status": "warn", "value": None,
                    "threshold": "–",
                    "advice": "the approximation could not be checked: treat it as unverified",
                    "detail": f"{type(exc).__name__}: {exc}",
                }
            ]  # fmt: skip
    return [c.to_dict() for c in checks]


def verdict_records(verdicts) -> list[dict]:
    """The report's verdicts as ``fit.json`` writes them: ``check``, ``status``, ``value``
    (``None`` where not available), ``threshold``, ``advice`` and ``detail``, in the report's
    order; what a script or a test reads instead of the HTML."""
    out = []
    for v in verdicts:
        value = None if v.value is None else float(v.value)
        if value is not None and not np.isfinite(value):
            value = str(value)  # JSON has no NaN or infinity (as _json_value writes them)
        out.append({"check": v.check, "status": v.status, "value": value,
                    "threshold": v.threshold, "advice": v.advice, "detail": v.detail})  # fmt: skip
    return out


def _fit_record(res: FitResult, report_ok: bool, checks=None, verdicts=None) -> dict:
    """The content of ``fit.json``: what was fitted and how, scores, timings, versions, the
    approximation checks (:func:`approximation_records`; ``checks`` those the report computed),
    the report's verdicts (:func:`verdict_records`; ``None`` without a report), and for a
    type-II fit its hyperparameters and optimiser details."""
    import arviz
    import pymc
    import pytensor

    record = {
        "name": res.name,
        "task": res.task,
        "method": res.method,
        "spec": res.spec,
        "settings": res.settings,
        "defaults": res.defaults,
        "n_train": int(np.shape(res.data.X_train)[0]),
        "features": list(res.data.feature_names),
        "target": res.data.target_name,
        "source": res.data.source,
        "prediction_columns": _prediction_columns(res),
        "scores": res.scores,
        "approximation_checks": approximation_records(res, checks),
        "seconds": res.seconds,
        "report": REPORT if report_ok else None,
        "verdicts": None if verdicts is None else verdict_records(verdicts),
        "versions": {
            "bayes_gp": __version__,
            "pymc": pymc.__version__,
            "pytensor": pytensor.__version__,
            "arviz": arviz.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
        },
        "created": res.created or time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if not res.is_mcmc:
        record["params"] = {k: np.asarray(v).tolist() for k, v in res.fit.params.items()}
        record["log_marginal_likelihood"] = float(res.fit.log_marginal_likelihood)
        record["fit"] = fit_details(res.fit)
    return record


def _prediction_columns(res: FitResult) -> dict[str, dict]:
    """Per predictions file, what each column holds and on which scale
    (:func:`~bayes_gp.workflow.scoring.column_scales`)."""
    from bayes_gp.workflow.scoring import column_scales

    out = {PREDICTIONS: column_scales(res.predictions, res.model, res.data)}
    if res.new_predictions is not None:
        out[PREDICTIONS_NEW] = column_scales(res.new_predictions, res.model, res.data, new=True)
    return out


#: Attributes of a type-II fit that are rebuilt from the data, not saved in ``fit.json``.
_REBUILT = ("params", "state", "method", "restarts")


def _json_value(value):
    """A fit attribute as JSON: arrays as (nested) lists, NaN and infinities as strings."""
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, np.ndarray):
        return _json_value(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # "nan", "inf", "-inf"
    return value


def _from_json(value):
    """Inverse of :func:`_json_value` for numbers (lists stay lists)."""
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    if value in ("nan", "inf", "-inf"):
        return float(value)
    return value


def fit_details(fit) -> dict:
    """Everything the report reads from a type-II fit besides its hyperparameters and its
    approximation state: the restarts (start, optimum, objective, convergence, iterations,
    message), gradient norm, wall time, jitter, convergence flags. Saved in ``fit.json`` so that
    a reloaded fit reports exactly as the fresh one."""
    out = {}
    for f in dataclasses.fields(fit):
        if f.name in _REBUILT:
            continue
        value = getattr(fit, f.name)
        if isinstance(value, bool | int | float | str | np.generic):
            out[f.name] = _json_value(value)
    out["restarts"] = [
        {
            "start": _json_value(r.start),
            "params": _json_value(r.params),
            "objective": _json_value(r.objective),
            "converged": bool(r.converged),
            "n_iter": int(r.n_iter),
            "message": str(r.message),
            "runaway": list(getattr(r, "runaway", ())),
            "degenerate": list(getattr(r, "degenerate", ())),
        }
        for r in (fit.restarts or [])
    ]
    return out


def _with_details(fit, details: dict | None):
    """``fit`` with the attributes saved by :func:`fit_details` restored."""
    from bayes_gp.inference.typeii import Restart

    if not details:
        return fit
    names = {f.name for f in dataclasses.fields(fit)} - set(_REBUILT)

    def arrays(d):
        return {k: np.asarray(_from_json(v), float) for k, v in d.items()}

    restarts = [
        Restart(
            arrays(r["start"]),
            arrays(r["params"]),
            float(_from_json(r["objective"])),
            bool(r["converged"]),
            int(r["n_iter"]),
            str(r["message"]),
            tuple(r.get("runaway", ())),  # absent from fits saved before issue 37
            tuple(r.get("degenerate", ())),  # ... and before its part 2
        )
        for r in details.get("restarts", [])
    ]
    kept = {k: _from_json(v) for k, v in details.items() if k in names}
    return dataclasses.replace(fit, restarts=restarts, **kept)


def _json_default(obj):
    """``json.dumps`` fallback: NumPy scalars and arrays as Python numbers and lists."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def save(res: FitResult, out: str | os.PathLike, *, with_report: bool = True) -> list[Path]:
    """Write the result directory ``out`` atomically.

    Everything is written into a temporary sibling directory first, flushed to disk, and then
    renamed onto ``out`` (a previous ``out`` is moved aside first and removed afterwards). If
    anything fails, ``out`` keeps its previous content and the temporary directory is removed.

    Parameters
    ----------
    res : FitResult
    out : str or PathLike
        The result directory (created, or replaced as a whole).
    with_report : bool
        Write ``report.html`` too (:func:`~bayes_gp.workflow.make_report`).

    Returns
    -------
    list of Path
        The files written.

    Raises
    ------
    ValueError
        If ``out`` exists and is not a directory.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} exists and is not a directory")
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = out.parent / f".{out.name}.{secrets.token_hex(6)}.tmp"
    stage.mkdir()
    try:
        if res.is_mcmc:
            res.fit.to_netcdf(stage / POSTERIOR)
        else:
            _point_dataset(res).to_netcdf(stage / POSTERIOR)
        res.predictions.to_csv(stage / PREDICTIONS, index=False)
        if res.new_predictions is not None:
            res.new_predictions.to_csv(stage / PREDICTIONS_NEW, index=False)
        report_ok, checks, verdicts = False, None, None
        if with_report:
            rep = make_report(res)
            rep.save(stage / REPORT)
            report_ok = True
            checks = next(iter(rep.approximation_checks.values()), None)
            verdicts = rep.verdicts
        record = _fit_record(res, report_ok, checks, verdicts)
        text = json.dumps(record, indent=2, default=_json_default)
        (stage / FIT_JSON).write_text(text + "\n")
        for p in stage.iterdir():
            with open(p, "rb") as fh:
                os.fsync(fh.fileno())
        _swap_into_place(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return sorted(out.iterdir())


def _swap_into_place(stage: Path, out: Path) -> None:
    """Rename the staged directory onto ``out``: a previous ``out`` is moved aside first, put back
    if the rename fails, and removed once the new one is in place."""
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.{secrets.token_hex(6)}.old"
        os.replace(out, old)
    try:
        os.replace(stage, out)
    except BaseException:
        if old is not None:
            os.replace(old, out)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def load(out: str | os.PathLike) -> FitResult:
    """Read a result directory written by :func:`save` and rebuild its model.

    The model is rebuilt from its specification (declared model name or CSV file), with the same
    data options, so the returned result predicts exactly as the saved one did.

    Parameters
    ----------
    out : str or PathLike
        A result directory.

    Returns
    -------
    FitResult

    Raises
    ------
    ValueError
        If ``out`` is not a result directory, or one of its files is damaged or belongs to
        another model.
    """
    import arviz as az
    import xarray as xr

    out = Path(out)
    path = out / FIT_JSON
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{out} is not a bayes_gp result directory (no {FIT_JSON})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is corrupted: {exc}") from None
    try:
        spec, method, settings = record["spec"], record["method"], record["settings"]
    except (KeyError, TypeError):
        raise ValueError(f"{path} is not a bayes_gp fit record") from None
    decl = from_spec(spec)
    # a result saved under the previous release's name of its method, read by the new name
    method = decl.renamed.get(method, method)
    data = decl.load_data(fast=bool(settings.get("fast", False)))
    source = record.get("source")
    if isinstance(source, str) and source != data.source:
        # the source as the fit recorded it (a CSV path as given, relative or not), not the
        # absolute path the specification reloads the file from: the rebuilt report says what
        # the written one said
        data = dataclasses.replace(data, source=source)
    gp = decl.build(data, method)
    sampled = fit_kind(gp, method) == "sampling"
    post = out / POSTERIOR
    try:
        if sampled:
            fit = az.from_netcdf(post).load()  # read now: a damaged file fails here
            _check_posterior(fit, gp)
            jitter = fit["posterior"].attrs.get("bayes_gp_jitter")
            if jitter is not None:
                gp.set_jitter(float(jitter))  # the model the draws came from
        else:
            fit = _point_fit(xr.load_dataset(post), gp, method)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"cannot read {post}: {exc}") from None
    if not sampled:
        try:
            fit = _with_details(fit, record.get("fit"))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: damaged optimiser record ('fit'): {exc!r}") from None
    res = FitResult(decl.name, decl.task, method, gp, data, fit, settings, spec)
    res.scores = record.get("scores", {})
    res.seconds = record.get("seconds", {})
    res.defaults = record.get("defaults") or default_settings(decl, bool(settings.get("fast")))
    res.created = str(record.get("created", ""))
    preds = out / PREDICTIONS
    if preds.exists():
        res.predictions = pd.read_csv(preds)
    if (out / PREDICTIONS_NEW).exists():
        res.new_predictions = pd.read_csv(out / PREDICTIONS_NEW)
    return res


def _check_posterior(fit, gp) -> None:
    """A saved NUTS fit must hold a posterior with the model's hyperparameters."""
    try:
        post = fit["posterior"]
    except KeyError:
        raise KeyError("no posterior group: not a saved NUTS fit") from None
    missing = sorted(set(gp.hyperparameters) - set(post.data_vars))
    if missing:
        raise KeyError(f"the saved posterior lacks {missing}: it belongs to another model")


def point_fit(ds, gp, method: str, details: dict | None = None):
    """The type-II fit that :func:`point_dataset` wrote, rebuilt by its model ``gp``, with the
    optimiser's record ``details`` (:func:`fit_details`) restored."""
    return _with_details(_point_fit(ds, gp, method), details)


def _point_fit(ds, gp, method: str):
    """The saved type-II fit, rebuilt by its model (:meth:`~bayes_gp.protocol.GPModel.restore_fit`)."""
    params = {n: np.asarray(ds[n].values, float) for n in ds.data_vars if not n.startswith(_ARRAY)}
    missing = set(gp.hyperparameters) - set(params)
    if missing:
        raise KeyError(f"the saved point estimate lacks {sorted(missing)}")
    attrs = dict(ds.attrs)
    arrays = {n[len(_ARRAY) :]: np.asarray(ds[n].values, float)
              for n in ds.data_vars if n.startswith(_ARRAY)}  # fmt: skip
    if arrays:
        attrs["arrays"] = arrays
    if "jitter" in attrs:
        gp.set_jitter(float(attrs["jitter"]))  # the model the fit was made with
    return gp.restore_fit(method, params, attrs)
