#!/bin/bash
# experiments/address_probe.py over the band matmuls that miss 5 % (issue 5) and a control: each shape allocated
# afresh ten times (pads of 0-130 MiB), two launches each, dram__bytes_read.sum per launch.
#   source .gpu/setup.sh && OUT=$OUT bash experiments/address_sweep.sh
# SPECS overrides the groups ("case:params:matmul shapes:sizes n" each), e.g. the read stream at 48-54 MiB:
#   SPECS="probe.l2_read:passes=4::12582912 13107200 13631488 14155776"
# ALLOCS: allocations per shape (default 10); FOLDER: the folder under $OUT (default address); METRICS: ncu's
# metrics, comma-separated (default dram__bytes_read.sum, the one perfmodel.allocation reads). Recorded as
# reports/data/h200/checks/<FOLDER>/<utc in card.csv>/ with its ncu-*.csv gzipped (gzip -9; read as they are).
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}/${FOLDER:-address}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm --format=csv > "$OUT/card.csv"
echo "commit ${PERFMODEL_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)} utc $(date -u +%Y%m%dT%H%M%SZ)" >> "$OUT/card.csv"
DEFAULT=("matmul.tiled:tile=32:3072,3072,3072 2048,4088,2048 2048,4096,2048 2048,3584,2048 2048,5112,2048 2048,5120,2048:"
         "matmul.tiled:tile=16:2048,5120,2048 2048,5112,2048 2048,4088,2048 1536,6144,1536 2560,5376,1536 2048,3072,2048 1536,4608,2560 3072,4608,1792:"
         "matmul.coarsened:tile=32,coarse=2:3072,4608,1792 2048,5120,2048:"
         "matmul.coarsened:tile=32,coarse=8:2048,3072,2048 3072,4608,1792:")
if [ -n "${SPECS:-}" ]; then mapfile -t GROUPS_ < <(printf '%s\n' "$SPECS" | tr ';' '\n'); else GROUPS_=("${DEFAULT[@]}"); fi
i=0
for spec in "${GROUPS_[@]}"; do
  IFS=: read -r case params shapes sizes <<< "$spec"
  i=$((i + 1))
  entry=$(python3 -c "import sys; from perfmodel.suite.registry import get; c = get(sys.argv[1]); \
p = dict(kv.split('=') for kv in sys.argv[2].split(',') if kv); print(c.entry(c.bind(**{k: int(v) for k, v in p.items()})))" \
      "$case" "$params")
  # shellcheck disable=SC2086
  ncu --clock-control none --metrics "${METRICS:-dram__bytes_read.sum}" --csv --page raw --print-units base -k "regex:^${entry}$" \
      --log-file "$OUT/ncu-$i.csv" python3 experiments/address_probe.py --out "$OUT" --case "$case" --params "$params" \
      --allocations "${ALLOCS:-10}" ${shapes:+--shapes $shapes} ${sizes:+--sizes $sizes} > "$OUT/log-$i.txt" 2>&1 || echo "$case $params failed: see log-$i.txt"
  tail -n 1 "$OUT/log-$i.txt"
done
