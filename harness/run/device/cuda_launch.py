"""The cuda backend's launches: what a job's :class:`~harness.run.device.base.Work` runs on the GPU.

:class:`_CudaLaunches` is a part of :class:`~harness.run.device.cuda.CudaDevice` (its base class),
holding the methods that size and enqueue the kernels of ``kernels.cu``, own their buffers,
and calibrate them when a GPU is set up; the state they use (``_drv``, the GPU handles, the
context scope) is the device's.

Workloads (:attr:`CudaDevice.workload <harness.run.device.cuda.CudaDevice.workload>`):
    ``spin`` (default): each compute launch is the ``spin`` kernel of
        ``kernels.cu`` - one block busy-waiting ``Work.duration_ns`` on
        ``%globaltimer``, minus the measured event-to-kernel overhead, so the
        event-measured duration matches the cost model.
    ``gemm``: each compute launch is a tiled float32 GEMM sized from
        ``Work.flops`` (``n = cbrt(flops/2)``, at most 2048, repeated to reach
        the FLOPs); its measured TFLOP/s is in :meth:`CudaDevice.describe`.
    Copy work (``Work.is_copy``) copies ``Work.nbytes`` device-to-device with the
    ``copy`` kernel on the job's (comm) stream; to another GPU when the work
    names a ``peer_rank`` on a different GPU (direct peer writes when peer access
    is on, host-staged otherwise).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.run.device.base import Work
from harness.run.device.cuda_handles import _Gpu, _Scope, _Stream

_MAX_GEMM_N = 2048
_TILE = 16
_COPY_BLOCK = 256
_CALIBRATION_RUNS = 21


class _CudaLaunches:
    """The launch and calibration methods of :class:`~harness.run.device.cuda.CudaDevice` (see module doc)."""

    if TYPE_CHECKING:  # the device's state and methods these use
        _drv: Any

        def _scoped(self, gpu: _Gpu) -> _Scope: ...

        def _gpu_for_rank(self, rank: int) -> _Gpu: ...

        def _timed(self, gpu: _Gpu, enqueue: Any, runs: int) -> list[int]: ...

    def _calibrate_spin(self, gpu: _Gpu) -> None:
        """Warm the spin kernel up and measure its event-to-event overhead (ns)."""
        samples = self._timed(gpu, lambda s: gpu.spin.prepared_async_call((1, 1), (1, 1, 1), s, 0, 0), _CALIBRATION_RUNS)
        samples.sort()
        gpu.spin_overhead_ns = max(0, samples[len(samples) // 2])
        gpu.info["spin_overhead_ns"] = gpu.spin_overhead_ns

    def _calibrate_gemm(self, gpu: _Gpu) -> float:
        n, reps = 1024, 4
        a, b, c = self._gemm_buffers(gpu, n, gpu.aux)
        grid = ((n + _TILE - 1) // _TILE, (n + _TILE - 1) // _TILE)
        ns = self._timed(gpu, lambda s: gpu.gemm.prepared_async_call(grid, (_TILE, _TILE, 1), s, a, b, c, n, reps), 5)
        best = max(1, min(ns))
        return round(2.0 * n**3 * reps / best / 1e3, 3)  # FLOP/ns / 1e3 = TFLOP/s

    def _launch_gemm(self, stream: _Stream, flops: float) -> None:
        n = round((flops / 2.0) ** (1.0 / 3.0) / _TILE) * _TILE
        n = max(_TILE, min(_MAX_GEMM_N, n))
        reps = max(1, round(flops / (2.0 * n**3)))
        a, b, c = self._gemm_buffers(stream.gpu, n, stream.handle)
        grid = (n // _TILE, n // _TILE)
        stream.gpu.gemm.prepared_async_call(grid, (_TILE, _TILE, 1), stream.handle, a, b, c, n, reps)

    def _gemm_buffers(self, gpu: _Gpu, n: int, stream: Any) -> tuple[Any, Any, Any]:
        bufs = gpu.gemm_bufs.get(n)
        if bufs is None:  # first launch of this size: during warm-up
            drv = self._drv
            nbytes = 4 * n * n
            bufs = (drv.mem_alloc(nbytes), drv.mem_alloc(nbytes), drv.mem_alloc(nbytes))
            for buf in bufs:
                drv.memset_d32_async(buf, 0, n * n, stream)
            gpu.gemm_bufs[n] = bufs
        return bufs

    def _copy_buffers(self, gpu: _Gpu, nbytes: int) -> tuple[Any, Any]:
        if gpu.copy_bytes < nbytes:  # grow geometrically; old buffers live until close
            drv = self._drv
            size = max(nbytes, 2 * gpu.copy_bytes, 1 << 20)
            if gpu.copy_src is not None:
                gpu.graveyard += [gpu.copy_src, gpu.copy_dst]
            gpu.copy_src, gpu.copy_dst = drv.mem_alloc(size), drv.mem_alloc(size)
            gpu.copy_bytes = size
        return gpu.copy_src, gpu.copy_dst

    def _launch_copy(self, stream: _Stream, work: Work) -> None:
        nbytes = int(work.nbytes)
        if nbytes <= 0:
            return
        gpu = stream.gpu
        src, dst = self._copy_buffers(gpu, nbytes)
        peer_rank = work.peer_rank  # the receiving rank of a send (the executor fills it in)
        if peer_rank is not None:
            peer = self._gpu_for_rank(int(peer_rank))
            if peer is not gpu:
                with self._scoped(peer):
                    _, dst = self._copy_buffers(peer, nbytes)
                if peer.index not in gpu.peers:
                    self._host_staged_copy(stream, src, dst, nbytes)
                    return
        blocks = max(1, min(gpu.copy_grid, -(-nbytes // (16 * _COPY_BLOCK))))
        gpu.copy.prepared_async_call((blocks, 1), (_COPY_BLOCK, 1, 1), stream.handle, src, dst, nbytes)

    def _host_staged_copy(self, stream: _Stream, src: Any, dst: Any, nbytes: int) -> None:
        # Without peer access: device -> pinned host -> peer device, both hops on
        # the sender's stream (unified addressing resolves the peer pointer).
        gpu = stream.gpu
        drv = self._drv
        if gpu.staging is None or gpu.staging.nbytes < nbytes:
            import numpy as np

            gpu.staging = drv.pagelocked_empty(max(nbytes, 1 << 20), np.uint8)
        host = gpu.staging[:nbytes]
        drv.memcpy_dtoh_async(host, src, stream.handle)
        drv.memcpy_htod_async(dst, host, stream.handle)
