"""Spectral mixture kernels (bayes_gp.kernels.spectral_mixture).

Values against NumPy transcriptions of Wilson & Adams (2013) eq. (12) and of the Matérn-envelope
form (R&W eqs. 4.14, 4.17); spectral densities by transforming them back numerically
(R&W eq. 4.6 in PyMC's angular convention, as tests/kernels/test_spectral.py does) and through
``pm.gp.HSGP``; the Matérn form against its state-space (quasiseparable) sum of
``MaternTerm * CosineTerm`` in GPRegression; the periodogram initialisation; and a MAP fit that
recovers a period. PSD, symmetry, gradients and the model log-density are in the property suite
(tests/kernels/catalogue.py cases ``SpectralMixture`` and ``MaternSpectralMixture``).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import integrate, special

import bayes_gp.kernels as K
from bayes_gp import GPRegression
from bayes_gp.kernels.parameters import kernel_parameters
from bayes_gp.kernels.statespace import to_term
from bayes_gp.solvers.exact import ExactLikelihood
from bayes_gp.solvers.hsgp import HSGPLikelihood
from bayes_gp.solvers.quasisep import QuasisepLikelihood
from tests.helpers import PY_MODE, assert_matches, evaluate

W = np.array([0.7, 0.4, 1.1])
MU = np.array([[0.3, 0.1], [0.8, -0.5], [0.0, 1.2]])
V = np.array([[0.05, 0.2], [0.1, 0.03], [0.1, 0.02]])


def sm_ref(A, B, w=W, mu=MU, v=V):
    """Wilson & Adams (2013) eq. (12): sum_q w_q prod_d exp(-2 pi^2 tau_d^2 v_qd) cos(2 pi tau_d mu_qd)."""
    tau = A[:, None, :] - B[None, :, :]
    out = np.zeros(tau.shape[:2])
    for q in range(len(w)):
        per_dim = np.exp(-2 * np.pi**2 * tau**2 * v[q]) * np.cos(2 * np.pi * tau * mu[q])
        out += w[q] * np.prod(per_dim, axis=-1)
    return out


def matern_ref(r, nu):
    """R&W eq. (4.14) through SciPy's K_nu (limit 1 at r = 0)."""
    z = np.sqrt(2 * nu) * np.abs(r)
    with np.errstate(invalid="ignore"):
        k = 2 ** (1 - nu) / special.gamma(nu) * z**nu * special.kv(nu, z)
    return np.where(z > 0, k, 1.0)


def msm_ref(A, B, w, mu, ls, nu):
    """sum_q w_q cos(2 pi mu_q tau) k_nu(|tau| / l_q)."""
    tau = A[:, :1] - B[:, :1].T
    return sum(
        w[q] * np.cos(2 * np.pi * mu[q] * tau) * matern_ref(tau / ls[q], nu) for q in range(len(w))
    )


RNG = np.random.default_rng(11)
X = RNG.uniform(-2, 2, size=(9, 2))
XS = RNG.uniform(-2, 2, size=(5, 2))


def test_values_equal_wilson_adams_eq_12():
    assert_matches(K.SpectralMixture(2, W, MU, V), sm_ref, X, XS)
    # one input column: (Q,) parameters, active_dims
    k1 = K.SpectralMixture(2, W, MU[:, 1], V[:, 1], active_dims=[1])
    assert_matches(k1, lambda A, B: sm_ref(A[:, 1:], B[:, 1:], W, MU[:, 1:], V[:, 1:]), X, XS)


def test_zero_mean_component_is_the_squared_exponential():
    """mu = 0: w exp(-2 pi^2 tau^2 v) = w ExpQuad with ls = 1 / (2 pi sqrt(v))."""
    v = np.array([0.07, 0.3])
    sm = K.SpectralMixture(2, [1.3], np.zeros((1, 2)), v[None, :])
    se = 1.3 * K.ExpQuad(2, ls=1 / (2 * np.pi * np.sqrt(v)))
    np.testing.assert_allclose(*evaluate(sm(X, XS), se(X, XS)), rtol=1e-13)
    np.testing.assert_allclose(
        *evaluate(sm.power_spectral_density(X), se.power_spectral_density(X)), rtol=1e-12
    )


