"""NUTS on a formula model: the hyperparameters only (every term integrated out), per-term
predictions mixed over the draws, and the report through the model protocol."""

from __future__ import annotations

import numpy as np
import pandas as pd

import bayes_gp
from bayes_gp.formula import Model
from tests.formula.test_model import DATA


def test_nuts_recovers_the_noise_and_decomposes_the_fit():
    m = Model("y ~ x1 + gp(t) + (1|site)", DATA)
    idata = m.sample(draws=200, tune=200, chains=2, random_seed=1)
    post = idata["posterior"]
    assert set(m.hyperparameters) == {"gp(t).ls", "gp(t).eta", "1|site.sigma", "sigma"}
    assert set(post.data_vars) >= set(m.hyperparameters)
    assert int(idata["sample_stats"]["diverging"].sum()) <= 4
    # the data's noise sd is 0.2: inside the posterior's central 94%
    lo, hi = np.quantile(np.asarray(post["sigma"]).ravel(), [0.03, 0.97])
    assert lo < 0.2 < hi, (lo, hi)
    new = pd.DataFrame({"t": [1.0, 5.0], "site": ["a", "zz"], "x1": [0.0, 1.0]})
    terms = m.predict(new, idata, terms=m.term_names, max_draws=150)
    total = m.predict(new, idata, max_draws=150)
    # each draw's term means add up to its latent mean, so the mixtures' means do too
    np.testing.assert_allclose(sum(p.mean for p in terms.values()), total.mean, rtol=1e-6)
    # the smooth term tracks sin(t) (up to the level shared with the intercept and groups)
    gp_t = terms["gp(t)"]
    assert gp_t.lower[0] < np.sin(1.0) < gp_t.upper[0]
    assert gp_t.mean[0] - gp_t.mean[1] > 1.0  # sin(1) - sin(5) = 1.80
    # a new group: its effect is the population's, centred on 0 with the groups' spread
    assert terms["1|site"].mean[1] == 0.0 and terms["1|site"].upper[1] > 1.0
    rep = bayes_gp.report({"formula": (m, idata)}, figures=False)
    assert not rep.problems, rep.problems
