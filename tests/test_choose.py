"""The chooser (harness.choose): its ranking equals evaluating each combination one by one on sim, a
memory limit puts what fits first, the no-fit answer gives the least limit that would fit, the
combinations each schedule is tried at, unknown names, the pools (serial, process, MPI), the command
line's outputs and the confirming runs."""

from __future__ import annotations

import csv
import dataclasses
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.case import PipelineCase
from harness.choose.confirm import confirm
from harness.choose.layout_search import search_layout
from harness.choose.query import ChooseQuery, Task, combinations
from harness.choose.rank import ChooseResult, choose
from harness.cli import main
from harness.errors import ConfigError
from harness.model.transformer import TransformerCost
from harness.runner import run_case

ROOT = Path(__file__).resolve().parent.parent
BASE = TransformerCost(hidden_size=1024, seq_len=1024, micro_batch_size=1, num_layers=8, tflops=100, vocab_size=8192,
                       num_attention_heads=16)
GRID = ("1F1B", "ZB-H1", "ZB-H2", "Interleaved1F1B", "ZB-V")
MODEL_FLAGS = ["--hidden-size", "1024", "--num-layers", "8", "--seq-length", "1024", "--num-attention-heads", "16",
               "--vocab-size", "8192", "--tflops", "100"]
SMALL_FLAGS = ["--hidden-size", "256", "--num-layers", "8", "--seq-length", "128", "--num-attention-heads", "4",
               "--vocab-size", "1000", "--tflops", "10", "-p", "2", "-m", "4", "--schedules", "1F1B", "ZB-H1", "--no-progress"]
SMALL = TransformerCost(hidden_size=256, seq_len=128, micro_batch_size=1, num_layers=8, tflops=10, vocab_size=1000,
                        num_attention_heads=4)
ROW_KEYS = {"rank", "schedule", "v", "m", "layout", "recompute", "options", "comm_model", "step_ns", "ns_per_microbatch", "bubble", "peak_bytes",
            "peak_bytes_per_rank", "fits", "decomposition", "search", "assumptions", "best"}
EXCLUDED_KEYS = {"schedule", "v", "m", "reason"}


def _serial(query: ChooseQuery) -> ChooseResult:
    return choose(query, executor="serial", progress=False)


def _rank_key(row: dict[str, Any]) -> tuple[bool, float, int, str, int, int]:
    return (not row["fits"], row["step_ns"] / row["m"], row["step_ns"], row["schedule"], row["v"], row["m"])


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value))


# -- the ranking ---------------------------------------------------------------------------------

# None: every row fits; 1.1e9 bytes: only full recomputation on two stages fits (1F1B, ZB-H1, ZB-H2),
# the four-stage schedules do not; 2.1e9 bytes: all fit, with per-stage recomputation and a tie
@pytest.mark.parametrize("limit", [None, 1_100_000_000, 2_100_000_000])
def test_the_ranking_equals_each_combination_evaluated_on_its_own(limit: int | None) -> None:
    query = ChooseQuery(BASE, 2, (4, 8), chunks=(1, 2), schedules=GRID, memory_limit_bytes=limit)
    result = _serial(query)
    assert result.excluded == []
    assert sorted((r["schedule"], r["v"], r["m"]) for r in result.rows) == sorted(
        (s, v, m) for s, v in (("1F1B", 1), ("ZB-H1", 1), ("ZB-H2", 1), ("Interleaved1F1B", 2), ("ZB-V", 2)) for m in (4, 8))
    measured = {}
    for row in result.rows:
        assert set(row) == ROW_KEYS
        # the chooser's own case, and the case built from the row's fields as docs/choose.md writes it
        own = run_case(result.case(row), backend="sim")
        rec = row["recompute"] if isinstance(row["recompute"], str) else tuple(row["recompute"])
        cost = dataclasses.replace(BASE, layout=row["layout"], layers_per_stage=None, recompute=rec)
        rebuilt = run_case(PipelineCase(row["schedule"], stages=2, microbatches=row["m"], chunks=row["v"], cost=cost,
                                        options=row["options"], memory_limit_bytes=limit, comm_model=row["comm_model"]), backend="sim")
        for run in (own, rebuilt):
            assert round(run.metrics.step_time_median_ns) == row["step_ns"]
            assert run.memory is not None and list(run.memory.peak_bytes) == row["peak_bytes_per_rank"]
        assert row["peak_bytes"] == max(row["peak_bytes_per_rank"])
        assert row["ns_per_microbatch"] == row["step_ns"] / row["m"]
        assert row["fits"] is (limit is None or row["peak_bytes"] <= limit)
        # one layout search per combination, outside the chooser, finds the same answer
        alone = search_layout(row["schedule"], 2, row["m"], row["v"], BASE, options=row["options"], memory_limit_bytes=limit).best
        assert (alone.layout, alone.recompute if isinstance(alone.recompute, str) else list(alone.recompute), alone.step_ns,
                alone.peak_bytes, alone.fits) == (row["layout"], row["recompute"], row["step_ns"], row["peak_bytes"], row["fits"])
        measured[(row["schedule"], row["v"], row["m"])] = round(own.metrics.step_time_median_ns)
    # fitting first, then the measured step time per micro-batch, then the step time, ties by (schedule, v, m)
    def measured_key(r: dict[str, Any]) -> tuple[bool, float, int, str, int, int]:
        step = measured[(r["schedule"], r["v"], r["m"])]
        return (not r["fits"], step / r["m"], step, r["schedule"], r["v"], r["m"])

    expected = sorted(result.rows, key=measured_key)
    assert [(r["schedule"], r["v"], r["m"]) for r in result.rows] == [(r["schedule"], r["v"], r["m"]) for r in expected]
    assert [r["rank"] for r in result.rows] == list(range(1, 11))
    assert [r["best"] for r in result.rows] == [True] + [False] * 9
    assert result.best is result.rows[0]
    assert result.smallest_fitting_limit_bytes is None
    if limit == 1_100_000_000:
        assert [(r["schedule"], r["m"], r["fits"]) for r in result.rows[:6]] == [
            ("ZB-H2", 8, True), ("ZB-H1", 8, True), ("ZB-H2", 4, True), ("ZB-H1", 4, True), ("1F1B", 8, True), ("1F1B", 4, True)]
        assert {r["schedule"] for r in result.rows[6:]} == {"Interleaved1F1B", "ZB-V"}
        assert not any(r["fits"] for r in result.rows[6:])
    if limit == 2_100_000_000:  # ZB-H1 and ZB-H2 tie at m=4: the schedule name orders them
        tied = [r for r in result.rows if r["m"] == 4 and r["schedule"] in ("ZB-H1", "ZB-H2")]
        assert tied[0]["step_ns"] == tied[1]["step_ns"]
        assert [r["schedule"] for r in tied] == ["ZB-H1", "ZB-H2"] and tied[1]["rank"] == tied[0]["rank"] + 1


