r"""The engines of formula models: the gaussian family on :class:`~bayes_gp.GPRegression`
(exact: dense, grouped, O(n) quasiseparable or low-rank), the other families on
:class:`~bayes_gp.LatentGP` and the categorical one on
:class:`~bayes_gp.MulticlassGPClassifier` (the latent function integrated out by Laplace
inside NUTS). :func:`engine_class` is the table of which family gets which."""

from __future__ import annotations

import dataclasses
import warnings
from typing import ClassVar

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from scipy.special import logit

from bayes_gp.classification.gpc import positive_indicator
from bayes_gp.classification.likelihoods import average_probability
from bayes_gp.classification.multiclass_model import MulticlassGPClassifier
from bayes_gp.formula.checks import term_error_checks
from bayes_gp.formula.covariance import FixedMean
from bayes_gp.formula.factored import FactoredLikelihood
from bayes_gp.formula.grouped import (
    GroupedLikelihood,
    dense_cost,
    distinct_rows,
    grouped_cost,
)
from bayes_gp.formula.lowrank import LowRankLikelihood, lowrank_cost
from bayes_gp.formula.terms import FormulaTerms, _HSGPTermView, _InducingTermView, _sum
from bayes_gp.inference.methods import EP
from bayes_gp.latent.model import LINK_SCALE, LatentGP
from bayes_gp.latent.predictive import joint_conditional
from bayes_gp.linalg import plus_diagonal
from bayes_gp.predictive import (
    Prediction,
    binary_scores,
    factorize,
)
from bayes_gp.predictive import predict as gaussian_predict
from bayes_gp.protocol import HeldOutPredictive, is_nuts
from bayes_gp.regression.gpr import GPRegression
from bayes_gp.solvers.exact import dense_memory_bytes, dense_memory_limit

__all__ = [
    "FormulaRegression",
    "FormulaLatentGP",
    "FormulaMulticlass",
    "engine_class",
    "engine_methods",
]

#: Up to this many rows the grouped engine's per-term predictions use one dense factor of
#: :math:`C` per draw (:math:`O(n^3)`) rather than its Woodbury factor: a term's posterior
#: variance is its prior variance minus :math:`k^\top C^{-1} k`, and for common effects under
#: wide priors the Woodbury form's :math:`C^{-1}` loses the digits that difference needs.
#: Measured (tests/formula/test_reference.py's REML check, sleepstudy, coefficient priors
#: N(0, 1e4^2)): the Days coefficient's sd 3.666 by Woodbury, 1.559566 by the dense factor,
#: 1.559562 by statsmodels' REML.
TERMS_DENSE_MAX_N = 1000


