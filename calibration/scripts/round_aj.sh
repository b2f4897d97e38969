#!/bin/bash
# Round aj on one H200: the H200 half of rounds ah and ai, which ran on an H100 only (no H200 was lent then).
# In this order (the held-out rows first, should the call be cut short):
#   1. round ai's rows (SmolLM2-1.7B, Llama-3.2-3B, held out) timed;
#   2. round ag's rows (qwen3-0.6b, llama3-8b; ranks 0/16/64) timed;
#   3. round_k --set lora: the LoRA adapter's GEMMs in isolation (256 shapes), for h200's GEMM grid
#      (calibration/make_profiles reads calibration/measured/h200-round-ah/lora when present);
#   4. both row sets' kernels counted (separate profiled processes).
# launchsim's h200 figures for 1 and 2 were committed before this call (round-ag/predicted_h200.json at 2b9b4e5,
# round-ai/predicted_h200.json at 00a65ac), made without the grid of step 3.
# From the repository root, with $OUT set (the device sets it): bash calibration/scripts/round_aj.sh
# The device returns at most 8 files from $OUT: the steps write under a work folder, bundled into $OUT/aj.tgz every
# 20 s and at the end (a call cut short keeps the last bundle); gpu.txt and progress.txt sit beside it. Each step is
# bounded by `timeout` as well as its own --deadline (--job counts reads none).
# Unpacking: aj.tgz's lora/ goes to calibration/measured/h200-round-ah/lora (where make_profiles' ROUND_AH reads the
# h200 grid), the rest to calibration/measured/h200-round-aj/.
set -u
OUT=${OUT:-/tmp/round-aj-out}
W=${AJ_WORK:-/tmp/round-aj-work}
mkdir -p "$OUT" "$W"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
grep -q H200 "$OUT/gpu.txt" || { echo "not an H200: stopping"; exit 3; }
cp "$OUT/gpu.txt" "$W/gpu.txt"
bundle() { tar -czf "$OUT/aj.tgz.part" -C "$W" . && mv -f "$OUT/aj.tgz.part" "$OUT/aj.tgz"; }
( while sleep 20; do bundle; done ) &
BUNDLER=$!
trap 'kill $BUNDLER 2>/dev/null; bundle' EXIT
export PYTHONUNBUFFERED=1
t0=$(date +%s)
timeout 150 python3 -m calibration.scripts.round_ag --job time --rows unseen --out "$W/ai" --deadline 120 > "$W/ai_time.log" 2>&1
echo "ai time done $(( $(date +%s) - t0 )) s"
timeout 200 python3 -m calibration.scripts.round_ag --job time --rows ag --out "$W/ag" --deadline 170 > "$W/ag_time.log" 2>&1
echo "ag time done $(( $(date +%s) - t0 )) s"
timeout 180 python3 -m calibration.scripts.round_k --set lora --out "$W/lora" --deadline 150 > "$W/lora.log" 2>&1
echo "lora done $(( $(date +%s) - t0 )) s"
timeout 60 python3 -m calibration.scripts.round_ag --job counts --rows unseen --out "$W/ai" --deadline 60 > "$W/ai_counts.log" 2>&1
timeout 60 python3 -m calibration.scripts.round_ag --job counts --rows ag --out "$W/ag" --deadline 60 > "$W/ag_counts.log" 2>&1
echo "all done $(( $(date +%s) - t0 )) s" | tee "$OUT/progress.txt"
tail -n 3 "$W"/*.log
