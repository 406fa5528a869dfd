"""The ``torch`` backend's run beside the sim of the same schedule: a block of the case's section of the
page and a line of the terminal summary.

What it shows of a case run on PyTorch's pipelining runtime (``docs/torch.md``, "Beside the run"):

* the measured median step (every rank's jobs, :mod:`harness.analysis.metrics`) beside the sim of the same
  lowered order (what PyTorch's runtime executed: its sends and receives, each ``OVERLAP_F_B`` as F then
  B, the ``OPT`` jobs) and the sim of the ideal schedule (the case's own, under its comm model and
  placement); the lowering's cost in the model is the second minus the third, the runtime's the first
  minus the second;
* per rank, its own measured training step against its span in the sim of the lowered order, the
  difference split into parts that add up to it exactly (ns, medians over the recorded steps):

  - **jobs over their cost**: compute and optimizer time measured (``compute + optimizer``) minus the
    cost-model durations of the rank's compute jobs (``rank_busy_ns``);
  - **waiting in receives beyond the sim's idle**: ``recv_wait`` minus the rank's idle time in the sim
    (``rank_span_ns - rank_busy_ns``: its share of the schedule's own bubble, which the sim spends
    waiting for inputs too);
  - the end-of-step wait for the sends (``send_wait``), posting sends and receives (``post``),
    ``UNSHARD``/``RESHARD``/``REDUCE_GRAD`` (``host``), Python inside compute ranges around the stage calls
    (``in_range_other``), gaps between actions (``gaps``);
  - **rest**: what those do not account for (each part's median is taken on its own, so medians do not
    add up exactly; and the time after ``step()`` outside the optimizer steps).

It reads the results document's fields only (``device.torch.sim``, ``device.torch.per_rank``,
``device.torch.lowering``, ``metrics.step_time_median_ns``, ``steps``, ``comm_model``), so it shows a
stored run as well as a fresh one; a case without ``device.torch.sim`` (another backend) has neither.
Every value on the page is escaped.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any

__all__ = ["PARTS", "RankSplit", "TorchBeside", "torch_beside", "torch_beside_block", "torch_beside_line"]

#: The parts of a rank's difference, in order: ``(key, what the page calls it)``.
PARTS = (("over_cost", "jobs over their cost"), ("recv_beyond", "waiting in receives beyond the sim's idle"),
         ("send_wait", "end-of-step wait for the sends"), ("post", "posting sends and receives"),
         ("host", "UNSHARD/RESHARD/REDUCE_GRAD"), ("in_range_other", "Python in compute ranges"),
         ("gaps", "gaps between actions"), ("rest", "rest (medians taken part by part)"))


@dataclass(frozen=True)
class RankSplit:
    """One rank's measured training step against its span in the sim of the lowered order (ns).

    Attributes:
        rank: the pipeline rank.
        train_step_ns: median of its ``step()`` entry to the end of its optimizer steps.
        sim_span_ns, sim_busy_ns: in the sim of the lowered order, the end of its last job and its compute
            jobs' cost-model durations summed (``None`` for a document written before they were kept).
        parts: :data:`PARTS`' keys to ns; with the sim's figures they add up to
            ``train_step_ns - sim_span_ns`` exactly. Without them only the measured parts (``send_wait``,
            ``post``, ``host``, ``in_range_other``, ``gaps``) and ``recv_wait``, ``compute``, ``optimizer``.
    """

    rank: int
    train_step_ns: int
    sim_span_ns: int | None
    sim_busy_ns: int | None
    parts: dict[str, int]

    @property
    def difference_ns(self) -> int | None:
        """``train_step_ns - sim_span_ns`` (``None`` without the sim's span)."""
        return None if self.sim_span_ns is None else self.train_step_ns - self.sim_span_ns


@dataclass(frozen=True)
class TorchBeside:
    """A torch case's measured step beside its two sims, and per rank the parts of the difference (ns).

    Attributes:
        measured_ns: the case's median step (every rank's jobs).
        steps: the number of recorded steps.
        lowered_ns: the sim of PyTorch's executed order.
        ideal_ns: the sim of the case's own schedule.
        lowering: who lowered the compute order (``device.torch.lowering``).
        placement: the ideal schedule's placement of sends and receives.
        comm_model: the case's communication model (the sims'; transfers as it says).
        ranks: per rank (:class:`RankSplit`).
    """

    measured_ns: int
    steps: int
    lowered_ns: int
    ideal_ns: int
    lowering: str
    placement: str
    comm_model: str
    ranks: tuple[RankSplit, ...]

    def assumptions(self) -> str:
        """What the figures rest on, in one sentence group (shown with them)."""
        return (f"Both sims time the case's cost model under its comm model '{self.comm_model}' (its transfer times); the "
                f"lowered order is what PyTorch's runtime executed ({self.lowering}): its sends and receives, each "
                f"OVERLAP_F_B as F then B, the OPT jobs; the ideal is the case's own schedule (placement "
                f"'{self.placement}', overlapped groups overlapped). Per rank: medians over the {self.steps} recorded "
                "step(s), each on the rank's own clock, from step() to the end of its optimizer steps"
                + ("; waiting in receives counts only what goes beyond the rank's idle time in the sim (its share of the "
                   "schedule's bubble); the rest holds what the part-by-part medians do not add up to."
                   if self.split else "; each part's median is taken on its own."))

    @property
    def split(self) -> bool:
        """Whether every rank's difference is split against the sim (the document keeps the per-rank sim)."""
        return bool(self.ranks) and all(r.sim_span_ns is not None for r in self.ranks)


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, got {value!r}")
    return int(value)


def torch_beside(case: dict[str, Any]) -> TorchBeside | None:
    """The figures of ``case`` (a results document's case), or ``None`` for a case without
    ``device.torch.sim`` or with fields of the wrong shape (the page and the summary then show nothing of it)."""
    device = case.get("device")
    found = device.get("torch") if isinstance(device, dict) else None
    torch: dict[str, Any] = found if isinstance(found, dict) else {}
    sims = torch.get("sim")
    metrics = case.get("metrics")
    if not isinstance(sims, dict) or not isinstance(metrics, dict):
        return None
    try:
        lowered = _int(sims["lowered_step_ns"])
        spans, busies = sims.get("rank_span_ns"), sims.get("rank_busy_ns")
        ranks = []
        for row in torch.get("per_rank") or []:
            r = _int(row["rank"])
            got = {k: _int(row[k]) for k in ("train_step", "compute", "recv_wait", "send_wait", "post", "host",
                                              "in_range_other", "gaps", "optimizer")}
            span = _int(spans[r]) if isinstance(spans, list) and r < len(spans) else None
            busy = _int(busies[r]) if isinstance(busies, list) and r < len(busies) else None
            measured = {k: got[k] for k in ("send_wait", "post", "host", "in_range_other", "gaps")}
            if span is None or busy is None:
                parts = {**measured, "recv_wait": got["recv_wait"], "compute": got["compute"], "optimizer": got["optimizer"]}
            else:
                parts = {"over_cost": got["compute"] + got["optimizer"] - busy, "recv_beyond": got["recv_wait"] - (span - busy),
                         **measured}
                parts["rest"] = got["train_step"] - span - sum(parts.values())
                parts = {k: parts[k] for k, _ in PARTS}
            ranks.append(RankSplit(r, got["train_step"], span, busy, parts))
        steps = case.get("steps")
        return TorchBeside(_int(metrics["step_time_median_ns"]), len(steps) if isinstance(steps, list) else 0, lowered,
                           _int(sims["ideal_step_ns"]), str(torch.get("lowering") or "torch"),
                           str(sims.get("ideal_placement") or "none"), str(case.get("comm_model") or "stream"), tuple(ranks))
    except (KeyError, TypeError, IndexError):
        return None


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f} ms"


