"""The harness's exceptions: one root, a few meaningful subclasses.

Every error a user can cause (bad schedule, bad file, missing backend, a run
that stalls) is a :class:`HarnessError`, so callers can catch one type and the
pytest plugin can turn it into a clear message instead of a traceback.
"""

from __future__ import annotations

__all__ = [
    "BackendUnavailable",
    "ConfigError",
    "DiskFullError",
    "ExecutionError",
    "HarnessError",
    "InputFormatError",
    "ResourceError",
    "ScheduleError",
]


class HarnessError(Exception):
    """Root of every error raised by the harness on purpose."""


class ConfigError(HarnessError, ValueError):
    """A case or option has a value the harness cannot use (e.g. ``m < p``,
    a non-positive size, an unknown schedule or backend name)."""


class ScheduleError(HarnessError):
    """A schedule is malformed, incomplete or deadlocks.

    The message names the jobs at fault and, where a schedule is involved,
    draws the step x rank grid with the faulty cells marked.

    Attributes:
        jobs: text forms (``"2F0"``) of the jobs at fault, possibly empty.
    """

    def __init__(self, message: str, jobs: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.jobs = jobs


class InputFormatError(HarnessError, ValueError):
    """A file (schedule CSV, results JSON, PaddlePaddle log) cannot be read.

    The message names the file and, where it applies, the line/row and cell.
    """


class BackendUnavailable(HarnessError):
    """The requested backend cannot run here (e.g. PyCUDA or a GPU is missing).

    The message says why and how to install what is missing.
    """


class ExecutionError(HarnessError):
    """A run failed or stalled on a backend; the message names the stream and
    the job it was waiting on."""


class ResourceError(HarnessError, MemoryError):
    """A case is too large for this machine: memory ran out while it was built,
    planned or analysed. The message names the size (jobs) and the memory it needs."""


class DiskFullError(HarnessError):
    """A file could not be written for want of room: the device is full (``ENOSPC``), a disk quota
    is used up (``EDQUOT``), or the file would pass the process's file-size limit (``EFBIG``,
    ``ulimit -f``). The message names the folder and the file, the bytes it needed where known,
    and what was kept (a report is published whole or not at all: the previous one stays).

    Attributes:
        folder: the folder written into (a report folder: the one the user named).
        path: the file that could not be written.
        needed_bytes: its size, where known (``None`` otherwise).
    """

    def __init__(self, message: str, folder: str, path: str, needed_bytes: int | None = None) -> None:
        super().__init__(message)
        self.folder = folder
        self.path = path
        self.needed_bytes = needed_bytes
