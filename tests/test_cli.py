"""The command line: every command, exit statuses, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.analysis.compare import parse_threshold
from harness.case import PipelineCase
from harness.cli import main
from harness.errors import ConfigError
from harness.model.cost import FixedCost
from harness.report.results import case_to_dict, results_document
from harness.runner import run_case


def _results(path, f_ms=1.0, schedules=("FThenB", "1F1B")):
    cases = [case_to_dict(run_case(PipelineCase(s, stages=4, microbatches=8, cost=FixedCost.ms(F=f_ms, B=2)), "sim",
                                   range(0, 2), case_id=f"cases/x.py::test[{s}]")) for s in schedules]
    path.write_text(json.dumps(results_document(cases)))
    return path


def test_report_renders_page_and_traces(tmp_path, capsys):
    res = _results(tmp_path / "results.json")
    assert main(["report", str(res), "--out", str(tmp_path / "out")]) == 0
    out = tmp_path / "out"
    assert (out / "index.html").exists() and (out / "results.json").exists()
    assert sorted(p.name for p in (out / "traces").iterdir()) == ["cases_x.py__test_1F1B.json", "cases_x.py__test_FThenB.json"]
    assert (out / "hta" / "cases_x.py__test_1F1B" / "rank3.json").exists()
    captured = capsys.readouterr()
    assert "[2/2] cases/x.py::test[1F1B]" in captured.err  # progress
    assert "index.html (2 case(s)" in captured.out


def test_compare_passes_within_and_fails_past_thresholds(tmp_path, capsys):
    base = _results(tmp_path / "base.json")
    slower = _results(tmp_path / "new.json", f_ms=1.1)  # step time (m+p-1)(F+B): 33 ms -> 34.1 ms, +3.33%
    assert main(["compare", str(base), str(slower), "--fail", "step_time:5%"]) == 0
    out = capsys.readouterr().out
    assert "+3.33%" in out and "0 past a threshold" in out
    assert main(["compare", str(base), str(slower), "--fail", "step_time:3%", "--fail", "bubble:2%"]) == 1
    out = capsys.readouterr().out
    assert out.count("FAIL step_time") == 2 and "2 past a threshold" in out


def test_threshold_parsing():
    assert parse_threshold("step_time:5%").limit == pytest.approx(0.05)
    assert parse_threshold("bubble:2pp").limit == pytest.approx(0.02)
    with pytest.raises(ConfigError, match="unknown metric 'latency'"):
        parse_threshold("latency:5%")


@pytest.mark.parametrize(("text", "limit", "shown"), [
    ("step_time:5", 0.05, "step_time +5%"),  # a plain number is in the metric's unit: percent ...
    ("step_time:5%", 0.05, "step_time +5%"),
    ("step_time:0.5", 0.005, "step_time +0.5%"),
    ("bubble:2", 0.02, "bubble +2pp"),  # ... and percentage points for the bubble
    ("bubble:2pp", 0.02, "bubble +2pp"),
    ("bubble:2%", 0.02, "bubble +2pp"),
    (" bubble : 2.5 pp ", 0.025, "bubble +2.5pp"),
    ("step_time:0", 0.0, "step_time +0%"),
    ("bubble:2PP", 0.02, "bubble +2pp"),  # the unit in any case
    ("bubble:2Pp", 0.02, "bubble +2pp"),
    ("bubble:-0", 0.0, "bubble +0pp"),  # -0 is 0, not "+-0"
    ("step_time:-0.0%", 0.0, "step_time +0%"),
    ("step_time:+5", 0.05, "step_time +5%"),
    ("step_time:.5", 0.005, "step_time +0.5%"),
])
def test_a_plain_limit_is_in_percent_for_step_time_and_points_for_bubble(text, limit, shown):
    t = parse_threshold(text)
    assert t.limit == pytest.approx(limit) and t.describe() == shown


@pytest.mark.parametrize(("text", "message"), [
    ("step_time:-5", "--fail 'step_time:-5': the limit must not be negative"),
    ("bubble:-2pp", "--fail 'bubble:-2pp': the limit must not be negative"),
    ("bubble:nan", "--fail 'bubble:nan': the limit must be a finite number, got 'nan'"),
    ("step_time:inf%", "--fail 'step_time:inf%': the limit must be a finite number, got 'inf'"),
    ("step_time:5pp", "--fail 'step_time:5pp': the step time's change is relative, in percent, not percentage points"),
    ("bubble:150", "--fail 'bubble:150': the bubble is a share of the step time (0 to 100%), so it cannot grow by more than 100"),
    ("bubble:two", "--fail 'bubble:two': 'two' is not a plain decimal number (digits 0-9, like 5 or 2.5); bubble takes percentage "
                   "points (bubble:2 or bubble:2pp)"),
    ("bubble:1_0", "--fail 'bubble:1_0': '1_0' is not a plain decimal number (digits 0-9, like 5 or 2.5)"),  # float() takes it
    ("bubble:\uff12", "--fail 'bubble:\uff12': '\uff12' is not a plain decimal number"),  # full-width 2, which float() reads as 2
    ("bubble:\u0663pp", "--fail 'bubble:\u0663pp': '\u0663' is not a plain decimal number"),  # Arabic-Indic 3
    ("step_time:1e1", "--fail 'step_time:1e1': '1e1' is not a plain decimal number"),
    ("step_time:5PP", "--fail 'step_time:5PP': the step time's change is relative, in percent, not percentage points"),
    ("bubble:", "--fail 'bubble:': expected METRIC:LIMIT"),
])
def test_wrong_limits_are_refused_with_what_is_wrong(text, message):
    with pytest.raises(ConfigError) as exc:
        parse_threshold(text)
    assert str(exc.value).startswith(message)


def _with_metrics(path, step_ns, bubble):
    doc = results_document([case_to_dict(run_case(PipelineCase("1F1B", 2, 2), "sim", case_id="c"))])
    case = doc["cases"][0]
    case["metrics"].update(step_time_median_ns=step_ns, step_time_min_ns=int(step_ns), step_time_max_ns=int(step_ns),
                           bubble_ratio=bubble)
    case["step_end_ns"] = [start + int(step_ns) for start in case["step_start_ns"]]  # steps that last step_ns, as metrics say
    for key in ("per_step", "stats"):  # (optional) the per-step figures and statistics would contradict the edited steps
        del case["metrics"][key]
    for key in ("decomposition", "critical_path"):
        del case[key]
    path.write_text(json.dumps(doc))
    return path


def test_compare_gates_read_plain_limits_as_percent_and_points(tmp_path, capsys):
    base = _with_metrics(tmp_path / "base.json", 100e6, 0.10)
    new = _with_metrics(tmp_path / "new.json", 104e6, 0.13)  # +4% step time, +3 points of bubble
    assert main(["compare", str(base), str(new), "--fail", "bubble:2"]) == 1
    out = capsys.readouterr().out
    assert "+3.00pp  FAIL bubble" in out and "1 past a threshold (gates: bubble +2pp)" in out
    assert main(["compare", str(base), str(new), "--fail", "bubble:4"]) == 0
    assert "0 past a threshold (gates: bubble +4pp)" in capsys.readouterr().out
    assert main(["compare", str(base), str(new), "--fail", "step_time:5"]) == 0
    assert "0 past a threshold (gates: step_time +5%)" in capsys.readouterr().out
    assert main(["compare", str(base), str(new), "--fail", "step_time:3"]) == 1
    assert "1 past a threshold (gates: step_time +3%)" in capsys.readouterr().out
    assert main(["compare", str(base), str(new), "--fail", "step_time:-5"]) == 2
    assert capsys.readouterr().err.startswith("error: --fail 'step_time:-5': the limit must not be negative")


def test_compare_help_states_the_units():
    from harness.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    text = " ".join(sub.choices["compare"].format_help().split())
    assert "by more than LIMIT percent (relative: step_time:5 or step_time:5%)" in text
    assert "by more than LIMIT percentage points (absolute: bubble:2, bubble:2pp and bubble:2% all let it grow from 10% to 12%" in text


def test_import_paddle_flags_overlap(tmp_path, capsys):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "workerlog.0").write_text(
        "Profiler Info: Job (3), type = forward, micro_batch_id = 2, job_start_time = 1697793307213.760986, job_end_time = 1697793307254.006104\n"
        "Profiler Info: Job (4), type = forward, micro_batch_id = 3, job_start_time = 1697793307214.742920, job_end_time = 1697793307219.168945\n"
    )
    assert main(["import-paddle", str(logs), "--out", str(tmp_path / "rep"), "-q"]) == 0
    captured = capsys.readouterr()
    assert "2 jobs on 1 device(s), 1 step(s), 1 overlap(s) flagged" in captured.out
    assert captured.err.startswith(f"warning: {logs / 'workerlog.0'}:2: GPU 0")
    html = (tmp_path / "rep" / "index.html").read_text()
    assert "overlapping jobs on one device" in html


def test_export_paddle_writes_worker_logs(tmp_path, capsys):
    res = _results(tmp_path / "r.json", schedules=("1F1B",))
    assert main(["export-paddle", str(res), "--out", str(tmp_path / "logs")]) == 0
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == [f"workerlog.{r}" for r in range(4)]


def test_export_paddle_keeps_send_receive_jobs_for_a_round_trip(tmp_path, capsys):
    from harness.imports.paddle_export import left_out
    from harness.runner import run_case

    r = run_case(PipelineCase("1F1B", stages=4, microbatches=8, cost=FixedCost.ms(F=1, B=2, p2p_latency_ns=100_000)), "sim")
    res = tmp_path / "r.json"
    res.write_text(json.dumps(results_document([case_to_dict(r)])))
    assert main(["export-paddle", str(res), "--out", str(tmp_path / "logs")]) == 0
    log = (tmp_path / "logs" / "workerlog.1").read_text()
    counts = {t: log.count(f"type = {t},") for t in ("forward", "backward", "send_forward", "recv_forward", "send_backward", "recv_backward")}
    assert counts == dict.fromkeys(counts, 8)  # rank 1 of 4: every micro-batch's F and B, and its four transfers
    assert main(["import-paddle", str(tmp_path / "logs"), "--out", str(tmp_path / "rep"), "-q"]) == 0
    assert "160 jobs on 4 device(s), 1 step(s), 0 overlap(s) flagged" in capsys.readouterr().out  # 64 jobs before
    (case,) = json.loads((tmp_path / "rep" / "results.json").read_text())["cases"]
    assert case["metrics"]["step_time_median_ns"] == r.metrics.step_time_median_ns == 36_000_000
    assert left_out({"jobs": {"kind": ["F", "UNSHARD", "B", "UNSHARD", "REDUCE_GRAD"]}}) == {"UNSHARD": 2, "REDUCE_GRAD": 1}


def test_a_dualpipev_export_imports_back_without_flagging_its_own_overlapped_pairs(tmp_path, capsys):
    assert main(["run", "DualPipeV", "-p", "4", "-m", "8", "--backend", "sim", "--out", str(tmp_path / "run")]) == 0
    assert main(["export-paddle", str(tmp_path / "run" / "results.json"), "--out", str(tmp_path / "logs")]) == 0
    capsys.readouterr()
    assert main(["import-paddle", str(tmp_path / "logs"), "--schedule", "DualPipeV", "--out", str(tmp_path / "a"), "-q"]) == 0
    captured = capsys.readouterr()
    assert "150 jobs on 4 device(s), 1 step(s), 0 overlap(s) flagged" in captured.out and "overlapping jobs" not in captured.err
    (case,) = json.loads((tmp_path / "a" / "results.json").read_text())["cases"]
    assert case["metrics"]["step_time_median_ns"] == 54_000_000 and case["overlaps"] == []  # groups of F + B (the default)
    # without the schedule's name the importer cannot know the pairs are by design: they are flagged, as before
    assert main(["import-paddle", str(tmp_path / "logs"), "--out", str(tmp_path / "b"), "-q"]) == 0
    # every one of the 25 pairs (each of its two jobs spans the group)
    assert "150 jobs on 4 device(s), 1 step(s), 25 overlap(s) flagged" in capsys.readouterr().out


def test_export_paddle_checks_the_file_as_report_does_and_writes_nothing_from_a_damaged_one(tmp_path, capsys):
    from harness.runner import run_case

    doc = results_document([case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=2), "sim", case_id="c1"))])
    doc["cases"][0]["jobs"]["kind"][2] = "Q"  # it was written as "type = Q" (and "abc" times ended in a TypeError)
    res = tmp_path / "r.json"
    res.write_text(json.dumps(doc))
    assert main(["export-paddle", str(res), "--out", str(tmp_path / "logs")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {res}: case 'c1' (cases[0]): jobs.kind[2] is 'Q' (str), expected one of ")
    assert not (tmp_path / "logs").exists() or not any((tmp_path / "logs").iterdir())


def test_schedules_and_show(capsys):
    assert main(["schedules"]) == 0
    out = capsys.readouterr().out
    assert "1F1B (also:" in out and "Interleaved1F1B" in out and "sizes: p, m, v" in out
    assert main(["show", "1F1B", "-p", "4", "-m", "8"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["slot", "rank", "0", "rank", "1", "rank", "2", "rank", "3"]
    assert "step time 33.000 ms" in out and "bubble 27.27% of total" in out and "peak in-flight per rank: 4, 3, 2, 1" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["show", "nope", "-p", "4", "-m", "8"], "error: unknown schedule 'nope'"),
    (["report", "/nonexistent/results.json"], "error: /nonexistent/results.json: cannot read results file"),
    (["import-paddle", "/nonexistent/logs"], "error: /nonexistent/logs: no such log folder"),
    (["compare", "a.json", "b.json", "--fail", "speed:1%"], "error: --fail 'speed:1%'"),
])
def test_errors_are_one_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1 and "Traceback" not in err


def test_truncated_results_file_via_module_entry_point(tmp_path):
    res = _results(tmp_path / "results.json")
    res.write_text(res.read_text()[:1000])
    proc = subprocess.run([sys.executable, "-m", "harness", "report", str(res)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: {res}: line 1, column ") and "Traceback" not in proc.stderr
    assert not (tmp_path / "index.html").exists()


def test_compare_without_a_common_case_is_an_error_naming_both_files(tmp_path, capsys):
    base = _results(tmp_path / "base.json", schedules=("FThenB",))
    other = _results(tmp_path / "other.json", schedules=("1F1B",))
    assert main(["compare", str(base), str(other), "--fail", "step_time:5%"]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"error: no case id is in both {base} (1 case(s)) and {other} (1 case(s))")
    assert captured.err.count("\n") == 1 and "case(s) compared" not in captured.out
    # the way to compare them anyway, with their ids; as told, it compares
    a, b = (json.loads(p.read_text())["cases"][0]["id"] for p in (base, other))
    hint = (f"nothing was compared: is one of them the wrong file? To compare two cases of different ids (another schedule, "
            f"say), name them: python -m harness compare {base} {other} --case '{a}' --case '{b}'\n")
    assert captured.err.endswith(hint), captured.err
    assert main(["compare", str(base), str(other), "--case", a, "--case", b]) == 0
    assert f"comparing case {a!r} of {base} (base) with case {b!r} of {other} (new)" in capsys.readouterr().err


def test_compare_refuses_a_duplicate_case_id(tmp_path, capsys):
    base = _results(tmp_path / "base.json")
    doc = json.loads(base.read_text())
    doc["cases"][1]["id"] = doc["cases"][0]["id"]
    dup = tmp_path / "dup.json"
    dup.write_text(json.dumps(doc))
    assert main(["compare", str(base), str(dup)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {dup}: case id 'cases/x.py::test[FThenB]' appears more than once (cases[0] and cases[1]); ")


def test_compare_warns_when_backend_or_workload_differ(tmp_path, capsys):
    base = _results(tmp_path / "base.json")
    doc = json.loads(base.read_text())
    doc["cases"][0]["backend"] = "cpu"
    doc["cases"][0]["device"]["workload"] = "matmul"
    new = tmp_path / "new.json"
    new.write_text(json.dumps(doc))
    assert main(["compare", str(base), str(new)]) == 0
    captured = capsys.readouterr()
    warnings_ = [line for line in captured.err.splitlines() if line.startswith("warning:")]
    assert warnings_ == ["warning: cases/x.py::test[FThenB]: ran on different setups (backend 'sim' vs 'cpu'; "
                         "workload 'virtual' vs 'matmul'); its deltas compare the setups, not the schedule"]
    assert "2 case(s) compared, 0 past a threshold" in captured.out


def test_show_states_per_stage_durations_per_rank_work_and_zb_h1_theory(capsys):
    assert main(["show", "ZB-H1", "-p", "4", "-m", "8"]) == 0
    out = capsys.readouterr().out
    assert "durations are per stage: each rank runs m*(F+B) = 8*(1+2) ms = 24 ms of work per step\n" in out
    # ZB-H1 with T_W = T_B/2 = 1 ms: (p-1)(F+I-W) / makespan = 3 * 1 ms / 27 ms.
    assert "step time 27.000 ms" in out and "bubble 11.11% of total (idle share), 12.50% over ideal time; theory 11.11% of total" in out
    assert main(["show", "ZB-V", "-p", "4", "-m", "8"]) == 0
    out = capsys.readouterr().out
    # said once: the line with the work figure, and not again in the assumes: lines
    assert [line for line in out.splitlines() if "per chunk" in line or "per-chunk" in line] == [
        "durations are per chunk: each rank runs v*m*(F+B) = 2*8*(1+2) ms = 48 ms of work per step (2 chunks per rank, each half of "
        "a v=1 schedule's stage: for the same model as a v=1 schedule, divide F and B by 2, and a rank runs m*(F+B) of that "
        "schedule's per-stage F and B)"]
    assert "no closed-form theory for this schedule" in out


def test_show_says_how_long_an_overlapped_pair_lasts(capsys):
    # p=2, m=4: 24 ms of jobs per rank; by default each of the 6 F&B pairs lasts F + B = 3 ms, so a rank is busy 24 ms.
    assert main(["show", "DualPipeV", "-p", "2", "-m", "4"]) == 0
    out = capsys.readouterr().out
    assert ("overlapped F&B pairs (6 per step): each starts when both its inputs are in and lasts 3 ms (F + B, no overlap, "
            "as PyTorch's runtime runs OVERLAP_F_B; --overlap-ratio 0 gives max(F, B)); the busiest rank is busy 24 ms per step") in out
    assert "step time 26.000 ms" in out
    # the README's bubble (PP/2-1)(F&B+B-3W), PP = 2p = 4: (2-1)(3 + 2 - 3) = 2 ms, which every rank idles (F = I = W = 1 ms)
    assert "worst rank's idle 2 ms per step; DualPipe README's (PP/2-1)(F&B+B-3W), PP = 4: 2 ms (it holds here" in out
    # perfect overlap: each pair lasts max(F, B) = 2 ms, 1 ms less for each of a rank's 3 pairs: busy 21 ms, step 22 ms
    assert main(["show", "DualPipeV", "-p", "2", "-m", "4", "--overlap-ratio", "0"]) == 0
    out = capsys.readouterr().out
    assert "lasts 2 ms (--overlap-ratio 0: max(F, B) + 0 x (F + B - max(F, B))); the busiest rank is busy 21 ms per step" in out
    assert "step time 22.000 ms" in out and "PP = 4: 1 ms (it holds here" in out
    # outside the formula's regime (I = 1.5 ms != F) the line says why it shows no figure
    assert main(["show", "DualPipeV", "-p", "2", "-m", "4", "--backward-ms", "2.5", "--weight-ms", "1"]) == 0
    assert "is not shown: these schedules meet it only for F = I, W <= F, transfers free and m >= 2p" in capsys.readouterr().out
    assert main(["show", "1F1B", "-p", "2", "-m", "4", "--overlap-ratio", "0.5"]) == 0
    assert "note: --overlap-ratio is unused: 1F1B has no overlapped F&B pairs" in capsys.readouterr().err
    assert main(["show", "ZB-V", "-p", "4", "-m", "8"]) == 0
    assert "overlapped" not in capsys.readouterr().out


def test_version_comes_from_the_installed_distribution(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"pipeline-harness {version('pipeline-harness')}\n"


def test_export_paddle_lists_the_case_ids_when_one_must_be_picked(tmp_path, capsys):
    res = _results(tmp_path / "r.json")
    assert main(["export-paddle", str(res), "--out", str(tmp_path / "logs")]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {res} holds 2 cases; pick one with --case ID: cases/x.py::test[FThenB], cases/x.py::test[1F1B]\n"
    assert not (tmp_path / "logs").exists()


def test_output_folder_that_is_a_file_is_named_as_such(tmp_path, capsys):
    res = _results(tmp_path / "r.json", schedules=("1F1B",))
    blocker = tmp_path / "taken"
    blocker.write_text("x")
    assert main(["report", str(res), "--out", str(blocker)]) == 2
    assert capsys.readouterr().err == f"error: report directory '{blocker}' is a file, not a folder\n"
    assert main(["report", str(res), "--out", str(blocker / "sub")]) == 2
    assert capsys.readouterr().err == f"error: report directory '{blocker / 'sub'}' cannot be created: '{blocker}' is a file, not a folder\n"
    assert main(["export-paddle", str(res), "--out", str(blocker)]) == 2
    assert capsys.readouterr().err == f"error: log folder '{blocker}' is a file, not a folder\n"


@pytest.mark.parametrize(("path", "value", "message"), [
    (("jobs", "start_ns", 5), "12", "jobs.start_ns[5] is '12' (str), expected an integer"),
    (("schedule", "p"), "4", "schedule.p is '4' (str), expected an integer"),
    (("metrics", "bubble_ratio"), None, "metrics.bubble_ratio is None (NoneType), expected a number"),
    (("jobs", "stream", 0), 99, "jobs.stream[0] is 99, expected 0 to 3"),
])
def test_wrong_typed_field_names_case_and_field_and_leaves_nothing(tmp_path, capsys, path, value, message):
    res = _results(tmp_path / "r.json")
    doc = json.loads(res.read_text())
    doc["cases"] = doc["cases"][1:]  # the file's only case: nothing to report (with others, it is left out: test_report_malformed.py)
    target = doc["cases"][0]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    res.write_text(json.dumps(doc))
    out = tmp_path / "new" / "report"
    assert main(["report", str(res), "--out", str(out)]) == 2
    assert capsys.readouterr().err == f"error: {res}: case 'cases/x.py::test[1F1B]' (cases[0]): {message}\n"
    assert not (tmp_path / "new").exists()


def test_import_paddle_defaults_outside_the_pytest_report_folder(tmp_path, monkeypatch, capsys):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "workerlog.0").write_text(
        "Profiler Info: Job (0), type = forward, micro_batch_id = 0, job_start_time = 1000.0, job_end_time = 1001.0\n")
    monkeypatch.chdir(tmp_path)
    assert main(["import-paddle", str(logs), "-q", "--no-hta"]) == 0
    assert (tmp_path / "reports-paddle" / "index.html").exists() and not (tmp_path / "reports").exists()


def test_show_prints_the_zero_bubble_span_figures(capsys):
    # arXiv:2401.10241 Table 2 with T_F = T_B = T_W = 1 ms, p = 4: ZB-H1 (p-1)(T_F+T_B-T_W) = 3 ms on the worst
    # rank, ZB-H2 (p-1)(T_F+T_B-2T_W) = 0.
    from harness.cli import main

    assert main(["show", "ZB-H1", "-p", "4", "-m", "8", "--forward-ms", "1", "--backward-ms", "2", "--weight-ms", "1"]) == 0
    out = capsys.readouterr().out
    assert "span bubble per rank (idle between its own first and last job; the zero-bubble paper's bubble): 3, 2, 1, 0 ms; " \
           "theory, worst rank: 3 ms" in out
    assert main(["show", "ZB-H2", "-p", "4", "-m", "8", "--forward-ms", "1", "--backward-ms", "2", "--weight-ms", "1"]) == 0
    assert ": 0, 0, 0, 0 ms; theory, worst rank: 0 ms" in capsys.readouterr().out


def test_compare_gate_fails_on_missing_or_failed_cases(tmp_path, capsys):
    import json

    from harness import PipelineCase, run_case
    from harness.cli import main
    from harness.report.results import case_to_dict, results_document

    def doc(ids, failed=()):
        cases = []
        for cid in ids:
            c = case_to_dict(run_case(PipelineCase("1F1B", 2, 2), "sim", case_id=cid))
            if cid in failed:
                c["outcome"] = "failed"
            cases.append(c)
        return results_document(cases)

    base, new, broken = tmp_path / "base.json", tmp_path / "new.json", tmp_path / "broken.json"
    base.write_text(json.dumps(doc(["a", "b"])))
    new.write_text(json.dumps(doc(["a"])))
    broken.write_text(json.dumps(doc(["a", "b"], failed={"b"})))
    assert main(["compare", str(base), str(new)]) == 0  # no gate: a report, not a verdict
    assert main(["compare", str(base), str(new), "--fail", "step_time:5%"]) == 1
    assert f"FAIL: 1 case(s) of {base} missing from {new}" in capsys.readouterr().out
    assert main(["compare", str(base), str(broken), "--fail", "step_time:5%"]) == 1
    assert f"FAIL: 1 case(s) in {broken} ran but their test failed, as it did not in {base}: b" in capsys.readouterr().out
    assert main(["compare", str(base), str(base), "--fail", "step_time:5%"]) == 0
    # identical files whose test failed in both: no change, so the gate passes and says so
    assert main(["compare", str(broken), str(broken), "--fail", "step_time:5%"]) == 0
    out = capsys.readouterr().out
    assert "note: 1 case(s) failed their test in both files (no change, not gated): b" in out and "FAIL" not in out


def test_show_takes_sizes_from_a_schedule_file(capsys):
    from pathlib import Path

    from harness.cli import main

    csv = str(Path(__file__).resolve().parents[1] / "cases" / "schedules" / "zb_like_p3_m4.csv")
    assert main(["show", csv]) == 0
    assert "zb_like_p3_m4.csv: p=3, m=4, v=1" in capsys.readouterr().out
    assert main(["show", csv, "-p", "3", "-m", "8"]) == 2
    assert "has 4 micro-batches, but microbatches=8" in capsys.readouterr().err


def test_show_an_unknown_schedule_says_so_and_lists_the_known_ones(capsys):
    from harness.schedule.registry import schedule_names

    assert main(["show", "NOPE"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown schedule 'NOPE'; valid schedules: 1F1B (") and err.count("\n") == 1
    assert all(name in err for name in schedule_names()) and "give stages" not in err


def test_show_a_known_schedule_without_sizes_names_the_missing_flags(capsys):
    assert main(["show", "zb-h1"]) == 2
    assert capsys.readouterr().err == ("error: schedule 'ZB-H1' needs its sizes: give -p (pipeline ranks) and "
                                       "-m (micro-batches per step), e.g. show zb-h1 -p 4 -m 8\n")
    assert main(["show", "1F1B", "-p", "2"]) == 2
    assert capsys.readouterr().err == "error: schedule '1F1B' needs its sizes: give -m (micro-batches per step), e.g. show 1F1B -p 2 -m 8\n"


@pytest.mark.parametrize(("rows", "message"), [
    # 0B0 waits for 1B0, which rank 1 lists after 1F1, which waits for 0F1, listed after 0B0.
    (["0F0,0B0,0F1,0B1", ",1F0,1F1,1B1,1B0"], "deadlocks: 6 of 8 jobs can never run"),
    (["0F0,0F1,0B0,0B1", "1B0,1F0,1F1,1B1"], "1 job(s) out of order on their rank: 1B0 is listed before its 1F0"),
])
def test_show_a_broken_schedule_file_draws_its_grid_once_in_the_error(tmp_path, capsys, rows, message):
    csv = tmp_path / "broken.csv"
    csv.write_text("\n".join(rows) + "\n")
    assert main(["show", str(csv)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no grid or figures before the error
    assert captured.err.startswith("error: schedule '") and message in captured.err.splitlines()[0]
    assert captured.err.count("step  rank 0    rank 1") == 1


@pytest.mark.parametrize(("schedule", "v", "placement"), [
    ("ZB-V", 1, [0, 1, 2, 3, 3, 2, 1, 0]),
    ("Interleaved1F1B", 2, [0, 1, 2, 3, 0, 1, 2, 3]),
])
def test_export_then_import_paddle_keeps_a_named_schedules_placement(tmp_path, capsys, schedule, v, placement):
    case = case_to_dict(run_case(PipelineCase(schedule, stages=4, microbatches=8, chunks=v), "sim", range(0, 2), case_id="c"))
    res = tmp_path / "r.json"
    res.write_text(json.dumps(results_document([case])))
    assert main(["export-paddle", str(res), "--out", str(tmp_path / "logs")]) == 0
    assert main(["import-paddle", str(tmp_path / "logs"), "--schedule", schedule, "--out", str(tmp_path / "back"), "-q", "--no-hta"]) == 0
    assert "warning" not in capsys.readouterr().err
    back = json.loads((tmp_path / "back" / "results.json").read_text())["cases"][0]
    assert back["schedule"]["stage_to_rank"] == placement
    assert sorted(zip(back["jobs"]["rank"], back["jobs"]["chunk"], back["jobs"]["stage"])) == \
        sorted(zip(case["jobs"]["rank"], case["jobs"]["chunk"], case["jobs"]["stage"]))


def test_compare_merges_a_gate_given_twice_and_refuses_two_limits_for_one_metric(tmp_path, capsys):
    base = _with_metrics(tmp_path / "base.json", 100e6, 0.10)
    new = _with_metrics(tmp_path / "new.json", 104e6, 0.13)
    assert main(["compare", str(base), str(new), "--fail", "bubble:2", "--fail", "bubble:2pp", "--fail", "step_time:5"]) == 1
    out = capsys.readouterr().out
    assert "1 past a threshold (gates: bubble +2pp, step_time +5%)" in out and "FAIL bubble\n" in out
    assert main(["compare", str(base), str(new), "--fail", "bubble:2", "--fail", "bubble:3pp"]) == 2
    assert capsys.readouterr().err == ("error: --fail 'bubble:2' and --fail 'bubble:3pp': two limits for bubble "
                                       "(bubble +2pp and bubble +3pp); give one\n")


def test_compare_shows_a_gate_of_minus_zero_as_zero(tmp_path, capsys):
    base = _with_metrics(tmp_path / "base.json", 100e6, 0.10)
    assert main(["compare", str(base), str(base), "--fail", "bubble:-0"]) == 0
    assert "0 past a threshold (gates: bubble +0pp)" in capsys.readouterr().out


def test_compare_warns_when_a_case_is_a_different_pipeline_in_the_two_files(tmp_path, capsys):
    base = tmp_path / "base.json"
    base.write_text(json.dumps(results_document([case_to_dict(run_case(PipelineCase("1F1B", 2, 4), "sim", case_id="c"))])))
    new = tmp_path / "new.json"
    new.write_text(json.dumps(results_document([case_to_dict(run_case(PipelineCase("1F1B", 4, 8), "sim", case_id="c"))])))
    assert main(["compare", str(base), str(new)]) == 0
    captured = capsys.readouterr()
    assert captured.err == ("warning: c: ran a different pipeline in the two files (p 2 vs 4; m 4 vs 8); its deltas compare "
                            "different pipelines, not two runs of one\n")
    assert "1 case(s) compared" in captured.out
    assert main(["compare", str(base), str(base)]) == 0
    assert capsys.readouterr().err == ""
    # a fresh user's find: one case id running another schedule (chosen by an environment variable) was gated silently
    zb = tmp_path / "zb.json"
    zb.write_text(json.dumps(results_document([case_to_dict(run_case(PipelineCase("ZB-H1", 2, 4), "sim", case_id="c"))])))
    assert main(["compare", str(base), str(zb)]) == 0
    assert capsys.readouterr().err == ("warning: c: ran a different pipeline in the two files (schedule 1F1B vs ZB-H1); its deltas "
                                       "compare different pipelines, not two runs of one\n")


@pytest.mark.parametrize(("which", "key", "value", "message"), [
    ("new", "bubble_ratio", None, "metrics.bubble_ratio is None (NoneType), expected a number"),
    ("new", "bubble_ratio", "missing", "metrics.bubble_ratio is missing, expected a number"),
    ("base", "step_time_median_ns", "33000000", "metrics.step_time_median_ns is '33000000' (str), expected a number"),
])
def test_compare_names_file_case_and_field_of_a_bad_metric(tmp_path, capsys, which, key, value, message):
    # As `report` says it (not a traceback, which read as "past a threshold"); the damaged case is left out and the
    # others are compared: one left out of NEW is missing from it, which the gate fails; one left out of BASE is new.
    paths = {"base": _results(tmp_path / "base.json"), "new": _results(tmp_path / "new.json")}
    doc = json.loads(paths[which].read_text())
    metrics = doc["cases"][1]["metrics"]
    if value == "missing":
        del metrics[key]
    else:
        metrics[key] = value
    paths[which].write_text(json.dumps(doc))
    assert main(["compare", str(paths["base"]), str(paths["new"]), "--fail", "step_time:5%"]) == (1 if which == "new" else 0)
    captured = capsys.readouterr()
    assert captured.err == f"warning: {paths[which]}: case 'cases/x.py::test[1F1B]' (cases[1]): {message}; left out of the comparison\n"
    assert "1 case(s) compared" in captured.out
    assert (f"only in {paths['base']}: cases/x.py::test[1F1B]" in captured.out) == (which == "new")
    for case in doc["cases"]:  # every case damaged: nothing to compare
        case["metrics"][key] = None
    paths[which].write_text(json.dumps(doc))
    assert main(["compare", str(paths["base"]), str(paths["new"])]) == 2
    assert capsys.readouterr().err.startswith(f"error: {paths[which]}: case 'cases/x.py::test[FThenB]' (cases[0]): metrics.{key} is None")


def test_compare_with_a_base_step_time_of_zero_says_the_change_cannot_be_computed(tmp_path, capsys):
    base = _results(tmp_path / "base.json", schedules=("1F1B",))
    doc = json.loads(base.read_text())
    case = doc["cases"][0]
    case["metrics"].update(step_time_median_ns=0, step_time_min_ns=0, step_time_max_ns=0)
    case["step_end_ns"] = list(case["step_start_ns"])  # steps of 0 ns, as the metrics say
    start_of = dict(zip(case["steps"], case["step_start_ns"]))  # and jobs of 0 ns, within their steps
    case["jobs"]["start_ns"] = case["jobs"]["end_ns"] = [start_of[s] for s in case["jobs"]["step"]]
    for key in ("per_step", "stats"):  # figures of the steps as they were
        del case["metrics"][key]
    for key in ("decomposition", "critical_path"):
        case.pop(key, None)
    base.write_text(json.dumps(doc))
    new = _results(tmp_path / "new.json", schedules=("1F1B",))
    assert main(["compare", str(base), str(new)]) == 0
    captured = capsys.readouterr()
    assert "+0.00%" not in captured.out and "     n/a" in captured.out
    assert captured.err == (f"warning: cases/x.py::test[1F1B]: the median step time in {base} is 0 ns, so its change cannot be "
                            "computed (shown as n/a; a step_time gate fails it if the new step time is above 0)\n")
    assert main(["compare", str(base), str(new), "--fail", "step_time:5"]) == 1  # grew from 0: past any relative limit
    assert "FAIL step_time" in capsys.readouterr().out
    assert main(["compare", str(base), str(base), "--fail", "step_time:5"]) == 0  # 0 to 0: no growth


@pytest.mark.parametrize("text", ["step-time:5", "Step_Time:5", "bubble ratio:2"])
def test_a_misspelt_metric_is_named_an_unknown_metric(text):
    with pytest.raises(ConfigError) as info:
        parse_threshold(text)
    assert str(info.value) == f"--fail {text!r}: unknown metric {text.split(':')[0]!r}; valid: step_time, bubble"


def test_a_limit_with_a_plus_sign_reads_as_shown_in_the_gates_line():
    assert parse_threshold("bubble:+2").describe() == "bubble +2pp"
    with pytest.raises(ConfigError, match="not a plain decimal number"):
        parse_threshold("bubble:++2")


def test_import_paddle_help_names_the_default_folder_as_it_is_used(monkeypatch):
    from harness.cli import build_parser

    monkeypatch.setenv("COLUMNS", "200")  # argparse wraps at the terminal width, also inside "reports-paddle"

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    text = " ".join(sub.choices["import-paddle"].format_help().split())
    assert "default: reports-paddle in the current folder" in text


def test_import_makes_your_builders_available_to_the_commands(tmp_path, capsys, monkeypatch):
    from harness.schedule import registry

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))  # the registration does not outlive the test
    monkeypatch.setattr(registry, "_ALIASES", dict(registry._ALIASES))
    mine = tmp_path / "my_builders_for_cli.py"
    mine.write_text(
        "from harness.schedule import build_schedule, register\n\n"
        "@register('MyGPipe')\n"
        "def my_gpipe(p, m, optimizer: bool = False):\n"
        "    '''GPipe under my own name.'''\n"
        "    return build_schedule('FThenB', p, m, optimizer=optimizer)\n"
    )
    assert main(["--import", str(mine), "schedules"]) == 0
    assert "MyGPipe\n    GPipe under my own name.\n    sizes: p, m; options: optimizer=False\n" in capsys.readouterr().out
    assert main(["--import", str(mine), "show", "mygpipe", "-p", "2", "-m", "2"]) == 0
    assert "step time 9.000 ms" in capsys.readouterr().out
    broken = tmp_path / "broken_for_cli.py"
    broken.write_text("x = 1\nraise RuntimeError('boom')\n")
    assert main(["--import", str(broken), "schedules"]) == 2
    assert capsys.readouterr().err == f"error: --import {broken}: importing it raised RuntimeError: boom ({broken}:2)\n"
    monkeypatch.chdir(tmp_path)
    assert main(["--import", "no_such_module_here", "schedules"]) == 2
    assert capsys.readouterr().err == "error: --import no_such_module_here: No module named 'no_such_module_here'\n"
    assert main(["--import", "missing.py", "schedules"]) == 2
    assert capsys.readouterr().err == "error: --import missing.py: no such file\n"


def test_imported_files_of_one_name_stay_apart_and_cannot_shadow_the_package(tmp_path, capsys, monkeypatch):
    from harness.schedule import registry

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_ALIASES", dict(registry._ALIASES))
    source = ("from harness.schedule import build_schedule, register\n\n@register('Dup')\ndef b(p, m):\n"
              "    '''from {0}'''\n    return build_schedule('{1}', p, m)\n")
    for folder, schedule in (("c", "FThenB"), ("d", "1F1B")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "mb.py").write_text(source.format(folder, schedule))
    (tmp_path / "harness.py").write_text(source.format("harness.py", "FThenB").replace("'Dup'", "'Mine'"))
    c, d = tmp_path / "c" / "mb.py", tmp_path / "d" / "mb.py"
    assert main(["--import", str(c), "--import", str(d), "schedules"]) == 2
    assert capsys.readouterr().err == (f"error: cannot register {d}:b as schedule 'Dup': the name 'Dup' is taken by 'Dup' ({c}:b); "
                                       "register it under another name\n")
    assert main(["--import", str(tmp_path / "harness.py"), "schedules"]) == 0  # a file named like the package is no problem
    assert "Mine\n    from harness.py\n" in capsys.readouterr().out


def test_a_user_builder_that_raises_is_one_error_line(tmp_path, capsys, monkeypatch):
    from harness.schedule import registry

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_ALIASES", dict(registry._ALIASES))
    mine = tmp_path / "raising.py"
    mine.write_text("from harness.schedule import register\n\n@register('Boom')\ndef boom(p, m):\n    raise ValueError('boom')\n")
    assert main(["--import", str(mine), "show", "Boom", "-p", "2", "-m", "2"]) == 2
    assert capsys.readouterr().err == (f"error: case 'Boom p=2 m=2': the builder of schedule 'Boom' ({mine}:boom) raised "
                                       f"ValueError: boom at {mine}:5\n")


def test_report_beside_its_file_keeps_the_folders_own_results(tmp_path, capsys):
    base = _results(tmp_path / "results.json")
    two = tmp_path / "r2.json"
    two.write_text(base.read_text())
    assert main(["report", str(two), "-q"]) == 2
    assert capsys.readouterr().err == (f"error: {tmp_path} already holds another results file ({base}), which rendering r2.json beside "
                                       "it would replace; give --out DIR for r2.json's report\n")
    assert main(["report", str(base), "-q"]) == 0  # its own folder: re-rendered in place
    assert main(["report", str(two), "--out", str(tmp_path), "-q"]) == 0  # asked for: replaced
    assert main(["report", str(two), "--out", "", "-q"]) == 2
    assert capsys.readouterr().err.endswith("error: --out is empty; give a folder, or leave it out to render beside the results file\n")


@pytest.mark.parametrize("command", [["export-paddle", "r.json"], ["import-paddle", "logs"]])
def test_an_empty_out_is_refused(command, capsys):
    assert main([*command, "--out", ""]) == 2
    assert capsys.readouterr().err == "error: --out is empty; give a folder\n"


def test_show_shortens_per_rank_figures_of_many_ranks(capsys):
    assert main(["show", "1F1B", "-p", "40", "-m", "8"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("peak in-flight per rank: "))
    # 1F1B holds p - r micro-batches on rank r, capped at m = 8
    assert line.startswith("peak in-flight per rank: 8, 8, 8, 8, 8, 8, 8, 8, … (28 more) …, 4, 3, 2, 1")


def test_export_paddle_needs_only_the_case_it_exports_whole(tmp_path, capsys):
    # one damaged case refused the whole file, also for --case naming an intact one
    res = _results(tmp_path / "r.json")
    doc = json.loads(res.read_text())
    doc["cases"][0]["jobs"]["kind"][3] = "Q"
    res.write_text(json.dumps(doc))
    assert main(["export-paddle", str(res), "--case", "cases/x.py::test[1F1B]", "--out", str(tmp_path / "ok")]) == 0
    assert capsys.readouterr().out == f"4 worker log(s) in {tmp_path / 'ok'}\n"  # p = 4
    assert main(["export-paddle", str(res), "--case", "cases/x.py::test[FThenB]", "--out", str(tmp_path / "bad")]) == 2
    assert capsys.readouterr().err.startswith(f"error: {res}: case 'cases/x.py::test[FThenB]' (cases[0]): jobs.kind[3] is 'Q' (str)")
    assert not (tmp_path / "bad").exists()
    assert main(["export-paddle", str(res), "--out", str(tmp_path / "which")]) == 2  # two cases, one of them damaged
    assert capsys.readouterr().err == (f"error: {res} holds 2 cases; pick one with --case ID: cases/x.py::test[1F1B], "
                                       "cases/x.py::test[FThenB]\n")
