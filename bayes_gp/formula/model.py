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

import dataclasses
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pymc as pm
import pytensor.tensor as pt
from scipy.linalg import cho_solve, solve_triangular
from scipy.special import logit

from bayes_gp._validation import f64
from bayes_gp.classification.multiclass_model import MulticlassGPClassifier
from bayes_gp.formula.covariance import FixedMean, HSGPTerm, LinearBasis, OnColumns, SameGroup
from bayes_gp.formula.design import Design, gp_columns, group_columns
from bayes_gp.formula.factored import FactoredLikelihood
from bayes_gp.formula.grouped import (
    GroupedLikelihood,
    dense_cost,
    distinct_rows,
    grouped_cost,
)
from bayes_gp.formula.lowrank import LowRankLikelihood, lowrank_cost
from bayes_gp.formula.parse import ParsedFormula, _Name, parse_formula
from bayes_gp.kernels.base import factors as kernel_factors
from bayes_gp.latent.model import LINK_SCALE, LatentGP
from bayes_gp.linalg import jittered_cholesky, plus_diagonal
from bayes_gp.predictive import (
    CI_QUANTILES,
    Z_CI,
    Prediction,
    factorize,
    gaussian_mixture_quantiles,
)
from bayes_gp.predictive import predict as gaussian_predict
from bayes_gp.priors import resolve_prior
from bayes_gp.protocol import is_nuts
from bayes_gp.regression.catalogue import DataScale, default_prior, kernel_spec
from bayes_gp.regression.exact import dense_memory_bytes, dense_memory_limit
from bayes_gp.regression.gpr import GPRegression
from bayes_gp.regression.hsgp import HSGPLikelihood, hsgp_m_c

__all__ = [
    "Model",
    "FormulaRegression",
    "FormulaLatentGP",
    "FormulaMulticlass",
    "FAMILIES",
    "TermInfo",
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
)

#: The grouped engine (:mod:`bayes_gp.formula.grouped`) is the default from this many rows on,
#: where it costs under a quarter of the dense Cholesky; below, the dense path's one compiled
#: Cholesky is as fast and the model's first fit compiles less.
GROUPED_MIN_N = 200

#: Prior sd of a common-effect coefficient, in units of the response's sd over the column's sd
#: (the intercept: the response's sd), as the ``mean="linear"`` option of the models.
COEF_SCALE = 2.0


#: The engine's own description rows that the formula's term rows replace.
_ENGINE_ROWS_REPLACED = ("model", "kernel", "kernel formula", "equation", "mean function", "mean")


@dataclass(frozen=True)
class TermInfo:
    """One term of a formula model, as :meth:`FormulaTerms.terms_table` lists it."""

    name: str
    kind: str  # "gp", "group", "common"
    covariance: str
    hyperparameters: tuple[str, ...]
    columns: tuple[str, ...]


def _normal_prior(name: str, p) -> tuple[float, float]:
    """``(mean, variance)`` of a common-effect coefficient's prior: a number fixes it (variance
    0), an unnamed ``pm.Normal.dist(mu, sigma)`` is integrated out in closed form."""
    if isinstance(p, int | float | np.floating | np.integer) and not isinstance(p, bool):
        return float(p), 0.0
    if isinstance(p, pt.TensorVariable) and p.owner is not None:
        op = p.owner.op
        if type(op).__name__ == "NormalRV":
            mu, sigma = (float(np.asarray(v.eval())) for v in p.owner.inputs[-2:])
            if sigma <= 0:
                raise ValueError(f"`priors[{name!r}]`: the Normal's sigma must be positive")
            return mu, sigma**2
    raise TypeError(
        f"`priors[{name!r}]`: a common-effect coefficient takes an unnamed pm.Normal.dist(mu, "
        "sigma) (integrated out in closed form, R&W eq. 2.39) or a number that fixes it; other "
        f"distributions would have to be sampled, got {type(p).__name__}"
    )


