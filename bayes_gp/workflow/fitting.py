"""Fitting: a declared model or a CSV model, its data, one inference method, predictions.

:func:`run` resolves the model, loads its data (unless given), builds the model for the method,
fits it with the settings of the method's kind (:data:`FIT_SETTINGS`) and predicts
(:func:`bayes_gp.workflow.scoring.predict`); the result is a :class:`FitResult`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

from bayes_gp._arguments import ArgumentError, renamed_argument
from bayes_gp.declared import Dataset, DeclaredModel, choose_method
from bayes_gp.inference.sampling import NUTSSampling
from bayes_gp.protocol import GPModel
from bayes_gp.workflow.scoring import predict
from bayes_gp.workflow.spec import DEFAULT_SETTINGS, CSVModel, resolve, spec_of

__all__ = ["FitResult", "FIT_SETTINGS", "fit_kind", "default_settings", "run", "describe"]

#: The settings each kind of fit takes: NUTS (a model's ``sampling_methods``) its draws, tuning
#: steps, chains, backend and target acceptance rate, type-II fits (every other method) their
#: optimiser restarts.
FIT_SETTINGS = MappingProxyType(
    {
        "sampling": ("draws", "tune", "chains", "sampler", "target_accept"),
        "type-II": ("n_restarts",),
    }
)
#: The type of each setting that is not an integer.
_CAST = MappingProxyType({"sampler": str, "target_accept": float})
#: The lowest value of each integer setting.
_LOWEST = MappingProxyType({"draws": 1, "tune": 0, "chains": 1, "n_restarts": 1})


def fit_kind(gp, method: str) -> str:
    """The kind of fit ``method`` is for ``gp``, a key of :data:`FIT_SETTINGS`: ``"sampling"``
    if it is one of the model's sampling methods (the protocol's default, ``"nuts"``, when the
    model is ``None``), else ``"type-II"``."""
    sampling = getattr(gp, "sampling_methods", GPModel.sampling_methods)
    return "sampling" if method in sampling else "type-II"


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
    new_predictions : DataFrame or None
        Predictions at new rows (:meth:`predict`) that :func:`~bayes_gp.workflow.save` writes
        as ``predictions_new.csv`` (``bayes-gp fit --predict FILE`` sets it).
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
    new_predictions: pd.DataFrame | None = None

    def predict(self, new_data, where: str | None = None) -> pd.DataFrame:
        """Predictions at new rows, on the scales of ``predictions.csv``.

        Parameters
        ----------
        new_data : DataFrame, or path to a CSV file with a header row
            The model's input columns as in the training data (a formula model: the columns
            its formula uses, groups included) and, where the model has one, the exposure or
            trials column by its name in the training data; other columns are kept as they
            are.
        where : str, optional
            How errors name the data (default: the file, or "the new data").

        Returns
        -------
        DataFrame
            ``new_data``'s columns, then the model's prediction columns
            (:func:`~bayes_gp.workflow.scoring.columns_at`: ``mean``, ``sd`` or ``sd_f`` /
            ``sd_y``, ``lower_94``, ``upper_94`` of :math:`y_*` at each row's exposure or
            trials, ``mean_per_unit_exposure`` / ``mean_per_trial``, ``latent_mean``, ... as
            the model has them). Set :attr:`new_predictions` to it to have
            :func:`~bayes_gp.workflow.save` write it.

        Raises
        ------
        ValueError
            For a file that is missing or not CSV, missing columns (named), a value that is not
            a number (column and row named), rows with missing values.
        """
        from bayes_gp.workflow.scoring import predict_new
        from bayes_gp.workflow.spec import read_csv

        if isinstance(new_data, pd.DataFrame):
            frame, where = new_data, where or "the new data"
        else:
            frame, where = read_csv(str(new_data)), where or str(new_data)
        return predict_new(self.model, self.data, self.fit, frame, where)

    @property
    def kind(self) -> str:
        """``"sampling"`` or ``"type-II"`` (:func:`fit_kind`)."""
        return fit_kind(self.model, self.method)

    @property
    def is_mcmc(self) -> bool:
        """Whether the fit is NUTS draws: ``method`` is one of the model's sampling methods (the
        protocol's default, ``"nuts"``, when no model is attached)."""
        return self.kind == "sampling"


def default_settings(decl: DeclaredModel | CSVModel, fast: bool) -> dict:
    """The settings of ``decl`` without overrides (sampler ``auto``, seed 0).

    Parameters
    ----------
    decl : DeclaredModel or CSVModel
    fast : bool
        The model's fast settings rather than its full ones.

    Returns
    -------
    dict
    """
    out = {
        "target_accept": NUTSSampling.default_target_accept,
        **DEFAULT_SETTINGS["fast" if fast else "full"],
        **decl.settings(fast),
    }
    out.update(sampler="auto", seed=0, fast=bool(fast))
    return out


