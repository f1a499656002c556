"""Bad input to a formula model gets a ValueError that names the term or column at fault."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayes_gp.formula import Model, parse_formula

N = 12
DATA = pd.DataFrame(
    {
        "t": np.arange(N, dtype=float),
        "x1": np.linspace(-1, 1, N),
        "site": list("aabbccddeeff"),
        "y": np.sin(np.arange(N)),
        "counts": np.arange(N, dtype=float) % 4,
        "succ": np.full(N, 2.0),
        "trials": np.full(N, 5.0),
        "yes": np.arange(N) % 2 * 1.0,
        "prop": np.linspace(0.1, 0.9, N),
        "pos": np.linspace(0.5, 3.0, N),
    }
)


@pytest.mark.parametrize(
    "formula,match",
    [
        ("gp(t)", "response on the left"),
        ("~ gp(t)", "cannot parse|response"),
        (
            "y ~ gp(t, width=2)",
            r"no option \['width'\].*\['by', 'kernel', 'ard', 'name', 'approx', 'm', 'c', "
            r"'cat', 'rank', 'pooling'\]",
        ),
        ("y ~ gp(np.log(t))", "column names as its inputs"),
        ("y ~ gp(t, t)", "lists a column twice"),
        ("y ~ gp(t, kernel='expquad') + gp(t)", "two GP terms named alike.*name='trend'"),
        ("y ~ gp(t, approx='sor')", r"gp\(approx=...\) takes 'hsgp' or 'vfe' or 'fitc'"),
        ("y ~ gp(t, m=10)", r"gp\(m=...\) goes with approx='hsgp'"),
        ("y ~ gp(t, approx='hsgp', m=0)", "positive whole number"),
        ("y ~ gp(t, approx='hsgp', c=0.5)", "a number above 1"),
        ("y ~ gp(t, name='a.b')", r"gp\(name=...\) takes a non-empty string without '\.'"),
        ("y ~ x1 + gp(t, name='x1')", r"two terms named \['x1'\]"),
        ("y ~ gp(t, ard=3)", "True or False"),
        ("np.log(y) ~ gp(t)", "response .* must be a column name"),
    ],
)
def test_formula_errors(formula, match):
    with pytest.raises(ValueError, match=match):
        Model(formula, DATA)


def test_unknown_column_names_the_term_using_it():
    with pytest.raises(ValueError, match=r"no column 'tt' \(used by gp\(tt\)\)"):
        Model("y ~ gp(tt)", DATA)
    with pytest.raises(ValueError, match=r"no column 'grp' \(used by 1\|grp\)"):
        Model("y ~ gp(t) + (1|grp)", DATA)


def test_nan_and_infinite_values_name_the_column_and_rows():
    d = DATA.copy()
    d.loc[[3, 7], "x1"] = [np.nan, np.inf]
    with pytest.raises(ValueError, match=r"'x1' \(used by the common effects\).*rows \[3, 7\]"):
        Model("y ~ x1 + gp(t)", d)
    d = DATA.copy()
    d.loc[5, "site"] = None
    with pytest.raises(ValueError, match=r"'site' \(used by gp\(t, by=site\)\).*rows \[5\]"):
        Model("y ~ gp(t, by=site)", d)


def test_a_categorical_column():
    """In gp() it is a factor input (gp(site) the exchangeable random effect of the levels,
    tests/formula/test_categorical_gp.py); as a varying coefficient it is refused."""
    assert Model("y ~ gp(site)", DATA).hyperparameters == ["gp(site).eta", "gp(site).rho",
                                                           "sigma"]  # fmt: skip
    with pytest.raises(ValueError, match=r"site\|t uses the column 'site', which is not "
                                         r"numeric.*gp\(t, site\)"):  # fmt: skip
        Model("y ~ (site | t)", DATA)


def test_by_level_with_one_row():
    d = DATA.copy()
    d.loc[0, "site"] = "lonely"
    with pytest.raises(
        ValueError, match=r"gp\(t, by=site\).*\['a', 'lonely'\] of 'site' have one row"
    ):
        Model("y ~ gp(t, by=site)", d)


@pytest.mark.parametrize(
    "family,formula,edit,match",
    [
        ("poisson", "counts ~ gp(t)", ("counts", 3, -1.0), "non-negative whole counts.*'counts' has -1 in row 3"),
        ("negative_binomial", "counts ~ gp(t)", ("counts", 2, 1.5), "whole counts.*1.5 in row 2"),
        ("bernoulli", "yes ~ gp(t)", ("yes", 4, 2.0), "'yes' has 3 distinct labels.*family='categorical'"),
        ("bernoulli", "yes ~ gp(t)", ("yes", slice(None), 0.0), "one class only"),
        ("binomial", "p(succ, trials) ~ gp(t)", ("succ", 1, 6.0), r"at most the trials \('trials'\).*row 1"),
        ("binomial", "p(succ, trials) ~ gp(t)", ("trials", 0, 0.0), "positive whole trials.*has 0 in row 0"),
        ("beta", "prop ~ gp(t)", ("prop", 5, 1.0), "strictly between 0 and 1.*'prop' has 1 in row 5"),
        ("gamma", "pos ~ gp(t)", ("pos", 2, 0.0), "positive values.*'pos' has 0 in row 2"),
        ("zero_inflated_poisson", "counts ~ gp(t)", ("counts", 1, 2.5), "whole counts.*2.5 in row 1"),
        ("ordinal", "counts ~ gp(t)", ("counts", 1, 2.5), "response 'counts'.*y\\[1\\] = 2.5 is not an integer"),
    ],
)  # fmt: skip
def test_a_response_the_family_cannot_have(family, formula, edit, match):
    d = DATA.copy()
    col, row, value = edit
    d.loc[row, col] = value
    with pytest.raises(ValueError, match=match):
        Model(formula, d, family=family)


def test_family_and_response_form_must_agree():
    with pytest.raises(ValueError, match="`family` must be one of"):
        Model("y ~ gp(t)", DATA, family="skew_normal")
    with pytest.raises(ValueError, match="binomial response"):
        Model("p(succ, trials) ~ gp(t)", DATA, family="poisson")
    with pytest.raises(ValueError, match=r"needs the response p\(successes, trials\)"):
        Model("succ ~ gp(t)", DATA, family="binomial")
    with pytest.raises(ValueError, match=r"'site' has 6 distinct labels.*family='categorical'"):
        Model("site ~ gp(t)", DATA, family="bernoulli")


def test_the_ordinal_family_has_no_intercept():
    """The cut-points carry the location: an Intercept prior is refused, and the fitted
    model's prior names have no Intercept."""
    d = DATA.assign(grade=np.minimum(np.arange(len(DATA)) % 4, 3).astype(float))
    with pytest.raises(ValueError, match="ordinal family has no intercept"):
        Model("grade ~ gp(t)", d, family="ordinal", priors={"Intercept": 0.0})
    assert "Intercept" not in Model("grade ~ gp(t)", d, family="ordinal").prior_names


