"""The CUDA kernel source compiles with ``nvcc`` for the architectures we run on.

Needs only the CUDA toolkit (no GPU, no PyCUDA); skipped, with the reason, where
``nvcc`` is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.run.device.cuda import KERNELS_SOURCE

KERNELS = ("spin", "gemm", "copy", "timer_step")


def find_nvcc() -> str | None:
    """``nvcc`` on PATH or in ``/usr/local/cuda/bin``."""
    found = shutil.which("nvcc")
    if found:
        return found
    candidate = "/usr/local/cuda/bin/nvcc"
    return candidate if os.access(candidate, os.X_OK) else None


NVCC = find_nvcc()
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found on PATH or in /usr/local/cuda/bin")


def test_source_is_packaged_next_to_the_backend() -> None:
    assert KERNELS_SOURCE.name == "kernels.cu"
    text = KERNELS_SOURCE.read_text()
    for name in KERNELS:
        assert f'extern "C" __global__ void {name}(' in text
    assert "%%globaltimer" in text
    assert "#include" not in text  # standalone: SourceModule and nvcc need nothing else


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_kernels_compile_to_cubin(arch: str, tmp_path: Path) -> None:
    out = tmp_path / f"kernels_{arch}.cubin"
    proc = subprocess.run(
        [NVCC, "-cubin", f"-arch={arch}", "-O3", "-Werror", "all-warnings", "-o", str(out), str(KERNELS_SOURCE)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    data = out.read_bytes()
    assert data[:4] == b"\x7fELF"  # a cubin is an ELF image
    for name in KERNELS:  # extern "C": unmangled names, as get_function() expects
        assert name.encode() + b"\x00" in data


@needs_nvcc
def test_kernels_compile_to_ptx_with_globaltimer(tmp_path: Path) -> None:
    out = tmp_path / "kernels.ptx"
    proc = subprocess.run([NVCC, "-ptx", "-arch=sm_90", "-o", str(out), str(KERNELS_SOURCE)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    ptx = out.read_text()
    for name in KERNELS:
        assert f".entry {name}(" in ptx
    assert "%globaltimer" in ptx
