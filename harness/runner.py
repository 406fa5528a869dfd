"""Run one case end to end: case -> schedule -> plan -> backend run -> metrics.

This is the core the pytest plugin and the command line call; it prints
nothing and writes no files.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from harness.analysis.assumptions import case_assumptions
from harness.analysis.bubble import BubbleDecomposition, decompose
from harness.analysis.critical_path import critical_path, waiting
from harness.analysis.memory import has_memory_model, memory_profile
from harness.analysis.metrics import RunMetrics, compute_metrics
from harness.analysis.result import CaseResult
from harness.analysis.theory import theory_for
from harness.case import PipelineCase
from harness.distributed.backends import backend_workload, resolve_backend
from harness.errors import ConfigError, ScheduleError
from harness.model.checked import CheckedCost, checked
from harness.plan.build import build_plan
from harness.plan.graph import Plan
from harness.records import RunRecords
from harness.run.device import create_device
from harness.run.environment import BackendChoice, UsageProbe
from harness.run.executor import execute
from harness.run.stability import Flag, fidelity, predicted_step_ns, stability_flags, trust_warnings
from harness.run.window import ProfilingWindow, window_for
from harness.schedule.model import Job, JobKind
from harness.schedule.registry import schedule_notes
from harness.text import safe_text

__all__ = ["run_case"]


#: Longest run, in seconds, the cpu ``compute`` workload may be asked for before
#: the harness stops and says so (a GPU-sized model on a CPU takes hours).
CPU_GEMM_LIMIT_S = 600.0

@functools.cache
def _one_core_gemm_rate() -> float:
    """float32 GEMM rate of one core in FLOP/s, measured once per process (a few ms)."""
    import time

    import numpy as np
    from threadpoolctl import threadpool_limits

    a = np.ones((256, 256), dtype=np.float32)
    with threadpool_limits(limits=1, user_api="blas"):  # as the cpu device runs them: one thread per stream
        np.matmul(a, a)
        t0 = time.perf_counter()
        for _ in range(8):
            np.matmul(a, a)
        return 8 * 2 * 256**3 / max(time.perf_counter() - t0, 1e-9)

def _step_flops(case: PipelineCase, plan: Plan) -> float:
    """FLOPs of one step of ``plan`` under the case's cost model, asked once per ``(stage, kind)``
    (costs do not depend on the micro-batch, see :class:`~harness.model.cost.CostModel`)."""
    import numpy as np

    cols = plan.arrays
    kinds = tuple(JobKind)
    _, first, counts = np.unique(cols.stage * len(kinds) + cols.kind, return_index=True, return_counts=True)
    n_stages = plan.schedule.num_stages
    total = 0.0
    for j, count in zip(first.tolist(), counts.tolist()):
        b = int(cols.microbatch[j])
        job = Job(int(cols.stage[j]), kinds[int(cols.kind[j])], None if b < 0 else b)
        total += case.cost.flops(job, n_stages) * count
    return total

def _check_compute_flops(case: PipelineCase, step_flops: float) -> None:
    """Refuse the ``compute`` workload for a cost model that gives no FLOPs: its jobs would
    sleep or spin their durations while the run says it multiplied matrices.

    Raises:
        ConfigError: no job has FLOPs (e.g. :class:`~harness.model.cost.FixedCost`).
    """
    if step_flops > 0:
        return
    raise ConfigError(
        f"case {case.label()!r}: the compute workload runs each job's FLOPs as real matrix products, but the cost model "
        f"({type(getattr(case.cost, 'inner', case.cost)).__name__}) gives no FLOPs, only durations; use TransformerCost for compute cases, "
        "or workload 'timed' (jobs last their cost-model durations)"
    )

def _check_cpu_gemm_time(case: PipelineCase, plan: Plan, step_flops: float, steps: int) -> None:
    """Refuse a cpu ``compute`` run whose GEMMs would take longer than
    :data:`CPU_GEMM_LIMIT_S`, estimated from a quick measurement of this machine's
    float32 GEMM rate (one thread per stream, at most one stream per core).

    Raises:
        ConfigError: the estimate is over the limit (gives it, and what to change).
    """
    import os

    total = step_flops * steps
    if total <= 0:
        return
    rate = _one_core_gemm_rate()
    parallel = max(1, min(os.cpu_count() or 1, plan.schedule.num_ranks))
    estimate = total / (rate * parallel)
    if estimate > CPU_GEMM_LIMIT_S:
        raise ConfigError(
            f"case {case.label()!r}: the compute workload would run {total / 1e12:,.0f} TFLOP of real GEMMs on this CPU, "
            f"about {estimate / 60:,.0f} min at the {rate / 1e9:.0f} GFLOP/s measured per core; use workload 'timed' "
            "(jobs last their cost-model durations) or a smaller model for compute cases"
        )

def _with_checked_cost(case: PipelineCase) -> PipelineCase:
    """``case`` with its cost model's answers checked where they enter the run
    (:class:`~harness.model.checked.CheckedCost`), its errors naming the case's line and label. The
    shipped models check their own values when made, and are left as they are."""
    cost = checked(case.cost, (f"{case.declared_at}: " if case.declared_at else "") + f"case {case.label()!r}")
    return case if cost is case.cost else dataclasses.replace(case, cost=cost)

def _check_cost_answers(plan: Plan, cost: Any) -> None:
    """Ask a custom cost model (:class:`~harness.model.checked.CheckedCost`) its FLOPs and bytes once per
    ``(stage, kind)`` of ``plan``, as the job-by-job executor does, so that a bad answer stops the
    case on every backend, including ``sim``, whose replay asks neither (its durations were asked
    already, by :func:`~harness.plan.timeline.durations`).

    Raises:
        ConfigError: an answer :class:`~harness.model.checked.CheckedCost` refuses (names the model, job and value).
    """
    if not isinstance(cost, CheckedCost):
        return
    import numpy as np

    cols = plan.arrays
    _, first = np.unique(cols.stage * len(JobKind) + cols.kind, return_index=True)
    n_stages = plan.schedule.num_stages
    kinds = tuple(JobKind)
    for j in np.sort(first).tolist():
        b = int(cols.microbatch[j])
        job = Job(int(cols.stage[j]), kinds[int(cols.kind[j])], None if b < 0 else b)
        cost.flops(job, n_stages)
        cost.nbytes(job, n_stages)

def _decomposition(records: RunRecords, metrics: RunMetrics, plan: Plan, cost: Any, delays: list[int] | None = None) -> BubbleDecomposition:
    """The median step's decomposition: on ``sim`` from the cost model, on a timed backend from the
    median step's measured busy time per rank (:func:`harness.analysis.bubble.decompose`)."""
    if records.backend == "sim":
        median = round(metrics.step_time_median_ns)
        # every sim step is the plan's analytic timeline; with edge delays it is not the undelayed one
        return decompose(median, plan, cost, makespan_ns=median if delays is None else None)
    from harness.analysis.critical_path import median_step

    k = records.steps.index(median_step(records))
    step = metrics.steps[k]
    return decompose(step.step_time_ns, plan, cost, busy_ns=list(step.busy_ns))

