"""A session split across processes: each process's cases, serialized, merged into one report.

``pytest -n N --profile-jobs`` (pytest-xdist) runs its cases in N worker processes, and none of them
publishes a report. At the end of its session each worker makes one :class:`SessionPart` of the cases
it ran (:func:`make_part`) and sends it to the controller as plain values (:meth:`SessionPart.to_wire`,
through pytest-xdist's ``workeroutput``). The controller hands the parts to its
:class:`~harness.report.session.ProfileSession`, which merges them (:func:`merge_cases`) and publishes
the report once; its terminal table is made of the parts' summary lines (:func:`merge_lines`).

Order: each case carries its position, the index of its test in the collection order, which every
worker shares (pytest-xdist refuses workers that collected different tests). The merge sorts on it and
keeps a worker's own order among the cases of one test, so the report lists the cases as a serial run
does, whichever worker finished first.

One bad case costs no other its report: a worker serializes each case on its own, as a serial session
does (:func:`~harness.report.results.reportable_case`), and a case that cannot be reported travels as an
errored entry (``id``, ``label``, ``error``) in its place; so does one whose data the controller cannot
read back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from harness.analysis.result import CaseResult
from harness.errors import InputFormatError
from harness.report.jsontext import dumps_document
from harness.report.results import reportable_case
from harness.report.summary import CaseLine

__all__ = ["PART_FORMAT", "SessionPart", "make_part", "merge_cases", "merge_lines", "worker_entries"]

#: The version of :meth:`SessionPart.to_wire`'s layout (a worker of another harness version is named, not misread).
PART_FORMAT = 1


@dataclass
class SessionPart:
    """The cases one process of a split run ran, ready for the process that publishes.

    Attributes:
        worker: the process's name (pytest-xdist's worker id, ``"gw0"``).
        cases: ``(position, id, label, case)`` per reportable case: ``case`` is its results-document
            case as JSON bytes (the encoder of ``results.json``), ``position`` the index of its test
            in the collection order.
        errored: ``(position, {"id", "label", "error"})`` per case that ran but cannot be reported.
        lines: ``(position, line)``: every case's summary line (:class:`~harness.report.summary.CaseLine`),
            reportable or not, as a serial run's table shows every case.
        facts: what the process ran with that the report should name (e.g. ``CUDA_VISIBLE_DEVICES``).
    """

    worker: str
    cases: list[tuple[int, str, str, bytes]] = field(default_factory=list)
    errored: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    lines: list[tuple[int, CaseLine]] = field(default_factory=list)
    facts: dict[str, str] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        """The part as the values pytest-xdist (execnet) carries between processes: dicts with string
        keys, lists, strings, integers, bytes and ``None``."""
        return {
            "format": PART_FORMAT,
            "worker": self.worker,
            "facts": dict(self.facts),
            "cases": [[pos, cid, label, data] for pos, cid, label, data in self.cases],
            "errored": [[pos, dict(entry)] for pos, entry in self.errored],
            "lines": [[pos, line.to_dict()] for pos, line in self.lines],
        }

    @classmethod
    def from_wire(cls, data: Any, worker: str) -> SessionPart:
        """The part :meth:`to_wire` made.

        Raises:
            InputFormatError: ``data`` is no such part, or one of another format version (names the worker).
        """
        source = f"pytest-xdist worker {worker}"
        if not isinstance(data, Mapping) or data.get("format") != PART_FORMAT:
            got = data.get("format") if isinstance(data, Mapping) else type(data).__name__
            raise InputFormatError(f"{source}: its cases came in another form ({got!r}; this harness reads format {PART_FORMAT}): "
                                   "are the workers running another pipeline-harness version?")
        try:
            cases = [(int(pos), str(cid), str(label), bytes(blob)) for pos, cid, label, blob in data["cases"]]
            errored = [(int(pos), {k: str(entry[k]) for k in ("id", "label", "error")}) for pos, entry in data["errored"]]
            lines = [(int(pos), CaseLine.from_dict(line, source)) for pos, line in data["lines"]]
            facts = {str(k): str(v) for k, v in data["facts"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputFormatError(f"{source}: its cases came malformed ({type(exc).__name__}: {exc})") from None
        return cls(str(data.get("worker", worker)), cases, errored, lines, facts)


def make_part(worker: str, ran: Iterable[tuple[int, CaseResult]], *, serialize: bool = True,
              facts: Mapping[str, str] | None = None) -> SessionPart:
    """The part of the cases ``ran``: ``(position, result)`` each, in the order they ran.

    Args:
        worker: the process's name.
        ran: each case with its position (the index of its test in the collection order). Call this
            once the tests' outcomes are known (at the end of the session): they go into the cases.
        serialize: serialize the cases for a report (``False``: summary lines only, for a run that
            writes no report).
        facts: see :attr:`SessionPart.facts`.

    Never raises for a case at fault: it becomes an errored entry (see module doc).
    """
    part = SessionPart(worker, facts=dict(facts or {}))
    for pos, result in ran:
        part.lines.append((pos, CaseLine.of(result)))
        if not serialize:
            continue
        case, problem = reportable_case(result)
        if case is not None:
            try:
                part.cases.append((pos, result.case_id, result.label, dumps_document(case)))
                continue
            except (TypeError, ValueError) as exc:  # a value JSON cannot hold: the serial report would refuse it too
                problem = f"could not serialize its records ({type(exc).__name__}: {exc})"
        part.errored.append((pos, {"id": result.case_id, "label": result.label, "error": str(problem)}))
    return part


def _in_order(parts: Sequence[SessionPart], what: str) -> list[Any]:
    """``what``'s entries of every part, by position; a part's own order among equal positions."""
    keyed = [(entry[0], k, n, entry) for k, part in enumerate(parts) for n, entry in enumerate(getattr(part, what))]
    keyed.sort(key=lambda t: t[:3])
    return [t[3] for t in keyed]


def _decoded(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:  # an integer past 64 bits, which dumps_document wrote through json
        return json.loads(data)


def merge_cases(parts: Sequence[SessionPart]) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """The parts' cases as one session's: ``(cases, errored)``, each in the serial run's order.

    ``cases`` are results-document cases; ``errored`` the ``{"id", "label", "error"}`` entries of the
    cases that ran but cannot be reported, including a case whose data cannot be read back here.
    """
    cases: list[tuple[int, dict[str, Any]]] = []
    errored: list[tuple[int, dict[str, str]]] = list(_in_order(parts, "errored"))
    for pos, cid, label, data in _in_order(parts, "cases"):
        try:
            case = _decoded(data)
        except ValueError as exc:
            errored.append((pos, {"id": cid, "label": label, "error": f"its worker's data could not be read back ({exc})"}))
            continue
        cases.append((pos, case))
    errored.sort(key=lambda t: t[0])  # stable: the ones read back last keep their place among equals
    return [c for _, c in cases], [e for _, e in errored]


def merge_lines(parts: Sequence[SessionPart]) -> list[CaseLine]:
    """Every case's summary line, in the serial run's order."""
    return [line for _, line in _in_order(parts, "lines")]


def worker_entries(parts: Sequence[SessionPart]) -> list[dict[str, Any]]:
    """``session.workers`` of the merged report: per part (in worker-id order: ``gw2`` before ``gw10``),
    ``id``, the ids of the cases it ran (in its order) and its facts."""
    def key(part: SessionPart) -> tuple[int, str]:
        return len(part.worker), part.worker

    return [{"id": p.worker, "cases": [line.case_id for _, line in p.lines], **p.facts} for p in sorted(parts, key=key)]
