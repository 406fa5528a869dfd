"""The ``torch`` backend: a case's schedule on PyTorch's own pipelining runtime (gloo on CPU).

Skipped, with the reason, where PyTorch is missing (``pip install torch==2.13.0``, the CPU build, then
``pip install -e '.[torch]'``). Three kinds of test:

* in this process, nothing launched: PyTorch's lowering of the harness's schedules against the
  orders its own classes execute (tests/data/pytorch), refusals translated before any process
  starts, bad options and inputs;
* ranks started by torch's elastic launcher from this process (a plain ``pytest``): a custom CSV
  trains, a rank dying or stalling mid-step ends the run with an error naming it;
* whole pytest sessions under ``torchrun`` (tests/torch_ranks/), 2 and 4 ranks: the recorded
  orders, the timed durations within the noise measured there, the step beside the sim, and
  ``import-torch`` of the run's own traces.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the torch backend's tests need PyTorch: pip install torch==2.13.0 (the CPU build), "
                                            "then pip install -e '.[torch]'")

from harness import FixedCost, PipelineCase  # noqa: E402
from harness.distributed.backends import check_device_options, resolve_backend  # noqa: E402
from harness.distributed.torch_lowering import lower, lower_schedule  # noqa: E402
from harness.distributed.torch_rank import FAULT_ENV  # noqa: E402
from harness.errors import BackendUnavailable, ConfigError, ExecutionError, ScheduleError  # noqa: E402
from harness.model import comm  # noqa: E402
from harness.runner import run_case  # noqa: E402
from harness.schedule.registry import build_schedule  # noqa: E402

pytestmark = pytest.mark.torch
ROOT = Path(__file__).resolve().parent.parent
RANKS = Path(__file__).resolve().parent / "torch_ranks"
EXPECTED = json.loads((ROOT / "tests" / "data" / "pytorch" / "torch_executed_orders.json").read_text(encoding="utf-8"))
HARNESS_NAME = {"Runtime1F1B": "1F1B", "ScheduleInterleaved1F1B": "Interleaved1F1B",
                "ScheduleInterleavedZeroBubble": "InterleavedZeroBubble", "ScheduleZBVZeroBubble": "ZB-V",
                "ScheduleDualPipeV": "DualPipeV"}
#: PyTorch's lowering cannot place its sends and receives: rank 1's 1F2 waits for 0F2, which is in rank 0's
#: overlapped group with 0B1, which waits (through rank 1's 1B1) for 1F2 (the harness's group check refuses it too).
REFUSED_CSV = "0F0,0F1,0B0,(0F2;0B1)OVERLAP_F_B,0B2\n1F0,1B0,1F1,1F2,1B1,1B2\n"


def _line_of(text: str) -> int:
    """The line of this file where ``text`` first stands."""
    return next(i for i, line in enumerate(Path(__file__).read_text(encoding="utf-8").splitlines(), 1) if text in line)


@pytest.mark.parametrize("entry", EXPECTED["entries"], ids=lambda e: e["class"])
def test_pytorchs_lowering_of_the_harness_schedule_is_what_its_own_class_executes(entry: dict) -> None:
    schedule = build_schedule(HARNESS_NAME[entry["class"]], entry["p"], entry["m"], entry["v"])
    low = lower_schedule(schedule)
    assert [list(r) for r in low.executed] == entry["executed"]
    # the plan is that list as harness jobs: no host action, overlaps as F then B, one OPT per stage at the end
    for r, row in enumerate(low.schedule.ranks):
        labels = [str(j) for j in row]
        assert [x for x in labels if not x.endswith("OPT")] == [
            p for cell in entry["executed"][r]
            for p in (cell[1:cell.index(")")].split(";") if cell.endswith("OVERLAP_F_B") else [cell])
            if not p.endswith(("UNSHARD", "RESHARD", "REDUCE_GRAD"))]
        assert [x for x in labels if x.endswith("OPT")] == [f"{s}OPT" for s, q in enumerate(low.stage_rank) if q == r]


def test_a_schedule_pytorch_refuses_gets_its_error_translated_before_any_process_starts(tmp_path: Path) -> None:
    csv = tmp_path / "overlap.csv"
    csv.write_text(REFUSED_CSV, encoding="utf-8")
    t = time.monotonic()
    with pytest.raises(ScheduleError) as err:
        run_case(PipelineCase(csv, cost=FixedCost.ms(F=1, B=2)), backend="torch", steps=range(1, 2))
    assert time.monotonic() - t < 30  # refused before launching anything
    text = str(err.value)
    site, _, rest = text.partition(": ")  # the case's line first, as for any refused case
    assert site.endswith("test_torch_backend.py:" + str(_line_of("run_case(PipelineCase(csv")))
    assert rest.startswith(f"schedule '{csv.name}': PyTorch's pipelining runtime refuses it at rank 0, action "
                           "(0F2;0B1)OVERLAP_F_B (no rank can go on: rank 0 waits at (0F2;0B1)OVERLAP_F_B; rank 1 waits at 1F2): "
                           "AssertionError: Malformed compute schedule, can't schedule sends/recvs")
    assert ">>0F2" in text and ">>1F2" in text  # the harness's grid, the cells marked
    assert err.value.jobs == ("0F2", "0B1", "1F2")
    # the harness's own check refuses it for the same reason (a group starts once all its members' inputs are in); on the
    # torch backend PyTorch's lowering runs first, so its error is the one a PyTorch user would meet
    with pytest.raises(ScheduleError, match=r"schedule 'overlap.csv': an overlapped group waits, through other jobs, for one of "
                                            r"its own members"):
        run_case(PipelineCase(csv, cost=FixedCost.ms(F=1, B=2)), backend="sim")


def test_pytorchs_validation_is_translated_naming_the_rank_and_action() -> None:
    rows = [["0F0", "0I0", "0W0", "0F1", "0W1", "0I1"], ["1F0", "1I0", "1W0", "1F1", "1I1", "1W1"]]
    with pytest.raises(ScheduleError) as err:
        lower(rows, 2)
    assert str(err.value) == ("schedule 'schedule': PyTorch's pipelining runtime refuses it at rank 0, action 0W1: AssertionError: "
                              "Rank 0, step 4: Running Backward Weight for stage 0, microbatch 1 without first running Backward Input")
    assert err.value.jobs == ("0W1",)


def test_a_lowered_order_whose_sends_and_receives_do_not_pair_is_refused() -> None:
    zbv = build_schedule("ZB-V", 2, 4, 2)
    cost = FixedCost.ms(F=1, B=2, I=1, W=1)
    jit = comm.lower(zbv, cost, "stream", True, "just-in-time")
    with pytest.raises(ScheduleError, match=r"at rank 1, action 2RECV_B0: its receive #2 from rank 0 is for 2B0, but rank 0's "
                                            r"send #2 to it is for 1F2; .* carry no tag"):
        lower_schedule(zbv, "harness", jit)
    eager = comm.lower(zbv, cost, "stream", True, "eager")  # the harness's placement of PyTorch's walk pairs: accepted
    assert lower_schedule(zbv, "harness", eager).lowered
    deferred = comm.lower(zbv, cost, "stream", True, "deferred")
    with pytest.raises(ConfigError, match=r"refuses comm_placement 'deferred': PyTorch's pipelining point-to-point operations "
                                          r"carry no tag"):
        lower_schedule(zbv, "harness", deferred)


def test_options_are_checked_when_the_case_is_made() -> None:
    with pytest.raises(ConfigError, match=r"refuses defer_recv=True \(PyTorch's defer_pp_recv\): .* carry no tag"):
        check_device_options("torch", {"defer_recv": True})
    with pytest.raises(ConfigError, match=r"the torch backend has no device option 'transfer_timeout_s' \(valid: lowering, "):
        PipelineCase("1F1B", stages=2, microbatches=4, device_options={"torch": {"transfer_timeout_s": 5}})
    case = PipelineCase("1F1B", stages=2, microbatches=4, cost=FixedCost.ms(F=1, B=2))
    with pytest.raises(ConfigError, match=r"test_torch_backend.py:\d+: case '1F1B p=2 m=4': the torch backend has no device option 'bogus'"):
        run_case(case, backend="torch", device_options={"bogus": 1})
    for bad, message in (({"lowering": "eager"}, "lowering must be 'torch'"), ({"timeout_s": 0}, "timeout_s must be a positive"),
                         ({"device": "tpu"}, "device must be 'auto', 'cpu' or 'cuda'"), ({"master_port": 70000}, "master_port must")):
        with pytest.raises(ConfigError, match=re.escape(message)):
            check_device_options("torch", bad)


def test_torch_missing_is_backend_unavailable_with_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch.distributed.pipelining", None)
    with pytest.raises(BackendUnavailable, match=r"install it with: pip install torch==2\.13\.0 \(the CPU build\), then "
                                                 r"pip install -e '\.\[torch\]'"):
        resolve_backend("torch")


def test_without_torchrun_and_launch_false_it_says_the_torchrun_command(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TORCHELASTIC_RUN_ID", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "argv", ["/x/bin/pytest", "cases/", "--backend=torch"])
    case = PipelineCase("1F1B", stages=2, microbatches=4, cost=FixedCost.ms(F=1, B=2), device_options={"torch": {"launch": False}})
    with pytest.raises(ConfigError, match=r"not started by torchrun \(launch=False\): run torchrun --standalone --nproc-per-node=2 "
                                          r"-m pytest cases/ --backend=torch$"):
        run_case(case, backend="torch", steps=range(1, 2))


def test_a_taken_port_is_refused_at_once() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        case = PipelineCase("1F1B", stages=2, microbatches=4, cost=FixedCost.ms(F=1, B=2),
                            device_options={"torch": {"master_port": port}})
        t = time.monotonic()
        with pytest.raises(ConfigError, match=rf"port {port} on localhost is taken .* leave master_port out"):
            run_case(case, backend="torch", steps=range(1, 2))
        assert time.monotonic() - t < 30


@pytest.mark.slow
def test_a_custom_csv_runs_launched_from_here_and_training_is_real(tmp_path: Path) -> None:
    result = run_case(PipelineCase(RANKS / "custom_fthenb_split.csv", cost=FixedCost.ms(F=1, B=2, I=1, W=1, activation_bytes=4096)),
                      backend="torch", steps=range(1, 4))
    rec = result.records
    assert rec.backend == "torch" and rec.steps == [1, 2, 3] and rec.device["torch"]["started"] == "elastic launcher"
    info = rec.device["torch"]
    losses = info["losses"]
    assert len(losses) == 4 and all(a != b for a, b in itertools.pairwise(losses))  # the loss changes step by step
    assert info["weights_changed"] == [True, True]  # optimizer.step() changed every rank's weights
    for r in (0, 1):  # the CSV's own order
        jobs = sorted((j for j in rec.jobs if j.rank == r and j.step == 1 and j.kind in "FIW"), key=lambda j: j.start_ns)
        row = (RANKS / "custom_fthenb_split.csv").read_text(encoding="utf-8").splitlines()[r].split(",")
        assert [j.label for j in jobs] == row
    assert sorted({j.kind for j in rec.jobs}) == ["F", "I", "OPT", "RECV_B", "RECV_F", "SEND_B", "SEND_F", "W"]


@pytest.mark.slow
def test_a_rank_dying_mid_step_ends_the_run_with_an_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_ENV, "1:kill@1F2#0")
    case = PipelineCase("1F1B", stages=2, microbatches=4, cost=FixedCost.ms(F=1, B=2), device_options={"torch": {"timeout_s": 20}})
    t = time.monotonic()
    with pytest.raises(ExecutionError, match=r"^torch: rank 1 died \(SIGKILL\) without an error of its own") as err:
        run_case(case, backend="torch", steps=range(0, 1))
    assert time.monotonic() - t < 240
    # then rank 0's own error, once the launcher knows rank 1 died without its guess that rank 1 stopped answering; the
    # launcher stops rank 0 (SIGTERM) as soon as it sees rank 1 end, so on a busy machine rank 0 may be stopped before its
    # receive fails and it writes its error: then the dead rank alone is named
    assert re.match(r"torch: rank 1 died \(SIGKILL\) without an error of its own(; then rank 0, step 0, action 0\w+ \(waiting for "
                    r"its input from rank 1\): RuntimeError: .*)?$", str(err.value), re.S), str(err.value)
    assert "stopped answering" not in str(err.value)


@pytest.mark.slow
def test_a_rank_failing_is_named_once_with_its_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_ENV, "1:raise@1F2#0")
    case = PipelineCase("1F1B", stages=2, microbatches=4, cost=FixedCost.ms(F=1, B=2), device_options={"torch": {"timeout_s": 20}})
    with pytest.raises(ExecutionError) as err:
        run_case(case, backend="torch", steps=range(0, 1))
    # the hook raises as the action's range is entered, before the action is timed: the step is named, not the action
    assert str(err.value) == "torch: rank 1, step 0: RuntimeError: raised by the HARNESS_TORCH_TEST_FAULT test hook in action 1F2"


def test_a_lost_connection_names_the_peer_as_stopped_answering() -> None:
    from types import SimpleNamespace

    from harness.distributed.torch_rank import _where

    timer = SimpleNamespace(failed_action="2B1")
    reset = RuntimeError("[gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:30922: Connection reset by peer. This is "
                         "typically caused by a remote worker hanging")
    assert _where(reset, 2, 0, timer, (0, 1, 2, 3)) == (
        "rank 3 stopped answering (died?): rank 2, step 0, action 2B1 (waiting for its input from rank 3): RuntimeError: "
        "[gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:30922: Connection reset by peer. This is typically caused by "
        "a remote worker hanging")
    # DualPipeV-like placement, an overlapped group: either neighbour may be the one lost
    group = SimpleNamespace(failed_action="(1F0;2B0)OVERLAP_F_B")
    assert _where(RuntimeError("Connection closed by peer"), 1, 3, group, (0, 1, 1, 0)).startswith(
        "rank 0 stopped answering (died?): rank 1, step 3, action (1F0;2B0)OVERLAP_F_B (waiting for its input from rank 0): ")
    # any other error is the rank's own: no peer is said to be lost
    assert _where(RuntimeError("Timed out waiting 20000ms"), 2, 0, timer, (0, 1, 2, 3)) == (
        "rank 2, step 0, action 2B1 (waiting for its input from rank 3): RuntimeError: Timed out waiting 20000ms")
    assert _where(RuntimeError("Connection reset by peer"), 0, 1, SimpleNamespace(failed_action=None), (0, 1)) == (
        "rank 0, step 1: RuntimeError: Connection reset by peer")  # outside every action: the peer is not known


@pytest.mark.slow
def test_under_torchrun_a_dead_rank_is_named(tmp_path: Path) -> None:
    # torchrun stops every process once it sees one end: the survivor whose transfer the dead rank broke says it stopped
    # answering, if it gets to print before torchrun stops it; torchrun's own report names the dead rank in any case
    env = {**os.environ, "OMP_NUM_THREADS": "1", FAULT_ENV: "1:kill@1F2#0"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "harness", "run", "1F1B",
           "-p", "2", "-m", "4", "--backend", "torch", "--transfer-timeout-s", "20", "--steps", "0:1", "--out", str(tmp_path / "r")]
    t = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and time.monotonic() - t < 240, out  # an error within the timeout, never a hang
    assert re.search(r"rank\s+: 1 \(local_rank: 1\)\n\s+exitcode\s+: -9 \(pid: \d+\)", out), out
    said = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(said) <= 1, out
    for line in said:
        assert re.match(r"error: torch: rank 1 stopped answering \(died\?\): rank 0, step 0, action 0\w+ \(waiting for its input "
                        r"from rank 1\): RuntimeError: .*(Connection reset by peer|Connection closed by peer|Broken pipe)", line), out


@pytest.mark.slow
def test_a_stalled_rank_ends_the_run_at_the_timeout_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_ENV, "1:stall@1F2#0")
    case = PipelineCase("1F1B", stages=2, microbatches=4, cost=FixedCost.ms(F=1, B=2), device_options={"torch": {"timeout_s": 5}})
    t = time.monotonic()
    with pytest.raises(ExecutionError, match=r"rank 0, step 0, action 0\w+ \(waiting for its input from rank 1\): .*[Tt]imed out"):
        run_case(case, backend="torch", steps=range(0, 1))
    assert time.monotonic() - t < 240


def test_profile_jobs_under_pytest_xdist_is_refused_on_the_torch_backend(pytester: pytest.Pytester) -> None:
    # each case's ranks are processes timed on this machine's cores: parallel workers would share them
    pytester.makepyfile(test_cases="def test_x():\n    pass\n")
    result = pytester.runpytest("--profile-jobs", "--backend=torch", "-n", "2", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --profile-jobs with pytest-xdist (-n) and --backend=torch: the torch backend runs one "
                                 "pipeline rank per process*run it without -n"])


def test_the_command_line_takes_the_torch_options_for_the_torch_backend_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    for name in ("TORCHELASTIC_RUN_ID", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)  # the working directory must stay as it was: every report folder goes under tmp_path
    out = str(tmp_path / "report")
    assert main(["run", "1F1B", "-p", "2", "-m", "4", "--backend", "sim", "--torch-lowering", "harness", "--out", out]) != 0
    assert "--torch-lowering is for --backend torch" in capsys.readouterr().err
    monkeypatch.setattr(sys, "argv", ["/x/harness/__main__.py", "run", "1F1B", "-p", "2", "-m", "4", "--backend", "torch", "--no-launch",
                                      "--out", out])
    assert main(sys.argv[1:]) != 0
    assert (f"run torchrun --standalone --nproc-per-node=2 -m harness run 1F1B -p 2 -m 4 --backend torch --no-launch --out {out}"
            in capsys.readouterr().err)
    assert list(cwd.iterdir()) == []


@pytest.mark.slow
def test_the_command_line_under_torchrun_says_a_wrong_number_of_processes_once(tmp_path: Path) -> None:
    # every process meets the same error; rank 0 alone prints it, before any report folder is made
    out_dir = tmp_path / "report"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop(FAULT_ENV, None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "harness", "run", "1F1B",
           "-p", "4", "-m", "8", "--backend", "torch", "--out", str(out_dir)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert [line for line in out.splitlines() if "error:" in line] == [
        "error: 1F1B p=4 m=8: the torch backend runs one pipeline rank per process: this case has p=4 ranks but torchrun started "
        f"2 process(es); run it with torchrun --standalone --nproc-per-node=4 -m harness run 1F1B -p 4 -m 8 --backend torch --out {out_dir}"]
    assert not out_dir.exists()
    assert re.search(r"Root Cause \(first observed failure\):\n\[0\]:\n.*\n.*\n\s+rank\s+: 0 \(local_rank: 0\)\n\s+exitcode\s+: 2", out), out


def _torchrun(tmp_path: Path, n: int, inner: str, *extra: str) -> tuple[int, str]:
    env = {**os.environ, "TORCH_RANKS_OUT": str(tmp_path), "OMP_NUM_THREADS": "1"}
    env.pop(FAULT_ENV, None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}", "-m", "pytest",
           str(RANKS / inner), "--backend=torch", "-p", "no:cacheprovider", "-q", "-rA", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.slow
def test_the_command_line_under_torchrun_hands_over_the_harness_lowering(tmp_path: Path) -> None:
    # python -m harness run under torchrun, the harness's own placement of sends and receives handed to PyTorch's runtime
    out_dir = tmp_path / "report"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop(FAULT_ENV, None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "harness", "run", "1F1B",
           "-p", "2", "-m", "4", "--backend", "torch", "--torch-lowering", "harness", "--steps", "1:3", "--out", str(out_dir)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert out.count("1F1B p=2 m=4 on torch: median step ") == 1, out  # rank 0 alone prints the summary
    case = json.loads((out_dir / "results.json").read_text(encoding="utf-8"))["cases"][0]
    info = case["device"]["torch"]
    assert case["backend"] == "torch" and case["steps"] == [1, 2] and info["started"] == "torchrun"
    assert info["lowering"] == "harness (handed over lowered)"
    # what the runtime ran is the harness's just-in-time placement, with PyTorch's REDUCE_GRAD after each stage's last B
    own = comm.lower(build_schedule("1F1B", 2, 4), FixedCost.ms(F=1, B=2), "stream", True, "just-in-time")
    for r, row in enumerate(info["executed"]):
        assert [a for a in row if not a.endswith("REDUCE_GRAD")] == [str(j) for j in own.ranks[r]]
        assert row.count(f"{r}REDUCE_GRAD") == 1 and row.index(f"{r}REDUCE_GRAD") > row.index(f"{r}B3")
    assert case["schedule"]["params"]["comm_placement"] == "harness (just-in-time)"
    assert len(info["losses"]) == 3 and info["weights_changed"] == [True, True]


@pytest.mark.slow
def test_two_ranks_under_torchrun(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    rc, out = _torchrun(tmp_path, 2, "ranks_two.py", "--profile-jobs", "--profile-steps=1:2", f"--report-dir={reports}")
    assert rc == 0, out
    assert re.search(r"\b8 passed\b", out), out  # 4 orders, timed parts, beside the sim, import-torch, compute
    assert (tmp_path / "traces-zbv" / "rank0.json").exists() and (tmp_path / "traces-zbv" / "rank1.json").exists()
    # rank 0 alone wrote the report of the cases the pipeline fixture ran, each with backend torch
    doc = json.loads((reports / "results.json").read_text(encoding="utf-8"))
    assert sorted(c["label"] for c in doc["cases"]) == [f"test_the_recorded_compute_order_is_the_order_pytorch_executes[{name}]"
                                                        for name in ("ScheduleDualPipeV", "ScheduleInterleaved1F1B",
                                                                     "ScheduleInterleavedZeroBubble", "ScheduleZBVZeroBubble")]
    assert sorted((c["schedule"]["name"], c["schedule"]["p"], c["schedule"]["m"], c["schedule"]["v"]) for c in doc["cases"]) == [
        ("DualPipeV", 2, 4, 2), ("Interleaved1F1B", 2, 4, 2), ("InterleavedZeroBubble", 2, 4, 2), ("ZB-V", 2, 4, 2)]
    # the schedule reported is the one PyTorch's runtime ran: its own lowering, sends and receives included
    assert {c["schedule"]["params"]["comm_placement"] for c in doc["cases"]} == {"torch"}
    assert {c["backend"] for c in doc["cases"]} == {"torch"} and all(c["steps"] == [1] for c in doc["cases"])
    assert (reports / "index.html").exists() and len(re.findall(r"^reports:", out, re.M)) == 1  # (a long path wraps after it)


@pytest.mark.slow
def test_four_ranks_under_torchrun(tmp_path: Path) -> None:
    rc, out = _torchrun(tmp_path, 4, "ranks_four.py")
    assert rc == 0, out
    assert re.search(r"\b2 passed\b", out), out
