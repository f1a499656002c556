"""Every fit of every model class on data that provoke edge cases can be used (issue 37).

Data sets: separable classes, a constant input column, duplicated inputs, a single class per
group, n = 2, inputs 1e-15 apart, outputs of scale 1e8. Models: the workflow's model classes
(GPRegression, GPClassifier by Laplace and EP, the Poisson latent GP by MAP and VI, the Student-t latent GP,
formula models with a GP term and a group intercept, Gaussian and Bernoulli, and with one GP per
group -- the hierarchical models, Gaussian and Poisson) by their type-II fits; and the classes a
CSV specification cannot reach, as a user reaches them through the workflow: a declared model
(a module in ``$BAYES_GP_MODELS``, :mod:`bayes_gp.declared`) on the data set's CSV file --
MultiOutputGP (outputs y and count) and DeepKernelRegression by MAP, and
HeteroscedasticGPRegression, which has no type-II fit: asked for one it must refuse. The
rule: ``workflow.run`` either fits, or refuses with a ``ValueError`` / ``TypeError`` whose
message says what is wrong (a documented refusal at fit time); a fit it returns predicts at new
rows, is saved with its report, reloads, and predicts the same numbers again. No other exception,
and no non-finite prediction.

Here each fit meets one data set and each data set at least one fit;
``validation/tests/test_edge_cases_long.py`` runs the whole grid, and NUTS (the heteroscedastic
GP's only fit among them).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayes_gp import workflow
from bayes_gp.workflow import CSVModel, FormulaCSVModel

CASES = (
    "separable", "constant_column", "duplicated_inputs", "single_class_per_group", "n2",
    "inputs_1e-15_apart", "outputs_1e8",
)  # fmt: skip


def edge_frame(case: str) -> pd.DataFrame:
    """The data set ``case``: inputs ``x1``, ``x2``, a group ``g``, and responses ``y``
    (real), ``yb`` (0/1) and ``count``."""
    rng = np.random.default_rng(CASES.index(case))
    n = 2 if case == "n2" else 30
    x1 = np.linspace(0.0, 10.0, n)
    if case == "duplicated_inputs":
        x1 = np.repeat(np.linspace(0.0, 10.0, n // 3), 3)
    if case == "inputs_1e-15_apart":
        x1 = 1.0 + 1e-15 * np.arange(n)
    x2 = np.ones(n) if case == "constant_column" else rng.uniform(0.0, 1.0, n)
    g = np.array(["a", "b", "c"])[np.arange(n) % 3]
    f = np.sin(x1)
    yb = (f > 0).astype(int)
    if case == "n2":
        yb = np.array([0, 1])
    if case == "single_class_per_group":
        yb = (g == "a").astype(int)
    if case == "inputs_1e-15_apart":  # both classes at (numerically almost) one input
        yb = np.arange(n) % 2
    y = f + 0.1 * rng.standard_normal(n)
    if case == "separable":
        y = 3.0 * yb - 1.5 + 0.01 * rng.standard_normal(n)
    if case == "outputs_1e8":
        y = 1e8 * y
    count = rng.poisson(np.exp(1.0 + f))
    return pd.DataFrame({"x1": x1, "x2": x2, "g": g, "y": y, "yb": yb, "count": count})


#: name -> (the model on a CSV file, method)
FITS: dict[str, tuple[Callable[[str], object], str]] = {
    "regression-map": (lambda p: CSVModel(p, ("x1", "x2"), "y"), "map"),
    "classifier-laplace": (
        lambda p: CSVModel(p, ("x1", "x2"), "yb", task="classification"), "map"
    ),
    "classifier-ep": (lambda p: CSVModel(p, ("x1", "x2"), "yb", task="classification"), "ep"),
    "poisson-map": (lambda p: CSVModel(p, ("x1", "x2"), "count", likelihood="poisson"), "map"),
    "poisson-vi": (lambda p: CSVModel(p, ("x1", "x2"), "count", likelihood="poisson"), "vi"),
    "formula-gaussian-map": (lambda p: FormulaCSVModel(p, "y ~ gp(x1) + (1|g)"), "map"),
    "formula-bernoulli-map": (
        lambda p: FormulaCSVModel(p, "yb ~ gp(x1) + (1|g)", family="bernoulli"), "map"
    ),
    "student_t-map": (lambda p: CSVModel(p, ("x1", "x2"), "y", likelihood="student_t"), "map"),
    "formula-by-group-map": (lambda p: FormulaCSVModel(p, "y ~ gp(x1, by=g)"), "map"),
    "formula-poisson-by-group-map": (
        lambda p: FormulaCSVModel(p, "count ~ gp(x1, by=g)", family="poisson"), "map"
    ),
}
FIT_NAMES = tuple(FITS)


def check_edge_case(case: str, fit: str, tmp_path: Path, **settings) -> str:
    """Fit (``settings``: of ``workflow.run``), predict, save with the report, reload and
    predict again; ``"refused"`` when the fit was refused at fit time with a clear message,
    else ``"fitted"``."""
    frame = edge_frame(case)
    path = tmp_path / f"{case}.csv"
    frame.to_csv(path, index=False)
    make, method = FITS[fit]
    return check_usable(make(str(path)), method, frame, tmp_path / f"{case}-{fit}", settings)


def check_usable(model, method: str, frame: pd.DataFrame, out: Path, settings: dict) -> str:
    """The rule for ``model`` (what ``workflow.run`` takes) fitted by ``method`` on ``frame``:
    refused clearly at fit time (``"refused"``), or a fit that predicts finite numbers at new
    rows, is saved to ``out`` with its report, reloads and predicts the same (``"fitted"``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence and degenerate-fit warnings are expected
        try:
            res = workflow.run(model, method, **{"n_restarts": 1, "random_seed": 1, **settings})
        except (ValueError, TypeError) as exc:
            message = str(exc)
            assert len(message) > 20 and "Traceback" not in message, message
            return "refused"
        new = frame.iloc[: min(3, len(frame))].drop(columns=["y", "yb", "count"])
        first = res.predict(new)
        numeric = first.select_dtypes("number")
        assert np.isfinite(numeric.to_numpy()).all(), first
        workflow.save(res, out, with_report=True)
        assert (out / "report.html").stat().st_size > 1000
        again = workflow.load(out)
        pd.testing.assert_frame_equal(again.predict(new), first, rtol=1e-8)
        pd.testing.assert_frame_equal(again.predictions, res.predictions, rtol=1e-8)
    return "fitted"


#: A declared model's module (:mod:`bayes_gp.declared`) on an edge-case CSV file: the class
#: ``cls`` built by ``build`` from ``X`` (the inputs ``features``, a DataFrame) and ``data``
#: (its ``y_train``: the column of the one target, or the columns of the ``targets``).
DECLARED_SOURCE = '''
import pandas as pd

from bayes_gp import {cls}
from bayes_gp.declared import Dataset

TASK = "regression"
SUMMARY = "edge case {case}: {cls} by {method}"
METHODS = ({method!r},)
SETTINGS = {{"fast": {{}}, "full": {{}}}}
PATH, FEATURES, TARGETS = {path!r}, {features!r}, {targets!r}


def load_data(fast=False):
    frame = pd.read_csv(PATH)
    y = frame[list(TARGETS)].to_numpy(float)
    one = len(TARGETS) == 1
    return Dataset(frame[list(FEATURES)].to_numpy(float), y[:, 0] if one else y, list(FEATURES),
                   TARGETS[0] if one else TARGETS, PATH)


def build(data, method):
    X = pd.DataFrame(data.X_train, columns=data.feature_names)
    return {build}
'''

#: The classes a CSV specification cannot reach: name -> (class, inputs, outputs, how the
#: declared model builds it); a small network for the deep kernel, so that a fit takes seconds.
DECLARED_MODELS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...], str]] = {
    "multioutput": (
        "MultiOutputGP", ("x1", "x2"), ("y", "count"),
        "MultiOutputGP(X, pd.DataFrame(data.y_train, columns=data.target_names))",
    ),
    "dkl": (
        "DeepKernelRegression", ("x1", "x2"), ("y",),
        "DeepKernelRegression(X, data.y_train, hidden=(3,), features=1)",
    ),
    "hetero": (
        "HeteroscedasticGPRegression", ("x1",), ("y",),
        "HeteroscedasticGPRegression(X, data.y_train, 'expquad', 'expquad')",
    ),
}  # fmt: skip
#: name -> (declared model, method): every type-II fit each class offers (``fit_methods``); the
#: heteroscedastic GP offers none (NUTS only) and must refuse ``"map"`` clearly.
DECLARED_FITS: dict[str, tuple[str, str]] = {
    "multioutput-map": ("multioutput", "map"),
    "dkl-map": ("dkl", "map"),
    "hetero-map": ("hetero", "map"),
}
DECLARED_NAMES = tuple(DECLARED_FITS)


