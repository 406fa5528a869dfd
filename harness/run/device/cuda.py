"""``cuda``: the device interface on PyCUDA - streams, events and kernels on NVIDIA GPUs.

The mapping is one-to-one (see :mod:`harness.run.device.base`): a harness stream is
a non-blocking ``pycuda.driver.Stream(1)``; an event is a ``pycuda.driver.Event``
(``event_flags.DISABLE_TIMING`` for ordering-only events); :meth:`CudaDevice.wait`
is ``Stream.wait_for_event`` (it waits for the event's latest record at the time
of the call, as the protocol requires); :meth:`CudaDevice.elapsed_ns` is
``Event.time_since`` (``cuEventElapsedTime``, milliseconds as a float) times
1e6, rounded to ns.

This module holds :class:`CudaDevice`: its options, contexts, GPU setup (kernels
compiled or loaded there), the protocol's methods, :meth:`~CudaDevice.describe` and
:meth:`~CudaDevice.close`. Its parts live beside it: :mod:`~harness.run.device.cuda_probe`
(whether it can run here: :func:`probe`, :data:`INSTALL_HINT`),
:mod:`~harness.run.device.cuda_handles` (per-GPU, stream, event and thread state),
:mod:`~harness.run.device.cuda_clock` (event timing, cross-GPU alignment, host anchor;
base class ``_CudaClocks``) and :mod:`~harness.run.device.cuda_launch` (what a job's work
launches, and the calibration; base class ``_CudaLaunches``).

Contexts:
    Each GPU's *primary* context (``Device(i).retain_primary_context()``), never
    ``pycuda.autoinit``. PyCUDA keeps one context stack per thread and aborts the
    process if a thread's stack is not empty when it is torn down, so every push
    is matched by a pop: on the thread that created the device the context stays
    pushed while that thread enqueues a step and is popped at the next
    :meth:`~CudaDevice.synchronize` (the end of every step), on any error, and in
    :meth:`~CudaDevice.close`; any other thread pushes and pops around each call.

Several GPUs:
    Stream names ``"rank{r}/..."`` (the executor's) map rank ``r`` to a GPU:
    round-robin over the visible devices, or ``device_map``. Peer access is
    enabled between the GPUs in use where the hardware allows. An event lives on
    the GPU of the stream it is recorded on (it is created there lazily, because
    CUDA only records an event on a stream of its own context); waits work
    across GPUs. Elapsed times within one GPU are read directly. Between GPUs
    each GPU's time base is aligned at every synchronize point with a ping-pong
    of events (:mod:`harness.run.device.cuda_clock`).

Host anchor:
    :meth:`CudaDevice.host_time_ns` places any completed event on the host's
    wall clock (:mod:`harness.run.device.cuda_clock`). The timeline itself never
    uses host clocks.

Workloads (:attr:`CudaDevice.workload`):
    ``spin`` (default) or ``gemm``; copy work moves bytes with the ``copy``
    kernel. What each launches, sized how, is in :mod:`harness.run.device.cuda_launch`.

Measurement method (after NVIDIA's CUDA C++ Best Practices Guide, "Using CUDA
GPU Timers", and the L2 flush between timed runs of ``triton.testing.do_bench``): modules are
compiled and loaded, buffers allocated and kernels launched once before any
step; the executor's warm-up steps keep the first enqueues (lazy event
creation, buffer growth) out of the recorded window; optional L2 flush
(``l2_flush=True``) after every synchronize - i.e. before the next step, outside
its timed region - from a buffer of the L2 size allocated once; host enqueue
time per job is kept (:meth:`CudaDevice.last_enqueue_ns`); NVTX ranges named
after the job wrap each launch when the ``nvtx`` package is importable.
"""

from __future__ import annotations

