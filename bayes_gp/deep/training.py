r"""The type-II fit of a deep kernel: its loss and the optimiser loop over restarts.

The loss is the exact negative log marginal likelihood of the GP on the learned features (R&W
§5.4.1, eq. 5.8; R&W Alg. 2.1 for :math:`\tfrac12\log|C| = \sum_i \log L_{ii}`),

.. math:: \tfrac12\lVert L^{-1}r\rVert^2 + \sum_i \log L_{ii} + \tfrac n2\log 2\pi,
   \qquad C = LL^\top,

plus the Gaussian prior of the penalised network blocks (:func:`penalised_blocks`). Each restart
runs :func:`bayes_gp.inference.descent.lbfgs` or :func:`~bayes_gp.inference.descent.adam` on
it; the lowest loss wins.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pytensor.tensor as pt

from bayes_gp.deep.network import FeatureExtractor, Param
from bayes_gp.inference import descent
from bayes_gp.inference.typeii import Restart
from bayes_gp.predictive import LOG_2PI

__all__ = [
    "check_fit_options",
    "guarded_loss_and_grad",
    "minimise_restarts",
    "negative_log_marginal_likelihood",
    "penalised_blocks",
    "restart_records",
    "weight_penalty",
]

#: A loss and its gradient at a flat parameter vector.
LossAndGrad = Callable[[np.ndarray], tuple[float, np.ndarray]]


def negative_log_marginal_likelihood(C, r: np.ndarray):
    """The symbolic :math:`-\\log N(r \\mid 0, C)` through the Cholesky factor of ``C`` (NaN
    where ``C`` does not factorise), for the residuals ``r`` of the data from the mean."""
    L = pt.linalg.cholesky(C, lower=True, on_error="nan")
    v = pt.linalg.solve_triangular(L, pt.as_tensor_variable(r), lower=True)
    n = r.shape[0]
    return 0.5 * pt.sum(pt.square(v)) + pt.sum(pt.log(pt.diagonal(L))) + 0.5 * n * LOG_2PI


def penalised_blocks(net: FeatureExtractor, weight_sd: float | None) -> list[Param]:
    """The parameter blocks with a Gaussian prior in the fit: the hidden layers' weights and
    biases (when ``weight_sd`` is given) and the mixture coefficients. The output layer is
    not penalised: scaling ``W_out`` by c and the length-scales by c leaves the kernel
    unchanged, so a prior on ``W_out`` would only drive both towards zero."""
    return [
        prm for prm in net.params
        if prm.kind == "mixture" or (prm.layer >= 0 and weight_sd is not None)
    ]  # fmt: skip


def weight_penalty(
    params: Mapping, blocks: list[Param], weight_sd: float | None, mixture_sd: float
):
    """The symbolic negative log density (up to a constant) of the Gaussian prior of
    ``blocks``: standard deviation ``mixture_sd`` for mixture coefficients, ``weight_sd`` for
    weights and biases."""
    penalty = pt.zeros(())
    for prm in blocks:
        sd = mixture_sd if prm.kind == "mixture" else weight_sd
        penalty = penalty + 0.5 * pt.sum(pt.square(params[prm.name])) / sd**2
    return penalty


def guarded_loss_and_grad(fn: Callable, theta: np.ndarray) -> tuple[float, np.ndarray]:
    """``(loss, gradient)`` from the compiled ``fn(theta) -> [loss, nlml, grad]``, or
    ``(inf, 0)`` where the covariance does not factorise or anything is not finite (the
    optimisers then step back)."""
    with np.errstate(all="ignore"):
        try:
            loss, _, grad = fn(theta)
        except (np.linalg.LinAlgError, ValueError):
            return np.inf, np.zeros_like(theta)
    loss = float(loss)
    if not np.isfinite(loss) or not np.all(np.isfinite(grad)):
        return np.inf, np.zeros_like(theta)
    return loss, np.asarray(grad, dtype=float)


def check_fit_options(optimizer: str, n_restarts: int, maxiter: int, learning_rate: float) -> None:
    """Refuse an unknown optimiser, a non-positive number of restarts or iterations, or a
    learning rate that is not a positive number."""
    if optimizer not in ("lbfgs", "adam"):
        raise ValueError(f"`optimizer` must be 'lbfgs' or 'adam', got {optimizer!r}")
    if isinstance(n_restarts, bool) or not isinstance(n_restarts, int) or n_restarts < 1:
        raise ValueError(f"`n_restarts` must be a positive integer, got {n_restarts!r}")
    if isinstance(maxiter, bool) or not isinstance(maxiter, int) or maxiter < 1:
        raise ValueError(f"`maxiter` must be a positive integer, got {maxiter!r}")
    if not (np.isfinite(learning_rate) and learning_rate > 0):
        raise ValueError(f"`learning_rate` must be positive, got {learning_rate!r}")


def minimise_restarts(
    loss_and_grad: LossAndGrad,
    start: Callable[[int], np.ndarray],
    n_restarts: int,
    optimizer: str,
    maxiter: int,
    learning_rate: float,
) -> list[tuple[descent.DescentResult, np.ndarray]]:
    """Minimise ``loss_and_grad`` from ``start(r)`` for each restart ``r``.

    Returns
    -------
    list of (DescentResult, ndarray)
        Every run and its starting vector, lowest loss first.

    Raises
    ------
    ValueError
        If the loss is not finite at a starting point.
    """
    runs = []
    for r in range(n_restarts):
        x0 = start(r)
        if not np.isfinite(loss_and_grad(x0)[0]):
            raise ValueError(
                "the loss is not finite at the starting point: the covariance matrix could "
                "not be factorised (check the data for duplicates, or raise `jitter`)"
            )
        run = (
            descent.lbfgs(loss_and_grad, x0, maxiter) if optimizer == "lbfgs" else
            descent.adam(loss_and_grad, x0, maxiter, learning_rate)
        )  # fmt: skip
        runs.append((run, x0))
    runs.sort(key=lambda pair: pair[0].fun)
    return runs


def restart_records(
    runs: list[tuple[descent.DescentResult, np.ndarray]],
    kernel_of: Callable[[np.ndarray], dict],
) -> list[Restart]:
    """The runs as :class:`~bayes_gp.inference.typeii.Restart` records: the kernel
    hyperparameters (``kernel_of`` a flat vector) at the start and at the end, the objective
    (the negative loss), convergence, iterations and the optimiser's message."""
    return [
        Restart(kernel_of(x0), kernel_of(run.x), -run.fun, run.converged, run.n_iter, run.message)
        for run, x0 in runs
    ]
