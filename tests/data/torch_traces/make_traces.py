#!/usr/bin/env python3
"""(Copied from ../shared/torch_traces/make_traces.py, plus --gzip and executed_actions.txt.)

Run a real torch.distributed.pipelining training job (gloo, CPU) and write
one Kineto/Chrome-trace JSON per rank.

Launch (one process per rank):

    torchrun --standalone --nproc-per-node=N make_traces.py \
        --schedule Schedule1F1B --microbatches 8 --out OUTDIR

Each rank builds its own stage module(s) (manual split, no tracing frontend),
runs --steps training steps (forward+backward+optimizer), and profiles 2 of
them with torch.profiler (wait=1, warmup=1, active=2).  The trace of rank k is
written to OUTDIR/rank<k>.json.

Schedules and the stage->rank placement used here:
  Schedule1F1B, ScheduleGPipe          1 stage per rank, stage = rank
  ScheduleInterleaved1F1B,
  ScheduleInterleavedZeroBubble,
  ScheduleLoopedBFS                    v stages per rank, "loop" placement:
                                       rank r holds stages r, r+N, r+2N, ...
  ScheduleZBVZeroBubble,
  ScheduleDualPipeV                    2 stages per rank, "V" placement:
                                       rank r holds stages r and 2N-1-r
  Runtime1F1B                          NOT a torch class name: the 1F1B
                                       compute order that Schedule1F1B runs,
                                       executed by torch's generic
                                       _PipelineScheduleRuntime, which is the
                                       code path that emits "PP:<action>"
                                       record_function ranges (Schedule1F1B
                                       itself emits no per-action ranges).
"""

import argparse
import gzip
import os
import shutil
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining import schedules as S  # noqa: N812 (as in the shared original)
from torch.profiler import ProfilerActivity, profile
from torch.profiler import schedule as prof_schedule

SINGLE = {"Schedule1F1B", "ScheduleGPipe", "Runtime1F1B"}
LOOP = {"ScheduleInterleaved1F1B", "ScheduleInterleavedZeroBubble", "ScheduleLoopedBFS"}
VSHAPE = {"ScheduleZBVZeroBubble", "ScheduleDualPipeV"}


class StageMLP(nn.Module):
    """One pipeline stage: `layers` x (Linear(d, d) + GELU)."""

    def __init__(self, d: int, layers: int):
        super().__init__()
        self.net = nn.Sequential(
            *[m for _ in range(layers) for m in (nn.Linear(d, d), nn.GELU())]
        )

    def forward(self, x):
        return self.net(x)


def stage_ids_for_rank(name: str, rank: int, world: int, v: int) -> list[int]:
    if name in SINGLE:
        return [rank]
    if name in LOOP:
        return [rank + i * world for i in range(v)]
    if name in VSHAPE:
        return [rank, 2 * world - 1 - rank]
    raise ValueError(name)


def build_schedule(name, stages, m, loss_fn):
    if name == "Runtime1F1B":
        # The compute order that Schedule1F1B._step_microbatches executes:
        # rank r runs min(m, N-r) warm-up forwards, then alternates B/F until
        # all forwards are issued, then drains the remaining backwards.
        # (Schedule1F1B.pipeline_order is NOT used: in this torch build it is
        # off by one on the last rank -- "3F1" first, "3F8" last -- and is
        # rejected by the runtime's validator.)
        n = stages[0].num_stages
        order = {}
        for r in range(n):
            warm = min(m, n - r)
            acts = [S._Action(r, S.F, i) for i in range(warm)]
            f = warm
            for b in range(m):
                acts.append(S._Action(r, S.B, b))
                if f < m:
                    acts.append(S._Action(r, S.F, f))
                    f += 1
            order[r] = acts
        sched = S._PipelineScheduleRuntime(stages, m, loss_fn=loss_fn)
        sched.pipeline_order = order
        sched._prepare_schedule_with_comms(order)
        return sched
    cls = getattr(S, name)
    if name in {"Schedule1F1B", "ScheduleGPipe"}:
        return cls(stages[0], m, loss_fn=loss_fn)
    return cls(stages, m, loss_fn=loss_fn)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--schedule", required=True)
    ap.add_argument("--out", required=True, help="output folder for rank<k>.json")
    ap.add_argument("--microbatches", "-m", type=int, default=4)
    ap.add_argument("--stages-per-rank", "-v", type=int, default=2,
                    help="only for loop-placement multi-stage schedules")
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--layers", type=int, default=2, help="Linear layers per stage")
    ap.add_argument("--mb-size", type=int, default=32, help="rows per micro-batch")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--gzip", action="store_true", help="write rank<k>.json.gz")
    args = ap.parse_args()

    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    dev = torch.device("cpu")

    name = args.schedule
    v = 1 if name in SINGLE else (2 if name in VSHAPE else args.stages_per_rank)
    n_stages = world * v
    ids = stage_ids_for_rank(name, rank, world, v)

    stages, params = [], []
    for sid in ids:
        mod = StageMLP(args.dim, args.layers)
        params += list(mod.parameters())
        stages.append(PipelineStage(mod, sid, n_stages, dev))

    def loss_fn(out, tgt):
        return nn.functional.mse_loss(out, tgt)

    m = args.microbatches
    sched = build_schedule(name, stages, m, loss_fn)
    opt = torch.optim.SGD(params, lr=0.05)

    rows = args.mb_size * m
    gen = torch.Generator().manual_seed(1234)
    x = torch.randn(rows, args.dim, generator=gen)
    y = torch.randn(rows, args.dim, generator=gen)
    has_first = any(s.is_first for s in stages)
    has_last = any(s.is_last for s in stages)

    os.makedirs(args.out, exist_ok=True)
    out_path = os.path.join(args.out, f"rank{rank}.json")

    def on_ready(p):
        p.export_chrome_trace(out_path)
        if args.gzip:  # the importer reads rank<k>.json.gz as well
            with open(out_path, "rb") as src, gzip.open(out_path + ".gz", "wb", compresslevel=9) as dst:
                shutil.copyfileobj(src, dst)
            os.remove(out_path)

    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=False,
        schedule=prof_schedule(wait=1, warmup=1, active=2),
        on_trace_ready=on_ready,
    ) as prof:
        for step in range(args.steps):
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            losses = [] if has_last else None
            kw = {}
            if has_last:
                kw = {"target": y, "losses": losses}
            if has_first:
                sched.step(x, **kw)
            else:
                sched.step(**kw)
            opt.step()
            dt = (time.perf_counter() - t0) * 1e3
            if has_last:
                loss = torch.stack(losses).mean().item()
                print(f"[rank{rank}] {name} step {step}: {dt:.1f} ms loss {loss:.6f}",
                      flush=True)
            prof.step()

    lowered = getattr(sched, "pipeline_order_with_comms", None)
    line = ""
    if lowered:
        # the per-rank action list the runtime executed (= the PP:<action> names)
        line = f"rank{rank}: " + " ".join(str(a) for a in lowered[rank])
        print(f"[rank{rank}] executed actions: " + line, flush=True)
    lines: list = [None] * world
    dist.all_gather_object(lines, line)
    if rank == 0 and any(lines):
        with open(os.path.join(args.out, "executed_actions.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
    dist.barrier()
    if rank == 0:
        print(f"wrote {args.out}/rank*.json ({n_stages} stages, "
              f"{len(stages)} per rank, m={m})", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
