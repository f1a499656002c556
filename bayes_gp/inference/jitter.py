r"""The diagonal jitter of a GP model: its meaning, and the pre-flight Cholesky check that
chooses it before a fit.

**Meaning.** Every model's ``jitter=`` argument is *relative to the model's prior scale*
:math:`s^2`, the square of the data scale its default priors use (``DataScale.y_sd``): the
absolute jitter added to the diagonal is :math:`\epsilon = \text{jitter} \times s^2`.
:math:`s^2` is :math:`\operatorname{var}(y)` for :class:`~bayes_gp.GPRegression`,
:class:`~bayes_gp.DeepKernelRegression` and the :math:`f`-GP of
:class:`~bayes_gp.HeteroscedasticGPRegression`; the latent scale of
:class:`~bayes_gp.latent.LatentGP` (and :class:`~bayes_gp.GPClassifier`): :math:`2^2 = 4`
(``LINK_SCALE``) for the link-scale likelihoods (Bernoulli, binomial, Poisson, negative
binomial) and :math:`\operatorname{var}(y)` for the Student-t and Gaussian ones; and 1 for the
heteroscedastic model's log-noise GP :math:`g` (its prior amplitude is O(1) on the log scale).
The argument, :math:`s^2` and the absolute value in use travel together as one :class:`Jitter`;
``model.jitter`` is the absolute value in use, ``model.default_jitter`` the one before any
pre-flight increase, and both are what a fit records (:class:`JitterChoice`, ``MapFit.jitter``,
the posterior's ``bayes_gp_jitter*`` attributes). ``set_jitter(absolute)`` restores a saved
fit's value.

**One graph.** The absolute jitter enters every PyMC model (and every compiled function) a model
object builds as one shared value (``pytensor.shared``, :attr:`SharedJitter.jitter_tensor`).
Raising it sets that value: the PyMC model stays the same object, so whatever a user added to
``gp.model`` (a deterministic, a potential, another likelihood term) stays in it, and compiled
functions stay valid. PyMC's sampler and nutpie read the value when they compile the model; the
JAX backend (``sampler="numpyro"``) replaces it by a constant then (PyMC's
``get_jaxified_graph``), so a change after a compilation needs the next ``sample`` call, which
compiles again.

**Pre-flight check.** A GP model factorises :math:`C = K_\theta + (\sigma^2 + \epsilon) I`
(regression) or :math:`K_\theta + \epsilon I` (a latent GP) at every hyperparameter value the
sampler or the optimiser visits. Inside a PyMC model a failed factorisation does not raise:
the log density becomes :math:`-\infty` (or NaN), which NUTS records as a divergence and
L-BFGS-B as an infeasible step. When it fails at the starting point, or across a region the
prior covers, the fit is silently biased or stalls.

:func:`preflight` therefore factorises the model's matrix at the initial point and at a few
draws from the priors *before* fitting. If any factorisation fails, the jitter :math:`\epsilon`
grows tenfold until all succeed (the model's shared jitter is then set to it), up to
``maximum`` times the largest mean diagonal; beyond that the matrix is not a covariance matrix
numerically and :class:`~bayes_gp.NotPSDError` says what to change. The jitter used is recorded
(:class:`JitterChoice`, the fit's ``jitter`` and the posterior's ``bayes_gp_jitter`` attribute)
and shown in the report. The check cannot cover every point NUTS visits: failures at other points
still appear as divergences, which the report's verdicts surface.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor
from pymc.initial_point import make_initial_point_fn

from bayes_gp._validation import check_jitter
from bayes_gp.linalg import EAGER_MODE, NotPSDError, check_psd

__all__ = [
    "Jitter",
    "JitterChoice",
    "choose_jitter",
    "check_points",
    "preflight",
    "finite_at_points",
    "duplicate_rows",
    "advice",
    "DEFAULT_JITTER",
    "DEFAULT_LATENT_JITTER",
    "MAX_RELATIVE_JITTER",
    "N_PRIOR_DRAWS",
    "SharedJitter",
    "PreflightJitter",
]

#: The default jitter of a GP whose covariance meets Gaussian noise (GPRegression,
#: MultiOutputGP and the ICM functions, DeepKernelRegression, HierarchicalGP, marginal_gp),
#: relative to the variance of the data: the absolute jitter is ``1e-10 * var(y)``, a floor far
#: below any noise variance the data can support.
DEFAULT_JITTER = 1e-10
#: The default absolute jitter of a latent GP's covariance, which has no noise on its diagonal
#: (LatentGP, GPClassifier, MulticlassGPClassifier, the latent HierarchicalGP, and the
#: heteroscedastic model's log-noise GP): ``1e-6`` on the latent function's own scale.
DEFAULT_LATENT_JITTER = 1e-6
#: Largest jitter, relative to the mean diagonal of the matrix, that the pre-flight check adds
#: (as :func:`bayes_gp.linalg.jittered_cholesky`): a matrix that needs more is not a covariance.
MAX_RELATIVE_JITTER = 1e-4
#: Draws from the priors checked besides the initial point.
N_PRIOR_DRAWS = 8


@dataclass(frozen=True)
class Jitter:
    r"""A model's diagonal jitter: the ``jitter=`` argument, the scale it is relative to, and the
    absolute value in use (module docstring).

    Attributes
    ----------
    relative : float
        The argument: the jitter relative to :math:`s^2` (finite, >= 0).
    scale2 : float
        :math:`s^2`, the model's prior variance scale (positive).
    value : float
        The absolute jitter :math:`\epsilon` in use: :attr:`default` until the pre-flight check
        raises it or a saved fit's value is restored (:meth:`at`).
    """

    relative: float
    scale2: float
    value: float

    @classmethod
    def of(cls, jitter, scale2: float, default: float) -> Jitter:
        """The jitter of argument ``jitter`` (relative; ``None``: ``default``, also relative)
        at scale ``scale2``, validated by :func:`bayes_gp._validation.check_jitter`."""
        relative = check_jitter(default if jitter is None else jitter)
        scale2 = float(scale2)
        if not (np.isfinite(scale2) and scale2 > 0):
            raise ValueError(f"the jitter's scale must be a positive number, got {scale2!r}")
        return cls(relative, scale2, relative * scale2)

    @property
    def default(self) -> float:
        """The absolute jitter of the argument: ``relative * scale2``."""
        return self.relative * self.scale2

    @property
    def raised(self) -> bool:
        """Whether the value in use is above the default."""
        return self.value > self.default

    def at(self, value: float) -> Jitter:
        """The same jitter with absolute value ``value`` in use (a pre-flight increase, or the
        value of a saved fit)."""
        return dataclasses.replace(self, value=check_jitter(value))

    def choice(self, n_points: int = 0, n_skipped: int = 0) -> JitterChoice:
        """The :class:`JitterChoice` that records this value and the default."""
        return JitterChoice(float(self.value), float(self.default), int(n_points), int(n_skipped))

    def attrs(self) -> dict:
        """The attributes a posterior records (:meth:`JitterChoice.attrs`, no checked points)."""
        return self.choice().attrs()


@dataclass(frozen=True)
class JitterChoice:
    """Outcome of the pre-flight check.

    Attributes
    ----------
    jitter : float
        Absolute jitter :math:`\\epsilon` with which every checked matrix factorised.
    default : float
        The model's jitter before the check.
    n_points : int
        Matrices factorised (initial point and prior draws with finite kernel values).
    n_skipped : int
        Prior draws skipped because the kernel overflowed there (non-finite values).
    """

    jitter: float
    default: float
    n_points: int
    n_skipped: int = 0

    @property
    def raised(self) -> bool:
        return self.jitter > self.default

    def describe(self) -> str:
        """One line for reports: the jitter and whether the check had to raise it."""
        if self.raised:
            return (
                f"{self.jitter:.3g} (raised from {self.default:.3g}: the Cholesky factorisation "
                f"failed at some of {self.n_points} checked points)"
            )
        return f"{self.jitter:.3g} (default; factorised at {self.n_points} checked points)"

    def attrs(self) -> dict:
        """Attributes recorded on a posterior (netCDF-safe numbers)."""
        return {
            "bayes_gp_jitter": float(self.jitter),
            "bayes_gp_jitter_default": float(self.default),
            "bayes_gp_jitter_points": int(self.n_points),
        }


def _factorises(A: np.ndarray, jitter: float) -> bool:
    try:
        np.linalg.cholesky(A + jitter * np.eye(A.shape[0]))
    except np.linalg.LinAlgError:
        return False
    return True


def choose_jitter(
    matrices: Sequence[np.ndarray],
    start: float,
    *,
    maximum: float = MAX_RELATIVE_JITTER,
    advice: str = "",
    n_skipped: int = 0,
) -> JitterChoice:
    r"""The smallest :math:`\epsilon \in \{s, 10s, 100s, \dots\}` with which every
    :math:`A + \epsilon I` has a Cholesky factor.

    Parameters
    ----------
    matrices : sequence of ndarray
        Symmetric matrices *without* the jitter (finite values).
    start : float
        The model's jitter :math:`s`; when 0 the ladder continues at :math:`10^{-12}` times the
        largest mean diagonal.
    maximum : float
        Give up above ``maximum`` times the largest mean diagonal.
    advice : str
        Appended to the error message.

    Raises
    ------
    NotPSDError
        When even the largest jitter fails, with the smallest eigenvalue found and ``advice``.
    """
    scale = max((float(np.mean(np.diag(A))) for A in matrices if A.size), default=1.0)
    scale = max(scale, np.finfo(float).tiny)
    limit = maximum * scale * (1 + 1e-9)
    jitter = float(start)
    pending = list(matrices)
    while True:
        pending = [A for A in pending if not _factorises(A, jitter)]
        if not pending:
            return JitterChoice(float(jitter), float(start), len(matrices), n_skipped)
        step = 10.0 * jitter if jitter > 0 else 1e-12 * scale
        if step > limit:
            break
        jitter = step
    worst = min((check_psd(A).min_eigenvalue for A in pending), default=float("nan"))
    raise NotPSDError(
        f"the covariance matrix is not positive definite even with jitter {jitter:.3g} "
        f"({maximum:g} x its mean diagonal {scale:.3g}) at {len(pending)} of {len(matrices)} "
        f"checked hyperparameter values (smallest eigenvalue {worst:.3g}). {advice}".rstrip()
    )


def check_points(
    model: pm.Model, rvs: Sequence, n_draws: int = N_PRIOR_DRAWS, random_seed=None
) -> list[list[np.ndarray]]:
    """Values of ``rvs`` (constrained) at the model's initial point and at ``n_draws`` draws
    from their priors."""
    init = make_initial_point_fn(model=model, return_transformed=False)(0)
    points = [[np.asarray(init[rv.name], float) for rv in rvs]]
    if n_draws > 0:
        seed = np.random.default_rng(random_seed).integers(2**31)
        draws = pm.draw(list(rvs), draws=int(n_draws), random_seed=int(seed), mode=EAGER_MODE)
        draws = draws if isinstance(draws, list | tuple) else [draws]
        points += [[np.asarray(d[i], float) for d in draws] for i in range(int(n_draws))]
    return points


def finite_at_points(
    points: Iterable[list[np.ndarray]],
    arrays_at: Callable[[list[np.ndarray]], Sequence[np.ndarray]],
    *,
    errors: tuple[type[Exception], ...] = (),
) -> tuple[list[Sequence[np.ndarray]], int]:
    """The pre-flight's points: ``(arrays_at(values) at each point of ``points`` where every
    array is finite, the number of points skipped)``. The first point (the model's initial
    point) must give finite values (a ``ValueError`` says so), later points that do not (or
    raise one of ``errors``: a parameter that is not finite and positive) are skipped; every
    pre-flight (dense, hierarchical, quasiseparable) checks its points this way."""
    out, skipped = [], 0
    for i, values in enumerate(points):
        with np.errstate(all="ignore"):
            try:
                arrays = arrays_at(values)
            except errors:
                arrays = None
        if arrays is None or not all(np.all(np.isfinite(a)) for a in arrays):
            if i == 0:
                raise ValueError(
                    "the kernel gives NaN or infinite values at the model's initial point; "
                    "rescale the inputs or check the priors"
                )
            skipped += 1
            continue
        out.append(arrays)
    return out, skipped


def preflight(
    matrix_at: Callable[[list[np.ndarray]], np.ndarray],
    points: Iterable[list[np.ndarray]],
    start: float,
    *,
    advice: str,
) -> JitterChoice:
    """:func:`choose_jitter` over ``matrix_at(values)`` at ``points``; the first point (the
    initial point) must give finite values, later points with non-finite ones are skipped
    (:func:`finite_at_points`)."""
    found, skipped = finite_at_points(points, lambda v: (np.asarray(matrix_at(v), float),))
    matrices = [0.5 * (A + A.T) for (A,) in found]
    return choose_jitter(matrices, start, advice=advice, n_skipped=skipped)


def duplicate_rows(X: np.ndarray) -> int:
    """How many rows of ``X`` repeat an earlier row exactly."""
    if X.shape[0] == 0:
        return 0
    return int(X.shape[0] - np.unique(X, axis=0).shape[0])


def advice(X: np.ndarray, what: str = "observation noise") -> str:
    """What to change when no jitter helps, with the number of duplicate inputs in ``X``."""
    dup = duplicate_rows(X)
    dup_text = (
        f"remove or merge the {dup} duplicate input row(s)"
        if dup
        else "check for (near-)duplicate inputs"
    )
    return (
        f"Add {what} (or a prior that keeps it away from 0), {dup_text}, or rescale the inputs "
        "(standardise each column); also check that the kernel is a valid covariance"
    )


class SharedJitter:
    """Mixin for the GP models: the model's :class:`Jitter` and the shared value through which
    its absolute value enters every graph the model builds (module docstring).

    The model calls :meth:`_init_jitter` once, before it builds any graph, and uses
    :attr:`jitter_tensor` wherever the jitter enters a graph.
    """

    def _init_jitter(self, jitter, scale2: float, default: float) -> None:
        """Set the jitter from the ``jitter=`` argument (relative to ``scale2``; ``None``: the
        relative ``default``) and create its shared value."""
        self._jitter = Jitter.of(jitter, scale2, default)
        self._jitter_var = pytensor.shared(np.float64(self._jitter.value), name="jitter")

    @property
    def jitter(self) -> float:
        """The absolute diagonal jitter in use."""
        return self._jitter.value

    @property
    def default_jitter(self) -> float:
        """The absolute jitter of the ``jitter=`` argument (before any pre-flight increase)."""
        return self._jitter.default

    @property
    def jitter_info(self) -> Jitter:
        """The :class:`Jitter` value object: the argument, its scale and the value in use."""
        return self._jitter

    @property
    def jitter_tensor(self):
        """The shared scalar holding the absolute jitter, as it enters the model's graphs."""
        return self._jitter_var

    def set_jitter(self, jitter: float) -> None:
        """Use the absolute jitter ``jitter`` (a pre-flight increase, or the jitter of a saved
        fit). The PyMC model and the compiled functions stay the same objects: they read the
        shared value."""
        self._jitter = self._jitter.at(jitter)
        self._jitter_var.set_value(np.float64(self._jitter.value))


class PreflightJitter(SharedJitter):
    """:class:`SharedJitter` with the pre-flight check of :func:`preflight` on the model's
    matrix. The model class has ``X`` and ``model``."""

    def _preflight(
        self,
        rvs: Sequence,
        matrix: Callable[[list[np.ndarray]], np.ndarray],
        what: str,
        random_seed: int | None,
        n_draws: int = N_PRIOR_DRAWS,
    ) -> JitterChoice:
        """Check ``matrix(values)`` (the model's matrix *including* its current jitter) at the
        initial point and ``n_draws`` prior draws of ``rvs``; adopt the jitter that works, on the
        ladder that starts at the default."""
        points = check_points(self.model, rvs, n_draws, random_seed=random_seed)
        current = self.jitter

        def matrix_at(values):
            C = matrix(values)  # n x n, or larger (derivative observations stacked below y)
            return C - current * np.eye(C.shape[0])

        choice = preflight(matrix_at, points, self.default_jitter, advice=advice(self.X, what))
        self.set_jitter(choice.jitter)
        return choice
