"""Type checks of a results document's ``session``, before any report is rendered.

The session is written by :class:`harness.report.session.ProfileSession` (the pytest plugin's, or
``python -m harness run``'s) and by the importers; the page reads it (the backend line, the cases
that could not be reported, the cases that did not run, the pytest-xdist workers lost). A hand-edited or damaged file whose
session holds a wrong-typed field is refused with a message naming the field
(``session.workers_lost[0].worker is 3 (int), expected a string``) instead of a ``TypeError`` or a
template error from inside the renderer. Every field is optional; one that is present must have
its type. Fields the harness does not know are not checked.
"""

from __future__ import annotations

from typing import Any

__all__ = ["session_problem"]

#: Session fields that hold a text (or null) where present.
_TEXTS = ("python", "platform", "backend_requested", "backend", "backend_reason", "profile_steps", "source")

#: Per list of objects in the session: the fields of each entry that hold a text where present, and
#: those that hold a list of texts.
_ENTRIES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "errored_cases": (("id", "label", "error"), ()),
    "not_run_cases": (("id", "label", "kind", "error", "site"), ()),
    "workers": (("id",), ("cases",)),
    "workers_lost": (("worker", "error"), ("tests",)),
}


def _show(x: Any) -> str:
    text = repr(x)
    return (text if len(text) <= 40 else text[:37] + "...") + f" ({type(x).__name__})"


def session_problem(session: Any) -> str | None:
    """What is wrong with ``session`` (a results document's ``"session"`` value; ``None``: absent), as
    ``session.FIELD is VALUE (TYPE), expected ...``; ``None`` when nothing is."""
    if session is None:
        return None
    if not isinstance(session, dict):
        return f"session is {_show(session)}, expected an object"
    for key in _TEXTS:
        value = session.get(key)
        if value is not None and type(value) is not str:
            return f"session.{key} is {_show(value)}, expected a string"
    env = session.get("environment")
    if env is not None and not isinstance(env, dict):
        return f"session.environment is {_show(env)}, expected an object"
    for key, (texts, lists) in _ENTRIES.items():
        entries = session.get(key)
        if entries is None:
            continue
        if not isinstance(entries, list):
            return f"session.{key} is {_show(entries)}, expected a list of objects"
        for i, entry in enumerate(entries):
            where = f"session.{key}[{i}]"
            if not isinstance(entry, dict):
                return f"{where} is {_show(entry)}, expected an object"
            for field in texts:
                value = entry.get(field)
                if value is not None and type(value) is not str:
                    return f"{where}.{field} is {_show(value)}, expected a string"
            for field in lists:
                value = entry.get(field)
                if value is None:
                    continue
                if not isinstance(value, list):
                    return f"{where}.{field} is {_show(value)}, expected a list of strings"
                bad = next((j for j, x in enumerate(value) if type(x) is not str), None)
                if bad is not None:
                    return f"{where}.{field}[{bad}] is {_show(value[bad])}, expected a string"
    return None
