"""Whether the cuda backend can run here: PyCUDA, the NVIDIA driver, a GPU, and ``nvcc``.

:func:`probe` is what ``--backend=auto`` and ``--backend=cuda`` ask (through
:func:`harness.run.device.resolve_backend`) before a :class:`~harness.run.device.cuda.CudaDevice` is
made; :data:`INSTALL_HINT` is the advice every "cannot run here" message ends with. Both are
importable from :mod:`harness.run.device.cuda` too. PyCUDA is imported only when :func:`probe`
is called.
"""

from __future__ import annotations

import os
import shutil

__all__ = ["INSTALL_HINT", "probe", "visible_gpus"]

INSTALL_HINT = (
    "Install the optional extra with `pip install -e .[cuda]` on a machine with an NVIDIA driver "
    "and the CUDA toolkit (PyCUDA builds from source against cuda.h and libcuda); "
    "offline, build a wheel with scripts/build_pycuda_wheel.sh and install it with scripts/gpu_check.sh."
)


def probe() -> tuple[bool, str]:
    """Whether PyCUDA imports and sees a GPU. Returns ``(ok, reason)``; never raises."""
    try:
        import pycuda.driver as drv  # type: ignore[import-not-found]
    except ImportError as exc:
        return False, f"PyCUDA is not importable ({exc})"
    except OSError as exc:  # e.g. libcuda.so.1 missing: no driver
        return False, f"the NVIDIA driver library could not be loaded ({exc})"
    except Exception as exc:  # a broken installation must not break `auto`
        return False, f"PyCUDA failed to import ({exc!r})"
    try:
        drv.init()
        count = drv.Device.count()
    except Exception as exc:  # pycuda.driver.Error and friends
        return False, f"the CUDA driver did not initialise ({exc})"
    if count < 1:
        return False, "no CUDA device is visible"
    try:
        first = drv.Device(0).name()
    except Exception as exc:
        return False, f"CUDA device 0 cannot be queried ({exc})"
    return True, f"{count} CUDA device(s), first is {first}"


def visible_gpus() -> list[str]:
    """How each GPU this process sees is named in ``CUDA_VISIBLE_DEVICES``, in CUDA's order: the
    variable's own entries (indices, ``GPU-<uuid>``, ``MIG-<uuid>``) where it is set, else ``"0"``,
    ``"1"``, ... One entry per device CUDA counts (it stops at an entry it cannot use, so later
    entries are left out); empty where :func:`probe` fails. A child process given one entry as its
    ``CUDA_VISIBLE_DEVICES`` sees that GPU alone."""
    ok, _ = probe()
    if not ok:
        return []
    import pycuda.driver as drv

    count = drv.Device.count()
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given is None:
        return [str(i) for i in range(count)]
    return [entry.strip() for entry in given.split(",")][:count]


def _find_nvcc() -> str | None:
    """``nvcc`` on PATH, else in ``$CUDA_HOME/bin`` or ``/usr/local/cuda/bin``."""
    found = shutil.which("nvcc")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.access(os.path.join(root, "bin", "nvcc"), os.X_OK):
            return os.path.join(root, "bin", "nvcc")
    return None
