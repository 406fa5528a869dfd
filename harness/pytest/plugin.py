"""pytest glue: options, the ``pipeline`` fixture, header and summary lines.

Registered once through the ``pytest11`` entry point ``harness``. Everything
of substance lives in the core (:mod:`harness.runner`, :mod:`harness.report.session`);
this module parses options, hands cases to the core, feeds measured step times
to pytest-benchmark and prints one header line and one summary table. Under
pytest-xdist (``-n``) :mod:`harness.pytest.xdist` joins the workers' cases into
the controller's report and table.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from harness import errors
from harness.analysis.result import CaseResult
from harness.case import PipelineCase
from harness.distributed.backends import BACKENDS, resolve_backend
from harness.errors import ConfigError, HarnessError
from harness.pytest import xdist as xdist_glue
from harness.pytest.benchmark import (
    _BENCHMARK_FIXTURE,
    _FEEDS_BENCHMARK,
    _NO_BASELINE,
    _BenchmarkRegressionGuard,
    _no_baseline_no_gate,
    _quiet_unfed_benchmark,
    add_benchmark_fixture,
    feed_benchmark,
    fit_benchmark_columns,
    fitted_columns_note,
)
from harness.pytest.not_run import NotRunCases, note_not_run
from harness.pytest.sites import frame_site, raised_at, user_site
from harness.pytest.terminal import (
    SKIPPED_CASE,
    SkippedCases,
    header_line,
    publish_note,
    say_collection_errors,
    shown_path,
    skip_reason,
    wrapped_line,
    write_summary,
)
from harness.report.output import TRACE_OPTIONS, parse_trace_options
from harness.report.parts import SessionPart, merge_lines
from harness.report.render import ReportFiles, ReportInterrupted
from harness.report.session import ProfileSession
from harness.run.device import check_workload
from harness.run.environment import BackendChoice
from harness.run.window import (
    DEFAULT_MAX_TIME_NS,
    DEFAULT_MIN_STEPS,
    DEFAULT_TARGET,
    AdaptiveWindow,
    parse_duration_ns,
    parse_steps,
    parse_target,
)
from harness.runner import run_case
from harness.text import shown_in_terminal

_KEY = pytest.StashKey["HarnessConfig"]()
_SESSION = pytest.StashKey[pytest.Session]()
_CASE_FIXTURES = frozenset({"pipeline", "pipeline_result"})


@dataclass
class HarnessConfig:
    """Parsed options of one pytest run."""

    profile: bool
    backend_name: str
    report_dir: Path
    steps: range | AdaptiveWindow
    workload: str | None
    comm_model: str | None = None
    _choice: BackendChoice | None = None
    session: ProfileSession | None = None
    results: list[CaseResult] = field(default_factory=list)
    interrupted: bool = False
    interrupted_after_write: bool = False
    written: ReportFiles | None = None
    by_node: dict[str, list[CaseResult]] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (test id, reason) of skipped pipeline cases
    not_run: list[dict[str, str]] = field(default_factory=list)  # cases that never produced a run (harness.report.not_run)
    split: str | None = None  # under pytest-xdist with --profile-jobs: the header's words for the workers
    parts: list[SessionPart] = field(default_factory=list)  # pytest-xdist's controller: the workers' cases
    lost: list[dict[str, Any]] = field(default_factory=list)  # ... and the workers that went down without sending them
    write_error: str | None = None  # the report could not be written (a full disk): the run's last line

    @property
    def choice(self) -> BackendChoice:
        if self._choice is None:
            self._choice = resolve_backend(self.backend_name)
        return self._choice

    def window(self) -> range | AdaptiveWindow:
        """A profiling window for one case (an adaptive window holds state: one per case)."""
        return self.steps if isinstance(self.steps, range) else replace(self.steps)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pipeline-harness", "pipeline schedule benchmarks (pipeline-harness)")
    group.addoption("--profile-jobs", action="store_true", default=False,
                    help="record every job of every pipeline case and write reports (traces, results.json, index.html)")
    group.addoption("--backend", default="auto", metavar="NAME",
                    help=f"backend to run pipeline cases on: {', '.join(BACKENDS)} (default: auto = cuda if usable, else cpu; "
                         "mpi: under mpirun; torch: PyTorch's pipelining runtime, under torchrun or launching its ranks)")
    group.addoption("--report-dir", default=None, metavar="DIR",
                    help="where reports are written (default: reports/ in the project's root folder); each run replaces the report there")
    group.addoption("--profile-steps", default=None, metavar="START:END",
                    help="record exactly these steps; earlier steps run as warm-up (e.g. 1:4 = 1 warm-up, 3 recorded). "
                         "Default: measure until stable (one warm-up step, then steps until the median step time is known "
                         "to --profile-target; sim records one step, it is exact)")
    group.addoption("--profile-target", default=None, metavar="PCT",
                    help=f"measure until the relative standard error of the median step time is at most this "
                         f"(default {100 * DEFAULT_TARGET:g}%%)")
    group.addoption("--profile-max-time", default=None, metavar="TIME",
                    help=f"time budget per case for measuring until stable, e.g. 10s, 500ms, 2min (default {DEFAULT_MAX_TIME_NS / 1e9:g}s); "
                         "a case that runs out of it before the target is flagged unstable")
    group.addoption("--profile-min-steps", default=None, metavar="N",
                    help=f"record at least N steps when measuring until stable (default {DEFAULT_MIN_STEPS})")
    group.addoption("--workload", default=None, metavar="NAME",
                    help="override every case's workload: timed (jobs last their cost-model duration: cpu sleep, cuda spin) "
                         "or compute (real GEMMs sized from the job's FLOPs: cpu NumPy, cuda kernel)")
    group.addoption("--comm-model", default=None, metavar="MODEL",
                    help="communication model of cases that name none: stream (send/receive jobs on a FIFO comm stream per "
                         "pair of ranks; default), edge (a delay on the dependency, as the published simulators; sim only), "
                         "blocking (send/receive jobs on the compute streams, a send meeting its receive, as Megatron-LM without "
                         "overlap and mindformers' simulator; sim only) or free (transfers cost nothing)")
    for name, metavar, text in TRACE_OPTIONS:  # report output: gzip, traced steps, flows, size warning
        if metavar is None:
            group.addoption(name, action="store_true", default=False, help=text)
        else:
            group.addoption(name, default=None, metavar=metavar, help=text)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "pipeline(**case): declare a pipeline case; the pipeline_result fixture runs it")
    try:
        steps = _profiling_window(config)
        backend = config.getoption("--backend")
        if backend.strip().lower() not in BACKENDS:
            resolve_backend(backend)  # raises with the list of valid names
        workload = config.getoption("--workload")
        if workload is not None:
            check_workload(workload)
        comm_model = config.getoption("--comm-model")
        if comm_model is not None:
            from harness.model.comm import check_backend, check_comm_model

            comm_model = check_comm_model(comm_model, "--comm-model")
            if backend.strip().lower() in ("cpu", "cuda"):
                check_backend(comm_model, backend.strip().lower())
        trace_options = parse_trace_options(  # checked with or without --profile-jobs, as the other options are
            config.getoption("--trace-gzip"), config.getoption("--trace-steps"), config.getoption("--trace-no-flows"),
            config.getoption("--size-warn-mb"))
        report_dir = config.getoption("--report-dir")
        if report_dir is not None and not report_dir.strip():
            raise ConfigError("--report-dir is empty; give a folder, or leave the option out for reports/ in the project root")
        hc = HarnessConfig(
            profile=config.getoption("--profile-jobs"),
            backend_name=backend,
            report_dir=Path(report_dir) if report_dir else config.rootpath / "reports",
            steps=steps,
            workload=workload,
            comm_model=comm_model,
        )
        if hc.profile or backend.strip().lower() in ("cuda", "torch"):
            _ = hc.choice  # fail early: --backend=cuda without a GPU, or torch without PyTorch, stops here
        xdist_glue.configure(config, hc)  # pytest-xdist: its controller checks the split (cpu is refused), its workers send cases
        from harness.distributed.launch import check_not_duplicated

        if config.getoption("--profile-jobs"):  # each process would publish the same report folder
            check_not_duplicated(backend, "pytest --profile-jobs")
        mpi = backend.strip().lower() == "mpi"
        if mpi:  # one pipeline rank per MPI process: rank 0's test order; only rank 0 reports
            from harness.distributed.launch import writes_reports
            from harness.pytest.mpi import register

            register(config)
        from harness.distributed.torch_launch import in_torchrun, torchrun_world

        torchrun = backend.strip().lower() == "torch" and in_torchrun()
        if torchrun:  # one pipeline rank per torchrun process: rank 0's test order; only rank 0 reports
            from harness.pytest.torch import register as register_torchrun

            register_torchrun(config)
        one = (not mpi or writes_reports()) and (not torchrun or torchrun_world()[0] == 0) and not xdist_glue.is_worker(config)
        if hc.profile and one:  # one process publishes
            hc.session = ProfileSession(hc.report_dir, hc.choice, steps, trace_options=trace_options)
            hc.session.prepare()
    except HarnessError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[_KEY] = hc
    config.pluginmanager.register(SkippedCases(hc), "harness-skipped-cases")
    config.pluginmanager.register(NotRunCases(hc), "harness-not-run-cases")
    if config.pluginmanager.hasplugin("benchmark") and not config.pluginmanager.has_plugin("harness-benchmark-guard"):
        config.pluginmanager.register(_BenchmarkRegressionGuard(_SESSION), "harness-benchmark-guard")


def _profiling_window(config: pytest.Config) -> range | AdaptiveWindow:
    """``--profile-steps`` (a fixed window) or the adaptive window's options.

    Raises:
        ConfigError: a value that does not parse, or both kinds given.
    """
    fixed = config.getoption("--profile-steps")
    knobs = {name: config.getoption(name) for name in ("--profile-target", "--profile-max-time", "--profile-min-steps")}
    given = [name for name, value in knobs.items() if value is not None]
    if fixed is not None:
        if given:
            verb = "applies" if len(given) == 1 else "apply"
            raise ConfigError(f"--profile-steps fixes the window exactly; {', '.join(given)} {verb} only to the adaptive window "
                              "(measure until stable): give one or the other")
        return parse_steps(fixed)
    options: dict[str, Any] = {}
    if knobs["--profile-target"] is not None:
        options["target"] = parse_target(knobs["--profile-target"])
    if knobs["--profile-max-time"] is not None:
        options["max_time_ns"] = parse_duration_ns(knobs["--profile-max-time"])
    if knobs["--profile-min-steps"] is not None:
        text = knobs["--profile-min-steps"]
        if not text.isascii() or not text.strip().isdigit():
            raise ConfigError(f"--profile-min-steps {text!r}: expected a whole number of steps, e.g. 5")
        options["min_steps"] = int(text)
    flags = {"target": "--profile-target", "max_time_ns": "--profile-max-time", "min_steps": "--profile-min-steps"}
    for key, value in options.items():  # a value out of range: say which option gave it
        try:
            AdaptiveWindow(**{key: value})
        except ConfigError as exc:
            raise ConfigError(f"{flags[key]}: {exc}") from None
    return AdaptiveWindow(**options)


def pytest_report_header(config: pytest.Config) -> str | None:
    hc = config.stash.get(_KEY, None)
    return header_line(hc, config) if hc is not None else None


class PipelineRunner:
    """The ``pipeline`` fixture's value: call it with a :class:`PipelineCase`
    (or its fields as keywords) to run the case; returns a :class:`CaseResult`."""

    def __init__(self, request: pytest.FixtureRequest, hc: HarnessConfig) -> None:
        self._request = request
        self._hc = hc
        self._runs = 0

    def __call__(self, case: PipelineCase | None = None, **fields: Any) -> CaseResult:
        run_at = frame_site(sys._getframe(1))  # None when pipeline_result runs the case
        if case is None:
            case = PipelineCase.from_fields((), fields, declared_at=run_at, source="pipeline(...)")
        elif not isinstance(case, PipelineCase) or fields:
            got = "a PipelineCase and keywords too" if isinstance(case, PipelineCase) else repr(case)
            raise ConfigError(
                (f"{run_at}: " if run_at else "") + "pipeline(...) takes a PipelineCase or its fields as keywords, "
                f'e.g. pipeline(PipelineCase("1F1B", stages=4, microbatches=8)) or pipeline(schedule="1F1B", stages=4, microbatches=8); '
                f"got {got}"
            )
        hc = self._hc
        overridden = bool(hc.workload) and hc.workload != case.workload
        if hc.workload:
            case = replace(case, workload=hc.workload)
        if not case.name:  # reports label a case by its test, e.g. "test_gpt[1F1B-8]"
            case = replace(case, name=self._request.node.name + ("" if self._runs == 0 else f"#{self._runs + 1}"))
        self._runs += 1
        node = self._request.node
        case_id = node.nodeid + ("" if self._runs == 1 else f"#{self._runs}")
        error: HarnessError | None = None
        try:
            result = run_case(case, hc.choice, hc.window(), case_id=case_id, comm_model=hc.comm_model)
        except HarnessError as exc:
            error = exc
        except Exception as exc:  # not the user's error, but the case did not run: the report lists it
            exc._case_refused = (case.name, case.declared_at or run_at)  # type: ignore[attr-defined]
            raise
        if error is not None:  # outside the except block: one message, no chained traceback
            self._runs -= 1  # a refused case ran nothing: it takes no id (a later case keeps its own)
            declared_at = case.declared_at if case.declared_at != run_at else None
            sites = (("declared", declared_at), ("run", run_at))
            # a case's own error starts with its line already: name the other one only
            where = ", ".join(f"{what} at {site}" for what, site in sites if site and not str(error).startswith(f"{site}: "))
            if overridden and "workload" in str(error):  # the case did not ask for it: say who did
                error._case_note = f"the case's workload {hc.workload!r} came from --workload={hc.workload} on the command line"  # type: ignore[attr-defined]
            # The error itself, so pytest.raises(ConfigError) catches it; pytest_runtest_makereport shows it
            # as its message and this note, not a traceback.
            error._case_sites = where  # type: ignore[attr-defined]
            error._case_refused = (case.name, case.declared_at or run_at)  # type: ignore[attr-defined]  # the report lists it
            raise error
        hc.results.append(result)
        hc.by_node.setdefault(node.nodeid, []).append(result)
        if hc.session is not None:
            hc.session.add(result)
        if self._runs == 1:
            feed_benchmark(self._request, result)
        return result


@pytest.fixture
def pipeline(request: pytest.FixtureRequest) -> PipelineRunner:
    """Run pipeline cases: ``result = pipeline(PipelineCase(schedule="1F1B", stages=4, microbatches=8))``.

    A test that takes this fixture but not ``pipeline_result`` and carries a pipeline marker fails:
    only ``pipeline_result`` runs the marker's case, which would otherwise be dropped silently.
    """
    if "pipeline_result" not in request.fixturenames and request.node.get_closest_marker("pipeline") is not None:
        pytest.fail(
            f"{_test_site(request) or request.node.nodeid}: this test has a pipeline marker but takes the pipeline fixture, "
            "which runs only the cases the test passes to it; the marker's case would not run. Take pipeline_result "
            "to run the marker's case, or drop the marker",
            pytrace=False,
        )
    return PipelineRunner(request, request.config.stash[_KEY])


def _test_site(request: pytest.FixtureRequest) -> str | None:
    """``"file.py:LINE"`` of the test function's first line (its first decorator's, where a mark usually is)."""
    function = getattr(request.node, "function", None)
    code = getattr(inspect.unwrap(function), "__code__", None) if function is not None else None
    return user_site(code.co_filename, code.co_firstlineno) if code is not None else None


@pytest.fixture
def pipeline_result(request: pytest.FixtureRequest, pipeline: PipelineRunner) -> CaseResult:
    """Run the case declared by ``@pytest.mark.pipeline(schedule=..., stages=..., ...)``."""
    marker = request.node.get_closest_marker("pipeline")
    if marker is None:
        node = request.node
        test = getattr(node, "originalname", node.name)
        params = "self, pipeline_result" if getattr(node, "cls", None) is not None else "pipeline_result"  # a test method
        pytest.fail(
            f"{node.nodeid}: the pipeline_result fixture runs the case declared by a pipeline marker, and this test has none; "
            "declare the case above the test:\n\n"
            '    @pytest.mark.pipeline(schedule="1F1B", stages=4, microbatches=8)\n'
            f"    def {test}({params}):\n\n"
            "or take the pipeline fixture instead and run a case with pipeline(PipelineCase(...))",
            pytrace=False,
        )
    declared_at = _test_site(request)
    # The closest level with a marker wins (a method's over its class's, as pytest's markers go);
    # two on one level are ambiguous.
    for node in reversed(request.node.listchain()):
        own = [m for m in node.own_markers if m.name == "pipeline"]
        if isinstance(node, pytest.Class) and len(own) > 1:
            # pytest gathers a class's markers through its bases: the class's own one wins over inherited ones
            declared = [m for m in getattr(node.obj, "__dict__", {}).get("pytestmark", []) if getattr(m, "name", None) == "pipeline"]
            own = declared or own[:1]
        if own:
            if len(own) > 1:
                where = declared_at if node is request.node else node.nodeid
                pytest.fail(
                    f"{where or request.node.nodeid}: {len(own)} pipeline markers on one "
                    f"{'test' if node is request.node else type(node).__name__.lower()}; it runs one case "
                    "(parametrize the test, or split it, to run several)",
                    pytrace=False,
                )
            marker = own[0]
            break
    return pipeline(PipelineCase.from_fields(marker.args, marker.kwargs, declared_at=declared_at, source="pipeline marker"))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every pipeline case pytest-benchmark's fixture (:func:`~harness.pytest.benchmark.add_benchmark_fixture`;
    runs before pytest-benchmark's own hook, which skips items without the fixture)."""
    add_benchmark_fixture(config, items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    """A case that failed before its run finished: no "fixture not used" warning (see above)."""
    _quiet_unfed_benchmark(item)
    return (yield)


def _line_writer(tr: Any) -> Callable[[str], None]:
    """Write a message on a line of its own, also right after the progress line
    (``[100%]``), which the terminal reporter has not ended yet."""

    def write(message: str) -> None:
        if getattr(getattr(tr, "_tw", None), "width_of_current_line", 0):
            tr.write("\n")
        tr.write_line(message)

    return write


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """Keep the benchmark fixture this plugin added: after Ctrl-C, newer pytest releases
    have dropped ``item.funcargs`` by the time :func:`pytest_runtest_protocol` sees the
    interrupt, while the fixture is finalized later, at the end of the session."""
    if item.stash.get(_FEEDS_BENCHMARK, False):
        bench = (getattr(item, "funcargs", None) or {}).get("benchmark")
        if bench is not None:
            item.stash[_BENCHMARK_FIXTURE] = bench
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """A case interrupted by Ctrl-C: pytest skips the test's teardown hook and finalizes its
    fixtures at the end of the session, so quiet the benchmark fixture here (see above)."""
    try:
        return (yield)
    except KeyboardInterrupt:
        _quiet_unfed_benchmark(item)
        raise


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """A harness error raised while a test file is imported (a case refused at module level) is shown as
    its message, which names the file and line, not as a traceback through the harness's dataclass
    code (``--fulltrace`` keeps the traceback)."""
    report = yield
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", "")
    kind = message.split(":", 1)[0]
    if (report.failed and kind.startswith("harness.errors.") and kind[len("harness.errors."):] in _HARNESS_ERRORS
            and not collector.config.getoption("fulltrace", False)):
        import re

        shown = message[len("harness.errors."):]
        # the test file's own line, the first entry of the short traceback, where the message does not name it
        site = re.search(r"^(\S+\.py:\d+): in <module>$", str(report.longrepr), re.M)
        if site and f"{site.group(1)}: " not in shown:
            shown += f"\n(raised at {site.group(1)})"
        report.longrepr = shown
    return report


#: The error classes of :mod:`harness.errors`, by name (a collection report carries only their text).
_HARNESS_ERRORS = frozenset(name for name, cls in vars(errors).items() if isinstance(cls, type) and issubclass(cls, HarnessError))


@pytest.hookimpl(wrapper=True, tryfirst=True)  # tryfirst: sees the report after the xfail handling
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Note the pytest outcome of each test on the cases it ran (failed cases are marked in reports),
    and report a harness error from a pipeline case as its message and the case's line, not a
    traceback through the harness (``--fulltrace`` keeps the traceback)."""
    report = yield
    exc = call.excinfo.value if call.excinfo is not None else None
    if (report.failed and isinstance(exc, HarnessError) and _CASE_FIXTURES & set(getattr(item, "fixturenames", ()))
            and not item.config.getoption("fulltrace", False)):
        message = f"{type(exc).__name__}: {exc}"
        sites = getattr(exc, "_case_sites", None)  # set by the pipeline fixture: where the case was declared and run
        if sites is not None:
            note = getattr(exc, "_case_note", None)
            report.longrepr = message + (f"\n(case {sites})" if sites else "") + (f"\n({note})" if note else "")
        else:
            where = raised_at(exc.__traceback__)
            report.longrepr = message + (f"\n(raised at {where})" if where and f"{where}: " not in message else "")
    hc = item.config.stash.get(_KEY, None)
    if report.skipped and not hasattr(report, "wasxfail") and _CASE_FIXTURES & set(getattr(item, "fixturenames", ())):
        # a skipped pipeline case, with its reason: the summary lists it (pytest_runtest_logreport, which
        # pytest-xdist's controller also runs, with the workers' reports and their user_properties)
        report.user_properties.append((SKIPPED_CASE, skip_reason(report)))
    results = hc.by_node.get(item.nodeid) if hc is not None else None
    if hc is not None and _CASE_FIXTURES & set(getattr(item, "fixturenames", ())):
        # a case that never produced a run: listed in the report (harness.pytest.not_run)
        note_not_run(item, report, exc, bool(results), raised_at(exc.__traceback__) if exc is not None else None)
    if results:
        outcome: str | None
        if report.failed:
            outcome = "failed" if report.when == "call" else "error"
        elif report.skipped:
            outcome = "xfailed" if hasattr(report, "wasxfail") else "skipped"
        else:
            outcome = "passed" if report.when == "call" else None
        for r in results:
            if outcome is not None and r.outcome not in ("failed", "error"):
                r.outcome = outcome
    return report


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_SESSION] = session  # for the exit status of a summary cut short
    _no_baseline_no_gate(session.config)


def pytest_unconfigure(config: pytest.Config) -> None:
    # after pytest's own summary (it calls no pytest_terminal_summary after collection errors): the last word
    hc = config.stash.get(_KEY, None)
    if hc is not None and hc.profile:
        tr = config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            say_collection_errors(tr, hc)
        if hc.write_error is not None:  # after pytest's counts, so that "2 passed" is not the last word
            if tr is not None:
                width = getattr(getattr(tr, "_tw", None), "fullwidth", None)
                for part in wrapped_line(shown_in_terminal(f"ERROR: {hc.write_error}"), width if isinstance(width, int) else None):
                    tr.write_line(part, red=True, bold=True)
            else:
                print(shown_in_terminal(f"ERROR: {hc.write_error}"), file=sys.stderr)
        if hc.session is not None:
            note = publish_note(hc)
            if note and tr is not None:  # the run's last line: another run's report replaced this one's, or the other way
                width = getattr(getattr(tr, "_tw", None), "fullwidth", None)
                for part in wrapped_line(shown_in_terminal(f"pipeline-harness: {note}"), width if isinstance(width, int) else None):
                    tr.write_line(part, yellow=True)
            hc.session.close()



def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # pytest-benchmark has computed its table (its own sessionfinish wraps this one): narrow it to pytest's width
    tw = getattr(session.config.pluginmanager.get_plugin("terminalreporter"), "_tw", None)
    width = getattr(tw, "fullwidth", None)
    fit_benchmark_columns(session.config, width if isinstance(width, int) else None)
    hc = session.config.stash.get(_KEY, None)
    if hc is None or hc.session is None or not (hc.session.results or hc.session.parts):  # a worker has no session
        return
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        hc.interrupted = True
        return
    try:
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        extra = {**({"workers_lost": hc.lost} if hc.lost else {}), **({"not_run_cases": hc.not_run} if hc.not_run else {})}
        hc.written = hc.session.write(extra or None, notice=None if tr is None else _line_writer(tr))
    except ReportInterrupted as done:  # Ctrl-C while publishing: the report was completed first
        hc.written = done.files
        hc.interrupted_after_write = True
        session.exitstatus = pytest.ExitCode.INTERRUPTED
    except KeyboardInterrupt:  # while rendering: nothing of this run was published
        hc.interrupted = True
        session.exitstatus = pytest.ExitCode.INTERRUPTED
    except HarnessError as exc:  # e.g. a full disk (harness.errors.DiskFullError): said as the run's last line, no traceback
        # pytest's own summary (failures, the counts) still comes; the exit status says the run did not end well:
        # a run whose tests failed keeps its status (1), one whose tests passed gets 4 (no report)
        hc.write_error = f"could not write the report: {exc}"
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.USAGE_ERROR


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    fitted = fitted_columns_note(config)
    if fitted:
        width = getattr(getattr(terminalreporter, "_tw", None), "fullwidth", None)
        for part in wrapped_line(fitted, width if isinstance(width, int) else None):
            terminalreporter.write_line(part)
    if config.stash.get(_NO_BASELINE, False):
        terminalreporter.write_line("pipeline-harness: --benchmark-compare-fail has no stored baseline to compare with (first run?): "
                                    "nothing was gated this time; save one with --benchmark-autosave", yellow=True)
    hc = config.stash.get(_KEY, None)
    if hc is None or xdist_glue.is_worker(config) or not (hc.results or hc.parts or hc.lost or hc.skipped or hc.not_run):
        return
    tr = terminalreporter
    try:
        write_summary(tr, hc, hc.results or merge_lines(hc.parts))
    except KeyboardInterrupt:  # the cases ran and the report was settled before this table: say so in one line
        if hc.written:
            done = f"; the report was already complete: {shown_path(hc.written.index)}"
        elif hc.interrupted:
            done = f"; reports in {shown_path(hc.report_dir)}/ were left as they were"
        else:
            done = ""
        tr.write_line(f"pipeline cases summary interrupted (Ctrl-C){done}")
        session = config.stash.get(_SESSION, None)
        if session is not None:
            session.exitstatus = pytest.ExitCode.INTERRUPTED
