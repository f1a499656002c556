"""Predictions of a fitted model at the data's held-out and new inputs, and held-out scores."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_gp.declared import Dataset

__all__ = [
    "predict", "predict_new", "new_inputs", "check_new_data", "columns_at", "size_column", "calibration_scores",
    "PER_UNIT", "COLUMN_SCALES", "column_scales",
]


#: The column of the predictive mean per unit of a likelihood's size (``size_name``).
PER_UNIT = {"exposure": "mean_per_unit_exposure", "trials": "mean_per_trial"}


def size_column(gp, data: Dataset) -> str | None:
    """The name of the size column of ``data`` (its exposure or trials), ``None`` when the
    training data had none: the data's own name for it, else the likelihood's word."""
    if data.size_train is None:
        return None
    word = getattr(getattr(gp, "likelihood", None), "size_name", "")
    return data.size_name or word or "size"


def columns_at(gp, X: np.ndarray, fit, size=None) -> dict[str, np.ndarray]:
    """The model's :meth:`~bayes_gp.protocol.GPModel.prediction_columns` at ``X``, on the scale
    of the observations: with a ``size`` (a latent GP's exposure or trials per row) ``mean``,
    ``sd``, ``lower_94`` and ``upper_94`` are those of :math:`y_*` at that row's exposure or
    trials (the expected count beside the observed count), and the mean per unit exposure or
    per trial is its own column (:data:`PER_UNIT`); the other columns (``latent_mean``,
    ``latent_sd``, the likelihood's parameters) as the model gives them."""
    cols = gp.prediction_columns(X, fit)
    if size is None:
        return cols
    word = getattr(gp.likelihood, "size_name", "")
    pred = gp.predict(X, fit, size=np.asarray(size, float))
    out = {"mean": pred.mean, "sd": np.sqrt(pred.var), "lower_94": pred.lower,
           "upper_94": pred.upper, PER_UNIT.get(word, "mean_per_unit"): cols["mean"]}  # fmt: skip
    out.update({k: v for k, v in cols.items() if k not in out and k != "mean"})
    return out


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
        A ``split`` column (``"test"``, ``"new"`` or ``"train"``), the inputs, the training
        rows' exposure or trials (named as in the data) where the model has them, the model's
        columns (:func:`columns_at`: on the scale of the target) and, where known, the target:
        one column, or one per output (named by ``data.target_names``) for an ``(n, P)``
        target.
    scores : dict
        The model's :meth:`~bayes_gp.protocol.GPModel.scores` and :func:`calibration_scores` on
        the held-out data (given the held-out target as it is, ``(m,)`` or ``(m, P)``) with
        their number of rows ``n_test``; empty without held-out data.
    """
    frames, scores = [], {}
    parts = [("test", data.X_test, data.y_test, None), ("new", data.X_new, None, None)]
    if data.X_test is None and data.X_new is None:
        parts = [("train", data.X_train, data.y_train, data.size_train)]
    size_name = size_column(gp, data)
    for split, X, y, size in parts:
        if X is None:
            continue
        X2 = np.asarray(X, float).reshape(len(X), -1)
        df = pd.DataFrame(X2, columns=data.feature_names)
        df.insert(0, "split", split)
        if size is not None:
            df[size_name] = np.asarray(size, float)
        for name, column in columns_at(gp, X2, fit, size).items():
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


def new_inputs(
    gp, data: Dataset, frame: pd.DataFrame, where: str = "the new data", size_word: str = ""
):
    """The inputs (and exposure or trials) of new rows ``frame`` for ``gp``, checked.

    Parameters
    ----------
    gp : GPModel
        The fitted model: a formula model whose training data are its design
        (:class:`~bayes_gp.workflow.FormulaCSVModel`) reads its own columns (groups included),
        any other the training data's input columns ``data.feature_names``.
    data : Dataset
        The training data: its input columns and its size column (:func:`size_column`).
    frame : DataFrame
        The new rows, with those columns (others are ignored).
    where : str
        How errors name ``frame`` (the command line: the file).
    size_word : str
        What the size column is (``"exposure"``, ``"trials"``), for the errors; default the
        likelihood's.

    Returns
    -------
    X : ndarray (m, D)
    size : ndarray (m,) or None

    Raises
    ------
    ValueError
        Naming the missing columns, the first non-numeric value (column and row) or the rows
        with missing values; for a frame without rows.
    """
    if len(frame) == 0:
        raise ValueError(f"{where} has no rows")
    size_name = size_column(gp, data)
    design = getattr(gp, "design", None)
    # a formula's own columns where the data are its design (a --formula model); a CSV model's
    # formula reads the input columns and its exposure (trials) column, as its class did
    formula = hasattr(design, "matrix") and list(map(str, data.feature_names)) == list(
        design.names)  # fmt: skip
    needed = [] if formula else [str(c) for c in data.feature_names]
    needed += [size_name] if size_name else []
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        word = size_word or getattr(getattr(gp, "likelihood", None), "size_name", "") or "size"
        used = (f"the model's input column(s) {', '.join(needed[: len(needed) - 1])} and its "
                f"{word} column {size_name}" if size_name and len(needed) > 1
                else f"the model's {word} column {size_name}" if size_name
                else f"the model's input column(s) {', '.join(needed)}")  # fmt: skip
        raise ValueError(
            f"{where} lacks column(s) {', '.join(map(repr, missing))} ({used}; it has "
            f"{', '.join(map(str, frame.columns)) or 'none'})"
        )
    values = {c: _numeric(frame[c], c, where) for c in needed}
    X = design.matrix(frame, where=where) if formula else (
        np.column_stack([values[c] for c in data.feature_names]))  # fmt: skip
    X = np.asarray(X, float).reshape(len(frame), -1)
    size = values[size_name] if size_name else None
    bad = ~np.isfinite(X).all(axis=1)
    if size is not None:
        bad |= ~np.isfinite(size)
    if bad.any():
        rows = [int(i) + 1 for i in np.flatnonzero(bad)[:5]]
        raise ValueError(
            f"{int(bad.sum())} row(s) of {where} have missing values in the columns used (rows "
            f"{', '.join(map(str, rows))}{', ...' if bad.sum() > 5 else ''}); remove or fill "
            "them first"
        )
    return X, size


def check_new_data(decl, data: Dataset, frame: pd.DataFrame, where: str = "the new data"):
    """Check new rows ``frame`` before the model is fitted (``bayes-gp fit --predict``): the
    columns :func:`new_inputs` will read are there (a formula model: its formula's columns,
    the trials of a binomial response; any other model: ``data``'s inputs and size column) and,
    for a model that is not a formula, hold numbers.

    Raises
    ------
    ValueError
        As :func:`new_inputs`.
    """
    from bayes_gp.workflow.spec import FormulaCSVModel

    if not isinstance(decl, FormulaCSVModel):
        word = next((w for w in PER_UNIT if getattr(decl, w, None)), "")
        new_inputs(None, data, frame, where, size_word=word)
        return
    from bayes_gp.formula import parse_formula

    parsed = parse_formula(decl.formula)
    needed = [v for v in parsed.variables if v != parsed.response]
    if len(frame) == 0:
        raise ValueError(f"{where} has no rows")
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise ValueError(
            f"{where} lacks column(s) {', '.join(map(repr, missing))} (the columns of the "
            f"formula {decl.formula!r}; it has {', '.join(map(str, frame.columns)) or 'none'})"
        )


def _numeric(column: pd.Series, name: str, where: str) -> np.ndarray:
    """``column`` as floats; a ``ValueError`` names the first value that is not a number."""
    values = pd.to_numeric(column, errors="coerce")
    bad = values.isna() & column.notna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise ValueError(
            f"column {name!r} of {where} is not numeric: row {row + 1} holds {column.iloc[row]!r}"
        )
    return values.to_numpy(float)


def predict_new(gp, data: Dataset, fit, frame: pd.DataFrame, where: str = "the new data"):
    """Predictions at new rows ``frame`` (:func:`new_inputs`): ``frame`` as given with the
    model's columns (:func:`columns_at`, on the scale of the observations at each row's
    exposure or trials) after its own.

    Raises
    ------
    ValueError
        As :func:`new_inputs`; for a column of ``frame`` named as a prediction column.
    """
    X, size = new_inputs(gp, data, frame, where)
    cols = columns_at(gp, X, fit, size)
    clash = [c for c in cols if c in frame.columns]
    if clash:
        raise ValueError(
            f"{where} has column(s) {', '.join(map(repr, clash))}, the names of prediction "
            "columns; rename them"
        )
    out = frame.reset_index(drop=True).copy()
    for name, column in cols.items():
        out[name] = column
    return out


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


#: What each prediction column holds and on which scale (``fit.json``'s
#: ``prediction_columns``); ``{size}`` is the data's exposure / trials column.
COLUMN_SCALES = {
    "split": "which rows: train (the training data), test (held out, scored) or new",
    "mean": "predictive mean of y* on the target's scale",
    "mean@size": "predictive mean of y* at the row's {size} (the expected count, or "
    "successes), on the target's scale",
    "sd": "predictive sd of y* at the row's {size} (target's scale)",
    "sd_f": "posterior sd of the latent function f* (target's scale, without noise)",
    "sd_y": "predictive sd of y* (target's scale, with noise)",
    "lower_94": "lower end of the central 94% predictive interval of y* (target's scale)",
    "lower_94@size": "lower end of the central 94% predictive interval of y* at the row's "
    "{size} (target's scale)",
    "upper_94": "upper end of the central 94% predictive interval of y* (target's scale)",
    "upper_94@size": "upper end of the central 94% predictive interval of y* at the row's "
    "{size} (target's scale)",
    "mean_per_unit_exposure": "predictive mean of y* per unit exposure, at exposure 1 (the "
    "rate: mean / {size}, but for a hurdle, whose mean is not proportional to the exposure)",
    "mean_per_trial": "predictive mean of y* per trial (the probability: mean / {size})",
    "latent_mean": "posterior mean of the latent function f* (the link scale: log rate, "
    "log-odds, ...)",
    "latent_sd": "posterior sd of the latent function f* (link scale)",
    "p_positive": "probability of the positive class",
    "predicted": "the predicted label",
    "noise_sd": "posterior mean of the noise sd at the input (target's scale)",
}


def column_scales(
    frame: pd.DataFrame, gp, data: Dataset, new: bool = False
) -> dict[str, str | None]:
    """Per column of a predictions table (:func:`predict`, or :func:`predict_new` with
    ``new``): what it holds and on which scale (:data:`COLUMN_SCALES`), ``None`` for a column
    not described there (``new``: the new data's own columns are "as given")."""
    size = size_column(gp, data)
    likelihood = getattr(gp, "likelihood", None)
    params = set(getattr(likelihood, "param_names", ()) or ())
    inputs = {str(c) for c in data.feature_names}
    targets = {str(t) for t in data.target_names}
    out = {}
    for col in map(str, frame.columns):
        key = f"{col}@size" if size and f"{col}@size" in COLUMN_SCALES else col
        if key in COLUMN_SCALES:
            text = COLUMN_SCALES[key].format(size=size)
        elif col == size:
            text = f"the row's {getattr(likelihood, 'size_name', '') or 'size'} (as given)"
        elif col in targets:
            text = "the observed target (as given)"
        elif col in inputs:
            text = "input (as given)"
        elif col in params:
            text = f"the likelihood's {col} at the fit (posterior mean for NUTS)"
        elif col.startswith("p_"):
            text = f"probability of the class {col[2:]}"
        else:
            text = "from the new data (as given)" if new else None
        out[col] = text
    return out
