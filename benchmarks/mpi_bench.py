"""Figures of the mpi backend, run under mpirun with two processes:

    mpirun -n 2 --oversubscribe --mca mpi_yield_when_idle 1 python benchmarks/mpi_bench.py [--out mpi_bench.json] [--quick]

(as root add ``--allow-run-as-root``). Rank 0 prints and writes:

1. point-to-point one-way time and bandwidth between the two ranks, 1 KiB to 64 MiB
   (:func:`harness.distributed.p2p.measure_p2p`, OSU ``osu_latency``-style ping-pong), the Hockney fit
   (latency + bytes / bandwidth) and the ``FixedCost`` that takes them
   (:func:`harness.distributed.p2p.with_measured_transfers`);
2. the clock-alignment error bound achieved (half the smallest round trip of 32 exchanges, 20 times);
3. per-job overhead of ``mpi`` against the single-process ``cpu`` backend on the same case (1F1B,
   p=2, m=8, F=1 ms, B=2 ms, send/receive jobs of 4 KiB): (median step - sim step) / jobs per step.

Nothing here asserts a figure. A shared or oversubscribed machine inflates every figure: say so beside them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys


def main(argv: list[str]) -> int:
    from mpi4py import MPI

    from harness import FixedCost, PipelineCase
    from harness.distributed.clock_sync import best_exchange, local_clock
    from harness.distributed.p2p import fit_hockney, measure_p2p, with_measured_transfers
    from harness.distributed.transport import MpiTransport
    from harness.run.window import parse_steps
    from harness.runner import run_case

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true", help="fewer sizes and steps (a smoke run)")
    args = ap.parse_args(argv)
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    if size != 2:
        print("run with mpirun -n 2", file=sys.stderr)
        return 2
    out: dict[str, object] = {"machine": {"processes": size, "host": MPI.Get_processor_name(), "mpi": MPI.Get_library_version().splitlines()[0]}}

    sizes = [1024 * 4**k for k in range(9)]  # 1 KiB .. 64 MiB
    if args.quick:
        sizes = sizes[:4]
    samples = measure_p2p(world, sizes, peer=1 - rank, min_time_s=0.02 if args.quick else 0.1)
    if rank == 0:
        latency, bandwidth = fit_hockney(samples)
        cost = with_measured_transfers(FixedCost.ms(F=1, B=2, activation_bytes=4096), samples)
        out["p2p"] = [{"nbytes": s.nbytes, "one_way_us": s.one_way_ns / 1e3, "gbytes_per_s": s.gbytes_per_s, "repeats": s.repeats}
                      for s in samples]
        out["hockney_fit"] = {"latency_ns": latency, "gbytes_per_s": bandwidth,
                              "fixed_cost": {"p2p_latency_ns": cost.p2p_latency_ns, "p2p_gbytes_per_s": cost.p2p_gbytes_per_s}}

    transport = MpiTransport(world, 30.0)
    clock = local_clock(rank)
    bounds, offsets = [], []
    for _ in range(5 if args.quick else 20):
        rows = transport.ping_pong(clock, 32)
        if rank == 0:
            est = best_exchange(rows[1])
            bounds.append(est.bound_ns)
            offsets.append(est.offset_ns)
    transport.close()
    if rank == 0:
        out["clock_alignment"] = {"exchanges": 32, "repeats": len(bounds), "bound_ns_min": min(bounds),
                                  "bound_ns_median": statistics.median(bounds), "bound_ns_max": max(bounds),
                                  "offset_ns_median": statistics.median(offsets), "true_offset_ns": 0}

    case = PipelineCase(schedule="1F1B", stages=2, microbatches=8, cost=FixedCost.ms(F=1, B=2, activation_bytes=4096), comm=True)
    steps = parse_steps("1:4" if args.quick else "1:21")
    sim = run_case(case, backend="sim")
    jobs_per_step = len(sim.records.jobs_of_step(sim.records.steps[0]))
    mpi = run_case(case, backend="mpi", steps=steps)
    figures = {}
    world.Barrier()
    if rank == 0:
        cpu = run_case(case, backend="cpu", steps=steps)
        for name, res in (("cpu", cpu), ("mpi", mpi)):
            figures[name] = {"step_median_ns": res.metrics.step_time_median_ns, "sim_step_ns": sim.metrics.step_time_median_ns,
                             "overhead_per_job_ns": (res.metrics.step_time_median_ns - sim.metrics.step_time_median_ns) / jobs_per_step,
                             "enqueue_ns_per_job": res.metrics.enqueue_ns_per_job}
        out["per_job_overhead"] = {"case": case.label(), "jobs_per_step": jobs_per_step, **figures}
    world.Barrier()
    if rank == 0:
        text = json.dumps(out, indent=2)
        print(text)
        if args.out:
            with open(args.out, "w", encoding="utf-8") as f:
                f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
