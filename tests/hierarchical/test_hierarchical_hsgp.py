"""HierarchicalGP(approx="hsgp"): the arrow-factorised likelihood equals the dense multivariate
normal with C = Σ + Φ S₀ Φᵀ + blockdiag(Ψ_g S_g Ψ_gᵀ) built from the same basis (value,
gradient, LOO, predictions); it approaches the exact hierarchical likelihood as m and c grow; a
MAP fit on 4 groups × 400 points predicts as the exact path does at the same hyperparameters;
the graph does not grow with the number of groups; bad input is named."""

import numpy as np
import pandas as pd
import pytensor
import pytensor.tensor as pt
import pytest
from pymc.gp.hsgp_approx import calc_eigenvalues, calc_eigenvectors
from pytensor.graph.traversal import ancestors
from scipy.linalg import solve_triangular
from scipy.stats import multivariate_normal, norm

from bayes_gp.hierarchical import HierarchicalGP
from bayes_gp.hierarchical.hsgp import (
    HSGPBasis,
    HSGPFactor,
    HSGPStats,
    dense_hsgp_covariance,
    hsgp_structured_logp,
    hsgp_terms,
    sqrt_spectral_densities,
)
from bayes_gp.inference.typeii import MapFit
from bayes_gp.kernels.catalogue import kernel_spec
from bayes_gp.linalg import EAGER_MODE


def _panel(G=3, sizes=None, seed=0, span=10.0, covariate=False):
    """Groups of different sizes at their own random times; rows shuffled (groups interleaved)."""
    rng = np.random.default_rng(seed)
    sizes = sizes or [30 + 7 * g for g in range(G)]
    frames = []
    for g, n in enumerate(sizes):
        t = np.sort(rng.uniform(0.0, span, n))
        y = np.sin(t) + 0.3 * np.cos(2.0 * t + g) + 0.3 * g + 0.2 * rng.normal(size=n)
        frame = pd.DataFrame({"t": t, "subject": f"s{g}", "y": y})
        if covariate:
            frame["c"] = rng.normal(size=n)
            frame["y"] += 0.5 * frame["c"]
        frames.append(frame)
    return pd.concat(frames, ignore_index=True).sample(frac=1.0, random_state=1).reset_index(
        drop=True
    )


def _fit(params):
    return MapFit(params=params, objective=0.0, prior=True)


def _se_psd(omega, ls, eta):
    """1-D squared-exponential spectral density, R&W eq. 4.20 in angular frequency."""
    return eta**2 * np.sqrt(2.0 * np.pi) * ls * np.exp(-0.5 * (ls * omega) ** 2)


def _numeric_stats(G=3, p_intercept=True, seed=0):
    rng = np.random.default_rng(seed)
    sizes = [25, 40, 18][:G]
    codes = rng.permutation(np.repeat(np.arange(G), sizes))
    X = rng.uniform(0.0, 10.0, (codes.size, 1))
    basis = HSGPBasis.of(X, 12, 1.6)
    return HSGPStats.of(basis, X, codes, G, p_intercept), rng


# --------------------------------------------------------------------------- the basis
@pytest.mark.parametrize("D", [1, 2])
def test_basis_is_pymcs_dirichlet_eigenfunctions(D):
    rng = np.random.default_rng(3)
    X = rng.uniform(-2.0, 5.0, (50, D))
    m = [7, 5][:D]
    b = HSGPBasis.of(X, m, 1.4)
    L = 1.4 * 0.5 * np.ptp(X, axis=0)
    np.testing.assert_allclose(b.L, L, rtol=1e-14)
    eig = calc_eigenvalues(L, m)
    ref = calc_eigenvectors(pt.as_tensor(X - 0.5 * (X.min(0) + X.max(0))), pt.as_tensor(L),
                            pt.as_tensor(eig), m).eval()  # fmt: skip
    np.testing.assert_allclose(b.phi(X), ref, rtol=0, atol=1e-13)
    np.testing.assert_allclose(b.sqrt_eig**2, eig, rtol=1e-14)


