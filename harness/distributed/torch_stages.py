"""Synthetic pipeline-stage modules for the ``torch`` backend: each stage follows the case's cost model.

Two workloads:

``timed`` (the cost-model-exact split)
    A stage computes ``y = x * w`` (elementwise; ``w`` one weight per feature, a real
    parameter) and every part lasts its cost-model duration (ns): the forward ``F``, the input
    gradient ``I`` (the zero-bubble paper's ``B``), the weight gradient ``W``, a full backward
    ``B``, the optimizer step ``OPT``. On CPU a part sleeps until one typical oversleep before its
    deadline and spins the rest (as the ``cpu`` device does,
    :func:`harness.run.device.cpu._sleep_overshoot_ns`); on a GPU it enqueues a spin kernel of that
    duration (``torch.cuda._sleep``, cycles calibrated once with CUDA events). Real tensors of the
    activation's size flow between stages, and the gradients are the true ones of ``y = x * w``,
    so an optimizer step changes ``w`` and the loss.

    How the backward is split (torch 2.13, ``torch/distributed/pipelining/stage.py``): the stage is
    one ``autograd.Function`` whose backward gives the input gradient and queues ``(x, g)``; the
    ``PipelineStage`` gets ``dw_builder`` (stage.py, ``backward_one_chunk``), whose runner computes
    ``sum(g * x)`` into ``w.grad`` later, in ``W``. PyTorch then runs the autograd backward in ``I``
    on every stage, the first included, and the runner in ``W``; a full ``B`` runs both, and lasts
    the cost model's ``B`` (the stage is told which one it runs). Without ``dw_builder`` PyTorch
    would split a custom Function's backward itself: a Function is one autograd node and runs
    whole each time the engine reaches it, and the first stage's ``I`` would be skipped
    (``if not self.is_first``) with its whole backward in ``W``.

``compute`` (PyTorch's own split, an assumption)
    ``L`` bias-free ``Linear(d, d)`` layers per stage, ``L = max(1, round(F_flops / (2 * rows * d * d)))``
    so that a forward does about the job's FLOPs; PyTorch's autograd splits their backward into
    ``I`` and ``W`` itself, so each costs about one forward's FLOPs (``2 * rows * d * d`` per layer)
    whatever the cost model gives ``I`` and ``W``, and on the first stage ``I`` is empty and ``W``
    holds its whole backward (PyTorch skips ``I`` there). The figures state this assumption.

Durations are ns; sizes bytes (activations fp32). Imports torch: only the ranks' processes
import this module (:mod:`harness.distributed.torch_rank`), after the backend found torch.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.autograd.profiler as _profiler
from torch import nn

__all__ = ["BUSY_RANGE", "StageCost", "activation_shape", "busy_ns", "make_stage_module"]


@dataclass(frozen=True)
class StageCost:
    """One stage's cost-model durations (ns) and FLOPs.

    Attributes:
        forward_ns: ``F``.
        backward_ns: a full backward ``B``.
        input_grad_ns: ``I`` (the input gradient).
        weight_grad_ns: ``W`` (the weight gradient).
        optimizer_ns: ``OPT``.
        forward_flops: FLOPs of a forward (the ``compute`` workload).
    """

    forward_ns: int
    backward_ns: int
    input_grad_ns: int
    weight_grad_ns: int
    optimizer_ns: int = 0
    forward_flops: float = 0.0


def activation_shape(activation_bytes: int, width: int = 1024) -> tuple[int, int]:
    """``(rows, width)`` of an fp32 micro-batch activation of at least ``activation_bytes`` bytes
    (at least one element; ``width`` shrinks for tiny activations)."""
    numel = max(1, math.ceil(activation_bytes / 4))
    width = min(width, numel)
    return math.ceil(numel / width), width


_CYCLES_PER_NS: list[float] = []


def _gpu_cycles_per_ns(device: Any) -> float:
    """Cycles of ``torch.cuda._sleep`` per ns on ``device``, calibrated once with a 20 ms kernel timed by CUDA events."""
    if not _CYCLES_PER_NS:
        torch.cuda._sleep(1_000_000)  # warm the kernel up
        torch.cuda.synchronize(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        cycles = 20_000_000
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        _CYCLES_PER_NS.append(cycles / (start.elapsed_time(end) * 1e6))
    return _CYCLES_PER_NS[0]


#: Test hook: a list to which every CPU :func:`busy_ns` call appends ``(asked, took)`` ns (``None``: off),
#: so a test measures the sleeps' own error in the run itself, under the run's load.
BUSY_LOG: list[tuple[int, int]] | None = None


#: The ``torch.profiler`` range around each CPU :func:`busy_ns` call while a profiler is on.
BUSY_RANGE = "harness::busy"


def busy_ns(duration_ns: int, device: Any) -> None:
    """Take ``duration_ns`` ns: on CPU sleep, then spin to the deadline; on CUDA enqueue a spin kernel
    on the current stream (the call returns at once).

    On CPU, while a ``torch.profiler`` is on, the call is a :data:`BUSY_RANGE` range in its trace: a
    sleep runs no operator, and ``import-torch`` starts a job at its range's first operator (the wait
    for its input comes before it), so a part whose busy time came before its first operator (``W``'s
    runner, an ``OPT``) would be imported as only its tail. ``F`` and ``I`` have an operator around
    their sleep anyway (the autograd Function, ``_TimedPart`` / ``_TimedPartBackward``). Without a
    profiler no range is opened (no cost)."""
    if duration_ns <= 0:
        return
    if device.type == "cuda":
        torch.cuda._sleep(max(1, round(duration_ns * _gpu_cycles_per_ns(device))))
        return
    if _profiler._is_profiler_enabled:
        with _profiler.record_function(BUSY_RANGE):
            _busy_cpu(duration_ns)
    else:
        _busy_cpu(duration_ns)


def _busy_cpu(duration_ns: int) -> None:
    """:func:`busy_ns` on CPU: sleep until one typical oversleep before the deadline, then spin."""
    from harness.run.device.cpu import _sleep_overshoot_ns

    clock = time.perf_counter_ns
    t0 = clock()
    deadline = t0 + duration_ns
    early = _sleep_overshoot_ns()
    left = deadline - clock()
    if left > early:
        time.sleep((left - early) / 1e9)
    while clock() < deadline:
        pass
    if BUSY_LOG is not None:
        BUSY_LOG.append((duration_ns, clock() - t0))


class _TimedPart(torch.autograd.Function):
    """``y = x * w``: forward ``F``; backward gives the input gradient in ``I`` (or ``B`` when the stage
    runs a full backward) and queues ``(x, g, full)`` for the stage's weight runner; ``w`` gets its
    gradient from the runner only."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, stage: TimedStage) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        ctx.stage = stage
        busy_ns(stage.cost.forward_ns, x.device)
        return x * w

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor | None, None, None]:
        x, w = ctx.saved_tensors
        stage: TimedStage = ctx.stage
        full = stage.full_backward
        busy_ns(stage.cost.backward_ns if full else stage.cost.input_grad_ns, g.device)
        stage.pending.append((x.detach(), g.detach(), full))
        return (g * w if ctx.needs_input_grad[0] else None), None, None


