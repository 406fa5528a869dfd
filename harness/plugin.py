"""pytest glue: options, the ``pipeline`` fixture, header and summary lines.

Registered once through the ``pytest11`` entry point ``harness``. Everything
of substance lives in the core (:mod:`harness.runner`, :mod:`harness.session`);
this module parses options, hands cases to the core, feeds measured step times
to pytest-benchmark and prints one header line and one summary table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.case import PipelineCase
from harness.device import BACKENDS, BackendChoice, resolve_backend
from harness.errors import ConfigError, HarnessError
from harness.executor import parse_steps
from harness.report.render import ReportFiles
from harness.runner import CaseResult, run_case
from harness.session import ProfileSession

_KEY = pytest.StashKey["HarnessConfig"]()


@dataclass
class HarnessConfig:
    """Parsed options of one pytest run."""

    profile: bool
    backend_name: str
    report_dir: Path
    steps: range
    workload: str | None
    _choice: BackendChoice | None = None
    session: ProfileSession | None = None
    results: list[CaseResult] = field(default_factory=list)
    interrupted: bool = False
    written: ReportFiles | None = None

    @property
    def choice(self) -> BackendChoice:
        if self._choice is None:
            self._choice = resolve_backend(self.backend_name)
        return self._choice


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pipeline-harness", "pipeline schedule benchmarks (pipeline-harness)")
    group.addoption("--profile-jobs", action="store_true", default=False,
                    help="record every job of every pipeline case and write reports (traces, results.json, index.html)")
    group.addoption("--backend", default="auto", metavar="NAME",
                    help=f"backend to run pipeline cases on: {', '.join(BACKENDS)} (default: auto = cuda if usable, else cpu)")
    group.addoption("--report-dir", default="reports", metavar="DIR", help="where reports are written (default: reports/)")
    group.addoption("--profile-steps", default="1:4", metavar="START:END",
                    help="steps to record; earlier steps run as warm-up (default 1:4 = 1 warm-up, 3 recorded)")
    group.addoption("--workload", default=None, metavar="NAME",
                    help="override every case's workload (cpu: sleep, matmul; cuda: spin, gemm)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "pipeline(**case): declare a pipeline case; the pipeline_result fixture runs it")
    try:
        steps = parse_steps(config.getoption("--profile-steps"))
        backend = config.getoption("--backend")
        if backend.strip().lower() not in BACKENDS:
            resolve_backend(backend)  # raises with the list of valid names
        hc = HarnessConfig(
            profile=config.getoption("--profile-jobs"),
            backend_name=backend,
            report_dir=Path(config.getoption("--report-dir")),
            steps=steps,
            workload=config.getoption("--workload"),
        )
        if hc.profile and getattr(config.option, "numprocesses", None):
            raise ConfigError("--profile-jobs runs cases one after another on one device; run it without pytest-xdist's -n")
        if hc.profile or backend.strip().lower() == "cuda":
            _ = hc.choice  # fail early: --backend=cuda without a GPU stops here
        if hc.profile:
            hc.session = ProfileSession(hc.report_dir, hc.choice, steps)
            hc.session.prepare()
    except HarnessError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[_KEY] = hc


def pytest_report_header(config: pytest.Config) -> str | None:
    hc = config.stash.get(_KEY, None)
    if hc is None:
        return None
    try:
        c = hc.choice
    except HarnessError as exc:  # only reachable for odd names; configure already checked
        return f"pipeline-harness: {exc}"
    extra = f", recording steps {hc.steps.start}:{hc.steps.stop} to {hc.report_dir}/" if hc.profile else ""
    return f"pipeline-harness: backend {c.name} ({c.reason}){extra}"


class _ReplayClock:
    """A pytest-benchmark timer that returns the run's own clock (seconds), so
    the benchmark statistics are the measured step times, not host wall time."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


_CLOCK = _ReplayClock()


