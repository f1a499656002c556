"""Renamed keyword arguments: one name across the package (``random_seed``), the old one still
accepted for a release with a ``FutureWarning`` that names the new one."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from bayes_gp import GPRegression
from bayes_gp._arguments import renamed_argument


@renamed_argument("seed", "random_seed")
def _draw(n: int, random_seed: int = 0) -> np.ndarray:
    return np.random.default_rng(random_seed).standard_normal(n)


def test_the_new_name_and_positional_calls_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(_draw(3, random_seed=5), _draw(3, 5))


def test_the_old_name_still_works_and_names_the_new_one():
    with pytest.warns(FutureWarning, match=r"`seed=` is renamed `random_seed=`"):
        old = _draw(3, seed=5)
    np.testing.assert_array_equal(old, _draw(3, random_seed=5))


def test_both_names_at_once_are_refused():
    with pytest.raises(TypeError, match="give `random_seed` only"):
        _draw(3, seed=1, random_seed=2)


def test_model_methods_take_random_seed_and_still_accept_seed():
    """``prior_predictive`` / ``replicate`` / ``predict`` of every family take ``random_seed``
    (as ``fit`` and ``sample`` do); GPRegression's stands for them here."""
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 5, 15)
    gp = GPRegression(X, np.sin(X) + rng.normal(0, 0.1, 15), "expquad")
    new = gp.prior_predictive(4, random_seed=3)
    with pytest.warns(FutureWarning, match="prior_predictive"):
        old = gp.prior_predictive(4, seed=3)
    np.testing.assert_array_equal(new, old)
    assert not np.array_equal(new, gp.prior_predictive(4, random_seed=4))
