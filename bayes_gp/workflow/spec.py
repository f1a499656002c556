"""What to fit: a declared model by name, or a model on the user's own CSV file.

:class:`CSVModel` gives a CSV file the declared-model interface (:mod:`bayes_gp.declared`):
``name``, ``task``, ``summary``, ``methods``, ``settings``, ``load_data`` and ``build``.
:func:`resolve` turns a name into its declared model; :func:`spec_of` and :func:`from_spec`
write a model as the specification saved in ``fit.json`` and rebuild it from there.

A CSV model is a formula model (:func:`bayes_gp.Model`, :attr:`CSVModel.formula`): the input
columns one ``gp(x1, x2, kernel=..., ard=...)`` term, the target the response, the task or
likelihood its family, and the intercept fixed at the data's location (the constant mean that
:class:`~bayes_gp.GPRegression` and :class:`~bayes_gp.LatentGP` give a model without ``mean=``,
so that the log density is theirs, :data:`SPEC_ENGINE`); an exposure column is the offset
``offset(log(exposure))``, the model predicting as LatentGP with ``exposure=`` at each row's
exposure and per unit exposure (:class:`~bayes_gp.workflow.exposure.ExposureFormulaGP`). The
``gaussian`` likelihood is the regression's gaussian family, the exact GP (the latent function
integrated out in closed form, R&W eq. 2.30: methods ``nuts`` and ``map``). A classifier
(``task="classification"``) is the bernoulli family of its two labels, the larger the event
(GPClassifier's positive class) and GPClassifier's link for the method (probit for ``ep``,
logit otherwise), predicting GPClassifier's columns ``p_positive``, ``latent_mean``,
``latent_sd`` and ``predicted``; its methods and their old names stay the classifier's
(:data:`CSV_METHODS`, ``map`` first), and ``map`` is the MAP estimate of every latent formula
model (GPClassifier's ``map`` was ML-II, without the prior). Specifications saved before the
formula engine (no ``engine`` key) rebuild the class they were fitted with, whose
hyperparameter names their fits hold.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pandas as pd

from bayes_gp._arguments import ArgumentError
from bayes_gp.declared import Dataset, DeclaredModel, choose_method, load_model
from bayes_gp.inference.methods import RENAMED_BY_TASK

__all__ = [
    "CSVModel",
    "FormulaCSVModel",
    "DEFAULT_SETTINGS",
    "CSV_METHODS",
    "parse_columns",
    "resolve",
    "spec_of",
    "from_spec",
    "read_csv",
    "SPEC_ENGINE",
    "location",
]

#: The engine of a CSV model, which its specification records (``fit.json``'s
#: ``spec["engine"]``: this, or ``"class"`` for a model kept on its class,
#: :attr:`CSVModel.class_reason`); a specification without the key was written before it and
#: rebuilds the model class (GPRegression, GPClassifier, LatentGP), whose hyperparameter names
#: its saved fit holds (``ls``, not ``gp(x).ls``).
SPEC_ENGINE = "formula"
#: The engines of a CSV model: the formula model, or the class of the earlier specifications.
_ENGINES = ("formula", "class")
#: The likelihoods whose formula family, its intercept fixed at :func:`location`, has LatentGP's
#: log density (tests/workflow/test_spec.py; with an exposure column, the count families' offset
#: formula, its ``EXPOSURE`` cases); ``gaussian`` is the exact GP (:data:`_REGRESSION_FAMILY`,
#: GPRegression's log density); a likelihood without an equality test stays on LatentGP.
_FORMULA_LIKELIHOODS = (
    "poisson", "negative_binomial", "zero_inflated_poisson", "zero_inflated_negative_binomial",
    "hurdle_poisson", "hurdle_negative_binomial", "binomial", "bernoulli", "student_t", "beta",
    "gamma", "ordinal",
)  # fmt: skip
#: The formula family of a CSV regression (no ``likelihood``): the exact GP.
_REGRESSION_FAMILY = "gaussian"

#: The inference settings of a model that declares none (CSV models), fast and full.
DEFAULT_SETTINGS = MappingProxyType(
    {
        "fast": MappingProxyType({"draws": 300, "tune": 300, "chains": 2, "n_restarts": 3}),
        "full": MappingProxyType({"draws": 1000, "tune": 1000, "chains": 4, "n_restarts": 5}),
    }
)
#: The methods of a CSV model without a ``likelihood``, by task (the default first); with a
#: likelihood they are :attr:`bayes_gp.LatentGP.fit_methods`.
CSV_METHODS = MappingProxyType(
    {"regression": ("nuts", "map"), "classification": ("map", "nuts", "ep", "nuts_joint")}
)
#: The task a latent-GP likelihood sets (any other likelihood models counts).
_LIKELIHOOD_TASKS = MappingProxyType(
    {"bernoulli": "classification", "student_t": "regression", "gaussian": "regression",
     "beta": "regression", "gamma": "regression"}
)  # fmt: skip
#: Why a censored likelihood or family is refused here (its parameter's name filled in): the
#: censoring column (LatentGP's / Model's ``censored=``) is not part of a CSV specification yet.
_NO_CENSORING = (
    "{{{0}:weibull|lognormal|censored_gaussian}} needs each row's censoring code, which a "
    "model declared by a CSV specification cannot name yet: fit it in Python, "
    "bayes_gp.Model(formula, data, family=..., censored=column) or bayes_gp.LatentGP(X, y, "
    "likelihood=..., censored=column)"
)
#: The link of a CSV classifier by method (any other: logit).
_LINKS = MappingProxyType({"ep": "probit"})
#: The likelihoods that take each size column.
def _size_columns() -> MappingProxyType:
    """The likelihoods that take each size column, from the likelihood classes' ``size_name``
    (the count likelihoods take an exposure, the binomial its trials)."""
    from bayes_gp.latent.model import LIKELIHOODS as LATENT

    return MappingProxyType({
        size: tuple(k for k, (cls, _) in LATENT.items() if cls.size_name == size)
        for size in ("exposure", "trials")})  # fmt: skip


_SIZE_COLUMNS = _size_columns()


@dataclass(frozen=True)
class CSVModel:
    """A model on the user's own CSV file, with the declared-model interface.

    Parameters
    ----------
    path : path to a CSV file with a header row
    x : list of str
        Input columns.
    y : str
        Target column (numbers for regression; two distinct labels for classification).
    kernel : str
        A catalogue name or a sum of products (:func:`bayes_gp.regression.kernel_spec`).
    task : {"regression", "classification", "counts"}
        ``"counts"`` is set from a count likelihood.
    ard : bool
    likelihood : str, optional
        A :class:`~bayes_gp.LatentGP` likelihood (``"poisson"``, ``"negative_binomial"``,
        ``"binomial"``, ``"bernoulli"``, ``"student_t"``, the hurdles, ...): the model is then
        a latent GP fitted by ``"nuts"`` (NUTS with the Laplace-integrated GP), ``"nuts_joint"``,
        ``"map"`` or ``"vi"``; ``"gaussian"`` is the exact GP of a regression (the latent
        function integrated out in closed form), fitted by ``"nuts"`` or ``"map"``.
    exposure, trials : str, optional
        Column of the exposure (the count likelihoods: Poisson, negative binomial, their
        zero-inflated and hurdle versions) or of the trials (binomial).
    engine : {"formula", "class"}
        ``"formula"`` (default): the model is the formula model :attr:`formula` where there is
        one (:attr:`class_reason` says where not); ``"class"``: GPRegression, GPClassifier or
        LatentGP, as a specification saved without an ``engine`` key was fitted
        (:func:`from_spec`).

    Raises
    ------
    ArgumentError
        For a combination of ``likelihood``, ``exposure`` and ``trials`` that does not go
        together (the error names the parameters).
    ValueError
        For a bad task, kernel or column list.
    """

    path: str
    x: tuple[str, ...]
    y: str
    kernel: str = "expquad"
    task: str = "regression"
    ard: bool = False
    likelihood: str | None = None
    exposure: str | None = None
    trials: str | None = None
    engine: str = SPEC_ENGINE

    def __post_init__(self):
        from bayes_gp.kernels.catalogue import kernel_spec
        from bayes_gp.latent import LIKELIHOODS

        if self.engine not in _ENGINES:
            raise ValueError(f"engine must be 'formula' or 'class', got {self.engine!r}")

        if self.likelihood is not None:
            if self.likelihood not in LIKELIHOODS:
                raise ArgumentError(
                    "{likelihood} must be one of {choices}, got {value!r}",
                    ("likelihood",),
                    choices=", ".join(LIKELIHOODS),
                    value=self.likelihood,
                )
            if getattr(LIKELIHOODS[self.likelihood][0], "censoring", None):
                raise ArgumentError(_NO_CENSORING.format("likelihood"), ("likelihood",))
            task = _LIKELIHOOD_TASKS.get(self.likelihood, "counts")
            object.__setattr__(self, "task", task)
        for column, likelihoods in _SIZE_COLUMNS.items():
            if getattr(self, column) and self.likelihood not in likelihoods:
                raise ArgumentError(
                    "{" + column + "} goes with {likelihood:" + "|".join(likelihoods) + "}",
                    (column, "likelihood"),
                )
        if self.likelihood == "binomial" and not self.trials:
            raise ArgumentError(
                "{likelihood:binomial} needs {trials} (the trials column)", ("likelihood", "trials")
            )
        size = self.size_column
        if size and size in (*self.x, self.y):
            raise ValueError(f"column {size!r} is an input or the target, not a size column")
        if self.task not in ("regression", "classification", "counts"):
            raise ValueError(
                f"task must be 'regression', 'classification' or 'counts', got {self.task!r}"
            )
        if not self.x:
            raise ValueError("give at least one input column")
        if self.y in self.x:
            raise ValueError(f"column {self.y!r} is both an input and the target")
        kernel_spec(self.kernel, exclude=("prml",) if self.task == "classification" else ())

    @property
    def name(self) -> str:
        return Path(self.path).stem

    @property
    def summary(self) -> str:
        return f"{self.task} of {self.y} on {', '.join(self.x)} ({self.kernel}) from {self.path}"

    @property
    def family(self) -> str:
        """The formula family: the likelihood, or ``"gaussian"`` for a regression and
        ``"bernoulli"`` for a classifier (its two labels the response, the larger the event:
        GPClassifier's positive class, :func:`~bayes_gp.formula.model.binary_response`)."""
        if self.likelihood is not None:
            return self.likelihood
        return _REGRESSION_FAMILY if self.task == "regression" else "bernoulli"

    @property
    def class_reason(self) -> str | None:
        """Why this model is built from its class rather than as a formula model, ``None`` when
        it is a formula model (:attr:`formula`): every CSV model but a specification saved on
        its class (``engine="class"``) or a likelihood without a checked formula family."""
        if self.engine == "class":
            return "a specification saved before the formula engine: its fit names the class's"
        if self.likelihood not in (None, _REGRESSION_FAMILY, *_FORMULA_LIKELIHOODS):
            return (f"the likelihood {self.likelihood!r} has no formula family whose log "
                    "density is checked to be LatentGP's (tests/workflow/test_spec.py)")  # fmt: skip
        return None

    @property
    def formula(self) -> str | None:
        """The formula of the model (:func:`bayes_gp.Model`), ``None`` where it is built from
        its class (:attr:`class_reason`): ``y ~ gp(x1, x2, kernel='...', ard=...)``, the
        response ``p(y, trials)`` for the binomial likelihood, ``+ offset(log(exposure))``
        with an exposure column. A classifier's is the bernoulli family's, its response the
        labels, with GPClassifier's link for the method (:data:`_LINKS`: probit for ``ep``,
        else logit), which :meth:`build` gives it. A column that is not a Python name is
        quoted in backticks, a backtick in it doubled
        (:func:`~bayes_gp.formula.parse.quote_column`), so the model's names are the file's."""
        if self.class_reason is not None:
            return None
        from bayes_gp.formula.parse import quote_column as q

        response = f"p({q(self.y)}, {q(self.trials)})" if self.trials else q(self.y)
        inputs = ", ".join(map(q, self.x))
        offset = f" + offset(log({q(self.exposure)}))" if self.exposure else ""
        return f"{response} ~ gp({inputs}, kernel={self.kernel!r}, ard={self.ard}){offset}"

    @property
    def size_column(self) -> str | None:
        """The exposure or trials column, if any."""
        return self.exposure or self.trials

    @property
    def renamed(self) -> Mapping[str, str]:
        """The previous release's method names, old -> new: with a ``likelihood`` the
        engine's (the formula model's ``renamed_methods``, a latent GP's on its class), else
        the task's (:data:`~bayes_gp.inference.methods.RENAMED_BY_TASK`)."""
        if self.likelihood is not None:
            return self._likelihood_engine.renamed_methods
        return RENAMED_BY_TASK[self.task]

    @property
    def methods(self) -> tuple[str, ...]:
        """The fit methods, the default first: with a ``likelihood`` the engine's (``"gaussian"``:
        the exact GP's ``nuts``, ``map``; another: LatentGP's), else :data:`CSV_METHODS`."""
        if self.likelihood is not None:
            return self._likelihood_engine.fit_methods
        return CSV_METHODS[self.task]

    @property
    def _likelihood_engine(self) -> type:
        """The class a model with a ``likelihood`` is built on: the formula family's engine
        (:func:`~bayes_gp.formula.engines.engine_class`), or LatentGP (:attr:`class_reason`)."""
        from bayes_gp.formula.engines import engine_class
        from bayes_gp.latent import LatentGP

        return LatentGP if self.formula is None else engine_class(self.family)

    def settings(self, fast: bool) -> dict:
        return dict(DEFAULT_SETTINGS["fast" if fast else "full"])

    def spec(self) -> dict:
        return {
            "csv": str(Path(self.path).resolve()),
            "x": list(self.x),
            "y": self.y,
            "kernel": self.kernel,
            "task": self.task,
            "ard": self.ard,
            "likelihood": self.likelihood,
            "exposure": self.exposure,
            "trials": self.trials,
            # the engine that built it: a model kept on its class says "class", so that a later
            # formula engine for it does not rebuild a fit saved under the class's names
            "engine": "formula" if self.formula is not None else "class",
        }

    def load_data(self, fast: bool = False) -> Dataset:
        """Read the CSV file (once) and check the columns used.

        Parameters
        ----------
        fast : bool
            Ignored: a CSV file has one size.

        Returns
        -------
        Dataset

        Raises
        ------
        ValueError
            If the file is missing or not CSV, a column is missing, a numeric column holds text,
            or a row has missing values in the columns used.
        """
        try:
            df = pd.read_csv(self.path)
        except FileNotFoundError:
            raise ValueError(f"no such file: {self.path}") from None
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read {self.path} as CSV: {exc}") from None
        size = self.size_column
        wanted = (*self.x, self.y, *([size] if size else []))
        missing = [c for c in wanted if c not in df.columns]
        if missing:
            raise ValueError(
                f"column(s) {', '.join(map(repr, missing))} not in {self.path} "
                f"(columns: {', '.join(map(str, df.columns))})"
            )
        cols = {}
        numeric = self.x if self.task == "classification" else (*self.x, self.y)
        for c in (*numeric, *([size] if size else [])):
            values = pd.to_numeric(df[c], errors="coerce")
            bad = values.isna() & df[c].notna()
            if bad.any():
                row = int(np.flatnonzero(bad.to_numpy())[0])
                raise ValueError(
                    f"column {c!r} is not numeric: row {row + 1} holds {df[c].iloc[row]!r}"
                )
            cols[c] = values
        used = pd.DataFrame(cols)
        if self.task == "classification":
            used[self.y] = df[self.y]
        n_missing = int(used.isna().any(axis=1).sum())
        if n_missing:
            raise ValueError(
                f"{n_missing} row(s) of {self.path} have missing values in the columns used; "
                "remove or impute them first"
            )
        X = used[list(self.x)].to_numpy(float)
        y = used[self.y].to_numpy()
        if self.task != "classification":
            y = y.astype(float)
        return Dataset(
            X_train=X,
            y_train=y,
            feature_names=list(self.x),
            target_name=self.y,
            source=str(self.path),
            size_train=used[size].to_numpy(float) if size else None,
            size_name=size,
        )

    def build(self, data: Dataset, method: str | None = None):
        """The model of ``data`` for ``method`` (default: the first of :attr:`methods`).

        Raises
        ------
        ArgumentError
            If ``method`` is not one of :attr:`methods` (:func:`~bayes_gp.declared.choose_method`).
        """
        from bayes_gp.classification import GPClassifier
        from bayes_gp.regression import GPRegression

        method = choose_method(self.name, self.methods, method, self.renamed)
        if self.formula is not None:
            return self._formula_model(data, method)
        X = pd.DataFrame(data.X_train, columns=data.feature_names)
        if self.likelihood is not None:
            from bayes_gp.latent import LatentGP

            sizes = {c: data.size_train for c in _SIZE_COLUMNS if getattr(self, c)}
            return LatentGP(X, data.y_train, self.kernel, self.likelihood, ard=self.ard, **sizes)
        if self.task == "regression":
            return GPRegression(X, data.y_train, self.kernel, ard=self.ard)
        link = _LINKS.get(method, "logit")
        return GPClassifier(X, data.y_train, self.kernel, link=link, ard=self.ard)

    def _formula_model(self, data: Dataset, method: str):
        r"""The formula model :attr:`formula` of ``data``, its intercept fixed at the data's
        location :func:`location` (the classes' constant mean without ``mean=``): the same
        log density as the class, :math:`\log p(y \mid \theta) + \log p(\theta)`; a
        classifier's link GPClassifier's for ``method`` (:data:`_LINKS`). With an
        exposure column, :class:`~bayes_gp.workflow.exposure.ExposureFormulaGP` (LatentGP's
        predictions at the rows' exposure and per unit exposure)."""
        from bayes_gp.formula.model import engine_arguments

        frame = pd.DataFrame(data.X_train, columns=list(data.feature_names))
        frame[self.y] = data.y_train
        if self.size_column:
            frame[self.size_column] = data.size_train
        if self.exposure and np.any(data.size_train <= 0):  # before its log (LatentGP's check)
            row = int(np.argmax(data.size_train <= 0))
            raise ValueError(f"the exposure column {self.exposure!r} must be positive (the "
                             f"offset is its log); row {row + 1} holds "
                             f"{data.size_train[row]:g}")  # fmt: skip
        family = self.family
        # the ordinal family drops the intercept (its cut-points carry the location)
        priors = None if family == "ordinal" else {"Intercept": location(family, data)}
        classifier = self.likelihood is None and self.task == "classification"
        link = _LINKS.get(method, "logit") if classifier else None
        cls, args, kwargs = engine_arguments(self.formula, frame, family, link=link,
                                             priors=priors)  # fmt: skip
        if self.exposure:
            from bayes_gp.workflow.exposure import ExposureFormulaGP

            return ExposureFormulaGP(*args, exposure=self.exposure, **kwargs)
        return cls(*args, **kwargs)


def location(family: str, data: Dataset) -> float:
    r"""The data's location on the latent scale of ``family``: the constant mean of
    :class:`~bayes_gp.GPRegression` (:math:`\bar y`, R&W §2.7) and of
    :class:`~bayes_gp.LatentGP` (:func:`~bayes_gp.latent.model.latent_location`) when no
    ``mean=`` is given, at which a CSV model fixes its formula's intercept.

    .. math::
       \bar y \;(\text{gaussian, student\_t}),\quad
       \log\frac{\sum y + 1/2}{\sum e}\;(\text{counts, exposure } e,
       \text{ default } 1),\quad
       \operatorname{logit}\frac{\sum y + 1/2}{\sum t + 1}\;(\text{binomial}),\quad
       \operatorname{logit} \bar y\;(\text{beta}),\quad \log \bar y\;(\text{gamma}),
       \quad 0\;(\text{bernoulli})
    """
    from bayes_gp.latent.model import LIKELIHOODS as LATENT
    from bayes_gp.latent.model import latent_location, make_likelihood

    y = data.y_train
    if family == "bernoulli":  # a classifier's two labels: the event's indicator
        from bayes_gp.formula.model import binary_response

        y = binary_response(y, str(data.target_name))[0]
    y = np.asarray(y, float)
    size_name = LATENT[family][0].size_name
    sizes = {size_name: data.size_train} if size_name and data.size_train is not None else {}
    lik, _ = make_likelihood(family, None, y, y.size, **sizes)
    return float(np.mean(y)) if lik.identity_link else latent_location(lik, y)


def read_csv(path: str) -> pd.DataFrame:
    """The CSV file at ``path`` as a DataFrame; a missing or unreadable file is a ``ValueError``
    that names it."""
    try:
        return pd.read_csv(path)
    except FileNotFoundError:
        raise ValueError(f"no such file: {path}") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {path} as CSV: {exc}") from None


@dataclass(frozen=True)
class FormulaCSVModel:
    r"""A formula model (:func:`bayes_gp.Model`) on a CSV file, with the declared-model
    interface: ``bayes-gp fit --formula "y ~ gp(t) + (1|site)" --data file.csv``.

    Parameters
    ----------
    path : path to a CSV file with a header row
    formula : str
        The model's formula (:mod:`bayes_gp.formula`).
    family : str
        One of :data:`bayes_gp.formula.FAMILIES`.
    link : str, optional
        The bernoulli family's link (``"logit"``, ``"probit"``).
    noise : str, optional
        The gaussian family's column of known measurement-error standard deviations
        (:func:`bayes_gp.Model`'s ``noise=``: :math:`C = K + \operatorname{diag}(s^2)`).
    learn_noise : bool
        With ``noise``: a learned :math:`\sigma` as well (:math:`C = K +
        \operatorname{diag}(s^2) + \sigma^2 I`).

    Raises
    ------
    ValueError
        For a formula that does not parse, a family that does not exist, or ``noise`` /
        ``learn_noise`` with another family than gaussian (before the file is read).
    """

    path: str
    formula: str
    family: str = "gaussian"
    link: str | None = None
    noise: str | None = None
    learn_noise: bool = False

    def __post_init__(self):
        from bayes_gp.formula import FAMILIES, parse_formula

        if self.family not in FAMILIES:
            raise ArgumentError(
                "{family} must be one of {choices}, got {value!r}",
                ("family",),
                choices=", ".join(FAMILIES),
                value=self.family,
            )
        parse_formula(self.formula)
        from bayes_gp.formula.model import CENSORED_FAMILIES

        if self.family in CENSORED_FAMILIES:
            raise ArgumentError(_NO_CENSORING.format("family"), ("family",))
        if self.noise is not None and self.family != "gaussian":
            raise ArgumentError(
                "{noise} (known measurement errors) goes with {family:gaussian}, not with "
                "{value!r}",
                ("noise", "family"),
                value=self.family,
            )
        if self.learn_noise and self.noise is None:
            raise ArgumentError(
                "{learn_noise} adds a learned sigma to the known errors of {noise}: give the "
                "column of standard deviations",
                ("learn_noise", "noise"),
            )

    @property
    def name(self) -> str:
        return Path(self.path).stem

    @property
    def task(self) -> str:
        if self.family == "gaussian":
            return "regression"
        if self.family == "categorical":
            return "classification"
        return _LIKELIHOOD_TASKS.get(self.family, "counts")

    @property
    def summary(self) -> str:
        return f"{self.formula} ({self.family}) from {self.path}"

    @property
    def renamed(self) -> Mapping[str, str]:
        """The previous release's method names that the engine still takes (its
        ``renamed_methods``)."""
        from bayes_gp.formula.model import engine_class

        return engine_class(self.family).renamed_methods

    @property
    def methods(self) -> tuple[str, ...]:
        """The engine's fit methods, ``ep`` included for the bernoulli family with the probit
        link (:func:`~bayes_gp.formula.engines.engine_methods`)."""
        from bayes_gp.formula.engines import engine_methods

        return engine_methods(self.family, self.link)

    def settings(self, fast: bool) -> dict:
        return dict(DEFAULT_SETTINGS["fast" if fast else "full"])

    def spec(self) -> dict:
        return {
            "csv": str(Path(self.path).resolve()),
            "formula": self.formula,
            "family": self.family,
            "link": self.link,
            "noise": self.noise,
            "learn_noise": self.learn_noise,
        }

    def _arguments(self):
        from bayes_gp.formula.model import engine_arguments

        known = {} if self.noise is None else {"noise": self.noise, "learn_noise": self.learn_noise}
        return engine_arguments(
            self.formula, read_csv(self.path), self.family, link=self.link, **known
        )

    def load_data(self, fast: bool = False) -> Dataset:
        """Read the CSV file and build the model's design matrix (every check of
        :func:`bayes_gp.Model` on the data: missing columns, NaN rows, a response the family
        cannot have) without building the model. ``fast`` is ignored: a CSV file has one
        size."""
        _, (parsed, design, y, *_), kwargs = self._arguments()
        if "classes" in kwargs:  # a bernoulli response's labels, as the file holds them
            y = kwargs["classes"][y.astype(int)]
        trials = kwargs.get("trials")
        return Dataset(
            X_train=design.X,
            y_train=y,
            feature_names=list(design.names),
            target_name=parsed.response,
            source=str(self.path),
            notes={"formula": self.formula, "family": self.family},
            size_train=None if trials is None else np.asarray(trials, float),
            size_name=parsed.trials if trials is not None else None,
        )

    def build(self, data: Dataset, method: str | None = None):
        """The formula model of the file (``data`` is its design, from :meth:`load_data`)."""
        choose_method(self.name, self.methods, method, self.renamed)
        cls, args, kwargs = self._arguments()
        return cls(*args, **kwargs)


def parse_columns(text: str) -> tuple[str, ...]:
    """``"a,b , c"`` → ``("a", "b", "c")``.

    Raises
    ------
    ArgumentError
        About the parameter ``x`` (the input columns), if ``text`` names no column.
    """
    cols = tuple(c.strip() for c in text.split(",") if c.strip())
    if not cols:
        raise ArgumentError("{x} needs at least one column name", ("x",))
    return cols


def resolve(model: str | DeclaredModel | CSVModel | FormulaCSVModel):
    """The declared model named ``model``, or ``model`` itself."""
    if isinstance(model, str):
        return load_model(model)
    return model


def spec_of(decl: DeclaredModel | CSVModel | FormulaCSVModel) -> dict:
    """How to rebuild ``decl`` (saved in ``fit.json``): ``{"model": name}`` or the CSV
    specification (:meth:`CSVModel.spec`, :meth:`FormulaCSVModel.spec`)."""
    if isinstance(decl, CSVModel | FormulaCSVModel):
        return decl.spec()
    return {"model": decl.name}


def from_spec(spec: dict) -> DeclaredModel | CSVModel | FormulaCSVModel:
    """The model :func:`spec_of` wrote ``spec`` for."""
    if "model" in spec:
        return load_model(spec["model"])
    if "formula" in spec:
        return FormulaCSVModel(
            spec["csv"], spec["formula"], spec["family"], spec.get("link"), spec.get("noise"),
            bool(spec.get("learn_noise", False)),
        )  # fmt: skip
    return CSVModel(
        spec["csv"], tuple(spec["x"]), spec["y"], spec["kernel"], spec["task"], spec["ard"],
        spec.get("likelihood"), spec.get("exposure"), spec.get("trials"),
        spec.get("engine", "class"),
    )  # fmt: skip
