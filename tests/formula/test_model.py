"""Formula models against exact references: the same model written as today's classes (log
density and gradient to 1e-10), the closed-form marginal likelihood of the summed covariance
(R&W eq. 2.39), and per-term predictions against NumPy transcriptions of R&W eqs. 2.25-2.26."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pymc as pm
import pytest
from scipy import stats

from bayes_gp import GPRegression, LatentGP
from bayes_gp.formula import Model
from bayes_gp.formula.terms import COEF_SCALE
from tests.helpers import PY_MODE

RNG = np.random.default_rng(11)
N = 36
T = np.sort(RNG.uniform(0, 10, N))
SITE = RNG.choice(["a", "b", "c"], N)
X1 = RNG.normal(size=N)
F = np.sin(T)
DATA = pd.DataFrame(
    {
        "t": T,
        "site": SITE,
        "x1": X1,
        "y": F
        + 0.5 * X1
        + pd.Series(SITE).map({"a": -1.0, "b": 0.5, "c": 1.0}).to_numpy()
        + 0.2 * RNG.standard_normal(N),
        "counts": RNG.poisson(3.0 * np.exp(0.5 * F)).astype(float),
        "trials": RNG.integers(5, 12, N).astype(float),
        "yes": (RNG.uniform(size=N) < 1 / (1 + np.exp(-2 * F))).astype(float),
        "y_out": F + 0.3 * RNG.standard_normal(N),
        "exposure": RNG.uniform(0.5, 2.0, N),
    }
)
DATA["succ"] = RNG.binomial(DATA["trials"].astype(int), 1 / (1 + np.exp(-F))).astype(float)
DATA.loc[[4, 17], "y_out"] += 4.0
_RNG2 = np.random.default_rng(12)  # the newer families' responses, without moving RNG's draws
DATA["prop"] = _RNG2.beta(12 / (1 + np.exp(-F)), 12 / (1 + np.exp(F)))
_GRADES = ["low", "mid", "high", "top"]  # an ordered Categorical response (family='ordinal')
DATA["grade"] = pd.Categorical(
    np.array(_GRADES)[np.searchsorted([-0.8, 0.0, 0.8], F + 0.5 * _RNG2.logistic(size=N))],
    categories=_GRADES, ordered=True,
)  # fmt: skip


def _logp_and_grad(model: pm.Model, point: dict[str, float]):
    """The model's log density and gradient at ``point`` (by variable name, on the
    variables' own scale), in the order of ``point``: one function for both, on PyTensor's
    Python linker (``PY_MODE``: a value check needs no numba compilation, which cost 10-120 s
    per model on a fresh HOME)."""
    ip = model.initial_point()
    values = {}
    for rv in model.free_RVs:
        vv = model.rvs_to_values[rv]
        tr = model.rvs_to_transforms[rv]
        x = np.asarray(point[rv.name], float)
        values[vv.name] = tr.forward(x).eval() if tr is not None else x
    assert set(values) == set(ip)
    logp, dlogp = model.compile_fn([model.logp(), model.dlogp()], mode=PY_MODE)(values)
    return logp, dlogp


def test_a_gp_term_alone_is_gpregression_log_density_and_gradient():
    formula = Model("y ~ 0 + gp(t)", DATA)
    cls = GPRegression(T, DATA["y"].to_numpy(), "expquad", mean="zero")
    point = {"ls": 1.3, "eta": 0.9, "sigma": 0.25}
    fp = {"gp(t).ls": 1.3, "gp(t).eta": 0.9, "sigma": 0.25}
    assert sorted(formula.hyperparameters) == sorted(fp)
    lp_f, g_f = _logp_and_grad(formula.model, fp)
    lp_c, g_c = _logp_and_grad(cls.model, point)
    np.testing.assert_allclose(lp_f, lp_c, rtol=1e-10)
    # gradients in the order of the value variables: ls, eta, sigma in both
    np.testing.assert_allclose(g_f, g_c, rtol=1e-10, atol=1e-12)
    assert formula.jitter == cls.jitter


def test_summed_covariance_marginal_likelihood_is_the_closed_form():
    """y ~ N(H b, eta^2 K_SE + s_site^2 [g = g'] + H B H^T + sigma^2 I): R&W eq. 2.39."""
    m = Model("y ~ x1 + gp(t) + (1|site)", DATA)
    params = {"gp(t).ls": 1.1, "gp(t).eta": 0.8, "1|site.sigma": 0.7, "sigma": 0.3}
    y = DATA["y"].to_numpy()
    s_y = y.std()
    K = 0.8**2 * np.exp(-0.5 * (T[:, None] - T[None, :]) ** 2 / 1.1**2)
    K += 0.7**2 * (SITE[:, None] == SITE[None, :])
    H = np.column_stack([np.ones(N), X1])
    B = np.diag([(COEF_SCALE * s_y) ** 2, (COEF_SCALE * s_y / X1.std()) ** 2])
    b = np.array([y.mean(), 0.0])
    C = K + H @ B @ H.T + (0.3**2 + m.jitter) * np.eye(N)
    ref = stats.multivariate_normal(H @ b, C).logpdf(y)
    np.testing.assert_allclose(m.log_marginal_likelihood(params), ref, rtol=1e-10)
    # a Normal prior on a coefficient replaces its default; a number fixes it
    m2 = Model("y ~ x1 + gp(t) + (1|site)", DATA,
               priors={"x1": pm.Normal.dist(0.4, 0.1), "Intercept": 0.2})  # fmt: skip
    H2, b2, B2 = X1[:, None], np.array([0.4]), np.array([[0.01]])
    C2 = K + H2 @ B2 @ H2.T + (0.3**2 + m2.jitter) * np.eye(N)
    ref2 = stats.multivariate_normal(0.2 + H2 @ b2, C2).logpdf(y)
    np.testing.assert_allclose(m2.log_marginal_likelihood(params), ref2, rtol=1e-10)


LATENT_CASES = [
    ("poisson", "counts ~ 0 + gp(t)", dict(y=DATA["counts"])),
    ("negative_binomial", "counts ~ 0 + gp(t)", dict(y=DATA["counts"])),
    ("bernoulli", "yes ~ 0 + gp(t)", dict(y=DATA["yes"])),
    ("binomial", "p(succ, trials) ~ 0 + gp(t)",
     dict(y=DATA["succ"], trials=DATA["trials"].to_numpy())),
    ("student_t", "y_out ~ 0 + gp(t)", dict(y=DATA["y_out"])),
    ("beta", "prop ~ 0 + gp(t)", dict(y=DATA["prop"])),
    # gamma and zero_inflated_poisson take the same path (FAMILY_PARAMS, the log link):
    # tests/latent checks their likelihoods, the response checks are in test_errors.py
    ("zero_inflated_negative_binomial", "counts ~ 0 + gp(t)", dict(y=DATA["counts"])),
    # the ordinal family drops the formula's intercept (not identified with the cut-points)
    ("ordinal", "grade ~ gp(t)", dict(y=DATA["grade"].cat.codes.astype(float))),
]  # fmt: skip


@pytest.mark.parametrize("family,formula,kwargs", LATENT_CASES, ids=[c[0] for c in LATENT_CASES])
def test_latent_families_are_latentgp_log_density_and_gradient(family, formula, kwargs):
    """The Laplace-integrated log density (the evidence NUTS samples) and its gradient."""
    fm = Model(formula, DATA, family=family)
    cls = LatentGP(T, kwargs.pop("y").to_numpy(), "expquad", family, mean="zero", **kwargs)
    extra = {"negative_binomial": {"dispersion": 4.0},
             "student_t": {"sigma": 0.4, "nu": 3.5},
             "beta": {"precision": 12.0},
             "zero_inflated_negative_binomial": {"dispersion": 4.0, "zero_inflation": 0.2},
             "ordinal": {"cutpoints": np.array([-0.9, 0.1, 1.2])},
             }.get(family, {})  # fmt: skip
    point = {"ls": 1.4, "eta": 0.9, **extra}
    fpoint = {"gp(t).ls": 1.4, "gp(t).eta": 0.9, **extra}
    lp_f, g_f = _logp_and_grad(fm.model, fpoint)
    lp_c, g_c = _logp_and_grad(cls.model, point)
    np.testing.assert_allclose(lp_f, lp_c, rtol=1e-10)
    np.testing.assert_allclose(g_f, g_c, rtol=1e-8, atol=1e-10)


def test_a_beta_family_fit_recovers_its_precision_and_predicts_proportions():
    """``prop ~ gp(t)`` with family='beta' (simulated with precision 12): the MAP fit's
    precision near 12 and every predicted bound of a proportion inside (0, 1)."""
    m = Model("prop ~ gp(t)", DATA, family="beta")
    fit = m.fit("map", random_seed=1)
    assert 7.0 < float(fit.params["precision"]) < 20.0  # measured 13.6
    p = m.predict(DATA.iloc[:5], fit)
    assert np.all((0 < p.lower) & (p.lower < p.mean) & (p.mean < p.upper) & (p.upper < 1))


def test_an_offset_is_the_exposure_of_a_poisson_model():
    fm = Model("counts ~ 0 + gp(t) + offset(log(exposure))", DATA, family="poisson")
    cls = LatentGP(T, DATA["counts"].to_numpy(), "expquad", "poisson", mean="zero",
                   exposure=DATA["exposure"].to_numpy())  # fmt: skip
    lp_f, g_f = _logp_and_grad(fm.model, {"gp(t).ls": 1.2, "gp(t).eta": 0.7})
    lp_c, g_c = _logp_and_grad(cls.model, {"ls": 1.2, "eta": 0.7})
    np.testing.assert_allclose(lp_f, lp_c, rtol=1e-10)
    np.testing.assert_allclose(g_f, g_c, rtol=1e-8, atol=1e-10)


def test_per_term_predictions_are_the_closed_form_and_add_up():
    """R&W eqs. 2.25-2.26 with each term's cross-covariance; the term means add up to the
    latent mean, and a new group gets the prior of its effect."""
    m = Model("y ~ x1 + gp(t) + (1|site)", DATA)
    params = {"gp(t).ls": 1.1, "gp(t).eta": 0.8, "1|site.sigma": 0.7, "sigma": 0.3}
    fit = m.fit("map")
    fit = type(fit)(**{**fit.__dict__, "params": {k: np.asarray(v) for k, v in params.items()}})
    new = pd.DataFrame({"t": [1.0, 5.5, 9.0], "site": ["a", "c", "new"], "x1": [0.0, 1.0, -1.0]})
    terms = m.predict(new, fit, terms=m.term_names)
    total = m.predict(new, fit)
    np.testing.assert_allclose(sum(p.mean for p in terms.values()), total.mean, rtol=1e-9)
    # NumPy reference for gp(t) and 1|site
    y = DATA["y"].to_numpy()
    s_y = y.std()
    Kt = lambda a, b: 0.8**2 * np.exp(-0.5 * (a[:, None] - b[None, :]) ** 2 / 1.1**2)  # noqa: E731
    Kg = lambda a, b: 0.7**2 * (a[:, None] == b[None, :])  # noqa: E731
    H = np.column_stack([np.ones(N), X1])
    B = np.diag([(COEF_SCALE * s_y) ** 2, (COEF_SCALE * s_y / X1.std()) ** 2])
    C = Kt(T, T) + Kg(SITE, SITE) + H @ B @ H.T + (0.3**2 + m.jitter) * np.eye(N)
    r = np.linalg.solve(C, y - y.mean())
    for name, Ks in (("gp(t)", Kt(T, new["t"].to_numpy())),
                     ("1|site", Kg(SITE, new["site"].to_numpy()))):  # fmt: skip
        kss = np.diag(Kt(new["t"].to_numpy(), new["t"].to_numpy())) if name == "gp(t)" else (
            np.full(3, 0.7**2))  # fmt: skip
        mean = Ks.T @ r
        var = kss - np.sum(Ks * np.linalg.solve(C, Ks), axis=0)
        np.testing.assert_allclose(terms[name].mean, mean, rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(terms[name].var, var, rtol=1e-8, atol=1e-12)
    # a tuple of terms: the posterior of their sum (cross-covariances add; the bands do not)
    both = m.predict(new, fit, terms=[("gp(t)", "1|site")])["gp(t) + 1|site"]
    Ks = Kt(T, new["t"].to_numpy()) + Kg(SITE, new["site"].to_numpy())
    kss = np.diag(Kt(new["t"].to_numpy(), new["t"].to_numpy())) + 0.7**2
    np.testing.assert_allclose(both.mean, terms["gp(t)"].mean + terms["1|site"].mean, rtol=1e-9)
    np.testing.assert_allclose(both.var, kss - np.sum(Ks * np.linalg.solve(C, Ks), axis=0),
                               rtol=1e-8)  # fmt: skip
    # known groups: the two terms' posteriors are anti-correlated (they share the data); the
    # new group's effect is independent of the curve
    added = terms["gp(t)"].var + terms["1|site"].var
    assert np.all(both.var[:2] < added[:2])
    np.testing.assert_allclose(both.var[2], added[2], rtol=1e-9)
    # the new group: no information from the data, the prior N(0, sigma_site^2)
    assert terms["1|site"].mean[2] == 0.0
    np.testing.assert_allclose(terms["1|site"].var[2], 0.7**2, rtol=1e-12)


def test_latent_per_term_predictions_add_up_to_the_laplace_latent_mean():
    m = Model("counts ~ gp(t) + (1|site)", DATA, family="poisson")
    fit = m.fit("map")
    new = pd.DataFrame({"t": [2.0, 7.0], "site": ["b", "zz"]})
    terms = m.predict(new, fit, terms=m.term_names)
    total = m.predict(new, fit)
    np.testing.assert_allclose(sum(p.mean for p in terms.values()), total.latent_mean, rtol=1e-8)
    assert terms["1|site"].mean[1] == 0.0
    np.testing.assert_allclose(
        terms["1|site"].var[1], float(fit.params["1|site.sigma"]) ** 2, rtol=1e-10
    )


def test_describe_names_the_engine_and_every_term():
    m = Model("y ~ x1 + gp(t, kernel='matern32') + (1|site)", DATA)
    rows = dict(m.describe())
    assert "exact marginal likelihood" in rows["engine"]
    assert "NUTS sees 4 hyperparameters" in rows["engine"]
    assert rows["term gp(t)"].startswith("matern32 on (t)")
    assert set(m.terms_table().index) == {"gp(t)", "1|site", "Intercept", "x1"}
    lat = Model("counts ~ gp(t)", DATA, family="poisson")
    assert "Laplace inside NUTS" in dict(lat.describe())["engine"]
    assert m.prior_names == ["gp(t).ls", "gp(t).eta", "1|site.sigma", "Intercept", "x1",
                             "sigma"]  # fmt: skip


def test_by_gives_one_gp_per_level_with_shared_hyperparameters():
    m = Model("y ~ 0 + gp(t, by=site)", DATA)
    params = {"gp(t, by=site).ls": 1.1, "gp(t, by=site).eta": 0.8, "sigma": 0.3}
    K = 0.8**2 * np.exp(-0.5 * (T[:, None] - T[None, :]) ** 2 / 1.1**2)
    K *= SITE[:, None] == SITE[None, :]
    C = K + (0.3**2 + m.jitter) * np.eye(N)
    ref = stats.multivariate_normal(np.zeros(N), C).logpdf(DATA["y"].to_numpy())
    np.testing.assert_allclose(m.log_marginal_likelihood(params), ref, rtol=1e-10)


def test_ard_and_kernel_objects():
    from bayes_gp import kernels as K

    d = DATA.assign(x2=RNG.normal(size=N))
    m = Model("y ~ gp(t, x2, ard=True)", d)
    assert m.model["gp(t, x2).ls"].type.shape == (2,)
    # one length-scale per input, on a dimension named without the term's comma (nutpie splits
    # dimension names at commas: its default 'gp(t, x2).ls_dim_0' broke every ARD term's run)
    assert m.model.named_vars_to_dims["gp(t, x2).ls"] == ("gp(t; x2).input",)
    assert list(m.model.coords["gp(t; x2).input"]) == ["t", "x2"]
    k = K.Matern32(1, ls=pm.Gamma.dist(2.0, 1.0))
    mk = Model("y ~ gp(t, kernel=k)", DATA, kernels={"k": 1.5 * k})
    assert "gp(t).ls" in mk.hyperparameters and "gp(t).eta" not in mk.hyperparameters


def test_a_one_column_model_takes_the_quasiseparable_engine():
    """y ~ gp(t, kernel='matern32'): the intercept is a constant kernel, not a column, so the
    model stays 1-D and the O(n) state-space likelihood applies; it equals the dense one."""
    formula = "y ~ gp(t, kernel='matern32')"
    qs = Model(formula, DATA, structure="quasiseparable")
    dense = Model(formula, DATA, structure="dense")
    assert qs.quasiseparable and not dense.quasiseparable
    assert "O(n)" in dict(qs.describe())["engine"]
    params = {"gp(t).ls": 1.3, "gp(t).eta": 0.9, "sigma": 0.3}
    np.testing.assert_allclose(
        qs.log_marginal_likelihood(params), dense.log_marginal_likelihood(params), rtol=1e-9
    )
    fit = qs.fit("map")
    new = pd.DataFrame({"t": [0.5, 4.0, 11.0]})
    a = qs.predict(new, fit, terms=["gp(t)", "Intercept"])
    b = dense.predict(new, fit, terms=["gp(t)", "Intercept"])
    for t in a:
        np.testing.assert_allclose(a[t].mean, b[t].mean, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(a[t].var, b[t].var, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(
        a["gp(t)"].mean + a["Intercept"].mean, qs.predict(new, fit).mean, rtol=1e-7
    )


HIER_NAMES = {"f0_ls": "gp(t).ls", "f0_eta": "gp(t).eta", "ls": "gp(t, by=site).ls",
              "eta": "gp(t, by=site).eta", "intercept_sd": "1|site.sigma", "sigma": "sigma"}  # fmt: skip


@pytest.mark.parametrize("family", ["gaussian", "poisson"])
def test_a_shared_and_a_per_group_gp_are_the_hierarchical_model(family):
    """HierarchicalGP(shared=True, pooling='shared', random_intercept=True) is
    y ~ 0 + gp(t) + gp(t, by=site) + (1|site) + offset(its fixed mean): log marginal likelihood
    (Laplace evidence for Poisson) and gradient equal to 1e-10."""
    from bayes_gp import hierarchical_gp

    y = "y" if family == "gaussian" else "counts"
    h = hierarchical_gp(DATA, "t", y, "site", "expquad", shared=True, pooling="shared",
                        random_intercept=True, likelihood=family)  # fmt: skip
    d = DATA.assign(m0=h.scale.y_mean)  # the hierarchical model's fixed mean
    # HierarchicalGP adds its jitter to K0 and to each group's block: twice on the diagonal
    jitter = {"jitter": 2e-10} if family == "gaussian" else {}
    m = Model(f"{y} ~ 0 + gp(t) + gp(t, by=site) + (1|site) + offset(m0)", d, family, **jitter)
    hp = {"f0_ls": 1.2, "f0_eta": 0.7, "ls": 0.9, "eta": 0.5, "intercept_sd": 0.8}
    if family == "gaussian":
        hp["sigma"] = 0.3
    lh, gh = h.log_marginal_likelihood(hp, eval_gradient=True)
    lm, gm = m.log_marginal_likelihood({HIER_NAMES[k]: v for k, v in hp.items()},
                                       eval_gradient=True)  # fmt: skip
    np.testing.assert_allclose(lm, lh, rtol=1e-10)
    for k in hp:
        np.testing.assert_allclose(gm[HIER_NAMES[k]], gh[k], rtol=1e-7, atol=1e-10)


def test_categorical_is_the_multiclass_classifier():
    """species ~ 0 + gp(x1, x2), family="categorical" is MulticlassGPClassifier(X, y): the
    Laplace-integrated log density and gradient equal; probabilities through the formula."""
    from bayes_gp import MulticlassGPClassifier

    rng = np.random.default_rng(5)
    d = pd.DataFrame({"x1": rng.normal(size=30), "x2": rng.normal(size=30)})
    d["species"] = np.where(d.x1 > 0.5, "a", np.where(d.x2 > 0, "b", "c"))
    fm = Model("species ~ 0 + gp(x1, x2)", d, family="categorical")
    cls = MulticlassGPClassifier(d[["x1", "x2"]], d["species"], "expquad")
    lp_f, g_f = _logp_and_grad(fm.model, {"gp(x1, x2).ls": 1.1, "gp(x1, x2).eta": 1.5})
    lp_c, g_c = _logp_and_grad(cls.model, {"ls": 1.1, "eta": 1.5})
    np.testing.assert_allclose(lp_f, lp_c, rtol=1e-10)
    np.testing.assert_allclose(g_f, g_c, rtol=1e-8, atol=1e-10)
    assert "softmax over 3 latent functions" in dict(fm.describe())["engine"]
    fit = fm.fit("map")
    new = pd.DataFrame({"x1": [2.0, -1.0], "x2": [0.0, 2.0]})
    p = fm.predict_proba(new, fit)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    assert list(fm.predict(new, fit)) == ["a", "b"]
    with pytest.raises(ValueError, match="per-term predictions of a categorical model"):
        fm.predict(new, fit, terms=["gp(x1, x2)"])
