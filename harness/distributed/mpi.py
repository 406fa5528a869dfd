"""The ``mpi`` execution mode: one pipeline rank per MPI process, real transfers, one aligned timeline.

Launched as ``mpirun -n P python -m pytest cases/ --backend=mpi`` (or any program calling
:func:`harness.runner.run_case` with ``backend="mpi"`` under ``mpirun``), every process runs
the same cases in the same order; for each case, MPI rank ``r`` runs pipeline rank ``r``'s jobs
(its compute and comm streams) with :func:`harness.run.executor.execute` on its local device:

* ``cpu`` - :class:`MpiCpuDevice`, the ``cpu`` backend whose ``SEND_*``/``RECV_*`` jobs move a
  host buffer of the cost model's activation size with ``Isend``/``Irecv``
  (:class:`~harness.distributed.transport.MpiTransport`); the transfer's measured time is what the records
  show (the cost model's transfer time is only the ``sim`` prediction);
* ``cuda`` - :class:`MpiCudaDevice`, one GPU per process by local rank, transfers staged through
  host buffers over MPI (NCCL is not wired yet; see docs/mpi.md). Written but not run in this
  project's CI, which has no GPU.

Cross-rank dependencies are carried by the transfers themselves: a receive ends when its data
has arrived, and the jobs that need it wait for the receive on their own rank. The profiling
window is rank 0's (:class:`~harness.distributed.synced_window.SyncedWindow`), so every rank runs the same steps. At the start and
end of the case rank 0 estimates every rank's clock offset (:mod:`harness.distributed.clock_sync`); rank 0
then gathers the ranks' records, merges them onto its time base (:mod:`harness.distributed.rank_merge`),
checks causality, and sends the merged records to every rank, so every process returns the same
result and test outcome. Any rank's failure is sent to all: every rank raises
:class:`~harness.errors.ExecutionError` naming the failed rank and its error.
"""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Mapping
from typing import Any

from harness.distributed.clock_sync import align, best_exchange, injected_offset_ns, local_clock
from harness.distributed.rank_merge import RankPart, check_causality, merge_parts
from harness.distributed.synced_window import SyncedWindow
from harness.distributed.transport import MpiTransport, import_mpi, transfer_tag
from harness.errors import ConfigError, ExecutionError, HarnessError
from harness.model.cost import CostModel
from harness.plan.graph import Plan
from harness.records import RunRecords
from harness.run.device.base import Work, check_stall_timeout
from harness.run.device.cpu import CpuDevice, _CpuStream
from harness.run.window import FixedWindow, ProfilingWindow
from harness.schedule.model import JobKind

__all__ = ["DROP_SEND_ENV", "MpiCpuDevice", "Transfer", "clock_note", "mpi_rank", "run_plan", "transfers_of"]

#: Test hook: ``RANK:LABEL`` makes MPI rank ``RANK`` skip the send of job ``LABEL`` (e.g. ``0:0SEND_F1``), so
#: its receive never completes and the run must end at the transfer timeout. Also ``RANK:raise`` makes that
#: rank raise before its first step, and ``RANK:kill`` kills its process there (a lost rank).
DROP_SEND_ENV = "HARNESS_MPI_TEST_FAULT"

#: Clock ping-pong exchanges per rank at each end of a case (the smallest round trip is kept).
DEFAULT_CLOCK_EXCHANGES = 32


@dataclasses.dataclass(frozen=True, slots=True)
class Transfer:
    """What a ``SEND_*``/``RECV_*`` job moves.

    Attributes:
        send: ``True`` for a send.
        peer: the other rank.
        tag: the MPI tag (:func:`~harness.distributed.transport.transfer_tag`).
        nbytes: bytes moved (the cost model's ``nbytes`` of the job).
    """

    send: bool
    peer: int
    tag: int
    nbytes: int


