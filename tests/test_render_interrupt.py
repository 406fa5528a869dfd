"""Ctrl-C while a finished report is being moved into place: the folder must
end up holding one whole run, never a mix of two."""

from __future__ import annotations

import json
import os
import signal

import pytest

from harness.case import PipelineCase
from harness.report import render
from harness.report.results import case_to_dict, results_document
from harness.runner import run_case


def _doc(microbatches: int) -> dict:
    return results_document([case_to_dict(run_case(PipelineCase("1F1B", 2, microbatches, name="c"), "sim", range(1, 4), case_id="c"))])


def test_sigint_during_the_move_is_held_until_the_report_is_whole(tmp_path, monkeypatch):
    render.write_report(tmp_path, _doc(2))
    real_replace = os.replace
    calls = []

    def replace_and_interrupt(src, dst):
        if ".render-" not in str(dst):  # a move that publishes a staged file
            calls.append(dst)
            if len(calls) == 1:
                os.kill(os.getpid(), signal.SIGINT)  # arrives between the first and the second move
        real_replace(src, dst)

    monkeypatch.setattr(render.os, "replace", replace_and_interrupt)
    with pytest.raises(render.ReportInterrupted) as held:
        render.write_report(tmp_path, _doc(3))
    assert held.value.files.index == tmp_path / "index.html"
    assert len(calls) > 3  # every file was moved before the interrupt was let through
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["cases"][0]["schedule"]["m"] == 3
    trace = json.loads(next((tmp_path / "traces").glob("*.json")).read_text())
    assert sum(1 for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "F") == 2 * 3 * 3  # p*m*steps
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".render-")]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sigint_while_rendering_leaves_the_previous_report(tmp_path, monkeypatch):
    render.write_report(tmp_path, _doc(2))
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    real_replace = os.replace

    def interrupt_in_staging(src, dst):
        if ".render-" in str(dst):
            raise KeyboardInterrupt
        real_replace(src, dst)

    monkeypatch.setattr(render.os, "replace", interrupt_in_staging)
    with pytest.raises(KeyboardInterrupt):
        render.write_report(tmp_path, _doc(3))
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert after == before
