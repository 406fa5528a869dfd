"""Schedule builders: pure functions from ``(p, m, v, ...)`` to a :class:`Schedule`.

Each builder is registered under a case-insensitive name (and aliases) with
:func:`register`; :func:`build_schedule` looks one up by name and
:func:`schedule_names` lists them.
"""

from __future__ import annotations

import contextlib
import inspect
import numbers
import traceback
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from harness._gcpause import gc_paused
from harness.errors import ConfigError, HarnessError, ResourceError
from harness.schedule.model import KIND_CODE, Job, JobKind, Schedule, _JobArrays, loop_placement, v_placement

__all__ = [
    "BYTES_PER_JOB",
    "MAX_JOBS",
    "BuilderInfo",
    "build_schedule",
    "builder_info",
    "builder_options",
    "check_options",
    "fthenb",
    "one_f_one_b",
    "register",
    "schedule_names",
]

Builder = Callable[..., Schedule]


@dataclass(frozen=True)
class BuilderInfo:
    """A registered builder: its canonical ``name``, ``aliases``, the function,
    a one-line ``summary``, and whether it takes ``v`` chunks per rank."""

    name: str
    aliases: tuple[str, ...]
    build: Builder
    summary: str
    takes_chunks: bool = False
    splits_backward: bool = False
    placed_chunks: int = 1


_REGISTRY: dict[str, BuilderInfo] = {}
_ALIASES: dict[str, str] = {}
#: The modules of the built-in builders split off this one: a bug in one of them raises with its
#: own traceback, where a user's builder's exception is turned into a ConfigError naming it.
_BUILT_IN_MODULES = frozenset({__name__, "harness.schedule.interleaved"})


def register(
    name: str,
    *aliases: str,
    summary: str | None = None,
    takes_chunks: bool = False,
    splits_backward: bool = False,
    placed_chunks: int = 1,
) -> Callable[[Builder], Builder]:
    """Decorator: register a builder under ``name`` and ``aliases`` (case-insensitive;
    ``-``, ``_`` and spaces ignored).

    The builder is called as ``fn(p, m, **options)``, or ``fn(p, m, v, **options)``
    with ``takes_chunks``, and must return a :class:`Schedule` with ``p`` ranks and
    ``m`` micro-batches (:func:`build_schedule` checks). ``summary`` defaults to the
    first line of the builder's docstring; ``splits_backward`` says its backward is
    ``I`` + ``W``; ``placed_chunks`` is the chunks per rank a builder that does not
    take ``v`` places (2 for the V placement), for the :data:`MAX_JOBS` estimate.

    Raises:
        ConfigError: ``name`` or an alias is already taken by another builder
            (registering the same function again, as a re-imported module does,
            is allowed).
    """

    def deco(fn: Builder) -> Builder:
        for key in (name, *aliases):
            if not isinstance(key, str) or not _key(key):
                raise ConfigError(f"a schedule name must be a non-empty string, got {key!r}")
            taken = _REGISTRY.get(_ALIASES.get(_key(key), ""))
            if taken is not None and not _same_function(taken.build, fn):
                raise ConfigError(
                    f"cannot register {_where(fn)} as schedule {name!r}: the name {key!r} is taken by {taken.name!r} "
                    f"({_where(taken.build)}); register it under another name"
                )
        doc = (inspect.getdoc(fn) or "").strip().splitlines()
        info = BuilderInfo(
            name, tuple(aliases), fn, summary if summary is not None else (doc[0] if doc else ""), takes_chunks, splits_backward, placed_chunks
        )
        _REGISTRY[name] = info
        for key in (name, *aliases):
            _ALIASES[_key(key)] = name
        return fn

    return deco


def _same_function(a: Builder, b: Builder) -> bool:
    """The same builder, possibly from a re-import of its module."""
    return a is b or (getattr(a, "__module__", None), getattr(a, "__qualname__", None)) == (
        getattr(b, "__module__", None),
        getattr(b, "__qualname__", None),
    )


def _where(fn: Builder) -> str:
    """``module.function``, or ``file.py:function`` for a module imported from a file (``--import x.py``)."""
    module, name = getattr(fn, "__module__", "?"), getattr(fn, "__qualname__", repr(fn))
    code = getattr(fn, "__code__", None)
    if module.startswith("_harness_import_") and code is not None:
        return f"{code.co_filename}:{name}"
    return f"{module}.{name}"


def _key(name: str) -> str:
    return name.strip().lower().replace("-", "").replace("_", "").replace(" ", "")


