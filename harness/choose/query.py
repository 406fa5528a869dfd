"""What the chooser is asked: the model, the sizes to try, the memory limit, and the combinations they make.

A :class:`ChooseQuery` names a model (a :class:`~harness.model.transformer.TransformerCost`, whose
layout and recomputation are searched, not taken), ``p`` pipeline ranks, the micro-batch counts and
chunk counts to try, the schedules (default: every registered one), the communication model and the
memory limit per rank (bytes). :func:`combinations` turns it into the (schedule, v, m, options) tasks
the ranking evaluates, one :func:`~harness.choose.layout_search.search_layout` each.

Which ``v`` a schedule is tried at:

- a builder that takes chunks (Interleaved1F1B, InterleavedZeroBubble, LoopedBFS) at every ``v >= 2``
  of the query (at one chunk per rank its plain counterpart, 1F1B, ZB-H1 or FThenB, is the schedule);
- a V-shape or two-direction builder (ZB-V, V-Half, V-Min, DualPipe, DualPipeV) at its own placed
  chunks, 2;
- every other builder at ``v = 1``.

``ZB-auto`` (:mod:`harness.schedule.zb_auto`) is built for the memory limit itself when there is one
(the case's ``memory_limit_bytes``); without a limit it holds at most ``2p`` micro-batches' activations
per stage (``max_pending = 2p``, where its schedule reaches ZB-H2's, Qi et al., arXiv:2401.10241 §3.2).
Where its builder refuses the limit for a layout and recomputation, the search judges that candidate as
its least-memory build (``max_pending = 1``; :data:`harness.choose.layout_search.LEAST_MEMORY_OPTIONS`),
and a row whose best is one carries those options.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.choose.layout_dp import too_few_layers
from harness.errors import ConfigError
from harness.model.comm import check_comm_model
from harness.model.layout import StageLayout, parse_layout
from harness.model.recompute import RECOMPUTE
from harness.model.transformer import TransformerCost
from harness.schedule.registry import builder_info, schedule_names

__all__ = ["ChooseQuery", "Task", "check_layout", "combinations"]


@dataclass(frozen=True)
class Task:
    """One combination to evaluate: a schedule at ``v`` chunks and ``m`` micro-batches, with its builder options."""

    schedule: str
    v: int
    m: int
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def weight(self) -> int:
        """A rough cost of evaluating it (jobs simulated per candidate, times the rebuilds a cost-built schedule needs):
        the heavy ones are started first, so that a pool's workers end together."""
        rebuild = 10 if builder_info(self.schedule).takes_costs else 1
        return self.m * max(self.v, builder_info(self.schedule).placed_chunks) * rebuild


@dataclass(frozen=True)
class ChooseQuery:
    """The question: which schedule, ``m``, ``v``, layout and recomputation is fastest and fits.

    Attributes:
        base: the model and device (:class:`~harness.model.transformer.TransformerCost`); its ``layout``,
            ``layers_per_stage`` and ``recompute`` are what the search chooses, so they are ignored
            (unless ``layout`` below names a fixed layout).
        p: pipeline ranks (``>= 1``).
        microbatches: the micro-batch counts ``m`` to try per step (each ``>= 1``).
        chunks: the chunk counts ``v`` to try for builders that take chunks (default 1 to 4).
        schedules: the schedules to try (names or aliases); ``None``: every registered schedule.
        comm_model: the communication model (:mod:`harness.model.comm`: ``stream``, ``edge``, ``blocking``...).
        recompute: ``"search"`` (each stage none, selective or full) or one mode for every stage.
        layout: ``"search"``, ``"even"`` or a Megatron-Core layout string (kept as given; it fixes the
            stage count, so only the schedules and ``v`` with that many stages are tried; checked against the
            model when the query is made, :func:`check_layout`).
        memory_limit_bytes: device memory per rank (bytes); ``None``: rank by step time alone.

    Raises:
        ConfigError: a size below 1 or not a whole number, an empty list, an unknown schedule (with the
            closest name), an unknown comm model or recomputation mode, a layout string that does not parse
            or does not fit the model (:func:`check_layout`), or a base that is not a TransformerCost.
    """

    base: TransformerCost
    p: int
    microbatches: tuple[int, ...]
    chunks: tuple[int, ...] = (1, 2, 3, 4)
    schedules: tuple[str, ...] | None = None
    comm_model: str = "stream"
    recompute: str = "search"
    layout: str = "search"
    memory_limit_bytes: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.base, TransformerCost):
            raise ConfigError(f"choose: the model must be a TransformerCost (layers, embedding, LM head), got {type(self.base).__name__}")
        _whole("p", self.p)
        object.__setattr__(self, "microbatches", _counts("microbatches (m)", self.microbatches))
        object.__setattr__(self, "chunks", _counts("chunks (v)", self.chunks))
        if self.schedules is not None:
            names = tuple(self.schedules) if not isinstance(self.schedules, str) else (self.schedules,)
            if not names:
                raise ConfigError("choose: schedules is empty; leave it out to try every registered schedule")
            object.__setattr__(self, "schedules", tuple(dict.fromkeys(_canonical(n) for n in names)))
        object.__setattr__(self, "comm_model", check_comm_model(self.comm_model))
        if self.recompute != "search" and self.recompute not in RECOMPUTE:
            raise ConfigError(f"choose: recompute must be 'search' or one of {', '.join(RECOMPUTE)}, got {self.recompute!r}")
        if not isinstance(self.layout, str) or not self.layout.strip():
            raise ConfigError(f"choose: layout must be 'search', 'even' or a layout string, got {self.layout!r}")
        try:
            check_layout(self.layout, self.base, self.p)
        except ConfigError as exc:
            raise ConfigError(f"choose: {exc}") from None
        if self.memory_limit_bytes is not None:
            _whole("memory_limit_bytes", self.memory_limit_bytes)

    @property
    def fixed_stages(self) -> int | None:
        """The stage count a fixed layout string gives (``None`` for ``search`` and ``even``)."""
        parsed = check_layout(self.layout, self.base)
        return None if parsed is None else parsed.num_stages

    def to_dict(self) -> dict[str, Any]:
        """The query as plain JSON values; ``base`` as the TransformerCost's fields (``choose_params`` rebuilds it)."""
        base = {f.name: getattr(self.base, f.name) for f in dataclasses.fields(self.base)}
        base = {k: list(v) if isinstance(v, tuple) else v for k, v in base.items()}
        return {"base": base, "p": self.p, "microbatches": list(self.microbatches), "chunks": list(self.chunks),
                "schedules": list(self.schedules) if self.schedules is not None else None, "comm_model": self.comm_model,
                "recompute": self.recompute, "layout": self.layout, "memory_limit_bytes": self.memory_limit_bytes}


