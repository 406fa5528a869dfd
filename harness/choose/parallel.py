"""Evaluate independent tasks serially, on a process pool, or on an MPI pool, with one progress bar.

:func:`map_tasks` returns the results in the tasks' order whichever executor ran them, so the
chooser's ranking never depends on it:

- ``"serial"``: in this process;
- ``"process"``: a :class:`concurrent.futures.ProcessPoolExecutor` of ``workers`` processes (default:
  the CPUs this process may use);
- ``"mpi"``: :class:`mpi4py.futures.MPIPoolExecutor`, the pool of a run started as
  ``mpirun -n N python -m mpi4py.futures -m harness choose ...`` (rank 0 runs the chooser, the other
  ``N - 1`` ranks evaluate; mpi4py's documented way of sharing ``MPI.COMM_WORLD`` as a pool);
- ``"auto"``: ``mpi`` inside such a run, else ``process`` when there are several tasks and CPUs,
  else ``serial``.

The progress bar is tqdm's, on standard error where it is a terminal, shown only once a run has lasted a second.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, as_completed
from typing import Any, TypeVar

from harness.errors import ConfigError

__all__ = ["EXECUTORS", "map_tasks", "mpi_pool_active", "resolve_executor"]

EXECUTORS = ("auto", "serial", "process", "mpi")

T = TypeVar("T")
R = TypeVar("R")


def _world_size() -> int:
    """The launcher's world size from its environment (Open MPI, MPICH/Hydra, Slurm), 1 outside one."""
    for key in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"):
        value = os.environ.get(key, "")
        if value.isdigit():
            return int(value)
    return 1


def mpi_pool_active() -> bool:
    """``True`` inside ``python -m mpi4py.futures``, whose other ranks wait as a shared pool of workers."""
    core = sys.modules.get("mpi4py.futures._core")
    return core is not None and getattr(core, "SharedPool", None) is not None


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def resolve_executor(executor: str, tasks: int, workers: int | None) -> str:
    """The executor ``executor`` means for ``tasks`` tasks on ``workers`` workers (``None``: every CPU).

    Raises:
        ConfigError: an unknown executor; ``workers`` below 1; ``mpi`` outside ``python -m mpi4py.futures``
            or without mpi4py; a launch under ``mpirun`` without ``-m mpi4py.futures`` (every rank would
            run the whole search), with the command to use.
    """
    if executor not in EXECUTORS:
        raise ConfigError(f"executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ConfigError(f"workers must be a whole number >= 1, got {workers!r}")
    pooled = mpi_pool_active()
    if executor == "mpi" or (executor == "auto" and _world_size() > 1):
        if not pooled:
            raise ConfigError("an MPI run of the chooser shares its ranks through mpi4py.futures: start it as "
                              "'mpirun -n N python -m mpi4py.futures -m harness choose ...' (pip install mpi4py)")
        return "mpi"
    if executor != "auto":
        return executor
    if pooled:
        return "mpi"
    return "process" if tasks > 1 and (workers or _cpus()) > 1 else "serial"


def _bar(total: int, desc: str, progress: bool) -> Any:
    from tqdm import tqdm

    # disable=None: tqdm's own rule, no bar where standard error is not a terminal (a log file, a CI job's output)
    return tqdm(total=total, desc=desc, unit="combination", delay=1.0, disable=True if not progress or total == 0 else None,
                file=sys.stderr, leave=False, dynamic_ncols=True)


def map_tasks(fn: Callable[[T], R], items: Sequence[T], *, executor: str = "auto", workers: int | None = None,
              progress: bool = True, desc: str = "choose", order: Sequence[int] | None = None) -> tuple[list[R], str]:
    """``[fn(x) for x in items]``, evaluated by ``executor``; returns the results and the executor used.

    Args:
        fn: a module-level function (pickled by name for the pools).
        items: its arguments, picklable.
        executor: one of :data:`EXECUTORS`.
        workers: pool size (default: the CPUs this process may use; under MPI, the pool's ranks).
        progress: show the progress bar (after a second).
        desc: the bar's label.
        order: the order to submit ``items`` in (indices; default as given): the heavy ones first
            end a pool's run sooner. The results keep ``items``' order.

    Raises:
        ConfigError: as :func:`resolve_executor`.
        Exception: whatever ``fn`` raises, for the first task that raised it, the pool shut down first.
    """
    how = resolve_executor(executor, len(items), workers)
    sequence = list(order) if order is not None else list(range(len(items)))
    if sorted(sequence) != list(range(len(items))):
        raise ValueError("order must be a permutation of the items' indices")
    results: list[Any] = [None] * len(items)
    with _bar(len(items), desc, progress) as bar:
        if how == "serial":
            for k in sequence:
                results[k] = fn(items[k])
                bar.update(1)
            return results, how
        pool: Executor
        if how == "mpi":
            from mpi4py.futures import MPIPoolExecutor

            pool = MPIPoolExecutor(max_workers=workers)
        else:
            pool = ProcessPoolExecutor(max_workers=min(workers or _cpus(), max(1, len(items))))
        with pool:
            futures: dict[Future[Any], int] = {pool.submit(fn, items[k]): k for k in sequence}
            try:
                for future in as_completed(futures):
                    results[futures[future]] = future.result()
                    bar.update(1)
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
    return results, how
