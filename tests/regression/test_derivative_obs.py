"""Derivative observations in GPRegression (gradient-enhanced GP, R&W §9.4 eq. 9.1; Solak et al.
2003): the joint Gram matrix of values and derivatives against finite differences of the kernel,
the log marginal likelihood against scipy's multivariate normal on the stacked vector, the
predictions of f and f' against a NumPy transcription of the joint conditional (R&W eqs.
2.25-2.26), the variance they remove, a MAP fit of sin(x) with and without gradients, a short
NUTS run, and the refusals."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from scipy.stats import multivariate_normal

from bayes_gp import GPRegression
from bayes_gp import kernels as K
from bayes_gp.inference import MapFit

# 2-D inputs: values at X, derivatives along x0 and x1 at dX (two of them at inputs of X, and
# one input with both components, so the zero-lag limits and the mixed d != e blocks are used)
X2 = np.array([[0.0, 0.0], [1.0, 0.5], [0.4, 1.6], [2.0, 1.2], [1.5, 2.1]])
Y2 = np.sin(X2[:, 0]) + np.cos(X2[:, 1])
DX2 = np.array([[1.0, 0.5], [0.7, 0.9], [0.7, 0.9], [2.4, 0.3], [0.4, 1.6]])
DIMS2 = np.array([1, 0, 1, 0, 0])
DY2 = np.where(DIMS2 == 0, np.cos(DX2[:, 0]), -np.sin(DX2[:, 1]))

#: every kind of differentiable catalogue kernel: smooth, Matérn 3/2 and 5/2 (zero-lag limits
#: by the closed moments), RQ, periodic, a scaled sum and a product (Leibniz's rule), in 2-D
KERNELS = {
    "expquad": lambda: 1.3 * K.ExpQuad(2, ls=[0.7, 1.1]),
    "matern32": lambda: K.Matern32(2, ls=[0.9, 0.6]),
    "matern52": lambda: K.Matern52(2, ls=0.8),
    "ratquad": lambda: K.RatQuad(2, alpha=1.3, ls=[0.7, 1.0]),
    "periodic": lambda: K.Periodic(2, period=2.0, ls=0.9),
    "sum": lambda: 2.0 * K.ExpQuad(2, ls=0.5) + K.Matern52(2, ls=[1.1, 0.7]),
    "product": lambda: K.ExpQuad(2, ls=1.5) * K.Periodic(2, period=2.0, ls=0.9),
}
NOISE, D_NOISE = 0.3, 0.2


def _model(kernel, **kw):
    return GPRegression(X2, Y2, kernel, noise=NOISE, dX=DX2, dy=DY2, d_dims=DIMS2,
                        d_noise=D_NOISE, **kw)  # fmt: skip


def _stacked_order(model):
    """Rows of the model's joint matrix in terms of the given order: values, then derivatives
    (the model orders those by dimension)."""
    n = model.X.shape[0]
    return np.concatenate([np.arange(n), n + model.derivative_obs.order])


def _fd_joint_gram(model, h):
    """[K, dK/dx'_e; dK/dx_d, d2K/dx_d dx'_e] of the given rows by central differences of the
    model's compiled kernel (step h in each argument)."""
    kfn = model._compiled("fd_kernel", model._cov)

    def k(A, B):
        return kfn(np.vstack([A, B]))[: A.shape[0], A.shape[0] :]

    def e(dim):
        u = np.zeros(2)
        u[dim] = h
        return u

    n, m = X2.shape[0], DX2.shape[0]
    G = np.empty((n + m, n + m))
    G[:n, :n] = k(X2, X2)
    for j in range(m):
        b, ub = DX2[j : j + 1], e(DIMS2[j])
        G[:n, n + j] = ((k(X2, b + ub) - k(X2, b - ub)) / (2 * h))[:, 0]
        for i in range(m):
            a, ua = DX2[i : i + 1], e(DIMS2[i])
            G[n + i, n + j] = (k(a + ua, b + ub) - k(a + ua, b - ub) - k(a - ua, b + ub)
                               + k(a - ua, b - ub))[0, 0] / (4 * h * h)  # fmt: skip
    G[n:, :n] = G[:n, n:].T
    return G


