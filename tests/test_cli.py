"""The command line: every command, exit statuses, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.case import PipelineCase
from harness.cli import main, parse_threshold
from harness.cost import FixedCost
from harness.errors import ConfigError
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


def test_schedules_and_show(capsys):
    assert main(["schedules"]) == 0
    out = capsys.readouterr().out
    assert "1F1B (also:" in out and "Interleaved1F1B" in out and "sizes: p, m, v" in out
    assert main(["show", "1F1B", "-p", "4", "-m", "8"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["step", "rank", "0", "rank", "1", "rank", "2", "rank", "3"]
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
