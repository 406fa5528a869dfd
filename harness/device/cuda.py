"""``cuda``: the device interface on PyCUDA (placeholder until the CUDA backend lands).

Only the availability probe lives here for now, so ``--backend=auto`` can say
why it falls back to ``cpu`` and ``--backend=cuda`` can stop with a clear
message.
"""

from __future__ import annotations

from typing import Any

from harness.errors import BackendUnavailable

__all__ = ["INSTALL_HINT", "CudaDevice", "probe"]

INSTALL_HINT = (
    "Install the optional extra with `pip install -e .[cuda]` on a machine with an NVIDIA driver "
    "and the CUDA toolkit (PyCUDA builds from source against cuda.h and libcuda)."
)


def probe() -> tuple[bool, str]:
    """Whether PyCUDA imports and sees a GPU. Returns ``(ok, reason)``; never raises."""
    try:
        import pycuda.driver as drv  # type: ignore[import-not-found]
    except ImportError as exc:
        return False, f"PyCUDA is not importable ({exc})"
    except OSError as exc:  # e.g. libcuda.so.1 missing: no driver
        return False, f"the NVIDIA driver library could not be loaded ({exc})"
    try:
        drv.init()
        count = drv.Device.count()
    except Exception as exc:  # pycuda.driver.Error and friends
        return False, f"the CUDA driver did not initialise ({exc})"
    if count < 1:
        return False, "no CUDA device is visible"
    return True, f"{count} CUDA device(s), first is {drv.Device(0).name()}"


class CudaDevice:
    """PyCUDA-backed device. Not implemented yet: raises :class:`BackendUnavailable`."""

    name = "cuda"

    def __init__(self, workload: str = "spin", **options: Any) -> None:
        raise BackendUnavailable("the cuda backend is not implemented in this version of the harness")
