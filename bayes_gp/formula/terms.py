r"""What every formula model has, whatever its engine: the terms' hyperparameters and
covariances (and their finite bases for the low-rank engine), the priors by the printed names,
the terms table, and the posterior of each term's contribution at new data (per-term
predictions, R&W eqs. 2.25-2.26 with the term's cross-covariance; the Laplace approximation
for a latent GP, R&W eqs. 3.21 and 3.24).

A GP term with a factor input, ``gp(t, region)``, is the GP on (continuous, categorical)
inputs :math:`f(t, c)` with covariance :math:`k_t(t, t')\,B_{cc'}` (the intrinsic
coregionalisation model read as one GP, Qian, Wu & Wu 2008; Bonilla et al. 2008):

* ``cat="exchangeable"`` (default): :math:`B = (1-\rho) I + \rho \mathbf{1}\mathbf{1}^\top`,
  hyperparameter ``<term>.rho`` with the default prior :math:`\rho \sim
  \mathrm{Beta}(2, 2)` on :math:`[0, 1]`. The correlation matrix allows
  :math:`\rho \ge -1/(L-1)`, but only :math:`\rho \in [0, 1]` reads as the model of a
  shared curve and level-specific deviations,
  :math:`\eta^2 k_t B = \rho\,\eta^2 k_t + (1-\rho)\,\eta^2 k_t [c = c']`
  (:math:`\rho` the shared share of each level's variance), which is what a factor input is
  for; a negative :math:`\rho` (levels pushed apart, a bound that moves with :math:`L`) has no
  such reading and its lower end makes :math:`B` singular. Beta(2, 2) (mean 1/2, sd 0.22) has
  zero density at both ends, so the type-II fit (no Jacobian) stays inside.
  ``gp(region)`` alone is :math:`\eta^2 B_{cc'}`: the random intercept ``(1 | region)`` with
  :math:`\sigma^2 = \eta^2 (1-\rho)` plus a constant of variance :math:`\eta^2\rho` shared by
  every level (beside an intercept, which has one, ``(1 | region)`` says the same with one
  parameter fewer).
* ``cat="coregion"``, ``rank=R`` (default 1): :math:`B = WW^\top + \operatorname{diag}(\kappa)`
  (``<term>.W``, :math:`L \times R`, and ``<term>.kappa``), every level with its own variance
  and the levels correlated through :math:`R` shared factors; the continuous kernel's
  (first) amplitude is fixed at 1, as :math:`\eta^2 B` would have one scale twice (GPy's
  coregionalisation tutorial fixes it likewise). Default priors
  :math:`W_{cr} \sim N(0, s^2/(2R))` and :math:`\kappa_c \sim \mathrm{Gamma}(2, 4/s^2)`, so
  that :math:`E[B_{cc}] = s^2`, the response's variance (as :math:`E[\eta^2]` of the default
  amplitude prior).

A new level at prediction: under the exchangeable kernel it is one more exchangeable level
(correlation :math:`\rho` with every known level,
:class:`~bayes_gp.formula.covariance.OpenExchangeable`); the coregion kernel has no row of
:math:`B` for it and refuses."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.shape_utils import change_dist_size

from bayes_gp._validation import f64
from bayes_gp.formula.covariance import (
    FixedMean,
    HSGPTerm,
    InducingTerm,
    LevelKernel,
    LinearBasis,
    OnColumns,
    OpenExchangeable,
    SameGroup,
)
from bayes_gp.formula.design import Design, gp_columns, group_columns
from bayes_gp.formula.parse import ParsedFormula, _Name
from bayes_gp.inference.jitter import DEFAULT_LATENT_JITTER
from bayes_gp.kernels.base import factors as kernel_factors
from bayes_gp.kernels.catalogue import DataScale, default_prior, kernel_spec
from bayes_gp.kernels.categorical import Coregion
from bayes_gp.predictive import Prediction, mixture_prediction
from bayes_gp.priors import register_copy, resolve_prior
from bayes_gp.solvers.hsgp import HSGPLikelihood, hsgp_m_c
from bayes_gp.solvers.inducing import default_n_inducing, inducing_points

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


def _check_inducing_term(t, family: str) -> None:
    """A VFE/FITC term is a gaussian-family term (a factor input the design refuses, as for
    HSGP), refused otherwise with the reason."""
    if family != "gaussian":
        raise ValueError(
            f"{t.name}: approx={t.approx!r} approximates the gaussian family's marginal "
            f"likelihood (the noise is its residual's home); the {family} family integrates the "
            "latent GP out by Laplace over a dense kernel: use approx='hsgp' for a reduced-rank "
            "term there"
        )


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


#: The kinds of hyperparameters that ``gp(..., by=g, pooling=...)`` gives each level (as
#: :class:`~bayes_gp.HierarchicalGP` pools them); the others (``alpha``, ``period``) are shared.
POOLED_KINDS = ("ls", "eta")
#: Scale of the HalfNormal prior of a partially pooled hyperparameter's log-scale spread (the
#: hierarchical model's :data:`~bayes_gp.hierarchical.model.TAU_SCALE`).
POOLING_TAU_SCALE = 0.5
#: The median of a standard half-normal distribution, :math:`\Phi^{-1}(3/4)`.
HALFNORMAL_MEDIAN = 0.6744897501960817


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
        self._inducing: dict[str, np.ndarray] = {}  # a VFE/FITC term's inducing inputs
        for t in parsed.gp_terms:
            k = t.kernel
            cols = gp_columns(design, t)
            if not cols:  # gp(region): the levels' covariance alone, no continuous kernel
                self._gp_specs[t.name] = (None, cols, None)
                continue
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
            if t.approx in ("vfe", "fitc"):
                _check_inducing_term(t, family)
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
        self._term_residuals: dict[int, dict] = {}
        self._term_exact: dict[int, tuple[dict, dict]] = {}
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
            out += [f"{t.name}.{p}" for p in self._gp_params(t)]
        out += [f"{g.name}.sigma" for g in self.parsed.group_terms]
        out += (["Intercept"] if self._intercept else []) + list(self.design.fixed_labels)
        return out + list(self._family_params)

    def _fixed_eta(self, t) -> str | None:
        """The amplitude of a coregion term's continuous kernel fixed at 1 (its first ``eta``;
        a kernel object keeps its own), ``None`` for other terms."""
        spec = self._gp_specs[t.name][0]
        if t.cat != "coregion" or spec is None or not spec.catalogue:
            return None
        return next((p for p in spec.params if p.rsplit("_", 1)[-1] == "eta"), None)

    def _gp_params(self, t) -> list[str]:
        """A GP term's hyperparameters without its name: the continuous kernel's, then those of
        its factor input's levels (``rho``; ``W``, ``kappa``)."""
        spec = self._gp_specs[t.name][0]
        fixed = self._fixed_eta(t)
        out = [p for p in spec.params if p != fixed] if spec is not None else []
        if t.pooling != "shared":  # each level its own (the z's are not priors= names)
            names = {"partial": ("_mu", "_tau"), "none": ("_group",)}[t.pooling]
            out = [q for p in out for q in
                   ([p + e for e in names] if p.rsplit("_", 1)[-1] in POOLED_KINDS else [p])]  # fmt: skip
        if self.design.gp_factor[t.name] is None:
            return out
        if t.cat == "coregion":
            return [*out, "W", "kappa"]
        return [*out, *(["eta"] if spec is None else []), "rho"]

    def _factor_kernel(self, t, D: int, user: dict):
        """The covariance of a GP term's factor input over the levels' code column, its
        hyperparameters created with their priors (module docstring)."""
        f = self.design.gp_factor[t.name]
        col, L, s = self.design.factor_column(f), len(self.design.levels[f]), self._s
        if t.cat == "exchangeable":
            rho = resolve_prior(user, f"{t.name}.rho",
                                lambda n: pm.Beta(n, alpha=f64(2.0), beta=f64(2.0)))  # fmt: skip
            return OpenExchangeable(D, L, rho, active_dims=[col])
        R = t.rank or 1
        w0 = s / np.sqrt(2.0 * R)
        # started off W = 0, a stationary point of the fit (B depends on W W^T)
        W = resolve_prior(user, f"{t.name}.W", lambda n: pm.Normal(
            n, mu=f64(0.0), sigma=f64(w0), shape=(L, R), initval=np.full((L, R), w0)))  # fmt: skip
        kappa = resolve_prior(user, f"{t.name}.kappa", lambda n: pm.Gamma(
            n, alpha=f64(2.0), beta=f64(4.0 / s**2), shape=L))  # fmt: skip
        for name, v, ndim in ((f"{t.name}.W", W, 2), (f"{t.name}.kappa", kappa, 1)):
            shape = pt.as_tensor_variable(v).type.shape
            if len(shape) != ndim or shape[0] not in (None, L):
                want = f"({L}, R)" if ndim == 2 else f"({L},)"
                raise ValueError(
                    f"{name} must have the shape {want}, one row per level of {f!r} "
                    f"({list(self.design.levels[f])}), got {shape}"
                )
        # named dimensions for the posterior's arrays (nutpie splits dimension names at
        # commas, and its default names would contain the term's: gp(t, region)_dim_0)
        level = f"{f}.level".replace(",", ";")
        rank = pt.as_tensor_variable(W).type.shape[1]
        _name_dims(f"{t.name}.W", (level, f"{level}.rank{rank}"),
                   (list(self.design.levels[f]), list(range(rank or 0))))  # fmt: skip
        _name_dims(f"{t.name}.kappa", (level,), (list(self.design.levels[f]),))
        return Coregion(D, W=W, kappa=kappa, active_dims=[col])

    def _term_kernel(self, D: int):
        """Create every term's hyperparameters in the current model and return the sum of the
        terms' covariances (the callable kernel of the engine). For the low-rank engine
        (:mod:`bayes_gp.formula.lowrank`) each term's factor :math:`F_j` at the training rows
        (:math:`K_j = F_j F_j^\top`; ``None`` for an exact GP term) is kept beside it."""
        covs: dict[str, Any] = {}
        feats: dict[str, Any] = {}
        residuals: dict[str, Any] = {}  # a VFE/FITC term's diag(K - Q) at the training rows
        exacts: dict[str, Any] = {}  # an approximated term's exact covariance
        inducing: dict[str, InducingTerm] = {}  # a VFE/FITC term's own kernel (before by=)
        lowrank = getattr(self, "_lowrank", False)  # only that engine reads the factors
        s = self._s
        X = self.design.X
        for t in self.parsed.gp_terms:
            spec, cols, scale = self._gp_specs[t.name]
            if spec is None:  # gp(region): eta^2 B, or B of the coregion
                user = self._term_priors
                if t.cat == "exchangeable":  # eta first: the order of _gp_params
                    eta = resolve_prior(user, f"{t.name}.eta", lambda n: pm.HalfNormal(
                        n, sigma=f64(s)))  # fmt: skip
                    cov = pt.square(eta) * self._factor_kernel(t, D, user)
                else:
                    cov = self._factor_kernel(t, D, user)
                covs[t.name], feats[t.name] = cov, None
                continue
            scale = DataScale(scale.x_range, scale.x_sd, scale.x_sq_mean, self._loc, s)
            user = {**{f"{t.name}.{k}": v for k, v in spec.priors.items()}, **self._term_priors}
            hyper = {}
            fixed = self._fixed_eta(t)
            level = ([], [], [])  # pooling != "shared": placeholders, per-level, new level
            for p in spec.params:
                if p == fixed:
                    hyper[p] = 1.0
                    continue
                name = f"{t.name}.{p}"
                kind = p.rsplit("_", 1)[-1]
                if t.pooling != "shared" and kind in POOLED_KINDS:
                    hyper[p] = pt.dscalar(name)
                    for out, v in zip(level, (hyper[p], *self._level_values(t, p, kind, scale)),
                                      strict=True):  # fmt: skip
                        out.append(v)
                    continue
                if t.ard and p in spec.ard_params:
                    hyper[p] = self._ard_prior(name, user, scale, len(cols))
                    # one value per input, named (nutpie splits dimension names at commas,
                    # and its default one would hold the term's: gp(a, b).ls_dim_0)
                    inputs = [v for v in t.variables if v != self.design.gp_factor[t.name]]
                    _name_dims(name, (f"{t.name}.input".replace(",", ";"),), (inputs,))
                    continue

                def fallback(n, kind=kind, scale=scale):
                    return default_prior(n, scale, False, kind=kind)

                hyper[p] = resolve_prior(user, name, fallback)
            base = spec.build(len(cols), hyper)
            feats[t.name] = None
            # a model on one column keeps the catalogue's kernel (its structure is known)
            exact = base if D == 1 else OnColumns(base, D, cols)
            if t.approx == "hsgp":
                cov = self._hsgp_term(t, base, D, cols)
                if lowrank:
                    feats[t.name] = cov.features(pt.as_tensor_variable(X))
            elif t.approx in ("vfe", "fitc"):
                cov = inducing[t.name] = self._inducing_term(t, base, D, cols)
                if lowrank:
                    feats[t.name] = cov.features(pt.as_tensor_variable(X))
                    residuals[t.name] = cov.residual(pt.as_tensor_variable(X))
            else:
                cov = exact
            if self.design.gp_factor[t.name] is not None:
                cov = cov * self._factor_kernel(t, D, user)
            if t.by:
                col = self.design.factor_column(t.by)
                if level[0]:  # each level its own hyperparameters (bayes_gp.formula.covariance)
                    cov = LevelKernel(cov, D, col, *level)
                else:
                    cov = cov * SameGroup(D, col)
                exact = exact * SameGroup(D, col)
                if feats[t.name] is not None:  # one block of features per level
                    Z = _indicators(X[:, col])
                    F = feats[t.name]
                    feats[t.name] = (F[:, :, None] * Z[:, None, :]).reshape((X.shape[0], -1))
            if t.approx is not None:
                exacts[t.name] = exact
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
        self._term_residuals[id(pm.modelcontext(None))] = residuals
        self._term_exact[id(pm.modelcontext(None))] = (exacts, inducing)
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

    def _level_values(self, t, p: str, kind: str, scale) -> tuple[Any, Any]:
        r"""``(values (L,), new level's value)`` of hyperparameter ``p`` of a ``by=`` term whose
        levels each have their own (``pooling=``), created in the current model with the
        priors of :class:`~bayes_gp.HierarchicalGP`: ``"partial"`` non-centred
        :math:`\log \theta_g = \mu + \tau z_g`, :math:`\mu \sim N(\log \theta_{loc}, 1)`
        about the log of the default prior's median, :math:`\tau \sim
        \text{HalfNormal}(0.5)`, :math:`z_g \sim N(0, 1)` (``{name}_mu``, ``_tau``, ``_z``,
        the deterministic ``_group``), a new level at the population's median
        :math:`e^{\mu}`; ``"none"`` the default prior for each level (``{name}_group``), a new
        level at its median."""
        name = f"{t.name}.{p}"
        labels = list(self.design.levels[t.by])
        dim = f"{t.by}.level".replace(",", ";")
        L = len(labels)
        own = self._gp_specs[t.name][0].priors.get(p)
        if own is not None:  # a kernel object's own prior: the median of draws
            median = float(np.median(pm.draw(own, 4001, random_seed=0)))
        elif kind == "ls":
            median = float(np.mean(scale.x_range) / 3.0)
        else:
            median = HALFNORMAL_MEDIAN * scale.y_sd
        user = self._term_priors
        if t.pooling == "none":

            def each(n):
                if own is not None:
                    return register_copy(change_dist_size(own, [L]), n)
                if kind == "ls":
                    return pm.LogNormal(n, mu=f64(np.log(median)), sigma=f64(1.0), shape=L)
                return pm.HalfNormal(n, sigma=f64(scale.y_sd), shape=L)

            values = resolve_prior(user, f"{name}_group", each)
            _name_dims(f"{name}_group", (dim,), (labels,))
            return values, pt.as_tensor_variable(f64(median))
        mu = resolve_prior(user, f"{name}_mu", lambda n: pm.Normal(
            n, mu=f64(np.log(median)), sigma=f64(1.0)))  # fmt: skip
        tau = resolve_prior(user, f"{name}_tau",
                            lambda n: pm.HalfNormal(n, sigma=f64(POOLING_TAU_SCALE)))  # fmt: skip
        z = pm.Normal(f"{name}_z", mu=f64(0.0), sigma=f64(1.0), shape=L)
        _name_dims(f"{name}_z", (dim,), (labels,))
        values = pm.Deterministic(f"{name}_group", pt.exp(mu + tau * z), dims=(dim,))
        return values, pt.exp(mu)

    def _inducing_term(self, t, base, D: int, cols: list[int]) -> InducingTerm:
        """The VFE/FITC approximation of a ``gp(..., approx="vfe" | "fitc")`` term: ``m``
        inducing inputs (by default :func:`~bayes_gp.solvers.inducing.default_n_inducing`, the
        rule of GPRegression's own VFE/FITC, below the number of rows), k-means centres of the
        term's training inputs (:func:`~bayes_gp.solvers.inducing.inducing_points`, seed 0),
        fixed at the first build; the jitter on :math:`K_{ZZ}` GPRegression's:
        :math:`10^{-6}` of the data's variance, or the model's jitter when larger."""
        if t.name not in self._inducing:
            Xc = self.design.X[:, cols]
            m = t.m if t.m is not None else default_n_inducing(base, Xc)
            self._inducing[t.name] = inducing_points(Xc, min(int(m), Xc.shape[0]))
        floor = np.float64(DEFAULT_LATENT_JITTER * self._s**2)
        jitter = pt.maximum(floor, self.jitter_tensor)
        return InducingTerm(base, D, cols, self._inducing[t.name], jitter, t.approx)

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
            f = self.design.gp_factor[t.name]
            units = [f"{v} in years" if v in self.design.in_years else v for v in t.variables
                     if v != f]  # fmt: skip
            cov = f"{spec.name} on ({', '.join(units)})" if spec is not None else ""
            if f is not None:
                cov = self._factor_description(t, f, cov)
            if t.name in self._hsgp:
                m, c = self._hsgp[t.name][:2]
                cov = f"HSGP (m = {list(m)}, c = {[round(v, 3) for v in c]}) of {cov}"
            if t.name in self._inducing:
                cov = (f"{t.approx.upper()} ({len(self._inducing[t.name])} inducing inputs, "
                       f"k-means) of {cov}")  # fmt: skip
            if t.by:
                how = {"shared": "shared hyperparameters",
                       "partial": "length-scales and amplitudes partially pooled",
                       "none": "length-scales and amplitudes of its own"}[t.pooling]
                cov += f" × [{t.by} = {t.by}'] (one GP per level, {how})"
            params = tuple(f"{t.name}.{p}" for p in self._gp_params(t))
            rows.append(TermInfo(t.name, "gp", cov, params, tuple(t.variables)))
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

    def _factor_description(self, t, f: str, cov: str) -> str:
        """The terms table's covariance of a GP term with the factor input ``f``."""
        L = len(self.design.levels[f])
        if t.cat == "coregion":
            B = (f"B[{f}, {f}'], B = W Wᵀ + diag(κ) of the {L} levels (coregionalisation, rank "
                 f"{t.rank or 1}; a new level refused)")  # fmt: skip
            return f"{cov} (amplitude 1) × {B}" if cov else B
        B = (f"exchangeable correlation of {f}'s {L} levels (1 within a level, ρ between; a new "
             "level ρ with every level)")  # fmt: skip
        if not cov:
            return (f"η² × {B}: the random effect (1 | {f}) with σ² = η²(1 − ρ) plus a shared "
                    "constant of variance η²ρ")  # fmt: skip
        return f"{cov} × {B}"

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
        self._check_new_levels(Xn)
        return Xn

    def _check_new_levels(self, Xn: np.ndarray) -> None:
        """A coregion term has no row of :math:`B` for a level the training data lacked."""
        for t in self.parsed.gp_terms:
            f = self.design.gp_factor[t.name]
            if f is None or t.cat != "coregion":
                continue
            codes = Xn[:, self.design.factor_column(f)]
            if np.any(codes < 0):
                rows = np.flatnonzero(codes < 0)
                raise ValueError(
                    f"{t.name}: rows {rows[:10].tolist()} of the new data have levels of {f!r} "
                    f"that the training data lacks (its levels are "
                    f"{list(self.design.levels[f])}); cat='coregion' has no row of B = W Wᵀ + "
                    "diag(κ) for a new level. Predict at known levels, or use the exchangeable "
                    "kernel (cat='exchangeable'), under which a new level is correlated ρ with "
                    "every known one"
                )

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


