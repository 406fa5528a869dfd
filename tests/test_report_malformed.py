"""Malformed inputs give one clear error naming file and place; nothing half-written is left."""

from __future__ import annotations

import json
import os

import pytest

from harness.case import PipelineCase
from harness.errors import ConfigError, InputFormatError
from harness.report.render import write_report
from harness.report.results import case_to_dict, load_results, results_document
from harness.runner import run_case


@pytest.fixture
def doc():
    cases = [case_to_dict(run_case(PipelineCase(s, stages=2, microbatches=4), "sim", range(0, 2), case_id=f"c/{s}")) for s in ("FThenB", "1F1B")]
    return results_document(cases)


def _files(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_truncated_results_json_names_file_line_and_column(tmp_path, doc):
    path = tmp_path / "results.json"
    text = json.dumps(doc, indent=1)
    path.write_text(text[: len(text) // 2])
    with pytest.raises(InputFormatError, match=r"results\.json: line \d+, column \d+: invalid JSON .*truncated"):
        load_results(path)


def test_unknown_schema_version_is_refused(tmp_path, doc):
    doc["schema_version"] = 99
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputFormatError, match="schema version 99 is not supported"):
        load_results(path)


def test_report_folder_is_all_or_nothing(tmp_path, doc):
    out = tmp_path / "reports"
    files = write_report(out, doc)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert files.index.exists() and len(files.traces) == 2 and len(files.hta) == 2
    assert sorted(p.name for p in (out / "hta" / "c_1F1B").iterdir()) == ["rank0.json", "rank1.json"]
    # A second case lacking its schedule's p: rendering fails before anything moves.
    broken = json.loads(json.dumps(doc))
    broken["cases"].append(json.loads(json.dumps(broken["cases"][0])))
    broken["cases"][-1]["id"] = "c/broken"
    del broken["cases"][-1]["schedule"]["p"]
    with pytest.raises(InputFormatError, match=r"case 'c/broken' \(#2\): schedule.p is None \(NoneType\), expected an integer"):
        write_report(out, broken)
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before  # earlier report untouched, no staging folder left
    assert [n for n in os.listdir(out) if n.startswith(".")] == [".publish.lock"]  # the publishing lock only


def test_unwritable_report_folder_is_a_config_error(tmp_path, doc):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match=r"cannot be created: '.*/file' is a file, not a folder"):
        write_report(blocker / "reports", doc)
    with pytest.raises(ConfigError, match=r"report directory '.*/file' is a file, not a folder"):
        write_report(blocker, doc)