def test_sum_of_kernels_spectral_density_is_the_catalogue_kernels():
    spec = kernel_spec("matern32 + expquad")
    terms = hsgp_terms(spec)
    assert [c.__name__ for _, c in terms] == ["Matern32", "ExpQuad"]
    omega = np.linspace(0.05, 6.0, 9)[:, None]
    theta = np.array([[0.7, 1.3, 2.0, 0.4], [1.9, 0.5, 0.3, 1.1]])  # ls, eta per term
    got = sqrt_spectral_densities(terms, list(spec.params), theta, omega, 1).eval()
    for g in range(2):
        h = dict(zip(spec.params, theta[g], strict=True))
        ref = spec.build(1, h).power_spectral_density(omega).eval()
        np.testing.assert_allclose(got[g] ** 2, ref, rtol=1e-12)


# ------------------------------------------------------- structured = dense, gradient
@pytest.mark.parametrize(("intercept", "shared"), [(False, False), (True, True)])
def test_structured_logp_equals_dense_mvn_and_its_gradient_finite_differences(intercept, shared):
    st, rng = _numeric_stats(p_intercept=intercept)
    G, p = st.gram.shape[:2]
    Dg, s = rng.uniform(0.1, 1.0, (G, p)), rng.uniform(0.02, 0.2, G)
    D0 = rng.uniform(0.1, 1.0, st.m) if shared else None
    r = rng.normal(size=st.Psi.shape[0])

    def dense(Dg, s, D0, r):  # R&W eq. 2.30 by a dense Cholesky factor
        Lc = np.linalg.cholesky(dense_hsgp_covariance(st, Dg, s, D0))
        w = solve_triangular(Lc, r, lower=True)
        return -0.5 * w @ w - np.sum(np.log(np.diag(Lc))) - 0.5 * r.size * np.log(2 * np.pi)

    tD, ts, t0, tr = pt.dmatrix(), pt.dvector(), pt.dvector(), pt.dvector()
    lp = hsgp_structured_logp(tr, st, tD, ts, t0 if shared else None)
    wrt = [tD, ts, tr] + ([t0] if shared else [])
    f = pytensor.function([tD, ts, t0, tr], [lp, *pytensor.grad(lp, wrt)], mode=EAGER_MODE,
                          on_unused_input="ignore")  # fmt: skip
    D0v = D0 if shared else np.ones(st.m)
    val, *grads = f(Dg, s, D0v, r)
    ref = dense(Dg, s, D0, r)
    C = dense_hsgp_covariance(st, Dg, s, D0)
    assert abs(multivariate_normal(np.zeros(r.size), C).logpdf(r) - ref) < 1e-9 * abs(ref)
    assert abs(val - ref) < 1e-10 * max(1.0, abs(ref))
    fac = HSGPFactor.of(st, Dg, s, D0, r)
    assert abs(fac.logp - ref) < 1e-10 * max(1.0, abs(ref))
    # gradient: directional central differences of the dense reference, per argument
    args = [Dg, s, r] + ([D0] if shared else [])
    for k, g in enumerate(grads):
        d = rng.normal(size=args[k].shape)
        h = 1e-5
        plus = [a + h * d if i == k else a for i, a in enumerate(args)]
        minus = [a - h * d if i == k else a for i, a in enumerate(args)]
        fd = (dense(plus[0], plus[1], plus[3] if shared else None, plus[2])
              - dense(minus[0], minus[1], minus[3] if shared else None, minus[2])) / (2 * h)  # fmt: skip
        assert abs(np.sum(g * d) - fd) < 1e-6 * max(1.0, abs(fd)), (k, np.sum(g * d), fd)


def test_graph_does_not_grow_with_the_number_of_groups():
    def n_nodes(G):
        rng = np.random.default_rng(0)
        codes = np.repeat(np.arange(G), 10)
        X = rng.uniform(0, 1, (codes.size, 1))
        st = HSGPStats.of(HSGPBasis.of(X, 8, 1.5), X, codes, G, True)
        lp = hsgp_structured_logp(pt.dvector(), st, pt.dmatrix(), pt.dvector(), pt.dvector())
        return len(list(ancestors([lp])))

    assert n_nodes(3) == n_nodes(40)


