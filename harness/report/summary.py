"""The terminal summary of a run's cases: one row per case and the notes under it.

Plain text lines, so the pytest plugin only writes them (and any other front end can):
one row per case (schedule, sizes, backend and communication model, steps recorded,
median step with its confidence interval, bubble beside theory, span bubble, fidelity
against ``sim``, peak memory), a legend, then a ``torch`` case's line beside its two sims
(:mod:`harness.report.torch_beside`), the cases' notes, "does not fit" lines
and ``unstable``/``contended`` flags with their reasons. User text (case ids, names)
is shown with control and bidirectional characters escaped, so a name can neither
split nor reverse a row.

The table takes the cases' results, or the :class:`CaseLine` of each, made elsewhere: a pytest-xdist
worker sends its cases' lines to the controller, whose table is then the serial run's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.analysis.memory import format_bytes
from harness.analysis.result import CaseResult
from harness.errors import InputFormatError
from harness.run.stability import Flag
from harness.text import shown_in_terminal

__all__ = ["CaseLine", "assumption_lines", "case_notes", "case_table", "run_notes"]

_HEADER = ("case", "schedule", "p", "m", "v", "backend", "comm", "steps", "step median", "CI", "bubble meas/theory", "span bubble",
           "vs sim", "peak mem")
_RIGHT = {2, 3, 4, 7, 8, 9, 10, 11, 12, 13}
_LEGEND = ("bubble = idle share of total (sum of compute-stream idle / (p x step time)); theory where a closed form holds; "
           "span bubble = idle inside each rank's own first-to-last job, over the summed spans; "
           "CI = the median step's 95% confidence interval (order statistics), as the larger side's distance from the median, "
           "with its real coverage in brackets where the number of steps makes it differ (below 6 steps no 95% interval exists); "
           "vs sim = measured median against the cost model's exact step; steps! = flagged below; "
           "peak mem = the most bytes a rank holds (static + activations; ! = over the case's memory limit)")


def _ci(r: CaseResult) -> str:
    st = r.metrics.step_time_stats
    if r.records.backend == "sim":
        return "exact"
    if st is None or st.n < 2 or not st.median:
        return "—"
    text = f"±{100 * st.ci_reach:.1f}%"
    if st.ci_level_differs:  # the interval's real coverage, when n makes it differ from 95 %
        text += f" ({100 * st.ci_level:.0f}%)"
    return text


def _name(r: CaseResult) -> str:
    """The test's name (``test_gpt[1F1B]``), and the case's own name after it where it was given one."""
    test = r.case_id.split("::", 1)[-1]
    return test if r.label in (test, test.split("#", 1)[0]) or test.startswith(r.label) else f"{test} ({r.label})"


def _beside(r: CaseResult | CaseLine) -> tuple[str, ...]:
    """The case's lines beside its sims (:mod:`harness.report.torch_beside`: a ``torch`` case; none elsewhere)."""
    if isinstance(r, CaseLine):
        return r.beside
    if r.records.backend != "torch":
        return ()
    from harness.report.torch_beside import torch_beside_line

    doc = {"device": r.records.device, "metrics": {"step_time_median_ns": r.metrics.step_time_median_ns},
           "steps": list(r.metrics.steps), "comm_model": r.comm_model}
    line = torch_beside_line(doc, r.label)
    return () if line is None else (shown_in_terminal(line),)


def _row(r: CaseResult) -> tuple[str, ...]:
    m, th, workload, fid = r.metrics, r.theory.get("bubble_ratio"), r.records.device.get("workload"), r.fidelity
    return (
        shown_in_terminal(_name(r)),  # a newline or U+202E must not split or reverse the row
        shown_in_terminal(r.schedule.name),
        str(r.num_ranks),
        str(r.num_microbatches),
        str(r.chunks),
        r.records.backend + (f"/{workload}" if workload else ""),
        r.comm_model,
        str(len(m.steps)) + ("!" if r.flags else ""),
        f"{m.step_time_median_ns / 1e6:.3f} ms",
        _ci(r),
        f"{100 * m.bubble_ratio:.1f}% / " + ("—" if th is None else f"{100 * th:.1f}%"),
        f"{100 * m.span_bubble_ratio:.1f}%",
        "—" if fid is None else f"{100 * fid['change']:+.1f}%",
        "—" if r.memory is None else format_bytes(max(r.memory.peak_bytes, default=0)) + (" !" if r.does_not_fit else ""),
    )


