"""Rank 0's side of a ``torch`` backend run: the gathered ranks as run records, through the import's own path.

The hooks (:mod:`harness.distributed.torch_timing`) measure what a ``torch.profiler`` trace of the
same run shows: per ``PP:`` range its start and end, where its compute starts (the stage call's
entry; in a trace, its first operator), and the end of its wait for a receive (in a trace, the
``gloo:recv`` span's end). So each rank becomes the :class:`~harness.actions.torch_rank.TorchRank`
an import of its trace would give, on rank 0's clock (each rank's ``perf_counter_ns`` shifted by
its Cristian estimate with linear drift, :mod:`harness.distributed.clock_sync`, then to epoch ns by
rank 0's ``time_ns() - perf_counter_ns()``), and the run goes through the import's assembly
(:func:`harness.actions.torch_assemble.assemble`): the same records (compute jobs from their
compute start to their range's end, the loss inside the last stage's ``F``; ``SEND_*``/``RECV_*``
jobs as their posting ranges; ``UNSHARD``/``RESHARD``/``REDUCE_GRAD`` as host actions, not jobs;
each stage's optimizer step as its ``OPT`` job), the recovered schedule, and ``import-torch`` of
the run's traces gives them again.

What PyTorch's lowering and runtime added, per rank, median over the recorded steps, ns
(:func:`lowering_added`): ``recv_wait`` (waits for receives inside compute actions), ``send_wait``
(the end-of-step wait for the step's sends), ``post`` (the ``SEND_*``/``RECV_*`` ranges: posting),
``host`` (``UNSHARD``/``RESHARD``/``REDUCE_GRAD`` ranges), ``compute`` (the compute calls, the loss
included), ``in_range_other`` (Python inside compute ranges around the calls), ``gaps`` (the rest of
the ``step()`` call: between actions, splitting the input), ``optimizer`` (the ``OPT`` ranges after
``step()``).

Causality is checked as PyTorch's runtime allows it: a receive is *posted* early, often before
its send (so the posting ranges say nothing), but its data cannot have arrived before the send
was posted: every wait end must be at or after its send's start (within the clock bounds).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.actions.torch_action import TorchAction
from harness.actions.torch_assemble import TorchRun, assemble
from harness.actions.torch_rank import TorchRank
from harness.distributed.clock_sync import ClockAlignment, align, best_exchange
from harness.errors import ExecutionError
from harness.records import RunRecords, WindowOutcome
from harness.schedule.model import parse_job

__all__ = ["TorchBackendRun", "assemble_run", "lowering_added"]

_COMPUTE = ("F", "B", "I", "W")
_COMM = ("SEND_F", "RECV_F", "SEND_B", "RECV_B")
_HOST = ("UNSHARD", "RESHARD", "REDUCE_GRAD")


@dataclass
class TorchBackendRun:
    """One run of the ``torch`` backend.

    Attributes:
        records: the run records (backend ``torch``).
        run: the assembled run (actions, recovered schedule, clock fit), as ``import-torch`` gives it.
        per_rank: :func:`lowering_added` (ns).
        losses: per step run, the mean loss (from the ranks holding the last stage).
        weights_changed: per rank, whether its parameters differ after the steps.
        step_times_ns: per rank, per recorded step, ``step()`` entry to the training step's end (own clock).
        step_modes: per recorded step, how it was timed (``"hooks"`` or ``"none"``; the same on every rank).
    """

    records: RunRecords
    run: TorchRun | None
    per_rank: list[dict[str, Any]] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    weights_changed: list[bool] = field(default_factory=list)
    step_times_ns: list[list[int]] = field(default_factory=list)
    step_modes: list[str] = field(default_factory=list)


def _clocks(parts: list[Any]) -> dict[int, ClockAlignment]:
    """Per rank > 0 its alignment onto rank 0's clock (Cristian's estimates at both ends, linear drift)."""
    first = parts[0]
    out = {}
    for q, rows in first.clock_start.items():
        start = best_exchange([tuple(e) for e in rows])
        end_rows = first.clock_end.get(q)
        end = best_exchange([tuple(e) for e in end_rows]) if end_rows else None
        out[int(q)] = align(start, end, int(q))
    return out


def _ranks(parts: list[Any], clocks: dict[int, ClockAlignment]) -> list[TorchRank]:
    """One :class:`TorchRank` per rank (recorded steps), times in epoch ns on rank 0's clock."""
    epoch0 = int(parts[0].epoch_minus_clock_ns)
    ranks = []
    for part in parts:
        r = int(part.rank)
        c = clocks.get(r)

        def t(ns: int, c: ClockAlignment | None = c) -> int:
            return (c.to_rank0(ns) if c is not None else ns) + epoch0

        tr = TorchRank(Path(f"<torch backend rank {r}>"), r, len(parts), part.host, [], 0, marking="PP",
                       gpu=part.device.startswith("cuda"))
        for st in part.steps:
            k = st.step
            tr.steps[k] = (t(st.start_ns), t(st.train_end_ns))
            for group, span in enumerate(st.actions):
                _action(tr, r, k, group, span, t)
        ranks.append(tr)
    return ranks


