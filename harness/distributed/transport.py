"""The MPI transport: control messages, real send/receive transfers and fault propagation.

One :class:`MpiTransport` per case, on its own duplicate of ``MPI.COMM_WORLD`` (so a
failed case's unmatched messages never reach the next case). Everything that waits
polls a non-blocking request with short sleeps (no busy wait: ranks share cores when
oversubscribed), checks on every poll whether another rank reported a failure, and
gives up after a timeout with an error naming this rank and what it waited for:

* :meth:`MpiTransport.send` / :meth:`MpiTransport.recv` - ``Isend``/``Irecv`` of a host
  buffer of the cost model's activation size (what ``SEND_*``/``RECV_*`` jobs do);
* :meth:`MpiTransport.bcast` / :meth:`MpiTransport.gather` - rank 0 to all and all to
  rank 0, as point-to-point messages (a blocking collective cannot be abandoned when
  a peer fails);
* :meth:`MpiTransport.fail` - tell every other rank that this one failed, with its error;
  they raise :class:`~harness.errors.ExecutionError` naming that rank at their next poll.

A killed process is Open MPI's to report: ``mpirun`` ends the job when one of its processes
dies; where it does not, the others' waits end at their timeout.

mpi4py is imported when a transport is made: ``pip install -e '.[mpi]'``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from harness.errors import BackendUnavailable, ExecutionError

__all__ = ["MPI_INSTALL_HINT", "MpiTransport", "import_mpi", "transfer_tag"]

MPI_INSTALL_HINT = ("install Open MPI (Debian: apt-get install openmpi-bin libopenmpi-dev) and mpi4py "
                    "(pip install -e '.[mpi]'), then launch under mpirun, e.g. mpirun -n 4 python -m pytest cases/ --backend=mpi")

_TAG_ERROR = 1
_TAG_BCAST = 2
_TAG_GATHER = 3
_TAG_CLOCK = 4
_TAG_TRANSFER0 = 16  # transfer tags start here

#: Poll sleeps (s): the first poll sleeps the minimum; later ones an eighth of the time waited
#: so far, so a wait overshoots its completion by at most about 12 % (and at most the maximum).
_POLL_MIN_S = 20e-6
_POLL_MAX_S = 1e-3


def import_mpi() -> Any:
    """``mpi4py.MPI``, initialized for threads (transfers run on the streams' threads).

    Raises:
        BackendUnavailable: mpi4py or an MPI library is missing (says what to install),
            or the library gives less than ``MPI_THREAD_MULTIPLE``.
    """
    try:
        from mpi4py import MPI
    except ImportError as exc:  # mpi4py absent, or built against an MPI that is gone
        raise BackendUnavailable(f"the mpi backend cannot run here: {exc}; {MPI_INSTALL_HINT}") from None
    if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        raise BackendUnavailable(f"the mpi backend needs MPI_THREAD_MULTIPLE (transfers run on stream threads); "
                                 f"{MPI.Get_library_version().splitlines()[0]} gives level {MPI.Query_thread()}")
    return MPI


def transfer_tag(sender_stage: int, backward: bool, microbatch: int, num_microbatches: int) -> int:
    """The MPI tag of one transfer: unique per (sending stage, direction, micro-batch), so a send and its
    receive match and no other; transfers of successive steps reuse tags and match in order (MPI's
    non-overtaking rule for one sender, tag and communicator)."""
    return _TAG_TRANSFER0 + (2 * sender_stage + int(backward)) * num_microbatches + microbatch


class MpiTransport:
    """Point-to-point transfers and rank-0 control messages of one case.

    Args:
        comm: the world communicator (duplicated here); ``None`` for ``MPI.COMM_WORLD``.
        timeout_s: how long any one wait (a transfer, a control message) may take before
            it fails with :class:`ExecutionError`, in seconds.

    Attributes:
        rank, size: this process's MPI rank and the number of processes.
        aborted: ``(rank, message)`` of the first failure reported by another rank, or ``None``.
    """

    def __init__(self, comm: Any = None, timeout_s: float = 60.0) -> None:
        self.MPI = import_mpi()
        self.comm = (comm if comm is not None else self.MPI.COMM_WORLD).Dup()
        self.rank: int = self.comm.Get_rank()
        self.size: int = self.comm.Get_size()
        self.timeout_s = float(timeout_s)
        self.aborted: tuple[int, str] | None = None
        self._lock = threading.Lock()
        self._pending: list[Any] = []  # requests kept alive until the transport is dropped
        self._buffers: dict[tuple[int, int], Any] = {}

    # -- failure propagation ------------------------------------------------------------------
    def check(self) -> None:
        """Raise if another rank reported a failure (reads at most one pending error message).

        Raises:
            ExecutionError: ``rank R failed: ...`` with that rank's error.
        """
        if self.aborted is None:
            with self._lock:
                status = self.MPI.Status()
                message = self.comm.improbe(source=self.MPI.ANY_SOURCE, tag=_TAG_ERROR, status=status) if self.aborted is None else None
                if message is not None:
                    self.aborted = (status.Get_source(), str(message.recv()))
        if self.aborted is not None:
            rank, msg = self.aborted
            raise ExecutionError(f"mpi: rank {rank} failed: {msg}")

    def fail(self, message: str) -> None:
        """Tell every other rank this one failed with ``message`` (non-blocking; once per case)."""
        with self._lock:
            if self.aborted is not None:  # a remote failure: it was said already, by its rank
                return
            self.aborted = (self.rank, message)
            for q in range(self.size):
                if q != self.rank:
                    self._pending.append(self.comm.isend(message, dest=q, tag=_TAG_ERROR))

    def _poll(self, test: Callable[[], bool], what: str, timeout_s: float | None = None) -> None:
        """Poll ``test`` with growing sleeps until it returns ``True``.

        Raises:
            ExecutionError: another rank failed, or ``timeout_s`` passed (names ``what``).
        """
        limit = self.timeout_s if timeout_s is None else timeout_s
        t0 = time.monotonic()
        pause = _POLL_MIN_S
        while not test():
            self.check()
            waited = time.monotonic() - t0
            if waited > limit:
                raise ExecutionError(f"mpi: rank {self.rank}: {what} did not complete within {limit:g} s (transfer_timeout_s): "
                                     "its peer stalled, failed or was lost")
            time.sleep(pause)
            pause = min(_POLL_MAX_S, max(_POLL_MIN_S, waited / 8))

    def _wait_request(self, req: Any, what: str) -> Any:
        """Wait for an mpi4py request; returns its value (pickled messages) or ``None``."""
        box: list[Any] = []

        def test() -> bool:
            done, value = req.test()
            if done:
                box.append(value)
            return bool(done)

        try:
            self._poll(test, what)
        except ExecutionError:
            self._cancel(req)
            raise
        return box[0]

    def _cancel(self, req: Any) -> None:
        try:
            req.Cancel()
        except Exception:  # already complete, or a send the library cannot cancel: left to MPI
            pass
        self._pending.append(req)

    # -- transfers ------------------------------------------------------------------------------
    def _buffer(self, key: int, nbytes: int) -> Any:
        import numpy as np

        buf = self._buffers.get((key, nbytes))
        if buf is None:
            buf = self._buffers[(key, nbytes)] = np.zeros(max(nbytes, 1), dtype=np.uint8)
        return buf

    def isend(self, dest: int, tag: int, nbytes: int, buffer_key: int = 0) -> Any:
        """Post a send of ``nbytes`` to rank ``dest`` (``Isend``) and return its request at once: a send on a
        comm stream must not wait for its receive, which its peer may have queued behind a send of its own
        on the same pair's stream (the deadlock blocking sends have in 1F1B). Complete it with :meth:`wait_sends`.
        The buffer is never written, so sends in flight may share it."""
        buf = self._buffer(buffer_key, nbytes)
        return self.comm.Isend([buf, nbytes, self.MPI.BYTE], dest=dest, tag=tag)

    def wait_sends(self, pending: list[tuple[Any, str, int, int]]) -> None:
        """Wait for posted sends ``(request, job label, dest, nbytes)`` to complete; empties ``pending``.

        Raises:
            ExecutionError: one did not complete within the timeout (names this rank, the job and its
                receiver), or another rank failed.
        """
        while pending:
            req, label, dest, nbytes = pending[0]
            self._wait_request(req, f"job {label} (send of {nbytes} bytes to rank {dest})")
            pending.pop(0)

    def recv(self, source: int, tag: int, nbytes: int, label: str, buffer_key: int = 0) -> None:
        """Receive ``nbytes`` from rank ``source`` (``Irecv`` + polled ``Test``).

        Raises:
            ExecutionError: not complete within the timeout (names this rank, ``label`` and ``source``),
                a message of another size, or another rank failed.
        """
        buf = self._buffer(buffer_key, nbytes)
        status = self.MPI.Status()
        req = self.comm.Irecv([buf, nbytes, self.MPI.BYTE], source=source, tag=tag)

        def test() -> bool:
            return bool(req.Test(status))

        try:
            self._poll(test, f"job {label} (receive of {nbytes} bytes from rank {source})")
        except ExecutionError:
            self._cancel(req)
            raise
        got = status.Get_count(self.MPI.BYTE)
        if got != nbytes:
            raise ExecutionError(f"mpi: rank {self.rank}: job {label} received {got} bytes from rank {source}, expected {nbytes}")

    # -- control messages -----------------------------------------------------------------------
    def _recv_obj(self, source: int, tag: int, what: str) -> Any:
        """Receive one pickled object of any size: poll a matched probe (``MPI_Improbe``), then receive the
        matched message (a pickled ``irecv`` has a fixed-size buffer, which a large message overruns)."""
        box: list[Any] = []

        def test() -> bool:
            message = self.comm.improbe(source=source, tag=tag)
            if message is not None:
                box.append(message)
            return message is not None

        self._poll(test, what)
        return box[0].recv()

    def bcast(self, obj: Any, what: str) -> Any:
        """Rank 0's ``obj`` on every rank (pickled point-to-point messages, polled).

        Raises:
            ExecutionError: another rank failed, or the message did not arrive within the timeout.
        """
        if self.rank == 0:
            reqs = [self.comm.isend(obj, dest=q, tag=_TAG_BCAST) for q in range(1, self.size)]
            for q, req in enumerate(reqs, start=1):
                self._wait_request(req, f"{what} (to rank {q})")
            return obj
        return self._recv_obj(0, _TAG_BCAST, f"{what} (from rank 0)")

    def gather(self, obj: Any, what: str) -> list[Any] | None:
        """Every rank's ``obj`` on rank 0, in rank order (``None`` on the others).

        Raises:
            ExecutionError: another rank failed, or a message did not arrive within the timeout.
        """
        if self.rank != 0:
            self._wait_request(self.comm.isend(obj, dest=0, tag=_TAG_GATHER), f"{what} (to rank 0)")
            return None
        out = [obj]
        for q in range(1, self.size):
            out.append(self._recv_obj(q, _TAG_GATHER, f"{what} (from rank {q})"))
        return out

    # -- clock ping-pong ------------------------------------------------------------------------
    def ping_pong(self, clock: Callable[[], int], exchanges: int) -> dict[int, list[tuple[int, int, int]]]:
        """Clock exchanges between rank 0 and every other rank, one rank at a time.

        Rank 0 reads ``t0``, sends a ping, the rank answers with its clock ``t_r``, rank 0
        reads ``t1`` on arrival: ``exchanges`` times per rank. The exchange itself spins
        (yielding the core between tests) so sleeps do not widen the round trip; waiting
        for one's turn polls with sleeps.

        Returns:
            On rank 0, per other rank the ``(t0, t_r, t1)`` triples (ns); ``{}`` elsewhere.

        Raises:
            ExecutionError: another rank failed, or an exchange timed out.
        """
        int64 = self.MPI.INT64_T
        import numpy as np

        out: dict[int, list[tuple[int, int, int]]] = {}
        cell = np.zeros(1, dtype=np.int64)
        if self.rank == 0:
            for q in range(1, self.size):
                rows = out[q] = []
                for i in range(exchanges):
                    t0 = clock()
                    self.comm.Send([cell, int64], dest=q, tag=_TAG_CLOCK)  # 8 bytes: eager, returns at once
                    req = self.comm.Irecv([cell, int64], source=q, tag=_TAG_CLOCK)
                    self._spin(req, f"clock exchange {i + 1} with rank {q}")
                    t1 = clock()
                    rows.append((t0, int(cell[0]), t1))
            return out
        for i in range(exchanges):
            req = self.comm.Irecv([cell, int64], source=0, tag=_TAG_CLOCK)
            if i == 0:
                self._poll(lambda r=req: bool(r.Test()), "the first clock exchange (from rank 0)")  # type: ignore[misc]
            else:
                self._spin(req, f"clock exchange {i + 1} (from rank 0)")
            cell[0] = clock()
            self.comm.Send([cell, int64], dest=0, tag=_TAG_CLOCK)
        return out

    def _spin(self, req: Any, what: str) -> None:
        deadline = time.monotonic() + self.timeout_s
        n = 0
        while not req.Test():
            os.sched_yield()
            n += 1
            if n % 256 == 0:
                self.check()
                if time.monotonic() > deadline:
                    self._cancel(req)
                    raise ExecutionError(f"mpi: rank {self.rank}: {what} did not complete within {self.timeout_s:g} s")

    def close(self) -> None:
        """Drop the buffers; the communicator is freed only after a clean case (pending messages of a
        failed one would otherwise be freed under MPI)."""
        self._buffers.clear()
        if self.aborted is None and not self._pending:
            try:
                self.comm.Free()
            except Exception:
                pass
