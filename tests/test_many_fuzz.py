"""Fuzzing the argument validation of :func:`bayes_gp.inference.fit_many` with hypothesis
(rules in ``tests/fuzz.py``).

Every case is invalid in exactly one way that ``fit_many`` checks before it starts a Dask
cluster (method, errors, the data layout and columns, group sizes, NUTS settings, the seed,
``n_workers``); the answer is a ValueError / TypeError naming the problem. A monkeypatched
``LocalCluster`` fails the test if any case gets as far as starting one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bayes_gp.many import fit_many
from tests.fuzz import expect_error, fuzz


class _NoCluster(Exception):
    pass


@pytest.fixture(scope="module")
def no_cluster():
    import dask.distributed

    mp = pytest.MonkeyPatch()

    def refuse(*args, **kwargs):
        raise _NoCluster("a cluster was started for invalid input")

    mp.setattr(dask.distributed, "LocalCluster", refuse)
    yield
    mp.undo()


FLAWS = ["method", "errors", "data-type", "df-no-columns", "group-list", "x-empty",
         "missing-column", "group-nan", "no-groups", "small-group", "mapping-columns",
         "mapping-value", "mapping-sizes", "fit-kwargs-draws", "fit-kwargs-seed-map", "draws",
         "tune", "chains", "cores", "sampler", "seed-type", "seed-negative", "seed-bool",
         "n-workers"]  # fmt: skip


@fuzz(120)
@given(
    n_groups=st.integers(1, 4),
    n=st.integers(2, 6),
    seed=st.integers(0, 2**16),
    flaw=st.sampled_from(FLAWS),
    method=st.sampled_from(["nuts", "map"]),
    bad_int=st.sampled_from([0, -1, -100]),
    token=st.text(alphabet="abcXYZ_- +*1", min_size=1, max_size=8),
)
def test_fit_many_validation_fuzz(no_cluster, n_groups, n, seed, flaw, method, bad_int, token):
    rng = np.random.default_rng(seed)
    labels = [f"g{i}" for i in range(n_groups)]
    df = pd.DataFrame(
        {
            "t": rng.uniform(0, 1, n * n_groups),
            "v": rng.normal(size=n * n_groups),
            "site": np.repeat(labels, n),
        }
    )
    kw: dict = {"data": df, "x": "t", "y": "v", "group": "site", "method": method}
    if flaw in ("fit-kwargs-draws", "draws", "tune", "chains", "cores", "sampler"):
        kw["method"] = "nuts"
    if flaw == "fit-kwargs-seed-map":
        kw["method"] = "map"
    match = {
        "method": "`method` must be one of",
        "errors": "`errors` must be 'collect' or 'raise'",
        "data-type": "`data` must be a pandas DataFrame",
        "df-no-columns": "give the column names `x=`, `y=` and `group=`",
        "group-list": "`group` must be one column name",
        "x-empty": "`x` names no column",
        "missing-column": "are not in the data",
        "group-nan": "the group column 'site' has 1 missing value",
        "no-groups": "`data` has no groups",
        "small-group": "at least 2 observations per group",
        "mapping-columns": "name DataFrame columns; a mapping gives them",
        "mapping-value": "must be a pair \\(X, y\\)",
        "mapping-sizes": "X has \\d+ rows but y has \\d+ values",
        "fit-kwargs-draws": "give `draws` as an argument of fit_many",
        "fit-kwargs-seed-map": "give `random_seed` as an argument of fit_many",
        "draws": "`draws` must be at least 1",
        "tune": "`tune` must be at least 0",
        "chains": "`chains` must be at least 1",
        "cores": "`cores` must be 1",
        "sampler": "sampler",
        "seed-type": "`random_seed` must be an int or None",
        "seed-negative": "`random_seed` must be non-negative",
        "seed-bool": "`random_seed` must be an int or None",
        "n-workers": "`n_workers` must be at least 1",
    }[flaw]
    if flaw == "method":
        kw["method"] = token
    elif flaw == "errors":
        kw["errors"] = token
    elif flaw == "data-type":
        kw["data"] = df.to_numpy() if seed % 2 else df.to_dict("list")["t"]
    elif flaw == "df-no-columns":
        kw[["x", "y", "group"][seed % 3]] = None
    elif flaw == "group-list":
        kw["group"] = ["site"]
    elif flaw == "x-empty":
        kw["x"] = []
    elif flaw == "missing-column":
        kw[["x", "y", "group"][seed % 3]] = "missing_" + token
    elif flaw == "group-nan":
        df.loc[len(df) - 1, "site"] = None
    elif flaw == "no-groups":
        kw["data"] = df.iloc[:0] if seed % 2 else {}
        if seed % 2 == 0:
            kw.update(x=None, y=None, group=None)
    elif flaw == "small-group":
        kw["data"] = df.iloc[: n * n_groups - (n - 1)]  # the last group keeps one row
    elif flaw.startswith("mapping"):
        data = {g: (d[["t"]], d["v"]) for g, d in df.groupby("site")}
        kw.update(data=data, x=None, y=None, group=None)
        if flaw == "mapping-columns":
            kw["y"] = "v"
        elif flaw == "mapping-value":
            data[labels[-1]] = data[labels[-1]][0]
        elif flaw == "mapping-sizes":
            Xg, yg = data[labels[0]]
            data[labels[0]] = (Xg, yg.iloc[:-1])
    elif flaw == "fit-kwargs-draws":
        kw["fit_kwargs"] = {"draws": 10}
    elif flaw == "fit-kwargs-seed-map":
        kw["fit_kwargs"] = {"random_seed": 1}
    elif flaw in ("draws", "chains"):
        kw[flaw] = bad_int
    elif flaw == "tune":
        kw["tune"] = min(bad_int, -1)
    elif flaw == "cores":
        kw.update(sampler="pymc", fit_kwargs={"cores": 2})
    elif flaw == "sampler":
        kw["sampler"] = "hmc-" + token
    elif flaw == "seed-type":
        kw["random_seed"] = [1.5, "7", 2.0][seed % 3]
    elif flaw == "seed-negative":
        kw["random_seed"] = bad_int - 1
    elif flaw == "seed-bool":
        kw["random_seed"] = True
    elif flaw == "n-workers":
        kw["n_workers"] = bad_int
    expect_error("fit_many (validation)", lambda: fit_many(**kw), match)


@pytest.mark.parametrize(
    ("kw", "error", "match"),
    [
        ({"draws": 1.5}, TypeError, "`draws` must be an integer"),
        ({"draws": "ten"}, TypeError, "`draws` must be an integer"),
        ({"tune": True}, TypeError, "`tune` must be an integer"),
        ({"chains": 0}, ValueError, "`chains` must be at least 1"),
        ({"tune": -1}, ValueError, "`tune` must be at least 0"),
    ],
)
def test_non_integer_sampler_settings_are_refused_not_truncated(no_cluster, kw, error, match):
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {"g": np.repeat(["a", "b"], 5), "x": rng.normal(size=10), "y": rng.normal(size=10)}
    )
    with pytest.raises(error, match=match):
        fit_many(df, x="x", y="y", group="g", method="nuts", **kw)
