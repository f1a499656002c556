r"""Many independent GP fits in parallel on Dask: one per group, series or site.

A common workload fits the same GP model separately to each of :math:`K` groups (sites, subjects,
series). Without pooling, the joint posterior factorises over the groups,

.. math::
   p(\theta_1, \dots, \theta_K \mid y) = \prod_{g=1}^{K} p(\theta_g \mid y_g),
   \qquad p(\theta_g \mid y_g) \propto N(y_g \mid m_g, K_{\theta_g} + \sigma_g^2 I)\, p(\theta_g),

(PRML eq. 6.61 for each factor), so the :math:`K` fits are independent tasks.
:func:`fit_many` runs each as one task on a ``dask.distributed`` cluster (a local cluster of
processes by default), building a :class:`~bayes_gp.GPRegression` in the worker and running NUTS
(``.sample``) or a type-II fit (``.fit_map``), and gathers the results: NUTS draws into one ArviZ
``DataTree`` with a ``group`` dimension, MAP estimates into one table with a row per group.

Reproducibility: group :math:`g`'s seed is derived from ``random_seed`` and the group's *label*
(``numpy.random.SeedSequence`` with the label's hash as spawn key), not from its position or from
which worker ran it, so a group's result is the same whatever the scheduling, the order of the
groups or the other groups in the call, and equals a direct fit
``GPRegression(X_g, y_g, ...).sample(random_seed=result.seeds[g])``.

Each task pins BLAS to one thread (the worker processes already are the parallelism). Worker
processes of a ``LocalCluster`` are daemonic and cannot start processes of their own, so PyMC's
sampler runs its chains one after another there (``cores=1``); nutpie runs its chains on threads
and numpyro sequentially on one CPU device, both of which work in a worker.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import time
import traceback
import uuid
import warnings
from collections.abc import Callable, Hashable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from threadpoolctl import threadpool_limits

from bayes_gp.inference.methods import canonical_method
from bayes_gp.many_processes import ChildDied, check_workers, in_child, shutdown
from bayes_gp.many_store import (
    DETAILS,
    ManyStore,
    StoredFits,
    StoredGroup,
    data_digest,
    label_bytes,
)
from bayes_gp.protocol import GPModel
from bayes_gp.regression import GPRegression

__all__ = ["ManyFit", "FitManyError", "RECYCLE_AFTER", "fit_many", "group_seed"]

#: Fits per child process of ``recycle_after="auto"``: NUTS, and type-II fits
#: (:mod:`bayes_gp.many_processes`; measured growth 8 and 0.27 MiB per fit).
RECYCLE_AFTER = {"nuts": 50, "map": 500}
#: Posterior groups of the per-group NUTS fits that are gathered along ``group``.
GATHERED = ("posterior", "sample_stats", "log_likelihood", "observed_data")


class FitManyError(RuntimeError):
    """Raised by ``fit_many(..., errors="raise")`` after all groups ran, when some failed.

    ``.result`` holds the :class:`ManyFit` with the groups that succeeded.
    """

    def __init__(self, message: str, result: ManyFit):
        super().__init__(message)
        self.result = result


# ----------------------------------------------------------------------------------- seeds
def _root_sequence(random_seed: int | None) -> np.random.SeedSequence:
    if random_seed is not None and not (
        isinstance(random_seed, int | np.integer) and not isinstance(random_seed, bool)
    ):
        raise TypeError(f"`random_seed` must be an int or None, got {random_seed!r}")
    if random_seed is not None and random_seed < 0:
        raise ValueError(f"`random_seed` must be non-negative, got {random_seed}")
    return np.random.SeedSequence(None if random_seed is None else int(random_seed))


def group_seed(random_seed: int | np.random.SeedSequence | None, label: Hashable) -> int:
    """The seed of group ``label``'s fit under ``random_seed`` (an int in ``[0, 2**32)``).

    A child of ``SeedSequence(random_seed)`` whose spawn key is the BLAKE2b hash of the label, so
    it depends only on ``random_seed`` and the label (seeds of distinct labels are independent
    streams, as for ``SeedSequence.spawn``).
    """
    root = random_seed
    if not isinstance(root, np.random.SeedSequence):
        root = _root_sequence(root)
    digest = hashlib.blake2b(label_bytes(label), digest_size=16).digest()
    words = tuple(int(w) for w in np.frombuffer(digest, dtype=np.uint32))
    child = np.random.SeedSequence(root.entropy, spawn_key=(*root.spawn_key, *words))
    return int(child.generate_state(1, dtype=np.uint32)[0])


# ------------------------------------------------------------------------------- the tasks
@dataclass(frozen=True)
class _Task:
    label: Hashable
    X: Any
    y: np.ndarray
    kernel: str | Callable
    model_kwargs: dict
    method: str
    fit_kwargs: dict
    seed: int
    model: type = GPRegression
    #: Whether the result goes to an output store: then the worker returns it ready to write
    #: (a type-II fit as its point dataset, built with the group's model) instead of the fit.
    to_store: bool = False
    #: Fit in a child process of the worker that is replaced after this many fits
    #: (:mod:`bayes_gp.many_processes`); ``None``: in the worker itself.
    recycle_after: int | None = None


@dataclass(frozen=True)
class _Outcome:
    label: Hashable
    fit: Any  # DataTree (NUTS) or MapFit; with a store, what is written; None on failure
    error: str | None
    seconds: float
    worker: str
    feature_names: tuple = ()
    warnings: tuple = ()
    #: The fit's columns of the summary table (hyperparameters or NUTS diagnostics).
    row: dict = field(default_factory=dict)
    #: Read from the output store (finished by an earlier run), not fitted by this one.
    resumed: bool = False


def _fit_group(task: _Task) -> _Outcome:
    """Build and fit one group's model (runs in a worker): in the worker's recycled child
    process when ``task.recycle_after`` says so, else in the worker."""
    if not task.recycle_after:
        return _fit_here(task)
    t0 = time.perf_counter()
    try:
        return in_child(_fit_here, task, task.recycle_after)
    except ChildDied as exc:
        return _Outcome(
            task.label, None, f"ChildDied: {exc}", time.perf_counter() - t0, f"pid {os.getpid()}"
        )


def _fit_here(task: _Task) -> _Outcome:
    """Build and fit one group's model in this process."""
    t0 = time.perf_counter()
    worker = f"pid {os.getpid()}"
    caught: list = []
    try:
        with (
            threadpool_limits(limits=1, user_api="blas"),
            warnings.catch_warnings(record=True) as caught,
        ):
            warnings.simplefilter("always")
            gp = task.model(_own(task.X), _own(task.y), kernel=task.kernel, **task.model_kwargs)
            fit = gp.fit(task.method, random_seed=task.seed, **task.fit_kwargs)
            sampling = task.method in task.model.sampling_methods
            features = tuple(gp.feature_names)
            row = _fit_columns(fit, sampling, features)
            if task.to_store and not sampling:
                fit = _point_payload(fit, gp, task.method, features)
    except Exception as exc:
        last = traceback.extract_tb(exc.__traceback__)[-1]
        where = f" (at {os.path.basename(last.filename)}:{last.lineno})"
        return _Outcome(
            task.label,
            None,
            f"{type(exc).__name__}: {exc}{where}",
            time.perf_counter() - t0,
            worker,
            warnings=_messages(caught),
        )
    return _Outcome(
        task.label, fit, None, time.perf_counter() - t0, worker, features, _messages(caught), row
    )


