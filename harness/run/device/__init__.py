"""The local devices behind one device interface, and the choice among them.

``sim`` (virtual clock, exact), ``cpu`` (host threads; the embedded default
where no GPU is usable) and ``cuda`` (PyCUDA). ``auto`` picks ``cuda`` when
PyCUDA and a GPU are usable and ``cpu`` otherwise, and says why. The backends
of one pipeline rank per process (``mpi``) run these devices locally; every
name a case or a command line may give is resolved by
:mod:`harness.distributed.backends`.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping

from harness.errors import BackendUnavailable, ConfigError
from harness.run.device.base import Device, Work
from harness.run.environment import BackendChoice

__all__ = [
    "DEVICES",
    "WORKLOAD_ALIASES",
    "WORKLOAD_NAMES",
    "Device",
    "Work",
    "backend_workload",
    "check_class_options",
    "check_device_options",
    "check_workload",
    "constructor_options",
    "create_device",
    "device_option_names",
    "resolve_device",
]

#: The local devices a name can resolve to (``auto`` picks ``cuda`` or ``cpu``).
DEVICES = ("auto", "sim", "cpu", "cuda")
DEFAULT_WORKLOAD = {"sim": "virtual", "cpu": "sleep", "cuda": "spin"}
#: Portable workload names: ``timed`` runs each job for its cost-model duration
#: (cpu: sleep, cuda: spin); ``compute`` does real matrix products sized from
#: the job's FLOPs (cpu: NumPy matmul, cuda: GEMM kernel). Backend-specific
#: names are accepted and translated to their counterpart on other backends.
WORKLOAD_ALIASES = {
    "cpu": {"timed": "sleep", "compute": "matmul", "spin": "sleep", "gemm": "matmul"},
    "cuda": {"timed": "spin", "compute": "gemm", "sleep": "spin", "matmul": "gemm"},
}

#: The portable names, meaningful on every backend (``sim`` ignores them).
PORTABLE_WORKLOADS = ("timed", "compute")
#: Each backend's own names, as its device class takes them.
BACKEND_WORKLOADS = {"cpu": ("sleep", "matmul"), "cuda": ("spin", "gemm")}
#: Every workload name ``--workload`` and ``PipelineCase.workload`` accept.
WORKLOAD_NAMES = PORTABLE_WORKLOADS + tuple(name for names in BACKEND_WORKLOADS.values() for name in names)

#: Where each backend's device class lives. Imported only to read a constructor's
#: signature or create a device; ``harness.run.device.cuda`` imports PyCUDA only then.
_DEVICE_CLASSES = {
    "sim": ("harness.run.device.sim", "SimDevice"),
    "cpu": ("harness.run.device.cpu", "CpuDevice"),
    "cuda": ("harness.run.device.cuda", "CudaDevice"),
}


def check_workload(workload: str) -> None:
    """Raise :class:`ConfigError` unless ``workload`` is one of :data:`WORKLOAD_NAMES`
    (case and surrounding blanks ignored); the one message for every place that takes one."""
    if not isinstance(workload, str) or workload.strip().lower() not in WORKLOAD_NAMES:
        own = "; ".join(f"{', '.join(names)} ({backend})" for backend, names in BACKEND_WORKLOADS.items())
        raise ConfigError(
            f"unknown workload {workload!r}; valid workloads: {', '.join(PORTABLE_WORKLOADS)} (any backend), "
            f"or a backend's own name: {own}"
        )


def _device_class(backend: str) -> type:
    """The device class of ``backend``, imported (``harness.run.device.cuda`` does not import PyCUDA for this).

    Raises:
        ConfigError: ``backend`` is not ``sim``, ``cpu`` or ``cuda``.
    """
    if backend not in _DEVICE_CLASSES:
        raise ConfigError(f"unknown backend {backend!r} (valid backends: {', '.join(_DEVICE_CLASSES)})")
    module, name = _DEVICE_CLASSES[backend]
    cls: type = getattr(importlib.import_module(module), name)
    return cls


def constructor_options(cls: type) -> tuple[str, ...] | None:
    """The keyword options a device class takes: its constructor's parameters but ``workload``
    (which a case sets with its own field); ``None`` when it takes any keyword."""
    params = inspect.signature(cls).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return tuple(n for n, p in params.items() if p.kind in keyword and n != "workload")


def device_option_names(backend: str) -> tuple[str, ...] | None:
    """The keyword options backend ``backend``'s device takes (:func:`constructor_options`);
    ``None`` when it takes any.

    Raises:
        ConfigError: ``backend`` is not ``sim``, ``cpu`` or ``cuda``.
    """
    return constructor_options(_device_class(backend))


def check_class_options(backend: str, cls: type, options: Mapping[str, object]) -> None:
    """Raise :class:`ConfigError` for options the device class ``cls`` of ``backend`` does not take,
    naming them and those it does, then for values it cannot use (its ``check_options``: type and
    range, no device made).

    Raises:
        ConfigError: an option its constructor has no parameter for, or a value of the wrong type or range.
    """
    valid = constructor_options(cls)
    if valid is not None:
        unknown = sorted(str(k) for k in options if k not in valid)
        if unknown:
            takes = f"valid: {', '.join(valid)}" if valid else "it takes none"
            if "workload" in unknown:
                takes += "; the workload is the case's own field"
            names = f"option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}"
            raise ConfigError(f"the {backend} backend has no device {names} ({takes})")
    check_values = getattr(cls, "check_options", None)  # optional for a new backend
    if check_values is not None:
        check_values(options)


def check_device_options(backend: str, options: Mapping[str, object]) -> None:
    """:func:`check_class_options` for the device of local backend ``backend``.

    Raises:
        ConfigError: an unknown backend, an option its constructor has no parameter
            for, or a value of the wrong type or range.
    """
    check_class_options(backend, _device_class(backend), options)


def backend_workload(backend: str, workload: str | None) -> str:
    """The backend's own name for ``workload`` (``None``: its default).

    ``sim`` has one workload, ``virtual``: jobs take their cost-model duration.
    """
    if backend == "sim" or workload is None:
        return DEFAULT_WORKLOAD.get(backend, "virtual")
    key = workload.strip().lower()
    return WORKLOAD_ALIASES.get(backend, {}).get(key, key)



def resolve_device(requested: str) -> BackendChoice:
    """Turn a backend name (``auto``, ``sim``, ``cpu``, ``cuda``) into the one to use.

    Raises:
        ConfigError: unknown name (lists the valid ones).
        BackendUnavailable: ``cuda`` was asked for and cannot run here; the
            message says why and how to install PyCUDA.
    """
    if not isinstance(requested, str):
        raise ConfigError(f"backend must be a name such as 'sim', got {requested!r}; valid devices: {', '.join(DEVICES)}")
    name = requested.strip().lower()
    if name not in DEVICES:
        raise ConfigError(f"unknown device {requested!r}; valid devices: {', '.join(DEVICES)}")
    if name in ("sim", "cpu"):
        return BackendChoice(requested, name, "requested")
    from harness.run.device import cuda

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
        ConfigError: unknown backend, workload or option.
        BackendUnavailable: the backend cannot run here.
    """
    if workload is not None:
        check_workload(workload)
    check_device_options(name, options)
    if name == "sim":
        from harness.run.device.sim import SimDevice

        return SimDevice()
    if name == "cpu":
        from harness.run.device.cpu import CpuDevice

        return CpuDevice(backend_workload("cpu", workload), **options)  # type: ignore[arg-type]
    if name == "cuda":
        from harness.run.device.cuda import CudaDevice

        return CudaDevice(backend_workload("cuda", workload), **options)  # type: ignore[arg-type]
    raise ConfigError(f"unknown backend {name!r}; valid backends: sim, cpu, cuda")
