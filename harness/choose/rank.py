"""Rank every combination of a :class:`~harness.choose.query.ChooseQuery` by predicted step time under its memory limit.

:func:`choose` evaluates each (schedule, ``v``, ``m``) task of :func:`~harness.choose.query.combinations`
with :func:`~harness.choose.layout_search.search_layout` (the layout and per-stage recomputation with the
shortest predicted step that fits), on the exact analytic path a ``sim`` run takes, serially or on a
pool (:mod:`harness.choose.parallel`), then seeds each row's search with the answers of the other rows
of its stage count and ``m`` until none improves (:mod:`harness.choose.seeding`). Combinations a builder
refuses, or that cannot be laid out, are listed as excluded with the builder's or the search's own words.

The ranking: rows that fit the limit first, then by predicted step time per micro-batch (ns; with one
``m`` in the query that is the step time; across several it is the throughput at the model's
micro-batch size, since a step of ``m`` micro-batches trains ``m x b`` sequences), then by step time,
ties by (schedule, ``v``, ``m``); rows that do not fit follow, in the same order. ``best`` marks the first row when it
fits. Where nothing fits, every row is still listed with its peak, and
``smallest_fitting_limit_bytes`` says the least limit (bytes) at which one of them would fit.

A row reproduces on ``sim``: ``run_case(PipelineCase(row["schedule"], stages=p, microbatches=row["m"],
chunks=row["v"], cost=replace(base, layout=row["layout"], recompute=row["recompute"]),
options=row["options"], memory_limit_bytes=limit, comm_model=row["comm_model"]), backend="sim")``
measures ``row["step_ns"]`` (:meth:`ChooseResult.case` builds that case).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from harness.case import PipelineCase
from harness.choose.evaluate import Job, evaluate_task
from harness.choose.parallel import map_tasks
from harness.choose.query import ChooseQuery, combinations
from harness.choose.seeding import seed_rows
from harness.errors import ConfigError

__all__ = ["BUBBLE_NORMALIZATION", "ChooseResult", "choose", "choose_configuration", "evaluate_task"]

#: The job :func:`evaluate_task` takes (:class:`harness.choose.evaluate.Job`), under its former name here.
_Job = Job

#: How a row's ``bubble`` is normalised (the idle share of all ranks' time).
BUBBLE_NORMALIZATION = "sum of every rank's idle time over p x step time (arXiv:2104.04473 §2.2.1)"


def _rank_key(row: Mapping[str, Any]) -> tuple[int, float, int, str, int, int]:
    """Fitting first; then the step time per micro-batch (ns: the throughput at the query's micro-batch size, which
    at one ``m`` orders as the step time does); then the step time, the schedule, ``v`` and ``m``."""
    return (0 if row["fits"] else 1, row["step_ns"] / row["m"], row["step_ns"], row["schedule"], row["v"], row["m"])


@dataclass(frozen=True)
class ChooseResult:
    """The ranked answer of :func:`choose`.

    Attributes:
        query: the question asked.
        rows: one dict per evaluated combination, ranked (see the module doc); keys ``rank``, ``schedule``,
            ``v``, ``m``, ``layout``, ``recompute`` (one mode or one per stage), ``options``, ``comm_model``,
            ``step_ns`` (ns), ``ns_per_microbatch`` (``step_ns / m``, what rows are ranked by), ``bubble``
            (:data:`BUBBLE_NORMALIZATION`), ``peak_bytes`` (bytes, max over
            ranks), ``peak_bytes_per_rank`` (bytes), ``fits``, ``decomposition`` (the step's bubble
            decomposition, ns), ``search`` (how the layout was found, with its lower bound in ns and the
            baselines: the even split, or the given layout), ``assumptions`` (sentences) and ``best``.
        excluded: ``{"schedule", "v", "m", "reason"}`` per combination left out.
        executor: what evaluated the tasks (``serial``, ``process`` or ``mpi``).
        elapsed_s: wall time of the evaluation (seconds).
    """

    query: ChooseQuery
    rows: list[dict[str, Any]]
    excluded: list[dict[str, Any]]
    executor: str = "serial"
    elapsed_s: float = 0.0

    @property
    def best(self) -> dict[str, Any] | None:
        """The fastest row that fits, ``None`` where none does."""
        return self.rows[0] if self.rows and self.rows[0]["best"] else None

    @property
    def smallest_fitting_limit_bytes(self) -> int | None:
        """Where no row fits a limit: the least limit (bytes) at which one would (the lowest peak); else ``None``."""
        if self.query.memory_limit_bytes is None or not self.rows or any(r["fits"] for r in self.rows):
            return None
        return min(r["peak_bytes"] for r in self.rows)

    @property
    def assumptions(self) -> list[str]:
        """The assumptions every row shares, then the best (else first) row's own, marked as its (each row
        lists all of its own under ``assumptions``: recomputation per stage, chunk sizes, overlapped groups)."""
        if not self.rows:
            return []
        common = [a for a in self.rows[0]["assumptions"] if all(a in r["assumptions"] for r in self.rows[1:])]
        top = self.rows[0]
        label = f"{top['schedule']} v={top['v']} m={top['m']}"
        return common + [f"{label}: {a}" for a in top["assumptions"] if a not in common]

    def case(self, row: Mapping[str, Any] | int) -> PipelineCase:
        """The case that reproduces ``row`` (a row or its 1-based rank) on ``sim``.

        Raises:
            ConfigError: a rank out of range.
        """
        if isinstance(row, int):
            if not 1 <= row <= len(self.rows):
                raise ConfigError(f"choose: rank {row} is out of range (1..{len(self.rows)})")
            row = self.rows[row - 1]
        recompute = row["recompute"] if isinstance(row["recompute"], str) else tuple(row["recompute"])
        cost = replace(self.query.base, layout=row["layout"], layers_per_stage=None, recompute=recompute)
        return PipelineCase(row["schedule"], stages=self.query.p, microbatches=row["m"], chunks=row["v"], cost=cost,
                            options=dict(row["options"]), memory_limit_bytes=self.query.memory_limit_bytes,
                            comm_model=row["comm_model"])

    def to_document(self) -> dict[str, Any]:
        """The answer as plain JSON values: ``query``, ``assumptions``, ``bubble_normalization``, ``limit_bytes``,
        ``smallest_fitting_limit_bytes``, ``rows`` and ``excluded`` (the shape docs/choose.md gives)."""
        return {"query": self.query.to_dict(), "assumptions": self.assumptions, "bubble_normalization": BUBBLE_NORMALIZATION,
                "limit_bytes": self.query.memory_limit_bytes, "smallest_fitting_limit_bytes": self.smallest_fitting_limit_bytes,
                "rows": [dict(r) for r in self.rows], "excluded": [dict(e) for e in self.excluded]}


def choose(query: ChooseQuery, *, workers: int | None = None, executor: str = "auto", progress: bool = True) -> ChooseResult:
    """Evaluate and rank every combination of ``query``.

    Args:
        query: the model, sizes, schedules and limit.
        workers: pool size (default: the CPUs this process may use).
        executor: ``auto``, ``serial``, ``process`` or ``mpi`` (:mod:`harness.choose.parallel`); the ranking
            is the same whichever runs it.
        progress: show a progress bar on standard error (after a second).

    Returns:
        A :class:`ChooseResult`.

    Raises:
        ConfigError: an executor that cannot run here (the message says how to start an MPI run).
    """
    tasks, excluded = combinations(query)
    jobs = [Job(t, query.base, query.p, query.comm_model, query.memory_limit_bytes, query.recompute, query.layout) for t in tasks]
    heavy_first = sorted(range(len(tasks)), key=lambda k: (-tasks[k].weight, k))
    start = time.perf_counter()
    results, how = map_tasks(evaluate_task, jobs, executor=executor, workers=workers, progress=progress, order=heavy_first)
    evaluated = [(job, r) for job, (kind, r) in zip(jobs, results) if kind == "row"]
    seeded, _ = seed_rows([r for _, r in evaluated], [job for job, _ in evaluated], query.p, executor=how, workers=workers,
                          progress=progress)
    elapsed = time.perf_counter() - start
    rows = sorted(seeded, key=_rank_key)
    excluded = excluded + [e for kind, e in results if kind == "excluded"]
    for k, row in enumerate(rows, 1):
        row["rank"] = k
        row["best"] = k == 1 and bool(row["fits"])
    rows = [{"rank": r["rank"], **{k: v for k, v in r.items() if k != "rank"}} for r in rows]
    return ChooseResult(query, rows, excluded, how, elapsed)


#: :func:`choose` under the name the top-level package exports it as (``harness.choose`` is this package).
choose_configuration = choose
