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

What they cover (described by the models themselves): kernels among the exact GP's
(``expquad``, ``matern52``, ``matern32``, ``matern12`` / ``exponential``, isotropic or ARD) times
an amplitude, length-scales and amplitudes free on the log transform with the exact GP's priors
(or amplitudes fixed by a number), the mean of the whitened process a number or a Normal, and
nothing else in the model (a variable the user added sends it to numba, whose reason the
posterior records).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from bayes_gp.inference.native_gp import (
    KERNEL_IDS,
    PRIOR_IDS,
    NotNative,
    _address,
    _constant,
    _frozen,
    _prior,
    _shape,
    _struct,
)

__all__ = ["LINKS", "NativeHetero", "NativeJointLatent"]

#: The C struct ``het_t`` of exact_gp.c, field by field (as native_gp's ``_LAYOUT``).
_HET_LAYOUT = (
    ("n", "i"), ("n_free", "i"), ("n_expanded", "i"), ("off_mean", "i"), ("off_z", "i"),
    ("mean_fixed", "f"), ("prior_kind", "p"), ("prior_a", "p"), ("prior_b", "p"),
    ("prior_c", "p"), ("expand_src", "p"), ("expand_exp", "p"), ("f", "p"), ("g", "p"),
)  # fmt: skip

#: the roles of a positive hyperparameter (log transform) -> (which GP, which parameter)
_POSITIVE = {"ls": ("f", "ls"), "eta": ("f", "eta"), "noise_ls": ("g", "ls"),
             "noise_eta": ("g", "eta")}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class NativeHetero:
    r"""What the C code needs of a heteroscedastic GP regression: the kernels of :math:`f` and
    :math:`g` by name, the inputs ``X`` (n, D), ``y`` minus the fixed mean of :math:`f`, the
    two jitters, each hyperparameter (``ls``, ``eta``, ``noise_ls``, ``noise_eta``,
    ``noise_mean``) as the model's random variable or a number, and the whitened latent ``z``
    (``g_rotated_``) and the deterministic ``g``."""

    kernel: str
    noise_kernel: str
    X: np.ndarray
    y: np.ndarray
    jitter_f: float
    jitter_g: float
    hyper: dict[str, Any]
    z: Any
    g: Any

    symbols: ClassVar[tuple[str, str]] = ("het_logp", "het_expand")
    what: ClassVar[str] = (
        "the heteroscedastic GP's log density in C (bayes_gp.inference.native_latent)"
    )
    swaps_y: ClassVar[bool] = True

    @property
    def kernels(self) -> tuple[str, ...]:
        return (self.kernel, self.noise_kernel)

    def layout(self, model) -> _HetLayout:
        """The coordinates of ``model``'s unconstrained vector, or :class:`NotNative`."""
        return _layout(model, self.X, self.hyper, _POSITIVE, self.z, self.g)

    def struct(self, layout: _HetLayout) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """``het_t`` and the arrays (the two ``gp_t`` included) it points into."""
        return _het_data(self, layout)


@dataclasses.dataclass(frozen=True)
class _HetLayout:
    n_free: int
    n_ls: dict[str, int]  # "f", "g" -> 1 or D
    offsets: dict[str, int]  # role -> first coordinate (absent: fixed)
    fixed: dict[str, float]
    prior: tuple[np.ndarray, ...]
    start: np.ndarray
    shape_info: tuple[list[str], list[slice], list[tuple[int, ...]]]
    expand_src: np.ndarray
    expand_exp: np.ndarray
    n_expanded: int