def _fit_columns(fit, sampling: bool, features: tuple) -> dict:
    """A fit's columns of :attr:`ManyFit.table`."""
    if sampling:
        return _nuts_diagnostics(fit)
    return {
        **_scalar_columns(fit.params, features),
        "objective": fit.objective,
        "log_marginal_likelihood": fit.log_marginal_likelihood,
        "converged": getattr(fit, "converged", None),
        "grad_norm": fit.grad_norm,
    }


def _point_payload(fit, gp, method: str, features: tuple):
    """A type-II fit as the output store keeps it: its point dataset, with the optimiser's
    record (restarts, convergence) as an attribute."""
    from bayes_gp.workflow.store import fit_details, point_dataset

    ds = point_dataset(fit, gp, method, features)
    ds.attrs[DETAILS] = json.dumps(fit_details(fit))
    return ds


def _own(a):
    """A fresh, aligned copy: arrays deserialised by Dask can sit at unaligned offsets of a
    message buffer, which PyTensor's C and numba code reject."""
    if isinstance(a, pd.DataFrame | pd.Series):
        return a.copy(deep=True)
    return np.array(a, copy=True)


def _messages(caught) -> tuple:
    seen: dict[str, None] = {}
    for w in caught or ():
        seen.setdefault(f"{w.category.__name__}: {w.message}", None)
    return tuple(seen)