import atexit
import os
import re
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from harness.errors import BackendUnavailable, ConfigError, ExecutionError
from harness.run.device.base import (
    Work,
    check_bool,
    check_optional_bool,
    check_ordinal_map,
    check_ordinals,
    check_path,
    check_stall_timeout,
    check_strings,
)
from harness.run.device.cuda_clock import _NS_PER_MS, _CudaClocks
from harness.run.device.cuda_handles import _Event, _Gpu, _Scope, _Stream, _Tls
from harness.run.device.cuda_launch import _CudaLaunches
from harness.run.device.cuda_probe import INSTALL_HINT, probe
from harness.run.device.cuda_setup import KERNELS_ENV, KERNELS_SOURCE, _CudaSetup

__all__ = ["INSTALL_HINT", "KERNELS_ENV", "KERNELS_SOURCE", "WORKLOADS", "CudaDevice", "probe"]

WORKLOADS = ("spin", "gemm")

_STREAM_NON_BLOCKING = 1  # CU_STREAM_NON_BLOCKING
_RANK_RE = re.compile(r"rank(\d+)/")


_LIVE: weakref.WeakSet[CudaDevice] = weakref.WeakSet()


@atexit.register
def _close_live_devices() -> None:  # pragma: no cover - interpreter shutdown
    # A context left pushed on the main thread makes PyCUDA abort at exit.
    for device in list(_LIVE):
        try:
            device.close()
        except Exception:
            pass


