"""How this process was launched: the number of processes an MPI launcher (read without importing
mpi4py) or torchrun started, the refusal of a backend that every one of them would run in full,
and which process writes the reports. Used by the pytest plugin and the command line alike.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["writes_reports"]


#: Environment variables in which MPI launchers give each process the number of processes:
#: Open MPI's ``mpirun`` and the PMI launchers of MPICH (Hydra) and Intel MPI.
LAUNCHER_SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE")

def launched_processes() -> int:
    """How many processes the MPI launcher started beside this one, from its environment (1 when
    not launched by ``mpirun``); read without importing mpi4py."""
    for name in LAUNCHER_SIZE_VARS:
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return 1

def check_not_duplicated(backend: str, what: str) -> None:
    """Refuse a non-``mpi`` backend in a process that ``mpirun`` started with others: every process would
    run every case and publish into the same report folder.

    Raises:
        ConfigError: launched by mpirun as one of several processes with ``backend`` other than ``mpi``, or by
            torchrun with ``backend`` other than ``torch``.
    """
    from harness.distributed.torch_launch import torchrun_world
    from harness.errors import ConfigError

    n = launched_processes()
    if n > 1 and backend.strip().lower() != "mpi":
        raise ConfigError(f"{what} runs under mpirun as one of {n} processes, but the backend is {backend!r}: every process "
                          "would run every case and write the same reports. Use --backend mpi (one pipeline rank per "
                          "process), or run it without mpirun")
    _, size = torchrun_world()
    if size > 1 and backend.strip().lower() != "torch":
        raise ConfigError(f"{what} runs under torchrun as one of {size} processes, but the backend is {backend!r}: every process "
                          "would run every case and write the same reports. Use --backend torch (one pipeline rank per "
                          "process), or run it without torchrun")

def _world() -> Any:
    from harness.distributed.transport import import_mpi

    return import_mpi().COMM_WORLD

def writes_reports() -> bool:
    """Whether this process writes reports: MPI rank 0 only.

    Raises:
        BackendUnavailable: mpi4py or MPI is missing.
    """
    return bool(_world().Get_rank() == 0)
