"""Tensor and sequence parallelism and flash attention in TransformerCost: Korthikanti et al.'s Table 2
(arXiv:2205.05198) per layer, static bytes and GEMM time per GPU divided by t, the collectives' time,
recomputation charged for what it redoes, and the combinations that make no sense refused."""

from __future__ import annotations

from fractions import Fraction

import pytest

from harness.case import PipelineCase
from harness.errors import ConfigError
from harness.model.transformer import TransformerCost
from harness.runner import run_case
from harness.schedule.model import Job, JobKind

#: GPT-3 175B's layer (Brown et al. 2020, Table 2.1; Korthikanti et al. Table 3): h = 12288, a = 96, s = 2048,
#: here b = 1, one layer per stage. Its 5 a s / h = 5 * 96 * 2048 / 12288 = 80.
GPT3 = {"hidden_size": 12288, "seq_len": 2048, "micro_batch_size": 1, "num_layers": 1, "tflops": 1000,
        "num_attention_heads": 96}
S, B, H, A = 2048, 1, 12288, 96
SBH = S * B * H


def table_2(t: int, sp: bool, scores: bool) -> int:
    """Korthikanti et al. Table 2's bytes per layer, written from the table (not from the harness's code)."""
    term = Fraction(5 * A * S, H * t) if scores else 0
    per = (Fraction(34, t) if sp else 10 + Fraction(24, t)) + term
    return int(SBH * per)


def layer_bytes(**kw) -> int:
    return TransformerCost(**GPT3, **kw).memory_bytes(Job(0, JobKind.F, 0), 1)


def test_korthikanti_table_2_per_layer_bytes_at_tp_8():
    assert layer_bytes() == SBH * (34 + 80) == table_2(1, False, True)  # no parallelism: s b h (34 + 5 a s / h)
    assert layer_bytes(tensor_parallel_size=8) == SBH * 23 == table_2(8, False, True)  # s b h (10 + 24/8 + 80/8)
    assert layer_bytes(tensor_parallel_size=8, sequence_parallel=True) == SBH * 57 // 4 == table_2(8, True, True)  # 34/8 + 10
    # flash attention keeps no scores: the 5 a s / (h t) term goes, as with selective recomputation (Table 2's rows)
    assert layer_bytes(tensor_parallel_size=8, flash_attention=True) == SBH * 13 == table_2(8, False, False)
    assert layer_bytes(tensor_parallel_size=8, sequence_parallel=True, flash_attention=True) == SBH * 17 // 4 == table_2(8, True, False)
    assert layer_bytes(tensor_parallel_size=8, recompute="selective") == table_2(8, False, False)
    assert layer_bytes(tensor_parallel_size=8, sequence_parallel=True, recompute="selective") == table_2(8, True, False)
    # full recomputation keeps the layer input: 2 s b h, the sequence shard of it with sequence parallelism
    assert layer_bytes(tensor_parallel_size=8, recompute="full") == 2 * SBH
    assert layer_bytes(tensor_parallel_size=8, sequence_parallel=True, recompute="full") == 2 * SBH // 8


def test_a_split_backward_frees_the_scores_and_2sbh_at_i_the_rest_at_w():
    c = TransformerCost(**GPT3, tensor_parallel_size=8, sequence_parallel=True)
    f, i, w = (c.memory_bytes(Job(0, kind, 0), 1) for kind in (JobKind.F, JobKind.I, JobKind.W))
    assert f + i + w == 0 and -i == 2 * SBH // 8 + SBH * 10  # 2 s b h / t and the 5 a s / (h t) = 10 s b h of scores
    t1 = TransformerCost(**GPT3)
    assert -t1.memory_bytes(Job(0, JobKind.W, 0), 1) == 32 * SBH  # t = 1: the zero-bubble paper's W frees 32 s b h


def test_static_bytes_flops_and_logits_per_gpu_fall_by_t():
    kw = {"hidden_size": 4096, "seq_len": 2048, "micro_batch_size": 1, "num_layers": 8, "tflops": 400, "num_attention_heads": 32,
          "vocab_size": 50304, "attention": True}
    one, eight = TransformerCost(**kw), TransformerCost(**kw, tensor_parallel_size=8)
    for stage in range(4):  # the embedding on stage 0, the LM head on stage 3
        assert eight.static_bytes(stage, 4) == round(one.static_bytes(stage, 4) / 8)
        for kind in (JobKind.F, JobKind.B, JobKind.I, JobKind.W):
            assert eight.flops(Job(stage, kind, 0), 4) == pytest.approx(one.flops(Job(stage, kind, 0), 4) / 8, rel=1e-12)
            assert abs(eight.duration_ns(Job(stage, kind, 0), 4) - one.duration_ns(Job(stage, kind, 0), 4) / 8) <= 1
    logits = 4 * 2048 * 50304
    assert one.memory_bytes(Job(3, JobKind.F, 0), 4) - 2 * one.layer_activation_bytes(3, 4) == logits
    assert eight.memory_bytes(Job(3, JobKind.F, 0), 4) - 2 * eight.layer_activation_bytes(3, 4) == logits // 8  # vocab-parallel
    r1 = run_case(PipelineCase("1F1B", 4, 8, cost=one), "sim")
    r8 = run_case(PipelineCase("1F1B", 4, 8, cost=eight), "sim")
    assert r8.memory.static_bytes == [round(x / 8) for x in r1.memory.static_bytes]


