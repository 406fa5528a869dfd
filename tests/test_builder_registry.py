"""Registering builders, and what build_schedule checks around any builder (built-in or a user's)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from harness.case import PipelineCase
from harness.errors import ConfigError, ScheduleError
from harness.schedule import build_schedule, builders, register, registry
from harness.schedule.model import Schedule
from harness.schedule.registry import builder_info


@pytest.fixture(autouse=True)
def _own_registry(monkeypatch):
    """Each test registers into a copy: the builders it adds do not leak into other tests."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_ALIASES", dict(registry._ALIASES))


def test_a_taken_name_or_alias_is_refused_naming_the_owner():
    with pytest.raises(ConfigError, match=r"^cannot register (tests\.)?test_builder_registry\..*\.fthenb as schedule 'FThenB': "
                                          r"the name 'FThenB' is taken by 'FThenB' \(harness\.schedule\.builders\.fthenb\); "
                                          r"register it under another name$"):
        @register("FThenB")
        def fthenb(p, m):
            return build_schedule("1F1B", p, m)
    with pytest.raises(ConfigError, match=r"the name 'pipedream flush' is taken by '1F1B'"):
        @register("Mine", "pipedream flush")
        def mine(p, m):
            return build_schedule("1F1B", p, m)
    assert builder_info("FThenB").build is builders.fthenb and "Mine" not in registry.schedule_names()


def test_registering_the_same_function_again_is_allowed():
    # A module that registers its builder may be imported twice (pytest's in-process runs do).
    def again(p, m):
        """Plain 1F1B under another name."""
        return build_schedule("1F1B", p, m)

    register("Again")(again)
    register("Again")(again)
    assert builder_info("again").summary == "Plain 1F1B under another name."  # the docstring's first line
    assert build_schedule("Again", 2, 3).num_ranks == 2


def test_a_builder_must_return_a_schedule_of_the_sizes_asked_for():
    @register("TooWide")
    def too_wide(p, m):
        return build_schedule("1F1B", p + 1, m)

    @register("NotOne")
    def not_one(p, m):
        return 42

    @register("WrongV", takes_chunks=True)
    def wrong_v(p, m, v):
        return build_schedule("Interleaved1F1B", p, m, 2)

    with pytest.raises(ConfigError, match=r"^the builder of schedule 'TooWide' \((tests\.)?test_builder_registry\..*too_wide\) returned a "
                                          r"schedule with p=3, m=2, v=1 when asked for p=2, m=2; a builder must return a Schedule"):
        build_schedule("TooWide", 2, 2)
    with pytest.raises(ConfigError, match=r"returned int 42 when asked for p=2, m=2;"):
        build_schedule("NotOne", 2, 2)
    with pytest.raises(ConfigError, match=r"returned a schedule with p=2, m=4, v=2 when asked for p=2, m=4, v=3;"):
        build_schedule("WrongV", 2, 4, 3)


@pytest.mark.parametrize("name", [None, 5, b"1F1B"])
def test_a_schedule_name_must_be_a_string(name):
    with pytest.raises(ConfigError, match=rf"^a schedule name must be a string such as '1F1B', got {name!r}$"):
        build_schedule(name, 2, 2)


def test_numpy_integers_are_sizes_and_become_ints():
    s = build_schedule("Interleaved1F1B", np.int64(2), np.int32(4), np.int64(2))
    assert (s.num_ranks, s.num_microbatches, s.chunks_per_rank) == (2, 4, 2) and type(s.num_microbatches) is int
    case = PipelineCase("1F1B", stages=np.int64(4), microbatches=np.uint8(8), chunks=np.int16(1))
    assert (case.stages, case.microbatches, case.chunks) == (4, 8, 1) and {type(case.stages), type(case.microbatches)} == {int}
    with pytest.raises(ConfigError, match=r"the number of ranks p must be a positive integer, got np\.float64\(4\.0\)"):
        build_schedule("1F1B", np.float64(4), 8)


@pytest.mark.parametrize("m", [True, 1.0, 0, "2"])
def test_a_schedule_needs_a_positive_integer_micro_batch_count(m):
    with pytest.raises(ScheduleError, match=rf"^schedule 'x': the number of micro-batches must be a positive integer, got {m!r}$"):
        Schedule.from_text("x", [["0F0", "0B0"]], m)


@pytest.mark.parametrize(("args", "count"), [
    (("FThenB", 2, 10_000_000), "40,000,000"),
    (("ZB-H1", 8, 1_000_000), "24,000,000"),  # a split backward: three jobs per stage and micro-batch
    (("Interleaved1F1B", 64, 1024, 1000), "131,072,000"),
    (("1F1B", 10**20, 1), "2e+20"),
    (("ZB-V", 2000, 2000), "24,000,000"),  # the V placement's two chunks per rank count, though v is not given
    (("DualPipeV", 2000, 4000), "32,000,000"),
])
def test_schedules_beyond_the_job_limit_are_refused_before_building(args, count):
    with pytest.raises(ConfigError, match=rf"would have about {re.escape(count)} jobs, more than the 20,000,000 this harness builds"):
        build_schedule(*args)


def test_the_job_limit_can_be_raised(monkeypatch):
    monkeypatch.setattr(registry, "MAX_JOBS", 10)
    with pytest.raises(ConfigError, match=r"1F1B' with p=2, m=3, v=1 would have about 12 jobs, more than the 10 this"):
        build_schedule("1F1B", 2, 3)
    monkeypatch.setattr(registry, "MAX_JOBS", 12)
    assert build_schedule("1F1B", 2, 3).num_jobs == 12


def test_options_never_name_the_sizes_and_the_listing_shows_only_options(capsys):
    from harness.cli import main

    @register("Mine")
    def mine(p, m, **options):
        """My schedule."""
        return build_schedule("1F1B", p, m)

    @register("MineV", takes_chunks=True)
    def mine_v(p, m, v, depth: int = 1):
        return build_schedule("Interleaved1F1B", p, m, v)

    with pytest.raises(ConfigError, match=r"test_builder_registry.py:[0-9]+: case 'Mine p=2 m=2': schedule 'Mine': option 'p' is "
                                          r"one of its sizes \(p, m\), which come from the case's stages, microbatches and chunks, "
                                          r"not from options$"):
        PipelineCase("Mine", stages=2, microbatches=2, options={"p": 3}).build()
    with pytest.raises(ConfigError, match=r"option 'v' is one of its sizes \(p, m, v\)"):
        PipelineCase("MineV", stages=2, microbatches=2, chunks=2, options={"v": 3}).build()
    assert PipelineCase("Mine", stages=2, microbatches=2, options={"anything": 1}).build().num_ranks == 2
    assert main(["schedules"]) == 0
    out = capsys.readouterr().out
    assert "Mine\n    My schedule.\n    sizes: p, m; options: any keyword\n" in out
    assert "MineV\n    \n    sizes: p, m, v; options: depth=1\n" in out
