"""A full disk while a report is written (issue 26 item 6): under pytest and under each command that writes one.

The "disk" is the process's file-size limit (``ulimit -f``, ``RLIMIT_FSIZE``), which fails a write with
``EFBIG`` as a full device fails it with ``ENOSPC``; both take the same path (the ``ENOSPC`` wording is
checked on its own below). Each run: exit status not 0, one error line naming the report folder and the
file, no traceback, and the report written before it byte for byte as it was.
"""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.case import PipelineCase
from harness.errors import DiskFullError
from harness.report.results import case_to_dict, results_document
from harness.runner import run_case

resource = pytest.importorskip("resource", reason="the file-size limit needs the resource module (POSIX)")

TORCH = Path(__file__).parent / "data" / "torch_traces" / "ScheduleInterleaved1F1B_2rank_m4"
LIMIT = 24 * 1024  # bytes: every report here has a file larger than this (its index.html, about 80 KB)

CASES = """
import pytest
from harness import PipelineCase

@pytest.mark.parametrize("s", ["1F1B", "ZB-H1"])
def test_zoo(pipeline, s):
    pipeline(PipelineCase(s, stages=4, microbatches=8))
"""


def _run(argv: list[str], cwd: Path, limit: int | None) -> subprocess.CompletedProcess[str]:
    def limited() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "COLUMNS": "120"}
    return subprocess.run([sys.executable, *argv], cwd=cwd, capture_output=True, text=True, preexec_fn=limited, env=env, timeout=300)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _check_refused(result: subprocess.CompletedProcess[str], folder: Path, before: dict[str, bytes], on_disk: Path | None = None) -> str:
    text = (result.stdout + result.stderr).replace("\n  ", " ")  # pytest wraps its lines at its width: one line again
    assert result.returncode != 0, text
    assert "Traceback" not in text, text
    line = next(x for x in text.splitlines() if "cannot write into" in x)
    assert f"cannot write into {folder}: " in line, line
    assert "is larger than this process may write (its file-size limit, ulimit -f, is 24,576 bytes)" in line, line
    assert f"; nothing of this run was published, and the report already in {folder} is unchanged" in line, line
    assert _snapshot(on_disk or folder) == before  # byte for byte; no staging folder left behind
    return line


FAILING = """
def test_fails():
    assert 1 == 2, "VISIBLE_FAILURE_MARK"
"""


@pytest.mark.parametrize("failing", [False, True], ids=["tests-pass", "a-test-fails"])
def test_full_disk_under_pytest(tmp_path: Path, failing: bool) -> None:
    (tmp_path / "test_cases.py").write_text(CASES)
    argv = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark", "--profile-jobs", "--backend=sim", "--report-dir", "rep"]
    first = _run(argv, tmp_path, None)
    assert first.returncode == 0, first.stdout + first.stderr
    folder = tmp_path / "rep"
    before = _snapshot(folder)
    assert "index.html" in before and len(before["index.html"]) > LIMIT
    if failing:
        (tmp_path / "test_cases.py").write_text(CASES + FAILING)
    result = _run(argv, tmp_path, LIMIT)
    line = _check_refused(result, Path("rep"), before, folder)
    assert line.startswith("ERROR: could not write the report: cannot write into rep: rep/")
    # pytest's own summary is all there: the failure with its message, the counts; the error is the last line
    lines = result.stdout.rstrip().splitlines()
    counts = next(k for k, x in enumerate(lines) if re.fullmatch(r"(1 failed, )?2 passed in [0-9.]+s", x))
    assert lines[counts].startswith("1 failed, 2 passed in " if failing else "2 passed in "), lines[counts]
    assert lines[counts + 1].startswith("ERROR: could not write the report: ") and all(x.startswith("  ") for x in lines[counts + 2:])
    assert ("VISIBLE_FAILURE_MARK" in result.stdout) == failing
    assert "no report of this run was written, and reports in rep/ were left as they were" in result.stdout.replace("\n  ", " ")
    assert result.returncode == (1 if failing else 4)  # a failed test keeps its status; passing tests with no report: 4


@pytest.fixture(scope="module")
def results_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cases = [case_to_dict(run_case(PipelineCase(s, stages=4, microbatches=8), "sim", range(0, 1))) for s in ("1F1B", "ZB-H1")]
    path = tmp_path_factory.mktemp("results") / "results.json"
    path.write_text(json.dumps(results_document(cases)))
    return path


def _commands(results: Path, tmp: Path) -> dict[str, list[str]]:
    logs = tmp / "logs"
    if not logs.exists():
        done = _run(["-m", "harness", "export-paddle", str(results), "--case", "ZB-H1 p=4 m=8", "--out", str(logs)], tmp, None)
        assert done.returncode == 0, done.stderr
    return {
        "run": ["-m", "harness", "run", "1F1B", "-p", "4", "-m", "8", "--backend", "sim", "--out"],
        "report": ["-m", "harness", "report", str(results), "--out"],
        "import-paddle": ["-m", "harness", "import-paddle", str(logs), "--out"],
        "import-torch": ["-m", "harness", "import-torch", str(TORCH), "--out"],
    }


@pytest.mark.parametrize("command", ["run", "report", "import-paddle", "import-torch"])
def test_full_disk_under_each_command(command: str, results_file: Path, tmp_path: Path) -> None:
    argv = _commands(results_file, tmp_path)[command]
    folder = tmp_path / "out"
    first = _run([*argv, str(folder)], tmp_path, None)
    assert first.returncode == 0, first.stderr
    before = _snapshot(folder)
    line = _check_refused(_run([*argv, str(folder)], tmp_path, LIMIT), folder, before)
    assert line.startswith(f"error: cannot write into {folder}: {folder}/"), line  # the file, as it would be named there


def test_a_full_device_names_the_file_the_bytes_and_the_room_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # ENOSPC (a full device) as the render meets it while writing results.json: the bytes it needed, what is free.
    from harness.report import atomic, render

    doc = results_document([case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=2), "sim", range(0, 1)))])
    render.write_report(tmp_path / "rep", doc)
    before = _snapshot(tmp_path / "rep")
    real = atomic.atomic_binary

    class Full:
        def __init__(self, path: Path) -> None:
            self.inner = real(path)
            self.path = path

        def __enter__(self):
            fh = self.inner.__enter__()
            if self.path.name == "results.json":
                exc = OSError(errno.ENOSPC, "No space left on device")
                self.inner.__exit__(OSError, exc, None)
                raise exc
            return fh

        def __exit__(self, *a):
            return self.inner.__exit__(*a)

    monkeypatch.setattr(atomic, "atomic_binary", Full)
    with pytest.raises(DiskFullError) as info:
        render.write_report(tmp_path / "rep", doc)
    size = len(render.dumps_document(doc))
    message = str(info.value)
    assert message.startswith(f"cannot write into {tmp_path / 'rep'}: no space left on its device writing "
                              f"{tmp_path / 'rep' / 'results.json'} ({size:,} bytes); ")
    assert " bytes free; nothing of this run was published" in message
    assert (info.value.folder, info.value.path, info.value.needed_bytes) == (str(tmp_path / "rep"), str(tmp_path / "rep" / "results.json"), size)
    assert _snapshot(tmp_path / "rep") == before
