"""The exact GP refuses, before allocating, a model whose evaluation would not fit in memory
(issue 19), with advice, as the compact-support likelihood does."""

from __future__ import annotations

import numpy as np
import pytest

import bayes_gp
from bayes_gp.regression import exact
from bayes_gp.regression.exact import DENSE_EVAL_MATRICES, check_dense_memory, dense_memory_bytes


def test_estimate_counts_n_by_n_matrices():
    assert DENSE_EVAL_MATRICES == 8
    assert dense_memory_bytes(10_000) == 8 * 8 * 10_000**2  # 6.4 GB at n = 10^4
    assert dense_memory_bytes(1) == 64


def test_refuses_before_allocating_with_advice():
    # n = 10^5: 80 GB per n x n matrix; refused while building, in well under a second
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(100_000, 2))
    y = rng.normal(size=100_000)
    with pytest.raises(MemoryError, match=r"n = 100000 .* 596\.0 GiB.*approx='hsgp'.*subset"):
        bayes_gp.GPRegression(X, y, kernel="expquad", ard=True)


def test_limit_is_the_documented_constant(monkeypatch):
    rng = np.random.default_rng(1)
    X = rng.uniform(size=(60, 2))
    y = rng.normal(size=60)
    bayes_gp.GPRegression(X, y, kernel="expquad")  # 230 kB: fine
    monkeypatch.setattr(exact, "MAX_DENSE_BYTES", dense_memory_bytes(60) - 1)
    with pytest.raises(MemoryError, match="MAX_DENSE_BYTES"):
        bayes_gp.GPRegression(X, y, kernel="expquad")
    monkeypatch.setattr(exact, "MAX_DENSE_BYTES", dense_memory_bytes(60))
    check_dense_memory(60)  # at the limit: accepted
    assert exact._memory_limit() == dense_memory_bytes(60)  # the machine has more than that
    # the approximations do not need the dense matrices
    gp = bayes_gp.GPRegression(
        X, y, kernel="expquad", approx="vfe", approx_options={"n_inducing": 10}
    )
    assert gp.approximation is not None
