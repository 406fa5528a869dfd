"""The command line's values for ``import-torch``: ``--steps``, ``--clock-offsets``, and negative
numbers as option values (``--clock-offsets -5,5``), which argparse would take for an option.

Each parser raises :class:`~harness.errors.ConfigError` with a message naming the flag and
showing a value it accepts.
"""

from __future__ import annotations

import re

from harness.errors import ConfigError

__all__ = ["NEGATIVE_VALUE_OPTIONS", "clock_offsets_list", "int_list", "join_negative_values", "steps_list"]


#: Options whose value may start with ``-`` (negative numbers in a list, e.g. ``--clock-offsets -5,5``).
NEGATIVE_VALUE_OPTIONS = ("--clock-offsets",)


def join_negative_values(argv: list[str]) -> list[str]:
    """``["--clock-offsets", "-5,5"]`` -> ``["--clock-offsets=-5,5"]``: argparse takes a value that
    starts with ``-`` (and is not one plain negative number) for an option, and would refuse it."""
    out: list[str] = []
    k = 0
    while k < len(argv):
        a = argv[k]
        if a in NEGATIVE_VALUE_OPTIONS and k + 1 < len(argv) and re.fullmatch(r"-\d[\d,\s-]*", argv[k + 1]):
            out.append(f"{a}={argv[k + 1]}")
            k += 2
            continue
        out.append(a)
        k += 1
    return out


def steps_list(text: str) -> list[int]:
    """``--steps``: ``"2,3"`` -> ``[2, 3]``; ``"2:5"`` -> ``[2, 3, 4]`` (``A:B``: A up to B, B left out).

    Raises:
        ConfigError: not whole numbers, or an empty or reversed range.
    """
    steps = int_list(text, "--steps")
    if ":" in text and not steps:
        a, b = text.split(":", 1)
        raise ConfigError(f"--steps {text!r}: the range {a.strip()}:{b.strip()} is "
                          + ("reversed" if int(a) > int(b) else "empty")
                          + f" (A:B takes steps A up to B, B left out: e.g. {min(int(a), int(b))}:{max(int(a), int(b)) + 1})")
    return steps


def clock_offsets_list(text: str) -> list[int]:
    """``--clock-offsets``: ``"0,-3000"`` -> ``[0, -3000]`` (ns per rank, in rank order).

    Raises:
        ConfigError: not a comma-separated list of whole numbers of ns, or one of 2**62 ns or more.
    """
    try:
        offsets = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--clock-offsets {text!r}: expected one whole number of ns per rank, comma-separated, "
                          "e.g. 0,-5000 (a list that starts with a minus sign works as '--clock-offsets -5,5' or "
                          "'--clock-offsets=-5,5')") from None
    big = next((x for x in offsets if abs(x) >= 1 << 62), None)
    if big is not None:  # the times it shifts must stay within 64 bits of ns
        raise ConfigError(f"--clock-offsets {text!r}: {big} ns is more than 2**62 ns (about 146 years); give each rank's offset in ns")
    return offsets


def int_list(text: str, flag: str) -> list[int]:
    """``"2,3"`` -> ``[2, 3]``; ``"2:5"`` -> ``[2, 3, 4]``.

    Raises:
        ConfigError: not whole numbers (names the flag).
    """
    try:
        if ":" in text:
            a, b = text.split(":", 1)
            return list(range(int(a), int(b)))
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: expected whole numbers, e.g. 2,3 or 2:4") from None
