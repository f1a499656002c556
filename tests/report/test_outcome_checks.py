"""Outcome-specific posterior predictive checks (``bayes_gp.report.outcome_checks``): the
Kaplan–Meier estimate against statsmodels', each check's verdict on replicates that reproduce
the data and on replicates that do not, and the checks in a report of real fits (a Poisson fit
of zero-inflated counts warned, the zero-inflated fit not)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from statsmodels.duration.survfunc import SurvfuncRight

from bayes_gp import LatentGP, report
from bayes_gp.latent.censored import Weibull
from bayes_gp.latent.likelihoods import Poisson
from bayes_gp.latent.ordinal import Ordinal
from bayes_gp.report.outcome_checks import _counts, _ordinal, _survival, kaplan_meier

RNG = np.random.default_rng(8)


def test_kaplan_meier_is_statsmodels():
    t = np.round(RNG.exponential(3.0, 60), 1)  # ties included
    event = RNG.uniform(size=60) < 0.7
    ref = SurvfuncRight(t, event.astype(int))
    grid = np.linspace(0.0, t.max(), 50)
    expected = np.array([1.0 if g < ref.surv_times[0] else
                         ref.surv_prob[np.searchsorted(ref.surv_times, g, side="right") - 1]
                         for g in grid])  # fmt: skip
    np.testing.assert_allclose(kaplan_meier(t, event, grid), expected, rtol=1e-12)


def test_ordinal_category_frequencies():
    y = np.repeat([0, 1, 2], [30, 50, 20])
    lik = Ordinal(y)
    good = np.stack([RNG.permutation(y) for _ in range(200)])  # the same frequencies
    noisy = np.stack([RNG.choice(3, 100, p=[0.3, 0.5, 0.2]) for _ in range(200)])
    check = _ordinal(lik, noisy)
    assert [r[0] for r in check.rows] == ["n(y = 0)", "n(y = 1)", "n(y = 2)"]
    assert check.verdicts[0].status == "ok"
    assert check.rows[1][1] == 50 and abs(check.rows[1][2] - 50) < 2
    wrong = np.stack([RNG.choice(3, 100, p=[0.6, 0.3, 0.1]) for _ in range(200)])
    bad = _ordinal(lik, wrong).verdicts[0]
    assert bad.status == "warn" and "categories 0" in bad.advice
    assert _ordinal(lik, good).verdicts[0].status == "ok"


def test_counts_zeros_and_dispersion():
    y = np.where(RNG.uniform(size=200) < 0.4, 0, RNG.poisson(4.0, 200)).astype(float)
    lik = Poisson(y)
    poisson = RNG.poisson(y.mean(), (300, 200)).astype(float)  # no extra zeros
    check = _counts(lik, poisson)
    zeros, disp = check.verdicts
    assert zeros.status == "warn" and "zero-inflated" in zeros.advice
    assert disp.status == "warn" and "more dispersed" in disp.advice
    zi = np.where(RNG.uniform(size=(300, 200)) < 0.4, 0, RNG.poisson(4.0, (300, 200)))
    assert [v.status for v in _counts(lik, zi.astype(float)).verdicts] == ["ok", "ok"]


def test_survival_curve_censored_where_the_data_were():
    n = 150
    t_event = 3.0 * RNG.weibull(1.5, n)
    cens = RNG.exponential(4.0, n)
    t, status = np.minimum(t_event, cens), (cens < t_event).astype(float)
    lik = Weibull(t, censored=status)
    same = 3.0 * RNG.weibull(1.5, (200, n))  # replicates of the uncensored times
    check = _survival(lik, same)
    assert check.verdicts[0].status == "ok" and check.verdicts[0].value >= 0.8
    assert check.rows[0][:3] == ("events / censored", float((status == 0).sum()),
                                 float(status.sum()))  # fmt: skip
    late = 6.0 * RNG.weibull(1.5, (200, n))  # twice as long: the curve leaves the band
    assert _survival(lik, late).verdicts[0].status == "warn"


@pytest.mark.parametrize(("likelihood", "status"), [("poisson", "warn"),
                                                     ("zero_inflated_poisson", "ok")])  # fmt: skip
def test_a_report_of_a_count_fit_checks_its_zeros(likelihood, status):
    x = np.linspace(0.0, 10.0, 80)
    rate = np.exp(1.0 + 0.5 * np.sin(x))
    y = np.where(RNG.uniform(size=80) < 0.35, 0, RNG.poisson(rate)).astype(float)
    m = LatentGP(pd.DataFrame({"x": x}), y, "expquad", likelihood)
    fit = m.fit_laplace(random_seed=0)
    rep = report({"MAP": fit}, model=m)
    zeros = next(v for v in rep.verdicts if v.check == "posterior predictive: zeros")
    assert zeros.status == status
    assert "Zeros and dispersion: observed and replicated" in rep.html
