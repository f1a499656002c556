"""Spectral densities (R&W eqs. 4.6, 4.15) and the HSGP approximation built on them.

Each closed-form density is checked by transforming it back numerically (Wiener–Khintchine,
R&W eq. 4.6 / 4.7) and comparing with the kernel; the factor-analysis metric against the known
Gaussian transform; PyMC's densities where PyMC has them; and ``pm.gp.HSGP`` with each kernel against
the exact Gram matrix.
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import integrate, special

import bayes_gp.kernels as K
from tests.helpers import PY_MODE, evaluate

# Kernels with a closed-form spectral density, 1-D, with a length-scale != 1.
PSD_KERNELS = {
    "ExpQuad": lambda d: K.ExpQuad(d, ls=0.7),
    "Matern12": lambda d: K.Matern12(d, ls=0.7),
    "Exponential": lambda d: K.Exponential(d, ls=0.7),
    "Matern32": lambda d: K.Matern32(d, ls=0.7),
    "Matern52": lambda d: K.Matern52(d, ls=0.7),
    "Matern_nu0.8": lambda d: K.Matern(d, nu=0.8, ls=0.7),
    "Matern_nu4.2": lambda d: K.Matern(d, nu=4.2, ls=0.7),
    "RatQuad": lambda d: K.RatQuad(d, alpha=1.7, ls=0.7),
    "BesselOscillatory": lambda d: K.BesselOscillatory(d, nu=1.2, ls=0.7),
}


def _radial_psd(kernel, D):
    """Compiled scalar function w -> S(w e_1) (isotropic kernels depend on |w| only)."""
    w = pt.dscalar("w")
    omega = pt.stack([w] + [pt.zeros(())] * (D - 1))[None, :]
    f = pytensor.function([w], kernel.power_spectral_density(omega)[0], mode=PY_MODE)
    return lambda x: float(f(x))


@pytest.mark.parametrize("name", list(PSD_KERNELS))
def test_inverse_fourier_transform_recovers_kernel_1d(name):
    r"""k(tau) = (1/pi) int_0^inf S(w) cos(w tau) dw  (R&W eq. 4.6 in 1-D, angular frequency)."""
    kernel = PSD_KERNELS[name](1)
    taus = np.array([0.0, 0.15, 0.6, 1.3])
    k_exact = evaluate(kernel(np.zeros((1, 1)), taus[:, None]))[0]
    S = _radial_psd(kernel, 1)
    for tau, k in zip(taus, k_exact, strict=True):
        if name == "BesselOscillatory":  # band-limited: support |w| < 1/ls
            val = integrate.quad(lambda w, t=tau: S(w) * np.cos(w * t), 0, 1 / 0.7, limit=400)[0]
        elif tau == 0.0:
            val = integrate.quad(S, 0, np.inf, limit=400)[0]
        else:
            val = integrate.quad(S, 0, np.inf, weight="cos", wvar=tau, limlst=200)[0]
        np.testing.assert_allclose(val / np.pi, k, rtol=2e-6, atol=2e-7, err_msg=f"tau={tau}")


@pytest.mark.parametrize(
    "name", ["ExpQuad", "Matern32", "Matern_nu0.8", "RatQuad", "BesselOscillatory"]
)
def test_inverse_hankel_transform_recovers_kernel_2d(name):
    r"""Isotropic D = 2: k(r) = (1/2pi) int_0^inf S(w) J_0(w r) w dw (R&W eq. 4.7, angular)."""
    kernel = PSD_KERNELS[name](2)
    S = _radial_psd(kernel, 2)
    for r in (0.0, 0.4, 1.1):
        k = evaluate(kernel(np.zeros((1, 2)), np.array([[r, 0.0]])))[0, 0]
        upper = 1 / 0.7 if name == "BesselOscillatory" else np.inf
        with warnings.catch_warnings():  # quad's own accuracy notes; the value is asserted below
            warnings.simplefilter("ignore", integrate.IntegrationWarning)
            val = integrate.quad(lambda w, r=r: S(w) * special.j0(w * r) * w, 0, upper, limit=800)[
                0
            ]
        np.testing.assert_allclose(val / (2 * np.pi), k, rtol=1e-5, atol=1e-6, err_msg=f"r={r}")


def test_factor_analysis_metric_spectral_density_is_the_gaussian_transform():
    r"""exp(-tau^T M tau / 2) has S(w) = (2 pi)^{D/2} |M|^{-1/2} exp(-w^T M^{-1} w / 2)."""
    Lam = np.array([[0.9, 0.1], [-0.3, 0.5], [0.2, 0.0]])
    psi = np.array([0.4, 1.5, 0.8])
    M = Lam @ Lam.T + np.diag(psi)
    k = K.ExpQuad(3, metric=K.FactorAnalysis(Lam, psi))
    omega = np.random.default_rng(0).normal(size=(7, 3))
    quad = np.einsum("ij,jk,ik->i", omega, np.linalg.inv(M), omega)
    expected = (2 * np.pi) ** 1.5 / np.sqrt(np.linalg.det(M)) * np.exp(-0.5 * quad)
    np.testing.assert_allclose(evaluate(k.power_spectral_density(omega)), expected, rtol=1e-12)


@pytest.mark.parametrize(
    ("ours", "pymcs"),
    [
        (K.ExpQuad(2, ls=[0.7, 1.9]), pm.gp.cov.ExpQuad(2, ls=[0.7, 1.9])),
        (K.Matern32(2, ls=[0.7, 1.9]), pm.gp.cov.Matern32(2, ls=[0.7, 1.9])),
        (K.Matern52(2, ls=[0.7, 1.9]), pm.gp.cov.Matern52(2, ls=[0.7, 1.9])),
        (K.Matern(2, nu=2.5, ls=[0.7, 1.9]), pm.gp.cov.Matern52(2, ls=[0.7, 1.9])),
        (K.RatQuad(2, alpha=2.3, ls=[0.7, 1.9]), pm.gp.cov.RatQuad(2, alpha=2.3, ls=[0.7, 1.9])),
    ],
    ids=["ExpQuad", "Matern32", "Matern52", "Matern_nu2.5", "RatQuad"],
)
def test_ard_spectral_density_matches_pymc(ours, pymcs):
    omega = np.random.default_rng(1).normal(scale=2.0, size=(9, 2))
    a, b = evaluate(ours.power_spectral_density(omega), pymcs.power_spectral_density(omega))
    # PyMC 6.4's Matern32/52 densities evaluate Gamma((D+3)/2) on a Python float that PyTensor
    # autocasts to float32, so they are only good to ~1e-7 relative; ours are exact (the 1-D and
    # 2-D inverse-transform tests above check them independently).
    np.testing.assert_allclose(a, b, rtol=1e-6)


@pytest.mark.parametrize(
    "kernel",
    [
        K.GammaExponential(1, gamma=1.5, ls=1.0),
        K.PiecewisePolynomial(1, ls=1.0, q=1),
        K.Periodic(1, period=1.0, ls=1.0),
    ],
    ids=["GammaExponential", "PiecewisePolynomial", "Periodic"],
)
def test_no_closed_form_density_raises(kernel):
    with pytest.raises(NotImplementedError, match="spectral"):
        kernel.power_spectral_density(np.ones((3, 1)))


# HSGP: basis size m, boundary factor c and tolerance per kernel. Rougher kernels converge more
# slowly in m (Matérn 1/2 as 1/m); the slowly decaying oscillatory Bessel kernel needs a wide
# boundary instead (its band-limited spectrum needs few basis functions).
HSGP_CASES = {
    "ExpQuad": (60, 4.0, 1e-6),
    "Matern52": (200, 4.0, 2e-3),
    "Matern32": (200, 4.0, 2e-4),
    "Matern_nu0.8": (400, 4.0, 4e-2),
    "Matern12": (400, 4.0, 1.5e-2),
    "RatQuad": (200, 4.0, 2e-3),
    "BesselOscillatory": (100, 16.0, 2e-3),
}


@pytest.mark.parametrize("name", list(HSGP_CASES))
def test_hsgp_approximates_exact_gram_matrix(name):
    m, c, tol = HSGP_CASES[name]
    kernel = PSD_KERNELS[name](1)
    X = np.linspace(-2.0, 2.0, 41)[:, None]
    gp = pm.gp.HSGP(m=[m], c=c, cov_func=kernel)
    phi, sqrt_psd = gp.prior_linearized(X)
    phi, sqrt_psd = evaluate(phi, sqrt_psd)
    K_hsgp = (phi * sqrt_psd**2) @ phi.T
    K_exact = evaluate(kernel(X))
    err = np.max(np.abs(K_hsgp - K_exact))
    assert err < tol, f"{name}: max |K_hsgp - K| = {err:.2e}"
    # and the error is not accidentally small: a too-small basis is visibly worse
    phi_s, psd_s = pm.gp.HSGP(m=[5], c=c, cov_func=kernel).prior_linearized(X)
    phi_s, psd_s = evaluate(phi_s, psd_s)
    assert np.max(np.abs((phi_s * psd_s**2) @ phi_s.T - K_exact)) > err


def test_hsgp_with_ard_in_two_dimensions():
    kernel = K.Matern(2, nu=1.5, ls=[0.8, 1.5])
    g = np.linspace(-1.0, 1.0, 7)
    X = np.array([[a, b] for a in g for b in g])
    gp = pm.gp.HSGP(m=[80, 60], c=6.0, cov_func=kernel)
    phi, sqrt_psd = evaluate(*gp.prior_linearized(X))
    err = np.max(np.abs((phi * sqrt_psd**2) @ phi.T - evaluate(kernel(X))))
    assert err < 2e-3, err


def test_kernels_declare_their_smoothness_and_combinations_their_factors():
    """What the Hilbert-space approximation's default rule needs is declared by the kernels
    (``smoothness``), for PyMC's own Matérn-class kernels too, and sums and products are walked
    by one function (``factors``), not by inspecting classes in the approximation."""
    from bayes_gp.kernels.base import factors, smoothness

    ours = {
        K.ExpQuad(1, ls=1.0): np.inf,
        K.Matern52(1, ls=1.0): 2.5,
        K.Matern32(1, ls=1.0): 1.5,
        K.Matern12(1, ls=1.0): 0.5,
        K.Exponential(1, ls=1.0): 0.5,
        K.Matern(1, nu=0.8, ls=1.0): 0.8,
        K.RatQuad(1, alpha=2.0, ls=1.0): None,
    }
    for k, nu in ours.items():
        assert smoothness(k) == nu, type(k).__name__
    pymc = {pm.gp.cov.ExpQuad(1, ls=1.0): np.inf, pm.gp.cov.Matern52(1, ls=1.0): 2.5,
            pm.gp.cov.Matern32(1, ls=1.0): 1.5, pm.gp.cov.Matern12(1, ls=1.0): 0.5,
            pm.gp.cov.Cosine(1, ls=1.0): None}  # fmt: skip
    for k, nu in pymc.items():
        assert smoothness(k) == nu, type(k).__name__
    a, b = K.ExpQuad(2, ls=1.0, active_dims=[0]), K.Matern32(2, ls=1.0)
    c = K.Matern(2, nu=3.5, ls=2.0)
    combined = 2.0 * a + b * (c + a)
    names = [type(f).__name__ for f in factors(combined)]
    assert names == ["ExpQuad", "Matern32", "Matern", "ExpQuad"]
    assert list(factors(b)) == [b]
