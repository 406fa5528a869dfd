"""Where sends and receives go when both ranks block for a transfer (the ``blocking`` comm model).

Under ``comm_model="blocking"`` (:mod:`harness.model.comm`) a ``SEND_*`` and its ``RECV_*`` each
occupy their rank's compute stream for the transfer time and start together (a rendezvous,
:mod:`harness.plan.rendezvous`). Both ranks then wait for each other, so the order of sends and
receives in the rank lists decides whether a step finishes at all: in 1F1B a rank that sends
its forward output before it receives the gradient, facing a neighbour that sends that
gradient before it receives the forward output, waits forever. PyTorch's ``just-in-time`` and
``deferred`` placements (:mod:`harness.schedule.placement`) do exactly that, so this model has
placements of its own (:data:`BLOCKING_PLACEMENTS`):

``timed`` (the default; any schedule)
    the order a blocking run takes when each rank, between two compute jobs, does its
    transfers in the order its peers are ready for them: a discrete-event walk over the
    cost model's durations (:func:`_timed_walk`). Never deadlocks (the walk is a
    linearization of the blocking plan, and it cannot stick on a valid compute-only
    schedule). The order depends on the durations: the same schedule may get another
    order under another cost model; for one schedule and cost model it is always the same
    (ties are broken by rank), and the order used is the schedule's, in the case's results.
``mindformers`` (1F1B and interleaved 1F1B in mindformers' order, loop placement)
    mindformers' ``_create_lines`` (each send right after its producer, each receive right
    before its consumer) and its reordering passes (``toolkit/pipeline_balance/simulator/
    pp_simulator.py``, mindspore-ai/mindformers at 6be67890, the parent of c5cc799e3):
    ``vpp_send_delay`` (``v > 1``, ``m % p == 0``: a steady-phase send moves after the next
    compute job, as in Megatron-LM's interleaved steady state, where one
    ``send_forward_backward_recv_forward_backward`` follows each forward/backward pair),
    ``residue_delay`` (``v > 1``, ``m % p != 0``), then ``swap_send_rec`` (between two
    compute jobs an even rank sends before it receives, an odd one receives first, the
    parity of Megatron-LM's ``_p2p_ops``; two transfers with one peer in the peer's order).
    Reproduces mindformers' figures with communication. mindformers' own passes deadlock on
    many interleaved cases with ``m % p != 0`` (e.g. ``p=4, v=2, m=9``): building the plan
    then fails with a deadlock error, as mindformers does.
``megatron`` (1F1B)
    Megatron-LM's 1F1B order (``forward_backward_pipelining_without_interleaving``,
    ``megatron/core/pipeline_parallel/schedules.py``): each send right after its producer,
    each receive right before its consumer, except that after a steady-phase backward the
    rank receives the next forward's input before it sends the gradient
    (``send_backward_recv_forward``). Deadlocks on other schedules (the plan's error says so).
    Megatron-LM's batched variant (``batch_p2p_comm=True``: a send and a receive posted
    together with ``batch_isend_irecv``, which overlap) is not modelled.
``eager`` (PyTorch's ``_add_send_recv``, :mod:`harness.schedule.placement`)
    never deadlocks under ``blocking`` (its lock-step walk appends a send and its receive
    at once, so the walk is a linearization), but posts receives long before they are
    needed, which blocking makes costly.

These passes take a compute-only schedule and return one with send/receive jobs, marked
(``params["comm_model"] = "blocking"``) so that :func:`harness.plan.build.build_plan` builds
its plan with the rendezvous. ``timed`` reads durations: the caller
(:func:`harness.model.comm.lower`) passes them in, as plain functions of a job.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from harness.errors import ConfigError, ScheduleError
from harness.schedule.model import Job, JobKind, Schedule

__all__ = [
    "BLOCKING_PARAM",
    "BLOCKING_PLACEMENTS",
    "DEFAULT_BLOCKING_PLACEMENT",
    "is_blocking",
    "mark_blocking",
    "place_blocking",
    "rendezvous_partner",
]

#: Placements under ``blocking``, in the order they are listed to users.
BLOCKING_PLACEMENTS = ("timed", "mindformers", "megatron", "eager")

#: The placement a ``blocking`` case gets when it names none.
DEFAULT_BLOCKING_PLACEMENT = "timed"

#: The ``params`` key and value that mark a schedule to run its transfers blocking.
BLOCKING_PARAM = ("comm_model", "blocking")

_F, _B, _I = JobKind.F, JobKind.B, JobKind.I
_SF, _RF, _SB, _RB = JobKind.SEND_F, JobKind.RECV_F, JobKind.SEND_B, JobKind.RECV_B
_SENDS = (_SF, _SB)


def rendezvous_partner(job: Job) -> Job:
    """The job a send or receive meets: ``SEND_F(k,i)`` <-> ``RECV_F(k+1,i)``, ``SEND_B(k,i)`` <-> ``RECV_B(k-1,i)``.

    Raises:
        KeyError: ``job`` is not a send or a receive.
    """
    k, kind, mb = job
    return {_SF: Job(k + 1, _RF, mb), _RF: Job(k - 1, _SF, mb), _SB: Job(k - 1, _RB, mb), _RB: Job(k + 1, _SB, mb)}[kind]


def mark_blocking(schedule: Schedule) -> Schedule:
    """A copy of ``schedule`` with ``params["comm_model"] = "blocking"``, so that
    :func:`harness.plan.build.build_plan` runs its sends and receives blocking."""
    params = dict(schedule.params)
    params[BLOCKING_PARAM[0]] = BLOCKING_PARAM[1]
    return Schedule(schedule.name, schedule.num_microbatches, schedule.stage_to_rank, schedule.ranks, params)


def is_blocking(schedule: Schedule) -> bool:
    """Whether ``schedule`` is marked by :func:`mark_blocking` and has send/receive jobs."""
    return schedule.params.get(BLOCKING_PARAM[0]) == BLOCKING_PARAM[1] and schedule.has_comm


def place_blocking(schedule: Schedule, placement: str = DEFAULT_BLOCKING_PLACEMENT,
                   job_ns: Callable[[Job], int] | None = None,
                   group_ns: Callable[[tuple[Job, ...], tuple[int, ...]], int] | None = None) -> Schedule:
    """Insert send/receive jobs into the compute-only ``schedule`` for ``blocking`` (module doc).

    Args:
        schedule: a schedule without send/receive jobs.
        placement: one of :data:`BLOCKING_PLACEMENTS`.
        job_ns: for ``timed``: a job's duration (ns), sends and receives included.
        group_ns: for ``timed``: how long an overlapped group lasts (ns), given its jobs and
            their durations alone; ``None``: the longest of them.

    Returns:
        A new schedule named like the input, marked blocking, with ``params["comm"] = True``
        and ``params["comm_placement"]``.

    Raises:
        ConfigError: an unknown placement; ``mindformers`` on a schedule it does not take (not
            in mindformers' 1F1B or interleaved shape, not a loop placement); ``timed`` without
            ``job_ns``.
        ScheduleError: a schedule that already has send/receive jobs; ``timed`` on a
            compute-only schedule that deadlocks. Where the order of ``mindformers`` or
            ``megatron`` deadlocks, building the plan says so.
    """
    if placement == "timed":
        if job_ns is None:
            raise ConfigError("placement 'timed' needs the jobs' durations (job_ns)")
        rows, _ = _timed_walk(schedule, job_ns, group_ns)
        return _schedule_like(schedule, rows, "timed")
    if placement == "eager":
        from harness.schedule.placement import add_send_recv

        return mark_blocking(add_send_recv(schedule, "eager"))
    if placement == "mindformers":
        return _mindformers(schedule)
    if placement == "megatron":
        return _megatron(schedule)
    raise ConfigError(f"comm_model 'blocking' takes placement {', '.join(BLOCKING_PLACEMENTS)}; got {placement!r}")


# ---- shared -------------------------------------------------------------------------------------


def _send_of(job: Job, rank_of: tuple[int, ...]) -> Job | None:
    """The send a compute job's output needs (to a stage on another rank), or ``None``."""
    k, kind, mb = job
    if kind is _F and k + 1 < len(rank_of) and rank_of[k + 1] != rank_of[k]:
        return Job(k, _SF, mb)
    if kind in (_B, _I) and k > 0 and rank_of[k - 1] != rank_of[k]:
        return Job(k, _SB, mb)
    return None


def _recv_of(job: Job, rank_of: tuple[int, ...]) -> Job | None:
    """The receive a compute job's input needs (from a stage on another rank), or ``None``."""
    k, kind, mb = job
    if kind is _F and k > 0 and rank_of[k - 1] != rank_of[k]:
        return Job(k, _RF, mb)
    if kind in (_B, _I) and k + 1 < len(rank_of) and rank_of[k + 1] != rank_of[k]:
        return Job(k, _RB, mb)
    return None


def _compute_rows(schedule: Schedule) -> list[list[Job]]:
    """Each rank's jobs without idle slots.

    Raises:
        ScheduleError: the schedule already has send/receive jobs.
    """
    rows = [[job for job in row if job is not None] for row in schedule.ranks]
    for r, row in enumerate(rows):
        for job in row:
            if job.kind.is_comm:
                raise ScheduleError(f"schedule {schedule.name!r} already has communication jobs ({job} on rank {r}); placing "
                                    "sends and receives takes a compute-only schedule", (str(job),))
    return rows


def _jit_rows(compute: list[list[Job]], rank_of: tuple[int, ...]) -> list[list[Job]]:
    """Each send right after its producer, each receive right before its consumer (mindformers' ``_create_lines``)."""
    rows = []
    for row in compute:
        out: list[Job] = []
        for job in row:
            recv = _recv_of(job, rank_of)
            if recv is not None:
                out.append(recv)
            out.append(job)
            send = _send_of(job, rank_of)
            if send is not None:
                out.append(send)
        rows.append(out)
    return rows


def _schedule_like(schedule: Schedule, rows: list[list[Job]], placement: str) -> Schedule:
    params = dict(schedule.params)
    params["comm"] = True
    params["comm_placement"] = placement
    return mark_blocking(Schedule(schedule.name, schedule.num_microbatches, schedule.stage_to_rank,
                                  tuple(tuple(r) for r in rows), params))


# ---- placement "mindformers" --------------------------------------------------------------------


def _mf_phases(row: list[Job], p: int, v: int, m: int, rank: int) -> list[str]:
    """mindformers' ``phase`` of each compute job of ``row`` (``PipelineBuilder._inter_merge``):
    ``delta`` warm-up forwards, then forward/backward pairs ("stable", the very last job of the
    pairs "cooldown"), then the remaining backwards ("cooldown"); ``delta = p - s - 1`` (1F1B),
    ``(v+1)p - 2s - 2 + (m mod p)(v-1)`` (interleaved).

    Raises:
        ConfigError: the row is not in that shape.
    """
    n_f = sum(job.kind is _F for job in row)
    delta = p - rank - 1 if v == 1 else (v + 1) * p - 2 * rank - 2 + (m % p) * (v - 1)
    d = min(delta, n_f)
    pairs = n_f - d
    phases = ["warmup"] * d + ["stable"] * (2 * pairs)
    if pairs:
        phases[-1] = "cooldown"
    phases += ["cooldown"] * (len(row) - len(phases))
    ok = (len(row) == 2 * n_f and all(job.kind is _F for job in row[:d])
          and all(row[d + 2 * t].kind is _F and row[d + 2 * t + 1].kind is _B for t in range(pairs))
          and all(job.kind is _B for job in row[d + 2 * pairs:]))
    if not ok:
        raise ConfigError(f"placement 'mindformers' takes 1F1B or interleaved 1F1B rows as mindformers builds them ({delta} "
                          f"warm-up forwards on rank {rank}, then forward/backward pairs, then backwards); rank {rank} is not "
                          "in that shape: use placement 'timed'")
    return phases


def _peer_rank(job: Job, rank_of: tuple[int, ...]) -> int:
    return rank_of[rendezvous_partner(job).stage]


def _swap_pass(rows: list[list[Job]], compute: list[list[Job]], phases: list[list[str]], rank_of: tuple[int, ...]) -> None:
    """mindformers' ``swap_send_rec`` / ``_process_swap`` over harness rows, in place.

    Between compute jobs ``b`` and ``b+1`` of rank ``p``: with exactly two transfers there, an
    even rank puts a send before a receive and an odd one a receive before a send (an odd rank
    not from a warm-up job into a cool-down one, and then nothing else in that gap), then two
    transfers with one peer go in the order of their partners on the peer; with exactly three
    (send, send, receive, one peer) the two sends swap. Ranks in order, gaps in order, each
    swap seen by the gaps and ranks after it, as in mindformers.
    """
    pos = [{job: i for i, job in enumerate(row)} for row in rows]

    def swap(p: int, i: int) -> None:
        row = rows[p]
        row[i], row[i + 1] = row[i + 1], row[i]
        pos[p][row[i]], pos[p][row[i + 1]] = i, i + 1

    def typ(job: Job) -> str:
        return "s" if job.kind in _SENDS else "r"

    for p, jobs in enumerate(compute):
        row = rows[p]
        for b in range(len(jobs) - 1):
            i_b, i_bn = pos[p][jobs[b]], pos[p][jobs[b + 1]]
            if i_bn - i_b == 3:
                if p % 2 == 0 and (typ(row[i_b + 1]), typ(row[i_b + 2])) == ("r", "s"):
                    swap(p, i_b + 1)
                if p % 2 == 1 and (typ(row[i_b + 1]), typ(row[i_b + 2])) == ("s", "r"):
                    if phases[p][b] == "warmup" and phases[p][b + 1] == "cooldown":
                        continue
                    swap(p, i_b + 1)
                first, second = row[i_b + 1], row[i_b + 2]
                peer = _peer_rank(first, rank_of)
                if peer == _peer_rank(second, rank_of) and pos[peer][rendezvous_partner(first)] > pos[peer][rendezvous_partner(second)]:
                    swap(p, i_b + 1)
            elif i_bn - i_b == 4:
                trio = row[i_b + 1 : i_b + 4]
                if len({_peer_rank(j, rank_of) for j in trio}) == 1 and [typ(j) for j in trio] == ["s", "s", "r"]:
                    swap(p, i_b + 1)


def _mindformers(schedule: Schedule) -> Schedule:
    """Placement ``mindformers`` (module doc), linear in the number of jobs.

    The delays (``_send_block_delay``: the send of compute job ``b`` moves to right after
    compute job ``b + distance``) are gathered first: each send moves at most once, and sends
    moved after one job sit right after it, the last moved first, then that job's own send if
    it stayed, then the next job's receive - the lines mindformers' pops and inserts leave.

    Raises:
        ConfigError: not a loop placement, rows not in mindformers' shape, or a send that
            ``residue_delay`` would move past the rank's last job.
        ScheduleError: the schedule already has send/receive jobs.
    """
    rank_of = schedule.stage_to_rank
    p, m, v = schedule.num_ranks, schedule.num_microbatches, schedule.chunks_per_rank
    if tuple(rank_of) != tuple(k % p for k in range(p * v)):
        raise ConfigError(f"schedule {schedule.name!r}: placement 'mindformers' takes a loop placement (stage k on rank k mod p), "
                          "as mindformers' simulator; use placement 'timed'")
    compute = _compute_rows(schedule)
    phases = [_mf_phases(row, p, v, m, r) for r, row in enumerate(compute)]
    moved_to: list[dict[int, list[Job]]] = [defaultdict(list) for _ in range(p)]
    moved: set[Job] = set()

    def delay(r: int, b: int, distance: int) -> None:
        if b + distance >= len(compute[r]):
            raise ConfigError(f"schedule {schedule.name!r}: placement 'mindformers': the send of {compute[r][b]} on rank {r} would "
                              "move past the rank's last job (mindformers' residue_delay fails here too); use placement 'timed'")
        send = _send_of(compute[r][b], rank_of)
        if send is None or send in moved:  # one delay pass runs, each job once: cannot happen
            raise AssertionError(f"placement 'mindformers': {compute[r][b]} moved twice or has no send")
        moved.add(send)
        moved_to[r][b + distance].append(send)

    if v > 1 and m >= p:
        res = m % p
        for r in range(p):
            for b, job in enumerate(compute[r]):
                if _send_of(job, rank_of) is None:
                    continue
                mb = int(job.microbatch or 0)  # F and B always have one
                if res == 0:  # vpp_send_delay
                    if phases[r][b] == "stable":
                        delay(r, b, 1)
                elif r == p - 1 and mb < p + res and job.kind is _F:  # residue_delay
                    delay(r, b, res + max(0, mb - p + 1))
                elif r == 0 and mb < p + res and job.kind is _B:
                    delay(r, b, res if m // p == 1 else res + p)
                elif phases[r][b] == "stable":
                    delay(r, b, 1)
    rows: list[list[Job]] = []
    for r in range(p):
        row: list[Job] = []
        for b, job in enumerate(compute[r]):
            recv = _recv_of(job, rank_of)
            if recv is not None:
                row.append(recv)
            row.append(job)
            row.extend(reversed(moved_to[r].get(b, [])))
            send = _send_of(job, rank_of)
            if send is not None and send not in moved:
                row.append(send)
        rows.append(row)
    _swap_pass(rows, compute, phases, rank_of)
    return _schedule_like(schedule, rows, "mindformers")


# ---- placement "megatron" -----------------------------------------------------------------------


def _megatron(schedule: Schedule) -> Schedule:
    """Placement ``megatron`` (module doc): just in time, then ``RECV_F`` before ``SEND_B`` where they meet."""
    rows = _jit_rows(_compute_rows(schedule), schedule.stage_to_rank)
    for row in rows:
        for i in range(len(row) - 1):
            if row[i].kind is _SB and row[i + 1].kind is _RF:
                row[i], row[i + 1] = row[i + 1], row[i]
    return _schedule_like(schedule, rows, "megatron")


# ---- placement "timed" --------------------------------------------------------------------------


def _timed_walk(schedule: Schedule, job_ns: Callable[[Job], int],
                group_ns: Callable[[tuple[Job, ...], tuple[int, ...]], int] | None = None) -> tuple[list[list[Job]], int]:
    """Placement ``timed``: a discrete-event walk of a blocking run over the jobs' durations;
    the rows and the walk's step time (ns).

    State per rank: its next compute job (or overlapped group: a unit), the time its compute
    stream is free, and its pending sends (outputs of jobs that ran, in the order they ran).
    The walk repeatedly takes the action that can start earliest (ties: transfers first, then
    by rank):

    * a **transfer**: a rank's next unit wants a receive whose send is pending on the
      producer's rank; it starts at the later of the two ranks' free times, and both are busy
      for their job's duration;
    * a **compute unit** whose receives are done, on a rank that has no pending send whose
      receiver will be waiting for it before this unit would end (a send is put off only when
      that costs its receiver nothing);
    * when neither can start, a compute unit whose receives are done whatever its rank's
      pending sends (they wait for their receivers).

    The actions, rank by rank in the order taken, are the placement. It cannot deadlock:
    every action is taken after what the blocking plan makes it wait for, so the walk is a
    linearization of that plan; and the walk cannot stick, since then every unfinished rank
    would wait for the output of a job that has not run, a cycle in the compute-only plan.
    The walk's times are the plan's (both start each job at the latest of what it waits
    for), so the plan's step is the walk's.

    Raises:
        ScheduleError: the compute-only schedule deadlocks, or an overlapped group is not
            listed in order.
    """
    import heapq

    from harness.schedule.groups import groups_of

    rank_of = schedule.stage_to_rank
    first_of = {g[0]: tuple(g) for g in groups_of(schedule)}
    queues = _compute_rows(schedule)
    p = len(queues)
    head = [0] * p
    free = [0] * p
    pending: list[dict[Job, None]] = [{} for _ in range(p)]  # sends produced, not yet sent (insertion-ordered)
    out: list[list[Job]] = [[] for _ in range(p)]
    durations: dict[tuple[int, JobKind], int] = {}
    # per rank, its next unit (a job or an overlapped group), the receives it still wants, and its duration
    unit: list[tuple[Job, ...]] = [()] * p
    wants: list[list[Job]] = [[] for _ in range(p)]
    unit_ns = [0] * p

    def dur(job: Job) -> int:
        key = (job.stage, job.kind)
        if key not in durations:
            durations[key] = int(job_ns(job))
        return durations[key]

    def advance(r: int) -> None:
        """Rank ``r``'s next unit, the receives it wants and its duration."""
        if head[r] >= len(queues[r]):
            unit[r], wants[r], unit_ns[r] = (), [], 0
            return
        job = queues[r][head[r]]
        leaves = first_of.get(job, (job,))
        ds = tuple(dur(leaf) for leaf in leaves)
        unit[r] = leaves
        wants[r] = [x for x in (_recv_of(leaf, rank_of) for leaf in leaves) if x is not None]
        if len(leaves) == 1:
            unit_ns[r] = ds[0]
        else:
            unit_ns[r] = int(group_ns(leaves, ds)) if group_ns is not None else max(ds)

    def holds_back(r: int) -> bool:
        """A pending send of ``r`` whose receiver waits for it before ``r``'s next unit would end."""
        end = free[r] + unit_ns[r]
        for send in pending[r]:
            recv = rendezvous_partner(send)
            q = rank_of[recv.stage]
            if free[q] < end and recv in wants[q]:
                return True
        return False

    # Candidate actions in a heap keyed as the module doc orders them: (start, 0 for a transfer or
    # 1 for a compute unit, ...), then the order a scan of the ranks would meet them in (receiving
    # rank, the receive's place in its wants), then a counter (never two entries alike). Entries go
    # stale when a rank's state changes (its version moves on); each is checked when it is popped.
    heap: list[tuple[Any, ...]] = []
    version = [0] * p  # moves on whenever a rank's free time, unit, wants or pending sends change
    counter = 0

    def offer(r: int) -> None:
        """Push rank ``r``'s possible actions: the transfers it would receive, and its compute unit."""
        nonlocal counter
        for i, recv in enumerate(wants[r]):
            send = rendezvous_partner(recv)
            a = rank_of[send.stage]
            if send in pending[a]:
                counter += 1
                heapq.heappush(heap, (max(free[a], free[r]), 0, min(a, r), a, r, i, counter, version[a], version[r], recv))
        if unit[r] and not wants[r]:
            counter += 1
            heapq.heappush(heap, (free[r], 1, r, r, r, 0, counter, version[r], version[r], None))

    def reoffer(changed: tuple[int, ...]) -> None:
        """Offer again the actions of the ranks in ``changed`` and of the ranks that receive from them."""
        ranks = set(changed)
        for a in changed:
            version[a] += 1
        for a in changed:
            for send in pending[a]:
                ranks.add(rank_of[rendezvous_partner(send).stage])
        for r in sorted(ranks):
            offer(r)

    for r in range(p):
        advance(r)
    for r in range(p):
        offer(r)
    left = sum(map(len, queues))
    n_pending = 0
    while left or n_pending:
        # The earliest valid action; a compute unit held back by a pending send waits while
        # anything else can start; if nothing else can, the earliest held-back unit runs.
        held: list[tuple[Any, ...]] = []
        chosen = None
        while heap:
            entry = heapq.heappop(heap)
            is_transfer, a, r = entry[1] == 0, entry[3], entry[4]
            if entry[7] != version[a] or entry[8] != version[r]:
                continue
            if not is_transfer and holds_back(r):
                held.append(entry)
                continue
            chosen = entry
            break
        if chosen is None and held:
            chosen = held.pop(0)
        for entry in held:
            heapq.heappush(heap, entry)
        if chosen is None:
            stuck = [(r, unit[r][0], wants[r]) for r in range(p) if unit[r]]
            shown = "; ".join(f"rank {r}: {job} waits for {', '.join(map(str, w))}" for r, job, w in stuck)
            raise ScheduleError(f"schedule {schedule.name!r}: cannot place sends and receives: the compute-only schedule deadlocks "
                                f"({shown})", tuple(str(job) for _, job, _ in stuck))
        if chosen[1] == 0:
            t, a, r, recv = chosen[0], chosen[3], chosen[4], chosen[9]
            send = rendezvous_partner(recv)
            free[a], free[r] = t + dur(send), t + dur(recv)
            del pending[a][send]
            n_pending -= 1
            wants[r].remove(recv)
            out[a].append(send)
            out[r].append(recv)
            reoffer((a, r))
            continue
        r = chosen[3]
        free[r] += unit_ns[r]
        leaves = unit[r]
        for leaf in leaves:
            if queues[r][head[r]] != leaf:
                raise ScheduleError(f"schedule {schedule.name!r}: overlapped group {leaves} is not listed in order on rank {r}",
                                    tuple(map(str, leaves)))
            head[r] += 1
            left -= 1
            out[r].append(leaf)
            produced = _send_of(leaf, rank_of)
            if produced is not None:
                pending[r][produced] = None
                n_pending += 1
        advance(r)
        reoffer((r,))
    return out, max(free, default=0)