# ------------------------------------------------------------- the model = its dense MVN
def test_model_equals_dense_mvn_of_its_basis_with_predictions_and_loo():
    df = _panel(covariate=True)
    c = 2.0
    h = HierarchicalGP(df, "t", "y", "subject", covariates=["c"], random_intercept=True,
                       approx="hsgp", approx_options={"m": 24, "c": c})  # fmt: skip
    rng = np.random.default_rng(5)
    G = 3
    params = {"ls_mu": np.log(2.0), "ls_tau": 0.3, "ls_z": rng.normal(size=G), "eta_mu": -0.4,
              "eta_tau": 0.3, "eta_z": rng.normal(size=G), "sigma": 0.25, "f0_ls": 1.6,
              "f0_eta": 0.9, "intercept_sd": 0.6, "beta": [0.4]}  # fmt: skip
    assert sorted(params) == sorted(h.hyperparameters)
    # the dense HSGP covariance, transcribed independently (PyMC's basis, the SE density)
    t, y, cv = df["t"].to_numpy(), df["y"].to_numpy(), df["c"].to_numpy()
    codes = df["subject"].map({"s0": 0, "s1": 1, "s2": 2}).to_numpy()
    L = np.array([c * 0.5 * np.ptp(t)])
    centre = 0.5 * (t.min() + t.max())
    eig = calc_eigenvalues(L, [24])
    omega = np.sqrt(eig[:, 0])

    def phi(x):
        return calc_eigenvectors(pt.as_tensor((x - centre)[:, None]), pt.as_tensor(L),
                                 pt.as_tensor(eig), [24]).eval()  # fmt: skip

    Phi = phi(t)
    ls_g = np.exp(params["ls_mu"] + params["ls_tau"] * params["ls_z"])
    eta_g = np.exp(params["eta_mu"] + params["eta_tau"] * params["eta_z"])
    S0 = _se_psd(omega, params["f0_ls"], params["f0_eta"])
    Sg = [_se_psd(omega, ls_g[g], eta_g[g]) for g in range(G)]
    tau2 = params["intercept_sd"] ** 2
    Kg = np.zeros((t.size, t.size))
    for g in range(G):
        Kg += np.outer(codes == g, codes == g) * ((Phi * Sg[g]) @ Phi.T + tau2)
    C = (Phi * S0) @ Phi.T + Kg + (params["sigma"] ** 2 + h.jitter) * np.eye(t.size)
    mu = y.mean() + (cv - cv.mean()) * params["beta"][0]
    ref = multivariate_normal(mu, C).logpdf(y)
    val, grad = h.log_marginal_likelihood(params, eval_gradient=True)
    assert abs(val - ref) < 1e-10 * abs(ref)
    assert abs(h.log_marginal_likelihood(params) - ref) < 1e-10 * abs(ref)
    # gradient (PyTensor) against central differences of the NumPy factorisation
    for name in ("ls_mu", "eta_tau", "sigma", "f0_ls", "intercept_sd", "beta"):
        step = 1e-6
        up, dn = dict(params), dict(params)
        up[name] = np.asarray(params[name]) + step
        dn[name] = np.asarray(params[name]) - step
        fd = (h.log_marginal_likelihood(up) - h.log_marginal_likelihood(dn)) / (2 * step)
        assert abs(np.sum(grad[name]) - fd) < 1e-5 * max(1.0, abs(fd)), (name, grad[name], fd)
    # predictions: the dense Gaussian conditional (R&W eqs. 2.25-2.26) on the HSGP covariance
    fit = _fit(params)
    xs = np.array([0.7, 4.2, 8.8])
    new = pd.DataFrame({"t": np.tile(xs, 2), "subject": ["s1"] * 3 + ["new"] * 3, "c": 0.0})
    pred = h.predict(new, fit)
    ps = phi(xs)
    k0 = (Phi * S0) @ ps.T
    alpha = np.linalg.solve(C, y - mu)
    k1 = k0 + (codes == 1)[:, None] * ((Phi * Sg[1]) @ ps.T + tau2)
    v1 = np.sum(ps * S0 * ps, 1) + np.sum(ps * Sg[1] * ps, 1) + tau2
    v1 -= np.sum(k1 * np.linalg.solve(C, k1), 0)
    S_new = _se_psd(omega, np.exp(params["ls_mu"]), np.exp(params["eta_mu"]))
    vn = np.sum(ps * S0 * ps, 1) - np.sum(k0 * np.linalg.solve(C, k0), 0)
    vn += np.sum(ps * S_new * ps, 1) + tau2
    mu_new = y.mean() + (0.0 - cv.mean()) * params["beta"][0]  # covariate 0 in new_data
    np.testing.assert_allclose(pred.mean, mu_new + np.r_[k1.T @ alpha, k0.T @ alpha],
                               rtol=0, atol=1e-9)  # fmt: skip
    np.testing.assert_allclose(pred.var, np.r_[v1, vn], rtol=1e-8)
    noisy = h.predict(new, fit, include_noise=True)
    np.testing.assert_allclose(noisy.var - pred.var, params["sigma"] ** 2, rtol=1e-10)
    # held-out predictive CDF = the Gaussian CDF with those moments
    y_new = np.linspace(-1.0, 2.0, 6)
    F = h.held_out_predictive(new, y_new, fit).cdf_at
    np.testing.assert_allclose(F, norm.cdf(y_new, noisy.mean, np.sqrt(noisy.var)), atol=1e-12)
    # exact LOO of the HSGP model (R&W eqs. 5.10-5.12) from the dense inverse
    Ci = np.linalg.inv(C)
    cinv = np.diag(Ci)
    loo_ref = (-0.5 * np.log(1 / cinv) - 0.5 * (Ci @ (y - mu)) ** 2 / cinv
               - 0.5 * np.log(2 * np.pi))  # fmt: skip
    np.testing.assert_allclose(h.point_loo(fit)[1], loo_ref, rtol=0, atol=1e-9)


