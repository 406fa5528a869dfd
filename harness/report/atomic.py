"""Atomic file writes: a failed or interrupted write never leaves a half file
and never destroys the previous version.

Content goes to a temporary file in the target's folder, is flushed and
fsynced, then renamed over the target with :func:`os.replace` (atomic on
POSIX and Windows within one file system).
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from harness.errors import ConfigError

__all__ = ["atomic_binary", "atomic_write", "atomic_write_bytes", "atomic_write_json", "atomic_write_text", "ensure_writable_dir"]


def ensure_writable_dir(path: Path, what: str = "report directory") -> Path:
    """Create ``path`` if needed and check a file can be written in it; ``what`` names
    the folder in messages.

    Raises:
        ConfigError: the folder cannot be created or written, or the path (or a
            folder above it) is a file (names it and why).
    """
    for p in (path, *path.parents):
        if p.exists() or p.is_symlink():
            if not p.is_dir():
                if p == path:
                    raise ConfigError(f"{what} {str(path)!r} is a file, not a folder")
                raise ConfigError(f"{what} {str(path)!r} cannot be created: {str(p)!r} is a file, not a folder")
            break
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-check-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigError(f"{what} {str(path)!r} is not writable: {exc.strerror or exc}") from None
    return path


@contextmanager
def atomic_binary(path: Path) -> Iterator[IO[bytes]]:
    """A binary temp file in ``path``'s folder that, when the block ends without error, is flushed,
    fsynced and renamed over ``path``; on any error (or interruption) it is removed and ``path`` is
    left as it was. The one write path of :func:`atomic_write`, :func:`atomic_write_bytes` and
    :func:`harness.report.output.open_output`.

    Raises:
        OSError: the folder is not writable or the disk is full.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write(path: Path, write: Callable[[IO[str]], None]) -> Path:
    """Write a text file atomically: ``write(fh)`` fills a temp file that then replaces ``path``.

    Raises:
        OSError: the folder is not writable or the disk is full; the previous
            file, if any, is left untouched and the temp file is removed.
    """
    with atomic_binary(path) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", newline="\n")
        try:
            write(text)
            text.flush()
        finally:
            text.detach()
    return path


def atomic_write_bytes(path: Path, data: bytes) -> Path:
    """Atomically write ``data`` to ``path`` (as :func:`atomic_write`).

    Raises:
        OSError: see :func:`atomic_write`.
    """
    with atomic_binary(path) as fh:
        view = memoryview(data)
        for lo in range(0, len(view), 1 << 20):  # 1 MiB at a time: measured faster than one write of 100 MB here
            fh.write(view[lo:lo + (1 << 20)])
    return path


def atomic_write_text(path: Path, text: str) -> Path:
    """Atomically write ``text`` (UTF-8) to ``path``."""

    def write(fh: IO[str]) -> None:
        fh.write(text)

    return atomic_write(path, write)


def atomic_write_json(path: Path, doc: Any, indent: int | None = None) -> Path:
    """Atomically write ``doc`` as JSON to ``path`` (NaN and infinities refused).

    Compact documents (``indent=None``) go through orjson
    (:func:`harness.report.jsontext.dumps_document`: UTF-8, same document once parsed).

    Raises:
        ValueError: a NaN or infinite float in ``doc``. OSError: see :func:`atomic_write`.
    """
    if indent is None:
        from harness.report.jsontext import dumps_document

        return atomic_write_bytes(path, dumps_document(doc))
    return atomic_write(path, lambda fh: json.dump(doc, fh, indent=indent, allow_nan=False, separators=(",", ":") if indent is None else None))
