"""Clock alignment of MPI ranks onto rank 0's time base (Cristian's method, with linear drift).

Each rank times its jobs on its own host clock. To put every rank's records on one
timeline, rank 0 estimates each other rank's clock offset by ping-pong: it reads its
clock (``t0``), asks the rank for its clock (``t_r``), and reads its clock again when the
answer arrives (``t1``). If the answer was read at some moment of ``[t0, t1]``, the
offset ``t_r - (t0 + t1) / 2`` is off by at most ``(t1 - t0) / 2``, half the round trip
(RTT). Of many exchanges the one with the smallest RTT gives the tightest bound
(F. Cristian, "Probabilistic clock synchronization", Distributed Computing 3(3),
1989, section 3; the same min-RTT filter NTP's clock filter uses, RFC 5905 section 10).

The offset is estimated at the start and at the end of each case; the drift is the
change between the two, applied linearly in between (clock rate constant over a case).
Between two estimates each within its bound, the linear interpolation is within the
larger of the two bounds, which is the bound a merge reports. A merge with an unknown
bound is refused (:class:`~harness.errors.ConfigError`), never guessed.

Times are integers in ns. This module is pure arithmetic: the MPI exchange is in
:mod:`harness.distributed.mpi`.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.errors import ConfigError

__all__ = [
    "TEST_OFFSET_ENV",
    "ClockAlignment",
    "OffsetEstimate",
    "align",
    "best_exchange",
    "injected_offset_ns",
    "local_clock",
]

#: Test hook: ``RANK:NS`` adds ``NS`` to MPI rank ``RANK``'s clock (both the ping-pong and the
#: records' anchor), e.g. ``HARNESS_MPI_TEST_CLOCK_OFFSET=1:250000000`` for +250 ms on rank 1.
TEST_OFFSET_ENV = "HARNESS_MPI_TEST_CLOCK_OFFSET"


def injected_offset_ns(rank: int, environ: dict[str, str] | None = None) -> int:
    """The offset (ns) the :data:`TEST_OFFSET_ENV` hook adds to ``rank``'s clock, 0 when unset.

    Raises:
        ConfigError: the variable is not ``RANK:NS`` with whole numbers.
    """
    text = (os.environ if environ is None else environ).get(TEST_OFFSET_ENV, "").strip()
    if not text:
        return 0
    try:
        who, ns = text.split(":")
        return int(ns) if int(who) == rank else 0
    except ValueError:
        raise ConfigError(f"{TEST_OFFSET_ENV}={text!r}: expected RANK:NS, e.g. 1:250000000") from None


def local_clock(rank: int) -> Callable[[], int]:
    """This process's monotonic host clock in ns (``time.perf_counter_ns``, the clock the ``cpu``
    device stamps its events with), plus the :data:`TEST_OFFSET_ENV` hook's offset for ``rank``.
    Processes on one host share it (Linux ``CLOCK_MONOTONIC``), so their true offset is 0 there
    and the hook's offset exactly; across hosts it differs by their boot times, which the
    alignment measures like any other offset."""
    shift = injected_offset_ns(rank)
    perf = time.perf_counter_ns
    return lambda: perf() + shift


@dataclass(frozen=True, slots=True)
class OffsetEstimate:
    """One clock offset estimate of a rank against rank 0.

    Attributes:
        offset_ns: the rank's clock minus rank 0's, in ns.
        bound_ns: the estimate's error bound, half the round trip, in ns.
        at_ns: when it holds, on the rank's own clock (ns).
        rtt_ns: the round trip of the exchange kept, in ns.
        samples: exchanges made (the smallest round trip is kept).
    """

    offset_ns: int
    bound_ns: int
    at_ns: int
    rtt_ns: int
    samples: int

    def to_dict(self) -> dict[str, int]:
        """The fields as results.json keeps them (all ns but ``samples``)."""
        return {"offset_ns": self.offset_ns, "bound_ns": self.bound_ns, "at_ns": self.at_ns, "rtt_ns": self.rtt_ns,
                "samples": self.samples}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> OffsetEstimate:
        """Read one from results (``where`` names it in errors).

        Raises:
            ConfigError: a field missing or not a whole number (a bound below 0 included).
        """
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: a clock estimate must be an object with offset_ns, bound_ns, at_ns, got {data!r}")
        try:
            values = {k: data[k] for k in ("offset_ns", "bound_ns", "at_ns")}
        except KeyError as exc:
            raise ConfigError(f"{where}: the clock estimate has no {exc.args[0]}; a merge without a known bound is refused") from None
        for k, v in values.items():
            if not isinstance(v, int) or isinstance(v, bool):
                raise ConfigError(f"{where}: clock estimate {k} must be a whole number of ns, got {v!r}")
        if values["bound_ns"] < 0:
            raise ConfigError(f"{where}: clock estimate bound_ns must be >= 0, got {values['bound_ns']}")
        extra = {"rtt_ns": data.get("rtt_ns", 2 * values["bound_ns"]), "samples": data.get("samples", 1)}
        for k, v in extra.items():
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ConfigError(f"{where}: clock estimate {k} must be a whole number of 0 or more, got {v!r}")
        return cls(values["offset_ns"], values["bound_ns"], values["at_ns"], extra["rtt_ns"], extra["samples"])


def best_exchange(exchanges: Sequence[tuple[int, int, int]]) -> OffsetEstimate:
    """Cristian's estimate from ping-pong exchanges: the one with the smallest round trip.

    Args:
        exchanges: ``(t0, t_remote, t1)`` per exchange, in ns: rank 0's clock when it asked,
            the rank's clock when it answered, rank 0's clock when the answer arrived.

    Returns:
        The offset (remote minus rank 0) at the kept exchange, ``at_ns`` on the remote clock,
        bound = half its round trip (rounded up).

    Raises:
        ConfigError: no exchanges, or one whose answer arrived before it was asked (``t1 < t0``).
    """
    if not exchanges:
        raise ConfigError("clock alignment needs at least one ping-pong exchange")
    for t0, _, t1 in exchanges:
        if t1 < t0:
            raise ConfigError(f"clock alignment: an exchange ended ({t1} ns) before it started ({t0} ns) on rank 0's clock")
    t0, tr, t1 = min(exchanges, key=lambda e: e[2] - e[0])
    rtt = t1 - t0
    # offset = tr - (t0 + t1) / 2, in integers: floor division, the bound rounded up covers it
    return OffsetEstimate(tr - (t0 + t1) // 2, (rtt + 1) // 2, tr, rtt, len(exchanges))


@dataclass(frozen=True, slots=True)
class ClockAlignment:
    """A rank's clock against rank 0's over one case: estimates at start and end, drift between.

    Attributes:
        rank: the MPI rank (pipeline rank) it aligns.
        start, end: the estimates; ``end`` is ``None`` when only one was made (no drift).
    """

    rank: int
    start: OffsetEstimate
    end: OffsetEstimate | None = None

    @property
    def drift(self) -> float:
        """Clock rate difference, ns of offset per ns of the rank's clock (0 with one estimate)."""
        if self.end is None or self.end.at_ns == self.start.at_ns:
            return 0.0
        return (self.end.offset_ns - self.start.offset_ns) / (self.end.at_ns - self.start.at_ns)

    @property
    def bound_ns(self) -> int:
        """Error bound of :meth:`offset_at` between the estimates: the larger of their bounds, ns."""
        return max(self.start.bound_ns, self.end.bound_ns if self.end is not None else 0)

    def offset_at(self, local_ns: int) -> int:
        """The rank's clock minus rank 0's at ``local_ns`` (the rank's clock), in ns: the start
        estimate moved by the drift."""
        return self.start.offset_ns + round(self.drift * (local_ns - self.start.at_ns))

    def to_rank0(self, local_ns: int) -> int:
        """``local_ns`` (the rank's clock) on rank 0's clock, ns."""
        return local_ns - self.offset_at(local_ns)

    def to_dict(self) -> dict[str, Any]:
        """For results.json: offset at the start, drift (ppm and ns/s), bound, both estimates."""
        return {
            "rank": self.rank,
            "offset_ns": self.start.offset_ns,
            "drift_ppm": self.drift * 1e6,
            "bound_ns": self.bound_ns,
            "start": self.start.to_dict(),
            "end": self.end.to_dict() if self.end is not None else None,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str) -> ClockAlignment:
        """Read one written by :meth:`to_dict` (``where`` names the file or rank in errors).

        Raises:
            ConfigError: missing or malformed estimates: the bound would be unknown.
        """
        if not isinstance(data, dict) or "start" not in data or not isinstance(data.get("rank"), int):
            raise ConfigError(f"{where}: clock alignment missing or malformed (needs rank and start); "
                              "a merge without a known bound is refused")
        end = data.get("end")
        return cls(data["rank"], OffsetEstimate.from_dict(data["start"], where),
                   None if end is None else OffsetEstimate.from_dict(end, where))


def align(start: OffsetEstimate, end: OffsetEstimate | None, rank: int) -> ClockAlignment:
    """The alignment of ``rank`` from its start and end estimates.

    Raises:
        ConfigError: a bound that is not finite (unknown) or an end estimate before the start.
    """
    for e in (start, end):
        if e is not None and not (isinstance(e.bound_ns, int) and math.isfinite(e.bound_ns) and e.bound_ns >= 0):
            raise ConfigError(f"rank {rank}: clock offset bound unknown ({e.bound_ns!r}); a merge without a bound is refused")
    if end is not None and end.at_ns < start.at_ns:
        raise ConfigError(f"rank {rank}: the end clock estimate ({end.at_ns} ns) is before the start one ({start.at_ns} ns)")
    return ClockAlignment(rank, start, end)
