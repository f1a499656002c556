"""A factor as a GP input, ``gp(t, region)`` (issue 40): the term's covariance is the product
:math:`k_t(t, t')\\,B_{cc'}` of the catalogue kernel and the levels' exchangeable correlation
or coregionalisation, transcribed here in NumPy; type-II fits recover the correlation of the
levels; new levels; priors by name; the engines; bad inputs refused."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pymc as pm
import pytest
from scipy import stats

from bayes_gp.formula import Model
from bayes_gp.formula.covariance import OpenExchangeable
from bayes_gp.formula.grouped import GroupedLikelihood
from bayes_gp.formula.terms import COEF_SCALE

RNG = np.random.default_rng(40)
N = 60
T = np.sort(RNG.uniform(0, 10, N))
REGION = np.tile(["a", "b", "c"], N // 3)
SITE = RNG.choice(["s1", "s2", "s3", "s4"], N)
#: the regions' curves: one shared curve, or three unrelated ones
SHARED = {r: np.sin for r in "abc"}
SEPARATE = {"a": np.sin, "b": np.cos, "c": lambda t: 1.2 * np.sin(0.5 * t + 2.0)}


def _data(curves, rng=RNG, noise=0.1) -> pd.DataFrame:
    f = np.array([curves[r](t) for t, r in zip(T, REGION, strict=True)])
    return pd.DataFrame({"t": T, "region": REGION, "site": SITE,
                         "y": f + noise * rng.standard_normal(N)})  # fmt: skip


DATA = _data(SHARED)
NEW = pd.DataFrame({"t": [0.5, 3.0, 7.7, 2.2], "region": ["a", "c", "new", "b"]})


def _se(a, b, ls, eta=1.0):
    return eta**2 * np.exp(-0.5 * (a[:, None] - b[None, :]) ** 2 / ls**2)


def _codes(labels, levels=("a", "b", "c")):
    """The design's codes: 0.. for the training levels, -1, -2, ... for new ones."""
    new: dict[str, int] = {}
    return np.array([levels.index(v) if v in levels else new.setdefault(v, -1 - len(new))
                     for v in labels])  # fmt: skip


