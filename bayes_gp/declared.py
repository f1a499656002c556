"""Declared models: ready-made GP models on real data, one module per model in ``models/``.

A declared model is a plain Python module that builds its model through the public API only
(:class:`~bayes_gp.GPRegression`, :class:`~bayes_gp.GPClassifier`, …). It defines

``TASK``
    ``"regression"``, ``"classification"`` or ``"counts"`` (a latent GP for count data).
``SUMMARY``
    One line for ``bayes-gp list``.
``METHODS``
    The inference methods it supports, the first being the default: a subset of the names in
    :data:`METHOD_TABLE`, the one vocabulary of :mod:`bayes_gp.inference.methods` (``"nuts"``,
    ``"nuts_joint"``, ``"map"``, ``"vi"``, ``"ep"``). The previous release's names
    (``"laplace"``, ``"latent"``, ``"nuts_laplace"``) are read by their new names for the model's
    ``TASK`` (:data:`~bayes_gp.inference.methods.RENAMED_BY_TASK`), with a ``FutureWarning``.
``SETTINGS``
    ``{"fast": {...}, "full": {...}}``: default ``draws``, ``tune``, ``chains``, ``n_restarts``,
    optionally NUTS's ``target_accept`` (0.9 if absent), and any data-size options passed to
    ``load_data``.
``load_data(fast: bool) -> Dataset``
    The data (offline: shipped in an installed package).
``build(data: Dataset, method: str) -> model``
    The model object (for EP a probit classifier, for instance).

:data:`METHOD_TABLE` is the one list of inference methods: the declared models, the CSV models
of :mod:`bayes_gp.workflow` and ``bayes-gp fit --method`` all take their names from it, and
:func:`choose_method` is the one check of a requested method against a model's.

The modules live in the top-level ``models/`` directory of a source checkout, or inside the
installed package as ``bayes_gp/_models`` (wheel builds copy them there); ``BAYES_GP_MODELS``
points to another directory.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import numpy as np

from bayes_gp._arguments import ArgumentError
from bayes_gp.inference.methods import (
    LATENT_RENAMED,
    METHOD_TABLE,
    METHODS,
    NUTS_JOINT,
    RENAMED_BY_TASK,
    canonical_method,
)

__all__ = [
    "Dataset",
    "DeclaredModel",
    "METHOD_TABLE",
    "METHODS",
    "choose_method",
    "formula_model",
    "models_dir",
    "list_models",
    "load_model",
]

TASKS = ("regression", "classification", "counts")
#: Old method names the command line still accepts (read per model by
#: :data:`~bayes_gp.inference.methods.RENAMED_BY_TASK`).
RENAMED_METHODS = tuple(sorted({old for m in RENAMED_BY_TASK.values() for old in m}))
_REQUIRED = ("TASK", "SUMMARY", "METHODS", "SETTINGS", "load_data", "build")


@dataclass(frozen=True)
class Dataset:
    """Training data, optional held-out data and an optional prediction grid.

    Attributes
    ----------
    X_train, y_train : ndarray
        Training inputs ``(n, D)`` and targets / labels: ``(n,)``, or ``(n, P)`` for a model of
        P outputs (:class:`~bayes_gp.MultiOutputGP`; ``NaN`` where an output is not observed).
    X_test, y_test : ndarray or None
        Held-out data (canonical test split), scored in the report and the predictions file;
        ``y_test`` has the layout of ``y_train`` (``(m,)`` or ``(m, P)``).
    X_new : ndarray or None
        Inputs at which to predict (e.g. a forecast grid); predictive bands are drawn there.
    feature_names : list of str
    target_name : str or sequence of str
        The target's name for a 1-D ``y_train``; for an ``(n, P)`` one the P outputs' names, in
        column order (stored as a tuple). :attr:`target_names` is always the list of names.
    source : str
        Where the data comes from (package, data set name, reference).
    notes : dict
        Anything else worth recording (preprocessing, units, subsampling).
    size_train : ndarray or None
        Per training row, the exposure (Poisson / negative-binomial counts) or the number of
        trials (binomial) of a :class:`~bayes_gp.LatentGP`.
    size_name : str or None
        The name of that column (the workflow's predictions files name it so, and new data
        must have it); ``None``: the likelihood's word, ``exposure`` or ``trials``.
    """

    X_train: np.ndarray
    y_train: np.ndarray
    feature_names: list[str]
    target_name: str | Sequence[str]
    source: str
    X_test: np.ndarray | None = None
    y_test: np.ndarray | None = None
    X_new: np.ndarray | None = None
    notes: dict = field(default_factory=dict)
    size_train: np.ndarray | None = None
    size_name: str | None = None

    def __post_init__(self):
        n, d = np.shape(self.X_train)[0], np.shape(self.X_train)[-1]
        if np.shape(self.y_train)[0] != n:
            raise ValueError(f"X_train has {n} rows but y_train has {np.shape(self.y_train)[0]}")
        if len(self.feature_names) != (d if np.ndim(self.X_train) == 2 else 1):
            raise ValueError("feature_names must name every column of X_train")
        if (self.X_test is None) != (self.y_test is None):
            raise ValueError("X_test and y_test go together")
        self._check_targets()

    def _check_targets(self) -> None:
        """``y_train`` is ``(n,)`` with one ``target_name``, or ``(n, P)`` with P distinct output
        names; ``y_test`` has the same layout and as many rows as ``X_test``."""
        ndim, name = np.ndim(self.y_train), self.target_name
        if ndim == 1:
            if not isinstance(name, str):
                raise ValueError(
                    f"y_train is 1-D: target_name must be one name (a str), got {name!r}"
                )
        elif ndim == 2:
            P = np.shape(self.y_train)[1]
            names = [name] if isinstance(name, str) else list(name)
            if (
                len(names) != P
                or len(set(names)) != P
                or not all(isinstance(n, str) and n for n in names)
            ):
                raise ValueError(
                    f"y_train has {P} columns (outputs): target_name must be a sequence of "
                    f"{P} distinct, non-empty output names in column order, got {name!r}"
                )
            object.__setattr__(self, "target_name", tuple(names))
        else:
            raise ValueError(
                "y_train must be 1-D (n,) or 2-D (n, P outputs), got shape "
                f"{np.shape(self.y_train)}"
            )
        if self.y_test is not None:
            m, shape = np.shape(self.X_test)[0], np.shape(self.y_test)
            want = (m, *np.shape(self.y_train)[1:])
            if shape != want:
                raise ValueError(
                    f"y_test must have shape {want} (X_test's {m} rows, the columns of y_train), "
                    f"got {shape}"
                )

    @property
    def target_names(self) -> list[str]:
        """The names of the target's columns: ``[target_name]`` for a 1-D ``y_train``, the
        P output names for an ``(n, P)`` one."""
        name = self.target_name
        return [name] if isinstance(name, str) else list(name)


@dataclass(frozen=True)
class DeclaredModel:
    """A loaded declared-model module."""

    name: str
    module: ModuleType
    path: Path

    @property
    def task(self) -> str:
        return self.module.TASK

    @property
    def summary(self) -> str:
        return self.module.SUMMARY

    @property
    def renamed(self) -> Mapping[str, str]:
        """The previous release's method names, old -> new: a latent GP's (a model listing
        ``"nuts_joint"``, or ``"latent"`` in the old vocabulary, outside classification: a
        Student-t regression is one too) or the task's
        (:data:`~bayes_gp.inference.methods.RENAMED_BY_TASK`)."""
        if self.task != "classification" and {"latent", NUTS_JOINT} & set(self.module.METHODS):
            return LATENT_RENAMED
        return RENAMED_BY_TASK.get(self.task, {})

    @property
    def methods(self) -> tuple[str, ...]:
        """The module's ``METHODS`` in the current vocabulary (an old name read by its new)."""
        return tuple(self.renamed.get(m, m) for m in self.module.METHODS)

    def settings(self, fast: bool) -> dict:
        return dict(self.module.SETTINGS["fast" if fast else "full"])

    def load_data(self, fast: bool = False) -> Dataset:
        data = self.module.load_data(fast=fast)
        if not isinstance(data, Dataset):
            raise TypeError(f"model {self.name!r}: load_data must return a bayes_gp Dataset")
        return data

    def build(self, data: Dataset, method: str | None = None):
        """The model object of ``data`` for ``method`` (default: the first of :attr:`methods`).

        Raises
        ------
        ArgumentError
            If the model does not support ``method`` (:func:`choose_method`).
        """
        method = choose_method(self.name, self.methods, method, self.renamed)
        # a module that still lists a method by its old name is passed that name
        own = {self.renamed.get(m, m): m for m in self.module.METHODS}
        return self.module.build(data, method=own[method])


