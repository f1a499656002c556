"""NUTS for GP hyperparameters through ``pm.sample``, with a choice of backend.

``sampler="auto"`` picks the backend by the kind of model, from measurements of min bulk ESS
per second of wall time (compilation included; ``benchmarks/README.md``):

* **Gaussian likelihood** (:class:`~bayes_gp.GPRegression`, exact, approximate or sparse;
  :class:`~bayes_gp.HeteroscedasticGPRegression`; :class:`~bayes_gp.DeepKernelRegression`):
  **nutpie**, which runs the numba-compiled log density with a Rust NUTS and no per-step Python
  overhead. ``regression.py`` (SE kernel, 2 chains x (500 + 500)): at N = 300 nutpie 23.0
  min-ESS/s, PyMC 13.3, numpyro 8.1, a hand-written numpyro model 5.8; at N = 1000 nutpie 0.66,
  PyMC 0.14, numpyro 0.18, hand-written 0.24. At N = 100 compilation dominates and the JAX
  backends win by seconds (whole fits: numpyro 5.4 s, PyMC 7.3 s, nutpie 8.8 s); nutpie
  can compile with JAX too (opt-in: :func:`bayes_gp.inference.compiled.set_nutpie_backend`). The
  heteroscedastic GP (latent log-noise values sampled, f integrated out; ``samplers.py``,
  ``mcycle``): nutpie 1.70 min-ESS/s, numpyro 1.33, PyMC 1.25.
* **Latent GP under a Bernoulli likelihood** (:class:`~bayes_gp.GPClassifier`, ``latent=True``
  below): **PyMC's NUTS**. On these posteriors (hundreds of whitened latent values with the
  hyperparameters) nutpie takes half the leapfrog steps per draw but gets 1.4–4.6x fewer
  effective draws: ``classification.py`` (2 chains x (500 + 500), logit) Pima nutpie 2.2
  min-ESS/s, PyMC 3.7, numpyro 2.5; simulated 2-D (n = 150) 4.5 / 4.8 / 4.8; breast cancer (an
  earlier run under load) 0.7 / 2.3 / 2.7; ``samplers.py``'s smaller 2-D problem (n = 120)
  15.9 / 13.5 / 17.4. PyMC is ahead or level on the real data sets, and with the usual fixed
  number of draws its chains carry 1.4–3.6x nutpie's effective sample size. numpyro is on a par
  with PyMC, but JAX is not a dependency of bayes_gp and PyMC's sampler always is. Except where
  the joint model's log density is bayes_gp's C code (:mod:`bayes_gp.inference.native_latent`:
  the Bernoulli or binomial likelihood with the logit link or the Poisson likelihood, a
  catalogue kernel; nothing compiled): **nutpie** on it, measured on the coal-mining series
  (n = 112, 2 chains x (150 + 150)): 6.3 s and min bulk ESS 74 on a new machine against PyMC's
  54.8 s cold and 32.9 s warm for ESS 165 (11.7 against 5.0 ESS/s warm); x (1000 + 1000): 17.2
  ESS/s (``benchmarks/README.md``, "Joint latent NUTS in C").

An explicit ``sampler=`` is always honoured.

Chains: nutpie runs them in threads of one process, in parallel. A model whose log density holds
one of bayes_gp's Ops that run Python in object mode (``holds_gil``: the Laplace-integrated
latent GP, except with the Bernoulli-logit, binomial and Poisson likelihoods, whose native
solver :mod:`bayes_gp.latent.native` holds no GIL; the multi-class softmax Laplace with
``native=False`` (its default is the native :mod:`bayes_gp.classification.native`); the
compact-support band factorisation; the Kronecker ICM density) keeps Python's GIL for most of
each gradient, so its chains would wait for each other: measured (a Poisson ``LatentGP`` on the
NumPy solver, 2 chains, load 2-5 from other jobs) 8.9-10.9 s one after another against 9.9-10.8
s in parallel at n = 112 (the coal data), 72-87 s against 86-90 s at n = 400. For such models
:func:`run_nuts` runs the chains one after another (``cores=1``) unless ``cores`` is given, and
says so: a log line and the posterior's ``bayes_gp_cores`` attribute (the report's inference
table shows it). A Laplace latent GP or softmax Laplace classifier on a native solver runs its
chains in parallel, and ``bayes_gp_cores`` says so; a model on bayes_gp's C path
(:mod:`~bayes_gp.inference.native_gp`, :mod:`~bayes_gp.inference.native_latent`,
:mod:`~bayes_gp.inference.native_laplace`: the Laplace latent GP with a catalogue kernel and
those likelihoods, the negative binomial or the Gaussian) holds no Op at all, and runs its
chains in parallel without a note.

GPU: ``sampler="numpyro"`` compiles the model to JAX and runs wherever JAX's default backend is.
With ``jax[cuda13]`` (or ``jax[cuda12]``) installed and an NVIDIA GPU visible, that is the GPU
(``jax.default_backend() == "gpu"``); ``JAX_PLATFORMS=cpu`` (set before JAX is imported) forces
the CPU. PyTensor turns on ``jax_enable_x64`` when ``floatX`` is float64 (the default), so the GP
runs in double precision on either. The platform used is recorded in the posterior's
``bayes_gp_jax_platform`` attribute. Chains run one after another on a single GPU unless
``nuts={"chain_method": "vectorized"}`` is passed.
"""

