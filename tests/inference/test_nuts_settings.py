"""Bad NUTS settings are refused by every model's ``sample`` before any compilation."""

from __future__ import annotations

import numpy as np
import pytest

from bayes_gp import (
    BayesianLinearRegression,
    DeepKernelRegression,
    GPClassifier,
    GPRegression,
    HeteroscedasticGPRegression,
)
from bayes_gp.inference.nuts import check_nuts_settings

X = np.linspace(0, 1, 12)
Y = np.sin(6 * X)

MODELS = {
    "GPRegression": lambda: GPRegression(X, Y),
    "GPClassifier": lambda: GPClassifier(X, X > 0.5),
    "HeteroscedasticGPRegression": lambda: HeteroscedasticGPRegression(X, Y),
    "DeepKernelRegression": lambda: DeepKernelRegression(X, Y),
    "BayesianLinearRegression": lambda: BayesianLinearRegression(X, Y),
}
BAD = [
    ({"draws": 0}, "`draws` must be at least 1, got 0"),
    ({"draws": -5}, "`draws` must be at least 1"),
    ({"tune": -1}, "`tune` must be at least 0, got -1"),
    ({"chains": 0}, "`chains` must be at least 1, got 0"),
    ({"draws": 10.5}, "`draws` must be a whole number, got 10.5"),
    ({"chains": True}, "`chains` must be a whole number, got True"),
]


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize(("settings", "message"), BAD, ids=[str(b[0]) for b in BAD])
def test_sample_refuses_bad_settings(name, settings, message, monkeypatch):
    """The defect: gpr.sample(draws=0) ended in an AttributeError deep inside PyMC. Each model
    refuses before its jitter pre-flight or any compilation (the pre-flight would fail loudly
    if reached)."""
    model = MODELS[name]()

    def not_reached(*args, **kwargs):
        raise AssertionError("the settings must be checked before the pre-flight")

    monkeypatch.setattr(type(model), "check_jitter", not_reached, raising=False)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        model.sample(**settings)


def test_good_settings_pass_as_ints():
    assert check_nuts_settings(np.int64(10), 0, 2) == (10, 0, 2)
