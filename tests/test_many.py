"""Many independent GP fits on Dask (``bayes_gp.fit_many``), on a real local cluster of processes.

Three groups generated with known Matérn-5/2 length-scales (0.5, 1.5, 4.0): every per-group
result must equal a direct ``GPRegression`` fit of that group with the group's derived seed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import bayes_gp
from bayes_gp import GPRegression
from bayes_gp.many import FitManyError, group_seed

pytestmark = pytest.mark.slow

LS = {"a": 0.5, "b": 1.5, "c": 4.0}
N = {"a": 20, "b": 25, "c": 30}
SIGMA = 0.1


def _matern52(x, ls):
    """R&W eq. 4.17 with nu = 5/2, unit variance."""
    r = np.abs(x[:, None] - x[None, :]) / ls
    s5 = np.sqrt(5.0) * r
    return (1.0 + s5 + s5**2 / 3.0) * np.exp(-s5)


def _data() -> pd.DataFrame:
    rng = np.random.default_rng(20261123)
    parts = []
    for g in LS:
        x = np.sort(rng.uniform(0.0, 10.0, N[g]))
        L = np.linalg.cholesky(_matern52(x, LS[g]) + 1e-9 * np.eye(N[g]))
        f = L @ rng.standard_normal(N[g])
        parts.append(pd.DataFrame({"site": g, "t": x, "y": f + SIGMA * rng.standard_normal(N[g])}))
    return pd.concat(parts, ignore_index=True)


def _group(df, g):
    d = df[df["site"] == g]
    return d[["t"]], d["y"].to_numpy()


def test_map_per_group_equals_direct_fits(client):
    df = _data()
    res = bayes_gp.fit_many(
        df, x="t", y="y", group="site", kernel="matern52", method="map", random_seed=11,
        client=client, fit_kwargs={"n_restarts": 3},
    )  # fmt: skip
    assert client.status == "running"  # a user's client is left open
    assert res.groups == ("a", "b", "c") and not res.errors
    table = res.table
    assert list(table.index) == ["a", "b", "c"] and table.index.name == "group"
    assert table["n_obs"].tolist() == [20, 25, 30]
    for g in LS:
        assert res.seeds[g] == group_seed(11, g)
        X, y = _group(df, g)
        direct = GPRegression(X, y, kernel="matern52").fit_map(
            n_restarts=3, random_seed=res.seeds[g]
        )
        for name, value in direct.params.items():
            np.testing.assert_allclose(res.fits[g].params[name], value, rtol=1e-10)
            np.testing.assert_allclose(table.loc[g, name], value, rtol=1e-10)
        np.testing.assert_allclose(
            table.loc[g, "log_marginal_likelihood"], direct.log_marginal_likelihood, rtol=1e-10
        )
        assert bool(table.loc[g, "converged"]) and table.loc[g, "error"] is None
    # each row belongs to its group: the estimated length-scales follow the true ones
    assert table.loc["a", "ls"] < table.loc["b", "ls"] < table.loc["c", "ls"]
    # ... and the fitted model of a group can be rebuilt here to predict
    pred = res.model("c").predict(np.array([5.0]), res.fits["c"])
    assert np.isfinite(pred.mean).all()


def test_nuts_gathered_by_group_and_independent_of_scheduling(client):
    df = _data()
    # nutpie (the exact GP's C path: nothing compiled in the worker or here; PyMC's sampler in a
    # worker: tests/test_many_store.py, test_nuts_results_are_netcdf_that_arviz_reads)
    kw = {"kernel": "matern52", "draws": 30, "tune": 40, "chains": 2, "sampler": "nutpie"}
    res = bayes_gp.fit_many(df, x="t", y="y", group="site", random_seed=5, client=client, **kw)
    assert not res.errors
    post = res.idata["posterior"]
    assert dict(post.sizes) == {"group": 3, "chain": 2, "draw": 30}
    assert list(post["group"].values) == ["a", "b", "c"]
    ll = res.idata["log_likelihood"]["y"]
    assert ll.sizes["obs"] == 30 and ll["n_obs"].values.tolist() == [20, 25, 30]
    # groups with fewer observations are padded with NaN, and only there
    for g, n in N.items():
        vals = ll.sel(group=g).values
        assert np.isfinite(vals[..., :n]).all() and np.isnan(vals[..., n:]).all()
    assert set(res.table.columns) >= {"max_rhat", "min_ess_bulk", "divergences", "seconds"}

    # two of the groups in reverse order, as a mapping (so scheduled differently): each
    # group's draws are unchanged (its seed depends on its label, not on position or worker)
    mapping = {g: _group(df, g) for g in ("c", "b")}
    again = bayes_gp.fit_many(mapping, random_seed=5, client=client, **kw)
    for g in ("c", "b"):
        np.testing.assert_array_equal(
            again.idata["posterior"]["ls"].sel(group=g).values, post["ls"].sel(group=g).values
        )
    # ... and equal a direct fit of the group with its seed
    X, y = _group(df, "b")
    direct = GPRegression(X, y, kernel="matern52").sample(
        draws=30, tune=40, chains=2, sampler="nutpie", random_seed=res.seeds["b"]
    )
    for name in ("ls", "eta", "sigma"):
        np.testing.assert_allclose(
            post[name].sel(group="b").values, direct["posterior"][name].values, rtol=1e-12
        )
    np.testing.assert_allclose(
        ll.sel(group="b").values[..., :25], direct["log_likelihood"]["y"].values, rtol=1e-12
    )


def test_failing_group_is_collected_and_others_succeed(client):
    """On the default cluster (started and closed by fit_many), then on a user's client."""
    df = _data()
    df.loc[df.index[df["site"] == "b"][3], "y"] = np.nan
    kw = {"x": "t", "y": "y", "group": "site", "kernel": "matern52", "method": "map"}
    res = bayes_gp.fit_many(df, random_seed=1, n_workers=1, fit_kwargs={"n_restarts": 1}, **kw)
    assert set(res.fits) == {"a", "c"} and res.ok == ("a", "c"), res.errors
    assert "NaN" in res.errors["b"] and "ValueError" in res.errors["b"]
    assert res.table.loc["b", "error"] == res.errors["b"]
    assert np.isnan(res.table.loc["b", "ls"]) and res.table.loc["a", "error"] is None
    with pytest.raises(FitManyError, match=r"1 of 2 group fits failed:\n  'b': ValueError") as e:
        bayes_gp.fit_many(
            {g: _group(df, g) for g in ("a", "b")}, kernel="matern52", method="map",
            random_seed=1, client=client, fit_kwargs={"n_restarts": 1}, errors="raise",
        )  # fmt: skip
    assert e.value.result.ok == ("a",)


