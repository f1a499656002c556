"""Validation of the inference itself: simulation-based calibration (Talts et al. 2018), and
the predictive calibration of a fit on held-out data.

:func:`sbc` draws hyperparameters and data from a model's prior, fits the model to each data set
and tests that the ranks of the true values among the posterior draws are uniform (binned
:math:`\\chi^2` and the simultaneous ECDF band of Säilynoja et al. 2022).

Modules: :mod:`~bayes_gp.validate.calibration` (:func:`sbc` and :class:`SBCResult`),
:mod:`~bayes_gp.validate.runner` (one simulation: prior draw, fit, ranks),
:mod:`~bayes_gp.validate.ranks` (thinning and the rank statistic),
:mod:`~bayes_gp.validate.uniformity` (the tests and the band), :mod:`~bayes_gp.validate.plot`
(the figure), and :mod:`~bayes_gp.validate.predictive` (calibration of a fitted model's
predictive distribution on held-out data: interval coverage, the PIT histogram, the reliability
diagram).
"""

from bayes_gp.validate.calibration import (
    SBCResult,
    Simulation,
    rerun,
    sbc,
    sbc_one,
    simulation_seeds,
)
from bayes_gp.validate.ranks import rank_statistic, thin
from bayes_gp.validate.uniformity import (
    ChiSquareTest,
    EcdfBand,
    EcdfTest,
    chi_square_test,
    ecdf_band,
    ecdf_test,
)

__all__ = [
    "sbc",
    "sbc_one",
    "rerun",
    "SBCResult",
    "Simulation",
    "simulation_seeds",
    "rank_statistic",
    "thin",
    "chi_square_test",
    "ecdf_band",
    "ecdf_test",
    "ChiSquareTest",
    "EcdfBand",
    "EcdfTest",
]
