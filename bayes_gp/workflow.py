"""End-to-end fits: data → model → inference → predictions → saved results and report.

:func:`run` fits a declared model (``models/``, see :mod:`bayes_gp.declared`) or a model on the
user's own CSV file (:class:`CSVModel`) with one of the inference methods, predicts at the held-out
and new inputs and scores the held-out data. :func:`save` writes a result directory atomically
(every file staged in a temporary directory that replaces the target in one rename);
:func:`load` reads it back and rebuilds the model, so a saved fit predicts and reports again.

A result directory holds

``fit.json``
    What was fitted and how: the model (declared name, or the CSV specification), method,
    settings, seed, timings, held-out scores, versions.
``posterior.nc``
    The posterior (NUTS, an ArviZ DataTree in netCDF) or the point estimate (MAP, Laplace, EP: a
    dataset of the hyperparameters, with the log marginal likelihood in its attributes).
``predictions.csv``
    Predictions at the held-out inputs (with the observed values) and at the new inputs.
``report.html``
    The diagnostic report (:func:`bayes_gp.report.report`).
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bayes_gp._version import __version__
from bayes_gp.declared import Dataset, DeclaredModel, load_model
from bayes_gp.protocol import GPModel

__all__ = [
    "CSVModel",
    "FitResult",
    "run",
    "save",
    "load",
    "make_report",
    "provenance",
    "FIT_JSON",
    "POSTERIOR",
    "PREDICTIONS",
]

FIT_JSON, POSTERIOR, PREDICTIONS, REPORT = (
    "fit.json",
    "posterior.nc",
    "predictions.csv",
    "report.html",
)
_DEFAULTS = {
    "fast": {"draws": 300, "tune": 300, "chains": 2, "n_restarts": 3},
    "full": {"draws": 1000, "tune": 1000, "chains": 4, "n_restarts": 5},
}


# --------------------------------------------------------------------------- CSV models
@dataclass(frozen=True)
class CSVModel:
    """A model on the user's own CSV file, with the declared-model interface.

    Parameters
    ----------
    path : path to a CSV file with a header row
    x : list of str
        Input columns.
    y : str
        Target column (numbers for regression; two distinct labels for classification).
    kernel : str
        A catalogue name or a sum of products (:func:`bayes_gp.regression.kernel_spec`).
    task : {"regression", "classification", "counts"}
        ``"counts"`` is set from a count likelihood.
    ard : bool
    likelihood : str, optional
        A :class:`~bayes_gp.LatentGP` likelihood (``"poisson"``, ``"negative_binomial"``,
        ``"binomial"``, ``"bernoulli"``, ``"student_t"``, ``"gaussian"``): the model is then a
        latent GP fitted by ``"laplace"`` (NUTS with the Laplace-integrated GP), ``"latent"``
        or ``"map"``.
    exposure, trials : str, optional
        Column of the exposure (Poisson, negative binomial) or of the trials (binomial).
    """

    path: str
    x: tuple[str, ...]
    y: str
    kernel: str = "expquad"
    task: str = "regression"
    ard: bool = False
    likelihood: str | None = None
    exposure: str | None = None
    trials: str | None = None

    def __post_init__(self):
        from bayes_gp.latent import LIKELIHOODS
        from bayes_gp.regression import kernel_spec

        if self.likelihood is not None:
            if self.likelihood not in LIKELIHOODS:
                raise ValueError(
                    f"--likelihood must be one of {', '.join(LIKELIHOODS)}, got {self.likelihood!r}"
                )
            task = {"bernoulli": "classification", "student_t": "regression",
                    "gaussian": "regression"}.get(self.likelihood, "counts")  # fmt: skip
            object.__setattr__(self, "task", task)
        size = self.exposure or self.trials
        if self.exposure and self.likelihood not in ("poisson", "negative_binomial"):
            raise ValueError("--exposure goes with --likelihood poisson or negative_binomial")
        if self.trials and self.likelihood != "binomial":
            raise ValueError("--trials goes with --likelihood binomial")
        if self.likelihood == "binomial" and not self.trials:
            raise ValueError("--likelihood binomial needs --trials (the trials column)")
        if size and size in (*self.x, self.y):
            raise ValueError(f"column {size!r} is an input or the target, not a size column")
        if self.task not in ("regression", "classification", "counts"):
            raise ValueError(
                f"task must be 'regression', 'classification' or 'counts', got {self.task!r}"
            )
        if not self.x:
            raise ValueError("give at least one input column")
        if self.y in self.x:
            raise ValueError(f"column {self.y!r} is both an input and the target")
        kernel_spec(self.kernel, exclude=("prml",) if self.task == "classification" else ())

    @property
    def name(self) -> str:
        return Path(self.path).stem

    @property
    def summary(self) -> str:
        return f"{self.task} of {self.y} on {', '.join(self.x)} ({self.kernel}) from {self.path}"

    @property
    def methods(self) -> tuple[str, ...]:
        if self.likelihood is not None:
            from bayes_gp.latent import LatentGP

            return LatentGP.fit_methods
        if self.task == "regression":
            return ("nuts", "map")
        return ("laplace", "nuts", "ep")

    def settings(self, fast: bool) -> dict:
        return dict(_DEFAULTS["fast" if fast else "full"])

    def spec(self) -> dict:
        return {
            "csv": str(Path(self.path).resolve()),
            "x": list(self.x),
            "y": self.y,
            "kernel": self.kernel,
            "task": self.task,
            "ard": self.ard,
            "likelihood": self.likelihood,
            "exposure": self.exposure,
            "trials": self.trials,
        }

    def load_data(self, fast: bool = False) -> Dataset:
        try:
            df = pd.read_csv(self.path)
        except FileNotFoundError:
            raise ValueError(f"no such file: {self.path}") from None
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read {self.path} as CSV: {exc}") from None
        size = self.exposure or self.trials
        wanted = (*self.x, self.y, *([size] if size else []))
        missing = [c for c in wanted if c not in df.columns]
        if missing:
            raise ValueError(
                f"column(s) {', '.join(map(repr, missing))} not in {self.path} "
                f"(columns: {', '.join(map(str, df.columns))})"
            )
        cols = {}
        numeric = self.x if self.task == "classification" else (*self.x, self.y)
        for c in (*numeric, *([size] if size else [])):
            values = pd.to_numeric(df[c], errors="coerce")
            bad = values.isna() & df[c].notna()
            if bad.any():
                row = int(np.flatnonzero(bad.to_numpy())[0])
                raise ValueError(
                    f"column {c!r} is not numeric: row {row + 1} holds {df[c].iloc[row]!r}"
                )
            cols[c] = values
        used = pd.DataFrame(cols)
        if self.task == "classification":
            used[self.y] = df[self.y]
        n_missing = int(used.isna().any(axis=1).sum())
        if n_missing:
            raise ValueError(
                f"{n_missing} row(s) of {self.path} have missing values in the columns used; "
                "remove or impute them first"
            )
        X = used[list(self.x)].to_numpy(float)
        y = used[self.y].to_numpy()
        if self.task != "classification":
            y = y.astype(float)
        return Dataset(
            X_train=X,
            y_train=y,
            feature_names=list(self.x),
            target_name=self.y,
            source=str(self.path),
            size_train=used[size].to_numpy(float) if size else None,
        )

    def build(self, data: Dataset, method: str | None = None):
        from bayes_gp.classification import GPClassifier
        from bayes_gp.regression import GPRegression

        method = method or self.methods[0]
        if method not in self.methods:
            raise ValueError(
                f"--method {method!r} is not available for {self.task}: "
                f"use {', '.join(self.methods)}"
            )
        X = pd.DataFrame(data.X_train, columns=data.feature_names)
        if self.likelihood is not None:
            from bayes_gp.latent import LatentGP

            sizes = {}
            if self.exposure:
                sizes["exposure"] = data.size_train
            if self.trials:
                sizes["trials"] = data.size_train
            return LatentGP(X, data.y_train, self.kernel, self.likelihood, ard=self.ard, **sizes)
        if self.task == "regression":
            return GPRegression(X, data.y_train, self.kernel, ard=self.ard)
        link = "probit" if method == "ep" else "logit"
        return GPClassifier(X, data.y_train, self.kernel, link=link, ard=self.ard)


# ------------------------------------------------------------------------------- fitting
@dataclass
class FitResult:
    """A fitted model with its data, predictions and held-out scores.

    Attributes
    ----------
    name, task, method : str
    model : GPRegression or GPClassifier
    data : Dataset
    fit : DataTree (NUTS) or MapFit / ClassifierFit
    settings : dict
        The inference settings used (draws, tune, chains, sampler, n_restarts, seed, fast).
    spec : dict
        How to rebuild the model: ``{"model": name}`` or the CSV specification.
    predictions : DataFrame
    scores : dict
        Held-out scores (regression: RMSE and mean log predictive density; classification:
        accuracy, log-loss and Brier score), empty without held-out data.
    seconds : dict
        Wall time by stage.
    defaults : dict
        The settings the model would have used without overrides (``fast`` or ``full``); the
        report marks every setting that differs from them.
    created : str
        When the fit was made (ISO 8601, local time with UTC offset).
    """

    name: str
    task: str
    method: str
    model: Any
    data: Dataset
    fit: Any
    settings: dict
    spec: dict
    predictions: pd.DataFrame = field(default_factory=pd.DataFrame)
    scores: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)
    defaults: dict = field(default_factory=dict)
    created: str = ""

    @property
    def is_mcmc(self) -> bool:
        """Whether the fit is NUTS draws: ``method`` is one of the model's sampling methods (the
        protocol's default, ``"nuts"``, when no model is attached)."""
        return self.method in getattr(self.model, "sampling_methods", GPModel.sampling_methods)