class FormulaRegression(FormulaTerms, GPRegression):
    """A gaussian-family formula model: every term integrated out in closed form (the exact
    marginal likelihood of the summed covariance); see :func:`Model`."""

    _family_params = ("sigma",)

    def __init__(self, parsed, design, y, *, priors=None, kernels=None, jitter=None,
                 structure=None, noise=None, learn_noise=False):  # fmt: skip
        priors = dict(priors or {})
        loc, s = float(np.mean(y)), float(np.std(y)) or 1.0
        self._setup_terms(parsed, design, "gaussian", priors, kernels, loc, s)
        if structure not in (None, "grouped", "lowrank", "dense", "quasiseparable"):
            raise ValueError(
                "`structure` must be None, 'grouped', 'lowrank', 'dense' or 'quasiseparable', "
                f"got {structure!r}"
            )
        factors = [t.name for t in parsed.gp_terms if design.gp_factor[t.name]]
        if structure == "quasiseparable" and factors:
            raise ValueError(
                f"structure='quasiseparable' runs a state-space recursion along one input "
                f"column; the terms {factors} also take a factor input (its levels' code "
                "column): use structure='dense' (or None)"
            )
        if structure is None:
            self._approximate_if_too_large()
        self._lowrank = self._lowrank_plan(structure)
        self._lowrank_asked = structure == "lowrank"
        self._grouping = None if self._lowrank else self._grouped_plan(structure)
        if self._lowrank or self._grouping is not None:
            structure = "dense"  # GPRegression's own choice is not asked: _build swaps it
        options = {} if jitter is None else {"jitter": jitter}
        super().__init__(
            design.frame(), y, self._term_kernel, mean=self._fixed_mean,
            priors={k: v for k, v in priors.items() if k == "sigma"}, structure=structure,
            noise=noise, learn_noise=learn_noise, **options,
        )  # fmt: skip

    # ------------------------------------------------------------ grouped engine
    def _grouped_terms(self) -> tuple[list[str], str | None]:
        """The terms that couple rows only within a group, and their one factor (``None``
        when there are none or they use several factors)."""
        names, factors = [], set()
        for t in self.parsed.gp_terms:
            if t.by:
                names.append(t.name)
                factors.add(t.by)
        for g in self.parsed.group_terms:
            names.append(g.name)
            factors.add(":".join(g.factor))
        return names, (factors.pop() if len(factors) == 1 else None)

    def _grouped_plan(self, structure):
        """``(factor, grouped terms, global columns)`` when the grouped engine is used
        (:mod:`bayes_gp.formula.grouped`): asked (``structure="grouped"``) or, by default,
        when its cost is below a quarter of the dense Cholesky's. (Until its log density became
        one Op, :class:`~bayes_gp.solvers.grouped.GroupedGPLogp`, it also waited for n = 200:
        the batched graph compiled for 74-120 s on a fresh machine.)"""
        names, factor = self._grouped_terms()
        if structure not in (None, "grouped"):
            return None
        if factor is None:
            if structure == "grouped":
                raise ValueError(
                    f"structure='grouped' needs group terms (gp(..., by=g), (1 | g), (x | g)) "
                    f"that all use one factor; {self.formula!r} has "
                    + ("none" if not names else f"several factors among {names}")
                )
            return None
        cols = [c for t in self.parsed.gp_terms if not t.by for c in self._gp_specs[t.name][1]]
        cols += [self.design.factor_column(f) for t in self.parsed.gp_terms
                 if not t.by and (f := self.design.gp_factor[t.name])]  # fmt: skip
        cols = sorted(set(cols) | set(self.design.fixed_columns()))
        X = self.design.X
        codes = X[:, self.design.factor_column(factor)]
        sizes = np.unique(codes, return_counts=True)[1].tolist()
        has_global = bool(cols) or self._intercept is not None
        m = len(distinct_rows(X, cols)[0]) if has_global else 0
        n = X.shape[0]
        cheap = grouped_cost(sizes, m) < dense_cost(n) / 4.0
        if structure is None and not cheap:
            return None
        return factor, names, cols

    def _approximate_if_too_large(self) -> None:
        """Where neither the grouped nor the O(n) engine applies and the dense one would not fit
        in memory (:func:`~bayes_gp.solvers.exact.check_dense_memory`), every exact GP term
        takes its HSGP approximation (m and c by the rule), with a warning: the model that fits
        rather than a ``MemoryError``."""
        n = self.design.n
        if dense_memory_bytes(n) <= dense_memory_limit() or self._grouped_plan(None) is not None:
            return
        exact = [t for t in self.parsed.gp_terms if t.approx is None]
        if any(self.design.gp_factor[t.name] for t in exact):
            return  # a factor input has no HSGP basis: the dense engine's memory check says so
        state_space = {"matern12", "matern32", "matern52", "exponential"}
        one_column = len(self.design.names) == 1
        if not exact or (one_column and all(
                set(self._gp_specs[t.name][0].name.replace(" ", "").replace("*", "+")
                    .split("+")) <= state_space for t in exact)):  # fmt: skip
            return  # HSGP already, or the O(n) state-space engine takes it
        terms = [dataclasses.replace(t, approx="hsgp") if t.approx is None else t
                 for t in self.parsed.gp_terms]  # fmt: skip
        self.parsed = dataclasses.replace(self.parsed, gp_terms=tuple(terms))
        warnings.warn(
            f"n = {n}: the dense exact GP would need {dense_memory_bytes(n) / 2**30:.1f} GiB per "
            f"log-density gradient, over this machine's limit; the terms "
            f"{[t.name for t in exact]} use their HSGP approximation (m and c by the "
            "Riutort-Mayol rule, checked after the fit) in the low-rank engine. Give "
            "gp(..., approx='hsgp', m=..., c=...) to choose the basis, or group the data "
            "(gp(t, by=g), (1 | g)) for the exact grouped engine",
            UserWarning,
            stacklevel=4,
        )

    def _lowrank_plan(self, structure) -> bool:
        """Whether the low-rank engine is used (:mod:`bayes_gp.formula.lowrank`): every GP term
        has ``approx="hsgp"`` (the user asked for finite bases), unless ``structure`` says
        otherwise."""
        gps = self.parsed.gp_terms
        possible = bool(gps) and all(t.approx is not None for t in gps)
        if structure == "lowrank" and not possible:
            raise ValueError(
                "structure='lowrank' needs every gp() term to be a finite basis "
                "(approx='hsgp', 'vfe' or 'fitc'); exact GP terms have no low-rank form"
            )
        inducing = [t.name for t in gps if t.approx in ("vfe", "fitc")]
        if inducing and not possible:
            exact = [t.name for t in gps if t.approx is None]
            raise ValueError(
                f"{inducing}: a VFE/FITC term is one basis of the low-rank engine, which needs "
                f"every gp() term approximated; {exact} are exact GP terms, so the model is a "
                "dense O(n³) one and the inducing inputs would save nothing: give them "
                "approx='hsgp', 'vfe' or 'fitc' too, or drop approx= for the exact model"
            )
        if inducing and structure not in (None, "lowrank"):
            raise ValueError(
                f"{inducing}: VFE/FITC terms are bases of the low-rank engine; "
                f"structure={structure!r} has no place for them (use structure=None)"
            )
        return possible and structure in (None, "lowrank")

    def _rank(self) -> int:
        """The width of the low-rank engine's basis: each HSGP term's functions (per level
        with ``by=``), each group effect's levels, the intercept and the coefficients."""
        X = self.design.X
        levels = {
            f: np.unique(X[:, self.design.factor_column(f)]).size for f in self.design.factors
        }
        r = sum(self._basis_width(t) * (levels[t.by] if t.by else 1)
                for t in self.parsed.gp_terms)  # fmt: skip
        r += sum(levels[":".join(g.factor)] for g in self.parsed.group_terms)
        return r + (1 if self._intercept else 0) + len(self.design.fixed_labels)

    def _basis_width(self, t) -> int:
        """An approximated GP term's functions per level: HSGP's, or the inducing inputs."""
        if t.name in self._inducing:
            return len(self._inducing[t.name])
        return int(np.prod(self._hsgp[t.name][0]))

    def _build(self) -> pm.Model:
        if self._grouping is None and not self._lowrank:
            return super()._build()
        coords = {"feature": self.feature_names, "obs": np.arange(self.X.shape[0])}
        with pm.Model(coords=coords) as model:
            # the terms' kernel (a callable: no hyperparameters of the spec's own), the mean,
            # the noise and the known noise variances, as GPRegression declares them
            _, cov, mean_func, sigma, known = self._declare_gp()
            covs = self._term_covs[id(model)]
            self.quasiseparable = False
            # bases wider than the data: one dense factor is cheaper (built again below)
            n = self.X.shape[0]
            # (not with inducing-input terms: their dense covariance is the exact GP's)
            wide = (self._lowrank and not self._lowrank_asked and self._rank() >= n
                    and dense_memory_bytes(n) <= dense_memory_limit()
                    and not self._inducing)  # fmt: skip
            if self._lowrank and not wide:
                feats = self._term_features[id(model)]
                F = pt.concatenate([feats[t] for t in covs], axis=1)
                self.marginal = LowRankLikelihood(
                    "y", self.X, self.y, F, cov, mean_func, sigma, self.jitter_tensor, "obs",
                    **known, **self._inducing_residuals(model),
                )  # fmt: skip
            elif not self._lowrank:
                factor, names, cols = self._grouping
                block = _sum([covs[t] for t in names])
                glob = _sum([c for t, c in covs.items() if t not in names])
                self.marginal = GroupedLikelihood(
                    "y", self.X, self.y, block, glob, cov, mean_func, sigma, self.jitter_tensor,
                    "obs", group_column=self.design.factor_column(factor), global_columns=cols,
                    **known,
                )  # fmt: skip
        if wide:  # outside the discarded model's context
            self._lowrank = False
            self._grouping = self._grouped_plan(None)
            return self._build()
        self._cov, self._mean_func, self._sigma = cov, mean_func, pt.as_tensor_variable(sigma)
        return model

    def _inducing_residuals(self, model) -> dict:
        """The summed :math:`\\operatorname{diag}(K - Q)` of the FITC terms and of the VFE
        terms at the training rows (:mod:`bayes_gp.formula.lowrank`), as its keywords."""
        res = self._term_residuals[id(model)]
        out = {}
        for kind in ("fitc", "vfe"):
            parts = [res[t.name] for t in self.parsed.gp_terms if t.approx == kind]
            if parts:
                out[f"{kind}_residual"] = _sum(parts)
        return out

    @property
    def _train_inputs(self) -> np.ndarray:
        return self.X

    def _term_factors(self, fit, max_draws):
        draws = [self._values(fit.params)] if not is_nuts(fit) else self._draws(fit, max_draws)
        dense_terms = (isinstance(self.marginal, GroupedLikelihood)
                       and self.X.shape[0] <= TERMS_DENSE_MAX_N)  # fmt: skip
        for values in draws:
            if isinstance(self.marginal, FactoredLikelihood) and not dense_terms:
                yield values, self.marginal.solver(values)
                continue
            fac = self.marginal.factor(values)[1] if self.marginal.dense else self._dense(values)
            yield values, (lambda Ks, kss, fac=fac: gaussian_predict(fac, Ks, kss))

    def _dense(self, values):
        """The dense factor of :math:`C` where the marginal likelihood in use has none (the
        O(n) quasiseparable one): per-term predictions need each term's cross-covariance
        against :math:`C^{-1}`, :math:`O(n^3)` once per draw."""

        def build(_):
            Xt = pt.as_tensor_variable(self.X)
            noise = pt.square(self._sigma) + self.jitter_tensor
            if self.known_noise_var is not None:
                noise = noise + pt.as_tensor_variable(self.known_noise_var)
            return [self._mean(Xt), plus_diagonal(self._cov(Xt), noise)]

        m, C = self._compiled("dense_train", build)(*values, np.zeros((0, self.X.shape[1])))
        return factorize(C, self.y - m)

    def predict(self, X_new, fit, diag: bool = True, include_noise: bool = False,
                terms=None, max_draws: int = 500, *,
                noise_new=None) -> Prediction | dict[str, Prediction]:  # fmt: skip
        """Predictions at new data (a DataFrame with the formula's columns, or a design matrix):
        of the whole latent function (of :math:`y_*` with ``include_noise``), or with
        ``terms=`` of each named term (:meth:`predict_terms`); NUTS fits mix up to
        ``max_draws`` posterior draws (the same draws for the whole and for the terms). With
        known per-observation noise (``noise=``), ``include_noise`` and ``noise_new`` follow
        :meth:`GPRegression.predict <bayes_gp.GPRegression.predict>`: ``noise_new`` the new
        rows' standard deviations (a number, an array, or a column name of ``X_new``)."""
        if terms is not None:
            if noise_new is not None:
                raise ValueError("`noise_new` applies to y_*, not to the terms' predictions")
            return self.predict_terms(X_new, fit, terms, max_draws=max_draws)
        if isinstance(noise_new, str):
            if not hasattr(X_new, "columns") or noise_new not in X_new.columns:
                raise ValueError(f"`noise_new` names the column {noise_new!r}, which the new "
                                 "data does not have")  # fmt: skip
            noise_new = np.asarray(X_new[noise_new], dtype=float)
        Xn = self._design_of(X_new)
        if is_nuts(fit) and diag:
            Xc = self._check_new(Xn)
            noise_var = self._noise_at(Xc, include_noise, noise_new)
            return self._predict_mixture(Xc, fit, include_noise, max_draws, noise_var=noise_var)
        return super().predict(Xn, fit, diag, include_noise, noise_new=noise_new)

    def predict_derivative(self, X_new, fit, order: int = 1, dim: int | str = 0,
                           diag: bool = True, *, terms=None, max_draws: int = 500,
                           random_seed: int = 0):  # fmt: skip
        r"""The posterior of :math:`\partial f / \partial x_d` (``order=1``) or
        :math:`\partial^2 f / \partial x_d^2` (``order=2``) at new data (a DataFrame with
        the formula's columns, or a design matrix): of the whole latent function
        (:meth:`GPRegression.predict_derivative <bayes_gp.GPRegression.predict_derivative>`),
        or with ``terms=`` of each named term or sum of terms (``terms=["gp(t)"]``: the rate of
        change of the shared trend alone, without the groups' deviations), under a type-II fit
        or the mixture over NUTS draws (:mod:`bayes_gp.formula.derivatives`). ``dim`` is a
        column of the formula (``"t"``) or a design-column index; the terms' kernels must be
        differentiable that often (Matérn 1/2 is not; R&W §4.2.1)."""
        Xn = self._design_of(X_new)
        d = self._check_dim(dim)
        if terms is None:
            return super().predict_derivative(Xn, fit, order, d, diag, max_draws=max_draws,
                                              random_seed=random_seed)  # fmt: skip
        if not diag:
            raise ValueError("per-term derivatives come with their variances (diag=True)")
        from bayes_gp.formula.derivatives import predict_term_derivatives

        order = self._check_order(order)
        return predict_term_derivatives(self, self._check_new(Xn), fit,
                                        self._check_terms(terms), d, order, max_draws)  # fmt: skip

    def approximation_checks(self, fit) -> list:
        """Post-fit checks of each approximated term at ``fit``, named by the term: an HSGP
        term's resolution against the fitted length-scales and the width of its box
        (Riutort-Mayol et al. 2022; :mod:`bayes_gp.solvers.approx_checks`), a VFE/FITC term's
        coverage of the inputs by its inducing inputs, and every such term's posterior against
        the exact twin's on a subsample (:mod:`bayes_gp.formula.checks`). A model without
        approximated terms needs none."""
        from bayes_gp.solvers.approx_checks import hsgp_basis_checks, inducing_coverage_check

        covs = self._term_covs[id(self.model)]
        out = []
        for t in self.parsed.gp_terms:
            if t.name in self._inducing:
                check = inducing_coverage_check(self, _InducingTermView(self, t, covs[t.name]), fit)
                advice = check.advice.replace(
                    "approx_options={'n_inducing': ", f"{t.name[:-1]}, approx={t.approx!r}, m="
                ).replace("}", ")")  # fmt: skip
                out.append(dataclasses.replace(check, name=f"{check.name}: {t.name}",
                                               advice=advice))  # fmt: skip
                continue
            if t.name not in self._hsgp:
                continue
            term = _HSGPTermView(self, t, covs[t.name])
            for check in hsgp_basis_checks(self, term, fit):
                advice = check.advice.replace(
                    "approx_options={", f"{t.name[:-1]}, approx='hsgp', ").replace(
                    "'m': ", "m=").replace("'c': ", "c=").replace("}", ")")  # fmt: skip
                out.append(dataclasses.replace(check, name=f"{check.name}: {t.name}",
                                               advice=advice))  # fmt: skip
        return out + term_error_checks(self, fit)

    def describe_engine(self) -> str:
        n = self.X.shape[0]
        if isinstance(self.marginal, LowRankLikelihood):
            r = self._rank()
            kinds = {t.approx for t in self.parsed.gp_terms}
            bases = "".join(f"{k} terms, " for k, on in (
                ("HSGP", "hsgp" in kinds), ("FITC", "fitc" in kinds), ("VFE", "vfe" in kinds))
                if on)  # fmt: skip
            what = {frozenset({"fitc"}): "FITC's marginal likelihood",
                    frozenset({"vfe"}): "Titsias's variational bound (VFE)",
                    frozenset({"vfe", "fitc"}): "FITC's marginal likelihood with Titsias's "
                    "trace term of the VFE terms"}.get(frozenset(kinds & {"vfe", "fitc"}),
                                                       "exact marginal likelihood")  # fmt: skip
            return (
                f"{what} of the finite bases (every term low-rank: {bases}group indicators, "
                f"coefficients; rank r = {r}) by the Woodbury identity "
                f"(O(n r² + r³) = {lowrank_cost(n, r):.2g} flops per log density, dense "
                f"{dense_cost(n):.2g}): the basis weights integrated out, NUTS sees "
                f"{len(self.hyperparameters)} hyperparameters"
            )
        if isinstance(self.marginal, GroupedLikelihood):
            g = self.marginal
            return (
                f"exact marginal likelihood by groups: {len(g.sizes)} blocks of the grouped terms "
                f"(at most {max(g.sizes)} rows) and the Woodbury identity over the other terms' "
                f"{g.m} distinct rows (O(G n³ + N m² + m³) = "
                f"{grouped_cost(g.sizes, g.m):.2g} flops per log density, dense "
                f"{dense_cost(n):.2g}): every term and coefficient integrated out, NUTS sees "
                f"{len(self.hyperparameters)} hyperparameters"
            )
        if self.quasiseparable:
            return (
                f"exact marginal likelihood in O(n) (quasiseparable state-space recursion over "
                f"the one input column, n = {n}): every term integrated out, NUTS sees "
                f"{len(self.hyperparameters)} hyperparameters"
            )
        return (
            f"exact marginal likelihood, dense Cholesky of the {n}×{n} summed covariance "
            f"(O(n³) = {n**3 / 3:.2g} flops per log density): every term and coefficient "
            f"integrated out, NUTS sees {len(self.hyperparameters)} hyperparameters"
        )


