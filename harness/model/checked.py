"""A user's cost model checked where its answers enter a run: every duration (ns), FLOP count
and byte count a custom model gives is a finite, non-negative number below 2**53, or the case stops
with an error naming the model, the job and the value.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from harness.errors import ConfigError
from harness.model.cost import CostModel, FixedCost

# Optional cost-model methods and the fields that answer them, each in its concept's module.
from harness.model.data_parallel import data_parallel_ns
from harness.model.transformer import TransformerCost
from harness.model.values import _MAX_DURATION_TEXT, MAX_DURATION_NS, _shown
from harness.schedule.model import Job, JobKind

__all__ = ["CheckedCost"]


def _answer_problem(value: object, *, positive: bool = False, whole: bool = False, bounded: str = "") -> str | None:
    """Why ``value`` is no valid answer of a cost model (see :class:`CheckedCost`), or ``None``;
    ``bounded`` (what the value is, e.g. ``"durations"``) asks for a value below 2**53."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # None, a str, a complex...
        return f"it is {type(value).__name__}, not a number"
    if isinstance(value, numbers.Integral):
        number: float | int = int(value)
    else:
        number = float(value)
        if math.isnan(number):
            return "it is NaN"
        if not bounded and math.isinf(number):
            return "it is not finite"
        if whole and not number.is_integer() and math.isfinite(number):
            return "it is not a whole number"
    if number < 0:
        return "it is negative"
    if positive and number < 1:
        return "compute jobs must last at least 1 ns"
    if bounded and number >= MAX_DURATION_NS:  # inf too; exact for huge ints
        limit = f"2**53 ns ({_MAX_DURATION_TEXT.split(', ')[1]})" if bounded == "durations" else "2**53"
        return f"{bounded} must be below {limit}: a unit mistake?"
    return None

class CheckedCost:
    """A cost model whose answers are checked where they enter the harness, by the rules
    :class:`FixedCost` applies to its own values: a duration (ns) is a number, at least
    1 ns for a compute job (``F``, ``B``, ``I``, ``W``), at least 0 for ``OPT``,
    send/receive and data-parallel jobs, and below :data:`MAX_DURATION_NS`; FLOPs are a finite number
    >= 0; bytes a whole number >= 0 and below 2**53. A data-parallel job (``UNSHARD``,
    ``RESHARD``, ``REDUCE_GRAD``) takes its duration from the inner model's optional
    ``data_parallel_ns`` (0 without it, :data:`DATA_PARALLEL_METHOD`) and has no FLOPs or bytes:
    the inner model is not asked ``duration_ns``, ``flops`` or ``nbytes`` for it.

    Every answer is returned as the executor uses it (durations and bytes as ``int``,
    a duration of a non-whole number of ns rounded to the nearest ns as :class:`FixedCost`
    rounds its own, FLOPs as ``float``), so a custom model's ``-5``, ``1e20``, ``NaN`` or ``None``
    stops the case before anything runs instead of failing later, far from its cause.

    Args:
        inner: the cost model to check.
        where: names the case in messages (e.g. ``"cases/x.py:12: case 'my case'"``).

    Raises:
        ConfigError (from each method): the answer breaks a rule above; names
            ``where``, the cost model's type, the job, the method and the value.
    """

    def __init__(self, inner: CostModel, where: str = "") -> None:
        self.inner = inner
        self.where = where

    def _fail(self, method: str, job: Job, value: object, problem: str, unit: str) -> ConfigError:
        prefix = f"{self.where}: " if self.where else ""
        shown = _shown(value) + (unit if isinstance(value, numbers.Real) and not isinstance(value, bool) else "")
        return ConfigError(
            f"{prefix}cost model {type(self.inner).__name__}: {method}({job}) gave {shown} for the "
            f"{job.kind.name} job of stage {job.stage}; {problem}"
        )

    def duration_ns(self, job: Job, num_stages: int) -> int:
        """The inner model's duration of ``job`` in ns, checked (see the class)."""
        if job.kind.is_data_parallel:
            value: object = data_parallel_ns(self.inner, job, num_stages)
            problem = _answer_problem(value, bounded="durations")
            if problem:
                raise self._fail("data_parallel_ns", job, value, problem, " ns")
            return int(round(value))  # type: ignore[call-overload]  # noqa: RUF046 - nearest ns as FixedCost rounds; numpy scalars too
        value = self.inner.duration_ns(job, num_stages)
        compute = job.kind in (JobKind.F, JobKind.B, JobKind.I, JobKind.W)
        problem = _answer_problem(value, positive=compute, bounded="durations")
        if problem:
            raise self._fail("duration_ns", job, value, problem, " ns")
        return int(round(value))  # type: ignore[call-overload]  # noqa: RUF046 - nearest ns as FixedCost rounds; numpy scalars too

    def flops(self, job: Job, num_stages: int) -> float:
        """The inner model's FLOPs of ``job``, checked (see the class); 0 for a data-parallel job."""
        if job.kind.is_data_parallel:
            return 0.0
        value = self.inner.flops(job, num_stages)
        problem = _answer_problem(value)  # FLOPs of a big model pass 2**53: finite is enough
        if problem:
            raise self._fail("flops", job, value, problem, " FLOPs")
        return float(value)

    def nbytes(self, job: Job, num_stages: int) -> int:
        """The inner model's bytes for ``job``, checked (see the class); 0 for a data-parallel job."""
        if job.kind.is_data_parallel:
            return 0
        value = self.inner.nbytes(job, num_stages)
        problem = _answer_problem(value, whole=True, bounded="byte counts")
        if problem:
            raise self._fail("nbytes", job, value, problem, " bytes")
        return int(value)  # type: ignore[call-overload, no-any-return]

    def is_uniform(self, num_stages: int) -> bool:
        """The inner model's answer."""
        return bool(self.inner.is_uniform(num_stages))

    def describe(self) -> dict[str, Any]:
        """The inner model's description."""
        return self.inner.describe()

    def __getattr__(self, name: str) -> Any:
        """Anything else (a memory model's ``memory_bytes``/``static_bytes``, ``recompute_time_ns``) from the inner model;
        :mod:`harness.analysis.memory` checks what those answer."""
        if name == "inner":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

def checked(cost: CostModel, where: str = "") -> CostModel:
    """``cost`` with its answers checked where they enter the harness (:class:`CheckedCost`), or
    ``cost`` itself when it is a shipped model (:class:`FixedCost`, :class:`TransformerCost`, which check
    their own values when made; not a subclass of one, whose methods may answer anything) or already
    checked. ``where`` names the case in messages."""
    if isinstance(cost, CheckedCost) or type(cost) in (FixedCost, TransformerCost):
        return cost
    return CheckedCost(cost, where)
