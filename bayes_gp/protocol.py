r"""The model protocol: what every bayes_gp model family offers the code that consumes it.

The report (:mod:`bayes_gp.report`), the workflow and the ``bayes-gp`` command
(:mod:`bayes_gp.workflow`, :mod:`bayes_gp.cli`) and :func:`bayes_gp.fit_many` know models only
through this protocol: a model family is one class that implements it, and the consumers never
test which class a model is. The model is the one place that knows its own mathematics (its
likelihood, its predictive distribution, how to replicate data); the consumers turn what it
returns into tables, figures and files.

A model implementing :class:`GPModel` has

* data and structure: ``X`` (n, D), ``feature_names``, ``model`` (the PyMC model, which the user
  may extend), ``hyperparameters`` (the free random variables' names), ``fit_methods`` (what
  :meth:`GPModel.fit` accepts: ``"nuts"`` and type-II methods such as ``"map"`` or
  ``"laplace"``), ``sampling_methods`` (those of them that run NUTS);
* a description: :meth:`GPModel.describe` (rows for the report: kernel and its formula, the
  equation it comes from, likelihood, mean, noise) and :attr:`GPModel.label`;
* fits: :meth:`GPModel.fit` (one entry point for every method), :meth:`GPModel.check_fit` (is this
  one of my fits?) and :meth:`GPModel.fit_label`. A NUTS fit is the ArviZ ``DataTree`` of
  ``pm.sample``; a type-II fit is an object with the :class:`PointFit` attributes;
* predictions for any of its fits: :meth:`GPModel.bands` (1-D predictive bands as a
  :class:`Bands`), :meth:`GPModel.prediction_columns` (a table at new inputs);
* checks: :meth:`GPModel.replicate` (replicated data at the training inputs for the posterior
  predictive check, compared with :attr:`GPModel.observed`; :attr:`GPModel.outcome` says whether
  they are continuous or binary) and :meth:`GPModel.point_loo` (leave-one-out log predictive
  densities of a type-II fit; NUTS fits carry a pointwise ``log_likelihood`` group instead);
* post-fit checks of the model's approximations: :meth:`GPModel.approximation_checks` (a list of
  :class:`ApproximationCheck`, empty for an exact model), each a verdict row of the report and an
  entry of the workflow's ``fit.json``.

Adding a model family (see the README's "Adding a model family"): subclass :class:`GPModel`,
implement the abstract methods, and the report, the workflow and ``fit_many`` work unchanged;
``tests/test_protocol.py`` does exactly that with a GP of fixed kernel defined in the test suite.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

__all__ = ["GPModel", "PointFit", "Bands", "ApproximationCheck", "is_nuts", "CHECK_STATUSES"]


def is_nuts(fit: Any) -> bool:
    """Whether ``fit`` is the ArviZ data of a NUTS run (a ``DataTree`` with a ``posterior``)."""
    children = getattr(fit, "children", None)
    return children is not None and "posterior" in children


class PointFit:
    """What consumers read of a type-II fit (a point estimate of the hyperparameters).

    Attributes (set by each fit class)
    ----------------------------------
    params : dict
        Hyperparameter name → value.
    log_marginal_likelihood : float
        :math:`\\log p(y \\mid \\hat\\theta)`, or the approximation's evidence.
    objective : float
        The maximised objective.
    prior : bool
        Priors included (MAP) or not (ML-II).
    restarts : list of :class:`~bayes_gp.inference.typeii.Restart`
    grad_norm, seconds, jitter : float
    """

    #: Name of the evidence in reports ("log marginal likelihood", "approximate log evidence").
    evidence_name: ClassVar[str] = "log marginal likelihood"

    @property
    def method_label(self) -> str:
        """Short name of the method: ``"MAP"``, ``"ML-II"``, ``"Laplace MAP"``, …"""
        return "MAP" if self.prior else "ML-II"

    @property
    def method_description(self) -> str:
        """One line for the report's inference table."""
        return "type-II: " + ("MAP (log posterior)" if self.prior else "ML-II (no priors)")


