"""Reference values of the stationary kernels (R&W §4.2.1, seed 003; KERNELS.md).

Every kernel is compared with a NumPy reference transcribed here from its equation, written as a
function ``g(r)`` of the scaled distance ``r = sqrt(sum_d (x_d - x'_d)^2 / l_d^2)``. Inputs contain
repeated points (r = 0 off the diagonal), a pair at r = 1e-4 (small-r branches) and, for the
compactly supported kernels, pairs beyond the support.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy.special import gamma as gamma_fn
from scipy.special import jv, kv
from sklearn.gaussian_process import kernels as skk

import bayes_gp.kernels as bk
from tests.helpers import ATOL, RTOL, assert_matches, evaluate

LS_ARD = np.array([0.7, 1.3, 2.1])


# --- NumPy references, functions of the scaled distance r --------------------------------------
def ref_expquad(r):  # R&W (4.9), seed 000 (12)
    return np.exp(-0.5 * r**2)


def ref_matern(r, nu):  # R&W (4.14), limit 1 at r = 0
    z = np.sqrt(2.0 * nu) * r
    zs = np.where(z > 0, z, 1.0)
    k = 2.0 ** (1.0 - nu) / gamma_fn(nu) * zs**nu * kv(nu, zs)
    return np.where(z > 0, k, 1.0)


def ref_matern_half_integer(r, p):  # R&W (4.16), nu = p + 1/2
    nu = p + 0.5
    poly = sum(
        math.factorial(p + i)
        / (math.factorial(i) * math.factorial(p - i))
        * (np.sqrt(8.0 * nu) * r) ** (p - i)
        for i in range(p + 1)
    )
    return np.exp(-np.sqrt(2.0 * nu) * r) * math.factorial(p) / math.factorial(2 * p) * poly


def ref_matern12(r):  # R&W §4.2.1.4, exponential / OU kernel exp(-r/l)
    return np.exp(-r)


def ref_matern32(r):  # R&W (4.17a)
    return (1.0 + np.sqrt(3.0) * r) * np.exp(-np.sqrt(3.0) * r)


def ref_matern52(r):  # R&W (4.17b)
    return (1.0 + np.sqrt(5.0) * r + 5.0 * r**2 / 3.0) * np.exp(-np.sqrt(5.0) * r)


def ref_gamma_exp(r, gamma):  # R&W (4.18), exp(-(r/l)^gamma)
    return np.exp(-(r**gamma))


def ref_ratquad(r, alpha):  # R&W (4.19), (1 + r^2/(2 alpha l^2))^-alpha
    return (1.0 + r**2 / (2.0 * alpha)) ** (-alpha)


def ref_pp(r, q, D):  # R&W (4.21), j = floor(D/2) + q + 1
    j = D // 2 + q + 1
    t = np.maximum(1.0 - r, 0.0)
    poly = [
        np.ones_like(r),
        (j + 1) * r + 1,
        ((j**2 + 4 * j + 3) * r**2 + (3 * j + 6) * r + 3) / 3,
        (
            (j**3 + 9 * j**2 + 23 * j + 15) * r**3
            + (6 * j**2 + 36 * j + 45) * r**2
            + (15 * j + 45) * r
            + 15
        )
        / 15,
    ][q]
    return t ** (j + q) * poly


def ref_bessel(r, nu):  # R&W §4.2.1.8: c (alpha r)^-nu J_nu(alpha r), c = 2^nu Gamma(nu + 1)
    rs = np.where(r > 0, r, 1.0)
    k = 2.0**nu * gamma_fn(nu + 1.0) * rs ** (-nu) * jv(nu, rs)
    return np.where(r > 0, k, 1.0)


# --- inputs and comparison ---------------------------------------------------------------------
def make_inputs(D: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(scale=0.8, size=(8, D))
    X[5] = X[1]  # r = 0 off the diagonal
    Xs = rng.normal(scale=0.8, size=(6, D))
    Xs[2] = X[4]  # r = 0 in the cross-covariance
    Xs[3] = X[0] + 1e-4 / np.sqrt(D)  # r ~ 1e-4
    return X, Xs


def scaled_dist(X, Xs, ls):
    return np.sqrt(np.sum(((X[:, None, :] - Xs[None, :, :]) / ls) ** 2, axis=-1))


def _cases():
    """(kernel factory taking (D, ls), reference g(r), name, dimensions) for every kernel.

    Each kernel is checked isotropic in 1-D and with ARD length-scales in several dimensions.
    """
    yield bk.ExpQuad, ref_expquad, "ExpQuad", (1, 3)
    yield bk.Matern12, ref_matern12, "Matern12", (1, 3)
    yield bk.Exponential, ref_matern12, "Exponential", (1, 3)
    yield bk.Matern32, ref_matern32, "Matern32", (1, 3)
    yield bk.Matern52, ref_matern52, "Matern52", (1, 3)
    for nu in (0.3, 0.5, 0.7, 1.5, 2.5, 3.1, 4.5, 7.5):
        make = partial(bk.Matern, nu=nu, method="bessel")
        yield make, partial(ref_matern, nu=nu), f"Matern-bessel-{nu}", (1, 3)
    for p in (0, 1, 2, 3, 5):
        make = partial(bk.Matern, nu=p + 0.5, method="closed")
        yield make, partial(ref_matern_half_integer, p=p), f"Matern-closed-{p + 0.5}", (1, 3)
    for g in (0.3, 1.0, 1.5, 2.0):
        make = partial(bk.GammaExponential, gamma=g)
        yield make, partial(ref_gamma_exp, gamma=g), f"GammaExponential-{g}", (1, 3)
    for a in (0.3, 1.0, 5.5):
        yield partial(bk.RatQuad, alpha=a), partial(ref_ratquad, alpha=a), f"RatQuad-{a}", (1, 3)
    for D in (1, 2, 3):
        for q in range(4):
            make = partial(bk.PiecewisePolynomial, q=q)
            yield make, partial(ref_pp, q=q, D=D), f"PP-q{q}", (D,)
    for nu, dims in ((0.0, (1, 2)), (0.5, (1, 3)), (1.3, (1, 3)), (2.0, (2, 4))):
        make = partial(bk.BesselOscillatory, nu=nu)
        yield make, partial(ref_bessel, nu=nu), f"Bessel-{nu}", dims


CASES = [
    pytest.param(make, ref, D, ard, id=f"{name}-D{D}-{'ard' if ard else 'iso'}")
    for make, ref, name, dims in _cases()
    for D in dims
    for ard in ((False,) if D == 1 else (False, True) if name.startswith("PP") else (True,))
]


@pytest.mark.parametrize(("make", "ref", "D", "ard"), CASES)
def test_matches_reference(make, ref, D, ard):
    X, Xs = make_inputs(D, seed=D)
    ls = np.resize(LS_ARD, D) if ard else 0.9
    assert_matches(make(D, ls=ls), lambda A, B: ref(scaled_dist(A, B, ls)), X, Xs)


@pytest.mark.parametrize("q", range(4))
@pytest.mark.parametrize("D", [1, 2, 3])
def test_piecewise_polynomial_compact_support(D, q):
    """k_ppD,q is exactly 0 for r >= l and nonzero just inside (R&W §4.2.1.7)."""
    rng = np.random.default_rng(10 * D + q)
    ls = np.resize(LS_ARD, D)
    # Points at scaled distance exactly 1 (along one axis), beyond, and just inside the support.
    X = np.zeros((1, D))
    on_axis = np.diag(ls)
    direction = rng.normal(size=(4, D))
    direction /= np.sqrt(np.sum((direction / ls) ** 2, axis=1, keepdims=True))
    outside = np.vstack([on_axis, 1.5 * on_axis, 1.0001 * direction, 3.0 * direction])
    inside = np.vstack([(1 - 1e-3) * on_axis, (1 - 1e-3) * direction])
    np.testing.assert_array_equal(scaled_dist(X, on_axis, ls), 1.0)  # exactly at the boundary
    k = bk.PiecewisePolynomial(D, ls=ls, q=q)
    K_out, K_in = evaluate(k(X, outside), k(X, inside))
    assert np.all(K_out == 0.0)
    assert np.all(K_in > 0.0)
    np.testing.assert_allclose(K_in, ref_pp(scaled_dist(X, inside, ls), q, D), rtol=1e-9)
    # The random inputs of test_matches_reference cover both sides of the support too.
    r = scaled_dist(*make_inputs(D, seed=D), 0.9)
    assert np.any(r >= 1.0) and np.any(r < 1.0)


# --- identities between kernels ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("p", "named"), [(0, bk.Matern12), (1, bk.Matern32), (2, bk.Matern52), (3, None), (6, None)]
)
def test_matern_half_integer_paths_agree(p, named):
    """Matern(nu=p+1/2) via K_nu (4.14) == closed form (4.16) == Matern12/32/52 (4.17)."""
    X, Xs = make_inputs(2, seed=p)
    nu, ls = p + 0.5, [0.5, 1.7]
    kernels = [bk.Matern(2, nu=nu, ls=ls, method=m) for m in ("bessel", "closed", "auto")]
    if named is not None:
        kernels.append(named(2, ls=ls))
    values = evaluate(*[k(X, Xs) for k in kernels], *[k(X) for k in kernels])
    n = len(kernels)
    for i in range(1, n):
        np.testing.assert_allclose(values[i], values[0], rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(values[n + i], values[n], rtol=1e-10, atol=1e-13)
    assert kernels[2].method == "closed"


@pytest.mark.parametrize("ls", [0.6, [0.6, 2.2]], ids=["iso", "ard"])
@pytest.mark.parametrize(
    ("gamma", "other"),
    [
        (2.0, lambda ls: bk.ExpQuad(2, ls=np.asarray(ls) / np.sqrt(2.0))),  # exp(-r^2) = SE(l/√2)
        (1.0, lambda ls: bk.Exponential(2, ls=ls)),
    ],
    ids=["gamma2-SE", "gamma1-exponential"],
)
def test_gamma_exponential_special_cases(gamma, other, ls):
    X, Xs = make_inputs(2, seed=3)
    k = bk.GammaExponential(2, gamma=gamma, ls=ls)
    a, b, c, d = evaluate(k(X), other(ls)(X), k(X, Xs), other(ls)(X, Xs))
    np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(c, d, rtol=RTOL, atol=ATOL)


def test_ratquad_large_alpha_is_expquad():
    """(1 + r^2/2a)^-a -> exp(-r^2/2) as a -> inf; the error is ~ r^4/(8a) e^{-r^2/2}."""
    X, Xs = make_inputs(3, seed=4)
    rq, se = bk.RatQuad(3, alpha=1e8, ls=LS_ARD), bk.ExpQuad(3, ls=LS_ARD)
    a, b, c, d = evaluate(rq(X), se(X), rq(X, Xs), se(X, Xs))
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-8)
    np.testing.assert_allclose(c, d, rtol=0, atol=1e-8)


@pytest.mark.parametrize("ls", [0.4, 1.7])
def test_bessel_half_order_is_sinc(ls):
    """In 1-D, Gamma(3/2) (2/r)^(1/2) J_(1/2)(r) = sin(r)/r."""
    X, Xs = make_inputs(1, seed=5)
    X = 4.0 * X  # several oscillations
    k = bk.BesselOscillatory(1, nu=0.5, ls=ls)
    K, Ks = evaluate(k(X), k(X, Xs))
    for A, B in ((K, X), (Ks, Xs)):
        r = np.abs(X - B.T) / ls
        np.testing.assert_allclose(A, np.sinc(r / np.pi), rtol=1e-10, atol=1e-13)
    assert K.min() < -0.1  # it does oscillate below zero


# --- peer libraries ----------------------------------------------------------------------------
SKLEARN_CASES = [
    pytest.param(bk.ExpQuad, skk.RBF, LS_ARD, id="RBF"),
    *[
        pytest.param(
            partial(bk.Matern, nu=nu), partial(skk.Matern, nu=nu), LS_ARD, id=f"Matern-{nu}"
        )
        for nu in (0.5, 1.5, 2.5, 0.7, 3.1)
    ],
    pytest.param(bk.Matern12, partial(skk.Matern, nu=0.5), 1.1, id="Matern12"),
    pytest.param(bk.Matern32, partial(skk.Matern, nu=1.5), 1.1, id="Matern32"),
    pytest.param(bk.Matern52, partial(skk.Matern, nu=2.5), 1.1, id="Matern52"),
    *[
        pytest.param(
            partial(bk.RatQuad, alpha=a),
            partial(skk.RationalQuadratic, alpha=a),  # isotropic only in scikit-learn
            1.1,
            id=f"RationalQuadratic-{a}",
        )
        for a in (0.4, 2.0)
    ],
    pytest.param(  # pairwise rbf: exp(-gamma |x - x'|^2) with gamma = 1/(2 l^2)
        bk.ExpQuad,
        lambda length_scale: skk.PairwiseKernel(gamma=0.5 / length_scale**2, metric="rbf"),
        1.1,
        id="PairwiseKernel-rbf",
    ),
]


@pytest.mark.parametrize(("ours", "theirs", "ls"), SKLEARN_CASES)
def test_matches_sklearn(ours, theirs, ls):
    X, Xs = make_inputs(3, seed=6)
    k, sk = ours(3, ls=ls), theirs(length_scale=ls)
    K, Ks, Kd = evaluate(k(X), k(X, Xs), k(X, diag=True))
    np.testing.assert_allclose(K, sk(X), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(Ks, sk(X, Xs), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(Kd, sk.diag(X), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    ("ours", "pymc", "ls_factor"),
    [
        (bk.ExpQuad, pm.gp.cov.ExpQuad, 1.0),
        (bk.Matern12, pm.gp.cov.Matern12, 1.0),
        (bk.Matern32, pm.gp.cov.Matern32, 1.0),
        (bk.Matern52, pm.gp.cov.Matern52, 1.0),
        (partial(bk.RatQuad, alpha=1.7), partial(pm.gp.cov.RatQuad, alpha=1.7), 1.0),
        # PyMC's Exponential is exp(-r/2): pm Exponential(ls=l) == bayes_gp Exponential(ls=2l).
        (bk.Exponential, pm.gp.cov.Exponential, 2.0),
    ],
    ids=["ExpQuad", "Matern12", "Matern32", "Matern52", "RatQuad", "Exponential"],
)
def test_matches_pymc(ours, pymc, ls_factor):
    """Same function as PyMC's kernel, up to PyMC's approximations (ours is exact).

    PyMC takes r = sqrt(r^2 + 1e-12) and r^2 = |x|^2 - 2 x.x' + |x'|^2, so its values are off by
    up to ~1e-6 near r = 0 (e.g. exp(-1e-6) on the diagonal of Matern12); ours gives exactly 1.
    """
    X, Xs = make_inputs(2, seed=7)
    ls = np.array([0.5, 1.2])
    k, kp = ours(2, ls=ls_factor * ls), pymc(2, ls=ls)
    K, Ks, Kd, P, Ps, Pd = evaluate(
        k(X), k(X, Xs), k(X, diag=True), kp(X), kp(X, Xs), kp(X, diag=True)
    )
    np.testing.assert_allclose(K, P, rtol=0, atol=2e-6)
    np.testing.assert_allclose(Ks, Ps, rtol=0, atol=2e-6)
    np.testing.assert_array_equal(Kd, Pd)
    # Exactness where PyMC is approximate: 1.0 at every r = 0 pair, bit for bit.
    assert np.all(np.diag(K) == 1.0) and K[1, 5] == 1.0 and Ks[4, 2] == 1.0


# --- validation --------------------------------------------------------------------------------
def _random_variable():
    with pm.Model():
        return pm.HalfNormal("nu")


@pytest.mark.parametrize(
    ("build", "match"),
    [
        *[
            pytest.param(partial(bk.GammaExponential, 1, gamma=g, ls=1.0), "gamma", id=f"gamma={g}")
            for g in (0.0, -1.0, 2.5, np.inf)
        ],
        *[
            pytest.param(partial(bk.PiecewisePolynomial, 1, ls=1.0, q=q), "`q`", id=f"q={q}")
            for q in (-1, 4, 1.5)
        ],
        pytest.param(partial(bk.PiecewisePolynomial, 3, ls=1.0, q=1, D=2), "`D`", id="pp-D<dims"),
        pytest.param(partial(bk.ExpQuad, 2, ls=-1.0), "`ls`", id="ls<0"),
        pytest.param(partial(bk.ExpQuad, 2, ls=[1.0, 0.0]), "`ls`", id="ls=0-ard"),
        pytest.param(partial(bk.Matern52, 2, ls_inv=-2.0), "ls_inv", id="ls_inv<0"),
        pytest.param(partial(bk.ExpQuad, 3, ls=[1.0, 2.0]), "`ls`", id="ls-length"),
        pytest.param(partial(bk.ExpQuad, 2, ls=np.ones((2, 2))), "`ls`", id="ls-matrix"),
        pytest.param(partial(bk.ExpQuad, 2), "ls", id="no-ls"),
        pytest.param(partial(bk.ExpQuad, 2, ls=1.0, active_dims=[0, 2]), "active_dims", id="ad"),
        pytest.param(partial(bk.ExpQuad, 2, ls=1.0, active_dims=[-1]), "active_dims", id="ad<0"),
        pytest.param(partial(bk.ExpQuad, 2, ls=1.0, active_dims=[1, 1]), "active_dims", id="ad2"),
        pytest.param(partial(bk.Matern, 1, nu=pt.dscalar("nu"), ls=1.0), "`nu`", id="nu-var"),
        pytest.param(lambda: bk.Matern(1, nu=_random_variable(), ls=1.0), "`nu`", id="nu-rv"),
        pytest.param(partial(bk.Matern, 1, nu=0.0, ls=1.0), "`nu`", id="nu=0"),
        pytest.param(partial(bk.Matern, 1, nu=-0.5, ls=1.0), "`nu`", id="nu<0"),
        pytest.param(partial(bk.Matern, 1, nu=0.7, ls=1.0, method="closed"), "nu", id="closed"),
        pytest.param(partial(bk.Matern, 1, nu=1.5, ls=1.0, method="exact"), "method", id="method"),
        pytest.param(partial(bk.RatQuad, 1, alpha=0.0, ls=1.0), "alpha", id="alpha=0"),
        pytest.param(partial(bk.BesselOscillatory, 4, nu=0.5, ls=1.0), "`nu`", id="bessel-D4"),
        pytest.param(partial(bk.BesselOscillatory, 1, nu=-0.5, ls=1.0), "`nu`", id="bessel-neg"),
        pytest.param(
            partial(bk.BesselOscillatory, 1, nu=pt.dscalar("nu"), ls=1.0), "`nu`", id="bessel-var"
        ),
    ],
)
def test_invalid_parameters_raise(build, match):
    with pytest.raises(ValueError, match=match):
        build()


@pytest.mark.parametrize("ncol", [1, 3])
def test_wrong_number_of_columns_raises(ncol):
    k = bk.Matern32(2, ls=1.0)
    X = np.zeros((4, ncol))
    with pytest.raises(ValueError, match="input_dim"):
        k(X)
    with pytest.raises(ValueError, match="input_dim"):
        k(np.zeros((4, 2)), X)
    with pytest.raises(ValueError, match="input_dim"):
        k(X, diag=True)


@pytest.mark.parametrize(
    ("kernel", "attr"),
    [
        (bk.ExpQuad(1, ls=1.0), "ls"),
        (bk.Matern(1, nu=0.7, ls=1.0), "nu"),
        (bk.GammaExponential(1, gamma=1.5, ls=1.0), "gamma"),
        (bk.RatQuad(1, alpha=2.0, ls=1.0), "alpha"),
        (bk.PiecewisePolynomial(1, ls=1.0, q=2), "q"),
        (bk.BesselOscillatory(1, nu=0.5, ls=1.0), "nu"),
        (bk.Matern52(2, ls=1.0), "active_dims"),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, str) else v,
)
def test_kernels_are_immutable(kernel, attr):
    with pytest.raises(AttributeError, match=attr):
        setattr(kernel, attr, 2.0)
    with pytest.raises(AttributeError):
        kernel.new_attribute = 1.0


def test_matern_nu_inf_names_expquad():
    """The defect: Matern(nu=inf) was refused with 'must be a fixed finite number' and no word
    of the squared exponential, its limit (R&W eq. 4.14)."""
    for make in (lambda: bk.Matern(1, nu=np.inf, ls=1.0), lambda: bk.Matern(1, nu=float("inf"))):
        with pytest.raises(ValueError, match=r"nu` = inf.*squared exponential.*ExpQuad"):
            make()


def test_repeated_active_dims_are_refused_with_the_reason():
    """A repeated column counts twice in the distance: the same kernel as a rescaled
    length-scale. The refusal says so (and the base class documents it)."""
    with pytest.raises(ValueError, match=r"repeated entries: \[0, 0\].*square root of its count"):
        bk.ExpQuad(2, ls=1.0, active_dims=[0, 0])
    assert "each at most once" in " ".join(bk.Kernel.__doc__.split())
    # the equivalence the message states: [0, 0] with ls equals [0] with ls / sqrt(2)
    X = np.linspace(0, 2, 5)[:, None]
    r2 = 2 * (X - X.T) ** 2 / 1.3**2
    single = evaluate(bk.ExpQuad(1, ls=1.3 / np.sqrt(2))(X))
    np.testing.assert_allclose(single, np.exp(-0.5 * r2), rtol=1e-12)
