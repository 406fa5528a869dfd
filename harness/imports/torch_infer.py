"""Rebuild ``Schedule1F1B``'s forward and backward actions from operator events.

``Schedule1F1B`` (``PipelineScheduleSingle._step_microbatches`` in pytorch/pytorch
``torch/distributed/pipelining/schedules.py``) wraps no action in a
``record_function``: its trace holds only the step, optimizer, operator and
``c10d::``/``gloo:`` events. The rule used here, on the operators directly inside
each ``ProfilerStep#N`` of the rank's main thread (asynchronous ``gloo:`` spans left
out), in start order:

1. ``Optimizer.*`` ranges and ``aten::tensor_split`` (the micro-batch split) are
   skipped, and so is everything after the step's last backward operator (gradient
   scaling, the optimizer, the loss print);
2. a **backward** operator is ``autograd::engine::evaluate_function: *`` or
   ``aten::ones_like`` (the gradient seed of the last stage's loss); a **boundary** is
   any ``c10d::`` operator (a send or receive posted between actions);
3. a forward action is a maximal run of other operators (``aten::detach`` after it
   belongs to its send and is dropped); a backward action is a maximal run of
   backward operators (plus a trailing ``aten::detach_``);
4. the ``n``-th forward run is ``F`` of micro-batch ``n`` and the ``n``-th backward run
   ``B`` of micro-batch ``n`` (1F1B runs micro-batches in order);
5. the result is accepted only when every step has as many forward as backward
   runs, the same number in every step, and the rank's order is 1F1B's: ``min(m, N - r)``
   forwards first, then B/F alternating, then the remaining Bs (rank ``r`` of ``N``).
   Otherwise the rank is refused (with a message naming file, step and what was
   found): a wrong split would give wrong figures silently.

The actions have no range, so no wait is known: a job's time runs from its first
operator's start to its last operator's end. They are marked ``inferred``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.errors import InputFormatError

__all__ = ["infer_1f1b", "one_f_one_b_order"]

_BACKWARD = ("autograd::engine::evaluate_function", "aten::ones_like")
_SKIP = ("Optimizer.", "aten::tensor_split")


def one_f_one_b_order(rank: int, world: int, m: int) -> list[str]:
    """The compute order 1F1B runs on ``rank`` of ``world`` (kinds only): ``min(m, N-r)``
    forwards, then B and F alternating, then the remaining Bs (Narayanan et al.,
    arXiv:2104.04473 §2.2.1; PyTorch's ``Schedule1F1B``)."""
    warm = min(m, world - rank)
    order = ["F"] * warm
    f = warm
    for _ in range(m):
        order.append("B")
        if f < m:
            order.append("F")
            f += 1
    return order


def infer_1f1b(path: Path, rank: int, world: int, cpu: list[tuple[int, int, str, Any]],
               steps: dict[int, tuple[int, int]]) -> list[Any]:
    """The F/B actions of a trace without action ranges, rebuilt by the module's rule.

    Args:
        path: the file (for messages).
        rank, world: the rank and world size.
        cpu: the file's synchronous complete events ``(start, end, name, tid)``, absolute
            ns, sorted by start then longest first.
        steps: ``ProfilerStep#N`` -> (start, end).

    Returns:
        :class:`~harness.imports.torch.TorchAction` list, or ``[]`` when the trace holds no
        operators that look like pipeline work (no forward and no backward operator).

    Raises:
        InputFormatError: operators were found but do not split into a 1F1B order
            (names the file, the step and the counts found).
    """
    from harness.actions.torch_action import TorchAction

    out: list[TorchAction] = []
    counts: set[int] = set()
    for step, (a, b) in sorted(steps.items()):
        step_tid = next((c[3] for c in cpu if c[0] == a and c[1] == b), None)
        top: list[tuple[int, int, str]] = []
        cur_end = None
        for s, e, name, tid in cpu:
            if tid != step_tid or s < a or e > b or (s == a and e == b):
                continue
            if cur_end is not None and s < cur_end:
                continue  # nested inside the current direct child
            cur_end = e
            top.append((s, e, name))
        last_bwd = max((i for i, t in enumerate(top) if t[2].startswith(_BACKWARD)), default=-1)
        runs: list[list[Any]] = []  # [kind, first start, last end]
        for s, e, name in top[: last_bwd + 1]:
            if name.startswith(_SKIP):
                continue
            if name.startswith("c10d::"):
                runs.append(["|", s, e])
                continue
            kind = "B" if name.startswith(_BACKWARD) else "F"
            if name == "aten::detach_" and runs and runs[-1][0] == "B":
                runs[-1][2] = e
                continue
            if name == "aten::detach" and runs and runs[-1][0] == "F":
                continue
            if runs and runs[-1][0] == kind:
                runs[-1][2] = e
            else:
                runs.append([kind, s, e])
        acts = [r for r in runs if r[0] != "|"]
        if not acts:
            continue
        nf = sum(1 for r in acts if r[0] == "F")
        nb = len(acts) - nf
        kinds = [r[0] for r in acts]
        if nf != nb or kinds != one_f_one_b_order(rank, world, nf):
            raise InputFormatError(
                f"{path}: rank {rank}, step {step}: no pipeline action ranges, and the operators do not split into "
                f"a 1F1B order ({nf} forward and {nb} backward runs: {''.join(kinds)[:80]}); only Schedule1F1B's "
                "order is rebuilt from operators. Traces that mark actions: ScheduleInterleaved1F1B, "
                "ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble, ScheduleDualPipeV, ScheduleLoopedBFS (PP:<action>) "
                "and ScheduleGPipe (Forward i / Backward i)"
            )
        counts.add(nf)
        nxt = {"F": 0, "B": 0}
        for kind, s, e in acts:
            mb = nxt[kind]
            nxt[kind] += 1
            out.append(TorchAction(rank, step, f"{rank}{kind}{mb}", rank, kind, mb, s, e, s, inferred=True))
    if len(counts) > 1:
        raise InputFormatError(f"{path}: rank {rank}: the rebuilt 1F1B steps have different micro-batch counts "
                               f"({', '.join(map(str, sorted(counts)))}); refusing to guess which is right")
    return out