def _layout(model, X: np.ndarray, hyper: dict[str, Any], positive: dict[str, tuple[str, str]],
            z, latent) -> _HetLayout:
    """The coordinates of ``model``'s unconstrained vector: the roles of ``hyper`` (``positive``
    maps each log-transformed one to its GP and parameter; the others are Normal and
    untransformed), the whitened ``z`` and, stored last, the deterministic ``latent``."""
    n, D = X.shape
    by_rv = {id(v): role for role, v in hyper.items() if any(v is rv for rv in model.free_RVs)}
    if not any(z is rv for rv in model.free_RVs):
        raise NotNative("the whitened latent values are not a free random variable")
    by_rv[id(z)] = "z"
    fixed = {}
    for role, value in hyper.items():
        if id(value) in by_rv:
            continue
        if role in positive and positive[role][1] == "ls":
            raise NotNative(f"{role} is not a free random variable")
        try:
            fixed[role] = float(np.asarray(_constant(value)).item())
        except (NotNative, ValueError) as err:
            raise NotNative(f"{role} is neither a free random variable nor a number") from err
    extra = [v.name for v in (*model.deterministics, *model.potentials) if v is not latent]
    extra += [v.name for v in model.observed_RVs[1:]]
    if extra or not any(v is latent for v in model.deterministics):
        raise NotNative(f"the model has variables besides the GPs': {', '.join(extra)}")
    if len(by_rv) != len(model.free_RVs):
        names = [rv.name for rv in model.free_RVs if id(rv) not in by_rv]
        raise NotNative(f"the model has free variables besides the GPs': {', '.join(names)}")
    offsets, n_ls, kinds, a, b, c, start = {}, {}, [], [], [], [], []
    names, slices, shapes = [], [], []
    count = 0
    for rv in model.free_RVs:
        role = by_rv[id(rv)]
        if model.rvs_to_initial_values.get(rv) is not None:
            raise NotNative(f"{rv.name} has an initial value of its own")
        shape = _shape(rv)
        size = int(np.prod(shape)) if shape else 1
        kind, pa, pb, pc, point = _prior(rv, size)
        transform = type(model.rvs_to_transforms.get(rv)).__name__
        if role in positive:
            if transform != "LogTransform":
                raise NotNative(f"{rv.name} is not sampled on the log scale")
            which, param = positive[role]
            if param == "ls":
                if size not in (1, D):
                    raise NotNative(f"{rv.name} has {size} entries, not 1 or {D}")
                n_ls[which] = size
            elif size != 1:
                raise NotNative(f"{rv.name} is not a scalar")
            point = np.log(point)
        else:  # the mean and z: Normal, untransformed
            if kind != PRIOR_IDS["normal"] or transform != "NoneType":
                raise NotNative(f"{rv.name}'s prior is not an untransformed Normal")
            if size != (n if role == "z" else 1):
                raise NotNative(f"{rv.name} has {size} entries")
        offsets[role] = count
        kinds += [kind] * size
        a += list(pa)
        b += list(pb)
        c += list(pc)
        start += list(point)
        names.append(model.rvs_to_values[rv].name)
        slices.append(slice(count, count + size))
        shapes.append(shape)
        count += size
    # nutpie's stored values (nutpie.compile_pymc._make_functions): the coordinates, then the
    # model's unobserved values it does not already hold, here the positive hyperparameters
    # (exp of their coordinates) and the latent values, which the C code computes last
    src, use_exp = list(range(count)), [0] * count
    rest = [v for v in model.unobserved_value_vars if v.name not in names]
    if not rest or rest[-1].name != latent.name:
        raise NotNative(f"the model's stored values do not end with {latent.name}")
    for var in rest[:-1]:
        rv = next((r for r in model.free_RVs if r.name == var.name), None)
        if rv is None or by_rv[id(rv)] not in positive:
            raise NotNative(f"{var.name} is not a value the C code stores")
        sl = slices[names.index(model.rvs_to_values[rv].name)]
        names.append(var.name)
        slices.append(slice(len(src), len(src) + sl.stop - sl.start))
        shapes.append(_shape(rv))
        src += range(sl.start, sl.stop)
        use_exp += [1] * (sl.stop - sl.start)
    names.append(latent.name)
    slices.append(slice(len(src), len(src) + n))
    shapes.append((n,))
    return _HetLayout(
        n_free=count,
        n_ls=n_ls,
        offsets=offsets,
        fixed=fixed,
        prior=(np.array(kinds, np.int64), np.array(a), np.array(b), np.array(c)),
        start=np.array(start, dtype=np.float64),
        shape_info=(names, slices, shapes),
        expand_src=np.array(src, np.int64),
        expand_exp=np.array(use_exp, np.int64),
        n_expanded=len(src) + n,
    )


def _arrays(X: np.ndarray, layout: _HetLayout, **vectors) -> dict[str, np.ndarray]:
    """The arrays the C structs point into: the inputs by dimension, the priors, what to
    store, and ``vectors`` (length n each)."""
    arrays = {
        "XT": _frozen(np.asarray(X, dtype=np.float64).T),
        "prior_kind": _frozen(layout.prior[0], np.int64),
        "prior_a": _frozen(layout.prior[1]),
        "prior_b": _frozen(layout.prior[2]),
        "prior_c": _frozen(layout.prior[3]),
        "expand_src": _frozen(layout.expand_src, np.int64),
        "expand_exp": _frozen(layout.expand_exp, np.int64),
    }
    return arrays | {name: _frozen(v) for name, v in vectors.items()}


def _pointers(arrays: dict[str, np.ndarray], *names: str) -> dict[str, int]:
    return {name: arrays[name].ctypes.data for name in names}


_PRIOR_FIELDS = ("prior_kind", "prior_a", "prior_b", "prior_c", "expand_src", "expand_exp")


