"""Import speed of torch.profiler traces, events per second, beside HTA's TraceAnalysis on the same files.

Run: ``python -m pytest benchmarks/bench_torch_import.py --benchmark-only`` (``HARNESS_TORCH_TRACE_MB`` sets the
folder's size, default 100). The folder is made by :func:`make_big_trace`: the real 2-rank example in
``tests/data/torch_traces/torch2.14_ScheduleInterleaved1F1B_2rank_m4`` with its recorded steps repeated
(shifted in time, renumbered) until the folder holds the size asked for, written as plain ``rank<k>.json``
as the profiler writes them. Figures go to ``extra_info`` (``events``, ``events_per_s``); nothing is asserted.
"""

from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

SRC = Path(__file__).resolve().parent.parent / "tests" / "data" / "torch_traces" / "torch2.14_ScheduleInterleaved1F1B_2rank_m4"


def _us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def _ns(text: Any) -> int:
    whole, _, frac = str(text).partition(".")
    return int(whole) * 1000 + int((frac + "000")[:3])


def make_big_trace(dst: Path, megabytes: float, src: Path = SRC) -> int:
    """Write ``dst/rank<k>.json`` of about ``megabytes`` MB in all: ``src``'s steps repeated. Returns the event count."""
    dst.mkdir(parents=True, exist_ok=True)
    files = sorted(src.glob("rank*.json.gz"))
    per_file = megabytes * 1e6 / len(files)
    total = 0
    for f in files:
        doc = json.loads(gzip.decompress(f.read_bytes()), parse_float=str)
        events = doc.pop("traceEvents")
        steps = [e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]
        a = min(_ns(e["ts"]) for e in steps)
        b = max(_ns(e["ts"]) + _ns(e["dur"]) for e in steps)
        body = [e for e in events if isinstance(e.get("pid"), int) and e.get("ph") in ("X", "s", "f")
                and a <= _ns(e["ts"]) < b]
        rest = [e for e in events if e not in body]
        period = b - a + 100_000
        lines: list[str] = []
        size = 0
        copy = 0
        while size < per_file:
            for e in body:
                ev = dict(e)
                ts = _ns(ev.pop("ts")) + copy * period
                dur = ev.pop("dur", None)
                if str(ev.get("name", "")).startswith("ProfilerStep#"):
                    ev["name"] = f"ProfilerStep#{int(ev['name'].split('#')[1]) + copy * len(steps)}"
                text = json.dumps(ev)[:-1] + f', "ts": {_us(ts)}' + (f', "dur": {_us(_ns(dur))}' if dur is not None else "") + "}"
                lines.append(text)
                size += len(text) + 2
            copy += 1
        lines += [json.dumps(e) for e in rest]
        head = json.dumps(doc)[:-1]
        (dst / f.name.removesuffix(".gz")).write_text(head + ', "traceEvents": [\n' + ",\n".join(lines) + "\n]}\n")
        total += len(lines)
    return total


@pytest.fixture(scope="module")
def big_trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    folder = tmp_path_factory.mktemp("torch_big")
    events = make_big_trace(folder, float(os.environ.get("HARNESS_TORCH_TRACE_MB", "100")))
    return folder, events


def _record(benchmark: Any, events: int, folder: Path, seconds: float) -> None:
    benchmark.extra_info["events"] = events
    benchmark.extra_info["megabytes"] = round(sum(f.stat().st_size for f in folder.iterdir()) / 1e6, 1)
    benchmark.extra_info["events_per_s"] = round(events / seconds)


def test_import_torch_traces(benchmark: Any, big_trace: tuple[Path, int]) -> None:
    """Our importer: read, recover the schedule, align clocks, replay (the whole of read_torch_traces)."""
    from harness.imports.torch import read_torch_traces

    folder, events = big_trace
    t0 = time.perf_counter()
    imp = benchmark.pedantic(read_torch_traces, args=(folder,), rounds=1, iterations=1)
    _record(benchmark, events, folder, time.perf_counter() - t0)
    benchmark.extra_info["steps"] = len(imp.records.steps)


def test_hta_trace_analysis(benchmark: Any, big_trace: tuple[Path, int]) -> None:
    """HTA's TraceAnalysis loading the same folder (its parse of every rank's trace)."""
    hta = pytest.importorskip("hta.trace_analysis")
    folder, events = big_trace
    t0 = time.perf_counter()
    benchmark.pedantic(lambda: hta.TraceAnalysis(trace_dir=str(folder)), rounds=1, iterations=1)
    _record(benchmark, events, folder, time.perf_counter() - t0)
