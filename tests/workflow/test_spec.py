"""A CSV model (:class:`bayes_gp.workflow.CSVModel`) is the formula model of its columns: the
same log density and gradient as the class it replaces (GPRegression, LatentGP) at any
hyperparameters, to 1e-8, the same type-II fit and predictions; a specification saved before
the formula engine rebuilds its class and reproduces its fit."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bayes_gp import workflow
from bayes_gp.formula.engines import FormulaLatentGP, FormulaRegression
from bayes_gp.workflow import CSVModel
from bayes_gp.workflow.spec import from_spec

#: Log densities and gradients of the two engines agree to this (absolute, on values of -20 to
#: -100): both are the same arithmetic on the same numbers, so a wrong prior, mean or scale
#: (a difference of order 0.1 or more) fails it.
TOL = 1e-8


@pytest.fixture(scope="module")
def csv_path(tmp_path_factory):
    rng = np.random.default_rng(3)
    n = 30
    a, b = rng.uniform(0, 10, n), rng.normal(size=n)
    f = np.sin(a) + 0.3 * b
    trials = rng.integers(1, 8, n)
    df = pd.DataFrame({
        "a": a, "b": b, "my col": rng.normal(size=n),
        "y": f + 0.2 * rng.normal(size=n),
        "yt": f + 0.3 * rng.standard_t(3, size=n),
        "count": rng.poisson(np.exp(f)),
        "trials": trials, "succ": rng.binomial(trials, 1 / (1 + np.exp(-f))),
        "yb": (f + rng.normal(size=n) > 0).astype(int),
        "share": 1 / (1 + np.exp(-f - 0.3 * rng.normal(size=n))),
        "pos": np.exp(f + 0.3 * rng.normal(size=n)),
        "grade": np.digitize(f, [-0.5, 0.5]),
    })  # fmt: skip
    path = tmp_path_factory.mktemp("csv_formula") / "data.csv"
    df.to_csv(path, index=False)
    return str(path)


def _models(path, **kwargs):
    """The CSV model on the formula engine and on its class, built on the same data."""
    new = CSVModel(path, **kwargs)
    old = CSVModel(path, **kwargs, engine="class")
    data = new.load_data()
    return new, new.build(data), old.build(data)


def _logp_and_grad(model):
    """The model's log density and its gradient, one function of the unconstrained values
    (the fast-compiling Python linker: a test compiles two models)."""
    import pytensor
    import pytensor.tensor as pt

    from bayes_gp.linalg import EAGER_MODE

    values = model.value_vars
    logp = model.logp()
    grads = pt.grad(logp, values)
    fn = pytensor.function(values, [logp, *grads], mode=EAGER_MODE)
    return lambda point: [np.asarray(v) for v in fn(*(point[v.name] for v in values))]


def _assert_same_density(a, b, seed=0, tol=TOL):
    """The two models' log densities and gradients agree (to ``tol``) at the initial point and
    at four random points of the unconstrained space (the free variables in the same order, the
    same hyperparameter under both names: ``ls`` and ``gp(x).ls``)."""
    fa, fb = _logp_and_grad(a.model), _logp_and_grad(b.model)
    start = a.model.initial_point()
    names = list(b.model.initial_point())
    assert len(names) == len(start)
    for ka, kb in zip(start, names, strict=True):
        assert ka == kb or ka.endswith("." + kb) or kb.endswith("." + ka), (ka, kb)
    rng = np.random.default_rng(seed)
    for step in (0.0, 0.5, 0.5, 1.0, 1.0):
        pa = {k: v + step * rng.normal(size=np.shape(v)) for k, v in start.items()}
        pb = dict(zip(names, pa.values(), strict=True))
        (lp_a, *g_a), (lp_b, *g_b) = fa(pa), fb(pb)
        assert np.isfinite(lp_a)
        assert abs(lp_a - lp_b) < tol
        for x, y in zip(g_a, g_b, strict=True):
            np.testing.assert_allclose(x, y, rtol=0, atol=tol)


REGRESSION = {
    "expquad": dict(x=("a",), y="y"),
    "matern52-2d": dict(x=("a", "b"), y="y", kernel="matern52"),
    "ard": dict(x=("a", "b"), y="y", ard=True),
    "sum-kernel": dict(x=("a",), y="y", kernel="expquad + periodic"),
    "quoted-column": dict(x=("my col", "a"), y="y", kernel="matern32"),
}


@pytest.mark.parametrize("case", REGRESSION)
def test_regression_is_the_gaussian_formula(csv_path, case):
    """``--x ... --y ...`` is ``y ~ gp(x..., kernel=..., ard=...)`` (gaussian family, the
    intercept fixed at the mean of y): the log density of GPRegression."""
    decl, new, old = _models(csv_path, **REGRESSION[case])
    assert isinstance(new, FormulaRegression) and type(old).__name__ == "GPRegression"
    assert decl.family == "gaussian" and decl.formula.startswith("y ~ gp(")
    assert decl.methods == type(new).fit_methods == type(old).fit_methods
    _assert_same_density(new, old)


def test_regression_map_fit_and_predictions_are_the_class_ones(csv_path):
    """The type-II fit (same seed, restarts) and the predictions table of a CSV regression are
    GPRegression's: same optimum, same columns, same numbers to 1e-8."""
    model = dict(x=("a", "b"), y="y", kernel="matern52")
    runs = [workflow.run(CSVModel(csv_path, **model, engine=e), "map", n_restarts=2,
                         random_seed=4) for e in ("formula", "class")]  # fmt: skip
    new, old = runs
    assert isinstance(new.model, FormulaRegression)
    assert new.fit.log_marginal_likelihood == pytest.approx(
        old.fit.log_marginal_likelihood, abs=TOL
    )
    for k, v in old.fit.params.items():
        np.testing.assert_allclose(new.fit.params[f"gp(a, b).{k}" if k != "sigma" else k], v,
                                   rtol=1e-6)  # fmt: skip
    assert list(new.predictions.columns) == list(old.predictions.columns)
    pd.testing.assert_frame_equal(new.predictions, old.predictions, rtol=1e-6, atol=1e-8)


