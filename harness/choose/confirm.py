"""Confirm the chooser's top rows by running them: predicted step time (``sim``) against the measured one.

:func:`confirm` runs each of the first ``top`` rows of a :class:`~harness.choose.rank.ChooseResult` with
:func:`harness.runner.run_case` on a backend (``cpu``, ``cuda``, ``mpi``, ``torch`` or ``sim``), with the
runner's measurement window (measure-until-stable unless ``steps`` is given), and returns one
:class:`Confirmation` per row: the prediction, the measured median with its confidence interval, and their
ratio. A row whose run fails is reported with the error, and the others still run.

On ``mpi`` (one pipeline rank per MPI process) each row runs as its own ``mpirun -n p`` job
(:mod:`harness.choose.mpi_confirm`), whatever launched the chooser.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.analysis.result import CaseResult
from harness.choose import mpi_confirm
from harness.choose.rank import ChooseResult
from harness.errors import ConfigError, HarnessError
from harness.report.summary import run_notes
from harness.run.window import ProfilingWindow
from harness.runner import run_case

__all__ = ["BACKENDS", "Confirmation", "confirm"]

#: The backends a row can be confirmed on. ``mpi`` launches one ``mpirun -n p`` job per row; ``torch``
#: starts its ranks through torch's elastic launcher (:mod:`harness.distributed.torch_launch`).
BACKENDS = ("sim", "cpu", "cuda", "mpi", "torch")


@dataclass(frozen=True)
class Confirmation:
    """One row run on a backend.

    Attributes:
        rank: the row's rank in the chooser's answer (1 = best).
        label: ``"ZB-H2 v=1 m=32"``.
        backend: the backend it ran on.
        predicted_ns: the chooser's predicted step time (ns).
        measured_ns: the measured median step time (ns); ``None`` where the run failed.
        ci_low_ns, ci_high_ns: the median's confidence interval (ns; the runner's order statistics), where measured.
        steps: recorded steps.
        error: the run's error, where it failed.
        notes: the notes and flags ``python -m harness run`` prints under its table for the same run
            (:func:`harness.report.summary.run_notes`: how far to trust the figures, e.g. jobs under 1 ms on
            ``cpu``, whose thread hand-offs inflate the measured step, and the ``unstable``/``contended`` flags).
        result: the run itself (records, metrics), where it ran in this process (not on ``mpi``, whose
            job runs elsewhere and returns its figures only).
    """

    rank: int
    label: str
    backend: str
    predicted_ns: int
    measured_ns: float | None
    ci_low_ns: float | None = None
    ci_high_ns: float | None = None
    steps: int = 0
    error: str | None = None
    result: CaseResult | None = None
    notes: tuple[str, ...] = ()

    @property
    def ratio(self) -> float | None:
        """measured / predicted, where measured."""
        return None if self.measured_ns is None or self.predicted_ns <= 0 else self.measured_ns / self.predicted_ns

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values (without the run's records)."""
        return {"rank": self.rank, "label": self.label, "backend": self.backend, "predicted_ns": self.predicted_ns,
                "measured_ns": self.measured_ns, "ci_low_ns": self.ci_low_ns, "ci_high_ns": self.ci_high_ns,
                "steps": self.steps, "ratio": self.ratio, "error": self.error, "notes": list(self.notes)}


def confirm(result: ChooseResult, backend: str, top: int = 3, *, steps: range | ProfilingWindow | None = None,
            fitting_only: bool = True, on_row: Callable[[Confirmation], None] | None = None,
            mpirun: str | Sequence[str] = mpi_confirm.MPIRUN, timeout_s: float = mpi_confirm.DEFAULT_TIMEOUT_S) -> list[Confirmation]:
    """Run the first ``top`` rows of ``result`` on ``backend``; predicted vs measured step time.

    Args:
        result: the chooser's answer.
        backend: one of :data:`BACKENDS` (``sim``, ``cpu``, ``cuda``, ``mpi``, ``torch``).
        top: how many rows, in rank order.
        steps: the profiling window (default: the runner's, measure-until-stable); on ``mpi`` a ``range`` or ``None``.
        fitting_only: only rows that fit the limit.
        on_row: called with each confirmation as it is made (the command line prints them).
        mpirun: on ``mpi``, the launcher command before ``-n p`` (:func:`~harness.choose.mpi_confirm.run_row`).
        timeout_s: on ``mpi``, the longest one row's job may take (s).

    Returns:
        One :class:`Confirmation` per row run; a failed one has ``measured_ns`` ``None`` and its ``error``.

    Raises:
        ConfigError: an unknown backend; ``top`` below 1; no row to run; on ``mpi``, a profiling window
            that is not a ``range`` or a row ranked under a comm model without send/receive jobs (``edge``,
            ``free``), before anything runs.
    """
    if backend not in BACKENDS:
        raise ConfigError(f"confirm: unknown backend {backend!r}; a row can be confirmed on {', '.join(BACKENDS)}")
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise ConfigError(f"confirm: top must be a whole number >= 1, got {top!r}")
    rows = [r for r in result.rows if r["fits"] or not fitting_only][:top]
    if not rows:
        raise ConfigError("confirm: no row fits the memory limit, so none is run (run the rows anyway with fitting_only=False)")
    if backend == "mpi":
        if steps is not None and not isinstance(steps, range):
            raise ConfigError("confirm: on mpi the profiling window is a range of steps (START:END) or the default")
        for row in rows:
            mpi_confirm.check_row(row)
    out = []
    for row in rows:
        label = f"{row['schedule']} v={row['v']} m={row['m']}"
        try:
            if backend == "mpi":
                spec = mpi_confirm.row_spec(result.query.base, result.query.p, row, result.query.memory_limit_bytes,
                                            steps if isinstance(steps, range) else None)
                got = mpi_confirm.run_row(spec, mpirun=mpirun, timeout_s=timeout_s)
                item = Confirmation(row["rank"], label, backend, row["step_ns"], got["median_ns"], got["ci_low_ns"], got["ci_high_ns"],
                                    got["steps"], notes=tuple(got.get("notes", ())))
            else:
                run = run_case(result.case(row), backend=backend, steps=steps, case_id=f"#{row['rank']} {label}")
                stats = run.metrics.step_time_stats
                item = Confirmation(row["rank"], label, backend, row["step_ns"], run.metrics.step_time_median_ns,
                                    stats.ci_low if stats is not None else None, stats.ci_high if stats is not None else None,
                                    len(run.metrics.steps), result=run, notes=tuple(run_notes(run)))
        except HarnessError as exc:
            item = Confirmation(row["rank"], label, backend, row["step_ns"], None, error=str(exc))
        if on_row is not None:
            on_row(item)
        out.append(item)
    return out
