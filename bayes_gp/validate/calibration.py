r"""Simulation-based calibration (SBC) of a bayes_gp model (Talts et al. 2018).

For a model specification ``make_model(y)`` (a function that builds a bayes_gp model, such as
:class:`~bayes_gp.GPRegression`, on data ``y``), each simulation :math:`i = 1, \dots, N`

1. draws hyperparameters and data from the prior,
   :math:`\tilde\theta_i \sim \pi(\theta)`, :math:`\tilde y_i \sim \pi(y \mid \tilde\theta_i)`
   (ancestral sampling of the PyMC model, observed variable included);
2. fits the model to :math:`\tilde y_i` by NUTS;
3. thins the posterior draws to :math:`L` draws and records, for every scalar hyperparameter,
   the rank :math:`r_i = \#\{l : \theta_l < \tilde\theta_i\} \in \{0, \dots, L\}`
   (:mod:`bayes_gp.validate.ranks`).

If the inference is exact, every parameter's ranks are discrete uniform on
:math:`\{0, \dots, L\}` (Talts et al. 2018, Theorem 1); :mod:`bayes_gp.validate.uniformity` tests
that with a binned :math:`\chi^2` and with the simultaneous ECDF band of Säilynoja et al. (2022).
A histogram or ECDF that sags in the middle (ranks piled at both ends) means posteriors too
narrow; a hump, too wide; a slope, a biased posterior (for instance a wrong prior).

Cost. Each simulation is a NUTS fit. With ``fit="compiled"`` (the default) the fitted model is
built once on the example data, its observed data are replaced by a shared variable
(``pm.observe``) and nutpie compiles it once; every simulation then only swaps the data
(``CompiledPyMCModel.with_data``) and samples. Measured on a 2-core machine shared with other
jobs (exact GP, n = 10, SE kernel, two hyperparameters, 2 chains x (200 + 200) draws): nutpie's
compilation 6-13 s once (numba cache warm or cold), then 0.44 s per simulation (median of 50);
``fit="sample"``, which compiles for every simulation, 3.5 s per simulation; simuk 0.3.0 about
4-5 s per simulation, since it rebuilds the model (``pm.observe``) and calls ``pm.sample`` for each.

Reproducibility. Simulation :math:`i` has its own seed (``result.seeds[i]``, a child of
``random_seed``); the prior draw and the fit derive their seeds from it alone, so
:meth:`SBCResult.rerun` (or :func:`sbc_one` with that seed) repeats simulation :math:`i` by
itself, with the same ranks, whatever ran before it or in which worker process.

A valid SBC needs a prior fixed before seeing the data. :class:`~bayes_gp.GPRegression`'s
*default* priors are scaled to ``y`` and its default mean is :math:`\bar y`, so
``make_model(y)`` is a different model for every simulated data set; :func:`sbc` checks this
(the log densities of the model built on the example data, with the simulated data observed,
and of the model built on the simulated data must agree) and refuses such a specification.

References
----------
Talts, S., Betancourt, M., Simpson, D., Vehtari, A. & Gelman, A. (2018). Validating Bayesian
inference algorithms with simulation-based calibration. arXiv:1804.06788.

Säilynoja, T., Bürkner, P.-C. & Vehtari, A. (2022). Graphical test for discrete uniformity and
its applications in goodness-of-fit evaluation and multiple sample comparison. *Statistics and
Computing* 32, 32.
"""

from __future__ import annotations

import pickle
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from bayes_gp.validate.runner import (
    FITS,
    Simulation,
    _check_seed,
    _derived,
    _error,
    _init_worker,
    _run,
    _Runner,
    _Spec,
    _usable_cores,
    _work,
    simulation_seeds,
)
from bayes_gp.validate.uniformity import chi_square_test, ecdf_test

__all__ = ["SBCResult", "Simulation", "sbc", "sbc_one", "rerun", "simulation_seeds"]


class _Progress:
    def __init__(self, total: int, enabled: bool):
        self.total, self.enabled, self.done, self.failed = total, enabled, 0, 0
        self.t0 = time.perf_counter()

    def update(self, sim: Simulation) -> None:
        self.done += 1
        self.failed += not sim.ok
        if self.enabled:
            rate = (time.perf_counter() - self.t0) / self.done
            end = "\n" if self.done == self.total else ""
            sys.stderr.write(
                f"\rSBC {self.done}/{self.total} simulations, {self.failed} failed, "
                f"{rate:.2f} s each{end}"
            )
            sys.stderr.flush()


