"""ZB-auto against the zero-bubble repository's automatic scheduler, on the paper's ICLR settings.

Settings: Qi et al., "Zero Bubble Pipeline Parallelism" (ICLR'24, arXiv:2401.10241), the profiled
F, B (the harness's I), W and transfer time c of ``iclr_mem``'s ``settings`` table in
``megatron/core/pipeline_parallel/mem.py`` on the ``arxiv`` branch of
sail-sg/zero-bubble-pipeline-parallelism (commit f68d38794764d7d937f4942dca3a1e9a07544898). The
file's unit is microseconds x 1000 from the profiler; here they are taken as ns (only ratios
matter). Comm model ``edge``: every transfer a delay of c on its dependency, as the repository's
own simulator charges it. Limits ``int(k p)`` pending micro-batches for k in 1, 1.25, 1.5, 1.75, 2,
3 (the runtime's ``--zero-bubble-max-pending-backward`` is an integer).

Per point: the repository's scheduler (``tests/_reference_zb.py``, a transcription of its ``zb.py``
at 39f2c186a27580b7051eb51e0f651e1efd0a8170: ``initial_solution``'s eight greedy variants), its
order re-timed by ZB-auto's exact evaluator and its peak checked against the limit; ZB-auto built
through the registry (``build_schedule("ZB-auto", ..., costs=StageCosts.uniform(...))``) with the
default search effort. Figures: the span ratio ours / theirs (their objective, the longest stage
span; <= 1 asserted), whether ours is strictly better, whether ours is proven optimal (the lower
bound met), the step times, and the wall time per schedule built of each (pure Python both).

Run:

- ``python -m pytest benchmarks/bench_zb_auto.py --benchmark-only``: one benchmark per model size
  times ours and theirs at every k, figures in ``extra_info``;
- ``python benchmarks/bench_zb_auto.py [--json FILE] [--harness] [--bytes]``: the whole grid as
  markdown tables; ``--harness`` adds the harness's ZB-H1 (at k = 1) and ZB-H2 (at k = 2) steps on
  ``sim``; ``--bytes`` the same grid under the paper's byte memory model (``mem_f = 34h + 5as``,
  ``mem_w = -32h``, ``s = 1024``, limit ``int(k p mem_f)``, as ``mem.py`` does).

Wall times are of whatever machine runs it; nothing here asserts a duration.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

# The repository's scheduler, transcribed as a test oracle (with its license notice) in tests/.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _reference_zb import reference_schedule

from harness.errors import ConfigError
from harness.schedule.costs import StageCosts
from harness.schedule.registry import build_schedule
from harness.schedule.zb_auto import zb_auto
from harness.schedule.zb_auto_eval import peak_memory, simulate

#: (model, p, m, F, B, W, c, h, a): ``iclr_mem``'s settings (see the module doc).
ICLR_SETTINGS = [
    ("1.5B", 8, 24, 18522, 18086, 9337, 601, 2304, 24),
    ("1.5B", 8, 32, 18513, 18086, 9331, 626, 2304, 24),
    ("1.5B", 8, 64, 18546, 18097, 9321, 762, 2304, 24),
    ("6.2B", 8, 24, 29718, 29444, 19927, 527, 4096, 32),
    ("6.2B", 8, 32, 29802, 29428, 19530, 577, 4096, 32),
    ("6.2B", 8, 64, 29935, 29621, 19388, 535, 4096, 32),
    ("14.6B", 16, 48, 11347, 11248, 8132, 377, 5120, 40),
    ("14.6B", 16, 64, 11307, 11254, 8101, 379, 5120, 40),
    ("14.6B", 16, 128, 11325, 11308, 8109, 378, 5120, 40),
    ("28.3B", 32, 96, 10419, 10207, 7715, 408, 6144, 48),
    ("28.3B", 32, 128, 10408, 10204, 7703, 408, 6144, 48),
    ("28.3B", 32, 256, 10402, 10248, 7698, 460, 6144, 48),
]
KS = (1, 1.25, 1.5, 1.75, 2, 3)
SEQ = 1024


def point(p: int, m: int, f: int, b: int, w: int, c: int, k: float, byte_model: tuple[int, int] | None = None) -> dict[str, Any]:
    """One setting at limit ``k p``: both schedulers' spans, steps, peaks and build times."""
    if byte_model is None:
        limit: float = int(k * p)
        mem: tuple[float, float, float] = (1, 0, -1)
        ref_kwargs: dict[str, Any] = {}
    else:
        h, a = byte_model
        mf, mw = 34 * h + 5 * a * SEQ, -32 * h
        mem = (mf, -mf - mw, mw)
        limit = int(k * p * mf)
        ref_kwargs = {"mem": mem, "max_mem": limit}
    row: dict[str, Any] = {"p": p, "m": m, "k": k, "limit": limit, "busy": m * (f + b + w)}
    t0 = time.perf_counter()
    try:
        orders, claimed = reference_schedule(p, m, f, b, w, c, k * p if byte_model else int(limit), **ref_kwargs)
        row["theirs_s"] = time.perf_counter() - t0
        tl = simulate(p, m, f, b, w, c, orders)
        row.update(theirs_span=tl.objective_ns, theirs_step=tl.step_ns, theirs_claimed=claimed,
                   theirs_within_limit=max(peak_memory(orders, mem)) <= limit + 1e-9)
    except (ValueError, AssertionError, ConfigError) as exc:  # the repository's own failures, or an order out of micro-batch order
        row["theirs_s"] = time.perf_counter() - t0
        row["theirs_error"] = f"{type(exc).__name__}: {exc}"
    t0 = time.perf_counter()
    if byte_model is None:
        sched = build_schedule("ZB-auto", p, m, costs=StageCosts.uniform(p, f, b, w, c), max_pending=int(limit))
        row["ours_s"] = time.perf_counter() - t0
        prm = sched.params
        row.update(ours_span=prm["objective_ns"], ours_step=prm["planned_step_ns"], optimal=prm["optimal"], method=prm["method"],
                   ours_peak=prm["peak_pending"])
    else:
        res = zb_auto(p, m, f, b, w, c, memory=mem, memory_limit=limit)
        row["ours_s"] = time.perf_counter() - t0
        row.update(ours_span=res.objective_ns, ours_step=res.step_ns, optimal=res.optimal, method=res.method,
                   ours_peak=max(res.peak_memory))
    if "theirs_span" in row:
        row["span_ratio"] = row["ours_span"] / row["theirs_span"]
        row["strictly_better"] = row["ours_span"] < row["theirs_span"]
    return row


