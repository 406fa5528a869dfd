"""Facts about the machine a run measured on, and how busy it was while it did.

Two things, both written into every result:

* :func:`machine_facts` - once per session: CPU model, cores (all, and those
  this process may use), Python and numpy versions, the BLAS libraries numpy
  loaded and their thread counts (threadpoolctl), the CPU frequency governor
  where Linux shows it.
* :class:`UsageProbe` - around each case: the 1-minute load average before and
  after, and the CPU time other processes used during the case, in cores
  (from ``/proc/stat``'s machine-wide busy time minus this process's own CPU
  time). This is what the ``contended`` flag reads: a load average counts this
  run's own threads too, so it alone would flag a case for what the case
  itself does.

Nothing here fails: a fact that cannot be read is ``None``.
"""

from __future__ import annotations

import functools
import os
import platform
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["CaseUsage", "UsageProbe", "machine_facts", "usable_cores"]


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS has one), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip() or None
    except OSError:
        pass
    return platform.processor() or None


def _governor() -> str | None:
    try:
        with open("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", encoding="ascii") as f:
            return f.read().strip() or None
    except OSError:
        return None


def _blas() -> list[dict[str, Any]]:
    try:
        from threadpoolctl import threadpool_info

        return [{k: info.get(k) for k in ("internal_api", "version", "num_threads", "threading_layer", "architecture")}
                for info in threadpool_info() if info.get("user_api") == "blas"]
    except Exception:  # threadpoolctl inspects loaded libraries; never let that fail a run
        return []


@functools.cache
def machine_facts() -> dict[str, Any]:
    """The machine's facts (see the module docstring), read once per process.

    Returns:
        ``{"cpu_model", "cpu_count", "usable_cores", "machine", "platform",
        "python", "numpy", "blas": [{internal_api, version, num_threads, ...}],
        "cpu_governor"}``; unknown values are ``None``.
    """
    import numpy as np

    np.ones((2, 2)) @ np.ones((2, 2))  # BLAS is loaded lazily by some builds: make it show in threadpool_info
    return {
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "usable_cores": usable_cores(),
        "machine": platform.machine(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "blas": _blas(),
        "cpu_governor": _governor(),
    }


def _loadavg() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _machine_busy_ns() -> int | None:
    """CPU time all processes spent running, summed over cores, from ``/proc/stat`` (ns); ``None`` off Linux."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(x) for x in fields[1:]]
    busy = sum(ticks[:8]) - ticks[3] - (ticks[4] if len(ticks) > 4 else 0)  # everything but idle and iowait
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    return busy * 1_000_000_000 // hz


@dataclass(frozen=True)
class BackendChoice:
    """The backend a run uses and, for ``auto``, why it was chosen: ``requested`` as given,
    ``name`` the backend that runs (``sim``, ``cpu``, ``cuda``, ``mpi``), ``reason`` in words."""

    requested: str
    name: str
    reason: str


@dataclass(frozen=True)
class CaseUsage:
    """How busy the machine was during one case.

    Attributes:
        loadavg_before, loadavg_after: 1-minute load average (``None`` where unknown).
        wall_ns: host time between the two readings (ns).
        own_cores: this process's CPU time over ``wall_ns`` (in cores).
        other_cores: other processes' CPU time over ``wall_ns`` (in cores),
            ``None`` where ``/proc/stat`` is not readable.
        cores: cores this process may use.
    """

    loadavg_before: float | None
    loadavg_after: float | None
    wall_ns: int
    own_cores: float
    other_cores: float | None
    cores: int

    def to_dict(self) -> dict[str, Any]:
        return {"loadavg_before": self.loadavg_before, "loadavg_after": self.loadavg_after, "wall_ns": self.wall_ns,
                "own_cores": round(self.own_cores, 3), "other_cores": None if self.other_cores is None else round(self.other_cores, 3),
                "cores": self.cores}


class UsageProbe:
    """Readings before and after a case: ``probe = UsageProbe(); ...run...; usage = probe.finish()``."""

    def __init__(self) -> None:
        self._load = _loadavg()
        self._busy = _machine_busy_ns()
        self._own = time.process_time_ns()
        self._t0 = time.perf_counter_ns()

    def finish(self, siblings_cpu_ns: int = 0) -> CaseUsage:
        """The usage since the probe was made.

        Args:
            siblings_cpu_ns: CPU time (ns) of the case's own other processes on this host during it
                (the other MPI ranks of an ``mpi`` run), which is not other processes' load.
        """
        wall = max(1, time.perf_counter_ns() - self._t0)
        own = time.process_time_ns() - self._own
        busy = _machine_busy_ns()
        other = None
        if busy is not None and self._busy is not None:
            # /proc/stat counts in clock ticks (10 ms): clamp the rounding of short cases at 0
            other = max(0.0, (busy - self._busy - own - siblings_cpu_ns) / wall)
        return CaseUsage(self._load, _loadavg(), wall, own / wall, other, usable_cores())