def test_the_collectives_cost_two_ring_all_reduces_per_layer_and_pass():
    kw = {"hidden_size": 4096, "seq_len": 2048, "micro_batch_size": 1, "num_layers": 8, "tflops": 400, "num_attention_heads": 32}
    free = TransformerCost(**kw, tensor_parallel_size=4)
    paid = TransformerCost(**kw, tensor_parallel_size=4, tp_gbytes_per_s=100.0)
    # 2 all-reduces of s b h bf16 elements (16 MiB) per layer, ring: 2 (t-1)/t x bytes / (100 bytes/ns), 4 layers a stage
    per_layer = 2 * 2 * 3 / 4 * (2048 * 4096 * 2) / 100
    for kind, passes in ((JobKind.F, 1), (JobKind.B, 1), (JobKind.I, 1), (JobKind.W, 0)):
        gap = paid.duration_ns(Job(0, kind, 0), 2) - free.duration_ns(Job(0, kind, 0), 2)
        assert abs(gap - passes * 4 * per_layer) <= 1, kind
    sp = TransformerCost(**kw, tensor_parallel_size=4, sequence_parallel=True, tp_gbytes_per_s=100.0)
    assert sp.duration_ns(Job(0, JobKind.F, 0), 2) == paid.duration_ns(Job(0, JobKind.F, 0), 2)  # RS + AG: the bytes of an AR
    assert sp.activation_bytes == paid.activation_bytes // 4  # a sequence shard crosses to the next stage
    full = TransformerCost(**kw, tensor_parallel_size=4, tp_gbytes_per_s=100.0, recompute="full")
    full_free = TransformerCost(**kw, tensor_parallel_size=4, recompute="full")
    # the re-run forward repeats its collectives: one more forward's worth in the backward and in its recomputation
    b = (full.duration_ns(Job(0, JobKind.B, 0), 2) - full_free.duration_ns(Job(0, JobKind.B, 0), 2))
    assert abs(b - 2 * 4 * per_layer) <= 1
    assert abs(full.recompute_time_ns(Job(0, JobKind.B, 0), 2) - full_free.recompute_time_ns(Job(0, JobKind.B, 0), 2) - 4 * per_layer) <= 1
    assert paid.describe()["tensor_parallel_size"] == 4 and "tensor_parallel_size" not in TransformerCost(**kw).describe()


@pytest.mark.parametrize("attention", [False, True])
def test_selective_recomputation_costs_the_attention_core_it_redoes(attention):
    kw = {"hidden_size": 1024, "seq_len": 2048, "micro_batch_size": 1, "num_layers": 4, "tflops": 100, "attention": attention}
    none, selective = TransformerCost(**kw), TransformerCost(**kw, recompute="selective")
    core_ns = 4 * 2048 * 1024 * 2048 * 2 / 100e3  # 4 s h FLOPs per token, 2 layers a stage, 100 TFLOP/s = 1e5 FLOP/ns
    assert selective.recompute_time_ns(Job(0, JobKind.B, 0), 2) == round(core_ns)  # never free, attention counted in F or not
    gap = selective.duration_ns(Job(0, JobKind.B, 0), 2) - none.duration_ns(Job(0, JobKind.B, 0), 2)
    assert abs(gap - core_ns) <= 1
    assert selective.memory_bytes(Job(0, JobKind.F, 0), 2) < none.memory_bytes(Job(0, JobKind.F, 0), 2)  # and what it saves
    r = run_case(PipelineCase("1F1B", 2, 4, cost=selective), "sim")
    assert r.decomposition.recompute_ns == 4 * round(core_ns)  # rank 0's 4 backwards
    assert any(("attention=False" in a) != attention for a in r.assumptions if a.startswith("selective recomputation"))