def test_a_limit_between_the_peaks_of_1f1b_and_zb_h2_ranks_zb_h2_below_every_row_that_fits() -> None:
    fixed = {"recompute": "none", "layout": "even", "chunks": (1,), "schedules": ("1F1B", "ZB-H1", "ZB-H2")}
    free = _serial(ChooseQuery(BASE, 2, (4, 8), **fixed))
    peak = {(r["schedule"], r["m"]): r["peak_bytes"] for r in free.rows}
    step = {(r["schedule"], r["m"]): r["step_ns"] for r in free.rows}
    assert all(r["layout"] == "Et*4|t*4L" and r["recompute"] == "none" for r in free.rows)
    for m in (4, 8):
        assert peak[("1F1B", m)] < peak[("ZB-H2", m)]
        assert step[("ZB-H2", m)] < step[("1F1B", m)]  # without a limit ZB-H2 is faster
    # ZB-H1 ties ZB-H2 on the even split: the name orders them; m=8 has the shorter step per micro-batch
    assert [(r["schedule"], r["m"], r["rank"]) for r in free.rows] == [
        ("ZB-H1", 8, 1), ("ZB-H2", 8, 2), ("ZB-H1", 4, 3), ("ZB-H2", 4, 4), ("1F1B", 8, 5), ("1F1B", 4, 6)]
    assert free.rows[0]["step_ns"] == free.rows[1]["step_ns"] and free.rows[0]["best"] is True
    limit = (max(peak[("1F1B", m)] for m in (4, 8)) + min(peak[("ZB-H2", m)] for m in (4, 8))) // 2

    result = _serial(ChooseQuery(BASE, 2, (4, 8), memory_limit_bytes=limit, **fixed))
    zb_h2 = [r for r in result.rows if r["schedule"] == "ZB-H2"]
    fitting = [r for r in result.rows if r["fits"]]
    assert len(zb_h2) == 2 and len(fitting) == 4
    assert {(r["schedule"], r["m"]) for r in fitting} == {("1F1B", 4), ("1F1B", 8), ("ZB-H1", 4), ("ZB-H1", 8)}
    for row in zb_h2:
        assert row["fits"] is False and row["best"] is False and row["rank"] > max(r["rank"] for r in fitting)
        assert row["step_ns"] == step[("ZB-H2", row["m"])] and row["peak_bytes"] == peak[("ZB-H2", row["m"])]
    assert [r["rank"] for r in zb_h2] == [5, 6]
    assert result.best is result.rows[0] and result.best["schedule"] != "ZB-H2" and result.best["fits"] is True
    assert result.best["ns_per_microbatch"] == min(r["ns_per_microbatch"] for r in fitting)


def test_nothing_fits_lists_every_row_and_the_least_limit_that_would_fit() -> None:
    schedules = ("1F1B", "ZB-H2", "Interleaved1F1B", "ZB-auto")
    result = _serial(ChooseQuery(BASE, 2, (4,), chunks=(1, 2), schedules=schedules, memory_limit_bytes=2**20))
    assert [(r["schedule"], r["v"], r["step_ns"], r["peak_bytes"], r["options"], r["recompute"]) for r in result.rows] == [
        ("ZB-H2", 1, 20_272_248, 1_098_907_648, {}, "full"), ("1F1B", 1, 23_536_423, 1_098_907_648, {}, "full"),
        # nothing fits, so each search walks to its least peak: Interleaved1F1B's full-recomputation search moves layers
        # off its first rank (Et|t|t*3|t*3L) to 1,101,004,800 bytes, where the mixed modes' search alone stopped at
        # 1,103,101,952 (Et*2|t*2|t*2|t*2L, 21,388,940 ns)
        ("Interleaved1F1B", 2, 23_579_372, 1_101_004_800, {}, "full"),
        # ZB-auto is built for the limit itself and refuses one below what a micro-batch needs: listed as its
        # least-memory build (one micro-batch pending at a time, full recomputation) with its peak
        ("ZB-auto", 1, 31_610_960, 1_098_907_648, {"max_pending": 1}, "full")]
    assert all(r["fits"] is False and r["best"] is False for r in result.rows)
    assert result.best is None and result.excluded == []
    zb_auto = result.rows[3]
    assert zb_auto["search"]["method"].endswith(
        "; nothing tried fits: ZB-auto's builder refuses the limit for this layout and recomputation (below what one micro-batch "
        "needs on a stage), so it is shown as its least-memory build (max_pending=1)")
    run = run_case(result.case(zb_auto), backend="sim")
    assert round(run.metrics.step_time_median_ns) == zb_auto["step_ns"]
    assert run.memory is not None and list(run.memory.peak_bytes) == zb_auto["peak_bytes_per_rank"]
    assert run.metrics.peak_inflight_per_stage == [1, 1]
    least = min(r["peak_bytes"] for r in result.rows)
    assert result.smallest_fitting_limit_bytes == least == 1_098_907_648  # the two-stage schedules, full recomputation
    doc = result.to_document()
    assert doc["smallest_fitting_limit_bytes"] == least and doc["limit_bytes"] == 2**20

    again = _serial(ChooseQuery(BASE, 2, (4,), chunks=(1, 2), schedules=schedules, memory_limit_bytes=least))
    fitting = [r for r in again.rows if r["fits"]]
    # ZB-auto too, now built for the limit (no max_pending): the search finds the recomputation that meets it
    assert sorted((r["schedule"], tuple(r["options"])) for r in fitting) == [("1F1B", ()), ("ZB-H2", ()), ("ZB-auto", ())]
    assert all(r["peak_bytes"] == least for r in fitting)
    assert again.best is again.rows[0] and again.best["schedule"] == "ZB-H2"
    assert again.smallest_fitting_limit_bytes is None


