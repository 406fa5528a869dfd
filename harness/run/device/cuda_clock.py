"""The cuda backend's clocks: event timing, cross-GPU alignment, the host anchor, timer resolution.

:class:`_CudaClocks` is a part of :class:`~harness.run.device.cuda.CudaDevice` (its base class),
holding the methods that read and align the GPUs' clocks; the state they use (``_drv``,
``_gpus``, ``_anchor``, the context scope) is the device's.

Event timing:
    ``Event.time_since`` (``cuEventElapsedTime``) gives milliseconds as a float between
    two completed timing events of one context; the backend turns it into ns
    (x :data:`_NS_PER_MS`, rounded).

Several GPUs:
    Elapsed times within one GPU are read directly. Between GPUs each GPU's time base
    is aligned at every synchronize point with a ping-pong of events (record on GPU 0,
    wait+record on GPU d, wait+record on GPU 0; GPU d's mark is placed at half the
    round trip, taking the best of three), so the error of a cross-GPU difference is
    at most half the asymmetry of the two one-way latencies (a few µs at worst).

Host anchor:
    Once per device, after the first synchronize, an event is recorded and waited for
    and ``time.time_ns()`` read at once: :meth:`_CudaClocks.host_time_ns` places any
    completed event on the host's wall clock (within the synchronize wake-up latency,
    µs). The timeline itself never uses host clocks.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from harness.errors import ExecutionError
from harness.run.device.cuda_handles import _Event, _Gpu, _Scope

_NS_PER_MS = 1_000_000


class _CudaClocks:
    """The clock methods of :class:`~harness.run.device.cuda.CudaDevice` (see module doc)."""

    if TYPE_CHECKING:  # the device's state and methods these use
        _drv: Any
        _gpus: dict[int, _Gpu]
        _anchor: tuple[Any, _Gpu, int, int] | None

        def _scoped(self, gpu: _Gpu) -> _Scope: ...

        def _gpu_for_rank(self, rank: int) -> _Gpu: ...

        def elapsed_ns(self, start: _Event, end: _Event) -> int: ...

    def _timed(self, gpu: _Gpu, enqueue: Any, runs: int) -> list[int]:
        """Event-measured durations (ns) of ``runs`` repetitions of ``enqueue(stream)`` on ``gpu.aux``."""
        drv = self._drv
        out = []
        for _ in range(runs):
            a, b = drv.Event(), drv.Event()
            a.record(gpu.aux)
            enqueue(gpu.aux)
            b.record(gpu.aux)
            b.synchronize()
            out.append(round(b.time_since(a) * _NS_PER_MS))
        return out

    def _align_gpus(self) -> None:
        """Ping-pong events between the base GPU and each other GPU (see module doc)."""
        drv = self._drv
        gpus = sorted(self._gpus.values(), key=lambda g: g.index)
        base = gpus[0]
        with self._scoped(base):
            mark = drv.Event()
            mark.record(base.aux)
            mark.synchronize()
        base.mark, base.mark_offset_ns = mark, 0
        for gpu in gpus[1:]:
            best: tuple[int, Any, Any] | None = None
            for _ in range(3):
                with self._scoped(base):
                    a = drv.Event()
                    a.record(base.aux)
                with self._scoped(gpu):
                    z = drv.Event()
                    gpu.aux.wait_for_event(a)
                    z.record(gpu.aux)
                with self._scoped(base):
                    c = drv.Event()
                    base.aux.wait_for_event(z)
                    c.record(base.aux)
                    c.synchronize()
                    rtt = round(c.time_since(a) * _NS_PER_MS)
                if best is None or rtt < best[0]:
                    best = (rtt, a, z)
            assert best is not None
            rtt, a, z = best
            with self._scoped(base):
                offset = round(a.time_since(mark) * _NS_PER_MS) + rtt // 2
            gpu.mark, gpu.mark_offset_ns = z, offset
            gpu.info["align_rtt_ns"] = rtt

    def _take_host_anchor(self) -> None:
        gpu = min(self._gpus.values(), key=lambda g: g.index)
        with self._scoped(gpu):
            ev = self._drv.Event()
            ev.record(gpu.aux)
            ev.synchronize()
            self._anchor = (ev, gpu, time.time_ns(), time.perf_counter_ns())

    def _global_ns(self, rec: tuple[_Gpu, Any]) -> int:
        gpu, phys = rec
        if gpu.mark is None:
            self._align_gpus()
        with self._scoped(gpu):
            return round(phys.time_since(gpu.mark) * _NS_PER_MS) + gpu.mark_offset_ns

    def host_time_ns(self, event: _Event) -> int:
        """Host wall-clock time (``time.time_ns`` scale, ns) of a completed event.

        Uses the host anchor taken at the first synchronize; accurate to the
        synchronize wake-up latency (µs). For placing a run on the host's clock
        (e.g. PaddlePaddle-style logs), never for the timeline itself.

        Raises:
            ExecutionError: no synchronize yet, or the event is not complete.
        """
        if self._anchor is None:
            raise ExecutionError("cuda: no host anchor yet (call synchronize first)")
        ev, gpu, wall, _ = self._anchor
        anchor = _Event(True)
        anchor.latest = (gpu, ev)
        return wall + self.elapsed_ns(anchor, event)

    def timer_resolution_ns(self) -> dict[str, int]:
        """Resolution of the device clocks of the first GPU in use, in ns.

        ``globaltimer``: smallest step of ``%globaltimer`` over 1000 reads;
        ``event``: smallest non-zero ``cuEventElapsedTime`` of back-to-back
        records over 200 pairs (0 if none was non-zero).
        """
        drv = self._drv
        gpu = min(self._gpus.values(), key=lambda g: g.index) if self._gpus else self._gpu_for_rank(0)
        import numpy as np

        with self._scoped(gpu):
            out = drv.mem_alloc(8)
            try:
                gpu.timer_step.prepared_async_call((1, 1), (1, 1, 1), gpu.aux, out, 1000)
                host = np.zeros(1, dtype=np.uint64)
                gpu.aux.synchronize()
                drv.memcpy_dtoh(host, out)
            finally:
                out.free()
            steps = [x for x in self._timed(gpu, lambda s: None, 200) if x > 0]
        return {"globaltimer": int(host[0]), "event": min(steps) if steps else 0}

