"""Cost models: how long each job takes (ns), how much it computes (FLOPs) and
how many bytes a send/receive moves.

Two models ship:

* :class:`FixedCost` - fixed durations per job kind (``F=1 ms, B=2 ms``), the
  setting of the published bubble formulas, per stage where lists are given,
  with optional memory bytes per job;
* :class:`TransformerCost` (:mod:`harness.model.transformer`) - durations, memory and
  parameters derived from a GPT-style transformer description, a stage layout
  and a device's sustained FLOP/s.

A cost model answers per job and knows the stage count, so stages may differ
(e.g. layers that do not divide evenly).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

from harness.errors import ConfigError

# Optional cost-model methods and the fields that answer them, each in its concept's module.
from harness.model.assumptions import chained_durations
from harness.model.data_parallel import _data_parallel_fields, _dp_duration, _drop_zero_dp_fields
from harness.model.overlap import _overlap_fields, _overlap_group_ns
from harness.model.values import (
    _MAX_DURATION_TEXT,
    _NS_PER_MS,
    MAX_DURATION_NS,
    PerStage,
    _bandwidth,
    _check_transfer,
    _per_stage_values,
    _pick,
    _positive,
    _set_whole_ns,
    _shown,
    _transfer_ns,
)
from harness.schedule.model import Job, JobKind, Schedule

__all__ = ["CostModel", "FixedCost"]


@runtime_checkable
class CostModel(Protocol):
    """What the executor and simulator need to know about a job's cost.

    Durations, FLOPs and bytes may differ by stage and job kind but not by
    micro-batch: the analytic timeline (:mod:`harness.analysis.analytic`) and
    the executor ask once per ``(stage, kind)``.
    """

    def duration_ns(self, job: Job, num_stages: int) -> int:
        """Duration of ``job`` in ns on a pipeline of ``num_stages`` stages."""

    def flops(self, job: Job, num_stages: int) -> float:
        """Floating-point operations of ``job`` (0 for communication)."""

    def nbytes(self, job: Job, num_stages: int) -> int:
        """Bytes a send/receive job moves (0 for compute)."""

    def is_uniform(self, num_stages: int) -> bool:
        """Whether every stage has the same F/B/I/W durations and transfers are free,
        the setting in which the published closed forms hold."""

    def describe(self) -> dict[str, Any]:
        """Parameters for results and reports."""

#: :meth:`FixedCost.ms`'s default for F and B: not given (``None`` given is a bad value, said as such).
_OMITTED: Any = object()

#: FixedCost fields that :meth:`FixedCost.ms` takes in milliseconds under another name.
_MS_NAMES = {"forward_ns": "F", "backward_ns": "B", "backward_input_ns": "I", "backward_weight_ns": "W", "recompute_ns": "R"}

#: The fields :meth:`FixedCost.ms` passes through as they are.
_MS_PASSED = ("optimizer_ns", "p2p_latency_ns", "p2p_gbytes_per_s", "activation_bytes", "mem_F", "mem_I", "mem_W", "mem_static",
              "unshard_ns", "reshard_ns", "reduce_grad_ns", "overlap_ns", "overlap_ratio")

def _check_ms_keywords(kw: dict[str, Any]) -> None:
    """Refuse keywords :meth:`FixedCost.ms` does not take, in its own name (the constructor would name ``__init__``)."""
    for key in kw:
        if key in _MS_PASSED:
            continue
        if key in _MS_NAMES:
            raise ConfigError(f"cost model: FixedCost.ms() takes {key} as {_MS_NAMES[key]}, in milliseconds")
        names = {name.lower(): name for name in ("F", "B", "I", "W", "R", *_MS_PASSED)}  # f -> F
        close = difflib.get_close_matches(str(key).lower(), names, n=1)
        hint = f" (did you mean {names[close[0]]!r}?)" if close else ""
        raise ConfigError(
            f"cost model: FixedCost.ms() got an unexpected keyword argument {key!r}{hint}; "
            f"it takes F, B, I, W, R (ms) and {', '.join(_MS_PASSED)}"
        )

"""A value for every stage (an ``int``) or one per stage (a tuple, stage 0 first)."""

def _ms_to_ns(name: str, value: Any, allow_zero: bool = False) -> PerStage:
    """``FixedCost.ms``'s milliseconds (a number or a per-stage list) in whole ns, checked in those words
    (``allow_zero``: 0 is a value, as a stage without recomputation)."""
    if isinstance(value, (list, tuple)):
        if not value:
            raise ConfigError(f"cost model: {name} is an empty list; give one value per stage (ms), or one number for all")
        nested = next((k for k, v in enumerate(value) if isinstance(v, (list, tuple))), None)
        if nested is not None:
            raise ConfigError(f"cost model: {name}[{nested}] is a list; give one number per stage (p x v stages, chunks included), "
                              "not lists of lists")
        return tuple(_pick(_ms_to_ns(f"{name}[{k}] (stage {k})", v, allow_zero), 0) for k, v in enumerate(value))
    if (not isinstance(value, (int, float)) or isinstance(value, bool)
            or (isinstance(value, float) and not math.isfinite(value))):  # an int is finite: isfinite(10**400) overflows
        raise ConfigError(f"cost model: {name} must be a finite number of milliseconds, got {_shown(value)}")
    if allow_zero and value == 0:
        return 0
    if value <= 0:
        raise ConfigError(f"cost model: {name} must be {'0 or more' if allow_zero else 'positive'}, got {value!r} ms")
    if value * _NS_PER_MS >= MAX_DURATION_NS:
        raise ConfigError(
            f"cost model: {name} must be below {MAX_DURATION_NS / _NS_PER_MS:.6f} ms ({_MAX_DURATION_TEXT}), got {_shown(value)} ms"
        )
    if round(value * _NS_PER_MS) == 0:
        raise ConfigError(f"cost model: {name} must be at least 1 ns (0.000001 ms), got {value!r} ms")
    return round(value * _NS_PER_MS)

def _lengths(**values: Any) -> int:
    """The per-stage length shared by the list-valued fields (1 when all are numbers).

    Raises:
        ConfigError: two list-valued fields of different lengths.
    """
    sized = {k: len(v) for k, v in values.items() if isinstance(v, tuple)}
    if len(set(sized.values())) > 1:
        raise ConfigError("cost model: per-stage lists of different lengths: "
                          + ", ".join(f"{k} has {n}" for k, n in sized.items()) + "; give one value per stage in each")
    return next(iter(sized.values()), 1)

@dataclass(frozen=True)
class FixedCost:
    """Fixed durations per job kind, in ns (a non-whole number is rounded to the nearest ns); per
    stage where a list is given.

    Every duration and memory field takes one number for all stages or a list
    (tuple) of one value per stage, stage 0 first (uneven stages, e.g.
    ``FixedCost.ms(F=[8, 8, 8, 8.8], B=[16, 16, 16, 17.6])`` for a last stage
    10 % heavier); a list must then have as many entries as the pipeline has
    stages (``p x v``), checked when the case runs.

    Args:
        forward_ns: ``T_F``, duration of a forward.
        backward_ns: duration of a full backward ``B``.
        backward_input_ns: ``T_B`` of the ZB paper (an ``I`` job); default half of ``B``.
        backward_weight_ns: ``T_W`` (a ``W`` job); default ``B - I``.
        optimizer_ns: duration of an ``OPT`` job.
        unshard_ns, reshard_ns, reduce_grad_ns: durations of PyTorch's ``UNSHARD``,
            ``RESHARD`` and ``REDUCE_GRAD`` jobs (FSDP parameter all-gather and free,
            data-parallel gradient reduction), one per stage; default 0 (they cost nothing).
        overlap_ns, overlap_ratio: how long an overlapped F&B group (``OVERLAP_F_B``,
            DualPipe, DualPipeV) lasts: ``overlap_ns`` ns, or ``max(d) + overlap_ratio (sum(d) - max(d))``
            for jobs of durations ``d`` (0: ``max(F, B)``, perfect overlap; 1: ``F + B``); at most one;
            default ``F + B``, no overlap, as PyTorch's runtime runs ``OVERLAP_F_B``
            (:mod:`harness.model.overlap`, :mod:`harness.plan.groups`).
        p2p_latency_ns, p2p_gbytes_per_s, activation_bytes: a send/receive
            takes ``latency + bytes / bandwidth``; bandwidth in gigabytes (not
            gigabits) per second, i.e. bytes/ns; ``None`` means transfers cost
            only the latency.
        mem_F, mem_I, mem_W: activation bytes a forward allocates (``mem_F >= 0``)
            and a backward-for-inputs / backward-for-weights frees (``mem_I``,
            ``mem_W <= 0``), signed as the zero-bubble simulators' ``mem_f``,
            ``mem_b``, ``mem_w`` (:mod:`harness.analysis.memory`); a full ``B`` frees
            ``mem_I + mem_W``. Default ``mem_W = 0`` and ``mem_I = -mem_F - mem_W``:
            what a forward allocates, its backward frees.
        mem_static: bytes a stage holds all the time (parameters, gradients,
            optimizer state).
        recompute_ns: the forward work a stage re-runs inside each backward (activation
            recomputation), kept apart from ``backward_ns``: a ``B`` lasts ``backward_ns +
            recompute_ns``, a split backward's ``I`` ``backward_input_ns + recompute_ns``
            (``W`` unchanged), as mindformers' pipeline_balance simulator charges it
            (``backward_time = block_time * backward_ratio + layer_recompute``,
            ``toolkit/pipeline_balance/simulator/pp_simulator.py``, mindspore-ai/mindformers at
            6be67890) and as :class:`~harness.model.transformer.TransformerCost` does.
            :meth:`recompute_time_ns` says how much of a job it is, for the bubble
            decomposition, the traces' ``recompute`` slices and the ``mindformers`` bubble
            (:mod:`harness.analysis.bubble`). ``FixedCost.ms(R=...)`` in ms. Default 0.

    Raises:
        ConfigError: negative or non-numeric values; a duration (or a
            transfer's) of :data:`MAX_DURATION_NS` (2**53 ns, about 104 days)
            or more; a non-positive bandwidth, or one without ``activation_bytes``
            (transfers would cost only the latency); ``activation_bytes`` not a whole number;
            ``backward_input_ns + backward_weight_ns != backward_ns`` when all
            three are given (a split backward is the same work as a full one);
            per-stage lists of different lengths; memory bytes that do not
            balance (``mem_F + mem_I + mem_W != 0``: activations would leak or
            be freed twice).
    """

    forward_ns: PerStage
    backward_ns: PerStage
    backward_input_ns: PerStage | None = None
    backward_weight_ns: PerStage | None = None
    optimizer_ns: int = 0
    p2p_latency_ns: int = 0
    p2p_gbytes_per_s: float | None = None
    activation_bytes: int = 0
    mem_F: PerStage = 0  # noqa: N815 - the zero-bubble simulators' names
    mem_I: PerStage | None = None  # noqa: N815
    mem_W: PerStage = 0  # noqa: N815
    mem_static: PerStage = 0
    unshard_ns: int = 0
    reshard_ns: int = 0
    reduce_grad_ns: int = 0
    overlap_ns: int | None = None
    overlap_ratio: float | None = None
    recompute_ns: PerStage = 0

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        _data_parallel_fields(self)
        _overlap_fields(self)
        set_(self, "forward_ns", _per_stage_values("forward_ns", self.forward_ns, duration=True))
        set_(self, "backward_ns", _per_stage_values("backward_ns", self.backward_ns, duration=True))
        for name in ("backward_input_ns", "backward_weight_ns"):
            v = getattr(self, name)
            if v is not None:
                set_(self, name, _per_stage_values(name, v, duration=True))
        for name in ("optimizer_ns", "p2p_latency_ns"):
            _set_whole_ns(self, name)
        _positive("activation_bytes", self.activation_bytes, allow_zero=True, whole=True)
        set_(self, "activation_bytes", int(self.activation_bytes))
        _bandwidth(self.p2p_gbytes_per_s)
        if self.p2p_gbytes_per_s is not None and self.activation_bytes == 0:
            raise ConfigError(
                f"cost model: p2p_gbytes_per_s={self.p2p_gbytes_per_s!r} is given but activation_bytes is 0, so every "
                "transfer would cost only the latency; give activation_bytes (bytes per send), or leave out the bandwidth"
            )
        _check_transfer(self.activation_bytes, self.p2p_latency_ns, self.p2p_gbytes_per_s)
        set_(self, "recompute_ns", _per_stage_values("recompute_ns", self.recompute_ns, duration=True, allow_zero=True))
        for name in ("mem_F", "mem_W", "mem_static"):
            set_(self, name, _per_stage_values(name, getattr(self, name), duration=False, allow_zero=True, signed=name == "mem_W"))
        if self.mem_I is not None:
            set_(self, "mem_I", _per_stage_values("mem_I", self.mem_I, duration=False, signed=True))
        n = _lengths(F=self.forward_ns, B=self.backward_ns, I=self.backward_input_ns, W=self.backward_weight_ns,
                     mem_F=self.mem_F, mem_I=self.mem_I, mem_W=self.mem_W, mem_static=self.mem_static,
                     recompute_ns=self.recompute_ns)
        splits, mem = [], []
        for k in range(n):
            splits.append(self._split_of(k, n))
            mem.append(self._memory_of(k, n))
        set_(self, "_splits", tuple(splits))
        set_(self, "_mem", tuple(mem))
        set_(self, "_n", n)

    def _split_of(self, k: int, n: int) -> tuple[int, int]:
        where = f" of stage {k}" if n > 1 else ""
        b = _pick(self.backward_ns, k)
        i = None if self.backward_input_ns is None else _pick(self.backward_input_ns, k)
        w = None if self.backward_weight_ns is None else _pick(self.backward_weight_ns, k)
        if i is not None and w is not None and i + w != b:
            raise ConfigError(
                f"cost model: backward_input_ns + backward_weight_ns = {i} + {w} ns must equal backward_ns = {b} ns{where} "
                "(a split backward does the same work as the full one); with FixedCost.ms give B=I+W"
            )
        if i is None and w is None:
            i = b // 2
        if i is None:
            i = b - (w or 0)
        if w is None:
            w = b - i
        if i <= 0 or w <= 0:
            raise ConfigError(
                f"cost model: the backward{where} of {b} ns cannot split into I = {i} ns and W = {w} ns; "
                "give I or W below B (both must be positive)"
            )
        return int(i), int(w)

    def _memory_of(self, k: int, n: int) -> tuple[int, int, int, int]:
        """``(F, B, I, W)`` signed activation bytes of stage ``k``."""
        where = f" (stage {k})" if n > 1 else ""
        f, w = _pick(self.mem_F, k), _pick(self.mem_W, k)
        i = -f - w if self.mem_I is None else _pick(self.mem_I, k)
        if i > 0 or w > 0:
            raise ConfigError(f"cost model: mem_I = {i} and mem_W = {w} bytes{where}: a backward frees activations, so "
                              "both are <= 0 (signed as the zero-bubble simulators' mem_b, mem_w)")
        if f + i + w != 0:
            raise ConfigError(f"cost model: mem_F + mem_I + mem_W = {f} + ({i}) + ({w}) = {f + i + w} bytes{where}; the backward "
                              "must free what the forward allocated (give mem_I = -mem_F - mem_W, or leave mem_I out)")
        return f, i + w, i, w

    @classmethod
    def ms(cls, F: Any = _OMITTED, B: Any = _OMITTED,  # noqa: N803 - F, B: a number or one per stage
           W: float | Sequence[float] | None = None, I: float | Sequence[float] | None = None,  # noqa: N803
           R: float | Sequence[float] = 0, **kw: Any) -> FixedCost:  # noqa: N803
        """Durations in milliseconds: ``FixedCost.ms(F=1, B=2)``; ``W``/``I`` split ``B``;
        ``R`` is the recomputation inside each backward (``recompute_ns``, 0 or more, apart from ``B``);
        each a number or one value per stage (``F=[8, 8, 8, 8.8]``).

        With ``I`` and ``W`` given and no ``B``, pass ``B=I+W``.

        Raises:
            ConfigError: F or B missing, a value that is not a finite number, a keyword it
                does not take (named as this method's, with the closest it takes), or see the class.
        """
        # Checked here, in the caller's names and unit: the constructor's checks would speak of forward_ns.
        _check_ms_keywords(kw)  # first: a misspelt B (BB=2) is named as such, not as a missing B
        missing = [name for name, value in (("F", F), ("B", B)) if value is _OMITTED]
        if missing:
            raise ConfigError(f"cost model: FixedCost.ms() needs {' and '.join(missing)} (ms), e.g. FixedCost.ms(F=1, B=2)")
        f, b = _ms_to_ns("F", F), _ms_to_ns("B", B)
        w = None if W is None else _ms_to_ns("W", W)
        i = None if I is None else _ms_to_ns("I", I)
        r = _ms_to_ns("R", R, allow_zero=True)
        n = _lengths(F=f, B=b, I=i, W=w, R=r)
        for k in range(n):
            bk = _pick(b, k)
            ik = None if i is None else _pick(i, k)
            wk = None if w is None else _pick(w, k)
            where = f" (stage {k})" if n > 1 else ""
            if ik is not None and wk is not None and ik + wk != bk:
                shown = (I, W, B) if n == 1 else (ik / _NS_PER_MS, wk / _NS_PER_MS, bk / _NS_PER_MS)
                raise ConfigError(
                    f"cost model: I + W = {shown[0]!r} + {shown[1]!r} ms must equal B = {shown[2]!r} ms{where} "
                    "(a split backward does the same work as the full one)"
                )
            if (ik is None) != (wk is None):
                si, sw = (ik, bk - ik) if ik is not None else (bk - (wk or 0), wk or 0)
                if si <= 0 or sw <= 0:
                    raise ConfigError(
                        f"cost model: the backward of B = {bk / _NS_PER_MS:g} ms cannot split into I = {si / _NS_PER_MS:g} ms and "
                        f"W = {sw / _NS_PER_MS:g} ms{where}; give I or W below B (both must be positive)"
                    )
        return cls(forward_ns=f, backward_ns=b, backward_input_ns=i, backward_weight_ns=w, recompute_ns=r, **kw)

    def _stage_index(self, stage: int, num_stages: int) -> int:
        if self._n == 1:  # type: ignore[attr-defined]
            return 0
        if self._n != num_stages:  # type: ignore[attr-defined]
            fields = [name for name in ("forward_ns", "backward_ns", "backward_input_ns", "backward_weight_ns",
                                        "mem_F", "mem_I", "mem_W", "mem_static", "recompute_ns")
                      if isinstance(getattr(self, name), tuple)]
            raise ConfigError(f"cost model: {', '.join(fields)} give{'s' if len(fields) == 1 else ''} {self._n} per-stage value(s), "  # type: ignore[attr-defined]
                              f"but the pipeline has {num_stages} stage(s) (p x v); give one per stage, or one number for all")
        return stage

    def duration_ns(self, job: Job, num_stages: int) -> int:
        kind = job.kind
        if kind is JobKind.OPT:
            return self.optimizer_ns
        if kind.is_comm:
            return _transfer_ns(self.activation_bytes, self.p2p_latency_ns, self.p2p_gbytes_per_s)
        if kind.is_data_parallel:
            return _dp_duration(self, job)
        k = self._stage_index(job.stage, num_stages)
        if kind is JobKind.F:
            return _pick(self.forward_ns, k)
        if kind is JobKind.B:
            return _pick(self.backward_ns, k) + _pick(self.recompute_ns, k)
        i, w = self._splits[k]  # type: ignore[attr-defined]
        return i + _pick(self.recompute_ns, k) if kind is JobKind.I else w  # type: ignore[no-any-return]

    def recompute_time_ns(self, job: Job, num_stages: int) -> int:
        """The part of ``job``'s duration (ns) that re-runs its forward: ``recompute_ns`` of its
        stage for a ``B`` or an ``I``; 0 for every other job."""
        if job.kind not in (JobKind.B, JobKind.I):
            return 0
        return _pick(self.recompute_ns, self._stage_index(job.stage, num_stages))

    def flops(self, job: Job, num_stages: int) -> float:
        return 0.0

    def nbytes(self, job: Job, num_stages: int) -> int:
        return self.activation_bytes if job.kind.is_comm else 0

    def data_parallel_ns(self, job: Job, num_stages: int) -> int:
        """Duration (ns) of an ``UNSHARD``/``RESHARD``/``REDUCE_GRAD`` job: ``unshard_ns``, ``reshard_ns``
        or ``reduce_grad_ns`` (:data:`DATA_PARALLEL_METHOD`).

        Raises:
            ConfigError: ``job`` is of another kind.
        """
        return _dp_duration(self, job)

    def overlapped_group_ns(self, jobs: tuple[Job, ...], durations_ns: tuple[int, ...], num_stages: int) -> int:
        """Wall time (ns) of an overlapped group whose jobs last ``durations_ns`` alone: ``overlap_ns``,
        or ``max + overlap_ratio * (sum - max)``, or, with neither set, ``sum`` (no overlap, as PyTorch's
        runtime runs ``OVERLAP_F_B``; :data:`harness.model.overlap.GROUP_METHOD`)."""
        return _overlap_group_ns(self, durations_ns)

    def models_memory(self) -> bool:
        """Whether any memory field is set (else the case has no memory model)."""
        return any(v != 0 for v in (self.mem_F, self.mem_W, self.mem_static)) or self.mem_I not in (None, 0)

    def memory_bytes(self, job: Job, num_stages: int) -> int:
        """Signed activation bytes ``job`` allocates (F) or frees (B, I, W); 0 for others (see :mod:`harness.analysis.memory`)."""
        order = {JobKind.F: 0, JobKind.B: 1, JobKind.I: 2, JobKind.W: 3}
        if job.kind not in order:
            return 0
        return int(self._mem[self._stage_index(job.stage, num_stages)][order[job.kind]])  # type: ignore[attr-defined]

    def static_bytes(self, stage: int, num_stages: int) -> int:
        """Bytes ``stage`` holds all the time (``mem_static``)."""
        return _pick(self.mem_static, self._stage_index(stage, num_stages))

    def is_uniform(self, num_stages: int) -> bool:
        free = self.p2p_latency_ns == 0 and (self.activation_bytes == 0 or not self.p2p_gbytes_per_s)
        even = len(set(self._splits)) == 1 and all(  # type: ignore[attr-defined]
            not isinstance(v, tuple) or len(set(v)) == 1 for v in (self.forward_ns, self.backward_ns, self.recompute_ns))
        return free and even

    def assumptions(self, schedule: Schedule) -> list[str]:
        """Sentences naming what moves ``schedule``'s figures under this model
        (:data:`harness.model.assumptions.ASSUMPTIONS_METHOD`): a split backward's halves when I and
        W were not given, the recomputation inside each backward where ``recompute_ns`` is set, and
        per-chunk durations where a rank holds several chunks."""
        out = []
        if self.backward_input_ns is None and self.backward_weight_ns is None and any(
                job.kind in (JobKind.I, JobKind.W) for _, _, job in schedule.jobs()):
            out.append("a split backward's I and W each take half of B (FixedCost given no I or W)")
        r = self.recompute_ns
        if any(r) if isinstance(r, tuple) else r:
            shown = f"{r / 1e6:g} ms" if isinstance(r, int) else "per stage " + ", ".join(f"{x / 1e6:g}" for x in r) + " ms"
            out.append(f"recomputation: each B (or I when split) also re-runs {shown} of forward work (FixedCost recompute_ns), "
                       "busy time in the bubble figures (mindformers' normalization counts it as bubble)")
        v = schedule.chunks_per_rank
        if v > 1:
            f, b = (self.duration_ns(Job(0, kind, 0), schedule.num_stages) for kind in (JobKind.F, JobKind.B))
            # DualPipe: two stages per rank, each running its direction's half of the micro-batches
            chained = chained_durations(schedule, f"F and B (stage 0: {f / 1e6:g} and {b / 1e6:g} ms) are")
            out.append(chained or f"per-chunk durations: F and B (stage 0: {f / 1e6:g} and {b / 1e6:g} ms) are one stage's, one chunk's, "
                       f"and a rank runs v={v} chunks, so v x m x (F + B) of work per step; for the same model as at v=1, divide F and B by {v}")
        return out

    def describe(self) -> dict[str, Any]:
        d = {"model": "fixed", **asdict(self)}
        splits = self._splits  # type: ignore[attr-defined]
        if len(splits) == 1:
            d["backward_input_ns"], d["backward_weight_ns"] = splits[0]
        else:
            d["backward_input_ns"], d["backward_weight_ns"] = [s[0] for s in splits], [s[1] for s in splits]
        for key, value in list(d.items()):
            if isinstance(value, tuple):
                d[key] = list(value)
        if not self.models_memory():
            for key in ("mem_F", "mem_I", "mem_W", "mem_static"):
                d.pop(key, None)
        r = self.recompute_ns
        if not (any(r) if isinstance(r, tuple) else r):
            d.pop("recompute_ns", None)  # no recomputation: described as before the field existed
        return _drop_zero_dp_fields(d)
