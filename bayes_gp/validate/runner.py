r"""The simulations of SBC: prior draws, fits and ranks, one simulation at a time.

:func:`bayes_gp.validate.sbc` drives them (:mod:`bayes_gp.validate.calibration`); this module holds what
one simulation needs, so that it also runs alone (:func:`bayes_gp.validate.sbc_one`) or in a
worker process. A :class:`_Runner` builds, once per process, the function that draws the true
hyperparameters and a data set from the simulating model's prior (one compiled PyTensor function,
reseeded per simulation) and, for ``fit="compiled"``, nutpie's compiled model of the fitted
model with its observed data in a shared variable. :func:`_run` performs simulation ``i`` from
its seed alone: the prior draw, the fit (repeated with more draws while the effective sample size
is below :math:`L`), the thinning and the ranks; an exception becomes a failed
:class:`Simulation`, never an exception of the run.
"""

from __future__ import annotations

import inspect
import math
import os
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from bayes_gp.validate.ranks import effective_sample_size, max_rhat, rank_statistic, thin

__all__ = ["Simulation", "simulation_seeds"]

#: Name of the shared variable that holds the observed data of the compiled fit.
SHARED_NAME = "bayes_gp_sbc_observed"
#: Why ``fit="compiled"`` cannot fit a model whose likelihood ignores its observed value.
_BUILT_IN_DATA = (
    "the fitted model's log density does not change when its observed data are replaced (its "
    "likelihood has the data built in, as an HSGP model's sufficient statistics are), so "
    "fit='compiled' would fit the example data in every simulation; use fit='sample', which "
    "builds the model on each simulated data set"
)
#: Seeds derived from one simulation's seed: the prior draw, then one per fit attempt.
_N_SEEDS = 8
FITS = ("compiled", "sample")


# ------------------------------------------------------------------------------------ seeds
def simulation_seeds(random_seed: int, n_simulations: int) -> list[int]:
    """The seed of each simulation: ``SeedSequence(random_seed).spawn(n)``, each child as one
    32-bit integer. Simulation ``i``'s seed does not depend on ``n_simulations``."""
    root = np.random.SeedSequence(int(random_seed))
    return [int(c.generate_state(1, dtype=np.uint32)[0]) for c in root.spawn(int(n_simulations))]


def _derived(seed: int) -> list[int]:
    """``[prior draw seed, fit seed of attempt 0, 1, ...]`` from one simulation's seed."""
    return [int(s) for s in np.random.SeedSequence(int(seed)).generate_state(_N_SEEDS)]


def _check_seed(random_seed) -> int:
    if random_seed is None:
        return int(np.random.SeedSequence().entropy % (2**63))
    if isinstance(random_seed, bool) or not isinstance(random_seed, int | np.integer):
        raise TypeError(f"`random_seed` must be an int or None, got {random_seed!r}")
    if random_seed < 0:
        raise ValueError(f"`random_seed` must be non-negative, got {random_seed}")
    return int(random_seed)


