"""Memory in bytes per rank: what each job allocates and frees, and the timeline it gives.

A cost model that models memory (:class:`~harness.model.cost.FixedCost` with
``mem_F``/``mem_I``/``mem_W``, :class:`~harness.model.transformer.TransformerCost`) answers
two more questions than durations:

* ``memory_bytes(job, num_stages)``: the **activation bytes a job allocates
  (> 0) or frees (< 0)** on its rank, the zero-bubble simulators' signed
  ``mem_f``/``mem_b``/``mem_w`` (sail-sg/zero-bubble-pipeline-parallelism,
  ``megatron/core/pipeline_parallel/zerobubble/scheduler/zb.py``: ``m += mem``
  per scheduled job, with ``mem_b = -mem_f - mem_w``); a forward allocates, a
  full backward frees what its forward allocated, a split backward frees it in
  two parts (``I`` and ``W``);
* ``static_bytes(stage, num_stages)``: the bytes a stage holds all the time
  (parameters, gradients, optimizer state).

From any run's records (``sim``, ``cpu``, ``cuda``) or the analytic timeline,
:func:`memory_profile` computes per rank the bytes held over time (static plus
live activations) and its peak. The timing rule: a job's allocation counts
from its **start**, its frees from its **end**, so while a job runs both what
it allocates and what it frees are held (the conservative reading; at equal
times a free is counted before an allocation). A cost model without these
methods has no memory model, and no profile is computed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.errors import ConfigError
from harness.schedule.model import Job, JobKind

__all__ = ["MemoryProfile", "analytic_memory", "format_bytes", "has_memory_model", "memory_profile", "memory_profile_of_arrays"]


def format_bytes(n: float) -> str:
    """Bytes for people, with the unit that keeps three significant digits: ``"9.38 GiB"``,
    ``"12.0 MiB"``, ``"1.27 KiB"``, ``"512 B"``."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            v = n / size
            return f"{v:.3g} {unit}" if abs(v) < 1000 else f"{v:,.0f} {unit}"
    return f"{n:.0f} B"

_COMPUTE_KINDS = ("F", "B", "I", "W")
_KIND_OF = {"F": JobKind.F, "B": JobKind.B, "I": JobKind.I, "W": JobKind.W}


def has_memory_model(cost: Any) -> bool:
    """Whether ``cost`` answers ``memory_bytes`` and ``static_bytes`` with something other than zeros."""
    probe = getattr(cost, "models_memory", None)
    if callable(probe):
        return bool(probe())
    return callable(getattr(cost, "memory_bytes", None)) and callable(getattr(cost, "static_bytes", None))


@dataclass(frozen=True)
class MemoryProfile:
    """Bytes held per rank over a run.

    Attributes:
        static_bytes: per rank, the bytes its stages hold all the time (bytes).
        peak_bytes: per rank, the most bytes held at once: static plus live activations.
        peak_activation_bytes: per rank, the most activation bytes alive at once.
        peak_time_ns: per rank, when the peak was first reached (ns on the run's time base);
            empty when computed without a timeline (:func:`analytic_memory`).
        timeline: per rank, ``(times_ns, bytes)``: the bytes held from each time on,
            at every change (a step function; the first point is the rank's first job).
        limit_bytes: the device's memory per rank the case gave, or ``None``.
        source: where the per-job bytes came from (the cost model's description).
    """

    static_bytes: list[int]
    peak_bytes: list[int]
    peak_activation_bytes: list[int]
    peak_time_ns: list[int]
    timeline: list[tuple[list[int], list[int]]] = field(default_factory=list)
    limit_bytes: int | None = None
    source: str = ""

    @property
    def fits(self) -> bool | None:
        """Whether every rank's peak is within ``limit_bytes`` (``None`` without a limit)."""
        return None if self.limit_bytes is None else max(self.peak_bytes, default=0) <= self.limit_bytes

    def over_limit(self) -> list[int]:
        """Ranks whose peak is over the limit (empty without one)."""
        if self.limit_bytes is None:
            return []
        return [r for r, b in enumerate(self.peak_bytes) if b > self.limit_bytes]

    def to_dict(self, timeline: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "static_bytes": self.static_bytes, "peak_bytes": self.peak_bytes,
            "peak_activation_bytes": self.peak_activation_bytes, "peak_time_ns": self.peak_time_ns,
            "limit_bytes": self.limit_bytes, "fits": self.fits, "source": self.source,
        }
        if timeline:
            out["timeline"] = [{"t_ns": t, "bytes": b} for t, b in self.timeline]
        return out


