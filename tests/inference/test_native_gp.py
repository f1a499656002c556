"""The exact GP's log density in C (bayes_gp.inference.native_gp): against a NumPy / SciPy
transcription of R&W eq. 2.30 with the priors and the log transform, against the PyMC model's
own log density, its leave-one-out terms against the per-draw pass, its NUTS posterior against
quadrature, and what happens where it does not apply."""

from __future__ import annotations

import ctypes

import numpy as np
import pymc as pm
import pytest
from scipy import stats

from bayes_gp import GPRegression
from bayes_gp.inference import native_gp
from bayes_gp.linalg import EAGER_MODE

pytestmark = pytest.mark.skipif(
    native_gp.library() is None, reason=f"no C library: {native_gp.failure()}"
)

F = np.float64


def _kernel(name: str, r2: np.ndarray) -> np.ndarray:
    """k(r^2) of R&W eqs. 4.9, 4.16, 4.17 (unit amplitude)."""
    r = np.sqrt(r2)
    if name == "expquad":
        return np.exp(-0.5 * r2)
    if name == "matern52":
        s = np.sqrt(5.0) * r
        return (1 + s + s**2 / 3) * np.exp(-s)
    if name == "matern32":
        s = np.sqrt(3.0) * r
        return (1 + s) * np.exp(-s)
    return np.exp(-r)


def _prior_logpdf(rv, value: np.ndarray) -> float:
    """The prior's log density by SciPy, for the distributions the C code knows."""
    name = rv.owner.op.name
    p = [np.asarray(i.data if hasattr(i, "data") else i.eval()) for i in
         rv.owner.op.dist_params(rv.owner)]  # fmt: skip
    if name == "lognormal":
        return stats.lognorm.logpdf(value, s=p[1], scale=np.exp(p[0])).sum()
    if name == "halfnormal":
        return stats.halfnorm.logpdf(value, loc=p[0], scale=p[1]).sum()
    if name == "gamma":
        return stats.gamma.logpdf(value, a=p[0], scale=p[1]).sum()
    if name == "invgamma":
        return stats.invgamma.logpdf(value, a=p[0], scale=p[1]).sum()
    if name == "exponential":
        return stats.expon.logpdf(value, scale=p[0]).sum()
    if name == "halfcauchy":
        return stats.halfcauchy.logpdf(value, scale=p[-1]).sum()  # (loc, scale) or (scale,)
    raise AssertionError(name)


def _reference(gp: GPRegression, x: np.ndarray, layout) -> float:
    """log p(y | theta) + log p(theta) + log-Jacobian at the unconstrained point x (NumPy)."""
    model = gp.model
    names, slices, _ = layout.shape_info
    values, total = {}, 0.0
    for rv in model.free_RVs:
        u = x[slices[names.index(model.rvs_to_values[rv].name)]]
        values[rv.name] = np.exp(u)
        total += _prior_logpdf(rv, np.exp(u)) + u.sum()
    ls = values["ls"]
    eta = values.get("eta", gp.priors.get("eta"))
    sigma = values.get("sigma", gp.noise)
    X = gp.X / ls
    r2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    C = eta**2 * _kernel(gp.spec.name, r2) + (sigma**2 + gp.jitter_tensor.get_value()) * np.eye(
        len(X)
    )
    y = native_gp.describe(model).y
    return total + stats.multivariate_normal(np.zeros(len(y)), C).logpdf(y)


def _call(cm, x: np.ndarray) -> tuple[int, float, np.ndarray]:
    fn = cm.native_library.gp_logp
    fn.restype = ctypes.c_int64
    fn.argtypes = [ctypes.c_uint64] + [ctypes.c_void_p] * 4
    x = np.ascontiguousarray(x, dtype=float)
    grad, logp = np.zeros_like(x), np.zeros(1)
    rc = fn(len(x), x.ctypes.data, grad.ctypes.data, logp.ctypes.data, cm.user_data.ctypes.data)
    return rc, float(logp[0]), grad


def _data(n=25, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 5, (n, d))
    return X, np.sin(X[:, 0]) + 0.1 * X[:, -1] + 0.2 * rng.standard_normal(n)


