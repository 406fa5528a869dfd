"""``python -m harness run``: one schedule on a backend, its report written (sim here; mpi in test_mpi.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main


def test_run_writes_the_report_of_one_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "1F1B", "-p", "2", "-m", "4", "--backend", "sim", "--out", str(tmp_path / "rep")]) == 0
    # 1F1B p=2 m=4, F=1 ms, B=2 ms, send/receive free: (m + p - 1) x (F + B) = 15 ms, bubble (p-1)/(m+p-1) = 20 %
    assert capsys.readouterr().out == f"1F1B p=2 m=4 on sim: median step 15.000 ms, bubble 20.0%; report: {tmp_path / 'rep' / 'index.html'}\n"
    (case,) = json.loads((tmp_path / "rep" / "results.json").read_text())["cases"]
    assert case["backend"] == "sim" and case["metrics"]["step_time_median_ns"] == 15_000_000


def test_run_names_a_bad_backend(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "1F1B", "-p", "2", "-m", "4", "--backend", "tpu"]) == 2
    assert "unknown backend 'tpu'; valid backends: auto, sim, cpu, cuda, mpi" in capsys.readouterr().err


def test_backend_mpi_without_mpi4py_stops_with_what_to_install(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("import sys\nsys.modules['mpi4py'] = None  # as if mpi4py were not installed\n")
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("--backend=mpi", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert ("the mpi backend cannot run here: import of mpi4py halted; None in sys.modules; install Open MPI (Debian: apt-get install "
            "openmpi-bin libopenmpi-dev) and mpi4py (pip install -e '.[mpi]'), then launch under mpirun") in result.stderr.str()
