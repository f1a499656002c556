"""HSGP terms and the low-rank engine of gaussian formula models: an HSGP term is
GPRegression's HSGP (log density to 1e-10), the low-rank Woodbury engine equals the dense
likelihood of the same bases (log density, gradient, per-term predictions, LOO), the engine is
chosen only where the bases are narrower than the data, and new inputs must stay in the box."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayes_gp import GPRegression
from bayes_gp.formula import Model
from bayes_gp.formula.lowrank import LowRankLikelihood
from bayes_gp.solvers.exact import ExactLikelihood
from tests.formula.agreement import assert_same_model
from tests.formula.test_model import DATA, T

FORMULA = ("y ~ x1 + gp(t, approx='hsgp', m=25, c=2.5)"
           " + gp(t, by=site, approx='hsgp', m=10, c=2.5) + (1|site)")  # fmt: skip
PARAMS = {"gp(t).ls": 1.1, "gp(t).eta": 0.8, "gp(t, by=site).ls": 0.9, "gp(t, by=site).eta": 0.5,
          "1|site.sigma": 0.7, "sigma": 0.3}  # fmt: skip


def test_an_hsgp_term_is_gpregressions_hsgp():
    m = Model("y ~ 0 + gp(t, approx='hsgp', m=30, c=2.0)", DATA)
    assert isinstance(m.marginal, LowRankLikelihood)  # 30 basis functions < 36 rows
    assert m.terms_table().loc["gp(t)", "covariance"].startswith("HSGP (m = [30], c = [2.0])")
    ref = GPRegression(T, DATA["y"].to_numpy(), "expquad", mean="zero", approx="hsgp",
                       approx_options={"m": [30], "c": [2.0]})  # fmt: skip
    p = {"gp(t).ls": 1.3, "gp(t).eta": 0.9, "sigma": 0.3}
    np.testing.assert_allclose(m.log_marginal_likelihood(p),
                               ref.log_marginal_likelihood({"ls": 1.3, "eta": 0.9, "sigma": 0.3}),
                               rtol=1e-10)  # fmt: skip


def test_lowrank_equals_the_dense_likelihood_of_the_same_bases():
    lr = Model(FORMULA, DATA, structure="lowrank")
    de = Model(FORMULA, DATA, structure="dense")
    assert isinstance(lr.marginal, LowRankLikelihood) and isinstance(de.marginal, ExactLikelihood)
    assert "rank r = 60" in dict(lr.describe())["engine"]  # 25 + 3 x 10 + 3 + 1 + 1
    assert_same_model(lr, de, PARAMS, rtol=1e-10, grad_rtol=1e-9)
    # bases wider than the data (60 > 36 rows): by default the dense factor is used
    assert isinstance(Model(FORMULA, DATA).marginal, ExactLikelihood)


def test_hsgp_options_and_the_box():
    with pytest.raises(ValueError, match="structure='lowrank' needs every gp"):
        Model("y ~ gp(t) + gp(t, approx='hsgp', name='b')", DATA, structure="lowrank")
    m = Model("y ~ gp(t, approx='hsgp', m=20, c=1.5)", DATA)
    fit = m.fit("map")
    lo, hi = T.min(), T.max()
    half = 0.5 * (hi - lo)
    inside = pd.DataFrame({"t": [lo - 0.4 * half]})
    assert np.isfinite(m.predict(inside, fit).mean).all()
    with pytest.raises(ValueError, match=r"outside the HSGP box.*gp\(..., c=...\)"):
        m.predict(pd.DataFrame({"t": [hi + 0.6 * half]}), fit)


def test_post_fit_checks_of_each_hsgp_term_in_formula_words():
    """Each HSGP term gets the resolution and boundary checks of GPRegression's HSGP, named by
    the term, with advice in the formula's syntax; a basis too coarse for the fitted length-scale
    fails (m = 10 functions for a per-site curve of length-scale ~ 1), a fine one passes."""
    m = Model("y ~ x1 + gp(t, approx='hsgp', m=40, c=3) + gp(t, by=site, approx='hsgp', m=10, "
              "c=2.5) + (1|site)", DATA)  # fmt: skip
    fit = m.fit("map")
    checks = {c.name: c for c in m.approximation_checks(fit)}
    assert set(checks) == {f"HSGP {k}: {t}" for k in ("resolution (ls vs basis)",
                                                      "boundary (c vs ls)", "error vs exact GP")
                           for t in ("gp(t)", "gp(t, by=site)")}  # fmt: skip
    assert checks["HSGP resolution (ls vs basis): gp(t)"].status == "ok"
    coarse = checks["HSGP resolution (ls vs basis): gp(t, by=site)"]
    assert coarse.status == "fail" and "refit with gp(t, by=site, approx='hsgp', m=" in coarse.advice
    # against the exact twin (bayes_gp.formula.checks): the fine basis is the GP (measured
    # 0.004 posterior sd); the coarse one errs by 0.044 sd only, its amplitude being small
    # (eta 0.11 against 0.86): the resolution rule is the conservative one
    assert checks["HSGP error vs exact GP: gp(t)"].value < 0.02
    assert 0.02 < checks["HSGP error vs exact GP: gp(t, by=site)"].value < 0.1
    four = Model("y ~ x1 + gp(t, approx='hsgp', m=4, c=1.2)", DATA)
    wrong = {c.name: c for c in four.approximation_checks(four.fit("map"))}
    wrong = wrong["HSGP error vs exact GP: gp(t)"]  # measured 0.74 sd, at the data's edge
    assert wrong.status == "fail" and "refit with gp(t, approx='hsgp', m=6, c=1.70)" in wrong.advice
    exact = Model("y ~ x1 + gp(t) + (1|site)", DATA)
    assert exact.approximation_checks(exact.fit("map")) == []


def test_a_model_too_large_for_the_dense_factor_takes_hsgp_terms(monkeypatch):
    """Where the dense exact GP would not fit in memory (the limit lowered here to 35 rows'
    worth) and no exact structured engine applies, every exact GP term takes its HSGP
    approximation, with a warning that says so and how to choose."""
    from bayes_gp.solvers import exact

    monkeypatch.setattr(exact, "MAX_DENSE_BYTES", exact.dense_memory_bytes(35))
    with pytest.warns(UserWarning, match=r"\['gp\(t\)'\] use their HSGP approximation"):
        m = Model("y ~ x1 + gp(t)", DATA)
    assert "HSGP" in m.terms_table().loc["gp(t)", "covariance"]
    # its bases are wider than the data (the rule's m), but the dense factor does not fit:
    # the low-rank engine all the same
    assert isinstance(m.marginal, LowRankLikelihood)
