"""Rank 0's profiling window, followed by every rank of a run of one pipeline rank per process.

The ``mpi`` backend carries it over its MPI transport (:class:`~harness.distributed.transport.MpiTransport`),
the ``torch`` backend over a gloo process group (:class:`~harness.distributed.torch_control.TorchControl`):
anything with a ``rank``, ``bcast(obj, what)`` and ``gather(obj, what)`` (:class:`Control`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from harness.records import WindowOutcome
from harness.run.window import ProfilingWindow

__all__ = ["Control", "SyncedWindow"]


class Control(Protocol):
    """The control messages a :class:`SyncedWindow` sends."""

    rank: int

    def bcast(self, obj: Any, what: str) -> Any:
        """Rank 0's ``obj`` on every rank (``what`` names it in errors)."""
        ...

    def gather(self, obj: Any, what: str) -> list[Any] | None:
        """Every rank's ``obj`` on rank 0, in rank order; ``None`` elsewhere."""
        ...


class SyncedWindow:
    """Rank 0's profiling window, followed by every rank.

    Rank 0 decides each step (and when to stop) and sends it to the others; each step's time it
    observes is the longest of the ranks' own step times (each on its own clock: a step's length
    needs no alignment). Every rank therefore runs and records the same steps.
    """

    def __init__(self, inner: ProfilingWindow, transport: Control) -> None:
        self.inner = inner
        self.transport = transport

    @property
    def warmup_steps(self) -> int:
        """The inner window's warm-up steps (the same on every rank)."""
        return self.inner.warmup_steps

    def steps(self) -> Iterator[int]:
        """Rank 0: its window's steps, each sent to the others first; elsewhere: the steps rank 0 sends.

        Raises:
            ExecutionError: another rank failed, or rank 0's next step did not arrive within the timeout.
        """
        t = self.transport
        if t.rank == 0:
            for step in self.inner.steps():
                t.bcast(step, f"the start of step {step}")
                yield step
            t.bcast(None, "the end of the profiling window")
            return
        while True:
            step = t.bcast(None, "the next step")
            if step is None:
                return
            yield step

    def is_recorded(self, step: int) -> bool:
        return self.inner.is_recorded(step)

    def observe(self, step: int, step_time_ns: int) -> None:
        """Send this rank's step time (ns) to rank 0, which observes the longest."""
        times = self.transport.gather(step_time_ns, f"the step time of step {step}")
        if times is not None:
            self.inner.observe(step, max(times))

    def outcome(self) -> WindowOutcome:
        return self.inner.outcome()
