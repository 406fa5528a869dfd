"""ZB-auto's evaluator: per-rank F/I/W lists timed exactly under the ``edge`` comm model, in full
or incrementally after a move of the search (:mod:`harness.schedule.zb_auto`).

A rank runs its list in order, each job as early as it can (ASAP): ``F(s, j)`` needs ``F(s-1, j)``
plus the transfer into stage ``s``, ``I(s, j)`` needs ``F(s, j)`` and ``I(s+1, j)`` plus the
transfer back, ``W(s, j)`` needs ``I(s, j)``. Each kind runs in micro-batch order on a stage, so a
rank's list is its string of kinds (``"FFIFIW..."``, codes 0, 1, 2 here). The transfer times are
per stage and direction, as ``harness.plan.delays.edge_delays`` charges them: the timeline equals
the harness's ``sim`` backend under ``comm_model="edge"`` for any cost model (checked in
``tests/test_zb_auto.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.errors import ConfigError, ScheduleError

__all__ = ["KINDS", "DeadlockError", "Delays", "Timeline", "delays", "durations", "peak_memory", "simulate"]

KINDS = ("F", "I", "W")
_F, _I, _W = 0, 1, 2

#: Per stage ``s``: the delay into ``F(s)`` from ``F(s-1)`` (0 for stage 0) and into ``I(s)`` from
#: ``I(s+1)`` (0 for the last stage), in ns.
Delays = tuple[list[int], list[int]]


class DeadlockError(ScheduleError):
    """The per-rank lists cannot all run: a job waits, directly or not, on a job listed after it."""


@dataclass(frozen=True)
class Timeline:
    """ASAP times of per-rank lists under the ``edge`` comm model.

    Attributes:
        starts_ns: per rank, the start of each job of its list (ns from step start).
        ends_ns: per rank, the end of its last job (ns).
        spans_ns: per rank, last job end minus first job start (ns).
        objective_ns: the longest span (ns), the zero-bubble scheduler's objective.
        step_ns: the last job end over all ranks (ns): the step time, every rank starting at 0.
    """

    starts_ns: tuple[tuple[int, ...], ...]
    ends_ns: tuple[int, ...]
    spans_ns: tuple[int, ...]
    objective_ns: int
    step_ns: int


def _per_stage(value: object, p: int, what: str) -> list[int]:
    """``value`` (one number or one per stage) as ``p`` whole ns >= 0."""
    if isinstance(value, bool):
        raise ConfigError(f"{what} must be a number of ns or a sequence of them, got {value!r}")
    if isinstance(value, (int, float)):
        values = [value] * p
    else:
        values = list(value)  # type: ignore[call-overload]
    if len(values) != p:
        raise ConfigError(f"{what}: {len(values)} values for {p} stages")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0 or v == float("inf"):  # NaN fails >= 0
            raise ConfigError(f"{what}: durations must be finite numbers >= 0 (ns), got {v!r}")
        out.append(round(v))
    return out


def durations(p: int, f_ns: object, i_ns: object, w_ns: object) -> list[tuple[int, int, int]]:
    """Per stage ``(F, I, W)`` in whole ns from one number or one per stage each.

    Raises:
        ConfigError: a count other than ``p``, or a value that is no finite number >= 0.
    """
    return list(zip(_per_stage(f_ns, p, "f_ns"), _per_stage(i_ns, p, "i_ns"), _per_stage(w_ns, p, "w_ns")))


def delays(p: int, comm_ns: object) -> Delays:
    """The transfer delays into each stage's ``F`` and ``I`` (:data:`Delays`) from one transfer
    time (ns) for every dependency between ranks, or from per-stage ``(forward_transfer_ns,
    backward_transfer_ns)`` (stage ``k``'s output to ``k+1``; its input gradient to ``k-1``).

    Raises:
        ConfigError: a negative or non-numeric time, or lists of another length than ``p``.
    """
    if isinstance(comm_ns, tuple) and len(comm_ns) == 2 and all(isinstance(x, Sequence) for x in comm_ns):
        fwd = _per_stage(comm_ns[0], p, "forward_transfer_ns")
        bwd = _per_stage(comm_ns[1], p, "backward_transfer_ns")
    elif isinstance(comm_ns, (int, float)) and not isinstance(comm_ns, bool):
        fwd = bwd = _per_stage(comm_ns, p, "comm_ns")
    else:
        raise ConfigError(f"comm_ns must be a number of ns or a pair (forward_transfer_ns, backward_transfer_ns) of per-stage lists, "
                          f"got {comm_ns!r}")
    into_f = [0] + [fwd[s - 1] for s in range(1, p)]
    into_i = [bwd[s + 1] for s in range(p - 1)] + [0]
    return into_f, into_i


class _Sim:
    """The state of an ASAP run: per rank its list position, free time and F/I/W counts, the
    end of every F and I, and each job's start (-1: not yet run)."""

    __slots__ = ("cnt", "end_f", "end_i", "free", "ptr", "starts")

    def __init__(
        self, ptr: list[int], free: list[int], cnt: list[list[int]], end_f: list[list[int]], end_i: list[list[int]], starts: list[list[int]]
    ) -> None:
        self.ptr = ptr
        self.free = free
        self.cnt = cnt
        self.end_f = end_f
        self.end_i = end_i
        self.starts = starts


def _run(p: int, dur: list[tuple[int, int, int]], c: Delays, kinds: list[list[int]], sim: _Sim, ranks: list[int]) -> bool:
    """Run ``sim`` to the end from its state, starting with ``ranks``; ``False`` on deadlock.

    A rank runs its list until a job waits on another rank, then the next rank is taken;
    a rank is woken when its neighbour finished a job it may wait on. Linear in the jobs run.
    """
    end_f, end_i, starts, ptr, free, cnt = sim.end_f, sim.end_i, sim.starts, sim.ptr, sim.free, sim.cnt
    into_f, into_i = c
    stack = sorted(ranks, reverse=True)
    queued = [False] * p
    for s in stack:
        queued[s] = True
    while stack:
        s = stack.pop()
        queued[s] = False
        ks = kinds[s]
        n = len(ks)
        k = ptr[s]
        if k == n:
            continue
        t = free[s]
        df, di, dw = dur[s]
        ef = end_f[s]
        ei = end_i[s]
        up = end_f[s - 1] if s > 0 else None
        down = end_i[s + 1] if s < p - 1 else None
        cf = into_f[s]
        ci = into_i[s]
        st = starts[s]
        nf, ni, nw = cnt[s]
        did_f = did_i = False
        while k < n:
            kind = ks[k]
            if kind == 0:
                if up is not None:
                    d = up[nf]
                    if d < 0:
                        break
                    d += cf
                    if d > t:  # not max(): a call costs in the hot loop
                        t = d
                st[k] = t
                t += df
                ef[nf] = t
                nf += 1
                did_f = True
            elif kind == 1:
                if ef[ni] < 0:
                    break
                if down is not None:
                    d = down[ni]
                    if d < 0:
                        break
                    d += ci
                    if d > t:  # not max(): a call costs in the hot loop
                        t = d
                st[k] = t
                t += di
                ei[ni] = t
                ni += 1
                did_i = True
            else:
                if ei[nw] < 0:
                    break
                st[k] = t
                t += dw
                nw += 1
            k += 1
        ptr[s] = k
        free[s] = t
        cnt[s] = [nf, ni, nw]
        if did_f and s + 1 < p and not queued[s + 1]:
            stack.append(s + 1)
            queued[s + 1] = True
        if did_i and s > 0 and not queued[s - 1]:
            stack.append(s - 1)
            queued[s - 1] = True
    return all(ptr[s] == len(kinds[s]) for s in range(p))


def _simulate_full(p: int, m: int, dur: list[tuple[int, int, int]], c: Delays, kinds: list[list[int]]) -> _Sim | None:
    sim = _Sim(
        [0] * p, [0] * p, [[0, 0, 0] for _ in range(p)], [[-1] * m for _ in range(p)], [[-1] * m for _ in range(p)],
        [[-1] * len(kinds[s]) for s in range(p)],
    )
    return sim if _run(p, dur, c, kinds, sim, list(range(p))) else None


def _simulate(p: int, m: int, dur: list[tuple[int, int, int]], c: Delays, kinds: list[list[int]]) -> tuple[list[list[int]], list[int]] | None:
    """ASAP start times of kind strings (chains in micro-batch order) and each rank's end;
    ``None`` on deadlock."""
    sim = _simulate_full(p, m, dur, c, kinds)
    return None if sim is None else (sim.starts, sim.free)


class _Index:
    """Per rank: the list position of its j-th F and j-th I, and how many F / I precede each position."""

    __slots__ = ("before_f", "before_i", "pos_f", "pos_i")

    def __init__(self, kinds: list[list[int]]) -> None:
        self.pos_f: list[list[int]] = []
        self.pos_i: list[list[int]] = []
        self.before_f: list[list[int]] = []
        self.before_i: list[list[int]] = []
        for ks in kinds:
            self.update_row(ks, append=True)

    def update_row(self, ks: list[int], s: int = -1, append: bool = False) -> None:
        pf, pi, bf, bi = [], [], [], []
        nf = ni = 0
        for q, x in enumerate(ks):
            bf.append(nf)
            bi.append(ni)
            if x == 0:
                pf.append(q)
                nf += 1
            elif x == 1:
                pi.append(q)
                ni += 1
        bf.append(nf)
        bi.append(ni)
        if append:
            self.pos_f.append(pf)
            self.pos_i.append(pi)
            self.before_f.append(bf)
            self.before_i.append(bi)
        else:
            self.pos_f[s], self.pos_i[s], self.before_f[s], self.before_i[s] = pf, pi, bf, bi


def _resimulate(
    p: int,
    m: int,
    dur: list[tuple[int, int, int]],
    c: Delays,
    kinds: list[list[int]],
    base: _Sim,
    index: _Index,
    s0: int,
    q0: int,
    row: list[int],
) -> tuple[_Sim | None, int]:
    """Time ``kinds`` with rank ``s0``'s list replaced by ``row`` (equal to the old one before
    position ``q0``), re-running only what can change.

    A job's time can change only if it follows a changed job in the dependency graph:
    on ``s0`` the jobs from ``q0``; on ``s0+1`` the jobs from its F of the first
    micro-batch whose F on ``s0`` is at or after ``q0``; on ``s0-1`` likewise from its I;
    and so on outwards, both ways (a fixed point). Everything before those positions is
    copied from ``base``. Returns the new state (``None`` on deadlock) and the number of
    jobs re-run.
    """
    first = [len(kinds[s]) for s in range(p)]
    first[s0] = q0
    bf = index.before_f
    bi = index.before_i
    # rank s0's counts before q0 are the same in the old and the new row
    work = [s0]
    while work:
        s = work.pop()
        q = first[s]
        nf = bf[s][q]
        ni = bi[s][q]
        if s + 1 < p and s + 1 != s0 and nf < m:
            pos = index.pos_f[s + 1][nf]
            if pos < first[s + 1]:
                first[s + 1] = pos
                work.append(s + 1)
        if s > 0 and s - 1 != s0 and ni < m:
            pos = index.pos_i[s - 1][ni]
            if pos < first[s - 1]:
                first[s - 1] = pos
                work.append(s - 1)
    ptr, free, cnt, end_f, end_i, starts = [], [], [], [], [], []
    for s in range(p):
        q = first[s]
        ks = kinds[s] if s != s0 else row
        ptr.append(q)
        st = base.starts[s][:q]
        if s == s0:
            st += [-1] * (len(row) - q)
        else:
            st += [-1] * (len(ks) - q)
        starts.append(st)
        if q > 0:
            free.append(st[q - 1] + dur[s][kinds[s][q - 1]])
        else:
            free.append(0)
        nf, ni = bf[s][q], bi[s][q]
        nw = q - nf - ni
        cnt.append([nf, ni, nw])
        ef = base.end_f[s][:nf]
        ef += [-1] * (m - nf)
        ei = base.end_i[s][:ni]
        ei += [-1] * (m - ni)
        end_f.append(ef)
        end_i.append(ei)
    sim = _Sim(ptr, free, cnt, end_f, end_i, starts)
    saved = kinds[s0]
    kinds[s0] = row
    try:
        ok = _run(p, dur, c, kinds, sim, [s for s in range(p) if first[s] < len(kinds[s])])
    finally:
        kinds[s0] = saved
    rerun = sum(len(kinds[s]) - first[s] for s in range(p))
    return (sim if ok else None), rerun


def _key(p: int, starts: list[list[int]], free: list[int]) -> tuple[int, int, int]:
    spans = [free[s] - starts[s][0] if starts[s] else 0 for s in range(p)]
    return max(spans), max(free), sum(spans)


def _orders_to_kinds(p: int, m: int, orders: Sequence[Sequence[tuple[str, int]]]) -> list[list[int]]:
    code = {"F": _F, "I": _I, "W": _W}
    if len(orders) != p:
        raise ConfigError(f"{len(orders)} job lists for {p} ranks")
    out = []
    for s, row in enumerate(orders):
        nxt = [0, 0, 0]
        ks = []
        for kind, j in row:
            if kind not in code:
                raise ConfigError(f"rank {s}: unknown kind {kind!r} (F, I or W)")
            x = code[kind]
            if j != nxt[x]:
                raise ConfigError(f"rank {s}: {kind}{j} out of micro-batch order (expected {kind}{nxt[x]})")
            nxt[x] += 1
            ks.append(x)
        if nxt != [m, m, m]:
            raise ConfigError(f"rank {s}: needs {m} each of F, I, W, has {nxt}")
        out.append(ks)
    return out


def _kinds_to_orders(kinds: list[list[int]]) -> tuple[tuple[tuple[str, int], ...], ...]:
    rows = []
    for ks in kinds:
        nxt = [0, 0, 0]
        row = []
        for x in ks:
            row.append((KINDS[x], nxt[x]))
            nxt[x] += 1
        rows.append(tuple(row))
    return tuple(rows)


def simulate(
    p: int,
    m: int,
    f_ns: float | Sequence[float],
    i_ns: float | Sequence[float],
    w_ns: float | Sequence[float],
    comm_ns: float | tuple[Sequence[float], Sequence[float]],
    orders: Sequence[Sequence[tuple[str, int]]],
) -> Timeline:
    """Time per-rank job lists exactly: each job starts at ``max(rank free, dependency ends
    (+ the transfer time across ranks))``, the ``edge`` model of the zero-bubble repository's
    simulator and of :mod:`harness.model.comm` (``harness.plan.delays.edge_delays``).

    Args:
        p, m: ranks (stage ``s`` on rank ``s``) and micro-batches.
        f_ns, i_ns, w_ns: per-stage (or one) durations of F, I and W (ns).
        comm_ns: one transfer time for every dependency between ranks (ns), or per stage
            ``(forward_transfer_ns, backward_transfer_ns)`` as :class:`~harness.schedule.costs.StageCosts`
            holds them (stage ``k``'s output to ``k+1``, its input gradient to ``k-1``).
        orders: per rank, ``(kind, microbatch)`` pairs; each kind's micro-batches in order.

    Raises:
        ConfigError: lists that are not ``m`` each of F, I, W in micro-batch order, or bad durations.
        DeadlockError: the lists cannot all run.
    """
    dur = durations(p, f_ns, i_ns, w_ns)
    kinds = _orders_to_kinds(p, m, orders)
    res = _simulate(p, m, dur, delays(p, comm_ns), kinds)
    if res is None:
        raise DeadlockError("the job lists deadlock: some job waits on a job listed after it on its rank")
    starts, free = res
    spans = tuple(free[s] - starts[s][0] for s in range(p))
    return Timeline(tuple(tuple(x) for x in starts), tuple(free), spans, max(spans), max(free))


def _peaks(kinds: list[list[int]], mems: list[tuple[float, float, float]]) -> tuple[list[int], list[float]]:
    pend_out, mem_out = [], []
    for ks, (mf, mi, mw) in zip(kinds, mems):
        pend = peak = 0
        run = top = 0.0
        d = (mf, mi, mw)
        for x in ks:
            run += d[x]
            top = max(top, run)
            if x == _F:
                pend += 1
                peak = max(peak, pend)
            elif x == _W:
                pend -= 1
        pend_out.append(peak)
        mem_out.append(top)
    return pend_out, mem_out


def peak_memory(orders: Sequence[Sequence[tuple[str, int]]], memory: tuple[float, float, float] = (1, 0, -1)) -> list[float]:
    """Per rank the peak of the running memory total over its list (each job adds its kind's
    ``memory`` entry; the default counts pending micro-batches)."""
    code = {"F": _F, "I": _I, "W": _W}
    kinds = [[code[k] for k, _ in row] for row in orders]
    return _peaks(kinds, [memory] * len(kinds))[1]


def _valid_string(ks: list[int], mem: tuple[float, float, float], limit: float) -> bool:
    """Whether a kind string keeps every ``I`` after its ``F`` and every ``W`` after its ``I``,
    and its running memory total (each job adds ``mem[kind]``) within ``limit``."""
    nf = ni = nw = 0
    run = 0.0
    for x in ks:
        if x == _F:
            nf += 1
        elif x == _I:
            ni += 1
            if ni > nf:
                return False
        else:
            nw += 1
            if nw > ni:
                return False
        run += mem[x]
        if run > limit + 1e-9:
            return False
    return True
