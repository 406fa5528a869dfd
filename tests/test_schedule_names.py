"""How schedule names are matched: case and ``-``/``_`` do not matter, any other character is refused
naming the closest schedule (harness.schedule.registry.builder_info and register)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.case import PipelineCase
from harness.cli import main
from harness.errors import ConfigError
from harness.schedule import build_schedule, register, registry
from harness.schedule.registry import builder_info, schedule_names

RULE = "a schedule name is ASCII letters, digits, '-' and '_' (case, '-' and '_' do not matter)"


@pytest.fixture
def own_registry(monkeypatch):
    """Registrations go into a copy, so they do not outlive the test."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_ALIASES", dict(registry._ALIASES))


@pytest.mark.parametrize(("given", "canonical"), [
    ("zb-h1", "ZB-H1"), ("ZB_H1", "ZB-H1"), ("zbh1", "ZB-H1"), ("Zb-_h1", "ZB-H1"), (" ZB-H1\t", "ZB-H1"),
    ("gpipe", "FThenB"), ("FILL_DRAIN", "FThenB"), ("eager_1f1b", "Eager-1F1B"), ("interleaved_1f1b", "Interleaved1F1B"),
    ("dualpipe_v", "DualPipeV"), ("v_half", "V-Half"), ("pipedream_flush", "1F1B"),
])
def test_case_dashes_and_underscores_do_not_matter(given: str, canonical: str) -> None:
    assert builder_info(given).name == canonical


def test_every_built_in_name_and_alias_is_found_as_written() -> None:
    pairs = [(alias, name) for name in schedule_names() for alias in (name, *builder_info(name).aliases)]
    assert [builder_info(alias).name for alias, _ in pairs] == [name for _, name in pairs]
    assert ("PipeDream-Flush", "1F1B") in pairs and ("ZB1P-interleaved", "InterleavedZeroBubble") in pairs
    assert len(pairs) >= 33  # 12 built-in schedules, 21 aliases


@given(st.data())
def test_any_case_and_dashes_find_a_schedule_and_a_space_inside_names_it(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(schedule_names()))
    alias = data.draw(st.sampled_from((name, *builder_info(name).aliases)))
    flips = data.draw(st.lists(st.booleans(), min_size=len(alias), max_size=len(alias)))
    seps = data.draw(st.lists(st.sampled_from(["", "", "-", "_"]), min_size=len(alias) + 1, max_size=len(alias) + 1))
    spelled = "".join(sep + (ch.swapcase() if flip else ch) for sep, ch, flip in zip(seps, alias, flips)) + seps[-1]
    assert builder_info(spelled).name == name
    cut = data.draw(st.integers(1, len(alias) - 1))
    spaced = alias[:cut] + " " + alias[cut:]
    with pytest.raises(ConfigError) as info:
        builder_info(spaced)
    assert str(info.value) == f"schedule name {spaced!r} holds a space inside: {RULE}; did you mean {name!r}?"


@pytest.mark.parametrize(("given", "what", "closest"), [
    ("1 f 1 b", "a space inside", "1F1B"),
    ("ZB H1", "a space inside", "ZB-H1"),
    ("Eager 1F1B", "a space inside", "Eager-1F1B"),
    ("dual pipe v", "a space inside", "DualPipeV"),
    ("zb.h1", "the character '.'", "ZB-H1"),
    ("zb\th1", "the character '\\t'", "ZB-H1"),
    ("1F1B!", "the character '!'", "1F1B"),
    ("zb h.1", "the characters ' ', '.'", "ZB-H1"),
    ("1F1B²", "the character '²'", "1F1B"),
    ("GPipe/2", "the character '/'", "FThenB"),
])
def test_other_characters_are_refused_naming_the_closest_schedule(given: str, what: str, closest: str) -> None:
    with pytest.raises(ConfigError) as info:
        builder_info(given)
    assert str(info.value) == f"schedule name {given!r} holds {what}: {RULE}; did you mean {closest!r}?"


