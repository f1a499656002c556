"""The degenerate-fit rules (bayes_gp.inference.degenerate, issue 37 part 2) on hand-made end
points, and the spacing of a model's length-scales."""

from __future__ import annotations

import numpy as np
import pymc as pm

from bayes_gp.inference.degenerate import (
    SCALE_TOL,
    SPACING_FRACTION,
    degenerate,
    kernel_spacing,
    kind_of,
    smallest_spacing,
)
from bayes_gp.kernels import ExpQuad, Matern52, Periodic


def test_kinds_from_names():
    assert kind_of("eta") == "eta"
    assert kind_of("class_mid::eta") == "eta"
    assert kind_of("ls_tau") == "tau"
    assert kind_of("intercept_sd") == "sd"
    assert kind_of("sigma_group[3]") == "sigma"
    assert kind_of("expquad1_ls[0]") == "ls"
    assert kind_of("gp(t).ls") == "ls"
    assert kind_of("ls_mu") == "mu"


def test_a_scale_at_zero_is_degenerate_and_an_interior_one_is_not():
    labels = ["sigma", "eta", "ls_tau", "intercept_sd"]
    ref = np.array([0.8, 0.8, 0.5, 0.8])
    at_zero = np.array([4.1e-9, 0.0, 2e-10, 0.3 * SCALE_TOL * 0.8])
    found = degenerate(labels, at_zero, ref)
    assert [f.split()[0] for f in found] == labels, found
    assert found[0].startswith("sigma -> 0 (4.1e-09"), found
    interior = np.array([0.05, 1.2, 0.01, 2 * SCALE_TOL * 0.8])
    assert degenerate(labels, interior, ref) == ()


def test_shapes_and_locations_are_not_scales():
    # a location on the log scale (ls_mu), a slope, a shape (alpha, nu) at ~0 are not judged
    labels = ["ls_mu", "slope[0]", "alpha", "nu", "dispersion"]
    assert degenerate(labels, np.zeros(5), np.ones(5)) == ()


def test_a_length_scale_below_the_spacing_is_degenerate():
    spacing = {"ls": 1.0, "ard_ls": np.array([1.0, 0.01])}
    labels = ["ls", "ard_ls[0]", "ard_ls[1]"]
    ref = np.ones(3)
    found = degenerate(labels, np.array([2e-4, 0.5, 2e-3]), ref, spacing)
    assert found == ("ls = 0.0002 < 1/10 of the smallest input spacing 1",), found
    found = degenerate(labels, np.array([0.5, 0.5, 5e-4]), ref, spacing)
    assert found == ("ard_ls[1] = 0.0005 < 1/10 of the smallest input spacing 0.01",), found
    # at exactly a tenth of the spacing and above: rough, not degenerate
    assert degenerate(["ls"], np.array([SPACING_FRACTION]), np.ones(1), spacing) == ()
    # a length-scale whose spacing is unknown is not judged by the spacing rule
    assert degenerate(["periodic_ls"], np.array([1e-6]), np.ones(1), spacing) == ()


def test_smallest_spacing_of_distinct_values():
    assert smallest_spacing(np.array([3.0, 1.0, 1.0, 2.5, 7.0])) == 0.5
    assert smallest_spacing(np.array([2.0, 2.0])) == np.inf


def test_kernel_spacing_of_catalogue_kernels_and_objects():
    X = np.column_stack([[1.0, 2.0, 4.0, 4.0], [0.0, 0.1, 0.3, 0.6]])
    assert kernel_spacing(X, "expquad", ("ls", "eta")) == {"ls": 0.1}
    ard = kernel_spacing(X, "expquad", ("ls", "eta"), ard=True)
    np.testing.assert_allclose(ard["ls"], [1.0, 0.1])
    both = kernel_spacing(X, "expquad * periodic", ("expquad_ls", "eta", "periodic_ls"))
    assert set(both) == {"expquad_ls"}
    k = pm.HalfNormal.dist(1.0) ** 2 * Matern52(2, ls=pm.HalfNormal.dist(50), active_dims=[0])
    assert kernel_spacing(X, k, ()) == {"ls": 1.0}
    k2 = ExpQuad(2, ls=pm.Gamma.dist(2, 1), active_dims=[1]) * Periodic(
        2, period=pm.Gamma.dist(2, 1), ls=pm.Gamma.dist(2, 1), active_dims=[0]
    )
    assert kernel_spacing(X, k2, ()) == {"expquad_ls": 0.1}
    assert kernel_spacing(X, lambda D: None, ()) == {}
