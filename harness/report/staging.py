"""The staging folders of renders into a report folder: named after their owner, and removed once
that owner is gone (see :mod:`harness.report.render`, whose write_report renders into one).

A staging folder is named ``.render-<host>-<pid>-<random>``. One left behind by a render that was
killed (SIGKILL, a crash, a power cut) is removed by the next render into the same folder: one of
this host whose process is gone, or that this process no longer renders into; one of another host,
or named before the owner was recorded (``.render-<random>``), once nothing in it changed for a day.
A live render's staging folder is never touched.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["STALE_UNOWNED_AFTER_S"]

_STAGE_PREFIX = ".render-"
#: ``.render-<host>-<pid>-<mkdtemp's random part>``; the host tag has no ``-``.
_STAGE_NAME = re.compile(r"\.render-(?P<host>[A-Za-z0-9_]+)-(?P<pid>[0-9]+)-[A-Za-z0-9_]+")
#: A staging folder whose owner cannot be asked (another host, or an unnamed
#: owner) is stale once nothing in it changed for this long.
STALE_UNOWNED_AFTER_S = 24 * 3600.0
_live_stages: set[Path] = set()  # staging folders this process renders into now
_stages_lock = threading.Lock()
def _host_tag() -> str:
    """This host's name as it goes into staging folder names (no ``-``)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname())[:64] or "host"


def _process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (``True`` where that cannot be told)."""
    if os.name != "posix":  # os.kill(pid, 0) is no probe on Windows: it would stop the process
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # gone, or a number no process can have
        return False
    except OSError:  # e.g. EPERM: it exists, owned by another user
        return True
    return True


def _newest_change(root: Path) -> float:
    """The latest modification time of ``root`` or anything under it."""
    newest = root.lstat().st_mtime
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            with contextlib.suppress(OSError):
                newest = max(newest, os.lstat(os.path.join(dirpath, name)).st_mtime)
    return newest


def _stale_stage(path: Path, now: float) -> str | None:
    """Why the staging folder ``path`` is stale (left by a render that is gone), or
    ``None`` while it may belong to a live render. Call with ``_stages_lock`` held."""
    m = _STAGE_NAME.fullmatch(path.name)
    if m is not None and m.group("host") == _host_tag():
        pid = int(m.group("pid"))
        if pid == os.getpid():  # ours: live only while a render of this process uses it
            return None if path in _live_stages else f"left by an earlier process {pid}"
        return None if _process_alive(pid) else f"its render, process {pid}, is gone"
    try:
        idle = now - _newest_change(path)
    except OSError:
        return None
    if idle < STALE_UNOWNED_AFTER_S:
        return None
    owner = f"a render on host {m.group('host')}" if m is not None else "an earlier version's render"
    return f"left by {owner}, unchanged for {idle / 3600:.0f} h"


def _remove_stale_stages(out_dir: Path, progress: Callable[[str], None] | None) -> list[Path]:
    """Remove the staging folders in ``out_dir`` left by renders that were killed
    (see module doc); returns them. Never one a live render owns."""
    removed = []
    now = time.time()
    with _stages_lock:
        try:
            entries = [e for e in os.scandir(out_dir) if e.name.startswith(_STAGE_PREFIX) and e.is_dir(follow_symlinks=False)]
        except OSError:
            return []
        for entry in entries:
            path = Path(entry.path)
            why = _stale_stage(path, now)
            if why is None:
                continue
            shutil.rmtree(path, ignore_errors=True)
            if not path.exists():
                removed.append(path)
                if progress:
                    progress(f"removed {path}: a staging folder of an interrupted render ({why})")
    return removed


def _new_stage(out_dir: Path) -> Path:
    """Create this render's staging folder, named after its owner, and record it as live."""
    with _stages_lock:
        stage = Path(tempfile.mkdtemp(prefix=f"{_STAGE_PREFIX}{_host_tag()}-{os.getpid()}-", dir=out_dir))
        _live_stages.add(stage)
    return stage
