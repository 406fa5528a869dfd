"""The review page's colours: one per job kind (its legend, :func:`kind_table`), per stage for the busy bars,
and for kinds outside the standard ones (e.g. imported ``lr`` jobs).
"""

from __future__ import annotations

from typing import Any

__all__ = ["KINDS", "KIND_COLOURS"]


KINDS = ("F", "B", "I", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "OPT")

KIND_COLOURS = {
    "F": "#4e9a5b", "B": "#3d6fb6", "I": "#5fa8d3", "W": "#9b7fc9",
    "SEND_F": "#b0b0b0", "RECV_F": "#8c8c8c", "SEND_B": "#c9b26b", "RECV_B": "#a8924f", "OPT": "#e0a030",
    # PyTorch's data-parallel jobs: in the legend only where a case has them (not in KINDS)
    "UNSHARD": "#d81b60", "RESHARD": "#4a148c", "REDUCE_GRAD": "#9e5a00",
}

#: Per-stage colours of the busy bars: none is a job kind's colour (CIE76 ΔE at least 15 from every kind's,
#: at least 30 from the data-parallel kinds', which share the compute stream: tests/test_page_fixes.py).
STAGE_COLOURS = ("#264653", "#e76f51", "#f2e394", "#6d597a", "#2a9d8f", "#b56576", "#8d6e63", "#457b9d")

#: Colours for kinds outside :data:`KINDS` (e.g. imported ``lr`` jobs), in order of appearance.
EXTRA_COLOURS = ("#c45a5a", "#6b8e23", "#8b5a8b", "#2f8f8f", "#b8860b", "#708090")

def kind_table(cases: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Legend entries: the standard kinds, then any other kind found in ``cases``."""
    names = list(KINDS)
    for case in cases:
        for k in dict.fromkeys(case["jobs"]["kind"]):
            if k not in names:
                names.append(str(k))
    extra = [n for n in names if n not in KIND_COLOURS]
    colours = {**KIND_COLOURS, **{n: EXTRA_COLOURS[i % len(EXTRA_COLOURS)] for i, n in enumerate(extra)}}
    return [{"name": n, "colour": colours[n]} for n in names]
