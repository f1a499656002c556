"""The O(n) quasiseparable exact GP (bayes_gp.solvers.quasisep) against the dense exact GP.

References are transcribed from the equations, not from the module: the Matérn kernels from R&W
eqs. (4.16)-(4.17), the damped oscillator from Foreman-Mackey et al. (2017) (the three regimes as
in tinygp's documentation of ``quasisep.SHO``), the cosine
from PyMC's code; the dense log marginal likelihood is a NumPy Cholesky (R&W eq. 2.30) and its
gradient is R&W eq. (5.9), 1/2 tr((alpha alpha^T - C^-1) dC/dtheta), with dC/dtheta from the
complex step (exact to rounding). Inputs are unsorted and contain repeats throughout; the
predictions are R&W eqs. (2.25)-(2.26) in closed form.
"""

from __future__ import annotations

import math

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy.linalg import cho_factor, cho_solve, lapack

from bayes_gp import kernels as K
from bayes_gp import op_backends
from bayes_gp.kernels.statespace import (
    PT,
    ConstantTerm,
    CosineTerm,
    MaternTerm,
    SHOTerm,
    StateSpaceKernel,
    representable,
    to_term,
)
from bayes_gp.solvers.likelihood import marginal_normal
from bayes_gp.solvers.quasisep import (
    QuasisepLogp,
    quasisep_inverse,
    quasisep_logp,
    quasisep_logp_grad,
    quasisep_marginal,
    quasisep_predict,
)
from tests.helpers import PY_MODE

RTOL = 1e-9
MODE = PY_MODE  # the Python linker (FAST_COMPILE compiled C thunks: 5-10 s a case on a fresh HOME)
H = 1e-30  # complex step


# ------------------------------------------------------------------ reference kernels
def k_matern(nu, eta, ell, tau):
    """R&W eq. (4.17): nu = 1/2 (exponential), 3/2, 5/2; r = |tau| / ell."""
    r = np.abs(tau) / ell
    if nu == 0.5:
        return eta**2 * np.exp(-r)
    if nu == 1.5:
        s = math.sqrt(3.0) * r
        return eta**2 * (1.0 + s) * np.exp(-s)
    if nu == 2.5:
        s = math.sqrt(5.0) * r
        return eta**2 * (1.0 + s + s**2 / 3.0) * np.exp(-s)
    raise ValueError(nu)


def k_matern_half_integer(p, tau):
    """R&W eq. (4.16), nu = p + 1/2, ell = 1."""
    nu = p + 0.5
    r = np.abs(tau)
    tot = 0.0
    for i in range(p + 1):
        c = math.factorial(p + i) / (math.factorial(i) * math.factorial(p - i))
        tot = tot + c * (math.sqrt(8.0 * nu) * r) ** (p - i)
    return np.exp(-math.sqrt(2.0 * nu) * r) * math.factorial(p) / math.factorial(2 * p) * tot


def k_sho(sigma, w0, Q, tau):
    """The SHO kernel of Foreman-Mackey et al. (2017) with S0 = sigma^2 / (w0 Q)."""
    S0 = sigma**2 / (w0 * Q)
    t = np.abs(tau)
    if np.real(Q) > 0.5:
        eta = w0 * np.sqrt(1.0 - 1.0 / (4.0 * Q**2))
        trig = np.cos(eta * t) + np.sin(eta * t) / (2.0 * eta * Q / w0)
    elif np.real(Q) < 0.5:
        eta = w0 * np.sqrt(1.0 / (4.0 * Q**2) - 1.0)
        trig = np.cosh(eta * t) + np.sinh(eta * t) / (2.0 * eta * Q / w0)
    else:
        trig = 1.0 + w0 * t
    return S0 * w0 * Q * np.exp(-w0 * t / (2.0 * Q)) * trig


def k_cos(period, tau):
    """PyMC's Cosine: cos(2 pi |tau| / ell)."""
    return np.cos(2.0 * np.pi * tau / period)


