"""The exact part of the layout search: per-stage linear models, and the DP over layer splits on the busiest stage.

For ``S`` stages holding contiguous runs of a model's transformer layers (the embedding on the first
stage and the LM head on the last, where the model has a vocabulary):

- :func:`stage_lines`: each stage's work (ns per micro-batch), static bytes and activation bytes per
  micro-batch as ``a + b x layers``, per recomputation mode, from two probes of the cost model;
- :func:`bottleneck_dp`: the split and per-stage modes that minimise the busiest stage's work, each
  stage's memory estimate within a limit (the linear-partition DP; the objective of mindformers' SAPP,
  ``toolkit/pipeline_balance``);
- :func:`compositions` and :func:`space_size`: every split, and how many candidates they make;
- :func:`layout_text` and :func:`even_counts`: a split as a Megatron-Core layout string, and the even split.

:mod:`harness.choose.layout_search` drives them and judges candidates on the simulator.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from harness.model.stage_costs import stage_costs
from harness.model.transformer import TransformerCost

__all__ = ["StageLines", "bottleneck_dp", "compositions", "even_counts", "layout_text", "space_size", "stage_lines"]


def layout_text(counts: Sequence[int], vocab: bool) -> str:
    """The Megatron-Core layout string of ``counts`` transformer layers per stage (stage 0 first);
    with ``vocab`` the embedding on the first stage and the LM head on the last (``"Et*7|t*6|t*5L"``)."""
    last = len(counts) - 1
    parts = []
    for k, n in enumerate(counts):
        body = f"t*{n}" if n > 1 else "t" * n
        parts.append(("E" if vocab and k == 0 else "") + body + ("L" if vocab and k == last else ""))
    return "|".join(parts)


def stage_lows(num_stages: int, has_head: bool) -> tuple[int, ...]:
    """The fewest transformer layers each of ``num_stages`` stages may hold: one, and none on the last stage
    where it holds the LM head (``has_head``: the model has a vocabulary)."""
    return tuple(0 if (has_head and k == num_stages - 1 and num_stages > 1) else 1 for k in range(num_stages))


def too_few_layers(num_layers: int, has_head: bool, p: int, num_stages: int) -> str | None:
    """Why ``num_layers`` transformer layers cannot fill ``num_stages`` stages at ``p`` ranks (:func:`stage_lows`'
    rule, in words), or ``None`` where they can."""
    needed = sum(stage_lows(num_stages, has_head))
    if num_layers >= needed:
        return None
    rule = ("every stage but the last needs at least one transformer layer (the last may hold the LM head alone)"
            if has_head and num_stages > 1 else "every stage needs at least one transformer layer")
    return (f"{num_layers} transformer layer(s) cannot fill {num_stages} stages (p={p} x {num_stages // p} chunk(s)): "
            f"{rule}, so at least {needed} are needed")


def even_counts(num_layers: int, num_stages: int) -> tuple[int, ...]:
    """``num_layers`` split as evenly as possible over ``num_stages``, the extra layers on the middle
    stages (the first and last hold the embedding and the LM head)."""
    q, r = divmod(num_layers, num_stages)
    start = (num_stages - r) // 2
    return tuple(q + (1 if start <= k < start + r else 0) for k in range(num_stages))


@dataclass(frozen=True)
class StageLines:
    """Per stage and mode, ``value = a + b * layers``: work (ns per micro-batch), static and activation bytes."""

    work: dict[str, tuple[tuple[int, int], ...]]
    static: dict[str, tuple[tuple[int, int], ...]]
    act: dict[str, tuple[tuple[int, int], ...]]

    @staticmethod
    def at(pair: tuple[int, int], n: int) -> int:
        """The value of ``pair = (a, b)`` at ``n`` layers: ``a + b n``."""
        return pair[0] + pair[1] * n


def stage_lines(base: TransformerCost, num_stages: int, vocab: bool, splits_backward: bool, modes: Sequence[str]) -> StageLines:
    """Each stage's work per micro-batch (ns: F + B, or F + I + W where ``splits_backward``), static bytes and
    activation bytes per micro-batch, as exact linear functions of its transformer layers, per mode: two probes,
    every stage holding one layer and then two (:func:`~harness.model.stage_costs.stage_costs` of ``base``)."""
    s = num_stages
    split = splits_backward
    work: dict[str, tuple[tuple[int, int], ...]] = {}
    static: dict[str, tuple[tuple[int, int], ...]] = {}
    act: dict[str, tuple[tuple[int, int], ...]] = {}
    for mode in modes:
        probes = []
        for n in (1, 2):
            cost = replace(base, num_layers=n * s, layout=layout_text((n,) * s, vocab), layers_per_stage=None,
                           recompute=mode)
            probes.append(stage_costs(cost, s, "free"))
        w = [[(f + i + wt) if split else (f + b) for f, b, i, wt in
              zip(pc.forward_ns, pc.backward_ns, pc.backward_input_ns, pc.backward_weight_ns)] for pc in probes]
        st = [list(pc.static_bytes or (0,) * s) for pc in probes]
        ac = [[a[0] for a in (pc.activation_bytes or ((0, 0, 0),) * s)] for pc in probes]
        work[mode] = tuple((2 * w[0][k] - w[1][k], w[1][k] - w[0][k]) for k in range(s))
        static[mode] = tuple((2 * st[0][k] - st[1][k], st[1][k] - st[0][k]) for k in range(s))
        act[mode] = tuple((2 * ac[0][k] - ac[1][k], ac[1][k] - ac[0][k]) for k in range(s))
    return StageLines(work, static, act)


def bottleneck_dp(lin: StageLines, lows: Sequence[int], num_layers: int, modes: Sequence[str], inflight: Sequence[int] | None,
                  limit: int | None, stages_per_rank: int) -> tuple[int, tuple[int, ...], tuple[str, ...]] | None:
    """The split and per-stage modes minimising the busiest stage's work per micro-batch (ns), each stage's
    memory estimate within ``limit / stages_per_rank``; ``None`` when no split meets it.

    ``best[k][l]``: the least bottleneck of stages ``0..k-1`` holding ``l`` layers. ``O(S L^2 |modes|)``.
    """
    s = len(lows)
    inf = math.inf
    best: list[list[float]] = [[inf] * (num_layers + 1) for _ in range(s + 1)]
    how: list[list[tuple[int, str] | None]] = [[None] * (num_layers + 1) for _ in range(s + 1)]
    best[0][0] = 0
    rest_low = [sum(lows[k:]) for k in range(s + 1)]
    cap = None if limit is None else limit / stages_per_rank
    for k in range(s):
        # the cheapest feasible mode per layer count of this stage
        options: list[tuple[float, int, str]] = []
        for n in range(lows[k], num_layers - rest_low[k + 1] + 1):
            pick: tuple[float, str] | None = None
            for mode in modes:
                if cap is not None and inflight is not None:
                    held = StageLines.at(lin.static[mode][k], n) + inflight[k] * StageLines.at(lin.act[mode][k], n)
                    if held > cap:
                        continue
                w = StageLines.at(lin.work[mode][k], n)
                if pick is None or w < pick[0]:
                    pick = (w, mode)
            if pick is not None:
                options.append((pick[0], n, pick[1]))
        row, nxt, nhow = best[k], best[k + 1], how[k + 1]
        for used in range(num_layers + 1):
            here = row[used]
            if here == inf:
                continue
            for work, n, mode in options:
                total = used + n
                if total > num_layers:
                    break
                value = here if here > work else work
                if value < nxt[total]:
                    nxt[total] = value
                    nhow[total] = (n, mode)
    if best[s][num_layers] == inf:
        return None
    counts: list[int] = []
    picked: list[str] = []
    left = num_layers
    for k in range(s, 0, -1):
        step = how[k][left]
        assert step is not None
        counts.append(step[0])
        picked.append(step[1])
        left -= step[0]
    return int(best[s][num_layers]), tuple(reversed(counts)), tuple(reversed(picked))


def space_size(num_layers: int, lows: Sequence[int], modes: int) -> int:
    free = num_layers - sum(lows)
    return math.comb(free + len(lows) - 1, len(lows) - 1) * modes ** len(lows)


def compositions(total: int, lows: Sequence[int]) -> Any:
    """Every split of ``total`` layers with stage ``k`` holding at least ``lows[k]``."""
    if len(lows) == 1:
        if total >= lows[0]:
            yield (total,)
        return
    for n in range(lows[0], total - sum(lows[1:]) + 1):
        for rest in compositions(total - n, lows[1:]):
            yield (n, *rest)