# --------------------------------------------------------------------------------- result
@dataclass
class SBCResult:
    """The simulations of :func:`sbc` and the uniformity tests of their ranks.

    Attributes
    ----------
    simulations : tuple of :class:`Simulation`
        One per simulation, in order (failed ones included).
    parameters : tuple of str
        The ranked scalar parameters (``"ls[0]"`` for an element of a vector).
    thin_to : int
        :math:`L`: ranks lie in ``0..L``.
    random_seed : int
        The root seed (drawn when ``random_seed=None``; pass it back to repeat the run).
    seconds : float
        Wall time of the whole run.
    setup_seconds : float
        Of which building and compiling the models (in the calling process).
    """

    simulations: tuple
    parameters: tuple
    thin_to: int
    random_seed: int
    seconds: float
    setup_seconds: float
    settings: dict = field(default_factory=dict)
    _spec: _Spec | None = field(default=None, repr=False, compare=False)
    _runner: _Runner | None = field(default=None, repr=False, compare=False)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_runner"] = None  # compiled functions do not pickle
        return state

    # -- tables
    @property
    def seeds(self) -> list[int]:
        """Each simulation's seed."""
        return [s.seed for s in self.simulations]

    @property
    def n_failed(self) -> int:
        return sum(not s.ok for s in self.simulations)

    @property
    def table(self) -> pd.DataFrame:
        """One row per simulation: ``seed``, ``ok``, ``stage``, ``error``, ``seconds``,
        ``draws``, ``divergences``, ``max_rhat``, ``min_ess``, ``low_ess``,
        ``n_warnings``."""
        rows = [
            {
                "simulation": s.index,
                "seed": s.seed,
                "ok": s.ok,
                "stage": s.stage,
                "error": s.error,
                "seconds": s.seconds,
                "draws": s.draws,
                "divergences": s.divergences,
                "max_rhat": s.max_rhat,
                "min_ess": s.min_ess,
                "low_ess": s.low_ess,
                "n_warnings": len(s.warnings),
            }
            for s in self.simulations
        ]
        return pd.DataFrame(rows).set_index("simulation")

    @property
    def failed(self) -> pd.DataFrame:
        """The failed simulations: seed, stage and message."""
        t = self.table
        return t.loc[~t["ok"], ["seed", "stage", "error"]]

    @property
    def suspicious(self) -> pd.DataFrame:
        """Successful simulations with divergences, :math:`\\hat R > 1.01` or ``low_ess``:
        candidates for :meth:`rerun`."""
        t = self.table
        bad = t["ok"] & ((t["divergences"] > 0) | (t["max_rhat"] > 1.01) | t["low_ess"])
        return t.loc[bad]

    @property
    def ranks(self) -> pd.DataFrame:
        """Ranks (``0..L``) of the successful simulations, one column per parameter."""
        rows = {s.index: s.ranks for s in self.simulations if s.ok}
        df = pd.DataFrame.from_dict(rows, orient="index", columns=list(self.parameters))
        df.index.name = "simulation"
        return df.astype(int)

    @property
    def truths(self) -> pd.DataFrame:
        """The prior draws of every simulation whose prior draw succeeded."""
        rows = {s.index: s.truth for s in self.simulations if s.truth}
        df = pd.DataFrame.from_dict(rows, orient="index", columns=list(self.parameters))
        df.index.name = "simulation"
        return df

    # -- tests
    def ecdf_tests(self, alpha: float = 0.05) -> dict:
        """Parameter → :class:`~bayes_gp.validate.uniformity.EcdfTest` (ECDF, simultaneous
        :math:`1 - \\alpha` band, p-value)."""
        ranks = self.ranks
        if ranks.empty:
            raise ValueError("no simulation succeeded: there are no ranks to test")
        return {p: ecdf_test(ranks[p].to_numpy(), self.thin_to, alpha) for p in self.parameters}

    def uniformity(self, alpha: float = 0.05, n_bins: int | None = None) -> pd.DataFrame:
        """Per parameter: ``n`` ranks, the binned :math:`\\chi^2` (``chi2``, ``chi2_df``,
        ``chi2_p``), the ECDF test (``ecdf_stat`` :math:`T`, ``ecdf_p``, ``inside_band`` of the
        simultaneous :math:`1-\\alpha` band, its pointwise level ``band_gamma``) and
        ``mean_fraction``, the mean of :math:`(r + 1/2)/(L + 1)`: 0.5 when calibrated, above
        it when the posteriors sit below the true values."""
        ranks = self.ranks
        rows = []
        for p, et in self.ecdf_tests(alpha).items():
            r = ranks[p].to_numpy()
            chi = chi_square_test(r, self.thin_to, n_bins)
            rows.append(
                {
                    "parameter": p,
                    "n": r.size,
                    "chi2": chi.statistic,
                    "chi2_df": chi.df,
                    "chi2_p": chi.pvalue,
                    "ecdf_stat": et.statistic,
                    "ecdf_p": et.pvalue,
                    "inside_band": et.inside,
                    "band_gamma": et.band.gamma,
                    "mean_fraction": float(np.mean((r + 0.5) / (self.thin_to + 1))),
                }
            )
        return pd.DataFrame(rows).set_index("parameter")

    def passed(
        self,
        alpha: float = 0.05,
        *,
        test: str = "ecdf",
        correction: str = "bonferroni",
        max_failed: int = 0,
    ) -> bool:
        """Whether the ranks look uniform for every parameter.

        Parameters
        ----------
        alpha : float
            Level of the whole check.
        test : {"ecdf", "chi2", "both"}
            The ECDF-band test (the default: more power against the smooth deviations a wrong
            posterior produces), the binned :math:`\\chi^2`, or both.
        correction : {"bonferroni", "none"}
            ``"bonferroni"``: each of the :math:`P` parameters (and each test, for ``"both"``)
            is tested at :math:`\\alpha / m`, so a calibrated model passes with probability at
            least :math:`1 - \\alpha`.
        max_failed : int
            More failed simulations than this fail the check: ranks of the successful ones
            alone can look uniform while the failures sit in one region of the prior.
        """
        if test not in ("ecdf", "chi2", "both"):
            raise ValueError(f"`test` must be 'ecdf', 'chi2' or 'both', got {test!r}")
        if correction not in ("bonferroni", "none"):
            raise ValueError(f"`correction` must be 'bonferroni' or 'none', got {correction!r}")
        if self.n_failed > max_failed or self.n_failed == len(self.simulations):
            return False
        u = self.uniformity(alpha)
        cols = {"ecdf": ["ecdf_p"], "chi2": ["chi2_p"], "both": ["ecdf_p", "chi2_p"]}[test]
        p = u[cols].to_numpy().ravel()
        level = alpha / p.size if correction == "bonferroni" else alpha
        return bool(np.all(p > level))

    def plot(self, alpha: float = 0.05, *, parameters: Sequence[str] | None = None):
        """ECDF difference :math:`F_N(z) - z` of each parameter's fractional ranks with the
        simultaneous :math:`1 - \\alpha` band (:func:`bayes_gp.validate.plot.plot_ecdf_difference`);
        returns the matplotlib figure."""
        from bayes_gp.validate.plot import plot_ecdf_difference

        tests = self.ecdf_tests(alpha)
        if parameters is not None:
            unknown = [p for p in parameters if p not in tests]
            if unknown:
                raise ValueError(f"unknown parameters {unknown}; ranked: {list(self.parameters)}")
            tests = {p: tests[p] for p in parameters}
        title = (
            f"SBC: {len(self.ranks)} simulations, L = {self.thin_to}, "
            f"{self.n_failed} failed, {100 * (1 - alpha):g}% simultaneous band"
        )
        return plot_ecdf_difference(tests, title=title)

    # -- re-running
    def rerun(self, i: int) -> Simulation:
        """Run simulation ``i`` again by itself (same seed, same settings): the same prior
        draw, fit and ranks, e.g. to inspect a failed or suspicious one."""
        if self._spec is None:
            raise ValueError("this result does not carry its specification")
        if not 0 <= i < len(self.simulations):
            raise IndexError(f"simulation {i} out of range 0..{len(self.simulations) - 1}")
        if self._runner is None:
            self._runner = _Runner(self._spec, cores=_usable_cores())
        return _run(self._runner, i, self.simulations[i].seed)

    def __repr__(self) -> str:
        return (
            f"SBCResult(simulations={len(self.simulations)}, failed={self.n_failed}, "
            f"parameters={list(self.parameters)}, L={self.thin_to})"
        )


