"""Fixtures shared by the inference tests."""

from __future__ import annotations

import pytest

import bayes_gp.inference.nuts as nuts


@pytest.fixture
def calls(monkeypatch):
    """run_nuts replaced by a recorder that stops the run (no sampling)."""
    seen = []

    def fake(model, **kwargs):
        seen.append((model, kwargs))
        raise RuntimeError("recorded")

    monkeypatch.setattr(nuts, "run_nuts", fake)
    return seen
