"""The averaged predictive probability of the sigmoid links (R&W eqs. 3.25, 3.82)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import expit

from bayes_gp.classification.likelihoods import average_probability


def test_probit_average_probability_is_the_closed_form():
    m, v = np.array([-1.0, 0.3, 2.0]), np.array([0.5, 2.0, 0.1])
    expected = [
        integrate.quad(
            lambda f, a=a, b=b: stats.norm.cdf(f) * stats.norm.pdf(f, a, np.sqrt(b)), -30, 30
        )[0]
        for a, b in zip(m, v, strict=True)
    ]
    np.testing.assert_allclose(average_probability("probit", m, v), expected, rtol=1e-9)


@pytest.mark.parametrize("sd", [0.0, 0.3, 1.0, 2.9, 3.1, 6.0, 20.0, 50.0, 1e3, 1e5])
def test_logit_average_probability_against_adaptive_quadrature(sd):
    """Accurate for every latent sd, including the large ones where plain Gauss-Hermite fails
    (1e-3 error at sd = 20): what NUTS draws with a large eta produce far from the data."""
    means = np.array([-200.0, -30.0, -4.0, 0.0, 0.7, 2.0, 9.0, 45.0])
    got = average_probability("logit", means, np.full(means.size, sd**2))
    for m, p in zip(means, got, strict=True):
        if sd == 0.0:
            exact = expit(m)
        else:  # sigma(f) is 0 / 1 beyond |f| = 45 to within 3e-20
            exact = (
                stats.norm.sf(45.0, m, sd)
                + integrate.quad(
                    lambda f, m=m: expit(f) * stats.norm.pdf(f, m, sd),
                    -45.0,
                    45.0,
                    points=[np.clip(m, -44.0, 44.0)],
                    limit=2000,
                    epsabs=1e-15,
                    epsrel=1e-13,
                )[0]
            )
        assert abs(p - exact) < 1e-12, (m, sd, p, exact)


def test_average_probability_keeps_shapes_and_blocks():
    """Many draws times many points: evaluated in blocks, same answer, same shape."""
    rng = np.random.default_rng(0)
    m = rng.normal(0, 3, (7, 3000))
    v = rng.uniform(0, 40, (7, 3000))
    p = average_probability("logit", m, v)
    assert p.shape == (7, 3000)
    np.testing.assert_allclose(
        p[3, 100:110], average_probability("logit", m[3, 100:110], v[3, 100:110]), rtol=1e-14
    )
    assert np.all((p > 0) & (p < 1))
