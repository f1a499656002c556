r"""The exact GP's log density and gradient in C for nutpie: a first fit without numba compiling.

nutpie calls a model through two C function pointers (the log density with its gradient, and
the "expand" function that computes the stored variables). For a PyMC model numba compiles
both from PyTensor's graph, 12-19 s on a new machine for a one-kernel GP (issue 41, the cold
rows of ``benchmarks/README.md``'s ``first_fit`` section: numba's typing and LLVM for ~165
functions, under one lock). For the model :class:`~bayes_gp.GPRegression` declares most often
there is no need to compile anything per model: :file:`bayes_gp/solvers/c/exact_gp.c` computes

.. math::
   \log p(y \mid \theta) = -\tfrac12 y^\top C^{-1} y - \tfrac12 \log|C| - \tfrac n2 \log 2\pi,
   \qquad C = \eta^2 k(r^2) + (\sigma^2 + \epsilon) I

(R&W eq. 2.30, PRML eq. 6.69) and its gradient
:math:`\tfrac12 \operatorname{tr}((\alpha\alpha^\top - C^{-1})\,\partial C/\partial\theta)`
(R&W eq. 5.9) in the log-hyperparameters, plus their priors and the log transform's Jacobian,
for any model it describes, from a description in memory (:class:`NativeGP`). A C compiler
builds it once per machine into PyTensor's compile directory, in a child process that starts
as :meth:`~bayes_gp.GPRegression.sample` begins (:func:`start_compiling`, 0.4-0.7 s), and
every later process loads it in milliseconds. LAPACK is SciPy's, called through the addresses
of ``scipy.linalg.cython_lapack`` (and ``cython_blas``); the chains run it without the GIL,
in parallel. The same library computes the leave-one-out terms over the draws that
:meth:`~bayes_gp.GPRegression.sample` adds (:func:`loo_draws`, R&W eqs. 5.10-5.12), so a fit on
this path compiles nothing at all. nutpie starts from PyMC's initial points (the jittered
support points, drawn from the same seeds as for the numba model), so one seed takes the same
steps on either path while their log densities agree to rounding.

What it covers (:func:`describe`): the dense exact likelihood of a stationary kernel
``expquad``, ``matern52``, ``matern32``, ``matern12`` / ``exponential`` (isotropic or ARD) times
:math:`\eta^2`, homoscedastic Gaussian noise, a fixed mean (``mean=None`` or ``"zero"``), and
hyperparameters that are fixed numbers or free variables on PyMC's log transform with a
LogNormal, HalfNormal, Gamma, InverseGamma, Exponential or HalfCauchy prior of constant
parameters. Any other model (another kernel, a learned mean, other priors, approximations,
derivative observations, known noise, deterministics or potentials the user added to the model)
goes to numba as before, and so does every model while the nutpie backend is set to JAX;
:func:`~bayes_gp.inference.compiled.sample_nutpie` records which and why in the posterior's
attributes. The C log density equals the model's to rounding (``tests/inference/
test_native_gp.py`` compares it and its gradient with a SciPy transcription and with PyMC's).

The same library holds the log densities of the whitened latent GPs (:mod:`bayes_gp.inference.
native_latent`: the heteroscedastic GP, and the joint latent GP under a Bernoulli, binomial or
Poisson likelihood): a model's description (:func:`register`) says which it is.

``BAYES_GP_NATIVE=0`` (or :func:`set_enabled`) turns the path off.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

__all__ = [
    "NativeGP",
    "compile_native",
    "compile_native_data",
    "covers",
    "describe",
    "enabled",
    "failure",
    "library",
    "loo_draws",
    "native",
    "plan",
    "register",
    "register_like",
    "set_enabled",
    "start_compiling",
]

#: The C source (module docstring).
SOURCE = Path(__file__).resolve().parents[1] / "solvers" / "c" / "exact_gp.c"
#: The compiler's options: optimised for this machine's processor (the library is cached per
#: machine, keyed by the processor's flags), errno not set by the math functions (so that
#: ``sqrt`` vectorises); no fast-math (the non-finite checks must stay).
CFLAGS = ("-O3", "-march=native", "-fno-math-errno", "-fPIC", "-shared", "-pthread")

#: kernel name -> the C code's kernel id (``K_*`` in exact_gp.c)
KERNEL_IDS = {"expquad": 0, "matern52": 1, "matern32": 2, "matern12": 3, "exponential": 3}
#: PyTensor random variable name -> the C code's prior id (``P_*``)
PRIOR_IDS = {
    "lognormal": 0,
    "halfnormal": 1,
    "gamma": 2,
    "invgamma": 3,
    "exponential": 4,
    "halfcauchy": 5,
    "normal": 6,  # of a coordinate without a transform (native_latent's means and z)
}

_ENABLED = os.environ.get("BAYES_GP_NATIVE", "1") not in ("0", "false", "no")
_LOCK = threading.Lock()
#: the library's path -> the compiler's process and the file it writes
_CHILD: dict[str, tuple[subprocess.Popen, Path]] = {}
_LIBRARY: dict[str, Any] = {}
_FAILED: dict[str, str] = {}
_DESCRIBERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LAYOUTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def set_enabled(on: bool) -> None:
    """Turn the C path on or off for this process (default: on unless ``BAYES_GP_NATIVE=0``)."""
    global _ENABLED
    _ENABLED = bool(on)


def enabled() -> bool:
    """Whether the C path is on (:func:`set_enabled`)."""
    return _ENABLED


@contextlib.contextmanager
def native(on: bool):
    """The C path on or off inside a ``with`` block."""
    before = _ENABLED
    set_enabled(on)
    try:
        yield
    finally:
        set_enabled(before)


@dataclasses.dataclass(frozen=True)
class NativeGP:
    r"""What the C code needs of an exact GP regression model: the kernel's name, the inputs
    ``X`` (n, D), ``y`` minus the fixed mean, the jitter :math:`\epsilon`, and the length-scale,
    amplitude and noise each as the model's random variable or a fixed number."""

    kernel: str
    X: np.ndarray
    y: np.ndarray
    jitter: float
    ls: Any
    eta: Any
    sigma: Any

    #: the C functions of the log density with its gradient, and of nutpie's stored values
    symbols: ClassVar[tuple[str, str]] = ("gp_logp", "gp_expand")
    what: ClassVar[str] = "the exact GP's log density in C (bayes_gp.inference.native_gp)"
    #: whether ``y`` is the observed data less a fixed mean (:func:`compile_native_data`)
    swaps_y: ClassVar[bool] = True

    @property
    def kernels(self) -> tuple[str, ...]:
        return (self.kernel,)

    def layout(self, model) -> _Layout:
        """The coordinates of ``model``'s unconstrained vector, or :class:`NotNative`."""
        return _layout(model, self)

    def struct(self, layout: _Layout) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The C struct and the arrays it points into (:func:`_data`)."""
        return _data(self, layout)


def register(model, describer: Callable[[], NativeGP | None]) -> None:
    """Say how ``model`` is described for the C path: ``describer()`` is called when the model
    is sampled (after the jitter pre-flight), and returns ``None`` where the model is not one
    the C code computes."""
    _DESCRIBERS[model] = describer


def register_like(model, template) -> None:
    """Describe ``model``, a copy of ``template`` (``pm.observe`` of it, say: the same
    variables by name, perhaps in another order), as ``template`` is described, with its own
    variables in the description."""
    from pytensor.graph.basic import Variable

    def own(value):
        name = getattr(value, "name", None)
        if isinstance(value, Variable) and name is not None and name in model.named_vars:
            return model[name]
        return value

    def describer():
        gp = describe(template)
        if gp is None:
            return None
        changes = {}
        for field in dataclasses.fields(gp):
            value = getattr(gp, field.name)
            changes[field.name] = ({k: own(v) for k, v in value.items()}
                                   if isinstance(value, dict) else own(value))  # fmt: skip
        return dataclasses.replace(gp, **changes)

    register(model, describer)


def describe(model) -> NativeGP | None:
    """The registered description of ``model`` (:func:`register`), or ``None``."""
    describer = _DESCRIBERS.get(model)
    return None if describer is None else describer()


# ----------------------------------------------------------------------------- the library
def _compiler() -> str | None:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith(("flags", "Features")):
                    return line
    except OSError:
        pass
    import platform

    return platform.processor() + platform.machine()


def _library_path() -> Path:
    """The shared library's path in PyTensor's compile directory, keyed by the source, the
    options, the compiler and the processor."""
    from pytensor import config

    key = hashlib.sha256()
    key.update(SOURCE.read_bytes())
    key.update(repr((CFLAGS, _compiler(), _cpu_flags(), sys.platform)).encode())
    return Path(config.compiledir) / "bayes_gp_native" / f"exact_gp-{key.hexdigest()[:20]}.so"


def start_compiling() -> None:
    """Start the C compiler in a child process where the library is neither loaded nor on the
    disk (nothing when the C path is off or there is no compiler); :func:`library` waits."""
    if not _ENABLED:
        return
    with _LOCK:
        if "lib" in _LIBRARY or _FAILED:
            return
        path = _library_path()
        if path.exists() or str(path) in _CHILD:
            return
        cc = _compiler()
        if cc is None:
            _FAILED["lib"] = "no C compiler (cc, gcc or clang) on the PATH"
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.stem}.{os.getpid()}.{threading.get_ident()}.tmp.so")
        try:
            child = subprocess.Popen(
                [cc, *CFLAGS, "-o", str(tmp), str(SOURCE), "-lm"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            _CHILD[str(path)] = (child, tmp)
        except OSError as err:
            _FAILED["lib"] = f"the C compiler could not start ({err})"


def _finish_child(path: Path) -> None:
    if str(path) not in _CHILD:
        return
    child, tmp = _CHILD.pop(str(path))
    _, err = child.communicate()
    if child.returncode != 0:
        _FAILED["lib"] = "the C compiler failed: " + err.decode(errors="replace").strip()[-500:]
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return
    os.replace(tmp, path)  # atomic: a concurrent process sees the whole library or none


def library():
    """The loaded C library (``ctypes.CDLL``), compiling it first if needed, or ``None`` (the
    reason in :func:`failure`)."""
    if "lib" in _LIBRARY:
        return _LIBRARY["lib"]
    start_compiling()
    with _LOCK:
        if "lib" in _LIBRARY:
            return _LIBRARY["lib"]
        if _FAILED:
            return None
        path = _library_path()
        _finish_child(path)
        if _FAILED:
            return None
        try:
            lib = ctypes.CDLL(str(path))
        except OSError as err:
            _FAILED["lib"] = f"the compiled library could not be loaded ({err})"
            return None
        _LIBRARY["lib"] = lib
        return lib


def failure() -> str | None:
    """Why the C library is not available, or ``None``."""
    return _FAILED.get("lib")


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


# ----------------------------------------------------------------------------- the model
class NotNative(Exception):
    """The model is not one the C code computes (the message says why)."""


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


@dataclasses.dataclass(frozen=True)
class _Layout:
    """The coordinates of the unconstrained vector and what the C code needs per coordinate."""

    n_free: int
    n_ls: int  # length-scales: 1, or one per input dimension (ARD)
    offsets: dict[str, int]  # "ls", "eta", "sigma" -> first coordinate (absent: fixed)
    fixed: dict[str, float]
    prior: tuple[np.ndarray, ...]  # kind, a, b, c per coordinate
    start: np.ndarray  # support point on the log scale, per coordinate
    shape_info: tuple[list[str], list[slice], list[tuple[int, ...]]]
    expand_src: np.ndarray
    expand_exp: np.ndarray

    @property
    def n_expanded(self) -> int:
        return len(self.expand_src)


def _layout(model, gp: NativeGP) -> _Layout:
    """Map the model's free random variables onto the C code's roles, or raise
    :class:`NotNative`."""
    roles = {"ls": gp.ls, "eta": gp.eta, "sigma": gp.sigma}
    by_rv = {}
    fixed = {}
    for role, value in roles.items():
        if any(value is rv for rv in model.free_RVs):
            by_rv[id(value)] = role
        elif role == "ls":
            raise NotNative("the length-scale is not a free random variable")
        else:
            try:
                fixed[role] = float(np.asarray(_constant(value)).item())
            except (NotNative, ValueError) as err:
                raise NotNative(f"{role} is neither a free random variable nor a number") from err
    extra = [v.name for v in (*model.deterministics, *model.potentials)]
    extra += [v.name for v in model.observed_RVs[1:]]
    if extra:  # the C code computes the GP's log density and nothing else
        raise NotNative(f"the model has variables besides the GP's: {', '.join(extra)}")
    if len(by_rv) != len(model.free_RVs):
        names = [rv.name for rv in model.free_RVs if id(rv) not in by_rv]
        raise NotNative(f"the model has free variables besides the kernel's and the noise's: "
                        f"{', '.join(names)}")  # fmt: skip
    D = gp.X.shape[1]
    offsets, kinds, a, b, c, start = {}, [], [], [], [], []
    names, slices, shapes, src, use_exp = [], [], [], [], []
    count = 0
    for rv in model.free_RVs:
        role = by_rv[id(rv)]
        if model.rvs_to_initial_values.get(rv) is not None:
            raise NotNative(f"{rv.name} has an initial value of its own")
        transform = model.rvs_to_transforms.get(rv)
        if type(transform).__name__ != "LogTransform":
            raise NotNative(f"{rv.name} is not sampled on the log scale")
        shape = _shape(rv)
        size = int(np.prod(shape)) if shape else 1
        if role != "ls" and size != 1:
            raise NotNative(f"{rv.name} is not a scalar")
        if role == "ls" and size not in (1, D):
            raise NotNative(f"{rv.name} has {size} entries, not 1 or {D}")
        kind, pa, pb, pc, point = _prior(rv, size)
        if kind == PRIOR_IDS["normal"]:  # (a log-transformed Normal is not a PyMC prior)
            raise NotNative(f"{rv.name} has a Normal prior")
        offsets[role] = count
        if role == "ls":
            n_ls = size
        kinds += [kind] * size
        a += list(pa)
        b += list(pb)
        c += list(pc)
        start += list(np.log(point))
        value_name = model.rvs_to_values[rv].name
        names.append(value_name)
        slices.append(slice(count, count + size))
        shapes.append(shape)
        src += range(count, count + size)
        use_exp += [0] * size
        count += size
    for k, rv in enumerate(model.free_RVs):  # the constrained values after the log-scale ones
        sl = slices[k]
        names.append(rv.name)
        slices.append(slice(len(src), len(src) + sl.stop - sl.start))
        shapes.append(shapes[k])
        src += range(sl.start, sl.stop)
        use_exp += [1] * (sl.stop - sl.start)
    return _Layout(
        n_free=count,
        n_ls=n_ls,
        offsets=offsets,
        fixed=fixed,
        prior=(np.array(kinds, np.int64), np.array(a), np.array(b), np.array(c)),
        start=np.array(start),
        shape_info=(names, slices, shapes),
        expand_src=np.array(src, np.int64),
        expand_exp=np.array(use_exp, np.int64),
    )


#: The C struct ``gp_t`` of exact_gp.c, field by field (every field 8 bytes): the name, and
#: how Python fills it ("i" an integer, "f" a float, "p" an array's address or a function's).
_LAYOUT = (
    ("n", "i"), ("d", "i"), ("kernel", "i"), ("n_ls", "i"), ("n_free", "i"),
    ("n_expanded", "i"), ("off_ls", "i"), ("off_eta", "i"), ("off_sigma", "i"),
    ("eta_fixed", "f"), ("sigma_fixed", "f"), ("jitter", "f"),
    ("XT", "p"), ("y", "p"), ("prior_kind", "p"), ("prior_a", "p"), ("prior_b", "p"),
    ("prior_c", "p"), ("expand_src", "p"), ("expand_exp", "p"),
    ("potrf", "p"), ("lauum", "p"), ("trtri", "p"), ("trmm", "p"),
)  # fmt: skip


class _Address:
    """What nutpie reads of a numba ``cfunc``: its ``address``."""

    def __init__(self, address: int):
        self.address = address


def _struct(values: dict[str, Any], fields: tuple = _LAYOUT) -> np.ndarray:
    """``gp_t`` (or the struct of ``fields``, as :data:`_LAYOUT`) as a flat array of 64-bit
    words."""
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


def plan(model) -> tuple[tuple[NativeGP, _Layout] | None, str]:
    """``((description, layout), "")`` where the C code computes ``model``, else ``(None,
    reason)`` (the path off, the model not described, or not covered)."""
    if not _ENABLED:
        return None, "the C path is off (bayes_gp.inference.native_gp.set_enabled)"
    gp = describe(model)
    if gp is None:
        return None, "the model is not one the C path describes"
    missing = [k for k in gp.kernels if k not in KERNEL_IDS]
    if missing:
        return None, f"the C path has no {missing[0]!r} kernel"
    # the layout depends on the model's variables only (the description's data and jitter are
    # read anew each time): kept per model, with the reason where there is none
    cached = _LAYOUTS.get(model)
    if cached is None or cached[0] != _variables_key(model):
        try:
            cached = (_variables_key(model), gp.layout(model), "")
        except NotNative as err:
            cached = (_variables_key(model), None, f"not on the C path: {err}")
        _LAYOUTS[model] = cached
    _, layout, reason = cached
    return (None, reason) if layout is None else ((gp, layout), "")


def _variables_key(model) -> tuple:
    return tuple(map(id, [*model.free_RVs, *model.observed_RVs, *model.deterministics,
                          *model.potentials]))  # fmt: skip


def covers(model) -> bool:
    """Whether the C code computes ``model`` (:func:`plan`)."""
    return plan(model)[0] is not None


def compile_native(model) -> tuple[Any | None, str]:
    """nutpie's compiled model for ``model`` on the C path and the reason, or ``(None,
    reason)`` where the path is off, the model not described or not covered, or the library
    not available (the reason says which)."""
    planned, lib, reason = _planned(model)
    if planned is None:
        return None, reason
    return _compiled_model(model, *planned, lib), (
        f"{planned[0].what}: nothing compiled for this model"
    )


def _planned(model) -> tuple[tuple | None, Any, str]:
    """``(plan, library, "")``, or ``(None, None, reason)`` where :func:`plan` has none or the
    library is not available."""
    planned, reason = plan(model)
    if planned is None:
        return None, None, reason
    lib = library()
    if lib is None:
        return None, None, f"not on the C path: {failure()}"
    return planned, lib, ""


def compile_native_data(model, y) -> tuple[Any | None, str]:
    """:func:`compile_native` of ``model`` with its observed data replaced by ``y``: the same
    description (kernels, priors, jitter) and the same fixed mean, nothing rebuilt or compiled;
    what simulation-based calibration fits to each simulated data set
    (:func:`bayes_gp.validate.sbc`)."""
    planned, lib, reason = _planned(model)
    if planned is None:
        return None, reason
    gp, layout = planned
    if not gp.swaps_y:
        return None, "not on the C path: its description does not take other data"
    observed = _constant(model.rvs_to_values[model.observed_RVs[0]]).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    if y.shape != observed.shape:
        raise ValueError(f"`y` has {y.size} values, the model {observed.size}")
    gp = dataclasses.replace(gp, y=y - (observed - gp.y))  # y minus the same fixed mean
    return _compiled_model(model, gp, layout, lib), f"{gp.what}: nothing compiled"


def _data(gp: NativeGP, layout: _Layout) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The C struct ``gp_t`` (:func:`_struct`) and the arrays it points into (to be kept
    alive as long as it is used)."""
    X = np.asarray(gp.X, dtype=np.float64)
    arrays = {
        "XT": _frozen(X.T),
        "y": _frozen(gp.y),
        "prior_kind": _frozen(layout.prior[0], np.int64),
        "prior_a": _frozen(layout.prior[1]),
        "prior_b": _frozen(layout.prior[2]),
        "prior_c": _frozen(layout.prior[3]),
        "expand_src": _frozen(layout.expand_src, np.int64),
        "expand_exp": _frozen(layout.expand_exp, np.int64),
    }
    values: dict[str, Any] = {
        "n": X.shape[0],
        "d": X.shape[1],
        "kernel": KERNEL_IDS[gp.kernel],
        "n_ls": layout.n_ls,
        "n_free": layout.n_free,
        "n_expanded": len(layout.expand_src),
        "off_ls": layout.offsets["ls"],
        "off_eta": layout.offsets.get("eta", -1),
        "off_sigma": layout.offsets.get("sigma", -1),
        "eta_fixed": layout.fixed.get("eta", 0.0),
        "sigma_fixed": layout.fixed.get("sigma", 0.0),
        "jitter": float(gp.jitter),
        **{name: arr.ctypes.data for name, arr in arrays.items()},
        **{name: _address("lapack", "d" + name) for name in ("potrf", "trtri", "lauum")},
        "trmm": _address("blas", "dtrmm"),
    }
    return _struct(values), arrays


