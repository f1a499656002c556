"""The native Laplace solver (:mod:`bayes_gp.latent.native`) against the NumPy one, and the
``LaplaceLogp`` Op on it: the same log evidence and gradients, the same infeasible points, no
GIL held, no crash under nutpie."""

from __future__ import annotations

import importlib

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from bayes_gp.latent import (
    Bernoulli,
    Binomial,
    LaplaceLogp,
    NegativeBinomial,
    Poisson,
    VariationalBound,
    laplace,
    native,
)
from bayes_gp.latent.predictive import la_loo, la_loo_terms
from bayes_gp.linalg import EAGER_MODE

laplace_module = importlib.import_module("bayes_gp.latent.laplace")  # (`laplace` is a function)

N = 40
_rng = np.random.default_rng(7)
X = np.sort(_rng.uniform(0.0, 6.0, N))
LIKELIHOODS = {
    "bernoulli": Bernoulli((_rng.uniform(size=N) < 0.5 + 0.4 * np.sin(X)).astype(float)),
    "poisson": Poisson(
        _rng.poisson(4.0 * np.exp(np.sin(X))).astype(float), exposure=_rng.uniform(0.5, 2.0, N)
    ),
    "binomial": Binomial(_rng.binomial(12, 0.3, N).astype(float), trials=np.full(N, 12.0)),
}
#: (lengthscale, amplitude, prior mean): a typical point, short and long length-scales (the
#: last with K near singular: jitter 1e-6 on an amplitude of 3) and a mean far from the data
POINTS = [(1.0, 1.0, 0.0), (0.2, 2.0, 0.5), (5.0, 3.0, -0.3), (1.5, 0.5, -3.0)]


def _K(ls: float, amp: float) -> np.ndarray:
    return amp**2 * np.exp(-0.5 * (X[:, None] - X[None, :]) ** 2 / ls**2) + 1e-6 * np.eye(N)


def test_constants_are_those_of_the_numpy_solver():
    assert native._W_DIRECT == laplace_module._W_DIRECT
    assert native._EPS == laplace_module._EPS


@pytest.mark.parametrize("name", list(LIKELIHOODS))
def test_log_evidence_and_gradients_equal_the_numpy_solver(name):
    """log q, dlogq/dK and dlogq/dm to 1e-10 relative (measured: 1e-15 and 1e-12) at four
    points, from the NumPy solver started cold as the native one is."""
    lik = LIKELIHOODS[name]
    for ls, amp, mean in POINTS:
        K, m = _K(ls, amp), np.full(N, mean)
        ref = laplace(K, m, lik, ())
        status, logq, gK, gm = native.solve_arrays(K, m, lik)
        assert status == native.OK and ref.feasible
        assert logq == pytest.approx(ref.log_evidence, rel=1e-10, abs=0.0)
        assert np.max(np.abs(gK - ref.grad_K)) <= 1e-10 * np.max(np.abs(ref.grad_K))
        assert np.max(np.abs(gm - ref.grad_m)) <= 1e-10 * np.max(np.abs(ref.grad_m))
        np.testing.assert_array_equal(gK, gK.T)


@pytest.mark.parametrize("name", list(LIKELIHOODS))
def test_mode_and_posterior_variances_equal_the_numpy_solver(name):
    """laplace_mode (the pointwise pass over NUTS draws): the mode, diag(Sigma), log q and the
    number of Newton steps equal the NumPy solver's, started cold and warm-started from the
    mode at another point as that solver is (the same f0), mode and diag(Sigma) to 1e-10
    (measured: 1e-14); the LA-LOO terms from them are la_loo's."""
    lik = LIKELIHOODS[name]
    f0 = laplace(_K(*POINTS[0][:2]), np.full(N, POINTS[0][2]), lik, ()).f
    for ls, amp, mean in POINTS[1:]:
        K, m = _K(ls, amp), np.full(N, mean)
        for start in (None, f0):
            ref = laplace(K, m, lik, (), f0=start)
            res = native.laplace_mode(K, m, lik, f0=start)
            assert res.status == native.OK and res.n_iter == ref.n_iter
            assert res.log_q == pytest.approx(ref.log_evidence, rel=1e-10, abs=0.0)
            scale = np.max(np.abs(ref.f))
            assert np.max(np.abs(res.f - ref.f)) <= 1e-10 * scale
            dS = ref.cov_diag()
            assert np.max(np.abs(res.cov_diag - dS)) <= 1e-10 * np.max(dS)
            ll = la_loo_terms(lik, (), res.f, res.cov_diag)
            np.testing.assert_allclose(ll, la_loo(ref, lik, ()), rtol=1e-10, atol=0.0)
    warm = native.laplace_mode(K, m, lik, f0=np.full(N, np.nan))  # not finite: a cold start
    assert warm.n_iter == native.laplace_mode(K, m, lik).n_iter
    infeasible = native.laplace_mode(K, m, lik, max_iter=1)
    assert (infeasible.status, infeasible.f, infeasible.cov_diag) == (
        native.NOT_CONVERGED, None, None
    )
    with pytest.raises(ValueError, match="f0 must be"):
        native.laplace_mode(K, m, lik, f0=np.zeros(N + 1))