def _kernel(arrays, layout: _HetLayout, which: str, kernel: str, ls: str, eta: str,
            jitter: float, y: str) -> np.ndarray:
    """native_gp's ``gp_t`` of one GP of the model (no noise of its own)."""
    n, D = arrays["XT"].shape[1], arrays["XT"].shape[0]
    lapack = {name: _address("lapack", "d" + name) for name in ("potrf", "trtri", "lauum")}
    return _struct({
        "n": n, "d": D, "kernel": KERNEL_IDS[kernel], "n_ls": layout.n_ls[which],
        "n_free": layout.n_free, "n_expanded": layout.n_expanded,
        "off_ls": layout.offsets[ls], "off_eta": layout.offsets.get(eta, -1),
        "off_sigma": -1, "eta_fixed": layout.fixed.get(eta, 0.0), "sigma_fixed": 0.0,
        "jitter": float(jitter), "XT": arrays["XT"].ctypes.data, "y": arrays[y].ctypes.data,
        **_pointers(arrays, *_PRIOR_FIELDS), **lapack, "trmm": _address("blas", "dtrmm"),
    })  # fmt: skip


def _het_data(het: NativeHetero, layout: _HetLayout) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    n = het.X.shape[0]
    arrays = _arrays(het.X, layout, y=het.y, zeros=np.zeros(n))
    arrays["f"] = _kernel(arrays, layout, "f", het.kernel, "ls", "eta", het.jitter_f, "y")
    arrays["g"] = _kernel(arrays, layout, "g", het.noise_kernel, "noise_ls", "noise_eta",
                          het.jitter_g, "zeros")  # fmt: skip
    values = {
        "n": n,
        "n_free": layout.n_free,
        "n_expanded": layout.n_expanded,
        "off_mean": layout.offsets.get("noise_mean", -1),
        "off_z": layout.offsets["z"],
        "mean_fixed": layout.fixed.get("noise_mean", 0.0),
        **_pointers(arrays, *_PRIOR_FIELDS, "f", "g"),
    }
    return _struct(values, _HET_LAYOUT), arrays


#: The C struct ``lat_t`` of exact_gp.c, field by field.
_LAT_LAYOUT = (
    ("n", "i"), ("n_free", "i"), ("n_expanded", "i"), ("off_mean", "i"), ("off_z", "i"),
    ("link", "i"), ("mean_fixed", "f"), ("prior_kind", "p"), ("prior_a", "p"),
    ("prior_b", "p"), ("prior_c", "p"), ("expand_src", "p"), ("expand_exp", "p"), ("y", "p"),
    ("m", "p"), ("c", "p"), ("g", "p"),
)  # fmt: skip

#: the link -> the C code's ``LINK_*``
LINKS = {"logit": 0, "log": 1}


@dataclasses.dataclass(frozen=True)
class NativeJointLatent:
    r"""What the C code needs of a latent GP sampled jointly with its hyperparameters: the
    kernel's name, the inputs ``X`` (n, D), the link (``"logit"``: ``y`` successes of ``m``
    trials; ``"log"``: Poisson counts ``y`` of exposure ``m``), the terms ``c`` of the log
    density without :math:`f`, the jitter, the hyperparameters ``ls``, ``eta`` and the mean
    ``mean`` (each the model's random variable or a number), the whitened ``z`` (``f_rotated_``)
    and the deterministic ``f``."""

    kernel: str
    X: np.ndarray
    link: str
    y: np.ndarray
    m: np.ndarray
    c: np.ndarray
    jitter: float
    hyper: dict[str, Any]
    z: Any
    f: Any

    symbols: ClassVar[tuple[str, str]] = ("lat_logp", "lat_expand")
    what: ClassVar[str] = (
        "the joint latent GP's log density in C (bayes_gp.inference.native_latent)"
    )
    swaps_y: ClassVar[bool] = False  # c depends on y

    @property
    def kernels(self) -> tuple[str, ...]:
        return (self.kernel,)

    def layout(self, model) -> _HetLayout:
        """The coordinates of ``model``'s unconstrained vector, or :class:`NotNative`."""
        return _layout(model, self.X, self.hyper, {"ls": ("g", "ls"), "eta": ("g", "eta")},
                       self.z, self.f)  # fmt: skip

    def struct(self, layout: _HetLayout) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """``lat_t`` and the arrays (the kernel's ``gp_t`` included) it points into."""
        n = self.X.shape[0]
        arrays = _arrays(self.X, layout, y=self.y, m=self.m, c=self.c, zeros=np.zeros(n))
        arrays["g"] = _kernel(arrays, layout, "g", self.kernel, "ls", "eta", self.jitter,
                              "zeros")  # fmt: skip
        values = {
            "n": n,
            "n_free": layout.n_free,
            "n_expanded": layout.n_expanded,
            "off_mean": layout.offsets.get("mean", -1),
            "off_z": layout.offsets["z"],
            "link": LINKS[self.link],
            "mean_fixed": layout.fixed.get("mean", 0.0),
            **_pointers(arrays, *_PRIOR_FIELDS, "y", "m", "c", "g"),
        }
        return _struct(values, _LAT_LAYOUT), arrays