def _action(tr: TorchRank, r: int, k: int, group: int, span: Any, t: Any) -> None:
    """``span`` (one range) as the import's actions: an ``OVERLAP_F_B`` as its forward part (the loss ends it),
    then its backward part; a compute action from its first call; the waits inside as receive ends."""
    name, a, b, waits, parts = span.name, span.start_ns, span.end_ns, span.waits, span.parts
    if name.endswith("OVERLAP_F_B"):
        subs = [parse_job(x) for x in name[1:name.index(")")].split(";")]
        fp = next((x for x in parts if x[0] == "F"), None)
        lp = next((x for x in parts if x[0] == "L"), None)
        bp = next((x for x in parts if x[0] in ("B", "W")), None)
        f_start, f_end = (fp[3], max(fp[4], lp[4] if lp else 0)) if fp else (a, a)
        b_start = bp[3] if bp else f_end
        spans = {"F": (a, f_start, f_end)}
        for job in subs:
            pa, pc, pb = spans.get(job.kind.value, (f_end, b_start, b))
            tr.actions.append(TorchAction(r, k, "PP:" + name, job.stage, job.kind.value, job.microbatch, t(pa), t(pb), t(pc),
                                          group=group))
        for _, w1 in waits:  # each wait is for the sub-action it precedes
            job = subs[0] if w1 <= f_start else subs[-1]
            if job.microbatch is not None:
                tr.recv_end[(job.stage, "RECV_F" if job.kind.value == "F" else "RECV_B", job.microbatch, k)] = t(w1)
        return
    job = parse_job(name)
    kind = job.kind.value
    compute = parts[0][3] if (kind in _COMPUTE or kind == "OPT") and parts else (b if kind in _COMPUTE else a)
    tr.actions.append(TorchAction(r, k, "PP:" + name, job.stage, kind, job.microbatch, t(a), t(b), t(compute)))
    if kind in _COMPUTE and waits and job.microbatch is not None:
        tr.recv_end[(job.stage, "RECV_F" if kind == "F" else "RECV_B", job.microbatch, k)] = t(waits[-1][1])