def _table(cost: Any, num_stages: int) -> tuple[list[list[int]], list[int]]:
    """Per stage, the signed bytes of F, B, I, W (in that order), and per stage its static bytes.

    Raises:
        ConfigError: the cost model answers something that is not a whole number of bytes,
            or a forward that frees / a backward that allocates (names stage, kind and value).
    """
    deltas, static = [], []
    name = type(getattr(cost, "inner", cost)).__name__  # a checked custom model: its own name
    for stage in range(num_stages):
        row = []
        for kind in _COMPUTE_KINDS:
            value = cost.memory_bytes(Job(stage, _KIND_OF[kind], 0), num_stages)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError(f"cost model {name}: memory_bytes of {stage}{kind}0 must be a whole number of bytes, "
                                  f"got {value!r}")
            if (kind == "F" and value < 0) or (kind != "F" and value > 0):
                raise ConfigError(f"cost model {name}: {stage}{kind}0 {'frees' if value < 0 else 'allocates'} "
                                  f"{abs(value)} bytes; a forward allocates activations and a backward frees them")
            row.append(value)
        f, b, i, w = row
        if f + b != 0 or ((i or w) and f + i + w != 0):
            raise ConfigError(f"cost model {name}: stage {stage}'s forward allocates {f} bytes but its backward frees "
                              f"{-b} (B) or {-(i + w)} (I + W); the backward frees what its forward allocated, "
                              "or activations would pile up over the micro-batches")
        deltas.append(row)
        s = cost.static_bytes(stage, num_stages)
        if not isinstance(s, int) or isinstance(s, bool) or s < 0:
            raise ConfigError(f"cost model {name}: static_bytes of stage {stage} must be a whole number >= 0, got {s!r}")
        static.append(s)
    return deltas, static


def memory_profile_of_arrays(
    rank: Sequence[int], stage: Sequence[int], kind: Sequence[str], start: Sequence[int], end: Sequence[int],
    cost: Any, num_stages: int, stage_to_rank: Sequence[int], limit_bytes: int | None = None, timeline: bool = True,
    kind_tokens: Sequence[str] = (),
) -> MemoryProfile:
    """The memory profile of jobs given as columns (any order; non-compute kinds are ignored).

    Args:
        rank, stage, kind, start, end: one entry per job; ``kind`` a job kind token
            (``"F"``...), or an int array of indices into ``kind_tokens``
            (:class:`~harness.records.JobColumns`), ``start``/``end`` in ns.
        cost: a cost model with a memory model (:func:`has_memory_model`).
        num_stages: the pipeline's stage count.
        stage_to_rank: the rank of each stage (static bytes are summed per rank).
        limit_bytes: the device memory per rank, if the case gives one.
        timeline: also return the step function per rank (else only the peaks).
        kind_tokens: the tokens ``kind``'s codes index, where ``kind`` is codes.

    Raises:
        ConfigError: see :func:`_table`.
    """
    import numpy as np

    deltas, static_stage = _table(cost, num_stages)
    p = max(stage_to_rank, default=-1) + 1
    static = [0] * p
    for k, r in enumerate(stage_to_rank):
        static[r] += static_stage[k]
    if isinstance(kind, np.ndarray) and kind.dtype.kind == "i":  # codes into kind_tokens (JobColumns)
        lut = np.array([_COMPUTE_KINDS.index(k) if k in _COMPUTE_KINDS else -1 for k in kind_tokens], dtype=np.int64)
        kc = lut[kind]
    else:
        code = {k: i for i, k in enumerate(_COMPUTE_KINDS)}
        kc = np.array([code.get(k, -1) for k in kind], dtype=np.int64)
    keep = kc >= 0
    st = np.asarray(stage, dtype=np.int64)[keep]
    kc = kc[keep]
    rk = np.asarray(rank, dtype=np.int64)[keep]
    t0 = np.asarray(start, dtype=np.int64)[keep]
    t1 = np.asarray(end, dtype=np.int64)[keep]
    d = np.asarray(deltas, dtype=np.int64)[st, kc]
    alloc = d > 0
    times = np.where(alloc, t0, t1)  # allocations at the start, frees at the end
    order = np.lexsort((d, times, rk))  # by rank, then time, frees (negative) first
    rk_s, times_s, d_s = rk[order], times[order], d[order]
    peak_act, peak_t = [0] * p, [0] * p
    lines: list[tuple[list[int], list[int]]] = []
    bounds = np.searchsorted(rk_s, np.arange(p + 1))
    for r in range(p):
        a, b = int(bounds[r]), int(bounds[r + 1])
        if a == b:
            lines.append(([], []))
            continue
        held = np.cumsum(d_s[a:b])
        i = int(np.argmax(held))
        peak_act[r] = max(0, int(held[i]))
        peak_t[r] = int(times_s[a + i]) if held[i] > 0 else int(times_s[a])
        if timeline:
            tt, hh = times_s[a:b], held + static[r]
            last = np.ones(len(tt), dtype=bool)
            last[:-1] = tt[1:] != tt[:-1]  # one point per time: the bytes held after every change at it
            lines.append((tt[last].tolist(), hh[last].tolist()))
    describe = getattr(cost, "describe", None)
    source = str((describe() or {}).get("model", type(cost).__name__)) if callable(describe) else type(cost).__name__
    return MemoryProfile(static, [s + a for s, a in zip(static, peak_act)], peak_act, peak_t, lines if timeline else [],
                         limit_bytes, source)


