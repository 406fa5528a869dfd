"""Generate ``torch_executed_orders.json``: the actions PyTorch's pipelining runtime executes, per rank.

Run once with torch installed (the CPU build, gloo; about a minute on 2 cores)::

    python tests/data/pytorch/generate_executed_orders.py   # one torchrun per schedule below

For each schedule the script starts ``torchrun --standalone --nproc-per-node=P`` on itself; every
rank builds PyTorch's own schedule class over real ``PipelineStage`` objects (one
``Linear(16, 16)`` per stage, loss MSE, SGD), runs two training steps and profiles the second with
``torch.profiler``. What is stored per rank is read from the profiler, PyTorch's own
instrumentation: the names of the ``PP:<action>`` ranges (``record_function`` in
``_PipelineScheduleRuntime._step_microbatches``, torch/distributed/pipelining/schedules.py) in the
order they started, without the ``PP:`` prefix. The script checks that this equals the
schedule's ``pipeline_order_with_comms[rank]``, and stores the compute-only
``pipeline_order[rank]`` beside it.

Schedules (as the issue's tests name them):

* ``ScheduleInterleaved1F1B``, ``ScheduleInterleavedZeroBubble`` (p=2, v=2, m=4, loop placement),
  ``ScheduleZBVZeroBubble``, ``ScheduleDualPipeV`` (p=2, 2 stages per rank, V placement, m=4);
* ``Runtime1F1B`` (p=4, m=8): not a torch class. ``Schedule1F1B`` does not run on
  ``_PipelineScheduleRuntime`` and marks no actions, and its ``pipeline_order`` numbers the last
  rank's forwards 1..m (it is refused by the runtime's validator). So, as
  ``tests/data/torch_traces/make_traces.py`` (``Runtime1F1B``) does, the compute order ``Schedule1F1B._step_microbatches``
  runs (rank r: ``min(m, p - r)`` forwards, then B and F alternating, then the remaining B) is
  given to ``_PipelineScheduleRuntime._prepare_schedule_with_comms`` and executed by the runtime.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CONFIGS = [
    ("Runtime1F1B", 4, 1, 8),
    ("ScheduleInterleaved1F1B", 2, 2, 4),
    ("ScheduleInterleavedZeroBubble", 2, 2, 4),
    ("ScheduleZBVZeroBubble", 2, 2, 4),
    ("ScheduleDualPipeV", 2, 2, 4),
]
OUT = Path(__file__).with_name("torch_executed_orders.json")


def _one(name: str, v: int, m: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining import schedules as pp
    from torch.profiler import ProfilerActivity, profile

    dist.init_process_group("gloo")
    rank, p = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    n = p * v
    if name in ("ScheduleZBVZeroBubble", "ScheduleDualPipeV"):
        ids = [rank, 2 * p - 1 - rank]
    else:
        ids = [rank + k * p for k in range(v)]
    stages, params = [], []
    for s in ids:
        mod = torch.nn.Linear(16, 16)
        params += list(mod.parameters())
        stages.append(PipelineStage(mod, s, n, torch.device("cpu")))
    loss_fn = torch.nn.functional.mse_loss
    if name == "Runtime1F1B":
        order = {}
        for r in range(p):
            warm = min(m, p - r)
            acts = [pp._Action(r, pp.F, i) for i in range(warm)]
            f = warm
            for b in range(m):
                acts.append(pp._Action(r, pp.B, b))
                if f < m:
                    acts.append(pp._Action(r, pp.F, f))
                    f += 1
            order[r] = acts
        sched = pp._PipelineScheduleRuntime(stages, m, loss_fn=loss_fn)
        sched.pipeline_order = order
        sched._prepare_schedule_with_comms(order)
    else:
        sched = getattr(pp, name)(stages, m, loss_fn=loss_fn)
    opt = torch.optim.SGD(params, lr=0.01)
    x, y = torch.randn(4 * m, 16), torch.randn(4 * m, 16)
    has_first, has_last = 0 in ids, n - 1 in ids
    names: list[str] = []
    for step in range(2):
        opt.zero_grad()
        kw = {"target": y, "losses": []} if has_last else {}
        if step == 1:
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                sched.step(x, **kw) if has_first else sched.step(**kw)
            evs = sorted((e for e in prof.events() if e.name.startswith("PP:")), key=lambda e: e.time_range.start)
            names = [e.name[3:] for e in evs]
        else:
            sched.step(x, **kw) if has_first else sched.step(**kw)
        opt.step()
    lowered = [str(a) for a in sched.pipeline_order_with_comms[rank]]
    if names != lowered:
        raise SystemExit(f"rank {rank}: executed {names} != pipeline_order_with_comms {lowered}")
    compute = ["" if a is None else str(a) for a in sched.pipeline_order[rank]]
    got: list = [None] * p if rank == 0 else None
    dist.gather_object({"executed": names, "pipeline_order": compute}, got, dst=0)
    if rank == 0:
        Path(out).write_text(json.dumps({"class": name, "p": p, "v": v, "m": m,
                                         "executed": [g["executed"] for g in got],
                                         "pipeline_order": [g["pipeline_order"] for g in got]}), encoding="utf-8")
    dist.destroy_process_group()


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        _one(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
        return 0
    import torch

    entries = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, p, v, m in CONFIGS:
            out = os.path.join(tmp, f"{name}.json")
            subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={p}",
                            __file__, "--one", name, str(v), str(m), out], check=True)
            entries.append(json.loads(Path(out).read_text(encoding="utf-8")))
    doc = {"torch": torch.__version__, "generator": Path(__file__).name,
           "what": "per rank, the PP:<action> ranges torch.profiler recorded in one training step, in start order "
                   "(= pipeline_order_with_comms); pipeline_order: the compute-only order given to the runtime",
           "entries": entries}
    OUT.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}: {len(entries)} schedules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
