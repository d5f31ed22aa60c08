#!/bin/bash
# Everything one device call does, in order of value; each phase writes under $OUT as it goes.
#   source .gpu/setup.sh && bash experiments/gpu_session.sh
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$OUT/log.txt"
python3 experiments/measure.py --plan "${PLAN:-experiments/plans/h200.toml}" --out "$OUT" --budget-s "${BUDGET_S:-420}" 2>&1 | tee -a "$OUT/log.txt"
# disassembly of every kernel source, for the access descriptions (vector widths, LDS/STS counts)
for f in kernels/*.cu; do
  nvcc -arch=sm_90 -cubin -O3 -Ikernels -o /tmp/$(basename $f .cu).cubin $f && cuobjdump -sass /tmp/$(basename $f .cu).cubin
done > /tmp/sass.txt 2>&1; gzip -c /tmp/sass.txt > "$OUT/sass.txt.gz"
