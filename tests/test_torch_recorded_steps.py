"""import-torch on traces where a rank recorded no pipeline action in a step (its ``PP:`` ranges of that
``ProfilerStep#N`` gone): the step is left out of the figures with one note naming file, rank and step, and the
figures are those of the steps every rank ran. The traces are tests/data/torch_traces (made with torch, generate.sh);
no test imports torch."""

from __future__ import annotations

import gzip
import json
import shutil
import warnings
from pathlib import Path

import pytest

from harness.actions.step_text import steps_text
from harness.errors import InputFormatError
from harness.imports.torch import read_torch_traces, torch_case

DATA = Path(__file__).parent / "data" / "torch_traces"
FOLDER = "ScheduleInterleaved1F1B_2rank_m4"  # 2 ranks, stages 0-3 looped, m = 4, ProfilerStep#2 and #3


def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / FOLDER
    shutil.copytree(DATA / FOLDER, dst)
    return dst


def _drop_actions(path: Path, step: int) -> int:
    """Remove every ``PP:`` range inside ``ProfilerStep#<step>`` of one rank's trace; returns how many."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    span = next(e for e in doc["traceEvents"] if e.get("name") == f"ProfilerStep#{step}")
    lo, hi = float(span["ts"]), float(span["ts"]) + float(span["dur"])

    def inside(e: dict) -> bool:
        return str(e.get("name", "")).startswith("PP:") and e.get("ph") == "X" and lo <= float(e["ts"]) <= hi

    gone = sum(1 for e in doc["traceEvents"] if inside(e))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not inside(e)]
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return gone


def _read(folder: Path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_torch_traces(folder, **kw)


def test_steps_text():
    assert steps_text([5]) == "step 5"
    assert steps_text([5, 2, 3, 4]) == "steps 2-5"
    assert steps_text([3, 5, 6]) == "steps 3, 5-6"
    assert steps_text([4, 4]) == "step 4"
    with pytest.raises(ValueError, match="no steps"):
        steps_text([])


def test_a_step_a_rank_recorded_no_action_in_is_left_out(tmp_path):
    d = _copy(tmp_path)
    assert _drop_actions(d / "rank1.json.gz", 3) == 46  # rank 1's 46 PP: ranges of step 3, as in the tester's report
    imp = _read(d)
    assert [w for w in imp.warnings if "ProfilerStep#3" in w] == [
        f"{d / 'rank1.json.gz'}: rank 1's ProfilerStep#3 holds no pipeline action; step 3 is left out of the figures "
        "(the other ranks ran it)"
    ]
    assert not any("another order" in w for w in imp.warnings)  # before: "step 3 runs its actions in another order"
    assert imp.records.steps == [2] and {j.step for j in imp.records.jobs} == {2}
    # The figures are exactly those of the intact traces' step 2 (before: step 3 counted rank 1 idle, 0 ns busy).
    only2 = _read(DATA / FOLDER, steps=[2])
    assert torch_case(imp)["metrics"] == torch_case(only2)["metrics"]
    assert [(j.label, j.start_ns, j.end_ns) for j in imp.records.jobs] == [
        (j.label, j.start_ns, j.end_ns) for j in only2.records.jobs]


def test_when_every_step_lacks_a_rank_all_are_kept_with_a_note(tmp_path):
    d = _copy(tmp_path)
    _drop_actions(d / "rank0.json.gz", 2)
    _drop_actions(d / "rank1.json.gz", 3)
    imp = _read(d, replay=False)
    said = [w for w in imp.warnings if "holds no pipeline action" in w]
    assert said == [
        f"{d / 'rank0.json.gz'}: rank 0's ProfilerStep#2 holds no pipeline action: no step holds every rank's actions, "
        "so every step is kept, and rank 0 counts as idle in step 2: their step times and bubble are not the run's",
        f"{d / 'rank1.json.gz'}: rank 1's ProfilerStep#3 holds no pipeline action: no step holds every rank's actions, "
        "so every step is kept, and rank 1 counts as idle in step 3: their step times and bubble are not the run's",
    ]
    assert imp.records.steps == [2, 3]
    # Each rank's order is that of the step it ran: the schedule is the intact one.
    intact = _read(DATA / FOLDER, replay=False)
    assert imp.schedule.ranks == intact.schedule.ranks
    per_step = torch_case(imp)["metrics"]["per_step"]
    whole = torch_case(intact)["metrics"]["per_step"]
    assert [s["busy_ns"] for s in per_step] == [[0, whole[0]["busy_ns"][1]], [whole[1]["busy_ns"][0], 0]]


def test_a_rank_without_actions_in_every_step_asked_for_is_refused(tmp_path):
    d = _copy(tmp_path)
    _drop_actions(d / "rank1.json.gz", 3)
    with pytest.raises(InputFormatError, match=(
            r"rank1\.json\.gz: rank 1's ProfilerStep#3 holds no pipeline action: with none in the imported step 3, "
            r"its action order is unknown \(was the profiler active on this rank during the schedule's step\(\)\?\)")):
        _read(d, steps=[3])
    assert _read(d, steps=[2, 3], replay=False).records.steps == [2]  # asked for both: step 3 left out, as by default


def _event(name: str, ts: float, dur: float, cat: str = "user_annotation") -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": round(ts, 3), "dur": round(dur, 3), "args": {}}


def _hand_traces(folder: Path, skip: tuple[int, int] | None = None) -> None:
    """Two ranks, one stage each, m = 1, ProfilerStep#1-#3 at 0, 100 and 200 µs. In each step (T its start):
    0F0 at T+0..10 µs, 1F0 at T+15..25, 1B0 at T+25..35, 0B0 at T+40..60, each range opened by an operator at its
    start (so no wait: the job is the whole range). ``skip`` = (rank, step): that rank's actions of that step left out.
    By hand, per step: 60 µs from 0F0's start to 0B0's end; busy 30 µs on rank 0, 20 µs on rank 1; bubble
    1 - 50 / (2 x 60) = 7/12."""
    plan = {0: [("PP:0F0", 0, 10, "aten::linear"), ("PP:0B0", 40, 20, "autograd::engine::evaluate_function: X")],
            1: [("PP:1F0", 15, 10, "aten::linear"), ("PP:1B0", 25, 10, "autograd::engine::evaluate_function: X")]}
    for rank, acts in plan.items():
        events = []
        for step in (1, 2, 3):
            t = 100.0 * (step - 1)
            events.append(_event(f"ProfilerStep#{step}", t, 99))
            if skip == (rank, step):
                continue
            for name, at, dur, op in acts:
                events += [_event(name, t + at, dur), _event(op, t + at, dur / 2, "cpu_op")]
        doc = {"distributedInfo": {"rank": rank, "world_size": 2}, "baseTimeNanoseconds": 0, "traceEvents": events}
        (folder / f"rank{rank}.json").write_text(json.dumps(doc))


def test_a_middle_step_left_out_gives_the_hand_computed_figures_and_renders(tmp_path):
    from harness.imports.torch import import_torch_traces

    whole, cut = tmp_path / "whole", tmp_path / "cut"
    whole.mkdir()
    cut.mkdir()
    _hand_traces(whole)
    _hand_traces(cut, skip=(1, 2))
    metrics = torch_case(_read(whole))["metrics"]
    assert [s["step_time_ns"] for s in metrics["per_step"]] == [60_000] * 3
    assert [s["busy_ns"] for s in metrics["per_step"]] == [[30_000, 20_000]] * 3
    assert metrics["bubble_ratio"] == pytest.approx(7 / 12)
    imp = _read(cut)
    assert [w for w in imp.warnings if "pipeline action" in w] == [
        f"{cut / 'rank1.json'}: rank 1's ProfilerStep#2 holds no pipeline action; step 2 is left out of the figures "
        "(the other ranks ran it)"]
    case = torch_case(imp)
    assert case["steps"] == [1, 3]
    assert [(s["step"], s["step_time_ns"], s["busy_ns"]) for s in case["metrics"]["per_step"]] == [
        (1, 60_000, [30_000, 20_000]), (3, 60_000, [30_000, 20_000])]  # before: step 2 with rank 1 busy 0 ns
    assert case["metrics"]["bubble_ratio"] == pytest.approx(7 / 12)  # before: (7/12 + 7/12 + 3/4) / 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        files, _ = import_torch_traces(cut, tmp_path / "out", hta=False)
    doc = json.loads(files.results.read_text())
    assert doc["cases"][0]["steps"] == [1, 3] and "step 2 is left out of the figures" in files.index.read_text()


@pytest.mark.parametrize(("folder", "marks"), [
    ("ScheduleGPipe_2rank_m4", lambda e: str(e.get("name", "")).startswith(("Forward ", "Backward "))),
    ("Schedule1F1B_2rank_m4", lambda e: e.get("cat") == "cpu_op"),  # no ranges: F and B rebuilt from operators
])
def test_other_markings_leave_the_step_out_too(tmp_path, folder, marks):
    d = tmp_path / folder
    shutil.copytree(DATA / folder, d)
    path = d / "rank1.json.gz"
    doc = json.loads(gzip.decompress(path.read_bytes()))
    span = next(e for e in doc["traceEvents"] if e.get("name") == "ProfilerStep#3")
    lo, hi = float(span["ts"]), float(span["ts"]) + float(span["dur"])
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not (e.get("ph") == "X" and marks(e) and lo <= float(e["ts"]) <= hi)]
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    imp = _read(d, replay=False)
    assert [w for w in imp.warnings if "ProfilerStep#3" in w] == [
        f"{path}: rank 1's ProfilerStep#3 holds no pipeline action; step 3 is left out of the figures (the other ranks ran it)"]
    only2 = _read(DATA / folder, steps=[2], replay=False)
    assert imp.records.steps == [2]
    assert torch_case(imp)["metrics"] == torch_case(only2)["metrics"]


def _cut_step(path: Path, step: int, keep: int) -> None:
    """Keep only the first ``keep`` ``PP:`` ranges (by start) inside ``ProfilerStep#<step>`` of one rank's trace: a
    trace cut inside that step."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    span = next(e for e in doc["traceEvents"] if e.get("name") == f"ProfilerStep#{step}")
    lo, hi = float(span["ts"]), float(span["ts"]) + float(span["dur"])
    inside = sorted((e for e in doc["traceEvents"] if str(e.get("name", "")).startswith("PP:") and e.get("ph") == "X"
                     and lo <= float(e["ts"]) <= hi), key=lambda e: float(e["ts"]))
    gone = {id(e) for e in inside[keep:]}
    doc["traceEvents"] = [e for e in doc["traceEvents"] if id(e) not in gone]
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))


def test_a_step_a_rank_recorded_only_part_of_is_left_out(tmp_path):
    # a trace cut inside rank 1's step 3 counted the rest of that step as idle: the bubble rose from 60.6 to 66.3 %
    d = _copy(tmp_path)
    _cut_step(d / "rank1.json.gz", 3, keep=23)
    imp = _read(d)
    said = [w for w in imp.warnings if "ProfilerStep#3" in w]
    assert len(said) == 1 and said[0].startswith(
        f"{d / 'rank1.json.gz'}: rank 1's ProfilerStep#3 holds fewer pipeline actions than its other steps' 40 (")
    assert said[0].endswith("): the trace misses part of that step, which is left out of the figures")
    assert imp.records.steps == [2]
    assert torch_case(imp)["metrics"] == torch_case(_read(DATA / FOLDER, steps=[2]))["metrics"]
