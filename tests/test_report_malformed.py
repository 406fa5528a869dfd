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
    with pytest.raises(InputFormatError, match=r"case 'c/broken' \(cases\[2\]\): schedule.p is None \(NoneType\), expected an integer"):
        write_report(out, broken)
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before  # earlier report untouched, no staging folder left
    # the publishing lock and the earlier render's publish marker only
    assert sorted(n for n in os.listdir(out) if n.startswith(".")) == [".publish.lock", ".published.json"]


def test_unwritable_report_folder_is_a_config_error(tmp_path, doc):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match=r"cannot be created: '.*/file' is a file, not a folder"):
        write_report(blocker / "reports", doc)
    with pytest.raises(ConfigError, match=r"report directory '.*/file' is a file, not a folder"):
        write_report(blocker, doc)


def _set(path, value):
    def change(d):
        *head, last = path
        for key in head:
            d = d[key]
        d[last] = value
    return change


@pytest.mark.parametrize(("change", "message"), [
    (_set(("cases", 1, "id"), "c/FThenB"),
     "case id 'c/FThenB' appears more than once (cases[0] and cases[1]); reports and compare match cases by id, so each id must be unique"),
    (_set(("cases", 0, "id"), 5), "case 5 (cases[0]): id is 5 (int), expected a string"),
    (_set(("cases", 0, "jobs", "kind", 3), "Q"),
     "case 'c/FThenB' (cases[0]): jobs.kind[3] is 'Q' (str), expected one of B, F, I, OPT, RECV_B, RECV_F, REDUCE_GRAD, "
     "RESHARD, SEND_B, SEND_F, UNSHARD, W"),
    (_set(("cases", 0, "jobs", "stage", 0), 2), "case 'c/FThenB' (cases[0]): jobs.stage[0] is 2, expected 0 to 1"),
    (_set(("cases", 0, "jobs", "chunk", 0), 1), "case 'c/FThenB' (cases[0]): jobs.chunk[0] is 1, expected 0"),
    (_set(("cases", 0, "jobs", "microbatch", 0), -1), "case 'c/FThenB' (cases[0]): jobs.microbatch[0] is -1, expected 0 or more (or null)"),
    (_set(("cases", 0, "step_end_ns", 1), -5), r"case 'c/FThenB' (cases[0]): step_end_ns[1] (-5) is before step_start_ns[1] ("),
    (_set(("cases", 0, "deps", 0), ["9F9", "0B0", "end"]), "case 'c/FThenB' (cases[0]): deps[0] names job '9F9', which is not among the case's jobs"),
    (_set(("cases", 0, "metrics", "step_time_median_ns"), -5),
     "case 'c/FThenB' (cases[0]): metrics.step_time_median_ns is -5, but the case's steps last 15000000 to 15000000 ns "
     "(step_end_ns - step_start_ns); was the file edited?"),
    (_set(("cases", 0, "metrics", "step_time_max_ns"), 1e300), "case 'c/FThenB' (cases[0]): metrics.step_time_max_ns is 1e+300, but"),
    (_set(("cases", 0, "metrics", "bubble_ratio"), 7.5),
     "case 'c/FThenB' (cases[0]): metrics.bubble_ratio is 7.5, expected 0 to 1 (a share of the time)"),
    (_set(("cases", 0, "metrics", "step_time_iqr_ns"), -1.0), "case 'c/FThenB' (cases[0]): metrics.step_time_iqr_ns is -1.0, expected 0 or more"),
    (_set(("cases", 0, "metrics", "peak_inflight", 1), -2), "case 'c/FThenB' (cases[0]): metrics.peak_inflight[1] is -2, expected 0 or more"),
    (_set(("cases", 0, "metrics", "per_step", 0, "bubble_ratio"), 7.0),
     "case 'c/FThenB' (cases[0]): metrics.per_step[0].bubble_ratio is 7.0, expected 0 to 1 (a share of the step)"),
    (_set(("cases", 0, "metrics", "per_step", 0, "step_time_ns"), 45000000),
     "case 'c/FThenB' (cases[0]): metrics.per_step[0].step_time_ns is 45000000, but step 0 lasts 15000000 ns (step_end_ns - step_start_ns)"),
    (_set(("cases", 0, "metrics", "per_step", 0, "idle_ns", 0), 25000000),
     "case 'c/FThenB' (cases[0]): metrics.per_step[0].idle_ns[0] is 25000000, expected 0 to the step time (15000000 ns)"),
    (_set(("cases", 0, "metrics", "per_step", 0, "busy_ns"), [1, 2, 3]),
     "case 'c/FThenB' (cases[0]): metrics.per_step[0].busy_ns has 3 entries, expected one per rank (2)"),
    (_set(("cases", 0, "metrics", "step_time_min_ns"), 16000000), "case 'c/FThenB' (cases[0]): metrics.step_time_min_ns is 16000000, but"),
    (_set(("cases", 0, "jobs", "microbatch", 0), 500), "case 'c/FThenB' (cases[0]): jobs.microbatch[0] is 500, expected 0 to 3 (schedule.m is 4)"),
    (_set(("cases", 0, "jobs", "step", 3), 42), "case 'c/FThenB' (cases[0]): jobs.step[3] is 42, which is not among the case's steps"),
    (_set(("cases", 0, "steps"), [1, 0]), "case 'c/FThenB' (cases[0]): steps[1] is 0 after 1; steps must increase"),
    (_set(("cases", 0, "id"), ""), "case '' (cases[0]): id is '' (str), expected a name (reports and compare match cases by id)"),
    (_set(("cases", 0, "deps", 0), ["1B0", "0B0", "later"]),
     """case 'c/FThenB' (cases[0]): deps[0] is ['1B0', '0B0', 'later'] (list), expected [source job, target job, "end" or "start"]"""),
])
def test_an_implausible_case_is_named_and_left_out_and_the_others_are_reported(tmp_path, capsys, doc, change, message):
    from harness.cli import main

    assert doc["cases"][0]["deps"][0] == ["1B0", "0B0", "end"]  # what the changes above start from
    change(doc)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    before = path.read_bytes()
    assert main(["report", str(path), "--out", str(tmp_path / "out"), "-q"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: {message}")
    bad = 1 if "appears more than once" in message else 0  # a repeated id: the later case is left out
    assert f"1 damaged case(s) of {path} left out of the report" in err
    out = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [c["id"] for c in out["cases"]] == [doc["cases"][1 - bad]["id"]]
    (entry,) = out["session"]["errored_cases"]
    name = doc["cases"][bad]["id"] if isinstance(doc["cases"][bad]["id"], str) and doc["cases"][bad]["id"] else f"cases[{bad}]"
    assert entry["id"] == entry["label"] == name
    if bad:
        assert entry["error"] == ("cases[1] in the results file: its id appears more than once (cases[0] and cases[1]); "
                                  "reports and compare match cases by id, so each id must be unique")
    else:  # the problem as the whole file's refusal named it (some messages above are their opening only)
        assert entry["error"].startswith(f"cases[0] in the results file: {message.split('): ', 1)[1]}")
    page = (tmp_path / "out" / "index.html").read_text()
    assert "✗ 1 case(s) could not be reported (left out below)" in page
    assert path.read_bytes() == before  # the damaged file is never rewritten


def test_a_file_whose_every_case_is_damaged_writes_nothing(tmp_path, capsys, doc):
    from harness.cli import main

    doc["cases"][0]["jobs"]["kind"][3] = "Q"
    doc["cases"][1]["jobs"]["stage"][0] = 9
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    assert main(["report", str(path), "--out", str(tmp_path / "out"), "-q"]) == 2
    assert capsys.readouterr().err == (
        f"error: {path}: case 'c/FThenB' (cases[0]): jobs.kind[3] is 'Q' (str), expected one of B, F, I, OPT, RECV_B, RECV_F, "
        "REDUCE_GRAD, RESHARD, SEND_B, SEND_F, UNSHARD, W (and 1 more damaged case(s))\n")
    assert not (tmp_path / "out").exists()


def test_re_rendering_a_damaged_file_in_its_folder_keeps_the_file(tmp_path, capsys, doc):
    from harness.cli import main

    del doc["cases"][1]["jobs"]["step"]
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    before = path.read_bytes()
    assert main(["report", str(path), "-q"]) == 1
    err = capsys.readouterr().err
    assert err == (f"error: {path}: case 'c/1F1B' (cases[1]): \"jobs\" must have the columns rank, stream, stage, kind, microbatch, "
                   "chunk, step, start_ns, end_ns; left out of the report\n"
                   f"1 damaged case(s) of {path} left out of the report (listed on its page)\n")
    assert path.read_bytes() == before  # not replaced by a file without the damaged case
    page = (tmp_path / "index.html").read_text()
    assert "<bdi>c/1F1B</bdi>: <bdi>cases[1] in the results file: &#34;jobs&#34; must have the columns" in page
    assert sorted(p.name for p in (tmp_path / "traces").iterdir()) == ["c_FThenB.json"]


@pytest.mark.parametrize(("files", "what"), [
    ({"results.json": '{"important": true}'}, "its results.json is not a pipeline-harness results file"),
    ({"index.html": "<html>mine</html>", "traces/mydata.json": '{"mine": 1}'}, "it holds index.html, traces but no pipeline-harness results.json"),
    ({"hta/foo/rank0.json": "{}"}, "it holds hta but no pipeline-harness results.json"),
])
def test_another_tools_folder_is_refused_and_left_as_it_was(tmp_path, doc, files, what):
    out = tmp_path / "X"
    for name, text in files.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with pytest.raises(ConfigError) as info:
        write_report(out, doc)
    assert str(info.value) == (f"{out} is not a pipeline-harness report folder ({what}); writing a report there would replace "
                               "or prune those files: choose another folder (--out / --report-dir)")
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_a_folder_with_unrelated_files_or_an_earlier_report_is_written(tmp_path, doc):
    out = tmp_path / "project"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    write_report(out, doc)  # nothing of a report's there: files are added beside notes.txt
    assert (out / "notes.txt").read_text() == "mine" and (out / "index.html").exists()
    write_report(out, doc)  # now a report folder: written again


def test_an_unknown_outcome_is_refused(tmp_path, doc):
    doc["cases"][0]["outcome"] = "exploded"
    with pytest.raises(InputFormatError, match=r"case 'c/FThenB' \(cases\[0\]\): outcome is 'exploded' \(str\), expected one of error, "
                                               r"failed, passed, skipped, xfailed$"):
        write_report(tmp_path / "out", doc)


def test_run_case_wants_a_range_of_steps():
    with pytest.raises(ConfigError, match=r"^steps must be a range of step indices, e\.g\. range\(1, 4\) .*got \(4, 1\)$"):
        run_case(PipelineCase("1F1B", stages=2, microbatches=2), "sim", steps=(4, 1))


def test_a_field_json_cannot_hold_is_named_and_costs_only_its_case(pytester):
    from harness.report.fields import case_field_problem

    pytester.makepyfile(test_cases='''
import math
from harness import PipelineCase

class Mine:
    def __init__(self, described):
        self.described = described
    def duration_ns(self, job, n): return 1000
    def flops(self, job, n): return 0.0
    def nbytes(self, job, n): return 0
    def is_uniform(self, n): return True
    def describe(self): return {"model": "mine", "tflops": self.described}

def test_good(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=2))

def test_nan(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=2, cost=Mine(math.nan), name="nan"))

def test_object(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=2, cost=Mine(object()), name="object"))
''')
    result = pytester.runpytest("--profile-jobs", "--backend=sim", "-p", "no:randomly")
    assert result.ret == 0
    doc = json.loads((pytester.path / "reports" / "results.json").read_text())
    assert [c["id"] for c in doc["cases"]] == ["test_cases.py::test_good"]  # the good case keeps its report
    errors = {e["label"]: e["error"] for e in doc["session"]["errored_cases"]}
    assert errors["nan"] == "cost.tflops is not a finite number (NaN or infinite), which JSON cannot hold"
    assert errors["object"].startswith("cost.tflops is <object object at ") and errors["object"].endswith("a value JSON cannot hold")
    case = doc["cases"][0]
    case["critical_path"]["bogus"] = float("inf")
    assert case_field_problem(case) == "critical_path.bogus is not a finite number (NaN or infinite), which JSON cannot hold"


def test_a_null_overlaps_field_reads_as_none_as_the_other_optional_fields_do(tmp_path):
    # it ended in "cannot render the HTML page (TypeError: 'NoneType' object is not iterable)"
    doc = results_document([case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=2), "sim"))])
    doc["cases"][0]["overlaps"] = None
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    write_report(tmp_path / "rep", load_results(path), notice=lambda s: None)
    assert "1F1B" in (tmp_path / "rep" / "index.html").read_text()
