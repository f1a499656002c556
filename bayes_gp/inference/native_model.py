r"""How a model is described to the C code of :file:`bayes_gp/solvers/c/exact_gp.c`: the
kernel's terms and factors, the coordinates of the unconstrained vector nutpie samples, and
the C structs that hold both.

A **kernel** (:class:`NativeKernel`) is a sum of products of catalogue kernels, each term with
one amplitude (R&W §4.2.4, PRML eqs. 6.17-6.22, :func:`bayes_gp.kernels.catalogue.kernel_spec`),

.. math::
   K(x, x') = \sum_t \eta_t^2 \prod_{f \in t} k_f(x, x'),

each factor ``expquad``, ``matern52``, ``matern32``, ``matern12`` / ``exponential`` (R&W eqs.
4.9, 4.16-4.17), ``ratquad`` (R&W eq. 4.19) or ``periodic`` (R&W eq. 4.31) with its
length-scale (isotropic or ARD) and, for the last two, its :math:`\alpha` or period (a scalar).
Each parameter is a free random variable of the model or a number.

The **coordinates** (:func:`coordinates`): one per entry of each free random variable, in the
model's order, each either on PyMC's log transform (or a log transform chained with a constant
scale, as :mod:`models.mauna_loa` gives its period: the log of the value is ``scale * u``), or
untransformed with a Normal prior (the mean and the whitened values of a latent GP); the
priors the C code knows (:data:`PRIOR_IDS`), PyMC's support points as the initial point, and
the values nutpie stores after them.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
from typing import Any

import numpy as np

__all__ = [
    "KERNEL_IDS",
    "PRIOR_IDS",
    "Factor",
    "Layout",
    "NativeKernel",
    "NotNative",
    "coordinates",
    "coords_struct",
    "gp_struct",
    "kernel_of",
]

#: kernel name -> the C code's kernel id (``K_*`` in exact_gp.c)
KERNEL_IDS = {"expquad": 0, "matern52": 1, "matern32": 2, "matern12": 3, "exponential": 3,
              "ratquad": 4, "periodic": 5}  # fmt: skip
#: the factors with a parameter besides the length-scale, and its name in the catalogue
EXTRA = {"ratquad": "alpha", "periodic": "period"}
#: PyTensor random variable name -> the C code's prior id (``P_*``)
PRIOR_IDS = {
    "lognormal": 0,
    "halfnormal": 1,
    "gamma": 2,
    "invgamma": 3,
    "exponential": 4,
    "halfcauchy": 5,
    "normal": 6,  # of a coordinate without a transform (latent means and whitened values)
}


class NotNative(Exception):
    """The model is not one the C code computes (the message says why)."""


# ----------------------------------------------------------------------------- the kernel
@dataclasses.dataclass(frozen=True)
class Factor:
    """One catalogue kernel of a product: its name, length-scale and, for ``ratquad`` and
    ``periodic``, its ``alpha`` or period (each a random variable or a number)."""

    kernel: str
    ls: Any
    extra: Any = None


@dataclasses.dataclass(frozen=True)
class NativeKernel:
    r""":math:`\sum_t \eta_t^2 \prod_f k_f`: ``terms`` holds each term's amplitude and
    factors."""

    terms: tuple[tuple[Any, tuple[Factor, ...]], ...]

    @classmethod
    def single(cls, kernel: str, ls, eta) -> NativeKernel:
        return cls(((eta, (Factor(kernel, ls),)),))

    def parameters(self) -> list[tuple[str, Any]]:
        """``(role, value)`` of every parameter: ``"eta"``, ``"ls"``, ``"alpha"``,
        ``"period"``."""
        out = []
        for eta, factors in self.terms:
            out.append(("eta", eta))
            for f in factors:
                out.append(("ls", f.ls))
                if f.kernel in EXTRA:
                    out.append((EXTRA[f.kernel], f.extra))
        return out


def kernel_of(spec, hyper: dict[str, Any]) -> NativeKernel | None:
    """The :class:`NativeKernel` of a catalogue kernel or sum of products of catalogue kernels
    (:func:`bayes_gp.kernels.catalogue.kernel_spec`) with its hyperparameters ``hyper`` (by
    the spec's parameter names), or ``None`` where it is neither or has a factor the C code does
    not have."""
    from bayes_gp.kernels.catalogue import KERNELS

    rows = spec.terms or ((((spec.name, ""),),) if KERNELS.get(spec.name) is spec else None)
    if rows is None or any(k not in KERNEL_IDS for row in rows for k, _ in row):
        return None

    def value(label: str, param: str):
        return hyper.get(f"{label}_{param}" if label else param)

    terms = []
    for row in rows:
        eta = value(row[0][1], "eta")
        factors = tuple(Factor(k, value(lab, "ls"), value(lab, EXTRA[k]) if k in EXTRA else None)
                        for k, lab in row)  # fmt: skip
        terms.append((eta, factors))
    return NativeKernel(tuple(terms))


def mapped(value, fn):
    """``value`` with ``fn`` applied to every leaf of its dataclasses, tuples and dicts (the
    variables of a description, :func:`bayes_gp.inference.native_gp.register_like`)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: mapped(getattr(value, f.name), fn)
                                             for f in dataclasses.fields(value)})  # fmt: skip
    if isinstance(value, tuple):
        return tuple(mapped(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: mapped(v, fn) for k, v in value.items()}
    return fn(value)


# ----------------------------------------------------------------------------- the model
def _constant(var) -> np.ndarray:
    """The value of a graph of constants (no random variable, shared variable or input)."""
    import pytensor.tensor as pt
    from pymc.pytensorf import constant_fold
    from pytensor.compile.sharedvalue import SharedVariable
    from pytensor.graph.basic import Variable
    from pytensor.graph.replace import graph_replace
    from pytensor.graph.traversal import ancestors

    if not isinstance(var, Variable):  # a number
        return np.asarray(var, dtype=np.float64)
    # the model's dimension lengths are shared variables: their values now
    lengths = {
        v: pt.constant(v.get_value())
        for v in ancestors([var])
        if isinstance(v, SharedVariable) and isinstance(v.type, pt.TensorType)
    }
    try:
        if lengths:
            var = graph_replace(var, lengths, strict=False)
        (value,) = constant_fold([var], raise_not_constant=True)
    except Exception as err:  # NotConstantValueError or a graph it cannot fold
        raise NotNative("a prior parameter is not a constant") from err
    return np.asarray(value, dtype=np.float64)


def _prior(rv, size: int) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(kind, a, b, c, support point)`` per coordinate of the random variable ``rv``: the C
    code's prior id, parameters and constant term (exact_gp.c's ``prior_logp``), and PyMC's
    support point (the initial value before jitter)."""
    from scipy.special import gammaln

    op = rv.owner.op
    name = getattr(op, "name", None)
    if name not in PRIOR_IDS:
        raise NotNative(f"{rv.name}'s prior ({name or type(op).__name__}) is not one of "
                        f"{', '.join(sorted(PRIOR_IDS))}")  # fmt: skip
    params = [np.broadcast_to(_constant(p), (size,)) for p in op.dist_params(rv.owner)]
    # every parameter but a location (LogNormal's mu, a half distribution's loc) is a scale or
    # shape: positive. Invalid ones go to PyMC's model, whose checks name them.
    located = name in ("lognormal", "halfnormal", "normal") or (
        name == "halfcauchy" and len(params) == 2
    )
    scales = params[1:] if located else params
    if not all(np.all(np.isfinite(p)) for p in params) or not all(np.all(p > 0) for p in scales):
        raise NotNative(f"{rv.name}'s prior has parameters that are not finite and positive")
    if name == "lognormal":
        mu, sd = params
        return 0, mu, sd, -np.log(sd) - 0.5 * np.log(2 * np.pi), np.exp(mu + 0.5 * sd**2)
    if name == "halfnormal":
        loc, sd = params
        if np.any(loc != 0):
            raise NotNative(f"{rv.name}'s HalfNormal prior has a location other than 0")
        return 1, sd, sd, 0.5 * np.log(2 / np.pi) - np.log(sd), loc + sd
    if name == "gamma":
        alpha, scale = params
        beta = 1.0 / scale
        return 2, alpha, beta, alpha * np.log(beta) - gammaln(alpha), alpha * scale
    if name == "invgamma":
        alpha, beta = params
        point = np.where(alpha > 1, beta / (alpha - 1.0), beta / (alpha + 1.0))
        return 3, alpha, beta, alpha * np.log(beta) - gammaln(alpha), point
    if name == "exponential":
        (scale,) = params
        return 4, scale, scale, -np.log(scale), scale
    if name == "normal":  # on the value itself: its support point is not on the log scale
        mu, sd = params
        return 6, mu, sd, -np.log(sd) - 0.5 * np.log(2 * np.pi), mu
    # halfcauchy
    loc, beta = params if len(params) == 2 else (np.zeros(size), params[0])
    if np.any(loc != 0):
        raise NotNative(f"{rv.name}'s HalfCauchy prior has a location other than 0")
    return 5, beta, beta, np.log(2 / np.pi) - np.log(beta), beta


def _shape(rv) -> tuple[int, ...]:
    """The static shape of ``rv``, folded from its graph where the type does not say it."""
    if None not in rv.type.shape:
        return tuple(int(s) for s in rv.type.shape)
    return tuple(int(s) for s in _constant(rv.shape))


def _log_scale(model, rv) -> float:
    """``s`` where ``rv`` is sampled on the coordinate ``u = log(value) / s``: 1 for PyMC's log
    transform, ``1 / scale`` for a log transform chained with a constant scale; else
    :class:`NotNative`."""
    transform = model.rvs_to_transforms.get(rv)
    kind = type(transform).__name__
    if kind == "LogTransform":
        return 1.0
    if kind == "ChainedTransform":
        steps = [type(t).__name__ for t in transform.transform_list]
        if steps == ["LogTransform", "ScaleTransform"]:
            scale = transform.transform_list[1].transform_args_fn(*rv.owner.inputs)
            value = np.asarray(_constant(scale))
            if value.size == 1 and np.isfinite(value) and value.item() > 0:
                return 1.0 / float(value.item())
    raise NotNative(f"{rv.name} is not sampled on the log scale")


@dataclasses.dataclass(frozen=True)
class Layout:
    """The coordinates of the unconstrained vector and what the C code needs per coordinate:
    ``where[id(rv)] = (first coordinate, size)``, the priors (kind, a, b, c), the log scale
    ``s`` (:func:`_log_scale`; 0 for an untransformed coordinate), PyMC's support points on the
    coordinates' scale, nutpie's stored values (names, slices, shapes) and which coordinate
    gives each of the first ``n_head`` (``expand_src``; ``expand_exp`` 1 for its variable's
    value, 0 for the coordinate)."""

    n_free: int
    where: dict[int, tuple[int, int]]
    prior: tuple[np.ndarray, ...]
    scale: np.ndarray
    start: np.ndarray
    shape_info: tuple[list[str], list[slice], list[tuple[int, ...]]]
    expand_src: np.ndarray
    expand_exp: np.ndarray
    n_expanded: int

    def offset(self, var) -> int | None:
        """The first coordinate of the free random variable ``var``, or ``None``."""
        found = self.where.get(id(var))
        return None if found is None else found[0]

    def of_values(self, values: list[np.ndarray]) -> np.ndarray:
        """The coordinates of points given by the values of the model's free random variables
        (``values[k]`` those of the ``k``-th, stacked along a leading axis of points): ``log(value)
        / s`` on a log transform, the value itself where untransformed; ``(points, n_free)``."""
        if not values:
            return np.zeros((0, self.n_free))
        points = np.asarray(values[0]).shape[0]
        parts = [np.asarray(v, dtype=np.float64).reshape(points, -1) for v in values]
        x = np.concatenate(parts, axis=1)
        if x.shape[1] != self.n_free:
            raise ValueError(f"the values have {x.shape[1]} coordinates, the model {self.n_free}")
        logged = self.scale != 0.0
        with np.errstate(divide="ignore", invalid="ignore"):
            x[:, logged] = np.log(x[:, logged]) / self.scale[logged]
        return np.ascontiguousarray(x)


def _is_free(model, var) -> bool:
    return any(var is rv for rv in model.free_RVs)


def coordinates(model, positive: list, normal: dict[str, tuple[Any, int]], *, latent=None,
                potential=None, what: str = "the GP's") -> Layout:  # fmt: skip
    """The :class:`Layout` of ``model``, whose free random variables must be the ``positive``
    ones (hyperparameters on a log transform) and those of ``normal`` (role -> (variable,
    size): untransformed, with a Normal prior), with nothing else in the model but the
    deterministic ``latent``, which nutpie stores last (n values), and the ``potential`` that
    the C code computes; else :class:`NotNative`."""
    free = {id(v) for v in positive if _is_free(model, v)}
    roles = {id(v): role for role, (v, _) in normal.items()}
    extra = [v.name for v in (*model.deterministics, *model.potentials)
             if v is not latent and v is not potential]  # fmt: skip
    if potential is not None and not any(v is potential for v in model.potentials):
        raise NotNative(f"the model has no potential {getattr(potential, 'name', potential)}")
    extra += [v.name for v in model.observed_RVs[1:]]
    if extra or (latent is not None and not any(v is latent for v in model.deterministics)):
        raise NotNative(f"the model has variables besides {what}: {', '.join(extra)}")
    names = [rv.name for rv in model.free_RVs if id(rv) not in free and id(rv) not in roles]
    if names:
        raise NotNative(f"the model has free variables besides {what}: {', '.join(names)}")
    kinds, a, b, c, scale, start = [], [], [], [], [], []
    where, names, slices, shapes = {}, [], [], []
    count = 0
    for rv in model.free_RVs:
        if model.rvs_to_initial_values.get(rv) is not None:
            raise NotNative(f"{rv.name} has an initial value of its own")
        shape = _shape(rv)
        size = int(np.prod(shape)) if shape else 1
        kind, pa, pb, pc, point = _prior(rv, size)
        if id(rv) in roles:
            transform = model.rvs_to_transforms.get(rv)
            if kind != PRIOR_IDS["normal"] or transform is not None:
                raise NotNative(f"{rv.name}'s prior is not an untransformed Normal")
            if size != normal[roles[id(rv)]][1]:
                raise NotNative(f"{rv.name} has {size} entries")
            s = 0.0
        else:
            s = _log_scale(model, rv)
            if kind == PRIOR_IDS["normal"]:  # (a log-transformed Normal is not a PyMC prior)
                raise NotNative(f"{rv.name} has a Normal prior")
            point = np.log(point) / s
        where[id(rv)] = (count, size)
        kinds += [kind] * size
        a += list(pa)
        b += list(pb)
        c += list(pc)
        scale += [s] * size
        start += list(point)
        names.append(model.rvs_to_values[rv].name)
        slices.append(slice(count, count + size))
        shapes.append(shape)
        count += size
    # nutpie's stored values (nutpie.compile_pymc._make_functions): the coordinates, then the
    # model's unobserved values it does not already hold (the positive hyperparameters, the
    # value of their coordinates) in the model's order, then the latent values, which the C
    # code computes last
    src, use_exp = list(range(count)), [0] * count
    rest = [v for v in model.unobserved_value_vars if v.name not in names]
    n_latent = 0
    if latent is not None:
        if not rest or rest[-1].name != latent.name:
            raise NotNative(f"the model's stored values do not end with {latent.name}")
        rest = rest[:-1]
    for var in rest:
        rv = next((r for r in model.free_RVs if r.name == var.name), None)
        if rv is None or id(rv) not in free:
            raise NotNative(f"{var.name} is not a value the C code stores")
        first, size = where[id(rv)]
        names.append(var.name)
        slices.append(slice(len(src), len(src) + size))
        shapes.append(_shape(rv))
        src += range(first, first + size)
        use_exp += [1] * size
    if latent is not None:
        n_latent = _shape(latent)[0]
        names.append(latent.name)
        slices.append(slice(len(src), len(src) + n_latent))
        shapes.append((n_latent,))
    return Layout(
        n_free=count,
        where=where,
        prior=(np.array(kinds, np.int64), np.array(a), np.array(b), np.array(c)),
        scale=np.array(scale, dtype=np.float64),
        start=np.array(start, dtype=np.float64),
        shape_info=(names, slices, shapes),
        expand_src=np.array(src, np.int64),
        expand_exp=np.array(use_exp, np.int64),
        n_expanded=len(src) + n_latent,
    )


def free_parameters(model, kernel: NativeKernel | None, *others) -> list:
    """The free random variables among ``kernel``'s parameters and ``others``."""
    values = [v for _, v in kernel.parameters()] if kernel is not None else []
    return [v for v in [*values, *others] if _is_free(model, v)]