def _resolve(model: str | DeclaredModel | CSVModel):
    if isinstance(model, str):
        return load_model(model)
    return model


def _default_settings(decl, fast: bool) -> dict:
    """The settings of ``decl`` without overrides (sampler ``auto``, seed 0)."""
    out = {**_DEFAULTS["fast" if fast else "full"], **decl.settings(fast)}
    out.update(sampler="auto", seed=0, fast=bool(fast))
    return out


def run(
    model: str | DeclaredModel | CSVModel,
    method: str | None = None,
    *,
    fast: bool = False,
    draws: int | None = None,
    tune: int | None = None,
    chains: int | None = None,
    sampler: str = "auto",
    n_restarts: int | None = None,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    progressbar: bool = False,
) -> FitResult:
    """Fit a declared model (by name) or a :class:`CSVModel` and predict.

    Parameters
    ----------
    model : str, DeclaredModel or CSVModel
    method : str, optional
        One of the model's methods (``"nuts"``, ``"map"``, ``"laplace"``, ``"ep"``,
        ``"latent"``: the model's ``fit_methods``); defaults to the model's first.
    fast : bool
        The model's fast settings (smaller data and fewer draws, for tests and demonstrations).
    draws, tune, chains, sampler, n_restarts, seed
        Override the model's settings.
    progress : callable, optional
        Called with a one-line message at each stage.
    progressbar : bool
        PyMC's / nutpie's progress bar while sampling.
    """
    say = progress or (lambda msg: None)
    decl = _resolve(model)
    method = method or decl.methods[0]
    if method not in decl.methods:
        raise ValueError(
            f"model {decl.name!r} supports --method {', '.join(decl.methods)}, not {method!r}"
        )
    defaults = _default_settings(decl, fast)
    settings = dict(defaults)
    for key, value in (("draws", draws), ("tune", tune), ("chains", chains)):
        if value is not None:
            settings[key] = value
    if n_restarts is not None:
        settings["n_restarts"] = n_restarts
    settings.update(sampler=sampler, seed=int(seed), fast=bool(fast))
    for key in ("draws", "tune", "chains", "n_restarts"):
        if int(settings[key]) < (1 if key != "tune" else 0):
            raise ValueError(f"{key} must be positive, got {settings[key]}")
    seconds: dict[str, float] = {}

    t0 = time.perf_counter()
    say(f"loading data for {decl.name}")
    data = decl.load_data(fast=fast)
    gp = decl.build(data, method)
    seconds["build"] = time.perf_counter() - t0
    n, d = np.shape(data.X_train)[0], np.shape(data.X_train)[-1]
    say(f"built {type(gp).__name__} on n={n}, D={d}; fitting by {method}")

    t0 = time.perf_counter()
    if method in gp.sampling_methods:
        options = {"draws": int(settings["draws"]), "tune": int(settings["tune"]),
                   "chains": int(settings["chains"]), "sampler": sampler,
                   "progressbar": progressbar}  # fmt: skip
    else:  # a type-II fit
        options = {"n_restarts": int(settings["n_restarts"])}
    fit = gp.fit(method, random_seed=int(seed), **options)
    seconds["fit"] = time.perf_counter() - t0
    say(f"fitted in {seconds['fit']:.1f} s; predicting")

    t0 = time.perf_counter()
    spec = decl.spec() if isinstance(decl, CSVModel) else {"model": decl.name}
    result = FitResult(decl.name, decl.task, method, gp, data, fit, settings, spec)
    result.defaults = defaults
    result.created = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    result.predictions, result.scores = _predict(result)
    seconds["predict"] = time.perf_counter() - t0
    result.seconds = seconds
    return result


