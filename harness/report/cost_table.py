"""The cost model's duration of every job kind per stage, for the review page.

A results-document case keeps its cost model as a description (``case["cost"]``,
written by :meth:`harness.cost.FixedCost.describe` or
:meth:`harness.transformer.TransformerCost.describe`). The page rebuilds the model
from it and asks it for each (stage, kind) the case ran, so a job's tooltip can
put the cost model's duration beside the measured one, and the overview can list
the per-job durations the model assigns. On ``sim`` the two agree exactly; on a
timed backend the difference is the model's error for that job.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["cost_durations", "durations_text"]


def _rebuild(cost: dict[str, Any]) -> Any:
    """The cost model a description was written from, or ``None`` when it is not one we know
    (an import's ``paddle`` model, a custom model)."""
    from harness.cost import FixedCost
    from harness.transformer import TransformerCost

    cls: Any = {"fixed": FixedCost, "transformer": TransformerCost}.get(str(cost.get("model")))
    if cls is None:
        return None
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in cost.items() if k in names}
    return cls(**kwargs)


def cost_durations(case: dict[str, Any]) -> dict[str, int] | None:
    """Per ``"stage,kind"`` the cost model's duration (ns) of that job, for every stage and kind
    the case's jobs have (kinds outside the schedule model, such as an import's ``lr``, left out).

    Args:
        case: a results-document case with its ``cost`` description and ``jobs`` columns.

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
    for stage, kind in sorted(set(zip(jobs["stage"], jobs["kind"]))):
        try:
            job_kind = JobKind(kind)
            out[f"{stage},{kind}"] = int(model.duration_ns(Job(stage, job_kind, None if job_kind is JobKind.OPT else 0), num_stages))
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
