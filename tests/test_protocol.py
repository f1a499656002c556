"""A model family defined here, in the test suite, that implements only the model protocol
(:class:`bayes_gp.protocol.GPModel`) gets a full HTML report from ``bayes_gp.report`` without any
change to the report's code.

The family: GP regression with a fixed, known kernel, :math:`y = f + \\varepsilon`,
:math:`f \\sim GP(0, k)` with :math:`k(x, x') = \\exp(-(x - x')^2 / 2)` (R&W eq. 2.16) and the
noise :math:`\\sigma` its only hyperparameter; its predictive equations are R&W eqs. 2.22–2.24,
written out here in NumPy, and its exact LOO R&W eqs. 5.10–5.12.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy import optimize

from bayes_gp.protocol import Bands, GPModel, PointFit, is_nuts
from bayes_gp.report import report
from tests.helpers import PY_MODE

pytestmark = pytest.mark.slow


def _k(a, b):
    return np.exp(-0.5 * (a[:, None] - b[None, :]) ** 2)


@dataclass(frozen=True)
class SigmaFit(PointFit):
    """A type-II fit of the noise only."""

    params: dict
    log_marginal_likelihood: float
    objective: float
    prior: bool = False
    restarts: list = field(default_factory=list)
    grad_norm: float = float("nan")
    seconds: float = float("nan")
    jitter: float = 0.0


class FixedKernelGP(GPModel):
    fit_methods = ("map", "nuts")

    def __init__(self, x, y, kernel=None):
        self.X = np.asarray(x, float).reshape(-1)[:, None]
        self.y = np.asarray(y, float).reshape(-1)
        self.feature_names = ["t"]
        n = self.y.size
        K = _k(self.X[:, 0], self.X[:, 0])
        with pm.Model() as self.model:
            sigma = pm.HalfNormal("sigma", 1.0)
            pm.MvNormal("y", mu=np.zeros(n), cov=pt.as_tensor(K) + sigma**2 * pt.eye(n),
                        observed=self.y)  # fmt: skip

    # --- the protocol -------------------------------------------------------------------------
    @property
    def hyperparameters(self):
        return ["sigma"]

    @property
    def label(self):
        return "fixed SE kernel"

    @property
    def observed(self):
        return self.y

    def describe(self):
        return [("kernel", "k(x, x') = exp(−(x − x')²/2), fixed"), ("likelihood", "Gaussian")]

    def _lml(self, sigma):
        C = _k(self.X[:, 0], self.X[:, 0]) + sigma**2 * np.eye(self.y.size)
        L = np.linalg.cholesky(C)
        a = np.linalg.solve(L, self.y)
        return -0.5 * a @ a - np.log(np.diag(L)).sum() - 0.5 * self.y.size * np.log(2 * np.pi)

    def fit(self, method="map", **options):
        if method == "map":
            t0 = time.perf_counter()
            res = optimize.minimize_scalar(lambda s: -self._lml(np.exp(s)), bounds=(-8, 3),
                                           method="bounded")  # fmt: skip
            sigma = float(np.exp(res.x))
            return SigmaFit({"sigma": np.array(sigma)}, self._lml(sigma), self._lml(sigma),
                            seconds=time.perf_counter() - t0)  # fmt: skip
        with self.model:
            idata = pm.sample(nuts_sampler="pymc", cores=1, progressbar=False, **options)
            pm.compute_log_likelihood(idata, progressbar=False)
        return idata

    def check_fit(self, fit):
        if not (is_nuts(fit) or isinstance(fit, SigmaFit)):
            raise TypeError(f"not a fit of FixedKernelGP: {type(fit).__name__}")

    def _sigmas(self, fit, n=None):
        if is_nuts(fit):
            s = np.asarray(fit["posterior"]["sigma"], float).ravel()
            return s if n is None else s[np.linspace(0, s.size - 1, n).astype(int)]
        return np.full(1 if n is None else n, float(fit.params["sigma"]))

    def _predict(self, xs, sigma):
        """R&W eqs. 2.22–2.24 at one noise level: mean and variance of f_*."""
        x = self.X[:, 0]
        C = _k(x, x) + sigma**2 * np.eye(x.size)
        Ks = _k(x, xs)
        mean = Ks.T @ np.linalg.solve(C, self.y)
        var = 1.0 - np.sum(Ks * np.linalg.solve(C, Ks), axis=0)
        return mean, np.maximum(var, 0.0)

    def replicate(self, fit, n_draws, random_seed=0):
        rng = np.random.default_rng(random_seed)
        reps = []
        for s in self._sigmas(fit, n_draws):
            m, v = self._predict(self.X[:, 0], s)
            reps.append(m + np.sqrt(v + s**2) * rng.standard_normal(m.size))
        return np.array(reps)

    def _mixture(self, xs, fit):
        ms, vs, noise = [], [], []
        for s in self._sigmas(fit, 50 if is_nuts(fit) else None):
            m, v = self._predict(xs, s)
            ms.append(m)
            vs.append(v)
            noise.append(s**2)
        ms, vs, noise = np.array(ms), np.array(vs), np.array(noise)[:, None]
        mean = ms.mean(axis=0)
        var_f = vs.mean(axis=0) + ms.var(axis=0)
        var_y = (vs + noise).mean(axis=0) + ms.var(axis=0)
        return mean, var_f, var_y

    def bands(self, grid, fit):
        mean, vf, vy = self._mixture(grid, fit)
        z = 1.880793608151251
        return Bands("regression", self.X[:, 0], self.y, grid, mean, mean - z * np.sqrt(vf),
                     mean + z * np.sqrt(vf), mean - z * np.sqrt(vy), mean + z * np.sqrt(vy))  # fmt: skip

    def prediction_columns(self, X_new, fit):
        mean, _, vy = self._mixture(np.asarray(X_new, float).ravel(), fit)
        return {"mean": mean, "sd_y": np.sqrt(vy)}

    def scores(self, y, columns):
        resid = np.asarray(y, float) - np.asarray(columns["mean"])
        return {"rmse": float(np.sqrt(np.mean(resid**2)))}

    def point_loo(self, fit):
        """R&W eqs. 5.10–5.12."""
        s = float(fit.params["sigma"])
        Ci = np.linalg.inv(_k(self.X[:, 0], self.X[:, 0]) + s**2 * np.eye(self.y.size))
        var = 1.0 / np.diag(Ci)
        mu = self.y - (Ci @ self.y) * var
        return "exact LOO (R&W 5.10-5.12)", -0.5 * np.log(2 * np.pi * var) - 0.5 * (
            self.y - mu
        ) ** 2 / var

    def restore_fit(self, method, params, attrs):
        sigma = float(params["sigma"])
        return SigmaFit({"sigma": np.asarray(sigma)}, self._lml(sigma), float(attrs["objective"]))

    def set_jitter(self, jitter):
        """No jitter: the fixed kernel's matrix plus σ² I is well conditioned."""