def test_approaches_the_exact_likelihood_as_the_basis_grows():
    """ls >= 0.3 of the range (group ls ~ 3 to 4.5, f0's 3 on a range of 10), c = 3.5 (the
    rule's c for ls = 3 on a half-range of 5 is 3.2 * 3 / 5 = 1.9; the larger box is needed by
    the largest group length-scale). Measured |Δ| = 0.45 at m = 15, 8.6e-8 at m = 30, 60 and
    100 (the box's error; c = 2.5: 6.1e-5; c = 1.5: 9.3 nats at every m)."""
    df = _panel(sizes=[40, 55, 30])
    rng = np.random.default_rng(2)
    params = {"ls_mu": np.log(3.5), "ls_tau": 0.2, "ls_z": rng.normal(size=3), "eta_mu": -0.7,
              "eta_tau": 0.3, "eta_z": rng.normal(size=3), "sigma": 0.2, "f0_ls": 3.0,
              "f0_eta": 1.0, "intercept_sd": 0.5}  # fmt: skip
    exact = HierarchicalGP(df, "t", "y", "subject", random_intercept=True)
    ref = exact.log_marginal_likelihood(params)
    errors = {}
    for m in (15, 60):
        h = HierarchicalGP(df, "t", "y", "subject", random_intercept=True, approx="hsgp",
                           approx_options={"m": m, "c": 3.5})  # fmt: skip
        errors[m] = abs(h.log_marginal_likelihood(params) - ref)
    assert errors[60] < 1e-6 and errors[15] > 1e-2