@dataclass(frozen=True)
class Bands:
    """Predictive bands of a model with one input, on a grid, for the report's figure.

    ``kind``: ``"regression"`` (``f_*`` and ``y_*`` bands, optionally a noise panel) or
    ``"probability"`` (the predictive probability of the positive class, optionally a band over
    posterior draws). Intervals are central 94%.
    """

    kind: str
    x: np.ndarray  #: training inputs (the single column)
    y: np.ndarray  #: training targets (0/1 labels for "probability")
    grid: np.ndarray
    mean: np.ndarray  #: predictive mean of f_* (regression) or P(y_* = 1) (probability)
    lower: np.ndarray | None = None  #: band of f_* / of P over draws (None: no band)
    upper: np.ndarray | None = None
    y_lower: np.ndarray | None = None  #: band of y_* with noise (regression)
    y_upper: np.ndarray | None = None
    noise: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  #: noise sd mean/lower/upper
    residuals: np.ndarray | None = None  #: |y − E[f(x)]| at x, beside the noise panel
    positive: str = "1"  #: the positive class's label (probability)
    band_label: str = "94% band of f*"  #: legend of the inner band (regression)
    y_band_label: str = "94% band of y* (with noise)"  #: legend of the outer band (regression)

    def __post_init__(self) -> None:
        if self.kind not in ("regression", "probability"):
            raise ValueError(f"`kind` must be 'regression' or 'probability', got {self.kind!r}")


#: Statuses of an :class:`ApproximationCheck`, best first (those of the report's verdicts).
CHECK_STATUSES = ("ok", "n/a", "warn", "fail")


@dataclass(frozen=True)
class ApproximationCheck:
    """The outcome of one post-fit check of an approximation (HSGP basis, inducing inputs,
    Laplace): did the approximation hold at the fitted hyperparameters?

    A neutral result that the report turns into a verdict row and the workflow saves in
    ``fit.json``; the checks themselves are the model's (:meth:`GPModel.approximation_checks`).

    Attributes
    ----------
    name : str
        What was checked (``"HSGP resolution (ls)"``, ``"Laplace evidence gap"``, …).
    status : {"ok", "n/a", "warn", "fail"}
    value : float or None
        The measured value (``None`` when it could not be computed).
    threshold : str
        The thresholds, as text (``"ok < 0.1, warn < 0.3"``).
    advice : str
        What to do about it ("" when the check passed).
    detail : str
        How the value was obtained (draws, subsample size, seed).
    """

    name: str
    status: str
    value: float | None
    threshold: str
    advice: str = ""
    detail: str = ""

    def __post_init__(self):
        if self.status not in CHECK_STATUSES:
            raise ValueError(f"`status` must be one of {CHECK_STATUSES}, got {self.status!r}")
        if self.value is not None:
            object.__setattr__(self, "value", float(self.value))

    def to_dict(self) -> dict:
        """The check as plain JSON-ready values (a non-finite value as ``None``)."""
        value = self.value if self.value is not None and np.isfinite(self.value) else None
        return {
            "name": self.name, "status": self.status, "value": value,
            "threshold": self.threshold, "advice": self.advice, "detail": self.detail,
        }  # fmt: skip


