"""Predictions of a fitted model at the data's held-out and new inputs, and held-out scores."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_gp.declared import Dataset

__all__ = ["predict", "calibration_scores"]


def predict(gp, data: Dataset, fit) -> tuple[pd.DataFrame, dict]:
    """Predictions at the held-out and the new inputs (at the training inputs if there are
    neither), and the held-out scores.

    Parameters
    ----------
    gp : GPModel
        The fitted model (:class:`~bayes_gp.protocol.GPModel`).
    data : Dataset
    fit : DataTree or PointFit
        The fit of ``gp``.

    Returns
    -------
    predictions : DataFrame
        A ``split`` column (``"test"``, ``"new"`` or ``"train"``), the inputs, the model's
        :meth:`~bayes_gp.protocol.GPModel.prediction_columns` and, where known, the target: one
        column, or one per output (named by ``data.target_names``) for an ``(n, P)`` target.
    scores : dict
        The model's :meth:`~bayes_gp.protocol.GPModel.scores` and :func:`calibration_scores` on
        the held-out data (given the held-out target as it is, ``(m,)`` or ``(m, P)``) with
        their number of rows ``n_test``; empty without held-out data.
    """
    frames, scores = [], {}
    parts = [("test", data.X_test, data.y_test), ("new", data.X_new, None)]
    if data.X_test is None and data.X_new is None:
        parts = [("train", data.X_train, data.y_train)]
    for split, X, y in parts:
        if X is None:
            continue
        X2 = np.asarray(X, float).reshape(len(X), -1)
        df = pd.DataFrame(X2, columns=data.feature_names)
        df.insert(0, "split", split)
        for name, column in gp.prediction_columns(X2, fit).items():
            df[name] = column
        if y is not None:
            y = np.asarray(y)
            # one column per target: the target itself, or each of P outputs of an (n, P) y
            for name, column in zip(data.target_names, y.reshape(len(y), -1).T, strict=True):
                df[name] = column
            if split == "test":
                scores.update(gp.scores(y, df))
        frames.append(df)
    if scores:
        scores["n_test"] = len(data.y_test)
        scores.update(calibration_scores(gp, data, fit))
    return pd.concat(frames, ignore_index=True), scores


def calibration_scores(gp, data: Dataset, fit) -> dict[str, float]:
    """The calibration of the held-out predictive distribution
    (:meth:`~bayes_gp.protocol.GPModel.held_out_predictive`,
    :func:`bayes_gp.validate.predictive.predictive_calibration`): ``coverage_50``,
    ``coverage_90`` and ``pit_chi2_p``, or the ``ece`` of a classifier; empty for a model that
    does not offer its predictive distribution."""
    from bayes_gp.validate.predictive import predictive_calibration

    try:
        pred = gp.held_out_predictive(data.X_test, data.y_test, fit)
    except NotImplementedError:
        return {}
    return predictive_calibration(pred).scores()
