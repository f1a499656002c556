"""Whitened latent GPs in C (bayes_gp.inference.native_latent), the heteroscedastic GP and the
joint latent GP: their values and gradients against the PyMC models' own, nutpie's stored
values against the models' deterministics, the initial points against PyMC's, NUTS on them,
and the models they do not cover."""

from __future__ import annotations

import ctypes

import arviz as az
import numpy as np
import pymc as pm
import pytest

from bayes_gp import GPClassifier, HeteroscedasticGPRegression, LatentGP
from bayes_gp.inference import native_gp
from bayes_gp.inference.native_latent import NativeHetero, NativeJointLatent
from bayes_gp.linalg import EAGER_MODE

pytestmark = pytest.mark.skipif(
    native_gp.library() is None, reason=f"no C library: {native_gp.failure()}"
)

F = np.float64


def _data(n=24, d=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 5, (n, d))
    y = np.sin(X[:, 0]) + (0.05 + 0.2 * X[:, 0]) * rng.standard_normal(n)
    return X, y


def _fn(cm, symbol: str):
    fn = getattr(cm.native_library, symbol)
    fn.restype = ctypes.c_int64
    extra = [ctypes.c_uint64] if symbol.endswith("expand") else []
    fn.argtypes = [ctypes.c_uint64, *extra] + [ctypes.c_void_p] * (3 if extra else 4)
    return fn


def _logp(cm, x, symbol="het_logp"):
    x = np.ascontiguousarray(x, dtype=float)
    grad, lp = np.zeros_like(x), np.zeros(1)
    rc = _fn(cm, symbol)(len(x), x.ctypes.data, grad.ctypes.data, lp.ctypes.data,
                         cm.user_data.ctypes.data)  # fmt: skip
    return rc, float(lp[0]), grad


def _point(cm, model, x):
    names, slices, shapes = cm.shape_info
    return {nm: x[sl].reshape(sh) for nm, sl, sh in
            list(zip(names, slices, shapes, strict=True))[: len(model.free_RVs)]}  # fmt: skip


CASES = [
    ("expquad", "expquad", False, {}),
    ("matern52", "matern32", True, {}),
    ("matern32", "matern12", False, {"eta": 2.0, "noise_mean": -1.0}),
    ("exponential", "matern52", True, {"noise_ls": pm.Gamma.dist(F(3.0), F(2.0), shape=2),
                                       "noise_mean": pm.Normal.dist(F(-0.5), F(0.3))}),
    ("expquad + matern32 * periodic", "ratquad", False, {"periodic_period": 2.0}),
    ("matern32 + periodic", "expquad", "grid", {}),  # both kernels at the lags of a grid
]  # fmt: skip


@pytest.mark.parametrize(("kernel", "noise_kernel", "ard", "priors"), CASES)
def test_logp_gradient_and_expansion_equal_the_pymc_models(kernel, noise_kernel, ard, priors):
    """The C log density and gradient against PyMC's (Python linker) at three jittered initial
    points, to 1e-10 relative; the stored values against the constrained values and ``g``."""
    X, y = _data(d=2 if ard is True else 1)
    if ard == "grid":
        X, ard = np.round(X * 4.0) / 4.0, False  # quarters, repeats included
    gp = HeteroscedasticGPRegression(X, y, kernel, noise_kernel, ard=ard, priors=priors)
    assert ("f_lags_gp" in native_gp.compile_native(gp.model)[0].native_arrays) == (
        X.shape[1] == 1 and np.allclose(X * 4.0, np.round(X * 4.0))
    )
    model = gp.model
    cm, reason = native_gp.compile_native(model)
    assert cm is not None, reason
    assert "heteroscedastic" in reason
    logp = model.compile_logp(mode=EAGER_MODE)
    dlogp = model.compile_dlogp(mode=EAGER_MODE)
    stored = model.replace_rvs_by_values([model["g"], *gp._hyper_rvs])
    values = model.compile_fn(stored, inputs=model.value_vars, on_unused_input="ignore",
                              mode=EAGER_MODE)  # fmt: skip
    names, slices, _ = cm.shape_info
    expand = _fn(cm, "het_expand")
    for seed in range(3):
        x = cm.initial_point_func(seed)
        point = _point(cm, model, x)
        rc, lp, grad = _logp(cm, x)
        assert rc == 0
        np.testing.assert_allclose(lp, logp(point), rtol=1e-11)
        ref = dlogp(point)
        np.testing.assert_allclose(grad, ref, rtol=1e-8, atol=1e-9 * np.abs(ref).max())
        out = np.zeros(cm.n_expanded)
        assert expand(len(x), len(out), x.ctypes.data, out.ctypes.data,
                      cm.user_data.ctypes.data) == 0  # fmt: skip
        g, *hyper = values(point)
        np.testing.assert_allclose(out[slices[names.index("g")]], g, rtol=1e-10, atol=1e-12)
        for rv, value in zip(gp._hyper_rvs, hyper, strict=True):
            np.testing.assert_allclose(out[slices[names.index(rv.name)]], np.ravel(value),
                                       rtol=1e-13)  # fmt: skip
        assert expand(len(x) - 1, len(out), x.ctypes.data, out.ctypes.data,
                      cm.user_data.ctypes.data) == -1  # fmt: skip


