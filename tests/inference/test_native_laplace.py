"""The Laplace-integrated latent GP in C (bayes_gp.inference.native_laplace): its log density
and gradient against the PyMC model's own (the NumPy Laplace solver inside), the modes and
diag(Sigma) against that solver, the posterior of NUTS on it against quadrature, the fit
compiling nothing, and the models it does not cover."""

from __future__ import annotations

import ctypes

import arviz as az
import numpy as np
import pymc as pm
import pytest

from bayes_gp import GPClassifier, LatentGP
from bayes_gp.inference import native_gp, native_laplace
from bayes_gp.inference.native_laplace import NativeLaplace
from bayes_gp.latent.laplace import laplace
from bayes_gp.linalg import EAGER_MODE
from tests.inference.test_native_latent import _joint_cases, _point
from tests.inference.test_native_latent import _logp as _symbol_logp

pytestmark = pytest.mark.skipif(
    native_gp.library() is None, reason=f"no C library: {native_gp.failure()}"
)

F = np.float64


def _cases():
    """The joint latent GP's cases (the same models, sampled with the latent values integrated
    out here), a classifier without ARD, and the likelihoods with a parameter."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 2))
    labels = (X[:, 0] + 0.3 * rng.normal(size=30) > 0).astype(int)
    return {
        **_joint_cases(),
        "classifier": GPClassifier(X[:, :1], labels, "matern52"),
        # likelihoods with a parameter sampled with the hyperparameters (dispersion, sigma)
        "negative binomial, exposure": LatentGP(X[:, :1], rng.negative_binomial(3, 0.4, 30),
                                                "matern52", "negative_binomial",
                                                exposure=rng.uniform(0.5, 2.0, 30),
                                                mean="constant"),
        "negative binomial, fixed dispersion": LatentGP(X, rng.poisson(4, 30), "expquad",
                                                        "negative_binomial", ard=True,
                                                        priors={"dispersion": 2.5}),
        "gaussian": LatentGP(X[:, :1], np.sin(2 * X[:, 0]) + 0.3 * rng.normal(size=30),
                             "matern32 + expquad", "gaussian"),
    }  # fmt: skip


def _logp(cm, x):
    return _symbol_logp(cm, x, "lap_logp")


@pytest.mark.parametrize("case", list(_cases()))
def test_logp_and_gradient_equal_the_pymc_model(case):
    """``lap_logp`` against PyMC's model of the hyperparameters, whose potential is the NumPy
    Laplace solver's log evidence (Python linker), at three points around the initial ones:
    1e-9 relative (the two Newton solvers stop at the same tolerance, 1e-10, from different
    starts), the gradient 1e-7; ``lap_expand`` gives the hyperparameters' values."""
    gp = _cases()[case]
    model = gp.model
    cm, reason = native_gp.compile_native(model)
    assert cm is not None, reason
    assert "Laplace" in reason and isinstance(native_gp.describe(model), NativeLaplace)
    logp = model.compile_logp(mode=EAGER_MODE)
    dlogp = model.compile_dlogp(mode=EAGER_MODE)
    rng = np.random.default_rng(0)
    names, slices, _ = cm.shape_info
    expand = cm.native_library.lap_expand
    expand.restype = ctypes.c_int64
    expand.argtypes = [ctypes.c_uint64, ctypes.c_uint64] + [ctypes.c_void_p] * 3
    for seed in range(3):
        x = cm.initial_point_func(seed) + rng.normal(0.0, 0.5, cm.n_dim)
        point = _point(cm, model, x)
        rc, lp, grad = _logp(cm, x)
        assert rc == 0
        np.testing.assert_allclose(lp, logp(point), rtol=1e-9)
        ref = dlogp(point)
        np.testing.assert_allclose(grad, ref, rtol=1e-7, atol=1e-9 * np.abs(ref).max())
        out = np.zeros(cm.n_expanded)
        assert expand(len(x), len(out), x.ctypes.data, out.ctypes.data,
                      cm.user_data.ctypes.data) == 0  # fmt: skip
        for rv in model.free_RVs:  # on the log transform: the value is exp(u)
            if model.rvs_to_transforms.get(rv) is not None:
                value = np.exp(point[model.rvs_to_values[rv].name])
                np.testing.assert_allclose(out[slices[names.index(rv.name)]], np.ravel(value),
                                           rtol=1e-13)  # fmt: skip


