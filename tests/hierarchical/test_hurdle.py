"""A hierarchical GP with a hurdle likelihood (issue 39): the hurdle counts take an exposure
column, their zero probability is the data's fraction of zeros at the MAP, and known groups
are predicted."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayes_gp import hierarchical_gp
from bayes_gp.latent import HurdlePoisson


def test_hierarchical_hurdle_poisson_with_exposure():
    """Three groups of a hurdle Poisson (log mean 0.5 + sin(t + 1.5 g), 30% zeros) with exposure
    column E: the MAP zero probability is n0/n to 1e-5 (the evidence factorises as for
    LatentGP: tests/latent/test_hurdle.py), predictions of a known group are finite with
    integer bounds from 0, and a data set without zeros is refused. Each group has its own GP
    (shared=False, pooling='none'): a shared GP or pooled scales of three groups this different
    put a scale at 0, a degenerate MAP that warns."""
    rng = np.random.default_rng(7)
    rows = []
    for g in range(3):
        for t in np.linspace(0.0, 7.0, 12):
            e = rng.uniform(0.5, 2.0)
            mu = e * np.exp(0.5 + np.sin(t + 1.5 * g))
            y = 0.0 if rng.uniform() < 0.3 else float(
                HurdlePoisson(np.zeros(1))._positive_draws(np.array([mu]), [], rng)[0])
            rows.append((t, f"s{g}", y, e))
    df = pd.DataFrame(rows, columns=["t", "subject", "count", "E"])
    gp = hierarchical_gp(df, "t", "count", "subject", likelihood="hurdle_poisson", exposure="E",
                         shared=False, pooling="none")  # fmt: skip
    assert "zero_probability" in gp.hyperparameters
    fit = gp.fit_map(n_restarts=1, random_seed=0)
    n0 = int(np.sum(df["count"] == 0))
    assert float(fit.params["zero_probability"]) == pytest.approx(n0 / len(df), abs=1e-5)
    pred = gp.predict(pd.DataFrame({"t": [1.0, 4.0], "subject": ["s0", "s2"], "E": [1.0, 1.0]}),
                      fit)  # fmt: skip
    assert np.all(np.isfinite(pred.mean)) and np.all(pred.lower == 0)
    assert np.all(pred.upper == np.round(pred.upper))
    with pytest.raises(ValueError, match="needs zeros"):
        hierarchical_gp(df.assign(count=df["count"] + 1), "t", "count", "subject",
                        likelihood="hurdle_poisson")  # fmt: skip
