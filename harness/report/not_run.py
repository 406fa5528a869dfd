"""Cases that did not run: the results document's ``session.not_run_cases`` and the page's block of them.

A pytest run can lose cases before any of them produces a run: the harness refuses a case's
configuration (an unknown schedule, ``m < p`` where the schedule needs more, a negative cost), the
run of a case fails, a test fails before its case is built, or a test file fails to import. pytest
names each on the terminal; the report must too, or a reviewer of the page cannot tell that they
existed. Each such case is one entry (all texts)::

    {"id": "cases/test_x.py::test_y[1F1B]",   # the test's node id (a file's, for a collection error)
     "label": "test_y[1F1B]",                 # the case's name where it had one, else the test's
     "site": "cases/test_x.py:12",            # file:line of the case or the error, where known (else absent)
     "kind": "config" | "run" | "test" | "collection",
     "error": "ConfigError: ..."}             # the error as pytest showed it, one message

``kind``: ``config``: the harness refused the case's configuration (:class:`~harness.errors.ConfigError`,
:class:`~harness.errors.ScheduleError`, :class:`~harness.errors.InputFormatError`); ``run``: the case was
accepted but its run failed (another harness error, or an error raised while the harness ran it);
``test``: the test failed before it ran a case, with an error not from the harness (a typo in a
keyword, a failed fixture); ``collection``: the test file failed to import, so none of its cases were
collected (how many is unknown).

A test that ran its case and then failed is not listed here: its case is in ``cases``, marked by its
``outcome``. A test that expected the error (``pytest.raises``, ``xfail``) did not fail, and is not listed.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KINDS", "not_run_entry", "not_run_view"]

#: Each kind of entry, as the page and the terminal name it, in the order the page lists them.
KINDS: dict[str, str] = {
    "collection": "file failed to collect",
    "config": "configuration refused",
    "run": "run failed",
    "test": "test failed before its case ran",
}


def not_run_entry(case_id: str, label: str, kind: str, error: str, site: str | None = None) -> dict[str, str]:
    """One entry of ``session.not_run_cases`` (see module doc; ``case_id`` is its ``id``); ``site`` is left
    out where unknown.

    Raises:
        ValueError: ``kind`` is not one of :data:`KINDS` (a harness bug, not a user's error).
    """
    if kind not in KINDS:
        raise ValueError(f"not-run case kind {kind!r}: expected one of {', '.join(KINDS)}")
    entry = {"id": case_id, "label": label, "kind": kind, "error": error}
    if site:
        entry["site"] = site
    return entry


def not_run_view(session: dict[str, Any]) -> list[dict[str, str]]:
    """The page's rows of ``session["not_run_cases"]``: per entry its ``label``, ``id`` (where it differs
    from the label), ``site``, ``kind`` (the kind's words, :data:`KINDS`; an unknown kind as written)
    and ``error``, grouped by kind in :data:`KINDS`' order, in file order within a kind. Absent
    fields read as empty texts (the texts are escaped by the page's template, not here)."""
    entries = session.get("not_run_cases") or []
    order = {kind: i for i, kind in enumerate(KINDS)}
    rows = []
    for e in sorted(entries, key=lambda e: order.get(e.get("kind") or "", len(order))):
        label = e.get("label") or e.get("id") or "?"
        ident = e.get("id") or ""
        rows.append({
            "label": label,
            "id": ident if ident != label else "",
            "site": e.get("site") or "",
            "kind": KINDS.get(e.get("kind") or "", e.get("kind") or "unknown"),
            "error": e.get("error") or "",
        })
    return rows
