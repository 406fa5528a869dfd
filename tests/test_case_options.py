"""A case's workload and device_options are checked when it is built, for every backend, with one message each."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy  # noqa: F401 - imported before pytester's in-process runs, which drop modules first imported inside them (numpy cannot load twice)
import pytest

from harness.case import PipelineCase
from harness.distributed.backends import device_option_names
from harness.errors import ConfigError
from harness.model.cost import FixedCost
from harness.run.device import WORKLOAD_NAMES, create_device
from harness.runner import run_case

HERE = Path(__file__).name
CUDA_OPTIONS = "devices, device_map, l2_flush, nvtx, stall_timeout_s, kernels, nvcc_options"
WORKLOAD_LIST = "valid workloads: timed, compute (any backend), or a backend's own name: sleep, matmul (cpu); spin, gemm (cuda)"


def _line() -> int:
    """The caller's line number."""
    return sys._getframe(1).f_lineno


@pytest.fixture(autouse=True)
def in_tests_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path(__file__).parent)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"sim": {"frob": 1}}, "the sim backend has no device option 'frob' (it takes none)"),
        ({"cpu": {"frob": 1}}, "the cpu backend has no device option 'frob' (valid: stall_timeout_s)"),
        ({"cuda": {"l2_flush": True, "frob": 1, "devic_map": {}}},
         f"the cuda backend has no device options 'devic_map', 'frob' (valid: {CUDA_OPTIONS})"),
        ({"cpu": {"workload": "matmul"}},
         "the cpu backend has no device option 'workload' (valid: stall_timeout_s; the workload is the case's own field)"),
        ({"cpu": {"frob": 1}, "sim": {"frob": 1}},  # every backend's, not only the one that runs
         "the cpu backend has no device option 'frob' (valid: stall_timeout_s); the sim backend has no device option 'frob' (it takes none)"),
        ({"tpu": {}}, "unknown backend 'tpu' (valid backends: sim, cpu, cuda, mpi, torch)"),
        ({"auto": {"stall_timeout_s": 1}}, "unknown backend 'auto' (valid backends: sim, cpu, cuda, mpi, torch)"),
        ({"CPU": {"stall_timeout_s": 1}}, "unknown backend 'CPU' (valid backends: sim, cpu, cuda, mpi, torch)"),
        ({"cpu": 5}, "the options for 'cpu' must be a mapping of keyword arguments, got 5"),
    ],
)
def test_bad_device_options_fail_when_the_case_is_built(options, message):
    with pytest.raises(ConfigError) as info:
        line = _line(); PipelineCase("1F1B", stages=2, microbatches=4, device_options=options)  # noqa: E702
    assert str(info.value) == f"{HERE}:{line}: case '1F1B p=2 m=4': device_options: {message}"


SECONDS = "a positive number of seconds (at most 1000000)"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"cpu": {"stall_timeout_s": "soon"}}, f"the cpu backend's stall_timeout_s must be {SECONDS}, got 'soon'"),
        ({"cpu": {"stall_timeout_s": 0}}, f"the cpu backend's stall_timeout_s must be {SECONDS}, got 0"),
        ({"cpu": {"stall_timeout_s": -1}}, f"the cpu backend's stall_timeout_s must be {SECONDS}, got -1"),
        ({"cuda": {"stall_timeout_s": float("inf")}}, f"the cuda backend's stall_timeout_s must be {SECONDS}, got inf"),
        # too large for a float: refused as any other out-of-range value, not an OverflowError
        ({"cpu": {"stall_timeout_s": 10**400}}, f"the cpu backend's stall_timeout_s must be {SECONDS}, got 10000000... (401 digits)"),
        ({"cuda": {"stall_timeout_s": -(10**400)}}, f"the cuda backend's stall_timeout_s must be {SECONDS}, got -1000000... (402 digits)"),
        ({"cuda": {"nvcc_options": "-O3"}}, "the cuda backend's nvcc_options must be a list of strings, e.g. ['-O3'], got '-O3'"),
        ({"cuda": {"devices": []}}, "the cuda backend's devices must be a non-empty list of device ordinals (integers >= 0), got []"),
        ({"cuda": {"device_map": {0: 1.5}}},
         "the cuda backend's device_map must be a mapping of rank to device ordinal, e.g. {0: 0, 1: 1}, or a list of ordinals "
         "by rank (all integers >= 0), got {0: 1.5}"),
        ({"cuda": {"l2_flush": "yes"}}, "the cuda backend's l2_flush must be True or False, got 'yes'"),
        ({"cuda": {"nvtx": "on"}}, "the cuda backend's nvtx must be True, False or None, got 'on'"),
        ({"cuda": {"kernels": 7}}, "the cuda backend's kernels must be None or the path of a file, got 7"),
        ({"cpu": {"stall_timeout_s": 0}, "cuda": {"l2_flush": 1}},  # every backend's, whichever runs
         f"the cpu backend's stall_timeout_s must be {SECONDS}, got 0; the cuda backend's l2_flush must be True or False, got 1"),
    ],
)
def test_bad_device_option_values_fail_when_the_case_is_built(options, message):
    with pytest.raises(ConfigError) as info:
        line = _line(); PipelineCase("1F1B", stages=2, microbatches=4, device_options=options)  # noqa: E702
    assert str(info.value) == f"{HERE}:{line}: case '1F1B p=2 m=4': device_options: {message}"


