"""Align the clocks of ranks recorded on several hosts.

Each rank's profiler stamps events with its host's wall clock. Ranks on one host
share that clock; across hosts the clocks differ by an unknown skew (NTP keeps it
to around a millisecond at best), and merging them as if they agreed can put a
receive before its send. The rule here:

* one host: the files share a clock; nothing is shifted (and the pairs are still
  checked: a violation there means mismatched pairs, and is reported);
* several hosts: per host an offset ``o`` (ns, added to its times) is fitted from
  the matched send/receive pairs. A receive cannot complete before its send
  started: ``recv_end + o_b >= send_start + o_a``, i.e. ``o_b - o_a >= send_start -
  recv_end``. These difference constraints are solved by longest paths from the
  reference host (the one holding rank 0, offset 0; Bellman-Ford, as for any system
  of difference constraints: Cormen et al., *Introduction to Algorithms*, 3rd ed.,
  §24.4), which gives the smallest offsets that satisfy every pair. The same
  constraints read from the other side bound each offset from above; the interval
  ``[low, high]`` is reported as the bound of the fit. The offset taken is the
  **midpoint** of that interval: ``low`` is the offset at which the fastest transfer
  one way took no time at all, ``high`` the one at which the fastest transfer the
  other way did; the midpoint assumes the fastest transfers took as long each way,
  which is the symmetric-delay assumption of NTP's offset estimate
  ``((T2 - T1) + (T3 - T4)) / 2`` (D. Mills et al., RFC 5905, *Network Time
  Protocol Version 4*, §8). Taking ``low`` instead would give one direction's
  transfers zero time and the other's twice their share, and the replay would wait
  on them. The vector of midpoints satisfies every pair (it is the mean of the
  smallest and the largest solutions, both feasible: the feasible set is convex; and
  flooring to whole ns keeps each integer constraint). A host bounded on one side
  only takes that bound;
* or offsets given by the user (per rank, ns), checked against the pairs;
* hosts with no pair linking them to the reference host are refused: their skew is
  unknown, and a silent merge would be wrong.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from harness.errors import InputFormatError

__all__ = ["ClockFit", "SendRecvPair", "fit_offsets"]


@dataclass(frozen=True)
class SendRecvPair:
    """One matched transfer.

    Attributes:
        send_rank, recv_rank: the ranks.
        send_ns: when the send started (sender's clock, absolute ns).
        recv_ns: when the receive had completed (receiver's clock, absolute ns): the end of
            its ``gloo:recv`` span, else the start of the consumer's compute.
        label: what it carried (``"1F0 -> 2F0"``), for messages.
    """

    send_rank: int
    send_ns: int
    recv_rank: int
    recv_ns: int
    label: str


@dataclass(frozen=True)
class ClockFit:
    """How the ranks' clocks were put on one time base.

    Attributes:
        method: ``"shared"`` (one host), ``"fitted"`` or ``"given"``.
        offsets_ns: per rank, ns added to its times.
        low_ns, high_ns: per rank, the range of offsets the pairs allow (``None``: unbounded
            on that side); equal to the offset for the reference host. A fitted offset is the
            midpoint of its range (module doc).
        pairs: the number of pairs used.
        min_slack_ns: after alignment, the smallest ``recv - send`` over all pairs (ns);
            negative only when given offsets break causality.
        note: one sentence for the report saying what was assumed.
    """

    @property
    def breaks_causality(self) -> bool:
        """Whether, on the merged time base, some receive completes before its send started."""
        return self.min_slack_ns is not None and self.min_slack_ns < 0

    @property
    def needs_flag(self) -> bool:
        """Whether the report should flag the case: offsets fitted across hosts (an estimate,
        known only to within its bound) or offsets that break causality."""
        return self.method == "fitted" or self.breaks_causality

    method: str
    offsets_ns: list[int]
    low_ns: list[int | None]
    high_ns: list[int | None]
    pairs: int
    min_slack_ns: int | None
    note: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _longest(nodes: int, edges: list[tuple[int, int, int]], src: int, what: str) -> list[int | None]:
    """Longest path lengths from ``src`` (Bellman-Ford); ``None`` for nodes it does not reach.

    Raises:
        InputFormatError: a positive cycle: no offsets satisfy every pair (``what`` says where).
    """
    dist: list[int | None] = [None] * nodes
    dist[src] = 0
    for it in range(nodes):
        changed = False
        for a, b, w in edges:
            da = dist[a]
            if da is not None and (dist[b] is None or da + w > dist[b]):  # type: ignore[operator]
                dist[b] = da + w
                changed = True
        if not changed:
            return dist
        if it == nodes - 1:
            raise InputFormatError(
                f"{what}: no clock offsets satisfy every send/receive pair (a receive would complete before its send "
                "in every alignment): the pairs are mismatched or the clocks drifted during the run; give --clock-offsets"
            )
    return dist


def fit_offsets(world: int, hosts: list[str], pairs: list[SendRecvPair], given: list[int] | None = None,
                what: str = "traces", given_by: str = "clock offsets given by the user") -> ClockFit:
    """Per-rank clock offsets (ns) for ``world`` ranks on ``hosts`` (see module doc).

    Args:
        world: the number of ranks.
        hosts: per rank, its host name.
        pairs: the matched transfers.
        given: per rank, offsets chosen by the user (ns), used as they are.
        what: names the input in messages.
        given_by: how the note names the origin of ``given``.

    Raises:
        InputFormatError: ``given`` has the wrong length; hosts not linked to rank 0's host by
            any pair (their skew is unknown); no offsets satisfy the pairs.
    """
    def slack(off: list[int]) -> int | None:
        return min((p.recv_ns + off[p.recv_rank] - p.send_ns - off[p.send_rank] for p in pairs), default=None)

    if given is not None:
        if len(given) != world:
            raise InputFormatError(f"{what}: {len(given)} clock offsets given for {world} ranks; give one per rank (ns)")
        off = [int(x) for x in given]
        s = slack(off)
        note = f"{given_by} ({', '.join(f'rank {r}: {o} ns' for r, o in enumerate(off))})"
        if s is not None and s < 0:
            note += f"; with them a receive completes {-s} ns before its send started: they break causality"
        return ClockFit("given", off, list(off), list(off), len(pairs), s, note)
    names = sorted(set(hosts), key=hosts.index)
    if len(names) <= 1:
        s = slack([0] * world)
        note = f"all ranks ran on host {names[0] if names else '?'!r}: one clock, no offsets"
        if s is not None and s < 0:
            note += (f"; but a receive completes {-s} ns before its send started on this clock: the pairs may be "
                     "mismatched")
        return ClockFit("shared", [0] * world, [0] * world, [0] * world, len(pairs), s, note)
    node = {h: i for i, h in enumerate(names)}
    ref = node[hosts[0]]
    edges: list[tuple[int, int, int]] = []  # o[b] - o[a] >= w
    for p in pairs:
        a, b = node[hosts[p.send_rank]], node[hosts[p.recv_rank]]
        if a != b:
            edges.append((a, b, p.send_ns - p.recv_ns))
    low = _longest(len(names), edges, ref, what)
    back = _longest(len(names), [(b, a, w) for a, b, w in edges], ref, what)  # longest path to ref: o[ref] - o[x] >= L
    high = [None if x is None else -x for x in back]
    unlinked = [h for h in names if low[node[h]] is None and high[node[h]] is None]
    if unlinked:
        raise InputFormatError(
            f"{what}: the ranks ran on {len(names)} hosts, and no send/receive pair links host(s) "
            f"{', '.join(map(repr, unlinked))} to {hosts[0]!r}: their clock skew is unknown, so the ranks cannot be "
            "merged on one time base; give --clock-offsets (ns per rank)"
        )
    host_off = [(lo + hi) // 2 if lo is not None and hi is not None else lo if lo is not None else hi
                for lo, hi in zip(low, high)]
    off = [int(host_off[node[h]] or 0) for h in hosts]
    lo_r = [low[node[h]] for h in hosts]
    hi_r = [high[node[h]] for h in hosts]
    widest = max(((h - lo) for lo, h in zip(lo_r, hi_r) if lo is not None and h is not None), default=0)
    shown = ", ".join(
        f"rank {r}: {o / 1e6:+.3f} ms (bound [{'-inf' if lo is None else f'{lo / 1e6:+.3f}'}, "
        f"{'+inf' if hi is None else f'{hi / 1e6:+.3f}'}] ms)"
        for r, (o, lo, hi) in enumerate(zip(off, lo_r, hi_r)) if hosts[r] != hosts[0])
    note = (f"ranks on {len(names)} hosts: per-host clock offsets fitted from {len(edges)} cross-host send/receive "
            f"pairs, each the midpoint of the offsets that keep every receive after its send (equal fastest "
            f"transfers both ways, as NTP assumes): {shown}; each offset is known to within "
            f"±{widest / 2e3:.1f} µs only")
    return ClockFit("fitted", off, lo_r, hi_r, len(pairs), slack(off), note)
