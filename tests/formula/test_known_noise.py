"""Known per-observation noise in the formula interface's gaussian family (issue 40):
``Model(..., noise="err")`` (a column of measurement standard deviations s_i, or an array),
alone (C = K + diag(s^2)) or with a learned sigma (``learn_noise=True``), on every engine
(dense, grouped, low-rank, quasiseparable).

References: the dense multivariate normal (scipy.stats) with the covariance of the same model
without known noise (the dense engine's C at the same hyperparameters) plus diag(s^2), and
GPRegression with the same noise on a plain ``y ~ gp(t)``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import multivariate_normal

from bayes_gp import GPRegression
from bayes_gp.formula import Model
from bayes_gp.formula.grouped import GroupedLikelihood
from bayes_gp.formula.lowrank import LowRankLikelihood
from bayes_gp.inference.typeii import MapFit
from bayes_gp.solvers.exact import ExactLikelihood
from tests.formula.test_model import DATA, N, T

S = np.random.default_rng(5).uniform(0.05, 0.5, N)  # known measurement errors (sd)
NDATA = DATA.assign(err=S)
GROUPED = "y ~ x1 + gp(t) + gp(t, by=site) + (1|site)"
LOWRANK = ("y ~ x1 + gp(t, approx='hsgp', m=8, c=2.5)"
           " + gp(t, by=site, approx='hsgp', m=5, c=2.5) + (1|site)")  # fmt: skip
GROUP_PARAMS = {"gp(t).ls": 1.1, "gp(t).eta": 0.8, "gp(t, by=site).ls": 0.9,
                "gp(t, by=site).eta": 0.5, "1|site.sigma": 0.7}  # fmt: skip
QS = "y ~ gp(t, kernel='matern32')"
QS_PARAMS = {"gp(t).ls": 1.3, "gp(t).eta": 0.9}
SIGMA = 0.3

CASES = [
    (GROUPED, "grouped", GroupedLikelihood, GROUP_PARAMS),
    (GROUPED, "dense", ExactLikelihood, GROUP_PARAMS),
    (LOWRANK, "lowrank", LowRankLikelihood, GROUP_PARAMS),
    (QS, "quasiseparable", None, QS_PARAMS),
]


def reference(formula: str, params: dict, learn: bool) -> float:
    """log N(y | m, C0 - sigma^2 I + diag(s^2) [+ sigma^2 I]), C0 the dense engine's
    covariance of the model without known noise (jitter included)."""
    d = Model(formula, DATA, structure="dense")
    m, C0 = d.marginal.train(d._values({**params, "sigma": SIGMA}))
    C = C0 + np.diag(S**2) - (0.0 if learn else SIGMA**2) * np.eye(N)
    return multivariate_normal(m, C).logpdf(DATA["y"].to_numpy())


@pytest.mark.parametrize("learn", [False, True])
@pytest.mark.parametrize("formula,structure,cls,params", CASES)
def test_each_engine_is_the_dense_mvn_with_the_known_diagonal(formula, structure, cls, params,
                                                               learn):  # fmt: skip
    m = Model(formula, NDATA, structure=structure, noise="err", learn_noise=learn)
    if cls is None:
        assert m.quasiseparable
    else:
        assert isinstance(m.marginal, cls)
    p = {**params, "sigma": SIGMA} if learn else params
    assert sorted(m.hyperparameters) == sorted(p)
    # the grouped engine adds the jitter to K0 as well (about 1e-10 of var(y))
    np.testing.assert_allclose(m.log_marginal_likelihood(p), reference(formula, params, learn),
                               rtol=1e-8)  # fmt: skip
    # an array of n values is the same model as the column
    a = Model(formula, DATA, structure=structure, noise=S, learn_noise=learn)
    np.testing.assert_allclose(a.log_marginal_likelihood(p), m.log_marginal_likelihood(p),
                               rtol=1e-12)  # fmt: skip


@pytest.mark.parametrize("learn", [False, True])
def test_engines_agree_on_gradient_loo_and_predictions(learn):
    """The grouped and low-rank engines against the dense one with the same noise: gradient,
    exact LOO terms and predictions (f_*, and y_* with noise_new)."""
    new = pd.DataFrame({"t": [1.0, 5.5, 9.0], "site": ["a", "c", "new"], "x1": [0.0, 1.0, -1.0],
                        "e": [0.1, 0.2, 0.3]})  # fmt: skip
    p = {**GROUP_PARAMS, "sigma": SIGMA} if learn else GROUP_PARAMS
    fit = MapFit(p, 0.0, False)
    for formula, structure in ((GROUPED, "grouped"), (LOWRANK, "lowrank")):
        a = Model(formula, NDATA, structure=structure, noise="err", learn_noise=learn)
        b = Model(formula, NDATA, structure="dense", noise="err", learn_noise=learn)
        la, ga = a.log_marginal_likelihood(p, eval_gradient=True)
        lb, gb = b.log_marginal_likelihood(p, eval_gradient=True)
        np.testing.assert_allclose(la, lb, rtol=1e-8)
        for k in p:
            np.testing.assert_allclose(ga[k], gb[k], rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(a._pointwise_loo(a._values(p)), b._pointwise_loo(b._values(p)),
                                   rtol=1e-6)  # fmt: skip
        for kw in ({}, {"include_noise": True, "noise_new": "e"}):
            pa, pb = a.predict(new, fit, **kw), b.predict(new, fit, **kw)
            np.testing.assert_allclose(pa.mean, pb.mean, rtol=1e-6, atol=1e-8)
            np.testing.assert_allclose(pa.var, pb.var, rtol=1e-6, atol=1e-8)
        pn = b.predict(new, fit, include_noise=True, noise_new=[0.1, 0.2, 0.3])
        pf = b.predict(new, fit)
        np.testing.assert_allclose(pn.var - pf.var,
                                   np.array([0.1, 0.2, 0.3]) ** 2 + (SIGMA**2 if learn else 0.0),
                                   rtol=1e-9)  # fmt: skip


@pytest.mark.parametrize("learn", [False, True])
@pytest.mark.parametrize("structure", ["dense", "quasiseparable"])
def test_a_plain_gp_is_gpregression_with_the_same_noise(structure, learn):
    m = Model("y ~ 0 + gp(t, kernel='matern32')", NDATA, structure=structure, noise="err",
              learn_noise=learn)  # fmt: skip
    ref = GPRegression(T, DATA["y"].to_numpy(), "matern32", mean="zero", noise=S,
                       learn_noise=learn, structure=structure)  # fmt: skip
    p = {"ls": 1.3, "eta": 0.9, **({"sigma": SIGMA} if learn else {})}
    pm_ = {("gp(t)." + k if k != "sigma" else k): v for k, v in p.items()}
    np.testing.assert_allclose(m.log_marginal_likelihood(pm_), ref.log_marginal_likelihood(p),
                               rtol=1e-10)  # fmt: skip
    if structure == "quasiseparable":
        return  # the predictions are GPRegression's (tests/regression/test_known_noise.py)
    new = pd.DataFrame({"t": [0.5, 4.0, 11.0]})
    fa, fb = MapFit(pm_, 0.0, False), MapFit(p, 0.0, False)
    pa = m.predict(new, fa, include_noise=True, noise_new=0.2)
    pb = ref.predict(new["t"].to_numpy(), fb, include_noise=True, noise_new=0.2)
    np.testing.assert_allclose(pa.mean, pb.mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(pa.var, pb.var, rtol=1e-9)
    if not learn:  # the new rows' noise is unknown: refused, as GPRegression refuses it
        with pytest.raises(ValueError, match="noise_new"):
            m.predict(new, fa, include_noise=True)


def test_refusals():
    with pytest.raises(ValueError, match="column 'nope'"):
        Model("y ~ gp(t)", NDATA, noise="nope")
    with pytest.raises(ValueError, match="one standard deviation per row"):
        Model("y ~ gp(t)", NDATA, noise=S[:-1])
    with pytest.raises(ValueError, match="non-negative"):
        Model("y ~ gp(t)", NDATA.assign(err=-S), noise="err")
    with pytest.raises(ValueError, match="non-negative"):
        Model("y ~ gp(t)", NDATA.assign(err=np.where(np.arange(N) == 3, np.nan, S)), noise="err")
    with pytest.raises(ValueError, match="gaussian family"):
        Model("counts ~ gp(t)", NDATA, family="poisson", noise="err")
    m = Model("y ~ gp(t)", NDATA, noise="err")
    fit = MapFit({"gp(t).ls": 1.0, "gp(t).eta": 1.0}, 0.0, False)
    with pytest.raises(ValueError, match="include_noise=True"):
        m.predict(pd.DataFrame({"t": [1.0]}), fit, noise_new=[0.1])
    with pytest.raises(ValueError, match="does not have"):
        m.predict(pd.DataFrame({"t": [1.0]}), fit, include_noise=True, noise_new="e")


def test_the_nuts_mixture_takes_noise_new():
    """A posterior of two equal draws: the mixture prediction of y_* with ``noise_new`` equals
    the point prediction (the NUTS branch of FormulaRegression.predict)."""
    import xarray as xr

    m = Model(GROUPED, NDATA, structure="grouped", noise="err")
    post = xr.Dataset({k: (("chain", "draw"), np.full((1, 2), v)) for k, v in GROUP_PARAMS.items()})
    idata = xr.DataTree.from_dict({"posterior": post})
    new = pd.DataFrame({"t": [1.0, 5.5], "site": ["a", "new"], "x1": [0.0, 1.0], "e": [0.1, 0.2]})
    a = m.predict(new, idata, include_noise=True, noise_new="e")
    b = m.predict(new, MapFit(GROUP_PARAMS, 0.0, False), include_noise=True, noise_new="e")
    np.testing.assert_allclose(a.mean, b.mean, rtol=1e-10)
    np.testing.assert_allclose(a.var, b.var, rtol=1e-10)
    with pytest.raises(ValueError, match="noise_new"):
        m.predict(new, idata, include_noise=True)
