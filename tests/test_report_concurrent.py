"""Two runs publishing into one report folder (issue 26 item 8): each says, in its last line, whose report won.

End to end with two pytest processes on one ``--report-dir``: run A starts and waits inside its case; run B
runs and publishes while A still runs, and its last line says A's report will replace it; then A publishes,
and its last line says it replaced the report B published while A ran. In-process checks of the marker and
the tickets follow (harness.report.concurrent).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from harness.case import PipelineCase
from harness.report.concurrent import announce, record_publish, still_ours
from harness.report.render import write_report
from harness.report.results import case_to_dict, results_document
from harness.runner import run_case

SLOW = """
import time
from pathlib import Path
from harness import PipelineCase

def test_slow(pipeline):
    flag = Path(__file__).with_name("go")
    Path(__file__).with_name("a-running").write_text("")
    deadline = time.time() + 120
    while not flag.exists() and time.time() < deadline:
        time.sleep(0.05)
    pipeline(PipelineCase("1F1B", stages=2, microbatches=2))
"""

FAST = """
from harness import PipelineCase

def test_fast(pipeline):
    pipeline(PipelineCase("ZB-H1", stages=2, microbatches=2))
"""


def _pytest(folder: Path, test_dir: Path) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--profile-jobs", "--backend=sim",
            "--report-dir", str(folder), str(test_dir)]
    return subprocess.Popen(argv, cwd=test_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "COLUMNS": "200"})


def _last_line(out: str) -> str:
    """The run's last line, its wrapped continuations (indented) joined back."""
    lines = [line for line in out.splitlines() if line.strip()]
    k = len(lines) - 1
    while k > 0 and lines[k].startswith("  "):
        k -= 1
    return " ".join([lines[k], *(line.strip() for line in lines[k + 1:])])


def test_two_pytest_runs_into_one_folder_each_say_whose_report_won(tmp_path: Path) -> None:
    folder = tmp_path / "rep"
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_dir.mkdir()
    b_dir.mkdir()
    (a_dir / "test_a.py").write_text(SLOW)
    (b_dir / "test_b.py").write_text(FAST)
    a = _pytest(folder, a_dir)
    try:
        deadline = time.time() + 60
        while not (a_dir / "a-running").exists() and time.time() < deadline:  # A has announced itself and runs its case
            time.sleep(0.05)
        b_out, _ = _pytest(folder, b_dir).communicate(timeout=120)
        assert "test_fast" in (folder / "results.json").read_text()
    finally:
        (a_dir / "go").write_text("")
    a_out, _ = a.communicate(timeout=120)
    assert a.returncode == 0, a_out
    b_last, a_last = _last_line(b_out), _last_line(a_out)
    assert b_last.startswith(f"pipeline-harness: another run, process {a.pid}, started "), b_out
    assert b_last.endswith(f" ago, writes into {folder} too: when it finishes, its report replaces this one"), b_out
    assert a_last.startswith("pipeline-harness: this run replaced the report process "), a_out
    assert a_last.endswith(" earlier, while this one ran: its cases are no longer there"), a_out
    assert f"published into {folder} " in a_last
    text = (folder / "results.json").read_text()
    assert "test_slow" in text and "test_fast" not in text  # A published last: the folder holds A's report, whole
    assert not (folder / ".runs").exists()  # both runs withdrew their announcements


def test_the_marker_and_the_tickets(tmp_path: Path) -> None:
    doc = results_document([case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=2), "sim", range(0, 1)))])
    folder = tmp_path / "rep"
    early = write_report(folder, doc)  # a render long before: replacing it is not worth a word
    started = time.time()
    first = write_report(folder, doc, run_token="a" * 16, run_started=started)
    assert (early.replaced, first.replaced) == (None, None)
    assert first.still_ours() is None
    second = write_report(folder, doc, run_token="b" * 16, run_started=started)
    assert second.replaced is not None and second.replaced.startswith(f"this run replaced the report process {os.getpid()} published")
    assert first.still_ours().startswith(f"{folder} no longer holds this run's report: process {os.getpid()} published its own there ")
    assert second.still_ours() is None
    ticket = announce(folder, token="c" * 16)
    assert second.still_ours() is not None and "another run, process" in second.still_ours()
    ticket.withdraw()
    assert second.still_ours() is None and not (folder / ".runs").exists()
    # a ticket left by a process that is gone is no live run, and is removed
    runs = folder / ".runs"
    runs.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout.strip()
    (runs / f"{dead}-x.json").write_text(json.dumps({"token": "x", "pid": int(dead), "host": socket.gethostname(), "started": time.time()}))
    assert still_ours(folder, second.token) is None and not list(runs.iterdir())
    assert record_publish(tmp_path / "not-there", "t", 0.0) is None  # best effort: never raises