class GPModel(ABC):
    """The protocol every model family implements (see the module docstring).

    Subclasses set ``X``, ``feature_names`` and ``model`` and implement the abstract methods.
    """

    #: The methods :meth:`fit` accepts, the default first.
    fit_methods: ClassVar[tuple[str, ...]] = ("nuts",)
    #: Those of :attr:`fit_methods` that sample (return the ArviZ data of a NUTS run, and take
    #: ``draws``, ``tune``, ``chains``, ``sampler``); the others are type-II fits.
    sampling_methods: ClassVar[tuple[str, ...]] = ("nuts",)
    #: ``"continuous"``, ``"binary"`` or ``"categorical"`` (label indices into ``classes_``):
    #: what :meth:`replicate` draws and :attr:`observed` holds.
    outcome: ClassVar[str] = "continuous"
    #: What the predictive-band figure shows beyond the bands (added to its caption).
    bands_note: ClassVar[str] = ""

    X: np.ndarray
    feature_names: list[str]

    @property
    @abstractmethod
    def hyperparameters(self) -> list[str]:
        """Names of the free hyperparameters (random variables of :attr:`model`)."""

    @property
    def derived(self) -> list[str]:
        """Deterministic quantities of a NUTS fit's posterior that the report summarises beside
        the hyperparameters (an output correlation matrix, say), without verdicts of their own;
        none by default."""
        return []

    @property
    def label(self) -> str:
        """A short name of the model for report titles (its kernel, usually)."""
        return type(self).__name__

    @property
    @abstractmethod
    def observed(self) -> np.ndarray:
        """The data that replicated data are compared with: ``y``, or the 0/1 labels."""

    @abstractmethod
    def describe(self) -> list[tuple[str, object]]:
        """Rows ``(name, value)`` describing the model: kernel, formula, equation, likelihood,
        mean, noise, data size."""

    @abstractmethod
    def fit(self, method: str, **options) -> Any:
        """Fit by ``method`` (one of :attr:`fit_methods`). Options are those of the method
        (``draws``, ``tune``, ``chains``, ``sampler`` for NUTS; ``n_restarts`` for type-II
        fits; ``random_seed`` for all); unknown options are refused by the method."""

    @abstractmethod
    def check_fit(self, fit: Any) -> None:
        """Raise ``TypeError`` (with what is expected) unless ``fit`` is a fit of this model."""

    def fit_label(self, fit: Any) -> str:
        """``"NUTS (nutpie)"``, ``"MAP"``, ``"Laplace ML-II"``, …"""
        if is_nuts(fit):
            sampler = fit["posterior"].attrs.get("bayes_gp_sampler")
            return f"NUTS ({sampler})" if sampler else "NUTS"
        return fit.method_label

    @abstractmethod
    def replicate(self, fit: Any, n_draws: int, seed: int = 0) -> np.ndarray:
        """Replicated data sets at the training inputs, ``(n_draws, n)``."""

    def ppc_caption(self, n_draws: int) -> str:
        """How :meth:`replicate` draws, for the figure's caption."""
        return f"Observed data vs {n_draws} replicated data sets"

    @abstractmethod
    def bands(self, grid: np.ndarray, fit: Any) -> Bands:
        """Predictive bands on ``grid`` (models with one input)."""

    @abstractmethod
    def prediction_columns(self, X_new: np.ndarray, fit: Any) -> dict[str, np.ndarray]:
        """Predictions at ``X_new`` as named columns (mean, sd, interval, probabilities, …):
        the report's predictions table and the workflow's ``predictions.csv``."""

    @abstractmethod
    def scores(self, y: np.ndarray, columns: dict[str, np.ndarray]) -> dict[str, float]:
        """Held-out scores of the predictions ``columns`` (from :meth:`prediction_columns`) of
        the observed ``y`` (as given: labels for a classifier)."""

    @abstractmethod
    def point_loo(self, fit: Any) -> tuple[str, np.ndarray]:
        """``(method, pointwise)``: leave-one-out log predictive densities of a type-II fit and
        how they were computed."""

    @abstractmethod
    def restore_fit(self, method: str, params: dict, attrs: dict) -> Any:
        """Rebuild a saved type-II fit: hyperparameters ``params`` and the scalars the workflow
        saved with them (``objective``, ``prior``, ``log_marginal_likelihood``, ``grad_norm``,
        ``jitter``, …) in ``attrs`` (and, under ``attrs["arrays"]``, the
        :meth:`saved_arrays`); whatever else the fit needs (an approximation's state) is
        recomputed at ``params``."""

    def saved_arrays(self, fit: Any) -> dict[str, np.ndarray]:
        """Arrays beyond the hyperparameters that :meth:`restore_fit` needs to rebuild a type-II
        fit and cannot recompute (a deep kernel's network weights). The workflow saves them with
        the fit and hands them back in ``attrs["arrays"]``. Default: none."""
        return {}

    @abstractmethod
    def set_jitter(self, jitter: float) -> None:
        """Use the absolute diagonal jitter a saved fit was made with (reloading a fit)."""

    def approximation_checks(self, fit: Any) -> list[ApproximationCheck]:
        """Post-fit checks of the model's approximations at ``fit`` (HSGP basis resolution and
        error, inducing-point bound gap and coverage, Laplace evidence gap and importance-sampling
        Pareto k̂), as :class:`ApproximationCheck` rows. Default: none (an exact model)."""
        return []
