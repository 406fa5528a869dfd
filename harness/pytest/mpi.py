"""pytest glue for ``--backend=mpi`` (registered by :mod:`harness.pytest.plugin` only when it is asked for).

Under ``mpirun -n P python -m pytest ... --backend=mpi`` every process is a full pytest session.
This plugin keeps them in step and keeps their output apart:

* collection: every process runs rank 0's test order (pytest-randomly, for one, shuffles each
  process differently); a process that collected other tests stops with the difference;
* output: only MPI rank 0 prints pytest's report (the others' standard output goes to the null
  device) and writes reports (the plugin makes no
  :class:`~harness.report.session.ProfileSession` elsewhere); the other processes print only their
  failures and errors, to stderr, prefixed with their rank.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

from harness.distributed.launch import _world

__all__ = ["MpiPytestPlugin", "register"]


class MpiPytestPlugin:
    """Collection order from rank 0; quiet output on the other ranks (see module doc).

    Args:
        world: what the processes talk over: ``Get_rank()``, ``Get_size()`` and ``allgather(obj)``
            (default: ``MPI.COMM_WORLD``; the ``torch`` backend's glue gives a gloo group's).
        option: the option named in messages.
        who: what a process is called in messages.
    """

    def __init__(self, world: Any = None, option: str = "--backend=mpi", who: str = "MPI rank") -> None:
        world = _world() if world is None else world
        self.world = world
        self.option = option
        self.who = who
        self.rank = world.Get_rank()
        self.size = world.Get_size()
        self._devnull: Any = None
        self._null_file: Any = None
        self._failed: dict[str, bool] = {}  # per test, whether a phase failed on this process so far

    def quiet(self) -> None:
        """On ranks other than 0: point this process's standard output (file descriptor 1, where pytest's
        terminal report goes) at the null device; failures still reach stderr (:meth:`pytest_runtest_logreport`)."""
        if self.rank == 0 or self._devnull is not None:
            return
        sys.stdout.flush()
        self._devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(self._devnull, 1)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """On ranks other than 0, give pytest's terminal report a writer on the null device (before its header):
        pytest writes it to a copy of the original standard output, which :meth:`quiet` does not reach."""
        if self.rank == 0:
            return
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            from _pytest.config import create_terminal_writer

            self._null_file = open(os.devnull, "w", encoding="utf-8")
            tr._tw = create_terminal_writer(session.config, self._null_file)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
        """Reorder ``items`` to rank 0's order (a blocking all-gather: every process collects).

        Raises:
            pytest.UsageError: on every process, when one collected other tests than rank 0 (names it and some of them).
        """
        orders = self.world.allgather([item.nodeid for item in items])  # every process learns every other's tests
        order = orders[0]
        for rank, other in enumerate(orders):
            if set(other) != set(order):  # raised on every process alike, so none waits for the others
                extra = sorted(set(other) - set(order))[:3]
                missing = sorted(set(order) - set(other))[:3]
                raise pytest.UsageError(
                    f"{self.option}: {self.who} {rank} collected other tests than rank 0 (only there: {extra}; only on rank 0: "
                    f"{missing}); every process must collect the same tests: run them from the same folder with the same arguments"
                )
        if self.rank == 0:
            return
        mine = {item.nodeid: item for item in items}
        items[:] = [mine[nodeid] for nodeid in order]

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        """At each test's teardown (which every process runs, whatever its setup and call did), all-gather
        whether the test failed on each process; where it failed elsewhere but not here, this teardown
        fails naming the rank, so rank 0's summary and exit status count a failure on any rank."""
        outcome = yield
        report: pytest.TestReport = outcome.get_result()
        failed = self._failed.setdefault(item.nodeid, False) or report.failed
        self._failed[item.nodeid] = failed
        if report.when != "teardown":
            return
        del self._failed[item.nodeid]
        everywhere = self.world.allgather(failed)
        others = [q for q, f in enumerate(everywhere) if f and q != self.rank]
        if others and not failed:
            report.outcome = "failed"
            report.longrepr = (f"{self.option}: {item.nodeid} failed on {self.who}(s) {', '.join(map(str, others))} "
                               f"(their error is on their standard error, marked [{self.who} N])")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.rank != 0 and report.failed:
            sys.stderr.write(f"[{self.who} {self.rank}] {report.nodeid} {report.when} failed:\n{report.longreprtext}\n")
            sys.stderr.flush()

def register(config: pytest.Config) -> None:
    """Register :class:`MpiPytestPlugin` once (from :mod:`harness.pytest.plugin`'s ``pytest_configure``).

    Raises:
        BackendUnavailable: mpi4py or MPI is missing.
    """
    if not config.pluginmanager.has_plugin("harness-mpi"):
        plugin = MpiPytestPlugin()
        config.pluginmanager.register(plugin, "harness-mpi")
        plugin.quiet()
