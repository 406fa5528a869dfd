"""A case of ours printed as PaddlePaddle profiler lines (``export-paddle``), for tools that parse them;
see :mod:`harness.imports.paddle` for the format.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.imports.paddle_log import _LOG_NAME, _TYPE_OF, EXPORT_MARK, _natural, export_case_of
from harness.report.atomic import ensure_writable_dir, first_missing, remove_empty_tree, write_all

__all__ = ["DEFAULT_EPOCH_NS", "NOT_EXPORTED", "left_out", "paddle_log_lines", "write_paddle_logs"]

#: Job kinds Paddle's profiler has no type for: an export leaves them out (:func:`left_out` counts them).
NOT_EXPORTED = frozenset({"UNSHARD", "RESHARD", "REDUCE_GRAD"})

#: Default epoch time of our time base 0 when a case has none (2023-11-14 22:13:20 UTC).
DEFAULT_EPOCH_NS = 1_700_000_000 * 10**9


def _ms(ns: int) -> str:
    return f"{ns // 1_000_000}.{ns % 1_000_000:06d}"


def paddle_log_lines(case: dict[str, Any], rank: int, epoch_ns: int | None = None) -> list[str]:
    """Our jobs of ``rank`` printed as PaddlePaddle's profiler lines, in start order per step.

    Kinds map back to types (F ``forward``, B ``backward``, I ``backward_b``,
    W ``backward_w``, OPT ``optimizer``, and the send/receive jobs newer Paddle
    prints, SEND_F ``send_forward``, RECV_F ``recv_forward``, SEND_B
    ``send_backward``, RECV_B ``recv_backward``; a chunk suffix ``forward1`` when
    ``v > 1``); data-parallel jobs (``UNSHARD``, ``RESHARD``, ``REDUCE_GRAD``,
    :data:`NOT_EXPORTED`) are left out: Paddle has no type for them. ``Job (N)``
    carries the micro-batch id, as Paddle prints it.

    Args:
        case: a results-document case.
        rank: the rank (device) to print.
        epoch_ns: epoch time of the case's time base 0 (default: the case's
            ``device.time_base_epoch_ns`` or :data:`DEFAULT_EPOCH_NS`).
    """
    base = epoch_ns if epoch_ns is not None else int((case.get("device") or {}).get("time_base_epoch_ns", DEFAULT_EPOCH_NS))
    v = int(case["schedule"].get("v", 1))
    jobs = case["jobs"]
    idx = [i for i in range(len(jobs["kind"])) if jobs["rank"][i] == rank and jobs["kind"][i] not in NOT_EXPORTED]
    idx.sort(key=lambda i: (jobs["step"][i], jobs["start_ns"][i]))
    lines = []
    if case["steps"]:
        lines.append(f"Schedule Profiler start at step {case['steps'][0]} and end at step {case['steps'][-1] + 1}")
    for i in idx:
        kind = jobs["kind"][i]
        job_type = _TYPE_OF.get(kind, kind) + (str(jobs["chunk"][i]) if v > 1 and kind in _TYPE_OF else "")
        mb = jobs["microbatch"][i] if jobs["microbatch"][i] is not None else 0
        start, end = base + jobs["start_ns"][i], base + jobs["end_ns"][i]
        stamp = datetime.fromtimestamp(end / 1e9, tz=timezone.utc)
        lines.append(
            f"I{stamp:%m%d %H:%M:%S.%f} {1000 + rank} standalone_executor.cc:217] Profiler Info: Job ({mb}), type = {job_type}, "
            f"micro_batch_id = {mb}, job_start_time = {_ms(start)}, job_end_time = {_ms(end)}"
        )
    return lines


def left_out(case: dict[str, Any]) -> dict[str, int]:
    """Per kind, how many of ``case``'s jobs an export leaves out (:data:`NOT_EXPORTED`); empty when none."""
    out: dict[str, int] = {}
    for kind in case["jobs"]["kind"]:
        if kind in NOT_EXPORTED:
            out[kind] = out.get(kind, 0) + 1
    return out


def write_paddle_logs(folder: Path, case: dict[str, Any], epoch_ns: int | None = None) -> list[Path]:
    """Write ``folder/workerlog.<rank>`` for every rank of ``case`` (see :func:`paddle_log_lines`),
    each ending with :data:`EXPORT_MARK`. All logs are written beside their targets first and
    then moved into place (:func:`harness.report.atomic.write_all`), so a failed export (a full disk)
    changes nothing and leaves no folder it created; logs an earlier
    export left for ranks this case does not have are removed, so an import of the folder
    reads this case alone.

    Raises:
        ConfigError: ``folder`` is a file or cannot be created, or it holds worker logs
            that no export wrote, here or in ``machine*/`` sub-folders (real
            PaddlePaddle logs are never overwritten, nor left for an import to prefer).
        DiskFullError: no room for a log (a full device or quota, the file-size limit): names
            ``folder``, the log and its bytes; nothing in ``folder`` has changed.
        OSError: a file cannot be written otherwise; nothing in ``folder`` has changed then.
    """
    folder = Path(folder)
    created = first_missing(folder)
    ensure_writable_dir(folder, "log folder")
    try:
        existing = [path for path in folder.iterdir() if _LOG_NAME.match(path.name) and path.is_file()]
        blocked = [path.name for path in folder.iterdir() if _LOG_NAME.match(path.name) and not path.is_file()]
        if blocked:  # a folder (or other non-file) where a log goes: refuse before moving anything in
            raise ConfigError(f"{folder}: {', '.join(sorted(blocked, key=_natural))} is not a file; export-paddle writes its worker logs there")
        nested = [f"{d.name}/{f.name}" for d in folder.iterdir() if d.is_dir() and d.name.startswith("machine")
                  for f in d.iterdir() if _LOG_NAME.match(f.name)]
        foreign = sorted((path.name for path in existing if export_case_of(path) is None), key=_natural) + sorted(nested, key=_natural)
        if foreign:
            raise ConfigError(
                f"{folder} holds worker logs that export-paddle did not write ({', '.join(foreign[:8])}"
                f"{f', ... ({len(foreign) - 8} more)' if len(foreign) > 8 else ''}); export into an empty folder "
                "(or one of earlier exports) so they are not overwritten or mixed into an import"
            )
        mark = f"{EXPORT_MARK} from case {case['id']!r}"
        logs = {folder / f"workerlog.{rank}": ("\n".join([*paddle_log_lines(case, rank, epoch_ns), mark]) + "\n").encode("utf-8")
                for rank in range(int(case["schedule"]["p"]))}
        kept = (f"nothing of this export was published, and {folder}, which it had created, is removed again" if created is not None
                else f"nothing of this export was published, and {folder} is unchanged")
        out = write_all(logs, kept, folder)
    except BaseException:
        if created is not None:
            remove_empty_tree(created)  # a folder this export created, left empty: gone again
        raise
    for path in existing:
        if path not in out:
            path.unlink()  # an earlier export's rank this case does not have
    return out
