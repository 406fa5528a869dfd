"""Test oracle: DeepSeek's DualPipe and DualPipeV step orders, and an exact event simulator of them.

Transcribes ``DualPipe.step`` of ``dualpipe/dualpipe.py`` and ``DualPipeV.step`` of
``dualpipe/dualpipev.py`` in deepseek-ai/DualPipe at commit
3da1bbea53606543d7f5f232338fc58096db30e3 (2025-03-06), loop by loop, with the helpers they call
(``_forward_chunk``, ``_backward_chunk``, ``_forward_backward_chunk``, ``_weight_chunk``,
``_recv_forward``, ``_send_forward``, ``_recv_backward``, ``_send_backward``,
``_commit_and_wait_comm``) and ``WeightGradStore`` of ``dualpipe/utils.py``.

What was changed: tensors, modules and autograd are replaced by records. Each rank's program
becomes a list of items, in the order the code issues them:

* ``Recv(msg)`` / ``Send(msg)``: a ``P2POp`` appended to ``comm_ops`` (``comm.append_irecv`` /
  ``append_isend``); ``msg`` names the data (``"f"`` activation or ``"b"`` gradient) by the stage
  and micro-batch that *consume* it;
* ``Commit()``: ``_commit_and_wait_comm`` with a non-empty ``comm_ops`` (``batch_isend_irecv`` of every
  pending op, then ``req.wait()`` on each; with an empty list the code returns at once, so no item);
* ``Compute(op)``: ``_forward_compute_chunk`` (``F``), ``_backward_compute_chunk`` (``B``, or ``I`` when
  ``enable_zb`` is on: the weight gradients are queued in ``WeightGradStore`` instead), the overlapped
  ``_forward_backward_compute_chunk`` (``FB``: a forward and a *full* backward, ``WeightGradStore``
  disabled), and ``WeightGradStore.pop`` in ``_weight_chunk`` (``W``, the oldest queued backward, FIFO
  across both chunks of the rank, as the store is one per process).

Stages use the pipeline-harness numbering (2p stages, V placement: rank r holds stages r and 2p-1-r):

* DualPipeV: the model's 2p stages; phase 0 of rank r is stage r, phase 1 is stage 2p-1-r. One
  micro-batch chain 0..2p-1 (the last rank hands stage p-1's output to stage p locally).
* DualPipe: two copies of a p-stage model. Direction A (micro-batches 0..m/2-1, fed on rank 0) runs
  model stage k on rank k = harness stage k; direction B (micro-batches m/2..m-1, fed on rank p-1)
  runs model stage k on rank p-1-k = harness stage p+k = 2p-1-rank. The code's ``phase ^=
  is_in_second_half`` maps "phase 0" to direction A on the first half of the ranks and to direction B
  on the second half. Two independent chains: stages 0..p-1 and p..2p-1.

The simulator (:func:`simulate`) is an exact model of the CUDA streams the code drives, with a
transfer charged as a delay on the edge (the published simulators' model):

* one compute line per rank, running the rank's compute items in program order; a compute item
  starts at ``max(the line is free, completion of every commit issued since the previous compute
  item)`` and lasts its duration; an ``FB`` pair lasts the given group time ``G`` and both its outputs
  leave at its end (the code sends them after ``_forward_backward_compute_chunk`` returns);
* a commit's batch starts when the compute line is free (``batch_isend_irecv`` runs on the NCCL stream,
  which waits for the work already enqueued on the current stream), i.e. at the end of the last compute
  item before it (0 if none);
* a send in a batch starting at ``t`` delivers its data at ``t + c``; a receive completes when its data
  is delivered (never before its own batch starts); a commit completes when every receive in it has
  completed, and, with ``send_waits=True``, every send too (``t + c``): the code waits on the send
  requests as well. With the default ``send_waits=False`` sends never hold the sender back (edge model);
* so a compute item waits for *every* receive committed since the previous compute item, its own inputs
  and any prefetched ones: ``F1`` in step 2 waits for the next ``F0``'s input, ``W`` in step 3 for the next
  ``F1``'s, an ``FB`` pair for both members' inputs; and a send deferred past other compute (step 2's
  ``_send_forward(0)`` after ``F1``; the last rank's ``_send_forward(1)`` in step 4) leaves when its
  batch starts.

``simulate(..., prefetch=False, deferred_sends=False)`` takes the last two points away: the plain job
model (each job waits for its own inputs, a pair for both; an output leaves at its producer's end).

A pair of modules without ``overlapped_forward_backward`` runs as ``_forward_compute_chunk`` then
``_backward_compute_chunk`` inside the same commit/send bracket, i.e. as a pair with ``G = F + B``.

Not modelled: the NCCL rendezvous (a send whose receive is not yet posted is not held back), the CPU
issuing the work (it never waits: ``req.wait()`` only makes the stream wait), and the final
``_commit_and_wait_comm`` (it only waits for the last sends; compute times are unaffected).

Durations are integer ns: ``F`` forward, ``I`` backward for inputs, ``W`` backward for weights, a full
backward ``B = I + W``, an overlapped pair ``G``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = [
    "Commit",
    "Compute",
    "Msg",
    "Recv",
    "Send",
    "SimResult",
    "check_matching",
    "dualpipe_program",
    "dualpipev_program",
    "harness_groups",
    "harness_jobs",
    "simulate",
]


class Msg(NamedTuple):
    """A point-to-point message, named by its consumer: ``kind`` ``"f"`` (activation into ``F`` of
    ``stage``) or ``"b"`` (gradient into the backward of ``stage``), micro-batch ``mb``."""

    kind: str
    stage: int
    mb: int


class Recv(NamedTuple):
    msg: Msg
    peer: int


class Send(NamedTuple):
    msg: Msg
    peer: int


class Commit(NamedTuple):
    pass


class Compute(NamedTuple):
    """One compute item: ``kind`` ``F``, ``B`` (full backward), ``I`` (backward for inputs, weights
    deferred), ``W`` (the deferred weight gradients), or ``FB`` (overlapped pair: ``F`` of
    ``(stage, mb)`` with the full backward of ``(stage2, mb2)``)."""

    kind: str
    stage: int
    mb: int
    stage2: int = -1
    mb2: int = -1


Item = Recv | Send | Commit | Compute


@dataclass
class _Rank:
    """The per-rank state of ``DualPipe``/``DualPipeV`` that decides the program: counters, the
    pending ``comm_ops`` and the ``WeightGradStore`` queue."""

    rank: int
    num_ranks: int
    stage_of: tuple[int, int]  # harness stage of phase 0 / phase 1 (after the DualPipe xor)
    mb_base: tuple[int, int]  # micro-batch id offset of phase 0 / 1 (DualPipe direction B: m/2)
    is_first_stage: tuple[bool, bool]  # phase holds its chain's first stage
    is_last_stage: tuple[bool, bool]  # phase holds its chain's last stage
    fwd_peer: tuple[int, int]  # rank a phase's forward input comes from (its backward goes back there)
    bwd_peer: tuple[int, int]  # rank a phase's output goes to (its gradient comes from there)
    local_turn: bool = False  # DualPipeV's last rank: phase 0's output feeds phase 1 locally
    xor: int = 0
    items: list[Item] = field(default_factory=list)
    pending: int = 0
    f_id: list[int] = field(default_factory=lambda: [0, 0])
    b_id: list[int] = field(default_factory=lambda: [0, 0])
    send_f_id: list[int] = field(default_factory=lambda: [0, 0])
    send_b_id: list[int] = field(default_factory=lambda: [0, 0])
    recv_f_id: list[int] = field(default_factory=lambda: [0, 0])
    recv_b_id: list[int] = field(default_factory=lambda: [0, 0])
    weights: list[tuple[int, int]] = field(default_factory=list)

    # --- comm helpers (_recv_forward, _send_forward, _recv_backward, _send_backward, _commit_and_wait_comm)
    def _post(self, item: Item) -> None:
        self.items.append(item)
        self.pending += 1

    def recv_forward(self, phase: int) -> None:
        phase ^= self.xor
        if self.is_first_stage[phase] or (self.local_turn and phase == 1):
            return
        mb = self.mb_base[phase] + self.recv_f_id[phase]
        self.recv_f_id[phase] += 1
        self._post(Recv(Msg("f", self.stage_of[phase], mb), self.fwd_peer[phase]))

    def send_forward(self, phase: int) -> None:
        phase ^= self.xor
        if self.is_last_stage[phase] or (self.local_turn and phase == 0):
            return
        mb = self.mb_base[phase] + self.send_f_id[phase]
        self.send_f_id[phase] += 1
        self._post(Send(Msg("f", self.stage_of[phase] + 1, mb), self.bwd_peer[phase]))

    def recv_backward(self, phase: int) -> None:
        phase ^= self.xor
        if self.is_last_stage[phase] or (self.local_turn and phase == 0):
            return
        mb = self.mb_base[phase] + self.recv_b_id[phase]
        self.recv_b_id[phase] += 1
        self._post(Recv(Msg("b", self.stage_of[phase], mb), self.bwd_peer[phase]))

    def send_backward(self, phase: int) -> None:
        phase ^= self.xor
        if self.is_first_stage[phase] or (self.local_turn and phase == 1):
            return
        mb = self.mb_base[phase] + self.send_b_id[phase]
        self.send_b_id[phase] += 1
        self._post(Send(Msg("b", self.stage_of[phase] - 1, mb), self.fwd_peer[phase]))

    def commit(self) -> None:
        if self.pending:
            self.items.append(Commit())
            self.pending = 0

    # --- compute helpers (_forward_compute_chunk, _backward_compute_chunk, _forward_backward_compute_chunk)
    def _f(self, phase: int) -> tuple[int, int]:
        phase ^= self.xor
        mb = self.mb_base[phase] + self.f_id[phase]
        self.f_id[phase] += 1
        return self.stage_of[phase], mb

    def _b(self, phase: int) -> tuple[int, int]:
        phase ^= self.xor
        mb = self.mb_base[phase] + self.b_id[phase]
        self.b_id[phase] += 1
        return self.stage_of[phase], mb

    def forward_compute(self, phase: int) -> None:
        self.items.append(Compute("F", *self._f(phase)))

    def backward_compute(self, phase: int, enable_zb: bool) -> None:
        stage, mb = self._b(phase)
        if enable_zb:  # WeightGradStore.enabled; flush() queues this backward's weight gradients
            self.weights.append((stage, mb))
        self.items.append(Compute("I" if enable_zb else "B", stage, mb))

    def forward_backward_compute(self, phase0: int, phase1: int) -> None:
        s0, m0 = self._f(phase0)
        s1, m1 = self._b(phase1)
        self.items.append(Compute("FB", s0, m0, s1, m1))

    # --- chunk helpers, as in the code
    def forward_chunk(self, phase: int, recv: bool = True, send: bool = True) -> None:
        if recv:
            self.recv_forward(phase)
        self.commit()
        self.forward_compute(phase)
        if send:
            self.send_forward(phase)

    def backward_chunk(self, phase: int, enable_zb: bool = False, recv: bool = True, send: bool = True) -> None:
        if recv:
            self.recv_backward(phase)
        self.commit()
        self.backward_compute(phase, enable_zb)
        if send:
            self.send_backward(phase)

    def forward_backward_chunk(self, phase0: int, phase1: int, recv0: bool = True) -> None:
        if recv0:
            self.recv_forward(phase0)
        self.recv_backward(phase1)
        self.commit()
        self.forward_backward_compute(phase0, phase1)
        self.send_forward(phase0)
        self.send_backward(phase1)

    def weight_chunk(self) -> None:
        self.commit()
        stage, mb = self.weights.pop(0)  # "Assume FIFO"
        self.items.append(Compute("W", stage, mb))


def dualpipev_program(num_ranks: int, num_chunks: int) -> list[list[Item]]:
    """Per rank, the program of ``DualPipeV.step`` (dualpipev.py lines 330-398) for ``num_ranks``
    ranks (2p stages) and ``num_chunks`` micro-batches (``num_chunks >= 2 * num_ranks``)."""
    p, m = num_ranks, num_chunks
    if m < 2 * p:
        raise ValueError(f"DualPipeV needs num_chunks >= 2 * num_ranks; got p={p}, m={m}")
    out = []
    for rank in range(p):
        is_first, is_last = rank == 0, rank == p - 1
        st = _Rank(
            rank, p,
            stage_of=(rank, 2 * p - 1 - rank), mb_base=(0, 0),
            is_first_stage=(is_first, False), is_last_stage=(False, is_first),
            fwd_peer=(rank - 1, rank + 1), bwd_peer=(rank + 1, rank - 1),
            local_turn=is_last,
        )
        # Step 1: nF0
        for _ in range((p - rank - 1) * 2):
            st.forward_chunk(0)
        # Step 2: nF0F1
        step_2 = rank + 1
        st.recv_forward(0)
        for i in range(step_2):
            st.forward_chunk(0, recv=False, send=False)
            st.recv_forward(0)
            st.forward_chunk(1, send=(not is_last) or (i < step_2 - 1))
            st.send_forward(0)
        # Step 3: nB1W1F1 (Use zero bubble)
        for _ in range(p - rank - 1):
            st.backward_chunk(1, enable_zb=True)
            st.recv_forward(1)
            st.weight_chunk()
            st.forward_chunk(1, recv=False)
        # Step 4 (Main step): nF0B1F1B0
        for i in range(m - p * 2 + rank + 1):
            if i == 0:
                if is_last:
                    # NOTE: We don't overlap these two chunks to further reduce bubble size.
                    st.forward_chunk(0, recv=False, send=False)
                    st.send_forward(1)
                    st.backward_chunk(1, send=False)
                    st.send_forward(0)
                    st.send_backward(1)
                else:
                    st.forward_backward_chunk(0, 1, recv0=False)
            else:
                st.forward_backward_chunk(0, 1)
            st.forward_backward_chunk(1, 0)
        # Step 5: nB1F1B0
        for _ in range(p - rank - 1):
            st.backward_chunk(1)
            st.forward_backward_chunk(1, 0)
        # Step 6: nB1B0 (The second half of the chunks use zero bubble)
        step_6 = rank + 1
        enable_zb = False
        for i in range(step_6):
            if i == step_6 // 2 and rank % 2 == 1:
                enable_zb = True
            st.backward_chunk(1, enable_zb=enable_zb)
            if i == step_6 // 2 and rank % 2 == 0:
                enable_zb = True
            st.backward_chunk(0, enable_zb=enable_zb)
        # Step 7: nWB0 (Use zero bubble)
        for _ in range(p - rank - 1):
            st.weight_chunk()
            st.backward_chunk(0, enable_zb=True)
        # Step 8: nW
        for _ in range(rank + 1):
            st.weight_chunk()
        assert not st.weights
        st.commit()
        out.append(st.items)
    return out


def dualpipe_program(num_ranks: int, num_chunks: int) -> list[list[Item]]:
    """Per rank, the program of ``DualPipe.step`` (dualpipe.py lines 330-427) for ``num_ranks``
    ranks (even; p-stage model, two copies) and ``num_chunks`` micro-batches (even,
    ``>= 2 * num_ranks``): micro-batches ``0..m/2-1`` go rank 0 -> p-1 (harness stages 0..p-1),
    ``m/2..m-1`` rank p-1 -> 0 (harness stages p..2p-1)."""
    p, m = num_ranks, num_chunks
    if p % 2 or m % 2 or m < 2 * p:
        raise ValueError(f"DualPipe needs an even num_ranks and an even num_chunks >= 2 * num_ranks; got p={p}, m={m}")
    half_ranks, half_chunks = p // 2, m // 2
    out = []
    for rank in range(p):
        is_first, is_last = rank == 0, rank == p - 1
        second = int(rank >= half_ranks)
        is_middle = rank in (half_ranks - 1, half_ranks)
        half_rank = min(rank, p - 1 - rank)
        # module[0] is direction A's stage `rank`, module[1] direction B's model stage p-1-rank
        st = _Rank(
            rank, p,
            stage_of=(rank, 2 * p - 1 - rank), mb_base=(0, half_chunks),
            is_first_stage=(is_first, is_last), is_last_stage=(is_last, is_first),
            fwd_peer=(rank - 1, rank + 1), bwd_peer=(rank + 1, rank - 1),
            xor=second,
        )
        # Step 1: nF0
        for _ in range((half_ranks - half_rank - 1) * 2):
            st.forward_chunk(0)
        # Step 2: nF0F1
        step_2 = half_rank + 1
        st.recv_forward(0)
        for i in range(step_2):
            st.forward_chunk(0, recv=False, send=is_middle)
            st.recv_forward(0)
            st.forward_chunk(1, send=(not is_middle) or (i < step_2 - 1))
            if not is_middle:
                st.send_forward(0)
        # Step 3: nB1W1F1 (Use zero bubble)
        for _ in range(half_ranks - half_rank - 1):
            st.backward_chunk(1, enable_zb=True)
            st.recv_forward(1)
            st.weight_chunk()
            st.forward_chunk(1, recv=False)
        # Step 4 (Main step): nF0B1F1B0
        for i in range(half_chunks - p + half_rank + 1):
            if i == 0:
                if is_middle:
                    # NOTE: We don't overlap these two chunks to further reduce bubble size.
                    st.forward_chunk(0, recv=False, send=False)
                    st.send_forward(1)
                    st.backward_chunk(1, send=False)
                    st.send_forward(0)
                    st.send_backward(1)
                else:
                    st.forward_backward_chunk(0, 1, recv0=False)
            else:
                st.forward_backward_chunk(0, 1)
            st.forward_backward_chunk(1, 0)
        # Step 5: nB1F1B0
        for _ in range(half_ranks - half_rank - 1):
            st.backward_chunk(1)
            st.forward_backward_chunk(1, 0)
        # Step 6: nB1B0 (The second half of the chunks use zero bubble)
        step_6 = half_rank + 1
        enable_zb = False
        for i in range(step_6):
            if i == step_6 // 2 and half_rank % 2 == 1:
                enable_zb = True
            st.backward_chunk(1, enable_zb=enable_zb)
            if i == step_6 // 2 and half_rank % 2 == 0:
                enable_zb = True
            st.backward_chunk(0, enable_zb=enable_zb)
        # Step 7: nWB0 (Use zero bubble)
        for _ in range(half_ranks - half_rank - 1):
            st.weight_chunk()
            st.backward_chunk(0, enable_zb=True)
        # Step 8: nW
        for _ in range(half_rank + 1):
            st.weight_chunk()
        assert not st.weights
        st.commit()
        out.append(st.items)
    return out


def harness_jobs(program: list[list[Item]]) -> list[list[str]]:
    """Per rank, the compute items as pipeline-harness job text (``2F0``; a pair as its forward then
    its backward, ``0F3``, ``5B1``), in program order."""
    rows = []
    for items in program:
        row: list[str] = []
        for it in items:
            if isinstance(it, Compute):
                if it.kind == "FB":
                    row += [f"{it.stage}F{it.mb}", f"{it.stage2}B{it.mb2}"]
                else:
                    row.append(f"{it.stage}{it.kind}{it.mb}")
        rows.append(row)
    return rows


def harness_groups(program: list[list[Item]]) -> list[tuple[str, str]]:
    """Every overlapped pair as ``(forward, backward)`` job text, rank by rank."""
    return [(f"{it.stage}F{it.mb}", f"{it.stage2}B{it.mb2}")
            for items in program for it in items if isinstance(it, Compute) and it.kind == "FB"]


def check_matching(program: list[list[Item]]) -> None:
    """Self-check of a transcription: every message is sent once and received once (or consumed
    locally), and between every two ranks the sends and the receives are posted in the same order
    (NCCL matches point-to-point operations between two peers in posting order; same-shaped tensors
    would otherwise be silently swapped). Raises ``AssertionError``."""
    sends: dict[tuple[int, int], list[Msg]] = {}
    recvs: dict[tuple[int, int], list[Msg]] = {}
    for r, items in enumerate(program):
        for it in items:
            if isinstance(it, Send):
                sends.setdefault((r, it.peer), []).append(it.msg)
            elif isinstance(it, Recv):
                recvs.setdefault((it.peer, r), []).append(it.msg)
    assert sends.keys() == recvs.keys(), (sorted(sends), sorted(recvs))
    for pair, msgs in sends.items():
        assert msgs == recvs[pair], (pair, msgs, recvs[pair])


@dataclass(frozen=True)
class SimResult:
    """Per rank (ns): ``busy`` (compute time, a pair counted once for its ``G``), ``first``/``last``
    (first compute start, last compute end), ``idle = makespan - busy``, ``span_idle = last - first -
    busy``; ``makespan`` the step time (last compute end of any rank, all ranks starting at 0);
    ``starts``/``ends``: per rank, each compute item's times in program order."""

    makespan: int
    busy: list[int]
    first: list[int]
    last: list[int]
    starts: list[list[int]]
    ends: list[list[int]]

    @property
    def idle(self) -> list[int]:
        return [self.makespan - b for b in self.busy]

    @property
    def span_idle(self) -> list[int]:
        return [l - f - b for f, l, b in zip(self.first, self.last, self.busy)]


