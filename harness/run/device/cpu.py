"""``cpu``: the device interface emulated with one host worker thread per stream.

Streams are FIFO queues drained by their own thread; events carry
``time.perf_counter_ns()`` stamps taken by the thread that reaches the record,
so all streams share one host time base. A wait captures the event's latest
record *at the time wait is called* (CUDA semantics), exactly as on a GPU.

Workloads:
    ``sleep`` (default): each launch sleeps its duration. Sleeping threads hold
        no CPU, so each stream behaves like an independent device; timer slack
        is set to 1 ns on Linux so sleeps end within microseconds of their goal.
    ``matmul``: each launch multiplies float32 matrices sized from the job's
        FLOPs (``2 n^3`` per product). NumPy releases the GIL in GEMMs, so stages
        really contend for the machine's cores - the CPU analogue of stages
        sharing one GPU. While the device is open, BLAS runs one thread per call
        (threadpoolctl), so each stream is one core's worth of work and the
        contention does not depend on the BLAS library's own thread pool.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import queue
import threading
import time
from collections.abc import Mapping
from typing import Any

from harness.errors import ConfigError, ExecutionError
from harness.run.device.base import Work, check_stall_timeout

__all__ = ["WORKLOADS", "CpuDevice"]

WORKLOADS = ("sleep", "matmul")
_RECORD, _WAIT, _LAUNCH, _FENCE, _STOP = range(5)
_PR_SET_TIMERSLACK = 29
_MAX_GEMM_N = 1024


def _tighten_timer_slack() -> None:
    """Ask Linux for 1 ns timer slack on this thread (default 50 µs)."""
    if not platform.system() == "Linux":
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_TIMERSLACK, 1, 0, 0, 0)
    except (OSError, AttributeError):  # not fatal: sleeps are just less exact
        pass


_OVERSHOOT: list[int] = []


def _sleep_overshoot_ns() -> int:
    """Median oversleep of ``time.sleep`` on this machine, in ns (measured once
    per process with 15 sleeps of 200 µs, about 4 ms), plus a 10 µs margin."""
    if not _OVERSHOOT:
        samples = []
        for _ in range(15):
            t0 = time.perf_counter_ns()
            time.sleep(200e-6)
            samples.append(time.perf_counter_ns() - t0 - 200_000)
        samples.sort()
        _OVERSHOOT.append(max(0, samples[len(samples) // 2]) + 10_000)
    return _OVERSHOOT[0]


@functools.cache
def _clock_offset_ns() -> int:
    """``time.time_ns() - time.perf_counter_ns()``, read once (the two reads are adjacent, so
    within a µs); fixed afterwards, so every event of the process is placed alike."""
    return time.time_ns() - time.perf_counter_ns()


class _Record:
    __slots__ = ("after", "done", "time")

    def __init__(self, after: tuple[str, str] | None = None) -> None:
        self.time: int | None = None
        self.done = threading.Event()
        self.after = after  # (stream name, last job enqueued there) when recorded, for a stall's message


def _where_recorded(rec: _Record) -> str:
    if rec.after is None:
        return "another stream"
    stream, label = rec.after
    return f"{stream} after job {label}" if label else f"{stream} before its first job"


class _CpuEvent:
    __slots__ = ("latest",)

    def __init__(self) -> None:
        self.latest: _Record | None = None


class _CpuStream:
    def __init__(self, device: CpuDevice, name: str) -> None:
        self.device = device
        self.name = name
        self.queue: queue.SimpleQueue[tuple[int, Any]] = queue.SimpleQueue()
        self.last_label = ""  # the last job this stream's thread ran
        self.enqueued_label = ""  # the last job enqueued on it (host side)
        self.error: BaseException | None = None
        self._gemm_cache: dict[int, tuple[Any, Any, Any]] = {}
        self.thread = threading.Thread(target=self._run, name=f"harness-cpu-{name}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        _tighten_timer_slack()
        clock = time.perf_counter_ns
        get = self.queue.get
        timeout = self.device.stall_timeout_s
        while True:
            op, arg = get()
            if op == _LAUNCH:
                if self.error is None and not self.device._closed:  # closing: drain without running
                    try:
                        self._execute(arg)
                    except Exception as exc:  # reported by synchronize()
                        self.error = exc
                self.last_label = arg.label
            elif op == _RECORD:
                arg.time = clock()
                arg.done.set()
            elif op == _WAIT:
                if self.device._closed:
                    continue
                if self.error is None and not arg.done.wait(timeout):
                    self.error = ExecutionError(
                        f"cpu: stream {self.name} waited {timeout:g} s (stall_timeout_s) "
                        f"{f'after job {self.last_label}' if self.last_label else 'before its first job'} "
                        f"for an event recorded on {_where_recorded(arg)}; the job it depends on did not finish "
                        "by then: the run stalled, or that job lasts longer than stall_timeout_s (raise it for long jobs)"
                    )
                    arg.done.set()  # unblock, the run is failed anyway
            elif op == _FENCE:
                arg.set()
            else:
                return

    def _execute(self, work: Work) -> None:
        if self.device.workload == "matmul" and work.flops > 0 and not work.is_copy:
            self._matmul(work.flops)
            return
        clock = time.perf_counter_ns
        deadline = clock() + work.duration_ns
        # Sleep until one typical oversleep before the deadline, then spin the
        # rest: sleeps on virtual machines overshoot by ~50-100 µs whatever the
        # timer slack, and the short spin holds the GIL for only that long.
        early = self.device.sleep_overshoot_ns
        left = deadline - clock()
        if left > early:
            time.sleep((left - early) / 1e9)
        while clock() < deadline:
            pass

    def _matmul(self, flops: float) -> None:
        import numpy as np

        n = max(16, min(_MAX_GEMM_N, round((flops / 2.0) ** (1.0 / 3.0))))
        repeats = max(1, round(flops / (2.0 * n**3)))
        bufs = self._gemm_cache.get(n)
        if bufs is None:
            rng = np.random.default_rng(n)
            a = rng.standard_normal((n, n), dtype=np.float32)
            b = rng.standard_normal((n, n), dtype=np.float32)
            bufs = self._gemm_cache[n] = (a, b, np.empty((n, n), dtype=np.float32))
        a, b, c = bufs
        for _ in range(repeats):
            if self.device._closed:  # Ctrl-C or a failed run: stop between GEMMs
                return
            np.matmul(a, b, out=c)


class CpuDevice:
    """Streams as host threads, events as ``perf_counter_ns`` stamps.

    Args:
        workload: ``"sleep"`` or ``"matmul"`` (see module doc).
        stall_timeout_s: how long a stream waits on one event before the run
            fails with :class:`ExecutionError` (a guard against hangs).

    Raises:
        ConfigError: unknown workload, or a ``stall_timeout_s`` that is not a
            positive number of seconds (see :meth:`check_options`).
    """

    name = "cpu"

    @staticmethod
    def check_options(options: Mapping[str, object]) -> None:
        """Check the values of device options (names already checked), without creating a device.

        Raises:
            ConfigError: ``stall_timeout_s`` is not a positive, finite number of
                seconds up to :data:`~harness.run.device.base.MAX_STALL_TIMEOUT_S`.
        """
        if "stall_timeout_s" in options:
            check_stall_timeout("cpu", "stall_timeout_s", options["stall_timeout_s"])

    def __init__(self, workload: str = "sleep", stall_timeout_s: float = 120.0) -> None:
        if workload not in WORKLOADS:
            raise ConfigError(f"cpu backend: unknown workload {workload!r}; valid: {', '.join(WORKLOADS)}")
        self.check_options({"stall_timeout_s": stall_timeout_s})
        self.workload = workload
        self.stall_timeout_s = float(stall_timeout_s)
        self._streams: list[_CpuStream] = []
        self._closed = False
        self.sleep_overshoot_ns = _sleep_overshoot_ns() if workload == "sleep" else 0
        self._blas_limit: Any = None
        if workload == "matmul":
            import numpy  # noqa: F401 - load BLAS so the limit applies to it
            from threadpoolctl import threadpool_limits

            self._blas_limit = threadpool_limits(limits=1, user_api="blas")

    def stream(self, name: str) -> _CpuStream:
        s = _CpuStream(self, name)
        self._streams.append(s)
        return s

    def event(self, timing: bool = True) -> _CpuEvent:
        return _CpuEvent()

    def record(self, event: _CpuEvent, stream: _CpuStream) -> None:
        rec = _Record((stream.name, stream.enqueued_label))  # formatted only for a stall's message
        event.latest = rec
        stream.queue.put((_RECORD, rec))

    def wait(self, stream: _CpuStream, event: _CpuEvent) -> None:
        if event.latest is not None:
            stream.queue.put((_WAIT, event.latest))

    def launch(self, stream: _CpuStream, work: Work) -> None:
        stream.enqueued_label = work.label
        stream.queue.put((_LAUNCH, work))

    def synchronize(self) -> None:
        fences = []
        for s in self._streams:
            f = threading.Event()
            s.queue.put((_FENCE, f))
            fences.append((s, f))
        for s, f in fences:
            if not f.wait(self.stall_timeout_s * 2 + 5):
                raise ExecutionError(f"cpu: stream {s.name} did not drain (last job {s.last_label or 'none'})")
        errors = [s for s in self._streams if s.error is not None]
        if errors:
            first = errors[0].error
            for s in self._streams:
                s.error = None
            if isinstance(first, ExecutionError):
                raise first
            raise ExecutionError(f"cpu: a job failed on stream {errors[0].name}: {first!r}") from first

    def elapsed_ns(self, start: _CpuEvent, end: _CpuEvent) -> int:
        a, b = start.latest, end.latest
        if a is None or b is None or a.time is None or b.time is None:
            raise ExecutionError("cpu: elapsed time asked of an event that has not completed")
        return b.time - a.time

    def host_time_ns(self, event: _CpuEvent) -> int:
        """Host wall-clock time (``time.time_ns`` scale, ns since the epoch) of a completed
        event: its ``perf_counter_ns`` stamp moved by the offset between the two clocks,
        read together once per process (the executor stores it as ``host_anchor_ns``,
        the epoch time of the run's time base 0).

        Raises:
            ExecutionError: the event has not completed.
        """
        rec = event.latest
        if rec is None or rec.time is None:
            raise ExecutionError("cpu: host time asked of an event that has not completed")
        return rec.time + _clock_offset_ns()

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "backend": "cpu",
            "workload": self.workload,
            "clock": "time.perf_counter_ns",
            "cpu_count": os.cpu_count(),
            "machine": platform.machine(),
            "python": platform.python_version(),
        }
        if self.workload == "matmul":
            import numpy as np

            info["numpy"] = np.__version__
            info["blas_threads_per_stream"] = 1
        return info

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for s in self._streams:
            s.queue.put((_STOP, None))
        for s in self._streams:
            s.thread.join(timeout=5)
        self._streams.clear()
        if self._blas_limit is not None:
            self._blas_limit.restore_original_limits()
            self._blas_limit = None

    def __del__(self) -> None:  # threads are daemons; this just tidies up
        try:
            self.close()
        except Exception:
            pass
