r"""The multi-output GP model: the intrinsic coregionalisation model (ICM) and the linear model of
coregionalisation (LMC), with fully Bayesian or type-II hyperparameters.

Outputs :math:`f_1, \dots, f_P` at inputs :math:`x` (Álvarez, Rosasco & Lawrence 2012, eqs. 4.3
and 4.6; Bonilla, Chai & Williams 2008, eq. 1):

.. math::
   \operatorname{cov}(f_p(x), f_{p'}(x')) = \sum_{q=1}^{Q} (B_q)_{pp'}\, k_q(x, x'),
   \qquad B_q = W_q W_q^T + \operatorname{diag}(\kappa_q),

   y_p(x) = m_p(x) + f_p(x) + \varepsilon_p, \qquad \varepsilon_p \sim N(0, \sigma_p^2),

with :math:`W_q \in \mathbb{R}^{P \times r_q}` and :math:`\kappa_q \ge 0`. One term
(:math:`Q = 1`) is the ICM; several (``kernel=["expquad", "matern52"]``) the LMC. Each kernel
:math:`k_q` has unit amplitude: the output amplitudes are in :math:`B_q`.

The log marginal likelihood is exact (R&W eq. 2.30) on the observed entries of ``Y`` (``NaN``
marks a missing one: heterotopic data): through the Kronecker eigendecompositions when every
output is observed at every input and there is one term
(:mod:`bayes_gp.multioutput.kronecker`, closed-form gradient), otherwise the dense normal
density of the observed entries (:func:`bayes_gp.multioutput.icm.lmc_marginal`).

**Identifiability of W.** :math:`B = WW^T + \operatorname{diag}(\kappa)` is unchanged by
:math:`W \to WQ` for any orthogonal :math:`Q` (signs and rotations), so an unconstrained
:math:`W` has a posterior with :math:`2^r` or a continuum of equivalent modes and NUTS chains
land in different ones (:math:`\hat R \gg 1`). Here :math:`W` is constrained to be
lower-trapezoidal with a positive diagonal, like a Cholesky factor: :math:`W_{pj} = 0` for
:math:`j > p` and :math:`W_{jj} > 0` (for rank 1: :math:`W_{11} > 0`). Every rank-:math:`r`
:math:`WW^T` whose leading :math:`r \times r` block of :math:`W` is non-singular has exactly one
such factor (the LQ decomposition of :math:`W`), so no generality is lost beyond that
ordering condition: put first an output that loads on the shared components. The free
hyperparameters are ``W_diag`` (:math:`W_{jj} > 0`, log-transformed) and ``W_offdiag``
(the entries below the diagonal, row by row); ``W`` itself is a deterministic of the PyMC
model, and :meth:`MultiOutputGP.log_marginal_likelihood` accepts any ``W`` (it is brought to
that form without changing :math:`B`).

**Default priors**, scaled by each output's standard deviation :math:`s_p` over its observed
entries (as :class:`~bayes_gp.GPRegression` scales :math:`\eta` and :math:`\sigma` by
:math:`s_y`): :math:`W_{jj} \sim \mathrm{HalfNormal}(s_j)`, :math:`W_{pj} \sim N(0, s_p^2)`,
:math:`\kappa_p \sim \mathrm{HalfNormal}(s_p^2)` (a variance), :math:`\sigma_p \sim
\mathrm{HalfNormal}(s_p)`; the kernel's length-scales (and periods, ...) as in the catalogue
(:mod:`bayes_gp.kernels.catalogue`); the mean of output :math:`p` fixed at its sample mean
(``mean=None``), zero, :math:`c_p \sim N(\bar y_p, (2 s_p)^2)` (``mean="constant"``), or linear
(``mean="linear"``), :math:`m_p(x) = c_p + x^T \beta_p` with the intercept
:math:`c_p \sim N(\bar y_p, (2 s_p)^2)` and the slopes :math:`\beta_{pd} \sim N(0, (2 s_p /
s_{x_d})^2)` (``intercept`` (P,) and ``slope`` (P, D), named and scaled as
:class:`~bayes_gp.GPRegression`'s linear mean, one per output; :math:`s_{x_d}` the standard
deviation of input :math:`d`). A mean changes only the residuals :math:`\operatorname{vec}(Y -
M)`, :math:`M_{ip} = m_p(x_i)`, never the covariance: the Kronecker path is unchanged.

References
----------
M. A. Álvarez, L. Rosasco and N. D. Lawrence, "Kernels for vector-valued functions: a review",
Foundations and Trends in Machine Learning 4(3), 2012. E. V. Bonilla, K. M. A. Chai and
C. K. I. Williams, "Multi-task Gaussian process prediction", NeurIPS 2008. C. E. Rasmussen and
C. K. I. Williams, *Gaussian Processes for Machine Learning*, MIT Press 2006 (R&W).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from scipy.linalg import solve_triangular

from bayes_gp._arguments import renamed_argument
from bayes_gp._validation import (
    as_inputs,
    check_aligned,
    check_jitter,
    f64,
    hyperparameter_values,
    new_inputs,
)
from bayes_gp.inference.degenerate import model_spacing
from bayes_gp.inference.jitter import (
    DEFAULT_JITTER,
    N_PRIOR_DRAWS,
    JitterChoice,
    PreflightJitter,
    advice,
    check_points,
    preflight,
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
    KernelSpec,
    check_kernel_ard,
    default_prior,
    kernel_formula,
    kernel_spec,
)
from bayes_gp.linalg import jittered_cholesky, single_blas_thread
from bayes_gp.multioutput.icm import icm_data, linear_mean, lmc_marginal, predict_terms
from bayes_gp.multioutput.kronecker import kronecker_factors
from bayes_gp.predictive import CI_QUANTILES, Z_CI, factorize, gaussian_mixture_cdf, loo_log_density
from bayes_gp.priors import resolve_prior
from bayes_gp.protocol import Bands, GPModel, HeldOutPredictive, is_nuts

__all__ = ["MultiOutputGP", "MultiOutputPrediction"]

#: Largest number of observed entries for which the pre-flight check factorises prior draws
#: (each costs a dense Cholesky factor of that size); above it only the initial point.
PREFLIGHT_DRAWS_MAX = 3000
#: Largest number of observed entries for which replicated data are drawn jointly.
PPC_JOINT_MAX = 3000
#: The ``mean=`` options besides ``None`` (each output's sample mean, fixed).
MEANS = ("zero", "constant", "linear")


@dataclass(frozen=True)
class MultiOutputPrediction:
    """Predictive distribution of every output at new inputs.

    Attributes
    ----------
    outputs : list of str
        The outputs' names (columns of the arrays).
    mean, sd : ndarray (m, P)
        Predictive means and standard deviations (of :math:`f_p`, or of :math:`y_p` with
        ``include_noise``).
    lower, upper : ndarray (m, P)
        Central 94% intervals (Gaussian for a MAP fit; quantiles of predictive draws for NUTS).
    cov : ndarray (m, P, P) or None
        Cross-covariance between the outputs at each new input (MAP fits; ``None`` for NUTS).
    extra : dict
        ``jitter``: the largest jitter added to the observed entries' covariance beyond the
        model's own (0 normally); ``n_draws`` for NUTS.
    """

    outputs: list
    mean: np.ndarray
    sd: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    cov: np.ndarray | None = None
    extra: dict = field(default_factory=dict)

    @property
    def var(self) -> np.ndarray:
        return self.sd**2

    def correlation(self) -> np.ndarray:
        """The predictive correlation between the outputs at each new input, (m, P, P) (MAP
        fits only)."""
        if self.cov is None:
            raise ValueError("the cross-covariance is only available for MAP fits")
        d = np.sqrt(np.einsum("jpp->jp", self.cov))
        return self.cov / (d[:, :, None] * d[:, None, :])


@dataclass(frozen=True)
class _Term:
    """One coregionalisation term: its kernel (unit amplitude) and rank."""

    label: str  # "" for the ICM (unprefixed names), the kernel's label in an LMC
    spec: KernelSpec
    params: tuple[str, ...]  # the kernel's free hyperparameters, unprefixed
    rank: int
    fixed: Mapping[str, float]  # amplitudes fixed at 1 (the unit-amplitude kernel)

    @property
    def prefix(self) -> str:
        return f"{self.label}_" if self.label else ""

    def name(self, p: str) -> str:
        return self.prefix + p


def _unit_amplitude(spec: KernelSpec, where: str) -> tuple[tuple[str, ...], dict[str, float]]:
    """The kernel's hyperparameters without the amplitude that :math:`B` absorbs, and the
    amplitude fixed at 1.

    A catalogue kernel loses its ``eta`` (a sum of products loses the first term's; the
    others' stay, as amplitudes relative to it). Kernel objects and callables are used as
    given: they must have unit amplitude (numbers, not priors, for any scale factor)."""
    if not spec.catalogue:
        return spec.params, {}
    if spec.name == "prml":
        raise ValueError(
            f"{where}: the 'prml' kernel has its own constant and linear terms and no single "
            "amplitude for B to absorb; use a stationary catalogue kernel"
        )
    etas = [p for p in spec.params if p == "eta" or p.endswith("_eta")]
    if not etas:  # pragma: no cover - every catalogue kernel has an amplitude
        return spec.params, {}
    first = etas[0]
    return tuple(p for p in spec.params if p != first), {first: 1.0}


def _as_rank(value: Any, P: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"`rank` must be a whole number (or one per kernel), got {value!r}")
    if not 1 <= int(value) <= P:
        raise ValueError(
            f"`rank`{what} must be between 1 and the number of outputs P = {P}, got {value}"
        )
    return int(value)


def _terms(kernel: Any, rank: Any, P: int) -> list[_Term]:
    """Parse ``kernel=`` (one kernel, or a list for the LMC) and ``rank=``."""
    lmc = isinstance(kernel, list | tuple)
    kernels = list(kernel) if lmc else [kernel]
    if not kernels:
        raise ValueError("`kernel` must be a kernel or a non-empty list of kernels (LMC)")
    if isinstance(rank, list | tuple):
        if not lmc or len(rank) != len(kernels):
            raise ValueError(
                f"`rank` as a list needs a list of kernels of the same length; got {len(rank)} "
                f"rank(s) for {len(kernels)} kernel(s)"
            )
        ranks = [_as_rank(r, P, f"[{i}]") for i, r in enumerate(rank)]
    else:
        ranks = [_as_rank(rank, P, "")] * len(kernels)
    specs = []
    for i, k in enumerate(kernels):
        where = f"`kernel[{i}]`" if lmc else "`kernel`"
        specs.append(kernel_spec(k, arg=where.strip("`")))
    if not lmc:
        params, fixed = _unit_amplitude(specs[0], "`kernel`")
        return [_Term("", specs[0], params, ranks[0], fixed)]
    # labels as in kernel sums: the catalogue name, numbered when it repeats; a kernel object or
    # callable is "kernel<i>" (its position, from 1)
    base = []
    for i, spec in enumerate(specs):
        if not spec.catalogue:
            base.append(f"kernel{i + 1}")
            continue
        if " " in spec.name:
            raise ValueError(
                f"`kernel[{i}]` = {spec.name!r}: each kernel of a linear model of "
                "coregionalisation is one catalogue name; give a sum as one kernel (ICM) or "
                "as separate terms"
            )
        base.append(spec.name)
    seen: dict[str, int] = {}
    terms = []
    for spec, r, b in zip(specs, ranks, base, strict=True):
        seen[b] = seen.get(b, 0) + 1
        label = f"{b}{seen[b]}" if base.count(b) > 1 else b
        params, fixed = _unit_amplitude(spec, f"`kernel` {label!r}")
        terms.append(_Term(label, spec, params, r, fixed))
    return terms


class MultiOutputGP(PreflightJitter, NUTSSampling, NutsOrMapFits, GPModel):
    r"""A multi-output GP (ICM, or LMC with a list of kernels) declared as a PyMC model
    (module docstring).

    .. math::
       \operatorname{vec}(Y)_\text{obs} \sim N\Big(\operatorname{vec}(M),\ \sum_q B_q \otimes
       K_q + \operatorname{diag}(\sigma^2) \otimes I_n\Big)_\text{obs},
       \qquad B_q = W_q W_q^T + \operatorname{diag}(\kappa_q)

    (Álvarez, Rosasco & Lawrence 2012, eqs. 4.3, 4.6), :math:`f` integrated out, with
    :math:`M_{ip} = m_p(x_i)` the mean of output :math:`p` at input :math:`x_i`.

    Parameters
    ----------
    X : array_like (n,) or (n, D), or DataFrame
        Inputs shared by the outputs.
    Y : array_like (n, P) or DataFrame
        Outputs, one column per output (a DataFrame's column names name them); ``NaN`` marks an
        output not observed at an input. Every output needs an observation and every input an
        observed output; :math:`P \ge 2`.
    kernel : str, kernel object, callable, or a list of them
        One kernel (the ICM): a catalogue name or sum of products
        (:func:`~bayes_gp.regression.kernel_spec`), used with unit amplitude (a catalogue
        kernel's ``eta`` is dropped; in a sum the first term's, the others' staying as relative
        amplitudes), or a kernel object or callable, which must have unit amplitude. A list is
        the LMC, one coregionalisation term per kernel, its hyperparameters prefixed by the
        kernel's name (``expquad_ls``, ``matern52_W_diag``, numbered when a name repeats:
        ``expquad1_ls``) or, for a kernel object or callable, by ``kernel<i>`` with ``i`` its
        position from 1 (``kernel2_ls``).
    rank : int or list of int
        The rank :math:`r` of :math:`WW^T` (per term for the LMC), :math:`1 \le r \le P`.
    ard : bool
        One length-scale per input dimension (catalogue kernels).
    mean : None, "zero", "constant" or "linear"
        ``None``: each output's sample mean, fixed; ``"zero"``; ``"constant"``: learned means
        ``c`` (one per output); ``"linear"``: :math:`m_p(x) = c_p + x^T \beta_p` with learned
        ``intercept`` (P,) and ``slope`` (P, D) (module docstring).
    priors : dict, optional
        Overrides of the default priors by name (the forms of :mod:`bayes_gp.priors`): the
        kernel's (``ls``, ...), ``W_diag``, ``W_offdiag``, ``kappa``, ``sigma``, ``c``,
        ``intercept``, ``slope``. A number fixes a hyperparameter (every entry of a vector or
        matrix one: ``priors={"W_offdiag": 0.0}``, ``priors={"slope": 0.0}``).
    jitter : float
        Added to output :math:`p`'s noise variance relative to its variance,
        :math:`\sigma_p^2 + \text{jitter} \cdot \operatorname{var}(y_p)` (default ``1e-10``, as
        :class:`~bayes_gp.GPRegression`). ``model.jitter`` is this relative value in use: the
        pre-flight check of :meth:`fit_map` and :meth:`sample` raises it tenfold until the
        observed entries' covariance factorises at the initial point and at prior draws
        (:mod:`bayes_gp.inference.jitter`).

    Attributes
    ----------
    data : ICMData
        The validated data (observed entries in output-major order).
    outputs : list of str
        The outputs' names.
    model : pm.Model
        The PyMC model (observed variable ``y``: the observed entries; deterministics ``W``
        and ``output_correlation``, prefixed per term for the LMC).
    """

    fit_methods = ("nuts", "map")
    sample_options: ClassVar[dict[str, Any]] = {"log_likelihood": True}
    bands_note: ClassVar[str] = "the first output (bands(grid, fit, output=...) for another)"

    def __init__(
        self,
        X,
        Y,
        kernel: Any = "expquad",
        rank: int | Sequence[int] = 1,
        *,
        ard: bool = False,
        mean: str | None = None,
        priors: Mapping[str, Any] | None = None,
        jitter: float = DEFAULT_JITTER,
    ):
        check_aligned(X, Y, ("X", "Y"))
        X, names = as_inputs(X)
        outputs = None
        if hasattr(Y, "columns") and hasattr(Y, "to_numpy"):
            outputs = [str(c) for c in Y.columns]
        if np.ndim(getattr(Y, "to_numpy", lambda: Y)()) == 1:
            raise ValueError(
                "`Y` must be 2-D (n inputs, P outputs), got a 1-D array; for one output use "
                "GPRegression"
            )
        data = icm_data(X, Y)
        P = data.P
        if P < 2:
            raise ValueError(
                f"`Y` has {P} output (column); a multi-output GP needs at least 2: for one output "
                "use GPRegression"
            )
        self.terms = _terms(kernel, rank, P)
        for t in self.terms:
            check_kernel_ard(t.spec, ard)
        if not (mean is None or (isinstance(mean, str) and mean in MEANS)):
            raise ValueError(f"`mean` must be None, 'zero', 'constant' or 'linear', got {mean!r}")
        check_jitter(jitter)
        self.data = data
        self.X, self.feature_names = data.X, names
        self.outputs = outputs or [f"y{p}" for p in range(P)]
        self.ard, self.kernel, self.mean = bool(ard), kernel, mean
        priors = dict(priors or {})
        known = self._known_names()
        unknown = set(priors) - set(known)
        if unknown:
            raise ValueError(
                f"`priors` has unknown names {sorted(unknown)}; this model's hyperparameters "
                f"are {known}"
            )
        self.priors = priors
        #: per-output standard deviation s_p over the observed entries (1 where constant)
        self.output_sd = np.sqrt(data.scale2)
        self.output_mean = np.array([data.Y[data.observed[:, p], p].mean() for p in range(P)])
        # the kernels' own defaults (length-scale from the inputs; relative amplitudes of 1)
        self.scale = dataclasses.replace(DataScale.of(X, data.y_obs), y_mean=0.0, y_sd=1.0)
        # the jitter is relative to each output's variance: its scale here is 1
        self._init_jitter(jitter, 1.0, DEFAULT_JITTER)
        self.model = self._build()
        self._fns: dict = {}

    # ------------------------------------------------------------------ model
    def _known_names(self) -> list[str]:
        names = []
        for t in self.terms:
            names += [t.name(p) for p in t.params]
            names += [t.name("W_diag"), t.name("W_offdiag"), t.name("kappa")]
        names.append("sigma")
        if self.mean == "constant":
            names.append("c")
        elif self.mean == "linear":
            names += ["intercept", "slope"]
        return names

    def _prior(self, name: str, default: Callable, ard: bool = False):
        return resolve_prior(self._priors, name, default, ard=ard)

    @staticmethod
    def _vector(value, size: int):
        """A prior's value as a vector of ``size`` (a fixed number is broadcast)."""
        v = pt.as_tensor_variable(value)
        return v * pt.ones(size) if v.type.ndim == 0 else v

    @staticmethod
    def _matrix(value, rows: int, cols: int):
        """A prior's value as a ``rows`` x ``cols`` matrix (a fixed number is broadcast)."""
        v = pt.as_tensor_variable(value)
        return v if v.type.ndim == 2 else v * pt.ones((rows, cols))

    def _mean_terms(self, P: int, D: int):
        """The mean's PyTensor pieces in the current model: ``(m, mean_at)`` with ``m`` what
        :func:`~bayes_gp.multioutput.icm.lmc_marginal` takes (a constant (P,), or the linear
        mean at the training inputs (n, P)) and ``mean_at(Xv)`` the (rows, P) mean at inputs
        ``Xv``."""
        s = self.output_sd
        if self.mean == "linear":
            intercept = self._vector(
                self._prior(
                    "intercept",
                    lambda n: pm.Normal(
                        n, mu=f64(self.output_mean), sigma=f64(2 * s), dims="output"
                    ),
                ),
                P,
            )
            slope_sd = 2 * s[:, None] / self.scale.x_sd[None, :]  # 2 s_p / s_{x_d}
            slope = self._matrix(
                self._prior(
                    "slope",
                    lambda n: pm.Normal(
                        n, mu=f64(0.0), sigma=f64(slope_sd), dims=("output", "feature")
                    ),
                ),
                P,
                D,
            )
            return linear_mean(self.X, intercept, slope), lambda Xv: linear_mean(
                Xv, intercept, slope
            )
        if self.mean is None:
            m = pt.as_tensor_variable(f64(self.output_mean))
        elif self.mean == "zero":
            m = pt.zeros(P)
        else:
            m = self._vector(
                self._prior(
                    "c",
                    lambda n: pm.Normal(
                        n, mu=f64(self.output_mean), sigma=f64(2 * s), dims="output"
                    ),
                ),
                P,
            )
        return m, lambda Xv: pt.ones((Xv.shape[0], 1)) * m[None, :]

    def _build(self) -> pm.Model:
        data, P, s = self.data, self.data.P, self.output_sd
        D = self.X.shape[1]
        coords: dict[str, Any] = {
            "feature": self.feature_names,
            "output": self.outputs,
            "output2": self.outputs,
            "obs": np.arange(data.y_obs.size),
        }
        for t in self.terms:
            coords[t.name("rank")] = np.arange(t.rank)
            rows, cols = np.tril_indices(P, -1, t.rank)
            # W_offdiag's entries, labelled "output,component"
            coords[t.name("W_offdiag_entry")] = [
                f"{self.outputs[i]},{j}" for i, j in zip(rows, cols, strict=True)
            ]
        # user priors: the kernel objects' own (unprefixed in the ICM), then the user's
        self._priors = {}
        for t in self.terms:
            self._priors.update({t.name(p): v for p, v in t.spec.priors.items()})
        self._priors.update(self.priors)
        Bs, covs = [], []
        with pm.Model(coords=coords) as model:
            for t in self.terms:
                ard_params = set(t.spec.ard_params) if self.ard else set()
                hyper = {
                    p: self._prior(
                        t.name(p),
                        lambda n, a=(p in ard_params): default_prior(n, self.scale, a),
                        ard=p in ard_params,
                    )
                    for p in t.params
                }
                hyper.update(t.fixed)
                covs.append(t.spec.build(D, hyper))
                r = t.rank
                rows, cols = np.tril_indices(P, -1, r)
                diag = np.arange(r)
                rank_dim, entry_dim = t.name("rank"), t.name("W_offdiag_entry")
                W_diag = self._prior(
                    t.name("W_diag"),
                    lambda n, r=r, dim=rank_dim: pm.HalfNormal(n, sigma=f64(s[:r]), dims=dim),
                )
                W_off = self._prior(
                    t.name("W_offdiag"),
                    lambda n, rows=rows, dim=entry_dim: pm.Normal(
                        n, mu=f64(0.0), sigma=f64(s[rows]), dims=dim
                    ),
                )
                W = pt.zeros((P, r))
                W = pt.set_subtensor(W[diag, diag], self._vector(W_diag, r))
                W = pt.set_subtensor(W[rows, cols], self._vector(W_off, rows.size))
                W = pm.Deterministic(t.name("W"), W, dims=("output", t.name("rank")))
                kappa = self._prior(
                    t.name("kappa"),
                    lambda n: pm.HalfNormal(n, sigma=f64(s**2), dims="output"),
                )
                Bs.append(pt.dot(W, W.T) + pt.diag(self._vector(kappa, P)))
            sigma = self._vector(
                self._prior("sigma", lambda n: pm.HalfNormal(n, sigma=f64(s), dims="output")), P
            )
            m, mean_at = self._mean_terms(P, D)
            B_total = Bs[0] if len(Bs) == 1 else pt.add(*Bs)
            d = pt.sqrt(pt.diag(B_total))
            pm.Deterministic(
                "output_correlation", B_total / pt.outer(d, d), dims=("output", "output2")
            )
            Xt = pt.as_tensor_variable(self.X)
            s2 = sigma**2 + self.jitter_tensor * f64(data.scale2)
            lmc_marginal("y", data, Bs, [c(Xt) for c in covs], s2, m, dims="obs")
        self._Bs, self._covs, self._sigma, self._mean_at = Bs, covs, sigma, mean_at
        return model

    @property
    def hyperparameters(self) -> list[str]:
        """Names of the model's free random variables."""
        return [rv.name for rv in self.model.free_RVs]

    @property
    def derived(self) -> list[str]:
        """Deterministics of :attr:`model` that summarise a fit beyond the hyperparameters:
        each term's ``W`` and the ``output_correlation`` matrix (in a NUTS fit's posterior)."""
        return [t.name("W") for t in self.terms] + ["output_correlation"]

    @property
    def kronecker(self) -> bool:
        """Whether the likelihood goes through the Kronecker structure (one term, complete
        data); otherwise the dense density of the observed entries."""
        return len(self.terms) == 1 and self.data.complete

    # --------------------------------------------------------- numeric graphs
    def _numeric(self, values: list[np.ndarray], Xn: np.ndarray):
        """``(terms, sigma, M, M_new)`` at hyperparameter ``values``: per term ``(B, K, Ks,
        kss)`` (:func:`~bayes_gp.multioutput.icm.predict_terms`) with ``Ks = K(X, Xn)``, and the
        means of every output at the training inputs ``M`` (n, P) and at ``Xn`` (m, P)."""
        if "terms" not in self._fns:
            Xt = pt.as_tensor_variable(self.X)

            def build(Xv):
                outs = []
                for B, cov in zip(self._Bs, self._covs, strict=True):
                    kss = pt.as_tensor_variable(cov(Xv, diag=True)) * pt.ones(Xv.shape[0])
                    outs += [B, cov(Xt), cov(Xt, Xv), kss]
                return [*outs, self._sigma, self._mean_at(Xt), self._mean_at(Xv)]

            self._fns["terms"] = function_of_values(self.model.free_RVs, build)
        out = [np.asarray(v, float) for v in self._fns["terms"](*values, Xn)]
        Q = len(self.terms)
        terms = [tuple(out[4 * q : 4 * q + 4]) for q in range(Q)]
        return terms, out[4 * Q], out[4 * Q + 1], out[4 * Q + 2]

    def _s2(self, sigma: np.ndarray) -> np.ndarray:
        return sigma**2 + self.jitter * self.data.scale2

    def _covariance(self, values) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(C_f, s2, r, sigma)``: the observed entries' signal covariance, the noise variances
        (with jitter), the residuals from the mean, and sigma."""
        terms, sigma, M, _ = self._numeric(values, self.X[:1])
        po, xo = self.data.output_index, self.data.input_index
        Cf = sum(B[np.ix_(po, po)] * K[np.ix_(xo, xo)] for B, K, _, _ in terms)
        return Cf, self._s2(sigma), self.data.y_obs - M[xo, po], sigma

    def _canonical(self, params: Mapping[str, Any]) -> dict:
        """``params`` with any given ``W`` (per term) turned into ``W_diag`` / ``W_offdiag``
        of the lower-trapezoidal factor with a positive diagonal that has the same
        :math:`WW^T` (the LQ decomposition, module docstring)."""
        if not hasattr(params, "keys"):
            raise TypeError(f"`params` must be a dict of hyperparameter values by name "
                            f"{self.hyperparameters}")  # fmt: skip
        out = dict(params)
        free = set(self.hyperparameters)
        P = self.data.P
        for t in self.terms:
            wname = t.name("W")
            if wname not in params:
                continue
            try:
                W = np.asarray(params[wname], dtype=float)
            except (TypeError, ValueError):
                raise ValueError(f"`params[{wname!r}]` must be numeric") from None
            if W.shape != (P, t.rank) or not np.all(np.isfinite(W)):
                raise ValueError(
                    f"`params[{wname!r}]` must be a finite ({P}, {t.rank}) array (outputs x "
                    f"rank), got shape {W.shape}"
                )
            _, R = np.linalg.qr(W.T)  # W^T = Q R  =>  W W^T = R^T R, R^T lower-trapezoidal
            d = np.diag(R)
            if np.any(np.abs(d) <= 1e-12 * max(1.0, float(np.abs(W).max()))):
                raise ValueError(
                    f"`params[{wname!r}]`: its leading {t.rank} x {t.rank} block is singular, so "
                    "W W^T has no factor with a positive diagonal in this output order (module "
                    "docstring); reorder the outputs or lower the rank"
                )
            L = (R * np.sign(d)[:, None]).T
            rows, cols = np.tril_indices(P, -1, t.rank)
            derived = {t.name("W_diag"): np.diag(L).copy(), t.name("W_offdiag"): L[rows, cols]}
            for name, value in derived.items():
                if name in free:
                    out.setdefault(name, value)
                elif not np.allclose(self._fixed_value(name), value, rtol=1e-10, atol=1e-12):
                    raise ValueError(
                        f"`params[{wname!r}]` needs {name} = {value}, but the model fixes it at "
                        f"{self._fixed_value(name)}"
                    )
        return out

    def _fixed_value(self, name: str) -> np.ndarray:
        return np.asarray(self.priors[name], dtype=float)

    def _values(self, params: Mapping[str, Any]) -> list[np.ndarray]:
        return hyperparameter_values(
            self.model, self.model.free_RVs, self._canonical(params), self._fns
        )

    # ---------------------------------------------------------------- jitter
    @single_blas_thread
    def check_jitter(self, random_seed: int | None = None) -> JitterChoice:
        r"""Pre-flight Cholesky check (:func:`bayes_gp.inference.jitter.preflight`) of the
        observed entries' covariance, whitened by each output's variance (so the relative
        jitter is added to its diagonal), at the initial point and at prior draws; sets the
        model's jitter to the one that works.

        On the Kronecker path the likelihood factorises by eigendecompositions
        (:mod:`~bayes_gp.multioutput.kronecker`), which fail only where
        :math:`\lambda_a d_k + 1 \le 0`: those are checked first, in :math:`O(n^3 + P^3)`, and
        when they hold at every point the jitter stays as it is (no dense matrix is formed)."""
        n_obs = self.data.y_obs.size
        n_draws = N_PRIOR_DRAWS if n_obs <= PREFLIGHT_DRAWS_MAX or self.kronecker else 0
        points = check_points(self.model, self.model.free_RVs, n_draws, random_seed=random_seed)
        if self.kronecker and all(self._kronecker_ok(values) for values in points):
            return self.jitter_info.choice(len(points))
        w = 1.0 / np.sqrt(self.data.scale2[self.data.output_index])

        def whitened(values):
            Cf, _, _, sigma = self._covariance(values)
            C = Cf + np.diag(sigma[self.data.output_index] ** 2)
            return C * np.outer(w, w)

        choice = preflight(
            whitened, points, self.default_jitter, advice=advice(self.X, "observation noise")
        )
        self.set_jitter(choice.jitter)
        return choice

    def _kronecker_ok(self, values) -> bool:
        """Whether the Kronecker factorisation succeeds at ``values`` (finite eigenvalues of the
        whitened :math:`C^{-1}`)."""
        with np.errstate(all="ignore"):
            terms, sigma, _, _ = self._numeric(values, self.X[:1])
            B, K, _, _ = terms[0]
            if not (np.all(np.isfinite(B)) and np.all(np.isfinite(K))):
                return False
            return bool(np.all(np.isfinite(kronecker_factors(B, K, self._s2(sigma))[-1])))

    def _check_fittable(self) -> None:
        """An output with constant observed values cannot be fitted with a learned noise (the
        likelihood grows without bound as its sigma goes to 0)."""
        for p, name in enumerate(self.outputs):
            y = self.data.Y[self.data.observed[:, p], p]
            if np.ptp(y) == 0.0:
                raise ValueError(
                    f"output {name!r} (column {p} of `Y`) is constant over its {y.size} "
                    "observation(s): with a learned noise its likelihood grows without bound as "
                    "sigma goes to 0; drop it or give it more observations"
                )

    # ---------------------------------------------------------------- fitting
    @single_blas_thread
    def log_marginal_likelihood(self, params: Mapping[str, Any], *, eval_gradient: bool = False):
        r"""Exact log marginal likelihood :math:`\log p(Y_\text{obs} \mid \theta)` (R&W eq.
        2.30) of the observed entries, by the path the model uses (:attr:`kronecker`).

        Parameters
        ----------
        params : dict
            Values by name (:attr:`hyperparameters`); a term's ``W`` may be given instead of
            ``W_diag`` and ``W_offdiag`` (any :math:`P \times r` matrix: only :math:`WW^T`
            matters).
        eval_gradient : bool
            Also return the gradient, a dict name → :math:`\partial \log p / \partial \theta`
            on the hyperparameters' own scale.
        """
        if "lml" not in self._fns:
            self._fns["lml"] = observed_logp_and_grad(self.model)
        out = self._fns["lml"](*self._values(params))
        if not eval_gradient:
            return float(out[0])
        grads = {
            n: np.asarray(g, float) for n, g in zip(self.hyperparameters, out[1:], strict=True)
        }
        return float(out[0]), grads

    @single_blas_thread
    def fit_map(
        self,
        n_restarts: int = 5,
        prior: bool = True,
        random_seed: int | None = None,
        *,
        maxiter: int = 1000,
    ) -> MapFit:
        """Type-II fit: maximum marginal likelihood (``prior=False``) or MAP (``prior=True``),
        L-BFGS-B from the priors' support point and ``n_restarts - 1`` prior draws
        (:func:`bayes_gp.inference.typeii.optimize`), after the jitter pre-flight."""
        self._check_fittable()
        choice = self.check_jitter(random_seed)
        fit = optimize(
            self.model, n_restarts=n_restarts, prior=prior, random_seed=random_seed,
            maxiter=maxiter, spacing=model_spacing(self),
        )  # fmt: skip
        return dataclasses.replace(
            fit.with_log_marginal_likelihood(self.log_marginal_likelihood(fit.params)),
            jitter=choice.jitter,
            jitter_default=choice.default,
        )

    def _nuts_run(self, sampler, random_seed, *, log_likelihood: bool) -> NutsRun:
        """:meth:`sample`: NUTS over ``W_diag``, ``W_offdiag``, ``kappa``, ``sigma``, the
        mean's (``c``, or ``intercept`` and ``slope``) and the kernel's hyperparameters (the
        lower-trapezoidal ``W`` of the module docstring, so that chains do not split between
        sign or rotation modes), after the jitter pre-flight. The posterior holds the
        deterministics ``W`` and ``output_correlation``."""
        self._check_fittable()
        return NutsRun(self.model, attrs=self.check_jitter(random_seed).attrs())

    def _nuts_result(self, idata, run: NutsRun, random_seed):
        r"""The ``log_likelihood`` group: per draw, the exact leave-one-out log predictive
        density of each observed entry (R&W eqs. 5.10–5.12), for PSIS-LOO;
        ``sample(log_likelihood=False)`` leaves it out."""
        from bayes_gp.inference.nuts import add_log_likelihood

        if not run.options["log_likelihood"]:
            return idata
        return add_log_likelihood(idata, self.hyperparameters, self._pointwise_loo)

    def _pointwise_loo(self, values) -> np.ndarray:
        Cf, s2, r, _ = self._covariance(values)
        return loo_log_density(factorize(Cf + np.diag(s2[self.data.output_index]), r))

    # -------------------------------------------------------- derived values
    def coregionalisation(self, fit) -> list[np.ndarray]:
        """The coregionalisation matrices :math:`B_q` at a MAP fit, or their posterior means
        (NUTS), one per term."""
        self.check_fit(fit)
        if is_nuts(fit):
            draws = self._draws(fit)
            return [
                np.mean([self._numeric(v, self.X[:1])[0][q][0] for v in draws], axis=0)
                for q in range(len(self.terms))
            ]
        return [t[0] for t in self._numeric(self._values(fit.params), self.X[:1])[0]]

    def output_correlation(self, fit) -> np.ndarray:
        r""":math:`B_{pp'} / \sqrt{B_{pp} B_{p'p'}}` with :math:`B = \sum_q B_q`: the
        correlation of :math:`f_p(x)` and :math:`f_{p'}(x)` (exact for the ICM at any pair of
        inputs; for the LMC at the same input, for stationary kernels). For NUTS fits the
        posterior mean of the ``output_correlation`` deterministic."""
        self.check_fit(fit)
        if is_nuts(fit):
            post = np.asarray(fit["posterior"]["output_correlation"])
            return post.reshape(-1, *post.shape[2:]).mean(axis=0)
        B = sum(self.coregionalisation(fit))
        d = np.sqrt(np.diag(B))
        return B / np.outer(d, d)

    # ------------------------------------------------------------- prediction
    def _predict_at(self, values, Xn, include_noise: bool):
        terms, sigma, M, M_new = self._numeric(values, Xn)
        mean, cov, added = predict_terms(self.data, terms, self._s2(sigma), M, M_new)
        if include_noise:
            cov = cov + np.diag(sigma**2)
        return mean, cov, added

    def _components(self, Xn, fit, include_noise: bool, max_draws: int = 500):
        """Per posterior draw (one row at a point estimate): the predictive means and marginal
        variances ``(S, m, P)`` and the largest jitter added."""
        draws = self._draws(fit, max_draws, 0) if is_nuts(fit) else [self._values(fit.params)]
        means, variances, added = [], [], 0.0
        for values in draws:
            mu, cov, a = self._predict_at(values, Xn, include_noise)
            means.append(mu)
            variances.append(np.clip(np.einsum("jpp->jp", cov), 0.0, None))
            added = max(added, a)
        return np.array(means), np.array(variances), added

    def _held_out_matrix(self, y, m: int | None) -> np.ndarray:
        """Held-out outputs ``y`` (array or DataFrame) as a float (m, P) matrix, ``NaN`` where
        not held out, for :meth:`held_out_predictive` (``m`` the number of new inputs) and
        :meth:`scores` (``m=None``: any number of rows).

        Raises
        ------
        ValueError
            If ``y`` is not numeric, not of that shape, or has no value (every entry ``NaN``).
        """
        try:
            y = np.asarray(getattr(y, "to_numpy", lambda: y)(), dtype=float)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"held-out `y` must be numeric: {exc}") from None
        P = self.data.P
        if m is None:
            ok, want = y.ndim == 2 and y.shape[1] == P, f"(m, {P}) (one column per output)"
        else:
            ok = y.shape == (m, P)
            want = f"({m}, {P}) (one row per input of `X_new`, one column per output)"
        if not ok:
            raise ValueError(f"held-out `y` must have shape {want}, got {y.shape}")
        if np.isnan(y).all():
            raise ValueError("held-out `y` has no value (every entry is NaN)")
        return y

    @single_blas_thread
    def held_out_predictive(self, X_new, y, fit) -> HeldOutPredictive:
        """The predictive CDF of every held-out entry of ``y`` (m, P) (``NaN``: not held out),
        output-major like :attr:`observed`: Gaussian at a point estimate, the mixture over
        (at most 500) posterior draws for NUTS."""
        Xn = new_inputs(X_new, self.X.shape[1], self.feature_names)
        self.check_fit(fit)
        y = self._held_out_matrix(y, Xn.shape[0])
        seen = ~np.isnan(y.T)  # output-major
        means, variances, _ = self._components(Xn, fit, True)
        F = gaussian_mixture_cdf(y.T[seen], means.transpose(0, 2, 1)[:, seen],
                                 variances.transpose(0, 2, 1)[:, seen])  # fmt: skip
        return HeldOutPredictive("cdf", F, F)

    @single_blas_thread
    def predict(self, X_new, fit, include_noise: bool = False) -> MultiOutputPrediction:
        r"""Predictive distribution of every output at ``X_new``: of :math:`f_p(x_*)`, or of
        :math:`y_p(x_*)` with ``include_noise``.

        For a :class:`MapFit`: R&W eqs. 2.25–2.26 on the stacked system at the fitted
        hyperparameters, with the :math:`P \times P` cross-covariance between the outputs at
        each new input (:func:`~bayes_gp.multioutput.icm.predict_terms`). For NUTS output: the
        mixture over (at most 500) posterior draws, mean by the law of total expectation,
        variance by the law of total variance, intervals from predictive draws; no
        cross-covariance.
        """
        Xn = new_inputs(X_new, self.X.shape[1], self.feature_names)
        self.check_fit(fit)
        if not is_nuts(fit):
            mean, cov, added = self._predict_at(self._values(fit.params), Xn, include_noise)
            sd = np.sqrt(np.clip(np.einsum("jpp->jp", cov), 0.0, None))
            return MultiOutputPrediction(self.outputs, mean, sd, mean - Z_CI * sd,
                                         mean + Z_CI * sd, cov, {"jitter": added})  # fmt: skip
        rng = np.random.default_rng(0)
        means, variances, added = self._components(Xn, fit, include_noise)
        samples = [mu + np.sqrt(var) * rng.standard_normal((4, *mu.shape))
                   for mu, var in zip(means, variances, strict=True)]  # fmt: skip
        mean = means.mean(axis=0)
        sd = np.sqrt(variances.mean(axis=0) + means.var(axis=0))  # law of total variance
        lower, upper = np.quantile(np.concatenate(samples), CI_QUANTILES, axis=0)
        extra = {"jitter": added, "n_draws": len(means)}
        return MultiOutputPrediction(self.outputs, mean, sd, lower, upper, None, extra)

    # ------------------------------------------------------------ model protocol
    @property
    def observed(self) -> np.ndarray:
        """The observed entries of ``Y`` in output-major order (``data.y_obs``)."""
        return self.data.y_obs

    @property
    def label(self) -> str:
        if len(self.terms) == 1:
            return f"ICM({self.terms[0].spec.name}, rank {self.terms[0].rank})"
        return "LMC(" + " + ".join(f"{t.label}, rank {t.rank}" for t in self.terms) + ")"

    def describe(self) -> list[tuple[str, object]]:
        """Kernels and formulas, the coregionalisation, likelihood path, mean, noise, data."""
        rows: list[tuple[str, object]] = [("model", repr(self)), ("kernel", self.label)]
        for t in self.terms:
            tag = f" ({t.label})" if t.label else ""
            formula = kernel_formula(t.spec).replace("η² ", "", 1) if t.spec.catalogue else (
                kernel_formula(t.spec))  # fmt: skip
            rows += [(f"kernel formula{tag}", formula + " (unit amplitude)"),
                     (f"equation{tag}", t.spec.equation or "–")]  # fmt: skip
        rows += [
            ("coregionalisation",
             "cov(f_p(x), f_p'(x')) = Σ_q B_q[p, p'] k_q(x, x'), B = W Wᵀ + diag(κ), W lower-"
             "trapezoidal with a positive diagonal (Álvarez, Rosasco & Lawrence 2012, eq. 4.6)"),
            ("likelihood",
             "Gaussian, f integrated out, exact: "
             + ("Kronecker eigendecompositions (complete data, one term)" if self.kronecker
                else "dense normal density of the observed entries")),
            ("mean function", {None: "each output's sample mean, fixed", "zero": "zero",
                               "constant": "learned constant per output (c)",
                               "linear": "learned linear per output, m_p(x) = c_p + xᵀβ_p "
                                         "(intercept, slope)"}[self.mean]),
            ("noise", "learned per output (σ)"),
            ("outputs P", f"{self.data.P}: " + ", ".join(self.outputs)),
            ("observations", f"{self.data.y_obs.size} of {self.data.n} x {self.data.P} entries"
             + (" (complete)" if self.data.complete else " (heterotopic: NaN = missing)")),
            ("input dimensions D", self.X.shape[1]),
            ("inputs", ", ".join(self.feature_names)),
        ]  # fmt: skip
        return rows

    def ppc_caption(self, n_draws: int) -> str:
        return (
            f"Observed entries of Y (all outputs, output-major) vs {n_draws} replicated data "
            "sets y_rep = f + ε, f from its conditional posterior"
        )

    @single_blas_thread
    @renamed_argument("seed", "random_seed")
    def replicate(self, fit, n_draws: int, random_seed: int = 0) -> np.ndarray:
        """Replicated observed entries :math:`y^{rep} = f + \\varepsilon`, ``(n_draws,
        N_obs)`` in the order of :attr:`observed`: :math:`f` at the observed (output, input)
        pairs from its conditional posterior given the data and each of ``n_draws`` posterior
        draws (NUTS) or the point estimate; jointly up to :data:`PPC_JOINT_MAX` entries,
        marginally above."""
        self.check_fit(fit)
        rng = np.random.default_rng(random_seed)
        nuts = is_nuts(fit)
        values_list = self._draws(fit, n_draws, random_seed) if nuts else [self._values(fit.params)]
        po = self.data.output_index
        reps = []
        for values in values_list:
            k = 1 if nuts else n_draws
            Cf, s2, r, sigma = self._covariance(values)
            fac = factorize(Cf + np.diag(s2[po]), r)
            mean = self.data.y_obs - r + Cf @ fac.alpha
            V = solve_triangular(fac.L, Cf, lower=True, check_finite=False)
            cov = Cf - V.T @ V + np.diag(sigma[po] ** 2)
            if po.size <= PPC_JOINT_MAX:
                L, _ = jittered_cholesky(0.5 * (cov + cov.T))
                reps.append(mean + (L @ rng.standard_normal((po.size, k))).T)
            else:
                sd = np.sqrt(np.clip(np.diag(cov), 0.0, None))
                reps.append(mean + sd * rng.standard_normal((k, po.size)))
        return np.concatenate(reps, axis=0)

    def bands(self, grid, fit, output: int | str = 0) -> Bands:
        """Predictive bands of one output (the first by default; ``output`` by position or
        name) on ``grid`` (models with one input), with that output's observations."""
        if isinstance(output, str):
            if output not in self.outputs:
                raise ValueError(f"`output` {output!r} is not one of {self.outputs}")
            output = self.outputs.index(output)
        if not 0 <= int(output) < self.data.P:
            raise ValueError(f"`output` must be in 0 … {self.data.P - 1}, got {output}")
        p = int(output)
        grid = np.asarray(grid, float).ravel()
        pf = self.predict(grid[:, None], fit)
        py = self.predict(grid[:, None], fit, include_noise=True)
        seen = self.data.observed[:, p]
        name = self.outputs[p]
        return Bands("regression", self.X[seen, 0], self.data.Y[seen, p], grid, pf.mean[:, p],
                     pf.lower[:, p], pf.upper[:, p], py.lower[:, p], py.upper[:, p],
                     band_label=f"94% band of f* ({name})",
                     y_band_label=f"94% band of y* ({name}, with noise)")  # fmt: skip

    def prediction_columns(self, X_new, fit) -> dict[str, np.ndarray]:
        """Per output ``<name>_mean``, ``<name>_sd_f``, ``<name>_sd_y``, ``<name>_lower_94``,
        ``<name>_upper_94`` (the interval of :math:`y_*`)."""
        pf = self.predict(X_new, fit)
        py = self.predict(X_new, fit, include_noise=True)
        cols = {}
        for p, name in enumerate(self.outputs):
            cols[f"{name}_mean"] = pf.mean[:, p]
            cols[f"{name}_sd_f"] = pf.sd[:, p]
            cols[f"{name}_sd_y"] = py.sd[:, p]
            cols[f"{name}_lower_94"] = py.lower[:, p]
            cols[f"{name}_upper_94"] = py.upper[:, p]
        return cols

    def scores(self, y, columns) -> dict[str, float]:
        """Held-out scores of ``y`` (m, P), ``NaN`` where not held out, from
        :meth:`prediction_columns`: over all held-out entries and per output, the RMSE, the
        mean log predictive density of :math:`N(\\text{mean}, \\text{sd}_y^2)` and the coverage
        of the 94% interval."""
        y = self._held_out_matrix(y, None)
        resid, lpd, inside = [], [], []
        out: dict[str, float] = {}
        for p, name in enumerate(self.outputs):
            seen = ~np.isnan(y[:, p])
            mu = np.asarray(columns[f"{name}_mean"], float)[seen]
            var = np.asarray(columns[f"{name}_sd_y"], float)[seen] ** 2
            lo = np.asarray(columns[f"{name}_lower_94"], float)[seen]
            hi = np.asarray(columns[f"{name}_upper_94"], float)[seen]
            yp = y[seen, p]
            r = yp - mu
            lp = -0.5 * (np.log(2 * np.pi * var) + r**2 / var)
            resid.append(r)
            lpd.append(lp)
            inside.append((yp >= lo) & (yp <= hi))
            if seen.any():
                out[f"{name}_rmse"] = float(np.sqrt(np.mean(r**2)))
                out[f"{name}_mean_log_predictive_density"] = float(np.mean(lp))
        r, lp, ins = (np.concatenate(a) for a in (resid, lpd, inside))
        out.update({
            "rmse": float(np.sqrt(np.mean(r**2))),
            "mean_log_predictive_density": float(np.mean(lp)),
            "coverage_94": float(np.mean(ins)),
        })  # fmt: skip
        return out

    def point_loo(self, fit) -> tuple[str, np.ndarray]:
        """Exact LOO of each observed entry at the point estimate, R&W eqs. (5.10)–(5.12) on the
        observed entries' covariance."""
        if not isinstance(fit, MapFit):
            raise TypeError(f"point_loo needs a MapFit of this model, got {type(fit).__name__}")
        method = f"exact LOO of the observed entries at {fit.method_label} (R&W 5.10-5.12)"
        return method, self._pointwise_loo(self._values(fit.params))

    def restore_fit(self, method: str, params: dict, attrs: dict) -> MapFit:
        if method != "map":
            raise ValueError(f"MultiOutputGP's type-II fit is 'map', not {method!r}")
        return MapFit(
            params,
            float(attrs["objective"]),
            bool(attrs["prior"]),
            grad_norm=float(attrs["grad_norm"]),
            log_marginal_likelihood=float(attrs["log_marginal_likelihood"]),
            jitter=float(attrs.get("jitter", np.nan)),
            jitter_default=float(attrs.get("jitter_default", np.nan)),
        )

    def __repr__(self) -> str:
        kernel = (
            self.terms[0].spec.name if len(self.terms) == 1 else [t.spec.name for t in self.terms]
        )
        ranks = self.terms[0].rank if len(self.terms) == 1 else [t.rank for t in self.terms]
        return (
            f"MultiOutputGP(n={self.data.n}, P={self.data.P}, D={self.X.shape[1]}, "
            f"kernel={kernel!r}, rank={ranks}, ard={self.ard})"
        )
