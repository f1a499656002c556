"""Long versions of tests/regression/test_approx_checks.py (issue 35: CI keeps a short version
of each; these run later, with ``./run validate`` or ``python -m pytest validation/tests``).

* VFE: the advice of the fit-vs-exact check, followed, gives a fit the check passes (a third
  type-II fit of 200 points; the CI test stops at the advice's number).
* HSGP: the edge and advice cases through the full :func:`for_regression` (the CI tests call the
  resolution, boundary and error checks alone, skipping the fit-vs-exact check's L-BFGS).
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from bayes_gp import GPRegression
from bayes_gp.protocol import ApproximationCheck
from bayes_gp.regression import approx_checks as ac


@pytest.fixture(scope="module", autouse=True)
def _one_blas_thread():
    with threadpool_limits(limits=1, user_api="blas"):
        yield


@pytest.fixture(scope="module")
def wiggly():
    """n = 200 points of a function with length-scale ~0.35 on [0, 10], noise sd 0.1 (the
    data of tests/regression/test_approx_checks.py)."""
    rng = np.random.default_rng(1)
    X = np.sort(rng.uniform(0, 10, 200))
    y = np.sin(3 * X) + 0.5 * np.sin(7 * X) + 0.1 * rng.normal(size=200)
    return X, y


def _fit(X, y, **kwargs):
    gp = GPRegression(X, y, kernel="expquad", **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = gp.fit_map(n_restarts=1, random_seed=1)
    return gp, fit


def _at(gp, params):
    nan = float("nan")
    attrs = {"objective": nan, "prior": False, "grad_norm": nan, "log_marginal_likelihood": nan}
    return gp.restore_fit("map", params, attrs)


def _by_name(checks) -> dict[str, ApproximationCheck]:
    assert all(isinstance(c, ApproximationCheck) for c in checks)
    return {c.name: c for c in checks}


def test_vfe_advice_followed_fits_the_exact_optimum(wiggly):
    X, y = wiggly
    gp3, fit3 = _fit(X, y, approx="vfe", approx_options={"n_inducing": 3})
    few = _by_name(ac.for_regression(gp3, fit3))
    assert few["VFE inducing-input coverage"].status == "warn"
    assert few["VFE fit vs exact GP"].status == "fail"  # measured 1.67 nats per point
    advised = int(re.search(r"'n_inducing': (\d+)", few["VFE fit vs exact GP"].advice).group(1))
    gp_a, fit_a = _fit(X, y, approx="vfe", approx_options={"n_inducing": advised})
    assert _by_name(ac.for_regression(gp_a, fit_a))["VFE fit vs exact GP"].status == "ok"


def test_hsgp_advice_resolves_the_fitted_length_scale_all_checks(wiggly):
    X, y = wiggly
    params = {"ls": 0.35, "eta": 1.0, "sigma": 0.1}
    gp = GPRegression(X, y, approx="hsgp", approx_options={"m": 8, "c": 1.5})
    checks = _by_name(ac.for_regression(gp, _at(gp, params)))
    res = checks["HSGP resolution (ls vs basis)"]
    assert res.status == "fail" and checks["HSGP error vs exact GP"].status == "fail"
    m_new = int(re.search(r"'m': (\d+)", res.advice).group(1))
    c_new = float(re.search(r"'c': ([0-9.]+)", res.advice).group(1))
    gp2 = GPRegression(X, y, approx="hsgp", approx_options={"m": m_new, "c": c_new})
    checks2 = _by_name(ac.for_regression(gp2, _at(gp2, params)))
    assert checks2["HSGP resolution (ls vs basis)"].status == "ok"
    assert checks2["HSGP error vs exact GP"].status == "ok"


def test_hsgp_error_at_the_edge_all_checks():
    rng = np.random.default_rng(2)
    X = rng.uniform(0, 5, (150, 2))
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.1 * rng.normal(size=150)
    params = {"ls": 1.11, "eta": 1.05, "slope": [-0.054, 0.192], "intercept": -0.039}
    kw = dict(kernel="expquad", mean="linear", noise=0.1, approx="hsgp")
    gp = GPRegression(X, y, **kw, approx_options={"m": 12, "c": 1.5})
    err = _by_name(ac.for_regression(gp, _at(gp, params)))["HSGP error vs exact GP"]
    assert err.status == "fail" and err.value > 0.3 and "edge of the data" in err.advice
    gp2 = GPRegression(X, y, **kw, approx_options={"m": (16, 16), "c": (2.0, 2.0)})
    err2 = _by_name(ac.for_regression(gp2, _at(gp2, params)))["HSGP error vs exact GP"]
    assert err2.status == "ok" and err2.value < 0.01
