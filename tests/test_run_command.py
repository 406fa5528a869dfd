"""``python -m harness run``: one schedule on a backend, its report written (sim here; mpi in test_mpi.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main


def test_run_writes_the_report_of_one_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "1F1B", "-p", "2", "-m", "4", "--backend", "sim", "--out", str(tmp_path / "rep")]) == 0
    # 1F1B p=2 m=4, F=1 ms, B=2 ms, send/receive free: (m + p - 1) x (F + B) = 15 ms, bubble (p-1)/(m+p-1) = 20 %
    assert capsys.readouterr().out == (f"1F1B p=2 m=4 on sim: median step 15.000 ms, bubble 20.0%; report: {tmp_path / 'rep' / 'index.html'}\n"
                                       "  assumes: comm model 'stream': transfers cost nothing (the cost model gives them 0 ns, so no "
                                       "send/receive jobs)\n")
    (case,) = json.loads((tmp_path / "rep" / "results.json").read_text())["cases"]
    assert case["backend"] == "sim" and case["metrics"]["step_time_median_ns"] == 15_000_000
    assert case["steps"] == [1]  # sim is exact: one recorded step after one warm-up, not five identical ones


def test_run_prints_the_notes_and_flags_under_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # jobs of 0.1 and 0.2 ms on cpu: thread hand-offs dominate, as the pytest summary says in a note
    assert main(["run", "1F1B", "-p", "2", "-m", "2", "--forward-ms", "0.1", "--backward-ms", "0.2", "--backend", "cpu",
                 "--steps", "1:4", "--out", str(tmp_path / "rep")]) == 0
    first, *rest = capsys.readouterr().out.splitlines()
    rest = [line for line in rest if not line.startswith("  assumes: ")]  # the case's assumptions, under its line
    (case,) = json.loads((tmp_path / "rep" / "results.json").read_text())["cases"]
    predicted = case["fidelity"]["predicted_step_ns"]
    assert predicted == 900_000  # (m + p - 1) x (F + B) = 3 x 0.3 ms
    assert first.startswith("1F1B p=2 m=2 on cpu: median step ") and f"vs the cost model's {predicted / 1e6:.3f} ms)" in first
    assert rest[0].startswith("note: 1F1B p=2 m=2: median job ") and "use --backend=sim for exact figures" in rest[0]
    assert [line for line in rest if not line.startswith("note: ")] == [
        line for line in rest if line.split(":")[0] in ("unstable", "contended", "does not fit") or " flagged " in line]


def test_run_names_a_bad_backend(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "1F1B", "-p", "2", "-m", "4", "--backend", "tpu"]) == 2
    assert "unknown backend 'tpu'; valid backends: auto, sim, cpu, cuda, mpi, torch" in capsys.readouterr().err


def test_backend_mpi_without_mpi4py_stops_with_what_to_install(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("import sys\nsys.modules['mpi4py'] = None  # as if mpi4py were not installed\n")
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("--backend=mpi", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert ("the mpi backend cannot run here: import of mpi4py halted; None in sys.modules; install Open MPI (Debian: apt-get install "
            "openmpi-bin libopenmpi-dev) and mpi4py (pip install -e '.[mpi]'), then launch under mpirun") in result.stderr.str()


def _sim_parts(tmp_path: Path, offset_ns: int) -> list[Path]:
    """A 1F1B p=2 m=2 sim run with send/receive jobs, cut into one part file per rank as separate
    processes would write them: rank 1 on a clock ``offset_ns`` ahead, its alignment estimated exactly."""
    from dataclasses import replace

    from harness import FixedCost, PipelineCase
    from harness.distributed.clock_sync import ClockAlignment, OffsetEstimate
    from harness.distributed.rank_merge import RankPart, write_part
    from harness.records import RunRecords
    from harness.runner import run_case

    r = run_case(PipelineCase("1F1B", stages=2, microbatches=2, cost=FixedCost.ms(F=1, B=2), comm=True), "sim", range(0, 2))
    rec = r.records
    paths = []
    for rank in (0, 1):
        own = RunRecords(backend="cpu", device={"backend": "cpu", "workload": "timed"}, num_ranks=2,
                         streams=[s for s in rec.streams if s.startswith(f"rank{rank}/")], steps=list(rec.steps),
                         step_start_ns=list(rec.step_start_ns), step_end_ns=list(rec.step_end_ns),
                         jobs=[replace(j) for j in rec.jobs if j.rank == rank], enqueue_ns=list(rec.enqueue_ns),
                         warmup_steps=rec.warmup_steps)
        anchor = 1_000_000 + (offset_ns if rank else 0)  # the same instant, read on each rank's own clock
        clock = ClockAlignment(1, OffsetEstimate(offset_ns, 500, anchor, 1000, 8), None) if rank else None
        paths.append(write_part(tmp_path / f"rank{rank}.json", RankPart(rank, f"host{rank}", own, anchor, clock, own.device)))
    return paths


def test_merge_ranks_fails_when_its_case_cannot_be_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = _sim_parts(tmp_path, 0)
    doc = json.loads(paths[1].read_text())
    jobs = doc["records"]["jobs"]
    k = next(i for i, j in enumerate(jobs) if j[3] == "F")
    jobs[k][8] = 2**62  # a forward that ends ~146 years later: the step's figures can no longer be reported
    doc["records"]["step_end_ns"][doc["records"]["steps"].index(jobs[k][6])] = 2**62  # (its step with it: a part's span holds its jobs)
    paths[1].write_text(json.dumps(doc))
    out = tmp_path / "merged"
    assert main(["merge-ranks", str(paths[0]), str(paths[1]), "1F1B", "-p", "2", "-m", "2", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert "median step" not in captured.out
    assert captured.err.startswith("error: case '1F1B p=2 m=2' ran but cannot be reported: ")
    assert captured.err.rstrip().endswith(f"the report at {out / 'index.html'} holds no case")


def test_merge_ranks_writes_the_report_of_part_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = _sim_parts(tmp_path, 250_000_000)
    out = tmp_path / "merged"
    assert main(["merge-ranks", str(paths[1]), str(paths[0]), "1F1B", "-p", "2", "-m", "2", "--out", str(out)]) == 0
    line = capsys.readouterr().out
    # 2 steps x 4 pairs (2 activations, 2 gradients); (m + p - 1)(F + B) = 9 ms with free transfers: the sim run, back on one clock
    assert "2 rank(s) merged onto rank 0's clock, 8 send/receive pair(s) checked, 0 violation(s); median step 9.000 ms" in line
    (case,) = json.loads((out / "results.json").read_text())["cases"]
    assert case["backend"] == "mpi" and case["metrics"]["step_time_median_ns"] == 9_000_000
    assert case["rank_labels"] == ["rank 0 (host0)", "rank 1 (host1)"]


def test_merge_ranks_refuses_parts_of_another_schedule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = _sim_parts(tmp_path, 0)
    assert main(["merge-ranks", *map(str, paths), "1F1B", "-p", "2", "-m", "3", "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert "step 0 of the records is not this schedule's" in err and "missing: rank 0 0B2" in err
    assert not (tmp_path / "m" / "results.json").exists()


def test_merge_ranks_refuses_the_same_jobs_in_another_schedules_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A new user's find: FThenB has the same jobs as 1F1B, and the set check let the merge through as FThenB.
    paths = _sim_parts(tmp_path, 0)
    assert main(["merge-ranks", *map(str, paths), "FThenB", "-p", "2", "-m", "2", "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    # 1F1B p=2 m=2 on rank 1: F0 B0 F1 B1; FThenB: F0 F1 B0 B1
    assert "step 0 of the records ran rank1/compute's jobs in another order than FThenB's: job 2 is 1B0, the schedule's 1F1" in err
    assert not (tmp_path / "m" / "results.json").exists()


def test_merge_ranks_refuses_a_damaged_part_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = _sim_parts(tmp_path, 0)
    doc = json.loads(paths[1].read_text())
    job = doc["records"]["jobs"][3]
    job[8] = job[7] - 10  # ends 10 ns before it starts
    paths[1].write_text(json.dumps(doc))
    assert main(["merge-ranks", *map(str, paths), "1F1B", "-p", "2", "-m", "2", "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert f"{paths[1]}: rank 1's job" in err and "ends" in err and "the part is damaged" in err
    assert not (tmp_path / "m").exists()


def test_merge_ranks_flags_a_clock_alignment_shown_wrong(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = _sim_parts(tmp_path, 0)
    doc = json.loads(paths[1].read_text())
    doc["clock"]["start"]["offset_ns"] = 5_000_000  # rank 1's jobs land 5 ms early: receives before their sends
    paths[1].write_text(json.dumps(doc))
    out = tmp_path / "m"
    assert main(["merge-ranks", *map(str, paths), "1F1B", "-p", "2", "-m", "2", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "note: causality:" in err and "beyond the bound: the clock alignment is wrong for them" in err
    (case,) = json.loads((out / "results.json").read_text())["cases"]
    # a loaded machine may earn the case a 'contended' flag too: the merge measures its own load
    assert [f["kind"] for f in case["flags"] if f["kind"] != "contended"] == ["clocks"]


@pytest.mark.parametrize(("args", "message"), [
    (["--forward-ms", "-1"], "--forward-ms must be a positive number of ms, got -1"),
    (["--backward-ms", "nan"], "--backward-ms must be a positive number of ms, got nan"),
    (["--backend", "sim", "--transfer-timeout-s", "5"], "--transfer-timeout-s is for --backend mpi"),
    (["--backend", "sim", "--steps", "5:2"], "--steps: "),
])
def test_run_names_the_option_at_fault(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "1F1B", "-p", "2", "-m", "4", *args]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(("command", "args", "message"), [
    ("run", ["-p", "0", "-m", "4"], "pipeline-harness run: error: argument -p: pipeline ranks must be at least 1, got 0"),
    ("run", ["-p", "2", "-m", "x"], "pipeline-harness run: error: argument -m: expected a whole number of micro-batches, got 'x'"),
    ("show", ["-p", "4", "-m", "-1"], "pipeline-harness show: error: argument -m: micro-batches must be at least 1, got -1"),
    ("show", ["-p", "4", "-m", "8", "-v", "0"], "pipeline-harness show: error: argument -v: chunks per rank must be at least 1, got 0"),
])
def test_sizes_are_checked_as_the_options_they_are(command: str, args: list[str], message: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # they were refused as the case's fields ("stages must be a positive integer, got 0"), which the command line has not
    with pytest.raises(SystemExit) as info:
        main([command, "1F1B", *args])
    assert info.value.code == 2
    assert capsys.readouterr().err.rstrip().endswith(message)


def test_merge_ranks_without_a_schedule_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = _sim_parts(tmp_path, 0)
    assert main(["merge-ranks", *map(str, paths), "-p", "2", "-m", "2", "--out", str(tmp_path / "m")]) == 2
    assert f"{str(paths[1])!r} looks like a part file, not a schedule: give the schedule after the part files" in capsys.readouterr().err


def test_an_unknown_option_is_named_with_the_commands_own_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["run", "1F1B", "-p", "2", "-m", "4", "--backnd", "sim"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: pipeline-harness run ")
    assert err.rstrip().endswith("pipeline-harness run: error: unrecognized arguments: --backnd sim")


def test_run_takes_the_trace_options_and_says_a_size_warning_as_a_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "1F1B", "-p", "2", "-m", "4", "--backend", "sim", "--trace-gzip", "--trace-steps=1", "--size-warn-mb=0.001",
                 "--out", str(tmp_path / "rep")]) == 0
    assert [p.name for p in (tmp_path / "rep" / "traces").iterdir()] == ["1F1B_p=2_m=4.json.gz"]
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("warning: the trace of case '1F1B p=2 m=4' will be about ")
    assert "--trace-gzip" not in err[0] and "--trace-no-flows (no dependency arrows)" in err[0]  # only what is not in use yet


def test_merge_ranks_names_a_clock_estimate_field_that_is_not_a_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = _sim_parts(tmp_path, 0)
    doc = json.loads(paths[1].read_text())
    doc["clock"]["start"]["samples"] = "x"
    paths[1].write_text(json.dumps(doc))
    assert main(["merge-ranks", str(paths[0]), str(paths[1]), "1F1B", "-p", "2", "-m", "2", "--out", str(tmp_path / "m")]) == 2
    assert "clock estimate samples must be a whole number of 0 or more, got 'x'" in capsys.readouterr().err


def test_import_torch_refuses_a_clock_offset_past_64_bits(capsys: pytest.CaptureFixture[str]) -> None:
    folder = Path(__file__).parent / "data" / "torch_traces" / "Schedule1F1B_2rank_m4"
    assert main(["import-torch", str(folder), "--clock-offsets", "0,99999999999999999999999"]) == 2
    assert "99999999999999999999999 ns is more than 2**62 ns" in capsys.readouterr().err
