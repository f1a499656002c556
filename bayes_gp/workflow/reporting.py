"""A result's report: the diagnostic report of its fit, with rows stating the data and settings."""

from __future__ import annotations

import numpy as np

from bayes_gp.workflow.fitting import FIT_SETTINGS, FitResult

__all__ = ["make_report", "provenance"]

#: The command-line option of a setting whose option is not ``--<setting>``: the report's
#: "non-default settings" row reads as the options that would repeat the fit.
_OPTIONS = {"n_restarts": "--restarts"}


def make_report(res: FitResult):
    """The diagnostic report of a result (:func:`bayes_gp.report.report`).

    Parameters
    ----------
    res : FitResult

    Returns
    -------
    Report
        Titled ``"<name>: <method>"``, with the rows of :func:`provenance` first and, with
        held-out data, their predictive calibration.
    """
    from bayes_gp.report import report

    data = res.data
    held_out = None if data.X_test is None else (data.X_test, data.y_test)
    return report(
        res.fit,
        model=res.model,
        X_new=data.X_new,
        title=f"{res.name}: {res.method}",
        provenance=provenance(res),
        held_out=held_out,
    )


def provenance(res: FitResult) -> list[tuple[str, object]]:
    """Rows ``(name, value)`` for the report: the data the fit used (source, rows, subset,
    preprocessing, fast mode) and its settings, each non-default one marked with its default.
    Built from what :func:`~bayes_gp.workflow.save` writes, so a reloaded fit gives the same rows.

    Parameters
    ----------
    res : FitResult

    Returns
    -------
    list of (str, object)
        Only the settings of the fit's kind (:data:`~bayes_gp.workflow.fitting.FIT_SETTINGS`)
        and the data-size options are listed.
    """
    data = res.data
    rows: list[tuple[str, object]] = [("data source", data.source)]
    if isinstance(res.spec, dict) and "model" in res.spec:
        rows.insert(0, ("declared model", f"{res.name} (models/{res.name}.py)"))
    rows.append(("training rows", int(np.shape(data.X_train)[0])))
    if data.y_test is not None:
        rows.append(("held-out rows (scored)", int(np.shape(data.y_test)[0])))
    if data.X_new is not None:
        rows.append(("new inputs (predicted)", int(np.shape(data.X_new)[0])))
    rows.append(("inputs", ", ".join(map(str, data.feature_names))))
    rows.append(("target", ", ".join(map(str, data.target_names))))
    for key, value in data.notes.items():
        rows.append((f"data: {str(key).replace('_', ' ')}", value))
    fast = bool(res.settings.get("fast", False))
    rows.append(
        ("fast mode", "yes (--fast: the model's smaller data and fewer draws)" if fast else "no")
    )
    rows.append(("method", res.method))
    kind = res.kind
    skip = {k for other, keys in FIT_SETTINGS.items() if other != kind for k in keys} | {"fast"}
    changed = []
    for key, value in res.settings.items():
        if key in skip:
            continue
        default = res.defaults.get(key)
        text = str(value)
        if key in res.defaults and default != value:
            text += f" (default {default})"
            option = _OPTIONS.get(key, f"--{key.replace('_', '-')}")
            changed.append(f"{option} {value}")
        rows.append((f"setting: {key}", text))
    rows.append(("non-default settings", " ".join(changed) if changed else "none"))
    if res.created:
        rows.append(("fitted", res.created))
    if res.seconds:
        rows.append(
            ("wall time (s)", ", ".join(f"{k} {float(v):.1f}" for k, v in res.seconds.items()))
        )
    return rows