@pytest.fixture(scope="module")
def family():
    rng = np.random.default_rng(2)
    x = np.sort(rng.uniform(0, 8, 25))
    return FixedKernelGP(x, np.sin(x) + 0.2 * rng.standard_normal(25))


def test_point_fit_report(family):
    fit = family.fit("map")
    rep = report(fit, model=family, X_new=np.array([8.5, 9.0]))
    assert rep.problems == []
    html = rep.html
    assert "bayes_gp report: fixed SE kernel ML-II" in html
    assert "k(x, x&#x27;) = exp(−(x − x&#x27;)²/2), fixed" in html
    assert "exact LOO (R&amp;W 5.10-5.12)" in html
    # prior predictive check, PPC and bands
    assert len(re.findall(r'<img src="data:image/png;base64,', html)) == 3
    assert "Predictions at X_new" in html
    assert rep.loo_table is None  # one fit: no comparison
    # a family that approximates nothing inherits no approximation checks
    assert family.approximation_checks(fit) == []
    assert list(rep.approximation_checks.values()) == [[]]


def test_inherited_prior_predictive_and_held_out_defaults(family):
    """The protocol's default prior predictive draws the PyMC model's observed variable: here
    y ~ N(0, K + σ² I), σ ~ HalfNormal(1), so Var(y_i) = 1 + E[σ²] = 2. A family without
    ``held_out_predictive`` gets a note in the report's calibration section, not an error."""
    draws = family.prior_predictive(2000, random_seed=3)
    assert draws.shape == (2000, 25)
    assert np.mean(draws.var(axis=0)) == pytest.approx(2.0, rel=0.08)
    fit = family.fit("map")
    with pytest.raises(NotImplementedError, match="held-out"):
        family.held_out_predictive(family.X, family.y, fit)
    rep = report(fit, model=family, held_out=(family.X[:5], family.y[:5]), figures=False)
    assert rep.problems == []
    assert "Not available: FixedKernelGP does not compute the predictive distribution" in rep.html
    assert {"prior predictive: mean of y", "prior predictive: sd of y"} <= {
        v.check for v in rep.verdicts
    }


