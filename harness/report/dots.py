"""Dots of a chart set apart, so that no dot hides another.

A chart's dots sit where their values put them; two dots that would overlap (their centres nearer than
one dot's width plus its outline) are moved apart, the later one to the nearest free place: first
sideways (within a band the caller gives, e.g. the slot of a category on a categorical axis), then,
where the band is full, up or down by whole dot widths. Dots that overlap nothing stay where they are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["DOT_GAP", "set_apart"]

#: The least distance between two dots' centres, px: two radii of 3.5-4 px plus their outlines
#: (up to 1.8 px wide, half of it outside the circle), so each dot is whole and visible.
DOT_GAP = 9.0


def _candidates(gap: float, reach: int) -> list[tuple[float, float]]:
    """Offsets ``(dx, dy)`` in px on a grid of ``gap``, nearest first, sideways before up or down."""
    grid = [(i * gap, j * gap) for i in range(-reach, reach + 1) for j in range(-reach, reach + 1)]
    return sorted(grid, key=lambda o: (abs(o[1]) > 0, math.hypot(o[0], 2 * o[1]), o[1], o[0]))


def set_apart(points: Sequence[tuple[float, float]], bands: Sequence[tuple[float, float]] | None = None,
              box: tuple[float, float, float, float] | None = None, gap: float = DOT_GAP) -> list[tuple[float, float]]:
    """Positions for ``points`` (centres, px) so that no two are nearer than ``gap``.

    Points are placed in order: each keeps its position where it is ``gap`` or more from every point
    placed before it, else takes the nearest free offset on a grid of ``gap`` (sideways first, staying
    inside its band, then up or down by whole steps), inside ``box``.

    Args:
        points: the dots' centres ``(x, y)``, px.
        bands: per point, the horizontal range ``(x0, x1)`` (px) its centre may be moved within
            (the category it belongs to); ``None``: anywhere inside ``box``.
        box: ``(left, top, right, bottom)``, px, the plot area no centre leaves; ``None``: unbounded.
        gap: the least distance between two centres, px (:data:`DOT_GAP`).

    Returns:
        The new centres, one per point, in order. A point for which no free place is found within
        20 steps of ``gap`` either way keeps its own (never the case on the page's charts: that takes
        hundreds of dots on one spot).

    Raises:
        ValueError: ``bands`` is not one per point, or ``gap`` is not positive.
    """
    if gap <= 0:
        raise ValueError(f"set_apart: gap must be positive, got {gap!r} px")
    if bands is not None and len(bands) != len(points):
        raise ValueError(f"set_apart: {len(bands)} bands for {len(points)} points")
    left, top, right, bottom = box if box is not None else (-math.inf, -math.inf, math.inf, math.inf)
    cells: dict[tuple[int, int], list[tuple[float, float]]] = {}  # placed centres by grid cell of size gap
    offsets = _candidates(gap, 20)
    out: list[tuple[float, float]] = []

    def free(x: float, y: float) -> bool:
        cx, cy = math.floor(x / gap), math.floor(y / gap)
        return all(math.hypot(x - a, y - b) >= gap - 1e-9
                   for i in (cx - 1, cx, cx + 1) for j in (cy - 1, cy, cy + 1) for a, b in cells.get((i, j), ()))

    for k, (x0, y0) in enumerate(points):
        lo, hi = bands[k] if bands is not None else (left, right)
        lo, hi = max(lo, left), min(hi, right)
        spot = (x0, y0)
        for dx, dy in offsets:
            x, y = x0 + dx, y0 + dy
            if (lo <= x <= hi or dx == 0) and top <= y <= bottom and free(x, y):
                spot = (x, y)
                break
        out.append(spot)
        cells.setdefault((math.floor(spot[0] / gap), math.floor(spot[1] / gap)), []).append(spot)
    return out
