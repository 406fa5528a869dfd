"""Noise-aware comparison of two results files: per-case changes with confidence intervals, verdicts and gates.

``python -m harness compare BASE NEW --fail step_time:5%`` matches cases by id
and, per case, compares the **per-step samples** of both files (not only their
medians): the change of the median step time with its confidence interval
(a two-sample bootstrap with a fixed seed, :func:`harness.stats.compare_samples`)
and a verdict, ``slower``, ``faster`` or ``no significant change``; likewise
the bubble ratio's change in percentage points. A gate fails a case only when
its change is past the limit **and** significant at the chosen confidence
(``--confidence``, default 0.95). ``sim`` runs are exact: their changes are the
medians' changes, with no interval.

A case flagged ``unstable`` or ``contended`` (:mod:`harness.run.stability`) in
either file is reported with its flag and not gated, unless ``strict``: its
change would say more about the machine than about the schedule. A case with
fewer than :data:`harness.stats.MIN_SAMPLES` steps in a file (a short fixed
window) cannot be tested: its gate reads the change alone, and the summary says
how many were gated so.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from harness.errors import ConfigError, InputFormatError
from harness.stats import Change, compare_samples

__all__ = [
    "CaseDelta",
    "Comparison",
    "Threshold",
    "cases_by_id",
    "compare_documents",
    "mismatch_groups",
    "parse_confidence",
    "parse_threshold",
    "parse_thresholds",
    "pipeline_mismatches",
    "setup_mismatches",
]

_METRICS = {"step_time": "median step time", "bubble": "bubble ratio (idle share of total)"}
#: The unit a gate's LIMIT is read in, per metric: the step time's change is
#: relative (percent), the bubble's absolute (percentage points: it is a share).
_UNIT = {"step_time": "%", "bubble": "pp"}


@dataclass(frozen=True)
class Threshold:
    """A ``compare`` gate: ``metric`` (``step_time`` or ``bubble``) may grow by at most
    ``limit``: relative for ``step_time`` (0.05 = 5%), absolute for ``bubble``
    (0.02 = 2 percentage points of the idle share)."""

    metric: str
    limit: float

    def describe(self) -> str:
        """The gate as the command line takes it: ``step_time +5%``, ``bubble +2pp``."""
        return f"{self.metric} +{round(100 * self.limit, 9):g}{_UNIT[self.metric]}"


#: A gate's LIMIT: a plain decimal number in ASCII digits (no ``1_0``, exponent or other scripts' digits).
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")


def parse_threshold(text: str) -> Threshold:
    """Parse a ``--fail METRIC:LIMIT`` gate.

    LIMIT is a number in the metric's unit, optionally with the unit spelled
    out (in any case): percent for ``step_time`` (``step_time:5`` =
    ``step_time:5%``, the median step time may grow by 5% of the base),
    percentage points for ``bubble`` (``bubble:2`` = ``bubble:2pp`` =
    ``bubble:2PP`` = ``bubble:2%``, the bubble ratio may grow from e.g. 10% to
    12% of the step time). The number is plain ASCII decimal (``2``, ``2.5``,
    ``.5``), a leading ``+`` allowed (``+2`` is 2, as the gates are shown:
    ``bubble +2pp``); ``-0`` is 0.

    Raises:
        ConfigError: unknown metric; a LIMIT that is not a plain decimal
            number, negative, NaN or infinite; ``pp`` on ``step_time`` (a
            relative change); a bubble LIMIT over 100 points (the bubble is a
            share of the step).
    """
    m = re.fullmatch(r"\s*([^:\s][^:]*?)\s*:\s*(.*?)\s*", text)
    if not m or not m.group(2):
        raise ConfigError(f"--fail {text!r}: expected METRIC:LIMIT like step_time:5% or bubble:2pp")
    metric, limit = m.group(1), m.group(2)
    if metric not in _METRICS:
        raise ConfigError(f"--fail {text!r}: unknown metric {metric!r}; valid: {', '.join(_METRICS)}")
    unit = next((u for u in ("pp", "%") if limit.lower().endswith(u)), "")
    number = limit[: len(limit) - len(unit)].strip()
    usage = ("step_time takes percent (step_time:5 or step_time:5%)" if metric == "step_time"
             else "bubble takes percentage points (bubble:2 or bubble:2pp)")
    if number.lower().lstrip("+-") in ("nan", "inf", "infinity"):
        raise ConfigError(f"--fail {text!r}: the limit must be a finite number, got {number!r}; {usage}")
    if not _DECIMAL.fullmatch(number):
        raise ConfigError(f"--fail {text!r}: {number!r} is not a plain decimal number (digits 0-9, like 5 or 2.5); {usage}")
    value = float(number) + 0.0  # + 0.0: -0 is 0, not a gate shown as "+-0"
    if value < 0:
        raise ConfigError(f"--fail {text!r}: the limit must not be negative (it is how much the {metric} may grow); {usage}")
    if metric == "step_time" and unit == "pp":
        raise ConfigError(f"--fail {text!r}: the step time's change is relative, in percent, not percentage points; {usage}")
    if metric == "bubble" and value > 100:
        raise ConfigError(f"--fail {text!r}: the bubble is a share of the step time (0 to 100%), so it cannot grow by "
                          f"more than 100 percentage points; {usage}")
    return Threshold(metric, value / 100)


def parse_thresholds(texts: Sequence[str]) -> list[Threshold]:
    """Parse every ``--fail`` gate (:func:`parse_threshold`); the same gate given twice
    counts once.

    Raises:
        ConfigError: a gate does not parse, or one metric is given two different
            limits (which one would hold is not for us to guess).
    """
    gates: dict[str, tuple[str, Threshold]] = {}
    for text in texts:
        t = parse_threshold(text)
        seen = gates.get(t.metric)
        if seen is None:
            gates[t.metric] = (text, t)
        elif seen[1] != t:
            raise ConfigError(f"--fail {seen[0]!r} and --fail {text!r}: two limits for {t.metric} "
                              f"({seen[1].describe()} and {t.describe()}); give one")
    return [t for _, t in gates.values()]


def cases_by_id(doc: dict[str, Any], source: str = "results") -> dict[str, dict[str, Any]]:
    """The cases of a results document keyed by id.

    Raises:
        InputFormatError: two cases share an id (names the id, both positions
            and ``source``): a comparison would silently pick one of them.
    """
    out: dict[str, dict[str, Any]] = {}
    first: dict[str, int] = {}
    for i, case in enumerate(doc["cases"]):
        cid = str(case["id"])
        if cid in out:
            raise InputFormatError(
                f"{source}: case id {cid!r} appears more than once (cases #{first[cid]} and #{i}); "
                "cases are matched by id, so each id must be unique"
            )
        out[cid] = case
        first[cid] = i
    return out


def _workload(case: dict[str, Any]) -> str:
    device = case.get("device")
    return str(device.get("workload") or "") if isinstance(device, dict) else ""


def _cases_in_both(base: dict[str, Any], new: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """``(base case, new case)`` for each case id in both documents, in base order."""
    new_cases = {str(c["id"]): c for c in new["cases"]}
    for b in base["cases"]:
        n = new_cases.get(str(b["id"]))
        if n is not None:
            yield b, n


def _setup_diffs(b: dict[str, Any], n: dict[str, Any]) -> str | None:
    diffs = []
    if b.get("backend") != n.get("backend"):
        diffs.append(f"backend {b.get('backend')!r} vs {n.get('backend')!r}")
    if _workload(b) != _workload(n):
        diffs.append(f"workload {_workload(b) or '(none)'!r} vs {_workload(n) or '(none)'!r}")
    return "; ".join(diffs) or None


def _pipeline_diffs(b: dict[str, Any], n: dict[str, Any]) -> str | None:
    bs, ns = b.get("schedule") or {}, n.get("schedule") or {}
    shown = {"name": "schedule"}  # a schedule of another name under one case id (an env-driven case) is another pipeline
    return "; ".join(f"{shown.get(key, key)} {bs.get(key)} vs {ns.get(key)}" for key in ("name", "p", "m", "v")
                     if bs.get(key) != ns.get(key)) or None


_SETUP_NOTE = "ran on different setups ({}); its deltas compare the setups, not the schedule"
_PIPELINE_NOTE = "ran a different pipeline in the two files ({}); its deltas compare different pipelines, not two runs of one"


def mismatch_groups(base: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """Setup and pipeline mismatches grouped by what differs: ``[(note, [case ids])]``, so a
    difference shared by many cases is said once (see :func:`setup_mismatches`)."""
    groups: dict[str, list[str]] = {}
    for b, n in _cases_in_both(base, new):
        for template, diff in ((_SETUP_NOTE, _setup_diffs(b, n)), (_PIPELINE_NOTE, _pipeline_diffs(b, n))):
            if diff:
                groups.setdefault(template.format(diff), []).append(str(b["id"]))
    return list(groups.items())


def setup_mismatches(base: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Per case id in both documents whose backend or workload differs, a note
    saying how (such a comparison measures the setup, not the schedule)."""
    return [f"{b['id']}: {_SETUP_NOTE.format(d)}" for b, n in _cases_in_both(base, new) if (d := _setup_diffs(b, n))]


