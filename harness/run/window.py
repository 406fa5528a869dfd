"""The profiling window: which steps of a run are warm-up and which are recorded.

Two kinds, one protocol the executor drives (``for step in window.steps(): run
it; window.observe(step, step_time_ns)``):

* :class:`FixedWindow` - exactly the steps of a ``range`` (``--profile-steps=START:END``).
* :class:`AdaptiveWindow` - measure until stable (the default on timed backends):
  after the warm-up, keep recording steps until the relative standard error of
  the median step time (:func:`harness.stats.median_rel_se`) is at most
  ``target`` and the median's 95 % confidence interval, the one the report
  shows (:func:`harness.stats.median_ci`), reaches at most ``1.96 x target``
  from it (what a median known to ``target`` gives), so a few slow steps that
  the interval still holds keep the window measuring; that interval must cover
  at least 93.75 % (:data:`MIN_TARGET_COVERAGE`, five steps), so a smaller
  ``min_steps`` never stops on two close steps;
  with at least ``min_steps`` and at most ``max_steps`` recorded
  steps and a host-time budget of ``max_time_ns`` for the whole case. The rule
  is nvbench's stopping criterion (``--stopping-criterion stdrel`` with
  ``--max-noise``, ``--min-samples``, ``--timeout``; NVIDIA/nvbench
  ``docs/cli_help.md``) applied to the median, which pipeline steps need
  because a single preempted step is not rare on a shared host. The minimum
  wins over the budget: a case always gets ``min_steps`` recorded steps.

Either window reports why it stopped in a :class:`WindowOutcome` (kept in the
run records, results.json and the report). The ``sim`` backend is exact: the
runner gives it a fixed window of one recorded step and says so
(``reason="exact"``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from harness.errors import ConfigError
from harness.records import MIN_TARGET_COVERAGE, WindowOutcome
from harness.stats import Z95 as _Z95

__all__ = [
    "DEFAULT_MAX_STEPS",
    "DEFAULT_MAX_TIME_NS",
    "DEFAULT_MIN_STEPS",
    "DEFAULT_TARGET",
    "MAX_STEPS",
    "AdaptiveWindow",
    "FixedWindow",
    "ProfilingWindow",
    "parse_duration_ns",
    "parse_steps",
    "parse_target",
]


#: The most steps a run may take (``END`` of ``--profile-steps``, ``max_steps``).
MAX_STEPS = 10_000

#: Defaults of the adaptive window (``--profile-target``, ``--profile-min-steps``,
#: ``--profile-max-time``; the step cap is fixed).
DEFAULT_TARGET = 0.01

DEFAULT_MIN_STEPS = 5

DEFAULT_MAX_TIME_NS = 10_000_000_000

DEFAULT_MAX_STEPS = 1000

class ProfilingWindow(Protocol):
    """What the executor needs of a window (see the module docstring)."""

    @property
    def warmup_steps(self) -> int:
        """Steps run before the first recorded one."""
        ...

    def steps(self) -> Iterator[int]:
        """Step indices to run, from 0; stops when the window is done."""
        ...

    def is_recorded(self, step: int) -> bool:
        """Whether ``step``'s jobs are recorded (it is past the warm-up)."""
        ...

    def observe(self, step: int, step_time_ns: int) -> None:
        """Feed a recorded step's time (ns)."""
        ...

    def outcome(self) -> WindowOutcome:
        """Why it stopped (after :meth:`steps` ended)."""
        ...

def _step_times_rel_err(times: list[int]) -> float | None:
    from harness.stats import median_rel_se

    return median_rel_se(times) if len(times) > 1 else None

def _step_times_ci_reach(times: list[int]) -> float | None:
    from harness.stats import median_ci_reach

    return median_ci_reach(times) if len(times) > 1 else None

