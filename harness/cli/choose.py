"""``python -m harness choose``: which schedule, micro-batch count, chunks, stage layout and recomputation is
fastest and fits the memory limit (:mod:`harness.choose`, docs/choose.md).

    python -m harness choose --hidden-size 4096 --num-layers 48 --seq-length 2048 --num-attention-heads 32 \\
        --vocab-size 50304 --tflops 400 -p 8 -m 32 --memory-limit 80GiB --out reports-choose
    mpirun -n 4 python -m mpi4py.futures -m harness choose ... --json choose.json   # rank 0 chooses, 3 ranks evaluate

Model flags carry Megatron-LM's argument names. The ranked table goes to standard output, with the
assumptions every figure rests on; ``--json``/``--csv`` write every row, ``--out`` the HTML page (the
ranked table, step time against peak memory with the limit and the Pareto front, and the top rows'
timelines on ``sim``), and ``--run BACKEND`` runs the top rows there: predicted against measured.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

from harness.cli.common import check_out, err, positive_count
from harness.errors import ConfigError

__all__ = ["add_parser", "cmd_choose", "parse_size"]

_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_size(text: str) -> int:
    """Bytes from ``"80GiB"``, ``"79.5 GiB"``, ``"85e9B"``, ``"80GB"`` (decimal) or ``"1024MiB"``.

    Raises:
        argparse.ArgumentTypeError: no unit (a bare number is ambiguous), an unknown unit, or a size below 1 byte.
    """
    found = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if not found:
        raise argparse.ArgumentTypeError(f"expected a size such as 80GiB, got {text!r}")
    number, unit = found.groups()
    if not unit:
        raise argparse.ArgumentTypeError(f"{text!r} has no unit: write e.g. {text.strip()}GiB (2^30 bytes) or {text.strip()}GB (10^9 bytes)")
    if unit.lower() not in _UNITS:
        raise argparse.ArgumentTypeError(f"unknown unit {unit!r} in {text!r}; use B, KiB, MiB, GiB, TiB (or KB, MB, GB, TB)")
    value = int(float(number) * _UNITS[unit.lower()])
    if value < 1:
        raise argparse.ArgumentTypeError(f"a memory limit must be at least 1 byte, got {text!r}")
    return value


def _names(values: list[str] | None) -> tuple[str, ...] | None:
    if values is None:
        return None
    return tuple(n for v in values for n in v.split(",") if n.strip())


def add_parser(sub: Any) -> None:
    """Add the ``choose`` subcommand to the command line's subparsers ``sub``."""
    p = sub.add_parser("choose", help="rank schedules, micro-batches, chunks, layouts and recomputation by predicted step time "
                                      "under a memory limit", description=__doc__.split("\n\n")[0] if __doc__ else None)
    model = p.add_argument_group("model (Megatron-LM's argument names)")
    model.add_argument("--hidden-size", type=positive_count("hidden size"), required=True, help="h")
    model.add_argument("--num-layers", type=positive_count("layers"), required=True, help="transformer layers of the whole model")
    model.add_argument("--seq-length", type=positive_count("tokens"), required=True, help="s, tokens per sequence")
    model.add_argument("--num-attention-heads", type=positive_count("attention heads"), default=None, help="a (activation memory's 5as/h term)")
    model.add_argument("--vocab-size", type=int, default=0, help="V: the embedding on the first stage, the LM head on the last (default 0: none)")
    model.add_argument("--micro-batch-size", type=positive_count("sequences"), default=1, help="b, sequences per micro-batch (default 1)")
    model.add_argument("--ffn-hidden-size", type=positive_count("FFN size"), default=None, help="f (default 4h)")
    model.add_argument("--num-query-groups", type=positive_count("query groups"), default=None, help="g, grouped-query attention (default a)")
    model.add_argument("--tensor-model-parallel-size", type=positive_count("tensor-parallel ranks"), default=1,
                       help="t: each pipeline rank is t GPUs; figures are one GPU's (default 1)")
    model.add_argument("--sequence-parallel", action="store_true", help="sequence parallelism with tensor parallelism")
    model.add_argument("--use-flash-attn", action="store_true", help="flash attention: no attention scores stored")
    model.add_argument("--attention-flops", action="store_true",
                       help="count the attention products (4 s h FLOPs per token and layer) in F, B and I (default: weight GEMMs only)")
    model.add_argument("--use-distributed-optimizer", action="store_true",
                       help="optimizer state sharded over --data-parallel-size ranks: 6 + 12/dp bytes per parameter (default 18)")
    model.add_argument("--tflops", type=float, required=True, help="sustained TFLOP/s per GPU (e.g. 400)")
    sizes = p.add_argument_group("sizes and limit")
    sizes.add_argument("-p", "--pipeline-model-parallel-size", dest="p", type=positive_count("pipeline ranks"), required=True,
                       help="pipeline ranks")
    sizes.add_argument("-m", dest="m", type=positive_count("micro-batches"), nargs="+", default=None,
                       help="micro-batches per step, one value or several")
    sizes.add_argument("--global-batch-size", type=positive_count("sequences"), default=None,
                       help="sequences per step: m = global batch / (micro-batch size x data-parallel size)")
    sizes.add_argument("--data-parallel-size", type=positive_count("data-parallel ranks"), default=1, help="dp (default 1)")
    sizes.add_argument("--memory-limit", type=parse_size, default=None, metavar="SIZE",
                       help="device memory per GPU, e.g. 80GiB (default: none; rank by step time alone)")
    tries = p.add_argument_group("what to try")
    tries.add_argument("--schedules", nargs="+", default=None, metavar="NAME",
                       help="schedules to try (names or aliases, spaces or commas; default: every registered one)")
    tries.add_argument("-v", dest="v", type=positive_count("chunks per rank"), nargs="+", default=[1, 2, 3, 4],
                       help="chunks per rank for the interleaved schedules (default 1 2 3 4; V-shapes always 2)")
    tries.add_argument("--comm-model", default="stream", help="communication model: stream (default), edge, blocking, ...")
    tries.add_argument("--recompute", default="search", choices=("search", "none", "selective", "full"),
                       help="search each stage's recomputation (default), or one mode for all")
    tries.add_argument("--layout", default="search", metavar="search|even|STRING",
                       help="search the stage layout (default), the even split, or a Megatron-Core layout string")
    out = p.add_argument_group("output and runs")
    out.add_argument("--top", type=positive_count("rows"), default=10, help="rows to print, and to run with --run (default 10)")
    out.add_argument("--json", default=None, metavar="FILE", help="write every row and exclusion as JSON")
    out.add_argument("--csv", default=None, metavar="FILE", help="write every row as CSV")
    out.add_argument("--out", default=None, metavar="DIR", help="write the HTML page (index.html and choose.json) there")
    out.add_argument("--timelines", type=int, default=3, metavar="K", help="timelines of the top K rows on the page (default 3; 0: none)")
    out.add_argument("--run", default=None, metavar="BACKEND", help="run the top rows on BACKEND (cpu, cuda, mpi, sim): predicted vs measured")
    out.add_argument("--steps", default=None, metavar="START:END", help="with --run: recorded steps (default: until stable)")
    out.add_argument("--workers", type=positive_count("workers"), default=None, help="pool size (default: every CPU)")
    out.add_argument("--executor", default="auto", choices=("auto", "serial", "process", "mpi"),
                     help="what evaluates the combinations (default auto: mpi under mpi4py.futures, else a process pool)")
    out.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_choose)


