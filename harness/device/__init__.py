"""Backends behind one device interface, and the choice among them.

``sim`` (virtual clock, exact), ``cpu`` (host threads; the embedded default
where no GPU is usable) and ``cuda`` (PyCUDA). ``auto`` picks ``cuda`` when
PyCUDA and a GPU are usable and ``cpu`` otherwise, and says why.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.device.base import Device, Work
from harness.errors import BackendUnavailable, ConfigError

__all__ = [
    "BACKENDS",
    "WORKLOAD_ALIASES",
    "WORKLOAD_NAMES",
    "BackendChoice",
    "Device",
    "Work",
    "backend_workload",
    "create_device",
    "resolve_backend",
]

BACKENDS = ("auto", "sim", "cpu", "cuda")
DEFAULT_WORKLOAD = {"sim": "virtual", "cpu": "sleep", "cuda": "spin"}
#: Portable workload names: ``timed`` runs each job for its cost-model duration
#: (cpu: sleep, cuda: spin); ``compute`` does real matrix products sized from
#: the job's FLOPs (cpu: NumPy matmul, cuda: GEMM kernel). Backend-specific
#: names are accepted and translated to their counterpart on other backends.
WORKLOAD_ALIASES = {
    "cpu": {"timed": "sleep", "compute": "matmul", "spin": "sleep", "gemm": "matmul"},
    "cuda": {"timed": "spin", "compute": "gemm", "sleep": "spin", "matmul": "gemm"},
}

#: Every workload name ``--workload`` and ``PipelineCase.workload`` accept.
WORKLOAD_NAMES = ("timed", "compute", "sleep", "matmul", "spin", "gemm")


def backend_workload(backend: str, workload: str | None) -> str:
    """The backend's own name for ``workload`` (``None``: its default).

    ``sim`` has one workload, ``virtual``: jobs take their cost-model duration.
    """
    if backend == "sim" or workload is None:
        return DEFAULT_WORKLOAD.get(backend, "virtual")
    key = workload.strip().lower()
    return WORKLOAD_ALIASES.get(backend, {}).get(key, key)


@dataclass(frozen=True)
class BackendChoice:
    """The backend a run uses and, for ``auto``, why it was chosen."""

    requested: str
    name: str
    reason: str


def resolve_backend(requested: str) -> BackendChoice:
    """Turn a backend name (``auto``, ``sim``, ``cpu``, ``cuda``) into the one to use.

    Raises:
        ConfigError: unknown name (lists the valid ones).
        BackendUnavailable: ``cuda`` was asked for and cannot run here; the
            message says why and how to install PyCUDA.
    """
    name = requested.strip().lower()
    if name not in BACKENDS:
        raise ConfigError(f"unknown backend {requested!r}; valid backends: {', '.join(BACKENDS)}")
    if name in ("sim", "cpu"):
        return BackendChoice(requested, name, "requested")
    from harness.device import cuda

    ok, why = cuda.probe()
    if name == "cuda":
        if not ok:
            raise BackendUnavailable(f"the cuda backend cannot run here: {why}. {cuda.INSTALL_HINT}")
        return BackendChoice(requested, "cuda", why)
    if ok:
        return BackendChoice(requested, "cuda", f"auto: {why}")
    return BackendChoice(requested, "cpu", f"auto: no usable GPU: {why}")


def create_device(name: str, workload: str | None = None, **options: object) -> Device:
    """Create a device of backend ``name`` (``sim``, ``cpu`` or ``cuda``).

    Args:
        name: a resolved backend name (not ``auto``).
        workload: ``timed`` or ``compute`` (see :data:`WORKLOAD_ALIASES`), or a
            backend's own name (``cpu``: ``sleep``/``matmul``; ``cuda``:
            ``spin``/``gemm``); ``None`` for the backend's default. ``sim``
            ignores it.
        options: passed to the backend's constructor.

    Raises:
        ConfigError: unknown backend or workload.
        BackendUnavailable: the backend cannot run here.
    """
    if name == "sim":
        from harness.device.sim import SimDevice

        return SimDevice()
    if name == "cpu":
        from harness.device.cpu import CpuDevice

        return CpuDevice(backend_workload("cpu", workload), **options)  # type: ignore[arg-type]
    if name == "cuda":
        from harness.device.cuda import CudaDevice

        return CudaDevice(backend_workload("cuda", workload), **options)  # type: ignore[arg-type]
    raise ConfigError(f"unknown backend {name!r}; valid backends: sim, cpu, cuda")