def _inputs(it: Compute) -> set[Msg]:
    """The messages a compute item consumes itself (``W`` none; a local hand-over is no message)."""
    if it.kind == "F":
        return {Msg("f", it.stage, it.mb)}
    if it.kind in ("B", "I"):
        return {Msg("b", it.stage, it.mb)}
    if it.kind == "FB":
        return {Msg("f", it.stage, it.mb), Msg("b", it.stage2, it.mb2)}
    return set()


def _outputs(it: Compute) -> list[Msg]:
    """The messages a compute item produces (named by their consumers)."""
    if it.kind == "F":
        return [Msg("f", it.stage + 1, it.mb)]
    if it.kind in ("B", "I"):
        return [Msg("b", it.stage - 1, it.mb)]
    if it.kind == "FB":
        return [Msg("f", it.stage + 1, it.mb), Msg("b", it.stage2 - 1, it.mb2)]
    return []


def simulate(program: list[list[Item]], F: int, I: int, W: int, G: int | None = None, c: int = 0,  # noqa: N803
             *, prefetch: bool = True, deferred_sends: bool = True, send_waits: bool = False) -> SimResult:
    """Exact timeline of ``program`` (module doc). ``F``, ``I``, ``W``: ns per job, every stage alike;
    ``G``: ns of an overlapped pair (default ``F + I + W``, no overlap); ``c``: ns per transfer.

    The defaults are the code's semantics under the edge model. Three switches take parts of it
    away, to compare with a plain job model (each job waits for its own inputs, a producer's output
    leaves at its end):

    * ``prefetch=False``: a compute item waits only for the receives of its own inputs, not for the
      others committed with them (they are waited for by the item that consumes them);
    * ``deferred_sends=False``: a send leaves at its producer's end, not when its batch starts;
    * ``send_waits=True`` (off by default) adds the code's wait on the send requests: a commit
      completes only ``c`` after its batch starts when it holds a send.

    Raises:
        RuntimeError: the program deadlocks (a receive whose send is never committed).
    """
    durations = {"F": F, "B": I + W, "I": I, "W": W, "FB": F + I + W if G is None else G}
    p = len(program)
    pos = [0] * p
    free = [0] * p  # the compute line is free at
    committed: list[dict[Msg, int]] = [{} for _ in range(p)]  # received messages not yet waited for -> batch start
    sends_done = [0] * p  # with send_waits: the latest committed send's completion not yet waited for
    delivered: dict[Msg, int] = {}
    produced: dict[Msg, int] = {}  # output -> end of the compute item that made it
    starts: list[list[int]] = [[] for _ in range(p)]
    ends: list[list[int]] = [[] for _ in range(p)]
    busy = [0] * p
    while any(pos[r] < len(program[r]) for r in range(p)):
        progressed = False
        for r in range(p):
            items = program[r]
            while pos[r] < len(items):
                it = items[pos[r]]
                if isinstance(it, Compute):
                    own = _inputs(it)
                    need = [msg for msg in committed[r] if prefetch or msg in own]
                    if any(msg not in delivered for msg in need):
                        break  # a sender has not committed yet
                    t = max([free[r], sends_done[r]] + [max(delivered[msg], committed[r][msg]) for msg in need])
                    for msg in need:
                        del committed[r][msg]
                    sends_done[r] = 0
                    d = durations[it.kind]
                    starts[r].append(t)
                    ends[r].append(t + d)
                    free[r] = t + d
                    busy[r] += d
                    for msg in _outputs(it):
                        produced[msg] = t + d
                elif isinstance(it, Commit):
                    # the batch: the ops posted since the previous commit; it starts when the compute line
                    # is free (the NCCL stream waits for the work already on the current stream)
                    k = pos[r] - 1
                    while k >= 0 and isinstance(items[k], (Send, Recv)):
                        op = items[k]
                        if isinstance(op, Recv):
                            committed[r][op.msg] = free[r]
                        elif isinstance(op, Send):
                            delivered[op.msg] = (free[r] if deferred_sends else produced[op.msg]) + c
                            if send_waits:
                                sends_done[r] = max(sends_done[r], free[r] + c)
                        k -= 1
                pos[r] += 1
                progressed = True
        if not progressed:
            stuck = [(r, program[r][pos[r]]) for r in range(p) if pos[r] < len(program[r])]
            raise RuntimeError(f"deadlock: {stuck}")
    first = [s[0] if s else 0 for s in starts]
    last = [e[-1] if e else 0 for e in ends]
    return SimResult(max(last, default=0), busy, first, last, starts, ends)
