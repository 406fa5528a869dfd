"""Cost models: values computed by hand from the documented formulas."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.model.cost import FixedCost
from harness.model.transformer import TransformerCost
from harness.model.values import MAX_DURATION_NS
from harness.schedule.model import Job, JobKind

F0, B0, I0, W0 = (Job(0, k, 0) for k in (JobKind.F, JobKind.B, JobKind.I, JobKind.W))


def test_fixed_cost_in_ms_and_default_split():
    c = FixedCost.ms(F=1, B=2)
    assert [c.duration_ns(j, 4) for j in (F0, B0, I0, W0)] == [1_000_000, 2_000_000, 1_000_000, 1_000_000]
    c = FixedCost.ms(F=1, B=3, W=1)
    assert [c.duration_ns(j, 4) for j in (I0, W0)] == [2_000_000, 1_000_000]
    assert c.is_uniform(4)


def test_fixed_cost_transfers():
    c = FixedCost(forward_ns=10, backward_ns=20, p2p_latency_ns=5_000, p2p_gbytes_per_s=50.0, activation_bytes=4_000_000)
    send = Job(0, JobKind.SEND_F, 0)
    assert c.duration_ns(send, 2) == 5_000 + 80_000  # 4 MB at 50 GB/s = 80 µs
    assert c.nbytes(send, 2) == 4_000_000 and c.nbytes(F0, 2) == 0
    assert not c.is_uniform(2)


@pytest.mark.parametrize("bad", [dict(forward_ns=0, backward_ns=1), dict(forward_ns=1, backward_ns=-2), dict(forward_ns=float("nan"), backward_ns=1)])
def test_fixed_cost_rejects_non_positive(bad):
    with pytest.raises(ConfigError, match="cost model"):
        FixedCost(**bad)


def test_transformer_cost_gpt_1b_on_4_stages():
    # 24 layers, h = 2048, s = 1024, b = 1 over 4 stages: 6 layers per stage.
    # forward = 2 * (12 h^2 * 6) * 1024 tokens = 618,475,290,624 FLOPs (Kaplan et al. 2020, 2N per token).
    c = TransformerCost(hidden_size=2048, seq_len=1024, micro_batch_size=1, num_layers=24, tflops=200.0)
    assert c.flops(F0, 4) == 618_475_290_624
    assert c.flops(B0, 4) == 2 * 618_475_290_624  # backward = 2x forward (arXiv:2104.04473 §5.1)
    assert c.flops(I0, 4) == c.flops(W0, 4) == 618_475_290_624
    assert c.duration_ns(F0, 4) == 3_092_376  # / 200e12 FLOP/s
    assert c.duration_ns(B0, 4) == 6_184_753
    assert c.activation_bytes == 1024 * 2048 * 2
    assert c.is_uniform(4) and not c.is_uniform(5)


def test_transformer_attention_term():
    # Narayanan et al. eq. 3 / 4 passes: 24 b s L h^2 (1 + s / 6h)
    c = TransformerCost(hidden_size=1024, seq_len=2048, micro_batch_size=2, num_layers=4, tflops=100.0, attention=True)
    expected = 24 * 2 * 2048 * 4 * 1024**2 * (1 + 2048 / (6 * 1024))
    assert c.flops(F0, 1) == pytest.approx(expected, rel=1e-12)


def test_uneven_layers_are_refused_with_the_choices_and_taken_when_given():
    c = TransformerCost(hidden_size=64, seq_len=8, micro_batch_size=1, num_layers=10, tflops=1.0)
    with pytest.raises(ConfigError) as info:
        c.layers_of(0, 4)
    assert str(info.value) == ("cost model: 10 layers do not divide evenly over 4 stages; give layers_per_stage=(3, 3, 2, 2) "
                               "(or (2, 2, 3, 3), lighter first stages for the embedding), or a layout such as 'Et*3|t*3|t*2|t*2L'")
    with pytest.raises(ConfigError, match="10 layers cannot be split over 11 stages"):
        c.layers_of(0, 11)
    given = TransformerCost(hidden_size=64, seq_len=8, micro_batch_size=1, num_layers=10, tflops=1.0, layers_per_stage=(2, 3, 3, 2))
    assert [given.layers_of(s, 4) for s in range(4)] == [2, 3, 3, 2]
    laid = TransformerCost(hidden_size=64, seq_len=8, micro_batch_size=1, num_layers=10, tflops=1.0, layout="Et*2|t*3|t*3|t*2L")
    assert [laid.layers_of(s, 4) for s in range(4)] == [2, 3, 3, 2]
    with pytest.raises(ConfigError, match="has 4 stage\\(s\\), but the pipeline has 8"):
        laid.layers_of(0, 8)
    with pytest.raises(ConfigError, match="holds 9 transformer layer\\(s\\), but the model has 10"):
        TransformerCost(hidden_size=64, seq_len=8, micro_batch_size=1, num_layers=10, tflops=1.0, layout="Et*2|t*3|t*2|t*2L")
    with pytest.raises(ConfigError, match="holds 9 layers, but num_layers is 10"):
        TransformerCost(hidden_size=64, seq_len=8, micro_batch_size=1, num_layers=10, tflops=1.0, layers_per_stage=(3, 3, 3))


def test_case_checks_its_fields_on_construction():
    from pathlib import Path

    from harness.case import PipelineCase

    with pytest.raises(ConfigError, match=r"cost must be a cost model such as FixedCost.ms\(F=1, B=2\)"):
        PipelineCase("1F1B", 4, 8, cost=None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="microbatches must be a positive integer, got -1"):
        PipelineCase("1F1B", 4, -1)
    assert PipelineCase("schedules/my.csv").schedule == Path("schedules/my.csv")
    assert PipelineCase("1F1B", 4, 8).schedule == "1F1B"


def test_attention_backward_goes_to_the_input_gradient():
    # arXiv:2401.10241 Table 1: F = sbh(24h+4s), B (input) = sbh(24h+8s), W = sbh(24h), per layer.
    c = TransformerCost(hidden_size=1024, seq_len=2048, micro_batch_size=1, num_layers=1, tflops=1.0, attention=True)
    s, b, h = 2048, 1, 1024
    assert c.flops(F0, 1) == s * b * h * (24 * h + 4 * s)
    assert c.flops(I0, 1) == s * b * h * (24 * h + 8 * s)
    assert c.flops(W0, 1) == s * b * h * 24 * h
    assert c.flops(I0, 1) + c.flops(W0, 1) == c.flops(B0, 1) == 2 * c.flops(F0, 1)


def test_split_backward_must_add_up_and_bandwidth_must_be_positive():
    with pytest.raises(ConfigError, match=r"^cost model: I \+ W = 1\.5 \+ 1\.5 ms must equal B = 2 ms \(a split"):
        FixedCost.ms(F=1, B=2, I=1.5, W=1.5)
    assert FixedCost.ms(F=1, B=3, I=1.5, W=1.5).duration_ns(W0, 2) == 1_500_000
    with pytest.raises(ConfigError, match=r"p2p_gbytes_per_s \(gigabytes per second; divide Gbit/s by 8\) must be positive"):
        FixedCost(forward_ns=1, backward_ns=2, p2p_gbytes_per_s=-5.0)
    with pytest.raises(ConfigError, match="p2p_gbytes_per_s"):
        TransformerCost(hidden_size=8, seq_len=8, micro_batch_size=1, num_layers=1, tflops=1.0, p2p_gbytes_per_s=0)


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(F=1, B=2, W=3), r"^cost model: the backward of B = 2 ms cannot split into I = -1 ms and W = 3 ms; give I or W below B"),
    (dict(F=1, B=2, I=2), r"^cost model: the backward of B = 2 ms cannot split into I = 2 ms and W = 0 ms; give I or W below B"),
    (dict(F=float("nan"), B=2), r"F must be a finite number of milliseconds, got nan"),
])
def test_impossible_fixed_costs_are_refused(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        FixedCost.ms(**kwargs)


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (dict(F=-1, B=2), "cost model: F must be positive, got -1 ms"),
        (dict(F=1, B=0), "cost model: B must be positive, got 0 ms"),
        (dict(F=1, B=2, W=-0.5), "cost model: W must be positive, got -0.5 ms"),
        (dict(F=1e-8, B=2), "cost model: F must be at least 1 ns (0.000001 ms), got 1e-08 ms"),
        (dict(F=1, B=2, I=1, W=2), "cost model: I + W = 1 + 2 ms must equal B = 2 ms (a split backward does the same work as the full one)"),
        (dict(F=1, B=2, I=3),
         "cost model: the backward of B = 2 ms cannot split into I = 3 ms and W = -1 ms; give I or W below B (both must be positive)"),
        (dict(F=1, B=2, W=2.3),  # no float noise in the derived I
         "cost model: the backward of B = 2 ms cannot split into I = -0.3 ms and W = 2.3 ms; give I or W below B (both must be positive)"),
        (dict(F=float("inf"), B=2), "cost model: F must be a finite number of milliseconds, got inf"),
        # times beyond int64 ns (and float64's exact integers) are a unit mistake: refused, not an OverflowError later
        (dict(F=1e13, B=2e13), "cost model: F must be below 9007199254.740992 ms (2**53 ns, about 104 days), got 10000000000000.0 ms"),
        (dict(F=1, B=9007199254.741), "cost model: B must be below 9007199254.740992 ms (2**53 ns, about 104 days), got 9007199254.741 ms"),
        (dict(F=10**400, B=2), "cost model: F must be below 9007199254.740992 ms (2**53 ns, about 104 days), got 10000000... (401 digits) ms"),
        (dict(F=1, B=2, optimizer_ns=2**53),
         "cost model: optimizer_ns must be below 9007199254740992 ns (2**53 ns, about 104 days), got 9007199254740992"),
        (dict(F=1, B=2, activation_bytes=10, p2p_gbytes_per_s=1e-320),
         "cost model: a send/receive of 10 bytes at 1e-320 GB/s with 0 ns latency would last inf ns; "
         "transfers must last below 9007199254740992 ns (2**53 ns, about 104 days)"),
        (dict(F=1, B=2, p2p_latency_ns=-5), "cost model: p2p_latency_ns must be non-negative, got -5"),  # given in ns by its own name
        (dict(F=1, B=2, X=1),  # in ms()'s own name, not FixedCost.__init__()'s
         "cost model: FixedCost.ms() got an unexpected keyword argument 'X'; "
         "it takes F, B, I, W, R (ms) and optimizer_ns, p2p_latency_ns, p2p_gbytes_per_s, activation_bytes, mem_F, mem_I, mem_W, mem_static, "
         "unshard_ns, reshard_ns, reduce_grad_ns, overlap_ns, overlap_ratio"),
        (dict(F=1, B=2, w=1),
         "cost model: FixedCost.ms() got an unexpected keyword argument 'w' (did you mean 'W'?); "
         "it takes F, B, I, W, R (ms) and optimizer_ns, p2p_latency_ns, p2p_gbytes_per_s, activation_bytes, mem_F, mem_I, mem_W, mem_static, "
         "unshard_ns, reshard_ns, reduce_grad_ns, overlap_ns, overlap_ratio"),
        (dict(F=1, B=2, p2p_latency=5),
         "cost model: FixedCost.ms() got an unexpected keyword argument 'p2p_latency' (did you mean 'p2p_latency_ns'?); "
         "it takes F, B, I, W, R (ms) and optimizer_ns, p2p_latency_ns, p2p_gbytes_per_s, activation_bytes, mem_F, mem_I, mem_W, mem_static, "
         "unshard_ns, reshard_ns, reduce_grad_ns, overlap_ns, overlap_ratio"),
        (dict(F=1, B=2, forward_ns=5), "cost model: FixedCost.ms() takes forward_ns as F, in milliseconds"),
    ],
)
def test_fixed_cost_ms_errors_speak_in_milliseconds(given, message):
    with pytest.raises(ConfigError) as info:
        FixedCost.ms(**given)
    assert str(info.value) == message


def test_fixed_cost_ns_errors_keep_the_field_names():
    with pytest.raises(ConfigError) as info:
        FixedCost(forward_ns=-1_000_000, backward_ns=2_000_000)
    assert str(info.value) == "cost model: forward_ns must be positive, got -1000000"
    with pytest.raises(ConfigError) as info:
        FixedCost(forward_ns=1, backward_ns=2, backward_input_ns=3)
    assert str(info.value) == ("cost model: the backward of 2 ns cannot split into I = 3 ns and W = -1 ns; "
                               "give I or W below B (both must be positive)")


def test_fixed_cost_ms_split_in_milliseconds():
    c = FixedCost.ms(F=1, B=2, I=0.5, W=1.5)
    assert [c.duration_ns(j, 2) for j in (F0, B0, I0, W0)] == [1_000_000, 2_000_000, 500_000, 1_500_000]


def test_durations_must_stay_below_2_to_the_53_ns():
    assert MAX_DURATION_NS == 2**53
    longest = FixedCost(forward_ns=2**53 - 1, backward_ns=2**53 - 2)
    assert longest.duration_ns(F0, 2) == 2**53 - 1
    for bad, shown in ((2**53, "9007199254740992"), (10**400, "10000000... (401 digits)"), (float("inf"), "inf")):
        with pytest.raises(ConfigError) as info:
            FixedCost(forward_ns=bad, backward_ns=2)
        assert str(info.value) == f"cost model: forward_ns must be below 9007199254740992 ns (2**53 ns, about 104 days), got {shown}"
    with pytest.raises(ConfigError) as info:
        TransformerCost(hidden_size=10**400, seq_len=1, micro_batch_size=1, num_layers=1, tflops=1)
    assert str(info.value) == "cost model: hidden_size must be below 2**53 = 9007199254740992, got 10000000... (401 digits)"
    slow = TransformerCost(hidden_size=4096, seq_len=4096, micro_batch_size=8, num_layers=96, tflops=1e-12)
    with pytest.raises(ConfigError) as info:
        slow.duration_ns(B0, 2)
    assert str(info.value) == (
        "cost model: a B job of stage 0 (1.27e+15 FLOPs at 1e-12 TFLOP/s) would last 1.27e+24 ns; "
        "jobs must last below 9007199254740992 ns (2**53 ns, about 104 days): check the model's sizes and tflops"
    )


@pytest.mark.parametrize("kw", [{"F": None, "B": 2}, {"F": 1, "B": None, "I": 1, "W": 1}])
def test_fixed_cost_ms_needs_f_and_b(kw):
    name = "F" if kw["F"] is None else "B"
    with pytest.raises(ConfigError, match=rf"^cost model: {name} must be a finite number of milliseconds, got None$"):
        FixedCost.ms(**kw)


def test_bandwidth_without_activation_bytes_is_refused():
    # Bytes / bandwidth with 0 bytes is 0 ns: the bandwidth would silently change nothing.
    with pytest.raises(ConfigError, match=r"^cost model: p2p_gbytes_per_s=25\.0 is given but activation_bytes is 0, so every "
                                          r"transfer would cost only the latency; give activation_bytes"):
        FixedCost.ms(F=1, B=2, p2p_latency_ns=1000, p2p_gbytes_per_s=25.0)
    c = FixedCost.ms(F=1, B=2, p2p_latency_ns=1000, p2p_gbytes_per_s=25.0, activation_bytes=1_000_000)
    assert c.duration_ns(Job(0, JobKind.SEND_F, 0), 2) == 1000 + 40_000  # 1 MB at 25 bytes/ns


@pytest.mark.parametrize("field", ["hidden_size", "seq_len", "micro_batch_size", "num_layers", "bytes_per_element"])
@pytest.mark.parametrize("value", [8.0, "8", True])
def test_transformer_sizes_are_whole_numbers(field, value):
    kwargs = dict(hidden_size=8, seq_len=8, micro_batch_size=1, num_layers=8, tflops=1.0, bytes_per_element=2)
    kwargs[field] = value
    with pytest.raises(ConfigError, match=rf"^cost model: {field} must be a whole number, got {value!r}$"):
        TransformerCost(**kwargs)


def test_activation_bytes_is_a_whole_number_and_tflops_any_number():
    with pytest.raises(ConfigError, match=r"^cost model: activation_bytes must be a whole number, got 1000\.5$"):
        FixedCost(forward_ns=1, backward_ns=2, activation_bytes=1000.5)
    assert TransformerCost(hidden_size=8, seq_len=8, micro_batch_size=1, num_layers=1, tflops=100).tflops == 100
    with pytest.raises(ConfigError, match=r"^cost model: tflops must be a number, got True$"):
        TransformerCost(hidden_size=8, seq_len=8, micro_batch_size=1, num_layers=1, tflops=True)


def test_numpy_integers_are_sizes_and_become_ints():
    import json

    import numpy as np

    c = TransformerCost(hidden_size=np.int64(64), seq_len=np.int32(16), micro_batch_size=1, num_layers=np.uint8(8), tflops=1.0)
    assert (c.hidden_size, c.seq_len, c.num_layers) == (64, 16, 8) and type(c.num_layers) is int
    assert json.loads(json.dumps(c.describe()))["num_layers"] == 8  # describe() stays JSON
    f = FixedCost(forward_ns=1, backward_ns=2, activation_bytes=np.int64(4096), p2p_gbytes_per_s=1.0)
    assert type(f.activation_bytes) is int and f.duration_ns(Job(0, JobKind.SEND_F, 0), 2) == 4096


def test_ms_names_a_misspelt_or_missing_duration():
    # A fresh user's find: FixedCost.ms(F=1, BB=2) said "missing 1 required positional argument: 'B'".
    from harness.errors import ConfigError

    with pytest.raises(ConfigError, match=r"unexpected keyword argument 'BB' \(did you mean 'B'\?\)"):
        FixedCost.ms(F=1, BB=2)
    with pytest.raises(ConfigError, match=r"FixedCost.ms\(\) needs B \(ms\), e.g. FixedCost.ms\(F=1, B=2\)"):
        FixedCost.ms(F=1)
    with pytest.raises(ConfigError, match=r"needs F and B \(ms\)"):
        FixedCost.ms()


def test_transformer_cost_names_a_misspelt_or_missing_argument():
    typo = r"unexpected keyword argument 'hiden_size' \(did you mean 'hidden_size'\?\); it takes hidden_size, seq_len"
    with pytest.raises(ConfigError, match=typo):
        TransformerCost(hiden_size=1024, seq_len=2048, micro_batch_size=1, num_layers=24, tflops=100)
    missing = r"TransformerCost\(\) needs num_layers, tflops \(required: hidden_size, seq_len, micro_batch_size, num_layers, tflops\)"
    with pytest.raises(ConfigError, match=missing):
        TransformerCost(1024, 2048, micro_batch_size=1)
    import copy
    import pickle

    cost = TransformerCost(1024, 2048, 1, 24, 100, recompute="full")
    assert pickle.loads(pickle.dumps(cost)) == cost == copy.deepcopy(cost)  # made again without arguments: no check
