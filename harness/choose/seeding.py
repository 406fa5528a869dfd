"""The chooser's second pass: each row's search seeded with the answers other rows found.

Each combination's layout search (:func:`~harness.choose.layout_search.search_layout`) is local beyond
its exhaustive sizes, and a schedule built from the costs (ZB-auto) times its moves on one shared
plan; so a row can miss a layout and recomputation that another schedule's search found and that is
better for it too (on the issue's GPT question, ZB-H2's answer given to ZB-auto). After every
combination is evaluated, :func:`seed_rows` gives each row the answers (layout, recomputation) of the
other rows with the same stage count and ``m``, simulated exactly for the row's schedule
(:func:`~harness.choose.evaluate.reseed_task`); where one beats the row's own (fitting first, then the
step time), the local search runs from it and the row takes the better answer.

It repeats in rounds, each seeding from the previous round's answers, until no row changes (at most
:data:`MAX_ROUNDS`), so that no row is beaten by another row's answer given to its schedule. A row
proven optimal is not seeded (nothing can beat it), nor a row with an answer already tried.

Each round is a batch of independent tasks for :func:`~harness.choose.parallel.map_tasks`, built from the
rows in a fixed order, and each task's answer depends only on its inputs, so serial, process-pool and
``mpi4py.futures`` runs rank identically.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.choose.evaluate import Job, SeedJob, reseed_task
from harness.choose.parallel import map_tasks
from harness.schedule.registry import builder_info

__all__ = ["MAX_ROUNDS", "seed_rows"]

#: The most rounds of seeding (each round seeds from the previous one's answers; one rarely needs more than two).
MAX_ROUNDS = 4

_Answer = tuple[str, "str | tuple[str, ...]"]


def _answer(row: dict[str, Any]) -> _Answer:
    rec = row["recompute"]
    return row["layout"], rec if isinstance(rec, str) else tuple(rec)


def seed_rows(rows: list[dict[str, Any]], jobs: Sequence[Job], p: int, *, executor: str, workers: int | None,
              progress: bool) -> tuple[list[dict[str, Any]], int]:
    """Seed each row with the other rows' answers until none changes.

    Args:
        rows: the rows of the first pass (unranked), ``rows[k]`` the row of ``jobs[k]``; ``None`` rows are
            not allowed (pass the evaluated ones only, with their jobs).
        jobs: each row's combination and the query's inputs.
        p: pipeline ranks (the stage count of a row is its builder's ``num_stages(p, v)``).
        executor, workers, progress: as :func:`~harness.choose.parallel.map_tasks`.

    Returns:
        ``(rows, rounds)``: the rows, improved where a seed beat them (same order), and the rounds run.
    """
    rows = list(rows)
    tried: list[set[_Answer]] = [{_answer(r)} for r in rows]
    groups: dict[tuple[int, int], list[int]] = {}
    for k, job in enumerate(jobs):
        t = job.task
        groups.setdefault((builder_info(t.schedule).num_stages(p, t.v), t.m), []).append(k)
    rounds = 0
    while rounds < MAX_ROUNDS:
        batch: list[SeedJob] = []
        index: list[int] = []
        for members in groups.values():
            if len(members) < 2:
                continue
            for k in members:
                if rows[k]["search"]["proven_optimal"]:
                    continue
                seeds: list[tuple[str, str, str | tuple[str, ...]]] = []
                for j in members:
                    answer = _answer(rows[j])
                    if j != k and answer not in tried[k] and all((lay, rec) != answer for _, lay, rec in seeds):
                        seeds.append((f"{rows[j]['schedule']} v={rows[j]['v']} m={rows[j]['m']}", *answer))
                if seeds:
                    tried[k].update((lay, rec) for _, lay, rec in seeds)
                    batch.append(SeedJob(jobs[k], rows[k], tuple(seeds)))
                    index.append(k)
        if not batch:
            break
        rounds += 1
        # one task alone gains nothing from starting a process pool (the answer is the same wherever it runs)
        run_on = "serial" if len(batch) == 1 and executor == "process" else executor
        results, _ = map_tasks(reseed_task, batch, executor=run_on, workers=workers, progress=progress,
                               desc=f"choose: seeding, round {rounds}")
        changed = False
        for k, new in zip(index, results):
            if new is not None:
                rows[k] = new
                tried[k].add(_answer(new))
                changed = True
        if not changed:
            break
    return rows, rounds