def memory_profile(records: Any, cost: Any, num_stages: int, stage_to_rank: Sequence[int],
                   limit_bytes: int | None = None, timeline: bool = True) -> MemoryProfile | None:
    """The memory profile of a run's records (:class:`~harness.records.RunRecords`), or
    ``None`` when ``cost`` has no memory model (see :func:`memory_profile_of_arrays`)."""
    if not has_memory_model(cost):
        return None
    cols = records.columns
    return memory_profile_of_arrays(cols.rank, cols.stage, cols.kind, cols.start_ns, cols.end_ns, cost, num_stages,
                                    stage_to_rank, limit_bytes, timeline, kind_tokens=cols.kinds)


def analytic_memory(plan: Any, cost: Any, limit_bytes: int | None = None, timeline: bool = False,
                    simulated: Any = None) -> MemoryProfile | None:
    """The memory profile of ``plan``'s analytic timeline under ``cost``
    (:func:`harness.plan.timeline.simulate`), without running it; ``None`` when
    ``cost`` has no memory model.

    ``simulated``: the plan's timeline (a :class:`~harness.plan.timeline.Timeline`) where it is already
    simulated, as :func:`harness.analysis.analytic.analyze_plan` returns it under the case's communication
    model (``edge`` delays a consumer by its transfer, so its peaks are those of that timeline, as a
    ``sim`` run's records give them); else the plan is simulated here without transfer delays.

    Where every rank runs its compute jobs on one stream (all built-in schedules),
    the peaks need no timeline at all: the rank's jobs run in list order, one after
    the other, so its allocations and frees come in that order (a job's free at its
    end precedes the next job's allocation at its start), and the peak is the largest
    prefix sum of the per-job bytes, a few numpy passes over the plan's columns.
    ``timeline=True``, or several compute streams on a rank, simulates the plan and
    sorts its events (:func:`memory_profile_of_arrays`).
    """
    if not has_memory_model(cost):
        return None
    import numpy as np

    from harness.plan.build import build_plan
    from harness.plan.graph import Plan
    from harness.schedule.model import KIND_CODE, Schedule

    if isinstance(plan, Schedule):
        plan = build_plan(plan)
    if not isinstance(plan, Plan):
        raise ConfigError(f"analytic_memory takes a Plan or a Schedule, got {type(plan).__name__}")
    if limit_bytes is not None and (not isinstance(limit_bytes, int) or isinstance(limit_bytes, bool) or limit_bytes <= 0):
        raise ConfigError(f"limit_bytes must be a positive whole number of bytes, got {limit_bytes!r}")
    cols = plan.arrays
    lut = np.full(len(KIND_CODE), -1, dtype=np.int64)
    for i, kind in enumerate(_COMPUTE_KINDS):
        lut[KIND_CODE[_KIND_OF[kind]]] = i
    kc = lut[cols.kind]
    keep = kc >= 0
    p = plan.schedule.num_ranks
    one_stream = len(np.unique(cols.rank[keep] * (int(cols.stream.max(initial=0)) + 1) + cols.stream[keep])) <= p
    if timeline or not one_stream:
        from harness.plan.timeline import simulate

        tl = simulated if simulated is not None else simulate(plan, cost)
        if tl.plan is not plan:
            raise ConfigError("analytic_memory: the timeline given is of another plan")
        tokens = [""] * len(KIND_CODE)
        for kind, code in KIND_CODE.items():
            tokens[code] = kind.value
        return memory_profile_of_arrays(cols.rank, cols.stage, cols.kind, tl.start, tl.end, cost, plan.schedule.num_stages,
                                        plan.schedule.stage_to_rank, limit_bytes, timeline, kind_tokens=tokens)
    deltas, static_stage = _table(cost, plan.schedule.num_stages)
    static = [0] * p
    for k, r in enumerate(plan.schedule.stage_to_rank):
        static[r] += static_stage[k]
    rank, step, stage, kc = cols.rank[keep], cols.step[keep], cols.stage[keep], kc[keep]
    key = rank * (int(step.max(initial=0)) + 1) + step
    if len(key) > 1 and not bool(np.all(key[1:] > key[:-1])):  # not yet rank by rank in list order
        order = np.argsort(key, kind="stable")
        rank, stage, kc = rank[order], stage[order], kc[order]
    d = np.asarray(deltas, dtype=np.int64)[stage, kc]
    bounds = np.searchsorted(rank, np.arange(p + 1))
    held = np.cumsum(d)
    before = np.concatenate(([0], held))[bounds[:-1]]  # what the earlier ranks' jobs summed to
    peak_act = []
    for r in range(p):
        a, b = int(bounds[r]), int(bounds[r + 1])
        peak_act.append(max(0, int((held[a:b] - before[r]).max())) if b > a else 0)
    describe = getattr(cost, "describe", None)
    source = str((describe() or {}).get("model", type(cost).__name__)) if callable(describe) else type(cost).__name__
    return MemoryProfile(static, [s_ + a_ for s_, a_ in zip(static, peak_act)], peak_act, [], [], limit_bytes, source)
