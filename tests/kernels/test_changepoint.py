"""Change-point and change-window kernels (bayes_gp.kernels.changepoint).

The NumPy references are transcribed from the equations of the docstrings and, for
``ChangePoints``, from GPflow's ``ChangePoints.K`` (gpflow/kernels/changepoints.py: ``starters``
and ``stoppers``, products of sigmoids over pairs of inputs, ones prepended to ``starters`` and
appended to ``stoppers``, summed against the stacked Gram matrices). PSD, symmetry, gradients
and the model log-density are covered by the property suite (tests/kernels/catalogue.py cases
``ChangePoints`` and ``ChangeWindow``); here: values, limits, errors, prior names and a MAP fit
that finds the change.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

import bayes_gp.kernels as K
from bayes_gp import GPRegression
from bayes_gp.kernels.parameters import kernel_parameters
from tests.helpers import assert_matches, evaluate


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _se(A, B, ls):
    """R&W eq. (4.9), ARD."""
    d = (A[:, None, :] - B[None, :, :]) / ls
    return np.exp(-0.5 * np.sum(d**2, axis=-1))


def _m32(A, B, ls):
    """R&W eq. (4.17a)."""
    r = np.sqrt(np.sum(((A[:, None, :] - B[None, :, :]) / ls) ** 2, axis=-1))
    return (1 + np.sqrt(3) * r) * np.exp(-np.sqrt(3) * r)


def gpflow_changepoints(kernels, locations, steepness, X, X2, column):
    """GPflow's ``ChangePoints.K`` transcribed to NumPy (its ``_sigmoids`` sorts the locations
    and not the steepness)."""
    locations = np.sort(np.asarray(locations, float)).reshape(1, 1, -1)
    steepness = np.asarray(steepness, float).reshape(1, 1, -1)

    def sigmoids(A):  # N x 1 x Ncp
        return _sigmoid(steepness * (A[:, [column]][:, :, None] - locations))

    sig_X1, sig_X2 = sigmoids(X), sigmoids(X2)
    starters = sig_X1 * np.transpose(sig_X2, (1, 0, 2))
    stoppers = (1 - sig_X1) * np.transpose(1 - sig_X2, (1, 0, 2))
    ones = np.ones((X.shape[0], X2.shape[0], 1))
    starters = np.concatenate([ones, starters], axis=2)
    stoppers = np.concatenate([stoppers, ones], axis=2)
    kernel_stack = np.stack([k(X, X2) for k in kernels], axis=2)
    return np.sum(kernel_stack * starters * stoppers, axis=2)


RNG = np.random.default_rng(7)
X = RNG.uniform(-3, 3, size=(9, 2))
XS = RNG.uniform(-3, 3, size=(5, 2))
REFS = [
    lambda A, B: 1.5 * _se(A, B, np.array([0.8, 1.4])),
    lambda A, B: _m32(A[:, 1:], B[:, 1:], 0.6),
    lambda A, B: 0.3 * _se(A, B, np.array([2.0, 2.0])),
]


def _kernels():
    return [
        1.5 * K.ExpQuad(2, ls=[0.8, 1.4]),
        K.Matern32(2, ls=0.6, active_dims=[1]),
        0.3 * K.ExpQuad(2, ls=2.0),
    ]


@pytest.mark.parametrize("steepness", [3.0, [1.5, 6.0]], ids=["scalar", "vector"])
@pytest.mark.parametrize("column", [0, 1])
def test_changepoints_equal_gpflow(steepness, column):
    k = K.ChangePoints(_kernels(), [-0.8, 1.1], steepness, column=column)
    assert_matches(
        k, lambda A, B: gpflow_changepoints(REFS, [-0.8, 1.1], steepness, A, B, column), X, XS
    )


def test_changepoint_equals_its_formula():
    """(1 - s(x)) k1 (1 - s(x')) + s(x) k2 s(x'), s = sigmoid(steepness (x - location))."""
    k = K.ChangePoint(_kernels()[0], _kernels()[1], location=0.4, steepness=2.5)

    def ref(A, B):
        sa, sb = _sigmoid(2.5 * (A[:, 0] - 0.4)), _sigmoid(2.5 * (B[:, 0] - 0.4))
        return (1 - sa)[:, None] * REFS[0](A, B) * (1 - sb)[None, :] + sa[:, None] * REFS[1](
            A, B
        ) * sb[None, :]

    assert_matches(k, ref, X, XS)


def test_unsorted_locations_keep_their_steepness():
    """Locations are sorted inside the kernel; a steepness vector follows them (where GPflow
    would pair it with the wrong change point)."""
    a = K.ChangePoints(_kernels(), [1.1, -0.8], [6.0, 1.5])
    b = K.ChangePoints(_kernels(), [-0.8, 1.1], [1.5, 6.0])
    np.testing.assert_allclose(*evaluate(a(X, XS), b(X, XS)), rtol=1e-14)


def test_steep_switch_is_a_hard_change():
    """Infinitely steep: k1 before the change, k2 after, zero across it."""
    x = np.array([[-2.0], [-1.0], [1.0], [2.5]])
    k1, k2 = K.ExpQuad(1, ls=1.0), 2.0 * K.Matern32(1, ls=0.5)
    got = evaluate(K.ChangePoint(k1, k2, location=0.0, steepness=1e4)(x))
    want = np.zeros((4, 4))
    want[:2, :2] = _se(x[:2], x[:2], 1.0)
    want[2:, 2:] = 2.0 * _m32(x[2:], x[2:], 0.5)
    np.testing.assert_allclose(got, want, atol=1e-300)


def test_change_window_equals_its_formula():
    """w(x) = sigmoid(s1 (x - start)) sigmoid(s2 (end - x)); w k_in w' + (1-w) k_out (1-w')."""
    k = K.ChangeWindow(_kernels()[0], _kernels()[2], start=-1.0, end=0.5, steepness=[2.0, 5.0])

    def w(A):
        return _sigmoid(2.0 * (A[:, 0] + 1.0)) * _sigmoid(5.0 * (0.5 - A[:, 0]))

    def ref(A, B):
        wa, wb = w(A), w(B)
        inside = wa[:, None] * REFS[0](A, B) * wb[None, :]
        return inside + (1 - wa)[:, None] * REFS[2](A, B) * (1 - wb)[None, :]

    assert_matches(k, ref, X, XS)
    only = K.ChangeWindow(_kernels()[0], None, start=-1.0, end=0.5, steepness=[2.0, 5.0])
    assert_matches(only, lambda A, B: w(A)[:, None] * REFS[0](A, B) * w(B)[None, :], X, XS)


def test_change_window_keeps_one_process_outside():
    """The function before the window and after it is one process (correlated through k_out);
    ChangePoints([out, in, out]) makes them independent."""
    x = np.array([[-3.0], [3.0]])
    out, inside = K.ExpQuad(1, ls=10.0), K.ExpQuad(1, ls=0.5)
    cw = evaluate(K.ChangeWindow(inside, out, -1.0, 1.0, 20.0)(x))
    cp = evaluate(K.ChangePoints([out, inside, out], [-1.0, 1.0], 20.0)(x))
    assert cw[0, 1] == pytest.approx(np.exp(-0.5 * 0.36), rel=1e-12)
    assert abs(cp[0, 1]) < 1e-30


def test_priors_are_named_after_the_attributes():
    k = K.ChangePoint(
        pm.HalfNormal.dist(1.0) ** 2 * K.ExpQuad(1, ls=pm.Gamma.dist(2.0, 1.0)),
        K.Matern32(1, ls=pm.Gamma.dist(2.0, 2.0)),
        location=pm.Normal.dist(0.0, 3.0),
        steepness=pm.LogNormal.dist(0.0, 1.0),
    )
    assert sorted(kernel_parameters(k)) == ["eta", "expquad_ls", "location", "matern32_ls", "steepness"]
    many = K.ChangePoints(
        [K.ExpQuad(1, ls=1.0)] * 3, pm.Normal.dist(0.0, 3.0, shape=2), pm.LogNormal.dist(0, 1)
    )
    assert list(kernel_parameters(many)) == ["locations", "steepness"]
    win = K.ChangeWindow(
        K.ExpQuad(1, ls=1.0), None, pm.Normal.dist(-1.0, 1.0), pm.Normal.dist(1.0, 1.0), 2.0
    )
    assert list(kernel_parameters(win)) == ["start", "end"]


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda: K.ChangePoint(K.ExpQuad(1, ls=1.0), K.ExpQuad(1, ls=1.0), 0.0, -1.0), ValueError,
         r"`steepness` must be strictly positive"),
        (lambda: K.ChangePoint(K.ExpQuad(1, ls=1.0), K.ExpQuad(2, ls=1.0), 0.0, 1.0), ValueError,
         r"different input_dim \[1, 2\]"),
        (lambda: K.ChangePoint(K.ExpQuad(1, ls=1.0), "expquad", 0.0, 1.0), TypeError,
         r"`kernels\[1\]` must be a covariance function"),
        (lambda: K.ChangePoints([K.ExpQuad(1, ls=1.0)], [], 1.0), ValueError,
         "at least two kernels"),
        (lambda: K.ChangePoints([K.ExpQuad(1, ls=1.0)] * 3, [0.0], 1.0), ValueError,
         r"`locations` has 1 entries but 3 kernels need 2 change point\(s\)"),
        (lambda: K.ChangePoints([K.ExpQuad(1, ls=1.0)] * 3, [0.0, 1.0], [1.0, 2.0, 3.0]),
         ValueError, r"`steepness` has 3 entries but there are 2 change points"),
        (lambda: K.ChangePoints([K.ExpQuad(1, ls=1.0)] * 2, [np.nan], 1.0), ValueError,
         "`locations` must be finite"),
        (lambda: K.ChangePoint(K.ExpQuad(1, ls=1.0), K.ExpQuad(1, ls=1.0), [0.0, 1.0], 1.0),
         ValueError, "for several change points use ChangePoints"),
        (lambda: K.ChangePoint(K.ExpQuad(2, ls=1.0), K.ExpQuad(2, ls=1.0), 0.0, 1.0, column=2),
         ValueError, r"`column`=2 must lie in 0..1"),
        (lambda: K.ChangeWindow(K.ExpQuad(1, ls=1.0), None, 1.0, 1.0, 1.0), ValueError,
         "`start` < `end`"),
        (lambda: K.ChangeWindow(K.ExpQuad(1, ls=1.0), None, 0.0, 1.0, [1.0, 0.0]), ValueError,
         "`steepness` must be strictly positive"),
    ],
)  # fmt: skip
def test_bad_arguments_are_refused_by_name(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_kernels_are_immutable():
    k = K.ChangePoint(K.ExpQuad(1, ls=1.0), K.ExpQuad(1, ls=1.0), 0.0, 1.0)
    with pytest.raises(AttributeError, match="immutable"):
        k.steepness = 2.0


def test_map_fit_finds_the_change_point():
    """A quiet smooth signal that turns into a fast large oscillation at x = 4: the MAP
    location is within 0.3 of 4 (the inputs are 0.2 apart), from a prior centred at 5."""
    rng = np.random.default_rng(0)
    x = np.linspace(0.0, 10.0, 50)
    y = np.where(x < 4.0, 0.2 * np.sin(0.5 * x), 1.5 * np.sin(3.0 * x)) + 0.05 * rng.normal(
        size=x.size
    )
    kernel = K.ChangePoint(
        0.2**2 * K.ExpQuad(1, ls=2.0),
        1.5**2 * K.ExpQuad(1, ls=0.4),
        location=pm.Normal.dist(5.0, 2.0),
        steepness=pm.LogNormal.dist(np.log(5.0), 1.0),
    )
    model = GPRegression(x, y, kernel, mean="zero", priors={"sigma": pm.HalfNormal.dist(0.2)})
    assert sorted(model.hyperparameters) == ["location", "sigma", "steepness"]
    fit = model.fit_map(n_restarts=1, random_seed=0)
    assert fit.params["location"] == pytest.approx(4.0, abs=0.3)
    assert fit.params["sigma"] == pytest.approx(0.05, rel=0.5)
