"""ZB-auto's starting points: the zero-bubble repository's heuristic (8 variants), ZB-H1 and ZB-H2
with their warm-up and deferred W cut to the limit, and two event-driven list schedules that are
valid for every ``p``, ``m`` and limit (:mod:`harness.schedule.zb_auto` searches from them).

Each returns per-rank kind strings (codes 0 = F, 1 = I, 2 = W; each kind in micro-batch order).

:func:`_zb_greedy` is a port of ``Graph.manual_order`` from sail-sg/zero-bubble-pipeline-parallelism,
``megatron/core/pipeline_parallel/zerobubble/scheduler/zb.py``, commit
``39f2c186a27580b7051eb51e0f651e1efd0a8170`` (the heuristic of Qi et al., "Zero Bubble Pipeline
Parallelism", ICLR'24, arXiv:2401.10241, §3.1), generalized from one transfer time to one per stage
and direction (the same decisions when they are equal: ``tests/test_zb_auto.py`` compares it with a
transcription of the repository's code). The repository's ``LICENSE`` (which applies to that file)
asks that this notice be kept with it:

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

from __future__ import annotations

from collections.abc import Sequence

from harness.schedule.zb_auto_eval import _F, _I, _W, Delays

__all__: list[str] = []


# --------------------------------------------------------------------------------------
# candidates 1: the paper's heuristic (port of the repository's Graph.manual_order)


def _zb_greedy(
    p: int,
    m: int,
    dur: list[tuple[int, int, int]],
    c: Delays,
    mems: list[tuple[float, float, float]],
    limits: list[float],
    allow_bubble_before_first_b: bool,
    prioritize_b: bool,
    no_bubble_greedy: bool,
) -> list[list[int]] | None:
    """The heuristic of arXiv:2401.10241 §3.1 as the repository implements it
    (``zb.py``, ``Graph.manual_order``; see the module docstring for source and license):
    micro-batch by micro-batch, a warm-up of forwards sized so the first backward arrives
    when they end, then per round one F per stage (W first while memory is short or while
    they fit before the F's input arrives) and one I per stage from the last stage down.

    Same decisions as the repository, statement by statement; two differences in what it
    returns: the per-stage lists in the order jobs were placed (the repository sorts by its
    computed end times, the same order whenever its own end-of-run checks pass), and
    ``None`` where it raises (``Cannot fit memory``). Where the repository's checks would
    fail (per-stage costs can make it place an F before its input's F), the list is still
    returned: :func:`_simulate` times it exactly, or rejects it if it deadlocks.
    """
    cost = [[d[0] for d in dur], [d[1] for d in dur], [d[2] for d in dur]]
    memk = [[x[0] for x in mems], [x[1] for x in mems], [x[2] for x in mems]]
    cf, cb, cw = cost
    fcnt = [0] * p
    bcnt = [0] * p
    wcnt = [0] * p
    mem = [0.0] * p
    e = [0] * p
    tf = [[0] * m for _ in range(p)]
    tb = [[0] * m for _ in range(p)]
    max_mem = limits
    into_f, into_i = c  # the repository has one comm time; here the delay into F / I of each stage
    out: list[list[int]] = [[] for _ in range(p)]
    stage_bubble = [0] * p

    def get_max_bubble() -> int:
        return max(stage_bubble)

    def put(j: int, k: int) -> None:
        i = (fcnt, bcnt, wcnt)[k][j]
        c_ = cost[k][j]
        tmp = e[j] + c_
        no_bubble = tmp
        if j > 0 and k == 0:
            tmp = max(tmp, tf[j - 1][i] + into_f[j] + c_)
        if j < p - 1 and k == 1:
            tmp = max(tmp, tb[j + 1][i] + into_i[j] + c_)
        if fcnt[j] > 0:
            stage_bubble[j] += tmp - no_bubble
        e[j] = tmp
        if k == 0:
            tf[j][i] = tmp
            fcnt[j] += 1
        elif k == 1:
            tb[j][i] = tmp
            bcnt[j] += 1
        else:
            wcnt[j] += 1
        mem[j] += memk[k][j]
        out[j].append(k)

    for i in range(m):
        if i == 0:
            for j in range(p):
                put(j, 0)
            f_required = [0] * p
            last_t = 0
            for j in range(p - 1, -1, -1):
                if j == p - 1:
                    last_t = tf[j][i] + cb[j]
                    continue
                mm = mem[j]
                cc = e[j]
                while True:
                    nxt = fcnt[j] + f_required[j]
                    if nxt < m and mm + memk[0][j] <= max_mem[j]:
                        if allow_bubble_before_first_b:
                            if cc + cf[j] > last_t + into_i[j]:
                                break
                        else:
                            if cc >= last_t + into_i[j]:
                                break
                        mm += memk[0][j]
                        cc += cf[j]
                        f_required[j] += 1
                    else:
                        break
                last_t = max(cc, last_t + into_i[j]) + cb[j]
            for j in range(p):
                while j > 0 and f_required[j] > 0 and f_required[j] >= f_required[j - 1] and fcnt[j] + f_required[j] < m:
                    f_required[j] -= 1
            for j in range(p):
                for _ in range(f_required[j]):
                    put(j, 0)
            for j in range(p - 1, -1, -1):
                put(j, 1)
            continue
        f_required = [0] * p
        for j in range(p):
            if fcnt[j] >= m:
                continue
            if j + 1 < p and fcnt[j] >= fcnt[j + 1] + 2 and prioritize_b:
                next_plus_fw = e[j + 1] + cf[j + 1] + cb[j + 1] + into_i[j]
                if e[j] >= next_plus_fw:
                    continue
                mem_with_w = mem[j] + memk[0][j]
                w_cost, w_cnt = 0, 0
                while mem_with_w > max_mem[j] and wcnt[j] + w_cnt < bcnt[j]:
                    w_cost += cw[j]
                    mem_with_w += memk[2][j]
                    w_cnt += 1
                if e[j] + cf[j] + w_cost <= next_plus_fw:
                    f_required[j] = 1
                    continue
                w_cost, w_cnt = 0, 0
                if next_plus_fw - (e[j] + w_cost) <= get_max_bubble() - stage_bubble[j]:
                    continue
            f_required[j] = 1
        for j in range(p - 2, -1, -1):
            f_required[j] = min(f_required[j], f_required[j + 1])
        for j in range(p):
            if f_required[j] == 0:
                continue
            while mem[j] + memk[0][j] > max_mem[j]:
                if wcnt[j] >= bcnt[j]:
                    return None
                put(j, 2)
            if j > 0:
                arrive = tf[j - 1][fcnt[j]] + into_f[j]
                while wcnt[j] < bcnt[j] and e[j] + cw[j] <= arrive:
                    put(j, 2)
                if wcnt[j] < bcnt[j] and e[j] < arrive:
                    if arrive - e[j] <= get_max_bubble() - stage_bubble[j]:
                        if no_bubble_greedy:
                            put(j, 2)
                    else:
                        put(j, 2)
            put(j, 0)
        for j in range(p - 1, -1, -1):
            while mem[j] + memk[1][j] > max_mem[j]:
                if wcnt[j] >= bcnt[j]:
                    return None
                put(j, 2)
            if j + 1 < p:
                arrive = tb[j + 1][i] + into_i[j]
                while wcnt[j] < bcnt[j] and e[j] + cw[j] <= arrive:
                    put(j, 2)
                if wcnt[j] < bcnt[j] and e[j] < arrive:
                    if arrive - e[j] <= get_max_bubble() - stage_bubble[j]:
                        if no_bubble_greedy:
                            put(j, 2)
                    else:
                        put(j, 2)
            if j == 0 and fcnt[j] == m:
                while wcnt[j] < bcnt[j]:
                    put(j, 2)
            put(j, 1)
    for j in range(p):
        while wcnt[j] < m:
            put(j, 2)
        # A stage the rounds left short of forwards (the min-propagation of f_required can
        # stop a stage once the next one has all its forwards): the repository sorts jobs by
        # end time, and a never-placed F keeps end time 0, so it runs first. Same here, in
        # micro-batch order; the caller rejects the list if it breaks the memory limit.
        if fcnt[j] < m:
            out[j] = [_F] * (m - fcnt[j]) + out[j]
    return out


# --------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------
# candidates 2: the handcrafted schedules, warm-up and W deferral capped by the limit


def _handcrafted(p: int, m: int, limit_pending: list[int], mult: int, defer_max: bool, f_first: bool) -> list[list[int]]:
    """ZB-H1 / ZB-H2 (arXiv:2401.10241 §2.1, §2.2) with the warm-up and the deferred W cut
    to a pending limit ``L``: rank ``s`` runs ``w = min(m, L-1, mult (p-1-s) + mult-1)``
    forwards, then for each micro-batch ``t`` an I, a W from the ``d``-th on (``d = min(mult
    s, L-1-w)``, or ``L-1-w`` with ``defer_max``) and the next forward (before the I with
    ``f_first``), then the deferred W.

    ``mult=1, f_first`` is ZB-H1 as PyTorch builds it (warm-up ``p-1-s``, ``s`` W deferred);
    ``mult=2`` without ``f_first`` is the paper's ZB-H2 (warm-up ``2(p-1-s)+1``, ``2s``
    deferred). At most ``L`` micro-batches pending; the warm-ups do not grow down the
    pipeline, so the lists never deadlock (as 1F1B with a shorter warm-up).
    """
    out = []
    for s in range(p):
        cap = max(0, limit_pending[s] - 1)
        w = min(m, cap, mult * (p - 1 - s) + mult - 1)
        d = min(m, cap - w) if defer_max else min(mult * s, cap - w)
        ks = [_F] * w
        done_w = 0
        for t in range(m):
            if f_first and w + t < m:
                ks.append(_F)
            ks.append(_I)
            if t >= d:
                ks.append(_W)
                done_w += 1
            if not f_first and w + t < m:
                ks.append(_F)
        ks.extend([_W] * (m - done_w))
        out.append(ks)
    return out


# --------------------------------------------------------------------------------------
# candidates 3: event-driven list schedules (valid for every p, m and limit)


def _list_schedule(
    p: int,
    m: int,
    dur: list[tuple[int, int, int]],
    c: Delays,
    mems: list[tuple[float, float, float]],
    limits: list[float],
    policy: str,
    warmup: Sequence[int] | None = None,
) -> list[list[int]]:
    """A list schedule built in time order: the rank whose next job can start earliest
    commits one job, chosen by ``policy`` among those whose inputs are already placed:

    - ``"i-first"``: an I if its gradient has arrived, else an F (memory allowing) if its
      input has arrived, else a W that ends before the next I or F can start, else the
      earliest-starting job (a W when the limit leaves nothing else);
    - ``"f-first"``: as ``i-first`` with F before I while the stage has run fewer than
      ``warmup[s]`` forwards more than backwards (default ``2(p-1-s)+1``, ZB-H2's warm-up).

    Never stuck for a limit of at least one micro-batch (``mem_f``): some stage always has a
    job whose inputs are placed. The smallest micro-batch still pending on the lowest such
    stage either has its I's input placed, or the next stage can run (a W of an earlier
    micro-batch, whose I it has run, frees its memory), down to the last stage, whose I
    needs only its own F.
    """
    into_f, into_i = c
    if warmup is None:
        warmup = [2 * (p - 1 - s) + 1 for s in range(p)]
    nf = [0] * p
    ni = [0] * p
    nw = [0] * p
    memv = [0.0] * p
    free = [0] * p
    tf = [[-1] * m for _ in range(p)]
    ti = [[-1] * m for _ in range(p)]
    out: list[list[int]] = [[] for _ in range(p)]
    total = 3 * p * m
    placed = 0
    inf = float("inf")
    while placed < total:
        best_s, best_k, best_t = -1, -1, inf
        for s in range(p):
            dw = dur[s][2]
            t0 = free[s]
            # earliest start of each candidate; inf if its input is not placed
            t_f = inf
            if nf[s] < m and memv[s] + mems[s][0] <= limits[s] + 1e-9:
                if s == 0:
                    t_f = t0
                elif tf[s - 1][nf[s]] >= 0:
                    t_f = max(t0, tf[s - 1][nf[s]] + into_f[s])
            t_i = inf
            if ni[s] < nf[s]:
                if s == p - 1:
                    t_i = t0
                elif ti[s + 1][ni[s]] >= 0:
                    t_i = max(t0, ti[s + 1][ni[s]] + into_i[s])
            t_w = t0 if nw[s] < ni[s] else inf
            if policy == "f-first" and nf[s] - nw[s] < warmup[s]:
                order = ((t_f, _F), (t_i, _I))
            else:
                order = ((t_i, _I), (t_f, _F))
            pick, start = -1, inf
            for tt, k in order:
                if tt <= t0:
                    pick, start = k, tt
                    break
            if pick < 0:
                nxt = min(t_f, t_i)
                if t_w < inf and (t0 + dw <= nxt or nxt == inf):
                    pick, start = _W, t_w
                elif nxt < inf:
                    pick = _I if t_i <= t_f and t_i < inf else _F
                    start = t_i if pick == _I else t_f
                elif t_w < inf:
                    pick, start = _W, t_w
            if pick >= 0 and start < best_t:
                best_s, best_k, best_t = s, pick, start
        if best_s < 0:
            raise AssertionError("list schedule stuck (cannot happen for a limit >= mem_f)")
        s, k = best_s, best_k
        d = dur[s][k]
        end = int(best_t) + d
        free[s] = end
        if k == _F:
            tf[s][nf[s]] = end
            nf[s] += 1
        elif k == _I:
            ti[s][ni[s]] = end
            ni[s] += 1
        else:
            nw[s] += 1
        memv[s] += mems[s][k]
        out[s].append(k)
        placed += 1
    return out