def test_zero_curvature_uses_the_direct_posterior_variance():
    """Binomial observations with zero trials give W = 0 there: diag(Sigma) from
    K_ii - k_i^T R k_i (the NumPy solver's branch below _W_DIRECT), not by dividing by W."""
    trials = np.where(np.arange(N) % 5 == 0, 0.0, 8.0)
    lik = Binomial(np.minimum(_rng.binomial(8, 0.4, N), trials).astype(float), trials=trials)
    K, m = _K(1.0, 1.5), np.zeros(N)
    ref = laplace(K, m, lik, ())
    status, logq, gK, gm = native.solve_arrays(K, m, lik)
    assert status == native.OK
    assert logq == pytest.approx(ref.log_evidence, rel=1e-10, abs=0.0)
    assert np.max(np.abs(gK - ref.grad_K)) <= 1e-10 * np.max(np.abs(ref.grad_K))
    assert np.max(np.abs(gm - ref.grad_m)) <= 1e-10 * np.max(np.abs(ref.grad_m))


def test_infeasible_points_are_infeasible_in_both():
    """K not positive definite, a Poisson mean that overflows (W = inf), too few Newton steps,
    NaN in K or in m: -inf from both solvers, with the native status saying which."""
    pois = LIKELIHOODS["poisson"]
    K = _K(1.0, 1.0)
    not_pd = K - 0.5 * np.eye(N)
    cases = [
        (not_pd, np.zeros(N), {}, native.K_NOT_PD),
        (K, np.full(N, 800.0), {}, native.B_NOT_PD),
        (K, np.zeros(N), {"max_iter": 1}, native.NOT_CONVERGED),
        (np.where(np.eye(N) > 0, np.nan, K), np.zeros(N), {}, native.K_NOT_PD),
        (K, np.full(N, np.nan), {}, native.B_NOT_PD),
    ]
    for K_, m, kw, expected in cases:
        with np.errstate(over="ignore", invalid="ignore"):  # the NumPy solver's overflow
            ref = laplace(K_, m, pois, (), **kw)
        status, logq, _, _ = native.solve_arrays(K_, m, pois, **kw)
        assert (status, logq) == (expected, -np.inf)
        assert not ref.feasible and ref.log_evidence == -np.inf
    with pytest.raises(ValueError, match="does not cover NegativeBinomial"):
        native.solve_arrays(K, np.zeros(N), NegativeBinomial(pois.y))
    with pytest.raises(ValueError, match="K must be"):
        native.solve_arrays(K[:-1, :-1], np.zeros(N), pois)


def test_only_plain_laplace_ops_with_covered_likelihoods_release_the_gil():
    pois = LIKELIHOODS["poisson"]
    assert not LaplaceLogp(pois).holds_gil and LaplaceLogp(pois).uses_native
    assert LaplaceLogp(pois, native=False).holds_gil
    assert LaplaceLogp(NegativeBinomial(pois.y)).holds_gil
    assert LaplaceLogp(Bernoulli(LIKELIHOODS["bernoulli"].y, link="probit")).holds_gil
    assert VariationalBound(LIKELIHOODS["bernoulli"]).holds_gil  # a subclass: NumPy solver
    assert native.likelihood_code(pois)[0] == native.POISSON


def test_cache_key_holds_the_solver_source_and_the_data():
    """The PyTensor cache key: the solver's key (this module's source hash) and the data's
    hash, so equal data share a compiled function and other data do not."""
    pois = LIKELIHOODS["poisson"]
    _, key = native.numba_function(LaplaceLogp(pois))
    _, same = native.numba_function(LaplaceLogp(Poisson(pois.y, exposure=pois.exposure)))
    _, other = native.numba_function(LaplaceLogp(Poisson(pois.y + 1.0)))
    assert key.startswith(native.SOLVER_KEY) and key == same != other
    assert native.numba_function(LaplaceLogp(NegativeBinomial(pois.y))) is None


