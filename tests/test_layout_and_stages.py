"""Uneven stages: Megatron-Core's layout syntax, per-stage costs, a hand-computed uneven timeline, the bubble decomposition."""

from __future__ import annotations

import pytest

from harness.analysis.analytic import analyze
from harness.analysis.bubble import NORMALIZATIONS, convert_bubble, decompose
from harness.case import PipelineCase
from harness.errors import ConfigError
from harness.model.cost import FixedCost
from harness.model.layout import parse_layout
from harness.model.transformer import TransformerCost
from harness.plan.build import build_plan
from harness.runner import run_case
from harness.schedule import build_schedule
from harness.schedule.model import Job, JobKind

MS = 1_000_000


@pytest.mark.parametrize(("text", "stages", "layers", "spelt"), [
    # Megatron-Core docs ("Custom Pipeline Model Parallel Layout"), with its MTP 'm' replaced by a layer t
    ("Et*3|(tt|)*29,t|L", 32, 3 + 58 + 1, None),
    ("E||t|L", 4, 1, "E||t|L"),  # empty stages are legal
    ("Et*6|t*6|t*6|t*6L", 4, 24, "Etttttt|tttttt|tttttt|ttttttL"),
    ("(t*2|)*2t", 3, 5, "tt|tt|t"),
    ("((t|)*2)*2", 5, 4, "t|t|t|t|"),  # groups nest; every '|' separates
])
def test_documented_layouts_parse_and_round_trip(text, stages, layers, spelt):
    lay = parse_layout(text)
    assert (lay.num_stages, lay.num_layers) == (stages, layers)
    assert parse_layout(lay.to_text()) == parse_layout(lay.to_text())  # the spelt-out form parses to the same stages
    again = parse_layout(lay.to_text())
    assert (again.layers, again.embedding, again.head) == (lay.layers, lay.embedding, lay.head)
    if spelt is not None:
        assert lay.to_text() == spelt
    if text.startswith("E"):
        assert lay.embedding[0] and not any(lay.embedding[1:])


def test_megatron_deepseek_example_places_embedding_layers_and_head():
    lay = parse_layout("Et*3|(tt|)*29,t|L", num_stages=32)
    assert lay.layers[0] == 3 and lay.layers[1:30] == (2,) * 29 and lay.layers[30:] == (1, 0)
    assert lay.embedding == (True,) + (False,) * 31 and lay.head == (False,) * 31 + (True,)


@pytest.mark.parametrize(("text", "kwargs", "message"), [
    ("Et|x|L", {}, "position 3: unknown symbol 'x'"),
    ("Et*|L", {}, "position 3: '*' needs a count"),
    ("E(tt|L", {}, "position 6: '(' is not closed"),
    ("Et)|L", {}, "position 2: ')' without its '('"),
    ("*3|L", {}, "position 0: '*' with nothing before it to repeat"),
    ("Et|m|L", {}, "position 3: 'm' is a multi-token-prediction (MTP) layer"),
    ("t|Et|L", {}, "the embedding E belongs on the first stage only, found on stage(s) [1]"),
    ("Lt|t", {}, "stage 0 ('Lt') must end with its one LM head and loss L"),
    ("Et|t|tL", {"num_stages": 4}, "has 3 stage(s), but the pipeline has 4"),
    ("Et|t|tL", {"num_layers": 4}, "holds 3 transformer layer(s), but the model has 4"),
])
def test_bad_layouts_name_what_and_where(text, kwargs, message):
    with pytest.raises(ConfigError) as info:
        parse_layout(text, **kwargs)
    assert message in str(info.value)
    assert str(info.value).startswith(f"stage layout {text!r}")


def test_a_layout_gives_the_transformer_its_stages():
    c = TransformerCost(hidden_size=256, seq_len=64, micro_batch_size=1, num_layers=6, tflops=1, vocab_size=1000, layout="Et|tt|ttt|L")
    assert [c.layers_of(s, 4) for s in range(4)] == [1, 2, 3, 0]
    f = [c.flops(Job(s, JobKind.F, 0), 4) for s in range(4)]
    layer = 24 * 256**2 * 64
    assert f == [layer, 2 * layer, 3 * layer, 2 * 64 * 256 * 1000]  # the last stage holds only the LM head
    with pytest.raises(ConfigError, match=r"the stage layout 'Et\|tt\|ttt\|L' has 4 stage\(s\), but the pipeline has 8"):
        run_case(PipelineCase("Interleaved1F1B", 4, 8, chunks=2, cost=c), "sim")


