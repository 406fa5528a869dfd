"""Test oracle: the zero-bubble repository's automatic scheduler for one chunk per rank.

Transcribed from sail-sg/zero-bubble-pipeline-parallelism,
``megatron/core/pipeline_parallel/zerobubble/scheduler/zb.py`` at commit
``39f2c186a27580b7051eb51e0f651e1efd0a8170`` (2025-05-07): ``Graph.get_id``,
``get_stage``, ``get_cost``, ``get_mem``, ``build_graph``, ``manual_order``,
``initial_solution`` and the per-stage ordering of ``create_scheduled_nodes``.
The algorithm is the heuristic of Qi et al., "Zero Bubble Pipeline Parallelism"
(ICLR'24, arXiv:2401.10241, §3.1 "Heuristic algorithm").

What changed, and nothing else:

- no ``torch`` / ``pulp`` imports: ``Graph.precede`` and ``requires_order`` (used
  only by the ILP, which the repository disables) and ``print_detail`` are left out;
  ``create_scheduled_nodes`` returns ``(kind, microbatch)`` pairs instead of
  ``ScheduledNode`` objects, with the repository's ``B`` (backward for inputs)
  written ``"I"``;
- :class:`GraphConfig` keeps only the fields ``zb.py`` reads, and does not assert
  that costs are ``float`` (integer ns compare exactly; the runtime's ``float()``
  of integer microseconds is exact too);
- :func:`reference_schedule` is a wrapper of ours around ``create_schedule``.

- ``initial_solution`` ignores ``print_result`` (the repository prints a timeline).

The statements of ``manual_order`` (including its ``TODO`` comments, the
``ValueError("Cannot fit memory")`` and the final ``assert`` checks) are kept in
the repository's order so that its behaviour, ties and failures included, is the
repository's.

License of the transcribed code: the repository's ``LICENSE`` (which applies to ``zb.py``), whose notice
follows as that license asks:

    Copyright (c) 2022, NVIDIA CORPORATION. All rights reserved.

    Redistribution and use in source and binary forms, with or without
    modification, are permitted provided that the following conditions
    are met:
     * Redistributions of source code must retain the above copyright
       notice, this list of conditions and the following disclaimer.
     * Redistributions in binary form must reproduce the above copyright
       notice, this list of conditions and the following disclaimer in the
       documentation and/or other materials provided with the distribution.
     * Neither the name of NVIDIA CORPORATION nor the names of its
       contributors may be used to endorse or promote products derived
       from this software without specific prior written permission.

    THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS ``AS IS'' AND ANY
    EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE
    IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR
    PURPOSE ARE DISCLAIMED.  IN NO EVENT SHALL THE COPYRIGHT OWNER OR
    CONTRIBUTORS BE LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL,
    EXEMPLARY, OR CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT LIMITED TO,
    PROCUREMENT OF SUBSTITUTE GOODS OR SERVICES; LOSS OF USE, DATA, OR
    PROFITS; OR BUSINESS INTERRUPTION) HOWEVER CAUSED AND ON ANY THEORY
    OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY, OR TORT
    (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE
    OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.
"""

# ruff: noqa: UP006, UP045, B011 - statements and annotations as in the repository

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import List, Optional, Set  # noqa: UP035 - the repository's annotations, kept

__all__ = ["Graph", "GraphConfig", "initial_solution", "reference_schedule"]

SOURCE = "sail-sg/zero-bubble-pipeline-parallelism megatron/core/pipeline_parallel/zerobubble/scheduler/zb.py"
COMMIT = "39f2c186a27580b7051eb51e0f651e1efd0a8170"


@dataclass
class GraphConfig:
    """The fields of the repository's ``GraphConfig`` (``scheduler/graph.py``) that
    ``zb.py`` reads. Costs per stage (any time unit; ns here), memory per stage in any
    unit, signed as allocated (``mem_f > 0``) or freed (``mem_b``, ``mem_w <= 0``),
    ``mem_f + mem_b + mem_w == 0``; ``max_mem`` per stage, or ``None`` for
    ``3 m mem_f`` (no limit in effect)."""

    mem_f: List[float]
    mem_b: List[float]
    mem_w: List[float]
    max_mem: Optional[List[float]]
    cost_f: List[float]
    cost_b: List[float]
    cost_w: List[float]
    cost_comm: float = 0.0


