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

import math
import numbers
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from harness.errors import ConfigError

__all__ = [
    "MAX_STALL_TIMEOUT_S",
    "Device",
    "Work",
    "check_bool",
    "check_optional_bool",
    "check_ordinal_map",
    "check_ordinals",
    "check_path",
    "check_stall_timeout",
    "check_strings",
]

#: The longest ``stall_timeout_s`` a device takes (about 11.6 days): longer waits
#: overflow the host's thread timeouts, and a hang guard that never fires guards nothing.
MAX_STALL_TIMEOUT_S = 1_000_000

# Value checks for device options, shared by the device classes' ``check_options``
# (which a case calls for every backend it names, without creating a device) and
# their constructors. Each raises ConfigError naming the backend, the option and the value.


def _value_error(backend: str, name: str, wanted: str, value: object) -> ConfigError:
    shown = repr(value)
    if isinstance(value, int) and len(shown) > 24:  # 10**400 would fill the screen
        shown = f"{shown[:8]}... ({len(shown)} digits)"
    return ConfigError(f"the {backend} backend's {name} must be {wanted}, got {shown}")


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_stall_timeout(backend: str, name: str, value: object) -> None:
    """A positive, finite number of seconds, at most :data:`MAX_STALL_TIMEOUT_S`."""
    # the range first: compared exactly, 10**400 is too large, where math.isfinite would raise OverflowError
    ok = (isinstance(value, numbers.Real) and not isinstance(value, bool)
          and 0 < value <= MAX_STALL_TIMEOUT_S and math.isfinite(value))  # type: ignore[operator]
    if not ok:
        raise _value_error(backend, name, f"a positive number of seconds (at most {MAX_STALL_TIMEOUT_S})", value)


def check_bool(backend: str, name: str, value: object) -> None:
    """``True`` or ``False``."""
    if not isinstance(value, bool):
        raise _value_error(backend, name, "True or False", value)


def check_optional_bool(backend: str, name: str, value: object) -> None:
    """``True``, ``False`` or ``None``."""
    if not (value is None or isinstance(value, bool)):
        raise _value_error(backend, name, "True, False or None", value)


def check_ordinals(backend: str, name: str, value: object) -> None:
    """``None`` or a non-empty sequence of device ordinals (integers >= 0)."""
    if value is None:
        return
    if (isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value
            or not all(_is_int(d) and d >= 0 for d in value)):  # type: ignore[operator]
        raise _value_error(backend, name, "a non-empty list of device ordinals (integers >= 0)", value)


def check_ordinal_map(backend: str, name: str, value: object) -> None:
    """``None``, a mapping rank -> device ordinal, or a list of ordinals indexed by rank (all integers >= 0)."""
    if value is None:
        return
    if isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        pairs = list(enumerate(value))
    else:
        pairs = [(-1, -1)]
    if not all(_is_int(k) and k >= 0 and _is_int(v) and v >= 0 for k, v in pairs):
        raise _value_error(
            backend, name, "a mapping of rank to device ordinal, e.g. {0: 0, 1: 1}, or a list of ordinals by rank "
            "(all integers >= 0)", value,
        )


def check_path(backend: str, name: str, value: object) -> None:
    """``None`` or a non-empty path (``str`` or ``os.PathLike``); whether it exists is the device's to say."""
    if value is None or isinstance(value, os.PathLike):
        return
    if not isinstance(value, str) or not value:
        raise _value_error(backend, name, "None or the path of a file", value)


def check_strings(backend: str, name: str, value: object) -> None:
    """A list of strings (not one string, which would be taken apart character by character)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise _value_error(backend, name, "a list of strings, e.g. ['-O3']", value)


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