# ----------------------------------------------------------------------------- the records
@dataclass(frozen=True)
class Simulation:
    """One SBC simulation.

    Attributes
    ----------
    index, seed : int
        Its position and its own seed (:func:`simulation_seeds`).
    truth : dict
        Parameter name (``"ls"``, or ``"ls[0]"`` for a vector) → the value drawn from the prior.
        Empty if the simulation step itself failed.
    ranks : dict or None
        Parameter name → rank in ``0..L``; ``None`` if the simulation failed.
    error : str or None
        ``"ExceptionType: message"`` of a failed simulation; ``stage`` says where
        (``"simulate"``, ``"fit"`` or ``"rank"``).
    seconds : float
        Wall time of the simulation (prior draw, fit(s), ranks).
    draws : int
        Draws per chain of the fit the ranks come from (more than asked when the effective
        sample size was below :math:`L`).
    divergences : int
        Divergent transitions after tuning (-1 if the fit did not report them).
    max_rhat, min_ess : float
        Largest :math:`\\hat R` and smallest effective sample size (min of bulk and tail) over
        the ranked parameters.
    low_ess : bool
        ``min_ess`` stayed below :math:`L` even after more draws: the thinned draws are
        autocorrelated and the ranks of this simulation are not exactly uniform.
    posterior : ndarray or None
        The ranked parameters' posterior draws, ``(chain, draw, parameter)``.
    warnings : tuple of str
        Distinct warnings raised during the simulation.
    """

    index: int
    seed: int
    truth: dict
    ranks: dict | None
    error: str | None = None
    stage: str | None = None
    seconds: float = float("nan")
    draws: int = 0
    divergences: int = -1
    max_rhat: float = float("nan")
    min_ess: float = float("nan")
    low_ess: bool = False
    posterior: np.ndarray | None = field(default=None, repr=False)
    warnings: tuple = ()

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class _Spec:
    """Everything a simulation needs, picklable for worker processes."""

    make_model: Callable
    simulate_model: Callable | None
    y: np.ndarray
    var_names: tuple[str, ...] | None
    fit: str | Callable
    draws: int
    tune: int
    chains: int
    thin_to: int
    max_draws: int
    sample_kwargs: Mapping[str, Any]
    nutpie_backend: str = "numba"  # of fit="compiled": "numba", "jax" or "native" (C)


# ------------------------------------------------------------------------------ the runner
def _single_observed(model, role: str):
    obs = list(model.observed_RVs)
    if len(obs) != 1:
        raise ValueError(
            f"SBC needs a model with exactly one observed variable; the {role} model has "
            f"{[v.name for v in obs]}"
        )
    return obs[0]


def _pymc_model(gp, role: str):
    model = getattr(gp, "model", None)
    import pymc as pm

    if not isinstance(model, pm.Model):
        raise TypeError(
            f"`make_model(y)` must return a bayes_gp model (an object whose `model` attribute is "
            f"a PyMC model); the {role} model is {type(gp).__name__}"
        )
    return model


def _flat_names(name: str, shape: tuple) -> list[str]:
    if shape == ():
        return [name]
    return [f"{name}[{','.join(map(str, idx))}]" for idx in np.ndindex(*shape)]


