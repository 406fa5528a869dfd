"""Moved to :mod:`harness.analytics` (analysis that reads a plan and a cost model lives beside
:mod:`harness.metrics`, not inside the schedule package). This alias keeps old imports working;
it imports nothing from above the schedule package until a name is asked for."""

from __future__ import annotations

import warnings
from typing import Any


def __getattr__(name: str) -> Any:
    import harness.analytics as moved

    warnings.warn("harness.schedule.analytics moved to harness.analytics; import it from there", DeprecationWarning, stacklevel=2)
    return getattr(moved, name)
