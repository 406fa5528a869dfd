"""pytest glue for pytest-xdist (``pytest -n N``): pipeline cases in parallel workers, one report.

:func:`configure` (from :mod:`harness.pytest.plugin`'s ``pytest_configure``) registers the side of
this process:

* the **controller** (the process pytest-xdist distributes from; it runs no test) checks, under
  ``--profile-jobs``, that the split can give the serial run's report (:func:`check_split`): ``sim``
  splits freely; ``cuda`` gives each worker its own GPUs through ``CUDA_VISIBLE_DEVICES`` (the
  ``env:`` key of the workers' execnet specs, set before the worker imports anything); ``cpu``,
  ``mpi``, ``torch`` and ``--dist each`` are refused with the reason (``cpu`` takes one worker: its one device is
  this machine, whose cores parallel workers would share). It collects each worker's cases when the
  worker goes down (``pytest_testnodedown``, the part in ``node.workeroutput``) into the report's
  :class:`~harness.report.session.ProfileSession` and the summary's lines, and names a worker that
  went down without sending them with the tests it had run;
* a **worker** publishes nothing: at the end of its session it serializes its cases, in the order of
  their tests, into ``config.workeroutput`` (:func:`harness.report.parts.make_part`).

The merge itself is :mod:`harness.report.parts`. pytest-benchmark turns itself off under xdist;
:func:`benchmark_note` says what that means for the cases' step times.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import pytest

from harness.errors import ConfigError, HarnessError
from harness.report.parts import SessionPart, make_part
from harness.text import shown_in_terminal

__all__ = ["PART_KEY", "XdistController", "XdistWorker", "benchmark_note", "check_split", "configure", "gpu_groups", "is_worker",
           "splits", "stop_reason", "summary_lines"]

#: The key of a worker's part in pytest-xdist's ``workeroutput``.
PART_KEY = "pipeline_harness"


def is_worker(config: pytest.Config) -> bool:
    """Whether this process is a pytest-xdist worker."""
    return hasattr(config, "workerinput")


def splits(config: pytest.Config) -> bool:
    """Whether pytest-xdist distributes this run's tests from this process (its controller): a
    distribution mode and workers to run it (pytest-xdist's own test), and not ``--collect-only``."""
    if is_worker(config) or config.getoption("collectonly", False):
        return False
    return config.getoption("dist", "no") != "no" and bool(config.getoption("tx", None))


def _specs(config: pytest.Config) -> list[str]:
    """The workers' execnet specs, ``N*spec`` expanded (as pytest-xdist expands them)."""
    specs: list[str] = []
    for spec in config.getoption("tx", None) or []:
        count, star, rest = spec.partition("*")
        specs.extend([rest] * int(count) if star and count.isdigit() else [spec])
    return specs


def gpu_groups(visible: Sequence[str], workers: int) -> list[str]:
    """``CUDA_VISIBLE_DEVICES`` per worker: ``len(visible) // workers`` consecutive GPUs each (one
    each with as many workers as GPUs); the last ``len(visible) % workers`` GPUs are left unused.

    Args:
        visible: the GPUs this process sees, as ``CUDA_VISIBLE_DEVICES`` names them
            (:func:`harness.run.device.cuda_probe.visible_gpus`).
        workers: the number of pytest-xdist workers, at least 1.

    Raises:
        ConfigError: more workers than GPUs.
    """
    if workers > len(visible):
        seen = os.environ.get("CUDA_VISIBLE_DEVICES")
        where = f" (CUDA_VISIBLE_DEVICES={seen})" if seen is not None else ""
        raise ConfigError(f"--profile-jobs with pytest-xdist on cuda gives each worker a GPU of its own, and {len(visible)} "
                          f"GPU(s) are visible here{where} for {workers} workers: use -n {len(visible)} or fewer"
                          if visible else "--profile-jobs with pytest-xdist on cuda: no GPU is visible here")
    per = len(visible) // workers
    return [",".join(visible[k * per:(k + 1) * per]) for k in range(workers)]


def check_split(config: pytest.Config, backend: str, reason: str, visible: Sequence[str] | None = None) -> str:
    """Check that ``--profile-jobs`` under pytest-xdist can give the serial run's report, and give a
    ``cuda`` run's workers their GPUs (rewrites ``--tx``). Returns the header's words for the split.

    Args:
        config: the controller's config.
        backend: the backend the run resolved to (``sim``, ``cpu``, ``cuda``, ``mpi``, ``torch``).
        reason: why (for ``auto``: the words of its choice), for the refusal's text.
        visible: the GPUs to split (default: :func:`~harness.run.device.cuda_probe.visible_gpus`).

    Raises:
        ConfigError: ``--dist each``; the ``mpi`` or ``torch`` backend; ``cpu`` with more than one worker; on ``cuda``, more workers than
            GPUs, a worker on another machine, or a spec that sets ``CUDA_VISIBLE_DEVICES`` itself.
    """
    specs = _specs(config)
    n = len(specs)
    if config.getoption("dist", "no") == "each":
        raise ConfigError(f"--profile-jobs with pytest-xdist's --dist each: every test would run on each of the {n} workers, "
                          "so every case would be reported that many times; use -n alone (--dist load) or another --dist mode")
    chose = f" (--backend=auto chose it: {reason.removeprefix('auto: ')})" if reason.startswith("auto") else ""
    if backend == "mpi":
        raise ConfigError("--profile-jobs with pytest-xdist (-n) and --backend=mpi: the mpi backend runs one pipeline rank per "
                          "process that mpirun starts, and pytest-xdist's workers are no MPI ranks; run it without -n")
    if backend == "torch":
        raise ConfigError("--profile-jobs with pytest-xdist (-n) and --backend=torch: the torch backend runs one pipeline rank per "
                          "process (torchrun starts them, or each case launches its own) and times them on this machine's cores, "
                          "which parallel workers would share; run it without -n")
    if backend == "cpu" and n > 1:
        raise ConfigError(f"--profile-jobs with pytest-xdist (-n {n}) on the cpu backend{chose}: cpu cases measure real time on "
                          "this machine's cores, and parallel workers would take cores, caches and memory bandwidth from each "
                          "other's cases, so every measured figure would be disturbed (and flagged contended). The cpu backend's "
                          "one device is this machine: run cpu cases without -n (or with -n 1); -n runs sim cases in parallel "
                          "(--backend=sim), and cuda cases one worker per GPU")
    workers = f"{n} pytest-xdist worker{'s' if n != 1 else ''}"
    if backend != "cuda":
        return f"{workers}, their cases merged into one report"
    import execnet

    for spec in specs:
        xs = execnet.XSpec(spec)
        if not xs.popen or xs.via:
            raise ConfigError(f"--profile-jobs with pytest-xdist on cuda: worker spec {spec!r} runs elsewhere; the harness gives "
                              "each worker its GPUs through CUDA_VISIBLE_DEVICES of a process on this machine (use -n N)")
        if "CUDA_VISIBLE_DEVICES" in xs.env:
            raise ConfigError(f"--profile-jobs with pytest-xdist on cuda: worker spec {spec!r} sets CUDA_VISIBLE_DEVICES itself; "
                              "the harness gives each worker GPUs of its own: drop env:CUDA_VISIBLE_DEVICES from --tx")
    if visible is None:
        from harness.run.device.cuda_probe import visible_gpus

        visible = visible_gpus()
    groups = gpu_groups(visible, n)
    config.option.tx = [f"{spec}//env:CUDA_VISIBLE_DEVICES={group}" for spec, group in zip(specs, groups)]
    per = "one GPU" if len(visible) // n == 1 else f"{len(visible) // n} GPUs"
    unused = f"; {len(visible) % n} GPU(s) unused" if len(visible) % n else ""
    return f"{workers}, {per} each (CUDA_VISIBLE_DEVICES={' | '.join(groups)}){unused}, their cases merged into one report"


def configure(config: pytest.Config, hc: Any) -> None:
    """Register this process's side (see module doc); on the controller of a ``--profile-jobs`` run,
    check the split first and keep its header words in ``hc.split``.

    Args:
        hc: the plugin's :class:`~harness.pytest.plugin.HarnessConfig`.

    Raises:
        ConfigError: see :func:`check_split`.
        BackendUnavailable: the backend cannot run here.
    """
    if is_worker(config):
        if not config.pluginmanager.has_plugin("harness-xdist"):
            config.pluginmanager.register(XdistWorker(hc), "harness-xdist")
    elif splits(config):
        if hc.profile:
            hc.split = check_split(config, hc.choice.name, hc.choice.reason)
        if not config.pluginmanager.has_plugin("harness-xdist"):
            config.pluginmanager.register(XdistController(hc), "harness-xdist")


class XdistWorker:
    """A worker's side: its cases to the controller, at the end of its session."""

    def __init__(self, hc: Any) -> None:
        self._hc = hc

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Put this worker's part in ``workeroutput`` (pytest-xdist sends it after this hook). Not when
        interrupted: the controller publishes nothing of an interrupted run."""
        hc = self._hc
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            return
        index: dict[str, int] = {}
        for i, item in enumerate(session.items):
            index.setdefault(item.nodeid, i)
        end = len(session.items)
        ran = [(index.get(nodeid, end), r) for nodeid, results in hc.by_node.items() for r in results]
        facts = {}
        if hc.results and hc.choice.name == "cuda" and "CUDA_VISIBLE_DEVICES" in os.environ:
            facts["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
        worker = str(session.config.workerinput.get("workerid", "?"))  # type: ignore[attr-defined]
        part = make_part(worker, ran, serialize=hc.profile, facts=facts)
        session.config.workeroutput[PART_KEY] = part.to_wire()  # type: ignore[attr-defined]


class XdistController:
    """The controller's side: each worker's part, as it goes down, into the session and the summary."""

    def __init__(self, hc: Any) -> None:
        self._hc = hc
        self._tests: dict[str, list[str]] = {}  # per worker id, the tests it finished, in order

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = getattr(report, "node", None)  # pytest-xdist's worker, on the reports it relays
        if node is not None and report.when in ("teardown", "???"):  # "???": the test its worker crashed in
            self._tests.setdefault(str(node.gateway.id), []).append(report.nodeid)

    def pytest_testnodedown(self, node: Any, error: object | None) -> None:
        hc = self._hc
        worker = str(node.gateway.id)
        output = getattr(node, "workeroutput", None) or {}
        problem = None
        if PART_KEY in output:
            try:
                part = SessionPart.from_wire(output[PART_KEY], worker)
            except HarnessError as exc:
                problem = str(exc)
            else:
                if part.lines:  # a worker that ran no case adds nothing (an empty report is never published)
                    hc.parts.append(part)
                    if hc.session is not None:
                        hc.session.add_part(part)
                return
        tests = self._tests.get(worker, [])
        if not tests:  # it ran nothing that could be lost
            return
        if problem is None:
            problem = f"went down: {error}" if error else "its session ended without them"
        hc.lost.append({"worker": worker, "error": problem, "tests": tests})


def stop_reason(config: pytest.Config) -> str | None:
    """Why pytest-xdist stopped the run early where a test failure did (``-x``, ``--maxfail``: it then
    ends the run as interrupted, exit status 2, where a serial run ends it as failed); ``None`` for a
    Ctrl-C, or on a run that did not split."""
    reason = getattr(config.pluginmanager.get_plugin("dsession"), "shouldstop", None)
    return str(reason) if reason and "keyboard-interrupt" not in str(reason) else None


def summary_lines(config: pytest.Config, lost: list[dict[str, Any]], cases: bool) -> list[str]:
    """The controller's lines under the case table: each worker that went down before sending its cases
    (``lost``: ``worker``, ``error``, ``tests``), and, where ``cases`` ran, :func:`benchmark_note`."""
    lines = []
    for w in lost:
        tests = ", ".join(w["tests"][:5]) + (", ..." if len(w["tests"]) > 5 else "")
        lines.append(shown_in_terminal(f"pytest-xdist worker {w['worker']} sent no cases ({w['error']}): the cases of the "
                                       f"{len(w['tests'])} test(s) it ran are missing here and from the report: {tests}"))
    note = benchmark_note(config) if cases else None
    return [*lines, note] if note else lines


def benchmark_note(config: pytest.Config) -> str | None:
    """Where pytest-benchmark turned itself off because pytest-xdist distributes the tests (its own
    rule, "Benchmarks are automatically disabled because xdist plugin is active"): what that means for
    the pipeline cases' step times, which the plugin feeds it in a serial run. ``None`` elsewhere."""
    bs = getattr(config, "_benchmarksession", None)
    if bs is None or not getattr(bs, "xdist_warning", False):
        return None
    asked = [name for name, dest in (("--benchmark-json", "benchmark_json"), ("--benchmark-autosave", "benchmark_autosave"),
                                     ("--benchmark-save", "benchmark_save"), ("--benchmark-compare", "benchmark_compare"),
                                     ("--benchmark-compare-fail", "benchmark_compare_fail"))
             if config.getoption(dest, None)]
    options = f" ({', '.join(asked)} given)" if asked else ""
    return ("pipeline-harness: pytest-benchmark turns itself off under pytest-xdist (-n), so the cases' step times were not "
            f"handed to it: --benchmark-json, --benchmark-autosave and --benchmark-compare-fail hold or gate none of them{options}. "
            "The step times are in the table above (and in results.json with --profile-jobs, gated by `python -m harness compare`); "
            "run without -n to benchmark them")
