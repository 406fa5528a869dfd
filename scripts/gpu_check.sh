#!/usr/bin/env bash
# All GPU checks of the cuda backend in one go, on a fresh machine with an
# NVIDIA GPU and no network (issue 4). Budget: under 8 minutes.
#
#   scripts/gpu_check.sh WHEELDIR
#
# WHEELDIR holds a PyCUDA wheel or sdist and the wheels the harness needs (see
# scripts/build_pycuda_wheel.sh, which also puts harness_kernels.fatbin there).
# Steps: install PyCUDA (and, offline, the harness) from WHEELDIR; run the
# cuda-marked tests; run `pytest cases/ --profile-jobs --backend=cuda`; print
# the figures table (benchmarks/bench_cuda.py); then the torch backend on NCCL
# (PyTorch's own pipelining runtime, docs/torch.md) for 1F1B p=2 m=8 and ZB-V
# p=2 m=4 with its figures (benchmarks/torch_figures.py), where torch with CUDA
# is installed or in WHEELDIR and the machine has 2 GPUs (one per rank: NCCL
# refuses two ranks on one GPU). Exit status: the first failure.
# Writes its outputs under ${OUT:-/tmp/gpu_check}.
set -uo pipefail

WHEELDIR=${1:?usage: $0 WHEELDIR}
PYTHON=${PYTHON:-python3}
RESULTS=${OUT:-/tmp/gpu_check}
cd "$(dirname "$0")/.."
mkdir -p "$RESULTS"
T0=$(date +%s)
STATUS=0
step() { echo; echo "== [$(( $(date +%s) - T0 ))s] $*"; }
fail() { echo "FAILED: $*"; [ "$STATUS" -ne 0 ] || STATUS=1; }

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "nvidia-smi not available"
"$PYTHON" --version

step "install PyCUDA from $WHEELDIR (no network)"
PIP="$PYTHON -m pip install --no-index --find-links $WHEELDIR"
$PIP pycuda || fail "pip install pycuda"
$PIP nvtx >/dev/null 2>&1 && echo "nvtx installed" || echo "nvtx not in $WHEELDIR: no NVTX ranges"
for dep in numpy filelock threadpoolctl pytest pytest-benchmark pytest-timeout jinja2 hypothesis; do
  "$PYTHON" -c "import ${dep//-/_}" 2>/dev/null || $PIP "$dep" >/dev/null 2>&1 \
    || echo "warning: $dep is not installed and not in $WHEELDIR"
done

step "install the harness (editable, no dependencies, no build isolation)"
"$PYTHON" -c "import setuptools, wheel" 2>/dev/null || $PIP setuptools wheel >/dev/null 2>&1 || true
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if $PIP --no-deps --no-build-isolation -e . >"$RESULTS/pip-harness.log" 2>&1; then
  PLUGIN=""
else
  echo "editable install failed (see $RESULTS/pip-harness.log): using PYTHONPATH and -p harness.pytest.plugin"
  PLUGIN="-p harness.pytest.plugin"
fi

step "probe"
"$PYTHON" -c "from harness.run.device.cuda import probe; ok, why = probe(); print(why); raise SystemExit(0 if ok else 1)" \
  || { fail "no usable GPU"; exit "$STATUS"; }
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  if [ -f "$WHEELDIR/harness_kernels.fatbin" ]; then
    export HARNESS_CUDA_KERNELS="$WHEELDIR/harness_kernels.fatbin"
    echo "no nvcc: using prebuilt kernels $HARNESS_CUDA_KERNELS"
  else
    echo "no nvcc and no $WHEELDIR/harness_kernels.fatbin: the kernels cannot be loaded"
  fi
fi

step "cuda tests"
timeout 240 "$PYTHON" -m pytest tests/test_cuda_backend.py tests/test_cuda_kernels.py $PLUGIN \
  -p no:cacheprovider -q -rs --junitxml="$RESULTS/cuda-tests.xml" || fail "cuda tests"

step "pytest cases/ --profile-jobs --backend=cuda"
timeout 180 "$PYTHON" -m pytest cases/ --profile-jobs --backend=cuda --report-dir="$RESULTS/reports" $PLUGIN \
  -p no:cacheprovider -q || fail "cases on cuda"

step "figures"
timeout 120 "$PYTHON" benchmarks/bench_cuda.py --runs 100 --json "$RESULTS/figures.json" | tee "$RESULTS/figures.txt" \
  || fail "figures"

step "torch backend on NCCL: 1F1B p=2 m=8, ZB-V p=2 m=4 (benchmarks/torch_figures.py --device cuda)"
"$PYTHON" -c "import torch" 2>/dev/null || $PIP torch >/dev/null 2>&1 || echo "torch is not installed and not in $WHEELDIR"
if "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() and torch.cuda.device_count() >= 2 else 1)" 2>/dev/null; then
  timeout 300 "$PYTHON" benchmarks/torch_figures.py --device cuda --only beside --steps 8 --out "$RESULTS/torch-nccl.json" \
    | tee "$RESULTS/torch-nccl.txt" || fail "torch backend on NCCL"
else
  echo "skipped: needs torch with CUDA and 2 GPUs (one pipeline rank per GPU; NCCL refuses two ranks on one GPU)"
fi

step "done in $(( $(date +%s) - T0 ))s, status $STATUS; outputs in $RESULTS"
exit "$STATUS"