from __future__ import annotations

import importlib.util
import logging
import warnings
from collections.abc import Callable

import numpy as np
import pymc as pm
import xarray as xr
from threadpoolctl import threadpool_limits

from bayes_gp import op_backends
from bayes_gp.inference import compiled
from bayes_gp.linalg import single_blas_thread

__all__ = ["SAMPLERS", "resolve_sampler", "run_nuts", "add_log_likelihood", "set_log_likelihood",
           "gil_ops"]

_log = logging.getLogger("bayes_gp")

SAMPLERS = ("pymc", "nutpie", "numpyro")


#: ``sampler="auto"``: the backends tried in order, by model kind (module docstring)
AUTO = {"marginal": ("nutpie", "pymc"), "latent": ("pymc",)}
#: ``pm.sample`` arguments the cached nutpie path (:func:`compiled.sample_nutpie`) takes too
_REUSE_KWARGS = {"cores", "discard_tuned_samples", "quiet"}


def resolve_sampler(sampler: str, latent: bool = False) -> str:
    """The backend ``sampler`` stands for. ``"auto"``: the one measured fastest for the model's
    kind (module docstring): nutpie for Gaussian likelihoods (``latent=False``), PyMC's NUTS for
    a latent GP under a Bernoulli likelihood (``latent=True``)."""
    if sampler == "auto":
        for name in AUTO["latent" if latent else "marginal"]:
            if importlib.util.find_spec(name) is not None:
                return name
        return "pymc"
    if sampler not in SAMPLERS:
        raise ValueError(f"`sampler` must be 'auto' or one of {SAMPLERS}, got {sampler!r}")
    module = {"pymc": "pymc", "nutpie": "nutpie", "numpyro": "numpyro"}[sampler]
    if importlib.util.find_spec(module) is None:
        raise ValueError(
            f"sampler {sampler!r} needs the package {module!r}, which is not installed"
        )
    return sampler


def _objmode_ops(model: pm.Model) -> list:
    """The Ops in ``model``'s log density whose numba implementation runs Python in object
    mode (``holds_gil``), each once."""
    return [op for op in _gil_aware_ops(model) if op.holds_gil]


def _native_ops(model: pm.Model) -> list:
    """The Ops in ``model``'s log density that declare ``holds_gil`` False: bayes_gp Ops whose
    numba implementation is nopython code (the Laplace Op with its native solver), each once."""
    return [op for op in _gil_aware_ops(model) if not op.holds_gil]


def _gil_aware_ops(model: pm.Model) -> list:
    """The Ops in ``model``'s log density that have a ``holds_gil`` attribute, each once."""
    from pytensor.graph.traversal import applys_between

    # model.logp() builds the graph anew (30-45 ms for a latent GP): kept on the model for as
    # long as its variables are the same (a reused compiled model samples many times)
    key = tuple(map(id, [*model.basic_RVs, *model.potentials]))
    cached = getattr(model, "_bayes_gp_objmode_ops", None)
    if cached is not None and cached[0] == key:
        return list(cached[1])
    ops = {}
    for node in applys_between(model.value_vars, [model.logp()]):
        if hasattr(node.op, "holds_gil"):
            ops.setdefault(id(node.op), node.op)
    found = list(ops.values())
    model._bayes_gp_objmode_ops = (key, found)
    return found


def gil_ops(model: pm.Model) -> list[str]:
    """The names of the Ops in ``model``'s log density that hold Python's GIL in their numba
    implementation (``holds_gil``; module docstring), each once."""
    names: list[str] = []
    for op in _objmode_ops(model):
        if type(op).__name__ not in names:
            names.append(type(op).__name__)
    return names