# Each case: (term from a dict of PyTensor scalars, reference kernel from a dict of numbers,
# hyperparameter values; "sigma" is the noise standard deviation).
CASES = {
    "matern12": (
        lambda p: MaternTerm(0.5, eta=p["eta"], ls=p["ell"]),
        lambda p, t: k_matern(0.5, p["eta"], p["ell"], t),
        {"eta": 1.3, "ell": 2.1, "sigma": 0.35},
    ),
    "matern32": (
        lambda p: MaternTerm(1.5, eta=p["eta"], ls=p["ell"]),
        lambda p, t: k_matern(1.5, p["eta"], p["ell"], t),
        {"eta": 0.8, "ell": 1.7, "sigma": 0.2},
    ),
    "matern52": (
        lambda p: MaternTerm(2.5, eta=p["eta"], ls=p["ell"]),
        lambda p, t: k_matern(2.5, p["eta"], p["ell"], t),
        {"eta": 1.1, "ell": 3.2, "sigma": 0.3},
    ),
    "sum_52_12": (
        lambda p: (
            MaternTerm(2.5, eta=p["eta"], ls=p["ell"])
            + MaternTerm(0.5, eta=p["eta2"], ls=p["ell2"])
        ),
        lambda p, t: k_matern(2.5, p["eta"], p["ell"], t) + k_matern(0.5, p["eta2"], p["ell2"], t),
        {"eta": 1.2, "ell": 4.0, "eta2": 0.4, "ell2": 0.6, "sigma": 0.25},
    ),
    "product_32_cos": (
        lambda p: MaternTerm(1.5, eta=p["eta"], ls=p["ell"]) * CosineTerm(p["period"]),
        lambda p, t: k_matern(1.5, p["eta"], p["ell"], t) * k_cos(p["period"], t),
        {"eta": 1.0, "ell": 6.0, "period": 2.3, "sigma": 0.3},
    ),
    "sho_times_cos": (
        lambda p: SHOTerm(sigma=p["s"], w0=p["w0"], Q=p["Q"]) * CosineTerm(p["period"]),
        lambda p, t: k_sho(p["s"], p["w0"], p["Q"], t) * k_cos(p["period"], t),
        {"s": 0.9, "w0": 1.4, "Q": 3.0, "period": 7.0, "sigma": 0.3},
    ),
    "matern32_plus_const": (
        lambda p: MaternTerm(1.5, eta=p["eta"], ls=p["ell"]) + ConstantTerm(p["c"]),
        lambda p, t: k_matern(1.5, p["eta"], p["ell"], t) + p["c"],
        {"eta": 0.7, "ell": 1.1, "c": 0.5, "sigma": 0.3},
    ),
    "sho_overdamped": (
        lambda p: SHOTerm(sigma=p["s"], w0=p["w0"], Q=p["Q"]),
        lambda p, t: k_sho(p["s"], p["w0"], p["Q"], t),
        {"s": 1.1, "w0": 2.0, "Q": 0.3, "sigma": 0.2},
    ),
}


