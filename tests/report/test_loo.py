"""LOO scores of point-estimate fits against leave-one-out computed the long way, and the
MAP-vs-NUTS table arithmetic."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from bayes_gp import GPClassifier, GPRegression, MapFit
from bayes_gp.classification.likelihoods import average_probability
from bayes_gp.latent import Bernoulli, ep_run, laplace
from bayes_gp.report.loo import LooScore, point_loo, psis_loo, score_table


def test_regression_point_loo_is_exact_conditioning():
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0, 8, 25))
    y = np.sin(x) + 0.2 * rng.standard_normal(25)
    model = GPRegression(x, y, "expquad")
    params = {"ls": np.array(1.3), "eta": np.array(0.9), "sigma": np.array(0.25)}
    score = point_loo(model, MapFit(params=params, objective=0.0, prior=True))
    # Condition N(m, C) on all but one observation, directly (seed 000 eqs. 27-28).
    C = 0.9**2 * np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / 1.3**2)
    C += (0.25**2 + model.jitter) * np.eye(25)
    t = y - y.mean()
    expected = []
    for i in range(25):
        k = np.arange(25) != i
        w = np.linalg.solve(C[np.ix_(k, k)], C[k, i])
        expected.append(norm.logpdf(t[i], w @ t[k], np.sqrt(C[i, i] - w @ C[k, i])))
    np.testing.assert_allclose(score.pointwise, expected, rtol=1e-9, atol=1e-10)
    assert score.method.startswith("exact LOO at MAP")


@pytest.fixture(scope="module")
def classification_data():
    rng = np.random.default_rng(3)
    x = rng.uniform(-3, 3, 40)
    t = (rng.uniform(size=40) < 1 / (1 + np.exp(-2.5 * np.sin(x)))).astype(int)
    return x, t


@pytest.mark.parametrize(("link", "method"), [("logit", "laplace"), ("probit", "ep")])
def test_classifier_cavity_loo_matches_refits(classification_data, link, method):
    """The cavity LOO (LA-LOO, EP-LOO; Vehtari et al. 2016) approximates refitting the Laplace /
    EP approximation without each point at the same hyperparameters. Measured here: largest
    pointwise difference 0.019 (Laplace) and 0.060 (EP), sums within 0.05% and 1.2%."""
    x, t = classification_data
    model = GPClassifier(x, t, "expquad", link=link)
    fit = getattr(model, f"fit_{method}")(n_restarts=2, random_seed=0)
    score = point_loo(model, fit)
    K = model._train(model._values(fit.params))[0]
    y = model.y_pm
    refit = []
    for i in range(x.size):
        k = np.arange(x.size) != i
        Kk, ks = K[np.ix_(k, k)], K[k, i]
        if method == "laplace":
            res = laplace(Kk, np.zeros(k.sum()), Bernoulli(t[k] * 1.0, link=link))
            mu = res.f
            W = -Bernoulli(t[k] * 1.0, link=link).derivatives(mu)[2]
            Sigma = np.linalg.inv(np.linalg.inv(Kk) + np.diag(W))
        else:
            state = ep_run(Kk, y[k])
            mu, Sigma = state.mu, state.Sigma
        # f_i given the approximate posterior N(mu, Sigma) of the others (Gaussian conditioning)
        w = np.linalg.solve(Kk, ks)
        m = np.array([w @ mu])
        v = np.array([K[i, i] - ks @ w + w @ Sigma @ w])
        refit.append(np.log(average_probability(link, y[i] * m, v))[0])
    refit = np.array(refit)
    tol = {"laplace": 0.03, "ep": 0.1}[method]
    np.testing.assert_allclose(score.pointwise, refit, atol=tol)
    assert score.elpd == pytest.approx(refit.sum(), rel=0.02)
    assert np.all(score.pointwise < 0)


def test_point_loo_rejects_mismatched_fit(classification_data):
    x, t = classification_data
    fit = MapFit(params={"ls": 1.0, "eta": 1.0}, objective=0.0, prior=False)
    with pytest.raises(TypeError, match="point_loo needs a ClassifierFit of this model, got MapFit"):
        point_loo(GPClassifier(x, t), fit)


def test_score_table_differences_are_paired():
    a = LooScore("a", "exact", np.array([-1.0, -2.0, -0.5]))
    b = LooScore("b", "psis", np.array([-1.5, -1.0, -1.5]), p_loo=2.5, n_bad_k=1)
    table = score_table([b, a])
    assert list(table.index) == ["a", "b"]  # best first
    assert table.loc["a", "elpd"] == -3.5 and table.loc["b", "elpd"] == -4.0
    assert table.loc["a", "elpd_diff"] == 0.0 and table.loc["a", "dse"] == 0.0
    d = np.array([-0.5, 1.0, -1.0])
    assert table.loc["b", "elpd_diff"] == pytest.approx(d.sum())
    assert table.loc["b", "dse"] == pytest.approx(np.sqrt(3 * np.var(d)))
    assert table.loc["b", "se"] == pytest.approx(np.sqrt(3 * np.var(b.pointwise, ddof=1)))
    assert table.loc["b", "mlpd"] == pytest.approx(-4.0 / 3)
    assert np.isnan(table.loc["a", "p_loo"]) and table.loc["b", "p_loo"] == 2.5
    other_n = LooScore("c", "psis", np.array([-1.0, -1.0]))
    mixed = score_table([a, other_n])  # c is best; a has another n: no paired difference
    assert mixed.loc["c", "elpd_diff"] == 0.0 and np.isnan(mixed.loc["a", "elpd_diff"])
    with pytest.raises(ValueError, match="no LOO scores"):
        score_table([])


def test_psis_score_se_equals_arviz():
    """The report's LOO standard error is ArviZ's (sample variance, ddof=1), not a variant."""
    import arviz as az

    rng = np.random.default_rng(3)
    idata = az.from_dict(
        {
            "posterior": {"mu": rng.normal(size=(2, 200))},
            "log_likelihood": {"y": rng.normal(-1.0, 0.3, size=(2, 200, 12))},
        }
    )
    score, loo = psis_loo(idata, "m")
    assert score.elpd == pytest.approx(float(loo.elpd), rel=1e-12)
    assert score.se == pytest.approx(float(loo.se), rel=1e-12)