def _callback_error(ops: list) -> tuple[str, BaseException] | None:
    """``(description, exception)`` of the first Op in ``ops`` whose object-mode callback
    caught an exception (its ``last_error``; :mod:`bayes_gp.latent.op`), or ``None``."""
    for op in ops:
        err = getattr(op, "last_error", None)
        if err is not None:
            return f"{op} raised {type(err).__name__}: {err}", err
    return None


def check_nuts_settings(draws, tune, chains) -> tuple[int, int, int]:
    """``(draws, tune, chains)`` as ints, or a ``ValueError`` naming the bad one: at least one
    draw, no negative tuning steps, at least one chain, whole numbers (not booleans). Every
    model's ``sample`` calls it first, before any compilation or pre-flight check."""
    out = []
    for name, value, least in (("draws", draws, 1), ("tune", tune, 0), ("chains", chains, 1)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise ValueError(f"`{name}` must be a whole number, got {value!r}")
        if value < least:
            raise ValueError(f"`{name}` must be at least {least}, got {value}")
        out.append(int(value))
    return tuple(out)


def run_nuts(
    model: pm.Model,
    *,
    draws: int,
    tune: int,
    chains: int,
    sampler: str,
    random_seed: int | None,
    target_accept: float,
    progressbar: bool,
    latent: bool = False,
    during=None,
    **kwargs,
):
    """Run NUTS on ``model`` and return ArviZ data (``xarray.DataTree``); ``latent``: a latent
    GP under a Bernoulli likelihood (it picks the ``"auto"`` backend, :func:`resolve_sampler`);
    ``during``: a callable run in a background thread while the chains run
    (:func:`bayes_gp.inference.compiled.run_in_background`; with ``pm.sample``, from its start).
    """
    draws, tune, chains = check_nuts_settings(draws, tune, chains)
    backend = resolve_sampler(sampler, latent)
    if (
        sampler == "auto"
        and latent
        and backend != "nutpie"
        and importlib.util.find_spec("nutpie") is not None
        and compiled.native_applies(model)
    ):
        backend = "nutpie"  # a joint latent GP on the C path (module docstring)
    if not 0.5 <= target_accept < 1.0:
        raise ValueError(f"`target_accept` must be in [0.5, 1), got {target_accept}")
    if backend == "pymc":
        kwargs.setdefault("cores", 1)
    cores_note = ""
    # (a model on the C path of bayes_gp.inference.native_gp has no Ops in what nutpie calls)
    on_c = backend == "nutpie" and set(kwargs) <= _REUSE_KWARGS and compiled.native_applies(model)
    objmode = _objmode_ops(model) if backend == "nutpie" and not on_c else []
    if backend == "nutpie" and chains > 1 and "cores" not in kwargs:
        held = list(dict.fromkeys(type(op).__name__ for op in objmode))
        if held:
            kwargs["cores"] = 1
            cores_note = (
                f"chains one after another (cores=1): {', '.join(held)} runs Python in object "
                "mode and holds the GIL, so chains in parallel threads would wait for each "
                "other (pass cores= to override)"
            )
            _log.info("bayes_gp: nutpie runs the %d %s", chains, cores_note)
        elif not on_c and (
            native := list(dict.fromkeys(type(op).__name__ for op in _native_ops(model)))
        ):
            # recorded too: the same Op holds the GIL for other likelihoods (op.holds_gil)
            cores_note = (
                f"chains in parallel: {', '.join(native)} runs nopython code that does not "
                "hold the GIL (bayes_gp.latent.native, bayes_gp.classification.native)"
            )
    if backend == "numpyro":  # the JAX implementations of bayes_gp's own Ops
        op_backends.ensure("jax")
    nuts = {"target_accept": target_accept, **kwargs.pop("nuts", {})}
    # One BLAS thread per chain: the chains already occupy the cores, and nested BLAS threads
    # oversubscribe them (measured: nutpie 25x faster at N=40 on 2 cores, and 2.6x at
    # N=300).
    options = dict(draws=draws, tune=tune, chains=chains, random_seed=random_seed,
                   progressbar=progressbar, nuts=nuts, **kwargs)  # fmt: skip
    # An exception in an object-mode callback under nutpie cannot propagate (numba; the Op
    # keeps it as ``last_error``, bayes_gp.latent.op): nutpie ends the run if it comes from
    # the initial point, else counts the point as a divergent transition. Either way it is named.
    callbacks = [op for op in objmode if hasattr(op, "last_error")]
    for op in callbacks:
        op.last_error = None
    with model, threadpool_limits(limits=1, user_api="blas"):
        idata = None
        try:
            if backend == "nutpie" and set(kwargs) <= _REUSE_KWARGS:
                # Through the cache of compiled models (``bayes_gp.inference.compiled``): a
                # model of a structure compiled before samples without compiling (by numba, or
                # by JAX when ``compiled.set_nutpie_backend`` asks for it).
                idata = compiled.sample_nutpie(model, during=during, **options)
                during = None  # done
            if idata is None:
                with compiled.run_in_background(during):
                    idata = pm.sample(nuts_sampler=backend, **options)
        except Exception as exc:
            raised = _callback_error(callbacks)
            if raised is None:
                raise
            first = (str(exc).splitlines() or [type(exc).__name__])[0]  # (a Rust backtrace follows)
            raise RuntimeError(f"nutpie stopped ({first}); {raised[0]}") from raised[1]
    raised = _callback_error(callbacks)
    if raised is not None:
        warnings.warn(
            f"{raised[0]} during nutpie's sampling; nutpie counted the points where it raised "
            "as divergent transitions",
            RuntimeWarning,
            stacklevel=2,
        )
    idata["posterior"].attrs["bayes_gp_sampler"] = backend
    if cores_note:
        idata["posterior"].attrs["bayes_gp_cores"] = cores_note
    if backend == "numpyro":
        import jax

        # where the chains ran: JAX's default backend, "cpu", "gpu" or "tpu" (module docstring)
        idata["posterior"].attrs["bayes_gp_jax_platform"] = jax.default_backend()
    return idata


@single_blas_thread
def add_log_likelihood(
    idata,
    names: list[str],
    pointwise: Callable[[list[np.ndarray]], np.ndarray],
    var_name: str = "y",
    threads: int = 1,
    batch: Callable[[list[np.ndarray]], np.ndarray | None] | None = None,
):
    """Add a ``log_likelihood`` group computed draw by draw.

    Parameters
    ----------
    idata : DataTree
        With a ``posterior`` group holding the variables ``names``.
    names : list of str
        Posterior variables passed, in this order, to ``pointwise``.
    pointwise : callable
        ``pointwise(values) -> ndarray (n_obs,)`` of pointwise log-likelihood terms.
    threads : int
        Draws evaluated at once, each in a thread (``pointwise`` must then be thread-safe):
        for a ``pointwise`` whose time is LAPACK's, which runs without the GIL.
    batch : callable, optional
        ``batch(arrays) -> ndarray (draws, n_obs)`` or ``None``: ``pointwise`` for all draws at
        once, ``arrays`` the variables ``names`` with the chain and draw axes flattened into
        one (chain-major); where it answers ``None`` the draws go through ``pointwise``.
    """
    post = idata["posterior"]
    arrays = [np.asarray(post[n]) for n in names]
    n_chain, n_draw = arrays[0].shape[:2]
    if batch is not None:
        out = batch([a.reshape((n_chain * n_draw, *a.shape[2:])) for a in arrays])
        if out is not None:
            return set_log_likelihood(idata, out.reshape(n_chain, n_draw, -1), var_name)
    cells = [(c, d) for c in range(n_chain) for d in range(n_draw)]

    def one(cell: tuple[int, int]) -> np.ndarray:
        return pointwise([a[cell] for a in arrays])

    if threads > 1 and len(cells) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(threads) as pool:
            values = list(pool.map(one, cells))
    else:
        values = map(one, cells)
    out = None
    for (c, d), ll in zip(cells, values, strict=True):
        if out is None:
            out = np.empty((n_chain, n_draw, ll.shape[0]))
        out[c, d] = ll
    return set_log_likelihood(idata, out, var_name)


def set_log_likelihood(idata, out: np.ndarray, var_name: str):
    """``idata`` with the ``(chain, draw, obs)`` array ``out`` as its ``log_likelihood``."""
    post = idata["posterior"]
    ds = xr.Dataset(
        {var_name: (("chain", "draw", "obs"), out)},
        coords={
            "chain": post["chain"].values,
            "draw": post["draw"].values,
            "obs": np.arange(out.shape[2]),
        },
    )
    idata["log_likelihood"] = ds
    return idata
