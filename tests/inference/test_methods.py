"""The one vocabulary of fit methods (inference.methods): every model class names its methods
from it, the previous release's names map to the new ones with a FutureWarning that points at
the caller, and saved results under old names load without one."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import bayes_gp
from bayes_gp import GPClassifier, LatentGP, MulticlassGPClassifier, workflow
from bayes_gp.cli import build_parser
from bayes_gp.declared import choose_method, load_model
from bayes_gp.inference.methods import (
    CLASSIFIER_RENAMED,
    LATENT_RENAMED,
    METHOD_TABLE,
    METHODS,
    canonical_method,
    is_joint,
)
from bayes_gp.workflow.spec import CSVModel

X = np.linspace(0.0, 5.0, 12)
T = (np.sin(X) > 0).astype(int)
COUNTS = np.array([0, 1, 3, 2, 5, 4, 2, 1, 0, 1, 2, 3])

MODEL_CLASSES = [
    bayes_gp.GPRegression, bayes_gp.HeteroscedasticGPRegression, bayes_gp.MultiOutputGP,
    bayes_gp.HierarchicalGP, LatentGP, GPClassifier, MulticlassGPClassifier,
    bayes_gp.DeepKernelRegression,
]  # fmt: skip


@pytest.mark.parametrize("cls", MODEL_CLASSES, ids=lambda c: c.__name__)
def test_every_model_class_names_its_methods_from_the_table(cls):
    assert set(cls.fit_methods) <= set(METHODS), cls.fit_methods
    assert set(cls.sampling_methods) <= set(cls.fit_methods)
    # an old name never shadows a method the class has under the same name
    assert not set(cls.renamed_methods) & set(cls.fit_methods)
    assert set(cls.renamed_methods.values()) <= set(cls.fit_methods)


def test_the_table_describes_every_name():
    assert METHODS == ("nuts", "nuts_joint", "map", "vi", "ep")
    assert all(len(text) > 20 for text in METHOD_TABLE.values())
    assert is_joint("nuts_joint") and is_joint("latent")  # a saved posterior's old attribute
    assert not is_joint("nuts") and not is_joint("laplace") and not is_joint(None)


def test_old_name_warns_naming_the_new_one_at_the_callers_line():
    with pytest.warns(FutureWarning, match=r"Thing: method 'latent' is now called 'nuts_joint'"
                      ) as record:  # fmt: skip
        assert canonical_method("Thing", "latent", LATENT_RENAMED) == "nuts_joint"
    assert record[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert canonical_method("Thing", "nuts", LATENT_RENAMED) == "nuts"  # new: no warning
        assert canonical_method("Thing", "bogus", LATENT_RENAMED) == "bogus"  # caller refuses


@pytest.fixture
def recorded(monkeypatch):
    """Each model's fit methods replaced by recorders: ``fit(method)`` returns what ran."""
    for cls in (LatentGP, GPClassifier, MulticlassGPClassifier):
        monkeypatch.setattr(cls, "sample", lambda self, *a, **kw: ("sample", kw.get("method")))
        monkeypatch.setattr(cls, "fit_laplace", lambda self, *a, **kw: ("fit_laplace", None))
    for cls in (LatentGP, GPClassifier):
        monkeypatch.setattr(cls, "fit_vi", lambda self, *a, **kw: ("fit_vi", None))
        monkeypatch.setattr(cls, "fit_ep", lambda self, *a, **kw: ("fit_ep", None))


def test_latent_gp_methods_old_and_new(recorded):
    gp = LatentGP(X, COUNTS, likelihood="poisson")
    assert gp.fit() == gp.fit("nuts") == ("sample", "nuts")  # the default: Laplace inside NUTS
    assert gp.fit("nuts_joint") == ("sample", "nuts_joint")
    assert gp.fit("map") == ("fit_laplace", None) and gp.fit("vi") == ("fit_vi", None)
    for old, new in (("laplace", ("sample", "nuts")), ("latent", ("sample", "nuts_joint"))):
        with pytest.warns(FutureWarning, match=f"LatentGP.fit: method '{old}' is now called"):
            assert gp.fit(old) == new
    with pytest.raises(ValueError, match="fits by"):
        gp.fit("ep")  # EP is GPClassifier's fit method (probit), LatentGP.fit_ep its engine


