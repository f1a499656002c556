"""The grouped engine of gaussian formula models (per-group factors + Woodbury) against the
dense one: log density, gradient, per-term and total predictions and LOO terms equal, and the
automatic choice."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayes_gp.formula import Model
from bayes_gp.formula.grouped import GroupedLikelihood
from bayes_gp.solvers.exact import ExactLikelihood
from tests.formula.agreement import assert_same_model
from tests.formula.test_model import DATA

FORMULA = "y ~ x1 + gp(t) + gp(t, by=site) + (1|site)"
PARAMS = {"gp(t).ls": 1.1, "gp(t).eta": 0.8, "gp(t, by=site).ls": 0.9, "gp(t, by=site).eta": 0.5,
          "1|site.sigma": 0.7, "sigma": 0.3}  # fmt: skip


def test_grouped_equals_dense():
    g = Model(FORMULA, DATA, structure="grouped")
    d = Model(FORMULA, DATA, structure="dense")
    assert isinstance(g.marginal, GroupedLikelihood) and isinstance(d.marginal, ExactLikelihood)
    assert "Woodbury" in dict(g.describe())["engine"]
    # the jitter joins C's diagonal on both engines (K0 gets none): the same function
    assert_same_model(g, d, PARAMS, rtol=1e-11, grad_rtol=1e-9)


def test_the_grouped_engine_is_chosen_where_it_pays():
    rng = np.random.default_rng(2)
    G, n_g = 40, 8
    t = np.tile(np.arange(n_g, dtype=float), G)
    g = np.repeat([f"s{i}" for i in range(G)], n_g)
    y = np.sin(t / 2) + np.repeat(rng.normal(0, 0.5, G), n_g) + 0.2 * rng.normal(size=G * n_g)
    d = pd.DataFrame({"t": t, "g": g, "y": y})
    auto = Model("y ~ gp(t) + (1|g)", d)
    assert isinstance(auto.marginal, GroupedLikelihood)
    assert auto.marginal.m == n_g  # the shared GP and the intercept at the 8 distinct times
    dense = Model("y ~ gp(t) + (1|g)", d, structure="dense")
    p = {"gp(t).ls": 1.5, "gp(t).eta": 0.9, "1|g.sigma": 0.5, "sigma": 0.2}
    np.testing.assert_allclose(auto.log_marginal_likelihood(p), dense.log_marginal_likelihood(p),
                               rtol=1e-12)  # fmt: skip
    # where grouping does not pay (the cost rule) the dense path stays; two factors cannot be
    # grouped
    assert isinstance(Model(FORMULA, DATA).marginal, ExactLikelihood)
    d2 = d.assign(h=np.tile(["u", "v"], G * n_g // 2))
    with pytest.raises(ValueError, match="several factors"):
        Model("y ~ gp(t) + (1|g) + (1|h)", d2, structure="grouped")
    assert isinstance(Model("y ~ gp(t) + (1|g) + (1|h)", d2).marginal, ExactLikelihood)
