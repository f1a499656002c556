r"""What every formula model has, whatever its engine: the terms' hyperparameters and
covariances (and their finite bases for the low-rank engine), the priors by the printed names,
the terms table, and the posterior of each term's contribution at new data (per-term
predictions, R&W eqs. 2.25-2.26 with the term's cross-covariance; the Laplace approximation
for a latent GP, R&W eqs. 3.21 and 3.24)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pymc as pm
import pytensor.tensor as pt

from bayes_gp._validation import f64
from bayes_gp.formula.covariance import FixedMean, HSGPTerm, LinearBasis, OnColumns, SameGroup
from bayes_gp.formula.design import Design, gp_columns, group_columns
from bayes_gp.formula.parse import ParsedFormula, _Name
from bayes_gp.kernels.base import factors as kernel_factors
from bayes_gp.kernels.catalogue import DataScale, default_prior, kernel_spec
from bayes_gp.predictive import Prediction, mixture_prediction
from bayes_gp.priors import resolve_prior
from bayes_gp.solvers.hsgp import HSGPLikelihood, hsgp_m_c

__all__ = ["FormulaTerms", "TermInfo", "COEF_SCALE"]

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
        terms' covariances (the callable kernel of the engine). For the low-rank engine
        (:mod:`bayes_gp.formula.lowrank`) each term's factor :math:`F_j` at the training rows
        (:math:`K_j = F_j F_j^\top`; ``None`` for an exact GP term) is kept beside it."""
        covs: dict[str, Any] = {}
        feats: dict[str, Any] = {}
        lowrank = getattr(self, "_lowrank", False)  # only that engine reads the factors
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
                if lowrank:
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
            if lowrank:
                Z = _indicators(X[:, group]) * (1.0 if z is None else X[:, [z]])
                feats[g.name] = sigma * pt.as_tensor_variable(Z)
        if self._intercept:
            covs["Intercept"] = pm.gp.cov.Constant(self._intercept[1])
            if lowrank:
                feats["Intercept"] = pt.as_tensor_variable(
                    np.full((X.shape[0], 1), np.sqrt(self._intercept[1]))
                )
        fixed_cols = self.design.fixed_columns()
        for term, idx in self._fixed_terms.items():
            cols = [fixed_cols[i] for i in idx]
            covs[term] = LinearBasis(D, cols, self._fixed_v[idx])
            if lowrank:
                feats[term] = pt.as_tensor_variable(X[:, cols] * np.sqrt(self._fixed_v[idx]))
        self._term_covs[id(pm.modelcontext(None))] = covs
        self._term_features[id(pm.modelcontext(None))] = feats
        if not covs:
            raise ValueError(f"the formula {self.formula!r} has no term on its right-hand side")
        return _sum(list(covs.values()))

    def _hsgp_term(self, t, base, D: int, cols: list[int]) -> HSGPTerm:
        """The HSGP approximation of a ``gp(..., approx="hsgp")`` term: ``m`` and ``c`` as
        given, the others by the rule of Riutort-Mayol et al. 2022 over the central 95% of the
        length-scale prior (:func:`~bayes_gp.solvers.hsgp.hsgp_m_c`), fixed at the first
        build (the box must not move between the models of one formula)."""
        if t.name not in self._hsgp:
            Xc = self.design.X[:, cols]
            lo, hi = Xc.min(axis=0), Xc.max(axis=0)
            S = 0.5 * (hi - lo)
            if np.any(S <= 0):
                raise ValueError(f"{t.name}: approx='hsgp' needs inputs that vary")
            HSGPLikelihood.check_spectral_density(base, len(cols))
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
        return {
            t: mixture_prediction(means, variances, {"n_draws": len(means)})
            for t, (means, variances) in per.items()
        }

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


class _HSGPTermView:
    """What :func:`bayes_gp.solvers.approx_checks.hsgp_basis_checks` reads of an HSGP
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