def data(n: int, seed: int, span: float = 60.0):
    """Unsorted inputs with repeats (a triple and a pair) and targets."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, span, n)
    x[11:14] = x[10]
    x[-1] = x[0]
    y = np.sin(x / 2.0) + 0.3 * rng.normal(size=n)
    return x, y


def dense_logp_grad(kref, theta: dict, x: np.ndarray, y: np.ndarray):
    """R&W eq. (2.30) by Cholesky and eq. (5.9) with complex-step dC/dtheta (row blocks)."""
    n = x.shape[0]
    C = kref(theta, x[:, None] - x[None, :]) + theta["sigma"] ** 2 * np.eye(n)
    L = cho_factor(C, lower=True)
    alpha = cho_solve(L, y)
    logp = -0.5 * y @ alpha - np.sum(np.log(np.diag(L[0]))) - 0.5 * n * math.log(2 * math.pi)
    Ci, info = lapack.dpotri(L[0], lower=1)
    assert info == 0
    Ci = np.tril(Ci) + np.tril(Ci, -1).T
    grads = {}
    for name, value in theta.items():
        if name == "sigma":
            grads[name] = 0.5 * (alpha @ alpha - np.trace(Ci)) * 2.0 * value
            continue
        shifted = {**theta, name: value + 1j * H}
        tot = 0.0
        for s in range(0, n, 1000):
            blk = slice(s, min(s + 1000, n))
            dK = kref(shifted, x[blk, None] - x[None, :]).imag / H
            tot += np.sum((np.outer(alpha[blk], alpha) - Ci[blk]) * dK)
        grads[name] = 0.5 * tot
    return logp, grads


def quasisep_logp_grad_pt(build, theta: dict, x, y):
    """The module's log density and its PyTensor gradient w.r.t. every hyperparameter."""
    sym = {k: pt.dscalar(k) for k in theta}
    lp = quasisep_logp(x, pt.as_tensor_variable(y), build(sym), sym["sigma"] ** 2)
    f = pytensor.function(list(sym.values()), [lp, *pt.grad(lp, list(sym.values()))], mode=MODE)
    out = [float(v) for v in f(*theta.values())]
    return out[0], dict(zip(theta, out[1:], strict=True))


# ------------------------------------------------------------------------ the terms
@pytest.mark.parametrize("p", [0, 1, 2, 3, 4])
def test_matern_term_is_the_half_integer_matern_kernel(p):
    tau = np.linspace(-4.0, 4.0, 41)
    term = MaternTerm(p + 0.5, eta=1.0, ls=1.0)
    np.testing.assert_allclose(term.value(tau), k_matern_half_integer(p, tau), rtol=1e-13)


@pytest.mark.parametrize(
    "term",
    [
        MaternTerm(0.5, eta=1.3, ls=0.7),
        MaternTerm(1.5, eta=0.9, ls=2.0),
        MaternTerm(2.5, eta=1.1, ls=1.3),
        MaternTerm(4.5, eta=1.0, ls=0.8),
        SHOTerm(sigma=1.2, w0=1.7, Q=2.0),
        SHOTerm(sigma=1.2, w0=1.7, Q=0.5),
        SHOTerm(sigma=1.2, w0=1.7, Q=0.3),
        CosineTerm(2.5),
        MaternTerm(2.5, eta=1.0, ls=2.0) * CosineTerm(3.0) + 0.5 * MaternTerm(0.5, eta=1.0, ls=0.4),
    ],
    ids=repr,
)
def test_state_space_form_reproduces_the_kernel(term):
    r"""k(tau) = h^T A(tau) P h, A(a + b) = A(a) A(b) (a matrix exponential), and the
    process noise P - A P A^T of every step is positive semi-definite."""
    tau = np.array([0.0, 0.3, 1.1, 2.9, 7.5])
    A = term.transition(tau)
    P, h = term.stationary_covariance(), term.observation()
    np.testing.assert_allclose(np.einsum("j,njk,kl,l->n", h, A, P, h), term.value(tau), atol=1e-14)
    np.testing.assert_allclose(A[0], np.eye(term.dim), atol=1e-15)
    np.testing.assert_allclose(A[1] @ A[2], term.transition(np.array([1.4]))[0], atol=1e-14)
    for Ak in A:
        assert np.linalg.eigvalsh(P - Ak @ P @ Ak.T).min() > -1e-12


@pytest.mark.parametrize("Q", [3.0, 0.5, 0.5 + 1e-9, 0.2])
def test_sho_term_matches_foreman_mackey_2017(Q):
    tau = np.linspace(0.0, 6.0, 31)
    got = SHOTerm(sigma=0.8, w0=1.3, Q=Q).value(tau)
    np.testing.assert_allclose(got, k_sho(0.8, 1.3, Q, tau), rtol=1e-12, atol=1e-15)


