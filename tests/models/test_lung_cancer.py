"""The NCCTG lung-cancer declared model (``models/lung_cancer.py``): a right-censored Weibull
GP of survival time, against the linear Weibull regression (R's ``survreg``) and a log-normal."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize

from bayes_gp import LatentGP

MODEL = "lung_cancer"


def _reads_dataset_arrays(gp, fit, data, response) -> None:
    """The workflow passes ``X_new`` as an array laid out as ``X_train``: the model reads it as
    the rows of the data set (the same predictions as from the data frame)."""
    new = pd.DataFrame(data.X_new, columns=data.feature_names).assign(**{response: 1.0})
    cols = gp.prediction_columns(data.X_new, fit)
    np.testing.assert_allclose(cols["latent_mean"], gp.predict(new, fit).latent_mean, rtol=1e-12)


def _weibull_aft_shape(data) -> float:
    """The maximum-likelihood shape of the linear Weibull AFT model on age, sex and ECOG
    (``survreg(Surv(time, status) ~ ph.ecog + age + sex)``: log T = x'b + s W, W the standard
    minimum extreme-value variable, shape 1/s; Klein & Moeschberger 2003, eq. 12.2.2)."""
    age, ecog, sex, censored = data.X_train.T
    X = np.column_stack([np.ones_like(age), age, sex, ecog])
    log_t, event = np.log(data.y_train), 1.0 - censored

    def nll(p):
        z = (log_t - X @ p[:-1]) / np.exp(p[-1])
        return -np.sum(event * (z - p[-1]) - np.exp(z))

    start = np.r_[np.mean(log_t), 0.0, 0.0, 0.0, 0.0]
    res = minimize(nll, start, method="BFGS")
    res = minimize(nll, res.x, method="Nelder-Mead", options={"xatol": 1e-9, "fatol": 1e-11,
                                                                "maxiter": 20000})  # fmt: skip
    return float(np.exp(-res.x[-1]))


def test_the_227_patients_and_their_censoring(decl, data):
    assert decl.task == "regression" and decl.methods == ("nuts", "nuts_joint", "map")
    assert data.X_train.shape == (227, 4)
    assert data.feature_names == ["age", "ecog", "sex", "censored"]
    age, ecog, sex, censored = data.X_train.T
    assert int(censored.sum()) == 63 and int((censored == 0).sum()) == 164
    assert set(np.unique(sex)) == {1.0, 2.0} and set(np.unique(ecog)) == {0.0, 1.0, 2.0, 3.0}
    assert (age.min(), age.max()) == (39.0, 82.0)
    # survival's lung: the first patient died at 306 days, the third was censored at 1010
    assert data.y_train[:3].tolist() == [306.0, 455.0, 1010.0]
    assert censored[:3].tolist() == [0, 0, 1]
    assert data.X_new.shape == (44, 4) and np.all(data.X_new[:, 3] == 0)


def test_map_weibull_shape_matches_survreg_and_beats_lognormal(decl, data):
    """survreg's Weibull on the same covariates has scale 0.731 (shape 1.37), recomputed here by
    maximum likelihood; the GP's type-II shape is within 0.1 of it (an exponential model, shape 1,
    or a log-normal misread as Weibull would not be). LA-LOO prefers the Weibull by more
    than a standard error of the difference."""
    reference = _weibull_aft_shape(data)
    assert reference == pytest.approx(1.368, abs=0.005)
    gp = decl.build(data, "map")
    assert isinstance(gp, LatentGP) and gp.likelihood_name == "weibull"
    fit = gp.fit("map", n_restarts=2, random_seed=0)
    assert fit.converged
    assert float(fit.params["shape"]) == pytest.approx(reference, abs=0.1)
    # ECOG shortens survival, women live longer: the predicted median survival time
    new = decl.module.frame(data).iloc[:4].copy()
    new[["age", "sex", "ecog", "censored"]] = [[63, 1, 0, 0], [63, 1, 2, 0], [63, 2, 0, 0],
                                               [63, 2, 2, 0]]  # fmt: skip
    median = gp.predict(new, fit).extra["median"]
    assert median[0] > 1.5 * median[1] and median[2] > 1.2 * median[0]
    _reads_dataset_arrays(gp, fit, data, "time")
    lognormal = decl.module.build(data, "map", family="lognormal")
    fit_ln = lognormal.fit("map", n_restarts=2, random_seed=0)
    elpd_w, elpd_ln = gp.point_loo(fit)[1], lognormal.point_loo(fit_ln)[1]
    diff = elpd_w - elpd_ln
    # measured: 12.5 ahead, standard error of the difference 6.8
    assert diff.sum() > np.sqrt(diff.size * np.var(diff)) > 0
    with pytest.raises(ValueError, match="compares the families"):
        decl.module.build(data, "map", family="exponential")
