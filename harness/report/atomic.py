"""Atomic file writes: a failed or interrupted write never leaves a half file
and never destroys the previous version.

Content goes to a temporary file in the target's folder, is flushed and
fsynced, then renamed over the target with :func:`os.replace` (atomic on
POSIX and Windows within one file system).
"""

from __future__ import annotations

import errno
import io
import json
import os
import re
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from harness.errors import ConfigError, DiskFullError

__all__ = ["FULL_ERRNOS", "atomic_binary", "atomic_write", "atomic_write_bytes", "atomic_write_json", "atomic_write_text",
           "disk_full_error", "ensure_writable_dir", "first_missing", "open_direct", "remove_empty_tree", "stream_fd", "write_all", "write_target"]

#: The errors of a write that found no room: a full device, a used-up quota, the file-size limit.
FULL_ERRNOS = frozenset(e for e in (errno.ENOSPC, getattr(errno, "EDQUOT", None), errno.EFBIG) if e is not None)


def _noted(exc: OSError, path: Path, needed: int | None = None) -> None:
    """Note on ``exc`` the file it was raised writing (a failed ``write`` names none) and its size."""
    if exc.filename is None:
        exc.filename = str(path)
    if needed is not None and getattr(exc, "needed_bytes", None) is None:
        exc.needed_bytes = needed  # type: ignore[attr-defined]


def disk_full_error(exc: BaseException, folder: Path, shown: Path | None = None, needed: int | None = None,
                    kept: str = "") -> DiskFullError | None:
    """The one clear error for a write that found no room (``exc`` an ``OSError`` of :data:`FULL_ERRNOS`),
    or ``None`` for any other error.

    Args:
        exc: the error the write raised.
        folder: the folder the user named (a report folder).
        shown: the file as the user would find it (default: ``exc.filename``).
        needed: its size in bytes where known (default: what :func:`atomic_write_bytes` noted); a
            negative number is an estimate of ``-needed`` bytes ("about").
        kept: what was left as it was, said at the end (e.g. "the report already there is unchanged").
    """
    import shutil

    if not isinstance(exc, OSError) or exc.errno not in FULL_ERRNOS:
        return None
    path = str(shown if shown is not None else (exc.filename or folder))
    needed = needed if needed is not None else getattr(exc, "needed_bytes", None)
    size = f" (about {-needed:,} bytes)" if needed and needed < 0 else f" ({needed:,} bytes)" if needed else ""
    needed = abs(needed) if needed else needed
    if exc.errno == errno.EFBIG:
        why = f"{path}{size} is larger than this process may write"
        try:
            import resource

            limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
            if limit != resource.RLIM_INFINITY:
                why += f" (its file-size limit, ulimit -f, is {limit:,} bytes)"
        except (ImportError, OSError, ValueError):  # pragma: no cover - no resource module (Windows)
            pass
    else:
        try:
            free = f"; {shutil.disk_usage(folder if Path(folder).exists() else Path(folder).parent).free:,} bytes free"
        except OSError:
            free = ""
        what = "the disk quota is used up" if exc.errno == getattr(errno, "EDQUOT", None) else "no space left on its device"
        why = f"{what} writing {path}{size}{free}"
    message = f"cannot write into {folder}: {why}" + (f"; {kept}" if kept else "")
    return DiskFullError(message, str(folder), path, needed)


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


#: The names of this process's open file descriptors: ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N``, ``/proc/self/fd/N``.
_STREAMS = {"/dev/stdout": 1, "/dev/stderr": 2}
_FD_NAME = re.compile(r"^/(?:dev|proc/self)/fd/(\d+)$")


def stream_fd(path: Path) -> int | None:
    """The open file descriptor ``path`` names (``/dev/stdout``: 1, ``/dev/fd/3``: 3), or ``None``: such a path is
    written into the open stream, never reopened (which would truncate a file the shell redirected it to, even
    with ``>>``) nor replaced."""
    name = os.path.abspath(path)
    if name in _STREAMS:
        return _STREAMS[name]
    found = _FD_NAME.match(name)
    return int(found.group(1)) if found else None


def open_direct(path: Path) -> IO[bytes]:
    """``path`` opened for writing as it is (a device, a pipe, an open stream: :func:`write_target`'s direct targets);
    an open stream is written at its own position, after what this process has already printed to it."""
    fd = stream_fd(path)
    if fd is None:
        return open(path, "wb")
    for stream in (sys.stdout, sys.stderr):  # what was printed first comes first
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return os.fdopen(os.dup(fd), "wb")


