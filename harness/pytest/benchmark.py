"""pytest glue for pytest-benchmark: pipeline cases' step times as benchmark figures.

:mod:`harness.pytest.plugin`'s hooks call these: :func:`add_benchmark_fixture` gives every pipeline
case pytest-benchmark's ``benchmark`` fixture, timed by :data:`replay_clock` (the run's own
clock, so the statistics are the measured step times); :func:`feed_benchmark` hands it a
case's step times; :func:`_quiet_unfed_benchmark` keeps the fixture quiet for a case that never
ran; :func:`_no_baseline_no_gate` lifts ``--benchmark-compare-fail`` when there is no baseline
yet; :class:`_BenchmarkRegressionGuard` turns a tripped gate into a failed run;
:func:`fit_benchmark_columns` narrows pytest-benchmark's table to the terminal where the user did not
choose its columns. Without pytest-benchmark none of it acts.
"""

from __future__ import annotations

import inspect
from collections.abc import Generator
from typing import Any

import pytest

from harness.analysis.result import CaseResult

_BENCHMARK_FIXTURE = pytest.StashKey[Any]()  # that fixture, kept for an interrupted case (see harness.pytest.plugin's pytest_runtest_call)
_FEEDS_BENCHMARK = pytest.StashKey[bool]()  # the plugin gave the item pytest-benchmark's fixture
_FED_BENCHMARK = pytest.StashKey[bool]()  # ... and handed it a case's step times
_NO_BASELINE = pytest.StashKey[bool]()  # --benchmark-compare-fail found no baseline: the gate was lifted
_FITTED_COLUMNS = pytest.StashKey[str]()  # the line that says which of pytest-benchmark's columns were kept to fit the terminal


class _ReplayClock:
    """A pytest-benchmark timer that returns the run's own clock (seconds), so
    the benchmark statistics are the measured step times, not host wall time.
    Named so that ``--benchmark-json`` records it as an importable name,
    ``harness.pytest.plugin.replay_clock``."""

    def __init__(self, name: str) -> None:
        self.now = 0.0
        self.__name__ = self.__qualname__ = name  # pytest-benchmark writes a timer by its __name__

    def __call__(self) -> float:
        return self.now


#: Recorded as ``harness.pytest.plugin.replay_clock``, the name :mod:`harness.pytest.plugin` imports it under.
replay_clock = _CLOCK = _ReplayClock("harness.pytest.plugin.replay_clock")


def feed_benchmark(request: pytest.FixtureRequest, result: CaseResult) -> None:
    """Hand a case's step times (seconds, on the run's own clock) and its figures to the
    ``benchmark`` fixture :func:`add_benchmark_fixture` gave its test, through
    ``benchmark.pedantic`` timed by :data:`replay_clock`; a test without it is left alone."""
    if not request.node.stash.get(_FEEDS_BENCHMARK, False):
        return
    step_times = [s.step_time_ns / 1e9 for s in result.metrics.steps]
    request.node.stash[_FED_BENCHMARK] = True
    bench = request.getfixturevalue("benchmark")  # set up with the item, timer = _CLOCK
    it = iter(step_times)

    def one_step() -> None:
        _CLOCK.now += next(it)

    m, th = result.metrics, result.theory
    bench.extra_info.update({
        "schedule": result.schedule.name,
        "stages": result.num_ranks,
        "microbatches": result.num_microbatches,
        "chunks": result.chunks,
        "backend": result.records.backend,
        "workload": result.records.device.get("workload"),
        "bubble_ratio": m.bubble_ratio,
        "bubble_ratio_theory": th.get("bubble_ratio"),
        "bubble_normalization": m.normalization,
        "peak_inflight": m.peak_inflight,
        "clock": "step times on the run's own clock (device events or simulated time), in seconds",
        "window": result.records.window.describe() if result.records.window else None,
        "step_time_ci_s": [m.step_time_stats.ci_low / 1e9, m.step_time_stats.ci_high / 1e9] if m.step_time_stats else None,
        "flags": [f"{f.kind}: {f.reason}" for f in result.flags],
    })
    bench.pedantic(one_step, rounds=len(step_times), iterations=1, warmup_rounds=0)