# ---------------------------------------------------------- log likelihood and gradient
def check_against_dense(case: str, n: int) -> None:
    """The quasiseparable log likelihood and its gradient of ``CASES[case]`` on ``n`` simulated
    points equal the dense exact GP's to ``RTOL`` (here and in
    validation/tests/test_quasisep_long.py at n = 5000)."""
    build, kref, theta = CASES[case]
    x, y = data(n, seed=n + len(case), span=n / 10.0)
    want, want_g = dense_logp_grad(kref, theta, x, y)
    got, got_g = quasisep_logp_grad_pt(build, theta, x, y)
    np.testing.assert_allclose(got, want, rtol=RTOL)
    for name in theta:
        np.testing.assert_allclose(got_g[name], want_g[name], rtol=RTOL, err_msg=name)


@pytest.mark.parametrize("case", list(CASES))
def test_logp_and_gradient_equal_the_dense_exact_gp(case):
    """Every case at n = 400 (the n = 5000 versions, rounding along a long recursion, are in
    validation/tests/test_quasisep_long.py)."""
    check_against_dense(case, n=400)


def test_all_inputs_repeated_stay_finite_with_noise_and_fail_cleanly_without():
    x = np.full(30, 2.5)
    y = np.random.default_rng(0).normal(size=30)
    build, kref, theta = CASES["matern52"]
    want, want_g = dense_logp_grad(kref, theta, x, y)
    got, got_g = quasisep_logp_grad_pt(build, theta, x, y)
    np.testing.assert_allclose(got, want, rtol=RTOL)
    for name in theta:
        np.testing.assert_allclose(got_g[name], want_g[name], rtol=RTOL, err_msg=name)
    # no noise: C is singular, the log density is -inf (a rejected NUTS step), not an error
    got, got_g = quasisep_logp_grad_pt(build, {**theta, "sigma": 0.0}, x, y)
    assert got == -np.inf and np.isnan(got_g["eta"])


def test_heteroscedastic_noise_vector_in_the_original_order():
    x, y = data(300, seed=5)
    noise = np.random.default_rng(6).uniform(0.05, 0.3, 300)
    term = MaternTerm(1.5, eta=1.0, ls=2.0)
    C = k_matern(1.5, 1.0, 2.0, x[:, None] - x[None, :]) + np.diag(noise)
    L = cho_factor(C, lower=True)
    want = -0.5 * y @ cho_solve(L, y) - np.sum(np.log(np.diag(L[0]))) - 150 * math.log(2 * math.pi)
    got = quasisep_logp(x, y, term, noise).eval(mode=MODE)
    np.testing.assert_allclose(float(got), want, rtol=RTOL)


def test_op_gradient_matches_finite_differences_of_its_own_inputs():
    """The hand-written reverse sweep against central differences of the forward recursion,
    for every input (c, B, p, q, d, r) in random directions."""
    rng = np.random.default_rng(3)
    x, y = data(60, seed=3, span=10.0)
    term = MaternTerm(1.5, eta=1.0, ls=1.5) * CosineTerm(4.0)
    order = np.argsort(x, kind="stable")
    dt = np.diff(x[order], prepend=x[order][:1])
    P, h = term.stationary_covariance(), term.observation()
    args = [
        term.transition_coefficients(dt),
        term.transition_basis(),
        h,
        P @ h,
        np.full(60, h @ P @ h + 0.1),
        y[order],
    ]
    _, *grads = quasisep_logp_grad(*args)
    for k, g in enumerate(grads):
        v = rng.normal(size=args[k].shape)
        eps = 1e-6
        plus = [a + eps * v if j == k else a for j, a in enumerate(args)]
        minus = [a - eps * v if j == k else a for j, a in enumerate(args)]
        fd = (float(quasisep_logp_grad(*plus)[0]) - float(quasisep_logp_grad(*minus)[0])) / (
            2 * eps
        )
        np.testing.assert_allclose(np.sum(g * v), fd, rtol=1e-6, err_msg=f"input {k}")