def unused_cost_notes(schedule: Any, cost: Any) -> list[str]:
    """Notes for cost-model fields that ``schedule`` gives nothing to act on: ``overlap_ns`` /
    ``overlap_ratio`` without overlapped F&B groups (:mod:`harness.plan.groups`), and ``unshard_ns``,
    ``reshard_ns``, ``reduce_grad_ns`` without jobs of that kind (:mod:`harness.model.data_parallel`).
    Empty when every set field is used (or the model has none of them)."""
    from harness.schedule.groups import groups_of

    inner = getattr(cost, "inner", cost)  # CheckedCost wraps the user's model
    notes = []
    for name in ("overlap_ns", "overlap_ratio"):
        if getattr(inner, name, None) is not None and not groups_of(schedule):
            notes.append(f"{name} is set, but {schedule.name} has no overlapped F&B groups (OVERLAP_F_B): it changes nothing")
    fields = [(name, kind) for name, kind in (("unshard_ns", "UNSHARD"), ("reshard_ns", "RESHARD"), ("reduce_grad_ns", "REDUCE_GRAD"))
              if getattr(inner, name, 0)]
    kinds = {job.kind.value for _, _, job in schedule.jobs() if job.kind.is_data_parallel} if fields else set()
    for name, kind in fields:
        if kind not in kinds:
            notes.append(f"{name} is set, but {schedule.name} has no {kind} job: it changes nothing")
    return notes

