"""The chooser's command line at its edges: its exit statuses (0 chosen, 1 nothing chosen, 2 a bad argument),
a layout string whose stage count no schedule of p ranks can have, the memory limit's spellings and bounds,
the CSV's bubble column, the reason for too few layers, and the notes under confirming runs on cpu."""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import re
from pathlib import Path

import pytest

from harness.choose.confirm import confirm
from harness.choose.query import ChooseQuery, Task, combinations
from harness.choose.rank import ChooseResult, choose
from harness.cli import build_parser, main
from harness.cli.choose import NOTHING_CHOSEN, parse_size
from harness.errors import ConfigError
from harness.model.transformer import TransformerCost

# the trial's model: 8 layers, a 32000-token vocabulary, at p=4
TRIAL_FLAGS = ["--hidden-size", "1024", "--num-layers", "8", "--seq-length", "512", "--num-attention-heads", "8",
               "--vocab-size", "32000", "--tflops", "100", "-p", "4", "--no-progress"]
TRIAL = TransformerCost(hidden_size=1024, seq_len=512, micro_batch_size=1, num_layers=8, tflops=100, vocab_size=32000,
                        num_attention_heads=8)
SMALL_FLAGS = ["--hidden-size", "256", "--num-layers", "8", "--seq-length", "128", "--num-attention-heads", "4",
               "--vocab-size", "1000", "--tflops", "10", "-p", "2", "-m", "4", "--schedules", "1F1B", "ZB-H1", "--no-progress"]
SMALL = TransformerCost(hidden_size=256, seq_len=128, micro_batch_size=1, num_layers=8, tflops=10, vocab_size=1000,
                        num_attention_heads=4)
# jobs of ~9 µs: under the 1 ms the cpu backend can time
TINY_FLAGS = ["--hidden-size", "256", "--num-layers", "8", "--seq-length", "128", "--num-attention-heads", "4", "--tflops", "100",
              "-p", "4", "-m", "8", "--schedules", "1F1B", "--no-progress"]
TINY = TransformerCost(hidden_size=256, seq_len=128, micro_batch_size=1, num_layers=8, tflops=100, num_attention_heads=4)


def _serial(query: ChooseQuery) -> ChooseResult:
    return choose(query, executor="serial", progress=False)


# -- a layout string's stage count ------------------------------------------------------------------

