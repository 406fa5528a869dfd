"""Confirm one of the chooser's rows on the ``mpi`` backend: the row runs as its own ``mpirun -n p`` job.

The ``mpi`` backend runs one pipeline rank per MPI process (:mod:`harness.distributed.mpi`), so a row of
``p`` pipeline ranks cannot run inside the chooser's own process, nor on the ranks of the chooser's
``mpi4py.futures`` pool (they are busy as its workers). :func:`run_row` writes the row's case to a JSON
file (:func:`row_spec`) and launches::

    mpirun -n p <this python> -m harness.choose.mpi_confirm ROW.json OUT.json

Every process of that job builds the same case (:func:`case_of_spec`) and runs it with
:func:`harness.runner.run_case` on ``mpi``; rank 0 writes the measured figures to ``OUT.json``
(``{"ok": true, "median_ns", "ci_low_ns", "ci_high_ns", "steps"}``, ns), or the error
(``{"ok": false, "error"}``). The launch has a timeout; a missing ``mpirun``, a job that fails, times out
or writes nothing becomes an :class:`~harness.errors.ExecutionError` naming the row.

The job's environment is this process's, without the variables of an MPI launcher that started this
process (:func:`job_env`: a chooser run under ``python -m mpi4py.futures``), so the
inner ``mpirun`` starts a job of its own; ``OMPI_MCA_rmaps_base_oversubscribe=1`` is set unless
given, so that ``p`` may exceed this machine's cores (Open MPI refuses that otherwise; other MPIs
ignore the variable).

A row ranked under a comm model without send/receive jobs (``edge``, ``free``) cannot run on ``mpi``,
which moves data with those jobs: :func:`check_row` refuses it. Under ``stream`` and ``blocking`` the
case asks for send/receive jobs even where the cost model gives transfers no time (``comm=True``);
their sim prediction is unchanged, since the jobs take 0 ns there.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.case import PipelineCase
from harness.distributed.launch import LAUNCHER_SIZE_VARS
from harness.errors import ConfigError, ExecutionError, HarnessError
from harness.model.transformer import TransformerCost

__all__ = ["DEFAULT_TIMEOUT_S", "MPIRUN", "case_of_spec", "check_row", "job_env", "main", "row_spec", "run_row"]

#: The launcher command, before ``-n p`` (split as a shell would; ``--mpirun`` on the command line).
MPIRUN = "mpirun"
#: The longest one row's ``mpirun`` job may take (s): measure-until-stable stops at 10 s of host time
#: per case, and the start of ``p`` Python processes on a loaded machine takes a few seconds more.
DEFAULT_TIMEOUT_S = 300.0
#: Variables an MPI launcher sets in the processes it starts (Open MPI 4 and 5, PMIx, MPICH's Hydra), kept out
#: of the inner job's environment when this process is one of them; a user's own (``OMPI_ALLOW_RUN_AS_ROOT``,
#: ``OMPI_MCA_btl...``) are kept.
_LAUNCHER_PREFIXES = ("OMPI_COMM_WORLD_", "OMPI_APP_CTX_", "OMPI_MCA_orte_", "OMPI_MCA_ess", "OMPI_MCA_pmix", "OMPI_MCA_prte_",
                      "PMIX_", "PMI_", "HYDRA_", "PRTE_")
_LAUNCHER_NAMES = ("OMPI_COMMAND", "OMPI_ARGV", "OMPI_FILE_LOCATION", "OMPI_FIRST_RANKS", "OMPI_NUM_APP_CTX", "OMPI_UNIVERSE_SIZE",
                   "OMPI_MCA_initial_wdir", "OMPI_MCA_mpi_oversubscribe", "OMPI_MCA_shmem_RUNTIME_QUERY_hint", "MPI_LOCALRANKID",
                   "MPI_LOCALNRANKS")
#: Comm models whose plans have send/receive jobs, which the mpi backend moves data with.
_WITH_TRANSFERS = ("stream", "blocking")


def _label(row: Mapping[str, Any]) -> str:
    return f"#{row['rank']} {row['schedule']} v={row['v']} m={row['m']}"


def check_row(row: Mapping[str, Any]) -> None:
    """Refuse a row that cannot run on ``mpi``: its comm model has no send/receive jobs.

    Raises:
        ConfigError: ``row["comm_model"]`` is ``edge`` or ``free`` (names the row and what to use).
    """
    if row["comm_model"] not in _WITH_TRANSFERS:
        raise ConfigError(f"{_label(row)} was ranked under comm model {row['comm_model']!r}, which has no send/receive jobs; the mpi "
                          "backend moves data with them, so it cannot run it: choose with --comm-model stream to confirm on mpi")


def row_spec(base: TransformerCost, p: int, row: Mapping[str, Any], memory_limit_bytes: int | None,
             steps: range | None) -> dict[str, Any]:
    """The plain JSON a row's ``mpirun`` job reads: the model (``base``'s fields), ``p``, the row's
    schedule, ``m``, ``v``, layout, recomputation, options and comm model, the limit (bytes) and the
    recorded steps (``[start, end]``, or ``None`` for measure-until-stable)."""
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
    fields = {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}
    return {"label": _label(row), "base": fields, "p": p, "schedule": row["schedule"], "m": row["m"], "v": row["v"],
            "layout": row["layout"], "recompute": row["recompute"], "options": dict(row["options"]), "comm_model": row["comm_model"],
            "memory_limit_bytes": memory_limit_bytes, "steps": None if steps is None else [steps.start, steps.stop]}


def case_of_spec(spec: Mapping[str, Any]) -> PipelineCase:
    """The case of :func:`row_spec`'s document: the row's case as :meth:`~harness.choose.rank.ChooseResult.case`
    builds it, with send/receive jobs (``comm=True``) for the mpi backend."""
    base = {k: tuple(v) if isinstance(v, list) else v for k, v in spec["base"].items()}
    recompute = spec["recompute"] if isinstance(spec["recompute"], str) else tuple(spec["recompute"])
    cost = TransformerCost(**{**base, "layout": spec["layout"], "layers_per_stage": None, "recompute": recompute})
    return PipelineCase(spec["schedule"], stages=spec["p"], microbatches=spec["m"], chunks=spec["v"], cost=cost,
                        options=dict(spec["options"]), memory_limit_bytes=spec["memory_limit_bytes"], comm_model=spec["comm_model"],
                        comm=True)


def job_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The inner job's environment: ``environ`` without what an MPI launcher set in it (where it did:
    ``OMPI_COMM_WORLD_SIZE``, ``PMIX_RANK`` or ``PMI_SIZE`` present), with Open MPI's oversubscription allowed
    unless ``environ`` says otherwise."""
    launched = any(k in environ for k in (*LAUNCHER_SIZE_VARS, "PMIX_RANK"))
    env = {k: v for k, v in environ.items() if not (launched and (k.startswith(_LAUNCHER_PREFIXES) or k in _LAUNCHER_NAMES))}
    env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    return env


