"""The cuda backend's set-up of one GPU: its description (name, clocks, memory, L2), its kernels
(``kernels.cu`` compiled by ``nvcc`` for its architecture, or a prebuilt binary) and peer access to the
GPUs set up before it. A mixin of :class:`~harness.run.device.cuda.CudaDevice`, as
:mod:`~harness.run.device.cuda_clock` and :mod:`~harness.run.device.cuda_launch` are.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import BackendUnavailable
from harness.run.device import cuda_probe
from harness.run.device.cuda_handles import _Gpu, _Scope

__all__ = ["KERNELS_ENV", "KERNELS_SOURCE"]

KERNELS_SOURCE = Path(__file__).with_name("kernels.cu")
#: Environment variable naming a prebuilt cubin/fatbin/PTX of ``kernels.cu``, for
#: machines without ``nvcc`` (see docs/cuda.md).
KERNELS_ENV = "HARNESS_CUDA_KERNELS"


class _CudaSetup:
    """Set-up of each GPU a :class:`~harness.run.device.cuda.CudaDevice` uses (the attributes below are the device's)."""

    if TYPE_CHECKING:  # the device's state and methods these use
        _drv: Any
        _gpus: dict[int, _Gpu]
        _kernels: str | os.PathLike[str] | None
        _nvcc_options: list[str]

        def _scoped(self, gpu: _Gpu) -> _Scope: ...

    def _describe_gpu(self, gpu: _Gpu) -> None:
        att = self._drv.device_attribute
        dev = gpu.dev

        def attr(name: str) -> int | None:
            a = getattr(att, name, None)
            if a is None:
                return None
            try:
                return int(dev.get_attribute(a))
            except Exception:
                return None

        major, minor = dev.compute_capability()
        clock_khz = attr("CLOCK_RATE")
        mem_khz = attr("MEMORY_CLOCK_RATE")
        gpu.info = {
            "ordinal": gpu.ordinal,
            "name": dev.name(),
            "compute_capability": f"{major}.{minor}",
            "arch": f"sm_{major}{minor}",
            "sm_count": attr("MULTIPROCESSOR_COUNT"),
            "clock_mhz": None if clock_khz is None else clock_khz / 1000.0,
            "memory_clock_mhz": None if mem_khz is None else mem_khz / 1000.0,
            "l2_bytes": attr("L2_CACHE_SIZE"),
            "total_memory_bytes": int(dev.total_memory()),
        }
        try:
            gpu.info["pci_bus_id"] = dev.pci_bus_id()
        except Exception:
            pass

    def _load_kernels(self, gpu: _Gpu) -> None:
        """Compile ``kernels.cu`` for ``gpu``'s architecture (or load a prebuilt binary)."""
        drv = self._drv
        try:
            if self._kernels:
                gpu.module = drv.module_from_file(str(self._kernels))
                gpu.info["kernels"] = f"prebuilt {self._kernels}"
            else:
                if cuda_probe._find_nvcc() is None:
                    raise BackendUnavailable(
                        "cuda: nvcc was not found to compile harness/run/device/kernels.cu; install the CUDA toolkit, "
                        f"or build it elsewhere (`nvcc -fatbin -gencode arch=compute_90,code=sm_90 kernels.cu`) and set "
                        f"{KERNELS_ENV} to the file"
                    )
                from pycuda.compiler import SourceModule  # type: ignore[import-not-found]

                nvcc = cuda_probe._find_nvcc()
                gpu.module = SourceModule(
                    KERNELS_SOURCE.read_text(),
                    nvcc=nvcc,
                    options=self._nvcc_options,
                    no_extern_c=True,
                    arch=gpu.info["arch"],
                )
                gpu.info["kernels"] = f"SourceModule {gpu.info['arch']}"
        except BackendUnavailable:
            raise
        except Exception as exc:
            raise BackendUnavailable(f"cuda: cannot build or load the kernels for {gpu.info.get('arch')}: {exc}") from exc
        m = gpu.module
        gpu.spin = m.get_function("spin").prepare("QP")
        gpu.gemm = m.get_function("gemm").prepare("PPPii")
        gpu.copy = m.get_function("copy").prepare("PPQ")
        gpu.timer_step = m.get_function("timer_step").prepare("Pi")

    def _enable_peers(self, gpu: _Gpu) -> None:
        """Enable peer access both ways between ``gpu`` and every GPU set up before it."""
        for other in self._gpus.values():
            if other is gpu:
                continue
            for src, dst in ((gpu, other), (other, gpu)):
                try:
                    if not src.dev.can_access_peer(dst.dev):
                        continue
                    with self._scoped(src):
                        try:
                            self._drv.Context.enable_peer_access(dst.ctx, 0)
                        except self._drv.LogicError as exc:  # already enabled by an earlier device
                            if "already" not in str(exc).lower():
                                raise
                    src.peers.add(dst.index)
                except Exception:  # no peer access: transfers are host-staged
                    src.peers.discard(dst.index)
