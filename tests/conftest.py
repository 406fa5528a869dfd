"""Shared helpers for the harness's own tests."""

from __future__ import annotations

import numpy  # noqa: F401  # loaded once, before pytester's in-process runs snapshot sys.modules (numpy cannot be imported twice)
import pytest

from harness.model.cost import FixedCost
from harness.plan.build import build_plan
from harness.records import RunRecords
from harness.run.device.sim import SimDevice
from harness.run.executor import execute
from harness.schedule.model import Schedule

MS = 1_000_000


def run_sim(schedule: Schedule, cost: FixedCost | None = None, steps: range = range(0, 1)) -> RunRecords:
    """Run ``schedule`` on the sim device and return its records."""
    return execute(build_plan(schedule), SimDevice(), cost or FixedCost.ms(F=1, B=2), steps)


def timeline(records: RunRecords, step: int | None = None) -> dict[str, tuple[int, int]]:
    """``{"2F0": (start_ns, end_ns)}`` for one step (default: the first recorded)."""
    step = records.steps[0] if step is None else step
    base = records.step_start_ns[records.steps.index(step)]
    return {j.label: (j.start_ns - base, j.end_ns - base) for j in records.jobs if j.step == step}


@pytest.fixture(autouse=True)
def _same_terminal_everywhere(request, monkeypatch):
    """Give in-process pytest runs (``pytester``) one terminal, wherever the tests run.

    pytest cuts the short test summary to the terminal width and repeats whole messages only when it
    sees a CI (``CI`` or ``BUILD_NUMBER`` set); tests that match pytest's output would otherwise pass
    in one shell and fail in another.
    """
    if "pytester" in request.fixturenames:
        monkeypatch.setenv("COLUMNS", "200")
        monkeypatch.delenv("CI", raising=False)
        monkeypatch.delenv("BUILD_NUMBER", raising=False)


@pytest.fixture
def ms() -> int:
    return MS
