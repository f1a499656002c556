r"""The Laplace-integrated latent GP in C for nutpie: a first fit of ``LatentGP.sample()``
without numba compiling.

:class:`~bayes_gp.LatentGP` and :class:`~bayes_gp.GPClassifier` sample their hyperparameters
by NUTS with the latent values integrated out by Laplace's method (``method="nuts"``; the Op
:class:`~bayes_gp.latent.op.LaplaceLogp`). On nutpie's numba backend the Newton solver is
compiled once per machine (:mod:`bayes_gp.latent.native`), but each model's log density, the
kernel's graph and its gradient around the Op, is compiled by numba for every new data set:
28 s of the first Pima fit on a new machine against 11 s in C (``benchmarks/README.md``,
"The Laplace-integrated latent GP in C"). For the likelihoods with a log-concave density
(:func:`bayes_gp.latent.native.likelihood_spec`: Bernoulli with the logit link, binomial,
Poisson, and the negative binomial and the Gaussian, whose parameter, the dispersion or the
noise sd, is sampled with the hyperparameters) and a kernel that is a sum of products of catalogue kernels
(:mod:`bayes_gp.inference.native_model`), :file:`bayes_gp/solvers/c/laplace.c` computes the
whole log density

.. math::
   \log p(\theta) + \log q(y \mid \theta), \qquad
   \log q(y \mid \theta) = \log p(y \mid \hat f) - \tfrac12 \hat a^\top (\hat f - m)
      - \tfrac12 \log |B|

(R&W eq. 3.32) and its gradient (R&W Algorithm 5.1 generalised, the formulas of
:mod:`bayes_gp.latent.laplace`), the stable form of R&W Algorithm 3.1 step for step as
:mod:`bayes_gp.latent.native` takes it, with the exact GP's kernels and priors
(:mod:`bayes_gp.inference.native_gp`, whose library, loading and nutpie plumbing it shares).
The chains run it without the GIL, in parallel.

The same library gives the Laplace modes the fit needs besides the sampler
(:func:`modes`): the Newton method's fixed starting point (the mode at the model's initial
point, :attr:`~bayes_gp.latent.op.LaplaceLogp.start`) and, after sampling, each draw's mode and
:math:`\mathrm{diag}(\Sigma)` for the LA-LOO terms (one thread per chain, each draw warm-started
from the previous draw's mode), so that a fit on this path compiles nothing at all.

What it covers (the model's description, :meth:`bayes_gp.LatentGP._laplace_description`): the
likelihoods above (exactly those classes), a catalogue kernel or a sum of products of them at
the training inputs, a zero mean or a constant one (a number or a free Normal), and the
hyperparameters and the likelihood's parameter free on PyMC's log transform with the exact
GP's priors or fixed by numbers; any other model goes to numba, and the posterior records why.
Its derivatives in the likelihood's parameter follow :mod:`bayes_gp.latent.laplace`'s
:math:`\partial\log q/\partial\phi` (R&W eq. 5.24's implicit term included).
"""

from __future__ import annotations

import ctypes
import dataclasses
from typing import Any, ClassVar

import numpy as np

from bayes_gp.inference.native_latent import _mean
from bayes_gp.inference.native_model import (
    Layout,
    NativeKernel,
    NotNative,
    _constant,
    _frozen,
    _pointers,
    _struct,
    coordinates,
    coords_struct,
    free_parameters,
    gp_struct,
)

__all__ = ["NativeLaplace", "NativeModes", "modes"]

#: The C struct ``lap_t`` of laplace.c, field by field (as native_model's ``_GP``).
_LAP_LAYOUT = (
    ("n", "i"), ("off_mean", "i"), ("code", "i"), ("max_iter", "i"), ("warm", "i"),
    ("off_phi", "i"), ("mean_fixed", "f"), ("tol", "f"), ("phi_fixed", "f"), ("coords", "p"),
    ("y", "p"), ("a1", "p"), ("a2", "p"), ("start", "p"), ("g", "p"),
)  # fmt: skip