def transfers_of(plan: Plan, cost: CostModel) -> dict[str, Transfer]:
    """Per send/receive job (by its text, ``"1RECV_F3"``) the transfer it makes: the peer is the rank of the
    neighbouring stage, the tag that of the sending stage, direction and micro-batch. A plan has send/receive
    jobs only between neighbours of one chain (:mod:`harness.schedule.chains`; the plan refuses others), so
    DualPipe's two directions get their own peers and tags."""
    s = plan.schedule
    n, m = s.num_stages, s.num_microbatches
    out: dict[str, Transfer] = {}
    for job in plan.jobs:
        k, kind, mb = job
        if not kind.is_comm or mb is None:
            continue
        nbytes = int(cost.nbytes(job, n))
        if kind is JobKind.SEND_F:
            out[str(job)] = Transfer(True, s.rank_of(k + 1), transfer_tag(k, False, mb, m), nbytes)
        elif kind is JobKind.SEND_B:
            out[str(job)] = Transfer(True, s.rank_of(k - 1), transfer_tag(k, True, mb, m), nbytes)
        elif kind is JobKind.RECV_F:
            out[str(job)] = Transfer(False, s.rank_of(k - 1), transfer_tag(k - 1, False, mb, m), nbytes)
        elif kind is JobKind.RECV_B:
            out[str(job)] = Transfer(False, s.rank_of(k + 1), transfer_tag(k + 1, True, mb, m), nbytes)
    return out


def _fault_hook(rank: int) -> str | None:
    import os

    text = os.environ.get(DROP_SEND_ENV, "").strip()
    if not text:
        return None
    who, _, what = text.partition(":")
    return what if who.strip() == str(rank) else None


class _MpiCpuStream(_CpuStream):
    """A ``cpu`` stream whose send/receive jobs are real MPI transfers (run on the stream's thread)."""

    device: MpiCpuDevice

    def _execute(self, work: Work) -> None:
        t = self.device.transfers.get(work.label) if work.is_copy else None
        if t is None:
            super()._execute(work)
            return
        transport = self.device.transport
        if t.send:
            if self.device.drop_send == work.label:
                return  # the test hook: this send never happens
            req = transport.isend(t.peer, t.tag, t.nbytes, buffer_key=id(self))  # completed at synchronize
            self.device.pending_sends.append((req, work.label, t.peer, t.nbytes))
        else:
            transport.recv(t.peer, t.tag, t.nbytes, work.label, buffer_key=id(self))


class MpiCpuDevice(CpuDevice):
    """The ``cpu`` backend for one rank of an MPI run: send/receive jobs move real buffers over MPI.

    Args:
        workload: as :class:`~harness.run.device.cpu.CpuDevice` (``sleep`` or ``matmul``).
        stall_timeout_s: as :class:`~harness.run.device.cpu.CpuDevice`.
        transfer_timeout_s: how long one transfer or control message may take before the case fails
            with an error naming the rank and job (s).
        clock_exchanges: ping-pong exchanges per rank for each clock estimate.
        local_backend: ``auto`` (cuda with one GPU per local rank where usable, else cpu), ``cpu`` or ``cuda``.

    Raises:
        ConfigError: a value out of range (:meth:`check_options`).
    """

    name = "cpu"

    @staticmethod
    def check_options(options: Mapping[str, object]) -> None:
        """Check option values without creating a device.

        Raises:
            ConfigError: a timeout that is not a positive number of seconds, ``clock_exchanges`` not an
                integer from 1 to 10000, or ``local_backend`` not ``auto``, ``cpu`` or ``cuda``.
        """
        for name in ("stall_timeout_s", "transfer_timeout_s"):
            if name in options:
                check_stall_timeout("mpi", name, options[name])
        n = options.get("clock_exchanges", DEFAULT_CLOCK_EXCHANGES)
        if not (isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 10_000):
            raise ConfigError(f"the mpi backend's clock_exchanges must be a whole number from 1 to 10000, got {n!r}")
        if options.get("local_backend", "auto") not in ("auto", "cpu", "cuda"):
            raise ConfigError(f"the mpi backend's local_backend must be 'auto', 'cpu' or 'cuda', got {options['local_backend']!r}")

    def __init__(self, workload: str = "sleep", stall_timeout_s: float = 120.0, transfer_timeout_s: float = 60.0,
                 clock_exchanges: int = DEFAULT_CLOCK_EXCHANGES, local_backend: str = "auto") -> None:
        self.check_options({"transfer_timeout_s": transfer_timeout_s, "clock_exchanges": clock_exchanges, "local_backend": local_backend})
        super().__init__(workload, stall_timeout_s)
        self.transfer_timeout_s = float(transfer_timeout_s)
        self.clock_exchanges = clock_exchanges
        self.local_backend = local_backend
        self.transfers: dict[str, Transfer] = {}
        self.transport: MpiTransport = None  # type: ignore[assignment]  # set by run_plan before any launch
        self.drop_send: str | None = None
        self.pending_sends: list[tuple[Any, str, int, int]] = []

    def synchronize(self) -> None:
        """Drain the streams, then wait for the step's posted sends to complete.

        Raises:
            ExecutionError: a job failed or stalled, a transfer did not complete within
                ``transfer_timeout_s`` (names the rank and job), or another rank failed.
        """
        super().synchronize()
        self.transport.wait_sends(self.pending_sends)

    def stream(self, name: str) -> _CpuStream:
        """A ``cpu`` stream whose send/receive jobs are MPI transfers (:data:`transfers`, by job text)."""
        s = _MpiCpuStream(self, name)
        self._streams.append(s)
        return s