@renamed_argument("seed", "random_seed")
def run(
    model: str | DeclaredModel | CSVModel,
    method: str | None = None,
    *,
    fast: bool = False,
    draws: int | None = None,
    tune: int | None = None,
    chains: int | None = None,
    sampler: str = "auto",
    target_accept: float | None = None,
    n_restarts: int | None = None,
    random_seed: int = 0,
    progress: Callable[[str], None] | None = None,
    progressbar: bool = False,
    data: Dataset | None = None,
) -> FitResult:
    """Fit a declared model (by name) or a :class:`CSVModel` and predict.

    Parameters
    ----------
    model : str, DeclaredModel or CSVModel
    method : str, optional
        One of the model's methods (``model.methods``, names in
        :data:`bayes_gp.declared.METHOD_TABLE`); defaults to the model's first.
    fast : bool
        The model's fast settings (smaller data and fewer draws, for tests and demonstrations).
    draws, tune, chains, sampler, target_accept, n_restarts, random_seed
        Override the model's settings (``target_accept``: NUTS's target acceptance rate, in
        [0.5, 1); the model's default is 0.9 unless the declared model sets another).
    progress : callable, optional
        Called with a one-line message at each stage.
    progressbar : bool
        PyMC's / nutpie's progress bar while sampling.
    data : Dataset, optional
        The model's data, already loaded (``model.load_data(fast)``, as the command line does to
        report bad data before anything else): it is not read again.

    Returns
    -------
    FitResult

    Raises
    ------
    ArgumentError
        For a method the model does not support (:func:`~bayes_gp.declared.choose_method`, the
        check the model's ``build`` makes too, here before any data is read) or a setting below
        its lowest value; both name the parameter.
    """
    say = progress or (lambda msg: None)
    decl = resolve(model)
    method = choose_method(decl.name, decl.methods, method, decl.renamed)  # before data is read
    defaults = default_settings(decl, fast)
    settings = dict(defaults)
    for key, value in (("draws", draws), ("tune", tune), ("chains", chains)):
        if value is not None:
            settings[key] = value
    if n_restarts is not None:
        settings["n_restarts"] = n_restarts
    if target_accept is not None:
        settings["target_accept"] = target_accept
    settings.update(sampler=sampler, seed=int(random_seed), fast=bool(fast))
    for key, lowest in _LOWEST.items():
        if int(settings[key]) < lowest:
            raise ArgumentError(
                "{" + key + "} must be positive, got {value}", (key,), value=settings[key]
            )
    if not 0.5 <= float(settings["target_accept"]) < 1.0:
        raise ArgumentError(
            "{target_accept} must be in [0.5, 1), got {value}",
            ("target_accept",),
            value=settings["target_accept"],
        )
    seconds: dict[str, float] = {}

    t0 = time.perf_counter()
    say(f"loading data for {decl.name}")
    if data is None:
        data = decl.load_data(fast=fast)
    gp = decl.build(data, method)
    seconds["build"] = time.perf_counter() - t0
    n, d = np.shape(data.X_train)[0], np.shape(data.X_train)[-1]
    say(f"built {type(gp).__name__} on n={n}, D={d}; fitting by {method}")

    t0 = time.perf_counter()
    kind = fit_kind(gp, method)
    options = {k: _CAST.get(k, int)(settings[k]) for k in FIT_SETTINGS[kind]}
    if kind == "sampling":
        options["progressbar"] = progressbar
    fit = gp.fit(method, random_seed=int(random_seed), **options)
    seconds["fit"] = time.perf_counter() - t0
    say(f"fitted in {seconds['fit']:.1f} s; predicting")

    t0 = time.perf_counter()
    result = FitResult(decl.name, decl.task, method, gp, data, fit, settings, spec_of(decl))
    result.defaults = defaults
    result.created = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    result.predictions, result.scores = predict(gp, data, fit)
    seconds["predict"] = time.perf_counter() - t0
    result.seconds = seconds
    return result


def describe(res: FitResult) -> str:
    """A few lines summarising a result (the command line prints them after a fit).

    Parameters
    ----------
    res : FitResult

    Returns
    -------
    str
        The model, task, method and size; the posterior summary and divergences of a NUTS fit
        or the point estimate and log marginal likelihood of a type-II fit; the held-out scores.
    """
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