#: The families whose response is a count (log link, ``offset(log(exposure))``).
COUNT_FAMILIES = (
    "poisson", "negative_binomial", "zero_inflated_poisson", "zero_inflated_negative_binomial",
    "hurdle_poisson", "hurdle_negative_binomial",
)  # fmt: skip
#: A latent family's own parameters (:class:`~bayes_gp.LatentGP`'s names; ``priors=`` by them).
FAMILY_PARAMS = {
    "student_t": ("sigma", "nu"),
    "negative_binomial": ("dispersion",),
    "beta": ("precision",),
    "gamma": ("shape",),
    "zero_inflated_poisson": ("zero_inflation",),
    "zero_inflated_negative_binomial": ("dispersion", "zero_inflation"),
    "hurdle_poisson": ("zero_probability",),
    "hurdle_negative_binomial": ("dispersion", "zero_probability"),
    "weibull": ("shape",),
    "lognormal": ("sigma",),
    "censored_gaussian": ("sigma",),
    "ordinal": ("cutpoints",),
}


class FormulaLatentGP(FormulaTerms, LatentGP):
    r"""A formula model of a non-Gaussian family: the latent function (GP terms, group effects
    and coefficients) integrated out by Laplace inside NUTS; see :func:`Model`.

    The bernoulli family is a binary classifier of any two labels (``classes``, the event
    last: :func:`~bayes_gp.formula.model.binary_response`), with
    :class:`~bayes_gp.GPClassifier`'s outputs: :meth:`predict_proba` the probability of the
    event, :meth:`predict_labels` the label, the prediction columns ``p_positive``,
    ``latent_mean``, ``latent_sd``, ``predicted`` and its held-out scores; with the probit
    link it also fits by expectation propagation, ``fit("ep")`` (R&W §3.6: LatentGP's
    :meth:`~bayes_gp.LatentGP.fit_ep`, :mod:`bayes_gp.latent.ep`).
    """

    #: ``fit(method)``: LatentGP's methods and EP (the bernoulli family with the probit link;
    #: :meth:`_check_ep` refuses the others). An instance lists the ones it has in
    #: ``fit_methods`` (:func:`engine_methods`).
    _FITS: ClassVar[dict[str, tuple[str, dict]]] = {**LatentGP._FITS, EP: ("fit_ep", {})}

    def __init__(self, parsed, design, y, family, *, link=None, priors=None, kernels=None,
                 jitter=None, trials=None, censored=None, upper=None, classes=None):  # fmt: skip
        priors = dict(priors or {})
        if family == "bernoulli":
            self.classes_ = np.array([0.0, 1.0]) if classes is None else np.asarray(classes)
            if self.classes_.shape != (2,):
                raise ValueError(f"`classes` holds the two labels (the event last), got "
                                 f"{self.classes_.tolist()}")  # fmt: skip
        elif classes is not None:
            raise ValueError(f"`classes` (the two labels) goes with the bernoulli family, not "
                             f"{family!r}")  # fmt: skip
        self.fit_methods = engine_methods(family, link)
        self._family_params = FAMILY_PARAMS.get(family, ())
        if family == "ordinal" and "Intercept" in priors:
            raise ValueError(
                "the ordinal family has no intercept (the cut-points carry the location; the "
                "two are not identified together): remove priors['Intercept']"
            )
        off = design.X[:, design.offset_column] if design.offset_column is not None else 0.0
        y = np.asarray(y, float)
        if family in COUNT_FAMILIES:  # a hurdle's f: the positive counts
            rows = y > 0 if family.startswith("hurdle_") else np.ones(y.shape, bool)
            loc = float(np.log((y.sum() + 0.5) / np.sum((np.exp(off) * np.ones_like(y))[rows])))
            s = LINK_SCALE
        elif family == "binomial":
            loc, s = float(logit((y.sum() + 0.5) / (np.sum(trials) + 1.0))), LINK_SCALE
        elif family in ("bernoulli", "ordinal"):
            loc, s = 0.0, LINK_SCALE
        elif family == "beta":  # logit of the mean proportion
            loc, s = float(logit(np.mean(y))), LINK_SCALE
        elif family in ("gamma", "weibull", "lognormal"):  # log mean, relative to the offset
            loc, s = float(np.log(np.mean(y)) - np.mean(off)), LINK_SCALE
        else:  # student_t
            loc, s = float(np.mean(y)), float(np.std(y)) or 1.0
        self._setup_terms(parsed, design, family, priors, kernels, loc, s)
        if family == "ordinal" and self._intercept is not None:
            # the formula's intercept is dropped: a shift of f and of every cut-point together
            # leaves the likelihood unchanged (bayes_gp.latent.ordinal), as brms's cumulative
            self._intercept = None
            self._fixed_mean = FixedMean(design.fixed_columns(), self._fixed_b,
                                         design.offset_column, 0.0)  # fmt: skip
        super().__init__(
            design.frame(), y, self._term_kernel, family, link=link, mean=self._fixed_mean,
            priors={k: v for k, v in priors.items() if k in self._family_params},
            trials=trials, jitter=jitter, censored=censored, upper=upper,
        )  # fmt: skip

    @property
    def _train_inputs(self) -> np.ndarray:
        return self._kernel_inputs

    def _term_factors(self, fit, max_draws):
        draws, mode = self._draw_values(fit, max_draws)
        for values, f in draws:
            K, m, phi = self._train(values)
            if mode:
                factor = self._factor(K, m, phi, fit, f)

                def at(Ks, kss, factor=factor):
                    return factor.predict(Ks, kss, np.zeros(Ks.shape[1]))
            else:  # a joint draw of f: the conditional given it
                at = joint_conditional(K, f - m)

            yield values, at

    def predict(self, X_new, fit, *, terms=None, size=None, max_draws: int = 200,
                random_seed: int = 0):  # fmt: skip
        """Predictions at new data (a DataFrame with the formula's columns, or a design
        matrix): of the response (``mean``, 94% band) and of the latent function
        (``latent_mean``, ``latent_sd``), or with ``terms=`` of each named term on the link
        scale (:meth:`predict_terms`)."""
        if terms is not None:
            return self.predict_terms(X_new, fit, terms, max_draws=max_draws,
                                      random_seed=random_seed)  # fmt: skip
        return super().predict(self._design_of(X_new), fit, size=size, max_draws=max_draws,
                               random_seed=random_seed)  # fmt: skip

    def predict_proba(self, X_new, fit, *, max_draws: int | None = None) -> np.ndarray:
        """At new data (a DataFrame with the formula's columns, or a design matrix): the
        bernoulli family's probability of the event ``classes_[1]``, ``(m,)``
        (:meth:`GPClassifier.predict_proba <bayes_gp.GPClassifier.predict_proba>`, up to 500
        NUTS draws), the ordinal family's category probabilities, ``(m, K)``
        (:meth:`LatentGP.predict_proba <bayes_gp.LatentGP.predict_proba>`, up to 200)."""
        if self.family == "bernoulli":
            Xn = self._check_new(self._design_of(X_new))
            return self._event_probability(Xn, fit, 500 if max_draws is None else max_draws)
        return super().predict_proba(self._design_of(X_new), fit,
                                     max_draws=200 if max_draws is None else max_draws)  # fmt: skip

    # -------------------------------------------------- bernoulli: a classifier of two labels
    def _check_ep(self) -> None:
        """EP's tilted moments are closed-form for the bernoulli likelihood with the probit
        link only (:mod:`bayes_gp.latent.ep`): any other family or link is refused here,
        before the EP evidence is built."""
        if self.family != "bernoulli" or self.link != "probit":
            raise ValueError(
                f"fit('ep') is expectation propagation for family='bernoulli' with "
                f"link='probit' (its tilted moments are closed-form, R&W §3.6); this model is "
                f"family={self.family!r} with the {self.link} link: use link='probit' for a "
                f"binary outcome, or fit by {', '.join(map(repr, LatentGP.fit_methods))}"
            )

    def _event_probability(self, Xn, fit, max_draws: int) -> np.ndarray:
        r""":math:`P(y_* = \text{event})`, GPClassifier's average over the draws of
        :math:`\int g^{-1}(f_*) q(f_*) df_*`
        (:func:`~bayes_gp.classification.likelihoods.average_probability`)."""
        means, variances, _ = self._latent_moments(Xn, fit, max_draws)
        return average_probability(self.link, means, variances).mean(axis=0)

    def predict_labels(self, X_new, fit, *, max_draws: int = 500) -> np.ndarray:
        """The bernoulli family's predicted labels at new data: the event ``classes_[1]``
        where its probability (:meth:`predict_proba`) exceeds 1/2, else ``classes_[0]``
        (:meth:`GPClassifier.predict <bayes_gp.GPClassifier.predict>`)."""
        p = self.predict_proba(X_new, fit, max_draws=max_draws)
        return np.where(p > 0.5, self.classes_[1], self.classes_[0])

    def prediction_columns(self, X_new, fit) -> dict[str, np.ndarray]:
        """The bernoulli family's columns are GPClassifier's: the probability of the event
        ``classes_[1]`` (``p_positive``), the latent mean and sd, and the predicted label;
        the other families' LatentGP's."""
        if self.family != "bernoulli":
            return super().prediction_columns(X_new, fit)
        Xn = self._check_new(self._design_of(X_new))
        means, variances, _ = self._latent_moments(Xn, fit, 500)
        p = average_probability(self.link, means, variances).mean(axis=0)
        sd = np.sqrt(variances.mean(axis=0) + means.var(axis=0))
        predicted = np.where(p > 0.5, self.classes_[1], self.classes_[0])
        return {"p_positive": p, "latent_mean": means.mean(axis=0), "latent_sd": sd,
                "predicted": predicted}  # fmt: skip

    def _event_indicator(self, y) -> np.ndarray:
        """Held-out labels ``y`` as 1.0 for the event ``classes_[1]`` and 0.0 for the other
        (GPClassifier's :func:`~bayes_gp.classification.gpc.positive_indicator`)."""
        return positive_indicator(y, self.classes_)

    def scores(self, y, columns) -> dict[str, float]:
        """The bernoulli family: accuracy, log loss and Brier score of ``p_positive`` for the
        labels ``y`` (GPClassifier's); the other families: LatentGP's."""
        if self.family != "bernoulli":
            return super().scores(y, columns)
        return binary_scores(self._event_indicator(y), columns["p_positive"])

    def held_out_predictive(self, X_new, y, fit, *, size=None) -> HeldOutPredictive:
        """The bernoulli family: the probability of the event at ``X_new`` beside the held-out
        labels ``y`` (any of the two training labels); the other families: LatentGP's."""
        if self.family != "bernoulli":
            return super().held_out_predictive(X_new, y, fit, size=size)
        if size is not None:
            raise ValueError("a binary outcome has no exposure or trials (`size`)")
        t = self._event_indicator(y)
        p = self._event_probability(self._check_new(self._design_of(X_new)), fit, 200)
        if p.shape[0] != t.shape[0]:
            raise ValueError(f"`X_new` has {p.shape[0]} rows but held-out `y` has {t.size}")
        return HeldOutPredictive("probability", probability=p, outcome=t)

    def bands(self, grid, fit, *, along: int | str = 0):
        """LatentGP's bands; the bernoulli family's name its event (``positive``)."""
        bands = super().bands(grid, fit, along=along)
        if self.family != "bernoulli":
            return bands
        return dataclasses.replace(bands, positive=str(self.classes_[1]))

    def describe(self) -> list[tuple[str, object]]:
        rows = super().describe()
        if self.family == "bernoulli":
            other, event = self.classes_
            rows.insert(2, ("event", f"{event!r}: the model gives P(y = {event!r}); the other "
                                     f"label is {other!r}"))  # fmt: skip
        return rows

    def describe_engine(self) -> str:
        n = self.X.shape[0]
        return (
            f"{self.family} likelihood: the latent function of all terms (n = {n}) integrated "
            f"out by Laplace inside NUTS (Newton's method on the {n}×{n} summed covariance per "
            f"log density); NUTS sees {len(self.hyperparameters)} hyperparameters; joint latent "
            "NUTS with method='nuts_joint'"
        )


