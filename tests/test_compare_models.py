"""``python -m harness compare``: a case id run on two different models in the two files is warned about, per case,
naming the fields that differ (harness.report.identity.model_differences); the comparison is still printed."""

from __future__ import annotations

import json
from pathlib import Path

from harness.case import PipelineCase
from harness.cli import main
from harness.model.cost import FixedCost
from harness.report.identity import model_differences
from harness.report.results import case_to_dict, results_document
from harness.runner import run_case


def _file(path: Path, cases: list[tuple[str, PipelineCase]]) -> Path:
    docs = [case_to_dict(run_case(case, "sim", range(0, 1), case_id=cid)) for cid, case in cases]
    path.write_text(json.dumps(results_document(docs)))
    return path


def test_a_case_run_on_another_cost_model_is_warned_and_still_compared(tmp_path, capsys):
    # sim, exact: 1F1B p=2 m=4 takes (m+p-1)(F+B) = 5 x 3 = 15 ms at F=1 ms, 5 x 3.2 = 16 ms at F=1.2 ms
    base = _file(tmp_path / "base.json", [
        ("t.py::test_a", PipelineCase("1F1B", stages=2, microbatches=4, cost=FixedCost.ms(F=1, B=2))),
        ("t.py::test_b", PipelineCase("FThenB", stages=2, microbatches=4, cost=FixedCost.ms(F=1, B=2))),
    ])
    new = _file(tmp_path / "new.json", [
        ("t.py::test_a", PipelineCase("1F1B", stages=2, microbatches=4, cost=FixedCost.ms(F=1.2, B=2))),
        ("t.py::test_b", PipelineCase("FThenB", stages=2, microbatches=4, cost=FixedCost.ms(F=1, B=2))),
    ])
    assert main(["compare", str(base), str(new), "--fail", "step_time:5%"]) == 1  # the gate still reads the change
    captured = capsys.readouterr()
    warnings = [line for line in captured.err.splitlines() if "a different model" in line]
    assert warnings == ["warning: t.py::test_a: a different model in the two files (forward_ns 1000000 vs 1200000); its deltas "
                        "compare the two models, not two runs of one"]  # test_b ran one model: not warned
    rows = {line.split()[0]: line for line in captured.out.splitlines() if line.startswith("t.py::")}
    assert "15.000 ms" in rows["t.py::test_a"] and "16.000 ms" in rows["t.py::test_a"] and " +6.67% " in rows["t.py::test_a"]
    assert "FAIL step_time" in rows["t.py::test_a"] and "FAIL" not in rows["t.py::test_b"]
    assert captured.out.splitlines()[-1].startswith("2 case(s) compared, 1 past a threshold")


def test_the_same_model_in_both_files_is_not_warned(tmp_path, capsys):
    case = ("t.py::test_a", PipelineCase("1F1B", stages=2, microbatches=4, cost=FixedCost.ms(F=1, B=2)))
    base, new = _file(tmp_path / "base.json", [case]), _file(tmp_path / "new.json", [case])
    assert main(["compare", str(base), str(new)]) == 0
    assert "a different model" not in capsys.readouterr().err


def test_model_differences_names_each_field_as_the_page_reads_it():
    a = {"schedule": {"name": "Interleaved1F1B", "params": {"v": 2}}, "cost": {"model": "fixed", "forward_ns": 1000, "backward_ns": 2000},
         "options": {"microbatch_group_size_per_vp_stage": 4}, "memory": {"limit_bytes": 9 * 2**30}, "comm_model": "stream",
         "backend": "sim", "device": {"workload": "timed"}}
    b = {**a, "cost": {"model": "fixed", "forward_ns": 1000, "backward_ns": 2500, "recompute_ns": 10}, "options": {},
         "memory": {}, "comm_model": "edge", "backend": "cpu"}
    assert model_differences(a, b) == ["backward_ns 2000 vs 2500", "microbatch_group_size_per_vp_stage 4 vs default",
                                       "memory limit 9 GiB vs no limit", "comm model stream vs edge", "recompute_ns (not set) vs 10"]
    assert model_differences(a, a) == []
    other = {**b, "schedule": {"name": "1F1B", "params": {}}}  # another schedule: its options are its own, not a model change
    assert model_differences(a, other) == ["backward_ns 2000 vs 2500", "memory limit 9 GiB vs no limit", "comm model stream vs edge",
                                           "recompute_ns (not set) vs 10"]


def test_two_cases_of_one_file_on_different_models_are_said_to_be_two_cases(tmp_path, capsys):
    both = _file(tmp_path / "both.json", [
        ("t.py::test_a", PipelineCase("1F1B", stages=2, microbatches=4, cost=FixedCost.ms(F=1, B=2))),
        ("t.py::test_b", PipelineCase("1F1B", stages=2, microbatches=4, cost=FixedCost.ms(F=1.2, B=2))),
    ])
    assert main(["compare", str(both), "--case", "t.py::test_a", "--case", "t.py::test_b"]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "different model" in line]
    assert len(warnings) == 1 and "the two cases named ran different models (forward_ns 1000000 vs 1200000)" in warnings[0]
    assert "in the two files" not in warnings[0]