@dataclass(frozen=True)
class CaseLine:
    """What the summary shows of one case, in plain text: its row of the table and what its notes
    are made of (:meth:`of` a result, once its test's outcome is known).

    Attributes:
        case_id, label: the case's id and label, as in the results document.
        row: the table's cells (:data:`_HEADER`'s columns).
        outcome: the pytest outcome of the test that ran it (``None`` before it is known).
        warnings, does_not_fit, flags, assumptions: as the result's (:class:`~harness.analysis.result.CaseResult`).
    """

    case_id: str
    label: str
    row: tuple[str, ...]
    outcome: str | None = None
    warnings: tuple[str, ...] = ()
    does_not_fit: str | None = None
    flags: tuple[Flag, ...] = ()
    assumptions: tuple[str, ...] | None = None
    beside: tuple[str, ...] = ()

    @classmethod
    def of(cls, r: CaseResult) -> CaseLine:
        assumptions = None if r.assumptions is None else tuple(r.assumptions)
        return cls(r.case_id, r.label, _row(r), r.outcome, tuple(r.warnings), r.does_not_fit, tuple(r.flags), assumptions,
                   _beside(r))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-like values (strings, lists, ``None``), as pytest-xdist sends between processes."""
        return {"case_id": self.case_id, "label": self.label, "row": list(self.row), "outcome": self.outcome,
                "warnings": list(self.warnings), "does_not_fit": self.does_not_fit, "flags": [f.to_dict() for f in self.flags],
                "assumptions": None if self.assumptions is None else list(self.assumptions), "beside": list(self.beside)}

    @classmethod
    def from_dict(cls, d: Any, source: str) -> CaseLine:
        """The line :meth:`to_dict` made; ``source`` names where it came from in errors.

        Raises:
            InputFormatError: ``d`` is not what :meth:`to_dict` makes (names ``source``).
        """
        try:
            row = tuple(d["row"])
            flags = tuple(Flag(str(f["kind"]), str(f["reason"])) for f in d["flags"])
            assumptions = None if d["assumptions"] is None else tuple(d["assumptions"])
            line = cls(d["case_id"], d["label"], row, d["outcome"], tuple(d["warnings"]), d["does_not_fit"], flags, assumptions,
                       tuple(d["beside"]))
        except (KeyError, TypeError) as exc:
            raise InputFormatError(f"{source}: a case's summary line is malformed ({type(exc).__name__}: {exc})") from None
        texts = [line.case_id, line.label, *line.row, *line.warnings, *(line.assumptions or ()), *line.beside]
        if len(row) != len(_HEADER) or not all(isinstance(t, str) for t in texts):
            raise InputFormatError(f"{source}: a case's summary line is malformed (expected {len(_HEADER)} text cells)")
        return line


#: Short headers, used when the table would not fit the terminal (the legend says what each is).
_SHORT_HEADER = ("case", "sched", "p", "m", "v", "backend", "comm", "steps", "step", "CI", "bubble/th", "span", "vs sim", "mem")
#: Columns that give up width when the table is too wide, in order, with the width each keeps on a first pass.
_SHRINK = ((0, 24), (5, 10), (6, 8), (1, 10))
#: ... and on a second pass (after the columns closed up to one space), in this order: no column gets narrower
#: than this, nor than the least width at which its cells still tell the cases apart, so it stays readable.
_SHRINK_MORE = ((6, 6), (5, 8), (1, 8), (0, 14))
#: The two columns apart (one where the first pass does not make the table fit).
_GAP = 2


def _cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut with ``…`` at its end."""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def _cut_name(full: str, test: str, width: int) -> str:
    """A case's name in at most ``width`` characters: whole; else the test's name without the case's
    own (``full`` is ``test (name)``); else the test's name cut in its function name, so its parameters
    stay (``test_sched…[ZB-V-1]``); else cut in its middle."""
    if len(full) <= width:
        return full
    if len(test) <= width:
        return test
    params = test[test.index("["):] if "[" in test else ""
    if params and len(params) <= width - 5:
        return test[: width - 1 - len(params)] + "…" + params
    tail = (width - 1) // 2
    return test[: width - 1 - tail] + "…" + (test[len(test) - tail:] if tail else "")


