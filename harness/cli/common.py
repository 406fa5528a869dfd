"""What every subcommand of the command line shares: the one-line error output and checks of common options."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from harness.errors import ConfigError

__all__ = ["check_out", "err", "package_version", "positive_count"]


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
