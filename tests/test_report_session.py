"""A results file's ``session``: ``python -m harness report`` refuses a damaged one (naming the file and
the field) and leaves the folder's report as it was."""

from __future__ import annotations

import json

import pytest

from harness.case import PipelineCase
from harness.cli import main
from harness.report.render import write_report
from harness.report.results import case_to_dict, results_document
from harness.report.session_fields import session_problem
from harness.runner import run_case

LOST = [{"worker": "gw1", "error": "went down: node down: Not properly terminated", "tests": ["cases/t.py::test[1F1B]"]}]


@pytest.fixture
def folder(tmp_path):
    """A report folder written as the pytest plugin writes one: its session names a lost worker."""
    case = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=4), "sim", range(0, 2), case_id="c/1F1B"))
    doc = results_document([case], {"backend": "sim", "backend_reason": "requested", "workers_lost": LOST})
    out = tmp_path / "rep"
    write_report(out, doc, hta=False)
    return out


def _snapshot(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_results_file_that_is_not_json_is_refused_and_the_report_kept(folder, capsys):
    path = folder / "results.json"
    text = path.read_text()
    path.write_text(text[:200])  # cut inside the session
    try:
        json.loads(text[:200])
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}: invalid JSON ({exc.msg})"
    before = _snapshot(folder)
    assert main(["report", str(path), "-q"]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"error: {path}: {where}; is the file truncated?\n"
    assert captured.out == ""
    assert _snapshot(folder) == before  # page, traces and the damaged file as they were


@pytest.mark.parametrize(("damage", "problem"), [
    (lambda s: "sim", "session is 'sim' (str), expected an object"),
    (lambda s: {**s, "backend": 5}, "session.backend is 5 (int), expected a string"),
    (lambda s: {**s, "environment": ["x"]}, "session.environment is ['x'] (list), expected an object"),
    (lambda s: {**s, "errored_cases": "none"}, "session.errored_cases is 'none' (str), expected a list of objects"),
    (lambda s: {**s, "workers_lost": "gw1"}, "session.workers_lost is 'gw1' (str), expected a list of objects"),
    (lambda s: {**s, "workers_lost": [{**LOST[0], "worker": 1}]}, "session.workers_lost[0].worker is 1 (int), expected a string"),
    (lambda s: {**s, "workers_lost": [{**LOST[0], "tests": "t"}]}, "session.workers_lost[0].tests is 't' (str), expected a list of strings"),
    (lambda s: {**s, "workers": [{"id": "gw0", "cases": [7]}]}, "session.workers[0].cases[0] is 7 (int), expected a string"),
])
def test_a_session_field_of_a_wrong_type_is_refused_and_the_report_kept(folder, tmp_path, capsys, damage, problem):
    path = folder / "results.json"
    doc = json.loads(path.read_text())
    doc["session"] = damage(doc["session"])
    path.write_text(json.dumps(doc))
    assert session_problem(doc["session"]) == problem
    before = _snapshot(folder)
    assert main(["report", str(path), "-q"]) == 2  # in place
    captured = capsys.readouterr()
    assert captured.err == f"error: {path}: {problem}; nothing written\n"
    assert captured.out == ""
    assert _snapshot(folder) == before
    assert main(["report", str(path), "--out", str(tmp_path / "elsewhere"), "-q"]) == 2  # nor a new folder
    assert capsys.readouterr().err == f"error: {path}: {problem}; nothing written\n"
    assert not (tmp_path / "elsewhere").exists()


def test_a_sound_session_re_renders(folder, capsys):
    path = folder / "results.json"
    assert session_problem(json.loads(path.read_text())["session"]) is None
    assert session_problem(None) is None  # a document without a session
    assert main(["report", str(path), "-q", "--no-hta"]) == 0
    assert capsys.readouterr().out == f"{folder / 'index.html'} (1 case(s); traces in {folder / 'traces'})\n"


def test_the_page_warns_of_the_pytest_xdist_workers_lost_and_names_them(tmp_path):
    from harness.report.html import render_index

    case = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=4), "sim", range(0, 2), case_id="c/1F1B"))
    many = [f"cases/t.py::test[{m}]" for m in range(7)]
    lost = [*LOST, {"worker": "gw3", "error": "its session ended without them", "tests": many}]
    page = render_index(results_document([case], {"workers_lost": lost}))
    assert ('<div class="failnote" id="workers-lost">⚠ 2 pytest-xdist worker(s) went down before sending their cases: the cases of '
            "the tests each ran are missing from this report:\n"
            "<ul><li>worker <bdi>gw1</bdi> sent no cases (<bdi>went down: node down: Not properly terminated</bdi>): 1 test(s): "
            "<bdi>cases/t.py::test[1F1B]</bdi></li>"
            "<li>worker <bdi>gw3</bdi> sent no cases (<bdi>its session ended without them</bdi>): 7 test(s): "
            "<bdi>cases/t.py::test[0], cases/t.py::test[1], cases/t.py::test[2], cases/t.py::test[3], cases/t.py::test[4]</bdi> "
            "and 2 more</li></ul></div>") in page
    # a session without lost workers: no such warning
    assert 'id="workers-lost"' not in render_index(results_document([case], {"backend": "sim"}))
    # and the page written by report re-renders it from results.json
    out = tmp_path / "rep"
    write_report(out, results_document([case], {"workers_lost": LOST}), hta=False)
    assert "worker <bdi>gw1</bdi> sent no cases" in (out / "index.html").read_text()