def test_no_cache_key_when_the_disk_cache_is_off(monkeypatch):
    """``BAYES_GP_NUMBA_CACHE=0`` (bayes_gp.op_backends.numba_cache_key) leaves the Op out of
    PyTensor's disk cache."""
    monkeypatch.setenv("BAYES_GP_NUMBA_CACHE", "0")
    fn, key = native.numba_function(LaplaceLogp(LIKELIHOODS["poisson"]))
    assert key is None and fn is not None


@pytest.mark.parametrize("start", [None, "mode"])
def test_op_in_numba_equals_the_op_in_python(start):
    """The compiled log density (numba: the native solver) and its gradient with respect to
    the length-scale, amplitude and mean (PyTensor's chain rule around the Op) equal the
    Python backend's (the NumPy solver) to 1e-10 relative, Newton's method started from f = m
    or from the Op's fixed ``start`` (a mode at other hyperparameters, as LatentGP.sample sets
    it); a point where K is not positive definite gives -inf in both, and a K of the wrong
    size a ValueError."""
    lik = LIKELIHOODS["bernoulli"]
    theta = pt.dvector("theta")  # (lengthscale, amplitude, mean, diagonal shift)
    Kt = theta[1] ** 2 * pt.exp(-0.5 * (X[:, None] - X[None, :]) ** 2 / theta[0] ** 2)
    Kt = Kt + theta[3] * pt.eye(N)
    op = LaplaceLogp(lik)
    if start is not None:
        op.start = laplace(_K(2.0, 1.5), np.full(N, 0.2), lik, ()).f
        assert native.numba_function(op)[1] != native.numba_function(LaplaceLogp(lik))[1]
    logq = op(Kt, theta[2] * pt.ones(N), pt.zeros(0))[0]
    outs = [logq, pytensor.grad(logq, theta)]
    fast = pytensor.function([theta], outs, mode="NUMBA")
    slow = pytensor.function([theta], outs, mode=EAGER_MODE)
    for point in ([1.0, 1.0, 0.0, 1e-6], [0.3, 2.0, -0.5, 1e-6], [3.0, 0.7, 0.4, 1e-4]):
        a, ga = fast(np.array(point))
        assert op.last_mode is None  # (numba: the native solver, which keeps no mode)
        b, gb = slow(np.array(point))
        assert op.last_mode is not None  # (Python: the NumPy solver, warm-started from here)
        op.last_mode = None
        assert float(a) == pytest.approx(float(b), rel=1e-10)
        np.testing.assert_allclose(ga, gb, rtol=1e-10, atol=1e-10 * np.max(np.abs(gb)))
    bad = np.array([1.0, 1.0, 0.0, -0.5])
    assert float(fast(bad)[0]) == float(slow(bad)[0]) == -np.inf
    Kv = pt.dmatrix("K")
    wrong = pytensor.function([Kv], op(Kv, pt.zeros(N), pt.zeros(0))[0], mode="NUMBA")
    with pytest.raises(ValueError, match="K must be"):
        wrong(np.eye(N + 1))


_NUTPIE_INFEASIBLE = """
import numpy as np
import pymc as pm
import pytensor.tensor as pt
from bayes_gp.latent import LaplaceLogp, Poisson

X = np.linspace(0.0, 5.0, 10)
y = np.array([0, 1, 3, 2, 5, 4, 1, 0, 2, 3.0])
K0 = np.exp(-0.5 * (X[:, None] - X[None, :]) ** 2)
op = LaplaceLogp(Poisson(y))
assert not op.holds_gil
with pm.Model():
    x = pm.Normal("x", 0.0, 2.0)
    # K is not positive definite for x < -1 (shift below -1 + its smallest eigenvalue)
    K = pt.as_tensor(K0) + 0.5 * (x + 1.0) * pt.eye(10)
    pm.Potential("lq", op(K, pt.zeros(10), pt.zeros(0))[0])
    idata = pm.sample(draws=100, tune=100, chains=2, cores=2, nuts_sampler="nutpie",
                      random_seed=3, progressbar=False)
print("min", float(idata.posterior["x"].min()))
print("divergent", int(idata.sample_stats["diverging"].sum()))
"""


def test_nutpie_runs_through_infeasible_points_in_parallel_chains():
    """nutpie with two chains in parallel threads over a region where the native solver
    returns -inf (K not positive definite): the run ends normally (a subprocess, so that a
    crash fails the test), the draws stay in the feasible region and the steps into the
    infeasible one count as divergent transitions."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", _NUTPIE_INFEASIBLE],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, f"exit status {proc.returncode}\n{proc.stderr[-3000:]}"
    lines = {ln.split(" ", 1)[0]: ln.split(" ", 1)[1] for ln in proc.stdout.splitlines()}
    assert float(lines["min"]) > -1.0 - 1e-6
    assert int(lines["divergent"]) > 0
