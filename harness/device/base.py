"""The one small device interface every backend implements.

It is CUDA's own execution model, so the ``cuda`` backend is a thin wrapper and
the ``sim`` and ``cpu`` backends emulate it faithfully:

* :meth:`Device.stream` - a FIFO queue of work that runs in order;
* :meth:`Device.event`, :meth:`Device.record` - an event completes when its
  stream reaches the record;
* :meth:`Device.wait` - later work on the stream waits for the event's **latest
  record at the time ``wait`` is called** (``cudaStreamWaitEvent`` semantics;
  waiting on a never-recorded event is a no-op). Callers must therefore enqueue
  in a topological order of their dependencies;
* :meth:`Device.launch` - run one piece of :class:`Work` on a stream;
* :meth:`Device.synchronize` - block the host until all streams drained;
* :meth:`Device.elapsed_ns` - time between two completed timing events, in ns.

Handles (streams, events) are opaque objects owned by the device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["Device", "Work"]


@dataclass(frozen=True, slots=True)
class Work:
    """What one launch does, in terms every backend can honour.

    Attributes:
        duration_ns: how long the work takes, in ns, from the cost model. The
            ``sim`` device advances its clock by it; ``cpu``/``sleep`` sleeps it;
            ``cuda``/``spin`` spins it on the device clock.
        flops: floating-point operations of the job (for GEMM workloads), or 0.
        nbytes: bytes moved (for copy/communication work), or 0.
        is_copy: ``True`` for communication (send/receive) work.
        label: the job's text form (``"2F0"``), for errors, NVTX and debugging.
        peer_rank: for a send, the rank that receives it (a backend may copy
            across devices); ``None`` otherwise.
    """

    duration_ns: int
    flops: float = 0.0
    nbytes: int = 0
    is_copy: bool = False
    label: str = ""
    peer_rank: int | None = None


@runtime_checkable
class Device(Protocol):
    """A backend: streams, events, launches and elapsed time (see module doc).

    Attributes:
        name: backend name (``"sim"``, ``"cpu"``, ``"cuda"``).
        workload: what a compute launch does (``"virtual"``, ``"sleep"``,
            ``"matmul"``, ``"spin"``, ``"gemm"``).
    """

    name: str
    workload: str

    def stream(self, name: str) -> Any:
        """Create a stream (in-order work queue). ``name`` is for errors and traces."""

    def event(self, timing: bool = True) -> Any:
        """Create an event; ``timing=False`` for events that only order work."""

    def record(self, event: Any, stream: Any) -> None:
        """Enqueue a record of ``event`` on ``stream``."""

    def wait(self, stream: Any, event: Any) -> None:
        """Make later work on ``stream`` wait for ``event``'s latest record so far."""

    def launch(self, stream: Any, work: Work) -> None:
        """Enqueue ``work`` on ``stream``."""

    def synchronize(self) -> None:
        """Block until all enqueued work completed.

        Raises:
            ExecutionError: the work failed or stalled (names stream and job).
        """

    def elapsed_ns(self, start: Any, end: Any) -> int:
        """Time from ``start`` to ``end`` (both completed timing events), in ns."""

    def describe(self) -> dict[str, Any]:
        """Metadata for results: backend, workload, host or device facts."""

    def close(self) -> None:
        """Release threads, contexts and memory. Safe to call twice."""
