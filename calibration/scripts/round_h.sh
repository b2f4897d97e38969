#!/bin/bash
# Round h on one H200 (calibration/scripts/round_h.py says what each job does). From the repository root:
#   bash calibration/scripts/round_h.sh quick     # 2 layers, batch 1, both models (~60 s)
#   bash calibration/scripts/round_h.sh full      # the whole round inside DEADLINE (default 540 s)
# Results: $OUT/round_h_{quick,full}.tgz (the folder packed after each job) and the summary printed last.
set -u
mode=${1:-quick}
OUT=${OUT:-/tmp/round-h-out}
here=$(dirname "$0")
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv,noheader || true
if [ "$mode" = quick ]; then
  PYTHONUNBUFFERED=1 python3 "$here/round_h.py" --out /tmp/rh/quick --quick --deadline 100 \
    --bundle "$OUT/round_h_quick.tgz"
else
  PYTHONUNBUFFERED=1 python3 "$here/round_h.py" --out /tmp/rh/full --deadline "${DEADLINE:-540}" \
    --bundle "$OUT/round_h_full.tgz"
fi