CASES = [
    ("expquad", False, {}),
    ("expquad", True, {"eta": pm.Gamma.dist(F(2.0), F(1.5)),
                       "sigma": pm.InverseGamma.dist(F(3.0), F(0.5))}),
    ("matern52", False, {"eta": pm.HalfCauchy.dist(F(1.0)), "sigma": pm.Exponential.dist(F(2.0))}),
    ("matern52", True, {"ls": pm.LogNormal.dist(F(0.3), F(0.7), shape=2)}),
    ("matern32", False, {"ls": pm.InverseGamma.dist(F(4.0), F(3.0))}),
    ("matern32", True, {}),
    ("matern12", False, {"ls": pm.Gamma.dist(F(3.0), F(2.0))}),
    ("exponential", True, {"sigma": pm.HalfNormal.dist(F(0.3))}),
]  # fmt: skip


@pytest.mark.parametrize(("kernel", "ard", "priors"), CASES)
def test_logp_and_gradient_match_the_equations(kernel, ard, priors):
    """R&W eq. 2.30 with the priors (SciPy) and the log-Jacobian: the value to 1e-12
    relative, the gradient against central differences of that reference."""
    X, y = _data()
    gp = GPRegression(X, y, kernel, ard=ard, priors=priors)
    cm, reason = native_gp.compile_native(gp.model)
    assert cm is not None, reason
    layout = native_gp.plan(gp.model)[0][1]
    for seed in range(3):
        x = cm.initial_point_func(seed)
        rc, lp, grad = _call(cm, x)
        assert rc == 0
        ref = _reference(gp, x, layout)
        np.testing.assert_allclose(lp, ref, rtol=1e-12, atol=1e-10)
        h = 1e-6
        fd = [(_reference(gp, x + h * e, layout) - _reference(gp, x - h * e, layout)) / (2 * h)
              for e in np.eye(len(x))]  # fmt: skip
        np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-6)


def test_logp_and_gradient_match_the_pymc_model():
    """The same as PyMC's log density and gradient of the declared model (Python linker)."""
    X, y = _data(d=1)
    for gp in (GPRegression(X, y, "expquad", mean="zero"),
               GPRegression(X, y, "matern52", ard=True, noise=0.3)):  # fmt: skip
        _pymc_agrees(gp, rtol=1e-12, grad_rtol=1e-10)


def _pymc_agrees(gp, rtol=1e-11, grad_rtol=1e-9):
    """The C log density and gradient equal PyMC's (Python linker) at three jittered initial
    points."""
    model = gp.model
    cm, reason = native_gp.compile_native(model)
    assert cm is not None, reason
    logp = model.compile_logp(mode=EAGER_MODE)
    dlogp = model.compile_dlogp(mode=EAGER_MODE)
    names, slices, shapes = cm.shape_info
    for seed in range(3):
        x = cm.initial_point_func(seed)
        point = {nm: x[sl].reshape(sh) for nm, sl, sh in
                 list(zip(names, slices, shapes, strict=True))[: len(model.free_RVs)]}  # fmt: skip
        rc, lp, grad = _call(cm, x)
        assert rc == 0
        np.testing.assert_allclose(lp, logp(point), rtol=rtol)
        ref = dlogp(point)
        np.testing.assert_allclose(grad, ref, rtol=grad_rtol, atol=1e-11 * np.abs(ref).max())
    return cm


COMPOSITES = [
    ("expquad + expquad * periodic + ratquad + matern32", 1, False, {}),
    ("matern52 * periodic + ratquad", 2, True, {"periodic_period": 1.7, "ratquad_alpha": 2.5}),
    ("periodic + matern12 * ratquad * expquad", 1, False,
     {"periodic_eta": 0.8, "ratquad_alpha": pm.Gamma.dist(F(2.0), F(1.0))}),
    ("ratquad", 2, True, {"alpha": pm.InverseGamma.dist(F(3.0), F(2.0))}),
]  # fmt: skip


def test_a_grid_with_gaps_matches_the_pymc_model():
    """On a monthly grid with gaps both PyMC's graph and the C code evaluate the kernel at the
    lags (bayes_gp.kernels.lags); a Matérn factor, a fixed period and one observation twice
    (a lag of 0 off the diagonal) included."""
    X = _months(40, 1)
    X = np.vstack([X, X[7:8]])
    y = np.cos(2 * np.pi * X[:, 0]) + 0.1 * np.random.default_rng(2).standard_normal(41)
    gp = GPRegression(X, y, "matern32 * periodic + ratquad", priors={"periodic_period": 1.0})
    cm = _pymc_agrees(gp)
    assert "lags_gp" in cm.native_arrays


