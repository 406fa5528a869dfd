"""A benchmark case: what pipeline to run, declared as plain data.

Cases in ``cases/`` create a :class:`PipelineCase` and hand it to the
``pipeline`` fixture; the library API runs one with :func:`harness.runner.run_case`.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import numbers
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from harness.distributed.backends import check_device_options
from harness.errors import ConfigError, HarnessError, InputFormatError, ScheduleError
from harness.model.cost import CostModel, FixedCost
from harness.run.device import check_workload
from harness.schedule.model import Schedule
from harness.schedule.registry import build_schedule, builder_info, check_options
from harness.text import safe_text

__all__ = ["PipelineCase", "case_field_names"]


_HARNESS_DIR = Path(__file__).resolve().parent

_E = TypeVar("_E", bound=HarnessError)


def _declaration_site() -> str | None:
    """``file:line`` of the code that is constructing a :class:`PipelineCase`, for messages.

    Looks past this module, the generated ``__init__`` and :func:`dataclasses.replace`.
    ``None`` when that code is the harness itself: the command line builds cases from
    its arguments, and the pytest plugin passes the test's site as ``declared_at``.
    """
    frame: FrameType | None = sys._getframe(1)
    init_code = _DATACLASS_INIT.__code__
    passed = (_declaration_site.__code__.co_filename, dataclasses.replace.__code__.co_filename)
    while frame is not None and (frame.f_code is init_code or frame.f_code.co_filename in passed):
        frame = frame.f_back
    if frame is None:
        return None
    filename = frame.f_code.co_filename
    if filename.startswith("<"):  # python -c, exec(): as the warnings module shows it
        return f"{filename}:{frame.f_lineno}"
    path = Path(filename).resolve()
    if path.is_relative_to(_HARNESS_DIR):
        return None
    try:
        shown = path.relative_to(Path.cwd().resolve())
    except ValueError:
        shown = path
    return f"{shown}:{frame.f_lineno}"


#: ``build_schedule``'s own arguments, which the case's fields give (``options`` may not).
_CASE_FIELD_OF_BUILD_ARGUMENT = {"name": "schedule", "num_ranks": "stages", "num_microbatches": "microbatches", "chunks": "chunks"}


#: Names users reach for that are another field's, beyond what difflib finds.
_FIELD_ALIASES = {"p": "stages", "m": "microbatches", "v": "chunks", "pp": "stages", "vpp": "chunks"}


def _checked_init(self: PipelineCase, *args: Any, **kwargs: Any) -> None:
    """:class:`PipelineCase`'s ``__init__``: a misspelt, missing or repeated field is a
    :class:`ConfigError` with the case's line and a did-you-mean, as the marker path gives,
    not the ``TypeError`` of the generated ``__init__``."""
    valid = case_field_names()
    if (len(args) > len(valid) or any(key not in valid and key != "declared_at" for key in kwargs)
            or (not args and "schedule" not in kwargs) or any(name in kwargs for name in valid[: len(args)])):
        PipelineCase.from_fields(args, kwargs, declared_at=kwargs.get("declared_at") or _declaration_site(), source="PipelineCase(...)")
    _DATACLASS_INIT(self, *args, **kwargs)


def case_field_names() -> tuple[str, ...]:
    """The fields a user gives a :class:`PipelineCase`, in order (``declared_at`` is filled in)."""
    return tuple(f.name for f in dataclasses.fields(PipelineCase) if f.init and f.name != "declared_at")


def _looks_like_path(text: str) -> bool:
    """A schedule given as a string names a file when it has a schedule-file suffix or a folder part."""
    return text.lower().endswith((".csv", ".txt")) or "/" in text or "\\" in text


@dataclass(frozen=True)
class PipelineCase:
    """A pipeline to benchmark.

    Attributes:
        schedule: a registered schedule name (``"1F1B"``), a ready
            :class:`~harness.schedule.model.Schedule`, or the path of a schedule
            file (PyTorch pipeline CSV), as a ``Path`` or a string ending in
            ``.csv`` or containing a folder separator.
        stages: ``p``, pipeline ranks; taken from the schedule when it is given
            ready-made or as a file.
        microbatches: ``m``, micro-batches per step; likewise.
        chunks: ``v``, chunks per rank, for interleaved schedules. A given
            schedule or file carries its own: leave it at 1 (the default, "the
            schedule's own", as for ZB-V's fixed 2) or repeat that value.
        cost: per-job durations; default ``F=1 ms, B=2 ms``.
        workload: ``"timed"`` (each job lasts its cost-model duration: cpu
            sleep, cuda spin; the default) or ``"compute"`` (real matrix
            products sized from the job's FLOPs: cpu NumPy matmul, cuda GEMM).
            Backend names (``sleep``, ``matmul``, ``spin``, ``gemm``) work too.
            The ``sim`` backend ignores it.
        comm: insert send/receive jobs on per-rank comm streams. ``None`` (the
            default) inserts them exactly when the cost model gives transfers a
            cost (p2p latency or bandwidth with activation bytes), so a case never
            sets transfer costs that silently do nothing; ``False`` with such a
            cost gets a note that the transfer cost is not charged. Under
            ``comm_model="stream"`` only (the other models have no send/receive jobs).
        optimizer: append an optimizer step (``OPT``) per stage; named
            schedules only (a given schedule or file holds its own ``OPT`` jobs).
        options: extra keyword arguments for the schedule builder, a mapping of
            option names its builder takes (not ``name``, ``num_ranks``,
            ``num_microbatches`` or ``chunks``: the case's fields give those);
            named schedules only.
        name: a label for reports; default derived from schedule, p, m, v.
        device_options: keyword arguments for the backend's device, applied
            only on that backend, e.g. ``{"cuda": {"device_map": {0: 0, 1: 1},
            "l2_flush": True}}``. Every backend named is checked against its
            device's constructor when the case is built, whichever backend runs.
        memory_limit_bytes: the device memory per rank in bytes (e.g. ``80 * 2**30``);
            a case whose peak memory (:mod:`harness.analysis.memory`) is above it on any rank is
            marked "does not fit" in the summary, the report and results. ``None``: no limit.
            A builder that plans from costs plans within it: ZB-auto without ``max_pending``
            and with a memory model searches for the best schedule that fits.
        comm_model: how transfers between ranks cost time (:mod:`harness.model.comm`):
            ``"stream"`` (send/receive jobs on a FIFO comm stream per pair of
            ranks, every backend), ``"edge"`` (no send/receive jobs; a consumer
            on another rank starts at its producer's end plus the transfer
            time, as the zero-bubble repository's simulator; ``sim`` only), ``"blocking"``
            (send/receive jobs on the compute streams, a send meeting its receive,
            as Megatron-LM without overlap and mindformers' simulator; ``sim`` only)
            or ``"free"``. ``None`` (default): the run's (``--comm-model``, else ``"stream"``).
        comm_placement: where inserted send/receive jobs go. Under ``stream``
            (:mod:`harness.schedule.placement`): ``"just-in-time"`` (its default: each
            receive right before its consumer), ``"eager"`` (PyTorch's ``_add_send_recv``)
            or ``"deferred"`` (then ``_defer_recv_ops``, PyTorch's ``defer_pp_recv=True``).
            Under ``blocking`` (:mod:`harness.schedule.blocking_placement`): ``"timed"`` (its
            default), ``"mindformers"``, ``"megatron"`` or ``"eager"``. ``None`` (default): the
            model's default. The placement used is in the results (``schedule.params.comm_placement``).
        declared_at: where the case was declared, ``"file:line"``; by default
            the code that constructed it (outside the harness). Errors about
            the case's values name it. Not compared or hashed.

    Cases are hashable (set members, dict keys): equal cases hash alike, though
    ``cost`` and the values in ``options`` and ``device_options`` do not enter the hash.

    Raises:
        ConfigError: on construction, for a cost that is not a cost model, a
            non-positive size, ``chunks=None``, a name that is not a string,
            ``optimizer`` (or a builder's flag in ``options``) that is not a
            bool, ``comm`` that is not a bool or ``None``, an unknown workload, ``options`` that are not a
            mapping of names the schedule's builder takes, ``options`` or
            ``optimizer`` with a given schedule or file, a given schedule that
            does not match ``stages``/``microbatches``/``chunks``, or
            ``device_options`` naming an unknown backend, an option its device
            does not take or a value it cannot use; on :meth:`build`, for
            unknown schedule names, missing sizes, a builder's own constraint,
            or a file that does not match ``stages``/``microbatches``/``chunks``.
            Either way the message starts with ``declared_at``, as does that of
            an :class:`~harness.errors.InputFormatError` or
            :class:`~harness.errors.ScheduleError` from reading a schedule file
            (or, in :func:`~harness.runner.run_case`, validating a given schedule).
    """

    schedule: str | Schedule | Path
    stages: int | None = None
    microbatches: int | None = None
    chunks: int = 1
    cost: CostModel = field(default_factory=lambda: FixedCost.ms(F=1, B=2))
    workload: str | None = None
    comm: bool | None = None
    optimizer: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)
    name: str | None = None
    device_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    memory_limit_bytes: int | None = None
    comm_model: str | None = None
    comm_placement: str | None = None
    declared_at: str | None = field(default=None, kw_only=True, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.declared_at is None:  # replace() passes the original's on
            object.__setattr__(self, "declared_at", _declaration_site())
        if self.name is not None and not isinstance(self.name, str):  # first: label() shows it
            raise self._error(f"case: name must be a string (a label for reports) or None, got {self.name!r}")
        if self.name is not None:  # a lone surrogate would fail every UTF-8 write of the report: made safe once, here
            object.__setattr__(self, "name", safe_text(self.name, f"{self.declared_at}: case name" if self.declared_at else "case name"))
        if isinstance(self.schedule, str) and _looks_like_path(self.schedule):
            object.__setattr__(self, "schedule", Path(self.schedule))
        if not isinstance(self.schedule, (str, Schedule, Path)):
            who = f"case {self.name!r}" if self.name else "a case"
            raise self._error(f"{who}: schedule must be a name, a Schedule or a path, got {type(self.schedule).__name__} {self.schedule!r:.40}")
        if not isinstance(self.cost, CostModel):
            raise self._error(
                f"case {self.label()!r}: cost must be a cost model such as FixedCost.ms(F=1, B=2) or TransformerCost(...), "
                f"got {self.cost!r}"
            )
        for label, value in (("stages", self.stages), ("microbatches", self.microbatches), ("chunks", self.chunks)):
            if value is None and label == "chunks":
                raise self._error(f"case {self.label()!r}: chunks must be a positive integer (1, the default, for one chunk per rank), got None")
            if value is not None and (not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1):
                raise self._error(f"case {self.label()!r}: {label} must be a positive integer, got {value!r}")
            if value is not None and type(value) is not int:  # numpy.int64 from a sweep: a plain int from here on
                object.__setattr__(self, label, int(value))
        if not isinstance(self.optimizer, bool):  # "no" is truthy: it would add OPT jobs
            raise self._error(f"case {self.label()!r}: optimizer must be True or False, got {self.optimizer!r}")
        if self.comm is not None and not isinstance(self.comm, bool):
            raise self._error(
                f"case {self.label()!r}: comm must be True, False or None (insert send/receive jobs when transfers cost time), "
                f"got {self.comm!r}"
            )
        limit = self.memory_limit_bytes
        if limit is not None and (not isinstance(limit, numbers.Integral) or isinstance(limit, bool) or limit <= 0):
            raise self._error(f"case {self.label()!r}: memory_limit_bytes must be a positive whole number of bytes "
                              f"(e.g. 80 * 2**30 for 80 GiB), got {limit!r}")
        if limit is not None:
            object.__setattr__(self, "memory_limit_bytes", int(limit))
        if self.comm_model is not None:
            from harness.model.comm import check_comm_model

            try:
                object.__setattr__(self, "comm_model", check_comm_model(self.comm_model))
            except ConfigError as exc:
                raise self._error(f"case {self.label()!r}: {exc}") from None
            if self.comm and self.comm_model not in ("stream", "blocking"):
                raise self._error(
                    f"case {self.label()!r}: comm=True asks for send/receive jobs, but comm_model {self.comm_model!r} has none; "
                    "use comm_model 'stream' or 'blocking' for send/receive jobs"
                )
        if self.comm_placement is not None:  # None: the model's default, chosen when the model is known
            from harness.model.comm import check_comm_placement

            try:
                object.__setattr__(self, "comm_placement", check_comm_placement(self.comm_placement, self.comm_model))
            except ConfigError as exc:
                raise self._error(f"case {self.label()!r}: {exc}") from None
        if self.workload is not None:
            try:
                check_workload(self.workload)
            except ConfigError as exc:
                raise self._error(f"case {self.label()!r}: {exc}") from None
        self._check_options()
        if isinstance(self.schedule, (Schedule, Path)):
            self._check_given_schedule_fields()
        if isinstance(self.schedule, Schedule):  # known now; a file's sizes when it is read
            self._check_matches(self.schedule, "the given schedule")
        self._check_device_options()

    def __hash__(self) -> int:
        """On the fields that say which pipeline runs, so cases can be set members and dict keys.
        ``options`` and ``device_options`` count by their names only and ``cost`` not at all (their
        values may be unhashable, e.g. lists); equal cases still hash alike."""
        return hash((
            self.schedule, self.stages, self.microbatches, self.chunks, self.workload, self.comm, self.optimizer, self.name,
            self.comm_model, self.comm_placement, frozenset(self.options), frozenset(self.device_options),
        ))

    @classmethod
    def from_fields(cls, args: Sequence[Any], kwargs: Mapping[str, Any], *, declared_at: str | None, source: str) -> PipelineCase:
        """A case from fields given as positional and keyword arguments by a user's declaration that is
        not a call of the class itself (the ``pipeline`` marker, the ``pipeline`` fixture's keywords),
        so that a misspelt, missing or repeated field is a :class:`ConfigError` naming ``declared_at``,
        ``source`` and the valid fields, not a ``TypeError`` from ``__init__``.

        Args:
            args: fields by position (``schedule`` first).
            kwargs: fields by name; ``declared_at`` among them overrides the argument.
            declared_at: the declaration's ``file:line``, or ``None``.
            source: what the user wrote, for messages, e.g. ``"pipeline marker"``.

        Raises:
            ConfigError: an unknown, missing or repeated field, too many positional
                fields, or any error of the case's own checks.
        """
        valid = case_field_names()

        def fail(problem: str) -> ConfigError:
            message = f"{source}: {problem}; valid fields: {', '.join(valid)}"
            return ConfigError(f"{declared_at}: {message}" if declared_at else message)

        if len(args) > len(valid):
            raise fail(f"takes at most {len(valid)} fields by position, got {len(args)}: {tuple(args)!r}")
        unknown = [key for key in kwargs if key not in valid and key != "declared_at"]
        if unknown:
            described = []
            for key in unknown:
                close = _FIELD_ALIASES.get(str(key)) or next(iter(difflib.get_close_matches(str(key), valid, n=1)), None)
                described.append(f"{key!r}" + (f" (did you mean {close!r}?)" if close else ""))
            raise fail(f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(described)}")
        twice = [name for name in valid[: len(args)] if name in kwargs]
        if twice:
            raise fail(f"field {twice[0]!r} given both by position and by name")
        if not args and "schedule" not in kwargs:
            raise fail('missing field \'schedule\' (a schedule name such as "1F1B", a Schedule or a CSV path)')
        fields = {**dict(zip(valid, args)), **kwargs}
        fields.setdefault("declared_at", declared_at)
        return cls(**fields)

    def _check_options(self) -> None:
        """``options`` is a mapping of the builder's own keyword options: not the sizes and
        name that the case's fields give (``build_schedule``'s own arguments), and, for a
        known schedule name, only those its builder takes. An unknown name is reported by
        :meth:`build`, with the list of valid ones."""
        options = self.options
        if not isinstance(options, Mapping):
            raise self._error(
                f"case {self.label()!r}: options must map the schedule builder's option names to values, "
                f"e.g. {{'optimizer': True}}, got {options!r}"
            )
        for key in options:
            if not isinstance(key, str):
                raise self._error(f"case {self.label()!r}: option names must be strings, got {key!r} in options={dict(options)!r}")
        clashes = [key for key in _CASE_FIELD_OF_BUILD_ARGUMENT if key in options]
        if clashes:
            given = ", ".join(f"{_CASE_FIELD_OF_BUILD_ARGUMENT[k]}={options[k]!r}" for k in clashes)
            several = len(clashes) > 1
            raise self._error(
                f"case {self.label()!r}: option{'s' if several else ''} {', '.join(map(repr, clashes))} "
                f"{'are' if several else 'is'} not {'builder options' if several else 'a builder option'}: "
                f"the case's own field{'s' if several else ''} give{'' if several else 's'} {'them' if several else 'it'}; "
                f"give {given} instead"
            )
        if not isinstance(self.schedule, str) or not options:
            return
        try:
            info = builder_info(self.schedule)
        except ConfigError:
            return
        try:
            check_options(info, options)
        except ConfigError as exc:
            raise self._error(f"case {self.label()!r}: {exc}") from None
        if self.optimizer and "optimizer" in options and options["optimizer"] is not True:
            raise self._error(
                f"case {self.label()!r}: optimizer=True and options={{'optimizer': {options['optimizer']!r}}} disagree; "
                "give only the optimizer field"
            )

    def _check_given_schedule_fields(self) -> None:
        """A given schedule (a ``Schedule`` or a file) carries its own jobs and placement:
        ``options`` and ``optimizer`` are for a builder, which it has none of, and ``chunks``
        may only repeat its own ``v`` (1, the default, stands for the schedule's own)."""
        what = "the given schedule" if isinstance(self.schedule, Schedule) else f"the schedule file {self.schedule}"
        if self.options:
            raise self._error(
                f"case {self.label()!r}: options={dict(self.options)!r} only apply to named (built-in) schedules, "
                f"whose builder takes them; {what} carries its own jobs and placement"
            )
        if self.optimizer:
            raise self._error(
                f"case {self.label()!r}: optimizer=True only applies to named (built-in) schedules; "
                f"{what} carries its own jobs: add an OPT job per stage to it (a CSV cell such as 0OPT)"
            )
        if isinstance(self.schedule, Schedule):
            self._check_chunks(self.schedule, what)

    def _check_chunks(self, schedule: Schedule, what: str) -> None:
        if self.chunks not in (1, schedule.chunks_per_rank):
            raise self._error(
                f"case {self.label()!r}: {what} has {schedule.chunks_per_rank} chunk{'s' if schedule.chunks_per_rank > 1 else ''} "
                f"per rank, but chunks={self.chunks}; leave chunks out or give {schedule.chunks_per_rank}: a given schedule carries its own"
            )

    def _check_device_options(self) -> None:
        """Every backend named in ``device_options`` exists and takes the options given for it,
        whichever backend this run uses: a misspelt option must not wait for the one machine that has it."""
        if not isinstance(self.device_options, Mapping):
            raise self._error(
                f"case {self.label()!r}: device_options must map a backend name to its options, "
                f"e.g. {{'cuda': {{'l2_flush': True}}}}, got {self.device_options!r}"
            )
        problems = []
        for backend, options in self.device_options.items():
            try:
                if not isinstance(options, Mapping):
                    raise ConfigError(f"the options for {backend!r} must be a mapping of keyword arguments, got {options!r}")
                check_device_options(backend, options)
            except ConfigError as exc:
                problems.append(str(exc))
        if problems:  # all of them: the next backend's may only show on another machine
            raise self._error(f"case {self.label()!r}: device_options: {'; '.join(problems)}")

    def with_site(self, exc: _E) -> _E:
        """``exc`` (a copy, of the same type and attributes) with its message prefixed by
        ``declared_at``, for errors of the case's schedule found by other code (loading
        its file, validating it), so that they name the case's line as the case's own do.
        ``exc`` itself when ``declared_at`` is ``None`` or the message starts with it already."""
        message = str(exc)
        if not self.declared_at or message.startswith(f"{self.declared_at}: "):
            return exc
        located = copy.copy(exc)
        located.args = (f"{self.declared_at}: {message}",)
        return located

    def _error(self, message: str) -> ConfigError:
        """A ConfigError whose message starts with where the case was declared."""
        return ConfigError(f"{self.declared_at}: {message}" if self.declared_at else message)

    @property
    def schedule_name(self) -> str:
        if isinstance(self.schedule, Schedule):
            return self.schedule.name
        if isinstance(self.schedule, Path):
            return self.schedule.name
        try:
            return builder_info(self.schedule).name
        except ConfigError:
            return str(self.schedule)

    def label(self) -> str:
        """Human label: ``name`` or ``"1F1B p=4 m=8"`` (``v`` when > 1)."""
        if self.name:
            return self.name
        parts = [self.schedule_name]
        if self.stages is not None:
            parts.append(f"p={self.stages}")
        if self.microbatches is not None:
            parts.append(f"m={self.microbatches}")
        if self.chunks != 1:
            parts.append(f"v={self.chunks}")
        return " ".join(parts)

    def build(self, comm_model: str | None = None) -> Schedule:
        """Build (or load) the schedule, add OPT jobs as asked, and apply the
        communication model (send/receive jobs under ``stream``, none otherwise;
        :func:`harness.model.comm.lower`).

        Args:
            comm_model: the model when the case names none (default ``"stream"``);
                the case's own ``comm_model`` wins.

        Raises:
            ConfigError: see class doc.
            ScheduleError, InputFormatError: from loading a schedule file; the
                message starts with ``declared_at``, then the file's own error.
        """
        from harness.model import comm
        from harness.model.chains import check_cost_for_chains

        schedule = self.compute_schedule(comm_model)
        try:
            check_cost_for_chains(self.cost, schedule)  # (DualPipe's two chains: not every cost model describes them)
            return comm.lower(schedule, self.cost, self.resolved_comm_model(comm_model), self.comm, self.comm_placement)
        except ConfigError as exc:  # too many jobs with the send/receive jobs, a cost model for one chain: say which case, and where
            raise self._error(f"case {self.label()!r}: {exc}") from None

    def resolved_comm_model(self, default: str | None = None) -> str:
        """The case's communication model: its own, else ``default``, else ``"stream"``."""
        from harness.model.comm import DEFAULT_COMM_MODEL

        return self.comm_model or default or DEFAULT_COMM_MODEL

    def compute_schedule(self, comm_model: str | None = None) -> Schedule:
        """The schedule as built or loaded, with OPT jobs as asked, before the
        communication model is applied (see :meth:`build`).

        A builder that plans from costs (``takes_costs``, e.g. ZB-auto) gets the case's
        per-stage costs (:func:`harness.model.stage_costs.stage_costs`): its cost model's
        durations, its transfer times under :meth:`resolved_comm_model` (``comm_model`` is the
        default when the case names none, as in :meth:`build`), its memory model and
        ``memory_limit_bytes``.

        Raises:
            ConfigError, ScheduleError, InputFormatError: as :meth:`build`.
        """
        schedule: Schedule
        if isinstance(self.schedule, Schedule):
            schedule = self.schedule  # checked against the case's fields when it was made
        elif isinstance(self.schedule, Path):
            from harness.schedule import notation

            try:
                schedule = notation.load_schedule_file(self.schedule)  # sizes from the file, then compared
            except (InputFormatError, ScheduleError) as exc:  # the file's own words, after the case's line
                raise self.with_site(exc) from None
            self._check_matches(schedule, str(self.schedule))
            self._check_chunks(schedule, str(self.schedule))
        else:
            if self.stages is None or self.microbatches is None:
                try:  # a name no lookup finds is the first thing to say, before the sizes it would need
                    builder_info(self.schedule)
                except ConfigError as exc:
                    raise self._error(f"case {self.label()!r}: {exc}") from None
                raise self._error(f"case {self.label()!r}: give stages (p) and microbatches (m) for schedule {self.schedule!r}")
            opts = dict(self.options)
            if self.optimizer:
                opts["optimizer"] = True
            try:
                info = builder_info(self.schedule)
                costs = None
                if info.takes_costs:
                    from harness.model.stage_costs import stage_costs

                    costs = stage_costs(self.cost, info.num_stages(self.stages, self.chunks), self.resolved_comm_model(comm_model),
                                        comm=self.comm, memory_limit_bytes=self.memory_limit_bytes)
                schedule = build_schedule(self.schedule, self.stages, self.microbatches, self.chunks, costs=costs, **opts)
            except ConfigError as exc:  # the builder speaks of the schedule; say which case, and where
                raise self._error(f"case {self.label()!r}: {exc}") from None
        return schedule

    def _check_matches(self, schedule: Schedule, what: str) -> None:
        if self.stages is not None and self.stages != schedule.num_ranks:
            raise self._error(f"case {self.label()!r}: {what} has {schedule.num_ranks} ranks, but stages={self.stages}")
        if self.microbatches is not None and self.microbatches != schedule.num_microbatches:
            raise self._error(
                f"case {self.label()!r}: {what} has {schedule.num_microbatches} micro-batches, but microbatches={self.microbatches}"
            )


_DATACLASS_INIT = PipelineCase.__init__
PipelineCase.__init__ = functools.wraps(_DATACLASS_INIT)(_checked_init)  # type: ignore[method-assign]