class _Runner:
    """Builds (once) the simulator and the compiled fit, and runs simulations by seed."""

    def __init__(self, spec: _Spec, cores: int):
        self.spec = spec
        self.cores = max(1, int(cores))
        self._draw = None
        self._template = None
        self._compiled = None
        self._swappable = False
        self.setup_seconds = 0.0

    # -- the model that is fitted, built on the example data
    def template(self):
        if self._template is None:
            gp = self.spec.make_model(np.array(self.spec.y, copy=True))
            model = _pymc_model(gp, "fitted")
            _single_observed(model, "fitted")
            self._template = gp
        return self._template

    def names(self) -> list[str]:
        if self.spec.var_names is not None:
            return list(self.spec.var_names)
        gp = self.template()
        names = getattr(gp, "hyperparameters", None)
        return list(names) if names is not None else [v.name for v in gp.model.free_RVs]

    # -- prior draws
    def _simulator(self):
        if self._draw is None:
            from pymc.pytensorf import compile as compile_fn
            from pymc.pytensorf import find_rng_nodes

            from bayes_gp.linalg import EAGER_MODE

            t0 = time.perf_counter()
            make = self.spec.simulate_model or self.spec.make_model
            gp = make(np.array(self.spec.y, copy=True))
            model = _pymc_model(gp, "simulating")
            obs = _single_observed(model, "simulating")
            free = {v.name: v for v in model.free_RVs}
            names = self.names()
            missing = [n for n in names if n not in free]
            if missing:
                raise ValueError(
                    f"parameters {missing} are not free random variables of the simulating "
                    f"model (it has {sorted(free)})"
                )
            outputs = [free[n] for n in names] + [obs]
            fn = compile_fn(inputs=[], outputs=outputs, random_seed=0, mode=EAGER_MODE)
            rngs = find_rng_nodes(fn.maker.fgraph.outputs)
            self._draw = (fn, rngs, names)
            self.setup_seconds += time.perf_counter() - t0
        return self._draw

    def simulate(self, seed: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """``(truth, y)`` drawn from the simulating model's prior with ``seed``."""
        from pymc.pytensorf import reseed_rngs

        fn, rngs, names = self._simulator()
        reseed_rngs(rngs, int(seed))
        *values, y = fn()
        truth = {n: np.array(v, dtype=float, copy=True) for n, v in zip(names, values, strict=True)}
        y = np.array(y, copy=True)
        if not np.all(np.isfinite(y)):
            raise FloatingPointError("the simulated data contain non-finite values")
        return truth, y

    # -- fitting
    def _compiled_model(self):
        if self._compiled is None:
            import pymc as pm
            import pytensor

            from bayes_gp.inference.compiled import choose_backend
            from bayes_gp.inference.nutpie_compile import compile_pymc_model

            t0 = time.perf_counter()
            gp = self.template()
            if hasattr(gp, "check_jitter"):  # the pre-flight Cholesky check of model.sample()
                gp.check_jitter(0)
            obs = _single_observed(gp.model, "fitted")
            self.check_swappable()
            # the observed variable's dtype (an int64 count or label: example data may be floats)
            self._dtype = obs.type.dtype
            shared = pytensor.shared(np.asarray(self.spec.y).astype(self._dtype), name=SHARED_NAME)
            model = pm.observe(gp.model, {obs.name: shared})
            if self.spec.nutpie_backend == "native":
                # bayes_gp's C log density (bayes_gp.inference.native_gp): nothing to compile,
                # each data set goes into a description of this model (fit()), whose variables
                # are in the order of the compiled backends' (pm.observe may reorder them)
                from bayes_gp.inference import native_gp

                native_gp.register_like(model, gp.model)
                self._compiled = model
            elif self.spec.nutpie_backend == "jax":
                # (an Op without a JAX version is named by choose_backend's error)
                _, _, entry = choose_backend(model, 0, setting="jax")
                self._compiled = entry.compiled
            else:
                with warnings.catch_warnings():
                    warnings.filterwarnings("ignore", message=".*object mode.*")
                    self._compiled = compile_pymc_model(model)
            self.setup_seconds += time.perf_counter() - t0
        return self._compiled

    def fit(self, y: np.ndarray, seed: int, draws: int):
        spec = self.spec
        if spec.fit == "compiled":
            import nutpie

            compiled = self._compiled_model()
            if spec.nutpie_backend == "native":
                from bayes_gp.inference import native_gp

                compiled, reason = native_gp.compile_native_data(compiled, y)
                if compiled is None:
                    raise RuntimeError(f"the C log density is not available: {reason}")
            else:
                compiled = compiled.with_data(**{SHARED_NAME: np.asarray(y).astype(self._dtype)})
            kwargs = {"target_accept": 0.9, **spec.sample_kwargs}
            return nutpie.sample(
                compiled,
                draws=draws,
                tune=spec.tune,
                chains=spec.chains,
                cores=min(self.cores, spec.chains),
                seed=int(seed),
                progress_bar=False,
                **kwargs,
            )
        gp = spec.make_model(y)
        options = {"draws": draws, "tune": spec.tune, "chains": spec.chains, "random_seed": seed}
        if spec.fit == "sample":
            params = inspect.signature(gp.sample).parameters
            extra = {"log_likelihood": False, "progressbar": False}
            options.update({k: v for k, v in extra.items() if k in params})
            return gp.sample(**options, **spec.sample_kwargs)
        return spec.fit(gp, **options, **spec.sample_kwargs)

    # -- the check that the prior does not depend on y
    def check_prior(self, y_new: np.ndarray, rtol: float = 1e-4) -> None:
        """Raise if ``make_model(y_new)`` differs from ``make_model(y)`` beyond the observed data
        (module docstring): compares their log densities at three points, to ``rtol`` relative
        (the models' jitters are relative to var(y), which moves a VFE model's density by ~1e-6
        relative; a prior or mean scaled to the data moves it by far more)."""
        import pymc as pm

        from bayes_gp.linalg import EAGER_MODE

        gp0 = self.spec.make_model(np.array(self.spec.y, copy=True))
        gp1 = self.spec.make_model(np.array(y_new, copy=True))
        m0, m1 = _pymc_model(gp0, "fitted"), _pymc_model(gp1, "fitted")
        obs = _single_observed(m0, "fitted")
        swapped = pm.observe(m0, {obs.name: np.array(y_new, copy=True)})
        if self._ignores_observed(m0, swapped):
            # a likelihood with its data built in (HSGP's sufficient statistics): swapping the
            # observed value changes nothing, so only a fresh model per data set fits them
            if self.spec.fit == "compiled":
                raise ValueError(_BUILT_IN_DATA)
            self._check_same_prior(m0, m1, rtol)
            return
        m0 = swapped
        names0 = sorted(v.name for v in m0.value_vars)
        names1 = sorted(v.name for v in m1.value_vars)
        if names0 != names1:
            raise ValueError(
                "`make_model(y)` builds models with different variables for different data "
                f"({names0} vs {names1}); SBC needs one model whose prior does not depend on y"
            )
        differ = _first_difference(
            m1, m0.compile_logp(mode=EAGER_MODE), m1.compile_logp(mode=EAGER_MODE), rtol
        )
        if differ is not None:
            a, b = differ
            raise ValueError(
                "the model that `make_model(y)` builds depends on y beyond the likelihood: "
                f"at the same parameters its log density is {b:.6g} when built on a "
                f"simulated data set and {a:.6g} when built on `y` and given that data set. "
                "Its prior or mean function is scaled to the data (GPRegression's default "
                "priors are scaled to y and its default mean is the sample mean), so the "
                "simulating and the fitted prior differ and SBC would fail for that reason "
                "alone. Give every hyperparameter a prior (`priors=`), a fixed mean "
                "(`mean='zero'` or a prior on `c`) and a noise prior or a fixed `noise`; or "
                "pass `check_prior=False` to validate the model as built on `y` (with "
                "fit='compiled' every simulation then uses that model)."
            )


    def check_swappable(self) -> None:
        """Raise unless the fitted model's log density depends on its observed value (what
        ``fit="compiled"`` swaps); checked once."""
        if self._swappable:
            return
        import pymc as pm

        model = self.template().model
        obs = _single_observed(model, "fitted")
        try:  # another data set in the support of the observed variable
            _, y_other = self.simulate(0)
        except Exception:  # the simulation's own error surfaces in its run
            y_other = np.asarray(self.spec.y, float) + 1.0
        y_other = np.asarray(y_other).astype(obs.type.dtype)
        other = pm.observe(model, {obs.name: y_other})
        if self._ignores_observed(model, other):
            raise ValueError(_BUILT_IN_DATA)
        self._swappable = True

    @staticmethod
    def _ignores_observed(model, swapped) -> bool:
        """Whether ``model`` and ``swapped`` (the same model with other observed data) have the
        same log density at three points: the likelihood ignores the observed value."""
        from bayes_gp.linalg import EAGER_MODE

        f0 = model.compile_logp(mode=EAGER_MODE)
        return _first_difference(model, f0, swapped.compile_logp(mode=EAGER_MODE), 1e-12) is None

    @staticmethod
    def _check_same_prior(m0, m1, rtol: float) -> None:
        """The prior terms (free variables' log densities) of two models agree at three points."""
        from bayes_gp.linalg import EAGER_MODE

        f0 = m0.compile_fn(m0.logp(vars=m0.free_RVs), mode=EAGER_MODE)
        f1 = m1.compile_fn(m1.logp(vars=m1.free_RVs), mode=EAGER_MODE)
        differ = _first_difference(m1, f0, f1, rtol)
        if differ is not None:
            a, b = differ
            raise ValueError(
                "the priors of the model that `make_model(y)` builds depend on y: at the same "
                f"parameters their log density is {b:.6g} on a simulated data set and "
                f"{a:.6g} on `y`. Give every hyperparameter a prior (`priors=`)"
            )


def _first_difference(model, f0, f1, rtol: float) -> tuple[float, float] | None:
    """``(f0(p), f1(p))`` at the first of three jittered initial points of ``model`` where the
    two log densities differ beyond ``rtol`` (relative, and absolute near zero); ``None`` if
    they agree at all three."""
    from pymc.initial_point import make_initial_point_fn

    start = make_initial_point_fn(
        model=model, jitter_rvs=set(model.free_RVs), return_transformed=True
    )
    for s in range(3):
        point = start(s)
        a, b = float(f0(point)), float(f1(point))
        if not math.isclose(a, b, rel_tol=rtol, abs_tol=rtol):
            return a, b
    return None


def _posterior_array(idata, names: list[str]) -> tuple[np.ndarray, list[str]]:
    """``(chain, draw, P)`` draws of ``names`` (flattened) and the flat parameter names."""
    post = idata["posterior"]
    cols, flat = [], []
    for n in names:
        a = np.asarray(post[n], dtype=float)
        cols.append(a.reshape(a.shape[0], a.shape[1], -1))
        flat += _flat_names(n, a.shape[2:])
    return np.concatenate(cols, axis=2), flat


def _divergences(idata) -> int:
    try:
        stats = idata["sample_stats"]
    except KeyError:
        return -1
    if "diverging" not in stats:
        return -1
    return int(np.asarray(stats["diverging"]).sum())


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _messages(caught) -> tuple:
    seen: dict[str, None] = {}
    for w in caught or ():
        seen.setdefault(f"{w.category.__name__}: {w.message}", None)
    return tuple(seen)


def _run(runner: _Runner, index: int, seed: int) -> Simulation:
    """Simulation ``index`` with its ``seed``: prior draw, fit (more draws while the ESS is
    below L), thinning and ranks. Failures are returned, not raised."""
    spec = runner.spec
    t0 = time.perf_counter()
    prior_seed, *fit_seeds = _derived(seed)
    L = spec.thin_to
    caught: list = []
    truth: dict = {}
    stage = "simulate"
    try:
        with (
            threadpool_limits(limits=1, user_api="blas"),
            warnings.catch_warnings(record=True) as caught,
        ):
            warnings.simplefilter("always")
            truth_arrays, y = runner.simulate(prior_seed)
            for n, v in truth_arrays.items():
                truth.update(zip(_flat_names(n, v.shape), np.ravel(v).tolist(), strict=True))
            stage = "fit"
            draws = spec.draws
            for attempt, fit_seed in enumerate(fit_seeds):
                idata = runner.fit(y, fit_seed, draws)
                post, flat = _posterior_array(idata, list(truth_arrays))
                if not np.all(np.isfinite(post)):
                    raise FloatingPointError("the posterior draws contain non-finite values")
                ess = float(np.nanmin(effective_sample_size(post)))
                if ess >= L or draws >= spec.max_draws or attempt == len(fit_seeds) - 1:
                    break
                # Talts et al.: thin to about the ESS, so draw until the ESS reaches L
                draws = min(spec.max_draws, math.ceil(1.2 * draws * L / max(ess, 1.0)))
            stage = "rank"
            values = np.array([truth[n] for n in flat])
            ranks = rank_statistic(values, thin(post, L))
    except Exception as exc:
        return Simulation(
            index,
            seed,
            truth,
            None,
            _error(exc),
            stage,
            time.perf_counter() - t0,
            warnings=_messages(caught),
        )
    return Simulation(
        index,
        seed,
        truth,
        {n: int(r) for n, r in zip(flat, ranks, strict=True)},
        None,
        None,
        time.perf_counter() - t0,
        draws,
        _divergences(idata),
        max_rhat(post),
        ess,
        not ess >= L,  # a NaN ESS (constant draws) counts as low
        post,
        _messages(caught),
    )


# ----------------------------------------------------------------------- worker processes
_WORKER: _Runner | None = None


def _init_worker(spec: _Spec) -> None:
    global _WORKER
    _WORKER = _Runner(spec, cores=1)


def _work(index: int, seed: int) -> Simulation:
    assert _WORKER is not None
    return _run(_WORKER, index, seed)


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
