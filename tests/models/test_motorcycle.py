"""The ``motorcycle`` declared model: mcycle data and the heteroscedastic GP.

Its NUTS fit and PSIS-LOO comparison with the homoscedastic GP run in the test suite through
``notebooks/06_model_comparison.ipynb`` (the same assertions: LOO prefers the heteroscedastic
model by more than twice the standard error of the difference, the noise sd before and during the
impact, the predictive band's coverage), and on their own with ``./run validate``
(``validation/tests/test_motorcycle_long.py``)."""

from __future__ import annotations

import pytest

from bayes_gp import GPRegression, HeteroscedasticGPRegression
from bayes_gp.declared import load_model


@pytest.fixture(scope="module")
def motorcycle():
    decl = load_model("motorcycle")
    return decl, decl.load_data()


def test_data_and_model(motorcycle):
    decl, data = motorcycle
    assert decl.task == "regression" and decl.methods == ("nuts",)
    assert data.X_train.shape == (133, 1) and data.y_train.shape == (133,)
    assert data.feature_names == ["times"] and data.target_name == "accel"
    # Silverman (1985): times 2.4-57.6 ms, accelerations -134 to 75 g
    assert data.X_train.min() == 2.4 and data.X_train.max() == 57.6
    assert data.y_train.min() == -134.0 and data.y_train.max() == 75.0
    assert data.notes["n_distinct_times"] == 94
    assert data.X_new.shape == (200, 1)
    assert decl.load_data(fast=True).X_train.shape == (133, 1)
    gp = decl.build(data)
    assert isinstance(gp, HeteroscedasticGPRegression)
    assert gp.hyperparameters == ["ls", "eta", "noise_ls", "noise_eta", "noise_mean"]
    homo = decl.module.homoscedastic(data)
    assert isinstance(homo, GPRegression) and homo.hyperparameters == ["ls", "eta", "sigma"]
    with pytest.raises(ValueError, match="fits by `method`"):
        decl.build(data, "map")
