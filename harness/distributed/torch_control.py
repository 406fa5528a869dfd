"""The control messages between the ranks of a ``torch`` backend run, over a gloo process group.

Beside the pipeline's own traffic (PyTorch's stages' point-to-point operations, on the default
group: gloo on CPU, NCCL on GPU), the ranks exchange: the profiling window's steps and step times
(:class:`~harness.distributed.synced_window.SyncedWindow`), barriers before each step, the clock
ping-pong (Cristian's method, F. Cristian, "Probabilistic clock synchronization", Distributed
Computing 3(3), 1989, section 3: rank 0 reads its clock, asks rank ``q`` for its clock and reads
its own again when the answer comes; of ``n`` exchanges the one with the smallest round trip is
kept, :func:`harness.distributed.clock_sync.best_exchange`), and the gathering of the ranks' records
on rank 0. :class:`TorchControl` carries them on a gloo group (the default group on CPU, one made
beside NCCL on GPU), every call bounded by the group's timeout.

A failure: the rank that fails first writes ``rank R: its error`` into the rendezvous store
(which outlives a dead worker); a rank whose wait then fails says that one
(:meth:`TorchControl.first_failure`), so every rank's error names the rank at fault. Imports torch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from harness.errors import ExecutionError

__all__ = ["TorchControl"]


class TorchControl:
    """Control messages of one run (module doc).

    Args:
        group: the gloo group (``None``: the default group, itself gloo).
        rank, size: this process's rank and the number of ranks.
        run_id: names this run's key in the rendezvous store (one torchrun session runs many cases).
    """

    def __init__(self, group: Any, rank: int, size: int, run_id: str) -> None:
        self.group = group
        self.rank = rank
        self.size = size
        self.key = f"harness-torch/{run_id}/failed"

    def _fail(self, what: str, exc: BaseException) -> ExecutionError:
        first = self.first_failure()
        own = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if first is not None and first[0] != self.rank:
            return ExecutionError(f"torch: {first[1]} (rank {self.rank} then failed waiting for {what}: {own})")
        return ExecutionError(f"torch: rank {self.rank}: waiting for {what}: {type(exc).__name__}: {own}")

    def bcast(self, obj: Any, what: str) -> Any:
        """Rank 0's ``obj`` on every rank.

        Raises:
            ExecutionError: a rank failed or the wait timed out (names the rank at fault).
        """
        box = [obj if self.rank == 0 else None]
        try:
            dist.broadcast_object_list(box, src=0, group=self.group)
        except Exception as exc:
            raise self._fail(what, exc) from None
        return box[0]

    def gather(self, obj: Any, what: str) -> list[Any] | None:
        """Every rank's ``obj`` on rank 0, in rank order (``None`` on the others).

        Raises:
            ExecutionError: a rank failed or the wait timed out (names the rank at fault).
        """
        out: list[Any] | None = [None] * self.size if self.rank == 0 else None
        try:
            dist.gather_object(obj, out, dst=0, group=self.group)
        except Exception as exc:
            raise self._fail(what, exc) from None
        return out

    def barrier(self, what: str) -> None:
        """Wait until every rank is here.

        Raises:
            ExecutionError: a rank failed or the wait timed out.
        """
        try:
            dist.barrier(group=self.group)
        except Exception as exc:
            raise self._fail(what, exc) from None

    def ping_pong(self, clock: Callable[[], int], exchanges: int) -> dict[int, list[tuple[int, int, int]]]:
        """``exchanges`` clock exchanges between rank 0 and every other rank, one rank after the other
        (blocking ``send``/``recv`` of one int64 tensor on the control group).

        Returns:
            On rank 0, per other rank its ``(t0, t_q, t1)`` triples (ns); ``{}`` elsewhere.

        Raises:
            ExecutionError: a rank failed or an exchange timed out.
        """
        buf = torch.zeros(1, dtype=torch.int64)
        out: dict[int, list[tuple[int, int, int]]] = {}
        try:
            for q in range(1, self.size):
                if self.rank == 0:
                    rows = []
                    for _ in range(exchanges):
                        t0 = clock()
                        dist.send(buf, q, group=self.group)
                        dist.recv(buf, q, group=self.group)
                        t1 = clock()
                        rows.append((t0, int(buf.item()), t1))
                    out[q] = rows
                elif self.rank == q:
                    for _ in range(exchanges):
                        dist.recv(buf, 0, group=self.group)
                        buf.fill_(clock())
                        dist.send(buf, 0, group=self.group)
        except Exception as exc:
            raise self._fail("the clock exchange with rank 0", exc) from None
        return out

    def _store(self) -> Any:
        try:
            return dist.distributed_c10d._get_default_store()
        except Exception:
            return None

    def report_failure(self, message: str) -> None:
        """Say, once per run, that this rank failed first with ``message`` (which names the rank), through
        the rendezvous store."""
        store = self._store()
        if store is None:
            return
        try:
            store.compare_set(self.key, "", f"{self.rank}|{message}")
        except Exception:
            pass

    def first_failure(self, timeout_s: float = 2.0) -> tuple[int, str] | None:
        """``(rank, its error)`` of the rank that failed first, where one said so; else ``None``."""
        store = self._store()
        if store is None:
            return None
        saved = getattr(store, "timeout", None)
        try:
            store.set_timeout(timedelta(seconds=timeout_s))
            if store.check([self.key]):
                who, _, text = bytes(store.get(self.key)).decode().partition("|")
                return (int(who), text) if who.isdigit() and text else None
        except Exception:
            return None
        finally:
            if saved is not None:  # the store serves the session's later groups too
                with contextlib.suppress(Exception):
                    store.set_timeout(saved)
        return None
