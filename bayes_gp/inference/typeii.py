r"""Type-II fits of PyMC models: maximum marginal likelihood (ML-II) and MAP, with restarts.

The log marginal likelihood of a GP is non-convex in the hyperparameters (R&W §5.4.1,
PRML §6.4.3), so a single start can end in a poor local optimum. :func:`optimize` runs L-BFGS-B
from the prior's support point and from draws from the priors, with exact gradients from
PyTensor, in the unconstrained space (log length-scales etc.), and keeps the best optimum.

``prior=False`` maximises :math:`\log p(y \mid \theta)` (ML-II); ``prior=True`` maximises
:math:`\log p(y \mid \theta) + \log p(\theta)` (MAP, without the Jacobian of the transform, so the
mode is that of the density on the original scale, as ``pm.find_MAP`` does).

**What the package's MAP is.** The optimiser moves on the unconstrained scale (``log eta``,
``log ls``) but the objective is ``model.logp(jacobian=False)``: the log density of the
hyperparameters *on their own, constrained scale*, so the optimum is the mode of
:math:`p(\theta \mid y)` in :math:`\theta`, not the mode of the density of
:math:`\log \theta` (which would add :math:`\sum \log \theta_i` and push every scale away from
zero). The default priors are not boundary-avoiding: amplitudes (``eta``), noise levels
(``sigma``), group spreads (``*_tau``, ``intercept_sd``) are half-normal, whose density is largest
at zero, so where the likelihood is flat towards zero the mode is *on* the boundary (Chung et al.
2013, on boundary-avoiding priors for point estimates): a scale at zero. A length-scale's
default prior is log-normal, whose density vanishes at zero, but a likelihood that rises as the
GP interpolates the data can outweigh it, and a user's half-normal length-scale prior does not
vanish there: a length-scale below the inputs' spacing. Such an end
point is detected, not avoided: every restart's end point is checked by
:func:`bayes_gp.inference.degenerate.degenerate` (a scale below 1e-4 of its prior's scale, a
length-scale below 1/10 of its input's smallest spacing); the restart records the names
(``Restart.degenerate``, ``fit.degenerate``), is not converged, and a :class:`ConvergenceWarning`
says what to do (NUTS; a prior that avoids the boundary, e.g. a log-normal or gamma amplitude and
an inverse-gamma length-scale; a fixed value). ML-II's end points are checked the same way.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pymc.blocking import DictToArrayBijection, RaveledVars
from pymc.initial_point import make_initial_point_fn
from pytensor.graph.replace import graph_replace
from scipy import optimize as sopt

from bayes_gp.inference import native_gp
from bayes_gp.inference.degenerate import degenerate
from bayes_gp.linalg import EAGER_MODE
from bayes_gp.protocol import PointFit

__all__ = [
    "ConvergenceWarning",
    "MapFit",
    "Restart",
    "optimize",
    "function_of_values",
    "batched_function_of_values",
    "observed_logp_and_grad",
    "prior_starts",
    "multistart",
    "restarts_table",
    "raveler",
    "runaway",
    "warn_degenerate",
    "RUNAWAY_STEP",
    "RUNAWAY_TOL",
]


@dataclass(frozen=True)
class Restart:
    """One optimisation run: where it started and ended, and the objective there.

    ``runaway`` names the hyperparameters that ran away from the end point (:func:`runaway`),
    as ``"eta -> inf"``, ``"ls[1] -> 0"``; ``degenerate`` those that ended on a degenerate value
    (:func:`bayes_gp.inference.degenerate.degenerate`: ``"sigma -> 0 (4.1e-09 < ...)"``); a
    run with any is not ``converged``."""

    start: dict
    params: dict
    objective: float
    converged: bool
    n_iter: int
    message: str
    runaway: tuple[str, ...] = ()
    degenerate: tuple[str, ...] = ()


@dataclass(frozen=True)
class MapFit(PointFit):
    """Result of a type-II fit.

    Attributes
    ----------
    params : dict
        Hyperparameter name → value at the best optimum, on the data's scale.
    log_marginal_likelihood : float
        :math:`\\log p(y \\mid \\hat\\theta)` of the data as given (set by the model).
    objective : float
        Maximised objective: log marginal likelihood (``prior=False``) or log posterior.
    prior : bool
        Whether the priors were included (MAP) or not (ML-II).
    restarts : list of Restart
        Every restart's start, optimum and objective (best first).
    grad_norm : float
        Euclidean norm of the gradient of the objective at the optimum (unconstrained space).
    seconds : float
        Wall time of the optimisation, compilation included.
    jitter : float
        Absolute jitter on the diagonal of the covariance during the fit (chosen by the
        pre-flight Cholesky check, :mod:`bayes_gp.inference.jitter`); NaN when not recorded.
    jitter_default : float
        The model's jitter before that check (``jitter > jitter_default``: it was raised).
    """

    params: dict
    objective: float
    prior: bool
    restarts: list = field(default_factory=list)
    grad_norm: float = float("nan")
    log_marginal_likelihood: float = float("nan")
    seconds: float = float("nan")
    jitter: float = float("nan")
    jitter_default: float = float("nan")

    def with_log_marginal_likelihood(self, value: float) -> MapFit:
        return dataclasses.replace(self, log_marginal_likelihood=float(value))

    @property
    def converged(self) -> bool:
        return bool(self.restarts and self.restarts[0].converged)


def function_of_values(rvs, build, mode=EAGER_MODE):
    """Compile ``build(Xn)`` as a NumPy function of ``(values of rvs..., Xn)``.

    Each random variable in ``rvs`` is replaced by a plain input of the same type, so the model's
    own kernel and mean graphs are evaluated at given hyperparameter values (``Xn`` is a matrix
    input that ``build`` may use or ignore).
    """
    holders, Xn, outs = _graph_of_values(rvs, build)
    return pytensor.function([*holders, Xn], outs, mode=mode, on_unused_input="ignore")


def _graph_of_values(rvs, build):
    """``(holders, Xn, outputs)``: ``build(Xn)`` with each random variable of ``rvs`` replaced by
    a plain input of its type (:func:`function_of_values`, :func:`batched_function_of_values`)."""
    holders = [rv.type() for rv in rvs]
    Xn = pt.dmatrix("X_new")
    outs = graph_replace(build(Xn), dict(zip(rvs, holders, strict=True)), strict=False)
    return holders, Xn, outs


def batched_function_of_values(rvs, build, mode=EAGER_MODE):
    """Compile ``build(Xn)`` as a NumPy function of ``(values of rvs..., Xn)``, the values
    stacked along a new leading axis (one row per draw), or ``None`` where PyTensor cannot
    vectorise the graph (``Xn``, a matrix input that ``build`` may use or ignore, is shared by
    the draws).

    The graph of :func:`function_of_values` with its placeholders vectorised
    (``pytensor.graph.replace.vectorize_graph``): one evaluation answers a whole block of
    posterior draws, the elementwise kernel arithmetic running over ``(draws, n, n)`` arrays
    instead of one Python round trip per draw per node. An output that does not depend on the
    values (a zero mean) keeps its unbatched shape.
    """
    from pytensor.graph.replace import vectorize_graph

    holders, Xn, outs = _graph_of_values(rvs, build)
    batched = [pt.tensor(dtype=h.dtype, shape=(None, *h.type.shape)) for h in holders]
    try:
        vouts = vectorize_graph(outs, dict(zip(holders, batched, strict=True)))
    except (NotImplementedError, TypeError, ValueError):  # no batched form: draw by draw
        return None
    return pytensor.function([*batched, Xn], vouts, mode=mode, on_unused_input="ignore")


def observed_logp_and_grad(model: pm.Model, mode=EAGER_MODE):
    """Compile ``(values of the free RVs, natural scale...) -> (log p(y | θ), ∂/∂θ...)``: the
    observed variables' log density and the model's potentials as a function of the
    hyperparameters themselves (not of their unconstrained value variables), with its gradient
    on the hyperparameters' own scale (the chain rule through each transform is PyTensor's)."""
    rvs = list(model.free_RVs)
    holders = [rv.type() for rv in rvs]
    subs = {}
    for rv, h in zip(rvs, holders, strict=True):
        transform = model.rvs_to_transforms.get(rv)
        value = model.rvs_to_values[rv]
        subs[value] = h if transform is None else transform.forward(h, *rv.owner.inputs)
    obs = graph_replace(_objective_graph(model, prior=False), subs, strict=False)
    grads = pytensor.grad(obs, holders) if holders else []
    return pytensor.function(holders, [obs, *grads], mode=mode, on_unused_input="ignore")


def raveler(model: pm.Model, names: list[str]):
    """``(x0, unravel)``: the model's initial point of the value variables ``names`` as one
    vector, and the map from such a vector back to the list of per-variable arrays."""
    start = model.initial_point()  # compiles PyMC's initial-point function: once, not per name
    ref = DictToArrayBijection.map({k: start[k] for k in names})

    def unravel(x):
        point = DictToArrayBijection.rmap(RaveledVars(x, ref.point_map_info))
        return [point[k] for k in names]

    return ref.data, unravel


def prior_starts(model: pm.Model, names: list[str], n: int, rng, accept=None) -> list[np.ndarray]:
    """``n`` raveled starting points in the unconstrained space of the value variables ``names``.

    The first is the model's initial point (the priors' support points, or a prior's
    ``initval`` where one is set); the others are draws from the priors, for every free
    hyperparameter, an ``initval`` included (otherwise each restart would start that
    hyperparameter at the same value), kept when ``accept(x)`` is true (default: always).
    """
    x0, _ = raveler(model, names)
    draw = make_initial_point_fn(
        model=model,
        overrides={rv: "prior" for rv in model.free_RVs},  # initvals do not pin the restarts
        jitter_rvs=set(),
        default_strategy="prior",
        return_transformed=True,
    )
    starts, attempts = [x0], 0
    while len(starts) < int(n):
        attempts += 1
        if attempts > 50 * int(n):
            raise RuntimeError(
                "could not draw a starting point with a finite objective from the priors; "
                "check the priors and the data"
            )
        point = draw(int(rng.integers(2**31)))
        x = DictToArrayBijection.map({k: point[k] for k in names}).data
        if accept is None or accept(x):
            starts.append(x)
    return starts


#: A restart counts as converged when the largest gradient component (unconstrained space) is
#: below this. L-BFGS-B's own flag is not used: it also stops on a small relative decrease of the
#: objective, which on badly scaled problems (a well-pinned period) happens far from the optimum,
#: and it reports line-search failures at rounding level, at the optimum, as abnormal.
CONVERGED_GRAD = 1e-3
#: ... or when a Newton step from the end point would gain less than this (in the objective's
#: units, nats), judged with a finite-difference Hessian.
DECREMENT_TOL = 1e-6


def _fd_hessian(neg, x: np.ndarray) -> np.ndarray:
    """Central differences of the gradient, symmetrised."""
    n = x.size
    H = np.empty((n, n))
    for i in range(n):
        h = 1e-5 * max(1.0, abs(x[i]))
        e = np.zeros(n)
        e[i] = h
        H[:, i] = (neg(x + e)[1] - neg(x - e)[1]) / (2.0 * h)
    return 0.5 * (H + H.T)


def newton_decrement(neg, x: np.ndarray, g: np.ndarray, H: np.ndarray | None = None) -> float:
    """:math:`\\tfrac12 g^T H^{-1} g`, the decrease of the objective a Newton step would still
    achieve, with :math:`H` from central differences of the gradient.

    Flat directions (eigenvalues of :math:`H` within finite-difference noise of zero, such as a
    rational-quadratic :math:`\\alpha \\to \\infty`) are left out when the gradient along them
    is below ``CONVERGED_GRAD``; a larger gradient along a flat direction, or clearly negative
    curvature (not a minimum), gives ``inf``. ``H``: the Hessian if already computed
    (:func:`_fd_hessian`).
    """
    lam, V = np.linalg.eigh(_fd_hessian(neg, x) if H is None else H)
    gv = V.T @ g
    if not (np.all(np.isfinite(lam)) and np.all(np.isfinite(gv))):
        return float("inf")
    tau = 1e-9 * float(np.max(np.abs(lam), initial=0.0)) + 1e-3  # finite-difference noise
    stiff, flat = lam > tau, np.abs(lam) <= tau
    if np.any(lam < -tau) or np.any(np.abs(gv[flat]) >= CONVERGED_GRAD):
        return float("inf")
    return float(0.5 * np.sum(gv[stiff] ** 2 / lam[stiff]))


#: Rounds of probing and resuming L-BFGS-B at an end point that the gradient and the Newton
#: decrement cannot certify (see :func:`multistart`). An objective with rounding noise needs
#: them: the Mauna Loa ML-II fit needed 5 on some CPUs while its rational-quadratic kernel was
#: evaluated in the power form, whose log marginal likelihood jumped by 1e-4 nats between
#: neighbouring points as alpha -> infinity (gradients of 0.13 at the end point, an indefinite
#: finite-difference Hessian); with the log1p form the gradient test certifies it.
POLISH_ROUNDS = 8


def probe_decrease(
    neg, x: np.ndarray, f: float, g: np.ndarray, H: np.ndarray | None = None
) -> tuple[float, np.ndarray]:
    """The largest decrease of the objective found from ``x`` by two backtracking line searches:
    along the Newton direction with the finite-difference Hessian's eigenvalues taken in
    absolute value and floored (a step that stays sensible where the Hessian is flat, indefinite
    or noisy, as it is along a hyperparameter running to infinity), and along the steepest
    descent direction; ``(decrease, point)``.

    It is the measured counterpart of the Newton decrement: an end point from which neither
    direction decreases the objective by :data:`DECREMENT_TOL` counts as converged, and one
    from which they do is a point to resume the optimiser from."""
    with np.errstate(all="ignore"):
        lam, V = np.linalg.eigh(_fd_hessian(neg, x) if H is None else H)
    best, where = 0.0, x
    if not (np.all(np.isfinite(lam)) and np.all(np.isfinite(g))):
        return best, where
    floor = 1e-6 * float(np.max(np.abs(lam), initial=0.0)) + 1e-3
    newton = -V @ ((V.T @ g) / np.maximum(np.abs(lam), floor))
    gnorm = float(np.linalg.norm(g))
    steepest = -g / gnorm * min(1.0, float(np.linalg.norm(newton))) if gnorm > 0 else newton
    for d in (newton, steepest):
        t = 1.0
        for _ in range(40):
            fn = neg(x + t * d)[0]
            if np.isfinite(fn) and fn < f - best:
                best, where = f - fn, x + t * d
                break
            t *= 0.5
    return best, where


def _newton_polish(neg, res, H: np.ndarray | None = None) -> None:
    """One Newton step in the stiff directions of the finite-difference Hessian from a
    converged end point, kept if it shrinks the gradient without making the objective worse
    beyond its rounding noise: it takes the
    hyperparameters that the data pin to the optimum to rounding level, so that two fits that
    reach the same optimum from different starts (or on inputs 1e-15 apart) predict the same
    numbers to many digits, as scikit-learn's do. Flat directions (a hyperparameter running to a
    boundary) are left where L-BFGS-B put them. ``H``: the finite-difference Hessian at
    ``res.x`` if already computed."""
    g = np.asarray(res.jac, float)
    if not np.all(np.isfinite(g)) or float(np.max(np.abs(g), initial=0.0)) < 1e-10:
        return
    with np.errstate(all="ignore"):
        lam, V = np.linalg.eigh(_fd_hessian(neg, res.x) if H is None else H)
    if not np.all(np.isfinite(lam)):
        return
    stiff = lam > 1e-9 * float(np.max(np.abs(lam), initial=0.0)) + 1e-3
    step = -V[:, stiff] @ ((V[:, stiff].T @ g) / lam[stiff])
    f, gn = neg(res.x + step)
    # near the optimum a Newton step changes the objective below its rounding noise: keep the
    # step when the gradient shrinks and the objective is not worse beyond that noise
    noise = 1e-10 * max(1.0, abs(float(res.fun)))
    if (
        np.isfinite(f)
        and f <= float(res.fun) + noise
        and np.linalg.norm(np.asarray(gn, float)) < np.linalg.norm(g)
    ):
        res.x, res.fun, res.jac = res.x + step, f, gn


#: L-BFGS-B stops early once the gradient test (:data:`CONVERGED_GRAD`) holds and each of the
#: last :data:`STALL_ITERATIONS` iterations gained less than this (nats): the objective is then
#: flat to rounding along every direction the optimiser still moves in, such as an irrelevant
#: ARD length-scale running to infinity, whose gradient falls as :math:`\ell^{-2}`.
STALL_GAIN = 1e-9
STALL_ITERATIONS = 3


def _lbfgsb(neg, x0: np.ndarray, options: dict):
    """One L-BFGS-B run that also stops when the gain per iteration has stalled below
    :data:`STALL_GAIN` with the gradient test holding (the ``ftol = 1e-14`` relative-decrease
    test alone lets a flat direction run for hundreds of iterations); the stiff directions are
    then finished by :func:`_newton_polish`."""
    last: dict[str, Any] = {"x": None, "g": None}

    def tracked(x):
        f, g = neg(x)
        last["x"], last["g"] = np.array(x, copy=True), g
        return f, g

    history: list[float] = []

    def callback(intermediate_result):
        history.append(float(intermediate_result.fun))
        if len(history) <= STALL_ITERATIONS or last["x"] is None:
            return
        if not np.array_equal(last["x"], intermediate_result.x):
            return  # the gradient at this iterate is not at hand
        gains = -np.diff(history[-STALL_ITERATIONS - 1 :])
        if np.all(gains < STALL_GAIN) and np.max(np.abs(last["g"])) < CONVERGED_GRAD:
            raise StopIteration

    return sopt.minimize(
        tracked, x0, jac=True, method="L-BFGS-B", options=options, callback=callback
    )


def multistart(neg, starts, *, maxiter: int, gtol: float):
    """L-BFGS-B from each start on ``neg(x) -> (f, grad)``; ``(result, start)`` pairs, best first.

    The relative-decrease test of L-BFGS-B is tightened to ``ftol = 1e-14`` so that the gradient
    test (``gtol``) decides; ``result.success`` is set from the final gradient
    (``max |g| < CONVERGED_GRAD``), whatever L-BFGS-B's own stopping message says. An end point
    with a larger gradient still counts as converged when its Newton decrement is below
    ``DECREMENT_TOL``: no step can improve the objective by more than that.

    Where neither certifies the end point (the finite-difference Hessian is indefinite or noisy,
    as along a hyperparameter that runs to infinity, such as a rational-quadratic
    :math:`\\alpha`: the decrement is infinite), :func:`probe_decrease` measures what a step
    can still gain: less than ``DECREMENT_TOL`` is converged; more, and L-BFGS-B resumes from
    the better point with a fresh memory (at most :data:`POLISH_ROUNDS` times). So the verdict
    does not depend on where a line search happened to stall.
    """

    def gmax_of(res):
        g = np.asarray(res.jac, float) if res.get("jac") is not None else np.array([np.inf])
        return float(np.max(np.abs(g), initial=0.0))

    results = []
    options = {"maxiter": maxiter, "gtol": gtol, "ftol": 1e-14}
    for x0 in starts:
        res = _lbfgsb(neg, x0, options)
        nit, how, dec = int(res.nit), "", 0.0
        for _ in range(POLISH_ROUNDS + 1):
            H = None  # the finite-difference Hessian at this res.x, once computed
            gmax = gmax_of(res)
            if not np.isfinite(res.fun) or gmax < CONVERGED_GRAD:
                res.success = bool(np.isfinite(res.fun))
                break
            # a stiff direction (a well-pinned period) can keep a gradient above the threshold
            # at an end point that no step can improve: judge it by the Newton decrement
            g = np.asarray(res.jac, float)
            H = _fd_hessian(neg, res.x)
            dec = newton_decrement(neg, res.x, g, H)
            if dec < DECREMENT_TOL:
                res.success, how = True, f"Newton decrement {dec:.2g}"
                break
            gain, better = probe_decrease(neg, res.x, float(res.fun), g, H)
            if gain < DECREMENT_TOL:
                # measured: certify only where the quadratic model is unusable (indefinite or
                # noisy Hessian); a finite decrement that no step realises stays unconverged
                res.success = not np.isfinite(dec)
                how = f"no step gains more than {gain:.2g}"
                break
            res = _lbfgsb(neg, better, options)
            nit += int(res.nit)
        else:
            res.success = False
        if res.success and np.isfinite(res.fun):
            _newton_polish(neg, res, H)
        res.nit = nit
        if not res.success:
            res.message = f"{res.message} (max |gradient| = {gmax:.3g}, Newton decrement {dec:.3g})"
        elif how:
            res.message = f"{res.message} ({how} at max |gradient| {gmax:.2g})"
        results.append((res, x0))
    results.sort(key=lambda r: r[0].fun)
    return results


class ConvergenceWarning(RuntimeWarning):
    """The best restart of a type-II fit ended without a certified optimum."""


def warn_unconverged(best, what: str, stacklevel: int = 3) -> None:
    """Warn (:class:`ConvergenceWarning`) when the best :func:`multistart` result is not
    converged: the fit's ``converged`` flag says so too, and the message gives the end point's
    state and what to do."""
    if best.success:
        return
    warnings.warn(
        f"{what}: the best of the restarts did not converge ({best.message}); the reported "
        "optimum may not be the maximum. Use more restarts (n_restarts=), a larger maxiter=, "
        "priors that keep the hyperparameters in a sensible range (prior=True), or NUTS",
        ConvergenceWarning,
        stacklevel=stacklevel,
    )


#: How far (on the hyperparameter's unconstrained scale: a factor e^3 = 20 for a positive
#: parameter) :func:`runaway` moves a hyperparameter beyond the optimiser's end point.
RUNAWAY_STEP = 3.0
#: ... and by less than this (nats) the objective must fall there for the end point to count as
#: an interior optimum along that parameter. A curvature this weak (2e-7 per unit squared) is
#: no optimum anyone can report: the objective is flat to the tolerance over a factor 20.
RUNAWAY_TOL = 1e-6


def runaway(neg, x: np.ndarray, labels: list[str], values_of) -> tuple[str, ...]:
    """The hyperparameters that run away from the end point ``x`` of a minimisation of
    ``neg(x) -> (f, grad)`` (unconstrained space): those along which the objective does not get
    worse, by more than :data:`RUNAWAY_TOL`, :data:`RUNAWAY_STEP` further in one direction.

    A gradient test cannot see them: on a saturating objective (the EP or Laplace evidence of
    separable classes as the latent amplitude grows, a noise sd collapsing onto zero, an ARD
    length-scale of an input without effect growing without bound) the gradient on the
    unconstrained scale tends to zero while the optimum recedes to the boundary.

    ``labels[i]`` names coordinate ``i``; ``values_of(x)`` gives the constrained values (one
    float per coordinate) to tell the direction (``0``, ``inf`` or ``-inf``). Returns
    ``("eta -> inf", ...)`` where only one direction is flat, ``"eta flat at 6.75e+11"`` where
    both are (a plateau, typically at a huge or tiny value, where which way the objective still
    rises is rounding), empty for an interior optimum.
    """
    f0 = neg(x)[0]
    if not np.isfinite(f0):
        return ()
    here = values_of(x)
    out = []
    for i, label in enumerate(labels):
        flat = []
        for sign in (1.0, -1.0):
            probe = np.array(x, dtype=float, copy=True)
            probe[i] += sign * RUNAWAY_STEP
            f = neg(probe)[0]
            if np.isfinite(f) and f <= f0 + RUNAWAY_TOL:
                there = values_of(probe)[i]
                if there > here[i]:
                    direction = "inf"
                else:
                    direction = "0" if here[i] > 0 and there >= 0 else "-inf"
                flat.append((f, direction))
        if len(flat) == 1:
            out.append(f"{label} -> {flat[0][1]}")
        elif flat:  # a plateau: which way it still rises is rounding, so give the value
            out.append(f"{label} flat at {here[i]:.3g}")
    return tuple(out)


def warn_runaway(best, what: str, stacklevel: int = 3) -> None:
    """Warn (:class:`ConvergenceWarning`) that the best run's end point is not an optimum: the
    hyperparameters ``best.runaway`` ran away (:func:`runaway`)."""
    names = ", ".join(best.runaway)
    ard = any(r.split()[0].split("[")[0].endswith("ls") and r.endswith("inf") for r in best.runaway)
    hint = (
        " (a length-scale growing without bound: that input has no detectable effect, which is "
        "what ARD's type-II fit does with an irrelevant input)"
        if ard
        else ""
    )
    warnings.warn(
        f"{what}: {names}: the objective does not fall when the hyperparameter moves a factor "
        f"{np.exp(RUNAWAY_STEP):.0f} further that way, so it has no finite optimum there{hint}, "
        "and the fit is reported as not converged (converged=False; its predictions use the end "
        "point). Give the hyperparameter a prior that keeps it finite (prior=True, or "
        "priors={...}), fix it (priors={name: value}), or use NUTS, whose posterior averages "
        "over the flat direction",
        ConvergenceWarning,
        stacklevel=stacklevel,
    )


def warn_degenerate(names: Sequence[str], what: str, stacklevel: int = 3) -> None:
    """Warn (:class:`ConvergenceWarning`) that the best run of the type-II fit ``what`` ended
    on a degenerate value of the hyperparameters ``names``
    (:func:`bayes_gp.inference.degenerate.degenerate`): what it means and what to do."""
    warnings.warn(
        f"{what}: {', '.join(names)}: a degenerate optimum (bayes_gp.inference.degenerate). A "
        "scale at zero removes its term from the model (no noise, no GP, no group spread: the "
        "predictions carry no uncertainty from it), and a length-scale below the inputs' spacing "
        "makes the GP white noise that interpolates the data; under priors whose density is "
        "largest at zero (half-normal scales) that is where MAP's mode lies. The fit is reported "
        "as not converged (converged=False). Sample the posterior by NUTS, which averages over "
        "the scale instead of taking its mode; or give a prior that avoids the boundary "
        "(priors={'eta': pm.LogNormal.dist(...)} or a gamma for a scale, an inverse-gamma or "
        "gamma for a length-scale); or fix the parameter (priors={name: value})",
        ConvergenceWarning,
        stacklevel=stacklevel,
    )


def restarts_table(results, to_params) -> list[Restart]:
    """:class:`Restart` records of :func:`multistart` results."""
    return [
        Restart(
            start=to_params(x0),
            params=to_params(r.x),
            objective=-float(r.fun),
            converged=bool(r.success),
            n_iter=int(r.nit),
            message=str(r.message),
            runaway=tuple(getattr(r, "runaway", ())),
            degenerate=tuple(getattr(r, "degenerate", ())),
        )
        for r, x0 in results
    ]


def _coordinates(model: pm.Model, names: list[str], unravel, constrained):
    """Labels of the raveled coordinates of the value variables ``names`` (the random
    variable's name, with an index for a vector: ``ls[1]``) and a function from a raveled point
    to the constrained value of each coordinate."""
    point = unravel(raveler(model, names)[0])
    labels = []
    for rv, value in zip(model.free_RVs, point, strict=True):
        size = int(np.size(value))
        labels += [rv.name] if np.ndim(value) == 0 else [f"{rv.name}[{j}]" for j in range(size)]

    def values_of(x):
        return np.concatenate([np.ravel(np.asarray(v, float)) for v in constrained(*unravel(x))])

    return labels, values_of


def _degenerate_end(res, labels, values_of, reference, spacing) -> tuple[str, ...]:
    """:func:`~bayes_gp.inference.degenerate.degenerate` at the end point of one
    :func:`multistart` result; a degenerate result is marked not converged (``res`` updated)."""
    if not np.isfinite(res.fun):
        return ()
    found = degenerate(labels, values_of(res.x), reference, spacing)
    if found:
        res.success = False
        res.message = f"{res.message}; degenerate: {', '.join(found)}"
    return found


def _objective_graph(model: pm.Model, prior: bool) -> pt.TensorVariable:
    """The log posterior (``prior=True``) or the log likelihood: the observed variables' log
    density plus the model's potentials (where an approximate evidence such as the Laplace
    :math:`\\log q(y \\mid \\theta)` of :class:`~bayes_gp.LatentGP` enters)."""
    if prior:
        return model.logp(jacobian=False)
    return model.logp(vars=[*model.observed_RVs, *model.potentials], jacobian=False)


def optimize(
    model: pm.Model,
    *,
    n_restarts: int = 5,
    prior: bool = True,
    random_seed: int | None = None,
    maxiter: int = 1000,
    mode=EAGER_MODE,
    spacing: Mapping[str, Any] | None = None,
) -> MapFit:
    """Maximise the log marginal likelihood or the log posterior of ``model`` with restarts.

    An ML-II fit (``prior=False``) whose end point is not an interior optimum because a
    hyperparameter ran away (:func:`runaway`) is not converged: its restarts record the names
    (``Restart.runaway``, ``fit.runaway``) and a :class:`ConvergenceWarning` says what to do.
    So is a MAP or ML-II fit whose end point is degenerate (a scale at zero, a length-scale
    below the inputs' spacing: :func:`bayes_gp.inference.degenerate.degenerate`;
    ``Restart.degenerate``, ``fit.degenerate``).

    Parameters
    ----------
    model : pm.Model
    n_restarts : int
        Number of optimisation runs: the first from the priors' support points, the others from
        independent draws from the priors.
    prior : bool
        Include the priors (MAP) or not (ML-II).
    random_seed : int, optional
    maxiter : int
        L-BFGS-B iterations per run.
    mode : PyTensor mode
        Compilation mode of the objective and gradient. The default (Python linker, NumPy and
        LAPACK kernels) compiles in well under a second; ``"NUMBA"`` compiles for tens of
        seconds and runs small problems faster. Unused where the C code of
        :mod:`bayes_gp.inference.native_gp` covers the model (an exact GP of catalogue kernels:
        :func:`~bayes_gp.inference.native_gp.objective`), which computes the objective and
        its gradient with nothing compiled.
    spacing : mapping, optional
        Hyperparameter name -> the smallest spacing between distinct values of the input
        column(s) its length-scale acts on (a number, or one per entry of an ARD vector;
        :func:`bayes_gp.inference.degenerate.kernel_spacing` computes it from a model's kernel):
        the length-scales judged by the spacing rule. Scales are judged whatever it holds.

    Returns
    -------
    MapFit
    """
    if int(n_restarts) < 1:
        raise ValueError(f"`n_restarts` must be at least 1, got {n_restarts}")
    t0 = time.perf_counter()
    value_vars = model.value_vars
    obj = _objective_graph(model, prior)
    if not value_vars:  # every hyperparameter fixed: nothing to optimise (sklearn's optimizer=None)
        value = float(pytensor.function([], obj, mode=EAGER_MODE)())
        if not np.isfinite(value):
            raise ValueError(
                "the model has no free hyperparameter and its log density at the given values is "
                f"{value}: check the fixed values"
            )
        at = Restart(
            {}, {}, value, True, 0, "no free hyperparameter: evaluated at the given values"
        )
        return MapFit(params={}, objective=value, prior=bool(prior), restarts=[at], grad_norm=0.0,
                      seconds=time.perf_counter() - t0)  # fmt: skip
    # the C objective where bayes_gp.inference.native_gp covers the model (nothing compiled),
    # else PyTensor's graph in `mode`
    native = native_gp.objective(model, prior)
    if native is None:
        grads = pytensor.grad(obj, value_vars)
        fn = pytensor.function(value_vars, [obj, *grads], mode=mode)
    constrained = pytensor.function(
        value_vars, model.replace_rvs_by_values(model.free_RVs), mode=EAGER_MODE
    )
    names = [v.name for v in value_vars]
    rv_names = [rv.name for rv in model.free_RVs]

    _, unravel = raveler(model, names)

    def neg(x):
        with np.errstate(all="ignore"):
            try:
                if native is not None:
                    f, g = native(x)
                else:
                    out = fn(*unravel(x))
                    f, g = float(out[0]), np.concatenate([np.ravel(gi) for gi in out[1:]])
            except (np.linalg.LinAlgError, ValueError):
                return np.inf, np.zeros_like(x)
        if not np.isfinite(f) or not np.all(np.isfinite(g)):
            return np.inf, np.zeros_like(x)
        return -f, -g

    def to_params(x):
        return {
            n: np.asarray(v).copy() for n, v in zip(rv_names, constrained(*unravel(x)), strict=True)
        }

    rng = np.random.default_rng(random_seed)
    starts = prior_starts(model, names, n_restarts, rng, accept=lambda x: np.isfinite(neg(x)[0]))
    results = multistart(neg, starts, maxiter=maxiter, gtol=1e-8)
    labels, values_of = _coordinates(model, names, unravel, constrained)
    reference = values_of(starts[0])  # the priors' support points: each prior's scale
    for res, _ in results:
        # runaway: ML-II only; under priors a scale's mode on its boundary (a half-normal's
        # density is largest at zero) is MAP's, and is what `degenerate` judges, in both
        checked = not prior and np.isfinite(res.fun)
        res.runaway = runaway(neg, res.x, labels, values_of) if checked else ()
        if res.runaway:
            res.success = False
            res.message = f"{res.message}; ran away: {', '.join(res.runaway)}"
        res.degenerate = _degenerate_end(res, labels, values_of, reference, spacing)
    best = results[0][0]
    what = "type-II " + ("MAP" if prior else "ML-II") + " fit"
    if best.runaway:
        warn_runaway(best, what, stacklevel=3)
    elif not best.degenerate:
        warn_unconverged(best, what, stacklevel=3)
    if best.degenerate:
        warn_degenerate(best.degenerate, what, stacklevel=3)
    restarts = restarts_table(results, to_params)
    grad_norm = float(np.linalg.norm(neg(best.x)[1]))
    return MapFit(
        params=to_params(best.x),
        objective=-float(best.fun),
        prior=bool(prior),
        restarts=restarts,
        grad_norm=grad_norm,
        seconds=time.perf_counter() - t0,
    )