@dataclass
class FixedWindow:
    """Exactly ``steps`` recorded, ``0 .. steps.start - 1`` warm-up.

    Args:
        steps: the recorded steps, e.g. ``range(1, 4)``.
        reason: ``"fixed"`` (asked for) or ``"exact"`` (the sim backend's one step).
        clock: host clock in ns (injectable for tests).
    """

    steps_range: range
    reason: str = "fixed"
    clock: Callable[[], int] = time.perf_counter_ns
    _times: list[int] = field(default_factory=list, repr=False)
    _t0: int = 0

    @property
    def warmup_steps(self) -> int:
        return self.steps_range.start

    def steps(self) -> Iterator[int]:
        self._t0 = self.clock()
        self._times.clear()
        yield from range(self.steps_range.stop)

    def is_recorded(self, step: int) -> bool:
        return step in self.steps_range

    def observe(self, step: int, step_time_ns: int) -> None:
        self._times.append(step_time_ns)

    def outcome(self) -> WindowOutcome:
        return WindowOutcome(self.reason, self.warmup_steps, len(self._times), _step_times_rel_err(self._times),
                             elapsed_ns=self.clock() - self._t0, ci_reach=_step_times_ci_reach(self._times))

@dataclass
class AdaptiveWindow:
    """Record steps until the median step time is known to ``target``: its relative standard error
    at most ``target`` and its 95 % confidence interval within ``1.96 x target`` (see module doc).

    Attributes:
        warmup_steps: steps run first and not recorded.
        target: the relative standard error of the median to reach (0.01 = 1 %).
        min_steps: recorded steps at least (2 or more: one step says nothing of noise).
        max_time_ns: host-time budget for the whole window, warm-up included (ns);
            checked after each step, so a window may overrun it by one step.
        max_steps: recorded steps at most (default the larger of 1000 and ``min_steps``).
        clock: host clock in ns (injectable: tests drive the rule with a fake clock).

    Raises:
        ConfigError: a limit out of range (names it and the value).
    """

    warmup_steps: int = 1
    target: float = DEFAULT_TARGET
    min_steps: int = DEFAULT_MIN_STEPS
    max_time_ns: int = DEFAULT_MAX_TIME_NS
    max_steps: int | None = None
    clock: Callable[[], int] = time.perf_counter_ns
    _times: list[int] = field(default_factory=list, repr=False)
    _t0: int = 0
    _reason: str | None = None
    _rel_err: float | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.warmup_steps, int) and 0 <= self.warmup_steps < MAX_STEPS):
            raise ConfigError(f"warm-up steps must be a whole number from 0 to {MAX_STEPS - 1}, got {self.warmup_steps!r}")
        if not (isinstance(self.target, (int, float)) and 0 < self.target < 1):
            raise ConfigError(f"the profile target (relative error of the median) must be above 0 and below 100%, got {self.target!r}")
        if not (isinstance(self.min_steps, int) and 2 <= self.min_steps <= MAX_STEPS):
            raise ConfigError(f"the minimum of recorded steps must be a whole number from 2 to {MAX_STEPS} "
                              f"(one step tells nothing of the noise), got {self.min_steps!r}")
        if self.max_steps is None:
            self.max_steps = max(DEFAULT_MAX_STEPS, self.min_steps)
        if not (isinstance(self.max_steps, int) and self.min_steps <= self.max_steps <= MAX_STEPS):
            raise ConfigError(f"the step cap must be from the minimum ({self.min_steps}) to {MAX_STEPS}, got {self.max_steps!r}")
        if not (isinstance(self.max_time_ns, int) and self.max_time_ns > 0):
            raise ConfigError(f"the time budget must be a positive number of ns, got {self.max_time_ns!r}")

    def steps(self) -> Iterator[int]:
        self._t0 = self.clock()
        self._times.clear()
        self._reason = None
        step = 0
        while self._reason is None:
            yield step
            step += 1

    def is_recorded(self, step: int) -> bool:
        return step >= self.warmup_steps

    def observe(self, step: int, step_time_ns: int) -> None:
        self._times.append(step_time_ns)
        n = len(self._times)
        if n < 2:
            return
        from harness.stats import median_ci, median_ci_reach, median_rel_se

        self._rel_err = median_rel_se(self._times)
        if n < self.min_steps:
            return
        if (self._rel_err <= self.target and median_ci(self._times)[2] >= MIN_TARGET_COVERAGE
                and median_ci_reach(self._times) <= _Z95 * self.target):
            self._reason = "target"
        elif n >= (self.max_steps or DEFAULT_MAX_STEPS):
            self._reason = "max_steps"
        elif self.clock() - self._t0 >= self.max_time_ns:
            self._reason = "budget"

    def outcome(self) -> WindowOutcome:
        return WindowOutcome(self._reason or "budget", self.warmup_steps, len(self._times), self._rel_err, self.target,
                             self.min_steps, self.max_steps, self.max_time_ns, self.clock() - self._t0,
                             _step_times_ci_reach(self._times))

