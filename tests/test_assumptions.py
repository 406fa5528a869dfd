"""Every case names its assumptions: in the result, results.json, the page, the pytest summary's legend,
and the output of ``run`` and ``show``."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

import pytest

from harness.case import PipelineCase
from harness.cli import main
from harness.model.cost import FixedCost
from harness.model.overlap import group_ns
from harness.report.fields import case_field_problem
from harness.report.html import render_index
from harness.report.results import case_to_dict, results_document
from harness.report.summary import case_table
from harness.runner import run_case
from harness.schedule.groups import groups_of
from harness.schedule.model import JobKind

COST = FixedCost.ms(F=1, B=2)


def overlap_sentence(result) -> str:
    (sentence,) = [a for a in result.assumptions if a.startswith("overlapped F&B groups")]
    return sentence


def test_a_dualpipev_case_with_defaults_names_its_overlap_model():
    r = run_case(PipelineCase("DualPipeV", 4, 8, cost=COST), "sim")
    first = groups_of(r.schedule)[0]
    durations = tuple(COST.duration_ns(job, r.schedule.num_stages) for job in first)
    # the default is no overlap (F + B), as PyTorch's runtime runs OVERLAP_F_B, and the sentence says so
    assert group_ns(COST, tuple(first), durations, r.schedule.num_stages) == sum(durations) == 3_000_000
    sentence = overlap_sentence(r)
    assert f"overlapped F&B groups ({len(groups_of(r.schedule))} per step): no overlap, a group lasts F + B (the default" in sentence
    assert "1 + 2 ms -> 3 ms" in sentence
    assert case_to_dict(r)["assumptions"] == r.assumptions


@pytest.mark.parametrize(("field", "how", "source"), [
    ({"overlap_ratio": 1}, "no overlap, a group lasts F + B", "overlap_ratio=1"),
    ({"overlap_ratio": 0}, "perfect overlap, a group lasts max(F, B)", "overlap_ratio=0"),
    ({"overlap_ns": 2_500_000}, "a group lasts 2.5 ms against F + B = 3 ms", "overlap_ns=2500000"),
])
def test_the_overlap_sentence_follows_the_cost_model_s_overlap_fields(field, how, source):
    r = run_case(PipelineCase("DualPipeV", 4, 8, cost=FixedCost.ms(F=1, B=2, **field)), "sim")
    assert f": {how} ({source};" in overlap_sentence(r)
    assert not [a for a in run_case(PipelineCase("1F1B", 4, 8, cost=COST), "sim").assumptions if "overlapped" in a]


def test_the_run_line_of_a_dualpipev_case_names_its_overlap_model_and_per_chunk_durations(tmp_path: Path, capsys):
    assert main(["run", "DualPipeV", "-p", "4", "-m", "8", "--backend", "sim", "--out", str(tmp_path / "rep")]) == 0
    first, *rest = capsys.readouterr().out.splitlines()
    assert first.startswith("DualPipeV p=4 m=8 on sim: median step ")
    (case,) = json.loads((tmp_path / "rep" / "results.json").read_text())["cases"]
    assert rest[: len(case["assumptions"])] == [f"  assumes: {a}" for a in case["assumptions"]]
    assert any(line.startswith("  assumes: overlapped F&B groups (25 per step): ") for line in rest)
    assert any(line.startswith("  assumes: per-chunk durations: F and B (stage 0: 1 and 2 ms) are one stage's") for line in rest)


@pytest.mark.parametrize(("model", "sentence"), [
    ("edge", "comm model 'edge': a consumer on another rank starts the transfer time after its producer ends; transfers never "
             "queue; 0.5 ms per transfer"),
    ("stream", "comm model 'stream': send/receive jobs on a FIFO comm stream per pair of ranks, beside the compute stream; "
               "send/receive jobs placed 'just-in-time', 0.5 ms per transfer"),
    ("free", "comm model 'free': transfers cost nothing (the cost model's 0.5 ms per transfer not charged)"),
    ("blocking", "comm model 'blocking': send/receive jobs on the compute streams of both ranks, a send and its receive starting "
                 "together; send/receive jobs placed 'timed', 0.5 ms per transfer"),
])
def test_the_comm_sentence_names_the_model_the_transfer_time_and_the_placement(model, sentence):
    r = run_case(PipelineCase("1F1B", 4, 8, cost=FixedCost.ms(F=1, B=2, p2p_latency_ns=500_000), comm_model=model), "sim")
    assert r.assumptions[-1] == sentence


def test_fixed_cost_says_when_it_halves_b_and_that_v_above_1_durations_are_per_chunk():
    zb = run_case(PipelineCase("ZB-H1", 4, 8, cost=COST), "sim").assumptions
    assert zb[0] == "a split backward's I and W each take half of B (FixedCost given no I or W)"
    given = run_case(PipelineCase("ZB-H1", 4, 8, cost=FixedCost.ms(F=1, B=2, W=0.5)), "sim").assumptions
    assert not [a for a in given if "half of B" in a] and not [a for a in given if "per-chunk" in a]
    v2 = run_case(PipelineCase("Interleaved1F1B", 4, 8, chunks=2, cost=COST), "sim").assumptions
    assert [a for a in v2 if a.startswith("per-chunk durations:")] == [
        "per-chunk durations: F and B (stage 0: 1 and 2 ms) are one stage's, one chunk's, and a rank runs v=2 chunks, so "
        "v x m x (F + B) of work per step; for the same model as at v=1, divide F and B by 2"]


class _Custom:
    """A cost model of its own, without an assumptions method."""

    def duration_ns(self, job, num_stages):
        return {JobKind.F: 1000, JobKind.B: 2000, JobKind.I: 1000, JobKind.W: 1000}.get(job.kind, 0)

    def flops(self, job, num_stages):
        return 0.0

    def nbytes(self, job, num_stages):
        return 0

    def is_uniform(self, num_stages):
        return True

    def describe(self):
        return {"model": "custom"}


def test_a_custom_cost_model_is_named_and_a_bad_assumptions_answer_is_refused():
    r = run_case(PipelineCase("1F1B", 2, 4, cost=_Custom()), "sim")
    assert r.assumptions[0] == "durations as the cost model _Custom gives them, per job kind and stage"

    class Bad(_Custom):
        def assumptions(self, schedule):
            return "not a list"

    from harness.errors import ConfigError

    with pytest.raises(ConfigError, match=r"cost model Bad: assumptions\(\) gave 'not a list', not a list of texts"):
        run_case(PipelineCase("1F1B", 2, 4, cost=Bad()), "sim")


def test_results_page_and_summary_show_the_assumptions():
    dual = run_case(PipelineCase("DualPipeV", 4, 8, cost=COST), "sim", case_id="dual")
    plain = run_case(PipelineCase("1F1B", 4, 8, cost=COST), "sim", case_id="plain")
    cases = [case_to_dict(dual), case_to_dict(plain)]
    html = render_index(results_document(cases))
    overlap = overlap_sentence(dual)
    assert f"<li><bdi>{escape(overlap)}</bdi></li>" in html  # the case header
    assert 'title="assumptions: ' in html  # the overview's tooltip on the case's name
    lines = case_table([dual, plain])
    legend = lines[lines.index(next(x for x in lines if x.startswith("assumptions ("))):]
    assert legend[0] == "assumptions (every case unless named):"
    shared = "  - comm model 'stream': transfers cost nothing (the cost model gives them 0 ns, so no send/receive jobs)"
    assert legend.count(shared) == 1  # said once for both cases
    assert f"  - {overlap} [{dual.label}]" in legend
    # an older file without the field loads, and the page says the case recorded none; a wrong type is refused
    old = dict(cases[1])
    old.pop("assumptions")
    assert case_field_problem(old) is None
    assert "assumptions not recorded" in render_index(results_document([old]))
    bad = dict(cases[1], assumptions=[3])
    assert case_field_problem(bad) == "assumptions[0] is 3 (int), expected a string"


def test_show_prints_the_assumptions(capsys):
    assert main(["show", "ZB-V", "-p", "4", "-m", "8", "-v", "2", "--comm-model", "edge", "--p2p-latency-ms", "0.1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assumed = [line for line in out if line.startswith("assumes: ")]
    assert assumed[-1] == ("assumes: comm model 'edge': a consumer on another rank starts the transfer time after its producer "
                           "ends; transfers never queue; 0.1 ms per transfer")
    # the per-chunk basis is said once, in show's own line with the work figure, not again among the assumes: lines
    assert not [line for line in assumed if "per-chunk" in line]
    assert [line for line in out if line.startswith("durations are ")] == [
        "durations are per chunk: each rank runs v*m*(F+B) = 2*8*(1+2) ms = 48 ms of work per step (2 chunks per rank, each half of "
        "a v=1 schedule's stage: for the same model as a v=1 schedule, divide F and B by 2, and a rank runs m*(F+B) of that "
        "schedule's per-stage F and B)"]


@pytest.mark.parametrize(("model", "placed"), [("stream", "just-in-time"), ("blocking", "timed")])
def test_show_names_the_placement_of_the_send_receive_jobs_it_inserted(capsys, model, placed):
    # the sentence is of the schedule before lowering: the jobs show inserted are not the schedule's own
    assert main(["show", "1F1B", "-p", "4", "-m", "8", "--comm-model", model, "--p2p-latency-ms", "0.1"]) == 0
    assumed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("assumes: ")]
    assert assumed[-1].endswith(f"; send/receive jobs placed {placed!r}, 0.1 ms per transfer")


DUALPIPE_P4_M8 = ("per-stage durations: F and B (stage 0: 1 and 2 ms) are one stage's, 1/4 of a model copy, as at v=1; a rank holds 2 "
                  "stages across the 2 chains (DualPipe's two directions), each stage running only its chain's micro-batches (4 of the "
                  "8), so m x (F + B) of work per step, as a v=1 schedule's (not v x m x (F + B))")


def test_dualpipe_durations_are_per_stage_and_a_rank_runs_m_times_f_plus_b():
    r = run_case(PipelineCase("DualPipe", 4, 8, cost=COST), "sim")
    assert [a for a in r.assumptions if a.startswith(("per-stage durations:", "per-chunk durations:"))] == [DUALPIPE_P4_M8]
    # what the sentence claims: every rank's jobs (F, I and W, B split in half) add up to m x (F + B) = 8 x 3 ms
    n = r.schedule.num_stages
    work = [sum(COST.duration_ns(job, n) for rank, _, job in r.schedule.jobs() if rank == k) for k in range(4)]
    assert work == [24_000_000] * 4
    # DualPipeV, one chain over 2p half-size chunks: the per-chunk sentence, v x m x (F + B) = 48 ms of these durations
    v = run_case(PipelineCase("DualPipeV", 4, 8, cost=COST), "sim")
    assert [a for a in v.assumptions if a.startswith(("per-stage durations:", "per-chunk durations:"))] == [
        "per-chunk durations: F and B (stage 0: 1 and 2 ms) are one stage's, one chunk's, and a rank runs v=2 chunks, so "
        "v x m x (F + B) of work per step; for the same model as at v=1, divide F and B by 2"]
    # a cost model without an assumptions method gets the same basis
    custom = run_case(PipelineCase("DualPipe", 2, 4, cost=_Custom()), "sim").assumptions
    assert custom[:2] == [
        "durations as the cost model _Custom gives them, per job kind and stage",
        "per-stage durations: the durations _Custom gives are one stage's, 1/2 of a model copy, as at v=1; a rank holds 2 stages "
        "across the 2 chains (DualPipe's two directions), each stage running only its chain's micro-batches (2 of the 4), so "
        "m x (F + B) of work per step, as a v=1 schedule's (not v x m x (F + B))"]


def test_the_run_line_of_a_dualpipe_case_says_its_durations_are_per_stage(tmp_path: Path, capsys):
    assert main(["run", "DualPipe", "-p", "4", "-m", "8", "--backend", "sim", "--out", str(tmp_path / "rep")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line for line in out if "durations" in line and "per job kind" not in line] == [f"  assumes: {DUALPIPE_P4_M8}"]
    (case,) = json.loads((tmp_path / "rep" / "results.json").read_text())["cases"]
    assert DUALPIPE_P4_M8 in case["assumptions"]


@pytest.mark.parametrize(("argv", "v"), [(["ZB-V"], 2), (["Interleaved1F1B", "-v", "2"], 2), (["Interleaved1F1B", "-v", "3"], 3)])
def test_run_with_several_chunks_per_rank_says_once_that_its_durations_are_per_chunk(tmp_path: Path, capsys, argv, v):
    assert main(["run", *argv, "-p", "2", "-m", "6", "--backend", "sim", "--out", str(tmp_path / "rep")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line for line in out if "per chunk" in line or "per-chunk" in line] == [
        f"  assumes: per-chunk durations: F and B (stage 0: 1 and 2 ms) are one stage's, one chunk's, and a rank runs v={v} chunks, "
        f"so v x m x (F + B) of work per step; for the same model as at v=1, divide F and B by {v}"]


def test_show_states_a_dualpipe_schedule_s_duration_basis_once(capsys):
    assert main(["show", "DualPipe", "-p", "4", "-m", "8"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line for line in out if "durations" in line] == [
        "durations are per stage: each rank runs m*(F+B) = 8*(1+2) ms = 24 ms of work per step (DualPipe: its 2 stages run m/2 "
        "micro-batches each, one per direction; each stage is 1/p of the model, as a v=1 schedule's)"]
    assert main(["show", "DualPipeV", "-p", "4", "-m", "8"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line for line in out if "durations" in line or "chunk" in line] == [
        "durations are per chunk: each rank runs v*m*(F+B) = 2*8*(1+2) ms = 48 ms of work per step (2 chunks per rank, each half of "
        "a v=1 schedule's stage: for the same model as a v=1 schedule, divide F and B by 2, and a rank runs m*(F+B) of that "
        "schedule's per-stage F and B)"]
    assert "the busiest rank is busy 48 ms per step" in "\n".join(out)
