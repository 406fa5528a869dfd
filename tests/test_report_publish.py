"""Publishing a rendered report: one render at a time per folder (a file lock),
files moved in dependency order (traces, HTA, results.json, the page last, then
pruning), and signals the process ignores left ignored while publishing."""

from __future__ import annotations

import json
import os
import re
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

pytestmark = pytest.mark.skipif(os.name != "posix", reason="signals and file locks as on POSIX")

ROOT = Path(__file__).resolve().parents[1]
_LINK = re.compile(r'(?:traces|hta)/[^"\\<>\s]*')


def _doc(microbatches: int, ids: tuple[str, ...] = ("c",)) -> dict:
    return results_document([case_to_dict(run_case(PipelineCase("1F1B", 2, microbatches, name=i), "sim", range(1, 4), case_id=i)) for i in ids])


def _script(body: str) -> str:
    """A child's script: :data:`_PRELUDE` (imports, ``doc(m, ids)``), then ``body``."""
    return textwrap.dedent(_PRELUDE) + textwrap.dedent(body)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def _child(body: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _script(body)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())


_PRELUDE = """
    import os, signal, sys, time
    from pathlib import Path
    from harness.case import PipelineCase
    from harness.report import render
    from harness.report.results import case_to_dict, results_document
    from harness.runner import run_case

    def doc(m, ids):
        return results_document([case_to_dict(run_case(PipelineCase("1F1B", 2, m, name=i), "sim", range(1, 4), case_id=i)) for i in ids])
"""


def _wait_for(path: Path, text: str = "", timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            return True
        time.sleep(0.02)
    return False


def test_two_renders_into_one_folder_at_once_publish_one_after_the_other(tmp_path):
    out, flags = tmp_path / "report", tmp_path / "flags"
    flags.mkdir()
    # A publishes two cases, pausing after its first move until told to go on (it holds the lock meanwhile) ...
    first = _child(f"""
        real = os.replace
        def replace(src, dst):
            real(src, dst)
            if ".render-" not in str(dst) and not Path({str(flags / "a-publishing")!r}).exists():
                Path({str(flags / "a-publishing")!r}).write_text("1")
                while not Path({str(flags / "go")!r}).exists():
                    time.sleep(0.01)
        render.os.replace = replace
        render.write_report(Path({str(out)!r}), doc(2, ("c", "only_a")))
        print("a done")
    """)
    try:
        assert _wait_for(flags / "a-publishing"), first.communicate(timeout=5)
        # ... while B renders one case into the same folder: it must wait, say so, then publish its report whole.
        second = _child(f"""
            log = Path({str(flags / "b-progress")!r})
            def progress(msg):
                with log.open("a") as fh:
                    fh.write(msg + "\\n")
            render.write_report(Path({str(out)!r}), doc(3, ("c",)), progress=progress)
            print("b done")
        """)
        try:
            waited = _wait_for(flags / "b-progress", "waiting: another render is publishing into", timeout_s=30)
        finally:
            (flags / "go").write_text("1")
            b_out, b_err = second.communicate(timeout=120)
        a_out, a_err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    assert (first.returncode, a_out) == (0, "a done\n"), a_err
    assert (second.returncode, b_out) == (0, "b done\n"), b_err
    assert waited
    assert (flags / "b-progress").read_text().count("waiting: ") == 1
    assert f"lock {out.resolve() / '.publish.lock'}" in (flags / "b-progress").read_text()
    # The folder holds B's report, every file of it, and nothing of A's.
    doc = json.loads((out / "results.json").read_text())
    assert [(c["id"], c["schedule"]["m"]) for c in doc["cases"]] == [("c", 3)]
    assert sorted(p.name for p in (out / "traces").iterdir()) == ["c.json"]
    trace = json.loads((out / "traces" / "c.json").read_text())
    assert sum(1 for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "F") == 2 * 3 * 3  # p*m*steps
    assert sorted(str(p.relative_to(out)) for p in (out / "hta").rglob("*.json")) == ["hta/c/rank0.json", "hta/c/rank1.json"]
    again = render.write_report(tmp_path / "again", doc)
    assert (out / "index.html").read_bytes() == again.index.read_bytes()
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == [".publish.lock", ".published.json"]  # no staging folder left


def test_threads_of_one_process_publish_one_after_the_other(tmp_path, monkeypatch):
    import threading

    real = os.replace
    inside: list[int] = []
    overlapped: list[bool] = []

    def replace(src, dst):
        if ".render-" not in str(dst):
            inside.append(1)
            overlapped.append(len(inside) > 1)
            time.sleep(0.002)
            real(src, dst)
            inside.pop()
        else:
            real(src, dst)

    monkeypatch.setattr(render.os, "replace", replace)
    docs = [_doc(2, ("c", "x")), _doc(3, ("c", "y"))]
    errors: list[BaseException] = []

    def run(d: dict) -> None:
        try:
            render.write_report(tmp_path, d)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(d,)) for d in docs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == [] and not any(overlapped)
    doc = json.loads((tmp_path / "results.json").read_text())
    last = doc["cases"][1]["id"]  # whichever published last owns the folder, whole
    assert sorted(p.name for p in (tmp_path / "traces").iterdir()) == sorted(["c.json", f"{last}.json"])
    assert sorted(p.name for p in (tmp_path / "hta").iterdir()) == sorted(["c", last])


