"""Formula models of the censored families (issue 39): ``Model("time ~ gp(age)", data,
family="weibull", censored="status")`` is LatentGP's censored model, and bad censoring
arguments are refused before compiling."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayes_gp import LatentGP
from bayes_gp.formula import Model
from tests.formula.test_model import _logp_and_grad

RNG = np.random.default_rng(21)
N = 30
AGE = np.sort(RNG.uniform(40.0, 80.0, N))
F = 1.0 + np.sin(AGE / 6.0)
_T = np.exp(F) * RNG.weibull(1.8, N)
_C = RNG.exponential(5.0, N)
Y = F + 0.3 * RNG.standard_normal(N)
DATA = pd.DataFrame({
    "age": AGE,
    "time": np.minimum(_T, _C),
    "status": (_C < _T).astype(int),
    "conc": Y,
    "code": np.resize([0, -1, 0, 1, 2], N),
    "hi": np.where(np.resize([0, -1, 0, 1, 2], N) == 2, Y + 0.5, np.nan),
})  # fmt: skip

CASES = [
    ("weibull", "time ~ 0 + gp(age)", dict(censored="status"), {"shape": 1.7}),
    # lognormal takes the weibull's path (FAMILY_PARAMS, the log link); tests/latent checks it
    ("censored_gaussian", "conc ~ 0 + gp(age)", dict(censored="code", upper="hi"),
     {"sigma": 0.3}),
]  # fmt: skip


@pytest.mark.parametrize("family,formula,kwargs,extra", CASES, ids=[c[0] for c in CASES])
def test_censored_families_are_latentgp_log_density_and_gradient(family, formula, kwargs,
                                                                 extra):  # fmt: skip
    """The Laplace-integrated log density and its gradient equal LatentGP's with the same
    censoring columns (1e-10, 1e-8)."""
    fm = Model(formula, DATA, family=family, **kwargs)
    X = DATA[["age", *kwargs.values()]]
    cls = LatentGP(X, DATA[formula.split()[0]].to_numpy(float), "expquad", family, mean="zero",
                   **kwargs)  # fmt: skip
    np.testing.assert_array_equal(fm.likelihood.censored, cls.likelihood.censored)
    lp_f, g_f = _logp_and_grad(fm.model, {"gp(age).ls": 9.0, "gp(age).eta": 0.7, **extra})
    lp_c, g_c = _logp_and_grad(cls.model, {"ls": 9.0, "eta": 0.7, **extra})
    np.testing.assert_allclose(lp_f, lp_c, rtol=1e-10)
    np.testing.assert_allclose(g_f, g_c, rtol=1e-8, atol=1e-10)


def test_weibull_formula_fit_predicts_times():
    """A MAP fit with an intercept: a shape in a plausible range and predicted times whose
    94% interval holds the mean, at new rows without the status column."""
    m = Model("time ~ gp(age)", DATA, family="weibull", censored="status")
    fit = m.fit("map", random_seed=0)
    assert 0.8 < float(fit.params["shape"]) < 4.0, fit.params
    p = m.predict(pd.DataFrame({"age": [50.0, 70.0]}), fit)
    assert np.all((0 < p.lower) & (p.lower < p.mean) & (p.mean < p.upper))


@pytest.mark.parametrize(
    "family,kwargs,match",
    [
        ("poisson", dict(censored="status"), "`censored` applies to the weibull, lognormal, "
         "censored_gaussian families, not to 'poisson'"),
        ("weibull", dict(upper="hi"), "`upper` applies to the censored_gaussian family"),
        ("weibull", dict(censored="event"), "names the column 'event', which the data does "
         "not have"),
        ("weibull", dict(censored="code"), r"0 \(event\), 1 \(right-censored\)"),
        ("censored_gaussian", dict(censored="code"), "needs `upper`"),
    ],
)  # fmt: skip
def test_bad_censoring_refused(family, kwargs, match):
    formula = "conc ~ gp(age)" if family == "censored_gaussian" else "time ~ gp(age)"
    if family == "poisson":
        formula = "status ~ gp(age)"
    with pytest.raises(ValueError, match=match):
        Model(formula, DATA, family=family, **kwargs)


def test_non_positive_survival_time_refused():
    bad = DATA.assign(time=DATA["time"].where(DATA.index != 3, 0.0))
    with pytest.raises(ValueError, match="positive survival times; the column 'time' has 0 in "
                                         "row 3"):  # fmt: skip
        Model("time ~ gp(age)", bad, family="weibull", censored="status")


def test_command_line_specifications_refuse_censored_models(tmp_path, capsys):
    """A CSV specification (``bayes-gp fit``) cannot name the censoring column yet: the
    censored families and likelihoods are refused with the Python route, before reading the
    file; the command line words it with its own option names."""
    from bayes_gp.cli import main
    from bayes_gp.workflow import CSVModel, FormulaCSVModel

    csv = tmp_path / "surv.csv"
    DATA.to_csv(csv, index=False)
    with pytest.raises(ValueError, match=r"`family` 'weibull' or 'lognormal' or "
                                         r"'censored_gaussian' needs each row's censoring code"):
        FormulaCSVModel(str(csv), "time ~ gp(age)", "lognormal")
    with pytest.raises(ValueError, match=r"`likelihood` 'weibull'.*bayes_gp.LatentGP"):
        CSVModel(str(csv), ("age",), "time", likelihood="weibull")
    code = main(["fit", "--formula", "time ~ gp(age)", "--data", str(csv), "--family",
                 "weibull", "--out", str(tmp_path / "out")])  # fmt: skip
    assert code == 1
    words = "--family weibull or lognormal or censored_gaussian needs each row's censoring code"
    assert words in capsys.readouterr().err