def add_benchmark_fixture(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every pipeline case pytest-benchmark's fixture, timed by the run's own clock,
    so ``--benchmark-only``/``--benchmark-json`` see the cases (runs before
    pytest-benchmark's own hook, which skips items without the fixture)."""
    if not config.pluginmanager.hasplugin("benchmark"):
        return
    for item in items:
        names = getattr(item, "fixturenames", None)
        if names is None or not ({"pipeline", "pipeline_result"} & set(names)):
            continue
        function = getattr(item, "function", None)
        if function is not None and "benchmark" in inspect.signature(function).parameters:
            continue  # the test uses the benchmark fixture itself: leave it alone
        item.add_marker(pytest.mark.benchmark(timer=_CLOCK))
        if "benchmark" not in names:  # parametrized items may share one list
            names.append("benchmark")
        item.stash[_FEEDS_BENCHMARK] = True


def _quiet_unfed_benchmark(item: pytest.Item) -> None:
    """Keep pytest-benchmark from warning "Benchmark fixture was not used at all" about
    the fixture this plugin added to a case whose test never got as far as a run (a
    bad case, a failure or Ctrl-C before the run finished): the test did not ask for
    it. Must run before the fixture's finalizer; tests that request ``benchmark``
    themselves keep the warning."""
    if item.stash.get(_FEEDS_BENCHMARK, False) and not item.stash.get(_FED_BENCHMARK, False):
        bench = (getattr(item, "funcargs", None) or {}).get("benchmark") or item.stash.get(_BENCHMARK_FIXTURE, None)
        if bench is not None:
            bench.skipped = True  # pytest-benchmark's own switch: its cleanup warns only when unused and not skipped


def _no_baseline_no_gate(config: pytest.Config) -> None:
    """A first run with ``--benchmark-compare-fail`` and no stored baseline: pytest-benchmark
    has already warned "Can't compare. No benchmark files in ..." and would end the run with a
    ``UsageError`` traceback (exit 4, pytest-benchmark#276). There is nothing to gate yet, so
    say so once and run without the gate; later runs, with a baseline saved, are gated."""
    bs = getattr(config, "_benchmarksession", None)
    if bs is None or not getattr(bs, "compare_fail", None) or getattr(bs, "compared_mapping", None):
        return
    bs.compare_fail = []
    config.stash[_NO_BASELINE] = True  # said in the terminal summary, where the gate's verdict would be


#: pytest-benchmark's columns in the order they are kept when its table must narrow to the terminal: the
#: step time's median and spread first (the figures the harness's own table and ``compare`` rest on).
COLUMN_PRIORITY = ("median", "iqr", "min", "max", "rounds", "mean", "stddev", "ops", "outliers", "iterations")


def benchmark_table_width(config: pytest.Config, columns: list[str]) -> int | None:
    """How many characters wide pytest-benchmark's table of this run is with ``columns`` (its widest group),
    computed as pytest-benchmark 5 lays it out (``pytest_benchmark.table.TableResults.display``: the name
    column, then each column's own width, plus 10 for the `` (1.22)`` ratio of a stat in a group of several);
    ``None`` where pytest-benchmark is off, has no results yet, or lays tables out otherwise."""
    bs = getattr(config, "_benchmarksession", None)
    if bs is None or getattr(bs, "disabled", True) or not getattr(bs, "groups", None):
        return None
    try:
        from functools import partial

        from pytest_benchmark.table import NUMBER_FMT, STAT_PROPS, TableResults, compute_best_worst
        from pytest_benchmark.utils import report_noprogress

        widest = 0
        for _, benchmarks in bs.groups:
            best, worst = compute_best_worst(benchmarks, report_noprogress, None, "")
            for prop in ("outliers", "rounds", "iterations"):
                worst[prop] = max(b[prop] for b in benchmarks)
            table = TableResults(columns=columns, sort=bs.sort, histogram=None, name_format=bs.name_format, logger=bs.logger,
                                 scale_unit=partial(config.hook.pytest_benchmark_scale_unit, config=config))
            _, adjustment, ops_adjustment, labels = table.compute_scale(benchmarks, best, worst)
            widths = {
                "name": 3 + max(len(labels["name"]), max(len(bs.name_format(b)) for b in benchmarks)),
                "rounds": 2 + max(len(labels["rounds"]), len(str(worst["rounds"]))),
                "iterations": 2 + max(len(labels["iterations"]), len(str(worst["iterations"]))),
                "outliers": 2 + max(len(labels["outliers"]), len(str(worst["outliers"]))),
                "ops": 2 + max(len(labels["ops"]), len(NUMBER_FMT.format(best["ops"] * ops_adjustment))),
            }
            for prop in STAT_PROPS:
                if prop not in widths:
                    widths[prop] = 2 + max(len(labels[prop]), max(len(NUMBER_FMT.format(b[prop] * adjustment)) for b in benchmarks))
            pad = 0 if len(benchmarks) == 1 else 10
            widest = max(widest, widths["name"] + sum(widths[c] + (0 if c in ("outliers", "rounds", "iterations") else pad)
                                                      for c in columns))
        return widest
    except Exception:  # another pytest-benchmark layout: leave its table as it is
        return None


def fit_benchmark_columns(config: pytest.Config, width: int | None) -> list[str] | None:
    """Where the user did not choose pytest-benchmark's columns (``--benchmark-columns``) and its table
    would be wider than ``width`` (pytest's own width), keep the columns that fit, in the order of
    :data:`COLUMN_PRIORITY` (the median always), and note the line that says so for the terminal summary.
    Call after pytest-benchmark has computed its groups (its ``pytest_sessionfinish``) and before it
    prints them.

    Returns:
        The columns kept, in pytest-benchmark's order; ``None`` where nothing changed.
    """
    if width is None or config.getoption("benchmark_columns", None) is not None:
        return None
    bs = getattr(config, "_benchmarksession", None)
    columns = list(getattr(bs, "columns", None) or ())
    full = benchmark_table_width(config, columns)
    if full is None or full <= width:
        return None
    kept = ["median"]
    for col in COLUMN_PRIORITY[1:]:
        tried = [c for c in columns if c in (*kept, col)]
        if col in columns and (benchmark_table_width(config, tried) or width + 1) <= width:
            kept.append(col)
    kept = [c for c in columns if c in kept] or ["median"]
    bs.columns = kept  # type: ignore[union-attr]
    config.stash[_FITTED_COLUMNS] = (
        f"pipeline-harness: pytest-benchmark's table shows {', '.join(kept)}: the columns that fit {width} columns "
        f"(of {full}); --benchmark-columns chooses others")
    return kept


def fitted_columns_note(config: pytest.Config) -> str | None:
    """The line :func:`fit_benchmark_columns` left for the terminal summary, if any."""
    return config.stash.get(_FITTED_COLUMNS, None)


class _BenchmarkRegressionGuard:
    """Turns pytest-benchmark's ``PerformanceRegression`` (raised from its terminal summary
    when ``--benchmark-compare-fail`` trips) into a failed run: pytest-benchmark has already
    listed the regressions; without this, pytest prints an internal-error traceback of
    about 70 lines and no final line. Registered only where pytest-benchmark is."""

    def __init__(self, session_key: pytest.StashKey[pytest.Session]) -> None:
        self._session_key = session_key  # where harness.pytest.plugin keeps the session, whose exit status this sets

    @pytest.hookimpl(wrapper=True)
    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> Generator[None, None, None]:
        try:
            from pytest_benchmark.session import PerformanceRegression
        except ImportError:  # another layout: leave its exceptions alone
            return (yield)
        try:
            return (yield)
        except PerformanceRegression:
            terminalreporter.write_line("pytest-benchmark: performance has regressed past --benchmark-compare-fail "
                                        "(the regressions are listed above); the run fails", red=True)
            session = config.stash.get(self._session_key, None)
            if session is not None:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return None
