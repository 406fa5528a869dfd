"""Report and run figures at a million jobs (issue 13), each in a fresh process.

Run: ``python benchmarks/bench_scale.py [--jobs 1000000] [--big 10000000] [--only NAME ...] [--repeat 3] [--prefault 700]``.

* ``write_report``: one case of about ``--jobs`` jobs (1F1B, p = 32, send/receive jobs,
  one sim step) rendered into a temporary folder: trace, HTA rank files, results.json
  and the page. CPU and wall seconds of the call, the process's peak RSS before and
  after it (``ru_maxrss``: the call's own peak shows when it exceeds the run's), and the
  bytes written.
* ``sim`` and ``analytic``: ``run_case(backend="sim")`` against ``analyze()`` of the same
  case (build, plan, timeline, figures), CPU seconds, ns per job and peak RSS of a
  process that did only that.
* ``analytic-big``: ``analyze()`` at ``--big`` jobs, for ns per job against the 1 M figure. Both
  analytic figures split the CPU time into user and system time and count page faults: on a VM the
  kernel's cost per first-touch page fault can grow with the process's size, which user time does not.

Each figure runs ``--repeat`` times (default 3), each time in a fresh process, and one JSON
line gives the median run (by CPU time) with every run's CPU seconds beside it (``cpu_s_runs``).

Fresh memory: before each run a throwaway process touches ``--warm-bytes-per-job`` (default
600) bytes per job and exits, so the run's memory is memory the kernel recently freed, whatever
the run's size. On a VM that hands free memory back to its host (free page reporting, e.g.
Firecracker's virtio-balloon with ``page_reporting``) a page the guest gave back costs about 10x
more to touch again: measured here, 2.7 ns per byte for 3.2 GB of returned memory against 0.24
ns per byte right after another process freed it. Without the warm-up a 10 M-job run, whose 4 GB
reach past what recent processes freed, pays that in system time and a 1 M-job run mostly does
not, which says nothing about the harness. ``--warm-bytes-per-job 0`` turns it off. The warm-up
helps only in part: the host takes memory back about 2 s after it is freed.

``--prefault BYTES_PER_JOB`` takes first-touch page faults out of the figures altogether: each run
keeps its freed memory (glibc ``MALLOC_MMAP_MAX_=0``, ``MALLOC_TRIM_THRESHOLD_`` past any size) and
touches that many bytes per job before it is timed, so the run's numpy columns reuse memory it
has already touched. What is left is the harness's own work, at any size. Python's object arenas
are mapped apart from this, so some page faults remain (``page_faults_per_job``); ``peak_rss``
then includes the bytes touched first.

Nothing is asserted. Times on a shared machine vary; compare figures from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

P = 32


def _m_for(jobs: int) -> int:
    # 1F1B with send/receive jobs: per micro-batch 2 jobs per stage and 4 transfers per boundary (48,128 jobs at m = 256).
    return max(P, round(jobs * 256 / 48_128))


def _case(jobs: int):  # type: ignore[no-untyped-def]
    from harness.case import PipelineCase
    from harness.model.cost import FixedCost

    return PipelineCase("1F1B", stages=P, microbatches=_m_for(jobs), comm=True, cost=FixedCost.ms(F=1, B=2))


def _rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _one(name: str, jobs: int) -> dict:
    prefault = int(os.environ.get("BENCH_SCALE_PREFAULT", "0"))
    if prefault:
        import numpy as np

        np.ones(prefault * jobs // 8, np.int64)  # touched, freed, kept by the heap (see --prefault)
    from harness.runner import run_case

    if name == "write_report":
        from harness.report.render import write_report
        from harness.report.results import case_to_dict, results_document

        doc = results_document([case_to_dict(run_case(_case(jobs), "sim", range(0, 1)))])
        n = len(doc["cases"][0]["jobs"]["kind"])
        before = _rss()
        with tempfile.TemporaryDirectory() as tmp:
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            c, w = time.process_time(), time.perf_counter()
            write_report(Path(tmp), doc, notice=lambda s: None)
            c, w = time.process_time() - c, time.perf_counter() - w
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            size = sum(f.stat().st_size for f in Path(tmp).rglob("*") if f.is_file())
        # system time: the page cache of the bytes written and first-touch page faults (see the module doc)
        return {"figure": name, "jobs": n, "cpu_s": round(c, 2), "user_s": round(r1.ru_utime - r0.ru_utime, 2),
                "sys_s": round(r1.ru_stime - r0.ru_stime, 2), "wall_s": round(w, 2), "peak_rss_before": before,
                "peak_rss_after": _rss(), "bytes_written": size}
    if name == "sim":
        c = time.process_time()
        result = run_case(_case(jobs), "sim", range(0, 1))
        c = time.process_time() - c
        n = result.records.num_jobs  # (reading .jobs would make a JobRecord per job)
    else:
        from harness.analysis.analytic import analyze
        from harness.schedule.registry import build_schedule

        case = _case(jobs)
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        c = time.process_time()
        out = analyze(build_schedule("1F1B", P, case.microbatches), case.cost, comm="stream")
        c = time.process_time() - c
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        n = out.num_jobs if hasattr(out, "num_jobs") else jobs
        # CPU time split: the harness's own (user) and the kernel's (sys: mostly first-touch page faults)
        split = {"user_ns_per_job": round((r1.ru_utime - r0.ru_utime) * 1e9 / n), "sys_ns_per_job": round((r1.ru_stime - r0.ru_stime) * 1e9 / n),
                 "page_faults_per_job": round((r1.ru_minflt - r0.ru_minflt) / n, 3)}
        return {"figure": name, "jobs": n, "cpu_s": round(c, 2), "ns_per_job": round(c * 1e9 / n), **split, "peak_rss": _rss(),
                "bytes_per_job": round(_rss() / n)}
    return {"figure": name, "jobs": n, "cpu_s": round(c, 2), "ns_per_job": round(c * 1e9 / n), "peak_rss": _rss(),
            "bytes_per_job": round(_rss() / n)}


def _warm(nbytes: int) -> int:
    """Touch ``nbytes`` (at most 70 % of the memory available) in a throwaway process; the bytes touched."""
    try:
        avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        avail = nbytes
    nbytes = min(nbytes, int(avail * 0.7))
    if nbytes > 0:
        subprocess.run([sys.executable, "-c", f"import numpy; numpy.ones({nbytes // 8}, numpy.int64)"], check=True)
    return max(nbytes, 0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--big", type=int, default=10_000_000)
    ap.add_argument("--only", action="append", choices=["write_report", "sim", "analytic", "analytic-big"])
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure, each in a fresh process (median shown)")
    ap.add_argument("--warm-bytes-per-job", type=int, default=600,
                    help="bytes per job touched in a throwaway process before each run (0: none)")
    ap.add_argument("--prefault", type=int, default=0, metavar="BYTES_PER_JOB",
                    help="each run touches this many bytes per job first and keeps its freed memory (0: off)")
    ap.add_argument("--child", nargs=2, metavar=("NAME", "JOBS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        name, jobs = args.child
        print(json.dumps(_one(name.replace("-big", ""), int(jobs))), flush=True)
        return 0
    for name in args.only or ["write_report", "sim", "analytic", "analytic-big"]:
        jobs = args.big if name == "analytic-big" else args.jobs
        runs = []
        for _ in range(max(1, args.repeat)):
            warmed = _warm(args.warm_bytes_per_job * jobs)
            env = {**os.environ, "BENCH_SCALE_PREFAULT": str(args.prefault)}
            if args.prefault:
                env.update(MALLOC_MMAP_MAX_="0", MALLOC_TRIM_THRESHOLD_=str(1 << 50))
            out = subprocess.run([sys.executable, __file__, "--child", name, str(jobs)], capture_output=True, text=True, env=env)
            if not out.stdout.strip():
                runs = [{"figure": name, "error": out.stderr.strip()[-500:]}]
                break
            runs.append({**json.loads(out.stdout), "warmed_bytes": warmed, "prefault_bytes_per_job": args.prefault})
        if "error" not in runs[0]:
            runs.sort(key=lambda r: r["cpu_s"])
            runs[len(runs) // 2]["cpu_s_runs"] = [r["cpu_s"] for r in runs]
        print(json.dumps(runs[len(runs) // 2]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