class FormulaTerms:
    """What every formula model has: its formula, terms, design and per-term predictions.
    Put it before the engine class in the bases."""

    formula: str
    parsed: ParsedFormula
    design: Design
    family: str

    # ------------------------------------------------------------------ set-up
    def _setup_terms(self, parsed, design, family, priors, kernels, loc: float, s: float):
        self.formula, self.parsed, self.design, self.family = parsed.formula, parsed, design, family
        self._loc, self._s = loc, s
        kernels = dict(kernels or {})
        D = len(design.names)
        self._gp_specs = {}
        self._hsgp: dict[str, tuple] = {}  # an HSGP term's m, c, box half-widths, centre
        for t in parsed.gp_terms:
            k = t.kernel
            if isinstance(k, _Name):
                if k.name not in kernels:
                    raise ValueError(
                        f"{t.name}: kernel={k.name} names no kernel object; pass it as "
                        f"kernels={{{k.name!r}: ...}} or write a catalogue expression in quotes"
                    )
                k = kernels[k.name]
            spec = kernel_spec(k, arg=f"{t.name}'s kernel")
            if t.ard and not spec.catalogue:
                raise ValueError(f"{t.name}: ard=True applies to catalogue kernels")
            cols = gp_columns(design, t)
            scale = DataScale.of(design.X[:, cols], np.zeros(2))
            self._gp_specs[t.name] = (spec, cols, scale)
        # common effects: one term per formulae term, a prior mean and variance per column;
        # the intercept a constant covariance and mean (no column: a 1-D model stays 1-D)
        H = design.X[:, design.fixed_columns()]
        b = np.zeros(len(design.fixed_labels))
        v = np.zeros(len(design.fixed_labels))
        for i, lab in enumerate(design.fixed_labels):
            sd = float(H[:, i].std()) or 1.0
            b[i], v[i] = 0.0, (COEF_SCALE * s / sd) ** 2
            if lab in priors:
                b[i], v[i] = _normal_prior(lab, priors[lab])
        self._fixed_b, self._fixed_v = b, v
        self._intercept: tuple[float, float] | None = None
        if parsed.intercept:
            self._intercept = (loc, (COEF_SCALE * s) ** 2)
            if "Intercept" in priors:
                self._intercept = _normal_prior("Intercept", priors["Intercept"])
        self._fixed_terms = dict(design.fixed_terms)
        b0 = self._intercept[0] if self._intercept else 0.0
        self._fixed_mean = FixedMean(design.fixed_columns(), b, design.offset_column, b0)
        self._D = D
        self._term_covs: dict[int, dict] = {}
        self._term_features: dict[int, dict] = {}
        terms = self.term_names
        twice = sorted({t for t in terms if terms.count(t) > 1})
        if twice:
            raise ValueError(
                f"the formula {parsed.formula!r} has two terms named {twice}; give the GP term "
                "another name (gp(..., name='...'))"
            )
        names = self.prior_names
        unknown = sorted(set(priors) - set(names))
        if unknown:
            raise ValueError(
                f"`priors` names {unknown}, which this model does not have; its names are {names}"
            )
        coefs = {*design.fixed_labels, "Intercept"}
        self._term_priors = {k: p for k, p in priors.items() if k not in coefs}

    @property
    def prior_names(self) -> list[str]:
        """The names ``priors=`` accepts: every hyperparameter, every common-effect
        coefficient, and the family's own parameters."""
        out = []
        for t in self.parsed.gp_terms:
            spec = self._gp_specs[t.name][0]
            out += [f"{t.name}.{p}" for p in spec.params]
        out += [f"{g.name}.sigma" for g in self.parsed.group_terms]
        out += (["Intercept"] if self._intercept else []) + list(self.design.fixed_labels)
        return out + list(self._family_params)

    def _term_kernel(self, D: int):
        """Create every term's hyperparameters in the current model and return the sum of the
        terms' covariances (the callable kernel of the engine). Each term's low-rank factor
        :math:`F_j` at the training rows (:math:`K_j = F_j F_j^\top`; ``None`` for an exact GP
        term) is kept beside it for the low-rank engine (:mod:`bayes_gp.formula.lowrank`)."""
        covs: dict[str, Any] = {}
        feats: dict[str, Any] = {}
        s = self._s
        X = self.design.X
        for t in self.parsed.gp_terms:
            spec, cols, scale = self._gp_specs[t.name]
            scale = DataScale(scale.x_range, scale.x_sd, scale.x_sq_mean, self._loc, s)
            user = {**{f"{t.name}.{k}": v for k, v in spec.priors.items()}, **self._term_priors}
            hyper = {}
            for p in spec.params:
                name = f"{t.name}.{p}"
                kind = p.rsplit("_", 1)[-1]
                if t.ard and p in spec.ard_params:
                    hyper[p] = self._ard_prior(name, user, scale, len(cols))
                    continue

                def fallback(n, kind=kind, scale=scale):
                    return default_prior(n, scale, False, kind=kind)

                hyper[p] = resolve_prior(user, name, fallback)
            base = spec.build(len(cols), hyper)
            feats[t.name] = None
            if t.approx == "hsgp":
                cov = self._hsgp_term(t, base, D, cols)
                feats[t.name] = cov.features(pt.as_tensor_variable(X))
            else:  # a model on one column keeps the catalogue's kernel (its structure is known)
                cov = base if D == 1 else OnColumns(base, D, cols)
            if t.by:
                col = self.design.factor_column(t.by)
                cov = cov * SameGroup(D, col)
                if feats[t.name] is not None:  # one block of features per level
                    Z = _indicators(X[:, col])
                    F = feats[t.name]
                    feats[t.name] = (F[:, :, None] * Z[:, None, :]).reshape((X.shape[0], -1))
            covs[t.name] = cov
        for g in self.parsed.group_terms:
            name = f"{g.name}.sigma"
            sigma = resolve_prior(self._term_priors, name, lambda n: pm.HalfNormal(n, sigma=f64(s)))
            group, z = group_columns(self.design, g)
            covs[g.name] = pt.square(sigma) * SameGroup(D, group, z)
            Z = _indicators(X[:, group]) * (1.0 if z is None else X[:, [z]])
            feats[g.name] = sigma * pt.as_tensor_variable(Z)
        if self._intercept:
            covs["Intercept"] = pm.gp.cov.Constant(self._intercept[1])
            feats["Intercept"] = pt.as_tensor_variable(
                np.full((X.shape[0], 1), np.sqrt(self._intercept[1]))
            )
        fixed_cols = self.design.fixed_columns()
        for term, idx in self._fixed_terms.items():
            cols = [fixed_cols[i] for i in idx]
            covs[term] = LinearBasis(D, cols, self._fixed_v[idx])
            feats[term] = pt.as_tensor_variable(X[:, cols] * np.sqrt(self._fixed_v[idx]))
        self._term_covs[id(pm.modelcontext(None))] = covs
        self._term_features[id(pm.modelcontext(None))] = feats
        if not covs:
            raise ValueError(f"the formula {self.formula!r} has no term on its right-hand side")
        return _sum(list(covs.values()))

    def _hsgp_term(self, t, base, D: int, cols: list[int]) -> HSGPTerm:
        """The HSGP approximation of a ``gp(..., approx="hsgp")`` term: ``m`` and ``c`` as
        given, the others by the rule of Riutort-Mayol et al. 2022 over the central 95% of the
        length-scale prior (:func:`~bayes_gp.regression.hsgp.hsgp_m_c`), fixed at the first
        build (the box must not move between the models of one formula)."""
        if t.name not in self._hsgp:
            Xc = self.design.X[:, cols]
            lo, hi = Xc.min(axis=0), Xc.max(axis=0)
            S = 0.5 * (hi - lo)
            if np.any(S <= 0):
                raise ValueError(f"{t.name}: approx='hsgp' needs inputs that vary")
            HSGPLikelihood._check_psd(base, len(cols))
            m, c = (t.m,) * len(cols), (t.c,) * len(cols)
            if t.m is None or t.c is None:
                m_rule, c_rule = hsgp_m_c(base, Xc, c=None if t.c is None else c)
                m = m_rule if t.m is None else m
                c = c_rule
            self._hsgp[t.name] = (tuple(int(v) for v in m), tuple(float(v) for v in c),
                                  np.asarray(c) * S, 0.5 * (lo + hi))  # fmt: skip
        m, c, L, center = self._hsgp[t.name]
        return HSGPTerm(base, D, cols, m, L, center)

    def _check_hsgp_box(self, Xn: np.ndarray) -> None:
        """New inputs of an HSGP term must lie in its box, where the basis is a GP."""
        for t in self.parsed.gp_terms:
            if t.name not in self._hsgp:
                continue
            _, c, L, center = self._hsgp[t.name]
            x = Xn[:, self._gp_specs[t.name][1]]
            if np.any(x < center - L) or np.any(x > center + L):
                raise ValueError(
                    f"{t.name}: new inputs outside the HSGP box [{(center - L).round(4).tolist()}"
                    f", {(center + L).round(4).tolist()}] (c = {list(c)} times the training "
                    "data's half-range about its midpoint), where the basis reflects and is no "
                    "GP: build the model with a larger c (gp(..., c=...))"
                )

    @staticmethod
    def _ard_prior(name, user, scale, D):
        """One length-scale per input of the term (R&W §5.1), LogNormal around a third of each
        input's range unless ``priors=`` names it."""
        if name in user:
            return resolve_prior(user, name, None)
        mu = np.log(scale.x_range / 3.0)
        return pm.LogNormal(name, mu=f64(mu), sigma=f64(1.0), shape=D)

    # ------------------------------------------------------------------ terms
    @property
    def term_names(self) -> list[str]:
        """The terms, in the order of the formula: GP terms, group-specific effects, common
        effects (formulae's names: ``Intercept``, ``x1``, ``C(region)``)."""
        return (
            [t.name for t in self.parsed.gp_terms]
            + [g.name for g in self.parsed.group_terms]
            + (["Intercept"] if self._intercept else [])
            + list(self._fixed_terms)
        )

    def terms_table(self) -> pd.DataFrame:
        """One row per term: its kind, covariance, hyperparameters and design columns."""
        rows = []
        for t in self.parsed.gp_terms:
            spec = self._gp_specs[t.name][0]
            units = [f"{v} in years" if v in self.design.in_years else v for v in t.variables]
            cov = f"{spec.name} on ({', '.join(units)})"
            if t.name in self._hsgp:
                m, c = self._hsgp[t.name][:2]
                cov = f"HSGP (m = {list(m)}, c = {[round(v, 3) for v in c]}) of {cov}"
            if t.by:
                cov += f" × [{t.by} = {t.by}'] (one GP per level, shared hyperparameters)"
            rows.append(TermInfo(t.name, "gp", cov, tuple(f"{t.name}.{p}" for p in spec.params),
                                 tuple(t.variables)))  # fmt: skip
        for g in self.parsed.group_terms:
            z = f"{g.expr}·{g.expr}' " if g.expr else ""
            rows.append(TermInfo(g.name, "group", f"σ² {z}[{':'.join(g.factor)} equal]",
                                 (f"{g.name}.sigma",), tuple(filter(None, [g.expr, *g.factor]))))  # fmt: skip
        if self._intercept:
            b0, v0 = self._intercept
            prior = f"N({b0:.3g}, {np.sqrt(v0):.3g}²)" if v0 > 0 else f"{b0:.6g} (fixed)"
            rows.append(TermInfo("Intercept", "common", f"constant {prior} (integrated out)",
                                 (), ()))  # fmt: skip
        for term, idx in self._fixed_terms.items():
            labels = tuple(self.design.fixed_labels[i] for i in idx)
            prior = ", ".join(
                f"{lab} ~ N({self._fixed_b[i]:.3g}, {np.sqrt(self._fixed_v[i]):.3g}²)"
                if self._fixed_v[i] > 0
                else f"{lab} = {self._fixed_b[i]:.6g} (fixed)"
                for lab, i in zip(labels, idx, strict=True)
            )
            rows.append(TermInfo(term, "common", f"h hᵀ-kernel of {prior} (integrated out)", (),
                                 labels))  # fmt: skip
        return pd.DataFrame([r.__dict__ for r in rows]).set_index("name")

    def _check_terms(self, terms) -> dict[str, tuple[str, ...]]:
        """``{label: names}``: a name is one term, a tuple or list of names their sum
        (labelled ``"a + b"``)."""
        terms = [terms] if isinstance(terms, str) else list(terms)
        known = self.term_names
        out = {}
        for t in terms:
            group = (t,) if isinstance(t, str) else tuple(t)
            unknown = [g for g in group if g not in known]
            if unknown or not group:
                raise ValueError(
                    f"no term {unknown[0] if unknown else t!r} in this model; its terms are {known}"
                )
            out[" + ".join(group)] = group
        return out

    def _design_of(self, new_data) -> np.ndarray:
        if isinstance(new_data, pd.DataFrame | Mapping):
            Xn = self.design.matrix(new_data)
        else:
            Xn = np.asarray(new_data, float)
        self._check_hsgp_box(Xn)
        return Xn

    def _term_new(self, values, Xn: np.ndarray, term: str):
        """``(K_j(X, X_new), diag K_j(X_new), m_j(X_new))`` of one term at hyperparameter
        values."""
        key = f"term:{term}"
        covs = self._term_covs[id(self.model)]
        fixed_cols = self.design.fixed_columns()

        def build(Xv):
            cov = covs[term]
            Xt = pt.as_tensor_variable(self._train_inputs)
            if term == "Intercept":
                mean = pt.zeros(Xv.shape[0], dtype="float64") + self._intercept[0]
            elif term in self._fixed_terms:
                idx = self._fixed_terms[term]
                cols = [fixed_cols[i] for i in idx]
                mean = pt.dot(Xv[:, cols], self._fixed_b[idx])
            else:
                mean = pt.zeros(Xv.shape[0], dtype="float64")
            return [cov(Xt, Xv), cov(Xv, diag=True), mean]

        return self._compiled(key, build)(*values, Xn)

    def predict_terms(self, new_data, fit, terms=None, *, max_draws: int = 200,
                      random_seed: int = 0) -> dict[str, Prediction]:  # fmt: skip
        r"""The posterior of each term's contribution :math:`f_j` at ``new_data`` (on the link
        scale), by name: ``mean``, ``var``, 94% band ``lower`` / ``upper`` (Gaussian at a
        type-II fit; the mixture over up to ``max_draws`` NUTS draws). A level of a grouping
        factor that the training data lacks gets the term's prior (a new group's effect).

        ``terms``: a name or list of names of :attr:`term_names` (default: all); a tuple of
        names in the list is their sum, with its own band (``("Intercept", "trend")``, labelled
        ``"Intercept + trend"``): the terms' bands do not add, their covariance does.
        """
        groups = self._check_terms(self.term_names if terms is None else terms)
        Xn = self._design_of(new_data)
        per: dict[str, tuple[list, list]] = {t: ([], []) for t in groups}
        for values, factor in self._term_factors(fit, max_draws):
            cache: dict[str, tuple] = {}
            for label, names in groups.items():
                # a sum of terms: their cross- and prior covariances add (the terms are
                # independent a priori), and so do their prior means
                parts = [cache.setdefault(n, self._term_new(values, Xn, n)) for n in names]
                Ks, kss, m = (sum(p[i] for p in parts) for i in range(3))
                mu, var = factor(Ks, kss)
                per[label][0].append(m + mu)
                per[label][1].append(np.maximum(var, 0.0))
        out = {}
        for t, (means, variances) in per.items():
            means, variances = np.array(means), np.array(variances)
            mean = means.mean(axis=0)
            var = variances.mean(axis=0) + means.var(axis=0)
            if len(means) == 1:
                sd = np.sqrt(var)
                lower, upper = mean - Z_CI * sd, mean + Z_CI * sd
            else:
                lower, upper = gaussian_mixture_quantiles(means, np.sqrt(variances), CI_QUANTILES)
            out[t] = Prediction(mean, var, None, lower, upper, {"n_draws": len(means)})
        return out

    def describe_engine(self) -> str:
        raise NotImplementedError  # each engine class says how it integrates the terms

    def describe(self) -> list[tuple[str, object]]:  # type: ignore[override]
        rows = [("formula", self.formula), ("family", self.family),
                ("engine", self.describe_engine())]  # fmt: skip
        for name, row in self.terms_table().iterrows():
            rows.append((f"term {name}", row["covariance"]))
        engine = [r for r in super().describe() if r[0] not in _ENGINE_ROWS_REPLACED]
        return rows + engine

    @property
    def label(self) -> str:
        return f"{self.formula} ({self.family})"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.formula!r}, family={self.family!r}, n={self.design.n})"


