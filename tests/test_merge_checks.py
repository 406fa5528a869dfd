"""merge-ranks refuses part files whose jobs are listed twice or lie outside their step, and two files of one
rank, naming the files, the rank and the job."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from harness import FixedCost, PipelineCase
from harness.cli import main
from harness.distributed.clock_sync import ClockAlignment, OffsetEstimate
from harness.distributed.rank_merge import RankPart, merge_part_files, read_part, write_part
from harness.errors import InputFormatError
from harness.records import RunRecords
from harness.runner import run_case


def _parts(tmp_path: Path) -> list[Path]:
    """A 1F1B p=2 m=2 sim run (F = 1 ms, B = 2 ms, steps 0 and 1) as two part files, rank 1's clock 1 ms ahead."""
    rec = run_case(PipelineCase("1F1B", stages=2, microbatches=2, cost=FixedCost.ms(F=1, B=2), comm=True), "sim", range(0, 2)).records
    paths = []
    for rank in (0, 1):
        own = RunRecords(backend="cpu", device={"backend": "cpu", "workload": "timed"}, num_ranks=2,
                         streams=[s for s in rec.streams if s.startswith(f"rank{rank}/")], steps=list(rec.steps),
                         step_start_ns=list(rec.step_start_ns), step_end_ns=list(rec.step_end_ns),
                         jobs=[replace(j) for j in rec.jobs if j.rank == rank], enqueue_ns=list(rec.enqueue_ns),
                         warmup_steps=rec.warmup_steps)
        anchor = 5_000_000 + (1_000_000 if rank else 0)
        clock = ClockAlignment(1, OffsetEstimate(1_000_000, 500, anchor, 1000, 8), None) if rank else None
        paths.append(write_part(tmp_path / f"rank{rank}.json", RankPart(rank, f"host{rank}", own, anchor, clock, own.device)))
    return paths


def _edit(path: Path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc["records"])
    path.write_text(json.dumps(doc))


def _job(records: dict, label: str, step: int) -> int:
    """The index of job ``label`` of ``step`` in a part file's job rows (rank, stream, stage, kind, mb, chunk, step, ...)."""
    return next(i for i, j in enumerate(records["jobs"]) if f"{j[2]}{j[3]}{'' if j[4] is None else j[4]}" == label and j[6] == step)


def test_the_parts_as_written_merge(tmp_path: Path) -> None:
    merged = merge_part_files(_parts(tmp_path))
    assert merged.step_start_ns == [0, 9_000_000] and merged.step_end_ns == [9_000_000, 18_000_000]


def test_a_job_listed_twice_in_a_part_is_refused_naming_file_rank_and_job(tmp_path: Path) -> None:
    paths = _parts(tmp_path)
    seen = {}
    _edit(paths[1], lambda r: (seen.update(k=_job(r, "1B0", 1), n=len(r["jobs"])), r["jobs"].append(list(r["jobs"][seen["k"]]))))
    with pytest.raises(InputFormatError) as info:
        merge_part_files(paths)
    assert str(info.value) == (f"{paths[1]}: rank 1's job 1B0 of step 1 is listed twice (jobs[{seen['k']}] and jobs[{seen['n']}]); "
                               "a step runs each job once; the part is damaged or was edited")


@pytest.mark.parametrize(("label", "edge", "value", "said"), [
    ("1F0", "step_start_ns", 9_999_999, "starts at 9,999,999 ns, before its step starts (10,000,000 ns)"),
    ("1B1", "step_end_ns", 16_000_001, "ends at 16,000,001 ns, after its step ends (16,000,000 ns)"),
])
def test_a_job_outside_its_step_in_a_part_is_refused(tmp_path: Path, label: str, edge: str, value: int, said: str) -> None:
    paths = _parts(tmp_path)
    doc = json.loads(paths[1].read_text())
    rec = doc["records"]
    k = _job(rec, label, 1)
    # rank 1's step 1 (9 to 18 ms on the run's clock): 1RECV_F0 and 1F0 at 10 ms, 1B1 ends at 16 ms; moved to the job's time
    rec[edge][1] = 10_000_000 if edge == "step_start_ns" else 16_000_000
    rec["jobs"][k][7 if edge == "step_start_ns" else 8] = value
    paths[1].write_text(json.dumps(doc))
    with pytest.raises(InputFormatError) as info:
        read_part(paths[1])
    assert str(info.value) == (f"{paths[1]}: rank 1's job {label} of step 1 (jobs[{k}]) {said}, on the rank's own clock; "
                               "the part is damaged or was edited")


