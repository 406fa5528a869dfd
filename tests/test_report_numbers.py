"""Results files with non-finite or oversized numbers, broken per-step entries or
non-UTF-8 bytes are refused by ``report`` and ``compare`` with one error line (exit 2)."""

from __future__ import annotations

import json

import pytest

from harness.case import PipelineCase
from harness.cli import main
from harness.model.cost import FixedCost
from harness.report.results import case_to_dict, results_document
from harness.runner import run_case

CASE = "cases/x.py::test[1F1B]"


def _doc():
    case = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=4, cost=FixedCost.ms(F=1.0, B=2)), "sim",
                                 range(0, 2), case_id=CASE))
    return results_document([case])


def _write(path, doc):
    path.write_text(json.dumps(doc))  # writes NaN / Infinity as the non-standard tokens Python reads back
    return path


@pytest.mark.parametrize("field", ["bubble_ratio", "step_time_median_ns"])
@pytest.mark.parametrize("value, shown", [(float("nan"), "nan"), (float("inf"), "inf"), (float("-inf"), "-inf")])
@pytest.mark.parametrize("side", ["base", "new"])
def test_compare_refuses_non_finite_metric(tmp_path, capsys, field, value, shown, side):
    good = _write(tmp_path / "good.json", _doc())
    doc = _doc()
    doc["cases"][0]["metrics"][field] = value
    bad = _write(tmp_path / "bad.json", doc)
    argv = [str(bad), str(good)] if side == "base" else [str(good), str(bad)]
    assert main(["compare", *argv, "--fail", "bubble:2"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {bad}: case {CASE!r} (cases[0]): metrics.{field} must be a finite number, not {shown}\n"


def test_report_refuses_non_finite_and_huge_numbers(tmp_path, capsys):
    doc = _doc()
    doc["cases"][0]["metrics"]["bubble_ratio"] = float("nan")
    bad = _write(tmp_path / "nan.json", doc)
    assert main(["report", str(bad), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"error: {bad}: case {CASE!r} (cases[0]): metrics.bubble_ratio must be a finite number, not nan\n"
    assert not (tmp_path / "out").exists()

    doc = _doc()
    doc["cases"][0]["metrics"]["step_time_median_ns"] = 10**400  # an integer no float can hold
    huge = _write(tmp_path / "huge.json", doc)
    assert main(["report", str(huge), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (f"error: {huge}: case {CASE!r} (cases[0]): metrics.step_time_median_ns must be a finite number, "
                                       "not an integer of 401 digits (too large)\n")

    doc = _doc()
    doc["cases"][0]["metrics"]["per_step"][1]["idle_ns"][0] = float("inf")
    inf = _write(tmp_path / "inf.json", doc)
    assert main(["compare", str(inf), str(inf)]) == 2
    assert capsys.readouterr().err == (f"error: {inf}: case {CASE!r} (cases[0]): metrics.per_step[1].idle_ns[0] must be a finite number, "
                                       "not inf\n")


def test_json_integer_past_the_digit_limit_is_one_error(tmp_path, capsys):
    text = json.dumps(_doc()).replace('"bubble_ratio": ', '"bubble_ratio": ' + "9" * 5000 + ", \"x\": ", 1)
    path = tmp_path / "r.json"
    path.write_text(text)
    assert main(["compare", str(path), str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: invalid JSON (") and err.count("\n") == 1


@pytest.mark.parametrize("command", ["report", "compare"])
def test_non_utf8_results_file_is_one_error(tmp_path, capsys, command):
    path = tmp_path / "r.json"
    path.write_bytes(b"\xff\xfe{\x00}\x00")
    argv = ["report", str(path), "--out", str(tmp_path / "out")] if command == "report" else ["compare", str(path), str(path)]
    assert main(argv) == 2
    assert capsys.readouterr().err == (f"error: {path}: cannot read results file: not UTF-8 (byte 0xff at offset 0); "
                                       "results files are UTF-8 JSON\n")


@pytest.mark.parametrize("entry, problem", [
    ({"step": 1}, "metrics.per_step[0] is missing field(s) step_time_ns, busy_ns, idle_ns, bubble_ratio"),
    ("x", "metrics.per_step[0] is str, expected an object"),
    ({"step": 1, "step_time_ns": 5, "busy_ns": [1], "idle_ns": ["1"], "bubble_ratio": 0.1},
     "metrics.per_step[0].idle_ns is ['1'], expected a list of numbers"),
    ({"step": 1, "step_time_ns": None, "busy_ns": [1], "idle_ns": [1], "bubble_ratio": 0.1},
     "metrics.per_step[0].step_time_ns is None, expected a number"),
])
def test_report_refuses_broken_per_step_entries(tmp_path, capsys, entry, problem):
    doc = _doc()
    doc["cases"][0]["metrics"]["per_step"] = [entry]
    path = _write(tmp_path / "r.json", doc)
    assert main(["report", str(path), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"error: {path}: case {CASE!r} (cases[0]): {problem}\n"
