"""Figures of the ``cuda`` backend (issue 4), measured on a GPU.

* host enqueue cost per job (waits + start record + launch + end record), aim <= 15 µs;
* device-side gap between consecutive jobs on one stream (end event of one to
  start event of the next, no dependency wait), aim <= 5 µs;
* timer resolution (``%globaltimer`` step, smallest non-zero event difference)
  and the spread of a 100 µs ``spin`` job over 100 runs (median, IQR).

Run as pytest-benchmark tests (skipped without PyCUDA and a GPU)::

    pytest benchmarks/bench_cuda.py --benchmark-only

or print the table (what ``scripts/gpu_check.sh`` does)::

    python benchmarks/bench_cuda.py [--runs 100] [--json figures.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import pytest

from harness.run.device import cuda
from harness.run.device.base import Work

US = 1_000
ENQUEUE_AIM_NS = 15 * US
GAP_AIM_NS = 5 * US


def _quartiles(xs: list[int]) -> tuple[float, float, float]:
    q = statistics.quantiles(sorted(xs), n=4, method="inclusive")
    return q[0], q[1], q[2]


def enqueue_cost(dev: cuda.CudaDevice, jobs: int = 2000) -> dict[str, float]:
    """Host ns per job for the executor's pattern on two streams (ns).

    Each job: wait on the other stream's previous end event, record start,
    launch a 2 µs spin, record end. Reports the mean over all jobs (wall clock)
    and the median of the device's per-job log.
    """
    s = [dev.stream("rank0/compute"), dev.stream("rank1/compute")]
    starts = [dev.event() for _ in range(jobs)]
    ends = [dev.event() for _ in range(jobs)]
    work = Work(duration_ns=2 * US, label="0F0")
    for _ in range(2):  # first pass creates the events (warm-up), second is timed
        t0 = time.perf_counter_ns()
        for j in range(jobs):
            st = s[j % 2]
            if j:
                dev.wait(st, ends[j - 1])
            dev.record(starts[j], st)
            dev.launch(st, work)
            dev.record(ends[j], st)
        total = time.perf_counter_ns() - t0
        dev.synchronize()
    log = [ns for _, ns in dev.last_enqueue_ns()]
    return {"mean_ns": total / jobs, "median_ns": float(statistics.median(log)) if log else float("nan")}


def stream_gap(dev: cuda.CudaDevice, jobs: int = 200, job_ns: int = 20 * US) -> dict[str, float]:
    """Device-side gap between consecutive jobs on one stream (ns): median and max."""
    s = dev.stream("rank0/compute")
    starts = [dev.event() for _ in range(jobs)]
    ends = [dev.event() for _ in range(jobs)]
    work = Work(duration_ns=job_ns, label="0F0")
    for _ in range(2):
        for j in range(jobs):
            dev.record(starts[j], s)
            dev.launch(s, work)
            dev.record(ends[j], s)
        dev.synchronize()
    gaps = [dev.elapsed_ns(ends[j], starts[j + 1]) for j in range(jobs - 1)]
    durs = [dev.elapsed_ns(starts[j], ends[j]) for j in range(jobs)]
    return {
        "median_ns": float(statistics.median(gaps)),
        "max_ns": float(max(gaps)),
        "duration_error_median_ns": float(statistics.median(abs(d - job_ns) for d in durs)),
    }


def spin_spread(dev: cuda.CudaDevice, runs: int = 100, job_ns: int = 100 * US) -> dict[str, Any]:
    """A ``job_ns`` spin job measured ``runs`` times, each after a synchronize (ns)."""
    s = dev.stream("rank0/compute")
    a, b = dev.event(), dev.event()
    samples: list[int] = []
    for i in range(runs + 5):
        dev.record(a, s)
        dev.launch(s, Work(duration_ns=job_ns, label="spin"))
        dev.record(b, s)
        dev.synchronize()
        if i >= 5:
            samples.append(dev.elapsed_ns(a, b))
    q1, med, q3 = _quartiles(samples)
    return {"median_ns": med, "iqr_ns": q3 - q1, "min_ns": min(samples), "max_ns": max(samples), "samples": samples}


def measure_figures(runs: int = 100) -> dict[str, Any]:
    """All figures on a fresh device (one per figure, so the streams do not mix).

    Raises:
        BackendUnavailable: no PyCUDA or no GPU.
    """
    out: dict[str, Any] = {}
    for key, fn in (("enqueue", enqueue_cost), ("gap", stream_gap), ("spin100", lambda d: spin_spread(d, runs))):
        dev = cuda.CudaDevice()
        try:
            out[key] = fn(dev)
            if key == "spin100":
                out["timer"] = dev.timer_resolution_ns()
                out["device"] = dev.describe()
        finally:
            dev.close()
    return out


def format_table(f: dict[str, Any]) -> str:
    """The figures as a small text table (µs)."""
    dev = f.get("device", {})

    def us(ns: float) -> str:
        return f"{ns / US:8.2f} µs"

    rows = [
        ("host enqueue per job (mean)", us(f["enqueue"]["mean_ns"]), f"aim <= {ENQUEUE_AIM_NS // US} µs"),
        ("host enqueue per job (median, log)", us(f["enqueue"]["median_ns"]), ""),
        ("gap between jobs, one stream (median)", us(f["gap"]["median_ns"]), f"aim <= {GAP_AIM_NS // US} µs"),
        ("gap between jobs, one stream (max)", us(f["gap"]["max_ns"]), ""),
        ("20 µs job duration error (median)", us(f["gap"]["duration_error_median_ns"]), ""),
        ("%globaltimer resolution", us(f["timer"]["globaltimer"]), ""),
        ("event timer resolution (min > 0)", us(f["timer"]["event"]), ""),
        ("spin 100 µs x100: median", us(f["spin100"]["median_ns"]), "want 100 ± 2 µs"),
        ("spin 100 µs x100: IQR", us(f["spin100"]["iqr_ns"]), ""),
        ("spin 100 µs x100: min .. max", f"{f['spin100']['min_ns'] / US:.2f} .. {f['spin100']['max_ns'] / US:.2f} µs", ""),
    ]
    head = f"{dev.get('name', '?')}  (driver {dev.get('driver_version')}, CUDA {dev.get('cuda_version')}, PyCUDA {dev.get('pycuda')})"
    width = max(len(r[0]) for r in rows)
    lines = [head, "-" * len(head)]
    lines += [f"{name:<{width}}  {value:>22}  {note}".rstrip() for name, value, note in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the figures table; exit 2 when no GPU is usable."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--json", help="also write the figures (with raw samples) to this file")
    args = p.parse_args(argv)
    ok, why = cuda.probe()
    if not ok:
        print(f"no GPU figures: {why}", file=sys.stderr)
        return 2
    figures = measure_figures(args.runs)
    print(format_table(figures))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(figures, fh, indent=1, default=str)
    return 0


# --------------------------------------------------------------------------- pytest-benchmark

_OK, _WHY = cuda.probe()
pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not _OK, reason=f"needs PyCUDA and a GPU: {_WHY}")]


class DeviceClock:
    """A pytest-benchmark timer returning accumulated device seconds."""

    total_s = 0.0

    def __call__(self) -> float:
        return DeviceClock.total_s


@pytest.fixture
def device() -> Any:
    dev = cuda.CudaDevice()
    yield dev
    dev.close()


@pytest.mark.benchmark(timer=DeviceClock(), disable_gc=True, warmup=False)
def test_spin_100us(benchmark: Any, device: cuda.CudaDevice) -> None:
    s = device.stream("rank0/compute")
    a, b = device.event(), device.event()
    work = Work(duration_ns=100 * US, label="spin")

    def one() -> None:
        device.record(a, s)
        device.launch(s, work)
        device.record(b, s)
        device.synchronize()
        DeviceClock.total_s += device.elapsed_ns(a, b) / 1e9

    for _ in range(5):
        one()
    benchmark.pedantic(one, rounds=100, iterations=1)
    benchmark.extra_info.update(timer=device.timer_resolution_ns(), device=device.describe())
    assert abs(benchmark.stats.stats.median - 100e-6) <= 2e-6


def test_enqueue_cost_per_job(benchmark: Any, device: cuda.CudaDevice) -> None:
    figures = benchmark.pedantic(enqueue_cost, args=(device,), rounds=1, iterations=1)
    benchmark.extra_info.update(figures)
    assert figures["mean_ns"] > 0


def test_gap_between_jobs(benchmark: Any, device: cuda.CudaDevice) -> None:
    figures = benchmark.pedantic(stream_gap, args=(device,), rounds=1, iterations=1)
    benchmark.extra_info.update(figures)
    assert figures["median_ns"] >= 0


if __name__ == "__main__":
    sys.exit(main())
