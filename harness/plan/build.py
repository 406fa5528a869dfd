"""From a schedule to a validated dependency graph and an enqueue order.

Dependencies (Narayanan et al., SC'21, §2.2; PyTorch pipelining's
``_validate_schedule``), for stage ``k`` and micro-batch ``i``:

* ``F(k,i)`` needs ``F(k-1,i)`` - or, in a schedule with communication jobs,
  ``RECV_F(k,i)`` when stage ``k-1`` sits on another rank;
* a backward ``B(k,i)``/``I(k,i)`` needs ``F(k,i)`` and the backward of
  ``(k+1,i)`` (``B`` or ``I``) - or ``RECV_B(k,i)``;
* ``W(k,i)`` needs ``I(k,i)``; ``OPT(k)`` needs every ``B``/``W`` of stage ``k``;
* ``SEND_F(k,i)`` needs ``F(k,i)``; ``SEND_B(k,i)`` needs the backward of ``(k,i)``;
  ``RECV_F(k,i)`` starts with ``SEND_F(k-1,i)`` and ``RECV_B(k,i)`` with
  ``SEND_B(k+1,i)`` (a transfer occupies both comm streams at once, like an
  NCCL send/receive pair): these are *start* dependencies;
* jobs of one stream run in their listed order. Each rank has a compute stream
  and, when the schedule has send/receive jobs, a comm stream per peer rank.

Send/receive jobs must be able to happen, as PyTorch's runtime would run them:

* a send/receive connects two stages on different ranks: ``SEND_F(k,i)`` and
  ``RECV_B(k,i)`` talk to stage ``k+1``, ``SEND_B(k,i)`` and ``RECV_F(k,i)`` to
  stage ``k-1``; that stage must exist (no ``SEND_F`` from the last stage, no
  ``SEND_B`` from the first) and sit on another rank (adjacent stages on one
  rank, as at a V placement's turn, exchange nothing, as
  :func:`~harness.schedule.passes.add_communication` has it);
* every ``SEND_F(k,i)`` has its ``RECV_F(k+1,i)`` and every ``SEND_B(k,i)`` its
  ``RECV_B(k-1,i)``, and the other way round. With the rule above this follows
  from the dependencies: the consumer on the other rank must be scheduled, and
  it needs the receive;
* each rank issues its jobs in listed order, whatever their stream (PyTorch
  refuses to compute before receiving the input): every dependency on the
  job's own rank - a consumer's receive, the job whose output a send sends,
  a same-rank producer - must be listed earlier in that rank's list.

:func:`build_plan` checks counts, these rules, builds the graph and simulates
readiness (Kahn's algorithm driven stream by stream) to find an enqueue order
that is a topological order - which CUDA's "wait on the latest record"
semantics need - or to report a deadlock with the step x rank grid. Everything
is linear in the number of jobs.

:func:`build_plan` takes the fast path (:mod:`harness.plan.fast`: numpy over
integer job keys); whatever looks wrong there is judged again, and reported, by
the reference path (:mod:`harness.plan.reference`: over ``Job`` keys, job by
job), which draws the step x rank grid of the jobs at fault.
"""

from __future__ import annotations

from harness._gcpause import gc_paused
from harness.plan.graph import Plan
from harness.schedule.model import Schedule

__all__ = ["build_plan", "validate"]


"""The :class:`Plan` attributes made from its columns on first access (cached in the instance)."""

@gc_paused
def build_plan(schedule: Schedule) -> Plan:
    """Validate ``schedule`` and turn it into a :class:`Plan`.

    Checks, in order: counts (every stage has one forward and one complete
    backward per micro-batch, nothing twice, micro-batches in range), order on
    each rank (``F`` before its ``I``/``B``, ``I`` before its ``W``), that each
    send/receive connects its stage with an existing stage on another rank
    (``SEND_F``/``RECV_B`` with ``k+1``, ``SEND_B``/``RECV_F`` with ``k-1``), every
    dependency scheduled (including the receive a cross-rank consumer needs in
    a schedule with communication jobs, so every send has its receive and
    every receive its send), every dependency on a job's own rank listed
    before it whatever its stream (a consumer after its receive, a send after
    its producer: a rank issues its jobs in list order), and no deadlock
    (readiness simulation). Linear in the number of jobs: jobs are keyed by
    integers ``(kind, stage, micro-batch)`` in one flat table, built with
    numpy; whatever looks wrong is judged again, and reported, by the
    reference path.

    A schedule's overlapped job groups (``OVERLAP_F_B``, :mod:`harness.plan.groups`)
    then run concurrently: later members on sibling streams ``rank{r}/overlap``.
    A schedule lowered for ``comm_model="blocking"`` (marked by
    :func:`~harness.schedule.blocking_placement.mark_blocking`) then has its sends and
    receives on the compute streams, each send meeting its receive
    (:func:`harness.plan.rendezvous.rendezvous`), and is checked for deadlocks again.

    Raises:
        ScheduleError: the first problem found; the message names the jobs and
            draws the step x rank grid with them marked; or a malformed overlapped group; or,
            under ``blocking``, sends and receives in an order that deadlocks (names a cycle's jobs).
        ResourceError: memory ran out (names the jobs and the memory they need).
    """
    from harness.plan import groups as overlap
    from harness.plan.fast import _build_plan
    from harness.schedule.blocking_placement import is_blocking
    from harness.schedule.registry import memory_guard

    with memory_guard(schedule.num_jobs, f"schedule {schedule.name!r}: building its plan"):
        plan = overlap.apply(_build_plan(schedule))
        if is_blocking(schedule):
            from harness.plan.rendezvous import rendezvous

            plan = rendezvous(plan)
        return plan

def validate(schedule: Schedule) -> None:
    """Run every check of ``schedule``: counts, per-rank order, dependencies and deadlocks
    (:func:`~harness.schedule.validate.check_counts`, :func:`~harness.schedule.validate.check_order`
    and :func:`build_plan`), building and dropping its plan.

    Raises:
        ScheduleError: the first problem found.
    """
    build_plan(schedule)
