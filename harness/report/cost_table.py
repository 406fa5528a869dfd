"""The cost model's duration of every job kind per stage, for the review page.

A results-document case keeps its cost model as a description (``case["cost"]``,
written by :meth:`harness.model.cost.FixedCost.describe` or
:meth:`harness.model.transformer.TransformerCost.describe`). The page rebuilds the model
from it and asks it for each (stage, kind) the case ran, so a job's tooltip can
put the cost model's duration beside the measured one, and the overview can list
the per-job durations the model assigns. On ``sim`` the two agree exactly; on a
timed backend the difference is the model's error for that job.
"""

from __future__ import annotations

import dataclasses
import re
from itertools import compress, repeat
from operator import add, itemgetter, not_
from typing import Any

__all__ = ["cost_durations", "durations_text", "model_notes", "overlap_stretch"]


def _rebuild(cost: dict[str, Any]) -> Any:
    """The cost model a description was written from, or ``None`` when it is not one we know
    (an import's ``paddle`` model, a custom model)."""
    from harness.model.cost import FixedCost
    from harness.model.transformer import TransformerCost

    cls: Any = {"fixed": FixedCost, "transformer": TransformerCost}.get(str(cost.get("model")))
    if cls is None:
        return None
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in cost.items() if k in names}
    return cls(**kwargs)