@pytest.mark.parametrize("name", list(KERNELS))
def test_joint_gram_equals_finite_differences_of_k(name):
    """The joint covariance of [y; g] minus its noise diagonal equals the central differences
    of k (h = 1e-4, Richardson-extrapolated with h/2: truncation ~1e-8 times k's fourth
    derivative, rounding ~1e-8; the O(h) error of Matérn 3/2's |r|^3 term at zero lag is
    removed by the extrapolation) to 1e-6 relative."""
    model = _model(KERNELS[name]())
    m, C = model.marginal.train([])
    n = X2.shape[0]
    diag = np.r_[np.full(n, NOISE**2), np.full(DX2.shape[0], D_NOISE**2)] + model.jitter
    idx = _stacked_order(model)
    gram = C - np.diag(diag)
    h = 1e-4
    fd = 2 * _fd_joint_gram(model, h / 2) - _fd_joint_gram(model, h)
    expected = fd[np.ix_(idx, idx)]
    scale = np.max(np.abs(expected))
    np.testing.assert_allclose(gram, expected, rtol=1e-6, atol=1e-6 * scale)
    np.testing.assert_allclose(gram, gram.T, rtol=0, atol=1e-14 * scale)
    np.testing.assert_allclose(m, np.r_[np.full(n, Y2.mean()), np.zeros(DX2.shape[0])])


# ---------------------------------------------------------------- NumPy transcription (SE)
def _se_blocks(A, B, dims_b, ls, eta, dims_a=None):
    """Squared exponential k = eta^2 exp(-sum_k (a_k - b_k)^2 / 2 l_k^2) and its derivatives:
    dk/db_e = k (a_e - b_e) / l_e^2; d2k/da_d db_e = k (delta_de / l_d^2 - (a_d - b_d)(a_e -
    b_e) / (l_d^2 l_e^2)). ``(k(A, B), dk/db_{e_j}(A, B_j), d2k/da_{d_i} db_{e_j})``."""
    ls = np.broadcast_to(np.asarray(ls, float), (A.shape[1],))
    diff = (A[:, None, :] - B[None, :, :]) / ls**2  # (a - b) / l^2
    k = eta**2 * np.exp(-0.5 * np.sum((A[:, None, :] - B[None, :, :]) ** 2 / ls**2, axis=2))
    cols = np.arange(B.shape[0])[None, :]
    dk_db = k * diff[:, cols[0], dims_b]
    if dims_a is None:
        return k, dk_db, None
    rows = np.arange(A.shape[0])[:, None]
    same = (dims_a[:, None] == dims_b[None, :]) / ls[dims_a][:, None] ** 2
    d2 = k * (same - diff[rows, cols, dims_a[:, None]] * diff[rows, cols, dims_b[None, :]])
    return k, dk_db, d2


def _se_joint(X, dX, dims, ls, eta):
    K_ff = _se_blocks(X, X, np.zeros(X.shape[0], int), ls, eta)[0]
    _, K_fd, _ = _se_blocks(X, dX, dims, ls, eta)
    _, _, K_dd = _se_blocks(dX, dX, dims, ls, eta, dims_a=dims)
    return np.block([[K_ff, K_fd], [K_fd.T, K_dd]])


PARAMS = {"ls": np.array([0.8, 1.3]), "eta": 1.4, "sigma": 0.25, "sigma_d": 0.15}


def _se_model():
    return GPRegression(X2, Y2, "expquad", ard=True, dX=DX2, dy=DY2, d_dims=DIMS2)


def test_log_marginal_likelihood_equals_scipy_on_the_stacked_vector():
    """log p([y; g]) of the model (the compiled PyMC density and the cached factorisation)
    equals scipy's multivariate normal with the closed-form SE covariances to 1e-10."""
    model = _se_model()
    n, m = X2.shape[0], DX2.shape[0]
    C = _se_joint(X2, DX2, DIMS2, PARAMS["ls"], PARAMS["eta"])
    C += np.diag(np.r_[np.full(n, PARAMS["sigma"] ** 2), np.full(m, PARAMS["sigma_d"] ** 2)])
    C += model.jitter * np.eye(n + m)
    mean = np.r_[np.full(n, Y2.mean()), np.zeros(m)]
    expected = multivariate_normal(mean, C).logpdf(np.r_[Y2, DY2])
    value, grad = model.log_marginal_likelihood(PARAMS, eval_gradient=True)
    assert abs(value - expected) < 1e-10
    assert abs(model.marginal.log_marginal_likelihood(model._values(PARAMS)) - expected) < 1e-10
    # its gradient in sigma_d against a central difference of scipy's density
    h = 1e-6
    C_plus = C + np.diag(np.r_[np.zeros(n), np.full(m, (PARAMS["sigma_d"] + h) ** 2
                                                    - PARAMS["sigma_d"] ** 2)])  # fmt: skip
    C_minus = C + np.diag(np.r_[np.zeros(n), np.full(m, (PARAMS["sigma_d"] - h) ** 2
                                                     - PARAMS["sigma_d"] ** 2)])  # fmt: skip
    fd = (multivariate_normal(mean, C_plus).logpdf(np.r_[Y2, DY2])
          - multivariate_normal(mean, C_minus).logpdf(np.r_[Y2, DY2])) / (2 * h)  # fmt: skip
    np.testing.assert_allclose(grad["sigma_d"], fd, rtol=1e-6)


