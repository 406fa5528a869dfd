"""Staging folders of killed renders: named after their owner, removed by the next
render into the same folder, never while their render lives; SIGTERM while a report
is rendered or published removes the staging folder first and never mixes two runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.case import PipelineCase
from harness.report import render
from harness.report.results import case_to_dict, results_document
from harness.runner import run_case

pytestmark = pytest.mark.skipif(os.name != "posix", reason="process liveness and signals as on POSIX")

ROOT = Path(__file__).resolve().parents[1]


def _doc(microbatches: int) -> dict:
    return results_document([case_to_dict(run_case(PipelineCase("1F1B", 2, microbatches, name="c"), "sim", range(1, 4), case_id="c"))])


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _stage(out: Path, name: str, age_s: float = 0.0) -> Path:
    stage = out / name
    (stage / "traces").mkdir(parents=True)
    (stage / "traces" / "c.json").write_text("{}")
    if age_s:
        then = time.time() - age_s
        for p in (stage / "traces" / "c.json", stage / "traces", stage):
            os.utime(p, (then, then))
    return stage


def _stages(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if p.name.startswith(".render-"))


def _render_in_a_child(out: Path, microbatches: int, when: str, sig: int) -> subprocess.CompletedProcess:
    """Render a report in a new process that sends itself ``sig`` on the first publishing
    move (``when="publish"``) or on the first file written into the staging folder
    (``when="render"``)."""
    script = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from harness.case import PipelineCase
        from harness.report import render
        from harness.report.results import case_to_dict, results_document
        from harness.runner import run_case

        doc = results_document([case_to_dict(run_case(PipelineCase("1F1B", 2, {microbatches}, name="c"), "sim", range(1, 4), case_id="c"))])
        real = os.replace
        sent = []

        def replace(src, dst):
            publishing = ".render-" not in str(dst)
            if publishing == ({when!r} == "publish") and not sent:
                sent.append(1)
                if {when!r} == "publish":
                    real(src, dst)  # one file of the new report is in place, the others are not yet
                os.kill(os.getpid(), {int(sig)})
                if {when!r} == "publish":
                    return
            real(src, dst)

        render.os.replace = replace
        render.write_report(Path({str(out)!r}), doc)
        print("returned")
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)


def test_a_staging_folder_is_named_after_its_host_and_process(tmp_path, monkeypatch):
    seen = []
    real = os.replace

    def replace(src, dst):
        seen.append(Path(src).relative_to(tmp_path).parts[0])
        real(src, dst)

    monkeypatch.setattr(render.os, "replace", replace)
    render.write_report(tmp_path, _doc(2))
    stage = seen[-1]
    m = render._STAGE_NAME.fullmatch(stage)
    assert m is not None, stage
    assert (m.group("host"), int(m.group("pid"))) == (render._host_tag(), os.getpid())
    assert _stages(tmp_path) == [] and render._live_stages == set()


def test_the_next_render_removes_stale_staging_folders_and_only_those(tmp_path):
    host, dead = render._host_tag(), _dead_pid()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _stage(tmp_path, f".render-{host}-{dead}-killed1")  # its process is gone
        _stage(tmp_path, f".render-{host}-{os.getpid()}-earlier1")  # our pid, but no render of ours uses it
        _stage(tmp_path, f".render-{host}-{10**30}-huge1")  # no process has that pid
        _stage(tmp_path, f".render-{host}-{live.pid}-running1")  # a live render's: kept
        _stage(tmp_path, f".render-elsewhere-{dead}-fresh1")  # another host's, recently changed: kept
        _stage(tmp_path, f".render-elsewhere-{dead}-old1", age_s=2 * render.STALE_UNOWNED_AFTER_S)
        _stage(tmp_path, ".render-legacy1", age_s=2 * render.STALE_UNOWNED_AFTER_S)  # named before owners were
        _stage(tmp_path, ".render-legacy2")
        (tmp_path / ".render-not-a-folder").write_text("x")
        messages: list[str] = []
        render.write_report(tmp_path, _doc(2), progress=messages.append)
        assert _stages(tmp_path) == sorted([f".render-{host}-{live.pid}-running1", f".render-elsewhere-{dead}-fresh1",
                                            ".render-legacy2", ".render-not-a-folder"])
        removed = sorted(m for m in messages if m.startswith("removed "))
        assert removed == sorted([
            f"removed {tmp_path / f'.render-{host}-{dead}-killed1'}: a staging folder of an interrupted render "
            f"(its render, process {dead}, is gone)",
            f"removed {tmp_path / f'.render-{host}-{os.getpid()}-earlier1'}: a staging folder of an interrupted render "
            f"(left by an earlier process {os.getpid()})",
            f"removed {tmp_path / f'.render-{host}-{10**30}-huge1'}: a staging folder of an interrupted render "
            f"(its render, process {10**30}, is gone)",
            f"removed {tmp_path / f'.render-elsewhere-{dead}-old1'}: a staging folder of an interrupted render "
            "(left by a render on host elsewhere, unchanged for 48 h)",
            f"removed {tmp_path / '.render-legacy1'}: a staging folder of an interrupted render "
            "(left by an earlier version's render, unchanged for 48 h)",
        ])
        assert json.loads((tmp_path / "results.json").read_text())["cases"][0]["schedule"]["m"] == 2
    finally:
        live.kill()
        live.wait()


def test_a_concurrent_render_of_this_process_keeps_its_staging_folder(tmp_path, monkeypatch):
    # While one render of this process is publishing, a second one into the same folder starts (nested here,
    # to be deterministic; a thread is handled the same way: the first one's folder is in render._live_stages).
    real = os.replace
    seen: list[list[str]] = []

    def replace(src, dst):
        if ".render-" not in str(dst) and not seen:
            seen.append(_stages(tmp_path))
            messages: list[str] = []
            render.write_report(tmp_path, _doc(2), traces=False, hta=False, write_results=False, prune=False,
                                progress=messages.append)
            seen.append(_stages(tmp_path))
            assert not [m for m in messages if m.startswith("removed ")]
        real(src, dst)

    monkeypatch.setattr(render.os, "replace", replace)
    render.write_report(tmp_path, _doc(3))
    assert len(seen[0]) == 1 and seen[1] == seen[0]  # the first render's staging folder survived the second
    assert _stages(tmp_path) == []
    assert json.loads((tmp_path / "results.json").read_text())["cases"][0]["schedule"]["m"] == 3


def test_a_render_killed_while_publishing_leaves_a_staging_folder_the_next_render_removes(tmp_path):
    render.write_report(tmp_path, _doc(2))
    proc = _render_in_a_child(tmp_path, 3, "publish", signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL and "returned" not in proc.stdout
    left = _stages(tmp_path)
    assert len(left) == 1 and render._STAGE_NAME.fullmatch(left[0])
    render.write_report(tmp_path, _doc(4))
    assert _stages(tmp_path) == []
    assert json.loads((tmp_path / "results.json").read_text())["cases"][0]["schedule"]["m"] == 4


def test_sigterm_while_publishing_completes_the_report_then_terminates(tmp_path):
    render.write_report(tmp_path, _doc(2))
    proc = _render_in_a_child(tmp_path, 3, "publish", signal.SIGTERM)
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    assert "returned" not in proc.stdout and "Traceback" not in proc.stderr
    assert _stages(tmp_path) == []
    # One whole run: the new one, every file of it.
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["cases"][0]["schedule"]["m"] == 3
    trace = json.loads((tmp_path / "traces" / "c.json").read_text())
    assert sum(1 for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "F") == 2 * 3 * 3  # p*m*steps
    again = render.write_report(tmp_path / "again", doc)  # the page of the published results.json ...
    assert (tmp_path / "index.html").read_bytes() == again.index.read_bytes()  # ... is the published page


def test_sigterm_while_rendering_removes_the_staging_folder_and_keeps_the_previous_report(tmp_path):
    render.write_report(tmp_path, _doc(2))
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    proc = _render_in_a_child(tmp_path, 3, "render", signal.SIGTERM)
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    assert "returned" not in proc.stdout and "Traceback" not in proc.stderr
    assert _stages(tmp_path) == []
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_sigterm_while_rendering_into_a_new_folder_leaves_no_folder(tmp_path):
    out = tmp_path / "new" / "report"
    proc = _render_in_a_child(out, 3, "render", signal.SIGTERM)
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    assert not (tmp_path / "new").exists()


def test_a_handler_already_installed_for_sigterm_is_left_in_charge(tmp_path, monkeypatch):
    calls: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: calls.append(signum))
    try:
        real = os.replace

        def replace(src, dst):
            if ".render-" in str(dst) and not calls:
                os.kill(os.getpid(), signal.SIGTERM)
            real(src, dst)

        monkeypatch.setattr(render.os, "replace", replace)
        render.write_report(tmp_path, _doc(3))  # the handler only records: the render goes on
        assert calls == [signal.SIGTERM]
        assert json.loads((tmp_path / "results.json").read_text())["cases"][0]["schedule"]["m"] == 3
        assert _stages(tmp_path) == []
    finally:
        signal.signal(signal.SIGTERM, previous)