def cost_durations(case: dict[str, Any], jobs_table: Any = None) -> dict[str, int] | None:
    """Per ``"stage,kind"`` the cost model's duration (ns) of that job, for every stage and kind
    the case's jobs have (kinds outside the schedule model, such as an import's ``lr``, left out).

    Args:
        case: a results-document case with its ``cost`` description and ``jobs`` columns.
        jobs_table: the case's jobs in columns, where the caller has them
            (:class:`harness.report.jobtable.JobTable`: its distinct (stage, kind) pairs by one count).

    Returns:
        ``{"0,F": 1000000, ...}``, or ``None`` when the case carries no cost model that can be
        rebuilt (imports; a model this version does not know; a description it refuses).
    """
    cost = case.get("cost")
    if not isinstance(cost, dict):
        return None
    from harness.errors import ConfigError
    from harness.schedule.model import Job, JobKind

    try:
        model = _rebuild(cost)
    except (ConfigError, TypeError, ValueError):
        return None
    if model is None:
        return None
    num_stages = int(case["schedule"]["p"]) * int(case["schedule"]["v"])
    jobs = case["jobs"]
    out: dict[str, int] = {}
    if jobs_table is not None and jobs_table.n:
        import numpy as np

        k = len(jobs_table.kinds)
        seen = np.flatnonzero(np.bincount(jobs_table.stage * k + jobs_table.kind)).tolist()
        pairs = sorted((x // k, jobs_table.kinds[x % k]) for x in seen)
    else:
        pairs = sorted(set(zip(jobs["stage"], jobs["kind"])))
    for stage, kind in pairs:
        try:
            job_kind = JobKind(kind)
            no_mb = job_kind is JobKind.OPT or job_kind.is_data_parallel  # one per stage, no micro-batch
            out[f"{stage},{kind}"] = int(model.duration_ns(Job(stage, job_kind, None if no_mb else 0), num_stages))
        except (ConfigError, ValueError, TypeError):
            continue
    return out


def durations_text(table: dict[str, int] | None) -> str:
    """The overview's one-line summary of :func:`cost_durations`: ``"F 1 · B 2 ms"`` when every
    stage agrees, else per kind the range over stages (``"F 8–8.8 · B 16–17.6 ms"``); transfers
    are shown only when they cost time, as one ``transfer`` entry when all four send/receive kinds
    last the same. Empty for ``None``."""
    if not table:
        return ""
    by_kind: dict[str, list[int]] = {}
    for key, ns in table.items():
        by_kind.setdefault(key.split(",", 1)[1], []).append(ns)
    order = ("F", "B", "I", "W", "OPT", "SEND_F", "RECV_F", "SEND_B", "RECV_B")
    transfers = ("SEND_F", "RECV_F", "SEND_B", "RECV_B")
    ranges = {kind: (min(v), max(v)) for kind, v in by_kind.items()}
    # One "transfer" entry when every send and receive lasts the same (the usual p2p model).
    same = {ranges[k] for k in transfers if k in ranges}
    if len(same) == 1 and all(k in ranges for k in transfers):
        lohi = same.pop()
        for k in transfers:
            del ranges[k]
        ranges["transfer"] = lohi
    parts = []
    for kind in sorted(ranges, key=lambda k: order.index(k) if k in order else len(order)):
        lo, hi = ranges[kind]
        if hi == 0 and (kind in ("OPT", "transfer") or kind.startswith(("SEND", "RECV"))):
            continue
        parts.append(f"{kind} {lo / 1e6:,.4g}" + ("" if lo == hi else f"–{hi / 1e6:,.4g}"))
    return " · ".join(parts) + " ms" if parts else ""


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.4g}"


def model_notes(case: dict[str, Any]) -> list[str]:
    """What the model/cost column adds to the cost model's label (:func:`harness.report.charts.cost_label`):
    the case options that change the model (``overlap=False``: DualPipeV's F&B pairs run back to back),
    with their values, for the overview and the comparison view's "same model" key.

    Args:
        case: a results-document case (its optional ``options``: the schedule builder's scalar options).

    Returns:
        e.g. ``["overlap=False (F&B pairs back to back)"]``; empty when no option is set.
    """
    options = case.get("options")
    if not isinstance(options, dict):
        return []
    out = []
    for key in sorted(options):
        value = options[key]
        text = f"{key}={value!r}"
        if key == "overlap" and value is False:
            text += " (F&B pairs back to back)"
        out.append(text)
    return out


def _group_rule(cost: dict[str, Any]) -> str:
    """How the cost model times an overlapped group (:mod:`harness.plan.groups`), in words."""
    if isinstance(cost.get("overlap_ns"), (int, float)):
        return f"overlap_ns: every group lasts {_ms(cost['overlap_ns'])} ms"
    if isinstance(cost.get("overlap_ratio"), (int, float)):
        return f"overlap_ratio {cost['overlap_ratio']:g}: max + {cost['overlap_ratio']:g} × (sum − max)"
    return "the sum of its jobs, F + B: no overlap, the default"


_TRANSFER = re.compile("SEND|RECV")


def overlap_stretch(case: dict[str, Any], jobs_table: Any = None) -> dict[str, str]:
    """For a job's tooltip: per job label of an overlapped F&B group (``OVERLAP_F_B``, jobs joined by
    a ``start`` dependency in ``case["deps"]``) one sentence that says how long the group lasts: the
    group of jobs lasting ``d`` alone lasts ``G`` (``overlap_ns``, or ``max(d) + overlap_ratio (sum(d) -
    max(d))``, or ``sum(d)``: :func:`harness.model.overlap.group_ns`), from when every member's input is
    in, and every job of it lasts ``G`` (:func:`harness.plan.groups.group_durations`), so on ``sim`` its
    measured duration is ``G``.

    Args:
        case: a results-document case with ``cost``, ``deps`` and ``jobs``.
        jobs_table: the case's jobs in columns, where the caller has them
            (:class:`harness.report.jobtable.JobTable`): its dependency ids sift the candidates.

    Returns:
        ``{"0F3": "in an overlapped F&B group with 7B1 ...", ...}``; empty without groups or without a
        cost model that can be rebuilt (:func:`cost_durations`).
    """
    cost = case.get("cost")
    if not isinstance(cost, dict):
        return {}
    deps = case.get("deps") or []
    # A group's later jobs start with its first; a receive starting with its send is no group. Sifted
    # in C (compress, map), the few groups' dependencies in Python.
    if jobs_table is not None and deps:  # start dependencies whose jobs are no transfers, by label ids
        import numpy as np

        src, dst, at_start = jobs_table.dep_ids(deps)
        moves = np.asarray([bool(_TRANSFER.search(k)) for k in jobs_table.kinds] or [False], dtype=bool)
        label_moves = moves[np.asarray(jobs_table.label_kind, dtype=np.int64)] if jobs_table.label_kind else np.zeros(1, bool)
        unknown = (src < 0) | (dst < 0)  # a text no job has: decided by its text below
        keep = at_start & (unknown | ~(label_moves[np.maximum(src, 0)] | label_moves[np.maximum(dst, 0)]))
        starts = [deps[i] for i in np.flatnonzero(keep).tolist()]
    else:
        starts = list(compress(deps, map("start".__eq__, map(itemgetter(2), deps))))
    pair_texts = map(add, map(add, map(str, map(itemgetter(0), starts)), repeat("|")), map(str, map(itemgetter(1), starts)))
    firsts: dict[str, list[str]] = {}
    for src, dst, _ in compress(starts, map(not_, map(_TRANSFER.search, pair_texts))):
        firsts.setdefault(str(src), [str(src)]).append(str(dst))
    if not firsts:
        return {}
    table = cost_durations(case, jobs_table)
    if not table:
        return {}
    from harness.errors import ConfigError
    from harness.model.overlap import group_ns
    from harness.schedule.model import parse_job

    model = _rebuild(cost)
    num_stages = int(case["schedule"]["p"]) * int(case["schedule"]["v"])
    rule = _group_rule(cost)
    out: dict[str, str] = {}
    for members in firsts.values():
        try:
            jobs = tuple(parse_job(label) for label in members)
            alone = tuple(table[f"{j.stage},{j.kind.value}"] for j in jobs)
            g = group_ns(model, jobs, alone, num_stages)
        except (ConfigError, KeyError, ValueError):
            continue
        for label, d in zip(members, alone):
            others = ", ".join(x for x in members if x != label)
            out[label] = (f"overlapped F&B group with {others}: the group lasts {_ms(g)} ms ({rule}) from when every member's "
                          f"input is in; this job ({_ms(d)} ms alone) spans it and hands its output on at its end")
    return out
