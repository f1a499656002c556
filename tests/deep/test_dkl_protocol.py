"""DeepKernelRegression implements the model protocol: a report of its type-II and NUTS fits, a
``bayes-gp``-style workflow run with save/reload that predicts the same numbers, and
``fit_many`` — with no change to the report, workflow or fit_many code."""

from __future__ import annotations

import re

import numpy as np
import pytest

import bayes_gp
from bayes_gp import DeepKernelRegression
from bayes_gp.deep.dkl import NETWORK_GROUP, DKLFit
from bayes_gp.inference import MapFit
from bayes_gp.inference.compiled import nutpie_backend
from bayes_gp.predictive import factorize, loo_log_density
from bayes_gp.protocol import GPModel
from bayes_gp.report import report

pytestmark = pytest.mark.slow


def _step(n, seed, noise=0.1):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(-1, 1, n))
    return x, np.where(x > 0, 1.0, -1.0) + noise * rng.standard_normal(n)


@pytest.fixture(scope="module")
def fitted():
    x, y = _step(50, seed=5)
    dkl = DeepKernelRegression(x, y, hidden=(4,), features=1)
    fit = dkl.fit("map", maxiter=300, random_seed=0)
    # nutpie with JAX: seconds to compile on a fresh HOME, where PyMC's sampler spent most of
    # its 20-30 s compiling with numba (tests/conftest.py, ``nutpie_jax``)
    with nutpie_backend("jax"):
        idata = dkl.fit("nuts", draws=150, tune=200, chains=2, sampler="nutpie", random_seed=1,
                        network=fit)  # fmt: skip
    return dkl, fit, idata


def test_fits_are_the_protocols(fitted):
    dkl, fit, idata = fitted
    assert isinstance(dkl, GPModel) and isinstance(fit, DKLFit)
    assert dkl.fit_methods == ("map", "nuts") and dkl.sampling_methods == ("nuts",)
    assert dkl.hyperparameters == ["ls", "eta", "sigma"]
    # the point estimate shows the kernel hyperparameters; the network is kept beside them
    assert set(fit.params) == {"ls", "eta", "sigma"}
    assert set(fit.network) == {"W0", "b0", "W_out", "b_out"}
    assert fit.restarts[0].objective == fit.objective == -fit.loss
    assert set(fit.restarts[0].params) == set(fit.params)
    dkl.check_fit(fit)
    dkl.check_fit(idata)
    with pytest.raises(TypeError, match="a DeepKernelRegression fit is"):
        dkl.check_fit(MapFit({"ls": 1.0}, 0.0, False))
    assert NETWORK_GROUP in idata.children and "log_likelihood" in idata.children


def test_nuts_log_likelihood_is_the_exact_loo_of_each_draw(fitted):
    """The pointwise terms are R&W eqs. 5.10–5.12 of the GP layer at each draw: recomputed here
    from the closed form at one draw, through a named-parameter prediction."""
    dkl, fit, idata = fitted
    post = idata["posterior"]
    draw = {k: float(post[k][1, 7]) for k in ("ls", "eta", "sigma")}
    named = {**fit.network, **draw}
    theta = dkl.pack(named)
    C, *_ = dkl._fn("predict")(theta, dkl._inputs(dkl.X[:1]))
    ref = loo_log_density(factorize(C, dkl.y - dkl.y_mean))
    np.testing.assert_allclose(np.asarray(idata["log_likelihood"]["y"][1, 7]), ref, rtol=1e-10)


def test_point_loo_matches_brute_force(fitted):
    """Exact LOO of the GP layer at the fit (network fixed) equals refitting nothing and
    predicting each point from the other n − 1 with the same features and hyperparameters."""
    dkl, fit, _ = fitted
    method, loo = dkl.point_loo(fit)
    assert "network fixed" in method
    Z = dkl.features(dkl.X, fit)[:, 0]
    p = fit.params
    k = float(p["eta"]) ** 2 * np.exp(-0.5 * (Z[:, None] - Z[None, :]) ** 2 / float(p["ls"]) ** 2)
    C = k + (float(p["sigma"]) ** 2 + dkl.jitter) * np.eye(Z.size)
    r = dkl.y - dkl.y_mean
    for i in (0, 17, 49):
        keep = np.arange(Z.size) != i
        w = np.linalg.solve(C[np.ix_(keep, keep)], C[keep, i])
        mu = w @ r[keep]
        var = C[i, i] - w @ C[keep, i]
        ref = -0.5 * np.log(2 * np.pi * var) - 0.5 * (r[i] - mu) ** 2 / var
        assert loo[i] == pytest.approx(ref, rel=1e-8)