@dataclass
class Graph:
    nstages: int
    nmb: int
    nnodes: int
    config: GraphConfig
    parents: List[Set[int]] = None  # type: ignore[assignment]
    name: List[str] = None  # type: ignore[assignment]

    # ID mapping:
    # F[stage][minibatch]: 0..STAGE* MB
    # B[stage][minibatch]: STAGE* MB .. 2 * STAGE * MB
    # W[stage][minibatch]: 2 * STAGE* MB .. 3 * STAGE * MB

    def get_id(self, type, stage, mb):
        return type * (self.nstages * self.nmb) + stage * self.nmb + mb

    def get_stage(self, id):
        return (id // self.nmb) % self.nstages

    def get_cost(self, id):
        type = id // (self.nstages * self.nmb)
        stage = self.get_stage(id)
        return [self.config.cost_f[stage], self.config.cost_b[stage], self.config.cost_w[stage]][type]

    def get_mem(self, id):
        type = id // (self.nstages * self.nmb)
        stage = self.get_stage(id)
        return [self.config.mem_f[stage], self.config.mem_b[stage], self.config.mem_w[stage]][type]

    @classmethod
    def build_graph(cls, nstages, nmb, config):
        nnodes = nstages * nmb * 3
        g = Graph(nstages=nstages, nmb=nmb, nnodes=nnodes, config=config)
        parents = []
        name = []
        for type in range(3):
            for stage in range(nstages):
                for mb in range(nmb):
                    p = set()
                    if type == 0:
                        name.append(f'F{mb}')
                        if stage > 0:
                            p.add(g.get_id(type, stage - 1, mb))
                        if mb > 0:
                            p.add(g.get_id(type, stage, mb - 1))
                    elif type == 1:
                        name.append(f'B{mb}')
                        if stage == nstages - 1:
                            p.add(g.get_id(0, stage, mb))
                        else:
                            p.add(g.get_id(type, stage + 1, mb))
                        if mb > 0:
                            p.add(g.get_id(type, stage, mb - 1))
                    elif type == 2:
                        name.append(f'W{mb}')
                        p.add(g.get_id(1, stage, mb))
                        if mb > 0:
                            p.add(g.get_id(type, stage, mb - 1))
                    else:
                        assert False
                    parents.append(p)

        g.name = name
        g.parents = parents
        return g

    # Manual ordering producing this kind of schedule:
    # fffffffbfbfbfbfbfbwbwbwbwbwbwbwwwwww
    #  fffffbfbfbfbfbfbfbfbwbwbwbwbwwwwwwww
    #   fffbfbfbfbfbfbfbfbfbfbwbwbwwwwwwwwww
    #    fbfbfbfbfbfbfbfbfbfbfbfbwwwwwwwwwwww
    # Returns the order index of each node on its own stage
    def manual_order(
        self, allow_bubble_before_first_b=False, prioritize_b=False, no_bubble_greedy=True
    ):
        order = [0] * self.nnodes
        f = [0] * self.nstages
        b = [0] * self.nstages
        w = [0] * self.nstages
        o = [0] * self.nstages
        m = [0] * self.nstages
        e = [0] * self.nstages
        t = [0] * self.nnodes
        max_mem = self.config.max_mem or [
            self.get_mem(self.get_id(0, stage, 0)) * self.nmb * 3 for stage in range(self.nstages)]
        comm = self.config.cost_comm
        order_str = [""] * self.nstages
        stage_bubble = [0] * self.nstages

        def get_max_bubble():
            max_bubble = 0
            for bb in stage_bubble:
                max_bubble = max(max_bubble, bb)
            return max_bubble

        def put(stage_j, type_k):
            if type_k == 0:
                _i = f[stage_j]
            elif type_k == 1:
                _i = b[stage_j]
            else:
                _i = w[stage_j]
            _j = stage_j
            _id = self.get_id(type_k, _j, _i)
            _mem = self.get_mem(_id)
            _cost = self.get_cost(_id)
            # TODO
            # assert m[_j] + _mem <= max_mem[stage_j]

            tmp = e[_j] + _cost
            no_bubble = tmp
            if _j > 0 and type_k == 0:
                tmp = max(tmp, t[self.get_id(0, _j - 1, _i)] + comm + _cost)
            if _j < self.nstages - 1 and type_k == 1:
                tmp = max(tmp, t[self.get_id(1, _j + 1, _i)] + comm + _cost)
            if f[_j] > 0:
                stage_bubble[_j] += tmp - no_bubble
            e[_j] = tmp
            t[_id] = tmp
            m[_j] += _mem
            order[_id] = o[_j]
            if type_k == 0:
                f[_j] += 1
            elif type_k == 1:
                b[_j] += 1
            else:
                w[_j] += 1
            o[_j] += 1
            fbw = "fbw"
            order_str[stage_j] += fbw[type_k]

        for i in range(self.nmb):
            if i == 0:
                for j in range(self.nstages):
                    put(j, 0)
                f_required = [0] * self.nstages
                last_t = 0
                for j in range(self.nstages - 1, -1, -1):
                    if j == self.nstages - 1:
                        last_t = t[self.get_id(0, j, i)] + self.get_cost(self.get_id(1, j, i))
                        continue
                    mem = m[j]
                    cost = e[j]
                    while True:
                        f_id = self.get_id(0, j, f[j] + f_required[j])
                        if f[j] + f_required[j] < self.nmb and mem + self.get_mem(f_id) <= max_mem[j]:
                            if allow_bubble_before_first_b:
                                if cost + self.get_cost(f_id) > last_t + comm:
                                    break
                            else:
                                if cost >= last_t + comm:
                                    break
                            mem += self.get_mem(f_id)
                            cost += self.get_cost(f_id)
                            f_required[j] += 1
                        else:
                            break
                    last_t = max(cost, last_t + comm) + self.get_cost(self.get_id(1, j, i))
                for j in range(self.nstages):
                    while j > 0 and f_required[j] > 0 and f_required[j] >= f_required[j - 1] and f[j] + f_required[
                        j] < self.nmb:
                        f_required[j] -= 1
                for j in range(self.nstages):
                    for _ in range(f_required[j]):
                        put(j, 0)
                for j in range(self.nstages - 1, -1, -1):
                    put(j, 1)
                continue
            f_required = [0] * self.nstages
            for j in range(self.nstages):
                if f[j] >= self.nmb:
                    continue
                if j + 1 < self.nstages and f[j] >= f[j + 1] + 2 and prioritize_b:
                    next_plus_fw = (
                        e[j + 1]
                        + self.get_cost(self.get_id(0, j + 1, f[j + 1]))
                        + self.get_cost(self.get_id(1, j + 1, b[j + 1]))
                        + comm
                    )
                    if e[j] >= next_plus_fw:
                        continue
                    f_id = self.get_id(0, j, f[j])
                    f_mem = self.get_mem(f_id)
                    w_cost, w_cnt = 0, 0
                    mem_with_w = m[j] + f_mem
                    while mem_with_w > max_mem[j] and w[j] + w_cnt < b[j]:
                        w_id = self.get_id(2, j, w[j] + w_cnt)
                        w_cost += self.get_cost(w_id)
                        mem_with_w += self.get_mem(w_id)
                        w_cnt += 1
                    if e[j] + self.get_cost(f_id) + w_cost <= next_plus_fw:
                        f_required[j] = 1
                        continue

                    w_cost, w_cnt = 0, 0
                    # mem_with_w = m[j]
                    # while w[j] + w_cnt < b[j]:
                    #     w_id = self.get_id(2, j, w[j] + w_cnt)
                    #     w_cost += self.get_cost(w_id)
                    #     mem_with_w += self.get_mem(w_id)
                    #     w_cnt += 1
                    # if e[j] + w_cost >= next_plus_fw:
                    #     continue
                    if next_plus_fw - (e[j] + w_cost) <= get_max_bubble() - stage_bubble[j]:
                        # TODO: can sample here
                        continue
                f_required[j] = 1
            for j in range(self.nstages - 2, -1, -1):
                f_required[j] = min(f_required[j], f_required[j + 1])
            for j in range(self.nstages):
                if f_required[j] == 0:
                    continue
                f_id = self.get_id(0, j, f[j])
                mem = self.get_mem(f_id)
                while m[j] + mem > max_mem[j]:
                    if w[j] >= b[j]:
                        raise ValueError("Cannot fit memory")
                    put(j, 2)
                if j > 0:
                    while (
                        w[j] < b[j]
                        and e[j] + self.get_cost(self.get_id(2, j, w[j]))
                        <= t[self.get_id(0, j - 1, f[j])] + comm
                    ):
                        put(j, 2)
                    if w[j] < b[j] and e[j] < t[self.get_id(0, j - 1, f[j])] + comm:
                        # TODO: e[j] + self.get_cost(self.get_id(2, j, w[j])) > t[self.get_id(0, j - 1, f[j])] + comm
                        if (
                            t[self.get_id(0, j - 1, f[j])] + comm - e[j]
                            <= get_max_bubble() - stage_bubble[j]
                        ):
                            # TODO: can sample here
                            if no_bubble_greedy:
                                put(j, 2)
                        else:
                            put(j, 2)
                put(j, 0)
            for j in range(self.nstages - 1, -1, -1):
                assert b[j] == i
                b_id = self.get_id(1, j, b[j])
                mem = self.get_mem(b_id)
                while m[j] + mem > max_mem[j]:
                    if w[j] >= b[j]:
                        raise ValueError("Cannot fit memory")
                    put(j, 2)
                if j + 1 < self.nstages:
                    while (
                        w[j] < b[j]
                        and e[j] + self.get_cost(self.get_id(2, j, w[j]))
                        <= t[self.get_id(1, j + 1, i)] + comm
                    ):
                        put(j, 2)
                    if w[j] < b[j] and e[j] < t[self.get_id(1, j + 1, i)] + comm:
                        # TODO: e[j] + self.get_cost(self.get_id(2, j, w[j])) > t[self.get_id(1, j + 1, i)] + comm
                        if (
                            t[self.get_id(1, j + 1, i)] + comm - e[j]
                            <= get_max_bubble() - stage_bubble[j]
                        ):
                            # TODO: can sample here
                            if no_bubble_greedy:
                                put(j, 2)
                        else:
                            put(j, 2)
                if j == 0 and f[j] == self.nmb:
                    while w[j] < b[j]:
                        put(j, 2)
                put(j, 1)

        for i in range(self.nstages):
            while w[i] < self.nmb:
                put(i, 2)
            # print(f"{' ' * i}{order_str[i]}  -> {e[i]}")

        for i in range(self.nstages):
            for j in range(self.nmb):
                f_id = self.get_id(0, i, j)
                b_id = self.get_id(1, i, j)
                w_id = self.get_id(2, i, j)
                f_cost = self.get_cost(f_id)
                b_cost = self.get_cost(b_id)
                w_cost = self.get_cost(w_id)
                assert t[b_id] >= t[f_id] + b_cost
                assert t[w_id] >= t[b_id] + w_cost, f"{i}-{j}, {t[w_id]} >= {t[b_id]} + {w_cost}"
                if i > 0:
                    assert t[f_id] >= t[self.get_id(0, i - 1, j)] + comm + f_cost, f"{i}-{j}"
                if i < self.nstages - 1:
                    assert t[b_id] >= t[self.get_id(1, i + 1, j)] + comm + b_cost

        # print(order)
        best_time = 0
        for i in range(self.nstages):
            time_i = (
                t[self.get_id(2, i, self.nmb - 1)]
                - t[self.get_id(0, i, 0)]
                + self.get_cost(self.get_id(0, i, 0))
            )
            best_time = max(best_time, time_i)

        return order, t, best_time


def initial_solution(graph, print_result=True):
    """The best of ``manual_order``'s 8 variants by the longest stage span (strictly
    smaller replaces; the repository's loop order). ``print_result`` is accepted and
    ignored (the repository prints the timeline)."""
    best_time, order, complete_time = None, None, None
    for allow_bubble_before_first_b in [True, False]:
        for prioritize_b in [True, False]:
            for no_bubble_greedy in [True, False]:
                order_t, complete_time_t, best_time_t = graph.manual_order(
                    allow_bubble_before_first_b=allow_bubble_before_first_b,
                    prioritize_b=prioritize_b,
                    no_bubble_greedy=no_bubble_greedy,
                )
                if best_time is None or best_time_t < best_time:
                    best_time = best_time_t
                    order = order_t
                    complete_time = complete_time_t
    return best_time, order, complete_time


def _local_orders(graph, completion_time):
    """``create_scheduled_nodes``: each stage's jobs sorted by completion time (a stable
    sort over F, B, W in micro-batch order), as ``(kind, microbatch)``."""
    kinds = ("F", "I", "W")
    local_order = []
    for stage in range(graph.nstages):
        order = [(cat, mb) for cat in range(3) for mb in range(graph.nmb)]
        order = sorted(order, key=lambda n: completion_time[graph.get_id(n[0], stage, n[1])])
        local_order.append([(kinds[cat], mb) for cat, mb in order])
    return local_order


def _per_stage(value: float | Sequence[float], p: int, what: str) -> list[float]:
    if isinstance(value, (int, float)):
        return [value] * p
    values = list(value)
    if len(values) != p:
        raise ValueError(f"{what}: {len(values)} values for {p} stages")
    return values


def reference_schedule(
    p: int,
    m: int,
    f: float | Sequence[float],
    b: float | Sequence[float],
    w: float | Sequence[float],
    c: float,
    max_mem_in_f_units: float,
    *,
    mem: tuple[float, float, float] = (1, 0, -1),
    max_mem: float | None = None,
) -> tuple[list[list[tuple[str, int]]], float]:
    """The repository's schedule for ``p`` stages (one per rank) and ``m`` micro-batches.

    Args:
        p, m: stages and micro-batches.
        f, b, w: per-stage (or one for all) durations of a forward, a backward for inputs
            (the repository's ``B``, our ``I``) and a backward for weights, in ns.
        c: the transfer time of one activation or gradient between neighbouring stages
            (ns), a delay on the dependency edge.
        max_mem_in_f_units: the memory limit per stage as a multiple of ``mem[0]``: the
            runtime's ``max_mem = zero_bubble_max_pending_backward * f_mem``.
        mem: ``(mem_f, mem_b, mem_w)`` per micro-batch, the same on every stage. The
            default ``(1, 0, -1)`` counts pending micro-batches (a micro-batch holds its
            activations from its F to its W), as the runtime's first schedule
            (``f_mem_approx, 0, -f_mem_approx``); the ICLR figure uses
            ``(34h+5as, -(2h+5as), -32h)`` (``mem.py`` on the repository's ``arxiv`` branch).
        max_mem: the limit in ``mem`` units, replacing ``max_mem_in_f_units * mem_f``
            (``mem.py`` passes ``int(k p mem_f)``).

    Returns:
        Per stage its jobs in the repository's order, ``(kind, microbatch)`` with kind in
        ``"F"``, ``"I"``, ``"W"``; and the repository's objective, the longest stage span
        (last job end minus first job start, ns).

    Raises:
        ValueError: ``Cannot fit memory`` from ``manual_order`` (any of the 8 variants).
        AssertionError: the repository's own end-of-``manual_order`` timing checks.
    """
    mem_f, mem_b, mem_w = mem
    config = GraphConfig(
        mem_f=[mem_f] * p,
        mem_b=[mem_b] * p,
        mem_w=[mem_w] * p,
        max_mem=[max_mem_in_f_units * mem_f if max_mem is None else max_mem] * p,
        cost_f=_per_stage(f, p, "f"),
        cost_b=_per_stage(b, p, "b"),
        cost_w=_per_stage(w, p, "w"),
        cost_comm=c,
    )
    graph = Graph.build_graph(p, m, config)
    best_time, _order, complete_time = initial_solution(graph, print_result=False)
    return _local_orders(graph, complete_time), best_time
