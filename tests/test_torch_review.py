"""The torch importer's answers to a new user's review (issue 15, review f1bad): clock notes and flags, the
midpoint clock fit, a non-negative replay split, negative --clock-offsets, --schedule checks, messages that say
what to do, one reference step, and one communication model on the page. No test imports torch."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import InputFormatError
from harness.imports.torch import read_torch_traces

DATA = Path(__file__).parent / "data" / "torch_traces"
IL = DATA / "ScheduleInterleaved1F1B_2rank_m4"


def _skewed(tmp_path: Path) -> Path:
    """The interleaved run with rank 1 moved to host 'vm2' whose clock reads 5 ms late (the review's f1bad/hosts)."""
    d = tmp_path / "hosts"
    shutil.copytree(IL, d)
    path = d / "rank1.json.gz"
    doc = json.loads(gzip.decompress(path.read_bytes()))
    doc["host_name"] = "vm2"
    doc["baseTimeNanoseconds"] += 5_000_000
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return d


def _run(tmp_path: Path, capsys, *args: str) -> tuple[int, str, str]:
    rc = main(["import-torch", *args, "--out", str(tmp_path / "o"), "-q", "--no-hta"])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


# --- 1. clock notes on stderr, a 'clocks' flag on the page ----------------------------------------------------------


def test_offsets_that_break_causality_are_a_note_and_a_flag(tmp_path, capsys):
    rc, _, err = _run(tmp_path, capsys, str(IL), "--clock-offsets", "0,1000000000")
    assert rc == 0
    assert re.search(r"^note: .*clock offsets given by the user \(rank 0: 0 ns, rank 1: 1000000000 ns\); with them a "
                     r"receive completes \d+ ns before its send started: they break causality$", err, re.M)
    case = json.loads((tmp_path / "o" / "results.json").read_text())["cases"][0]
    assert [f["kind"] for f in case["flags"]] == ["clocks"] and "break causality" in case["flags"][0]["reason"]
    page = (tmp_path / "o" / "index.html").read_text()
    assert re.search(r'<span class="badge flag-clocks" title="clock offsets given by the user[^"]*break causality">clocks'
                     r"</span>", page)


def test_offsets_that_keep_causality_are_neither_noted_nor_flagged(tmp_path, capsys):
    rc, _, err = _run(tmp_path, capsys, str(IL), "--clock-offsets", "0,0")
    assert rc == 0 and "clock offsets" not in err
    case = json.loads((tmp_path / "o" / "results.json").read_text())["cases"][0]
    assert case["flags"] == []


def test_the_multi_host_fit_is_a_note_and_a_flag_and_takes_the_midpoint(tmp_path, capsys):
    rc, _, err = _run(tmp_path, capsys, str(_skewed(tmp_path)))
    assert rc == 0
    case = json.loads((tmp_path / "o" / "results.json").read_text())["cases"][0]
    clock = case["torch_import"]["clock"]
    low, high = clock["low_ns"][1], clock["high_ns"][1]
    assert clock["method"] == "fitted" and clock["offsets_ns"] == [0, (low + high) // 2]
    assert low <= -5_000_000 <= high  # the true skew lies within the bound
    assert re.search(r"^note: .*ranks on 2 hosts: per-host clock offsets fitted from \d+ cross-host send/receive pairs, "
                     r"each the midpoint of the offsets .*: rank 1: -\d+\.\d{3} ms \(bound \[-\d+\.\d{3}, -\d+\.\d{3}\] ms\)",
                     err, re.M)
    assert [f["kind"] for f in case["flags"]] == ["clocks"]
    assert 'class="badge flag-clocks"' in (tmp_path / "o" / "index.html").read_text()


# --- 3. the split never has a negative waiting part; transfers do not depend on clock offsets ------------------------


@pytest.mark.parametrize("offsets", [[0, 3_000_000], [0, 1_000_000_000]])
def test_transfers_do_not_depend_on_offsets_shown_wrong_and_the_split_adds_up(offsets):
    # given offsets that put a receive before its send are known wrong: per rank pair, the mean of the two
    # directions' fastest transfers, in which the offset cancels
    imp = read_torch_traces(IL, clock_offsets_ns=offsets)
    assert imp.clock.method == "given" and imp.clock.breaks_causality
    rep = imp.replay
    assert rep.cost["transfer_ns"] == {"SEND_F": 2_570_870, "SEND_B": 2_570_870}
    assert rep.simulated_step_ns == 63_418_605
    for s in rep.steps:
        assert s.host_overhead_ns >= 0 and s.transfer_wait_ns >= 0 and s.unexplained_ns <= 0
        assert s.jitter_ns + s.host_overhead_ns + s.transfer_wait_ns + s.unexplained_ns == s.measured_ns - rep.simulated_step_ns


def test_given_offsets_that_keep_causality_are_trusted_as_one_clock_is():
    # 0,0 is the one host's own clock: the same fit and simulation as no offsets at all; -5,5 ns barely moves them
    same = read_torch_traces(IL, clock_offsets_ns=[0, 0]).replay
    assert same.cost["transfer_ns"] == {"SEND_F": 118_220, "SEND_B": 156_960} and same.simulated_step_ns == 6_876_578
    near = read_torch_traces(IL, clock_offsets_ns=[-5, 5]).replay
    assert near.cost["transfer_ns"] == {"SEND_F": 118_210, "SEND_B": 156_950} and near.simulated_step_ns == 6_876_498


def test_the_reviewers_negative_wait_becomes_an_unexplained_remainder():
    """--clock-offsets 0,-3000000 (wrong by 3 ms, yet every pair still causal, so trusted) gave
    transfer_wait_ns = -31186793 before; step 2 now reads (exact, ns):"""
    rep = read_torch_traces(IL, clock_offsets_ns=[0, -3_000_000]).replay
    assert (rep.reference_step, rep.measured_step_ns, rep.difference_ns) == (2, 48_250_978, 48_250_978 - 78_018_729)
    assert (rep.jitter_ns, rep.host_overhead_ns, rep.transfer_wait_ns) == (321_208, 1_097_834, 0)
    assert rep.unexplained_ns == rep.difference_ns - 321_208 - 1_097_834 == -31_186_793
    for s in rep.steps:
        assert s.jitter_ns + s.host_overhead_ns + s.transfer_wait_ns + s.unexplained_ns == s.measured_ns - rep.simulated_step_ns


def test_one_clock_keeps_per_direction_transfer_times():
    rep = read_torch_traces(IL).replay
    assert rep.cost["transfer_ns"] == {"SEND_F": 118_220, "SEND_B": 156_960}  # each direction its own median
    assert rep.simulated_step_ns == 6_876_578 and rep.unexplained_ns == 0


# --- 4. negative offsets on the command line ----------------------------------------------------------------------


def test_negative_clock_offsets_are_accepted_with_or_without_equals(tmp_path, capsys):
    for args in (["--clock-offsets", "-5,5"], ["--clock-offsets=-5,5"]):
        rc, _, _ = _run(tmp_path, capsys, str(IL), *args)
        assert rc == 0
        case = json.loads((tmp_path / "o" / "results.json").read_text())["cases"][0]
        assert case["torch_import"]["clock"]["offsets_ns"] == [-5, 5]


def test_bad_clock_offsets_say_what_an_offset_is(tmp_path, capsys):
    rc, _, err = _run(tmp_path, capsys, str(IL), "--clock-offsets", "x,y")
    assert rc == 2
    assert ("error: --clock-offsets 'x,y': expected one whole number of ns per rank, comma-separated, e.g. 0,-5000 (a list "
            "that starts with a minus sign works as '--clock-offsets -5,5' or '--clock-offsets=-5,5')") in err
    assert "2:4" not in err


# --- 5. --schedule ------------------------------------------------------------------------------------------------


def test_an_unknown_schedule_class_is_refused_with_the_known_ones(tmp_path, capsys):
    rc, _, err = _run(tmp_path, capsys, str(IL), "--schedule", "ScheduleFoo")
    assert rc == 2
    assert ("error: --schedule 'ScheduleFoo': not a torch.distributed.pipelining schedule class this importer knows; known: "
            "Schedule1F1B, ScheduleDualPipeV, ScheduleGPipe, ScheduleInterleaved1F1B, ScheduleInterleavedZeroBubble, "
            "ScheduleLoopedBFS, ScheduleZBVZeroBubble") in err


def test_a_single_stage_class_on_an_interleaved_trace_is_noted(tmp_path, capsys):
    rc, _, err = _run(tmp_path, capsys, str(IL), "--schedule", "Schedule1F1B")
    assert rc == 0
    assert (f"note: {IL}: Schedule1F1B runs one stage per rank, but the trace's actions run 4 stages on 2 ranks "
            "(2 per rank): is --schedule the class that ran?") in err
    imp = read_torch_traces(DATA / "ScheduleGPipe_2rank_m4", schedule_class="ScheduleInterleaved1F1B", replay=False)
    assert any("ScheduleInterleaved1F1B runs several stages per rank, but the trace's actions run one stage per rank"
               in n for n in imp.warnings)
    fine = read_torch_traces(IL, schedule_class="ScheduleInterleaved1F1B", replay=False)
    assert not any("--schedule" in n for n in fine.warnings)


# --- 6. messages that say what to do ------------------------------------------------------------------------------


def test_a_parent_folder_lists_the_runs_in_it():
    with pytest.raises(InputFormatError, match=re.escape(
            f"{DATA}: no traces here, but its subfolders Runtime1F1B_4rank_m8, Schedule1F1B_2rank_m4, ") + ".*"
            + re.escape(f"hold some: pass one run's folder, e.g. {DATA / 'Runtime1F1B_4rank_m8'}")):
        read_torch_traces(DATA)


def test_a_file_that_is_no_trace_says_pass_its_folder(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("hello")
    with pytest.raises(InputFormatError, match=re.escape(f"pass its folder, {tmp_path}?")):
        read_torch_traces(f)


def test_a_gz_that_is_plain_json_says_rename_it(tmp_path):
    d = tmp_path / "run"
    shutil.copytree(IL, d)
    (d / "rank1.json.gz").write_bytes(gzip.decompress((IL / "rank1.json.gz").read_bytes()))
    with pytest.raises(InputFormatError, match=re.escape(
            f"{d / 'rank1.json.gz'}: named .gz but not gzip data (it looks like plain JSON: rename it to rank1.json)")):
        read_torch_traces(d)


def test_an_empty_file_says_it_is_empty(tmp_path):
    d = tmp_path / "run"
    shutil.copytree(IL, d)
    (d / "rank0.json.gz").unlink()
    (d / "rank0.json").write_bytes(b"")
    with pytest.raises(InputFormatError, match=re.escape(f"{d / 'rank0.json'}: the file is empty (0 bytes)")):
        read_torch_traces(d)


def test_a_reversed_or_empty_step_range(tmp_path, capsys):
    rc, _, err = _run(tmp_path, capsys, str(IL), "--steps", "3:2")
    assert rc == 2 and "error: --steps '3:2': the range 3:2 is reversed (A:B takes steps A up to B, B left out: e.g. 2:4)" in err
    rc, _, err = _run(tmp_path, capsys, str(IL), "--steps", "3:3")
    assert rc == 2 and "the range 3:3 is empty" in err


def test_files_of_two_runs_are_named(tmp_path):
    d = tmp_path / "mixed"
    d.mkdir()
    shutil.copy(DATA / "ScheduleGPipe_2rank_m4" / "rank0.json.gz", d / "rank0.json.gz")
    shutil.copy(IL / "rank1.json.gz", d / "rank1.json.gz")
    with pytest.raises(InputFormatError, match=re.escape(
            "the files mark actions differently (rank 0: GPipe (rank0.json.gz), rank 1: PP (rank1.json.gz))")):
        read_torch_traces(d)


def test_a_trace_without_distributed_info_says_how_to_get_it(tmp_path):
    d = tmp_path / "nodist"
    shutil.copytree(IL, d)
    path = d / "rank0.json.gz"
    doc = json.loads(gzip.decompress(path.read_bytes()))
    del doc["distributedInfo"]
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    with pytest.raises(InputFormatError, match=re.escape("profile after torch.distributed.init_process_group()")
                       + ".*" + re.escape('add "distributedInfo": {"rank": R, "world_size": N}')):
        read_torch_traces(d)


# --- 7. one reference step; no CI from fewer than MIN_SAMPLES steps -------------------------------------------------


def test_one_reference_step_in_the_cli_the_page_and_results(tmp_path, capsys):
    rc, out, _ = _run(tmp_path, capsys, str(IL))
    assert rc == 0
    case = json.loads((tmp_path / "o" / "results.json").read_text())["cases"][0]
    rep = case["replay"]
    measured = {s["step"]: s["measured_ns"] for s in rep["steps"]}
    assert sorted(measured) == [2, 3]
    ref = min(measured, key=lambda k: (measured[k], k))  # the lower median of two steps: the shorter one
    assert rep["reference_step"] == rep["median_step"] == ref
    assert rep["measured_step_ns"] == measured[ref]  # a real step, not the mean of two
    assert rep["difference_ns"] == measured[ref] - rep["simulated_step_ns"]
    assert f"measured step {ref}, the shorter of 2: {measured[ref] / 1e6:.3f} ms" in out
    page = (tmp_path / "o" / "index.html").read_text()
    assert f"measured, step {ref} (the lower middle of 2 steps: the median falls between two)</td><td>{measured[ref] / 1e6:.3f} ms" in page
    assert f"difference: step {ref} measured {measured[ref] / 1e6:.3f} ms" in page


def test_no_confidence_interval_from_fewer_than_min_samples_steps():
    from harness.report.html import _ci_text
    from harness.stats import MIN_SAMPLES

    def case(n: int) -> dict:
        return {"backend": "torch-trace", "metrics": {"stats": {"step_time_ns": {
            "n": n, "median": 100.0, "ci_low": 80.0, "ci_high": 120.0, "ci_level": 0.95, "rel_err": 0.1}}}}
    assert MIN_SAMPLES == 5
    assert _ci_text(case(2)) is None and _ci_text(case(4)) is None
    ci = _ci_text(case(5))
    assert ci is not None and ci["short"] == "±20.0%"


def test_the_import_page_shows_no_ci_from_two_steps(tmp_path, capsys):
    rc, _, _ = _run(tmp_path, capsys, str(IL))
    assert rc == 0
    assert "CI of the median" not in (tmp_path / "o" / "index.html").read_text()


# --- 8. one communication model on the page -------------------------------------------------------------------------


@pytest.mark.parametrize(("folder", "model"), [("Schedule1F1B_2rank_m4", "edge"), ("ScheduleInterleaved1F1B_2rank_m4", "stream")])
def test_the_overview_and_the_replay_block_name_the_same_comm_model(tmp_path, capsys, folder, model):
    rc, _, _ = _run(tmp_path, capsys, str(DATA / folder))
    assert rc == 0
    case = json.loads((tmp_path / "o" / "results.json").read_text())["cases"][0]
    assert case["comm_model"] == case["replay"]["comm_model"] == model
    page = (tmp_path / "o" / "index.html").read_text()
    assert f">comm {model}</span>" in page and f"the run beside its schedule (comm {model}: " in page


def test_command_line_values_parse_exactly():
    from harness.cli.torch_args import clock_offsets_list, join_negative_values, steps_list
    from harness.errors import ConfigError

    assert join_negative_values(["import-torch", "d", "--clock-offsets", "-5,5", "--steps", "2"]) == [
        "import-torch", "d", "--clock-offsets=-5,5", "--steps", "2"]
    assert join_negative_values(["--clock-offsets", "0,5"]) == ["--clock-offsets", "0,5"]
    assert join_negative_values(["--clock-offsets", "-q"]) == ["--clock-offsets", "-q"]  # an option stays one
    assert clock_offsets_list("-5, 5,-3000000") == [-5, 5, -3_000_000]
    assert steps_list("2,3") == [2, 3] and steps_list("2:5") == [2, 3, 4]
    with pytest.raises(ConfigError, match=re.escape("--steps '4:1': the range 4:1 is reversed")):
        steps_list("4:1")
    with pytest.raises(ConfigError, match=re.escape("--steps '2:x': expected whole numbers, e.g. 2,3 or 2:4")):
        steps_list("2:x")