@pytest.mark.parametrize("setting", ICLR_SETTINGS[::3], ids=lambda s: f"{s[0]}-p{s[1]}-m{s[2]}")
def test_zb_auto_against_the_repository(benchmark: Any, setting: tuple[Any, ...]) -> None:
    _, p, m, f, b, w, c, _, _ = setting
    rows: list[dict[str, Any]] = []

    def run() -> None:
        rows.clear()
        rows.extend(point(p, m, f, b, w, c, k) for k in KS)

    benchmark.pedantic(run, rounds=1, iterations=1, warmup_rounds=0)
    for r in rows:
        assert r["span_ratio"] <= 1, r
        assert r["ours_peak"] <= r["limit"]
    benchmark.extra_info.update(
        span_ratio={str(r["k"]): round(r["span_ratio"], 6) for r in rows},
        strictly_better=sum(r["strictly_better"] for r in rows),
        proven_optimal=sum(bool(r["optimal"]) for r in rows),
        ours_s={str(r["k"]): round(r["ours_s"], 4) for r in rows},
        theirs_s={str(r["k"]): round(r["theirs_s"], 4) for r in rows},
    )


def harness_steps(p: int, m: int, f: int, b: int, w: int, c: int) -> dict[str, int]:
    """The harness's ZB-H1 and ZB-H2 steps on ``sim`` under ``edge``."""
    from harness import PipelineCase, run_case
    from harness.model.cost import FixedCost

    cost = FixedCost(forward_ns=f, backward_ns=b + w, backward_input_ns=b, backward_weight_ns=w, p2p_latency_ns=c)
    return {name: run_case(PipelineCase(name, stages=p, microbatches=m, cost=cost, comm_model="edge"), backend="sim").metrics.steps[0].step_time_ns
            for name in ("ZB-H1", "ZB-H2")}