def test_jax_backend_runs_in_a_worker_and_reports_its_platform(client):
    """sampler="numpyro" (the GPU path) inside a Dask worker; here JAX runs on the CPU."""
    df = _data()
    res = bayes_gp.fit_many(
        df[df["site"] == "c"], x="t", y="y", group="site", kernel="matern52",
        draws=20, tune=20, chains=2, sampler="numpyro", random_seed=2, client=client,
    )  # fmt: skip
    assert not res.errors
    attrs = res.fits["c"]["posterior"].attrs
    assert attrs["bayes_gp_sampler"] == "numpyro"
    assert attrs["bayes_gp_jax_platform"] == "cpu"
    assert res.idata["posterior"]["ls"].shape == (1, 2, 20)


def test_nutpie_groups_take_the_exact_gps_c_path(client):
    """fit_many passes ``quiet=True`` to ``sample``: its nutpie fits still go through bayes_gp's
    own nutpie path (no per-group compilation; here the exact GP's C log density), with the
    draws of a direct fit of the group with its seed."""
    df = _data()
    kw = {"kernel": "matern52", "draws": 30, "tune": 40, "chains": 2, "sampler": "nutpie"}
    res = bayes_gp.fit_many(
        df[df["site"] != "c"], x="t", y="y", group="site", random_seed=4, client=client, **kw
    )
    assert not res.errors
    for g in ("a", "b"):
        attrs = res.fits[g]["posterior"].attrs
        assert attrs["bayes_gp_sampler"] == "nutpie"
        assert attrs["bayes_gp_nutpie_backend"] == "native", attrs["bayes_gp_nutpie_backend_reason"]
    X, y = _group(df, "b")
    direct = GPRegression(X, y, kernel="matern52").sample(
        draws=30, tune=40, chains=2, sampler="nutpie", random_seed=res.seeds["b"], quiet=True,
    )  # fmt: skip
    for name in ("ls", "eta", "sigma"):
        np.testing.assert_allclose(
            res.idata["posterior"][name].sel(group="b").values, direct["posterior"][name].values,
            rtol=1e-12,
        )


def test_group_seeds_depend_on_seed_and_label_only():
    assert group_seed(3, "a") == group_seed(3, "a")
    assert group_seed(3, "a") != group_seed(3, "b") != group_seed(4, "b")
    assert group_seed(3, np.int64(7)) == group_seed(3, 7)  # a pandas label equals the Python one
    assert group_seed(3, 7) != group_seed(3, "7")
    assert 0 <= group_seed(None, "a") < 2**32