@pytest.mark.parametrize("mode", ["NUMBA", "JAX"])
def test_numba_and_jax_backends_agree_with_the_python_one(mode):
    """The Op inside a whole-graph numba and JAX compilation (the kernel with the fewest
    parameters that has a two-dimensional state: compiling the graph of a sum of kernels and
    its gradient took 45 s of CPU in numba; the Op's dispatch is the same for every term)."""
    if mode == "JAX":
        pytest.importorskip("jax")
        op_backends.ensure("jax")
    build, _, theta = CASES["matern32"]
    x, y = data(200, seed=8)
    sym = {k: pt.dscalar(k) for k in theta}
    lp = quasisep_logp(x, pt.as_tensor_variable(y), build(sym), sym["sigma"] ** 2)
    outs = [lp, *pt.grad(lp, list(sym.values()))]
    got = pytensor.function(list(sym.values()), outs, mode=mode)(*theta.values())
    want = pytensor.function(list(sym.values()), outs, mode=MODE)(*theta.values())
    np.testing.assert_allclose([float(v) for v in got], [float(v) for v in want], rtol=1e-11)


# ------------------------------------------------------------------------ predictions
def test_predictions_equal_rw_2_25_2_26():
    x, y = data(700, seed=11, span=40.0)
    rng = np.random.default_rng(12)
    x_new = np.concatenate([rng.uniform(-5.0, 45.0, 60), x[[3, 10, 10]]])  # repeats, outside
    build, kref, theta = CASES["sho_times_cos"]
    term = build(theta)
    s2 = theta["sigma"] ** 2
    mean, var, cov = quasisep_predict(x, y, x_new, term, s2, mean=0.4, diag=False)
    Kxx = kref(theta, x[:, None] - x[None, :]) + s2 * np.eye(x.size)
    Ksx = kref(theta, x_new[:, None] - x[None, :])
    Kss = kref(theta, x_new[:, None] - x_new[None, :])
    L = cho_factor(Kxx, lower=True)
    want_mean = 0.4 + Ksx @ cho_solve(L, y - 0.4)  # R&W eq. (2.25)
    want_cov = Kss - Ksx @ cho_solve(L, Ksx.T)  # R&W eq. (2.26)
    scale = np.max(np.abs(want_mean))
    np.testing.assert_allclose(mean, want_mean, rtol=RTOL, atol=RTOL * scale)
    np.testing.assert_allclose(var, np.diag(want_cov), rtol=RTOL)
    np.testing.assert_allclose(cov, want_cov, rtol=RTOL, atol=RTOL * np.max(np.diag(want_cov)))
    _, var_y, _ = quasisep_predict(x, y, x_new, term, s2, include_noise=s2)
    np.testing.assert_allclose(var_y, np.diag(want_cov) + s2, rtol=RTOL)


# ----------------------------------------------------------------- kernels and models
# PyMC's own stationary kernels compute r = sqrt(r^2 + 1e-12): their Gram matrices are off by
# up to ~1e-6 near r = 0 (the terms are exact), hence the looser tolerance (third entry) there.
KERNELS = [
    (lambda: 1.7**2 * K.Matern52(1, ls=2.0), lambda t: k_matern(2.5, 1.7, 2.0, t)),
    (lambda: K.Matern32(1, ls=0.9), lambda t: k_matern(1.5, 1.0, 0.9, t)),
    (lambda: K.Exponential(1, ls=1.5), lambda t: k_matern(0.5, 1.0, 1.5, t)),
    (lambda: K.Matern(1, nu=3.5, ls=1.0), lambda t: k_matern_half_integer(3, t)),
    (lambda: pm.gp.cov.Matern12(1, ls=0.7), lambda t: k_matern(0.5, 1.0, 0.7, t), 2e-6),
    (lambda: pm.gp.cov.Exponential(1, ls=0.7), lambda t: k_matern(0.5, 1.0, 1.4, t), 2e-6),
    (
        lambda: K.Matern52(1, ls=3.0) * pm.gp.cov.Cosine(1, ls=2.0) + 0.3,
        lambda t: k_matern(2.5, 1.0, 3.0, t) * k_cos(2.0, t) + 0.3,
        1e-9,
    ),
    (
        lambda: StateSpaceKernel(SHOTerm(sigma=0.5, w0=2.0, Q=1.5)) + K.Matern12(1, ls=4.0),
        lambda t: k_sho(0.5, 2.0, 1.5, t) + k_matern(0.5, 1.0, 4.0, t),
    ),
]