def test_gradient_against_central_differences_far_from_the_start():
    """Far from the initial point (long length-scale, large amplitude: a nearly separable
    classifier whose Newton method takes the line search), the gradient against central
    differences of the C log density itself."""
    rng = np.random.default_rng(2)
    X = rng.uniform(0, 5, (40, 1))
    gp = GPClassifier(X, (np.sin(2 * X[:, 0]) > 0).astype(int), "matern32")
    cm, _ = native_gp.compile_native(gp.model)
    x = cm.initial_point_func(0) + np.array([1.0, 1.5])
    rc, _, grad = _logp(cm, x)
    assert rc == 0
    h = 1e-6
    fd = [(_logp(cm, x + h * e)[1] - _logp(cm, x - h * e)[1]) / (2 * h) for e in np.eye(len(x))]
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", ["classifier", "binomial, learned mean", "bernoulli on a grid",
                                  "negative binomial, exposure"])
def test_modes_equal_the_numpy_solver(case):
    """:func:`native_laplace.modes` over two chains of points against the NumPy solver at each
    point: the mode to 1e-8, diag(Sigma) and log q to 1e-9 relative."""
    gp = _cases()[case]
    model = gp.model
    cm, _ = native_gp.compile_native(model)
    rng = np.random.default_rng(1)
    xs = np.array([[cm.initial_point_func(s) + rng.normal(0, 0.3, cm.n_dim) for s in range(3)]
                   for _ in range(2)])  # fmt: skip
    names, slices, _ = cm.shape_info
    values = []
    for rv in model.free_RVs:
        sl = slices[names.index(model.rvs_to_values[rv].name)]
        u = xs[..., sl]
        values.append(np.exp(u) if model.rvs_to_transforms.get(rv) is not None else u)
    values = [v if v.shape[-1] > 1 else v[..., 0] for v in values]
    found = native_laplace.modes(model, values)
    assert found.f.shape == found.cov_diag.shape == (2, 3, 30)
    assert np.all(found.status == 0)
    for c in range(2):
        for d in range(3):
            K, m, phi = gp._train([v[c, d] for v in values])
            res = laplace(K, m, gp.likelihood, phi, gradient=True)
            np.testing.assert_allclose(found.f[c, d], res.f, rtol=1e-8, atol=1e-8)
            np.testing.assert_allclose(found.cov_diag[c, d], np.diag(res.cov), rtol=1e-9)
            np.testing.assert_allclose(found.log_q[c, d], res.log_evidence, rtol=1e-9)


def test_models_it_does_not_cover_say_why():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(20, 1))
    labels = (X[:, 0] > 0).astype(int)
    cases = {
        "probit": GPClassifier(X, labels, link="probit"),
        "student-t": LatentGP(X, rng.normal(size=20), "expquad", "student_t"),
        "linear mean": LatentGP(X, rng.poisson(3, 20), "expquad", "poisson", mean="linear"),
        "prml": LatentGP(X, rng.poisson(3, 20), "prml", "poisson"),
    }
    for name, gp in cases.items():
        assert "describes" in native_gp.plan(gp.model)[1], name
        assert native_laplace.modes(gp.model, [np.ones((1, 1))]) is None
    added = GPClassifier(X, labels)
    with added.model:
        pm.Deterministic("ls_squared", added.model["ls"] ** 2)
    assert "ls_squared" in native_gp.plan(added.model)[1]

    numpy_op = GPClassifier(X, labels)
    numpy_op._op.native = False  # the Op's NumPy solver asked for: not on the C path either
    assert native_gp.describe(numpy_op.model) is None

    class Subclass(LatentGP):  # a subclass may build another model: it says so itself
        pass

    assert native_gp.describe(Subclass(X, rng.poisson(3, 20), "expquad", "poisson").model) is None


