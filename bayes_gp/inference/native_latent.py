r"""Whitened latent GPs in C for nutpie (no per-model compiling): the heteroscedastic GP, and a
latent GP under a Bernoulli, binomial or Poisson likelihood sampled jointly.

Both sample a latent process through its whitened coordinates, :math:`g = \mu + L z`,
:math:`L L^\top = K + \epsilon I`, :math:`z \sim N(0, I)` (``pm.gp.Latent(reparameterize=True)``),
whose gradient numba compiles slowly: PyTensor's reverse mode of the Cholesky factor took 24.5 s
of the 34-50 s that the heteroscedastic GP's first fit spent compiling (``mcycle``, n = 133;
``benchmarks/README.md``, "The heteroscedastic GP's first fit"), longer than the sampling.
:file:`bayes_gp/solvers/c/exact_gp.c` computes both log densities and their gradients from the
exact GP's C code (:mod:`bayes_gp.inference.native_gp`, whose library, loading and nutpie
plumbing they share); the gradient through :math:`L` by the Cholesky factor's reverse mode
(Murray 2016, arXiv:1602.07527) in :math:`O(n^3)`: with :math:`\bar g` the log density's
derivative in :math:`g`, :math:`\bar K = L^{-\top} \operatorname{sym}(\Phi(v z^\top)) L^{-1}`,
:math:`v = L^\top \bar g`.

* :class:`NativeHetero` (``het_logp``): :class:`~bayes_gp.HeteroscedasticGPRegression`,
  :math:`f` integrated out (Goldberg, Williams & Bishop 1998),

  .. math::
     y - m \sim N\!\left(0,\ K_f + \operatorname{diag}(e^{2g}) + \epsilon_f I\right)

  (R&W eq. 2.30), :math:`\bar g_i = (\alpha_i^2 - [C^{-1}]_{ii})\, e^{2 g_i}` from R&W eq.
  5.9's diagonal.
* :class:`NativeJointLatent` (``lat_logp``): :class:`~bayes_gp.LatentGP` and
  :class:`~bayes_gp.GPClassifier` with ``method="nuts_joint"`` under the Bernoulli or binomial
  likelihood with the logit link or the Poisson likelihood with the log link (R&W eqs.
  3.1-3.2 for the logit), :math:`\bar f_i = \partial \log p(y_i \mid f_i) / \partial f_i`.

What they cover (described by the models themselves): the exact GP's kernels (catalogue
kernels and sums of products of them, :mod:`bayes_gp.inference.native_model`), their
hyperparameters free on the log transform with the exact GP's priors or fixed by numbers, the
mean of the whitened process a number or a Normal, and nothing else in the model (a variable
the user added sends it to numba, whose reason the posterior records).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from bayes_gp.inference.native_model import (
    Layout,
    NativeKernel,
    NotNative,
    _constant,
    _frozen,
    _pointers,
    _shape,
    _struct,
    coordinates,
    coords_struct,
    free_parameters,
    gp_struct,
)

__all__ = ["LINKS", "NativeHetero", "NativeJointLatent"]

#: The C struct ``het_t`` of exact_gp.c, field by field (as native_model's ``_GP``).
_HET_LAYOUT = (
    ("n", "i"), ("off_mean", "i"), ("off_z", "i"), ("mean_fixed", "f"), ("c", "p"), ("f", "p"),
    ("g", "p"),
)  # fmt: skip


def _whitened(model, kernels: tuple[NativeKernel, ...], z, mean, latent, what: str) -> Layout:
    """The coordinates of a model of whitened latent values ``z`` (and their ``mean``, a
    Normal or a number) under ``kernels``, storing the deterministic ``latent`` last."""
    positive = [v for k in kernels for v in free_parameters(model, k)]
    n = _shape(latent)[0]
    layout = coordinates(model, positive, {"z": (z, n), "mean": (mean, 1)}, latent=latent,
                         what=what)  # fmt: skip
    if layout.offset(z) is None:
        raise NotNative("the whitened latent values are not a free random variable")
    return layout


def _mean(layout: Layout, mean) -> tuple[int, float]:
    """``(coordinate, fixed value)`` of the mean of a whitened latent: its coordinate (and 0),
    or -1 and the number."""
    offset = layout.offset(mean)
    if offset is not None:
        return offset, 0.0
    try:
        return -1, float(np.asarray(_constant(mean)).item())
    except (NotNative, ValueError) as err:
        raise NotNative("the mean is neither a free random variable nor a number") from err


@dataclasses.dataclass(frozen=True)
class NativeHetero:
    r"""What the C code needs of a heteroscedastic GP regression: the kernels of :math:`f` and
    :math:`g` (:class:`~bayes_gp.inference.native_model.NativeKernel`), the inputs ``X`` (n,
    D), ``y`` minus the fixed mean of :math:`f`, the two jitters, the mean of :math:`g` (the
    model's random variable or a number), and the whitened latent ``z`` (``g_rotated_``) and
    the deterministic ``g``."""

    kernel: NativeKernel
    noise_kernel: NativeKernel
    X: np.ndarray
    y: np.ndarray
    jitter_f: float
    jitter_g: float
    noise_mean: Any
    z: Any
    g: Any

    symbols: ClassVar[tuple[str, str]] = ("het_logp", "het_expand")
    what: ClassVar[str] = (
        "the heteroscedastic GP's log density in C (bayes_gp.inference.native_latent)"
    )
    swaps_y: ClassVar[bool] = True
    objective: ClassVar[str | None] = None

    def layout(self, model) -> Layout:
        """The coordinates of ``model``'s unconstrained vector, or :class:`NotNative`."""
        return _whitened(model, (self.kernel, self.noise_kernel), self.z, self.noise_mean,
                         self.g, "the GPs'")  # fmt: skip

    def struct(self, layout: Layout) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """``het_t`` and the arrays (the two ``gp_t`` included) it points into."""
        n = self.X.shape[0]
        arrays: dict[str, np.ndarray] = {}
        coords_struct(layout, arrays)
        f = gp_struct(self.kernel, self.X, self.y, self.jitter_f, None, layout, arrays, "f_")
        g = gp_struct(self.noise_kernel, self.X, np.zeros(n), self.jitter_g, None, layout,
                      arrays, "g_")  # fmt: skip
        off_mean, mean_fixed = _mean(layout, self.noise_mean)
        values = {"n": n, "off_mean": off_mean, "off_z": layout.offset(self.z),
                  "mean_fixed": mean_fixed, "c": arrays["coords"].ctypes.data,
                  "f": f.ctypes.data, "g": g.ctypes.data}  # fmt: skip
        return _struct(values, _HET_LAYOUT), arrays


#: The C struct ``lat_t`` of exact_gp.c, field by field.
_LAT_LAYOUT = (
    ("n", "i"), ("off_mean", "i"), ("off_z", "i"), ("link", "i"), ("mean_fixed", "f"),
    ("coords", "p"), ("y", "p"), ("m", "p"), ("c", "p"), ("g", "p"),
)  # fmt: skip

#: the link -> the C code's ``LINK_*``
LINKS = {"logit": 0, "log": 1}


@dataclasses.dataclass(frozen=True)
class NativeJointLatent:
    r"""What the C code needs of a latent GP sampled jointly with its hyperparameters: the
    kernel (:class:`~bayes_gp.inference.native_model.NativeKernel`), the inputs ``X`` (n, D),
    the link (``"logit"``: ``y`` successes of ``m`` trials; ``"log"``: Poisson counts ``y`` of
    exposure ``m``), the terms ``c`` of the log density without :math:`f`, the jitter, the
    mean (the model's random variable or a number), the whitened ``z`` (``f_rotated_``) and
    the deterministic ``f``."""

    kernel: NativeKernel
    X: np.ndarray
    link: str
    y: np.ndarray
    m: np.ndarray
    c: np.ndarray
    jitter: float
    mean: Any
    z: Any
    f: Any

    symbols: ClassVar[tuple[str, str]] = ("lat_logp", "lat_expand")
    what: ClassVar[str] = (
        "the joint latent GP's log density in C (bayes_gp.inference.native_latent)"
    )
    swaps_y: ClassVar[bool] = False  # c depends on y
    objective: ClassVar[str | None] = None

    def layout(self, model) -> Layout:
        """The coordinates of ``model``'s unconstrained vector, or :class:`NotNative`."""
        return _whitened(model, (self.kernel,), self.z, self.mean, self.f, "the GP's")

    def struct(self, layout: Layout) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """``lat_t`` and the arrays (the kernel's ``gp_t`` included) it points into."""
        n = self.X.shape[0]
        arrays: dict[str, np.ndarray] = {"y": _frozen(self.y), "m": _frozen(self.m),
                                         "c": _frozen(self.c)}  # fmt: skip
        coords_struct(layout, arrays)
        g = gp_struct(self.kernel, self.X, np.zeros(n), self.jitter, None, layout, arrays, "g_")
        off_mean, mean_fixed = _mean(layout, self.mean)
        values = {
            "n": n, "off_mean": off_mean, "off_z": layout.offset(self.z), "link": LINKS[self.link],
            "mean_fixed": mean_fixed, "coords": arrays["coords"].ctypes.data,
            **_pointers(arrays, "y", "m", "c"), "g": g.ctypes.data,
        }  # fmt: skip
        return _struct(values, _LAT_LAYOUT), arrays
