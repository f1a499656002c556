"""The bioChemists declared model (``models/biochemists.py``): zero-inflated Poisson counts of
articles with a GP on the mentor's productivity, against pscl's linear ZIP and the Poisson."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from bayes_gp import LatentGP

MODEL = "biochemists"


def _reads_dataset_arrays(gp, fit, data, response) -> None:
    """The workflow passes ``X_new`` as an array laid out as ``X_train``: the model reads it as
    the rows of the data set (the same predictions as from the data frame)."""
    new = pd.DataFrame(data.X_new, columns=data.feature_names).assign(**{response: 1.0})
    cols = gp.prediction_columns(data.X_new, fit)
    np.testing.assert_allclose(cols["latent_mean"], gp.predict(new, fit).latent_mean, rtol=1e-12)


def _linear_zip_inflation(data) -> float:
    """pscl's ``zeroinfl(art ~ . | 1)`` on the same rows: the maximum-likelihood zero-inflation
    probability of the linear ZIP (Lambert 1992), by statsmodels."""
    import statsmodels.api as sm
    from statsmodels.discrete.count_model import ZeroInflatedPoisson

    X = sm.add_constant(data.X_train)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = ZeroInflatedPoisson(data.y_train, X, exog_infl=np.ones((X.shape[0], 1))).fit(
            disp=0, maxiter=500
        )
    return float(expit(res.params[0]))


def test_the_students_and_the_fast_subsample(decl, data):
    assert decl.task == "counts" and decl.methods == ("nuts", "nuts_joint", "map")
    full = decl.load_data(fast=False)
    assert full.X_train.shape == (915, 5) and full.feature_names == decl.module.FEATURES
    y = full.y_train
    assert int((y == 0).sum()) == 275 and y.max() == 19 and y.sum() == 1549  # mean 1.69
    ment, fem, mar, kid5, _ = full.X_train.T
    assert int(fem.sum()) == 421 and int(mar.sum()) == 606 and int(kid5.sum()) == 453
    assert ment.max() == 77
    # fast mode: 300 of them, drawn with seed 0, kept in order
    assert data.X_train.shape == (300, 5) and data.notes["subsample"].startswith("fast: 300")
    rows = np.sort(np.random.default_rng(0).choice(915, 300, replace=False))
    np.testing.assert_array_equal(data.X_train, full.X_train[rows])
    assert data.X_new.shape == (78, 5) and np.all(data.X_new[:, 1:4] == 0)


def test_map_zero_inflation_near_the_linear_zip_and_better_than_poisson(decl, data):
    """pscl's linear ZIP on all 915 students has pi = 0.157 (logit -1.681); on the fast rows
    statsmodels gives the reference, and the GP's type-II pi is within 0.05 of it (pi = 0 or 0.3,
    no or twice the inflation, would fail). LA-LOO prefers the ZIP to the Poisson."""
    reference = _linear_zip_inflation(data)
    assert 0.1 < reference < 0.2
    gp = decl.build(data, "map")
    assert isinstance(gp, LatentGP) and gp.likelihood_name == "zero_inflated_poisson"
    fit = gp.fit("map", n_restarts=1, random_seed=0)
    assert fit.converged
    assert float(fit.params["zero_inflation"]) == pytest.approx(reference, abs=0.05)
    # more articles with a more productive mentor: the expected count at 40 vs 0 mentor articles
    new = decl.module.frame(data).iloc[:2].copy()
    new[decl.module.FEATURES] = [[0, 0, 0, 0, 3.0], [40, 0, 0, 0, 3.0]]
    mean = gp.predict(new, fit).mean
    assert mean[1] > 1.5 * mean[0]
    assert gp.feature_names == data.feature_names  # X_train is the design
    _reads_dataset_arrays(gp, fit, data, "art")
    poisson = decl.module.build(data, "map", family="poisson")
    fit_p = poisson.fit("map", n_restarts=1, random_seed=0)
    diff = gp.point_loo(fit)[1] - poisson.point_loo(fit_p)[1]
    assert diff.sum() > np.sqrt(diff.size * np.var(diff)) > 0
    with pytest.raises(ValueError, match="compares the families"):
        decl.module.build(data, "map", family="binomial")
