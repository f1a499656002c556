"""The exact dense marginal likelihood as one strategy object beside the compact and the
approximate ones (regression.exact.ExactLikelihood): chosen once, asked everything."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from bayes_gp import GPRegression
from bayes_gp.solvers.compact import CompactLikelihood
from bayes_gp.solvers.exact import ExactLikelihood
from bayes_gp.solvers.hsgp import HSGPLikelihood

rng = np.random.default_rng(7)
X = np.sort(rng.uniform(0, 6, 20))
Y = np.sin(X) + 0.2 * rng.standard_normal(20)
P = {"ls": 1.1, "eta": 0.9, "sigma": 0.3}


def _k(a, b):
    return P["eta"] ** 2 * np.exp(-0.5 * (a[:, None] - b[None, :]) ** 2 / P["ls"] ** 2)


def test_the_model_chooses_its_likelihood_once():
    exact = GPRegression(X, Y, "expquad")
    assert isinstance(exact.marginal, ExactLikelihood) and exact.approximation is None
    assert exact.marginal.exact and exact.marginal.dense
    compact = GPRegression(X, Y, "pp2")
    assert isinstance(compact.marginal, CompactLikelihood) and compact.approximation is None
    assert compact.marginal.exact and not compact.marginal.dense
    hsgp = GPRegression(X, Y, "expquad", approx="hsgp")
    assert isinstance(hsgp.marginal, HSGPLikelihood) and hsgp.approximation is hsgp.marginal
    assert not hsgp.marginal.exact


def test_exact_likelihood_answers_with_the_closed_forms():
    """Log marginal likelihood (R&W 2.30), predictions (R&W 2.25-2.26) and LOO densities
    (R&W 5.10-5.12) against NumPy, the LOO against refits without each point."""
    gp = GPRegression(X, Y, "expquad", mean="zero")
    lik, values = gp.marginal, gp._values(P)
    C = _k(X, X) + (P["sigma"] ** 2 + gp.jitter) * np.eye(20)
    L = np.linalg.cholesky(C)
    alpha = np.linalg.solve(C, Y)
    lml = -0.5 * Y @ alpha - np.log(np.diag(L)).sum() - 10 * np.log(2 * np.pi)
    assert lik.log_marginal_likelihood(values) == pytest.approx(lml, rel=1e-12)
    Xn = np.array([0.5, 3.3, 7.0])
    jitters: list = []
    mean, var, cov = lik.predict(values, Xn[:, None], False, True, jitters)
    Ks = _k(X, Xn)
    np.testing.assert_allclose(mean, Ks.T @ alpha, rtol=1e-10)
    ref = _k(Xn, Xn) - Ks.T @ np.linalg.solve(C, Ks) + P["sigma"] ** 2 * np.eye(3)
    np.testing.assert_allclose(cov, ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(var, np.diag(ref), rtol=1e-10)
    assert jitters == [0.0]
    refit = []
    for i in range(20):
        k = np.arange(20) != i
        a = np.linalg.solve(C[np.ix_(k, k)], C[k, i])
        refit.append(norm.logpdf(Y[i], a @ Y[k], np.sqrt(C[i, i] - C[k, i] @ a)))
    np.testing.assert_allclose(lik.loo(values), refit, rtol=1e-9)


def test_each_draw_is_conditioned_once(monkeypatch):
    """Predictions, log likelihoods and LOO at the same hyperparameters factorise C once; the
    cache is bounded, and a new jitter is a new factorisation."""
    import bayes_gp.solvers.exact as exact

    gp = GPRegression(X, Y, "expquad")
    lik = gp.marginal
    calls = []
    train = lik.train
    monkeypatch.setattr(lik, "train", lambda values: calls.append(1) or train(values))
    values = gp._values(P)
    first = lik.predict(values, X[:3, None], True, False)
    again = lik.predict(values, X[:3, None], True, False)
    lik.loo(values), lik.log_marginal_likelihood(values)
    assert len(calls) == 1
    np.testing.assert_array_equal(first[0], again[0])
    gp.set_jitter(gp.jitter * 10)  # the jitter is part of the key
    lik.log_marginal_likelihood(values)
    assert len(calls) == 2
    # bounded: the least recently used goes first
    monkeypatch.setattr(exact, "FACTOR_CACHE_BYTES", 3 * 8 * 20**2)
    small = GPRegression(X, Y, "expquad").marginal
    draws = [gp._values({**P, "ls": s}) for s in (1.0, 2.0, 3.0, 4.0)]
    values = [small.log_marginal_likelihood(v) for v in draws]
    assert len(small._factors) == 3
    # the evicted first draw is factorised again, to the same value
    assert small.log_marginal_likelihood(draws[0]) == values[0]


def test_the_loo_pass_in_threads_equals_the_sequential_one():
    """From LOO_THREADS_MIN_N observations the per-draw leave-one-out pass runs in two threads
    (the compiled functions behind it are locked): the same numbers as one thread, draw by
    draw, in place."""
    import os

    import xarray as xr

    from bayes_gp.inference.nuts import add_log_likelihood
    from bayes_gp.solvers.exact import LOO_THREADS_MIN_N

    rng = np.random.default_rng(1)
    n = LOO_THREADS_MIN_N
    x = np.sort(rng.uniform(0, 10, n))
    gp = GPRegression(x, np.sin(x) + 0.3 * rng.standard_normal(n), "expquad")
    assert gp.marginal.loo_threads == min(2, os.cpu_count() or 1)
    draws = {name: rng.uniform(0.5, 1.5, (2, 4)) for name in gp.hyperparameters}
    out = {}
    for threads in (1, 2):
        idata = xr.DataTree.from_dict(
            {"posterior": xr.Dataset({k: (("chain", "draw"), v) for k, v in draws.items()},
                                     coords={"chain": [0, 1], "draw": np.arange(4)})}
        )
        gp.marginal._factors.clear()
        add_log_likelihood(idata, gp.hyperparameters, gp._pointwise_loo, threads=threads)
        out[threads] = np.asarray(idata["log_likelihood"]["y"])
    np.testing.assert_array_equal(out[1], out[2])
    first = gp._pointwise_loo([np.asarray(draws[k][1, 2]) for k in gp.hyperparameters])
    np.testing.assert_allclose(out[2][1, 2], first, rtol=1e-12)


def _posterior(draws: dict[str, np.ndarray]):
    import xarray as xr

    chains, n_draw = next(iter(draws.values())).shape[:2]
    data = {k: (("chain", "draw", *(f"{k}_dim_{i}" for i in range(v.ndim - 2))), v)
            for k, v in draws.items()}  # fmt: skip
    coords = {"chain": np.arange(chains), "draw": np.arange(n_draw)}
    return xr.DataTree.from_dict({"posterior": xr.Dataset(data, coords=coords)})


@pytest.mark.parametrize(
    "kernel, kwargs",
    [
        ("expquad", {"mean": "zero"}),
        ("matern52 + periodic", {}),  # a constant mean: one more hyperparameter
        ("matern32", {"ard": True}),  # vector length-scales
        ("expquad", {"noise": 0.1 + 0.05 * np.arange(20) / 20, "learn_noise": True}),  # known + learned
    ],
)
def test_the_loo_pass_over_blocks_of_draws_equals_the_draw_by_draw_one(kernel, kwargs, monkeypatch):
    """ExactLikelihood.loo_draws builds C for a block of draws from the vectorised training graph
    and gives every draw's leave-one-out terms as the per-draw pass does, to rounding (the
    compiled dpotrf against NumPy's cholesky; blocks smaller than the draws, so the last block
    is a partial one), and keeps their factorisations for the predictions."""
    import bayes_gp.solvers.exact as exact
    from bayes_gp.inference.nuts import add_log_likelihood

    rng = np.random.default_rng(3)
    x = np.column_stack([X, rng.uniform(0, 3, 20)]) if kwargs.get("ard") else X
    gp = GPRegression(x, Y, kernel, **kwargs)
    draws = {}
    for rv in gp.model.free_RVs:
        shape = tuple(int(s) for s in rv.shape.eval())
        draws[rv.name] = rng.uniform(0.6, 1.6, (2, 5, *shape))
    monkeypatch.setattr(exact, "LOO_BATCH_BYTES", 3 * 8 * 20**2)  # blocks of 3 draws
    batched = add_log_likelihood(_posterior(draws), gp.hyperparameters, gp._pointwise_loo,
                                 batch=gp.marginal.loo_draws)  # fmt: skip
    assert gp.marginal._fns.get("train_batched") is not None  # the batched path ran
    # every draw's factorisation is kept for the predictions that follow: no new C
    assert len(gp.marginal._factors) == 10
    calls = []
    train = gp.marginal.train
    monkeypatch.setattr(gp.marginal, "train", lambda values: calls.append(1) or train(values))
    one = add_log_likelihood(_posterior(draws), gp.hyperparameters, gp._pointwise_loo)
    assert calls == []
    gp.marginal._factors.clear()  # and draw by draw from scratch
    fresh = add_log_likelihood(_posterior(draws), gp.hyperparameters, gp._pointwise_loo)
    assert len(calls) == 10
    got, ref, ref2 = (np.asarray(t["log_likelihood"]["y"]) for t in (batched, one, fresh))
    assert got.shape == (2, 5, 20)
    np.testing.assert_allclose(got, ref, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(got, ref2, rtol=1e-11, atol=1e-12)


def test_the_compiled_loo_pass_hands_the_draws_it_cannot_answer_to_the_per_draw_one(monkeypatch):
    """A draw the compiled block pass marks not ok (not positive definite, non-finite terms)
    gets the per-draw pass's terms (its jitter retry); the factorisation cache ends holding the
    last draws, as many as it keeps, as keeping every draw's in order would leave it."""
    import bayes_gp.solvers._native_linalg as native
    import bayes_gp.solvers.exact as exact
    from bayes_gp.inference.nuts import add_log_likelihood

    rng = np.random.default_rng(11)
    gp = GPRegression(X, Y, "expquad")
    draws = {rv.name: rng.uniform(0.6, 1.6, (2, 4)) for rv in gp.model.free_RVs}
    compiled = native.loo_terms

    def refuse_third(C, alpha):
        out, ok = compiled(C, alpha)
        if ok.shape[0] == 3:  # the first block: draw 2 refused, its row garbage
            ok[2], out[2] = False, np.nan
        return out, ok

    monkeypatch.setattr(native, "loo_terms", refuse_third)
    monkeypatch.setattr(exact, "LOO_BATCH_BYTES", 3 * 8 * 20**2)  # blocks of 3 draws
    monkeypatch.setattr(gp.marginal, "_max_factors", 3)
    idata = add_log_likelihood(_posterior(draws), gp.hyperparameters, gp._pointwise_loo,
                               batch=gp.marginal.loo_draws)  # fmt: skip
    got = np.asarray(idata["log_likelihood"]["y"]).reshape(8, 20)
    assert np.isfinite(got).all()
    flat = [np.asarray(draws[k]).reshape(8) for k in gp.hyperparameters]
    kept = [gp.marginal._factor_key([a[j] for a in flat]) for j in (5, 6, 7)]
    assert list(gp.marginal._factors) == kept
    gp.marginal._factors.clear()
    for j in range(8):
        ref = gp.marginal.loo([a[j] for a in flat])
        np.testing.assert_allclose(got[j], ref, rtol=1e-11, atol=1e-12)


