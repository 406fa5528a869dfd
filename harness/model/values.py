"""Checks and conversions of the values a cost model is given: durations in whole ns below
:data:`MAX_DURATION_NS`, byte counts, per-stage lists, transfer times.

Shared by every shipped cost model (:mod:`harness.model.cost`, :mod:`harness.model.transformer`) and
by the optional cost-model fields of :mod:`harness.model.overlap` and :mod:`harness.model.data_parallel`,
so that each field is checked in the same words wherever it is given.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from harness.errors import ConfigError

# Optional cost-model methods and the fields that answer them, each in its concept's module.

__all__ = ["MAX_DURATION_NS"]


_NS_PER_MS = 1_000_000

#: Every duration a cost model gives is below this (2**53 ns, about 104 days): times
#: stay exact in float64 and a step's sums far below int64's range; longer is a unit mistake.
MAX_DURATION_NS = 1 << 53

_MAX_DURATION_TEXT = "2**53 ns, about 104 days"

def _shown(value: object) -> str:
    """``repr(value)``, shortened for a huge integer (``10**400`` would fill the screen)."""
    text = repr(value)
    return f"{text[:8]}... ({len(text)} digits)" if isinstance(value, int) and len(text) > 24 else text

def _positive(name: str, value: float, allow_zero: bool = False, duration: bool = False, whole: bool = False) -> None:
    """A number >= 0 (> 0 unless ``allow_zero``), finite and below 2**53; a ``duration`` (ns) below
    :data:`MAX_DURATION_NS`, said so in those words; a ``whole`` number (a count) an integer, not ``8.0``."""
    if whole:  # any integer type (numpy.int64 from a sweep), not bool; the constructors make it an int
        if not isinstance(value, numbers.Integral) or isinstance(value, bool):
            raise ConfigError(f"cost model: {name} must be a whole number, got {value!r}")
    elif not isinstance(value, (int, float)) or isinstance(value, bool) or (isinstance(value, float) and math.isnan(value)):
        raise ConfigError(f"cost model: {name} must be a number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ConfigError(f"cost model: {name} must be {'non-negative' if allow_zero else 'positive'}, got {value!r}")
    if value >= MAX_DURATION_NS:  # also inf; compared exactly, so 10**400 is no OverflowError
        if duration:
            raise ConfigError(f"cost model: {name} must be below {MAX_DURATION_NS} ns ({_MAX_DURATION_TEXT}), got {_shown(value)}")
        raise ConfigError(f"cost model: {name} must be below 2**53 = {MAX_DURATION_NS}, got {_shown(value)}")

def _transfer_ns(nbytes: int, latency_ns: int, gbytes_per_s: float | None) -> int:
    if gbytes_per_s is None:
        return latency_ns
    return latency_ns + round(nbytes / gbytes_per_s)  # GB/s == bytes/ns

def _check_transfer(nbytes: int, latency_ns: int, gbytes_per_s: float | None) -> None:
    """A send/receive (latency + bytes / bandwidth) lasts less than :data:`MAX_DURATION_NS`."""
    if gbytes_per_s is None:
        return
    ns = latency_ns + nbytes / gbytes_per_s  # a float: inf rather than an OverflowError from round()
    if ns >= MAX_DURATION_NS:
        raise ConfigError(
            f"cost model: a send/receive of {nbytes} bytes at {gbytes_per_s!r} GB/s with {latency_ns} ns latency would last "
            f"{ns:.3g} ns; transfers must last below {MAX_DURATION_NS} ns ({_MAX_DURATION_TEXT})"
        )

def _bandwidth(value: float | None) -> None:
    if value is not None:
        _positive("p2p_gbytes_per_s (gigabytes per second; divide Gbit/s by 8)", value)

PerStage = int | tuple[int, ...]

def _per_stage_values(name: str, value: Any, duration: bool, allow_zero: bool = False, signed: bool = False) -> PerStage:
    """``value`` as an int or a tuple of ints (a list or tuple of numbers given), each checked.

    Raises:
        ConfigError: an empty list, an entry that is not a number or out of range (names the entry).
    """
    if isinstance(value, (list, tuple)):
        if not value:
            raise ConfigError(f"cost model: {name} is an empty list; give one value per stage, or one number for all")
        out = []
        for k, v in enumerate(value):
            if signed:
                _signed_bytes(f"{name}[{k}] (stage {k})", v)
            else:
                _positive(f"{name}[{k}] (stage {k})", v, allow_zero=allow_zero, duration=duration, whole=not duration)
            out.append(_whole_ns(f"{name}[{k}] (stage {k})", v, allow_zero) if duration else int(v))
        return tuple(out)
    if signed:
        _signed_bytes(name, value)
    else:
        _positive(name, value, allow_zero=allow_zero, duration=duration, whole=not duration)
    return _whole_ns(name, value, allow_zero) if duration else int(value)

def _whole_ns(name: str, value: float, allow_zero: bool) -> int:
    """A duration (ns) given as a number, rounded to the nearest ns as :meth:`FixedCost.ms` rounds.

    Raises:
        ConfigError: a positive duration that rounds to 0 ns.
    """
    ns = int(round(value))  # noqa: RUF046 - a numpy scalar rounds to a numpy integer
    if ns == 0 and value:
        raise ConfigError(f"cost model: {name} must be {'0 or ' if allow_zero else ''}at least 1 ns, got {value!r} (it rounds to 0 ns)")
    return ns

def _set_whole_ns(obj: Any, name: str) -> None:
    """Check the duration field ``name`` of the frozen dataclass ``obj`` (ns, >= 0) and store it rounded
    to the nearest ns (:func:`_whole_ns`), so the model runs and describes the value it holds.

    Raises:
        ConfigError: not a number, negative, too large, or positive but rounding to 0 ns.
    """
    value = getattr(obj, name)
    _positive(name, value, allow_zero=True, duration=True)
    object.__setattr__(obj, name, _whole_ns(name, value, allow_zero=True))

def _signed_bytes(name: str, value: Any) -> None:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise ConfigError(f"cost model: {name} must be a whole number of bytes, got {value!r}")
    if abs(int(value)) >= MAX_DURATION_NS:
        raise ConfigError(f"cost model: {name} must be below 2**53 bytes in size, got {_shown(value)}")

def _pick(value: PerStage, k: int) -> int:
    return value if isinstance(value, int) else value[k]