def schedule_names() -> list[str]:
    """Canonical names of all registered schedules, sorted."""
    return sorted(_REGISTRY)


def builder_info(name: str) -> BuilderInfo:
    """The registered builder for ``name`` (case-insensitive; ``-``/``_`` ignored).

    Raises:
        ConfigError: unknown name; the message lists the valid ones.
    """
    if not isinstance(name, str):
        raise ConfigError(f"a schedule name must be a string such as '1F1B', got {name!r}")
    canonical = _ALIASES.get(_key(name))
    if canonical is None:
        valid = ", ".join(f"{n} ({', '.join(i.aliases)})" if i.aliases else n for n, i in sorted(_REGISTRY.items()))
        raise ConfigError(f"unknown schedule {name!r}; valid schedules: {valid}")
    return _REGISTRY[canonical]


@gc_paused
def build_schedule(name: str, num_ranks: int, num_microbatches: int, chunks: int = 1, **options: object) -> Schedule:
    """Build the schedule registered as ``name`` for ``p`` ranks and ``m`` micro-batches.

    Args:
        name: schedule name (see :func:`schedule_names`).
        num_ranks: ``p >= 1``.
        num_microbatches: ``m >= 1``.
        chunks: ``v``, chunks per rank, for schedules that take it. Schedules
            whose placement fixes it (ZB-V, DualPipeV: 2) accept 1 or that value.
        options: builder-specific keyword arguments.

    Raises:
        ConfigError: unknown name, non-positive sizes, a ``v`` the schedule
            cannot have, more than :data:`MAX_JOBS` jobs, a builder's own
            constraint (e.g. ``m >= 2p`` for DualPipeV), or a builder that
            returned something else than a schedule of ``p`` ranks and ``m``
            micro-batches (``v`` chunks per rank when it takes them).
    """
    info = builder_info(name)
    num_ranks, num_microbatches, chunks = _check_sizes(num_ranks, num_microbatches, chunks)
    check_options(info, options)
    per_rank = chunks if info.takes_chunks else max(chunks, info.placed_chunks)
    jobs = num_ranks * per_rank * num_microbatches * (3 if info.splits_backward else 2)
    if jobs > MAX_JOBS:
        raise too_many_jobs(jobs, f"schedule {info.name!r} with p={num_ranks}, m={num_microbatches}, v={per_rank}")
    try:
        if info.takes_chunks:
            schedule = info.build(num_ranks, num_microbatches, chunks, **options)
        else:
            schedule = info.build(num_ranks, num_microbatches, **options)
    except HarnessError:
        raise
    except Exception as exc:
        if getattr(info.build, "__module__", None) in _BUILT_IN_MODULES:
            raise  # a built-in builder's bug: its traceback
        frames = traceback.extract_tb(exc.__traceback__)
        at = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
        raise ConfigError(f"the builder of schedule {info.name!r} ({_where(info.build)}) raised {type(exc).__name__}: {exc}{at}") from None
    _check_built(info, schedule, num_ranks, num_microbatches, chunks)
    _remember(schedule, (info.name, num_ranks, num_microbatches, chunks if info.takes_chunks else 1, bool(options)))
    if info.takes_chunks:
        return schedule
    fixed = schedule.chunks_per_rank
    if chunks not in (1, fixed):  # v=1 means "the schedule's own", e.g. 2 for the V placement
        what = "one chunk" if fixed == 1 else f"{fixed} chunks (its placement fixes them)"
        hint = " (use an interleaved schedule for v > 1)" if fixed == 1 else f"; leave v at 1 or give {fixed}"
        raise ConfigError(f"schedule {info.name!r} has {what} per rank; got v={chunks}{hint}")
    return schedule


#: id -> (weak reference, how it was built) of the schedules :func:`build_schedule` returned.
_BUILT: dict[int, tuple[weakref.ref[Schedule], tuple[str, int, int, int, bool]]] = {}


def _remember(schedule: Schedule, how: tuple[str, int, int, int, bool]) -> None:
    key = id(schedule)

    def forget(ref: weakref.ref[Schedule], key: int = key) -> None:
        if _BUILT.get(key, (None,))[0] is ref:
            del _BUILT[key]

    _BUILT[key] = (weakref.ref(schedule, forget), how)