def _mode_of(path: Path) -> int:
    """The permission bits a file replacing ``path`` gets: the file's own where it exists, else 0o644."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o644


def write_target(path: Path) -> tuple[Path, bool]:
    """Where a write of ``path`` goes, and whether it goes there directly rather than through a temp file.

    A symbolic link is followed: the file it names is replaced, and the link stays a link (its mode kept).
    Something that exists and is not a regular file (a device such as ``/dev/null``, a named pipe), and an
    open stream (``/dev/stdout``, ``/dev/fd/N``: :func:`stream_fd`, whatever the shell pointed it to), is
    written directly, as a shell's ``>`` writes it: no temp file can be renamed over it, and it must stay
    what it is (:func:`open_direct`).

    Raises:
        IsADirectoryError: ``path`` is a folder. NotADirectoryError: a folder above it is a file (names it).
    """
    if stream_fd(path) is not None:
        return Path(path), True
    try:
        st = os.stat(path)  # follows links
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        above = next((p for p in Path(path).parents if p.exists()), None)
        raise NotADirectoryError(errno.ENOTDIR, f"{above} is a file, not a folder", str(path)) from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a folder; give a file's path", str(path))
    if st is None:
        above = next((p for p in Path(path).parents if p.exists() or p.is_symlink()), None)
        if above is not None and not above.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, f"{above} is a file, not a folder", str(path))
    if st is not None and not stat.S_ISREG(st.st_mode):
        return Path(path), True
    return (Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)), False


@contextmanager
def atomic_binary(path: Path) -> Iterator[IO[bytes]]:
    """A binary temp file in ``path``'s folder that, when the block ends without error, is flushed,
    fsynced and renamed over ``path``; on any error (or interruption) it is removed and ``path`` is
    left as it was. The one write path of :func:`atomic_write`, :func:`atomic_write_bytes` and
    :func:`harness.report.output.open_output`.

    Raises:
        OSError: the folder is not writable or the disk is full; as :func:`write_target` (a symbolic link is
            followed, a device or a named pipe written directly).
    """
    path, direct = write_target(path)  # before a temp file is made beside it for nothing
    if direct:  # a device, a pipe or an open stream: written as it is, no rename
        try:
            with open_direct(path) as fh:
                yield fh
                fh.flush()
        except OSError as exc:
            _noted(exc, path)
            raise
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:  # no room for the temp file itself: name the file it was for
        exc.filename = str(path)
        raise
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _mode_of(path))
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            _noted(exc, path)
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
    try:
        with atomic_binary(path) as fh:
            view = memoryview(data)
            for lo in range(0, len(view), 1 << 20):  # 1 MiB at a time: measured faster than one write of 100 MB here
                fh.write(view[lo:lo + (1 << 20)])
    except OSError as exc:
        _noted(exc, path, len(data))
        raise
    return path


def atomic_write_text(path: Path, text: str) -> Path:
    """Atomically write ``text`` (UTF-8) to ``path``; a write that fails notes the bytes it needed on the
    error (as :func:`atomic_write_bytes`)."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def first_missing(path: Path) -> Path | None:
    """The outermost folder of ``path`` (itself or an ancestor) that does not exist yet, or ``None``."""
    missing = None
    for p in (path, *path.parents):
        if p.exists():
            break
        missing = p
    return missing


def remove_empty_tree(root: Path) -> None:
    """Remove ``root`` and the folders under it if none of them holds a file (a failed
    write leaves no empty folder behind); anything else is left alone."""
    if not root.is_dir() or any(p.is_file() or p.is_symlink() for p in root.rglob("*")):
        return
    for p in sorted(root.rglob("*"), reverse=True):
        p.rmdir()
    root.rmdir()


def write_all(files: dict[Path, bytes], kept: str, folder: Path | None = None) -> list[Path]:
    """Write every file of ``files`` or none: each goes to a temporary file beside its target first, and only
    when all are written are they renamed into place (one ``os.replace`` each, in order).

    Args:
        files: per target path, its bytes.
        kept: what a failure leaves as it was, said at the end of its error (e.g. "nothing of this run
            was written, and the files already there are unchanged").
        folder: the folder the user named, for the error (default: the failing file's own).

    Returns:
        The paths written, in order.

    Raises:
        DiskFullError: no room for one of them (a full device or quota, the file-size limit): names the
            folder, the file and its bytes; no target has changed, no temporary file is left, and folders
            this call created are removed again.
        OSError: another write error, with the same guarantees; as :func:`write_target` (before anything is
            written: a symbolic link is followed, a device or a named pipe written directly, after every temporary
            file is written and before any is renamed into place).
    """
    targets = {Path(path): write_target(Path(path)) for path in files}  # refused before any temp file is made beside it
    created = [m for m in {first_missing(target.parent) for target, direct in targets.values() if not direct} if m is not None]
    temps: list[tuple[str, Path]] = []
    done = False
    try:
        for path, data in files.items():
            target, direct = targets[Path(path)]
            if direct:
                continue
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
                temps.append((tmp, target))
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.chmod(tmp, _mode_of(target))
            except OSError as exc:
                raise _write_failed(exc, folder if folder is not None else target.parent, Path(path), len(data), kept) from None
        for path, data in files.items():  # devices and pipes: written directly, before any file is renamed into place
            target, direct = targets[Path(path)]
            if direct:
                try:
                    with open_direct(target) as fh:
                        fh.write(data)
                except OSError as exc:
                    raise _write_failed(exc, target.parent, Path(path), len(data), kept) from None
        for tmp, target in temps:
            os.replace(tmp, target)
        done = True
        return [Path(p) for p in files]
    finally:
        if not done:
            for tmp, _ in temps:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
            for root in created:
                remove_empty_tree(root)


def _write_failed(exc: OSError, folder: Path, path: Path, needed: int, kept: str) -> Exception:
    """What :func:`write_all` raises for ``exc``, raised writing ``path`` (``needed`` bytes): the one disk-full error, or
    ``exc`` naming the file asked for (not the temp file beside it) and its size."""
    full = disk_full_error(exc, folder, path, needed, kept=kept)
    if full is not None:
        return full
    exc.filename, exc.filename2 = str(path), None
    _noted(exc, path, needed)
    return exc


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