def test_uneven_stages_on_sim_match_the_hand_computed_step():
    # p = 4, m = 16, F = [8, 8, 8, 8.8] ms, B = 2F. The last stage is the bottleneck: its first forward starts
    # after the three forwards before it (3 x 8 ms), it then never waits (it is the slowest), doing
    # m (F + B) = 16 x 26.4 = 422.4 ms, and its last backward's gradient still crosses three stages (3 x 16 ms):
    # 24 + 422.4 + 48 = 494.4 ms.
    cost = FixedCost.ms(F=[8, 8, 8, 8.8], B=[16, 16, 16, 17.6])
    r = run_case(PipelineCase("1F1B", 4, 16, cost=cost), "sim")
    assert r.metrics.step_time_median_ns == 494_400_000
    d = r.decomposition
    assert d.ideal_ns == (3 * 16 * 24 + 16 * 26.4) / 4 * MS  # 393.6 ms: the balanced step
    assert d.imbalance_ns == pytest.approx(28.8 * MS)  # the last stage's 422.4 ms of work less the balanced 393.6
    assert (d.recompute_ns, d.comm_ns, d.busiest_rank) == (0, 0, 3)
    assert d.schedule_ns == pytest.approx(72 * MS)  # fill and drain: 3 F + 3 B
    assert d.ideal_ns + d.imbalance_ns + d.recompute_ns + d.comm_ns + d.schedule_ns == pytest.approx(r.metrics.step_time_median_ns)


def test_uniform_stages_have_no_imbalance_and_transfers_show_as_comm():
    uniform = run_case(PipelineCase("1F1B", 4, 16, cost=FixedCost.ms(F=8, B=16)), "sim").decomposition
    assert uniform.imbalance_ns == 0 and uniform.schedule_ns == pytest.approx(3 * 24 * MS)  # (p-1)(F+B)
    linked = FixedCost.ms(F=8, B=16, p2p_latency_ns=1_000_000)
    d = run_case(PipelineCase("1F1B", 4, 16, cost=linked), "sim").decomposition
    free = analyze(build_schedule("1F1B", 4, 16), FixedCost.ms(F=8, B=16)).makespan_ns
    assert d.comm_ns == analyze(build_schedule("1F1B", 4, 16), linked).makespan_ns - free > 0
    assert d.step_ns == pytest.approx(d.ideal_ns + d.imbalance_ns + d.recompute_ns + d.comm_ns + d.schedule_ns)


def test_decompose_the_analytic_step_directly():
    plan = build_plan(build_schedule("ZB-H1", 4, 8))
    cost = FixedCost.ms(F=1, B=2, W=1)
    step = analyze(plan, cost).makespan_ns
    d = decompose(step, plan, cost)
    assert d.ideal_ns == 8 * 3 * MS and d.imbalance_ns == 0 and d.schedule_ns == step - 24 * MS


def test_bubble_normalizations_convert_exactly():
    p, m = 4, 8
    share = (p - 1) / (m + p - 1)  # 1F1B, idle share of total
    assert convert_bubble(share, "idle_share", "over_ideal") == pytest.approx((p - 1) / m)  # bubble over ideal time
    assert convert_bubble((p - 1) / m, "mindformers", "idle_share") == pytest.approx(share)
    assert set(NORMALIZATIONS) == {"idle_share", "over_ideal", "mindformers"}
    with pytest.raises(ConfigError, match="unknown bubble normalization 'ratio'"):
        convert_bubble(0.1, "ratio", "idle_share")
    with pytest.raises(ConfigError, match=r"an idle share is in \[0, 1\)"):
        convert_bubble(1.0, "idle_share", "over_ideal")


def test_a_cost_that_varies_by_microbatch_is_refused_naming_the_job():
    class PerMicrobatch:
        def duration_ns(self, job, num_stages):
            return 1000 * (1 + (job.microbatch or 0))

        def flops(self, job, num_stages):
            return 0.0

        def nbytes(self, job, num_stages):
            return 0

        def is_uniform(self, num_stages):
            return False

        def describe(self):
            return {"model": "per-microbatch"}

    with pytest.raises(ConfigError) as info:
        run_case(PipelineCase("1F1B", 2, 4, cost=PerMicrobatch()), "sim")
    message = str(info.value)
    assert "cost model PerMicrobatch: job 0F3 lasts 4000 ns but 0F0 lasts 1000 ns" in message
    assert "not by micro-batch" in message and message.startswith("tests/test_layout_and_stages.py:")


def test_per_stage_fixed_costs_need_one_value_per_stage():
    cost = FixedCost.ms(F=[1, 2], B=[2, 4])
    with pytest.raises(ConfigError, match=r"forward_ns, backward_ns give 2 per-stage value\(s\), but the pipeline has 4 stage\(s\)"):
        run_case(PipelineCase("1F1B", 4, 4, cost=cost), "sim")
    with pytest.raises(ConfigError, match="per-stage lists of different lengths: F has 2, B has 3"):
        FixedCost.ms(F=[1, 2], B=[2, 4, 4])
    with pytest.raises(ConfigError, match=r"F\[1\] \(stage 1\) must be positive"):
        FixedCost.ms(F=[1, -2], B=2)
    assert FixedCost.ms(F=[1, 1], B=2).is_uniform(2) and not cost.is_uniform(2)