class TimedStage(nn.Module):
    """One timed stage, ``y = x * w``, whose parts last the :class:`StageCost` durations (module doc).

    Args:
        cost: the stage's durations.
        width: features per row (the activation's last dimension).
        seed: the weights start at ``1 + 0.01 * N(0, 1)`` drawn from this seed.

    Attributes:
        full_backward: set by the stage's wrapped ``backward_one_chunk`` before each backward: a
            full ``B`` (``True``) or an ``I`` (``False``).
        pending: per backward run, ``(x, g, full)`` for :meth:`dw_builder`.
    """

    def __init__(self, cost: StageCost, width: int, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.w = nn.Parameter(1.0 + 0.01 * torch.randn(width, generator=g))
        self.cost = cost
        self.full_backward = True
        self.pending: list[tuple[torch.Tensor, torch.Tensor, bool]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _TimedPart.apply(x, self.w, self)  # type: ignore[no-any-return]

    def dw_builder(self) -> Callable[[], None]:
        """For ``PipelineStage(dw_builder=...)``: called right after a backward; returns the runner of that
        micro-batch's weight gradient (``W``: lasts the cost model's ``W``, nothing after a full ``B``,
        whose duration held it), which accumulates ``sum(g * x)`` into ``w.grad``."""
        x, g, full = self.pending.pop()
        w, cost = self.w, self.cost

        def run() -> None:
            if not full:
                busy_ns(cost.weight_grad_ns, g.device)
            dw = (g * x).sum(0)
            if w.grad is None:
                w.grad = dw
            else:
                w.grad += dw

        return run


class ComputeStage(nn.Module):
    """``layers`` bias-free ``Linear(width, width)`` layers: the ``compute`` workload (module doc)."""

    def __init__(self, width: int, layers: int, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.net = nn.Sequential(*[nn.Linear(width, width, bias=False) for _ in range(layers)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)  # type: ignore[no-any-return]


def compute_layers(cost: StageCost, rows: int, width: int) -> int:
    """Linear layers of a ``compute`` stage: ``max(1, round(F_flops / (2 * rows * width**2)))``."""
    return max(1, round(cost.forward_flops / (2.0 * rows * width * width)))


def make_stage_module(workload: str, cost: StageCost, rows: int, width: int, seed: int = 0) -> tuple[Any, Callable[[], Any] | None]:
    """The stage module of ``workload`` and its ``dw_builder`` (``None`` for ``compute``: PyTorch splits the backward).

    Raises:
        ValueError: an unknown workload (the backend checks it before any process starts).
    """
    if workload == "timed":
        mod = TimedStage(cost, width, seed)
        return mod, mod.dw_builder
    if workload == "compute":
        return ComputeStage(width, compute_layers(cost, rows, width), seed), None
    raise ValueError(f"workload must be 'timed' or 'compute', got {workload!r}")


def tell_full_backward(stage: Any, module: Any) -> None:
    """Wrap ``stage.backward_one_chunk`` (a ``PipelineStage``) so that a timed ``module`` knows, before each
    backward, whether it is a full ``B`` or an ``I`` (its duration follows)."""
    inner = stage.backward_one_chunk

    def backward_one_chunk(bwd_chunk_id: int, *args: Any, **kwargs: Any) -> Any:
        module.full_backward = bool(kwargs.get("full_backward", args[1] if len(args) > 1 else True))
        return inner(bwd_chunk_id, *args, **kwargs)

    stage.backward_one_chunk = backward_one_chunk