class PipelineRunner:
    """The ``pipeline`` fixture's value: call it with a :class:`PipelineCase`
    (or its fields as keywords) to run the case; returns a :class:`CaseResult`."""

    def __init__(self, request: pytest.FixtureRequest, hc: HarnessConfig) -> None:
        self._request = request
        self._hc = hc
        self._runs = 0

    def __call__(self, case: PipelineCase | None = None, **fields: Any) -> CaseResult:
        if case is None:
            case = PipelineCase(**fields)
        elif fields:
            raise TypeError("pass either a PipelineCase or its fields as keywords, not both")
        hc = self._hc
        from dataclasses import replace

        if hc.workload:
            case = replace(case, workload=hc.workload)
        if not case.name:  # reports label a case by its test, e.g. "test_gpt[1F1B-8]"
            case = replace(case, name=self._request.node.name)
        self._runs += 1
        case_id = self._request.node.nodeid + ("" if self._runs == 1 else f"#{self._runs}")
        try:
            result = run_case(case, hc.choice, hc.steps, case_id=case_id)
        except HarnessError as exc:
            pytest.fail(f"{type(exc).__name__}: {exc}", pytrace=False)
        hc.results.append(result)
        if hc.session is not None:
            hc.session.add(result)
        if self._runs == 1:
            self._feed_benchmark(result)
        return result

    def _feed_benchmark(self, result: CaseResult) -> None:
        request = self._request
        if not request.config.pluginmanager.hasplugin("benchmark") or "benchmark" in request.fixturenames:
            return
        step_times = [s.step_time_ns / 1e9 for s in result.metrics.steps]
        request.node.add_marker(pytest.mark.benchmark(timer=_CLOCK, group=result.schedule.name))
        try:
            bench = request.getfixturevalue("benchmark")
        except pytest.skip.Exception:  # --benchmark-skip: the case ran, just do not report it
            return
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
        })
        bench.pedantic(one_step, rounds=len(step_times), iterations=1, warmup_rounds=0)


@pytest.fixture
def pipeline(request: pytest.FixtureRequest) -> PipelineRunner:
    """Run pipeline cases: ``result = pipeline(PipelineCase(schedule="1F1B", stages=4, microbatches=8))``."""
    return PipelineRunner(request, request.config.stash[_KEY])


@pytest.fixture
def pipeline_result(request: pytest.FixtureRequest, pipeline: PipelineRunner) -> CaseResult:
    """Run the case declared by ``@pytest.mark.pipeline(schedule=..., stages=..., ...)``."""
    marker = request.node.get_closest_marker("pipeline")
    if marker is None:
        raise pytest.UsageError(f"{request.node.nodeid}: pipeline_result needs @pytest.mark.pipeline(...)")
    return pipeline(PipelineCase(*marker.args, **marker.kwargs))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    hc = session.config.stash.get(_KEY, None)
    if hc is None or hc.session is None or not hc.session.results:
        return
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        hc.interrupted = True
        return
    if hasattr(session.config, "workerinput"):  # xdist worker: the controller has no results to merge yet
        return
    hc.written = hc.session.write()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    hc = config.stash.get(_KEY, None)
    if hc is None or not hc.results:
        return
    tr = terminalreporter
    tr.section("pipeline cases")
    rows = []
    for r in hc.results:
        m = r.metrics
        th = r.theory.get("bubble_ratio")
        workload = r.records.device.get("workload")
        rows.append((
            r.case_id.split("::", 1)[-1],
            r.schedule.name,
            str(r.num_ranks),
            str(r.num_microbatches),
            str(r.chunks),
            r.records.backend + (f"/{workload}" if workload else ""),
            f"{m.step_time_median_ns / 1e6:.3f} ms",
            f"{100 * m.bubble_ratio:.1f}% / " + ("—" if th is None else f"{100 * th:.1f}%"),
        ))
    header = ("case", "schedule", "p", "m", "v", "backend", "step median", "bubble meas/theory")
    widths = [min(60, max(len(row[i]) for row in [header, *rows])) for i in range(len(header))]
    right = {2, 3, 4, 6, 7}

    def fmt(row: tuple[str, ...]) -> str:
        cells = [(c if len(c) <= w else c[: w - 3] + "...") for c, w in zip(row, widths)]
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    tr.write_line(fmt(header))
    for row in rows:
        tr.write_line(fmt(row))
    tr.write_line("bubble = idle share of total (sum of compute-stream idle / (p x step time)); theory where a closed form holds")
    if hc.interrupted:
        tr.write_line(f"run interrupted: reports in {hc.report_dir}/ were left as they were; nothing of this run was written")
    elif hc.written:
        w = hc.written
        tr.write_line(f"reports: {w.index} · {w.results} · {len(w.traces)} trace(s) in {hc.report_dir}/traces/ · "
                      f"HTA traces in {hc.report_dir}/hta/")