def lowering_added(parts: list[Any]) -> list[dict[str, Any]]:
    """Per rank, the median over recorded steps of each part of its step (module doc), ns; and ``step_call``
    (``schedule.step()``), ``train_step`` (to the optimizer's end)."""
    keys = ("step_call", "train_step", "compute", "recv_wait", "send_wait", "post", "host", "in_range_other", "gaps", "optimizer")
    rows = []
    for part in parts:
        per: dict[str, list[int]] = {k: [] for k in keys}
        for st in part.steps:
            compute = recv_wait = post = host = ranges = opt = 0
            for span in st.actions:
                d = span.end_ns - span.start_ns
                name = span.name
                kind = name.strip("0123456789")
                if name.endswith("OPT"):
                    opt += d
                    continue
                ranges += d
                if name.endswith("OVERLAP_F_B") or kind in _COMPUTE:
                    compute += sum(x[4] - x[3] for x in span.parts)
                    recv_wait += sum(w1 - w0 for w0, w1 in span.waits)
                elif kind in _COMM:
                    post += d
                elif kind in _HOST:
                    host += d
            send_wait = sum(w1 - w0 for w0, w1 in st.send_waits)
            call = st.end_ns - st.start_ns
            for key, value in (("step_call", call), ("train_step", st.train_end_ns - st.start_ns), ("compute", compute),
                               ("recv_wait", recv_wait), ("send_wait", send_wait), ("post", post), ("host", host),
                               ("in_range_other", ranges - compute - recv_wait - post - host),
                               ("gaps", call - ranges - send_wait), ("optimizer", opt)):
                per[key].append(value)
        row: dict[str, Any] = {"rank": int(part.rank)}
        row.update({k: int(statistics.median(v)) if v else 0 for k, v in per.items()})
        rows.append(row)
    return rows


def _causality(run: TorchRun) -> dict[str, Any]:
    """Every cross-rank transfer's wait end at or after its send's start (module doc), on the merged clock."""
    by = {(a.step, a.stage, a.kind, a.microbatch): a for a in run.actions}
    recv_end: dict[tuple[int, str, int, int], int] = {}
    for tr in run.ranks:
        recv_end.update(tr.recv_end)
    base = run.time_base_epoch_ns
    pairs, worst = 0, None
    violations: list[dict[str, Any]] = []
    for (stage, kind, mb, step), end in recv_end.items():
        src = stage - 1 if kind == "RECV_F" else stage + 1
        send = by.get((step, src, "SEND_F" if kind == "RECV_F" else "SEND_B", mb))
        if send is None:
            continue
        pairs += 1
        slack = (end - base) - send.start_ns
        worst = slack if worst is None else min(worst, slack)
        if slack < 0 and len(violations) < 10:
            violations.append({"transfer": f"{src}{'F' if kind == 'RECV_F' else 'B'}{mb} -> {stage}{kind[-1]}{mb}",
                               "step": step, "by_ns": -slack})
    return {"rule": "each receive's wait ends at or after its send was posted", "pairs": pairs,
            "min_slack_ns": worst, "violations": violations}