def built_as(schedule: Schedule) -> tuple[str, int, int, int, bool] | None:
    """How :func:`build_schedule` made ``schedule`` (this very object, not an equal one):
    ``(name, p, m, v, with_options)``, ``v`` 1 for a builder that takes no chunks; ``None`` for
    a schedule it did not return (a file's, a pass's output, a user's)."""
    entry = _BUILT.get(id(schedule))
    return entry[1] if entry is not None and entry[0]() is schedule else None


def builder_options(info: BuilderInfo) -> tuple[list[inspect.Parameter], bool]:
    """The keyword options a builder takes: its parameters after the positional sizes
    ``(p, m[, v])``, and whether it also takes any keyword (``**options``)."""
    params = list(inspect.signature(info.build).parameters.values())
    sizes = 3 if info.takes_chunks else 2  # (p, m[, v]) are given positionally
    rest = params[sizes:]
    named = [p for p in rest if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
    return named, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in rest)


def check_options(info: BuilderInfo, options: Mapping[str, object]) -> None:
    """Check builder keyword ``options`` against the builder's signature.

    Raises:
        ConfigError: an option that names one of the sizes ``p``, ``m``, ``v`` (they
            come from the case's fields), an option declared ``bool`` given something
            else (a truthy ``"no"`` must not switch a flag on), or an option the
            builder does not take (the message lists those it does).
    """
    params = list(inspect.signature(info.build).parameters.values())
    sizes = [p.name for p in params[: 3 if info.takes_chunks else 2]]
    clash = sorted(set(options) & set(sizes))
    if clash:
        raise ConfigError(
            f"schedule {info.name!r}: option {', '.join(map(repr, clash))} is one of its sizes ({', '.join(sizes)}), "
            "which come from the case's stages, microbatches and chunks, not from options"
        )
    named, any_keyword = builder_options(info)
    by_name = {p.name: p for p in named}
    for key, value in options.items():
        param = by_name.get(key)
        if param is not None and param.annotation in (bool, "bool") and not isinstance(value, bool):
            raise ConfigError(f"option {key!r} of schedule {info.name!r} must be True or False, got {value!r}")
    if any_keyword:
        return
    unknown = sorted(set(options) - set(by_name))
    if unknown:
        takes = f"its options are {', '.join(by_name)}" if by_name else "it takes no options"
        raise ConfigError(f"schedule {info.name!r} has no option {', '.join(map(repr, unknown))}; {takes}")


MAX_JOBS = 20_000_000
"""The most jobs a schedule may have, counted as they will exist: :func:`build_schedule`
estimates its compute jobs as ``p * v * m`` times 2, or 3 with a split backward (``v`` of
a V placement is 2), and :func:`~harness.schedule.passes.add_communication` counts the
send/receive jobs it would add (about twice the compute jobs again at p=64) before adding
them. At :data:`BYTES_PER_JOB` that is about 7.2 GB; more is refused with a clear error
rather than a ``MemoryError``."""

BYTES_PER_JOB = 360
"""Memory per job on the analytic path (schedule, plan, simulation), in bytes: 343-352
measured (peak RSS) for interleaved 1F1B cases with send/receive jobs, rounded up."""


def memory_needed(jobs: int) -> str:
    """The memory ``jobs`` jobs need at :data:`BYTES_PER_JOB`, in words (``"about 7.0 GB"``)."""
    size = jobs * BYTES_PER_JOB
    unit, scale = next((u, f) for u, f in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3), ("bytes", 1)) if size >= f or f == 1)
    shown = f"{size:,}" if scale == 1 else f"{size / scale:,.1f}"
    return f"about {shown} {unit} ({BYTES_PER_JOB} bytes per job)"


@contextlib.contextmanager
def memory_guard(jobs: int, what: str) -> Iterator[None]:
    """Turn a ``MemoryError`` raised inside into a :class:`~harness.errors.ResourceError`
    that names ``what`` was being done, the ``jobs`` and the memory they need."""
    try:
        yield
    except MemoryError as exc:
        if isinstance(exc, HarnessError):
            raise
        raise ResourceError(
            f"{what}: out of memory with {jobs:,} jobs, which need {memory_needed(jobs)}; "
            "run a smaller case (fewer micro-batches or ranks) or on a machine with more memory"
        ) from None


def too_many_jobs(jobs: int, what: str) -> ConfigError:
    """The error for a schedule of ``jobs`` jobs, over :data:`MAX_JOBS`, described by ``what``."""
    many = f"{jobs:,}" if jobs < 10**12 else f"{jobs:.3g}"
    return ConfigError(
        f"{what} would have about {many} jobs, more than the {MAX_JOBS:,} this harness builds "
        f"(they would need {memory_needed(jobs)}; the limit is {memory_needed(MAX_JOBS)}; "
        "raise harness.schedule.builders.MAX_JOBS if the machine has the memory)"
    )