def _check_records_match(records: RunRecords, plan: Any, case: PipelineCase) -> None:
    """Raise :class:`ConfigError` (naming the case and the first difference) unless every recorded
    step of ``records`` holds exactly the jobs of ``plan`` (rank and label), as a run would."""
    want = sorted((plan.rank[j], str(job)) for j, job in enumerate(plan.jobs))
    if records.num_ranks != plan.schedule.num_ranks:
        raise ConfigError(f"case {case.label()!r}: the records have {records.num_ranks} rank(s), the schedule "
                          f"{plan.schedule.num_ranks}")
    # per compute stream, the order the jobs ran in: a schedule with the same jobs in another order is another schedule
    plan_order: dict[str, list[str]] = {}
    for j in plan.order:
        name = plan.stream_names[plan.stream[j]]
        if name.endswith("/compute"):
            plan_order.setdefault(name, []).append(str(plan.jobs[j]))
    for step in records.steps:
        jobs = records.jobs_of_step(step)
        got = sorted((j.rank, j.label) for j in jobs)
        if got == want:
            ran: dict[str, list[tuple[int, int, str]]] = {}
            for j in jobs:
                if j.stream in plan_order:
                    ran.setdefault(j.stream, []).append((j.start_ns, j.end_ns, j.label))
            for name, order in plan_order.items():
                seen = [lab for _, _, lab in sorted(ran.get(name, []))]
                if seen != order:
                    k = next((i for i, (a, b) in enumerate(zip(seen, order)) if a != b), min(len(seen), len(order)))
                    raise ConfigError(
                        f"case {case.label()!r}: step {step} of the records ran {name}'s jobs in another order than "
                        f"{plan.schedule.name}'s: job {k + 1} is {seen[k] if k < len(seen) else 'missing'}, the schedule's "
                        f"{order[k] if k < len(order) else 'none'}: give the schedule the run used")
        if got != want:
            extra = sorted(set(got) - set(want))[:3]
            missing = sorted(set(want) - set(got))[:3]
            raise ConfigError(
                f"case {case.label()!r}: step {step} of the records is not this schedule's "
                f"({len(got)} jobs against {len(want)}; not in the schedule: "
                f"{', '.join(f'rank {r} {lab}' for r, lab in extra) or 'none'}; missing: "
                f"{', '.join(f'rank {r} {lab}' for r, lab in missing) or 'none'}): give the schedule, p, m and v the run used")

def _torch_lowering(case: PipelineCase, source: Any, options: dict[str, Any]) -> Any:
    """What PyTorch's runtime executes for the case (:func:`harness.distributed.torch_backend.lower_case`):
    its compute order lowered by PyTorch, or (option ``lowering="harness"``) the case's own placement.

    Raises:
        ConfigError: bad torch options (naming the case).
        ScheduleError: PyTorch's runtime refuses the schedule (naming the case's line, the rank and action).
    """
    from harness.distributed.torch_backend import lower_case
    from harness.model import comm

    try:
        lowered = None
        if options.get("lowering") == "harness":
            lowered = comm.lower(source, case.cost, "stream", True, case.comm_placement)
        return lower_case(source, options, lowered)
    except ConfigError as exc:
        raise _in_case(case, exc) from None
    except ScheduleError as exc:
        raise case.with_site(exc) from None

def _in_case(case: PipelineCase, exc: ConfigError) -> ConfigError:
    """``exc`` naming the case's line and label, once: a checked cost model's own errors name them already."""
    named = f"case {case.label()!r}: "
    message = str(exc)
    if message.startswith(named) or (case.declared_at and message.startswith(f"{case.declared_at}: {named}")):
        return case.with_site(exc)
    return case.with_site(ConfigError(f"{named}{message}"))

