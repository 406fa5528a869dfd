"""A case's cost model and comm model as per-stage plain numbers, for a builder that plans from them
(:class:`~harness.schedule.costs.StageCosts`; registered with ``takes_costs=True``).

The schedule layer sits below the cost models (docs/architecture.md): a builder never sees a cost
model. :func:`stage_costs` asks the cost model once per stage and kind and hands the builder the
answers; :meth:`~harness.case.PipelineCase.compute_schedule` calls it for every cost-aware builder.
"""

from __future__ import annotations

import numbers
from typing import Any

from harness.errors import ConfigError
from harness.model.comm import MODELS_WITH_JOBS
from harness.schedule.costs import COMM_MODEL_NAMES, StageCosts
from harness.schedule.model import Job, JobKind

__all__ = ["stage_costs"]


def _models_memory(cost: Any) -> bool:
    """Whether ``cost`` has a memory model: its ``models_memory()``, else whether it answers
    ``memory_bytes`` and ``static_bytes`` (the rule of :func:`harness.analysis.memory.has_memory_model`)."""
    probe = getattr(cost, "models_memory", None)
    if callable(probe):
        return bool(probe())
    return callable(getattr(cost, "memory_bytes", None)) and callable(getattr(cost, "static_bytes", None))


def _whole(cost: Any, what: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(f"cost model {type(getattr(cost, 'inner', cost)).__name__}: {what} must be a whole number of bytes, got {value!r}")
    return int(value)


def stage_costs(
    cost: Any, num_stages: int, comm_model: str = "edge", *, comm: bool | None = None, memory_limit_bytes: int | None = None
) -> StageCosts:
    """The per-stage costs of ``cost`` for a pipeline of ``num_stages`` stages (``p x v``), with the
    transfer times as ``comm_model`` charges them.

    Args:
        cost: a cost model (:class:`~harness.model.cost.CostModel`); asked ``duration_ns`` once per
            stage for ``F``, ``B``, ``I``, ``W``, ``SEND_F`` and ``SEND_B``, and, where it models memory,
            ``memory_bytes`` for ``F``, ``I``, ``W`` and ``static_bytes``.
        num_stages: the stages of the schedule to build.
        comm_model: ``"edge"``, ``"stream"`` or ``"blocking"`` (transfers take the cost model's
            ``SEND_F``/``SEND_B`` times), or ``"free"`` (they take 0).
        comm: the case's ``comm`` field: ``False`` under ``stream`` or ``blocking`` inserts no
            send/receive jobs, so transfers are not charged (0), as :func:`harness.model.comm.comm_notes` says.
        memory_limit_bytes: the case's device memory per rank (bytes), or ``None``.

    Returns:
        :class:`~harness.schedule.costs.StageCosts`: durations and transfer times in ns, memory in bytes.

    Raises:
        ConfigError: an unknown comm model, a cost model's answer that is no whole number of ns or
            bytes, or memory that does not balance (see :class:`~harness.schedule.costs.StageCosts`).
    """
    if comm_model not in COMM_MODEL_NAMES:
        raise ConfigError(f"comm_model must be one of {', '.join(COMM_MODEL_NAMES)}, got {comm_model!r}")
    n = num_stages

    def ns(stage: int, kind: JobKind) -> int:
        return round(cost.duration_ns(Job(stage, kind, 0), n))  # type: ignore[no-any-return]

    f = tuple(ns(k, JobKind.F) for k in range(n))
    b = tuple(ns(k, JobKind.B) for k in range(n))
    i = tuple(ns(k, JobKind.I) for k in range(n))
    w = tuple(ns(k, JobKind.W) for k in range(n))
    charged = comm_model == "edge" or (comm_model in MODELS_WITH_JOBS and comm is not False)
    fwd = tuple(ns(k, JobKind.SEND_F) if charged and k + 1 < n else 0 for k in range(n))
    bwd = tuple(ns(k, JobKind.SEND_B) if charged and k > 0 else 0 for k in range(n))
    acts = static = None
    if _models_memory(cost):
        split = (JobKind.F, JobKind.I, JobKind.W)
        acts = tuple(tuple(_whole(cost, f"memory_bytes of {k}{kind.value}0", cost.memory_bytes(Job(k, kind, 0), n)) for kind in split)
                     for k in range(n))
        static = tuple(_whole(cost, f"static_bytes of stage {k}", cost.static_bytes(k, n)) for k in range(n))
        name = type(getattr(cost, "inner", cost)).__name__
        for k, (mf, mi, mw) in enumerate(acts):
            if mf < 0 or mi > 0 or mw > 0 or mf + mi + mw != 0:
                raise ConfigError(
                    f"cost model {name}: stage {k}'s forward allocates {mf:,} bytes and its I and W free {-mi:,} and {-mw:,} "
                    "(memory_bytes); a split backward must free what the forward allocated, I and W each freeing >= 0 bytes"
                )
    return StageCosts(
        forward_ns=f, backward_ns=b, backward_input_ns=i, backward_weight_ns=w, forward_transfer_ns=fwd, backward_transfer_ns=bwd,
        comm_model=comm_model, activation_bytes=acts,  # type: ignore[arg-type]
        static_bytes=static, memory_limit_bytes=memory_limit_bytes,
    )
