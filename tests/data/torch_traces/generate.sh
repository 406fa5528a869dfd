#!/bin/sh
# Regenerate the test traces (needs torch; CPU, gloo). Run from this folder:
#   PY=/path/to/venv/bin ./generate.sh
# Small model (dim 64, 2 layers per stage, micro-batch 4x64) so every folder stays well under 2 MB.
set -e
PY=${PY:-/work/torchvenv/bin}
run() {  # name nproc m [extra]
  name=$1; n=$2; m=$3; shift 3
  rm -rf "$name"
  OMP_NUM_THREADS=1 "$PY/torchrun" --standalone --nproc-per-node="$n" make_traces.py \
     --schedule "${name%%_*}" -m "$m" --dim 64 --mb-size 4 --gzip --out "$name" "$@"
}
run ScheduleInterleaved1F1B_2rank_m4 2 4
run ScheduleGPipe_2rank_m4 2 4
run ScheduleZBVZeroBubble_2rank_m4 2 4
run ScheduleDualPipeV_2rank_m4 2 4
run ScheduleInterleavedZeroBubble_2rank_m4 2 4
run Schedule1F1B_2rank_m4 2 4
run Runtime1F1B_4rank_m8 4 8
