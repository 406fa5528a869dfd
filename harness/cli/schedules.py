"""``python -m harness schedules``: the registered schedules, their sizes and options."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    """Add the ``schedules`` subcommand to ``sub`` (the top parser's subparsers)."""
    p = sub.add_parser("schedules", help="list registered schedules with their parameters")
    p.set_defaults(func=_cmd_schedules)


def _cmd_schedules(args: argparse.Namespace) -> int:
    import inspect

    from harness.schedule.registry import builder_info, builder_options, schedule_names

    for name in schedule_names():
        info = builder_info(name)
        params, any_keyword = builder_options(info)
        opts = ", ".join([f"{p.name}={p.default!r}" if p.default is not inspect.Parameter.empty else p.name for p in params]
                         + (["any keyword"] if any_keyword else []))
        size = "p, m, v" if info.takes_chunks else "p, m"
        aliases = f" (also: {', '.join(info.aliases)})" if info.aliases else ""
        extra = ("; splits backward into I and W" if info.splits_backward else "") + (
            "; plans from the case's costs (cost model, comm model, memory_limit_bytes)" if info.takes_costs else "")
        print(f"{name}{aliases}\n    {info.summary}\n    sizes: {size}{'; options: ' + opts if opts else ''}{extra}")
    return 0
