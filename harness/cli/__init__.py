"""The command line: ``python -m harness ...`` or ``pipeline-harness ...``.

Commands::

    report RESULTS_JSON [--out DIR]            re-render index.html and traces from a results file
    compare BASE NEW [--fail step_time:5%]...  per-case changes with CIs; exit 1 past a significant threshold, 2 with no common case
    compare FILE [FILE2] --case A --case B     the same for any two cases (two schedules, two models), of one file or of two
    import-paddle LOG_DIR [--out DIR]          PaddlePaddle worker logs -> the same reports (default ./reports-paddle/)
    export-paddle RESULTS_JSON --out DIR       our runs as PaddlePaddle profiler log lines
    import-torch TRACE_DIR [--out DIR]         torch.profiler traces of a pipelining run -> the same reports (default ./reports-torch/)
    schedules                                  registered schedules and their parameters
    show SCHEDULE -p 4 -m 8 [-v 2]             the slot x rank grid and the schedule's figures (harness.cli.show)
    run SCHEDULE -p 4 -m 8 --backend mpi       run one schedule and write its report (under mpirun for mpi; harness.cli.run)
    choose --hidden-size ... -p 8 -m 32 --memory-limit 80GiB
                                               rank schedules, m, v, layouts and recomputation under a memory limit (harness.cli.choose)
    --version                                  the installed version
    --import MODULE COMMAND ...                import your module first (e.g. one registering builders)

Exit status: 0 fine, 1 a ``compare`` threshold was crossed or ``choose`` chose nothing (no row fits), 2 an error (one
line on stderr, no traceback), 130 interrupted. This package (each subcommand's module, e.g.
:mod:`harness.cli.run`, :mod:`harness.cli.show`, :mod:`harness.cli.choose`) is the only part of the harness that prints.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.cli import choose, compare, export_paddle, import_paddle, import_torch, report, run, schedules, show
from harness.cli.common import err, package_version
from harness.errors import ConfigError, HarnessError

__all__ = ["build_parser", "main", "package_version"]

#: The subcommands' modules, in the order ``--help`` lists them.
_COMMANDS = (report, compare, import_paddle, import_torch, export_paddle, schedules, show, run, choose)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests): each subcommand adds its own
    (its module's ``add_parser``)."""
    parser = argparse.ArgumentParser(prog="pipeline-harness", description="Pipeline-parallel schedule benchmarks: reports and tools.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    parser.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                        help="import a Python module (a dotted name, or a .py file) first, e.g. one that registers "
                             "your own schedule builders with @harness.schedule.register; repeatable")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in _COMMANDS:
        command.add_parser(sub)
    return parser


def _import_user_module(name: str) -> None:
    """Import ``name``: a ``.py`` file (by path) or a dotted module name (from the current folder too).

    Raises:
        ConfigError: it cannot be found, or importing it raised (names the exception and the line).
    """
    import importlib
    import importlib.util
    import traceback

    try:
        if name.endswith(".py") or "/" in name or "\\" in name:
            path = Path(name)
            if not path.is_file():
                raise ConfigError(f"--import {name}: no such file")
            # A module name of its own per file: two files called mb.py stay two modules (their builders
            # then clash by name, as they should), and a file called harness.py cannot shadow the package.
            module_name = f"_harness_import_{re.sub(r'[^0-9A-Za-z_]', '_', str(path.resolve()))}"
            spec = importlib.util.spec_from_file_location(module_name, path)
            if spec is None or spec.loader is None:
                raise ConfigError(f"--import {name}: not a Python module")
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
        else:
            if "" not in sys.path and str(Path.cwd()) not in sys.path:
                sys.path.insert(0, str(Path.cwd()))  # as `python -m` would find it
            importlib.import_module(name)
    except HarnessError:
        raise
    except ModuleNotFoundError as exc:
        raise ConfigError(f"--import {name}: {exc}") from None
    except Exception as exc:  # the user's module failed: say where, in one line
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""
        raise ConfigError(f"--import {name}: importing it raised {type(exc).__name__}: {exc}{where}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (see module doc)."""
    parser = build_parser()
    from harness.cli.torch_args import join_negative_values

    args, extra = parser.parse_known_args(join_negative_values(list(sys.argv[1:] if argv is None else argv)))
    if extra:  # name the command whose options they are not, with its own usage line (argparse shows the top one)
        chosen = next((action.choices[args.command] for action in parser._subparsers._group_actions  # type: ignore[union-attr]
                       if isinstance(action, argparse._SubParsersAction) and args.command in action.choices), parser)
        chosen.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        for module in args.imports:
            _import_user_module(module)
        return int(args.func(args))
    except HarnessError as exc:
        err(f"error: {exc}")
        return 2
    except BrokenPipeError:  # pragma: no cover - e.g. piped into head
        return 0
    except OSError as exc:
        from harness.report.atomic import disk_full_error

        full = disk_full_error(exc, Path(exc.filename).parent if exc.filename else Path.cwd())
        err(f"error: {full}" if full is not None else f"error: {exc.filename or ''}{': ' if exc.filename else ''}{exc.strerror or exc}")
        return 2
    except KeyboardInterrupt:
        err("interrupted")
        return 130

