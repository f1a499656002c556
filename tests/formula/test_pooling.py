"""``gp(t, by=g, pooling="partial" | "none")``: each level its own length-scale and amplitude,
partially pooled or independent. Against HierarchicalGP with the same pooling (marginal
likelihood and gradient to 1e-10, priors included), the grouped engine against the dense one
(log density, gradient, per-term predictions with a new level, LOO), a new level at the
population's median, and the refusals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayes_gp import hierarchical_gp
from bayes_gp.formula import Model
from bayes_gp.formula.grouped import GroupedLikelihood
from bayes_gp.linalg import EAGER_MODE
from bayes_gp.regression.gpr import MapFit
from tests.formula.agreement import assert_same_model
from tests.formula.test_model import DATA

RNG = np.random.default_rng(5)
BY = "gp(t, by=site)"
HIER = {"f0_ls": "gp(t).ls", "f0_eta": "gp(t).eta", "intercept_sd": "1|site.sigma",
        "sigma": "sigma"}  # fmt: skip
PARTIAL = {"ls_mu": 0.1, "ls_tau": 0.4, "ls_z": RNG.normal(size=3), "eta_mu": -0.5,
           "eta_tau": 0.3, "eta_z": RNG.normal(size=3)}  # fmt: skip
NONE = {"ls_group": np.array([0.8, 1.1, 1.4]), "eta_group": np.array([0.3, 0.5, 0.7])}
POINTS = {"partial": PARTIAL, "none": NONE}


def _pair(pooling):
    h = hierarchical_gp(DATA, "t", "y", "site", "expquad", shared=True, random_intercept=True,
                        pooling={"ls": pooling, "eta": pooling})  # fmt: skip
    d = DATA.assign(m0=h.scale.y_mean)  # the hierarchical model's fixed mean
    # HierarchicalGP adds its jitter to K0 and to each group's block: twice on the diagonal
    m = Model(f"y ~ 0 + gp(t) + gp(t, by=site, pooling='{pooling}') + (1|site) + offset(m0)", d,
              jitter=2e-10)  # fmt: skip
    hp = {"f0_ls": 1.2, "f0_eta": 0.7, "intercept_sd": 0.8, "sigma": 0.3, **POINTS[pooling]}
    return h, m, hp, {HIER.get(k, f"{BY}.{k}"): v for k, v in hp.items()}


@pytest.mark.parametrize("pooling", ["partial", "none"])
def test_pooled_levels_are_the_hierarchical_model(pooling):
    h, m, hp, mp = _pair(pooling)
    assert sorted(m.hyperparameters) == sorted(mp)
    lh, gh = h.log_marginal_likelihood(hp, eval_gradient=True)
    lm, gm = m.log_marginal_likelihood(mp, eval_gradient=True)
    np.testing.assert_allclose(lm, lh, rtol=1e-10)
    for k in hp:
        np.testing.assert_allclose(gm[HIER.get(k, f"{BY}.{k}")], gh[k], rtol=1e-6, atol=1e-10)
    # the priors too: the joint log density of the same point differs by no more than the
    # likelihoods do (the two models' value variables are named differently)
    lp_h = h.model.compile_logp(mode=EAGER_MODE)(_values(h.model, hp))
    lp_m = m.model.compile_logp(mode=EAGER_MODE)(_values(m.model, mp))
    np.testing.assert_allclose(lp_m, lp_h, rtol=1e-10)


def _values(model, point):
    out = {}
    for rv in model.free_RVs:
        tr = model.rvs_to_transforms[rv]
        x = np.asarray(point[rv.name], float)
        out[model.rvs_to_values[rv].name] = tr.forward(x).eval() if tr is not None else x
    return out


def test_the_grouped_engine_is_the_dense_one():
    """(The spreads are fixed: with three sites their MAP sits at tau = 0, a boundary the
    comparison's type-II fit need not visit.)"""
    f = "y ~ x1 + gp(t) + gp(t, by=site, pooling='partial') + (1|site)"
    taus = {f"{BY}.ls_tau": 0.4, f"{BY}.eta_tau": 0.3}
    grouped = Model(f, DATA, structure="grouped", priors=taus)
    dense = Model(f, DATA, structure="dense", priors=taus)
    assert isinstance(grouped.marginal, GroupedLikelihood)
    params = {"gp(t).ls": 1.2, "gp(t).eta": 0.7, "1|site.sigma": 0.8, "sigma": 0.3,
              **{f"{BY}.{k}": v for k, v in POINTS["partial"].items() if "tau" not in k}}  # fmt: skip
    assert_same_model(grouped, dense, params, rtol=1e-8, grad_rtol=1e-7)


def test_each_level_has_its_own_curve_and_a_new_level_the_populations():
    m = Model("y ~ gp(t, by=site, pooling='partial')", DATA)
    assert m.terms_table().loc[BY, "covariance"].endswith("length-scales and amplitudes "
                                                          "partially pooled)")  # fmt: skip
    assert m.prior_names[:4] == [f"{BY}.{k}" for k in ("ls_mu", "ls_tau", "eta_mu", "eta_tau")]
    z_eta = np.array([1.5, 0.0, -1.5])
    p = {f"{BY}.ls_mu": 0.0, f"{BY}.ls_tau": 0.2, f"{BY}.ls_z": np.zeros(3),
         f"{BY}.eta_mu": np.log(0.5), f"{BY}.eta_tau": 0.5, f"{BY}.eta_z": z_eta, "sigma": 0.3}  # fmt: skip
    far = pd.DataFrame({"t": [1e3] * 4, "site": ["a", "b", "c", "new"]})  # beyond the data:
    pred = m.predict(far, MapFit(p, 0.0, False), terms=[BY])[BY]  # the prior of each level
    np.testing.assert_allclose(pred.sd, 0.5 * np.exp([*(0.5 * z_eta), 0.0]), rtol=1e-9)


@pytest.mark.parametrize(
    ("formula", "match"),
    [
        ("y ~ gp(t, pooling='partial')", "give by="),
        ("y ~ gp(t, by=site, pooling='some')", "'shared' or 'partial' or 'none'"),
        ("y ~ gp(t, by=site, pooling='partial', approx='hsgp')", "use pooling='shared'"),
        ("y ~ gp(t, x1, by=site, pooling='none', ard=True)", "ard=True is not available"),
    ],
)
def test_refusals(formula, match):
    with pytest.raises(ValueError, match=match):
        Model(formula, DATA)


def test_priors_by_the_pooled_names():
    with pytest.raises(ValueError, match=r"`priors` names \['gp\(t, by=site\).ls'\]"):
        Model("y ~ gp(t, by=site, pooling='partial')", DATA, priors={f"{BY}.ls": 1.0})
    m = Model("y ~ gp(t, by=site, pooling='partial')", DATA, priors={f"{BY}.ls_tau": 0.25})
    assert f"{BY}.ls_tau" not in m.hyperparameters  # fixed
