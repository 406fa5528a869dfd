"""The ``cuda`` local device of an MPI run: one GPU per process, transfers staged through host memory.

Used by :mod:`harness.distributed.mpi` where a GPU is usable (``local_backend`` ``auto`` or ``cuda``): process
``r`` takes GPU ``local_rank % count`` (its rank among the processes of its host, as nccl-tests
picks devices). A ``SEND_*`` waits for its stream's earlier work, copies the activation buffer to
pinned host memory and posts an ``Isend``; a ``RECV_*`` receives into pinned memory over MPI
(polled, with the transport's timeout) and copies it to the GPU on the job's stream. Sends never
block the host and receives are enqueued in a topological order of the whole pipeline, so the
per-rank order cannot deadlock. The job's start and end events bracket the host-side transfer on
the stream's timeline.

NCCL point-to-point (``ncclSend``/``ncclRecv`` on the rank's stream, bootstrapped with an id sent
over MPI, as nccl-tests does) is not wired in this version: :func:`nccl_status` says so, and the
host-staged path is what runs. This module has not been run in this project's CI (no GPU).
"""

from __future__ import annotations

from typing import Any

from harness.errors import BackendUnavailable
from harness.run.device.base import Work
from harness.run.device.cuda import CudaDevice

__all__ = ["MpiCudaDevice", "nccl_status"]


def nccl_status() -> str:
    """Why transfers are host-staged over MPI rather than NCCL point-to-point, for the run's metadata."""
    try:
        import nccl  # type: ignore[import-not-found]  # noqa: F401 - nccl4py's module
    except ImportError:
        return "host-staged MPI: nccl4py is not installed (NCCL point-to-point is not wired in this version either)"
    return "host-staged MPI: nccl4py is installed, but NCCL point-to-point is not wired in this version"


class MpiCudaDevice(CudaDevice):
    """The ``cuda`` backend on one GPU, with send/receive jobs as host-staged MPI transfers.

    Args:
        workload: ``spin`` or ``gemm``.
        local_rank: the process's rank among the processes of its host (selects the GPU).
        stall_timeout_s: as :class:`~harness.run.device.cuda.CudaDevice`.
        transfer_timeout_s, clock_exchanges: as :class:`~harness.distributed.mpi.MpiCpuDevice`.

    Raises:
        BackendUnavailable: no usable GPU or PyCUDA.
    """

    def __init__(self, workload: str = "spin", local_rank: int = 0, stall_timeout_s: float = 120.0,
                 transfer_timeout_s: float = 60.0, clock_exchanges: int = 32) -> None:
        from harness.run.device import cuda

        ok, why = cuda.probe()
        if not ok:
            raise BackendUnavailable(f"the mpi backend's cuda local device cannot run here: {why}. {cuda.INSTALL_HINT}")
        import pycuda.driver as drv  # type: ignore[import-not-found]  # initialised by probe()

        count = drv.Device.count()  # this process's GPU: its local rank's, round-robin (as nccl-tests picks)
        super().__init__(workload, devices=[local_rank % max(1, count)], stall_timeout_s=stall_timeout_s)
        self.transfer_timeout_s = float(transfer_timeout_s)
        self.clock_exchanges = clock_exchanges
        self.transfers: dict[str, Any] = {}
        self.transport: Any = None
        self.drop_send: str | None = None
        self._host: dict[tuple[str, int], Any] = {}
        self.pending_sends: list[tuple[Any, str, int, int]] = []

    def synchronize(self) -> None:
        """Drain the GPU streams, then wait for the step's posted sends (see :meth:`MpiCpuDevice.synchronize`)."""
        super().synchronize()
        self.transport.wait_sends(self.pending_sends)

    def _pinned(self, key: str, nbytes: int) -> Any:
        import numpy as np

        buf = self._host.get((key, nbytes))
        if buf is None:
            buf = self._host[(key, nbytes)] = self._drv.pagelocked_empty(max(nbytes, 1), np.uint8)
        return buf

    def launch(self, stream: Any, work: Work) -> None:
        """Compute as the cuda backend; a send/receive as a host-staged MPI transfer (see module doc).

        Raises:
            ExecutionError: the transfer timed out or another rank failed (from the transport).
        """
        t = self.transfers.get(work.label) if work.is_copy else None
        if t is None:
            super().launch(stream, work)
            return
        pop = self._activate(stream.gpu)
        try:
            src, dst = self._copy_buffers(stream.gpu, max(t.nbytes, 1))
            host = self._pinned(stream.name, t.nbytes)
            if t.send:
                self._drv.memcpy_dtoh_async(host, src, stream.handle)
                stream.handle.synchronize()  # the activation is on the host: post the send
                if self.drop_send != work.label:
                    req = self.transport.comm.Isend([host, t.nbytes, self.transport.MPI.BYTE], dest=t.peer, tag=t.tag)
                    self.pending_sends.append((req, work.label, t.peer, t.nbytes))
            else:
                self.transport.recv(t.peer, t.tag, t.nbytes, work.label, buffer_key=id(stream))
                self._drv.memcpy_htod_async(dst, self.transport._buffer(id(stream), t.nbytes)[: t.nbytes], stream.handle)
        finally:
            if pop:
                self._drv.Context.pop()
        stream.last_label = work.label
        stream.pending = True

    def sync_clock(self, rank: int) -> Any:
        """The clock alignment is measured on: ``time.time_ns`` (the scale of :meth:`host_time_ns`) plus the test hook."""
        import time

        from harness.distributed.clock_sync import injected_offset_ns

        shift = injected_offset_ns(rank)
        return lambda: time.time_ns() + shift

    def sync_anchor(self, records: Any, rank: int) -> int:
        """The run's time base 0 on :meth:`sync_clock`'s scale (the executor's ``host_anchor_ns``)."""
        from harness.distributed.clock_sync import injected_offset_ns

        return int(records.device["host_anchor_ns"]) + injected_offset_ns(rank)

    def describe(self) -> dict[str, Any]:
        info = super().describe()
        info["transfers"] = nccl_status()
        return info
