"""Derivatives of formula models' terms (R&W §9.4 through the per-term predictive equations,
``bayes_gp.formula.derivatives``): against finite differences of the terms' predictions, the
terms adding up to the whole model's derivative, the NUTS mixture over draws, the engines'
own factors, and the refusals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bayes_gp.formula import Model
from bayes_gp.regression.gpr import MapFit
from tests.formula.test_model import DATA

FORMULA = "y ~ x1 + gp(t) + gp(t, by=site, name='dev') + (1|site)"
PARAMS = {"gp(t).ls": 1.2, "gp(t).eta": 0.8, "dev.ls": 0.9, "dev.eta": 0.3, "1|site.sigma": 0.7,
          "sigma": 0.25}  # fmt: skip
NEW = pd.DataFrame({"t": [1.0, 5.0, 8.0], "x1": [0.0, 0.0, 1.0], "site": ["a", "b", "new"]})
H = 1e-4


def _central_difference(m, fit, term: str) -> np.ndarray:
    up = m.predict(NEW.assign(t=NEW.t + H), fit, terms=[term])[term].mean
    down = m.predict(NEW.assign(t=NEW.t - H), fit, terms=[term])[term].mean
    return (up - down) / (2 * H)


def test_term_derivatives_are_the_slopes_of_the_terms_and_add_up():
    m = Model(FORMULA, DATA)
    fit = MapFit(PARAMS, 0.0, False)
    parts = m.predict_derivative(NEW, fit, dim="t",
                                 terms=["gp(t)", "dev", ("gp(t)", "dev"), "1|site"])  # fmt: skip
    for term in ("gp(t)", "dev"):
        np.testing.assert_allclose(parts[term].mean, _central_difference(m, fit, term),
                                   rtol=1e-6, atol=1e-8)  # fmt: skip
    whole = m.predict_derivative(NEW, fit, dim="t")
    np.testing.assert_allclose(parts["gp(t) + dev"].mean, whole.mean, rtol=1e-10)
    np.testing.assert_allclose(parts["gp(t) + dev"].var, whole.var, rtol=1e-10)
    np.testing.assert_allclose(parts["gp(t)"].mean + parts["dev"].mean, whole.mean, rtol=1e-10)
    # a term without t has no slope in t; a new site's deviation is its prior: mean 0 and
    # the prior sd of a derivative of eta^2 exp(-r^2 / 2 ls^2), eta / ls
    np.testing.assert_array_equal(parts["1|site"].mean, 0.0)
    np.testing.assert_array_equal(parts["1|site"].var, 0.0)
    assert parts["dev"].mean[2] == 0.0
    np.testing.assert_allclose(parts["dev"].sd[2], 0.3 / 0.9, rtol=1e-10)
    assert parts["dev"].sd[0] < 0.3 / 0.9  # a known site's slope is learned from its data


def test_a_coefficient_is_the_slope_of_its_column():
    m = Model(FORMULA, DATA)
    fit = MapFit(PARAMS, 0.0, False)
    parts = m.predict_derivative(NEW, fit, dim="x1", terms=["x1", "gp(t)"])
    coef = m.predict(NEW.assign(x1=1.0), fit, terms=["x1"])["x1"]  # the term at x1 = 1: beta
    np.testing.assert_allclose(parts["x1"].mean, coef.mean[0], rtol=1e-10)
    np.testing.assert_allclose(parts["x1"].sd, coef.sd[0], rtol=1e-10)
    np.testing.assert_array_equal(parts["gp(t)"].mean, 0.0)


def test_the_nuts_mixture_mixes_the_draws():
    """A posterior of two draws: the mixture's mean is the draws' average, its variance the
    law of total variance over the two point predictions."""
    m = Model(FORMULA, DATA)
    other = {**PARAMS, "gp(t).ls": 1.6, "sigma": 0.3}
    post = xr.Dataset({k: (("chain", "draw"), np.array([[PARAMS[k], other[k]]]))
                       for k in PARAMS})  # fmt: skip
    idata = xr.DataTree.from_dict({"posterior": post})
    mix = m.predict_derivative(NEW, idata, dim="t", terms=["gp(t)"])["gp(t)"]
    a, b = (m.predict_derivative(NEW, MapFit(p, 0.0, False), dim="t", terms=["gp(t)"])["gp(t)"]
            for p in (PARAMS, other))  # fmt: skip
    np.testing.assert_allclose(mix.mean, 0.5 * (a.mean + b.mean), rtol=1e-10)
    total = 0.5 * (a.var + b.var) + 0.25 * (a.mean - b.mean) ** 2
    np.testing.assert_allclose(mix.var, total, rtol=1e-10)
    assert mix.extra["n_draws"] == 2


@pytest.mark.parametrize("approx", ["hsgp', m=30, c=2.0", "fitc', m=15"])
def test_the_low_rank_engine_gives_the_slopes_of_its_terms(approx):
    m = Model(f"y ~ x1 + gp(t, approx='{approx}) + (1|site)", DATA)
    fit = m.fit("map")
    d = m.predict_derivative(NEW, fit, dim="t", terms=["gp(t)"])["gp(t)"]
    np.testing.assert_allclose(d.mean, _central_difference(m, fit, "gp(t)"), rtol=1e-5,
                               atol=1e-7)  # fmt: skip


def test_refusals():
    m = Model("y ~ gp(t, kernel='matern12') + gp(x1, name='s')", DATA)
    fit = m.fit("map")
    with pytest.raises(ValueError, match=r"Matern12 \(Matérn smoothness nu = 0.5\) has no f'"):
        m.predict_derivative(NEW, fit, dim="t", terms=["gp(t)"])
    smooth = m.predict_derivative(NEW, fit, dim="x1", terms=["s"])["s"]  # the smooth term is
    assert np.all(np.isfinite(smooth.mean))  # differentiable
    with pytest.raises(ValueError, match="no term 'trend'"):
        m.predict_derivative(NEW, fit, dim="t", terms=["trend"])
    with pytest.raises(ValueError, match="diag=True"):
        m.predict_derivative(NEW, fit, dim="x1", terms=["s"], diag=False)
    with pytest.raises(ValueError, match="not an input of this model"):
        m.predict_derivative(NEW, fit, dim="age", terms=["s"])
