"""Type-II optimiser bookkeeping: the convergence judgement of :func:`multistart`."""

from __future__ import annotations

import numpy as np
import pytest

from bayes_gp.inference.typeii import CONVERGED_GRAD, multistart, newton_decrement, runaway

# A stiff quadratic, 1/2 (x - c)^T A (x - c): one direction 1e8 times stiffer than the other,
# like a well-pinned period next to a loose amplitude.
A = np.diag([1.0, 1e8])
C = np.array([0.3, -0.2])


def _neg(x):
    d = x - C
    return 0.5 * d @ A @ d, A @ d


def test_newton_decrement_of_a_quadratic_is_the_remaining_gain():
    x = C + np.array([0.5, 1e-11])
    f, g = _neg(x)
    # on a quadratic the Newton step lands on the minimum: the decrement is f(x) - f(c)
    np.testing.assert_allclose(newton_decrement(_neg, x, g), f, rtol=1e-6)
    assert newton_decrement(lambda z: (-_neg(z)[0], -_neg(z)[1]), x, -g) == np.inf  # a maximum


def test_large_gradient_in_a_stiff_direction_with_nothing_to_gain_counts_as_converged():
    """At x = c + 2e-11 e_2 the gradient is 2e-3 (> CONVERGED_GRAD) but a Newton step would gain
    2e-14: converged. At x = c + 0.5 e_1 the gradient is 0.5 and the gain 0.125: not."""
    stuck = C + np.array([0.0, 2e-11])
    far = C + np.array([0.5, 0.0])

    def rounded(x):  # the objective's decrease is below rounding: every line search fails
        return 0.0, _neg(x)[1]

    results = multistart(rounded, [stuck, far], maxiter=50, gtol=1e-12)
    by_start = {tuple(x0): r for r, x0 in results}
    r_stuck, r_far = by_start[tuple(stuck)], by_start[tuple(far)]
    assert r_stuck.success
    assert "Newton decrement" in r_stuck.message  # judged at a gradient above CONVERGED_GRAD
    assert f"max |gradient| {np.max(np.abs(_neg(stuck)[1])):.2g}" in r_stuck.message
    # ... and then the final Newton step in the stiff directions lands on the minimum
    np.testing.assert_allclose(r_stuck.x, C, atol=1e-12)
    assert np.max(np.abs(r_stuck.jac)) < CONVERGED_GRAD
    assert not r_far.success and "Newton decrement" in r_far.message


def test_flat_directions_are_judged_by_their_gradient():
    """A direction with zero curvature (a rational-quadratic alpha -> infinity) has no Newton
    step: it is ignored when its gradient is negligible and makes the end point unconverged when
    it is not."""
    A3 = np.diag([1.0, 1e6, 0.0])

    def neg3(x):
        return 0.5 * x @ A3 @ x + 1e-7 * x[2], A3 @ x + np.array([0.0, 0.0, 1e-7])

    x = np.array([1e-5, 1e-8, 3.0])
    _, g = neg3(x)
    np.testing.assert_allclose(newton_decrement(neg3, x, g), 0.5 * (1e-10 + 1e-10), rtol=1e-5)

    def tilted(x):
        return 0.5 * x @ A3 @ x + 1e-2 * x[2], A3 @ x + np.array([0.0, 0.0, 1e-2])

    assert newton_decrement(tilted, x, tilted(x)[1]) == np.inf


def test_restarts_move_a_hyperparameter_whose_prior_has_an_initval():
    """The defect: restarts drew their starts with the priors' initvals kept, so a
    hyperparameter with an initval started every restart at the same value (n_restarts=4 was
    one fit done four times). The first start is the initval; the others are prior draws."""
    import pymc as pm

    from bayes_gp.inference.typeii import prior_starts

    with pm.Model() as m:
        pm.LogNormal("a", 0.0, 1.0, initval=0.1)
        pm.HalfNormal("b", 2.0)
    names = [v.name for v in m.value_vars]
    starts = np.array(prior_starts(m, names, 4, np.random.default_rng(0)))
    assert starts[0, 0] == pytest.approx(np.log(0.1))  # the initval, on the log scale
    assert len(np.unique(starts[:, 0])) == 4 and len(np.unique(starts[:, 1])) == 4