def test_two_part_files_of_one_rank_are_named_both(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = _parts(tmp_path)
    copy = tmp_path / "copy-of-rank1.json"
    copy.write_text(paths[1].read_text())
    assert main(["merge-ranks", str(paths[1]), str(copy), "1F1B", "-p", "2", "-m", "2", "--out", str(tmp_path / "m")]) == 2
    assert capsys.readouterr().err.strip() == (f"error: {paths[1]} and {copy} are both rank 1's part (hosts host1 and host1); "
                                               "give one part file per rank")


def test_a_job_of_another_rank_in_a_part_is_refused(tmp_path: Path) -> None:
    paths = _parts(tmp_path)
    seen = {}

    def move(records: dict) -> None:
        seen["k"] = _job(records, "1F1", 0)
        records["jobs"][seen["k"]][0] = 0  # rank 1's forward, claimed by rank 0: the merge would list it twice
    _edit(paths[1], move)
    with pytest.raises(InputFormatError) as info:
        read_part(paths[1])
    assert str(info.value) == (f"{paths[1]}: rank 1's part holds job 1F1 of step 0 (jobs[{seen['k']}]) of rank 0; a part holds its "
                               "own rank's jobs; the part is damaged or was edited")


@pytest.mark.parametrize(("edit", "said"), [
    # they were converted silently: 3999999.3 became 3999999, "4000000" and false were taken as numbers
    (lambda d: d["records"]["jobs"][0].__setitem__(8, 3999999.3), "records.jobs[0].end_ns is 3999999.3 (float), expected an integer"),
    (lambda d: d["records"]["jobs"][0].__setitem__(7, "0"), "records.jobs[0].start_ns is '0' (str), expected an integer"),
    (lambda d: d["records"]["jobs"][0].__setitem__(2, False), "records.jobs[0].stage is False (bool), expected an integer"),
    (lambda d: d.__setitem__("host", None), "host is None (NoneType), expected a string"),  # it became "rank 1 (None)"
    # it said "malformed rank part (ValueError: invalid literal for int() ...)", naming no field
    (lambda d: d["records"].__setitem__("warmup_steps", "abc"), "records.warmup_steps is 'abc' (str), expected an integer"),
    (lambda d: d["records"]["jobs"].__setitem__(0, [1, 2]), "records.jobs[0] is [1, 2], expected a list of 10 fields (rank, stream, "
                                                             "stage, kind, microbatch, chunk, step, start_ns, end_ns, enqueue_ns)"),
    (lambda d: d["records"].pop("steps"), "malformed rank part: no field 'steps'"),
    # these ended in raw tracebacks (IndexError, ValueError) or named no field (TypeError)
    (lambda d: d["records"].__setitem__("step_end_ns", [9000000]),
     "records.step_end_ns has 1 entries for 2 recorded step(s) (records.steps), expected one per step"),
    (lambda d: d.__setitem__("device", "cpu"), "device is 'cpu' (str), expected an object"),
    (lambda d: d["records"].__setitem__("jobs", None), "records.jobs is None, expected a list of rows"),
    # a repeated step ended in a raw KeyError from the step-span check
    (lambda d: d["records"].__setitem__("steps", [0, 0]), "records.steps[1] is 0 after 0; steps must increase (each recorded step once)"),
    (lambda d: d["records"].__setitem__("steps", [1, 0]), "records.steps[1] is 0 after 1; steps must increase (each recorded step once)"),
    (lambda d: d["records"]["jobs"][0].__setitem__(6, 7), "job 1RECV_F0 of rank 1 is of step 7, which is not among records.steps [0, 1]"),
])
def test_a_part_field_of_the_wrong_type_is_named(tmp_path: Path, edit, said: str) -> None:
    path = _parts(tmp_path)[1]
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(InputFormatError) as err:
        read_part(path)
    assert str(err.value) == f"{path}: {said}"
