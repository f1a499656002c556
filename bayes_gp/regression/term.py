r"""An exact GP marginal likelihood as one term of the user's own PyMC model, and its posterior
predictions.

:func:`marginal_gp`, called inside ``with pm.Model():``, adds the observed variable

.. math::
   y \sim N\!\left(m(X),\ C\right), \qquad C = K(X, X) + (\sigma^2 + \epsilon) I,

with :math:`f \sim GP(m, k)` integrated out (R&W eq. 2.30, PRML eqs. 6.61–6.62): the
covariance function :math:`k`, the mean :math:`m` and the noise :math:`\sigma` may be built from
the user's own random variables, and the rest of the model (hierarchies, covariates, other
likelihood terms) is the user's. The log density and its gradient are bayes_gp's fused Op
(:func:`bayes_gp.solvers.likelihood.marginal_normal`: one Cholesky factorisation, R&W eq. 5.9
for the gradient), the density that ``pm.gp.Marginal.marginal_likelihood`` declares with
``jitter`` :math:`= \epsilon`.

The jitter :math:`\epsilon` has the package's meaning (:mod:`bayes_gp.inference.jitter`): the
argument is relative to the prior scale :math:`s^2 = \operatorname{var}(y)`, it enters the graph
as a shared value, and :meth:`MarginalTerm.check_jitter` raises it before sampling when
:math:`C` does not factorise at the initial point or at prior draws.

:func:`predict_marginal` conditions the GP on :math:`y` at each posterior draw
:math:`\theta^{(s)}` in closed form (R&W eqs. 2.25–2.26, with a mean function eq. 2.38; PRML
eqs. 6.66–6.67),

.. math::
   \mu_*^{(s)} = m(X_*) + K(X, X_*)^\top C^{-1} (y - m(X)), \qquad
   v_*^{(s)} = \operatorname{diag} k(X_*, X_*) - \operatorname{diag}\!\left(
   K(X, X_*)^\top C^{-1} K(X, X_*)\right) \;[+\ \sigma^2],

and mixes the draws: mean :math:`\bar\mu_* = \frac1S \sum_s \mu_*^{(s)}`, variance by the law of
total variance :math:`\frac1S \sum_s v_*^{(s)} + \frac1S \sum_s (\mu_*^{(s)} - \bar\mu_*)^2`,
and the central 94% interval of the mixture :math:`\frac1S \sum_s N(\mu_*^{(s)}, v_*^{(s)})`.

Example
-------
>>> with pm.Model() as model:                                     # doctest: +SKIP
...     ls = pm.InverseGamma("ls", 3.0, 3.0)
...     eta = pm.HalfNormal("eta", 1.0)
...     sigma = pm.HalfNormal("sigma", 0.5)
...     gp = bayes_gp.marginal_gp("y", X, y, cov_func=eta**2 * bayes_gp.kernels.ExpQuad(1, ls=ls),
...                               sigma=sigma)
...     ...                                                       # the rest of the model
>>> gp.check_jitter()                                             # doctest: +SKIP
>>> idata = pm.sample(model=model)                                # doctest: +SKIP
>>> pred = bayes_gp.predict_marginal(idata, gp, X_new, include_noise=True)  # doctest: +SKIP
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.initial_point import make_initial_point_fn
from pymc.pytensorf import rvs_in_graph
from pytensor.graph.replace import graph_replace
from pytensor.graph.traversal import ancestors
from scipy.linalg import cho_solve

from bayes_gp._validation import (
    as_inputs,
    as_parameter,
    as_targets,
    check_aligned,
    check_integer_in,
    check_jitter,
    check_nonnegative,
    constant_value,
    new_inputs,
)
from bayes_gp.inference.jitter import DEFAULT_JITTER, N_PRIOR_DRAWS, JitterChoice, PreflightJitter
from bayes_gp.inference.typeii import function_of_values
from bayes_gp.kernels.catalogue import DataScale
from bayes_gp.linalg import jittered_cholesky, plus_diagonal, single_blas_thread
from bayes_gp.predictive import (
    CI_PROB,
    CI_QUANTILES,
    GaussianFactor,
    JitterWarning,
    gaussian_mixture_quantiles,
    predict,
)
from bayes_gp.solvers.likelihood import marginal_normal

__all__ = [
    "MarginalTerm",
    "MarginalPrediction",
    "marginal_gp",
    "predict_marginal",
    "PROB",
    "DEFAULT_DRAWS",
]

#: Probability of the central intervals: the package's :data:`bayes_gp.predictive.CI_PROB`.
PROB = CI_PROB
#: Largest number of posterior draws :func:`predict_marginal` uses by default.
DEFAULT_DRAWS = 500
#: The default ``block``: rows of ``X_new`` per block such that :math:`K(X, X_*)` has at most
#: this many entries (32 MiB of float64).
_BLOCK_ENTRIES = 2**22
#: The matrix of the pre-flight check is dense: above this n only the initial point is checked.
_PREFLIGHT_MAX_N = 3000


class MarginalTerm(PreflightJitter):
    r"""A GP marginal likelihood term of a PyMC model, as :func:`marginal_gp` added it.

    It remembers what :func:`predict_marginal` needs: the data, the symbolic covariance and mean
    functions, the noise :math:`\sigma`, the jitter :math:`\epsilon` (a shared value) and the
    model. Its attributes cannot be reassigned; the jitter changes only through
    :meth:`check_jitter` or :meth:`set_jitter`.

    Attributes
    ----------
    name : str
        The observed variable's name.
    X : ndarray, shape (n, D)
        Inputs (read-only).
    y : ndarray, shape (n,)
        Observations (read-only).
    feature_names : list of str
        Column names of ``X`` (a DataFrame's, or ``x0``, ``x1``, …).
    cov_func : pm.gp.cov.BaseCovariance
        :math:`k`, possibly built from the model's random variables.
    mean_func : pm.gp.mean.Mean
        :math:`m` (``pm.gp.mean.Zero()`` when none was given).
    sigma : TensorVariable
        The noise standard deviation :math:`\sigma` (a constant or a model variable).
    model : pm.Model
        The model the term belongs to.
    observed : TensorVariable
        The observed random variable ``name`` in ``model``.
    jitter : float
        The absolute jitter :math:`\epsilon` in use (:mod:`bayes_gp.inference.jitter`).
    """

    def __init__(
        self,
        name: str,
        X: np.ndarray,
        y: np.ndarray,
        feature_names: list[str],
        cov_func,
        mean_func,
        sigma,
        jitter: float | None,
        model: pm.Model,
    ):
        self.name = name
        self.X = _read_only(X)
        self.y = _read_only(y)
        self.feature_names = list(feature_names)
        self.cov_func = cov_func
        self.mean_func = mean_func
        self.sigma = sigma
        self.model = model
        self._init_jitter(jitter, DataScale.of(self.X, self.y).y_sd ** 2, DEFAULT_JITTER)
        self._jitter_var.name = f"{name}_jitter"
        self._jitter_choice: JitterChoice | None = None
        self._fn = None
        self._rvs = self._free_rvs()
        self.observed = None

    def __setattr__(self, key: str, value: Any) -> None:
        if getattr(self, "_frozen", False) and not key.startswith("_"):
            raise AttributeError(
                f"MarginalTerm.{key} cannot be reassigned: build a new term (marginal_gp)"
            )
        object.__setattr__(self, key, value)

    def _freeze(self) -> None:
        self._frozen = True

    # ------------------------------------------------------------------ graphs
    def _outputs(self, X_new: pt.TensorVariable) -> list[pt.TensorVariable]:
        r"""``[m(X), C, K(X, X_new), diag k(X_new, X_new), m(X_new), sigma^2]`` with
        :math:`C = K(X, X) + (\sigma^2 + \epsilon) I` (the symbolic graphs of the model)."""
        X = pt.as_tensor_variable(self.X)
        s2 = pt.square(self.sigma)
        C = plus_diagonal(self.cov_func(X), s2 + self._jitter_var)
        return [
            _mean(self.mean_func, X),
            C,
            self.cov_func(X, X_new),
            self.cov_func(X_new, diag=True),
            _mean(self.mean_func, X_new),
            s2 * pt.ones(()),
        ]

    def _free_rvs(self) -> tuple:
        """The model's free random variables the term's graphs depend on (in the model's order);
        any other random variable in them is an error."""
        probe = self._outputs(pt.dmatrix())
        free = list(self.model.free_RVs)
        found = set(ancestors(probe, blockers=free))
        rvs = tuple(rv for rv in free if rv in found)
        rest = rvs_in_graph(graph_replace(probe, {rv: rv.type() for rv in rvs}, strict=False))
        if rest:
            names = sorted(str(v.name or v) for v in rest)
            raise ValueError(
                f"`cov_func`, `mean_func` or `sigma` of {self.name!r} depend on random variables "
                f"that are not free variables of the model: {names}. Give hyperparameters as "
                "variables of this model (e.g. `pm.Gamma('ls', ...)`, not `pm.Gamma.dist(...)`) "
                "or as numbers"
            )
        return rvs

    @property
    def hyperparameters(self) -> list[str]:
        """Names of the model's free random variables that the term depends on (those
        :func:`predict_marginal` reads from the posterior)."""
        return [rv.name for rv in self._rvs]

    def _compiled(self):
        """The one compiled function ``(values..., X_new) -> outputs of _outputs``."""
        if self._fn is None:
            self._fn = function_of_values(self._rvs, self._outputs)
        return self._fn

    def evaluate(self, values: Sequence[np.ndarray], X_new: np.ndarray) -> list[np.ndarray]:
        r"""``[m(X), C, K(X, X_new), diag k(X_new, X_new), m(X_new), sigma^2]`` at the values
        (natural scale) of :attr:`hyperparameters`, in that order."""
        vals = [np.asarray(v, dtype=rv.dtype) for rv, v in zip(self._rvs, values, strict=True)]
        return self._compiled()(*vals, np.asarray(X_new, dtype=float))

    # ------------------------------------------------------------------ jitter
    @property
    def jitter_choice(self) -> JitterChoice | None:
        """The outcome of the last :meth:`check_jitter` (``None`` before one)."""
        return self._jitter_choice

    @single_blas_thread
    def check_jitter(self, random_seed: int | None = None) -> JitterChoice:
        r"""Pre-flight Cholesky check (:func:`bayes_gp.inference.jitter.preflight`).

        Factorises :math:`C = K + (\sigma^2 + \epsilon) I` at the model's initial point and at
        a few draws from the priors of :attr:`hyperparameters`, raises :math:`\epsilon` tenfold
        until all succeed and sets the term's shared jitter to it. The PyMC model stays the same
        object (every other variable in it stays), and functions compiled from it read the new
        value. Call it before ``pm.sample``.

        Returns
        -------
        JitterChoice
            The jitter used and the default (also :attr:`jitter_choice`).

        Raises
        ------
        NotPSDError
            When even a jitter of 1e-4 times the mean diagonal fails, with advice.
        """
        learned = constant_value(self.sigma) is None
        n_draws = N_PRIOR_DRAWS if self._rvs and self.X.shape[0] <= _PREFLIGHT_MAX_N else 0
        empty = np.zeros((0, self.X.shape[1]))
        choice = self._preflight(
            self._rvs,
            lambda values: self.evaluate(values, empty)[1],
            "observation noise" if learned else "a larger noise level `sigma`",
            random_seed,
            n_draws=n_draws,
        )
        self._jitter_choice = choice
        return choice

    def __repr__(self) -> str:
        return (
            f"MarginalTerm({self.name!r}, n={self.X.shape[0]}, D={self.X.shape[1]}, "
            f"hyperparameters={self.hyperparameters}, jitter={self.jitter:.3g})"
        )


def _read_only(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=float)
    a.setflags(write=False)
    return a


def _mean(mean_func, X) -> pt.TensorVariable:
    return pt.as_tensor_variable(mean_func(X)) * pt.ones(X.shape[0])


def marginal_gp(
    name: str,
    X,
    y,
    *,
    cov_func,
    mean_func=None,
    sigma,
    jitter: float | None = None,
    dims=None,
) -> MarginalTerm:
    r"""Add an exact GP marginal likelihood for ``y`` to the current PyMC model.

    Declares the observed variable ``name``,

    .. math::
       y \sim N\!\left(m(X),\ K(X, X) + (\sigma^2 + \epsilon) I\right),
       \qquad
       \log p(y \mid \theta) = -\tfrac12 r^\top C^{-1} r - \tfrac12 \log|C| - \tfrac n2 \log 2\pi,
       \quad r = y - m(X)

    (R&W eq. 2.30), with the gradient
    :math:`\partial \log p / \partial \theta_j = \tfrac12 \operatorname{tr}\!\left((\alpha\alpha^\top
    - C^{-1}) \partial C / \partial \theta_j\right)`, :math:`\alpha = C^{-1} r` (R&W eq. 5.9),
    through :func:`bayes_gp.solvers.likelihood.marginal_normal`: the density of
    ``pm.gp.Marginal(mean_func, cov_func).marginal_likelihood(name, X, y, sigma,
    jitter=term.jitter)``, with a cheaper gradient.

    Parameters
    ----------
    name : str
        Name of the observed variable.
    X : array_like (n,) or (n, D), or DataFrame / Series
        Inputs.
    y : array_like (n,) or Series
        Observations (finite).
    cov_func : pm.gp.cov.BaseCovariance
        The covariance function :math:`k` (e.g. ``eta**2 * bayes_gp.kernels.Matern52(1,
        ls=ls)``), whose hyperparameters may be random variables of the current model.
    mean_func : pm.gp.mean.Mean, optional
        The mean function :math:`m`; ``None``: zero.
    sigma : float or TensorVariable
        Noise standard deviation :math:`\sigma >= 0`: a number or a scalar variable of the
        model.
    jitter : float, optional
        Relative diagonal jitter: :math:`\epsilon = \text{jitter} \times \operatorname{var}(y)`
        (``None``: 1e-10), as in :class:`~bayes_gp.GPRegression`
        (:mod:`bayes_gp.inference.jitter`). It enters the graph as a shared value, which
        :meth:`MarginalTerm.check_jitter` raises when needed.
    dims : str or tuple of str, optional
        Dims of the observed variable (passed to PyMC).

    Returns
    -------
    MarginalTerm
        What :func:`predict_marginal` needs to predict after sampling.

    Raises
    ------
    ValueError
        Non-finite or misaligned data, ``X`` with fewer columns than ``cov_func`` uses, a
        negative or non-scalar ``sigma``, a negative jitter, hyperparameters that are not
        variables of the current model.
    TypeError
        Called outside a model context, or ``cov_func`` / ``mean_func`` of the wrong kind.
    """
    try:
        model = pm.modelcontext(None)
    except TypeError:
        raise TypeError(
            "marginal_gp adds a term to the current PyMC model: call it inside `with pm.Model():`"
        ) from None
    if not isinstance(name, str) or not name:
        raise TypeError(f"`name` must be a non-empty string, got {name!r}")
    if not isinstance(cov_func, pm.gp.cov.BaseCovariance):
        raise TypeError(
            "`cov_func` must be a PyMC covariance function (pm.gp.cov.Covariance, e.g. a "
            f"bayes_gp.kernels kernel), got {type(cov_func).__name__}"
        )
    if mean_func is None:
        mean_func = pm.gp.mean.Zero()
    elif not isinstance(mean_func, pm.gp.mean.Mean):
        raise TypeError(
            f"`mean_func` must be a pm.gp.mean.Mean or None, got {type(mean_func).__name__}"
        )
    check_aligned(X, y)
    Xa, names = as_inputs(X)
    learned = constant_value(sigma) is None
    ya = as_targets(y, Xa.shape[0], what="a GP marginal likelihood", learned_noise=learned)
    input_dim = getattr(cov_func, "input_dim", None)
    if isinstance(input_dim, int) and input_dim > Xa.shape[1]:
        raise ValueError(
            f"`cov_func` has input_dim={input_dim} but `X` has {Xa.shape[1]} column(s)"
        )
    check_nonnegative("sigma", sigma)
    sigma_t = as_parameter(sigma)
    if sigma_t.type.ndim != 0:
        raise ValueError(
            f"`sigma` must be a scalar (one noise level), got {sigma_t.type.ndim} dimension(s)"
        )
    if jitter is not None:
        check_jitter(jitter)
    term = MarginalTerm(name, Xa, ya, names, cov_func, mean_func, sigma_t, jitter, model)
    mu, C = term._outputs(pt.dmatrix())[:2]
    term.observed = marginal_normal(name, mu, C, observed=ya, dims=dims)
    term._freeze()
    return term


# --------------------------------------------------------------------------- predictions
@dataclass(frozen=True)
class MarginalPrediction:
    r"""Predictions of a :class:`MarginalTerm` at new inputs, per posterior draw and mixed.

    Attributes
    ----------
    means : ndarray, shape (S, m)
        :math:`\mu_*^{(s)}`, the predictive mean at each of the S posterior draws used
        (R&W eq. 2.25 / 2.38).
    variances : ndarray, shape (S, m)
        :math:`v_*^{(s)}`, the predictive variance of :math:`f_*` (R&W eq. 2.26), plus
        :math:`\sigma^{2(s)}` when ``include_noise``.
    mean : ndarray, shape (m,)
        The mixture mean :math:`\frac1S\sum_s \mu_*^{(s)}`.
    var : ndarray, shape (m,)
        The mixture variance (law of total variance).
    lower, upper : ndarray, shape (m,)
        The central ``prob`` (94%) interval of the mixture of Gaussians (exact quantiles).
    samples : ndarray, shape (n_samples, m) or None
        Predictive draws: each from a posterior draw chosen at random and that draw's Gaussian,
        independently per point (marginal draws, not joint functions).
    include_noise : bool
        Whether the variances are those of :math:`y_*` (with noise) or of :math:`f_*`.
    chain, draw : ndarray, shape (S,)
        The posterior coordinates of the draws used.
    jitter : float
        The largest jitter :func:`bayes_gp.linalg.jittered_cholesky` had to add to :math:`C`
        beyond the term's own (0 normally).
    prob : float
        Probability of the interval (0.94).
    """

    means: np.ndarray
    variances: np.ndarray
    mean: np.ndarray
    var: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    samples: np.ndarray | None
    include_noise: bool
    chain: np.ndarray
    draw: np.ndarray
    jitter: float = 0.0
    prob: float = PROB

    @property
    def sd(self) -> np.ndarray:
        """Mixture standard deviation."""
        return np.sqrt(self.var)

    @property
    def n_draws(self) -> int:
        """Number S of posterior draws used."""
        return int(self.means.shape[0])


def _posterior(idata):
    try:
        return idata["posterior"]
    except (KeyError, TypeError, AttributeError, IndexError):
        raise ValueError(
            "`idata` has no `posterior` group: pass the result of `pm.sample` (an ArviZ "
            f"DataTree with a posterior), got {type(idata).__name__}"
        ) from None


def _posterior_values(post, term: MarginalTerm) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """The posterior arrays of the term's hyperparameters, stacked to ``(chain * draw, *shape)``,
    and the chain and draw coordinates of each row."""
    names = term.hyperparameters
    missing = []
    arrays = []
    for name in names:
        try:
            arrays.append(post[name])
        except KeyError:
            missing.append(name)
    if missing:
        have = sorted(str(v) for v in getattr(post, "data_vars", []))
        raise KeyError(
            f"the posterior has no variable(s) {missing}, which term {term.name!r} depends on "
            f"(its covariance, mean or noise); it has {have}. Sample the model the term was "
            "added to (term.model) and keep these variables"
        )
    if not names:  # nothing random: one draw stands for all
        return [], np.zeros(1, int), np.zeros(1, int)
    init = make_initial_point_fn(model=term.model, return_transformed=False)(0)
    out = []
    for name, da in zip(names, arrays, strict=True):
        if "chain" not in da.dims or "draw" not in da.dims:
            raise ValueError(
                f"posterior variable {name!r} has dims {da.dims}; expected ('chain', 'draw', ...)"
            )
        da = da.transpose("chain", "draw", ...)
        values = np.asarray(da.values, dtype=float)
        shape = np.shape(init[name])
        if values.shape[2:] != shape:
            raise ValueError(
                f"posterior variable {name!r} has shape {values.shape[2:]} per draw, but the "
                f"model's {name!r} has shape {shape}"
            )
        if not np.all(np.isfinite(values)):
            raise ValueError(f"posterior variable {name!r} contains NaN or infinite values")
        out.append(values.reshape(-1, *shape))
    chain = np.asarray(arrays[0]["chain"].values)
    draw = np.asarray(arrays[0]["draw"].values)
    cc, dd = np.meshgrid(chain, draw, indexing="ij")
    return out, cc.ravel(), dd.ravel()


def _thin(total: int, k: int) -> np.ndarray:
    """``min(k, total)`` evenly spaced indices in ``range(total)``."""
    if total <= k:
        return np.arange(total)
    return np.round(np.linspace(0, total - 1, k)).astype(int)


@single_blas_thread
def predict_marginal(
    idata,
    term: MarginalTerm,
    X_new,
    *,
    include_noise: bool = False,
    draws: int | None = None,
    block: int | None = None,
    random_seed: int | None = None,
    n_samples: int = 0,
) -> MarginalPrediction:
    r"""Posterior predictions of a :class:`MarginalTerm` at new inputs ``X_new``.

    At each posterior draw :math:`\theta^{(s)}` the GP is conditioned on :math:`y` in closed
    form (R&W eqs. 2.25–2.26; eq. 2.38 with a mean function; PRML eqs. 6.66–6.67):

    .. math::
       \mu_*^{(s)} = m(X_*) + K_*^\top C^{-1} (y - m(X)), \qquad
       v_*^{(s)} = \operatorname{diag} k(X_*, X_*) - \operatorname{diag}(K_*^\top C^{-1} K_*)
       \ [+\ \sigma^2],

    with :math:`K_* = K(X, X_*)` and :math:`C = K(X, X) + (\sigma^2 + \epsilon) I`, all at
    :math:`\theta^{(s)}`; then the draws are mixed:

    .. math::
       \bar\mu_* = \frac1S \sum_s \mu_*^{(s)}, \qquad
       \bar v_* = \frac1S \sum_s v_*^{(s)} + \frac1S \sum_s \left(\mu_*^{(s)} - \bar\mu_*\right)^2

    (law of total variance), and the band is the central 94% interval of the mixture
    :math:`\frac1S \sum_s N(\mu_*^{(s)}, v_*^{(s)})`.

    The values of :attr:`MarginalTerm.hyperparameters` are read from the posterior by name (on
    their natural scale, as PyMC and nutpie store them); other variables and deterministics are
    not used. One function compiled once maps them to
    :math:`(m(X), C, K_*, \operatorname{diag} k(X_*, X_*), m(X_*), \sigma^2)`; :math:`C` is
    factorised once per draw by :func:`bayes_gp.linalg.jittered_cholesky`, and ``X_new`` is
    processed ``block`` rows at a time (each block re-evaluates :math:`K(X, X)`, an
    :math:`O(n^2)` cost next to the :math:`O(n^3)` factorisation).

    Parameters
    ----------
    idata : DataTree
        The result of ``pm.sample`` (PyMC or nutpie) on ``term.model``: a ``posterior`` group
        with dims ``(chain, draw, ...)``.
    term : MarginalTerm
        From :func:`marginal_gp`.
    X_new : array_like (m,) or (m, D), or DataFrame
        New inputs, with the columns of the term's ``X``.
    include_noise : bool
        Predict :math:`y_*` (add :math:`\sigma^2`) instead of :math:`f_*`.
    draws : int, optional
        Most posterior draws used, thinned evenly over the chains (``None``: 500).
    block : int, optional
        Rows of ``X_new`` per block (``None``: so that :math:`K_*` has at most :math:`2^{22}`
        entries).
    random_seed : int, optional
        Seed of the predictive draws.
    n_samples : int
        Number of predictive draws to return (``samples``); 0: none.

    Returns
    -------
    MarginalPrediction

    Raises
    ------
    ValueError
        ``idata`` without a posterior, ``X_new`` with the wrong number of columns or non-finite
        values, non-finite or misshapen posterior values, bad ``draws``/``block``/``n_samples``.
    KeyError
        A variable the term depends on is missing from the posterior.
    """
    if not isinstance(term, MarginalTerm):
        raise TypeError(f"`term` must be a MarginalTerm (from marginal_gp), got {type(term)}")
    Xn = new_inputs(X_new, term.X.shape[1])
    max_draws = (
        DEFAULT_DRAWS if draws is None else check_integer_in("draws", draws, range(1, 2**62))
    )
    n_samples = check_integer_in("n_samples", n_samples, range(0, 2**62))
    m = Xn.shape[0]
    n = term.X.shape[0]
    if block is None:
        block = max(1, _BLOCK_ENTRIES // max(n, 1))
    block = check_integer_in("block", block, range(1, 2**62))
    post = _posterior(idata)
    stacked, chain, draw = _posterior_values(post, term)
    total = stacked[0].shape[0] if stacked else 1
    idx = _thin(total, max_draws)
    S = idx.shape[0]

    means = np.empty((S, m))
    variances = np.empty((S, m))
    starts = range(0, max(m, 1), block)
    extra = []
    r = None
    for j, i in enumerate(idx):
        values = [a[i] for a in stacked]
        fac = None
        for start in starts:
            rows = slice(start, min(start + block, m))
            mX, C, Ks, kss, ms, s2 = term.evaluate(values, Xn[rows])
            if fac is None:
                # Line 2-3 of R&W Algorithm 2.1: L = chol(C), alpha = C^{-1} (y - m)
                L, added = jittered_cholesky(C)
                r = term.y - mX
                fac = GaussianFactor(L, cho_solve((L, True), r, check_finite=False), r, added)
                extra.append(added)
            # R&W eqs. 2.25-2.26 (Algorithm 2.1 lines 4-6) for the block
            mu, var = predict(fac, Ks, kss)
            means[j, rows] = ms + mu
            variances[j, rows] = var + s2 if include_noise else var
    jitter = float(max(extra, default=0.0))
    if jitter > 0:
        warnings.warn(
            f"C was not numerically positive definite at {sum(e > 0 for e in extra)} of {S} "
            f"posterior draws; added up to {jitter:.3g} to its diagonal beyond the term's jitter "
            f"{term.jitter:.3g} (run term.check_jitter() before sampling, add noise or remove "
            "duplicate inputs)",
            JitterWarning,
            stacklevel=2,
        )

    mean = means.mean(axis=0)
    var = variances.mean(axis=0) + means.var(axis=0)  # law of total variance
    sds = np.sqrt(variances)
    lower, upper = gaussian_mixture_quantiles(means, sds, CI_QUANTILES)
    samples = None
    if n_samples > 0:
        rng = np.random.default_rng(random_seed)
        which = rng.integers(S, size=n_samples)
        samples = means[which] + sds[which] * rng.standard_normal((n_samples, m))
    return MarginalPrediction(
        means, variances, mean, var, lower, upper, samples, bool(include_noise),
        chain[idx], draw[idx], jitter,
    )  # fmt: skip
