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
  :meth:`GPModel.fit` accepts, names of the one vocabulary :mod:`bayes_gp.inference.methods`:
  ``"nuts"``, ``"nuts_joint"``, ``"map"``, ``"vi"``, ``"ep"``), ``sampling_methods`` (those of
  them that run NUTS), ``renamed_methods`` (the previous release's names it still takes);
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
  entry of the workflow's ``fit.json``;
* calibration: :meth:`GPModel.held_out_predictive` (the predictive distribution of held-out
  observations, as a :class:`HeldOutPredictive`: the predictive CDF at each one, or the predicted
  probability of a binary outcome) and :meth:`GPModel.prior_predictive` (data sets drawn from the
  prior, for the prior predictive check).

Adding a model family (see the README's "Adding a model family"): subclass :class:`GPModel`,
implement the abstract methods, and the report, the workflow and ``fit_many`` work unchanged;
``tests/test_protocol.py`` does exactly that with a GP of fixed kernel defined in the test suite.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from bayes_gp._arguments import renamed_argument

__all__ = [
    "GPModel",
    "PointFit",
    "Bands",
    "ApproximationCheck",
    "HeldOutPredictive",
    "is_nuts",
    "declared_axes",
    "CHECK_STATUSES",
]


def is_nuts(fit: Any) -> bool:
    """Whether ``fit`` is the ArviZ data of a NUTS run (a ``DataTree`` with a ``posterior``)."""
    children = getattr(fit, "children", None)
    return children is not None and "posterior" in children


def declared_axes(gp: Any, name: str, shape: tuple[int, ...]) -> dict[str, list] | None:
    """The axes (dimension -> coordinate values) that ``gp``'s PyMC model (the protocol's
    ``model``) declares for the hyperparameter ``name``, when they fit ``shape``; else ``None``
    (no declared dims, a shape that does not match, or a model that cannot build its PyMC
    model). A ``feature`` axis without coordinates takes ``gp.feature_names``."""
    try:
        pm_model = getattr(gp, "model", None)
    except Exception:  # a model without a PyMC model has no declared axes
        return None
    dims = tuple(getattr(pm_model, "named_vars_to_dims", {}).get(name) or ())
    if not dims or len(dims) != len(shape):
        return None
    coords = getattr(pm_model, "coords", {}) or {}
    axes = {}
    for d in dims:
        values = coords.get(d)
        if values is None and d == "feature":
            values = getattr(gp, "feature_names", None)
        axes[d] = list(values if values is not None else ())
    if tuple(len(c) for c in axes.values()) != tuple(shape):
        return None
    return axes


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

    @property
    def runaway(self) -> tuple[str, ...]:
        """Hyperparameters of the best run that ran away to a boundary (``"eta -> inf"``,
        :func:`bayes_gp.inference.typeii.runaway`); such a fit is not ``converged``."""
        restarts = getattr(self, "restarts", None) or []
        return tuple(getattr(restarts[0], "runaway", ())) if restarts else ()

    @property
    def degenerate(self) -> tuple[str, ...]:
        """Hyperparameters of the best run that ended on a degenerate value: a scale at zero
        (``"sigma -> 0 (4.1e-09 < ...)"``) or a length-scale below the inputs' spacing
        (:func:`bayes_gp.inference.degenerate.degenerate`); such a fit is not ``converged``."""
        restarts = getattr(self, "restarts", None) or []
        return tuple(getattr(restarts[0], "degenerate", ())) if restarts else ()


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


@dataclass(frozen=True)
class HeldOutPredictive:
    r"""The predictive distribution of held-out observations :math:`y_i` at inputs
    :math:`x_i`, as much of it as calibration needs (:mod:`bayes_gp.validate.predictive`).

    ``kind="cdf"`` (continuous or count outcomes): the predictive CDF at each observation from
    below and at it, :math:`F_i(y_i^-) = P(y^*_i < y_i \mid \mathcal D)` and
    :math:`F_i(y_i) = P(y^*_i \le y_i \mid \mathcal D)`, equal for a continuous outcome;
    for a NUTS fit, the mixture over posterior draws. ``kind="probability"`` (binary outcomes):
    the predictive probability :math:`P(y^*_i = 1 \mid \mathcal D)` and the 0/1 outcome.
    """

    kind: str
    cdf_below: np.ndarray | None = None
    cdf_at: np.ndarray | None = None
    probability: np.ndarray | None = None
    outcome: np.ndarray | None = None

    def __post_init__(self):
        if self.kind == "cdf":
            if self.cdf_below is None or self.cdf_at is None:
                raise ValueError("kind='cdf' needs `cdf_below` and `cdf_at`")
            below = np.asarray(self.cdf_below, float).ravel()
            at = np.asarray(self.cdf_at, float).ravel()
            if below.shape != at.shape:
                raise ValueError(f"`cdf_below` {below.shape} and `cdf_at` {at.shape} differ")
            if not (np.all(np.isfinite(below)) and np.all(np.isfinite(at))):
                raise ValueError("the predictive CDF is not finite at some held-out observation")
            # rounding may take a mixture of CDFs a hair outside [0, 1] or below < at
            below, at = np.clip(below, 0.0, 1.0), np.clip(at, 0.0, 1.0)
            object.__setattr__(self, "cdf_below", np.minimum(below, at))
            object.__setattr__(self, "cdf_at", at)
        elif self.kind == "probability":
            if self.probability is None or self.outcome is None:
                raise ValueError("kind='probability' needs `probability` and `outcome`")
            p = np.asarray(self.probability, float).ravel()
            t = np.asarray(self.outcome, float).ravel()
            if p.shape != t.shape:
                raise ValueError(f"`probability` {p.shape} and `outcome` {t.shape} differ")
            if not np.all((p >= 0) & (p <= 1)):
                raise ValueError("`probability` must lie in [0, 1]")
            if not np.all((t == 0) | (t == 1)):
                raise ValueError("`outcome` must be 0 or 1")
            object.__setattr__(self, "probability", p)
            object.__setattr__(self, "outcome", t)
        else:
            raise ValueError(f"`kind` must be 'cdf' or 'probability', got {self.kind!r}")

    @property
    def n(self) -> int:
        """Number of held-out observations."""
        return int((self.cdf_at if self.kind == "cdf" else self.probability).size)


class GPModel(ABC):
    """The protocol every model family implements (see the module docstring).

    Subclasses set ``X``, ``feature_names`` and ``model`` and implement the abstract methods.
    """

    #: The methods :meth:`fit` accepts, the default first.
    fit_methods: ClassVar[tuple[str, ...]] = ("nuts",)
    #: Those of :attr:`fit_methods` that sample (return the ArviZ data of a NUTS run, and take
    #: ``draws``, ``tune``, ``chains``, ``sampler``); the others are type-II fits.
    sampling_methods: ClassVar[tuple[str, ...]] = ("nuts",)
    #: Method names of the previous release that :meth:`fit` still takes, old -> new, with a
    #: ``FutureWarning`` (:func:`bayes_gp.inference.methods.canonical_method`).
    renamed_methods: ClassVar[Mapping[str, str]] = MappingProxyType({})
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
        """Fit by ``method`` (one of :attr:`fit_methods`, names of
        :mod:`bayes_gp.inference.methods`). Options are those of the method
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
    def replicate(self, fit: Any, n_draws: int, random_seed: int = 0) -> np.ndarray:
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

    def held_out_predictive(self, X_new: np.ndarray, y: np.ndarray, fit: Any) -> HeldOutPredictive:
        """The predictive distribution of held-out observations ``y`` (as given: labels for a
        classifier) at ``X_new`` under ``fit``, for the predictive-calibration section of the
        report and the workflow's coverage scores. Default: not available (the report says so)."""
        raise NotImplementedError(
            f"{type(self).__name__} does not compute the predictive distribution of held-out data"
        )

    @renamed_argument("seed", "random_seed")
    def prior_predictive(self, n_draws: int, random_seed: int = 0) -> np.ndarray:
        """Data sets drawn from the prior predictive distribution at the training inputs,
        ``(n_draws, n)``, comparable with :attr:`observed`: hyperparameters from their priors,
        then the data given them. Default: ancestral draws of :attr:`model`'s one observed
        variable (``pm.draw``); a model whose likelihood cannot be drawn from overrides it or
        raises ``NotImplementedError`` (the report then says so)."""
        import pymc as pm

        from bayes_gp.linalg import EAGER_MODE

        observed = self.model.observed_RVs
        if len(observed) != 1:
            raise NotImplementedError(
                f"{type(self).__name__}'s PyMC model has {len(observed)} observed variables; "
                "the default prior predictive draws one"
            )
        try:
            draws = pm.draw(observed[0], draws=n_draws, random_seed=random_seed, mode=EAGER_MODE)
        except NotImplementedError:  # a likelihood defined by its log density only
            raise NotImplementedError(
                f"the likelihood of {type(self).__name__} is defined by its log density only "
                "(no random generator to draw data from)"
            ) from None
        return np.asarray(draws, float).reshape(n_draws, -1)