def test_a_specification_saved_before_the_formula_engine_reproduces_its_fit(csv_path, tmp_path):
    """A ``fit.json`` written before the formula engine (its spec without ``engine``, its fit
    under GPRegression's names ``ls``, ``eta``, ``sigma``) reloads into GPRegression with the
    same parameters and predictions; one written now records ``engine: formula``."""
    res = workflow.run(CSVModel(csv_path, ("a",), "y", engine="class"), "map", n_restarts=1,
                       random_seed=1)  # fmt: skip
    out = tmp_path / "old"
    workflow.save(res, out, with_report=False)
    record = json.loads((out / "fit.json").read_text())
    del record["spec"]["engine"]  # as the earlier versions wrote it
    (out / "fit.json").write_text(json.dumps(record))
    again = workflow.load(out)
    assert type(again.model).__name__ == "GPRegression"
    assert again.model.hyperparameters == ["ls", "eta", "sigma"]
    for k, v in res.fit.params.items():
        np.testing.assert_array_equal(again.fit.params[k], v)
    x_new = np.linspace(-1, 11, 5)
    a, b = res.model.predict(x_new, res.fit), again.model.predict(x_new, again.fit)
    np.testing.assert_array_equal(b.mean, a.mean)
    np.testing.assert_array_equal(b.var, a.var)
    assert from_spec({**record["spec"], "engine": "formula"}).formula == (
        "y ~ gp(a, kernel='expquad', ard=False)"
    )
    new = workflow.run(CSVModel(csv_path, ("a",), "y"), "map", n_restarts=1, random_seed=1)
    assert new.spec["engine"] == "formula" and isinstance(new.model, FormulaRegression)


LATENT = {
    "poisson": dict(x=("a", "b"), y="count", likelihood="poisson"),
    "negative_binomial-ard": dict(x=("a", "b"), y="count", likelihood="negative_binomial",
                                  kernel="matern32", ard=True),
    "binomial-trials": dict(x=("a",), y="succ", likelihood="binomial", trials="trials"),
    "bernoulli-logit": dict(x=("a", "b"), y="yb", likelihood="bernoulli"),
    "student_t": dict(x=("a",), y="yt", likelihood="student_t"),
    "beta": dict(x=("a",), y="share", likelihood="beta"),
    "gamma": dict(x=("a",), y="pos", likelihood="gamma"),
    "zero_inflated_poisson": dict(x=("a",), y="count", likelihood="zero_inflated_poisson"),
    "zero_inflated_negative_binomial": dict(x=("a",), y="count",
                                            likelihood="zero_inflated_negative_binomial"),
    "ordinal": dict(x=("a",), y="grade", likelihood="ordinal"),
    "hurdle_poisson": dict(x=("a", "b"), y="count", likelihood="hurdle_poisson"),
    "hurdle_negative_binomial": dict(x=("a",), y="count", likelihood="hurdle_negative_binomial",
                                     kernel="matern52"),
}  # fmt: skip


