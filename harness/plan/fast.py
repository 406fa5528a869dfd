""":func:`~harness.plan.build.build_plan`'s fast path: the plan built with numpy over
integer job keys ``(kind, stage, micro-batch)`` in one flat table, and the
enqueue order found by a readiness simulation that is linear in the number of
jobs.

Whatever looks wrong here (counts, a key listed twice, a missing dependency, a
dependency listed later on its rank, a deadlock) is handed to the reference path
(:func:`harness.plan.reference._build_plan_checked`), which judges it again and
names the jobs at fault. Both paths build the same plan (``tests/test_columns.py``).
"""

from __future__ import annotations

from itertools import chain
from typing import Any

from harness.plan.graph import Plan, PlanArrays
from harness.plan.reference import _build_plan_checked
from harness.schedule.model import KIND_CODE, JobKind, Schedule, _job_arrays, _kind_codes

_F, _B, _I, _W = JobKind.F, JobKind.B, JobKind.I, JobKind.W
_SF, _RF, _SB, _RB, _OPT = JobKind.SEND_F, JobKind.RECV_F, JobKind.SEND_B, JobKind.RECV_B, JobKind.OPT

# Kind codes follow JobKind's declaration order; ids avoid Enum.__hash__ (a
# Python-level call) on the hot path.
_KINDS = tuple(JobKind)
_CODE = {id(k): code for k, code in KIND_CODE.items()}  # by id: hashing an Enum member is a Python-level call
_CF, _CB, _CI, _CW = _CODE[id(_F)], _CODE[id(_B)], _CODE[id(_I)], _CODE[id(_W)]
_CSF, _CRF, _CSB, _CRB, _COPT = _CODE[id(_SF)], _CODE[id(_RF)], _CODE[id(_SB)], _CODE[id(_RB)], _CODE[id(_OPT)]
_CUN, _CRS, _CRG = KIND_CODE[JobKind.UNSHARD], KIND_CODE[JobKind.RESHARD], KIND_CODE[JobKind.REDUCE_GRAD]
assert (_CUN, _CRS, _CRG) == (_CUN, _CUN + 1, _CUN + 2), "the data-parallel kinds must be declared together (code ranges test them)"


def _data_parallel_in_order(np: Any, kc: Any, stage: Any, jidx: Any, n_stages: int) -> bool:
    """Whether every ``UNSHARD`` comes before its stage's compute jobs, every ``RESHARD`` after
    them and every ``REDUCE_GRAD`` after its stage's ``B``/``W`` (the rule of
    :func:`~harness.schedule.validate.check_order`). Jobs are rank by rank in listed order and a
    stage's jobs share a rank, so list order is index order. No data-parallel job: ``True``."""
    dp = (kc >= _CUN) & (kc <= _CRG)
    if not dp.any():
        return True
    compute = (kc == _CF) | (kc == _CB) | (kc == _CI) | (kc == _CW)
    bw = (kc == _CB) | (kc == _CW)
    lo = np.full(n_stages, len(kc), np.int64)
    np.minimum.at(lo, stage[compute], jidx[compute])
    hi = np.full(n_stages, -1, np.int64)
    np.maximum.at(hi, stage[compute], jidx[compute])
    hi_bw = np.full(n_stages, -1, np.int64)
    np.maximum.at(hi_bw, stage[bw], jidx[bw])
    un, rs, rg = (jidx[kc == c] for c in (_CUN, _CRS, _CRG))
    return not (bool((un > lo[stage[un]]).any()) or bool((rs < hi[stage[rs]]).any()) or bool((rg < hi_bw[stage[rg]]).any()))


