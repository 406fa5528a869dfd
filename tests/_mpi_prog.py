"""Program the MPI tests launch under ``mpirun``: runs one case with ``backend="mpi"`` and writes what it saw.

Usage: ``mpirun -n P python tests/_mpi_prog.py OUT_DIR SCHEDULE P M F_MS B_MS [KEY=VALUE ...]``
(``KEY=VALUE``: device options, numbers or strings; ``steps=START:END`` sets the window). Every rank writes
``OUT_DIR/rank<R>.json``: its outcome (``ok`` or the error's text) and, on success, the merged records'
figures the tests check. Exits 1 on a failed case, so ``mpirun`` exits non-zero.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    from harness import FixedCost, PipelineCase
    from harness.distributed.transport import import_mpi
    from harness.run.window import parse_steps
    from harness.runner import run_case

    out, schedule, p, m, f_ms, b_ms, *rest = argv
    options: dict[str, object] = {}
    steps = parse_steps("1:4")
    for item in rest:
        key, _, value = item.partition("=")
        if key == "steps":
            steps = parse_steps(value)
            continue
        try:
            options[key] = int(value)
        except ValueError:
            try:
                options[key] = float(value)
            except ValueError:
                options[key] = value
    rank = import_mpi().COMM_WORLD.Get_rank()
    cost = FixedCost(forward_ns=int(float(f_ms) * 1e6), backward_ns=int(float(b_ms) * 1e6), activation_bytes=4096)
    case = PipelineCase(schedule=schedule, stages=int(p), microbatches=int(m), cost=cost, workload="timed")
    doc: dict[str, object] = {"rank": rank}
    code = 0
    try:
        result = run_case(case, backend="mpi", steps=steps, device_options=options)
    except Exception as exc:  # the tests read the message
        doc["outcome"] = f"{type(exc).__name__}: {exc}"
        code = 1
    else:
        rec = result.records
        doc["outcome"] = "ok"
        doc["backend"] = rec.backend
        doc["device"] = rec.device
        doc["steps"] = rec.steps
        doc["step_start_ns"] = rec.step_start_ns
        doc["step_end_ns"] = rec.step_end_ns
        doc["jobs"] = [[j.rank, j.stream, j.stage, j.kind, j.microbatch, j.step, j.start_ns, j.end_ns] for j in rec.jobs]
        doc["step_time_median_ns"] = result.metrics.step_time_median_ns
        doc["step_time_min_ns"] = result.metrics.step_time_min_ns
        doc["warnings"] = result.warnings
    Path(out, f"rank{rank}.json").write_text(json.dumps(doc), encoding="utf-8")
    if code:
        print(f"rank {rank}: {doc['outcome']}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