@pytest.mark.parametrize("nu", [0.5, 1.5, 2.5, 0.8])
def test_matern_envelope_values(nu):
    w, mu, ls = np.array([0.9, 0.5]), np.array([0.4, 1.3]), np.array([1.2, 0.5])
    k = K.MaternSpectralMixture(w, mu, ls, nu=nu, input_dim=2, active_dims=[0])
    assert_matches(k, lambda A, B: msm_ref(A, B, w, mu, ls, nu), X, XS, rtol=1e-9, atol=1e-12)


def _psd_fn(kernel):
    w = pt.dscalar("w")
    f = pytensor.function([w], kernel.power_spectral_density(pt.reshape(w, (1, 1)))[0], mode=PY_MODE)
    return lambda x: float(f(x))


@pytest.mark.parametrize(
    "kernel",
    [
        K.SpectralMixture(1, [0.7, 0.4], [0.3, 0.9], [0.05, 0.01]),
        K.MaternSpectralMixture([0.7, 0.4], [0.3, 0.9], [1.2, 0.6], nu=1.5),
        K.MaternSpectralMixture([0.7, 0.4], [0.3, 0.9], [1.2, 0.6], nu=2.5),
    ],
    ids=["gaussian", "matern32", "matern52"],
)
def test_inverse_fourier_transform_recovers_kernel_1d(kernel):
    r"""k(tau) = (1/pi) int_0^inf S(w) cos(w tau) dw (R&W eq. 4.6, PyMC's angular convention)."""
    taus = np.array([0.0, 0.3, 1.1, 2.7])
    k_exact = evaluate(kernel(np.zeros((1, 1)), taus[:, None]))[0]
    S = _psd_fn(kernel)
    for tau, k in zip(taus, k_exact, strict=True):
        if tau == 0.0:
            val = integrate.quad(S, 0, np.inf, limit=400, points=None)[0]
        else:
            val = integrate.quad(S, 0, np.inf, weight="cos", wvar=tau, limlst=200)[0]
        np.testing.assert_allclose(val / np.pi, k, rtol=2e-6, atol=2e-7, err_msg=f"tau={tau}")


def test_inverse_fourier_transform_recovers_kernel_2d():
    r"""D = 2: k(tau) = (2 pi)^-2 int S(w) cos(w . tau) dw, on a grid (S is a smooth Gaussian
    mixture, negligible beyond the grid, so the trapezoidal sum converges spectrally)."""
    k = K.SpectralMixture(2, W, MU, V)
    g = np.linspace(-24.0, 24.0, 601)
    W1, W2 = np.meshgrid(g, g, indexing="ij")
    omega = np.column_stack([W1.ravel(), W2.ravel()])
    S = evaluate(k.power_spectral_density(omega))
    dw = g[1] - g[0]
    taus = np.array([[0.0, 0.0], [0.4, -0.2], [1.3, 0.7]])
    got = [np.sum(S * np.cos(omega @ t)) * dw**2 / (2 * np.pi) ** 2 for t in taus]
    np.testing.assert_allclose(got, sm_ref(taus, np.zeros((1, 2)))[:, 0], rtol=1e-9, atol=1e-12)


def test_hsgp_approximates_the_exact_gram_matrix():
    """pm.gp.HSGP calls power_spectral_density: its low-rank Gram matrix converges to k."""
    k = K.SpectralMixture(1, [0.7, 0.4], [0.3, 0.9], [0.05, 0.02])
    x = np.linspace(-2.0, 2.0, 41)[:, None]
    gp = pm.gp.HSGP(m=[120], c=4.0, cov_func=k)
    phi, sqrt_psd = evaluate(*gp.prior_linearized(x))
    err = np.max(np.abs((phi * sqrt_psd**2) @ phi.T - evaluate(k(x))))
    assert err < 1e-6, err