def choose_method(
    model: str,
    supported: Sequence[str],
    method: str | None,
    renamed: Mapping[str, str] | None = None,
) -> str:
    """The method to fit ``model`` by: ``method``, or the first of ``supported`` if none is given.
    An old name in ``renamed`` (old -> new) is read by its new name with a ``FutureWarning``
    (:func:`~bayes_gp.inference.methods.canonical_method`).

    Parameters
    ----------
    model : str
        The model's name, for the message.
    supported : sequence of str
        The model's methods (names in :data:`METHOD_TABLE`), the default first.
    method : str or None

    Returns
    -------
    str

    Raises
    ------
    ArgumentError
        About the parameter ``method``, if it is not one of ``supported``: "model 'pima' fits
        by `method` 'map', 'nuts', 'ep'; not 'vi'".
    """
    method = method or supported[0]
    method = canonical_method(f"model {model!r}", method, renamed or {})
    if method not in supported:
        raise ArgumentError(
            "model {model!r} fits by {method:" + ",".join(supported) + "}; not {value!r}",
            ("method",),
            model=model,
            value=method,
        )
    return method


def formula_model(formula: str, data: Dataset, response: str, **options):
    """A formula model (:func:`bayes_gp.Model`) of a declared ``Dataset`` that also reads new
    inputs laid out as ``data.X_train`` (the workflow passes those arrays).

    The model is fitted on the frame of ``data.X_train`` (columns ``data.feature_names``, some
    of them perhaps not in the formula: a censoring column named by ``censored=``) and
    ``data.y_train`` (column ``response``). A formula model reads an array as its *design*
    matrix, whose columns are the formula's (a ``by=`` factor adds a group-code column); this
    one reads an array of ``len(data.feature_names)`` columns as a row of the data set instead,
    when the design has another number of columns. A data set whose columns are the design's,
    in its order, needs nothing: :func:`formula_model` refuses one of the same width in another
    order, which would be read column by column as the design.

    Parameters
    ----------
    formula : str
    data : Dataset
    response : str
        The name of the formula's response.
    **options
        :func:`bayes_gp.Model`'s (``family``, ``censored``, ``priors``, ...).

    Raises
    ------
    ValueError
        ``data``'s columns have the design's number but not its names in its order.
    """
    import pandas as pd

    from bayes_gp.formula.model import engine_arguments

    names = list(data.feature_names)
    frame = pd.DataFrame(np.asarray(data.X_train, float), columns=names)
    frame[response] = np.asarray(data.y_train, float)
    if "censored" in options and isinstance(options["censored"], str):
        frame[options["censored"]] = frame[options["censored"]].astype(int)
    cls, args, kwargs = engine_arguments(formula, frame, **options)

    class DatasetFormula(cls):
        def _design_of(self, new_data):
            width = np.shape(new_data)[-1] if np.ndim(new_data) == 2 else None
            if not hasattr(new_data, "keys") and width == len(names) != self.X.shape[1]:
                new_data = pd.DataFrame(np.asarray(new_data, float), columns=names)
            return super()._design_of(new_data)

    DatasetFormula.__name__ = DatasetFormula.__qualname__ = cls.__name__
    model = DatasetFormula(*args, **kwargs)
    if len(names) == model.X.shape[1] and names != list(model.feature_names):
        raise ValueError(
            f"the data set's columns {names} are as many as the formula's design columns "
            f"{list(model.feature_names)} but not in their order: order them as the design"
        )
    return model


