"""Times for people: milliseconds with enough digits to tell a tiny model's steps apart."""

from __future__ import annotations

import math

__all__ = ["ms_text"]


def ms_text(ns: float, decimals: int = 1) -> str:
    """``ns`` (nanoseconds) in milliseconds, with thousands separators, at least ``decimals`` decimal places and at
    least three significant digits: ``1,390.0``, ``14.4``, ``5.19``, ``0.144``, ``0.0000540`` (never ``0.0`` for a
    step that took time); 0 and negative values with ``decimals`` places."""
    ms = ns / 1e6
    if ms <= 0 or not math.isfinite(ms):
        return f"{ms:,.{decimals}f}"
    return f"{ms:,.{max(decimals, min(9, 2 - math.floor(math.log10(ms))))}f}"
