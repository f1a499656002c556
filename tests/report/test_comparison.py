"""``Report.comparison`` is the comparison the report shows whenever it compares fits (issue 37):
``az.compare`` when it covers every fit, else the LOO-score table of all of them (a MAP fit
beside a NUTS one was ``None`` although ``loo_table`` was filled)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from bayes_gp import GPRegression
from bayes_gp.report import report
from bayes_gp.report.comparison import shown_comparison
from tests.report.synthetic import datatree


def _table(names):
    return pd.DataFrame({"elpd": np.arange(len(names), 0, -1.0)}, index=pd.Index(names, name="fit"))


def test_shown_comparison_is_the_table_that_covers_every_fit():
    both, nuts = _table(["MAP", "NUTS"]), _table(["NUTS A", "NUTS B"])
    assert shown_comparison(None, None) is None  # nothing compared
    assert shown_comparison(None, both) is both  # MAP beside NUTS: the LOO table
    assert shown_comparison(nuts, _table(["NUTS A", "NUTS B"])) is nuts  # az.compare covers all
    mixed = _table(["NUTS A", "NUTS B", "MAP"])
    assert shown_comparison(nuts, mixed) is mixed  # az.compare leaves the MAP fit out
    assert shown_comparison(nuts, None) is nuts


@pytest.fixture(scope="module")
def map_and_nuts():
    """A MAP fit and a synthetic NUTS tree of the same 12 observations (its log likelihood the
    Gaussian density of y around draws near the data): no sampling."""
    rng = np.random.default_rng(0)
    x = np.linspace(0, 5, 12)
    y = np.sin(x) + 0.1 * rng.standard_normal(12)
    gp = GPRegression(x, y, "expquad")
    fit = gp.fit_map(n_restarts=1, random_seed=0)
    mu = y + 0.05 * rng.standard_normal((2, 100, 12))
    params = {n: np.abs(rng.normal(float(np.ravel(fit.params[n])[0]), 0.05, (2, 100)))
              for n in ("ls", "eta", "sigma")}  # fmt: skip
    tree = datatree(chains=2, draws=100, params=params, log_lik=norm.logpdf(y, mu, 0.2))
    return gp, fit, tree


def test_map_and_nuts_report_has_its_comparison(map_and_nuts):
    gp, fit, tree = map_and_nuts
    rep = report({"MAP": fit, "NUTS": tree}, model=gp, figures=False)
    assert rep.loo_table is not None and rep.arviz_comparison is None
    assert rep.comparison is rep.loo_table
    assert set(rep.comparison.index) == {"MAP", "NUTS"}
    assert {"elpd", "se", "elpd_diff", "dse"} <= set(rep.comparison.columns)
    assert "MAP vs NUTS: LOO predictive scores" in rep.html
    one = report(fit, model=gp, figures=False)
    assert one.comparison is None and one.loo_table is None  # one fit: nothing compared
