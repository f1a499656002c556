"""The record of a type-II fit of a deep kernel (:class:`DKLFit`): the kernel hyperparameters
and the network weights at the optimum, the objective there and how the optimiser got there.

:meth:`~bayes_gp.deep.DeepKernelRegression.fit_map` returns one; the workflow saves it through
the model's :meth:`~bayes_gp.deep.DeepKernelRegression.saved_arrays` and rebuilds it with
:meth:`~bayes_gp.deep.DeepKernelRegression.restore_fit` (:mod:`bayes_gp.deep.serialisation`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bayes_gp.protocol import PointFit

__all__ = ["DKLFit"]


@dataclass(frozen=True, eq=False)
class DKLFit(PointFit):
    """A type-II fit of :class:`~bayes_gp.deep.DeepKernelRegression` (its
    :meth:`~bayes_gp.deep.DeepKernelRegression.fit_map`).

    Attributes
    ----------
    params : dict
        The kernel hyperparameters and ``sigma`` on their natural scales (what the report and
        the saved files show).
    network : dict
        The network parameters ``W0``, ``b0``, ..., ``W_out``, ``b_out``, ``lam0``, ...
    log_marginal_likelihood : float
        :math:`\\log p(y \\mid W, \\theta)` at the optimum.
    objective : float
        The maximised objective: the log marginal likelihood plus the log density of the weight
        prior (:attr:`loss` is its negative).
    prior : bool
        Whether the network weights had their Gaussian prior (MAP in the weights); the kernel
        hyperparameters are always ML-II.
    optimizer : str
        ``"lbfgs"`` or ``"adam"`` (:mod:`bayes_gp.inference.descent`).
    n_iter : int
        Iterations of the best restart.
    grad_norm : float
        Norm of the gradient of the loss at the optimum (unconstrained parameters).
    seconds : float
        Wall time, compilation included.
    restarts : list of :class:`~bayes_gp.inference.typeii.Restart`
        Every restart, best first (kernel hyperparameters at its start and end).
    history : ndarray
        The loss after every iteration of the best run.
    jitter : float
        The absolute jitter on the diagonal of :math:`C`.
    """

    params: dict
    network: dict
    log_marginal_likelihood: float
    objective: float
    prior: bool
    optimizer: str = "lbfgs"
    n_iter: int = 0
    grad_norm: float = float("nan")
    seconds: float = float("nan")
    restarts: list = field(default_factory=list)
    history: np.ndarray = field(default_factory=lambda: np.zeros(0))
    jitter: float = float("nan")

    @property
    def loss(self) -> float:
        """The minimised loss: negative log marginal likelihood plus the weight prior."""
        return -float(self.objective)

    @property
    def converged(self) -> bool:
        """The best restart's convergence verdict."""
        return bool(self.restarts and self.restarts[0].converged)

    @property
    def all_params(self) -> dict:
        """Network parameters and kernel hyperparameters together (what
        :meth:`~bayes_gp.deep.DeepKernelRegression.pack` takes)."""
        return {**self.network, **self.params}

    @property
    def method_label(self) -> str:
        return "DKL MAP" if self.prior else "DKL ML-II"

    @property
    def method_description(self) -> str:
        weights = "MAP (Gaussian prior)" if self.prior else "ML-II"
        return (
            f"type-II ({self.optimizer}): network weights {weights}, kernel hyperparameters and "
            "σ ML-II (R&W eq. 5.8 on the learned features)"
        )
