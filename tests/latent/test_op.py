"""Student-t feasibility, input validation and the :class:`LaplaceLogp` Op in PyMC models."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

from bayes_gp.latent import (
    Bernoulli,
    Binomial,
    Gaussian,
    LaplaceLogp,
    NegativeBinomial,
    Poisson,
    StudentT,
    laplace,
    laplace_logp,
)
from bayes_gp.predictive import factorize, log_marginal_likelihood


# ------------------------------------------------------------------ Student-t feasibility
def test_student_t_saddle_is_infeasible_with_reason():
    """Two coincident inputs with conflicting outliers (+10, -10) under a wide prior: the
    posterior is bimodal and the symmetric stationary point reached from f = 0 is a saddle
    (K^-1 + W has a negative eigenvalue along (1, 1)). It must give -inf with a reason."""
    K = 100.0 * np.array([[1.0, 1 - 1e-4], [1 - 1e-4, 1.0]])
    lik = StudentT(np.array([10.0, -10.0]))
    res = laplace(K, np.zeros(2), lik, [1.0, 0.1])
    assert not res.feasible
    assert res.log_evidence == -np.inf
    assert "not positive definite" in res.reason
    assert res.grad_K is None
    # an asymmetric start climbs to one of the two genuine modes, where log q is finite
    other = laplace(K, np.zeros(2), lik, [1.0, 0.1], f0=np.array([5.0, 5.0]))
    assert other.feasible and np.isfinite(other.log_evidence)
    assert np.all(other.f > 5.0)
    Ki = np.linalg.inv(K)
    psi = [lik.log_lik(r.f, [1.0, 0.1]) - 0.5 * r.f @ Ki @ r.f for r in (res, other)]
    assert psi[1] > psi[0]


def test_student_t_heavy_outlier_converges():
    """One gross outlier (+15) among smooth data: Newton (with the W+ safeguard where W < 0)
    converges to the mode, which ignores the outlier, and the evidence is finite."""
    rng = np.random.default_rng(4)
    X = np.linspace(0, 5, 30)
    y = np.sin(X) + 0.1 * rng.standard_normal(30)
    y[12] += 15.0
    K = np.exp(-0.5 * (X[:, None] - X[None, :]) ** 2) + 1e-6 * np.eye(30)
    lik = StudentT(y)
    res = laplace(K, np.zeros(30), lik, [3.0, 0.1])
    assert res.feasible and np.isfinite(res.log_evidence)
    assert np.any(-lik.derivatives(res.f, [3.0, 0.1])[2] < 0)  # W negative at the outlier
    assert abs(res.f[12] - np.sin(X[12])) < 0.3
    assert np.max(np.abs(res.f - np.sin(X))) < 0.3


def test_warm_start_does_not_change_the_answer():
    rng = np.random.default_rng(5)
    X = np.linspace(0, 5, 25)
    lik = Poisson(rng.poisson(3 * np.exp(np.sin(X))) * 1.0, exposure=3.0)
    K = np.exp(-0.5 * (X[:, None] - X[None, :]) ** 2) + 1e-6 * np.eye(25)
    m = np.zeros(25)
    cold = laplace(K, m, lik)
    warm = laplace(K, m, lik, f0=cold.f + 0.3 * rng.standard_normal(25))
    assert warm.log_evidence == pytest.approx(cold.log_evidence, abs=1e-12)
    np.testing.assert_allclose(warm.grad_K, cold.grad_K, atol=1e-10)


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    "make,match",
    [
        (lambda: Poisson(np.array([1.0, -1.0])), r"non-negative counts; y\[1\] = -1"),
        (lambda: Poisson(np.array([1.0, 2.5])), r"integer counts; y\[1\] = 2.5"),
        (lambda: Poisson(np.array([1.0, 2.0]), exposure=[1.0, 0.0]), r"exposure.*positive"),
        (lambda: Poisson(np.array([1.0, np.nan])), r"NaN or infinite"),
        (lambda: NegativeBinomial(np.array([1.0, np.inf])), r"NaN or infinite"),
        (lambda: NegativeBinomial(np.array([0.5])), r"integer counts"),
        (lambda: Binomial(np.array([3.0, 5.0]), trials=4), r"successes above trials.*y\[1\] = 5"),
        (lambda: Binomial(np.array([3.0])), r"needs `trials`"),
        (lambda: Binomial(np.array([3.0]), trials=[2.5]), r"`trials` must be integer"),
        (lambda: Bernoulli(np.array([0.0, 2.0])), r"0 or 1; y\[1\] = 2"),
        (lambda: Bernoulli(np.array([0.0, 1.0]), link="cloglog"), r"`link` must be"),
        (lambda: StudentT(np.array([0.0, np.nan])), r"NaN or infinite"),
        (lambda: Gaussian(np.array([])), r"empty"),
    ],
)
def test_invalid_data_raise(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_invalid_parameters_raise():
    with pytest.raises(ValueError, match="dispersion must be positive"):
        NegativeBinomial(np.array([1.0])).derivatives(np.zeros(1), [-1.0])
    with pytest.raises(ValueError, match=r"takes 2 parameter\(s\)"):
        StudentT(np.array([1.0])).derivatives(np.zeros(1), [1.0])
    with pytest.raises(ValueError, match="K must be"):
        laplace(np.eye(3), np.zeros(2), Poisson(np.array([1.0, 2.0])))


# ------------------------------------------------------------------ the Op
def _model(lik, X, phi_val, with_op=True):
    with pm.Model() as model:
        ls = pm.LogNormal("ls", 0.0, 0.5)
        c = pm.Normal("c", 0.0, 1.0)
        d2 = (X[:, None] - X[None, :]) ** 2
        K = pt.exp(-0.5 * d2 / ls**2) + 1e-6 * pt.eye(X.size)
        if with_op:
            lq = laplace_logp(lik, K, c * pt.ones(X.size), pt.as_tensor(phi_val))
            pm.Potential("lq", lq)
    return model


@pytest.mark.parametrize(
    "lik,phi",
    [
        (Poisson(np.array([0, 2, 3, 1, 5, 7, 4, 2, 1, 0.0])), []),
        (NegativeBinomial(np.array([0, 2, 3, 1, 5, 7, 4, 2, 1, 0.0])), [2.0]),
        (StudentT(np.array([0, 0.5, 0.9, 1.0, 4.0, 0.5, 0.1, -0.4, -0.9, -1.0])), [3.0, 0.3]),
    ],
)
@pytest.mark.parametrize("mode", ["FAST_COMPILE", "NUMBA"])
def test_op_in_pymc_model_matches_numpy_core(lik, phi, mode):
    """logp and dlogp of a pm.Model with the Op, compiled with the Python linker (the Op's
    ``perform``) and with numba, minus those of the same model without it, equal the NumPy core
    (chain rule through the log transform of ls by hand). (The first mode was ``FAST_RUN``,
    which is numba in PyTensor 3: the Op's own ``perform`` path went untested.)"""
    X = np.linspace(0, 4, 10)
    phi = np.asarray(phi, float)
    model, prior = _model(lik, X, phi), _model(lik, X, phi, with_op=False)
    point = {"ls_log__": np.log(1.3), "c": 0.2}
    lq = model.compile_logp(mode=mode)(point) - prior.compile_logp(mode=mode)(point)
    dlq = model.compile_dlogp(mode=mode)(point) - prior.compile_dlogp(mode=mode)(point)
    ls = np.exp(np.log(1.3))
    d2 = (X[:, None] - X[None, :]) ** 2
    K = np.exp(-0.5 * d2 / ls**2) + 1e-6 * np.eye(10)
    res = laplace(K, np.full(10, 0.2), lik, phi)
    assert lq == pytest.approx(res.log_evidence, abs=1e-10)
    g_log_ls = np.sum(res.grad_K * np.exp(-0.5 * d2 / ls**2) * d2 / ls**3) * ls
    np.testing.assert_allclose(dlq, [g_log_ls, res.grad_m.sum()], rtol=1e-8, atol=1e-9)


def test_op_infeasible_gives_minus_inf_and_reason():
    K = 100.0 * np.array([[1.0, 1 - 1e-4], [1 - 1e-4, 1.0]])
    op = LaplaceLogp(StudentT(np.array([10.0, -10.0])))
    fn = pytensor.function([], op(K, np.zeros(2), np.array([1.0, 0.1]))[0], mode="FAST_RUN")
    assert fn() == -np.inf
    assert "not positive definite" in op.last_reason


def test_op_warm_start_cache_and_pickle():
    """The cache holds the last mode; reusing it gives the cold-start answer to 1e-12, and a
    pickled Op (PyMC's multiprocess sampling) evaluates the same."""
    import pickle

    X = np.linspace(0, 4, 12)
    lik = Poisson(np.array([0, 2, 3, 1, 5, 7, 4, 2, 1, 0, 3, 2.0]))
    ls = pt.dscalar("ls")
    K = pt.exp(-0.5 * (X[:, None] - X[None, :]) ** 2 / ls**2) + 1e-6 * pt.eye(12)
    op = LaplaceLogp(lik, native=False)  # (the native solver, numba's, has no warm start)
    out = op(K, pt.zeros(12), pt.zeros(0))[0]
    fn = pytensor.function([ls], out, mode="FAST_RUN")
    assert op.last_mode is None
    first = float(fn(1.0))
    assert op.last_mode is not None
    fn(1.7)  # moves the cache
    assert float(fn(1.0)) == pytest.approx(first, abs=1e-12)
    fn2 = pickle.loads(pickle.dumps(fn))
    assert float(fn2(1.0)) == pytest.approx(first, abs=1e-12)


def test_op_jax_refuses_naming_alternatives():
    from bayes_gp.op_backends import ensure

    ensure("jax")
    lik = Poisson(np.array([1.0, 2.0]))
    K = pt.dmatrix("K")
    out = laplace_logp(lik, K, pt.zeros(2))
    with pytest.raises(NotImplementedError, match=r'sampler="nutpie".*sampler="pymc"'):
        pytensor.function([K], out, mode="JAX")


@pytest.mark.parametrize("sampler", ["pymc", "nutpie"])
def test_nuts_with_laplace_gaussian_matches_exact_posterior(sampler):
    """NUTS (PyMC's, and nutpie through the numba registration; 1 chain, 100 + 100) over ls
    with the Laplace Op and a Gaussian likelihood: the posterior mean of ls equals the
    exact-likelihood posterior mean (GPRegression's R&W eq. 2.30 marginal likelihood, integrated
    on a grid) within 4 Monte Carlo standard errors."""
    import arviz as az

    rng = np.random.default_rng(11)
    X = np.sort(rng.uniform(0, 5, 20))
    y = np.sin(1.5 * X) + 0.3 * rng.standard_normal(20)
    sigma = 0.3
    with pm.Model():
        ls = pm.LogNormal("ls", 0.0, 0.5)
        K = pt.exp(-0.5 * (X[:, None] - X[None, :]) ** 2 / ls**2) + 1e-6 * pt.eye(20)
        pm.Potential("lq", laplace_logp(Gaussian(y), K, pt.zeros(20), pt.as_tensor([sigma])))
        idata = pm.sample(100, tune=100, chains=1, random_seed=3, progressbar=False,
                          nuts_sampler=sampler, compute_convergence_checks=False)  # fmt: skip
    draws = idata.posterior["ls"].values.ravel()
    # exact reference: p(log ls | y) on a grid
    u = np.linspace(np.log(0.2), np.log(5.0), 2001)
    lp = np.empty(u.size)
    for i, ui in enumerate(u):
        K = np.exp(-0.5 * (X[:, None] - X[None, :]) ** 2 / np.exp(ui) ** 2) + 1e-6 * np.eye(20)
        fac = factorize(K + sigma**2 * np.eye(20), y)
        lp[i] = log_marginal_likelihood(fac) - 0.5 * (ui / 0.5) ** 2
    w = np.exp(lp - lp.max())
    w /= w.sum()
    mean = float(np.sum(w * np.exp(u)))
    sd = float(np.sqrt(np.sum(w * (np.exp(u) - mean) ** 2)))
    ess = float(az.ess(idata, var_names=["ls"])["ls"])
    assert abs(draws.mean() - mean) < 4 * sd / np.sqrt(max(ess, 10.0)), (draws.mean(), mean, ess)


# ------------------------------------------- exceptions in the numba backend's callback
def test_numba_callback_exception_is_kept_and_raised_in_nopython_code():
    """An exception in the object-mode callback does not leave it (numba's try/except cannot
    catch one that does; ``bayes_gp.latent.op`` module docstring): the Op keeps it as
    ``last_error`` with its message in ``last_reason``, the compiled function raises a
    ``RuntimeError`` naming them, and the next evaluation works again."""
    lik = Poisson(np.array([0, 2, 3, 1, 5.0]))
    X = np.linspace(0, 4, 5)
    K = np.exp(-0.5 * (X[:, None] - X[None, :]) ** 2) + 1e-6 * np.eye(5)
    Kv = pt.dmatrix("K")
    op = LaplaceLogp(lik, native=False)  # the object-mode path (Poisson has a native solver)
    fn = pytensor.function([Kv], op(Kv, pt.zeros(5), pt.zeros(0))[0], mode="NUMBA")
    expected = laplace(K, np.zeros(5), lik, np.zeros(0)).log_evidence
    compute = op.compute

    def failing(K, m, phi):
        raise ValueError("a numerical failure inside the Laplace step")

    op.compute = failing
    with pytest.raises(RuntimeError, match=r"object-mode callback.*last_error"):
        fn(K)
    assert isinstance(op.last_error, ValueError)
    assert op.last_reason == "ValueError: a numerical failure inside the Laplace step"
    op.compute = compute
    assert float(fn(K)) == pytest.approx(expected, abs=1e-10)


_NUTPIE_CALLBACK_RAISES = """
import warnings
import numpy as np
import bayes_gp

X = np.linspace(0.0, 5.0, 8)
gp = bayes_gp.LatentGP(X, np.array([0, 1, 3, 2, 5, 4, 1, 0]), likelihood="poisson")
op, compute, calls = gp._op, gp._op.compute, [0]
op.native = False  # the object-mode path (the Poisson's native solver calls no Python)


def failing(K, m, phi):  # fine for the first 40 evaluations (initial point, first steps)
    calls[0] += 1
    if calls[0] > 40:
        raise ValueError("a numerical failure inside the Laplace step")
    return compute(K, m, phi)


op.compute = failing
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    idata = gp.sample(draws=10, tune=10, chains=1, sampler="nutpie", random_seed=1)
print("divergent", int(idata["sample_stats"]["diverging"].sum()))
print("warned", [str(w.message) for w in caught if "LaplaceLogp" in str(w.message)])
try:  # every evaluation raises: nutpie finds no initial point
    gp.sample(draws=10, tune=10, chains=1, sampler="nutpie", random_seed=1)
except RuntimeError as exc:
    print("raised", exc, "| cause", repr(exc.__cause__))
"""


def test_nutpie_survives_exception_in_laplace_callback():
    """Regression (the nutpie segfault of the issue-39 SBC runs): an exception in the Laplace
    step during nutpie's sampling segfaulted the process (a null read in a ``nutpie-worker``
    thread, in bayes_gp's C entry point). Run in a subprocess so that a crash fails this test:
    raised after the first steps, the points count as divergent transitions and a
    ``RuntimeWarning`` names the exception; raised at the initial point, nutpie stops and
    ``sample`` raises a ``RuntimeError`` caused by it."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", _NUTPIE_CALLBACK_RAISES],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, f"exit status {proc.returncode}\n{proc.stderr[-3000:]}"
    lines = {ln.split(" ", 1)[0]: ln for ln in proc.stdout.splitlines()}
    assert int(lines["divergent"].split()[1]) > 0
    assert "LaplaceLogp(Poisson) raised ValueError: a numerical failure" in lines["warned"]
    assert "counted the points where it raised as divergent" in lines["warned"]
    assert "nutpie stopped (All initialization points failed)" in lines["raised"]
    assert "ValueError('a numerical failure inside the Laplace step')" in lines["raised"]


def test_parameter_rounded_onto_its_boundary_is_infeasible():
    """Zero inflation pi = expit(x) is 1.0 in floating point for x > 37 (NUTS reached it in
    simulation 85 of the zip_laplace SBC run): the likelihood's ValueError makes the point
    infeasible (log q = -inf, its message the reason) through the Op, in the numba backend
    as in ``compute``, instead of an exception during sampling."""
    from bayes_gp.latent import ZeroInflatedPoisson

    lik = ZeroInflatedPoisson(np.array([0, 2, 3, 0, 5.0]))
    X = np.linspace(0, 4, 5)
    K = np.exp(-0.5 * (X[:, None] - X[None, :]) ** 2) + 1e-6 * np.eye(5)
    x = pt.dscalar("x")
    op = LaplaceLogp(lik)
    fn = pytensor.function([x], op(K, pt.zeros(5), pt.sigmoid(x)[None])[0], mode="NUMBA")
    assert fn(38.0) == -np.inf
    assert op.last_reason == "ValueError: zero_inflation must be in (0, 1), got 1.0"
    assert op.last_error is None  # not an exception of the callback: an infeasible point
    finite = fn(1.0)
    assert np.isfinite(finite) and op.last_reason == ""
