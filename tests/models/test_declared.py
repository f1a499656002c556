"""The declared-model protocol (:mod:`bayes_gp.declared`): discovery, checks and ``Dataset``."""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from bayes_gp import declared
from bayes_gp.declared import Dataset, DeclaredModel, list_models, load_model, models_dir

OURS = ("breast_cancer", "coal_mining", "diabetes_ard", "mauna_loa", "pima", "stars_cyg",
        "uk_driver_deaths", "sleepstudy", "linnerud", "housing", "biochemists", "lung_cancer")

GOOD = '''
"""A minimal declared model."""
import numpy as np
from bayes_gp import GPRegression
from bayes_gp.declared import Dataset

TASK = "regression"
SUMMARY = "toy"
METHODS = ("map", "nuts")
SETTINGS = {"fast": {"draws": 10}, "full": {"draws": 20}}


def load_data(fast=False):
    x = np.linspace(0, 1, 6 if fast else 8)
    return Dataset(x[:, None], np.sin(x), ["x"], "y", "made up")


def build(data, method):
    return GPRegression(data.X_train, data.y_train, "expquad")
'''


def _write(tmp_path, name: str, text: str):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def model_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("BAYES_GP_MODELS", str(tmp_path))
    yield tmp_path
    for key in [k for k in sys.modules if k.startswith("bayes_gp_models.")]:
        if str(tmp_path) in str(getattr(sys.modules[key], "__file__", "")):
            del sys.modules[key]


def test_source_checkout_lists_the_declared_models(monkeypatch):
    monkeypatch.delenv("BAYES_GP_MODELS", raising=False)
    assert models_dir().name in ("models", "_models")
    names = list_models()
    assert set(OURS) <= set(names)
    assert names == sorted(names)


@pytest.mark.parametrize("name", OURS)
def test_declared_models_follow_the_protocol(name):
    decl = load_model(name)
    assert isinstance(decl, DeclaredModel)
    assert decl.task in declared.TASKS
    assert decl.summary and "\n" not in decl.summary
    assert set(decl.methods) <= set(declared.METHODS)
    assert decl.module.__doc__ and len(decl.module.__doc__) > 500  # the documented model
    for fast in (True, False):
        s = decl.settings(fast)
        assert {"draws", "tune", "chains", "n_restarts"} <= set(s)
    assert decl.settings(True)["draws"] <= decl.settings(False)["draws"]
    with pytest.raises(ValueError, match=f"model {name!r} fits by `method`"):
        decl.build(None, "bogus")


def test_unknown_model_names_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown model 'nope'; declared models: .*mauna_loa"):
        load_model("nope")


def test_env_directory_good_model_and_private_files(model_dir):
    _write(model_dir, "toy", GOOD)
    _write(model_dir, "_helper", "X = 1\n")
    (model_dir / "notes.txt").write_text("not a model")
    assert models_dir() == model_dir
    assert list_models() == ["toy"]
    decl = load_model("toy")
    assert decl.path == model_dir / "toy.py"
    assert decl.methods == ("map", "nuts")
    assert decl.settings(True) == {"draws": 10}
    data = decl.load_data(fast=True)
    assert data.X_train.shape == (6, 1)
    gp = decl.build(data)  # the first method is the default
    assert gp.X.shape == (6, 1)
    assert load_model("toy").module is decl.module  # imported once


def test_missing_attributes_are_a_type_error(model_dir):
    _write(model_dir, "broken", 'TASK = "regression"\nSUMMARY = "x"\n')
    with pytest.raises(TypeError, match=r"'broken' .* lacks \['METHODS', 'SETTINGS', 'load_data'"):
        load_model("broken")


@pytest.mark.parametrize(
    ("old", "new", "match"),
    [
        ('TASK = "regression"', 'TASK = "clustering"', "TASK must be one of"),
        ('METHODS = ("map", "nuts")', 'METHODS = ("map", "svgd")', "METHODS must be a non-empty"),
        ('METHODS = ("map", "nuts")', "METHODS = ()", "METHODS must be a non-empty"),
    ],
)
def test_bad_task_or_methods_are_type_errors(model_dir, old, new, match):
    assert old in GOOD
    _write(model_dir, "bad", GOOD.replace(old, new))
    with pytest.raises(TypeError, match=match):
        load_model("bad")


def test_load_data_must_return_a_dataset(model_dir):
    old = 'return Dataset(x[:, None], np.sin(x), ["x"], "y", "made up")'
    assert old in GOOD
    _write(model_dir, "raw", GOOD.replace(old, "return x, np.sin(x)"))
    decl = load_model("raw")
    with pytest.raises(TypeError, match="load_data must return a bayes_gp Dataset"):
        decl.load_data(fast=True)