def parse_steps(text: str) -> range:
    """Parse a fixed profiling window ``START:END`` into the recorded steps ``range(START, END)``.

    Steps before ``START`` run as warm-up and are not recorded. ``"1:4"`` runs
    four steps and records steps 1, 2 and 3.

    Raises:
        ConfigError: not two integers, ``START < 0``, ``END <= START`` or
            ``END > MAX_STEPS`` (every job of every recorded step is kept in memory).
    """
    match = re.fullmatch(r"([0-9]+):([0-9]+)", text)  # ASCII digits only, as int() alone would take '３' and ' 1'
    if match is None:
        raise ConfigError(f"profile steps must look like START:END (e.g. 1:4), got {text!r}")
    start, end = int(match.group(1)), int(match.group(2))
    if start < 0 or end <= start:
        raise ConfigError(f"profile steps {text!r}: need 0 <= START < END")
    if end > MAX_STEPS:
        raise ConfigError(f"profile steps {text!r}: at most {MAX_STEPS} steps per run (END <= {MAX_STEPS}); records of every step are kept")
    return range(start, end)

def parse_target(text: str) -> float:
    """``--profile-target``: ``"1%"``, ``"0.5%"`` or a fraction ``"0.01"``; returns the fraction.

    Raises:
        ConfigError: not a number, or not above 0 and below 100 %.
    """
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(%?)\s*", text)
    if m is None:
        raise ConfigError(f"--profile-target {text!r}: expected a relative error like 1% or 0.01")
    value = float(m.group(1)) / (100 if m.group(2) else 1)
    if not 0 < value < 1:
        raise ConfigError(f"--profile-target {text!r}: must be above 0 and below 100%")
    return value

_UNITS_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "min": 60_000_000_000,
             "h": 3_600_000_000_000}

def parse_duration_ns(text: str, option: str = "--profile-max-time") -> int:
    """A host-time budget like ``"10s"``, ``"500ms"``, ``"2min"``, ``"1h"`` or ``"10"`` (seconds), in ns.

    Raises:
        ConfigError: not a positive number with one of the units ns, us, ms, s, min, h
            (names ``option``), or longer than a day.
    """
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zµ]*)\s*", text)
    if m is None or m.group(2) not in ("", *_UNITS_NS):
        raise ConfigError(f"{option} {text!r}: expected a duration like 10s, 500ms, 2min or 1h (units: ns, us, ms, s, min, h)")
    ns = round(float(m.group(1)) * _UNITS_NS[m.group(2) or "s"])
    if not 0 < ns <= 86_400 * 10**9:
        raise ConfigError(f"{option} {text!r}: must be above 0 and at most a day")
    return ns

def window_for(backend: str, steps: range | ProfilingWindow | None) -> range | ProfilingWindow:
    """The profiling window a run on ``backend`` uses: ``steps`` as given, except
    that ``None`` means an :class:`~harness.run.window.AdaptiveWindow` with its
    defaults, and an adaptive window on ``sim`` (which is exact) becomes one
    recorded step after the same warm-up (``reason="exact"``)."""
    if steps is None:
        steps = AdaptiveWindow()
    if backend == "sim" and isinstance(steps, AdaptiveWindow):
        w = steps.warmup_steps
        return FixedWindow(range(w, w + 1), reason="exact")
    return steps
