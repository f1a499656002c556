"""Sparse exact GP regression with the compact-support kernels k_ppD,q (R&W eq. 4.21):
the kernel profile against the catalogue kernel, the neighbour pattern against brute force, the
log density and its gradient (R&W eqs. 2.30, 5.9) against SciPy and finite differences on both the
band and the dense path, every PyTensor backend, and GPRegression(sparse=True) against the dense
model (type-II fit, predictions R&W 2.25-2.26, leave-one-out 5.10-5.12) and under NUTS."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import stats
from scipy.spatial.distance import cdist

import bayes_gp.solvers.compact as compact
from bayes_gp import GPRegression, op_backends
from bayes_gp import kernels as K
from bayes_gp.inference.typeii import MapFit
from bayes_gp.linalg import EAGER_MODE
from bayes_gp.solvers.compact import (
    CompactFactor,
    compact_gp_logp,
    compact_logp_grad,
    neighbour_pairs,
    pp_profile,
)


def _k_pp(r, D, q):
    """k_ppD,q(r) transcribed from R&W eq. 4.21, j = floor(D/2) + q + 1 (NumPy: no PyTensor
    graph to compile per call; the catalogue kernel is checked against ``pp_profile`` above)."""
    j = D // 2 + q + 1
    t = np.clip(1.0 - r, 0.0, None)
    poly = [
        np.ones_like(r),
        (j + 1) * r + 1.0,
        ((j**2 + 4 * j + 3) * r**2 + (3 * j + 6) * r + 3.0) / 3.0,
        (
            (j**3 + 9 * j**2 + 23 * j + 15) * r**3
            + (6 * j**2 + 36 * j + 45) * r**2
            + (15 * j + 45) * r
            + 15.0
        )
        / 15.0,
    ][q]
    return t ** (j + q) * poly


def _dense_C(X, ls, eta, s2, q):
    """C = eta^2 k_ppD,q + s2 I, R&W eq. 4.21 (:func:`_k_pp`)."""
    D = X.shape[1]
    ls = np.broadcast_to(np.asarray(ls, dtype=float).reshape(-1), (D,))
    return eta**2 * _k_pp(cdist(X / ls, X / ls), D, q) + s2 * np.eye(X.shape[0])


def _dense_logp(X, ls, eta, s2, r, q):
    C = _dense_C(X, ls, eta, s2, q)
    return stats.multivariate_normal(np.zeros(len(r)), C).logpdf(r)


@pytest.mark.parametrize("D", [1, 2, 3])
@pytest.mark.parametrize("q", [0, 1, 2, 3])
def test_profile_matches_catalogue_kernel_and_its_derivative(q, D):
    j = D // 2 + q + 1
    r = np.linspace(0.0, 1.3, 27)
    k, dk = pp_profile(r, j, q)
    X = np.zeros((r.size, D))
    X[:, 0] = r
    ref = K.PiecewisePolynomial(D, ls=1.0, q=q)(X[:1], X).eval(mode=EAGER_MODE)[0]
    np.testing.assert_allclose(k, ref, atol=1e-15)
    assert k[0] == 1.0 and np.all(k[r >= 1] == 0)
    h = 1e-6
    inner = (r > h) & (np.abs(r - 1) > h)
    fd = (pp_profile(r + h, j, q)[0] - pp_profile(r - h, j, q)[0]) / (2 * h)
    np.testing.assert_allclose(dk[inner], fd[inner], rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("D,ls", [(1, [0.7]), (2, [0.9]), (3, [1.5, 0.8, 2.0])])
def test_neighbour_pairs_are_exactly_the_pairs_closer_than_one_length_scale(D, ls):
    rng = np.random.default_rng(D)
    X = rng.uniform(0, 6, (150, D))
    X[5] = X[6]  # coincident inputs: r = 0
    p = neighbour_pairs(X, np.asarray(ls))
    R = cdist(X / np.asarray(ls), X / np.asarray(ls))
    want = {(a, c) for a, c in zip(*np.nonzero(np.tril(R < 1, -1)), strict=True)}
    got = {
        (max(p.perm[i], p.perm[j]), min(p.perm[i], p.perm[j]))
        for i, j in zip(p.I, p.J, strict=True)
    }
    assert got == want
    assert np.all(p.I > p.J) and p.b == np.max(p.I - p.J)
    np.testing.assert_allclose(p.r, R[p.perm[p.I], p.perm[p.J]], atol=1e-14)
    assert sorted(p.perm) == list(range(150))
    if D > 1:  # reverse Cuthill-McKee narrows the band compared with the input order
        raw = max(a - c for a, c in want)
        assert p.b < raw


CASES = [
    (1, [1.3], 2, 300),
    (1, [0.4], 0, 200),
    (2, [1.1], 1, 250),
    (2, [0.8, 1.6], 3, 250),  # ARD
]


@pytest.mark.parametrize("path", ["band", "dense"])
@pytest.mark.parametrize("D,ls,q,n", CASES)
def test_logp_and_gradient_match_scipy_and_finite_differences(D, ls, q, n, path, monkeypatch):
    monkeypatch.setattr(compact, "BAND_MAX_FRACTION", 1.0 if path == "band" else 0.0)
    rng = np.random.default_rng(n + q)
    X = rng.uniform(0, 10, (n, D))
    r = rng.standard_normal(n)
    ls = np.asarray(ls)
    eta, s2 = 1.2, 0.15
    j = D // 2 + q + 1
    assert CompactFactor(X, ls, eta, s2, q, j).banded is (path == "band")
    lp, g_ls, g_eta, g_s2, g_r = compact_logp_grad(X, ls, eta, s2, r, q, j)
    np.testing.assert_allclose(lp, _dense_logp(X, ls, eta, s2, r, q), rtol=1e-12)
    np.testing.assert_allclose(g_r, -np.linalg.solve(_dense_C(X, ls, eta, s2, q), r), rtol=1e-9)
    h = 1e-6

    def fd(f):
        return (f(h) - f(-h)) / (2 * h)

    for d in range(ls.size):
        e = np.eye(ls.size)[d]
        want = fd(lambda t, e=e: _dense_logp(X, ls + t * e, eta, s2, r, q))
        np.testing.assert_allclose(g_ls[d], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        g_eta, fd(lambda t: _dense_logp(X, ls, eta + t, s2, r, q)), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        g_s2, fd(lambda t: _dense_logp(X, ls, eta, s2 + t, r, q)), rtol=1e-5, atol=1e-6
    )


def test_not_positive_definite_or_invalid_parameters_give_minus_infinity():
    X = np.linspace(0, 5, 30)[:, None]
    r = np.ones(30)
    for ls, eta, s2 in [([1.0], 1.0, -2.0), ([-1.0], 1.0, 0.1), ([np.nan], 1.0, 0.1)]:
        lp, g_ls, *_ = compact_logp_grad(X, np.asarray(ls), eta, s2, r, 2, 3)
        assert lp == -np.inf and np.all(np.isnan(g_ls))


def test_large_n_gradient_is_consistent_with_its_own_log_density():
    # n = 20000: a dense C would take 3.2 GB; the band path needs O(n b)
    rng = np.random.default_rng(0)
    n = 20_000
    X = rng.uniform(0, 2000, (n, 1))
    r = rng.standard_normal(n)
    args = (X, np.array([1.5]), 0.8, 0.3, r, 2, 3)
    f = CompactFactor(*args[:4], 2, 3)
    assert f.banded and f.pairs.b < 60
    _, g_ls, g_eta, g_s2, _ = compact_logp_grad(*args)
    h = 1e-5
    for k, g in ((1, g_ls[0]), (2, g_eta), (3, g_s2)):
        up, dn = list(args), list(args)
        up[k], dn[k] = args[k] + h, args[k] - h
        fd = (compact_logp_grad(*up)[0] - compact_logp_grad(*dn)[0]) / (2 * h)
        np.testing.assert_allclose(g, fd, rtol=1e-5)


@pytest.mark.parametrize("mode", ["PY", "NUMBA"])  # FAST_RUN is numba in this PyTensor
def test_op_value_and_gradient_in_pytensor_backends(mode):
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 8, (120, 2))
    y = rng.standard_normal(120)
    ls, eta, s, c = pt.dvector("ls"), pt.dscalar("eta"), pt.dscalar("s"), pt.dscalar("c")
    lp = compact_gp_logp(X, ls, eta, s**2, y - c, 2, 3)
    f = pytensor.function(
        [ls, eta, s, c],
        [lp, *pt.grad(lp, [ls, eta, s, c])],
        mode=EAGER_MODE if mode == "PY" else mode,
    )
    vals = (np.array([1.4, 0.9]), 1.1, 0.4, 0.2)
    out = f(*vals)
    ref = compact_logp_grad(X, vals[0], 1.1, 0.16, y - 0.2, 2, 3)
    np.testing.assert_allclose(out[0], ref[0], rtol=1e-13)
    np.testing.assert_allclose(out[1], ref[1], rtol=1e-12)
    np.testing.assert_allclose(out[2], ref[2], rtol=1e-12)
    np.testing.assert_allclose(out[3], ref[3] * 2 * 0.4, rtol=1e-12)  # ds2/ds = 2s
    np.testing.assert_allclose(out[4], -ref[4].sum(), rtol=1e-12)  # dr/dc = -1


def test_jax_backend_is_refused_with_a_clear_message():
    pytest.importorskip("jax")
    op_backends.ensure("jax")
    X = np.linspace(0, 3, 10)[:, None]
    ls = pt.dvector("ls")
    lp = compact_gp_logp(X, ls, 1.0, 0.1, np.zeros(10), 2, 3)
    with pytest.raises(NotImplementedError, match="sparse=False"):
        pytensor.function([ls], lp, mode="JAX")


# ------------------------------------------------------------------------- GPRegression
def _data(n=300, D=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 100, (n, D))
    y = np.sin(X[:, 0]) + (0.5 * np.cos(X[:, 1]) if D > 1 else 0) + 0.2 * rng.normal(size=n)
    return X if D > 1 else X[:, 0], y


@pytest.mark.parametrize("ard,D,mean", [(False, 1, None), (True, 2, "linear")])
def test_sparse_model_equals_dense_model(ard, D, mean):
    X, y = _data(n=150, D=D)  # (n = 300 until issue 35: the L-BFGS-B fits were most of the time)
    sp = GPRegression(X, y, "pp2", ard=ard, mean=mean)
    de = GPRegression(X, y, "pp2", ard=ard, mean=mean, sparse=False)
    assert sp.sparse and not de.sparse and "sparse=True" in repr(sp)
    # the same log density and gradient at the initial point and at prior draws
    # (Python linker: nothing to compile; the numba backend of the Op is checked above and
    # sampled by nutpie below)
    lp = [m.model.compile_logp(mode=EAGER_MODE) for m in (sp, de)]
    dlp = [m.model.compile_dlogp(mode=EAGER_MODE) for m in (sp, de)]
    names = [rv.name for rv in sp.model.free_RVs]
    prior = pm.sample_prior_predictive(
        draws=3,
        model=sp.model,
        var_names=names,
        random_seed=5,
        compile_kwargs={"mode": EAGER_MODE},
    )["prior"]
    points = [sp.model.initial_point()]
    for k in range(3):
        pt_k = {}
        for rv in sp.model.free_RVs:
            v = np.asarray(prior[rv.name][0, k])
            value = sp.model.rvs_to_values[rv]
            pt_k[value.name] = np.log(v) if value.name.endswith("_log__") else v
        points.append(pt_k)
    for point in points:
        np.testing.assert_allclose(lp[0](point), lp[1](point), rtol=1e-11)
        np.testing.assert_allclose(dlp[0](point), dlp[1](point), rtol=1e-8, atol=1e-8)
    # one L-BFGS-B start each, the same start: the two paths must reach the same optimum
    fit = sp.fit_map(n_restarts=1, random_seed=1)
    if D == 1:  # (in 2-D the two L-BFGS-B paths part on rounding and stop at other optima)
        ref = de.fit_map(n_restarts=1, random_seed=1)
        for name in fit.params:
            np.testing.assert_allclose(fit.params[name], ref.params[name], rtol=1e-5)
    np.testing.assert_allclose(
        sp.log_marginal_likelihood(fit.params), de.log_marginal_likelihood(fit.params), rtol=1e-12
    )
    # with the fitted ls the band is narrow: the sparse path really ran
    ls = np.atleast_1d(fit.params["ls"])
    Xm = np.asarray(X, dtype=float).reshape(len(y), -1)
    assert CompactFactor(Xm, ls, 1.0, 0.1, 2, D // 2 + 3).banded
    Xn = np.random.default_rng(9).uniform(-2, 102, (40, D))
    Xn = Xn if D > 1 else Xn[:, 0]
    for diag in (True, False):
        a = sp.predict(Xn, fit, diag=diag, include_noise=True)
        b = de.predict(Xn, fit, diag=diag, include_noise=True)
        np.testing.assert_allclose(a.mean, b.mean, rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(a.var, b.var, rtol=1e-8, atol=1e-12)
        if not diag:
            np.testing.assert_allclose(a.cov, b.cov, rtol=1e-8, atol=1e-11)
    values = sp._values(fit.params)
    np.testing.assert_allclose(sp._pointwise_loo(values), de._pointwise_loo(values), rtol=1e-10)


def test_sparse_argument_is_validated():
    X, y = _data(n=30)
    with pytest.raises(ValueError, match="compactly supported"):
        GPRegression(X, y, "expquad", sparse=True)
    with pytest.raises(ValueError, match="approx"):
        GPRegression(X, y, "pp2", sparse=True, approx="vfe")
    with pytest.raises(TypeError, match="sparse"):
        GPRegression(X, y, "pp2", sparse="yes")
    assert not GPRegression(X, y, "pp2 + expquad").sparse  # sums use the generic dense path
    assert not GPRegression(X, y, "pp2", approx="vfe").sparse


@pytest.mark.slow
def test_nuts_on_the_sparse_model_recovers_the_length_scale():
    """Data from the pp2 GP itself (ls = 2 on [0, 50]: band ~ 4% of n), nutpie (numba backend):
    the 99% intervals cover ls, eta, sigma, no divergences. With the noise variance doubled in
    the likelihood (compact_gp_logp given 2 s2, monkeypatched) sigma's interval is
    [0.113, 0.168] and misses the true 0.2: the test fails."""
    rng = np.random.default_rng(11)
    n = 200  # (400 on [0, 100] until issue 35: the same density of points, half the data)
    X = np.sort(rng.uniform(0, 50, n))
    C = _dense_C(X[:, None], [2.0], 1.0, 0.0, 2) + 1e-9 * np.eye(n)
    y = np.linalg.cholesky(C) @ rng.standard_normal(n) + 0.2 * rng.standard_normal(n)
    m = GPRegression(X, y, "pp2", mean="zero")
    idata = m.sample(draws=300, tune=300, chains=2, random_seed=2, sampler="nutpie")
    post = idata["posterior"]
    for name, true in (("ls", 2.0), ("eta", 1.0), ("sigma", 0.2)):
        draws = np.asarray(post[name]).ravel()
        lo, hi = np.quantile(draws, [0.005, 0.995])
        assert lo < true < hi, (name, lo, hi)
    assert int(idata["sample_stats"]["diverging"].sum()) == 0
    assert idata["log_likelihood"]["y"].shape[-1] == n


def test_numpyro_on_the_sparse_model_says_what_to_do():
    pytest.importorskip("numpyro")
    X, y = _data(n=40)
    with pytest.raises(NotImplementedError, match="sparse=False"):
        GPRegression(X, y, "pp2").sample(draws=5, tune=5, chains=1, sampler="numpyro")


def test_a_factorisation_too_large_for_memory_is_refused_with_advice(monkeypatch):
    monkeypatch.setattr(compact, "MAX_FACTOR_BYTES", 10**6)
    X = np.linspace(0, 10, 400)[:, None]
    CompactFactor(X, [0.1], 1.0, 0.1, 2, 3)  # narrow band: 16 * 400 * 9 bytes
    # a band too wide to be worth it, but dense (2.6 MB) would not fit: the band path it is
    monkeypatch.setattr(compact, "MAX_FACTOR_BYTES", 2_200_000)
    wide = CompactFactor(X, [2.5], 1.0, 0.1, 2, 3)
    assert wide.banded and wide.pairs.b + 1 > compact.BAND_MAX_FRACTION * 400
    np.testing.assert_allclose(
        compact_logp_grad(X, [2.5], 1.0, 0.1, np.ones(400), 2, 3)[0],
        _dense_logp(X, [2.5], 1.0, 0.1, np.ones(400), 2),
        rtol=1e-12,
    )
    monkeypatch.setattr(compact, "MAX_FACTOR_BYTES", 10**6)
    with pytest.raises(MemoryError, match="length-scale prior"):
        compact_logp_grad(X, [5.0], 1.0, 0.1, np.zeros(400), 2, 3)  # dense: 2.6 MB
    with pytest.raises(MemoryError, match="length-scale prior"):  # caught before the pair list
        neighbour_pairs(np.linspace(0, 10, 3000)[:, None], np.array([20.0]))
    with pytest.raises(MemoryError, match="length-scale prior"):
        neighbour_pairs(np.random.default_rng(0).uniform(0, 1, (3000, 2)), np.array([5.0]))


# ------------------------------------------------------- known per-observation noise (issue 40)
@pytest.mark.parametrize("path", ["band", "dense"])
def test_known_variances_join_the_diagonal(path, monkeypatch):
    """compact_logp_grad(..., known_var=s^2) is log N(r | 0, C + diag(s^2)) (scipy), with the
    s2 gradient unchanged in form (central differences), in the band and the dense factor."""
    if path == "dense":
        monkeypatch.setattr(compact, "BAND_MAX_FRACTION", 0.0)
    rng = np.random.default_rng(4)
    X = rng.uniform(0, 20, (80, 1))
    r = rng.standard_normal(80)
    kv = rng.uniform(0.01, 0.3, 80)
    ls, eta, s2 = np.array([1.5]), 0.9, 0.05
    assert CompactFactor(X, ls, eta, s2, 2, 3, kv).banded is (path == "band")
    lp, g_ls, g_eta, g_s2, _ = compact_logp_grad(X, ls, eta, s2, r, 2, 3, kv)
    C = _dense_C(X, ls, eta, s2, 2) + np.diag(kv)
    np.testing.assert_allclose(lp, stats.multivariate_normal(np.zeros(80), C).logpdf(r),
                               rtol=1e-11)  # fmt: skip
    h = 1e-6
    for k, g in ((3, g_s2), (2, g_eta)):
        up, dn = [X, ls, eta, s2, r, 2, 3, kv], [X, ls, eta, s2, r, 2, 3, kv]
        up[k], dn[k] = up[k] + h, dn[k] - h
        fd = (compact_logp_grad(*up)[0] - compact_logp_grad(*dn)[0]) / (2 * h)
        np.testing.assert_allclose(g, fd, rtol=1e-5)
    # the Op with a sixth input, in the numba backend (nutpie's)
    lsv, sv = pt.dvector("ls"), pt.dscalar("s")
    lpv = compact_gp_logp(X, lsv, eta, sv**2, r, 2, 3, kv)
    f = pytensor.function([lsv, sv], [lpv, *pt.grad(lpv, [lsv, sv])], mode="NUMBA")
    out = f(ls, np.sqrt(s2))
    np.testing.assert_allclose(out[0], lp, rtol=1e-13)
    np.testing.assert_allclose(out[1], g_ls, rtol=1e-12)
    np.testing.assert_allclose(out[2], g_s2 * 2 * np.sqrt(s2), rtol=1e-12)


@pytest.mark.parametrize("learn", [False, True])
def test_sparse_model_with_known_noise_equals_dense_model(learn):
    X, y = _data(n=120)
    S = np.random.default_rng(2).uniform(0.05, 0.4, 120)
    sp = GPRegression(X, y, "pp2", noise=S, learn_noise=learn)
    de = GPRegression(X, y, "pp2", noise=S, learn_noise=learn, sparse=False)
    assert sp.sparse and not de.sparse
    p = {"ls": 2.0, "eta": 0.8, **({"sigma": 0.2} if learn else {})}
    la, ga = sp.log_marginal_likelihood(p, eval_gradient=True)
    lb, gb = de.log_marginal_likelihood(p, eval_gradient=True)
    np.testing.assert_allclose(la, lb, rtol=1e-11)
    for k in p:
        np.testing.assert_allclose(ga[k], gb[k], rtol=1e-8, atol=1e-10)
    values = sp._values(p)
    np.testing.assert_allclose(sp._pointwise_loo(values), de._pointwise_loo(values), rtol=1e-10)
    fit = MapFit(p, 0.0, False)
    Xn = np.linspace(-2, 102, 15)
    for kw in ({}, {"include_noise": True, "noise_new": np.full(15, 0.3)}):
        a, b = sp.predict(Xn, fit, **kw), de.predict(Xn, fit, **kw)
        np.testing.assert_allclose(a.mean, b.mean, rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(a.var, b.var, rtol=1e-8, atol=1e-12)
