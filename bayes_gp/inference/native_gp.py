r"""The exact GP's log density and gradient in C for nutpie: a first fit without numba compiling.

nutpie calls a model through two C function pointers (the log density with its gradient, and
the "expand" function that computes the stored variables). For a PyMC model numba compiles
both from PyTensor's graph, 12-19 s on a new machine for a one-kernel GP (issue 41, the cold
rows of ``benchmarks/README.md``'s ``first_fit`` section: numba's typing and LLVM for ~165
functions, under one lock). For the model :class:`~bayes_gp.GPRegression` declares most often
there is no need to compile anything per model: :file:`bayes_gp/solvers/c/exact_gp.c` computes

.. math::
   \log p(y \mid \theta) = -\tfrac12 y^\top C^{-1} y - \tfrac12 \log|C| - \tfrac n2 \log 2\pi,
   \qquad C = \sum_t \eta_t^2 \prod_{f \in t} k_f + (\sigma^2 + \epsilon) I

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

What it covers (:func:`describe`): the dense exact likelihood of a catalogue kernel or a sum
of products of them (R&W §4.2.4; ``"expquad + expquad * periodic + ratquad + expquad"``, the
Mauna Loa kernel of R&W §5.4.3) whose factors are ``expquad``, ``matern52``, ``matern32``,
``matern12`` / ``exponential``, ``ratquad`` or ``periodic`` (isotropic or ARD length-scales;
:mod:`bayes_gp.inference.native_model`), homoscedastic Gaussian noise, a fixed mean
(``mean=None`` or ``"zero"``), and hyperparameters that are fixed numbers or free variables on
PyMC's log transform (or a log transform chained with a constant scale) with a LogNormal,
HalfNormal, Gamma, InverseGamma, Exponential or HalfCauchy prior of constant parameters. Any
other model (another kernel, a learned mean, other priors, approximations, derivative
observations, known noise, deterministics or potentials the user added to the model) goes to
numba as before, and so does every model while the nutpie backend is set to JAX;
:func:`~bayes_gp.inference.compiled.sample_nutpie` records which and why in the posterior's
attributes. The C log density equals the model's to rounding (``tests/inference/
test_native_gp.py`` compares it and its gradient with a SciPy transcription and with PyMC's).

Speed: each factor is computed once over the upper triangle for :math:`C` and kept (where its
rows fit in 64 MB) for the gradient; inputs on a grid (one column, as a monthly series) have
the kernel evaluated at the grid's lags only and :math:`C` gathered from that table, as PyMC's
graph of the model does (:mod:`bayes_gp.kernels.lags`). One gradient of the Mauna Loa model
(n = 144, five factors) took 0.30 ms in C against 0.35 ms for numba's compiled graph on the
grid, 0.60 against 1.89 ms at scattered inputs (``benchmarks/README.md``, "Sums of products
in C").

The same library holds the log densities of the whitened latent GPs (:mod:`bayes_gp.inference.
native_latent`: the heteroscedastic GP, and the joint latent GP under a Bernoulli, binomial or
Poisson likelihood): a model's description (:func:`register`) says which it is.

``BAYES_GP_NATIVE=0`` (or :func:`set_enabled`) turns the path off.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
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

from bayes_gp.inference.native_model import (
    Layout,
    NativeKernel,
    NotNative,
    _constant,
    coordinates,
    coords_struct,
    free_parameters,
    gp_struct,
    mapped,
)

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
    "objective",
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
    r"""What the C code needs of an exact GP regression model: the kernel
    (:class:`~bayes_gp.inference.native_model.NativeKernel`), the inputs ``X`` (n, D), ``y``
    minus the fixed mean, the jitter :math:`\epsilon`, and the noise's standard deviation
    as the model's random variable or a number."""

    kernel: NativeKernel
    X: np.ndarray
    y: np.ndarray
    jitter: float
    sigma: Any

    #: the C functions of the log density with its gradient, and of nutpie's stored values
    symbols: ClassVar[tuple[str, str]] = ("gp_logp", "gp_expand")
    #: the C function of the type-II objective (:func:`objective`; ``None``: there is none)
    objective: ClassVar[str | None] = "gp_objective"
    what: ClassVar[str] = "the exact GP's log density in C (bayes_gp.inference.native_gp)"
    #: whether ``y`` is the observed data less a fixed mean (:func:`compile_native_data`)
    swaps_y: ClassVar[bool] = True

    def layout(self, model) -> Layout:
        """The coordinates of ``model``'s unconstrained vector, or :class:`NotNative`."""
        return coordinates(model, free_parameters(model, self.kernel, self.sigma), {},
                           what="the kernel's and the noise's")  # fmt: skip

    def struct(self, layout: Layout) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The C struct ``gp_t`` and the arrays it points into (to be kept alive as long as
        it is used)."""
        arrays: dict[str, np.ndarray] = {}
        coords_struct(layout, arrays)
        user_data = gp_struct(self.kernel, self.X, self.y, self.jitter, self.sigma, layout,
                              arrays, "")  # fmt: skip
        return user_data, arrays


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
        return None if gp is None else mapped(gp, own)

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
    for source in sorted(SOURCE.parent.glob("*.c")):  # exact_gp.c and the files it includes
        key.update(source.name.encode())
        key.update(source.read_bytes())
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


# ----------------------------------------------------------------------------- the model
class _Address:
    """What nutpie reads of a numba ``cfunc``: its ``address``."""

    def __init__(self, address: int):
        self.address = address


def plan(model) -> tuple[tuple[NativeGP, Layout] | None, str]:
    """``((description, layout), "")`` where the C code computes ``model``, else ``(None,
    reason)`` (the path off, the model not described, or not covered)."""
    if not _ENABLED:
        return None, "the C path is off (bayes_gp.inference.native_gp.set_enabled)"
    gp = describe(model)
    if gp is None:
        return None, "the model is not one the C path describes"
    # the layout depends on the model's variables only (the description's data and jitter are
    # read anew each time): kept per model, with the reason where there is none
    cached = _LAYOUTS.get(model)
    if cached is None or cached[0] != _variables_key(model):
        try:
            layout = gp.layout(model)
            gp.struct(layout)  # the parameters fixed by numbers checked, too
            cached = (_variables_key(model), layout, "")
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
    x = layout.of_values(arrays)  # the coordinates: log(value) / s
    user_data, keep = gp.struct(layout)
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


def objective(model, prior: bool) -> Callable[[np.ndarray], tuple[float, np.ndarray]] | None:
    """The type-II objective of :func:`bayes_gp.inference.typeii.optimize` in C, or ``None``
    where the C path does not cover ``model`` as an exact GP or a Laplace-integrated latent GP
    (:mod:`bayes_gp.inference.native_laplace`): a function of the unconstrained vector (the
    model's value variables raveled in order) returning the log marginal likelihood (R&W eq.
    2.30; the Laplace approximation's, R&W eq. 3.32), plus with ``prior`` the priors' log
    densities of the values without the transforms' log-Jacobians
    (``model.logp(jacobian=False)``), and its gradient; ``-inf`` (and zeros) where it is not
    finite. Nothing is compiled for the model."""
    planned, lib, _ = _planned(model)
    if planned is None or planned[0].objective is None:
        return None
    gp, layout = planned
    user_data, arrays = gp.struct(layout)
    fn = getattr(lib, gp.objective)
    fn.restype = ctypes.c_int64
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                   ctypes.c_void_p]  # fmt: skip
    keep = (user_data, arrays, lib)

    def evaluate(x: np.ndarray) -> tuple[float, np.ndarray]:
        x = np.ascontiguousarray(x, dtype=np.float64)
        if x.shape != (layout.n_free,):
            raise ValueError(f"the point has {x.size} coordinates, the model {layout.n_free}")
        grad, value = np.zeros_like(x), np.zeros(1)
        rc = fn(keep[0].ctypes.data, x.ctypes.data, int(prior), grad.ctypes.data,
                value.ctypes.data)  # fmt: skip
        if rc == 1:
            raise MemoryError(f"the C objective could not allocate its workspace (n = "
                              f"{gp.X.shape[0]})")  # fmt: skip
        if rc != 0:
            return -np.inf, np.zeros_like(x)
        return float(value[0]), grad

    return evaluate


def _compiled_model(model, gp: NativeGP, layout: Layout, lib):
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