def test_the_loo_pass_goes_draw_by_draw_where_blocks_do_not_apply(monkeypatch):
    """From LOO_BATCH_MAX_N observations (the threads' territory), and for a kernel graph PyTensor
    cannot vectorise, loo_draws answers None and add_log_likelihood uses the per-draw pass."""
    import bayes_gp.inference.typeii as typeii
    import bayes_gp.solvers.exact as exact
    from bayes_gp.inference.nuts import add_log_likelihood

    gp = GPRegression(X, Y, "expquad")
    values = [np.full((4,), 1.0) for _ in gp.hyperparameters]
    monkeypatch.setattr(exact, "LOO_BATCH_MAX_N", 20)
    assert gp.marginal.loo_draws(values) is None
    monkeypatch.setattr(exact, "LOO_BATCH_MAX_N", 500)

    def refuse(*args, **kwargs):
        raise NotImplementedError("no batched form")

    monkeypatch.setattr("pytensor.graph.replace.vectorize_graph", refuse)
    assert typeii.batched_function_of_values(gp.marginal.rvs, lambda _: [gp.marginal._C(X[:, None])]) is None
    fresh = GPRegression(X, Y, "expquad")
    assert fresh.marginal.loo_draws(values) is None
    draws = {k: np.full((1, 2), v) for k, v in P.items()} | {"mean_c": np.zeros((1, 2))}
    draws = {k: draws[k] for k in fresh.hyperparameters}
    idata = add_log_likelihood(_posterior(draws), fresh.hyperparameters, fresh._pointwise_loo,
                               batch=fresh.marginal.loo_draws)  # fmt: skip
    ref = fresh._pointwise_loo([np.asarray(draws[k][0, 1]) for k in fresh.hyperparameters])
    np.testing.assert_array_equal(np.asarray(idata["log_likelihood"]["y"])[0, 1], ref)