def test_gradient_against_central_differences_far_from_the_start():
    """Away from the initial points (long noise length-scale, large latent values), the
    gradient against central differences of the C log density itself."""
    X, y = _data(n=30)
    gp = HeteroscedasticGPRegression(X, y, "matern52", "expquad")
    cm, _ = native_gp.compile_native(gp.model)
    rng = np.random.default_rng(4)
    x = cm.initial_point_func(1) + rng.normal(0.0, 0.8, cm.n_dim)
    rc, _, grad = _logp(cm, x)
    assert rc == 0
    h = 1e-6
    fd = [(_logp(cm, x + h * e)[1] - _logp(cm, x - h * e)[1]) / (2 * h) for e in np.eye(len(x))]
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-5)


def test_initial_points_are_pymcs():
    from pymc.initial_point import make_initial_point_fn

    X, y = _data()
    for priors in ({}, {"noise_eta": 0.5}):
        model = HeteroscedasticGPRegression(X, y, priors=priors).model
        cm, _ = native_gp.compile_native(model)
        fn = make_initial_point_fn(model=model, default_strategy="support_point",
                                   jitter_rvs=set(model.free_RVs), return_transformed=True)  # fmt: skip
        for seed in (0, 7, 2**40):
            ref = fn(seed)
            expected = np.concatenate([np.ravel(ref[v.name]) for v in model.value_vars])
            np.testing.assert_allclose(cm.initial_point_func(seed), expected, rtol=1e-14)


def test_not_positive_definite_is_a_divergence():
    """K_g of duplicated inputs without jitter: its Cholesky factor fails, the log density
    returns 4 (nuts-rs: a divergence) and -inf."""
    X = np.repeat(np.linspace(0, 1, 6)[:, None], 2, axis=0)
    gp = HeteroscedasticGPRegression(X, np.sin(6 * X[:, 0]), jitter=0.0)
    cm, reason = native_gp.compile_native(gp.model)
    assert cm is not None, reason
    rc, lp, _ = _logp(cm, cm.initial_point_func(0))
    assert rc == 4 and lp == -np.inf


def test_models_it_does_not_cover_say_why():
    X, y = _data()
    cases = {
        "prml": HeteroscedasticGPRegression(X, y, "expquad", "prml"),
        "student mean": HeteroscedasticGPRegression(
            X, y, priors={"noise_mean": pm.StudentT.dist(nu=F(3.0), mu=F(0.0), sigma=F(1.0))}
        ),
        "positive mean": HeteroscedasticGPRegression(
            X, y, priors={"noise_mean": pm.LogNormal.dist(F(0.0), F(1.0))}
        ),
    }
    added = HeteroscedasticGPRegression(X, y)
    with added.model:
        pm.Deterministic("noise_sd", pm.math.exp(added.model["g"]))
    cases["added"] = added
    reasons = {k: native_gp.plan(gp.model)[1] for k, gp in cases.items()}
    assert "describes" in reasons["prml"]
    assert "noise_mean's prior (t) is not one of" in reasons["student mean"]
    assert "noise_mean's prior is not an untransformed Normal" in reasons["positive mean"]
    assert "noise_sd" in reasons["added"]
    assert native_gp.loo_draws(HeteroscedasticGPRegression(X, y).model, [np.ones(2)]) is None
    assert isinstance(native_gp.describe(HeteroscedasticGPRegression(X, y).model), NativeHetero)