def _change(ns: int, of: int, inline: bool = False) -> str:
    """``ns - of`` in ms and as a share of ``of``: ``+5.000 ms (+33.3%)``; ``inline``: ``+5.000 ms, +33.3%``."""
    text = f"{(ns - of) / 1e6:+,.3f} ms"
    if not of:
        return text
    return f"{text}, {(ns - of) / of:+.1%}" if inline else f"{text} ({(ns - of) / of:+.1%})"


def torch_beside_block(case: dict[str, Any]) -> str | None:
    """The page's HTML fragment for ``case`` (module doc), or ``None`` without the figures."""
    fig = torch_beside(case)
    if fig is None:
        return None
    out = ['<details class="meta torch-beside" open><summary>PyTorch\'s runtime beside the sim of the same schedule</summary>',
           '<table class="torch-sims"><tr><th class="l"></th><th>step</th><th>measured minus it</th></tr>']
    rows = [(f"measured on the torch backend (median of {fig.steps} step(s))", fig.measured_ns, None),
            ("sim of the same lowered order (what PyTorch's runtime executed)", fig.lowered_ns, fig.measured_ns - fig.lowered_ns),
            ("sim of the ideal schedule (the case's own)", fig.ideal_ns, fig.measured_ns - fig.ideal_ns)]
    for name, ns, diff in rows:
        out.append(f'<tr><td class="l">{escape(name)}</td><td>{escape(_ms(ns))}</td>'
                   f"<td>{'' if diff is None else escape(_change(fig.measured_ns, ns))}</td></tr>")
    out.append("</table><div>" + escape(f"PyTorch's lowering in the model (lowered minus ideal sim): "
                                        f"{_change(fig.lowered_ns, fig.ideal_ns)}; the runtime (measured minus the lowered "
                                        f"sim): {_change(fig.measured_ns, fig.lowered_ns)}") + "</div>")
    if fig.ranks:
        split = fig.split
        keys = [(k, name) for k, name in PARTS] if split else [
            ("compute", "compute"), ("optimizer", "optimizer"), ("recv_wait", "waiting in receives"),
            *[(k, name) for k, name in PARTS if k in ("send_wait", "post", "host", "in_range_other", "gaps")]]
        title = ("what PyTorch's lowering and runtime added, per rank: its training step minus its span in the sim of the "
                 "lowered order, in parts that add up to it (ms)" if split else
                 "what PyTorch's lowering and runtime added, per rank (ms; this document holds no per-rank sim to split against)")
        head = ["rank", "train step", *(["sim span", "difference"] if split else []), *(name for _, name in keys)]
        out.append(f"<div>{escape(title)}:</div><table class=\"torch-ranks\"><tr>"
                   + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>")
        for r in fig.ranks:
            cells = [str(r.rank), f"{r.train_step_ns / 1e6:,.3f}"]
            if split:
                cells += [f"{(r.sim_span_ns or 0) / 1e6:,.3f}", f"{(r.difference_ns or 0) / 1e6:+,.3f}"]
            cells += [f"{r.parts[k] / 1e6:+,.3f}" if split else f"{r.parts[k] / 1e6:,.3f}" for k, _ in keys]
            out.append("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>")
        out.append("</table>")
    out.append(f'<div class="hint">assumes: {escape(fig.assumptions())}</div></details>')
    return "".join(out)


def torch_beside_line(case: dict[str, Any], label: str) -> str | None:
    """The terminal summary's line for ``case`` (module doc), or ``None`` without the figures."""
    fig = torch_beside(case)
    if fig is None:
        return None
    line = (f"torch: {label}: median step {_ms(fig.measured_ns)}; sim of the same lowered order {_ms(fig.lowered_ns)} "
            f"(measured {_change(fig.measured_ns, fig.lowered_ns, inline=True)}), "
            f"of the ideal schedule {_ms(fig.ideal_ns)}")
    if fig.split:
        line += ("; per rank, train step - sim span = jobs over their cost, receive waits beyond the sim's idle, send wait, "
                 "posting, UNSHARD/RESHARD/REDUCE_GRAD, Python in ranges, gaps, rest (ms): "
                 + "; ".join(f"rank {r.rank} {(r.difference_ns or 0) / 1e6:+.3f} = "
                             + " ".join(f"{r.parts[k] / 1e6:+.3f}" for k, _ in PARTS) for r in fig.ranks))
    per_rank = f"; per rank: medians of {fig.steps} step(s) on its own clock" if fig.split else ""
    return line + f" (sims: the cost model, comm model '{fig.comm_model}'{per_rank}; docs/torch.md)"
