"""The torch backend's run beside its two sims, on the page and in the terminal summary
(harness/report/torch_beside.py), from results documents built here: no torch, no torchrun.

The case is a sim run of 1F1B p=2 m=4 made to look like a torch run: ``backend`` and ``device.torch`` as the
torch backend writes them (docs/torch.md, "Beside the run"), with round figures, so every shown value is exact.
"""

from __future__ import annotations

import html
import re

from harness.case import PipelineCase
from harness.model.cost import FixedCost
from harness.report.html import render_index
from harness.report.results import case_to_dict, results_document
from harness.report.summary import CaseLine, case_notes, case_table
from harness.report.torch_beside import PARTS, torch_beside, torch_beside_block, torch_beside_line
from harness.runner import run_case

MS = 1_000_000


def _torch_info(lowered: int, ideal: int, span: list[int] | None, busy: list[int] | None) -> dict:
    """``device.torch`` as the backend writes it (ns), ``span``/``busy`` per rank in the sim of the lowered order."""
    sim = {"lowered_step_ns": lowered, "ideal_step_ns": ideal, "ideal_placement": "torch"}
    if span is not None and busy is not None:
        sim.update(rank_span_ns=span, rank_busy_ns=busy)
    ms = {"train_step": (19.5, 20.0), "compute": (13.0, 12.5), "optimizer": (0.2, 0.3), "recv_wait": (3.5, 5.0),
          "send_wait": (0.05, 0.02), "post": (1.2, 1.0), "host": (0.1, 0.08), "in_range_other": (0.3, 0.2), "gaps": (0.6, 0.5)}
    per_rank = [{"rank": r, "step_call": int(19 * MS), **{k: round(v[r] * MS) for k, v in ms.items()}} for r in (0, 1)]
    return {"lowering": "torch (_prepare_schedule_with_comms)", "per_rank": per_rank, "sim": sim}


def _result(**info):
    result = run_case(PipelineCase("1F1B", stages=2, microbatches=4, cost=FixedCost.ms(F=1, B=2)), backend="sim")
    result.records.backend = "torch"
    result.records.device["torch"] = _torch_info(**info)
    return result


def _doc_case(measured: int = 20 * MS, **info) -> dict:
    case = case_to_dict(_result(**info))
    case["metrics"]["step_time_median_ns"] = measured
    return case


SPLIT = {"lowered": 15 * MS, "ideal": 14 * MS, "span": [15 * MS, 15 * MS], "busy": [12 * MS, 12 * MS]}


def test_each_ranks_difference_splits_into_parts_that_add_up_to_it() -> None:
    fig = torch_beside(_doc_case(**SPLIT))
    assert fig is not None and (fig.measured_ns, fig.lowered_ns, fig.ideal_ns) == (20 * MS, 15 * MS, 14 * MS)
    assert fig.split and [r.rank for r in fig.ranks] == [0, 1]
    r0, r1 = fig.ranks
    # rank 0: train step 19.5 ms against a 15 ms span (12 ms of cost-model work, 3 ms idle) in the sim
    assert r0.difference_ns == 4_500_000
    assert r0.parts == {"over_cost": 13_200_000 - 12 * MS, "recv_beyond": 3_500_000 - 3 * MS, "send_wait": 50_000,
                        "post": 1_200_000, "host": 100_000, "in_range_other": 300_000, "gaps": 600_000, "rest": 550_000}
    assert r1.difference_ns == 5 * MS and r1.parts["over_cost"] == 800_000 and r1.parts["recv_beyond"] == 2 * MS
    assert r1.parts["rest"] == 400_000
    for r in fig.ranks:  # exactly, in ns
        assert list(r.parts) == [k for k, _ in PARTS] and sum(r.parts.values()) == r.difference_ns


