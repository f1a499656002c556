"""Long versions of tests/solvers/test_approx_checks.py (issue 35: CI keeps a short version
of each; these run later, with ``./run validate`` or ``python -m pytest validation/tests``).

* VFE: the advice of the fit-vs-exact check, followed, gives a fit the check passes (a third
  type-II fit of 200 points; the CI test stops at the advice's number).
* HSGP: the edge and advice cases through the full :func:`for_regression` (the CI tests call the
  resolution, boundary and error checks alone, skipping the fit-vs-exact check's L-BFGS).
"""

from __future__ import annotations

import re

import pytest
from threadpoolctl import threadpool_limits

from bayes_gp import GPRegression
from bayes_gp.solvers import approx_checks as ac
from tests.solvers.test_approx_checks import _at, _by_name, _fit, edge_case


@pytest.fixture(scope="module", autouse=True)
def _one_blas_thread():
    with threadpool_limits(limits=1, user_api="blas"):
        yield


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
    X, y, params, kw = edge_case()
    gp = GPRegression(X, y, **kw, approx_options={"m": 12, "c": 1.5})
    err = _by_name(ac.for_regression(gp, _at(gp, params)))["HSGP error vs exact GP"]
    assert err.status == "fail" and err.value > 0.3 and "edge of the data" in err.advice
    gp2 = GPRegression(X, y, **kw, approx_options={"m": (16, 16), "c": (2.0, 2.0)})
    err2 = _by_name(ac.for_regression(gp2, _at(gp2, params)))["HSGP error vs exact GP"]
    assert err2.status == "ok" and err2.value < 0.01