def test_two_input_columns_approach_the_exact_likelihood():
    """2-D inputs on [0, 4]^2, prod(m) basis functions: measured |Δ| = 1.4e-2 with m = 10 per
    dimension, 1.7e-3 with m = 25 (c = 3, squared exponential, ls ~ 2 and f0's 1.5)."""
    rng = np.random.default_rng(0)
    frames = []
    for g in range(3):
        a, b = rng.uniform(0, 4, 30), rng.uniform(0, 4, 30)
        frames.append(pd.DataFrame({"a": a, "b": b, "subject": f"s{g}",
                                    "y": np.sin(a) + np.cos(b) + 0.2 * rng.normal(size=30)}))  # fmt: skip
    df = pd.concat(frames, ignore_index=True)
    params = {"ls_mu": np.log(2.0), "ls_tau": 0.2, "ls_z": rng.normal(size=3), "eta_mu": -0.5,
              "eta_tau": 0.3, "eta_z": rng.normal(size=3), "sigma": 0.2, "f0_ls": 1.5,
              "f0_eta": 1.0}  # fmt: skip
    ref = HierarchicalGP(df, ["a", "b"], "y", "subject").log_marginal_likelihood(params)
    err = {}
    for m in (10, 25):
        h = HierarchicalGP(df, ["a", "b"], "y", "subject", approx="hsgp",
                           approx_options={"m": m, "c": 3.0})  # fmt: skip
        assert h.hsgp_basis.size == m * m
        err[m] = abs(h.log_marginal_likelihood(params) - ref)
    assert err[25] < 3e-3 < 1e-2 < err[10]


# ------------------------------------------------------------ MAP fit on 4 groups x 400
def test_map_fit_on_a_panel_predicts_as_the_exact_path():
    """4 groups x 400 points, m = 40 on c = 2.5 (resolves ls down to 1.75 * 2.5 * 5 / 40 =
    0.55, Riutort-Mayol et al. 2022). Measured at the fit: the predictive means of a known and
    of a new group within 3.4e-6 of the exact path's at the same hyperparameters, the sds within
    1.6e-5 (relative), the log likelihoods 5.8e-4 apart."""
    df = _panel(sizes=[400] * 4, seed=4)
    h = HierarchicalGP(df, "t", "y", "subject", pooling={"ls": "shared"}, approx="hsgp",
                       approx_options={"m": 40, "c": 2.5})  # fmt: skip
    fit = h.fit_map(n_restarts=1, random_seed=1, maxiter=300)
    assert fit.converged and np.isfinite(fit.log_marginal_likelihood)
    assert fit.params["ls"] > 0.55 and fit.params["f0_ls"] > 0.55  # resolved by the basis
    exact = HierarchicalGP(df, "t", "y", "subject", pooling={"ls": "shared"})
    grid = np.linspace(0.0, 10.0, 11)
    new = pd.DataFrame({"t": np.tile(grid, 2), "subject": ["s2"] * 11 + ["new"] * 11})
    a, b = h.predict(new, fit), exact.predict(new, fit)
    assert np.max(np.abs(a.mean - b.mean)) < 1e-4 * np.std(df["y"])
    np.testing.assert_allclose(a.sd, b.sd, rtol=1e-4)
    # the population curve m + f0 alone (predict(population=True)), on both paths
    pop = pd.DataFrame({"t": grid})
    a, b = h.predict(pop, fit, population=True), exact.predict(pop, fit, population=True)
    assert np.max(np.abs(a.mean - b.mean)) < 1e-4 * np.std(df["y"])
    np.testing.assert_allclose(a.sd, b.sd, rtol=1e-4)
    lml_h, lml_e = h.log_marginal_likelihood(fit.params), exact.log_marginal_likelihood(fit.params)
    assert abs(lml_h - lml_e) < 5e-3


