"""``python -m harness choose``: which schedule, micro-batch count, chunks, stage layout and recomputation is
fastest and fits the memory limit (:mod:`harness.choose`, docs/choose.md).

    python -m harness choose --hidden-size 4096 --num-layers 48 --seq-length 2048 --num-attention-heads 32 \\
        --vocab-size 50304 --tflops 400 -p 8 -m 32 --memory-limit 80GiB --out reports-choose
    mpirun -n 4 python -m mpi4py.futures -m harness choose ... --json choose.json   # rank 0 chooses, 3 ranks evaluate

Model flags carry Megatron-LM's argument names. The ranked table goes to standard output, with the
assumptions every figure rests on; ``--json``/``--csv`` write every row, ``--out`` the HTML page (the
ranked table, step time against peak memory with the limit and the Pareto front, and the top rows'
timelines on ``sim``), and ``--run BACKEND`` runs the top rows there (on ``mpi`` each as its own ``mpirun -n p`` job):
predicted against measured.

Exit status: 0 a row that fits the limit is chosen; 1 none is (no row fits the limit, or no combination could
be evaluated: the table, the files and the reasons are written all the same, and ``--run`` runs nothing);
2 a bad argument (refused before anything is evaluated), an unwritable output, or a ``--run`` row whose run failed.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from harness.cli.common import check_out, err, positive_count
from harness.errors import ConfigError
from harness.report.numbers import ms_text

__all__ = ["NOTHING_CHOSEN", "add_parser", "cmd_choose", "parse_size"]

#: What ``--run`` takes (:data:`harness.choose.confirm.BACKENDS`, repeated here so that the parser needs no import of it;
#: tests/test_choose.py checks that the two agree).
_RUN_BACKENDS = ("sim", "cpu", "cuda", "mpi", "torch")

#: The exit status when no row is chosen: none fits the limit, or no combination could be evaluated (the output,
#: with the reasons, is printed and written all the same). 2 is a bad argument or a failed ``--run``.
NOTHING_CHOSEN = 1

_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


#: The largest memory limit taken (bytes): 1 EiB, far beyond any device; a larger one is a typo's.
MAX_LIMIT_BYTES = 2**60

#: How the accepted units are spelled, for the help and the error texts (any case: ``gib`` and ``GIB`` are ``GiB``).
UNITS_TEXT = "B, KB, MB, GB, TB (powers of 10^3) or KiB, MiB, GiB, TiB (powers of 2^10), in any case"


def parse_size(text: str) -> int:
    """Bytes from ``"80GiB"``, ``"79.5 GiB"``, ``"85e9B"``, ``"80GB"`` (decimal) or ``"1024MiB"``; the unit in any
    case (``80gib`` is ``80GiB``), rounded down to a whole byte.

    Raises:
        argparse.ArgumentTypeError: no unit (a bare number is ambiguous), an unknown unit, a size below 1 byte, or
            one above :data:`MAX_LIMIT_BYTES` (1 EiB).
    """
    found = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if not found:
        raise argparse.ArgumentTypeError(f"expected a size such as 80GiB, got {text!r}")
    number, unit = found.groups()
    if not unit:
        raise argparse.ArgumentTypeError(f"{text!r} has no unit: write e.g. {text.strip()}GiB (2^30 bytes) or {text.strip()}GB (10^9 bytes)")
    if unit.lower() not in _UNITS:
        raise argparse.ArgumentTypeError(f"unknown unit {unit!r} in {text!r}; use {UNITS_TEXT}")
    amount = float(number) * _UNITS[unit.lower()]  # inf for '1e400GiB': refused below, not an OverflowError
    if not amount <= MAX_LIMIT_BYTES:
        raise argparse.ArgumentTypeError(f"a memory limit of {text.strip()!r} is more than 1 EiB (2^60 bytes) per GPU; "
                                         "check the number and its unit")
    value = int(amount)
    if value < 1:
        raise argparse.ArgumentTypeError(f"a memory limit must be at least 1 byte, got {text!r}")
    return value


def _names(values: list[str] | None) -> tuple[str, ...] | None:
    if values is None:
        return None
    return tuple(n for v in values for n in v.split(",") if n.strip())


#: The chunks per rank tried by default.
_DEFAULT_V = [1, 2, 3, 4]
#: Timelines of the top rows on the page, by default.
_DEFAULT_TIMELINES = 3


def add_parser(sub: Any) -> None:
    """Add the ``choose`` subcommand to the command line's subparsers ``sub``."""
    p = sub.add_parser("choose", help="rank schedules, micro-batches, chunks, layouts and recomputation by predicted step time "
                                      "under a memory limit", description=__doc__.split("\n\n")[0] if __doc__ else None,
                       epilog=__doc__.split("\n\n")[-1].replace("``", "'") if __doc__ else None)
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
    links = p.add_argument_group("links (default: transfers and collectives take no time)")
    links.add_argument("--p2p-bandwidth", type=float, default=None, metavar="GB/s",
                       help="point-to-point bandwidth between pipeline ranks, gigabytes per second (a 200 Gbit/s link: 25); "
                            "an activation of s b h elements (/t with sequence parallelism) then takes latency + bytes / bandwidth")
    links.add_argument("--p2p-latency", type=float, default=0.0, metavar="US",
                       help="point-to-point latency per transfer, microseconds (default 0)")
    links.add_argument("--tp-bandwidth", type=float, default=None, metavar="GB/s",
                       help="each GPU's bandwidth in the tensor-parallel collectives, gigabytes per second (with "
                            "--tensor-model-parallel-size above 1): two all-reduces of s b h per layer in F and in the backward")
    sizes = p.add_argument_group("sizes and limit")
    sizes.add_argument("-p", "--pipeline-model-parallel-size", dest="p", type=positive_count("pipeline ranks"), required=True,
                       help="pipeline ranks")
    sizes.add_argument("-m", dest="m", type=positive_count("micro-batches"), nargs="+", default=None,
                       help="micro-batches per step, one value or several")
    sizes.add_argument("--global-batch-size", type=positive_count("sequences"), default=None,
                       help="sequences per step: m = global batch / (micro-batch size x data-parallel size)")
    sizes.add_argument("--data-parallel-size", type=positive_count("data-parallel ranks"), default=1, help="dp (default 1)")
    sizes.add_argument("--memory-limit", type=parse_size, default=None, metavar="SIZE",
                       help=f"device memory per GPU with its unit, e.g. 80GiB or 85GB: {UNITS_TEXT}; a bare number is "
                            "refused, and so is one above 1 EiB (default: none; rank by step time alone)")
    tries = p.add_argument_group("what to try")
    tries.add_argument("--schedules", nargs="+", default=None, metavar="NAME",
                       help="schedules to try (names or aliases, spaces or commas; default: every registered one)")
    tries.add_argument("-v", dest="v", type=positive_count("chunks per rank"), nargs="+", default=list(_DEFAULT_V),
                       help="chunks per rank for the interleaved schedules (default 1 2 3 4; V-shapes always 2)")
    tries.add_argument("--comm-model", default="stream",
                       help="communication model: stream (default), edge, blocking, ...; transfers take time only with "
                            "--p2p-bandwidth or --p2p-latency")
    tries.add_argument("--recompute", default="search", choices=("search", "none", "selective", "full"),
                       help="search each stage's recomputation (default), or one mode for all")
    tries.add_argument("--layout", default="search", metavar="search|even|STRING",
                       help="search the stage layout (default), the even split, or a Megatron-Core layout string of p x v stages "
                            "(a stage count that is not a multiple of p is refused)")
    out = p.add_argument_group("output and runs")
    out.add_argument("--top", type=positive_count("rows"), default=10, help="rows to print, and to run with --run (default 10)")
    out.add_argument("--json", default=None, metavar="FILE", help="write every row and exclusion as JSON")
    out.add_argument("--csv", default=None, metavar="FILE", help="write every row as CSV")
    out.add_argument("--out", default=None, metavar="DIR", help="write the HTML page (index.html and choose.json) there")
    out.add_argument("--timelines", type=int, default=_DEFAULT_TIMELINES, metavar="K",
                     help="timelines of the top K rows on the page (default 3; 0: none)")
    out.add_argument("--run", default=None, choices=_RUN_BACKENDS, metavar="BACKEND",
                     help=f"run the top fitting rows on BACKEND ({', '.join(_RUN_BACKENDS)}): predicted vs measured; on mpi each row "
                          "runs as its own 'mpirun -n p' job; exit 2 when a row's run fails")
    out.add_argument("--steps", default=None, metavar="START:END", help="with --run: recorded steps (default: until stable)")
    out.add_argument("--mpirun", default=None, metavar="COMMAND",
                     help="with --run mpi: the launcher before '-n p' (default 'mpirun'; e.g. 'mpirun --hostfile hosts')")
    out.add_argument("--run-timeout", type=float, default=None, metavar="SECONDS",
                     help="with --run mpi: the longest one row's mpirun job may take (default 300)")
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
    if not 0 < args.tflops < float("inf"):
        raise ConfigError(f"--tflops must be a number of TFLOP/s above 0, got {args.tflops:g}")
    if args.sequence_parallel and args.tensor_model_parallel_size == 1:
        raise ConfigError("--sequence-parallel shards the sequence over tensor-parallel ranks: give --tensor-model-parallel-size above 1")
    for flag, value in (("--p2p-bandwidth", args.p2p_bandwidth), ("--tp-bandwidth", args.tp_bandwidth)):
        if value is not None and not 0 < value < float("inf"):
            raise ConfigError(f"{flag} must be a number of gigabytes per second above 0, got {value:g}")
    if not 0 <= args.p2p_latency < float("inf"):
        raise ConfigError(f"--p2p-latency must be a number of microseconds, 0 or more, got {args.p2p_latency:g}")
    if args.tp_bandwidth is not None and args.tensor_model_parallel_size == 1:
        raise ConfigError("--tp-bandwidth is the bandwidth of the tensor-parallel collectives: give --tensor-model-parallel-size above 1")
    base = TransformerCost(
        hidden_size=args.hidden_size, seq_len=args.seq_length, micro_batch_size=args.micro_batch_size, num_layers=args.num_layers,
        tflops=args.tflops, attention=args.attention_flops, vocab_size=args.vocab_size, num_attention_heads=args.num_attention_heads,
        num_query_groups=args.num_query_groups, ffn_hidden_size=args.ffn_hidden_size,
        bytes_per_param=6 + 12 / args.data_parallel_size if args.use_distributed_optimizer else 18.0,
        tensor_parallel_size=args.tensor_model_parallel_size, sequence_parallel=args.sequence_parallel,
        flash_attention=args.use_flash_attn, p2p_gbytes_per_s=args.p2p_bandwidth, p2p_latency_ns=round(args.p2p_latency * 1000),
        tp_gbytes_per_s=args.tp_bandwidth)
    from harness.choose.query import check_layout

    try:
        check_layout(args.layout, base, args.p)
    except ConfigError as exc:
        raise ConfigError(f"--layout: {exc}") from None
    return ChooseQuery(base, args.p, _microbatches(args), tuple(args.v), _names(args.schedules), args.comm_model, args.recompute,
                       args.layout, args.memory_limit)