def mpi_rank() -> tuple[int, int]:
    """``(rank, size)`` of this process in ``MPI.COMM_WORLD``.

    Raises:
        BackendUnavailable: mpi4py or MPI is missing.
    """
    mpi_lib = import_mpi()
    return mpi_lib.COMM_WORLD.Get_rank(), mpi_lib.COMM_WORLD.Get_size()


def _local_rank(mpi_lib: Any) -> int:
    shared = mpi_lib.COMM_WORLD.Split_type(mpi_lib.COMM_TYPE_SHARED)
    try:
        return int(shared.Get_rank())
    finally:
        shared.Free()


def _clock_estimates(transport: MpiTransport, clock: Any, exchanges: int) -> dict[int, Any]:
    rows = transport.ping_pong(clock, exchanges)
    return {q: best_exchange(r) for q, r in rows.items()}


def _make_device(workload: str | None, options: dict[str, Any], mpi_lib: Any) -> Any:
    """The local device of this rank: cpu, or cuda with the GPU of its local rank."""
    from harness.run.device import backend_workload, resolve_device

    local = options.get("local_backend", "auto")
    if local in ("auto", "cuda"):
        try:
            choice = resolve_device("cuda")
        except HarnessError:
            if local == "cuda":
                raise
            choice = None
        if choice is not None:
            from harness.distributed.mpi_cuda import MpiCudaDevice

            gpu_options = {k: v for k, v in options.items() if k in ("stall_timeout_s", "transfer_timeout_s", "clock_exchanges")}
            return MpiCudaDevice(backend_workload("cuda", workload), local_rank=_local_rank(mpi_lib), **gpu_options)
    return MpiCpuDevice(backend_workload("cpu", workload), **options)


