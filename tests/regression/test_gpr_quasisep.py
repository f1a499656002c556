"""GPRegression's ``structure=`` option (bayes_gp.solvers.structured): the O(n) quasiseparable
exact likelihood against the dense one on the same model, data and hyperparameters.

The dense GPRegression (``structure="dense"``, a LAPACK Cholesky of the n x n matrix) is the
reference: log marginal likelihood (R&W eq. 2.30), its gradient and the model's log density and
gradient, a MAP fit, predictions (R&W eqs. 2.25-2.26) and leave-one-out densities
(R&W eqs. 5.10-5.12) must agree to ~1e-8 relative. Inputs are unsorted and contain repeats.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

from bayes_gp import GPRegression
from bayes_gp import kernels as K
from bayes_gp.linalg import EAGER_MODE
from bayes_gp.solvers.compact import CompactLikelihood
from bayes_gp.solvers.exact import ExactLikelihood
from bayes_gp.solvers.hsgp import HSGPLikelihood
from bayes_gp.solvers.quasisep import QuasisepLikelihood
from bayes_gp.solvers.structured import QUASISEP_MIN_N

RTOL = 1e-8


def data(n: int, seed: int = 0):
    """Unsorted 1-D inputs with repeats (a triple and a pair), a smooth signal plus noise."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 12.0, n)
    x[11:14] = x[10]
    x[-1] = x[0]
    return x, np.sin(x) + 0.5 * np.cos(0.3 * x) + 0.2 * rng.normal(size=n)


X, Y = data(120)
CASES = {
    "matern32": {"ls": 1.3, "eta": 0.9, "sigma": 0.25},
    "matern32 + matern12": {
        "matern32_ls": 1.6,
        "matern32_eta": 0.8,
        "matern12_ls": 0.7,
        "matern12_eta": 0.3,
        "sigma": 0.2,
    },
}


def pair(kernel: str, **kw):
    qs = GPRegression(X, Y, kernel, structure="quasiseparable", **kw)
    dense = GPRegression(X, Y, kernel, structure="dense", **kw)
    assert isinstance(qs.marginal, QuasisepLikelihood) and qs.quasiseparable
    assert isinstance(dense.marginal, ExactLikelihood) and not dense.quasiseparable
    return qs, dense


# ------------------------------------------------------------------------------ the choice
def test_none_chooses_the_quasiseparable_form_from_the_crossover_on():
    x, y = data(QUASISEP_MIN_N, seed=1)
    at = GPRegression(x, y, "matern52")
    below = GPRegression(x[:-1], y[:-1], "matern52")
    assert at.quasiseparable and isinstance(at.marginal, QuasisepLikelihood)
    assert at.marginal.exact and not at.marginal.dense and at.approximation is None
    assert not below.quasiseparable and isinstance(below.marginal, ExactLikelihood)
    assert "structure='quasiseparable'" in repr(at) and "structure" not in repr(below)
    assert "quasiseparable" in dict(at.describe())["likelihood"]
    assert "quasiseparable" not in dict(below.describe())["likelihood"]
    # kernels without a state-space form, several inputs, approximations and compact support
    # keep their likelihoods
    assert isinstance(GPRegression(x, y, "expquad").marginal, ExactLikelihood)
    assert isinstance(GPRegression(x, y, "matern32 + periodic").marginal, ExactLikelihood)
    X2 = np.column_stack([x, np.cos(x)])
    assert isinstance(GPRegression(X2, y, "matern32").marginal, ExactLikelihood)
    assert isinstance(GPRegression(x, y, "matern32", approx="hsgp").marginal, HSGPLikelihood)
    assert isinstance(GPRegression(x, y, "pp1").marginal, CompactLikelihood)
    assert isinstance(GPRegression(x, y, "pp1", structure="dense").marginal, ExactLikelihood)
    assert isinstance(GPRegression(x, y, "matern32", structure="dense").marginal, ExactLikelihood)
    # sums, products with constants, exponential, kernel objects with priors, callables
    for kernel in (
        "exponential",
        "matern12 * matern32 + matern52",
        K.Matern32(1, ls=pm.Gamma.dist(2.0, 1.0)) * 2.0 + K.Matern12(1, ls=0.5),
        lambda D: pm.HalfNormal("a", 1.0) ** 2 * K.Matern52(D, ls=pm.Gamma("l", 2.0, 1.0)),
    ):
        assert GPRegression(x, y, kernel).quasiseparable, kernel


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"kernel": "expquad"}, r"'expquad'.*squared exponential.*Representable: half-integer"),
        ({"kernel": "matern32 + periodic"}, r"'matern32 \+ periodic'.*Periodic"),
        ({"kernel": "pp2"}, r"'pp2'.*PiecewisePolynomial"),
        ({"kernel": "matern32", "X": "2d"}, r"needs 1-D inputs.*got 2 input columns"),
        ({"kernel": "matern32", "approx": "hsgp"}, r"cannot be combined with `approx`"),
        ({"kernel": "matern32", "sparse": False}, r"cannot be combined with `sparse`"),
        ({"kernel": "matern32", "structure": "band"}, r"`structure` must be None or one of"),
        ({"kernel": "pp2", "structure": "dense", "sparse": True}, r"contradicts `sparse=True`"),
        ({"kernel": "matern32", "structure": "dense", "approx": "vfe"}, r"`approx`"),
    ],
)
def test_unsupported_requests_are_refused_by_name(kwargs, match):
    kwargs = {"structure": "quasiseparable", **kwargs}
    x = np.column_stack([X, X**2]) if kwargs.pop("X", None) == "2d" else X
    with pytest.raises(ValueError, match=match):
        GPRegression(x, Y, **kwargs)


