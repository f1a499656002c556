"""Group fits of :func:`bayes_gp.fit_many` in child processes that are replaced after N fits.

A process that compiles models never gets that memory back: numba keeps the machine code of
every function it compiles for the life of the process (LLVM's MCJIT; numba issues #5976,
#7831), and each new model compiles new functions — measured in one process, 10.7 MiB per NUTS
fit of a new model and 0.27 MiB per MAP fit (``benchmarks/many_load.py``). A Dask worker that
fits thousands of groups grows without bound. So each worker hands its fits to one child
process (:class:`concurrent.futures.ProcessPoolExecutor` with ``max_tasks_per_child``) that is
replaced after ``recycle_after`` fits: the worker's memory stays where it was after its first
``recycle_after`` fits, whatever the number of groups.

The children are forked from a *forkserver* that has imported bayes_gp once, so a new child
starts in a fraction of a second (its compiled models are compiled again). A child killed in
the middle of a fit (by the operating system for memory, or by hand) breaks only that attempt:
the fit is run again in a fresh child, once; a second death is the group's recorded error.
Dask worker processes are daemonic unless started with ``distributed.worker.daemon: False``
(as :func:`~bayes_gp.fit_many`'s own local cluster is), and a daemonic process may not start
children: :func:`check_workers` refuses such a cluster before any fit.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

__all__ = ["ChildDied", "check_workers", "in_child", "may_start_processes", "shutdown"]

#: The one pool of this process: ``(recycle_after, executor)``.
_POOL: dict[str, Any] = {}


class ChildDied(RuntimeError):
    """The child process fitting a group died twice (killed, or out of memory)."""


def may_start_processes() -> bool:
    """Whether this process may start child processes (it is not daemonic)."""
    return not multiprocessing.current_process().daemon


def check_workers(client) -> None:
    """Refuse a cluster whose workers may not start child processes (``ValueError``)."""
    allowed = client.run(may_start_processes)
    daemonic = [w for w, ok in allowed.items() if not ok]
    if daemonic:
        raise ValueError(
            f"`recycle_after` fits each group in a child process of its worker, but "
            f"{len(daemonic)} of the {len(allowed)} workers are daemonic processes, which may "
            "not start processes. Start the workers with the Dask setting "
            "distributed.worker.daemon: False (dask.config.set({'distributed.worker.daemon': "
            "False}) before creating a LocalCluster), or pass recycle_after=None"
        )


def _context():
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        # the server imports bayes_gp once; every child is forked from it with the imports done
        ctx.set_forkserver_preload(["bayes_gp.many"])
        return ctx
    return multiprocessing.get_context("spawn")


def _pool(recycle_after: int) -> ProcessPoolExecutor:
    if _POOL.get("recycle_after") != recycle_after:
        old = _POOL.pop("executor", None)
        if old is not None:
            old.shutdown(wait=True)
        _POOL["executor"] = ProcessPoolExecutor(
            max_workers=1, mp_context=_context(), max_tasks_per_child=recycle_after
        )
        _POOL["recycle_after"] = recycle_after
    return _POOL["executor"]


def shutdown() -> None:
    """Stop this process's child (if any), waiting for it: called on every worker when a
    :func:`~bayes_gp.fit_many` run ends, so that no child outlives its run."""
    old = _POOL.pop("executor", None)
    _POOL.pop("recycle_after", None)
    if old is not None:
        old.shutdown(wait=True)


def _discard() -> None:
    old = _POOL.pop("executor", None)
    _POOL.pop("recycle_after", None)
    if old is not None:
        old.shutdown(wait=False, cancel_futures=True)


def in_child(fit: Callable[[Any], Any], task: Any, recycle_after: int) -> Any:
    """``fit(task)`` in this process's child, which is replaced after ``recycle_after`` calls;
    once more in a fresh child if the child dies, then :class:`ChildDied`."""
    for attempt in (1, 2):
        try:
            return _pool(recycle_after).submit(fit, task).result()
        except BrokenProcessPool as exc:
            _discard()
            if attempt == 2:
                raise ChildDied(
                    f"the process fitting this group died twice (killed, or out of memory; "
                    f"worker pid {os.getpid()})"
                ) from exc
    raise AssertionError("unreachable")
