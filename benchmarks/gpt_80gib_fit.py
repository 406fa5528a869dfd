"""Which schedules fit a ~10 B GPT in 80 GiB per GPU, at TP=1 and at TP=8 with sequence parallelism.

The setting of the harness's "choose a configuration" question: a GPT of hidden size 4096, 48 layers,
sequence 2048, 32 heads, vocabulary 50304, micro-batch 1 (``TransformerCost``, the embedding on the
first stage and the LM head on the last), p = 8 pipeline ranks, m = 32 micro-batches, 400 TFLOP/s
sustained per GPU, 80 GiB per GPU. Every schedule of the library that takes those sizes runs on the
analytic path (``sim``, exact): v = 2 where a schedule places several chunks per rank (the V shapes
have two by construction).

Three columns of figures:

* TP=1: one GPU per pipeline rank;
* TP=8 + SP: eight GPUs per rank (``tensor_parallel_size=8, sequence_parallel=True``), the
  collectives not charged;
* TP=8 + SP, collectives at ``--tp-gbytes`` GB/s (default 300, NCCL bus bandwidth of a large
  all-reduce inside one NVLink node; an assumption, not a measurement).

Usage::

    python benchmarks/gpt_80gib_fit.py [--tflops 400] [--tp-gbytes 300] [--memory-limit-gib 80] [--json FILE]

It prints a Markdown table (step time, the largest rank's peak memory, fits or not) and, per setting,
the assumptions every case of it shares. Not a timing benchmark: the figures are exact model figures.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from typing import Any

from harness import PipelineCase, TransformerCost
from harness.errors import HarnessError
from harness.runner import run_case
from harness.schedule.registry import builder_info, schedule_names

GIB = 2**30
P, M = 8, 32


def model(tflops: float) -> TransformerCost:
    return TransformerCost(hidden_size=4096, num_layers=48, seq_len=2048, num_attention_heads=32, vocab_size=50304,
                           micro_batch_size=1, tflops=tflops)


def settings(tflops: float, tp_gbytes: float) -> dict[str, TransformerCost]:
    base = model(tflops)
    tp = replace(base, tensor_parallel_size=8, sequence_parallel=True)
    return {"TP=1": base, "TP=8 + SP": tp, f"TP=8 + SP, collectives at {tp_gbytes:g} GB/s": replace(tp, tp_gbytes_per_s=tp_gbytes)}


def run(tflops: float, tp_gbytes: float, limit_bytes: int) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    shared: dict[str, list[str]] = {}
    for name in schedule_names():
        v = 2 if builder_info(name).takes_chunks else 1
        row: dict[str, Any] = {"schedule": name, "v": v}
        for label, cost in settings(tflops, tp_gbytes).items():
            try:
                r = run_case(PipelineCase(name, P, M, chunks=v, cost=cost, memory_limit_bytes=limit_bytes), "sim")
            except HarnessError as exc:
                row[label] = {"error": str(exc)}
                continue
            assert r.memory is not None
            peak = max(r.memory.peak_bytes)
            row["v"] = r.schedule.chunks_per_rank  # the V shapes hold two chunks per rank by construction
            row[label] = {"step_ms": r.metrics.step_time_median_ns / 1e6, "peak_gib": peak / GIB, "fits": bool(r.memory.fits),
                          "assumptions": r.assumptions}
            got = r.assumptions or []
            shared[label] = [a for a in shared.get(label, got) if a in got]
        rows.append(row)
    return {"rows": rows, "shared_assumptions": shared, "tflops": tflops, "tp_gbytes_per_s": tp_gbytes, "limit_bytes": limit_bytes}


def table(result: dict[str, Any]) -> str:
    labels = list(result["shared_assumptions"])
    head = "| schedule | v | " + " | ".join(f"{label}: step, peak" for label in labels) + " | also assumes |"
    lines = [head, "|" + "---|" * (3 + len(labels))]
    notes: dict[str, int] = {}  # a case's own assumptions (not shared by its setting's cases), numbered once
    for row in result["rows"]:
        cells, own = [], []
        for label in labels:
            cell = row.get(label, {})
            if "error" in cell:
                cells.append(f"refused: {cell['error'][:60]}")
                continue
            cells.append(f"{cell['step_ms']:,.1f} ms, {cell['peak_gib']:.1f} GiB" + ("" if cell["fits"] else " **does not fit**"))
            for a in cell["assumptions"] or []:
                if a not in result["shared_assumptions"][label]:
                    own.append(notes.setdefault(a, len(notes) + 1))
        marks = ", ".join(f"[{k}]" for k in dict.fromkeys(own))
        lines.append(f"| {row['schedule']} | {row['v']} | " + " | ".join(cells) + f" | {marks} |")
    lines.append("")
    lines.extend(f"[{k}] {a}" for a, k in notes.items())
    for label in labels:
        fits = [r for r in result["rows"] if r.get(label, {}).get("fits")]
        best = min(fits, key=lambda r: r[label]["step_ms"], default=None)
        lines.append("")
        lines.append(f"{label}: {len(fits)} of {len(result['rows'])} schedules fit {result['limit_bytes'] / GIB:g} GiB"
                     + (f"; fastest that fits: {best['schedule']} (v={best['v']}) at {best[label]['step_ms']:,.1f} ms" if best else ""))
        lines.extend(f"  assumes: {a}" for a in result["shared_assumptions"][label])
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tflops", type=float, default=400.0, help="sustained TFLOP/s per GPU (default 400)")
    ap.add_argument("--tp-gbytes", type=float, default=300.0, help="bus bandwidth of the TP collectives, GB/s (default 300)")
    ap.add_argument("--memory-limit-gib", type=float, default=80.0, help="memory per GPU, GiB (default 80)")
    ap.add_argument("--json", default=None, metavar="FILE", help="also write the figures as JSON")
    args = ap.parse_args()
    t0 = time.perf_counter()
    result = run(args.tflops, args.tp_gbytes, round(args.memory_limit_gib * GIB))
    print(table(result))
    print(f"\n({len(result['rows']) * len(result['shared_assumptions'])} cases on sim in {time.perf_counter() - t0:.1f} s)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