# --------------------------------------------------------------- equal to the dense model
@pytest.mark.parametrize("kernel", list(CASES))
def test_likelihood_gradient_predictions_and_loo_equal_the_dense_model(kernel):
    qs, dense = pair(kernel, mean="constant")
    params = {**CASES[kernel], "c": 0.2}
    got, got_g = qs.log_marginal_likelihood(params, eval_gradient=True)
    want, want_g = dense.log_marginal_likelihood(params, eval_gradient=True)
    assert got == pytest.approx(want, rel=RTOL)
    assert qs.marginal.log_marginal_likelihood(qs._values(params)) == pytest.approx(want, rel=RTOL)
    for name in want_g:
        np.testing.assert_allclose(got_g[name], want_g[name], rtol=RTOL, err_msg=name)
    # the model's log density (priors and Jacobians included) and its gradient, as NUTS sees it
    point = {**dense.model.initial_point(), **{"c": np.array(0.2)}}
    for rv, v in params.items():
        if f"{rv}_log__" in point:
            point[f"{rv}_log__"] = np.array(np.log(v))
    for fn in ("compile_logp", "compile_dlogp"):
        np.testing.assert_allclose(
            getattr(qs.model, fn)(mode=EAGER_MODE)(point),
            getattr(dense.model, fn)(mode=EAGER_MODE)(point),
            rtol=RTOL,
        )
    # predictions: inside, outside, at training inputs (a repeated one), with and without noise
    Xn = np.array([-1.0, 0.3, 5.55, X[10], X[10], 12.5, 20.0])
    values = qs._values(params)
    for include_noise in (False, True):
        jit_q: list = []
        jit_d: list = []
        mq, vq, cq = qs.marginal.predict(values, Xn[:, None], False, include_noise, jit_q)
        md, vd, cd = dense.marginal.predict(values, Xn[:, None], False, include_noise, jit_d)
        np.testing.assert_allclose(mq, md, rtol=RTOL)
        np.testing.assert_allclose(vq, vd, rtol=RTOL)
        np.testing.assert_allclose(cq, cd, rtol=RTOL, atol=RTOL * np.max(np.abs(cd)))
        assert jit_q == jit_d == [0.0]
        pq = qs.marginal.predict(values, Xn[:, None], True, include_noise)
        np.testing.assert_allclose(pq[0], md, rtol=RTOL)
        np.testing.assert_allclose(pq[1], vd, rtol=RTOL)
        assert pq[2] is None
    # leave-one-out densities, R&W eqs. 5.10-5.12
    np.testing.assert_allclose(qs.marginal.loo(values), dense.marginal.loo(values), rtol=RTOL)