def _microbatches(args: argparse.Namespace) -> tuple[int, ...]:
    if args.m is not None and args.global_batch_size is not None:
        raise ConfigError("give -m or --global-batch-size, not both")
    if args.m is not None:
        return tuple(args.m)
    if args.global_batch_size is None:
        raise ConfigError("give -m (micro-batches per step, one value or several) or --global-batch-size with --data-parallel-size")
    per_step = args.micro_batch_size * args.data_parallel_size
    m, rest = divmod(args.global_batch_size, per_step)
    if rest or m < 1:
        raise ConfigError(f"--global-batch-size {args.global_batch_size} is not a multiple of --micro-batch-size x --data-parallel-size "
                          f"= {args.micro_batch_size} x {args.data_parallel_size} = {per_step}")
    return (m,)


def query_of(args: argparse.Namespace) -> Any:
    """The :class:`~harness.choose.query.ChooseQuery` the arguments describe.

    Raises:
        ConfigError: inconsistent sizes (named by their options), or a model the cost model refuses.
    """
    from harness.choose.query import ChooseQuery
    from harness.model.transformer import TransformerCost

    if args.vocab_size < 0:
        raise ConfigError(f"--vocab-size must be 0 or more, got {args.vocab_size}")
    if not args.tflops > 0:
        raise ConfigError(f"--tflops must be above 0, got {args.tflops:g}")
    if args.sequence_parallel and args.tensor_model_parallel_size == 1:
        raise ConfigError("--sequence-parallel shards the sequence over tensor-parallel ranks: give --tensor-model-parallel-size above 1")
    base = TransformerCost(
        hidden_size=args.hidden_size, seq_len=args.seq_length, micro_batch_size=args.micro_batch_size, num_layers=args.num_layers,
        tflops=args.tflops, attention=args.attention_flops, vocab_size=args.vocab_size, num_attention_heads=args.num_attention_heads,
        num_query_groups=args.num_query_groups, ffn_hidden_size=args.ffn_hidden_size,
        bytes_per_param=6 + 12 / args.data_parallel_size if args.use_distributed_optimizer else 18.0,
        tensor_parallel_size=args.tensor_model_parallel_size, sequence_parallel=args.sequence_parallel,
        flash_attention=args.use_flash_attn)
    return ChooseQuery(base, args.p, _microbatches(args), tuple(args.v), _names(args.schedules), args.comm_model, args.recompute,
                       args.layout, args.memory_limit)


