"""Old import paths of moved modules (bayes_gp._moved) and the state-space terms' old names."""

from __future__ import annotations

import importlib
import sys

import pytest

import bayes_gp.regression  # noqa: F401  (registers the old paths)
from bayes_gp.kernels import statespace
from bayes_gp.solvers import hsgp


def test_an_old_path_is_the_new_module_with_a_warning():
    sys.modules.pop("bayes_gp.regression.hsgp", None)
    with pytest.warns(
        FutureWarning, match=r"bayes_gp\.regression\.hsgp` moved to `bayes_gp\.solvers\.hsgp"
    ):
        old = importlib.import_module("bayes_gp.regression.hsgp")
    assert old is hsgp
    # the new module keeps its own identity
    assert hsgp.__name__ == "bayes_gp.solvers.hsgp"
    assert hsgp.__spec__.name == "bayes_gp.solvers.hsgp"
    assert old.HSGPLikelihood is hsgp.HSGPLikelihood


def test_from_import_of_an_old_path():
    sys.modules.pop("bayes_gp.regression.quasisep_terms", None)
    with pytest.warns(FutureWarning, match="bayes_gp.kernels.statespace"):
        from bayes_gp.regression.quasisep_terms import StateSpaceKernel
    assert StateSpaceKernel is statespace.StateSpaceKernel


def test_an_unknown_old_name_is_still_an_import_error():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("bayes_gp.regression.no_such_module")


def test_the_state_space_terms_old_names():
    with pytest.warns(FutureWarning, match="`Matern` is now `MaternTerm`.*`ell` is `ls`"):
        term = statespace.Matern(2.5, eta=1.3, ell=0.7)
    assert isinstance(term, statespace.MaternTerm)
    assert (term.nu, float(term.eta), float(term.ls)) == (2.5, 1.3, 0.7)
    with pytest.warns(FutureWarning, match="`SHO` is now `SHOTerm`"):
        assert statespace.SHO is statespace.SHOTerm
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        statespace.Nope  # noqa: B018