def test_files_are_published_traces_first_the_page_last_then_pruned(tmp_path, monkeypatch):
    render.write_report(tmp_path, _doc(2, ("c", "old")))
    events: list[str] = []
    real_replace, real_prune = os.replace, render._prune

    def replace(src, dst):
        if ".render-" not in str(dst):
            events.append(str(Path(dst).relative_to(tmp_path)))
        real_replace(src, dst)

    def prune(out_dir, keep):
        events.append("prune")
        real_prune(out_dir, keep)

    monkeypatch.setattr(render.os, "replace", replace)
    monkeypatch.setattr(render, "_prune", prune)
    render.write_report(tmp_path, _doc(3, ("c", "new")))
    assert events == [
        "traces/c.json", "traces/new.json",
        "hta/c/rank0.json", "hta/c/rank1.json", "hta/new/rank0.json", "hta/new/rank1.json",
        "results.json", "index.html", "prune",
    ]
    assert not (tmp_path / "traces" / "old.json").exists() and not (tmp_path / "hta" / "old").exists()


class _Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs in the render (no pruning)."""


@pytest.mark.parametrize("moved", range(9))
def test_a_render_killed_after_any_move_leaves_a_page_whose_links_all_resolve(tmp_path, monkeypatch, moved):
    # The old report has cases c and old; the new one c and new: 2 traces, 4 HTA files, results.json, index.html
    # are moved (8 moves), then the old case's files pruned. Killed after `moved` moves (8: before pruning).
    render.write_report(tmp_path, _doc(2, ("c", "old")))
    real = os.replace
    count = [0]

    def replace(src, dst):
        if ".render-" not in str(dst):
            if count[0] == moved:
                raise _Killed
            count[0] += 1
        real(src, dst)

    def prune(out_dir, keep):
        raise _Killed

    monkeypatch.setattr(render.os, "replace", replace)
    monkeypatch.setattr(render, "_prune", prune)
    with pytest.raises(_Killed):
        render.write_report(tmp_path, _doc(3, ("c", "new")))
    links = set(_LINK.findall((tmp_path / "index.html").read_text()))
    assert all((tmp_path / link).exists() for link in links), sorted(links)
    # The page is the last file moved, results.json the one before it.
    assert links == ({"traces/c.json", "traces/new.json", "hta/c/", "hta/new/"} if moved == 8
                     else {"traces/c.json", "traces/old.json", "hta/c/", "hta/old/"})
    results = json.loads((tmp_path / "results.json").read_text())
    assert [c["id"] for c in results["cases"]] == (["c", "new"] if moved >= 7 else ["c", "old"])
    # New traces already in place are not linked by the old page; old ones stay until pruned.
    assert (tmp_path / "traces" / "new.json").exists() == (moved >= 2)
    assert (tmp_path / "traces" / "old.json").exists()


def test_signals_the_process_ignores_stay_ignored_while_publishing(tmp_path):
    # As for `python -m harness report ... &` in a non-interactive shell: SIGINT is SIG_IGN before Python
    # starts (so Python installs no handler for it); SIGTERM ignored by the program itself.
    render.write_report(tmp_path, _doc(2))
    script = _script(f"""
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        real = os.replace
        seen = []
        def replace(src, dst):
            if ".render-" not in str(dst) and not seen:
                seen.append((signal.getsignal(signal.SIGINT) is signal.SIG_IGN, signal.getsignal(signal.SIGTERM) is signal.SIG_IGN))
                os.kill(os.getpid(), signal.SIGINT)
                os.kill(os.getpid(), signal.SIGTERM)
            real(src, dst)
        render.os.replace = replace
        render.write_report(Path({str(tmp_path)!r}), doc(3, ("c",)))
        print("returned", seen, signal.getsignal(signal.SIGINT) is signal.SIG_IGN, signal.getsignal(signal.SIGTERM) is signal.SIG_IGN)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=_env(), timeout=120,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    # Both signals stayed ignored while publishing (no hold installed over them) and after it.
    assert (proc.returncode, proc.stdout) == (0, "returned [(True, True)] True True\n"), proc.stderr
    assert json.loads((tmp_path / "results.json").read_text())["cases"][0]["schedule"]["m"] == 3
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".render-")]


