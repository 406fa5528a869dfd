"""The schedule builder registry: builders register under a name and aliases (:func:`register`),
:func:`build_schedule` looks one up and builds it, :func:`schedule_names` lists them.

Builders are pure functions from ``(p, m[, v], **options)`` to a
:class:`~harness.schedule.model.Schedule`; the built-in ones live in their families' modules
(:mod:`~harness.schedule.builders`, :mod:`~harness.schedule.interleaved`,
:mod:`~harness.schedule.zero_bubble`, :mod:`~harness.schedule.dualpipe`,
:mod:`~harness.schedule.controllable_memory`, :mod:`~harness.schedule.zb_auto`), which import this one
and register on import (:mod:`harness.schedule` imports them all). A *cost-aware* builder
(``takes_costs=True``, e.g. ZB-auto) also gets ``costs=``, the case's per-stage costs as plain numbers
(:class:`~harness.schedule.costs.StageCosts`); a builder never sees a cost model. A builder may leave
notes for the case's warnings in ``params["notes"]`` (:data:`NOTES_PARAM`, :func:`schedule_notes`).
Also here: the job-count limit (:data:`MAX_JOBS`) and the
checks of a builder's sizes, options and result.
"""

from __future__ import annotations

import contextlib
import inspect
import numbers
import re
import traceback
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from harness._gcpause import gc_paused
from harness.errors import ConfigError, HarnessError, ResourceError
from harness.schedule.costs import StageCosts
from harness.schedule.model import KIND_CODE, Job, JobKind, Schedule, _JobArrays, loop_placement, v_placement  # noqa: F401 - v_placement: importable from here as before

__all__ = [
    "BYTES_PER_JOB",
    "MAX_JOBS",
    "NOTES_PARAM",
    "BuilderInfo",
    "build_schedule",
    "builder_info",
    "builder_options",
    "check_options",
    "register",
    "schedule_names",
    "schedule_notes",
]


Builder = Callable[..., Schedule]

@dataclass(frozen=True)
class BuilderInfo:
    """A registered builder: its canonical ``name``, ``aliases``, the function,
    a one-line ``summary``, whether it takes ``v`` chunks per rank, splits the backward,
    how many chunks per rank it places, and whether it plans from the case's costs
    (``takes_costs``: it is called with ``costs=StageCosts``)."""

    name: str
    aliases: tuple[str, ...]
    build: Builder
    summary: str
    takes_chunks: bool = False
    splits_backward: bool = False
    placed_chunks: int = 1
    takes_costs: bool = False

    def num_stages(self, num_ranks: int, chunks: int = 1) -> int:
        """The stages this builder's schedule has for ``p`` ranks and ``v`` chunks (``p v``, or ``p``
        times its own placed chunks): what the :class:`~harness.schedule.costs.StageCosts` it takes describe."""
        return num_ranks * (chunks if self.takes_chunks else max(chunks, self.placed_chunks))


#: The key of :attr:`Schedule.params` under which a builder leaves notes (a tuple of strings) for the
#: case's warnings, the summary and the report, e.g. ZB-auto's "the limit is below p: ...".
NOTES_PARAM = "notes"


def schedule_notes(schedule: Schedule) -> list[str]:
    """The notes the builder of ``schedule`` left in its ``params`` (:data:`NOTES_PARAM`); ``[]`` for none."""
    notes = schedule.params.get(NOTES_PARAM, ())
    return [str(n) for n in notes] if isinstance(notes, (tuple, list)) else []

_REGISTRY: dict[str, BuilderInfo] = {}

_ALIASES: dict[str, str] = {}

#: The modules of the built-in builders split off this one: a bug in one of them raises with its
#: own traceback, where a user's builder's exception is turned into a ConfigError naming it.
_BUILT_IN_MODULES = frozenset({__name__, "harness.schedule.interleaved", "harness.schedule.zero_bubble", "harness.schedule.dualpipe",
                               "harness.schedule.zb_auto"})