def _check_sizes(p: int, m: int, v: int = 1) -> tuple[int, int, int]:
    """``(p, m, v)`` as plain ints; any integer type (``numpy.int64`` from a sweep) is accepted, ``bool`` is not."""
    out: list[int] = []
    for label, value in (("number of ranks p", p), ("number of micro-batches m", m), ("chunks per rank v", v)):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"the {label} must be a positive integer, got {value!r}")
        out.append(int(value))
    return out[0], out[1], out[2]


def _check_built(info: BuilderInfo, schedule: object, p: int, m: int, v: int) -> None:
    """A builder returned a schedule of the sizes asked for (a user's builder may not)."""
    got = None
    if not isinstance(schedule, Schedule):
        got = f"{type(schedule).__name__} {schedule!r:.60}"
    elif schedule.num_ranks != p or schedule.num_microbatches != m or (info.takes_chunks and schedule.chunks_per_rank != v):
        got = f"a schedule with p={schedule.num_ranks}, m={schedule.num_microbatches}, v={schedule.chunks_per_rank}"
    if got is not None:
        asked = f"p={p}, m={m}" + (f", v={v}" if info.takes_chunks else "")
        raise ConfigError(
            f"the builder of schedule {info.name!r} ({_where(info.build)}) returned {got} when asked for {asked}; "
            f"a builder must return a Schedule of p ranks and m micro-batches"
        )


def _with_opt(p: int, ranks: list[list[Job | None]], optimizer: bool, stage_to_rank: tuple[int, ...]) -> None:
    if optimizer:
        for stage, rank in enumerate(stage_to_rank):
            ranks[rank].append(Job(stage, JobKind.OPT, None))


@register("FThenB", "GPipe", "fill-drain", summary="all forwards, then all backwards (Huang et al., GPipe, arXiv:1811.06965)")
def fthenb(num_ranks: int, num_microbatches: int, optimizer: bool = False) -> Schedule:
    """FThenB / GPipe: every rank runs all ``m`` forwards, then all ``m`` backwards.

    Backwards run in micro-batch order, as in PyTorch's ``ScheduleGPipe``.
    Peak in-flight micro-batches: ``m`` on every rank.

    Returns:
        A schedule with ``p`` lists of ``2m`` jobs (``+1`` OPT with ``optimizer``).
    """
    _check_sizes(num_ranks, num_microbatches)
    p, m = num_ranks, num_microbatches
    ranks: list[list[Job | None]] = []
    for s in range(p):
        row: list[Job | None] = [Job(s, JobKind.F, i) for i in range(m)]
        ranks.append(row + [Job(s, JobKind.B, i) for i in range(m)])
    return _finish("FThenB", m, loop_placement(p), ranks, optimizer)


@register("1F1B", "PipeDream-Flush", "OneFOneB", summary="warm-up forwards, then one forward / one backward (Narayanan et al., SC'21, §2.2.1)")
def one_f_one_b(num_ranks: int, num_microbatches: int, optimizer: bool = False) -> Schedule:
    """1F1B (PipeDream-Flush): a warm-up of ``min(m, p-s-1)`` forwards on rank ``s``,
    a steady phase alternating one forward and one backward, and a cool-down of
    the remaining backwards.

    This is Megatron-LM's order (``p-s-1`` warm-up forwards, the steady phase
    starting with a forward); PyTorch's ``Schedule1F1B`` produces the same job
    order per rank. Peak in-flight micro-batches on rank ``s``: ``min(m, p-s)``
    (Narayanan et al., SC'21, arXiv:2104.04473, §2.2.1).

    Returns:
        A schedule with ``p`` lists of ``2m`` jobs (``+1`` OPT with ``optimizer``).
    """
    _check_sizes(num_ranks, num_microbatches)
    p, m = num_ranks, num_microbatches
    ranks: list[list[Job | None]] = []
    for s in range(p):
        warmup = min(m, p - s - 1)
        jobs: list[Job | None] = [Job(s, JobKind.F, i) for i in range(warmup)]
        f = warmup
        b = 0
        while f < m:  # steady phase: 1F then 1B
            jobs.append(Job(s, JobKind.F, f))
            f += 1
            jobs.append(Job(s, JobKind.B, b))
            b += 1
        while b < m:  # cool-down
            jobs.append(Job(s, JobKind.B, b))
            b += 1
        ranks.append(jobs)
    return _finish("1F1B", m, loop_placement(p), ranks, optimizer)


