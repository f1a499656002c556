"""Long version of tests/test_workflow_edge_cases.py: every edge-case data set with every fit
(the whole grid) and with NUTS (regression, the Poisson latent GP with the Laplace-integrated
GP, and the declared models of the classes a CSV specification cannot reach: MultiOutputGP,
DeepKernelRegression and HeteroscedasticGPRegression, whose only fit NUTS is), with
``./run validate`` or ``python -m pytest validation/tests``."""

from __future__ import annotations

import pytest

from bayes_gp.workflow import CSVModel
from tests.test_workflow_edge_cases import (
    CASES,
    DECLARED_FITS,
    DECLARED_NAMES,
    FIT_NAMES,
    FITS,
    check_declared_edge_case,
    check_edge_case,
)

FITS.update(
    {
        "regression-nuts": (lambda p: CSVModel(p, ("x1", "x2"), "y"), "nuts"),
        "poisson-nuts": (
            lambda p: CSVModel(p, ("x1", "x2"), "count", likelihood="poisson"), "nuts"
        ),
    }
)
DECLARED_NUTS = ("multioutput-nuts", "dkl-nuts", "hetero-nuts")
DECLARED_FITS.update({name: (name.removesuffix("-nuts"), "nuts") for name in DECLARED_NUTS})
NUTS = {"draws": 200, "tune": 200, "chains": 2}


@pytest.mark.parametrize("fit", [*FIT_NAMES, "regression-nuts", "poisson-nuts"])
@pytest.mark.parametrize("case", CASES)
def test_every_fit_is_usable_or_refused_clearly_long(case, fit, tmp_path):
    check_edge_case(case, fit, tmp_path, **(NUTS if fit.endswith("nuts") else {}))


@pytest.mark.parametrize("fit", [*DECLARED_NAMES, *DECLARED_NUTS])
@pytest.mark.parametrize("case", CASES)
def test_every_declared_fit_is_usable_or_refused_clearly_long(case, fit, tmp_path, monkeypatch):
    nuts = NUTS if fit.endswith("nuts") else {}
    check_declared_edge_case(case, fit, tmp_path, monkeypatch, **nuts)
