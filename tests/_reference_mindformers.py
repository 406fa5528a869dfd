"""mindformers' pipeline_balance simulator, transcribed as a test oracle (bubbles and peak memory).

Transcribes ``toolkit/pipeline_balance/simulator/pp_simulator.py``, ``sim_block.py`` and
``pipeline_builder.py`` of mindspore-ai/mindformers at commit
6be67890003309149503c1232c1700c904c2cf2a (the parent of c5cc799e3, "del pipeline balance",
which deleted the toolkit). Its ``PipelineSimulator`` docstring prints the figures this
module reproduces (:data:`DOCSTRING_EXAMPLES`).

What the simulator does, in its own terms:

* one "block" per forward (``f``) and backward (``b``) of a micro-batch and chunk on a
  stage (= rank, ``p``); 1F1B (``build_1f1b``) or interleaved (``build_virtualpipeline``)
  order per stage; a backward block lasts ``backward_ratio * F + recompute``: the
  recomputation is extra time inside the backward block (``_statistic_init``);
* with communication (``run(comm=True)``): a ``SendBlockSim`` after each producer and a
  ``RecBlockSim`` before each consumer on another stage, both on the stage's own line for
  ``comm_time``; a send starts at ``max(end of the job before it on its line, end of the
  job before its receive on the receiver's line)``, its receive at ``max(end of the job
  before it, start of the send)``: a rendezvous, both start together
  (``SendBlockSim.build_with_comm``, ``RecBlockSim.build_with_comm``);
* before timing, reordering passes move sends and receives (``swap_send_rec``;
  interleaved with ``m >= p``: ``vpp_send_delay`` when ``m % p == 0``, ``residue_delay``
  otherwise, both before ``swap_send_rec``);
* bubble ``real = (p * end - W) / W`` with ``W`` the model's compute time without
  recomputation, ``sum(F + backward_ratio * F) * m``; so recomputation counts as bubble,
  reported as its own term ``recompute = (W + R) / W - 1``; ``comm`` is a closed-form
  estimate (``_statistic_init``), not measured; ``imba`` the rest.

Changes from the original:

* no plotting, colours, printing or ``CausalError`` drawing (a dependency loop raises
  ``RuntimeError``);
* the memoised recursive timing (``dfs_builder``) is an explicit-stack evaluation of the
  same recurrences (identical values, no recursion limit);
* ``memory="first"`` (default) frees a backward's memory from the chunk the first version
  (5b81ad97a) used, ``block_mem[i]`` for the ``i``-th backward chunk, which is what the
  docstring's multi-chunk memory figures were printed with; ``memory="fixed"`` uses
  ``block_mem[vp - 1 - i]`` (commit 92f18cbba, "fix memory of different chunks"). Timing is
  the same in every version from 5b81ad97a to the parent of c5cc799e3;
* ``block_mem_par`` and ``constant_mem`` (added in 784d58261) are left out: at the parent
  of c5cc799e3 ``run(comm=True)`` fails on them (``lines[p][0]`` is a ``RecBlockSim``,
  which has no ``mem_par``), so the docstring's figures with communication can only come
  from the earlier code;
* the constructor takes ``comm_time``, ``layer_recompute`` and ``block_mem`` by keyword
  only, as the original does (its docstring's third example passes them positionally,
  which the original's ``*args`` swallows; its printed figures are those of the keywords).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["DOCSTRING_EXAMPLES", "MfBlock", "MindformersSimulator"]


@dataclass(eq=False)
class MfBlock:
    """A block of mindformers' simulator: compute (``c``), send (``s``), receive (``r``) or
    the head of a line (``h``). Times are in the simulator's own unit (relative layer time)."""

    stage: int
    state: str  # 'f' or 'b' ('' for the head)
    mb: int
    chunk: int  # for 'b' blocks: the index in backward order (model chunk vp - 1 - chunk)
    time: float
    type: str
    mem: float = 0.0
    phase: str | None = None
    start: float | None = None
    end: float | None = None
    pre: MfBlock | None = field(default=None, repr=False)
    left: MfBlock | None = field(default=None, repr=False)
    right: MfBlock | None = field(default=None, repr=False)
    depend_pre: MfBlock | None = field(default=None, repr=False)
    depend_left: MfBlock | None = field(default=None, repr=False)
    send_block: MfBlock | None = field(default=None, repr=False)
    rec_block: MfBlock | None = field(default=None, repr=False)
    host: MfBlock | None = field(default=None, repr=False)
    dual: MfBlock | None = field(default=None, repr=False)

    @property
    def label(self) -> tuple[Any, ...]:
        if self.type == "h":
            return ("h", self.stage)
        return (self.type, self.state, self.mb, self.chunk, self.stage)


