"""VFE and FITC terms of gaussian formula models (``gp(..., approx="vfe" | "fitc")``): one term
is GPRegression's VFE/FITC (log density and gradient to 1e-10, predictions), a model of several
terms is the NumPy transcription of Titsias's bound and FITC's marginal (R&W eq. 2.39 with the
Nyström covariance), inducing inputs at every row give the exact GP, and the refusals."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bayes_gp import GPRegression
from bayes_gp.formula import Model
from bayes_gp.formula.lowrank import LowRankLikelihood
from bayes_gp.formula.terms import COEF_SCALE
from tests.formula.test_model import DATA, T

Y = DATA["y"].to_numpy()
P1 = {"ls": 1.3, "eta": 0.9, "sigma": 0.3}


def _se(a, b, ls, eta):
    return eta**2 * np.exp(-0.5 * np.subtract.outer(a, b) ** 2 / ls**2)


@pytest.mark.parametrize("kind", ["vfe", "fitc"])
def test_one_term_is_gpregressions_sparse_approximation(kind):
    m = Model(f"y ~ 0 + gp(t, approx='{kind}', m=12)", DATA)
    assert isinstance(m.marginal, LowRankLikelihood)
    assert m.terms_table().loc["gp(t)", "covariance"].startswith(f"{kind.upper()} (12 inducing")
    Z = m._inducing["gp(t)"]
    assert Z.shape == (12, 1)
    ref = GPRegression(T, Y, "expquad", mean="zero", approx=kind, approx_options={"Xu": Z})
    fp = {f"gp(t).{k}" if k != "sigma" else k: v for k, v in P1.items()}
    lf, gf = m.log_marginal_likelihood(fp, eval_gradient=True)
    lr, gr = ref.log_marginal_likelihood(P1, eval_gradient=True)
    np.testing.assert_allclose(lf, lr, rtol=1e-10)
    for k in P1:
        np.testing.assert_allclose(gf[k if k == "sigma" else f"gp(t).{k}"], gr[k], rtol=1e-8)
    fit = m.fit("map")
    tn = np.linspace(-1.0, 11.0, 7)  # beyond the data too: the prior variance is the kernel's
    a = m.predict(pd.DataFrame({"t": tn}), fit)
    b = ref.predict(tn, dataclasses.replace(fit, params={
        k.removeprefix("gp(t)."): v for k, v in fit.params.items()}))  # fmt: skip
    np.testing.assert_allclose(a.mean, b.mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(a.var, b.var, rtol=1e-8, atol=1e-10)


FORMULA = ("y ~ x1 + gp(t, approx='vfe', m=10) + gp(t, by=site, approx='fitc', m=6, name='dev')"
           " + (1|site)")  # fmt: skip
PARAMS = {"gp(t).ls": 1.2, "gp(t).eta": 0.8, "dev.ls": 0.9, "dev.eta": 0.5, "1|site.sigma": 0.7,
          "sigma": 0.3}  # fmt: skip


def _reference(m, p):
    """Titsias's bound with FITC's diagonal, every term's covariance written out."""
    s = float(np.std(Y))
    jit = max(1e-6 * s**2, float(m.jitter))
    n = len(T)

    def nystrom(Z, ls, eta):
        Kzz = _se(Z, Z, ls, eta) + jit * np.eye(len(Z))
        Kzx = _se(Z, T, ls, eta)
        Q = Kzx.T @ np.linalg.solve(Kzz, Kzx)
        return Q, eta**2 - np.diag(Q)

    Qv, rv = nystrom(m._inducing["gp(t)"][:, 0], p["gp(t).ls"], p["gp(t).eta"])
    Qf, rf = nystrom(m._inducing["dev"][:, 0], p["dev.ls"], p["dev.eta"])
    same = np.equal.outer(DATA["site"].to_numpy(), DATA["site"].to_numpy())
    x1 = DATA["x1"].to_numpy()
    D = p["sigma"] ** 2 + m.jitter + rf
    C = (Qv + Qf * same + p["1|site.sigma"] ** 2 * same + (COEF_SCALE * s) ** 2
         + (COEF_SCALE * s / x1.std()) ** 2 * np.outer(x1, x1) + np.diag(D))  # fmt: skip
    mean = np.full(n, Y.mean())
    return stats.multivariate_normal(mean, C).logpdf(Y) - 0.5 * np.sum(rv / D)


