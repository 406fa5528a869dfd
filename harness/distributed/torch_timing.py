"""Every action of PyTorch's pipelining runtime timed on one clock, by hooks (no profiler needed).

torch 2.13's ``_PipelineScheduleRuntime._step_microbatches``
(``torch/distributed/pipelining/schedules.py``) runs each action of its lowered list inside
``with record_function(_get_profiler_function_name(action))`` (the ``PP:<action>`` range a profiler
shows) and waits for receives (inside the consuming compute action) and for the step's sends
(after the last action) with the module-level ``_wait_batch_p2p``. Both names are looked up in the
module's globals at call time, and the stages' ``forward_one_chunk``, ``backward_one_chunk`` and
``backward_weight_one_chunk`` on the stage objects. :class:`ActionTimer` replaces them while it is
installed:

* ``record_function`` -> a range that stamps its entry and exit (and still opens the real
  ``record_function`` while a profiler is on, so traces keep their ``PP:`` ranges);
* ``_wait_batch_p2p`` -> the same call, stamped after it returns: inside an action, the end of
  that action's wait for its input; outside every action, the end-of-step wait for the sends;
* the stage methods, and the schedule's ``_maybe_compute_loss`` -> the same calls, stamped: where
  each compute part starts and ends, also inside an ``OVERLAP_F_B`` action (one range, two parts).

The timer's own range (:meth:`ActionTimer.range`) marks what the harness adds after ``step()``:
each stage's optimizer step, as ``PP:<stage>OPT`` (an ``OPT`` job; PyTorch writes no such range).

Clocks: on CPU every stamp is ``time.perf_counter_ns()`` (Linux ``CLOCK_MONOTONIC``, ns). On a
GPU (written, not yet run: docs/torch.md) every stamp is a ``torch.cuda.Event`` recorded on the
current stream, so compute is timed on the device; :meth:`ActionTimer.end_step` synchronizes and
places each event at ``host_ref + ref.elapsed_time(event)``, the reference event being recorded
at the step's start right after a ``synchronize`` (as the ``cuda`` backend anchors its events).

These are private names of torch's: :func:`check_hook_points` says which the installed torch lacks.
Imports torch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.autograd.profiler as _profiler
from torch.distributed.pipelining import schedules as _schedules
from torch.distributed.pipelining import stage as _stage

__all__ = ["ActionSpan", "ActionTimer", "StepTiming", "check_hook_points"]

_HOOK_POINTS = ("record_function", "_wait_batch_p2p", "_get_profiler_function_name", "_PipelineScheduleRuntime")
_STAGE_METHODS = {"forward_one_chunk": "F", "backward_one_chunk": "B", "backward_weight_one_chunk": "W"}


def check_hook_points() -> list[str]:
    """The names :class:`ActionTimer` replaces that the installed torch lacks (empty: all there)."""
    missing = [f"schedules.{n}" for n in _HOOK_POINTS if not hasattr(_schedules, n)]
    missing += [f"stage._PipelineStageBase.{n}" for n in _STAGE_METHODS if not hasattr(_stage._PipelineStageBase, n)]
    if not hasattr(_schedules.PipelineScheduleMulti, "_maybe_compute_loss"):
        missing.append("schedules.PipelineScheduleMulti._maybe_compute_loss")
    return missing


@dataclass(slots=True)
class ActionSpan:
    """One action as the runtime ran it (times ns, on the timer's clock).

    Attributes:
        name: the action's text, ``"1F0"``, ``"(0F3;3B1)OVERLAP_F_B"``, ``"0OPT"``.
        start_ns, end_ns: the range's entry and exit.
        waits: ``(start_ns, end_ns)`` of each ``_wait_batch_p2p`` inside it.
        parts: ``(tag, stage, micro-batch, start_ns, end_ns)`` of each call inside it: ``"F"``
            ``forward_one_chunk``, ``"B"`` ``backward_one_chunk`` (a ``B`` or an ``I``), ``"W"``
            ``backward_weight_one_chunk``, ``"L"`` the loss on the last stage, ``"O"`` an optimizer
            step (micro-batch ``-1``).
    """

    name: str
    start_ns: Any
    end_ns: Any = 0
    waits: list[tuple[Any, Any]] = field(default_factory=list)
    parts: list[tuple[str, int, int, Any, Any]] = field(default_factory=list)


@dataclass(slots=True)
class StepTiming:
    """One step of one rank (times ns, on the timer's clock).

    Attributes:
        step: the step's index in the run (warm-up steps counted).
        start_ns, end_ns: the ``schedule.step()`` call.
        actions: the ranges in the order run (the ``OPT`` ranges after ``step()`` included).
        send_waits: ``(start_ns, end_ns)`` of the end-of-step waits for the step's sends.
        train_end_ns: the end of the training step (its optimizer steps included).
    """

    step: int
    start_ns: Any = 0
    end_ns: Any = 0
    actions: list[ActionSpan] = field(default_factory=list)
    send_waits: list[tuple[Any, Any]] = field(default_factory=list)
    train_end_ns: Any = 0


class _Clock:
    """Stamps: ``perf_counter_ns`` on CPU; on CUDA, events recorded on the current stream, turned into
    ns by :meth:`resolve` after a synchronize."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.events: list[Any] = []
        self.ref: Any = None
        self.ref_host_ns = 0

    def begin(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()
            self.ref_host_ns = time.perf_counter_ns()
            self.ref = torch.cuda.Event(enable_timing=True)
            self.ref.record()
            self.events = []

    def now(self) -> Any:
        if not self.cuda:
            return time.perf_counter_ns()
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        self.events.append(ev)
        return ev

    def resolve(self, stamp: Any) -> int:
        if not self.cuda or isinstance(stamp, int):
            return int(stamp)
        return self.ref_host_ns + round(self.ref.elapsed_time(stamp) * 1e6)


class _Range:
    """The context manager standing for ``record_function`` while the timer is installed."""

    __slots__ = ("name", "real", "span", "timer")

    def __init__(self, timer: ActionTimer, name: str) -> None:
        self.timer = timer
        self.name = name
        self.real: Any = None

    def __enter__(self) -> _Range:
        timer = self.timer
        if _profiler._is_profiler_enabled:  # a profiler is on: keep its range too
            self.real = timer.real_record_function(self.name)
            self.real.__enter__()
        if timer.on_action is not None:
            timer.on_action(self.name, timer.step.step if timer.step is not None else -1)
        span = ActionSpan(self.name[3:] if self.name.startswith("PP:") else self.name, timer.clock.now())
        self.span = timer.current = span
        return self

    def __exit__(self, *exc: Any) -> None:
        timer = self.timer
        self.span.end_ns = timer.clock.now()
        timer.current = None
        if exc and exc[0] is not None and timer.failed_action is None:
            timer.failed_action = self.span.name  # the action an error left
        if timer.step is not None:
            timer.step.actions.append(self.span)
        if self.real is not None:
            self.real.__exit__(*exc)


class ActionTimer:
    """Install with ``with ActionTimer(stages, schedule, device) as timer:``; each :meth:`begin_step` /
    :meth:`end_step` pair collects one :class:`StepTiming` (returned by :meth:`end_step`).

    Args:
        stages: the rank's ``PipelineStage`` objects (their compute methods are wrapped).
        schedule: the rank's ``_PipelineScheduleRuntime`` (its loss call is wrapped).
        device: the rank's device (``cuda``: CUDA-event stamps).

    Attributes:
        on_action: called with ``(range name, step)`` on entering each range (the test fault hook).
        failed_action: the action whose range an error left, for the error message.

    Raises:
        RuntimeError: on entry, when a hook point is missing (:func:`check_hook_points`).
    """

    def __init__(self, stages: list[Any], schedule: Any, device: torch.device) -> None:
        self.stages = stages
        self.schedule = schedule
        self.clock = _Clock(device)
        self.step: StepTiming | None = None
        self.current: ActionSpan | None = None
        self.on_action: Callable[[str, int], None] | None = None
        self.failed_action: str | None = None
        self.real_record_function: Any = _schedules.record_function
        self._saved: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> ActionTimer:
        missing = check_hook_points()
        if missing:
            raise RuntimeError(f"torch {torch.__version__} lacks {', '.join(missing)}: the torch backend's timing hooks "
                               "cannot be installed (they are written against torch 2.13)")
        self.real_record_function = _schedules.record_function
        real_wait = _schedules._wait_batch_p2p
        timer = self

        def record_function(name: str, args: str | None = None) -> _Range:
            return _Range(timer, name)

        def wait_batch_p2p(work: list[Any]) -> None:
            t0 = timer.clock.now()
            real_wait(work)
            t1 = timer.clock.now()
            cur = timer.current
            if cur is not None:
                cur.waits.append((t0, t1))
            elif timer.step is not None:
                timer.step.send_waits.append((t0, t1))

        self._patch(_schedules, "record_function", record_function)
        self._patch(_schedules, "_wait_batch_p2p", wait_batch_p2p)
        for st in self.stages:
            for method, tag in _STAGE_METHODS.items():
                self._patch(st, method, self._wrap(getattr(st, method), tag, st.stage_index))
        self._patch(self.schedule, "_maybe_compute_loss", self._wrap_loss(self.schedule._maybe_compute_loss))
        return self

    def __exit__(self, *exc: Any) -> None:
        for owner, name, old in reversed(self._saved):
            if old is _ABSENT:
                delattr(owner, name)  # an instance attribute we added: the class's method shows again
            else:
                setattr(owner, name, old)
        self._saved.clear()

    def _patch(self, owner: Any, name: str, value: Any) -> None:
        old = owner.__dict__.get(name, _ABSENT) if not isinstance(owner, type) else getattr(owner, name)
        self._saved.append((owner, name, old))
        setattr(owner, name, value)

    def _part(self, tag: str, stage: int, mb: int, t0: Any) -> None:
        cur = self.current
        if cur is not None:
            cur.parts.append((tag, stage, mb, t0, self.clock.now()))

    def _wrap(self, fn: Callable[..., Any], tag: str, stage: int) -> Callable[..., Any]:
        timer = self

        def call(mb: int, *args: Any, **kwargs: Any) -> Any:
            t0 = timer.clock.now()
            try:
                return fn(mb, *args, **kwargs)
            finally:
                timer._part(tag, stage, mb, t0)

        return call

    def _wrap_loss(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """The schedule's loss call, stamped as part ``"L"`` on the last stage (inside an ``OVERLAP_F_B``
        the loss ends the forward part)."""
        timer = self

        def call(stage: Any, output: Any, target_mbs: Any, mb_index: int, *args: Any, **kwargs: Any) -> Any:
            if not stage.is_last:
                return fn(stage, output, target_mbs, mb_index, *args, **kwargs)
            t0 = timer.clock.now()
            try:
                return fn(stage, output, target_mbs, mb_index, *args, **kwargs)
            finally:
                timer._part("L", stage.stage_index, mb_index, t0)

        return call

    def range(self, name: str, stage: int) -> Any:
        """A range of the harness's own after ``step()`` (``PP:<stage>OPT``): an action whose one part
        (``"O"``) is its body; a profiler sees it too."""
        return _OwnRange(self, name, stage)

    def begin_step(self, step: int) -> None:
        """Start collecting step ``step`` (right before ``schedule.step()``)."""
        self.clock.begin()
        self.failed_action = None
        self.step = StepTiming(step, start_ns=self.clock.now())

    def end_call(self) -> None:
        """``schedule.step()`` returned."""
        if self.step is not None:
            self.step.end_ns = self.clock.now()

    def end_step(self) -> StepTiming:
        """Finish the step begun last (after its optimizer steps); its stamps as ns on the host clock."""
        done = self.step
        if done is None:
            raise RuntimeError("end_step without begin_step")
        done.train_end_ns = self.clock.now()
        self.step = None
        if self.clock.cuda:
            torch.cuda.synchronize()
            r = self.clock.resolve
            done.start_ns, done.end_ns, done.train_end_ns = r(done.start_ns), r(done.end_ns), r(done.train_end_ns)
            done.send_waits = [(r(a), r(b)) for a, b in done.send_waits]
            for span in done.actions:
                span.start_ns, span.end_ns = r(span.start_ns), r(span.end_ns)
                span.waits = [(r(a), r(b)) for a, b in span.waits]
                span.parts = [(t, s, mb, r(a), r(b)) for t, s, mb, a, b in span.parts]
        return done


class _OwnRange:
    """:meth:`ActionTimer.range`."""

    __slots__ = ("name", "range", "stage", "t0", "timer")

    def __init__(self, timer: ActionTimer, name: str, stage: int) -> None:
        self.timer, self.name, self.stage = timer, name, stage
        self.range = _Range(timer, name)
        self.t0: Any = None

    def __enter__(self) -> _OwnRange:
        self.range.__enter__()
        self.t0 = self.timer.clock.now()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.timer._part("O", self.stage, -1, self.t0)
        self.range.__exit__(*exc)


class _Absent:
    pass


_ABSENT = _Absent()
