"""The hierarchical latent GP with a censored likelihood (issue 39): the censoring column
passes through to :class:`~bayes_gp.latent.censored.Weibull`."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayes_gp import hierarchical_gp


def _frame(seed=0, per_group=20):
    """Weibull times (shape 2) around a shared curve plus a group offset, right-censored by
    exponential times."""
    rng = np.random.default_rng(seed)
    rows = []
    for g, offset in enumerate((-0.4, 0.0, 0.4)):
        t = np.sort(rng.uniform(0.0, 5.0, per_group))
        f = 1.0 + 0.5 * np.sin(t) + offset
        times = np.exp(f) * rng.weibull(2.0, per_group)
        cens = rng.exponential(5.0, per_group)
        rows.append(pd.DataFrame({"t": t, "site": f"s{g}", "time": np.minimum(times, cens),
                                  "status": (cens < times).astype(int)}))  # fmt: skip
    return pd.concat(rows, ignore_index=True)


def test_hierarchical_weibull_takes_the_censoring_column():
    """``censored="status"`` reaches the likelihood (its codes are the column's); MAP gives a
    finite evidence, a shape near the simulated 2 and group means in the simulated order
    (offsets -0.4, 0, 0.4); a DataFrame of new rows may carry the column. A column the data
    lacks and a code outside 0/1 are refused before compiling."""
    df = _frame()
    m = hierarchical_gp(df, "t", "time", "site", likelihood="weibull", censored="status",
                        pooling="shared")
    np.testing.assert_array_equal(m.likelihood.censored, df["status"].to_numpy(float))
    fit = m.fit_map(n_restarts=1, random_seed=0)
    assert np.isfinite(fit.log_marginal_likelihood)
    assert 1.3 < fit.params["shape"] < 3.0, fit.params
    new = pd.DataFrame({"t": [2.5] * 3, "site": ["s0", "s1", "s2"], "status": [0, 1, 0]})
    pred = m.predict(new, fit)
    assert np.all(np.diff(pred.latent_mean) > 0), pred.latent_mean
    with pytest.raises(ValueError, match="column 'event' is not in the data"):
        hierarchical_gp(df, "t", "time", "site", likelihood="weibull", censored="event")
    bad = df.assign(status=df["status"] * 2)
    with pytest.raises(ValueError, match=r"0 \(event\), 1 \(right-censored\)"):
        hierarchical_gp(bad, "t", "time", "site", likelihood="weibull", censored="status")