@pytest.mark.parametrize("case", KERNELS, ids=range(len(KERNELS)))
def test_kernel_objects_map_onto_exact_terms(case):
    make, kref, *pymc_atol = case
    kernel = make()
    assert representable(kernel)
    x = np.linspace(0.0, 5.0, 9)
    tau = x[:, None] - x[None, :]
    np.testing.assert_allclose(to_term(kernel).value(tau), kref(tau), rtol=1e-13, atol=1e-15)
    gram = kernel(x[:, None]).eval(mode=MODE)
    np.testing.assert_allclose(
        gram, kref(tau), rtol=1e-12, atol=pymc_atol[0] if pymc_atol else 1e-15
    )


@pytest.mark.parametrize(
    "make,name",
    [
        (lambda: K.ExpQuad(1, ls=1.0), "ExpQuad"),
        (lambda: K.Matern32(1, ls=1.0) * K.Periodic(1, period=2.0, ls=1.0), "Periodic"),
        (lambda: K.Matern52(1, ls=1.0) + K.RatQuad(1, alpha=2.0, ls=1.0), "RatQuad"),
        (lambda: K.Matern(1, nu=2.0, ls=1.0), "Matern"),
        (lambda: K.Gibbs(1, lambda X: 1.0 + 0.0 * X), "Gibbs"),
    ],
)
def test_unrepresentable_kernel_raises_naming_the_factor(make, name):
    kernel = make()
    assert not representable(kernel)
    with pytest.raises(ValueError, match=rf"kernel factor {name}\b"):
        to_term(kernel)


@pytest.mark.parametrize(
    "make",
    [
        lambda: K.Matern32(2, ls=1.0, active_dims=[0]) + K.Matern12(2, ls=1.0, active_dims=[1]),
        lambda: K.Matern32(2, ls=[1.0, 2.0]),
    ],
)
def test_kernels_on_several_columns_are_refused(make):
    with pytest.raises(ValueError, match=r"input columns \[0, 1\]"):
        to_term(make())


def test_model_matches_the_dense_model_and_predicts():
    """quasisep_marginal and the dense marginal_normal in PyMC: log density and gradient with
    respect to the unconstrained parameters, and predictions through the likelihood object."""
    x, y = data(300, seed=21, span=30.0)
    X = np.column_stack([np.zeros_like(x), x])  # the kernel acts on column 1

    def build(fast: bool):
        with pm.Model() as model:
            eta = pm.HalfNormal("eta", 2.0)
            ell = pm.InverseGamma("ell", 3.0, 6.0)
            sigma = pm.HalfNormal("sigma", 1.0)
            c = pm.Normal("c", 0.0, 1.0)
            kernel = eta**2 * K.Matern52(2, ls=ell, active_dims=[1]) + 0.2
            mean = pm.gp.mean.Constant(c)
            if fast:
                lik = quasisep_marginal("y", X, y, kernel, sigma=sigma, mean=mean, jitter=1e-8)
            else:
                # the jitter is relative to var(y), as in every bayes_gp model
                C = kernel(X) + (sigma**2 + 1e-8 * np.var(y)) * pt.eye(x.size)
                marginal_normal("y", mean(X), C, observed=y)
                lik = None
        return model, lik

    fast, lik = build(True)
    dense, _ = build(False)
    point = {"eta_log__": 0.1, "ell_log__": 0.7, "sigma_log__": -1.1, "c": 0.3}
    for fn in ("compile_logp", "compile_dlogp"):
        got = getattr(fast, fn)(mode=MODE)(point)
        want = getattr(dense, fn)(mode=MODE)(point)
        np.testing.assert_allclose(got, want, rtol=RTOL)
    values = [np.exp(0.1), np.exp(0.7), np.exp(-1.1), 0.3]
    Xn = np.column_stack([np.ones(5), np.linspace(-2.0, 32.0, 5)])
    mean, var, _ = lik.predict(values, Xn, diag=True, include_noise=True)
    term = 0.2 + MaternTerm(2.5, eta=values[0], ls=values[1])
    want_mean, want_var, _ = quasisep_predict(
        x,
        y,
        Xn[:, 1],
        term,
        values[2] ** 2 + 1e-8 * np.var(y),
        mean=0.3,
        include_noise=values[2] ** 2,
    )
    np.testing.assert_allclose(mean, want_mean, rtol=1e-12)
    np.testing.assert_allclose(var, want_var, rtol=1e-12)
    assert np.isclose(
        lik.log_marginal_likelihood(values),
        fast.compile_logp(vars=fast.observed_RVs, jacobian=False, mode=MODE)(point),
    )


