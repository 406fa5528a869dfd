"""``.ci/run``'s check of the installed torch: CI must run on the CPU wheel, and fails on a CUDA build.

The check is the Python block ``.ci/run`` feeds to ``python -`` after ``pip install torch==2.13.0``; it is run
here as CI runs it, against a stand-in ``torch`` package (``__version__`` and ``version.cuda`` only) put first on
``PYTHONPATH``, so no torch install is needed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _torch_check() -> str:
    """The block between ``python - <<'PY'`` and ``PY`` in ``.ci/run``."""
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    start = lines.index("python - <<'PY'") + 1
    end = lines.index("PY", start)
    block = "\n".join(lines[start:end])
    assert "torch.version.cuda" in block  # the block found is the torch check
    return block


def _run_with(tmp_path: Path, version: str, cuda: str | None) -> subprocess.CompletedProcess[str]:
    fake = tmp_path / "site" / "torch"
    (fake / "version").mkdir(parents=True)
    (fake / "__init__.py").write_text(f"__version__ = {version!r}\nfrom . import version\n", encoding="utf-8")
    (fake / "version" / "__init__.py").write_text(f"cuda = {cuda!r}\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    return subprocess.run([sys.executable, "-"], input=_torch_check(), capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=60)


def test_ci_fails_when_pip_installed_a_cuda_build_of_torch(tmp_path: Path) -> None:
    proc = _run_with(tmp_path, "2.13.0+cu126", "12.6")
    assert proc.returncode == 1
    assert proc.stderr.strip() == ("error: pip installed torch 2.13.0+cu126, a CUDA build (CUDA 12.6); CI must use the CPU wheel "
                                   "(pip install torch==2.13.0 should take the one on this machine's local index: check "
                                   "PIP_INDEX_URL, or use --index-url https://download.pytorch.org/whl/cpu)")
    assert proc.stdout == ""


def test_ci_goes_on_with_the_cpu_build_of_torch(tmp_path: Path) -> None:
    proc = _run_with(tmp_path, "2.13.0+cpu", None)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "torch 2.13.0+cpu (CPU build)\n"
