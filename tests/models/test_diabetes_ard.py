"""The diabetes ARD regression declared model (``models/diabetes_ard.py``)."""

from __future__ import annotations

import numpy as np
import pytensor
import pytest
from scipy import stats

from bayes_gp import GPRegression
from bayes_gp.linalg import EAGER_MODE

MODEL = "diabetes_ard"

NAMES = ["age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6"]


def _rmse(gp, fit, data) -> float:
    pred = gp.predict(data.X_test, fit)
    return float(np.sqrt(np.mean((pred.mean - data.y_test) ** 2)))


def test_split_and_standardisation(decl, data):
    full = decl.load_data(fast=False)
    assert full.X_train.shape == (300, 10) and full.X_test.shape == (142, 10)
    assert data.X_train.shape == (150, 10)
    np.testing.assert_array_equal(data.y_test, full.y_test)
    np.testing.assert_array_equal(data.y_train, full.y_train[:150])
    for d in (data, full):
        assert d.feature_names == NAMES
        assert np.all(np.isfinite(d.X_train)) and np.all(np.isfinite(d.y_train))
        np.testing.assert_allclose(d.X_train.mean(axis=0), 0.0, atol=1e-12)
        np.testing.assert_allclose(d.X_train.std(axis=0), 1.0, rtol=1e-12)
        assert 25 <= d.y_train.min() < d.y_train.max() <= 346  # progression, original units
    assert len(set(full.y_train) | set(full.y_test)) > 200  # a permutation, not a copy


def test_builds_ard_model_with_relevance_prior(decl, data):
    for method in decl.methods:
        gp = decl.build(data, method)
        assert isinstance(gp, GPRegression) and gp.ard
        assert gp.hyperparameters == ["ls", "eta", "sigma"]
    model = gp.model
    rv = model["ls"]
    assert model.named_vars_to_dims["ls"] == ("feature",)
    logp = pytensor.function(
        [model.rvs_to_values[rv]],
        model.logp(vars=[rv], jacobian=False, sum=False)[0],
        mode=EAGER_MODE,
    )
    ls = np.linspace(0.5, 50.0, 10)
    expected = stats.invgamma(1.0, scale=2.0).logpdf(ls)
    np.testing.assert_allclose(logp(np.log(ls)), expected, rtol=1e-12)
    with pytest.raises(ValueError, match="fits by `method` 'nuts', 'map'"):
        decl.build(data, "ep")


def test_map_fit_and_relevance(decl, data):
    gp = decl.build(data, "map")
    fit = gp.fit_map(n_restarts=1, random_seed=0)
    assert fit.converged and fit.grad_norm < 0.05
    rel = gp.relevance(fit)
    assert list(rel.index) == NAMES and np.all(rel["relevance"] > 0)
    # s5 (log serum triglycerides) is the strongest input in every analysis of these data
    assert rel["relevance"].idxmax() == "s5"
    # held-out RMSE; the targets' sd is 77 and a linear fit on all 300 cases reaches 49
    assert _rmse(gp, fit, data) < 60.0
    assert 20 < float(fit.params["sigma"]) < 70


@pytest.mark.slow
@pytest.mark.usefixtures("nutpie_jax")
def test_short_nuts_run(decl, data):
    gp = decl.build(data, "nuts")
    idata = gp.sample(draws=50, tune=50, chains=1, random_seed=5)
    assert np.asarray(idata["posterior"]["ls"]).shape == (1, 50, 10)
    assert np.asarray(idata["log_likelihood"]["y"]).shape == (1, 50, 150)
    rel = gp.relevance(idata)
    assert list(rel.columns) == ["relevance", "lower", "upper"]
    assert np.all((rel["lower"] <= rel["relevance"]) & (rel["relevance"] <= rel["upper"]))
    assert _rmse(gp, idata, data) < 62.0
