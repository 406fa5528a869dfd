"""CPU time of the job checks :mod:`harness.report.fields` runs on every case (harness.records: a job
listed twice, a job outside its step), against the whole field check, on one large sim case.

Run: ``python benchmarks/bench_job_checks.py [--m 16384] [--rounds 5]`` (1F1B, p = 32: 2 * p * m jobs per step,
1,048,576 at the default m). Prints one JSON line: the medians of process CPU time (s) of
``first_duplicate``, ``first_outside_step`` and ``case_field_problem`` (which includes both) over the rounds.
Nothing is asserted; figures on a loaded machine are only comparable within one run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def main() -> None:
    from harness.case import PipelineCase
    from harness.records import first_duplicate, first_outside_step
    from harness.report.fields import case_field_problem
    from harness.report.jobtable import JobTable
    from harness.report.results import case_to_dict
    from harness.runner import run_case

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=16384)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    case = case_to_dict(run_case(PipelineCase("1F1B", stages=32, microbatches=args.m), "sim", range(0, 1)))
    table = JobTable.from_case(case)
    timings: dict[str, list[float]] = {"first_duplicate": [], "first_outside_step": [], "case_field_problem": []}
    for _ in range(args.rounds):
        t = time.process_time()
        assert first_duplicate(table.rank, table.step, table.label) is None
        timings["first_duplicate"].append(time.process_time() - t)
        t = time.process_time()
        assert first_outside_step(table.step, table.start_ns, table.end_ns, case["steps"], case["step_start_ns"], case["step_end_ns"]) is None
        timings["first_outside_step"].append(time.process_time() - t)
        t = time.process_time()
        assert case_field_problem(case, []) is None
        timings["case_field_problem"].append(time.process_time() - t)
    print(json.dumps({"jobs": table.n, **{k: round(statistics.median(v), 4) for k, v in timings.items()}}))


if __name__ == "__main__":
    main()
