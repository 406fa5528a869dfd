"""The torch.profiler importer (harness.imports.torch) on real traces made with torch (tests/data/torch_traces,
generate.sh) and on small hand-made ones. No test imports torch."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import warnings
from pathlib import Path

import pytest

from harness.actions.clocks import SendRecvPair, fit_offsets
from harness.errors import InputFormatError
from harness.imports.torch import TorchTraceWarning, import_torch_traces, read_torch_traces, torch_case
from harness.imports.torch_infer import one_f_one_b_order
from harness.imports.torch_trace import parse_action_name, read_rank_trace, us_to_ns

DATA = Path(__file__).parent / "data" / "torch_traces"
RUNTIME = ["ScheduleInterleaved1F1B_2rank_m4", "ScheduleInterleavedZeroBubble_2rank_m4", "ScheduleZBVZeroBubble_2rank_m4",
           "ScheduleDualPipeV_2rank_m4", "Runtime1F1B_4rank_m8", "torch2.14_ScheduleInterleaved1F1B_2rank_m4"]
ALL = [*RUNTIME, "ScheduleGPipe_2rank_m4", "Schedule1F1B_2rank_m4"]
_HOST = ("UNSHARD", "RESHARD", "REDUCE_GRAD")


def executed(folder: str) -> dict[int, list[str]]:
    """rank -> the lowered action list the runtime printed (OVERLAP_F_B groups expanded, F first)."""
    out = {}
    for line in (DATA / folder / "executed_actions.txt").read_text().splitlines():
        rank, _, acts = line.partition(": ")
        names: list[str] = []
        for a in acts.split():
            parsed = parse_action_name("PP:" + a)
            assert parsed is not None
            names += [f"{s}{k}{'' if mb is None else mb}" for s, k, mb in parsed]
        out[int(rank.removeprefix("rank"))] = names
    return out


@pytest.fixture(scope="module")
def imports():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: read_torch_traces(DATA / name) for name in ALL}


# --- times and names --------------------------------------------------------------------------------------------


def test_us_literals_become_exact_ns():
    assert us_to_ns("5260232471589.062") == 5260232471589062
    assert us_to_ns("0.001") == 1
    assert us_to_ns("-1.5") == -1500
    assert us_to_ns(7) == 7000
    assert us_to_ns("1e3") == 1_000_000
    assert us_to_ns("0.0015") == 2  # more than 3 decimals: half-even to the ns
    with pytest.raises(InputFormatError, match=r"here: time 'abc' is not a number of µs"):
        us_to_ns("abc", "here")


def test_action_grammar():
    assert parse_action_name("PP:2F0") == [(2, "F", 0)]
    assert parse_action_name("PP:1SEND_B7") == [(1, "SEND_B", 7)]
    assert parse_action_name("PP:0UNSHARD") == [(0, "UNSHARD", None)]
    assert parse_action_name("PP:3REDUCE_GRAD") == [(3, "REDUCE_GRAD", None)]
    assert parse_action_name("PP:(3B1;0F3)OVERLAP_F_B") == [(0, "F", 3), (3, "B", 1)]
    assert parse_action_name("Forward 2") == [(-1, "F", 2)]
    assert parse_action_name("Backward 0") == [(-1, "B", 0)]
    assert parse_action_name("aten::linear") is None
    for bad in ("PP:2F", "PP:0UNSHARD3", "PP:(0F3)OVERLAP_F_B", "PP:(0F3;xx)OVERLAP_F_B", "PP:2Q0"):
        with pytest.raises(InputFormatError, match="pipeline action"):
            parse_action_name(bad)


def test_the_shared_example_is_read_to_the_ns():
    """Rank 1's PP:1F0 of ProfilerStep#2 in the real torch 2.14 example: "ts": 5260257486295.856, "dur": 4595.220,
    its first operator (aten::linear) at 5260257487645.819; baseTimeNanoseconds 1790857026000000000."""
    tr = read_rank_trace(DATA / "torch2.14_ScheduleInterleaved1F1B_2rank_m4" / "rank1.json.gz")
    assert (tr.rank, tr.world_size, tr.host) == (1, 2, "vm")
    f0 = next(a for a in tr.actions if a.label == "1F0" and a.step == 2)
    assert f0.start_ns == 1790857026000000000 + 5260257486295856
    assert f0.end_ns == f0.start_ns + 4595220
    assert f0.compute_start_ns == 1790857026000000000 + 5260257487645819
    assert f0.wait_ns == 1349963
    assert sorted(tr.steps) == [2, 3]


# --- what must hold on the example traces ----------------------------------------------------------------------


@pytest.mark.parametrize("folder", RUNTIME)
def test_every_action_is_read_in_the_executed_order(folder, imports):
    imp = imports[folder]
    want = executed(folder)
    for step in imp.records.steps:
        for rank, names in want.items():
            got = [a.label for a in sorted((a for a in imp.actions if a.rank == rank and a.step == step),
                                           key=lambda a: (a.start_ns, a.kind != "F"))]
            assert got == names, (rank, step)
    for a in imp.actions:
        assert a.rank == imp.schedule.stage_to_rank[a.stage]
        assert a.start_ns <= a.compute_start_ns <= a.end_ns
        assert (a.microbatch is None) == (a.kind in _HOST)
    # the recovered schedule is the executed order without the host actions, and it validated (else no import)
    for rank, names in want.items():
        assert [str(j) for j in imp.schedule.ranks[rank]] == [n for n in names if not n.endswith(_HOST)]


@pytest.mark.parametrize("folder", ALL)
def test_every_receive_consumer_starts_after_its_send_started(folder, imports):
    imp = imports[folder]
    act = {(a.step, a.stage, a.kind, a.microbatch): a for a in imp.actions}
    p2r = imp.schedule.stage_to_rank
    checked = 0
    for a in imp.actions:
        if a.kind not in ("F", "B", "I"):
            continue
        src = a.stage - 1 if a.kind == "F" else a.stage + 1
        if not 0 <= src < len(p2r) or p2r[src] == a.rank:
            continue
        send = act.get((a.step, src, "SEND_F" if a.kind == "F" else "SEND_B", a.microbatch))
        prod = next(act[k] for kd in (("F",) if a.kind == "F" else ("B", "I"))
                    if (k := (a.step, src, kd, a.microbatch)) in act)
        assert a.compute_start_ns >= (send.start_ns if send else prod.end_ns), a.label
        checked += 1
    assert checked >= 2 * len(imp.records.steps)
    assert imp.clock.method == "shared" and imp.clock.min_slack_ns > 0


@pytest.mark.parametrize("folder", ALL)
def test_simulated_step_is_within_the_measured_spread_and_the_split_adds_up(folder, imports):
    rep = imports[folder].replay
    assert rep.simulated_step_ns <= rep.measured_step_ns + rep.measured_step_spread_ns
    for s in rep.steps:
        assert s.jitter_ns + s.host_overhead_ns + s.transfer_wait_ns + s.unexplained_ns == s.measured_ns - rep.simulated_step_ns
        assert s.host_overhead_ns >= 0 and s.transfer_wait_ns >= 0 and s.unexplained_ns <= 0
    assert rep.jitter_ns + rep.host_overhead_ns + rep.transfer_wait_ns == rep.difference_ns
    assert 0 < rep.simulated_bubble < 1 and 0 < rep.measured_bubble < 1


def test_fitted_costs_replay_the_analytic_timeline_exactly(imports):
    """replay_order with the fitted durations gives what harness.plan.timeline.simulate gives."""
    from harness.imports.replay import fit_cost, replay_order
    from harness.plan.build import build_plan
    from harness.plan.timeline import simulate

    imp = imports["ScheduleInterleaved1F1B_2rank_m4"]
    plan = build_plan(imp.schedule)
    cost = fit_cost(imp)
    tl = simulate(plan, cost)
    assert replay_order(plan, list(tl.duration)) == list(zip(tl.start, tl.end))
    assert imports["ScheduleInterleaved1F1B_2rank_m4"].replay.simulated_step_ns == tl.makespan_ns


def test_placements_follow_the_schedule_classes(imports):
    assert imports["ScheduleInterleaved1F1B_2rank_m4"].schedule.stage_to_rank == (0, 1, 0, 1)
    assert imports["ScheduleZBVZeroBubble_2rank_m4"].schedule.stage_to_rank == (0, 1, 1, 0)
    assert imports["ScheduleDualPipeV_2rank_m4"].schedule.stage_to_rank == (0, 1, 1, 0)
    assert imports["ScheduleGPipe_2rank_m4"].schedule.stage_to_rank == (0, 1)
    imp = read_torch_traces(DATA / "ScheduleZBVZeroBubble_2rank_m4", schedule_class="ScheduleInterleaved1F1B", replay=False)
    assert any("ScheduleInterleaved1F1B places stages on ranks [0, 1, 0, 1], but the trace's actions ran them on "
               "[0, 1, 1, 0]" in w for w in imp.warnings)


def test_gpipe_ranges_split_into_wait_and_compute(imports):
    imp = imports["ScheduleGPipe_2rank_m4"]
    assert imp.marking == "GPipe"
    assert [str(j) for j in imp.schedule.ranks[1]] == ["1F0", "1F1", "1F2", "1F3", "1B0", "1B1", "1B2", "1B3"]
    f0 = next(a for a in imp.actions if a.label == "1F0" and a.step == 2)
    assert f0.wait_ns > 0  # rank 1 waits inside Forward 0 for rank 0's activation
    rec = next(j for j in imp.records.jobs if j.label == "1F0" and j.step == 2)
    assert (rec.start_ns, rec.end_ns) == (f0.compute_start_ns, f0.end_ns)


def test_schedule_1f1b_is_rebuilt_from_operators_and_marked_inferred(imports):
    imp = imports["Schedule1F1B_2rank_m4"]
    assert imp.marking == "inferred" and all(a.inferred for a in imp.actions)
    for r in range(2):
        assert [j.kind.value for j in imp.schedule.ranks[r]] == one_f_one_b_order(r, 2, 4)
        assert [j.microbatch for j in imp.schedule.ranks[r] if j.kind.value == "F"] == [0, 1, 2, 3]
    assert one_f_one_b_order(0, 2, 4) == ["F", "F", "B", "F", "B", "F", "B", "B"]
    assert one_f_one_b_order(1, 2, 4) == ["F", "B", "F", "B", "F", "B", "F", "B"]
    case = torch_case(imp)
    assert case["torch_import"]["inferred"] is True
    assert any("rebuilt from operator events" in w for w in case["warnings"])


def test_dualpipev_overlap_groups_become_f_then_b(imports):
    imp = imports["ScheduleDualPipeV_2rank_m4"]
    grouped = [a for a in imp.actions if a.group is not None and a.rank == 0 and a.step == 2]
    assert [a.label for a in grouped][:2] == ["0F3", "3B1"]
    f, b = grouped[0], grouped[1]
    assert f.name == b.name == "PP:(0F3;3B1)OVERLAP_F_B"
    assert f.start_ns <= f.compute_start_ns <= f.end_ns == b.start_ns <= b.compute_start_ns <= b.end_ns


def test_steps_option(imports):
    imp = read_torch_traces(DATA / "ScheduleInterleaved1F1B_2rank_m4", steps=[3], replay=False)
    assert imp.records.steps == [3] and {j.step for j in imp.records.jobs} == {3}
    with pytest.raises(InputFormatError, match=r"rank0\.json\.gz: rank 0 has no ProfilerStep#7 \(its steps: 2, 3\)"):
        read_torch_traces(DATA / "ScheduleInterleaved1F1B_2rank_m4", steps=[7])


def test_report_renders_with_the_replay_block(tmp_path):
    files, case = import_torch_traces(DATA / "ScheduleInterleavedZeroBubble_2rank_m4", tmp_path / "out")
    doc = json.loads(files.results.read_text())
    got = doc["cases"][0]
    assert got["backend"] == "torch-trace" and got["schedule"]["p"] == 2 and got["schedule"]["m"] == 4
    assert set(got["replay"]) >= {"simulated_step_ns", "measured_step_ns", "jitter_ns", "host_overhead_ns", "transfer_wait_ns"}
    assert len(got["jobs"]["kind"]) == len(case["jobs"]["kind"]) == 192
    assert (tmp_path / "out" / "hta").is_dir() and list((tmp_path / "out" / "traces").glob("*.json"))
    page = files.index.read_text()
    assert "the run beside its schedule" in page and "host overhead between actions" in page


def test_cli_import_torch(tmp_path, capsys):
    from harness.cli import main

    assert main(["import-torch", str(DATA / "ScheduleGPipe_2rank_m4"), "--out", str(tmp_path / "o"), "-q", "--steps", "2"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"index\.html \(16 jobs on 2 rank\(s\), 1 step\(s\); measured step 2: \d+\.\d{3} ms", out)
    assert main(["import-torch", str(DATA / "ScheduleGPipe_2rank_m4"), "--out", str(tmp_path / "o"), "--steps", "x"]) == 2
    assert "--steps 'x': expected whole numbers" in capsys.readouterr().err


# --- malformed inputs -----------------------------------------------------------------------------------------------


def _copy(tmp_path: Path, folder: str = "ScheduleInterleaved1F1B_2rank_m4") -> Path:
    dst = tmp_path / folder
    shutil.copytree(DATA / folder, dst)
    return dst


def _rewrite(path: Path, edit) -> Path:
    doc = json.loads(gzip.decompress(path.read_bytes()))
    edit(doc)
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def test_file_without_distributed_info(tmp_path):
    d = _copy(tmp_path)
    _rewrite(d / "rank1.json.gz", lambda doc: doc.pop("distributedInfo"))
    with pytest.raises(InputFormatError, match=r"rank1\.json\.gz: no 'distributedInfo': not the trace of a torch\.distributed "
                                               r"run .* so its rank is unknown"):
        read_torch_traces(d)


def test_folder_without_rank_files_reads_the_json_with_distributed_info(tmp_path):
    d = _copy(tmp_path)
    for k in (0, 1):
        (d / f"rank{k}.json.gz").rename(d / f"trace_{k}.json.gz")
    (d / "results.json").write_text('{"schema": "something else"}')
    imp = read_torch_traces(d, replay=False)
    assert [t.path.name for t in imp.ranks] == ["trace_0.json.gz", "trace_1.json.gz"]
    assert any("results.json: not a Chrome trace" in w and w.endswith("; skipped") for w in imp.warnings)
    for k in (0, 1):
        (d / f"trace_{k}.json.gz").unlink()
    with pytest.raises(InputFormatError, match=r"results\.json: not a Chrome trace"):
        read_torch_traces(d)


def test_two_files_claiming_one_rank(tmp_path):
    d = _copy(tmp_path)
    _rewrite(d / "rank1.json.gz", lambda doc: doc["distributedInfo"].update(rank=0))
    with pytest.raises(InputFormatError, match=r"rank1\.json\.gz and .*rank0\.json\.gz both claim rank 0"):
        read_torch_traces(d)


def test_truncated_files(tmp_path):
    d = _copy(tmp_path)
    raw = gzip.decompress((d / "rank0.json.gz").read_bytes())
    (d / "rank0.json.gz").unlink()
    (d / "rank0.json").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(InputFormatError, match=r"rank0\.json:\d+:\d+: not valid JSON: .*\(the file does not end with '\}': cut short\?\)"):
        read_torch_traces(d)
    (d / "rank0.json").unlink()
    (d / "rank0.json.gz").write_bytes(gzip.compress(raw)[:-40])
    with pytest.raises(InputFormatError, match=r"rank0\.json\.gz: not a whole gzip file"):
        read_torch_traces(d)


def test_trace_without_pipeline_actions_names_the_schedules_that_mark_them(tmp_path):
    d = _copy(tmp_path)
    _rewrite(d / "rank1.json.gz", lambda doc: doc.update(traceEvents=[
        e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith(("PP:", "aten::", "autograd::"))]))
    with pytest.raises(InputFormatError, match=r"rank1\.json\.gz: rank 1: no pipeline actions in this trace\. "
                                               r"ScheduleInterleaved1F1B, .*ScheduleGPipe marks 'Forward <i>'.*Schedule1F1B marks none"):
        read_torch_traces(d)


def test_world_size_and_missing_rank(tmp_path):
    d = _copy(tmp_path)
    _rewrite(d / "rank1.json.gz", lambda doc: doc["distributedInfo"].update(world_size=3))
    with pytest.raises(InputFormatError, match=r"rank1\.json\.gz: world_size 3, but .*rank0\.json\.gz says 2"):
        read_torch_traces(d)
    (d / "rank1.json.gz").unlink()
    with pytest.raises(InputFormatError, match=r"world_size is 2, but no file holds rank\(s\) 1"):
        read_torch_traces(d)


def test_overlapping_actions_and_bad_names_are_refused(tmp_path):
    d = _copy(tmp_path)

    def stretch(doc):
        pp = [e for e in doc["traceEvents"] if str(e.get("name", "")).startswith("PP:")]
        pp[3]["dur"] = 10 ** 6  # runs over the next action
    _rewrite(d / "rank0.json.gz", stretch)
    with pytest.raises(InputFormatError, match=r"rank0\.json\.gz: rank 0: pipeline actions 'PP:0SEND_F0' and 'PP:2RECV_F0' "
                                               r"overlap on one thread"):
        read_torch_traces(d)
    d = _copy(tmp_path / "b")

    def rename(doc):
        next(e for e in doc["traceEvents"] if e.get("name") == "PP:2F0")["name"] = "PP:2F"
    _rewrite(d / "rank0.json.gz", rename)
    with pytest.raises(InputFormatError, match=r"'PP:2F': F needs a micro-batch"):
        read_torch_traces(d)


def test_an_order_that_is_no_schedule_names_rank_and_action(tmp_path):
    d = _copy(tmp_path)

    def drop(doc):
        doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("name") != "PP:3B2"]
    _rewrite(d / "rank1.json.gz", drop)
    with pytest.raises(InputFormatError, match=r"is not a valid schedule at 3B2 \(stage 3: rank 1, rank1\.json\.gz\): "
                                               r"schedule 'torch \(PP\)' is invalid: 1 missing job\(s\)"):
        read_torch_traces(d)


def test_rebuilt_1f1b_refuses_operators_that_do_not_split_into_1f1b(tmp_path):
    d = _copy(tmp_path, "Schedule1F1B_2rank_m4")

    def drop_a_backward(doc):
        seen = []
        keep = []
        for e in sorted((e for e in doc["traceEvents"]), key=lambda e: float(e.get("ts", 0))):
            if e.get("name") == "aten::ones_like" and not seen:
                seen.append(e)
                continue
            keep.append(e)
        # the last stage's first backward loses its seed and first operators: its F and B merge
        doc["traceEvents"] = [e for e in keep if not (e.get("name", "").startswith("autograd::")
                                                      and float(e["ts"]) < float(seen[0]["ts"]) + 2000)]
    _rewrite(d / "rank1.json.gz", drop_a_backward)
    with pytest.raises(InputFormatError, match=r"rank1\.json\.gz: rank 1, step 2: no pipeline action ranges, and the operators "
                                               r"do not split into a 1F1B order \(4 forward and 3 backward runs: FFBFBFB\)"):
        read_torch_traces(d)


# --- clocks ---------------------------------------------------------------------------------------------------------


def test_offsets_fitted_across_hosts_by_hand():
    """Host b runs 5 ms behind: the pairs say o_b - o_a >= 100 - (-4900) ... worked by hand below."""
    pairs = [SendRecvPair(0, 1_000, 1, -3_900, "0F0 -> 1F0"),  # o1 - o0 >= 1000 + 3900 = 4900
             SendRecvPair(1, -2_000, 0, 3_200, "1B0 -> 0B0"),  # o0 - o1 >= -2000 - 3200 = -5200, o1 - o0 <= 5200
             SendRecvPair(0, 4_000, 1, -800, "0F1 -> 1F1")]  # o1 - o0 >= 4800
    fit = fit_offsets(2, ["a", "b"], pairs)
    assert fit.method == "fitted"
    # the midpoint of the bound [4900, 5200]: the smallest slack is 150 ns, on both sides
    assert fit.offsets_ns == [0, 5050] and fit.low_ns == [0, 4900] and fit.high_ns == [0, 5200]
    assert fit.min_slack_ns == 150 and "known to within ±0.1 µs" in fit.note
    assert "rank 1: +0.005 ms (bound [+0.005, +0.005] ms)" in fit.note and "the midpoint" in fit.note
    assert fit.needs_flag and not fit.breaks_causality
    same = fit_offsets(2, ["a", "a"], pairs)
    assert same.offsets_ns == [0, 0] and same.min_slack_ns == -4900 and "may be mismatched" in same.note
    given = fit_offsets(2, ["a", "b"], pairs, given=[0, 5000])
    assert given.method == "given" and given.min_slack_ns == 100 and not given.needs_flag
    wrong = fit_offsets(2, ["a", "b"], pairs, given=[0, 4000])  # 0F0 -> 1F0 then completes 900 ns before its send
    assert wrong.min_slack_ns == -900 and wrong.breaks_causality and wrong.needs_flag
    assert wrong.note.endswith("with them a receive completes 900 ns before its send started: they break causality")
    with pytest.raises(InputFormatError, match="3 clock offsets given for 2 ranks"):
        fit_offsets(2, ["a", "b"], pairs, given=[0, 1, 2])
    with pytest.raises(InputFormatError, match=r"no send/receive pair links host\(s\) 'c' to 'a'.*give --clock-offsets"):
        fit_offsets(3, ["a", "b", "c"], pairs)
    bad = [*pairs, SendRecvPair(1, 0, 0, -6_000, "1B1 -> 0B1")]  # o0 - o1 >= 6000 contradicts o1 - o0 >= 4900
    with pytest.raises(InputFormatError, match="no clock offsets satisfy every send/receive pair"):
        fit_offsets(2, ["a", "b"], bad)


def test_a_skewed_host_is_realigned(tmp_path, imports):
    """Rank 1's file moved to another host whose clock runs 20 ms behind: the fit restores causality."""
    d = _copy(tmp_path)

    def skew(doc):
        doc["host_name"] = "other"
        doc["baseTimeNanoseconds"] -= 20_000_000
    _rewrite(d / "rank1.json.gz", skew)
    imp = read_torch_traces(d)
    low, high = imp.clock.low_ns[1], imp.clock.high_ns[1]
    assert imp.clock.method == "fitted" and imp.clock.offsets_ns == [0, (low + high) // 2]
    assert imp.clock.min_slack_ns == (high - low) // 2  # the midpoint: as far from breaking causality either way
    assert low <= 20_000_000 <= high  # the true skew lies within the reported bound
    assert "fitted from" in imp.records.device["clock"]


# --- GPU ranges -----------------------------------------------------------------------------------------------------


def _event(name, ts, dur, cat="user_annotation", tid=1):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": round(ts, 3), "dur": round(dur, 3), "args": {}}


def test_gpu_annotations_give_the_job_times_and_cpu_ranges_the_enqueue(tmp_path):
    """One rank, one stage, m=1: PP:0F0 enqueued on the CPU at 10-12 µs, run on the GPU at 20-50 µs."""
    events = [_event("ProfilerStep#1", 0, 200), _event("PP:0F0", 10, 2), _event("PP:0B0", 13, 3),
              _event("PP:0F0", 20, 30, "gpu_user_annotation", 7), _event("PP:0B0", 55, 60, "gpu_user_annotation", 7)]
    doc = {"distributedInfo": {"rank": 0, "world_size": 1}, "baseTimeNanoseconds": 1000, "host_name": "h",
           "deviceProperties": [{"name": "GPU"}], "traceEvents": events}
    (tmp_path / "rank0.json").write_text(json.dumps(doc))
    imp = read_torch_traces(tmp_path, replay=False)
    jobs = {j.label: j for j in imp.records.jobs}
    assert (jobs["0F0"].start_ns, jobs["0F0"].end_ns, jobs["0F0"].enqueue_ns) == (0, 30_000, 2_000)
    assert (jobs["0B0"].start_ns, jobs["0B0"].end_ns, jobs["0B0"].enqueue_ns) == (35_000, 95_000, 3_000)
    assert imp.records.device["gpu"] is True and imp.records.device["device_properties"] == [[{"name": "GPU"}]]


def test_report_paddle_is_the_imports_module():
    import harness.imports.paddle

    assert harness.imports.paddle is harness.imports.paddle


def test_given_clock_offsets_are_used_and_said(tmp_path, capsys):
    from harness.cli import main

    assert main(["import-torch", str(DATA / "ScheduleGPipe_2rank_m4"), "--out", str(tmp_path / "o"), "-q",
                 "--clock-offsets", "0,1000"]) == 0
    case = json.loads((tmp_path / "o" / "results.json").read_text())["cases"][0]
    assert case["torch_import"]["clock"]["method"] == "given"
    assert case["torch_import"]["clock"]["offsets_ns"] == [0, 1000]
    assert "clock offsets given by the user (rank 0: 0 ns, rank 1: 1000 ns)" in case["device"]["clock"]
    assert main(["import-torch", str(DATA / "ScheduleGPipe_2rank_m4"), "--out", str(tmp_path / "o"), "-q",
                 "--clock-offsets", "0"]) == 2
    assert "1 clock offsets given for 2 ranks" in capsys.readouterr().err


def test_a_trace_without_profiler_steps_is_one_step_with_a_warning(tmp_path):
    events = [_event("PP:0F0", 10, 2), _event("aten::linear", 10.5, 1, "cpu_op"), _event("PP:0B0", 13, 3),
              _event("autograd::engine::evaluate_function: AddmmBackward0", 14, 1, "cpu_op"),
              _event("PP:0F1", 17, 1), _event("PP:0B1", 18.5, 1)]  # empty ranges: all waiting, compute 0
    (tmp_path / "rank0.json").write_text(json.dumps({"distributedInfo": {"rank": 0, "world_size": 1},
                                                     "baseTimeNanoseconds": 0, "traceEvents": events}))
    with pytest.warns(TorchTraceWarning, match="no ProfilerStep#N ranges"):
        imp = read_torch_traces(tmp_path)
    assert imp.records.steps == [0]
    assert any("rank0.json: no ProfilerStep#N ranges" in w for w in imp.warnings)
    f0 = next(a for a in imp.actions if a.label == "0F0")
    assert (f0.start_ns, f0.compute_start_ns, f0.end_ns) == (0, 500, 2000)  # wait 0.5 µs, then compute
    assert [(j.label, j.start_ns, j.end_ns) for j in imp.records.jobs] == [
        ("0F0", 500, 2000), ("0B0", 4000, 6000), ("0F1", 8000, 8000), ("0B1", 9500, 9500)]
    # the fitted medians: F of (1500, 0) -> 750, B of (2000, 0) -> 1000; played back to back: 2 x 750 + 2 x 1000
    assert imp.replay.simulated_step_ns == 3500 and imp.replay.measured_step_ns == 9000


def test_page_block_text():
    from harness.report.replay_block import replay_block

    rep = {"measured_step_ns": 12e6, "measured_step_spread_ns": 2_000_000, "measured_bubble": 0.25,
           "simulated_step_ns": 9_000_000, "simulated_bubble": 0.125, "difference_ns": 2_000_000, "median_step": 3,
           "steps": [{"step": 3, "measured_ns": 11_000_000}, {"step": 4, "measured_ns": 13_000_000}], "jitter_ns": 500_000,
           "host_overhead_ns": 1_000_000, "transfer_wait_ns": 500_000, "comm_model": "stream", "reference_step": 3}
    html = replay_block({"replay": rep, "torch_import": {"wait_ns_per_rank": [1_000_000, 0], "clock": {"note": "<one>"}}})
    assert ("<td class=\"l\">measured, step 3 (the lower middle of 2 steps: the median falls between two)</td>"
            "<td>12.000 ms (spread over steps 2.000 ms)</td><td>25.0 %</td>") in html
    assert "(comm stream: send/receive jobs on their own streams)" in html and "unexplained" not in html
    assert "<td>9.000 ms</td><td>12.5 %</td>" in html
    assert ("difference: step 3 measured 11.000 ms - simulated 9.000 ms = 2.000 ms: jitter (durations off their median) "
            "0.500 ms, host overhead between actions 1.000 ms, waiting on transfers (and the rest) 0.500 ms") in html
    assert "per rank over the imported steps: 1.000 ms, 0.000 ms" in html and "clocks: &lt;one&gt;" in html
    assert replay_block({"jobs": {}}) is None
    one = replay_block({"replay": {**rep, "steps": [{"step": 3, "measured_ns": 11_000_000}], "comm_model": "edge",
                                   "unexplained_ns": -250_000}})
    assert one is not None and "<td class=\"l\">measured, step 3</td><td>12.000 ms</td>" in one
    assert "(comm edge: the fitted transfer time as a delay on cross-rank dependencies)" in one
    assert ", unexplained (the parts above would be negative: clock offsets that break causality?) -0.250 ms" in one


def test_a_wrong_typed_field_is_a_warning_naming_file_event_and_field(tmp_path):
    # issue 26: a string `ts` on a pipeline action vanished without a word and its step was then left out as cut short.
    d = _copy(tmp_path)
    where = {}

    def edit(doc):
        events = doc["traceEvents"]
        k = next(i for i, e in enumerate(events) if e.get("name") == "PP:2F0")
        where["k"] = k
        events[k]["ts"] = str(events[k]["ts"])  # a string holding the number: not what Kineto writes
        j = next(i for i, e in enumerate(events) if e.get("name") == "aten::copy_")
        where["j"] = j
        events[j]["name"] = 7
    _rewrite(d / "rank0.json.gz", edit)
    with pytest.warns(TorchTraceWarning) as caught:  # a Python warning for the caller too, not only a note in the case
        imp = read_torch_traces(d)
    said = [w for w in imp.warnings if "field of the wrong type" in w]
    assert len(said) == 1, imp.warnings
    assert said[0].startswith(f"{d / 'rank0.json.gz'}: 2 event(s) left out for a field of the wrong type: ")
    assert f"traceEvents[{where['k']}] ('PP:2F0'): 'ts' is the string '" in said[0]
    assert f"traceEvents[{where['j']}]: 'name' is 7, expected a string" in said[0]
    assert [str(w.message) for w in caught if "field of the wrong type" in str(w.message)] == said
    # the action is gone from the step that held it, which is then left out (said too), not silently
    assert imp.records.steps == [3]
    assert any("rank 0" in w and "step" in w and w is not said[0] for w in imp.warnings)


def test_import_torch_prints_a_wrong_typed_field_as_a_warning(tmp_path, capsys):
    d = _copy(tmp_path)

    def edit(doc):
        k = next(i for i, e in enumerate(doc["traceEvents"]) if e.get("name") == "PP:2F0")
        doc["traceEvents"][k]["ts"] = str(doc["traceEvents"][k]["ts"])
    _rewrite(d / "rank0.json.gz", edit)
    from harness.cli import main

    assert main(["import-torch", str(d), "--out", str(tmp_path / "o"), "-q", "--no-hta"]) == 0
    err = capsys.readouterr().err.splitlines()
    wrong = [line for line in err if "left out for a field of the wrong type" in line]
    assert len(wrong) == 1 and wrong[0].startswith(f"warning: {d / 'rank0.json.gz'}: 1 event(s) left out for a field of the wrong type: ")
    assert any(line.startswith("note: ") and "step" in line for line in err)  # the step it cost: a note of the case, said once


def test_non_finite_and_null_times_are_named_too(tmp_path):
    d = _copy(tmp_path)
    seen = {}

    def edit(doc):
        k = next(i for i, e in enumerate(doc["traceEvents"]) if e.get("ph") == "X" and e.get("cat") == "cpu_op")
        seen["k"], seen["name"] = k, doc["traceEvents"][k]["name"]
        doc["traceEvents"][k]["ts"] = None
    _rewrite(d / "rank1.json.gz", edit)
    expected = f"traceEvents[{seen['k']}] ({seen['name']!r}): 'ts' is null, expected a number of µs"
    with pytest.warns(TorchTraceWarning, match="field of the wrong type"):
        assert any(expected in w for w in read_torch_traces(d).warnings)
    raw = gzip.decompress((d / "rank1.json.gz").read_bytes()).replace(b'"ts": null', b'"ts": NaN')
    (d / "rank1.json.gz").write_bytes(gzip.compress(raw))
    with pytest.warns(TorchTraceWarning, match="field of the wrong type"):
        assert any(f"traceEvents[{seen['k']}] ({seen['name']!r}): 'ts' is nan (not a finite number)" in w
                   for w in read_torch_traces(d).warnings)
