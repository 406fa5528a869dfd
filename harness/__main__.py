"""``python -m harness``: the command line (:mod:`harness.cli`)."""

from __future__ import annotations

from harness.cli import main

if __name__ == "__main__":  # the torch backend's spawned ranks import this module again: they must not run the command
    raise SystemExit(main())