def register(
    name: str,
    *aliases: str,
    summary: str | None = None,
    takes_chunks: bool = False,
    splits_backward: bool = False,
    placed_chunks: int = 1,
    takes_costs: bool = False,
) -> Callable[[Builder], Builder]:
    """Decorator: register a builder under ``name`` and ``aliases``: letters, digits, ``-``
    and ``_``, matched whatever their case and with ``-`` and ``_`` ignored (:func:`builder_info`).

    The builder is called as ``fn(p, m, **options)``, or ``fn(p, m, v, **options)``
    with ``takes_chunks``, and must return a :class:`Schedule` with ``p`` ranks and
    ``m`` micro-batches (:func:`build_schedule` checks). ``summary`` defaults to the
    first line of the builder's docstring; ``splits_backward`` says its backward is
    ``I`` + ``W``; ``placed_chunks`` is the chunks per rank a builder that does not
    take ``v`` places (2 for the V placement), for the :data:`MAX_JOBS` estimate.

    Raises:
        ConfigError: ``name`` or an alias is already taken by another builder
            (registering the same function again, as a re-imported module does,
            is allowed), or holds another character than a letter, a digit, ``-``
            or ``_`` (a space, a dot, ...), which no lookup would match.
    """

    def deco(fn: Builder) -> Builder:
        for key in (name, *aliases):
            if not isinstance(key, str) or not _key(key):
                raise ConfigError(f"a schedule name must be a non-empty string, got {key!r}")
            # Matched as loosely as names once were, so a near-copy of a taken name is named as taken.
            taken = _REGISTRY.get(_ALIASES.get(_loose_key(key), ""))
            if taken is not None and not _same_function(taken.build, fn):
                raise ConfigError(
                    f"cannot register {_where(fn)} as schedule {name!r}: the name {key!r} is taken by {taken.name!r} "
                    f"({_where(taken.build)}); register it under another name"
                )
            odd = _odd_characters(key)
            if odd:
                fixed = re.sub(r"[^A-Za-z0-9_-]+", "-", key.strip()).strip("-")
                raise ConfigError(
                    f"cannot register {_where(fn)} as schedule {name!r}: the name {key!r} holds {odd}; a schedule name is "
                    f"ASCII letters, digits, '-' and '_'" + (f", e.g. {fixed!r}" if fixed else "")
                )
        doc = (inspect.getdoc(fn) or "").strip().splitlines()
        if takes_costs and "costs" not in inspect.signature(fn).parameters:
            raise ConfigError(f"cannot register {_where(fn)} as schedule {name!r} with takes_costs=True: it has no 'costs' parameter")
        info = BuilderInfo(
            name, tuple(aliases), fn, summary if summary is not None else (doc[0] if doc else ""), takes_chunks, splits_backward, placed_chunks,
            takes_costs,
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

#: What a schedule name holds once stripped of outer whitespace: ASCII letters, digits, ``-`` and ``_``.
_NAME_RE = re.compile(r"[A-Za-z0-9_-]+")

def _key(name: str) -> str:
    """The lookup key of a schedule name: outer whitespace stripped, case, ``-`` and ``_`` ignored
    (``"zb-h1"``, ``"ZB_H1"`` and ``"zbh1"`` are one key)."""
    return name.strip().lower().replace("-", "").replace("_", "")

def _loose_key(name: str) -> str:
    """``name``'s key with every character but letters and digits dropped: what a name that
    :func:`builder_info` refuses (``"1 f 1 b"``) is close to."""
    return "".join(ch for ch in name.lower() if ch.isalnum())

def _odd_characters(name: str) -> str:
    """What in ``name`` (outer whitespace aside) is not a letter, digit, ``-`` or ``_``, in words;
    ``""`` for a name of those alone (or an empty one)."""
    stripped = name.strip()
    if not stripped or _NAME_RE.fullmatch(stripped):
        return ""
    odd = sorted({ch for ch in stripped if not _NAME_RE.fullmatch(ch)})
    if odd == [" "]:
        return "a space inside"
    return ("the characters " if len(odd) > 1 else "the character ") + ", ".join(map(repr, odd))

def _closest_name(name: str) -> str | None:
    """The registered schedule (canonical name) closest to ``name``: the one whose key is
    ``name``'s letters and digits, else the nearest key by :func:`difflib.get_close_matches`."""
    import difflib

    loose = _loose_key(name)
    if loose in _ALIASES:
        return _ALIASES[loose]
    close = difflib.get_close_matches(loose, list(_ALIASES), n=1)
    return _ALIASES[close[0]] if close else None

def schedule_names() -> list[str]:
    """Canonical names of all registered schedules, sorted."""
    return sorted(_REGISTRY)

def builder_info(name: str) -> BuilderInfo:
    """The registered builder for ``name``: its name or an alias, whatever the case, with
    ``-`` and ``_`` ignored (``"zb-h1"``, ``"ZB_H1"``, ``"zbh1"`` are all ZB-H1) and outer
    whitespace stripped.

    Raises:
        ConfigError: ``name`` is not a string; holds another character than a letter, a
            digit, ``-`` or ``_`` (``"1 f 1 b"``, ``"zb.h1"``), the message naming the
            closest schedule; or is unknown, the message listing the valid ones and the closest.
    """
    if not isinstance(name, str):
        raise ConfigError(f"a schedule name must be a string such as '1F1B', got {name!r}")
    odd = _odd_characters(name)
    if odd:
        closest = _closest_name(name)
        hint = f"; did you mean {closest!r}?" if closest else f"; valid schedules: {', '.join(sorted(_REGISTRY))}"
        raise ConfigError(
            f"schedule name {name!r} holds {odd}: a schedule name is ASCII letters, digits, '-' and '_' "
            f"(case, '-' and '_' do not matter){hint}"
        )
    canonical = _ALIASES.get(_key(name))
    if canonical is None:
        valid = ", ".join(f"{n} ({', '.join(i.aliases)})" if i.aliases else n for n, i in sorted(_REGISTRY.items()))
        closest = _closest_name(name)
        hint = f"; did you mean {closest!r}?" if closest else ""
        raise ConfigError(f"unknown schedule {name!r}; valid schedules: {valid}{hint}")
    return _REGISTRY[canonical]

@gc_paused
def build_schedule(
    name: str, num_ranks: int, num_microbatches: int, chunks: int = 1, *, costs: StageCosts | None = None, **options: object
) -> Schedule:
    """Build the schedule registered as ``name`` for ``p`` ranks and ``m`` micro-batches.

    Args:
        name: schedule name (see :func:`schedule_names`).
        num_ranks: ``p >= 1``.
        num_microbatches: ``m >= 1``.
        chunks: ``v``, chunks per rank, for schedules that take it. Schedules
            whose placement fixes it (ZB-V, DualPipeV: 2) accept 1 or that value.
        costs: the per-stage costs a cost-aware builder (``ZB-auto``; :attr:`BuilderInfo.takes_costs`)
            plans from, for the schedule's ``p x v`` stages; made from a cost model by
            :func:`harness.model.stage_costs.stage_costs`. Required by such a builder, ignored
            by the others (so a caller may pass them to every builder).
        options: builder-specific keyword arguments.

    Raises:
        ConfigError: unknown name, non-positive sizes, a ``v`` the schedule
            cannot have, more than :data:`MAX_JOBS` jobs, a builder's own
            constraint (e.g. ``m >= 2p`` for DualPipeV), or a builder that
            returned something else than a schedule of ``p`` ranks and ``m``
            micro-batches (``v`` chunks per rank when it takes them), or a
            cost-aware builder without ``costs`` (the message says how to give them).
    """
    info = builder_info(name)
    num_ranks, num_microbatches, chunks = _check_sizes(num_ranks, num_microbatches, chunks)
    check_options(info, options)
    extra: dict[str, object] = {}
    if info.takes_costs:
        if costs is None:
            raise ConfigError(
                f"schedule {info.name!r} plans from the case's per-stage costs: run it as a PipelineCase (its cost and comm_model "
                f"give them), or pass costs= to build_schedule, e.g. costs=harness.model.stage_costs.stage_costs(cost, "
                f"{info.num_stages(num_ranks, chunks)}, 'edge') for a cost model, or StageCosts.uniform(...)"
            )
        if not isinstance(costs, StageCosts):
            raise ConfigError(f"schedule {info.name!r}: costs must be a harness.schedule.costs.StageCosts, got {type(costs).__name__}")
        want = info.num_stages(num_ranks, chunks)
        if costs.num_stages != want:
            raise ConfigError(f"schedule {info.name!r}: costs describe {costs.num_stages} stages, but p={num_ranks}, v={chunks} "
                              f"has {want}; give one value per stage")
        extra["costs"] = costs
    per_rank = chunks if info.takes_chunks else max(chunks, info.placed_chunks)
    jobs = num_ranks * per_rank * num_microbatches * (3 if info.splits_backward else 2)
    if jobs > MAX_JOBS:
        raise too_many_jobs(jobs, f"schedule {info.name!r} with p={num_ranks}, m={num_microbatches}, v={per_rank}")
    try:
        if info.takes_chunks:
            schedule = info.build(num_ranks, num_microbatches, chunks, **options, **extra)
        else:
            schedule = info.build(num_ranks, num_microbatches, **options, **extra)
    except HarnessError:
        raise
    except Exception as exc:
        if getattr(info.build, "__module__", None) in _BUILT_IN_MODULES:
            raise  # a built-in builder's bug: its traceback
        frames = traceback.extract_tb(exc.__traceback__)
        at = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
        raise ConfigError(f"the builder of schedule {info.name!r} ({_where(info.build)}) raised {type(exc).__name__}: {exc}{at}") from None
    _check_built(info, schedule, num_ranks, num_microbatches, chunks)
    _remember(schedule, (info.name, num_ranks, num_microbatches, chunks if info.takes_chunks else 1, bool(options) or bool(extra)))
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
    ``(name, p, m, v, with_options)``, ``v`` 1 for a builder that takes no chunks, ``with_options``
    also true for a cost-aware builder (its schedule depends on its costs); ``None`` for
    a schedule it did not return (a file's, a pass's output, a user's)."""
    entry = _BUILT.get(id(schedule))
    return entry[1] if entry is not None and entry[0]() is schedule else None

def builder_options(info: BuilderInfo) -> tuple[list[inspect.Parameter], bool]:
    """The keyword options a builder takes: its parameters after the positional sizes
    ``(p, m[, v])`` (less ``costs`` for a cost-aware builder: the case gives them), and whether it
    also takes any keyword (``**options``)."""
    params = list(inspect.signature(info.build).parameters.values())
    sizes = 3 if info.takes_chunks else 2  # (p, m[, v]) are given positionally
    rest = params[sizes:]
    named = [p for p in rest if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
             and not (info.takes_costs and p.name == "costs")]
    return named, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in rest)

def check_options(info: BuilderInfo, options: Mapping[str, object]) -> None:
    """Check builder keyword ``options`` against the builder's signature.

    Raises:
        ConfigError: an option that names one of the sizes ``p``, ``m``, ``v`` (they
            come from the case's fields) or a cost-aware builder's ``costs`` (the case's
            cost model gives them), an option declared ``bool`` given something
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
    if "costs" in options and info.takes_costs:
        raise ConfigError(
            f"schedule {info.name!r}: 'costs' is not an option: the case's cost model and comm_model give them "
            "(build_schedule takes them as costs=)"
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

BYTES_PER_JOB = 360

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
        "raise harness.schedule.registry.MAX_JOBS if the machine has the memory)"
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