@pytest.mark.parametrize(("kernel", "d", "ard", "priors"), COMPOSITES)
def test_sums_and_products_match_the_pymc_model(kernel, d, ard, priors):
    """Sums of products of catalogue kernels, with the periodic and rational quadratic
    factors, ARD, and hyperparameters fixed by numbers: PyMC's log density to 1e-11 and its
    gradient to 1e-9 relative."""
    X, y = _data(d=d)
    gp = GPRegression(X, y, kernel, ard=ard, priors=priors)
    cm = _pymc_agrees(gp)
    assert cm.n_dim == len(gp.model.free_RVs) + (d - 1) * sum(
        rv.name.split("_")[-1] == "ls" for rv in gp.model.free_RVs
    )


def _periodic_ratquad(X, v):
    """eta_1^2 periodic(ls_1, p) ratquad(ls_2, alpha) + eta_3^2 expquad(ls_3) at the values v
    (R&W eqs. 4.31, 4.19, 4.9; one input)."""
    r = X[:, None, 0] - X[None, :, 0]
    per = np.exp(-2.0 * np.sin(np.pi * r / v["periodic_period"]) ** 2 / v["periodic_ls"] ** 2)
    a = v["ratquad_alpha"]
    rq = (1.0 + r**2 / (2.0 * a * v["ratquad_ls"] ** 2)) ** -a
    se = np.exp(-0.5 * r**2 / v["expquad_ls"] ** 2)
    return v["periodic_eta"] ** 2 * per * rq + v["expquad_eta"] ** 2 * se


def _months(n: int, seed: int) -> np.ndarray:
    """Mid-month decimal years from 1990 with a few months missing: a grid with gaps."""
    rng = np.random.default_rng(seed)
    k = np.sort(rng.choice(int(1.25 * n), n, replace=False))
    return (1990.0 + (k + 0.5) / 12.0)[:, None]


@pytest.mark.parametrize("grid", [False, True])
def test_periodic_and_ratquad_match_the_equations(grid):
    """R&W eqs. 4.31 and 4.19 transcribed in NumPy on all pairs, with the priors and
    log-Jacobians (SciPy): the value to 1e-12 relative, the gradient against central
    differences, at inputs far from 0 (decimal years), where the periodic factor's angles are
    large; scattered, or on a monthly grid with gaps, where the C code evaluates the kernel at
    the grid's lags only (a lag table, as bayes_gp.kernels.lags) and gathers C from it."""
    rng = np.random.default_rng(3)
    X = _months(30, 4) if grid else np.sort(rng.uniform(1990.0, 1996.0, 30))[:, None]
    y = np.sin(2 * np.pi * X[:, 0]) + 0.3 * rng.standard_normal(30)
    gp = GPRegression(X, y, "periodic * ratquad + expquad", mean="zero")
    cm, reason = native_gp.compile_native(gp.model)
    assert cm is not None, reason
    assert ("lags_gp" in cm.native_arrays) == grid
    names, slices, _ = cm.shape_info
    model = gp.model

    def reference(x):
        v, total = {}, 0.0
        for rv in model.free_RVs:
            u = x[slices[names.index(model.rvs_to_values[rv].name)]]
            v[rv.name] = np.exp(u).item()
            total += _prior_logpdf(rv, np.exp(u)) + u.sum()
        C = _periodic_ratquad(X, v) + (v["sigma"] ** 2 + gp.jitter_tensor.get_value()) * np.eye(30)
        return total + stats.multivariate_normal(np.zeros(30), C).logpdf(y)

    for seed in range(3):
        x = cm.initial_point_func(seed)
        rc, lp, grad = _call(cm, x)
        assert rc == 0
        np.testing.assert_allclose(lp, reference(x), rtol=1e-12)
        h = 1e-6
        fd = [(reference(x + h * e) - reference(x - h * e)) / (2 * h) for e in np.eye(len(x))]
        np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-6)


