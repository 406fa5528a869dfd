"""PaddlePaddle job-profiler logs: import, overlap flagging, odd lines, export round trip."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from harness.case import PipelineCase
from harness.errors import ConfigError, InputFormatError
from harness.imports.paddle import PaddleLogWarning, import_paddle_logs, paddle_log_lines, parse_job_type, write_paddle_logs
from harness.report.results import case_to_dict, results_document, validate_document
from harness.report.trace import case_trace
from harness.report.tracecheck import check_trace
from harness.runner import run_case

# The two lines of issue 5, from a real PaddlePaddle run.
LINE_3 = ("I1020 09:15:07.265326 22317 standalone_executor.cc:217] Profiler Info: Job (3), type = forward, micro_batch_id = 2, "
          "job_start_time = 1697793307213.760986, job_end_time = 1697793307254.006104")
LINE_4 = ("I1020 09:15:07.265338 22317 standalone_executor.cc:217] Profiler Info: Job (4), type = forward, micro_batch_id = 3, "
          "job_start_time = 1697793307214.742920, job_end_time = 1697793307219.168945")


def _write(folder: Path, name: str, lines: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_issue_lines_import_as_two_overlapping_jobs_on_gpu0(tmp_path):
    _write(tmp_path, "workerlog.0", [LINE_3, LINE_4])
    with pytest.warns(PaddleLogWarning) as record:
        case = import_paddle_logs(tmp_path)
    assert case["warnings"] == [str(w.message) for w in record]
    assert re.search(r"workerlog\.0:2: GPU 0: job 0F3 .*overlapping jobs", case["warnings"][0])
    jobs = case["jobs"]
    assert jobs["rank"] == [0, 0] and jobs["kind"] == ["F", "F"] and jobs["microbatch"] == [2, 3]
    # Exact ns from the six decimals; times relative to the first start.
    assert case["device"]["time_base_epoch_ns"] == 1697793307213760986
    assert jobs["start_ns"] == [0, 981934] and jobs["end_ns"] == [40245118, 5407959]
    assert case["streams"] == ["rank0/compute", "rank0/overlap"] and jobs["stream"] == [0, 1]
    assert case["overlaps"] == [[0, 1]]
    assert case["rank_labels"] == ["GPU 0"]
    # Two lines cut from a longer log: micro-batches 0 and 1 are not in it, though the ids make m = 4.
    assert case["schedule"]["m"] == 4
    assert [w.split(": ", 2)[1][:40] for w in case["warnings"]] == ["GPU 0", "no job in any log has micro_batch_id 0-1"]
    validate_document(results_document([case]))
    assert check_trace(case_trace(case)) == []
    # Busy time is the union of the two jobs (the overlap is not counted twice).
    assert case["metrics"]["per_step"][0]["busy_ns"] == [40245118]


def test_job_types_outside_word_characters_are_read():
    assert parse_job_type("forward(chunk1)") == ("F", 1)
    assert parse_job_type("backward_w3") == ("W", 3)
    assert parse_job_type("backward_b") == ("I", 0)
    assert parse_job_type("optimizer") == ("OPT", 0)
    assert parse_job_type("lr") == ("lr", 0)
    assert parse_job_type("recv_forward(chunk0)") == ("RECV_F", 0)  # newer Paddle: a communication job (issue 12)
    assert parse_job_type("frobnicate_chunk2") == ("frobnicate", 2)


def test_unknown_job_type_is_kept_with_a_warning_naming_file_and_line(tmp_path):
    def line(t, mb, a, b):
        return f"Profiler Info: Job ({mb}), type = {t}, micro_batch_id = {mb}, job_start_time = {a:.6f}, job_end_time = {b:.6f}"

    path = _write(tmp_path, "workerlog.0", [
        line("lr", 0, 999, 999.5), line("forward", 0, 1000, 1001), line("frobnicate", 0, 1001, 1002),
        line("frobnicate", 1, 1002, 1002.5), line("backward", 0, 1003, 1005),
    ])
    with pytest.warns(PaddleLogWarning) as record:
        case = import_paddle_logs(tmp_path)
    assert [str(w.message) for w in record] == [
        f"{path}:3: unknown job type 'frobnicate' (not forward, backward, backward_b, backward_w, optimizer or lr); "
        "kept as kind 'frobnicate', counted as busy time (2 lines in this file)"
    ]
    assert case["jobs"]["kind"] == ["lr", "F", "frobnicate", "frobnicate", "B"]
    assert case["warnings"] == [str(w.message) for w in record]
    # Kept as busy time: 0.5 + 1 + 1 + 0.5 + 2 ms of the 6 ms step.
    assert case["metrics"]["per_step"][0]["busy_ns"] == [5_000_000]
    # Span bubble: 1 ms idle (1002.5 to 1003 and 999.5 to 1000) of the 6 ms span.
    assert case["metrics"]["span_bubble_ratio"] == pytest.approx(1 / 6)
    # The import's own kinds pass the checks report and compare make, and render.
    from harness.report.fields import check_cases
    from harness.report.render import write_report
    from harness.report.results import results_document

    doc = results_document([case])
    check_cases(doc)
    assert write_report(tmp_path / "out", doc).index.exists()


def test_chunked_types_steps_and_machines(tmp_path):
    def line(t, mb, a, b):
        return f"Profiler Info: Job ({mb}), type = {t}, micro_batch_id = {mb}, job_start_time = {a:.6f}, job_end_time = {b:.6f}"

    for machine in ("machine0", "machine1"):
        for dev in (0, 1):
            t0 = 1000.0 + dev
            lines = ["Schedule Profiler start at step 5 and end at step 7"]
            for step in range(2):
                base = t0 + 100 * step
                lines += [line("forward(chunk0)", 0, base, base + 1), line("forward(chunk1)", 0, base + 1, base + 2),
                          line("backward(chunk1)", 0, base + 2, base + 4), line("backward(chunk0)", 0, base + 4, base + 6)]
            _write(tmp_path / machine, f"workerlog.{dev}", lines)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PaddleLogWarning)  # a clean log warns about nothing
        case = import_paddle_logs(tmp_path)
    assert case["schedule"]["p"] == 4 and case["schedule"]["v"] == 2
    assert case["rank_labels"] == ["machine0 GPU 0", "machine0 GPU 1", "machine1 GPU 0", "machine1 GPU 1"]
    assert case["steps"] == [5, 6]
    assert case["jobs"]["kind"][:4] == ["F", "F", "B", "B"] and case["jobs"]["chunk"][:4] == [0, 1, 1, 0]
    # Looped placement: stage = chunk * p + rank.
    assert case["jobs"]["stage"][:4] == [0, 4, 4, 0]
    assert case["step_end_ns"][0] - case["step_start_ns"][0] == 7_000_000  # 1 ms skew + 6 ms of work
    assert case["overlaps"] == []


def test_garbage_lines_warn_with_file_and_line(tmp_path):
    path = _write(tmp_path, "workerlog.0", [
        "random noise",
        LINE_3,
        "I1020 ...] Profiler Info: Job (5), type = forward, micro_batch_id = x, job_start_time = 1, job_end_time = 2",
        "Profiler Info: Job (6), type = forward, micro_batch_id = 4, job_start_time = 1697793307260.0, job_end_time = 1697793307250.0",
        "Schedule Profiler start at step banana",
        "Profiler Info: Job (3), type = forward, micro_batch_id = 2, job_start_time = 1697793307213.76",  # truncated
    ])
    with pytest.warns(PaddleLogWarning) as record:
        case = import_paddle_logs(tmp_path)
    messages = [str(w.message) for w in record]
    assert [m.split(": ", 1)[0] for m in messages] == [f"{path}:3", f"{path}:4", f"{path}:5", f"{path}:6", f"{path}:2"]
    assert "end before start" in messages[1]
    assert messages[4] == (f"{path}:2: no job in any log has micro_batch_id 0-1, though the largest id, 2, makes m = 3: "
                           "the ids leave a gap (lines missing, or ids wrong)")
    assert len(case["jobs"]["kind"]) == 1


def test_a_negative_micro_batch_id_is_skipped_with_a_warning_naming_file_and_line(tmp_path):
    def line(mb, a, b):
        return f"Profiler Info: Job ({mb}), type = forward, micro_batch_id = {mb}, job_start_time = {a:.6f}, job_end_time = {b:.6f}"

    path = _write(tmp_path, "workerlog.0", [line(0, 1000, 1001), line(-4, 1001, 1002), line(1, 1002, 1003)])
    with pytest.warns(PaddleLogWarning) as record:
        case = import_paddle_logs(tmp_path)
    assert [str(w.message) for w in record] == [
        f"{path}:2: job forward has micro_batch_id -4 (negative; micro-batches count from 0), skipped"
    ]
    assert case["jobs"]["microbatch"] == [0, 1] and case["schedule"]["m"] == 2
    assert case["warnings"] == [str(w.message) for w in record]


def test_empty_folder_and_folder_without_profiler_lines_are_clear_errors(tmp_path):
    with pytest.raises(InputFormatError, match="no PaddlePaddle worker logs found"):
        import_paddle_logs(tmp_path)
    _write(tmp_path, "workerlog.0", ["just a log"])
    with pytest.raises(InputFormatError, match="no 'Profiler Info: Job"), pytest.warns(PaddleLogWarning):
        import_paddle_logs(tmp_path)
    with pytest.raises(InputFormatError, match="no such log folder"):
        import_paddle_logs(tmp_path / "missing")


def test_our_run_exports_as_paddle_lines_and_imports_back(tmp_path):
    case = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=4, optimizer=True), "sim", range(1, 3)))
    lines = paddle_log_lines(case, 0)
    assert lines[0] == "Schedule Profiler start at step 1 and end at step 3"
    assert "Profiler Info: Job (0), type = forward, micro_batch_id = 0, job_start_time = 1700000000000.000000," in lines[1]
    write_paddle_logs(tmp_path, case)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PaddleLogWarning)
        back = import_paddle_logs(tmp_path)
    assert back["steps"] == [1, 2]
    src, dst = case["jobs"], back["jobs"]
    key = lambda c, i: (c["rank"][i], c["step"][i], c["kind"][i], c["microbatch"][i])  # noqa: E731
    orig = sorted((key(src, i), src["end_ns"][i] - src["start_ns"][i]) for i in range(len(src["kind"])))
    got = sorted((key(dst, i), dst["end_ns"][i] - dst["start_ns"][i]) for i in range(len(dst["kind"])))
    assert got == orig
    assert back["metrics"]["bubble_ratio"] == pytest.approx(case["metrics"]["bubble_ratio"])


@pytest.mark.parametrize(("schedule", "v", "placement"), [
    ("ZB-V", 1, [0, 1, 2, 3, 3, 2, 1, 0]),
    ("Interleaved1F1B", 2, [0, 1, 2, 3, 0, 1, 2, 3]),
    ("DualPipeV", 1, [0, 1, 2, 3, 3, 2, 1, 0]),
])
def test_a_named_schedule_keeps_its_placement_through_export_and_import(tmp_path, schedule, v, placement):
    # DualPipeV back to back: its overlapped pairs would be (rightly) reported as overlapping jobs on one device
    options = {"overlap": False} if schedule == "DualPipeV" else {}
    case = case_to_dict(run_case(PipelineCase(schedule, stages=4, microbatches=8, chunks=v, options=options), "sim", range(1, 3)))
    assert case["schedule"]["stage_to_rank"] == placement
    write_paddle_logs(tmp_path, case)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PaddleLogWarning)
        back = import_paddle_logs(tmp_path, schedule_name=schedule)
    assert back["schedule"]["stage_to_rank"] == placement
    assert back["schedule"]["ranks"] == case["schedule"]["ranks"]  # one step's jobs per rank, with their stages
    cols = ("rank", "step", "stage", "kind", "microbatch", "chunk")
    src, dst = case["jobs"], back["jobs"]
    orig = sorted((*(src[c][i] for c in cols), src["end_ns"][i] - src["start_ns"][i]) for i in range(len(src["kind"])))
    got = sorted((*(dst[c][i] for c in cols), dst["end_ns"][i] - dst["start_ns"][i]) for i in range(len(dst["kind"])))
    assert got == orig


def test_an_unnamed_or_unplaceable_schedule_gets_the_looped_placement(tmp_path):
    case = case_to_dict(run_case(PipelineCase("ZB-V", stages=2, microbatches=4), "sim", range(1, 2)))
    write_paddle_logs(tmp_path, case)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PaddleLogWarning)
        plain = import_paddle_logs(tmp_path)  # the default name is no built-in schedule: looped, no warning
    assert plain["schedule"]["stage_to_rank"] == [0, 1, 0, 1]
    assert sorted(set(zip(plain["jobs"]["rank"], plain["jobs"]["chunk"], plain["jobs"]["stage"]))) == [
        (0, 0, 0), (0, 1, 2), (1, 0, 1), (1, 1, 3)]
    with pytest.warns(PaddleLogWarning) as record:
        odd = import_paddle_logs(tmp_path, schedule_name="1F1B")  # 1F1B has one chunk per rank, the logs two
    assert [str(w.message) for w in record] == [
        "schedule '1F1B' cannot be placed on the logs' p=2, m=4, v=2 (it has 1 chunk(s) per rank, the logs 2); "
        "stages placed looped instead (stage = chunk * p + rank)"
    ]
    assert odd["schedule"]["stage_to_rank"] == [0, 1, 0, 1]


def test_a_misspelt_schedule_name_is_warned_with_the_close_built_in_one(tmp_path):
    case = case_to_dict(run_case(PipelineCase("ZB-V", stages=2, microbatches=4), "sim", range(1, 2)))
    write_paddle_logs(tmp_path, case)
    with pytest.warns(PaddleLogWarning) as record:
        back = import_paddle_logs(tmp_path, schedule_name="ZB-V2")
    assert [str(w.message) for w in record] == [
        "schedule 'ZB-V2' is not a built-in schedule (did you mean 'ZB-V'?), so its stages are placed looped "
        "(stage = chunk * p + rank); give the built-in name to place them as it does"
    ]
    assert back["schedule"]["stage_to_rank"] == [0, 1, 0, 1] and back["schedule"]["name"] == "ZB-V2"
    with warnings.catch_warnings():
        warnings.simplefilter("error", PaddleLogWarning)
        assert import_paddle_logs(tmp_path, schedule_name="my ZB run")["schedule"]["stage_to_rank"] == [0, 1, 0, 1]  # a label


def test_dualpipev_with_fewer_than_2p_micro_batches_keeps_the_v_placement(tmp_path):
    # ZB-V runs with m=4 on p=4 ranks; DualPipeV cannot be built for m < 2p, but its placement does not depend on m.
    case = case_to_dict(run_case(PipelineCase("ZB-V", stages=4, microbatches=4), "sim", range(1, 2)))
    write_paddle_logs(tmp_path, case)
    with pytest.warns(PaddleLogWarning) as record:
        back = import_paddle_logs(tmp_path, schedule_name="DualPipeV")
    assert [str(w.message) for w in record] == [
        "schedule 'DualPipeV' cannot be built for the logs' p=4, m=4 (DualPipeV needs m >= 2p micro-batches (one per stage); "
        "got p=4, m=4); stages placed as its builder places them for any m (V placement: rank r holds stages r and 7 - r)"
    ]
    assert back["schedule"]["stage_to_rank"] == [0, 1, 2, 3, 3, 2, 1, 0]
    assert sorted(set(zip(back["jobs"]["rank"], back["jobs"]["chunk"], back["jobs"]["stage"]))) == \
        sorted(set(zip(case["jobs"]["rank"], case["jobs"]["chunk"], case["jobs"]["stage"])))


def _exported(folder: Path, microbatches: int = 4, steps: int = 3) -> dict:
    """A 1F1B p=2 run exported as worker logs (steps 1..steps, one 'Schedule Profiler' line first)."""
    case = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=microbatches), "sim", range(1, steps + 1)))
    write_paddle_logs(folder, case)
    return case


def _edit_micro_batch(path: Path, lineno: int, new_id: int) -> None:
    lines = path.read_text().splitlines()
    assert "micro_batch_id = " in lines[lineno - 1]
    lines[lineno - 1] = re.sub(r"micro_batch_id = \d+", f"micro_batch_id = {new_id}", lines[lineno - 1])
    path.write_text("\n".join(lines) + "\n")


def _clean_import(folder: Path) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("error", PaddleLogWarning)
        return import_paddle_logs(folder)


def test_an_impossible_micro_batch_id_is_named_and_does_not_set_m(tmp_path):
    _exported(tmp_path)
    clean = _clean_import(tmp_path)
    path = tmp_path / "workerlog.1"
    # Line 12 is GPU 1's forward of micro-batch 1 in the second step (the last rank runs F0 B0 F1 B1 ...).
    _edit_micro_batch(path, 12, 99)
    with pytest.warns(PaddleLogWarning) as record:
        case = import_paddle_logs(tmp_path)
    assert [str(w.message) for w in record] == [
        f"{path}:12: GPU 1, step 2: forward has micro_batch_id 99 (line 12), beyond m = 4 of the other steps and devices; "
        "no micro-batch 1: a micro_batch_id on these lines is wrong; the jobs are kept as logged"
    ]
    assert case["schedule"]["m"] == 4 and case["steps"] == [1, 2, 3]
    # The job is kept as logged (its time is real): one job with id 99, none lost.
    assert case["jobs"]["microbatch"].count(99) == 1 and len(case["jobs"]["kind"]) == len(clean["jobs"]["kind"])
    assert case["metrics"]["bubble_ratio"] == clean["metrics"]["bubble_ratio"]
    assert case["metrics"]["step_time_median_ns"] == clean["metrics"]["step_time_median_ns"]


@pytest.mark.parametrize(("log", "lineno", "was", "first_line"), [
    ("workerlog.1", 12, 1, 10),  # last rank, F0 B0 F1 B1 ...: its second step's F1 printed as F0
    ("workerlog.0", 11, 1, 10),  # first rank, F0 F1 B0 ...: F1 right after the step's first job, F0
])
def test_a_duplicated_micro_batch_id_is_named_and_makes_no_extra_step(tmp_path, log, lineno, was, first_line):
    _exported(tmp_path)
    clean = _clean_import(tmp_path)
    path = tmp_path / log
    _edit_micro_batch(path, lineno, 0)
    with pytest.warns(PaddleLogWarning) as record:
        case = import_paddle_logs(tmp_path)
    rank = int(log[-1])
    assert [str(w.message) for w in record] == [
        f"{path}:{first_line}: GPU {rank}, step 2: forward has micro-batch 0 twice (lines {first_line}, {lineno}); "
        f"no micro-batch {was}: a micro_batch_id on these lines is wrong; the jobs are kept as logged"
    ]
    # Still 3 steps of 16 jobs (not a 4th step starting at the repeated id), so the bubble is the clean log's.
    assert case["steps"] == [1, 2, 3] and case["schedule"]["m"] == 4
    assert [case["jobs"]["step"].count(s) for s in (1, 2, 3)] == [16, 16, 16]
    assert case["metrics"]["bubble_ratio"] == clean["metrics"]["bubble_ratio"]
    assert case["metrics"]["per_step"][1]["step_time_ns"] == clean["metrics"]["per_step"][1]["step_time_ns"]


def test_a_duplicated_micro_batch_id_in_a_one_step_log(tmp_path):
    _exported(tmp_path, steps=1)
    path = tmp_path / "workerlog.1"
    _edit_micro_batch(path, 4, 0)  # F1 -> F0
    with pytest.warns(PaddleLogWarning) as record:
        case = import_paddle_logs(tmp_path)
    assert [str(w.message) for w in record] == [
        f"{path}:2: GPU 1, step 1: forward has micro-batch 0 twice (lines 2, 4); no micro-batch 1: "
        "a micro_batch_id on these lines is wrong; the jobs are kept as logged"
    ]
    assert case["steps"] == [1] and case["schedule"]["m"] == 4


def test_micro_batches_missing_from_every_log_are_one_warning(tmp_path):
    def line(t, mb, a):
        return f"Profiler Info: Job ({mb}), type = {t}, micro_batch_id = {mb}, job_start_time = {a:.6f}, job_end_time = {a + 1:.6f}"

    # Micro-batch 2 is in no log: ids 0, 1, 3.
    path = _write(tmp_path, "workerlog.0", [line("forward", mb, 1000 + 2 * i) for i, mb in enumerate((0, 1, 3))]
                  + [line("backward", mb, 1010 + 2 * i) for i, mb in enumerate((0, 1, 3))])
    with pytest.warns(PaddleLogWarning) as record:
        case = import_paddle_logs(tmp_path)
    assert [str(w.message) for w in record] == [
        f"{path}:3: no job in any log has micro_batch_id 2, though the largest id, 3, makes m = 4: "
        "the ids leave a gap (lines missing, or ids wrong)"
    ]
    assert case["schedule"]["m"] == 4 and case["steps"] == [0]


def test_a_log_cut_short_names_the_incomplete_step(tmp_path):
    _exported(tmp_path)
    path = tmp_path / "workerlog.1"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-4] + lines[-1:]) + "\n")  # the last step's B2, F3 and B3 lines (before the export's mark) cut off
    with pytest.warns(PaddleLogWarning) as record:
        case = import_paddle_logs(tmp_path)
    # The log ends inside step 3 (5 of its 8 lines): GPU 1 did not record step 3, which is left out of the figures.
    assert [str(w.message) for w in record] == [
        f"{path}:22: GPU 1's log ends inside step 3 (5 of the 8 job lines its step 2 has); step 3 is left out of the "
        "figures (the other devices ran it)",
    ]
    assert case["steps"] == [1, 2] and case["schedule"]["m"] == 4 and set(case["jobs"]["step"]) == {1, 2}


def _one_device_step(tmp_path: Path, forward: tuple[int, ...], backward: tuple[int, ...]) -> Path:
    """A one-device, one-step log: forwards with ids ``forward``, then backwards with ids ``backward``."""
    def line(t, mb, a):
        return f"Profiler Info: Job ({mb}), type = {t}, micro_batch_id = {mb}, job_start_time = {a:.6f}, job_end_time = {a + 1:.6f}"

    return _write(tmp_path, "workerlog.0", [line("forward", mb, 1000 + 2 * i) for i, mb in enumerate(forward)]
                  + [line("backward", mb, 1010 + 2 * i) for i, mb in enumerate(backward)])


def test_one_stray_id_in_a_one_device_one_step_log_does_not_set_m(tmp_path):
    # Two id groups (forward, backward): 99 is in one of them, a tie, which goes to the smaller m.
    path = _one_device_step(tmp_path, (0, 99, 2, 3), (0, 1, 2, 3))
    with pytest.warns(PaddleLogWarning) as record:
        case = import_paddle_logs(tmp_path)
    assert [str(w.message) for w in record] == [
        f"{path}:2: GPU 0, step 0: forward has micro_batch_id 99 (line 2), beyond m = 4 of the other steps and devices; "
        "no micro-batch 1: a micro_batch_id on these lines is wrong; the jobs are kept as logged"
    ]
    assert case["schedule"]["m"] == 4 and case["jobs"]["microbatch"].count(99) == 1


def test_a_one_device_one_step_log_cut_short_keeps_the_forward_ids_m(tmp_path):
    # Also a tie (ids 2 and 3 in one of two groups), but without a gap: the log was cut short, m = 4.
    path = _one_device_step(tmp_path, (0, 1, 2, 3), (0, 1))
    with pytest.warns(PaddleLogWarning) as record:
        case = import_paddle_logs(tmp_path)
    assert [str(w.message) for w in record] == [
        f"{path}:5: GPU 0, step 0: backward has no micro-batch 2-3: lines are missing (a log cut short?) or an id is wrong"
    ]
    assert case["schedule"]["m"] == 4


@pytest.mark.parametrize("schedule", ["PaddlePaddle log", "1F1B"])
def test_micro_batch_ids_offset_by_a_million_import_at_once_with_one_warning(tmp_path, schedule, monkeypatch):
    from harness.schedule import registry

    case = case_to_dict(run_case(PipelineCase("1F1B", stages=4, microbatches=4), "sim", range(1, 4)))
    write_paddle_logs(tmp_path, case)
    offset = 10**6
    for f in sorted(tmp_path.glob("workerlog.*")):
        f.write_text(re.sub(r"micro_batch_id = (\d+)", lambda mo: f"micro_batch_id = {int(mo.group(1)) + offset}", f.read_text()))
    built: list[int] = []
    real = registry.build_schedule

    def recording(name, p, m, *args, **kwargs):
        built.append(m)
        return real(name, p, m, *args, **kwargs)

    monkeypatch.setattr(registry, "build_schedule", recording)
    with pytest.warns(PaddleLogWarning) as record:
        back = import_paddle_logs(tmp_path, schedule_name=schedule)
    # the ids' gap is never built (a builder run for m = 10**6 + 4 takes seconds): only the 4 micro-batches the
    # logs ran, where a built-in schedule is named (this asserted a wall time under 1 s, which a busy machine breaks)
    assert built == ([] if schedule == "PaddlePaddle log" else [4] * len(built)) and (schedule == "PaddlePaddle log" or built)
    assert [str(w.message) for w in record] == [
        f"{tmp_path / 'workerlog.0'}:5: no job in any log has micro_batch_id 0-999999, though the largest id, 1000003, "
        "makes m = 1000004: the ids leave a gap (lines missing, or ids wrong)"
    ]
    assert back["schedule"]["m"] == offset + 4 and back["schedule"]["stage_to_rank"] == [0, 1, 2, 3]
    assert back["metrics"]["bubble_ratio"] == pytest.approx(case["metrics"]["bubble_ratio"], abs=1e-3)


def test_a_missing_workerlog_is_named_and_the_rest_imported(tmp_path):
    case = case_to_dict(run_case(PipelineCase("1F1B", stages=4, microbatches=4), "sim", range(0, 1)))
    write_paddle_logs(tmp_path, case)
    (tmp_path / "workerlog.1").unlink()
    with pytest.warns(PaddleLogWarning) as record:
        back = import_paddle_logs(tmp_path)
    gap = (f"{tmp_path}: no workerlog.1 (devices 0, 2, 3 found); "
           "imported as 3 ranks in device order, so later devices move down a rank")
    assert str(record[0].message) == gap
    assert back["warnings"][0] == gap
    assert back["schedule"]["p"] == 3 and back["rank_labels"] == ["GPU 0", "GPU 2", "GPU 3"]


def test_no_did_you_mean_where_the_close_name_places_chunks_looped_too(tmp_path):
    case = case_to_dict(run_case(PipelineCase("Interleaved1F1B", stages=2, microbatches=4, chunks=2), "sim", range(1, 2)))
    write_paddle_logs(tmp_path, case)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PaddleLogWarning)
        for name in ("VPP2", "pipeline"):  # close to Interleaved1F1B (looped too) and FThenB (one chunk)
            assert import_paddle_logs(tmp_path, schedule_name=name)["schedule"]["stage_to_rank"] == [0, 1, 0, 1]


def test_export_replaces_its_own_logs_and_never_real_ones(tmp_path):
    # An earlier 4-rank export into the folder: a 2-rank export must not leave workerlog.2 and .3 for an import to mix in.
    four = case_to_dict(run_case(PipelineCase("1F1B", stages=4, microbatches=4), "sim", range(1, 2), case_id="four"))
    two = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=4), "sim", range(1, 2), case_id="two"))
    write_paddle_logs(tmp_path, four)
    write_paddle_logs(tmp_path, two)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["workerlog.0", "workerlog.1"]
    assert (tmp_path / "workerlog.0").read_text().splitlines()[-1] == "# written by pipeline-harness export-paddle from case 'two'"
    with warnings.catch_warnings():
        warnings.simplefilter("error", PaddleLogWarning)
        assert import_paddle_logs(tmp_path)["schedule"]["p"] == 2
    real = tmp_path / "real"
    real.mkdir()
    (real / "workerlog.0").write_text("Profiler Info: Job (0), type = forward, micro_batch_id = 0, job_start_time = 1.0, job_end_time = 2.0\n")
    with pytest.raises(ConfigError, match=r"real holds worker logs that export-paddle did not write \(workerlog\.0\); export into an empty"):
        write_paddle_logs(real, two)
    assert (real / "workerlog.0").read_text().startswith("Profiler Info")  # untouched


def test_a_failed_export_changes_nothing_and_machine_folders_are_refused(tmp_path, monkeypatch):
    import harness.imports.paddle_export as paddle  # where write_paddle_logs looks paddle_log_lines up

    three = case_to_dict(run_case(PipelineCase("1F1B", stages=3, microbatches=4), "sim", range(1, 2), case_id="three"))
    four = case_to_dict(run_case(PipelineCase("1F1B", stages=4, microbatches=4), "sim", range(1, 2), case_id="four"))
    write_paddle_logs(tmp_path, three)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    real_lines = paddle.paddle_log_lines

    def disk_full(case, rank, epoch_ns=None):
        if rank == 2:
            raise OSError(28, "No space left on device")
        return real_lines(case, rank, epoch_ns)

    monkeypatch.setattr(paddle, "paddle_log_lines", disk_full)
    with pytest.raises(OSError, match="No space left on device"):
        write_paddle_logs(tmp_path, four)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # no half export, no staging folder left
    monkeypatch.setattr(paddle, "paddle_log_lines", real_lines)
    nested = tmp_path / "m"
    (nested / "machine0").mkdir(parents=True)
    (nested / "machine0" / "workerlog.0").write_text("Profiler Info: x\n")
    with pytest.raises(ConfigError, match=r"m holds worker logs that export-paddle did not write \(machine0/workerlog\.0\)"):
        write_paddle_logs(nested, three)


def test_an_import_of_logs_from_two_exports_says_so(tmp_path):
    a = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=4), "sim", range(1, 2), case_id="a"))
    b = case_to_dict(run_case(PipelineCase("FThenB", stages=2, microbatches=4), "sim", range(1, 2), case_id="b"))
    write_paddle_logs(tmp_path / "a", a)
    write_paddle_logs(tmp_path / "b", b)
    (tmp_path / "a" / "workerlog.1").write_bytes((tmp_path / "b" / "workerlog.1").read_bytes())
    with pytest.warns(PaddleLogWarning) as record:
        import_paddle_logs(tmp_path / "a")
    assert str(record[0].message) == (f"{tmp_path / 'a'}: these worker logs come from different runs (workerlog.0: 'a', "
                                      "workerlog.1: 'b'); the import reads them as one run")


def _shift_log(path: Path, ms: float) -> None:
    """Move every job time of one worker log by ``ms`` (its device's clock read that far off)."""
    text = re.sub(r"(job_(?:start|end)_time) = ([0-9.]+)", lambda g: f"{g[1]} = {float(g[2]) + ms:.6f}", path.read_text())
    path.write_text(text)


@pytest.mark.parametrize(("device", "ms", "message"), [
    # 1F1B p=4 m=8, F 1 ms, B 2 ms: the devices' spans in a step are 33, 30, 27 and 24 ms (114 ms); the first
    # starts 0, 1, 2, 3 ms. GPU 2 an hour late: the step runs from 0 to 29 ms + 1 h; the median first start is 1 ms.
    (2, 3_600_000.0, "step 1 lasts 3,600,029.000 ms, more than its 4 devices' own spans added up (114.000 ms): their "
                     "clocks disagree (GPU 2's jobs start 3,600,001.000 ms after the others'; or its log lacks a step theirs have)"),
    # GPU 0 ten seconds early: the step runs from -10 s to 31 ms (GPU 1's last backward, 1 + 30 ms); the median first start is 1 ms
    (0, -10_000.0, "step 1 lasts 10,031.000 ms, more than its 4 devices' own spans added up (114.000 ms): their "
                   "clocks disagree (GPU 0's jobs start 10,001.000 ms before the others'; or its log lacks a step theirs have)"),
])
def test_a_device_whose_clock_reads_far_off_is_named_and_flagged(tmp_path, device, ms, message):
    case = case_to_dict(run_case(PipelineCase("1F1B", stages=4, microbatches=8), "sim", range(1, 3)))
    write_paddle_logs(tmp_path, case)
    _shift_log(tmp_path / f"workerlog.{device}", ms)
    with pytest.warns(PaddleLogWarning) as caught:
        back = import_paddle_logs(tmp_path)
    said = [str(w.message) for w in caught]
    tail = (", so the step times and the bubble ratio are not meaningful; logs of several hosts need clocks synchronized "
            "(NTP/PTP) while the run is profiled")
    assert said == [f"{tmp_path}: {message}{tail}"]
    assert back["flags"] == [{"kind": "clocks", "reason": message + tail}]
    assert back["warnings"] == said


def test_devices_on_one_clock_are_not_flagged_whatever_the_bubble(tmp_path):
    # GPipe-like FThenB p=4 m=1: each device idles most of the step, yet the step (4 F + 4 B chained) is the
    # devices' spans laid end to end at most
    case = case_to_dict(run_case(PipelineCase("FThenB", stages=4, microbatches=1), "sim", range(1, 3)))
    write_paddle_logs(tmp_path, case)
    back = _clean_import(tmp_path)
    assert "flags" not in back and back["metrics"]["bubble_ratio"] == pytest.approx(case["metrics"]["bubble_ratio"])


def test_a_log_that_lacks_its_first_step_is_flagged_not_paired_silently(tmp_path):
    # GPU 2's log without its first step was lined up by order: every step paired its step k+1 with the others' k,
    # the step time doubled (34 -> 66 ms) and the only warning said its log "ends after step 4"
    case = case_to_dict(run_case(PipelineCase("1F1B", stages=4, microbatches=8), "sim", range(1, 4)))
    write_paddle_logs(tmp_path, case)
    log = tmp_path / "workerlog.2"
    lines = log.read_text().splitlines()
    jobs = [i for i, line in enumerate(lines) if "Profiler Info" in line]
    log.write_text("\n".join(line for i, line in enumerate(lines) if i not in jobs[:16]) + "\n")  # its 16 jobs of step 1
    with pytest.warns(PaddleLogWarning) as caught:
        back = import_paddle_logs(tmp_path)
    # step 1 ran 0 to 33 ms, step 2 33 to 66 ms: GPU 2 (stage 2) ran step 2 from 33 + 2 to 33 + 29 ms (F 1 ms, B 2 ms)
    note = (f"{log}: GPU 2's jobs of step 1 (35.000 to 62.000 ms) lie wholly after the other devices' step 1 (0.000 to "
            "33.000 ms): its log's steps are lined up with the others' by their order, and it lacks a step they have or holds "
            "one more (a log that starts late or was cut at its start; or its clock reads a step or more off), so the step "
            "times and the bubble from there on are not the run's")
    assert note in [str(w.message) for w in caught]
    assert back["flags"] == [{"kind": "steps", "reason": note}]


def test_devices_that_all_record_every_step_are_not_flagged(tmp_path):
    case = case_to_dict(run_case(PipelineCase("1F1B", stages=4, microbatches=8), "sim", range(1, 4)))
    write_paddle_logs(tmp_path, case)
    assert "flags" not in _clean_import(tmp_path)