def test_nuts_runs_on_the_c_path():
    """``sample`` takes the C path (nothing compiled), with chains in parallel, and its
    posterior holds the draws of ``g`` and ``f`` and the leave-one-out terms."""
    X, y = _data(n=40)
    gp = HeteroscedasticGPRegression(X, y)
    idata = gp.sample(draws=100, tune=100, chains=2, random_seed=2, sampler="nutpie")
    post = idata["posterior"]
    assert post.attrs["bayes_gp_nutpie_backend"] == "native"
    assert "heteroscedastic" in post.attrs["bayes_gp_nutpie_backend_reason"]
    assert post["g"].shape == post["f"].shape == (2, 100, 40)
    assert idata["log_likelihood"]["y"].shape == (2, 100, 40)
    assert np.all(np.isfinite(post["g"])) and int(idata["sample_stats"]["diverging"].sum()) < 5


# ------------------------------------------------------------------ the joint latent GP
def _joint_cases():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 2))
    return {
        "poisson": LatentGP(X[:, :1], rng.poisson(3, 30), "matern32", "poisson",
                            exposure=rng.uniform(0.5, 2.0, 30)),
        "classifier ARD": GPClassifier(X, (X[:, 0] + 0.3 * rng.normal(size=30) > 0).astype(int),
                                       "matern52", ard=True),
        "binomial, learned mean": LatentGP(X[:, :1], rng.binomial(5, 0.4, 30), "expquad",
                                           "binomial", trials=5, mean="constant"),
        "poisson, fixed eta": LatentGP(X, rng.poisson(3, 30), "matern12", "poisson",
                                       priors={"eta": 1.3}),
        "poisson, sum of products": LatentGP(X[:, :1], rng.poisson(3, 30),
                                             "expquad * periodic + ratquad", "poisson"),
        # a yearly grid with gaps: the kernel at its lags (bayes_gp.kernels.lags)
        "bernoulli on a grid": LatentGP(np.sort(rng.choice(40, 30, replace=False))[:, None]
                                        + 1950.0, rng.binomial(1, 0.4, 30), "matern52 + expquad",
                                        "bernoulli"),
    }  # fmt: skip


@pytest.mark.parametrize("case", list(_joint_cases()))
def test_joint_latent_logp_gradient_and_expansion_equal_the_pymc_models(case):
    """``lat_logp`` against PyMC's joint model (Python linker) at three points around the
    initial ones, to 1e-9 relative; ``lat_expand`` against the deterministic ``f``."""
    gp = _joint_cases()[case]
    model = gp._latent_model()
    cm, reason = native_gp.compile_native(model)
    assert cm is not None, reason
    assert isinstance(native_gp.describe(model), NativeJointLatent)
    logp = model.compile_logp(mode=EAGER_MODE)
    dlogp = model.compile_dlogp(mode=EAGER_MODE)
    f = model.compile_fn(model.replace_rvs_by_values([model["f"]])[0], inputs=model.value_vars,
                         on_unused_input="ignore", mode=EAGER_MODE)  # fmt: skip
    names, slices, _ = cm.shape_info
    rng = np.random.default_rng(0)
    for seed in range(3):
        x = cm.initial_point_func(seed) + rng.normal(0.0, 0.5, cm.n_dim)
        point = _point(cm, model, x)
        rc, lp, grad = _logp(cm, x, "lat_logp")
        assert rc == 0
        np.testing.assert_allclose(lp, logp(point), rtol=1e-9)
        ref = dlogp(point)
        np.testing.assert_allclose(grad, ref, rtol=1e-7, atol=1e-9 * np.abs(ref).max())
        out = np.zeros(cm.n_expanded)
        assert _fn(cm, "lat_expand")(len(x), len(out), x.ctypes.data, out.ctypes.data,
                                     cm.user_data.ctypes.data) == 0  # fmt: skip
        # (the squared-exponential K's Cholesky factor rounds differently: 1e-10 relative)
        np.testing.assert_allclose(out[slices[names.index("f")]], f(point), rtol=1e-8,
                                   atol=1e-10)  # fmt: skip


