"""compare on noisy runs: results files whose per-step times are drawn from known distributions (fixed seeds).

Each case is a real sim run whose recorded steps are stretched to the drawn step
times, so its results file is consistent (jobs, per-step figures, metrics) and
passes every check ``compare`` makes; only the backend says ``cpu``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness.analysis.compare import compare_documents
from harness.analysis.metrics import compute_metrics
from harness.analysis.result import CaseResult
from harness.case import PipelineCase
from harness.cli import main
from harness.model.cost import FixedCost
from harness.plan.build import build_plan
from harness.records import JobRecord
from harness.report.results import case_to_dict, results_document
from harness.run.device.sim import SimDevice
from harness.run.executor import execute
from harness.run.stability import Flag
from harness.runner import run_case

COST = FixedCost.ms(F=1, B=2)


def noisy_case(case_id, step_times_ns, flags=()):
    """A cpu-like case whose recorded steps last ``step_times_ns``."""
    case = PipelineCase("1F1B", 2, 4, cost=COST)
    schedule = case.build()
    plan = build_plan(schedule)
    n = len(step_times_ns)
    records = execute(plan, SimDevice(), COST, range(0, n))
    makespan = records.step_end_ns[0] - records.step_start_ns[0]
    starts, t = [], 0
    for d in step_times_ns:
        starts.append(t)
        t += int(d) + 1000
    jobs = []
    for j in records.jobs:
        k = records.steps.index(j.step)
        f = step_times_ns[k] / makespan
        base = records.step_start_ns[k]
        jobs.append(JobRecord(j.rank, j.stream, j.stage, j.kind, j.microbatch, j.chunk, j.step,
                              starts[k] + round((j.start_ns - base) * f), starts[k] + round((j.end_ns - base) * f), j.enqueue_ns))
    records.jobs = jobs
    records.step_start_ns = starts
    records.step_end_ns = [s + max(j.end_ns for j in jobs if j.step == step) - s for s, step in zip(starts, records.steps)]
    records = records.replace(backend="cpu", device={"workload": "sleep"})
    result = CaseResult(case_id, case_id, schedule, records, compute_metrics(records), cost=COST.describe(), plan=plan,
                        flags=list(flags))
    return case_to_dict(result)


def write(path, cases):
    path.write_text(json.dumps(results_document(cases)))
    return path


def draws(median_ms, rel_sd, n, seed):
    rng = np.random.default_rng(seed)
    return [int(x) for x in rng.normal(median_ms * 1e6, rel_sd * median_ms * 1e6, n)]


@pytest.fixture
def files(tmp_path):
    def make(name, median_ms, seed, rel_sd=0.02, n=20, flags=()):
        return write(tmp_path / f"{name}.json", [noisy_case("cases/x.py::test_a", draws(median_ms, rel_sd, n, seed), flags)])
    return make


def test_samples_of_one_distribution_give_no_significant_change_and_pass_the_gate(files, capsys):
    base, new = files("base", 100, seed=1), files("new", 100, seed=2)
    assert main(["compare", str(base), str(new), "--fail", "step_time:5%"]) == 0
    out = capsys.readouterr().out
    assert "no significant change" in out and "95% CI" in out
    assert out.splitlines()[-1].startswith("1 case(s) compared, 0 past a threshold (gates: step_time +5%) at 95% confidence: "
                                           "1 no significant change")


def test_a_ten_percent_shift_is_slower_and_fails_the_gate(files, capsys):
    base, new = files("base", 100, seed=1), files("new", 110, seed=2)
    assert main(["compare", str(base), str(new), "--fail", "step_time:5%"]) == 1
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("cases/x.py::test_a"))
    assert "slower" in row and "FAIL step_time" in row
    assert "1 past a threshold" in out and ": 1 slower" in out


def test_a_three_percent_shift_passes_a_five_percent_gate(files, capsys):
    base, new = files("base", 100, seed=1, rel_sd=0.005), files("new", 103, seed=2, rel_sd=0.005)
    assert main(["compare", str(base), str(new), "--fail", "step_time:5%"]) == 0  # significant, but within the gate
    assert ": 1 slower" in capsys.readouterr().out
    assert main(["compare", str(base), str(new), "--fail", "step_time:2%"]) == 1  # past 2% and significant


def test_a_large_change_within_the_noise_does_not_fail(files, capsys):
    # steps this noisy earn a real run the 'unstable' flag (the file is refused without it): --strict gates them anyway
    spread = [Flag("unstable", "step times spread widely")]
    base = files("base", 100, seed=1, rel_sd=0.30, n=5, flags=spread)
    new = files("new", 108, seed=2, rel_sd=0.30, n=5, flags=spread)
    deltas, _, _ = compare_documents(json.loads(base.read_text()), json.loads(new.read_text()), [], strict=True)
    (d,) = deltas
    assert d.verdict == "no significant change" and d.step.ci_low < 0 < d.step.ci_high
    assert main(["compare", str(base), str(new), "--fail", "step_time:5%", "--strict"]) == 0


def test_an_unstable_case_is_reported_not_gated_unless_strict(files, capsys):
    flag = Flag("unstable", "step times spread widely")
    base, new = files("base", 100, seed=1), files("new", 110, seed=2, flags=[flag])
    assert main(["compare", str(base), str(new), "--fail", "step_time:5%"]) == 0
    out = capsys.readouterr().out
    assert "slower (flagged)" in out and "flagged: cases/x.py::test_a: new unstable: step times spread widely" in out
    assert "1 flagged case(s) not gated (flagged unstable, contended, clocks or steps in either file; --strict gates them)" in out
    assert main(["compare", str(base), str(new), "--fail", "step_time:5%", "--strict"]) == 1
    assert "1 flagged case(s) gated (--strict)" in capsys.readouterr().out


def test_a_higher_confidence_widens_the_interval(files, capsys):
    base, new = files("base", 100, seed=1), files("new", 101.5, seed=2)
    b, n = json.loads(base.read_text()), json.loads(new.read_text())
    (d95,), _, _ = compare_documents(b, n, [])
    (d99,), _, _ = compare_documents(b, n, [], confidence=0.99)
    assert d99.step.ci_low < d95.step.ci_low and d99.step.ci_high > d95.step.ci_high
    assert main(["compare", str(base), str(new), "--confidence", "99%"]) == 0
    assert "99% CI" in capsys.readouterr().out
    assert main(["compare", str(base), str(new), "--confidence", "1.5"]) == 2
    assert "expected a level from 0.5 to below 1" in capsys.readouterr().err


def test_a_setup_difference_shared_by_many_cases_is_said_once(tmp_path, capsys):
    cases = [noisy_case(f"cases/x.py::test[{i}]", draws(100, 0.02, 5, i)) for i in range(5)]
    base = write(tmp_path / "base.json", cases)
    doc = json.loads(base.read_text())
    for c in doc["cases"]:
        c["device"]["workload"] = "matmul"
    new = tmp_path / "new.json"
    new.write_text(json.dumps(doc))
    assert main(["compare", str(base), str(new)]) == 0
    err = capsys.readouterr().err
    assert err.count("warning:") == 1
    assert err == ("warning: 5 cases ran on different setups (workload 'sleep' vs 'matmul'); their deltas compare the setups, "
                   "not the schedule: cases/x.py::test[0], cases/x.py::test[1], cases/x.py::test[2], ... (2 more)\n")


def test_a_gate_below_the_drift_between_runs_is_warned_about_on_timed_cases(files, capsys, tmp_path):
    # a 1 % gate failed an unflagged case of identical code: its CIs hold one run's steps, not the drift between runs
    base, new = files("base", 100, seed=1), files("new", 100, seed=2)
    main(["compare", str(base), str(new), "--fail", "step_time:1%", "--fail", "bubble:1"])
    err = capsys.readouterr().err
    tail = ("docs/measurement.md): each confidence interval is over one run's own steps and does not hold that drift, so the gate "
            "can fail identical code (1 timed case(s) compared)\n")
    assert err == ("warning: the gate step_time +1% is below what two runs of one commit can differ by on a shared host (1-3 %, " + tail
                   + "warning: the gate bubble +1pp is below what two runs of one commit can differ by on a shared host (up to about 1.5 pp, "
                   + tail)
    main(["compare", str(base), str(new), "--fail", "step_time:3%", "--fail", "bubble:2"])
    assert capsys.readouterr().err == ""
    sim = tmp_path / "sim.json"
    sim.write_text(json.dumps(results_document([case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=4), "sim"))])))
    assert main(["compare", str(sim), str(sim), "--fail", "step_time:0%"]) == 0
    assert capsys.readouterr().err == ""  # sim is exact: no drift to warn of
