"""A harness schedule as PyTorch pipelining actions, lowered by PyTorch itself (or handed over lowered).

PyTorch's runtime (``_PipelineScheduleRuntime`` in torch 2.13,
``torch/distributed/pipelining/schedules.py``) takes a per-rank list of compute actions
(``_Action``: stage, type, micro-batch; ``OVERLAP_F_B`` holds sub-actions) and lowers it in
``_prepare_schedule_with_comms``:

1. ``_validate_schedule``: every stage has ``m`` forwards and ``m`` backwards (``B``, or ``I``
   and ``W`` pairs), a backward after its forward, ``W`` after its ``I``, each stage on one rank
   (this also sets the stage -> rank map, so any placement works);
2. per rank ``_add_unshard_reshard`` (``UNSHARD``/``RESHARD``; no-ops without FSDP) and
   ``_add_reduce_grad`` (``REDUCE_GRAD`` after a stage's last ``B``/``W``: it divides the
   gradients by ``m``);
3. ``_add_send_recv``: a lock-step walk over the ranks; a rank's next action is placed once its
   input is there, a ``SEND_*`` right after a producer whose consumer is on another rank, and the
   matching ``RECV_*`` appended to the consumer rank's list at once (often long before its
   consumer; the wait for the data happens inside the consumer);
4. with ``defer_pp_recv=True``, ``_defer_recv_ops`` moves each receive down to its consumer.

With ``format="compute_comms"`` the list is taken as given (no checks, no ``REDUCE_GRAD`` added).

:func:`lower_schedule` does the same before any process starts: it converts the case's schedule
(:func:`actions_of`), calls PyTorch's own lowering on stand-in stages (as PyTorch's
``MockPipelineStage`` tests do), translates a refusal into a :class:`~harness.errors.ScheduleError`
naming the rank and action with the harness's grid marked, checks that the sends and receives
pair (:func:`check_pair_order`), and returns the list each rank's runtime executes, plus that
list as a harness schedule (the plan the records are checked against) ending, on every rank,
with the optimizer step of each of its stages (an ``OPT`` job: the schedule's own, or one per
stage where it has none). It imports torch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.errors import ConfigError, ScheduleError
from harness.schedule.groups import groups_of
from harness.schedule.model import Job, JobKind, Schedule, parse_job

__all__ = ["DEFER_RECV_REFUSED", "LOWERINGS", "TorchLowering", "actions_of", "check_pair_order", "lower", "lower_schedule"]

#: ``torch``: PyTorch lowers the compute order itself (what a PyTorch user gets; the default);
#: ``harness``: the case's own placement of send/receive jobs is handed over lowered.
LOWERINGS = ("torch", "harness")

#: Why PyTorch's ``defer_pp_recv=True`` (and the harness's ``deferred`` placement) is refused on this backend.
DEFER_RECV_REFUSED = (
    "PyTorch's pipelining point-to-point operations carry no tag, so gloo and NCCL pair a rank's sends and its peer's "
    "receives in posting order; deferring receives (defer_pp_recv=True, the deferred placement) can post them in "
    "another order than the peer's sends, and a gradient is then received into an activation's buffer of the same "
    "shape without any error (ZB-V p=2 m=4 on gloo: the gradients differ, docs/torch.md); the deferred placement "
    "stays a model for --backend sim"
)

_COMPUTE = frozenset({"F", "B", "I", "W"})
_COMM_KINDS = frozenset({"SEND_F", "RECV_F", "SEND_B", "RECV_B"})
_OVERLAP = re.compile(r"^\((.*)\)OVERLAP_F_B$")


@dataclass(frozen=True)
class TorchLowering:
    """What each rank's runtime is given and what it executes.

    Attributes:
        given: per rank, the action texts handed to ``_PipelineScheduleRuntime`` (compute-only;
            with ``lowered`` the whole lowered list, ``REDUCE_GRAD`` added).
        lowered: ``True`` when ``given`` is handed over as lowered (``format="compute_comms"``).
        executed: per rank, ``pipeline_order_with_comms``: the actions it runs, in order.
        stage_rank: per stage, its rank.
        optimizer: per rank, the stages whose optimizer step (``OPT`` job) it runs after its
            actions, in the schedule's order; a schedule without ``OPT`` jobs gets one per stage,
            in stage order (a training step always ends with its optimizer steps).
        optimizer_added: whether those ``OPT`` jobs were added (the schedule had none).
        schedule: ``executed`` as a harness schedule: host actions (``UNSHARD``/``RESHARD``/
            ``REDUCE_GRAD``) left out, an ``OVERLAP_F_B`` as its sub-actions in order (PyTorch
            runs them one after the other), the ``OPT`` jobs at the end of their rank's row.
    """

    given: tuple[tuple[str, ...], ...]
    lowered: bool
    executed: tuple[tuple[str, ...], ...]
    stage_rank: tuple[int, ...]
    optimizer: tuple[tuple[int, ...], ...]
    optimizer_added: bool
    schedule: Schedule


def actions_of(schedule: Schedule, keep_comm: bool = False) -> list[list[str]]:
    """Per rank the PyTorch action texts of ``schedule``'s rows.

    Idle slots, ``OPT`` and the data-parallel kinds are dropped (PyTorch adds its own
    ``UNSHARD``/``RESHARD``/``REDUCE_GRAD``; the optimizer steps follow ``step()``); send/receive jobs
    are dropped unless ``keep_comm``; an overlapped group (:func:`harness.schedule.groups.groups_of`)
    becomes one ``(a;b)OVERLAP_F_B`` action where its first job stands.
    """
    groups = groups_of(schedule)
    first_of = {g[0]: tuple(g) for g in groups}
    members = {j for g in groups for j in g}
    out: list[list[str]] = []
    for row in schedule.ranks:
        acts: list[str] = []
        for job in row:
            if job is None:
                continue
            if job in first_of:
                acts.append("(" + ";".join(map(str, first_of[job])) + ")OVERLAP_F_B")
                continue
            if job in members:
                continue
            kind = job.kind.value
            if kind in _COMPUTE or (keep_comm and kind in _COMM_KINDS):
                acts.append(str(job))
        out.append(acts)
    return out


def _parse(rows: Sequence[Sequence[str]]) -> dict[int, list[Any]]:
    from torch.distributed.pipelining.schedules import _Action

    return {r: [_Action.from_str(t) for t in row] for r, row in enumerate(rows)}


class _StandIn:
    """The fields ``_PipelineScheduleRuntime``'s constructor reads from a stage (PyTorch's
    ``MockPipelineStage`` in ``test/distributed/pipelining/test_schedule.py`` does the same)."""

    def __init__(self, num_stages: int, group_size: int) -> None:
        self.num_stages, self.group_size = num_stages, group_size
        self.stage_index, self.group_rank = 0, 0
        self.stage_index_to_group_rank: dict[int, int] = {}


def _stages_of(a: Any) -> set[int]:
    if a.sub_actions is not None:
        return {s.stage_index for s in a.sub_actions}
    return {a.stage_index}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


_RANK_STEP = re.compile(r"Rank (\d+), step (\d+)")
_FOR_STAGE = re.compile(r"stage (\d+)")


def _translate(exc: BaseException, rows: dict[int, list[Any]], num_stages: int, name: str,
               grid: Schedule | None) -> ScheduleError:
    """PyTorch's exception as a :class:`ScheduleError` naming the rank and action where it can, with
    ``grid`` (the harness's schedule) drawn and the refused cells marked."""
    msg = _first_line(exc)
    at: list[tuple[int, str]] = []  # (rank, action) at fault
    m = _RANK_STEP.search(msg)
    extra = ""
    if m:  # _validate_schedule: "Rank R, step S: ..."
        rank, step = int(m.group(1)), int(m.group(2))
        row = rows.get(rank, [])
        if step < len(row) and row[step] is not None:
            at.append((rank, str(row[step])))
    elif "Malformed compute schedule" in msg:  # _add_send_recv found no rank that can go on
        at = _stuck(rows, num_stages)
        if len(at) > 1:
            extra = " (no rank can go on: " + "; ".join(f"rank {r} waits at {a}" for r, a in at) + ")"
    elif "microbatches for stage" in msg:
        s = _FOR_STAGE.search(msg)
        if s:
            stage = int(s.group(1))
            owners = [r for r, row in rows.items() if any(a is not None and stage in _stages_of(a) for a in row)]
            extra = f" (stage {stage}" + (f", on rank {owners[0]})" if owners else ")")
    where = f" at rank {at[0][0]}, action {at[0][1]}" if at else ""
    text = f"schedule {name!r}: PyTorch's pipelining runtime refuses it{where}{extra}: {type(exc).__name__}: {msg}"
    jobs = tuple(x for _, a in at for x in re.split(r"[;()]", a) if x and x != "OVERLAP_F_B")
    if grid is not None and at:
        marks: dict[tuple[int, int], str] = {}
        for r, a in at:
            leaves = {x for x in re.split(r"[;()]", a) if x and x != "OVERLAP_F_B"}
            for k, cell in enumerate(grid.ranks[r] if r < grid.num_ranks else ()):
                if cell is not None and str(cell) in leaves:
                    marks[(r, k)] = "refused by PyTorch's runtime"
        if marks:
            text += "\n" + grid.format_grid(marks)
    return ScheduleError(text, jobs)


def _stuck(rows: dict[int, list[Any]], num_stages: int) -> list[tuple[int, str]]:
    """Where ``_add_send_recv``'s walk stops: each rank with actions left and its next action, rank order.

    The walk is replayed with PyTorch's readiness rule (``_ready_to_schedule``): a forward of
    stage ``s > 0`` needs ``RECV_F`` of it or the forward of ``s - 1`` on its own rank before it;
    an ``I``/``B`` of ``s < S - 1`` needs ``RECV_B`` of it or the ``I``/``B`` of ``s + 1`` there;
    an ``OVERLAP_F_B`` needs all its sub-actions ready.
    """
    stage_rank: dict[int, int] = {}
    for r, row in rows.items():
        for a in row:
            if a is not None:
                for s in _stages_of(a):
                    stage_rank[s] = r
    left = {r: [a for a in row if a is not None] for r, row in rows.items()}
    done: dict[int, set[tuple[int, str, int | None]]] = {r: set() for r in left}

    def ready(a: Any, r: int) -> bool:
        t, s, mb = a.computation_type.value, a.stage_index, a.microbatch_index
        if t == "F" and s != 0:
            return (s, "RECV_F", mb) in done[r] or (s - 1, "F", mb) in done[r]
        if t in ("I", "B") and s != num_stages - 1:
            return (s, "RECV_B", mb) in done[r] or (s + 1, "I", mb) in done[r] or (s + 1, "B", mb) in done[r]
        return True

    heads = {r: 0 for r in left}
    progress = True
    while progress:
        progress = False
        for r in sorted(left):
            if heads[r] >= len(left[r]):
                continue
            a = left[r][heads[r]]
            subs = a.sub_actions if a.sub_actions is not None else (a,)
            if not all(ready(x, r) for x in subs):
                continue
            for x in subs:
                t, s, mb = x.computation_type.value, x.stage_index, x.microbatch_index
                done[r].add((s, t, mb))
                if t == "F" and s != num_stages - 1 and stage_rank.get(s + 1, r) != r:
                    done[stage_rank[s + 1]].add((s + 1, "RECV_F", mb))
                if t in ("I", "B") and s != 0 and stage_rank.get(s - 1, r) != r:
                    done[stage_rank[s - 1]].add((s - 1, "RECV_B", mb))
            heads[r] += 1
            progress = True
    return [(r, str(left[r][heads[r]])) for r in sorted(left) if heads[r] < len(left[r])]


def lower(rows: Sequence[Sequence[str]], num_microbatches: int, *, given_comms: bool = False, name: str = "schedule",
          grid: Schedule | None = None) -> tuple[dict[int, list[str]], dict[int, int]]:
    """PyTorch's lowering of ``rows`` (per rank, action texts), without a process group.

    Args:
        rows: per rank its compute actions (or, with ``given_comms``, its whole lowered list).
        num_microbatches: ``m``.
        given_comms: hand the list over as lowered (``format="compute_comms"``): PyTorch adds
            nothing, so each stage's ``REDUCE_GRAD`` is added here after its last ``B``/``W``
            (PyTorch's ``_add_reduce_grad``; without it the gradients would not be divided by ``m``).
        name: the schedule's name, for messages.
        grid: the harness schedule ``rows`` come from, drawn (the refused cell marked) in a refusal.

    Returns:
        ``({rank: [action text, ...]}, {stage: rank})``: the list each rank's runtime executes.

    Raises:
        ScheduleError: PyTorch refuses the schedule (its error, translated, naming the rank and
            action), or the sends and receives of the lowered list do not pair (:func:`check_pair_order`).
    """
    from torch.distributed.pipelining import schedules as pp

    actions = _parse(rows)
    stages = {s for row in actions.values() for a in row if a is not None for s in _stages_of(a)}
    num_stages = max(stages) + 1 if stages else 0
    p = len(rows)
    sched = pp._PipelineScheduleRuntime([_StandIn(num_stages, p)], num_microbatches, loss_fn=lambda a, b: a)
    try:
        if given_comms:
            actions = {r: pp._add_reduce_grad(row, num_microbatches) for r, row in actions.items()}
            sched._prepare_schedule_with_comms(actions, format="compute_comms")
        else:
            sched.pipeline_order = actions
            sched._prepare_schedule_with_comms(actions)
    except (AssertionError, ValueError, RuntimeError, KeyError, IndexError) as exc:
        raise _translate(exc, actions, num_stages, name, grid) from None
    lowered = {r: [str(a) for a in sched.pipeline_order_with_comms[r]] for r in range(p)}
    stage_rank = dict(sched.stage_index_to_group_rank)
    if given_comms:  # compute_comms sets no placement: read it from the actions
        stage_rank = {s: r for r, row in actions.items() for a in row if a is not None for s in _stages_of(a)}
    check_pair_order(lowered, stage_rank, name)  # PyTorch does not check it; a mismatch swaps tensors silently
    return lowered, stage_rank


def _recv_text(consumer: str) -> str:
    """``"1F2"`` -> ``"1RECV_F2"``; ``"2B0"`` -> ``"2RECV_B0"`` (the receive for that consumer)."""
    m = re.match(r"^(\d+)([FB])(\d+)$", consumer)
    return f"{m.group(1)}RECV_{m.group(2)}{m.group(3)}" if m else consumer


def check_pair_order(lowered: dict[int, list[str]], stage_rank: dict[int, int], name: str = "schedule") -> None:
    """Check that between every two ranks the sends of one are posted in the order the other posts
    its receives. PyTorch's stages post point-to-point operations without tags, so gloo and NCCL
    match them first come, first served per pair of ranks; ``_add_send_recv`` keeps the orders equal,
    a list handed over lowered (or deferred) may not, and a mismatch would swap micro-batches' data
    silently (or hang on a size mismatch).

    Raises:
        ScheduleError: names the receiving rank, its receive, and the send it would get instead.
    """
    from torch.distributed.pipelining.schedules import _Action
    from torch.distributed.pipelining.schedules import _ComputationType as T

    sends: dict[tuple[int, int], list[str]] = {}
    recvs: dict[tuple[int, int], list[str]] = {}
    for r, row in lowered.items():
        for text in row:
            a = _Action.from_str(text)
            if a is None or a.sub_actions is not None:
                continue
            s, t, mb = a.stage_index, a.computation_type, a.microbatch_index
            if t == T.SEND_F:
                sends.setdefault((r, stage_rank[s + 1]), []).append(f"{s + 1}F{mb}")
            elif t == T.SEND_B:
                sends.setdefault((r, stage_rank[s - 1]), []).append(f"{s - 1}B{mb}")
            elif t == T.RECV_F:
                recvs.setdefault((stage_rank[s - 1], r), []).append(f"{s}F{mb}")
            elif t == T.RECV_B:
                recvs.setdefault((stage_rank[s + 1], r), []).append(f"{s}B{mb}")
    for pair in sorted(set(sends) | set(recvs)):
        a, b = sends.get(pair, []), recvs.get(pair, [])
        for k in range(max(len(a), len(b))):
            x = a[k] if k < len(a) else None
            y = b[k] if k < len(b) else None
            if x != y:
                at = _recv_text(y) if y else "(none)"
                raise ScheduleError(
                    f"schedule {name!r}: the lowered order cannot run on PyTorch's runtime at rank {pair[1]}, action {at}: "
                    f"its receive #{k} from rank {pair[0]} is for {y or 'nothing'}, but rank {pair[0]}'s send #{k} to it is "
                    f"for {x or 'nothing'}; PyTorch's point-to-point operations carry no tag, so gloo and NCCL pair them in "
                    "posting order and the tensors would be swapped", (at,) if y else ())


def _as_jobs(executed: dict[int, list[str]]) -> list[list[Job]]:
    """Per rank the harness jobs of an executed list: host actions left out, overlaps expanded in order."""
    rows: list[list[Job]] = []
    for r in sorted(executed):
        row: list[Job] = []
        for text in executed[r]:
            m = _OVERLAP.match(text)
            parts = m.group(1).split(";") if m else [text]
            for part in parts:
                job = parse_job(part)
                if job.kind.is_data_parallel:
                    continue
                row.append(job)
        rows.append(row)
    return rows


def lower_schedule(schedule: Schedule, lowering: str = "torch", lowered: Schedule | None = None) -> TorchLowering:
    """What PyTorch's runtime runs for ``schedule`` (module doc).

    Args:
        schedule: the case's compute schedule (its own send/receive jobs, if any, are left to
            PyTorch's lowering with ``lowering="torch"``).
        lowering: ``"torch"`` (PyTorch lowers) or ``"harness"`` (``lowered`` is handed over).
        lowered: with ``"harness"``: ``schedule`` with the case's send/receive jobs placed.

    Raises:
        ConfigError: an unknown ``lowering``, ``"harness"`` without a lowered schedule, or one that
            defers receives (:data:`DEFER_RECV_REFUSED`).
        ScheduleError: PyTorch refuses the schedule, or the sends and receives do not pair.
    """
    if lowering not in LOWERINGS:
        raise ConfigError(f"the torch backend's lowering must be 'torch' (PyTorch lowers the compute order, the default) "
                          f"or 'harness' (the case's own placement of sends and receives), got {lowering!r}")
    m = schedule.num_microbatches
    if lowering == "torch":
        handed = actions_of(schedule)
        executed, stage_rank = lower(handed, m, name=schedule.name, grid=schedule)
    else:
        if lowered is None or not lowered.has_comm:
            raise ConfigError("the torch backend's lowering 'harness' hands PyTorch the case's own send/receive jobs, and "
                              "this schedule has none: give the case comm=True (or lowering 'torch')")
        if lowered.params.get("comm_placement") == "deferred":
            raise ConfigError(f"the torch backend refuses comm_placement 'deferred': {DEFER_RECV_REFUSED}")
        rows = actions_of(lowered, keep_comm=True)
        executed, stage_rank = lower(rows, m, given_comms=True, name=schedule.name, grid=lowered)
        from torch.distributed.pipelining import schedules as pp

        handed = [[str(a) for a in pp._add_reduce_grad(_parse([row])[0], m)] for row in rows]
    rows_jobs = _as_jobs(executed)
    placement = tuple(stage_rank[s] for s in range(len(stage_rank)))
    added = not any(job is not None and job.kind is JobKind.OPT for row in schedule.ranks for job in row)
    if added:
        optimizer = tuple(tuple(s for s, r in enumerate(placement) if r == rank) for rank in range(len(rows_jobs)))
    else:
        optimizer = tuple(tuple(job.stage for job in row if job is not None and job.kind is JobKind.OPT) for row in schedule.ranks)
    for r, stages in enumerate(optimizer):
        rows_jobs[r].extend(Job(s, JobKind.OPT, None) for s in stages)
    params = {k: v for k, v in schedule.params.items() if k not in ("overlap", "comm_placement")}
    params.update({"comm": True, "comm_placement": "torch" if lowering == "torch" else f"harness ({lowered.params.get('comm_placement')})"})  # type: ignore[union-attr]
    plan_schedule = Schedule(schedule.name, m, placement, tuple(tuple(r) for r in rows_jobs), params)
    return TorchLowering(tuple(tuple(r) for r in handed), lowering == "harness", tuple(tuple(executed[r]) for r in sorted(executed)),
                         placement, optimizer, added, plan_schedule)