def test_expand_and_layout():
    """nutpie's stored variables: the log-scale coordinates, then the values themselves."""
    X, y = _data()
    gp = GPRegression(X, y, "expquad", ard=True)
    cm, _ = native_gp.compile_native(gp.model)
    names, _, shapes = cm.shape_info
    assert names == ["ls_log__", "eta_log__", "sigma_log__", "ls", "eta", "sigma"]
    assert shapes == [(2,), (), (), (2,), (), ()]
    fn = cm.native_library.gp_expand
    fn.restype = ctypes.c_int64
    fn.argtypes = [ctypes.c_uint64, ctypes.c_uint64] + [ctypes.c_void_p] * 3
    x = np.array([0.1, -0.2, 0.3, -1.0])
    out = np.zeros(8)
    assert fn(4, 8, x.ctypes.data, out.ctypes.data, cm.user_data.ctypes.data) == 0
    np.testing.assert_allclose(out, np.r_[x, np.exp(x)], rtol=1e-15)
    assert fn(3, 8, x.ctypes.data, out.ctypes.data, cm.user_data.ctypes.data) == -1


def test_leave_one_out_matches_the_per_draw_pass():
    """gp_loo against ExactLikelihood's per-draw R&W eqs. 5.10-5.12 (NumPy)."""
    X, y = _data(n=60)
    rng = np.random.default_rng(1)
    for kernel, ard in (("expquad", False), ("matern32", True)):
        gp = GPRegression(X, y, kernel, ard=ard)
        draws = [np.exp(rng.normal(0.0, 0.3, (7, 2) if ard else 7)),
                 np.exp(rng.normal(-0.3, 0.2, 7)), np.exp(rng.normal(-1.5, 0.2, 7))]  # fmt: skip
        out = native_gp.loo_draws(gp.model, draws, threads=2)
        ref = np.array([gp._pointwise_loo([a[k] for a in draws]) for k in range(7)])
        np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-12)


def test_not_positive_definite_is_a_divergence_and_loo_falls_back():
    """Duplicated inputs with no noise and no jitter: C is singular. The log density returns 4
    (nuts-rs: a divergence), the LOO row is NaN and GPRegression repeats it per draw."""
    X = np.repeat(np.linspace(0, 1, 5)[:, None], 2, axis=0)
    y = np.sin(X[:, 0])
    gp = GPRegression(X, y, "expquad", noise=1e-300, jitter=0.0)
    cm, reason = native_gp.compile_native(gp.model)
    assert cm is not None, reason
    rc, lp, _ = _call(cm, np.zeros(cm.n_dim))
    assert rc == 4 and lp == -np.inf
    out = native_gp.loo_draws(gp.model, [np.ones(2), np.ones(2)])
    assert np.isnan(out).all()


def test_models_it_does_not_cover_say_why():
    X, y = _data(d=1)
    cases = {
        "prml": GPRegression(X, y, "prml"),
        "learned mean": GPRegression(X, y, "expquad", mean="constant"),
        "student prior": GPRegression(X, y, "expquad", priors={"eta": pm.HalfStudentT.dist(3, 1)}),
        "approximation": GPRegression(X, y, "expquad", approx="hsgp"),
        # the stacked values and derivatives (a subclass of the exact likelihood)
        "derivatives": GPRegression(X, y, "expquad", dX=X[:3], dy=np.zeros(3), d_noise=0.1),
        "known noise": GPRegression(X, y, "expquad", noise=np.full(len(y), 0.1)),
        "negative scale": GPRegression(X, y, "expquad", priors={"eta": pm.HalfNormal.dist(F(-1))}),
    }
    reasons = {k: native_gp.plan(gp.model)[1] for k, gp in cases.items()}
    assert "describes" in reasons["prml"]
    for case in ("learned mean", "approximation", "derivatives", "known noise"):
        assert "describes" in reasons[case], case
    assert "prior" in reasons["student prior"]
    assert "not finite and positive" in reasons["negative scale"]
    with native_gp.native(False):
        assert "off" in native_gp.plan(GPRegression(X, y, "expquad").model)[1]


