"""Pause Python's cyclic garbage collector while building large acyclic structures.

Building a schedule, its comm pass or a plan allocates hundreds of thousands of
tuples while millions of tracked objects are alive; each allocation burst lets
the collector traverse all of them again, which costs more than the building
itself. None of these builders make reference cycles, so nothing is lost by
collecting once afterwards, as the collector's normal thresholds do.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from functools import wraps
from typing import ParamSpec, TypeVar

__all__ = ["gc_paused"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def gc_paused(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Decorator: run ``fn`` with the cyclic collector disabled (if it was
    enabled), re-enabling it afterwards even on an exception."""

    @wraps(fn)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        if not gc.isenabled():
            return fn(*args, **kwargs)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.enable()

    return run