#: The count likelihoods with an exposure column (``trials`` here: 1 to 7 per row).
EXPOSURE = {
    "poisson": dict(x=("a",), y="count", likelihood="poisson", exposure="trials"),
    "negative_binomial-2d": dict(x=("a", "b"), y="count", likelihood="negative_binomial",
                                 exposure="trials", kernel="matern52"),
    "zero_inflated_poisson": dict(x=("a",), y="count", likelihood="zero_inflated_poisson",
                                  exposure="trials"),
    "zero_inflated_negative_binomial": dict(x=("a",), y="count", exposure="trials",
                                            likelihood="zero_inflated_negative_binomial"),
    "hurdle_poisson": dict(x=("a",), y="count", likelihood="hurdle_poisson", exposure="trials"),
    "hurdle_negative_binomial-2d": dict(x=("a", "b"), y="count", exposure="trials",
                                        likelihood="hurdle_negative_binomial"),
}  # fmt: skip


def test_every_formula_likelihood_has_its_equality_test():
    """A likelihood goes to the formula engine only with a case of the test below, and with an
    exposure column only with a case of the exposure test."""
    from bayes_gp.workflow.spec import _FORMULA_LIKELIHOODS, _SIZE_COLUMNS

    assert set(_FORMULA_LIKELIHOODS) == {c["likelihood"] for c in LATENT.values()}
    with_exposure = set(_FORMULA_LIKELIHOODS) & set(_SIZE_COLUMNS["exposure"])
    assert with_exposure == {c["likelihood"] for c in EXPOSURE.values()}


@pytest.mark.parametrize("case", LATENT)
def test_latent_likelihood_is_the_formula_family(csv_path, case):
    """``--likelihood L`` is ``y ~ gp(x..., ...)`` of family L (``p(y, trials) ~ ...`` for the
    binomial), its intercept fixed at the data's location on the link scale (none for the
    ordinal family): the Laplace-integrated log density of LatentGP, and its methods."""
    decl, new, old = _models(csv_path, **LATENT[case])
    assert isinstance(new, FormulaLatentGP) and type(old).__name__ == "LatentGP"
    assert decl.family == new.family == LATENT[case]["likelihood"]
    assert decl.methods == type(new).fit_methods == type(old).fit_methods
    assert decl.renamed == type(new).renamed_methods
    _assert_same_density(new, old)


@pytest.mark.parametrize("case", EXPOSURE)
def test_exposure_is_the_offset_of_the_formula(csv_path, case):
    r"""``--likelihood L --exposure e`` is ``y ~ gp(x...) + offset(log(e))`` of family L, its
    intercept fixed at :math:`\log((\sum y + 1/2) / \sum e)`: the log density and gradient of
    LatentGP with ``exposure=e``; LatentGP's methods."""
    from bayes_gp.workflow.exposure import ExposureFormulaGP

    decl, new, old = _models(csv_path, **EXPOSURE[case])
    assert isinstance(new, ExposureFormulaGP) and type(old).__name__ == "LatentGP"
    assert decl.formula.endswith(" + offset(log(trials))") and decl.class_reason is None
    assert decl.spec()["engine"] == "formula"
    assert decl.methods == type(new).fit_methods == type(old).fit_methods
    np.testing.assert_allclose(new.exposure, old.likelihood.exposure, rtol=1e-15)  # exp(log e)
    _assert_same_density(new, old)


#: The cases of the type-II fit test: a count, the trials, and the exposure of a count and of a
#: hurdle (its mean at the row's exposure over the zeros and the zero-truncated counts).
MAP = {
    "poisson": LATENT["poisson"],
    "binomial-trials": LATENT["binomial-trials"],
    "exposure-negative_binomial": EXPOSURE["negative_binomial-2d"],
    "exposure-hurdle_negative_binomial": EXPOSURE["hurdle_negative_binomial-2d"],
}


