"""Where send/receive jobs go in each rank's list: three placements, as PyTorch defines them.

``just-in-time`` (the default, the harness's placement before there was a choice)
    each send right after its producer, each receive right before its consumer
    (:func:`~harness.schedule.passes.add_communication`).

``eager`` (PyTorch's ``_add_send_recv``, ``torch/distributed/pipelining/schedules.py``)
    the ranks' compute lists are walked in lock step, rank by rank: a rank's next
    job is taken once its inputs are there (a receive, or the producer on the same
    rank); a job whose output goes to another rank is followed by its send, and the
    matching receive is appended to the peer's list at once. A receive is therefore
    posted as soon as its send can be matched, often long before its consumer. Idle
    slots only pace the walk and are not kept.

``deferred`` (``_add_send_recv`` then ``_defer_recv_ops``, PyTorch's
    ``defer_pp_recv=True``; pytorch#172668, #188833)
    every receive moves down to just before the job that consumes it (for an
    overlapped group, before the group), except that a rank sending to a peer with
    a higher rank first posts its pending receives from that peer (the rank-parity
    rule that keeps two neighbours' NCCL calls from waiting on each other).

Neighbours are those within a stage's chain (:mod:`harness.schedule.chains`), so
DualPipe's two directions are placed as two pipelines. A schedule file read with its own
send/receive jobs keeps its placement: these
passes take compute-only schedules (and :func:`defer_recv_ops` a lowered one).
"""

from __future__ import annotations

from collections import deque

from harness.errors import ConfigError, ScheduleError
from harness.schedule.model import Job, JobKind, Schedule
from harness.schedule.passes import add_communication

__all__ = ["DEFAULT_PLACEMENT", "PLACEMENTS", "add_send_recv", "check_placement", "defer_recv_ops"]

#: The placements, in the order they are listed to users.
PLACEMENTS = ("just-in-time", "eager", "deferred")

#: The placement a case uses when it names none: today's, so earlier results do not change.
DEFAULT_PLACEMENT = "just-in-time"

_F, _B, _I = JobKind.F, JobKind.B, JobKind.I
_SF, _RF, _SB, _RB = JobKind.SEND_F, JobKind.RECV_F, JobKind.SEND_B, JobKind.RECV_B


def check_placement(value: object, what: str = "comm_placement") -> str:
    """``value`` as a placement name (case, spaces and ``_`` for ``-`` ignored).

    Raises:
        ConfigError: not one of :data:`PLACEMENTS`.
    """
    name = value.strip().lower().replace("_", "-") if isinstance(value, str) else None
    if name == "jit":
        name = "just-in-time"
    if name not in PLACEMENTS:
        raise ConfigError(
            f"{what} must be one of just-in-time (each receive right before its consumer, the default), eager "
            f"(PyTorch's _add_send_recv: a receive as soon as its send is placed) or deferred (_add_send_recv then "
            f"_defer_recv_ops, PyTorch's defer_pp_recv=True); got {value!r}"
        )
    return name


def add_send_recv(schedule: Schedule, placement: str = DEFAULT_PLACEMENT) -> Schedule:
    """Insert send/receive jobs into the compute-only ``schedule`` with ``placement`` (module doc).

    Returns:
        A new schedule named like the input, with ``params["comm"] = True`` and
        ``params["comm_placement"]``.

    Raises:
        ConfigError: an unknown placement.
        ScheduleError: the schedule already has send/receive jobs, or (``eager``,
            ``deferred``) the lock-step walk cannot place its next job on any rank.
    """
    placement = check_placement(placement)
    if placement == "just-in-time":
        out = add_communication(schedule)
    else:
        out = _eager(schedule)
        if placement == "deferred":
            out = defer_recv_ops(out)
    out.params["comm_placement"] = placement
    return out


def _groups(schedule: Schedule) -> dict[Job, tuple[Job, ...]]:
    from harness.schedule.groups import groups_of

    return {g[0]: tuple(g) for g in groups_of(schedule)}


