"""Point-to-point transfer figures: measured over MPI, fitted, and fed into the transfer cost model.

The cost model charges a transfer ``latency + bytes / bandwidth`` (Hockney's model, R. W. Hockney,
"The communication challenge for MPP: Intel Paragon and Meiko CS-2", Parallel Computing 20(3),
1994, section 2; the form :class:`~harness.model.cost.FixedCost` uses). :func:`measure_p2p` times
ping-pongs between two MPI ranks as the OSU micro-benchmarks' ``osu_latency`` does (one-way time =
half the round trip, averaged over repetitions after warm-up; OSU's ``mpi/pt2pt/osu_latency.c``);
:func:`fit_hockney` fits latency and bandwidth by least squares; :func:`with_measured_transfers`
puts them into a :class:`~harness.model.cost.FixedCost`, so ``sim`` predicts with this machine's transfers.

Times in ns, sizes in bytes, bandwidth in GB/s (bytes per ns).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.errors import ConfigError
from harness.model.cost import FixedCost

__all__ = ["P2PSample", "fit_hockney", "measure_p2p", "with_measured_transfers"]


@dataclass(frozen=True, slots=True)
class P2PSample:
    """One message size's measured one-way time.

    Attributes:
        nbytes: message size, bytes.
        one_way_ns: half the mean round trip, ns.
        repeats: round trips averaged.
    """

    nbytes: int
    one_way_ns: float
    repeats: int

    @property
    def gbytes_per_s(self) -> float:
        """Achieved bandwidth, GB/s (bytes per ns)."""
        return self.nbytes / self.one_way_ns if self.one_way_ns > 0 else 0.0


def fit_hockney(samples: Sequence[P2PSample]) -> tuple[float, float]:
    """Least-squares ``one_way_ns = latency_ns + nbytes / gbytes_per_s`` over ``samples``, weighted by
    ``1 / one_way_ns**2`` (relative errors: sizes from 1 KiB to 64 MiB span four orders of magnitude).

    Returns:
        ``(latency_ns, gbytes_per_s)``; the latency is at least 0.

    Raises:
        ConfigError: fewer than two distinct sizes, a time that is not positive, or a fit whose slope
            is not positive (times that do not grow with the size: no bandwidth can be read from them).
    """
    xs = [float(s.nbytes) for s in samples]
    ys = [float(s.one_way_ns) for s in samples]
    if len(set(xs)) < 2:
        raise ConfigError("fitting latency and bandwidth needs samples of at least two message sizes")
    if any(y <= 0 for y in ys):
        raise ConfigError("fitting latency and bandwidth needs positive one-way times")
    # weights 1/y^2: the fit minimizes relative errors, so the microsecond sizes weigh as much as the
    # millisecond ones (an unweighted fit is all 64 MiB and reads no latency)
    ws = [1.0 / (y * y) for y in ys]
    sw = sum(ws)
    mx, my = sum(w * x for w, x in zip(ws, xs)) / sw, sum(w * y for w, y in zip(ws, ys)) / sw
    sxx = sum(w * (x - mx) ** 2 for w, x in zip(ws, xs))
    slope = sum(w * (x - mx) * (y - my) for w, x, y in zip(ws, xs, ys)) / sxx
    if slope <= 0:
        raise ConfigError(f"measured transfer times do not grow with the message size (slope {slope:g} ns/byte): no bandwidth to fit")
    return max(0.0, my - slope * mx), 1.0 / slope


def with_measured_transfers(cost: FixedCost, samples: Sequence[P2PSample]) -> FixedCost:
    """``cost`` with its transfer latency and bandwidth replaced by the fit of ``samples`` (:func:`fit_hockney`).

    Raises:
        ConfigError: ``cost.activation_bytes`` is 0 (the bandwidth would apply to nothing; give the
            bytes per send), or the fit fails.
    """
    if cost.activation_bytes == 0:
        raise ConfigError("with_measured_transfers: the cost model's activation_bytes is 0, so a measured bandwidth would apply to "
                          "nothing; give activation_bytes (bytes per send)")
    latency, bandwidth = fit_hockney(samples)
    return dataclasses.replace(cost, p2p_latency_ns=round(latency), p2p_gbytes_per_s=bandwidth)


def measure_p2p(comm: Any, sizes: Sequence[int], peer: int, min_time_s: float = 0.05, max_repeats: int = 1000,
                warmup: int = 3) -> list[P2PSample]:
    """Ping-pong ``sizes`` between this rank and ``peer`` (both call it; the lower rank pings).

    Args:
        comm: an mpi4py communicator.
        sizes: message sizes, bytes.
        peer: the other rank.
        min_time_s: time each size for at least this long (the pinging rank decides the repeat count).
        max_repeats: at most this many round trips per size.
        warmup: untimed round trips first.

    Returns:
        On the pinging (lower) rank, one :class:`P2PSample` per size; ``[]`` on the other.
    """
    import numpy as np
    from mpi4py import MPI

    me = comm.Get_rank()
    pinger = me < peer
    out = []
    for nbytes in sizes:
        buf = np.zeros(max(nbytes, 1), dtype=np.uint8)
        msg = [buf, nbytes, MPI.BYTE]
        # the pinger times one round trip, then tells the peer how many to do
        reps = np.zeros(1, dtype=np.int64)
        if pinger:
            for _ in range(3):  # the last of three round trips: the first pays for connection set-up
                t0 = time.perf_counter_ns()
                comm.Send(msg, dest=peer, tag=7)
                comm.Recv(msg, source=peer, tag=7)
                one = max(1, time.perf_counter_ns() - t0)
            reps[0] = max(3, min(max_repeats, int(min_time_s * 1e9 / one)))
            comm.Send([reps, MPI.INT64_T], dest=peer, tag=8)
        else:
            for _ in range(3):
                comm.Recv(msg, source=peer, tag=7)
                comm.Send(msg, dest=peer, tag=7)
            comm.Recv([reps, MPI.INT64_T], source=peer, tag=8)
        total = 0
        for i in range(warmup + int(reps[0])):
            if pinger:
                t0 = time.perf_counter_ns()
                comm.Send(msg, dest=peer, tag=9)
                comm.Recv(msg, source=peer, tag=9)
                if i >= warmup:
                    total += time.perf_counter_ns() - t0
            else:
                comm.Recv(msg, source=peer, tag=9)
                comm.Send(msg, dest=peer, tag=9)
        if pinger:
            out.append(P2PSample(nbytes, total / (2 * int(reps[0])), int(reps[0])))
    return out
