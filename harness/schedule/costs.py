"""Per-stage costs as plain numbers, for a builder that plans from them (a *cost-aware* builder).

A builder sits below the cost models (docs/architecture.md): it never sees a
:class:`~harness.model.cost.CostModel`. A builder registered with ``takes_costs=True``
(:func:`harness.schedule.registry.register`) is called with ``costs=StageCosts(...)``: the
durations (ns), transfer times (ns) and memory (bytes) of each stage, as the case's cost model and
comm model give them. :func:`harness.model.stage_costs.stage_costs` makes them from a cost model;
:meth:`~harness.case.PipelineCase.compute_schedule` passes them to the builder; a script that calls
:func:`~harness.schedule.registry.build_schedule` itself passes them as ``costs=``.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass

from harness.errors import ConfigError

__all__ = ["COMM_MODEL_NAMES", "StageCosts"]

#: The communication models a :class:`StageCosts` may name: :data:`harness.model.comm.COMM_MODELS`
#: (which owns their meaning; the schedule layer cannot import it, ``tests/test_zb_auto.py`` checks they agree).
COMM_MODEL_NAMES = ("free", "edge", "stream", "blocking")


def _ints(name: str, values: object, n: int | None, *, signed: bool = False) -> tuple[int, ...]:
    """``values`` as a tuple of whole numbers (>= 0 unless ``signed``), ``n`` of them when given."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise ConfigError(f"stage costs: {name} must be a sequence with one value per stage, got {values!r}")
    out = []
    for k, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            if isinstance(v, numbers.Real) and not isinstance(v, bool) and float(v).is_integer():
                v = int(float(v))
            else:
                raise ConfigError(f"stage costs: {name}[{k}] must be a whole number, got {v!r}")
        if not signed and v < 0:
            raise ConfigError(f"stage costs: {name}[{k}] must be >= 0, got {v!r}")
        out.append(int(v))
    if n is not None and len(out) != n:
        raise ConfigError(f"stage costs: {name} has {len(out)} values for {n} stages; give one per stage")
    return tuple(out)


