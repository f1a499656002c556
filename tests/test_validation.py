"""Inputs read as the user meant them (bayes_gp._validation; issue 37): dates as fractional
years, prediction inputs by column name, group labels compared as text."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from bayes_gp import GPRegression, HierarchicalGP
from bayes_gp._validation import as_inputs, decimal_years, new_inputs

DATES = pd.Series(pd.to_datetime(["2020-01-01", "2020-07-02", "2021-01-01"]), name="day")


def test_dates_are_fractional_years_said_once():
    with pytest.warns(UserWarning, match=r"'day' hold dates, used as fractional years"):
        X, names = as_inputs(pd.DataFrame({"day": DATES, "x": [1.0, 2.0, 3.0]}))
    np.testing.assert_allclose(X, [[2020.0, 1.0], [2020.5, 2.0], [2021.0, 3.0]], atol=1e-12)
    assert names == ["day", "x"]
    with pytest.warns(UserWarning, match="fractional years"):
        assert as_inputs(DATES)[0][:, 0] == pytest.approx([2020.0, 2020.5, 2021.0], abs=1e-12)
    with pytest.warns(UserWarning, match="fractional years"):
        as_inputs(DATES.to_numpy())  # a datetime64 array
    with warnings.catch_warnings():  # a model's prediction inputs: converted, not said again
        warnings.simplefilter("error")
        Xn = new_inputs(pd.DataFrame({"day": DATES}), 1, ["day"])
    np.testing.assert_allclose(Xn[:, 0], decimal_years(DATES), atol=0)


def test_prediction_inputs_are_read_by_column_name():
    frame = pd.DataFrame({"b": [0.0, 1.0], "a": [5.0, 6.0], "extra": ["u", "v"]})
    np.testing.assert_array_equal(new_inputs(frame, 2, ["a", "b"]), [[5.0, 0.0], [6.0, 1.0]])
    with pytest.raises(ValueError, match=r"lacks the column\(s\) \['c'\] .* has \['b', 'a', 'extra'\]"):
        new_inputs(frame, 2, ["a", "c"])
    # a model fitted on an array (names x0, x1): a DataFrame is read by position
    np.testing.assert_array_equal(new_inputs(frame[["b", "a"]], 2, ["x0", "x1"]),
                                  [[0.0, 5.0], [1.0, 6.0]])  # fmt: skip
    with pytest.raises(ValueError, match="has 3 column"):
        new_inputs(np.zeros((2, 3)), 2, ["a", "b"])


def test_a_model_predicts_by_column_name():
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=20), "b": rng.normal(size=20)})
    gp = GPRegression(X, X["a"] + 0.1 * rng.normal(size=20))
    params = gp.fit_map(n_restarts=1, random_seed=0)
    swapped = gp.predict(pd.DataFrame({"b": [0.0], "a": [1.0]}), params)
    ordered = gp.predict(np.array([[1.0, 0.0]]), params)
    assert swapped.mean == pytest.approx(ordered.mean, abs=0)
    with pytest.raises(ValueError, match=r"lacks the column\(s\) \['a', 'b'\]"):
        gp.predict(pd.DataFrame({"x": [1.0], "z": [0.0]}), params)


def _grouped() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"t": np.tile(np.arange(5.0), 3), "g": np.repeat(["100", "101", "7"], 5)})
    return df.assign(y=np.sin(df["t"]) + 0.1 * rng.normal(size=len(df)))


def test_group_labels_are_compared_as_text():
    h = HierarchicalGP(_grouped(), "t", "y", "g")
    _, _, codes, _ = h._new_rows(pd.DataFrame({"t": [1.0, 1.0, 1.0, 1.0], "g": [100, "101", 7, "new"]}))
    assert codes.tolist() == [0, 1, 2, -1]


def test_hierarchical_dates_are_fractional_years():
    df = _grouped()
    dated = df.assign(t=pd.Timestamp("2020-01-01") + pd.to_timedelta(df["t"] * 61, unit="D"))
    with pytest.warns(UserWarning, match=r"`x`: 't' hold dates, used as fractional years"):
        h = HierarchicalGP(dated, "t", "y", "g")
    assert h.X[:5, 0] == pytest.approx(2020.0 + np.arange(5) * 61 / 366, abs=1e-12)
    Xn, _, _, _ = h._new_rows(dated.iloc[:2])
    np.testing.assert_array_equal(Xn, h.X[:2])