def _tail(text: str, lines: int = 6) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return " | ".join(kept)


def run_row(spec: Mapping[str, Any], *, mpirun: str | Sequence[str] = MPIRUN, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[str, Any]:
    """Run :func:`row_spec`'s row as ``mpirun -n p <python> -m harness.choose.mpi_confirm ROW.json OUT.json``.

    Args:
        spec: the row (:func:`row_spec`).
        mpirun: the launcher command before ``-n p`` (a string is split as a shell would), e.g.
            ``"mpirun --hostfile hosts"``.
        timeout_s: the longest the job may take (s); it is then stopped (its process group: SIGTERM, then SIGKILL).

    Returns:
        Rank 0's figures: ``{"ok": True, "median_ns", "ci_low_ns", "ci_high_ns", "steps", "notes"}`` (ns; ``notes``:
        the notes and flags ``python -m harness run`` prints under its table for the run, :func:`harness.report.summary.run_notes`).

    Raises:
        ExecutionError: the launcher is not found, the job fails, times out, or writes no figures; the
            message names the row and gives the job's last lines.
    """
    label = spec["label"]
    command = shlex.split(mpirun) if isinstance(mpirun, str) else list(mpirun)
    if not command or shutil.which(command[0]) is None:
        raise ExecutionError(f"{label}: cannot confirm on mpi: {command[0] if command else 'the launcher'!r} is not found; the mpi "
                             "backend runs one pipeline rank per MPI process, launched by mpirun (apt-get install openmpi-bin "
                             "libopenmpi-dev; pip install mpi4py), or give the launcher with --mpirun")
    if not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
        raise ConfigError(f"the confirming run's timeout must be above 0 s, got {timeout_s!r}")
    with tempfile.TemporaryDirectory(prefix="harness-confirm-") as tmp:
        row_file, out_file = Path(tmp) / "row.json", Path(tmp) / "out.json"
        row_file.write_text(json.dumps(spec))
        argv = [*command, "-n", str(spec["p"]), sys.executable, "-m", "harness.choose.mpi_confirm", str(row_file), str(out_file)]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=job_env(os.environ),
                                start_new_session=True)
        try:
            output, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _stop(proc)
            raise ExecutionError(f"{label}: the mpirun job confirming it on mpi did not end within {timeout_s:g} s and was "
                                 f"stopped ({shlex.join(argv[:4])} ...)") from None
        doc: dict[str, Any] | None = None
        if out_file.exists():
            try:
                doc = json.loads(out_file.read_text())
            except ValueError:
                doc = None
    if doc is not None and not doc.get("ok"):
        raise ExecutionError(f"{label}: the run on mpi failed: {doc.get('error')}")
    if proc.returncode != 0 or doc is None:
        raise ExecutionError(f"{label}: the mpirun job confirming it on mpi "
                             + (f"exited with status {proc.returncode}" if proc.returncode != 0 else "wrote no figures")
                             + (f": {_tail(output)}" if output.strip() else ""))
    return doc


