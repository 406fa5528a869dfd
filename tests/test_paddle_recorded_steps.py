"""import-paddle on logs with a repeated line, and on logs that end before the others (a device that did not
record a step): the step split and the figures stay those of the intact logs, with one warning naming file and line.

The logs are a sim run of 1F1B p=2 m=4 (forward 1 ms, backward 2 ms), steps 1-3, exported without the export's
mark line, so they read as Paddle's own. Each log has the 'Schedule Profiler' line 1, then 8 job lines per step
(lines 2-9 step 1, 10-17 step 2, 18-25 step 3); GPU 1 (the last stage) runs F0 B0 F1 B1 F2 B2 F3 B3 in every step.
By hand (Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters", SC'21, section 2.2):
a step takes (m + p - 1)(F + B) = 5 x 3 ms = 15 ms, each device is busy m(F + B) = 12 ms of it, and the bubble
is (p - 1) / (m + p - 1) = 0.2.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from harness.case import PipelineCase
from harness.imports.paddle import PaddleLogWarning, import_paddle_logs, write_paddle_logs
from harness.report.results import case_to_dict
from harness.runner import run_case

STEP_NS = 15_000_000
BUSY_NS = 12_000_000


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    case = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=4), "sim", range(1, 4)))
    write_paddle_logs(tmp_path, case)
    for path in tmp_path.glob("workerlog.*"):  # the export's mark line off: a log as Paddle writes it
        path.write_text("".join(line for line in path.read_text().splitlines(True) if not line.startswith("#")))
    return tmp_path


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def _write(path: Path, lines: list[str]) -> None:
    path.write_text("\n".join(lines) + "\n")


def _quiet_import(folder: Path) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("error", PaddleLogWarning)  # the intact logs warn of nothing
        return import_paddle_logs(folder)


def _jobs(case: dict) -> list[tuple]:
    cols = case["jobs"]
    return sorted(zip(cols["rank"], cols["step"], cols["kind"], cols["microbatch"], cols["start_ns"], cols["end_ns"]))


def _steps_of(case: dict, rank: int) -> dict[int, list[str]]:
    cols = case["jobs"]
    out: dict[int, list[str]] = {}
    for i in sorted((i for i in range(len(cols["kind"])) if cols["rank"][i] == rank), key=lambda i: cols["start_ns"][i]):
        out.setdefault(cols["step"][i], []).append(f"{cols['kind'][i]}{cols['microbatch'][i]}")
    return out


def test_the_intact_logs_give_the_hand_computed_figures(logs: Path) -> None:
    case = _quiet_import(logs)
    assert case["steps"] == [1, 2, 3]
    assert [s["step_time_ns"] for s in case["metrics"]["per_step"]] == [STEP_NS] * 3
    assert [s["busy_ns"] for s in case["metrics"]["per_step"]] == [[BUSY_NS, BUSY_NS]] * 3
    assert case["metrics"]["step_time_median_ns"] == STEP_NS and case["metrics"]["bubble_ratio"] == pytest.approx(0.2)


# --- defect 1: a repeated line ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("after", "copy_line"), [
    (3, 4),  # in place: `sed -i '3p'` (GPU 1's step 1 B0 printed twice)
    (14, 15),  # inside step 2
    (25, 26),  # appended at the end of the log
])
def test_a_repeated_line_is_dropped_and_the_figures_are_the_intact_ones(logs: Path, tmp_path: Path, after: int,
                                                                         copy_line: int) -> None:
    intact = _quiet_import(logs)
    path = logs / "workerlog.1"
    lines = _lines(path)
    _write(path, [*lines[:after], lines[2], *lines[after:]])
    with pytest.warns(PaddleLogWarning) as record:
        case = import_paddle_logs(logs)
    assert [str(w.message) for w in record] == [
        f"{path}:{copy_line}: repeats line 3 (job backward, micro_batch_id 0, the same start and end): Paddle prints each "
        "job once per step, so this is a copy of that line; dropped"
    ]
    assert case["steps"] == [1, 2, 3] and case["overlaps"] == []
    assert _jobs(case) == _jobs(intact)  # 48 jobs, each in its own step: no extra step, no boundary shifted
    assert case["metrics"] == intact["metrics"]
    assert case["step_start_ns"] == [0, STEP_NS, 2 * STEP_NS] and case["step_end_ns"] == [STEP_NS, 2 * STEP_NS, 3 * STEP_NS]


def test_a_line_of_the_same_job_with_other_times_is_kept_as_a_job(logs: Path) -> None:
    """Not a copy: the same type and micro-batch at other times is a job that ran (a wrong id), kept as logged."""
    path = logs / "workerlog.1"
    lines = _lines(path)
    lines[3] = lines[3].replace("type = forward, micro_batch_id = 1", "type = forward, micro_batch_id = 0")  # F1 -> F0
    _write(path, lines)
    with pytest.warns(PaddleLogWarning) as record:
        case = import_paddle_logs(logs)
    assert not any("repeats line" in str(w.message) for w in record)
    assert case["steps"] == [1, 2, 3]
    assert _steps_of(case, 1)[1] == ["F0", "B0", "F0", "B1", "F2", "B2", "F3", "B3"]
    assert case["metrics"]["step_time_median_ns"] == STEP_NS


# --- defect 2: a device that did not record a step -------------------------------------------------------------------


def test_a_log_that_ends_at_a_step_boundary_leaves_the_step_out(logs: Path) -> None:
    path = logs / "workerlog.1"
    _write(path, _lines(path)[:17])  # GPU 1's log ends after step 2
    with pytest.warns(PaddleLogWarning) as record:
        case = import_paddle_logs(logs)
    assert [str(w.message) for w in record] == [
        f"{path}: GPU 1's log ends after step 2; step 3 is left out of the figures (the other devices ran it)"
    ]
    assert case["steps"] == [1, 2] and set(case["jobs"]["step"]) == {1, 2} and len(case["jobs"]["kind"]) == 32
    assert [s["busy_ns"] for s in case["metrics"]["per_step"]] == [[BUSY_NS, BUSY_NS]] * 2  # before: [12 ms, 0] in step 3
    assert case["metrics"]["bubble_ratio"] == pytest.approx(0.2) and case["metrics"]["step_time_median_ns"] == STEP_NS


def test_a_log_cut_mid_line_leaves_the_cut_step_and_the_later_ones_out(logs: Path) -> None:
    path = logs / "workerlog.1"
    lines = _lines(path)
    cut = lines[11][: lines[11].index("job_end_time") + 6]  # the log stops inside line 12 (step 2's F1)
    _write(path, [*lines[:11], cut])
    with pytest.warns(PaddleLogWarning) as record:
        case = import_paddle_logs(logs)
    assert [str(w.message) for w in record] == [
        f"{path}:12: a 'Profiler Info' line that does not parse, skipped: {cut!r}",
        f"{path}:12: GPU 1's log ends inside step 2 (3 of the 8 job lines its step 1 has); steps 2-3 are left out of the "
        "figures (the other devices ran them)",
    ]  # and no warning of step 2's missing micro-batches: the step is not imported
    assert case["steps"] == [1] and len(case["jobs"]["kind"]) == 16
    assert case["metrics"]["per_step"][0]["busy_ns"] == [BUSY_NS, BUSY_NS]
    assert case["metrics"]["bubble_ratio"] == pytest.approx(0.2)


def test_two_devices_ending_early_name_each_its_own_steps(logs: Path) -> None:
    one, two = logs / "workerlog.0", logs / "workerlog.1"
    _write(one, _lines(one)[:21])  # GPU 0: steps 1-2, and 4 lines of step 3
    _write(two, _lines(two)[:9])  # GPU 1: step 1
    with pytest.warns(PaddleLogWarning) as record:
        case = import_paddle_logs(logs)
    assert [str(w.message) for w in record] == [
        f"{one}:21: GPU 0's log ends inside step 3 (4 of the 8 job lines its step 2 has); step 3 is left out of the figures",
        f"{two}: GPU 1's log ends after step 1; steps 2-3 are left out of the figures",
    ]
    assert case["steps"] == [1] and case["metrics"]["per_step"][0]["busy_ns"] == [BUSY_NS, BUSY_NS]


def test_a_line_missing_inside_the_last_step_keeps_the_step(logs: Path) -> None:
    """A deleted line is no log cut short: the step keeps its place and gets the micro-batch warning, as before."""
    path = logs / "workerlog.1"
    lines = _lines(path)
    _write(path, lines[:19] + lines[20:])  # step 3's F1 (line 20) deleted
    with pytest.warns(PaddleLogWarning) as record:
        case = import_paddle_logs(logs)
    assert [str(w.message) for w in record] == [
        f"{path}:18: GPU 1, step 3: forward has no micro-batch 1: lines are missing (a log cut short?) or an id is wrong"
    ]
    assert case["steps"] == [1, 2, 3]
    assert [s["busy_ns"] for s in case["metrics"]["per_step"]] == [[BUSY_NS, BUSY_NS]] * 2 + [[BUSY_NS, BUSY_NS - 1_000_000]]


def test_when_no_step_is_whole_on_every_device_all_are_kept_with_a_warning(logs: Path) -> None:
    path = logs / "workerlog.1"
    _write(path, _lines(path)[:4])  # GPU 1: step 1's F0, B0, F1 only
    with pytest.warns(PaddleLogWarning) as record:
        case = import_paddle_logs(logs)
    said = [str(w.message) for w in record]
    assert said[0] == (
        f"{path}:4: GPU 1's log ends inside step 1 (3 job lines; a whole step of another device has 8 forward and "
        "backward jobs): no step was recorded whole by every device, so every step is kept, and GPU 1 counts as idle "
        "where its log has no jobs (steps 1-3): their step times and bubble are not the run's"
    )
    assert said[1:] == [  # the micro-batch warnings of step 1, as before
        f"{path}:2: GPU 1, step 1: forward has no micro-batch 2-3: lines are missing (a log cut short?) or an id is wrong",
        f"{path}:3: GPU 1, step 1: backward has no micro-batch 1-3: lines are missing (a log cut short?) or an id is wrong",
    ]
    assert case["steps"] == [1, 2, 3]
    # GPU 1 busy 1 + 2 + 1 ms in step 1, idle in steps 2 and 3: the figures say what the logs hold.
    assert [s["busy_ns"] for s in case["metrics"]["per_step"]] == [[BUSY_NS, 4_000_000], [BUSY_NS, 0], [BUSY_NS, 0]]
    assert case["flags"] == [{"kind": "steps", "reason": said[0]}]  # so compare does not gate figures that are not the run's


def test_a_device_without_jobs_does_not_leave_every_step_out(logs: Path) -> None:
    path = logs / "workerlog.1"
    _write(path, _lines(path)[:1])  # the 'Schedule Profiler' line only
    with pytest.warns(PaddleLogWarning) as record:
        case = import_paddle_logs(logs)
    assert [str(w.message) for w in record] == [f"{path}: no 'Profiler Info: Job' lines; this device shows no jobs"]
    assert case["steps"] == [1, 2, 3]
    # GPU 1 counts as idle in every step: flagged, so compare does not gate a bubble that is not the run's
    assert case["flags"] == [{"kind": "steps", "reason": f"{path}: GPU 1's log holds no job, so GPU 1 counts as idle in every "
                                                          "step: the step times and the bubble are not the run's"}]


def test_a_last_step_shorter_than_an_odd_step_before_it_is_whole(logs: Path) -> None:
    """The reference is the commonest step length: one step with an extra line does not make the last look cut."""
    path = logs / "workerlog.1"
    lines = _lines(path)
    lr = ("Profiler Info: Job (8), type = lr, micro_batch_id = 0, job_start_time = 1700000000028.500000, "
          "job_end_time = 1700000000029.000000")  # after step 2's B3 (26-28 ms), before step 3
    _write(path, [*lines[:17], lr, *lines[17:]])
    case = _quiet_import(logs)
    assert case["steps"] == [1, 2, 3]
    assert _steps_of(case, 1) == {1: ["F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3"],
                                  2: ["F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3", "lr0"],
                                  3: ["F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3"]}