# --------------------------------------------------------------------------------- result
@dataclass(frozen=True)
class ManyFit:
    """The fits of :func:`fit_many`, one per group.

    Attributes
    ----------
    method : str
        ``"nuts"`` or another of the model's ``fit_methods`` (``"map"``, ``"ep"``, …).
    groups : tuple
        Every group label, in input order (failed groups included).
    fits : dict
        Label → the group's own result: an ArviZ ``DataTree`` (NUTS; unpadded, ready for
        ``az.loo``) or a :class:`~bayes_gp.inference.MapFit`. Successful groups only.
    errors : dict
        Label → error message, for the groups whose fit failed.
    seeds : dict
        Label → the seed the group's fit used (see :func:`group_seed`).
    idata : DataTree or None
        NUTS: the successful groups' ``posterior``, ``sample_stats``, ``log_likelihood`` and
        ``observed_data`` concatenated along a new ``group`` dimension. Groups with fewer
        observations than the largest are padded with NaN along ``obs``; the ``n_obs``
        coordinate (along ``group``) says how many entries are real. ``None`` for MAP.
    table : pandas.DataFrame
        One row per group (index ``group``, failed groups included): ``n_obs``, ``seed``,
        ``seconds`` (wall time of the task in the worker, model build and compilation included),
        ``worker``, ``error`` and ``n_warnings``; for MAP the hyperparameters (ARD vectors as
        ``ls[feature]``), ``objective``, ``log_marginal_likelihood``, ``converged`` and
        ``grad_norm``; for NUTS ``sampling_seconds``, ``divergences``, ``max_rhat`` and
        ``min_ess_bulk``.
    warnings : dict
        Label → the distinct warnings raised while fitting that group.
    random_seed : int
        The root entropy of the seeds (drawn fresh when ``random_seed=None``; pass it back to
        reproduce the run).
    store : Path or None
        The output store the results were written to (``fit_many(..., store=)``); then
        ``fits`` reads each group's fit from it when asked for, and ``table`` has a column
        ``resumed`` (read from the store, finished by an earlier run).
    """

    method: str
    groups: tuple
    fits: dict
    errors: dict
    seeds: dict
    idata: Any
    table: pd.DataFrame
    warnings: dict = field(default_factory=dict)
    random_seed: int | None = None
    data: dict = field(default_factory=dict, repr=False)
    kernel: Any = "expquad"
    model_kwargs: dict = field(default_factory=dict, repr=False)
    model_class: type = GPRegression
    store: Path | None = None

    @property
    def ok(self) -> tuple:
        """Labels of the groups whose fit succeeded, in input order."""
        return tuple(g for g in self.groups if g in self.fits)

    def model(self, label: Hashable):
        """Rebuild group ``label``'s model here (for ``.predict``)."""
        if label not in self.data:
            raise KeyError(f"no group {label!r}; groups are {list(self.groups)}")
        X, y = self.data[label]
        return self.model_class(X, y, kernel=self.kernel, **self.model_kwargs)

    def __repr__(self) -> str:
        return (
            f"ManyFit(method={self.method!r}, groups={len(self.groups)}, ok={len(self.fits)}, "
            f"failed={len(self.errors)})"
        )


