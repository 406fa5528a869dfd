"""Throughput of the chooser (:func:`harness.choose.rank.choose`) on the GPT model of docs/choose.md.

Model: h = 4096, L = 48, s = 2048, a = 32, V = 50304, b = 1, 400 TFLOP/s per GPU, an 80 GiB limit
per rank; every registered schedule, v in 1, 2, 4 (interleaved builders at 2 and 4, V-shapes at 2,
the rest at 1), layout and recomputation searched, comm model ``stream``, on a process pool of every
CPU this process may use.

* ``p8``: p = 8, m in 8, 16, 32, 64: combinations per second (``extra_info["combinations_per_s"]``);
* ``p16``: p = 16, m in 16, 32, 64, 128: the wall time of the whole question (aim: under 30 s on two
  cores).

``extra_info`` gives the combinations, the rows and the excluded ones, the wall seconds, the
workers and the chosen row. One round each (a question is answered once).

Run:

- ``python -m pytest benchmarks/bench_choose.py --benchmark-only``;
- ``python benchmarks/bench_choose.py [-p 16] [--top 10]``: each combination evaluated alone, serially,
  slowest first (which schedule, v and m the time goes to).

Wall times are of whatever machine runs it; nothing here asserts a duration.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import pytest

from harness.choose.query import ChooseQuery, combinations
from harness.choose.rank import ChooseResult, _Job, choose, evaluate_task
from harness.model.transformer import TransformerCost

GPT = TransformerCost(hidden_size=4096, seq_len=2048, micro_batch_size=1, num_layers=48, tflops=400, vocab_size=50304,
                      num_attention_heads=32)
LIMIT = 80 * 2**30
CHUNKS = (1, 2, 4)
#: p -> the micro-batch counts tried
GRIDS = {8: (8, 16, 32, 64), 16: (16, 32, 64, 128)}


def query(p: int) -> ChooseQuery:
    """Every registered schedule at ``p`` ranks, :data:`GRIDS`' m, :data:`CHUNKS`, searched layouts, the 80 GiB limit."""
    return ChooseQuery(GPT, p, GRIDS[p], chunks=CHUNKS, memory_limit_bytes=LIMIT)


def _workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _figures(result: ChooseResult) -> dict[str, Any]:
    n = len(result.rows) + len(result.excluded)
    best = result.best
    return {"combinations": n, "rows": len(result.rows), "excluded": len(result.excluded), "fitting": sum(r["fits"] for r in result.rows),
            "wall_s": round(result.elapsed_s, 3), "combinations_per_s": round(n / result.elapsed_s, 2) if result.elapsed_s else None,
            "executor": result.executor, "workers": _workers(),
            "best": None if best is None else f"{best['schedule']} v={best['v']} m={best['m']} {best['step_ns'] / 1e6:,.1f} ms"}


def _answer(benchmark: Any, p: int) -> ChooseResult:
    q = query(p)
    results: list[ChooseResult] = []
    benchmark.pedantic(lambda: results.append(choose(q, executor="process", progress=False)), rounds=1, iterations=1,
                       warmup_rounds=0)
    result = results[-1]
    benchmark.extra_info.update(_figures(result))
    return result


@pytest.mark.parametrize("p", [8])
def test_choose_p8_combinations_per_second(benchmark: Any, p: int) -> None:
    result = _answer(benchmark, p)
    info = benchmark.extra_info
    print(f"\nchoose p={p}: {info['combinations']} combinations ({info['rows']} rows, {info['excluded']} excluded) in "
          f"{result.elapsed_s:.1f} s on {info['workers']} worker(s) = {info['combinations_per_s']} combinations/s; best {info['best']}")


@pytest.mark.parametrize("p", [16])
def test_choose_p16_wall_time(benchmark: Any, p: int) -> None:
    result = _answer(benchmark, p)
    info = benchmark.extra_info
    print(f"\nchoose p={p}: {result.elapsed_s:.1f} s for {info['combinations']} combinations ({info['rows']} rows, "
          f"{info['excluded']} excluded) on {info['workers']} worker(s); best {info['best']}")


def per_combination(p: int) -> list[tuple[float, str, int, int, str]]:
    """Each combination of :func:`query` evaluated alone in this process: (seconds, schedule, v, m, row or excluded), slowest first."""
    q = query(p)
    tasks, _ = combinations(q)
    out = []
    for t in tasks:
        t0 = time.perf_counter()
        kind, _row = evaluate_task(_Job(t, q.base, q.p, q.comm_model, q.memory_limit_bytes, q.recompute, q.layout))
        out.append((time.perf_counter() - t0, t.schedule, t.v, t.m, kind))
    return sorted(out, reverse=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-p", type=int, default=16, choices=sorted(GRIDS), help="pipeline ranks (default 16)")
    ap.add_argument("--top", type=int, default=10, help="slowest combinations to print (default 10)")
    args = ap.parse_args()
    times = per_combination(args.p)
    total = sum(t[0] for t in times)
    print(f"p={args.p}: {len(times)} combinations, {total:.1f} s serially")
    for s, schedule, v, m, kind in times[: args.top]:
        print(f"  {s:7.2f} s  {100 * s / total:5.1f} %  {schedule} v={v} m={m} ({kind})")


if __name__ == "__main__":
    main()
