"""PyTorch's data-parallel pipeline actions as jobs: ``UNSHARD``, ``RESHARD``, ``REDUCE_GRAD``.

``torch.distributed.pipelining.schedules`` lowers a compute-only schedule for the runtime
with ``_add_unshard_reshard`` (FSDP: gather a stage's parameters before its compute, free
them after) and ``_add_reduce_grad`` (reduce a stage's gradients across data-parallel ranks
after its last ``B``/``W``); its CSV writes them as ``0UNSHARD``, ``0RESHARD``,
``0REDUCE_GRAD``. The harness keeps them as jobs (:data:`~harness.schedule.model.DATA_PARALLEL_KINDS`):

* one of each kind per stage at most, no micro-batch, on the stage's rank; an ``UNSHARD``
  comes before the stage's compute jobs, a ``RESHARD`` after them, a ``REDUCE_GRAD`` after
  its ``B``/``W`` jobs (:func:`harness.schedule.validate.check_order`);
* they run on the rank's compute stream in list order, on every backend, and last what the
  cost model's optional :data:`DATA_PARALLEL_METHOD` says: 0 ns by default; ``unshard_ns``,
  ``reshard_ns``, ``reduce_grad_ns`` on :class:`~harness.model.cost.FixedCost` and
  :class:`~harness.model.transformer.TransformerCost`;
* they are not compute: a rank's busy time, the bubble and the span bubble leave them out
  (their time is idle time of the rank, as an exposed transfer's), and the bubble
  decomposition (:mod:`harness.analysis.bubble`) counts them in ``comm`` with the transfers.
"""

from __future__ import annotations

from typing import Any

from harness.errors import ConfigError
from harness.schedule.model import Job, JobKind

__all__ = ["DATA_PARALLEL_METHOD", "data_parallel_ns"]

#: Optional method of a cost model: ``data_parallel_ns(job, num_stages) -> int``, the duration (ns)
#: of an ``UNSHARD``, ``RESHARD`` or ``REDUCE_GRAD`` job (PyTorch's FSDP/DDP actions,
#: :data:`~harness.schedule.model.DATA_PARALLEL_KINDS`). A model without it gives them 0 ns and
#: is never asked ``duration_ns`` for them (models written before these kinds existed keep
#: working); :class:`CheckedCost` applies the rule.
DATA_PARALLEL_METHOD = "data_parallel_ns"


def data_parallel_ns(cost: object, job: Job, num_stages: int) -> int:
    """The duration (ns) of data-parallel ``job`` under ``cost``: its optional
    :data:`DATA_PARALLEL_METHOD`, or 0 when it has none."""
    method = getattr(cost, DATA_PARALLEL_METHOD, None)
    return 0 if method is None else method(job, num_stages)  # type: ignore[no-any-return]


def _data_parallel_fields(obj: Any) -> None:
    """Check ``unshard_ns``, ``reshard_ns``, ``reduce_grad_ns`` of a cost model dataclass (durations >= 0)."""
    from harness.model.values import _set_whole_ns

    for name in _DP_FIELDS.values():
        _set_whole_ns(obj, name)  # rounded to the nearest ns, as every duration


#: A data-parallel kind's duration field on :class:`FixedCost` and :class:`~harness.model.transformer.TransformerCost`.
_DP_FIELDS = {JobKind.UNSHARD: "unshard_ns", JobKind.RESHARD: "reshard_ns", JobKind.REDUCE_GRAD: "reduce_grad_ns"}


def _dp_duration(obj: Any, job: Job) -> int:
    field = _DP_FIELDS.get(job.kind)
    if field is None:
        raise ConfigError(f"data_parallel_ns({job}): {job.kind.value} is not UNSHARD, RESHARD or REDUCE_GRAD")
    return int(getattr(obj, field))


def _drop_zero_dp_fields(d: dict[str, Any]) -> dict[str, Any]:
    """``describe()`` without the data-parallel durations left at 0 and the overlap fields left
    unset (results stay as before these fields existed)."""
    for name in _DP_FIELDS.values():
        if d.get(name) == 0:
            d.pop(name)
    for name in ("overlap_ns", "overlap_ratio"):
        if d.get(name, 0) is None:
            d.pop(name)
    return d