def test_gpregression_serves_the_kernel_with_hsgp():
    """approx='hsgp' with a given basis: the log marginal likelihood is the exact one to the
    basis error."""
    rng = np.random.default_rng(2)
    x = np.sort(rng.uniform(0, 10, 40))
    y = np.sin(2 * np.pi * x / 1.7) + 0.1 * rng.normal(size=x.size)
    k = K.SpectralMixture(1, pm.HalfNormal.dist(1.0, shape=1), [0.59], [0.002])
    exact = GPRegression(x, y, k, mean="zero")
    hsgp = GPRegression(x, y, k, mean="zero", approx="hsgp", approx_options={"m": 150, "c": 4.0})
    assert isinstance(hsgp.marginal, HSGPLikelihood)
    p = {"weights": np.array([0.5]), "sigma": 0.1}
    assert hsgp.log_marginal_likelihood(p) == pytest.approx(exact.log_marginal_likelihood(p), abs=1e-8)
    # the default basis rule is for Matérn-class kernels: without m and c it asks for them
    with pytest.raises(ValueError, match=r"no default HSGP rule.*SpectralMixture.*approx_options"):
        GPRegression(x, y, k, approx="hsgp")


def test_matern_mixture_is_a_state_space_sum():
    w, mu, ls = [0.9, 0.5, 0.3], [0.4, 1.3, 0.0], [1.2, 0.5, 2.0]
    k = K.MaternSpectralMixture(w, mu, ls, nu=2.5)
    term = to_term(k)
    tau = np.linspace(-4, 4, 17)
    np.testing.assert_allclose(
        term.value(tau), evaluate(k(np.zeros((1, 1)), tau[:, None]))[0], rtol=1e-12, atol=1e-15
    )
    # mu = 0 is a Matérn term alone, the others Matérn x cosine
    assert [type(t).__name__ for t in term.terms] == ["TermProduct", "TermProduct", "MaternTerm"]
    with pytest.raises(ValueError, match="not a half-integer"):
        to_term(K.MaternSpectralMixture(w, mu, ls, nu=0.8))


def test_quasiseparable_regression_equals_the_dense_one():
    """GPRegression's O(n) likelihood with the Matérn spectral mixture (priors on the weights
    and means) equals the dense likelihood and gradient at the same hyperparameters."""
    rng = np.random.default_rng(0)
    x = rng.uniform(0.0, 12.0, 120)
    y = np.sin(2 * np.pi * x / 1.7) + 0.3 * np.cos(0.5 * x) + 0.2 * rng.normal(size=x.size)
    k = K.MaternSpectralMixture(
        pm.HalfNormal.dist(1.0, shape=2), pm.LogNormal.dist(0.0, 1.0, shape=2), [2.0, 4.0]
    )
    qs = GPRegression(x, y, k, structure="quasiseparable")
    dense = GPRegression(x, y, k, structure="dense")
    assert isinstance(qs.marginal, QuasisepLikelihood)
    assert isinstance(dense.marginal, ExactLikelihood)
    p = {"weights": np.array([0.8, 0.2]), "means": np.array([0.6, 0.08]), "sigma": 0.2}
    a, ga = qs.log_marginal_likelihood(p, eval_gradient=True)
    b, gb = dense.log_marginal_likelihood(p, eval_gradient=True)
    assert a == pytest.approx(b, rel=1e-9)
    for name in ("weights", "means"):
        np.testing.assert_allclose(ga[name], gb[name], rtol=1e-7, err_msg=name)