def _predict(res: FitResult) -> tuple[pd.DataFrame, dict]:
    data, gp, fit = res.data, res.model, res.fit
    frames, scores = [], {}
    parts = [("test", data.X_test, data.y_test), ("new", data.X_new, None)]
    if data.X_test is None and data.X_new is None:
        parts = [("train", data.X_train, data.y_train)]
    for split, X, y in parts:
        if X is None:
            continue
        X2 = np.asarray(X, float).reshape(len(X), -1)
        df = pd.DataFrame(X2, columns=data.feature_names)
        df.insert(0, "split", split)
        for name, column in gp.prediction_columns(X2, fit).items():
            df[name] = column
        if y is not None:
            y = np.asarray(y)
            df[data.target_name] = y
            if split == "test":
                scores.update(gp.scores(y, df))
        frames.append(df)
    if scores:
        scores["n_test"] = len(data.y_test)
    return pd.concat(frames, ignore_index=True), scores


# ------------------------------------------------------------------------------- saving
def _point_dataset(res: FitResult):
    import xarray as xr

    fit = res.fit
    ds = xr.Dataset()
    n_features = len(res.data.feature_names)
    for name, value in fit.params.items():
        v = np.asarray(value, float)
        dims = ("feature",) if v.ndim == 1 and v.size == n_features else _own_dims(name, v)
        ds[name] = xr.DataArray(v, dims=dims)
    if "feature" in ds.dims:
        ds = ds.assign_coords(feature=res.data.feature_names)
    for name, value in res.model.saved_arrays(fit).items():
        v = np.asarray(value, float)
        ds[_ARRAY + name] = xr.DataArray(v, dims=_own_dims(_ARRAY + name, v))
    ds.attrs.update(
        method=res.method,
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


def _own_dims(name: str, v: np.ndarray) -> tuple[str, ...]:
    """Dimension names of an array that has no named axis: ``name_0``, ``name_1``, …"""
    return tuple(f"{name}_{i}" for i in range(v.ndim))


def _fit_record(res: FitResult, report_ok: bool) -> dict:
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
        "scores": res.scores,
        "seconds": res.seconds,
        "report": REPORT if report_ok else None,
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
        record["fit"] = _fit_details(res.fit)
    return record


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


def _fit_details(fit) -> dict:
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
        }
        for r in (fit.restarts or [])
    ]
    return out