def test_exchangeable_term_is_the_product_kernel():
    """K(X, X*) = eta^2 exp(-(t - t')^2 / 2 ls^2) (rho + (1 - rho) [c = c']), a new level rho
    with every known one; the log density is that of N(b0, K + v0 11' + sigma^2 I)."""
    m = Model("y ~ gp(t, region)", DATA)
    params = {"gp(t, region).ls": 1.3, "gp(t, region).eta": 0.8, "gp(t, region).rho": 0.6,
              "sigma": 0.2}  # fmt: skip
    assert sorted(m.hyperparameters) == sorted(params)
    values = m._values(params)
    Xn = m.design.matrix(NEW)
    Ks, kss, mean = m._term_new(values, Xn, "gp(t, region)")
    same = _codes(REGION)[:, None] == _codes(NEW["region"])[None, :]
    ref = _se(T, NEW["t"].to_numpy(), 1.3, 0.8) * (0.6 + 0.4 * same)
    np.testing.assert_allclose(Ks, ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(kss, 0.8**2, rtol=1e-12)
    np.testing.assert_allclose(mean, 0.0, atol=0)
    y = DATA["y"].to_numpy()
    K = _se(T, T, 1.3, 0.8) * (0.6 + 0.4 * (REGION[:, None] == REGION[None, :]))
    C = K + (COEF_SCALE * y.std()) ** 2 + (0.2**2 + m.jitter) * np.eye(N)
    ref_lml = stats.multivariate_normal(np.full(N, y.mean()), C).logpdf(y)
    np.testing.assert_allclose(m.log_marginal_likelihood(params), ref_lml, rtol=1e-12)
    # two new levels: correlation 1 with themselves, rho with each other
    k = OpenExchangeable(1, 3, 0.6, active_dims=[0])
    np.testing.assert_allclose(k(np.array([[-1.0], [-2.0], [0.0], [-1.0]])).eval(),
                               0.6 + 0.4 * np.array([[1, 0, 0, 1], [0, 1, 0, 0], [0, 0, 1, 0],
                                                     [1, 0, 0, 1]]), rtol=1e-15)  # fmt: skip


def test_coregion_term_is_the_product_kernel():
    """cat='coregion', rank=2: K = exp(...) B[c, c'], B = W W' + diag(kappa), the continuous
    kernel's amplitude fixed at 1 (no `eta`)."""
    m = Model("y ~ 0 + gp(t, region, cat='coregion', rank=2)", DATA)
    name = "gp(t, region)"
    assert m.hyperparameters == [f"{name}.ls", f"{name}.W", f"{name}.kappa", "sigma"]
    W = np.array([[0.9, 0.1], [0.7, -0.4], [-0.2, 0.5]])
    kappa = np.array([0.05, 0.2, 0.1])
    params = {f"{name}.ls": 1.3, f"{name}.W": W, f"{name}.kappa": kappa, "sigma": 0.2}
    B = W @ W.T + np.diag(kappa)
    known = NEW.iloc[[0, 1, 3]]
    Ks, kss, _ = m._term_new(m._values(params), m.design.matrix(known), name)
    c, cn = _codes(REGION), _codes(known["region"])
    np.testing.assert_allclose(Ks, _se(T, known["t"].to_numpy(), 1.3) * B[c][:, cn],
                               rtol=1e-12, atol=1e-14)  # fmt: skip
    np.testing.assert_allclose(kss, np.diag(B)[cn], rtol=1e-12)
    K = _se(T, T, 1.3) * B[c][:, c] + (0.2**2 + m.jitter) * np.eye(N)
    ref = stats.multivariate_normal(np.zeros(N), K).logpdf(DATA["y"])
    np.testing.assert_allclose(m.log_marginal_likelihood(params), ref, rtol=1e-12)
    assert "W Wᵀ + diag(κ)" in m.terms_table().loc[name, "covariance"]


#: the type-II fits: two starts (the prior's support point and one draw), seeded
MAP = dict(n_restarts=2, random_seed=0)


@pytest.fixture(scope="module")
def fits():
    """``{"shared": (model, fit), "separate": (model, fit)}`` of ``y ~ gp(t, region)``."""
    out = {}
    for label, curves in (("shared", SHARED), ("separate", SEPARATE)):
        m = Model("y ~ gp(t, region)", _data(curves, np.random.default_rng(1)))
        out[label] = m, m.fit("map", **MAP)
    return out


@pytest.mark.parametrize("label,low,high", [("shared", 0.8, 1.0), ("separate", 0.0, 0.35)])
def test_map_recovers_the_levels_correlation_and_every_curve(fits, label, low, high):
    """Three regions with one shared curve: rho near 1; with unrelated curves: rho near 0.
    Either way every region's curve is predicted (max error 0.25 for noise sd 0.1)."""
    curves = SHARED if label == "shared" else SEPARATE
    m, fit = fits[label]
    rho = float(fit.params["gp(t, region).rho"])
    assert low < rho < high, rho
    grid = np.linspace(0.5, 9.5, 19)
    for r in "abc":
        p = m.predict(pd.DataFrame({"t": grid, "region": r}), fit)
        assert np.max(np.abs(p.mean - curves[r](grid))) < 0.25, r


def test_a_new_level_is_exchangeable_with_the_known_ones(fits):
    """At a shared curve the new level's mean is the known levels' (rho ~ 1), with a wider
    band; under unrelated curves (rho ~ 0) it shrinks to the prior mean (the intercept's)."""
    grid = np.linspace(1, 9, 5)
    m, fit = fits["shared"]
    known = m.predict(pd.DataFrame({"t": grid, "region": "a"}), fit)
    new = m.predict(pd.DataFrame({"t": grid, "region": "zz"}), fit)
    np.testing.assert_allclose(new.mean, known.mean, atol=0.1)
    assert np.all(new.var > known.var)
    m, fit = fits["separate"]
    new = m.predict(pd.DataFrame({"t": grid, "region": "zz"}), fit)
    known = m.predict(pd.DataFrame({"t": grid, "region": "a"}), fit)
    assert np.max(np.abs(new.mean - m._loc)) < 0.5 * np.max(np.abs(known.mean - m._loc))


def test_coregion_fits_and_refuses_a_new_level():
    """cat='coregion' (rank 1): every known region's curve; no row of B for a new level."""
    co = Model("y ~ gp(t, region, cat='coregion')", DATA)
    fit = co.fit("map", **MAP)
    grid = np.linspace(1, 9, 5)
    p = co.predict(pd.DataFrame({"t": grid, "region": "b"}), fit)
    assert np.max(np.abs(p.mean - np.sin(grid))) < 0.25
    with pytest.raises(ValueError, match=r"levels of 'region' that the training data lacks.*"
                                         r"cat='exchangeable'"):  # fmt: skip
        co.predict(NEW, fit)


def test_priors_by_name():
    m = Model("y ~ gp(t, region)", DATA, priors={"gp(t, region).rho": 0.3})
    assert "gp(t, region).rho" not in m.hyperparameters
    ref = Model("y ~ gp(t, region)", DATA)
    p = {"gp(t, region).ls": 1.1, "gp(t, region).eta": 0.7, "sigma": 0.2}
    np.testing.assert_allclose(m.log_marginal_likelihood(p),
                               ref.log_marginal_likelihood({**p, "gp(t, region).rho": 0.3}),
                               rtol=1e-12)  # fmt: skip
    b = Model("y ~ gp(t, region)", DATA, priors={"gp(t, region).rho": pm.Beta.dist(8, 2)})
    rv = b.model["gp(t, region).rho"]
    np.testing.assert_allclose(pm.logp(rv, 0.7).eval(), stats.beta(8, 2).logpdf(0.7), rtol=1e-6)
    default = ref.model["gp(t, region).rho"]
    np.testing.assert_allclose(pm.logp(default, 0.7).eval(), stats.beta(2, 2).logpdf(0.7),
                               rtol=1e-10)  # fmt: skip
    with pytest.raises(ValueError, match=r"gp\(t, region\)\.rho"):
        Model("y ~ gp(t, region)", DATA, priors={"gp(t, region).rh": 0.5})
    c = Model("y ~ gp(t, region, cat='coregion')", DATA,
              priors={"gp(t, region).kappa": pm.HalfNormal.dist(1.0, shape=3)})  # fmt: skip
    assert pm.logp(c.model["gp(t, region).kappa"], np.ones(3)).eval().shape == (3,)


def test_coregion_parameters_have_named_dimensions_without_commas():
    """nutpie joins a variable's dimension names with commas and splits them again, so W
    (levels x rank) and kappa (levels) carry dimension names of their own, without the term's
    comma (its default names would be 'gp(t, region).W_dim_0'); a prior of the wrong shape
    is refused. NUTS on both (by hand, 200 draws, 2 chains): 9-19 s, too slow for this file."""
    m = Model("y ~ gp(t, region, cat='coregion', rank=2)", DATA)
    dims = m.model.named_vars_to_dims
    assert dims["gp(t, region).W"] == ("region.level", "region.level.rank2")
    assert dims["gp(t, region).kappa"] == ("region.level",)
    assert list(m.model.coords["region.level"]) == ["a", "b", "c"]
    user = Model("y ~ gp(t, region, cat='coregion')", DATA,
                 priors={"gp(t, region).kappa": pm.HalfNormal.dist(1.0, shape=3)})  # fmt: skip
    assert user.model.named_vars_to_dims["gp(t, region).kappa"] == ("region.level",)
    with pytest.raises(ValueError, match=r"kappa must have the shape \(3,\), one row per level"):
        Model("y ~ gp(t, region, cat='coregion')", DATA,
              priors={"gp(t, region).kappa": pm.HalfNormal.dist(1.0, shape=2)})  # fmt: skip


def test_a_factor_alone_is_a_random_effect():
    """gp(region) = eta^2 (rho + (1 - rho)[c = c']): at rho = 0 the random intercept
    (1 | region) with sigma = eta; C(x) codes a numeric column as a factor."""
    ex = Model("y ~ gp(region)", DATA, priors={"gp(region).rho": 0.0})
    ri = Model("y ~ (1|region)", DATA)
    np.testing.assert_allclose(ex.log_marginal_likelihood({"gp(region).eta": 0.7, "sigma": 0.3}),
                               ri.log_marginal_likelihood({"1|region.sigma": 0.7, "sigma": 0.3}),
                               rtol=1e-12)  # fmt: skip
    assert "(1 | region)" in ex.terms_table().loc["gp(region)", "covariance"]
    coded = DATA.assign(code=pd.Series(REGION).map({"a": 10, "b": 20, "c": 30}))
    m = Model("y ~ gp(t, C(code))", coded)
    assert m.term_names == ["gp(t, C(code))", "Intercept"]
    p = {"ls": 1.1, "eta": 0.7, "rho": 0.4}
    ref = Model("y ~ gp(t, region)", DATA)
    np.testing.assert_allclose(
        m.log_marginal_likelihood({**{f"gp(t, C(code)).{k}": v for k, v in p.items()},
                                   "sigma": 0.2}),
        ref.log_marginal_likelihood({**{f"gp(t, region).{k}": v for k, v in p.items()},
                                     "sigma": 0.2}), rtol=1e-12)  # fmt: skip


def test_the_grouped_engine_takes_a_factor_input():
    """gp(t, region) is a global term of the grouped engine ((1 | site)): its distinct rows are
    of (t, region), and the log density is the dense one; so is gp(t, region, by=site)."""
    f = "y ~ gp(t, region) + (1|site)"
    g, d = Model(f, DATA, structure="grouped"), Model(f, DATA, structure="dense")
    assert isinstance(g.marginal, GroupedLikelihood)
    p = {"gp(t, region).ls": 1.1, "gp(t, region).eta": 0.7, "gp(t, region).rho": 0.5,
         "1|site.sigma": 0.4, "sigma": 0.2}  # fmt: skip
    np.testing.assert_allclose(g.log_marginal_likelihood(p), d.log_marginal_likelihood(p),
                               rtol=1e-8)  # fmt: skip
    # a by= term with a factor input is a block of the grouped engine: k_t B [site = site']
    f = "y ~ gp(t, region, by=site) + (1|site)"
    g, d = Model(f, DATA, structure="grouped"), Model(f, DATA, structure="dense")
    assert isinstance(g.marginal, GroupedLikelihood)
    p = {k.replace("region)", "region, by=site)"): v for k, v in p.items()}
    np.testing.assert_allclose(g.log_marginal_likelihood(p), d.log_marginal_likelihood(p),
                               rtol=1e-8)  # fmt: skip


def test_a_latent_family_takes_a_factor_input():
    """Bernoulli: the Laplace engine shares the terms; a new level predicts a probability."""
    rng = np.random.default_rng(3)
    yes = (rng.uniform(size=N) < 1 / (1 + np.exp(-2 * np.sin(T)))).astype(float)
    m = Model("yes ~ gp(t, region)", DATA.assign(yes=yes), family="bernoulli")
    assert "gp(t, region).rho" in m.hyperparameters
    fit = m.fit("map", **MAP)
    p = m.predict(NEW, fit)
    assert np.all((p.mean > 0) & (p.mean < 1))
    assert 0 < float(fit.params["gp(t, region).rho"]) < 1


BAD = [
    ("y ~ gp(t, one)", {"one": "x"}, "the factor 'one' has one level"),
    ("y ~ gp(region, kernel='matern32')", {}, "alone has no continuous input for kernel="),
    ("y ~ gp(t, region, site)", {}, "\\['region', 'site'\\] are factors; gp\\(\\) takes one"),
    ("y ~ gp(t, cat='coregion')", {}, "all numeric; write the factor among them"),
    ("y ~ gp(t, region, cat='icm')", {}, "gp\\(cat=...\\) takes 'exchangeable' or 'coregion'"),
    ("y ~ gp(t, region, rank=2)", {}, "rank=...\\) goes with cat='coregion'"),
    ("y ~ gp(t, region, cat='coregion', rank=0)", {}, "positive whole number"),
    ("y ~ gp(t, region, approx='hsgp')", {}, "no basis for the factor input 'region'"),
    ("y ~ gp(t, region, by=region)", {}, "both an input and by="),
    ("y ~ gp(t, text)", {"text": np.tile(["1.5", "2", "3"], N // 3)},
     r"'text' holds numbers as text.*C\(text\)"),
]  # fmt: skip


@pytest.mark.parametrize("formula,extra,match", BAD, ids=[b[0] for b in BAD])
def test_bad_factor_inputs_are_refused(formula, extra, match):
    with pytest.raises(ValueError, match=match):
        Model(formula, DATA.assign(**extra))


def test_the_quasiseparable_engine_refuses_a_factor_input():
    with pytest.raises(ValueError, match=r"quasiseparable.*\['gp\(t, region\)'\] also take a "
                                         "factor input"):  # fmt: skip
        Model("y ~ gp(t, region, kernel='matern32')", DATA, structure="quasiseparable")