def test_the_page_shows_the_two_sims_and_each_ranks_parts_with_their_assumptions() -> None:
    case = _doc_case(**SPLIT)
    page = render_index(results_document([case]))
    block = re.search(r'<details class="meta torch-beside" open>.*?</details>', page, re.S)
    assert block is not None
    text = html.unescape(re.sub(r"<[^>]+>", "|", block.group(0)))
    assert "measured on the torch backend (median of 1 step(s))||20.000 ms|" in text
    assert "sim of the same lowered order (what PyTorch's runtime executed)||15.000 ms||+5.000 ms (+33.3%)|" in text
    assert "sim of the ideal schedule (the case's own)||14.000 ms||+6.000 ms (+42.9%)|" in text
    assert ("PyTorch's lowering in the model (lowered minus ideal sim): +1.000 ms (+7.1%); the runtime (measured minus the "
            "lowered sim): +5.000 ms (+33.3%)") in text
    rows = re.findall(r"<tr>((?:<td>[^<]*</td>)+)</tr>", block.group(0))
    cells = [re.findall(r"<td>([^<]*)</td>", row) for row in rows if row.startswith("<td>0</td>") or row.startswith("<td>1</td>")]
    assert cells == [["0", "19.500", "15.000", "+4.500", "+1.200", "+0.500", "+0.050", "+1.200", "+0.100", "+0.300", "+0.600", "+0.550"],
                     ["1", "20.000", "15.000", "+5.000", "+0.800", "+2.000", "+0.020", "+1.000", "+0.080", "+0.200", "+0.500", "+0.400"]]
    heads = re.findall(r"<th>([^<]*)</th>", block.group(0).split('class="torch-ranks"')[1])
    assert heads == ["rank", "train step", "sim span", "difference", *(html.escape(name) for _, name in PARTS)]
    assert ("assumes: Both sims time the case's cost model under its comm model 'stream' (its transfer times); the lowered "
            "order is what PyTorch's runtime executed (torch (_prepare_schedule_with_comms))") in text
    assert "waiting in receives counts only what goes beyond the rank's idle time in the sim" in text
    # a case of another backend has no such block
    other = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=4, cost=FixedCost.ms(F=1, B=2)), backend="sim"))
    assert "torch-beside" not in render_index(results_document([other]))


def test_a_document_without_the_per_rank_sim_shows_the_measured_parts_unsplit() -> None:
    case = _doc_case(lowered=15 * MS, ideal=14 * MS, span=None, busy=None)
    block = torch_beside_block(case)
    assert block is not None and "no per-rank sim to split against" in block
    heads = re.findall(r"<th>([^<]*)</th>", block.split('class="torch-ranks"')[1])
    assert heads[:5] == ["rank", "train step", "compute", "optimizer", "waiting in receives"]
    assert "<tr><td>0</td><td>19.500</td><td>13.000</td><td>0.200</td><td>3.500</td>" in block
    assert "each part&#x27;s median is taken on its own" in block and "rest" not in block
    line = torch_beside_line(case, "c")
    assert line == ("torch: c: median step 20.000 ms; sim of the same lowered order 15.000 ms (measured +5.000 ms, +33.3%), "
                    "of the ideal schedule 14.000 ms (sims: the cost model, comm model 'stream'; docs/torch.md)")
    # fields of the wrong shape show nothing rather than a wrong figure
    case["device"]["torch"]["sim"]["lowered_step_ns"] = "15"
    assert torch_beside_block(case) is None and torch_beside_line(case, "c") is None


def test_the_terminal_summary_has_a_torch_line_under_the_table() -> None:
    result = _result(lowered=12 * MS, ideal=11 * MS, span=[12 * MS, 12 * MS], busy=[9 * MS, 9 * MS])
    steps = len(result.metrics.steps)
    assert result.metrics.step_time_median_ns == 15 * MS  # the sim's step of 1F1B p=2 m=4, F=1, B=2: (m+p-1)(F+B)
    want = (f"torch: {result.label}: median step 15.000 ms; sim of the same lowered order 12.000 ms (measured +3.000 ms, +25.0%), "
            "of the ideal schedule 11.000 ms; per rank, train step - sim span = jobs over their cost, receive waits beyond the "
            "sim's idle, send wait, posting, UNSHARD/RESHARD/REDUCE_GRAD, Python in ranges, gaps, rest (ms): "
            "rank 0 +7.500 = +4.200 +0.500 +0.050 +1.200 +0.100 +0.300 +0.600 +0.550; "
            "rank 1 +8.000 = +3.800 +2.000 +0.020 +1.000 +0.080 +0.200 +0.500 +0.400 "
            f"(sims: the cost model, comm model 'stream'; per rank: medians of {steps} step(s) on its own clock; docs/torch.md)")
    assert case_notes([result])[0] == want
    table = case_table([result])
    assert table.index(want) > 1  # under the table and its legend
    line = CaseLine.of(result)  # what a pytest-xdist worker sends: the line survives the trip
    assert line.beside == (want,) and CaseLine.from_dict(line.to_dict(), "worker").beside == (want,)
    assert case_notes([line])[0] == want
    plain = run_case(PipelineCase("1F1B", stages=2, microbatches=4, cost=FixedCost.ms(F=1, B=2)), backend="sim")
    assert not any(x.startswith("torch:") for x in case_notes([plain])) and CaseLine.of(plain).beside == ()