def _gib(value: int) -> str:
    return f"{value / 2**30:.2f}"


def _recompute_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    modes = list(value)
    if len(set(modes)) == 1:
        return modes[0]
    runs: list[str] = []
    k = 0
    while k < len(modes):
        j = k
        while j + 1 < len(modes) and modes[j + 1] == modes[k]:
            j += 1
        runs.append(f"{modes[k]}[{k}]" if j == k else f"{modes[k]}[{k}-{j}]")
        k = j + 1
    return ",".join(runs)


def table(rows: list[dict[str, Any]], limit: int | None) -> str:
    """The ranked rows as a fixed-width text table (times in ms, memory in GiB); where the rows differ in ``m``,
    with the step time per micro-batch (``ms/m``) they are ranked by."""
    per_mb = len({r["m"] for r in rows}) > 1
    head: tuple[str, ...] = ("#", "schedule", "v", "m", "step ms", *(("ms/m",) if per_mb else ()), "bubble", "peak GiB", "fits",
                             "recompute", "layout")
    lines = [head]
    for r in rows:
        lines.append((str(r["rank"]) + ("*" if r["best"] else ""), r["schedule"], str(r["v"]), str(r["m"]), f"{r['step_ns'] / 1e6:,.1f}",
                      *((f"{r['step_ns'] / r['m'] / 1e6:,.2f}",) if per_mb else ()),
                      f"{100 * r['bubble']:.1f}%", _gib(r["peak_bytes"]), ("yes" if r["fits"] else "NO") if limit is not None else "-",
                      _recompute_text(r["recompute"]), r["layout"]))
    widths = [max(len(line[k]) for line in lines) for k in range(len(head) - 1)]
    right = {0, 2, 3, 4, 5, 6, 7} if per_mb else {0, 2, 3, 4, 5, 6}
    out = []
    for line in lines:
        cells = [c.rjust(w) if k in right else c.ljust(w) for k, (c, w) in enumerate(zip(line, widths))]
        out.append("  ".join([*cells, line[-1]]).rstrip())
    return "\n".join(out)


