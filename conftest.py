"""Root conftest: checks the harness's pytest plugin is installed.

The plugin itself is registered once, through the ``pytest11`` entry point
(``pip install -e .``); it is not loaded here.
"""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("harness"):
        raise pytest.UsageError(
            "the pipeline-harness pytest plugin is not installed; run `pip install -e .` in this folder first"
        )
