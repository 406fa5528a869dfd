"""pytest glue for ``--backend=torch`` under torchrun (registered by :mod:`harness.pytest.plugin` only then).

Under ``torchrun --nproc-per-node=P -m pytest ... --backend=torch`` every process is a full pytest
session and one pipeline rank of every case. This glue joins the processes' default process group
(gloo, made once for the session; each case then makes its own groups with its own timeout,
:mod:`harness.distributed.torch_rank`) and keeps the sessions in step and their output apart as the
``mpi`` glue does (:class:`~harness.pytest.mpi.MpiPytestPlugin`, over this group): every process runs
rank 0's test order, only rank 0 prints pytest's report and writes reports, the others print only
their failures (to stderr, marked ``[torchrun rank N]``), and a test that failed on any rank fails
on rank 0. Without torchrun nothing is registered: each case launches its ranks itself.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from harness.pytest.mpi import MpiPytestPlugin

__all__ = ["TorchWorld", "register"]


class TorchWorld:
    """The session's processes over torch's default process group (gloo), as the ``mpi`` glue talks to its world.

    Raises:
        BackendUnavailable: torch is missing (the install command).
    """

    def __init__(self) -> None:
        from harness.distributed.torch_launch import require_torch

        require_torch()
        import torch.distributed as dist

        if not dist.is_initialized():  # one group for the whole session: the glue's all-gathers wait on slow tests
            dist.init_process_group("gloo", timeout=timedelta(hours=2))
        self._dist = dist

    def Get_rank(self) -> int:  # noqa: N802 - the mpi4py name the glue calls
        return int(self._dist.get_rank())

    def Get_size(self) -> int:  # noqa: N802
        return int(self._dist.get_world_size())

    def allgather(self, obj: Any) -> list[Any]:
        out: list[Any] = [None] * self.Get_size()
        self._dist.all_gather_object(out, obj)
        return out


def register(config: pytest.Config) -> None:
    """Register the glue once (from :mod:`harness.pytest.plugin`'s ``pytest_configure``).

    Raises:
        BackendUnavailable: torch is missing.
    """
    if not config.pluginmanager.has_plugin("harness-torchrun"):
        plugin = MpiPytestPlugin(TorchWorld(), "--backend=torch", "torchrun rank")
        config.pluginmanager.register(plugin, "harness-torchrun")
        plugin.quiet()