class FormulaMulticlass(FormulaTerms, MulticlassGPClassifier):
    r"""A categorical-family formula model (softmax over one latent function per class, every
    class with the formula's covariance and shared hyperparameters): the C latent functions
    integrated out by Laplace inside NUTS (R&W §3.5, Algorithm 3.3), joint latent NUTS, or the
    type-II fit; see :func:`Model`. The intercept is per class (its constant covariance); the
    classes' prior means are zero."""

    _family_params = ()

    def __init__(self, parsed, design, y, *, priors=None, kernels=None, jitter=None):
        priors = dict(priors or {})
        if design.offset_column is not None:
            raise ValueError("an offset() applies to one latent function, not to a categorical "
                             "family's C of them")  # fmt: skip
        self._setup_terms(parsed, design, "categorical", priors, kernels, 0.0, LINK_SCALE)
        if self._intercept is not None:  # the softmax is invariant to a common shift
            self._intercept = (0.0, self._intercept[1])
        self._fixed_b = np.zeros_like(self._fixed_b)
        super().__init__(design.frame(), y, self._term_kernel, shared=True, jitter=jitter)

    @property
    def _train_inputs(self) -> np.ndarray:
        return self.X

    def predict_terms(self, new_data, fit, terms=None, **options):
        raise ValueError(
            "per-term predictions of a categorical model are not available: each term has one "
            "contribution per class, coupled through the softmax; predict() gives the class "
            "probabilities"
        )

    def predict(self, X_new, fit, *, terms=None):
        """The most probable class at each row of new data (a DataFrame with the formula's
        columns, or a design matrix); :meth:`predict_proba` gives the probabilities."""
        if terms is not None:
            return self.predict_terms(X_new, fit, terms)
        return super().predict(self._design_of(X_new), fit)

    def predict_proba(self, X_new, fit, **options) -> np.ndarray:
        """:math:`P(y_* = c)` at new data, ``(m, C)``
        (:meth:`MulticlassGPClassifier.predict_proba`)."""
        return super().predict_proba(self._design_of(X_new), fit, **options)

    def describe_engine(self) -> str:
        n, C = self.X.shape[0], self.n_classes
        return (
            f"softmax over {C} latent functions (one per class, the formula's covariance, shared "
            f"hyperparameters; n = {n}): integrated out by Laplace inside NUTS (Newton's method "
            f"on the {C}n-dimensional mode); NUTS sees {len(self.hyperparameters)} "
            "hyperparameters; joint latent NUTS with method='nuts_joint'"
        )


def engine_methods(family: str, link: str | None = None) -> tuple[str, ...]:
    """The fit methods of a formula model of ``family`` and ``link``: its engine class's, and
    ``"ep"`` for the bernoulli family with the probit link (:class:`FormulaLatentGP`)."""
    methods = engine_class(family).fit_methods
    return (*methods, EP) if family == "bernoulli" and link == "probit" else methods


def engine_class(family: str) -> type:
    """The model class a formula of ``family`` is built on."""
    if family == "gaussian":
        return FormulaRegression
    return FormulaMulticlass if family == "categorical" else FormulaLatentGP