def test_a_refused_name_close_to_none_lists_the_schedules() -> None:
    with pytest.raises(ConfigError) as info:
        builder_info("q q")
    message = str(info.value)
    assert message.startswith(f"schedule name 'q q' holds a space inside: {RULE}; valid schedules: 1F1B, DualPipe, DualPipeV, Eager-1F1B, FThenB, ")
    assert "did you mean" not in message and all(name in message for name in schedule_names())


def test_empty_and_unknown_names_keep_their_message() -> None:
    for name in ("", "   ", "1F1C"):
        with pytest.raises(ConfigError, match=rf"^unknown schedule {re.escape(repr(name))}; valid schedules: 1F1B \(PipeDream-Flush, OneFOneB\), "):
            builder_info(name)


def test_build_schedule_and_a_case_refuse_a_spaced_name() -> None:
    with pytest.raises(ConfigError, match=r"^schedule name '1 f 1 b' holds a space inside: .*; did you mean '1F1B'\?$"):
        build_schedule("1 f 1 b", 4, 8)
    case = PipelineCase("1 f 1 b", stages=4, microbatches=8)
    with pytest.raises(ConfigError, match=r"case '1 f 1 b p=4 m=8': schedule name '1 f 1 b' holds a space inside: .*did you mean '1F1B'\?$"):
        case.build()
    assert PipelineCase("zb_h1", stages=4, microbatches=8).build().name == "ZB-H1"


def test_show_refuses_a_spaced_name_in_one_line(capsys) -> None:
    assert main(["show", "1 f 1 b", "-p", "4", "-m", "8"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: schedule name '1 f 1 b' holds a space inside: {RULE}; did you mean '1F1B'?\n"


def test_register_refuses_a_name_no_lookup_would_find(own_registry) -> None:
    def mine(p, m):
        return build_schedule("1F1B", p, m)

    with pytest.raises(ConfigError) as info:
        register("My Schedule")(mine)
    assert re.fullmatch(r"cannot register (tests\.)?test_schedule_names\..*mine as schedule 'My Schedule': the name 'My Schedule' holds a "
                        r"space inside; a schedule name is ASCII letters, digits, '-' and '_', e.g. 'My-Schedule'", str(info.value))
    with pytest.raises(ConfigError, match=r"the name 'v2\.0' holds the character '\.'; a schedule name is ASCII letters, digits, '-' and '_', "
                                          r"e\.g\. 'v2-0'$"):
        register("Mine", "v2.0")(mine)
    with pytest.raises(ConfigError, match=r"the name '\?\?' holds the character '\?'; a schedule name is ASCII letters, digits, '-' and '_'$"):
        register("??")(mine)
    assert "My Schedule" not in schedule_names() and "Mine" not in schedule_names()
    register("My_Schedule-2")(mine)
    assert builder_info("my-schedule_2").name == "My_Schedule-2" and build_schedule("MYSCHEDULE2", 2, 3).num_microbatches == 3


def test_a_case_without_sizes_names_a_refused_schedule_name_first():
    from harness.case import PipelineCase
    from harness.model.cost import FixedCost

    # it asked for stages and microbatches, and refused the name only once they were given
    with pytest.raises(ConfigError, match=r"case 'zb\.h1': schedule name 'zb\.h1' holds the character '\.'.*did you mean 'ZB-H1'\?$"):
        PipelineCase("zb.h1", cost=FixedCost.ms(F=1, B=2)).compute_schedule()
    with pytest.raises(ConfigError, match=r"case 'nosuch': unknown schedule 'nosuch'; valid schedules: 1F1B"):
        PipelineCase("nosuch", cost=FixedCost.ms(F=1, B=2)).compute_schedule()
    with pytest.raises(ConfigError, match=r"case '1F1B': give stages \(p\) and microbatches \(m\) for schedule '1F1B'$"):
        PipelineCase("1F1B", cost=FixedCost.ms(F=1, B=2)).compute_schedule()