@pytest.mark.parametrize("case", MAP)
def test_latent_map_fit_and_predictions_are_the_class_ones(csv_path, case):
    """The type-II fit and the predictions table (the trials column, the mean at each row's
    trials, the mean per trial, the latent columns) of a CSV latent GP are LatentGP's; with an
    exposure column, the count at the row's exposure and the mean per unit exposure, also at
    new rows (their exposure column, or none: exposure 1)."""
    model = MAP[case]
    new, old = runs = [workflow.run(CSVModel(csv_path, **model, engine=e), "map", n_restarts=1,
                                    random_seed=4) for e in ("formula", "class")]  # fmt: skip
    assert isinstance(new.model, FormulaLatentGP)
    assert new.fit.log_marginal_likelihood == pytest.approx(
        old.fit.log_marginal_likelihood, abs=TOL
    )
    assert list(new.predictions.columns) == list(old.predictions.columns)
    pd.testing.assert_frame_equal(new.predictions, old.predictions, rtol=1e-6, atol=1e-8)
    if "exposure" in model:
        assert "mean_per_unit_exposure" in new.predictions
        rows = pd.DataFrame({"a": [0.5, 5.0, 12.0], "b": [0.0, 1.0, -1.0], "trials": [1, 4, 2]})
        pd.testing.assert_frame_equal(new.predict(rows), old.predict(rows), rtol=1e-6, atol=1e-8)
        unit = [pd.DataFrame(r.model.prediction_columns(rows[["a", "b"]], r.fit)) for r in runs]
        pd.testing.assert_frame_equal(*unit, rtol=1e-6, atol=1e-8)  # no exposure column: 1


@pytest.mark.parametrize(("method", "link"), [("map", "logit"), ("ep", "probit")])
def test_a_classifier_of_labels_is_the_bernoulli_formula(csv_path, tmp_path, method, link):
    """``--task classification`` of two labels is ``lab ~ gp(a, b, ...)`` of the bernoulli
    family, the larger label the event and GPClassifier's link for the method (probit for EP):
    GPClassifier's log density; its ``predictions.csv`` has GPClassifier's columns and, at the
    fitted hyperparameters, its numbers (the labels predicted). ``map`` is now the MAP of every
    latent formula model (GPClassifier's was ML-II)."""
    from bayes_gp.classification import GPClassifier
    from bayes_gp.inference.methods import CLASSIFIER_RENAMED
    from bayes_gp.workflow.scoring import predict

    frame = pd.read_csv(csv_path)
    frame["lab"] = np.where(frame["yb"] == 1, "yes", "no")
    path = tmp_path / "labels.csv"
    frame.to_csv(path, index=False)
    decl = CSVModel(str(path), ("a", "b"), "lab", task="classification")
    assert decl.class_reason is None and decl.family == "bernoulli"
    assert decl.formula == "lab ~ gp(a, b, kernel='expquad', ard=False)"
    assert decl.spec()["engine"] == "formula"
    assert decl.methods == ("map", "nuts", "ep", "nuts_joint") and decl.renamed == CLASSIFIER_RENAMED
    res = workflow.run(decl, method, n_restarts=1, random_seed=4)
    new = res.model
    assert isinstance(new, FormulaLatentGP) and new.link == link and res.fit.prior
    assert new.classes_.tolist() == ["no", "yes"]
    assert set(new.fit_methods) >= {"map", "nuts", "nuts_joint"}
    assert ("ep" in new.fit_methods) == (link == "probit")  # EP is the probit model's
    old = CSVModel(str(path), ("a", "b"), "lab", task="classification",
                   engine="class").build(res.data, method)  # fmt: skip
    assert isinstance(old, GPClassifier) and old.link == link
    _assert_same_density(new, old)
    params = {k.removeprefix("gp(a, b)."): v for k, v in res.fit.params.items()}
    at = old.fit_ep(params=params) if method == "ep" else old.fit_laplace(params=params)
    expected, _ = predict(old, res.data, at)
    assert list(res.predictions.columns) == list(expected.columns)
    assert list(expected.columns[-5:]) == ["p_positive", "latent_mean", "latent_sd", "predicted",
                                           "lab"]  # fmt: skip
    pd.testing.assert_frame_equal(res.predictions, expected, rtol=1e-8, atol=1e-10)


