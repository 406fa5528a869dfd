"""What a cost model assumes, in words: the optional cost-model method :data:`ASSUMPTIONS_METHOD`.

Every figure of a case rests on modelling choices: how a job's time is derived, whether tensor
parallelism divides it, whether the attention products count, what recomputation costs, how long an
overlapped pair lasts, how a transfer is charged. Each concept says its own in short sentences, and
:func:`harness.analysis.assumptions.case_assumptions` collects them into the case's ``assumptions``
(results, page, terminal). This module holds the cost model's part: its optional method, and a
sentence for a model that has none.
"""

from __future__ import annotations

from typing import Any

from harness.errors import ConfigError
from harness.schedule.model import Schedule

__all__ = ["ASSUMPTIONS_METHOD", "cost_assumptions"]

#: Optional cost-model method: ``assumptions(schedule) -> list[str]``, one short sentence per
#: modelling assumption that moves the figures of ``schedule`` under the model (how durations are
#: derived, per-chunk durations where ``schedule.chunks_per_rank > 1``, ...).
ASSUMPTIONS_METHOD = "assumptions"


def cost_assumptions(cost: Any, schedule: Schedule) -> list[str]:
    """The sentences ``cost`` gives for ``schedule`` (its :data:`ASSUMPTIONS_METHOD`), or for a model
    without that method one naming the model and, where a rank holds several chunks, that its
    durations are per chunk.

    Raises:
        ConfigError: the method answers something other than a list of texts (names the model).
    """
    inner = getattr(cost, "inner", cost)  # a CheckedCost wraps the user's model
    method = getattr(inner, ASSUMPTIONS_METHOD, None)
    name = type(inner).__name__
    if method is None or not callable(method):
        out = [f"durations as the cost model {name} gives them, per job kind and stage"]
        if schedule.chunks_per_rank > 1:
            out.append(f"per-chunk durations: each job lasts what {name} gives its stage (one chunk), and a rank runs "
                       f"v={schedule.chunks_per_rank} chunks per micro-batch")
        return out
    value = method(schedule)
    if not isinstance(value, (list, tuple)) or not all(isinstance(x, str) for x in value):
        raise ConfigError(f"cost model {name}: {ASSUMPTIONS_METHOD}() gave {value!r:.80}, not a list of texts")
    return list(value)
