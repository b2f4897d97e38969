#!/bin/bash
# Round g on one H200 (calibration/scripts/round_g.py says what each job does). From the repository root:
#   bash calibration/scripts/round_g.sh quick              # everything once, 2 layers / batch 1 (~145 s)
#   bash calibration/scripts/round_g.sh full eager,counts_gemma     # call 2
#   bash calibration/scripts/round_g.sh full inplace,trace_verify   # call 3
# Results: $OUT/round_g.tgz (the folder packed after each job) and the summary printed last.
set -u
mode=${1:-quick}; only=${2:-}
OUT=${OUT:-/tmp/round-g-out}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv,noheader || true
if [ "$mode" = quick ]; then
  PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_g --out /tmp/rg/quick --quick --deadline 140 \
    --bundle "$OUT/round_g_quick.tgz"
else
  PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_g --out /tmp/rg/full --deadline "${DEADLINE:-560}" \
    ${only:+--only "$only"} --bundle "$OUT/round_g_${only//,/_}.tgz"
fi