def test_import_error_propagates_and_leaves_no_module(model_dir):
    _write(model_dir, "crash", "raise RuntimeError('boom at import')\n")
    with pytest.raises(RuntimeError, match="boom at import"):
        load_model("crash")
    assert "bayes_gp_models.crash" not in sys.modules


def test_dataset_validation():
    X, y = np.zeros((5, 2)), np.zeros(5)
    d = Dataset(X, y, ["a", "b"], "t", "src")
    assert d.X_test is None and d.notes == {}
    Dataset(np.zeros(5), y, ["a"], "t", "src")  # 1-D inputs: one feature
    with pytest.raises(ValueError, match="X_train has 5 rows but y_train has 4"):
        Dataset(X, y[:4], ["a", "b"], "t", "src")
    with pytest.raises(ValueError, match="feature_names must name every column"):
        Dataset(X, y, ["a"], "t", "src")
    with pytest.raises(ValueError, match="X_test and y_test go together"):
        Dataset(X, y, ["a", "b"], "t", "src", X_test=X)
    with pytest.raises(ValueError, match="X_test and y_test go together"):
        Dataset(X, y, ["a", "b"], "t", "src", y_test=y)


def test_dataset_with_several_outputs():
    """An (n, P) target names its P outputs (kept as a tuple); ``target_names`` is always the
    list of names; the held-out target has the training target's layout."""
    X, Y = np.zeros((5, 2)), np.arange(15.0).reshape(5, 3)
    d = Dataset(X, Y, ["a", "b"], ["u", "v", "w"], "src", X_test=X[:2], y_test=Y[:2])
    assert d.target_name == ("u", "v", "w") and d.target_names == ["u", "v", "w"]
    assert Dataset(X, Y[:, 0], ["a", "b"], "t", "src").target_names == ["t"]  # 1-D unchanged
    with pytest.raises(ValueError, match=r"y_train has 3 columns .* 3 distinct, non-empty output"):
        Dataset(X, Y, ["a", "b"], "u,v,w", "src")  # one string is one name
    with pytest.raises(ValueError, match="3 distinct"):
        Dataset(X, Y, ["a", "b"], ["u", "v"], "src")
    with pytest.raises(ValueError, match="3 distinct"):
        Dataset(X, Y, ["a", "b"], ["u", "v", "u"], "src")
    with pytest.raises(ValueError, match="y_train is 1-D: target_name must be one name"):
        Dataset(X, Y[:, 0], ["a", "b"], ["u"], "src")
    with pytest.raises(ValueError, match=r"y_train must be 1-D \(n,\) or 2-D"):
        Dataset(X, np.zeros((5, 3, 1)), ["a", "b"], "t", "src")
    with pytest.raises(ValueError, match=r"y_test must have shape \(2, 3\)"):
        Dataset(X, Y, ["a", "b"], ["u", "v", "w"], "src", X_test=X[:2], y_test=Y[:2, :2])
    with pytest.raises(ValueError, match=r"y_test must have shape \(2,\)"):
        Dataset(X, Y[:, 0], ["a", "b"], "t", "src", X_test=X[:2], y_test=Y[:3, 0])


def test_formula_model_reads_arrays_laid_out_as_the_data_set():
    """``formula_model``: an array of the data set's columns is read as its rows (the design has
    another width: the censoring column is not an input); a data set as wide as the design but
    in another order is refused (it would be read as the design, column by column)."""
    from bayes_gp.declared import formula_model

    rng = np.random.default_rng(0)
    t = np.linspace(0.0, 1.0, 12)
    X = np.column_stack([t, rng.integers(0, 2, 12), np.zeros(12)])
    data = Dataset(X, 0.1 + rng.exponential(1.0, 12), ["t", "g", "c"], "y", "made up")
    gp = formula_model("y ~ g + gp(t)", data, "y", family="weibull", censored="c")
    assert gp.X.shape[1] == 2 and list(gp.feature_names) == ["t", "g"]
    fit = gp.fit("map", n_restarts=1, random_seed=0)
    frame = pd.DataFrame(X[:3], columns=["t", "g", "c"]).assign(y=1.0)
    np.testing.assert_allclose(gp.predict(X[:3], fit).latent_mean,
                               gp.predict(frame, fit).latent_mean, rtol=1e-12)  # fmt: skip
    swapped = Dataset(X[:, [1, 0]], data.y_train, ["g", "t"], "y", "made up")
    with pytest.raises(ValueError, match=r"as many as the formula's design columns \['t', 'g'\]"):
        formula_model("y ~ g + gp(t)", swapped, "y", family="gaussian")
