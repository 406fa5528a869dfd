#!/usr/bin/env bash
# Build a PyCUDA wheel (and collect everything else the GPU check needs) on a
# machine WITHOUT a GPU or NVIDIA driver, for a GPU machine WITHOUT network.
#
#   scripts/build_pycuda_wheel.sh WHEELDIR            # e.g. /tmp/wheels
#
# Environment:
#   PYTHON      interpreter of the *target* machine's version (default python3.12)
#   CUDA_ROOT   CUDA toolkit (default /usr/local/cuda); needs cuda.h and nvcc
#   PYCUDA      requirement to build (default "pycuda==2026.1")
#   NO_DEPS=1   only build PyCUDA (skip downloading the pure-Python wheels)
#
# Recipe (PyCUDA's ./configure.py build, https://documen.tician.de/pycuda/install.html,
# with the stub-driver trick of the CUDA toolkit's own lib64/stubs/libcuda.so):
# link against a stub libcuda.so with SONAME libcuda.so.1, and keep the link
# with -Wl,--no-as-needed so the real driver is found at import time.
# Takes about 3 minutes on 2 cores. Writes nothing into the repository.
set -euo pipefail

WHEELDIR=${1:?usage: $0 WHEELDIR}
PYTHON=${PYTHON:-python3.12}
CUDA_ROOT=${CUDA_ROOT:-/usr/local/cuda}
PYCUDA=${PYCUDA:-pycuda==2026.1}
HERE=$(cd "$(dirname "$0")/.." && pwd)

mkdir -p "$WHEELDIR"
WHEELDIR=$(cd "$WHEELDIR" && pwd)
WORK=$(mktemp -d /tmp/pycuda-build.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

test -f "$CUDA_ROOT/include/cuda.h" || { echo "no $CUDA_ROOT/include/cuda.h: set CUDA_ROOT" >&2; exit 1; }
PYVER=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
echo "building $PYCUDA for CPython $PYVER with $CUDA_ROOT into $WHEELDIR"

# 1. A stub driver library, so that the link succeeds without a driver.
mkdir -p "$WORK/stub"
echo "" > "$WORK/stub/stub.c"
gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$WORK/stub/libcuda.so" "$WORK/stub/stub.c"

# 2. The sdist, unpacked; configure; force the stub into the link.
"$PYTHON" -m pip download --no-deps --no-binary :all: --no-build-isolation -d "$WORK/sdist" "$PYCUDA"
tar -xzf "$WORK"/sdist/pycuda-*.tar.gz -C "$WORK"
SRC=$(echo "$WORK"/pycuda-*/)
(
  cd "$SRC"
  "$PYTHON" configure.py --cuda-root="$CUDA_ROOT" --no-cuda-enable-curand --cudadrv-lib-dir="$WORK/stub"
  "$PYTHON" - "$WORK/stub" <<'PY'
import re, sys
stub = sys.argv[1]
text = open("siteconf.py").read()
line = f"LDFLAGS = ['-Wl,--no-as-needed', '-L{stub}', '-lcuda']"
text = re.sub(r"^LDFLAGS\s*=.*$", line, text, flags=re.M) if re.search(r"^LDFLAGS\s*=", text, re.M) else text + "\n" + line + "\n"
open("siteconf.py", "w").write(text)
PY
  grep -n '^LDFLAGS' siteconf.py
  # 3. The wheel.
  "$PYTHON" -m pip wheel --no-deps -w "$WHEELDIR" .
)

# Check: the extension must name libcuda.so.1 as a needed library.
WHL=$(ls -t "$WHEELDIR"/pycuda-*.whl | head -1)
mkdir -p "$WORK/check" && (cd "$WORK/check" && "$PYTHON" -m zipfile -e "$WHL" .)
SO=$(ls "$WORK"/check/pycuda/_driver*.so | head -1)
if readelf -d "$SO" | grep -q 'NEEDED.*libcuda.so.1'; then
  echo "ok: $(basename "$SO") needs libcuda.so.1"
else
  echo "error: $(basename "$SO") does not link libcuda.so.1 (the stub was dropped by the linker)" >&2
  exit 1
fi

# 4. Pure-Python dependencies of PyCUDA and of the harness + its tests, as wheels for the target Python.
if [ "${NO_DEPS:-0}" != 1 ]; then
  "$PYTHON" -m pip download --only-binary :all: --python-version "$PYVER" -d "$WHEELDIR" \
    pytools platformdirs siphash24 typing_extensions mako markupsafe numpy filelock threadpoolctl \
    "pytest>=7.4" "pytest-benchmark>=4.0" "pytest-timeout>=2.2" "jinja2>=3.1" "hypothesis>=6.90" \
    setuptools wheel nvtx || echo "warning: some dependency wheels could not be downloaded" >&2
fi

# 5. The kernels, prebuilt, for GPU machines without nvcc (HARNESS_CUDA_KERNELS).
if [ -x "$CUDA_ROOT/bin/nvcc" ]; then
  "$CUDA_ROOT/bin/nvcc" -fatbin -O3 \
    -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
    -o "$WHEELDIR/harness_kernels.fatbin" "$HERE/harness/run/device/kernels.cu"
  echo "ok: $WHEELDIR/harness_kernels.fatbin"
fi
ls -l "$WHEELDIR"
