"""One pipeline rank of a ``torch`` backend run: PyTorch's own runtime runs the case's schedule.

:func:`run_rank` is what each process runs, under torchrun or started by
:func:`harness.distributed.torch_launch.launch`. It

1. joins the process group (gloo on CPU, NCCL where a GPU is used, a gloo group beside it for
   the control messages, :mod:`harness.distributed.torch_control`), with the run's timeout, so a
   lost peer ends every rank's wait with an error instead of a hang; under torchrun the group
   is made once and kept for the process's later cases;
2. builds its stages (:mod:`harness.distributed.torch_stages`) as ``PipelineStage`` objects with
   static shapes (no metadata inference, which would run the timed parts once more; every stage
   but the first takes an input that requires grad, or PyTorch sends no gradient back);
3. gives ``_PipelineScheduleRuntime`` the compute actions (PyTorch lowers them) or the lowered
   list (:mod:`harness.distributed.torch_lowering`), and checks that it lowered them as predicted;
4. runs the steps of rank 0's profiling window (:class:`~harness.distributed.synced_window.SyncedWindow`),
   each a real training step after a barrier: ``zero_grad``, ``schedule.step()`` (losses on the
   last stage, backward), then ``optimizer.step()`` (one SGD per stage, each under ``PP:<stage>OPT``:
   its ``OPT`` job), every action timed by the hooks (:mod:`harness.distributed.torch_timing`)
   and, with a trace folder, under ``torch.profiler`` too (its traces are what ``import-torch`` reads);
5. estimates every rank's clock against rank 0's before and after the steps, and gathers
   everything on rank 0, which assembles the run (:mod:`harness.distributed.torch_records`).

Test hook: :data:`FAULT_ENV`. Imports torch.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from harness.distributed.synced_window import SyncedWindow
from harness.distributed.torch_control import TorchControl
from harness.distributed.torch_launch import torchrun_command, write_rank_error
from harness.distributed.torch_lowering import TorchLowering
from harness.distributed.torch_stages import StageCost, busy_ns, make_stage_module, tell_full_backward
from harness.distributed.torch_timing import ActionTimer, StepTiming
from harness.errors import ConfigError, ExecutionError, HarnessError
from harness.run.window import MAX_STEPS, FixedWindow

__all__ = ["FAULT_ENV", "LOST_CONNECTION", "RankConfig", "RankPart", "lost_connection", "run_rank"]

#: Test hook: ``RANK:WHAT@ACTION[#STEP]`` makes rank ``RANK`` ``kill`` itself (SIGKILL, a lost rank),
#: ``raise``, or ``stall`` (sleep an hour) when it enters action ``ACTION`` of step ``STEP`` (default 0),
#: e.g. ``1:kill@1F2#1``.
FAULT_ENV = "HARNESS_TORCH_TEST_FAULT"

#: Test hook: called with ``(range name, step)`` as each action's range is entered, before it is timed (in
#: this process's runs; ``None``: off). A test calibrates with it, e.g. idling before each action as a long
#: part would.
BEFORE_ACTION: Callable[[str, int], None] | None = None


@dataclass(frozen=True)
class RankConfig:
    """What every rank of one run needs (pickled to spawned workers).

    Attributes:
        lowering: what the runtime is given and must execute.
        costs: per stage, its durations (ns) and FLOPs.
        rows, width: a micro-batch's activation shape (fp32).
        workload: ``"timed"`` or ``"compute"``.
        device: ``"auto"`` (a GPU per local rank where usable, else CPU), ``"cpu"`` or ``"cuda"``.
        window: the profiling window (rank 0's decides).
        timeout_s: the process group's timeout (s): the longest any wait may take.
        clock_exchanges: ping-pongs per rank at each end of the run.
        lr: the SGD learning rate.
        seed: seeds the weights (stage ``s``: ``seed + s``) and the data.
        trace_dir: where ``rank<r>.json`` ``torch.profiler`` traces go (``None``: no profiler).
        timing: ``"hooks"`` (every action timed), ``"none"`` (PyTorch's own ranges only; step times
            only) or ``"ab"`` (the hooks installed on one step of each pair, which one drawn alike on
            every rank; step times only: the instrumentation-overhead benchmark).
        threads: torch's intra-op threads per rank.
        run_id: this run's id (the store key of its first failure).
        label: the case, for messages.
    """

    lowering: TorchLowering
    costs: tuple[StageCost, ...]
    rows: int
    width: int
    workload: str = "timed"
    device: str = "cpu"
    window: Any = field(default_factory=lambda: FixedWindow(range(1, 3)))
    timeout_s: float = 60.0
    clock_exchanges: int = 32
    lr: float = 0.1
    seed: int = 0
    trace_dir: str | None = None
    timing: str = "hooks"
    threads: int = 1
    run_id: str = "run"
    label: str = "case"


@dataclass
class RankPart:
    """What one rank sends rank 0 after its steps (times ns on its own clock).

    Attributes:
        rank, host: who.
        device: ``"cpu"``, ``"cuda:0"``...
        workload: the device's own name of the workload (``sleep``/``matmul`` on CPU, ``spin``/``gemm`` on GPU).
        stages: the stages it holds.
        executed: the actions its runtime executed (``pipeline_order_with_comms``).
        steps: the recorded steps' timings (empty with ``timing="none"``).
        step_times_ns: per recorded step, ``step()`` entry to the training step's end (``timing="none"`` too).
        step_modes: per recorded step, ``"hooks"`` or ``"none"`` (how it was timed).
        losses: per step run, the mean loss over the micro-batches (ranks holding the last stage).
        weights_before, weights_after: per parameter, its sum before the first and after the last step.
        cpu_ns: this process's CPU time over the steps; cpu_total_ns: since the process started.
        epoch_minus_clock_ns: ``time.time_ns() - perf_counter_ns()``, read once.
        torch: torch's version.
        clock_start, clock_end: on rank 0, the clock exchanges per other rank.
    """

    rank: int
    host: str
    device: str
    workload: str
    stages: list[int]
    executed: list[str]
    steps: list[StepTiming] = field(default_factory=list)
    step_times_ns: list[int] = field(default_factory=list)
    step_modes: list[str] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    weights_before: list[float] = field(default_factory=list)
    weights_after: list[float] = field(default_factory=list)
    cpu_ns: int = 0
    cpu_total_ns: int = 0
    epoch_minus_clock_ns: int = 0
    torch: str = ""
    clock_start: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)
    clock_end: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)


def _fault(rank: int) -> tuple[str, str, int] | None:
    text = os.environ.get(FAULT_ENV, "").strip()
    if not text:
        return None
    who, _, rest = text.partition(":")
    if who.strip() != str(rank):
        return None
    what, _, where = rest.partition("@")
    action, _, step = where.partition("#")
    return what.strip(), action.strip(), int(step) if step.strip() else 0


def _join(cfg: RankConfig, rank: int, world: int) -> tuple[torch.device, Any, Any, bool, list[Any]]:
    """This rank's device, its pipeline group and its control group (``None``: the default group), whether this
    call made the default group (launched: it is destroyed at the end of the run) and the groups it made for
    this run alone (under torchrun the default group outlives the case: the case's own groups carry its timeout)."""
    local = int(os.environ.get("LOCAL_RANK", str(rank)))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if cfg.device == "cuda" and gpus < local_world:
        raise ConfigError(f"torch: rank {rank}: device 'cuda' needs a GPU per rank of this host (NCCL refuses two ranks on one "
                          f"GPU), but torch sees {gpus} GPU(s) for {local_world} local rank(s)")
    use_cuda = cfg.device == "cuda" or (cfg.device == "auto" and gpus >= local_world)  # every rank alike
    timeout = timedelta(seconds=cfg.timeout_s)
    dev = torch.device("cuda", local) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(dev)
    made = False
    if not dist.is_initialized():
        if use_cuda:
            dist.init_process_group("nccl", timeout=timeout, device_id=dev)
        else:
            dist.init_process_group("gloo", timeout=timeout)
        made = True
    default = str(dist.get_backend())
    want = "nccl" if use_cuda else "gloo"
    own: list[Any] = []

    def group(backend: str) -> Any:
        if made and default == backend:
            return None
        g = dist.new_group(backend=backend, timeout=timeout)
        own.append(g)
        return g

    control = group("gloo")
    pipe = control if want == "gloo" else group(want)
    return dev, pipe, control, made, own


def run_rank(cfg: RankConfig) -> Any:
    """Run this process's rank of one case (module doc); ``RANK``/``WORLD_SIZE`` as torchrun sets them.

    Returns:
        On rank 0 the assembled run (:class:`~harness.distributed.torch_records.TorchBackendRun`); under
        torchrun every rank gets it (rank 0 sends it), started by the launcher the others return ``None``.

    Raises:
        ConfigError: the number of processes differs from the schedule's ranks (says the torchrun command).
        ExecutionError: this or another rank failed (names the rank, step and action), or a wait timed out.
    """
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    p = len(cfg.lowering.executed)
    launched = "HARNESS_TORCH_ERROR_DIR" in os.environ
    if world != p:
        raise ConfigError(f"{cfg.label}: the schedule has p={p} ranks but {world} process(es) were started; run it with "
                          f"{torchrun_command(p)} (one pipeline rank per process)")
    torch.set_num_threads(max(1, cfg.threads))
    made = False
    own: list[Any] = []
    control: TorchControl | None = None
    try:
        dev, pipe, group, made, own = _join(cfg, rank, world)
        control = TorchControl(group, rank, world, cfg.run_id)
        out = _run(cfg, rank, world, dev, pipe, control)
        if not launched:  # under torchrun every process returns the run
            out = control.bcast(out, "the assembled run")
        return out
    except BaseException as exc:
        if launched:
            write_rank_error(rank, exc)
        if control is not None and isinstance(exc, Exception) and control.first_failure(0.5) is None:
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            control.report_failure(text.removeprefix("torch: ") if text.startswith(f"torch: rank {rank}") else
                                   f"rank {rank}: {type(exc).__name__}: {text}")
        raise
    finally:
        for g in own:
            with contextlib.suppress(Exception):  # a failed run: nothing to clean on a broken group
                dist.destroy_process_group(g)
        if made and launched and dist.is_initialized():  # under torchrun the default group serves the later cases too
            with contextlib.suppress(Exception):
                dist.destroy_process_group()


def _checksums(params: list[Any]) -> list[float]:
    return [float(q.detach().double().sum().cpu()) for q in params]


def _where(exc: BaseException, rank: int, step: int, timer: ActionTimer | None, stage_rank: tuple[int, ...]) -> str:
    """``exc`` with the step, the action running, and the peer a failed wait was for; where the error says
    that peer's connection was lost (:func:`lost_connection`), first that the peer stopped answering: under
    torchrun a survivor has no other way to know that a rank died (torchrun stops the others once it sees
    one end, naming it in its own "Root Cause")."""
    msg = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    name = timer.failed_action if timer is not None else None
    if name is None:
        return f"rank {rank}, step {step}: {msg}"
    from harness.schedule.model import parse_job

    peers = set()
    for part in name.removesuffix("OVERLAP_F_B").strip("()").split(";"):
        try:
            job = parse_job(part)
        except HarnessError:
            continue
        s, kind = job.stage, job.kind.value
        other = {"F": s - 1, "RECV_F": s - 1, "I": s + 1, "B": s + 1, "RECV_B": s + 1, "SEND_F": s + 1, "SEND_B": s - 1}.get(kind)
        if other is not None and 0 <= other < len(stage_rank) and stage_rank[other] != stage_rank[s]:
            peers.add(stage_rank[other])
    who = " or ".join(map(str, sorted(peers)))
    waiting = f" (waiting for its input from rank {who})" if peers else ""
    lost = f"rank {who} stopped answering (died?): " if peers and lost_connection(str(exc)) else ""
    return f"{lost}rank {rank}, step {step}, action {name}{waiting}: {msg}"


#: What gloo says when the peer's process is gone (its sockets closed by the OS): the peer died, or
#: exited, mid-transfer. Under torchrun nothing else tells a survivor that a rank died.
LOST_CONNECTION = ("Connection reset by peer", "Connection closed by peer", "Broken pipe")


def lost_connection(text: str) -> bool:
    """Whether an error's ``text`` says the peer's connection was lost (:data:`LOST_CONNECTION`)."""
    return any(s in text for s in LOST_CONNECTION)


def _profiler(cfg: RankConfig, rank: int, dev: torch.device, warmup: int) -> Any:
    """``torch.profiler`` over the recorded steps (``ProfilerStep#N`` = step ``N``), writing ``rank<r>.json``."""
    if cfg.trace_dir is None:
        return None
    from torch.profiler import ProfilerActivity, profile, schedule

    os.makedirs(cfg.trace_dir, exist_ok=True)
    path = os.path.join(cfg.trace_dir, f"rank{rank}.json")
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "won't be using warmup" when the window has no warm-up step
        sched = schedule(skip_first=max(0, warmup - 1), wait=0, warmup=1 if warmup >= 1 else 0, active=MAX_STEPS + 1)
    return profile(activities=acts, record_shapes=False, schedule=sched, on_trace_ready=lambda prof: prof.export_chrome_trace(path))


def _run(cfg: RankConfig, rank: int, world: int, dev: torch.device, pipe: Any, control: TorchControl) -> Any:
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining import schedules as pp

    low = cfg.lowering
    m = low.schedule.num_microbatches
    num_stages = len(low.stage_rank)
    mine = [s for s, r in enumerate(low.stage_rank) if r == rank]
    stages, opts = [], {}
    all_params: list[Any] = []
    for s in mine:
        mod, dw = make_stage_module(cfg.workload, cfg.costs[s], cfg.rows, cfg.width, seed=cfg.seed + s)
        mod.to(dev)
        params = list(mod.parameters())
        all_params += params
        opts[s] = torch.optim.SGD(params, lr=cfg.lr)
        inp = torch.zeros(cfg.rows, cfg.width, device=dev, requires_grad=s > 0)
        out = torch.zeros(cfg.rows, cfg.width, device=dev, requires_grad=True)
        st = PipelineStage(mod, s, num_stages, dev, input_args=(inp,), output_args=(out,), group=pipe, dw_builder=dw)
        if dw is not None:
            tell_full_backward(st, mod)
        stages.append(st)
    sched = pp._PipelineScheduleRuntime(stages, m, loss_fn=torch.nn.functional.mse_loss)
    actions = {r: [pp._Action.from_str(t) for t in row] for r, row in enumerate(low.given)}
    if low.lowered:
        sched._prepare_schedule_with_comms(actions, format="compute_comms")
    else:
        sched.pipeline_order = actions
        sched._prepare_schedule_with_comms(actions)
    executed = [str(a) for a in sched.pipeline_order_with_comms[rank]]
    if executed != list(low.executed[rank]):
        k = next((i for i, (a, b) in enumerate(zip(executed, low.executed[rank])) if a != b), min(len(executed), len(low.executed[rank])))
        raise ExecutionError(f"torch: rank {rank}: the runtime lowered the schedule otherwise than predicted before the run "
                             f"(action {k}: {executed[k] if k < len(executed) else 'none'} vs "
                             f"{low.executed[rank][k] if k < len(low.executed[rank]) else 'none'})")
    gen = torch.Generator().manual_seed(1234 + cfg.seed)
    x = torch.randn(m * cfg.rows, cfg.width, generator=gen).to(dev)
    y = torch.randn(m * cfg.rows, cfg.width, generator=gen).to(dev)
    has_first, has_last = 0 in mine, num_stages - 1 in mine
    opt_stages = low.optimizer[rank]
    fault = _fault(rank)
    timer = ActionTimer(stages, sched, dev) if cfg.timing in ("hooks", "ab") else None
    if fault is not None:
        if timer is None:
            raise ConfigError(f"the {FAULT_ENV} test hook needs the timing hooks")

        def on_action(name: str, step: int, fault: tuple[str, str, int] = fault) -> None:
            what, action, at = fault
            if name == f"PP:{action}" and step == at:
                if what == "kill":
                    os.kill(os.getpid(), signal.SIGKILL)
                elif what == "stall":
                    time.sleep(3600)
                raise RuntimeError(f"raised by the {FAULT_ENV} test hook in action {action}")

        timer.on_action = on_action
    elif timer is not None and BEFORE_ACTION is not None:
        timer.on_action = BEFORE_ACTION
    part = RankPart(rank, socket.gethostname(), str(dev), _workload_name(cfg.workload, dev), mine, executed,
                    weights_before=_checksums(all_params), torch=str(torch.__version__),
                    epoch_minus_clock_ns=time.time_ns() - time.perf_counter_ns())
    clock = time.perf_counter_ns
    part.clock_start = control.ping_pong(clock, cfg.clock_exchanges)
    window = SyncedWindow(cfg.window, control)
    prof = _profiler(cfg, rank, dev, cfg.window.warmup_steps)
    cpu0 = time.process_time_ns()
    step = -1
    with contextlib.ExitStack() as stack:
        if timer is not None and cfg.timing == "hooks":
            stack.enter_context(timer)
        if prof is not None:
            stack.enter_context(prof)
        for step in window.steps():
            on = timer if timer is not None and (cfg.timing == "hooks" or _hooks_this_step(step, cfg.seed)) else None
            if on is not None and cfg.timing == "ab":
                on.__enter__()
            for opt in opts.values():
                opt.zero_grad(set_to_none=True)
            control.barrier(f"the start of step {step}")
            losses: list[torch.Tensor] = []
            kw: dict[str, Any] = {"target": y, "losses": losses} if has_last else {}
            t0 = clock()
            try:
                if on is not None:
                    on.begin_step(step)
                if has_first:
                    sched.step(x, **kw)
                else:
                    sched.step(**kw)
                if on is not None:
                    on.end_call()
                _optimizer_steps(opts, opt_stages, on, cfg, dev)
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                timing = on.end_step() if on is not None else None
            except HarnessError:
                raise
            except Exception as exc:
                where = _where(exc, rank, step, timer, low.stage_rank)
                first = control.first_failure(0.5)
                if first is not None and first[0] != rank:  # another rank failed first: say that one (it did not die)
                    then = where.removeprefix(f"rank {first[0]} stopped answering (died?): ")
                    raise ExecutionError(f"torch: {first[1]} (then {then})") from None
                raise ExecutionError(f"torch: {where}") from None
            t1 = clock()
            if on is not None and cfg.timing == "ab":
                on.__exit__(None, None, None)
            own = (timing.train_end_ns - timing.start_ns) if timing is not None else t1 - t0
            if has_last:
                part.losses.append(float(torch.stack([v.detach() for v in losses]).mean().cpu()))
            if window.is_recorded(step):
                part.step_times_ns.append(own)
                part.step_modes.append("hooks" if on is not None else "none")
                if timing is not None and cfg.timing == "hooks":
                    part.steps.append(timing)
                window.observe(step, own)
            if prof is not None:
                prof.step()
    part.cpu_ns = time.process_time_ns() - cpu0
    part.cpu_total_ns = time.process_time_ns()
    part.weights_after = _checksums(all_params)
    control.barrier("the end of the steps")
    part.clock_end = control.ping_pong(clock, cfg.clock_exchanges)
    parts = control.gather(part, "the ranks' records")
    if parts is None:
        return None
    from harness.distributed.torch_records import assemble_run

    return assemble_run(parts, cfg, window.outcome())


def _optimizer_steps(opts: dict[int, Any], opt_stages: tuple[int, ...], timer: ActionTimer | None, cfg: RankConfig,
                     dev: torch.device) -> None:
    """The optimizer steps after ``step()``: each stage's as its ``OPT`` job (``PP:<stage>OPT``; on the timed
    workload it lasts at least its cost-model duration: the SGD update after a wait of that length)."""
    for s in opt_stages:
        with timer.range(f"PP:{s}OPT", stage=s) if timer is not None else contextlib.nullcontext():
            if cfg.workload == "timed":
                busy_ns(cfg.costs[s].optimizer_ns, dev)
            opts[s].step()


def _hooks_this_step(step: int, seed: int) -> bool:
    """``timing="ab"``: whether step ``step`` runs with the hooks: one step of each pair ``(2k, 2k + 1)``, which one
    drawn from ``seed`` and ``k`` (the same on every rank), so that neither mode always comes first."""
    import random

    first = random.Random(seed * 1_000_003 + step // 2).random() < 0.5
    return (step % 2 == 0) == first


def _workload_name(workload: str, dev: torch.device) -> str:
    """The device's own workload name (``sleep``/``matmul`` on CPU, ``spin``/``gemm`` on GPU), as the other backends record it."""
    if dev.type == "cuda":
        return "spin" if workload == "timed" else "gemm"
    return "sleep" if workload == "timed" else "matmul"
