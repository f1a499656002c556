"""The one sample() template (inference.sampling): settings checked, the model's hooks called,
its options and its default target acceptance rate passed on, the caller's arguments winning."""

from __future__ import annotations

import numpy as np
import pytest

from bayes_gp import GPClassifier, GPRegression, LatentGP

X = np.linspace(0.0, 5.0, 12)
Y = np.sin(X)


def test_defaults_the_models_own_and_the_callers(calls):
    gp = GPRegression(X, Y)
    for kwargs in ({}, {"target_accept": 0.8, "init": "jitter+adapt_diag"}):
        with pytest.raises(RuntimeError, match="recorded"):
            gp.sample(draws=10, tune=5, chains=1, random_seed=0, **kwargs)
    (m0, k0), (_, k1) = calls
    assert m0 is gp.model and k0["target_accept"] == 0.9 and not k0["latent"]
    assert k1["target_accept"] == 0.8 and k1["init"] == "jitter+adapt_diag"
    gp.default_target_accept = 0.95  # a declared model's choice for its posterior's geometry
    with pytest.raises(RuntimeError, match="recorded"):
        gp.sample(draws=10, tune=5, chains=1)
    assert calls[-1][1]["target_accept"] == 0.95


def test_model_specific_options_choose_the_run(calls):
    t = (Y > 0).astype(int)
    clf = GPClassifier(X, t)
    with pytest.raises(RuntimeError):
        clf.sample(draws=10, tune=5, chains=1)  # the default: the GP integrated out by Laplace
    assert not calls[-1][1]["latent"] and calls[-1][0] is clf.model
    with pytest.raises(RuntimeError):
        clf.sample(draws=10, tune=5, chains=1, method="nuts_joint")
    assert calls[-1][1]["latent"] and calls[-1][0] is not clf.model
    lat = LatentGP(X, np.round(np.exp(Y)).astype(int), likelihood="poisson")
    with pytest.raises(RuntimeError):
        lat.sample(draws=10, tune=5, chains=1)  # LatentGP's default: Laplace inside NUTS
    assert not calls[-1][1]["latent"] and calls[-1][0] is lat.model
    with pytest.raises(ValueError, match="`method` must be 'nuts' or 'nuts_joint'"):
        lat.sample(draws=10, tune=5, chains=1, method="joint")


def test_settings_are_checked_before_anything_runs(calls):
    with pytest.raises(ValueError):
        GPRegression(X, Y).sample(draws=0)
    assert calls == []


def test_draws_tune_and_chains_default_to_the_models_own(calls):
    """``None`` takes the model's ``default_nuts``: 2 x (1000 + 1000) for most models, 4 chains
    of 2000 draws for a HierarchicalGP under partial pooling (its slow-mixing group
    length-scales, HierarchicalGP.default_nuts); a given value wins."""
    import pandas as pd

    from bayes_gp import HierarchicalGP

    with pytest.raises(RuntimeError, match="recorded"):
        GPRegression(X, Y).sample()
    assert {k: calls[-1][1][k] for k in ("draws", "tune", "chains")} == {
        "draws": 1000, "tune": 1000, "chains": 2}  # fmt: skip
    df = pd.DataFrame({"t": np.tile(X, 3), "g": np.repeat(["a", "b", "c"], X.size),
                       "y": np.tile(Y, 3)})  # fmt: skip
    partial, shared = HierarchicalGP(df, "t", "y", "g"), HierarchicalGP(df, "t", "y", "g",
                                                                       pooling="shared")
    assert partial.default_nuts == {"draws": 2000, "tune": 1000, "chains": 4}
    assert shared.default_nuts == {"draws": 1000, "tune": 1000, "chains": 2}
    with pytest.raises(RuntimeError, match="recorded"):
        partial.sample(chains=2)
    assert {k: calls[-1][1][k] for k in ("draws", "tune", "chains")} == {
        "draws": 2000, "tune": 1000, "chains": 2}  # fmt: skip
    with pytest.raises(ValueError, match="`chains` must be a whole number"):
        partial.sample(chains=2.0)


def test_the_multiclass_classifier_samples_jointly_by_default(calls):
    """MulticlassGPClassifier.sample() is joint latent NUTS (level in speed with its
    Laplace-integrated sampler, better predictive: the class's module docstring);
    method="nuts" asks for that."""
    from bayes_gp import MulticlassGPClassifier

    clf = MulticlassGPClassifier(X, np.repeat([0, 1, 2], 4))
    with pytest.raises(RuntimeError, match="recorded"):
        clf.sample(draws=10, tune=5, chains=1)
    assert calls[-1][1]["latent"] and calls[-1][0] is not clf.model
    with pytest.raises(RuntimeError, match="recorded"):
        clf.sample(draws=10, tune=5, chains=1, method="nuts")
    assert not calls[-1][1]["latent"] and calls[-1][0] is clf.model