# ------------------------------------------------------------------------------ the input
def _split(data, x, y, group) -> dict:
    """Label → (X, y) from a DataFrame with a group column, or from a mapping."""
    if isinstance(data, pd.DataFrame):
        if y is None or group is None or x is None:
            raise ValueError("with a DataFrame, give the column names `x=`, `y=` and `group=`")
        if not isinstance(group, str):
            raise TypeError(f"`group` must be one column name, got {group!r}")
        xs = [x] if isinstance(x, str) else list(x)
        if not xs:
            raise ValueError("`x` names no column")
        missing = [c for c in [*xs, y, group] if c not in data.columns]
        if missing:
            raise ValueError(
                f"columns {missing} are not in the data; its columns are {list(data.columns)}"
            )
        if data[group].isna().any():
            n = int(data[group].isna().sum())
            raise ValueError(f"the group column {group!r} has {n} missing value(s)")
        out = {}
        for label, d in data.groupby(group, sort=False):
            out[label] = (d[xs], d[y].to_numpy())
        return out
    if isinstance(data, Mapping):
        if x is not None or y is not None or group is not None:
            raise ValueError("`x=`, `y=` and `group=` name DataFrame columns; a mapping gives them")
        out = {}
        for label, value in data.items():
            if not (isinstance(value, tuple | list) and len(value) == 2):
                raise TypeError(f"`data[{label!r}]` must be a pair (X, y), got {type(value)}")
            Xg, yg = value
            out[label] = (Xg, yg.to_numpy() if hasattr(yg, "to_numpy") else np.asarray(yg))
        return out
    raise TypeError(
        "`data` must be a pandas DataFrame with a group column or a mapping group -> (X, y), "
        f"got {type(data).__name__}"
    )


def _check_sizes(groups: dict) -> None:
    small = {}
    for label, (X, yv) in groups.items():
        n_x, n_y = len(X), int(np.size(yv))
        if n_x != n_y:
            raise ValueError(f"group {label!r}: X has {n_x} rows but y has {n_y} values")
        if n_y < 2:
            small[label] = n_y
    if small:
        raise ValueError(
            f"GP regression needs at least 2 observations per group; groups {small} "
            "(label: count) have fewer. Drop them first."
        )


# ------------------------------------------------------------------------------- the client
def _default_workers(n_tasks: int) -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, n_tasks))


def _n_workers(n_workers: int | None, n_tasks: int) -> int:
    n = _default_workers(n_tasks) if n_workers is None else int(n_workers)
    if n < 1:
        raise ValueError(f"`n_workers` must be at least 1, got {n_workers}")
    return n