def _build_plan(schedule: Schedule) -> Plan:
    """:func:`build_plan` inside its memory guard, before overlapped groups are applied."""
    import numpy as np

    from harness.schedule.chains import CHAINS_PARAM, chains_of, links

    m = schedule.num_microbatches
    n_stages = schedule.num_stages
    m1 = m + 1
    width = n_stages * m1  # one block of keys per kind
    has_prev_a, has_next_a = (np.array(x, bool) for x in links(schedule))  # neighbours within each chain
    arrays = _job_arrays(schedule)
    if arrays is None:
        jobs = list(filter(None, chain.from_iterable(schedule.ranks)))
        if jobs:
            kc = _kind_codes(jobs)
            if int(kc.min()) < 0:
                raise KeyError(id(jobs[int(np.flatnonzero(kc < 0)[0])][1]))  # as a lookup of an unknown kind always did
        return _build_plan_checked(schedule)  # not integers: let the reference path judge
    stage, kc, mb, counts = arrays
    n = len(stage)
    if n == 0 or m < 1:
        return _build_plan_checked(schedule)
    mb_given = mb
    n_ranks = len(counts)
    jidx = np.arange(n, dtype=np.int64)
    rank = np.repeat(np.arange(n_ranks, dtype=np.int64), counts)
    if schedule._lazy_arrays() is not None or all(len(row) == c for row, c in zip(schedule.ranks, counts)):
        row_start = np.zeros(n_ranks, np.int64)
        np.cumsum(counts[:-1], out=row_start[1:])
        step = row_start[rank]
        np.subtract(jidx, step, out=step)  # no idle slots: a job's step is its place in its row
    else:
        step = np.fromiter(
            chain.from_iterable((s for s, job in enumerate(row) if job is not None) for row in schedule.ranks), np.int64, n
        )
    no_mb = mb < 0  # None (OPT, UNSHARD, RESHARD, REDUCE_GRAD): key slot m
    if no_mb.any():
        given = mb[~no_mb]
        per_stage = (kc == _COPT) | ((kc >= _CUN) & (kc <= _CRG))
        if (len(given) and int(given.max()) >= m) or bool((no_mb & ~per_stage).any()):  # only these have no micro-batch
            return _build_plan_checked(schedule)
        mb = mb.copy()
        mb[no_mb] = m
        if not _data_parallel_in_order(np, kc, stage, jidx, n_stages):
            return _build_plan_checked(schedule)
    elif int(mb.max()) >= m:
        return _build_plan_checked(schedule)
    # In place where it can be: at 10 M jobs each temporary column is 80 MB of fresh memory.
    keys = np.multiply(stage, m1)
    keys += mb
    keys += kc * width
    pos = np.full(len(_KINDS) * width, -1, np.int64)
    pos[keys] = jidx
    if not (pos[keys] == jidx).all():  # a key listed twice
        return _build_plan_checked(schedule)
    # Counts: per stage and micro-batch, an F, and B xor (I and W).
    table = pos.reshape(len(_KINDS), n_stages, m1)[:, :, :m] >= 0
    has_b, has_i, has_w = table[_CB], table[_CI], table[_CW]
    chained = bool(schedule.params.get(CHAINS_PARAM))
    if chained:  # each stage runs its chain's micro-batches (harness.schedule.chains)
        expect = np.zeros((n_stages, m), bool)
        for lo, hi, a, b in chains_of(schedule):
            expect[lo:hi, a:b] = True
        complete = (has_b != has_i) & (has_i == has_w)
        if not (table[_CF] == expect).all() or not complete[expect].all() or bool((has_b | has_i | has_w)[~expect].any()):
            return _build_plan_checked(schedule)
    elif not table[_CF].all() or not ((has_b != has_i) & (has_i == has_w)).all():
        return _build_plan_checked(schedule)
    is_opt = kc == _COPT
    n_opt = int(is_opt.sum())
    if n_opt and n_opt != len(np.unique(stage[is_opt])):
        return _build_plan_checked(schedule)
    has_comm = bool(((kc >= _CSF) & (kc <= _CRB)).any())
    # Streams: key rank * (p + 1) for compute, + 1 + peer rank for comm.
    st_rank = np.array(schedule.stage_to_rank, np.int64)
    p1 = n_ranks + 1
    skey = rank * p1
    if has_comm:
        comm = (kc >= _CSF) & (kc <= _CRB)
        nb = stage - 1
        nb[(kc == _CSF) | (kc == _CRB)] += 2  # SEND_F/RECV_B talk to stage + 1, SEND_B/RECV_F to stage - 1
        outside = (nb < 0) | (nb >= n_stages)
        if chained:  # no neighbour past a chain's end
            outside |= np.where((kc == _CSF) | (kc == _CRB), ~has_next_a[stage], ~has_prev_a[stage])
        np.clip(nb, 0, n_stages - 1, out=nb)
        peer = st_rank[nb]
        del nb
        np.copyto(peer, rank, where=outside)
        if bool((comm & (peer == rank)).any()):  # a peer stage outside the pipeline or on the job's own rank
            return _build_plan_checked(schedule)
        peer += 1
        np.add(skey, peer, out=skey, where=comm)
        del peer
    if n_ranks * p1 <= max(1 << 20, 4 * n):  # a lookup table over all keys: linear
        used = np.flatnonzero(np.bincount(skey, minlength=n_ranks * p1))
        lut = np.zeros(n_ranks * p1, np.int64)
        lut[used] = np.arange(len(used))
        stream = lut[skey]
    else:  # very many ranks, few jobs each: the (p + 1)^2 table would not fit; sort instead
        used, stream = np.unique(skey, return_inverse=True)
        stream = stream.reshape(-1)
    used_l = used.tolist()
    stream_names = tuple(f"rank{key // p1}/compute" if key % p1 == 0 else f"rank{key // p1}/comm↔{key % p1 - 1}" for key in used_l)
    stream_rank = tuple(key // p1 for key in used_l)
    # Dependencies: d1 (and d2 for B/I) end dependencies, sd a start dependency; -1 none.
    # Each kind's jobs are looked up on their own (index arrays), not the whole list.
    last = n_stages - 1
    d1 = np.full(n, -1, np.int64)
    d2 = np.full(n, -1, np.int64)
    sd = np.full(n, -1, np.int64)
    bad = False
    rank_of_stage = st_rank if has_comm else np.zeros(n_stages, np.int64)  # no comm: never "another rank"
    kc8 = kc.astype(np.uint8)
    by_kind = np.argsort(kc8, kind="stable")  # radix sort: linear
    bounds = np.searchsorted(kc8[by_kind], np.arange(len(_KINDS) + 1)).tolist()
    del kc8

    def of_kind(*codes: int) -> np.ndarray:
        parts = [by_kind[bounds[c] : bounds[c + 1]] for c in codes]
        return parts[0] if len(parts) == 1 else np.sort(np.concatenate(parts))

    def at_key(code: int, stg: np.ndarray, b: np.ndarray) -> np.ndarray:
        return pos[code * width + stg * m1 + b]  # type: ignore[no-any-return]

    def backward(stg: np.ndarray, b: np.ndarray) -> np.ndarray:
        i = at_key(_CI, stg, b)
        return np.where(i >= 0, i, at_key(_CB, stg, b))  # type: ignore[no-any-return]

    j = of_kind(_CF)
    j = j[has_prev_a[stage[j]]]
    s, b = stage[j], mb[j]
    d = np.where(rank_of_stage[s - 1] != rank_of_stage[s], at_key(_CRF, s, b), at_key(_CF, s - 1, b))
    d1[j] = d
    bad |= bool((d < 0).any())
    j = of_kind(_CB, _CI)
    s, b = stage[j], mb[j]
    d1[j] = at_key(_CF, s, b)
    j = j[has_next_a[s]]
    s, b = stage[j], mb[j]
    d = np.where(rank_of_stage[s + 1] != rank_of_stage[s], at_key(_CRB, s, b), backward(s + 1, b))
    d2[j] = d
    bad |= bool((d < 0).any())
    j = of_kind(_CW)
    d1[j] = at_key(_CI, stage[j], mb[j])
    j = of_kind(_CSF)
    d = at_key(_CF, stage[j], mb[j])
    d1[j] = d
    bad |= bool((d < 0).any())
    j = of_kind(_CSB)
    d = backward(stage[j], mb[j])
    d1[j] = d
    bad |= bool((d < 0).any())
    j = of_kind(_CRF)
    s = stage[j]
    d = np.where(has_prev_a[s], at_key(_CSF, np.maximum(s - 1, 0), mb[j]), -1)
    sd[j] = d
    bad |= bool((d < 0).any())
    j = of_kind(_CRB)
    s = stage[j]
    d = np.where(has_next_a[s], at_key(_CSB, np.minimum(s + 1, last), mb[j]), -1)
    sd[j] = d
    bad |= bool((d < 0).any())
    if bad:
        return _build_plan_checked(schedule)
    # Every dependency on the job's own rank, whatever its stream, must be listed
    # earlier: jobs are rank by rank in listed order, so one listed later lies
    # in (j, end of j's row). Start dependencies (a receive's send) are on
    # another rank, as the peer check above ensures. Dependencies on the job's
    # own stream are then met by stream order; the others gate the readiness order.
    row_end = np.cumsum(counts)
    later = False
    for d in (d1, d2):
        ahead = np.flatnonzero(d > jidx)  # in a valid schedule, only dependencies on a later rank
        later = later or bool((d[ahead] < row_end[rank[ahead]]).any())

    def crosses(d: np.ndarray) -> np.ndarray:
        out = stream[d] != stream  # (d = -1, no dependency, reads the last job's stream: masked next)
        out &= d >= 0
        return out  # type: ignore[no-any-return]

    cross1, cross2, cross_s = crosses(d1), crosses(d2), crosses(sd)
    opt_l = np.flatnonzero(is_opt).tolist()
    stream_l = stream.tolist()
    opt_deps: dict[int, tuple[int, ...]] = {}
    opt_cross: dict[int, tuple[int, ...]] = {}
    for j in opt_l:
        s = int(stage[j])
        row_b = pos[_CB * width + s * m1 : _CB * width + s * m1 + m]
        row_w = pos[_CW * width + s * m1 : _CW * width + s * m1 + m]
        ds = tuple(row_b[row_b >= 0].tolist()) + tuple(row_w[row_w >= 0].tolist())
        opt_deps[j] = ds
        opt_cross[j] = tuple(x for x in ds if stream_l[x] != stream_l[j])
        if any(x > j for x in ds if stream_l[x] == stream_l[j]):
            return _build_plan_checked(schedule)
    if later:
        return _build_plan_checked(schedule)
    # Plan.deps: the cross-stream end dependencies, in (d1, d2) order (CSR).
    c1 = np.full(n, -1, np.int64)
    np.copyto(c1, d2, where=cross2)
    np.copyto(c1, d1, where=cross1)
    c2 = np.full(n, -1, np.int64)
    np.copyto(c2, d2, where=cross1 & cross2)
    one = c1 >= 0
    two = c2 >= 0
    n_deps = one.astype(np.int32)  # (an OPT waits for up to 2m jobs)
    n_deps += two
    for j in opt_l:
        n_deps[j] = len(opt_cross[j])
    deps_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(n_deps, out=deps_ptr[1:])
    deps_idx = np.empty(int(deps_ptr[-1]), np.int64)
    at = deps_ptr[:-1]
    deps_idx[at[one]] = c1[one]
    deps_idx[at[two] + 1] = c2[two]
    for j in opt_l:
        deps_idx[deps_ptr[j] : deps_ptr[j + 1]] = opt_cross[j]
    has_sd = sd >= 0
    start_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(has_sd, out=start_ptr[1:])
    start_idx = sd[has_sd]
    n_gates = cross1.astype(np.int8) + cross2 + cross_s
    for j in opt_l:
        n_gates[j] = min(len(opt_cross[j]), 2)  # only whether it exceeds 1 matters (int8)
    # For simulate: per job the one time it waits for, in a list of ends (j) and
    # starts (n + j), 2n for none; only when no job waits for more than one.
    wait = None
    if not two.any() and not (one & has_sd).any() and not any(opt_cross.values()):
        wait = sd + n
        wait[~has_sd] = 2 * n
        np.copyto(wait, c1, where=one)
    chunk = np.array(schedule._chunk_of, np.int64)[stage]
    if int(n_gates.max()) <= 1:
        gate = np.full(n, n, np.int64)
        np.copyto(gate, sd, where=cross_s)
        np.copyto(gate, d2, where=cross2)
        np.copyto(gate, d1, where=cross1)
        # The walk holds about 100 bytes per job of Python lists: free the columns no longer needed first.
        del pos, keys, by_kind, jidx, d1, d2, sd, c1, c2, cross1, cross2, cross_s, one, two, has_sd, n_gates
        order = _gated_order(np, n, stream, gate, len(used_l))
        del gate
    else:  # several cross-stream waits on one job: the general simulation
        full = [tuple(x for x in pair if x >= 0) for pair in zip(d1.tolist(), d2.tolist())]
        for j in opt_l:
            full[j] = opt_deps[j]
        start_deps: list[tuple[int, ...]] = [(x,) if x >= 0 else () for x in sd.tolist()]
        order = _fast_order(n, stream.tolist(), full, start_deps, len(used_l))
    if order is None:
        return _build_plan_checked(schedule)
    columns = PlanArrays(
        stage=stage,
        kind=kc,
        microbatch=mb_given,
        rank=rank,
        step=step,
        stream=stream,
        chunk=chunk,
        deps_ptr=deps_ptr,
        deps_idx=deps_idx,
        start_ptr=start_ptr,
        start_idx=start_idx,
    )
    plan = Plan(schedule, columns, stream_names, stream_rank, tuple(order))
    object.__setattr__(plan, "_wait", wait)
    return plan


def _gated_order(np: Any, n: int, stream: Any, gate: Any, n_streams: int) -> list[int] | None:
    """:func:`_fast_order` for graphs where each job waits on at most one job of
    another stream (``gate[j]``; ``n`` for none) and its other dependencies
    are listed earlier on its own stream, so they are met when it heads it.

    Same stream-stack discipline and so the same order as :func:`_fast_order`,
    walked job by job: the stack holds the head jobs of woken streams (their
    gate is enqueued, which is what woke them); the first heads come after it
    empties, as they lay below it.
    ``nxt[j]`` is the next job on ``j``'s stream, or ``n``, an end job whose
    gate never opens.
    """
    narrow = stream.astype(np.uint16) if n_streams <= 1 << 16 else stream
    by_stream = np.argsort(narrow, kind="stable")  # radix sort
    ss = narrow[by_stream]
    del narrow
    first = np.concatenate(([True], ss[1:] != ss[:-1]))
    last = np.concatenate((first[1:], [True]))
    nxt_np = np.empty(n + 1, np.int64)
    nxt_np[by_stream[:-1]] = by_stream[1:]
    nxt_np[by_stream[last]] = n  # a stream's end: job n, whose gate never opens
    heads = by_stream[first].tolist()
    del ss, first, last, by_stream
    nxt = nxt_np.tolist()
    del nxt_np
    gates_np = np.empty(n + 1, np.int64)
    gates_np[:n] = gate
    gates_np[:n][gate >= n] = n + 1
    gates_np[n] = n + 2
    gates = gates_np.tolist()
    del gates_np
    # state: -2 not enqueued, -1 enqueued, c >= 0 while the stream headed by job c waits on it
    state = [-2] * (n + 3)
    state[n + 1] = -1  # the gate of jobs that wait for nothing
    state[n + 2] = -3  # the end job's gate
    more: dict[int, list[int]] = {}  # further streams parked on one job
    order: list[int] = []
    append = order.append
    stack: list[int] = []  # heads of woken streams, older ones; the newest is in ``top``
    pop = stack.pop
    push = stack.append
    for j in reversed(heads):
        g = gates[j]
        w = state[g]
        if w != -1:  # a stream's first job waits: park it
            if w >= 0:
                more.setdefault(g, []).append(j)
            else:
                state[g] = j
            continue
        top = -1
        while True:  # j heads its stream and its gate is enqueued
            w = state[j]
            state[j] = -1
            append(j)
            if w >= 0:  # wake the stream parked on j
                if top >= 0:
                    push(top)
                top = w
                if more:
                    extra = more.pop(j, None)
                    if extra:
                        push(top)
                        stack.extend(extra)
                        top = pop()
            j = nxt[j]
            g = gates[j]
            w = state[g]
            if w != -1:  # j waits (or its stream ended): park it, take the newest woken head
                if w >= 0:
                    more.setdefault(g, []).append(j)
                elif w == -2:
                    state[g] = j
                if top >= 0:
                    j = top
                    top = -1
                elif stack:
                    j = pop()
                else:
                    break
    return order if len(order) == n else None


def _fast_order(n: int, stream: list[int], deps: list[tuple[int, ...]], start_deps: list[tuple[int, ...]], n_streams: int) -> list[int] | None:
    """Readiness simulation: each stream offers its head job; a head whose
    dependencies are not all enqueued parks its stream on the first missing one
    until that job is enqueued. Each job is looked at once per dependency that
    wakes its stream, so this is linear. Returns the enqueue order, or ``None``
    on a deadlock (the caller rebuilds the detailed error)."""
    queues: list[list[int]] = [[] for _ in range(n_streams)]
    for j, s in enumerate(stream):
        queues[s].append(j)
    head = [0] * n_streams
    done = bytearray(n)
    waiters: dict[int, list[int]] = {}
    order: list[int] = []
    append = order.append
    ready = [s for s in range(n_streams) if queues[s]]
    while ready:
        s = ready.pop()
        q = queues[s]
        h = head[s]
        end = len(q)
        while h < end:
            j = q[h]
            blocked = -1
            for d in deps[j]:
                if not done[d]:
                    blocked = d
                    break
            if blocked < 0:
                for d in start_deps[j]:
                    if not done[d]:
                        blocked = d
                        break
            if blocked >= 0:
                waiters.setdefault(blocked, []).append(s)
                break
            done[j] = 1
            append(j)
            h += 1
            if waiters:
                w = waiters.pop(j, None)
                if w:
                    ready.extend(w)
        head[s] = h
    return order if len(order) == n else None