class _InducingTermView:
    """What :func:`bayes_gp.solvers.approx_checks.inducing_coverage_check` reads of a VFE/FITC
    likelihood (``cov``, ``X``, ``Xu``, ``kind``, ``rvs``), for one inducing-input term of a
    formula model: its base kernel on the term's own columns."""

    def __init__(self, model, term, cov):
        ind = cov if isinstance(cov, InducingTerm) else next(
            f for f in kernel_factors(cov) if isinstance(f, InducingTerm))  # fmt: skip
        self.cov = ind.base
        self.X = model.design.X[:, model._gp_specs[term.name][1]]
        self.Xu = model._inducing[term.name]
        self.kind = term.approx
        self.rvs = list(model.model.free_RVs)


def _name_dims(name: str, dims: tuple[str, ...], values: tuple[list, ...]) -> None:
    """Name the dimensions of the current model's free variable ``name`` (a default prior or
    the user's) when it has none, adding the coordinates; constants and variables of unknown
    shape are left as they are."""
    model = pm.modelcontext(None)
    rv = model.named_vars.get(name)
    if rv is None or rv not in model.free_RVs or model.named_vars_to_dims.get(name):
        return
    if tuple(rv.type.shape) != tuple(len(v) for v in values):
        return
    for d, v in zip(dims, values, strict=True):
        if d not in model.coords:
            model.add_coord(d, v)
    model.named_vars_to_dims[name] = dims


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
