"""How closely Holistic Trace Analysis' per-rank figures give back the harness's idle time, per case of a report.

Run: ``python benchmarks/hta_agreement.py [REPORT_DIR]`` (default ``reports/``) after a profiled run
(``pytest cases/ --profile-jobs``); needs HTA (``pip install -e '.[test]'``). For every case of
``REPORT_DIR/results.json`` it runs HTA's temporal breakdown on ``REPORT_DIR/hta/<case>/`` and prints
one line per case: whether it has send/receive jobs, and the worst rank's distance from our idle time
(the sum of ``metrics.per_step[].idle_ns`` over the recorded steps), in % of the median step, of

* ``idle_time(us) + hta_idle_offset_us`` (what a compute-only case needs), and
* ``idle_time(us) + non_compute_time(us) + hta_idle_offset_us``: HTA counts a send/receive kernel
  (``ncclDevKernel_SendRecv``) that runs while no compute kernel does as ``non_compute_time``, where
  the harness counts that time as the compute stream's idle time.

With ``HTA_DISABLE_NS_ROUNDING=1`` in the environment HTA keeps the traces' ns-resolution times; by
default it rounds each kernel's start up and its end down to a whole µs
(``hta/common/trace_parser.py``, ``round_down_time_stamps``), about 1 µs per compute job on its side.

HTA's columns are defined in ``hta/analyzers/breakdown_analysis.py`` (``get_temporal_breakdown``:
idle = first-to-last kernel time minus the union of all kernels; non-compute = that union minus the
union of the compute kernels). Nothing is asserted (``tests/test_hta.py`` asserts the exact ``sim``
figures); the figures of a ``cpu`` run depend on the machine's load.
"""

from __future__ import annotations

import argparse
import json
import logging
import warnings
from pathlib import Path

_COMM = frozenset({"SEND_F", "RECV_F", "SEND_B", "RECV_B"})


def main() -> None:
    from hta.trace_analysis import TraceAnalysis

    from harness.report.hta import hta_idle_offset_us
    from harness.report.render import case_filename

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report_dir", nargs="?", default="reports")
    args = ap.parse_args()
    folder = Path(args.report_dir)
    logging.disable(logging.CRITICAL)  # HTA logs every file it parses
    warnings.simplefilter("ignore")  # HTA 0.5 uses pandas' deprecated inplace sorting
    doc = json.loads((folder / "results.json").read_text())
    print("case | backend | send/receive jobs | worst rank: |idle + offset - ours| | |idle + non_compute + offset - ours| (% of the median step)")
    taken: set[str] = set()
    for case in doc["cases"]:
        hta_dir = folder / "hta" / case_filename(case["id"], taken)  # the stems write_report gives, in case order
        if not hta_dir.is_dir():
            continue
        df = TraceAnalysis(trace_dir=str(hta_dir), include_last_profiler_step=True).get_temporal_breakdown(visualize=False)
        idle = dict(zip(df["rank"], df["idle_time(us)"]))
        non_compute = dict(zip(df["rank"], df["non_compute_time(us)"]))
        offset = hta_idle_offset_us(case)
        step_us = case["metrics"]["step_time_median_ns"] / 1000
        per_step = case["metrics"]["per_step"]
        alone, added = 0.0, 0.0
        for rank in range(int(case["schedule"]["p"])):
            ours = sum(s["idle_ns"][rank] for s in per_step) / 1000
            alone = max(alone, abs(float(idle[rank]) + offset[rank] - ours) / step_us)
            added = max(added, abs(float(idle[rank]) + float(non_compute[rank]) + offset[rank] - ours) / step_us)
        comm = any(k in _COMM for k in case["jobs"]["kind"])
        print(f"{case['label']} | {case['backend']} | {'yes' if comm else 'no'} | {100 * alone:.2f}% | {100 * added:.2f}%")


if __name__ == "__main__":
    main()
