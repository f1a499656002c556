"""Long version of tests/test_workflow_edge_cases.py: every edge-case data set with every fit
(the whole grid) and with NUTS (regression, and the Poisson latent GP with the Laplace-integrated
GP), with ``./run validate`` or ``python -m pytest validation/tests``."""

from __future__ import annotations

import pytest

from bayes_gp.workflow import CSVModel
from tests.test_workflow_edge_cases import CASES, FIT_NAMES, FITS, check_edge_case

FITS.update(
    {
        "regression-nuts": (lambda p: CSVModel(p, ("x1", "x2"), "y"), "nuts"),
        "poisson-nuts": (
            lambda p: CSVModel(p, ("x1", "x2"), "count", likelihood="poisson"), "nuts"
        ),
    }
)


@pytest.mark.parametrize("fit", [*FIT_NAMES, "regression-nuts", "poisson-nuts"])
@pytest.mark.parametrize("case", CASES)
def test_every_fit_is_usable_or_refused_clearly_long(case, fit, tmp_path):
    nuts = {"draws": 200, "tune": 200, "chains": 2} if fit.endswith("nuts") else {}
    check_edge_case(case, fit, tmp_path, **nuts)
