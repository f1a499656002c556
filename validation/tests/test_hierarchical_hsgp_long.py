"""Long version of the NUTS test of tests/hierarchical/test_hierarchical_hsgp.py (issue 35: CI
keeps a short run, 3 x 40 points, m = 12, and checks the sampled density exactly against the
exact model's priors and the HSGP likelihood). Here the original run: 3 groups x 120 points,
m = 24 on c = 2.5, 150 + 200 draws, r-hat < 1.05."""

import numpy as np
import pandas as pd

from bayes_gp.hierarchical import HierarchicalGP
from tests.hierarchical.test_hierarchical_hsgp import _panel


def test_nuts_on_the_hsgp_path():
    """NUTS over the HSGP likelihood (3 groups x 120 points, m = 24 on c = 2.5): it mixes (r-hat
    < 1.05, at most 2 divergences), recovers the noise sd of the simulation (0.2) and gives the
    pointwise log-likelihood for LOO and predictions that mix the draws."""
    import arviz as az

    df = _panel(sizes=[120] * 3, seed=2)
    h = HierarchicalGP(df, "t", "y", "subject", pooling={"ls": "shared"}, approx="hsgp",
                       approx_options={"m": 24, "c": 2.5})  # fmt: skip
    idata = h.sample(draws=150, tune=200, chains=2, random_seed=3)
    assert int(idata["sample_stats"]["diverging"].sum()) <= 2
    rhat = az.rhat(idata["posterior"].to_dataset()[["ls", "f0_ls", "sigma"]])
    assert max(float(rhat[v].max()) for v in rhat.data_vars) < 1.05
    sigma = np.asarray(idata["posterior"]["sigma"])
    assert abs(sigma.mean() - 0.2) < 0.03, sigma.mean()
    assert idata["log_likelihood"]["y"].shape[-1] == len(df)
    new = pd.DataFrame({"t": [2.0, 5.0], "subject": ["s1", "new"]})
    pred = h.predict(new, idata)
    assert np.all(np.isfinite(pred.mean)) and pred.sd[1] > pred.sd[0]
