"""What one worker of the chooser does with one combination: its layout search, or a search seeded by other rows.

Both functions are module level, take one picklable job and return plain values, so that the serial,
process-pool and ``mpi4py.futures`` executors (:mod:`harness.choose.parallel`) run them alike:

- :func:`evaluate_task`: a (schedule, ``v``, ``m``) task's :func:`~harness.choose.layout_search.search_layout`,
  as a row of the chooser's answer, or an excluded entry with the reason;
- :func:`reseed_task`: a row's :func:`~harness.choose.layout_search.reseed_layout` from other rows'
  answers (:mod:`harness.choose.seeding`), as the improved row, or ``None``.

A row's figures (``step_ns`` in ns, ``peak_bytes`` in bytes, ...) are those of
:class:`~harness.choose.layout_search.Candidate`; the row's keys are listed in
:class:`~harness.choose.rank.ChooseResult`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.choose.candidates import Candidate
from harness.choose.layout_search import LayoutChoice, reseed_layout, search_layout
from harness.choose.query import Task
from harness.errors import ConfigError, ScheduleError
from harness.model.transformer import TransformerCost

__all__ = ["Job", "SeedJob", "evaluate_task", "reseed_task"]


@dataclass(frozen=True)
class Job:
    """What one worker needs: a task and the query's shared inputs (picklable)."""

    task: Task
    base: TransformerCost
    p: int
    comm_model: str
    limit: int | None
    recompute: str
    layout: str


@dataclass(frozen=True)
class SeedJob:
    """A row to seed with other rows' answers.

    Attributes:
        job: the row's combination and the query's inputs.
        row: the row as it stands (a dict of the chooser's answer).
        seeds: ``(label, layout, recompute)`` per other row's answer to try, ``label`` naming that row
            (``"ZB-H2 v=1 m=32"``); ``recompute`` one mode or one per stage.
    """

    job: Job
    row: Mapping[str, Any]
    seeds: tuple[tuple[str, str, str | tuple[str, ...]], ...]


def _recompute_json(value: str | tuple[str, ...]) -> str | list[str]:
    return value if isinstance(value, str) else list(value)


def _figures(best: Candidate, found: LayoutChoice, job: Job) -> dict[str, Any]:
    """The row's fields that come from its answer ``best``."""
    t = job.task
    return {"layout": best.layout, "recompute": _recompute_json(best.recompute),
            "options": dict(best.options) if best.options is not None else dict(t.options), "step_ns": best.step_ns,
            "ns_per_microbatch": best.step_ns / t.m, "bubble": best.bubble, "peak_bytes": best.peak_bytes,
            "peak_bytes_per_rank": list(best.peak_bytes_per_rank), "fits": best.fits, "decomposition": found.decomposition,
            "assumptions": found.assumptions}


def evaluate_task(job: Job) -> tuple[str, dict[str, Any]]:
    """One task's layout search: ``("row", row)`` or ``("excluded", entry)``.

    A builder's :class:`~harness.errors.ConfigError` (sizes or options it refuses, a limit below its
    minimum) or :class:`~harness.errors.ScheduleError` (a deadlock) becomes an excluded entry with its
    message; so does any other failure, named as one, so that one combination never costs the others.
    """
    t = job.task
    try:
        found = search_layout(t.schedule, job.p, t.m, t.v, job.base, options=t.options, comm_model=job.comm_model,
                              memory_limit_bytes=job.limit, recompute=job.recompute, layout=job.layout)
        figures = _figures(found.best, found, job)
    except (ConfigError, ScheduleError) as exc:
        return "excluded", {"schedule": t.schedule, "v": t.v, "m": t.m, "reason": str(exc)}
    except Exception as exc:  # a defect in one combination's evaluation must not cost the others theirs
        return "excluded", {"schedule": t.schedule, "v": t.v, "m": t.m,
                            "reason": f"evaluation failed ({type(exc).__name__}: {exc}); please report it"}
    row = {"schedule": t.schedule, "v": t.v, "m": t.m, "comm_model": job.comm_model, **figures,
           "search": {"evaluated": found.evaluated, "lower_bound_ns": found.lower_bound_ns, "proven_optimal": found.proven_optimal,
                      "method": found.method,
                      "baselines": {name: c.to_dict() for name, c in found.baselines.items()}}}
    order = ("schedule", "v", "m", "layout", "recompute", "options", "comm_model", "step_ns", "ns_per_microbatch", "bubble",
             "peak_bytes", "peak_bytes_per_rank", "fits", "decomposition", "search", "assumptions")
    return "row", {k: row[k] for k in order}


def reseed_task(seed: SeedJob) -> dict[str, Any] | None:
    """The row of ``seed`` improved from other rows' answers, or ``None`` where none beats it.

    The improved row keeps its baselines and lower bound; ``search.evaluated`` adds the candidates
    simulated here, ``search.method`` says which row's answer seeded it, and ``proven_optimal`` is
    recomputed against the lower bound. A failure here (a defect) keeps the row as it is.
    """
    job, row = seed.job, seed.row
    t = job.task
    current = (row["layout"], row["recompute"] if isinstance(row["recompute"], str) else tuple(row["recompute"]))
    try:
        got = reseed_layout(t.schedule, job.p, t.m, t.v, job.base, current=current, seeds=[(lay, rec) for _, lay, rec in seed.seeds],
                            options=t.options, comm_model=job.comm_model, memory_limit_bytes=job.limit, recompute=job.recompute,
                            layout=job.layout)
    except (ConfigError, ScheduleError):
        return None
    if got is None:
        return None
    found, start = got
    label = next(lbl for lbl, lay, rec in seed.seeds if (lay, rec) == start)
    best = found.best
    search = dict(row["search"])
    search["evaluated"] = search["evaluated"] + found.evaluated
    search["method"] = f"{search['method']}; then seeded with other rows' answers ({label}'s the best start): {found.method}"
    search["lower_bound_ns"] = min(search["lower_bound_ns"], best.step_ns)
    search["proven_optimal"] = bool(best.fits and best.step_ns <= search["lower_bound_ns"])
    return {**row, **_figures(best, found, job), "search": search}