def test_good_device_option_values_pass():
    cuda = {"devices": (0, 1), "device_map": [1, 0], "l2_flush": False, "nvtx": None, "stall_timeout_s": 2,
            "kernels": Path("k.cubin"), "nvcc_options": ["-O3", "-lineinfo"]}
    case = PipelineCase("1F1B", stages=2, microbatches=4, device_options={"cpu": {"stall_timeout_s": 0.5}, "cuda": cuda})
    assert case.device_options["cuda"] == cuda


def test_device_options_that_are_not_a_mapping():
    with pytest.raises(ConfigError) as info:
        line = _line(); PipelineCase("1F1B", stages=2, microbatches=4, device_options=["cpu"])  # type: ignore[arg-type]  # noqa: E702
    assert str(info.value) == (f"{HERE}:{line}: case '1F1B p=2 m=4': device_options must map a backend name to its options, "
                               "e.g. {'cuda': {'l2_flush': True}}, got ['cpu']")


def test_valid_device_options_are_kept():
    options = {"sim": {}, "cpu": {"stall_timeout_s": 5.0}, "cuda": {"device_map": {0: 0, 1: 0}, "l2_flush": True}}
    assert PipelineCase("1F1B", stages=2, microbatches=4, device_options=options).device_options == options


def test_valid_options_come_from_the_device_constructors():
    assert device_option_names("sim") == ()
    assert device_option_names("cpu") == ("stall_timeout_s",)
    assert device_option_names("cuda") == tuple(CUDA_OPTIONS.split(", "))


def test_cuda_options_are_read_without_pycuda():
    # pycuda made unimportable: reading CudaDevice's signature must not need it.
    code = (
        "import sys\n"
        "sys.modules['pycuda'] = None\n"
        "sys.modules['pycuda.driver'] = None\n"
        "from harness.case import PipelineCase\n"
        "PipelineCase('1F1B', stages=2, microbatches=2, device_options={'cuda': {'l2_flush': True}})\n"
        "try:\n"
        "    PipelineCase('1F1B', stages=2, microbatches=2, device_options={'cuda': {'frob': 1}}, declared_at='x.py:1')\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
        "try:\n"
        "    PipelineCase('1F1B', stages=2, microbatches=2, device_options={'cuda': {'stall_timeout_s': 'soon'}}, declared_at='x.py:2')\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out.splitlines() == [
        f"ConfigError x.py:1: case '1F1B p=2 m=2': device_options: the cuda backend has no device option 'frob' (valid: {CUDA_OPTIONS})",
        f"ConfigError x.py:2: case '1F1B p=2 m=2': device_options: the cuda backend's stall_timeout_s must be {SECONDS}, got 'soon'",
    ]


def test_create_device_and_run_case_check_options_too():
    with pytest.raises(ConfigError, match=r"^the cpu backend has no device option 'frob' \(valid: stall_timeout_s\)$"):
        create_device("cpu", "timed", frob=1)
    with pytest.raises(ConfigError, match=r"^the sim backend has no device option 'frob' \(it takes none\)$"):
        create_device("sim", None, frob=1)
    case = PipelineCase("1F1B", stages=2, microbatches=2)
    with pytest.raises(ConfigError, match=r"^the sim backend has no device option 'stall_timeout_s' \(it takes none\)$"):
        run_case(case, "sim", device_options={"stall_timeout_s": 1})
    with pytest.raises(ConfigError) as info:
        create_device("cpu", "timed", stall_timeout_s="soon")
    assert str(info.value) == f"the cpu backend's stall_timeout_s must be {SECONDS}, got 'soon'"