def test_nuts_posterior_matches_quadrature():
    """One free hyperparameter (the length-scale; eta fixed): the posterior mean and sd of
    log ls from NUTS on the C path (2 chains x 1000 draws) against quadrature of the prior
    times the NumPy solver's Laplace evidence on a grid, within 4 Monte Carlo standard
    errors; the fit compiles nothing for the model and stores each draw's mode and LA-LOO
    terms from the C pass."""
    rng = np.random.default_rng(7)
    x = np.sort(rng.uniform(0, 10, 40))
    gp = GPClassifier(x[:, None], (rng.uniform(size=40) < 1 / (1 + np.exp(-3 * np.sin(x))))
                      .astype(int), "expquad", priors={"eta": 2.0})  # fmt: skip
    idata = gp.sample(draws=1000, tune=500, chains=2, random_seed=3, sampler="nutpie")
    post = idata["posterior"]
    assert post.attrs["bayes_gp_nutpie_backend"] == "native", post.attrs
    assert "Laplace" in post.attrs["bayes_gp_nutpie_backend_reason"]
    assert post["f_mode"].shape == idata["log_likelihood"]["y"].shape == (2, 1000, 40)
    ls_rv = gp.model["ls"]
    u = np.linspace(-4.0, 4.0, 321)  # log ls
    evidence = [_evidence(gp, np.exp(ui)) for ui in u]
    logpost = np.array(evidence) + pm.logp(ls_rv, np.exp(u)).eval() + u  # the log-Jacobian
    w = np.exp(logpost - logpost.max())
    w /= w.sum()
    mean = np.sum(w * u)
    sd = np.sqrt(np.sum(w * (u - mean) ** 2))
    draws = np.log(post["ls"].values)
    se = sd / np.sqrt(float(az.ess(idata, var_names=["ls"])["ls"]))  # (bulk: rank-based)
    assert abs(draws.mean() - mean) < 4 * se, (draws.mean(), mean, se)
    assert abs(draws.std() - sd) < 0.1 * sd, (draws.std(), sd)


def _evidence(gp, ls: float) -> float:
    K, m, phi = gp._train([ls])
    return laplace(K, m, gp.likelihood, phi).log_evidence


@pytest.mark.parametrize("prior", [True, False])
def test_type_ii_fit_in_c_equals_the_pytensor_graphs(prior):
    """``fit_laplace`` (MAP and ML-II) through the C objective and through PyTensor's graph of
    the NumPy solver reach the same optimum: hyperparameters to 1e-5 relative, the objective to
    1e-8; the C objective itself equals the graph's value and gradient at a point."""
    from bayes_gp.inference.typeii import optimize

    rng = np.random.default_rng(4)
    X = rng.uniform(0, 6, (35, 1))
    gp = LatentGP(X, rng.poisson(np.exp(1 + np.sin(X[:, 0]))), "matern52", "poisson",
                  mean="constant")  # fmt: skip
    fit_c = optimize(gp.model, n_restarts=2, prior=prior, random_seed=0)
    with native_gp.native(False):
        fit_graph = optimize(gp.model, n_restarts=2, prior=prior, random_seed=0)
    for name, value in fit_graph.params.items():
        np.testing.assert_allclose(fit_c.params[name], value, rtol=1e-5, err_msg=name)
    np.testing.assert_allclose(fit_c.objective, fit_graph.objective, rtol=1e-8)
    objective = native_gp.objective(gp.model, prior)
    x = np.array([0.3, -0.2, 1.1])
    value, grad = objective(x)
    import pytensor

    from bayes_gp.inference.typeii import _objective_graph

    obj = _objective_graph(gp.model, prior)
    fn = pytensor.function(gp.model.value_vars, [obj, *pytensor.grad(obj, gp.model.value_vars)],
                           mode=EAGER_MODE)  # fmt: skip
    names = [v.name for v in gp.model.value_vars]
    ref = fn(**dict(zip(names, x, strict=True)))
    np.testing.assert_allclose(value, ref[0], rtol=1e-9)
    np.testing.assert_allclose(grad, ref[1:], rtol=1e-7)
