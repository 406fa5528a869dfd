"""False alarms and detection of ``compare --fail step_time:5%`` on real back-to-back runs of the cases.

Not a pytest-benchmark timing: a count of verdicts, measured the way a user
meets them. Each run is ``pytest cases --profile-jobs --backend=cpu`` on a copy
of ``cases/`` (the default adaptive window), one run after another:

* false alarms: PAIRS pairs of runs of the same code, compared with the gate;
  a pair whose ``compare`` exits 1 is a false alarm;
* detection: for each pair, one more run whose custom-CSV case has a cost model
  10 % slower (F = 2.2 ms, B = 4.4 ms instead of 2 and 4), compared against the
  pair's first run; detected when that case's verdict is ``slower`` and the gate
  fails it.

Usage (about a minute per run on a 2-core machine; run it on a quiet machine,
as anything else running makes the cases ``contended``)::

    python benchmarks/false_alarms.py --pairs 10 [--out DIR] [-k "not matmul"]

It prints one line per pair and a summary, and writes the summary as JSON to
``DIR/summary.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SLOWED = "test_custom_schedule.py::test_custom_csv_schedule"


def run_cases(cases: Path, report: Path, select: str | None = None) -> float:
    """Run the cases (``select``: a pytest ``-k`` expression) on the cpu backend into ``report``; the run's wall time (s)."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", str(cases), "--profile-jobs", "--backend=cpu",
                           f"--report-dir={report}", "-p", "no:cacheprovider", "-q", "--benchmark-disable",
                           *(["-k", select] if select else [])],
                          capture_output=True, text=True, cwd=cases.parent)
    if proc.returncode != 0:
        raise SystemExit(f"cases failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    return time.perf_counter() - t0


def compare(base: Path, new: Path) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "harness", "compare", str(base / "results.json"), str(new / "results.json"),
                           "--fail", "step_time:5%"], capture_output=True, text=True)
    return proc.returncode, proc.stdout


def row_of(out: str, case: str) -> str:
    return next((line for line in out.splitlines() if case in line and ("ms" in line)), "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("-k", dest="select", default=None,
                        help="only the cases this pytest -k expression selects (e.g. 'not matmul': the GEMM cases are "
                             "flagged contended on a 2-core machine and never gated, and spend their 10 s budgets)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="false-alarms-"))
    out = args.out or work
    out.mkdir(parents=True, exist_ok=True)
    same, slow = work / "same" / "cases", work / "slow" / "cases"
    shutil.copytree(ROOT / "cases", same, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "cases", slow, ignore=shutil.ignore_patterns("__pycache__"))
    custom = slow / "test_custom_schedule.py"
    text = custom.read_text()
    assert "COST = FixedCost.ms(F=2, B=4)" in text
    custom.write_text(text.replace("COST = FixedCost.ms(F=2, B=4)", "COST = FixedCost.ms(F=2.2, B=4.4)")
                      .replace("predicted.makespan_ns == 30 * MS", "predicted.makespan_ns == 33 * MS")
                      .replace("== 36 * MS", "== round(36 * 1.1 * MS)"))
    alarms, detected, walls, flagged = 0, 0, [], []
    for i in range(args.pairs):
        a, b, c = work / f"r{i}a", work / f"r{i}b", work / f"r{i}slow"
        walls.append(run_cases(same, a, args.select))
        walls.append(run_cases(same, b, args.select))
        walls.append(run_cases(slow, c, args.select))
        code, text_ab = compare(a, b)
        code_slow, text_ac = compare(a, c)
        alarms += code != 0
        row = row_of(text_ac, SLOWED)
        hit = code_slow == 1 and "slower" in row and "FAIL step_time" in row
        detected += hit
        summary_ab = text_ab.strip().splitlines()[-1]
        flagged.append(summary_ab)
        verdict = "detected" if hit else "MISSED"
        print(f"pair {i + 1}: same code exit {code} ({summary_ab}); 10% slower case: {verdict} ({row.strip()})", flush=True)
        for path in (a, b, c):
            if i > 0:
                shutil.rmtree(path, ignore_errors=True)
    result = {"pairs": args.pairs, "false_alarms": alarms, "detected": detected, "run_wall_s": walls,
              "run_wall_s_max": max(walls), "same_code_summaries": flagged}
    (out / "summary.json").write_text(json.dumps(result, indent=2))
    print(f"false alarms: {alarms} of {args.pairs} pairs; detected: {detected} of {args.pairs}; "
          f"cases run wall time {min(walls):.1f}-{max(walls):.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
