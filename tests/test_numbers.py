"""Milliseconds for people (harness.report.numbers.ms_text): at least three significant digits."""

from __future__ import annotations

import pytest

from harness.report.numbers import ms_text


@pytest.mark.parametrize(("ns", "decimals", "text"), [
    (1_390_000_000, 1, "1,390.0"), (14_400_000, 1, "14.4"), (5_194_221, 1, "5.19"), (144_000, 1, "0.144"), (54, 1, "0.0000540"),
    (649_278, 2, "0.649"), (5_194_221, 3, "5.194"), (0, 1, "0.0"), (1_000_000, 1, "1.00"), (99_999_999, 1, "100.0"),
])
def test_three_significant_digits_at_least(ns: float, decimals: int, text: str) -> None:
    assert ms_text(ns, decimals) == text