# ------------------------------------------------------------------------ bad input
def test_bad_input_is_named():
    df = _panel(sizes=[20, 25])
    with pytest.raises(ValueError, match=r"supports None .* or 'hsgp'"):
        HierarchicalGP(df, "t", "y", "subject", approx="vfe")
    with pytest.raises(ValueError, match="`approx` must be None or one of"):
        HierarchicalGP(df, "t", "y", "subject", approx="kiss")
    with pytest.raises(ValueError, match="`approx_options` given without `approx`"):
        HierarchicalGP(df, "t", "y", "subject", approx_options={"m": 10})
    with pytest.raises(ValueError, match="unknown `approx_options`"):
        HierarchicalGP(df, "t", "y", "subject", approx="hsgp", approx_options={"n": 10})
    with pytest.raises(ValueError, match="the product 'expquad \\* periodic' is not supported"):
        HierarchicalGP(df, "t", "y", "subject", kernel="expquad * periodic", approx="hsgp",
                       approx_options={"m": 10, "c": 2.0})  # fmt: skip
    with pytest.raises(ValueError, match="the kernel 'pp1' is not supported; supported: "):
        HierarchicalGP(df, "t", "y", "subject", kernel="pp1", approx="hsgp")
    with pytest.raises(ValueError, match=r"no gradient .* ratquad's alpha"):
        HierarchicalGP(df, "t", "y", "subject", kernel="ratquad", approx="hsgp",
                       approx_options={"m": 10, "c": 2.0})  # fmt: skip
    ok = HierarchicalGP(df, "t", "y", "subject", kernel="ratquad", priors={"alpha": 2.0},
                        approx="hsgp", approx_options={"m": 10, "c": 2.0})  # fmt: skip
    assert "approx='hsgp'" in repr(ok)
    df3 = df.assign(u=df["t"] ** 2, v=np.cos(df["t"]))
    with pytest.raises(ValueError, match="supports 1 or 2 input columns"):
        HierarchicalGP(df3, ["t", "u", "v"], "y", "subject", approx="hsgp")
    h = HierarchicalGP(df, "t", "y", "subject", approx="hsgp", approx_options={"m": 10, "c": 1.5})
    fit = _fit({**dict.fromkeys(["ls_mu", "eta_mu", "f0_ls", "f0_eta"], 1.0),
                "ls_tau": 0.1, "eta_tau": 0.1, "ls_z": [0, 0], "eta_z": [0, 0], "sigma": 0.2})
    with pytest.raises(ValueError, match="outside the HSGP box"):
        h.predict(pd.DataFrame({"t": [40.0], "subject": ["s0"]}), fit)


def test_default_rule_and_jitter_preflight():
    df = _panel(sizes=[30, 30])
    # shared pooling and narrow length-scale priors: the rule gives a small basis
    h = HierarchicalGP(df, "t", "y", "subject", pooling="shared", approx="hsgp",
                       priors={"ls": 3.0, "f0_ls": 3.0})  # fmt: skip
    m, c = h.hsgp_basis.m[0], h.hsgp_basis.c[0]
    # Riutort-Mayol et al. (2022) for the SE: c = 3.2 ls / S, m = 1.75 c S / ls, S = half-range
    S = 0.5 * np.ptp(df["t"])
    assert c == pytest.approx(3.2 * 3.0 / S, rel=1e-8)
    assert m == int(np.floor(1.75 * c / (3.0 / S)))
    choice = h.check_jitter(random_seed=0)
    assert choice.n_points == 9 and choice.jitter == h.jitter


def test_a_basis_larger_than_the_groups_warns():
    """m basis functions cost O(G m^3) per gradient against the exact path's O(G n_max^3): with
    m >= the largest group's rows the approximation is the slower one, and the model says so."""
    import warnings

    from bayes_gp.hierarchical.model import HSGPCostWarning

    df = _panel(sizes=[12, 15])
    with pytest.warns(HSGPCostWarning, match=r"15 basis functions .* 15 rows"):
        HierarchicalGP(df, "t", "y", "subject", approx="hsgp", approx_options={"m": 15, "c": 2.0})
    with warnings.catch_warnings():
        warnings.simplefilter("error", HSGPCostWarning)
        HierarchicalGP(df, "t", "y", "subject", approx="hsgp", approx_options={"m": 14, "c": 2.0})