def run_plan(plan: Plan, cost: CostModel, window: range | ProfilingWindow, workload: str | None = None,
             options: dict[str, Any] | None = None) -> RunRecords:
    """Run this process's pipeline rank of ``plan`` and return the whole run's merged records (on every rank).

    Args:
        plan: the validated plan; its ranks must equal the number of MPI processes.
        cost: the case's cost model (durations, bytes per transfer).
        window: the profiling window (rank 0's decides; see :class:`~harness.distributed.synced_window.SyncedWindow`).
        workload: the case's workload (``timed``/``compute`` or a backend's own name).
        options: device options (:class:`MpiCpuDevice`'s arguments but the workload).

    Returns:
        The merged records (backend ``mpi``) on rank 0's time base, identical on every rank; ``device``
        holds each rank's host, device and clock alignment and the causality check (``causality``).

    Raises:
        ConfigError: the pipeline's rank count differs from the MPI world's size, the plan has
            cross-rank dependencies not carried by send/receive jobs (comm model ``free``), or bad options.
        BackendUnavailable: mpi4py or MPI missing.
        ExecutionError: this or another rank failed (names the rank and its error), or a transfer or
            control message timed out (names the rank and job).
    """
    from harness.run.executor import execute

    mpi_lib = import_mpi()
    world = mpi_lib.COMM_WORLD
    p = plan.schedule.num_ranks
    if world.Get_size() != p:
        raise ConfigError(f"the mpi backend runs one pipeline rank per MPI process: this case has p={p} ranks but "
                          f"{world.Get_size()} process(es) were launched; run it with mpirun -n {p}")
    opts = dict(options or {})
    if p > 1 and not any(j.kind.is_comm for j in plan.jobs):
        raise ConfigError("the mpi backend moves data with the plan's send/receive jobs, and this plan has none "
                          "(comm_model 'free'); use comm_model 'stream'")
    MpiCpuDevice.check_options(opts)
    transport = MpiTransport(world, float(opts.get("transfer_timeout_s", 60.0)))
    rank = transport.rank
    try:
        device = _make_device(workload, opts, mpi_lib)
    except HarnessError as exc:
        transport.fail(f"{exc}")
        raise
    device.transport = transport
    device.transfers = transfers_of(plan, cost)
    fault = _fault_hook(rank)
    device.drop_send = fault
    clock = device.sync_clock(rank) if hasattr(device, "sync_clock") else local_clock(rank)
    exchanges = int(opts.get("clock_exchanges", DEFAULT_CLOCK_EXCHANGES))
    inner = FixedWindow(window) if isinstance(window, range) else window
    try:
        try:
            start = _clock_estimates(transport, clock, exchanges)
            if fault == "raise":
                raise ExecutionError(f"mpi: rank {rank}: raised by the {DROP_SEND_ENV} test hook")
            if fault == "kill":  # a lost rank: the process dies without a word
                import os
                import signal

                os.kill(os.getpid(), signal.SIGKILL)
            cpu0 = time.process_time_ns()
            records = execute(plan, device, cost, SyncedWindow(inner, transport), ranks=[rank])
            records.device["process_cpu_ns"] = time.process_time_ns() - cpu0  # this rank's own CPU over its steps
            end = _clock_estimates(transport, clock, exchanges)
        finally:
            device.close()
        part = RankPart(rank, socket.gethostname(), records, _anchor(device, records, rank), None, records.device)
        parts = transport.gather(part, "the ranks' records")
        merged: RunRecords | None = None
        if parts is not None:
            for q, pq in enumerate(parts):
                if q:
                    pq.clock = align(start[q], end.get(q), q)
            order_of = {(plan.rank[j], *plan.jobs[j]): i for i, j in enumerate(plan.order)}
            merged = merge_parts(parts, order=lambda jr: order_of.get((jr.rank, jr.stage, JobKind(jr.kind), jr.microbatch), 0),
                                 host_anchor_ns=records.device.get("host_anchor_ns"))
            merged.window = inner.outcome()
            causality = check_causality(merged)
            merged.device["causality"] = causality.to_dict()
            here = socket.gethostname()  # the other ranks on rank 0's host are the case's own load, not contention
            merged.device["siblings_cpu_ns"] = sum(int(pq.device.get("process_cpu_ns", 0)) for q, pq in enumerate(parts)
                                                   if q and pq.host == here)
            merged.device["notes"] = [clock_note(parts)] + ([causality.describe()] if causality.violations else [])  # type: ignore[list-item]
            merged.device["transport"] = {"mpi": mpi_lib.Get_library_version().splitlines()[0].strip(), "processes": p,
                                          "transfers": "MPI Isend/Irecv of host buffers"}
        result: RunRecords = transport.bcast(merged, "the merged records")
    except HarnessError as exc:
        transport.fail(str(exc))
        if transport.aborted is not None and transport.aborted[0] != rank:  # another rank's failure: say that one
            raise ExecutionError(f"mpi: rank {transport.aborted[0]} failed: {transport.aborted[1]}") from None
        raise
    except BaseException as exc:  # anything else (a bug, Ctrl-C): the others must not wait for this rank
        transport.fail(f"{type(exc).__name__}: {exc}")
        raise
    finally:
        transport.close()
    return result


def clock_note(parts: list[RankPart]) -> str:
    """One line for the summary and the report: per rank its host, clock offset to rank 0, drift and bound."""
    def us(ns: float) -> str:
        return f"{ns / 1e3:,.1f} µs"

    rows = [f"rank {p.rank} ({p.host}) {us(p.clock.start.offset_ns)} ± {us(p.clock.bound_ns)}, drift {p.clock.drift * 1e6:+.2f} ppm"
            for p in parts if p.clock is not None]
    return (f"mpi: {len(parts)} processes; records aligned onto rank 0's clock (Cristian's method): "
            + ("; ".join(rows) if rows else "one process, nothing to align"))


def _anchor(device: Any, records: RunRecords, rank: int) -> int:
    """The rank's time base 0 on the clock its alignment is measured on (:func:`~harness.distributed.clock_sync.local_clock`)."""
    if hasattr(device, "sync_anchor"):
        return int(device.sync_anchor(records, rank))
    from harness.run.device.cpu import _clock_offset_ns

    anchor = records.device.get("host_anchor_ns")
    if anchor is None:
        raise ExecutionError(f"mpi: rank {rank}: the local device gave no host anchor; the run cannot be aligned")
    return int(anchor) - _clock_offset_ns() + injected_offset_ns(rank)