def loo_draws(model, arrays: list[np.ndarray], threads: int = 2) -> np.ndarray | None:
    r"""The exact leave-one-out log predictive densities :math:`\log p(y_i \mid y_{-i},
    \theta)` (R&W eqs. 5.10-5.12) of many draws in C, or ``None`` where the C path does not
    cover ``model`` (or the library is not available).

    ``arrays[k]`` holds the values of the model's ``k``-th free random variable stacked along a
    leading draw axis; returns ``(draws, n)``. Per draw: :math:`C`, its Cholesky factor,
    :math:`\alpha`, :math:`C^{-1}` (exact_gp.c's ``gp_loo``), the draws split over ``threads``
    threads (no GIL, one BLAS thread each). A draw whose :math:`C` is not numerically
    positive definite, or whose terms are not finite, has NaN in its row: the caller repeats
    it (with its jitter retry)."""
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_limits

    planned, _ = plan(model)
    if planned is None or not arrays or not isinstance(planned[0], NativeGP):
        return None
    lib = library()
    if lib is None:
        return None
    gp, layout = planned
    draws = arrays[0].shape[0]
    logs = [np.log(np.asarray(a, np.float64).reshape(draws, -1)) for a in arrays]
    x = np.ascontiguousarray(np.concatenate(logs, axis=1))
    if x.shape[1] != layout.n_free:
        raise ValueError(f"the draws have {x.shape[1]} coordinates, the model {layout.n_free}")
    user_data, keep = _data(gp, layout)
    n = gp.X.shape[0]
    out = np.empty((draws, n))
    fn = lib.gp_loo
    fn.restype = ctypes.c_int64
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p]
    bounds = np.linspace(0, draws, max(1, min(threads, draws)) + 1).astype(int)

    def run(k: int) -> int:
        lo, hi = bounds[k], bounds[k + 1]
        return fn(user_data.ctypes.data, hi - lo, x[lo:].ctypes.data, out[lo:].ctypes.data)

    # in worker threads even when one: each keeps a workspace of 3 n^2 floats until it ends
    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(len(bounds) - 1) as pool:
        status = list(pool.map(run, range(len(bounds) - 1)))
    del keep
    if min(status) < 0:
        raise MemoryError(f"the leave-one-out pass could not allocate its workspace (n = {n})")
    return out


