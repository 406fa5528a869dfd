"""Every backend a case, the pytest options or the command line can name, and the choice among them.

``auto``, ``sim``, ``cpu`` and ``cuda`` are local devices (:mod:`harness.run.device`); ``mpi`` runs one
pipeline rank per MPI process, each on a local ``cpu`` (or ``cuda``) device (:mod:`harness.distributed.mpi`);
``torch`` runs the schedule on PyTorch's own pipelining runtime, one pipeline rank per process
(:mod:`harness.distributed.torch_backend`).
This module is the one place that knows them all: it resolves a name, checks a backend's device
options and says which workload a backend runs.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.errors import ConfigError
from harness.run import device as local
from harness.run.environment import BackendChoice

__all__ = ["BACKENDS", "backend_workload", "check_device_options", "device_option_names", "resolve_backend"]

#: Every backend name, in the order they are listed to users.
BACKENDS = (*local.DEVICES, "mpi", "torch")


def resolve_backend(requested: str) -> BackendChoice:
    """Turn a backend name (``auto``, ``sim``, ``cpu``, ``cuda``, ``mpi``, ``torch``) into the one to use.

    Raises:
        ConfigError: unknown name (lists the valid ones).
        BackendUnavailable: ``cuda`` was asked for and cannot run here (the message says why and
            how to install PyCUDA), ``mpi`` without mpi4py or MPI, or ``torch`` without PyTorch's
            pipelining runtime (the message gives the install command).
    """
    if not isinstance(requested, str):
        raise ConfigError(f"backend must be a name such as 'sim', got {requested!r}; valid backends: {', '.join(BACKENDS)}")
    name = requested.strip().lower()
    if name not in BACKENDS:
        raise ConfigError(f"unknown backend {requested!r}; valid backends: {', '.join(BACKENDS)}")
    if name == "mpi":
        from harness.distributed.mpi import mpi_rank

        rank, size = mpi_rank()  # raises BackendUnavailable without mpi4py
        return BackendChoice(requested, "mpi", f"requested: MPI rank {rank} of {size} process(es), one pipeline rank each")
    if name == "torch":
        from harness.distributed.torch_backend import check_torch

        return check_torch(requested)
    return local.resolve_device(requested)


#: The backends that have a device class of their own (``auto`` resolves to one of them).
_WITH_DEVICES = tuple(b for b in BACKENDS if b != "auto")


def _known(backend: str) -> None:
    if backend not in _WITH_DEVICES:
        raise ConfigError(f"unknown backend {backend!r} (valid backends: {', '.join(_WITH_DEVICES)})")


def _mpi_device_class() -> type:
    from harness.distributed.mpi import MpiCpuDevice

    return MpiCpuDevice


def _torch_options_class() -> type:
    from harness.distributed.torch_backend import TorchOptions

    return TorchOptions


def device_option_names(backend: str) -> tuple[str, ...] | None:
    """The keyword options backend ``backend``'s device takes (its constructor's parameters but
    ``workload``); ``None`` when it takes any.

    Raises:
        ConfigError: ``backend`` is not ``sim``, ``cpu``, ``cuda``, ``mpi`` or ``torch``.
    """
    _known(backend)
    if backend == "mpi":
        return local.constructor_options(_mpi_device_class())
    if backend == "torch":
        return local.constructor_options(_torch_options_class())
    return local.device_option_names(backend)


def check_device_options(backend: str, options: Mapping[str, object]) -> None:
    """Raise :class:`ConfigError` for options ``backend``'s device does not take, naming them and those
    it does, then for values it cannot use (its class's ``check_options``: type and range, no device made).

    Raises:
        ConfigError: an unknown backend, an option its constructor has no parameter for, or a value of
            the wrong type or range.
    """
    _known(backend)
    if backend == "mpi":
        local.check_class_options("mpi", _mpi_device_class(), options)
        return
    if backend == "torch":
        local.check_class_options("torch", _torch_options_class(), options)
        return
    local.check_device_options(backend, options)


def backend_workload(backend: str, workload: str | None) -> str:
    """The backend's own name for ``workload`` (``None``: its default); ``mpi`` runs each rank on a
    local ``cpu`` (or ``cuda``) device, and ``torch`` times its stages as they do, so their names
    are ``cpu``'s here."""
    return local.backend_workload("cpu" if backend in ("mpi", "torch") else backend, workload)
