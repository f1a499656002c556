"""Shared test helpers.

Kernel *values* are checked with PyTensor's fast-compiling Python linker (``FAST_COMPILE``): a numba
or C compile per test would cost seconds each. A few tests compile with the default backend (numba)
and JAX on purpose, to show the kernels work there too.
"""

from __future__ import annotations

import os

import numpy as np
import pytensor
import pytest

os.environ.setdefault("MPLBACKEND", "Agg")


def evaluate(*exprs, mode: str = "FAST_COMPILE"):
    """Evaluate PyTensor expressions that have no free inputs."""
    out = pytensor.function([], list(exprs), mode=mode)()
    return out[0] if len(exprs) == 1 else out


@pytest.fixture
def rng():
    return np.random.default_rng(20261122)