def _compiled_model(model, gp: NativeGP, layout: _Layout, lib):
    from nutpie.compile_pymc import CompiledPyMCModel, _prepare_dims_and_coords

    user_data, arrays = gp.struct(layout)
    reparam = [model.rvs_to_values[rv].name for rv in model.free_RVs
               if model.rvs_to_transforms.get(rv) is not None]  # fmt: skip
    dims, coords = _prepare_dims_and_coords(model, layout.shape_info, reparam)
    n_rvs = len(model.free_RVs)
    start, sizes = layout.start, [sl.stop - sl.start for sl in layout.shape_info[1][:n_rvs]]

    def initial_point(seed) -> np.ndarray:
        # PyMC's support points on the log scale with its U(-1, 1) jitter, drawn as
        # pymc.initial_point.make_initial_point_fn draws it for nutpie (one generator per free
        # variable from SeedSequence(seed).spawn, the last variable's first, the order its
        # graph lists them): the numba model's initial points, to rounding
        streams = np.random.SeedSequence(seed).spawn(len(sizes))[::-1]
        jitter = [np.random.Generator(np.random.PCG64(s)).uniform(-1, 1, size=k)
                  for s, k in zip(streams, sizes, strict=True)]  # fmt: skip
        return start + np.concatenate(jitter)

    cls = _native_class(CompiledPyMCModel)
    names, _, shapes = layout.shape_info
    logp, expand = gp.symbols
    return cls(
        _n_dim=layout.n_free,
        dims=dims,
        _coords=coords,
        _shapes={name: tuple(shape) for name, shape in zip(names, shapes, strict=True)},
        compiled_logp_func=_Address(ctypes.cast(getattr(lib, logp), ctypes.c_void_p).value),
        compiled_expand_func=_Address(ctypes.cast(getattr(lib, expand), ctypes.c_void_p).value),
        initial_point_func=initial_point,
        shared_data={},
        shared_var_keys={},
        user_data=user_data,
        n_expanded=layout.n_expanded,
        shape_info=layout.shape_info,
        logp_func=None,
        expand_func=None,
        reparameterized_names=reparam,
        native_arrays=arrays,
        native_library=lib,
    )


_CLASS: dict[str, type] = {}


def _native_class(base: type) -> type:
    """nutpie's ``CompiledPyMCModel`` holding the arrays and the library the C struct points
    into (alive as long as the model: nutpie keeps the model alive while it samples)."""
    if "cls" not in _CLASS:

        @dataclasses.dataclass(frozen=True)
        class NativeCompiledModel(base):
            native_arrays: dict = dataclasses.field(default_factory=dict, kw_only=True)
            native_library: Any = dataclasses.field(default=None, kw_only=True)

            def with_data(self, **updates):
                raise TypeError(
                    "a model on bayes_gp's C path takes its data from its description "
                    "(bayes_gp.inference.native_gp); compile the model with the new data"
                )

        _CLASS["cls"] = NativeCompiledModel
    return _CLASS["cls"]