def test_classifier_methods_old_and_new(recorded):
    clf = GPClassifier(X, T)
    assert clf.fit() == clf.fit("map") == ("fit_laplace", None)
    # "nuts" integrates the latent GP out, as for every model (it was joint NUTS before)
    assert clf.fit("nuts") == ("sample", "nuts")
    assert clf.fit("nuts_joint") == ("sample", "nuts_joint")
    assert clf.fit("ep") == ("fit_ep", None)
    with pytest.warns(FutureWarning, match="GPClassifier.fit: method 'laplace' is now called 'map'"):
        assert clf.fit("laplace") == ("fit_laplace", None)
    with pytest.warns(FutureWarning, match="'nuts_laplace' is now called 'nuts'"):
        assert clf.fit("nuts_laplace") == ("sample", "nuts")
    with pytest.raises(ValueError, match="fits by"):
        clf.fit("latent")  # never a classifier's fit method
    multi = MulticlassGPClassifier(np.r_[X, X], np.r_[T, 2 * np.ones(12, int)])
    assert multi.fit() == ("fit_laplace", None)
    assert multi.fit("nuts") == ("sample", "nuts") and multi.fit("nuts_joint")[1] == "nuts_joint"
    with pytest.warns(FutureWarning, match="'nuts_laplace' is now called 'nuts'"):
        assert multi.fit("nuts_laplace") == ("sample", "nuts")
    with pytest.warns(FutureWarning, match="'laplace' is now called 'map'"):
        assert multi.fit("laplace") == ("fit_laplace", None)


def test_sample_takes_the_old_names_of_its_method(calls):
    gp = LatentGP(X, COUNTS, likelihood="poisson")
    with pytest.warns(FutureWarning, match="LatentGP.sample: method 'latent'"), \
            pytest.raises(RuntimeError, match="recorded"):  # fmt: skip
        gp.sample(draws=5, tune=5, chains=1, method="latent")
    assert calls[-1][1]["latent"] and calls[-1][0] is not gp.model  # the joint model
    with pytest.warns(FutureWarning, match="method 'laplace' is now called 'nuts'"), \
            pytest.raises(RuntimeError, match="recorded"):  # fmt: skip
        gp.sample(draws=5, tune=5, chains=1, method="laplace")
    assert not calls[-1][1]["latent"] and calls[-1][0] is gp.model


def test_declared_models_read_old_names_by_their_task():
    pima, coal, stars = (load_model(n) for n in ("pima", "coal_mining", "stars_cyg"))
    assert pima.methods[0] == "map" and coal.methods[:2] == ("nuts", "nuts_joint")
    assert pima.renamed == CLASSIFIER_RENAMED and coal.renamed == LATENT_RENAMED
    assert stars.renamed == LATENT_RENAMED  # a Student-t regression is a latent GP
    with pytest.warns(FutureWarning, match="model 'pima': method 'laplace' is now called 'map'"):
        assert choose_method(pima.name, pima.methods, "laplace", pima.renamed) == "map"
    with pytest.warns(FutureWarning, match="'latent' is now called 'nuts_joint'"):
        assert choose_method(stars.name, stars.methods, "latent", stars.renamed) == "nuts_joint"
    mauna = load_model("mauna_loa")
    with pytest.raises(ValueError, match="fits by `method` 'map', 'nuts'; not 'laplace'"):
        choose_method(mauna.name, mauna.methods, "laplace", mauna.renamed)
    args = build_parser().parse_args(["fit", "coal_mining", "--out", "o", "--method", "latent"])
    assert args.method == "latent"  # the command line takes it; the run maps it (and warns)


def test_a_result_saved_under_an_old_name_loads_by_the_new(tmp_path):
    path = tmp_path / "data.csv"
    rng = np.random.default_rng(0)
    x = rng.normal(size=30)
    path.write_text("x,lab\n" + "".join(f"{a},{int(a + 0.3 * rng.normal() > 0)}\n" for a in x))
    model = CSVModel(str(path), ("x",), "lab", task="classification")
    res = workflow.run(model, "map", n_restarts=1, random_seed=0)
    workflow.save(res, tmp_path / "out", with_report=False)
    record = json.loads((tmp_path / "out" / "fit.json").read_text())
    record["method"] = "laplace"  # as the previous release wrote it
    (tmp_path / "out" / "fit.json").write_text(json.dumps(record))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # loading old results does not nag
        again = workflow.load(tmp_path / "out")
    assert again.method == "map" and not again.is_mcmc
    np.testing.assert_array_equal(again.model.predict_proba(x[:5], again.fit),
                                  res.model.predict_proba(x[:5], res.fit))  # fmt: skip
    assert model.renamed == CLASSIFIER_RENAMED
    assert CSVModel(str(path), ("x",), "lab", likelihood="bernoulli").renamed == LATENT_RENAMED
