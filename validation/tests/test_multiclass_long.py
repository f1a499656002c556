"""Long twin of tests/classification/test_multiclass_model.py (moved here for the CI budget):
the multi-class classifier's two NUTS samplers, Laplace-integrated (``fit("nuts")``) and joint
latent (``fit("nuts_joint")``), on ``_three_classes(n=45)`` at 2 x (200 + 200) draws each,
against the quadrature references of the Laplace approximation's error. The short runs
(shapes, labels, predictions) stay in tests/."""

from __future__ import annotations

import numpy as np
import pytest

from tests.classification.test_multiclass_model import (
    REF_ERROR,
    _disagreement,
    _sample_agreement_problem,
)


@pytest.fixture(scope="module")
def laplace_run():
    """``_sample_agreement_problem("nuts")``: (idata, per-draw probabilities at AGREEMENT_X)."""
    return _sample_agreement_problem("nuts")


@pytest.fixture(scope="module")
def latent_run():
    """``_sample_agreement_problem("nuts_joint")``."""
    return _sample_agreement_problem("nuts_joint")


def test_laplace_and_joint_latent_samplers_agree(laplace_run, latent_run):
    """The two samplers of the same model target different posteriors only through the Laplace
    approximation: the hyperparameter posterior means and the posterior predictive
    probabilities at five inputs differ by the Laplace error measured by quadrature
    (LAPLACE_SHIFT, LAPLACE_ERROR_P) to within 4 combined Monte Carlo standard errors (ArviZ
    MCSE of the draws' means; each draw's predictive probabilities for P) plus the references'
    own error. Measured: ratios 0.46 (ls), 0.15 (eta), 0.26 (worst P); MCSE of P <= 0.0077.
    A wrong sampler fails (tried by monkeypatching, benchmarks/README.md): + sum_c 1/2 log|K_c|
    in the Laplace evidence (a log-determinant term dropped) gave ratios 7.1 / 48.9 / 21.2;
    ``logit_p = -f`` in the joint model 57.8 for P; f = L v / sqrt(2) 1.01 for ls (barely)."""
    ratios, mcse, dP = _disagreement(laplace_run, latent_run)
    # the check has power: the Monte Carlo error is well below the Laplace error, and the
    # samplers' difference is resolved from zero (an error of that size would fail the test)
    assert mcse.max() < 0.012, mcse
    assert np.max(np.abs(dP) / (4 * mcse + REF_ERROR)) > 1.0, np.round(dP, 4)
    assert max(ratios.values()) < 1.0, (ratios, np.round(dP, 4))
