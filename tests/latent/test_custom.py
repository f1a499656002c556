"""The user's own likelihood (bayes_gp.latent.custom): a user-written Poisson, Bernoulli-logit
and Student-t give the built-in likelihoods' derivatives, Laplace evidence, gradient, model
density, LA-LOO and posterior; and each function it cannot take is refused with the reason."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

from bayes_gp import LatentGP
from bayes_gp.inference.compiled import nutpie_backend
from bayes_gp.latent import Bernoulli, Poisson, StudentT
from bayes_gp.latent.custom import CustomLikelihood, LogDensity
from bayes_gp.linalg import EAGER_MODE

RNG = np.random.default_rng(11)
N = 24
X = np.sort(RNG.uniform(0, 8, N))
F = np.sin(X)
Y_COUNTS = RNG.poisson(3.0 * np.exp(F)).astype(float)
Y_BIN = (RNG.uniform(size=N) < 1 / (1 + np.exp(-2 * F))).astype(float)
Y_REAL = F + 0.3 * RNG.standard_t(4, N)
Y_REAL[[3, 15]] += 3.0  # outliers: W < 0 at the mode's neighbourhood


def poisson(y, f):
    """Poisson counts, log link (the user's version of ``likelihood="poisson"``)."""
    return y * f - pt.exp(f) - pt.gammaln(y + 1)


def bernoulli_logit(y, f):
    """0/1 outcomes, logit link: :math:`y f - \\log(1 + e^f)`."""
    return y * f - pt.log1pexp(f)


def student_t(y, f, nu, sigma):
    """Student-t observations of location ``f``."""
    z = (y - f) / sigma
    return (pt.gammaln((nu + 1) / 2) - pt.gammaln(nu / 2) - 0.5 * pt.log(nu * np.pi)
            - pt.log(sigma) - (nu + 1) / 2 * pt.log1p(z**2 / nu))  # fmt: skip


SD = float(np.std(Y_REAL))
T_PRIORS = {"nu": pm.Gamma.dist(2.0, 0.1), "sigma": pm.HalfNormal.dist(SD)}

#: (name, user likelihood, built-in name, y, model options, built-in object, phi, parameters)
CASES = [
    ("poisson", LogDensity(poisson, log_concave=True), "poisson", Y_COUNTS,
     dict(mean="constant", priors={"c": pm.Normal.dist(1.0, 2.0)}), Poisson(Y_COUNTS), [],
     {"ls": 1.3, "eta": 0.8, "c": 1.0}),
    ("bernoulli", bernoulli_logit, "bernoulli", Y_BIN, {}, Bernoulli(Y_BIN), [],
     {"ls": 1.2, "eta": 1.6}),
    ("student_t", LogDensity(student_t, identity_link=True), "student_t", Y_REAL,
     dict(priors=T_PRIORS), StudentT(Y_REAL), [3.5, 0.4],
     {"ls": 1.5, "eta": 0.9, "nu": 3.5, "sigma": 0.4}),
]  # fmt: skip
IDS = [c[0] for c in CASES]


@pytest.fixture(scope="module")
def models() -> dict[str, tuple[LatentGP, LatentGP]]:
    """Per case, the model with the user's likelihood and the one with the built-in (the same
    priors), built once: each user likelihood compiles its derivatives once."""
    out = {}
    for name, user, builtin, y, opts, *_ in CASES:
        out[name] = (LatentGP(X, y, "expquad", user, **opts),
                     LatentGP(X, y, "expquad", builtin, **opts))  # fmt: skip
    return out


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_derivatives_equal_the_built_in_likelihoods(case, models):
    """The log density and its first three derivatives in f, and the parameter derivatives of
    the first three, at random latent values (a vector and a matrix of them, as the quadratures
    pass) equal the built-in closed forms."""
    builtin, phi = case[5], case[6]
    lik = models[case[0]][0].likelihood
    assert isinstance(lik, CustomLikelihood)
    f = np.random.default_rng(0).normal(0.3, 1.5, (3, N))
    for at in (f[0], f):
        for a, b in zip(lik.derivatives(at, phi), builtin.derivatives(at, phi), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
        for a, b in zip(lik.phi_derivatives(at, phi), builtin.phi_derivatives(at, phi),
                        strict=True):  # fmt: skip
            assert a.shape == (len(phi), *at.shape)
            if phi:
                np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(lik.log_density(f, phi), builtin.log_density(f, phi), rtol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_evidence_gradient_and_model_density_equal_the_built_in(case, models):
    """The Laplace evidence and its gradient at fixed hyperparameters, and the log density and
    gradient of the PyMC model that NUTS explores (priors, Jacobians, evidence) at random
    unconstrained points, agree with the built-in likelihood's to 1e-10; so do the LA-LOO terms
    of the type-II fit at those hyperparameters."""
    user, builtin = models[case[0]]
    params = case[-1]
    v1, g1 = user.log_marginal_likelihood(params, eval_gradient=True)
    v2, g2 = builtin.log_marginal_likelihood(params, eval_gradient=True)
    assert v1 == pytest.approx(v2, rel=1e-12, abs=1e-10)
    assert g1.keys() == g2.keys()
    for k in g1:
        np.testing.assert_allclose(g1[k], g2[k], rtol=1e-10, atol=1e-10)
    names = [v.name for v in builtin.model.value_vars]
    assert names == [v.name for v in user.model.value_vars]
    fu, fb = (m.model.compile_logp(mode=EAGER_MODE) for m in (user, builtin))
    du, db = (m.model.compile_dlogp(mode=EAGER_MODE) for m in (user, builtin))
    rng = np.random.default_rng(1)
    for _ in range(3):
        point = {n: rng.normal(scale=0.5) for n in names}
        assert fu(point) == pytest.approx(fb(point), rel=1e-12, abs=1e-10)
        np.testing.assert_allclose(du(point), db(point), rtol=1e-10, atol=1e-10)
    fit_u, fit_b = (m.fit_laplace(params=params) for m in (user, builtin))
    np.testing.assert_allclose(user.point_loo(fit_u)[1], builtin.point_loo(fit_b)[1], rtol=1e-10)


def test_type_ii_fits_equal_the_built_in(models):
    """The Laplace MAP fit (the package's multistart L-BFGS on the evidence and its gradient)
    and the Gaussian-KL variational fit at fixed hyperparameters of the user's Bernoulli-logit
    equal the built-in's."""
    user, builtin = models["bernoulli"]
    fu, fb = (m.fit_laplace(n_restarts=1, random_seed=0) for m in (user, builtin))
    for k in fb.params:
        np.testing.assert_allclose(fu.params[k], fb.params[k], rtol=1e-6)
    assert fu.log_marginal_likelihood == pytest.approx(fb.log_marginal_likelihood, rel=1e-9)
    params = CASES[1][-1]
    vu, vb = (m.fit_vi(method="kl", params=params) for m in (user, builtin))
    assert vu.log_marginal_likelihood == pytest.approx(vb.log_marginal_likelihood, rel=1e-10)
    np.testing.assert_allclose(vu.f_mode, vb.f_mode, rtol=1e-8, atol=1e-10)


def test_joint_latent_model_density_equals_the_built_in(models):
    """Joint latent NUTS's model (whitened latent values and hyperparameters; the user's log
    density a ``pm.Potential``) has the built-in joint model's log density and gradient at
    random points (the Student-t: its parameters are in both)."""
    for name in ("student_t",):
        user, builtin = models[name]
        mu, mb = user._latent_model(), builtin._latent_model()
        names = [v.name for v in mb.value_vars]
        assert names == [v.name for v in mu.value_vars]
        fu, fb = (m.compile_logp(mode=EAGER_MODE) for m in (mu, mb))
        du, db = (m.compile_dlogp(mode=EAGER_MODE) for m in (mu, mb))
        rng = np.random.default_rng(2)
        for _ in range(3):
            point = {k: v + rng.normal(scale=0.5, size=np.shape(v))
                     for k, v in mb.initial_point().items()}  # fmt: skip
            assert fu(point) == pytest.approx(fb(point), rel=1e-12, abs=1e-10)
            np.testing.assert_allclose(du(point), db(point), rtol=1e-10, atol=1e-10)


#: Draws (and tuning steps) per chain of the two NUTS runs.
DRAWS = 80


def test_nuts_posterior_agrees_with_the_built_in():
    """NUTS with the Laplace-integrated GP: the posterior means of ``ls`` and ``eta`` under the
    user's Poisson agree with the built-in's (different seeds) within 4 combined Monte Carlo
    standard errors; each draw carries its Laplace mode and LA-LOO terms, and a short joint
    latent run samples the user's model too."""
    import arviz as az

    user = LatentGP(X, Y_COUNTS, "expquad", poisson)
    builtin = LatentGP(X, Y_COUNTS, "expquad", "poisson", mean="zero")
    kw = dict(draws=DRAWS, tune=DRAWS, chains=2)
    iu = user.sample(method="nuts", random_seed=1, sampler="pymc", **kw)
    # the built-in on its default path (nutpie on bayes_gp's C Laplace solver: nothing compiled)
    ib = builtin.sample(method="nuts", random_seed=2, **kw)
    assert ib["posterior"].attrs["bayes_gp_nutpie_backend"] == "native"
    assert iu["posterior"]["f_mode"].shape == (2, DRAWS, N)
    assert iu["log_likelihood"]["y"].shape == (2, DRAWS, N)
    for p in ("ls", "eta"):
        su, sb = (az.summary(i, var_names=[p], round_to="none") for i in (iu, ib))
        gap = abs(float(su["mean"].iloc[0]) - float(sb["mean"].iloc[0]))
        mcse = np.hypot(float(su["mcse_mean"].iloc[0]), float(sb["mcse_mean"].iloc[0]))
        assert gap < 4 * mcse, (p, gap, mcse)
    with nutpie_backend("jax"):  # the user's density is PyTensor: JAX compiles it in seconds
        joint = user.sample(method="nuts_joint", draws=30, tune=30, chains=1, random_seed=3,
                            sampler="nutpie")  # fmt: skip
    assert joint["log_likelihood"]["y"].shape == (1, 30, N)
    assert np.all(np.isfinite(joint["log_likelihood"]["y"]))


def test_response_scale_with_the_users_mean_variance_and_draw(models):
    """With ``mean=``, ``variance=`` and ``draw=`` the user's Poisson predicts the built-in's
    response mean and variance (quadrature, to 1e-10), leaves the 94% interval of y* to the
    CDF it lacks (None), and draws replicated and prior predictive counts; the latent
    predictions equal the built-in's without any of them."""
    density = LogDensity(poisson, log_concave=True, mean=np.exp, variance=np.exp,
                         draw=lambda f, rng: rng.poisson(np.exp(f)))  # fmt: skip
    opts = CASES[0][4]
    user = LatentGP(X, Y_COUNTS, "expquad", density, **opts)
    builtin = models["poisson"][1]
    params = CASES[0][-1]
    fu, fb = user.fit_laplace(params=params), builtin.fit_laplace(params=params)
    Xn = np.linspace(0, 8, 7)
    pu, pb = user.predict(Xn, fu), builtin.predict(Xn, fb)
    np.testing.assert_allclose(pu.mean, pb.mean, rtol=1e-10)
    np.testing.assert_allclose(pu.var, pb.var, rtol=1e-10)
    np.testing.assert_allclose(pu.latent_sd, pb.latent_sd, rtol=1e-10)
    assert pu.lower is None and pu.upper is None
    lat_u = models["poisson"][0].predict_latent(Xn, fu)
    np.testing.assert_allclose(lat_u.mean, pb.latent_mean, rtol=1e-10)
    np.testing.assert_allclose(lat_u.upper - lat_u.lower, 2 * 1.8807936081512509 * pb.latent_sd,
                               rtol=1e-8)  # fmt: skip
    rep = user.replicate(fu, 4, random_seed=0)
    assert rep.shape == (4, N) and np.all(rep == np.round(rep)) and np.all(rep >= 0)
    prior = user.prior_predictive(3, random_seed=0)
    assert prior.shape == (3, N) and np.all(prior >= 0)


def test_methods_that_need_what_the_log_density_lacks_say_what_to_pass(models):
    """Without ``mean=`` / ``draw=``: predict, replicate and prior_predictive name the argument
    to pass; held-out predictive CDFs say that a log density has no CDF."""
    user = models["poisson"][0]
    fit = user.fit_laplace(params=CASES[0][-1])
    with pytest.raises(ValueError, match=r"LogDensity\(poisson, mean=\.\.\.\)"):
        user.predict(X[:3], fit)
    with pytest.raises(ValueError, match=r"LogDensity\(poisson, draw=\.\.\.\)"):
        user.replicate(fit, 2)
    with pytest.raises(ValueError, match=r"LogDensity\(poisson, draw=\.\.\.\)"):
        user.prior_predictive(2)
    with pytest.raises(ValueError, match="does not give"):
        user.held_out_predictive(X[:3], Y_COUNTS[:3], fit)


def _scipy_gammaln(y, f):
    from scipy.special import gammaln

    return y * f - pt.exp(f) - gammaln(pt.exp(f))


def _as_op_exp():
    from pytensor import wrap_py

    @wrap_py(itypes=[pt.dvector], otypes=[pt.dvector])
    def np_exp(x):
        return np.exp(x)

    return lambda y, f: y * f - np_exp(f)


#: (function or LogDensity, model options, message): each refused when the model is built.
REFUSED = [
    (3.0, {}, "must be a function fn"),
    (lambda y: y, {}, r"must take \(y, f, \*\*params\)"),
    (lambda y, f, **kw: y * f, {}, r"params=\('nu', \.\.\.\)"),
    (lambda y, f: np.float64(0.0), {}, "must return a PyTensor expression"),
    (lambda y, f: pt.sum(y * f - pt.exp(f)), {}, r"a vector of shape \(n,\).*a sum\?"),
    (lambda y, f: pt.concatenate([y * f - pt.exp(f), f[:1]]), {}, r"shape \(24,\) for 24"),
    (_scipy_gammaln, {}, "failed on PyTensor variables"),
    (_as_op_exp(), {}, "not differentiable in f"),
    (lambda y, f, v: y * f - pt.exp(f) + pt.jv(v, 1.0), {"priors": {"v": 1.5}},
     r"not differentiable in its parameter 'v'"),
    (lambda y, f: -(y**2), {}, "does not depend on f"),
    (lambda y, f: y * pt.floor(f) - pt.exp(pt.floor(f)), {}, "derivative 0 in f"),
    (lambda y, f, nu: y * f - pt.exp(f), {"priors": {"nu": 2.0}},
     "does not depend on its parameter 'nu'"),
    (lambda y, f: y * (f - f.mean()) - pt.exp(f - f.mean()), {},
     "couples observations: l of observations other than"),
    (lambda y, f: y * f - pt.exp(f) - 0.5 * (f - pt.roll(f, 1)) ** 2 + 0.5 * f**2, {},
     "couples observations"),
    (lambda y, f, s: y * f - pt.exp(f) - pt.log(s[0]), {"priors": {"s": 2.0}},
     r"depends on 's' of observation"),
    (lambda y, f: (y - y.mean()) * f - pt.exp(f), {}, "first 12 observations changes"),
    (lambda y, f: y * pt.log(f) - f, {}, "not finite at the latent prior mean"),
    (lambda y, f, nu: y * f - nu * pt.exp(f), {}, r"\['nu'\] need priors"),
    (lambda y, f, ls: y * f - ls * pt.exp(f), {"priors": {"ls": 1.0}},
     r"\['ls'\] have the names of the model's kernel"),
    (poisson, {"link": "log"}, "`link` does not apply to a user likelihood"),
    (poisson, {"exposure": np.ones(N)}, "`exposure` does not apply"),
    (poisson, {"censored": np.zeros(N)}, "`censored` does not apply"),
]  # fmt: skip


@pytest.mark.parametrize(("likelihood", "opts", "match"), REFUSED,
                         ids=[m[:24] for _, _, m in REFUSED])  # fmt: skip
def test_each_function_it_cannot_take_is_refused_with_the_reason(likelihood, opts, match):
    with pytest.raises(ValueError, match=match):
        LatentGP(X, Y_COUNTS, "expquad", likelihood, **opts)


def test_derivatives_are_safe_from_several_threads(models):
    """nutpie samples its chains in threads that call the same likelihood: two threads
    evaluating it at different points get their own derivatives (a compiled PyTensor function
    shares its input and output storage; unguarded, the second call fails with 'Multiple
    values for input' or returns the other thread's values)."""
    import threading

    lik = models["student_t"][0].likelihood
    phi = CASES[2][6]
    fs = np.random.default_rng(3).normal(size=(2, N))
    ref = [np.array(lik.derivatives(f, phi)[2]) for f in fs]
    wrong, errors = [], []

    def work(k):
        try:
            for j in range(1500):
                out = lik.derivatives(fs[k] + 1e-3 * (j % 2), phi)[2]
                if j % 2 == 0 and not np.array_equal(out, ref[k]):
                    wrong.append(k)
        except Exception as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and wrong == []
