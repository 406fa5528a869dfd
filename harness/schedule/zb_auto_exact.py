"""ZB-auto's optimality side: a lower bound on the longest stage span of any schedule within a
memory limit (:func:`lower_bound`), which stops the search once met, and an exact MILP for small
sizes (:func:`solve_exact`, ``scipy.optimize.milp`` with HiGHS).

The bound is derived for this harness (not taken from the paper); it is checked never to exceed
the optimum found by brute force and by the MILP (``tests/test_zb_auto.py``). Its closed forms
for uniform stages: at a limit of ``L = p`` pending micro-batches ``m(F+I+W) + (p-1)(F+I-W+4c)``,
exactly ZB-H1's span under ``edge`` (Qi et al., arXiv:2401.10241, Table 2: ``(p-1)(F+I-W)``, plus
``2c`` on each of the head and tail round trips); at ``p <= L <= m`` ``m(F+I+W) + (p-1)(F+I+2c)
- (L-1)W``; at ``L = 1`` one micro-batch at a time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from harness.schedule.zb_auto_eval import Delays

__all__ = ["lower_bound", "solve_exact"]


def _min_w_before_last_f(m: int, mem: tuple[float, float, float], limit: float) -> int:
    """Fewest W that must end before the last F starts: with ``j`` I done (``j <= m-1``) and
    ``n`` W done, the F needs ``m mem_f + j mem_i + n mem_w <= limit``."""
    mf, mi, mw = mem
    need = m * mf + (m - 1) * mi - limit
    if need <= 1e-9:
        return 0
    if mw >= 0:
        return m  # never satisfiable; the bound is then loose, not wrong
    return min(m - 1, math.ceil(need / -mw - 1e-9))


def _max_f_before_first_i(m: int, mem: tuple[float, float, float], limit: float) -> int:
    return max(1, min(m, math.floor(limit / mem[0] + 1e-9)))


def _max_held(mem: tuple[float, float, float], limit: float) -> int:
    """The most micro-batches a stage can hold when an F starts, counting it: itself
    (``mem_f``) and the others at least ``mem_f + mem_i`` each (an I frees only ``mem_i``),
    within ``limit``. ``limit`` for pending micro-batches."""
    mf, mi, _ = mem
    held = mf + mi
    if held <= 1e-12:
        return 1 << 30
    return 1 + max(0, math.floor((limit - mf) / held + 1e-9))


def _max_tail_work(m: int, dur: tuple[int, int, int], mem: tuple[float, float, float], limit: float) -> int:
    """Most I/W work of other micro-batches a stage can hold when its last F starts: ``a``
    micro-batches with I not done (``mem_f`` each, ``I + W`` work) and ``b`` with only W left
    (``mem_f + mem_i`` each, ``W`` work), within ``limit - mem_f``."""
    mf, mi, _ = mem
    _, di, dw = dur
    room = limit - mf
    best = 0
    for a in range(m):
        left = room - a * mf
        if left < -1e-9:
            break
        held = mf + mi
        b = m - 1 - a if held <= 1e-12 else min(m - 1 - a, math.floor(left / held + 1e-9))
        best = max(best, a * (di + dw) + b * dw)
    return best


def lower_bound(
    p: int,
    m: int,
    dur: Sequence[tuple[int, int, int]],
    c: Delays,
    mems: Sequence[tuple[float, float, float]],
    limits: Sequence[float],
) -> int:
    """A lower bound on the longest stage span (ns) of any schedule within the limits.

    ``c_F(t)`` is the delay into ``F`` of stage ``t`` (from ``t-1``), ``c_I(t)`` into its ``I`` (from
    ``t+1``). Every rank's first job is ``F(s, 0)``, at ``a_s = sum_{0<t<=s} (F_{t-1} + c_F(t))`` whatever the
    order. For each stage ``s`` the span is at least:

    - busy: ``m (F_s + I_s + W_s)``;
    - busy + head + tail idle: before ``I(s, 0)`` can start, ``R_s = F_s + g_s`` after ``a_s``
      with the round trip ``g_s = sum_{t>s}(F_t + I_t + c_F(t) + c_I(t-1))``, the stage can
      only run forwards (at most what the limit lets it hold); after its last ``F`` ends,
      ``I(s, m-1)`` waits ``g_s``, in which it can only run the I/W work of the other
      micro-batches it holds;
    - through a later stage ``q``: ``q`` starts at ``a_q``, must run ``m (F_q + I_q)`` and
      the W that free memory for its last F before its last I ends, then that micro-batch's
      I runs back to ``s`` (``I_t + c_I(t)`` per stage ``s <= t < q``) and ``W_s`` closes ``s``.

    - memory cycle: with at most ``n`` micro-batches held (``n = L`` pending),
      ``F(s, j)`` starts after ``W(s, j-n)`` ends, which is at least ``R_s + I_s + W_s``
      after ``F(s, j-n)`` started: ``span_s >= (floor((m-1)/n) + 1)(R_s + I_s + W_s)``.

    Uniform stages, one transfer time ``c``, pending micro-batches (derived here, not taken from the paper): at
    ``L = p < m`` the second bound on stage 0 is ``m(F+I+W) + (p-1)(F+I-W+4c)`` (head
    ``(p-1)(I+2c)``, tail ``(p-1)(F-W+2c)``), which ZB-H1 meets under the ``edge`` model;
    at ``p <= L <= m`` the third, at ``s = 0``, ``q = p-1``, is ``m(F+I+W) + (p-1)(F+I+2c)
    - (L-1) W``; at ``L = 1`` the fourth is ``m (R_0 + I + W)``, one micro-batch at a time.
    """
    into_f, into_i = c
    a = [0] * p
    for s in range(1, p):
        a[s] = a[s - 1] + dur[s - 1][0] + into_f[s]
    best = 0
    for s in range(p):
        df, di, dw = dur[s]
        busy = m * (df + di + dw)
        best = max(best, busy)
        g = sum(dur[t][0] + dur[t][1] + into_f[t] + into_i[t - 1] for t in range(s + 1, p))
        head = max(0, df + g - _max_f_before_first_i(m, mems[s], limits[s]) * df)
        tail = max(0, g - _max_tail_work(m, dur[s], mems[s], limits[s])) if m >= 2 else 0
        # the two windows are disjoint once the last F waits on a W (limit below m F)
        disjoint = _min_w_before_last_f(m, mems[s], limits[s]) > 0
        best = max(best, busy + (head + tail if disjoint else max(head, tail)))
        # memory cycle: F(s, j) waits for W(s, j - n) (n = most micro-batches held past
        # their I within the limit), which waits for the round trip of micro-batch j - n
        n_held = _max_held(mems[s], limits[s])
        if n_held < m:
            best = max(best, ((m - 1) // n_held + 1) * (df + g + di + dw))
        back = 0
        for q in range(s, p):
            if q > s:
                back += dur[q - 1][1] + into_i[q - 1]
            fq, iq, wq = dur[q]
            v = (a[q] - a[s]) + m * (fq + iq) + _min_w_before_last_f(m, mems[q], limits[q]) * wq + back + dw
            best = max(best, v)
    return best


def solve_exact(
    p: int,
    m: int,
    dur: Sequence[tuple[int, int, int]],
    c: Delays,
    limit_pending: Sequence[int],
    upper_span: int,
    time_limit_s: float = 30.0,
) -> tuple[list[list[int]], bool] | None:
    """Minimize the longest stage span exactly by a MILP (``scipy.optimize.milp``, HiGHS),
    pending-micro-batch limits only.

    Variables: the start of every job, a binary per pair of jobs of one stage whose order
    the precedences leave open, and the objective ``Z``. Precedences: the chains (each kind
    in micro-batch order), ``F(s,j) -> I(s,j) -> W(s,j)``, the cross-stage edges plus their delays ``c``,
    and the limit as ``W(s, j-L) -> F(s, j)`` (with in-order chains, ``L`` pending at
    ``F(s,j)``'s start means ``W(s, j-L)`` has ended). ``F(s,0)`` is pinned at its ASAP
    start ``a_s``, so for the order found ASAP timing gives every end at most the MILP's
    and the MILP optimum is the ASAP optimum. Big-M: ``a_{p-1} + upper_span``, valid for
    every schedule at least as good as ``upper_span``.

    Returns:
        ``(kinds, proven)`` (per-stage kind strings; ``proven`` when HiGHS closed the gap),
        or ``None`` when no solution was found in ``time_limit_s``.
    """
    import numpy as np
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    def v(s: int, k: int, j: int) -> int:
        return (s * 3 + k) * m + j

    into_f, into_i = c
    n = 3 * p * m
    a = [0] * p
    for s in range(1, p):
        a[s] = a[s - 1] + dur[s - 1][0] + into_f[s]
    horizon = a[p - 1] + upper_span
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    lo: list[float] = []
    r = 0

    def ge(x: int, y: int, const: float) -> None:  # S[x] - S[y] >= const
        nonlocal r
        rows.extend((r, r))
        cols.extend((x, y))
        vals.extend((1.0, -1.0))
        lo.append(const)
        r += 1

    for s in range(p):
        d = dur[s]
        lim = limit_pending[s]
        for j in range(m):
            for k in range(3):
                if j + 1 < m:
                    ge(v(s, k, j + 1), v(s, k, j), d[k])
            ge(v(s, 1, j), v(s, 0, j), d[0])
            ge(v(s, 2, j), v(s, 1, j), d[1])
            if s > 0:
                ge(v(s, 0, j), v(s - 1, 0, j), dur[s - 1][0] + into_f[s])
            if s < p - 1:
                ge(v(s, 1, j), v(s + 1, 1, j), dur[s + 1][1] + into_i[s])
            if j >= lim:
                ge(v(s, 0, j), v(s, 2, j - lim), d[2])
    pairs: list[tuple[int, int, int, int]] = []
    for s in range(p):
        lim = limit_pending[s]
        for j in range(m):
            for kk in range(max(0, j - lim + 1), j):
                pairs.append((v(s, 0, j), dur[s][0], v(s, 1, kk), dur[s][1]))
                pairs.append((v(s, 0, j), dur[s][0], v(s, 2, kk), dur[s][2]))
                pairs.append((v(s, 1, j), dur[s][1], v(s, 2, kk), dur[s][2]))
    nb = len(pairs)
    z = n + nb
    for q, (x, dx, y, dy) in enumerate(pairs):
        b = n + q  # 1: x before y
        rows.extend((r, r, r))
        cols.extend((y, x, b))
        vals.extend((1.0, -1.0, -float(horizon)))
        lo.append(dx - horizon)
        r += 1
        rows.extend((r, r, r))
        cols.extend((x, y, b))
        vals.extend((1.0, -1.0, float(horizon)))
        lo.append(dy)
        r += 1
    for s in range(p):
        rows.extend((r, r))
        cols.extend((z, v(s, 2, m - 1)))
        vals.extend((1.0, -1.0))
        lo.append(dur[s][2] - a[s])
        r += 1
    nv = n + nb + 1
    a_mat = coo_matrix((vals, (rows, cols)), shape=(r, nv)).tocsr()
    lb = np.zeros(nv)
    ub = np.full(nv, float(horizon))
    for s in range(p):
        lb[v(s, 0, 0)] = ub[v(s, 0, 0)] = a[s]
    ub[n : n + nb] = 1
    lb[z] = 0
    ub[z] = upper_span
    integrality = np.zeros(nv)
    integrality[n : n + nb] = 1
    cost = np.zeros(nv)
    cost[z] = 1
    res = milp(
        cost,
        constraints=LinearConstraint(a_mat, np.array(lo), np.full(r, np.inf)),
        bounds=Bounds(lb, ub),
        integrality=integrality,
        options={"time_limit": time_limit_s, "disp": False},
    )
    if res.x is None:
        return None
    x = res.x
    kinds = []
    for s in range(p):
        jobs = sorted((x[v(s, k, j)], k, j) for k in range(3) for j in range(m))
        kinds.append([k for _, k, _ in jobs])
    return kinds, res.status == 0