@pytest.mark.parametrize(("kw", "message"), [
    ({"sequence_parallel": True}, "sequence_parallel=True needs tensor_parallel_size > 1"),
    ({"tp_gbytes_per_s": 100.0}, "tp_gbytes_per_s=100.0 is the bandwidth of the tensor-parallel collectives, but tensor_parallel_size=1"),
    ({"tensor_parallel_size": 3}, "num_attention_heads=32 is not divisible by tensor_parallel_size=3"),
    ({"tensor_parallel_size": 8, "num_query_groups": 4}, "num_query_groups=4 is not divisible by tensor_parallel_size=8"),
    ({"tensor_parallel_size": 8, "ffn_hidden_size": 11004}, "ffn_hidden_size=11004 is not divisible by tensor_parallel_size=8"),
    ({"tensor_parallel_size": 8, "sequence_parallel": True, "seq_len": 2044}, "seq_len=2044 is not divisible by tensor_parallel_size=8"),
    ({"tensor_parallel_size": 0}, "tensor_parallel_size must be positive"),
    ({"flash_attention": True, "recompute": "selective"}, "recompute='selective' with flash_attention=True: selective recomputation"),
    ({"flash_attention": True, "recompute": ["none", "selective", "selective"]}, r"recompute='selective' \(stages 1, 2\) with flash"),
    ({"sequence_parallel": "yes", "tensor_parallel_size": 2}, "sequence_parallel must be True or False"),
])
def test_combinations_that_make_no_sense_are_refused(kw, message):
    base = {"hidden_size": 4096, "seq_len": 2048, "micro_batch_size": 1, "num_layers": 8, "tflops": 400, "num_attention_heads": 32}
    with pytest.raises(ConfigError, match=message):
        TransformerCost(**{**base, **kw})


def test_tp_assumptions_name_the_degree_the_formula_and_the_collectives():
    c = TransformerCost(hidden_size=4096, seq_len=2048, micro_batch_size=1, num_layers=8, tflops=400, num_attention_heads=32,
                        tensor_parallel_size=8, sequence_parallel=True, tp_gbytes_per_s=200.0)
    r = run_case(PipelineCase("1F1B", 4, 8, cost=c), "sim")
    text = "\n".join(r.assumptions)
    assert "tensor parallelism TP=8 with sequence parallelism" in text
    assert "activations per layer and micro-batch: s b h (34/8 + 5 a s / (h 8)) bytes" in text
    per_layer_ms = 2 * 2 * 7 / 8 * (2048 * 4096 * 2) / 200 / 1e6
    assert f"/ 200 GB/s = {per_layer_ms:.3f} ms per layer and pass" in text
    one = run_case(PipelineCase("1F1B", 4, 8, cost=TransformerCost(hidden_size=4096, seq_len=2048, micro_batch_size=1,
                                                                   num_layers=8, tflops=400)), "sim")
    assert one.assumptions[0].startswith("no tensor parallelism (TP=1)")


def test_the_page_s_model_label_tells_tp_and_recomputation_apart():
    from harness.report.charts import cost_label

    kw = {"hidden_size": 4096, "seq_len": 2048, "micro_batch_size": 1, "num_layers": 8, "tflops": 400, "num_attention_heads": 32}
    labels = [cost_label(TransformerCost(**kw, **extra).describe()) for extra in (
        {}, {"tensor_parallel_size": 8}, {"tensor_parallel_size": 8, "sequence_parallel": True}, {"recompute": ["full", "none"]})]
    speed = " · 400 TFLOP/s"
    assert labels == ["h=4096 L=8 s=2048" + speed, "h=4096 L=8 s=2048 TP=8" + speed, "h=4096 L=8 s=2048 TP=8 SP" + speed,
                      "h=4096 L=8 s=2048" + speed + " · recompute=full,none"]  # other models are never one chart series


def test_the_static_memory_assumption_names_the_bytes_per_parameter_and_the_logits():
    base = {"hidden_size": 4096, "seq_len": 2048, "micro_batch_size": 1, "num_layers": 8, "tflops": 400, "num_attention_heads": 32}
    plain = run_case(PipelineCase("1F1B", 4, 8, cost=TransformerCost(**base, vocab_size=32000)), "sim").assumptions
    static = [a for a in plain if a.startswith("static memory: ")]
    assert static == ["static memory: parameters x 18 bytes (bf16 weights, fp32 gradients, Adam's fp32 master weights and two "
                      "moments; Megatron-LM theoretical_memory_usage.py), the MLP as two matrices of h x f (2 h f parameters per "
                      "layer, not a gated MLP's 3 h f); the last stage keeps its s b V logits in fp32 until its backward; nothing "
                      "for the framework's own memory (CUDA context, allocator caching)"]
    sharded = TransformerCost(**base, bytes_per_param=7.5, tensor_parallel_size=2)
    text = "\n".join(run_case(PipelineCase("1F1B", 4, 8, cost=sharded), "sim").assumptions)
    assert "static memory: parameters / TP=2 x 7.5 bytes (the distributed optimizer over 8 data-parallel ranks: 6 + 12/8; " in text
    odd = TransformerCost(**base, bytes_per_param=16)
    assert "parameters x 16 bytes (as given: 18 is bf16 weights" in "\n".join(run_case(PipelineCase("1F1B", 4, 8, cost=odd), "sim").assumptions)
    assert "logits" not in text  # no vocabulary, no LM head