class FormulaRegression(FormulaTerms, GPRegression):
    """A gaussian-family formula model: every term integrated out in closed form (the exact
    marginal likelihood of the summed covariance); see :func:`Model`."""

    _family_params = ("sigma",)

    def __init__(self, parsed, design, y, *, priors=None, kernels=None, jitter=None,
                 structure=None):  # fmt: skip
        priors = dict(priors or {})
        loc, s = float(np.mean(y)), float(np.std(y)) or 1.0
        self._setup_terms(parsed, design, "gaussian", priors, kernels, loc, s)
        if structure not in (None, "grouped", "lowrank", "dense", "quasiseparable"):
            raise ValueError(
                "`structure` must be None, 'grouped', 'lowrank', 'dense' or 'quasiseparable', "
                f"got {structure!r}"
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
            **options,
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
        when its cost is below a quarter of the dense Cholesky's from n = 200 on."""
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
        cols = sorted(set(cols) | set(self.design.fixed_columns()))
        X = self.design.X
        codes = X[:, self.design.factor_column(factor)]
        sizes = np.unique(codes, return_counts=True)[1].tolist()
        has_global = bool(cols) or self._intercept is not None
        m = len(distinct_rows(X, cols)[0]) if has_global else 0
        n = X.shape[0]
        cheap = grouped_cost(sizes, m) < dense_cost(n) / 4.0
        if structure is None and not (n >= GROUPED_MIN_N and cheap):
            return None
        return factor, names, cols

    def _approximate_if_too_large(self) -> None:
        """Where neither the grouped nor the O(n) engine applies and the dense one would not fit
        in memory (:func:`~bayes_gp.regression.exact.check_dense_memory`), every exact GP term
        takes its HSGP approximation (m and c by the rule), with a warning: the model that fits
        rather than a ``MemoryError``."""
        n = self.design.n
        if dense_memory_bytes(n) <= dense_memory_limit() or self._grouped_plan(None) is not None:
            return
        exact = [t for t in self.parsed.gp_terms if t.approx is None]
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
        possible = bool(gps) and all(t.approx == "hsgp" for t in gps)
        if structure == "lowrank" and not possible:
            raise ValueError(
                "structure='lowrank' needs every gp() term to be a finite basis "
                "(approx='hsgp'); exact GP terms have no low-rank form"
            )
        return possible and structure in (None, "lowrank")

    def _rank(self) -> int:
        """The width of the low-rank engine's basis: each HSGP term's functions (per level
        with ``by=``), each group effect's levels, the intercept and the coefficients."""
        X = self.design.X
        levels = {
            f: np.unique(X[:, self.design.factor_column(f)]).size for f in self.design.factors
        }
        r = sum(int(np.prod(self._hsgp[t.name][0])) * (levels[t.by] if t.by else 1)
                for t in self.parsed.gp_terms)  # fmt: skip
        r += sum(levels[":".join(g.factor)] for g in self.parsed.group_terms)
        return r + (1 if self._intercept else 0) + len(self.design.fixed_labels)

    def _build(self) -> pm.Model:
        if self._grouping is None and not self._lowrank:
            return super()._build()
        D = self.X.shape[1]
        coords = {"feature": self.feature_names, "obs": np.arange(self.X.shape[0])}
        with pm.Model(coords=coords) as model:
            cov = self.spec.build(D, {})
            mean_func = self._mean_function(D)
            sigma = self.noise if self.noise is not None else self._prior("sigma")
            covs = self._term_covs[id(model)]
            self.quasiseparable = False
            # bases wider than the data: one dense factor is cheaper (built again below)
            n = self.X.shape[0]
            wide = (self._lowrank and not self._lowrank_asked and self._rank() >= n
                    and dense_memory_bytes(n) <= dense_memory_limit())  # fmt: skip
            if self._lowrank and not wide:
                feats = self._term_features[id(model)]
                F = pt.concatenate([feats[t] for t in covs], axis=1)
                self.marginal = LowRankLikelihood(
                    "y", self.X, self.y, F, cov, mean_func, sigma, self.jitter_tensor, "obs"
                )
            elif not self._lowrank:
                factor, names, cols = self._grouping
                block = _sum([covs[t] for t in names])
                glob = _sum([c for t, c in covs.items() if t not in names])
                self.marginal = GroupedLikelihood(
                    "y", self.X, self.y, block, glob, cov, mean_func, sigma, self.jitter_tensor,
                    "obs", group_column=self.design.factor_column(factor), global_columns=cols,
                )  # fmt: skip
        if wide:  # outside the discarded model's context
            self._lowrank = False
            self._grouping = self._grouped_plan(None)
            return self._build()
        self._cov, self._mean_func, self._sigma = cov, mean_func, pt.as_tensor_variable(sigma)
        return model

    @property
    def _train_inputs(self) -> np.ndarray:
        return self.X

    def _term_factors(self, fit, max_draws):
        draws = [self._values(fit.params)] if not is_nuts(fit) else self._draws(fit, max_draws)
        for values in draws:
            if isinstance(self.marginal, FactoredLikelihood):
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
            return [self._mean(Xt), plus_diagonal(self._cov(Xt), noise)]

        m, C = self._compiled("dense_train", build)(*values, np.zeros((0, self.X.shape[1])))
        return factorize(C, self.y - m)

    def predict(self, X_new, fit, diag: bool = True, include_noise: bool = False,
                terms=None, max_draws: int = 500) -> Prediction | dict[str, Prediction]:  # fmt: skip
        """Predictions at new data (a DataFrame with the formula's columns, or a design matrix):
        of the whole latent function (of :math:`y_*` with ``include_noise``), or with
        ``terms=`` of each named term (:meth:`predict_terms`); NUTS fits mix up to
        ``max_draws`` posterior draws (the same draws for the whole and for the terms)."""
        if terms is not None:
            return self.predict_terms(X_new, fit, terms, max_draws=max_draws)
        Xn = self._design_of(X_new)
        if is_nuts(fit) and diag:
            return self._predict_mixture(self._check_new(Xn), fit, include_noise, max_draws)
        return super().predict(Xn, fit, diag, include_noise)

    def approximation_checks(self, fit) -> list:
        """Post-fit checks of each HSGP term (``gp(..., approx="hsgp")``) at ``fit``: the
        resolution of its basis against the fitted length-scales and the width of its box
        (Riutort-Mayol et al. 2022; :mod:`bayes_gp.regression.approx_checks`), named by the
        term. The exact engines need none."""
        from bayes_gp.regression.approx_checks import _hsgp_basis_checks

        covs = self._term_covs[id(self.model)]
        out = []
        for t in self.parsed.gp_terms:
            if t.name not in self._hsgp:
                continue
            term = _HSGPTermView(self, t, covs[t.name])
            for check in _hsgp_basis_checks(self, term, fit):
                advice = check.advice.replace("approx_options={", f"{t.name[:-1]}, ").replace(
                    "'m': ", "m=").replace("'c': ", "c=").replace("}", ")")  # fmt: skip
                out.append(dataclasses.replace(check, name=f"{check.name}: {t.name}",
                                               advice=advice))  # fmt: skip
        return out

    def describe_engine(self) -> str:
        n = self.X.shape[0]
        if isinstance(self.marginal, LowRankLikelihood):
            r = self._rank()
            return (
                f"exact marginal likelihood of the finite bases (every term low-rank: HSGP "
                f"terms, group indicators, coefficients; rank r = {r}) by the Woodbury identity "
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


class FormulaLatentGP(FormulaTerms, LatentGP):
    """A formula model of a non-Gaussian family: the latent function (GP terms, group effects
    and coefficients) integrated out by Laplace inside NUTS; see :func:`Model`."""

    def __init__(self, parsed, design, y, family, *, link=None, priors=None, kernels=None,
                 jitter=None, trials=None):  # fmt: skip
        priors = dict(priors or {})
        self._family_params = {"student_t": ("sigma", "nu"),
                               "negative_binomial": ("dispersion",)}.get(family, ())  # fmt: skip
        off = design.X[:, design.offset_column] if design.offset_column is not None else 0.0
        y = np.asarray(y, float)
        if family in ("poisson", "negative_binomial"):
            loc = float(np.log((y.sum() + 0.5) / np.sum(np.exp(off) * np.ones_like(y))))
            s = LINK_SCALE
        elif family == "binomial":
            loc, s = float(logit((y.sum() + 0.5) / (np.sum(trials) + 1.0))), LINK_SCALE
        elif family == "bernoulli":
            loc, s = 0.0, LINK_SCALE
        else:  # student_t
            loc, s = float(np.mean(y)), float(np.std(y)) or 1.0
        self._setup_terms(parsed, design, family, priors, kernels, loc, s)
        super().__init__(
            design.frame(), y, self._term_kernel, family, link=link, mean=self._fixed_mean,
            priors={k: v for k, v in priors.items() if k in self._family_params},
            trials=trials, jitter=jitter,
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
            else:
                L, _ = jittered_cholesky(K)
                alpha = cho_solve((L, True), f - m)

                def at(Ks, kss, L=L, alpha=alpha):
                    V = solve_triangular(L, Ks, lower=True)
                    return Ks.T @ alpha, kss - np.sum(V * V, axis=0)

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


class _HSGPTermView:
    """What :func:`bayes_gp.regression.approx_checks._hsgp_basis_checks` reads of an HSGP
    likelihood (``cov``, ``X``, ``m``, ``c``, ``L``, ``rvs``), for one HSGP term of a formula
    model: its base kernel on the term's own columns."""

    def __init__(self, model, term, cov):
        hsgp = cov if isinstance(cov, HSGPTerm) else next(
            f for f in kernel_factors(cov) if isinstance(f, HSGPTerm))  # fmt: skip
        self.cov = hsgp.base
        self.X = model.design.X[:, model._gp_specs[term.name][1]]
        self.m, self.c, self.L, _ = model._hsgp[term.name]
        self.rvs = list(model.model.free_RVs)


def _indicators(codes: np.ndarray) -> np.ndarray:
    """One column per level of the group codes, 1 where a row has that level."""
    levels = np.unique(codes)
    return (codes[:, None] == levels[None, :]).astype(float)


def _sum(covs: list):
    """The sum of covariance functions, ``None`` for none."""
    total = None
    for c in covs:
        total = c if total is None else total + c
    return total


def engine_class(family: str) -> type:
    """The model class a formula of ``family`` is built on."""
    if family == "gaussian":
        return FormulaRegression
    return FormulaMulticlass if family == "categorical" else FormulaLatentGP


def _check_response(family: str, parsed: ParsedFormula, y, trials) -> np.ndarray:
    """The response as floats, or a ``ValueError`` naming its column when the family cannot
    have it (negative or fractional counts, successes outside 0..trials, one class)."""
    name = parsed.response
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
            f"the response {name!r} is not numeric ({y.dtype}); for a binary outcome code it "
            "0/1 (family='bernoulli')"
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

    if family in ("poisson", "negative_binomial"):
        bad((y < 0) | (y != np.round(y)), "non-negative whole counts")
    elif family == "bernoulli":
        bad((y != 0) & (y != 1), "0/1 outcomes")
        if np.unique(y).size < 2:
            raise ValueError(
                f"the response {name!r} has one class only ({y[0]:g} in every row): a "
                "bernoulli model needs both outcomes"
            )
    elif family == "binomial":
        t = parsed.trials
        bad((trials <= 0) | (trials != np.round(trials)), "positive whole trials", trials, t)
        bad((y < 0) | (y != np.round(y)), "non-negative whole successes")
        bad(y > trials, f"successes at most the trials ({t!r})")
    return y


def Model(formula: str, data, family: str = "gaussian", *, link: str | None = None,
          priors: Mapping[str, Any] | None = None, kernels: Mapping[str, Any] | None = None,
          jitter: float | None = None, structure: str | None = None):  # fmt: skip
    r"""A GP model written as a formula, with the engine chosen for it.

    Parameters
    ----------
    formula : str
        ``"y ~ x1 + C(region) + gp(t) + gp(t, by=site) + (1 | site) + (x1 | site)"``
        (:mod:`bayes_gp.formula.parse`); ``p(successes, trials) ~ ...`` for the binomial
        family; ``offset(log(exposure))``.
    data : DataFrame or dict of columns
        Every column the formula names; NaN or infinite values are refused (with the rows).
    family : str
        One of :data:`FAMILIES`; ``"categorical"`` (softmax) for more than two classes, its
        response any labels.
    link : str, optional
        ``bernoulli``: ``"logit"`` (default) or ``"probit"``.
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
        terms' finite bases when every ``gp()`` term has ``approx="hsgp"``
        (:mod:`bayes_gp.formula.lowrank`; the default then); ``"grouped"``: per-group factors and the
        Woodbury identity (:mod:`bayes_gp.formula.grouped`) when every term of
        ``gp(..., by=g)``, ``(1 | g)``, ``(x | g)`` uses one factor; ``"quasiseparable"``: the
        O(n) state-space one when the whole model lies on one input column with a state-space
        kernel (``y ~ gp(t, kernel="matern32")``); ``"dense"``: one Cholesky factor. ``None``
        (default): grouped from :data:`GROUPED_MIN_N` rows when it costs under a quarter of
        the dense factor, quasiseparable for a long 1-D series
        (:class:`~bayes_gp.GPRegression`'s rule), dense otherwise.

    Returns
    -------
    FormulaRegression, FormulaLatentGP or FormulaMulticlass
        A model with the protocol of every bayes_gp model (``fit``, ``sample``, ``predict``,
        the report, ``fit_many``), plus ``predict(..., terms=[...])`` and ``terms_table()``.
    """
    cls, args, kwargs = _engine_arguments(formula, data, family, link=link, priors=priors,
                                          kernels=kernels, jitter=jitter, structure=structure)  # fmt: skip
    return cls(*args, **kwargs)


def _engine_arguments(formula, data, family, *, link=None, priors=None, kernels=None,
                      jitter=None, structure=None) -> tuple[type, tuple, dict]:  # fmt: skip
    """The engine class of :func:`Model` and its arguments, every check made."""
    if family not in FAMILIES:
        raise ValueError(f"`family` must be one of {list(FAMILIES)}, got {family!r}")
    parsed = parse_formula(formula)
    design = Design(parsed, data)
    frame = data if isinstance(data, pd.DataFrame) else pd.DataFrame(dict(data))
    frame = frame.reset_index(drop=True)
    y = frame[parsed.response].to_numpy()
    if parsed.trials is not None and family != "binomial":
        raise ValueError(
            f"p({parsed.response}, {parsed.trials}) is a binomial response; the family is "
            f"{family!r}"
        )
    if family == "binomial" and parsed.trials is None:
        raise ValueError("the binomial family needs the response p(successes, trials)")
    trials = frame[parsed.trials].to_numpy(float) if parsed.trials else None
    y = _check_response(family, parsed, y, trials)
    if family == "gaussian":
        if link not in (None, "identity"):
            raise ValueError(f"the gaussian family has the identity link, not {link!r}")
        return (
            FormulaRegression,
            (parsed, design, y),
            dict(priors=priors, kernels=kernels, jitter=jitter, structure=structure),
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
    return (
        FormulaLatentGP,
        (parsed, design, y, family),
        dict(link=link, priors=priors, kernels=kernels, jitter=jitter, trials=trials),
    )


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
        _, args, kwargs = _engine_arguments(formula, data, family, **{**options, **model_kwargs})
        base.__init__(self, *args, **kwargs)

    name = f"Formula{base.__name__.removeprefix('Formula')}Groups"
    return type(name, (base,), {"__init__": __init__, "__module__": __name__,
                                "__doc__": f"{formula!r} ({family}) per group"})  # fmt: skip