def test_joint_latent_models_it_does_not_cover():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(20, 1))
    labels = (X[:, 0] > 0).astype(int)
    cases = {
        "probit": GPClassifier(X, labels, link="probit"),
        "negative binomial": LatentGP(X, rng.poisson(3, 20), "expquad", "negative_binomial"),
        "linear mean": LatentGP(X, rng.poisson(3, 20), "expquad", "poisson", mean="linear"),
        "prml": LatentGP(X, rng.poisson(3, 20), "prml", "poisson"),
    }
    for name, gp in cases.items():
        assert "describes" in native_gp.plan(gp._latent_model())[1], name
    # the Laplace model (method="nuts") is not the joint one (bayes_gp.inference.native_laplace)
    assert not isinstance(native_gp.describe(GPClassifier(X, labels).model), NativeJointLatent)

    class Subclass(LatentGP):  # a subclass may build another joint model: it says so itself
        pass

    joint = Subclass(X, rng.poisson(3, 20), "expquad", "poisson")._latent_model()
    assert native_gp.describe(joint) is None


def test_auto_samples_the_joint_latent_gp_with_nutpie_on_the_c_path():
    """``sampler="auto"`` of a joint latent GP the C code computes: nutpie on it (nothing
    compiled), chains in parallel, ``f`` and the pointwise log-likelihood stored, and the
    posterior mean of ``f`` near the true log rate 1 + sin(x): root-mean-square error below
    0.3 (the constant log mean count misses it by 0.7)."""
    rng = np.random.default_rng(5)
    x = np.sort(rng.uniform(0, 10, 40))
    log_rate = 1.0 + np.sin(x)
    gp = LatentGP(x[:, None], rng.poisson(np.exp(log_rate)), "expquad", "poisson")
    idata = gp.sample(method="nuts_joint", draws=300, tune=300, chains=2, random_seed=1)
    post = idata["posterior"]
    assert post.attrs["bayes_gp_sampler"] == "nutpie"
    assert post.attrs["bayes_gp_nutpie_backend"] == "native"
    assert "joint latent" in post.attrs["bayes_gp_nutpie_backend_reason"]
    assert post["f"].shape == (2, 300, 40)
    assert idata["log_likelihood"]["y"].shape == (2, 300, 40)
    assert float(az.rhat(idata, var_names=["ls"])["ls"]) < 1.1
    rmse = np.sqrt(np.mean((post["f"].mean(("chain", "draw")).values - log_rate) ** 2))
    assert rmse < 0.3, rmse
    assert np.sqrt(np.mean((np.log(gp.y.mean()) - log_rate) ** 2)) > 0.6


def test_compile_native_data_swaps_the_heteroscedastic_data_but_not_the_joint_latent():
    """Other data into the heteroscedastic GP's description (SBC): PyMC's log density of the
    model with those data observed; the joint latent GP's description, whose constant terms
    depend on the data, is refused."""
    X, y = _data(n=20)
    gp = HeteroscedasticGPRegression(X, y)
    y_new = y[::-1].copy()
    obs = gp.model.observed_RVs[0]
    logp = pm.observe(gp.model, {obs.name: y_new}).compile_logp(mode=EAGER_MODE)
    cm, reason = native_gp.compile_native_data(gp.model, y_new)
    assert cm is not None, reason
    x = cm.initial_point_func(0)
    np.testing.assert_allclose(_logp(cm, x)[1], logp(_point(cm, gp.model, x)), rtol=1e-11)
    joint = LatentGP(X, np.arange(20) % 4, "expquad", "poisson")._latent_model()
    cm, reason = native_gp.compile_native_data(joint, np.zeros(20))
    assert cm is None and "does not take other data" in reason
