"""Fixtures shared by the declared-model tests: a test module names its model in ``MODEL``."""

from __future__ import annotations

import pytest

from bayes_gp.declared import load_model


@pytest.fixture(scope="module")
def decl(request):
    """The declared model named by the test module's ``MODEL``."""
    return load_model(request.module.MODEL)


@pytest.fixture(scope="module")
def data(decl):
    """Its fast-mode data."""
    return decl.load_data(fast=True)
