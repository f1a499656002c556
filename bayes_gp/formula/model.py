r"""Formula models: ``Model("y ~ x + gp(t) + gp(t, by=site) + (1 | site)", data, family=...)``.

Every term of a formula enters the latent function linearly with a Gaussian prior, so the
latent function is one GP whose covariance is the sum of the terms' covariances
(:mod:`bayes_gp.formula.covariance`; R&W §2.7, eqs. 2.39–2.41). The engine follows from that:

* **gaussian** family: the whole latent function, common-effect coefficients included, is
  integrated out in closed form, :math:`y \sim N(h^\top b,\; K + \sigma^2 I)` with
  :math:`K = \sum_j K_j` (R&W eq. 2.39); NUTS (``nuts``) and the type-II fit (``map``) see only
  the hyperparameters. The model is a :class:`~bayes_gp.GPRegression` on the design matrix
  (:class:`FormulaRegression`).
* the other families: the latent function (with the coefficients) is integrated out by Laplace
  inside NUTS (``nuts``), or sampled jointly (``nuts_joint``); type-II (``map``), VI and EP as
  :class:`~bayes_gp.LatentGP` has them (:class:`FormulaLatentGP`).

Per-term predictions (:meth:`FormulaTerms.predict_terms`) are the posterior of each term's
contribution :math:`f_j` at new data: jointly Gaussian with :math:`f` a priori with
:math:`\operatorname{cov}(f_j(X_*), f(X)) = K_j(X_*, X)`, so given the hyperparameters

.. math::
   E[f_{j*}] = m_j(X_*) + K_j(X_*, X)\, C^{-1} (y - m(X)),\qquad
   V[f_{j*}] = k_j(X_*, X_*) - K_j(X_*, X)\, C^{-1} K_j(X, X_*)

(R&W eqs. 2.25–2.26 with the cross-covariance of the term; for a latent GP the Laplace
approximation, R&W eqs. 3.21 and 3.24), mixed over the NUTS draws.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from bayes_gp.formula.design import Design, as_frame
from bayes_gp.formula.engines import (
    COUNT_FAMILIES,
    FormulaLatentGP,
    FormulaMulticlass,
    FormulaRegression,
    engine_class,
)
from bayes_gp.formula.parse import ParsedFormula, parse_formula
from bayes_gp.latent.hurdle import HURDLES
from bayes_gp.latent.ordinal import Ordinal, ordinal_codes

__all__ = [
    "Model",
    "binary_response",
    "FormulaRegression",
    "FormulaLatentGP",
    "FormulaMulticlass",
    "FAMILIES",
    "formula_class",
    "engine_class",
    "engine_arguments",
]

#: The families and the engine each gets.
FAMILIES = (
    "gaussian",
    "student_t",
    "bernoulli",
    "binomial",
    "poisson",
    "negative_binomial",
    "categorical",
    "beta",
    "gamma",
    "zero_inflated_poisson",
    "zero_inflated_negative_binomial",
    "hurdle_poisson",
    "hurdle_negative_binomial",
    "weibull",
    "lognormal",
    "censored_gaussian",
    "ordinal",
)

#: The families with a censoring column (``censored=``; ``upper=`` for the Gaussian's intervals).
CENSORED_FAMILIES = ("weibull", "lognormal", "censored_gaussian")


def _check_response(family: str, parsed: ParsedFormula, y, trials) -> np.ndarray:
    """The response as floats, or a ``ValueError`` naming its column when the family cannot
    have it (negative or fractional counts, successes outside 0..trials, one class)."""
    name = parsed.response
    if parsed.event is not None and family != "bernoulli":
        raise ValueError(
            f"{name}[{parsed.event!r}] picks the event level of a bernoulli response; the "
            f"family is {family!r}: write the response as {name!r}"
        )
    if family == "ordinal":  # codes 0..K-1 or an ordered Categorical's codes
        try:
            codes, _labels = ordinal_codes(y)
            Ordinal(codes)
        except ValueError as err:
            raise ValueError(f"the response {name!r}: {err}") from None
        return codes
    if family == "bernoulli":
        return binary_response(y, name, parsed.event)[0]
    if family == "categorical":
        y = np.asarray(y)
        if np.unique(y).size < 2:
            raise ValueError(f"the response {name!r} has one class only: a categorical model "
                             "needs at least two")  # fmt: skip
        return y
    if pd.api.types.is_bool_dtype(y):
        y = y.astype(float)
    if not pd.api.types.is_numeric_dtype(y):
        raise ValueError(
            f"the response {name!r} is not numeric ({y.dtype}); a binary outcome of any two "
            "labels is family='bernoulli', more classes family='categorical'"
        )
    y = np.asarray(y, float)

    def bad(mask, what, values=y, column=name):
        rows = np.flatnonzero(mask)
        if rows.size:
            raise ValueError(
                f"the {family} family needs {what}; the column {column!r} has "
                f"{values[rows[0]]:g} in row {rows[0]}"
                + (f" (and {rows.size - 1} more rows)" if rows.size > 1 else "")
            )

    if family in COUNT_FAMILIES:
        bad((y < 0) | (y != np.round(y)), "non-negative whole counts")
        if family in HURDLES:  # zeros and positive counts, each identifying its own part
            try:
                HURDLES[family](y).check_training()
            except ValueError as err:
                raise ValueError(f"the response {name!r}: {err}") from None
    elif family == "beta":
        bad((y <= 0) | (y >= 1), "proportions strictly between 0 and 1")
    elif family == "gamma":
        bad(y <= 0, "positive values")
    elif family in ("weibull", "lognormal"):
        bad(y <= 0, "positive survival times")
    elif family == "binomial":
        t = parsed.trials
        bad((trials <= 0) | (trials != np.round(trials)), "positive whole trials", trials, t)
        bad((y < 0) | (y != np.round(y)), "non-negative whole successes")
        bad(y > trials, f"successes at most the trials ({t!r})")
    return y


def binary_response(y, name: str, event: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    r"""A bernoulli response of any two labels as 0/1 and its two classes, the event last.

    The event (the class whose probability :math:`P(y = \text{event}) = g^{-1}(f)` the model
    gives) is ``event`` where the formula names it (``y['level'] ~ ...``: formulae's subset
    notation, as in Bambi; a number is matched by its text, ``y['2']``), else the larger of the
    two sorted labels: :class:`~bayes_gp.GPClassifier`'s positive class (``np.unique``'s order:
    1 of 0/1, ``True`` of booleans, ``"yes"`` of ``"no"``/``"yes"``, a Categorical's values
    sorted, not its category order).

    Parameters
    ----------
    y : array_like (n,)
        The response column: two distinct labels (numbers, booleans, strings, categories).
    name : str
        The column's name, for the errors.
    event : str, optional
        The event level, as written in the formula.

    Returns
    -------
    t : ndarray (n,)
        1.0 where ``y`` is the event, else 0.0.
    classes : ndarray (2,)
        The other label, then the event (``classes[1]``, as ``GPClassifier.classes_``).

    Raises
    ------
    ValueError
        For a response with one label (the model needs both outcomes), three or more (family
        ``"categorical"`` models them), labels that cannot be ordered, or an ``event`` that is
        not one of the labels.
    """
    labels = np.asarray(getattr(y, "to_numpy", lambda: y)())
    try:
        classes = np.unique(labels)
    except TypeError:  # mixed kinds (numbers and text) have no order
        raise ValueError(
            f"the response {name!r} mixes numbers and text ({sorted(set(map(repr, labels)))[:4]}"
            "); give its two labels one type"
        ) from None
    if classes.size == 1:
        raise ValueError(
            f"the response {name!r} has one class only ({classes[0]!r} in every row): a "
            "bernoulli model needs both outcomes"
        )
    if classes.size > 2:
        shown = ", ".join(map(repr, classes[:5].tolist())) + (", ..." if classes.size > 5 else "")
        raise ValueError(
            f"the bernoulli family models two outcomes; the response {name!r} has "
            f"{classes.size} distinct labels ({shown}): use family='categorical' for more than "
            "two classes"
        )
    if event is not None:
        text = [str(c) for c in classes.tolist()]
        matches = [i for i, c in enumerate(text) if c == event]
        if not matches and labels.dtype.kind in "iuf":  # y['2'] of the numbers 1 and 2
            try:
                matches = [i for i, c in enumerate(classes.tolist()) if c == float(event)]
            except ValueError:
                matches = []
        if not matches:
            raise ValueError(
                f"{name}[{event!r}] names the event level {event!r}, which the response "
                f"{name!r} does not hold; its labels are {text}"
            )
        if matches[0] == 0:
            classes = classes[::-1]
    return (labels == classes[1]).astype(float), classes


def Model(formula: str, data, family: str = "gaussian", *, link: str | None = None,
          priors: Mapping[str, Any] | None = None, kernels: Mapping[str, Any] | None = None,
          jitter: float | None = None, structure: str | None = None, noise=None,
          learn_noise: bool = False, censored=None, upper=None):  # fmt: skip
    r"""A GP model written as a formula, with the engine chosen for it.

    Parameters
    ----------
    formula : str
        ``"y ~ x1 + C(region) + gp(t) + gp(t, by=site) + (1 | site) + (x1 | site)"``
        (:mod:`bayes_gp.formula.parse`); ``gp(t, region)`` with a factor among its inputs is
        one GP over (t, region), :math:`k_t(t, t')\,B_{cc'}` (exchangeable correlation, or
        ``cat="coregion"``; :mod:`bayes_gp.formula.terms`); ``p(successes, trials) ~ ...`` for
        the binomial
        family; ``offset(log(exposure))``.
    data : DataFrame or dict of columns
        Every column the formula names; NaN or infinite values are refused (with the rows).
    family : str
        One of :data:`FAMILIES`; ``"bernoulli"`` for two classes, its response any two labels
        (0/1, booleans, strings, categories; the event the larger label, or ``y['level']``:
        :func:`binary_response`), ``"categorical"`` (softmax) for more than two, its response
        any labels.
    link : str, optional
        ``bernoulli`` and ``ordinal``: ``"logit"`` (default) or ``"probit"``. The ordinal
        family's response is an ordered Categorical or codes 0..K-1; its formula intercept is
        dropped (the cut-points carry the location, :mod:`bayes_gp.latent.ordinal`).
    priors : dict, optional
        By the names :attr:`~FormulaTerms.prior_names` lists (``"gp(t).ls"``,
        ``"1|site.sigma"``, ``"x1"``, ``"sigma"``): a callable ``f(name)``, an unnamed
        ``pm.X.dist(...)`` or a number that fixes it. A common-effect coefficient takes an
        unnamed ``pm.Normal.dist`` or a number (it is integrated out in closed form).
    kernels : dict, optional
        Kernel objects named in ``gp(..., kernel=name)``.
    jitter : float, optional
        The engine's jitter (its default when omitted).
    structure : None, "lowrank", "grouped", "dense" or "quasiseparable"
        The gaussian family's exact likelihood. ``"lowrank"``: the Woodbury identity over the
        terms' finite bases when every ``gp()`` term has ``approx="hsgp"``, ``"vfe"`` or
        ``"fitc"`` (:mod:`bayes_gp.formula.lowrank`; the default then, and the only engine of
        VFE/FITC terms); ``"grouped"``: per-group factors and the
        Woodbury identity (:mod:`bayes_gp.formula.grouped`) when every term of
        ``gp(..., by=g)``, ``(1 | g)``, ``(x | g)`` uses one factor; ``"quasiseparable"``: the
        O(n) state-space one when the whole model lies on one input column with a state-space
        kernel (``y ~ gp(t, kernel="matern32")``); ``"dense"``: one Cholesky factor. ``None``
        (default): grouped when it costs under a quarter of the dense factor, quasiseparable for a long 1-D series
        (:class:`~bayes_gp.GPRegression`'s rule), dense otherwise.
    noise : str, array or float, optional
        The gaussian family's known per-observation noise: a column name of ``data`` (or an
        array of n values) holding each row's measurement standard deviation :math:`s_i`, so
        :math:`C = K + \operatorname{diag}(s^2)` on every engine (dense, grouped, low-rank,
        quasiseparable); a number fixes :math:`\sigma` (:class:`~bayes_gp.GPRegression`'s
        ``noise``).
    learn_noise : bool
        With an array ``noise``: learn a shared :math:`\sigma` as well,
        :math:`C = K + \operatorname{diag}(s^2) + \sigma^2 I`.
    censored : str or array, optional
        The censoring families' codes (:data:`CENSORED_FAMILIES`;
        :mod:`bayes_gp.latent.censored`): a column name of ``data`` or n values. ``"weibull"``,
        ``"lognormal"``: 0 an event at the response's time, 1 right-censored there;
        ``"censored_gaussian"``: 0 observed, -1 below the response (a detection limit), 1
        above it, 2 between it and ``upper``. Default: every row observed.
    upper : str or array, optional
        ``"censored_gaussian"``: the interval-censored rows' upper limits (NaN elsewhere).

    Returns
    -------
    FormulaRegression, FormulaLatentGP or FormulaMulticlass
        A model with the protocol of every bayes_gp model (``fit``, ``sample``, ``predict``,
        the report, ``fit_many``), plus ``predict(..., terms=[...])`` and ``terms_table()``.
    """
    cls, args, kwargs = engine_arguments(formula, data, family, link=link, priors=priors,
                                          kernels=kernels, jitter=jitter, structure=structure,
                                          noise=noise, learn_noise=learn_noise,
                                          censored=censored, upper=upper)  # fmt: skip
    return cls(*args, **kwargs)


def engine_arguments(formula, data, family, *, link=None, priors=None, kernels=None,
                      jitter=None, structure=None, noise=None, learn_noise=False,
                      censored=None, upper=None) -> tuple[type, tuple, dict]:  # fmt: skip
    """The engine class of :func:`Model` and its arguments, every check made."""
    if family not in FAMILIES:
        raise ValueError(f"`family` must be one of {list(FAMILIES)}, got {family!r}")
    parsed = parse_formula(formula)
    design = Design(parsed, data)
    frame = as_frame(data)
    y = frame[parsed.response]
    y = y if family == "ordinal" else y.to_numpy()  # an ordered Categorical keeps its order
    if parsed.trials is not None and family != "binomial":
        raise ValueError(
            f"p({parsed.response}, {parsed.trials}) is a binomial response; the family is "
            f"{family!r}"
        )
    if family == "binomial" and parsed.trials is None:
        raise ValueError("the binomial family needs the response p(successes, trials)")
    trials = frame[parsed.trials].to_numpy(float) if parsed.trials else None
    censored, upper = (_censoring_column(frame, role, value, family)
                       for role, value in (("censored", censored), ("upper", upper)))  # fmt: skip
    labels, y = y, _check_response(family, parsed, y, trials)
    if family == "gaussian":
        if link not in (None, "identity"):
            raise ValueError(f"the gaussian family has the identity link, not {link!r}")
        if isinstance(noise, str):
            if noise not in frame.columns:
                raise ValueError(
                    f"`noise` names the column {noise!r} of known standard deviations, which "
                    f"the data does not have (columns: {list(frame.columns)})"
                )
            noise = frame[noise].to_numpy(float)
        return (
            FormulaRegression,
            (parsed, design, y),
            dict(
                priors=priors,
                kernels=kernels,
                jitter=jitter,
                structure=structure,
                noise=noise,
                learn_noise=learn_noise,
            ),
        )
    if noise is not None or learn_noise:
        raise ValueError(
            f"`noise` and `learn_noise` apply to the gaussian family (known measurement "
            f"errors), not to the {family!r} family"
        )
    if structure is not None:
        raise ValueError("`structure` applies to the gaussian family's exact likelihood")
    if family == "categorical":
        if link is not None:
            raise ValueError(f"the categorical family has the softmax link, not {link!r}")
        return (
            FormulaMulticlass,
            (parsed, design, y),
            dict(priors=priors, kernels=kernels, jitter=jitter),
        )
    own = dict(censored=censored, upper=upper) if family in CENSORED_FAMILIES else {}
    if family == "bernoulli":  # its two labels, the event last
        own["classes"] = binary_response(labels, parsed.response, parsed.event)[1]
    return (
        FormulaLatentGP,
        (parsed, design, y, family),
        dict(link=link, priors=priors, kernels=kernels, jitter=jitter, trials=trials, **own),
    )


def _censoring_column(frame, role: str, value, family: str):
    """``censored=`` / ``upper=`` as values: a column of the data by name, or as given; a
    ``ValueError`` for a family without censoring or a column the data lacks."""
    if value is None:
        return None
    allowed = CENSORED_FAMILIES if role == "censored" else ("censored_gaussian",)
    if family not in allowed:
        raise ValueError(f"`{role}` applies to the {', '.join(allowed)} famil"
                         f"{'ies' if len(allowed) > 1 else 'y'}, not to {family!r}")  # fmt: skip
    if isinstance(value, str):
        if value not in frame.columns:
            raise ValueError(f"`{role}` names the column {value!r}, which the data does not "
                             f"have (columns: {list(frame.columns)})")  # fmt: skip
        return frame[value].to_numpy(float)
    return value


def formula_class(formula: str, family: str = "gaussian", **options) -> type:
    """A model class for :func:`~bayes_gp.fit_many` (``model=``) that fits ``formula`` to each
    group: ``fit_many(data, x=[...], y="Reaction", group="Subject",
    model=formula_class("Reaction ~ gp(Days)"))``, where ``x`` lists the formula's columns.
    Its instances are :func:`Model` (with ``options``: ``priors``, ``kernels``, ``jitter``,
    ``structure``, ``link``) of the group's rows; ``fit_many``'s ``kernel`` must stay at its
    default (the formula names the kernels).
    """
    parsed = parse_formula(formula)
    if family not in FAMILIES:
        raise ValueError(f"`family` must be one of {list(FAMILIES)}, got {family!r}")
    base = engine_class(family)

    def __init__(self, X, y, kernel="expquad", **model_kwargs):
        if kernel not in (None, "expquad"):
            raise ValueError(f"the formula {formula!r} names its kernels: leave `kernel` unset")
        if not isinstance(X, pd.DataFrame):
            raise TypeError(f"a formula model needs the columns by name (a DataFrame), got "
                            f"{type(X).__name__}")  # fmt: skip
        data = X.reset_index(drop=True).assign(**{parsed.response: np.asarray(y)})
        _, args, kwargs = engine_arguments(formula, data, family, **{**options, **model_kwargs})
        base.__init__(self, *args, **kwargs)

    name = f"Formula{base.__name__.removeprefix('Formula')}Groups"
    return type(name, (base,), {"__init__": __init__, "__module__": __name__,
                                "__doc__": f"{formula!r} ({family}) per group"})  # fmt: skip