def run_case(
    case: PipelineCase,
    backend: str | BackendChoice = "auto",
    steps: range | ProfilingWindow | None = None,
    case_id: str | None = None,
    device_options: dict[str, Any] | None = None,
    comm_model: str | None = None,
    records: RunRecords | None = None,
) -> CaseResult:
    """Build, validate and run ``case`` on ``backend``; return records and metrics.

    Args:
        case: the pipeline to run.
        backend: ``"auto"``, ``"sim"``, ``"cpu"``, ``"cuda"``, ``"mpi"``, ``"torch"`` or a resolved choice.
        steps: the profiling window: a ``range`` of recorded steps (earlier steps
            are warm-up), a :class:`~harness.run.window.ProfilingWindow`, or ``None``
            (default) for measure-until-stable: one warm-up step, then steps until
            the median step time's relative standard error is 1 % (5 to 1000 steps,
            10 s of host time), or one recorded step on ``sim``, which is exact
            (:func:`window_for`).
        case_id: id for reports (default: the case's label).
        device_options: extra keyword arguments for the device constructor;
            they override the case's own ``device_options`` for this backend.
        comm_model: the communication model for a case that names none
            (:mod:`harness.model.comm`; default ``"stream"``).
        records: records recorded elsewhere, to analyse against the case's plan instead of
            running it (per-rank part files merged by :func:`harness.distributed.rank_merge.merge_part_files`;
            ``backend`` then names where they ran). Their jobs must be the plan's, step by step.

    Raises:
        ConfigError: not a case, a ``case_id`` that is not text or ``device_options`` that are
            not a dict, bad case values or backend name, ``comm_model="edge"`` on
            ``cpu`` or ``cuda`` (which run real transfers), a cost model answer that
            is no valid duration (ns), FLOP count or byte count (negative, NaN,
            infinite, not a number, 2**53 or more; see
            :class:`~harness.model.checked.CheckedCost`), a ``compute`` workload
            with a cost model that gives no FLOPs, or a cpu ``compute`` run that
            would take more than :data:`CPU_GEMM_LIMIT_S`.
        ScheduleError: the schedule is invalid or deadlocks (before anything runs);
            the message starts with the case's ``declared_at``.
        BackendUnavailable: the backend cannot run here.
        ExecutionError: the run failed or stalled.
    """
    if not isinstance(case, PipelineCase):
        raise ConfigError(f"run_case takes a PipelineCase, got {case!r} ({type(case).__name__}), e.g. PipelineCase('1F1B', stages=4, microbatches=8)")
    if case_id is not None and not isinstance(case_id, str):
        raise ConfigError(f"case {case.label()!r}: case_id must be text, got {case_id!r} ({type(case_id).__name__})")
    if device_options is not None and not isinstance(device_options, dict):
        raise ConfigError(f"case {case.label()!r}: device_options must be a dict of keyword arguments, got {device_options!r}")
    choice = backend if isinstance(backend, BackendChoice) else resolve_backend(backend)
    from harness.model import comm
    from harness.model.chains import check_cost_for_chains
    from harness.plan.delays import edge_delays

    window = window_for(choice.name, steps)
    case = _with_checked_cost(case)
    try:
        model = comm.check_comm_model(case.resolved_comm_model(comm_model))
        comm.check_backend(model, choice.name)
    except ConfigError as exc:
        raise _in_case(case, exc) from None
    source = case.compute_schedule(model)
    try:
        # mpi moves every activation between processes: send/receive jobs even where transfers cost nothing
        mpi_records = choice.name == "mpi" or (records is not None and records.backend == "mpi")
        wanted = True if mpi_records and model == "stream" and case.comm is None else case.comm
        check_cost_for_chains(case.cost, source)  # DualPipe's two chains: not every cost model describes them
        schedule = comm.lower(source, case.cost, model, wanted, case.comm_placement)
    except ConfigError as exc:  # too many jobs with the send/receive jobs, a cost model for one chain: say which case, and where
        raise _in_case(case, exc) from None
    notes = schedule_notes(source) + comm.comm_notes(source, case.cost, model, case.comm) + unused_cost_notes(source, case.cost)
    options = {**case.device_options.get(choice.name, {}), **(device_options or {})}
    ideal = schedule
    torch_lowering = None
    if choice.name == "torch" and records is None:  # the plan is what PyTorch's runtime executes
        torch_lowering = _torch_lowering(case, source, options)
        schedule = torch_lowering.schedule
    try:
        assumptions = case_assumptions(source, schedule, case.cost, model, case.comm_placement)
    except ConfigError as exc:  # a stage count the cost model's lists do not fit, or a custom model's bad answer
        raise case.with_site(exc) from None
    try:
        plan = build_plan(schedule)
    except ScheduleError as exc:  # a given schedule or file that is out of order or deadlocks: name the case's line
        raise case.with_site(exc) from None
    try:
        from harness.plan.timeline import durations

        durations(plan, case.cost)  # checks that costs do not vary by micro-batch (they would be flattened to the first)
        _check_cost_answers(plan, case.cost)
        if backend_workload(choice.name, case.workload) in ("matmul", "gemm"):
            step_flops = _step_flops(case, plan)
            _check_compute_flops(case, step_flops)
            if choice.name in ("cpu", "torch"):
                runs = (len(window) + window.start if isinstance(window, range)
                        else window.warmup_steps + getattr(window, "min_steps", 1))  # at least this many steps run
                _check_cpu_gemm_time(case, plan, step_flops, runs)
    except ConfigError as exc:  # the case's configuration: name its line, as its other errors do
        raise case.with_site(exc) from None
    delays = edge_delays(plan, case.cost) if model == "edge" else None
    probe = UsageProbe()
    if records is not None:  # recorded elsewhere: check they are this plan's jobs, then analyse them
        _check_records_match(records, plan, case)
        notes += records.device.get("notes", [])
    elif choice.name == "mpi":  # one pipeline rank per MPI process; every process gets the merged records
        from harness.distributed.mpi import run_plan

        records = run_plan(plan, case.cost, window, case.workload, options)
        notes += records.device.get("notes", [])
    elif torch_lowering is not None:  # PyTorch's own runtime, one pipeline rank per process
        from harness.distributed import torch_backend

        records = torch_backend.run_plan(torch_lowering, case.cost, window, case.workload, options, label=case.label())
        torch_backend.beside_sims(records, plan, build_plan(ideal), case.cost, str(ideal.params.get("comm_placement", "none")))
        notes += records.device.get("notes", [])
    else:
        device = create_device(choice.name, case.workload, **options)
        try:
            records = execute(plan, device, case.cost, window, delays=delays)
        finally:
            device.close()
    usage = probe.finish(int(records.device.get("siblings_cpu_ns", 0)))
    metrics = compute_metrics(records)
    predicted = predicted_step_ns(plan, case.cost, records, delays)
    flags: list[Flag] = []
    if records.backend != "sim" and metrics.step_time_stats is not None:
        busy = plan.schedule.num_ranks if records.device.get("workload") == "matmul" else 0
        flags = stability_flags(metrics.step_time_stats, records.window, usage, busy_streams=busy)
    try:  # a custom model's memory answers are checked here: name the case's line
        memory = memory_profile(records, case.cost, plan.schedule.num_stages, plan.schedule.stage_to_rank, case.memory_limit_bytes)
    except ConfigError as exc:
        raise case.with_site(exc) from None
    return CaseResult(
        case_id=safe_text(case_id, "case id") if case_id else case.label(),
        label=case.label(),
        schedule=schedule,
        records=records,
        metrics=metrics,
        # mpi and torch move real buffers: the closed forms' free transfers do not hold
        theory={} if records.backend in ("mpi", "torch") else theory_for(case, plan, records.device.get("workload"), model, source),
        cost=case.cost.describe(),
        backend_reason=choice.reason,
        plan=plan,
        warnings=notes + trust_warnings(records, predicted if records.backend in ("cpu", "mpi") else None) + (
            [f"memory_limit_bytes={case.memory_limit_bytes} is set, but the cost model ({type(getattr(case.cost, 'inner', case.cost)).__name__}) "
             "has no memory model, so nothing was checked against it: give FixedCost mem_F/mem_static or use TransformerCost"]
            if case.memory_limit_bytes is not None and not has_memory_model(case.cost) else []),
        flags=flags,
        usage=usage,
        fidelity=fidelity(metrics.step_time_stats, predicted) if predicted and metrics.step_time_stats else None,
        memory=memory,
        decomposition=_decomposition(records, metrics, plan, case.cost, delays),
        cost_model=case.cost,
        critical_path=critical_path(records, plan),
        waiting=waiting(records, plan),
        comm_model=model,
        options={k: v for k, v in case.options.items() if isinstance(v, (bool, int, float, str))},
        assumptions=assumptions,
    )