def test_priors_are_named_after_the_attributes():
    k = K.SpectralMixture(
        1, pm.HalfNormal.dist(1.0, shape=2), pm.LogNormal.dist(0, 1, shape=(2, 1)), [0.1, 0.2]
    )
    assert list(kernel_parameters(k)) == ["weights", "means"]


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: K.SpectralMixture(1, [-0.5], [0.3], [0.1]), "`weights` must be non-negative"),
        (lambda: K.SpectralMixture(1, [0.5], [0.3], [0.0]), "`variances` must be strictly positive"),
        (lambda: K.SpectralMixture(1, np.zeros(0), np.zeros(0), np.zeros(0)), "Q >= 1"),
        (lambda: K.SpectralMixture(2, [0.5, 1.0], [0.3, 0.2], [0.1, 0.1]), r"shape \(Q, D\)"),
        (lambda: K.SpectralMixture(2, [0.5], [[0.3, 0.2, 0.1]], [[0.1, 0.1]]),
         r"`means` has 3 column\(s\) but the kernel has 2"),
        (lambda: K.SpectralMixture(1, [0.5, 1.0], [0.3, 0.2, 0.1], [0.1]),
         "`means` has 3 row.* but `weights` has 2"),
        (lambda: K.SpectralMixture(1, [0.5], [np.inf], [0.1]), "`means` must be finite"),
        (lambda: K.MaternSpectralMixture([0.5], [0.3], [-1.0]), "`ls` must be strictly positive"),
        (lambda: K.MaternSpectralMixture([0.5], [0.3], [1.0], nu=-1.0), "`nu` must be strictly"),
        (lambda: K.MaternSpectralMixture([0.5], [0.3], [1.0], input_dim=2, active_dims=[0, 1]),
         "acts on one input column"),
        (lambda: K.MaternSpectralMixture([0.5, 0.2], [0.3, 0.1, 0.4], [1.0]),
         "`means` has 3 entries but `weights` has 2"),
    ],
)  # fmt: skip
def test_bad_parameters_are_refused_by_name(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_init_finds_the_periods_of_irregular_data():
    """Two sinusoids (periods 1.7 and 0.45, amplitudes 1 and 0.5) on irregular inputs: the two
    highest periodogram peaks are their frequencies, the louder first; the weights add up to
    the sample variance."""
    rng = np.random.default_rng(4)
    x = np.sort(rng.uniform(0, 20, 150))
    y = np.sin(2 * np.pi * x / 1.7) + 0.5 * np.sin(2 * np.pi * x / 0.45) + 0.1 * rng.normal(size=150)
    init = K.spectral_mixture_init(x[:, None], y, 2)
    assert init["weights"].shape == (2,) and init["means"].shape == init["variances"].shape == (2, 1)
    np.testing.assert_allclose(init["means"][:, 0], [1 / 1.7, 1 / 0.45], rtol=0.01)
    assert init["weights"][0] > 2 * init["weights"][1]
    assert init["weights"].sum() == pytest.approx(y.var(), rel=1e-12)
    # a peak's width is the data's frequency resolution, about 1/range
    assert 0.2 < 1 / (20 * np.sqrt(init["variances"][0, 0])) < 5
    K.SpectralMixture(1, **init)  # the keyword arguments of the kernel


def test_init_fills_missing_peaks_with_slow_trends():
    x = np.arange(6.0)
    y = np.array([0.0, 1.0, 0.0, -1.0, 0.0, 1.0])
    init = K.spectral_mixture_init(x, y, 6)
    assert init["weights"].shape == (6,)
    assert init["weights"].sum() == pytest.approx(y.var(), rel=1e-12)
    assert np.all(init["weights"] > 0) and np.all(init["variances"] > 0)
    assert np.any(init["means"] == 0.0)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((np.arange(5.0), np.arange(5.0), 0), r"`Q` must be an integer in 1\.\."),
        ((np.ones((5, 2)), np.arange(5.0), 1), "takes 1-D inputs"),
        ((np.arange(5.0), np.arange(4.0), 1), "`y` has shape"),
        ((np.ones(5), np.arange(5.0), 1), "at least 3 distinct"),
    ],
)
def test_init_refuses_bad_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        K.spectral_mixture_init(*args)


def test_map_fit_recovers_the_period():
    """One component whose frequency prior is centred 8% off the truth (1/1.7): the MAP
    frequency is within 1% of it."""
    rng = np.random.default_rng(1)
    x = np.sort(rng.uniform(0, 10, 50))
    y = np.sin(2 * np.pi * x / 1.7) + 0.1 * rng.normal(size=x.size)
    kernel = K.SpectralMixture(
        1,
        weights=pm.HalfNormal.dist(1.0, shape=1),
        means=pm.LogNormal.dist(np.log(1.08 / 1.7), 0.3, shape=(1, 1)),
        variances=pm.LogNormal.dist(np.log(1e-3), 1.0, shape=(1, 1)),
    )
    fit = GPRegression(x, y, kernel, mean="zero").fit_map(n_restarts=1, random_seed=0)
    assert float(np.ravel(fit.params["means"])[0]) == pytest.approx(1 / 1.7, rel=0.01)
    assert float(np.ravel(fit.params["weights"])[0]) == pytest.approx(0.5, rel=0.5)