# --- helpers shared by the builders below ------------------------------------
def _from_parts(
    name: str, m: int, placement: tuple[int, ...], parts: list[tuple[Any, Any, Any]], optimizer: bool, params: dict[str, object]
) -> Schedule:
    """A schedule from per-rank (stage, kind code, micro-batch) numpy arrays,
    held as arrays (:meth:`Schedule._from_arrays`); with ``optimizer`` each rank
    ends with the ``OPT`` of its stages in stage order, as :func:`_with_opt`."""
    import numpy as np

    if optimizer:
        p = len(parts)
        extra: list[list[int]] = [[] for _ in range(p)]
        for k, rank in enumerate(placement):
            extra[rank].append(k)
        parts = [
            (
                np.concatenate((st, np.array(extra[r], np.int64))),
                np.concatenate((kd, np.full(len(extra[r]), _CODE_OPT, np.int64))),
                np.concatenate((mb, np.full(len(extra[r]), -1, np.int64))),
            )
            for r, (st, kd, mb) in enumerate(parts)
        ]
    stage, kind, mb = (np.concatenate([part[i] for part in parts]) for i in range(3))
    arrays = _JobArrays(stage, kind, mb, [len(part[0]) for part in parts])
    return Schedule._from_arrays(name, m, placement, arrays, params)


def _finish(name: str, m: int, placement: tuple[int, ...], ranks: list[list[Job | None]], optimizer: bool, **params: object) -> Schedule:
    _with_opt(len(ranks), ranks, optimizer, placement)
    # The builders' own jobs (tested, on the ranks that hold their stages): no per-job checks.
    return Schedule._of_checked_jobs(name, m, placement, tuple(tuple(r) for r in ranks), dict(params))


@register(
    "Eager-1F1B",
    "Eager1F1B",
    summary="1F1B with a warm-up of 2(p-s)-1 forwards, backward first in the steady phase (PaddlePaddle pipeline_eager_1f1b.py)",
)
def eager_1f1b(num_ranks: int, num_microbatches: int, optimizer: bool = False) -> Schedule:
    """Eager-1F1B: rank ``s`` runs ``w = min(m, 2(p-s)-1)`` warm-up forwards, then
    ``m - w`` pairs of one backward and one forward, then ``w`` backwards.

    This is PaddlePaddle's ``PipelineEager1F1BPass._create_job_list``
    (``python/paddle/distributed/passes/pipeline_scheduler_pass/pipeline_eager_1f1b.py``),
    which asserts ``2(p-s)-1 <= m``; here the warm-up is capped at ``m`` instead.
    The extra forwards let sends overlap with compute; the cost is memory: peak
    in-flight micro-batches on rank ``s`` is ``min(m, 2(p-s)-1)``.

    Returns:
        A schedule with ``p`` lists of ``2m`` jobs (``+1`` OPT with ``optimizer``).
    """
    _check_sizes(num_ranks, num_microbatches)
    p, m = num_ranks, num_microbatches
    ranks: list[list[Job | None]] = []
    for s in range(p):
        warmup = min(m, 2 * (p - s) - 1)
        jobs: list[Job | None] = [Job(s, JobKind.F, i) for i in range(warmup)]
        for i in range(m - warmup):
            jobs.append(Job(s, JobKind.B, i))
            jobs.append(Job(s, JobKind.F, warmup + i))
        jobs.extend(Job(s, JobKind.B, i) for i in range(m - warmup, m))
        ranks.append(jobs)
    return _finish("Eager-1F1B", m, loop_placement(p), ranks, optimizer)


_CODE_F, _CODE_B, _CODE_I, _CODE_W, _CODE_OPT = (KIND_CODE[k] for k in (JobKind.F, JobKind.B, JobKind.I, JobKind.W, JobKind.OPT))


