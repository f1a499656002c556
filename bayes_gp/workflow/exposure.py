r"""The formula model of a CSV file's counts with an exposure column, predicting as
:class:`~bayes_gp.LatentGP` with ``exposure=`` does.

``bayes-gp fit --likelihood poisson --exposure pop`` is the formula
``count ~ gp(x, ...) + offset(log(pop))``: the rate per unit exposure :math:`\lambda(x) =
\exp f(x)` and the count's mean :math:`e\,\lambda(x)` at exposure :math:`e`,

.. math::
   y_i \sim \mathrm{Poisson}\bigl(\exp(f(x_i) + \log e_i)\bigr) = \mathrm{Poisson}\bigl(e_i
   \exp f(x_i)\bigr),

the offset :math:`\log e_i` entering the latent function with coefficient one (Gelman & Hill
2007, §6.2; R&W eq. 2.39 for a known mean), so the log density is LatentGP's with
``exposure=e`` (the negative binomial and zero-inflated families alike).
:class:`ExposureFormulaGP` is that formula model with LatentGP's prediction interface: new
inputs are the input columns alone, the latent function :math:`f_*` is the log rate per unit
exposure (the offset at 0, exposure 1), and the exposure of a prediction is ``size=`` or the
exposure column of a data frame, so that ``latent_mean`` is on the scale LatentGP gives it and
the count at the row's exposure is ``predict(X, fit, size=e)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import pandas as pd

from bayes_gp._validation import new_inputs
from bayes_gp.formula.design import as_frame
from bayes_gp.formula.engines import FormulaLatentGP

__all__ = ["ExposureFormulaGP"]

#: LatentGP's band label for several inputs, which a single input and the offset column are not.
_HELD = " (other inputs at their medians)"


class ExposureFormulaGP(FormulaLatentGP):
    r"""A count formula ``y ~ gp(...) + offset(log(exposure))`` whose new inputs and
    predictions are :class:`~bayes_gp.LatentGP`'s with ``exposure=``.

    Parameters
    ----------
    parsed, design, y, family, **options
        As :class:`~bayes_gp.formula.engines.FormulaLatentGP` (:func:`bayes_gp.formula.model.
        engine_arguments`), the formula's offset ``log(exposure)``.
    exposure : str
        The exposure column: :math:`e` in the offset :math:`\log e`, read from a data frame of
        new rows (as LatentGP's ``exposure=`` column name).

    Notes
    -----
    Predictions take the input columns (an array ``(m, D)`` or a frame) and the exposure
    ``size`` (default: the frame's exposure column, else 1): the latent :math:`f_*` is
    predicted at offset 0 and the exposure scales the response, :math:`E[y_* \mid f_*] =
    e_*\,\exp f_*` (:meth:`~bayes_gp.LatentGP.predict`), which equals the prediction at offset
    :math:`\log e_*`: the same likelihood of the same :math:`e_* \exp f_*`.
    """

    def __init__(self, parsed, design, y, family, *, exposure: str, **options):
        if design.offset_column is None or exposure not in parsed.variables:
            raise ValueError(
                f"the formula {parsed.formula!r} has no offset(log({exposure})): an exposure "
                "model needs it"
            )
        super().__init__(parsed, design, y, family, **options)
        #: the exposure column (LatentGP's ``size_column``: read from a frame of new rows)
        self.size_column = exposure
        #: the training rows' exposure :math:`e_i = \exp(\text{offset}_i)`
        self.exposure = np.exp(design.X[:, design.offset_column])

    @property
    def n_inputs(self) -> int:
        """The input columns of a prediction: the design's columns but the offset (the report
        reads it for the bands' caption)."""
        return self.X.shape[1] - 1

    # ------------------------------------------------------------ new inputs
    def _design_of(self, new_data) -> np.ndarray:
        """The design matrix of new rows at exposure 1 (offset 0): a frame with the input
        columns (its exposure column, if any, is the prediction's ``size``), an ``(m, D)``
        array of the inputs, or the full design (its offset column is not read)."""
        if isinstance(new_data, pd.DataFrame | Mapping):
            frame = as_frame(new_data).assign(**{self.size_column: 1.0})
            return super()._design_of(frame)
        Xn = np.asarray(new_data, float)
        if Xn.ndim < 2 or Xn.shape[1] != self.X.shape[1]:
            Xn = new_inputs(Xn, self.n_inputs)
            Xn = np.column_stack([Xn, np.zeros(Xn.shape[0])])
        return self._at_unit_exposure(super()._design_of(Xn))

    def _check_new(self, X_new) -> np.ndarray:
        return self._at_unit_exposure(super()._check_new(X_new))

    def _at_unit_exposure(self, Xn: np.ndarray) -> np.ndarray:
        Xn = np.array(Xn, float)
        Xn[:, self.design.offset_column] = 0.0
        return Xn

    # ------------------------------------------------------------ predictions
    def predict(self, X_new, fit, *, terms=None, size=None, max_draws: int = 200,
                random_seed: int = 0):  # fmt: skip
        """:meth:`LatentGP.predict <bayes_gp.LatentGP.predict>` at the input columns
        ``X_new`` and exposure ``size`` (default: ``X_new``'s exposure column, else 1);
        ``terms=`` as :meth:`~bayes_gp.formula.engines.FormulaLatentGP.predict`."""
        size = self._size_at(X_new, size)
        return super().predict(self._design_of(X_new), fit, terms=terms, size=size,
                               max_draws=max_draws, random_seed=random_seed)  # fmt: skip

    def predict_latent(self, X_new, fit, *, max_draws: int = 200):
        """The log rate per unit exposure :math:`f_*` at the input columns ``X_new``
        (:meth:`LatentGP.predict_latent <bayes_gp.LatentGP.predict_latent>`)."""
        return super().predict_latent(self._design_of(X_new), fit, max_draws=max_draws)

    def held_out_predictive(self, X_new, y, fit, *, size=None):
        """:meth:`LatentGP.held_out_predictive <bayes_gp.LatentGP.held_out_predictive>` of
        the counts ``y`` at the input columns ``X_new`` and exposure ``size`` (default:
        ``X_new``'s exposure column, else 1)."""
        size = self._size_at(X_new, size)
        return super().held_out_predictive(self._design_of(X_new), y, fit, size=size)

    def bands(self, grid, fit, *, along: int | str = 0):
        """:meth:`LatentGP.bands <bayes_gp.LatentGP.bands>`: the response mean per unit
        exposure over the observed counts per unit exposure (the offset is no input)."""
        b = super().bands(grid, fit, along=along)
        if self.n_inputs == 1:
            b = dataclasses.replace(b, band_label=b.band_label.replace(_HELD, ""),
                                    y_band_label=b.y_band_label.replace(_HELD, ""))  # fmt: skip
        return dataclasses.replace(b, y=self.y / self.exposure)

    def describe(self) -> list[tuple[str, object]]:
        """The formula model's rows, the exposure row (LatentGP's: its range and total) of
        the exposure column rather than of the likelihood's (1: the offset carries it)."""
        e, name = self.exposure, self.size_column
        row = ("exposure", f"{name}: {e.min():g} … {e.max():g} (total {e.sum():g}), the offset "
                           f"log({name})")  # fmt: skip
        return [r for r in super().describe() if r[0] != "exposure"] + [row]