def check_layout(layout: str, base: TransformerCost, p: int | None = None) -> StageLayout | None:
    """A fixed layout string checked against the model: its syntax, its transformer layers (``base.num_layers``),
    and the embedding and LM head where the model has a vocabulary (the checks of
    :class:`~harness.model.transformer.TransformerCost`); with ``p``, its stage count against the ``p`` pipeline
    ranks; ``None`` for ``"search"`` and ``"even"``.

    A schedule of ``p`` ranks at ``v`` chunks per rank has ``p·v`` stages, so a layout fits some schedule only
    where its stage count is a multiple of ``p`` (``p`` stages for one chunk per rank, ``2p`` for the
    V-shapes and interleaving at ``v = 2``, ...). Which schedules and ``v`` of the query it fits is decided
    per combination (:func:`combinations`: the others are excluded, naming both stage counts).

    Raises:
        ConfigError: the string and the rule it breaks (``stage layout 'Et*3|t*4L' holds 7 transformer layer(s),
            but the model has 8``; ``the layout 'Et*4|t*4L' has 2 stage(s), but p=4 pipeline ranks need a multiple
            of 4 ...``).
    """
    if layout in ("search", "even"):
        return None
    dataclasses.replace(base, layout=layout, layers_per_stage=None)  # TransformerCost checks the layout against the model
    parsed = parse_layout(layout)
    if p is not None and parsed.num_stages % p:
        raise ConfigError(f"the layout {layout!r} has {parsed.num_stages} stage(s), but p={p} pipeline ranks need a multiple of "
                          f"{p} (p x v stages for v chunks per rank: {p} at v=1, {2 * p} at v=2, ...)")
    return parsed


def _whole(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"choose: {name} must be a whole number >= 1, got {value!r}")
    return value


def _counts(name: str, values: object) -> tuple[int, ...]:
    if isinstance(values, int) and not isinstance(values, bool):
        values = (values,)
    if not isinstance(values, Sequence) or isinstance(values, str) or not values:
        raise ConfigError(f"choose: {name} must be a non-empty list of whole numbers >= 1, got {values!r}")
    return tuple(sorted(dict.fromkeys(_whole(name, v) for v in values)))


def _canonical(name: str) -> str:
    """The registered name of ``name`` (an alias, any case); an unknown one is refused with the closest registered name."""
    return builder_info(name).name


def _chunk_choices(schedule: str, query: ChooseQuery) -> list[int]:
    info = builder_info(schedule)
    if info.takes_chunks:
        return [v for v in query.chunks if v > 1]  # at v = 1 use the plain counterpart (1F1B, ZB-H1, FThenB)
    return [info.placed_chunks]


def combinations(query: ChooseQuery) -> tuple[list[Task], list[dict[str, Any]]]:
    """The tasks ``query`` makes, and the combinations left out with the reason.

    Returns:
        ``(tasks, excluded)``: tasks in the order schedule, ``v``, ``m``; each excluded entry a dict
        ``{"schedule", "v", "m", "reason"}`` (a fixed layout string with another stage count, a model
        with fewer transformer layers than stages). Combinations the builder itself refuses are found
        when they are evaluated (:func:`harness.choose.rank.choose` lists them with its words).
    """
    names = query.schedules if query.schedules is not None else tuple(schedule_names())
    tasks: list[Task] = []
    excluded: list[dict[str, Any]] = []
    fixed = query.fixed_stages
    for name in names:
        info = builder_info(name)
        chunk_list = _chunk_choices(name, query)
        if not chunk_list:
            excluded.append({"schedule": name, "v": None, "m": None,
                             "reason": f"{name} interleaves v >= 2 chunks per rank and the query's chunks are {list(query.chunks)}"})
        for v in chunk_list:
            stages = info.num_stages(query.p, v)
            reason = None
            if fixed is not None and fixed != stages:
                reason = f"the layout {query.layout!r} has {fixed} stage(s); {name} at p={query.p}, v={v} has {stages}"
            elif fixed is not None:
                try:
                    parse_layout(query.layout, stages, query.base.num_layers)
                except ConfigError as exc:
                    reason = str(exc)
            else:
                reason = too_few_layers(query.base.num_layers, query.base.vocab_size > 0, query.p, stages)
            for m in query.microbatches:
                if reason is not None:
                    excluded.append({"schedule": name, "v": v, "m": m, "reason": reason})
                    continue
                options: dict[str, Any] = {}
                if info.takes_costs and name == "ZB-auto" and query.memory_limit_bytes is None:
                    options = {"max_pending": 2 * query.p}
                tasks.append(Task(name, v, m, options))
    return tasks, excluded
