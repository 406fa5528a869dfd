"""One rank of a ``torch.distributed.pipelining`` run, as the records assembly takes it: its identity,
steps and pipeline actions (:class:`~harness.actions.torch_action.TorchAction`).

Made by the trace reader (:func:`harness.imports.torch_trace.read_rank_trace`, one per profiler file)
and by the ``torch`` backend (:mod:`harness.distributed.torch_records`, one per rank from its timing
hooks); :func:`harness.actions.torch_assemble.assemble` turns a run's ranks into run records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.actions.torch_action import TorchAction

__all__ = ["TorchRank"]


@dataclass
class TorchRank:
    """One rank's actions.

    Attributes:
        path: the file read (a trace), or a name standing for the rank (``<torch backend rank 1>``).
        rank, world_size: from ``distributedInfo`` (a trace) or the process group.
        host: ``host_name`` (``""`` when absent).
        device_properties: ``deviceProperties`` (empty on CPU).
        base_ns: ``baseTimeNanoseconds`` (a trace), else 0.
        steps: step number (``ProfilerStep#N``) -> (start, end), absolute ns.
        actions: pipeline actions in start order (OVERLAP_F_B expanded into its sub-actions).
        recv_end: ``(stage, "RECV_F" | "RECV_B", micro-batch, step)`` -> when the data of that
            receive had arrived, absolute ns: the end of the ``gloo:recv`` span that starts inside
            the receive's range (a trace), or the end of the wait for it (the backend's hooks).
        events: the number of trace events in the file (0 for the backend).
        marking: how actions were found: ``"PP"``, ``"GPipe"``, ``"inferred"`` or ``"none"``.
        gpu: whether device-side ranges gave the job times.
    """

    path: Path
    rank: int
    world_size: int
    host: str
    device_properties: list[Any]
    base_ns: int
    steps: dict[int, tuple[int, int]] = field(default_factory=dict)
    actions: list[TorchAction] = field(default_factory=list)
    recv_end: dict[tuple[int, str, int, int], int] = field(default_factory=dict)
    events: int = 0
    marking: str = "none"
    gpu: bool = False