def _recycle_after(recycle_after, client, n_workers: int | None, n_tasks: int, sampling: bool):
    """Fits per child process (:mod:`bayes_gp.many_processes`), or ``None`` for fits in the
    workers themselves."""
    if recycle_after is None:
        return None
    if isinstance(recycle_after, str):
        if recycle_after != "auto":
            raise ValueError(f"`recycle_after` must be 'auto', None or an int, got {recycle_after!r}")
        if client is not None:
            return None
        limit = RECYCLE_AFTER["nuts" if sampling else "map"]
        per_worker = -(-n_tasks // _n_workers(n_workers, n_tasks))
        return limit if per_worker > limit else None
    if isinstance(recycle_after, bool) or not isinstance(recycle_after, int | np.integer):
        raise TypeError(f"`recycle_after` must be 'auto', None or an int, got {recycle_after!r}")
    if recycle_after < 1:
        raise ValueError(f"`recycle_after` must be at least 1, got {recycle_after}")
    return int(recycle_after)


@contextmanager
def _client(client, n_workers: int | None, n_tasks: int, daemon: bool = True):
    """The user's client (left open), or a LocalCluster of processes closed afterwards
    (``daemon=False``: worker processes that may start child processes)."""
    if client is not None:
        yield client
        return
    import dask
    from dask.distributed import Client, LocalCluster

    n = _n_workers(n_workers, n_tasks)
    # Processes, one thread each: GP fits hold the GIL in PyTensor/Python between LAPACK calls,
    # and distributed starts workers with OMP/MKL/OPENBLAS_NUM_THREADS=1.
    with (
        dask.config.set({"distributed.worker.daemon": daemon}),
        LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,  # shutdown chatter; task errors are collected
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


# ------------------------------------------------------------------------------ gathering
def _scalar_columns(params: dict, features: tuple) -> dict:
    out = {}
    for name, value in params.items():
        v = np.asarray(value, dtype=float)
        if v.ndim == 0:
            out[name] = float(v)
        else:
            labels = features if len(features) == v.size else range(v.size)
            for f, vi in zip(labels, v.ravel(), strict=True):
                out[f"{name}[{f}]"] = float(vi)
    return out


def _nuts_diagnostics(idata) -> dict:
    import arviz as az

    post = idata["posterior"]
    stats = idata["sample_stats"].to_dataset()
    rhat = az.rhat(post).to_dataset()
    ess = az.ess(post, method="bulk").to_dataset()
    div = stats["diverging"] if "diverging" in stats else None
    return {
        "sampling_seconds": float(post.attrs.get("sampling_time", np.nan)),
        "divergences": int(div.sum()) if div is not None else -1,
        "max_rhat": float(max(float(v.max()) for v in rhat.data_vars.values())),
        "min_ess_bulk": float(min(float(v.min()) for v in ess.data_vars.values())),
    }


def _gather_idata(fits: dict, labels: list, n_obs: dict, method: str):
    if not labels:
        return None
    trees = [fits[g] for g in labels]
    names = [n for n in GATHERED if all(n in t.children for t in trees)]
    plain = [g.item() if isinstance(g, np.generic) else g for g in labels]
    mixed = len({type(g) for g in plain}) > 1
    values = np.array(plain, dtype=object) if mixed else np.asarray(plain)
    index = xr.DataArray(values, dims="group", name="group")
    out = {}
    for name in names:
        ds = xr.concat(
            [t[name].to_dataset() for t in trees],
            dim=index,
            join="outer",
            combine_attrs="drop_conflicts",
            coords="minimal",
            compat="override",
        )
        if "obs" in ds.dims:
            ds = ds.assign_coords(n_obs=("group", [n_obs[g] for g in labels]))
        out[name] = ds
    tree = xr.DataTree.from_dict(out)
    tree.attrs["bayes_gp_method"] = method
    return tree


# ------------------------------------------------------------------------------ fit_many
def fit_many(
    data,
    *,
    x: str | list[str] | None = None,
    y: str | None = None,
    group: str | None = None,
    kernel: str | Callable = "expquad",
    method: str = "nuts",
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 2,
    sampler: str = "auto",
    random_seed: int | None = None,
    client=None,
    n_workers: int | None = None,
    model_kwargs: Mapping[str, Any] | None = None,
    fit_kwargs: Mapping[str, Any] | None = None,
    errors: str = "collect",
    model: type = GPRegression,
    store: str | os.PathLike | None = None,
    retry_failed: bool = False,
    recycle_after: int | str | None = "auto",
) -> ManyFit:
    """Fit one GP regression per group, in parallel on Dask, and gather the results.

    Parameters
    ----------
    data : pandas.DataFrame or mapping
        A long table with a group column (then ``x``, ``y`` and ``group`` name the columns), or
        a mapping ``label -> (X, y)``.
    x : str or list of str
        Input column(s) (DataFrame input).
    y : str
        Response column (DataFrame input).
    group : str
        Group column (DataFrame input). Groups keep their order of first appearance.
    kernel : str or callable
        As for :class:`~bayes_gp.GPRegression` (a callable must be picklable, e.g. defined at
        module level, since it travels to the workers).
    method : str
        One of ``model.fit_methods`` (:mod:`bayes_gp.inference.methods`): for ``GPRegression``
        ``"nuts"`` (:meth:`GPRegression.sample`) or ``"map"`` (:meth:`GPRegression.fit_map`);
        for ``GPClassifier`` also ``"ep"`` and ``"nuts_joint"``. The previous release's names
        (``model.renamed_methods``) still work, with a ``FutureWarning``.
    draws, tune, chains, sampler
        NUTS settings (ignored for MAP). Inside a worker PyMC's own sampler runs the chains one
        after another; ``sampler="numpyro"`` runs on a GPU when JAX sees one (see README).
    random_seed : int, optional
        Root of the per-group seeds (:func:`group_seed`): each group's result depends only on it
        and the group's label.
    client : dask.distributed.Client, optional
        Run on this client's cluster (not closed afterwards). By default a
        ``LocalCluster(n_workers, threads_per_worker=1, processes=True)`` is started and closed.
        In a script, call ``fit_many`` under ``if __name__ == "__main__":`` (worker processes are
        spawned and import the main module).
    n_workers : int, optional
        Workers of the default local cluster (default: the usable CPU cores, at most one per
        group).
    model_kwargs : dict, optional
        Passed to every group's ``GPRegression`` (``ard``, ``mean``, ``priors``, ``noise``, ...).
    fit_kwargs : dict, optional
        Passed to ``.sample`` (e.g. ``target_accept``, ``nuts={...}``, ``quiet``) or to
        ``.fit_map`` (``n_restarts``, ``prior``, ``maxiter``).
    model : type
        The model family fitted to every group: a class implementing the model protocol
        (:class:`bayes_gp.protocol.GPModel`), called as ``model(X_g, y_g, kernel=kernel,
        **model_kwargs)`` and fitted by its ``fit(method, ...)``; ``GPRegression`` by default.
        ``method`` is one of its ``fit_methods``.
    errors : {"collect", "raise"}
        A failing group never stops the others. ``"collect"``: its message goes to
        ``result.errors`` and the ``error`` column of ``result.table``; ``"raise"``: after all
        groups ran, raise :class:`FitManyError` (its ``.result`` holds the successes).
    store : path, optional
        An output store (a directory; :mod:`bayes_gp.many_store`): each group's result is
        written to it atomically as soon as it arrives (NUTS: the DataTree as netCDF; a type-II
        fit: its point estimate), and only the group's row of the table stays in memory. A
        rerun with the same arguments and store resumes: groups finished by an earlier run
        (one that was interrupted, or whose client was killed) are read back, not refitted, and
        equal what an uninterrupted run gives. With ``random_seed=None`` a rerun takes the
        store's seed. A store of a run with other arguments, or a group whose data changed, is
        refused. One run at a time may use a store.
    retry_failed : bool
        With a store: fit again the groups whose fit failed in an earlier run (default: their
        recorded error is returned, so that a group that fails for its own reasons is not
        retried on every rerun).

    recycle_after : int, "auto" or None
        Fit the groups in a child process of each worker that is replaced after this many fits
        (:mod:`bayes_gp.many_processes`): numba never frees the machine code of the models a
        process compiles, so a worker that fits thousands of groups in itself grows by about
        8 MiB per NUTS fit and 0.3 MiB per MAP fit. ``"auto"`` (default): with fit_many's own
        local cluster, when a worker would otherwise fit more than :data:`RECYCLE_AFTER` groups
        (50 NUTS or 500 type-II fits; each worker's memory then stays at what that many fits
        take); with the user's ``client``, never. An int with a ``client`` needs workers that
        may start processes (Dask setting ``distributed.worker.daemon: False``). A child killed
        mid-fit is replaced and the fit run once more. ``None``: fits in the workers.

    Returns
    -------
    ManyFit
        ``.idata`` (NUTS: one DataTree indexed by ``group``), ``.table`` (one row per group),
        ``.fits``, ``.errors``, ``.seeds``.

    Raises
    ------
    ValueError, TypeError
        Before any fit, for a missing column, a group with fewer than 2 observations, bad
        settings, or a store that holds another run.

    Notes
    -----
    A worker that dies in the middle of a task (killed, out of memory) loses only that task:
    Dask's scheduler runs it again on another worker (up to ``distributed.scheduler.
    allowed-failures`` times, then the group is recorded as failed with ``KilledWorker``). A
    group whose fit raises is recorded with its error and not retried.
    """
    if not (isinstance(model, type) and issubclass(model, GPModel)):
        raise TypeError(
            "`model` must be a model class implementing bayes_gp.protocol.GPModel (such as "
            f"GPRegression or GPClassifier), got {model!r}"
        )
    method = canonical_method("fit_many", method, model.renamed_methods)
    if method not in model.fit_methods:
        raise ValueError(f"`method` must be one of {model.fit_methods}, got {method!r}")
    if errors not in ("collect", "raise"):
        raise ValueError(f"`errors` must be 'collect' or 'raise', got {errors!r}")
    groups = _split(data, x, y, group)
    if not groups:
        raise ValueError("`data` has no groups")
    _check_sizes(groups)
    model_kwargs = dict(model_kwargs or {})
    fit_kwargs = dict(fit_kwargs or {})
    sampling = method in model.sampling_methods
    if sampling:
        from bayes_gp.inference.nuts import resolve_sampler

        for k in ("draws", "tune", "chains", "sampler", "random_seed"):
            if k in fit_kwargs:
                raise ValueError(f"give `{k}` as an argument of fit_many, not in `fit_kwargs`")
        backend = resolve_sampler(sampler)
        if int(fit_kwargs.get("cores", 1)) != 1 and backend == "pymc":
            raise ValueError(
                "`cores` must be 1: Dask worker processes are daemonic and cannot start the "
                "processes PyMC's sampler uses for parallel chains (the workers are the "
                "parallelism)"
            )
        for name, value, least in (("draws", draws, 1), ("tune", tune, 0), ("chains", chains, 1)):
            if isinstance(value, bool) or not isinstance(value, int | np.integer):
                raise TypeError(f"`{name}` must be an integer, got {value!r}")
            if value < least:
                raise ValueError(f"`{name}` must be at least {least}, got {value}")
        fit_kwargs = {
            "draws": int(draws),
            "tune": int(tune),
            "chains": int(chains),
            "sampler": backend,
            "quiet": True,
            **fit_kwargs,
        }
    elif "random_seed" in fit_kwargs:
        raise ValueError("give `random_seed` as an argument of fit_many, not in `fit_kwargs`")

    root = _root_sequence(random_seed)
    out: ManyStore | None = None
    if store is not None:
        arguments = {
            "method": method,
            "model": model,
            "kernel": kernel,
            "model_kwargs": model_kwargs,
            "fit_kwargs": fit_kwargs,
        }
        out = ManyStore.open(store, arguments, int(root.entropy), random_seed is not None)
        root = _root_sequence(out.entropy)
        out.remove_stale()
    labels = list(groups)
    seeds = {g: group_seed(root, g) for g in labels}
    n_obs = {g: int(np.size(groups[g][1])) for g in labels}

    outcomes: dict = {}
    digests: dict = {}
    if out is not None:
        for g in labels:
            digests[g] = data_digest(*groups[g])
            found = out.find(g, digests[g], seeds[g])
            if found is not None and not (found.failed and retry_failed):
                outcomes[g] = _resumed(found)
    todo = [g for g in labels if g not in outcomes]
    recycle = _recycle_after(recycle_after, client, n_workers, len(todo), sampling)
    tasks = [
        _Task(g, *groups[g], kernel, model_kwargs, method, fit_kwargs, seeds[g], model,
              to_store=out is not None, recycle_after=recycle)
        for g in todo
    ]

    if tasks:
        with _client(client, n_workers, len(tasks), daemon=recycle is None) as c:
            from dask.distributed import as_completed

            if recycle is not None and client is not None:
                check_workers(c)

            token = uuid.uuid4().hex[:8]
            futures = {
                c.submit(_fit_group, t, key=f"bayes_gp-fit-{token}-{i}", pure=False): t.label
                for i, t in enumerate(tasks)
            }
            for fut in as_completed(list(futures)):
                g = futures[fut]
                try:
                    o = fut.result()
                except Exception as exc:  # the worker died (memory, segfault): KilledWorker etc.
                    o = _Outcome(g, None, f"{type(exc).__name__}: {exc}", np.nan, "")
                fut.release()
                if out is not None:  # written now; only the row stays in memory
                    o = _write(out, o, seeds[g], n_obs[g], digests[g])
                outcomes[g] = o
            if recycle is not None:
                c.run(shutdown)

    ok = [g for g in labels if outcomes[g].error is None]
    failed = {g: outcomes[g].error for g in labels if outcomes[g].error is not None}
    if out is None:
        fits: Mapping = {g: outcomes[g].fit for g in ok}
    else:
        rebuild = None if sampling else _rebuilder(groups, kernel, model_kwargs, model, method)
        fits = StoredFits(out, ok, rebuild)
    rows = []
    for g in labels:
        o = outcomes[g]
        row: dict[str, Any] = {
            "group": g,
            "n_obs": n_obs[g],
            "seed": seeds[g],
            "seconds": o.seconds,
            "worker": o.worker,
        }
        if o.error is None:
            row.update(o.row)
        row.update(error=o.error, n_warnings=len(o.warnings))
        if out is not None:
            row["resumed"] = o.resumed
        rows.append(row)
    table = pd.DataFrame(rows).set_index("group")
    table["error"] = pd.Series([outcomes[g].error for g in labels], index=table.index, dtype=object)
    if not sampling and "converged" in table:
        table["converged"] = table["converged"].astype("boolean")
    result = ManyFit(
        method=method,
        groups=tuple(labels),
        fits=fits,
        errors=failed,
        seeds=seeds,
        idata=_gather_idata(fits, ok, n_obs, method) if sampling else None,
        table=table,
        warnings={g: outcomes[g].warnings for g in labels if outcomes[g].warnings},
        random_seed=int(root.entropy),
        data=groups,
        kernel=kernel,
        model_kwargs=model_kwargs,
        model_class=model,
        store=None if out is None else out.path,
    )
    if failed and errors == "raise":
        lines = "\n".join(f"  {g!r}: {m}" for g, m in failed.items())
        raise FitManyError(f"{len(failed)} of {len(labels)} group fits failed:\n{lines}", result)
    return result


# ---------------------------------------------------------------------------- the store
def _record(o: _Outcome, seed: int, n_obs: int, digest: str) -> dict:
    """What the output store keeps of a group besides its fit (:mod:`bayes_gp.many_store`)."""
    return {
        "label": repr(o.label),
        "seed": int(seed),
        "n_obs": int(n_obs),
        "data_digest": digest,
        "seconds": float(o.seconds),
        "worker": o.worker,
        "error": o.error,
        "warnings": list(o.warnings),
        "feature_names": list(o.feature_names),
        "row": o.row,
    }


def _write(out: ManyStore, o: _Outcome, seed: int, n_obs: int, digest: str) -> _Outcome:
    """Write a group's outcome to the store; the outcome without its fit."""
    record = _record(o, seed, n_obs, digest)
    if o.error is None:
        out.write_success(o.label, o.fit, record)
    else:
        out.write_failure(o.label, record)
    return dataclasses.replace(o, fit=None)


def _resumed(found: StoredGroup) -> _Outcome:
    """The outcome of a group an earlier run finished, from its stored record."""
    r = found.record
    return _Outcome(
        found.label,
        None,
        r.get("error"),
        float(r.get("seconds", np.nan)),
        str(r.get("worker", "")),
        tuple(r.get("feature_names", ())),
        tuple(r.get("warnings", ())),
        dict(r.get("row") or {}),
        resumed=True,
    )


def _rebuilder(groups: dict, kernel, model_kwargs: dict, model: type, method: str):
    """``rebuild(label, dataset)``: a stored type-II fit restored by its group's model."""

    def rebuild(label, ds):
        from bayes_gp.workflow.store import point_fit

        X, yv = groups[label]
        gp = model(X, yv, kernel=kernel, **model_kwargs)
        details = json.loads(ds.attrs.pop(DETAILS, "null"))
        return point_fit(ds, gp, method, details)

    return rebuild
