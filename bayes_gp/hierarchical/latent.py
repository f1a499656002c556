r"""The hierarchical GP with a non-Gaussian likelihood (counts, proportions, binary outcomes,
outliers): ``HierarchicalLatentGP(..., likelihood="poisson")`` (or
:func:`~bayes_gp.hierarchical.factory.hierarchical_gp`, which picks the class by likelihood).

On long-format data (one row per observation, a group label per row),

.. math::
   f_{gi} = m(x_{gi}) + f_0(x_{gi}) + f_g(x_{gi}) + b_g, \qquad
   y_{gi} \mid f_{gi} \sim p(y_{gi} \mid f_{gi}, \phi),

with the population function :math:`f_0`, the group deviations :math:`f_g`, the random
intercepts :math:`b_g` and the mean :math:`m(x) = m_0 + \beta^\top (c - \bar c)` of
:class:`~bayes_gp.HierarchicalGP` (Hensman, Lawrence & Rattray 2013, eq. 2; the same pooling
choices, priors and variable names: ``ls_mu``, ``ls_tau``, ``ls_z``, ``ls_group``, ``f0_ls``,
``intercept_sd``, ``beta``), here on the latent scale of a likelihood of
:class:`~bayes_gp.LatentGP` (:mod:`bayes_gp.latent.likelihoods`); :math:`m_0` is the data's
location on that scale, fixed, as ``LatentGP``'s default mean. The latent vector
:math:`f = (f_{gi})` is a GP on the augmented inputs :math:`(x, g)`:

.. math::
   k\big((x, g), (x', g')\big) = k_{\theta_0}(x, x')
       + [g = g']\,\big(k_{\theta_g}(x, x') + \tau_b^2\big),

i.e. :math:`K = Z K_0 Z^\top + \operatorname{blockdiag}_g(K_g + \tau_b^2 11^\top)`, the
Gaussian model's covariance :math:`C` without its noise diagonal
(:mod:`bayes_gp.hierarchical.model`). :class:`HierarchicalLatentGP` is a
:class:`~bayes_gp.LatentGP` whose covariance and mean functions are these
(:class:`HierarchicalCovariance`, :class:`HierarchicalMean`): the latent :math:`f` is
integrated out by the Laplace approximation with the dense :math:`N \times N` covariance
(:class:`~bayes_gp.latent.op.LaplaceLogp`: the evidence of R&W eq. 3.32 and its gradient, R&W
Alg. 5.1 generalised), so ``fit_map`` / ``fit_laplace`` (type-II), ``sample(method="nuts")``
(NUTS over the hyperparameters), ``sample(method="nuts_joint")`` (joint NUTS), ``fit_vi``, LA-LOO
and the report methods are ``LatentGP``'s. A dense latent covariance costs :math:`O(N^3)` per
evidence evaluation (several Newton steps), which is where this model fits: at most
:data:`MAX_LATENT_ROWS` rows, and no ``approx="hsgp"`` (the HSGP option integrates the basis
weights out in closed form, which only the Gaussian likelihood allows).

A **new group**'s latent values (a label not in the data) covary with the training latents
through :math:`f_0` only; their prior variance adds a fresh deviation and intercept,
:math:`k_0(x, x) + k_{\theta_*}(x, x) + \tau_b^2`, with :math:`\theta_*` from the population
distribution: one draw of :math:`\log\ell_* = \mu_\ell + \tau_\ell z` per posterior draw (NUTS)
or the population location :math:`\exp(\mu_\ell)` (a type-II fit), as
:meth:`HierarchicalGP.predict <bayes_gp.HierarchicalGP.predict>` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pytensor.graph.replace import graph_replace

from bayes_gp._validation import f64, new_inputs
from bayes_gp.hierarchical.columns import ParameterColumns
from bayes_gp.hierarchical.model import (
    _BATCHED,
    GROUP_DIM,
    GroupedSpec,
    _column,
    _numeric,
    register_latent_model,
)
from bayes_gp.kernels.catalogue import check_kernel_ard, kernel_formula, kernel_spec
from bayes_gp.latent.model import (
    DEFAULT_ABSOLUTE_JITTER,
    LatentFit,
    LatentGP,
    make_likelihood,
)
from bayes_gp.latent.model import LIKELIHOODS as LATENT_LIKELIHOODS
from bayes_gp.linalg import EAGER_MODE
from bayes_gp.protocol import HeldOutPredictive, is_nuts

__all__ = ["HierarchicalLatentGP", "HierarchicalCovariance", "HierarchicalMean", "MAX_LATENT_ROWS"]

#: The most rows the latent hierarchical model takes: its Laplace approximation factorises the
#: dense N x N latent covariance several times per evidence evaluation (N = 3000: ~72 MB per
#: matrix and ~1 s per Cholesky factor on this machine type), and NUTS needs thousands of them.
MAX_LATENT_ROWS = 3000


class HierarchicalCovariance(pm.gp.cov.Covariance):
    r"""The hierarchical covariance on augmented inputs :math:`(x, g, c)` (``D`` input columns,
    the group code, covariate columns that it ignores):

    .. math::
       k\big((x, g), (x', g')\big) = k_{\theta_0}(x, x')
           + [g = g' \ge 0]\,\big(k_{\theta_g}(x, x') + \tau_b^2\big)

    (module docstring). ``tg`` (G, P) holds each group's kernel hyperparameters in the order of
    ``spec.params``, ``ts`` :math:`f_0`'s (when ``shared``) then :math:`\tau_b` (when
    ``random_intercept``). A row with code :math:`-1` (a new group) covaries through
    :math:`k_0` only: its deviation's hyperparameters are not in the model, and
    :meth:`new_group_diag` gives that part of its variance.

    For the single catalogue stationary kernels every pair's deviation comes from one
    evaluation of :math:`\eta_g^2 k(|x - x'|^2 / \ell_g^2)` with the row's group
    hyperparameters (as :meth:`HierarchicalGP._blocks <bayes_gp.HierarchicalGP>`); other
    catalogue expressions sum one masked kernel matrix per group.
    """

    def __init__(self, spec, D: int, n_cols: int, tg, ts, *, shared: bool,
                 random_intercept: bool, population: dict | None = None,
                 columns: ParameterColumns | None = None):  # fmt: skip
        super().__init__(n_cols)
        self.spec, self.D, self.tg, self.ts = spec, int(D), tg, ts
        self.columns = columns or ParameterColumns.of(spec.params, (), (), D, shared=shared,
                                                      random_intercept=random_intercept)  # fmt: skip
        self.n_groups = int(tg.type.shape[0]) if tg.type.shape[0] is not None else None
        self.shared, self.random_intercept = bool(shared), bool(random_intercept)
        self.population = population or {}
        self._unit = _BATCHED.get(spec.name) if spec.catalogue else None

    # -------------------------------------------------------------- pieces
    def _params(self, row) -> dict:
        return self.columns.kernel_args(row, self.spec.params)

    def _tau2(self):
        if not self.random_intercept:
            return 0.0
        return pt.square(self.ts[self.columns.tau_b])

    def _population(self, x, xs=None, diag: bool = False):
        cov = self.spec.build(self.D,
                              self.columns.kernel_args(self.ts, self.spec.params, population=True))  # fmt: skip
        return cov(x, diag=True) if diag else cov(x, xs)

    def _scaled_d2(self, x, xs, ls):
        r""":math:`\sum_d (x_d - x'_d)^2 / \ell_d^2` with each row's own length-scale(s)
        ``ls`` ((n,) isotropic, (n, D) under ARD)."""
        if ls.ndim == 2:
            return pt.sum(pt.square((x[:, None, :] - xs[None, :, :]) / ls[:, None, :]), axis=-1)
        d2 = pt.sum(pt.square(x[:, None, :] - xs[None, :, :]), axis=-1)
        return d2 / pt.square(ls[:, None])

    def _split(self, X):
        X = pt.as_tensor_variable(X)
        return X[:, : self.D], X[:, self.D]

    def _deviation(self, x, xs, c, cs):
        """:math:`[g = g' \\ge 0]\\, k_{\\theta_g}(x, x')` (without the intercept)."""
        if self._unit is not None:
            j = self.columns.group
            rows = self.tg[pt.cast(pt.maximum(c, 0.0), "int64")]  # the row's own group
            ls, eta = rows[:, j["ls"]], rows[:, j["eta"]][:, None]
            extra = {"alpha": self.tg[0, j["alpha"]]} if "alpha" in j else {}
            k1 = self._unit(self.D, ls=1.0, **extra)
            return pt.square(eta) * k1.full_from_distance(self._scaled_d2(x, xs, ls), squared=True)
        K = 0.0
        for g in range(self.n_groups):
            cov = self.spec.build(self.D, self._params(self.tg[g]))
            mask = pt.outer(pt.eq(c, g), pt.eq(cs, g))
            K = K + mask * cov(x, xs)
        return K

    # ----------------------------------------------------------------- API
    def full(self, X, Xs=None):
        x, c = self._split(X)
        xs, cs = (x, c) if Xs is None else self._split(Xs)
        same = pt.and_(pt.eq(c[:, None], cs[None, :]), pt.ge(c, 0.0)[:, None])
        K = pt.switch(same, self._deviation(x, xs, c, cs) + self._tau2(), 0.0)
        if self.shared:
            K = K + self._population(x, xs)
        return K

    def diag(self, X):
        x, c = self._split(X)
        known = pt.ge(c, 0.0)
        if self._unit is not None:
            j = self.columns.group
            rows = self.tg[pt.cast(pt.maximum(c, 0.0), "int64")]
            extra = {"alpha": self.tg[0, j["alpha"]]} if "alpha" in j else {}
            k1 = self._unit(self.D, ls=1.0, **extra)
            dev = pt.square(rows[:, j["eta"]]) * k1.full_from_distance(
                pt.zeros_like(c), squared=True
            )
        else:
            dev = 0.0
            for g in range(self.n_groups):
                cov = self.spec.build(self.D, self._params(self.tg[g]))
                dev = dev + pt.eq(c, g) * cov(x, diag=True)
        v = pt.switch(known, dev + self._tau2(), 0.0)
        if self.shared:
            v = v + self._population(x, diag=True)
        return v * pt.ones_like(c)

    def new_group_diag(self, row, X):
        r""":math:`k_{\theta_*}(x, x) + \tau_b^2` of a new group with hyperparameter row ``row``
        (the part of its prior variance that :meth:`diag` leaves out)."""
        x, c = self._split(X)
        cov = self.spec.build(self.D, self._params(row))
        return cov(x, diag=True) * pt.ones_like(c) + self._tau2()


class HierarchicalMean(pm.gp.mean.Mean):
    r""":math:`m(x, g, c) = m_0 + \beta^\top (c - \bar c)` on the augmented inputs, the centred
    covariates from column ``start`` on (``beta`` ``None``: the constant :math:`m_0`)."""

    def __init__(self, m0: float, beta, start: int):
        super().__init__()
        self.m0, self.beta, self.start = float(m0), beta, int(start)

    def __call__(self, X):
        X = pt.as_tensor_variable(X)
        m = pt.as_tensor_variable(f64(self.m0)) * pt.ones(X.shape[0])
        if self.beta is not None:
            m = m + pt.dot(X[:, self.start :], self.beta)
        return m


@register_latent_model
class HierarchicalLatentGP(GroupedSpec, LatentGP):
    r"""The hierarchical GP with a non-Gaussian likelihood (module docstring), as
    ``hierarchical_gp(data, x, y, group, kernel, likelihood=...)`` builds it.

    Parameters
    ----------
    data, x, y, group, kernel, shared, pooling, covariates, random_intercept, priors
        As :class:`~bayes_gp.HierarchicalGP`'s; the group hyperparameters are the kernel's
        length-scales and amplitudes (no ``sigma``: the likelihood's parameters
        ``dispersion``, ``nu``, ``sigma`` are shared by every group, with
        :class:`~bayes_gp.LatentGP`'s priors). Amplitude, intercept and covariate priors are
        scaled to the latent scale (:math:`s = 2` on a link scale, ``LatentGP``'s
        :data:`~bayes_gp.latent.model.LINK_SCALE`; :math:`\operatorname{sd}(y)` for
        ``"student_t"``).
    likelihood : str
        ``"poisson"``, ``"negative_binomial"``, ``"binomial"``, ``"bernoulli"``,
        ``"student_t"`` (or ``"gaussian"``, the Gaussian likelihood through Laplace, which is
        exact: a check of the Gaussian ``HierarchicalGP``).
    exposure, trials : str or array_like, optional
        The exposure (poisson, negative_binomial) and the trials (binomial): a column name of
        ``data`` (read again from the rows passed to ``predict``), or one value per row (as
        :class:`~bayes_gp.LatentGP` takes them; ``predict`` then takes ``size=``, default 1).
    link : str, optional
        ``"logit"`` or ``"probit"`` for ``"bernoulli"``.
    censored, upper : str or array_like, optional
        The censoring codes of ``"weibull"``, ``"lognormal"`` and ``"censored_gaussian"``
        and the censored Gaussian's interval upper limits (:class:`~bayes_gp.LatentGP`'s
        ``censored=``, ``upper=``): a column name of ``data`` or one value per row.
    jitter : float, optional
        As :class:`~bayes_gp.LatentGP`'s (relative to the latent scale :math:`s^2`; ``None``:
        an absolute ``1e-6``).
    approx, approx_options
        Must be ``None``: refused with a ``ValueError`` (module docstring).
    ard : bool
        A length-scale per input dimension, pooled per dimension, as
        :class:`~bayes_gp.HierarchicalGP`'s ``ard``.

    Raises
    ------
    ValueError
        An unknown likelihood, ``exposure`` / ``trials`` for a likelihood that has none or a
        column not in the data, more than :data:`MAX_LATENT_ROWS` rows, an ``approx``, and the
        bad inputs :class:`~bayes_gp.HierarchicalGP` names.
    """

    noise_params: ClassVar[tuple[str, ...]] = ()
    _fit_type_name = "LatentFit (fit_map, fit_laplace, fit_vi)"

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
        likelihood: str = "poisson",
        priors: Mapping[str, Any] | None = None,
        jitter: float | None = None,
        approx: str | None = None,
        approx_options: Mapping[str, Any] | None = None,
        exposure: str | Any = None,
        trials: str | Any = None,
        link: str | None = None,
        ard: bool = False,
        censored: str | Any = None,
        upper: str | Any = None,
    ):
        if not isinstance(data, pd.DataFrame):
            raise TypeError(f"`data` must be a pandas DataFrame, got {type(data).__name__}")
        if not isinstance(likelihood, str) or likelihood not in LATENT_LIKELIHOODS:
            raise ValueError(
                f"`likelihood`: {likelihood!r} is not implemented for a hierarchical GP; "
                f"supported: {list(LATENT_LIKELIHOODS)}"
            )
        if likelihood == "ordinal":
            raise ValueError(
                "likelihood='ordinal' is not available for a hierarchical GP: its mean has a "
                "population intercept, which is not identified together with the ordinal "
                "cut-points; use LatentGP(..., likelihood='ordinal') or the formula interface "
                "(family='ordinal', with (1 | group) terms)"
            )
        if approx is not None or approx_options is not None:
            raise ValueError(
                f"`approx`: {approx!r} is not available with likelihood={likelihood!r}: the "
                "Laplace approximation of a non-Gaussian likelihood needs the dense latent "
                "covariance (the HSGP option integrates its weights out in closed form, which "
                "only the Gaussian likelihood allows); use approx=None"
            )
        self._check_arguments(kernel, shared, random_intercept, jitter, data)
        n = len(data)
        if n > MAX_LATENT_ROWS:
            raise ValueError(
                f"`data` has {n} rows; a hierarchical GP with likelihood={likelihood!r} factorises "
                f"the dense latent covariance (Laplace) and takes at most {MAX_LATENT_ROWS} "
                "rows: aggregate the data (e.g. counts per input and group, with exposure) or "
                "use fewer groups"
            )
        counts = [k for k, (cls, _) in LATENT_LIKELIHOODS.items() if cls.size_name == "exposure"]
        if exposure is not None and likelihood not in counts:
            raise ValueError(
                f"`exposure` applies to the count likelihoods {list(counts)}, not to "
                f"{likelihood!r}"
            )
        if trials is not None and likelihood != "binomial":
            raise ValueError(f"`trials` applies to the binomial likelihood, not to {likelihood!r}")
        yv = self._read_data(data, x, y, group, covariates)
        ex, tr = (value if not isinstance(value, str) else _numeric(_column(data, value, role), role)
                  for role, value in (("exposure", exposure), ("trials", trials)))  # fmt: skip
        cens = (_numeric(_column(data, censored, "censored"), "censored")
                if isinstance(censored, str) else censored)  # fmt: skip
        up = (_column(data, upper, "upper").to_numpy(dtype=float) if isinstance(upper, str)
              else upper)  # NaN allowed where a row is not interval-censored  # fmt: skip
        lik, link = make_likelihood(likelihood, link, yv, n, ex, tr, censored=cens, upper=up)
        self.likelihood_name, self.link, self.likelihood = likelihood, link, lik
        self.exposure_name, self.trials_name = (v if isinstance(v, str) else None
                                                for v in (exposure, trials))  # fmt: skip
        self.kernel, self.spec = kernel, kernel_spec(kernel)
        check_kernel_ard(self.spec, ard)
        self.ard, self.mean = bool(ard), None
        self.y = lik.y
        self.shared, self.random_intercept = bool(shared), bool(random_intercept)
        self._set_columns()
        self.pooling = self._pooling(pooling)
        self.scale = self._latent_scale()
        self.priors = dict(priors or {})
        known = [*self._prior_names(), *lik.param_names]
        unknown = set(self.priors) - set(known)
        if unknown:
            raise ValueError(
                f"`priors` has unknown names {sorted(unknown)}; this model's are {known}"
                + self._pooling_hint()
            )
        s2 = self.scale.y_sd**2
        self._init_jitter(jitter, s2, DEFAULT_ABSOLUTE_JITTER / s2)
        self._augmented = np.column_stack(
            [self.X, self.codes.astype(float), self.Xc - self.c_mean]
        )  # fmt: skip
        self._fns: dict = {}
        self._latent_pm = None
        self._new_group_seed: int = 0
        self._new_group_rng = None
        self.model = self._build()

    # ------------------------------------------------------------------ model
    @property
    def _kernel_inputs(self) -> np.ndarray:
        """The augmented inputs ``[x, group code, centred covariates]`` of the training rows."""
        return self._augmented

    def _declare(self):
        """The hierarchy's variables (:meth:`GroupedSpec._declare_hierarchy`), its covariance
        and mean functions on the augmented inputs, and the likelihood's parameters, in the
        current model."""
        model = pm.modelcontext(None)
        if GROUP_DIM not in model.coords:
            model.add_coord(GROUP_DIM, self.labels)
        if self.covariates and "covariate" not in model.coords:
            model.add_coord("covariate", [str(c) for c in self.covariates])
        h = self._declare_hierarchy()
        tg = pt.stack([pt.cast(c, "float64") for c in h.columns], axis=1)
        ts = (pt.concatenate([pt.atleast_1d(pt.cast(pt.as_tensor_variable(v), "float64"))
                              for v in h.shared])
              if h.shared else pt.zeros(0))  # fmt: skip
        D = self.X.shape[1]
        cov = HierarchicalCovariance(self.spec, D, self._augmented.shape[1], tg, ts,
                                     shared=self.shared, random_intercept=self.random_intercept,
                                     population=h.population, columns=self.columns)  # fmt: skip
        cov.n_groups = len(self.labels)  # the static shape of tg may be unknown
        mean = HierarchicalMean(self.scale.y_mean, h.beta, D + 1)
        return cov, mean, self._likelihood_priors()

    def _build(self) -> pm.Model:
        model = super()._build()
        self._population = self._cov.population  # the evidence model's (new groups)
        return model

    # ------------------------------------------------------------- fitting
    def fit_map(
        self,
        n_restarts: int = 5,
        prior: bool = True,
        random_seed: int | None = None,
        *,
        maxiter: int = 1000,
    ) -> LatentFit:
        """:class:`~bayes_gp.HierarchicalGP`'s name for the type-II fit: :meth:`fit_laplace`
        (MAP with ``prior=True``; the partially pooled ``*_z`` keep their :math:`N(0, 1)`
        priors only then)."""
        return self.fit_laplace(n_restarts, prior, random_seed, maxiter=maxiter)

    # ---------------------------------------------------------- prediction
    def _check_new(self, X_new) -> np.ndarray:
        """Augmented inputs of new rows: a DataFrame with the x, group and covariate columns
        (a label not in the data is a new group), or bare inputs, taken as a new group's with
        the covariates at their means (the population curve of :meth:`bands`)."""
        if isinstance(X_new, pd.DataFrame):
            Xn, Cn, codes, _ = self._new_rows(X_new)
        else:
            Xn = new_inputs(X_new, self.X.shape[1])
            codes = np.full(Xn.shape[0], -1)
            Cn = np.zeros((Xn.shape[0], len(self.covariates)))
        return np.column_stack([Xn, codes.astype(float), Cn])

    def _new_group_diag(self, values, row, Xn) -> np.ndarray:
        def build():
            rvs = list(self.model.free_RVs)
            holders = [rv.type() for rv in rvs]
            r, Xv = pt.dvector("row"), pt.dmatrix("X_new")
            out = graph_replace([self._cov.new_group_diag(r, Xv)],
                                dict(zip(rvs, holders, strict=True)), strict=False)  # fmt: skip
            return pytensor.function([*holders, r, Xv], out, mode=EAGER_MODE,
                                     on_unused_input="ignore")  # fmt: skip

        return np.asarray(self._fn("new_group_diag", build)(*values, row, Xn)[0], float)

    def _new(self, values, Xn):
        """``LatentGP._new`` (cross-covariance, prior variance, mean at ``Xn``) with a new
        group's deviation and intercept variance added at its rows (module docstring)."""
        Ks, kss, m_new = super()._new(values, Xn)
        new = Xn[:, self.X.shape[1]] < 0
        if new.any():
            row = self._new_group_row(values, None, self._new_group_rng)
            kss = np.array(kss, float)
            kss[new] += self._new_group_diag(values, row, Xn[new])
        return Ks, kss, m_new

    def _latent_moments(self, Xn, fit, max_draws: int):
        """``LatentGP._latent_moments`` with a new group's hyperparameters drawn once per
        posterior draw (NUTS, seeded) or at the population location (a type-II fit)."""
        self._new_group_rng = (np.random.default_rng(self._new_group_seed) if is_nuts(fit)
                               else None)  # fmt: skip
        try:
            return super()._latent_moments(Xn, fit, max_draws)
        finally:
            self._new_group_rng = None

    def _size(self, X_new, size):
        """Exposure or trials at new rows: ``size`` if given, else the data frame's column of
        that name when it has one (else 1)."""
        name = self.exposure_name or self.trials_name
        if size is None and name is not None and isinstance(X_new, pd.DataFrame):
            if name in X_new.columns:
                return _numeric(X_new[name], name)
        return size

    def predict(self, X_new, fit, *, size=None, max_draws: int = 200, random_seed: int = 0):
        """:meth:`LatentGP.predict <bayes_gp.LatentGP.predict>` at the rows of the DataFrame
        ``X_new`` (x, group and covariate columns; the exposure or trials column, when present,
        is ``size``): a known group's latent :math:`f_0 + f_g + b_g` given all the data, a new
        group's from :math:`f_0`'s posterior plus a fresh deviation (module docstring;
        ``random_seed`` also seeds its hyperparameter draws)."""
        self._new_group_seed = int(random_seed)
        try:
            return super().predict(X_new, fit, size=self._size(X_new, size),
                                   max_draws=max_draws, random_seed=random_seed)  # fmt: skip
        finally:
            self._new_group_seed = 0

    def held_out_predictive(self, X_new, y, fit, *, size=None) -> HeldOutPredictive:
        """:meth:`LatentGP.held_out_predictive <bayes_gp.LatentGP.held_out_predictive>` at the
        rows of the DataFrame ``X_new`` (its exposure or trials column as ``size``)."""
        return super().held_out_predictive(X_new, y, fit, size=self._size(X_new, size))

    # ------------------------------------------------------- model protocol
    @property
    def label(self) -> str:
        return f"hierarchical {self.spec.name}, {self.likelihood_name}"

    def describe(self) -> list[tuple[str, object]]:
        """Kernel, structure, pooling, likelihood, data size."""
        lik = self.likelihood
        params = ", ".join(lik.param_names) or "none"
        rows = [
            ("model", repr(self)),
            ("kernel", self.spec.name + (" (ARD: a length-scale per input)" if self.ard else "")),
            ("kernel formula", kernel_formula(self.spec)),
            ("equation", self.spec.equation or "–"),
            ("structure", "f = m + f0 + f_g (Hensman et al. 2013)" if self.shared
             else "f = m + f_g (independent group GPs, pooled hyperparameters)"),
            ("pooling", ", ".join(f"{p}: {m}" for p, m in self.pooling.items())
             + (f" ({self.pooling_note})" if self.pooling_note else "")),
            ("random intercepts", "yes (in the latent covariance)" if self.random_intercept
             else "no"),
            ("covariates", ", ".join(map(str, self.covariates)) or "none"),
            ("likelihood", f"{self.likelihood_name}, {self.link} link; parameters: {params} "
             "(shared); latent f0, f_g integrated out by Laplace (dense N x N covariance)"),
            ("mean", f"{self.scale.y_mean:.4g} (the data's location on the {self.link} scale, "
             "fixed)" + (" + covariate effects" if self.covariates else "")),
            ("groups", len(self.labels)),
            ("observations n", self.X.shape[0]),
            ("inputs", ", ".join(self.feature_names)),
        ]  # fmt: skip
        size = lik.sizes()
        if size is not None:
            rows.append((lik.size_name, f"{size.min():g} … {size.max():g} (total {size.sum():g})"))
        return rows

    def __repr__(self) -> str:
        return (f"HierarchicalGP(n={self.X.shape[0]}, groups={len(self.labels)}, "
                f"kernel={self.spec.name!r}, shared={self.shared}, "
                f"{'ard=True, ' if self.ard else ''}likelihood={self.likelihood_name!r})")  # fmt: skip

