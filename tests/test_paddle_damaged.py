"""import-paddle after a damaged 'Profiler Info: Job' line: the later steps keep their numbers and jobs, and the
warning about the missing job names the damaged line."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from harness.case import PipelineCase
from harness.imports.paddle import PaddleLogWarning, import_paddle_logs, write_paddle_logs
from harness.report.results import case_to_dict
from harness.runner import run_case

# A 1F1B p=2 m=4 run, steps 1-3, exported: each log has the 'Schedule Profiler' line 1, then 8 job lines per step
# (lines 2-9 step 1, 10-17 step 2, 18-25 step 3). The last rank runs F0 B0 F1 B1 F2 B2 F3 B3 in every step.
LAST_RANK = ["F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3"]


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    case = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=4), "sim", range(1, 4)))
    write_paddle_logs(tmp_path, case)
    return tmp_path


def _damage(path: Path, lineno: int, how: str = "cut") -> str:
    lines = path.read_text().splitlines()
    if how == "cut":  # a line cut off mid-way (a crash, a full disk)
        lines[lineno - 1] = lines[lineno - 1][: lines[lineno - 1].index("job_end_time") + 6]
    else:  # a corrupt id
        lines[lineno - 1] = re.sub(r"micro_batch_id = \d+", "micro_batch_id = -3", lines[lineno - 1])
    path.write_text("\n".join(lines) + "\n")
    return lines[lineno - 1]


def _rank1_steps(case: dict) -> dict[int, list[str]]:
    jobs = case["jobs"]
    out: dict[int, list[str]] = {}
    for i in sorted((i for i in range(len(jobs["kind"])) if jobs["rank"][i] == 1), key=lambda i: jobs["start_ns"][i]):
        out.setdefault(jobs["step"][i], []).append(f"{jobs['kind'][i]}{jobs['microbatch'][i]}")
    return out


@pytest.mark.parametrize(("lineno", "step", "job"), [
    (2, 1, "F0"),  # the first job of the log
    (9, 1, "B3"),  # the last job of a step
    (10, 2, "F0"),  # the first job of a middle step
    (12, 2, "F1"),
    (18, 3, "F0"),  # the first job of the last step
])
def test_a_damaged_line_leaves_the_other_steps_as_logged_and_is_named(logs: Path, lineno: int, step: int, job: str) -> None:
    path = logs / "workerlog.1"
    text = _damage(path, lineno)
    with pytest.warns(PaddleLogWarning) as record:
        case = import_paddle_logs(logs)
    family = "forward" if job[0] == "F" else "backward"
    assert [str(w.message) for w in record] == [
        f"{path}:{lineno}: a 'Profiler Info' line that does not parse, skipped: {text.strip()[:160]!r}",
        f"{path}:{lineno}: GPU 1, step {step}: {family} has no micro-batch {job[1:]}: line {lineno} of this step was skipped "
        "as damaged: the missing job was there",
    ]
    assert case["steps"] == [1, 2, 3] and case["schedule"]["m"] == 4
    expected = {s: [j for j in LAST_RANK if not (s == step and j == job)] for s in (1, 2, 3)}
    assert _rank1_steps(case) == expected  # every other job in its own step (before: shifted into the step before)


def test_a_skipped_negative_id_and_two_damaged_lines_in_one_log(logs: Path) -> None:
    path = logs / "workerlog.1"
    _damage(path, 4, "negative")  # step 1's F1
    _damage(path, 11)  # step 2's B0
    _damage(path, 19)  # step 3's B0
    with pytest.warns(PaddleLogWarning) as record:
        case = import_paddle_logs(logs)
    said = [str(w.message) for w in record]
    assert said[3:] == [
        f"{path}:4: GPU 1, step 1: forward has no micro-batch 1: line 4 of this step was skipped as damaged: the missing job was there",
        f"{path}:11: GPU 1, step 2: backward has no micro-batch 0: line 11 of this step was skipped as damaged: the missing job was there",
        f"{path}:19: GPU 1, step 3: backward has no micro-batch 0: line 19 of this step was skipped as damaged: the missing job was there",
    ]
    assert said[0].startswith(f"{path}:4: job forward has micro_batch_id -3 (negative")
    assert _rank1_steps(case) == {1: [j for j in LAST_RANK if j != "F1"], 2: [j for j in LAST_RANK if j != "B0"],
                                  3: [j for j in LAST_RANK if j != "B0"]}


def test_a_log_without_damaged_lines_imports_without_warnings(logs: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", PaddleLogWarning)
        case = import_paddle_logs(logs)
    assert _rank1_steps(case) == {1: LAST_RANK, 2: LAST_RANK, 3: LAST_RANK}


@pytest.mark.parametrize(("given", "said"), [
    ("ZB-V2", "--schedule 'ZB-V2' is not a built-in schedule (did you mean 'ZB-V'?)"),
    ("VPP2", "--schedule 'VPP2' is not a built-in schedule (did you mean 'Interleaved1F1B'?)"),
    ("my ZB run", "--schedule 'my ZB run' is not a built-in schedule"),
])
def test_import_paddle_refuses_a_schedule_that_is_not_built_in_naming_the_closest(logs: Path, tmp_path: Path, capsys, given, said):
    from harness.cli import main

    out = tmp_path / "out"
    assert main(["import-paddle", str(logs), "--schedule", given, "--out", str(out), "-q", "--no-hta"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {said}; python -m harness schedules lists them. Leave it out to place the stages looped, as Paddle does "
        "(stage = chunk * p + rank), and name the case with --name")
    assert not out.exists()


def test_import_paddle_takes_a_built_in_schedules_alias_under_its_own_name(logs: Path, tmp_path: Path, capsys) -> None:
    import json

    from harness.cli import main

    assert main(["import-paddle", str(logs), "--schedule", "1f1b", "--out", str(tmp_path / "out"), "-q", "--no-hta"]) == 0
    assert json.loads((tmp_path / "out" / "results.json").read_text())["cases"][0]["schedule"]["name"] == "1F1B"
    assert main(["import-paddle", str(logs), "--out", str(tmp_path / "plain"), "-q", "--no-hta"]) == 0  # none given: the label
    assert json.loads((tmp_path / "plain" / "results.json").read_text())["cases"][0]["schedule"]["name"] == "PaddlePaddle log"