def test_zb_auto_s_least_memory_build_gives_the_least_limit_where_it_needs_less_than_the_others() -> None:
    """The audit's find: at p=4, m=8 ZB-auto was excluded with 'the minimum is 36,315,136 bytes' (no recomputation),
    yet with full recomputation it fits 33,562,624 bytes; it is now a row with that peak, and fits that limit."""
    small = dataclasses.replace(SMALL, num_layers=8)
    query = ChooseQuery(small, 4, (8,), chunks=(1,), schedules=("ZB-auto",), memory_limit_bytes=2**20)
    result = _serial(query)
    (row,) = result.rows
    assert (row["options"], row["fits"], row["peak_bytes"], row["layout"]) == ({"max_pending": 1}, False, 33_562_624, "Et*2|t*2|t*2|t*2L")
    assert result.smallest_fitting_limit_bytes == 33_562_624 and result.excluded == []
    at = _serial(dataclasses.replace(query, memory_limit_bytes=33_562_624))
    (fit,) = at.rows
    assert (fit["options"], fit["fits"], fit["peak_bytes"]) == ({}, True, 33_562_624)
    assert fit["step_ns"] < row["step_ns"]  # built for the limit, it holds more than one micro-batch where it can


def test_the_nothing_fits_line_names_the_rows_that_need_the_least_limit(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["choose", *SMALL_FLAGS[:-4], "--schedules", "DualPipeV", "ZB-H1", "1F1B", "ZB-auto", "--memory-limit", "1MiB",
            "--no-progress"]
    assert main(argv) == 1  # nothing chosen: the output is printed all the same
    out = capsys.readouterr().out
    result = _serial(ChooseQuery(SMALL, 2, (4,), schedules=("DualPipeV", "ZB-H1", "1F1B", "ZB-auto"), memory_limit_bytes=2**20))
    assert [(r["schedule"], r["peak_bytes"]) for r in result.rows] == [
        ("DualPipeV", 66_809_856), ("ZB-H1", 62_005_248), ("1F1B", 62_005_248), ("ZB-auto", 62_005_248)]
    assert result.rows[3]["options"] == {"max_pending": 1}
    (line,) = [line for line in out.splitlines() if line.startswith("nothing fits ")]
    # the rows that need the least limit, not the first row (DualPipeV needs more)
    from harness.cli.choose import _size

    assert [_size(n) for n in (512, 2**20, 62_005_248, 80 * 2**30, 3 * 2**40)] == [
        "512 B", "1.00 MiB", "59.13 MiB", "80.00 GiB", "3.00 TiB"]
    # in units that show a 1 MiB limit (it printed as 0.00 GiB)
    assert line == ("nothing fits 1.00 MiB: the least limit at which one would is 59.13 MiB "
                    "(62,005,248 bytes: #2 ZB-H1 v=1 m=4, #3 1F1B v=1 m=4, #4 ZB-auto v=1 m=4)")


def test_no_row_is_beaten_by_another_rows_answer_given_to_its_schedule() -> None:
    """The second pass seeds each row's search with the other rows' answers (same stage count and m): afterwards no
    row's layout and recomputation, run with another row's schedule, fits and is faster than that row."""
    base = dataclasses.replace(BASE, num_layers=12)
    limit = 1_600_000_000
    query = ChooseQuery(base, 4, (8,), chunks=(1,), schedules=("1F1B", "Eager-1F1B", "ZB-H1", "ZB-H2", "ZB-auto"),
                        memory_limit_bytes=limit)
    result = _serial(query)
    assert [(r["schedule"], r["step_ns"], r["fits"]) for r in result.rows] == [
        ("ZB-H1", 24_996_714, True), ("ZB-auto", 24_996_714, True), ("ZB-H2", 26_027_506, True), ("1F1B", 29_892_976, True),
        ("Eager-1F1B", 30_021_825, True)]
    for row in result.rows:
        for other in result.rows:
            if other is row:
                continue
            rec = other["recompute"] if isinstance(other["recompute"], str) else tuple(other["recompute"])
            cost = dataclasses.replace(base, layout=other["layout"], layers_per_stage=None, recompute=rec)
            run = run_case(PipelineCase(row["schedule"], stages=4, microbatches=8, cost=cost, options=row["options"],
                                        memory_limit_bytes=limit), backend="sim")
            assert run.memory is not None
            if max(run.memory.peak_bytes) <= limit:
                assert round(run.metrics.step_time_median_ns) >= row["step_ns"], (row["schedule"], other["schedule"])
    # ZB-auto's own search stops at uniform selective recomputation; ZB-H1's answer, given to ZB-auto, is faster
    alone = search_layout("ZB-auto", 4, 8, 1, base, memory_limit_bytes=limit)
    assert (alone.best.layout, alone.best.recompute, alone.best.step_ns) == ("Et*3|t*3|t*3|t*3L", "selective", 26_027_506)
    zb_auto = result.rows[1]
    assert (zb_auto["layout"], zb_auto["recompute"]) == ("Et*3|t*3|t*3|t*3L", ["selective", "selective", "none", "none"])
    assert zb_auto["search"]["evaluated"] > alone.evaluated
    assert "; then seeded with other rows' answers (" in zb_auto["search"]["method"]
    assert zb_auto["search"]["baselines"] == {k: v.to_dict() for k, v in alone.baselines.items()}
    assert round(run_case(result.case(zb_auto), backend="sim").metrics.step_time_median_ns) == zb_auto["step_ns"]
    # rows never seeded keep their own search's answer
    for row in result.rows:
        if "seeded" not in row["search"]["method"]:
            own = search_layout(row["schedule"], 4, 8, 1, base, options=row["options"], memory_limit_bytes=limit).best
            assert (own.layout, own.step_ns) == (row["layout"], row["step_ns"])
    # the seeding is deterministic: a process pool ranks alike
    pooled = choose(query, executor="process", workers=2, progress=False)
    assert pooled.to_document()["rows"] == result.to_document()["rows"]


def test_the_issue_question_zb_auto_takes_zb_h2s_layout_and_recomputation() -> None:
    """The audit's find: on the GPT question ZB-auto's own search stopped at 1,430.7 ms, yet ZB-H2's answer given to
    ZB-auto fits 80 GiB and runs at 1,423.9 ms; the seeding pass finds it."""
    gpt = TransformerCost(hidden_size=4096, seq_len=2048, micro_batch_size=1, num_layers=48, tflops=400, vocab_size=50304,
                          num_attention_heads=32)
    result = _serial(ChooseQuery(gpt, 8, (32,), chunks=(1,), schedules=("ZB-H2", "ZB-auto"), memory_limit_bytes=80 * 2**30))
    assert [(r["schedule"], r["step_ns"], r["peak_bytes"], r["fits"], r["layout"]) for r in result.rows] == [
        ("ZB-H2", 1_423_867_552, 83_047_219_200, True, "Et*7|t*6|t*6|t*6|t*6|t*6|t*6|t*5L"),
        ("ZB-auto", 1_423_867_552, 84_859_158_528, True, "Et*7|t*6|t*6|t*6|t*6|t*6|t*6|t*5L")]
    assert result.rows[0]["recompute"] == ["selective"] * 3 + ["none"] * 5
    assert result.rows[1]["recompute"] == ["selective"] + ["none"] * 7  # less recomputation at the same step


@pytest.mark.parametrize(("name", "closest"), [("ZB-H3", "ZB-H2"), ("zb-v2", "ZB-V"), ("Interleaved1F1C", "Interleaved1F1B")])
def test_an_unknown_schedule_is_refused_with_the_closest_name(name: str, closest: str) -> None:
    with pytest.raises(ConfigError) as info:
        ChooseQuery(BASE, 2, (4,), schedules=("1F1B", name))
    message = str(info.value)
    assert message.startswith(f"unknown schedule {name!r}; valid schedules: 1F1B (PipeDream-Flush, OneFOneB), ")
    assert message.endswith(f"; did you mean {closest!r}?")


# -- the pools -----------------------------------------------------------------------------------

def _pool_query() -> ChooseQuery:
    # p=3: DualPipeV refuses m=4 < 2p when evaluated; Interleaved1F1B at v=8 (24 stages) has too few layers
    return ChooseQuery(BASE, 3, (4, 8), chunks=(1, 2, 8), schedules=("1F1B", "ZB-H2", "Interleaved1F1B", "DualPipeV"),
                       memory_limit_bytes=1_600_000_000)


def test_serial_and_process_pool_rank_alike() -> None:
    query = _pool_query()
    serial = _serial(query)
    pooled = choose(query, executor="process", workers=2, progress=False)
    assert (serial.executor, pooled.executor) == ("serial", "process")
    assert pooled.to_document()["rows"] == serial.to_document()["rows"]
    assert pooled.to_document()["excluded"] == serial.to_document()["excluded"]
    assert [(e["schedule"], e["v"], e["m"]) for e in serial.excluded] == [
        ("Interleaved1F1B", 8, 4), ("Interleaved1F1B", 8, 8), ("DualPipeV", 2, 4)]
    assert serial.excluded[2]["reason"] == "case 'DualPipeV p=3 m=4 v=2': DualPipeV needs m >= 2p micro-batches (one per stage); got p=3, m=4"
    assert serial.excluded[0]["reason"].startswith("8 transformer layer(s) cannot fill 24 stages (p=3 x 8 chunk(s))")
    assert len(serial.rows) == 7


def test_the_mpi_executor_outside_mpi4py_futures_says_how_to_start_it() -> None:
    with pytest.raises(ConfigError, match=r"'mpirun -n N python -m mpi4py\.futures -m harness choose \.\.\.'"):
        choose(ChooseQuery(BASE, 2, (4,), chunks=(1,), schedules=("1F1B",)), executor="mpi", progress=False)


MPIRUN = shutil.which("mpirun")


@pytest.mark.skipif(MPIRUN is None or importlib.util.find_spec("mpi4py") is None,
                    reason="needs mpirun and mpi4py (apt-get install openmpi-bin libopenmpi-dev; pip install mpi4py)")
def test_an_mpi_pool_ranks_as_the_serial_run(tmp_path: Path) -> None:
    assert MPIRUN is not None
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    out = tmp_path / "out.json"
    cmd = [MPIRUN, "-n", "3", "--oversubscribe", *root, sys.executable, "-m", "mpi4py.futures", "-m", "harness", "choose",
           *MODEL_FLAGS, "-p", "3", "-m", "4", "8", "-v", "1", "2", "8", "--schedules", "1F1B,ZB-H2,Interleaved1F1B,DualPipeV",
           "--memory-limit", "1600000000B", "--json", str(out), "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "7 evaluated, 3 excluded" in proc.stdout and ", mpi)" in proc.stdout
    doc = json.loads(out.read_text())
    serial = _serial(_pool_query()).to_document()
    assert doc["rows"] == _jsonable(serial["rows"])
    assert doc["excluded"] == _jsonable(serial["excluded"])


# -- the combinations ----------------------------------------------------------------------------

def test_each_schedule_is_tried_at_its_own_chunks_and_zb_auto_at_the_limit() -> None:
    names = ("1F1B", "Interleaved1F1B", "ZB-V", "ZB-auto")
    tasks, excluded = combinations(ChooseQuery(BASE, 3, (4, 8), chunks=(1, 2, 3), schedules=names))
    assert excluded == []
    assert tasks == [Task("1F1B", 1, 4), Task("1F1B", 1, 8),
                     Task("Interleaved1F1B", 2, 4), Task("Interleaved1F1B", 2, 8),
                     Task("Interleaved1F1B", 3, 4), Task("Interleaved1F1B", 3, 8),
                     Task("ZB-V", 2, 4), Task("ZB-V", 2, 8),
                     Task("ZB-auto", 1, 4, {"max_pending": 6}), Task("ZB-auto", 1, 8, {"max_pending": 6})]
    limited, _ = combinations(ChooseQuery(BASE, 3, (4, 8), chunks=(1, 2, 3), schedules=names, memory_limit_bytes=80 * 2**30))
    assert [t.options for t in limited if t.schedule == "ZB-auto"] == [{}, {}]
    assert [(t.schedule, t.v, t.m) for t in limited] == [(t.schedule, t.v, t.m) for t in tasks]

    only_one, excluded = combinations(ChooseQuery(BASE, 2, (4,), chunks=(1,), schedules=("1F1B", "Interleaved1F1B", "ZB-V")))
    assert only_one == [Task("1F1B", 1, 4), Task("ZB-V", 2, 4)]
    assert excluded == [{"schedule": "Interleaved1F1B", "v": None, "m": None,
                         "reason": "Interleaved1F1B interleaves v >= 2 chunks per rank and the query's chunks are [1]"}]


def test_a_fixed_layout_with_another_stage_count_is_excluded_naming_both() -> None:
    query = ChooseQuery(BASE, 2, (4, 8), chunks=(1, 2), schedules=("1F1B", "Interleaved1F1B"), layout="Et*5|t*3L")
    tasks, excluded = combinations(query)
    assert tasks == [Task("1F1B", 1, 4), Task("1F1B", 1, 8)]
    reason = "the layout 'Et*5|t*3L' has 2 stage(s); Interleaved1F1B at p=2, v=2 has 4"
    assert excluded == [{"schedule": "Interleaved1F1B", "v": 2, "m": m, "reason": reason} for m in (4, 8)]
    result = _serial(query)
    assert result.excluded == excluded
    assert [(r["schedule"], r["m"], r["layout"]) for r in result.rows] == [("1F1B", 8, "Et*5|t*3L"), ("1F1B", 4, "Et*5|t*3L")]


def test_a_given_layout_s_baselines_are_named_for_it_not_the_even_split(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["choose", *SMALL_FLAGS[:-4], "-m", "8", "--schedules", "1F1B", "ZB-H1", "--layout", "Et*5|t*3L",
            "--memory-limit", "76042240B", "--json", str(tmp_path / "l.json"), "--no-progress"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    doc = json.loads((tmp_path / "l.json").read_text())
    got = [(r["schedule"], r["step_ns"], r["recompute"], {name: (b["layout"], b["recompute"], b["step_ns"], b["fits"])
                                                          for name, b in r["search"]["baselines"].items()}) for r in doc["rows"]]
    assert got == [
        ("ZB-H1", 3_321_569, ["full", "none"], {"given layout, no recomputation": ("Et*5|t*3L", "none", 2_449_153, False),
                                                "given layout, best uniform recomputation": ("Et*5|t*3L", "full", 3_387_000, True)}),
        ("1F1B", 3_388_520, ["full", "none"], {"given layout, no recomputation": ("Et*5|t*3L", "none", 2_516_112, False),
                                               "given layout, best uniform recomputation": ("Et*5|t*3L", "full", 3_453_951, True)})]
    assert "even split" not in out and "even-split" not in out
    assert ("the best schedule on the given layout Et*5|t*3L (ZB-H1 v=1 m=8, best uniform recomputation): 3.39 ms, 1.9 % slower "
            "than the choice") in out.splitlines()
    # the layout searched or evened: the even split's names, and the line compares against the even split
    assert set(search_layout("1F1B", 2, 8, 1, SMALL, layout="even").baselines) == {
        "even split, no recomputation", "even split, best uniform recomputation"}


@pytest.mark.parametrize(("layout", "message"), [
    ("Et*3|t*4L", "stage layout 'Et*3|t*4L' holds 7 transformer layer(s), but the model has 8"),
    ("Et*4|Lt*4", "stage layout 'Et*4|Lt*4': stage 1 ('Ltttt') must end with its one LM head and loss L"),
    ("t*4|t*4", "cost model: vocab_size=1000 puts the embedding and the LM head on the end stages, but the layout 't*4|t*4' has no "
                "E (the embedding, first stage) and no L (the LM head and loss, last stage): add them (e.g. 'Etttt|ttttL'), or give "
                "vocab_size=0 to leave them out"),
])
def test_a_bad_layout_string_is_refused_before_anything_is_evaluated(layout: str, message: str,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["choose", *SMALL_FLAGS, "--layout", layout]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no row, no exclusion: refused as an argument
    assert captured.err.splitlines()[0] == f"error: --layout: {message}"
    with pytest.raises(ConfigError) as info:
        ChooseQuery(SMALL, 2, (4,), layout=layout)
    assert str(info.value) == f"choose: {message}"
    # a syntax error names the position in the string
    assert main(["choose", *SMALL_FLAGS, "--layout", "Et*4|x*4L"]) == 2
    assert capsys.readouterr().err.startswith("error: --layout: stage layout 'Et*4|x*4L', position 5: unknown symbol 'x'")


def test_a_layout_with_groups_counts_its_stages_as_megatron_does() -> None:
    # '(tt|)*2' is two stages; counting '|' in the text would say one
    query = ChooseQuery(SMALL, 2, (4,), chunks=(1, 2), schedules=("1F1B", "Interleaved1F1B"), layout="E(tt|)*3ttL")
    assert query.fixed_stages == 4
    tasks, excluded = combinations(query)
    assert tasks == [Task("Interleaved1F1B", 2, 4)]
    assert excluded == [{"schedule": "1F1B", "v": 1, "m": 4,
                         "reason": "the layout 'E(tt|)*3ttL' has 4 stage(s); 1F1B at p=2, v=1 has 2"}]


# -- the command line ----------------------------------------------------------------------------

def test_the_command_line_writes_json_csv_and_the_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["choose", *MODEL_FLAGS, "-p", "2", "-m", "4", "8", "-v", "1", "2", "--schedules", "1F1B", "ZB-H2", "Interleaved1F1B",
            "--memory-limit", "2GiB", "--json", str(tmp_path / "c.json"), "--csv", str(tmp_path / "c.csv"),
            "--out", str(tmp_path / "page"), "--timelines", "1", "--no-progress"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    api = _serial(ChooseQuery(BASE, 2, (4, 8), chunks=(1, 2), schedules=("1F1B", "ZB-H2", "Interleaved1F1B"),
                              memory_limit_bytes=2 * 2**30))
    doc = json.loads((tmp_path / "c.json").read_text())
    assert set(doc) >= {"query", "rows", "excluded", "limit_bytes", "smallest_fitting_limit_bytes"}
    assert doc["limit_bytes"] == 2 * 2**30 and doc["excluded"] == []
    assert len(doc["rows"]) == 6 and all(set(r) == ROW_KEYS for r in doc["rows"])
    assert doc["rows"] == _jsonable(api.to_document()["rows"])
    with (tmp_path / "c.csv").open(newline="") as f:
        lines = list(csv.reader(f))
    assert lines[0] == ["rank", "schedule", "v", "m", "step_ns", "bubble_fraction", "peak_bytes", "fits", "best", "layout", "recompute",
                        "options", "comm_model", "peak_bytes_per_rank"]
    assert [(int(c[0]), c[1], int(c[2]), int(c[3]), int(c[4])) for c in lines[1:]] == [
        (r["rank"], r["schedule"], r["v"], r["m"], r["step_ns"]) for r in api.rows]
    best = api.best
    assert best is not None
    page = (tmp_path / "page" / "index.html").read_text()
    assert best["schedule"] in page
    assert json.loads((tmp_path / "page" / "choose.json").read_text())["rows"] == doc["rows"]
    chosen = [line for line in out.splitlines() if line.startswith("chosen: ")]
    assert len(chosen) == 1
    assert chosen[0].startswith(f"chosen: {best['schedule']} v={best['v']} m={best['m']}, layout {best['layout']}, recompute ")
    assert chosen[0].endswith(f"peak {best['peak_bytes'] / 2**30:.2f} GiB of 2.00 GiB")
    assert best["peak_bytes"] >= 2**30  # so GiB is the unit that shows it
    assert out.startswith("choose: 6 combination(s) at p=2, 6 evaluated, 0 excluded (")


VOCAB = dataclasses.replace(SMALL, vocab_size=32000)  # a large LM head: the layout search moves layers off the last stage
VOCAB_FLAGS = ["--hidden-size", "256", "--num-layers", "8", "--seq-length", "128", "--num-attention-heads", "4",
               "--vocab-size", "32000", "--tflops", "10", "-p", "2", "--schedules", "1F1B", "ZB-H1", "--no-progress"]


@pytest.mark.parametrize(("flags", "base", "query", "top"), [
    (["-m", "4"], {}, {}, (2_677_641, "Et*8|L", "none")),
    # m = global batch / (micro-batch size x data-parallel size) = 16 / (2 x 2) = 4, at b = 2
    (["--global-batch-size", "16", "--data-parallel-size", "2", "--micro-batch-size", "2"], {"micro_batch_size": 2}, {},
     (5_355_283, "Et*8|L", "none")),
    (["-m", "4", "--ffn-hidden-size", "512"], {"ffn_hidden_size": 512}, {}, (2_623_954, "Et*8|L", "none")),
    (["-m", "4", "--num-query-groups", "2"], {"num_query_groups": 2}, {}, (2_664_220, "Et*8|L", "none")),
    (["-m", "4", "--comm-model", "edge"], {}, {"comm_model": "edge"}, (2_677_641, "Et*8|L", "none")),
    (["-m", "4", "--recompute", "full"], {}, {"recompute": "full"}, (2_889_033, "Et*8|L", "full")),
    (["-m", "4", "--layout", "even"], {}, {"layout": "even"}, (3_563_483, "Et*4|t*4L", "none")),
    # 65,536-byte activations at 1 GB/s + 5 µs: 70,536 ns per transfer, one on the critical path under edge
    (["-m", "4", "--p2p-bandwidth", "1", "--p2p-latency", "5", "--comm-model", "edge"],
     {"p2p_gbytes_per_s": 1.0, "p2p_latency_ns": 5000}, {"comm_model": "edge"}, (2_748_177, "Et*8|L", "none")),
    (["-m", "4", "--p2p-bandwidth", "1", "--p2p-latency", "5"], {"p2p_gbytes_per_s": 1.0, "p2p_latency_ns": 5000}, {},
     (2_889_249, "Et*8|L", "none")),
    (["-m", "4", "--tensor-model-parallel-size", "2", "--tp-bandwidth", "50"], {"tensor_parallel_size": 2, "tp_gbytes_per_s": 50.0},
     {}, (1_359_798, "Et*8|L", "none")),
], ids=["default", "global-batch-size", "ffn-hidden-size", "num-query-groups", "comm-model", "recompute", "layout", "p2p-edge",
        "p2p-stream", "tp-bandwidth"])
def test_each_model_and_search_flag_reaches_the_answer(flags: list[str], base: dict[str, Any], query: dict[str, Any],
                                                       top: tuple[int, str, str], tmp_path: Path) -> None:
    """Each flag's answer equals the API's with the field it names set, and its top row has the exact sim figures."""
    out = tmp_path / "c.json"
    assert main(["choose", *VOCAB_FLAGS, *flags, "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    api = _serial(ChooseQuery(dataclasses.replace(VOCAB, **base), 2, (4,), schedules=("1F1B", "ZB-H1"), **query))
    assert doc["rows"] == _jsonable(api.to_document()["rows"])
    assert doc["query"]["base"] == _jsonable(api.query.to_dict()["base"])
    first = doc["rows"][0]
    assert (first["schedule"], first["m"], first["step_ns"], first["layout"], first["recompute"]) == ("ZB-H1", 4, *top)
    assert {r["comm_model"] for r in doc["rows"]} == {query.get("comm_model", "stream")}
    run = run_case(api.case(1), backend="sim")
    assert round(run.metrics.step_time_median_ns) == first["step_ns"]
    if query.get("comm_model") == "edge":  # under the model named (without --p2p-bandwidth, transfers cost nothing: the same steps)
        assert any(a.startswith("comm model 'edge'") for a in doc["assumptions"])


@pytest.mark.parametrize(("flags", "message"), [
    (["--p2p-bandwidth", "0"], "--p2p-bandwidth must be a number of gigabytes per second above 0, got 0"),
    (["--p2p-bandwidth", "inf"], "--p2p-bandwidth must be a number of gigabytes per second above 0, got inf"),
    (["--p2p-latency=-1"], "--p2p-latency must be a number of microseconds, 0 or more, got -1"),
    (["--tp-bandwidth", "50"], "--tp-bandwidth is the bandwidth of the tensor-parallel collectives: give --tensor-model-parallel-size "
                               "above 1"),
    (["--tflops", "inf"], "--tflops must be a number of TFLOP/s above 0, got inf"),
    (["--json", "-"], "--json -: give a file (the table goes to standard output; /dev/stdout adds the JSON after it)"),
    (["--out", "-"], "--out -: give a folder"),
    (["--json", "same.out", "--csv", "./same.out"], "--json and --csv name the same file, same.out: give each its own"),
])
def test_bad_link_flags_are_refused_naming_them(flags: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["choose", *VOCAB_FLAGS, "-m", "4", *flags]) == 2
    assert capsys.readouterr().err.strip() == f"error: {message}"


def test_a_global_batch_that_does_not_divide_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["choose", *VOCAB_FLAGS, "--global-batch-size", "15", "--data-parallel-size", "2"]) == 2
    assert capsys.readouterr().err.strip() == ("error: --global-batch-size 15 is not a multiple of --micro-batch-size x "
                                               "--data-parallel-size = 1 x 2 = 2")


def test_top_prints_that_many_rows(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["choose", *VOCAB_FLAGS, "-m", "4", "8", "--top", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = next(k for k, line in enumerate(lines) if line.lstrip().startswith("#  schedule"))
    rows = _serial(ChooseQuery(VOCAB, 2, (4, 8), schedules=("1F1B", "ZB-H1"))).rows
    assert [(r["schedule"], r["m"], r["step_ns"]) for r in rows] == [
        ("ZB-H1", 8, 5_194_221), ("ZB-H1", 4, 2_677_641), ("1F1B", 8, 5_516_344), ("1F1B", 4, 2_999_764)]
    # one row (ms, and ms per micro-batch across two m), then the count of the others
    assert lines[head + 1].split()[:6] == ["1*", "ZB-H1", "1", "8", "5.19", "0.649"]  # three significant digits at least
    assert lines[head + 2] == "... 3 more row(s) (--top, --json, --csv)"


def test_a_memory_limit_without_a_unit_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["choose", *MODEL_FLAGS, "-p", "2", "-m", "4", "--memory-limit", "80"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: pipeline-harness choose ")  # argparse's usage, then its one error line
    errors = [line for line in err.splitlines() if "error:" in line]
    assert errors == ["pipeline-harness choose: error: argument --memory-limit: '80' has no unit: "
                      "write e.g. 80GiB (2^30 bytes) or 80GB (10^9 bytes)"]
    assert err.endswith(errors[0] + "\n") and "Traceback" not in err


# -- confirming runs -----------------------------------------------------------------------------

def test_confirming_on_sim_measures_what_was_predicted() -> None:
    result = _serial(ChooseQuery(BASE, 2, (4, 8), chunks=(1, 2), schedules=GRID, memory_limit_bytes=1_100_000_000))
    done = confirm(result, "sim", top=2)
    assert [(c.rank, c.label, c.backend, c.error) for c in done] == [
        (1, "ZB-H2 v=1 m=8", "sim", None), (2, "ZB-H1 v=1 m=8", "sim", None)]
    for c, row in zip(done, result.rows):
        assert c.predicted_ns == row["step_ns"]
        assert c.measured_ns == row["step_ns"] and c.ratio == 1.0
        assert c.steps >= 1


# -- confirming runs from the command line (--run) ------------------------------------------------

def _confirm_lines(out: str) -> list[tuple[int, str, str]]:
    """``(rank, label, what)`` of each confirmation line: ``what`` is the predicted figure's text or ``failed``."""
    found = []
    for line in out.splitlines():
        if line.startswith("  #") and (": predicted " in line or ": failed: " in line):
            head, _, rest = line.strip().partition(": ")
            rank, _, label = head.partition(" ")
            found.append((int(rank[1:]), label, "failed" if rest.startswith("failed: ") else rest.split(",")[0]))
    return found


def _small_rows() -> list[dict[str, Any]]:
    return _serial(ChooseQuery(SMALL, 2, (4,), schedules=("1F1B", "ZB-H1"))).rows


def test_run_takes_only_the_backends_a_row_can_be_confirmed_on(capsys: pytest.CaptureFixture[str]) -> None:
    from harness.choose.confirm import BACKENDS
    from harness.cli.choose import _RUN_BACKENDS

    assert _RUN_BACKENDS == BACKENDS == ("sim", "cpu", "cuda", "mpi", "torch")
    with pytest.raises(SystemExit) as info:
        main(["choose", *SMALL_FLAGS, "--run", "foo"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert ("error: argument --run: invalid choice: 'foo' (choose from 'sim', 'cpu', 'cuda', 'mpi', 'torch')") in err
    with pytest.raises(ConfigError, match=r"confirm: unknown backend 'foo'; a row can be confirmed on sim, cpu, cuda, mpi, torch"):
        confirm(_serial(ChooseQuery(SMALL, 2, (4,), schedules=("1F1B",))), "foo")


def test_run_cpu_confirms_the_top_rows_in_rank_order(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["choose", *SMALL_FLAGS, "--run", "cpu", "--top", "2", "--steps", "1:3"]) == 0
    out = capsys.readouterr().out
    rows = _small_rows()
    assert [(r["schedule"], r["step_ns"]) for r in rows] == [("ZB-H1", 1_125_539), ("1F1B", 1_286_600)]
    assert "running the top 2 fitting row(s) on cpu:" in out
    assert _confirm_lines(out) == [(1, "ZB-H1 v=1 m=4", "predicted 1.126 ms"), (2, "1F1B v=1 m=4", "predicted 1.287 ms")]
    assert out.count(" over 2 step(s): ") == 2


def _fake_launcher(tmp_path: Path, body: str) -> str:
    script = tmp_path / "fake-mpirun"
    script.write_text(f"#!{sys.executable}\nimport sys, time\n{body}\n")
    script.chmod(0o755)
    return str(script)


def test_a_row_that_fails_to_confirm_makes_the_command_fail_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    launcher = _fake_launcher(tmp_path, "print('no slots for', sys.argv[1:3]); sys.exit(3)")
    assert main(["choose", *SMALL_FLAGS, "--run", "mpi", "--top", "2", "--mpirun", launcher]) == 2
    captured = capsys.readouterr()
    assert _confirm_lines(captured.err) == [(1, "ZB-H1 v=1 m=4", "failed"), (2, "1F1B v=1 m=4", "failed")]
    assert ("#1 ZB-H1 v=1 m=4: the mpirun job confirming it on mpi exited with status 3: no slots for ['-n', '2']"
            in captured.err)
    assert captured.err.rstrip().endswith(
        "error: 2 of 2 confirming run(s) on mpi failed: #1 ZB-H1 v=1 m=4, #2 1F1B v=1 m=4 (their errors are above)")
    assert "chosen: ZB-H1 v=1 m=4" in captured.out  # the answer is still printed
    # a launcher that is not there, and one that never ends: stopped at the timeout
    assert main(["choose", *SMALL_FLAGS, "--run", "mpi", "--top", "1", "--mpirun", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert f"#1 ZB-H1 v=1 m=4: cannot confirm on mpi: '{tmp_path / 'nowhere'}' is not found" in err
    assert err.rstrip().endswith("error: 1 of 1 confirming run(s) on mpi failed: #1 ZB-H1 v=1 m=4 (their errors are above)")
    sleeper = _fake_launcher(tmp_path, "time.sleep(600)")
    assert main(["choose", *SMALL_FLAGS, "--run", "mpi", "--top", "1", "--mpirun", sleeper, "--run-timeout", "1"]) == 2
    assert "#1 ZB-H1 v=1 m=4: the mpirun job confirming it on mpi did not end within 1 s and was stopped" in capsys.readouterr().err


def test_run_options_are_checked_before_anything_is_evaluated(capsys: pytest.CaptureFixture[str]) -> None:
    cases = [
        (["--run", "mpi", "--comm-model", "free"], "error: --run mpi moves data with send/receive jobs, which comm model 'free' has none "
                                                   "of: choose with --comm-model stream to confirm on mpi"),
        (["--run", "mpi", "--comm-model", "edge"], "error: --run mpi: comm_model 'edge' charges a transfer as a delay on the dependency, "
                                                   "which only a simulation can do; the mpi backend moves real data: use comm_model "
                                                   "'stream' (send/receive jobs on comm streams) there, or run 'edge' on --backend=sim"),
        (["--run", "cpu", "--comm-model", "blocking"], "error: --run cpu: comm_model 'blocking' puts transfers on the compute streams with "
                                                       "a rendezvous, which only the simulated clock runs; the cpu backend moves real data "
                                                       "on comm streams: use comm_model 'stream' there, or run 'blocking' on --backend=sim"),
        (["--mpirun", "mpirun"], "error: --mpirun is for --run mpi (the mpirun job each confirmed row runs as)"),
        (["--run", "cpu", "--run-timeout", "5"], "error: --run-timeout is for --run mpi (the mpirun job each confirmed row runs as)"),
        (["--run", "mpi", "--run-timeout", "0"], "error: --run-timeout must be above 0 seconds, got 0"),
    ]
    for extra, message in cases:
        assert main(["choose", *SMALL_FLAGS, *extra]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""  # refused before the chooser ran
        assert captured.err.strip() == message


MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


@pytest.mark.skipif(MPIRUN is None or importlib.util.find_spec("mpi4py") is None,
                    reason="needs mpirun and mpi4py (apt-get install openmpi-bin libopenmpi-dev; pip install mpi4py)")
def test_run_mpi_launches_each_row_as_its_own_mpirun_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    for key, value in MPI_ENV.items():
        monkeypatch.setenv(key, value)
    expected = [(1, "ZB-H1 v=1 m=4", "predicted 1.126 ms"), (2, "1F1B v=1 m=4", "predicted 1.287 ms")]
    # from a plain process
    assert main(["choose", *SMALL_FLAGS, "--run", "mpi", "--top", "2", "--steps", "1:3"]) == 0
    out = capsys.readouterr().out
    assert _confirm_lines(out) == expected and out.count(" over 2 step(s): ") == 2
    # from rank 0 of an mpi4py.futures pool: the row's job is started apart from the pool's ranks
    assert MPIRUN is not None
    cmd = [MPIRUN, "-n", "2", "--oversubscribe", sys.executable, "-m", "mpi4py.futures", "-m", "harness", "choose", *SMALL_FLAGS,
           "--run", "mpi", "--top", "2", "--steps", "1:3"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ", mpi)" in proc.stdout.splitlines()[0]
    assert _confirm_lines(proc.stdout) == expected and proc.stdout.count(" over 2 step(s): ") == 2


def test_the_mpi_job_environment_leaves_out_the_launcher_that_started_the_chooser() -> None:
    from harness.choose.mpi_confirm import job_env

    outer = {"PATH": "/usr/bin", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "0", "OMPI_MCA_orte_hnp_uri": "x",
             "OMPI_MCA_ess": "^singleton", "OMPI_MCA_mpi_oversubscribe": "0", "PMIX_RANK": "0", "PMIX_NAMESPACE": "1",
             "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_MCA_btl_base_verbose": "0"}
    assert job_env(outer) == {"PATH": "/usr/bin", "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_MCA_btl_base_verbose": "0",
                              "OMPI_MCA_rmaps_base_oversubscribe": "1"}
    plain = {"PATH": "/usr/bin", "PMI_PORT": "user's", "OMPI_MCA_rmaps_base_oversubscribe": "0"}
    assert job_env(plain) == plain  # not under a launcher: nothing is taken out, and the user's setting kept
