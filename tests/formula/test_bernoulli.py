"""A bernoulli formula model of any two labels is :class:`~bayes_gp.GPClassifier`: the event its
positive class (the larger label, or ``y['level']``), the same log density and gradient
(1e-8), the same predicted probabilities, labels, columns and scores, and with the probit link
the same EP fit (R&W §3.6; LatentGP's EP code). A response of one or of three labels, or a
level the response lacks, is refused with the reason."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayes_gp import GPClassifier
from bayes_gp.formula import Model
from bayes_gp.formula.engines import FormulaLatentGP, engine_methods
from bayes_gp.latent.model import EPFit
from tests.workflow.test_spec import _assert_same_density

RNG = np.random.default_rng(7)
N = 24
A = np.sort(RNG.uniform(0, 6, N))
B = RNG.normal(size=N)
UP = np.sin(A) + 0.3 * B + 0.4 * RNG.normal(size=N) > 0
DATA = pd.DataFrame({
    "a": A, "b": B,
    "lab": np.where(UP, "up", "down"),
    "flag": UP,
    "grade": np.where(UP, 5, 2),
    "yes": UP.astype(float),
    # category order ("yes" first) is not the sorted order: GPClassifier sorts the values
    "answer": pd.Categorical(np.where(UP, "yes", "no"), categories=["yes", "no"]),
})  # fmt: skip
NEW = pd.DataFrame({"a": [0.3, 1.5, 3.1, 4.7, 5.9], "b": [0.0, 1.0, -1.0, 0.5, 2.0]})
#: Hyperparameters of the fixed-parameter comparisons (no optimisation: the same numbers).
PARAMS = {"ls": 1.3, "eta": 1.7}


def _pair(response, link="logit", formula=None):
    """The formula model of ``response`` on (a, b) and GPClassifier of the same labels."""
    formula = formula or f"{response} ~ gp(a, b)"
    m = Model(formula, DATA, "bernoulli", link=link, priors={"Intercept": 0.0})
    g = GPClassifier(DATA[["a", "b"]], DATA[response], link=link)
    return m, g


@pytest.mark.parametrize("response", ["lab", "flag", "grade", "yes", "answer"])
def test_the_event_is_gpclassifiers_positive_class(response):
    """Strings, booleans, two numbers other than 0/1, 0/1 and a Categorical: the two classes
    and the 0/1 outcome are GPClassifier's (the larger sorted label the event)."""
    m = Model(f"{response} ~ gp(a, b)", DATA, "bernoulli")
    classes = np.unique(np.asarray(DATA[response]))
    np.testing.assert_array_equal(m.classes_, classes)
    assert m.classes_[1] == {"lab": "up", "flag": True, "grade": 5, "yes": 1.0,
                             "answer": "yes"}[response]  # fmt: skip
    np.testing.assert_array_equal(m.y, UP.astype(float))
    assert ("event", f"{classes[1]!r}: the model gives P(y = {classes[1]!r}); the other label "
            f"is {classes[0]!r}") in m.describe()  # fmt: skip


def test_the_event_level_is_picked_by_the_subset_notation():
    """``y['level'] ~ ...`` (formulae's and Bambi's notation) makes ``level`` the event:
    strings by name, numbers by their text; with and without quotes."""
    for formula, event, other in (("lab['down'] ~ gp(a)", "down", "up"),
                                  ("lab[up] ~ gp(a)", "up", "down"),
                                  ("grade['2'] ~ gp(a)", 2, 5)):  # fmt: skip
        m = Model(formula, DATA, "bernoulli")
        assert m.classes_.tolist() == [other, event] and m.parsed.event == str(event)
        column = DATA[formula.split("[")[0]]
        np.testing.assert_array_equal(m.y, (column == event).to_numpy(float))