# ----------------------------------------------------------------------------- the C structs
def _struct(values: dict[str, Any], fields: tuple) -> np.ndarray:
    """The C struct of ``fields`` (``(name, kind)`` in the struct's order, every field 8 bytes:
    ``"i"`` an integer, ``"f"`` a float, ``"p"`` an array's address or a function's) as a flat
    array of 64-bit words."""
    words = np.zeros(len(fields), dtype=np.uint64)
    for k, (name, kind) in enumerate(fields):
        value = values[name]
        if kind == "f":
            words[k : k + 1] = np.array([value], dtype=np.float64).view(np.uint64)
        elif kind == "i":
            words[k] = np.array([value], dtype=np.int64).view(np.uint64)[0]
        else:
            words[k] = np.uint64(value)
    return words


def _frozen(a, dtype=np.float64) -> np.ndarray:
    out = np.array(a, dtype=dtype, order="C", copy=True)
    out.flags.writeable = False
    return out


@functools.cache
def _address(kind: str, name: str) -> int:
    """The address of SciPy's ``cython_blas`` or ``cython_lapack`` (``kind`` ``"blas"`` or
    ``"lapack"``) function ``name``."""
    from scipy.linalg import cython_blas, cython_lapack

    capsule = (cython_blas if kind == "blas" else cython_lapack).__pyx_capi__[name]
    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype = ctypes.c_char_p
    api.PyCapsule_GetName.argtypes = [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return api.PyCapsule_GetPointer(capsule, api.PyCapsule_GetName(capsule))


#: exact_gp.c's ``coords_t``, field by field
_COORDS = (
    ("n_free", "i"), ("n_head", "i"), ("prior_kind", "p"), ("prior_a", "p"), ("prior_b", "p"),
    ("prior_c", "p"), ("scale", "p"), ("expand_src", "p"), ("expand_exp", "p"),
)  # fmt: skip

#: exact_gp.c's ``gp_t``, field by field
_GP = (
    ("n", "i"), ("d", "i"), ("n_slot", "i"), ("n_term", "i"), ("n_fac", "i"),
    ("slot_sigma", "i"), ("jitter", "f"), ("XT", "p"), ("y", "p"), ("c", "p"),
    ("slot_src", "p"), ("slot_fixed", "p"), ("term_eta", "p"), ("term_first", "p"),
    ("fac_kind", "p"), ("fac_ls", "p"), ("fac_nls", "p"), ("fac_extra", "p"),
    ("potrf", "p"), ("lauum", "p"), ("trtri", "p"), ("trmm", "p"), ("table", "p"),
    ("grid", "p"),
)  # fmt: skip


def _pointers(arrays: dict[str, np.ndarray], *names: str) -> dict[str, int]:
    return {name: arrays[name].ctypes.data for name in names}


def coords_struct(layout: Layout, arrays: dict[str, np.ndarray]) -> np.ndarray:
    """``coords_t`` of ``layout``; the arrays it points into are added to ``arrays`` (to be
    kept alive as long as it is used), and the struct itself as ``arrays["coords"]``."""
    arrays |= {
        "prior_kind": _frozen(layout.prior[0], np.int64),
        "prior_a": _frozen(layout.prior[1]),
        "prior_b": _frozen(layout.prior[2]),
        "prior_c": _frozen(layout.prior[3]),
        "scale": _frozen(layout.scale),
        "expand_src": _frozen(layout.expand_src, np.int64),
        "expand_exp": _frozen(layout.expand_exp, np.int64),
    }
    values = {"n_free": layout.n_free, "n_head": len(layout.expand_src),
              **_pointers(arrays, *(name for name, _ in _COORDS[2:]))}  # fmt: skip
    arrays["coords"] = _frozen(_struct(values, _COORDS), np.uint64)
    return arrays["coords"]


class _Slots:
    """The log-parameters of a gp_t: per slot its coordinate (-1: fixed) and fixed log value."""

    def __init__(self, layout: Layout, D: int):
        self.layout, self.D = layout, D
        self.src: list[int] = []
        self.fixed: list[float] = []

    def add(self, role: str, value, *, per_input: bool = False, zero: bool = False) -> int:
        """The first slot of ``value`` (a free random variable or a number; ``per_input``: 1
        or D entries, else 1; ``zero``: a fixed 0 allowed), or :class:`NotNative`."""
        first = len(self.src)
        sizes = (1, self.D) if per_input else (1,)
        if value is None:
            raise NotNative(f"{role} is not given")
        found = self.layout.where.get(id(value)) if value is not None else None
        if found is not None:
            offset, size = found
            if size not in sizes:
                raise NotNative(f"{value.name} has {size} entries, not "
                                f"{' or '.join(map(str, sizes))}")  # fmt: skip
            self.src += range(offset, offset + size)
            self.fixed += [0.0] * size
            return first
        try:
            v = np.asarray(_constant(value), dtype=np.float64).ravel()
        except (NotNative, ValueError, TypeError) as err:
            raise NotNative(f"{role} is neither a free random variable nor a number") from err
        low_ok = np.all(v >= 0) if zero else np.all(v > 0)
        if v.size not in sizes or not np.all(np.isfinite(v)) or not low_ok:
            raise NotNative(f"{role} is fixed at {v.tolist()}, not a positive number"
                            + (" per input" if per_input else ""))  # fmt: skip
        self.src += [-1] * v.size
        with np.errstate(divide="ignore"):
            self.fixed += list(np.log(v))
        return first


def gp_struct(kernel: NativeKernel, X: np.ndarray, y: np.ndarray, jitter: float, sigma,
              layout: Layout, arrays: dict[str, np.ndarray], prefix: str,
              lag_table: bool = True) -> np.ndarray:  # fmt: skip
    """``gp_t`` of the exact GP ``y ~ N(0, K + (sigma^2 + jitter) I)`` (``sigma`` ``None``: no
    noise of its own) at the inputs ``X`` (n, D), with ``arrays["coords"]``
    (:func:`coords_struct`) for its coordinates; its arrays are added to ``arrays`` under
    ``prefix``, and the struct itself as ``arrays[prefix + "gp"]``; with inputs on a grid
    (:func:`bayes_gp.kernels.lags.grid_lags`) its ``table``, the ``gp_t`` of the lags, where
    the C code evaluates the kernel. :class:`NotNative` where a parameter is neither a free variable nor a valid
    number."""
    X = np.asarray(X, dtype=np.float64)
    D = X.shape[1]
    slots = _Slots(layout, D)
    term_eta, term_first, kind, ls, nls, extra = [], [], [], [], [], []
    for eta, factors in kernel.terms:
        term_eta.append(slots.add("eta", eta, zero=True))
        term_first.append(len(kind))
        for f in factors:
            kind.append(KERNEL_IDS[f.kernel])
            first = slots.add(f"{f.kernel}'s length-scale", f.ls, per_input=True)
            ls.append(first)
            nls.append(len(slots.src) - first)
            if f.kernel in EXTRA:
                extra.append(slots.add(f"{f.kernel}'s {EXTRA[f.kernel]}", f.extra))
            else:
                extra.append(-1)
    term_first.append(len(kind))
    slot_sigma = -1 if sigma is None else slots.add("sigma", sigma, zero=True)
    own = {
        "XT": _frozen(X.T),
        "y": _frozen(y),
        "slot_src": _frozen(slots.src, np.int64),
        "slot_fixed": _frozen(slots.fixed),
        "term_eta": _frozen(term_eta, np.int64),
        "term_first": _frozen(term_first, np.int64),
        "fac_kind": _frozen(kind, np.int64),
        "fac_ls": _frozen(ls, np.int64),
        "fac_nls": _frozen(nls, np.int64),
        "fac_extra": _frozen(extra, np.int64),
    }
    arrays |= {prefix + name: a for name, a in own.items()}
    table, grid = 0, 0
    from bayes_gp.kernels.lags import grid_lags

    # (no upper bound on n here: the gather costs far less than the kernel in C)
    lags = grid_lags(X, max_n=None) if lag_table else None
    if lags is not None:  # the kernel at the lags s l, l = 0..J: the gp_t of those points
        s, k, n_lags = lags
        at = (s * np.arange(n_lags, dtype=np.float64))[:, None]
        table = gp_struct(kernel, at, np.zeros(n_lags), jitter, sigma, layout, arrays,
                          prefix + "lags_", lag_table=False).ctypes.data  # fmt: skip
        arrays[prefix + "grid"] = _frozen(k, np.int64)
        grid = arrays[prefix + "grid"].ctypes.data
    values = {
        "n": X.shape[0], "d": D, "n_slot": len(slots.src), "n_term": len(term_eta),
        "n_fac": len(kind), "slot_sigma": slot_sigma, "jitter": float(jitter),
        "c": arrays["coords"].ctypes.data, **_pointers(own, *own),
        **{name: _address("lapack", "d" + name) for name in ("potrf", "trtri", "lauum")},
        "trmm": _address("blas", "dtrmm"), "table": table, "grid": grid,
    }  # fmt: skip
    arrays[prefix + "gp"] = _frozen(_struct(values, _GP), np.uint64)
    return arrays[prefix + "gp"]