def test_a_layout_whose_stage_count_is_not_a_multiple_of_p_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    message = ("the layout 'Et*4|t*4L' has 2 stage(s), but p=4 pipeline ranks need a multiple of 4 "
               "(p x v stages for v chunks per rank: 4 at v=1, 8 at v=2, ...)")
    assert main(["choose", *TRIAL_FLAGS, "-m", "8", "--layout", "Et*4|t*4L"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # refused as an argument: no row, no exclusion
    assert captured.err == f"error: --layout: {message}\n"
    with pytest.raises(ConfigError) as info:
        ChooseQuery(TRIAL, 4, (8,), layout="Et*4|t*4L")
    assert str(info.value) == f"choose: {message}"
    with pytest.raises(ConfigError, match=r"^choose: the layout 'Et\*2\|t\|t\|t\|t\*2\|tL' has 6 stage\(s\), but p=4 pipeline ranks "):
        ChooseQuery(TRIAL, 4, (8,), layout="Et*2|t|t|t|t*2|tL")


def test_a_layout_of_p_times_v_stages_is_tried_at_that_v() -> None:
    # 8 stages at p=4: v=2 (the V-shapes, interleaving at v=2) even where -v does not list 2; the rest excluded naming both counts
    query = ChooseQuery(TRIAL, 4, (8,), chunks=(1,), schedules=("1F1B", "ZB-V"), layout="Et|t|t|t|t|t|t|tL")
    assert query.fixed_stages == 8
    tasks, excluded = combinations(query)
    assert tasks == [Task("ZB-V", 2, 8)]
    assert excluded == [{"schedule": "1F1B", "v": 1, "m": 8,
                         "reason": "the layout 'Et|t|t|t|t|t|t|tL' has 8 stage(s); 1F1B at p=4, v=1 has 4"}]


# -- exit statuses -----------------------------------------------------------------------------------

def test_nothing_evaluated_exits_1_with_the_reasons_and_still_writes_the_json(tmp_path: Path,
                                                                              capsys: pytest.CaptureFixture[str]) -> None:
    flags = [*TRIAL_FLAGS[:TRIAL_FLAGS.index("--tflops") + 1], "1e-12", *TRIAL_FLAGS[TRIAL_FLAGS.index("--tflops") + 2:]]
    assert NOTHING_CHOSEN == 1
    assert main(["choose", *flags, "-m", "8", "--schedules", "1F1B", "--json", str(tmp_path / "c.json")]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("choose: 1 combination(s) at p=4, 0 evaluated, 1 excluded (")
    assert out[1:4] == [
        "nothing evaluated: each of the 1 combination(s) was excluded, with its reason below",
        "excluded:",
        "  1F1B v=1 m=8: cost model: a F job of stage 0 (2.58e+10 FLOPs at 1e-12 TFLOP/s) would last 2.58e+19 ns; jobs must "
        "last below 9007199254740992 ns (2**53 ns, about 104 days): check the model's sizes and tflops"]
    doc = json.loads((tmp_path / "c.json").read_text())
    assert doc["rows"] == [] and [e["schedule"] for e in doc["excluded"]] == ["1F1B"]
    assert f"wrote {tmp_path / 'c.json'}" in out


def test_nothing_fits_exits_1_and_runs_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["choose", *SMALL_FLAGS, "--memory-limit", "1MiB", "--run", "cpu"]) == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert ("nothing fits 1.00 MiB: the least limit at which one would is 59.13 MiB "
            "(62,005,248 bytes: #1 ZB-H1 v=1 m=4, #2 1F1B v=1 m=4)") in lines
    assert lines[-1] == "no row fits, so none is run on cpu"
    assert "predicted" not in captured.out and captured.err == ""


def test_a_fitting_choice_exits_0() -> None:
    assert main(["choose", *SMALL_FLAGS, "--memory-limit", "80MiB"]) == 0
    assert main(["choose", *SMALL_FLAGS]) == 0  # no limit: every row fits


def test_the_help_says_the_exit_statuses_and_the_units() -> None:
    sub = next(a for a in build_parser()._subparsers._group_actions if isinstance(a, argparse._SubParsersAction))  # type: ignore[union-attr]
    text = " ".join(sub.choices["choose"].format_help().split())
    assert ("Exit status: 0 a row that fits the limit is chosen; 1 none is (no row fits the limit, or no combination could be "
            "evaluated: the table, the files and the reasons are written all the same, and '--run' runs nothing); 2 a bad argument "
            "(refused before anything is evaluated), an unwritable output, or a '--run' row whose run failed.") in text
    assert "B, KB, MB, GB, TB (powers of 10^3) or KiB, MiB, GiB, TiB (powers of 2^10), in any case" in text


# -- the memory limit ----------------------------------------------------------------------------------

def test_memory_limit_units_in_any_case_and_at_most_one_exbibyte(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_size("80gib") == parse_size("80GiB") == parse_size("80 GIB") == 80 * 2**30
    assert parse_size("80gb") == 80 * 10**9
    assert parse_size(f"{2**60}B") == 2**60
    for text in ("1e30GiB", "1048577TiB", "1e400GiB"):  # 1e400 is inf as a float: refused, not an OverflowError
        with pytest.raises(argparse.ArgumentTypeError) as info:
            parse_size(text)
        assert str(info.value) == (f"a memory limit of {text!r} is more than 1 EiB (2^60 bytes) per GPU; check the number "
                                   "and its unit")
    with pytest.raises(SystemExit) as stop:
        main(["choose", *SMALL_FLAGS, "--memory-limit", "1e30GiB"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if "error:" in line] == [
        "pipeline-harness choose: error: argument --memory-limit: a memory limit of '1e30GiB' is more than 1 EiB "
        "(2^60 bytes) per GPU; check the number and its unit"]
    with pytest.raises(argparse.ArgumentTypeError, match=r"^unknown unit 'EiB' in '1EiB'; use B, KB, MB, GB, TB \(powers of 10\^3\) "
                                                        r"or KiB, MiB, GiB, TiB \(powers of 2\^10\), in any case$"):
        parse_size("1EiB")


# -- the CSV's bubble column -------------------------------------------------------------------------

def test_the_csv_names_its_bubble_column_a_fraction(tmp_path: Path) -> None:
    assert main(["choose", *TRIAL_FLAGS, "-m", "8", "--schedules", "1F1B", "--csv", str(tmp_path / "c.csv"),
                 "--json", str(tmp_path / "c.json")]) == 0
    with (tmp_path / "c.csv").open(newline="") as f:
        head, row = list(csv.reader(f))
    assert head[:8] == ["rank", "schedule", "v", "m", "step_ns", "bubble_fraction", "peak_bytes", "fits"]
    (json_row,) = json.loads((tmp_path / "c.json").read_text())["rows"]
    assert row[5] == f"{json_row['bubble']:.6f}" and 0 < json_row["bubble"] < 1
    (api_row,) = _serial(ChooseQuery(TRIAL, 4, (8,), schedules=("1F1B",))).rows
    assert (int(row[4]), float(row[5])) == (api_row["step_ns"], round(api_row["bubble"], 6))


# -- too few layers for the stages ---------------------------------------------------------------------

def test_too_few_layers_names_the_rule_the_search_keeps() -> None:
    _, excluded = combinations(ChooseQuery(SMALL, 4, (4,), chunks=(3,), schedules=("Interleaved1F1B",)))
    assert [e["reason"] for e in excluded] == [
        "8 transformer layer(s) cannot fill 12 stages (p=4 x 3 chunk(s)): every stage but the last needs at least one "
        "transformer layer (the last may hold the LM head alone), so at least 11 are needed"]
    _, excluded = combinations(ChooseQuery(dataclasses.replace(SMALL, vocab_size=0), 4, (4,), chunks=(3,),
                                           schedules=("Interleaved1F1B",)))
    assert [e["reason"] for e in excluded] == [
        "8 transformer layer(s) cannot fill 12 stages (p=4 x 3 chunk(s)): every stage needs at least one transformer layer, "
        "so at least 12 are needed"]
    # at the edge the rule allows: 8 layers on 9 stages, the last holding the LM head alone
    (row,) = _serial(ChooseQuery(SMALL, 9, (9,), schedules=("1F1B",))).rows
    assert (row["layout"], row["step_ns"]) == ("Et|t|t|t|t|t|t|t|L", 966_368)


# -- confirming runs of sub-millisecond jobs on cpu ------------------------------------------------------

CPU_NOTE = re.compile(r"note: median job \d+ µs: on the cpu backend each cross-stage dependency costs a thread hand-off of "
                      r"~50-100 µs, which inflates step time and bubble for jobs under 1 ms; use --backend=sim for exact figures")


def test_confirming_tiny_jobs_on_cpu_gives_run_s_note_and_three_decimals(capsys: pytest.CaptureFixture[str]) -> None:
    (row,) = _serial(ChooseQuery(TINY, 4, (8,), schedules=("1F1B",))).rows
    assert row["step_ns"] == 132_880
    assert main(["choose", *TINY_FLAGS, "--run", "cpu", "--top", "1", "--steps", "1:3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    k = next(k for k, line in enumerate(lines) if line.startswith("  #1 1F1B v=1 m=8: "))
    assert re.fullmatch(r"  #1 1F1B v=1 m=8: predicted 0\.133 ms, measured \d[\d,]*\.\d{3} ms \[\d[\d,]*\.\d{3}, \d[\d,]*\.\d{3}\] "
                        r"over 2 step\(s\): \d+\.\d{3}x", lines[k]), lines[k]
    assert CPU_NOTE.fullmatch(lines[k + 1].strip()), lines[k + 1]
    # the same note as the run itself gives (python -m harness run), on the Confirmation too
    (done,) = confirm(_serial(ChooseQuery(TINY, 4, (8,), schedules=("1F1B",))), "cpu", top=1, steps=range(1, 3))
    assert done.result is not None
    assert [n for n in done.notes if n.startswith("note: ")] == [f"note: {w}" for w in done.result.warnings]
    assert any(CPU_NOTE.fullmatch(n) for n in done.notes) and done.to_dict()["notes"] == list(done.notes)


def test_a_schedule_excluded_for_every_v_and_m_is_printed_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["choose", *SMALL_FLAGS, "-m", "4", "8", "-v", "1", "--schedules", "1F1B,Interleaved1F1B,DualPipe",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out.splitlines()
    excluded = out[out.index("excluded:") + 1:]
    assert excluded[0] == ("  Interleaved1F1B (every v and m): Interleaved1F1B interleaves v >= 2 chunks per rank and the "
                           "query's chunks are [1]")
    # one reason for every m: one line that lists them
    assert excluded[1].startswith("  DualPipe v=2 m=4, 8: cost model TransformerCost cannot time schedule 'DualPipe': it runs "
                                  "several chains (stages 0..1 and 2..3, each a pipeline of its own micro-batches")
    assert excluded[2].startswith("assumptions: ")


def test_json_to_a_folder_is_refused_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    assert main(["choose", *SMALL_FLAGS, "--json", str(folder), "--csv", str(tmp_path / "c.csv")]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"error: --json {folder}: is a folder; give a file's path\n"
    assert captured.out == ""  # refused before anything was evaluated
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temp file beside it, and no CSV alone
    assert list(folder.iterdir()) == []


def test_flags_that_change_nothing_here_get_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["choose", *SMALL_FLAGS, "-v", "3", "--schedules", "1F1B,ZB-V,Interleaved1F1B,V-Half"]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note: ")]
    assert notes == ["note: -v 3: 1F1B runs at its own v=1 (one chunk per rank)",
                     "note: -v 3: ZB-V, V-Half run at their own v=2 (their placement fixes it)"]
    assert main(["choose", *SMALL_FLAGS, "--data-parallel-size", "8"]) == 0
    assert [line for line in capsys.readouterr().out.splitlines() if line.startswith("note: ")] == [
        "note: --data-parallel-size 8 changes nothing here: it divides --global-batch-size and the distributed optimizer's "
        "state, and neither is given (each figure is one pipeline replica's)"]
    assert main(["choose", *SMALL_FLAGS, "--use-distributed-optimizer"]) == 0
    assert [line for line in capsys.readouterr().out.splitlines() if line.startswith("note: ")] == [
        "note: --use-distributed-optimizer over --data-parallel-size 1 shards nothing: 18 bytes per parameter, as without it"]
    assert main(["choose", *SMALL_FLAGS, "--timelines", "5", "--workers", "2", "--executor", "serial"]) == 0
    assert [line for line in capsys.readouterr().out.splitlines() if line.startswith("note: ")] == [
        "note: --timelines 5 changes nothing without --out (the timelines are on the page)",
        "note: --workers 2 changes nothing with --executor serial"]
    assert main(["choose", *SMALL_FLAGS, "--use-distributed-optimizer", "--data-parallel-size", "8"]) == 0
    assert not [line for line in capsys.readouterr().out.splitlines() if line.startswith("note: ")]


def test_steps_under_a_tenth_of_a_millisecond_keep_three_significant_digits(capsys: pytest.CaptureFixture[str]) -> None:
    # h=64, s=1: a few ns per job; the step reads 54 ns, not "0.0"
    assert main(["choose", "--hidden-size", "64", "--num-layers", "4", "--seq-length", "1", "--num-attention-heads", "4",
                 "--tflops", "100", "-p", "2", "-m", "4", "8", "--schedules", "1F1B", "--no-progress"]) == 0
    out = capsys.readouterr().out.splitlines()
    head = next(k for k, line in enumerate(out) if line.lstrip().startswith("#  schedule"))
    assert out[head + 1].split()[:6] == ["1*", "1F1B", "1", "8", "0.0000540", "0.00000675"]
    assert "recompute none: 0.0000540 ms, peak " in next(line for line in out if line.startswith("chosen: "))


def test_two_outputs_on_one_file_are_refused_before_the_evaluation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "y.json").symlink_to("x.json")  # through a link: the later write would replace the earlier
    for flags, message in [
        (["--json", str(tmp_path / "x.json"), "--csv", str(tmp_path / "y.json")],
         f"error: --json and --csv name the same file, {tmp_path / 'y.json'}: give each its own"),
        (["--out", str(tmp_path / "page"), "--csv", str(tmp_path / "page" / "index.html")],
         f"error: --csv and --out name the same file, {tmp_path / 'page' / 'index.html'}: give each its own"),
    ]:
        assert main(["choose", *SMALL_FLAGS, *flags]) == 2
        captured = capsys.readouterr()
        assert (captured.err, captured.out) == (message + "\n", "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["y.json"]
