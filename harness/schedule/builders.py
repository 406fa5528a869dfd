"""Schedule builders: pure functions from ``(p, m, v, ...)`` to a :class:`Schedule`.

Each builder is registered under a case-insensitive name (and aliases) with
:func:`register`; :func:`build_schedule` looks one up by name and
:func:`schedule_names` lists them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harness.errors import ConfigError
from harness.schedule.model import Job, JobKind, Schedule, loop_placement

__all__ = [
    "BuilderInfo",
    "build_schedule",
    "builder_info",
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


_REGISTRY: dict[str, BuilderInfo] = {}
_ALIASES: dict[str, str] = {}


def register(
    name: str, *aliases: str, summary: str, takes_chunks: bool = False, splits_backward: bool = False
) -> Callable[[Builder], Builder]:
    """Decorator: register a builder under ``name`` and ``aliases`` (case-insensitive)."""

    def deco(fn: Builder) -> Builder:
        info = BuilderInfo(name, tuple(aliases), fn, summary, takes_chunks, splits_backward)
        _REGISTRY[name] = info
        for key in (name, *aliases):
            _ALIASES[_key(key)] = name
        return fn

    return deco


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
    canonical = _ALIASES.get(_key(name))
    if canonical is None:
        valid = ", ".join(f"{n} ({', '.join(i.aliases)})" if i.aliases else n for n, i in sorted(_REGISTRY.items()))
        raise ConfigError(f"unknown schedule {name!r}; valid schedules: {valid}")
    return _REGISTRY[canonical]


def build_schedule(name: str, num_ranks: int, num_microbatches: int, chunks: int = 1, **options: object) -> Schedule:
    """Build the schedule registered as ``name`` for ``p`` ranks and ``m`` micro-batches.

    Args:
        name: schedule name (see :func:`schedule_names`).
        num_ranks: ``p >= 1``.
        num_microbatches: ``m >= 1``.
        chunks: ``v``, chunks per rank, for schedules that take it.
        options: builder-specific keyword arguments.

    Raises:
        ConfigError: unknown name, non-positive sizes, ``v != 1`` for a schedule
            without chunks, or a builder's own constraint (e.g. ``m >= p``).
    """
    info = builder_info(name)
    _check_sizes(num_ranks, num_microbatches, chunks)
    if info.takes_chunks:
        return info.build(num_ranks, num_microbatches, chunks, **options)
    if chunks != 1:
        raise ConfigError(f"schedule {info.name!r} has one chunk per rank; got v={chunks} (use an interleaved schedule)")
    return info.build(num_ranks, num_microbatches, **options)


def _check_sizes(p: int, m: int, v: int = 1) -> None:
    for label, value in (("number of ranks p", p), ("number of micro-batches m", m), ("chunks per rank v", v)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"the {label} must be a positive integer, got {value!r}")


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
        ranks.append([Job(s, JobKind.F, i) for i in range(m)] + [Job(s, JobKind.B, i) for i in range(m)])
    placement = loop_placement(p)
    _with_opt(p, ranks, optimizer, placement)
    return Schedule("FThenB", m, placement, tuple(tuple(r) for r in ranks))


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
    placement = loop_placement(p)
    _with_opt(p, ranks, optimizer, placement)
    return Schedule("1F1B", m, placement, tuple(tuple(r) for r in ranks))