def test_op_props_and_shape_errors():
    assert QuasisepLogp(3, 3) == QuasisepLogp(3, 3) and QuasisepLogp(3, 3) != QuasisepLogp(2, 2)
    with pytest.raises(ValueError, match="inconsistent shapes"):
        quasisep_logp_grad(
            np.ones((4, 2)), np.ones((3, 2, 2)), np.ones(2), np.ones(2), np.ones(4), np.ones(4)
        )
    with pytest.raises(ValueError, match="strictly positive"):
        MaternTerm(1.5, eta=1.0, ls=-1.0)
    with pytest.raises(ValueError, match="half-integer"):
        MaternTerm(2.0)
    assert PT.name == "pytensor"


def test_bad_data_is_refused_with_the_package_checks():
    """The likelihood takes its data through the package's checks: NaN, misaligned x and y,
    and a negative jitter are refused with a message naming them."""
    x = np.linspace(0.0, 5.0, 20)
    y = np.sin(x)
    k = K.Matern32(1, ls=1.0)
    with pm.Model():
        with pytest.raises(ValueError, match="NaN"):
            quasisep_marginal("y", x, np.where(x > 2, np.nan, y), k, sigma=0.1)
        with pytest.raises(ValueError, match="rows"):
            quasisep_marginal("y", x, y[:-1], k, sigma=0.1)
        with pytest.raises(ValueError, match="jitter"):
            quasisep_marginal("y", x, y, k, sigma=0.1, jitter=-1.0)


@pytest.mark.parametrize("case", ["matern12", "sum_52_12", "product_32_cos", "sho_times_cos"])
def test_inverse_diagonal_and_solve_equal_the_dense_inverse(case):
    """quasisep_inverse (the backward sweep :eq:`qs-inverse`): C^-1 r and diag(C^-1), the
    ingredients of the leave-one-out terms (R&W eqs. 5.10-5.12), against NumPy's inverse."""
    build, kref, theta = CASES[case]
    x, y = data(300, seed=31, span=30.0)
    C = kref(theta, x[:, None] - x[None, :]) + theta["sigma"] ** 2 * np.eye(x.size)
    Cinv = np.linalg.inv(C)
    term = build(theta)
    perm = np.argsort(x, kind="stable")
    dt = np.diff(x[perm], prepend=x[perm][:1])
    P, h = term.stationary_covariance(), term.observation()
    d = np.full(x.size, h @ P @ h + theta["sigma"] ** 2)
    c, B = term.transition_coefficients(dt), term.transition_basis()
    logp, alpha, zdiag = quasisep_inverse(c, B, h, P @ h, d, y[perm])
    np.testing.assert_allclose(alpha, (Cinv @ y)[perm], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(zdiag, np.diag(Cinv)[perm], rtol=1e-9)
    assert logp == pytest.approx(float(quasisep_logp_grad(c, B, h, P @ h, d, y[perm])[0]))
    # not positive definite: -inf and NaN, no exception
    logp, alpha, zdiag = quasisep_inverse(c, B, h, P @ h, d - theta["sigma"] ** 2 - 1.0, y[perm])
    assert logp == -np.inf and np.all(np.isnan(alpha)) and np.all(np.isnan(zdiag))
