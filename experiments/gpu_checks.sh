#!/bin/bash
# The live test suite and compute-sanitizer (memcheck, racecheck, synccheck) over one small ragged
# size per kernel variant, in one device call. Logs go to $OUT.
#   source .gpu/setup.sh && bash experiments/gpu_checks.sh
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider 2>&1 | tail -15 | tee "$OUT/gpu_tests.log"
for tool in memcheck racecheck synccheck; do
  rm -rf "/tmp/san-$tool"  # a fresh run: the recorder would resume (skip) cases found there
  # --report-api-errors no: cuda-python probes driver entry points (cuGetProcAddress), which memcheck
  # would report as API errors; kernel memory errors are still reported.
  timeout "${SAN_TIMEOUT:-170}" compute-sanitizer --tool "$tool" --error-exitcode 9 --print-limit 20 \
    --report-api-errors no \
    python3 experiments/measure.py --plan experiments/plans/sanitize.toml --out "/tmp/san-$tool" --check-only \
    > "$OUT/sanitize-$tool.log" 2>&1
  echo "$tool: exit $? ($(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/sanitize-$tool.log") clean summaries, $(grep -iE '(invalid|hazard|race|barrier).*(detected|error)' "$OUT/sanitize-$tool.log" | grep -vc 'SUMMARY') findings)" | tee -a "$OUT/sanitize-summary.log"
  tail -3 "$OUT/sanitize-$tool.log"
done
