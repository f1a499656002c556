"""The pre-flight Cholesky check (:mod:`bayes_gp.inference.jitter`): jitter grown tenfold until
the covariance factorises, recorded in the fit and the report, and a clear error with advice when
no jitter helps."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import bayes_gp.kernels as K
from bayes_gp import (
    DeepKernelRegression,
    GPClassifier,
    GPRegression,
    HeteroscedasticGPRegression,
    NotPSDError,
)
from bayes_gp.inference.jitter import (
    DEFAULT_JITTER,
    DEFAULT_LATENT_JITTER,
    Jitter,
    choose_jitter,
    duplicate_rows,
)
from bayes_gp.latent import LatentGP
from bayes_gp.latent.model import LINK_SCALE
from bayes_gp.linalg import NotPSDWarning
from bayes_gp.report import describe, diagnostics


def test_choose_jitter_grows_tenfold_until_every_matrix_factorises():
    x = np.linspace(0, 1, 10)
    smooth = np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / 10.0**2)  # numerically rank 2
    eye = np.eye(10)
    choice = choose_jitter([eye], start=1e-17)
    assert choice.jitter == 1e-17 and not choice.raised
    choice = choose_jitter([eye, smooth], start=1e-17)
    assert choice.raised and choice.n_points == 2
    assert 1e-17 < choice.jitter <= 1e-4
    np.linalg.cholesky(smooth + choice.jitter * eye)
    with pytest.raises(np.linalg.LinAlgError):  # one step less is not enough
        np.linalg.cholesky(smooth + choice.jitter / 10 * eye)
    zero = choose_jitter([smooth], start=0.0)  # no default jitter: the ladder starts at 1e-12
    assert zero.jitter >= 1e-12 and zero.default == 0.0 and "raised from 0" in zero.describe()


def test_choose_jitter_refuses_a_matrix_that_is_not_a_covariance():
    A = np.array([[1.0, 2.0], [2.0, 1.0]])  # eigenvalues 3, -1
    with pytest.raises(
        NotPSDError, match=r"even with jitter .* \(smallest eigenvalue -1\)\. advice"
    ):
        choose_jitter([A], start=1e-10, advice="advice")


def _duplicated(n=40):
    X = np.linspace(0, 1, n)
    return np.r_[X, X[:10]], np.sin(3 * np.r_[X, X[:10]])


def test_regression_fit_raises_and_records_the_jitter():
    """Duplicate inputs, (almost) no noise and no default jitter: K + sigma^2 I is singular, so
    the pre-flight check raises the jitter; the MAP fit records it and the report says so."""
    X, y = _duplicated()
    assert duplicate_rows(X[:, None]) == 10
    gp = GPRegression(X, y, "expquad", noise=1e-12, jitter=0.0)
    fit = gp.fit_map(n_restarts=1, prior=True, random_seed=0)
    assert fit.jitter_default == 0.0 and fit.jitter > 0.0
    assert gp.jitter == fit.jitter  # the model was rebuilt with it
    assert np.isfinite(fit.log_marginal_likelihood)
    assert all(np.isfinite(v) for v in fit.params.values())
    pred = gp.predict(np.array([0.25, 0.5]), fit)
    assert np.all(np.isfinite(pred.mean)) and pred.extra["jitter"] == 0.0
    rows = dict(describe.point_fit_settings(fit))
    assert "raised from 0" in rows["jitter on the diagonal"]
    verdict = diagnostics.optimizer_verdicts(fit)[-1]
    assert verdict.check.startswith("jitter") and verdict.status == "warn"
    assert "duplicate" in verdict.advice
    # data without the problem: the default jitter, reported as such
    ok = GPRegression(np.linspace(0, 1, 20), np.sin(np.linspace(0, 3, 20)), "expquad")
    fit_ok = ok.fit_map(n_restarts=1, random_seed=0)
    assert fit_ok.jitter == fit_ok.jitter_default == ok.default_jitter
    assert diagnostics.optimizer_verdicts(fit_ok)[-1].status == "ok"


def test_no_jitter_helps_a_kernel_that_is_not_psd():
    X, y = _duplicated(20)

    def sigmoid(D):
        return K.Sigmoid(D, a=5.0, b=3.0, check="none")

    with pytest.warns(NotPSDWarning):
        gp = GPRegression(X, y, sigmoid, noise=1e-3)
    with pytest.raises(NotPSDError) as err:
        gp.fit_map(n_restarts=1)
    msg = str(err.value)
    for advice in ("not positive definite even with jitter", "noise", "10 duplicate input",
                   "rescale the inputs", "valid covariance"):  # fmt: skip
        assert advice in msg, msg


def test_classifier_raises_the_latent_jitter():
    X = np.r_[np.linspace(-2, 2, 30), np.linspace(-2, 2, 30)[:5]]
    labels = (X > 0).astype(int)
    clf = GPClassifier(
        X,
        labels,
        "expquad",
        jitter=0.0,
        priors={"ls": lambda n: pm.LogNormal(n, np.float64(1.0), np.float64(0.1))},
    )
    choice = clf.check_jitter(random_seed=1)
    assert choice.raised and clf.jitter == choice.jitter > 0
    np.linalg.cholesky(clf._train([np.array(2.7), np.array(1.0)])[0])


@pytest.mark.slow
def test_nuts_records_the_jitter_in_the_posterior_and_the_report():
    X, y = _duplicated(20)
    gp = GPRegression(X, y, "expquad", noise=1e-12, jitter=0.0)
    idata = gp.sample(draws=10, tune=10, chains=1, sampler="pymc", random_seed=2,
                      compile_kwargs={"mode": "FAST_RUN"})  # fmt: skip
    attrs = idata["posterior"].attrs
    assert attrs["bayes_gp_jitter_default"] == 0.0 and attrs["bayes_gp_jitter"] > 0.0
    assert attrs["bayes_gp_jitter_points"] == 9
    rows = dict(describe.nuts_settings(idata))
    assert "raised from 0" in rows["jitter on the diagonal"]
    jit = [v for v in diagnostics.mcmc_verdicts(idata) if v.check.startswith("jitter")]
    assert len(jit) == 1 and jit[0].status == "warn"


# ------------------------------------------------- one meaning, one validator, one value object
RNG = np.random.default_rng(3)
XS = np.linspace(0, 5, 24)
Y_REAL = np.sin(XS) + 0.2 * RNG.standard_normal(24)
COUNTS = RNG.poisson(np.exp(1.0 + 0.5 * np.sin(XS))).astype(float)
BINARY = (np.sin(XS) > 0).astype(int)


def _var(y):
    return float(np.std(y)) ** 2


def _latent(likelihood, **kw):
    y = {"bernoulli": BINARY, "student_t": Y_REAL, "gaussian": Y_REAL}.get(likelihood, COUNTS)
    extra = {"trials": np.full(24, 12)} if likelihood == "binomial" else {}
    return LatentGP(XS, y, "expquad", likelihood, **extra, **kw)


#: model builders and the prior scale s^2 their relative jitter multiplies (module docstring of
#: bayes_gp.inference.jitter)
SCALES = {
    "GPRegression": (lambda **kw: GPRegression(XS, Y_REAL, **kw), _var(Y_REAL)),
    "DeepKernelRegression": (
        lambda **kw: DeepKernelRegression(XS, Y_REAL, hidden=(), features=None, **kw),
        _var(Y_REAL),
    ),
    "HeteroscedasticGPRegression": (
        lambda **kw: HeteroscedasticGPRegression(XS, Y_REAL, **kw), 1.0  # the log-noise GP g
    ),
    "GPClassifier": (lambda **kw: GPClassifier(XS, BINARY, **kw), LINK_SCALE**2),
    **{
        f"LatentGP-{lik}": (lambda lik=lik, **kw: _latent(lik, **kw), LINK_SCALE**2)
        for lik in ("bernoulli", "binomial", "poisson", "negative_binomial")
    },
    "LatentGP-student_t": (lambda **kw: _latent("student_t", **kw), _var(Y_REAL)),
    "LatentGP-gaussian": (lambda **kw: _latent("gaussian", **kw), _var(Y_REAL)),
}

#: the default absolute jitters, as before the jitter had one meaning
DEFAULT_ABSOLUTE = {
    "GPRegression": 1e-10 * _var(Y_REAL),
    "DeepKernelRegression": 1e-10 * _var(Y_REAL),
    "HeteroscedasticGPRegression": 1e-6,
    **{name: 1e-6 for name in SCALES if name.startswith(("LatentGP", "GPClassifier"))},
}


@pytest.mark.parametrize("name", sorted(SCALES))
def test_jitter_is_relative_to_the_prior_scale_in_every_model(name):
    """``jitter=`` is relative to the model's prior scale s^2 in every model: the absolute
    jitter (``model.jitter``, what a fit records) is ``jitter * s^2``."""
    make, s2 = SCALES[name]
    gp = make(jitter=3e-5)
    info = gp.jitter_info
    assert isinstance(info, Jitter) and info.relative == 3e-5
    assert info.scale2 == pytest.approx(s2, rel=1e-14)
    assert gp.jitter == gp.default_jitter == pytest.approx(3e-5 * s2, rel=1e-14)
    assert float(gp.jitter_tensor.get_value()) == gp.jitter
    if isinstance(gp, HeteroscedasticGPRegression):  # K_f's jitter: relative to var(y)
        assert gp.jitter_g == gp.jitter and gp.default_jitter_g == gp.default_jitter
        assert gp.jitter_f == pytest.approx(3e-5 * _var(Y_REAL), rel=1e-14)
    # the defaults keep their absolute values
    default = make()
    assert default.jitter == pytest.approx(DEFAULT_ABSOLUTE[name], rel=1e-14)
    if isinstance(default, HeteroscedasticGPRegression):
        assert default.jitter_f == pytest.approx(1e-6 * _var(Y_REAL), rel=1e-14)
    if isinstance(default, LatentGP) and default.likelihood.outcome != "continuous":
        assert default.jitter_info.relative == 2.5e-7 and default.jitter == 1e-6


@pytest.mark.parametrize("name", sorted(SCALES))
def test_one_validator_for_the_jitter(name):
    """Every model takes a finite jitter >= 0 (0 included: the heteroscedastic model's stricter
    check is gone) and refuses anything else with the same message."""
    make, _ = SCALES[name]
    for bad in (-1.0, float("nan"), float("inf"), "small"):
        with pytest.raises(ValueError, match="`jitter` must be a non-negative number"):
            make(jitter=bad)
    gp = make(jitter=0.0)
    assert gp.jitter == gp.default_jitter == 0.0
    with pytest.raises(ValueError, match="`jitter` must be a non-negative number"):
        gp.set_jitter(-1e-3)


def test_the_jitter_value_object():
    j = Jitter.of(None, 4.0, 2.5e-7)
    assert (j.relative, j.scale2, j.value, j.default) == (2.5e-7, 4.0, 1e-6, 1e-6)
    up = j.at(1e-4)
    assert up.value == 1e-4 and up.default == 1e-6 and up.raised and not j.raised
    choice = up.choice(n_points=9)
    assert choice.jitter == 1e-4 and choice.default == 1e-6 and choice.raised
    assert up.attrs() == {"bayes_gp_jitter": 1e-4, "bayes_gp_jitter_default": 1e-6,
                          "bayes_gp_jitter_points": 0}  # fmt: skip
    assert Jitter.of(1e-3, 9.0, 1.0).value == pytest.approx(9e-3)
    with pytest.raises(ValueError, match="scale"):
        Jitter.of(1e-3, 0.0, 1.0)


@pytest.mark.parametrize("name", sorted(SCALES))
def test_set_jitter_keeps_the_model_and_its_compiled_functions(name):
    """``set_jitter`` (a pre-flight increase, or a saved fit's jitter) sets the shared value: the
    PyMC model stays the same object and what was compiled reads the new value."""
    make, _ = SCALES[name]
    gp = make()
    if isinstance(gp, DeepKernelRegression):  # its PyMC model exists after a fit: the loss
        theta = np.zeros(gp.n_params)
        before = gp.loss_and_grad(theta)[0]
        fn = gp._fns["loss"]
        gp.set_jitter(0.5)
        assert gp._fns["loss"] is fn and gp.jitter == 0.5
        fresh = DeepKernelRegression(XS, Y_REAL, hidden=(), features=None,
                                     jitter=0.5 / _var(Y_REAL))  # fmt: skip
        assert gp.loss_and_grad(theta)[0] == pytest.approx(fresh.loss_and_grad(theta)[0])
        assert gp.loss_and_grad(theta)[0] != pytest.approx(before)
        return
    model = gp.model
    rvs = gp._hyper_rvs if isinstance(gp, HeteroscedasticGPRegression) else model.free_RVs
    values = [np.asarray(v, float) for v in pm.draw(rvs, random_seed=0)]
    matrix = _matrix_with_jitter(gp)
    K0 = matrix(values)
    gp.set_jitter(gp.default_jitter + 0.25)
    assert gp.model is model and gp.jitter == gp.default_jitter + 0.25
    assert gp.default_jitter == make().default_jitter
    K1 = matrix(values)
    np.testing.assert_allclose(np.diag(K1 - K0), 0.25, rtol=1e-12)
    off = ~np.eye(K0.shape[0], dtype=bool)
    np.testing.assert_array_equal(K1[off], K0[off])


def _matrix_with_jitter(gp):
    """The matrix the model's pre-flight check factorises, with its jitter, from the model's
    cached compiled function."""
    if isinstance(gp, HeteroscedasticGPRegression):
        return lambda values: gp._grams(values, np.zeros((0, 1)))[5]
    if isinstance(gp, GPRegression):
        return lambda values: gp.marginal.train(values)[1]
    return lambda values: gp._train(values)[0]


# ------------------------------------- the user's additions to gp.model survive a jitter increase
def _extend(gp, amplitude: str):
    """Add a derived quantity, the jitter the model uses (a deterministic read by every
    sampler), and a potential pinning the amplitude at 1.5 to ``gp.model``."""
    eta = gp.model[amplitude]
    with gp.model:
        pm.Deterministic("eta_sq", pt.square(eta))
        pm.Deterministic("jitter_used", gp.jitter_tensor * 1.0)
        pm.Potential("pin_eta", -0.5 * ((pt.log(eta) - np.log(1.5)) / 0.01) ** 2)
    return gp.model


def _raising_regression():
    return GPRegression(*_duplicated(), "expquad", noise=1e-12, jitter=0.0)


def _raising_classifier():
    X = np.r_[np.linspace(-2, 2, 30), np.linspace(-2, 2, 30)[:5]]
    ls = {"ls": lambda n: pm.LogNormal(n, np.float64(1.0), np.float64(0.1))}
    return GPClassifier(X, (X > 0).astype(int), "expquad", jitter=0.0, priors=ls)


def _raising_hetero():
    X = np.repeat(np.linspace(0, 1, 10), 3)  # triplicated inputs: K_g singular
    y = np.sin(3 * X) + 0.1 * np.random.default_rng(0).normal(size=X.size)
    return HeteroscedasticGPRegression(X, y, jitter=1e-16)


RAISING = {
    "GPRegression": (_raising_regression, "eta"),
    "GPClassifier": (_raising_classifier, "eta"),
    "HeteroscedasticGPRegression": (_raising_hetero, "noise_eta"),
}


@pytest.mark.filterwarnings("ignore:type-II MAP fit")  # noise 1e-12: a flat direction
@pytest.mark.parametrize("name", sorted(RAISING))
def test_user_additions_survive_a_jitter_increase_in_a_type2_fit(name):
    """The defect: the pre-flight check replaced ``gp.model`` by a rebuilt model when it raised
    the jitter, silently dropping what the user had added. Now the model is the same object,
    the additions are in it, and the fit uses them (the potential pins the amplitude)."""
    make, amplitude = RAISING[name]
    gp = make()
    model = _extend(gp, amplitude)
    choice = gp.check_jitter(random_seed=1)
    assert choice.raised and gp.jitter == choice.jitter > gp.default_jitter
    assert gp.model is model
    assert {"eta_sq", "jitter_used", "pin_eta"} <= set(gp.model.named_vars)
    if isinstance(gp, HeteroscedasticGPRegression):  # no type-II fit: the model's log density
        point = gp.model.initial_point()
        logp = gp.model.compile_logp(vars=list(gp.model.potentials), jacobian=False)
        log_eta = float(point["noise_eta_log__"])
        assert logp(point) == pytest.approx(-0.5 * ((log_eta - np.log(1.5)) / 0.01) ** 2)
        return
    fit = gp.fit_map(n_restarts=1, random_seed=1) if isinstance(gp, GPRegression) else (
        gp.fit_laplace(n_restarts=1, prior=True, random_seed=1))  # fmt: skip
    assert fit.jitter == gp.jitter and fit.jitter > fit.jitter_default
    assert float(fit.params[amplitude]) == pytest.approx(1.5, rel=0.05)  # the potential counted
    assert gp.model is model


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RAISING))
def test_user_additions_survive_a_jitter_increase_in_nuts(name):
    """NUTS after the pre-flight raised the jitter: the user's deterministics are in the
    posterior, and the jitter the sampler used is the raised one."""
    make, amplitude = RAISING[name]
    gp = make()
    model = _extend(gp, amplitude)
    kw = {"method": "nuts"} if isinstance(gp, GPClassifier) else {}
    # (the Python linker: ten steps, where compiling the C linker's took 80 s on a new machine)
    idata = gp.sample(draws=5, tune=5, chains=1, sampler="pymc", random_seed=1,
                      compile_kwargs={"mode": "FAST_COMPILE"}, **kw)  # fmt: skip
    post = idata["posterior"]
    assert gp.model is model and post.attrs["bayes_gp_jitter"] == gp.jitter
    assert post.attrs["bayes_gp_jitter"] > post.attrs["bayes_gp_jitter_default"]
    np.testing.assert_array_equal(post["jitter_used"].values, gp.jitter)
    np.testing.assert_allclose(post["eta_sq"].values, post[amplitude].values ** 2, rtol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["nutpie", "numpyro"])
def test_compiled_samplers_use_the_raised_jitter(sampler):
    """nutpie (numba) copies the shared jitter when it compiles the model and JAX (numpyro)
    replaces it by a constant: both compile at each ``sample`` call, after the pre-flight
    check, so both use the raised value, and the user's deterministics are in the posterior."""
    pytest.importorskip(sampler)
    make, amplitude = RAISING["GPRegression"]
    gp = make()
    model = _extend(gp, amplitude)
    idata = gp.sample(draws=5, tune=5, chains=1, sampler=sampler, random_seed=1)
    post = idata["posterior"]
    assert gp.model is model and post.attrs["bayes_gp_jitter"] == gp.jitter > 0.0
    np.testing.assert_array_equal(post["jitter_used"].values, gp.jitter)
    assert "eta_sq" in post


def test_every_family_defaults_to_the_named_jitter():
    """The default jitters are the two constants of ``bayes_gp.inference.jitter``: relative to
    var(y) where Gaussian noise meets the covariance, absolute on a latent GP's own scale."""
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 5, (12, 1))
    y = 3.0 * np.sin(X[:, 0]) + rng.normal(0, 0.5, 12)
    var_y = float(np.var(y))
    assert (DEFAULT_JITTER, DEFAULT_LATENT_JITTER) == (1e-10, 1e-6)
    for model in (GPRegression(X, y, "expquad"), DeepKernelRegression(X, y, hidden=(3,))):
        np.testing.assert_allclose(model.default_jitter, DEFAULT_JITTER * var_y, rtol=1e-12)
    hetero = HeteroscedasticGPRegression(X, y)
    np.testing.assert_allclose(hetero.default_jitter, DEFAULT_LATENT_JITTER, rtol=1e-12)
    np.testing.assert_allclose(hetero.jitter_f, DEFAULT_LATENT_JITTER * var_y, rtol=1e-12)
    for model in (LatentGP(X, np.round(np.exp(y / 3)), "expquad", "poisson"),
                  GPClassifier(X, (y > 0).astype(int), "expquad")):  # fmt: skip
        np.testing.assert_allclose(model.default_jitter, DEFAULT_LATENT_JITTER, rtol=1e-12)
