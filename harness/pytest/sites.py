"""Where in a user's files a case was declared, run or failed: ``file:line`` for messages (glue of
:mod:`harness.pytest.plugin`), never a line of the harness, pytest or the standard library."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from types import FrameType, TracebackType

import pluggy
import pytest

from harness.errors import HarnessError
from harness.pytest.terminal import shown_path

__all__ = ["frame_site", "raised_at", "user_site"]

# Frames a user's case never lives in: the harness and the pytest machinery that calls the test.
# The standard library too: dataclasses.replace(cost, ...) raises inside dataclasses.py.
_NOT_USER_DIRS = tuple(Path(inspect.getfile(obj)).resolve().parent for obj in (HarnessError, pytest.Item, pluggy.PluginManager, dataclasses))


def user_site(filename: str, lineno: int) -> str | None:
    """``file:line`` for messages, or ``None`` for the harness's or pytest's own code."""
    if filename.startswith("<"):
        return None
    path = Path(filename).resolve()
    if any(path.is_relative_to(d) for d in _NOT_USER_DIRS):
        return None
    return f"{shown_path(path)}:{lineno}"


def frame_site(frame: FrameType) -> str | None:
    """``file:line`` of ``frame`` where it is a user's, else ``None``."""
    return user_site(frame.f_code.co_filename, frame.f_lineno)


def raised_at(tb: TracebackType | None) -> str | None:
    """The innermost user-code ``file:line`` of a traceback (the line in the case that led to the error)."""
    site = None
    while tb is not None:
        site = user_site(tb.tb_frame.f_code.co_filename, tb.tb_lineno) or site
        tb = tb.tb_next
    return site
