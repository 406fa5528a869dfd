"""``python -m harness``: the command line (:mod:`harness.cli`)."""

from __future__ import annotations

from harness.cli import main

raise SystemExit(main())
