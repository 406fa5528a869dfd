"""`report` refuses a results file whose minor fields have the wrong type, whose jobs are listed twice,
or whose jobs lie outside their step's span, naming the file, the case, the rank and the job or field."""

from __future__ import annotations

import json

import pytest

from harness.case import PipelineCase
from harness.cli import main
from harness.report.results import case_to_dict, results_document
from harness.runner import run_case


@pytest.fixture(scope="module")
def case():
    return case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=2), "sim", range(0, 2), case_id="c1"))


def _report(tmp_path, case, capsys):
    """Run ``report`` on a file holding ``case``; its exit status and stderr."""
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results_document([case])))
    capsys.readouterr()
    code = main(["report", str(path), "--out", str(tmp_path / "out"), "-q", "--no-hta"])
    return code, capsys.readouterr().err, path


@pytest.mark.parametrize(("field", "value", "said"), [
    ("label", None, "label is None (NoneType), expected a string"),
    ("usage", [None], "usage is [None] (list), expected an object"),
    ("usage", {"wall_ns": "12", "cores": 2}, "usage.wall_ns is '12' (str), expected an integer (ns)"),
    ("usage", {"other_cores": [1]}, "usage.other_cores is [1] (list), expected a number (cores) or null"),
    ("backend_reason", 3, "backend_reason is 3 (int), expected a string"),
    ("warmup_steps", 1.5, "warmup_steps is 1.5 (float), expected an integer"),
    ("window", "fixed", "window is 'fixed' (str), expected an object"),
    ("rank_labels", ["a", None], "rank_labels[1] is None (NoneType), expected a string"),
])
def test_a_minor_field_of_the_wrong_type_is_named_with_file_and_case(tmp_path, capsys, case, field, value, said):
    bad = json.loads(json.dumps(case))
    bad[field] = value
    code, err, path = _report(tmp_path, bad, capsys)
    assert code == 2
    assert err.strip() == f"error: {path}: case 'c1' (#0): {said}"
    assert not (tmp_path / "out").exists()


def test_the_minor_fields_as_written_pass(tmp_path, capsys, case):
    assert isinstance(case["usage"], dict) and isinstance(case["label"], str)  # the fixture has them: checked, not skipped
    code, err, _ = _report(tmp_path, case, capsys)
    assert code == 0, err
