"""The ``torch`` backend: a case's schedule on PyTorch's own pipelining runtime, one pipeline rank per process.

What runs (docs/torch.md):

* the case's schedule (any builder's, or a PyTorch CSV) goes to ``_PipelineScheduleRuntime`` as
  compute actions, and PyTorch lowers the communication itself (option ``lowering="torch"``,
  the default: what a PyTorch user gets); ``lowering="harness"`` hands it the case's own
  placement of sends and receives instead (:mod:`harness.distributed.torch_lowering`);
* each rank builds synthetic stages that follow the case's cost model
  (:mod:`harness.distributed.torch_stages`) inside ``torch.distributed.pipelining.PipelineStage``,
  over gloo on CPU and NCCL where a GPU is usable, and runs real training steps (loss, backward,
  ``optimizer.step()``) through rank 0's profiling window (:mod:`harness.distributed.torch_rank`);
* every action is timed on one time base by hooks on the runtime (:mod:`harness.distributed.torch_timing`),
  the ranks' clocks aligned onto rank 0's, the records gathered to rank 0 and assembled through
  ``import-torch``'s own path (:mod:`harness.distributed.torch_records`): records with backend
  ``torch``, what PyTorch's lowering added per rank, and beside them the sim of the same
  lowered order and of the ideal schedule (:func:`beside_sims`).

Launched with ``torchrun --nproc-per-node=P -m pytest ... --backend torch`` (or ``-m harness run``),
every process runs its rank in-process; started without torchrun, each case launches its ``P``
ranks itself through torch's elastic launcher (:mod:`harness.distributed.torch_launch`), or, with
``launch=False``, refuses with the exact torchrun command. Only this module's callers that run the
backend import torch; without it :func:`check_torch` raises
:class:`~harness.errors.BackendUnavailable` with the install command.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping
from typing import Any

from harness.errors import ConfigError
from harness.model.cost import CostModel
from harness.records import RunRecords
from harness.run.environment import BackendChoice
from harness.run.window import FixedWindow, ProfilingWindow
from harness.schedule.model import Job, JobKind, Schedule

__all__ = ["TorchOptions", "activation_bytes", "beside_sims", "check_torch", "check_world", "lower_case", "run", "run_plan", "stage_costs"]

#: The backend's own workload names: ``timed`` and ``compute``, and the local devices' names for them.
_WORKLOADS = {"timed": "timed", "compute": "compute", "sleep": "timed", "spin": "timed", "matmul": "compute", "gemm": "compute"}


class TorchOptions:
    """The ``torch`` backend's options (``device_options={"torch": {...}}``); its parameters are their names.

    Args:
        lowering: ``"torch"`` (PyTorch's ``_prepare_schedule_with_comms`` lowers the compute order;
            default) or ``"harness"`` (the case's ``comm_placement`` handed over lowered).
        defer_recv: PyTorch's ``defer_pp_recv=True``: refused, with the reason
            (:data:`~harness.distributed.torch_lowering.DEFER_RECV_REFUSED`).
        trace_dir: also run ``torch.profiler`` over the recorded steps and write ``rank<r>.json`` traces
            there (what ``python -m harness import-torch`` reads: the same records).
        timeout_s: the process group's timeout (s): a lost or stalled rank ends every wait with an error
            naming it within this.
        clock_exchanges: clock ping-pongs per rank at each end of a case (the smallest round trip is kept).
        lr: the SGD learning rate of every stage.
        device: ``"auto"`` (a GPU per local rank where usable, NCCL; else CPU, gloo), ``"cpu"`` or ``"cuda"``.
        launch: without torchrun, launch the ranks through torch's elastic launcher (default); ``False``:
            refuse and say the torchrun command.
        master_port: the launcher's rendezvous port on localhost; ``None`` (default): one the OS picks free.
        threads: torch's intra-op threads per rank.
        seed: seeds the weights and the data.

    Raises:
        ConfigError: a value out of range (:meth:`check_options`).
    """

    @classmethod
    def of(cls, options: Mapping[str, Any] | None) -> TorchOptions:
        """The options a case or caller gives, checked: names, then values.

        Raises:
            ConfigError: an option the backend has none of (names those it has), or a bad value.
        """
        from harness.run.device import check_class_options

        given = dict(options or {})
        check_class_options("torch", cls, given)
        return cls(**given)

    def __init__(self, lowering: str = "torch", defer_recv: bool = False, trace_dir: str | None = None, timeout_s: float = 60.0,
                 clock_exchanges: int = 32, lr: float = 0.1, device: str = "auto", launch: bool = True,
                 master_port: int | None = None, threads: int = 1, seed: int = 0) -> None:
        self.check_options(locals())
        self.lowering, self.defer_recv, self.trace_dir, self.timeout_s = lowering, defer_recv, trace_dir, float(timeout_s)
        self.clock_exchanges, self.lr, self.device, self.launch = clock_exchanges, float(lr), device, launch
        self.master_port, self.threads, self.seed = master_port, threads, seed

    @staticmethod
    def check_options(options: Mapping[str, object]) -> None:
        """Check option values without running anything.

        Raises:
            ConfigError: an unknown ``lowering`` or ``device``, ``defer_recv=True`` (refused: the reason),
                a timeout or learning rate that is not a positive number, counts out of range, a
                ``trace_dir`` that is not a path, a ``master_port`` that is no port.
        """
        from harness.distributed.torch_lowering import DEFER_RECV_REFUSED, LOWERINGS

        def whole(name: str, lo: int, hi: int) -> None:
            v = options.get(name)
            if v is not None and not (isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi):
                raise ConfigError(f"the torch backend's {name} must be a whole number from {lo} to {hi}, got {v!r}")

        if options.get("lowering", "torch") not in LOWERINGS:
            raise ConfigError(f"the torch backend's lowering must be 'torch' (PyTorch lowers the compute order) or 'harness' "
                              f"(the case's own placement of sends and receives), got {options['lowering']!r}")
        if options.get("defer_recv", False) not in (False, True):
            raise ConfigError(f"the torch backend's defer_recv must be True or False, got {options['defer_recv']!r}")
        if options.get("defer_recv"):
            raise ConfigError(f"the torch backend refuses defer_recv=True (PyTorch's defer_pp_recv): {DEFER_RECV_REFUSED}")
        for name in ("timeout_s", "lr"):
            v = options.get(name)
            if v is not None and not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0):
                raise ConfigError(f"the torch backend's {name} must be a positive number, got {v!r}")
        whole("clock_exchanges", 1, 10_000)
        whole("threads", 1, 1024)
        whole("seed", 0, 2**31 - 1)
        whole("master_port", 1, 65535)
        if options.get("device", "auto") not in ("auto", "cpu", "cuda"):
            raise ConfigError(f"the torch backend's device must be 'auto', 'cpu' or 'cuda', got {options['device']!r}")
        if options.get("launch", True) not in (False, True):
            raise ConfigError(f"the torch backend's launch must be True or False, got {options['launch']!r}")
        td = options.get("trace_dir")
        if td is not None and not (isinstance(td, str) and td.strip()):
            raise ConfigError(f"the torch backend's trace_dir must be a folder's path, got {td!r}")


def check_torch(requested: str = "torch") -> BackendChoice:
    """The ``torch`` backend's :class:`BackendChoice`, saying how its ranks start here.

    Raises:
        BackendUnavailable: torch (with ``torch.distributed.pipelining``) is missing; says the install command.
    """
    from harness.distributed.torch_launch import in_torchrun, require_torch, torchrun_world

    version = require_torch()
    if in_torchrun():
        rank, size = torchrun_world()
        how = f"under torchrun: rank {rank} of {size} process(es), one pipeline rank each"
    else:
        how = "each case starts its ranks through torch's elastic launcher (one pipeline rank per process)"
    return BackendChoice(requested, "torch", f"requested: PyTorch {version}'s pipelining runtime; {how}")


def _kinds(schedule: Schedule) -> set[JobKind]:
    return {job.kind for row in schedule.ranks for job in row if job is not None}


def stage_costs(schedule: Schedule, cost: CostModel) -> tuple[Any, ...]:
    """Per stage its :class:`~harness.distributed.torch_stages.StageCost` from ``cost`` (ns; FLOPs of ``F``),
    asking only for the kinds ``schedule`` runs."""
    from harness.distributed.torch_stages import StageCost

    n = schedule.num_stages
    kinds = _kinds(schedule)

    def d(s: int, kind: JobKind) -> int:
        if kind not in kinds:
            return 0
        return int(cost.duration_ns(Job(s, kind, None if kind is JobKind.OPT else 0), n))

    return tuple(StageCost(d(s, JobKind.F), d(s, JobKind.B), d(s, JobKind.I), d(s, JobKind.W), d(s, JobKind.OPT),
                           float(cost.flops(Job(s, JobKind.F, 0), n))) for s in range(n))


def activation_bytes(schedule: Schedule, cost: CostModel) -> tuple[int, str | None]:
    """The bytes of the activation every stage sends (the largest the cost model gives between two
    stages: the synthetic stages keep one shape), and a note where the cost model gives several."""
    n = schedule.num_stages
    sizes = [int(cost.nbytes(Job(s, JobKind.SEND_F, 0), n)) for s in range(max(1, n - 1))]
    big = max(sizes) if sizes else 0
    note = None
    if len(set(sizes)) > 1:
        note = (f"torch: the synthetic stages move one activation size between every two stages: {big:,} bytes, the largest "
                f"the cost model gives ({min(sizes):,} to {big:,} bytes)")
    return max(4, big), note


def lower_case(source: Schedule, options: Mapping[str, Any], lowered: Schedule | None = None) -> Any:
    """What PyTorch's runtime runs for the case's compute schedule ``source`` under ``options``
    (:func:`harness.distributed.torch_lowering.lower_schedule`; ``lowered``: the case's own placement, for
    ``lowering="harness"``).

    Raises:
        ConfigError: bad options (:meth:`TorchOptions.check_options`).
        ScheduleError: PyTorch's runtime refuses the schedule (its error, translated, naming the rank and action),
            or the sends and receives do not pair.
    """
    from harness.distributed.torch_lowering import lower_schedule

    opts = TorchOptions.of(options)
    return lower_schedule(source, opts.lowering, lowered)


def check_world(p: int, label: str = "case") -> None:
    """Under torchrun, refuse a case whose ``p`` ranks are not the number of processes torchrun started
    (nothing outside torchrun). Every process raises the same error: a caller that prints it may print it on
    rank 0 only (``python -m harness run`` does).

    Raises:
        ConfigError: the two counts and the exact torchrun command for ``p`` (:func:`~harness.distributed.torch_launch.torchrun_command`).
    """
    from harness.distributed.torch_launch import in_torchrun, torchrun_command, torchrun_world

    if not in_torchrun():
        return
    _, world = torchrun_world()
    if world != p:
        raise ConfigError(f"{label}: the torch backend runs one pipeline rank per process: this case has p={p} ranks but "
                          f"torchrun started {world} process(es); run it with {torchrun_command(p)}")


def run(lowering: Any, cost: CostModel, window: range | ProfilingWindow, workload: str | None = None,
        options: Mapping[str, Any] | None = None, label: str = "case", timing: str = "hooks") -> Any:
    """Run ``lowering`` on PyTorch's runtime and return the whole run (:class:`~harness.distributed.torch_records.TorchBackendRun`).

    Args:
        lowering: :func:`lower_case`'s result.
        cost: the case's cost model (durations, FLOPs, bytes).
        window: the profiling window (rank 0's decides).
        workload: ``timed`` (default) or ``compute`` (or a local device's name for them).
        options: :class:`TorchOptions`' arguments.
        label: the case, for messages.
        timing: ``"hooks"`` (every action timed); ``"none"`` or ``"ab"`` (step times only, without the hooks or
            with them on one step of each pair: the overhead benchmark, :class:`~harness.distributed.torch_rank.RankConfig`).

    Raises:
        ConfigError: bad options or workload; under torchrun, another number of processes than the schedule's
            ranks, or without torchrun and ``launch=False`` (both say the torchrun command).
        BackendUnavailable: torch is missing (the install command).
        ExecutionError: a rank failed, stalled past ``timeout_s`` or died (names it), or the launcher failed.
    """
    from harness.distributed.torch_launch import in_torchrun, launch, require_torch, torchrun_command

    require_torch()
    from harness.distributed.torch_rank import RankConfig, run_rank
    from harness.distributed.torch_stages import activation_shape

    opts = TorchOptions.of(options)
    name = _WORKLOADS.get((workload or "timed").strip().lower())
    if name is None:
        raise ConfigError(f"the torch backend runs workload 'timed' (each part lasts its cost-model duration) or 'compute' "
                          f"(Linear layers sized from the FLOPs), got {workload!r}")
    schedule = lowering.schedule
    p = schedule.num_ranks
    nbytes, _ = activation_bytes(schedule, cost)
    rows, width = activation_shape(nbytes)
    cfg = RankConfig(lowering, stage_costs(schedule, cost), rows, width, name, opts.device,
                     FixedWindow(window) if isinstance(window, range) else window, opts.timeout_s, opts.clock_exchanges,
                     opts.lr, opts.seed, opts.trace_dir, timing, opts.threads, uuid.uuid4().hex, label)
    if in_torchrun():
        check_world(p, label)
        out = run_rank(cfg)
        cpu_self = True
    else:
        if not opts.launch:
            raise ConfigError(f"{label}: the torch backend runs one pipeline rank per process, and this process was not "
                              f"started by torchrun (launch=False): run {torchrun_command(p)}")
        out = launch(run_rank, cfg, p, port=opts.master_port, rdzv_timeout_s=max(120.0, opts.timeout_s), what=label)
        cpu_self = False
    rec = out.records
    if timing != "hooks":
        return out
    cpus = rec.device.get("ranks_cpu_ns") or []
    # the case's own other processes: under torchrun the other ranks (this one is counted as the case's own);
    # launched, every rank, over its whole life (its start-up falls inside the case too)
    rec.device["siblings_cpu_ns"] = (sum(c[0] for q, c in enumerate(cpus) if q and c[2]) if cpu_self
                                     else sum(c[1] for c in cpus if c[2]))
    rec.device["torch"] = {**rec.device.get("torch", {}), "started": "torchrun" if cpu_self else "elastic launcher"}
    return out


def run_plan(lowering: Any, cost: CostModel, window: range | ProfilingWindow, workload: str | None = None,
             options: Mapping[str, Any] | None = None, label: str = "case") -> RunRecords:
    """:func:`run`'s records (backend ``torch``, identical on every rank under torchrun).

    Raises:
        as :func:`run`.
    """
    return run(lowering, cost, window, workload, options, label).records  # type: ignore[no-any-return]


def beside_sims(records: RunRecords, lowered_plan: Any, ideal_plan: Any, cost: CostModel, placement: str) -> dict[str, Any]:
    """The sim of the same schedule beside the run, in ``records.device["torch"]["sim"]`` (and returned), ns:
    ``lowered_step_ns`` (PyTorch's executed order: overlapped groups one after the other, its placement of
    sends and receives) and ``ideal_step_ns`` (the case's schedule under its own comm model and placement);
    and per rank, in the sim of the lowered order, ``rank_span_ns`` (the end of the rank's last job, its
    comm streams' included) and ``rank_busy_ns`` (the cost-model durations of its compute jobs, summed): the
    page and the summary split each rank's measured step against them (:mod:`harness.report.torch_beside`)."""
    from harness.plan.timeline import simulate

    lowered = simulate(lowered_plan, cost)
    p = lowered_plan.schedule.num_ranks
    span, busy = [0] * p, [0] * p
    names, owner = lowered_plan.stream_names, lowered_plan.stream_rank
    for j, s in enumerate(lowered_plan.stream):
        r = owner[s]
        span[r] = max(span[r], int(lowered.end[j]))
        if names[s].endswith("/compute"):
            busy[r] += int(lowered.duration[j])
    sims = {"lowered_step_ns": int(lowered.makespan_ns), "ideal_step_ns": int(simulate(ideal_plan, cost).makespan_ns),
            "ideal_placement": placement, "rank_span_ns": span, "rank_busy_ns": busy}
    records.device.setdefault("torch", {})["sim"] = sims
    return sims