def test_nuts_posterior_matches_quadrature():
    """NUTS on the C log density (backend "native", chains in parallel) against the posterior
    means of (log ls, log eta, log sigma) by quadrature on a grid of the NumPy reference: within
    4.5 Monte Carlo standard errors."""
    import arviz as az

    rng = np.random.default_rng(7)
    X = np.sort(rng.uniform(0, 6, 20))[:, None]
    y = np.sin(X[:, 0]) + 0.3 * rng.standard_normal(20)
    gp = GPRegression(X, y, "expquad", mean="zero")
    idata = gp.sample(draws=800, tune=600, chains=2, random_seed=3, progressbar=False)
    post = idata["posterior"]
    assert post.attrs["bayes_gp_nutpie_backend"] == "native"
    assert "nothing compiled" in post.attrs["bayes_gp_nutpie_backend_reason"]
    assert idata["log_likelihood"]["y"].shape == (2, 800, 20)

    layout = native_gp.plan(gp.model)[0][1]
    cm, _ = native_gp.compile_native(gp.model)
    axes = [np.linspace(-2.0, 2.5, 36), np.linspace(-2.5, 2.0, 36), np.linspace(-3.5, 0.0, 36)]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    lp = np.array([_call(cm, g)[1] for g in grid])
    w = np.exp(lp - lp.max())
    w /= w.sum()
    assert layout.shape_info[0][:3] == ["ls_log__", "eta_log__", "sigma_log__"]
    for k, name in enumerate(("ls", "eta", "sigma")):
        draws = np.log(post[name].values)
        mean_q = float(w @ grid[:, k])
        se = float(az.mcse(np.log(post[name]).to_dataset(name="v"))["v"])
        assert abs(draws.mean() - mean_q) < 4.5 * se + 0.01, (name, draws.mean(), mean_q, se)


def test_initial_points_are_pymcs():
    """The jittered support points nutpie starts from, as PyMC's make_initial_point_fn draws
    them for the numba model: equal, for three free variables and for two (fixed noise)."""
    from pymc.initial_point import make_initial_point_fn

    X, y = _data()
    for gp in (GPRegression(X, y, "matern52", ard=True), GPRegression(X, y, "expquad", noise=0.2)):
        model = gp.model
        cm, _ = native_gp.compile_native(model)
        fn = make_initial_point_fn(model=model, default_strategy="support_point",
                                   jitter_rvs=set(model.free_RVs), return_transformed=True)  # fmt: skip
        for seed in (0, 5, 2**40):
            ref = fn(seed)
            expected = np.concatenate([np.atleast_1d(ref[v.name]) for v in model.value_vars])
            np.testing.assert_allclose(cm.initial_point_func(seed), expected, rtol=1e-14)


def test_nuts_takes_the_same_steps_as_the_numba_model():
    """The same seed on the C path and on numba's compiled model: the same initial points and
    log densities equal to rounding, so nuts-rs takes the same steps and the short runs'
    posterior means agree closely; a wrong density (another data set) would move them by far
    more than the 1e-6 allowed."""
    rng = np.random.default_rng(2)
    X = np.sort(rng.uniform(0, 6, 30))[:, None]
    gp = GPRegression(X, np.sin(X[:, 0]) + 0.3 * rng.standard_normal(30), "expquad")
    options = dict(draws=100, tune=100, chains=2, random_seed=3, log_likelihood=False)
    on_c = gp.sample(**options)
    assert on_c["posterior"].attrs["bayes_gp_nutpie_backend"] == "native"
    with native_gp.native(False):
        by_numba = gp.sample(**options)
    assert by_numba["posterior"].attrs["bayes_gp_nutpie_backend"] == "numba"
    assert "the C path is off" in by_numba["posterior"].attrs["bayes_gp_nutpie_backend_reason"]
    for name in ("ls", "eta", "sigma"):
        a = float(on_c["posterior"][name].mean())
        b = float(by_numba["posterior"][name].mean())
        assert a == pytest.approx(b, rel=1e-6), name


@pytest.fixture
def fresh_library(monkeypatch, tmp_path):
    """native_gp's library state emptied, the library's path in ``tmp_path``."""
    monkeypatch.setattr(native_gp, "_LIBRARY", {})
    monkeypatch.setattr(native_gp, "_FAILED", {})
    monkeypatch.setattr(native_gp, "_CHILD", {})
    monkeypatch.setattr(native_gp, "_library_path", lambda: tmp_path / "exact_gp-test.so")
    return tmp_path


def test_without_a_compiler_numba_takes_over(fresh_library, monkeypatch):
    monkeypatch.setattr(native_gp, "_compiler", lambda: None)
    X, y = _data(n=15, d=1)
    cm, reason = native_gp.compile_native(GPRegression(X, y, "expquad").model)
    assert cm is None and "no C compiler" in reason