def test_predictions_equal_the_joint_conditional():
    """Mean and variance of f_* and of df_*/dx_0 and df_*/dx_1 given [y; g] equal R&W eqs.
    2.25-2.26 with the joint covariance, transcribed in NumPy (1e-9)."""
    model = _se_model()
    fit = MapFit(PARAMS, 0.0, True)
    n, m = X2.shape[0], DX2.shape[0]
    ls, eta = PARAMS["ls"], PARAMS["eta"]
    C = _se_joint(X2, DX2, DIMS2, ls, eta)
    C += np.diag(np.r_[np.full(n, PARAMS["sigma"] ** 2), np.full(m, PARAMS["sigma_d"] ** 2)])
    C += model.jitter * np.eye(n + m)
    z = np.r_[Y2 - Y2.mean(), DY2]
    Xs = np.array([[0.2, 0.3], [1.0, 0.5], [0.7, 0.9], [1.8, 1.9]])
    # f_*: cov(f_*, [y; g]) = [k(x*, X), dk(x*, dX_j)/db_{e_j}]
    _, k_fd, _ = _se_blocks(Xs, DX2, DIMS2, ls, eta)
    k_ff = _se_blocks(Xs, X2, np.zeros(n, int), ls, eta)[0]
    ks = np.hstack([k_ff, k_fd])
    mean = Y2.mean() + ks @ np.linalg.solve(C, z)
    var = eta**2 - np.einsum("ij,ji->i", ks, np.linalg.solve(C, ks.T))
    pred = model.predict(Xs, fit)
    np.testing.assert_allclose(pred.mean, mean, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(pred.var, var, rtol=1e-9, atol=1e-9)
    # df_*/dx_d: cov with y is dk(x*, X)/da_d = -dk/db_d; with g the mixed second derivative
    for d in (0, 1):
        dims_s = np.full(Xs.shape[0], d)
        _, dk_val, _ = _se_blocks(X2, Xs, dims_s, ls, eta)  # dk(X, x*)/db_d
        _, _, d2 = _se_blocks(Xs, DX2, DIMS2, ls, eta, dims_a=dims_s)
        ks_d = np.hstack([dk_val.T, d2])
        mean_d = ks_d @ np.linalg.solve(C, z)
        var_d = eta**2 / ls[d] ** 2 - np.einsum("ij,ji->i", ks_d, np.linalg.solve(C, ks_d.T))
        pd_ = model.predict_derivative(Xs, fit, dim=d)
        np.testing.assert_allclose(pd_.mean, mean_d, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(pd_.var, var_d, rtol=1e-9, atol=1e-9)


def test_derivative_observations_reduce_the_variance_where_they_are():
    """1-D, fixed hyperparameters: gradients observed (sd 0.01) at 1.5 and 4.5, between the
    value observations at 0, 3 and 6, shrink the variance of f' there to under 1% of what it is
    without, and never increase that of f or f' anywhere on a grid (f's at the gradients'
    inputs: 4% less)."""
    x = np.array([0.0, 3.0, 6.0])
    y = np.sin(x)
    dx = np.array([1.5, 4.5])
    params = {"ls": 1.0, "eta": 1.0}
    plain = GPRegression(x, y, "expquad", noise=0.05)
    grad = GPRegression(x, y, "expquad", noise=0.05, dX=dx, dy=np.cos(dx), d_noise=0.01)
    fit = MapFit(params, 0.0, True)
    grid = np.linspace(0, 6, 25)
    v0, v1 = plain.predict(grid, fit).var, grad.predict(grid, fit).var
    assert np.all(v1 <= v0 + 1e-12)
    at = plain.predict(dx, fit).var, grad.predict(dx, fit).var
    assert np.all(at[1] < 0.99 * at[0])  # 0.760 against 0.792: a slope says little of the level
    d0 = plain.predict_derivative(dx, fit).var
    d1 = grad.predict_derivative(dx, fit).var
    assert np.all(d1 < 0.01 * d0)
    assert np.all(grad.predict_derivative(grid, fit).var <= plain.predict_derivative(grid, fit).var
                  + 1e-12)  # fmt: skip


def test_map_fit_of_sin_with_gradients_recovers_the_function_better():
    """sin(x) on [0, 2 pi]: 5 values (noise sd 0.05) alone, MAP RMSE against sin on a grid
    0.121; with 8 noisy gradients cos(x) (sd 0.05) as well, 0.046 (asserted: under 0.07 and
    under half of it); f' likewise (seed 0)."""
    rng = np.random.default_rng(0)
    x = np.linspace(0, 2 * np.pi, 5)
    y = np.sin(x) + 0.05 * rng.standard_normal(5)
    dx = np.linspace(0.3, 2 * np.pi - 0.3, 8)
    dy = np.cos(dx) + 0.05 * rng.standard_normal(8)
    grid = np.linspace(0, 2 * np.pi, 80)
    priors = {"sigma": pm.Gamma.dist(2.0, 40.0)}  # keeps the MAP noise off 0
    plain = GPRegression(x, y, "expquad", priors=priors)
    fit0 = plain.fit_map(n_restarts=3, random_seed=0)
    grad = GPRegression(x, y, "expquad", priors=priors, dX=dx, dy=dy)
    fit1 = grad.fit_map(n_restarts=3, random_seed=0)
    rmse0 = np.sqrt(np.mean((plain.predict(grid, fit0).mean - np.sin(grid)) ** 2))
    rmse1 = np.sqrt(np.mean((grad.predict(grid, fit1).mean - np.sin(grid)) ** 2))
    assert rmse1 < 0.07 and rmse1 < 0.5 * rmse0, (rmse0, rmse1)
    d0 = plain.predict_derivative(grid, fit0).mean
    d1 = grad.predict_derivative(grid, fit1).mean
    assert np.sqrt(np.mean((d1 - np.cos(grid)) ** 2)) < 0.5 * np.sqrt(
        np.mean((d0 - np.cos(grid)) ** 2)
    )
    assert 0.0 < float(fit1.params["sigma_d"]) < 0.2


def test_full_gradients_and_known_noise_equal_the_one_column_form():
    """dy of shape (m, D) is the m * D derivatives row by row; d_noise an array of dy's shape
    is known per derivative: the same model as the 1-D form with d_dims (log density to
    1e-12), and LOO has one term per value."""
    dX = np.array([[0.5, 0.5], [1.5, 1.0]])
    G = np.array([[0.1, -0.2], [0.3, 0.4]])
    S = np.array([[0.1, 0.2], [0.3, 0.4]])
    full = GPRegression(X2, Y2, "expquad", ard=True, dX=dX, dy=G, d_noise=S)
    flat = GPRegression(X2, Y2, "expquad", ard=True, dX=np.repeat(dX, 2, axis=0),
                        dy=G.ravel(), d_dims=[0, 1, 0, 1], d_noise=S.ravel())  # fmt: skip
    p = {"ls": np.array([0.8, 1.3]), "eta": 1.4, "sigma": 0.25}
    a, b = full.log_marginal_likelihood(p), flat.log_marginal_likelihood(p)
    assert abs(a - b) < 1e-12
    assert full.derivative_obs.m == 4 and "sigma_d" not in full.hyperparameters
    assert full.point_loo(MapFit(p, 0.0, True))[1].shape == (X2.shape[0],)
    rows = dict(full.describe())
    assert rows["derivative observations m"].startswith("4 (along x0, x1; noise known")
    assert "jointly with the derivatives" in rows["likelihood"]


def test_nuts_conditions_on_the_derivatives():
    """A short NUTS run (1 chain, 50 + 50 steps) conditions on the derivatives: the mixture's
    f' at their inputs follows them (1-D sin data, their noise known), f follows sin, and the
    log-likelihood group holds the n values' LOO terms."""
    rng = np.random.default_rng(3)
    x = np.linspace(0, 2 * np.pi, 6)
    y = np.sin(x) + 0.05 * rng.standard_normal(6)
    dx = np.array([1.0, 2.5, 4.0, 5.5])
    model = GPRegression(x, y, "expquad", dX=dx, dy=np.cos(dx), d_noise=0.02)
    # PyTensor's Python linker: numba's compilation of the derivative graphs' gradient took 20 s
    # (the C linker's 27 s), the whole run here 7 s
    idata = model.sample(draws=50, tune=50, chains=1, random_seed=1, sampler="pymc",
                         compile_kwargs={"mode": "FAST_COMPILE"})  # fmt: skip
    assert idata["log_likelihood"]["y"].shape[-1] == 6
    d = model.predict_derivative(dx, idata, max_draws=50)
    np.testing.assert_allclose(d.mean, np.cos(dx), atol=0.05)
    f = model.predict(x, idata)
    np.testing.assert_allclose(f.mean, np.sin(x), atol=0.15)


# ----------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    ("kernel", "match"),
    [
        ("matern12", "nu > 1"),
        ("exponential", "nu > 1"),
        ("pp0", "q >= 1"),
        ("expquad + exponential", "nu > 1"),
        (K.GammaExponential(1, gamma=1.5, ls=1.0), "gamma < 2"),
    ],
)
def test_refuses_a_kernel_without_derivatives(kernel, match):
    x = np.linspace(0, 5, 6)
    with pytest.raises(ValueError, match=match):
        GPRegression(x, np.sin(x), kernel, dX=[1.0], dy=[0.5])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"dX": [1.0, 2.0], "dy": [0.5]}, "dX` has 2 rows but `dy` has 1"),
        ({"dX": [1.0]}, "both `dX`"),
        ({"dy": [1.0]}, "both `dX`"),
        ({"d_noise": 0.1}, "give `dX` and `dy` too"),
        ({"dX": [1.0, 2.0], "dy": [0.5, np.nan]}, "NaN or infinite"),
        ({"dX": [[1.0, 2.0]], "dy": [0.5]}, "`dX` has 2 column"),
        ({"dX": [1.0], "dy": [0.5], "d_noise": -0.1}, "non-negative"),
        ({"dX": [1.0, 2.0], "dy": [0.5, 0.1], "d_noise": [0.1, -1.0]}, "entry 1"),
        ({"dX": [1.0, 2.0], "dy": [0.5, 0.1], "d_noise": [0.1]}, "one standard deviation"),
        ({"dX": [1.0], "dy": [0.5], "d_dims": 1}, r"column indices in 0\.\.0"),
        ({"dX": [1.0], "dy": [0.5], "approx": "hsgp"}, "leave `approx` out"),
        ({"dX": [1.0], "dy": [0.5], "structure": "quasiseparable"}, "quasiseparable"),
        ({"dX": [1.0], "dy": [0.5], "priors": {"sigma_e": 1.0}}, "unknown names"),
    ],
)
def test_refuses_bad_derivative_observations(kwargs, match):
    x = np.linspace(0, 5, 6)
    with pytest.raises(ValueError, match=match):
        GPRegression(x, np.sin(x), "expquad", **kwargs)


def test_refuses_bad_gradients_in_two_dimensions():
    with pytest.raises(ValueError, match="say which one"):
        GPRegression(X2, Y2, "expquad", dX=DX2, dy=DY2)
    with pytest.raises(ValueError, match=r"shape \(rows of dX, D\)"):
        GPRegression(X2, Y2, "expquad", dX=DX2, dy=np.zeros((5, 3)))
    with pytest.raises(ValueError, match="leave `d_dims` out"):
        GPRegression(X2, Y2, "expquad", dX=DX2, dy=np.zeros((5, 2)), d_dims=0)
    with pytest.raises(ValueError, match="not an input"):
        GPRegression(X2, Y2, "expquad", dX=DX2, dy=DY2, d_dims="z")
    with pytest.raises(ValueError, match="sparse"):
        GPRegression(X2, Y2, "pp2", dX=DX2, dy=DY2, d_dims=DIMS2, sparse=True)