@register(
    "ZB-H1",
    "ZB1P",
    "ZBH1",
    summary="zero bubble, 1F1B memory: backward split into I and W, W delayed (Qi et al., arXiv:2401.10241, §2.1)",
    splits_backward=True,
)
def zb_h1(num_ranks: int, num_microbatches: int, optimizer: bool = False) -> Schedule:
    """ZB-H1: 1F1B with the backward split into ``I`` (inputs) and ``W`` (weights);
    rank ``s`` defers its first ``s`` ``W`` passes to the tail, where they fill the
    cool-down bubble.

    Port of PyTorch's ``ScheduleInterleavedZeroBubble`` (ZB1P) for one chunk per
    rank: ``min(m, p-1-s)`` warm-up forwards, steady ``F I`` pairs, a ``W`` after
    each pair from the ``s``-th on, remaining ``W`` at the end. Peak in-flight
    micro-batches ``min(m, p)`` on every rank (1F1B's rank-0 peak, the paper's
    ``p M_B``: rank ``s`` holds its activations ``s`` W-passes longer). Uniform stages: bubble
    ``(p-1)(T_F+T_B-T_W)`` per rank (arXiv:2401.10241, Table 2).
    """
    _check_sizes(num_ranks, num_microbatches)
    p, m = num_ranks, num_microbatches
    parts = [_rank_ops_1f1b(s, p, 1, m, m, min(m, p - 1 - s), zero_bubble=True, deferred_w=s) for s in range(p)]
    return _from_parts("ZB-H1", m, loop_placement(p), parts, optimizer, {})


@register(
    "InterleavedZeroBubble",
    "InterleavedZB",
    "ZB1P-interleaved",
    summary="ZB-H1 (ZB1P) over v chunks per rank in loop placement (Qi et al., arXiv:2401.10241; PyTorch ScheduleInterleavedZeroBubble)",
    takes_chunks=True,
    splits_backward=True,
)
def interleaved_zero_bubble(num_ranks: int, num_microbatches: int, chunks: int = 2, optimizer: bool = False) -> Schedule:
    """Interleaved zero bubble (ZB1P) with ``v = chunks`` stages per rank (loop placement).

    Port of PyTorch's ``ScheduleInterleavedZeroBubble._calculate_single_rank_operations``
    (its ``_get_1f1b_rank_ops`` with ``enable_zero_bubble``), without the idle slots its
    ``_add_bubbles_to_actions`` inserts (slots take no time here; the order of the jobs
    on each rank is PyTorch's): rank ``s`` runs ``min(v m, (v-1) R + (p-1-s))`` warm-up
    forwards (``R = m // max(1, m // p)`` micro-batches per round), then ``F I`` pairs
    over the chunks (forwards ascending, backwards descending chunk order), a ``W`` of
    the oldest pending ``I`` after each backward from the ``s``-th on, the remaining
    ``W`` at the end. With ``v = 1`` it is ``ZB-H1``.

    Raises:
        ConfigError: ``m`` is not a multiple of the number of rounds ``max(1, m // p)``
            (PyTorch's constraint).
    """
    _check_sizes(num_ranks, num_microbatches, chunks)
    p, m, v = num_ranks, num_microbatches, chunks
    per_round = _interleaved_rounds("InterleavedZeroBubble", p, m)
    parts = [
        _rank_ops_1f1b(s, p, v, m, per_round, min(v * m, (v - 1) * per_round + (p - 1 - s)), zero_bubble=True, deferred_w=s)
        for s in range(p)
    ]
    return _from_parts("InterleavedZeroBubble", m, loop_placement(p, v), parts, optimizer, {"v": v})


@register(
    "ZB-H2",
    "ZB2P",
    "ZBH2",
    summary="zero bubble with 2p-1 in-flight micro-batches: extra warm-up forwards, F I W steady (Qi et al., arXiv:2401.10241, §2.2)",
    splits_backward=True,
)
def zb_h2(num_ranks: int, num_microbatches: int, optimizer: bool = False) -> Schedule:
    """ZB-H2: rank ``s`` runs ``w = min(m, 2(p-1-s)+1)`` warm-up forwards, then for
    each micro-batch ``i`` an ``I``, a ``W`` (except that the first ``2s`` ``W`` are
    deferred to the tail) and the next forward; the deferred ``W`` close the list.

    This is the handcrafted schedule of Figure 3 (bottom) of arXiv:2401.10241,
    §2.2: extra forwards in the warm-up fill the bubble before the first ``I`` and
    the ``W`` moved to the tail turn the trapezoid into a parallelogram. Peak
    in-flight micro-batches ``min(m, 2p-1)``. Uniform stages: every rank is idle
    ``(p-1)(T_F+T_B-2T_W)`` (when ``>= 0``) inside its own span (first job start to
    last job end); that is the paper's bubble, the iteration period once the
    optimizer synchronization is removed (paper §4). With a barrier per step
    the parallelogram's skew of ``(p-1) T_F`` adds to the step time.
    """
    _check_sizes(num_ranks, num_microbatches)
    p, m = num_ranks, num_microbatches
    F, I, W = JobKind.F, JobKind.I, JobKind.W  # noqa: N806
    ranks: list[list[Job | None]] = []
    for s in range(p):
        warmup = min(m, 2 * (p - 1 - s) + 1)
        jobs: list[Job | None] = [Job(s, F, i) for i in range(warmup)]
        deferred = 2 * s
        w_next = 0
        for i in range(m):
            jobs.append(Job(s, I, i))
            if i >= deferred:
                jobs.append(Job(s, W, w_next))
                w_next += 1
            if warmup + i < m:
                jobs.append(Job(s, F, warmup + i))
        jobs.extend(Job(s, W, i) for i in range(w_next, m))
        ranks.append(jobs)
    return _finish("ZB-H2", m, loop_placement(p), ranks, optimizer)