def test_a_prior_for_a_term_that_does_not_exist():
    with pytest.raises(ValueError, match=r"names \['gp\(x\).ls'\].*'gp\(t\).ls'"):
        Model("y ~ gp(t)", DATA, priors={"gp(x).ls": 1.0})
    with pytest.raises(TypeError, match=r"pm\.Normal\.dist"):
        import pymc as pm

        Model("y ~ x1 + gp(t)", DATA, priors={"x1": pm.StudentT.dist(nu=3, mu=0, sigma=1)})


def test_kernel_name_without_object():
    with pytest.raises(ValueError, match=r"kernel=k names no kernel object.*kernels=\{'k'"):
        Model("y ~ gp(t, kernel=k)", DATA)
    with pytest.raises(ValueError, match="unknown kernel 'maternxx'"):
        Model("y ~ gp(t, kernel='maternxx')", DATA)


def test_new_data_errors_name_the_column_and_the_term():
    m = Model("y ~ x1 + gp(t) + (1|site)", DATA)
    fit = m.fit("map")
    with pytest.raises(ValueError, match=r"new data has no column 'x1'"):
        m.predict(pd.DataFrame({"t": [1.0], "site": ["a"]}), fit)
    with pytest.raises(ValueError, match=r"'t' \(used by gp\(t\)\).*new data, rows \[1\]"):
        m.predict(pd.DataFrame({"t": [1.0, np.nan], "site": ["a", "b"], "x1": [0.0, 0.0]}), fit)
    with pytest.raises(ValueError, match=r"no term 'gp\(x\)'.*\['gp\(t\)', '1\|site'"):
        m.predict(pd.DataFrame({"t": [1.0], "site": ["a"], "x1": [0.0]}), fit, terms=["gp(x)"])