def _with_details(fit, details: dict | None):
    """``fit`` with the attributes saved by :func:`_fit_details` restored."""
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
        )
        for r in details.get("restarts", [])
    ]
    kept = {k: _from_json(v) for k, v in details.items() if k in names}
    return dataclasses.replace(fit, restarts=restarts, **kept)


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def make_report(res: FitResult):
    """The diagnostic report of a result (:func:`bayes_gp.report.report`)."""
    from bayes_gp.report import report

    X_new = res.data.X_new
    return report(
        res.fit,
        model=res.model,
        X_new=X_new,
        title=f"{res.name}: {res.method}",
        provenance=provenance(res),
    )


#: The settings that matter for each kind of method (data-size options are always shown).
_NUTS_KEYS, _POINT_KEYS = ("draws", "tune", "chains", "sampler"), ("n_restarts",)
_FLAGS = {"n_restarts": "--restarts"}


def provenance(res: FitResult) -> list[tuple[str, object]]:
    """Rows ``(name, value)`` for the report: the data the fit used (source, rows, subset,
    preprocessing, fast mode) and its settings, each non-default one marked with its default.
    Built from what :func:`save` writes, so a reloaded fit gives the same rows."""
    data = res.data
    rows: list[tuple[str, object]] = [("data source", data.source)]
    if isinstance(res.spec, dict) and "model" in res.spec:
        rows.insert(0, ("declared model", f"{res.name} (models/{res.name}.py)"))
    rows.append(("training rows", int(np.shape(data.X_train)[0])))
    if data.y_test is not None:
        rows.append(("held-out rows (scored)", int(np.shape(data.y_test)[0])))
    if data.X_new is not None:
        rows.append(("new inputs (predicted)", int(np.shape(data.X_new)[0])))
    rows.append(("inputs", ", ".join(map(str, data.feature_names))))
    rows.append(("target", str(data.target_name)))
    for key, value in data.notes.items():
        rows.append((f"data: {str(key).replace('_', ' ')}", value))
    fast = bool(res.settings.get("fast", False))
    rows.append(
        ("fast mode", "yes (--fast: the model's smaller data and fewer draws)" if fast else "no")
    )
    rows.append(("method", res.method))
    skip = set(_POINT_KEYS if res.is_mcmc else _NUTS_KEYS) | {"fast"}
    changed = []
    for key, value in res.settings.items():
        if key in skip:
            continue
        default = res.defaults.get(key)
        text = str(value)
        if key in res.defaults and default != value:
            text += f" (default {default})"
            flag = _FLAGS.get(key, f"--{key.replace('_', '-')}")
            changed.append(f"{flag} {value}")
        rows.append((f"setting: {key}", text))
    rows.append(("non-default settings", " ".join(changed) if changed else "none"))
    if res.created:
        rows.append(("fitted", res.created))
    if res.seconds:
        rows.append(
            ("wall time (s)", ", ".join(f"{k} {float(v):.1f}" for k, v in res.seconds.items()))
        )
    return rows


