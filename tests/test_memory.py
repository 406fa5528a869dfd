"""Memory in bytes: hand-computed timelines, published peak ratios, the transformer's formulas, the limit."""

from __future__ import annotations

import json

import pytest

from harness.analysis.memory import has_memory_model
from harness.case import PipelineCase
from harness.errors import ConfigError
from harness.model.cost import FixedCost
from harness.model.transformer import TransformerCost
from harness.report.results import case_to_dict
from harness.report.trace import case_trace
from harness.report.tracecheck import check_trace
from harness.runner import run_case
from harness.schedule.model import Job, JobKind

MS = 1_000_000
#: F allocates 100 bytes, I frees 60 and W 40 (a full B frees all 100), every stage.
SPLIT = FixedCost.ms(F=1, B=2, mem_F=100, mem_I=-60, mem_W=-40)


def timeline(result, rank):
    t, b = result.memory.timeline[rank]
    return list(zip([x // MS for x in t], b))


def test_1f1b_p2_m3_timeline_by_hand():
    # rank 0: F0 [0,1] F1 [1,2] B0 [4,6] F2 [6,7] B1 [7,9] B2 [10,12]; rank 1: F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7] F2 [7,8] B2 [8,10]
    # (ms). Allocations count from a job's start, frees from its end; at one time the free comes first.
    r = run_case(PipelineCase("1F1B", 2, 3, cost=FixedCost.ms(F=1, B=2, mem_F=100, mem_I=-60, mem_W=-40, mem_static=1000)), "sim")
    assert r.memory.static_bytes == [1000, 1000]
    assert timeline(r, 0) == [(0, 1100), (1, 1200), (6, 1200), (9, 1100), (12, 1000)]  # at 6: B0 frees 100, F2 takes 100
    assert timeline(r, 1) == [(1, 1100), (4, 1100), (7, 1100), (10, 1000)]
    assert r.memory.peak_bytes == [1200, 1100] and r.memory.peak_activation_bytes == [200, 100]
    assert r.memory.peak_time_ns == [1 * MS, 1 * MS]


def test_zb_h1_p2_m3_timeline_by_hand():
    # rank 0: F0 [0,1] F1 [1,2] I0 [3,4] W0 [4,5] F2 [5,6] I1 [6,7] W1 [7,8] I2 [8,9] W2 [9,10]
    # rank 1: F0 [1,2] I0 [2,3] F1 [3,4] I1 [4,5] W0 [5,6] F2 [6,7] I2 [7,8] W1 [8,9] W2 [9,10]
    r = run_case(PipelineCase("ZB-H1", 2, 3, cost=SPLIT), "sim")
    assert timeline(r, 0) == [(0, 100), (1, 200), (4, 140), (5, 200), (7, 140), (8, 100), (9, 40), (10, 0)]
    assert timeline(r, 1) == [(1, 100), (3, 140), (5, 80), (6, 140), (8, 80), (9, 40), (10, 0)]
    assert r.memory.peak_bytes == [200, 140]


def _peak(schedule, p, m, cost, v=1):
    return run_case(PipelineCase(schedule, p, m, chunks=v, cost=cost), "sim").memory.peak_activation_bytes


def test_published_peak_ratios_with_equal_f_b_w():
    # T_F = T_B = T_W, uniform stages; W frees what F allocated (I frees nothing), so bytes count stage activations.
    p, m, a = 4, 16, 2**20
    stage = FixedCost.ms(F=1, B=2, W=1, mem_F=a, mem_I=0, mem_W=-a)  # one stage = p of the model's 1/p ...
    chunk = FixedCost.ms(F=1, B=2, W=1, mem_F=a // 2, mem_I=0, mem_W=-(a // 2))  # ... a V chunk holds half as many layers
    one_f1b = _peak("1F1B", p, m, stage)
    assert one_f1b == [p * a, (p - 1) * a, (p - 2) * a, (p - 3) * a]  # stage s holds p - s
    assert max(_peak("ZB-H1", p, m, stage)) == max(one_f1b)  # ZB-H1 = 1F1B (arXiv:2401.10241 Table 2)
    assert max(_peak("ZB-V", p, m, chunk)) == max(one_f1b)  # ZB-V = 1F1B (zero-bubble README)
    assert _peak("ZB-H2", p, m, stage) == [(2 * p - 1) * a] * p  # "about 2x": the builder gives 2p - 1
    # DualPipe README: activation per device PP + 1 with PP = 2p stages on p devices (in stage units)
    assert _peak("DualPipeV", p, m, chunk) == [(2 * p + 1) * (a // 2)] * p
    assert _peak("FThenB", p, m, stage) == [m * a] * p  # GPipe holds every micro-batch


def test_theory_is_shown_beside_the_measured_bytes():
    cost = FixedCost.ms(F=1, B=2, W=1, mem_F=10, mem_I=0, mem_W=-10, mem_static=5)
    r = run_case(PipelineCase("ZB-V", 4, 8, cost=cost), "sim")
    assert r.theory["peak_memory_bytes"] == r.memory.peak_bytes == [2 * 5 + 8 * 10] * 4
    partial = run_case(PipelineCase("ZB-V", 4, 8, cost=SPLIT), "sim")  # I frees part early: in-flight x F over-counts
    assert "peak_memory_bytes" not in partial.theory


def test_fixed_cost_memory_must_balance_and_is_signed():
    with pytest.raises(ConfigError, match="must free what the forward allocated"):
        FixedCost.ms(F=1, B=2, mem_F=100, mem_I=-50, mem_W=-40)
    with pytest.raises(ConfigError, match="a backward frees activations, so both are <= 0"):
        FixedCost.ms(F=1, B=2, mem_F=100, mem_W=40)
    with pytest.raises(ConfigError, match="mem_F must be non-negative"):
        FixedCost.ms(F=1, B=2, mem_F=-1)
    c = FixedCost.ms(F=1, B=2, mem_F=[100, 200])  # per stage; I frees all by default
    assert [c.memory_bytes(Job(s, k, 0), 2) for s in (0, 1) for k in (JobKind.F, JobKind.B, JobKind.I, JobKind.W)] == [
        100, -100, -100, 0, 200, -200, -200, 0]
    assert not has_memory_model(FixedCost.ms(F=1, B=2)) and run_case(PipelineCase("1F1B", 2, 3), "sim").memory is None


def test_transformer_activation_and_static_bytes_by_hand():
    # h = 1024, s = 512, b = 1, a = h // 128 = 8 heads, 4 layers over 2 stages, V = 32000
    c = TransformerCost(hidden_size=1024, seq_len=512, micro_batch_size=1, num_layers=4, tflops=100, vocab_size=32000)
    sbh = 512 * 1024
    per_layer = sbh * 34 + 5 * 8 * 512 * 512  # s b h (34 + 5 a s / h) (Korthikanti et al., eq. 2)
    logits = 4 * 512 * 32000  # fp32, unfused cross-entropy, last stage
    f0, f1 = (c.memory_bytes(Job(s, JobKind.F, 0), 2) for s in (0, 1))
    assert f0 == 2 * per_layer and f1 == 2 * per_layer + logits
    assert c.memory_bytes(Job(1, JobKind.W, 0), 2) == -2 * 32 * sbh  # W frees what its weight gradients read
    assert c.memory_bytes(Job(1, JobKind.I, 0), 2) == -(f1 - 2 * 32 * sbh)
    assert c.memory_bytes(Job(1, JobKind.B, 0), 2) == -f1
    layer_params = 12 * 1024**2
    assert c.params_of(0, 2) == 2 * layer_params + 32000 * 1024  # + embedding
    assert c.params_of(1, 2) == 2 * layer_params + 32000 * 1024  # + LM head
    assert c.static_bytes(0, 2) == 18 * c.params_of(0, 2)  # Megatron's 18 bytes per parameter
    lm_head = 2 * 512 * 1024 * 32000
    assert c.flops(Job(1, JobKind.F, 0), 2) == 24 * 1024**2 * 512 * 2 + lm_head
    assert c.flops(Job(0, JobKind.F, 0), 2) == 24 * 1024**2 * 512 * 2


def test_gqa_and_ffn_size_change_the_layer_parameters():
    c = TransformerCost(hidden_size=4096, seq_len=8, micro_batch_size=1, num_layers=2, tflops=1, num_attention_heads=32,
                        num_query_groups=8, ffn_hidden_size=14336)
    # q and o: 2 h^2; k and v: 2 h (h g / a) = 2 h 1024; MLP: 2 h f (Llama-3-8B's shapes, SwiGLU's third matrix aside)
    assert c.params_per_layer == 2 * 4096**2 + 2 * 4096 * 1024 + 2 * 4096 * 14336
    with pytest.raises(ConfigError, match="num_query_groups=5 must divide num_attention_heads=32"):
        TransformerCost(hidden_size=4096, seq_len=8, micro_batch_size=1, num_layers=2, tflops=1, num_attention_heads=32,
                        num_query_groups=5)


@pytest.mark.parametrize(("recompute", "kept_per_layer", "b_over_f"), [
    ("none", 34 + 5 * 8 * 512 / 1024, 2.0),
    # attention=False: F times the weight GEMMs only (24 h^2 per token and layer), but a recomputation still redoes the
    # attention core, 4 s h per token and layer: s / (6 h) = 512 / 6144 = 1/12 of F
    ("selective", 34, 2.0 + 1 / 12),
    ("full", 2, 3.0 + 1 / 12),  # the backward re-runs the forward, attention core included
])
def test_recomputation_keeps_less_and_costs_time(recompute, kept_per_layer, b_over_f):
    c = TransformerCost(hidden_size=1024, seq_len=512, micro_batch_size=1, num_layers=2, tflops=100, recompute=recompute)
    f = c.memory_bytes(Job(0, JobKind.F, 0), 1)
    assert f == round(2 * 512 * 1024 * kept_per_layer)
    assert c.duration_ns(Job(0, JobKind.B, 0), 1) == pytest.approx(b_over_f * c.duration_ns(Job(0, JobKind.F, 0), 1), abs=1)
    assert c.recompute_time_ns(Job(0, JobKind.B, 0), 1) == pytest.approx((b_over_f - 2) * c.duration_ns(Job(0, JobKind.F, 0), 1), abs=1)
    with pytest.raises(ConfigError, match="recompute='some'; choose one of none, selective, full"):
        TransformerCost(hidden_size=8, seq_len=8, micro_batch_size=1, num_layers=1, tflops=1, recompute="some")


def test_recomputation_is_a_sub_slice_of_each_backward_in_the_trace():
    c = TransformerCost(hidden_size=256, seq_len=128, micro_batch_size=1, num_layers=4, tflops=1, recompute="full", attention=True)
    r = run_case(PipelineCase("1F1B", 2, 3, cost=c), "sim")
    case = case_to_dict(r)
    trace = case_trace(case)
    assert check_trace(trace) == []
    rec = [e for e in trace["traceEvents"] if e.get("name") == "recompute"]
    assert len(rec) == 2 * 3  # every B of every stage
    f_us = c.duration_ns(Job(0, JobKind.F, 0), 2) / 1000  # attention counted: the recomputation is exactly the forward
    assert all(e["dur"] == pytest.approx(f_us, abs=0.002) for e in rec)
    assert r.decomposition.recompute_ns == 3 * c.recompute_time_ns(Job(0, JobKind.B, 0), 2)  # the busiest rank's 3 backwards
    counters = [e for e in trace["traceEvents"] if e["ph"] == "C"]
    assert {e["pid"] for e in counters} == {1, 2} and all(e["name"] == "memory (bytes)" for e in counters)  # pid = rank + 1


def test_memory_goes_into_results():
    r = run_case(PipelineCase("1F1B", 2, 3, cost=SPLIT, memory_limit_bytes=150), "sim")
    doc = json.loads(json.dumps(case_to_dict(r)))
    assert doc["memory"]["peak_bytes"] == [200, 100] and doc["memory"]["limit_bytes"] == 150 and doc["memory"]["fits"] is False
    assert doc["memory"]["timeline"][1] == {"t_ns": [1 * MS, 4 * MS, 7 * MS, 10 * MS], "bytes": [100, 100, 100, 0]}
    assert r.does_not_fit == "rank 0 peaks at 200 B, 50 B (50 bytes) above the 150 B limit per rank"
    with pytest.raises(ConfigError, match="memory_limit_bytes must be a positive whole number of bytes"):
        PipelineCase("1F1B", 2, 3, memory_limit_bytes=-1)


def test_a_case_over_its_memory_limit_is_flagged_in_summary_results_and_page(pytester):
    pytester.makepyfile(test_mem="""
from harness.case import PipelineCase
from harness.model.cost import FixedCost

def test_fits(pipeline):
    pipeline(PipelineCase("1F1B", 4, 8, cost=FixedCost.ms(F=1, B=2, mem_F=2**30), memory_limit_bytes=5 * 2**30))

def test_too_big(pipeline):
    pipeline(PipelineCase("FThenB", 4, 8, cost=FixedCost.ms(F=1, B=2, mem_F=2**30), memory_limit_bytes=5 * 2**30))
""")
    result = pytester.runpytest("--profile-jobs", "--backend=sim", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["does not fit: test_too_big: rank 0 peaks at 8 GiB, 3 GiB (3,221,225,472 bytes) above the "
                                 "5 GiB limit per rank (4 of 4 ranks over it)"])
    assert "does not fit: test_fits" not in result.stdout.str()
    doc = json.loads((pytester.path / "reports" / "results.json").read_text())
    fits = {c["label"]: c["memory"]["fits"] for c in doc["cases"]}
    assert fits == {"test_fits": True, "test_too_big": False}
    html = (pytester.path / "reports" / "index.html").read_text()
    assert html.count(">does not fit</span>") == 1 and "peak memory" in html