def test_several_terms_are_the_bound_written_out():
    m = Model(FORMULA, DATA)
    assert isinstance(m.marginal, LowRankLikelihood)
    engine = dict(m.describe())["engine"]
    assert engine.startswith("FITC's marginal likelihood with Titsias's trace term")
    assert "FITC terms, VFE terms" in engine and "rank r = 33" in engine  # 10 + 3 x 6 + 3 + 1 + 1
    np.testing.assert_allclose(m.log_marginal_likelihood(PARAMS), _reference(m, PARAMS),
                               rtol=1e-10)  # fmt: skip
    p2 = {**PARAMS, "gp(t).ls": 0.3}
    np.testing.assert_allclose(m.log_marginal_likelihood(p2), _reference(m, p2), rtol=1e-10)


@pytest.mark.parametrize("kind", ["vfe", "fitc"])
def test_inducing_inputs_at_every_row_give_the_exact_gp(kind):
    n = len(np.unique(T))
    m = Model(f"y ~ 0 + gp(t, approx='{kind}', m={n})", DATA)
    exact = Model("y ~ 0 + gp(t)", DATA)
    p = {"gp(t).ls": 1.3, "gp(t).eta": 0.9, "sigma": 0.3}
    # equal but for the jitter on K_ZZ (1e-6 of the data's variance): ~5e-6 relative here,
    # against 2e-3 with 12 inducing inputs
    np.testing.assert_allclose(m.log_marginal_likelihood(p), exact.log_marginal_likelihood(p),
                               rtol=2e-5)  # fmt: skip


def test_per_term_predictions_add_up_and_the_check_speaks_the_formula():
    m = Model("y ~ x1 + gp(t, approx='fitc', m=4)", DATA)
    fit = m.fit("map")
    new = pd.DataFrame({"t": [1.0, 5.0], "x1": [0.0, 1.0]})
    parts = m.predict(new, fit, terms=m.term_names)
    total = m.predict(new, fit)
    np.testing.assert_allclose(sum(parts[t].mean for t in parts), total.mean, rtol=1e-8)
    checks = {c.name: c for c in m.approximation_checks(fit)}
    check = checks["FITC inducing-input coverage: gp(t)"]
    # 4 inducing inputs over 10 units of t against a length-scale near 1: far from covered
    assert check.status == "warn" and check.value > 0.6
    assert "gp(t, approx='fitc', m=" in check.advice
    # and against the exact twin (bayes_gp.formula.checks): measured 1.26 posterior sd
    error = checks["FITC error vs exact GP: gp(t)"]
    assert error.status == "fail" and "refit with gp(t, approx='fitc', m=8)" in error.advice
    fine = Model("y ~ x1 + gp(t, approx='fitc', m=12)", DATA)
    error = {c.name: c for c in fine.approximation_checks(fine.fit("map"))}
    assert error["FITC error vs exact GP: gp(t)"].value < 0.1


@pytest.mark.parametrize(
    ("formula", "kwargs", "match"),
    [
        ("y ~ gp(t) + gp(x1, approx='vfe')", {}, r"\['gp\(t\)'\] are exact GP terms"),
        ("y ~ gp(t, approx='vfe')", {"structure": "grouped"}, "no place for them"),
        ("counts ~ gp(t, approx='fitc')", {"family": "poisson"}, "use approx='hsgp'"),
        ("y ~ gp(t, site, approx='vfe')", {}, "no basis for the factor input 'site'"),
        ("y ~ gp(t, approx='vfe', c=2.0)", {}, "boundary factor"),
        ("y ~ gp(t, approx='sor')", {}, "'hsgp' or 'vfe' or 'fitc'"),
    ],
)
def test_refusals_say_why(formula, kwargs, match):
    with pytest.raises(ValueError, match=match):
        Model(formula, DATA, **kwargs)