@register(
    "ZB-V",
    "ZBV",
    "ZBVZeroBubble",
    summary="zero bubble in a V placement, two chunks per rank, 1F1B memory (Qi et al., arXiv:2401.10241, §6; PyTorch ScheduleZBVZeroBubble)",
    splits_backward=True,
    placed_chunks=2,
)
def zb_v(num_ranks: int, num_microbatches: int, optimizer: bool = False) -> Schedule:
    """ZB-V: rank ``r`` holds stages ``r`` and ``2p-1-r`` (V placement) and runs the
    handcrafted order of PyTorch's ``ScheduleZBVZeroBubble._calculate_single_rank_operations``:
    ``2(p-r)-1`` forwards of chunk 0; ``r`` pairs (F chunk 1, F chunk 0); ``p-r``
    triples (F, I, W of chunk 1); a steady phase of (F0 I0 W0 F1 I1 W1); a
    cool-down of ``I`` passes with delayed ``W``.

    The order is built for ``max(m, 2p-1)`` micro-batches and jobs of micro-batches
    ``>= m`` are dropped, as PyTorch does. Zero bubble for ``T_F = T_B = T_W``
    given enough micro-batches (paper §6, README of sail-sg/zero-bubble-pipeline-parallelism).
    """
    _check_sizes(num_ranks, num_microbatches)
    p, m = num_ranks, num_microbatches
    n = max(2 * p - 1, m)
    F, I, W = JobKind.F, JobKind.I, JobKind.W  # noqa: N806
    ranks: list[list[Job | None]] = []
    for r in range(p):
        c0, c1 = r, 2 * p - 1 - r
        jobs: list[Job] = []
        f0 = f1 = b0 = b1 = 0
        for _ in range(2 * (p - r) - 1):
            jobs.append(Job(c0, F, f0))
            f0 += 1
        for _ in range(r):
            jobs += [Job(c1, F, f1), Job(c0, F, f0)]
            f1 += 1
            f0 += 1
        for _ in range(p - r):
            jobs += [Job(c1, F, f1), Job(c1, I, b1), Job(c1, W, b1)]
            f1 += 1
            b1 += 1
        while f1 < f0 or f0 < n:
            if f0 < n:
                jobs.append(Job(c0, F, f0))
                f0 += 1
            jobs += [Job(c0, I, b0), Job(c0, W, b0), Job(c1, F, f1), Job(c1, I, b1), Job(c1, W, b1)]
            b0 += 1
            f1 += 1
            b1 += 1
        w0, w1 = b0, b1
        for _ in range(r):
            jobs += [Job(c0, I, b0), Job(c1, I, b1)]
            b0 += 1
            b1 += 1
        for _ in range(p - r):
            jobs += [Job(c0, I, b0), Job(c0, W, w0)]
            b0 += 1
            w0 += 1
        jobs += [Job(c1, W, i) for i in range(w1, b1)]
        jobs += [Job(c0, W, i) for i in range(w0, b0)]
        ranks.append([j for j in jobs if j.microbatch is not None and j.microbatch < m])
    return _finish("ZB-V", m, v_placement(p), ranks, optimizer)