@dataclasses.dataclass(frozen=True)
class NativeLaplace:
    r"""What the C code needs of a Laplace-integrated latent GP: the kernel
    (:class:`~bayes_gp.inference.native_model.NativeKernel`), the inputs ``X`` (n, D), the
    likelihood as :func:`bayes_gp.latent.native.likelihood_spec` gives it (``code``, ``y``,
    ``a1``, ``a2``) and its parameter ``phi`` (the model's random variable or a number;
    ``None`` for the likelihoods without one), the jitter, the mean (the model's random
    variable or a number), the model's ``potential`` (the log evidence the C code computes),
    the Newton method's tolerance and iteration limit, and its starting point ``start``
    (``None``: :math:`f = m`)."""

    kernel: NativeKernel
    X: np.ndarray
    code: int
    y: np.ndarray
    a1: np.ndarray
    a2: np.ndarray
    jitter: float
    mean: Any
    potential: Any
    tol: float = 1e-10
    max_iter: int = 100
    start: np.ndarray | None = None
    phi: Any = None

    symbols: ClassVar[tuple[str, str]] = ("lap_logp", "lap_expand")
    what: ClassVar[str] = (
        "the Laplace-integrated latent GP's log density in C (bayes_gp.inference.native_laplace)"
    )
    swaps_y: ClassVar[bool] = False  # a1 and a2 depend on y
    objective: ClassVar[str | None] = "lap_objective"

    def layout(self, model) -> Layout:
        """The coordinates of ``model``'s unconstrained vector, or :class:`NotNative`."""
        positive = free_parameters(model, self.kernel, *([] if self.phi is None else [self.phi]))
        return coordinates(model, positive, {"mean": (self.mean, 1)}, potential=self.potential,
                           what="the GP's")  # fmt: skip

    def struct(self, layout: Layout, *, cold: bool = False
               ) -> tuple[np.ndarray, dict[str, np.ndarray]]:  # fmt: skip
        """``lap_t`` and the arrays (the kernel's ``gp_t`` included) it points into; with
        ``cold`` Newton's method starts from :math:`f = m` whatever ``start`` says."""
        n = self.X.shape[0]
        warm = self.start is not None and not cold
        start = self.start if warm else np.zeros(n)
        arrays: dict[str, np.ndarray] = {"y": _frozen(self.y), "a1": _frozen(self.a1),
                                         "a2": _frozen(self.a2), "start": _frozen(start)}  # fmt: skip
        if arrays["start"].shape != (n,):
            raise ValueError(f"the Newton start must have shape ({n},), got {np.shape(start)}")
        coords_struct(layout, arrays)
        g = gp_struct(self.kernel, self.X, np.zeros(n), self.jitter, None, layout, arrays, "g_")
        off_mean, mean_fixed = _mean(layout, self.mean)
        off_phi, phi_fixed = self._phi_slot(layout)
        values = {
            "n": n, "off_mean": off_mean, "code": int(self.code), "max_iter": int(self.max_iter),
            "warm": int(warm), "off_phi": off_phi, "mean_fixed": mean_fixed,
            "tol": float(self.tol), "phi_fixed": phi_fixed,
            "coords": arrays["coords"].ctypes.data, **_pointers(arrays, "y", "a1", "a2", "start"),
            "g": g.ctypes.data,
        }  # fmt: skip
        return _struct(values, _LAP_LAYOUT), arrays

    def _phi_slot(self, layout: Layout) -> tuple[int, float]:
        """``(coordinate, 0.0)`` of the likelihood parameter on the log transform, or ``(-1,
        log value)`` for a number (``(-1, 0.0)`` without a parameter); :class:`NotNative`
        otherwise."""
        if self.phi is None:
            return -1, 0.0
        offset = layout.offset(self.phi)
        if offset is not None:
            if layout.scale[offset] == 0.0:
                raise NotNative("the likelihood parameter is not sampled on the log scale")
            return offset, 0.0
        try:
            value = float(np.asarray(_constant(self.phi)).item())
        except (NotNative, ValueError) as err:
            raise NotNative("the likelihood parameter is neither a free variable nor a "
                            "number") from err  # fmt: skip
        if not (np.isfinite(value) and value > 0):
            raise NotNative(f"the likelihood parameter is fixed at {value}, not positive")
        return -1, float(np.log(value))


@dataclasses.dataclass(frozen=True)
class NativeModes:
    """What :func:`modes` returns, each with the points' leading axes: the Laplace mode ``f``
    and ``cov_diag`` (:math:`\\mathrm{diag}(\\Sigma)`; NaN where infeasible), the log evidence
    ``log_q`` and the solver's ``status`` (:data:`bayes_gp.latent.native.REASONS` for those
    that are not 0)."""

    f: np.ndarray
    cov_diag: np.ndarray
    log_q: np.ndarray
    status: np.ndarray


def modes(model, values: list[np.ndarray], *, cold: bool = False) -> NativeModes | None:
    r"""The Laplace approximation at many points in C, or ``None`` where the C path does not
    cover ``model`` as a Laplace-integrated latent GP (or the library is not available).

    ``values[k]`` holds the values of the model's ``k``-th free random variable with leading
    axes ``(chain, draw)``. Along each chain the points are taken in order, Newton's method of
    each started from the previous point's mode (the first from the description's start, or
    with ``cold`` from :math:`f = m`), so every value is a function of that chain's points
    alone; the chains run in parallel threads (no GIL, one BLAS thread each). Returns arrays
    with the same leading axes."""
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_limits

    from bayes_gp.inference import native_gp

    planned, lib, _ = native_gp._planned(model)
    if planned is None or not isinstance(planned[0], NativeLaplace):
        return None
    desc, layout = planned
    values = [np.asarray(v, dtype=np.float64) for v in values]
    if not values or any(v.ndim < 2 or v.shape[:2] != values[0].shape[:2] for v in values):
        raise ValueError("modes needs each free variable's values with axes (chain, draw, ...)")
    chains, draws = values[0].shape[:2]
    x = layout.of_values([v.reshape(chains * draws, *v.shape[2:]) for v in values])
    x = x.reshape(chains, draws, layout.n_free)
    user_data, arrays = desc.struct(layout, cold=cold)
    start = arrays["start"].ctypes.data if desc.start is not None and not cold else None
    n = desc.X.shape[0]
    f, ds = np.empty((chains, draws, n)), np.empty((chains, draws, n))
    logq, status = np.empty((chains, draws)), np.empty((chains, draws), dtype=np.int64)
    fn = lib.lap_modes
    fn.restype = ctypes.c_int64
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int64] + [ctypes.c_void_p] * 6

    def run(c: int) -> int:
        return fn(user_data.ctypes.data, draws, x[c].ctypes.data, start, f[c].ctypes.data,
                  ds[c].ctypes.data, logq[c].ctypes.data, status[c].ctypes.data)  # fmt: skip

    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(min(chains, 2)) as pool:
        done = list(pool.map(run, range(chains)))
    del arrays
    if min(done) < 0:
        raise MemoryError(f"the Laplace pass could not allocate its workspace (n = {n})")
    return NativeModes(f, ds, logq, status)