@pytest.mark.filterwarnings("ignore:The point-wise LOO is the same")
def test_nuts_and_point_fits_compared(family):
    # PyTensor's Python linker: numba's compilation of this user model took 10-20 s cold
    idata = family.fit(
        "nuts", draws=200, tune=200, chains=2, random_seed=1, compile_kwargs={"mode": PY_MODE}
    )
    fits = {"ML-II": family.fit("map"), "NUTS": idata}
    rep = report(fits, model=family)
    assert rep.problems == []
    assert set(rep.loo_table.index) == {"ML-II", "NUTS"}
    assert "Trace and rank plots" in rep.html and "Prior vs posterior" in rep.html


def test_a_fit_of_another_model_is_refused(family):
    other = SigmaFit({"sigma": np.array(0.1)}, 0.0, 0.0)
    family.check_fit(other)  # its own kind
    with pytest.raises(ValueError, match="does not match the fit"):
        report(object.__new__(type("Other", (PointFit,), {})), model=family)


def test_fit_many_runs_the_family_per_group(family):
    """fit_many fits the family to each group through the protocol, and a group's result equals
    the direct fit."""
    import bayes_gp

    rng = np.random.default_rng(4)
    data = {}
    for g in ("a", "b"):
        x = np.sort(rng.uniform(0, 8, 20))
        data[g] = (x, np.sin(x) + 0.3 * rng.standard_normal(20))
    res = bayes_gp.fit_many(data, model=FixedKernelGP, method="map", n_workers=1, random_seed=0)
    assert res.errors == {} and list(res.table.index) == ["a", "b"]
    for g, (x, y) in data.items():
        direct = FixedKernelGP(x, y).fit("map")
        assert float(res.fits[g].params["sigma"]) == pytest.approx(float(direct.params["sigma"]))
        assert res.table.loc[g, "log_marginal_likelihood"] == pytest.approx(
            direct.log_marginal_likelihood
        )
    with pytest.raises(ValueError, match="must be one of"):
        bayes_gp.fit_many(data, model=FixedKernelGP, method="laplace")
    with pytest.raises(TypeError, match=r"implementing bayes_gp\.protocol\.GPModel"):
        bayes_gp.fit_many(data, model=object)


DECLARED = '''
import numpy as np

from bayes_gp.declared import Dataset
from tests.test_protocol import FixedKernelGP

TASK = "regression"
SUMMARY = "a GP with a fixed kernel (the test family of tests/test_protocol.py)"
METHODS = ("map", "nuts")
SETTINGS = {
    "fast": {"draws": 100, "tune": 100, "chains": 1, "n_restarts": 1},
    "full": {"draws": 500, "tune": 500, "chains": 2, "n_restarts": 1},
}


def load_data(fast=False):
    rng = np.random.default_rng(7)
    x = np.sort(rng.uniform(0, 8, 30))
    y = np.sin(x) + 0.2 * rng.standard_normal(30)
    test = np.arange(30) % 3 == 0
    return Dataset(x[~test, None], y[~test], ["t"], "y", "simulated", X_test=x[test, None],
                   y_test=y[test], X_new=np.array([[9.0], [10.0]]))


def build(data, method):
    return FixedKernelGP(data.X_train, data.y_train)
'''


def test_workflow_runs_saves_and_reloads_the_family(tmp_path, monkeypatch):
    """The bayes-gp workflow (run, save, reload, report) on a declared model of the family: the
    reloaded fit predicts the same numbers, and the report rebuilt from the saved files is the
    one written with the fit."""
    from tests.helpers import workflow_round_trip

    X = np.linspace(0, 10, 7)[:, None]
    res = workflow_round_trip(tmp_path, monkeypatch, "fixed_family", DECLARED, "map", X, 1e-12)
    assert set(res.scores) == {"rmse", "n_test"} and res.scores["rmse"] < 0.5
