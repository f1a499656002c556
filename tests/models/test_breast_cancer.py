"""The breast-cancer declared model (``models/breast_cancer.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from bayes_gp import GPClassifier

MODEL = "breast_cancer"

NAMES = [
    "mean_radius",
    "mean_texture",
    "mean_concavity",
    "mean_concave_points",
    "worst_radius",
    "worst_concave_points",
]


def _accuracy(gp, fit, data) -> float:
    p = gp.predict_proba(data.X_test, fit)
    assert np.all((p >= 0) & (p <= 1))
    return float(np.mean((p > 0.5) == data.y_test))


def test_stratified_split_and_standardisation(decl, data):
    from sklearn.datasets import load_breast_cancer

    full = decl.load_data(fast=False)
    assert full.X_train.shape == (150, 6) and data.X_train.shape == (80, 6)
    assert full.X_test.shape == data.X_test.shape == (419, 6)
    assert full.feature_names == data.feature_names == NAMES
    # stratified: 212 of 569 malignant (37.3%) in every part
    assert int(full.y_train.sum()) == 56 and int(data.y_train.sum()) == 30
    assert int(full.y_test.sum()) == 212 - 56
    for d in (data, full):
        assert np.all(np.isfinite(d.X_train)) and np.all(np.isfinite(d.X_test))
        np.testing.assert_allclose(d.X_train.mean(axis=0), 0.0, atol=1e-12)
        np.testing.assert_allclose(d.X_train.std(axis=0), 1.0, rtol=1e-12)
    # malignant -> 1: malignant tumours are larger (sklearn codes malignant as 0)
    raw = load_breast_cancer()
    assert raw.target_names[0] == "malignant"
    radius = full.X_train[:, 0]
    assert radius[full.y_train == 1].mean() > radius[full.y_train == 0].mean() + 1.0
    # the fast training cases are a subset of the full ones, the test cases the same
    np.testing.assert_array_equal(np.sort(data.y_test), np.sort(full.y_test))


def test_builds_logit_and_probit(decl, data):
    links = {m: decl.build(data, m).link for m in decl.methods}
    assert links == {"map": "logit", "nuts": "logit", "ep": "probit", "nuts_joint": "logit"}
    gp = decl.build(data, "ep")
    assert isinstance(gp, GPClassifier) and gp.ard and gp.feature_names == NAMES
    with pytest.raises(ValueError, match="fits by `method` 'map', 'nuts', 'ep'"):
        decl.build(data, "nuts_or_bust")


@pytest.mark.parametrize("method", ["map", "ep"])
def test_gaussian_approximations_classify_well(decl, data, method):
    gp = decl.build(data, method)
    fit = gp.fit(method, n_restarts=1, random_seed=0)
    assert fit.grad_norm < 0.05
    # measured: 0.945 for both on the fast split (0.962 with 150 training cases)
    assert _accuracy(gp, fit, data) >= 0.92


@pytest.mark.slow
def test_short_nuts_run(decl, data):
    gp = decl.build(data, "nuts_joint")
    idata = gp.fit("nuts_joint", draws=50, tune=50, chains=1, random_seed=4)
    assert np.asarray(idata["posterior"]["f"]).shape == (1, 50, 80)
    assert np.asarray(idata["posterior"]["ls"]).shape == (1, 50, 6)
    assert _accuracy(gp, idata, data) >= 0.9