def _head(p: int) -> MfBlock:
    return MfBlock(p, "", -1, -1, 0.0, "h", start=0.0, end=0.0)


def _format_2d(a: Any, vp: int, pp: int) -> np.ndarray:
    """``format_2d_inputs``: a number broadcast to ``(vp, pp)``, a list as one row, a list of lists as is."""
    if isinstance(a, (int, float)):
        return np.broadcast_to(float(a), (vp, pp))
    if all(isinstance(x, (list, tuple)) for x in a):
        return np.array(a, dtype=float)
    return np.array([a], dtype=float)


def _inter_merge(a: list[MfBlock], b: list[MfBlock], delta: int) -> list[MfBlock]:
    """``PipelineBuilder._inter_merge``: ``delta`` forwards, then forward/backward pairs, then the rest."""
    res: list[MfBlock] = []
    if delta >= 0:
        res.extend(a[:delta])
        a = a[delta:]
    else:
        res.extend(b[:-delta])
        b = b[-delta:]
    stable = 0
    while a:
        blk = a.pop(0)
        blk.phase = "stable"
        res.append(blk)
        stable += 1
        if b:
            blk = b.pop(0)
            blk.phase = "stable"
            res.append(blk)
            stable += 1
        else:
            break
    if stable:
        res[-1].phase = "cooldown"
    res.extend(a if a else b)
    return res


def _chain(line: list[MfBlock], p: int) -> list[MfBlock]:
    """``PipelineBuilder._build_chain``: link a stage's blocks left to right behind a head."""
    head = _head(p)
    left = head
    for item in line:
        left.right = item
        item.left = left
        left = item
    if p == 0:
        line[0].pre = head
    return line