def test_report_of_point_and_nuts_fits(fitted):
    dkl, fit, idata = fitted
    rep = report({"DKL MAP": fit, "NUTS": idata}, model=dkl, X_new=np.array([[-0.5], [0.5]]))
    assert rep.problems == []
    html = rep.html
    assert "network g(x; W)" in html and "on the learned features" in html
    assert "exact LOO of the GP layer" in html
    assert set(rep.loo_table.index) == {"DKL MAP", "NUTS"}
    assert len(re.findall(r'<img src="data:image/png;base64,', html)) >= 6
    assert "Predictions at X_new" in html
    # the point-estimate table has the hyperparameters, not the network's weights
    assert "W0" not in html.split("Point estimate", 1)[1].split("</table>", 1)[0]


def test_replicates_follow_the_predictive_distribution(fitted):
    dkl, fit, idata = fitted
    reps = dkl.replicate(fit, 4000, random_seed=3)
    pred = dkl.predict(dkl.X, fit, include_noise=True)
    assert reps.shape == (4000, dkl.X.shape[0])
    np.testing.assert_allclose(reps.mean(axis=0), pred.mean, atol=4 * pred.sd.max() / 60)
    np.testing.assert_allclose(reps.std(axis=0), pred.sd, rtol=0.06)
    assert dkl.replicate(idata, 40, random_seed=0).shape == (40, dkl.X.shape[0])


def test_predictions_do_not_depend_on_the_latest_fit(fitted):
    """A NUTS fit records its network: predicting from it after another fit_map (which moves
    :attr:`model` to the new network) gives the same numbers."""
    dkl, _, idata = fitted
    xs = np.linspace(-1, 1, 9)
    before = dkl.predict(xs, idata)
    n_layers = len(dkl._layers)
    other = dkl.fit_map(maxiter=50, random_seed=9)
    assert len(dkl._layers) == n_layers  # a fit builds no PyMC model until one is read
    assert dkl.model is not None and other.network["W0"].shape == (1, 4)
    assert len(dkl._layers) == n_layers + 1
    after = dkl.predict(xs, idata)
    np.testing.assert_allclose(after.mean, before.mean, rtol=1e-12)
    np.testing.assert_allclose(after.var, before.var, rtol=1e-12)
    foreign = DeepKernelRegression(dkl.X, dkl.y, hidden=(3,), features=1)
    with pytest.raises(ValueError, match="recorded network has"):
        foreign.predict(xs, idata)


def test_fit_many_fits_deep_kernels_per_group():
    rng = np.random.default_rng(4)
    data = {g: _step(30, seed=int(rng.integers(1000))) for g in ("a", "b")}
    res = bayes_gp.fit_many(
        data, model=DeepKernelRegression, method="map", n_workers=1, random_seed=0,
        model_kwargs={"hidden": (3,), "features": 1}, fit_kwargs={"maxiter": 200},
    )  # fmt: skip
    assert res.errors == {} and list(res.table.index) == ["a", "b"]
    for g, (x, y) in data.items():
        direct = DeepKernelRegression(x, y, hidden=(3,), features=1).fit_map(
            maxiter=200, random_seed=res.seeds[g]
        )
        assert res.table.loc[g, "log_marginal_likelihood"] == pytest.approx(
            direct.log_marginal_likelihood, rel=1e-9
        )


DECLARED = """
import numpy as np

from bayes_gp import DeepKernelRegression
from bayes_gp.declared import Dataset

TASK = "regression"
SUMMARY = "deep kernel regression of a noisy step"
METHODS = ("map", "nuts")
SETTINGS = {
    "fast": {"draws": 100, "tune": 150, "chains": 1, "n_restarts": 1},
    "full": {"draws": 500, "tune": 500, "chains": 2, "n_restarts": 2},
}


def load_data(fast=False):
    rng = np.random.default_rng(7)
    x = np.sort(rng.uniform(-1, 1, 45))
    y = np.where(x > 0, 1.0, -1.0) + 0.1 * rng.standard_normal(45)
    test = np.arange(45) % 3 == 0
    return Dataset(x[~test, None], y[~test], ["x"], "y", "simulated step", X_test=x[test, None],
                   y_test=y[test], X_new=np.array([[-0.5], [0.5]]))


def build(data, method):
    return DeepKernelRegression(data.X_train, data.y_train, hidden=(4,), features=1)
"""


@pytest.mark.parametrize("method", ["map", "nuts"])
def test_workflow_runs_saves_and_reloads(tmp_path, monkeypatch, method, nutpie_jax):
    """(NUTS on nutpie with JAX, as the fixture above: the round trip is the subject here.)"""
    from tests.helpers import workflow_round_trip

    X = np.linspace(-1, 1, 7)[:, None]
    res = workflow_round_trip(tmp_path, monkeypatch, "dkl_step", DECLARED, method, X, 1e-10)
    assert res.scores["rmse"] < 0.7  # a constant predicts with RMSE ≈ 1