def check_declared_edge_case(case: str, fit: str, tmp_path: Path, monkeypatch, **settings) -> str:
    """:func:`check_edge_case` for a fit of :data:`DECLARED_FITS`: its declared model on the
    data set's CSV file, in a models directory that ``BAYES_GP_MODELS`` names, run, saved and
    reloaded by that name (as ``bayes-gp fit NAME`` does)."""
    frame = edge_frame(case)
    path = tmp_path / f"{case}.csv"
    frame.to_csv(path, index=False)
    kind, method = DECLARED_FITS[fit]
    cls, features, targets, build = DECLARED_MODELS[kind]
    name = f"edge_{fit}_{case}".replace("-", "_")
    models = tmp_path / "models"
    models.mkdir(exist_ok=True)
    source = DECLARED_SOURCE.format(
        cls=cls, case=case, method=method, path=str(path), features=features, targets=targets,
        build=build,
    )  # fmt: skip
    (models / f"{name}.py").write_text(source)
    monkeypatch.setenv("BAYES_GP_MODELS", str(models))
    try:
        return check_usable(name, method, frame, tmp_path / f"{case}-{fit}", settings)
    finally:
        sys.modules.pop(f"bayes_gp_models.{name}", None)


def pairs(names: tuple[str, ...] = FIT_NAMES, start: int = 0) -> list[tuple[str, str]]:
    """Fit i of ``names`` with data set ``start`` + i (mod the number of data sets): every fit
    once, every data set at least once."""
    return [(CASES[(start + i) % len(CASES)], fit) for i, fit in enumerate(names)]


@pytest.mark.slow
@pytest.mark.parametrize(("case", "fit"), pairs())
def test_every_fit_is_usable_or_refused_clearly(case, fit, tmp_path):
    check_edge_case(case, fit, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize(("case", "fit"), pairs(DECLARED_NAMES, len(FIT_NAMES)))
def test_every_declared_fit_is_usable_or_refused_clearly(case, fit, tmp_path, monkeypatch):
    check_declared_edge_case(case, fit, tmp_path, monkeypatch)


def test_the_data_sets_are_what_they_say():
    sep = edge_frame("separable")
    assert ((sep["y"] > 0) == (sep["yb"] == 1)).all()
    assert edge_frame("constant_column")["x2"].nunique() == 1
    assert edge_frame("duplicated_inputs")["x1"].value_counts().eq(3).all()
    single = edge_frame("single_class_per_group")
    assert single.groupby("g")["yb"].nunique().eq(1).all() and single["yb"].nunique() == 2
    assert len(edge_frame("n2")) == 2
    x = edge_frame("inputs_1e-15_apart")["x1"].to_numpy()
    assert 0 < np.diff(x).max() < 1e-14
    assert np.abs(edge_frame("outputs_1e8")["y"]).max() > 1e7
