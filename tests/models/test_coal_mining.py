"""The coal-mining disasters declared model (``models/coal_mining.py``): a Poisson latent GP."""

from __future__ import annotations

import numpy as np
import pytest

from bayes_gp import LatentGP

MODEL = "coal_mining"


def test_yearly_counts_of_the_191_disasters(decl, data):
    assert data.X_train.shape == (112, 1) and data.feature_names == ["year"]
    assert data.X_train[0, 0] == 1851.5 and data.X_train[-1, 0] == 1962.5
    assert int(data.y_train.sum()) == 191
    assert np.all(data.y_train == np.round(data.y_train)) and data.y_train.min() == 0
    # Jarrett (1979): 4 disasters in 1851, 5 in 1852; 1 in 1962
    assert data.y_train[:2].tolist() == [4.0, 5.0] and data.y_train[-1] == 1.0


def test_map_fit_finds_the_drop_in_the_rate(decl, data):
    """Raftery & Akman (1986): about 3.1 disasters a year before ~1890 and 0.93 after. The Laplace
    MAP fit's predicted yearly rate, averaged over each regime, is within 20% of those."""
    gp = decl.build(data, "map")
    assert isinstance(gp, LatentGP) and gp.likelihood_name == "poisson"
    fit = gp.fit_laplace(n_restarts=3, random_seed=0)
    assert fit.converged
    t = data.X_train[:, 0]
    rate = gp.predict(t, fit).mean
    assert np.mean(rate[t < 1890]) == pytest.approx(3.1, rel=0.2)
    assert np.mean(rate[t > 1892]) == pytest.approx(0.93, rel=0.2)
    with pytest.raises(ValueError, match="fits by `method` 'nuts', 'nuts_joint', 'map', 'vi'"):
        decl.build(data, "ep")


def test_short_nuts_with_laplace(decl, data):
    gp = decl.build(data, "nuts")
    idata = gp.fit("nuts", draws=150, tune=150, chains=2, random_seed=3)
    post = idata["posterior"]
    assert set(gp.hyperparameters) <= set(post.data_vars) and "f_mode" in post
    assert 5 < float(post["ls"].mean()) < 150
    assert int(idata["sample_stats"]["diverging"].sum()) == 0