def _json_bytes(doc: dict[str, Any]) -> bytes:
    """The chooser's JSON document as ``--json`` and ``--out``'s ``choose.json`` hold it (indented by one, UTF-8)."""
    return json.dumps(doc, indent=1, allow_nan=False).encode("utf-8")


def _csv_text(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["rank", "schedule", "v", "m", "step_ns", "bubble", "peak_bytes", "fits", "best", "layout", "recompute", "options",
                "comm_model", "peak_bytes_per_rank"])
    for r in rows:
        rec = r["recompute"] if isinstance(r["recompute"], str) else "|".join(r["recompute"])
        w.writerow([r["rank"], r["schedule"], r["v"], r["m"], r["step_ns"], f"{r['bubble']:.6f}", r["peak_bytes"], r["fits"], r["best"],
                    r["layout"], rec, ";".join(f"{k}={v}" for k, v in r["options"].items()), r["comm_model"],
                    "|".join(map(str, r["peak_bytes_per_rank"]))])
    return buf.getvalue()


def _even_baseline_line(rows: list[dict[str, Any]]) -> str | None:
    """The chosen row against the best schedule on the even split (the layout most people start from), compared as
    the rows are ranked: by step time, or per micro-batch where the rows differ in ``m``."""
    from harness.choose.layout_search import EVEN_BEST

    best = rows[0]
    per_mb = len({r["m"] for r in rows}) > 1
    evens = [(b["step_ns"] / r["m"] if per_mb else b["step_ns"], b["step_ns"], r["schedule"], r["v"], r["m"]) for r in rows
             for name, b in r["search"]["baselines"].items() if name == EVEN_BEST and b["fits"]]
    if not evens:
        return "no schedule fits on the even split: the searched layout or recomputation is what makes it fit"
    key, step, schedule, v, m = min(evens)
    mine = best["step_ns"] / best["m"] if per_mb else best["step_ns"]
    gain = 100 * (key - mine) / key
    head = (f"the best even-split schedule ({schedule} v={v} m={m}, best uniform recomputation): {step / 1e6:,.1f} ms"
            + (f" ({key / 1e6:,.2f} ms per micro-batch)" if per_mb else ""))
    if abs(gain) < 0.05:
        return head + ", as fast as the choice: the layout and recomputation search gains nothing here"
    return head + f", {abs(gain):.1f} % {'slower' if gain >= 0 else 'faster'} than the choice" + (" per micro-batch" if per_mb else "")


