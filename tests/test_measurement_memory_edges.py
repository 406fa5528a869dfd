"""Edges a new user hit in the measurement and memory features, each kept fixed."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from harness.analysis.bubble import convert_bubble
from harness.case import PipelineCase
from harness.cli import main
from harness.errors import ConfigError
from harness.model.cost import FixedCost
from harness.model.transformer import TransformerCost
from harness.report.results import case_to_dict, results_document
from harness.run.window import AdaptiveWindow
from harness.runner import run_case

GPT = TransformerCost(hidden_size=256, seq_len=64, micro_batch_size=1, num_layers=8, tflops=1, vocab_size=1000)


def test_a_layout_without_the_embedding_or_head_is_refused_when_the_model_has_a_vocabulary():
    with pytest.raises(ConfigError) as info:
        replace(GPT, layout="t*2|t*2|t*2|t*2")
    assert "vocab_size=1000 puts the embedding and the LM head on the end stages, but the layout 't*2|t*2|t*2|t*2' has no " \
           "E (the embedding, first stage) and no L (the LM head and loss, last stage)" in str(info.value)
    assert "'Ett|tt|tt|ttL'" in str(info.value)
    replace(GPT, layout="Ett|tt|tt|ttL")
    replace(GPT, vocab_size=0, layout="t*2|t*2|t*2|t*2")  # no vocabulary: nothing to place


def test_heads_must_divide_the_hidden_size():
    with pytest.raises(ConfigError, match="num_attention_heads=3 must divide hidden_size=256"):
        replace(GPT, num_attention_heads=3)


def test_a_timed_run_is_decomposed_from_what_ran():
    r = run_case(PipelineCase("1F1B", 2, 4, cost=FixedCost.ms(F=2, B=4)), "cpu", range(1, 4))
    d = r.decomposition
    step = next(m for m in r.metrics.steps if m.step_time_ns == d.step_ns)
    assert d.work_ns == step.busy_ns  # measured busy time, not the cost model's 24 ms per rank
    assert d.ideal_ns + d.imbalance_ns + d.recompute_ns + d.comm_ns + d.schedule_ns == pytest.approx(d.step_ns)


def _doc(tmp_path, name, f_ms, steps):
    r = run_case(PipelineCase("1F1B", 2, 4, cost=FixedCost.ms(F=f_ms, B=2 * f_ms)), "sim", range(0, steps), case_id="c")
    doc = results_document([case_to_dict(r)])
    doc["cases"][0]["backend"] = "cpu"  # as if timed: not exact
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return path


def test_too_few_steps_are_gated_on_the_change_alone_and_said_so(tmp_path, capsys):
    base, slow = _doc(tmp_path, "base", 1, 3), _doc(tmp_path, "slow", 1.2, 3)
    assert main(["compare", str(base), str(slow), "--fail", "step_time:5%"]) == 1  # +20 %, 3 steps: no test, the change decides
    out = capsys.readouterr().out
    assert "not enough samples" in out and "1 case(s) with fewer than 5 steps in a file gated on the change alone" in out
    assert main(["compare", str(base), str(_doc(tmp_path, "same", 1, 3)), "--fail", "step_time:5%"]) == 0


def test_a_malformed_flags_field_is_refused_not_dropped(tmp_path, capsys):
    path = _doc(tmp_path, "base", 1, 5)
    doc = json.loads(path.read_text())
    doc["cases"][0]["flags"] = "unstable"
    path.write_text(json.dumps(doc))
    assert main(["compare", str(path), str(path), "--fail", "step_time:5%"]) == 2
    assert "flags is 'unstable' (str), expected a list of" in capsys.readouterr().err


def test_does_not_fit_says_how_much_in_a_readable_unit():
    cost = FixedCost.ms(F=1, B=2, mem_F=2**20, mem_static=9 * 2**30)
    r = run_case(PipelineCase("1F1B", 2, 2, cost=cost, memory_limit_bytes=9 * 2**30 + 2**20), "sim")
    assert r.does_not_fit == "rank 0 peaks at 9 GiB, 1 MiB (1,048,576 bytes) above the 9 GiB limit per rank"
    small = run_case(PipelineCase("1F1B", 2, 2, cost=FixedCost.ms(F=1, B=2, mem_F=700), memory_limit_bytes=1350), "sim")
    assert small.does_not_fit == "rank 0 peaks at 1.37 KiB, 50 B (50 bytes) above the 1.32 KiB limit per rank"


def test_a_memory_limit_without_a_memory_model_is_said():
    r = run_case(PipelineCase("1F1B", 2, 2, memory_limit_bytes=10), "sim")
    assert r.memory is None and any("has no memory model, so nothing was checked against it" in w for w in r.warnings)


def test_per_stage_fields_are_named_and_nested_lists_refused():
    with pytest.raises(ConfigError, match=r"mem_static gives 2 per-stage value\(s\), but the pipeline has 4"):
        run_case(PipelineCase("1F1B", 4, 4, cost=FixedCost.ms(F=1, B=2, mem_F=10, mem_static=[1, 2])), "sim")
    with pytest.raises(ConfigError, match=r"F\[0\] is a list; give one number per stage"):
        FixedCost.ms(F=[[5, 6]] * 4, B=2)


def test_a_backward_that_frees_less_than_its_forward_is_refused():
    class Leaky:
        def duration_ns(self, job, n): return 1000
        def flops(self, job, n): return 0.0
        def nbytes(self, job, n): return 0
        def is_uniform(self, n): return True
        def describe(self): return {"model": "leaky"}
        def memory_bytes(self, job, n): return 100 if job.kind.value == "F" else -10
        def static_bytes(self, stage, n): return 0

    with pytest.raises(ConfigError, match="stage 0's forward allocates 100 bytes but its backward frees 10"):
        run_case(PipelineCase("1F1B", 2, 3, cost=Leaky()), "sim")


def test_window_limits_follow_each_other_and_steps_must_be_consecutive():
    assert AdaptiveWindow(min_steps=2000).max_steps == 2000
    assert AdaptiveWindow().max_steps == 1000
    with pytest.raises(ConfigError, match=r"consecutive steps, range\(START, END\) with step 1"):
        run_case(PipelineCase("1F1B", 2, 2), "sim", range(1, 4, 2))


def test_convert_bubble_checks_its_input_and_takes_the_results_names():
    assert convert_bubble(0.25, "bubble_ratio", "bubble_over_ideal") == pytest.approx(1 / 3)
    for bad in (float("inf"), float("nan"), "0.2"):
        with pytest.raises(ConfigError, match="must be a finite number"):
            convert_bubble(bad, "over_ideal", "idle_share")  # type: ignore[arg-type]


def test_show_gives_no_free_transfer_theory_when_transfers_cost_time(capsys):
    assert main(["show", "ZB-H1", "-p", "4", "-m", "8", "--p2p-latency-ms", "0.5", "--comm-model", "edge"]) == 0
    span = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("span bubble per rank"))
    assert span.endswith("9, 7, 5, 3 ms") and "theory" not in span
    assert main(["show", "ZB-H1", "-p", "4", "-m", "8"]) == 0
    assert "theory, worst rank: 3 ms" in capsys.readouterr().out


def test_the_summary_names_a_case_by_its_test_and_its_own_name():
    from harness.report.summary import case_table

    named = run_case(PipelineCase("1F1B", 2, 2, name="pl-eager"), "sim", case_id="cases/x.py::test_placement#2")
    plain = run_case(PipelineCase("1F1B", 2, 2, name="test_plain"), "sim", case_id="cases/x.py::test_plain")
    rows = case_table([named, plain])[1:3]
    assert rows[0].startswith("test_placement#2 (pl-eager) ") and rows[1].startswith("test_plain ")
