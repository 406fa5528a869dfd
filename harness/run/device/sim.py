"""``sim``: the device interface on a virtual clock - exact and deterministic.

Each stream is an independent in-order processor with its own clock. Work
advances the stream's clock by :attr:`Work.duration_ns`; a record stamps the
event with the stream's clock; a wait moves the stream's clock to the awaited
record's time. :meth:`SimDevice.synchronize` plays all queues in one pass of a
worklist (each operation is visited once), so simulation is linear in the
number of operations.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from harness.errors import ExecutionError
from harness.run.device.base import Work

__all__ = ["SimDevice"]

_RECORD, _WAIT, _LAUNCH, _WAIT_DELAYED = 0, 1, 2, 3


class _Record:
    """One record of an event: completes when its stream reaches it."""

    __slots__ = ("time", "waiters")

    def __init__(self) -> None:
        self.time: int | None = None
        self.waiters: list[_SimStream] = []


class _SimEvent:
    __slots__ = ("latest",)

    def __init__(self) -> None:
        self.latest: _Record | None = None


class _SimStream:
    __slots__ = ("clock", "last_label", "name", "ops")

    def __init__(self, name: str) -> None:
        self.name = name
        self.ops: deque[tuple[int, Any]] = deque()
        self.clock = 0
        self.last_label = ""


class SimDevice:
    """Discrete-event simulation of streams and events on a virtual ns clock.

    Time starts at 0 and only moves forward; ``elapsed_ns`` is exact.
    """

    name = "sim"
    workload = "virtual"
    #: :func:`harness.run.executor.execute` computes a run on this device with
    #: :func:`harness.run.replay.replay` (the same records, without a call per operation).
    replays_plans = True

    @staticmethod
    def check_options(options: Mapping[str, object]) -> None:
        """Check the values of device options: the sim device takes none, so there are none to check."""

    def __init__(self) -> None:
        self._streams: list[_SimStream] = []

    def stream(self, name: str) -> _SimStream:
        s = _SimStream(name)
        self._streams.append(s)
        return s

    def event(self, timing: bool = True) -> _SimEvent:
        return _SimEvent()

    def record(self, event: _SimEvent, stream: _SimStream) -> None:
        rec = _Record()
        event.latest = rec
        stream.ops.append((_RECORD, rec))

    def wait(self, stream: _SimStream, event: _SimEvent) -> None:
        if event.latest is not None:  # waiting on a never-recorded event is a no-op
            stream.ops.append((_WAIT, event.latest))

    def wait_delayed(self, stream: _SimStream, event: _SimEvent, delay_ns: int) -> None:
        """Make ``stream`` wait until ``delay_ns`` after ``event``'s latest record: a
        transfer charged on the dependency edge (the ``edge`` model of :mod:`harness.model.comm`),
        which only a simulated clock can do."""
        if event.latest is not None:
            stream.ops.append((_WAIT_DELAYED, (event.latest, delay_ns)))

    def launch(self, stream: _SimStream, work: Work) -> None:
        stream.ops.append((_LAUNCH, work))

    def synchronize(self) -> None:
        # All streams restart from the latest clock: a synchronize is a barrier.
        start = max((s.clock for s in self._streams), default=0)
        for s in self._streams:
            s.clock = start
        ready = deque(s for s in self._streams if s.ops)
        while ready:
            s = ready.popleft()
            ops = s.ops
            while ops:
                op, arg = ops[0]
                if op == _LAUNCH:
                    s.clock += arg.duration_ns
                    s.last_label = arg.label
                elif op == _RECORD:
                    arg.time = s.clock
                    for w in arg.waiters:
                        ready.append(w)
                    arg.waiters = []
                elif op == _WAIT:
                    if arg.time is None:
                        arg.waiters.append(s)
                        break
                    if arg.time > s.clock:
                        s.clock = arg.time
                else:  # _WAIT_DELAYED
                    rec, delay = arg
                    if rec.time is None:
                        rec.waiters.append(s)
                        break
                    if rec.time + delay > s.clock:
                        s.clock = rec.time + delay
                ops.popleft()
        stuck = [s for s in self._streams if s.ops]
        if stuck:
            names = ", ".join(f"{s.name} (after {s.last_label or 'its start'})" for s in stuck)
            for s in stuck:
                s.ops.clear()
            raise ExecutionError(f"sim: streams waiting on events that are never recorded: {names}")
        end = max((s.clock for s in self._streams), default=0)
        for s in self._streams:
            s.clock = end

    def elapsed_ns(self, start: _SimEvent, end: _SimEvent) -> int:
        if start.latest is None or end.latest is None or start.latest.time is None or end.latest.time is None:
            raise ExecutionError("sim: elapsed time asked of an event that has not completed")
        return end.latest.time - start.latest.time

    def describe(self) -> dict[str, Any]:
        return {"backend": "sim", "workload": "virtual", "clock": "virtual ns"}

    def close(self) -> None:
        self._streams.clear()
