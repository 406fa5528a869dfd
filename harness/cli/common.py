"""What every subcommand of the command line shares: the one-line error output and checks of common options."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from harness.errors import ConfigError

__all__ = ["case_named", "check_out", "err", "package_version", "positive_count", "say_publish_note"]


def package_version() -> str:
    """The installed version of the ``pipeline-harness`` distribution, or ``"unknown"``
    when it is not installed (e.g. run from a source tree without ``pip install``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pipeline-harness")
    except PackageNotFoundError:
        return "unknown (not installed)"


def err(msg: str) -> None:
    """Print ``msg`` on stderr: the command line's one channel for errors, warnings and notes."""
    print(msg, file=sys.stderr)


def check_out(out: str | None, default: str | None = None) -> None:
    """Refuse an empty ``--out`` (it would mean the current folder, unasked)."""
    if out is not None and not out.strip():
        raise ConfigError("--out is empty; give a folder" + (f", or leave it out to {default}" if default else ""))


def positive_count(what: str) -> Any:
    """An argparse ``type``: a whole number of at least 1 ``what`` (e.g. ``"pipeline ranks"``), refused in
    those words, so ``-p 0`` is named as the option (a case's error would name its ``stages`` field).

    The returned function raises :class:`argparse.ArgumentTypeError`, which argparse reports as
    ``argument -p: pipeline ranks must be at least 1, got 0``.
    """

    def count(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number of {what}, got {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{what} must be at least 1, got {value}")
        return value

    return count


def _disk_names(cases: list[dict[str, Any]]) -> dict[int, str]:
    """Per case (by position), the stem of its files in a report folder (``traces/<stem>.json``,
    ``hta/<stem>/``), as :func:`harness.report.render.write_report` names them."""
    from harness.report.render import case_filename

    taken: set[str] = set()
    return {i: case_filename(str(c.get("id", f"#{i + 1}")), taken) for i, c in enumerate(cases)}


def _as_disk_name(wanted: str) -> str:
    """``wanted`` without a report folder's path and file suffix: ``traces/a.json.gz`` -> ``a``."""
    name = wanted.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    for suffix in (".json.gz", ".json"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def case_named(cases: list[dict[str, Any]], wanted: str, source: str, option: str = "--case") -> dict[str, Any]:
    """The one case ``wanted`` names: its id as written, else its label, else the short form the report
    and the pytest summary show (the id after its ``file::``, e.g. ``test_schedule_zoo[ZB-H1]``), else its name
    on disk in a report folder (``1F1B_p=4_m=8`` for the id ``1F1B p=4 m=8``; ``traces/1F1B_p=4_m=8.json``
    and ``hta/1F1B_p=4_m=8/`` too).

    Raises:
        ConfigError: no case, or several, answer to ``wanted`` (lists them, or the ids; names ``option``).
    """
    disk = _disk_names(cases)
    stem = _as_disk_name(wanted)
    for match in (lambda i, c: c["id"] == wanted, lambda i, c: c.get("label") == wanted,
                  lambda i, c: str(c["id"]).split("::", 1)[-1] == wanted, lambda i, c: disk[i] == stem):
        found = [c for i, c in enumerate(cases) if match(i, c)]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            shown = ", ".join(str(c["id"]) for c in found[:20])
            raise ConfigError(f"{option} {wanted!r} names {len(found)} cases in {source}: {shown}; give the full id")
    ids = [str(c["id"]) for c in cases]
    raise ConfigError(f"no case {wanted!r} in {source} (by id, label, short label or name on disk); its case ids: "
                      + (", ".join(ids[:20]) + (f", ... ({len(ids) - 20} more)" if len(ids) > 20 else "") if ids else "(none)"))


def say_publish_note(files: Any) -> None:
    """The command's last line, where it applies: this command's report replaced one another run published
    into the folder while it ran, or another run still writing there will replace it
    (:class:`harness.report.render.ReportFiles`, :mod:`harness.report.concurrent`)."""
    notes = [n for n in (files.replaced, files.still_ours()) if n]
    if notes:
        err("warning: " + "; ".join(notes))