class CudaDevice(_CudaClocks, _CudaLaunches, _CudaSetup):
    """Streams, events and kernels on one or more NVIDIA GPUs through PyCUDA.

    Args:
        workload: ``"spin"`` or ``"gemm"`` (see module doc).
        devices: CUDA device ordinals to use (default: all visible).
        device_map: rank -> CUDA ordinal, overriding round-robin for the ranks
            it names (a mapping, or a sequence indexed by rank).
        l2_flush: flush the L2 cache after every synchronize (before the next
            step, outside its timed region) - cold-cache runs.
        nvtx: wrap launches in NVTX ranges; ``None`` = when ``nvtx`` imports.
        stall_timeout_s: :meth:`synchronize` gives up after this many seconds
            and raises :class:`ExecutionError` naming the streams still busy.
        kernels: a prebuilt cubin/fatbin/PTX of ``kernels.cu`` to load instead
            of compiling with ``nvcc`` (default: ``$HARNESS_CUDA_KERNELS`` if set).
        nvcc_options: extra ``nvcc`` options for ``SourceModule``.

    Raises:
        ConfigError: unknown workload, an option value of the wrong type or
            range (see :meth:`check_options`), or devices that do not exist.
        BackendUnavailable: PyCUDA, the driver or a GPU is missing, or the
            kernels cannot be compiled or loaded (the message says why and how
            to fix it).
    """

    name = "cuda"

    @staticmethod
    def check_options(options: Mapping[str, object]) -> None:
        """Check the values of device options (names already checked) without PyCUDA or a GPU,
        so a case's cuda options are checked on every machine; whether the devices exist is
        the constructor's to say.

        Raises:
            ConfigError: a value of the wrong type or range, naming the option.
        """
        checks = {
            "devices": check_ordinals,
            "device_map": check_ordinal_map,
            "l2_flush": check_bool,
            "nvtx": check_optional_bool,
            "stall_timeout_s": check_stall_timeout,
            "kernels": check_path,
            "nvcc_options": check_strings,
        }
        for name, value in options.items():
            check = checks.get(name)
            if check is not None:
                check("cuda", name, value)

    def __init__(
        self,
        workload: str = "spin",
        devices: Sequence[int] | None = None,
        device_map: Mapping[int, int] | Sequence[int] | None = None,
        l2_flush: bool = False,
        nvtx: bool | None = None,
        stall_timeout_s: float = 120.0,
        kernels: str | os.PathLike[str] | None = None,
        nvcc_options: Sequence[str] = ("-O3",),
    ) -> None:
        if workload not in WORKLOADS:
            raise ConfigError(f"cuda backend: unknown workload {workload!r}; valid: {', '.join(WORKLOADS)}")
        self.check_options({
            "devices": devices, "device_map": device_map, "l2_flush": l2_flush, "nvtx": nvtx,
            "stall_timeout_s": stall_timeout_s, "kernels": kernels, "nvcc_options": nvcc_options,
        })
        ok, why = probe()
        if not ok:
            raise BackendUnavailable(f"the cuda backend cannot run here: {why}. {INSTALL_HINT}")
        import pycuda.driver as drv

        self._drv = drv
        self.workload = workload
        self.stall_timeout_s = float(stall_timeout_s)
        self.l2_flush = bool(l2_flush)
        self._kernels = kernels if kernels is not None else os.environ.get(KERNELS_ENV) or None
        self._nvcc_options = list(nvcc_options)
        count = drv.Device.count()
        self._ordinals = list(range(count)) if devices is None else [int(d) for d in devices]
        if not self._ordinals:
            raise ConfigError("cuda backend: `devices` is empty")
        bad = [d for d in self._ordinals if not 0 <= d < count]
        if bad:
            raise ConfigError(f"cuda backend: devices {bad} do not exist; {count} visible")
        if device_map is None:
            self._device_map: dict[int, int] = {}
        elif isinstance(device_map, Mapping):
            self._device_map = {int(r): int(d) for r, d in device_map.items()}
        else:
            self._device_map = {r: int(d) for r, d in enumerate(device_map)}
        bad = sorted({d for d in self._device_map.values() if not 0 <= d < count})
        if bad:
            raise ConfigError(f"cuda backend: device_map names devices {bad}; {count} visible")
        self._nvtx: Any = None
        if nvtx is not False:
            try:
                import nvtx as nvtx_module  # type: ignore[import-not-found]

                self._nvtx = nvtx_module
            except ImportError:
                if nvtx:
                    raise ConfigError("cuda backend: nvtx=True but the `nvtx` package is not installed") from None
        self._tls = _Tls()
        self._owner = threading.get_ident()
        self._gpus: dict[int, _Gpu] = {}  # ordinal -> state
        self._streams: list[_Stream] = []
        self._events: list[_Event] = []
        self._rank_of_stream: dict[str, int] = {}
        self._enqueue: list[tuple[str, int]] = []
        self._last_enqueue: list[tuple[str, int]] = []
        self._window_t0: int | None = None
        self._anchor: tuple[Any, _Gpu, int, int] | None = None  # event, gpu, time_ns, perf_counter_ns
        self._closed = False
        _LIVE.add(self)

    # -- contexts ---------------------------------------------------------------

    def _activate(self, gpu: _Gpu) -> bool:
        """Make ``gpu``'s context current on this thread.

        Returns ``True`` when the caller must pop it again (a thread other than
        the owner); on the owner thread the push is held until :meth:`_release`.
        """
        tls = self._tls
        if tls.held is gpu:
            return False
        if threading.get_ident() != self._owner:
            gpu.ctx.push()
            return True
        if tls.held is not None:
            tls.held = None
            self._drv.Context.pop()
        gpu.ctx.push()
        tls.held = gpu
        return False

    def _release(self) -> None:
        """Pop the context this thread holds, if any (balanced with :meth:`_activate`)."""
        tls = self._tls
        if tls.held is not None:
            tls.held = None
            self._drv.Context.pop()

    def _scoped(self, gpu: _Gpu) -> _Scope:
        return _Scope(self, gpu)

    # -- setup ------------------------------------------------------------------

    def _gpu_for_rank(self, rank: int) -> _Gpu:
        ordinal = self._device_map.get(rank, self._ordinals[rank % len(self._ordinals)])
        gpu = self._gpus.get(ordinal)
        if gpu is None:
            gpu = self._init_gpu(ordinal)
        return gpu

    def _init_gpu(self, ordinal: int) -> _Gpu:
        drv = self._drv
        try:
            dev = drv.Device(ordinal)
            ctx = dev.retain_primary_context()
        except drv.Error as exc:
            raise BackendUnavailable(f"cuda: cannot retain the primary context of device {ordinal}: {exc}") from exc
        gpu = _Gpu(len(self._gpus), ordinal, dev, ctx)
        self._gpus[ordinal] = gpu
        with self._scoped(gpu):
            self._describe_gpu(gpu)
            self._load_kernels(gpu)
            gpu.aux = drv.Stream(_STREAM_NON_BLOCKING)
            att = drv.device_attribute
            sms = int(dev.get_attribute(att.MULTIPROCESSOR_COUNT))
            gpu.copy_grid = max(1, 4 * sms)
            if self.l2_flush:
                gpu.flush_bytes = max(1, int(gpu.info.get("l2_bytes") or 0))
                gpu.flush_buf = drv.mem_alloc(gpu.flush_bytes)
            self._calibrate_spin(gpu)
            if self.workload == "gemm":
                gpu.info["gemm_tflops"] = self._calibrate_gemm(gpu)
        self._enable_peers(gpu)
        return gpu

    # -- the Device protocol ----------------------------------------------------------

    def stream(self, name: str) -> _Stream:
        """A non-blocking stream on the GPU of the rank in ``name`` (``"rank{r}/..."``; else rank 0).

        Raises:
            BackendUnavailable: the GPU cannot be set up (context, kernels).
        """
        m = _RANK_RE.match(name)
        rank = int(m.group(1)) if m else 0
        gpu = self._gpu_for_rank(rank)
        with self._scoped(gpu):
            handle = self._drv.Stream(_STREAM_NON_BLOCKING)
        s = _Stream(name, gpu, handle)
        self._streams.append(s)
        self._rank_of_stream[name] = rank
        return s

    def event(self, timing: bool = True) -> _Event:
        """An event; its PyCUDA event is created on the GPU of the first stream it is recorded on."""
        ev = _Event(timing)
        self._events.append(ev)
        return ev

    def _physical(self, ev: _Event, gpu: _Gpu) -> Any:
        phys = ev.per_gpu.get(gpu.index)
        if phys is None:
            drv = self._drv
            phys = drv.Event(0 if ev.timing else drv.event_flags.DISABLE_TIMING)
            ev.per_gpu[gpu.index] = phys
        return phys

    def record(self, event: _Event, stream: _Stream) -> None:
        """Record ``event`` on ``stream`` (``Event.record``).

        Raises:
            ExecutionError: the driver refused (names stream and job).
        """
        gpu = stream.gpu
        pop = self._activate(gpu)
        try:
            phys = self._physical(event, gpu)
            phys.record(stream.handle)
            event.latest = (gpu, phys)
        except Exception as exc:
            self._fail(exc, stream, "record an event")
        finally:
            if pop:
                self._drv.Context.pop()
        now = time.perf_counter_ns()
        if stream.pending:  # the end record of a job: its host enqueue time is done
            stream.pending = False
            t0 = self._window_t0 if self._window_t0 is not None else now
            self._enqueue.append((stream.last_label, now - t0))
            self._window_t0 = now
        elif self._window_t0 is None:
            self._window_t0 = now

    def wait(self, stream: _Stream, event: _Event) -> None:
        """``stream.wait_for_event`` on the event's latest record (no-op if never recorded).

        Raises:
            ExecutionError: the driver refused.
        """
        latest = event.latest
        if latest is None:
            return
        pop = self._activate(stream.gpu)
        try:
            stream.handle.wait_for_event(latest[1])
        except Exception as exc:
            self._fail(exc, stream, "wait for an event")
        finally:
            if pop:
                self._drv.Context.pop()

    def launch(self, stream: _Stream, work: Work) -> None:
        """Enqueue ``work``: spin/GEMM for compute, a device-to-device copy for ``is_copy``.

        Raises:
            ExecutionError: the launch failed (names stream and job).
        """
        gpu = stream.gpu
        pop = self._activate(gpu)
        nvtx = self._nvtx
        if nvtx is not None:
            nvtx.push_range(message=work.label or "job", domain="pipeline-harness")
        try:
            if work.is_copy:
                self._launch_copy(stream, work)
            elif self.workload == "gemm" and work.flops > 0:
                self._launch_gemm(stream, work.flops)
            else:
                ns = max(0, int(work.duration_ns) - gpu.spin_overhead_ns)
                gpu.spin.prepared_async_call((1, 1), (1, 1, 1), stream.handle, ns, 0)
        except Exception as exc:
            self._fail(exc, stream, f"launch {work.label or 'a job'}")
        finally:
            if nvtx is not None:
                nvtx.pop_range(domain="pipeline-harness")
            if pop:
                self._drv.Context.pop()
        stream.last_label = work.label
        stream.pending = True

    def synchronize(self) -> None:
        """Wait until every stream drained, then (optionally) flush L2 and align the GPUs' clocks.

        Polls ``Stream.is_done`` so that a stall ends in an error, not a hang.

        Raises:
            ExecutionError: a job failed on the device (names stream and last
                job), or streams were still busy after ``stall_timeout_s``.
        """
        try:
            self._drain()
            self._last_enqueue = self._enqueue
            self._enqueue = []
            self._window_t0 = None
            if len(self._gpus) > 1:
                self._align_gpus()
            if self._anchor is None and self._gpus:
                self._take_host_anchor()
            if self.l2_flush:
                self._flush_l2()
        finally:
            self._release()

    def _drain(self) -> None:
        deadline = time.monotonic() + self.stall_timeout_s
        pending = list(self._streams)
        polls = 0
        while pending:
            still = []
            for s in pending:
                pop = self._activate(s.gpu)
                try:
                    done = s.handle.is_done()
                except Exception as exc:
                    self._fail(exc, s, "run")
                finally:
                    if pop:
                        self._drv.Context.pop()
                if not done:
                    still.append(s)
            pending = still
            if not pending:
                return
            if time.monotonic() > deadline:
                names = ", ".join(f"{s.name} (last job {s.last_label or 'none'})" for s in pending)
                raise ExecutionError(f"cuda: streams still busy after {self.stall_timeout_s:g} s: {names}")
            polls += 1
            time.sleep(0 if polls < 1000 else 50e-6)  # spin briefly, then back off

    def _flush_l2(self) -> None:
        for gpu in self._gpus.values():
            if gpu.flush_buf is not None:
                with self._scoped(gpu):
                    self._drv.memset_d8_async(gpu.flush_buf, 0, gpu.flush_bytes, gpu.aux)
        for gpu in self._gpus.values():
            if gpu.flush_buf is not None:
                with self._scoped(gpu):
                    gpu.aux.synchronize()

    def elapsed_ns(self, start: _Event, end: _Event) -> int:
        """Time from ``start`` to ``end`` in ns (``Event.time_since`` in ms x 1e6).

        Across GPUs, through each GPU's mark of the latest alignment.

        Raises:
            ExecutionError: an event was never recorded, has not completed, or
                does not time (``timing=False``).
        """
        a, b = start.latest, end.latest
        if a is None or b is None:
            raise ExecutionError("cuda: elapsed time asked of an event that was never recorded")
        if not (start.timing and end.timing):
            raise ExecutionError("cuda: elapsed time asked of an ordering-only event (timing=False)")
        try:
            if a[0] is b[0]:
                with self._scoped(a[0]):
                    return round(b[1].time_since(a[1]) * _NS_PER_MS)
            return self._global_ns(b) - self._global_ns(a)
        except ExecutionError:
            raise
        except Exception as exc:
            raise ExecutionError(f"cuda: elapsed time unavailable ({exc}); were both events completed?") from exc

    # -- extras beyond the protocol ------------------------------------------------------

    def last_enqueue_ns(self) -> list[tuple[str, int]]:
        """Host enqueue time of each job of the last synchronized window: ``(label, ns)``.

        A job's time runs from the end of the previous job's end record (for
        the first job: the window's first record) to the end of its own end
        record, so it covers the waits, both records, the launch and the
        caller's own loop overhead.
        """
        return list(self._last_enqueue)

    def describe(self) -> dict[str, Any]:
        """Backend, workload, clocks, versions and, per GPU in use: name, SMs, clock, L2, overheads."""
        drv = self._drv
        info: dict[str, Any] = {
            "backend": "cuda",
            "workload": self.workload,
            "clock": "cuEventElapsedTime per GPU (ms float -> ns); GPUs aligned by event ping-pong at each synchronize",
            "l2_flush": self.l2_flush,
            "nvtx": self._nvtx is not None,
            "devices": [dict(g.info) for g in sorted(self._gpus.values(), key=lambda g: g.index)],
            "device_map": {self._rank_of_stream[s.name]: s.gpu.ordinal for s in self._streams},
            "peer_access": {g.ordinal: sorted(p for p in g.peers) for g in self._gpus.values()},
        }
        try:
            import pycuda

            info["pycuda"] = getattr(pycuda, "VERSION_TEXT", None)
            info["cuda_version"] = ".".join(str(x) for x in drv.get_version())
            info["driver_version"] = int(drv.get_driver_version())
        except Exception:
            pass
        if self._gpus:
            first = min(self._gpus.values(), key=lambda g: g.index).info
            info["name"] = first.get("name")
        return info

    def _fail(self, exc: BaseException, stream: _Stream, what: str) -> None:
        self._release()
        raise ExecutionError(
            f"cuda: failed to {what} on stream {stream.name} (GPU {stream.gpu.ordinal}, last job {stream.last_label or 'none'}): {exc}"
        ) from exc

    def close(self) -> None:
        """Free buffers, streams and events, pop anything pushed, release the primary contexts. Idempotent."""
        if self._closed:
            return
        self._closed = True
        _LIVE.discard(self)
        try:
            self._release()
        except Exception:
            pass
        drv = self._drv
        for gpu in sorted(self._gpus.values(), key=lambda g: g.index):
            try:
                gpu.ctx.push()
            except Exception:
                continue
            try:
                try:
                    gpu.aux.synchronize() if gpu.aux is not None else None
                    for s in self._streams:
                        if s.gpu is gpu:
                            s.handle.synchronize()
                except Exception:
                    pass
                # Destroy this GPU's CUDA objects while its context is current.
                for ev in self._events:
                    ev.per_gpu.pop(gpu.index, None)
                    if ev.latest is not None and ev.latest[0] is gpu:
                        ev.latest = None
                for s in self._streams:
                    if s.gpu is gpu:
                        s.handle = None
                bufs = [gpu.copy_src, gpu.copy_dst, gpu.flush_buf, *gpu.graveyard]
                for trio in gpu.gemm_bufs.values():
                    bufs.extend(trio)
                for buf in bufs:
                    if buf is not None:
                        try:
                            buf.free()
                        except Exception:
                            pass
                gpu.copy_src = gpu.copy_dst = gpu.flush_buf = gpu.staging = None
                gpu.graveyard.clear()
                gpu.gemm_bufs.clear()
                gpu.aux = gpu.mark = None
                gpu.spin = gpu.gemm = gpu.copy = gpu.timer_step = gpu.module = None
            finally:
                drv.Context.pop()
            try:
                gpu.ctx.detach()  # releases the primary context
            except Exception:
                pass
        self._anchor = None
        self._events.clear()
        self._streams.clear()

    def __del__(self) -> None:
        try:
            if threading.get_ident() == getattr(self, "_owner", None):
                self.close()
        except Exception:
            pass