def cmd_choose(args: argparse.Namespace) -> int:
    """Rank, print, and write what the arguments ask.

    Returns:
        0 (also when nothing fits: the table says so, and the least limit that would fit).

    Raises:
        HarnessError: bad arguments (named), an executor that cannot run here, an unwritable output.
    """
    from harness.choose.rank import choose
    from harness.report.atomic import write_all

    check_out(args.out)
    for option, value in (("--json", args.json), ("--csv", args.csv)):
        if value is not None and not value.strip():
            raise ConfigError(f"{option} is empty; give a file")
    if args.timelines < 0:
        raise ConfigError(f"--timelines must be 0 or more, got {args.timelines}")
    steps = None
    if args.steps is not None:
        if args.run is None:
            raise ConfigError("--steps is for --run (the recorded steps of the confirming runs)")
        from harness.run.window import parse_steps

        steps = parse_steps(args.steps)
    query = query_of(args)
    result = choose(query, workers=args.workers, executor=args.executor, progress=not args.no_progress and sys.stderr.isatty())
    doc = result.to_document()
    rows = result.rows
    n_comb = len(rows) + len(result.excluded)
    print(f"choose: {n_comb} combination(s) at p={query.p}, {len(rows)} evaluated, {len(result.excluded)} excluded "
          f"({result.elapsed_s:.1f} s, {result.executor})")
    if rows:
        print(table(rows[: args.top], query.memory_limit_bytes))
        if len(rows) > args.top:
            print(f"... {len(rows) - args.top} more row(s) (--top, --json, --csv)")
    best = result.best
    if best is not None:
        print(f"chosen: {best['schedule']} v={best['v']} m={best['m']}, layout {best['layout']}, recompute "
              f"{_recompute_text(best['recompute'])}: {best['step_ns'] / 1e6:,.1f} ms, peak {_gib(best['peak_bytes'])} GiB"
              + (f" of {_gib(query.memory_limit_bytes)} GiB" if query.memory_limit_bytes is not None else ""))
        line = _even_baseline_line(rows)
        if line:
            print(line)
    elif rows:
        print(f"nothing fits {_gib(query.memory_limit_bytes or 0)} GiB: the least limit at which one would is "
              f"{_gib(doc['smallest_fitting_limit_bytes'])} GiB ({rows[0]['schedule']} v={rows[0]['v']} m={rows[0]['m']} at "
              f"{doc['smallest_fitting_limit_bytes']} bytes)" if doc["smallest_fitting_limit_bytes"] else "nothing fits")
    if result.excluded:
        print("excluded:")
        for e in result.excluded[: max(args.top, 10)]:
            where = " ".join(f"{k}={e[k]}" for k in ("v", "m") if e.get(k) is not None)
            print(f"  {e['schedule']} {where}: {e['reason']}")
        if len(result.excluded) > max(args.top, 10):
            print(f"  ... {len(result.excluded) - max(args.top, 10)} more (--json)")
    print("assumptions: bubble = " + doc["bubble_normalization"])
    for a in doc["assumptions"]:
        print(f"  - {a}")
    # every output rendered first, then written all or none (a full disk leaves the earlier files as they were)
    files: dict[Path, bytes] = {}
    if args.json:
        files[Path(args.json)] = _json_bytes(doc)
    if args.csv:
        files[Path(args.csv)] = _csv_text(rows).encode("utf-8")
    if args.out:
        from harness.report.choose_page import render_choose_page
        from harness.runner import run_case

        out = Path(args.out)
        if out.exists() and not out.is_dir():
            raise ConfigError(f"--out {str(out)!r} is a file, not a folder")
        timelines = [(f"#{r['rank']} {r['schedule']} v={r['v']} m={r['m']}", run_case(result.case(r), backend="sim"))
                     for r in rows[: args.timelines]]
        files[out / "index.html"] = render_choose_page(doc, timelines).encode("utf-8")
        files[out / "choose.json"] = _json_bytes(doc)
    if files:
        given = ", ".join(o for o, v in (("--json", args.json), ("--csv", args.csv), ("--out", args.out)) if v)
        write_all(files, f"nothing of this run was written ({given}), and the files already there are unchanged")
        for path in [Path(p) for p in (args.json, args.csv) if p] + ([Path(args.out) / "index.html"] if args.out else []):
            print(f"wrote {path}")
    if args.run:
        _confirm(result, args.run, args.top, steps)
    return 0


def _confirm(result: Any, backend: str, top: int, steps: Any) -> None:
    from harness.choose.confirm import Confirmation, confirm

    print(f"running the top {min(top, sum(1 for r in result.rows if r['fits']))} fitting row(s) on {backend}:")

    def show(c: Confirmation) -> None:
        if c.measured_ns is None:
            err(f"  #{c.rank} {c.label}: failed: {c.error}")
            return
        ci = (f" [{c.ci_low_ns / 1e6:,.1f}, {c.ci_high_ns / 1e6:,.1f}]" if c.ci_low_ns is not None and c.ci_high_ns is not None else "")
        print(f"  #{c.rank} {c.label}: predicted {c.predicted_ns / 1e6:,.1f} ms, measured {c.measured_ns / 1e6:,.1f} ms{ci} "
              f"over {c.steps} step(s): {c.ratio:.3f}x")

    confirm(result, backend, top, steps=steps, on_row=show)
