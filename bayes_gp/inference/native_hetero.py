r"""The heteroscedastic GP's log density and gradient in C for nutpie (no per-model compiling).

:class:`~bayes_gp.HeteroscedasticGPRegression` samples the hyperparameters of two GPs and the
whitened log noise sd :math:`g = \mu_g + L_g z` (Goldberg, Williams & Bishop 1998), with
:math:`f` integrated out:

.. math::
   y - m \sim N\!\left(0,\ K_f + \operatorname{diag}(e^{2g}) + \epsilon_f I\right),
   \qquad L_g L_g^\top = K_g + \epsilon_g I, \qquad z \sim N(0, I)

(R&W eq. 2.30). numba compiled its PyMC graph in 34-50 s on a new machine (``mcycle``, n =
133; ``benchmarks/README.md``, "The heteroscedastic GP's first fit"), longer than the sampling. ``het_logp``
in :file:`bayes_gp/solvers/c/exact_gp.c` computes it from the same C code as the exact GP
(:mod:`bayes_gp.inference.native_gp`, whose library, loading and nutpie plumbing it shares):
the gradient in :math:`g` from R&W eq. 5.9's diagonal, :math:`\bar g_i = (\alpha_i^2 -
[C^{-1}]_{ii})\, e^{2 g_i}`, and through :math:`L_g` by the Cholesky factor's reverse mode
(Murray 2016, arXiv:1602.07527) in :math:`O(n^3)`: :math:`\bar K_g = L_g^{-\top}
\operatorname{sym}(\Phi(v z^\top)) L_g^{-1}`, :math:`v = L_g^\top \bar g`.

What it covers (:class:`NativeHetero`, described by the model itself): both kernels among the
exact GP's (``expquad``, ``matern52``, ``matern32``, ``matern12`` / ``exponential``, isotropic or
ARD) times an amplitude, the mean of :math:`f` fixed, length-scales and amplitudes free on the
log transform with the exact GP's priors (or amplitudes fixed by a number), :math:`\mu_g` a
number or a Normal, and nothing else in the model (a variable the user added sends it to numba,
whose reason the posterior records).
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

__all__ = ["NativeHetero"]

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
        "the heteroscedastic GP's log density in C (bayes_gp.inference.native_hetero)"
    )

    @property
    def kernels(self) -> tuple[str, ...]:
        return (self.kernel, self.noise_kernel)

    def layout(self, model) -> _HetLayout:
        """The coordinates of ``model``'s unconstrained vector, or :class:`NotNative`."""
        return _layout(model, self)

    def struct(self, layout: _HetLayout) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """``het_t`` and the arrays (the two ``gp_t`` included) it points into."""
        return _data(self, layout)


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


def _layout(model, het: NativeHetero) -> _HetLayout:
    n, D = het.X.shape
    by_rv = {id(v): role for role, v in het.hyper.items() if any(v is rv for rv in model.free_RVs)}
    if not any(het.z is rv for rv in model.free_RVs):
        raise NotNative("the whitened latent g is not a free random variable")
    by_rv[id(het.z)] = "z"
    fixed = {}
    for role, value in het.hyper.items():
        if id(value) in by_rv:
            continue
        if role in ("ls", "noise_ls"):
            raise NotNative(f"{role} is not a free random variable")
        try:
            fixed[role] = float(np.asarray(_constant(value)).item())
        except (NotNative, ValueError) as err:
            raise NotNative(f"{role} is neither a free random variable nor a number") from err
    extra = [v.name for v in (*model.deterministics, *model.potentials) if v is not het.g]
    extra += [v.name for v in model.observed_RVs[1:]]
    if extra or not any(v is het.g for v in model.deterministics):
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
        if role in _POSITIVE:
            if transform != "LogTransform":
                raise NotNative(f"{rv.name} is not sampled on the log scale")
            which, param = _POSITIVE[role]
            if param == "ls":
                if size not in (1, D):
                    raise NotNative(f"{rv.name} has {size} entries, not 1 or {D}")
                n_ls[which] = size
            elif size != 1:
                raise NotNative(f"{rv.name} is not a scalar")
            point = np.log(point)
        else:  # noise_mean and z: Normal, untransformed
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
    # (exp of their coordinates) and g, which het_expand computes last
    src, use_exp = list(range(count)), [0] * count
    rest = [v for v in model.unobserved_value_vars if v.name not in names]
    if not rest or rest[-1].name != het.g.name:
        raise NotNative("the model's stored values do not end with g")
    for var in rest[:-1]:
        rv = next((r for r in model.free_RVs if r.name == var.name), None)
        if rv is None or by_rv[id(rv)] not in _POSITIVE:
            raise NotNative(f"{var.name} is not a value the C code stores")
        sl = slices[names.index(model.rvs_to_values[rv].name)]
        names.append(var.name)
        slices.append(slice(len(src), len(src) + sl.stop - sl.start))
        shapes.append(_shape(rv))
        src += range(sl.start, sl.stop)
        use_exp += [1] * (sl.stop - sl.start)
    names.append(het.g.name)
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


def _data(het: NativeHetero, layout: _HetLayout) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    X = np.asarray(het.X, dtype=np.float64)
    n, D = X.shape
    arrays = {
        "XT": _frozen(X.T),
        "y": _frozen(het.y),
        "zeros": _frozen(np.zeros(n)),
        "prior_kind": _frozen(layout.prior[0], np.int64),
        "prior_a": _frozen(layout.prior[1]),
        "prior_b": _frozen(layout.prior[2]),
        "prior_c": _frozen(layout.prior[3]),
        "expand_src": _frozen(layout.expand_src, np.int64),
        "expand_exp": _frozen(layout.expand_exp, np.int64),
    }
    lapack = {name: _address("lapack", "d" + name) for name in ("potrf", "trtri", "lauum")}
    pointers = {name: arrays[name].ctypes.data
                for name in ("prior_kind", "prior_a", "prior_b", "prior_c", "expand_src",
                             "expand_exp")}  # fmt: skip
    for which, kernel, ls, eta, jitter, y in (
        ("f", het.kernel, "ls", "eta", het.jitter_f, "y"),
        ("g", het.noise_kernel, "noise_ls", "noise_eta", het.jitter_g, "zeros"),
    ):
        arrays[which] = _struct({
            "n": n, "d": D, "kernel": KERNEL_IDS[kernel], "n_ls": layout.n_ls[which],
            "n_free": layout.n_free, "n_expanded": layout.n_expanded,
            "off_ls": layout.offsets[ls], "off_eta": layout.offsets.get(eta, -1),
            "off_sigma": -1, "eta_fixed": layout.fixed.get(eta, 0.0), "sigma_fixed": 0.0,
            "jitter": float(jitter), "XT": arrays["XT"].ctypes.data,
            "y": arrays[y].ctypes.data, **pointers, **lapack, "trmm": _address("blas", "dtrmm"),
        })  # fmt: skip
    values = {
        "n": n,
        "n_free": layout.n_free,
        "n_expanded": layout.n_expanded,
        "off_mean": layout.offsets.get("noise_mean", -1),
        "off_z": layout.offsets["z"],
        "mean_fixed": layout.fixed.get("noise_mean", 0.0),
        **pointers,
        "f": arrays["f"].ctypes.data,
        "g": arrays["g"].ctypes.data,
    }
    return _struct(values, _HET_LAYOUT), arrays