def test_a_classifier_saved_on_its_class_rebuilds_gpclassifier(csv_path):
    """A CSV classifier saved with ``engine: class``, or before the key existed, rebuilds
    GPClassifier with the method's link, whose hyperparameter names its fit holds."""
    spec = CSVModel(csv_path, ("a", "b"), "yb", task="classification").spec()
    assert spec["engine"] == "formula"
    for saved in ({**spec, "engine": "class"}, {k: v for k, v in spec.items() if k != "engine"}):
        decl = from_spec(saved)
        assert decl.formula is None and decl.spec()["engine"] == "class"
        data = decl.load_data()
        for method, link in (("map", "logit"), ("ep", "probit")):
            gp = decl.build(data, method)
            assert type(gp).__name__ == "GPClassifier" and gp.link == link
            assert gp.hyperparameters == ["ls", "eta"]


def test_a_formula_of_labels_fits_by_ep_on_the_command_line(csv_path, tmp_path):
    """``--formula "lab ~ gp(a)" --family bernoulli --link probit`` has the method ``ep`` (the
    logit link has not), fits by EP and writes the labels: the response as the file holds it
    and the predicted one."""
    from bayes_gp.workflow import FormulaCSVModel

    frame = pd.read_csv(csv_path)
    frame["lab"] = np.where(frame["yb"] == 1, "yes", "no")
    path = tmp_path / "labels.csv"
    frame.to_csv(path, index=False)
    decl = FormulaCSVModel(str(path), "lab ~ gp(a)", family="bernoulli", link="probit")
    assert decl.methods == ("nuts", "nuts_joint", "map", "vi", "ep")
    assert "ep" not in FormulaCSVModel(str(path), "lab ~ gp(a)", family="bernoulli").methods
    res = workflow.run(decl, "ep", n_restarts=1, random_seed=0)
    assert res.fit.method == "ep" and res.model.link == "probit"
    assert res.predictions["lab"].tolist() == frame["lab"].tolist()
    assert set(res.predictions["predicted"]) <= {"no", "yes"}
    np.testing.assert_array_equal(res.predictions["p_positive"],
                                  res.model.predict_proba(frame, res.fit))  # fmt: skip


def test_the_gaussian_likelihood_is_the_exact_gp(csv_path):
    """``--likelihood gaussian`` is the regression's formula (gaussian family, the exact GP:
    the latent function integrated out in closed form), GPRegression's log density, with its
    methods ``nuts`` and ``map``: ``nuts_joint`` and ``vi`` are refused before the data is read,
    with the methods it has. A specification saved on LatentGP (``engine: class``, or no
    ``engine``) rebuilds LatentGP, with LatentGP's methods."""
    from bayes_gp._arguments import ArgumentError
    from bayes_gp.inference.methods import LATENT_RENAMED

    decl = CSVModel(csv_path, ("a", "b"), "y", likelihood="gaussian", kernel="matern52")
    regression = CSVModel(csv_path, ("a", "b"), "y", kernel="matern52")
    assert decl.class_reason is None and decl.formula == regression.formula
    assert decl.task == "regression" and decl.spec()["engine"] == "formula"
    assert decl.methods == FormulaRegression.fit_methods == ("nuts", "map")
    assert dict(decl.renamed) == {}
    data = decl.load_data()
    new = decl.build(data, "map")
    old = CSVModel(csv_path, ("a", "b"), "y", kernel="matern52", engine="class").build(data)
    assert isinstance(new, FormulaRegression) and type(old).__name__ == "GPRegression"
    _assert_same_density(new, old)
    # the LatentGP it was before is the same model, its f integrated by a Laplace step that is
    # exact for a gaussian likelihood up to its numerics (measured: 2e-5 on values near -45)
    latent = CSVModel(csv_path, ("a", "b"), "y", likelihood="gaussian", kernel="matern52",
                      engine="class").build(data, "nuts")  # fmt: skip
    assert type(latent).__name__ == "LatentGP"
    _assert_same_density(new, latent, tol=1e-3)
    missing = CSVModel(csv_path + ".gone", ("a",), "y", likelihood="gaussian")
    for method in ("nuts_joint", "vi"):
        with pytest.raises(ArgumentError, match=f"nuts.*map.*not {method!r}"):
            workflow.run(missing, method)  # the method is refused before the (missing) file
    spec = decl.spec()
    for saved in ({**spec, "engine": "class"}, {k: v for k, v in spec.items() if k != "engine"}):
        old_decl = from_spec(saved)
        assert old_decl.formula is None and old_decl.spec()["engine"] == "class"
        assert old_decl.methods == ("nuts", "nuts_joint", "map", "vi")
        assert old_decl.renamed == LATENT_RENAMED
        gp = old_decl.build(old_decl.load_data(), "vi")
        assert type(gp).__name__ == "LatentGP" and gp.likelihood_name == "gaussian"