def save(res: FitResult, out: str | os.PathLike, *, with_report: bool = True) -> list[Path]:
    """Write the result directory ``out`` atomically; returns the files written.

    Everything is written into a temporary sibling directory first, flushed to disk, and then
    renamed onto ``out`` (a previous ``out`` is moved aside first and removed afterwards). If
    anything fails, ``out`` keeps its previous content and the temporary directory is removed.
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
        report_ok = False
        if with_report:
            make_report(res).save(stage / REPORT)
            report_ok = True
        text = json.dumps(_fit_record(res, report_ok), indent=2, default=_json_default)
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
    if "model" in spec:
        decl = load_model(spec["model"])
    else:
        decl = CSVModel(
            spec["csv"], tuple(spec["x"]), spec["y"], spec["kernel"], spec["task"], spec["ard"],
            spec.get("likelihood"), spec.get("exposure"), spec.get("trials"),
        )  # fmt: skip
    data = decl.load_data(fast=bool(settings.get("fast", False)))
    gp = decl.build(data, method)
    post = out / POSTERIOR
    try:
        if method in gp.sampling_methods:
            fit = az.from_netcdf(post).load()  # read now: a damaged file fails here
            _check_posterior(fit, gp)
            jitter = fit["posterior"].attrs.get("bayes_gp_jitter")
            if jitter is not None:
                gp.set_jitter(float(jitter))  # the model the draws came from
        else:
            fit = _point_fit(xr.load_dataset(post), gp, method)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"cannot read {post}: {exc}") from None
    if method not in gp.sampling_methods:
        try:
            fit = _with_details(fit, record.get("fit"))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: damaged optimiser record ('fit'): {exc!r}") from None
    res = FitResult(decl.name, decl.task, method, gp, data, fit, settings, spec)
    res.scores = record.get("scores", {})
    res.seconds = record.get("seconds", {})
    res.defaults = record.get("defaults") or _default_settings(decl, bool(settings.get("fast")))
    res.created = str(record.get("created", ""))
    preds = out / PREDICTIONS
    if preds.exists():
        res.predictions = pd.read_csv(preds)
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


def describe(res: FitResult) -> str:
    """A few lines summarising a result (for the command line)."""
    lines = [f"{res.name}: {res.task}, {res.method}, n={np.shape(res.data.X_train)[0]}"]
    if res.is_mcmc:
        import arviz as az

        names = [n for n in res.model.hyperparameters if n in res.fit["posterior"]]
        s = az.summary(res.fit, var_names=names, round_to="none")
        cols = [c for c in s.columns if c in ("mean", "sd", "r_hat", "ess_bulk")]
        lines.append(s[cols].to_string(float_format=lambda v: f"{v:.4g}"))
        div = int(np.asarray(res.fit["sample_stats"]["diverging"]).sum())
        lines.append(f"divergences: {div}")
    else:
        for k, v in res.fit.params.items():
            lines.append(f"  {k} = {np.array2string(np.asarray(v), precision=4)}")
        lines.append(f"  log marginal likelihood = {res.fit.log_marginal_likelihood:.4f}")
    for k, v in res.scores.items():
        lines.append(f"  test {k} = {v:.4g}" if isinstance(v, float) else f"  test {k} = {v}")
    return "\n".join(lines)


def parse_columns(text: str) -> tuple[str, ...]:
    """``"a,b , c"`` → ``("a", "b", "c")``."""
    cols = tuple(c.strip() for c in text.split(",") if c.strip())
    if not cols:
        raise ValueError("--x needs at least one column name")
    return cols