def _table(rows: list[dict[str, Any]], cell: Any) -> list[str]:
    out = ["| model | p | m | " + " | ".join(f"k={k}" for k in KS) + " |", "|---|---|---|" + "---|" * len(KS)]
    for i in range(0, len(rows), len(KS)):
        chunk = rows[i : i + len(KS)]
        out.append(f"| {chunk[0]['model']} | {chunk[0]['p']} | {chunk[0]['m']} | " + " | ".join(cell(r) for r in chunk) + " |")
    return out


def report(rows: list[dict[str, Any]], title: str) -> str:
    """Markdown tables of a grid: span ratios, bubble, build times, and the harness's steps where measured."""
    lines = [f"### {title}", "", "span ratio ours / theirs (longest stage span; `<` strictly better, `*` ours proven optimal)", ""]
    lines += _table(rows, lambda r: f"{r['span_ratio']:.4f}" + ("<" if r["strictly_better"] else "") + ("*" if r["optimal"] else "")
                    if "span_ratio" in r else "theirs: " + r["theirs_error"][:24])
    ratios = [r["span_ratio"] for r in rows if "span_ratio" in r]
    lines += ["", f"{len(rows)} points: span ratio max {max(ratios):.4f}, min {min(ratios):.4f}; strictly better at "
              f"{sum(bool(r.get('strictly_better')) for r in rows)}; ours proven optimal at {sum(bool(r['optimal']) for r in rows)}; "
              f"theirs over the limit at {sum(r.get('theirs_within_limit') is False for r in rows)}; theirs failed at "
              f"{sum('theirs_error' in r for r in rows)}", ""]
    lines += ["bubble of ours, (longest span - busy) / longest span, %", ""]
    lines += _table(rows, lambda r: f"{100 * (r['ours_span'] - r['busy']) / r['ours_span']:.2f}")
    lines += ["", "build time per schedule, theirs / ours (s)", ""]
    lines += _table(rows, lambda r: f"{r['theirs_s']:.3f} / {r['ours_s']:.3f}")
    n = len(rows)
    lines += ["", f"mean build time: theirs {sum(r['theirs_s'] for r in rows) / n:.3f} s, ours {sum(r['ours_s'] for r in rows) / n:.3f} s"]
    h = [r for r in rows if "harness" in r]
    if h:
        lines += ["", "steps (ns) against the harness's handcrafted schedules (sim, edge)", "",
                  "| model | p | m | ZB-H1 | ours @p | ZB-H2 | ours @2p |", "|---|---|---|---|---|---|---|"]
        for i in range(0, len(rows), len(KS)):
            at_p, at_2p = rows[i], rows[i + KS.index(2)]
            hs = at_p["harness"]
            lines.append(f"| {at_p['model']} | {at_p['p']} | {at_p['m']} | {hs['ZB-H1']} | {at_p['ours_step']} | {hs['ZB-H2']} | "
                         f"{at_2p['ours_step']} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=None, help="write every point here")
    ap.add_argument("--harness", action="store_true", help="add the harness's ZB-H1/ZB-H2 steps on sim (edge)")
    ap.add_argument("--bytes", action="store_true", help="also the grid under the paper's byte memory model")
    args = ap.parse_args()
    out: dict[str, Any] = {}
    grids = [("pending", None)] + ([("bytes", True)] if args.bytes else [])
    for name, in_bytes in grids:
        rows = []
        for model, p, m, f, b, w, c, h, a in ICLR_SETTINGS:
            hs = harness_steps(p, m, f, b, w, c) if args.harness and not in_bytes else None
            for k in KS:
                row = point(p, m, f, b, w, c, k, (h, a) if in_bytes else None)
                row["model"] = model
                if hs is not None and k == 1:
                    row["harness"] = hs
                rows.append(row)
        title = ("ICLR settings, limit int(k p) pending micro-batches (max_pending), comm edge" if not in_bytes else
                 "ICLR settings, byte memory model of mem.py (34h+5as per F, -32h per W), limit int(k p mem_f), comm edge")
        print(report(rows, title) + "\n")
        out[name] = rows
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