def test_an_exposure_specification_saved_on_the_class_rebuilds_latentgp(csv_path):
    """A CSV exposure model saved with ``engine: class``, or before the key existed, rebuilds
    LatentGP with ``exposure=``, whose hyperparameter names its fit holds; ``engine: formula``
    the offset formula."""
    spec = CSVModel(csv_path, ("a",), "count", likelihood="poisson", exposure="trials").spec()
    assert spec["engine"] == "formula"
    for saved in ({**spec, "engine": "class"}, {k: v for k, v in spec.items() if k != "engine"}):
        decl = from_spec(saved)
        assert decl.formula is None and decl.spec()["engine"] == "class"
        gp = decl.build(decl.load_data(), "map")
        assert type(gp).__name__ == "LatentGP" and gp.hyperparameters == ["ls", "eta"]
        np.testing.assert_array_equal(gp.likelihood.exposure, pd.read_csv(csv_path)["trials"])
    decl = from_spec(spec)
    assert type(decl.build(decl.load_data())).__name__ == "ExposureFormulaGP"


def test_regression_nuts_draws_are_the_class_ones(csv_path):
    """NUTS (PyMC's sampler, same seed) on the formula engine draws the class's numbers: the
    same log density, hence the same trajectories (measured: bit-identical draws and
    predictions, also for a Poisson latent GP with 2 x 200 draws)."""
    new, old = (workflow.run(CSVModel(csv_path, ("a",), "y", engine=e), "nuts", draws=30,
                             tune=30, chains=1, sampler="pymc", random_seed=2)
                for e in ("formula", "class"))  # fmt: skip
    post_new, post_old = new.fit["posterior"], old.fit["posterior"]
    for name in ("ls", "eta"):
        np.testing.assert_allclose(post_new[f"gp(a).{name}"], post_old[name], rtol=1e-8)
    np.testing.assert_allclose(post_new["sigma"], post_old["sigma"], rtol=1e-8)
    pd.testing.assert_frame_equal(new.predictions, old.predictions, rtol=1e-8, atol=1e-10)


#: Column names with backticks for the plain columns of the test data (a formula writes each
#: backtick twice inside the quotes: ``x`1`` is ```x``1```).
TICKED = {"a": "x`1", "b": "`b", "y": "y`", "count": "count`", "succ": "s``", "trials": "tri`als"}
#: The models of the backtick test: inputs and target, with an exposure column, with trials.
BACKTICK = {
    "regression": dict(x=("a", "b"), y="y", kernel="matern52"),
    "exposure": dict(x=("a", "b"), y="count", likelihood="negative_binomial", exposure="trials"),
    "trials": dict(x=("a",), y="succ", likelihood="binomial", trials="trials"),
}


@pytest.fixture(scope="module")
def ticked_path(csv_path, tmp_path_factory):
    """The test data with the columns of :data:`TICKED` renamed."""
    path = tmp_path_factory.mktemp("backticks") / "ticked.csv"
    pd.read_csv(csv_path).rename(columns=TICKED).to_csv(path, index=False)
    return str(path)


def _ticked(model: dict) -> dict:
    """A model of :data:`BACKTICK` on the renamed columns."""
    out = {k: TICKED.get(v, v) if k in ("y", "exposure", "trials") else v for k, v in model.items()}
    return {**out, "x": tuple(TICKED[c] for c in model["x"])}


def _ticked_name(name: str, x: tuple[str, ...]) -> str:
    """A hyperparameter's name on the renamed columns (``gp(a, b).ls`` -> ``gp(x`1, `b).ls``)."""
    return name.replace(f"gp({', '.join(x)})", f"gp({', '.join(TICKED[c] for c in x)})")


