"""End-to-end fits: data → model → inference → predictions → saved results and report.

:func:`run` fits a declared model (``models/``, see :mod:`bayes_gp.declared`) or a model on the
user's own CSV file (:class:`CSVModel`) with one of the inference methods, predicts at the held-out
and new inputs and scores the held-out data. :func:`save` writes a result directory atomically
(every file staged in a temporary directory that replaces the target in one rename);
:func:`load` reads it back and rebuilds the model, so a saved fit predicts and reports again.

A result directory holds

``fit.json``
    What was fitted and how: the model (declared name, or the CSV specification), method,
    settings, seed, timings, held-out scores, versions, and the model's post-fit approximation
    checks (``approximation_checks``: name, status, value, threshold, advice, detail; the same
    rows as the report's; :meth:`bayes_gp.protocol.GPModel.approximation_checks`), and the
    report's diagnostic verdicts (``verdicts``: check, status, value, threshold, advice,
    detail; ``null`` when no report was written), for scripts that act on them.
``posterior.nc``
    The posterior (NUTS, an ArviZ DataTree in netCDF) or the point estimate (MAP, Laplace, EP: a
    dataset of the hyperparameters, with the log marginal likelihood in its attributes).
``predictions.csv``
    Predictions at the held-out inputs (with the observed values) and at the new inputs (at
    the training inputs when the data have neither). Every column is on the scale of the
    observations: for counts with an exposure (or successes out of trials) ``mean``, ``sd``,
    ``lower_94`` and ``upper_94`` are those of y at the row's exposure (trials), beside the
    observed count and the exposure column, and ``mean_per_unit_exposure``
    (``mean_per_trial``) is the rate (probability); ``latent_*`` are on the link scale.
    ``fit.json``'s ``prediction_columns`` says what each column holds.
``predictions_new.csv``
    With ``bayes-gp fit --predict FILE`` (:meth:`FitResult.predict`): FILE's rows with the
    same prediction columns.
``report.html``
    The diagnostic report (:func:`bayes_gp.report.report`).

Modules
-------
spec
    What to fit: :class:`CSVModel` (a CSV file with the declared-model interface), the default
    settings, the specification saved in ``fit.json``.
exposure
    The formula model of a CSV file's counts with an exposure column, predicting as LatentGP.
fitting
    :func:`run`, :class:`FitResult`, the settings of each kind of fit, :func:`describe`.
scoring
    Predictions at the held-out and new inputs, and held-out scores.
reporting
    :func:`make_report` and the report's data-and-settings rows (:func:`provenance`).
store
    :func:`save` (atomic) and :func:`load`.

Errors about the arguments (an unsupported ``method``, a ``likelihood`` without its ``trials``
column, …) are :class:`~bayes_gp._arguments.ArgumentError`: a ``ValueError`` that names the
parameter, which the command line words as its option.
"""

# describe, parse_columns and REPORT are public beside __all__, as before the split (the command
# line uses them).
from bayes_gp.workflow.fitting import FitResult, default_settings, run
from bayes_gp.workflow.fitting import describe as describe
from bayes_gp.workflow.reporting import make_report, provenance
from bayes_gp.workflow.spec import CSVModel, FormulaCSVModel
from bayes_gp.workflow.spec import parse_columns as parse_columns
from bayes_gp.workflow.store import FIT_JSON, POSTERIOR, PREDICTIONS, PREDICTIONS_NEW, load, save
from bayes_gp.workflow.store import REPORT as REPORT

#: :func:`~bayes_gp.workflow.fitting.default_settings` under its name before the split.
_default_settings = default_settings

__all__ = [
    "CSVModel",
    "FormulaCSVModel",
    "FitResult",
    "run",
    "save",
    "load",
    "make_report",
    "provenance",
    "FIT_JSON",
    "POSTERIOR",
    "PREDICTIONS",
    "PREDICTIONS_NEW",
]