def _eager(schedule: Schedule) -> Schedule:
    """PyTorch's ``_add_send_recv`` on our rows (see module doc)."""
    from harness.schedule.chains import links

    rank_of = schedule.stage_to_rank
    has_prev, has_next = links(schedule)  # neighbours within each chain (DualPipe: two)
    first_of = _groups(schedule)
    remaining = {r: deque(row) for r, row in enumerate(schedule.ranks) if row}
    out: list[list[Job | None]] = [[] for _ in schedule.ranks]
    done: list[set[Job]] = [set() for _ in schedule.ranks]
    for row in schedule.ranks:
        for job in row:
            if job is not None and job.kind.is_comm:
                raise ScheduleError(
                    f"schedule {schedule.name!r} already has communication jobs ({job}); placing sends and receives "
                    "takes a compute-only schedule", (str(job),))

    def ready(job: Job, have: set[Job]) -> bool:
        k, kind, mb = job
        if kind is _F:
            return not has_prev[k] or Job(k, _RF, mb) in have or Job(k - 1, _F, mb) in have
        if kind is _B or kind is _I:
            return not has_next[k] or Job(k, _RB, mb) in have or Job(k + 1, _B, mb) in have or Job(k + 1, _I, mb) in have
        return True

    while remaining:
        progress = False
        for r in sorted(remaining):
            queue = remaining[r]
            job = queue[0]
            if job is None:  # an idle slot paces the walk, and is not kept
                queue.popleft()
            else:
                leaves = first_of.get(job, (job,))
                if not all(ready(leaf, done[r]) for leaf in leaves):
                    continue
                for leaf in leaves:
                    while queue[0] is None:  # idle slots inside a group
                        queue.popleft()
                    if queue[0] != leaf:
                        raise ScheduleError(f"schedule {schedule.name!r}: overlapped group {leaves} is not listed in order on rank {r}",
                                            tuple(map(str, leaves)))
                    queue.popleft()
                    out[r].append(leaf)
                    done[r].add(leaf)
                for leaf in leaves:
                    k, kind, mb = leaf
                    if kind is _F and has_next[k] and rank_of[k + 1] != r:
                        send, recv, peer = Job(k, _SF, mb), Job(k + 1, _RF, mb), rank_of[k + 1]
                    elif (kind is _B or kind is _I) and has_prev[k] and rank_of[k - 1] != r:
                        send, recv, peer = Job(k, _SB, mb), Job(k - 1, _RB, mb), rank_of[k - 1]
                    else:
                        continue
                    out[r].append(send)
                    done[r].add(send)
                    out[peer].append(recv)
                    done[peer].add(recv)
            progress = True
            if not queue:
                del remaining[r]
        if not progress:
            stuck = ", ".join(f"rank {r}: {remaining[r][0]}" for r in sorted(remaining))
            raise ScheduleError(f"schedule {schedule.name!r}: cannot place sends and receives eagerly; no rank can take its next job ({stuck})",
                                tuple(str(remaining[r][0]) for r in sorted(remaining)))
    params = dict(schedule.params)
    params["comm"] = True
    return Schedule(schedule.name, schedule.num_microbatches, schedule.stage_to_rank, tuple(tuple(r) for r in out), params)


def defer_recv_ops(schedule: Schedule) -> Schedule:
    """PyTorch's ``_defer_recv_ops`` on a schedule with send/receive jobs: each receive
    moves to just before the job (or overlapped group) that consumes it, except that
    before a send to a higher rank, the pending receives from that rank are posted.

    Raises:
        ScheduleError: a receive that no later job on its rank consumes.
    """
    rank_of = schedule.stage_to_rank
    first_of = _groups(schedule)
    rows: list[tuple[Job | None, ...]] = []
    for r, row in enumerate(schedule.ranks):
        deferred: dict[Job, Job] = {}
        out: list[Job | None] = []
        for job in row:
            if job is None:
                out.append(None)
                continue
            k, kind, _mb = job
            if kind is _RF or kind is _RB:
                deferred[job] = job
                continue
            if kind is _SF or kind is _SB:
                peer = rank_of[k + 1] if kind is _SF else rank_of[k - 1]
                if r < peer:
                    for key in list(deferred):
                        if (rank_of[key.stage - 1] if key.kind is _RF else rank_of[key.stage + 1]) == peer:
                            out.append(deferred.pop(key))
            for leaf in first_of.get(job, (job,)):
                ls, lk, lm = leaf
                want = Job(ls, _RF, lm) if lk is _F else Job(ls, _RB, lm) if lk in (_B, _I) else None
                if want is not None and want in deferred:
                    out.append(deferred.pop(want))
            out.append(job)
        if deferred:
            left = next(iter(deferred))
            raise ScheduleError(f"schedule {schedule.name!r}: {left} on rank {r} has no consuming job after it", (str(left),))
        rows.append(tuple(out))
    params = dict(schedule.params)
    return Schedule(schedule.name, schedule.num_microbatches, schedule.stage_to_rank, tuple(rows), params)