@pytest.mark.parametrize("workload", ["gpu", "", "TIMED!"])
def test_unknown_workload_fails_when_the_case_is_built(workload):
    with pytest.raises(ConfigError) as info:
        line = _line(); PipelineCase("1F1B", stages=2, microbatches=4, workload=workload)  # noqa: E702
    assert str(info.value) == f"{HERE}:{line}: case '1F1B p=2 m=4': unknown workload {workload!r}; {WORKLOAD_LIST}"


def test_create_device_gives_the_same_workload_message():
    for backend in ("sim", "cpu"):
        with pytest.raises(ConfigError) as info:
            create_device(backend, "gpu")
        assert str(info.value) == f"unknown workload 'gpu'; {WORKLOAD_LIST}"


@pytest.mark.parametrize(("workload", "cpu_workload"), [
    (None, "sleep"), ("timed", "sleep"), ("Timed", "sleep"), ("compute", "matmul"),
    ("sleep", "sleep"), ("matmul", "matmul"), ("spin", "sleep"), ("gemm", "matmul"),
])
def test_every_documented_workload_runs_and_maps_to_the_cpu_one(workload, cpu_workload):
    from harness.model.transformer import TransformerCost

    tiny = TransformerCost(hidden_size=64, seq_len=16, micro_batch_size=1, num_layers=2, tflops=1.0)  # FLOPs for GEMMs
    cost = tiny if cpu_workload == "matmul" else FixedCost.ms(F=0.2, B=0.4)
    case = PipelineCase("1F1B", stages=2, microbatches=2, cost=cost, workload=workload)
    result = run_case(case, "cpu", steps=range(0, 1))
    assert result.records.device["workload"] == cpu_workload
    assert run_case(case, "sim", steps=range(0, 1)).records.device["workload"] == "virtual"


@pytest.mark.parametrize("workload", ["compute", "matmul"])
def test_the_compute_workload_needs_a_cost_model_with_flops(workload):
    # FixedCost gives durations only: the jobs would sleep while the run said it multiplied matrices.
    case = PipelineCase("1F1B", stages=2, microbatches=2, cost=FixedCost.ms(F=1, B=2), workload=workload)
    with pytest.raises(ConfigError, match=r"^test_case_options\.py:\d+: case '1F1B p=2 m=2': the compute workload runs each "
                                          r"job's FLOPs as real matrix products, but the cost model \(FixedCost\) gives no FLOPs, "
                                          r"only durations; use TransformerCost for compute cases, or workload 'timed'"):
        run_case(case, "cpu", steps=range(0, 1))
    assert run_case(case, "sim", steps=range(0, 1)).records.device["workload"] == "virtual"  # sim runs no work either way


def test_workload_lists_match_the_backends():
    from harness.run.device import cpu, cuda

    assert WORKLOAD_NAMES == ("timed", "compute", *cpu.WORKLOADS, *cuda.WORKLOADS)


CASES = """
from harness.case import PipelineCase

def test_frob(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=2, device_options={"cpu": {"frob": 1}, "sim": {"frob": 1}}))

def test_gpu(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=2, workload="gpu"))

def test_soon(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=2, device_options={"cpu": {"stall_timeout_s": "soon"}}))
"""


@pytest.mark.parametrize("backend", ["sim", "cpu"])
def test_pytest_reports_bad_options_as_the_case_line_on_every_backend(pytester, backend):
    pytester.makepyfile(test_cases=CASES)
    result = pytester.runpytest(f"--backend={backend}", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines([
        "*_ test_frob _*",
        "ConfigError: test_cases.py:4: case '1F1B p=2 m=2': device_options: the cpu backend has no device option 'frob' "
        "(valid: stall_timeout_s); the sim backend has no device option 'frob' (it takes none)",
        "*_ test_gpu _*",
        f"ConfigError: test_cases.py:7: case '1F1B p=2 m=2': unknown workload 'gpu'; {WORKLOAD_LIST}",
        "*_ test_soon _*",  # on sim too, not only where the cpu device would add "soon" to a number
        f"ConfigError: test_cases.py:10: case '1F1B p=2 m=2': device_options: the cpu backend's stall_timeout_s must be {SECONDS}, got 'soon'",
    ])
    out = result.stdout.str()
    assert "Traceback" not in out and "TypeError" not in out and "harness/" not in out
