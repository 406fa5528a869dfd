"""Closed-form figures from the literature, each with its source.

All functions take ``p`` (pipeline ranks), ``m`` (micro-batches per step) and,
where relevant, ``v`` (chunks per rank) and per-job times; they assume uniform
stages and free communication, the setting of the papers.
"""

from __future__ import annotations

from harness.errors import ConfigError

__all__ = ["bubble_fraction_fthenb", "bubble_fraction_1f1b", "makespan_fthenb", "peak_inflight", "theoretical_bubble"]


def _check(p: int, m: int) -> None:
    if p < 1 or m < 1:
        raise ConfigError(f"p and m must be positive, got p={p}, m={m}")


def bubble_fraction_fthenb(p: int, m: int) -> float:
    """Idle share of total time for FThenB/GPipe: ``(p-1)/(m+p-1)``.

    Normalization: idle time over ``p x makespan`` ("idle share of total").
    Source: Huang et al., GPipe, arXiv:1811.06965, §2.3 (bubble
    ``O((K-1)/(M+K-1))``); Narayanan et al., SC'21, arXiv:2104.04473, §2.2.1.
    """
    _check(p, m)
    return (p - 1) / (m + p - 1)


def bubble_fraction_1f1b(p: int, m: int) -> float:
    """Idle share of total time for 1F1B: ``(p-1)/(m+p-1)``, the same as GPipe.

    Source: Narayanan et al., SC'21, arXiv:2104.04473, §2.2.1 ("the bubble is
    the same as GPipe's; 1F1B only lowers the activations held").
    """
    return bubble_fraction_fthenb(p, m)


def makespan_fthenb(p: int, m: int, t_f: float, t_b: float) -> float:
    """Step time of FThenB and 1F1B with uniform stages: ``(m+p-1)(t_f+t_b)``.

    Source: arXiv:2104.04473, §2.2.1 (bubble ``(p-1)(t_f+t_b)`` plus ideal
    ``m(t_f+t_b)``).
    """
    _check(p, m)
    return (m + p - 1) * (t_f + t_b)


def peak_inflight(schedule: str, p: int, m: int, rank: int) -> int | None:
    """Published peak in-flight micro-batches on ``rank`` (activations held), or ``None``.

    FThenB: ``m``; 1F1B: ``min(m, p-s)`` (arXiv:2104.04473 §2.2.1; PyTorch
    ``Schedule1F1B`` warm-up).
    """
    key = schedule.lower()
    if key in ("fthenb", "gpipe"):
        return m
    if key == "1f1b":
        return min(m, p - rank)
    return None


def theoretical_bubble(schedule: str, p: int, m: int, v: int = 1) -> float | None:
    """Idle share of total time predicted for ``schedule``, or ``None`` when no closed
    form is known here (the schedule library adds more)."""
    key = schedule.lower()
    if v == 1 and key in ("fthenb", "gpipe", "1f1b"):
        return bubble_fraction_fthenb(p, m)
    return None
