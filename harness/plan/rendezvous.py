"""The ``blocking`` comm model in the plan: sends and receives on the compute streams, each send
meeting its receive.

Megatron-LM's point-to-point communication without overlap (``megatron/core/pipeline_parallel/
p2p_communication.py``: ``_communicate`` waits on its requests before the next compute op) and
mindformers' ``toolkit/pipeline_balance`` simulator (``SendBlockSim``/``RecBlockSim``,
``simulator/sim_block.py``, mindspore-ai/mindformers at 6be67890, the parent of c5cc799e3)
charge a transfer on the compute line of both ranks:

* a ``SEND_*`` and a ``RECV_*`` each occupy their rank's **compute stream** for the transfer
  time ``c`` (the cost model's duration of the job, as under ``stream``);
* a send and its receive **start together** (a rendezvous), at the later of the two ranks'
  readiness: ``start = max(end of the job listed before the send, end of the job listed
  before the receive on the peer)``; both end at ``start + c``.

:func:`rendezvous` makes that two acyclic dependencies, exactly mindformers' timing recurrences
(``SendBlockSim.build_with_comm``: ``max(depend_left.end, dual.depend_left.end)``;
``RecBlockSim.build_with_comm``: ``max(depend_left.end, dual.start)``):

* the send waits for the **end of the job listed just before its receive** on the receiving
  rank (an end dependency across ranks; none when the receive is that rank's first job);
* the receive waits for the **start of its send** (the start dependency every plan has).

The receiving rank is free when that previous job ends, so the receive starts when the send
does. A consumer waits for its receive through stream order (the same stream). A transfer
listed after an overlapped group (:mod:`harness.plan.groups`) also waits for the end of the
group's members on the rank's sibling streams: the group holds the rank's compute line for as
long as it lasts.

Where sends and receives go so that this cannot deadlock: :mod:`harness.schedule.blocking_placement`.
"""

from __future__ import annotations

from harness.errors import ScheduleError
from harness.plan.graph import Plan, PlanArrays, _csr
from harness.schedule.blocking_placement import BLOCKING_PLACEMENTS, rendezvous_partner
from harness.schedule.model import KIND_CODE, JobKind

__all__ = ["rendezvous"]


def rendezvous(plan: Plan) -> Plan:
    """``plan`` (built with send/receive jobs on comm streams) with every send and receive on its
    rank's compute stream, the rendezvous dependencies (module doc) and a new enqueue order.
    :func:`harness.plan.build.build_plan` applies it to a schedule marked blocking
    (:func:`harness.schedule.blocking_placement.mark_blocking`).

    Raises:
        ScheduleError: the order deadlocks under ``blocking``; the message names the jobs of a
            cycle and the placement.
    """
    import numpy as np

    from harness.plan.fast import _fast_order

    cols = plan.arrays
    jobs = plan.jobs
    n = plan.num_jobs
    rank = cols.rank.tolist()
    compute_stream = {plan.stream_rank[s]: s for s, name in enumerate(plan.stream_names) if name.endswith("/compute")}
    comm_codes = [KIND_CODE[k] for k in JobKind if k.is_comm]
    is_comm = np.isin(cols.kind, comm_codes)
    stream = cols.stream.copy()
    stream[is_comm] = [compute_stream[r] for r in cols.rank[is_comm].tolist()]
    used = np.unique(stream)
    stream = np.searchsorted(used, stream)
    sl = stream.tolist()
    index = {job: j for j, job in enumerate(jobs)}
    # plan.deps minus those on the job's own (now shared) stream: listed earlier, met by stream order
    deps = [[d for d in ds if sl[d] != sl[j]] for j, ds in enumerate(plan.deps)]
    start_deps = [list(ds) for ds in plan.start_deps]
    comm_list = is_comm.tolist()
    sibling = -1  # the latest job listed on the rank that runs on a sibling (overlap) stream
    compute_of_rank = {r: int(np.searchsorted(used, s)) for r, s in compute_stream.items()}
    for j in range(n):
        if j and rank[j] != rank[j - 1]:
            sibling = -1
        if not comm_list[j]:
            if sl[j] != compute_of_rank[rank[j]]:
                sibling = j
            continue
        if sibling >= 0 and sibling not in deps[j]:
            deps[j].append(sibling)  # a group holds the compute line until its last member ends
    sends = np.flatnonzero(np.isin(cols.kind, [KIND_CODE[JobKind.SEND_F], KIND_CODE[JobKind.SEND_B]])).tolist()
    for j in sends:
        recv = index[rendezvous_partner(jobs[j])]
        if recv > 0 and rank[recv - 1] == rank[recv] and (recv - 1) not in deps[j]:  # jobs are rank by rank in listed order
            deps[j].append(recv - 1)
    order = _fast_order(n, sl, [tuple(d) for d in deps], [tuple(d) for d in start_deps], len(used))
    if order is None:
        cycle = _a_cycle(sl, deps, start_deps)
        shown = " -> ".join(f"{jobs[j]} (rank {rank[j]})" for j in cycle)
        placement = plan.schedule.params.get("comm_placement")
        if placement in BLOCKING_PLACEMENTS:
            where, fix = f"placement {placement!r}", "use placement 'timed', which never deadlocks"
        else:  # the schedule's own send/receive jobs (a file, or a schedule lowered for another model)
            where = "in the order the schedule lists them"
            fix = "give the schedule without its send/receive jobs, and placement 'timed' (which never deadlocks) places them"
        raise ScheduleError(
            f"schedule {plan.schedule.name!r}: its sends and receives deadlock under comm_model 'blocking' (a send and its receive "
            f"start together, each on its rank's compute stream), {where}: {shown} waits on its own start; {fix}",
            tuple(str(jobs[j]) for j in cycle))
    deps_ptr, deps_idx = _csr([tuple(d) for d in deps])
    start_ptr, start_idx = _csr([tuple(d) for d in start_deps])
    columns = PlanArrays(stage=cols.stage, kind=cols.kind, microbatch=cols.microbatch, rank=cols.rank, step=cols.step,
                         stream=stream, chunk=cols.chunk, deps_ptr=deps_ptr, deps_idx=deps_idx,
                         start_ptr=start_ptr, start_idx=start_idx)
    kept = used.tolist()
    out = Plan(plan.schedule, columns, tuple(plan.stream_names[s] for s in kept), tuple(plan.stream_rank[s] for s in kept), tuple(order))
    object.__setattr__(out, "_wait", None)  # several waits per job: simulate's general path
    return out


def _a_cycle(stream: list[int], deps: list[list[int]], start_deps: list[list[int]]) -> list[int]:
    """One cycle (stream order included) of a dependency graph that deadlocks, as job indices, in wait order."""
    n = len(stream)
    prev: list[int] = [-1] * n
    last: dict[int, int] = {}
    for j, s in enumerate(stream):
        prev[j] = last.get(s, -1)
        last[s] = j
    preds = [[*deps[j], *start_deps[j], *([prev[j]] if prev[j] >= 0 else [])] for j in range(n)]
    color = [0] * n  # 0 unseen, 1 on the current path, 2 done
    for root in range(n):
        if color[root]:
            continue
        path: list[int] = []
        stack = [(root, 0)]
        while stack:
            j, i = stack.pop()
            if i == 0:
                color[j] = 1
                path.append(j)
            if i < len(preds[j]):
                stack.append((j, i + 1))
                d = preds[j][i]
                if color[d] == 1:
                    return list(reversed(path[path.index(d):]))
                if color[d] == 0:
                    stack.append((d, 0))
            else:
                color[j] = 2
                path.pop()
    return []