def test_parse_splits_the_terms():
    p = parse_formula(
        "y ~ x1 + C(site) + gp(t, by=site, kernel='matern32') + (x1|site) + offset(log(t))"
    )
    assert p.response == "y" and p.intercept and p.fixed_terms == ("x1", "C(site)")
    assert [t.name for t in p.gp_terms] == ["gp(t, by=site)"]
    assert p.gp_terms[0].kernel == "matern32"
    assert [(g.name, g.expr, g.factor) for g in p.group_terms] == [
        ("1|site", None, ("site",)),
        ("x1|site", "x1", ("site",)),
    ]
    assert p.offset_name == "offset(log(t))"


def test_gp_terms_named_by_the_user():
    m = Model("y ~ gp(t, name='trend') + gp(t, kernel='periodic', name='season')", DATA)
    assert m.term_names[:2] == ["trend", "season"]
    assert {"trend.ls", "season.period"} <= set(m.hyperparameters)


def test_a_backtick_in_a_quoted_name_is_written_twice():
    """```x``1``` is the column ``x`1``: every field of the parsed formula names the columns as
    the data does (gp inputs, ``by=``, the term's name, a group term, the offset, the response
    and trials), a string literal's backtick is left alone, and a common effect with such a
    column is refused by name (formulae builds that design matrix from the names)."""
    from bayes_gp.formula.parse import quote_column

    assert [quote_column(c) for c in ("t", "my col", "x`1", "`", "class")] == [
        "t", "`my col`", "`x``1`", "````", "`class`"]  # fmt: skip
    formula = ("p(`s``1`, `n```) ~ gp(`x``1`, t, by=`g``1`) + gp(t, name='a`b') + (1 | `g``1`)"
               " + offset(log(`e``1`))")  # fmt: skip
    p = parse_formula(formula)
    assert (p.formula, p.response, p.trials) == (formula, "s`1", "n`")
    assert [(t.name, t.variables, t.by) for t in p.gp_terms] == [
        ("gp(x`1, t, by=g`1)", ("x`1", "t"), "g`1"), ("a`b", ("t",), None)]  # fmt: skip
    assert [(g.name, g.factor) for g in p.group_terms] == [("1|g`1", ("g`1",))]
    assert p.offset_name == "offset(log(e`1))" and str(p.offset) == "log(e`1)"
    assert p.variables == ["s`1", "n`", "x`1", "t", "g`1", "e`1"]
    with pytest.raises(ValueError, match=r"common effect 'x`1' of 'y ~ `x``1` \+ gp\(t\)'"):
        parse_formula("y ~ `x``1` + gp(t)")
    with pytest.raises(ValueError, match=r"lists a column twice in 'y ~ gp\(`x``1`, `x``1`\)'"
                       r": \['x`1', 'x`1'\]"):  # fmt: skip
        parse_formula("y ~ gp(`x``1`, `x``1`)")


def test_two_gps_on_the_same_inputs_are_told_apart_by_their_kernels():
    p = parse_formula("y ~ gp(t) + gp(t, kernel='periodic')")
    assert [t.name for t in p.gp_terms] == ["gp(t, kernel='expquad')", "gp(t, kernel='periodic')"]


def test_a_date_column_is_a_gp_input_in_years():
    """A datetime column enters gp() as fractional years (not NumPy's nanoseconds): the model
    equals the one on the decimal years, and new data must give dates too."""
    from bayes_gp.formula.design import decimal_years

    dates = pd.Series(pd.to_datetime(["2020-01-01 00:00", "2020-07-02 00:00", "2021-01-01 00:00"]))
    np.testing.assert_allclose(decimal_years(dates), [2020.0, 2020.5, 2021.0], atol=1e-12)
    d = DATA.assign(day=pd.date_range("2000-01-01", periods=N, freq="MS"))
    d["years"] = decimal_years(d["day"])
    by_date = Model("y ~ gp(day)", d)
    by_year = Model("y ~ gp(years)", d)
    assert "day in years" in by_date.terms_table().loc["gp(day)", "covariance"]
    p_date, p_year = {"gp(day).ls": 0.4, "gp(day).eta": 0.9, "sigma": 0.3}, {
        "gp(years).ls": 0.4, "gp(years).eta": 0.9, "sigma": 0.3}  # fmt: skip
    np.testing.assert_allclose(by_date.log_marginal_likelihood(p_date),
                               by_year.log_marginal_likelihood(p_year), rtol=1e-12)  # fmt: skip
    fit = by_date.fit("map")
    with pytest.raises(ValueError, match="holds dates in the training data"):
        by_date.predict(pd.DataFrame({"day": [2001.5]}), fit)
    assert np.isfinite(by_date.predict(pd.DataFrame({"day": pd.to_datetime(["2001-06-01"])}),
                                       fit).mean).all()  # fmt: skip