def test_bad_input_gives_clear_errors():
    df = _data()
    kw = {"x": "t", "y": "y", "group": "site"}
    with pytest.raises(ValueError, match=r"columns \['dose'\] are not in the data"):
        bayes_gp.fit_many(df, x=["t", "dose"], y="y", group="site")
    with pytest.raises(ValueError, match="give the column names"):
        bayes_gp.fit_many(df, x="t", y="y")
    one = pd.concat([df, pd.DataFrame({"site": ["d"], "t": [1.0], "y": [0.0]})])
    with pytest.raises(ValueError, match=r"at least 2 observations per group; groups \{'d': 1\}"):
        bayes_gp.fit_many(one, **kw)
    with pytest.raises(ValueError, match="group column 'site' has 1 missing"):
        bayes_gp.fit_many(pd.concat([df, pd.DataFrame({"site": [None], "t": [1.0]})]), **kw)
    with pytest.raises(ValueError, match="`method` must be one of"):
        bayes_gp.fit_many(df, method="vi", **kw)
    with pytest.raises(ValueError, match="`errors` must be"):
        bayes_gp.fit_many(df, errors="ignore", **kw)
    with pytest.raises(ValueError, match="`cores` must be 1"):
        bayes_gp.fit_many(df, sampler="pymc", fit_kwargs={"cores": 2}, **kw)
    with pytest.raises(ValueError, match="give `draws` as an argument"):
        bayes_gp.fit_many(df, fit_kwargs={"draws": 10}, **kw)
    with pytest.raises(TypeError, match=r"`data\['a'\]` must be a pair"):
        bayes_gp.fit_many({"a": np.zeros(3)})
    with pytest.raises(ValueError, match="X has 3 rows but y has 2"):
        bayes_gp.fit_many({"a": (np.zeros(3), np.zeros(2))})
    with pytest.raises(TypeError, match="must be a pandas DataFrame"):
        bayes_gp.fit_many(np.zeros((3, 2)))
    with pytest.raises(TypeError, match="`random_seed` must be an int"):
        bayes_gp.fit_many(df, random_seed=1.5, **kw)


def test_a_formula_per_group(client):
    """fit_many takes a formula model through the model protocol (formula_class): each group's
    fit equals a direct bayes_gp.Model fit of the group's rows."""
    from bayes_gp.formula import Model, formula_class

    df = _data()
    formula = "y ~ gp(t, kernel='matern52')"
    res = bayes_gp.fit_many(
        df, x="t", y="y", group="site", method="map", random_seed=3, client=client,
        model=formula_class(formula), fit_kwargs={"n_restarts": 2},
    )  # fmt: skip
    assert not res.errors, res.errors
    for g in LS:
        rows = df[df["site"] == g]
        direct = Model(formula, rows).fit("map", n_restarts=2, random_seed=res.seeds[g])
        for name, value in direct.params.items():
            np.testing.assert_allclose(res.fits[g].params[name], value, rtol=1e-8)
    with pytest.raises(ValueError, match="names its kernels"):
        formula_class(formula)(df[["t"]], df["y"].to_numpy(), kernel="matern32")


def test_a_labelled_bernoulli_formula_per_group(client):
    """``formula_class("out ~ gp(t)", family="bernoulli")`` of a response of labels "no"/"yes":
    both groups fit; each group's model is the classifier whose event is "yes" (the larger
    sorted label, GPClassifier's positive class), its columns ``p_positive``, ``latent_mean``,
    ``latent_sd`` and ``predicted`` (labels), ``p_positive`` higher on the "yes" rows; the fit
    equals a direct Model fit of the group's rows."""
    from bayes_gp.formula import Model, formula_class

    rng = np.random.default_rng(7)
    parts = []
    for g, shift in (("a", 0.0), ("b", 1.0)):
        t = np.sort(rng.uniform(0.0, 6.0, 16))
        p = 1.0 / (1.0 + np.exp(-2.0 * np.sin(t + shift)))
        out = np.where(rng.uniform(size=t.size) < p, "yes", "no")
        parts.append(pd.DataFrame({"site": g, "t": t, "out": out}))
    df = pd.concat(parts, ignore_index=True)
    res = bayes_gp.fit_many(
        df, x="t", y="out", group="site", method="map", random_seed=3, client=client,
        model=formula_class("out ~ gp(t)", family="bernoulli"), fit_kwargs={"n_restarts": 1},
    )  # fmt: skip
    assert res.ok == ("a", "b") and not res.errors, res.errors
    assert {"gp(t).ls", "gp(t).eta", "log_marginal_likelihood"} <= set(res.table.columns)
    assert res.table["converged"].tolist() == [True, True]
    for g in res.ok:
        rows = df[df["site"] == g]
        gp = res.model(g)
        assert gp.family == "bernoulli" and gp.classes_.tolist() == ["no", "yes"]
        cols = gp.prediction_columns(rows[["t"]], res.fits[g])
        assert list(cols) == ["p_positive", "latent_mean", "latent_sd", "predicted"]
        p_yes = np.asarray(cols["p_positive"])
        np.testing.assert_array_equal(cols["predicted"], np.where(p_yes > 0.5, "yes", "no"))
        is_yes = rows["out"].to_numpy() == "yes"
        assert p_yes[is_yes].mean() > p_yes[~is_yes].mean() + 0.1
    rows = df[df["site"] == "a"]
    direct = Model("out ~ gp(t)", rows, family="bernoulli").fit("map", n_restarts=1,
                                                                 random_seed=res.seeds["a"])  # fmt: skip
    for name, value in direct.params.items():
        np.testing.assert_allclose(res.fits["a"].params[name], value, rtol=1e-8)