@pytest.mark.parametrize("case", BACKTICK)
def test_backtick_columns_are_the_formula_model_of_the_plain_ones(csv_path, ticked_path, case):
    """Columns with backticks in their names are the formula model (each backtick doubled in
    the quoted name) with the file's names everywhere: its formula's columns, hyperparameters,
    terms and inputs; the log density and its gradient are those of the same data under plain
    names, to 1e-10 (the same arithmetic: measured bit-identical)."""
    from bayes_gp.formula.parse import parse_formula

    model = BACKTICK[case]
    plain, ticked = CSVModel(csv_path, **model), CSVModel(ticked_path, **_ticked(model))
    assert ticked.class_reason is None and ticked.spec()["engine"] == "formula"
    assert "``" in ticked.formula and "\u241f" not in ticked.formula
    size = [c for c in (model.get("trials"), model.get("exposure")) if c]
    columns = [TICKED[c] for c in (model["y"], *size[:1 if "trials" in model else 0], *model["x"],
                                   *size[:1 if "exposure" in model else 0])]  # fmt: skip
    assert parse_formula(ticked.formula).variables == columns
    gp_p, gp_t = plain.build(plain.load_data()), ticked.build(ticked.load_data())
    assert type(gp_t) is type(gp_p) and isinstance(gp_t, FormulaRegression | FormulaLatentGP)
    x = model["x"]
    assert gp_t.hyperparameters == [_ticked_name(h, x) for h in gp_p.hyperparameters]
    offset = ("offset(log(trials))", f"offset(log({TICKED['trials']}))")
    assert gp_t.design.names == [TICKED.get(c, c.replace(*offset)) for c in gp_p.design.names]
    assert list(gp_t.terms_table().index) == [_ticked_name(t, x) for t in gp_p.terms_table().index]
    start_p, start_t = gp_p.model.initial_point(), gp_t.model.initial_point()
    for (kp, vp), (kt, vt) in zip(start_p.items(), start_t.items(), strict=True):
        assert kt == _ticked_name(kp, x)
        np.testing.assert_array_equal(vt, vp)
    fp, ft = _logp_and_grad(gp_p.model), _logp_and_grad(gp_t.model)
    rng = np.random.default_rng(1)
    for step in (0.0, 0.5, 1.0):
        point = {k: v + step * rng.normal(size=np.shape(v)) for k, v in start_p.items()}
        (lp_p, *g_p) = fp(point)
        (lp_t, *g_t) = ft(dict(zip(start_t, point.values(), strict=True)))
        assert np.isfinite(lp_p) and abs(lp_t - lp_p) < 1e-10
        for a, b in zip(g_t, g_p, strict=True):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-10)


def test_a_backtick_csv_fit_writes_and_reloads_the_file_names(ticked_path, tmp_path):
    """A MAP fit of backtick columns (inputs, target, exposure) writes ``predictions.csv`` under
    the file's names, and its ``fit.json`` specification (the names as given, engine formula)
    rebuilds the same model: same formula, hyperparameters, parameters and predictions; new
    rows with those names predict, also as a data frame given to the model (the exposure
    column read from it)."""
    model = _ticked(BACKTICK["exposure"])
    res = workflow.run(CSVModel(ticked_path, **model), "map", n_restarts=1, random_seed=4)
    out = tmp_path / "ticked"
    workflow.save(res, out, with_report=False)
    table = pd.read_csv(out / "predictions.csv")
    assert list(table.columns[:4]) == ["split", "x`1", "`b", "tri`als"]
    assert table.columns[-1] == "count`" and "mean_per_unit_exposure" in table
    spec = json.loads((out / "fit.json").read_text())["spec"]
    assert (spec["x"], spec["y"], spec["exposure"]) == (["x`1", "`b"], "count`", "tri`als")
    assert spec["engine"] == "formula" and from_spec(spec) == CSVModel(ticked_path, **model)
    again = workflow.load(out)
    assert again.model.formula == res.model.formula
    assert again.model.hyperparameters == ["gp(x`1, `b).ls", "gp(x`1, `b).eta", "dispersion"]
    for k, v in res.fit.params.items():
        np.testing.assert_array_equal(again.fit.params[k], v)
    pd.testing.assert_frame_equal(again.predictions, res.predictions)
    rows = pd.DataFrame({"x`1": [0.5, 5.0], "`b": [0.0, 1.0], "tri`als": [1, 4]})
    new = res.predict(rows)
    assert list(new.columns[:3]) == list(rows.columns)
    direct = res.model.predict(rows, res.fit)  # the exposure from the frame's column
    np.testing.assert_allclose(new["mean"], direct.mean, rtol=1e-10)