def _stop(proc: subprocess.Popen[str]) -> None:
    """End the job's process group (mpirun and the ranks it started): SIGTERM, then SIGKILL after 5 s."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.communicate(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue


def main(argv: Sequence[str] | None = None) -> int:
    """The job's entry, in every MPI process: run the row of ``ROW.json`` on ``mpi``; rank 0 writes ``OUT.json``.

    Returns:
        0 when the run measured its steps, 1 when it failed (rank 0's ``OUT.json`` says why), 2 on bad arguments.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: mpirun -n P python -m harness.choose.mpi_confirm ROW.json OUT.json", file=sys.stderr)
        return 2
    row_file, out_file = Path(args[0]), Path(args[1])
    rank = 0
    try:
        from harness.distributed.mpi import mpi_rank
        from harness.report.summary import run_notes
        from harness.runner import run_case

        rank, _ = mpi_rank()
        spec = json.loads(row_file.read_text())
        steps = None if spec["steps"] is None else range(*spec["steps"])
        run = run_case(case_of_spec(spec), backend="mpi", steps=steps, case_id=spec["label"])
        stats = run.metrics.step_time_stats
        doc: dict[str, Any] = {"ok": True, "median_ns": run.metrics.step_time_median_ns,
                               "ci_low_ns": stats.ci_low if stats is not None else None,
                               "ci_high_ns": stats.ci_high if stats is not None else None, "steps": len(run.metrics.steps),
                               "notes": run_notes(run)}
    except (HarnessError, OSError, ValueError, KeyError, TypeError) as exc:
        doc = {"ok": False, "error": str(exc) if isinstance(exc, HarnessError) else f"{type(exc).__name__}: {exc}"}
    if rank == 0:
        from harness.report.atomic import atomic_write_json

        atomic_write_json(out_file, doc)
    return 0 if doc["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
