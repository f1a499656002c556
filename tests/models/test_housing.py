"""The homeless-housing declared model (``models/housing.py``): an ordinal (cumulative-logit) GP
of housing status over 24 months, against the status codes taken as a metric response."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayes_gp import LatentGP

MODEL = "housing"


def _reads_dataset_arrays(gp, fit, data, response) -> None:
    """The workflow passes ``X_new`` as an array laid out as ``X_train``: the model reads it as
    the rows of the data set (the same predictions as from the data frame)."""
    new = pd.DataFrame(data.X_new, columns=data.feature_names).assign(**{response: 1.0})
    cols = gp.prediction_columns(data.X_new, fit)
    np.testing.assert_allclose(cols["latent_mean"], gp.predict(new, fit).latent_mean, rtol=1e-12)


def test_the_readings_and_the_fast_subsample(decl, data):
    assert decl.task == "regression" and decl.methods == ("nuts", "nuts_joint", "map")
    full = decl.load_data(fast=False)
    assert full.X_train.shape == (1289, 2) and full.feature_names == ["time", "sec"]
    assert np.bincount(full.y_train.astype(int)).tolist() == [294, 484, 511]
    assert set(np.unique(full.X_train[:, 0])) == {0.0, 6.0, 12.0, 24.0}
    assert full.notes["subjects"] == 361  # one of the 362 has no reading
    # fast mode: every reading of 80 subjects drawn with seed 0
    assert data.notes["subjects"] == 80 and data.X_train.shape == (282, 2)
    assert data.X_new.shape == (98, 2)


def test_map_category_probabilities_follow_the_cells(decl, data):
    """The type-II ordinal fit's category probabilities at each (month, voucher) cell are within
    0.15 of the observed proportions there (measured 0.127; each cell holds 29-40 readings, a
    proportion's sampling sd about 0.08; a model without the voucher is 0.2 off at 6 months, one
    with the categories reversed 0.4); the voucher group is far more often in independent housing from 6
    months on. LA-LOO prefers the ordinal model to the codes taken as metric."""
    gp = decl.build(data, "map")
    assert isinstance(gp, LatentGP) and gp.likelihood_name == "ordinal"
    fit = gp.fit("map", n_restarts=1, random_seed=0)
    assert fit.converged
    cutpoints = np.asarray(fit.params["cutpoints"])
    assert cutpoints.shape == (2,) and cutpoints[0] < cutpoints[1]
    frame = decl.module.frame(data)
    observed = pd.crosstab([frame["time"], frame["sec"]], frame["status"], normalize="index")
    cells = pd.DataFrame(list(observed.index), columns=["time", "sec"]).assign(status=0.0)
    prob = gp.predict_proba(cells, fit)
    np.testing.assert_allclose(prob.sum(axis=1), 1.0, atol=1e-10)
    assert np.max(np.abs(prob - observed.to_numpy())) < 0.15
    p = pd.DataFrame(prob, index=observed.index)
    for month in (6.0, 12.0, 24.0):
        assert p.loc[(month, 1.0), 2] > p.loc[(month, 0.0), 2] + 0.2
    assert p.loc[(0.0, 0.0), 0] > 0.35 and p.loc[(24.0, 0.0), 0] < 0.25
    _reads_dataset_arrays(gp, fit, data, "status")
    metric = decl.module.build(data, "map", family="gaussian")
    fit_m = metric.fit("map", n_restarts=1, random_seed=0)
    diff = gp.point_loo(fit)[1] - metric.point_loo(fit_m)[1]
    assert diff.sum() > 2 * np.sqrt(diff.size * np.var(diff)) > 0
    with pytest.raises(ValueError, match="compares the families"):
        decl.module.build(data, "map", family="student_t")
