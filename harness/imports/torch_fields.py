"""The fields of one ``torch.profiler`` trace event, checked before they are read.

A trace is read with JSON numbers kept as their literal text (:class:`NumberText`,
so ``ts``/``dur`` become exact ns, :func:`harness.imports.torch_trace.us_to_ns`).
That keeps a number apart from a *string* that holds one: Kineto's writer
(pytorch/kineto ``libkineto/src/output_json.cpp``) writes ``ts`` and ``dur`` as
numbers, ``name``, ``ph`` and ``cat`` as strings. An event whose field has another
type (a string ``ts``, a number ``name``, ``NaN``) is left out of the import, and
:class:`EventProblems` says so in a warning that names the file, the event (its
index in ``traceEvents`` and its name) and the field: never a silent drop, which
would shorten a step and leave it out as cut short without a word.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["EventProblems", "NumberText", "parse_constant", "wrong_field"]


class NumberText(str):
    """A JSON number's literal text (``json.loads(..., parse_float=NumberText)``): a ``str`` whose
    value is a number in the file, not a string."""


class _NotFinite(float):
    """``NaN``, ``Infinity`` or ``-Infinity`` in the file (JSON has no such numbers)."""


def parse_constant(text: str) -> float:
    """``json.loads``' ``parse_constant``: the non-finite literal, marked (:class:`_NotFinite`)."""
    return _NotFinite(text)


def _shown(value: Any) -> str:
    if isinstance(value, _NotFinite):
        return f"{value} (not a finite number)"
    if isinstance(value, NumberText):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, (dict, list)):
        return f"a JSON {'object' if isinstance(value, dict) else 'array'}"
    return repr(value)[:40]


def _is_number(value: Any) -> bool:
    return isinstance(value, NumberText) or (isinstance(value, int) and not isinstance(value, bool))


def wrong_field(event: dict[str, Any]) -> tuple[str, str] | None:
    """The first field of a complete (``"ph": "X"``) event whose type is not the one Kineto writes,
    as ``(field, what it holds)``, or ``None``: ``name`` and ``cat`` (where present) strings, ``ts``
    present and a number, ``dur`` (where present) a number."""
    if not isinstance(event.get("name"), str):
        return "name", ("missing" if "name" not in event else _shown(event["name"])) + ", expected a string"
    if "cat" in event and not isinstance(event["cat"], str):
        return "cat", _shown(event["cat"]) + ", expected a string"
    for key in ("ts", "dur"):
        if key not in event:
            if key == "ts":
                return key, "missing, expected a number of µs"
            continue
        if not _is_number(event[key]):
            return key, _shown(event[key]) + ", expected a number of µs"
    return None


#: Events named one by one in a file's warning; past them, a count and their indices.
_NAMED = 5


@dataclass
class EventProblems:
    """The events of one file left out for a wrong-typed field, said in one warning.

    Attributes:
        path: the trace file.
        found: ``(index in traceEvents, the event's name or None, field, what it holds)``.
    """

    path: Path
    found: list[tuple[int, Any, str, str]] = field(default_factory=list)

    def add(self, index: int, event: Any, why: tuple[str, str] | None = None) -> None:
        """Note event ``index`` (``why``: the field and its value; ``None``: the event is no JSON object)."""
        name = event.get("name") if isinstance(event, dict) else None
        if why is None:
            why = ("(the event)", f"{_shown(event)}, expected a JSON object")
        self.found.append((index, name, *why))

    def message(self) -> str | None:
        """The warning, or ``None`` when no event was left out."""
        if not self.found:
            return None
        parts = []
        for k, name, key, what in self.found[:_NAMED]:
            shown = f" ({name!r})" if isinstance(name, str) else ""
            parts.append(f"traceEvents[{k}]{shown}: {key!r} is {what}" if key != "(the event)" else f"traceEvents[{k}] is {what}")
        more = len(self.found) - _NAMED
        tail = ""
        if more > 0:
            rest = ", ".join(str(k) for k, *_ in self.found[_NAMED:_NAMED + 20])
            tail = f"; and {more} more (traceEvents[{rest}{', ...' if more > 20 else ''}])"
        return (f"{self.path}: {len(self.found)} event(s) left out for a field of the wrong type: " + "; ".join(parts) + tail
                + " (a step that loses one of its pipeline actions is then left out of the figures)")