def test_map_fit_equals_the_dense_fit():
    qs, dense = pair("matern32")
    # one L-BFGS-B start each, the same start: the two paths must reach the same optimum
    fq = qs.fit_map(n_restarts=1, prior=True, random_seed=3)
    fd = dense.fit_map(n_restarts=1, prior=True, random_seed=3)
    assert fq.objective == pytest.approx(fd.objective, rel=1e-9)
    assert fq.log_marginal_likelihood == pytest.approx(fd.log_marginal_likelihood, rel=1e-8)
    for name in fd.params:  # the optimum, to the optimiser's tolerance
        np.testing.assert_allclose(fq.params[name], fd.params[name], rtol=1e-5, err_msg=name)
    assert fq.jitter == fd.jitter == qs.default_jitter
    pq = qs.predict(np.array([2.5, 13.0]), fq)
    pd = dense.predict(np.array([2.5, 13.0]), fq)  # the same hyperparameters
    np.testing.assert_allclose(pq.mean, pd.mean, rtol=RTOL)
    np.testing.assert_allclose(pq.var, pd.var, rtol=RTOL)
    _, loo_q = qs.point_loo(fq)
    _, loo_d = dense.point_loo(fq)
    np.testing.assert_allclose(loo_q, loo_d, rtol=RTOL)


# ---------------------------------------------------------------------- jitter pre-flight
def test_preflight_checks_the_o_n_factorisation_and_raises_the_jitter():
    """30 copies of one input and no noise: C is singular. The pre-flight raises the jitter
    until the recursion succeeds at every checked point, as the dense one does for Cholesky."""
    x = np.concatenate([np.full(30, 2.5), np.linspace(0.0, 10.0, 20)])
    y = np.sin(x) + 0.1 * np.random.default_rng(4).normal(size=50)
    qs = GPRegression(x, y, "matern52", noise=1e-200, jitter=0.0, structure="quasiseparable")
    dense = GPRegression(x, y, "matern52", noise=1e-200, jitter=0.0, structure="dense")
    values = qs._values({"ls": 3.0, "eta": 1.0})
    assert qs.marginal.log_marginal_likelihood(values) == -np.inf
    choice = qs.check_jitter(random_seed=0)
    assert choice.raised and choice.default == 0.0 and qs.jitter == choice.jitter
    assert choice.n_points == 9  # the initial point and 8 prior draws
    assert np.isfinite(qs.marginal.log_marginal_likelihood(values))
    assert dense.check_jitter(random_seed=0).raised
    healthy = GPRegression(X, Y, "matern32", structure="quasiseparable")
    ok = healthy.check_jitter(random_seed=0)
    assert not ok.raised and ok.n_points == 9 and ok.jitter == healthy.default_jitter


# ------------------------------------------------------------------------------------ NUTS
@pytest.mark.usefixtures("nutpie_jax")
def test_nuts_runs_and_agrees_with_the_dense_posterior():
    x, y = data(40, seed=5)
    post = {}
    for structure in ("quasiseparable", "dense"):
        gp = GPRegression(x, y, "matern32", structure=structure)
        idata = gp.sample(draws=200, tune=200, chains=2, random_seed=11, cores=1)
        post[structure] = {n: np.asarray(idata["posterior"][n]) for n in gp.hyperparameters}
        ll = np.asarray(idata["log_likelihood"]["y"])
        assert ll.shape == (2, 200, 40) and np.all(np.isfinite(ll))
        if structure == "quasiseparable":  # pointwise LOO of a draw = the dense model's
            draw = {n: float(post[structure][n][1, 17]) for n in gp.hyperparameters}
            dense = GPRegression(x, y, "matern32", structure="dense")
            np.testing.assert_allclose(
                ll[1, 17], dense.marginal.loo(dense._values(draw)), rtol=1e-8
            )
    for name, q in post["quasiseparable"].items():
        d = post["dense"][name]
        sd = np.sqrt(0.5 * (q.var() + d.var()))
        assert abs(q.mean() - d.mean()) < 0.35 * sd, (name, q.mean(), d.mean(), sd)
