"""Runs that publish into one report folder at the same time: who replaced whose report, said at the time.

Publishing is serialized (:mod:`harness.report.render`: a lock, and the folder always holds one whole
report), so with two runs into one folder the last to publish wins and the other's cases are gone. This
module lets each run say so:

* a run that publishes records it in ``.published.json`` in the folder (process, host, when it
  published, when the run started); publishing over a report another run published *after this run
  started* is noted (:func:`record_publish`): this run replaced it;
* a run announces itself while it runs (:func:`announce`: a file in ``.runs/`` in the folder, removed
  by :meth:`RunTicket.withdraw`); at its end it checks (:func:`still_ours`) whether the folder still
  holds its report, and whether another run that is still running will replace it.

All of it is best effort: a folder that cannot be written or read for these files changes nothing
else, and a note is never an error. A ticket left by a run that was killed is ignored (a process of
this host that is gone) and removed; one of another host once it is a day old.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["MARKER_NAME", "RUNS_DIR", "RunTicket", "announce", "record_publish", "still_ours"]

#: The file, in a report folder, that names the run whose report it holds.
MARKER_NAME = ".published.json"
#: The folder, in a report folder, where running runs announce themselves.
RUNS_DIR = ".runs"
#: A ticket of another host is taken as left by a killed run once it is this old (s).
_STALE_OTHER_HOST_S = 24 * 3600.0


def _host() -> str:
    return socket.gethostname() or "host"


def _alive(pid: int) -> bool:
    if os.name != "posix":  # pragma: no cover - no cheap probe: take it as alive
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except OSError:
        return True
    return True


def _who(entry: dict[str, Any]) -> str:
    host = entry.get("host")
    return f"process {entry.get('pid')}" + (f" on {host}" if host and host != _host() else "")


@dataclass
class RunTicket:
    """A run's announcement in a report folder.

    Attributes:
        folder: the report folder.
        token: this run's random id (the publish marker carries it).
        started: when the run started (``time.time()``, s).
        path: the ticket file (``None`` where it could not be written).
    """

    folder: Path
    token: str
    started: float
    path: Path | None = None

    def withdraw(self) -> None:
        """Remove the ticket (and ``.runs/`` when it is left empty)."""
        if self.path is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        with contextlib.suppress(OSError):
            self.path.parent.rmdir()  # only when empty
        self.path = None


def new_token() -> str:
    """A run's random id."""
    return secrets.token_hex(8)


def announce(folder: Path, started: float | None = None, token: str | None = None) -> RunTicket:
    """Announce a run that will publish into ``folder`` (the folder must exist). Never raises."""
    ticket = RunTicket(Path(folder), token or new_token(), time.time() if started is None else started)
    entry = {"token": ticket.token, "pid": os.getpid(), "host": _host(), "started": ticket.started}
    path = ticket.folder / RUNS_DIR / f"{os.getpid()}-{ticket.token}.json"
    try:
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(entry), encoding="utf-8")
        ticket.path = path
        atexit.register(ticket.withdraw)  # a run that ends without withdrawing it (an error) leaves no live ticket
    except OSError:
        pass
    return ticket


def _read(path: Path) -> dict[str, Any] | None:
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return entry if isinstance(entry, dict) else None


def _age(t: Any, now: float) -> str:
    return f"{max(0.0, now - float(t)):.0f} s" if isinstance(t, (int, float)) else "a moment"


def record_publish(folder: Path, token: str, started: float) -> str | None:
    """Record that the run ``token`` (started at ``started``) publishes into ``folder`` now; call with the
    publish lock held. Returns a note when it replaces a report that another run published after this run
    started (that run's cases are gone from the folder), else ``None``. Never raises."""
    now = time.time()
    marker = Path(folder) / MARKER_NAME
    before = _read(marker)
    note = None
    if before is not None and before.get("token") != token and isinstance(before.get("published"), (int, float)) \
            and before["published"] >= started:
        note = (f"this run replaced the report {_who(before)} published into {folder} {_age(before['published'], now)} "
                "earlier, while this one ran: its cases are no longer there")
    entry = {"token": token, "pid": os.getpid(), "host": _host(), "published": now, "started": started}
    tmp = marker.with_name(f"{MARKER_NAME}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(entry), encoding="utf-8")
        (os.rename if os.name == "posix" else os.replace)(tmp, marker)  # rename: atomic over the old one on POSIX
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
    return note


def _others_running(folder: Path, token: str, now: float) -> list[dict[str, Any]]:
    """The tickets in ``folder`` of other runs that may still be running (stale ones are removed)."""
    runs = Path(folder) / RUNS_DIR
    try:
        paths = sorted(runs.glob("*.json"))
    except OSError:
        return []
    out = []
    for path in paths:
        entry = _read(path)
        if entry is None or entry.get("token") == token:
            continue
        pid = entry.get("pid")
        local = entry.get("host") == _host()
        stale = (local and isinstance(pid, int) and not _alive(pid)) or (
            not local and isinstance(entry.get("started"), (int, float)) and now - entry["started"] > _STALE_OTHER_HOST_S)
        if stale:
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        out.append(entry)
    return out


def still_ours(folder: Path, token: str) -> str | None:
    """At a run's end: a note when ``folder`` no longer holds the report of run ``token`` (another run
    published over it), or when another run announced in ``folder`` is still running (its report will
    replace this one); ``None`` when neither. Never raises."""
    now = time.time()
    marker = _read(Path(folder) / MARKER_NAME)
    if marker is not None and marker.get("token") != token:
        return (f"{folder} no longer holds this run's report: {_who(marker)} published its own there "
                f"{_age(marker.get('published'), now)} ago")
    others = _others_running(folder, token, now)
    if others:
        first = others[0]
        more = f" (and {len(others) - 1} more)" if len(others) > 1 else ""
        return (f"another run, {_who(first)}{more}, started {_age(first.get('started'), now)} ago, writes into {folder} too: "
                "when it finishes, its report replaces this one")
    return None