def assemble_run(parts: list[Any], cfg: Any, outcome: WindowOutcome) -> TorchBackendRun:
    """The gathered ``parts`` (one per rank, rank order) as a :class:`TorchBackendRun` (module doc).

    Raises:
        ExecutionError: the ranks ran another order than PyTorch's lowered list (names the rank and
            the first difference), or their records cannot be assembled.
    """
    from harness.errors import HarnessError

    clocks = _clocks(parts)
    low = cfg.lowering
    losses = next((list(p.losses) for p in parts if p.losses), [])
    changed = [p.weights_before != p.weights_after for p in parts]
    per_rank = lowering_added(parts)
    step_times = [list(p.step_times_ns) for p in parts]
    if cfg.timing != "hooks":  # the overhead benchmark: step times only
        return TorchBackendRun(RunRecords("torch", {}, len(parts), [], [], [], [], []), None, per_rank, losses, changed, step_times,
                               list(parts[0].step_modes))
    ranks = _ranks(parts, clocks)
    bound = max((c.bound_ns for c in clocks.values()), default=0)
    clock_text = ("each rank's perf_counter_ns, shifted onto rank 0's by Cristian's method with linear drift over a gloo "
                  f"ping-pong ({cfg.clock_exchanges} exchanges per rank at each end; bound ±{bound / 1e3:.1f} µs)")
    try:
        run = assemble(ranks, Path("<torch backend>"), clock_offsets_ns=[0] * len(ranks), backend="torch", clock_text=clock_text,
                       origin="the torch backend's hooks", offsets_by="no further offsets: the times are on rank 0's clock already")
    except HarnessError as exc:
        raise ExecutionError(f"torch: the ranks' records cannot be assembled: {exc}") from None
    want = [[str(j) for j in row if j is not None] for row in low.schedule.ranks]
    got = [[str(j) for j in row if j is not None] for row in run.schedule.ranks]
    for r, (a, b) in enumerate(zip(want, got)):
        if a != b:
            k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            raise ExecutionError(f"torch: rank {r} ran its jobs in another order than PyTorch's lowered list: job {k} is "
                                 f"{b[k] if k < len(b) else 'missing'}, the list's {a[k] if k < len(a) else 'none'}")
    rec = run.records
    rec.warmup_steps = cfg.window.warmup_steps
    rec.window = outcome
    here = parts[0].host
    dev = rec.device
    dev["workload"] = parts[0].workload
    dev["local_backend"] = "cuda" if parts[0].device.startswith("cuda") else "cpu"
    dev["clock_bound_ns"] = bound
    dev["ranks"] = [{"rank": int(p.rank), "host": p.host, "device": p.device,
                     "clock": clocks[int(p.rank)].to_dict() if int(p.rank) in clocks else None} for p in parts]
    dev["rank_labels"] = [f"rank {p.rank} ({p.host})" for p in parts]
    dev["ranks_cpu_ns"] = [[int(p.cpu_ns), int(p.cpu_total_ns), p.host == here] for p in parts]
    dev["causality"] = _causality(run)
    dev["torch"] = {
        "version": parts[0].torch,
        "process_group": "nccl (pipeline) + gloo (control)" if dev["local_backend"] == "cuda" else "gloo",
        "lowering": "harness (handed over lowered)" if low.lowered else "torch (_prepare_schedule_with_comms)",
        "executed": [list(r) for r in low.executed],
        "timing": "hooks (record_function, _wait_batch_p2p and the stage calls wrapped; docs/torch.md)",
        "workload": cfg.workload + (" (cost-model-exact split: dw_builder)" if cfg.workload == "timed"
                                    else " (Linear layers; PyTorch's own I/W split: I and W each about one forward's FLOPs)"),
        "activation_shape": [cfg.rows, cfg.width],
        "optimizer": ("an OPT job per stage, added: the schedule has none" if low.optimizer_added
                      else "the schedule's OPT jobs"),
        "per_rank": per_rank,
        "losses": losses,
        "weights_changed": changed,
        "traces": cfg.trace_dir,
    }
    notes = [_clock_note(parts, clocks)]
    caus = dev["causality"]
    if caus["violations"]:
        notes.append(f"torch: {len(caus['violations'])} of {caus['pairs']} transfers end their wait before their send was "
                     f"posted on the merged clock, by up to {max(v['by_ns'] for v in caus['violations']) / 1e3:.1f} µs "
                     f"(clock bound ±{bound / 1e3:.1f} µs)")
    if low.optimizer_added:
        worst = max((row["optimizer"] for row in per_rank), default=0)
        notes.append(f"torch: a training step ends with each stage's optimizer step (SGD, up to {worst / 1e6:.3f} ms median per rank): "
                     "the schedule has no OPT jobs, so one per stage was added after the rank's pipeline actions (the cost model's "
                     "OPT duration in the sim)")
    dev["notes"] = notes + run.warnings
    return TorchBackendRun(rec, run, per_rank, losses, changed, step_times, list(parts[0].step_modes))


def _clock_note(parts: list[Any], clocks: dict[int, ClockAlignment]) -> str:
    """One line: per rank its host, clock offset to rank 0, drift and bound."""
    rows = [f"rank {p.rank} ({p.host}) {clocks[int(p.rank)].start.offset_ns / 1e3:,.1f} µs ± {clocks[int(p.rank)].bound_ns / 1e3:,.1f} µs, "
            f"drift {clocks[int(p.rank)].drift * 1e6:+.2f} ppm" for p in parts if int(p.rank) in clocks]
    return (f"torch: {len(parts)} processes; records aligned onto rank 0's clock (Cristian's method over gloo): "
            + ("; ".join(rows) if rows else "one process, nothing to align"))
