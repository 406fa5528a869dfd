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


def _check_refused(result: subprocess.CompletedProcess[str], folder: Path, before: dict[str, bytes], on_disk: Path | None = None,
                   kept: str | None = None) -> str:
    text = (result.stdout + result.stderr).replace("\n  ", " ")  # pytest wraps its lines at its width: one line again
    assert result.returncode != 0, text
    assert "Traceback" not in text, text
    line = next(x for x in text.splitlines() if "cannot write into" in x)
    assert f"cannot write into {folder}: " in line, line
    assert "is larger than this process may write (its file-size limit, ulimit -f, is 24,576 bytes)" in line, line
    kept = kept if kept is not None else f"nothing of this run was published, and the report already in {folder} is unchanged"
    assert line.endswith(f"; {kept}"), line
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


def test_full_disk_under_merge_ranks(tmp_path: Path) -> None:
    from tests.test_run_command import _sim_parts

    parts = [str(p) for p in _sim_parts(tmp_path, 250_000_000)]
    folder = tmp_path / "merged"
    argv = ["-m", "harness", "merge-ranks", *parts, "1F1B", "-p", "2", "-m", "2", "--out", str(folder)]
    first = _run(argv, tmp_path, None)
    assert first.returncode == 0, first.stderr
    before = _snapshot(folder)
    line = _check_refused(_run(argv, tmp_path, LIMIT), folder, before)
    assert line.startswith(f"error: cannot write into {folder}: {folder}/"), line


@pytest.fixture(scope="module")
def long_case(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results file whose one case exports to worker logs past :data:`LIMIT` (1F1B p=4 m=32, 3 steps)."""
    case = case_to_dict(run_case(PipelineCase("1F1B", stages=4, microbatches=32), "sim", range(0, 3)))
    path = tmp_path_factory.mktemp("long") / "results.json"
    path.write_text(json.dumps(results_document([case])))
    return path


def test_full_disk_under_export_paddle_into_earlier_logs(long_case: Path, tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    argv = ["-m", "harness", "export-paddle", str(long_case), "--out", str(folder)]
    first = _run(argv, tmp_path, None)
    assert first.returncode == 0, first.stderr
    before = _snapshot(folder)
    assert sorted(before) == [f"workerlog.{r}" for r in range(4)] and len(before["workerlog.0"]) > LIMIT
    line = _check_refused(_run(argv, tmp_path, LIMIT), folder, before,
                          kept=f"nothing of this export was published, and {folder} is unchanged")
    # the --out folder and the log as it would be named there (never a hidden staging folder), with its exact size
    assert line.startswith(f"error: cannot write into {folder}: {folder}/workerlog.0 ({len(before['workerlog.0']):,} bytes) is larger"), line


def test_full_disk_under_export_paddle_into_a_new_folder_leaves_none(long_case: Path, tmp_path: Path) -> None:
    folder = tmp_path / "new" / "logs"
    result = _run(["-m", "harness", "export-paddle", str(long_case), "--out", str(folder)], tmp_path, LIMIT)
    line = _check_refused(result, folder, {}, on_disk=tmp_path,
                          kept=f"nothing of this export was published, and {folder}, which it had created, is removed again")
    assert line.startswith(f"error: cannot write into {folder}: {folder}/workerlog.0 ("), line
    assert not (tmp_path / "new").exists()


CHOOSE = ["-m", "harness", "choose", "--hidden-size", "1024", "--num-layers", "8", "--seq-length", "1024", "--tflops", "100",
          "-p", "2", "-m", "4", "-v", "1", "--schedules", "1F1B", "ZB-H1", "--layout", "even", "--recompute", "none",
          "--executor", "serial", "--no-progress", "--timelines", "1"]


def test_full_disk_under_choose_writes_none_of_its_outputs(tmp_path: Path) -> None:
    # --json (small: it fits) is written with the page (too large) or not at all: never a new JSON beside the old page
    folder = tmp_path / "page"
    argv = [*CHOOSE, "--json", str(tmp_path / "out" / "c.json"), "--out", str(folder)]
    first = _run(argv, tmp_path, None)
    assert first.returncode == 0, first.stderr
    before = _snapshot(tmp_path)
    assert len(before["out/c.json"]) < LIMIT < len(before["page/index.html"])
    again = [("8" if a == "4" and argv[k - 1] == "-m" else a) for k, a in enumerate(argv)]  # m=8: another JSON, were it written
    line = _check_refused(_run(again, tmp_path, LIMIT), folder, before, on_disk=tmp_path,
                          kept="nothing of this run was written (--json, --out), and the files already there are unchanged")
    assert line.startswith(f"error: cannot write into {folder}: {folder}/index.html ("), line
    # into folders that do not exist yet: none is left behind
    fresh = _run([*CHOOSE, "--json", str(tmp_path / "a" / "c.json"), "--out", str(tmp_path / "b" / "page")], tmp_path, LIMIT)
    assert fresh.returncode == 2 and "Traceback" not in fresh.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_the_full_disk_error_gives_an_hta_files_estimated_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.report import hta, render
    from harness.report.output import hta_size_estimate

    case = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=4), "sim", range(0, 1)))
    real = hta.open_output

    def full(path: Path):
        if path.name == "rank1.json":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path)

    monkeypatch.setattr(hta, "open_output", full)
    with pytest.raises(DiskFullError) as info:
        render.write_report(tmp_path / "rep", results_document([case]))
    estimate = hta_size_estimate(case, 1)
    assert estimate == 8 * 415  # rank 1's 8 jobs (4 F, 4 B), 415 bytes each
    assert info.value.path.startswith(str(tmp_path / "rep" / "hta")) and info.value.path.endswith("/rank1.json")
    assert info.value.needed_bytes == estimate
    assert f"writing {tmp_path / 'rep' / 'hta'}" in str(info.value) and f"rank1.json (about {estimate:,} bytes)" in str(info.value)
    assert not (tmp_path / "rep").exists()  # the folder it created, removed again
