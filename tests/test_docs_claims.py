"""Claims of README.md and docs/*.md that a user copies or relies on, checked against the tool.

Each test names the text it checks; where the docs quote output, the test reads the quote from the
doc itself, so the doc and the tool cannot drift apart unnoticed. (HTA's figures against ours,
docs/reports.md "Traces", are checked in tests/test_hta.py.)
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.case import PipelineCase
from harness.model.cost import FixedCost
from harness.report.hta import hta_rank_trace
from harness.report.results import case_to_dict
from harness.report.trace import case_trace
from harness.runner import run_case

ROOT = Path(__file__).resolve().parent.parent


def _doc(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def test_readme_states_the_default_cost_and_a_case_without_one_runs_it():
    # README "Writing a case": a case without a cost runs FixedCost.ms(F=1, B=2):
    # F 1 ms, B 2 ms, I and W 1 ms each, transfers free, no memory.
    assert "a case without one runs\n`FixedCost.ms(F=1, B=2)`: F 1 ms, B 2 ms, I and W 1 ms each, transfers free, no memory" in _doc("README.md")
    cost = PipelineCase("1F1B", stages=4, microbatches=8).cost
    assert cost == FixedCost.ms(F=1, B=2)
    described = cost.describe()
    kinds = ("forward_ns", "backward_ns", "backward_input_ns", "backward_weight_ns")
    assert [described[k] for k in kinds] == [1_000_000, 2_000_000, 1_000_000, 1_000_000]
    assert cost.p2p_latency_ns == 0 and cost.p2p_gbytes_per_s is None and cost.mem_F == 0 and cost.mem_static == 0
    result = run_case(PipelineCase("1F1B", stages=4, microbatches=8), backend="sim")
    assert result.metrics.step_time_median_ns == 33_000_000  # (m + p - 1)(F + B) = 11 x 3 ms
    assert result.memory is None or max(result.memory.peak_bytes) == 0
    assert not any(j.kind.startswith(("SEND", "RECV")) for j in result.records.jobs)  # free transfers: no send/receive jobs
    split = run_case(PipelineCase("ZB-H1", stages=4, microbatches=8), backend="sim")  # a schedule that splits the backward
    assert {(j.kind, j.end_ns - j.start_ns) for j in split.records.jobs} == {("F", 1_000_000), ("I", 1_000_000), ("W", 1_000_000)}


def test_memory_doc_quotes_the_does_not_fit_lines_the_summary_prints(pytester):
    # docs/memory.md quotes two summary lines of `pytest cases/ --profile-jobs`; the bytes come from the
    # cost model, so a sim run prints the same lines.
    quoted = [line for line in _doc("docs/memory.md").splitlines() if line.startswith("does not fit: ")]
    assert len(quoted) == 2
    result = pytester.runpytest_subprocess(str(ROOT / "cases" / "test_memory_and_stages.py"), "--backend=sim", "-p", "no:benchmark",
                                           "-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=5)
    printed = [line for line in result.outlines if line.startswith("does not fit: ")]
    assert len(printed) == 3 and all(q in printed for q in quoted), (quoted, printed)


def _step_slices(events, pid=None):
    return {e["args"]["step"]: (e["ts"], e["ts"] + e["dur"]) for e in events
            if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#") and (pid is None or e["pid"] == pid)}


@pytest.mark.parametrize("backend", ["sim", "cpu"])
def test_profiler_step_slices_span_the_recorded_step(backend):
    # docs/reports.md "Traces": a run's ProfilerStep#N spans step_start_ns to step_end_ns: from the
    # step's start (before any of its jobs; at its first job on sim) to the end of its last job;
    # the HTA files' slices span the same times.
    case = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=2, cost=FixedCost.ms(F=1, B=2)), backend, range(1, 3)))
    assert "slice per step on a \"Steps\" track, spanning the step as `results.json` records it" in _doc("docs/reports.md")
    jobs = case["jobs"]
    events = case_trace(case)["traceEvents"]
    slices = _step_slices(events)
    assert sorted(slices) == case["steps"] == [1, 2]
    spans = {e["args"]["span"] for e in events if e["name"].startswith("ProfilerStep#")}
    assert spans == {"the step: its reference time (step_start_ns) to its last job's end"}
    for k, step in enumerate(case["steps"]):
        start, end = case["step_start_ns"][k], case["step_end_ns"][k]
        assert slices[step] == (start / 1000, end / 1000)
        of_step = [i for i in range(len(jobs["kind"])) if jobs["step"][i] == step]
        first = min(jobs["start_ns"][i] for i in of_step)
        assert end == max(jobs["end_ns"][i] for i in of_step)
        assert first == start if backend == "sim" else first >= start
        for rank in range(2):
            hta_steps = _step_slices(hta_rank_trace(case, rank)["traceEvents"])
            assert hta_steps[step] == pytest.approx(slices[step], abs=1e-9)


def test_imported_profiler_step_slices_are_the_union_of_the_jobs(tmp_path):
    # docs/reports.md "Traces": in an imported log a step spans its first job start to its last job end.
    from harness.imports.paddle import import_paddle_logs

    line = ("Profiler Info: Job (0), type = {t}, micro_batch_id = {m}, job_start_time = {a:.6f}, job_end_time = {b:.6f}\n")
    base = 1697793307000.0  # ms since the epoch
    logs = {  # per device: (type, micro-batch, start ms, end ms), one step of m = 1
        0: [("forward", 0, 2.0, 3.0), ("backward", 0, 7.0, 9.0)],
        1: [("forward", 0, 3.5, 4.5), ("backward", 0, 4.5, 6.5)],
    }
    for dev, rows in logs.items():
        (tmp_path / f"workerlog.{dev}").write_text("".join(line.format(t=t, m=m, a=base + a, b=base + b) for t, m, a, b in rows))
    case = import_paddle_logs(tmp_path)
    case = json.loads(json.dumps(case))  # as results.json holds it
    (step,) = case["steps"]
    assert case["step_end_ns"][0] - case["step_start_ns"][0] == 7_000_000  # 2.0 ms to 9.0 ms
    slices = _step_slices(case_trace(case)["traceEvents"])
    assert slices[step][1] - slices[step][0] == pytest.approx(7000.0)
    assert re.search(r"in an imported log or `torch.profiler` trace from the step's first job\nstart to its last job end", _doc("docs/reports.md"))


def test_case_ids_the_docs_and_help_texts_name_are_the_shipped_cases():
    """README.md, docs/*.md and the --case help of compare and export-paddle name cases by their short label
    (``test_schedule_zoo[ZB-H1]``): each must be a parametrized test of cases/, with that id, so the command
    works as written on a report of ``pytest cases/``."""
    texts = {name: _doc(name) for name in ["README.md", *(f"docs/{p.name}" for p in sorted((ROOT / "docs").glob("*.md")))]}
    texts.update({f"harness/cli/{n}.py": _doc(f"harness/cli/{n}.py") for n in ("compare", "export_paddle", "common")})
    collected = subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "cases"), "--collect-only", "-q", "-p", "no:cacheprovider",
                                "-p", "no:randomly"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    shipped = {line.split("::", 1)[1] for line in collected.splitlines() if "::" in line}
    named = {(where, m.group(0)) for where, text in texts.items() for m in re.finditer(r"\btest_\w+\[[^\]\s`\"']+\]", text)}
    assert ("README.md", "test_schedule_zoo[1F1B]") in named  # the compare example is seen
    assert "test_schedule_zoo[ZB-H1]" in shipped
    wrong = sorted((where, label) for where, label in named if label not in shipped)
    assert not wrong, f"named, but not a case of cases/: {wrong}"
