r"""Choosing the diagonal jitter of a GP model before it is fitted: a pre-flight Cholesky check.

A GP model factorises :math:`C = K_\theta + (\sigma^2 + \epsilon) I` (regression) or
:math:`K_\theta + \epsilon I` (a latent GP) at every hyperparameter value the sampler or the
optimiser visits. Inside a PyMC model a failed factorisation does not raise: the log density
becomes :math:`-\infty` (or NaN), which NUTS records as a divergence and L-BFGS-B as an infeasible
step. When it fails at the starting point, or across a region the prior covers, the fit is
silently biased or stalls.

:func:`preflight` therefore factorises the model's matrix at the initial point and at a few
draws from the priors *before* fitting. If any factorisation fails, the jitter :math:`\epsilon`
grows tenfold until all succeed (the model is then rebuilt with it by the caller), up to
``maximum`` times the largest mean diagonal; beyond that the matrix is not a covariance matrix
numerically and :class:`~bayes_gp.NotPSDError` says what to change. The jitter used is recorded
(:class:`JitterChoice`, the fit's ``jitter`` and the posterior's ``bayes_gp_jitter`` attribute)
and shown in the report. The check cannot cover every point NUTS visits: failures at other points
still appear as divergences, which the report's verdicts surface.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pymc as pm
from pymc.initial_point import make_initial_point_fn

from bayes_gp.linalg import EAGER_MODE, NotPSDError, _eig_check

__all__ = [
    "JitterChoice",
    "choose_jitter",
    "check_points",
    "preflight",
    "duplicate_rows",
    "advice",
    "MAX_RELATIVE_JITTER",
    "N_PRIOR_DRAWS",
    "PreflightJitter",
]

#: Largest jitter, relative to the mean diagonal of the matrix, that the pre-flight check adds
#: (as :func:`bayes_gp.linalg.jittered_cholesky`): a matrix that needs more is not a covariance.
MAX_RELATIVE_JITTER = 1e-4
#: Draws from the priors checked besides the initial point.
N_PRIOR_DRAWS = 8


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
    worst = min((_eig_check(A, None).min_eigenvalue for A in pending), default=float("nan"))
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


def preflight(
    matrix_at: Callable[[list[np.ndarray]], np.ndarray],
    points: Iterable[list[np.ndarray]],
    start: float,
    *,
    advice: str,
) -> JitterChoice:
    """:func:`choose_jitter` over ``matrix_at(values)`` at ``points``; the first point (the
    initial point) must give finite values, later points with non-finite ones are skipped."""
    matrices, skipped = [], 0
    for i, values in enumerate(points):
        with np.errstate(all="ignore"):
            A = np.asarray(matrix_at(values), float)
        if not np.all(np.isfinite(A)):
            if i == 0:
                raise ValueError(
                    "the kernel gives NaN or infinite values at the model's initial point; "
                    "rescale the inputs or check the priors"
                )
            skipped += 1
            continue
        matrices.append(0.5 * (A + A.T))
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


class PreflightJitter:
    """Mixin for the GP models: the pre-flight check of :func:`preflight` on the model's matrix,
    and the rebuild with the chosen jitter.

    The model class has ``X``, ``model``, a ``_build()`` method and a ``_fns`` cache, and keeps
    its jitter in the attribute named by ``_jitter_attr``.
    """

    _jitter_attr = "jitter"

    def set_jitter(self, jitter: float) -> None:
        """Rebuild the model with absolute jitter ``jitter`` (a pre-flight increase, or the
        jitter of a saved fit). The PyMC model is a new object afterwards."""
        if float(jitter) != getattr(self, self._jitter_attr):
            setattr(self, self._jitter_attr, float(jitter))
            self.model = self._build()
            self._fns = {}

    def _preflight(
        self,
        rvs: Sequence,
        matrix: Callable[[list[np.ndarray]], np.ndarray],
        default: float,
        what: str,
        random_seed: int | None,
        n_draws: int = N_PRIOR_DRAWS,
    ) -> JitterChoice:
        """Check ``matrix(values)`` (the model's matrix *including* its current jitter) at the
        initial point and ``n_draws`` prior draws of ``rvs``; adopt the jitter that works."""
        n = self.X.shape[0]
        points = check_points(self.model, rvs, n_draws, random_seed=random_seed)
        current = getattr(self, self._jitter_attr)

        def matrix_at(values):
            return matrix(values) - current * np.eye(n)

        choice = preflight(matrix_at, points, default, advice=advice(self.X, what))
        self.set_jitter(choice.jitter)
        return choice
