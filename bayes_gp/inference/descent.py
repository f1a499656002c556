r"""First-order minimisers for objectives with many parameters (a deep kernel's network weights).

:func:`bayes_gp.inference.typeii.multistart` certifies every end point with a finite-difference
Hessian (``2k`` gradient evaluations for ``k`` parameters). That is right for the handful of
kernel hyperparameters of a GP, and unaffordable for the thousands of weights of a neural network.
Here are the two minimisers :class:`~bayes_gp.deep.DeepKernelRegression` uses instead, with one
result type:

* :func:`lbfgs`: SciPy's L-BFGS-B (Byrd, Lu, Nocedal & Zhu 1995) on ``fun(x) -> (f, grad)``;
  converged by its own gradient and relative-decrease tests;
* :func:`adam`: Adam (Kingma & Ba 2015) with the default moments (0.9, 0.999) and bias
  correction, keeping the best iterate; converged when the last 100 steps changed the objective
  by less than :math:`10^{-6}` relative. A step into a non-finite region (a Cholesky failure)
  goes back half-way to the best point and resets the moments.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import optimize as sopt

__all__ = ["DescentResult", "lbfgs", "adam"]

Objective = Callable[[np.ndarray], tuple[float, np.ndarray]]


@dataclass(frozen=True, eq=False)
class DescentResult:
    """Where a minimiser ended: ``x``, the objective ``fun`` there, the convergence verdict, the
    number of iterations, a message and the objective after every iteration."""

    x: np.ndarray
    fun: float
    converged: bool
    n_iter: int
    message: str
    history: np.ndarray


def lbfgs(fun: Objective, x0: np.ndarray, maxiter: int) -> DescentResult:
    """L-BFGS-B from ``x0`` with tight tolerances (``gtol`` 1e-9, ``ftol`` 1e-12)."""
    history: list[float] = []
    res = sopt.minimize(
        fun, np.asarray(x0, float), jac=True, method="L-BFGS-B",
        callback=lambda intermediate_result: history.append(float(intermediate_result.fun)),
        options={"maxiter": maxiter, "gtol": 1e-9, "ftol": 1e-12},
    )  # fmt: skip
    return DescentResult(
        res.x, float(res.fun), bool(res.success), int(res.nit), str(res.message), np.array(history)
    )


def adam(
    fun: Objective,
    x0: np.ndarray,
    maxiter: int,
    learning_rate: float,
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-8,
) -> DescentResult:
    """Adam from ``x0`` for ``maxiter`` steps of size ``learning_rate``; returns the best iterate."""
    x = np.asarray(x0, float).copy()
    m = np.zeros_like(x)
    v = np.zeros_like(x)
    history: list[float] = []
    best_x, best_f = x.copy(), np.inf
    for t in range(1, maxiter + 1):
        f, g = fun(x)
        if not np.isfinite(f):  # step back towards the best point and damp the moments
            x = 0.5 * (x + best_x)
            m *= 0.0
            v *= 0.0
            continue
        if f < best_f:
            best_x, best_f = x.copy(), f
        history.append(f)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        x = x - learning_rate * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
    converged = len(history) > 100 and abs(history[-100] - history[-1]) < 1e-6 * (
        1 + abs(history[-1])
    )
    message = (
        "the last 100 steps changed the objective by < 1e-6 relative"
        if converged
        else f"still decreasing after {maxiter} steps"
    )
    return DescentResult(best_x, float(best_f), converged, len(history), message, np.array(history))
