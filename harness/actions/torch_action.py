"""One pipeline action of one rank as PyTorch's pipelining runtime ran it: what
:mod:`~harness.imports.torch_trace` reads from a trace's ``PP:`` ranges, :mod:`~harness.imports.torch_infer`
rebuilds from operator events, and the ``torch`` backend (:mod:`harness.distributed.torch_records`)
timed with its hooks.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TorchAction"]


@dataclass(frozen=True)
class TorchAction:
    """One pipeline action of one rank, as the trace shows it.

    Attributes:
        rank: the pipeline rank (a trace's ``distributedInfo.rank``).
        step: the step it lies in (a trace's ``ProfilerStep#N``).
        name: the range's name (``"PP:1F0"``, ``"Forward 0"``; an inferred action's is its label).
        stage: global stage index.
        kind: ``F``, ``B``, ``I``, ``W``, ``SEND_F``, ``RECV_F``, ``SEND_B``, ``RECV_B``,
            ``UNSHARD``, ``RESHARD`` or ``REDUCE_GRAD``; ``OPT`` (a stage's optimizer step: the
            ``torch`` backend's own ``PP:<stage>OPT`` range, which PyTorch never writes).
        microbatch: micro-batch index, ``None`` for the host actions and ``OPT``.
        start_ns, end_ns: the range, absolute ns (Unix epoch, the rank's clock).
        compute_start_ns: start of its first operator (compute actions), else ``start_ns``;
            ``compute_start_ns - start_ns`` is the wait for its input (:attr:`wait_ns`).
        enqueue_ns: with GPU activity, the CPU range's duration (the job times are then the
            device range's); else 0.
        inferred: rebuilt from operator events (Schedule1F1B), not read from a range.
        group: index of the ``OVERLAP_F_B`` range it came from on its rank, else ``None``.
    """

    rank: int
    step: int
    name: str
    stage: int
    kind: str
    microbatch: int | None
    start_ns: int
    end_ns: int
    compute_start_ns: int
    enqueue_ns: int = 0
    inferred: bool = False
    group: int | None = None

    @property
    def wait_ns(self) -> int:
        """ns from the range's start to its first operator (waiting for the input; 0 when none)."""
        return self.compute_start_ns - self.start_ns

    @property
    def label(self) -> str:
        """``"2F0"``, ``"0UNSHARD"``: PyTorch's ``_Action`` text."""
        return f"{self.stage}{self.kind}{'' if self.microbatch is None else self.microbatch}"