class MindformersSimulator:
    """``PipelineSimulator`` (see module doc) for bubbles and peak memory.

    Args:
        block_time: forward time per stage (a list), or per chunk and stage (a list of lists,
            outer = chunk).
        micro_num: micro-batches, ``>= p``.
        comm_time: time of a send and of a receive block.
        layer_recompute: ``True``/``False`` (recompute all / nothing) or per-block recompute time.
        block_mem: memory per unit of forward time (a number) or per block (list(s)).
        backward_ratio: backward time / forward time.
        method: ``"vpp"`` (default with chunks) or ``"vpp2"``.
        memory: ``"first"`` or ``"fixed"`` (see module doc).
    """

    def __init__(self, block_time: list[Any], micro_num: int, *, comm_time: float = 0.1,
                 layer_recompute: Any = False, block_mem: Any = 1, backward_ratio: Any = 2.0,
                 method: str = "vpp", memory: str = "first") -> None:
        self.micro_num = micro_num
        if all(isinstance(x, (list, tuple)) for x in block_time):
            self.vp, self.pp = len(block_time), len(block_time[0])
        else:
            self.vp, self.pp = 1, len(block_time)
        if micro_num < self.pp:
            raise ValueError(f"micro_num ({micro_num}) must be >= pp ({self.pp})")
        self.block_num = 2 * self.vp * micro_num
        self.comm_time = comm_time
        self.block_time = _format_2d(block_time, self.vp, self.pp)
        if isinstance(layer_recompute, bool):
            self.layer_recompute = self.block_time if layer_recompute else _format_2d(0, self.vp, self.pp)
        else:
            self.layer_recompute = _format_2d(layer_recompute, self.vp, self.pp)
        self.block_mem = self.block_time * block_mem if isinstance(block_mem, (int, float)) else _format_2d(block_mem, self.vp, self.pp)
        self.backward_ratio = _format_2d(backward_ratio, self.vp, self.pp)
        self.memory = memory
        self._statistic_init()
        self.adjust = [self.swap_send_rec]
        if self.vp == 1:
            method = "1f1b"
        elif micro_num >= self.pp:
            self.adjust = [self.vpp_send_delay, self.residue_delay, *self.adjust]
        self.method = method
        self.blocks = [self._build_stage(p) for p in range(self.pp)]
        self._build_block()
        self._build_comm_block()

    # ---- construction (pipeline_builder.py) -------------------------------------------
    def _build_stage(self, p: int) -> list[MfBlock]:
        ft, bt, mem = self.block_time[:, p], self.backward_time[:, p], self.block_mem[:, p]
        pp, vp, m = self.pp, self.vp, self.micro_num
        if self.method == "1f1b":
            fl = [MfBlock(p, "f", i, 0, ft[0], "c", mem=mem[0], phase="warmup") for i in range(m)]
            bl = [MfBlock(p, "b", i, 0, bt[0], "c", mem=mem[0], phase="cooldown") for i in range(m)]
            return _chain(_inter_merge(fl, bl, pp - p - 1), p)
        fl, bl = [], []
        r = m % pp
        for inter in range(m // pp):
            for i in range(vp):
                bmem = mem[i] if self.memory == "first" else mem[vp - 1 - i]
                ids = (list(range(r)) if inter == 0 else []) + [r + k + inter * pp for k in range(pp)]
                fl.extend(MfBlock(p, "f", k, i, ft[i], "c", mem=mem[i], phase="warmup") for k in ids)
                bl.extend(MfBlock(p, "b", k, i, bt[i], "c", mem=bmem, phase="cooldown") for k in ids)
        delta = (vp + 1) * pp - 2 * p - 2 + r * (vp - 1) if self.method == "vpp" else vp * pp - p - 1
        return _chain(_inter_merge(fl, bl, delta), p)

    def _statistic_init(self) -> None:
        self.forward_time = self.block_time
        self.backward_time = np.flip(self.block_time * self.backward_ratio + self.layer_recompute, axis=0)
        m = self.micro_num
        self.model_compute_time = (np.sum(self.forward_time) + np.sum(self.forward_time * self.backward_ratio)) * m
        self.hardware_compute_time = (np.sum(self.forward_time) + np.sum(self.backward_time)) * m
        self.bubbles: dict[str, float] = {"real": 0.0, "ideal": (self.pp - 1) / self.vp / m, "imba": 0.0, "comm": 0.0}
        if np.sum(self.layer_recompute) > 1e-5:
            self.bubbles["recompute"] = self.hardware_compute_time / self.model_compute_time - 1
        p, v = self.pp, self.vp
        if v == 1:
            if p == 2:
                comm = 4 * m
            elif p % 2 == 0:
                comm = 4 * p * m + 4 * p ** 2 - 14 * p
            else:
                comm = 4 * p * m + 4 * p ** 2 - 12 * p
        elif p <= 5:
            coef = [[4, -2, 0], [6, -2, -6], [4, 0, 12], [6, -2, 40]]
            comm = float(np.dot(np.array([p * v * m, m * p, 1]), coef[p - 2]))
        elif p % 2 == 0:
            comm = 4 * p * v * m + 4 * p ** 2 - 13 * p
        else:
            comm = 6 * p * v * m - 2 * v * p ** 2 + 4 * v * p - 2 * p * m + 6 * p ** 2 - 16 * p
        self.bubbles["comm"] = comm * self.comm_time / self.model_compute_time

    def _pre_label(self, label: tuple[Any, ...]) -> tuple[Any, ...]:
        """``_get_pre_label``: the block a block's input comes from."""
        t, s, m, v, p = label
        if (s, v, p) == ("f", 0, 0):
            return ("h", p)
        if (s, p) == ("f", 0):
            return (t, s, m, v - 1, self.pp - 1)
        if (s, p) == ("b", self.pp - 1):
            return (t, "f", m, self.vp - 1, p) if v == 0 else (t, s, m, v - 1, 0)
        return (t, s, m, v, p - 1) if s == "f" else (t, s, m, v, p + 1)

    def _build_block(self) -> None:
        books = {self.blocks[0][0].pre.label: self.blocks[0][0].pre}  # type: ignore[union-attr]
        for line in self.blocks:
            for blk in line:
                books[blk.label] = blk
        for line in self.blocks:
            for blk in line:
                blk.pre = books.get(self._pre_label(blk.label))

    def _build_comm_block(self) -> None:
        for p, line in enumerate(self.blocks):
            for blk in line:
                pre = blk.pre
                assert pre is not None
                if pre.stage != blk.stage:
                    rec = MfBlock(p, blk.state, blk.mb, blk.chunk, self.comm_time, "r")
                    snd = MfBlock(pre.stage, pre.state, pre.mb, pre.chunk, self.comm_time, "s")
                    blk.rec_block, pre.send_block = rec, snd
                    rec.host, rec.dual, snd.host, snd.dual = blk, snd, pre, rec
                    blk.depend_pre, rec.depend_pre, snd.depend_pre = rec, snd, pre
                else:
                    blk.depend_pre = pre

    # ---- lines and reordering passes (pp_simulator.py) --------------------------------
    def _create_lines(self) -> list[list[MfBlock]]:
        lines = [copy.copy(self.blocks[p]) for p in range(self.pp)]
        for p in range(self.pp):
            for b in range(self.block_num):
                blk = self.blocks[p][b]
                pre = blk.pre
                if blk.rec_block:
                    lines[p].insert(lines[p].index(blk), blk.rec_block)
                    if pre.type == "h":  # type: ignore[union-attr]
                        lines[pre.stage].insert(0, pre.send_block)  # type: ignore[union-attr, arg-type]
                    else:
                        lines[pre.stage].insert(lines[pre.stage].index(pre) + 1, pre.send_block)  # type: ignore[union-attr, arg-type]
        for func in self.adjust:
            lines = func(lines)
        for line in lines:
            for b, blk in enumerate(line):
                blk.depend_left = (blk.left if blk.left else blk.host.left) if b == 0 else line[b - 1]  # type: ignore[union-attr]
        return lines

    def _send_block_delay(self, lines: list[list[MfBlock]], p: int, b: int, distance: int) -> None:
        """Move the send of compute block ``b`` of stage ``p`` to just after compute block ``b + distance``."""
        snd = lines[p].pop(lines[p].index(self.blocks[p][b].send_block))  # type: ignore[arg-type]
        lines[p].insert(lines[p].index(self.blocks[p][b + distance]) + 1, snd)

    def _process_swap(self, blk: MfBlock, lines: list[list[MfBlock]], p: int, b: int, i_b: int, i_bn: int) -> bool:
        line = lines[p]
        if i_bn - i_b == 3:
            if p % 2 == 0 and line[i_b + 1].type == "r" and line[i_b + 2].type == "s":
                line[i_b + 1], line[i_b + 2] = line[i_b + 2], line[i_b + 1]
            if p % 2 == 1 and line[i_b + 1].type == "s" and line[i_b + 2].type == "r":
                if blk.phase == "warmup" and self.blocks[p][b + 1].phase == "cooldown":
                    return False
                line[i_b + 1], line[i_b + 2] = line[i_b + 2], line[i_b + 1]
            if line[i_b + 1].dual.stage == line[i_b + 2].dual.stage:  # type: ignore[union-attr]
                pd = line[i_b + 1].dual.stage  # type: ignore[union-attr]
                if lines[pd].index(line[i_b + 1].dual) > lines[pd].index(line[i_b + 2].dual):  # type: ignore[arg-type]
                    line[i_b + 1], line[i_b + 2] = line[i_b + 2], line[i_b + 1]
        if i_bn - i_b == 4:
            d1, d2, d3 = (line[i_b + k].dual.stage for k in (1, 2, 3))  # type: ignore[union-attr]
            if d1 == d2 == d3 and [line[i_b + k].type for k in (1, 2, 3)] == ["s", "s", "r"]:
                line[i_b + 1], line[i_b + 2] = line[i_b + 2], line[i_b + 1]
        return True

    def swap_send_rec(self, lines: list[list[MfBlock]]) -> list[list[MfBlock]]:
        """Between two compute blocks: even stages send before they receive, odd stages receive
        first (not from a warm-up block into a cool-down one); two transfers with the same peer
        in the peer's order; a send, a send and a receive with one peer: the sends swapped."""
        for p in range(self.pp):
            for b, blk in enumerate(self.blocks[p]):
                if b >= len(self.blocks[p]) - 1:
                    continue
                i_b = lines[p].index(blk)
                i_bn = lines[p].index(self.blocks[p][b + 1])
                self._process_swap(blk, lines, p, b, i_b, i_bn)
        return lines

    def vpp_send_delay(self, lines: list[list[MfBlock]]) -> list[list[MfBlock]]:
        """``m % p == 0``: every send of a steady-phase block moves after the next compute block."""
        if self.micro_num % self.pp != 0:
            return lines
        for p in range(self.pp):
            for b, blk in enumerate(self.blocks[p]):
                if blk.send_block is not None and blk.phase == "stable":
                    self._send_block_delay(lines, p, b, 1)
        return lines

    def residue_delay(self, lines: list[list[MfBlock]]) -> list[list[MfBlock]]:
        """``m % p = r != 0``: the last stage's early forward sends and the first stage's early
        backward sends move later; other steady-phase sends after the next compute block."""
        r = self.micro_num % self.pp
        if r == 0:
            return lines
        for p in range(self.pp):
            for b, blk in enumerate(self.blocks[p]):
                if blk.send_block is None:
                    continue
                if p == self.pp - 1 and blk.mb < self.pp + r and blk.state == "f":
                    self._send_block_delay(lines, -1, b, r + max(0, blk.mb - self.pp + 1))
                elif p == 0 and blk.mb < self.pp + r and blk.state == "b":
                    self._send_block_delay(lines, 0, b, r if self.micro_num // self.pp == 1 else r + self.pp)
                elif blk.phase == "stable":
                    self._send_block_delay(lines, p, b, 1)
        return lines

    # ---- timing (sim_block.py) ----------------------------------------------------------
    @staticmethod
    def _needs(blk: MfBlock, comm: bool) -> list[MfBlock]:
        if blk.type == "h":
            return []
        if not comm:
            return [blk.pre, blk.left]  # type: ignore[list-item]
        if blk.type == "s":
            return [blk.depend_left, blk.dual.depend_left]  # type: ignore[list-item, union-attr]
        if blk.type == "r":
            return [blk.depend_left, blk.dual]  # type: ignore[list-item]
        return [blk.depend_pre, blk.depend_left]  # type: ignore[list-item]

    @staticmethod
    def _time(blk: MfBlock, comm: bool) -> None:
        if blk.type == "h":
            return
        if not comm:
            blk.start = max(blk.pre.end, blk.left.end)  # type: ignore[union-attr, type-var]
        elif blk.type == "s":
            blk.start = max(blk.depend_left.end, blk.dual.depend_left.end)  # type: ignore[union-attr, type-var]
        elif blk.type == "r":
            blk.start = max(blk.depend_left.end, blk.dual.start)  # type: ignore[union-attr, type-var]
        else:
            blk.start = max(blk.depend_pre.end, blk.depend_left.end)  # type: ignore[union-attr, type-var]
        blk.end = blk.start + blk.time  # type: ignore[operator]

    def _evaluate(self, roots: list[MfBlock], comm: bool) -> None:
        """Time every block reachable from ``roots`` (the memoised DFS of ``dfs_builder``)."""
        done: set[int] = set()
        on_stack: set[int] = set()
        for root in roots:
            stack = [root]
            while stack:
                blk = stack[-1]
                if id(blk) in done or blk.type == "h":
                    stack.pop()
                    continue
                on_stack.add(id(blk))
                todo = [d for d in self._needs(blk, comm) if id(d) not in done and d.type != "h"]
                if todo:
                    for d in todo:
                        if id(d) in on_stack:
                            raise RuntimeError(f"dependency loop at {d.label}")
                        stack.append(d)
                    continue
                self._time(blk, comm)
                done.add(id(blk))
                on_stack.discard(id(blk))
                stack.pop()

    def run(self, comm: bool = True) -> MindformersSimulator:
        """``run(comm, print_info=False)``: time the pipeline with or without send/receive blocks."""
        self._comm = comm
        if comm:
            self.lines = self._create_lines()
            roots = [self.blocks[p][b] for b in range(self.block_num) for p in range(self.pp)] + [self.lines[0][-1]]
        else:
            roots = [blk for line in self.blocks for blk in line]
        self._evaluate(roots, comm)
        self._statistic_info()
        return self

    def _statistic_info(self) -> None:
        lines = self.lines if self._comm else self.blocks
        self.peak_memory: list[float] = []
        end = 0.0
        for line in lines:
            mem, peak = 0.0, 0.0
            for blk in line:
                if blk.type == "c" and blk.state == "f":
                    mem += blk.mem
                elif blk.type == "c" and blk.state == "b":
                    if not self._comm or not blk.rec_block:
                        mem -= blk.mem
                elif blk.type == "r" and blk.host.state == "b":  # type: ignore[union-attr]
                    mem -= blk.host.mem  # type: ignore[union-attr]
                    blk = blk.host  # type: ignore[assignment]
                else:
                    continue
                peak = max(peak, mem)
                end = max(end, blk.end)  # type: ignore[type-var]
            end = max(end, line[-1].end)  # type: ignore[type-var]
            self.peak_memory.append(peak)
        self.end_time = end
        w = self.model_compute_time
        self.bubbles["real"] = (self.pp * end - w) / w
        self.bubbles["imba"] = self.bubbles["real"] - self.bubbles["ideal"] + 1e-10
        if not self._comm:
            self.bubbles.pop("comm")
        else:
            self.bubbles["imba"] -= self.bubbles["comm"]
        if self.bubbles.get("recompute"):
            self.bubbles["imba"] -= self.bubbles["recompute"]


#: The ``PipelineSimulator`` docstring's examples: (block_time, micro_num, keyword arguments,
#: comm for ``run``, printed bubbles, printed peak memory (first version's chunk rule)).
DOCSTRING_EXAMPLES: dict[str, tuple[Any, int, dict[str, Any], bool, dict[str, float], list[float]]] = {
    "ex1": ([8, 8, 8, 8 + 0.8], 16, {"comm_time": 0.1}, True,
            {"real": 0.2658, "ideal": 0.1875, "imba": 0.0615, "comm": 0.0168}, [32.00, 24.00, 16.00, 8.80]),
    "ex2": ([[2, 2, 2, 2], [1, 2, 3, 2 + 1.2]], 8, {"comm_time": 0.1}, True,
            {"real": 0.4971, "ideal": 0.1875, "imba": 0.2447, "comm": 0.0649}, [18.00, 18.00, 18.00, 14.80]),
    "ex3": ([[2] * 8, [2] * 8, [2] * 7 + [2 + 0.6]], 16,
            {"comm_time": 0.1,
             "layer_recompute": [[0] * 8, [1] + [0] * 7, [2, 2, 1] + [0] * 5],
             "block_mem": [[2] * 8, [1.1] + [2] * 7, [0.2, 0.2, 1.1] + [2] * 5]}, True,
            {"real": 0.4444, "ideal": 0.1458, "imba": 0.1851, "comm": 0.0724, "recompute": 0.0412},
            [40.40, 43.60, 46.80, 50.00, 46.00, 42.00, 38.00, 34.00]),
    "ex4": ([[3] * 15, [3] * 8 + [4] * 6 + [3 + 1.2]], 16, {}, False,
            {"real": 0.5741, "ideal": 0.4375, "imba": 0.1366},
            [96.00] * 7 + [93.00, 103.00, 97.00, 91.00, 85.00, 79.00, 73.00, 70.20]),
}


if __name__ == "__main__":
    for name, (bt, m, kw, comm, bubbles, peaks) in DOCSTRING_EXAMPLES.items():
        for c in (True, False):
            sim = MindformersSimulator(bt, m, **kw).run(c)
            got = {k: round(float(v), 4) for k, v in sim.bubbles.items()}
            mark = ""
            if c == comm:
                ok = got == bubbles and [round(float(x), 2) for x in sim.peak_memory] == peaks
                mark = "docstring OK" if ok else f"docstring MISMATCH {bubbles} {peaks}"
            print(name, "comm" if c else "no comm", got, "end", round(float(sim.end_time), 6),
                  [round(float(x), 2) for x in sim.peak_memory], mark)