def _gib(value: int) -> str:
    return f"{value / 2**30:.2f}"


def _size(value: int) -> str:
    """``value`` bytes in the largest binary unit it holds at least one of (``"80.00 GiB"``, ``"1.00 MiB"``, ``"512 B"``),
    so that a small limit does not print as ``0.00 GiB``."""
    for unit, name in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if value >= unit:
            return f"{value / unit:.2f} {name}"
    return f"{value} B"


def _ms3(ns: float) -> str:
    """``ns`` in ms with three decimals (``"0.110"``, ``"1,390.000"``): predicted and measured step times in one unit and
    precision, so that a sub-millisecond step does not print as ``0.1``."""
    return f"{ns / 1e6:,.3f}"


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


def table(rows: list[dict[str, Any]], limit: int | None, per_mb: bool | None = None) -> str:
    """The ranked rows as a fixed-width text table (times in ms, memory in GiB); where the rows differ in ``m``,
    with the step time per micro-batch (``ms/m``) they are ranked by; ``per_mb`` says so for a part of the ranking
    (``--top``), from all its rows."""
    if per_mb is None:
        per_mb = len({r["m"] for r in rows}) > 1
    head: tuple[str, ...] = ("#", "schedule", "v", "m", "step ms", *(("ms/m",) if per_mb else ()), "bubble", "peak GiB", "fits",
                             "recompute", "layout")
    lines = [head]
    for r in rows:
        lines.append((str(r["rank"]) + ("*" if r["best"] else ""), r["schedule"], str(r["v"]), str(r["m"]), ms_text(r["step_ns"]),
                      *((ms_text(r["step_ns"] / r["m"], 2),) if per_mb else ()),
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
    return (json.dumps(doc, indent=1, allow_nan=False) + "\n").encode("utf-8")


def _csv_text(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["rank", "schedule", "v", "m", "step_ns", "bubble_fraction", "peak_bytes", "fits", "best", "layout", "recompute", "options",
                "comm_model", "peak_bytes_per_rank"])
    for r in rows:
        rec = r["recompute"] if isinstance(r["recompute"], str) else "|".join(r["recompute"])
        w.writerow([r["rank"], r["schedule"], r["v"], r["m"], r["step_ns"], f"{r['bubble']:.6f}", r["peak_bytes"], r["fits"], r["best"],
                    r["layout"], rec, ";".join(f"{k}={v}" for k, v in r["options"].items()), r["comm_model"],
                    "|".join(map(str, r["peak_bytes_per_rank"]))])
    return buf.getvalue()


def _even_baseline_line(rows: list[dict[str, Any]]) -> str | None:
    """The chosen row against the best schedule on the even split (the layout most people start from), compared as
    the rows are ranked: by step time, or per micro-batch where the rows differ in ``m``. Where the layout was given,
    against the best schedule on that layout with one recomputation mode for every stage (what the per-stage
    recomputation gains)."""
    from harness.choose.layout_search import EVEN_BEST, GIVEN_BEST

    best = rows[0]
    per_mb = len({r["m"] for r in rows}) > 1
    given = not any(EVEN_BEST in r["search"]["baselines"] for r in rows) and any(GIVEN_BEST in r["search"]["baselines"] for r in rows)
    name = GIVEN_BEST if given else EVEN_BEST
    where = f"on the given layout {best['layout']}" if given else "on the even split"
    evens = [(b["step_ns"] / r["m"] if per_mb else b["step_ns"], b["step_ns"], r["schedule"], r["v"], r["m"]) for r in rows
             for label, b in r["search"]["baselines"].items() if label == name and b["fits"]]
    if not evens:
        if given:
            return (f"no schedule fits {where} with one recomputation mode for every stage: the per-stage recomputation is what "
                    "makes it fit")
        return "no schedule fits on the even split: the searched layout or recomputation is what makes it fit"
    key, step, schedule, v, m = min(evens)
    mine = best["step_ns"] / best["m"] if per_mb else best["step_ns"]
    gain = 100 * (key - mine) / key
    head = (f"the best schedule {where} ({schedule} v={v} m={m}, best uniform recomputation): {ms_text(step)} ms"
            + (f" ({ms_text(key, 2)} ms per micro-batch)" if per_mb else ""))
    if abs(gain) < 0.05:
        searched = "recomputation search" if given else "layout and recomputation search"
        return head + f", as fast as the choice: the {searched} gains nothing here"
    return head + f", {abs(gain):.1f} % {'slower' if gain >= 0 else 'faster'} than the choice" + (" per micro-batch" if per_mb else "")


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse, before the evaluation, outputs that cannot be written (a folder, a path under a file) and two outputs that
    land on one file (the same path, or one through a symbolic link: the later would overwrite the earlier).

    Raises:
        ConfigError: naming the option(s) and the path.
    """
    from harness.report.atomic import stream_fd, write_target

    wanted = [(o, v, Path(v)) for o, v in (("--json", args.json), ("--csv", args.csv)) if v is not None]
    if args.out is not None:
        wanted += [("--out", args.out, Path(args.out) / name) for name in ("index.html", "choose.json")]
    seen: dict[str, str] = {}
    for option, value, path in wanted:
        try:
            target, _ = write_target(path)
        except OSError as exc:
            raise ConfigError(f"{option} {value}: {exc.strerror}") from None
        fd = stream_fd(path)
        where = f"fd {fd}" if fd is not None else os.path.realpath(target)
        if where in seen and seen[where] != option:
            raise ConfigError(f"{seen[where]} and {option} name the same file, {path}: give each its own")
        seen.setdefault(where, option)


def _unused_flag_notes(args: argparse.Namespace, query: Any) -> list[str]:
    """What given flags change nothing here, so that no figure seems to rest on them: ``-v`` values the schedules
    tried cannot take (they run at their own), ``--data-parallel-size`` with nothing it divides, the distributed
    optimizer over one data-parallel rank."""
    from harness.schedule.registry import builder_info, schedule_names

    notes = []
    if args.v != _DEFAULT_V:
        names = query.schedules if query.schedules is not None else tuple(schedule_names())
        own: dict[int, list[str]] = {}
        for name in names:
            info = builder_info(name)
            if not info.takes_chunks and any(v not in (1, info.placed_chunks) for v in args.v):
                own.setdefault(info.placed_chunks, []).append(info.name)
        for chunks, which in sorted(own.items()):
            runs, its = ("runs", "its") if len(which) == 1 else ("run", "their")
            notes.append(f"-v {' '.join(map(str, args.v))}: {', '.join(which)} {runs} at {its} own v={chunks} "
                         f"({'one chunk per rank' if chunks == 1 else f'{its} placement fixes it'})")
    if args.data_parallel_size > 1 and args.global_batch_size is None and not args.use_distributed_optimizer:
        notes.append(f"--data-parallel-size {args.data_parallel_size} changes nothing here: it divides --global-batch-size and "
                     "the distributed optimizer's state, and neither is given (each figure is one pipeline replica's)")
    if args.use_distributed_optimizer and args.data_parallel_size == 1:
        notes.append("--use-distributed-optimizer over --data-parallel-size 1 shards nothing: 18 bytes per parameter, as without it")
    if args.timelines != _DEFAULT_TIMELINES and args.out is None:
        notes.append(f"--timelines {args.timelines} changes nothing without --out (the timelines are on the page)")
    if args.workers is not None and args.executor == "serial":
        notes.append(f"--workers {args.workers} changes nothing with --executor serial")
    return notes


def _excluded_lines(excluded: list[dict[str, Any]]) -> list[str]:
    """One line per schedule, ``v`` and reason (:func:`~harness.report.choose_page.excluded_groups`, as the page's
    table): ``DualPipe v=2 m=16, 32, 64: ...``."""
    from harness.report.choose_page import excluded_groups

    lines = []
    for g in excluded_groups(excluded):
        where = " ".join(part for part in (f"v={g['v']}" if g["v"] is not None else "", f"m={g['m']}" if g["m"] is not None else "")
                         if part)
        lines.append(f"{g['schedule']} {where or '(every v and m)'}: {g['reason']}")
    return lines


def _nothing_fits_line(rows: list[dict[str, Any]], limit: int | None, least: int | None) -> str:
    """Where no row fits: the limit, the least limit at which one would (bytes), and the rows that need exactly it."""
    if limit is None or least is None:
        return "nothing fits"
    from harness.report.choose_page import rows_at_peak

    return (f"nothing fits {_size(limit)}: the least limit at which one would is {_size(least)} ({least:,} bytes: "
            f"{rows_at_peak(rows, least)})")


def cmd_choose(args: argparse.Namespace) -> int:
    """Rank, print, and write what the arguments ask.

    Returns:
        0 when a row that fits the limit is chosen; :data:`NOTHING_CHOSEN` (1) when none is: no row fits the
        limit (the table says so, and the least limit that would fit; ``--run`` runs nothing) or every
        combination was excluded (each with its reason). The table and the files are written either way.

    Raises:
        HarnessError: bad arguments (named), an executor that cannot run here, an unwritable output; with
            ``--run``, a row whose confirming run failed (:class:`~harness.errors.ExecutionError`, after the
            table, the files and every row's run; the command then exits 2).
    """
    from harness.choose.rank import choose
    from harness.report.atomic import write_all

    check_out(args.out)
    for option, value in (("--json", args.json), ("--csv", args.csv)):
        if value is not None and not value.strip():
            raise ConfigError(f"{option} is empty; give a file")
        if value == "-":
            raise ConfigError(f"{option} -: give a file (the table goes to standard output; /dev/stdout adds the {option[2:].upper()} "
                              "after it)")
    if args.out == "-":
        raise ConfigError("--out -: give a folder")
    _check_outputs(args)
    if args.timelines < 0:
        raise ConfigError(f"--timelines must be 0 or more, got {args.timelines}")
    steps = None
    if args.steps is not None:
        if args.run is None:
            raise ConfigError("--steps is for --run (the recorded steps of the confirming runs)")
        from harness.run.window import parse_steps

        steps = parse_steps(args.steps)
    for option, value in (("--mpirun", args.mpirun), ("--run-timeout", args.run_timeout)):
        if value is not None and args.run != "mpi":
            raise ConfigError(f"{option} is for --run mpi (the mpirun job each confirmed row runs as)")
    if args.mpirun is not None and not args.mpirun.strip():
        raise ConfigError("--mpirun is empty; give the launcher command, e.g. 'mpirun'")
    if args.run_timeout is not None and not args.run_timeout > 0:
        raise ConfigError(f"--run-timeout must be above 0 seconds, got {args.run_timeout:g}")
    query = query_of(args)
    if args.run is not None:  # the backend's own refusal (harness.model.comm.check_backend), before the evaluation, not after it
        from harness.model.comm import check_backend

        try:
            check_backend(query.comm_model, args.run)
        except ConfigError as exc:
            raise ConfigError(f"--run {args.run}: {exc}") from None
    if args.run == "mpi" and query.comm_model != "stream":  # free: no send/receive jobs for mpi to move the data with
        raise ConfigError(f"--run mpi moves data with send/receive jobs, which comm model {query.comm_model!r} has none of: "
                          "choose with --comm-model stream to confirm on mpi")
    result = choose(query, workers=args.workers, executor=args.executor, progress=not args.no_progress and sys.stderr.isatty())
    doc = result.to_document()
    rows = result.rows
    n_comb = len(rows) + len(result.excluded)
    print(f"choose: {n_comb} combination(s) at p={query.p}, {len(rows)} evaluated, {len(result.excluded)} excluded "
          f"({result.elapsed_s:.1f} s, {result.executor})")
    for note in _unused_flag_notes(args, query):
        print(f"note: {note}")
    if rows:
        print(table(rows[: args.top], query.memory_limit_bytes, per_mb=len({r["m"] for r in rows}) > 1))
        if len(rows) > args.top:
            print(f"... {len(rows) - args.top} more row(s) (--top, --json, --csv)")
    best = result.best
    if best is not None:
        print(f"chosen: {best['schedule']} v={best['v']} m={best['m']}, layout {best['layout']}, recompute "
              f"{_recompute_text(best['recompute'])}: {ms_text(best['step_ns'])} ms, peak {_size(best['peak_bytes'])}"
              + (f" of {_size(query.memory_limit_bytes)}" if query.memory_limit_bytes is not None else ""))
        line = _even_baseline_line(rows)
        if line:
            print(line)
    elif rows:
        print(_nothing_fits_line(rows, query.memory_limit_bytes, doc["smallest_fitting_limit_bytes"]))
    else:
        print(f"nothing evaluated: each of the {n_comb} combination(s) was excluded, with its reason below")
    if result.excluded:
        print("excluded:")
        grouped = _excluded_lines(result.excluded)
        for line in grouped[: max(args.top, 10)]:
            print(f"  {line}")
        if len(grouped) > max(args.top, 10):
            print(f"  ... {len(grouped) - max(args.top, 10)} more (--json)")
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
    if best is None:
        if args.run:
            print(f"no row fits, so none is run on {args.run}")
        return NOTHING_CHOSEN
    if args.run:
        _confirm(result, args, steps)
    return 0


def _confirm(result: Any, args: argparse.Namespace, steps: Any) -> None:
    """Run the top fitting rows on ``args.run`` and print predicted against measured.

    Raises:
        ExecutionError: a row's run failed (after every row was tried; names each failed row).
    """
    from harness.choose import mpi_confirm
    from harness.choose.confirm import Confirmation, confirm
    from harness.errors import ExecutionError

    backend, top = args.run, args.top
    print(f"running the top {min(top, sum(1 for r in result.rows if r['fits']))} fitting row(s) on {backend}:")

    def show(c: Confirmation) -> None:
        if c.measured_ns is None:
            err(f"  #{c.rank} {c.label}: failed: {c.error}")
            return
        ci = (f" [{_ms3(c.ci_low_ns)}, {_ms3(c.ci_high_ns)}]" if c.ci_low_ns is not None and c.ci_high_ns is not None else "")
        print(f"  #{c.rank} {c.label}: predicted {_ms3(c.predicted_ns)} ms, measured {_ms3(c.measured_ns)} ms{ci} "
              f"over {c.steps} step(s): {c.ratio:.3f}x")
        for note in c.notes:  # what `python -m harness run` says under its table (e.g. jobs under 1 ms on cpu)
            print(f"    {note}")

    done = confirm(result, backend, top, steps=steps, on_row=show, mpirun=args.mpirun or mpi_confirm.MPIRUN,
                   timeout_s=args.run_timeout or mpi_confirm.DEFAULT_TIMEOUT_S)
    failed = [c for c in done if c.measured_ns is None]
    if failed:
        raise ExecutionError(f"{len(failed)} of {len(done)} confirming run(s) on {backend} failed: "
                             + ", ".join(f"#{c.rank} {c.label}" for c in failed) + " (their errors are above)")