@pytest.mark.parametrize("include_noise", [False, True])
def test_predictions_over_blocks_of_draws_equal_the_draw_by_draw_ones(include_noise, monkeypatch):
    """ExactLikelihood.predict_draws (K(X, X*), prior variances and means at X* of a block of
    draws from the vectorised graph, each draw's factorisation from the cache) gives every
    draw's predictive mean and variance bit for bit as predict does, and the NUTS mixture
    (GPRegression.predict) is the same with and without it; the jitters are reported per draw."""
    import bayes_gp.solvers.exact as exact

    rng = np.random.default_rng(5)
    gp = GPRegression(X, Y, "matern52 + periodic")
    draws = {rv.name: rng.uniform(0.6, 1.6, (2, 4)) for rv in gp.model.free_RVs}
    fit = _posterior(draws)
    values_list = gp._draws(fit, 500, 0)
    Xn = np.linspace(-1, 7, 11)[:, None]
    monkeypatch.setattr(exact, "LOO_BATCH_BYTES", 3 * 8 * 20 * 11)  # blocks of 3 draws
    jitters: list = []
    means, variances = gp.marginal.predict_draws(values_list, Xn, include_noise, jitters)
    assert means.shape == variances.shape == (8, 11) and jitters == [0.0] * 8
    for j, values in enumerate(values_list):
        mean, var, _ = gp.marginal.predict(values, Xn, True, include_noise)
        np.testing.assert_array_equal(means[j], mean)
        np.testing.assert_array_equal(variances[j], var)
    batched = gp.predict(Xn, fit, include_noise=include_noise)
    assert gp.marginal._fns.get("cross_batched") is not None
    monkeypatch.setattr(exact.ExactLikelihood, "predict_draws", lambda self, *a: None)
    one = gp.predict(Xn, fit, include_noise=include_noise)
    for field in ("mean", "var", "lower", "upper"):
        np.testing.assert_array_equal(getattr(batched, field), getattr(one, field))