def models_dir() -> Path:
    """The directory holding the declared-model modules."""
    env = os.environ.get("BAYES_GP_MODELS")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent
    for cand in (here / "_models", here.parent / "models"):
        if cand.is_dir():
            return cand
    raise FileNotFoundError(
        "no declared models found: expected bayes_gp/_models (installed wheel) or models/ next to "
        "the bayes_gp package (source checkout); set BAYES_GP_MODELS to their directory"
    )


def list_models() -> list[str]:
    """Names of the declared models (module files not starting with ``_``)."""
    return sorted(p.stem for p in models_dir().glob("*.py") if not p.stem.startswith("_"))


def load_model(name: str) -> DeclaredModel:
    """Import the declared model ``name`` (a module of :func:`models_dir`) and check it."""
    names = list_models()
    if name not in names:
        raise ValueError(f"unknown model {name!r}; declared models: {', '.join(names)}")
    path = models_dir() / f"{name}.py"
    mod_name = f"bayes_gp_models.{name}"
    module = sys.modules.get(mod_name)
    if module is None or Path(module.__file__).resolve() != path.resolve():
        spec = importlib.util.spec_from_file_location(mod_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[mod_name]
            raise
    missing = [a for a in _REQUIRED if not hasattr(module, a)]
    if missing:
        raise TypeError(f"declared model {name!r} ({path}) lacks {missing}")
    if module.TASK not in TASKS:
        raise TypeError(f"declared model {name!r}: TASK must be one of {TASKS}")
    bad = [m for m in module.METHODS if m not in METHODS]
    if bad or not module.METHODS:
        raise TypeError(f"declared model {name!r}: METHODS must be a non-empty subset of {METHODS}")
    return DeclaredModel(name, module, path)