# ------------------------------------------------------------------------------ the API
def _make_spec(
    make_model,
    y,
    simulate_model,
    var_names,
    fit,
    draws,
    tune,
    chains,
    thin_to,
    max_draws,
    sample_kwargs,
) -> _Spec:
    if not callable(make_model):
        raise TypeError("`make_model` must be a callable y -> bayes_gp model")
    if simulate_model is not None and not callable(simulate_model):
        raise TypeError("`simulate_model` must be None or a callable y -> bayes_gp model")
    if not (callable(fit) or fit in FITS):
        raise ValueError(f"`fit` must be one of {FITS} or a callable, got {fit!r}")
    for name, value, least in (("draws", draws, 1), ("tune", tune, 0), ("chains", chains, 1)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise TypeError(f"`{name}` must be a whole number, got {value!r}")
        if value < least:
            raise ValueError(f"`{name}` must be at least {least}, got {value}")
    if isinstance(thin_to, bool) or not isinstance(thin_to, int | np.integer) or thin_to < 1:
        raise ValueError(f"`thin_to` (L) must be a positive whole number, got {thin_to!r}")
    if draws * chains < thin_to:
        raise ValueError(
            f"`draws` x `chains` = {draws * chains} posterior draws cannot be thinned to "
            f"`thin_to` = {thin_to}"
        )
    max_draws = 4 * int(draws) if max_draws is None else int(max_draws)
    if max_draws < draws:
        raise ValueError(f"`max_draws` ({max_draws}) must be at least `draws` ({draws})")
    y = np.asarray(y)
    if y.ndim != 1 or y.size < 1:
        raise ValueError("`y` must be a 1-D array of example data")
    names = None
    if var_names is not None:
        names = (var_names,) if isinstance(var_names, str) else tuple(var_names)
    from bayes_gp.inference.compiled import nutpie_backend_setting

    return _Spec(
        make_model,
        simulate_model,
        np.array(y, copy=True),
        names,
        fit,
        int(draws),
        int(tune),
        int(chains),
        int(thin_to),
        max_draws,
        dict(sample_kwargs or {}),
        # nutpie's backend for fit="compiled" (worker processes take the caller's): JAX when
        # bayes_gp.inference.compiled's setting asks for it, else bayes_gp's C log density
        # where it computes the model (nothing compiled), else numba (also under "auto": one
        # compilation serves every simulation, and numba's gradient is the cheaper one)
        _compiled_backend(make_model, y, fit, nutpie_backend_setting()),
    )


def _compiled_backend(make_model: Callable, y: np.ndarray, fit, setting: str) -> str:
    """``"jax"``, ``"native"`` or ``"numba"``: how ``fit="compiled"`` compiles the model."""
    if setting == "jax":
        return "jax"
    if fit != "compiled":
        return "numba"
    import pymc as pm

    from bayes_gp.inference import native_gp

    model = getattr(make_model(np.array(y, copy=True)), "model", None)
    return "native" if isinstance(model, pm.Model) and native_gp.covers(model) else "numba"


def sbc(
    make_model: Callable,
    y,
    *,
    n_simulations: int,
    simulate_model: Callable | None = None,
    var_names: Sequence[str] | None = None,
    fit: str | Callable = "compiled",
    draws: int = 300,
    tune: int = 300,
    chains: int = 2,
    thin_to: int = 99,
    max_draws: int | None = None,
    sample_kwargs: Mapping[str, Any] | None = None,
    random_seed: int | None = None,
    parallel: bool | int = False,
    progressbar: bool = True,
    check_prior: bool = True,
) -> SBCResult:
    """Simulation-based calibration of a bayes_gp model specification (module docstring).

    Parameters
    ----------
    make_model : callable
        ``make_model(y)`` returns a bayes_gp model (``GPRegression(X, y, ...)``,
        ``GPClassifier``, ...) of data ``y``: its ``model`` attribute is a PyMC model with one
        observed variable. Its priors must not depend on ``y`` (checked; see ``check_prior``).
        For ``parallel`` runs it must be picklable (a module-level function or a
        ``functools.partial`` of one).
    y : array_like
        Example data (e.g. the real data): the simulated data sets have its shape.
    n_simulations : int
        :math:`N`. The power to see a miscalibration grows with :math:`N`; 50–100 finds gross
        errors (a wrong prior), subtle ones need hundreds.
    simulate_model : callable, optional
        Draw the true values and data from ``simulate_model(y)`` instead of ``make_model(y)``
        (same parameter names). Only for checking SBC itself: with a prior that differs from
        the fitted one, the ranks are not uniform.
    var_names : sequence of str, optional
        Parameters to rank; by default the model's ``hyperparameters`` (every free random
        variable of a GPRegression). Vector parameters are ranked element by element.
    fit : {"compiled", "sample"} or callable
        ``"compiled"``: nutpie's compiled model of ``make_model(y)``, compiled once, with each
        simulated data set swapped in (fast; the sampler is nutpie with
        ``target_accept=0.9`` as in ``GPRegression.sample``, on bayes_gp's C log density
        where :mod:`bayes_gp.inference.native_gp` computes the model (nothing compiled),
        else compiled by numba, or by JAX under
        ``bayes_gp.inference.compiled.nutpie_backend("jax")``; recorded in
        ``settings["nutpie_backend"]``: ``"native"``, ``"numba"`` or ``"jax"``; they round
        differently, so long runs may differ).
        ``"sample"``: ``make_model(y_sim).sample(draws=, tune=, chains=, random_seed=, **sample_kwargs)``
        for each simulation (compiles every time, uses the model's own sampler choice and
        jitter check). A callable ``fit(model, *, draws, tune, chains, random_seed,
        **sample_kwargs)`` returning ArviZ data with a ``posterior`` group.
    draws, tune, chains : int
        NUTS settings of each fit.
    thin_to : int
        :math:`L`: the posterior draws are thinned to :math:`L` equally spaced draws and ranks
        lie in ``0..L``. When a fit's effective sample size (the smallest bulk or tail ESS of
        the ranked parameters) is below :math:`L` it is repeated with more draws, as Talts et
        al. recommend (thin to about the ESS); if it stays below at ``max_draws``, the
        simulation is flagged ``low_ess``.
    max_draws : int, optional
        Most draws per chain when a fit is repeated for a low effective sample size (default
        ``4 * draws``).
    sample_kwargs : dict, optional
        Extra options of the sampler (``nutpie.sample``, ``model.sample`` or ``fit``).
    random_seed : int, optional
        Root of the simulations' seeds (:func:`simulation_seeds`); drawn when ``None`` and
        recorded in the result.
    parallel : bool or int
        ``False`` (default): one simulation after another in this process. An int ``k > 1``
        (``True``: the usable CPU cores): ``k`` worker processes (``concurrent.futures``,
        spawned), each compiling its own model once and running its chains one after
        another. The results are identical to a sequential run.
    progressbar : bool
        A one-line progress report on stderr.
    check_prior : bool
        Check first that ``make_model`` builds the same model, except for the observed data,
        on ``y`` and on a simulated data set (see the module docstring), and raise
        ``ValueError`` if not.

    Returns
    -------
    SBCResult
        ``.ranks``, ``.table`` (per-simulation seed, diagnostics, errors), ``.uniformity()``,
        ``.passed()``, ``.plot()``, ``.rerun(i)``.

    Notes
    -----
    A fit that raises does not stop the run: the simulation is recorded as failed with its
    message (``result.failed``) and left out of the ranks; by default
    :meth:`SBCResult.passed` counts any failure as a failed check.
    """
    if isinstance(n_simulations, bool) or not isinstance(n_simulations, int | np.integer):
        raise TypeError(f"`n_simulations` must be a whole number, got {n_simulations!r}")
    if n_simulations < 1:
        raise ValueError(f"`n_simulations` must be at least 1, got {n_simulations}")
    spec = _make_spec(
        make_model, y, simulate_model, var_names, fit, draws, tune, chains, thin_to, max_draws,
        sample_kwargs,
    )  # fmt: skip
    n_workers = _usable_cores() if parallel is True else int(parallel or 1)
    if n_workers < 1:
        raise ValueError(f"`parallel` must be False, True or a positive int, got {parallel!r}")
    root = _check_seed(random_seed)
    seeds = simulation_seeds(root, n_simulations)
    t0 = time.perf_counter()
    runner = _Runner(spec, cores=_usable_cores() if n_workers == 1 else 1)
    runner.names()  # a specification error surfaces here, not once per simulation
    if spec.fit == "compiled":
        runner.check_swappable()
    runner._simulator()
    if check_prior:
        for s in seeds[:5]:  # the first simulated data set that can be drawn
            try:
                _, y0 = runner.simulate(_derived(s)[0])
            except Exception:  # a failing prior draw is recorded by its simulation
                continue
            runner.check_prior(y0)
            break
    progress = _Progress(n_simulations, progressbar)
    sims: list[Simulation | None] = [None] * n_simulations
    if n_workers == 1:
        for i, s in enumerate(seeds):
            sims[i] = _run(runner, i, s)
            progress.update(sims[i])
    else:
        sims = _run_parallel(spec, seeds, n_workers, progress)
    first = next((s for s in sims if s is not None and s.ok), None)
    if first is not None:
        parameters = tuple(first.ranks)
    else:
        with_truth = next((s for s in sims if s is not None and s.truth), None)
        parameters = tuple(with_truth.truth) if with_truth is not None else tuple(runner.names())
    settings = {
        "n_simulations": int(n_simulations),
        "fit": fit if isinstance(fit, str) else getattr(fit, "__name__", "callable"),
        "draws": spec.draws,
        "tune": spec.tune,
        "chains": spec.chains,
        "thin_to": spec.thin_to,
        "max_draws": spec.max_draws,
        "n_workers": n_workers,
        "nutpie_backend": spec.nutpie_backend if spec.fit == "compiled" else None,
    }
    return SBCResult(
        tuple(sims),
        parameters,
        spec.thin_to,
        root,
        time.perf_counter() - t0,
        runner.setup_seconds,
        settings,
        spec,
        runner,
    )


def _run_parallel(spec: _Spec, seeds: list[int], n_workers: int, progress: _Progress) -> list:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    try:
        pickle.dumps(spec)
    except Exception as exc:
        raise TypeError(
            "parallel SBC sends `make_model` (and `simulate_model`, `fit`) to worker "
            "processes, so they must be picklable: define them at module level (or use "
            f"functools.partial); pickling failed with {_error(exc)}"
        ) from None
    sims: list[Simulation | None] = [None] * len(seeds)
    ctx = multiprocessing.get_context("spawn")  # no fork of a process running sampler threads
    with ProcessPoolExecutor(
        max_workers=n_workers, mp_context=ctx, initializer=_init_worker, initargs=(spec,)
    ) as pool:
        futures = {pool.submit(_work, i, s): i for i, s in enumerate(seeds)}
        for fut in as_completed(futures):
            i = futures[fut]
            try:
                sims[i] = fut.result()
            except Exception as exc:  # the worker died (memory, segfault)
                sims[i] = Simulation(i, seeds[i], {}, None, _error(exc), "worker")
            progress.update(sims[i])
    return sims


def sbc_one(
    make_model: Callable,
    y,
    *,
    seed: int,
    index: int = 0,
    simulate_model: Callable | None = None,
    var_names: Sequence[str] | None = None,
    fit: str | Callable = "compiled",
    draws: int = 300,
    tune: int = 300,
    chains: int = 2,
    thin_to: int = 99,
    max_draws: int | None = None,
    sample_kwargs: Mapping[str, Any] | None = None,
) -> Simulation:
    """One SBC simulation with its own ``seed`` (``result.seeds[i]``) and the options of
    :func:`sbc`: with the same options it repeats simulation ``i`` of that run exactly."""
    spec = _make_spec(
        make_model, y, simulate_model, var_names, fit, draws, tune, chains, thin_to, max_draws,
        sample_kwargs,
    )  # fmt: skip
    return _run(_Runner(spec, cores=_usable_cores()), int(index), int(seed))


def rerun(result: SBCResult, i: int) -> Simulation:
    """Simulation ``i`` of ``result`` run again by itself (:meth:`SBCResult.rerun`)."""
    return result.rerun(i)
