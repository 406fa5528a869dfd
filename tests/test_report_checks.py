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
    ("warmup_steps", 1.5, "warmup_steps is 1.5 (float), expected a count (an integer, 0 or more)"),
    ("warmup_steps", -3, "warmup_steps is -3 (int), expected a count (an integer, 0 or more)"),
    ("window", "fixed", "window is 'fixed' (str), expected an object"),
    ("window", {"target": "1%"}, "window.target is '1%' (str), expected a number (a share, 0.01 = 1%) or null"),
    ("window", {"description": None}, "window.description is None (NoneType), expected a string"),
    ("window", {"ci_reach": "x"}, "window.ci_reach is 'x' (str), expected a number, 0 or more, or null"),
    ("comm_model", "bogus", "comm_model is 'bogus' (str), expected one of blocking, edge, free, stream"),
    ("usage", {"cores": -2}, "usage.cores is -2 (int), expected a count (an integer, 0 or more)"),
    ("device", {"clock_bound_ns": 1310.0}, "device.clock_bound_ns is 1310.0 (float), expected a whole number of ns, 0 or more "
                                           "(the merge's clock bound)"),
    ("device", {"clock_bound_ns": "1310"}, "device.clock_bound_ns is '1310' (str), expected a whole number of ns, 0 or more "
                                           "(the merge's clock bound)"),
    ("rank_labels", ["a", None], "rank_labels[1] is None (NoneType), expected a string"),
    ("rank_labels", ["a"], "rank_labels has 1 label(s), expected one per rank (schedule.p = 2)"),
])
def test_a_minor_field_of_the_wrong_type_is_named_with_file_and_case(tmp_path, capsys, case, field, value, said):
    bad = json.loads(json.dumps(case))
    bad[field] = value
    code, err, path = _report(tmp_path, bad, capsys)
    assert code == 2
    assert err.strip() == f"error: {path}: case 'c1' (cases[0]): {said}"
    assert not (tmp_path / "out").exists()


def test_the_minor_fields_as_written_pass(tmp_path, capsys, case):
    assert isinstance(case["usage"], dict) and isinstance(case["label"], str)  # the fixture has them: checked, not skipped
    code, err, _ = _report(tmp_path, case, capsys)
    assert code == 0, err


def _index(case, rank, label, step):
    """The index of ``rank``'s job ``label`` (``"1F0"``) of ``step`` in the case's job columns."""
    jobs = case["jobs"]
    return next(i for i in range(len(jobs["kind"])) if jobs["rank"][i] == rank and jobs["step"][i] == step
                and f"{jobs['stage'][i]}{jobs['kind'][i]}{'' if jobs['microbatch'][i] is None else jobs['microbatch'][i]}" == label)


def test_a_job_listed_twice_is_refused_naming_file_case_rank_and_job(tmp_path, capsys, case):
    bad = json.loads(json.dumps(case))
    jobs = bad["jobs"]
    k = _index(bad, 1, "1B1", 1)
    for col in jobs:  # the same job appended again, as a line pasted twice would add it
        jobs[col].append(jobs[col][k])
    n = len(jobs["kind"]) - 1
    code, err, path = _report(tmp_path, bad, capsys)
    assert code == 2
    assert err.strip() == (f"error: {path}: case 'c1' (cases[0]): rank 1's job 1B1 of step 1 (jobs[{n}]) is listed twice (jobs[{k}] and "
                           f"jobs[{n}]); a step runs each job once, so the file is damaged or was edited (two runs' jobs merged into one case?)")


def test_the_same_job_in_two_steps_is_no_duplicate(case):
    from harness.report.fields import case_field_problem

    assert case["steps"] == [0, 1] and len(case["jobs"]["kind"]) == 16  # 1F1B p=2 m=2, two steps: each job once per step
    assert case_field_problem(json.loads(json.dumps(case))) is None


@pytest.mark.parametrize(("column", "label", "shift", "said"), [
    ("start_ns", "0F0", -1, "starts at 8,999,999 ns, before its step starts (step_start_ns[1] = 9,000,000 ns)"),
    ("end_ns", "0B1", +1, "ends at 18,000,001 ns, after its step ends (step_end_ns[1] = 18,000,000 ns)"),
])
def test_a_job_outside_its_steps_span_is_refused(tmp_path, capsys, case, column, label, shift, said):
    bad = json.loads(json.dumps(case))
    # sim, F = 1 ms, B = 2 ms: a step lasts (m + p - 1)(F + B) = 9 ms; step 1 spans 9 to 18 ms, opened by 0F0 and closed by 0B1
    assert (bad["step_start_ns"], bad["step_end_ns"]) == ([0, 9_000_000], [9_000_000, 18_000_000])
    k = _index(bad, 0, label, 1)
    edge = bad["step_start_ns"][1] if column == "start_ns" else bad["step_end_ns"][1]
    assert bad["jobs"][column][k] == edge
    bad["jobs"][column][k] = edge + shift
    code, err, path = _report(tmp_path, bad, capsys)
    assert code == 2
    assert err.strip() == (f"error: {path}: case 'c1' (cases[0]): rank 0's job {label} of step 1 (jobs[{k}]) {said}; "
                           "a step's span holds all its jobs, so the file is damaged or was edited")


def test_a_merged_case_may_place_a_job_within_its_clock_bound_outside_its_step(case):
    from harness.report.fields import case_field_problem

    merged = json.loads(json.dumps(case))
    merged["backend"] = "mpi"
    merged["device"] = {"backend": "mpi", "clock_bound_ns": 500}
    k = _index(merged, 1, "1B1", 1)  # rank 1's last job, at 16 ms
    merged["jobs"]["end_ns"][k] = 18_000_500  # 500 ns past the step's end: within the merge's bound
    assert case_field_problem(merged) is None
    merged["jobs"]["end_ns"][k] = 18_000_501
    assert case_field_problem(merged) == (
        f"rank 1's job 1B1 of step 1 (jobs[{k}]) ends at 18,000,501 ns, after its step ends (step_end_ns[1] = 18,000,000 ns), "
        "by more than the merge's clock bound of 500 ns (device.clock_bound_ns); a step's span holds all its jobs, so the file "
        "is damaged or was edited")
    merged["backend"] = "sim"  # the bound is a merge's: no other case gets it
    assert case_field_problem(merged).startswith(f"rank 1's job 1B1 of step 1 (jobs[{k}]) ends at 18,000,501 ns, after its step ends (")


def test_a_paddle_import_keeps_a_repeated_micro_batch_id_as_logged(case):
    from harness.report.fields import case_field_problem

    imported = json.loads(json.dumps(case))
    imported["backend"] = "paddle-log"
    k, other = _index(imported, 1, "1F1", 1), _index(imported, 1, "1F0", 1)
    imported["jobs"]["microbatch"][k] = 0  # a wrong micro_batch_id, which the import warned about and kept
    assert case_field_problem(imported) is None
    imported["backend"] = "sim"
    assert case_field_problem(imported).startswith(f"rank 1's job 1F0 of step 1 (jobs[{max(k, other)}]) is listed twice (jobs[{min(k, other)}]")