def test_a_stalled_gain_with_the_gradient_test_met_stops_early(monkeypatch):
    """An ARD fit with two irrelevant inputs: their length-scales run to infinity on an
    objective flat to rounding. With the stall rule (gain per iteration below STALL_GAIN for
    STALL_ITERATIONS iterations, gradient test met) L-BFGS-B stops earlier than with only its
    relative-decrease test, at the same optimum: log marginal likelihood within 1e-9 nats and the
    length-scales the data pin equal to 1e-6. The irrelevant length-scales are named as running
    away (typeii.runaway), so no run counts as converged."""
    from bayes_gp import GPRegression
    from bayes_gp.inference import typeii

    rng = np.random.default_rng(3)
    X = rng.uniform(0, 10, (80, 4))
    y = np.sin(X[:, 0]) + 0.5 * np.cos(X[:, 1]) + 0.2 * rng.normal(size=80)
    fits, default = {}, typeii.STALL_GAIN
    for gain in (default, -1.0):  # -1: the rule never fires
        monkeypatch.setattr(typeii, "STALL_GAIN", gain)
        gp = GPRegression(X, y, "expquad", ard=True, mean="zero")
        fits[gain] = gp.fit_map(n_restarts=3, prior=False, random_seed=0)
    stalled, full = fits[default], fits[-1.0]
    assert all("StopIteration" in r.message for r in stalled.restarts), [
        (r.n_iter, r.message) for r in stalled.restarts
    ]
    assert not any("StopIteration" in r.message for r in full.restarts)
    # the best run ends at the optimum of the relevant inputs with an irrelevant length-scale
    # running off: no finite optimum, so not converged, and named (with or without the rule)
    for fit in (stalled, full):
        assert not fit.converged
        assert [r.split()[0] for r in fit.runaway] == ["ls[3]"], fit.runaway
    assert sum(r.n_iter for r in stalled.restarts) < sum(r.n_iter for r in full.restarts)
    assert abs(stalled.log_marginal_likelihood - full.log_marginal_likelihood) < 1e-9
    np.testing.assert_allclose(stalled.params["ls"][:2], full.params["ls"][:2], rtol=1e-6)
    assert np.all(stalled.params["ls"][2:] > 50.0)  # the irrelevant inputs' length-scales ran off


# ------------------------------------------------------------------ hyperparameters that run away
def _values(x):
    return np.exp(np.asarray(x, float))  # a positive parameter on the log scale


def test_a_saturating_objective_runs_away_and_an_interior_optimum_does_not():
    """x = log(eta): the first objective keeps rising (to a plateau) as eta grows, the second has
    its maximum at eta = 1, the third falls towards eta -> 0."""
    rising = lambda x: (float(np.exp(-x[0])), np.array([-np.exp(-x[0])]))  # noqa: E731
    interior = lambda x: (float(0.5 * x[0] ** 2), np.array([x[0]]))  # noqa: E731
    to_zero = lambda x: (float(np.exp(x[0])), np.array([np.exp(x[0])]))  # noqa: E731
    assert runaway(rising, np.array([18.0]), ["eta"], _values) == ("eta flat at 6.57e+07",)
    assert runaway(rising, np.array([2.0]), ["eta"], _values) == ("eta -> inf",)
    assert runaway(interior, np.array([0.0]), ["eta"], _values) == ()
    # a weak but real curvature is an optimum: 1e-6 nats over e^3 is the threshold
    weak = lambda x: (float(1e-6 * x[0] ** 2), np.array([2e-6 * x[0]]))  # noqa: E731
    assert runaway(weak, np.array([0.0]), ["eta"], _values) == ()
    assert runaway(to_zero, np.array([-18.0]), ["sigma"], _values) == ("sigma flat at 1.52e-08",)
    assert runaway(to_zero, np.array([-3.0]), ["sigma"], _values) == ("sigma -> 0",)


def test_only_the_coordinate_that_runs_away_is_named():
    def neg(x):  # ls (coordinate 0) has an optimum at 1; eta (coordinate 1) saturates
        return float(0.5 * x[0] ** 2 + np.exp(-x[1])), np.array([x[0], -np.exp(-x[1])])

    assert runaway(neg, np.array([0.0, 3.0]), ["ls", "eta"], _values) == ("eta -> inf",)
    # an unconstrained parameter (the identity transform) that runs to minus infinity
    lin = lambda x: (float(np.exp(x[0])), np.array([np.exp(x[0])]))  # noqa: E731
    assert runaway(lin, np.array([-3.0]), ["mean"], lambda x: np.asarray(x, float)) == (
        "mean -> -inf",
    )