def test_a_failed_compilation_is_reported(fresh_library, monkeypatch):
    bad = fresh_library / "bad.c"
    bad.write_text("int gp_logp( {")
    monkeypatch.setattr(native_gp, "SOURCE", bad)
    X, y = _data(n=15, d=1)
    cm, reason = native_gp.compile_native(GPRegression(X, y, "expquad").model)
    assert cm is None and "the C compiler failed" in reason
    assert not list(fresh_library.glob("*.so"))  # nothing half-written left behind


def test_compiled_once_and_loaded(fresh_library):
    """A child process compiles the library into the path; a later process only loads it."""
    native_gp.start_compiling()
    lib = native_gp.library()
    assert lib is not None and (fresh_library / "exact_gp-test.so").exists()
    assert native_gp.library() is lib


def test_compile_native_data_swaps_the_observed_data():
    """A description of the same model with other data (SBC's per-simulation fit): its log
    density equals PyMC's for the model with that data observed, the fixed mean (here the
    example data's sample mean) kept; a copy made by ``pm.observe`` (``register_like``) with its
    variables in its own order gives the same; data of another length are refused."""
    X, y = _data(n=20, d=1)
    gp = GPRegression(X, y, "matern32")  # default mean: the constant mean(y), fixed
    y_new = np.cos(X[:, 0])
    obs = gp.model.observed_RVs[0]
    swapped = pm.observe(gp.model, {obs.name: y_new})
    logp = swapped.compile_logp(mode=EAGER_MODE)
    cm, reason = native_gp.compile_native_data(gp.model, y_new)
    assert cm is not None, reason
    copy = pm.observe(gp.model, {obs.name: y})
    native_gp.register_like(copy, gp.model)
    cm_copy, _ = native_gp.compile_native_data(copy, y_new)
    names = [v.name for v in copy.value_vars]
    for seed in range(2):
        x = cm.initial_point_func(seed)
        point = _point_of(cm, x)
        np.testing.assert_allclose(_call(cm, x)[1], logp(point), rtol=1e-12)
        x_copy = np.concatenate([np.atleast_1d(point[name]) for name in names])
        np.testing.assert_allclose(_call(cm_copy, x_copy)[1], logp(point), rtol=1e-12)
    with pytest.raises(ValueError, match="19 values, the model 20"):
        native_gp.compile_native_data(gp.model, y_new[:-1])


def _point_of(cm, x):
    names, slices, shapes = cm.shape_info
    return {nm: x[sl].reshape(sh) for nm, sl, sh in zip(names, slices, shapes, strict=True)
            if nm.endswith("_log__")}  # fmt: skip


@pytest.mark.parametrize("prior", [True, False])
def test_type_ii_objective_equals_the_pytensor_graph(prior):
    """typeii.optimize's objective in C (native_gp.objective): the log marginal likelihood,
    with the priors of the values and no log-Jacobian where prior, and its gradient, equal to
    PyTensor's graph of the same objective (1e-12 relative); a MAP fit reaches the same
    optimum on either path."""
    import pytensor

    from bayes_gp.inference.typeii import _objective_graph, raveler
    from bayes_gp.linalg import EAGER_MODE

    X, y = _data(n=30)
    gp = GPRegression(X, y, "matern52 + expquad * periodic", ard=True)
    model = gp.model
    obj = _objective_graph(model, prior)
    fn = pytensor.function(model.value_vars, [obj, *pytensor.grad(obj, model.value_vars)],
                           mode=EAGER_MODE)  # fmt: skip
    _, unravel = raveler(model, [v.name for v in model.value_vars])
    native = native_gp.objective(model, prior)
    assert native is not None
    rng = np.random.default_rng(4)
    x0 = np.concatenate([np.ravel(v) for v in model.initial_point().values()])
    for _ in range(3):
        x = x0 + 0.3 * rng.standard_normal(x0.size)
        out = fn(*unravel(x))
        value, grad = native(x)
        np.testing.assert_allclose(value, out[0], rtol=1e-12)
        ref = np.concatenate([np.ravel(g) for g in out[1:]])
        np.testing.assert_allclose(grad, ref, rtol=1e-9, atol=1e-11 * np.abs(ref).max())
    fit = GPRegression(X[:20], y[:20], "matern52").fit_map(prior=prior, random_seed=0)
    with native_gp.native(False):
        again = GPRegression(X[:20], y[:20], "matern52").fit_map(prior=prior, random_seed=0)
    assert fit.objective == pytest.approx(again.objective, abs=1e-6)