@pytest.mark.parametrize(
    ("formula", "data", "family", "match"),
    [
        ("lab ~ gp(a)", DATA.assign(lab="up"), "bernoulli",
         r"'lab' has one class only \('up' in every row\)"),
        ("lab ~ gp(a)", DATA.assign(lab=np.arange(N) % 3), "bernoulli",
         r"'lab' has 3 distinct labels \(0, 1, 2\): use family='categorical'"),
        ("lab ~ gp(a)", DATA.assign(lab=[1, "x"] * (N // 2)), "bernoulli",
         "mixes numbers and text"),
        ("lab['left'] ~ gp(a)", DATA, "bernoulli",
         r"names the event level 'left'.*its labels are \['down', 'up'\]"),
        ("grade['up'] ~ gp(a)", DATA, "bernoulli", r"its labels are \['2', '5'\]"),
        ("lab['up'] ~ gp(a)", DATA, "poisson", "picks the event level of a bernoulli response"),
    ],
)  # fmt: skip
def test_a_response_that_is_not_two_labels_is_refused(formula, data, family, match):
    with pytest.raises(ValueError, match=match):
        Model(formula, data, family)


@pytest.mark.parametrize("link", ["logit", "probit"])
def test_the_log_density_is_gpclassifiers(link):
    """The Laplace-integrated log density and its gradient of ``lab ~ gp(a, b)`` (intercept
    fixed at 0, GPClassifier's zero latent location) are GPClassifier's of the labels, to 1e-8
    at five points of the unconstrained space."""
    _assert_same_density(*_pair("lab", link), seed=3)


def test_predictions_give_gpclassifiers_labels_columns_and_scores():
    """At the same hyperparameters: the event's probability, the predicted labels, the
    prediction columns (``p_positive``, ``latent_mean``, ``latent_sd``, ``predicted``), the
    held-out scores and predictive of GPClassifier, and a held-out label not in training is
    refused."""
    m, g = _pair("lab")
    fm = m.fit_laplace(params={f"gp(a, b).{k}": v for k, v in PARAMS.items()})
    fg = g.fit_laplace(params=PARAMS)
    np.testing.assert_allclose(m.predict_proba(NEW, fm), g.predict_proba(NEW, fg), atol=1e-10)
    labels = m.predict_labels(NEW, fm)
    np.testing.assert_array_equal(labels, g.predict(NEW, fg))
    assert set(labels) == {"up", "down"}
    cols_m, cols_g = m.prediction_columns(NEW, fm), g.prediction_columns(NEW, fg)
    assert list(cols_m) == list(cols_g) == ["p_positive", "latent_mean", "latent_sd", "predicted"]
    for name in ("p_positive", "latent_mean", "latent_sd"):
        np.testing.assert_allclose(cols_m[name], cols_g[name], atol=1e-10)
    np.testing.assert_array_equal(cols_m["predicted"], cols_g["predicted"])
    held = np.array(["up", "down", "down", "up", "up"])
    assert m.scores(held, cols_m) == pytest.approx(g.scores(held, cols_g), abs=1e-10)
    pm_, pg = m.held_out_predictive(NEW, held, fm), g.held_out_predictive(NEW, held, fg)
    np.testing.assert_allclose(pm_.probability, pg.probability, atol=1e-10)
    np.testing.assert_array_equal(pm_.outcome, pg.outcome)
    with pytest.raises(ValueError, match=r"held-out labels \['left'\] are not among"):
        m.scores(np.array(["up", "left", "up", "up", "up"]), cols_m)
    assert m.bands(np.linspace(0, 6, 5), fm).positive == "up"


@pytest.mark.parametrize("prior", [False, True])
def test_the_ep_fit_is_gpclassifiers(prior):
    """``fit("ep")`` of the probit bernoulli formula is GPClassifier's EP (LatentGP's
    :meth:`fit_ep`): the same restarts from the same seed reach the same log Z_EP (1e-8),
    hyperparameters (1e-6) and predicted probabilities (1e-8); the fit restores from its
    saved hyperparameters."""
    m, g = _pair("lab", "probit")
    assert m.fit_methods == ("nuts", "nuts_joint", "map", "vi", "ep")
    fm = m.fit("ep", n_restarts=2, prior=prior, random_seed=5)
    fg = g.fit("ep", n_restarts=2, prior=prior, random_seed=5)
    assert isinstance(fm, EPFit) and fm.method == "ep" and fm.converged and fm.prior == prior
    assert fm.log_marginal_likelihood == pytest.approx(fg.log_marginal_likelihood, abs=1e-8)
    for k, v in fg.params.items():
        np.testing.assert_allclose(fm.params[f"gp(a, b).{k}"], v, rtol=1e-6)
    np.testing.assert_allclose(m.predict_proba(NEW, fm), g.predict_proba(NEW, fg), atol=1e-8)
    np.testing.assert_array_equal(m.predict_labels(NEW, fm), g.predict(NEW, fg))
    again = m.restore_fit("ep", fm.params, {"objective": fm.objective, "prior": fm.prior,
                                            "grad_norm": fm.grad_norm})  # fmt: skip
    np.testing.assert_allclose(again.f_mode, fm.f_mode, atol=1e-12)


def test_ep_is_refused_for_another_link_or_family_before_it_is_built():
    """EP's tilted moments are closed-form for the probit bernoulli only: the logit link and
    another family are refused with the reason, before the EP evidence is built, and do not
    list ``ep`` among their methods."""
    logit = Model("lab ~ gp(a)", DATA, "bernoulli")
    counts = Model("grade ~ gp(a)", DATA, "poisson")
    for m, match in ((logit, "family='bernoulli' with the logit link: use link='probit'"),
                     (counts, "family='poisson' with the log link")):  # fmt: skip
        assert "ep" not in m.fit_methods and isinstance(m, FormulaLatentGP)
        with pytest.raises(ValueError, match=match):
            m.fit("ep")
        assert "ep_model" not in m._fns  # refused before the EP model was built
    assert engine_methods("bernoulli", "probit")[-1] == "ep"
    assert engine_methods("bernoulli") == engine_methods("poisson") == FormulaLatentGP.fit_methods
