"""A job time no clock reads (past 2**62 ns) in an import names the file and line (Paddle: the line is skipped) or
event (torch.profiler: refused), where it ended in an error naming only a job."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from harness.cli import main
from harness.imports.paddle import PaddleLogWarning, import_paddle_logs

DATA = Path(__file__).parent / "data" / "torch_traces"


def _line(kind: str, mb: int, start: str, end: str) -> str:
    return f"Profiler Info: Job ({mb}), type = {kind}, micro_batch_id = {mb}, job_start_time = {start}, job_end_time = {end}"


def test_a_paddle_job_ending_past_2_62_ns_is_skipped_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "workerlog.0"
    path.write_text("\n".join([
        _line("forward", 0, "1000.000000", "1001.000000"),
        _line("forward", 1, "1001.000000", "99999999999999999999999.000000"),  # ~1e29 ns: it was refused later, naming "job 1"
        _line("backward", 0, "1002.000000", "1003.000000"),
        _line("backward", 1, "1003.000000", "1004.000000"),
    ]) + "\n")
    with pytest.warns(PaddleLogWarning) as record:
        case = import_paddle_logs(tmp_path)
    assert [str(w.message) for w in record] == [
        f"{path}:2: job forward micro-batch 1 has end 99999999999999999999999.000000 ms, past 2**62 ns since the epoch "
        "(the year 2116): not a time the profiler writes, skipped",
        f"{path}:2: GPU 0, step 0: forward has no micro-batch 1: line 2 of this step was skipped as damaged: the missing job was there",
    ]
    assert case["jobs"]["kind"] == ["F", "B", "B"] and case["jobs"]["end_ns"] == [1_000_000, 3_000_000, 4_000_000]


def test_a_paddle_micro_batch_id_of_20_digits_is_skipped_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "workerlog.0"
    lines = [_line("forward", 0, "1000.000000", "1001.000000"), _line("forward", 1, "1001.000000", "1002.000000"),
             _line("backward", 0, "1002.000000", "1003.000000"), _line("backward", 1, "1003.000000", "1004.000000")]
    lines[1] = lines[1].replace("micro_batch_id = 1", "micro_batch_id = 99999999999999999999")
    path.write_text("\n".join(lines) + "\n")
    with pytest.warns(PaddleLogWarning) as record:  # it stopped the whole import, naming no file or line
        case = import_paddle_logs(tmp_path)
    assert str(record[0].message) == (f"{path}:2: job forward has micro_batch_id 99999999999999999999 (2**31 or more: not an id "
                                      "a run gives), skipped")
    assert case["jobs"]["kind"] == ["F", "B", "B"]


def test_a_paddle_time_just_below_2_62_ns_is_kept(tmp_path: Path) -> None:
    below = (1 << 62) - 1  # ns: 4611686018427.387903 ms
    path = tmp_path / "workerlog.0"
    path.write_text(_line("forward", 0, "4611686018426.000000", f"{below // 10**6}.{below % 10**6:06d}") + "\n")
    case = import_paddle_logs(tmp_path)
    assert case["jobs"]["end_ns"] == [below - 4611686018426 * 10**6]


def test_a_torch_event_ending_past_2_62_ns_is_refused_naming_file_and_event(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    traces = tmp_path / "traces"
    shutil.copytree(DATA / "ScheduleGPipe_2rank_m4", traces)
    path = traces / "rank1.json.gz"
    doc = json.loads(gzip.decompress(path.read_bytes()))
    events = doc["traceEvents"]
    k = max((i for i, e in enumerate(events) if e.get("ph") == "X" and e.get("name") == "Backward 3"), key=lambda i: events[i]["ts"])
    events[k]["dur"] = 10**17  # µs: the last action of the last step, ~3,000 years long
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    end = doc.get("baseTimeNanoseconds", 0) + round(events[k]["ts"] * 1000) + 10**20
    assert main(["import-torch", str(traces), "--out", str(tmp_path / "out"), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {path}: traceEvents[{k}] ('Backward 3'): ends at ")
    assert err.endswith(" ns (baseTimeNanoseconds + ts + dur), past 2**62 ns (about 146 years): not a time the profiler writes; "
                        "the event is damaged")
    assert abs(int(err.split("ends at ")[1].split(" ns")[0].replace(",", "")) - end) < 1000


@pytest.mark.parametrize(("bad", "said"), [
    ("PP:0X0", "pipeline action 'PP:0X0' does not follow PyTorch's _Action grammar"),
    ("PP:0F", "pipeline action 'PP:0F': F needs a micro-batch (e.g. PP:0F0)"),
])
def test_a_pp_name_off_the_grammar_names_the_file_and_event(tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str, said: str) -> None:
    traces = tmp_path / "traces"
    shutil.copytree(DATA / "ScheduleInterleaved1F1B_2rank_m4", traces)
    path = traces / "rank0.json.gz"
    doc = json.loads(gzip.decompress(path.read_bytes()))
    events = doc["traceEvents"]
    k = next(i for i, e in enumerate(events) if e.get("ph") == "X" and e.get("name") == "PP:0F0")
    events[k]["name"] = bad  # it named the action only: which of the files holds it?
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    assert main(["import-torch", str(traces), "--out", str(tmp_path / "out"), "-q"]) == 2
    assert capsys.readouterr().err.startswith(f"error: {path}: traceEvents[{k}]: rank 0: {said}")


@pytest.mark.parametrize(("edit", "said"), [
    (lambda e: e.__setitem__("dur", -50), "dur -50 µs is negative; the trace is damaged"),
    (lambda e: e.pop("dur"), "a complete ('X') event without \"dur\"; the trace is damaged"),
])
def test_a_torch_event_with_a_negative_or_no_duration_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], edit, said: str) -> None:
    # both were imported as a 0 ns job, with the intact trace's summary
    traces = tmp_path / "traces"
    shutil.copytree(DATA / "ScheduleGPipe_2rank_m4", traces)
    path = traces / "rank1.json.gz"
    doc = json.loads(gzip.decompress(path.read_bytes()))
    events = doc["traceEvents"]
    k = next(i for i, e in enumerate(events) if e.get("ph") == "X" and e.get("name") == "Backward 3")
    edit(events[k])
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    assert main(["import-torch", str(traces), "--out", str(tmp_path / "out"), "-q"]) == 2
    assert capsys.readouterr().err.strip() == f"error: {path}: traceEvents[{k}] ('Backward 3'): {said}"
