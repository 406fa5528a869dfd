"""Run records: every timed job of a run, on one time base, in ns.

A :class:`RunRecords` is what a backend run returns and what analysis and
reports read; it does not refer back to the plan, so results files are
self-contained. Times are integers in ns relative to the run's time base, the
reference event of the first recorded step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.window import WindowOutcome

__all__ = ["JobRecord", "RunRecords"]


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One timed job.

    Attributes:
        rank: pipeline rank (device) that ran it.
        stream: stream name, ``"rank{r}/compute"`` or ``"rank{r}/comm↔{q}"``.
        stage: global stage index.
        kind: job kind token (``"F"``, ``"B"``, ``"I"``, ``"W"``, ``"SEND_F"``, ...).
        microbatch: micro-batch index, or ``None`` for ``OPT``.
        chunk: chunk (virtual stage) index on its rank.
        step: training step the job belongs to.
        start_ns, end_ns: start and end on the run's time base, in ns.
        enqueue_ns: host time spent enqueueing the job (its waits, two event
            records and the launch), in ns.
    """

    rank: int
    stream: str
    stage: int
    kind: str
    microbatch: int | None
    chunk: int
    step: int
    start_ns: int
    end_ns: int
    enqueue_ns: int = 0

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def label(self) -> str:
        """The job's compact text form, ``"2F0"``."""
        return f"{self.stage}{self.kind}{'' if self.microbatch is None else self.microbatch}"


@dataclass
class RunRecords:
    """Everything a run measured.

    Attributes:
        backend: backend name (``sim``, ``cpu``, ``cuda``).
        device: backend metadata (workload, clocks, versions).
        num_ranks: ``p``.
        streams: all stream names, in track order.
        steps: indices of the recorded steps.
        step_start_ns, step_end_ns: per recorded step, its reference time and
            the end of its last job, on the run's time base (ns).
        jobs: every job of every recorded step.
        enqueue_ns: per recorded step, host time spent enqueueing the step's
            work (waits, records, launches), in ns.
        warmup_steps: steps run before the first recorded one.
        window: how the profiling window ended (why recording stopped, the
            relative error of the median reached), ``None`` for records not
            made by the executor (imports).
    """

    backend: str
    device: dict[str, Any]
    num_ranks: int
    streams: list[str]
    steps: list[int] = field(default_factory=list)
    step_start_ns: list[int] = field(default_factory=list)
    step_end_ns: list[int] = field(default_factory=list)
    jobs: list[JobRecord] = field(default_factory=list)
    enqueue_ns: list[int] = field(default_factory=list)
    warmup_steps: int = 0
    window: WindowOutcome | None = None

    def jobs_of_step(self, step: int) -> list[JobRecord]:
        return [j for j in self.jobs if j.step == step]