def _middle(text: str, width: int, head: int) -> str:
    """``text`` in ``width`` characters: its first ``head``, ``…``, and as much of its end as fits."""
    if len(text) <= width:
        return text
    head = max(0, min(head, width - 1))
    tail = width - 1 - head
    return text[:head] + "…" + (text[len(text) - tail:] if tail else "")


def _fitted(values: Sequence[str], tests: Sequence[str] | None, width: int) -> list[str] | None:
    """``values`` (one column's cells) cut to ``width`` so that cells that differ still differ: cut at their
    end (a case's name: :func:`_cut_name`, its parameters kept), else in their middle, keeping more of the
    start, or of the end; ``None`` where no way of cutting keeps them apart at that width."""
    distinct = len(set(values))
    first = ([_cut_name(v, t, width) for v, t in zip(values, tests)] if tests is not None
             else [_cut(v, width) for v in values])
    if len(set(first)) == distinct:
        return first
    names = [t if len(v) > width else v for v, t in zip(values, tests)] if tests is not None else values  # a case: its test's name
    for head in ((width - 1) // 2, (width - 1) // 3, (2 * (width - 1)) // 3, 1, 0):
        cut = [_middle(v, width, head) for v in names]
        if len(set(cut)) == distinct:
            return cut
    return None


def _wrapped(line: str, width: int | None, indent: str = "  ") -> list[str]:
    """``line`` wrapped to ``width`` at spaces (continuation lines indented; a word longer than the width, a
    path say, stays whole), or as it is without a width."""
    if width is None or len(line) <= width:
        return [line]
    import textwrap

    return textwrap.wrap(line, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False) or [line]


def _packed(start: str, items: list[str], width: int) -> list[str]:
    """``start`` and ``items`` joined with `` · ``, wrapped to ``width`` between items only (continuation
    lines indented by two), so no item is split."""
    lines = [start.rstrip()]
    for k, item in enumerate(items):
        sep = "" if k == 0 else " ·"
        if k == 0 and len(start) + len(item) <= width:
            lines[-1] = start + item
        elif len(lines[-1]) + len(sep) + 1 + len(item) <= width:
            lines[-1] += f"{sep} {item}"
        else:
            lines[-1] += sep
            lines.append(f"  {item}")
    return lines


def _compact(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> tuple[list[tuple[str, ...]], tuple[str, ...]]:
    """Narrower cells that say the same: the step's ``ms`` moved into its header (``step ms``) where every
    row has it, and the bubble pair without its spaces (``27.3%/27.3%``)."""
    head = list(header)
    step = _HEADER.index("step median")
    drop_ms = all(row[step].endswith(" ms") for row in rows)
    if drop_ms:
        head[step] += " ms"
    bubble = _HEADER.index("bubble meas/theory")
    out = []
    for row in rows:
        cells = list(row)
        if drop_ms:
            cells[step] = cells[step][: -len(" ms")]
        cells[bubble] = cells[bubble].replace(" / ", "/")
        out.append(tuple(cells))
    return out, tuple(head)


def case_table(results: Sequence[CaseResult | CaseLine], width: int | None = None) -> list[str]:
    """The table of ``results`` (one row each, columns at most 60 characters wide), its legend with the
    cases' assumptions, and the lines of notes, "does not fit" marks and flags that follow it.

    Args:
        results: the cases (their results, or each one's :class:`CaseLine`).
        width: the terminal's width in characters (pytest's own: ``COLUMNS`` where set). Where the table
            would be wider, it is made to fit, step by step until it does: the headers shorten, a column
            that holds one value for every case leaves the table for a line above it (``every case: p 4
            · m 8 · ...``), the step's unit moves into its header and the bubble pair loses its spaces,
            the case, backend, comm and schedule columns narrow in turn (cut with ``…``: a case's own name
            first, then its test's function name, so the test's parameters stay), down to the least width
            at which their cells still tell every two cases apart (a cut never makes two cases read the
            same), and the columns close up to one space; a line under the table then says which columns
            were cut and that the report's page holds the table whole, or, where even that is wider than
            ``width``, how wide it is. The legend, the assumptions and the notes wrap to ``width``.
    """
    rows = [r.row if isinstance(r, CaseLine) else _row(r) for r in results]
    tests = [shown_in_terminal(r.case_id.split("::", 1)[-1]) for r in results]
    cols = list(range(len(_HEADER)))
    header: tuple[str, ...] = _HEADER
    gap = _GAP

    def natural(columns: list[int], head: tuple[str, ...]) -> list[int]:
        return [min(60, max(len(row[i]) for row in [head, *rows])) for i in columns]

    def total(ws: dict[int, int]) -> int:
        return sum(ws.values()) + gap * (len(ws) - 1)

    above: list[str] = []
    narrow = width is not None and sum(natural(cols, header)) + gap * (len(cols) - 1) > width
    fitted: dict[int, list[str]] = {}  # per cut column, its cells as shown
    if narrow and width is not None:
        header = _SHORT_HEADER
        if len(rows) > 1:  # a column with one value for every case says it once, above the table
            same = [i for i in cols[1:] if len({row[i] for row in rows}) == 1]
            above = _packed("every case: ", [f"{_HEADER[i]} {rows[0][i]}" for i in same], width) if same else []
            cols = [i for i in cols if i not in same]
        rows, header = _compact(rows, header)
    widths = dict(zip(cols, natural(cols, header)))

    def least(col: int, floor: int) -> int:
        """The least width of ``col``, ``floor`` or more, at which its cells still tell the cases apart."""
        values = [row[col] for row in rows]
        for w in range(max(floor, len(header[col])), widths[col]):
            if _fitted(values, tests if col == 0 else None, w) is not None:
                return w
        return widths[col]

    def shrink(order: tuple[tuple[int, int], ...]) -> None:
        for col, keep in order:
            over = total(widths) - (width or 0)
            if over <= 0:
                return
            if col in widths and widths[col] > keep:
                widths[col] = max(least(col, keep), widths[col] - over)

    if narrow:
        shrink(_SHRINK)
        if total(widths) > (width or 0):
            gap = 1
            shrink(_SHRINK_MORE)
        for col in widths:
            values = [row[col] for row in rows]
            if any(len(v) > widths[col] for v in values):
                fitted[col] = _fitted(values, tests if col == 0 else None, widths[col]) or [_cut(v, widths[col]) for v in values]

    def cell(k: int, i: int, text: str) -> str:
        if k >= 0 and i in fitted:
            return fitted[i][k]
        return _cut_name(text, tests[k], widths[i]) if i == 0 and k >= 0 else _cut(text, widths[i])

    def fmt(k: int, row: tuple[str, ...]) -> str:
        return (" " * gap).join(cell(k, i, row[i]).rjust(widths[i]) if i in _RIGHT else cell(k, i, row[i]).ljust(widths[i])
                                for i in cols).rstrip()

    lines = [*above, fmt(-1, header), *(fmt(k, row) for k, row in enumerate(rows))]
    cut = [_HEADER[i] for i in cols if any(len(row[i]) > widths[i] for row in rows)]
    if narrow and total(widths) > (width or 0):
        lines += _wrapped(f"(the table needs {total(widths)} columns, more than {width}: cut further, its cells would no longer "
                          "be read or tell the cases apart; the report's page has it whole)", width)
    elif cut:
        lines += _wrapped(f"({', '.join(cut)} cut to fit {width} columns with …; the report's page has the table whole)", width)
    step = "step ms = step median in ms" if "step ms" in header else "step = step median"
    legend = _LEGEND if header is _HEADER else (f"short headers: sched = schedule, {step}, bubble/th = bubble "
                                                 "measured / theory, span = span bubble, mem = peak memory; " + _LEGEND)
    out = [*lines, *_wrapped(legend, width)]
    for line in assumption_lines(results):
        out += _wrapped(line, width, "      " if line.startswith("  - ") else "  ")
    for note in case_notes(results):
        out += _wrapped(note, width)
    return out


def run_notes(result: CaseResult) -> list[str]:
    """One run's notes and flags as :func:`case_notes` gives them, without the case's label (for a line that names
    the run already, e.g. the chooser's confirming runs): ``"note: median job 9 µs: on the cpu backend ..."``,
    ``"unstable: step times spread widely: ..."``; empty when there is nothing to say."""
    return ([shown_in_terminal(f"note: {note}") for note in result.warnings]
            + [f"{f.kind}: {shown_in_terminal(f.reason)}" for f in result.flags])


def case_notes(results: Sequence[CaseResult | CaseLine]) -> list[str]:
    """The lines under the table: each case's notes, "does not fit" marks, ``unstable``/``contended``
    flags with their reasons, and a count of the flagged cases (empty when there is nothing to say)."""
    lines = [line for r in results for line in _beside(r)]
    lines += [shown_in_terminal(f"note: {r.label}: {note}") for r in results for note in r.warnings]
    lines += [f"does not fit: {shown_in_terminal(r.label)}: {r.does_not_fit}" for r in results if r.does_not_fit]
    flagged = [r for r in results if r.flags]
    lines += [f"{f.kind}: {shown_in_terminal(r.label)}: {f.reason}" for r in flagged for f in r.flags]
    if flagged:
        kinds = sorted({f.kind for r in flagged for f in r.flags})
        lines.append(f"{len(flagged)} of {len(results)} case(s) flagged {' or '.join(kinds)}: their figures may not repeat; "
                     "`python -m harness compare` reports them and does not gate them unless --strict")
    return lines


#: The legend lists at most this many distinct assumptions (results.json holds every case's).
_ASSUMPTIONS_SHOWN = 24


def assumption_lines(results: Sequence[CaseResult | CaseLine]) -> list[str]:
    """The cases' assumptions (:mod:`harness.analysis.assumptions`) for the legend, each sentence once:
    those every case shares first, then each other one with the cases it holds for (the first three
    named); a count of the cases that recorded none. Empty when no case recorded any."""
    recorded = [r for r in results if r.assumptions is not None]
    if not recorded:
        return []
    holders: dict[str, list[CaseResult | CaseLine]] = {}
    for r in recorded:
        for sentence in r.assumptions or []:
            holders.setdefault(sentence, []).append(r)
    lines = [f"assumptions ({'every case' if len(recorded) == len(results) else f'{len(recorded)} of {len(results)} cases'} "
             "unless named):"]
    shared = [s for s, rs in holders.items() if len(rs) == len(recorded)]
    rest = [s for s, rs in holders.items() if len(rs) < len(recorded)]
    for sentence in (shared + rest)[:_ASSUMPTIONS_SHOWN]:
        rs = holders[sentence]
        who = "" if len(rs) == len(recorded) else " [" + ", ".join(shown_in_terminal(r.label) for r in rs[:3]) + (
            f" and {len(rs) - 3} more" if len(rs) > 3 else "") + "]"
        lines.append(f"  - {shown_in_terminal(sentence)}{who}")
    if len(holders) > _ASSUMPTIONS_SHOWN:
        lines.append(f"  ... and {len(holders) - _ASSUMPTIONS_SHOWN} more (each case's in results.json, assumptions)")
    if len(recorded) < len(results):
        lines.append(f"  ({len(results) - len(recorded)} case(s) recorded none: imported or written before assumptions were recorded)")
    return lines
