"""A stored figure that the case's own steps and per-step figures contradict is named (harness.report.consistency).

The case: 1F1B p=2 m=4 on sim (F 1 ms, B 2 ms), steps 0..2 of 15 ms each; per step each rank is busy 12 ms
and idle 3 ms, so the bubble is 6 / 30 = 0.2. A fidelity entry is added as a timed backend would store it:
predicted 12 ms, so the change is 15 / 12 - 1 = 0.25.
"""

from __future__ import annotations

import json

import pytest

from harness.case import PipelineCase
from harness.cli import main
from harness.report.consistency import derived_figure_problem
from harness.report.results import case_to_dict, results_document
from harness.runner import run_case

EDITED = "; was the file edited?"


@pytest.fixture(scope="module")
def base() -> dict:
    case = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=4), "sim", range(0, 3)))
    case["fidelity"] = {"predicted_step_ns": 12_000_000, "change": 0.25, "ci_low": 0.2, "ci_high": 0.3, "ci_level": 0.75}
    return case


def _edit(case: dict, path: tuple, value) -> dict:
    case = json.loads(json.dumps(case))
    target = case
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return case


def test_the_case_as_stored_agrees(base):
    assert derived_figure_problem(base) is None


@pytest.mark.parametrize(("path", "value", "message"), [
    # the edits a tester made, each shown on the page as if measured
    (("metrics", "bubble_ratio"), 0.01, "metrics.bubble_ratio is 0.01, but the median of metrics.per_step's bubble ratios is 0.2"),
    (("critical_path", "length_ns"), 1, "critical_path.length_ns is 1, but step 0 lasts 15000000 ns (step_end_ns - step_start_ns)"),
    (("fidelity", "change"), -0.5, "fidelity.change is -0.5, but the median step (15000000 ns) against fidelity.predicted_step_ns "
                                   "(12000000 ns) gives 0.25"),
    (("fidelity", "ci_high"), 0.24, "fidelity.change (0.25) lies outside its own interval (fidelity.ci_low 0.2 to ci_high 0.24)"),
    (("decomposition", "ideal_ns"), 1, "decomposition: its parts (ideal_ns, imbalance_ns, recompute_ns, comm_ns, schedule_ns) add up "
                                       "to 3000001 ns, not its step_ns (15000000)"),
    (("metrics", "per_step", 1, "busy_ns", 0), 11_000_000, "metrics.per_step[1]: rank 0's busy_ns (11000000) and idle_ns (3000000) "
                                                           "add up to 14000000, not the step time (15000000 ns)"),
    (("metrics", "per_step", 2, "bubble_ratio"), 0.5, "metrics.per_step[2].bubble_ratio is 0.5, but its idle times give 0.2 "
                                                      "(sum(idle_ns) / (p x step_time_ns))"),
    (("metrics", "stats", "step_time_ns", "median"), 14_000_000.0,
     "metrics.stats.step_time_ns.median is 14000000.0, not metrics.step_time_median_ns (15000000.0)"),
    (("critical_path", "step"), 7, "critical_path.step is 7, which is not among the case's steps"),
    (("metrics", "step_time_median_ns"), 14_000_000.0, "metrics.step_time_median_ns is 14000000.0, but the median of the case's "
                                                       "3 step(s) (step_end_ns - step_start_ns) is 15000000 ns"),
])
def test_an_edited_figure_is_named_with_what_the_steps_give(base, path, value, message):
    assert derived_figure_problem(_edit(base, path, value)) == message + EDITED


def test_the_median_step_time_is_the_median_of_the_steps(base):
    case = _edit(base, ("step_end_ns", 2), 46_000_000)  # the last step 16 ms: the median stays 15 ms
    for entry in case["metrics"]["per_step"][2:]:
        entry.update(step_time_ns=16_000_000, idle_ns=[4_000_000, 4_000_000], bubble_ratio=0.25)
    assert derived_figure_problem(case) is None  # median of (0.2, 0.2, 0.25) is 0.2, of (15, 15, 16) ms 15 ms
    case["metrics"]["step_time_median_ns"] = 15_500_000.0
    assert derived_figure_problem(case) == (
        "metrics.step_time_median_ns is 15500000.0, but the median of the case's 3 step(s) (step_end_ns - step_start_ns) is "
        "15000000 ns" + EDITED)


def test_report_leaves_the_edited_case_out_and_reports_the_other(base, tmp_path, capsys):
    other = json.loads(json.dumps(base))
    other["id"] = other["label"] = "intact"
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results_document([_edit(base, ("metrics", "bubble_ratio"), 0.01), other])))
    assert main(["report", str(path), "--out", str(tmp_path / "out"), "-q"]) == 1
    err = capsys.readouterr().err
    assert "(cases[0]): metrics.bubble_ratio is 0.01, but the median of metrics.per_step's bubble ratios is 0.2; was the file " \
           "edited?; left out of the report" in err
    kept = json.loads((tmp_path / "out" / "results.json").read_text())["cases"]
    assert [c["id"] for c in kept] == ["intact"]


@pytest.mark.parametrize(("path", "value", "message"), [
    (("decomposition", "ideal_ns"), 10**400, "decomposition.ideal_ns is an integer of 401 digits, expected a number of ns or a ratio "
                                             "that fits 64 bits"),
    (("fidelity", "change"), -(10**30), "fidelity.change is an integer of 31 digits, expected a number of ns or a ratio that fits 64 bits"),
])
def test_a_figure_too_large_for_a_float_is_named_not_a_traceback(base, path, value, message):
    assert derived_figure_problem(_edit(base, path, value)) == message


def test_what_earlier_versions_wrote_is_not_held_against_a_file(base):
    # an even number of steps: the decomposition's step was the two middle steps' mean; a busy time past the length;
    # a noisy timed case without an 'unstable' flag
    case = _edit(base, ("decomposition", "step_ns"), 15_000_000.5)
    case["decomposition"]["schedule_ns"] += 0.5
    case["critical_path"]["busy_ns"] = 16_000_000
    case["backend"], case["flags"] = "cpu", []
    case["metrics"]["stats"]["step_time_ns"]["iqr"] = 3_000_000.0
    assert derived_figure_problem(case) is None


def test_per_step_figures_must_cover_each_recorded_step_once(base):
    # deleting an entry (or all of them) hid an edited bubble ratio from the median check
    case = json.loads(json.dumps(base))
    del case["metrics"]["per_step"][1]
    case["metrics"]["bubble_ratio"] = 0.01
    assert derived_figure_problem(case) == ("metrics.per_step lists steps [0, 2], but the case recorded [0, 1, 2]: expected "
                                            "one entry per recorded step" + EDITED)
    case["metrics"]["per_step"] = [base["metrics"]["per_step"][k] for k in (0, 1, 1, 2)]
    assert derived_figure_problem(case).startswith("metrics.per_step lists steps [0, 1, 1, 2], but")