@register(
    "DualPipeV",
    "DualPipe-V",
    summary="DeepSeek's DualPipe folded into a V placement; F/B pairs of different micro-batches overlapped (PyTorch ScheduleDualPipeV)",
    placed_chunks=2,
)
def dualpipe_v(num_ranks: int, num_microbatches: int, optimizer: bool = False, overlap: bool = True) -> Schedule:
    """DualPipeV: V placement (rank ``r`` holds stages ``r`` and ``2p-1-r``), eight
    phases per rank as in PyTorch's ``ScheduleDualPipeV._calculate_single_rank_operations``
    (itself from deepseek-ai/DualPipe ``dualpipev.py``).

    Each overlapped ``F``+``B`` pair of the original (``OVERLAP_F_B``: in step 4 both
    pairs, except the first ``F0 B1`` of the last rank, and in step 5 ``F1 B0``) is
    listed as the forward then the full backward and kept as an overlapped job
    group (:mod:`harness.overlap`): the two run at the same time, so the pair
    lasts ``max(F, B)``. ``overlap=False`` runs them back to back. The second half
    of the cool-down splits backwards into ``I`` and ``W``.

    Raises:
        ConfigError: ``m < 2p`` (DualPipeV needs at least as many micro-batches as stages).
    """
    _check_sizes(num_ranks, num_microbatches)
    p, m = num_ranks, num_microbatches
    if m < 2 * p:
        raise ConfigError(f"DualPipeV needs m >= 2p micro-batches (one per stage); got p={p}, m={m}")
    F, I, W, B = JobKind.F, JobKind.I, JobKind.W, JobKind.B  # noqa: N806
    ranks: list[list[Job | None]] = []
    groups: list[tuple[Job, Job]] = []
    for r in range(p):
        s0, s1 = r, 2 * p - 1 - r
        jobs: list[Job | None] = []
        fwd = {s0: 0, s1: 0}
        bwd = {s0: 0, s1: 0}
        weights: list[Job] = []

        def add(
            stage: int,
            kind: JobKind,
            jobs: list[Job | None] = jobs,
            fwd: dict[int, int] = fwd,
            bwd: dict[int, int] = bwd,
            weights: list[Job] = weights,
        ) -> None:
            if kind is F:
                jobs.append(Job(stage, F, fwd[stage]))
                fwd[stage] += 1
                return
            jobs.append(Job(stage, kind, bwd[stage]))
            if kind is I:
                weights.append(Job(stage, W, bwd[stage]))
            bwd[stage] += 1

        def add_w(jobs: list[Job | None] = jobs, weights: list[Job] = weights) -> None:
            if weights:
                jobs.append(weights.pop(0))

        def pair(f_stage: int, b_stage: int, jobs: list[Job | None] = jobs) -> None:
            add(f_stage, F)
            add(b_stage, B)
            groups.append((jobs[-2], jobs[-1]))  # type: ignore[arg-type]

        for _ in range((p - r - 1) * 2):  # step 1: F0
            add(s0, F)
        for _ in range(r + 1):  # step 2: F0 F1
            add(s0, F)
            add(s1, F)
        for _ in range(p - r - 1):  # step 3: I1 W F1
            add(s1, I)
            add_w()
            add(s1, F)
        for index in range(m - 2 * p + r + 1):  # step 4: (F0 B1) (F1 B0)
            if index == 0 and r == p - 1:  # not overlapped, as in DualPipe and PyTorch (a shorter bubble)
                add(s0, F)
                add(s1, B)
            else:
                pair(s0, s1)
            pair(s1, s0)
        for _ in range(p - r - 1):  # step 5: B1, (F1 B0)
            add(s1, B)
            pair(s1, s0)
        zb = False
        half = r + 1
        for i in range(half):  # step 6: B1 B0, second half split
            if i == half // 2 and r % 2 == 1:
                zb = True
            add(s1, I if zb else B)
            if i == half // 2 and r % 2 == 0:
                zb = True
            add(s0, I if zb else B)
        for _ in range(p - r - 1):  # step 7: W, B0
            add_w()
            add(s0, I if zb else B)
        for _ in range(r + 1):  # step 8: W
            add_w()
        ranks.append(jobs)
    if overlap:
        return _finish("DualPipeV", m, v_placement(p), ranks, optimizer, overlap=tuple(groups))
    return _finish("DualPipeV", m, v_placement(p), ranks, optimizer)


# Builders of their own modules register on import (after the helpers above exist).
from harness.schedule import controllable_memory as _controllable_memory  # noqa: E402, F401
from harness.schedule.interleaved import _interleaved_rounds, _rank_ops_1f1b, interleaved_1f1b, looped_bfs  # noqa: E402, F401 - importable from here as before
