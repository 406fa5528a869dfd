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
from harness.schedule.chains import CHAINS_PARAM, chains_of, stage_microbatches
from harness.schedule.model import Schedule

__all__ = ["ASSUMPTIONS_METHOD", "DURATION_BASIS_PREFIXES", "chained_durations", "cost_assumptions"]

#: Optional cost-model method: ``assumptions(schedule) -> list[str]``, one short sentence per
#: modelling assumption that moves the figures of ``schedule`` under the model (how durations are
#: derived, per-chunk durations where ``schedule.chunks_per_rank > 1``, ...).
ASSUMPTIONS_METHOD = "assumptions"

#: How a cost model's sentence on what one job's duration covers begins where a rank holds several
#: stages: several chunks (``per-chunk``), or DualPipe's two directions (``per-stage``,
#: :func:`chained_durations`). ``show`` states the same in a line of its own, with the work figure, and
#: leaves these sentences out of its ``assumes:`` lines.
DURATION_BASIS_PREFIXES = ("per-chunk durations: ", "per-stage durations: ")


def chained_durations(schedule: Schedule, what: str) -> str | None:
    """For a schedule of several chains (DualPipe's two directions, :mod:`harness.schedule.chains`): the
    sentence that ``what`` (e.g. ``"F and B (stage 0: 1 and 2 ms) are"``) is one stage's, as at v=1, and
    that a rank runs ``m x (F + B)`` of work per step, not ``v x m x (F + B)``: each of its stages runs
    only its chain's micro-batches. ``None`` for a schedule of one chain."""
    if not schedule.params.get(CHAINS_PARAM):
        return None
    chains = chains_of(schedule)
    runs = stage_microbatches(schedule)
    load = [0] * schedule.num_ranks
    for stage, rank in enumerate(schedule.stage_to_rank):
        load[rank] += len(runs[stage])
    m, v = schedule.num_microbatches, schedule.chunks_per_rank
    lengths = {hi - lo for lo, hi, _, _ in chains}
    sizes = {b - a for _, _, a, b in chains}
    copy = f", 1/{lengths.pop()} of a model copy" if len(lengths) == 1 else ""
    each = f"{sizes.pop()} of the {m}" if len(sizes) == 1 else "of " + ", ".join(f"{b - a}" for _, _, a, b in chains) + f" of the {m}"
    work = ("m x (F + B)" if set(load) == {m} else
            "per rank " + ", ".join(f"{n} x (F + B)" for n in load))
    return (f"per-stage durations: {what} one stage's{copy}, as at v=1; a rank holds {v} stages across the {len(chains)} chains "
            f"(DualPipe's two directions), each stage running only its chain's micro-batches ({each}), so {work} of work per "
            "step, as a v=1 schedule's (not v x m x (F + B))")


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
        chained = chained_durations(schedule, f"the durations {name} gives are")
        if chained:
            out.append(chained)
        elif schedule.chunks_per_rank > 1:
            out.append(f"per-chunk durations: each job lasts what {name} gives its stage (one chunk), and a rank runs "
                       f"v={schedule.chunks_per_rank} chunks per micro-batch")
        return out
    value = method(schedule)
    if not isinstance(value, (list, tuple)) or not all(isinstance(x, str) for x in value):
        raise ConfigError(f"cost model {name}: {ASSUMPTIONS_METHOD}() gave {value!r:.80}, not a list of texts")
    return list(value)