def pipeline_mismatches(base: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Per case id in both documents whose pipeline differs (``p``, ``m`` or ``v``), a
    note saying how: its deltas then compare two different pipelines, not two runs of one."""
    return [f"{b['id']}: {_PIPELINE_NOTE.format(d)}" for b, n in _cases_in_both(base, new) if (d := _pipeline_diffs(b, n))]

def parse_confidence(text: str) -> float:
    """``--confidence``: ``0.95``, ``0.99`` or ``99%``; returns the fraction.

    Raises:
        ConfigError: not a number strictly between 0 and 1 (0 % and 100 %).
    """
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(%?)\s*", text)
    value = float(m.group(1)) / (100 if m.group(2) else 1) if m else None
    if value is None or not 0.5 <= value < 1:
        raise ConfigError(f"--confidence {text!r}: expected a level from 0.5 to below 1, like 0.95 or 99%")
    return value


def step_samples(case: dict[str, Any]) -> list[float]:
    """A case's per-step times (ns): ``metrics.per_step[*].step_time_ns``, else the steps' spans,
    else its median alone (a file without per-step figures)."""
    per_step = (case.get("metrics") or {}).get("per_step")
    if isinstance(per_step, list) and per_step:
        return [float(s["step_time_ns"]) for s in per_step]
    starts, ends = case.get("step_start_ns") or [], case.get("step_end_ns") or []
    if starts and len(starts) == len(ends):
        return [float(e - s) for s, e in zip(starts, ends)]
    return [float(case["metrics"]["step_time_median_ns"])]


def bubble_samples(case: dict[str, Any]) -> list[float]:
    """A case's per-step bubble ratios (idle share of total), else its median alone."""
    per_step = (case.get("metrics") or {}).get("per_step")
    if isinstance(per_step, list) and per_step:
        return [float(s["bubble_ratio"]) for s in per_step]
    return [float(case["metrics"]["bubble_ratio"])]


def case_flags(case: dict[str, Any]) -> list[str]:
    """``"unstable: reason"`` lines of a case's ``flags`` field (empty when absent)."""
    flags = case.get("flags")
    if not isinstance(flags, list):
        return []
    return [f"{f.get('kind')}: {f.get('reason')}" for f in flags if isinstance(f, dict)]


@dataclass(frozen=True)
class CaseDelta:
    """One case in both documents: its changes, verdict, flags and failed gates.

    Attributes:
        case_id: the case's id.
        base_step_ns, new_step_ns: median step times (ns).
        base_bubble, new_bubble: median bubble ratios (idle share of total).
        step: relative change of the median step time with its CI; ``None``
            when the base median is 0 (no relative change exists).
        bubble: change of the median bubble ratio in absolute terms (a share).
        flags: ``"base unstable: ..."`` / ``"new contended: ..."`` lines.
        gated: whether the gates applied to this case (not when flagged, unless strict).
        failed: the metrics whose gate it failed.
        untested: the gate read the change alone, without a significance test (too few
            steps in a file, :data:`harness.stats.MIN_SAMPLES`).
    """

    case_id: str
    base_step_ns: float
    new_step_ns: float
    base_bubble: float
    new_bubble: float
    step: Change | None
    bubble: Change
    flags: tuple[str, ...] = ()
    gated: bool = True
    failed: tuple[str, ...] = ()
    untested: bool = False

    @property
    def step_change(self) -> float | None:
        """Relative change of the median step time (0.05 = 5% slower); ``None`` when the
        base step time is 0 (a relative change of 0 cannot be computed)."""
        return None if self.step is None else self.step.estimate

    @property
    def bubble_change(self) -> float:
        """Absolute change of the bubble ratio (0.02 = 2 percentage points more idle)."""
        return self.bubble.estimate

    @property
    def verdict(self) -> str:
        """``slower``, ``faster``, ``no significant change`` or ``not enough samples`` for the
        step time; ``n/a`` when the base step time is 0."""
        if self.step is None:
            return "n/a"
        return {"larger": "slower", "smaller": "faster"}.get(self.step.verdict, self.step.verdict)


@dataclass(frozen=True)
class Comparison:
    """What :func:`compare_documents` found.

    Attributes:
        deltas: per case in both documents, in base order.
        only_base, only_new: ids in one document only.
        confidence: the level of every interval.
        strict: whether flagged cases were gated too.
    """

    deltas: list[CaseDelta]
    only_base: list[str]
    only_new: list[str]
    confidence: float
    strict: bool

    @property
    def failed(self) -> list[CaseDelta]:
        return [d for d in self.deltas if d.failed]

    @property
    def ungated(self) -> list[CaseDelta]:
        """Flagged cases the gates did not apply to."""
        return [d for d in self.deltas if not d.gated]

    def __iter__(self) -> Iterator[Any]:  # (deltas, only_base, only_new), as the function returned before
        return iter((self.deltas, self.only_base, self.only_new))


def _exact(case: dict[str, Any]) -> bool:
    return case.get("backend") == "sim"


def _delta(cid: str, b: dict[str, Any], n: dict[str, Any], thresholds: Sequence[Threshold],
           confidence: float, strict: bool) -> CaseDelta:
    bm, nm = b["metrics"], n["metrics"]
    exact = _exact(b) and _exact(n)
    base_step, new_step = float(bm["step_time_median_ns"]), float(nm["step_time_median_ns"])
    step: Change | None = None
    if base_step:
        bs, ns = step_samples(b), step_samples(n)
        if min(bs) <= 0:  # a 0 ns step in some sample: compare the medians as given
            step = compare_samples([base_step], [new_step], confidence=confidence, exact=True)
        else:
            step = compare_samples(bs, ns, confidence=confidence, exact=exact)
    bubble = compare_samples(bubble_samples(b), bubble_samples(n), relative=False, confidence=confidence, exact=exact)
    flags = tuple([f"base {f}" for f in case_flags(b)] + [f"new {f}" for f in case_flags(n)])
    gated = strict or not flags
    failed = []

    def past(change: Change, limit: float) -> bool:  # too few steps to test: the change alone decides, as it is said
        return change.estimate > limit + 1e-12 and change.verdict in ("larger", "not enough samples")

    if gated:
        for t in thresholds:
            if t.metric == "step_time":
                if step is None:  # base step time 0: any growth from it is past every relative limit
                    if new_step > base_step:
                        failed.append(t.metric)
                elif past(step, t.limit):
                    failed.append(t.metric)
            elif past(bubble, t.limit):
                failed.append(t.metric)
    untested = bool(thresholds) and any(c is not None and c.verdict == "not enough samples" for c in (step, bubble))
    return CaseDelta(cid, base_step, new_step, float(bm["bubble_ratio"]), float(nm["bubble_ratio"]), step, bubble,
                     flags, gated, tuple(failed), untested)


def compare_documents(
    base: dict[str, Any], new: dict[str, Any], thresholds: Sequence[Threshold],
    base_name: str = "base", new_name: str = "new", *, confidence: float = 0.95, strict: bool = False,
) -> Comparison:
    """Match cases by id and compare their per-step samples.

    Args:
        base, new: results documents.
        thresholds: the gates.
        base_name, new_name: name the documents in errors.
        confidence: level of the intervals and of the significance a gate needs.
        strict: gate flagged (unstable, contended) cases too.

    Returns:
        A :class:`Comparison`; it also unpacks as ``(deltas, only_base, only_new)``.

    Raises:
        InputFormatError: a document holds two cases with the same id.
    """
    base_cases = cases_by_id(base, base_name)
    new_cases = cases_by_id(new, new_name)
    deltas = [_delta(cid, b, new_cases[cid], thresholds, confidence, strict) for cid, b in base_cases.items() if cid in new_cases]
    only_base = [c for c in base_cases if c not in new_cases]
    only_new = [c for c in new_cases if c not in base_cases]
    return Comparison(deltas, only_base, only_new, confidence, strict)