def test_an_in_place_re_render_and_another_render_leave_one_consistent_report(tmp_path, monkeypatch):
    # `report X/results.json` (no --out) renders into the file's own folder; another render publishes into X
    # while it renders. Whichever publishes last, X's results.json and index.html must be one report's.
    import threading

    from harness import cli
    from harness.report import html

    out = tmp_path / "X"
    render.write_report(out, _doc(2, ("big", "c")))
    other = _doc(3, ("a",))
    real_render_index = html.render_index
    other_published = threading.Event()

    def render_index(*args, **kwargs):
        if threading.current_thread().name == "in-place":
            assert other_published.wait(60)  # the other render publishes while this one renders
        return real_render_index(*args, **kwargs)

    monkeypatch.setattr(html, "render_index", render_index)
    codes: list[int] = []
    in_place = threading.Thread(target=lambda: codes.append(cli.main(["report", str(out / "results.json"), "-q"])), name="in-place")
    in_place.start()
    render.write_report(out, other)
    other_published.set()
    in_place.join(60)
    assert codes == [0]
    # The in-place render published last: its whole report, results.json included, not the other's results.json.
    results = json.loads((out / "results.json").read_text())
    assert [c["id"] for c in results["cases"]] == ["big", "c"]
    again = render.write_report(tmp_path / "again", results)
    assert (out / "index.html").read_bytes() == again.index.read_bytes()
    assert sorted(p.name for p in (out / "traces").iterdir()) == ["big.json", "c.json"]


@pytest.mark.parametrize("in_the_way", ["hta", "traces", "index.html"])
def test_a_path_in_the_way_stops_the_publish_before_anything_moves(tmp_path, in_the_way):
    # A fresh user's find: with hta/ replaced by a file, the new traces were moved in, then a raw
    # NotADirectoryError left the old page beside them.
    from harness.errors import ConfigError

    out = tmp_path / "rep"
    render.write_report(out, _doc(2))
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    target = out / in_the_way
    if target.is_dir():
        import shutil

        shutil.rmtree(target)
        target.write_text("x")
        kind = "is a file where the report keeps a folder"
    else:
        target.unlink()
        target.mkdir()
        kind = "is a folder where the report writes a file"
    with pytest.raises(ConfigError, match=re.escape(f"{target} {kind}; remove or rename it (nothing of this run was written)")):
        render.write_report(out, _doc(3))
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert {k: v for k, v in after.items() if k != Path(in_the_way)} == {
        k: v for k, v in before.items() if not (k == Path(in_the_way) or Path(in_the_way) in k.parents)}