@dataclass(frozen=True)
class StageCosts:
    """What a cost-aware builder plans from: per stage (``p x v`` stages, stage 0 first) its job
    durations, the transfer time of its outputs, and optionally its memory.

    Attributes:
        forward_ns, backward_ns, backward_input_ns, backward_weight_ns: per stage, the duration
            (ns) of an ``F``, a full ``B``, an ``I`` (backward for inputs) and a ``W`` (backward
            for weights).
        forward_transfer_ns: per stage ``k``, the time (ns) stage ``k``'s forward output takes to
            reach stage ``k+1`` (the cost model's ``SEND_F`` of stage ``k``) as charged under
            ``comm_model``; 0 for the last stage, and for every stage under ``free``.
        backward_transfer_ns: per stage ``k``, the time (ns) stage ``k``'s input gradient takes to
            reach stage ``k-1`` (``SEND_B`` of stage ``k``); 0 for stage 0, and under ``free``.
            Both apply only between stages on different ranks (the builder knows its placement).
        comm_model: the model of the case the times are charged under: ``"edge"`` (a delay on
            the dependency, as the published simulators), ``"stream"`` (send/receive jobs on a
            FIFO comm stream per pair of ranks), ``"blocking"`` (send/receive jobs on the compute
            streams, a send meeting its receive) — for these two each transfer's own time,
            queueing and waiting not included — or ``"free"`` (transfers cost nothing; the times are 0).
        activation_bytes: per stage ``(mem_F, mem_I, mem_W)``, the signed activation bytes an
            ``F`` allocates (>= 0) and an ``I`` and a ``W`` free (<= 0, summing with ``mem_F``
            to 0; the zero-bubble simulators' ``mem_f``, ``mem_b``, ``mem_w``), or ``None`` when
            the cost model has no memory model.
        static_bytes: per stage, the bytes it holds all the time (parameters, gradients,
            optimizer state), or ``None`` without a memory model.
        memory_limit_bytes: the device memory per rank the case allows (bytes;
            ``PipelineCase.memory_limit_bytes``), or ``None``. Not a cost: what a builder may
            plan within.

    Raises:
        ConfigError: lists of different lengths, a negative duration or transfer time, a value
            that is not a whole number, an unknown ``comm_model``, memory that does not balance
            (``mem_F + mem_I + mem_W != 0``) or frees on a forward, or a non-positive limit.
    """

    forward_ns: tuple[int, ...]
    backward_ns: tuple[int, ...]
    backward_input_ns: tuple[int, ...]
    backward_weight_ns: tuple[int, ...]
    forward_transfer_ns: tuple[int, ...]
    backward_transfer_ns: tuple[int, ...]
    comm_model: str = "edge"
    activation_bytes: tuple[tuple[int, int, int], ...] | None = None
    static_bytes: tuple[int, ...] | None = None
    memory_limit_bytes: int | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        f = _ints("forward_ns", self.forward_ns, None)
        n = len(f)
        if n == 0:
            raise ConfigError("stage costs: forward_ns is empty; give one value per stage")
        set_(self, "forward_ns", f)
        for name in ("backward_ns", "backward_input_ns", "backward_weight_ns", "forward_transfer_ns", "backward_transfer_ns"):
            set_(self, name, _ints(name, getattr(self, name), n))
        if self.comm_model not in COMM_MODEL_NAMES:
            raise ConfigError(f"stage costs: comm_model must be one of {', '.join(COMM_MODEL_NAMES)}, got {self.comm_model!r}")
        if self.comm_model == "free" and any(self.forward_transfer_ns + self.backward_transfer_ns):
            raise ConfigError("stage costs: comm_model 'free' charges no transfer, so the transfer times must be 0")
        if self.activation_bytes is not None:
            rows = []
            if isinstance(self.activation_bytes, (str, bytes)) or not isinstance(self.activation_bytes, Sequence):
                raise ConfigError(f"stage costs: activation_bytes must be one (mem_F, mem_I, mem_W) per stage, got {self.activation_bytes!r}")
            for k, row in enumerate(self.activation_bytes):
                mf, mi, mw = _ints(f"activation_bytes[{k}]", row, 3, signed=True)
                if mf < 0 or mi > 0 or mw > 0 or mf + mi + mw != 0:
                    raise ConfigError(
                        f"stage costs: activation_bytes[{k}] = {(mf, mi, mw)}: a forward allocates (mem_F >= 0), an I and a W "
                        "free (mem_I, mem_W <= 0), and together they free what the forward allocated (sum 0)"
                    )
                rows.append((mf, mi, mw))
            if len(rows) != n:
                raise ConfigError(f"stage costs: activation_bytes has {len(rows)} entries for {n} stages; give one per stage")
            set_(self, "activation_bytes", tuple(rows))
        if self.static_bytes is not None:
            set_(self, "static_bytes", _ints("static_bytes", self.static_bytes, n))
        limit = self.memory_limit_bytes
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, numbers.Integral) or limit <= 0):
            raise ConfigError(f"stage costs: memory_limit_bytes must be a positive whole number of bytes, got {limit!r}")

    @property
    def num_stages(self) -> int:
        """The stages described (``p x v``)."""
        return len(self.forward_ns)

    @property
    def models_memory(self) -> bool:
        """Whether per-job activation bytes are given."""
        return self.activation_bytes is not None

    @classmethod
    def uniform(
        cls,
        num_stages: int,
        forward_ns: int,
        backward_input_ns: int,
        backward_weight_ns: int,
        transfer_ns: int = 0,
        comm_model: str = "edge",
    ) -> StageCosts:
        """Every stage alike: ``F``, ``I`` and ``W`` durations (ns; ``B = I + W``) and one transfer
        time (ns) between neighbouring stages, charged under ``comm_model`` (0 under ``free``); no
        memory model.

        Raises:
            ConfigError: see the class.
        """
        if isinstance(num_stages, bool) or not isinstance(num_stages, numbers.Integral) or num_stages < 1:
            raise ConfigError(f"stage costs: num_stages must be a positive integer, got {num_stages!r}")
        n = int(num_stages)
        charged = 0 if comm_model == "free" else transfer_ns
        return cls(
            forward_ns=(forward_ns,) * n,
            backward_ns=(backward_input_ns + backward_weight_ns,) * n,
            backward_input_ns=(backward_input_ns,) * n,
            backward_weight_ns=(backward_weight_ns,) * n,
            forward_transfer_ns=(charged,) * (n - 1) + (0,),
            backward_transfer_ns=(0,) + (charged,) * (n - 1),
            comm_model=comm_model,
        )
