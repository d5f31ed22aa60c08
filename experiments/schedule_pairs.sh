#!/bin/bash
# Each launch's block schedule beside its own DRAM reads: experiments/placement.py run under ncu, so every
# recorded placement (SM, start, end of each block) pairs with the dram__bytes_read.sum of the same launch.
# Do band matmuls read more or less from DRAM on one card than another because their blocks ran in another
# order? perfmodel.l2replay replays each launch's own schedule against its own count.
#   source .gpu/setup.sh && OUT=$OUT bash experiments/schedule_pairs.sh
set -u
export PYTHONUNBUFFERED=1
# SPECS ("case:M,N,K ..." separated by ";") and FOLDER pick other shapes and another folder under $OUT.
DEFAULT="matmul.tiled32:3072,3072,3072 2048,4088,2048 2048,4096,2048 2048,3584,2048 2048,5112,2048;\
matmul.coarsened2:3072,4608,1792 2048,5120,2048;matmul.coarsened8:2048,3072,2048 3072,4608,1792"
OUT=${OUT:-/tmp/out}/${FOLDER:-schedule_pairs}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,uuid,serial,pci.bus_id,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/card.csv"
echo "commit ${PERFMODEL_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)} utc $(date -u +%Y%m%dT%H%M%SZ)" >> "$OUT/card.csv"
IFS=';' read -r -a specs <<< "${SPECS:-$DEFAULT}"
for spec in "${specs[@]}"; do
  case=${spec%%:*}
  dir="$OUT/${case#matmul.}"
  mkdir -p "$dir"
  # shellcheck disable=SC2086
  ncu --clock-control none --metrics dram__bytes_read.sum --csv --page raw --print-units base -k regex:_placed \
      --log-file "$dir/ncu.csv" python3 experiments/placement.py --out "$dir" --case "$case" --shapes ${spec#*:} \
      > "$dir/log.txt" 2>&1 || echo "$case failed: see $dir/log.txt"
  tail -n 3 "$dir/log.txt"
done