def test_sampled_density_is_the_exact_models_priors_with_the_hsgp_likelihood():
    """What NUTS samples on the HSGP path: the model's log density (priors, log-Jacobians,
    likelihood) minus its likelihood equals the exact model's minus the exact likelihood (the
    same priors and parametrisation), and its observed term is ``log_marginal_likelihood``
    (checked against the dense multivariate normal above), at random unconstrained points."""
    from bayes_gp.linalg import EAGER_MODE

    df = _panel(sizes=[20, 25, 18], covariate=True)
    kw = dict(covariates=["c"], random_intercept=True, pooling={"ls": "shared"})
    h = HierarchicalGP(df, "t", "y", "subject", **kw, approx="hsgp",
                       approx_options={"m": 12, "c": 2.5})  # fmt: skip
    exact = HierarchicalGP(df, "t", "y", "subject", **kw)
    names = [v.name for v in h.model.value_vars]
    assert names == [v.name for v in exact.model.value_vars]
    assert sorted(n.removesuffix("_log__") for n in names) == sorted(h.hyperparameters)
    rng = np.random.default_rng(7)
    fns = [(model, model.model.compile_logp(mode=EAGER_MODE),
            model.model.compile_logp(vars=model.model.observed_RVs, mode=EAGER_MODE))
           for model in (h, exact)]  # fmt: skip
    start = h.model.initial_point()
    for _ in range(3):
        point = {k: start[k] + rng.normal(scale=0.3, size=np.shape(start[k])) for k in names}
        params = {n: np.exp(point[f"{n}_log__"]) if f"{n}_log__" in point else point[n]
                  for n in h.hyperparameters}  # fmt: skip
        logps = []
        for model, total, observed in fns:
            obs = observed(point)
            assert obs == pytest.approx(model.log_marginal_likelihood(params), abs=1e-8)
            logps.append(total(point) - obs)
        assert logps[0] == pytest.approx(logps[1], abs=1e-10)


def test_nuts_draws_on_the_hsgp_path_give_exact_loo_and_mixed_predictions():
    """What ``sample()`` adds to NUTS's draws on the HSGP path, at four given draws (2 chains x 2
    draws, as the sampler returns them): the pointwise ``log_likelihood`` group is each draw's
    exact LOO of the HSGP model (``point_loo``, checked against the dense inverse above), and
    predictions for a known group are the mixture of the draws' Gaussian conditionals (laws of
    total expectation and variance); a new group is wider. The density NUTS samples is checked
    exactly by the test above; NUTS itself on this path (3 x 120 points, m = 24, 150 + 200
    draws: r-hat < 1.05, the noise sd recovered) is ``validation/tests/
    test_hierarchical_hsgp_long.py`` (a short run costs ~100 s here, nearly all compilation)."""
    import arviz as az

    from bayes_gp.inference.sampling import NutsRun

    df = _panel(sizes=[20, 25, 18])
    h = HierarchicalGP(df, "t", "y", "subject", pooling={"ls": "shared"}, approx="hsgp",
                       approx_options={"m": 12, "c": 2.5})  # fmt: skip
    names = [v.name for v in h.model.value_vars]
    start = h.model.initial_point()
    rng = np.random.default_rng(11)
    draws = []
    for _ in range(4):
        point = {k: start[k] + rng.normal(scale=0.2, size=np.shape(start[k])) for k in names}
        draws.append({n: np.exp(point[f"{n}_log__"]) if f"{n}_log__" in point else point[n]
                      for n in h.hyperparameters})  # fmt: skip
    posterior = {n: np.array([[d[n] for d in draws[:2]], [d[n] for d in draws[2:]]])
                 for n in h.hyperparameters}  # fmt: skip
    run = NutsRun(h.model)
    run.options = {"log_likelihood": True}
    idata = h._nuts_result(az.from_dict({"posterior": posterior}), run, 0)
    ll = np.asarray(idata["log_likelihood"]["y"]).reshape(4, -1)
    for k, d in enumerate(draws):
        np.testing.assert_allclose(ll[k], h.point_loo(_fit(d))[1], rtol=1e-10, atol=1e-12)
    new = pd.DataFrame({"t": [2.0, 5.0, 2.0], "subject": ["s1", "s1", "new"]})
    pred = h.predict(new, idata)
    assert pred.extra["n_draws"] == 4
    per = [h.predict(new[:2], _fit(d)) for d in draws]
    means, variances = np.array([p.mean for p in per]), np.array([p.var for p in per])
    np.testing.assert_allclose(pred.mean[:2], means.mean(0), rtol=1e-10)
    np.testing.assert_allclose(pred.var[:2], variances.mean(0) + means.var(0), rtol=1e-10)
    assert np.all(np.isfinite(pred.mean)) and pred.sd[2] > pred.sd[0]
